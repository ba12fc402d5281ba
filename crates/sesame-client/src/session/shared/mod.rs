//! The client state shared by a profile's devices.
//!
//! On a server that keeps records beside an index (`ReadRecords`,
//! `WriteRecords`), the index's client state lives there too, sealed under
//! the profile's state key
//! ([`StateCipher::seal_shared_with`](crate::state::StateCipher::seal_shared_with))
//! with a version number. The local state file is a cache of it.
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
//! Large values are kept as *chunks*, records written before the commit
//! that refers to them: a state over 64 KiB in content-named chunks,
//! sealed in segments so that a commit sends only the chunks that
//! changed and deletes those no longer used in its own compare-and-swap
//! write (`chunks`); an intent larger than a quarter of what one message
//! carries under its identifier (deleted with it).
//!
//! The server never sees a key, a keyword or a path: the record is
//! AES-256-GCM-SIV with the profile id, index, scheme and version as
//! associated data, so a record from another index or profile, or an
//! older record relabelled as newer, does not open.
//!
//! Layout: this module holds the session's side (sharing, refreshing,
//! retrying) and [`shared_view`]; `chain` judges a state against what
//! this device saw and keeps its note (`indexes/NAME.shared`); `records`
//! reads and writes the records (state, head, intents; chunks in
//! `session::chunks`) and commits this device's writes.

use std::path::Path;
use std::time::Duration;

use rand_core::RngCore;

use super::Session;
use crate::error::{ClientError, Result};
use crate::state::{shared_digest, IndexState, SharedExtras};

mod chain;
mod records;
pub(crate) mod side;

pub(crate) use side::{Seen, Shared};

use chain::{accept, read_sidecar, write_sidecar};
pub(crate) use chain::{parse_sidecar, renew_device};
pub(crate) use records::{adopt_locally, chunk_max, fetch};
use records::{get_value, holds_anything, parse_head};

