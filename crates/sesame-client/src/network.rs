//! The network backend: the index and the documents live on a Sesame
//! server (`sesame serve`), reached over gRPC and TLS.
//!
//! A profile bound to a server keeps the binding in `server.json`: the
//! URL, the CA certificate to trust (if any), and the tenant's token,
//! sealed under a key derived from the passphrase (the token is a secret;
//! the rest is not).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{wire, Channel, Meter, Params, Service, Store};
use sesame_crypto::Aes256GcmSiv;
use sesame_net::blocking::{from_status, new_request_id, Connection};
use sesame_net::{proto, ClientConfig};
use sesame_sse::KeywordScheme;
use tonic::Code;
use zeroize::{Zeroize, Zeroizing};

use crate::backend::{Backend, IndexRecord, IndexRecordWrite, SetupChannel, UpdateJob};
use crate::doc_service::{DocRequest, DocResponse};
use crate::error::{ClientError, Result};
use crate::fsutil;

mod compact;

/// Name of the server binding in a profile directory.
pub const SERVER_FILE: &str = "server.json";

/// Format tag of `server.json`.
const FORMAT: &str = "sesame-server-binding/1";

/// Where a profile's indexes live when they are not embedded.
#[derive(Clone)]
pub struct ServerBinding {
    /// `https://host:port` (or `http://127.0.0.1:port` for a loopback
    /// server in plaintext); or several such URLs separated by commas:
    /// servers that share one store (several `sesame serve` on one
    /// PostgreSQL database or one Redis Cluster), tried in order
    /// ([`sesame_net::client::server_urls`]; failover:
    /// [`sesame_net::blocking::Connection::with_retries`]).
    pub url: String,
    /// The tenant's bearer token.
    pub token: String,
    /// A PEM CA certificate to trust instead of the public roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Put before the profile's index names on the server, so that several
    /// profiles share a tenant: index `default` of a profile with prefix
    /// `p1a2b3c4d-` is the tenant's `p1a2b3c4d-default`. Empty for
    /// profiles bound before prefixes existed (their `default` is the
    /// tenant's `default`). See [`ServerBinding::fresh_prefix`].
    pub index_prefix: String,
}

impl Drop for ServerBinding {
    fn drop(&mut self) {
        self.token.zeroize();
    }
}

impl std::fmt::Debug for ServerBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBinding")
            .field("url", &self.url)
            .field("token", &"[redacted]")
            .field("ca", &self.ca_pem.is_some())
            .finish()
    }
}

impl ServerBinding {
    /// A random prefix for a new profile's index names: `p`, eight hex
    /// digits, `-`.
    pub fn fresh_prefix(rng: &mut dyn CryptoRngCore) -> String {
        format!("p{:08x}-", rng.next_u32())
    }

    /// The client configuration for this binding.
    pub fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new(self.url.clone(), self.token.clone());
        c.ca_pem = self.ca_pem.clone();
        c
    }
}

/// `server.json` as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BindingFile {
    format: String,
    url: String,
    /// The CA certificate, PEM text.
    ca: Option<String>,
    /// AES-256-GCM-SIV seal of the token, hex.
    token: String,
    /// The index name prefix on the server (absent: none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    index_prefix: String,
}

/// Associated data of the sealed token: the profile, the URL and (when
/// there is one) the index prefix, so that none can be edited.
fn binding_aad(profile_id: &str, url: &str, prefix: &str) -> Vec<u8> {
    let mut aad = b"sesame-client/server-token/v1\0".to_vec();
    let parts: &[&str] = if prefix.is_empty() {
        &[profile_id, url]
    } else {
        &[profile_id, url, prefix]
    };
    for part in parts {
        aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
        aad.extend_from_slice(part.as_bytes());
    }
    aad
}

