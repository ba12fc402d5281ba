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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand_core::RngCore;
use serde::{Deserialize, Serialize};

use super::Session;
use crate::backend::{Backend, IndexRecord, IndexRecordWrite};
use crate::error::{ClientError, Result};
use crate::fsutil;
use crate::intents::Intent;
use crate::state::{shared_digest, Chain, Head, IndexState, SharedExtras, StateCipher};

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

/// This device's side of an index's shared state.
pub(crate) struct Shared {
    /// The state this device's is (its version and digest) and what it
    /// knows of the history of states.
    pub seen: Seen,
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

/// What a device knows of the history of an index's shared states:
/// kept in `indexes/NAME.shared`, checked against every state the server
/// answers ([`accept`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    /// The version of the newest state this device saw.
    pub version: u64,
    /// Its digest; `None` when the note was written without it (by a
    /// build before the chain, or by a join): the next state read is
    /// adopted as it is.
    pub digest: Option<[u8; 32]>,
    /// Whether that state had a place in the chain ([`Chain`]): once one
    /// had, a state without is refused.
    pub chained: bool,
    /// The last state each device wrote, as that state said (its own
    /// writer's entry included).
    pub heads: BTreeMap<[u8; 16], Head>,
    /// This device's own last write.
    pub own: Option<Head>,
}

/// `indexes/NAME.shared`: not secret (identifiers, counters, digests of
/// sealed states the server holds anyway).
#[derive(Serialize, Deserialize)]
struct Sidecar {
    device: String,
    version: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    digest: Option<String>,
    #[serde(default)]
    chained: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    own: Option<HeadNote>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    heads: BTreeMap<String, HeadNote>,
}

/// A [`Head`] in the note.
#[derive(Serialize, Deserialize)]
struct HeadNote {
    version: u64,
    digest: String,
}

impl From<&Head> for HeadNote {
    fn from(h: &Head) -> Self {
        HeadNote {
            version: h.version,
            digest: hex::encode(h.digest),
        }
    }
}

fn from_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    hex::decode(text).ok().and_then(|d| d.try_into().ok())
}

/// The device identifier and what it saw of the index whose sidecar is
/// `path`, and whether there was a note; a fresh identifier and nothing
/// seen when there is none.
fn read_sidecar(path: &Path) -> Result<([u8; 16], Seen, bool)> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let (device, seen) =
                parse_sidecar(&bytes).ok_or_else(|| ClientError::ProfileCorrupt {
                    path: path.to_path_buf(),
                    reason: "not a shared-state note of this build".into(),
                })?;
            Ok((device, seen, true))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut device = [0u8; 16];
            rand_core::OsRng.fill_bytes(&mut device);
            Ok((device, Seen::default(), false))
        }
        Err(e) => Err(ClientError::io("read", path, &e)),
    }
}

/// The device identifier and what it saw, from the bytes of a note;
/// `None` when they are not one (also for the fuzz targets).
pub(crate) fn parse_sidecar(bytes: &[u8]) -> Option<([u8; 16], Seen)> {
    let s: Sidecar = serde_json::from_slice(bytes).ok()?;
    let head = |n: &HeadNote| -> Option<Head> {
        Some(Head {
            version: n.version,
            digest: from_hex::<32>(&n.digest)?,
        })
    };
    let mut heads = BTreeMap::new();
    for (d, n) in &s.heads {
        heads.insert(from_hex::<16>(d)?, head(n)?);
    }
    let digest = match s.digest.as_deref() {
        Some(d) => Some(from_hex::<32>(d)?),
        None => None,
    };
    let own = match &s.own {
        Some(n) => Some(head(n)?),
        None => None,
    };
    let seen = Seen {
        version: s.version,
        digest,
        chained: s.chained,
        heads,
        own,
    };
    Some((from_hex::<16>(&s.device)?, seen))
}

fn write_sidecar(path: &Path, device: &[u8; 16], seen: &Seen) -> Result<()> {
    let json = serde_json::to_vec(&Sidecar {
        device: hex::encode(device),
        version: seen.version,
        digest: seen.digest.map(hex::encode),
        chained: seen.chained,
        own: seen.own.as_ref().map(HeadNote::from),
        heads: seen
            .heads
            .iter()
            .map(|(d, h)| (hex::encode(d), HeadNote::from(h)))
            .collect(),
    })
    .map_err(|e| ClientError::InvalidArgument(format!("shared-state note: {e}")))?;
    fsutil::write_atomic(path, &json)
}

