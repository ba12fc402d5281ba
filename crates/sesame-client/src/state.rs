//! Per-index client state, encrypted at rest.
//!
//! A state file is `MAGIC || scheme length (1 byte) || scheme name ||
//! AEAD seal of the wire-encoded [`IndexState`]`. The scheme name is in
//! clear so that it can be bound into the associated data together with
//! the profile id and the index name: a state file copied to another
//! index or profile, or relabelled with another scheme, does not open.
//!
//! Format 3 (`SSMIDX03`) keeps each document's content hash in the
//! catalog (so that `add` can skip unchanged files), refers to pending
//! intents stored in files of their own (see [`crate::intents`]) instead of
//! holding them, and lists the identifiers reserved by an add in progress
//! and the stored documents still to delete. Format-2 (`SSMIDX02`) and
//! format-1 (`SSMIDX01`) files are still read, and rewritten as format 3 by
//! the next change; a format-2 file's pending intents are carried over.
//!
//! Format 4 (`SSMIDX04`): a state whose encoding reaches [`LOG_FROM`] is
//! saved as a snapshot and a log of changes, each save appending what
//! changed (module `log`, which says what it guarantees).
//!
//! Formats 5 (`SSMIDX05`, whole) and 6 (`SSMIDX06`, a head and a log):
//! the catalog is on disk in sealed sorted runs beside the state (module
//! `runs`), the state naming them and holding the entries changed since
//! they were written; what a restored, swapped or half-written run does
//! is said there and tested by `state::catalog_tests`. Formats 1 to 4 are
//! still read, and the next save writes format 5 or 6. Runs written
//! since carry a name index (module `names`) in a layout of their own
//! (`SSMCAT02`), which the state's format does not change: the state
//! names a run by the digest of its sealed footer either way.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{wire, Params};
use sesame_crypto::{Aes256GcmSiv, Key};
use zeroize::{Zeroize, Zeroizing};

use crate::error::{ClientError, Result};
use crate::fsutil;

mod catalog;
mod forms;
mod log;
mod memo;
mod names;
pub(crate) use memo::{ChunkNames, CommitMemo, Seal};
mod runs;
mod shared_form;
mod shared_record;
pub(crate) use catalog::Catalog;
use catalog::{CatalogLocal, Change, LocalCatalog};
pub(crate) use log::remove_logs;
use log::{lock, LogAt};
pub(crate) use runs::remove_runs;
use runs::RunStore;
#[cfg(test)]
pub(crate) use shared_record::ChainV2;
pub(crate) use shared_record::{shared_digest, Chain, Head, SharedExtras};
use std::sync::Arc;

/// Name of the directory of index states (in a profile directory).
pub const INDEX_DIR: &str = "indexes";

/// First bytes of a state file saved whole, format 3 (read, never
/// written).
const MAGIC: &[u8; 8] = b"SSMIDX03";
/// First bytes of a state file that is the head of a log of changes
/// (module `log`), format 4 (read, never written).
const MAGIC_LOGGED_V4: &[u8; 8] = b"SSMIDX04";
/// First bytes of a state file saved whole whose catalog is in runs
/// beside it (format 5).
const MAGIC_V5: &[u8; 8] = b"SSMIDX05";
/// First bytes of a state file that is the head of a log of changes
/// whose catalog is in runs beside it (format 6).
const MAGIC_LOGGED: &[u8; 8] = b"SSMIDX06";
/// Most bytes of a catalog's blocks read from disk kept in memory,
/// unless [`set_catalog_cache_bytes`] says otherwise.
const CATALOG_CACHE: usize = 16 << 20;

/// The catalog cache of the states this process opens from now on
/// ([`set_catalog_cache_bytes`]; [`CATALOG_CACHE`] unless set).
static CATALOG_CACHE_SET: AtomicUsize = AtomicUsize::new(CATALOG_CACHE);

