//! A synchronous client: the scheme code and the client SDK are
//! synchronous, so this wraps [`SesameClient`] in a runtime of its own and
//! offers [`Channel`]s to an index.
//!
//! - [`IndexChannel`]: each [`Channel::call`] is one `Call` with one scheme
//!   message and a fresh request id; [`Connection::call_batch`] sends
//!   several messages to be applied atomically.
//! - [`UploadChannel`]: each call is one message of an `Upload` stream;
//!   [`UploadChannel::commit`] makes the upload visible.
//!
//! Retries: a request that failed with `UNAVAILABLE` or `UNKNOWN` (the
//! server could not be reached, is restarting, or the connection broke) is
//! sent again, up to
//! [`Connection::set_retries`] times with a growing pause, with the same
//! request id. If the first attempt was applied after all, the server
//! answers with the first response: a retry never applies a request
//! twice. (Older servers answered `ALREADY_EXISTS` with the first response
//! as details, which is still taken as the answer.)
//!
//! The meter hears one round per call: the bytes of the scheme messages
//! (not of the protobuf, HTTP/2 and TLS framing around them), the time
//! spent in the call, and the server's report (its handling time, store
//! I/O and primitive calls) as the server sent it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use prost::Message;
use rand_core::{OsRng, RngCore};
use sesame_core::{wire, Channel, Error, Meter, Result, ServerReport};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Status, Streaming};

use crate::client::{ClientConfig, SesameClient};
use crate::proto;

/// A fresh random request id.
pub fn new_request_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    OsRng.fill_bytes(&mut id);
    id
}

/// Maps a status to the shared error vocabulary: transport trouble is
/// [`Error::Transport`]; everything the server refused or failed at is
/// [`Error::Server`] with the code and the server's message.
pub fn from_status(s: &Status) -> Error {
    let message: String = s.message().chars().take(512).collect();
    match s.code() {
        Code::Unavailable | Code::Cancelled | Code::Unknown => Error::Transport(message),
        // tonic reports an HTTP/2 stream or connection broken under it
        // (a server that died) as INTERNAL: not the server's answer.
        Code::Internal if message.starts_with("h2 protocol error") => Error::Transport(message),
        Code::DeadlineExceeded => Error::Transport(format!("deadline exceeded: {message}")),
        code => Error::Server(format!("{message} ({})", code_name(code))),
    }
}

fn code_name(code: Code) -> String {
    format!("{code:?}")
        .chars()
        .flat_map(|c| {
            let upper = c.is_ascii_uppercase();
            let mut v = Vec::new();
            if upper {
                v.push('_');
            }
            v.push(c.to_ascii_uppercase());
            v
        })
        .collect::<String>()
        .trim_start_matches('_')
        .to_owned()
}

/// How long a connection that moved off its first server stays on the
/// one it moved to before it tries the first again.
pub const COME_BACK_AFTER: Duration = Duration::from_secs(30);

/// A connection to a server (or to the first of several servers on one
/// store that answers), with a runtime to drive it.
#[derive(Clone)]
pub struct Connection {
    runtime: Arc<tokio::runtime::Runtime>,
    servers: Arc<Servers>,
    retries: u32,
}

/// The servers a connection may use, in the order given, and the one in
/// use.
struct Servers {
    clients: Vec<(String, SesameClient)>,
    active: std::sync::atomic::AtomicUsize,
    /// When the connection last moved off the first server.
    moved_at: std::sync::Mutex<Option<Instant>>,
}

impl Servers {
    /// The server in use (the first again once [`COME_BACK_AFTER`] has
    /// passed since the connection moved off it).
    fn current(&self) -> (usize, SesameClient) {
        use std::sync::atomic::Ordering;
        let mut i = self.active.load(Ordering::Acquire);
        if i != 0 {
            let moved = self
                .moved_at
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if moved.is_some_and(|t| t.elapsed() >= COME_BACK_AFTER) {
                self.active.store(0, Ordering::Release);
                i = 0;
            }
        }
        let i = i.min(self.clients.len() - 1);
        (i, self.clients[i].1.clone())
    }

