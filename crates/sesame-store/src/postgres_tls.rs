//! TLS for the PostgreSQL store: a rustls connector for the `postgres`
//! driver, with the ring provider the server's TLS already uses (no C
//! library).
//!
//! The server's certificate is always verified, against the CA file the
//! store spec names (`sslrootcert=PATH`) or else the public web roots
//! (`webpki-roots`), and against the host name (or IP address) connected
//! to: what libpq calls `verify-full`. SCRAM channel binding is not
//! offered (the driver falls back to plain SCRAM, which still never sends
//! the password).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};
use postgres::Socket;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

use sesame_core::{Error, Result};

/// Makes a TLS connection per PostgreSQL connection.
#[derive(Clone)]
pub(crate) struct RustlsConnect {
    config: Arc<ClientConfig>,
}

impl RustlsConnect {
    /// Trusting the certificates of the PEM file `ca_pem` (a private CA),
    /// or the public web roots when `None`.
    pub(crate) fn new(ca_pem: Option<&[u8]>) -> Result<Self> {
        let mut roots = RootCertStore::empty();
        match ca_pem {
            Some(pem) => {
                let mut any = false;
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert = cert.map_err(|e| {
                        Error::InvalidArgument(format!("sslrootcert is not a PEM certificate: {e}"))
                    })?;
                    roots.add(cert).map_err(|e| {
                        Error::InvalidArgument(format!("sslrootcert holds a bad certificate: {e}"))
                    })?;
                    any = true;
                }
                if !any {
                    return Err(Error::InvalidArgument(
                        "sslrootcert holds no certificate".into(),
                    ));
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::InvalidArgument(format!("TLS configuration: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(RustlsConnect {
            config: Arc::new(config),
        })
    }
}

impl MakeTlsConnect<Socket> for RustlsConnect {
    type Stream = RustlsStream;
    type TlsConnect = RustlsConnectOne;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> io::Result<RustlsConnectOne> {
        let name = ServerName::try_from(domain.to_owned()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{domain:?} is not a host name for TLS: {e}"),
            )
        })?;
        Ok(RustlsConnectOne {
            config: self.config.clone(),
            name,
        })
    }
}

/// One TLS handshake with the server called `name`.
pub(crate) struct RustlsConnectOne {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl TlsConnect<Socket> for RustlsConnectOne {
    type Stream = RustlsStream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream>> + Send>>;

    fn connect(self, stream: Socket) -> Self::Future {
        Box::pin(async move {
            let tls = TlsConnector::from(self.config)
                .connect(self.name, stream)
                .await?;
            Ok(RustlsStream(Box::new(tls)))
        })
    }
}

/// A TLS connection to the PostgreSQL server.
pub(crate) struct RustlsStream(Box<tokio_rustls::client::TlsStream<Socket>>);

impl TlsStream for RustlsStream {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl AsyncRead for RustlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for RustlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}
