//! `sesame serve`, `sesame token new`, `sesame cert`.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use sesame_server::accept::ConnectionLimits;
use sesame_server::{Limits, ServerConfig, ServerError, TlsFiles, Tokens};

use crate::args::{CertArgs, ServeArgs, TokenCommand};
use crate::error::{one_line, CliError};

fn address(flag: &str, text: &str) -> Result<SocketAddr, CliError> {
    text.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| CliError::Usage(format!("{flag} {text:?} is not an address (HOST:PORT)")))
}

/// Refuses a file whose permission bits give other users any of `bits`
/// (ssh's rule for private keys).
pub(crate) fn refuse_open(path: &Path, bits: u32, what: &str) -> Result<(), CliError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(m) = std::fs::metadata(path) {
            let mode = m.permissions().mode() & 0o777;
            if mode & bits != 0 {
                return Err(CliError::Usage(format!(
                    "{what} {} {} other users (mode {mode:03o}): run `chmod 600 {}`",
                    path.display(),
                    if bits & 0o044 != 0 {
                        "can be read by"
                    } else {
                        "can be written by"
                    },
                    path.display()
                )));
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (path, bits, what);
    Ok(())
}

fn read(path: &Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|e| {
        CliError::Other(format!(
            "cannot read {}: {}",
            path.display(),
            if e.kind() == std::io::ErrorKind::NotFound {
                "no such file or directory".to_owned()
            } else {
                one_line(&e.to_string())
            }
        ))
    })
}

fn server_error(e: ServerError) -> CliError {
    match e {
        ServerError::Config(m) => CliError::Usage(m),
        other => CliError::Other(other.to_string()),
    }
}

/// Runs the server until SIGINT or SIGTERM.
pub(crate) fn serve(args: ServeArgs) -> Result<(), CliError> {
    let listen = address("--listen", &args.listen)?;
    let admin = args
        .admin
        .as_deref()
        .map(|a| address("--admin", a))
        .transpose()?;
    let mut config = ServerConfig::new(listen);
    config.insecure_plaintext = args.insecure_plaintext;
    config.admin = admin;
    config.record_view = args.record_view.clone();
    if let Some(path) = &args.admin_token_file {
        refuse_open(path, 0o077, "the admin token file")?;
        let text = String::from_utf8(read(path)?).map_err(|_| {
            CliError::Usage(format!(
                "admin token file {}: not UTF-8 text",
                path.display()
            ))
        })?;
        config.admin_token =
            Some(sesame_server::metrics::AdminToken::new(&text).map_err(|m| {
                CliError::Usage(format!("admin token file {}: {m}", path.display()))
            })?);
    }
    config.max_message_bytes = args.max_message;
    config.request_timeout = Duration::from_secs(args.request_timeout);
    config.connections = ConnectionLimits {
        handshake_timeout: Duration::from_secs(args.handshake_timeout),
        idle_timeout: Duration::from_secs(args.idle_timeout),
        max_connections: args.max_connections,
        max_connections_per_peer: args.max_connections_per_peer,
        auth_timeout: Duration::from_secs(args.auth_timeout),
    };
    config.limits = Limits {
        max_indexes_per_tenant: args.max_indexes,
        max_buffer_bytes: args.max_buffer,
        max_tenant_buffer_bytes: args.max_tenant_buffer,
        ..Limits::default()
    };
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        refuse_open(key, 0o077, "the TLS private key")?;
        config.tls = Some(TlsFiles {
            cert_pem: read(cert)?,
            key_pem: read(key)?,
        });
    }
    let mut one_time = None;
    config.tokens = match &args.tokens {
        Some(path) => {
            // Hashes only, but whoever can write it can add a tenant.
            refuse_open(path, 0o022, "the tokens file")?;
            let text = String::from_utf8(read(path)?).map_err(|_| {
                CliError::Other(format!("tokens file {}: not UTF-8 text", path.display()))
            })?;
            Tokens::parse(&text)
                .map_err(|m| CliError::Other(format!("tokens file {}: {m}", path.display())))?
        }
        None => {
            let token = Tokens::generate(&mut rand_core::OsRng);
            let tokens = Tokens::new()
                .with("default", &token)
                .map_err(CliError::Other)?;
            one_time = Some(token);
            tokens
        }
    };
    // Refuse a bad configuration before the store is opened.
    config.check().map_err(server_error)?;
    if admin.is_some_and(|a| !a.ip().is_loopback()) {
        eprintln!(
            "warning: the admin port (metrics, plain HTTP, token-protected) listens on a \
             non-loopback address"
        );
    }
    let store = sesame_store::open_store(&args.store)
        .map_err(|e| CliError::Other(format!("store {}: {e}", redact(&args.store))))?;
    let tenants = config.tokens.tenants().len();
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Other(format!("cannot start the runtime: {e}")))?;
    let store_name = redact(&args.store);
    runtime
        .block_on(sesame_server::run(
            config,
            store,
            move |bound| {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(
                    out,
                    "listening on {scheme}://{} (store {store_name}, {tenants} tenant{})",
                    bound.addr,
                    if tenants == 1 { "" } else { "s" }
                );
                if let Some(a) = bound.admin {
                    let _ = writeln!(out, "metrics on http://{a}/metrics");
                }
                if let Some(token) = &one_time {
                    let _ = writeln!(out, "token of tenant default (this run only): {token}");
                }
                let _ = out.flush();
                if scheme == "http" {
                    eprintln!(
                        "warning: INSECURE plaintext: no TLS (--insecure-plaintext, loopback only)"
                    );
                }
            },
            sesame_server::serve::shutdown_signal(),
        ))
        .map_err(server_error)
}

