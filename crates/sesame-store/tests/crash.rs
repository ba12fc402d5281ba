//! A write batch is all or nothing when the writing process dies in the
//! middle of it.
//!
//! The test re-runs this test binary as a child process that writes large
//! batches to a redb store in a loop, kills it with SIGKILL at a moment that
//! varies from run to run, reopens the store and checks that it holds exactly
//! one whole batch. `crash_child` is the child's entry point; in a normal test
//! run (without `SESAME_CRASH_CHILD`) it does nothing. A second test has the
//! child rewrite the store (`RedbStore::vacuum`) after every batch, so the
//! kills land in vacuums too. The journal tests have the child write
//! through the write-ahead journal (`RedbStore::set_journal`) and stop it
//! at a named point of a commit before it is killed; they then play the
//! faulty disk and the attacker on copies of the journal it left.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sesame_core::{Error, Store, WriteBatch};
use sesame_store::{journal_path, JournalPoint, RedbStore};

/// Names the store file the child writes; set only for the child.
const CHILD_ENV: &str = "SESAME_CRASH_CHILD";
/// Set for a child that also rewrites the store after every batch
/// (`RedbStore::vacuum`), so that kills land in vacuums too.
const VACUUM_ENV: &str = "SESAME_CRASH_VACUUM";
/// Set for a child of `a_kill_between_the_repair_commit_and_its_truncation_is_recovered`:
/// `grow` or `repair` (see there).
const REPAIR_ENV: &str = "SESAME_CRASH_REPAIR";
/// Set for a child that writes through the journal: `run` (killed at a
/// random moment), `synced:N` (stops once the Nth record is synced, before
/// its redb commit) or `checkpointed` (stops once the first checkpoint is
/// durable, before the journal's reset).
const JOURNAL_ENV: &str = "SESAME_CRASH_JOURNAL";
/// What the child prints after each commit, followed by the batch number.
const COMMITTED: &str = "SESAME-COMMITTED ";
/// What a journal child prints where it stops to be killed.
const STOPPED: &str = "SESAME-STOPPED";
/// Keys per batch.
const KEYS: u32 = 200;
/// Bytes per value: a batch is 200 KiB of values.
const VALUE_LEN: usize = 1024;
/// Batches the child commits before the parent starts its countdown.
const BEFORE_KILL: u64 = 3;
/// Crash runs, each with its own delay.
const RUNS: u64 = 8;

fn key(i: u32) -> Vec<u8> {
    format!("key/{i:05}").into_bytes()
}

/// The value of key `i` in batch `batch`: the batch number, the key index,
/// then filler that also depends on both, so a torn value shows.
fn value(batch: u64, i: u32) -> Vec<u8> {
    let mut v = Vec::with_capacity(VALUE_LEN);
    v.extend_from_slice(&batch.to_be_bytes());
    v.extend_from_slice(&i.to_be_bytes());
    v.resize(VALUE_LEN, (batch as u8) ^ (i as u8));
    v
}

/// The child: writes batch after batch until it is killed (or, should the
/// parent be gone, for 30 s at most).
#[test]
fn crash_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    match std::env::var(REPAIR_ENV).as_deref() {
        Ok("grow") => grow_and_die(Path::new(&path)),
        Ok("repair") => return repair_and_die_before_truncating(Path::new(&path)),
        _ => {}
    }
    if std::env::var_os(JOURNAL_ENV).is_some() {
        RedbStore::set_journal(true);
        sesame_store::set_journal_hook(stop_at);
    }
    let store = RedbStore::open(&path).expect("child opens the store");
    let start = Instant::now();
    let mut batch_no = 1u64;
    while start.elapsed() < Duration::from_secs(30) {
        let mut batch = WriteBatch::with_capacity(KEYS as usize + 1);
        for i in 0..KEYS {
            batch.put(key(i), value(batch_no, i));
        }
        // A key present after odd batches only: deletes are atomic too.
        if batch_no % 2 == 1 {
            batch.put(b"odd".as_slice(), batch_no.to_be_bytes().as_slice());
        } else {
            batch.delete(b"odd".as_slice());
        }
        store.write(batch).expect("child writes a batch");
        println!("{COMMITTED}{batch_no}");
        if std::env::var_os(VACUUM_ENV).is_some() {
            store.vacuum().expect("child rewrites the store");
        }
        batch_no += 1;
    }
}