/// Sets the bytes of decoded catalog blocks that each index state opened
/// from now on keeps in memory (16 MiB unless set; at least 1 MiB). A
/// long-running reader such as `sesame sql` keeps a table's whole
/// catalog: a query fetching records scattered over the table otherwise
/// decrypts one block of 1,024 entries for nearly every record.
pub fn set_catalog_cache_bytes(bytes: usize) {
    CATALOG_CACHE_SET.store(bytes.max(1 << 20), Ordering::Relaxed);
}
/// Encoded states from this size on are saved as a snapshot and a log of
/// changes: below it, writing the whole state costs less than the head
/// file's extra writes.
const LOG_FROM: usize = 256 * 1024;
/// First bytes of a table's state file.
const TABLE_MAGIC: &[u8; 8] = b"SSMTBL01";
/// Binds a table's state to its kind in the authenticated data.
const TABLE_LABEL: &str = "table";
/// The version in a table state's authenticated data (apart from the
/// index states' 1 to 3).
const TABLE_AAD_VERSION: u8 = 100;
/// First bytes of a format-2 state file (read, never written).
const MAGIC_V2: &[u8; 8] = b"SSMIDX02";
/// Magic of the server's shared copy of a state, with its place in the
/// chain of states ([`Chain`]).
const SHARED_MAGIC: &[u8; 8] = b"SSMSHR03";
/// Magic of a shared state written with its catalog as a map of postcard
/// entries (read; written only by tests of its adoption).
const SHARED_MAGIC_V2: &[u8; 8] = b"SSMSHR02";
/// Magic of a shared state written before the chain (read, never
/// written).
const SHARED_MAGIC_V1: &[u8; 8] = b"SSMSHR01";
/// First bytes of a format-1 state file (read, never written).
const MAGIC_V1: &[u8; 8] = b"SSMIDX01";

/// Where a document came from, kept in the client state so that a search
/// can show paths without fetching documents, and `add` can tell an
/// unchanged file from a changed one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentInfo {
    /// The document's identifier.
    pub id: u64,
    /// The path it was added from, as given (lossily UTF-8).
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// SHA-256 of its content; `None` for documents added by a build that
    /// did not record it (found by fetching the document when needed).
    /// An entry read from a catalog block of the compact form holds the
    /// first 16 bytes, then zeros (module `forms`): compare it with a
    /// content's SHA-256 through [`digest_matches`].
    pub digest: Option<[u8; 32]>,
}

/// Whether the digest a catalog entry keeps is the SHA-256 `of` a
/// content: on their first 16 bytes, all that a catalog block of the
/// compact form keeps (module `forms`, "The digest kept").
pub(crate) fn digest_matches(kept: &[u8; 32], of: &[u8; 32]) -> bool {
    kept[..16] == of[..16]
}

/// [`DocumentInfo`] as format 1 and 2 stored it.
#[derive(Deserialize)]
struct DocumentInfoV2 {
    id: u64,
    path: String,
    size: u64,
}

impl From<DocumentInfoV2> for DocumentInfo {
    fn from(d: DocumentInfoV2) -> Self {
        DocumentInfo {
            id: d.id,
            path: d.path,
            size: d.size,
            digest: None,
        }
    }
}

/// A pending intent as format 2 kept it inside the state (read, never
/// written: format 3 keeps intents in files of their own).
#[derive(Deserialize)]
struct PendingIntentV2 {
    id: [u8; 16],
    generation: u64,
    requests: Vec<Vec<u8>>,
    documents: Vec<DocumentInfoV2>,
}

/// A file of an add in progress, as format 2 kept it.
#[derive(Deserialize)]
struct JournalEntryV2 {
    id: u64,
    #[allow(dead_code)]
    path: String,
    #[allow(dead_code)]
    digest: [u8; 32],
}

/// A pending intent, as the state refers to it: the intent itself is in
/// its own file (`indexes/NAME.intents/ID`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PendingRef {
    /// The intent's identifier (also its request id on the server).
    pub id: [u8; 16],
    /// Documents it adds or removes, for messages.
    pub documents: u64,
}

