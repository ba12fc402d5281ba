//! Counters in the Prometheus text format, served on the admin port.
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `sesame_requests_total` | counter | `method`, `code` |
//! | `sesame_request_duration_seconds` | histogram | `method` |
//! | `sesame_request_bytes_total` | counter | `method`, `direction` (`in`, `out`) |
//! | `sesame_requests_in_flight` | gauge | |
//! | `sesame_uncommitted_bytes` | gauge | |
//! | `sesame_upload_messages_total` | counter | |
//! | `sesame_store_operations_total` | counter | `op` (`read`, `write`, `scan`) |
//! | `sesame_store_scanned_pairs_total` | counter | |
//! | `sesame_store_bytes_total` | counter | `direction` (`read`, `written`) |
//! | `sesame_uptime_seconds` | gauge | |
//!
//! Bytes are those of the protobuf messages (not of HTTP/2 or TLS framing).
//!
//! The gauges are read through [`Gauge`], which their owners implement
//! (the service's requests in flight, the engine's upload budget) and
//! `serve.rs` hands over: this module imports neither the engine nor the
//! service, so the counters sit below both.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sesame_core::Store;
use tonic::Code;

use crate::proto::path;
use crate::watched::Watched;

/// A level the admin port reports as a gauge, read when it is scraped.
pub trait Gauge: Send + Sync {
    /// The level now.
    fn level(&self) -> usize;
}

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

#[derive(Debug, Default)]
struct Method {
    codes: Mutex<BTreeMap<&'static str, u64>>,
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_ns: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
}

/// The server's counters.
pub struct Metrics {
    methods: Vec<(&'static str, Method)>,
    store: Arc<dyn Store>,
    in_flight: Arc<dyn Gauge>,
    upload_messages: AtomicU64,
    started: Instant,
    uploads: Option<Arc<dyn Gauge>>,
    watched: Option<Arc<Watched<Arc<dyn Store>>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("store", &self.store.backend())
            .finish_non_exhaustive()
    }
}

/// The `method` label of requests to methods the server does not have.
pub const UNKNOWN_METHOD: &str = "unknown";

/// The name of a status code as Prometheus labels show it.
fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

impl Metrics {
    /// Counters for the server over `store`, with `in_flight` the
    /// requests being handled.
    pub fn new(store: Arc<dyn Store>, in_flight: Arc<dyn Gauge>) -> Self {
        Metrics {
            methods: path::ALL
                .iter()
                .map(|p| p.rsplit('/').next().unwrap_or(p))
                .chain([UNKNOWN_METHOD])
                .map(|name| (name, Method::default()))
                .collect(),
            store,
            in_flight,
            upload_messages: AtomicU64::new(0),
            started: Instant::now(),
            uploads: None,
            watched: None,
        }
    }

    /// Reports the bytes of uploads held before their commit (the
    /// engine's upload budget).
    pub fn with_uploads(mut self, uploads: Arc<dyn Gauge>) -> Self {
        self.uploads = Some(uploads);
        self
    }

    /// Reports the failures counted by `watched` (the server's store).
    pub fn with_store_errors(mut self, watched: Arc<Watched<Arc<dyn Store>>>) -> Self {
        self.watched = Some(watched);
        self
    }