/// The head record's value for state `version` of digest `digest`.
fn head_value(version: u64, digest: &[u8; 32]) -> Vec<u8> {
    let mut v = Vec::with_capacity(48);
    v.extend_from_slice(HEAD_MAGIC);
    v.extend_from_slice(&version.to_be_bytes());
    v.extend_from_slice(digest);
    v
}

/// The version and digest a head record names, if it parses.
fn parse_head(value: &[u8]) -> Option<(u64, [u8; 32])> {
    let rest = value.strip_prefix(HEAD_MAGIC.as_slice())?;
    let (version, digest) = rest.split_first_chunk::<8>()?;
    Some((u64::from_be_bytes(*version), digest.try_into().ok()?))
}

/// The last state each device wrote, as state `version` of digest
/// `digest` at place `chain` says: its `heads`, and itself for its writer.
fn heads_of(chain: &Chain, version: u64, digest: [u8; 32]) -> BTreeMap<[u8; 16], Head> {
    let mut heads = chain.heads.clone();
    heads.insert(chain.writer, Head { version, digest });
    heads
}

/// Judges state `version` of digest `digest` at place `chain` (`None`: a
/// state written before the chain) against what device `device` saw, and
/// gives what it will have seen once it adopts it. Refused
/// ([`ClientError::SharedStateRolledBack`],
/// [`ClientError::SharedStateForked`]): an older version than the one
/// seen; another state at the version seen; a next version not written on
/// the state seen; a state that lacks a write this device heard of (a
/// device's last write older than, or other than, the one seen) or its
/// own last write; a state without a chain once one was seen.
pub(crate) fn accept(
    index: &str,
    device: &[u8; 16],
    seen: &Seen,
    version: u64,
    digest: [u8; 32],
    chain: Option<&Chain>,
) -> Result<Seen> {
    if version < seen.version {
        return Err(ClientError::SharedStateRolledBack {
            index: index.to_owned(),
            server: version,
            seen: seen.version,
        });
    }
    let forked = |reason: String| ClientError::SharedStateForked {
        index: index.to_owned(),
        reason,
    };
    let short = |d: &[u8]| hex::encode(&d[..8]);
    if let Some(d) = seen.digest {
        if version == seen.version && d != digest {
            return Err(forked(format!(
                "the server's version {version} is state {}, this device saw state {} at that \
                 version",
                short(&digest),
                short(&d)
            )));
        }
    }
    let Some(chain) = chain else {
        if seen.chained {
            return Err(forked(format!(
                "version {version} carries no chain of states (written by an older build, or \
                 put back from before the chain began) and this device already saw a chained \
                 one"
            )));
        }
        return Ok(Seen {
            version,
            digest: Some(digest),
            chained: false,
            heads: BTreeMap::new(),
            own: seen.own,
        });
    };
    if let Some(d) = seen.digest {
        if version == seen.version + 1 && chain.prev != d {
            return Err(forked(format!(
                "version {version} was not written on state {} that this device saw at version \
                 {}",
                short(&d),
                seen.version
            )));
        }
    }
    let heads = heads_of(chain, version, digest);
    let holds = |who: &[u8; 16], h: &Head| {
        heads
            .get(who)
            .is_some_and(|n| n.version > h.version || n == h)
    };
    if let Some(own) = &seen.own {
        if !holds(device, own) {
            return Err(forked(format!(
                "version {version} lacks this device's own last write (version {}, state {})",
                own.version,
                short(&own.digest)
            )));
        }
    }
    for (who, h) in &seen.heads {
        if !holds(who, h) {
            return Err(forked(format!(
                "version {version} lacks the write of device {} (version {}, state {}) that this \
                 device saw",
                short(who),
                h.version,
                short(&h.digest)
            )));
        }
    }
    Ok(Seen {
        version,
        digest: Some(digest),
        chained: true,
        own: heads.get(device).copied().or(seen.own),
        heads,
    })
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
        super::chunks::CONTENT => {
            let chunk_max = chunk_max(backend)?;
            super::chunks::get_state(backend, index, chunk_max, rest)
        }
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
    let (_, mut seen, _) = read_sidecar(sidecar)?;
    let mut device = [0u8; 16];
    rand_core::OsRng.fill_bytes(&mut device);
    // The original's writes stay among those seen; this device has none.
    seen.own = None;
    write_sidecar(sidecar, &device, &seen)
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
                digest: [0; 32],
                chain: None,
                profile,
            }));
        }
        let opened = get_value(backend, index, &state.value).and_then(|blob| {
            let digest = shared_digest(&blob);
            cipher
                .open_shared(index, state.version, &blob)
                .map(|o| (o, digest))
        });
        match opened {
            Ok(((state_, extras, chain), digest)) => {
                return Ok(Some(Fetched {
                    version: state.version,
                    opened: Some((state_, extras)),
                    digest,
                    chain,
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
    /// The digest of the sealed state (zeros: none).
    pub digest: [u8; 32],
    /// Its place in the chain of states (`None`: none, or a state of the
    /// format before the chain).
    pub chain: Option<Chain>,
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
    let (device, _, known) = read_sidecar(sidecar)?;
    save()?;
    if known {
        // What this device saw stays: the next session judges the
        // server's state against it.
        return Ok(());
    }
    // Without a digest: the first session takes the state it reads then
    // as the start of what this device saw.
    let seen = Seen {
        version,
        ..Seen::default()
    };
    write_sidecar(sidecar, &device, &seen)
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
            seen: Seen::default(),
            device,
            extras: SharedExtras::default(),
            staged: Vec::new(),
            sidecar,
            chunk_max: chunk_max(self.backend.as_mut())?,
        };
        if let Some(header) = header {
            // Only forward: an older header than the server's is not put
            // back (the passphrase changed on another device).
            let write = crate::profile::sync_header(&self.profile_dir, &header, &fetched.profile)?;
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
        let next = shared.seen.version + 1;
        let expected = shared.seen.version;
        let device = shared.device;
        // The chain: the state this one is written on, and the last write
        // of each device as that state said.
        let chain = Chain {
            prev: shared.seen.digest.unwrap_or([0; 32]),
            writer: shared.device,
            heads: shared.seen.heads.clone(),
        };
        let mut extras = shared.extras.clone();
        if !self.state.reserved.is_empty() {
            extras
                .reserved_by
                .insert(shared.device, self.state.reserved.clone());
        }
        let blob = self.cipher.seal_shared(
            &mut self.rng,
            &self.index,
            next,
            &self.state,
            &extras,
            &chain,
        )?;
        let digest = shared_digest(&blob);
        // Content-named chunks: the parts of the state in force that
        // did not change are not sent again (`chunks`).
        let (value, gone) = self.put_state(expected, &blob)?;
        let mut writes = vec![
            IndexRecordWrite {
                name: STATE_RECORD.into(),
                expected,
                value: Some(value),
            },
            IndexRecordWrite {
                name: HEAD_RECORD.into(),
                expected: ANY_VERSION,
                value: Some(head_value(next, &digest)),
            },
        ];
        writes.extend(staged);
        writes.extend(gone);
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
            let mine = Head {
                version: next,
                digest,
            };
            shared.seen = Seen {
                version: next,
                digest: Some(digest),
                chained: true,
                heads: heads_of(&chain, next, digest),
                own: Some(mine),
            };
            debug_assert_eq!(shared.seen.heads.get(&device), Some(&mine));
            shared.staged.clear();
        }
        Ok(())
    }

    /// Notes the version of the shared state the local copy now is.
    pub(super) fn note_version(&self) -> Result<()> {
        match &self.shared {
            Some(shared) => write_sidecar(&shared.sidecar, &shared.device, &shared.seen),
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
                let version = self.shared.as_ref().map_or(0, |s| s.seen.version);
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
        .join(crate::profile::INDEX_DIR)
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

#[cfg(test)]
mod tests {
    //! The judgement of a state against what a device saw, and the
    //! adoption of a state written before the chain.

    use super::*;

    const ME: [u8; 16] = [1; 16];
    const OTHER: [u8; 16] = [2; 16];

    /// State `version` written by `writer` on `prev` (a state `accept`
    /// took), with its digest.
    fn next(prev: &Seen, writer: [u8; 16], salt: u8) -> (u64, [u8; 32], Chain) {
        let chain = Chain {
            prev: prev.digest.unwrap_or([0; 32]),
            writer,
            heads: prev.heads.clone(),
        };
        let version = prev.version + 1;
        let mut digest = [salt; 32];
        digest[..8].copy_from_slice(&version.to_be_bytes());
        (version, digest, chain)
    }

    fn take(seen: &Seen, s: &(u64, [u8; 32], Chain)) -> Result<Seen> {
        accept("i", &ME, seen, s.0, s.1, Some(&s.2))
    }

    fn forked(r: Result<Seen>, what: &str) -> String {
        match r {
            Err(ClientError::SharedStateForked { reason, .. }) => reason,
            other => panic!("{what}: {other:?}"),
        }
    }

    #[test]
    fn a_device_takes_its_history_and_refuses_every_other() {
        // Both devices saw s1 (the other's); this device wrote s2.
        let s1 = next(&Seen::default(), OTHER, 0);
        let seen1 = take(&Seen::default(), &s1).unwrap();
        let s2 = next(&seen1, ME, 0);
        let mut seen2 = take(&seen1, &s2).unwrap();
        seen2.own = seen2.heads.get(&ME).copied();
        assert_eq!(seen2.own.map(|h| h.version), Some(2));
        // The same state again: nothing new.
        assert_eq!(take(&seen2, &s2).unwrap(), seen2);
        // The other device's next write on s2: taken.
        let s3 = next(&seen2, OTHER, 0);
        let seen3 = take(&seen2, &s3).unwrap();
        assert_eq!(seen3.own, seen2.own);

        // Forks from s1 (this device's s2 missing): at version 2, at 3
        // and further on.
        let f2 = next(&seen1, OTHER, 9);
        assert!(forked(take(&seen2, &f2), "fork at 2").contains("this device saw state"));
        let f2_seen = take(&seen1, &f2).unwrap();
        let f3 = next(&f2_seen, OTHER, 9);
        assert!(forked(take(&seen2, &f3), "fork at 3").contains("was not written on"));
        let f4 = next(&take(&f2_seen, &f3).unwrap(), OTHER, 9);
        assert!(forked(take(&seen2, &f4), "fork at 4").contains("own last write"));
        // A reader that saw s3 (another device's write after the fork
        // point) refuses a branch lacking it, also later on.
        let reader = [3; 16];
        let read = Seen {
            own: None,
            ..seen3.clone()
        };
        let g = |s: &(u64, [u8; 32], Chain)| accept("i", &reader, &read, s.0, s.1, Some(&s.2));
        assert!(forked(g(&f4), "reader").contains("was not written on"));
        let f5 = next(&take(&take(&f2_seen, &f3).unwrap(), &f4).unwrap(), OTHER, 9);
        assert!(forked(g(&f5), "reader").contains("lacks the write of device"));
        // Older: rolled back.
        assert!(matches!(
            take(&seen3, &s2),
            Err(ClientError::SharedStateRolledBack { .. })
        ));
    }

    #[test]
    fn a_state_before_the_chain_is_adopted_once() {
        // A note of a build before the chain: a version, no digest.
        let old = Seen {
            version: 4,
            ..Seen::default()
        };
        let seen = accept("i", &ME, &old, 4, [4; 32], None).unwrap();
        assert!(!seen.chained);
        assert_eq!(seen.digest, Some([4; 32]));
        // Chained from the next write on.
        let s5 = next(&seen, ME, 0);
        let seen5 = take(&seen, &s5).unwrap();
        assert!(seen5.chained);
        // Then a state without a chain is refused, at any version.
        forked(accept("i", &ME, &seen5, 5, [7; 32], None), "unchained at 5");
        let r = accept("i", &ME, &seen5, 6, [7; 32], None);
        assert!(forked(r, "unchained at 6").contains("no chain"));
    }

    /// A profile whose server holds a state of the format before the
    /// chain, and whose devices' notes have no digest (as a build before
    /// the chain left them): adopted once, chained by the next write,
    /// taken by the other device; an unchained state written after that
    /// is refused.
    #[test]
    fn a_profile_from_before_the_chain_is_adopted_once_and_chained_after() {
        use crate::{insecure, NetworkBackend, Profile, ServerBinding, DEFAULT_INDEX};
        use rand_core::OsRng;
        use sesame_core::Params;
        use sesame_server::{RunningServer, ServerConfig, TlsFiles, Tokens};

        let store = std::sync::Arc::new(sesame_store::MemoryStore::new());
        let certs = sesame_server::certs::localhost().unwrap();
        let token = Tokens::generate(&mut OsRng);
        let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
        config.tls = Some(TlsFiles {
            cert_pem: certs.cert_pem.into_bytes(),
            key_pem: certs.key_pem.into_bytes(),
        });
        config.tokens = Tokens::new().with("alice", &token).unwrap();
        let _server = RunningServer::start(config, store).unwrap();
        let binding = ServerBinding {
            url: _server.url(),
            token,
            ca_pem: Some(certs.ca_pem.into_bytes()),
            index_prefix: ServerBinding::fresh_prefix(&mut OsRng),
        };
        let tmp = tempfile::tempdir().unwrap();
        let mut backend = NetworkBackend::connect(&binding).unwrap();
        backend
            .create_index(DEFAULT_INDEX, "fast", &Params::new())
            .unwrap();
        let laptop = Profile::create_with_server(
            tmp.path().join("laptop"),
            "pw",
            "fast",
            &Params::new(),
            insecure::fast_kdf(),
            &binding,
        )
        .unwrap();
        let add = |p: &Profile, name: &str| {
            let file = tmp.path().join(name);
            std::fs::write(&file, format!("all {name}")).unwrap();
            let mut session = p.session(DEFAULT_INDEX).unwrap();
            session.add_documents(&[&file], &mut |_| {}).unwrap();
        };
        let all = |p: &Profile| {
            p.session(DEFAULT_INDEX)
                .unwrap()
                .search("all")
                .unwrap()
                .len()
        };
        add(&laptop, "a.txt");
        let remote = format!("{}{DEFAULT_INDEX}", binding.index_prefix);
        let names = [STATE_RECORD.to_owned(), HEAD_RECORD.to_owned()];
        let cipher = laptop.state_cipher();
        // Writes `state` as an unchained state at the record's next
        // version, and deletes the head record.
        let mut write_old = |state: &IndexState| {
            let now = backend
                .read_records(DEFAULT_INDEX, &names, &[])
                .unwrap()
                .unwrap();
            let version = now[0].version + 1;
            let blob = cipher
                .seal_shared_v1(
                    &mut OsRng,
                    DEFAULT_INDEX,
                    version,
                    state,
                    &SharedExtras::default(),
                )
                .unwrap();
            let mut value = vec![INLINE];
            value.extend_from_slice(&blob);
            let writes = vec![
                IndexRecordWrite {
                    name: STATE_RECORD.into(),
                    expected: now[0].version,
                    value: Some(value),
                },
                IndexRecordWrite {
                    name: HEAD_RECORD.into(),
                    expected: ANY_VERSION,
                    value: None,
                },
            ];
            assert!(backend
                .write_records(DEFAULT_INDEX, writes)
                .unwrap()
                .is_none());
            version
        };
        let sidecar = laptop.shared_sidecar(DEFAULT_INDEX);
        let note = |path: &Path| read_sidecar(path).unwrap();
        let (device, _, _) = note(&sidecar);
        let state = laptop.load_state(DEFAULT_INDEX).unwrap();
        let version = write_old(&state);
        let old_note = Seen {
            version,
            ..Seen::default()
        };
        write_sidecar(&sidecar, &device, &old_note).unwrap();

        // Adopted as it is, then chained by the next write.
        assert_eq!(all(&laptop), 1);
        assert!(!note(&sidecar).1.chained);
        add(&laptop, "b.txt");
        let seen = note(&sidecar).1;
        assert!(seen.chained && seen.own.is_some(), "{seen:?}");
        // The other device, joined now, takes the chained state.
        let mut join_binding = binding.clone();
        join_binding.index_prefix = String::new();
        let (phone, _) =
            Profile::join(tmp.path().join("phone"), "pw", None, &join_binding, &remote).unwrap();
        assert_eq!(all(&phone), 2);
        assert!(note(&phone.shared_sidecar(DEFAULT_INDEX)).1.chained);

        // An unchained state after the chain began is refused by both.
        let state = laptop.load_state(DEFAULT_INDEX).unwrap();
        write_old(&state);
        for p in [&laptop, &phone] {
            let err = p.session(DEFAULT_INDEX).unwrap_err();
            assert!(err.to_string().contains("no chain"), "{err}");
        }
    }

    #[test]
    fn a_state_of_the_format_before_the_chain_opens_without_one() {
        let cipher = StateCipher::new(&sesame_crypto::Key::from_bytes([5; 32]), "p");
        let state = IndexState::new("fast", &sesame_core::Params::new(), vec![1]);
        let extras = SharedExtras::default();
        let mut rng = rand_core::OsRng;
        let old = cipher
            .seal_shared_v1(&mut rng, "i", 3, &state, &extras)
            .unwrap();
        let (_, _, chain) = cipher.open_shared("i", 3, &old).unwrap();
        assert_eq!(chain, None);
        let chain = Chain {
            prev: [8; 32],
            writer: ME,
            heads: BTreeMap::new(),
        };
        let new = cipher
            .seal_shared(&mut rng, "i", 3, &state, &extras, &chain)
            .unwrap();
        assert_eq!(cipher.open_shared("i", 3, &new).unwrap().2, Some(chain));
        // The format's magic is bound: the old record relabelled as the
        // new format does not open.
        let mut relabelled = old.clone();
        relabelled[..8].copy_from_slice(b"SSMSHR02");
        assert!(cipher.open_shared("i", 3, &relabelled).is_err());
    }
}
