//! The gRPC service `sesame.v1.Sesame`, written by hand (no code
//! generation): authentication, deadlines, metrics, and the mapping of
//! engine errors to status codes. The work itself runs on blocking
//! threads in the [`Engine`].

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use prost::Message;
use tokio::sync::{mpsc, Notify};
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::{http, BoxFuture, Service};
use tonic::server::{Grpc, NamedService};
use tonic::{Code, Status, Streaming};

use crate::codec::ProtoCodec;
use crate::engine::{Engine, Upload};
use crate::error::EngineError;
use crate::metrics::{self, Metrics};
use crate::proto::{self, path};
use crate::tokens::Tokens;

/// Maps an engine error to a status; a replay carries the first answer
/// as details.
pub fn to_status(e: EngineError) -> Status {
    let code = match &e {
        EngineError::NotFound(_) => Code::NotFound,
        EngineError::AlreadyExists(_) | EngineError::Replayed { .. } => Code::AlreadyExists,
        EngineError::FailedPrecondition(_) => Code::FailedPrecondition,
        EngineError::InvalidArgument(_) => Code::InvalidArgument,
        EngineError::ResourceExhausted(_) => Code::ResourceExhausted,
        EngineError::Unimplemented(_) => Code::Unimplemented,
        EngineError::Unavailable(_) => Code::Unavailable,
        EngineError::Conflict(_) => Code::Aborted,
        EngineError::Internal(_) => Code::Internal,
    };
    let message = e.to_string();
    match e {
        EngineError::Replayed { response, .. } => {
            Status::with_details(code, message, response.into())
        }
        _ => Status::new(code, message),
    }
}

/// Counts requests being handled, so that shutdown can wait for them (a
/// request whose client gave up still runs to its end on its blocking
/// thread).
#[derive(Debug, Default)]
pub struct InFlight {
    count: AtomicUsize,
    idle: Notify,
}

/// One request in flight; dropping it ends it.
#[derive(Debug)]
pub struct InFlightGuard(Arc<InFlight>);

impl InFlight {
    /// Starts a request.
    pub fn enter(self: &Arc<Self>) -> InFlightGuard {
        self.count.fetch_add(1, Ordering::AcqRel);
        InFlightGuard(self.clone())
    }

