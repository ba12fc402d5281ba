//! The write-ahead journal of a redb store: one `fdatasync` per commit.
//!
//! A durable redb commit costs two `fdatasync`s (two-phase commit, kept
//! because a commit slot's validity must not rest on a non-cryptographic
//! checksum over values that clients choose). With the journal on
//! ([`crate::RedbStore::set_journal`]), a commit's writes (the puts and
//! deletes of the batches whose conditions held) are appended to the file
//! `NAME-journal` beside the store as one record and that file alone is
//! synced; the redb transaction is then committed with
//! `Durability::None` (visible to readers, not yet on disk) and the commit
//! acknowledged. Every [`CHECKPOINT_COMMITS`] commits or
//! [`CHECKPOINT_BYTES`] of journal, whichever comes first, a commit is
//! made durable the old way (a *checkpoint*) and the journal is reset.
//!
//! A record is `seq (u64) | length (u32) | payload | mac (32 bytes)`, the
//! MAC an HMAC-SHA-256 ([`KeyedHash`]) under a random key kept in the redb
//! file, over the previous record's MAC (the header's for the first), the
//! sequence number and the payload: a record cannot be forged from values
//! a client chose, moved, dropped from the middle, or carried from another
//! store or another epoch (each checkpoint draws a new random epoch, which
//! the header carries and its MAC binds). What the redb file holds (the
//! key, the epoch, the previous epoch and the last sequence number
//! applied) is written in the same transactions as the data.
//!
//! On open, the records after the sequence number the redb file holds are
//! applied in order and made durable in one checkpoint, and the journal is
//! reset. A torn last record (shorter than its length, or failing its MAC
//! with nothing after it) is the append of a commit that was never
//! acknowledged and is dropped; a record that fails its MAC with more
//! bytes after it, or a journal of an epoch the redb file does not know,
//! is refused with [`Error::StoreCorrupt`] naming the journal. A journal
//! of the previous epoch is what a kill between a checkpoint and the
//! journal's reset leaves: every record in it was applied by that
//! checkpoint, and it is discarded.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rand_core::{OsRng, RngCore};
use redb::{Database, Table, TableDefinition, WriteTransaction};
use sesame_core::{Error, Result, WriteOp};
use sesame_crypto::{Key, KeyedHash};
use subtle::ConstantTimeEq;

use crate::redb_error::from_redb;

/// The metadata table of a redb store (`redb_store::META`).
pub(crate) const META: TableDefinition<&str, &str> = TableDefinition::new("sesame.meta");
/// The data table of a redb store (`redb_store::DATA`).
pub(crate) const DATA: TableDefinition<&[u8], &[u8]> = TableDefinition::new("sesame.data");

const KEY_KEY: &str = "sesame.journal.key";
const EPOCH_KEY: &str = "sesame.journal.epoch";
const PREVIOUS_KEY: &str = "sesame.journal.previous";
const SEQ_KEY: &str = "sesame.journal.seq";
const RESET_KEY: &str = "sesame.journal.reset";

const MAGIC: &[u8; 8] = b"SESJRNL1";
const EPOCH_LEN: usize = 16;
const MAC_LEN: usize = 32;
/// Magic, epoch, base sequence number, MAC.
const HEADER_LEN: usize = 8 + EPOCH_LEN + 8 + MAC_LEN;
/// Sequence number and payload length.
const RECORD_HEAD: usize = 8 + 4;

const HEADER_DOMAIN: &str = "sesame-store/journal/header";
const RECORD_DOMAIN: &str = "sesame-store/journal/record";

/// A checkpoint after this many journaled commits: the file grows by the
/// pages of the commits since the last checkpoint (redb reuses the pages
/// they free only after a durable commit), and a checkpoint costs three
/// `fdatasync`s against one, so 64 keeps the growth to a few MB and the
/// checkpoints' cost under 4 % of the syncs.
pub const CHECKPOINT_COMMITS: u64 = 64;
/// A checkpoint once the journal holds this many bytes: bounds the
/// journal's size and what an open replays in one transaction. (No
/// bound in time: a journaled commit is as durable as a checkpointed
/// one, and what an open replays is bounded by these two.)
pub const CHECKPOINT_BYTES: u64 = 8 << 20;

/// Where a test may stop a commit (feature `test-suite`).
#[cfg(feature = "test-suite")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JournalPoint {
    /// A commit's record is synced; its redb transaction is not committed.
    Synced,
    /// A checkpoint is durable; the journal is not reset yet.
    Checkpointed,
}

