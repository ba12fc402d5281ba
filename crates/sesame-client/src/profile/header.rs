//! The profile header (`profile.json`): its fields and sealing, opening
//! a profile from it (and from a newer `profile.next.json`), passphrase
//! and key-file changes, and the header shared with the server
//! ([`sync_header`]). Tests: `tests/passphrase.rs`.

use std::path::Path;

use rand_core::{OsRng, RngCore};
use serde::{Deserialize, Serialize};
use sesame_crypto::{Aes256GcmSiv, Key};

use super::{
    key_encryption_key, key_file_digest, label, Profile, StoreKind, CHECK_TEXT, DEFAULT_INDEX,
    FORMAT, FORMAT_V1, FORMAT_V2, HEADER_FILE, NEXT_HEADER_FILE, STORE_EMBEDDED, STORE_SERVER,
};
use crate::backend::Backend;
use crate::error::{ClientError, Result};
use crate::fsutil;
use crate::kdf::{KdfLimit, KdfParams, SALT_LEN};
use crate::network::{NetworkBackend, ServerBinding, SERVER_FILE};

/// The profile header as stored in `profile.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Header {
    pub(super) format: String,
    /// Random profile identifier, hex.
    pub(super) id: String,
    /// Where the indexes live: `embedded` (`store.redb`) or `server`
    /// (`server.json`); absent in format 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) store: Option<String>,
    pub(super) kdf: KdfHeader,
    /// Formats 1 and 2: AEAD seal of [`CHECK_TEXT`] under the key-check
    /// key, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) check: Option<String>,
    /// Format 3: AEAD seal of the master key under the key-encryption key,
    /// hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) wrapped: Option<String>,
    /// Format 3: the key-encryption key needs a key file as well as the
    /// passphrase.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) key_file: bool,
    /// Format 3: the header's version, one more at every rewrite (a
    /// passphrase or key-file change): devices keep the newest and never
    /// put an older one back on the server. Bound into the seal, so a
    /// header relabelled as newer does not open. Absent: 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(super) version: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct KdfHeader {
    pub(super) algorithm: String,
    /// Memory in KiB.
    pub(super) m_kib: u32,
    /// Passes.
    pub(super) t: u32,
    /// Lanes.
    pub(super) p: u32,
    /// Salt, hex.
    pub(super) salt: String,
}

impl KdfHeader {
    /// Argon2id with the costs of `kdf` and a fresh random salt; the
    /// header's fields and the salt.
    pub(super) fn fresh(kdf: KdfParams) -> (KdfHeader, [u8; SALT_LEN]) {
        let mut salt = [0u8; SALT_LEN];
        OsRng.fill_bytes(&mut salt);
        let header = KdfHeader {
            algorithm: "argon2id".into(),
            m_kib: kdf.m_kib,
            t: kdf.t,
            p: kdf.p,
            salt: hex::encode(salt),
        };
        (header, salt)
    }

    pub(super) fn params(&self) -> KdfParams {
        KdfParams {
            m_kib: self.m_kib,
            t: self.t,
            p: self.p,
        }
    }
}

impl Header {
    /// `label`, the format, the identifier, `store` where given, and the
    /// key derivation's fields, separated by NUL bytes: the start of both
    /// associated data.
    fn aad_fields(&self, label: &str, store: Option<&str>) -> Vec<u8> {
        let kdf = &self.kdf;
        let mut fields = vec![label, self.format.as_str(), self.id.as_str()];
        fields.extend(store);
        let costs = [kdf.m_kib, kdf.t, kdf.p].map(|n| n.to_string());
        fields.push(kdf.algorithm.as_str());
        fields.extend(costs.iter().map(String::as_str));
        fields.push(kdf.salt.as_str());
        fields.join("\0").into_bytes()
    }

    /// Associated data of the key check: binds every header field, so an
    /// altered header does not open.
    pub(super) fn check_aad(&self) -> Vec<u8> {
        let mut aad = self.aad_fields("sesame-client/key-check/v1", None);
        if let Some(store) = &self.store {
            aad.extend_from_slice(format!("\0store={store}").as_bytes());
        }
        aad
    }

    /// Associated data of the wrapped master key (format 3): every header
    /// field but the seal itself.
    pub(super) fn wrap_aad(&self) -> Vec<u8> {
        let store = self.store.as_deref().unwrap_or("");
        let mut aad = self.aad_fields("sesame-client/wrap/v3", Some(store));
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
    pub(super) fn wrap(
        id: &str,
        store: &str,
        kdf: KdfParams,
        passphrase: &str,
        key_file: Option<&[u8; 32]>,
        master: &Key<32>,
        version: u64,
    ) -> Result<(Header, Key<32>)> {
        let (kdf_header, salt) = KdfHeader::fresh(kdf);
        let mut header = Header {
            format: FORMAT.into(),
            id: id.to_owned(),
            store: Some(store.to_owned()),
            kdf: kdf_header,
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
    pub(super) fn seal_master(&mut self, kek: &Key<32>, master: &Key<32>) -> Result<()> {
        let sealed = Aes256GcmSiv::new(kek)
            .seal(&mut OsRng, &self.wrap_aad(), master.as_bytes())
            .map_err(|_| ClientError::InvalidArgument("the master key does not seal".into()))?;
        self.wrapped = Some(hex::encode(sealed));
        Ok(())
    }
}

pub(super) fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Whether header `theirs` (of the same profile) is ahead of `ours`: a
/// newer version, or the same version sealed differently (two devices
/// changed it at once and `theirs` reached the server first).
pub(super) fn is_ahead(theirs: &Header, ours: &Header) -> bool {
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

impl Profile {
    /// Opens the profile with [`NEXT_HEADER_FILE`], a newer header than
    /// `local` (`profile.json`'s bytes) that this device saw on the server
    /// or was writing there, if there is one and `passphrase` opens it;
    /// it becomes `profile.json` then. `Ok(None)`: there is none, or the
    /// passphrase does not open it (the old one may still open
    /// `profile.json`; a session then says the passphrase changed).
    pub(super) fn open_next_header(
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
    pub(super) fn open_header(
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

    pub(super) fn change_credentials(
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
    pub(super) fn install_header(
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
    pub(super) fn push_header(
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
}
