//! The server's logic, without the network: tenants' indexes over one
//! store, each bound to a scheme; scheme calls, bulk uploads and documents
//! committed in one store transaction each, together with the index's
//! metadata and the replay record.
//!
//! Every method is synchronous (stores block); the gRPC layer runs them on
//! blocking threads.
//!
//! **Commits are conditional, so many servers can share one store.** Each
//! index has a commit token (`c/<tenant>/<index>`, 16 random bytes). A
//! request that writes reads the token first, then everything else it
//! needs, and commits its batch with [`Store::write_if`] on the token it
//! read, putting a fresh token in the same batch. If any commit landed in
//! between, from this server or another one on the same store, the token
//! moved, nothing is written, and the request runs again from fresh reads
//! (up to [`MAX_COMMIT_ATTEMPTS`] times, then `UNAVAILABLE`). Nothing that
//! correctness needs lives only in one server's memory: a client may send
//! each call to another server.
//!
//! Inside one server, a reader-writer lock per index saves the wasted runs:
//! a call first runs under the shared lock against a transaction overlay;
//! if it wrote nothing (a search) its answer is returned, and many searches
//! run at once. If it wrote, the exclusive lock is taken: when the token is
//! unchanged the buffered writes are committed as they are; otherwise they
//! are thrown away and the call runs again. Either way no search ever sees
//! part of an update. Scheme servers are made fresh for each request, so a
//! rerun starts from the committed state.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use prost::Message;
use sesame_core::{wire, Params, ServerReport, Service, Store, WriteBatch};
use sesame_schemes::Scheme;
use sha2::{Digest, Sha256};

use crate::error::EngineError;
use crate::keys;
use crate::proto;
use crate::records::{now_unix, IndexMeta, ReplayRecord};
use sesame_store::documents;
use sesame_store::overlay::Overlay;
use sesame_store::packed::Packed;

mod indexes;
mod sweep;
#[cfg(test)]
use indexes::RESERVATION_TTL_SECS;

/// Limits a request is held to; over a limit is `RESOURCE_EXHAUSTED`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Indexes a tenant may hold.
    pub max_indexes_per_tenant: usize,
    /// Scheme messages in one call.
    pub max_messages_per_call: usize,
    /// Documents in one put, get or delete.
    pub max_documents_per_request: usize,
    /// Bytes of writes one call or one upload may buffer before its commit.
    pub max_transaction_bytes: usize,
    /// The largest gRPC message the server accepts (set from the server's
    /// configuration; told to clients by `Health`).
    pub max_message_bytes: usize,
    /// Bytes of uploads buffered before their commit, all tenants
    /// together; beyond, an upload message is refused.
    pub max_buffer_bytes: usize,
    /// The same, for one tenant.
    pub max_tenant_buffer_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_indexes_per_tenant: 100,
            max_messages_per_call: 100_000,
            max_documents_per_request: 100_000,
            max_transaction_bytes: 1 << 30,
            max_message_bytes: crate::serve::DEFAULT_MAX_MESSAGE,
            max_buffer_bytes: 2 << 30,
            max_tenant_buffer_bytes: 1 << 30,
        }
    }
}

/// How long a replay record is kept (by the server's clock).
pub const REPLAY_HORIZON_SECS: u64 = 7 * 24 * 3600;
/// Replay records written to an index between two prunings.
const PRUNE_EVERY: u64 = 1024;

/// Bytes of uploads buffered in memory and not yet committed, in all and
/// per tenant, held under [`Limits::max_buffer_bytes`] and
/// [`Limits::max_tenant_buffer_bytes`].
#[derive(Debug, Default)]
pub struct UploadBudget {
    held: Mutex<(usize, HashMap<String, usize>)>,
}

impl UploadBudget {
    /// Bytes held now, all tenants together.
    pub fn total(&self) -> usize {
        self.held.lock().unwrap_or_else(PoisonError::into_inner).0
    }

    /// Adds `bytes` to `charge`, or refuses them (holding nothing more)
    /// when the server or the tenant would go over its limit.
    fn charge(
        &self,
        charge: &mut Charge,
        bytes: usize,
        limits: &Limits,
    ) -> Result<(), EngineError> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let tenant = held.1.get(&charge.tenant).copied().unwrap_or(0);
        if held.0.saturating_add(bytes) > limits.max_buffer_bytes {
            return Err(EngineError::ResourceExhausted(format!(
                "the server holds {} bytes of uploads not yet committed, its limit is {}; \
                 the upload was dropped, send it again later",
                held.0, limits.max_buffer_bytes
            )));
        }
        if tenant.saturating_add(bytes) > limits.max_tenant_buffer_bytes {
            return Err(EngineError::ResourceExhausted(format!(
                "this tenant's uploads not yet committed hold {tenant} bytes, the limit is {}; \
                 the upload was dropped, commit or finish other uploads first",
                limits.max_tenant_buffer_bytes
            )));
        }
        held.0 += bytes;
        *held.1.entry(charge.tenant.clone()).or_default() += bytes;
        charge.bytes += bytes;
        Ok(())
    }

    fn release(&self, tenant: &str, bytes: usize) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.0 = held.0.saturating_sub(bytes);
        if let Some(n) = held.1.get_mut(tenant) {
            *n = n.saturating_sub(bytes);
            if *n == 0 {
                held.1.remove(tenant);
            }
        }
    }
}

/// What one upload holds of the [`UploadBudget`]; given back when the
/// upload is committed or dropped.
struct Charge {
    budget: Arc<UploadBudget>,
    tenant: String,
    bytes: usize,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.release(&self.tenant, self.bytes);
    }
}

/// The server's state: one store holding every tenant's indexes.
pub struct Engine {
    store: Arc<dyn Store>,
    limits: Limits,
    uploads: Arc<UploadBudget>,
    locks: Mutex<HashMap<String, Arc<IndexLock>>>,
    create: Mutex<()>,
    started: Instant,
    requests: AtomicU64,
    /// Conditional commits that found their index's token moved.
    conflicts: AtomicU64,
    /// `--record-view`: the server's view, written down (research only).
    view_log: Option<Arc<crate::view_log::ViewLog>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("store", &self.store.backend())
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// The lock of one index inside this server (commits across servers are
/// settled by the commit token, see the module's docs).
#[derive(Debug, Default)]
struct IndexLock {
    rw: RwLock<()>,
}

impl IndexLock {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, ()> {
        self.rw.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, ()> {
        self.rw.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Times a request that writes is run and committed before it gives up
/// because other servers kept committing to the same index first.
pub const MAX_COMMIT_ATTEMPTS: u32 = 64;

/// An index's commit token as read (`None`: no commit has set one yet).
type Token = Option<Vec<u8>>;

/// An index's scheme with the parameters it was created with.
struct Hosted {
    scheme: Scheme,
    params: Params,
}

impl Hosted {
    /// The scheme's server half over `store`.
    fn server(&self, store: Arc<dyn Store>) -> Result<Box<dyn Service>, EngineError> {
        self.scheme
            .server(store, &self.params)
            .map_err(EngineError::from_core)
    }
}

/// What running scheme messages produced.
struct Run {
    responses: Vec<Vec<u8>>,
    report: ServerReport,
    overlay: Arc<Overlay>,
    /// The packed view under the overlay, for a packed index.
    packed: Option<Arc<Packed>>,
    /// The scheme's server writes each key once
    /// ([`sesame_core::Service::write_once`]).
    write_once: bool,
}

/// An upload in progress: its own scheme server over a transaction on the
/// generation being built. Nothing is visible until
/// [`Engine::commit_upload`].
pub struct Upload {
    tenant: String,
    index: String,
    generation: u64,
    request_id: Option<[u8; 16]>,
    digest: RequestDigest,
    overlay: Arc<Overlay>,
    /// The packed view under the overlay, for a packed index.
    packed: Option<Arc<Packed>>,
    server: Box<dyn Service>,
    /// With `--record-view`: what `server` sees.
    view: Option<sesame_core::view::View>,
    messages: u64,
    charge: Charge,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload")
            .field("index", &self.index)
            .field("generation", &self.generation)
            .field("messages", &self.messages)
            .finish_non_exhaustive()
    }
}

impl Upload {
    /// Bytes of writes buffered so far.
    pub fn buffered_bytes(&self) -> usize {
        self.overlay.buffered_bytes()
    }
}

fn request_id(bytes: &[u8]) -> Result<Option<[u8; 16]>, EngineError> {
    match bytes.len() {
        0 => Ok(None),
        16 => Ok(bytes.try_into().ok()),
        n => Err(EngineError::InvalidArgument(format!(
            "a request id is 16 bytes, not {n}"
        ))),
    }
}

fn info(index: &str, meta: &IndexMeta) -> proto::IndexInfo {
    proto::IndexInfo {
        index: index.to_owned(),
        scheme: meta.scheme.clone(),
        params: meta.params.clone(),
        created_unix: meta.created_unix,
        documents: meta.documents,
        updates: meta.updates,
        uploads: meta.uploads,
        generation: meta.generation,
    }
}

/// The digest a replay record keeps of a request, over a canonical
/// encoding of its content (each part length-prefixed).
struct RequestDigest(Sha256);

impl RequestDigest {
    fn new(kind: &str) -> Self {
        let mut h = Sha256::new();
        h.update(b"sesame-server/request/v1\0");
        let mut d = RequestDigest(h);
        d.part(kind.as_bytes());
        d
    }

