//! Pending intents: operations computed and saved before anything is sent,
//! completed by whichever command runs next if the first one does not.
//!
//! An intent holds the encoded scheme requests of one operation (an update
//! of some documents, or a search that writes on the server), what the
//! client does once the server has applied them (documents that enter or
//! leave the catalog; the query and the context to resolve its answer),
//! and the generation of the index it belongs to. The session writes the
//! intent to its own file, then the new client state that refers to it
//! (one atomic rename): after a crash the state either refers to a
//! complete intent file or to none. The requests go to the server under
//! the intent's identifier, which the server remembers with its answers,
//! so sending an intent again never applies it twice and gets the same
//! answers.
//!
//! Files: `indexes/NAME.intents/HEX-ID`, each `MAGIC || AES-256-GCM-SIV
//! (state key, aad, wire(intent))` with
//!
//! ```text
//! aad = "sesame-client/intent/v1\0" || len‖profile id || len‖index name || intent id
//! ```
//!
//! so an intent file cannot be moved to another index, profile or
//! identifier. Intent files the state does not refer to (left by a crash
//! between the two writes) are removed when the next intent is saved.
//!
//! Beside each intent of a scheme whose search writes nothing, the
//! scheme's client state *before* it: `HEX-ID.before`, `MAGIC_BEFORE ||
//! AES-256-GCM-SIV(state key, aad, state)` with the aad above under the
//! label `sesame-client/intent-before/v1\0`. While the oldest pending
//! intent cannot be sent (a full disk on the server, a store or server
//! that cannot be reached), a search answers from that state: the one
//! the server's index has ([`IntentFiles::load_before`]).

use std::path::PathBuf;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::wire;
use sesame_crypto::{Aes256GcmSiv, Key};
use sesame_sse::query::Query;
use zeroize::{Zeroize, Zeroizing};

use crate::error::{ClientError, Result};
use crate::fsutil;
use crate::state::DocumentInfo;

/// First bytes of an intent file.
const MAGIC: &[u8; 8] = b"SSMINT01";
/// First bytes of the file of the client state before an intent.
const MAGIC_BEFORE: &[u8; 8] = b"SSMPRE01";
/// Name ending of the file of the client state before an intent.
const BEFORE: &str = ".before";

/// What completing an intent does on the client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) enum IntentOp {
    /// An update: `add` enter the catalog, `remove` leave it (and their
    /// stored documents are deleted).
    Update {
        /// Documents the update indexes.
        add: Vec<DocumentInfo>,
        /// Documents the update removes.
        remove: Vec<u64>,
    },
    /// A search whose scheme writes on the server: its answers are
    /// resolved with `context`.
    Search {
        /// The query.
        query: SavedQuery,
        /// The scheme's context from `prepare_query` (may hold secrets).
        context: Vec<u8>,
    },
}

/// A [`Query`] as an intent keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum SavedQuery {
    /// [`Query::Exact`].
    Exact(Vec<u8>),
    /// [`Query::Prefix`].
    Prefix(Vec<u8>),
    /// [`Query::Wildcard`].
    Wildcard(Vec<u8>),
    /// [`Query::Conjunctive`].
    Conjunctive(Vec<Vec<u8>>),
    /// [`Query::Ranked`].
    Ranked(Vec<Vec<u8>>, u64),
}

impl From<&Query> for SavedQuery {
    fn from(q: &Query) -> Self {
        match q {
            Query::Exact(w) => SavedQuery::Exact(w.clone()),
            Query::Prefix(w) => SavedQuery::Prefix(w.clone()),
            Query::Wildcard(w) => SavedQuery::Wildcard(w.clone()),
            Query::Conjunctive(ws) => SavedQuery::Conjunctive(ws.clone()),
            Query::Ranked { keywords, k } => SavedQuery::Ranked(keywords.clone(), *k as u64),
        }
    }
}

impl SavedQuery {
    /// The query back.
    pub(crate) fn query(&self) -> Query {
        match self {
            SavedQuery::Exact(w) => Query::Exact(w.clone()),
            SavedQuery::Prefix(w) => Query::Prefix(w.clone()),
            SavedQuery::Wildcard(w) => Query::Wildcard(w.clone()),
            SavedQuery::Conjunctive(ws) => Query::Conjunctive(ws.clone()),
            SavedQuery::Ranked(ws, k) => Query::Ranked {
                keywords: ws.clone(),
                k: usize::try_from(*k).unwrap_or(usize::MAX),
            },
        }
    }
}

