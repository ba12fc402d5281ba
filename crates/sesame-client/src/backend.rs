//! Where the server halves run: in-process over the profile's own store
//! ([`EmbeddedBackend`]), or on a Sesame server
//! ([`NetworkBackend`](crate::NetworkBackend)).
//!
//! A [`Session`](crate::Session) reaches its index and its documents only
//! through the channels a [`Backend`] hands out, so replacing the embedded
//! backend by a network one changes nothing above it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use sesame_core::{
    wire, Channel, LocalChannel, Meter, Params, Prefixed, Service, Store, Typed, WriteBatch,
};
use sesame_sse::KeywordScheme;
use sesame_store::overlay::Overlay;
use sesame_store::packed::{ChunkMemo, Packed};
use sesame_store::{MemoryStore, RedbStore, Space};

use crate::doc_service::DocServer;
use crate::error::{ClientError, Result};

/// The sending of an update's requests, ready to run on any thread
/// ([`Backend::update_job`]): it gives the answers, in order.
pub type UpdateJob = Box<dyn FnOnce() -> Result<Vec<Vec<u8>>> + Send>;

/// The server side of a profile's indexes, as the session sees it.
///
/// An index lives in numbered *generations*: a static scheme's rebuild
/// writes a fresh generation, the client state switches to it in one
/// atomic write, and the old generations are dropped afterwards, so a crash
/// at any point leaves a complete index that matches the client state.
pub trait Backend {
    /// A channel to the server half of `scheme` for generation `generation`
    /// of index `index`.
    fn index_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<Box<dyn Channel>>;

    /// A channel to the document service of index `index` (`Send`: a
    /// static rebuild stores documents from another thread).
    fn document_channel(&mut self, index: &str) -> Result<Box<dyn Channel + Send>>;

    /// Asks that the documents of index `index` be stored packed where
    /// this backend can ([`sesame_store::packed`]: many to one stored
    /// value, in chunks of about 16 KB), from the next
    /// [`Backend::document_channel`] on. A table asks it for its records
    /// (tens of bytes each, one redb pair each otherwise, in pages that
    /// an import in identifier order leaves half full); the documents of
    /// a document index (pieces of a page) stay as they are. The
    /// embedded backend packs an index's documents when its store has
    /// ordered probes and the index holds no document stored otherwise
    /// (a table made by an earlier version keeps its layout). The default
    /// keeps the layout every backend has (a server's store).
    fn pack_documents(&mut self, index: &str) {
        let _ = index;
    }

    /// Removes every generation of index `index` but `keep`.
    fn drop_other_generations(&mut self, index: &str, keep: u64) -> Result<()>;

    /// The meter every channel of this backend reports to.
    fn meter(&self) -> &Meter;

    /// A channel for the read-only rounds of an operation's preparation
    /// (an interactive update, a search that writes). The default is
    /// [`Backend::index_channel`]; the embedded backend refuses any write
    /// through it.
    fn read_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<Box<dyn Channel>> {
        self.index_channel(index, generation, scheme)
    }

    /// Forgets the answers kept for the operation `id`, once the client
    /// no longer needs them (its intent is completed). The default keeps
    /// nothing, so forgets nothing; a server prunes its own records.
    fn forget(&mut self, index: &str, id: [u8; 16]) -> Result<()> {
        let _ = (index, id);
        Ok(())
    }

    /// The largest message the server accepts, if it has a limit: the
    /// session splits its requests and documents under it, and refuses a
    /// document that cannot fit before it saves anything.
    fn max_message(&mut self) -> Result<Option<usize>> {
        Ok(None)
    }

    /// The most documents one document request may name, if the server
    /// has a limit: the session splits its document requests under it.
    fn max_documents(&mut self) -> Result<Option<usize>> {
        Ok(None)
    }

    /// Checks the store behind the backend for damage it can detect (see
    /// [`sesame_core::Store::verify`]); `Ok` where there is nothing the
    /// client can check.
    fn verify(&mut self) -> Result<()> {
        Ok(())
    }

