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

use std::path::{Path, PathBuf};

use rand_core::{CryptoRngCore, OsRng, RngCore};
use serde::{Deserialize, Serialize};
use sesame_core::Params;
use sesame_crypto::{Aes256GcmSiv, Key};
use sesame_sse::KeywordScheme;

use crate::backend::{Backend, EmbeddedBackend};
use crate::error::{ClientError, Result};
use crate::fsutil;
use crate::intents::IntentFiles;
use crate::kdf::{KdfLimit, KdfParams, SALT_LEN};
use crate::lock::ProfileLock;
use crate::network::{load_binding, save_binding, NetworkBackend, ServerBinding, SERVER_FILE};
use crate::session::{Progress, Session};
use crate::state::{IndexState, StateCipher};

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
/// Name of the directory of index states.
pub const INDEX_DIR: &str = "indexes";
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

/// The profile header as stored in `profile.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    format: String,
    /// Random profile identifier, hex.
    id: String,
    /// Where the indexes live: `embedded` (`store.redb`) or `server`
    /// (`server.json`); absent in format 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    store: Option<String>,
    kdf: KdfHeader,
    /// Formats 1 and 2: AEAD seal of [`CHECK_TEXT`] under the key-check
    /// key, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    check: Option<String>,
    /// Format 3: AEAD seal of the master key under the key-encryption key,
    /// hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wrapped: Option<String>,
    /// Format 3: the key-encryption key needs a key file as well as the
    /// passphrase.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    key_file: bool,
    /// Format 3: the header's version, one more at every rewrite (a
    /// passphrase or key-file change): devices keep the newest and never
    /// put an older one back on the server. Bound into the seal, so a
    /// header relabelled as newer does not open. Absent: 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    version: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
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

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KdfHeader {
    algorithm: String,
    /// Memory in KiB.
    m_kib: u32,
    /// Passes.
    t: u32,
    /// Lanes.
    p: u32,
    /// Salt, hex.
    salt: String,
}

impl KdfHeader {
    fn params(&self) -> KdfParams {
        KdfParams {
            m_kib: self.m_kib,
            t: self.t,
            p: self.p,
        }
    }
}

impl Header {
    /// Associated data of the key check: binds every header field, so an
    /// altered header does not open.
    fn check_aad(&self) -> Vec<u8> {
        let mut aad = format!(
            "sesame-client/key-check/v1\0{}\0{}\0{}\0{}\0{}\0{}\0{}",
            self.format,
            self.id,
            self.kdf.algorithm,
            self.kdf.m_kib,
            self.kdf.t,
            self.kdf.p,
            self.kdf.salt
        )
        .into_bytes();
        if let Some(store) = &self.store {
            aad.extend_from_slice(format!("\0store={store}").as_bytes());
        }
        aad
    }

    /// Associated data of the wrapped master key (format 3): every header
    /// field but the seal itself.
    fn wrap_aad(&self) -> Vec<u8> {
        let mut aad = format!(
            "sesame-client/wrap/v3\0{}\0{}\0{}\0{}\0{}\0{}\0{}\0{}",
            self.format,
            self.id,
            self.store.as_deref().unwrap_or(""),
            self.kdf.algorithm,
            self.kdf.m_kib,
            self.kdf.t,
            self.kdf.p,
            self.kdf.salt
        )
        .into_bytes();
        if self.key_file {
            aad.extend_from_slice(b"\0key_file=1");
        }
        if self.version > 0 {
            aad.extend_from_slice(format!("\0version={}", self.version).as_bytes());
        }
        aad
    }

    /// A format-3 header for profile `id` at `store`, with fresh Argon2id
    /// `salt` and `kdf`: the master key sealed under the key derived from
    /// `passphrase`. Returns it and the key-encryption key.
    fn wrap(
        id: &str,
        store: &str,
        kdf: KdfParams,
        passphrase: &str,
        key_file: Option<&[u8; 32]>,
        master: &Key<32>,
        version: u64,
    ) -> Result<(Header, Key<32>)> {
        let rng = &mut OsRng;
        let mut salt = [0u8; SALT_LEN];
        rng.fill_bytes(&mut salt);
        let mut header = Header {
            format: FORMAT.into(),
            id: id.to_owned(),
            store: Some(store.to_owned()),
            kdf: KdfHeader {
                algorithm: "argon2id".into(),
                m_kib: kdf.m_kib,
                t: kdf.t,
                p: kdf.p,
                salt: hex::encode(salt),
            },
            check: None,
            wrapped: None,
            key_file: key_file.is_some(),
            version,
        };
        let kek = key_encryption_key(&kdf.derive(passphrase, &salt)?, key_file);
        header.seal_master(&kek, master)?;
        Ok((header, kek))
    }

    /// Seals `master` under `kek` with this header's fields.
    fn seal_master(&mut self, kek: &Key<32>, master: &Key<32>) -> Result<()> {
        let sealed = Aes256GcmSiv::new(kek)
            .seal(&mut OsRng, &self.wrap_aad(), master.as_bytes())
            .map_err(|_| ClientError::InvalidArgument("the master key does not seal".into()))?;
        self.wrapped = Some(hex::encode(sealed));
        Ok(())
    }
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

/// What a new profile is made with besides its passphrase, scheme and
/// cost.
#[derive(Default)]
struct Making<'a> {
    /// Bound to this server from the start.
    server: Option<&'a ServerBinding>,
    /// Format 2, as earlier builds made them (tests only).
    legacy_v2: bool,
    /// Needs a key file with this digest.
    key_file: Option<[u8; 32]>,
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
    /// Creates a profile in `dir` (made if absent) with the default
    /// Argon2id parameters, and its [`DEFAULT_INDEX`] bound to `scheme`
    /// with `params`.
    pub fn create(
        dir: impl AsRef<Path>,
        passphrase: &str,
        scheme: &str,
        params: &Params,
    ) -> Result<Profile> {
        Self::create_with_kdf(dir, passphrase, scheme, params, KdfParams::default())
    }