    fn part(&mut self, p: &[u8]) -> &mut Self {
        self.0.update((p.len() as u64).to_be_bytes());
        self.0.update(p);
        self
    }

    fn finish(self) -> [u8; 32] {
        self.0.finalize().into()
    }
}

impl Engine {
    /// The engine over `store`. A store that holds data but not the server
    /// marker (a client profile's store, another program's data) is
    /// refused; an empty store gets the marker.
    pub fn new(store: Arc<dyn Store>, limits: Limits) -> Result<Self, EngineError> {
        match store.get(keys::MARKER_KEY)? {
            Some(m) if m == keys::MARKER => {}
            Some(m) => {
                return Err(EngineError::FailedPrecondition(format!(
                    "the store holds a Sesame server layout {:?} that this build does not read \
                     ({:?})",
                    String::from_utf8_lossy(&m),
                    String::from_utf8_lossy(keys::MARKER)
                )))
            }
            None => {
                if !store.scan_prefix(b"")?.is_empty() {
                    return Err(EngineError::FailedPrecondition(
                        "the store holds data but no Sesame server marker (a client profile's \
                         store, or another program's); give the server a store of its own"
                            .into(),
                    ));
                }
                store.put(keys::MARKER_KEY, keys::MARKER)?;
            }
        }
        let engine = Engine {
            store,
            limits,
            uploads: Arc::new(UploadBudget::default()),
            locks: Mutex::new(HashMap::new()),
            view_log: None,
            create: Mutex::new(()),
            started: Instant::now(),
            requests: AtomicU64::new(0),
            conflicts: AtomicU64::new(0),
        };
        // Sweeps left by a server that stopped or failed (`engine/sweep.rs`).
        let _ = engine.sweep(None);
        Ok(engine)
    }

    /// Bytes of uploads held before their commit.
    pub fn uploads(&self) -> Arc<UploadBudget> {
        self.uploads.clone()
    }

    /// With `--record-view`, writes a document batch's keys (and value
    /// sizes) as the operation `method`.
    fn log_batch(
        &self,
        tenant: &str,
        index: &str,
        method: &str,
        batch: &WriteBatch,
    ) -> Result<(), EngineError> {
        let Some(log) = &self.view_log else {
            return Ok(());
        };
        let events: Vec<sesame_core::view::Event> = batch
            .ops()
            .iter()
            .map(|op| match op {
                sesame_core::WriteOp::Put { key, value } => sesame_core::view::Event::Write {
                    key: key.clone(),
                    size: value.len(),
                },
                sesame_core::WriteOp::Delete { key } => {
                    sesame_core::view::Event::Delete { key: key.clone() }
                }
            })
            .collect();
        log.operation(tenant, index, method, &events)
    }

    /// Writes the server's view of every scheme call, upload message and
    /// document access to `log` (`sesame serve --record-view`: research
    /// and debugging only, never in production).
    pub fn with_view_log(mut self, log: crate::view_log::ViewLog) -> Self {
        self.view_log = Some(Arc::new(log));
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Counts one answered request (for `Stats`).
    pub fn count_request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    fn lock_of(&self, tenant: &str, index: &str) -> Arc<IndexLock> {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        locks
            .entry(format!("{tenant}/{index}"))
            .or_default()
            .clone()
    }

    fn meta(&self, tenant: &str, index: &str) -> Result<IndexMeta, EngineError> {
        match self.store.get(&keys::meta_key(tenant, index))? {
            Some(bytes) => IndexMeta::decode(&bytes),
            None => Err(EngineError::NotFound(format!("no index named {index:?}"))),
        }
    }

    /// The index's commit token and metadata, read together (one read of
    /// the store, one snapshot) before anything a commit depends on.
    fn token_and_meta(&self, tenant: &str, index: &str) -> Result<(Token, IndexMeta), EngineError> {
        let token = keys::commit_key(tenant, index);
        let meta = keys::meta_key(tenant, index);
        let mut got = self
            .store
            .get_many(&[token.as_slice(), meta.as_slice()])?
            .into_iter();
        let (Some(seen), Some(meta)) = (got.next(), got.next()) else {
            return Err(EngineError::Internal(
                "the store answered a read of two keys with fewer values".into(),
            ));
        };
        match meta {
            Some(bytes) => Ok((seen, IndexMeta::decode(&bytes)?)),
            None => Err(EngineError::NotFound(format!("no index named {index:?}"))),
        }
    }

    /// Conditional commits so far that found their index changed by
    /// another commit (from this server or another one) and ran again.
    pub fn commit_conflicts(&self) -> u64 {
        self.conflicts.load(Ordering::Relaxed)
    }

    /// Writes `batch` with a fresh commit token if the index's token is
    /// still `seen`: `Ok(false)`, nothing written and `batch` as it was,
    /// when another commit came first.
    fn commit_if(
        &self,
        batch: &mut WriteBatch,
        (tenant, index): (&str, &str),
        seen: &Token,
    ) -> Result<bool, EngineError> {
        let key = keys::commit_key(tenant, index);
        let mut fresh = [0u8; 16];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut fresh);
        let base = batch.len();
        batch.put(key.clone(), fresh.to_vec());
        let applied =
            self.write_swept(&[(key.as_slice(), seen.as_deref())], batch, (tenant, index))?;
        if !applied {
            batch.truncate(base);
            self.conflicts.fetch_add(1, Ordering::Relaxed);
        }
        Ok(applied)
    }

    /// Runs `attempt` until its conditional commit lands: `Some` is its
    /// answer, `None` says another commit came first and it must run again
    /// from fresh reads. Pauses grow (with jitter) between attempts, so
    /// servers that collide spread out.
    fn until_committed<T>(
        &self,
        mut attempt: impl FnMut() -> Result<Option<T>, EngineError>,
    ) -> Result<T, EngineError> {
        for n in 0..MAX_COMMIT_ATTEMPTS {
            if let Some(answer) = attempt()? {
                return Ok(answer);
            }
            let mut jitter = [0u8; 1];
            rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut jitter);
            let ms = u64::from(n.min(5)) * 2 + u64::from(jitter[0] % 4);
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        Err(EngineError::Unavailable(format!(
            "the index was changed by other requests first on each of {MAX_COMMIT_ATTEMPTS} \
             attempts; nothing was applied: send the request again"
        )))
    }

    /// The index's scheme with its parameters, checked against the scheme
    /// the client speaks.
    fn scheme_of(meta: &IndexMeta, index: &str, spoken: &str) -> Result<Hosted, EngineError> {
        if !meta.scheme.eq_ignore_ascii_case(spoken) {
            return Err(EngineError::FailedPrecondition(format!(
                "index {index:?} is bound to scheme {}, not {:?}",
                meta.scheme,
                spoken.chars().take(64).collect::<String>()
            )));
        }
        let scheme = sesame_schemes::get(&meta.scheme)
            .filter(Scheme::hosted)
            .ok_or_else(|| {
                EngineError::FailedPrecondition(format!(
                    "index {index:?} is bound to scheme {}, which this server does not know",
                    meta.scheme
                ))
            })?;
        let params = Params::parse(&meta.params).map_err(|e| {
            EngineError::FailedPrecondition(format!(
                "index {index:?} has stored parameters that do not parse: {e}"
            ))
        })?;
        Ok(Hosted { scheme, params })
    }

    /// The index's commit token and metadata for a request that writes,
    /// taken under the index's exclusive lock (which the caller holds),
    /// the token first; a request id that
    /// was used before is refused here, and an exact repeat is answered
    /// with the first answer ([`EngineError::Replayed`]).
    fn meta_for_write(
        &self,
        tenant: &str,
        index: &str,
        replay: Option<(&[u8; 16], &[u8; 32])>,
    ) -> Result<(Token, IndexMeta), EngineError> {
        let (seen, meta) = self.token_and_meta(tenant, index)?;
        if let Some((id, digest)) = replay {
            if let Some(e) = self.replayed(tenant, index, id, digest)? {
                return Err(e);
            }
        }
        Ok((seen, meta))
    }

