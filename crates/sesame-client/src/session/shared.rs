//! The client state shared by a profile's devices.
//!
//! On a server that keeps records beside an index (`ReadRecords`,
//! `WriteRecords`), the index's client state lives there too, sealed under
//! the profile's state key ([`StateCipher::seal_shared`]) with a version
//! number. The local state file is a cache of it.
//!
//! - Every command starts by *refreshing*: it asks for the record, sending
//!   the version it knows, and adopts a newer one (another device's
//!   changes).
//! - Every write of the state is a *compare-and-swap*: the record changes
//!   only if it is still at the version this device read. A pending
//!   intent's sealed bytes go in the same write, so any device can
//!   complete it. Since the state that reserves document identifiers,
//!   scheme counters or a rebuild's generation is committed before anything
//!   that uses them is sent, two devices never use the same one.
//! - A write that finds another version means another device changed the
//!   index since: nothing of this command that depends on the stale state
//!   was sent, so the command refreshes and runs again from the start
//!   ([`Session::shared_op`]), completing what it had done as it would
//!   after a crash.
//! - Each device marks its reservations with its own identifier
//!   (`indexes/NAME.shared`, which also holds the newest version it saw), so
//!   a device cleans up only its own interrupted adds, never another's in
//!   progress; and a server that answers with an older version than one
//!   the device saw is refused ([`ClientError::SharedStateRolledBack`]).
//!
//! A value larger than a quarter of what one message carries (a large
//! catalog, an intent of many documents) is kept as *chunks*, records
//! written before the commit that refers to them: a state's under names
//! of the writing device that alternate with the version's parity (so a
//! device never overwrites the chunks of the version in force), an
//! intent's under its identifier (deleted with it).
//!
//! The server never sees a key, a keyword or a path: the record is
//! AES-256-GCM-SIV with the profile id, index, scheme and version as
//! associated data, so a record from another index or profile, or an
//! older record relabelled as newer, does not open.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rand_core::RngCore;
use serde::{Deserialize, Serialize};

use super::Session;
use crate::backend::{Backend, IndexRecord, IndexRecordWrite};
use crate::error::{ClientError, Result};
use crate::fsutil;
use crate::intents::Intent;
use crate::state::{IndexState, SharedExtras, StateCipher};

/// The record holding the index's shared client state.
pub(crate) const STATE_RECORD: &str = "state";
/// The record holding the profile's header (for `init --join`).
pub(crate) const PROFILE_RECORD: &str = "profile";
/// Attempts of a command that keeps finding the state changed.
const ATTEMPTS: usize = 16;
/// `expected` of a write that accepts any version (chunks).
const ANY_VERSION: u64 = u64::MAX;
/// Tag of a record value held in the record itself.
const INLINE: u8 = 0;
/// Tag of a record value held in chunk records.
const CHUNKED: u8 = 1;

/// Chunks a value of `len` bytes takes (0: it is held inline).
fn chunk_count(len: usize, chunk_max: usize) -> usize {
    if len <= chunk_max / 4 {
        0
    } else {
        len.div_ceil(chunk_max)
    }
}

/// The chunks of intent `id` are named this, then their number.
fn intent_chunk_prefix(id: &[u8; 16]) -> String {
    format!("i-{}-", hex::encode(id))
}

/// The record of pending intent `id`.
pub(crate) fn intent_record(id: &[u8; 16]) -> String {
    format!("intent-{}", hex::encode(id))
}

/// This device's side of an index's shared state.
pub(crate) struct Shared {
    /// The record's version this device's state is.
    pub version: u64,
    /// This device's identifier (its reservations are marked with it).
    pub device: [u8; 16],
    /// What the devices share beyond the state; this device's own
    /// reservations are in the state's `reserved`, not here.
    pub extras: SharedExtras,
    /// Records to write with the next commit of the state (a pending
    /// intent's bytes, or its deletion once completed).
    pub staged: Vec<IndexRecordWrite>,
    /// `indexes/NAME.shared`.
    sidecar: PathBuf,
    /// The largest chunk (what one message carries, less framing).
    chunk_max: usize,
}