/// Writes the binding (token sealed) atomically.
pub(crate) fn save_binding(
    rng: &mut dyn CryptoRngCore,
    aead: &Aes256GcmSiv,
    profile_id: &str,
    path: &Path,
    binding: &ServerBinding,
) -> Result<()> {
    // A mistyped list is refused before anything is written.
    sesame_net::client::server_urls(&binding.url).map_err(ClientError::Core)?;
    let ca = match &binding.ca_pem {
        Some(pem) => Some(String::from_utf8(pem.clone()).map_err(|_| {
            ClientError::InvalidArgument("the CA certificate is not PEM text".into())
        })?),
        None => None,
    };
    let sealed = aead
        .seal(
            rng,
            &binding_aad(profile_id, &binding.url, &binding.index_prefix),
            binding.token.as_bytes(),
        )
        .map_err(|_| ClientError::InvalidArgument("the token is too long".into()))?;
    let file = BindingFile {
        format: FORMAT.into(),
        url: binding.url.clone(),
        ca,
        token: hex::encode(sealed),
        index_prefix: binding.index_prefix.clone(),
    };
    let json = serde_json::to_vec_pretty(&file)
        .map_err(|e| ClientError::InvalidArgument(format!("server binding: {e}")))?;
    fsutil::write_atomic(path, &json)
}

/// Refuses a binding whose URLs name servers of different stores: each
/// server that answers says its store's identity (`Health`), and all
/// must say the first's. A server that does not answer now, or that does
/// not say (an older build), is not checked.
pub(crate) fn check_one_store(binding: &ServerBinding) -> Result<()> {
    let urls = sesame_net::client::server_urls(&binding.url).map_err(ClientError::Core)?;
    if urls.len() < 2 {
        return Ok(());
    }
    let mut first: Option<(String, String)> = None;
    for url in urls {
        let mut config = binding.client_config();
        config.url = url.clone();
        let Ok(conn) = Connection::connect(&config) else {
            continue;
        };
        let mut c = conn.client();
        let id = match conn.block_on(c.health()) {
            Ok(health) if !health.store_id.is_empty() => health.store_id,
            _ => continue,
        };
        match &first {
            None => first = Some((url, id)),
            Some((first_url, first_id)) if *first_id != id => {
                return Err(ClientError::InvalidArgument(format!(
                    "{first_url} and {url} are servers of different stores (store {first_id} \
                     and store {id}): the URLs of one profile must be servers that share one \
                     store (several `sesame serve` on one PostgreSQL database or one Redis \
                     Cluster); give the servers of one store only"
                )))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Reads the binding, if the profile has one.
pub(crate) fn load_binding(
    aead: &Aes256GcmSiv,
    profile_id: &str,
    path: &Path,
) -> Result<Option<ServerBinding>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ClientError::io("read", path, &e)),
    };
    let damaged = |reason: &str| ClientError::ProfileCorrupt {
        path: path.to_path_buf(),
        reason: reason.to_owned(),
    };
    let file: BindingFile = serde_json::from_slice(&bytes).map_err(|e| damaged(&e.to_string()))?;
    if file.format != FORMAT {
        return Err(damaged("unknown format"));
    }
    let sealed = hex::decode(&file.token).map_err(|_| damaged("the token is not hex"))?;
    let token = Zeroizing::new(
        aead.open(
            &binding_aad(profile_id, &file.url, &file.index_prefix),
            &sealed,
        )
        .map_err(|_| damaged("the token does not decrypt (altered file?)"))?,
    );
    let token = String::from_utf8(token.to_vec()).map_err(|_| damaged("the token is not text"))?;
    Ok(Some(ServerBinding {
        url: file.url,
        token,
        ca_pem: file.ca.map(String::into_bytes),
        index_prefix: file.index_prefix,
    }))
}

/// Parses a binding file as [`load_binding`] does, up to the decryption
/// (for the fuzz targets).
pub(crate) fn parse_binding(bytes: &[u8]) {
    if let Ok(file) = serde_json::from_slice::<BindingFile>(bytes) {
        let _ = hex::decode(&file.token);
        let _ = binding_aad("id", &file.url, &file.index_prefix);
    }
}

fn record_from_proto(r: proto::Record) -> IndexRecord {
    IndexRecord {
        name: r.name,
        version: r.version,
        value: r.value,
    }
}

fn status_error(s: &tonic::Status) -> ClientError {
    ClientError::Core(from_status(s))
}

/// The server halves run on a Sesame server. Index `NAME` of the profile
/// is index `PREFIX` + `NAME` of the tenant on the server
/// ([`ServerBinding::index_prefix`]).
pub struct NetworkBackend {
    conn: Connection,
    prefix: String,
    meter: Meter,
    /// The server's limits once asked.
    limits: Option<Limits>,
    /// Indexes whose documents were asked to be packed
    /// ([`Backend::pack_documents`]): their puts say so, and the server
    /// packs an index that holds no document yet.
    packed_docs: std::collections::HashSet<String>,
}

impl std::fmt::Debug for NetworkBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkBackend").finish_non_exhaustive()
    }
}