/// One operation, saved before it is sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Intent {
    /// Names the operation on the server (a repeat is recognised).
    pub id: [u8; 16],
    /// The index generation it belongs to.
    pub generation: u64,
    /// The encoded scheme requests, applied together and once.
    pub requests: Vec<Vec<u8>>,
    /// What completing it does.
    pub op: IntentOp,
}

impl Intent {
    /// Documents it adds or removes (for messages).
    pub(crate) fn documents(&self) -> u64 {
        match &self.op {
            IntentOp::Update { add, remove } => (add.len() + remove.len()) as u64,
            IntentOp::Search { .. } => 0,
        }
    }
}

impl Drop for Intent {
    fn drop(&mut self) {
        if let IntentOp::Search { context, .. } = &mut self.op {
            context.zeroize();
        }
    }
}

/// The aad label of the client state before an intent.
const BEFORE_LABEL: &[u8] = b"sesame-client/intent-before/v1\0";

/// The intent files of one index.
pub(crate) struct IntentFiles {
    dir: PathBuf,
    aead: Aes256GcmSiv,
    profile_id: String,
    index: String,
}

impl IntentFiles {
    /// The intents of `index`, in `dir` (`indexes/NAME.intents`), sealed
    /// under `key` (the profile's state key).
    pub(crate) fn new(dir: PathBuf, key: &Key<32>, profile_id: &str, index: &str) -> Self {
        IntentFiles {
            dir,
            aead: Aes256GcmSiv::new(key),
            profile_id: profile_id.to_owned(),
            index: index.to_owned(),
        }
    }

    fn path(&self, id: &[u8; 16]) -> PathBuf {
        self.dir.join(hex::encode(id))
    }

    fn before_path(&self, id: &[u8; 16]) -> PathBuf {
        self.dir.join(format!("{}{BEFORE}", hex::encode(id)))
    }

    fn aad(&self, id: &[u8; 16]) -> Vec<u8> {
        self.aad_as(b"sesame-client/intent/v1\0", id)
    }

    fn aad_as(&self, label: &[u8], id: &[u8; 16]) -> Vec<u8> {
        let mut aad = label.to_vec();
        for part in [self.profile_id.as_str(), self.index.as_str()] {
            aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
            aad.extend_from_slice(part.as_bytes());
        }
        aad.extend_from_slice(id);
        aad
    }

    /// Writes `intent` to its file, durably, and returns the file's bytes
    /// (what the server keeps of it when the index's state is shared).
    pub(crate) fn save(&self, rng: &mut dyn CryptoRngCore, intent: &Intent) -> Result<Vec<u8>> {
        let plain = Zeroizing::new(wire::encode(intent)?);
        let sealed = self
            .aead
            .seal(rng, &self.aad(&intent.id), &plain)
            .map_err(|_| ClientError::InvalidArgument("an update is too large to save".into()))?;
        let mut file = Vec::with_capacity(MAGIC.len() + sealed.len());
        file.extend_from_slice(MAGIC);
        file.extend_from_slice(&sealed);
        self.write(&intent.id, &file)?;
        Ok(file)
    }