/// `indexes/NAME.shared`: not secret (an identifier and a counter).
#[derive(Serialize, Deserialize)]
struct Sidecar {
    device: String,
    version: u64,
}

/// The device identifier and newest version seen of the index whose
/// sidecar is `path`; a fresh identifier and version 0 when there is none.
fn read_sidecar(path: &Path) -> Result<([u8; 16], u64, bool)> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let damaged = || ClientError::ProfileCorrupt {
                path: path.to_path_buf(),
                reason: "not a shared-state note of this build".into(),
            };
            let s: Sidecar = serde_json::from_slice(&bytes).map_err(|_| damaged())?;
            let device: [u8; 16] = hex::decode(&s.device)
                .ok()
                .and_then(|d| d.try_into().ok())
                .ok_or_else(damaged)?;
            Ok((device, s.version, true))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut device = [0u8; 16];
            rand_core::OsRng.fill_bytes(&mut device);
            Ok((device, 0, false))
        }
        Err(e) => Err(ClientError::io("read", path, &e)),
    }
}

fn write_sidecar(path: &Path, device: &[u8; 16], version: u64) -> Result<()> {
    let json = serde_json::to_vec(&Sidecar {
        device: hex::encode(device),
        version,
    })
    .map_err(|e| ClientError::InvalidArgument(format!("shared-state note: {e}")))?;
    fsutil::write_atomic(path, &json)
}

/// The largest chunk a record may carry through `backend`.
pub(crate) fn chunk_max(backend: &mut dyn Backend) -> Result<usize> {
    Ok(backend
        .max_message()?
        .map_or(usize::MAX / 2, |m| {
            crate::network::max_request(m).saturating_sub(4096)
        })
        .max(4096))
}

/// Reads a record value written by [`Session::put_value`]: inline, or
/// reassembled from its chunks.
fn get_value(backend: &mut dyn Backend, index: &str, value: &[u8]) -> Result<Vec<u8>> {
    let damaged = || ClientError::SharedStateCorrupt {
        index: index.to_owned(),
    };
    let (&tag, rest) = value.split_first().ok_or_else(damaged)?;
    match tag {
        INLINE => Ok(rest.to_vec()),
        CHUNKED => {
            let (count, prefix) = rest.split_first_chunk::<4>().ok_or_else(damaged)?;
            let count = u32::from_be_bytes(*count);
            let prefix = std::str::from_utf8(prefix).map_err(|_| damaged())?;
            let mut out = Vec::new();
            for k in 0..count {
                let records = backend
                    .read_records(index, &[format!("{prefix}{k}")], &[])?
                    .unwrap_or_default();
                match records.into_iter().next() {
                    Some(r) if r.version > 0 => out.extend_from_slice(&r.value),
                    _ => return Err(damaged()),
                }
            }
            Ok(out)
        }
        _ => Err(damaged()),
    }
}

/// Gives the device whose note of an index is `sidecar` a fresh
/// identifier, keeping the newest version it saw (a restored backup is
/// another device than the one backed up).
pub(crate) fn renew_device(sidecar: &Path) -> Result<()> {
    let (_, version, _) = read_sidecar(sidecar)?;
    let mut device = [0u8; 16];
    rand_core::OsRng.fill_bytes(&mut device);
    write_sidecar(sidecar, &device, version)
}