/// Everything the client must remember about one index.
#[derive(Serialize, Deserialize)]
pub(crate) struct IndexState {
    /// Registry name of the scheme.
    pub scheme: String,
    /// Scheme parameters given at creation.
    pub params: Params,
    /// The index generation the client state belongs to.
    pub generation: u64,
    /// The next unused document identifier; identifiers are never reused,
    /// also after a crash (they are reserved before anything is sent).
    pub next_doc: u64,
    /// The scheme client's own state (keys included).
    pub client: Vec<u8>,
    /// Document identifier to origin.
    pub catalog: Catalog,
    /// Intents saved but not completed, oldest first.
    pub pending: Vec<PendingRef>,
    /// Identifiers reserved by an add in progress. Those that never reach
    /// the catalog (the add was interrupted before their update was saved)
    /// are never handed out again; their stored documents are deleted.
    pub reserved: Vec<u64>,
    /// Stored documents to delete (replaced, removed, or left by an
    /// interrupted add); deleting a missing one is not an error.
    pub garbage: Vec<u64>,
    /// Intents found in a format-2 state, until they are written as files.
    #[serde(skip)]
    pub legacy: Vec<LegacyIntent>,
    /// Where the state file's log of changes stands, when this state is
    /// the one last loaded from or saved to it (format 4: [`StateCipher::save`]).
    #[serde(skip)]
    log: Mutex<Option<LogAt>>,
}

/// A pending intent of a format-2 state.
pub(crate) struct LegacyIntent {
    pub id: [u8; 16],
    pub generation: u64,
    pub requests: Vec<Vec<u8>>,
    pub documents: Vec<DocumentInfo>,
}

/// Formats 1 and 2 of [`IndexState`]: the same fields, followed in
/// format 2 by `tail`, its pending intents and journal (encoded in
/// sequence, as fields; format 1's `()` encodes as nothing).
#[derive(Deserialize)]
struct IndexStateOld<Tail> {
    scheme: String,
    params: Params,
    generation: u64,
    next_doc: u64,
    client: Vec<u8>,
    catalog: BTreeMap<u64, DocumentInfoV2>,
    tail: Tail,
}

/// Format 2 of [`IndexState`].
type IndexStateV2 = IndexStateOld<(Vec<PendingIntentV2>, Vec<JournalEntryV2>)>;

/// Format 1 of [`IndexState`], without pending intents and journal.
type IndexStateV1 = IndexStateOld<()>;

impl<Tail> IndexStateOld<Tail> {
    /// The state in the current format, its documents as they were.
    fn upgrade(&mut self) -> IndexState {
        let mut state =
            IndexState::new(&self.scheme, &self.params, std::mem::take(&mut self.client));
        state.generation = self.generation;
        state.next_doc = self.next_doc;
        state.catalog = std::mem::take(&mut self.catalog)
            .into_iter()
            .map(|(id, d)| (id, d.into()))
            .collect::<BTreeMap<_, _>>()
            .into();
        state
    }
}

impl IndexState {
    /// A new state: nothing added yet.
    pub(crate) fn new(scheme: &str, params: &Params, client: Vec<u8>) -> Self {
        IndexState {
            scheme: scheme.to_owned(),
            params: params.clone(),
            generation: 0,
            next_doc: 1,
            client,
            catalog: Catalog::default(),
            pending: Vec::new(),
            reserved: Vec::new(),
            garbage: Vec::new(),
            legacy: Vec::new(),
            log: Mutex::new(None),
        }
    }

    /// The catalog's documents added from `path`, by identifier.
    pub(crate) fn documents_at(&self, path: &str) -> Result<Vec<DocumentInfo>> {
        self.catalog.with_paths(&[path].into_iter().collect())
    }
}

/// An [`IndexState`] as formats 5 and 6 encode it: the catalog as the
/// runs it names and its overlay ([`LocalCatalog`]).
#[derive(Serialize)]
struct LocalRef<'a> {
    scheme: &'a str,
    params: &'a Params,
    generation: u64,
    next_doc: u64,
    client: &'a [u8],
    catalog: LocalCatalog<'a>,
    pending: &'a [PendingRef],
    reserved: &'a [u64],
    garbage: &'a [u64],
}