    /// Writes `state`, the scheme's client state before intent `id`, to
    /// the file beside the intent's. Not synced: the file only lets a
    /// read answer around an intent that cannot be sent, and after a
    /// crash that lost or tore it the read is refused instead
    /// ([`IntentFiles::load_before`] opens only a whole, authentic file).
    pub(crate) fn save_before(
        &self,
        rng: &mut dyn CryptoRngCore,
        id: &[u8; 16],
        state: &[u8],
    ) -> Result<()> {
        let sealed = self
            .aead
            .seal(rng, &self.aad_as(BEFORE_LABEL, id), state)
            .map_err(|_| {
                ClientError::InvalidArgument("a client state is too large to save".into())
            })?;
        let mut file = Vec::with_capacity(MAGIC_BEFORE.len() + sealed.len());
        file.extend_from_slice(MAGIC_BEFORE);
        file.extend_from_slice(&sealed);
        if !self.dir.is_dir() {
            fsutil::create_private_dir(&self.dir)?;
        }
        let path = self.before_path(id);
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        options
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &file))
            .map_err(|e| ClientError::io("write", &path, &e))
    }

    /// The scheme's client state before intent `id`
    /// ([`IntentFiles::save_before`]), or `None` where this device has
    /// none (an intent of a scheme whose search writes, one saved by
    /// another device or by an older version) or it does not open.
    pub(crate) fn load_before(&self, id: &[u8; 16]) -> Option<Zeroizing<Vec<u8>>> {
        let file = std::fs::read(self.before_path(id)).ok()?;
        let sealed = file.strip_prefix(MAGIC_BEFORE.as_slice())?;
        self.aead
            .open(&self.aad_as(BEFORE_LABEL, id), sealed)
            .ok()
            .map(Zeroizing::new)
    }

    /// Writes the sealed bytes of intent `id` to its file, durably.
    pub(crate) fn write(&self, id: &[u8; 16], file: &[u8]) -> Result<()> {
        if !self.dir.is_dir() {
            fsutil::create_private_dir(&self.dir)?;
        }
        fsutil::write_atomic(&self.path(id), file)
    }

    /// Whether intent `id` has its file here.
    pub(crate) fn has(&self, id: &[u8; 16]) -> bool {
        self.path(id).is_file()
    }

    /// Reads the intent `id`. A missing or damaged file is
    /// [`ClientError::ProfileCorrupt`] naming it.
    pub(crate) fn load(&self, id: &[u8; 16]) -> Result<Intent> {
        let path = self.path(id);
        let file = match std::fs::read(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ClientError::ProfileCorrupt {
                    path,
                    reason: "this saved operation is missing, so an interrupted update cannot be \
                             completed"
                        .into(),
                })
            }
            Err(e) => return Err(ClientError::io("read", &path, &e)),
        };
        self.open(id, &file)
    }

    /// Opens the sealed bytes of intent `id` (its file, or the server's
    /// copy). Damage is [`ClientError::ProfileCorrupt`] naming its file.
    pub(crate) fn open(&self, id: &[u8; 16], file: &[u8]) -> Result<Intent> {
        let path = self.path(id);
        let damaged = |reason: &str| ClientError::ProfileCorrupt {
            path: path.clone(),
            reason: reason.to_owned(),
        };
        let sealed = file
            .strip_prefix(MAGIC.as_slice())
            .ok_or_else(|| damaged("not a saved operation of this build"))?;
        let plain = Zeroizing::new(
            self.aead
                .open(&self.aad(id), sealed)
                .map_err(|_| damaged("corrupt or tampered with"))?,
        );
        let intent: Intent = wire::decode(&plain).map_err(|_| damaged("does not decode"))?;
        if &intent.id != id {
            return Err(damaged("holds another operation"));
        }
        Ok(intent)
    }

    /// The sealed bytes of intent `id`'s file.
    pub(crate) fn read(&self, id: &[u8; 16]) -> Result<Vec<u8>> {
        let path = self.path(id);
        std::fs::read(&path).map_err(|e| ClientError::io("read", &path, &e))
    }

    /// Removes the file of `id` (done with), and the state before it; a
    /// missing file is fine.
    pub(crate) fn remove(&self, id: &[u8; 16]) {
        let _ = std::fs::remove_file(self.path(id));
        let _ = std::fs::remove_file(self.before_path(id));
    }

    /// Removes every intent file but those of `keep` (left by a crash
    /// between writing an intent and the state that refers to it).
    pub(crate) fn sweep(&self, keep: &[[u8; 16]]) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let keep: Vec<String> = keep.iter().map(hex::encode).collect();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let id = name.strip_suffix(BEFORE).unwrap_or(&name);
            if id.len() == 32 && !keep.iter().any(|k| k == id) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// Decodes a decrypted intent as [`IntentFiles::load`] does (for the fuzz
/// targets).
pub(crate) fn parse_plain(bytes: &[u8]) {
    let _ = wire::decode::<Intent>(bytes);
}