/// The journal child's hook: stops (for the parent to kill it) at the
/// point `SESAME_CRASH_JOURNAL` names.
fn stop_at(point: JournalPoint) {
    static SYNCED: AtomicU64 = AtomicU64::new(0);
    let mode = std::env::var(JOURNAL_ENV).unwrap_or_default();
    let stop = match point {
        JournalPoint::Synced => {
            let n = SYNCED.fetch_add(1, Ordering::SeqCst) + 1;
            mode.strip_prefix("synced:") == Some(n.to_string().as_str())
        }
        JournalPoint::Checkpointed => mode == "checkpointed",
    };
    if stop {
        println!("{STOPPED}");
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

/// Runs a child on `path` (vacuuming after every batch with `vacuum`;
/// writing through the journal in `journal` mode), kills it `delay` after
/// it reported `BEFORE_KILL` commits, or at once when it stops at a
/// journal point; returns the last commit it reported.
fn run_and_kill(path: &Path, delay: Duration, vacuum: bool, journal: Option<&str>) -> u64 {
    let mut command = sesame_store::suite::crash_child().unwrap();
    if vacuum {
        command.env(VACUUM_ENV, "1");
    }
    if let Some(mode) = journal {
        command.env(JOURNAL_ENV, mode);
    }
    let stops = journal.is_some_and(|m| m != "run");
    let mut child = command
        .env(CHILD_ENV, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let sent = if let Some(n) = line.split(COMMITTED).nth(1) {
                tx.send(Some(n.trim().parse::<u64>().unwrap()))
            } else if line.contains(STOPPED) {
                tx.send(None)
            } else {
                Ok(())
            };
            if sent.is_err() {
                break;
            }
        }
    });
    let mut last = 0;
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Some(n)) => last = n,
            Ok(None) => break,
            Err(err) => {
                let _ = child.kill();
                panic!("the child stopped reporting commits: {err}");
            }
        }
        if !stops && last >= BEFORE_KILL {
            std::thread::sleep(delay);
            break;
        }
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child was killed, not finished");
    reader.join().unwrap();
    rx.try_iter().flatten().fold(last, u64::max)
}

/// Every key carries the same batch, no more and no fewer keys, and that
/// batch is no older than the last one the child saw committed.
fn check(path: &Path, reported: u64) -> u64 {
    let store = RedbStore::open(path).expect("reopen after the crash");
    let pairs = store.scan_prefix(b"key/").unwrap();
    assert_eq!(pairs.len(), KEYS as usize, "a whole batch of keys");
    let batch = u64::from_be_bytes(pairs[0].1[..8].try_into().unwrap());
    for (i, (k, v)) in pairs.iter().enumerate() {
        assert_eq!(k, &key(i as u32));
        assert!(
            v == &value(batch, i as u32),
            "key {i} is not from batch {batch}: torn batch"
        );
    }
    let odd = store.get(b"odd").unwrap();
    if batch % 2 == 1 {
        assert_eq!(odd, Some(batch.to_be_bytes().to_vec()), "batch {batch}");
    } else {
        assert_eq!(odd, None, "batch {batch} deleted it");
    }
    assert!(
        batch >= reported,
        "batch {reported} was reported committed, the store holds {batch}"
    );
    // The recovered store takes new batches.
    store.put(b"after", b"crash").unwrap();
    batch
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// `RUNS` crash runs on fresh stores `NAME{run}.redb`, each child killed
/// after its own delay (spread over about two batches of the child), each
/// store checked; `after` then gets the store's path and file name.
fn crash_runs(name: &str, vacuum: bool, journal: Option<&str>, after: impl Fn(&Path, &str)) {
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let dir = tempfile::tempdir().unwrap();
    for run in 0..RUNS {
        let file = format!("{name}{run}.redb");
        let path = dir.path().join(&file);
        let delay_ms = splitmix(u64::from(seed) + run) % 50;
        let reported = run_and_kill(&path, Duration::from_millis(delay_ms), vacuum, journal);
        let batch = check(&path, reported);
        after(&path, &file);
        eprintln!(
            "run {run}: killed {delay_ms} ms after commit {BEFORE_KILL}; last reported \
             {reported}, store holds batch {batch}"
        );
    }
}

#[test]
fn a_killed_writer_leaves_whole_batches() {
    crash_runs("crash", false, None, |_, _| {});
}

/// A process killed while it rewrites its store (`RedbStore::vacuum`
/// after every batch) leaves the old store or the new one, whole: the
/// same checks as above, then a vacuum of the recovered store removes
/// what the killed one left beside it.
#[test]
fn a_killed_vacuum_leaves_a_whole_store() {
    crash_runs("vacuum", true, None, |path, file| {
        let store = RedbStore::open(path).unwrap();
        store.vacuum().unwrap();
        let dir = path.parent().unwrap();
        let left: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(file) && n != file)
            .collect();
        assert!(left.is_empty(), "{left:?}");
    });
}

