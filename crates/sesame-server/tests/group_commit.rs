//! Group commit (`engine/group.rs`): concurrent updates to different
//! indexes share store commits on redb, each lands exactly once, a request
//! that fails inside a group fails alone, and a server killed in the
//! middle of group commits loses no acknowledged update.
//!
//! The crash test re-runs this test binary as a child process (as
//! `sesame-store/tests/crash.rs` does): `crash_child` serves updates from
//! several threads and prints each acknowledgment; the parent kills it
//! with SIGKILL, reopens the store and checks every acknowledged update.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use prost::Message;
use sesame_core::{Conditional, Error, Store, WriteBatch, WriteOp};
use sesame_server::{proto, Engine, EngineError, Limits};
use sesame_store::RedbStore;

/// Names the store file the crash child serves; set only for the child.
const CHILD_ENV: &str = "SESAME_GROUP_CRASH_CHILD";
/// What the child prints after each acknowledged update.
const ACKED: &str = "SESAME-ACKED ";

/// A store that counts its commits, holds each for a moment (as a slower
/// disk's `fsync` would, so that requests arrive while one runs) and,
/// once `poison` is set, refuses any batch that writes a key of index
/// `bad`.
struct Counting<S> {
    inner: S,
    commits: AtomicU64,
    /// Groups of more than one batch.
    groups: AtomicU64,
    /// Groups refused because one of their batches was `bad`'s.
    refused_groups: AtomicU64,
    hold: Duration,
    poison: AtomicBool,
}

impl<S: Store> Counting<S> {
    fn new(inner: S, hold: Duration) -> Self {
        Counting {
            inner,
            commits: AtomicU64::new(0),
            groups: AtomicU64::new(0),
            refused_groups: AtomicU64::new(0),
            hold,
            poison: AtomicBool::new(false),
        }
    }

    fn poisoned(&self, batch: &WriteBatch) -> bool {
        self.poison.load(Ordering::SeqCst)
            && batch.ops().iter().any(|op| {
                let key = match op {
                    WriteOp::Put { key, .. } | WriteOp::Delete { key } => key,
                };
                key.windows(5).any(|w| w == b"/bad/")
            })
    }
}

fn refusal() -> Error {
    Error::InvalidArgument("a batch of index bad is refused by this store".into())
}

impl<S: Store> Store for Counting<S> {
    sesame_store::forward_store!(|s| s.inner;
        get, get_many, commit_groups, scan_prefix, scan_from, ordered_probes, io_counts);
    fn write(&self, batch: WriteBatch) -> sesame_core::Result<()> {
        self.commits.fetch_add(1, Ordering::SeqCst);
        self.inner.write(batch)
    }
    fn write_if(
        &self,
        expect: &[(&[u8], Option<&[u8]>)],
        batch: &WriteBatch,
    ) -> sesame_core::Result<bool> {
        if self.poisoned(batch) {
            return Err(refusal());
        }
        self.commits.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.hold);
        self.inner.write_if(expect, batch)
    }
    fn write_if_group(&self, group: &[Conditional<'_>]) -> sesame_core::Result<Vec<bool>> {
        if group.iter().any(|(_, b)| self.poisoned(b)) {
            self.refused_groups.fetch_add(1, Ordering::SeqCst);
            return Err(refusal());
        }
        self.commits.fetch_add(1, Ordering::SeqCst);
        if group.len() > 1 {
            self.groups.fetch_add(1, Ordering::SeqCst);
        }
        std::thread::sleep(self.hold);
        self.inner.write_if_group(group)
    }
    fn backend(&self) -> &'static str {
        "counting"
    }
}

fn create(engine: &Engine, index: &str) {
    engine
        .create_index(
            "t",
            proto::CreateIndexRequest {
                index: index.into(),
                scheme: "fast".into(),
                params: String::new(),
                request_id: Vec::new(),
            },
        )
        .unwrap();
}