    /// Checks generation `generation` of index `index` for damage the
    /// store's own check cannot see: the embedded backend decodes every
    /// chunk of a packed generation ([`Packed::check_chunks`]). `Ok` where
    /// there is nothing more to check (a server checks its own store).
    fn verify_index(&mut self, index: &str, generation: u64, scheme: &KeywordScheme) -> Result<()> {
        let _ = (index, generation, scheme);
        Ok(())
    }

    /// Merges the deltas of generation `generation` of index `index` into
    /// their chunks where this backend packs its entries in a store of its
    /// own ([`Packed::compact`]: the embedded store), so that each lookup
    /// of a search is one read of the store; returns how many chunks were
    /// rewritten. `Ok(0)` where there is nothing to merge here. A server
    /// merges on request (`NetworkBackend::compact_on_server`), which an
    /// import does not send: measured slower there.
    fn compact_index(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<usize> {
        let _ = (index, generation, scheme);
        Ok(0)
    }

    /// Where the bytes of the store's file go ([`sesame_store::Space`]);
    /// `None` where the backend has no file of its own (a server keeps
    /// its store; a store in memory).
    fn space(&mut self) -> Result<Option<Space>> {
        Ok(None)
    }

    /// Bytes of keys and values the store holds for `index`: `(index
    /// entries, documents)`, every generation and the stored documents
    /// counted, before the store's own overhead. `None` where the store
    /// is not here (a server).
    fn index_bytes(&mut self, index: &str) -> Result<Option<(u64, u64)>> {
        let _ = index;
        Ok(None)
    }

    /// Rewrites the store into a fresh file, giving back the free pages
    /// that copy-on-write commits leave ([`RedbStore::vacuum`]); the space
    /// before and after. `None` where the backend has no file of its own.
    fn vacuum(&mut self) -> Result<Option<(Space, Space)>> {
        Ok(None)
    }

    /// Sends the requests of one operation (a pending intent named `id`)
    /// and returns the responses, in order: [`Backend::update_job`], run
    /// here.
    fn apply_update(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
        id: [u8; 16],
        requests: &[Vec<u8>],
    ) -> Result<Vec<Vec<u8>>> {
        self.update_job(index, generation, scheme, id, requests.to_vec())?()
    }

    /// The sending of one operation's requests (a pending intent named
    /// `id`) as a job that gives the responses, in order, and that another
    /// thread may run: a session prepares its next update meanwhile. The
    /// requests are applied **once**: a repeat of `id` is answered with
    /// the first answers and applies nothing (the embedded backend keeps
    /// the answers in its store, in the same transaction as the
    /// operation's writes; a server keeps a replay record).
    ///
    /// The caller runs a job to its end before it asks this backend for
    /// anything else about the index. The default, for backends without a
    /// replay record, sends the requests at once, one by one over
    /// [`Backend::index_channel`], relies on each request being
    /// idempotent, and hands back a job that only returns the answers.
    fn update_job(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
        id: [u8; 16],
        requests: Vec<Vec<u8>>,
    ) -> Result<UpdateJob> {
        let _ = id;
        let mut channel = self.index_channel(index, generation, scheme)?;
        let answers = requests
            .iter()
            .map(|r| channel.call(r).map_err(ClientError::from))
            .collect();
        Ok(Box::new(move || answers))
    }

    /// A channel to generation `generation` of index `index`, hosted by
    /// the registry entry named `scheme` (of any family: a table's range
    /// indexes use it). `server` makes the entry's server half over a
    /// store, for a backend that runs it in this process; a remote
    /// server makes its own from the index's scheme and parameters.
    fn hosted_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &str,
        server: &dyn Fn(Arc<dyn Store>) -> sesame_core::Result<Box<dyn Service>>,
    ) -> Result<Box<dyn Channel>>;

    /// As [`Backend::hosted_channel`], as one transaction: the server
    /// half reads its own writes, and nothing is visible (or durable)
    /// before [`SetupChannel::commit`], which applies everything at once.
    /// A table's range operations go through it, so that a batch of
    /// insertions costs one commit, not one per write.
    fn hosted_transaction(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &str,
        server: &dyn Fn(Arc<dyn Store>) -> sesame_core::Result<Box<dyn Service>>,
    ) -> Result<Box<dyn SetupChannel>>;

