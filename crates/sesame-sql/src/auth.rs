//! Authentication and transport: SCRAM-SHA-256 against one password
//! (from a file only its owner can read, or `SESAME_SQL_PASSWORD`), TLS
//! from a PEM certificate and key, and the rule that an address off
//! loopback needs TLS.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use pgwire::api::auth::sasl::scram::gen_salted_password;
use pgwire::api::auth::{AuthSource, LoginInfo, Password};
use pgwire::error::PgWireResult;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// SCRAM iterations.
pub(crate) const ITERATIONS: usize = 4096;

/// Reads the password from `file` (refused when its group or others may
/// read it) or from `SESAME_SQL_PASSWORD`.
pub fn load_password(file: Option<&Path>) -> Result<String, String> {
    if let Some(path) = file {
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode();
            if mode & 0o077 != 0 {
                return Err(format!(
                    "{}: other users can read it (mode {:o}); run chmod 600 {}",
                    path.display(),
                    mode & 0o777,
                    path.display()
                ));
            }
        }
        let _ = meta;
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let pass = text.trim_end_matches(['\n', '\r']).to_owned();
        if pass.is_empty() {
            return Err(format!("{}: the password file is empty", path.display()));
        }
        return Ok(pass);
    }
    match std::env::var("SESAME_SQL_PASSWORD") {
        Ok(p) if !p.is_empty() => Ok(p),
        _ => {
            Err("no password: give --password-file F (mode 600) or set SESAME_SQL_PASSWORD".into())
        }
    }
}

/// The password's salted form, computed once.
#[derive(Debug)]
pub(crate) struct Secret {
    salt: Vec<u8>,
    salted: Vec<u8>,
}

impl Secret {
    pub(crate) fn new(password: &str) -> Self {
        let mut salt = vec![0u8; 16];
        let seed = format!("{:?}{}", std::time::SystemTime::now(), std::process::id());
        let digest = <sha2::Sha256 as sha2::Digest>::digest(seed.as_bytes());
        salt.copy_from_slice(&digest[..16]);
        let salted = gen_salted_password(password, &salt, ITERATIONS);
        Secret { salt, salted }
    }
}

#[async_trait]
impl AuthSource for Secret {
    async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> {
        Ok(Password::new(Some(self.salt.clone()), self.salted.clone()))
    }
}

/// A TLS acceptor from a PEM certificate chain and private key, and the
/// chain's PEM (for SCRAM's channel binding).
pub(crate) fn tls(cert: &Path, key: &Path) -> Result<(TlsAcceptor, Vec<u8>), String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("{}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in it", cert.display()));
    }
    let pem = std::fs::read(cert).map_err(|e| format!("{}: {e}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: {e}", key.display()))?;
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("TLS: {e}"))?;
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok((TlsAcceptor::from(Arc::new(config)), pem))
}

/// Refuses an address off loopback without TLS.
pub fn check_listen(addr: &SocketAddr, tls: bool) -> Result<(), String> {
    if !addr.ip().is_loopback() && !tls {
        return Err(format!(
            "{addr} is not a loopback address: give --tls-cert and --tls-key to listen there \
             (passwords and rows would cross the network in the clear)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_off_loopback_needs_tls() {
        let off: SocketAddr = "0.0.0.0:5433".parse().expect("addr");
        let e = check_listen(&off, false).expect_err("refused");
        assert!(e.contains("--tls-cert"), "{e}");
        assert!(check_listen(&off, true).is_ok());
        assert!(check_listen(&"127.0.0.1:5433".parse().expect("addr"), false).is_ok());
        assert!(check_listen(&"[::1]:5433".parse().expect("addr"), false).is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn a_password_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("pw");
        std::fs::write(&path, "secret\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let e = load_password(Some(&path)).expect_err("refused");
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(load_password(Some(&path)).as_deref(), Ok("secret"));
    }
}
