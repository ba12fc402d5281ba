//! Client profiles: a directory holding the key-derivation header, the
//! encrypted client state of each index, and (in embedded mode) the store.
//!
//! ```text
//! DIR/
//!   profile.json          header: format, version, profile id, where the index lives, Argon2id parameters and salt, wrapped master key
//!   profile.next.json     a newer header seen on the server (or being put there), at times
//!   profile.rotating.json a rotation of the master key in progress
//!   indexes/NAME.state    encrypted client state of index NAME
//!   indexes/NAME.intents/ operations saved but not completed (see `intents`)
//!   store.redb            embedded profiles: index entries and encrypted documents
//!   server.json           server profiles: URL, CA, sealed token
//!   indexes/NAME.lock     held by the process using index NAME (empty)
//! ```
//!
//! The header says which of `store.redb` and `server.json` the profile
//! has, so opening a profile never creates or replaces a part of it: a
//! missing or damaged part is an error naming it.
//!
//! Keys (format 3): the profile's master key is random; the header holds
//! it sealed (AES-256-GCM-SIV, every header field as associated data)
//! under a key-encryption key derived from Argon2id(passphrase, salt). The
//! sub-keys (state, documents, server token) come from the master key by
//! HKDF. Changing the passphrase ([`Profile::change_passphrase`]) re-seals
//! the master key under a new salt and passphrase in one atomic rewrite of
//! the header: after a crash the old or the new passphrase opens the
//! profile, never neither, and no other file changes. Formats 1 and 2
//! used the Argon2id output itself as the master key (checked by a sealed
//! constant); they open as before, and a passphrase change moves them to
//! format 3 with that same master key, so their states and documents stay
//! as they are.
//!
//! Header versions (format 3): every rewrite makes the version one more,
//! and the version is sealed with the master key. A server profile's
//! devices share the header through the server (the `profile` record
//! beside each index): a passphrase change puts the new one there at once,
//! and a device never puts back an older one than the server's; it keeps
//! the newer one as `profile.next.json` and asks for the new passphrase
//! ([`ClientError::PassphraseChanged`]), and the next open the passphrase
//! opens it with takes it ([`sync_header`]; tests: `tests/passphrase.rs`).
//! Argon2id costs in a header from the server are capped by a local
//! [`KdfLimit`]. [`Profile::rotate_master`] replaces the master key itself
//! (tests: `tests/master_key.rs`).
//!
//! Layout: this module holds the `Profile` type, opening, paths, indexes
//! and sessions; `create` makes a profile, `header` holds the header and
//! its versions (passphrase change, [`sync_header`], KDF limits),
//! `rotate_master` the master-key rotation and its note, `scheme` index
//! names and keyword schemes, `server` the server binding and
//! [`Profile::join`].

use std::path::{Path, PathBuf};

use rand_core::{CryptoRngCore, OsRng};
use sesame_core::Params;
use sesame_crypto::{Aes256GcmSiv, Key};

use crate::backend::{Backend, EmbeddedBackend};
use crate::error::{ClientError, Result};
use crate::fsutil;
use crate::intents::IntentFiles;
use crate::kdf::{KdfLimit, KdfParams};
use crate::lock::ProfileLock;
use crate::network::{save_binding, NetworkBackend, ServerBinding, SERVER_FILE};
use crate::session::Session;
use crate::session::{SessionBase, SharedHeader};
pub use crate::state::INDEX_DIR;
use crate::state::{IndexState, StateCipher};

mod create;
mod header;
mod rotate_master;
mod server;

pub use crate::scheme::check_scheme;
pub(crate) use crate::scheme::{check_index_name, find_scheme, new_client};
use header::Header;
pub(crate) use header::{parse_header, sync_header};
pub use rotate_master::MasterRotation;

/// Where a profile's indexes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StoreKind {
    /// In `store.redb`, with the server halves in process.
    Embedded,
    /// On the server named in `server.json`.
    Server,
}