    /// As [`Profile::create`], with explicit Argon2id parameters (see
    /// [`crate::insecure::fast_kdf`] for tests).
    pub fn create_with_kdf(
        dir: impl AsRef<Path>,
        passphrase: &str,
        scheme: &str,
        params: &Params,
        kdf: KdfParams,
    ) -> Result<Profile> {
        Self::create_inner(
            dir.as_ref(),
            passphrase,
            scheme,
            params,
            kdf,
            Making::default(),
        )
    }

    /// As [`Profile::create_with_kdf`], the master key sealed under the
    /// passphrase *and* the key file's contents (at least
    /// [`MIN_KEY_FILE`] bytes): opening needs both
    /// ([`Profile::open_with_key_file`]).
    pub fn create_with_key_file(
        dir: impl AsRef<Path>,
        passphrase: &str,
        scheme: &str,
        params: &Params,
        kdf: KdfParams,
        key_file: &[u8],
    ) -> Result<Profile> {
        let making = Making {
            key_file: Some(key_file_digest(key_file)?),
            ..Making::default()
        };
        Self::create_inner(dir.as_ref(), passphrase, scheme, params, kdf, making)
    }

    /// As [`Profile::create_with_kdf`], bound to a server from the start
    /// (see [`Profile::bind_server`]): the binding is written before the
    /// header, so the profile never exists unbound. The server's index
    /// must be created separately ([`NetworkBackend::create_index`]).
    pub fn create_with_server(
        dir: impl AsRef<Path>,
        passphrase: &str,
        scheme: &str,
        params: &Params,
        kdf: KdfParams,
        server: &ServerBinding,
    ) -> Result<Profile> {
        let making = Making {
            server: Some(server),
            ..Making::default()
        };
        Self::create_inner(dir.as_ref(), passphrase, scheme, params, kdf, making)
    }

    /// As [`Profile::create_with_server`], needing a key file as well as
    /// the passphrase (see [`Profile::create_with_key_file`]).
    pub fn create_with_server_and_key_file(
        dir: impl AsRef<Path>,
        passphrase: &str,
        scheme: &str,
        params: &Params,
        kdf: KdfParams,
        server: &ServerBinding,
        key_file: &[u8],
    ) -> Result<Profile> {
        let making = Making {
            server: Some(server),
            key_file: Some(key_file_digest(key_file)?),
            ..Making::default()
        };
        Self::create_inner(dir.as_ref(), passphrase, scheme, params, kdf, making)
    }

    /// A format-2 profile, as earlier builds made them (for the tests of
    /// reading and moving them to format 3).
    #[doc(hidden)]
    pub fn create_format2_for_tests(
        dir: impl AsRef<Path>,
        passphrase: &str,
        scheme: &str,
        params: &Params,
        kdf: KdfParams,
    ) -> Result<Profile> {
        let making = Making {
            legacy_v2: true,
            ..Making::default()
        };
        Self::create_inner(dir.as_ref(), passphrase, scheme, params, kdf, making)
    }

    /// A format-2 header: the master key is the Argon2id output, checked
    /// by a sealed constant.
    fn legacy_header(
        id: String,
        store: &str,
        kdf: KdfParams,
        passphrase: &str,
    ) -> Result<(Header, Key<32>, Option<Key<32>>)> {
        let rng = &mut OsRng;
        let mut salt = [0u8; SALT_LEN];
        rng.fill_bytes(&mut salt);
        let master = kdf.derive(passphrase, &salt)?;
        let mut header = Header {
            format: FORMAT_V2.into(),
            id,
            store: Some(store.into()),
            kdf: KdfHeader {
                algorithm: "argon2id".into(),
                m_kib: kdf.m_kib,
                t: kdf.t,
                p: kdf.p,
                salt: hex::encode(salt),
            },
            check: None,
            wrapped: None,
            key_file: false,
            version: 0,
        };
        let check_key: Key<32> = master.derive(label::CHECK);
        let sealed = Aes256GcmSiv::new(&check_key)
            .seal(rng, &header.check_aad(), CHECK_TEXT)
            .map_err(|_| ClientError::InvalidArgument("key check does not seal".into()))?;
        header.check = Some(hex::encode(sealed));
        Ok((header, master, None))
    }

    fn create_inner(
        dir: &Path,
        passphrase: &str,
        scheme: &str,
        params: &Params,
        kdf: KdfParams,
        making: Making<'_>,
    ) -> Result<Profile> {
        let Making {
            server,
            legacy_v2,
            key_file,
        } = making;
        let key_file = key_file.as_ref();
        let header_path = dir.join(HEADER_FILE);
        if header_path.exists() {
            return Err(ClientError::ProfileExists(dir.to_path_buf()));
        }
        if passphrase.is_empty() {
            return Err(ClientError::InvalidArgument(
                "the passphrase is empty".into(),
            ));
        }
        kdf.validate()?;
        let found = find_scheme(scheme)?;
        let rng = &mut OsRng;
        // Check the parameters before anything is written.
        let client = new_client(&found, rng, params)?;

        let mut id = [0u8; 16];
        rng.fill_bytes(&mut id);
        let store = if server.is_some() {
            STORE_SERVER
        } else {
            STORE_EMBEDDED
        };
        let (header, master, kek) = if legacy_v2 {
            Self::legacy_header(hex::encode(id), store, kdf, passphrase)?
        } else {
            let master = Key::<32>::generate(rng);
            let (header, kek) = Header::wrap(
                &hex::encode(id),
                store,
                kdf,
                passphrase,
                key_file,
                &master,
                0,
            )?;
            (header, master, Some(kek))
        };

        fsutil::create_private_dir(&dir.join(INDEX_DIR))?;
        // The profile directory may have existed (made by the user with
        // the default umask): it becomes private, as its parts are.
        fsutil::make_private_dir(dir)?;
        let profile = Profile::from_master(dir, &header, master, kek);
        *profile
            .key_file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = key_file.copied();
        let state = IndexState::new(found.descriptor.name, params, client.save_state()?);
        profile.save_state(rng, DEFAULT_INDEX, &state)?;
        match server {
            Some(server) => profile.bind_server(server)?,
            // The store exists from the start: a missing one is damage.
            None => drop(EmbeddedBackend::open(&profile.store_path(), true)?),
        }
        let json = serde_json::to_vec_pretty(&header)
            .map_err(|e| ClientError::InvalidArgument(format!("profile header: {e}")))?;
        // The header goes last: its presence is what makes a profile.
        fsutil::write_atomic(&header_path, &json)?;
        Ok(profile)
    }

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

