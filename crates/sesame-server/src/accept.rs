//! The server's own accept loop, so that connections cannot be held
//! forever by clients that never finish TLS, never send anything, or
//! never present a token:
//!
//! - at most `max_connections` connections are open (handshakes
//!   included), at most `max_connections_per_peer` from one IP address;
//!   over the per-peer limit a new connection is closed at once. When
//!   every place is held, a new connection takes the place of the oldest
//!   connection on which no request has carried a valid token (that one is
//!   closed); only when all hold a valid token is the new one closed
//!   ([`crate::gate`]);
//! - a TLS handshake must finish within `handshake_timeout`, else the
//!   connection is closed;
//! - a connection on which no request has carried a valid token is closed
//!   `auth_timeout` after it was accepted;
//! - a connection on which no request starts or runs for `idle_timeout`
//!   is closed: requests count, not bytes (HTTP/2 pings and settings do
//!   not keep a connection open);
//! - a failed accept (out of file descriptors) is retried after a pause
//!   that doubles up to a second, so it never spins.
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
use tokio::sync::mpsc;
use tokio::time::{Instant, Sleep};
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;
use tonic::transport::server::Connected;

use crate::error::ServerError;
use crate::gate::{ConnState, FrameWatch, Gate, Place};

/// The deadlines and the limits of the accept loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Longest a TLS handshake may take.
    pub handshake_timeout: Duration,
    /// Longest a connection may stay without a request.
    pub idle_timeout: Duration,
    /// Connections open at once; a new one over it takes the place of the
    /// oldest without a valid token, or is closed at once.
    pub max_connections: usize,
    /// Connections open at once from one IP address; more are closed at
    /// once.
    pub max_connections_per_peer: usize,
    /// Longest a connection may stay open before a request on it carries
    /// a valid token.
    pub auth_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            max_connections: 1024,
            max_connections_per_peer: 64,
            auth_timeout: Duration::from_secs(20),
        }
    }
}

/// The longest pause after a failed accept.
const MAX_ACCEPT_PAUSE: Duration = Duration::from_secs(1);

/// Accepts from `listener`, pausing after a failed accept (out of file
/// descriptors and the like: retried at once, it would spin) for 10 ms,
/// doubling up to [`MAX_ACCEPT_PAUSE`] while failures go on.
pub async fn accept_with_backoff(
    listener: &TcpListener,
    pause: &mut Duration,
) -> (TcpStream, std::net::SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(a) => {
                *pause = Duration::ZERO;
                return a;
            }
            Err(_) => {
                *pause = (*pause * 2).clamp(Duration::from_millis(10), MAX_ACCEPT_PAUSE);
                tokio::time::sleep(*pause).await;
            }
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
    let gate = Gate::new(limits.max_connections, limits.max_connections_per_peer);
    tokio::spawn(async move {
        let mut pause = Duration::ZERO;
        loop {
            let (stream, peer) = tokio::select! {
                _ = tx.closed() => return,
                a = accept_with_backoff(&listener, &mut pause) => a,
            };
            let Ok(place) = gate.admit(peer.ip()) else {
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let tx = tx.clone();
            let tls = tls.clone();
            tokio::spawn(async move {
                let state = place.state().clone();
                let evicted = std::future::poll_fn(|cx| {
                    if state.poll_evicted(cx) {
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    }
                });
                let io = match tls {
                    Some(acceptor) => {
                        let handshake =
                            tokio::time::timeout(limits.handshake_timeout, acceptor.accept(stream));
                        tokio::select! {
                            done = handshake => match done {
                                Ok(Ok(s)) => Io::Tls(Box::new(s)),
                                // A failed or slow handshake: closed.
                                _ => return,
                            },
                            // Its place went to a newer connection.
                            () = evicted => return,
                        }
                    }
                    None => Io::Plain(stream),
                };
                let conn = Conn {
                    io,
                    timer: Box::pin(tokio::time::sleep(
                        limits.idle_timeout.min(limits.auth_timeout),
                    )),
                    limits,
                    frames: FrameWatch::default(),
                    place,
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

/// An accepted connection: holds its place under the connection limits
/// and closes itself when idle too long, when no request has carried a
/// valid token in time, or when its place is taken.
pub struct Conn {
    io: Io,
    timer: Pin<Box<Sleep>>,
    limits: ConnectionLimits,
    frames: FrameWatch,
    place: Place,
}

/// What the service learns of a request's connection (in the request's
/// extensions): where it records requests and tokens.
#[derive(Clone, Debug)]
pub struct ConnInfo(pub Arc<ConnState>);

impl Conn {
    /// The error that closes the connection, if its time is up or its
    /// place was taken; else `None`, with `cx` woken at the next deadline.
    fn closing(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        let state = self.place.state().clone();
        if state.poll_evicted(cx) {
            return Some(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the connection's place went to a newer one (no valid token was presented)",
            ));
        }
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return None;
            }
            let now = Instant::now();
            let idle = if state.in_flight() > 0 {
                now + self.limits.idle_timeout
            } else {
                Instant::from_std(state.last_request()) + self.limits.idle_timeout
            };
            let deadline = if state.is_authenticated() {
                idle
            } else {
                idle.min(Instant::from_std(state.accepted()) + self.limits.auth_timeout)
            };
            if deadline <= now {
                let why = if state.is_authenticated() {
                    "the connection was idle too long"
                } else {
                    "no request presented a valid token in time"
                };
                return Some(io::Error::new(io::ErrorKind::TimedOut, why));
            }
            self.timer.as_mut().reset(deadline);
        }
    }
}

impl Connected for Conn {
    type ConnectInfo = ConnInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        ConnInfo(self.place.state().clone())
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(e) = this.closing(cx) {
            return Poll::Ready(Err(e));
        }
        let before = buf.filled().len();
        let r = match &mut this.io {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        };
        if r.is_ready() && this.frames.feed(&buf.filled()[before..]) {
            this.place.state().touch();
        }
        r
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write(cx, data),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, data),
        }
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