/// Name of the header file in a profile directory.
pub const HEADER_FILE: &str = "profile.json";
/// Name of the embedded store file in a profile directory.
pub const STORE_FILE: &str = "store.redb";
/// The index [`Profile::create`] makes and the CLI uses.
pub const DEFAULT_INDEX: &str = "default";

/// Format tag of the header this build writes: a random master key,
/// wrapped.
const FORMAT: &str = "sesame-profile/3";
/// Format tag of headers whose master key is the Argon2id output, checked
/// by a sealed constant (read; moved to format 3 by a passphrase change).
const FORMAT_V2: &str = "sesame-profile/2";
/// Format tag of format-2 headers without the store kind (read, and
/// upgraded to format 2 by the first session).
const FORMAT_V1: &str = "sesame-profile/1";
/// Name of the lock file held while the header is rewritten.
const HEADER_LOCK: &str = "profile.lock";
/// The header's `store` for an embedded profile.
const STORE_EMBEDDED: &str = "embedded";
/// The header's `store` for a profile bound to a server.
const STORE_SERVER: &str = "server";
/// Text sealed in the header's key check.
const CHECK_TEXT: &[u8] = b"sesame profile key check v1";

/// HKDF labels of the sub-keys of the master key.
mod label {
    pub(super) const CHECK: &str = "sesame-client/v1/key-check";
    pub(super) const WRAP: &str = "sesame-client/v3/wrap";
    pub(super) const WRAP_KEY_FILE: &str = "sesame-client/v3/wrap-with-key-file";
    pub(super) const BACKUP: &str = "sesame-client/v1/backup";
    pub(super) const STATE: &str = "sesame-client/v1/state";
    pub(super) const DOCUMENTS: &str = "sesame-client/v1/documents";
    pub(super) const SERVER: &str = "sesame-client/v1/server-token";
    pub(super) const TABLE_NAMES: &str = "sesame-client/v1/table-names";
}

/// Name of a newer header than `profile.json` that this device saw on the
/// server (another device changed the passphrase), or that `passwd` is
/// putting on the server: the next open tries it first and, if the
/// passphrase opens it, makes it `profile.json`.
pub(crate) const NEXT_HEADER_FILE: &str = "profile.next.json";

/// Smallest key file accepted, in bytes.
pub const MIN_KEY_FILE: usize = 16;

/// The key-encryption key from the Argon2id output and, if the profile
/// uses one, the SHA-256 digest of the key file.
fn key_encryption_key(derived: &Key<32>, key_file: Option<&[u8; 32]>) -> Key<32> {
    match key_file {
        None => derived.derive(label::WRAP),
        Some(digest) => {
            let mut ikm = zeroize::Zeroizing::new([0u8; 64]);
            ikm[..32].copy_from_slice(derived.as_bytes());
            ikm[32..].copy_from_slice(digest);
            Key::<64>::from_bytes(*ikm).derive(label::WRAP_KEY_FILE)
        }
    }
}

/// The digest of a key file's contents; refuses one that is too short.
fn key_file_digest(bytes: &[u8]) -> Result<[u8; 32]> {
    if bytes.len() < MIN_KEY_FILE {
        return Err(ClientError::InvalidArgument(format!(
            "the key file holds {} bytes; it must hold at least {MIN_KEY_FILE}",
            bytes.len()
        )));
    }
    Ok(sesame_crypto::hash::sha256(bytes))
}