    /// Opens the profile with [`NEXT_HEADER_FILE`], a newer header than
    /// `local` (`profile.json`'s bytes) that this device saw on the server
    /// or was writing there, if there is one and `passphrase` opens it;
    /// it becomes `profile.json` then. `Ok(None)`: there is none, or the
    /// passphrase does not open it (the old one may still open
    /// `profile.json`; a session then says the passphrase changed).
    fn open_next_header(
        dir: &Path,
        local: &[u8],
        passphrase: &str,
        key_file: Option<&[u8]>,
        limit: KdfLimit,
    ) -> Result<Option<Profile>> {
        let path = dir.join(NEXT_HEADER_FILE);
        let Ok(bytes) = std::fs::read(&path) else {
            return Ok(None);
        };
        let (Ok(ours), Ok(next)) = (
            serde_json::from_slice::<Header>(local),
            serde_json::from_slice::<Header>(&bytes),
        ) else {
            return Ok(None);
        };
        if next.id != ours.id || next.format != FORMAT || !is_ahead(&next, &ours) {
            // Taken already, or not this profile's: nothing to try.
            let _ = std::fs::remove_file(&path);
            return Ok(None);
        }
        fsutil::check_private(&path)?;
        limit.check(&next.kdf.params())?;
        let profile = match Self::open_header(dir, &bytes, passphrase, key_file, None) {
            Ok(p) => p,
            Err(e @ ClientError::KeyFileNeeded(_)) => return Err(e),
            Err(_) => return Ok(None),
        };
        if dir.join(SERVER_FILE).exists() && profile.server().is_err() {
            // The master key was rotated on another device: this device's
            // copies move to it, opened with the header they were made
            // under (the same passphrase, if it did not change too).
            match Self::open_header(dir, local, passphrase, key_file, None) {
                Ok(old) => old.migrate_to(&profile)?,
                Err(_) => {
                    return Err(ClientError::InvalidArgument(format!(
                        "the master key of the profile in {} was changed on another device \
                         (`sesame rekey --master`) and so was its passphrase: run this command \
                         once with the passphrase this device had, or join the profile again \
                         (`sesame init --join`) in a new directory",
                        dir.display()
                    )))
                }
            }
        }
        fsutil::write_atomic(&dir.join(HEADER_FILE), &bytes)?;
        let _ = std::fs::remove_file(&path);
        Ok(Some(profile))
    }

    /// Opens the profile whose header is `bytes` (for the directory
    /// `dir`), as [`Profile::open_with_key_file`] does once it has read it.
    fn open_header(
        dir: &Path,
        bytes: &[u8],
        passphrase: &str,
        key_file: Option<&[u8]>,
        limit: Option<&KdfLimit>,
    ) -> Result<Profile> {
        let header_path = dir.join(HEADER_FILE);
        let damaged = |reason: String| ClientError::ProfileCorrupt {
            path: header_path.clone(),
            reason,
        };
        let header: Header = serde_json::from_slice(bytes).map_err(|e| damaged(e.to_string()))?;
        match (header.format.as_str(), header.store.as_deref()) {
            (FORMAT | FORMAT_V2, Some(STORE_EMBEDDED | STORE_SERVER)) | (FORMAT_V1, None) => {}
            (FORMAT | FORMAT_V2, other) => {
                return Err(damaged(format!(
                    "\"store\" is {other:?}, expected \"{STORE_EMBEDDED}\" or \"{STORE_SERVER}\""
                )))
            }
            (other, _) => {
                return Err(damaged(format!(
                    "format {other:?}, this build reads {FORMAT:?}, {FORMAT_V2:?} and {FORMAT_V1:?}"
                )))
            }
        }
        let v3 = header.format == FORMAT;
        match (v3, &header.check, &header.wrapped) {
            (true, None, Some(_)) | (false, Some(_), None) => {}
            (true, _, _) => {
                return Err(damaged(
                    "a format-3 header holds \"wrapped\" and no \"check\"".into(),
                ))
            }
            (false, _, _) => {
                return Err(damaged(format!(
                    "a {:?} header holds \"check\" and no \"wrapped\"",
                    header.format
                )))
            }
        }
        if header.kdf.algorithm != "argon2id" {
            return Err(damaged(format!(
                "key derivation {:?}, expected \"argon2id\"",
                header.kdf.algorithm
            )));
        }
        let salt = hex::decode(&header.kdf.salt)
            .ok()
            .filter(|s| s.len() == SALT_LEN)
            .ok_or_else(|| damaged("the salt is not 16 bytes of hex".into()))?;
        let sealed = hex::decode(
            header
                .check
                .as_deref()
                .or(header.wrapped.as_deref())
                .unwrap_or(""),
        )
        .map_err(|_| damaged("the key check or wrapped key is not hex".into()))?;
        if hex::decode(&header.id).map(|i| i.len()) != Ok(16) {
            return Err(damaged("the profile id is not 16 bytes of hex".into()));
        }
        header
            .kdf
            .params()
            .validate()
            .map_err(|e| damaged(e.to_string()))?;
        if let Some(limit) = limit {
            limit.check(&header.kdf.params())?;
        }

        let digest = match (header.key_file, key_file) {
            (true, None) => return Err(ClientError::KeyFileNeeded(dir.to_path_buf())),
            (false, Some(_)) => {
                return Err(ClientError::InvalidArgument(format!(
                    "the profile in {} does not use a key file: open it without one",
                    dir.display()
                )))
            }
            (true, Some(bytes)) => Some(key_file_digest(bytes)?),
            (false, None) => None,
        };
        let derived = header.kdf.params().derive(passphrase, &salt)?;
        if v3 {
            let kek = key_encryption_key(&derived, digest.as_ref());
            let master = match Aes256GcmSiv::new(&kek).open(&header.wrap_aad(), &sealed) {
                Ok(bytes) => Key::<32>::from_slice(&bytes)
                    .map_err(|_| damaged("the wrapped key is not 32 bytes".into()))?,
                Err(_) => return Err(ClientError::WrongPassphrase),
            };
            let profile = Profile::from_master(dir, &header, master, Some(kek));
            *profile
                .key_file
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = digest;
            return Ok(profile);
        }
        let check_key: Key<32> = derived.derive(label::CHECK);
        match Aes256GcmSiv::new(&check_key).open(&header.check_aad(), &sealed) {
            Ok(text) if text == CHECK_TEXT => Ok(Profile::from_master(dir, &header, derived, None)),
            _ => Err(ClientError::WrongPassphrase),
        }
    }

