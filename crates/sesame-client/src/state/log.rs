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
    /// The format of the log: 4 (read, never appended to) or 6.
    pub format: u8,
}

/// One save's changes to the catalog in format 6: the runs and overlay
/// whole when the save wrote runs (then `changes` is empty), and the
/// entries changed.
#[derive(Serialize)]
struct CatalogDeltaRef<'a> {
    runs: Option<LocalCatalog<'a>>,
    changes: &'a [Change],
}

/// [`CatalogDeltaRef`] as read back.
#[derive(Deserialize)]
struct CatalogDelta {
    runs: Option<CatalogLocal>,
    changes: Vec<Change>,
}

/// One save's changes: the state's fields but the catalog, and the
/// catalog's changes (format 6).
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
    catalog: CatalogDeltaRef<'a>,
}

/// [`DeltaRef`] as read back: `C` is the catalog's changes, a list of
/// them in format 4, [`CatalogDelta`] in format 6.
#[derive(Deserialize)]
struct Delta<C> {
    scheme: String,
    params: Params,
    generation: u64,
    next_doc: u64,
    client: Vec<u8>,
    pending: Vec<PendingRef>,
    reserved: Vec<u64>,
    garbage: Vec<u64>,
    changes: C,
}

impl<C> Drop for Delta<C> {
    fn drop(&mut self) {
        self.client.zeroize();
    }
}

/// The log file of `head`'s state file `path` with log id `log`.
fn log_path(path: &Path, log: &[u8; 16]) -> PathBuf {
    sibling_path(path, log, "statelog")
}

/// The file `STEM.<id in hex>.SUFFIX` beside the state file `state`
/// (`STEM.state`): a log of changes or a catalog run.
pub(super) fn sibling_path(state: &Path, id: &[u8; 16], suffix: &str) -> PathBuf {
    let name = state
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(".state").unwrap_or(&name);
    state.with_file_name(format!("{stem}.{}.{suffix}", hex::encode(id)))
}

/// Deletes the log files of the state file `path` but `keep`'s (what a
/// new snapshot, a state saved whole, or a removed index leaves);
/// failures only leave a file that takes room.
pub(crate) fn remove_logs(path: &Path, keep: Option<&[u8; 16]>) {
    let kept: Vec<PathBuf> = keep.iter().map(|k| log_path(path, k)).collect();
    remove_siblings(path, "statelog", &kept);
}