#[cfg(feature = "test-suite")]
static HOOK: std::sync::OnceLock<fn(JournalPoint)> = std::sync::OnceLock::new();

/// Calls `hook` at each [`JournalPoint`] of every journaled store of this
/// process (for crash tests; set once).
#[cfg(feature = "test-suite")]
pub fn set_journal_hook(hook: fn(JournalPoint)) {
    let _ = HOOK.set(hook);
}

#[cfg(feature = "test-suite")]
fn at(point: JournalPoint) {
    if let Some(hook) = HOOK.get() {
        hook(point);
    }
}

#[cfg(not(feature = "test-suite"))]
fn at(_point: ()) {}

#[cfg(feature = "test-suite")]
const SYNCED: JournalPoint = JournalPoint::Synced;
#[cfg(not(feature = "test-suite"))]
const SYNCED: () = ();
#[cfg(feature = "test-suite")]
const CHECKPOINTED: JournalPoint = JournalPoint::Checkpointed;
#[cfg(not(feature = "test-suite"))]
const CHECKPOINTED: () = ();

/// The journal's file beside the store at `store`: `NAME-journal`.
pub fn journal_path(store: &Path) -> PathBuf {
    let mut name = store.file_name().unwrap_or_default().to_os_string();
    name.push("-journal");
    store.with_file_name(name)
}

/// What the redb file holds about its journal.
struct State {
    key: Key<32>,
    epoch: [u8; EPOCH_LEN],
    previous: Option<[u8; EPOCH_LEN]>,
    /// The last epoch whose journal was known reset (durably).
    reset: Option<[u8; EPOCH_LEN]>,
    seq: u64,
}

/// The journal of an open store.
pub(crate) struct Journal {
    file: File,
    label: String,
    mac: KeyedHash,
    epoch: [u8; EPOCH_LEN],
    /// The epoch of the header on disk.
    file_epoch: [u8; EPOCH_LEN],
    /// The MAC of the last record (of the header when there is none).
    chain: [u8; MAC_LEN],
    /// The sequence number of the last record (the base when none).
    seq: u64,
    /// Bytes of the file that hold the header and synced records.
    len: u64,
    commits: u64,
    /// Bytes may lie after `len` (a failed append): cut before the next.
    cut: bool,
    /// The file still holds an older epoch (a failed reset): the next
    /// commit is a checkpoint.
    stale: bool,
}

/// Where the journal stood before an append, to take the append back.
pub(crate) struct Mark {
    chain: [u8; MAC_LEN],
    seq: u64,
    len: u64,
}

impl Journal {
    /// Whether a commit was journaled since the last checkpoint (or the
    /// last reset failed).
    pub(crate) fn dirty(&self) -> bool {
        self.commits > 0 || self.stale
    }

    /// Whether the next commit should be a checkpoint.
    pub(crate) fn due(&self) -> bool {
        self.stale || self.commits >= CHECKPOINT_COMMITS || self.len >= CHECKPOINT_BYTES
    }

    /// Records in `txn` the sequence number of the record about to be
    /// appended.
    pub(crate) fn stamp(&self, txn: &WriteTransaction) -> Result<()> {
        let mut meta = txn.open_table(META).map_err(|e| self.redb(e))?;
        meta.insert(SEQ_KEY, (self.seq + 1).to_string().as_str())
            .map_err(|e| self.redb(e))?;
        Ok(())
    }

    /// Appends one record holding `payload` and syncs it; returns where
    /// the journal stood before, for [`Journal::take_back`].
    pub(crate) fn append(&mut self, payload: &[u8]) -> Result<Mark> {
        let mark = Mark {
            chain: self.chain,
            seq: self.seq,
            len: self.len,
        };
        if self.cut {
            self.cut_to(self.len)?;
        }
        let len = u32::try_from(payload.len()).map_err(|_| {
            Error::InvalidArgument(format!(
                "{}: a commit of {} bytes does not fit one journal record (4 GiB)",
                self.label,
                payload.len()
            ))
        })?;
        let seq = self.seq + 1;
        let mac = record_mac(&self.mac, &self.chain, seq, payload);
        let mut record = Vec::with_capacity(RECORD_HEAD + payload.len() + MAC_LEN);
        record.extend_from_slice(&seq.to_be_bytes());
        record.extend_from_slice(&len.to_be_bytes());
        record.extend_from_slice(payload);
        record.extend_from_slice(&mac);
        let written = self
            .file
            .write_all_at(&record, self.len)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = written {
            // Cut now, or before the next append.
            self.cut = true;
            let _ = self.cut_to(self.len);
            return Err(self.io(e));
        }
        self.len += record.len() as u64;
        self.chain = mac;
        self.seq = seq;
        self.commits += 1;
        at(SYNCED);
        Ok(mark)
    }