/// The server's shared state of `index` (opened), its version and the
/// profile record, if the backend keeps records; `Ok(None)` when it
/// keeps none. A state whose chunks another device was rewriting while
/// they were read is read again.
pub(crate) fn fetch(
    backend: &mut dyn Backend,
    cipher: &StateCipher,
    index: &str,
) -> Result<Option<Fetched>> {
    let names = [STATE_RECORD.to_owned(), PROFILE_RECORD.to_owned()];
    let mut last = None;
    for _ in 0..3 {
        let Some(records) = backend.read_records(index, &names, &[])? else {
            return Ok(None);
        };
        let [state, profile]: [IndexRecord; 2] = records.try_into().map_err(|_| {
            ClientError::Core(sesame_core::Error::Protocol(
                "the server answered another number of records".into(),
            ))
        })?;
        if last == Some(state.version) {
            return Err(ClientError::SharedStateCorrupt {
                index: index.to_owned(),
            });
        }
        if state.version == 0 {
            return Ok(Some(Fetched {
                version: 0,
                opened: None,
                profile,
            }));
        }
        let opened = get_value(backend, index, &state.value)
            .and_then(|blob| cipher.open_shared(index, state.version, &blob));
        match opened {
            Ok(opened) => {
                return Ok(Some(Fetched {
                    version: state.version,
                    opened: Some(opened),
                    profile,
                }))
            }
            Err(ClientError::SharedStateCorrupt { .. }) => last = Some(state.version),
            Err(e) => return Err(e),
        }
    }
    Err(ClientError::SharedStateCorrupt {
        index: index.to_owned(),
    })
}

/// What [`fetch`] read.
pub(crate) struct Fetched {
    /// The state record's version (0: none).
    pub version: u64,
    /// The state and extras, when there is a record.
    pub opened: Option<(IndexState, SharedExtras)>,
    /// The profile record.
    pub profile: IndexRecord,
}

/// Writes a joined device's local copy of a shared state: its state file
/// (via `save`) and its sidecar, with a fresh device identifier.
pub(crate) fn adopt_locally(
    sidecar: &Path,
    version: u64,
    save: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let (device, _, _) = read_sidecar(sidecar)?;
    save()?;
    write_sidecar(sidecar, &device, version)
}

/// Whether a state holds anything a device must not lose by adopting
/// another's.
fn holds_anything(state: &IndexState) -> bool {
    !state.catalog.is_empty()
        || !state.pending.is_empty()
        || !state.reserved.is_empty()
        || !state.garbage.is_empty()
        || state.generation != 0
}

impl Session {
    /// Shares the index's state through the backend's records, if it
    /// keeps them: adopts the server's copy, or uploads this device's when
    /// there is none (with its pending intents), and the profile's header
    /// (`header`) so that another device can join.
    ///
    /// A session opened before its index existed on the server (a table
    /// being created) calls it again once it does.
    pub(crate) fn share(&mut self) -> Result<()> {
        if self.shared.is_some() {
            return Ok(());
        }
        let sidecar = self
            .profile_dir
            .join(crate::profile::INDEX_DIR)
            .join(format!("{}.shared", self.index));
        let header = self.header.clone();
        let Some(fetched) = fetch(self.backend.as_mut(), &self.cipher, &self.index)? else {
            return Ok(());
        };
        let (device, seen, known) = read_sidecar(&sidecar)?;
        let mut shared = Shared {
            version: 0,
            device,
            extras: SharedExtras::default(),
            staged: Vec::new(),
            sidecar,
            chunk_max: chunk_max(self.backend.as_mut())?,
        };
        if let Some(header) = header {
            if fetched.profile.value != header {
                shared.staged.push(IndexRecordWrite {
                    name: PROFILE_RECORD.into(),
                    expected: fetched.profile.version,
                    value: Some(header),
                });
            }
        }
        match fetched.opened {
            None => {
                if known && seen > 0 {
                    return Err(ClientError::SharedStateRolledBack {
                        index: self.index.clone(),
                        server: 0,
                        seen,
                    });
                }
                // The first device: its state (and pending intents) go up.
                shared.extras.next_generation = self.state.generation + 1;
                self.shared = Some(shared);
                let pending: Vec<[u8; 16]> = self.state.pending.iter().map(|p| p.id).collect();
                for id in pending {
                    if self.intents.has(&id) {
                        let sealed = self.intents.read(&id)?;
                        self.stage_intent(&id, sealed)?;
                    }
                }
                match self.save() {
                    Err(ClientError::StaleState { .. }) => {
                        // Another device uploaded first: take its state.
                        self.refresh()
                    }
                    other => other,
                }
            }
            Some((state, extras)) => {
                if fetched.version < seen {
                    return Err(ClientError::SharedStateRolledBack {
                        index: self.index.clone(),
                        server: fetched.version,
                        seen,
                    });
                }
                if seen == 0 && holds_anything(&self.state) {
                    return Err(ClientError::StateDiverged {
                        index: self.index.clone(),
                    });
                }
                let staged = std::mem::take(&mut shared.staged);
                self.shared = Some(shared);
                // The local copy is this version already when the device
                // saw it last (it is written before the note of the
                // version).
                self.adopt(state, extras, fetched.version, fetched.version != seen)?;
                if !staged.is_empty() {
                    // The profile record only: its own write, whose
                    // conflict (another device wrote it) does not matter.
                    let _ = self.backend.write_records(&self.index, staged);
                }
                Ok(())
            }
        }
    }