    /// Requests in flight.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Waits until no request is in flight.
    pub async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl metrics::Gauge for InFlight {
    fn level(&self) -> usize {
        self.count()
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// What every request handler shares.
#[derive(Debug)]
pub struct Shared {
    /// The logic.
    pub engine: Arc<Engine>,
    /// Who may connect.
    pub tokens: Tokens,
    /// Counters for the admin port.
    pub metrics: Arc<Metrics>,
    /// Longest a request may take (the client may ask for less).
    pub request_timeout: Duration,
    /// Largest message accepted or sent.
    pub max_message_bytes: usize,
    /// Requests in flight.
    pub in_flight: Arc<InFlight>,
    /// Set when shutdown begins: new requests are refused.
    pub shutting_down: AtomicBool,
}

/// The service; cheap to clone.
#[derive(Clone, Debug)]
pub struct SesameService {
    shared: Arc<Shared>,
}

impl SesameService {
    /// The service over `shared`.
    pub fn new(shared: Arc<Shared>) -> Self {
        SesameService { shared }
    }
}

impl NamedService for SesameService {
    const NAME: &'static str = proto::SERVICE;
}

/// The deadline of a request: the server's limit, or less if the client's
/// `grpc-timeout` says so.
fn deadline(metadata: &tonic::metadata::MetadataMap, limit: Duration) -> Duration {
    let asked = metadata
        .get("grpc-timeout")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_grpc_timeout);
    match asked {
        Some(d) => d.min(limit),
        None => limit,
    }
}

/// Parses a `grpc-timeout` value: up to 8 digits and a unit (H M S m u n).
pub fn parse_grpc_timeout(v: &str) -> Option<Duration> {
    if v.len() < 2 || v.len() > 9 {
        return None;
    }
    let (digits, unit) = v.split_at(v.len() - 1);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

impl Shared {
    /// The tenant that the request's bearer token names.
    fn authenticate(&self, metadata: &tonic::metadata::MetadataMap) -> Result<String, Status> {
        let Some(value) = metadata.get("authorization") else {
            return Err(Status::unauthenticated(
                "missing bearer token (metadata authorization: Bearer TOKEN)",
            ));
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| {
                Status::unauthenticated("the authorization metadata is not \"Bearer TOKEN\"")
            })?;
        self.tokens
            .authenticate(token.trim())
            .map(str::to_owned)
            .ok_or_else(|| Status::unauthenticated("invalid token"))
    }

    /// Whether the request's headers carry a valid bearer token.
    fn carries_valid_token(&self, headers: &http::HeaderMap) -> bool {
        headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| self.tokens.authenticate(t.trim()).is_some())
    }

    fn refuse_if_stopping(&self) -> Result<(), Status> {
        if self.shutting_down.load(Ordering::Acquire) {
            Err(Status::unavailable("the server is shutting down"))
        } else {
            Ok(())
        }
    }

    /// Runs one unary request: authentication, a blocking thread, the
    /// deadline, metrics.
    async fn unary<Req, Resp>(
        self: Arc<Self>,
        method: &'static str,
        auth: bool,
        op: fn(&Engine, &str, Req) -> Result<Resp, EngineError>,
        request: tonic::Request<Req>,
    ) -> Result<tonic::Response<Resp>, Status>
    where
        Req: Message + Send + 'static,
        Resp: Message + Default + Send + 'static,
    {
        let start = Instant::now();
        let up = request.get_ref().encoded_len();
        let outcome = self.clone().unary_inner(auth, op, request).await;
        let down = outcome.as_ref().map_or(0, Message::encoded_len);
        let code = outcome.as_ref().map_or_else(Status::code, |_| Code::Ok);
        self.metrics.record(method, code, start.elapsed(), up, down);
        self.engine.count_request();
        outcome.map(tonic::Response::new)
    }

    async fn unary_inner<Req, Resp>(
        self: Arc<Self>,
        auth: bool,
        op: fn(&Engine, &str, Req) -> Result<Resp, EngineError>,
        request: tonic::Request<Req>,
    ) -> Result<Resp, Status>
    where
        Req: Message + Send + 'static,
        Resp: Message + Default + Send + 'static,
    {
        let limit = deadline(request.metadata(), self.request_timeout);
        let tenant = if auth {
            self.refuse_if_stopping()?;
            self.authenticate(request.metadata())?
        } else {
            String::new()
        };
        let engine = self.engine.clone();
        let guard = self.in_flight.enter();
        let message = request.into_inner();
        let task = tokio::task::spawn_blocking(move || {
            let _guard = guard;
            op(&engine, &tenant, message)
        });
        match tokio::time::timeout(limit, task).await {
            Err(_) => Err(Status::deadline_exceeded(format!(
                "the request did not finish within its deadline of {} ms (an update may still \
                 be applied; retry it with the same request id)",
                limit.as_millis()
            ))),
            Ok(Err(_)) => {
                crate::log("a request handler panicked");
                Err(Status::internal(
                    "the server failed while handling the request",
                ))
            }
            // An exact repeat of a request already applied gets the first
            // answer as an ordinary answer: in trailers, a large one would
            // break HTTP/2 header limits.
            Ok(Ok(Err(EngineError::Replayed { response, .. }))) => {
                Resp::decode(response.as_slice()).map_err(|_| {
                    Status::internal("the stored answer of a repeated request does not decode")
                })
            }
            Ok(Ok(result)) => result.map_err(to_status),
        }
    }

    /// Runs an `Upload` stream: the start, then each message on a blocking
    /// thread, then the commit. An error ends the stream; what was sent is
    /// discarded.
    async fn upload(
        self: Arc<Self>,
        request: tonic::Request<Streaming<proto::UploadRequest>>,
        out: mpsc::Sender<Result<proto::UploadResponse, Status>>,
    ) {
        let start = Instant::now();
        let mut up = 0usize;
        let mut down = 0usize;
        let outcome = self
            .clone()
            .upload_inner(request, &out, &mut up, &mut down)
            .await;
        let code = match outcome {
            Ok(()) => Code::Ok,
            Err(status) => {
                let code = status.code();
                let _ = out.send(Err(status)).await;
                code
            }
        };
        self.metrics
            .record(path::UPLOAD, code, start.elapsed(), up, down);
        self.engine.count_request();
    }

    async fn upload_inner(
        self: Arc<Self>,
        request: tonic::Request<Streaming<proto::UploadRequest>>,
        out: &mpsc::Sender<Result<proto::UploadResponse, Status>>,
        up: &mut usize,
        down: &mut usize,
    ) -> Result<(), Status> {
        self.refuse_if_stopping()?;
        let tenant = self.authenticate(request.metadata())?;
        let idle = deadline(request.metadata(), self.request_timeout);
        let mut inbound = request.into_inner();
        let first = next_message(&mut inbound, idle)
            .await?
            .ok_or_else(|| Status::invalid_argument("an upload stream must not be empty"))?;
        *up += first.encoded_len();
        let mut first = first;
        let start = first.start.take().ok_or_else(|| {
            Status::invalid_argument("the first upload message must carry `start`")
        })?;
        let engine = self.engine.clone();
        let guard = self.in_flight.enter();
        let mut upload: Upload = tokio::task::spawn_blocking(move || {
            let _guard = guard;
            engine.start_upload(&tenant, start)
        })
        .await
        .map_err(|_| Status::internal("the server failed while handling the request"))?
        .map_err(to_status)?;
        let mut pending = (!first.message.is_empty() || first.commit).then_some(first);
        loop {
            let message = match pending.take() {
                Some(m) => m,
                None => {
                    let Some(m) = next_message(&mut inbound, idle).await? else {
                        return Err(Status::aborted(
                            "the upload stream ended without a commit; nothing was stored",
                        ));
                    };
                    *up += m.encoded_len();
                    m
                }
            };
            if message.start.is_some() {
                return Err(Status::invalid_argument(
                    "only the first upload message carries `start`",
                ));
            }
            let engine = self.engine.clone();
            let guard = self.in_flight.enter();
            if message.commit {
                if !message.message.is_empty() {
                    return Err(Status::invalid_argument(
                        "the commit message carries no scheme message",
                    ));
                }
                let response = tokio::task::spawn_blocking(move || {
                    let _guard = guard;
                    engine.commit_upload(upload)
                })
                .await
                .map_err(|_| Status::internal("the server failed while handling the request"))?
                .map_err(to_status)?;
                *down += response.encoded_len();
                let _ = out.send(Ok(response)).await;
                return Ok(());
            }
            let (back, response) = tokio::task::spawn_blocking(move || {
                let _guard = guard;
                let r = engine.upload_message(&mut upload, &message.message);
                (upload, r)
            })
            .await
            .map_err(|_| Status::internal("the server failed while handling the request"))?;
            upload = back;
            let response = response.map_err(to_status)?;
            self.metrics.upload_message();
            *down += response.encoded_len();
            if out.send(Ok(response)).await.is_err() {
                return Err(Status::cancelled("the client went away"));
            }
        }
    }
}

/// The next message of an upload stream, waiting at most `idle`.
async fn next_message(
    inbound: &mut Streaming<proto::UploadRequest>,
    idle: Duration,
) -> Result<Option<proto::UploadRequest>, Status> {
    match tokio::time::timeout(idle, inbound.message()).await {
        Err(_) => Err(Status::deadline_exceeded(format!(
            "no upload message within {} ms",
            idle.as_millis()
        ))),
        Ok(r) => r,
    }
}

/// A unary method as a tower service, for `tonic::server::Grpc`.
struct Unary<Req, Resp> {
    shared: Arc<Shared>,
    method: &'static str,
    auth: bool,
    op: fn(&Engine, &str, Req) -> Result<Resp, EngineError>,
    /// Set once the request decoded and reached the handler (which counts
    /// it); a request the decoder refused is counted by the caller.
    reached: Arc<AtomicBool>,
}

impl<Req, Resp> Service<tonic::Request<Req>> for Unary<Req, Resp>
where
    Req: Message + Send + 'static,
    Resp: Message + Default + Send + 'static,
{
    type Response = tonic::Response<Resp>;
    type Error = Status;
    type Future = BoxFuture<tonic::Response<Resp>, Status>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: tonic::Request<Req>) -> Self::Future {
        self.reached.store(true, Ordering::Release);
        let shared = self.shared.clone();
        Box::pin(shared.unary(self.method, self.auth, self.op, request))
    }
}

/// The `Upload` method as a tower service.
struct UploadMethod {
    shared: Arc<Shared>,
}

impl Service<tonic::Request<Streaming<proto::UploadRequest>>> for UploadMethod {
    type Response = tonic::Response<ReceiverStream<Result<proto::UploadResponse, Status>>>;
    type Error = Status;
    type Future = BoxFuture<Self::Response, Status>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: tonic::Request<Streaming<proto::UploadRequest>>) -> Self::Future {
        let shared = self.shared.clone();
        Box::pin(async move {
            let (tx, rx) = mpsc::channel(4);
            tokio::spawn(shared.upload(request, tx));
            Ok(tonic::Response::new(ReceiverStream::new(rx)))
        })
    }
}