    fn replayed(
        &self,
        tenant: &str,
        index: &str,
        id: &[u8; 16],
        digest: &[u8; 32],
    ) -> Result<Option<EngineError>, EngineError> {
        let Some(bytes) = self.store.get(&keys::replay_key(tenant, index, id))? else {
            return Ok(None);
        };
        let record = ReplayRecord::decode(&bytes)?;
        if &record.digest == digest {
            // The first attempt's sweep may have failed after its commit.
            let _ = self.sweep(Some((tenant, index)));
        }
        Ok(Some(if &record.digest == digest {
            // The first attempt may have failed after its commit was
            // applied but before the store confirmed it (over Redis
            // Cluster: before a replica had it). Written again, the record
            // is confirmed as a commit is, and with it the commit before
            // it, so an answer from it promises what a first answer does.
            let mut again = WriteBatch::with_capacity(1);
            again.put(keys::replay_key(tenant, index, id), bytes);
            self.store.write(again)?;
            EngineError::Replayed {
                id: hex::encode(id),
                response: record.response,
            }
        } else {
            EngineError::AlreadyExists(format!(
                "request id {} was already used for another request",
                hex::encode(id)
            ))
        }))
    }

    /// Adds the replay record of a committed request to `batch`, and
    /// prunes old records now and then.
    fn remember(
        &self,
        batch: &mut WriteBatch,
        meta: &mut IndexMeta,
        (tenant, index): (&str, &str),
        id: &[u8; 16],
        (digest, response): ([u8; 32], Vec<u8>),
    ) -> Result<(), EngineError> {
        let now = now_unix();
        let record = ReplayRecord {
            digest,
            at_unix: now,
            response,
        };
        batch.put(keys::replay_key(tenant, index, id), record.encode()?);
        meta.records_since_prune += 1;
        if meta.records_since_prune >= PRUNE_EVERY {
            meta.records_since_prune = 0;
            for (k, v) in self
                .store
                .scan_prefix(&keys::replay_prefix(tenant, index))?
            {
                let old = ReplayRecord::decode(&v).map_or(true, |r| {
                    r.at_unix.saturating_add(REPLAY_HORIZON_SECS) < now
                });
                if old {
                    batch.delete(k);
                }
            }
        }
        Ok(())
    }

    /// Commits a request's batch: records its answer for replays when it
    /// carries a request id (`replay`: id, request digest, encoded answer),
    /// then the index's metadata, in one atomic write.
    /// The write is conditional on the index's commit token `seen`
    /// ([`Engine::commit_if`]): `Ok(false)` when another commit came first.
    /// What it adds to `batch` is taken out again when it fails.
    fn commit(
        &self,
        batch: &mut WriteBatch,
        meta: &mut IndexMeta,
        (tenant, index): (&str, &str),
        replay: Option<(&[u8; 16], [u8; 32], Vec<u8>)>,
        seen: &Token,
    ) -> Result<bool, EngineError> {
        let base = batch.len();
        if let Some((id, digest, stored)) = replay {
            self.remember(batch, meta, (tenant, index), id, (digest, stored))?;
        }
        batch.put(keys::meta_key(tenant, index), meta.encode()?);
        let applied = self.commit_if(batch, (tenant, index), seen)?;
        if !applied {
            batch.truncate(base);
        }
        Ok(applied)
    }

    /// Commits a request's batch as [`Engine::commit`] does, remembering
    /// `response` as its answer when the request has an id, and returns
    /// the response (`None` when another commit came first).
    fn commit_answer<M: prost::Message>(
        &self,
        batch: &mut WriteBatch,
        meta: &mut IndexMeta,
        index: (&str, &str),
        replay: Option<(&[u8; 16], [u8; 32])>,
        response: M,
        seen: &Token,
    ) -> Result<Option<M>, EngineError> {
        let replay = replay.map(|(id, digest)| (id, digest, response.encode_to_vec()));
        Ok(self
            .commit(batch, meta, index, replay, seen)?
            .then_some(response))
    }

    /// Runs scheme messages against a fresh server over a transaction.
    fn run(
        &self,
        what: (&str, &str),
        scheme: &Hosted,
        (meta, generation): (&IndexMeta, u64),
        messages: &[Vec<u8>],
    ) -> Result<Run, EngineError> {
        let (overlay, packed) = self.transaction(meta, what, generation);
        let view = self.view_log.as_ref().map(|_| {
            let v = sesame_core::view::View::new();
            v.start();
            v
        });
        let (answered, report) = ServerReport::measure(
            || overlay.io_counts(),
            || {
                let mut server = match &view {
                    Some(v) => Box::new(sesame_core::view::RecordingService::new(
                        scheme.server(Arc::new(sesame_core::view::RecordingStore::new(
                            overlay.clone(),
                            v.clone(),
                        )))?,
                        v.clone(),
                    )),
                    None => scheme.server(overlay.clone())?,
                };
                let responses = messages
                    .iter()
                    .map(|m| server.handle(m))
                    .collect::<sesame_core::Result<Vec<_>>>();
                Ok::<_, EngineError>((responses, server.write_once()))
            },
        );
        if let (Some(log), Some(v)) = (&self.view_log, &view) {
            log.operation(what.0, what.1, "Call", &v.take())?;
        }
        let (responses, write_once) = answered?;
        let responses = responses.map_err(|e| {
            if overlay.over_limit() {
                EngineError::ResourceExhausted(format!(
                    "the request writes more than the server's limit of {} bytes per transaction",
                    self.limits.max_transaction_bytes
                ))
            } else {
                EngineError::from_core(e)
            }
        })?;
        Ok(Run {
            responses,
            report,
            overlay,
            packed,
            write_once,
        })
    }

    /// A transaction over one generation of an index's entries: over the
    /// packed view of its chunks when the index is packed (returned too,
    /// for [`Engine::entry_writes`]).
    fn transaction(
        &self,
        meta: &IndexMeta,
        (tenant, index): (&str, &str),
        generation: u64,
    ) -> (Arc<Overlay>, Option<Arc<Packed>>) {
        let limit = self.limits.max_transaction_bytes;
        if meta.packed {
            let packed = Arc::new(Packed::new(
                self.store.clone(),
                meta.chunks_prefix(tenant, index, generation),
            ));
            let overlay = Overlay::new(packed.clone(), Vec::new(), limit);
            (Arc::new(overlay), Some(packed))
        } else {
            let prefix = meta.generation_prefix(tenant, index, generation);
            (
                Arc::new(Overlay::new(self.store.clone(), prefix, limit)),
                None,
            )
        }
    }

    /// The store writes that apply a transaction's writes `batch`: the
    /// chunks they change for a packed index, else the batch itself. For
    /// a scheme whose server writes each key once, a batch that would
    /// change a stored value is refused ([`Engine::check_write_once`]).
    fn entry_writes(
        &self,
        batch: WriteBatch,
        packed: Option<&Packed>,
        write_once: bool,
    ) -> Result<WriteBatch, EngineError> {
        let Some(packed) = packed else {
            if write_once {
                self.check_write_once(&batch)?;
            }
            return Ok(batch);
        };
        let plan = packed.plan(&batch)?;
        if write_once && plan.overwrites > 0 {
            return Err(overwrite_conflict(plan.overwrites));
        }
        Ok(plan.batch)
    }

    /// Refuses a batch that would change a stored value, for schemes whose
    /// server writes each key once: two clients updated from the same
    /// state, or a stale update was sent. Nothing is applied.
    fn check_write_once(&self, batch: &WriteBatch) -> Result<(), EngineError> {
        let puts: Vec<(&[u8], &[u8])> = batch
            .ops()
            .iter()
            .filter_map(|op| match op {
                sesame_core::WriteOp::Put { key, value } => {
                    Some((key.as_slice(), value.as_slice()))
                }
                sesame_core::WriteOp::Delete { .. } => None,
            })
            .collect();
        let keys: Vec<&[u8]> = puts.iter().map(|(k, _)| *k).collect();
        let stored = self.store.get_many(&keys)?;
        let conflicts = puts
            .iter()
            .zip(&stored)
            .filter(|((_, new), old)| old.as_deref().is_some_and(|old| old != *new))
            .count();
        if conflicts > 0 {
            return Err(overwrite_conflict(conflicts));
        }
        Ok(())
    }

    // ---- indexes (creation: `indexes.rs`) -----------------------------

    /// Removes an index with its entries, documents and replay records, in
    /// one transaction, then gives back its place under the tenant's limit.
    pub fn drop_index(
        &self,
        tenant: &str,
        req: proto::DropIndexRequest,
    ) -> Result<proto::DropIndexResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        let lock = self.lock_of(tenant, &req.index);
        let _g = lock.write();
        let dropped = self.until_committed(|| self.drop_index_once(tenant, &req.index))?;
        self.release_place(tenant, &req.index)?;
        Ok(dropped)
    }