    /// Moves to the server after `from` (if no other request moved first).
    fn move_from(&self, from: usize) {
        use std::sync::atomic::Ordering;
        let next = (from + 1) % self.clients.len();
        if next == from {
            return;
        }
        if self
            .active
            .compare_exchange(from, next, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
            && from == 0
        {
            *self
                .moved_at
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
        }
    }
}

/// Whether a failed request may be sent again, to the same server or the
/// next: the server could not be reached, is restarting, said it cannot
/// serve for the moment, or the connection broke under the request
/// (requests carry ids, so a request that was applied is answered, not
/// applied again).
fn transient(s: &Status) -> bool {
    // UNKNOWN is what a connection that broke under the call gives (the
    // server itself never answers it); tonic reports an HTTP/2 stream
    // broken by a server's death as INTERNAL, and a request that hyper
    // dropped because its connection closed as CANCELLED ("operation was
    // canceled"; the server answers CANCELLED only to a client that has
    // gone, so a client never reads it as an answer).
    matches!(
        s.code(),
        Code::Unavailable | Code::Unknown | Code::Cancelled
    ) || (s.code() == Code::Internal && s.message().starts_with("h2 protocol error"))
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects (TLS handshake included); a server that cannot be reached
    /// is [`Error::Transport`].
    ///
    /// With several URLs ([`crate::client::server_urls`]: servers that
    /// share one store), the first that answers is used; the others are
    /// kept to move to when it cannot be reached later
    /// ([`Connection::with_retries`]).
    pub fn connect(config: &ClientConfig) -> Result<Self> {
        let urls = crate::client::server_urls(&config.url)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Transport(format!("cannot start the client runtime: {e}")))?;
        // A lazy channel spawns its worker on the runtime it is made in.
        let entered = runtime.enter();
        let mut clients = Vec::with_capacity(urls.len());
        let mut active = None;
        let mut failures = Vec::new();
        for url in urls {
            let mut one = config.clone();
            one.url = url.clone();
            let client = if active.is_none() {
                match runtime.block_on(SesameClient::connect(&one)) {
                    Ok(c) => {
                        active = Some(clients.len());
                        c
                    }
                    Err(e) => {
                        failures.push(e);
                        SesameClient::lazy(&one)?
                    }
                }
            } else {
                SesameClient::lazy(&one)?
            };
            clients.push((url, client));
        }
        drop(entered);
        let Some(active) = active else {
            return Err(if failures.len() == 1 {
                failures.remove(0)
            } else {
                let each: Vec<String> = failures.iter().map(ToString::to_string).collect();
                Error::Transport(format!(
                    "none of the {} servers could be reached: {}",
                    failures.len(),
                    each.join("; ")
                ))
            });
        };
        Ok(Connection {
            runtime: Arc::new(runtime),
            servers: Arc::new(Servers {
                clients,
                active: std::sync::atomic::AtomicUsize::new(active),
                moved_at: std::sync::Mutex::new((active != 0).then(Instant::now)),
            }),
            retries: 3,
        })
    }

    /// How often an `UNAVAILABLE` request is retried (default 3): with
    /// several servers, how many more rounds over all of them.
    pub fn set_retries(&mut self, retries: u32) {
        self.retries = retries;
    }

    /// The async client of the server in use, to run with
    /// [`Connection::block_on`].
    pub fn client(&self) -> SesameClient {
        self.servers.current().1
    }

    /// The URL of the server in use.
    pub fn server_url(&self) -> String {
        let (i, _) = self.servers.current();
        self.servers.clients[i].0.clone()
    }

    /// Runs a future on the connection's runtime.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    /// Runs `op` with retries on `UNAVAILABLE` (and a connection broken
    /// under the request); an `ALREADY_EXISTS` with details after a retry
    /// is the first attempt's answer.
    ///
    /// Failover: with several servers, a request that failed so is sent
    /// at once to the next server, and the connection stays there (for
    /// [`COME_BACK_AFTER`], then tries the first again); after a round
    /// over every server it pauses, growing, as with one server, for up to
    /// [`Connection::set_retries`] rounds. The request keeps its id on
    /// every server: servers on one store answer a request that one of
    /// them applied with its first answer.
    pub fn with_retries<T, F, Fut>(&self, mut op: F) -> std::result::Result<T, Status>
    where
        F: FnMut(SesameClient) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, Status>>,
    {
        let servers = self.servers.clients.len();
        let mut round = 0;
        let mut tried = 1;
        loop {
            let (i, client) = self.servers.current();
            match self.runtime.block_on(op(client)) {
                Err(s) if transient(&s) && tried < servers => {
                    tried += 1;
                    self.servers.move_from(i);
                }
                Err(s) if transient(&s) && round < self.retries => {
                    round += 1;
                    tried = 1;
                    std::thread::sleep(Duration::from_millis(100 << round.min(5)));
                    self.servers.move_from(i);
                }
                other => return other,
            }
        }
    }