/// Keys the `grow` child commits before it dies.
const COMMITTED_KEYS: u32 = 50;

/// The `grow` child: commits `COMMITTED_KEYS` keys, then grows the file in
/// a write transaction of 8 MiB that it never commits, and dies (abort: no
/// destructor runs, as under SIGKILL), so that the header says "recovery
/// required" and the file ends in pages no commit holds.
fn grow_and_die(path: &Path) -> ! {
    const DATA: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("sesame.data");
    drop(RedbStore::open(path).expect("grow child makes the store"));
    // A commit after the open, as a killed command leaves: redb's saved
    // allocator state (written on the clean close) is then stale, so the
    // next open runs the full repair.
    let db = redb::Database::open(path).expect("grow child opens the file");
    let mut txn = db.begin_write().unwrap();
    txn.set_two_phase_commit(true);
    {
        let mut table = txn.open_table(DATA).unwrap();
        for i in 0..COMMITTED_KEYS {
            table
                .insert(key(i).as_slice(), value(1, i).as_slice())
                .unwrap();
        }
    }
    txn.commit().unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut table = txn.open_table(DATA).unwrap();
        for i in 0..8 * 1024u32 {
            table
                .insert(format!("grow/{i:05}").as_bytes(), value(2, i).as_slice())
                .unwrap();
        }
    }
    std::process::abort();
}

/// A file backend that dies (abort) instead of shrinking the file: redb's
/// repair on open commits a header marked clean with a shrunk layout, and
/// truncates the file only after that.
#[derive(Debug)]
struct DieBeforeShrinking(redb::backends::FileBackend);

impl redb::StorageBackend for DieBeforeShrinking {
    fn len(&self) -> std::io::Result<u64> {
        self.0.len()
    }
    fn read(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        self.0.read(offset, len)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        if len < self.0.len()? {
            std::process::abort();
        }
        self.0.set_len(len)
    }
    fn sync_data(&self, eventual: bool) -> std::io::Result<()> {
        self.0.sync_data(eventual)
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.0.write(offset, data)
    }
}

/// The `repair` child: opens the crashed file as redb does, and dies at
/// the truncation that ends redb's repair (returns normally if there is
/// none).
fn repair_and_die_before_truncating(path: &Path) {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let backend = DieBeforeShrinking(redb::backends::FileBackend::new(file).unwrap());
    let db = redb::Builder::new().create_with_backend(backend);
    println!("repair child: opened without truncating ({})", db.is_ok());
}

/// Runs the child in `mode`; returns whether it exited by itself.
fn child_in(path: &Path, mode: &str) -> bool {
    let status = sesame_store::suite::crash_child()
        .unwrap()
        .env(CHILD_ENV, path)
        .env(REPAIR_ENV, mode)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    status.success()
}

/// A process killed after redb's repair on open committed (header marked
/// clean, layout shrunk) and before it truncated the file: the store opens,
/// holds every committed pair and takes writes. Before the fix every open
/// failed with "redb panicked (assertion failed:
/// !self.needs_recovery.load(Ordering::Acquire))".
#[test]
fn a_kill_between_the_repair_commit_and_its_truncation_is_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.redb");
    assert!(!child_in(&path, "grow"), "the grow child died");
    let grown = std::fs::metadata(&path).unwrap().len();
    assert!(
        !child_in(&path, "repair"),
        "redb's repair of a file of {grown} bytes did not truncate it: this test no \
         longer reaches the state it checks"
    );
    assert_eq!(std::fs::metadata(&path).unwrap().len(), grown);
    for round in 0..2 {
        let store = RedbStore::open(&path)
            .unwrap_or_else(|e| panic!("open {round} after the killed repair: {e}"));
        let pairs = store.scan_prefix(b"key/").unwrap();
        assert_eq!(pairs.len(), COMMITTED_KEYS as usize, "open {round}");
        for (i, (k, v)) in pairs.iter().enumerate() {
            assert!(*k == key(i as u32) && *v == value(1, i as u32), "key {i}");
        }
        assert!(store.scan_prefix(b"grow/").unwrap().is_empty());
        store.put(b"after", b"repair").unwrap();
    }
}

