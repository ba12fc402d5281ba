//! Running the server: configuration, TLS, listening, the admin port, and
//! graceful shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sesame_core::Store;
use tokio::sync::oneshot;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Server;

use crate::accept::{spawn_accept_loop, tls_acceptor, ConnectionLimits};

use crate::engine::{Engine, Limits, UploadBudget};
use crate::error::ServerError;
use crate::metrics::{serve_admin, AdminToken, Gauge, Metrics};
use crate::service::{InFlight, SesameService, Shared};
use crate::tokens::Tokens;
use crate::watched::{shutdown_line, Watched};

/// A PEM certificate chain and its private key.
#[derive(Clone)]
pub struct TlsFiles {
    /// The certificate chain, PEM.
    pub cert_pem: Vec<u8>,
    /// The private key, PEM.
    pub key_pem: Vec<u8>,
}

impl std::fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsFiles").finish_non_exhaustive()
    }
}

/// How the server runs.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Address to listen on (port 0: any free port).
    pub listen: SocketAddr,
    /// TLS certificate and key; `None` only with `insecure_plaintext`.
    pub tls: Option<TlsFiles>,
    /// Serve without TLS: allowed only on a loopback address.
    pub insecure_plaintext: bool,
    /// The tenants.
    pub tokens: Tokens,
    /// Address of the admin port (Prometheus metrics), if any.
    pub admin: Option<SocketAddr>,
    /// Bearer token the admin port requires (`Authorization: Bearer
    /// TOKEN`); required when the admin port is not on a loopback
    /// address.
    pub admin_token: Option<AdminToken>,
    /// Limits of requests.
    pub limits: Limits,
    /// Longest a request may run (clients may ask for less); an upload's
    /// longest pause between two messages.
    pub request_timeout: Duration,
    /// Largest gRPC message accepted or sent.
    pub max_message_bytes: usize,
    /// Longest graceful shutdown waits for requests in flight.
    pub shutdown_grace: Duration,
    /// The TLS handshake and idle deadlines, and the connection limit: a
    /// connection that never sends its ClientHello is closed at the
    /// handshake deadline, so a flood of idle connections is shed instead
    /// of held.
    pub connections: ConnectionLimits,
    /// `--record-view`: write the server's view to this new file
    /// (research and debugging only: it holds what an attacker who
    /// controls the server would see; see [`crate::view_log`]).
    pub record_view: Option<std::path::PathBuf>,
}

pub use sesame_net::proto::DEFAULT_MAX_MESSAGE;

impl ServerConfig {
    /// A configuration with the default limits, listening on `listen`,
    /// with no TLS and no tenants yet.
    pub fn new(listen: SocketAddr) -> Self {
        ServerConfig {
            listen,
            tls: None,
            insecure_plaintext: false,
            tokens: Tokens::new(),
            admin: None,
            admin_token: None,
            limits: Limits::default(),
            request_timeout: Duration::from_secs(60),
            max_message_bytes: DEFAULT_MAX_MESSAGE,
            shutdown_grace: Duration::from_secs(30),
            connections: ConnectionLimits::default(),
            record_view: None,
        }
    }

