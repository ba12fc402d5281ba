//! A private CA and a server certificate it signs (feature `certs`), for
//! `sesame cert`, tests and the loopback benchmark.
//!
//! The client trusts the CA (`sesame init --server URL --ca ca.pem`); the
//! server presents the certificate and its key (`sesame serve --tls-cert
//! server.pem --tls-key server.key`). Keys are ECDSA P-256, made by `ring`.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

use crate::{ServerConfig, TlsFiles};

/// PEM files of a fresh private CA and a server certificate.
#[derive(Clone)]
pub struct GeneratedCerts {
    /// The CA certificate: what clients trust.
    pub ca_pem: String,
    /// The server's certificate, signed by the CA.
    pub cert_pem: String,
    /// The server's private key (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for GeneratedCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeneratedCerts").finish_non_exhaustive()
    }
}

/// Makes a CA and a server certificate for `names` (DNS names or IP
/// addresses, e.g. `localhost`, `127.0.0.1`).
pub fn generate(names: &[String]) -> Result<GeneratedCerts, String> {
    let err = |e: rcgen::Error| format!("cannot make a certificate: {e}");
    let ca_key = KeyPair::generate().map_err(err)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Sesame private CA");
    let ca_cert = ca_params.self_signed(&ca_key).map_err(err)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate().map_err(err)?;
    let mut params = CertificateParams::new(names.to_vec()).map_err(err)?;
    params.distinguished_name.push(
        DnType::CommonName,
        names.first().map_or("sesame", String::as_str),
    );
    let cert = params.signed_by(&key, &issuer).map_err(err)?;
    Ok(GeneratedCerts {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// Certificates for `localhost` and `127.0.0.1`.
pub fn localhost() -> Result<GeneratedCerts, String> {
    generate(&["localhost".to_owned(), "127.0.0.1".to_owned()])
}

impl GeneratedCerts {
    /// The server's certificate and key, as [`ServerConfig::tls`] takes
    /// them.
    pub fn tls_files(&self) -> TlsFiles {
        TlsFiles {
            cert_pem: self.cert_pem.clone().into_bytes(),
            key_pem: self.key_pem.clone().into_bytes(),
        }
    }
}

/// A server configuration on a free loopback port (`127.0.0.1:0`), over
/// TLS with `certs`, serving each `(tenant, token)` of `tenants`: what
/// tests and the loopback benchmark start a server with. An error names
/// a tenant or token [`crate::Tokens::with`] refuses.
pub fn loopback_config(
    certs: &GeneratedCerts,
    tenants: &[(&str, &str)],
) -> Result<ServerConfig, String> {
    let mut config = ServerConfig::new(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    config.tls = Some(certs.tls_files());
    for (tenant, token) in tenants {
        config.tokens = std::mem::take(&mut config.tokens).with(tenant, token)?;
    }
    Ok(config)
}