impl NetworkBackend {
    /// Connects to the server (TLS handshake included).
    pub fn connect(binding: &ServerBinding) -> Result<Self> {
        let conn = Connection::connect(&binding.client_config())?;
        Ok(NetworkBackend {
            conn,
            prefix: binding.index_prefix.clone(),
            meter: Meter::new(),
            limits: None,
            packed_docs: std::collections::HashSet::new(),
        })
    }

    /// The server's message limit, messages per `Call` and documents per
    /// request, asked once by `Health` (the defaults for a server that
    /// does not say), so that the client's size checks and splits agree
    /// with the server.
    fn limits(&mut self) -> Result<Limits> {
        if let Some(limits) = self.limits {
            return Ok(limits);
        }
        let health = self
            .conn
            .with_retries(|mut c| async move { c.health().await })
            .map_err(|s| status_error(&s))?;
        let or = |said: u64, default: usize| {
            usize::try_from(said)
                .ok()
                .filter(|n| *n > 0)
                .unwrap_or(default)
        };
        let limits = Limits {
            message: or(health.max_message_bytes, DEFAULT_MAX_MESSAGE),
            per_call: or(health.max_messages_per_call, MESSAGES_PER_CALL),
            documents: or(health.max_documents_per_request, DOCUMENTS_PER_REQUEST),
        };
        self.limits = Some(limits);
        Ok(limits)
    }

    /// The server's name of the profile's index `index`.
    fn remote(&self, index: &str) -> Result<String> {
        let name = format!("{}{index}", self.prefix);
        if name.len() > 64 {
            return Err(ClientError::InvalidArgument(format!(
                "index name {index:?} is too long for the server: with this profile's prefix \
                 it may have at most {} characters",
                64 - self.prefix.len()
            )));
        }
        Ok(name)
    }

    /// The connection, for direct RPCs.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Creates index `index` on the server, bound to `scheme` with
    /// `params`.
    pub fn create_index(&self, index: &str, scheme: &str, params: &Params) -> Result<()> {
        let params = params.to_string();
        let index = self.remote(index)?;
        let index = index.as_str();
        // One request id for every retry: a retry after the first was
        // applied gets the index, not ALREADY_EXISTS.
        self.conn
            .create_index(index, scheme, &params)
            .map(drop)
            .map_err(|s| status_error(&s))
    }

    /// Checks the token (and the connection) by listing the tenant's
    /// indexes; returns the names of this profile's (those under its
    /// prefix, without it).
    pub fn indexes(&self) -> Result<Vec<String>> {
        let r = self
            .conn
            .with_retries(|mut c| async move { c.list_indexes().await })
            .map_err(|s| status_error(&s))?;
        Ok(r.indexes
            .into_iter()
            .filter_map(|i| i.index.strip_prefix(&self.prefix).map(str::to_owned))
            .collect())
    }

    /// `DropGenerations`: every generation of `index` but `keep`, or
    /// (`only_older`) those older than `keep`.
    fn drop_generations(&self, index: &str, keep: u64, only_older: bool) -> Result<()> {
        let index = self.remote(index)?;
        let index = index.as_str();
        self.conn
            .with_retries(|mut c| async move { c.drop_generations(index, keep, only_older).await })
            .map(drop)
            .map_err(|s| status_error(&s))
    }

    /// Removes index `index` from the server.
    pub fn drop_index(&self, index: &str) -> Result<()> {
        let index = self.remote(index)?;
        let index = index.as_str();
        self.conn
            .with_retries(|mut c| async move { c.drop_index(index).await })
            .map(drop)
            .map_err(|s| status_error(&s))
    }
}

impl Backend for NetworkBackend {
    fn index_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<Box<dyn Channel>> {
        let index = self.remote(index)?;
        Ok(Box::new(self.conn.index_channel(
            &index,
            scheme.descriptor.name,
            generation,
            self.meter.clone(),
        )))
    }