/// The byte ranges of the records of the journal beside the store at
/// `path` (the format of `docs/storage.md`, "The journal": a 64-byte
/// header, then `seq (8) | length (4) | payload | mac (32)`).
fn records(path: &Path) -> Vec<std::ops::Range<usize>> {
    let bytes = std::fs::read(journal_path(path)).unwrap();
    let mut out = Vec::new();
    let mut pos = 64;
    while pos + 12 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().unwrap()) as usize;
        let end = pos + 12 + len + 32;
        if end > bytes.len() {
            break;
        }
        out.push(pos..end);
        pos = end;
    }
    out
}

/// A journal child on `path`, killed once its `n`th record is synced and
/// before that commit reaches redb; returns the last batch it reported.
fn killed_after_sync(path: &Path, n: u64) -> u64 {
    run_and_kill(path, Duration::ZERO, false, Some(&format!("synced:{n}")))
}

/// A copy of the store at `base` named `name`, with `journal` beside it.
fn with_journal(base: &Path, name: &str, journal: &[u8]) -> std::path::PathBuf {
    let path = base.with_file_name(name);
    std::fs::copy(base, &path).unwrap();
    std::fs::write(journal_path(&path), journal).unwrap();
    path
}

/// Opening the store at `path` fails with `StoreCorrupt` naming its
/// journal and saying `why`.
fn refused(path: &Path, why: &str) {
    let err = RedbStore::open(path).unwrap_err();
    let journal = journal_path(path).display().to_string();
    assert!(
        matches!(&err, Error::StoreCorrupt(m) if m.contains(&journal) && m.contains(why)),
        "{err:?}"
    );
}

/// A process killed after a commit's journal record was synced and before
/// its redb transaction was committed: the commit is in the store once it
/// is opened again (the store file alone holds none of the journaled
/// commits), every acknowledged batch too, and opening it again applies
/// nothing twice (a batch deletes the key the batch before put).
#[test]
fn a_kill_after_the_journal_sync_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    for n in [1, 5] {
        let path = dir.path().join(format!("synced{n}.redb"));
        let reported = killed_after_sync(&path, n);
        assert_eq!(reported, n - 1, "batch {n} was the one being committed");
        assert_eq!(records(&path).len() as u64, n);
        let alone = with_journal(&path, &format!("alone{n}.redb"), b"");
        let store = RedbStore::open(&alone).unwrap();
        assert!(store.scan_prefix(b"key/").unwrap().is_empty());
        drop(store);
        assert_eq!(
            check(&path, reported),
            n,
            "the synced batch {n} is replayed"
        );
        assert_eq!(check(&path, n), n, "and only once");
        assert!(records(&path).is_empty(), "the journal was reset");
    }
}

/// A process killed after a checkpoint was made durable and before the
/// journal was reset: the journal it leaves (of the previous epoch, every
/// record of which the checkpoint applied) is discarded, and nothing is
/// applied twice.
#[test]
fn a_kill_between_a_checkpoint_and_the_journal_reset_applies_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("checkpointed.redb");
    let reported = run_and_kill(&path, Duration::ZERO, false, Some("checkpointed"));
    let left = records(&path).len() as u64;
    assert!(left >= 2, "the journal still holds {left} records");
    assert_eq!(
        left, reported,
        "every batch before the checkpoint was journaled"
    );
    assert_eq!(
        check(&path, reported),
        reported + 1,
        "the checkpoint's batch"
    );
    assert_eq!(check(&path, reported + 1), reported + 1);
    assert!(records(&path).is_empty(), "the journal was reset");
}