    /// Makes sure index `index` exists where the server halves run, bound
    /// to `scheme` with `params` (a server creates it if it is missing;
    /// the embedded store needs nothing).
    fn ensure_index(&mut self, index: &str, scheme: &str, params: &Params) -> Result<()> {
        let _ = (index, scheme, params);
        Ok(())
    }

    /// Removes index `index` (every generation) where the server halves
    /// run.
    fn remove_index(&mut self, index: &str) -> Result<()>;

    /// The names of the profile's indexes where the server halves run,
    /// if the backend can list them (a server); `None` where it cannot.
    fn index_names(&mut self) -> Result<Option<Vec<String>>> {
        Ok(None)
    }

    /// Reads records kept beside index `index` (a client state its
    /// devices share, [`crate::session`]): one per name, in order, version
    /// 0 when absent; a record at the version `known` gives for it comes
    /// without its value. `None`: this backend keeps no records (the
    /// embedded store, whose profile is the only device, or an older
    /// server).
    fn read_records(
        &mut self,
        index: &str,
        names: &[String],
        known: &[u64],
    ) -> Result<Option<Vec<IndexRecord>>> {
        let _ = (index, names, known);
        Ok(None)
    }

    /// Applies `writes` to the records of index `index` if each record is
    /// at the version its write expects, all or nothing. `Ok(None)`:
    /// applied; `Ok(Some(current))`: nothing applied, and every written
    /// record as it is now, in order.
    fn write_records(
        &mut self,
        index: &str,
        writes: Vec<IndexRecordWrite>,
    ) -> Result<Option<Vec<IndexRecord>>> {
        let _ = (index, writes);
        Err(ClientError::InvalidArgument(
            "this store keeps no shared records".into(),
        ))
    }

    /// Removes the generations of index `index` older than `keep` only
    /// (a newer one may be another device's rebuild in progress). The
    /// default removes every generation but `keep`.
    fn drop_older_generations(&mut self, index: &str, keep: u64) -> Result<()> {
        self.drop_other_generations(index, keep)
    }

    /// A channel for building generation `generation` of an index with a
    /// static scheme's setup. Nothing need be visible before
    /// [`SetupChannel::commit`]; the default is
    /// [`Backend::index_channel`], whose writes are visible at once (the
    /// client state switches to the new generation only after the commit
    /// anyway).
    fn setup_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<Box<dyn SetupChannel>> {
        Ok(Box::new(Immediate(
            self.index_channel(index, generation, scheme)?,
        )))
    }
}

/// A record kept beside an index ([`Backend::read_records`]).
#[derive(Clone, PartialEq, Eq)]
pub struct IndexRecord {
    /// Its name.
    pub name: String,
    /// Its version: 0 when it does not exist; each write adds one.
    pub version: u64,
    /// Its value (empty when absent, or when the reader knew it).
    pub value: Vec<u8>,
}

impl std::fmt::Debug for IndexRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "IndexRecord {{ name: {:?}, version: {}, value: ({} bytes) }}",
            self.name,
            self.version,
            self.value.len()
        )
    }
}

/// One write of [`Backend::write_records`].
#[derive(Clone, PartialEq, Eq)]
pub struct IndexRecordWrite {
    /// The record's name.
    pub name: String,
    /// The version it must be at (0: it must not exist).
    pub expected: u64,
    /// The new value (its version becomes `expected + 1`), or `None` to
    /// delete it.
    pub value: Option<Vec<u8>>,
}

impl std::fmt::Debug for IndexRecordWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "IndexRecordWrite {{ name: {:?}, expected: {}, value: {} }}",
            self.name,
            self.expected,
            self.value
                .as_ref()
                .map_or("delete".to_owned(), |v| format!("({} bytes)", v.len()))
        )
    }
}

/// A channel for a setup, committed at the end.
pub trait SetupChannel: Channel {
    /// Makes everything sent through the channel durable and visible.
    fn commit(self: Box<Self>) -> Result<()>;
}