    /// Records one request to `method` (a path from [`path`]).
    pub fn record(&self, method: &str, code: Code, elapsed: Duration, up: usize, down: usize) {
        let name = method.rsplit('/').next().unwrap_or(method);
        let Some((_, m)) = self.methods.iter().find(|(n, _)| *n == name) else {
            return;
        };
        *m.codes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(code_name(code))
            .or_default() += 1;
        let secs = elapsed.as_secs_f64();
        for (bound, bucket) in BUCKETS.iter().zip(&m.buckets) {
            if secs <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        m.count.fetch_add(1, Ordering::Relaxed);
        m.sum_ns.fetch_add(
            u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        m.bytes_in.fetch_add(up as u64, Ordering::Relaxed);
        m.bytes_out.fetch_add(down as u64, Ordering::Relaxed);
    }

    /// Records one scheme message of an upload stream.
    pub fn upload_message(&self) {
        self.upload_messages.fetch_add(1, Ordering::Relaxed);
    }

    /// Everything, in the Prometheus text exposition format (0.0.4).
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "# HELP sesame_requests_total Requests answered, by method and status code."
        );
        let _ = writeln!(o, "# TYPE sesame_requests_total counter");
        for (name, m) in &self.methods {
            for (code, n) in m
                .codes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
            {
                let _ = writeln!(
                    o,
                    "sesame_requests_total{{method=\"{name}\",code=\"{code}\"}} {n}"
                );
            }
        }
        let _ = writeln!(
            o,
            "# HELP sesame_request_duration_seconds Time to answer a request."
        );
        let _ = writeln!(o, "# TYPE sesame_request_duration_seconds histogram");
        for (name, m) in &self.methods {
            let count = m.count.load(Ordering::Relaxed);
            if count == 0 {
                continue;
            }
            for (bound, bucket) in BUCKETS.iter().zip(&m.buckets) {
                let _ = writeln!(
                    o,
                    "sesame_request_duration_seconds_bucket{{method=\"{name}\",le=\"{bound}\"}} {}",
                    bucket.load(Ordering::Relaxed)
                );
            }
            let _ = writeln!(
                o,
                "sesame_request_duration_seconds_bucket{{method=\"{name}\",le=\"+Inf\"}} {count}"
            );
            let sum = m.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
            let _ = writeln!(
                o,
                "sesame_request_duration_seconds_sum{{method=\"{name}\"}} {sum}"
            );
            let _ = writeln!(
                o,
                "sesame_request_duration_seconds_count{{method=\"{name}\"}} {count}"
            );
        }
        let _ = writeln!(
            o,
            "# HELP sesame_request_bytes_total Bytes of request and response messages."
        );
        let _ = writeln!(o, "# TYPE sesame_request_bytes_total counter");
        for (name, m) in &self.methods {
            if m.count.load(Ordering::Relaxed) == 0 {
                continue;
            }
            for (dir, v) in [("in", &m.bytes_in), ("out", &m.bytes_out)] {
                let _ = writeln!(
                    o,
                    "sesame_request_bytes_total{{method=\"{name}\",direction=\"{dir}\"}} {}",
                    v.load(Ordering::Relaxed)
                );
            }
        }
        let _ = writeln!(
            o,
            "# HELP sesame_requests_in_flight Requests being handled."
        );
        let _ = writeln!(o, "# TYPE sesame_requests_in_flight gauge");
        let _ = writeln!(o, "sesame_requests_in_flight {}", self.in_flight.level());
        if let Some(uploads) = &self.uploads {
            let _ = writeln!(
                o,
                "# HELP sesame_uncommitted_bytes Bytes of uploads held in memory before their commit."
            );
            let _ = writeln!(o, "# TYPE sesame_uncommitted_bytes gauge");
            let _ = writeln!(o, "sesame_uncommitted_bytes {}", uploads.level());
        }
        let _ = writeln!(
            o,
            "# HELP sesame_upload_messages_total Scheme messages received in upload streams."
        );
        let _ = writeln!(o, "# TYPE sesame_upload_messages_total counter");
        let _ = writeln!(
            o,
            "sesame_upload_messages_total {}",
            self.upload_messages.load(Ordering::Relaxed)
        );
        let io = self.store.io_counts();
        let _ = writeln!(
            o,
            "# HELP sesame_store_operations_total Store operations (a get_many counts each key)."
        );
        let _ = writeln!(o, "# TYPE sesame_store_operations_total counter");
        for (op, v) in [("read", io.reads), ("write", io.writes), ("scan", io.scans)] {
            let _ = writeln!(o, "sesame_store_operations_total{{op=\"{op}\"}} {v}");
        }
        let _ = writeln!(
            o,
            "# HELP sesame_store_scanned_pairs_total Pairs returned by prefix scans."
        );
        let _ = writeln!(o, "# TYPE sesame_store_scanned_pairs_total counter");
        let _ = writeln!(o, "sesame_store_scanned_pairs_total {}", io.scanned);
        let _ = writeln!(
            o,
            "# HELP sesame_store_bytes_total Bytes read from and written to the store."
        );
        let _ = writeln!(o, "# TYPE sesame_store_bytes_total counter");
        let _ = writeln!(
            o,
            "sesame_store_bytes_total{{direction=\"read\"}} {}",
            io.bytes_read
        );
        let _ = writeln!(
            o,
            "sesame_store_bytes_total{{direction=\"written\"}} {}",
            io.bytes_written
        );
        if let Some(w) = &self.watched {
            let _ = writeln!(
                o,
                "# HELP sesame_store_errors_total Store operations that failed in the store \
                 (I/O errors, damage)."
            );
            let _ = writeln!(o, "# TYPE sesame_store_errors_total counter");
            let _ = writeln!(o, "sesame_store_errors_total {}", w.errors());
        }
        let _ = writeln!(
            o,
            "# HELP sesame_uptime_seconds Seconds since the server started."
        );
        let _ = writeln!(o, "# TYPE sesame_uptime_seconds gauge");
        let _ = writeln!(
            o,
            "sesame_uptime_seconds {}",
            self.started.elapsed().as_secs()
        );
        o
    }
}