    /// Takes back the append that followed `mark` (its redb commit
    /// failed): the record is cut from the file, or, should that fail, the
    /// next append cuts it first.
    pub(crate) fn take_back(&mut self, mark: Mark) {
        self.chain = mark.chain;
        self.seq = mark.seq;
        self.len = mark.len;
        self.cut = self.cut_to(mark.len).is_err();
    }

    /// Writes into `txn` a new epoch for the checkpoint it makes; once it is
    /// committed, [`Journal::reset`] starts the journal of that epoch.
    pub(crate) fn checkpoint(&self, txn: &WriteTransaction) -> Result<[u8; EPOCH_LEN]> {
        let epoch = random_epoch();
        let mut meta = txn.open_table(META).map_err(|e| self.redb(e))?;
        // The epoch of the file on disk (the current one, unless a reset
        // failed): a journal of the previous epoch is discarded on open.
        write_epoch(&mut meta, &epoch, Some(&self.file_epoch), self.seq)
            .map_err(|e| self.redb(e))?;
        Ok(epoch)
    }

    /// Starts the journal of `epoch` (its checkpoint is durable).
    pub(crate) fn reset(&mut self, epoch: [u8; EPOCH_LEN]) -> Result<()> {
        at(CHECKPOINTED);
        self.epoch = epoch;
        self.stale = true;
        let head = header(&self.mac, &epoch, self.seq);
        self.reset_file(&head)?;
        self.file_epoch = epoch;
        self.chain = header_mac(&head);
        self.len = HEADER_LEN as u64;
        self.commits = 0;
        self.cut = false;
        self.stale = false;
        Ok(())
    }

    /// Records in the redb file, durably, that the journal of the current
    /// epoch was reset: a journal of the previous epoch found beside the
    /// file from then on is a restored older copy, and is refused rather
    /// than discarded (its epoch's records were applied, but the current
    /// epoch's records, which it stands in place of, would be lost).
    pub(crate) fn confirm(&self, db: &Database) -> Result<()> {
        confirm(db, &self.file_epoch, &self.label)
    }

    fn cut_to(&mut self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| self.io(e))?;
        self.cut = false;
        Ok(())
    }

    fn io(&self, e: std::io::Error) -> Error {
        from_redb(&self.label, redb::Error::Io(e))
    }

    fn redb(&self, e: impl Into<redb::Error>) -> Error {
        from_redb(&self.label, e)
    }
}

/// Appends `op` to a record's payload.
pub(crate) fn encode_op(payload: &mut Vec<u8>, op: &WriteOp) {
    match op {
        WriteOp::Put { key, value } => {
            payload.push(1);
            push_bytes(payload, key);
            push_bytes(payload, value);
        }
        WriteOp::Delete { key } => {
            payload.push(0);
            push_bytes(payload, key);
        }
    }
}

fn push_bytes(payload: &mut Vec<u8>, bytes: &[u8]) {
    // A value longer than 4 GiB is refused by redb before the record is
    // written (its limit is 3 GiB).
    payload.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    payload.extend_from_slice(bytes);
}

/// Applies a verified record's payload to `table`.
fn apply(table: &mut Table<&[u8], &[u8]>, mut payload: &[u8], label: &str) -> Result<()> {
    let malformed = || {
        Error::StoreCorrupt(format!(
            "{label}: a journal record passed its MAC but its payload is malformed; \
             the journal was written by another build"
        ))
    };
    fn take<'a>(payload: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = payload.split_at_checked(n)?;
        *payload = rest;
        Some(head)
    }
    fn bytes<'a>(payload: &mut &'a [u8]) -> Option<&'a [u8]> {
        let len = take(payload, 4)?;
        let len = u32::from_be_bytes(len.try_into().ok()?) as usize;
        take(payload, len)
    }
    while let Some(tag) = take(&mut payload, 1) {
        let key = bytes(&mut payload).ok_or_else(malformed)?;
        match tag[0] {
            1 => {
                let value = bytes(&mut payload).ok_or_else(malformed)?;
                table.insert(key, value).map_err(|e| from_redb(label, e))?;
            }
            0 => {
                table.remove(key).map_err(|e| from_redb(label, e))?;
            }
            _ => return Err(malformed()),
        }
    }
    Ok(())
}