    /// Joins, as another device, the server profile that index
    /// `remote_index` of the tenant belongs to (the name the server knows
    /// it by: the profile's prefix, then its name, as `sesame status`
    /// shows it), in the new directory `dir`. The profile's header (its
    /// master key wrapped under the passphrase, and nothing secret) and
    /// the index's client state are kept on the server by the devices
    /// that use it ([`crate::session`]); `passphrase` (and `key_file`,
    /// for a profile made with one) must open the header. The new device
    /// writes its own copy of the header, the binding (with the tenant's
    /// token in `binding`, whose prefix is ignored: it is the index's),
    /// and the state of the index and of the profile's default index.
    /// Returns the profile and the index's name in it.
    ///
    /// Nothing is written before the passphrase has opened the header; a
    /// failure afterwards leaves a directory without `profile.json`, so
    /// not a profile.
    pub fn join(
        dir: impl AsRef<Path>,
        passphrase: &str,
        key_file: Option<&[u8]>,
        binding: &ServerBinding,
        remote_index: &str,
    ) -> Result<(Profile, String)> {
        Self::join_with_limit(
            dir,
            passphrase,
            key_file,
            binding,
            remote_index,
            KdfLimit::default(),
        )
    }

    /// As [`Profile::join`], accepting in the server's header Argon2id
    /// costs up to `limit` (beyond, nothing is derived and nothing
    /// written).
    pub fn join_with_limit(
        dir: impl AsRef<Path>,
        passphrase: &str,
        key_file: Option<&[u8]>,
        binding: &ServerBinding,
        remote_index: &str,
        limit: KdfLimit,
    ) -> Result<(Profile, String)> {
        let dir = dir.as_ref();
        if dir.join(HEADER_FILE).exists() {
            return Err(ClientError::ProfileExists(dir.to_path_buf()));
        }
        check_index_name(remote_index)?;
        let (prefix, index) = split_remote_index(remote_index);
        check_index_name(index)?;
        let mut binding = binding.clone();
        binding.index_prefix = prefix.to_owned();
        let mut backend = NetworkBackend::connect(&binding)?;
        if !backend.indexes()?.iter().any(|i| i == index) {
            return Err(ClientError::InvalidArgument(format!(
                "the server has no index {remote_index:?} for this token"
            )));
        }
        let records = backend
            .read_records(
                index,
                &[crate::session::shared::PROFILE_RECORD.to_owned()],
                &[],
            )?
            .ok_or_else(|| {
                ClientError::InvalidArgument(
                    "this server keeps no shared client state (it is older than this client): \
                     a second device cannot join"
                        .into(),
                )
            })?;
        let header = records
            .into_iter()
            .next()
            .filter(|r| r.version > 0)
            .ok_or_else(|| {
                ClientError::InvalidArgument(format!(
                    "index {remote_index:?} holds no profile to join: run a command on it from \
                     the first device with this version of Sesame (a profile of header format \
                     1 or 2 must run `sesame passwd` first)"
                ))
            })?
            .value;
        let profile = Self::open_header(dir, &header, passphrase, key_file, Some(&limit))?;
        if profile.format() != FORMAT {
            return Err(ClientError::ProfileCorrupt {
                path: dir.join(HEADER_FILE),
                reason: "the server's header is not format 3".into(),
            });
        }
        *profile
            .key_file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            key_file.map(key_file_digest).transpose()?;
        fsutil::create_private_dir(&dir.join(INDEX_DIR))?;
        fsutil::make_private_dir(dir)?;
        profile.bind_server(&binding)?;
        let cipher = profile.state_cipher();
        let mut names = vec![index];
        if index != DEFAULT_INDEX {
            names.push(DEFAULT_INDEX);
        }
        for name in names {
            let fetched = crate::session::shared::fetch(&mut backend, &cipher, name)?;
            match fetched.and_then(|f| f.opened.map(|o| (f.version, o))) {
                Some((version, (state, _))) => {
                    crate::session::shared::adopt_locally(
                        &profile.shared_sidecar(name),
                        version,
                        || profile.save_state(&mut OsRng, name, &state),
                    )?;
                }
                None if name == index => {
                    return Err(ClientError::InvalidArgument(format!(
                        "index {remote_index:?} has no shared client state on the server: run a \
                         command on it from the first device"
                    )))
                }
                // The default index's state comes when its first device
                // shares it (Profile::session fetches it then).
                None => {}
            }
        }
        fsutil::write_atomic(&dir.join(HEADER_FILE), &header)?;
        Ok((profile, index.to_owned()))
    }