impl<'a> LocalRef<'a> {
    fn of(state: &'a IndexState) -> Self {
        LocalRef {
            scheme: &state.scheme,
            params: &state.params,
            generation: state.generation,
            next_doc: state.next_doc,
            client: &state.client,
            catalog: LocalCatalog(&state.catalog),
            pending: &state.pending,
            reserved: &state.reserved,
            garbage: &state.garbage,
        }
    }
}

/// [`LocalRef`] as read back.
#[derive(Deserialize)]
struct LocalState {
    scheme: String,
    params: Params,
    generation: u64,
    next_doc: u64,
    client: Vec<u8>,
    catalog: CatalogLocal,
    pending: Vec<PendingRef>,
    reserved: Vec<u64>,
    garbage: Vec<u64>,
}

impl LocalState {
    /// The state, its catalog's runs opened in `store`.
    fn into_state(self, store: Arc<RunStore>) -> Result<IndexState> {
        let (mut state, catalog) = self.split();
        state.catalog = Catalog::from_local(catalog, store)?;
        Ok(state)
    }

    /// The state with an empty catalog, and its catalog as named.
    fn split(mut self) -> (IndexState, CatalogLocal) {
        let mut state =
            IndexState::new(&self.scheme, &self.params, std::mem::take(&mut self.client));
        state.generation = self.generation;
        state.next_doc = self.next_doc;
        state.pending = std::mem::take(&mut self.pending);
        state.reserved = std::mem::take(&mut self.reserved);
        state.garbage = std::mem::take(&mut self.garbage);
        let catalog = std::mem::replace(
            &mut self.catalog,
            CatalogLocal {
                runs: Vec::new(),
                len: 0,
                overlay: Vec::new(),
            },
        );
        (state, catalog)
    }
}

/// `Drop` that zeroizes a secret field of each type named.
macro_rules! zeroize_on_drop {
    ($($ty:ident$(<$param:ident>)? => $field:ident),* $(,)?) => {$(
        impl$(<$param>)? Drop for $ty$(<$param>)? {
            fn drop(&mut self) {
                self.$field.zeroize();
            }
        }
    )*};
}

zeroize_on_drop!(
    IndexStateOld<Tail> => client,
    IndexState => client,
    LocalState => client,
);

/// Decodes a decrypted state as [`StateCipher::load`] does, in both
/// formats, a shared record's state and a catalog run's blocks (for the
/// fuzz targets).
pub(crate) fn parse_plain(bytes: &[u8]) {
    let _ = wire::decode::<IndexState>(bytes);
    let _ = wire::decode::<LocalState>(bytes);
    let _ = wire::decode::<IndexStateV2>(bytes);
    let _ = wire::decode::<IndexStateV1>(bytes);
    let _ = shared_form::decode(bytes);
    forms::parse_blocks(bytes);
}

/// `len ‖ scheme ‖ sealed`: the scheme name (in clear, bound into the
/// associated data) and the sealed rest; `None` when it does not parse.
fn split_scheme(bytes: &[u8]) -> Option<(&str, &[u8])> {
    let (&len, rest) = bytes.split_first()?;
    let (scheme, sealed) = rest.split_at_checked(usize::from(len))?;
    Some((std::str::from_utf8(scheme).ok()?, sealed))
}

/// Seals and opens the state files of one profile.
pub(crate) struct StateCipher {
    aead: Aes256GcmSiv,
    profile_id: String,
    /// Digests under a key derived from the state key (the nonces of
    /// shared state segments), [`StateCipher::derived_names_key`].
    names: sesame_crypto::hash::KeyedHash,
    /// The key that names the records imported into a table without a
    /// key when the table's state holds none (a table made by a build
    /// before tables had their own naming key): the same derived key.
    names_key: Key<32>,
    /// Encoded states of at least this many bytes are saved as a
    /// snapshot and a log of changes ([`LOG_FROM`]).
    log_from: usize,
    /// The key of the catalogs' runs (module `runs`).
    catalog_key: Key<32>,
    /// Entries of a catalog's overlay from which a save writes a run.
    flush_at: usize,
    /// Bytes of a catalog's blocks kept in memory.
    cache_bytes: usize,
}