    /// `CreateIndex` with retries on `UNAVAILABLE`, under one request id:
    /// a retry after the first was applied (its answer or its replica
    /// confirmation lost) gets the index's info, not `ALREADY_EXISTS`.
    pub fn create_index(
        &self,
        index: &str,
        scheme: &str,
        params: &str,
    ) -> std::result::Result<proto::IndexInfo, Status> {
        let id = new_request_id();
        self.with_retries(|mut c| async move {
            c.create_index_with_id(index, scheme, params, Some(id))
                .await
        })
    }

    /// Sends scheme messages to be applied atomically; the responses, in
    /// order, with the server's report. With `request_id`, a repeat of a
    /// request that was applied returns the first answer.
    pub fn call_batch(
        &self,
        index: &str,
        scheme: &str,
        generation: u64,
        request_id: [u8; 16],
        messages: Vec<Vec<u8>>,
    ) -> Result<(Vec<Vec<u8>>, ServerReport)> {
        let n = messages.len();
        let request = proto::CallRequest {
            index: index.to_owned(),
            scheme: scheme.to_owned(),
            generation,
            request_id: request_id.to_vec(),
            messages,
        };
        let response = match self.with_retries(|mut c| {
            let r = request.clone();
            async move { c.call(r).await }
        }) {
            Ok(r) => r,
            Err(s) if s.code() == Code::AlreadyExists && !s.details().is_empty() => {
                proto::CallResponse::decode(s.details()).map_err(|e| {
                    Error::Malformed(format!("the server's stored answer does not decode: {e}"))
                })?
            }
            Err(s) => return Err(from_status(&s)),
        };
        if response.messages.len() != n {
            return Err(Error::Protocol(format!(
                "sent {n} scheme messages, got {} answers",
                response.messages.len()
            )));
        }
        let report = if response.report.is_empty() {
            ServerReport::default()
        } else {
            wire::decode(&response.report)?
        };
        Ok((response.messages, report))
    }

    /// A channel to one generation of an index.
    pub fn index_channel(
        &self,
        index: &str,
        scheme: &str,
        generation: u64,
        meter: Meter,
    ) -> IndexChannel {
        IndexChannel {
            connection: self.clone(),
            index: index.to_owned(),
            scheme: scheme.to_owned(),
            generation,
            meter,
        }
    }

    /// Opens an upload into one generation of an index.
    pub fn upload(
        &self,
        index: &str,
        scheme: &str,
        generation: u64,
        meter: Meter,
    ) -> Result<UploadChannel> {
        self.upload_with_id(index, scheme, generation, new_request_id(), meter)
    }

    /// [`Connection::upload`] under a given upload id: an upload sent
    /// again (to another server on the same store, after the first broke)
    /// keeps its id, so that it is committed once.
    pub fn upload_with_id(
        &self,
        index: &str,
        scheme: &str,
        generation: u64,
        request_id: [u8; 16],
        meter: Meter,
    ) -> Result<UploadChannel> {
        let (tx, rx) = mpsc::channel::<proto::UploadRequest>(8);
        let start = proto::UploadRequest {
            start: Some(proto::UploadStart {
                index: index.to_owned(),
                scheme: scheme.to_owned(),
                generation,
                request_id: request_id.to_vec(),
            }),
            message: Vec::new(),
            commit: false,
        };
        let mut client = self.client();
        let inbound = self.runtime.block_on(async move {
            tx.send(start)
                .await
                .map_err(|_| Status::unavailable("the upload stream closed"))?;
            let inbound = client.upload(ReceiverStream::new(rx)).await?;
            Ok::<_, Status>((tx, inbound))
        });
        let (tx, inbound) = inbound.map_err(|s| from_status(&s))?;
        Ok(UploadChannel {
            connection: self.clone(),
            tx: Some(tx),
            inbound,
            meter,
        })
    }
}