    /// Takes the server's newer state if there is one.
    pub(crate) fn refresh(&mut self) -> Result<()> {
        let Some(version) = self.shared.as_ref().map(|s| s.version) else {
            return Ok(());
        };
        let records = self
            .backend
            .read_records(&self.index, &[STATE_RECORD.to_owned()], &[version])?
            .unwrap_or_default();
        let Some(record) = records.into_iter().next() else {
            return Err(ClientError::Core(sesame_core::Error::Protocol(
                "the server answered no state record".into(),
            )));
        };
        if record.version == version {
            return Ok(());
        }
        if record.version < version {
            return Err(ClientError::SharedStateRolledBack {
                index: self.index.clone(),
                server: record.version,
                seen: version,
            });
        }
        let opened = get_value(self.backend.as_mut(), &self.index, &record.value)
            .and_then(|blob| self.cipher.open_shared(&self.index, record.version, &blob));
        let (state, extras, version) =
            match opened {
                Ok((state, extras)) => (state, extras, record.version),
                // Chunks rewritten while read: read it all again.
                Err(ClientError::SharedStateCorrupt { .. }) => {
                    let fetched = fetch(self.backend.as_mut(), &self.cipher, &self.index)?
                        .ok_or_else(|| ClientError::SharedStateCorrupt {
                            index: self.index.clone(),
                        })?;
                    let (state, extras) =
                        fetched
                            .opened
                            .ok_or_else(|| ClientError::SharedStateRolledBack {
                                index: self.index.clone(),
                                server: 0,
                                seen: version,
                            })?;
                    if fetched.version < version {
                        return Err(ClientError::SharedStateRolledBack {
                            index: self.index.clone(),
                            server: fetched.version,
                            seen: version,
                        });
                    }
                    (state, extras, fetched.version)
                }
                Err(e) => return Err(e),
            };
        self.adopt(state, extras, version, true)
    }

    /// The record value for `bytes`: the bytes themselves when small, else
    /// a list of chunk records named `prefix` and their number, written
    /// now (any version: the names are this writer's own).
    fn put_value(&mut self, prefix: &str, bytes: &[u8]) -> Result<Vec<u8>> {
        let chunk_max = self.shared.as_ref().map_or(usize::MAX, |s| s.chunk_max);
        let count = chunk_count(bytes.len(), chunk_max);
        if count == 0 {
            let mut value = Vec::with_capacity(1 + bytes.len());
            value.push(INLINE);
            value.extend_from_slice(bytes);
            return Ok(value);
        }
        for (k, chunk) in bytes.chunks(chunk_max).enumerate() {
            let write = IndexRecordWrite {
                name: format!("{prefix}{k}"),
                expected: ANY_VERSION,
                value: Some(chunk.to_vec()),
            };
            if self
                .backend
                .write_records(&self.index, vec![write])?
                .is_some()
            {
                return Err(ClientError::Core(sesame_core::Error::Protocol(
                    "the server refused a write of any version".into(),
                )));
            }
        }
        let mut value = vec![CHUNKED];
        value.extend_from_slice(&(count as u32).to_be_bytes());
        value.extend_from_slice(prefix.as_bytes());
        Ok(value)
    }

