//! A session on one index: adding (syncing) and removing documents,
//! searching, reading documents back, checking the profile.
//!
//! Every operation that changes the index is a *pending intent* first
//! ([`crate::intents`]): its requests and the client state that follows
//! are saved together before anything is sent, the server applies the
//! requests once whatever number of times they arrive, and the operation
//! is completed by whichever command runs next if this one is interrupted.
//! Every command starts by completing what an interrupted one left
//! ([`Session::resume_pending`]). Reads never wait on writes that cannot
//! be sent: a search whose pending intents the server refuses for want of
//! room or of a reachable store answers from the state the server has
//! (the client state saved before the oldest pending intent, the catalog
//! without it), says how many documents are pending
//! ([`QueryHits::pending`]) and keeps the intents for the next command;
//! a scheme whose search writes refuses instead
//! ([`ClientError::PendingFirst`]). Tested by `tests/pending_reads.rs`.
//!
//! The session's parts: `sync` (adding and removing documents: dynamic
//! updates and static rebuilds), `intents` (saving, sending and
//! completing pending intents, and resuming interrupted ones), `queries`
//! (searching, reading documents back, checking).
//!
//! The session takes what it needs of its profile in a `SessionBase`
//! that the profile builds (paths, keys, intent files, the header to
//! share): it imports nothing of `crate::profile`, and what it shares
//! with `documents.rs` and the profile lives in `crate::progress`,
//! `crate::stored` and `crate::scheme` (`docs/architecture.md`).

use std::path::PathBuf;

use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rand_core::OsRng;
use sesame_core::{Meter, QueryKind, SchemeDescriptor, SchemeKind};
use sesame_crypto::Aes256GcmSiv;
use sesame_sse::{KeywordClient, KeywordScheme, UpdateOp};

use crate::backend::Backend;
use crate::collect::NewFile;
use crate::doc_service::DocId;
use crate::error::{ClientError, Result};
use crate::intents::IntentFiles;
use crate::lock::ProfileLock;
use crate::scheme::find_scheme;
use crate::state::{DocumentInfo, IndexState, StateCipher};

pub use crate::progress::{Phase, Progress};

mod chunks;
mod intents;
mod queries;
mod rotate;
pub(crate) mod shared;
mod sync;

/// Documents per pending intent of a dynamic scheme's updates.
const INTENT_DOCS: usize = 512;
/// Bytes of requests per pending intent (one document's requests may be
/// more: they are saved and sent together, in calls under the limit).
const INTENT_BYTES: usize = 8 << 20;
/// Keywords of the updates a scheme that batches them prepares together
/// (an intent may pass [`INTENT_BYTES`] by one such batch).
const BATCH_KEYWORDS: usize = 128 << 10;
/// Documents whose keywords `check` searches for.
const CHECK_PROBES: usize = 32;

/// The answer to [`Session::query`].
#[derive(Clone, Debug, PartialEq)]
pub struct QueryHits {
    /// The kind of query answered.
    pub kind: QueryKind,
    /// Matching documents: best first for ranked queries, else by
    /// identifier.
    pub documents: Vec<DocumentInfo>,
    /// For ranked queries, the score of each document; empty otherwise.
    pub scores: Vec<f64>,
    /// Candidates the server returned that did not match after decryption
    /// (false positives of filter-based schemes), removed.
    pub false_positives_removed: usize,
    /// Documents of interrupted operations completed before the query ran
    /// ([`Session::resume_pending`]).
    pub resumed: usize,
    /// Documents of saved operations that could not be sent (the server
    /// refuses writes or cannot be reached): the answer is the state the
    /// server has, without them; the next command that can sends them.
    /// 0 when everything saved is on the server.
    pub pending: usize,
}

