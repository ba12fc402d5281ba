//! Rotation of the profile's master key ([`Profile::rotate_master`]) and
//! its note, `profile.rotating.json`. The per-index and per-table halves
//! are `session::rotate` and `table::rotate`. Tests: `tests/master_key.rs`.

use rand_core::OsRng;
use serde::{Deserialize, Serialize};
use sesame_crypto::{Aes256GcmSiv, Key};

use super::header::Header;
use super::{check_index_name, Profile, HEADER_FILE};
use crate::error::{ClientError, Result};
use crate::fsutil;
use crate::network::{save_binding, NetworkBackend};
use crate::progress::Progress;

/// Name of the note of a master-key rotation in progress
/// ([`Profile::rotate_master`]): the new master key sealed under the
/// current one's state key, and the header version it started from.
pub(crate) const ROTATION_FILE: &str = "profile.rotating.json";

/// The note of a rotation in progress, as stored.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RotationNote {
    /// The header version the rotation started from.
    from_version: u64,
    /// The new master key, AES-256-GCM-SIV under the current state key,
    /// hex.
    sealed: String,
    /// The header that will wrap it (nothing secret), made once so that
    /// a rerun puts the very same header on the server.
    header: Header,
}

pub(super) fn rotation_aad(id: &str, from_version: u64) -> Vec<u8> {
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

impl Profile {
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
    pub(super) fn rotation_key(
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
    pub(super) fn check_header_unchanged(&self, current: &Header) -> Result<()> {
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
}
