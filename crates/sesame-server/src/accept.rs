//! The server's own accept loop, so that connections cannot be held
//! forever by clients that never finish TLS or never send anything:
//!
//! - at most `max_connections` connections are open (handshakes included);
//!   over it, a new connection is closed at once (the client sees a reset
//!   and may retry), so a flood cannot queue up behind the limit;
//! - a TLS handshake must finish within `handshake_timeout`, else the
//!   connection is closed;
//! - a connection on which nothing is read or written for `idle_timeout`
//!   is closed (a request in flight is bounded by the request timeout).
//!
//! Each handshake runs in a task of its own: a slow client never delays
//! another's.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;
use tonic::transport::server::Connected;

use crate::error::ServerError;

/// The deadlines and the limit of the accept loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Longest a TLS handshake may take.
    pub handshake_timeout: Duration,
    /// Longest a connection may stay without reading or writing.
    pub idle_timeout: Duration,
    /// Connections open at once; more are closed at once.
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            max_connections: 1024,
        }
    }
}

/// A TLS acceptor for a PEM certificate chain and key, offering HTTP/2.
pub fn tls_acceptor(cert_pem: &[u8], key_pem: &[u8]) -> Result<TlsAcceptor, ServerError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ServerError::Tls(format!("the certificate does not parse: {e}")))?;
    if certs.is_empty() {
        return Err(ServerError::Tls(
            "the certificate file holds no certificate".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| ServerError::Tls(format!("the private key does not parse: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ServerError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| ServerError::Tls(format!("the certificate and key do not fit: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Accepts connections on `listener` until the receiver is dropped,
/// sending the ones that finished their handshake.
pub fn spawn_accept_loop(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    limits: ConnectionLimits,
) -> mpsc::Receiver<io::Result<Conn>> {
    let (tx, rx) = mpsc::channel(64);
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    tokio::spawn(async move {
        loop {
            let (stream, _) = tokio::select! {
                _ = tx.closed() => return,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    // Out of file descriptors and the like: wait a little.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let Ok(permit) = permits.clone().try_acquire_owned() else {
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let tx = tx.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                let io = match tls {
                    Some(acceptor) => {
                        match tokio::time::timeout(
                            limits.handshake_timeout,
                            acceptor.accept(stream),
                        )
                        .await
                        {
                            Ok(Ok(s)) => Io::Tls(Box::new(s)),
                            // A failed or slow handshake: closed.
                            _ => return,
                        }
                    }
                    None => Io::Plain(stream),
                };
                let conn = Conn {
                    io,
                    idle: Box::pin(tokio::time::sleep(limits.idle_timeout)),
                    idle_timeout: limits.idle_timeout,
                    _permit: permit,
                };
                let _ = tx.send(Ok(conn)).await;
            });
        }
    });
    rx
}

enum Io {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

/// An accepted connection: holds its place under the connection limit and
/// closes itself when idle too long.
pub struct Conn {
    io: Io,
    idle: Pin<Box<Sleep>>,
    idle_timeout: Duration,
    _permit: OwnedSemaphorePermit,
}

impl Conn {
    fn active(&mut self) {
        self.idle.as_mut().reset(Instant::now() + self.idle_timeout);
    }

    fn idle_error(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        self.idle
            .as_mut()
            .poll(cx)
            .is_ready()
            .then(|| io::Error::new(io::ErrorKind::TimedOut, "the connection was idle too long"))
    }
}

impl Connected for Conn {
    type ConnectInfo = ();
    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = match &mut this.io {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        };
        match r {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    this.active();
                }
                Poll::Ready(r)
            }
            Poll::Pending => match this.idle_error(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = match &mut this.io {
            Io::Plain(s) => Pin::new(s).poll_write(cx, data),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, data),
        };
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.active();
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