/// A setup channel whose writes need no commit.
struct Immediate(Box<dyn Channel>);

impl Channel for Immediate {
    fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
        self.0.call(request)
    }
    fn meter(&self) -> &Meter {
        self.0.meter()
    }
}

impl SetupChannel for Immediate {
    fn commit(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

/// The server halves run in this process over one [`Store`]: scheme
/// servers under `i/<index>/<generation>/`, documents under `d/<index>/`,
/// each reached through a [`LocalChannel`] (which still encodes and counts
/// every message).
pub struct EmbeddedBackend {
    store: Arc<dyn Store>,
    /// The same store, where it is a redb file (see [`Backend::vacuum`]).
    file: Option<Arc<RedbStore>>,
    meter: Meter,
    /// Whether a generation's entries are packed, by (index, generation,
    /// scheme): found once per process (see [`EmbeddedBackend::packs`]).
    packed: HashMap<(String, u64, String), bool>,
    /// Packed chunks kept between lookups, on a store file this process
    /// holds locked ([`set_chunk_memo_bytes`]).
    memo: Option<Arc<ChunkMemo>>,
    /// Indexes whose documents were asked to be packed
    /// ([`Backend::pack_documents`]), each with whether they are (found
    /// on the first [`Backend::document_channel`]).
    packed_docs: HashMap<String, Option<bool>>,
}

/// The bytes of packed chunks an embedded backend keeps in memory
/// between lookups; 0 (the default): none.
static CHUNK_MEMO_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Keeps up to `bytes` of packed index chunks in memory in each embedded
/// backend opened from now on ([`sesame_store::packed::ChunkMemo`]), so
/// that a lookup in a chunk read before probes nothing; 0 turns it off.
/// A long-running reader such as `sesame sql` sets it: a one-off command
/// reads most chunks once, and pays a second probe for each (the stored
/// key after the chunk) to hold it. Held chunks are dropped on every
/// write of the store; other processes cannot write it while it is open
/// (its file is locked).
pub fn set_chunk_memo_bytes(bytes: usize) {
    CHUNK_MEMO_BYTES.store(bytes, Ordering::Relaxed);
}

/// The bytes of packed chunks each embedded backend opened from now on
/// keeps in memory ([`set_chunk_memo_bytes`]; 0: none).
pub fn chunk_memo_bytes() -> usize {
    CHUNK_MEMO_BYTES.load(Ordering::Relaxed)
}

impl std::fmt::Debug for EmbeddedBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedBackend")
            .field("store", &self.store.backend())
            .finish_non_exhaustive()
    }
}

impl EmbeddedBackend {
    /// The backend over the redb store at `path`; `create` allows making
    /// it when absent (a new profile), else a missing file is an error. The
    /// store stays locked against other processes while the backend lives.
    pub fn open(path: &Path, create: bool) -> Result<Self> {
        if !create && !path.is_file() {
            return Err(ClientError::ProfileIncomplete(path.to_path_buf()));
        }
        let store = RedbStore::open(path).map_err(|e| match e {
            sesame_core::Error::StoreBusy(_) => ClientError::StoreBusy(path.to_path_buf()),
            other => ClientError::Core(other),
        })?;
        let store = Arc::new(store);
        let mut backend = Self::over(store.clone());
        backend.file = Some(store);
        let memo = CHUNK_MEMO_BYTES.load(Ordering::Relaxed);
        backend.memo = (memo > 0).then(|| Arc::new(ChunkMemo::new(memo)));
        Ok(backend)
    }

    /// The backend over any store (a `MemoryStore` in tests).
    pub fn over(store: Arc<dyn Store>) -> Self {
        EmbeddedBackend {
            store,
            file: None,
            meter: Meter::new(),
            packed: HashMap::new(),
            memo: None,
            packed_docs: HashMap::new(),
        }
    }