fn random_epoch() -> [u8; EPOCH_LEN] {
    let mut epoch = [0u8; EPOCH_LEN];
    OsRng.fill_bytes(&mut epoch);
    epoch
}

fn header(mac: &KeyedHash, epoch: &[u8; EPOCH_LEN], base: u64) -> Vec<u8> {
    let mut header = Vec::with_capacity(HEADER_LEN);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(epoch);
    header.extend_from_slice(&base.to_be_bytes());
    let tag = mac.hash(HEADER_DOMAIN, &[&header]);
    header.extend_from_slice(&tag);
    header
}

fn header_mac(header: &[u8]) -> [u8; MAC_LEN] {
    let mut mac = [0u8; MAC_LEN];
    mac.copy_from_slice(&header[HEADER_LEN - MAC_LEN..HEADER_LEN]);
    mac
}

fn record_mac(mac: &KeyedHash, chain: &[u8; MAC_LEN], seq: u64, payload: &[u8]) -> [u8; MAC_LEN] {
    mac.hash(RECORD_DOMAIN, &[chain, &seq.to_be_bytes(), payload])
}

fn write_epoch(
    meta: &mut Table<&str, &str>,
    epoch: &[u8; EPOCH_LEN],
    previous: Option<&[u8; EPOCH_LEN]>,
    seq: u64,
) -> std::result::Result<(), redb::StorageError> {
    meta.insert(EPOCH_KEY, hex::encode(epoch).as_str())?;
    if let Some(previous) = previous {
        meta.insert(PREVIOUS_KEY, hex::encode(previous).as_str())?;
    }
    meta.insert(SEQ_KEY, seq.to_string().as_str())?;
    Ok(())
}

/// Reads the journal state the redb file holds (`None`: it never had a
/// journal).
fn read_state(db: &Database, label: &str) -> Result<Option<State>> {
    let map = |e: redb::Error| from_redb(label, e);
    let txn = db.begin_read().map_err(|e| map(e.into()))?;
    let meta = txn.open_table(META).map_err(|e| map(e.into()))?;
    let get = |key: &str| -> Result<Option<String>> {
        Ok(meta
            .get(key)
            .map_err(|e| map(e.into()))?
            .map(|v| v.value().to_string()))
    };
    let Some(key) = get(KEY_KEY)? else {
        return Ok(None);
    };
    let bad = |what: &str| {
        Error::StoreCorrupt(format!(
            "{label}: the journal's {what} in table sesame.meta is malformed"
        ))
    };
    let fixed =
        |text: &str, what: &str| -> Result<Vec<u8>> { hex::decode(text).map_err(|_| bad(what)) };
    let key = Key::<32>::from_slice(&fixed(&key, "key")?).map_err(|_| bad("key"))?;
    let epoch = get(EPOCH_KEY)?.ok_or_else(|| bad("epoch"))?;
    let epoch: [u8; EPOCH_LEN] = fixed(&epoch, "epoch")?
        .try_into()
        .map_err(|_| bad("epoch"))?;
    let previous = match get(PREVIOUS_KEY)? {
        Some(p) => Some(
            fixed(&p, "previous epoch")?
                .try_into()
                .map_err(|_| bad("previous epoch"))?,
        ),
        None => None,
    };
    let reset = match get(RESET_KEY)? {
        Some(p) => Some(
            fixed(&p, "reset epoch")?
                .try_into()
                .map_err(|_| bad("reset epoch"))?,
        ),
        None => None,
    };
    let seq = get(SEQ_KEY)?
        .ok_or_else(|| bad("sequence number"))?
        .parse()
        .map_err(|_| bad("sequence number"))?;
    Ok(Some(State {
        key,
        epoch,
        previous,
        reset,
        seq,
    }))
}

/// The verified records of a journal to apply, and whether its file
/// needs a checkpoint and a reset.
struct Replay {
    /// (sequence number, payload) of every record after the state's.
    records: Vec<(u64, Vec<u8>)>,
    /// The file is exactly the header of the current epoch: nothing to do.
    clean: bool,
    /// The epoch of the file's header, where it was accepted.
    epoch: Option<[u8; EPOCH_LEN]>,
}

