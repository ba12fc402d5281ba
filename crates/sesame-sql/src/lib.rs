//! `sesame sql`: encrypted tables from any PostgreSQL client.
//!
//! A process on the client's side (it holds the keys) that speaks the
//! PostgreSQL frontend/backend protocol version 3 through `pgwire`, parses
//! SQL with `sqlparser` (PostgreSQL dialect), and answers each statement
//! with the table API of `sesame-client`: every predicate of a `WHERE`
//! goes to the encrypted index that answers it (module `route`), and a
//! predicate no index answers is refused with SQLSTATE `0A000` unless the
//! session says `SET sesame.allow_scan = on`.
//!
//! The crate is split by concern: `auth` (SCRAM-SHA-256, TLS, the
//! loopback rule), `handler` (simple and extended query protocol, `SET`,
//! `SHOW`), `engine` (the one owner of the profile and its tables, which
//! every connection's statements reach through a channel), `plan` (SQL to
//! a plan over one relation), `route` (a `WHERE` to the table's indexes),
//! `exec` (evaluation, grouping, aggregates, order and limits on the
//! client), `catalog` (what psql and drivers ask at connect time), `copy`
//! (`COPY FROM STDIN` through the table's import) and `types` (SQL
//! values and column types). What is supported, how each statement is
//! answered and what the server learns is in `docs/sql.md`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use pgwire::api::auth::sasl::scram::ScramAuth;
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::{DefaultServerParameterProvider, StartupHandler};
use pgwire::api::cancel::{CancelHandler, DefaultCancelHandler};
use pgwire::api::copy::CopyHandler;
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::{ConnectionManager, PgWireServerHandlers};
use sesame_client::Profile;
use tokio::sync::Semaphore;

mod auth;
mod catalog;
mod copy;
mod ddl;
mod engine;
mod error;
mod exec;
mod handler;
mod plan;
mod route;
mod types;

pub use auth::{check_listen, load_password};

/// The most connections served at once by default; more wait in the
/// kernel's accept queue until one closes.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// The bytes of packed index chunks each embedded table keeps in memory
/// between lookups (`sesame_store::packed::ChunkMemo`; docs/sql.md,
/// "Memory"): the flights' keyword and record chunks are 75 MB, about
/// 204 MB held with the 48 bytes counted for each of their 2.7 million
/// pairs (its place, its head and its share of the hash table).
pub const CHUNK_MEMO_BYTES: usize = 256 << 20;

/// How `sesame sql` listens.
#[derive(Clone, Debug)]
pub struct Config {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// The password clients authenticate with (SCRAM-SHA-256).
    pub password: String,
    /// A PEM certificate chain and private key: TLS.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// The most connections served at once.
    pub max_connections: usize,
}

struct Handlers {
    conn: Arc<handler::Conn>,
    startup: Arc<SASLAuthStartupHandler<DefaultServerParameterProvider>>,
    cancel: Arc<DefaultCancelHandler>,
}

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.conn.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.conn.clone()
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        self.startup.clone()
    }

    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        self.conn.clone()
    }

    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        self.cancel.clone()
    }
}

/// Serves `profile`'s tables on `config.listen` until the process is
/// stopped (Ctrl-C ends it cleanly). `ready` hears the bound address
/// (port 0 picks one). The profile and its open tables stay on the
/// calling thread; the connections run on a runtime of their own.
pub fn run(profile: Profile, config: Config, ready: impl FnOnce(SocketAddr)) -> Result<(), String> {
    check_listen(&config.listen, config.tls.is_some())?;
    // A long-running reader: the index chunks its queries read stay in
    // memory between statements (see `CHUNK_MEMO_BYTES`).
    sesame_client::set_chunk_memo_bytes(CHUNK_MEMO_BYTES);
    let tls = match &config.tls {
        Some((cert, key)) => Some(auth::tls(cert, key)?),
        None => None,
    };
    let listener = std::net::TcpListener::bind(config.listen)
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("{}: {e}", config.listen))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("{}: {e}", config.listen))?;
    let copy_dir = profile.dir().join("sql-copy");
    // What a COPY killed while it was receiving left (its data never
    // reached the table; the client runs that COPY again).
    if let Ok(entries) = std::fs::read_dir(&copy_dir) {
        for e in entries.flatten() {
            if e.path().extension().is_some_and(|x| x == "partial") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let (engine, jobs) = engine::channel();
    let secret = Arc::new(auth::Secret::new(&config.password));
    let max = config.max_connections.max(1);
    let server = std::thread::Builder::new()
        .name("sesame-sql".into())
        .spawn(move || -> Result<(), String> {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the runtime: {e}"))?;
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)
                    .map_err(|e| format!("{addr}: {e}"))?;
                let limit = Arc::new(Semaphore::new(max));
                let mut params = DefaultServerParameterProvider::default();
                params.server_version = catalog::SERVER_VERSION.to_owned();
                let params = Arc::new(params);
                // CancelRequest: each connection registers its key here.
                let manager = Arc::new(ConnectionManager::new());
                let cancel = Arc::new(DefaultCancelHandler::new(manager.clone()));
                let (acceptor, pem) = match tls {
                    Some((a, pem)) => (Some(a), Some(pem)),
                    None => (None, None),
                };
                loop {
                    let permit = tokio::select! {
                        p = limit.clone().acquire_owned() => p.map_err(|e| e.to_string())?,
                        _ = tokio::signal::ctrl_c() => return Ok(()),
                    };
                    let (socket, _) = tokio::select! {
                        s = listener.accept() => match s {
                            Ok(s) => s,
                            Err(_) => continue,
                        },
                        _ = tokio::signal::ctrl_c() => return Ok(()),
                    };
                    let mut scram = ScramAuth::new(secret.clone());
                    scram.set_iterations(auth::ITERATIONS);
                    if let Some(pem) = &pem {
                        // Channel binding where the client offers it.
                        let _ = scram.configure_certificate(pem);
                    }
                    let startup =
                        Arc::new(SASLAuthStartupHandler::new(params.clone()).with_scram(scram));
                    let handlers = Handlers {
                        conn: Arc::new(handler::Conn::new(engine.clone(), copy_dir.clone())),
                        startup,
                        cancel: cancel.clone(),
                    };
                    let acceptor = acceptor.clone();
                    tokio::spawn(async move {
                        let _ = pgwire::tokio::process_socket(socket, acceptor, handlers).await;
                        drop(permit);
                    });
                }
            })
        })
        .map_err(|e| format!("cannot start the server thread: {e}"))?;
    ready(addr);
    engine::serve_jobs(profile, jobs);
    server
        .join()
        .map_err(|_| "the server thread failed".to_owned())?
}