/// The record holding the index's shared client state.
pub(crate) const STATE_RECORD: &str = "state";
/// The record naming the newest state (`"SSMHED01" || version ||
/// digest`), written with it: a device that holds that version learns from
/// it, without downloading the state, whether the server's is the one it
/// saw.
pub(crate) const HEAD_RECORD: &str = "head";
/// First bytes of the head record.
const HEAD_MAGIC: &[u8; 8] = b"SSMHED01";
/// The record holding the profile's header (for `init --join`).
pub(crate) const PROFILE_RECORD: &str = "profile";
/// Attempts of a command that keeps finding the state changed.
const ATTEMPTS: usize = 16;
/// `expected` of a write that accepts any version (chunks).
pub(super) const ANY_VERSION: u64 = u64::MAX;
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
        let sidecar = self.sidecar.clone();
        let header = self.header.clone();
        let Some(fetched) = fetch(self.backend.as_mut(), &self.cipher, &self.index)? else {
            return Ok(());
        };
        let (device, seen, known) = read_sidecar(&sidecar)?;
        let mut shared = Shared {
            seen: Seen::default(),
            device,
            extras: SharedExtras::default(),
            staged: Vec::new(),
            sidecar,
            chunk_max: chunk_max(self.backend.as_mut())?,
            memo: Default::default(),
        };
        if let Some(header) = header {
            // Only forward: an older header than the server's is not put
            // back (the passphrase changed on another device).
            let write = (header.sync)(&self.profile_dir, &header.bytes, &fetched.profile)?;
            shared.staged.extend(write);
        }
        match fetched.opened {
            None => {
                if known && seen.version > 0 {
                    return Err(ClientError::SharedStateRolledBack {
                        index: self.index.clone(),
                        server: 0,
                        seen: seen.version,
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
                let now = accept(
                    &self.index,
                    &device,
                    &seen,
                    fetched.version,
                    fetched.digest,
                    fetched.chain.as_ref(),
                )?;
                if seen.version == 0 && holds_anything(&self.state) {
                    return Err(ClientError::StateDiverged {
                        index: self.index.clone(),
                    });
                }
                let staged = std::mem::take(&mut shared.staged);
                self.shared = Some(shared);
                // The local copy is this version already when the device
                // saw it last (it is written before the note of the
                // version).
                let write_local = fetched.version != seen.version;
                self.adopt(state, extras, now, write_local)?;
                if !staged.is_empty() {
                    // The profile record only: its own write, whose
                    // conflict (another device wrote it) does not matter.
                    let _ = self.backend.write_records(&self.index, staged);
                }
                Ok(())
            }
        }
    }

    /// Takes the server's newer state if there is one, after checking
    /// that it continues what this device saw ([`accept`]). When the
    /// server holds the version this device has, the head record says
    /// whether it is the same state; if it is not, the whole state is
    /// read and judged.
    pub(crate) fn refresh(&mut self) -> Result<()> {
        let Some((seen, device)) = self.shared.as_ref().map(|s| (s.seen.clone(), s.device)) else {
            return Ok(());
        };
        let names = [STATE_RECORD.to_owned(), HEAD_RECORD.to_owned()];
        let records = self
            .backend
            .read_records(&self.index, &names, &[seen.version, 0])?
            .unwrap_or_default();
        let mut records = records.into_iter();
        let (Some(record), Some(head)) = (records.next(), records.next()) else {
            return Err(ClientError::Core(sesame_core::Error::Protocol(
                "the server answered no state record".into(),
            )));
        };
        if record.version < seen.version {
            return Err(ClientError::SharedStateRolledBack {
                index: self.index.clone(),
                server: record.version,
                seen: seen.version,
            });
        }
        if record.version == seen.version {
            let same = match (head.version, parse_head(&head.value), seen.digest) {
                // No head: a state written before the chain.
                (0, _, _) => !seen.chained,
                (_, Some((v, d)), Some(mine)) => v == seen.version && d == mine,
                _ => false,
            };
            if same {
                return Ok(());
            }
            return self.refetch(&seen, &device);
        }
        let opened =
            get_value(self.backend.as_mut(), &self.index, &record.value).and_then(|blob| {
                let digest = shared_digest(&blob);
                self.cipher
                    .open_shared(&self.index, record.version, &blob)
                    .map(|o| (o, digest))
            });
        match opened {
            Ok(((state, extras, chain), digest)) => {
                let now = accept(
                    &self.index,
                    &device,
                    &seen,
                    record.version,
                    digest,
                    chain.as_ref(),
                )?;
                self.adopt(state, extras, now, true)
            }
            // Chunks rewritten while read: read it all again.
            Err(ClientError::SharedStateCorrupt { .. }) => self.refetch(&seen, &device),
            Err(e) => Err(e),
        }
    }

    /// Reads the whole state again and adopts it if it continues what
    /// this device saw.
    fn refetch(&mut self, seen: &Seen, device: &[u8; 16]) -> Result<()> {
        let fetched =
            fetch(self.backend.as_mut(), &self.cipher, &self.index)?.ok_or_else(|| {
                ClientError::SharedStateCorrupt {
                    index: self.index.clone(),
                }
            })?;
        let Some((state, extras)) = fetched.opened else {
            return Err(ClientError::SharedStateRolledBack {
                index: self.index.clone(),
                server: 0,
                seen: seen.version,
            });
        };
        let now = accept(
            &self.index,
            device,
            seen,
            fetched.version,
            fetched.digest,
            fetched.chain.as_ref(),
        )?;
        let write_local = now.version != seen.version;
        self.adopt(state, extras, now, write_local)
    }

    /// Makes `state` (the shared record's state that `seen` describes)
    /// this session's, with this device's reservations taken out of
    /// `extras`; writes the local copy (unless `write_local` is false: it
    /// is that version already) and the note of what was seen.
    fn adopt(
        &mut self,
        mut state: IndexState,
        mut extras: SharedExtras,
        seen: Seen,
        write_local: bool,
    ) -> Result<()> {
        let Some(shared) = self.shared.as_mut() else {
            return Ok(());
        };
        state.reserved = extras
            .reserved_by
            .remove(&shared.device)
            .unwrap_or_default();
        shared.seen = seen;
        shared.extras = extras;
        shared.staged.clear();
        let device = shared.device;
        let sidecar = shared.sidecar.clone();
        let seen = shared.seen.clone();
        self.state = state;
        self.reload_client()?;
        if write_local {
            self.cipher
                .save(&mut self.rng, &self.state_path, &self.index, &self.state)?;
        }
        write_sidecar(&sidecar, &device, &seen)
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

/// A device's last write, as the newest state a device saw lists it
/// ([`SharedView`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceWrite {
    /// The device's identifier (hex; each profile directory, and each
    /// restored backup, is a device of its own).
    pub device: String,
    /// The version of the shared state it last wrote.
    pub version: u64,
    /// That state's digest (hex, SHA-256 of its sealed bytes).
    pub digest: String,
    /// Whether it is this device.
    pub this_device: bool,
}

/// What this device saw of an index's shared state (from
/// `indexes/NAME.shared`, read without the server): two devices that
/// list the same version with different digests, or that disagree on a
/// device's last write, were shown different histories.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedView {
    /// This device's identifier (hex).
    pub device: String,
    /// The version of the newest state it saw (0: none yet).
    pub version: u64,
    /// That state's digest (hex); `None` when no state was read since the
    /// note was written (a join, or a build before the chain).
    pub digest: Option<String>,
    /// Each device's last write as that state lists it, newest first.
    pub devices: Vec<DeviceWrite>,
}

/// What the device whose profile directory is `profile_dir` saw of index
/// `index`'s shared state; `None` when the index's state is not shared
/// (an embedded profile, or one not yet shared).
pub fn shared_view(profile_dir: &Path, index: &str) -> Result<Option<SharedView>> {
    let path = profile_dir
        .join(crate::state::INDEX_DIR)
        .join(format!("{index}.shared"));
    let (device, seen, known) = read_sidecar(&path)?;
    if !known {
        return Ok(None);
    }
    let mut heads = seen.heads.clone();
    if let Some(own) = seen.own {
        heads.entry(device).or_insert(own);
    }
    let mut devices: Vec<DeviceWrite> = heads
        .iter()
        .map(|(d, h)| DeviceWrite {
            device: hex::encode(d),
            version: h.version,
            digest: hex::encode(h.digest),
            this_device: *d == device,
        })
        .collect();
    devices.sort_by(|a, b| b.version.cmp(&a.version).then(a.device.cmp(&b.device)));
    Ok(Some(SharedView {
        device: hex::encode(device),
        version: seen.version,
        digest: seen.digest.map(hex::encode),
        devices,
    }))
}