/// What [`Session::add_documents`] did. `add` is a sync: a file whose path
/// and content the index already holds is skipped; a file whose content
/// changed replaces its old version.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AddReport {
    /// New documents (paths the index did not hold), with their new
    /// identifiers.
    pub added: Vec<DocumentInfo>,
    /// New versions of changed files, with their new identifiers.
    pub replaced: Vec<DocumentInfo>,
    /// Documents deleted: the old versions of changed files, and extra
    /// copies of a path (left by earlier builds).
    pub removed: Vec<DocumentInfo>,
    /// Files skipped because the index holds them unchanged.
    pub unchanged: usize,
    /// Distinct keywords in the added and replaced documents.
    pub keywords: usize,
    /// (keyword, document) pairs added.
    pub pairs: usize,
    /// Whether the whole index was rebuilt ([`Session::rebuilds`]).
    pub rebuilt: bool,
    /// Documents in the index afterwards.
    pub indexed: usize,
    /// Documents of an earlier, interrupted command that this one
    /// completed first.
    pub resumed: usize,
}

/// What [`Session::remove_documents`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoveReport {
    /// The documents removed.
    pub removed: Vec<DocumentInfo>,
    /// Whether the scheme deleted their entries from the index; when it
    /// cannot (schemes without deletion), the entries stay on the server
    /// and the client no longer shows the documents.
    pub index_entries_deleted: bool,
    /// Whether the whole index was rebuilt ([`Session::rebuilds`]).
    pub rebuilt: bool,
    /// Documents in the index afterwards.
    pub indexed: usize,
}

/// What [`Session::check`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckReport {
    /// Documents in the catalog.
    pub documents: usize,
    /// Documents fetched, decrypted and compared with their recorded hash.
    pub verified: usize,
    /// Searches made to check that documents are found by their keywords.
    pub searches: usize,
    /// Interrupted operations completed before the check.
    pub resumed: usize,
    /// What is wrong, one line each; empty when the profile is sound.
    pub problems: Vec<String>,
}

/// A file to add, read and hashed.
#[derive(Clone)]
struct Incoming {
    file: NewFile,
    keywords: Vec<String>,
    digest: [u8; 32],
}

/// The documents an update adds and removes, grouped so that a changed
/// file's old and new versions go in the same intent.
struct Group {
    removes: Vec<(DocumentInfo, Vec<String>)>,
    add: Option<(DocumentInfo, Vec<String>)>,
}

/// The intent being filled by an update.
#[derive(Default)]
struct Batch {
    requests: Vec<Vec<u8>>,
    add: Vec<DocumentInfo>,
    remove: Vec<DocId>,
    bytes: usize,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.requests.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }
}

/// Updates waiting to be prepared together (for a scheme that
/// `batches_updates`), in order, and their keywords in all.
#[derive(Default)]
struct Pending {
    updates: Vec<(UpdateOp, DocId, Vec<Vec<u8>>)>,
    keywords: usize,
}

impl Pending {
    fn push(&mut self, op: UpdateOp, doc: DocId, keywords: Vec<String>) {
        self.keywords += keywords.len();
        let words = keywords.into_iter().map(String::into_bytes).collect();
        self.updates.push((op, doc, words));
    }
}

/// A session on one index of a profile.
///
/// It holds the profile lock for as long as it lives. Every operation that
/// changes the client state writes it (encrypted, atomically) before it
/// returns.
pub struct Session {
    pub(crate) index: String,
    pub(crate) profile_id: String,
    profile_dir: PathBuf,
    state_path: PathBuf,
    cipher: StateCipher,
    pub(crate) docs: std::sync::Arc<Aes256GcmSiv>,
    scheme: KeywordScheme,
    pub(crate) state: IndexState,
    client: Box<dyn KeywordClient>,
    pub(crate) backend: Box<dyn Backend>,
    /// Keys, nonces and identifiers: ChaCha20 seeded from the operating
    /// system, so that the updates' many draws make no system call each.
    pub(crate) rng: ChaCha20Rng,
    intents: IntentFiles,
    /// The server's message limit, if it has one.
    pub(crate) max_message: Option<usize>,
    /// Documents one document request may name.
    pub(crate) max_documents: usize,
    /// While an add stores its documents on another thread: how far it
    /// got (an intent waits for its documents before it is saved).
    pub(crate) stored_gate: Option<std::sync::Arc<crate::stored::StoredGate>>,
    /// An update sent on another thread while the next one is prepared
    /// ([`Session::send_behind`]).
    sending: Option<intents::Sending>,
    /// Intents completed since the last save: their files, and the
    /// answers the backend keeps, are removed after the next one.
    completed: Vec<[u8; 16]>,
    /// The keywords of a stored document's content (for deletions,
    /// rebuilds and checks): the tokenizer for files, the table's
    /// schema for records.
    pub(crate) extract: Extractor,
    /// Documents per pending intent of a dynamic scheme's updates.
    intent_docs: usize,
    /// Bound into every document's associated data when not empty (a
    /// table's incarnation).
    pub(crate) doc_context: Vec<u8>,
    /// The state shared with the profile's other devices through the
    /// server, when the server keeps it ([`shared`]).
    shared: Option<shared::side::Shared>,
    /// `indexes/NAME.shared`: what this device saw of the shared state.
    sidecar: PathBuf,
    /// The profile's header as another device joining needs it.
    header: Option<SharedHeader>,
    _lock: ProfileLock,
}