/// A store spec without a password.
fn redact(spec: &str) -> String {
    match (spec.find("://"), spec.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &spec[s + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &spec[..s + 3], &spec[at..]),
                None => spec.to_owned(),
            }
        }
        _ => spec.to_owned(),
    }
}

/// `sesame token new TENANT --tokens FILE`.
pub(crate) fn token(cmd: TokenCommand) -> Result<(), CliError> {
    let TokenCommand::New { tenant, tokens } = cmd;
    let token = Tokens::generate(&mut rand_core::OsRng);
    // Checks the tenant name.
    Tokens::new()
        .with(&tenant, &token)
        .map_err(CliError::Usage)?;
    let mut text = match std::fs::read(&tokens) {
        Ok(b) => String::from_utf8(b).map_err(|_| {
            CliError::Other(format!("tokens file {}: not UTF-8 text", tokens.display()))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            "# sesame tokens: TENANT SHA256(TOKEN)\n".to_owned()
        }
        Err(e) => {
            return Err(CliError::Other(format!(
                "cannot read {}: {e}",
                tokens.display()
            )))
        }
    };
    Tokens::parse(&text)
        .map_err(|m| CliError::Other(format!("tokens file {}: {m}", tokens.display())))?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&Tokens::line(&tenant, &token));
    text.push('\n');
    write_private(&tokens, text.as_bytes())?;
    eprintln!(
        "added a token of tenant {tenant} to {} (only its hash is kept; this is the one copy)",
        tokens.display()
    );
    crate::write_stdout(format!("{token}\n").as_bytes())
}

/// Writes a file readable by its owner only.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    let tmp = path.with_extension("tmp-sesame");
    let result = (|| {
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            o.mode(0o600);
        }
        let mut f = o.open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        CliError::Other(format!(
            "cannot write {}: {}",
            path.display(),
            one_line(&e.to_string())
        ))
    })
}

/// `sesame cert DIR`.
pub(crate) fn cert(args: CertArgs) -> Result<(), CliError> {
    let certs = sesame_server::certs::generate(&args.names).map_err(CliError::Other)?;
    std::fs::create_dir_all(&args.out).map_err(|e| {
        CliError::Other(format!(
            "cannot create {}: {}",
            args.out.display(),
            one_line(&e.to_string())
        ))
    })?;
    for name in ["ca.pem", "server.pem", "server.key"] {
        if args.out.join(name).exists() {
            return Err(CliError::Other(format!(
                "{} exists already; choose another directory",
                args.out.join(name).display()
            )));
        }
    }
    write_private(&args.out.join("ca.pem"), certs.ca_pem.as_bytes())?;
    write_private(&args.out.join("server.pem"), certs.cert_pem.as_bytes())?;
    write_private(&args.out.join("server.key"), certs.key_pem.as_bytes())?;
    crate::write_stdout(
        format!(
            "wrote {0}/ca.pem (clients: init --ca), {0}/server.pem and {0}/server.key (serve \
             --tls-cert/--tls-key) for {1}\n",
            args.out.display(),
            args.names.join(", ")
        )
        .as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://me:secret@db/x"),
            "postgres://me:***@db/x"
        );
        assert_eq!(redact("postgres://me@db/x"), "postgres://me@db/x");
        assert_eq!(redact("store.redb"), "store.redb");
    }
}