/// Reads and checks the journal at `path` against `state`.
fn read_journal(path: &Path, state: &State, mac: &KeyedHash) -> Result<Replay> {
    let label = format!("journal {}", path.display());
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut file) => {
            file.read_to_end(&mut bytes)
                .map_err(|e| Error::StoreIo(format!("{label}: {e}")))?;
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(Error::StoreIo(format!("{label}: {e}"))),
    }
    let empty = Replay {
        records: Vec::new(),
        clean: false,
        epoch: None,
    };
    // A header alone holds no record: even torn, nothing is lost with it.
    if bytes.len() <= HEADER_LEN {
        let clean = bytes.len() == HEADER_LEN
            && bytes[..8] == MAGIC[..]
            && bytes[8..8 + EPOCH_LEN] == state.epoch
            && bool::from(
                header(mac, &state.epoch, read_u64(&bytes[24..32]))
                    .as_slice()
                    .ct_eq(bytes.as_slice()),
            );
        return Ok(Replay { clean, ..empty });
    }
    if bytes[..8] != MAGIC[..] {
        return Err(Error::StoreCorrupt(format!(
            "{label}: not a Sesame journal (no journal magic number); move it aside to open \
             the store (the commits it may hold are then lost)"
        )));
    }
    let epoch: [u8; EPOCH_LEN] = bytes[8..8 + EPOCH_LEN]
        .try_into()
        .expect("the header holds an epoch");
    let base = read_u64(&bytes[24..32]);
    let expected = header(mac, &epoch, base);
    if !bool::from(expected.as_slice().ct_eq(&bytes[..HEADER_LEN])) {
        return Err(Error::StoreCorrupt(format!(
            "{label}: the journal's header fails its MAC: it belongs to another store, or \
             was changed; move it aside to open the store (the commits it may hold are \
             then lost)"
        )));
    }
    if state.previous == Some(epoch) && epoch != state.epoch && state.reset != Some(state.epoch) {
        // Every record was applied by the checkpoint that began the
        // current epoch (a kill before the journal's reset): the file says
        // its journal was not yet reset.
        return Ok(Replay {
            epoch: Some(epoch),
            ..empty
        });
    }
    if state.previous == Some(epoch) && epoch != state.epoch {
        return Err(Error::StoreCorrupt(format!(
            "{label}: the journal is an older copy: its epoch ended at the store's last \
             checkpoint, and the store file says that journal was reset since; the \
             journal that belongs with the file was replaced (restored from a backup?); \
             put it back, or move this one aside to open the store as its file is (the \
             commits since that checkpoint are then lost)"
        )));
    }
    if epoch != state.epoch {
        return Err(Error::StoreCorrupt(format!(
            "{label}: the journal is of an epoch this store's file does not know: it is an \
             older or newer copy than the store file beside it (a restored backup of one \
             of the two?); put back the journal and store file that belong together, or \
             move the journal aside to open the store as its file is (the commits the \
             journal holds are then lost)"
        )));
    }
    let mut records = Vec::new();
    let mut chain = header_mac(&bytes);
    let mut expect = base + 1;
    let mut pos = HEADER_LEN;
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        if rest.len() < RECORD_HEAD {
            break; // torn
        }
        let seq = read_u64(&rest[..8]);
        let len = u32::from_be_bytes(rest[8..12].try_into().expect("4 bytes")) as usize;
        let end = RECORD_HEAD + len + MAC_LEN;
        if rest.len() < end {
            break; // torn: shorter than its length
        }
        let payload = &rest[RECORD_HEAD..RECORD_HEAD + len];
        let tag = &rest[RECORD_HEAD + len..end];
        let sound = seq == expect && bool::from(record_mac(mac, &chain, seq, payload).ct_eq(tag));
        if !sound {
            if pos + end == bytes.len() {
                break; // the torn append of a commit never acknowledged
            }
            return Err(Error::StoreCorrupt(format!(
                "{label}: record {expect} (at byte {pos}) fails its check and more records \
                 follow: the journal was changed or damaged; move it aside to open the \
                 store as its file is (the commits from that record on are then lost)"
            )));
        }
        chain.copy_from_slice(tag);
        if seq > state.seq {
            records.push((seq, payload.to_vec()));
        }
        expect += 1;
        pos += end;
    }
    Ok(Replay {
        records,
        epoch: Some(epoch),
        ..empty
    })
}

fn confirm(db: &Database, epoch: &[u8; EPOCH_LEN], label: &str) -> Result<()> {
    let map = |e: redb::Error| from_redb(label, e);
    let mut txn = db.begin_write().map_err(|e| map(e.into()))?;
    txn.set_two_phase_commit(true);
    {
        let mut meta = txn.open_table(META).map_err(|e| map(e.into()))?;
        meta.insert(RESET_KEY, hex::encode(epoch).as_str())
            .map_err(|e| map(e.into()))?;
    }
    txn.commit().map_err(|e| map(e.into()))
}