/// The blob of document `doc` of thread `t`.
fn blob(t: u64, doc: u64) -> Vec<u8> {
    format!("thread {t} document {doc}").into_bytes()
}

/// Adds document `doc` to `index` under a fresh request id.
fn add(engine: &Engine, index: &str, t: u64, doc: u64) -> Result<u64, EngineError> {
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&t.to_be_bytes());
    id[8..].copy_from_slice(&doc.to_be_bytes());
    engine
        .put_documents(
            "t",
            proto::PutDocumentsRequest {
                index: index.into(),
                request_id: id.to_vec(),
                documents: vec![proto::Document {
                    id: doc,
                    blob: blob(t, doc),
                }],
                packed: false,
            },
        )
        .map(|r| r.added)
}

/// Index `index`'s document count, and which of documents `0..n` it holds
/// with the blob of thread `t`.
fn held(engine: &Engine, index: &str, t: u64, n: u64) -> (u64, Vec<bool>) {
    let count = engine
        .list_indexes("t", proto::ListIndexesRequest {})
        .unwrap()
        .indexes
        .into_iter()
        .find(|i| i.index == index)
        .unwrap()
        .documents;
    let got = engine
        .get_documents(
            "t",
            proto::GetDocumentsRequest {
                index: index.into(),
                ids: (0..n).collect(),
            },
        )
        .unwrap()
        .documents;
    let present = got
        .iter()
        .enumerate()
        .map(|(d, m)| {
            if m.found {
                assert_eq!(m.blob, blob(t, d as u64), "document {d} of {index} changed");
            }
            m.found
        })
        .collect();
    (count, present)
}

#[test]
fn concurrent_updates_to_different_indexes_share_commits_and_land_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Counting::new(
        RedbStore::open(dir.path().join("s.redb")).unwrap(),
        Duration::from_millis(2),
    ));
    updates_share_commits(&store);
}

/// The same over PostgreSQL (`SESAME_TEST_POSTGRES`; skipped with a note
/// without it): a group is one transaction, each batch between
/// savepoints.
#[test]
fn concurrent_updates_share_commits_on_postgres() {
    let Some(url) = std::env::var("SESAME_TEST_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        eprintln!("note: group commit over PostgreSQL skipped: SESAME_TEST_POSTGRES is not set");
        return;
    };
    let sep = if url.contains('?') { '&' } else { '?' };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let spec = format!("{url}{sep}namespace=group{}_{nanos}", std::process::id());
    let store = Arc::new(Counting::new(
        sesame_store::PostgresStore::open(&spec).unwrap(),
        Duration::from_millis(2),
    ));
    updates_share_commits(&store);
    let store = Arc::into_inner(store).expect("the engine is gone");
    store.inner.destroy().unwrap();
}

fn updates_share_commits<S: Store + 'static>(store: &Arc<Counting<S>>) {
    const CLIENTS: u64 = 16;
    const ADDS: u64 = 12;
    let engine = Engine::new(store.clone(), Limits::default()).unwrap();
    for t in 0..CLIENTS {
        create(&engine, &format!("i{t}"));
    }
    let before = store.commits.load(Ordering::SeqCst);
    let (commits_before, batches_before) = engine.group_commits();
    let start = Barrier::new(CLIENTS as usize);
    std::thread::scope(|scope| {
        for t in 0..CLIENTS {
            let (engine, start) = (&engine, &start);
            scope.spawn(move || {
                start.wait();
                for doc in 0..ADDS {
                    assert_eq!(add(engine, &format!("i{t}"), t, doc).unwrap(), 1);
                }
                // A resend of an acknowledged request (same id) is
                // answered with the first answer, not applied again.
                match add(engine, &format!("i{t}"), t, 0) {
                    Err(EngineError::Replayed { response, .. }) => {
                        let first = proto::PutDocumentsResponse::decode(response.as_slice());
                        assert_eq!(first.unwrap().added, 1);
                    }
                    other => panic!("a resend was answered with {other:?}"),
                }
            });
        }
    });
    let updates = CLIENTS * (ADDS + 1);
    let commits = store.commits.load(Ordering::SeqCst) - before;
    let (engine_commits, batches) = engine.group_commits();
    eprintln!(
        "{updates} updates (resends included), {} batches, {commits} store commits, {} groups",
        batches - batches_before,
        store.groups.load(Ordering::SeqCst)
    );
    assert_eq!(
        batches - batches_before,
        CLIENTS * ADDS,
        "a batch per update"
    );
    // The store saw the engine's commits, and the second writes of the
    // resends' replay records.
    assert!(engine_commits - commits_before <= commits);
    assert!(
        commits < CLIENTS * ADDS,
        "{commits} store commits for {} updates: none was shared",
        CLIENTS * ADDS
    );
    for t in 0..CLIENTS {
        let (count, present) = held(&engine, &format!("i{t}"), t, ADDS + 1);
        assert_eq!(count, ADDS, "index i{t}'s document count");
        assert_eq!(present[..ADDS as usize], vec![true; ADDS as usize]);
        assert!(!present[ADDS as usize]);
    }
}