    /// Changes the passphrase: the master key is sealed anew under a key
    /// derived from `new` with a fresh salt and `kdf`, and the header is
    /// replaced in one atomic write (a crash leaves the old or the new
    /// passphrase working). Nothing else in the profile changes: the keys
    /// stay, so do the states and documents. A format-1 or -2 profile
    /// becomes format 3. A concurrent change of the header is refused.
    pub fn change_passphrase(&self, new: &str, kdf: KdfParams) -> Result<()> {
        let key_file = *self
            .key_file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.change_credentials(new, kdf, key_file)
    }

    /// As [`Profile::change_passphrase`], and the key file: `Some(bytes)`
    /// makes the profile need that key file from now on, `None` makes it
    /// need the passphrase alone.
    pub fn change_key_file(
        &self,
        new: &str,
        kdf: KdfParams,
        key_file: Option<&[u8]>,
    ) -> Result<()> {
        let digest = key_file.map(key_file_digest).transpose()?;
        self.change_credentials(new, kdf, digest)
    }

    fn change_credentials(
        &self,
        new: &str,
        kdf: KdfParams,
        key_file: Option<[u8; 32]>,
    ) -> Result<()> {
        if new.is_empty() {
            return Err(ClientError::InvalidArgument(
                "the new passphrase is empty".into(),
            ));
        }
        kdf.validate()?;
        let _lock = self.header_lock()?;
        let current = self.header();
        self.check_header_unchanged(&current)?;
        let store = match current.store.as_deref() {
            Some(s) => s.to_owned(),
            // Format 1: settle where the indexes live first.
            None => match self.infer_store_kind()? {
                StoreKind::Server => STORE_SERVER.to_owned(),
                StoreKind::Embedded => STORE_EMBEDDED.to_owned(),
            },
        };
        let (header, kek) = Header::wrap(
            &self.id,
            &store,
            kdf,
            new,
            key_file.as_ref(),
            &self.master,
            current.version + 1,
        )?;
        self.install_header(&current, &header, None)?;
        *self
            .header
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = header;
        *self
            .kek
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(kek);
        *self
            .key_file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = key_file;
        Ok(())
    }

    /// Replaces the header `current` with `new` (its version one more).
    /// An embedded profile's is one atomic write of `profile.json`. A
    /// server profile's goes first to `profile.next.json`, then to the
    /// server beside each of the profile's indexes (the default index
    /// first: of two devices changing it at once, the one whose write
    /// there comes second stops before anything else is written), then
    /// becomes `profile.json`: after a crash, the new passphrase opens the
    /// profile (its next open takes `profile.next.json`), and until the
    /// server has the new header the old one still does.
    /// `binding`: the server's, when the caller has it already (opened
    /// under another key than this profile's).
    fn install_header(
        &self,
        current: &Header,
        new: &Header,
        binding: Option<ServerBinding>,
    ) -> Result<()> {
        let json = serde_json::to_vec_pretty(new)
            .map_err(|e| ClientError::InvalidArgument(format!("profile header: {e}")))?;
        let binding = match (binding, new.store.as_deref()) {
            (Some(b), _) => Some(b),
            (None, Some(STORE_SERVER)) if new.format == FORMAT => self.server()?,
            _ => None,
        };
        let Some(binding) = binding else {
            return fsutil::write_atomic(&self.dir.join(HEADER_FILE), &json);
        };
        let next = self.dir.join(NEXT_HEADER_FILE);
        fsutil::write_atomic(&next, &json)?;
        let pushed = self.push_header(&binding, current, &json);
        // Refused for certain (another device's header is ahead, or
        // changed meanwhile): ours goes, if it is still ours. Any other
        // failure may have reached the server: ours stays, and the next
        // open with the new passphrase completes the change.
        if matches!(pushed, Ok(Some(_)) | Err(ClientError::InvalidArgument(_)))
            && std::fs::read(&next).is_ok_and(|b| b == json)
        {
            let _ = std::fs::remove_file(&next);
        }
        match pushed? {
            None => {}
            Some((theirs, bytes)) => {
                // Another device changed it first: its header is the one
                // the next open tries.
                fsutil::write_atomic(&next, &bytes)?;
                return Err(ClientError::PassphraseChanged {
                    dir: self.dir.clone(),
                    local: current.version,
                    server: theirs.version,
                });
            }
        }
        fsutil::write_atomic(&self.dir.join(HEADER_FILE), &json)?;
        let _ = std::fs::remove_file(&next);
        Ok(())
    }