/// Deletes the files `STEM.<32 hex digits>.SUFFIX` beside the state file
/// `state` but those in `kept`; failures only leave a file that takes
/// room.
pub(super) fn remove_siblings(state: &Path, suffix: &str, kept: &[PathBuf]) {
    let (Some(dir), Some(name)) = (state.parent(), state.file_name()) else {
        return;
    };
    let name = name.to_string_lossy();
    let stem = name.strip_suffix(".state").unwrap_or(&name);
    let prefix = format!("{stem}.");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let file = file.to_string_lossy();
        let ours = file
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(suffix))
            .and_then(|rest| rest.strip_suffix('.'))
            .is_some_and(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()));
        if ours && !kept.contains(&entry.path()) {
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
    /// The associated data of record `seq` of log `log` of format
    /// `format`, after records of digest `prev`.
    #[allow(clippy::too_many_arguments)]
    fn record_aad(
        &self,
        format: u8,
        index: &str,
        scheme: &str,
        log: &[u8; 16],
        seq: u64,
        prev: &[u8; 32],
    ) -> Vec<u8> {
        let mut aad = self.aad(format, index, scheme);
        aad.extend_from_slice(b"record\0");
        aad.extend_from_slice(log);
        aad.extend_from_slice(&seq.to_be_bytes());
        aad.extend_from_slice(prev);
        aad
    }

    /// `u32 length || sealed` of record `seq` holding `plain`.
    #[allow(clippy::too_many_arguments)]
    fn frame(
        &self,
        rng: &mut dyn CryptoRngCore,
        format: u8,
        index: &str,
        scheme: &str,
        head: &Head,
        plain: &[u8],
    ) -> Result<Vec<u8>> {
        let too_large = || ClientError::InvalidArgument("client state is too large".into());
        let aad = self.record_aad(format, index, scheme, &head.log, head.records, &head.digest);
        let sealed = self.aead.seal(rng, &aad, plain).map_err(|_| too_large())?;
        let len = u32::try_from(sealed.len()).map_err(|_| too_large())?;
        let mut framed = Vec::with_capacity(4 + sealed.len());
        framed.extend_from_slice(&len.to_be_bytes());
        framed.extend_from_slice(&sealed);
        Ok(framed)
    }

    /// The head file's bytes for `head`, in format `format`.
    fn head_file(
        &self,
        rng: &mut dyn CryptoRngCore,
        format: u8,
        index: &str,
        scheme: &str,
        head: &Head,
    ) -> Result<Vec<u8>> {
        let scheme_len = u8::try_from(scheme.len()).map_err(|_| {
            ClientError::InvalidArgument(format!("scheme name {scheme:?} is too long"))
        })?;
        let sealed = self
            .aead
            .seal(rng, &self.aad(format, index, scheme), &wire::encode(head)?)
            .map_err(|_| ClientError::InvalidArgument("client state is too large".into()))?;
        let magic = if format == 4 {
            MAGIC_LOGGED_V4
        } else {
            MAGIC_LOGGED
        };
        let mut file = magic.to_vec();
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
        let plain = self.aead.open(&self.aad(6, index, scheme), sealed).ok()?;
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
        self.start_log_as(rng, 6, path, index, scheme, plain)
    }

    /// [`StateCipher::start_log`] in format `format` (4: the format
    /// before the catalog on disk, written by tests of its migration).
    pub(super) fn start_log_as(
        &self,
        rng: &mut dyn CryptoRngCore,
        format: u8,
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
        let framed = self.frame(rng, format, index, scheme, &empty, plain)?;
        fsutil::write_atomic(&log_path(path, &log), &framed)?;
        let head = Head {
            log,
            records: 1,
            bytes: framed.len() as u64,
            digest: chain(&empty.digest, &framed),
            snapshot: framed.len() as u64,
        };
        fsutil::write_atomic(path, &self.head_file(rng, format, index, scheme, &head)?)?;
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
        flushed: bool,
    ) -> Result<Option<Head>> {
        let head = at.head;
        if at.format != 6 || self.read_head(&at.path, index, &state.scheme) != Some(head) {
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
            catalog: CatalogDeltaRef {
                runs: flushed.then_some(LocalCatalog(&state.catalog)),
                changes,
            },
        })?);
        let logged = head.bytes - head.snapshot + plain.len() as u64;
        if logged > head.snapshot {
            return Ok(None);
        }
        let framed = self.frame(rng, 6, index, &state.scheme, &head, &plain)?;
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
        fsutil::write_atomic(
            &at.path,
            &self.head_file(rng, 6, index, &state.scheme, &next)?,
        )?;
        Ok(Some(next))
    }

    /// Reads a logged state of format `format` (4 or 6) whose head file
    /// holds `sealed` (after the magic and the scheme). Anything that
    /// does not open or match is [`ClientError::StateCorrupt`]; a run of
    /// the catalog missing or not the one named is refused as module
    /// `runs` says.
    pub(super) fn load_logged(
        &self,
        path: &Path,
        index: &str,
        format: u8,
        scheme: &str,
        sealed: &[u8],
    ) -> Result<IndexState> {
        let corrupt = || ClientError::StateCorrupt {
            index: index.to_owned(),
            path: PathBuf::from(path),
        };
        let (mut state, head, runs, changes) = self
            .read_logged(path, index, format, scheme, sealed)
            .ok_or_else(corrupt)?;
        if let Some(local) = runs {
            let mut catalog = Catalog::from_local(local, self.run_store(path, index))?;
            catalog.apply(changes);
            state.catalog = catalog;
        }
        *lock(&state.catalog.changes) = Some(Vec::new());
        *lock(&state.log) = Some(LogAt {
            path: path.to_path_buf(),
            head,
            format,
        });
        Ok(state)
    }

    /// The records of a logged state: the state (in format 6 without its
    /// catalog), its head, and in format 6 the catalog's last runs and
    /// overlay and the changes after them (opened by the caller, once:
    /// runs named by earlier records may since have been merged away).
    #[allow(clippy::type_complexity)]
    fn read_logged(
        &self,
        path: &Path,
        index: &str,
        format: u8,
        scheme: &str,
        sealed: &[u8],
    ) -> Option<(IndexState, Head, Option<CatalogLocal>, Vec<Change>)> {
        let plain = self
            .aead
            .open(&self.aad(format, index, scheme), sealed)
            .ok()?;
        let head: Head = wire::decode(&plain).ok()?;
        let bytes = std::fs::read(log_path(path, &head.log)).ok()?;
        let body = bytes.get(..usize::try_from(head.bytes).ok()?)?;
        let mut digest = start(&head.log);
        let mut seq = 0u64;
        let mut rest = body;
        let mut state: Option<IndexState> = None;
        let mut runs: Option<CatalogLocal> = None;
        let mut changes: Vec<Change> = Vec::new();
        while !rest.is_empty() {
            let (len, tail) = rest.split_first_chunk::<4>()?;
            let len = usize::try_from(u32::from_be_bytes(*len)).ok()?;
            let (record, tail) = tail.split_at_checked(len)?;
            let framed = rest.get(..4 + len)?;
            let aad = self.record_aad(format, index, scheme, &head.log, seq, &digest);
            let plain = Zeroizing::new(self.aead.open(&aad, record).ok()?);
            match state.as_mut() {
                None if format == 6 => {
                    let (s, local) = wire::decode::<LocalState>(&plain).ok()?.split();
                    state = Some(s);
                    runs = Some(local);
                }
                None => state = Some(wire::decode::<IndexState>(&plain).ok()?),
                Some(s) => {
                    let catalog = if format == 6 {
                        let mut d: Delta<CatalogDelta> = wire::decode(&plain).ok()?;
                        let c = std::mem::replace(
                            &mut d.changes,
                            CatalogDelta {
                                runs: None,
                                changes: Vec::new(),
                            },
                        );
                        s.take_delta(&mut d, scheme)?;
                        if c.runs.is_some() {
                            runs = c.runs;
                            changes.clear();
                        }
                        changes.extend(c.changes);
                        None
                    } else {
                        let mut d: Delta<Vec<Change>> = wire::decode(&plain).ok()?;
                        s.take_delta(&mut d, scheme)?;
                        Some(std::mem::take(&mut d.changes))
                    };
                    if let Some(c) = catalog {
                        s.catalog.apply(c);
                    }
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
        Some((state, head, runs, changes))
    }
}

impl IndexState {
    /// Takes a logged save's fields but the catalog; `None` when the
    /// record is of another scheme.
    fn take_delta<C>(&mut self, d: &mut Delta<C>, scheme: &str) -> Option<()> {
        if d.scheme != scheme {
            return None;
        }
        self.params = d.params.clone();
        self.generation = d.generation;
        self.next_doc = d.next_doc;
        self.client = std::mem::take(&mut d.client);
        self.pending = std::mem::take(&mut d.pending);
        self.reserved = std::mem::take(&mut d.reserved);
        self.garbage = std::mem::take(&mut d.garbage);
        Some(())
    }
}