fn health(
    engine: &Engine,
    _tenant: &str,
    _req: proto::HealthRequest,
) -> Result<proto::HealthResponse, EngineError> {
    // A store that cannot serve is said plainly, not hidden behind
    // "serving" (the details stay in the server log).
    let status = match engine.store().health() {
        Ok(()) => "serving".to_owned(),
        Err(e) => {
            crate::log(&format!("health: {e}"));
            "degraded: the store cannot serve requests".to_owned()
        }
    };
    Ok(proto::HealthResponse {
        status,
        version: env!("CARGO_PKG_VERSION").into(),
        store: engine.store().backend().into(),
        store_id: engine.store_id().into(),
        max_message_bytes: engine.limits().max_message_bytes as u64,
        max_messages_per_call: engine.limits().max_messages_per_call as u64,
        max_documents_per_request: engine.limits().max_documents_per_request as u64,
        schemes: sesame_schemes::all()
            .iter()
            .filter(|s| s.hosted())
            .map(|s| s.name().to_owned())
            .collect(),
    })
}

impl SesameService {
    fn unary<Req, Resp>(
        &self,
        request: http::Request<tonic::body::Body>,
        method: &'static str,
        auth: bool,
        op: fn(&Engine, &str, Req) -> Result<Resp, EngineError>,
    ) -> BoxFuture<http::Response<tonic::body::Body>, std::convert::Infallible>
    where
        Req: Message + Default + Send + Sync + 'static,
        Resp: Message + Default + Send + Sync + 'static,
    {
        let reached = Arc::new(AtomicBool::new(false));
        let svc = Unary {
            shared: self.shared.clone(),
            method,
            auth,
            op,
            reached: reached.clone(),
        };
        let shared = self.shared.clone();
        let max = self.shared.max_message_bytes;
        Box::pin(async move {
            let start = Instant::now();
            let mut grpc = Grpc::new(ProtoCodec::<Resp, Req>::default())
                .apply_max_message_size_config(Some(max), Some(max));
            let response = grpc.unary(svc, request).await;
            if !reached.load(Ordering::Acquire) {
                // Refused by the decoder (malformed, over the size limit):
                // counted too, with the code the client got.
                let code =
                    Status::from_header_map(response.headers()).map_or(Code::Unknown, |s| s.code());
                shared.metrics.record(method, code, start.elapsed(), 0, 0);
                shared.engine.count_request();
            }
            Ok(response)
        })
    }
}