/// The faulty disk and the attacker, on copies of a journal of six
/// records (batch 6 synced, never acknowledged): a torn last record is
/// dropped; a last record whose bytes changed reads as torn and is
/// dropped; a changed record with more after it, records swapped, a
/// journal of another store, and an older copy of the journal beside a
/// store file that has moved on are refused, naming the journal; a record
/// forged without the store's key and appended is never applied.
#[test]
fn a_journal_torn_changed_or_from_elsewhere_is_dropped_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.redb");
    assert_eq!(killed_after_sync(&base, 6), 5);
    let recs = records(&base);
    assert_eq!(recs.len(), 6);
    let journal = std::fs::read(journal_path(&base)).unwrap();

    let path = with_journal(&base, "whole.redb", &journal);
    assert_eq!(check(&path, 5), 6, "all six records replayed");

    let path = with_journal(&base, "torn.redb", &journal[..journal.len() - 7]);
    assert_eq!(check(&path, 5), 5, "a record cut short is dropped");
    let path = with_journal(&base, "torn-head.redb", &journal[..recs[5].start + 5]);
    assert_eq!(check(&path, 5), 5, "a record cut in its head is dropped");

    let mut last = journal.clone();
    last[recs[5].start + 100] ^= 1;
    let path = with_journal(&base, "last.redb", &last);
    assert_eq!(check(&path, 5), 5, "a changed last record is dropped");

    let mut middle = journal.clone();
    middle[recs[2].start + 100] ^= 1;
    refused(&with_journal(&base, "middle.redb", &middle), "record 3");

    let mut swapped = journal[..recs[1].start].to_vec();
    swapped.extend_from_slice(&journal[recs[2].clone()]);
    swapped.extend_from_slice(&journal[recs[1].clone()]);
    swapped.extend_from_slice(&journal[recs[3].start..]);
    refused(&with_journal(&base, "swapped.redb", &swapped), "record 2");

    // A record whose payload a client could have chosen: put forged = x.
    let mut payload = vec![1u8];
    payload.extend_from_slice(&6u32.to_be_bytes());
    payload.extend_from_slice(b"forged");
    payload.extend_from_slice(&1u32.to_be_bytes());
    payload.push(b'x');
    let mut forged = journal.clone();
    forged.extend_from_slice(&7u64.to_be_bytes());
    forged.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    forged.extend_from_slice(&payload);
    forged.extend_from_slice(&journal[recs[5].end - 32..recs[5].end]);
    let path = with_journal(&base, "forged.redb", &forged);
    assert_eq!(check(&path, 5), 6);
    let store = RedbStore::open(&path).unwrap();
    assert_eq!(
        store.get(b"forged").unwrap(),
        None,
        "a forged record applied"
    );
    drop(store);
    let mut inside = journal[..recs[5].start].to_vec();
    inside.extend_from_slice(&forged[journal.len()..]);
    inside.extend_from_slice(&journal[recs[5].clone()]);
    refused(
        &with_journal(&base, "forged-inside.redb", &inside),
        "record 6",
    );

    let other = dir.path().join("other.redb");
    killed_after_sync(&other, 2);
    let foreign = std::fs::read(journal_path(&other)).unwrap();
    refused(
        &with_journal(&base, "foreign.redb", &foreign),
        "another store",
    );

    // The store moves on (replay, checkpoint, journal reset); then the
    // older journal is put back beside it.
    let path = with_journal(&base, "older.redb", &journal);
    assert_eq!(check(&path, 5), 6);
    std::fs::write(journal_path(&path), &journal).unwrap();
    refused(&path, "older copy");
    // A store file older than its journal: the journal of that store
    // after a further crash, beside the first copy of the store file.
    let newer = with_journal(&path, "newer.redb", b"");
    killed_after_sync(&newer, 2);
    let later = std::fs::read(journal_path(&newer)).unwrap();
    refused(
        &with_journal(&base, "older-file.redb", &later),
        "does not know",
    );
}

/// A journal child killed at a random moment (in appends, redb commits,
/// checkpoints and resets alike) leaves whole batches, none lost that it
/// reported, as without the journal.
#[test]
fn a_killed_journaled_writer_leaves_whole_batches() {
    crash_runs("journaled", false, Some("run"), |_, _| {});
}