    /// Makes `state` (version `version` of the shared record) this
    /// session's, with this device's reservations taken out of `extras`;
    /// writes the local copy (unless `write_local` is false: it is that
    /// version already) and the note of the version.
    fn adopt(
        &mut self,
        mut state: IndexState,
        mut extras: SharedExtras,
        version: u64,
        write_local: bool,
    ) -> Result<()> {
        let Some(shared) = self.shared.as_mut() else {
            return Ok(());
        };
        state.reserved = extras
            .reserved_by
            .remove(&shared.device)
            .unwrap_or_default();
        shared.version = version;
        shared.extras = extras;
        shared.staged.clear();
        let device = shared.device;
        let sidecar = shared.sidecar.clone();
        self.state = state;
        self.reload_client()?;
        if write_local {
            self.cipher
                .save(&mut self.rng, &self.state_path, &self.index, &self.state)?;
        }
        write_sidecar(&sidecar, &device, version)
    }

    /// Commits the state as the next version of the shared record, with
    /// the staged records, if the record is still at the version this
    /// session holds; [`ClientError::StaleState`] if not (nothing
    /// written). The staged records are dropped only once written: after
    /// a failure the caller unstages its own ([`Session::unstage_to`]) and
    /// the earlier ones wait for the next commit. The caller writes the
    /// local copy, then [`Session::note_version`].
    pub(super) fn commit_shared(&mut self) -> Result<()> {
        let Some(shared) = self.shared.as_ref() else {
            return Ok(());
        };
        let staged = shared.staged.clone();
        let next = shared.version + 1;
        let expected = shared.version;
        let mut extras = shared.extras.clone();
        if !self.state.reserved.is_empty() {
            extras
                .reserved_by
                .insert(shared.device, self.state.reserved.clone());
        }
        let prefix = format!("s-{}-{}-", hex::encode(&shared.device[..8]), next % 2);
        let blob =
            self.cipher
                .seal_shared(&mut self.rng, &self.index, next, &self.state, &extras)?;
        let value = self.put_value(&prefix, &blob)?;
        let mut writes = vec![IndexRecordWrite {
            name: STATE_RECORD.into(),
            expected,
            value: Some(value),
        }];
        writes.extend(staged);
        let conflict = self.backend.write_records(&self.index, writes.clone())?;
        if let Some(current) = conflict {
            // A retried request whose first try was applied finds every
            // record as it wrote it.
            let ours = current.len() == writes.len()
                && writes.iter().zip(&current).all(|(w, c)| match &w.value {
                    Some(v) => {
                        (w.expected == ANY_VERSION || c.version == w.expected + 1) && &c.value == v
                    }
                    None => c.version == 0,
                });
            if !ours {
                return Err(ClientError::StaleState {
                    index: self.index.clone(),
                });
            }
        }
        if let Some(shared) = self.shared.as_mut() {
            shared.version = next;
            shared.staged.clear();
        }
        Ok(())
    }

    /// Notes the version of the shared state the local copy now is.
    pub(super) fn note_version(&self) -> Result<()> {
        match &self.shared {
            Some(shared) => write_sidecar(&shared.sidecar, &shared.device, shared.version),
            None => Ok(()),
        }
    }

    /// Stages the sealed bytes of a pending intent, to be written with the
    /// state that refers to it (its chunks, if it has any, are written
    /// now).
    pub(super) fn stage_intent(&mut self, id: &[u8; 16], sealed: Vec<u8>) -> Result<()> {
        if self.shared.is_none() {
            return Ok(());
        }
        let value = self.put_value(&intent_chunk_prefix(id), &sealed)?;
        if let Some(shared) = self.shared.as_mut() {
            shared.staged.push(IndexRecordWrite {
                name: intent_record(id),
                expected: 0,
                value: Some(value),
            });
        }
        Ok(())
    }