impl StateCipher {
    pub(crate) fn new(key: &Key<32>, profile_id: &str) -> Self {
        let names_key = key.derive("sesame-client/names");
        StateCipher {
            aead: Aes256GcmSiv::new(key),
            profile_id: profile_id.to_owned(),
            names: sesame_crypto::hash::KeyedHash::new(&names_key),
            names_key,
            log_from: LOG_FROM,
            catalog_key: key.derive("sesame-client/catalog"),
            flush_at: catalog::FLUSH_AT,
            cache_bytes: CATALOG_CACHE_SET.load(Ordering::Relaxed),
        }
    }

    /// The cipher writing a catalog's overlay as a run from `flush_at`
    /// entries and keeping `cache_bytes` of its blocks in memory (tests
    /// of the catalog on disk).
    #[cfg(test)]
    pub(crate) fn with_catalog(mut self, flush_at: usize, cache_bytes: usize) -> Self {
        self.flush_at = flush_at;
        self.cache_bytes = cache_bytes;
        self
    }

    /// The store of the catalog runs of `index`, whose state is at
    /// `path`.
    fn run_store(&self, path: &Path, index: &str) -> Arc<RunStore> {
        Arc::new(RunStore::new(
            &self.catalog_key,
            &self.profile_id,
            index,
            path,
            self.cache_bytes,
        ))
    }

    /// The cipher saving states of `log_from` encoded bytes and more as
    /// a snapshot and a log of changes (tests of the log).
    #[cfg(test)]
    pub(crate) fn with_log_from(mut self, log_from: usize) -> Self {
        self.log_from = log_from;
        self
    }

    /// The naming key of a table whose state holds none (see
    /// `TableState::naming` in module `table`).
    pub(crate) fn derived_names_key(&self) -> Key<32> {
        self.names_key.clone_secret()
    }

    fn aad(&self, version: u8, index: &str, scheme: &str) -> Vec<u8> {
        let mut aad = format!("sesame-client/state/v{version}\0").into_bytes();
        for part in [self.profile_id.as_str(), index, scheme] {
            aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
            aad.extend_from_slice(part.as_bytes());
        }
        aad
    }

    /// Encrypts `state` and writes it to `path`: a small state whole
    /// (format 3, atomically); a larger one as a snapshot and a log of
    /// changes (format 4, see [`StateCipher::save_logged`]), so that a
    /// save writes in proportion to what changed since the last.
    pub(crate) fn save(
        &self,
        rng: &mut dyn CryptoRngCore,
        path: &Path,
        index: &str,
        state: &IndexState,
    ) -> Result<()> {
        // The overlay written as a run first: the state saved next names
        // it (a kill in between leaves a run no state names).
        let flushed = state
            .catalog
            .flush(rng, self.run_store(path, index), self.flush_at)?;
        let mut log = lock(&state.log);
        let mut changes = lock(&state.catalog.changes);
        if let (Some(at), Some(list)) = (log.as_mut(), changes.as_mut()) {
            if at.path == path {
                if flushed {
                    list.clear();
                }
                if let Some(head) = self.append_change(rng, at, index, state, list, flushed)? {
                    at.head = head;
                    list.clear();
                    drop((log, changes));
                    self.remove_unnamed_runs(path, state);
                    return Ok(());
                }
            }
        }
        let plain = Zeroizing::new(wire::encode(&LocalRef::of(state))?);
        if plain.len() < self.log_from {
            self.save_whole(rng, path, index, state, &plain)?;
            remove_logs(path, None);
            *log = None;
        } else {
            let head = self.start_log(rng, path, index, &state.scheme, &plain)?;
            remove_logs(path, Some(&head.log));
            *log = Some(LogAt {
                path: path.to_path_buf(),
                head,
                format: 6,
            });
        }
        *changes = Some(Vec::new());
        drop((log, changes));
        self.remove_unnamed_runs(path, state);
        Ok(())
    }

    /// Deletes the catalog runs beside `path` that the state just saved
    /// does not name (merged away, or written by a save that did not
    /// complete).
    fn remove_unnamed_runs(&self, path: &Path, state: &IndexState) {
        let named: Vec<[u8; 16]> = state.catalog.run_refs().iter().map(|r| r.id).collect();
        remove_runs(path, &named);
    }