    /// Writes header `json` (replacing `current`) beside each of the
    /// profile's indexes on the server, compare-and-swap; stops at a newer
    /// header than `current` there, and returns it.
    fn push_header(
        &self,
        binding: &ServerBinding,
        current: &Header,
        json: &[u8],
    ) -> Result<Option<(Header, Vec<u8>)>> {
        let mut backend = NetworkBackend::connect(binding)?;
        let mut indexes = backend.indexes()?;
        indexes.sort_by_key(|i| i != DEFAULT_INDEX);
        let name = [crate::session::shared::PROFILE_RECORD.to_owned()];
        for (n, index) in indexes.iter().enumerate() {
            let Some(records) = backend.read_records(index, &name, &[])? else {
                // A server that keeps no records: nothing shared there.
                return Ok(None);
            };
            let Some(record) = records.into_iter().next() else {
                continue;
            };
            if record.value == json {
                continue; // put there by an interrupted run
            }
            if record.version > 0 {
                if let Ok(theirs) = serde_json::from_slice::<Header>(&record.value) {
                    if theirs.id == current.id && is_ahead(&theirs, current) {
                        return Ok(Some((theirs, record.value)));
                    }
                }
            }
            let write = crate::backend::IndexRecordWrite {
                name: name[0].clone(),
                expected: record.version,
                value: Some(json.to_vec()),
            };
            let conflict = backend.write_records(index, vec![write])?;
            // A retried write whose first try was applied finds ours.
            let ours =
                |c: &Vec<crate::backend::IndexRecord>| c.first().is_some_and(|r| r.value == json);
            if conflict.as_ref().is_some_and(|c| !ours(c)) && n == 0 {
                return Err(ClientError::InvalidArgument(
                    "the profile header on the server changed while it was being replaced \
                     (another device changed the passphrase at the same time): nothing was \
                     changed; run the command again"
                        .into(),
                ));
            }
            // A later index written meanwhile: by a device that holds a
            // header at least as new; its sessions settle it.
        }
        Ok(None)
    }

    /// Moves the profile to a new, random master key: every index's
    /// documents are re-sealed under the new document key and its state
    /// under the new state key (locally and, on a server, as the next
    /// version of the shared state), the server binding under the new
    /// server key, and last the header wraps the new key (under the same
    /// passphrase and key file; its version one more, and on a server put
    /// there at once, as [`Profile::change_passphrase`] does). An old
    /// header, with the passphrase it was made for, then opens nothing the
    /// profile holds now.
    ///
    /// Safe to interrupt and run again: the new key is noted first (in
    /// [`ROTATION_FILE`], sealed under the current key), a rerun goes on
    /// with it, and until it completes every other session of the profile
    /// is refused ("run `sesame rekey --master` again"). Interrupted
    /// operations are completed first. Tables are moved before the
    /// indexes: each made again under the new key, its records inserted,
    /// then the old one removed (`table::rotate`); tables under the names
    /// of earlier builds (`t-<table>`) are refused. The `Profile` must be
    /// opened again afterwards.
    pub fn rotate_master(&self, progress: &mut dyn FnMut(Progress)) -> Result<MasterRotation> {
        let kek = self
            .kek
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(Key::clone_secret)
            .ok_or_else(|| {
                ClientError::InvalidArgument(
                    "this profile's master key is its passphrase's own (header format 1 or \
                     2): run `sesame passwd` first, which gives it a master key of its own"
                        .into(),
                )
            })?;
        let _lock = self.header_lock()?;
        let current = self.header();
        self.check_header_unchanged(&current)?;
        let mut report = MasterRotation {
            header_version: current.version,
            ..MasterRotation::default()
        };
        let Some((master, header, resumed)) = self.rotation_key(&current, &kek)? else {
            // A rotation whose header was already switched: done.
            crate::table::rotate::forget(&self.dir)?;
            report.resumed = true;
            return Ok(report);
        };
        report.resumed = resumed;
        let mut new = Profile::from_master(&self.dir, &current, master.clone_secret(), None);
        let mut indexes = self.indexes()?;
        // Under the new key already when an interrupted run got that far.
        let (server, sealed_new) = match self.server() {
            Ok(binding) => (binding, false),
            Err(e) => match new.server() {
                Ok(binding) => (binding, true),
                Err(_) => return Err(e),
            },
        };
        if let Some(binding) = &server {
            for index in NetworkBackend::connect(binding)?.indexes()? {
                if !indexes.contains(&index) && check_index_name(&index).is_ok() {
                    indexes.push(index);
                }
            }
        }
        if indexes.iter().any(|i| i.starts_with("t-")) {
            if !resumed {
                let _ = std::fs::remove_file(self.dir.join(ROTATION_FILE));
            }
            return Err(ClientError::InvalidArgument(
                "this profile has tables made by an earlier build under names that are not \
                 keyed (t-<table>), which a rotation of the master key does not move: export, \
                 drop and create them again first; nothing was changed"
                    .into(),
            ));
        }
        // The tables first (each made again under the new key, its
        // records inserted, then the old one removed), then the document
        // indexes; the tables' indexes are the tables' part.
        let mut old = Profile::from_master(&self.dir, &current, self.master.clone_secret(), None);
        old.rotation = Some(crate::table::TABLE_DIR);
        new.rotation = Some(crate::table::rotate::NEXT_DIR);
        let moved = crate::table::rotate::move_tables(&old, &new, current.version, progress)?;
        drop(old);
        new.rotation = None;
        report.tables = moved.tables;
        report.records = moved.records;
        indexes.retain(|i| !moved.indexes.contains(i) && !crate::table::rotate::is_table_index(i));
        for index in &indexes {
            if self.state_path(index).exists() && new.load_state(index).is_ok() {
                continue; // switched by an interrupted run
            }
            let mut session = match self.session_unchecked(index) {
                // The server's copy switched already (its answer was
                // lost): this device's copy follows it.
                Err(ClientError::SharedStateCorrupt { .. })
                    if new.take_shared_state(index, server.as_ref())? =>
                {
                    continue
                }
                other => other?,
            };
            report.documents += session.reseal(
                new.state_cipher(),
                std::sync::Arc::new(Aes256GcmSiv::new(new.doc_key())),
                new.intent_files(index),
                progress,
            )?;
            report.indexes += 1;
        }
        if let (Some(binding), false) = (&server, sealed_new) {
            let aead = Aes256GcmSiv::new(&new.server_key);
            save_binding(&mut OsRng, &aead, &self.id, &self.server_path(), binding)?;
        }
        self.install_header(&current, &header, server)?;
        report.header_version = header.version;
        crate::table::rotate::forget(&self.dir)?;
        let _ = std::fs::remove_file(self.dir.join(ROTATION_FILE));
        fsutil::sync_dir(&self.dir)?;
        Ok(report)
    }