#[test]
fn a_request_that_fails_inside_a_group_fails_alone() {
    const CLIENTS: u64 = 12;
    const ADDS: u64 = 6;
    // Whether a `bad` batch shares a group depends on the scheduler: on a
    // loaded machine the first rounds may all commit alone, so every
    // thread keeps adding (at least `ADDS`, then until a refused group
    // has been seen, at most `MOST` each or until `PATIENCE` has passed).
    const MOST: u64 = 400;
    const PATIENCE: Duration = Duration::from_secs(20);
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Counting::new(
        RedbStore::open(dir.path().join("s.redb")).unwrap(),
        Duration::from_millis(5),
    ));
    let engine = Engine::new(store.clone(), Limits::default()).unwrap();
    for t in 0..CLIENTS {
        create(&engine, &format!("i{t}"));
    }
    create(&engine, "bad");
    store.poison.store(true, Ordering::SeqCst);
    let began = Instant::now();
    let go_on = |done: u64, least: u64| {
        done < least
            || (done < MOST
                && store.refused_groups.load(Ordering::SeqCst) == 0
                && began.elapsed() < PATIENCE)
    };
    let start = Barrier::new(CLIENTS as usize + 1);
    let (tried, failed, added) = std::thread::scope(|scope| {
        let bad = scope.spawn(|| {
            start.wait();
            let (mut tried, mut failed) = (0, 0);
            while go_on(tried, ADDS * 2) {
                failed += u64::from(add(&engine, "bad", 99, tried).is_err());
                tried += 1;
            }
            (tried, failed)
        });
        let clients: Vec<_> = (0..CLIENTS)
            .map(|t| {
                let (engine, start, go_on) = (&engine, &start, &go_on);
                scope.spawn(move || {
                    start.wait();
                    let mut doc = 0;
                    while go_on(doc, ADDS) {
                        let added = add(engine, &format!("i{t}"), t, doc);
                        assert_eq!(added.unwrap(), 1, "an update of i{t} failed");
                        doc += 1;
                    }
                    doc
                })
            })
            .collect();
        let added: Vec<u64> = clients.into_iter().map(|c| c.join().unwrap()).collect();
        let (tried, failed) = bad.join().unwrap();
        (tried, failed, added)
    });
    let refused = store.refused_groups.load(Ordering::SeqCst);
    eprintln!("{refused} groups refused, then committed again batch by batch");
    assert_eq!(failed, tried, "every update of index bad fails");
    assert!(refused > 0, "no group held a batch of index bad");
    for (t, n) in (0..CLIENTS).zip(added) {
        let (count, present) = held(&engine, &format!("i{t}"), t, n);
        assert_eq!(count, n, "index i{t}'s document count");
        assert!(present.iter().all(|p| *p), "an update of i{t} was lost");
    }
    store.poison.store(false, Ordering::SeqCst);
    let (count, present) = held(&engine, "bad", 99, tried);
    assert_eq!(count, 0);
    assert!(present.iter().all(|p| !p));
}