    /// Format 5: `plain` (the encoded `state`, its catalog as the runs
    /// it names and its overlay) sealed whole, written atomically.
    fn save_whole(
        &self,
        rng: &mut dyn CryptoRngCore,
        path: &Path,
        index: &str,
        state: &IndexState,
        plain: &[u8],
    ) -> Result<()> {
        let scheme = state.scheme.as_bytes();
        let scheme_len = u8::try_from(scheme.len()).map_err(|_| {
            ClientError::InvalidArgument(format!("scheme name {:?} is too long", state.scheme))
        })?;
        let sealed = self
            .aead
            .seal(rng, &self.aad(5, index, &state.scheme), plain)
            .map_err(|_| ClientError::InvalidArgument("client state is too large".into()))?;
        let mut file = Vec::with_capacity(MAGIC_V5.len() + 1 + scheme.len() + sealed.len());
        file.extend_from_slice(MAGIC_V5);
        file.push(scheme_len);
        file.extend_from_slice(scheme);
        file.extend_from_slice(&sealed);
        fsutil::write_atomic(path, &file)
    }

    /// Encrypts `plain` (a table's state, named `name`) and writes it to
    /// `path` atomically.
    pub(crate) fn seal_table(
        &self,
        rng: &mut dyn CryptoRngCore,
        path: &Path,
        name: &str,
        plain: &[u8],
    ) -> Result<()> {
        let sealed = self
            .aead
            .seal(rng, &self.aad(TABLE_AAD_VERSION, name, TABLE_LABEL), plain)
            .map_err(|_| ClientError::InvalidArgument("table state is too large".into()))?;
        let mut file = Vec::with_capacity(TABLE_MAGIC.len() + sealed.len());
        file.extend_from_slice(TABLE_MAGIC);
        file.extend_from_slice(&sealed);
        fsutil::write_atomic(path, &file)
    }