    /// The underlying store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Whether the entries of this generation are packed
    /// ([`sesame_store::packed`]): those of a scheme whose server says they
    /// may be ([`sesame_core::Service::packable`]: FAST, Aura), on a store
    /// with ordered probes (redb, memory), in a generation that is new or
    /// already packed. A generation written by an earlier version (plain
    /// keys) stays plain.
    fn packs(&mut self, index: &str, generation: u64, scheme: &KeywordScheme) -> Result<bool> {
        let key = (
            index.to_owned(),
            generation,
            scheme.descriptor.name.to_owned(),
        );
        if let Some(&packs) = self.packed.get(&key) {
            return Ok(packs);
        }
        let packs = self.store.ordered_probes()
            && scheme
                .server(Arc::new(MemoryStore::new()), &Params::new())?
                .packable()
            && {
                let generation = generation_prefix(index, generation);
                let first = self.store.scan_from(&generation, &generation, false, 1)?;
                first
                    .first()
                    .is_none_or(|(k, _)| k[generation.len()..].starts_with(PACKED))
            };
        self.packed.insert(key, packs);
        Ok(packs)
    }

    /// The store of one generation's entries, as the scheme's server sees
    /// it.
    fn entries(&mut self, index: &str, generation: u64, scheme: &KeywordScheme) -> Result<Entries> {
        let mut prefix = generation_prefix(index, generation);
        Ok(if self.packs(index, generation, scheme)? {
            prefix.extend_from_slice(PACKED);
            Entries::Packed(Arc::new(match &self.memo {
                Some(memo) => Packed::with_memo(self.store.clone(), prefix, memo.clone()),
                None => Packed::new(self.store.clone(), prefix),
            }))
        } else {
            Entries::Plain(Arc::new(Prefixed::new(self.store.clone(), prefix)))
        })
    }

    /// A transaction over one generation's entries: an overlay over its
    /// plain keys, or over its packed view (returned too: the overlay's
    /// writes are planned into chunks before they are committed).
    fn transaction(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<(Arc<Overlay>, Option<Arc<Packed>>)> {
        Ok(match self.entries(index, generation, scheme)? {
            Entries::Plain(_) => (
                Arc::new(Overlay::new(
                    self.store.clone(),
                    generation_prefix(index, generation),
                    usize::MAX,
                )),
                None,
            ),
            Entries::Packed(packed) => (
                Arc::new(Overlay::new(packed.clone(), Vec::new(), usize::MAX)),
                Some(packed),
            ),
        })
    }
}

impl EmbeddedBackend {
    /// Whether the documents of `index` (under `prefix`) are packed:
    /// asked for ([`Backend::pack_documents`]), on a store with ordered
    /// probes, and the first key under the prefix (if any) a chunk's or a
    /// delta's. Found once per process and index.
    fn packs_documents(&mut self, index: &str, prefix: &[u8]) -> Result<bool> {
        let Some(known) = self.packed_docs.get(index).copied() else {
            return Ok(false);
        };
        if let Some(packs) = known {
            return Ok(packs);
        }
        let packs = self.store.ordered_probes() && {
            let first = self.store.scan_from(prefix, prefix, false, 1)?;
            first
                .first()
                .is_none_or(|(k, _)| k[prefix.len()..].starts_with(PACKED))
        };
        self.packed_docs.insert(index.to_owned(), Some(packs));
        Ok(packs)
    }
}

/// Where the chunks of a packed generation lie, after its prefix.
const PACKED: &[u8] = &[sesame_store::packed::CHUNKS_MARK];

/// A generation's entries: plain keys, or packed chunks.
enum Entries {
    Plain(Arc<Prefixed<Arc<dyn Store>>>),
    Packed(Arc<Packed>),
}

impl Entries {
    fn store(&self) -> Arc<dyn Store> {
        match self {
            Entries::Plain(s) => s.clone(),
            Entries::Packed(s) => s.clone(),
        }
    }
}

/// Key prefix of the answers kept for the operations of an index.
fn replay_prefix(index: &str) -> Vec<u8> {
    format!("r/{index}/").into_bytes()
}

/// The answers to an operation applied by [`EmbeddedBackend`], kept until
/// the client forgets them.
#[derive(serde::Serialize, serde::Deserialize)]
struct Replay {
    /// SHA-256 of the generation and the requests.
    digest: [u8; 32],
    /// The answers, in order.
    responses: Vec<Vec<u8>>,
}

fn replay_digest(generation: u64, requests: &[Vec<u8>]) -> [u8; 32] {
    let mut bytes = generation.to_be_bytes().to_vec();
    for r in requests {
        bytes.extend_from_slice(&(r.len() as u64).to_be_bytes());
        bytes.extend_from_slice(r);
    }
    sesame_crypto::hash::sha256(&bytes)
}

/// A store that refuses writes: the view of an index during the read-only
/// rounds of a preparation.
struct ReadOnly(Arc<dyn Store>);

impl Store for ReadOnly {
    sesame_store::forward_store!(|s| s.0; get, get_many, scan_prefix, scan_from, ordered_probes, io_counts, backend);
    fn write(&self, _: WriteBatch) -> sesame_core::Result<()> {
        Err(sesame_core::Error::Protocol(
            "the scheme wrote during a read-only preparation".into(),
        ))
    }
}

/// Key prefix of every generation of an index.
fn index_prefix(index: &str) -> Vec<u8> {
    format!("i/{index}/").into_bytes()
}

/// Key prefix of one generation of an index.
fn generation_prefix(index: &str, generation: u64) -> Vec<u8> {
    format!("i/{index}/{generation}/").into_bytes()
}

impl EmbeddedBackend {
    /// A channel to `scheme`'s server over `view`, metered by this backend.
    fn scheme_channel(
        &self,
        scheme: &KeywordScheme,
        view: Arc<dyn Store>,
    ) -> Result<Box<dyn Channel>> {
        let server = scheme.server(view, &sesame_core::Params::new())?;
        Ok(Box::new(LocalChannel::with_meter(
            server,
            self.meter.clone(),
        )))
    }