/// Gives the keywords of a document's content.
/// What a session takes from its profile (built by the profile, so that
/// the session needs nothing of the profile's own).
pub(crate) struct SessionBase {
    /// The profile's identifier (bound into sealed documents and state).
    pub profile_id: String,
    /// The profile directory.
    pub profile_dir: PathBuf,
    /// `indexes/NAME.state`.
    pub state_path: PathBuf,
    /// `indexes/NAME.shared`.
    pub sidecar: PathBuf,
    /// Seals the index's client state.
    pub cipher: StateCipher,
    /// Seals the documents.
    pub docs: std::sync::Arc<Aes256GcmSiv>,
    /// The index's pending intent files.
    pub intents: IntentFiles,
    /// The profile's header as another device joining needs it (`None`
    /// for header formats that cannot be shared).
    pub header: Option<SharedHeader>,
}

/// The profile's header and what to do with the server's copy of it.
#[derive(Clone)]
pub(crate) struct SharedHeader {
    /// The header, as written.
    pub bytes: Vec<u8>,
    /// Compares it with the server's copy (`profile_dir`, ours, theirs):
    /// the write that puts ours there, if one should
    /// (`crate::profile::sync_header`).
    pub sync: fn(
        &std::path::Path,
        &[u8],
        &crate::backend::IndexRecord,
    ) -> Result<Option<crate::backend::IndexRecordWrite>>,
}

pub(crate) type Extractor = std::sync::Arc<dyn Fn(&str, &[u8]) -> Vec<String> + Send + Sync>;

/// An item for [`Session::put_items`]: a name, its content, its keywords.
pub(crate) struct Item {
    /// The name the index knows it by (a record's key).
    pub name: String,
    /// What is stored, encrypted, beside the index.
    pub content: Vec<u8>,
    /// Its keywords.
    pub keywords: Vec<String>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("index", &self.index)
            .field("scheme", &self.scheme.descriptor.name)
            .field("documents", &self.state.catalog.len())
            .finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(
        base: SessionBase,
        index: &str,
        state: IndexState,
        backend: Box<dyn Backend>,
        lock: ProfileLock,
    ) -> Result<Session> {
        let scheme = find_scheme(&state.scheme)?;
        Self::with_scheme(base, index, state, backend, scheme, lock)
    }