impl Service<http::Request<tonic::body::Body>> for SesameService {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        // The connection learns that a request runs on it, and whether it
        // carries a valid token (`crate::gate`): requests, not bytes, keep
        // it open, and one with a token keeps its place.
        let on = request
            .extensions()
            .get::<crate::accept::ConnInfo>()
            .map(|c| {
                c.0.request(self.shared.carries_valid_token(request.headers()))
            });
        let answer = self.route(request);
        match on {
            Some(running) => Box::pin(async move {
                let r = answer.await;
                drop(running);
                r
            }),
            None => answer,
        }
    }
}

impl SesameService {
    fn route(
        &mut self,
        request: http::Request<tonic::body::Body>,
    ) -> BoxFuture<http::Response<tonic::body::Body>, std::convert::Infallible> {
        let shared = self.shared.clone();
        match request.uri().path() {
            path::HEALTH => self.unary(request, path::HEALTH, false, health),
            path::CREATE_INDEX => {
                self.unary(request, path::CREATE_INDEX, true, Engine::create_index)
            }
            path::DROP_INDEX => self.unary(request, path::DROP_INDEX, true, Engine::drop_index),
            path::LIST_INDEXES => {
                self.unary(request, path::LIST_INDEXES, true, Engine::list_indexes)
            }
            path::CALL => self.unary(request, path::CALL, true, Engine::call),
            path::PUT_DOCUMENTS => {
                self.unary(request, path::PUT_DOCUMENTS, true, Engine::put_documents)
            }
            path::GET_DOCUMENTS => {
                self.unary(request, path::GET_DOCUMENTS, true, Engine::get_documents)
            }
            path::DELETE_DOCUMENTS => self.unary(
                request,
                path::DELETE_DOCUMENTS,
                true,
                Engine::delete_documents,
            ),
            path::LIST_DOCUMENTS => {
                self.unary(request, path::LIST_DOCUMENTS, true, Engine::list_documents)
            }
            path::DROP_GENERATIONS => self.unary(
                request,
                path::DROP_GENERATIONS,
                true,
                Engine::drop_generations,
            ),
            path::STATS => self.unary(request, path::STATS, true, Engine::stats),
            path::READ_RECORDS => {
                self.unary(request, path::READ_RECORDS, true, Engine::read_records)
            }
            path::WRITE_RECORDS => {
                self.unary(request, path::WRITE_RECORDS, true, Engine::write_records)
            }
            path::COMPACT_INDEX => {
                self.unary(request, path::COMPACT_INDEX, true, Engine::compact_index)
            }
            path::UPLOAD => {
                let svc = UploadMethod {
                    shared: self.shared.clone(),
                };
                let max = self.shared.max_message_bytes;
                Box::pin(async move {
                    let mut grpc = Grpc::new(ProtoCodec::<
                        proto::UploadResponse,
                        proto::UploadRequest,
                    >::default())
                    .apply_max_message_size_config(Some(max), Some(max));
                    Ok(grpc.streaming(svc, request).await)
                })
            }
            _ => Box::pin(async move {
                shared.metrics.record(
                    metrics::UNKNOWN_METHOD,
                    Code::Unimplemented,
                    Duration::ZERO,
                    0,
                    0,
                );
                shared.engine.count_request();
                let status = Status::unimplemented(format!(
                    "no method {} in {}",
                    request.uri().path().chars().take(128).collect::<String>(),
                    proto::SERVICE
                ));
                Ok(status.into_http())
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse() {
        assert_eq!(parse_grpc_timeout("100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_grpc_timeout("2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        for bad in ["", "m", "12", "1x", "123456789S", "-1S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad}");
        }
    }
}