    /// Deletes, in one write (none if nothing matches), the keys under
    /// `prefixes` that `selected` picks.
    fn delete_under(&self, prefixes: &[Vec<u8>], selected: impl Fn(&[u8]) -> bool) -> Result<()> {
        let mut batch = WriteBatch::new();
        for prefix in prefixes {
            for (k, _) in self.store.scan_prefix(prefix)? {
                if selected(&k) {
                    batch.delete(k);
                }
            }
        }
        if !batch.is_empty() {
            self.store.write(batch)?;
        }
        Ok(())
    }
}

impl Backend for EmbeddedBackend {
    fn index_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<Box<dyn Channel>> {
        let view = self.entries(index, generation, scheme)?.store();
        self.scheme_channel(scheme, view)
    }

    fn pack_documents(&mut self, index: &str) {
        self.packed_docs.entry(index.to_owned()).or_insert(None);
    }

    fn document_channel(&mut self, index: &str) -> Result<Box<dyn Channel + Send>> {
        let prefix = format!("d/{index}/").into_bytes();
        let server = if self.packs_documents(index, &prefix)? {
            let mut chunks = prefix;
            chunks.extend_from_slice(PACKED);
            let view: Arc<dyn Store> = Arc::new(match &self.memo {
                Some(memo) => Packed::with_memo(self.store.clone(), chunks, memo.clone()),
                None => Packed::new(self.store.clone(), chunks),
            });
            DocServer::new(view, Vec::new())
        } else {
            DocServer::new(self.store.clone(), prefix)
        };
        Ok(Box::new(LocalChannel::with_meter(
            Typed(server),
            self.meter.clone(),
        )))
    }

    fn hosted_channel(
        &mut self,
        index: &str,
        generation: u64,
        _scheme: &str,
        server: &dyn Fn(Arc<dyn Store>) -> sesame_core::Result<Box<dyn Service>>,
    ) -> Result<Box<dyn Channel>> {
        let view: Arc<dyn Store> = Arc::new(Prefixed::new(
            self.store.clone(),
            generation_prefix(index, generation),
        ));
        Ok(Box::new(LocalChannel::with_meter(
            server(view)?,
            self.meter.clone(),
        )))
    }