    /// As [`Session::new`], with the scheme given rather than looked up.
    fn with_scheme(
        base: SessionBase,
        index: &str,
        state: IndexState,
        mut backend: Box<dyn Backend>,
        scheme: KeywordScheme,
        lock: ProfileLock,
    ) -> Result<Session> {
        let state_path = base.state_path;
        let client =
            (scheme.restore_client)(&state.client).map_err(|_| ClientError::StateCorrupt {
                index: index.to_owned(),
                path: state_path.clone(),
            })?;
        let max_message = backend.max_message()?;
        let max_documents = backend
            .max_documents()?
            .unwrap_or(crate::stored::DOCS_PER_REQUEST)
            .clamp(1, crate::stored::DOCS_PER_REQUEST);
        let mut session = Session {
            index: index.to_owned(),
            profile_id: base.profile_id,
            profile_dir: base.profile_dir,
            state_path,
            cipher: base.cipher,
            docs: base.docs,
            scheme,
            state,
            client,
            backend,
            rng: ChaCha20Rng::from_rng(OsRng).map_err(|e| {
                ClientError::InvalidArgument(format!("the system's random source failed: {e}"))
            })?,
            intents: base.intents,
            max_message,
            max_documents,
            stored_gate: None,
            sending: None,
            completed: Vec::new(),
            extract: std::sync::Arc::new(|_: &str, c: &[u8]| crate::tokenize::tokenize_bytes(c)),
            intent_docs: INTENT_DOCS,
            doc_context: Vec::new(),
            shared: None,
            sidecar: base.sidecar,
            header: base.header,
            _lock: lock,
        };
        session.adopt_legacy_intents()?;
        session.share()?;
        let keep: Vec<[u8; 16]> = session.state.pending.iter().map(|p| p.id).collect();
        session.intents.sweep(&keep);
        Ok(session)
    }

    /// The index name.
    pub fn index(&self) -> &str {
        &self.index
    }