    /// Reads and decrypts a table's state; `None` when there is no file.
    /// Any damage is [`ClientError::StateCorrupt`].
    pub(crate) fn open_table(&self, path: &Path, name: &str) -> Result<Option<Zeroizing<Vec<u8>>>> {
        let file = match std::fs::read(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ClientError::io("read", path, &e)),
        };
        let corrupt = || ClientError::StateCorrupt {
            index: format!("table {name}"),
            path: PathBuf::from(path),
        };
        let sealed = file
            .strip_prefix(TABLE_MAGIC.as_slice())
            .ok_or_else(corrupt)?;
        self.aead
            .open(&self.aad(TABLE_AAD_VERSION, name, TABLE_LABEL), sealed)
            .map(|p| Some(Zeroizing::new(p)))
            .map_err(|_| corrupt())
    }

    /// AES-256-GCM-SIV under the state key of `plain`, with the profile
    /// id, `label` and `context` as associated data (a table's shared
    /// record: its index, version and incarnation).
    pub(crate) fn seal_bound(
        &self,
        rng: &mut dyn CryptoRngCore,
        label: &str,
        context: &[u8],
        plain: &[u8],
    ) -> Result<Vec<u8>> {
        self.aead
            .seal(rng, &self.bound_aad(label, context), plain)
            .map_err(|_| ClientError::InvalidArgument(format!("{label}: too large to seal")))
    }

    /// Opens what [`StateCipher::seal_bound`] sealed with the same `label`
    /// and `context`; `None` for anything else.
    pub(crate) fn open_bound(
        &self,
        label: &str,
        context: &[u8],
        sealed: &[u8],
    ) -> Option<Zeroizing<Vec<u8>>> {
        self.aead
            .open(&self.bound_aad(label, context), sealed)
            .ok()
            .map(Zeroizing::new)
    }

    fn bound_aad(&self, label: &str, context: &[u8]) -> Vec<u8> {
        let mut aad = b"sesame-client/bound/v1\0".to_vec();
        for part in [self.profile_id.as_bytes(), label.as_bytes(), context] {
            aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
            aad.extend_from_slice(part);
        }
        aad
    }

    /// Reads and decrypts the state at `path`. Any damage (truncation, a
    /// flipped byte, a file from elsewhere) is [`ClientError::StateCorrupt`].
    pub(crate) fn load(&self, path: &Path, index: &str) -> Result<IndexState> {
        let file = std::fs::read(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                ClientError::UnknownIndex(index.to_owned())
            } else {
                ClientError::io("read", path, &e)
            }
        })?;
        let corrupt = || ClientError::StateCorrupt {
            index: index.to_owned(),
            path: PathBuf::from(path),
        };
        for (magic, format) in [(MAGIC_LOGGED, 6), (MAGIC_LOGGED_V4, 4)] {
            if let Some(rest) = file.strip_prefix(magic.as_slice()) {
                let (scheme, sealed) = split_scheme(rest).ok_or_else(corrupt)?;
                return self.load_logged(path, index, format, scheme, sealed);
            }
        }
        let (version, rest) = if let Some(rest) = file.strip_prefix(MAGIC_V5.as_slice()) {
            (5, rest)
        } else if let Some(rest) = file.strip_prefix(MAGIC.as_slice()) {
            (3, rest)
        } else if let Some(rest) = file.strip_prefix(MAGIC_V2.as_slice()) {
            (2, rest)
        } else {
            (
                1,
                file.strip_prefix(MAGIC_V1.as_slice()).ok_or_else(corrupt)?,
            )
        };
        let (scheme, sealed) = split_scheme(rest).ok_or_else(corrupt)?;
        let plain = Zeroizing::new(
            self.aead
                .open(&self.aad(version, index, scheme), sealed)
                .map_err(|_| corrupt())?,
        );
        let state: IndexState = match version {
            5 => {
                let local: LocalState = wire::decode(&plain).map_err(|_| corrupt())?;
                if local.scheme != scheme {
                    return Err(corrupt());
                }
                local.into_state(self.run_store(path, index))?
            }
            3 => wire::decode(&plain).map_err(|_| corrupt())?,
            2 => {
                let mut v2: IndexStateV2 = wire::decode(&plain).map_err(|_| corrupt())?;
                let mut state = v2.upgrade();
                let (pending, journal) = std::mem::take(&mut v2.tail);
                // An interrupted add's files: their identifiers stay
                // reserved (never handed out again) until cleaned up.
                state.reserved = journal.iter().map(|e| e.id).collect();
                state.legacy = pending
                    .into_iter()
                    .map(|p| LegacyIntent {
                        id: p.id,
                        generation: p.generation,
                        requests: p.requests,
                        documents: p.documents.into_iter().map(Into::into).collect(),
                    })
                    .collect();
                state
            }
            _ => {
                let mut v1: IndexStateV1 = wire::decode(&plain).map_err(|_| corrupt())?;
                v1.upgrade()
            }
        };
        if state.scheme != scheme {
            return Err(corrupt());
        }
        *lock(&state.catalog.changes) = Some(Vec::new());
        Ok(state)
    }
}

/// First bytes of a shared state's plaintext sealed in segments
/// ([`StateCipher::seal_segmented_with`]).
const SEGMENTED: &[u8; 8] = b"SSMSEG01";
/// Bytes of the seal of a segmented plaintext's segment list: nonce,
/// SHA-256 and tag.
const SEGMENT_LIST_SEAL: usize = 12 + 32 + 16;

impl StateCipher {
    /// [`StateCipher::seal_segmented_with`] with nothing to take from a
    /// last commit.
    #[cfg(test)]
    pub(crate) fn seal_segmented(
        &self,
        rng: &mut dyn CryptoRngCore,
        segment_aad: &[u8],
        aad: &[u8],
        plain: &[u8],
    ) -> Result<Vec<u8>> {
        let memo = CommitMemo::default();
        let (sealed, _) =
            self.seal_segmented_with(rng, (segment_aad, aad), plain, &memo, Vec::new())?;
        Ok(sealed)
    }

