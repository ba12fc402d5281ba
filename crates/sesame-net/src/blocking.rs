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

/// A connection to a server, with a runtime to drive it.
#[derive(Clone)]
pub struct Connection {
    runtime: Arc<tokio::runtime::Runtime>,
    client: SesameClient,
    retries: u32,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects (TLS handshake included); a server that cannot be reached
    /// is [`Error::Transport`].
    pub fn connect(config: &ClientConfig) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Transport(format!("cannot start the client runtime: {e}")))?;
        let client = runtime.block_on(SesameClient::connect(config))?;
        Ok(Connection {
            runtime: Arc::new(runtime),
            client,
            retries: 3,
        })
    }

    /// How often an `UNAVAILABLE` request is retried (default 3).
    pub fn set_retries(&mut self, retries: u32) {
        self.retries = retries;
    }

    /// The async client, to run with [`Connection::block_on`].
    pub fn client(&self) -> SesameClient {
        self.client.clone()
    }

    /// Runs a future on the connection's runtime.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    /// Runs `op` with retries on `UNAVAILABLE`; an `ALREADY_EXISTS` with
    /// details after a retry is the first attempt's answer.
    pub fn with_retries<T, F, Fut>(&self, mut op: F) -> std::result::Result<T, Status>
    where
        F: FnMut(SesameClient) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, Status>>,
    {
        let mut attempt = 0;
        loop {
            match self.runtime.block_on(op(self.client.clone())) {
                // UNKNOWN is what a connection that broke under the call
                // gives (the server itself never answers it).
                Err(s)
                    if matches!(s.code(), Code::Unavailable | Code::Unknown)
                        && attempt < self.retries =>
                {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(100 << attempt.min(5)));
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
        let (tx, rx) = mpsc::channel::<proto::UploadRequest>(8);
        let start = proto::UploadRequest {
            start: Some(proto::UploadStart {
                index: index.to_owned(),
                scheme: scheme.to_owned(),
                generation,
                request_id: new_request_id().to_vec(),
            }),
            message: Vec::new(),
            commit: false,
        };
        let mut client = self.client.clone();
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
}