/// An open profile: its directory and the keys derived from the passphrase.
///
/// Opening a profile only reads its header; nothing is written until an
/// index is changed.
pub struct Profile {
    dir: PathBuf,
    id: String,
    kdf: KdfParams,
    /// The header as read (format 1 headers are upgraded by the first
    /// session, which knows the sealing key then).
    header: std::sync::Mutex<Header>,
    /// The master key (format 3: random and wrapped; formats 1 and 2: the
    /// Argon2id output).
    master: Key<32>,
    /// Format 3: the key-encryption key of the passphrase the profile was
    /// opened with (a header rewrite re-seals the master key under it).
    kek: std::sync::Mutex<Option<Key<32>>>,
    /// The digest of the key file the profile was opened with, if it uses
    /// one (a passphrase change keeps it).
    key_file: std::sync::Mutex<Option<[u8; 32]>>,
    check_key: Key<32>,
    state_key: Key<32>,
    doc_key: Key<32>,
    server_key: Key<32>,
    /// `Some(dir)` while this value serves a rotation of the master key:
    /// its sessions are not refused for the rotation in progress, and its
    /// tables' files are in `dir` (of the profile directory) rather than
    /// in [`crate::table::TABLE_DIR`].
    rotation: Option<&'static str>,
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profile")
            .field("dir", &self.dir)
            .field("id", &self.id)
            .field("kdf", &self.kdf)
            .finish_non_exhaustive()
    }
}

impl Profile {
    /// Opens the profile in `dir` with `passphrase`.
    ///
    /// A wrong passphrase gives [`ClientError::WrongPassphrase`]; nothing in
    /// the directory is written either way.
    pub fn open(dir: impl AsRef<Path>, passphrase: &str) -> Result<Profile> {
        Self::open_with_key_file(dir, passphrase, None)
    }

    /// Opens the profile in `dir` with `passphrase` and, for a profile
    /// made with one, the contents of its key file. A profile that needs a
    /// key file refuses to open without it ([`ClientError::KeyFileNeeded`]),
    /// and one without refuses a key file; a wrong passphrase or key file
    /// gives [`ClientError::WrongPassphrase`].
    pub fn open_with_key_file(
        dir: impl AsRef<Path>,
        passphrase: &str,
        key_file: Option<&[u8]>,
    ) -> Result<Profile> {
        Self::open_with_limit(dir, passphrase, key_file, KdfLimit::default())
    }