    fn drop_index_once(
        &self,
        tenant: &str,
        index: &str,
    ) -> Result<Option<proto::DropIndexResponse>, EngineError> {
        let (seen, meta) = self.token_and_meta(tenant, index)?;
        let mut batch = WriteBatch::new();
        for prefix in [
            meta.entries_prefix(tenant, index),
            keys::doc_prefix(tenant, index),
            keys::replay_prefix(tenant, index),
            keys::record_prefix(tenant, index),
            keys::sweep_prefix(tenant, index),
        ] {
            for (k, _) in self.store.scan_prefix(&prefix)? {
                batch.delete(k);
            }
        }
        let removed = batch.len() as u64;
        batch.delete(keys::meta_key(tenant, index));
        let token = keys::commit_key(tenant, index);
        batch.delete(token.clone());
        if !self.write_swept(
            &[(token.as_slice(), seen.as_deref())],
            &batch,
            (tenant, index),
        )? {
            self.conflicts.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        }
        Ok(Some(proto::DropIndexResponse { removed }))
    }

    /// The tenant's indexes, by name.
    pub fn list_indexes(
        &self,
        tenant: &str,
        _req: proto::ListIndexesRequest,
    ) -> Result<proto::ListIndexesResponse, EngineError> {
        let prefix = keys::meta_prefix(tenant);
        let mut indexes = Vec::new();
        for (k, v) in self.store.scan_prefix(&prefix)? {
            let name = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
            indexes.push(info(&name, &IndexMeta::decode(&v)?));
        }
        Ok(proto::ListIndexesResponse { indexes })
    }

    /// The tenant's indexes and the server's counters.
    pub fn stats(
        &self,
        tenant: &str,
        _req: proto::StatsRequest,
    ) -> Result<proto::StatsResponse, EngineError> {
        let indexes = self
            .list_indexes(tenant, proto::ListIndexesRequest {})?
            .indexes;
        Ok(proto::StatsResponse {
            indexes,
            uptime_seconds: self.started.elapsed().as_secs(),
            requests: self.requests.load(Ordering::Relaxed),
            store: self.store.backend().to_owned(),
        })
    }

    // ---- scheme calls --------------------------------------------------

    /// Runs scheme messages on one generation of an index and commits
    /// what they wrote, with the index's metadata and (given a request id)
    /// the replay record, in one transaction.
    pub fn call(
        &self,
        tenant: &str,
        req: proto::CallRequest,
    ) -> Result<proto::CallResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        let id = request_id(&req.request_id)?;
        if req.messages.is_empty() {
            return Err(EngineError::InvalidArgument(
                "a call carries at least one scheme message".into(),
            ));
        }
        if req.messages.len() > self.limits.max_messages_per_call {
            return Err(EngineError::ResourceExhausted(format!(
                "a call carries at most {} scheme messages",
                self.limits.max_messages_per_call
            )));
        }
        let digest = id.map(|_| {
            let mut d = RequestDigest::new("call");
            d.part(req.index.as_bytes())
                .part(req.scheme.as_bytes())
                .part(&req.generation.to_be_bytes());
            for m in &req.messages {
                d.part(m);
            }
            d.finish()
        });
        let lock = self.lock_of(tenant, &req.index);
        let first = {
            let _g = lock.read();
            let (seen, meta) = self.token_and_meta(tenant, &req.index)?;
            let scheme = Self::scheme_of(&meta, &req.index, &req.scheme)?;
            if let (Some(id), Some(digest)) = (&id, &digest) {
                if let Some(e) = self.replayed(tenant, &req.index, id, digest)? {
                    return Err(e);
                }
            }
            let run = self.run(
                (tenant, &req.index),
                &scheme,
                (&meta, req.generation),
                &req.messages,
            )?;
            if !run.overlay.has_writes() {
                return Ok(proto::CallResponse {
                    messages: run.responses,
                    report: wire::encode(&run.report)?,
                });
            }
            (run, seen, meta)
        };
        // It writes: commit alone in this server, conditionally on the
        // token the run saw; run again when another commit came in since.
        let _g = lock.write();
        let start = Instant::now();
        let first_ns = first.0.report.handle_ns;
        let mut first = Some(first);
        let mut run = self.until_committed(|| {
            // The first try commits the first run on the token it read (a
            // commit since then moved the token, and the write fails);
            // later tries read everything again and run again.
            let (seen, mut meta, run) = match first.take() {
                Some((run, seen, meta)) => (seen, meta, run),
                None => {
                    let (seen, meta) = self.token_and_meta(tenant, &req.index)?;
                    let scheme = Self::scheme_of(&meta, &req.index, &req.scheme)?;
                    if let (Some(id), Some(digest)) = (&id, &digest) {
                        if let Some(e) = self.replayed(tenant, &req.index, id, digest)? {
                            return Err(e);
                        }
                    }
                    let run = self.run(
                        (tenant, &req.index),
                        &scheme,
                        (&meta, req.generation),
                        &req.messages,
                    )?;
                    (seen, meta, run)
                }
            };
            let mut writes = WriteBatch::new();
            run.overlay.drain_into(&mut writes);
            let mut batch = self.entry_writes(writes, run.packed.as_deref(), run.write_once)?;
            meta.updates += 1;
            // The stored answer carries no report (it is not this call's).
            let replay = id.as_ref().zip(digest).map(|(id, digest)| {
                let stored = proto::CallResponse {
                    messages: run.responses.clone(),
                    report: Vec::new(),
                };
                (id, digest, stored.encode_to_vec())
            });
            Ok(self
                .commit(&mut batch, &mut meta, (tenant, &req.index), replay, &seen)?
                .then_some(run))
        })?;
        // The server's time: the first run, then everything under the
        // exclusive lock (runs again, the commit, which the client waits
        // for).
        run.report.handle_ns =
            first_ns.saturating_add(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
        Ok(proto::CallResponse {
            messages: run.responses,
            report: wire::encode(&run.report)?,
        })
    }

    // ---- bulk upload ---------------------------------------------------

    /// Starts an upload into generation `start.generation` of an index.
    pub fn start_upload(
        &self,
        tenant: &str,
        start: proto::UploadStart,
    ) -> Result<Upload, EngineError> {
        keys::check_name("index", &start.index)?;
        let id = request_id(&start.request_id)?;
        let meta = self.meta(tenant, &start.index)?;
        let scheme = Self::scheme_of(&meta, &start.index, &start.scheme)?;
        let (overlay, packed) = self.transaction(&meta, (tenant, &start.index), start.generation);
        // With `--record-view`, each message's view is its own operation.
        let view = self.view_log.as_ref().map(|_| {
            let v = sesame_core::view::View::new();
            v.start();
            v
        });
        let server: Box<dyn Service> = match &view {
            Some(v) => Box::new(sesame_core::view::RecordingService::new(
                scheme.server(Arc::new(sesame_core::view::RecordingStore::new(
                    overlay.clone(),
                    v.clone(),
                )))?,
                v.clone(),
            )),
            None => scheme.server(overlay.clone())?,
        };
        let mut digest = RequestDigest::new("upload");
        digest
            .part(start.index.as_bytes())
            .part(start.scheme.as_bytes())
            .part(&start.generation.to_be_bytes());
        Ok(Upload {
            tenant: tenant.to_owned(),
            index: start.index,
            generation: start.generation,
            request_id: id,
            digest,
            overlay,
            packed,
            server,
            view,
            messages: 0,
            charge: Charge {
                budget: self.uploads.clone(),
                tenant: tenant.to_owned(),
                bytes: 0,
            },
        })
    }

    /// Handles one message of an upload (buffered, not yet visible).
    pub fn upload_message(
        &self,
        upload: &mut Upload,
        message: &[u8],
    ) -> Result<proto::UploadResponse, EngineError> {
        let buffered = upload.overlay.buffered_bytes();
        let overlay = upload.overlay.clone();
        let server = &mut upload.server;
        let (result, report) =
            ServerReport::measure(|| overlay.io_counts(), || server.handle(message));
        if let (Some(log), Some(v)) = (&self.view_log, &upload.view) {
            log.operation(&upload.tenant, &upload.index, "Upload", &v.take())?;
        }
        let response = result.map_err(|e| {
            if upload.overlay.over_limit() {
                EngineError::ResourceExhausted(format!(
                    "the upload writes more than the server's limit of {} bytes",
                    self.limits.max_transaction_bytes
                ))
            } else {
                EngineError::from_core(e)
            }
        })?;
        // Held in memory until the commit: within the server's and the
        // tenant's budget, or the upload ends here (its bytes are given
        // back when it is dropped).
        let added = upload.overlay.buffered_bytes().saturating_sub(buffered);
        self.uploads
            .charge(&mut upload.charge, added, &self.limits)?;
        upload.messages += 1;
        upload.digest.part(message);
        Ok(proto::UploadResponse {
            message: response,
            committed: false,
            report: wire::encode(&report)?,
        })
    }