    fn hosted_transaction(
        &mut self,
        index: &str,
        generation: u64,
        _scheme: &str,
        server: &dyn Fn(Arc<dyn Store>) -> sesame_core::Result<Box<dyn Service>>,
    ) -> Result<Box<dyn SetupChannel>> {
        let overlay = Arc::new(Overlay::new(
            self.store.clone(),
            generation_prefix(index, generation),
            usize::MAX,
        ));
        let channel = LocalChannel::with_meter(server(overlay.clone())?, self.meter.clone());
        Ok(Box::new(Transaction {
            channel,
            overlay,
            packed: None,
            store: self.store.clone(),
        }))
    }

    /// A static scheme's setup runs over one transaction, committed in
    /// one write: a packed generation is then planned once, from empty.
    fn setup_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<Box<dyn SetupChannel>> {
        let (overlay, packed) = self.transaction(index, generation, scheme)?;
        let server = scheme.server(overlay.clone(), &sesame_core::Params::new())?;
        Ok(Box::new(Transaction {
            channel: LocalChannel::with_meter(server, self.meter.clone()),
            overlay,
            packed,
            store: self.store.clone(),
        }))
    }

    fn remove_index(&mut self, index: &str) -> Result<()> {
        self.packed.retain(|(name, _, _), _| name != index);
        if let Some(packs) = self.packed_docs.get_mut(index) {
            *packs = None;
        }
        let prefixes = [
            index_prefix(index),
            format!("d/{index}/").into_bytes(),
            replay_prefix(index),
        ];
        self.delete_under(&prefixes, |_| true)
    }

    fn drop_other_generations(&mut self, index: &str, keep: u64) -> Result<()> {
        let keep = generation_prefix(index, keep);
        self.delete_under(&[index_prefix(index)], |k| !k.starts_with(&keep))
    }

    fn meter(&self) -> &Meter {
        &self.meter
    }