/// The bearer token of the admin port, kept as its SHA-256 digest and
/// compared in constant time.
#[derive(Clone)]
pub struct AdminToken {
    digest: [u8; 32],
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken([redacted])")
    }
}

impl AdminToken {
    /// The token `text` (surrounding whitespace removed); refused when
    /// shorter than 16 characters.
    pub fn new(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.len() < 16 {
            return Err("the admin token must be at least 16 characters".into());
        }
        Ok(AdminToken {
            digest: sesame_crypto::hash::sha256(text.as_bytes()),
        })
    }

    /// Whether `presented` is the token (constant time in its content).
    pub fn matches(&self, presented: &str) -> bool {
        use subtle::ConstantTimeEq;
        let d = sesame_crypto::hash::sha256(presented.trim().as_bytes());
        d.ct_eq(&self.digest).into()
    }
}

/// Serves `GET /metrics` (and `GET /healthz`) over plain HTTP/1.1 on
/// `listener` until `stop` resolves. One request per connection. With a
/// `token`, a request without `Authorization: Bearer TOKEN` is answered
/// 401 and nothing else.
pub async fn serve_admin(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    token: Option<AdminToken>,
    stop: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stop);
    // A failed accept (out of file descriptors) pauses the loop instead of
    // spinning; at most MAX_ADMIN_CONNECTIONS are served at once, more are
    // closed at once.
    let places = Arc::new(tokio::sync::Semaphore::new(MAX_ADMIN_CONNECTIONS));
    let mut pause = Duration::ZERO;
    loop {
        tokio::select! {
            _ = &mut stop => return,
            (stream, _) = crate::accept::accept_with_backoff(&listener, &mut pause) => {
                let Ok(place) = places.clone().try_acquire_owned() else {
                    drop(stream);
                    continue;
                };
                let metrics = metrics.clone();
                let token = token.clone();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(
                        Duration::from_secs(5),
                        answer(stream, &metrics, token.as_ref()),
                    )
                    .await;
                    drop(place);
                });
            }
        }
    }
}

/// Admin connections served at once; more are closed at once.
pub const MAX_ADMIN_CONNECTIONS: usize = 32;

/// Whether the request head carries `Authorization: Bearer T` with the
/// token.
fn authorized(head: &[u8], token: &AdminToken) -> bool {
    String::from_utf8_lossy(head)
        .split("\r\n")
        .skip(1)
        .any(|line| {
            let Some((name, value)) = line.split_once(':') else {
                return false;
            };
            let value = value.trim();
            name.trim().eq_ignore_ascii_case("authorization")
                && value.len() > 7
                && value[..7].eq_ignore_ascii_case("bearer ")
                && token.matches(&value[7..])
        })
}

async fn answer(
    mut stream: tokio::net::TcpStream,
    metrics: &Metrics,
    token: Option<&AdminToken>,
) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 || head.len() > 8192 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let allowed = token.is_none_or(|t| authorized(&head, t));
    let (status, kind, body) = match (parts.next(), parts.next()) {
        _ if !allowed => (
            "401 Unauthorized\r\nWWW-Authenticate: Bearer",
            "text/plain",
            "unauthorized: send Authorization: Bearer TOKEN\n".to_owned(),
        ),
        (Some("GET"), Some("/metrics")) => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.render(),
        ),
        (Some("GET"), Some("/healthz")) => match metrics.store.health() {
            Ok(()) => ("200 OK", "text/plain", "ok\n".to_owned()),
            Err(_) => (
                "503 Service Unavailable",
                "text/plain",
                "degraded: the store cannot serve requests\n".to_owned(),
            ),
        },
        (Some("GET"), _) => (
            "404 Not Found",
            "text/plain",
            "not found: try /metrics\n".to_owned(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "only GET\n".to_owned(),
        ),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