    /// Stages the deletion of a completed intent's record and chunks.
    pub(super) fn stage_intent_done(&mut self, id: &[u8; 16]) {
        let Some(chunk_max) = self.shared.as_ref().map(|s| s.chunk_max) else {
            return;
        };
        let len = self.intents.read(id).map_or(0, |b| b.len());
        let chunks = chunk_count(len, chunk_max);
        let prefix = intent_chunk_prefix(id);
        if let Some(shared) = self.shared.as_mut() {
            shared.staged.push(IndexRecordWrite {
                name: intent_record(id),
                expected: 1,
                value: None,
            });
            for k in 0..chunks {
                shared.staged.push(IndexRecordWrite {
                    name: format!("{prefix}{k}"),
                    expected: ANY_VERSION,
                    value: None,
                });
            }
        }
    }

    /// Drops what was staged for a commit that did not happen.
    pub(super) fn unstage(&mut self) {
        self.unstage_to(0);
    }

    /// How many record writes are staged.
    pub(super) fn staged_len(&self) -> usize {
        self.shared.as_ref().map_or(0, |s| s.staged.len())
    }

    /// Drops what was staged after the first `mark` writes (those of a
    /// save that failed; the earlier ones still wait for the next).
    pub(super) fn unstage_to(&mut self, mark: usize) {
        if let Some(shared) = self.shared.as_mut() {
            shared.staged.truncate(mark);
        }
    }

    /// Pending intent `id`: its file here, or the server's copy (another
    /// device saved it), kept here from then on.
    pub(super) fn load_intent(&mut self, id: &[u8; 16]) -> Result<Intent> {
        if self.intents.has(id) || self.shared.is_none() {
            return self.intents.load(id);
        }
        let records = self
            .backend
            .read_records(&self.index, &[intent_record(id)], &[])?
            .unwrap_or_default();
        match records.into_iter().next() {
            Some(r) if r.version > 0 => {
                let sealed = get_value(self.backend.as_mut(), &self.index, &r.value)?;
                let intent = self.intents.open(id, &sealed)?;
                self.intents.write(id, &sealed)?;
                Ok(intent)
            }
            // Gone: another device completed it since this one read the
            // state (the state moved on), or it is lost.
            _ => {
                let version = self.shared.as_ref().map_or(0, |s| s.version);
                let now = self
                    .backend
                    .read_records(&self.index, &[STATE_RECORD.to_owned()], &[version])?
                    .unwrap_or_default();
                if now.first().is_some_and(|r| r.version != version) {
                    Err(ClientError::StaleState {
                        index: self.index.clone(),
                    })
                } else {
                    self.intents.load(id)
                }
            }
        }
    }

    /// Whether the state is shared with other devices.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// The next generation a rebuild may build: reserved in the shared
    /// state (committed) before anything is built when the state is
    /// shared, so two devices never build the same one.
    pub(super) fn reserve_generation(&mut self) -> Result<u64> {
        let Some(shared) = self.shared.as_mut() else {
            return Ok(self.state.generation + 1);
        };
        let generation = shared.extras.next_generation.max(self.state.generation + 1);
        shared.extras.next_generation = generation + 1;
        self.save()?;
        Ok(generation)
    }

    /// Runs `op`, and when another device changed the shared state under
    /// it, refreshes and runs it again (up to [`ATTEMPTS`] times, with a
    /// short random pause between). Without sharing, runs it once.
    pub(super) fn shared_op<T>(&mut self, mut op: impl FnMut(&mut Self) -> Result<T>) -> Result<T> {
        if self.shared.is_none() {
            return op(self);
        }
        for attempt in 0..ATTEMPTS {
            self.refresh()?;
            match op(self) {
                Err(ClientError::StaleState { .. }) => {
                    self.unstage();
                    let pause = 5 + self.rng.next_u64() % (10 * (attempt as u64 + 1));
                    std::thread::sleep(Duration::from_millis(pause));
                }
                other => return other,
            }
        }
        Err(ClientError::StateContended {
            index: self.index.clone(),
            attempts: ATTEMPTS,
        })
    }
}