fn read_u64(bytes: &[u8]) -> u64 {
    u64::from_be_bytes(bytes.try_into().expect("8 bytes"))
}

/// Brings the store up to date with the journal beside `store` and
/// returns the journal to append to (`None` when `enable` is false: the
/// journal is then replayed and reset, and no longer written).
///
/// Records after the redb file's sequence number are applied in order,
/// with the new epoch, in one durable commit (two-phase, as every
/// checkpoint); then the journal is reset. Running it again after a kill
/// anywhere in it applies nothing twice: a record is applied only where
/// the file's sequence number is below it, and the file's sequence number
/// moves in the same commit.
pub(crate) fn recover(
    db: &Database,
    store: &Path,
    label: &str,
    enable: bool,
) -> Result<Option<Journal>> {
    let path = journal_path(store);
    let jlabel = format!("journal {}", path.display());
    let map = |e: redb::Error| from_redb(label, e);
    let state = match read_state(db, label)? {
        // Nothing to replay, nothing to write.
        Some(_) if !enable && !path.exists() => return Ok(None),
        Some(state) => state,
        None if !enable && !path.exists() => return Ok(None),
        None => {
            if std::fs::metadata(&path).is_ok_and(|m| m.len() > HEADER_LEN as u64) {
                return Err(Error::StoreCorrupt(format!(
                    "{jlabel}: a journal with records beside a store file that never had \
                     one: the store file is an older copy, or the journal belongs to another \
                     store; move the journal aside to open the store as its file is"
                )));
            }
            // The store's first journal: its key, in a durable commit.
            let state = State {
                key: Key::generate(&mut OsRng),
                epoch: random_epoch(),
                previous: None,
                reset: None,
                seq: 0,
            };
            let mut txn = db.begin_write().map_err(|e| map(e.into()))?;
            txn.set_two_phase_commit(true);
            {
                let mut meta = txn.open_table(META).map_err(|e| map(e.into()))?;
                meta.insert(KEY_KEY, hex::encode(state.key.as_bytes()).as_str())
                    .map_err(|e| map(e.into()))?;
                write_epoch(&mut meta, &state.epoch, None, 0).map_err(|e| map(e.into()))?;
            }
            txn.commit().map_err(|e| map(e.into()))?;
            state
        }
    };
    let mac = KeyedHash::new(&state.key);
    let replay = read_journal(&path, &state, &mac)?;
    let mut seq = state.seq;
    let mut epoch = state.epoch;
    if !replay.clean {
        epoch = random_epoch();
        if let Some((last, _)) = replay.records.last() {
            seq = *last;
        }
        let mut txn = db.begin_write().map_err(|e| map(e.into()))?;
        txn.set_two_phase_commit(true);
        {
            let mut table = txn.open_table(DATA).map_err(|e| map(e.into()))?;
            for (_, payload) in &replay.records {
                apply(&mut table, payload, &jlabel)?;
            }
            let mut meta = txn.open_table(META).map_err(|e| map(e.into()))?;
            // The epoch of the file on disk until it is reset.
            let previous = replay.epoch.unwrap_or(state.epoch);
            write_epoch(&mut meta, &epoch, Some(&previous), seq).map_err(|e| map(e.into()))?;
        }
        txn.commit().map_err(|e| map(e.into()))?;
    }
    let existed = path.exists();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| Error::StoreIo(format!("{jlabel}: {e}")))?;
    if !existed {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| Error::StoreIo(format!("{jlabel}: syncing the directory: {e}")))?;
        }
    }
    let head = header(&mac, &epoch, seq);
    let mut journal = Journal {
        file,
        label: jlabel,
        mac,
        epoch,
        file_epoch: epoch,
        chain: header_mac(&head),
        seq,
        len: HEADER_LEN as u64,
        commits: 0,
        cut: false,
        stale: false,
    };
    if !replay.clean {
        journal.reset_file(&head)?;
        journal.confirm(db)?;
    }
    Ok(enable.then_some(journal))
}

impl Journal {
    fn reset_file(&mut self, head: &[u8]) -> Result<()> {
        self.file
            .set_len(0)
            .and_then(|()| self.file.write_all_at(head, 0))
            .and_then(|()| self.file.sync_data())
            .map_err(|e| self.io(e))
    }
}