    /// The new master key of the rotation in progress and the header that
    /// will wrap it (under `kek`), or new ones noted now (and whether it
    /// was in progress); `None` when the noted rotation is complete (the
    /// header moved past it).
    fn rotation_key(
        &self,
        current: &Header,
        kek: &Key<32>,
    ) -> Result<Option<(Key<32>, Header, bool)>> {
        let path = self.dir.join(ROTATION_FILE);
        let aead = Aes256GcmSiv::new(&self.state_key);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let damaged = |reason: &str| ClientError::ProfileCorrupt {
                    path: path.clone(),
                    reason: reason.into(),
                };
                let note: RotationNote = serde_json::from_slice(&bytes)
                    .map_err(|_| damaged("not a note of a master-key rotation"))?;
                if note.from_version < current.version {
                    std::fs::remove_file(&path)
                        .map_err(|e| ClientError::io("remove", &path, &e))?;
                    return Ok(None);
                }
                let sealed = hex::decode(&note.sealed).map_err(|_| damaged("not hex"))?;
                let key = aead
                    .open(&rotation_aad(&self.id, note.from_version), &sealed)
                    .ok()
                    .and_then(|k| Key::<32>::from_slice(&k).ok())
                    .ok_or_else(|| damaged("the new master key does not open"))?;
                Ok(Some((key, note.header, true)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = Key::<32>::generate(&mut OsRng);
                let sealed = aead
                    .seal(
                        &mut OsRng,
                        &rotation_aad(&self.id, current.version),
                        key.as_bytes(),
                    )
                    .map_err(|_| {
                        ClientError::InvalidArgument("the new key does not seal".into())
                    })?;
                let mut header = current.clone();
                header.version += 1;
                header.seal_master(kek, &key)?;
                let note = RotationNote {
                    from_version: current.version,
                    sealed: hex::encode(sealed),
                    header: header.clone(),
                };
                let json = serde_json::to_vec_pretty(&note)
                    .map_err(|e| ClientError::InvalidArgument(format!("rotation note: {e}")))?;
                fsutil::write_atomic(&path, &json)?;
                Ok(Some((key, header, false)))
            }
            Err(e) => Err(ClientError::io("read", &path, &e)),
        }
    }

    /// Refuses a session while a rotation of the master key is half done.
    pub(crate) fn check_not_rotating(&self) -> Result<()> {
        if self.rotation.is_none() && self.dir.join(ROTATION_FILE).exists() {
            return Err(ClientError::InvalidArgument(format!(
                "a rotation of the master key of the profile in {} was interrupted: run `sesame \
                 rekey --master` again to complete it",
                self.dir.display()
            )));
        }
        Ok(())
    }