/// The crash test's child: serves updates to one index per thread until
/// it is killed, printing each acknowledgment as it returns.
#[test]
fn crash_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let store = Arc::new(RedbStore::open(&path).unwrap());
    let engine = Engine::new(store, Limits::default()).unwrap();
    let threads: u64 = 8;
    for t in 0..threads {
        create(&engine, &format!("i{t}"));
    }
    let out = std::sync::Mutex::new(std::io::stdout());
    let deadline = Instant::now() + Duration::from_secs(30);
    std::thread::scope(|scope| {
        for t in 0..threads {
            let (engine, out) = (&engine, &out);
            scope.spawn(move || {
                let mut doc = 0;
                while Instant::now() < deadline {
                    add(engine, &format!("i{t}"), t, doc).unwrap();
                    let mut out = out.lock().unwrap();
                    writeln!(out, "{ACKED}{t} {doc}").unwrap();
                    out.flush().unwrap();
                    doc += 1;
                }
            });
        }
    });
}

#[test]
fn a_server_killed_during_group_commits_loses_no_acknowledged_update() {
    const THREADS: u64 = 8;
    let dir = tempfile::tempdir().unwrap();
    for run in 0..3u64 {
        let path = dir.path().join(format!("crash{run}.redb"));
        let mut child = sesame_store::suite::crash_child()
            .unwrap()
            .env(CHILD_ENV, &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut acked = vec![0u64; THREADS as usize];
        let mut seen = 0u64;
        // Killed after 40 + 30 * run acknowledgments, in the middle of
        // other threads' group commits; what it printed before it died is
        // still read, so `acked` is every acknowledgment it gave.
        for line in stdout.lines() {
            let line = line.unwrap();
            let Some(rest) = line.strip_prefix(ACKED) else {
                continue;
            };
            let mut parts = rest.split(' ').map(|p| p.parse::<u64>().unwrap());
            let (t, doc) = (parts.next().unwrap(), parts.next().unwrap());
            acked[t as usize] = acked[t as usize].max(doc + 1);
            seen += 1;
            if seen == 40 + 30 * run {
                child.kill().unwrap();
            }
        }
        child.wait().unwrap();
        assert!(
            seen >= 40 + 30 * run,
            "the child stopped after {seen} updates"
        );
        let engine =
            Engine::new(Arc::new(RedbStore::open(&path).unwrap()), Limits::default()).unwrap();
        for t in 0..THREADS {
            let index = format!("i{t}");
            let (count, present) = held(&engine, &index, t, acked[t as usize] + 2);
            let stored = present.iter().filter(|p| **p).count() as u64;
            assert_eq!(
                count, stored,
                "{index}: the count and the documents disagree"
            );
            assert!(
                present[..acked[t as usize] as usize].iter().all(|p| *p),
                "{index}: an acknowledged update was lost (run {run})"
            );
            // At most the one update in flight when the kill came.
            assert!(stored <= acked[t as usize] + 1, "{index}: {stored} stored");
        }
    }
}

/// What `sesame serve` puts around its store (an `Arc`, the `Watched`
/// counter) passes group commits through: without it, the server
/// committed every request alone although the engine grouped them.
#[test]
fn the_servers_store_wrappers_keep_group_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(RedbStore::open(dir.path().join("s.redb")).unwrap());
    assert_eq!(store.commit_groups(), 1);
    let watched = sesame_server::watched::Watched::new(store);
    assert_eq!(watched.commit_groups(), 1);
    let mut batch = WriteBatch::new();
    batch.put(b"k".to_vec(), b"v".to_vec());
    let group: Vec<Conditional<'_>> = vec![(&[], &batch), (&[(b"k", None)], &batch)];
    assert_eq!(watched.write_if_group(&group).unwrap(), vec![true, false]);
}
