//! A large client state saved as a snapshot and a log of changes
//! (format 4), so that a save writes in proportion to what changed.
//!
//! Two files: the state file `indexes/NAME.state` is the small **head**,
//! `"SSMIDX04" || len(scheme) || scheme || AES-256-GCM-SIV(state key,
//! aad4, wire(Head))`, replaced atomically by every save; it names the
//! **log** `indexes/NAME.<log id>.statelog` and says how many records and
//! bytes of it belong to the state and the digest that chains them. The
//! log is `(u32 length || sealed record)*`: record 0 is the snapshot (the
//! encoded [`IndexState`]), each later record one save's changes
//! ([`Delta`]: the state's small fields whole, and the catalog's entries
//! put and removed since the save before). Record `i` is sealed under the
//! state key with the profile, index, scheme, log id, `i` and the digest
//! of the records before it in the associated data, and the head holds the
//! digest of all of them: a record dropped (the last one included),
//! played again, moved, or taken from another log or index does not open,
//! and the state is refused as a flipped byte is
//! ([`ClientError::StateCorrupt`]). Tested by
//! `state::tests::a_dropped_replayed_or_reordered_change_is_refused`.
//!
//! A save appends its record and syncs the log, then replaces the head:
//! a crash between the two leaves a record past the head's end, which is
//! not part of the state (the save did not complete) and is cut by the
//! next save. When the changes logged outgrow the snapshot, the next save
//! writes a new log (a new id) whose snapshot is the whole state, points
//! the head at it, then deletes the old log. What is not detected, as
//! for a format-3 file: a copy of both files put back whole is an older
//! state the client cannot tell from the current one on its own (a
//! profile on a server refuses it by the shared state's chain,
//! `docs/client.md`).

use super::*;
use std::io::{Seek, SeekFrom, Write};

/// Locks a mutex of the state, also one poisoned by a panic elsewhere
/// (what it guards is never left half changed).
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the head of a logged state says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Head {
    /// The log's identifier (random; names its file).
    pub log: [u8; 16],
    /// Records of the log that belong to the state (the snapshot and the
    /// changes after it).
    pub records: u64,
    /// Bytes of the log that belong to the state.
    pub bytes: u64,
    /// The chain digest of those records.
    pub digest: [u8; 32],
    /// Bytes of the snapshot (record 0).
    pub snapshot: u64,
}

/// Where the log of a state's file stands, as the state last saved to
/// or loaded from it left it.
#[derive(Debug)]
pub(super) struct LogAt {
    pub path: PathBuf,
    pub head: Head,
}

/// One save's changes: the state's fields but the catalog, and the
/// catalog's changes.
#[derive(Serialize)]
struct DeltaRef<'a> {
    scheme: &'a str,
    params: &'a Params,
    generation: u64,
    next_doc: u64,
    client: &'a [u8],
    pending: &'a [PendingRef],
    reserved: &'a [u64],
    garbage: &'a [u64],
    changes: &'a [Change],
}

/// [`DeltaRef`] as read back.
#[derive(Deserialize)]
struct Delta {
    scheme: String,
    params: Params,
    generation: u64,
    next_doc: u64,
    client: Vec<u8>,
    pending: Vec<PendingRef>,
    reserved: Vec<u64>,
    garbage: Vec<u64>,
    changes: Vec<Change>,
}

impl Drop for Delta {
    fn drop(&mut self) {
        self.client.zeroize();
    }
}

/// The log file of `head`'s state file `path` with log id `log`.
fn log_path(path: &Path, log: &[u8; 16]) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(".state").unwrap_or(&name);
    path.with_file_name(format!("{stem}.{}.statelog", hex::encode(log)))
}