    /// Commits an upload: every entry it wrote, the index's metadata and
    /// (given a request id) the replay record, in one transaction.
    pub fn commit_upload(&self, upload: Upload) -> Result<proto::UploadResponse, EngineError> {
        let Upload {
            tenant,
            index,
            generation,
            request_id,
            digest,
            overlay,
            packed,
            ..
        } = upload;
        let digest = digest.finish();
        let lock = self.lock_of(&tenant, &index);
        let _g = lock.write();
        // Plain writes are the batch itself (a failed commit takes back
        // what it added); packed ones are planned into it on every try.
        let (mut batch, mut writes) = (WriteBatch::new(), WriteBatch::new());
        overlay.drain_into(if packed.is_some() {
            &mut writes
        } else {
            &mut batch
        });
        self.until_committed(|| {
            // The index may have been dropped meanwhile.
            let (seen, mut meta) =
                self.meta_for_write(&tenant, &index, request_id.as_ref().zip(Some(&digest)))?;
            // Planned after the token is read: the commit is conditional
            // on it, so chunks changed since fail the commit.
            if let Some(packed) = &packed {
                batch = packed.plan(&writes)?.batch;
            }
            meta.uploads += 1;
            meta.generation = generation;
            let response = proto::UploadResponse {
                message: Vec::new(),
                committed: true,
                report: Vec::new(),
            };
            self.commit_answer(
                &mut batch,
                &mut meta,
                (&tenant, &index),
                request_id.as_ref().zip(Some(digest)),
                response,
                &seen,
            )
        })
    }

    /// Removes every generation of an index but `keep` (with
    /// `only_older`, only those older than `keep`).
    pub fn drop_generations(
        &self,
        tenant: &str,
        req: proto::DropGenerationsRequest,
    ) -> Result<proto::DropGenerationsResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        let lock = self.lock_of(tenant, &req.index);
        let _g = lock.write();
        self.until_committed(|| self.drop_generations_once(tenant, &req))
    }

    fn drop_generations_once(
        &self,
        tenant: &str,
        req: &proto::DropGenerationsRequest,
    ) -> Result<Option<proto::DropGenerationsResponse>, EngineError> {
        let (seen, meta) = self.token_and_meta(tenant, &req.index)?;
        let keep = meta.generation_prefix(tenant, &req.index, req.keep);
        let prefix = meta.entries_prefix(tenant, &req.index);
        let mut batch = WriteBatch::new();
        for (k, _) in self.store.scan_prefix(&prefix)? {
            if k.starts_with(&keep) {
                continue;
            }
            if req.only_older {
                // The generation is the decimal number after the prefix.
                let number = k[prefix.len()..]
                    .split(|&b| b == b'/')
                    .next()
                    .and_then(|g| std::str::from_utf8(g).ok())
                    .and_then(|g| g.parse::<u64>().ok());
                if number.is_none_or(|g| g > req.keep) {
                    continue;
                }
            }
            batch.delete(k);
        }
        let removed = batch.len() as u64;
        Ok(self
            .commit_if(&mut batch, (tenant, &req.index), &seen)?
            .then_some(proto::DropGenerationsResponse { removed }))
    }

    // ---- documents -----------------------------------------------------

    fn check_documents(&self, n: usize) -> Result<(), EngineError> {
        if n > self.limits.max_documents_per_request {
            return Err(EngineError::ResourceExhausted(format!(
                "a request names at most {} documents",
                self.limits.max_documents_per_request
            )));
        }
        Ok(())
    }

    /// Stores encrypted documents, with the index's document count (and
    /// the replay record) in the same transaction.
    pub fn put_documents(
        &self,
        tenant: &str,
        req: proto::PutDocumentsRequest,
    ) -> Result<proto::PutDocumentsResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        self.check_documents(req.documents.len())?;
        let id = request_id(&req.request_id)?;
        let digest = id.map(|_| {
            let mut d = RequestDigest::new("put-documents");
            d.part(req.index.as_bytes());
            for doc in &req.documents {
                d.part(&doc.id.to_be_bytes()).part(&doc.blob);
            }
            d.finish()
        });
        let lock = self.lock_of(tenant, &req.index);
        let _g = lock.write();
        self.until_committed(|| self.put_documents_once(tenant, &req, id.as_ref(), digest))
    }

    fn put_documents_once(
        &self,
        tenant: &str,
        req: &proto::PutDocumentsRequest,
        id: Option<&[u8; 16]>,
        digest: Option<[u8; 32]>,
    ) -> Result<Option<proto::PutDocumentsResponse>, EngineError> {
        let (seen, mut meta) = self.meta_for_write(tenant, &req.index, id.zip(digest.as_ref()))?;
        let prefix = keys::doc_prefix(tenant, &req.index);
        // A stored document is never replaced by other content: two
        // clients sharing one profile's ids would otherwise lose one's
        // documents silently. The same content again is a no-op.
        let docs: Vec<(u64, &[u8])> = req
            .documents
            .iter()
            .map(|d| (d.id, d.blob.as_slice()))
            .collect();
        let new = documents::new_documents(self.store.as_ref(), &prefix, &docs)?.map_err(
            |documents::Conflict(id)| {
                EngineError::Conflict(format!(
                    "document {id} is already stored with other content; nothing was stored \
                     (is another client using the same profile?)"
                ))
            },
        )?;
        let added = new.len() as u64;
        let mut batch = WriteBatch::with_capacity(docs.len() * 2 + 3);
        documents::put(&mut batch, &prefix, new);
        let bytes: usize = batch
            .ops()
            .iter()
            .map(|op| match op {
                sesame_core::WriteOp::Put { key, value } => key.len() + value.len(),
                sesame_core::WriteOp::Delete { key } => key.len(),
            })
            .sum();
        if bytes > self.limits.max_transaction_bytes {
            return Err(EngineError::ResourceExhausted(format!(
                "the request writes more than the server's limit of {} bytes per transaction",
                self.limits.max_transaction_bytes
            )));
        }
        meta.documents += added;
        self.log_batch(tenant, &req.index, "PutDocuments", &batch)?;
        let response = proto::PutDocumentsResponse { added };
        self.commit_answer(
            &mut batch,
            &mut meta,
            (tenant, &req.index),
            id.zip(digest),
            response,
            &seen,
        )
    }