    /// Refuses what must not run: plaintext on a non-loopback address,
    /// neither TLS nor an explicit plaintext choice, no tenant, zero
    /// limits.
    pub fn check(&self) -> Result<(), ServerError> {
        match (&self.tls, self.insecure_plaintext) {
            (Some(_), true) => {
                return Err(ServerError::Config(
                    "give either a TLS certificate and key or --insecure-plaintext, not both"
                        .into(),
                ))
            }
            (None, false) => {
                return Err(ServerError::Config(
                    "no TLS certificate: give --tls-cert FILE --tls-key FILE (or, on a loopback \
                     address only, --insecure-plaintext)"
                        .into(),
                ))
            }
            (None, true) if !self.listen.ip().is_loopback() => {
                return Err(ServerError::Config(format!(
                    "--insecure-plaintext is refused on {}: plaintext is allowed only on a \
                     loopback address (127.0.0.1, ::1)",
                    self.listen
                )))
            }
            _ => {}
        }
        if self.tokens.is_empty() {
            return Err(ServerError::Config(
                "no tenant can connect: the tokens are empty".into(),
            ));
        }
        if let Some(admin) = self.admin {
            if !admin.ip().is_loopback() && self.admin_token.is_none() {
                return Err(ServerError::Config(format!(
                    "the admin port on {admin} is not on a loopback address: protect it with \
                     --admin-token-file FILE (a bearer token), or bind it to 127.0.0.1"
                )));
            }
        }
        if self.max_message_bytes < 1024
            || self.request_timeout.is_zero()
            || self.connections.handshake_timeout.is_zero()
            || self.connections.idle_timeout.is_zero()
            || self.connections.max_connections == 0
            || self.connections.max_connections_per_peer == 0
            || self.connections.auth_timeout.is_zero()
        {
            return Err(ServerError::Config(
                "the message limit must be at least 1024 bytes, the timeouts and the \
                 connection limits above zero"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// Waits for SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Where a started server listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bound {
    /// The gRPC address.
    pub addr: SocketAddr,
    /// The admin (metrics) address.
    pub admin: Option<SocketAddr>,
}

/// Runs the server on the current (multi-threaded) tokio runtime until
/// `stop` resolves, then shuts down gracefully: no new connections or
/// requests, requests in flight finish (up to
/// [`ServerConfig::shutdown_grace`]), and the store is flushed. The last
/// log line says whether store operations failed while serving.
/// `ready` hears the bound addresses once the server listens.
pub async fn run(
    config: ServerConfig,
    store: Arc<dyn Store>,
    ready: impl FnOnce(Bound),
    stop: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    config.check()?;
    let limits = Limits {
        max_message_bytes: config.max_message_bytes,
        ..config.limits
    };
    // Every store call is watched, so that metrics and the shutdown line
    // tell a clean run from one in which the store failed.
    let watched = Arc::new(Watched::new(store));
    let store: Arc<dyn Store> = watched.clone();
    let engine_store = store.clone();
    let view_log = match &config.record_view {
        Some(path) => {
            let log = crate::view_log::ViewLog::create(path).map_err(|e| {
                let why = if e.kind() == std::io::ErrorKind::AlreadyExists {
                    "the file exists; it must not exist yet (a view is never appended to or \
                     replaced)"
                        .to_owned()
                } else {
                    e.to_string()
                };
                ServerError::Config(format!("--record-view {}: {why}", path.display()))
            })?;
            crate::log(&format!(
                "RECORDING THE SERVER'S VIEW to {}: every request, response and store key, \
                 what an attacker would see. For research and debugging only; never in \
                 production",
                path.display()
            ));
            Some(log)
        }
        None => None,
    };
    let engine = tokio::task::spawn_blocking(move || Engine::new(engine_store, limits))
        .await
        .map_err(|e| ServerError::Runtime(e.to_string()))?
        .map_err(|e| ServerError::Store(e.to_string()))?;
    let engine = match view_log {
        Some(log) => engine.with_view_log(log),
        None => engine,
    };
    let in_flight = Arc::new(InFlight::default());
    let metrics = Arc::new(
        Metrics::new(store.clone(), in_flight.clone())
            .with_uploads(engine.uploads())
            .with_store_errors(watched.clone()),
    );
    let shared = Arc::new(Shared {
        engine: Arc::new(engine),
        tokens: config.tokens.clone(),
        metrics: metrics.clone(),
        request_timeout: config.request_timeout,
        max_message_bytes: config.max_message_bytes,
        in_flight: in_flight.clone(),
        shutting_down: AtomicBool::new(false),
    });

    // HTTP/2 pings find peers that went away without closing (a killed
    // client, a dropped network), so their connections do not pile up.
    let mut builder = Server::builder()
        .http2_keepalive_interval(Some(Duration::from_secs(60)))
        .http2_keepalive_timeout(Some(Duration::from_secs(20)));
    let tls = match &config.tls {
        Some(tls) => Some(tls_acceptor(&tls.cert_pem, &tls.key_pem)?),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| ServerError::Bind {
            addr: config.listen.to_string(),
            message: e.to_string(),
        })?;
    let addr = listener.local_addr().map_err(|e| ServerError::Bind {
        addr: config.listen.to_string(),
        message: e.to_string(),
    })?;
    let admin = match config.admin {
        Some(a) => {
            let listener =
                tokio::net::TcpListener::bind(a)
                    .await
                    .map_err(|e| ServerError::Bind {
                        addr: a.to_string(),
                        message: e.to_string(),
                    })?;
            let bound = listener.local_addr().map_err(|e| ServerError::Bind {
                addr: a.to_string(),
                message: e.to_string(),
            })?;
            Some((listener, bound))
        }
        None => None,
    };
    let (admin_stop_tx, admin_stop_rx) = oneshot::channel::<()>();
    let admin_task = admin.as_ref().map(|(_, a)| *a);
    if let Some((listener, _)) = admin {
        let m = metrics.clone();
        let token = config.admin_token.clone();
        tokio::spawn(serve_admin(listener, m, token, async move {
            let _ = admin_stop_rx.await;
        }));
    }
    ready(Bound {
        addr,
        admin: admin_task,
    });

    let incoming = ReceiverStream::new(spawn_accept_loop(listener, tls, config.connections));
    let (go_tx, go_rx) = oneshot::channel::<()>();
    let service = SesameService::new(shared.clone());
    let serve = builder
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, async move {
            let _ = go_rx.await;
        });
    tokio::pin!(serve);
    tokio::pin!(stop);
    let served = tokio::select! {
        r = &mut serve => r,
        _ = &mut stop => {
            shared.shutting_down.store(true, Ordering::Release);
            crate::log("shutting down: finishing requests in flight");
            let _ = go_tx.send(());
            // Connections are drained, but an idle client that never reads
            // would hold the server forever: once no request is in flight
            // (or the grace period is over), the rest are closed.
            let drained = async {
                in_flight.wait_idle().await;
                tokio::time::sleep(Duration::from_millis(300)).await;
            };
            tokio::select! {
                r = &mut serve => r,
                _ = tokio::time::timeout(config.shutdown_grace, drained) => Ok(()),
            }
        }
    };
    shared.shutting_down.store(true, Ordering::Release);
    // Requests whose clients gave up may still run on blocking threads.
    let _ = tokio::time::timeout(config.shutdown_grace, in_flight.wait_idle()).await;
    let (flushed, health) = tokio::task::spawn_blocking(move || (store.flush(), store.health()))
        .await
        .map_err(|e| ServerError::Runtime(e.to_string()))?;
    let _ = admin_stop_tx.send(());
    served.map_err(|e| ServerError::Runtime(sesame_core::error::chain(&e)))?;
    flushed.map_err(|e| ServerError::Store(e.to_string()))?;
    crate::log(&shutdown_line(
        watched.failures(),
        watched.last_error().as_deref(),
        &health,
    ));
    Ok(())
}

/// A server running on a runtime of its own, in a background thread (for
/// tests and benchmarks). Dropping it shuts it down.
#[derive(Debug)]
pub struct RunningServer {
    bound: Bound,
    tls: bool,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), ServerError>>>,
}

impl RunningServer {
    /// Starts the server; returns once it listens.
    pub fn start(config: ServerConfig, store: Arc<dyn Store>) -> Result<Self, ServerError> {
        let tls = config.tls.is_some();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Bound>();
        let thread = std::thread::Builder::new()
            .name("sesame-server".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .thread_name("sesame-server-worker")
                    .build()
                    .map_err(|e| ServerError::Runtime(e.to_string()))?;
                runtime.block_on(run(
                    config,
                    store,
                    move |b| {
                        let _ = ready_tx.send(b);
                    },
                    async move {
                        let _ = stop_rx.await;
                    },
                ))
            })
            .map_err(|e| ServerError::Runtime(e.to_string()))?;
        match ready_rx.recv() {
            Ok(bound) => Ok(RunningServer {
                bound,
                tls,
                stop: Some(stop_tx),
                thread: Some(thread),
            }),
            Err(_) => Err(thread
                .join()
                .map_err(|_| ServerError::Runtime("the server thread panicked".into()))?
                .err()
                .unwrap_or_else(|| ServerError::Runtime("the server stopped at once".into()))),
        }
    }

    /// Where it listens.
    pub fn bound(&self) -> Bound {
        self.bound
    }

    /// Its URL: `https://localhost:PORT`, or `http://127.0.0.1:PORT` in
    /// plaintext.
    pub fn url(&self) -> String {
        if self.tls {
            format!("https://localhost:{}", self.bound.addr.port())
        } else {
            format!("http://{}", self.bound.addr)
        }
    }

    /// Shuts down gracefully and waits for the end.
    pub fn shutdown(mut self) -> Result<(), ServerError> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Result<(), ServerError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| ServerError::Runtime("the server thread panicked".into()))?,
            None => Ok(()),
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}

/// The admin port's `sesame_uncommitted_bytes`: the metrics read the
/// engine's budget without depending on the engine.
impl Gauge for UploadBudget {
    fn level(&self) -> usize {
        self.total()
    }
}