    fn hosted_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &str,
        _server: &dyn Fn(Arc<dyn Store>) -> sesame_core::Result<Box<dyn Service>>,
    ) -> Result<Box<dyn Channel>> {
        let index = self.remote(index)?;
        Ok(Box::new(self.conn.index_channel(
            &index,
            scheme,
            generation,
            self.meter.clone(),
        )))
    }

    fn hosted_transaction(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &str,
        _server: &dyn Fn(Arc<dyn Store>) -> sesame_core::Result<Box<dyn Service>>,
    ) -> Result<Box<dyn SetupChannel>> {
        let index = self.remote(index)?;
        Ok(Box::new(Upload::open(
            &self.conn,
            index,
            scheme,
            generation,
            self.meter.clone(),
        )?))
    }

    fn ensure_index(&mut self, index: &str, scheme: &str, params: &Params) -> Result<()> {
        if self.indexes()?.iter().any(|i| i == index) {
            return Ok(());
        }
        self.create_index(index, scheme, params)
    }

    fn index_names(&mut self) -> Result<Option<Vec<String>>> {
        self.indexes().map(Some)
    }

    fn remove_index(&mut self, index: &str) -> Result<()> {
        if !self.indexes()?.iter().any(|i| i == index) {
            return Ok(());
        }
        self.drop_index(index)
    }

    fn pack_documents(&mut self, index: &str) {
        self.packed_docs.insert(index.to_owned());
    }

    fn document_channel(&mut self, index: &str) -> Result<Box<dyn Channel + Send>> {
        Ok(Box::new(RemoteDocs {
            conn: self.conn.clone(),
            index: self.remote(index)?,
            meter: self.meter.clone(),
            packed: self.packed_docs.contains(index),
        }))
    }

    fn drop_other_generations(&mut self, index: &str, keep: u64) -> Result<()> {
        self.drop_generations(index, keep, false)
    }

    fn drop_older_generations(&mut self, index: &str, keep: u64) -> Result<()> {
        self.drop_generations(index, keep, true)
    }

    fn read_records(
        &mut self,
        index: &str,
        names: &[String],
        known: &[u64],
    ) -> Result<Option<Vec<IndexRecord>>> {
        let request = proto::ReadRecordsRequest {
            index: self.remote(index)?,
            names: names.to_vec(),
            known: known.to_vec(),
        };
        let answer = self.conn.with_retries(|mut c| {
            let request = request.clone();
            async move { c.read_records(request).await }
        });
        match answer {
            Ok(r) if r.records.len() == names.len() => {
                Ok(Some(r.records.into_iter().map(record_from_proto).collect()))
            }
            Ok(r) => Err(ClientError::Core(sesame_core::Error::Protocol(format!(
                "asked for {} records, got {}",
                names.len(),
                r.records.len()
            )))),
            // A server from before records: the profile's state stays on
            // this device only. An index not (yet) on the server keeps
            // none either.
            Err(s) if matches!(s.code(), Code::Unimplemented | Code::NotFound) => Ok(None),
            Err(s) => Err(status_error(&s)),
        }
    }

    fn write_records(
        &mut self,
        index: &str,
        writes: Vec<IndexRecordWrite>,
    ) -> Result<Option<Vec<IndexRecord>>> {
        let n = writes.len();
        let request = proto::WriteRecordsRequest {
            index: self.remote(index)?,
            writes: writes
                .into_iter()
                .map(|w| proto::RecordWrite {
                    name: w.name,
                    expected: w.expected,
                    delete: w.value.is_none(),
                    value: w.value.unwrap_or_default(),
                })
                .collect(),
        };
        let r = self
            .conn
            .with_retries(|mut c| {
                let request = request.clone();
                async move { c.write_records(request).await }
            })
            .map_err(|s| status_error(&s))?;
        if r.committed {
            return Ok(None);
        }
        if r.current.len() != n {
            return Err(ClientError::Core(sesame_core::Error::Protocol(format!(
                "wrote {n} records, got {} back",
                r.current.len()
            ))));
        }
        Ok(Some(r.current.into_iter().map(record_from_proto).collect()))
    }

    fn meter(&self) -> &Meter {
        &self.meter
    }

    fn max_message(&mut self) -> Result<Option<usize>> {
        Ok(Some(self.limits()?.message))
    }

    fn max_documents(&mut self) -> Result<Option<usize>> {
        Ok(Some(self.limits()?.documents))
    }

    /// Sends the requests in as few `Call`s as fit the server's message
    /// limit, in order: the first under the operation's id, the others
    /// under ids derived from it (`part_id`), each applied once by the
    /// server. Parts are not one transaction, but the session sends nothing
    /// else to the index before every part is acknowledged, and the
    /// documents of an update enter the catalog only then.
    fn update_job(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
        id: [u8; 16],
        requests: Vec<Vec<u8>>,
    ) -> Result<UpdateJob> {
        let Limits {
            message: max_message,
            per_call,
            ..
        } = self.limits()?;
        let index = self.remote(index)?;
        let scheme = scheme.descriptor.name;
        let conn = self.conn.clone();
        let meter = self.meter.clone();
        Ok(Box::new(move || {
            let mut responses = Vec::with_capacity(requests.len());
            let calls = split_calls(&requests, call_budget(max_message), per_call)?;
            let mut requests = requests.into_iter();
            for (part, range) in calls.into_iter().enumerate() {
                let start = Instant::now();
                let batch: Vec<Vec<u8>> = requests.by_ref().take(range.len()).collect();
                let up = batch.iter().map(Vec::len).sum();
                let (answers, report) =
                    conn.call_batch(&index, scheme, generation, part_id(id, part), batch)?;
                let down = answers.iter().map(Vec::len).sum();
                meter.record_round(up, down, start.elapsed());
                meter.record_server(&report, false);
                responses.extend(answers);
            }
            Ok(responses)
        }))
    }

    fn setup_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<Box<dyn SetupChannel>> {
        let index = self.remote(index)?;
        Ok(Box::new(Upload::open(
            &self.conn,
            index,
            scheme.descriptor.name,
            generation,
            self.meter.clone(),
        )?))
    }
}