    /// Encrypted documents, in the order asked.
    pub fn get_documents(
        &self,
        tenant: &str,
        req: proto::GetDocumentsRequest,
    ) -> Result<proto::GetDocumentsResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        self.check_documents(req.ids.len())?;
        let lock = self.lock_of(tenant, &req.index);
        let _g = lock.read();
        self.meta(tenant, &req.index)?;
        let prefix = keys::doc_prefix(tenant, &req.index);
        let found = documents::read(self.store.as_ref(), &prefix, &req.ids)?;
        if let Some(log) = &self.view_log {
            let events: Vec<sesame_core::view::Event> = req
                .ids
                .iter()
                .zip(&found)
                .map(|(&id, v)| sesame_core::view::Event::Read {
                    key: documents::head_key(&prefix, id),
                    size: v.as_ref().map(Vec::len),
                })
                .collect();
            log.operation(tenant, &req.index, "GetDocuments", &events)?;
        }
        let documents = found
            .into_iter()
            .map(|v| proto::MaybeDocument {
                found: v.is_some(),
                blob: v.unwrap_or_default(),
            })
            .collect();
        Ok(proto::GetDocumentsResponse { documents })
    }

    /// Deletes documents.
    pub fn delete_documents(
        &self,
        tenant: &str,
        req: proto::DeleteDocumentsRequest,
    ) -> Result<proto::DeleteDocumentsResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        self.check_documents(req.ids.len())?;
        let id = request_id(&req.request_id)?;
        let digest = id.map(|_| {
            let mut d = RequestDigest::new("delete-documents");
            d.part(req.index.as_bytes());
            for i in &req.ids {
                d.part(&i.to_be_bytes());
            }
            d.finish()
        });
        let lock = self.lock_of(tenant, &req.index);
        let _g = lock.write();
        self.until_committed(|| self.delete_documents_once(tenant, &req, id.as_ref(), digest))
    }

    fn delete_documents_once(
        &self,
        tenant: &str,
        req: &proto::DeleteDocumentsRequest,
        id: Option<&[u8; 16]>,
        digest: Option<[u8; 32]>,
    ) -> Result<Option<proto::DeleteDocumentsResponse>, EngineError> {
        let (seen, mut meta) = self.meta_for_write(tenant, &req.index, id.zip(digest.as_ref()))?;
        let prefix = keys::doc_prefix(tenant, &req.index);
        let mut batch = WriteBatch::new();
        let deleted = documents::delete(self.store.as_ref(), &prefix, &req.ids, &mut batch)?;
        let gone = deleted.iter().filter(|&&d| d).count();
        meta.documents = meta.documents.saturating_sub(gone as u64);
        let response = proto::DeleteDocumentsResponse { deleted };
        self.log_batch(tenant, &req.index, "DeleteDocuments", &batch)?;
        self.commit_answer(
            &mut batch,
            &mut meta,
            (tenant, &req.index),
            id.zip(digest),
            response,
            &seen,
        )
    }

    /// Identifiers of every stored document, ascending.
    pub fn list_documents(
        &self,
        tenant: &str,
        req: proto::ListDocumentsRequest,
    ) -> Result<proto::ListDocumentsResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        let lock = self.lock_of(tenant, &req.index);
        let _g = lock.read();
        self.meta(tenant, &req.index)?;
        let prefix = keys::doc_prefix(tenant, &req.index);
        let ids = documents::list(self.store.as_ref(), &prefix)?;
        Ok(proto::ListDocumentsResponse { ids })
    }

    // ---- records -------------------------------------------------------

    /// Reads records kept beside an index, with their versions; a record
    /// at the version the reader says it knows comes without its value.
    pub fn read_records(
        &self,
        tenant: &str,
        req: proto::ReadRecordsRequest,
    ) -> Result<proto::ReadRecordsResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        check_record_count(req.names.len(), self.limits.max_messages_per_call)?;
        if !req.known.is_empty() && req.known.len() != req.names.len() {
            return Err(EngineError::InvalidArgument(
                "`known` gives one version per name, or none".into(),
            ));
        }
        for name in &req.names {
            keys::check_name("record", name)?;
        }
        let lock = self.lock_of(tenant, &req.index);
        let _g = lock.read();
        self.meta(tenant, &req.index)?;
        let keys: Vec<Vec<u8>> = req
            .names
            .iter()
            .map(|n| keys::record_key(tenant, &req.index, n))
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let mut records = Vec::with_capacity(req.names.len());
        for (i, (name, stored)) in req
            .names
            .into_iter()
            .zip(self.store.get_many(&refs)?)
            .enumerate()
        {
            let mut record = decode_record(name, stored.as_deref())?;
            if req.known.get(i) == Some(&record.version) {
                record.value.clear();
            }
            records.push(record);
        }
        Ok(proto::ReadRecordsResponse { records })
    }

    /// Writes records if each is at the version the request expects, all
    /// in one transaction under the index's exclusive lock; otherwise
    /// writes nothing and answers every record as it is.
    pub fn write_records(
        &self,
        tenant: &str,
        req: proto::WriteRecordsRequest,
    ) -> Result<proto::WriteRecordsResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        if req.writes.is_empty() {
            return Err(EngineError::InvalidArgument(
                "a record write names at least one record".into(),
            ));
        }
        check_record_count(req.writes.len(), self.limits.max_messages_per_call)?;
        let mut names = std::collections::HashSet::new();
        for w in &req.writes {
            keys::check_name("record", &w.name)?;
            if !names.insert(w.name.as_str()) {
                return Err(EngineError::InvalidArgument(format!(
                    "record {:?} is written twice in one request",
                    w.name
                )));
            }
        }
        let lock = self.lock_of(tenant, &req.index);
        let _g = lock.write();
        self.until_committed(|| self.write_records_once(tenant, &req))
    }

    /// One try of [`Engine::write_records`]: its write is conditional on
    /// every record still holding the bytes read here, so two servers
    /// cannot both move a record from one version.
    fn write_records_once(
        &self,
        tenant: &str,
        req: &proto::WriteRecordsRequest,
    ) -> Result<Option<proto::WriteRecordsResponse>, EngineError> {
        self.meta(tenant, &req.index)?;
        let keys: Vec<Vec<u8>> = req
            .writes
            .iter()
            .map(|w| keys::record_key(tenant, &req.index, &w.name))
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let stored = self.store.get_many(&refs)?;
        let mut current = Vec::with_capacity(req.writes.len());
        for (w, stored) in req.writes.iter().zip(&stored) {
            current.push(decode_record(w.name.clone(), stored.as_deref())?);
        }
        if req
            .writes
            .iter()
            .zip(&current)
            .any(|(w, c)| w.expected != ANY_VERSION && w.expected != c.version)
        {
            return Ok(Some(proto::WriteRecordsResponse {
                committed: false,
                current,
            }));
        }
        let created = req
            .writes
            .iter()
            .zip(&current)
            .filter(|(w, c)| c.version == 0 && !w.delete)
            .count();
        if created > 0 {
            let held = self
                .store
                .scan_prefix(&keys::record_prefix(tenant, &req.index))?
                .len();
            if held + created > MAX_RECORDS_PER_INDEX {
                return Err(EngineError::ResourceExhausted(format!(
                    "an index keeps at most {MAX_RECORDS_PER_INDEX} records"
                )));
            }
        }
        let mut batch = WriteBatch::with_capacity(req.writes.len());
        for ((w, key), c) in req.writes.iter().zip(&keys).zip(&current) {
            if w.delete {
                batch.delete(key.clone());
            } else {
                let version = c.version.checked_add(1).ok_or_else(|| {
                    EngineError::InvalidArgument(format!("record {:?} has no next version", w.name))
                })?;
                let mut value = Vec::with_capacity(8 + w.value.len());
                value.extend_from_slice(&version.to_be_bytes());
                value.extend_from_slice(&w.value);
                batch.put(key.clone(), value);
            }
        }
        let expect: Vec<(&[u8], Option<&[u8]>)> = refs
            .iter()
            .zip(&stored)
            .map(|(k, v)| (*k, v.as_deref()))
            .collect();
        if !self.store.write_if(&expect, &batch)? {
            self.conflicts.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        }
        Ok(Some(proto::WriteRecordsResponse {
            committed: true,
            current: Vec::new(),
        }))
    }
}

/// `RecordWrite::expected` that accepts any version.
pub const ANY_VERSION: u64 = u64::MAX;

/// Records one index may keep (a client's state and its pending
/// operations, a few per device).
pub const MAX_RECORDS_PER_INDEX: usize = 1024;

fn check_record_count(n: usize, max: usize) -> Result<(), EngineError> {
    if n > max {
        return Err(EngineError::ResourceExhausted(format!(
            "a request names at most {max} records"
        )));
    }
    Ok(())
}

/// A stored record (version, then value) as the protocol gives it.
fn decode_record(name: String, stored: Option<&[u8]>) -> Result<proto::Record, EngineError> {
    let Some(stored) = stored else {
        return Ok(proto::Record {
            name,
            version: 0,
            value: Vec::new(),
        });
    };
    let (version, value) = stored
        .split_first_chunk::<8>()
        .ok_or_else(|| EngineError::Internal(format!("record {name:?} is damaged in the store")))?;
    Ok(proto::Record {
        name,
        version: u64::from_be_bytes(*version),
        value: value.to_vec(),
    })
}