    /// The descriptor of the index's scheme.
    pub fn scheme(&self) -> &'static SchemeDescriptor {
        self.scheme.descriptor
    }

    /// Whether the scheme is static (adding documents rebuilds the index).
    pub fn is_static(&self) -> bool {
        self.scheme.descriptor.kind == SchemeKind::StaticSse
    }

    /// Whether a change rebuilds the whole index ([`AddReport::rebuilt`]):
    /// static schemes, and dynamic schemes whose updates cannot be
    /// prepared ahead of sending them (SDa, SDd, KPR12 read the server
    /// between their writes), which the session keeps crash-safe this way.
    pub fn rebuilds(&self) -> bool {
        self.is_static() || !self.client.prepares_updates()
    }

    /// The meter every channel of the session reports to.
    pub fn meter(&self) -> &Meter {
        self.backend.meter()
    }

    /// The documents of the index, by identifier.
    pub fn documents(&self) -> Result<Vec<DocumentInfo>> {
        self.state.catalog.values().collect()
    }

    /// The document `id`, if the index has it.
    pub fn document(&self, id: DocId) -> Result<Option<DocumentInfo>> {
        self.state.catalog.get(&id)
    }

    /// Documents waiting in operations saved but not completed.
    pub fn pending_documents(&self) -> usize {
        self.state
            .pending
            .iter()
            .map(|p| p.documents as usize)
            .sum()
    }

    /// The index's generation (each rebuild or rekey makes a new one).
    pub fn generation(&self) -> u64 {
        self.state.generation
    }

    /// Where the bytes of the profile's store file go (see
    /// [`sesame_store::Space`]); `None` for a profile on a server, whose
    /// store is the server's.
    pub fn store_space(&mut self) -> Result<Option<sesame_store::Space>> {
        self.backend.space()
    }

    /// Bytes of the index's client state on this machine: its state
    /// file and the catalog's runs beside it (`NAME.state`,
    /// `NAME.<run>.catalog`); files that vanish while they are counted
    /// count nothing.
    pub fn state_file_bytes(&self) -> Result<u64> {
        let Some(dir) = self.state_path.parent() else {
            return Ok(0);
        };
        let own = format!("{}.", self.index);
        let entries = std::fs::read_dir(dir).map_err(|e| ClientError::io("read", dir, &e))?;
        let mut bytes = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let ours = name
                .strip_prefix(&own)
                .is_some_and(|rest| rest == "state" || rest.ends_with(".catalog"));
            if ours {
                bytes += entry.metadata().map_or(0, |m| m.len());
            }
        }
        Ok(bytes)
    }

    /// Rewrites the profile's store into a fresh file, giving back the
    /// free pages that copy-on-write commits leave (see
    /// [`sesame_store::RedbStore::vacuum`]): every stored pair is kept,
    /// and a crash leaves either the old file or the new one. Returns the
    /// space before and after; `None` for a profile on a server.
    pub fn compact_store(&mut self) -> Result<Option<(sesame_store::Space, sesame_store::Space)>> {
        self.backend.vacuum()
    }

    /// How many documents one pending intent of a dynamic scheme's
    /// updates carries (512 unless set; at least 1). An add of more sends
    /// each full intent on another thread while it prepares the next;
    /// smaller intents overlap more of the two, at one store commit and
    /// one save of the whole state each.
    pub fn set_documents_per_intent(&mut self, documents: usize) {
        self.intent_docs = documents.max(1);
    }

    /// Sets how the keywords of stored content are found, and how many
    /// documents one pending intent may carry (a table's small records go
    /// in larger intents).
    pub(crate) fn set_items(&mut self, extract: Extractor, intent_docs: usize) {
        self.extract = extract;
        self.intent_docs = intent_docs.max(1);
    }

    /// The backend, for a new session on the same connection.
    pub(crate) fn into_backend(self) -> Box<dyn Backend> {
        self.backend
    }

    /// Writes the state: first the shared copy on the server, when there
    /// is one (compare-and-swap: [`ClientError::StaleState`] if another
    /// device changed it, and nothing is written), then the local file.
    pub(crate) fn save(&mut self) -> Result<()> {
        self.commit_shared()?;
        self.cipher
            .save(&mut self.rng, &self.state_path, &self.index, &self.state)?;
        self.note_version()?;
        // The saved state no longer refers to the completed intents.
        for id in std::mem::take(&mut self.completed) {
            self.intents.remove(&id);
            // The kept answers are no longer needed; if forgetting fails
            // they only take room.
            let _ = self.backend.forget(&self.index, id);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! The dynamic path, with a toy plaintext dynamic scheme (no dynamic
    //! scheme is registered yet).

    use std::sync::Arc;

    use serde::{Deserialize, Serialize};

    use rand_core::CryptoRngCore;
    use sesame_core::{
        channel, wire, BackwardPrivacy, Channel, Handler, IoCounts, Params, QueryKind,
        Result as CoreResult, Store, Typed,
    };
    use sesame_store::MemoryStore;

    use super::*;
    use crate::backend::EmbeddedBackend;
    use crate::insecure;
    use crate::Profile;
    use sesame_sse::{Multimap, UpdateOp};

    static TOY: SchemeDescriptor = SchemeDescriptor {
        name: "toy",
        title: "Toy dynamic scheme (plaintext)",
        citation: "nobody",
        kind: SchemeKind::DynamicSse,
        forward_private: false,
        backward_privacy: BackwardPrivacy::None,
        queries: &[QueryKind::Exact],
        leakage: "everything",
        doc: "none",
    };

    #[derive(Serialize, Deserialize)]
    enum Req {
        Add(DocId, Vec<Vec<u8>>),
        Search(Vec<u8>),
    }

    /// Counts its updates, so the state changes with each.
    struct ToyClient {
        updates: u64,
    }

    impl KeywordClient for ToyClient {
        fn descriptor(&self) -> &'static SchemeDescriptor {
            &TOY
        }
        fn setup_checked(&mut self, _: sesame_sse::api::Io<'_>, _: &Multimap) -> CoreResult<()> {
            panic!("a dynamic scheme is never set up by the SDK")
        }
        fn prepares_updates(&self) -> bool {
            true
        }

        fn prepare_update(
            &mut self,
            _: &mut dyn CryptoRngCore,
            op: UpdateOp,
            doc: DocId,
            words: &[Vec<u8>],
        ) -> CoreResult<Option<Vec<Vec<u8>>>> {
            assert_eq!(op, UpdateOp::Add);
            self.updates += 1;
            Ok(Some(vec![wire::encode(&Req::Add(doc, words.to_vec()))?]))
        }
        fn check_update_response(&self, response: &[u8]) -> CoreResult<()> {
            wire::decode::<Vec<DocId>>(response).map(drop)
        }
        fn search(
            &mut self,
            _: &mut dyn CryptoRngCore,
            ch: &mut dyn Channel,
            w: &[u8],
        ) -> CoreResult<Vec<DocId>> {
            channel::call(ch, &Req::Search(w.to_vec()))
        }
        fn save_state(&self) -> CoreResult<Vec<u8>> {
            Ok(self.updates.to_le_bytes().to_vec())
        }
    }

    struct ToyServer(Arc<dyn Store>);

    impl Handler for ToyServer {
        type Request = Req;
        type Response = Vec<DocId>;
        fn handle(&mut self, r: Req) -> CoreResult<Vec<DocId>> {
            match r {
                Req::Add(doc, words) => {
                    for w in words {
                        let mut k = w;
                        k.push(0);
                        k.extend_from_slice(&doc.to_be_bytes());
                        self.0.put(&k, b"")?;
                    }
                    Ok(Vec::new())
                }
                Req::Search(mut w) => {
                    w.push(0);
                    let mut ids = Vec::new();
                    for (k, _) in self.0.scan_prefix(&w)? {
                        let b: [u8; 8] = k[w.len()..].try_into().unwrap();
                        ids.push(DocId::from_be_bytes(b));
                    }
                    Ok(ids)
                }
            }
        }
        fn io_counts(&self) -> IoCounts {
            self.0.io_counts()
        }
    }

    fn toy() -> KeywordScheme {
        KeywordScheme {
            descriptor: &TOY,
            params: &[],
            new_client: |_, _| Ok(Box::new(ToyClient { updates: 0 })),
            restore_client: |b| {
                let n = u64::from_le_bytes(
                    b.try_into()
                        .map_err(|_| sesame_core::Error::Malformed("toy state".into()))?,
                );
                Ok(Box::new(ToyClient { updates: n }))
            },
            new_server: Some(|store, _| Ok(Box::new(Typed(ToyServer(store))))),
        }
    }

    #[test]
    fn dynamic_schemes_update_per_document_and_persist_state() {
        let tmp = tempfile::tempdir().unwrap();
        let profile = Profile::create_with_kdf(
            tmp.path().join("p"),
            "pw",
            "pibas",
            &Params::new(),
            insecure::fast_kdf(),
        )
        .unwrap();
        let files: Vec<PathBuf> = ["fox dog", "dog cat", ""]
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let p = tmp.path().join(format!("{i}.txt"));
                std::fs::write(&p, text).unwrap();
                p
            })
            .collect();
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let state = IndexState::new("toy", &Params::new(), 0u64.to_le_bytes().to_vec());
        profile.save_state(&mut OsRng, "toy", &state).unwrap();
        // A session of the toy scheme over `store`, from `state`.
        let open = |state: IndexState, store: Arc<dyn Store>| {
            let backend = Box::new(EmbeddedBackend::over(store));
            let lock = profile.lock("toy").unwrap();
            Session::with_scheme(
                profile.session_base("toy"),
                "toy",
                state,
                backend,
                toy(),
                lock,
            )
            .unwrap()
        };
        let mut s = open(state, store.clone());
        assert!(!s.is_static());
        s.save().unwrap();

        let r = s.add_documents(&files[..2], &mut |_| {}).unwrap();
        assert!(!r.rebuilt);
        assert_eq!((r.added.len(), r.indexed, r.pairs), (2, 2, 4));
        let r = s.add_documents(&files[2..], &mut |_| {}).unwrap();
        assert!(!r.rebuilt);
        assert_eq!(r.indexed, 3);
        let ids = |hits: Vec<DocumentInfo>| hits.into_iter().map(|d| d.id).collect::<Vec<_>>();
        assert_eq!(ids(s.search("dog").unwrap()), [1, 2]);
        assert_eq!(ids(s.search("CAT").unwrap()), [2]);
        assert_eq!(s.get(3).unwrap(), b"");
        drop(s);

        // The state on disk has the catalog and the scheme's state (two
        // updates: the empty document sends none).
        let state = profile.load_state("toy").unwrap();
        assert_eq!(state.catalog.len(), 3);
        assert_eq!(state.client, 2u64.to_le_bytes());
        assert_eq!(state.next_doc, 4);
        assert_eq!(state.generation, 0);
        let mut s = open(state, store);
        assert_eq!(ids(s.search("fox").unwrap()), [1]);
    }
}