    fn read_channel(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<Box<dyn Channel>> {
        let view = ReadOnly(self.entries(index, generation, scheme)?.store());
        self.scheme_channel(scheme, Arc::new(view))
    }

    fn update_job(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
        id: [u8; 16],
        requests: Vec<Vec<u8>>,
    ) -> Result<UpdateJob> {
        let mut key = replay_prefix(index);
        key.extend_from_slice(&id);
        // The scheme's server runs over a transaction: its writes, and the
        // answers kept for a repeat, reach the store in one atomic write.
        let (overlay, packed) = self.transaction(index, generation, scheme)?;
        let mut channel = LocalChannel::with_meter(
            scheme.server(overlay.clone(), &sesame_core::Params::new())?,
            self.meter.clone(),
        );
        let store = self.store.clone();
        Ok(Box::new(move || {
            let digest = replay_digest(generation, &requests);
            if let Some(bytes) = store.get(&key)? {
                let kept: Replay = wire::decode(&bytes).map_err(|_| {
                    sesame_core::Error::StoreCorrupt("a kept answer is damaged".into())
                })?;
                if kept.digest != digest {
                    return Err(ClientError::Core(sesame_core::Error::Protocol(format!(
                        "operation {} was already applied with other requests",
                        hex::encode(id)
                    ))));
                }
                return Ok(kept.responses);
            }
            let write_once = channel.service().write_once();
            let responses = requests
                .iter()
                .map(|r| channel.call(r))
                .collect::<sesame_core::Result<Vec<_>>>()?;
            let mut batch = WriteBatch::new();
            overlay.drain_into(&mut batch);
            if let Some(packed) = &packed {
                let plan = packed.plan(&batch)?;
                if write_once && plan.overwrites > 0 {
                    return Err(overwrite_conflict());
                }
                batch = plan.batch;
            } else if write_once {
                check_write_once(store.as_ref(), &batch)?;
            }
            let kept = Replay { digest, responses };
            batch.put(key, wire::encode(&kept)?);
            store.write(batch)?;
            Ok(kept.responses)
        }))
    }

    fn forget(&mut self, index: &str, id: [u8; 16]) -> Result<()> {
        let mut key = replay_prefix(index);
        key.extend_from_slice(&id);
        Ok(self.store.delete(&key)?)
    }

    fn verify(&mut self) -> Result<()> {
        Ok(self.store.verify()?)
    }

    fn verify_index(&mut self, index: &str, generation: u64, scheme: &KeywordScheme) -> Result<()> {
        if let Entries::Packed(view) = self.entries(index, generation, scheme)? {
            view.check_chunks()?;
        }
        Ok(())
    }

    fn compact_index(
        &mut self,
        index: &str,
        generation: u64,
        scheme: &KeywordScheme,
    ) -> Result<usize> {
        match self.entries(index, generation, scheme)? {
            Entries::Packed(view) => Ok(view.compact()?),
            Entries::Plain(_) => Ok(0),
        }
    }

    fn space(&mut self) -> Result<Option<Space>> {
        self.file
            .as_ref()
            .map(|f| f.space().map_err(ClientError::from))
            .transpose()
    }

    fn index_bytes(&mut self, index: &str) -> Result<Option<(u64, u64)>> {
        let mut sums = [0u64; 2];
        for (sum, prefix) in sums
            .iter_mut()
            .zip([index_prefix(index), format!("d/{index}/").into_bytes()])
        {
            // By pages, so that a large index is never held whole.
            let mut from = prefix.clone();
            loop {
                let page = self.store.scan_from(&prefix, &from, false, 4096)?;
                let Some((last, _)) = page.last() else {
                    break;
                };
                from = last.clone();
                from.push(0);
                let full = page.len() == 4096;
                *sum += page
                    .iter()
                    .map(|(k, v)| (k.len() + v.len()) as u64)
                    .sum::<u64>();
                if !full {
                    break;
                }
            }
        }
        Ok(Some((sums[0], sums[1])))
    }

    fn vacuum(&mut self) -> Result<Option<(Space, Space)>> {
        self.file
            .as_ref()
            .map(|f| f.vacuum().map_err(ClientError::from))
            .transpose()
    }
}

/// A channel whose server half writes into an overlay, committed to the
/// store in one write.
struct Transaction {
    channel: LocalChannel<Box<dyn Service>>,
    overlay: Arc<Overlay>,
    /// The packed view under the overlay, for a packed generation.
    packed: Option<Arc<Packed>>,
    store: Arc<dyn Store>,
}

impl Channel for Transaction {
    fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
        self.channel.call(request)
    }
    fn meter(&self) -> &Meter {
        self.channel.meter()
    }
}

impl SetupChannel for Transaction {
    fn commit(self: Box<Self>) -> Result<()> {
        let mut batch = WriteBatch::new();
        self.overlay.drain_into(&mut batch);
        if let Some(packed) = &self.packed {
            batch = packed.plan(&batch)?.batch;
        }
        if !batch.is_empty() {
            self.store.write(batch)?;
        }
        Ok(())
    }
}

fn overwrite_conflict() -> ClientError {
    ClientError::Conflict(
        "the update would overwrite index entries written by another update \
         (was this profile copied and used in two places?)"
            .into(),
    )
}

/// Refuses a batch that would change the value of a stored key: the
/// scheme's server writes every key once, so a different value under a
/// stored key means two clients updated from the same state.
fn check_write_once(store: &dyn Store, batch: &WriteBatch) -> Result<()> {
    let puts: Vec<(&[u8], &Vec<u8>)> = batch
        .ops()
        .iter()
        .filter_map(|op| match op {
            sesame_core::WriteOp::Put { key, value } => Some((key.as_slice(), value)),
            sesame_core::WriteOp::Delete { .. } => None,
        })
        .collect();
    // One read transaction per chunk, not one per key.
    for chunk in puts.chunks(4096) {
        let keys: Vec<&[u8]> = chunk.iter().map(|(k, _)| *k).collect();
        for ((_, value), old) in chunk.iter().zip(store.get_many(&keys)?) {
            if old.is_some_and(|old| &old != *value) {
                return Err(overwrite_conflict());
            }
        }
    }
    Ok(())
}