    /// As [`Profile::open_with_key_file`], accepting in a newer header
    /// seen on the server ([`NEXT_HEADER_FILE`]) Argon2id costs up to
    /// `limit` (a local setting; `profile.json` itself is this device's
    /// own and not limited).
    pub fn open_with_limit(
        dir: impl AsRef<Path>,
        passphrase: &str,
        key_file: Option<&[u8]>,
        limit: KdfLimit,
    ) -> Result<Profile> {
        let dir = dir.as_ref();
        let header_path = dir.join(HEADER_FILE);
        let bytes = match std::fs::read(&header_path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ClientError::NoProfile(dir.to_path_buf()))
            }
            Err(e) => return Err(ClientError::io("read", &header_path, &e)),
        };
        check_parts_private(dir)?;
        if let Some(profile) = Self::open_next_header(dir, &bytes, passphrase, key_file, limit)? {
            return Ok(profile);
        }
        Self::open_header(dir, &bytes, passphrase, key_file, None)
    }

    /// Whether `dir` holds a profile header.
    pub fn exists(dir: impl AsRef<Path>) -> bool {
        dir.as_ref().join(HEADER_FILE).is_file()
    }

    fn from_master(dir: &Path, header: &Header, master: Key<32>, kek: Option<Key<32>>) -> Profile {
        Profile {
            dir: dir.to_path_buf(),
            id: header.id.clone(),
            kdf: header.kdf.params(),
            header: std::sync::Mutex::new(header.clone()),
            check_key: master.derive(label::CHECK),
            state_key: master.derive(label::STATE),
            doc_key: master.derive(label::DOCUMENTS),
            server_key: master.derive(label::SERVER),
            master,
            kek: std::sync::Mutex::new(kek),
            key_file: std::sync::Mutex::new(None),
            rotation: None,
        }
    }

    /// The directory of this profile's table files
    /// ([`crate::table::TABLE_DIR`], or a rotation's own).
    pub(crate) fn table_dir(&self) -> PathBuf {
        self.dir
            .join(self.rotation.unwrap_or(crate::table::TABLE_DIR))
    }

    /// The header's format tag (`sesame-profile/3` for profiles this build
    /// creates).
    pub fn format(&self) -> String {
        self.header().format
    }

    /// The profile directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The random profile identifier (hex).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The Argon2id parameters of the profile.
    pub fn kdf(&self) -> KdfParams {
        self.kdf
    }

    /// Path of the embedded store.
    pub fn store_path(&self) -> PathBuf {
        self.dir.join(STORE_FILE)
    }

    /// Path of the state file of `index`.
    pub fn state_path(&self, index: &str) -> PathBuf {
        self.dir.join(INDEX_DIR).join(format!("{index}.state"))
    }

    /// The names of the profile's indexes, sorted.
    pub fn indexes(&self) -> Result<Vec<String>> {
        let dir = self.dir.join(INDEX_DIR);
        let entries = std::fs::read_dir(&dir).map_err(|e| ClientError::io("read", &dir, &e))?;
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| ClientError::io("read", &dir, &e))?;
            let name = entry.file_name();
            if let Some(index) = name.to_str().and_then(|n| n.strip_suffix(".state")) {
                if check_index_name(index).is_ok() {
                    out.push(index.to_owned());
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// Adds an index bound to `scheme` with `params`.
    pub fn create_index(&self, index: &str, scheme: &str, params: &Params) -> Result<()> {
        check_index_name(index)?;
        if self.state_path(index).exists() {
            return Err(ClientError::IndexExists(index.to_owned()));
        }
        let found = find_scheme(scheme)?;
        let rng = &mut OsRng;
        let client = new_client(&found, rng, params)?;
        let state = IndexState::new(found.descriptor.name, params, client.save_state()?);
        self.save_state(rng, index, &state)
    }

    /// A session on `index`: on the profile's server if it is bound to
    /// one ([`Profile::bind_server`]), else with the scheme and document
    /// servers running in this process over the profile's `store.redb`.
    ///
    /// The session holds the profile lock: a second process gets
    /// [`ClientError::ProfileBusy`]. Nothing of the profile is created or
    /// replaced: a missing or damaged `store.redb`, `server.json` or state
    /// file is an error naming it.
    pub fn session(&self, index: &str) -> Result<Session> {
        self.check_not_rotating()?;
        self.session_unchecked(index)
    }

    /// As [`Profile::session`], during a rotation of the master key too.
    fn session_unchecked(&self, index: &str) -> Result<Session> {
        check_index_name(index)?;
        if !self.state_path(index).exists() && self.store_kind()? == StoreKind::Server {
            self.fetch_shared_state(index)?;
        }
        let lock = self.lock(index)?;
        let state = self.load_state(index)?;
        let backend = self.backend()?;
        Session::new(self.session_base(index), index, state, backend, lock).map_err(|e| match e {
            // Under a newer master key, maybe: then that is what to say.
            ClientError::SharedStateCorrupt { .. } => self.header_behind(index).unwrap_or(e),
            e => e,
        })
    }

    /// `e`, or [`ClientError::PassphraseChanged`] where the server holds
    /// a newer header than this device: after another device rotated the
    /// master key, a table's records and the list of tables are sealed
    /// under a key this device does not hold yet, so a table command
    /// would otherwise say the table is unknown or its list damaged.
    pub(crate) fn explain_after_rotation(&self, e: ClientError) -> ClientError {
        match e {
            ClientError::UnknownTable(_) | ClientError::SharedStateCorrupt { .. } => {
                self.header_behind(DEFAULT_INDEX).unwrap_or(e)
            }
            e => e,
        }
    }

    /// [`ClientError::PassphraseChanged`] when the server holds a newer
    /// header than this device (kept as [`NEXT_HEADER_FILE`]).
    fn header_behind(&self, index: &str) -> Option<ClientError> {
        let local = self.shareable_header()?;
        let binding = self.server().ok()??;
        let mut backend = NetworkBackend::connect(&binding).ok()?;
        let name = [crate::session::shared::PROFILE_RECORD.to_owned()];
        let record = backend.read_records(index, &name, &[]).ok()??.pop()?;
        sync_header(&self.dir, &local, &record).err()
    }

    /// Where the profile's server halves run: its server, or its
    /// embedded store (which must exist).
    pub(crate) fn backend(&self) -> Result<Box<dyn Backend>> {
        Ok(match self.store_kind()? {
            StoreKind::Server => {
                let binding = self.server()?.ok_or_else(|| self.missing(SERVER_FILE))?;
                Box::new(NetworkBackend::connect(&binding)?)
            }
            StoreKind::Embedded => {
                if !self.store_path().is_file() {
                    return Err(self.missing(STORE_FILE));
                }
                Box::new(EmbeddedBackend::open(&self.store_path(), false)?)
            }
        })
    }

    /// Writes this device's copy of index `index`'s state from the
    /// server's shared copy, if the server has one (another device made
    /// the index, or shared it after this device joined).
    pub(crate) fn fetch_shared_state(&self, index: &str) -> Result<()> {
        let binding = self.server()?.ok_or_else(|| self.missing(SERVER_FILE))?;
        let mut backend = NetworkBackend::connect(&binding)?;
        let fetched = crate::session::shared::fetch(&mut backend, &self.state_cipher(), index)?;
        if let Some((version, (state, _))) = fetched.and_then(|f| f.opened.map(|o| (f.version, o)))
        {
            let _lock = self.lock_unchecked(index)?;
            if !self.state_path(index).exists() {
                crate::session::shared::adopt_locally(
                    &self.shared_sidecar(index),
                    version,
                    || self.save_state(&mut OsRng, index, &state),
                )?;
            }
        }
        Ok(())
    }

    /// Replaces this device's copy of index `index`'s state with the
    /// server's, if that opens under this profile's key; whether it did.
    fn take_shared_state(&self, index: &str, binding: Option<&ServerBinding>) -> Result<bool> {
        let Some(binding) = binding else {
            return Ok(false);
        };
        let mut backend = NetworkBackend::connect(binding)?;
        let fetched = match crate::session::shared::fetch(&mut backend, &self.state_cipher(), index)
        {
            Ok(f) => f,
            Err(ClientError::SharedStateCorrupt { .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        match fetched.and_then(|f| f.opened.map(|o| (f.version, o))) {
            Some((version, (state, _))) => {
                let _lock = self.lock_unchecked(index)?;
                crate::session::shared::adopt_locally(
                    &self.shared_sidecar(index),
                    version,
                    || self.save_state(&mut OsRng, index, &state),
                )?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Seals this device's own copies under `new`'s keys, after a rotation
    /// of the master key on another device: each index's state (a cache of
    /// the server's, refreshed by the next session), then the server
    /// binding. A copy already moved (an interrupted run) is left.
    fn migrate_to(&self, new: &Profile) -> Result<()> {
        let _lock = self.header_lock()?;
        for index in self.indexes()? {
            if let Ok(state) = self.load_state(&index) {
                new.save_state(&mut OsRng, &index, &state)?;
            }
        }
        let binding = self.server()?.ok_or_else(|| self.missing(SERVER_FILE))?;
        let aead = Aes256GcmSiv::new(&new.server_key);
        save_binding(&mut OsRng, &aead, &self.id, &self.server_path(), &binding)
    }

    fn missing(&self, part: &str) -> ClientError {
        ClientError::ProfileIncomplete(self.dir.join(part))
    }

    /// Where the profile's indexes live, from the header. A format-1
    /// header does not say: the kind is inferred from the files present
    /// (`server.json`, else `store.redb`, else an embedded profile to
    /// which nothing was added yet) and written into the header, once.
    fn store_kind(&self) -> Result<StoreKind> {
        match self.header().store.as_deref() {
            Some(STORE_SERVER) => return Ok(StoreKind::Server),
            Some(_) => return Ok(StoreKind::Embedded),
            None => {}
        }
        let kind = self.infer_store_kind()?;
        self.write_header(kind)?;
        Ok(kind)
    }

    /// Where a format-1 profile's indexes live, from the files present.
    fn infer_store_kind(&self) -> Result<StoreKind> {
        let kind = if self.server_path().exists() {
            StoreKind::Server
        } else if self.store_path().exists() {
            StoreKind::Embedded
        } else {
            // Neither part: fine only if no index holds anything yet.
            for index in self.indexes()? {
                let state = self.load_state(&index)?;
                if !state.catalog.is_empty()
                    || !state.pending.is_empty()
                    || !state.legacy.is_empty()
                {
                    return Err(ClientError::ProfileCorrupt {
                        path: self.dir.clone(),
                        reason: format!(
                            "both {STORE_FILE} and {SERVER_FILE} are missing, and index \
                             {index:?} holds documents (restore the one this profile used)"
                        ),
                    });
                }
            }
            drop(EmbeddedBackend::open(&self.store_path(), true)?);
            StoreKind::Embedded
        };
        Ok(kind)
    }

    /// Rewrites the header saying where the indexes live: a format-3
    /// header re-seals the master key under the same passphrase, a format-1
    /// or -2 header becomes format 2 with its key check re-sealed.
    fn write_header(&self, kind: StoreKind) -> Result<()> {
        let _lock = self.header_lock()?;
        let mut header = self.header();
        self.check_header_unchanged(&header)?;
        header.store = Some(
            match kind {
                StoreKind::Server => STORE_SERVER,
                StoreKind::Embedded => STORE_EMBEDDED,
            }
            .into(),
        );
        let kek = self
            .kek
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(Key::clone_secret);
        match kek {
            Some(kek) => {
                header.version += 1;
                header.seal_master(&kek, &self.master)?
            }
            None => {
                header.format = FORMAT_V2.into();
                let sealed = Aes256GcmSiv::new(&self.check_key)
                    .seal(&mut OsRng, &header.check_aad(), CHECK_TEXT)
                    .map_err(|_| ClientError::InvalidArgument("key check does not seal".into()))?;
                header.check = Some(hex::encode(sealed));
            }
        }
        let json = serde_json::to_vec_pretty(&header)
            .map_err(|e| ClientError::InvalidArgument(format!("profile header: {e}")))?;
        fsutil::write_atomic(&self.dir.join(HEADER_FILE), &json)?;
        *self
            .header
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = header;
        Ok(())
    }

    fn header(&self) -> Header {
        self.header
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The header lock, held while the header is rewritten or the profile
    /// is backed up.
    pub(crate) fn header_lock(&self) -> Result<ProfileLock> {
        ProfileLock::acquire(&self.dir.join(HEADER_LOCK), &self.dir)
    }

    /// The key of the names a table's indexes have where they run
    /// (`table::names`): the same on every device of the profile.
    pub(crate) fn table_names_key(&self) -> Key<32> {
        self.master.derive(label::TABLE_NAMES)
    }

    /// The key of backup manifests' authentication tags.
    pub(crate) fn backup_key(&self) -> Key<32> {
        self.master.derive(label::BACKUP)
    }

    /// The lock of `index` (see [`crate::lock`]).
    pub(crate) fn lock(&self, index: &str) -> Result<ProfileLock> {
        if !self.state_path(index).exists() {
            // The right error (unknown index, missing state) before a lock
            // file is made for an index that is not there.
            self.load_state(index)?;
        }
        self.lock_unchecked(index)
    }

    fn lock_unchecked(&self, index: &str) -> Result<ProfileLock> {
        let dir = self.dir.join(INDEX_DIR);
        ProfileLock::acquire(&dir.join(format!("{index}.lock")), &self.dir)
    }

    pub(crate) fn intent_files(&self, index: &str) -> IntentFiles {
        IntentFiles::new(
            self.dir.join(INDEX_DIR).join(format!("{index}.intents")),
            &self.state_key,
            &self.id,
            index,
        )
    }

    /// `indexes/NAME.shared`: this device's identifier and the newest
    /// version of the index's shared state it saw ([`crate::session`]).
    pub(crate) fn shared_sidecar(&self, index: &str) -> PathBuf {
        self.dir.join(INDEX_DIR).join(format!("{index}.shared"))
    }

    /// The header as another device joining the profile needs it: a
    /// format-3 header (the master key wrapped under the passphrase, and
    /// nothing secret) as written; `None` for the older formats, whose
    /// key is the passphrase's own (`sesame passwd` moves them to 3).
    pub(crate) fn shareable_header(&self) -> Option<Vec<u8>> {
        let header = self.header();
        if header.format != FORMAT {
            return None;
        }
        serde_json::to_vec_pretty(&header).ok()
    }

    pub(crate) fn state_cipher(&self) -> StateCipher {
        StateCipher::new(&self.state_key, &self.id)
    }

    /// What a session on `index` takes from the profile: its files, its
    /// keys, and the header it shares with the profile's other devices.
    pub(crate) fn session_base(&self, index: &str) -> SessionBase {
        SessionBase {
            profile_id: self.id.clone(),
            profile_dir: self.dir.clone(),
            state_path: self.state_path(index),
            sidecar: self.shared_sidecar(index),
            cipher: self.state_cipher(),
            docs: std::sync::Arc::new(Aes256GcmSiv::new(&self.doc_key)),
            intents: self.intent_files(index),
            header: self.shareable_header().map(|bytes| SharedHeader {
                bytes,
                sync: sync_header,
            }),
        }
    }

    pub(crate) fn doc_key(&self) -> &Key<32> {
        &self.doc_key
    }

    pub(crate) fn load_state(&self, index: &str) -> Result<IndexState> {
        let loaded = self.state_cipher().load(&self.state_path(index), index);
        match loaded {
            // Every profile has its default index: its state missing is
            // damage, not an unknown name.
            Err(ClientError::UnknownIndex(_)) if index == DEFAULT_INDEX => {
                Err(ClientError::ProfileIncomplete(self.state_path(index)))
            }
            other => other,
        }
    }

    pub(crate) fn save_state(
        &self,
        rng: &mut dyn CryptoRngCore,
        index: &str,
        state: &IndexState,
    ) -> Result<()> {
        self.state_cipher()
            .save(rng, &self.state_path(index), index, state)
    }
}

/// The profile prefix and the profile's index name of a tenant's index
/// name: `p1a2b3c4d-default` is index `default` of the profile with
/// prefix `p1a2b3c4d-`; a name without such a prefix is an index of a
/// profile without one.
pub(crate) fn split_remote_index(remote: &str) -> (&str, &str) {
    let b = remote.as_bytes();
    let prefixed = b.len() > 10
        && b[0] == b'p'
        && b[9] == b'-'
        && b[1..9]
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c));
    if prefixed {
        remote.split_at(10)
    } else {
        ("", remote)
    }
}

/// Refuses a profile whose directory, header, server binding, index
/// directory or index states other users can reach
/// ([`ClientError::TooOpen`]); the embedded store inside the private
/// directory is not checked on its own.
fn check_parts_private(dir: &Path) -> Result<()> {
    fsutil::check_private(dir)?;
    fsutil::check_private(&dir.join(HEADER_FILE))?;
    fsutil::check_private(&dir.join(SERVER_FILE))?;
    let indexes = dir.join(INDEX_DIR);
    fsutil::check_private(&indexes)?;
    if let Ok(entries) = std::fs::read_dir(&indexes) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "state") {
                fsutil::check_private(&path)?;
            }
        }
    }
    Ok(())
}
