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
//!
//! This file holds the [`Engine`] type and what its parts share (the
//! index locks, the index's metadata and scheme, request ids and
//! digests); each concern has its own file in `engine/`:
//!
//! | file | what |
//! | --- | --- |
//! | `commit.rs` | conditional commits, their retries, replay records |
//! | `group.rs` | group commit: concurrent requests' commits in one store commit |
//! | `indexes.rs` | creating, dropping and listing indexes; generations |
//! | `calls.rs` | scheme calls: messages run over a transaction |
//! | `uploads.rs` | bulk uploads, buffered until their commit |
//! | `documents.rs` | encrypted documents |
//! | `shared_records.rs` | versioned records beside an index (devices' shared state) |
//! | `limits.rs` | request limits and the upload budget |
//! | `sweep.rs` | resumable deletion of spread entries |
//! | `store_id.rs` | the store's identity, said in `Health` |

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use sesame_core::view::{RecordingService, RecordingStore, View};
use sesame_core::{Params, Service, Store, WriteBatch};
use sesame_schemes::Scheme;
use sesame_store::overlay::Overlay;
use sha2::{Digest, Sha256};

use crate::error::EngineError;
use crate::keys;
use crate::proto;
use crate::records::IndexMeta;

mod calls;
mod chunk_cache;
mod commit;
mod compact;
mod documents;
mod group;
mod indexes;
mod limits;
mod shared_records;
mod store_id;
mod sweep;
#[cfg(test)]
mod tests;
mod uploads;

use commit::Token;
pub use commit::{MAX_COMMIT_ATTEMPTS, REPLAY_HORIZON_SECS};
pub use limits::{Limits, UploadBudget};
pub use shared_records::{ANY_VERSION, MAX_RECORDS_PER_INDEX};
pub use uploads::Upload;

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
    /// Commits of different indexes' requests shared (`engine/group.rs`).
    group: group::GroupCommit,
    /// Packed chunks kept between requests (`engine/chunk_cache.rs`).
    chunks: chunk_cache::ChunkCache,
    /// `--record-view`: the server's view, written down (research only).
    view_log: Option<Arc<crate::view_log::ViewLog>>,
    /// The store's identity (`engine/store_id.rs`); empty if it could not
    /// be read or made.
    store_id: String,
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

    /// The scheme's server half over a transaction `overlay`, recording
    /// what it sees into `view` when given (`--record-view`).
    fn server_over(
        &self,
        overlay: &Arc<Overlay>,
        view: Option<&View>,
    ) -> Result<Box<dyn Service>, EngineError> {
        match view {
            Some(v) => Ok(Box::new(RecordingService::new(
                self.server(Arc::new(RecordingStore::new(overlay.clone(), v.clone())))?,
                v.clone(),
            ))),
            None => self.server(overlay.clone()),
        }
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
        let store_id = store_id::store_id(store.as_ref()).unwrap_or_else(|e| {
            crate::log(&format!("the store's identity: {e}"));
            String::new()
        });
        let engine = Engine {
            store_id,
            store,
            limits,
            uploads: Arc::new(UploadBudget::default()),
            locks: Mutex::new(HashMap::new()),
            view_log: None,
            create: Mutex::new(()),
            started: Instant::now(),
            requests: AtomicU64::new(0),
            conflicts: AtomicU64::new(0),
            group: group::GroupCommit::default(),
            chunks: chunk_cache::ChunkCache::default(),
        };
        // Sweeps left by a server that stopped or failed (`engine/sweep.rs`).
        let _ = engine.sweep(None);
        Ok(engine)
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

    /// With `--record-view`, a started view for a scheme server to record
    /// into (its events written to the log as one operation).
    fn new_view(&self) -> Option<View> {
        self.view_log.as_ref().map(|_| {
            let v = View::new();
            v.start();
            v
        })
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

    /// The store's identity: the same for every server on one store
    /// (hex; empty if it could not be read or made).
    pub fn store_id(&self) -> &str {
        &self.store_id
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
}