/// Deletes the log files of the state file `path` but `keep`'s (what a
/// new snapshot, a state saved whole, or a removed index leaves);
/// failures only leave a file that takes room.
pub(crate) fn remove_logs(path: &Path, keep: Option<&[u8; 16]>) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let name = name.to_string_lossy();
    let stem = name.strip_suffix(".state").unwrap_or(&name);
    let prefix = format!("{stem}.");
    let kept = keep.map(|k| log_path(path, k));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let file = file.to_string_lossy();
        let ours = file
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(".statelog"))
            .is_some_and(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()));
        if ours && kept.as_deref() != Some(entry.path().as_path()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The digest chaining record `framed` after the records of digest
/// `prev`.
fn chain(prev: &[u8; 32], framed: &[u8]) -> [u8; 32] {
    sesame_crypto::hash::ro("sesame-client/state-log-chain/v1", &[prev, framed])
}

/// The digest before a log's first record.
fn start(log: &[u8; 16]) -> [u8; 32] {
    sesame_crypto::hash::ro("sesame-client/state-log-start/v1", &[log])
}

impl StateCipher {
    /// The associated data of record `seq` of log `log`, after records of
    /// digest `prev`.
    fn record_aad(
        &self,
        index: &str,
        scheme: &str,
        log: &[u8; 16],
        seq: u64,
        prev: &[u8; 32],
    ) -> Vec<u8> {
        let mut aad = self.aad(4, index, scheme);
        aad.extend_from_slice(b"record\0");
        aad.extend_from_slice(log);
        aad.extend_from_slice(&seq.to_be_bytes());
        aad.extend_from_slice(prev);
        aad
    }

    /// `u32 length || sealed` of record `seq` holding `plain`.
    fn frame(
        &self,
        rng: &mut dyn CryptoRngCore,
        index: &str,
        scheme: &str,
        head: &Head,
        plain: &[u8],
    ) -> Result<Vec<u8>> {
        let too_large = || ClientError::InvalidArgument("client state is too large".into());
        let aad = self.record_aad(index, scheme, &head.log, head.records, &head.digest);
        let sealed = self.aead.seal(rng, &aad, plain).map_err(|_| too_large())?;
        let len = u32::try_from(sealed.len()).map_err(|_| too_large())?;
        let mut framed = Vec::with_capacity(4 + sealed.len());
        framed.extend_from_slice(&len.to_be_bytes());
        framed.extend_from_slice(&sealed);
        Ok(framed)
    }

    /// The head file's bytes for `head`.
    fn head_file(
        &self,
        rng: &mut dyn CryptoRngCore,
        index: &str,
        scheme: &str,
        head: &Head,
    ) -> Result<Vec<u8>> {
        let scheme_len = u8::try_from(scheme.len()).map_err(|_| {
            ClientError::InvalidArgument(format!("scheme name {scheme:?} is too long"))
        })?;
        let sealed = self
            .aead
            .seal(rng, &self.aad(4, index, scheme), &wire::encode(head)?)
            .map_err(|_| ClientError::InvalidArgument("client state is too large".into()))?;
        let mut file = MAGIC_LOGGED.to_vec();
        file.push(scheme_len);
        file.extend_from_slice(scheme.as_bytes());
        file.extend_from_slice(&sealed);
        Ok(file)
    }

    /// The head the state file at `path` holds, if it opens.
    fn read_head(&self, path: &Path, index: &str, scheme: &str) -> Option<Head> {
        let file = std::fs::read(path).ok()?;
        let rest = file.strip_prefix(MAGIC_LOGGED.as_slice())?;
        let (said, sealed) = split_scheme(rest)?;
        if said != scheme {
            return None;
        }
        let plain = self.aead.open(&self.aad(4, index, scheme), sealed).ok()?;
        wire::decode(&plain).ok()
    }

    /// Starts a new log whose snapshot is `plain` (the encoded state) and
    /// points the head at it.
    pub(super) fn start_log(
        &self,
        rng: &mut dyn CryptoRngCore,
        path: &Path,
        index: &str,
        scheme: &str,
        plain: &[u8],
    ) -> Result<Head> {
        let mut log = [0u8; 16];
        rng.fill_bytes(&mut log);
        let empty = Head {
            log,
            records: 0,
            bytes: 0,
            digest: start(&log),
            snapshot: 0,
        };
        let framed = self.frame(rng, index, scheme, &empty, plain)?;
        fsutil::write_atomic(&log_path(path, &log), &framed)?;
        let head = Head {
            log,
            records: 1,
            bytes: framed.len() as u64,
            digest: chain(&empty.digest, &framed),
            snapshot: framed.len() as u64,
        };
        fsutil::write_atomic(path, &self.head_file(rng, index, scheme, &head)?)?;
        Ok(head)
    }

    /// Appends `state`'s changes since the save `at` records (`changes`
    /// of its catalog) to the log and replaces the head; `None` when a
    /// whole save is due instead: the file is not the one `at` knows, or
    /// the changes would outgrow the snapshot.
    pub(super) fn append_change(
        &self,
        rng: &mut dyn CryptoRngCore,
        at: &LogAt,
        index: &str,
        state: &IndexState,
        changes: &[Change],
    ) -> Result<Option<Head>> {
        let head = at.head;
        if self.read_head(&at.path, index, &state.scheme) != Some(head) {
            return Ok(None);
        }
        let plain = Zeroizing::new(wire::encode(&DeltaRef {
            scheme: &state.scheme,
            params: &state.params,
            generation: state.generation,
            next_doc: state.next_doc,
            client: &state.client,
            pending: &state.pending,
            reserved: &state.reserved,
            garbage: &state.garbage,
            changes,
        })?);
        let logged = head.bytes - head.snapshot + plain.len() as u64;
        if logged > head.snapshot {
            return Ok(None);
        }
        let framed = self.frame(rng, index, &state.scheme, &head, &plain)?;
        let log = log_path(&at.path, &head.log);
        let io = |e: std::io::Error| ClientError::io("write", &log, &e);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&log)
            .map_err(io)?;
        // A record past the head's end is a save that did not complete.
        f.set_len(head.bytes).map_err(io)?;
        f.seek(SeekFrom::Start(head.bytes)).map_err(io)?;
        f.write_all(&framed).map_err(io)?;
        f.sync_data().map_err(io)?;
        let next = Head {
            records: head.records + 1,
            bytes: head.bytes + framed.len() as u64,
            digest: chain(&head.digest, &framed),
            ..head
        };
        fsutil::write_atomic(&at.path, &self.head_file(rng, index, &state.scheme, &next)?)?;
        Ok(Some(next))
    }

    /// Reads a logged state whose head file holds `sealed` (after the
    /// magic and the scheme); `None` if anything does not open or match.
    pub(super) fn load_logged(
        &self,
        path: &Path,
        index: &str,
        scheme: &str,
        sealed: &[u8],
    ) -> Option<IndexState> {
        let plain = self.aead.open(&self.aad(4, index, scheme), sealed).ok()?;
        let head: Head = wire::decode(&plain).ok()?;
        let bytes = std::fs::read(log_path(path, &head.log)).ok()?;
        let body = bytes.get(..usize::try_from(head.bytes).ok()?)?;
        let mut digest = start(&head.log);
        let mut seq = 0u64;
        let mut rest = body;
        let mut state: Option<IndexState> = None;
        while !rest.is_empty() {
            let (len, tail) = rest.split_first_chunk::<4>()?;
            let len = usize::try_from(u32::from_be_bytes(*len)).ok()?;
            let (record, tail) = tail.split_at_checked(len)?;
            let framed = rest.get(..4 + len)?;
            let aad = self.record_aad(index, scheme, &head.log, seq, &digest);
            let plain = Zeroizing::new(self.aead.open(&aad, record).ok()?);
            match state.as_mut() {
                None => state = Some(wire::decode::<IndexState>(&plain).ok()?),
                Some(s) => {
                    let mut d: Delta = wire::decode(&plain).ok()?;
                    if d.scheme != scheme {
                        return None;
                    }
                    s.params = d.params.clone();
                    s.generation = d.generation;
                    s.next_doc = d.next_doc;
                    s.client = std::mem::take(&mut d.client);
                    s.pending = std::mem::take(&mut d.pending);
                    s.reserved = std::mem::take(&mut d.reserved);
                    s.garbage = std::mem::take(&mut d.garbage);
                    s.catalog.apply(std::mem::take(&mut d.changes));
                }
            }
            digest = chain(&digest, framed);
            seq += 1;
            rest = tail;
        }
        if seq != head.records || digest != head.digest {
            return None;
        }
        let state = state?;
        if state.scheme != scheme {
            return None;
        }
        *lock(&state.catalog.changes) = Some(Vec::new());
        *lock(&state.log) = Some(LogAt {
            path: path.to_path_buf(),
            head,
        });
        Some(state)
    }
}
