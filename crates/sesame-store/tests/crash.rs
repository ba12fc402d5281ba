//! A write batch is all or nothing when the writing process dies in the
//! middle of it.
//!
//! The test re-runs this test binary as a child process that writes large
//! batches to a redb store in a loop, kills it with SIGKILL at a moment that
//! varies from run to run, reopens the store and checks that it holds exactly
//! one whole batch. `crash_child` is the child's entry point; in a normal test
//! run (without `SESAME_CRASH_CHILD`) it does nothing. A second test has the
//! child rewrite the store (`RedbStore::vacuum`) after every batch, so the
//! kills land in vacuums too.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sesame_core::{Store, WriteBatch};
use sesame_store::RedbStore;

/// Names the store file the child writes; set only for the child.
const CHILD_ENV: &str = "SESAME_CRASH_CHILD";
/// Set for a child that also rewrites the store after every batch
/// (`RedbStore::vacuum`), so that kills land in vacuums too.
const VACUUM_ENV: &str = "SESAME_CRASH_VACUUM";
/// Set for a child of `a_kill_between_the_repair_commit_and_its_truncation_is_recovered`:
/// `grow` or `repair` (see there).
const REPAIR_ENV: &str = "SESAME_CRASH_REPAIR";
/// What the child prints after each commit, followed by the batch number.
const COMMITTED: &str = "SESAME-COMMITTED ";
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

/// Runs a child on `path` (vacuuming after every batch with `vacuum`),
/// kills it `delay` after it reported `BEFORE_KILL` commits; returns the
/// last commit it reported.
fn run_and_kill(path: &Path, delay: Duration, vacuum: bool) -> u64 {
    let mut command = sesame_store::suite::crash_child().unwrap();
    if vacuum {
        command.env(VACUUM_ENV, "1");
    }
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
            if let Some(n) = line.split(COMMITTED).nth(1) {
                let n: u64 = n.trim().parse().unwrap();
                if tx.send(n).is_err() {
                    break;
                }
            }
        }
    });
    let mut last = 0;
    while last < BEFORE_KILL {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(n) => last = n,
            Err(err) => {
                let _ = child.kill();
                panic!("the child stopped reporting commits: {err}");
            }
        }
    }
    std::thread::sleep(delay);
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child was killed, not finished");
    reader.join().unwrap();
    rx.try_iter().fold(last, u64::max)
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
fn crash_runs(name: &str, vacuum: bool, after: impl Fn(&Path, &str)) {
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let dir = tempfile::tempdir().unwrap();
    for run in 0..RUNS {
        let file = format!("{name}{run}.redb");
        let path = dir.path().join(&file);
        let delay_ms = splitmix(u64::from(seed) + run) % 50;
        let reported = run_and_kill(&path, Duration::from_millis(delay_ms), vacuum);
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
    crash_runs("crash", false, |_, _| {});
}

/// A process killed while it rewrites its store (`RedbStore::vacuum`
/// after every batch) leaves the old store or the new one, whole: the
/// same checks as above, then a vacuum of the recovered store removes
/// what the killed one left beside it.
#[test]
fn a_killed_vacuum_leaves_a_whole_store() {
    crash_runs("vacuum", true, |path, file| {
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