/// Bytes of a `Call` beside its scheme messages (names, ids, framing),
/// with room to spare.
const CALL_OVERHEAD: usize = 64 << 10;
/// Framing bytes per scheme message in a `Call`.
const MESSAGE_OVERHEAD: usize = 16;
/// Scheme messages in one `Call` (the server's default limit).
const MESSAGES_PER_CALL: usize = 100_000;
/// Documents per document request for a server that does not say (its
/// default).
const DOCUMENTS_PER_REQUEST: usize = 100_000;

/// What the server accepts, from its `Health`.
#[derive(Clone, Copy, Debug)]
struct Limits {
    /// Bytes of one gRPC message.
    message: usize,
    /// Scheme messages in one `Call`.
    per_call: usize,
    /// Documents one document request names.
    documents: usize,
}

/// The server's message limit when it does not say (its default).
pub(crate) const DEFAULT_MAX_MESSAGE: usize = 64 << 20;

/// Bytes of scheme messages (with their framing) one `Call` may carry
/// under a message limit of `max_message`.
pub(crate) fn call_budget(max_message: usize) -> usize {
    max_message.saturating_sub(CALL_OVERHEAD)
}

/// The largest scheme request that fits one `Call` under `max_message`.
pub(crate) fn max_request(max_message: usize) -> usize {
    call_budget(max_message).saturating_sub(MESSAGE_OVERHEAD)
}