/// The refusal of a write-once scheme's batch that would change
/// `conflicts` stored values.
fn overwrite_conflict(conflicts: usize) -> EngineError {
    EngineError::Conflict(format!(
        "the update would overwrite {conflicts} stored index entries with other content \
         (is another client using the same profile?); nothing was applied"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sesame_store::MemoryStore;
    use std::collections::BTreeMap;

    /// Creates index `index` of tenant `t` bound to `scheme`.
    fn create(engine: &Engine, index: &str, scheme: &str) -> Result<proto::IndexInfo, EngineError> {
        engine.create_index(
            "t",
            proto::CreateIndexRequest {
                index: index.into(),
                scheme: scheme.into(),
                params: String::new(),
                request_id: Vec::new(),
            },
        )
    }

    fn write(name: &str, expected: u64, value: Option<&[u8]>) -> proto::RecordWrite {
        proto::RecordWrite {
            name: name.into(),
            expected,
            delete: value.is_none(),
            value: value.unwrap_or_default().to_vec(),
        }
    }

    /// A memory store whose reads take a while, so that requests of two
    /// engines overlap between their reads and their commits.
    struct Unhurried(MemoryStore);

    impl Store for Unhurried {
        fn get(&self, key: &[u8]) -> sesame_core::Result<Option<Vec<u8>>> {
            std::thread::sleep(std::time::Duration::from_micros(50));
            self.0.get(key)
        }
        fn get_many(&self, keys: &[&[u8]]) -> sesame_core::Result<Vec<Option<Vec<u8>>>> {
            std::thread::sleep(std::time::Duration::from_micros(50));
            self.0.get_many(keys)
        }
        fn write(&self, batch: WriteBatch) -> sesame_core::Result<()> {
            self.0.write(batch)
        }
        fn write_if(
            &self,
            expect: &[(&[u8], Option<&[u8]>)],
            batch: &WriteBatch,
        ) -> sesame_core::Result<bool> {
            self.0.write_if(expect, batch)
        }
        fn scan_prefix(&self, prefix: &[u8]) -> sesame_core::Result<Vec<(Vec<u8>, Vec<u8>)>> {
            self.0.scan_prefix(prefix)
        }
        fn scan_from(
            &self,
            prefix: &[u8],
            from: &[u8],
            descending: bool,
            limit: usize,
        ) -> sesame_core::Result<Vec<(Vec<u8>, Vec<u8>)>> {
            std::thread::sleep(std::time::Duration::from_micros(50));
            self.0.scan_from(prefix, from, descending, limit)
        }
        fn io_counts(&self) -> sesame_core::IoCounts {
            self.0.io_counts()
        }
        fn ordered_probes(&self) -> bool {
            true
        }
        fn backend(&self) -> &'static str {
            "unhurried-memory"
        }
    }

    /// Two engines over one store are two servers on one database: each
    /// has its own in-memory locks, so only the store's conditional
    /// commits keep their read-modify-writes of one index apart. Threads
    /// of both add documents (each add rewrites the index's document
    /// count) and move one record version by version; no add and no
    /// version is lost, and the name of a new index is taken once.
    impl Engine {
        fn tenant_indexes(&self, tenant: &str) -> Result<BTreeMap<String, u64>, EngineError> {
            Ok(self.read_places(tenant)?.1)
        }

        fn put_tenant_indexes(&self, tenant: &str, names: &BTreeMap<String, u64>) {
            self.store
                .put(
                    &keys::tenant_key(tenant),
                    &wire::encode(names).expect("encoded"),
                )
                .expect("a put");
        }
    }

    /// A request whose commit was applied but whose confirmation failed
    /// (the store's answer lost, as when a Redis master has no replica to
    /// confirm to) is answered from its replay record only once the store
    /// confirms the record: while writes fail, the retry fails too; once
    /// they work, it gets the first answer, applied once.
    #[test]
    fn an_answer_from_a_replay_record_waits_for_the_store_to_confirm_it() {
        use sesame_store::faulty::{Fault, FaultyStore};
        let store = Arc::new(FaultyStore::new());
        let engine = Engine::new(store.clone(), Limits::default()).expect("a fresh engine");
        create(&engine, "a", "fast").expect("created");
        let put = || {
            engine.put_documents(
                "t",
                proto::PutDocumentsRequest {
                    index: "a".into(),
                    request_id: vec![7; 16],
                    documents: vec![proto::Document {
                        id: 1,
                        blob: vec![1; 8],
                    }],
                },
            )
        };
        store.fail(Fault::AnswerLost, 0);
        assert!(put().is_err(), "the commit's answer is lost");
        store.fail(Fault::Refused, 0);
        let retry = put().unwrap_err();
        assert!(
            !matches!(retry, EngineError::Replayed { .. }),
            "answered from an unconfirmed record: {retry:?}"
        );
        store.heal();
        let retry = put().unwrap_err();
        assert!(matches!(retry, EngineError::Replayed { .. }), "{retry:?}");
        let docs = documents::list(store.inner(), &keys::doc_prefix("t", "a")).expect("a scan");
        assert_eq!(docs.len(), 1, "applied once");
    }

    /// Two engines on one store (two servers) creating indexes of one
    /// tenant at once never pass its limit; a dropped index frees its
    /// place; a place reserved by a creation that never finished (a server
    /// that died between reserving and creating) is taken back once it is
    /// old, not while it is fresh.
    #[test]
    fn two_engines_keep_to_the_index_limit_together() {
        const LIMIT: usize = 3;
        const THREADS: usize = 8;
        let store = Arc::new(Unhurried(MemoryStore::new()));
        let limits = Limits {
            max_indexes_per_tenant: LIMIT,
            ..Limits::default()
        };
        let engines = [
            Engine::new(store.clone(), limits).expect("a fresh engine"),
            Engine::new(store.clone(), limits).expect("a second engine"),
        ];
        let create = |engine: &Engine, name: &str| create(engine, name, "fast");
        for round in 0..4 {
            let start = std::sync::Barrier::new(THREADS);
            let made = std::sync::atomic::AtomicUsize::new(0);
            std::thread::scope(|scope| {
                for t in 0..THREADS {
                    let (engine, start, made) = (&engines[t % 2], &start, &made);
                    scope.spawn(move || {
                        start.wait();
                        match create(engine, &format!("r{round}-{t}")) {
                            Ok(_) => {
                                made.fetch_add(1, Ordering::SeqCst);
                            }
                            Err(EngineError::ResourceExhausted(_)) => {}
                            Err(e) => panic!("{e:?}"),
                        }
                    });
                }
            });
            let listed = engines[0]
                .list_indexes("t", proto::ListIndexesRequest {})
                .expect("a list")
                .indexes;
            assert_eq!(listed.len(), LIMIT, "round {round}: {listed:?}");
            assert_eq!(made.load(Ordering::SeqCst), LIMIT, "round {round}");
            for i in listed {
                engines[1]
                    .drop_index("t", proto::DropIndexRequest { index: i.index })
                    .expect("dropped");
            }
        }
        // A reservation that never became an index: it holds its place
        // while fresh, and is taken back once old.
        for name in ["a", "b"] {
            create(&engines[0], name).expect("created");
        }
        let mut names = engines[0].tenant_indexes("t").expect("the record");
        names.insert("ghost".into(), now_unix());
        engines[0].put_tenant_indexes("t", &names);
        assert!(matches!(
            create(&engines[1], "c"),
            Err(EngineError::ResourceExhausted(_))
        ));
        names.insert("ghost".into(), now_unix() - RESERVATION_TTL_SECS - 1);
        engines[0].put_tenant_indexes("t", &names);
        create(&engines[1], "c").expect("the old reservation was taken back");
        let names = engines[0].tenant_indexes("t").expect("the record");
        assert_eq!(
            names.keys().map(String::as_str).collect::<Vec<_>>(),
            ["a", "b", "c"]
        );
    }

    #[test]
    fn two_engines_on_one_store_lose_no_commit() {
        const THREADS: u64 = 4;
        const ADDS: u64 = 60;
        let store = Arc::new(Unhurried(MemoryStore::new()));
        let engines = [
            Engine::new(store.clone(), Limits::default()).expect("a fresh engine"),
            Engine::new(store.clone(), Limits::default()).expect("a second engine"),
        ];
        let create = proto::CreateIndexRequest {
            index: "a".into(),
            scheme: "fast".into(),
            params: String::new(),
            request_id: Vec::new(),
        };
        engines[0]
            .create_index("t", create.clone())
            .expect("created");
        let again = engines[1].create_index("t", create).unwrap_err();
        assert!(matches!(again, EngineError::AlreadyExists(_)), "{again:?}");
        let start = std::sync::Barrier::new(THREADS as usize);
        std::thread::scope(|scope| {
            for t in 0..THREADS {
                let engine = &engines[(t % 2) as usize];
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    for i in 0..ADDS {
                        let added = engine
                            .put_documents(
                                "t",
                                proto::PutDocumentsRequest {
                                    index: "a".into(),
                                    request_id: Vec::new(),
                                    documents: vec![proto::Document {
                                        id: t * 1000 + i,
                                        blob: vec![t as u8; 8],
                                    }],
                                },
                            )
                            .expect("an add")
                            .added;
                        assert_eq!(added, 1);
                        loop {
                            let held = engine
                                .read_records(
                                    "t",
                                    proto::ReadRecordsRequest {
                                        index: "a".into(),
                                        names: vec!["n".into()],
                                        known: Vec::new(),
                                    },
                                )
                                .expect("a read")
                                .records[0]
                                .version;
                            let moved = engine
                                .write_records(
                                    "t",
                                    proto::WriteRecordsRequest {
                                        index: "a".into(),
                                        writes: vec![write("n", held, Some(&held.to_be_bytes()))],
                                    },
                                )
                                .expect("a record write");
                            if moved.committed {
                                break;
                            }
                        }
                    }
                });
            }
        });
        let info = engines[1]
            .list_indexes("t", proto::ListIndexesRequest {})
            .expect("a listing")
            .indexes;
        assert_eq!(info.len(), 1);
        assert_eq!(
            info[0].documents,
            THREADS * ADDS,
            "a document count was lost"
        );
        let n = engines[0]
            .read_records(
                "t",
                proto::ReadRecordsRequest {
                    index: "a".into(),
                    names: vec!["n".into()],
                    known: Vec::new(),
                },
            )
            .expect("a read")
            .records;
        assert_eq!(n[0].version, THREADS * ADDS, "a record version was lost");
        eprintln!(
            "two engines: {} and {} commits ran again",
            engines[0].commit_conflicts(),
            engines[1].commit_conflicts()
        );
    }

    #[test]
    fn records_are_compare_and_swap_all_or_nothing() {
        let store = Arc::new(MemoryStore::new());
        let engine = Engine::new(store.clone(), Limits::default()).expect("a fresh engine");
        let create = |index: &str| proto::CreateIndexRequest {
            index: index.into(),
            scheme: "fast".into(),
            params: String::new(),
            request_id: Vec::new(),
        };
        engine.create_index("t", create("a")).expect("created");
        let put = |writes: Vec<proto::RecordWrite>| {
            engine
                .write_records(
                    "t",
                    proto::WriteRecordsRequest {
                        index: "a".into(),
                        writes,
                    },
                )
                .expect("a write")
        };
        let read = |names: &[&str], known: Vec<u64>| {
            engine
                .read_records(
                    "t",
                    proto::ReadRecordsRequest {
                        index: "a".into(),
                        names: names.iter().map(|n| (*n).to_owned()).collect(),
                        known,
                    },
                )
                .expect("a read")
                .records
        };
        assert!(put(vec![write("state", 0, Some(b"one"))]).committed);
        // A stale version changes nothing, and says what is there.
        let r = put(vec![
            write("intent-x", 0, Some(b"i")),
            write("state", 0, Some(b"two")),
        ]);
        assert!(!r.committed);
        assert_eq!(
            r.current.iter().map(|c| c.version).collect::<Vec<_>>(),
            [0, 1]
        );
        assert_eq!(r.current[1].value, b"one");
        assert_eq!(read(&["intent-x"], vec![])[0].version, 0, "nothing applied");
        assert!(
            put(vec![
                write("intent-x", 0, Some(b"i")),
                write("state", 1, Some(b"two")),
            ])
            .committed
        );
        let got = read(&["state", "intent-x", "none"], vec![]);
        assert_eq!((got[0].version, got[0].value.as_slice()), (2, &b"two"[..]));
        assert_eq!((got[1].version, got[2].version), (1, 0));
        // A reader that knows the version gets no value.
        assert!(read(&["state"], vec![2])[0].value.is_empty());
        // Any version, and deletion.
        assert!(put(vec![write("state", ANY_VERSION, Some(b"three"))]).committed);
        assert_eq!(read(&["state"], vec![])[0].version, 3);
        assert!(put(vec![write("intent-x", 1, None)]).committed);
        assert_eq!(read(&["intent-x"], vec![])[0].version, 0);
        // Bad names and repeats are refused.
        for bad in [
            vec![write("a/b", 0, Some(b"x"))],
            vec![write("s", 0, Some(b"x")), write("s", 0, Some(b"y"))],
        ] {
            assert!(engine
                .write_records(
                    "t",
                    proto::WriteRecordsRequest {
                        index: "a".into(),
                        writes: bad
                    }
                )
                .is_err());
        }
        // Dropping the index drops its records.
        engine
            .drop_index("t", proto::DropIndexRequest { index: "a".into() })
            .expect("dropped");
        assert!(store.scan_prefix(b"v/").expect("a scan").is_empty());
    }

    #[test]
    fn only_older_generations_are_dropped_when_asked() {
        let store = Arc::new(MemoryStore::new());
        let engine = Engine::new(store.clone(), Limits::default()).expect("a fresh engine");
        create(&engine, "a", "pibas").expect("created");
        for g in [1u64, 2, 3, 10] {
            let mut k = keys::generation_prefix("t", "a", g);
            k.push(b'k');
            store.put(&k, b"v").expect("a put");
        }
        engine
            .drop_generations(
                "t",
                proto::DropGenerationsRequest {
                    index: "a".into(),
                    keep: 3,
                    only_older: true,
                },
            )
            .expect("dropped");
        let left: Vec<Vec<u8>> = store
            .scan_prefix(&keys::index_prefix("t", "a"))
            .expect("a scan")
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(left, [b"i/t/a/10/k".to_vec(), b"i/t/a/3/k".to_vec()]);
    }

    #[test]
    fn a_write_once_batch_that_changes_a_stored_value_is_a_conflict() {
        let store = Arc::new(MemoryStore::new());
        let engine = Engine::new(store.clone(), Limits::default()).expect("a fresh engine");
        store.put(b"k", b"first").expect("a memory write");
        let mut same = WriteBatch::new();
        same.put(b"k".to_vec(), b"first".to_vec())
            .put(b"new".to_vec(), b"x".to_vec())
            .delete(b"gone".to_vec());
        assert!(engine.check_write_once(&same).is_ok());
        let mut other = WriteBatch::new();
        other
            .put(b"new".to_vec(), b"x".to_vec())
            .put(b"k".to_vec(), b"second".to_vec());
        let err = engine.check_write_once(&other).unwrap_err();
        assert!(matches!(err, EngineError::Conflict(_)), "{err}");
    }

    /// FAST's entries as two engines on one store write them at once into
    /// one packed index: each commit rewrites the chunks its entries fall
    /// into, planned from the chunks as read after the commit token, so a
    /// plan made stale by the other engine's commit fails and is made
    /// again. Every entry of every call must be found at the end; an
    /// update that would change an entry is a conflict.
    #[test]
    fn two_engines_writing_one_packed_index_lose_no_entry() {
        use sesame_sse::fast::Request;
        const THREADS: u32 = 4;
        const CALLS: u32 = 25;
        const ENTRIES: u32 = 40;
        let store = Arc::new(Unhurried(MemoryStore::new()));
        let engines = [
            Engine::new(store.clone(), Limits::default()).expect("a fresh engine"),
            Engine::new(store.clone(), Limits::default()).expect("a second engine"),
        ];
        create(&engines[0], "a", "fast").expect("created");
        let meta = engines[1].meta("t", "a").expect("its record");
        assert!(meta.packed && meta.spread, "{meta:?}");
        let label = |t: u32, c: u32, e: u32| {
            let mut l = [0u8; 32];
            l[..12].copy_from_slice(
                &sha2::Sha256::digest([t, c, e].map(u32::to_be_bytes).concat())[..12],
            );
            l
        };
        let call = |engine: &Engine, entries: Vec<([u8; 32], [u8; 25])>| {
            let request = Request::Put {
                reset: false,
                entries,
            };
            engine.call(
                "t",
                proto::CallRequest {
                    index: "a".into(),
                    scheme: "fast".into(),
                    generation: 0,
                    request_id: Vec::new(),
                    messages: vec![wire::encode(&request).expect("encoded")],
                },
            )
        };
        let start = std::sync::Barrier::new(THREADS as usize);
        std::thread::scope(|scope| {
            for t in 0..THREADS {
                let engine = &engines[(t % 2) as usize];
                let (start, call) = (&start, &call);
                scope.spawn(move || {
                    start.wait();
                    for c in 0..CALLS {
                        let entries = (0..ENTRIES)
                            .map(|e| (label(t, c, e), [t as u8; 25]))
                            .collect();
                        call(engine, entries).expect("a call");
                    }
                });
            }
        });
        let chunks = meta.chunks_prefix("t", "a", 0);
        let stored = sesame_store::packed::pairs_under(store.as_ref(), &chunks[..chunks.len() - 1])
            .expect("the entries");
        assert_eq!(stored.len() as u32, THREADS * CALLS * ENTRIES);
        let view = sesame_store::packed::Packed::new(store.clone(), chunks.clone());
        for t in 0..THREADS {
            for c in 0..CALLS {
                for e in 0..ENTRIES {
                    let mut key = vec![b'e'];
                    key.extend_from_slice(&label(t, c, e));
                    let value = view.get(&key).expect("a read");
                    assert_eq!(value, Some(vec![t as u8; 25]), "entry {t}/{c}/{e}");
                }
            }
        }
        let before = store.scan_prefix(&chunks).expect("a scan");
        let err = call(&engines[0], vec![(label(1, 1, 1), [9; 25])]).unwrap_err();
        assert!(matches!(err, EngineError::Conflict(_)), "{err:?}");
        assert_eq!(store.scan_prefix(&chunks).expect("a scan"), before);
    }
}