    /// Seals `plain` in content-defined segments ([`crate::cdc`]), each
    /// with AES-256-GCM-SIV under a nonce derived from its bytes (a keyed
    /// digest: the same segment seals to the same bytes, which says only
    /// that it is the same) and `segment_aad` (the index, not the
    /// version), followed by the seal of the SHA-256 of the segments
    /// under `aad` (the version) with a random nonce:
    /// `"SSMSEG01" || (u32 len || segment)* || list seal`. Unchanged
    /// parts of a state seal to unchanged bytes, which the chunk layer
    /// does not send again.
    ///
    /// A segment that `memo` (the last commit) holds takes the sealed
    /// bytes it had there, the same bytes as sealing it again. The sealed
    /// bytes are written after `out`'s (a header), and each segment is
    /// noted in the returned [`Seal`] (its plaintext not yet set:
    /// [`Seal::finish`]).
    pub(crate) fn seal_segmented_with(
        &self,
        rng: &mut dyn CryptoRngCore,
        (segment_aad, aad): (&[u8], &[u8]),
        plain: &[u8],
        memo: &CommitMemo,
        mut out: Vec<u8>,
    ) -> Result<(Vec<u8>, Seal)> {
        let too_large = || ClientError::InvalidArgument("client state is too large".into());
        let check = self.memo_check(segment_aad);
        let mut seal = Seal::new(check);
        let segment_aad = [b"segment\0".as_slice(), segment_aad].concat();
        out.extend_from_slice(SEGMENTED);
        let segments_at = out.len();
        let mut start = 0;
        for part in crate::cdc::chunks(plain) {
            let fresh;
            let sealed = match memo.sealed(&check, part) {
                Some(sealed) => sealed,
                None => {
                    let digest = self.names.hash(
                        "sesame-client/shared-segment-nonce/v1",
                        &[&segment_aad, part],
                    );
                    let mut nonce = [0u8; 12];
                    nonce.copy_from_slice(digest.get(..12).unwrap_or(&[0; 12]));
                    fresh = self
                        .aead
                        .seal_with_nonce(&nonce, &segment_aad, part)
                        .map_err(|_| too_large())?;
                    &fresh
                }
            };
            let len = u32::try_from(sealed.len()).map_err(|_| too_large())?;
            out.extend_from_slice(&len.to_be_bytes());
            let at = out.len();
            out.extend_from_slice(sealed);
            seal.segment(part, start, at..out.len());
            start += part.len();
        }
        let list = sesame_crypto::hash::sha256(out.get(segments_at..).unwrap_or_default());
        let list_seal = self.aead.seal(rng, aad, &list).map_err(|_| too_large())?;
        out.extend_from_slice(&list_seal);
        Ok((out, seal))
    }

    /// Opens what [`StateCipher::seal_segmented_with`] sealed, or a plaintext
    /// sealed whole under `aad` (the format before segments); `None` if
    /// anything does not open or match.
    pub(crate) fn open_segmented(
        &self,
        segment_aad: &[u8],
        aad: &[u8],
        sealed: &[u8],
    ) -> Option<Zeroizing<Vec<u8>>> {
        let Some(body) = sealed.strip_prefix(SEGMENTED.as_slice()) else {
            return self.aead.open(aad, sealed).ok().map(Zeroizing::new);
        };
        let split = body.len().checked_sub(SEGMENT_LIST_SEAL)?;
        let (segments, seal) = body.split_at(split);
        let list = self.aead.open(aad, seal).ok()?;
        if list != sesame_crypto::hash::sha256(segments) {
            return None;
        }
        let segment_aad = [b"segment\0".as_slice(), segment_aad].concat();
        let mut plain = Zeroizing::new(Vec::with_capacity(segments.len()));
        let mut rest = segments;
        while !rest.is_empty() {
            let (len, tail) = rest.split_first_chunk::<4>()?;
            let len = usize::try_from(u32::from_be_bytes(*len)).ok()?;
            let (segment, tail) = tail.split_at_checked(len)?;
            let part = Zeroizing::new(self.aead.open(&segment_aad, segment).ok()?);
            plain.extend_from_slice(&part);
            rest = tail;
        }
        Some(plain)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod catalog_tests;