/// A channel to one generation of an index: one `Call` per scheme message.
#[derive(Debug)]
pub struct IndexChannel {
    connection: Connection,
    index: String,
    scheme: String,
    generation: u64,
    meter: Meter,
}

impl Channel for IndexChannel {
    fn call(&mut self, request: &[u8]) -> Result<Vec<u8>> {
        let start = Instant::now();
        let (mut responses, report) = self.connection.call_batch(
            &self.index,
            &self.scheme,
            self.generation,
            new_request_id(),
            vec![request.to_vec()],
        )?;
        let response = responses.pop().unwrap_or_default();
        self.meter
            .record_round(request.len(), response.len(), start.elapsed());
        self.meter.record_server(&report, false);
        Ok(response)
    }

    fn meter(&self) -> &Meter {
        &self.meter
    }
}

/// A channel whose calls are the messages of one `Upload` stream; nothing
/// is visible on the server before [`UploadChannel::commit`]. Dropping it
/// without committing discards the upload.
pub struct UploadChannel {
    connection: Connection,
    tx: Option<mpsc::Sender<proto::UploadRequest>>,
    inbound: Streaming<proto::UploadResponse>,
    meter: Meter,
}

impl std::fmt::Debug for UploadChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadChannel").finish_non_exhaustive()
    }
}

impl UploadChannel {
    fn exchange(&mut self, message: proto::UploadRequest) -> Result<proto::UploadResponse> {
        let tx = self
            .tx
            .clone()
            .ok_or_else(|| Error::Protocol("the upload is already committed".into()))?;
        let inbound = &mut self.inbound;
        let outcome = self.connection.runtime.block_on(async move {
            // A closed sender means the server ended the stream: its
            // status comes on the inbound side.
            let _ = tx.send(message).await;
            inbound.message().await
        });
        match outcome {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Err(Error::Protocol("the server ended the upload stream".into())),
            Err(s) => Err(from_status(&s)),
        }
    }

    /// Commits the upload and waits for the server to say it is durable.
    pub fn commit(mut self) -> Result<()> {
        let start = Instant::now();
        let r = self.exchange(proto::UploadRequest {
            start: None,
            message: Vec::new(),
            commit: true,
        })?;
        self.tx = None;
        self.meter.record_round(0, 0, start.elapsed());
        if r.committed {
            Ok(())
        } else {
            Err(Error::Protocol(
                "the server did not confirm the commit".into(),
            ))
        }
    }
}

impl Channel for UploadChannel {
    fn call(&mut self, request: &[u8]) -> Result<Vec<u8>> {
        let start = Instant::now();
        let r = self.exchange(proto::UploadRequest {
            start: None,
            message: request.to_vec(),
            commit: false,
        })?;
        self.meter
            .record_round(request.len(), r.message.len(), start.elapsed());
        if !r.report.is_empty() {
            let report: ServerReport = wire::decode(&r.report)?;
            self.meter.record_server(&report, false);
        }
        Ok(r.message)
    }

    fn meter(&self) -> &Meter {
        &self.meter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_map_to_errors() {
        let e = from_status(&Status::failed_precondition("bound to scheme fast"));
        assert_eq!(
            e.to_string(),
            "server error: bound to scheme fast (FAILED_PRECONDITION)"
        );
        assert!(matches!(
            from_status(&Status::unavailable("x")),
            Error::Transport(_)
        ));
        assert_eq!(code_name(Code::InvalidArgument), "INVALID_ARGUMENT");
        // A connection the server's death broke (tonic reports an HTTP/2
        // reset as INTERNAL): transport trouble, which running the
        // command again gets past.
        assert!(matches!(
            from_status(&Status::internal(
                "h2 protocol error: error reading a body from connection"
            )),
            Error::Transport(_)
        ));
    }

    #[test]
    fn a_connection_closed_under_a_request_is_sent_again() {
        // Seen when a server was killed during an add: hyper cancels the
        // request it was writing, and tonic reports CANCELLED.
        assert!(transient(&Status::cancelled("operation was canceled")));
        assert!(transient(&Status::unavailable("x")));
        assert!(transient(&Status::internal("h2 protocol error: x")));
        assert!(!transient(&Status::internal("the index is corrupt")));
        assert!(!transient(&Status::failed_precondition("x")));
    }
}