    /// Refuses to rewrite a header that changed on disk since this profile
    /// read it (another process changed the passphrase, say).
    fn check_header_unchanged(&self, current: &Header) -> Result<()> {
        let path = self.dir.join(HEADER_FILE);
        let bytes = std::fs::read(&path).map_err(|e| ClientError::io("read", &path, &e))?;
        let on_disk: Option<Header> = serde_json::from_slice(&bytes).ok();
        let same = on_disk.is_some_and(|h| {
            h.format == current.format
                && h.version == current.version
                && h.kdf.salt == current.kdf.salt
                && h.check == current.check
                && h.wrapped == current.wrapped
        });
        if same {
            Ok(())
        } else {
            Err(ClientError::InvalidArgument(format!(
                "{} changed since the profile was opened (another process changed it): \
                 run the command again",
                path.display()
            )))
        }
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
        Session::new(self, index, state, backend, lock).map_err(|e| match e {
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

    /// Path of the server binding.
    pub fn server_path(&self) -> PathBuf {
        self.dir.join(SERVER_FILE)
    }

    /// Binds the profile to a server: from now on its sessions reach their
    /// indexes there. The token is stored sealed under a key derived from
    /// the passphrase.
    pub fn bind_server(&self, binding: &ServerBinding) -> Result<()> {
        let aead = Aes256GcmSiv::new(&self.server_key);
        save_binding(&mut OsRng, &aead, &self.id, &self.server_path(), binding)?;
        // An existing profile's header now says so (at creation the header
        // is written afterwards, already saying so).
        if self.dir.join(HEADER_FILE).exists()
            && self.header().store.as_deref() != Some(STORE_SERVER)
        {
            self.write_header(StoreKind::Server)?;
        }
        Ok(())
    }

    /// The server the profile is bound to, if any.
    pub fn server(&self) -> Result<Option<ServerBinding>> {
        let aead = Aes256GcmSiv::new(&self.server_key);
        load_binding(&aead, &self.id, &self.server_path())
    }

    /// A session on `index` whose server halves are reached through
    /// `backend` (another store, or a remote server).
    pub fn session_with(&self, index: &str, backend: Box<dyn Backend>) -> Result<Session> {
        self.check_not_rotating()?;
        check_index_name(index)?;
        let lock = self.lock(index)?;
        let state = self.load_state(index)?;
        Session::new(self, index, state, backend, lock)
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

/// Name of the note of a master-key rotation in progress
/// ([`Profile::rotate_master`]): the new master key sealed under the
/// current one's state key, and the header version it started from.
pub(crate) const ROTATION_FILE: &str = "profile.rotating.json";

/// The note of a rotation in progress, as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RotationNote {
    /// The header version the rotation started from.
    from_version: u64,
    /// The new master key, AES-256-GCM-SIV under the current state key,
    /// hex.
    sealed: String,
    /// The header that will wrap it (nothing secret), made once so that
    /// a rerun puts the very same header on the server.
    header: Header,
}

fn rotation_aad(id: &str, from_version: u64) -> Vec<u8> {
    format!("sesame-client/master-rotation/v1\0{id}\0{from_version}").into_bytes()
}

/// What [`Profile::rotate_master`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MasterRotation {
    /// Indexes switched to the new master key by this run.
    pub indexes: usize,
    /// Documents re-sealed by this run.
    pub documents: usize,
    /// Tables moved to the new master key by this run.
    pub tables: usize,
    /// Table records moved by this run.
    pub records: usize,
    /// Whether it completed an interrupted rotation.
    pub resumed: bool,
    /// The header version now in force.
    pub header_version: u64,
}

/// Whether header `theirs` (of the same profile) is ahead of `ours`: a
/// newer version, or the same version sealed differently (two devices
/// changed it at once and `theirs` reached the server first).
fn is_ahead(theirs: &Header, ours: &Header) -> bool {
    theirs.version > ours.version
        || (theirs.version == ours.version
            && (theirs.wrapped != ours.wrapped || theirs.kdf.salt != ours.kdf.salt))
}

/// What a session does with the server's copy of the profile header (the
/// `record` beside its index), this device's being `local`:
/// `Ok(Some(write))` puts this device's there (the server has none, or an
/// older one: a device that changed the passphrase before it could tell
/// the server, or a server that rolled it back), `Ok(None)` leaves it.
/// When the server's is ahead (another device changed the passphrase),
/// nothing is uploaded: it is kept as [`NEXT_HEADER_FILE`] in `dir` for
/// the next open, and the answer is [`ClientError::PassphraseChanged`].
/// Only a header that opens with the passphrase ever replaces
/// `profile.json`, so a forged or relabelled one costs the device its
/// service, never its keys.
pub(crate) fn sync_header(
    dir: &Path,
    local: &[u8],
    record: &crate::backend::IndexRecord,
) -> Result<Option<crate::backend::IndexRecordWrite>> {
    let upload = || {
        Some(crate::backend::IndexRecordWrite {
            name: crate::session::shared::PROFILE_RECORD.into(),
            expected: record.version,
            value: Some(local.to_vec()),
        })
    };
    if record.version == 0 {
        return Ok(upload());
    }
    if record.value == local {
        return Ok(None);
    }
    let Ok(ours) = serde_json::from_slice::<Header>(local) else {
        return Ok(None);
    };
    let theirs = match serde_json::from_slice::<Header>(&record.value) {
        Ok(h) if h.id == ours.id && h.format == FORMAT => h,
        // Not this profile's header: put this device's back.
        _ => return Ok(upload()),
    };
    if !is_ahead(&theirs, &ours) {
        return Ok(upload());
    }
    let next = dir.join(NEXT_HEADER_FILE);
    let known = std::fs::read(&next)
        .ok()
        .and_then(|b| serde_json::from_slice::<Header>(&b).ok());
    if !known.is_some_and(|k| k.id == ours.id && k.version > theirs.version) {
        fsutil::write_atomic(&next, &record.value)?;
    }
    Err(ClientError::PassphraseChanged {
        dir: dir.to_path_buf(),
        local: ours.version,
        server: theirs.version,
    })
}

/// Parses a header as `Profile::open` does (for the fuzz targets).
pub(crate) fn parse_header(bytes: &[u8]) {
    if let Ok(header) = serde_json::from_slice::<Header>(bytes) {
        let _ = hex::decode(&header.kdf.salt);
        let _ = header.check.as_deref().map(hex::decode);
        let _ = header.wrapped.as_deref().map(hex::decode);
        let _ = header.kdf.params().validate();
        let _ = header.check_aad();
        let _ = header.wrap_aad();
    }
}

/// Index names are 1 to 64 characters of `a-z`, `0-9`, `-` and `_`: they
/// name a file and a store key prefix.
pub(crate) fn check_index_name(index: &str) -> Result<()> {
    let ok = !index.is_empty()
        && index.len() <= 64
        && index
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ClientError::InvalidArgument(format!(
            "index name {index:?} must be 1 to 64 characters of a-z, 0-9, - and _"
        )))
    }
}

/// Checks that `scheme` names a registered keyword scheme and that it
/// accepts `params`, without writing anything: lets a caller refuse a bad
/// name before it asks for a passphrase.
pub fn check_scheme(scheme: &str, params: &Params) -> Result<()> {
    let found = find_scheme(scheme)?;
    new_client(&found, &mut OsRng, params).map(drop)
}

/// The registered keyword scheme called `name`.
pub(crate) fn find_scheme(name: &str) -> Result<KeywordScheme> {
    sesame_sse::scheme(name).ok_or_else(|| ClientError::UnknownScheme {
        name: name.to_owned(),
        known: sesame_sse::schemes()
            .iter()
            .map(|s| s.descriptor.name.to_owned())
            .collect(),
    })
}

/// A fresh scheme client; bad parameters are the caller's mistake.
pub(crate) fn new_client(
    scheme: &KeywordScheme,
    rng: &mut dyn CryptoRngCore,
    params: &Params,
) -> Result<Box<dyn sesame_sse::KeywordClient>> {
    (scheme.new_client)(rng, params).map_err(|e| match e {
        sesame_core::Error::InvalidArgument(m) => {
            ClientError::InvalidArgument(format!("scheme parameters: {m}"))
        }
        other => ClientError::Core(other),
    })
}