/// Splits `requests` into runs that fit one `Call` each (`budget` bytes,
/// `per_call` messages). A request that fits no call is an
/// error (the session checks sizes before it saves an operation, so this
/// is a last line of defence).
fn split_calls(
    requests: &[Vec<u8>],
    budget: usize,
    per_call: usize,
) -> Result<Vec<std::ops::Range<usize>>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0usize;
    for (i, r) in requests.iter().enumerate() {
        let size = r.len() + MESSAGE_OVERHEAD;
        if size > budget {
            return Err(ClientError::TooLarge {
                what: "a scheme request".into(),
                size: r.len() as u64,
                max: budget.saturating_sub(MESSAGE_OVERHEAD) as u64,
            });
        }
        if i > start && (bytes + size > budget || i - start >= per_call.max(1)) {
            out.push(start..i);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < requests.len() || out.is_empty() {
        out.push(start..requests.len());
    }
    Ok(out)
}

/// The request id of part `part` of operation `id`: the id itself for the
/// first part (so an operation saved by an earlier build, sent as one call,
/// is recognised), else the first 16 bytes of SHA-256 of a label, the id
/// and the part number.
pub(crate) fn part_id(id: [u8; 16], part: usize) -> [u8; 16] {
    if part == 0 {
        return id;
    }
    let mut input = b"sesame-client/intent-part/v1\0".to_vec();
    input.extend_from_slice(&id);
    input.extend_from_slice(&(part as u64).to_be_bytes());
    let digest = sesame_crypto::hash::sha256(&input);
    let mut out = [0u8; 16];
    out.copy_from_slice(&digest[..16]);
    out
}

/// Bytes of an upload's messages kept to send them again if its server
/// dies before the commit; an upload larger than this that breaks fails
/// (run the command again: nothing of it is visible).
pub(crate) const MAX_RESEND_BYTES: usize = 256 << 20;

/// Times an upload is sent again before its error is returned.
const MAX_RESENDS: u32 = 4;

/// A setup sent as one `Upload` stream. When the stream breaks (the
/// server died, or the connection to it), the upload is sent again from
/// its first message under the same upload id to the server the
/// connection moves to (another of the profile's servers on the same
/// store, or the same one back up): nothing of an upload is visible
/// before its commit, and servers on one store commit an upload id once
/// (a commit that was applied before the break answers as applied). Each
/// answer sent again must equal the first one the client used.
struct Upload {
    conn: Connection,
    index: String,
    scheme: String,
    generation: u64,
    /// The upload's id, the same on every server it is sent to.
    id: [u8; 16],
    meter: Meter,
    stream: Option<sesame_net::blocking::UploadChannel>,
    /// The messages sent so far and a SHA-256 of each answer (emptied
    /// once they pass [`MAX_RESEND_BYTES`]).
    sent: Vec<(Vec<u8>, [u8; 32])>,
    sent_bytes: usize,
    resends: u32,
}

impl Upload {
    fn open(
        conn: &Connection,
        index: String,
        scheme: &str,
        generation: u64,
        meter: Meter,
    ) -> Result<Upload> {
        let mut up = Upload {
            conn: conn.clone(),
            index,
            scheme: scheme.to_owned(),
            generation,
            id: new_request_id(),
            meter,
            stream: None,
            sent: Vec::new(),
            sent_bytes: 0,
            resends: 0,
        };
        match up.start() {
            Ok(stream) => up.stream = Some(stream),
            Err(e) if is_broken(&e) => up.resend(e)?,
            Err(e) => return Err(e.into()),
        }
        Ok(up)
    }

    fn start(&self) -> sesame_core::Result<sesame_net::blocking::UploadChannel> {
        self.conn.upload_with_id(
            &self.index,
            &self.scheme,
            self.generation,
            self.id,
            self.meter.clone(),
        )
    }

    /// After `broke`: moves to a server that answers and sends the
    /// messages so far again on a new stream under the same id.
    fn resend(&mut self, broke: sesame_core::Error) -> sesame_core::Result<()> {
        let sent = std::mem::take(&mut self.sent);
        let outcome = self.resend_from(&sent, broke);
        self.sent = sent;
        outcome
    }

    fn resend_from(
        &mut self,
        sent: &[(Vec<u8>, [u8; 32])],
        broke: sesame_core::Error,
    ) -> sesame_core::Result<()> {
        let mut broke = broke;
        loop {
            let from = self.conn.server_url();
            self.stream = None;
            if self.sent_bytes > MAX_RESEND_BYTES {
                return Err(sesame_core::Error::Transport(format!(
                    "the upload to {from} broke ({broke}) after more than {} MiB, more than \
                     the client keeps to send again; nothing of it is visible: run the command \
                     again",
                    MAX_RESEND_BYTES >> 20
                )));
            }
            if self.resends >= MAX_RESENDS {
                return Err(sesame_core::Error::Transport(format!(
                    "the upload broke {} times, last on {from} ({broke}); nothing of it is \
                     visible: run the command again once a server answers",
                    self.resends + 1
                )));
            }
            self.resends += 1;
            // A call with retries moves the connection off a server that
            // does not answer (or waits for the only one to come back).
            self.conn
                .with_retries(|mut c| async move { c.health().await })
                .map_err(|s| from_status(&s))?;
            let to = self.conn.server_url();
            let mut stream = match self.start() {
                Ok(stream) => stream,
                Err(e) if is_broken(&e) => {
                    broke = e;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let mut again = Ok(());
            for (i, (message, answer)) in sent.iter().enumerate() {
                match stream.call(message) {
                    Ok(r) if sesame_crypto::hash::sha256(&r) == *answer => {}
                    Ok(_) => {
                        return Err(sesame_core::Error::Protocol(format!(
                            "the upload was sent again to {to} after {from} broke, and {to} \
                             answered its message {} differently; nothing of it is visible: \
                             run the command again",
                            i + 1
                        )))
                    }
                    Err(e) => {
                        again = Err(e);
                        break;
                    }
                }
            }
            match again {
                Ok(()) => {
                    self.stream = Some(stream);
                    return Ok(());
                }
                Err(e) if is_broken(&e) => broke = e,
                Err(e) => return Err(e),
            }
        }
    }

    fn keep(&mut self, message: &[u8], answer: &[u8]) {
        self.sent_bytes = self.sent_bytes.saturating_add(message.len());
        if self.sent_bytes > MAX_RESEND_BYTES {
            self.sent = Vec::new();
        } else {
            self.sent
                .push((message.to_vec(), sesame_crypto::hash::sha256(answer)));
        }
    }
}

/// Whether an upload's error says the stream broke (the server or the
/// connection to it), not that a server refused it.
fn is_broken(e: &sesame_core::Error) -> bool {
    matches!(e, sesame_core::Error::Transport(_))
}

impl Channel for Upload {
    fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
        loop {
            let Some(stream) = self.stream.as_mut() else {
                return Err(sesame_core::Error::Protocol(
                    "the upload is already committed".into(),
                ));
            };
            match stream.call(request) {
                Ok(answer) => {
                    self.keep(request, &answer);
                    return Ok(answer);
                }
                Err(e) if is_broken(&e) => self.resend(e)?,
                Err(e) => return Err(e),
            }
        }
    }
    fn meter(&self) -> &Meter {
        &self.meter
    }
}

impl SetupChannel for Upload {
    fn commit(mut self: Box<Self>) -> Result<()> {
        loop {
            let Some(stream) = self.stream.take() else {
                return Err(ClientError::Core(sesame_core::Error::Protocol(
                    "the upload is already committed".into(),
                )));
            };
            match stream.commit() {
                Ok(()) => return Ok(()),
                // Applied or not on the server that broke: the same id
                // commits once, and a commit that was applied answers so.
                Err(e) if is_broken(&e) => self.resend(e)?,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// The document service over the server's document RPCs: each
/// [`DocRequest`] becomes one RPC (with a request id where it writes).
struct RemoteDocs {
    conn: Connection,
    index: String,
    meter: Meter,
    /// Whether its puts ask for packed documents
    /// ([`Backend::pack_documents`]).
    packed: bool,
}

impl RemoteDocs {
    fn handle(&self, request: DocRequest) -> sesame_core::Result<DocResponse> {
        let index = self.index.as_str();
        let answer = match request {
            DocRequest::PutDocs(docs) => {
                let request = proto::PutDocumentsRequest {
                    index: index.to_owned(),
                    request_id: new_request_id().to_vec(),
                    documents: docs
                        .into_iter()
                        .map(|(id, blob)| proto::Document { id, blob })
                        .collect(),
                    packed: self.packed,
                };
                match self.conn.with_retries(|mut c| {
                    let r = request.clone();
                    async move { c.put_documents(r).await }
                }) {
                    Ok(_) => DocResponse::Stored,
                    // Our own retry of a put that was applied.
                    Err(s) if s.code() == Code::AlreadyExists && !s.details().is_empty() => {
                        DocResponse::Stored
                    }
                    Err(s) => return Err(from_status(&s)),
                }
            }
            DocRequest::GetDoc(id) => {
                let r = self
                    .conn
                    .with_retries(|mut c| async move { c.get_documents(index, vec![id]).await })
                    .map_err(|s| from_status(&s))?;
                let doc = r.documents.into_iter().next().ok_or_else(|| {
                    sesame_core::Error::Protocol("the server answered no document".into())
                })?;
                DocResponse::Doc(doc.found.then_some(doc.blob))
            }
            DocRequest::GetDocs(ids) => {
                let r = self
                    .conn
                    .with_retries(|mut c| {
                        let ids = ids.clone();
                        async move { c.get_documents(index, ids).await }
                    })
                    .map_err(|s| from_status(&s))?;
                DocResponse::Docs(
                    r.documents
                        .into_iter()
                        .map(|d| d.found.then_some(d.blob))
                        .collect(),
                )
            }
            // The server bounds its reads of its own store; the client
            // half checks the sizes of what it answers.
            DocRequest::GetDocsWithin(docs) => {
                return self.handle(DocRequest::GetDocs(
                    docs.into_iter().map(|(id, _)| id).collect(),
                ))
            }
            DocRequest::DeleteDoc(id) => {
                let request = proto::DeleteDocumentsRequest {
                    index: index.to_owned(),
                    request_id: new_request_id().to_vec(),
                    ids: vec![id],
                };
                match self.conn.with_retries(|mut c| {
                    let r = request.clone();
                    async move { c.delete_documents(r).await }
                }) {
                    Ok(r) => DocResponse::Deleted(r.deleted.first().copied().unwrap_or(false)),
                    Err(s) if s.code() == Code::AlreadyExists && !s.details().is_empty() => {
                        let r: proto::DeleteDocumentsResponse = prost::Message::decode(s.details())
                            .map_err(|e| {
                                sesame_core::Error::Malformed(format!("stored answer: {e}"))
                            })?;
                        DocResponse::Deleted(r.deleted.first().copied().unwrap_or(false))
                    }
                    Err(s) => return Err(from_status(&s)),
                }
            }
            DocRequest::DeleteDocs(ids) => {
                let request = proto::DeleteDocumentsRequest {
                    index: index.to_owned(),
                    request_id: new_request_id().to_vec(),
                    ids,
                };
                let deleted = match self.conn.with_retries(|mut c| {
                    let r = request.clone();
                    async move { c.delete_documents(r).await }
                }) {
                    Ok(r) => r.deleted,
                    Err(s) if s.code() == Code::AlreadyExists && !s.details().is_empty() => {
                        let r: proto::DeleteDocumentsResponse = prost::Message::decode(s.details())
                            .map_err(|e| {
                                sesame_core::Error::Malformed(format!("stored answer: {e}"))
                            })?;
                        r.deleted
                    }
                    Err(s) => return Err(from_status(&s)),
                };
                DocResponse::DeletedCount(deleted.iter().filter(|d| **d).count() as u64)
            }
            DocRequest::ListDocIds => {
                let r = self
                    .conn
                    .with_retries(|mut c| async move { c.list_documents(index).await })
                    .map_err(|s| from_status(&s))?;
                DocResponse::DocIds(r.ids)
            }
        };
        Ok(answer)
    }
}

impl Channel for RemoteDocs {
    fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
        let start = Instant::now();
        let decoded: DocRequest = wire::decode(request)?;
        let response = wire::encode(&self.handle(decoded)?)?;
        self.meter
            .record_round(request.len(), response.len(), start.elapsed());
        Ok(response)
    }

    fn meter(&self) -> &Meter {
        &self.meter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_split_under_the_budget_in_order() {
        let requests: Vec<Vec<u8>> = [10, 20, 30, 5, 40].iter().map(|&n| vec![0u8; n]).collect();
        let parts = split_calls(&requests, 60 + 2 * MESSAGE_OVERHEAD, 100).unwrap();
        assert_eq!(parts, vec![0..2, 2..4, 4..5]);
        for p in &parts {
            let bytes: usize = requests[p.clone()]
                .iter()
                .map(|r| r.len() + MESSAGE_OVERHEAD)
                .sum();
            assert!(bytes <= 60 + 2 * MESSAGE_OVERHEAD);
        }
        // At most `per_call` messages a call.
        assert_eq!(
            split_calls(&requests, 1 << 20, 2).unwrap(),
            vec![0..2, 2..4, 4..5]
        );
        assert!(matches!(
            split_calls(&requests, 30, 100),
            Err(ClientError::TooLarge { .. })
        ));
        assert_eq!(split_calls(&[], 100, 100).unwrap(), vec![0..0]);
    }

    #[test]
    fn part_ids_are_distinct_and_the_first_is_the_operations() {
        let id = [7u8; 16];
        assert_eq!(part_id(id, 0), id);
        let ids: std::collections::BTreeSet<_> = (0..100).map(|p| part_id(id, p)).collect();
        assert_eq!(ids.len(), 100);
        assert_ne!(part_id([8u8; 16], 1), part_id(id, 1));
    }
}
