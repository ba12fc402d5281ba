//! Group commit: the conditional commits of requests to different indexes
//! that arrive while the store is busy with a commit share the next one
//! ([`sesame_core::Store::write_if_group`]), so many clients updating
//! their own indexes pay one durable commit (one redb commit, two
//! `fdatasync`s under its two-phase commit; one WAL flush on PostgreSQL)
//! between them instead of one each.
//!
//! Leader and followers: a request queues its batch; if fewer than the
//! store's [`sesame_core::Store::commit_groups`] groups are being
//! committed, it leads: it takes everything queued (itself included) and
//! commits it as one group, else it waits.
//!
//! A group holds what queued while the commit before it ran; a leader
//! that finds the lane free commits at once what is queued (it does not
//! wait for requests still on their way: that wait, tried, showed no gain,
//! `docs/scaling.md`, "Group commit"). A lone request is committed alone.
//!
//! What each request is promised is what its own `write_if` promised:
//!
//! - **exactly once, all or nothing**: each batch is written whole, or not
//!   at all, under its own condition (its index's commit token), checked
//!   inside the group's transaction after the batches before it;
//! - **no answer before durability**: a request learns its batch was
//!   written only when the group's commit has returned;
//! - **one failure fails only itself**: when the group's commit fails
//!   with an error that says nothing was written (a refused batch, a full
//!   store), each batch is committed again alone, so only the one at fault
//!   fails; an error whose outcome is unknown (an I/O error of the commit
//!   itself, a store that did not confirm it) is every member's answer, as
//!   it was each one's when they committed alone: the client sends the
//!   request again under the same id, which is idempotent.
//!
//! Tests: `crates/sesame-server/tests/group_commit.rs`, and below
//! (`requests_queued_behind_a_busy_lane_share_the_next_commit`,
//! `each_request_of_many_groups_gets_its_own_answer_once`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use sesame_core::{Conditional, Error, Store, WriteBatch};

use crate::error::EngineError;

/// The most batches one group commits.
const MAX_GROUP: usize = 64;

/// The most bytes of writes one group commits (a batch bigger than this
/// is committed alone).
const MAX_GROUP_BYTES: usize = 32 << 20;

/// One queued conditional batch.
struct Entry {
    id: u64,
    expect: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    batch: WriteBatch,
    bytes: usize,
}

#[derive(Default)]
struct Queue {
    next: u64,
    waiting: Vec<Entry>,
    /// Groups being committed now.
    committing: usize,
    /// Answers not yet taken by their request.
    settled: HashMap<u64, Result<bool, Error>>,
}

/// The group committer of one engine.
#[derive(Default)]
pub(super) struct GroupCommit {
    queue: Mutex<Queue>,
    settled: Condvar,
    /// Store commits made (each group or lone batch is one).
    commits: AtomicU64,
    /// Batches committed through groups.
    batches: AtomicU64,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit").finish_non_exhaustive()
    }
}

impl GroupCommit {
    /// Store commits and batches so far.
    pub(super) fn counts(&self) -> (u64, u64) {
        (
            self.commits.load(Ordering::Relaxed),
            self.batches.load(Ordering::Relaxed),
        )
    }

    /// [`Store::write_if`] of `batch` on `expect`, committed with the
    /// batches of other requests queued at the same time when `store`
    /// gains from it ([`Store::commit_groups`]).
    pub(super) fn write_if(
        &self,
        store: &dyn Store,
        expect: &[(&[u8], Option<&[u8]>)],
        batch: &WriteBatch,
    ) -> Result<bool, EngineError> {
        let lanes = store.commit_groups();
        let bytes = batch.bytes();
        if lanes == 0 || bytes > MAX_GROUP_BYTES {
            self.commits.fetch_add(1, Ordering::Relaxed);
            self.batches.fetch_add(1, Ordering::Relaxed);
            return Ok(store.write_if(expect, batch)?);
        }
        let entry = Entry {
            id: 0,
            expect: expect
                .iter()
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect(),
            batch: batch.clone(),
            bytes,
        };
        let mut queue = self.lock();
        let id = queue.next;
        queue.next += 1;
        queue.waiting.push(Entry { id, ..entry });
        loop {
            if let Some(answer) = queue.settled.remove(&id) {
                drop(queue);
                return Ok(answer?);
            }
            if queue.committing < lanes && !queue.waiting.is_empty() {
                queue.committing += 1;
                let group = take_group(&mut queue.waiting);
                drop(queue);
                let answers = self.commit(store, &group);
                queue = self.lock();
                queue.committing -= 1;
                for (entry, answer) in group.iter().zip(answers) {
                    queue.settled.insert(entry.id, answer);
                }
                self.settled.notify_all();
                continue;
            }
            queue = self
                .settled
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Commits `group` in one store commit; each entry's answer, in order.
    fn commit(&self, store: &dyn Store, group: &[Entry]) -> Vec<Result<bool, Error>> {
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.batches
            .fetch_add(group.len() as u64, Ordering::Relaxed);
        let expects: Vec<Vec<Condition<'_>>> = group.iter().map(Entry::expect).collect();
        let items: Vec<Conditional<'_>> = expects
            .iter()
            .zip(group)
            .map(|(e, entry)| (e.as_slice(), &entry.batch))
            .collect();
        let outcome = if let [(expect, batch)] = items.as_slice() {
            store.write_if(expect, batch).map(|a| vec![a])
        } else {
            store.write_if_group(&items)
        };
        match outcome {
            Ok(answers) if answers.len() == group.len() => answers.into_iter().map(Ok).collect(),
            Ok(answers) => {
                let message = format!(
                    "the store answered a group of {} commits with {} answers",
                    group.len(),
                    answers.len()
                );
                group
                    .iter()
                    .map(|_| Err(Error::StoreIo(message.clone())))
                    .collect()
            }
            // Nothing was written: each batch alone, so that only the one
            // at fault fails.
            Err(e) if group.len() > 1 && nothing_written(&e) => items
                .iter()
                .map(|(expect, batch)| {
                    self.commits.fetch_add(1, Ordering::Relaxed);
                    store.write_if(expect, batch)
                })
                .collect(),
            Err(e) => {
                let mut answers: Vec<_> =
                    group.iter().skip(1).map(|_| Err(duplicate(&e))).collect();
                answers.insert(0, Err(e));
                answers
            }
        }
    }
}

/// A key and the value it must hold (`None`: absent).
type Condition<'a> = (&'a [u8], Option<&'a [u8]>);

impl Entry {
    fn expect(&self) -> Vec<Condition<'_>> {
        self.expect
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .collect()
    }
}

/// The oldest queued entries, up to [`MAX_GROUP`] and [`MAX_GROUP_BYTES`]
/// (at least one).
fn take_group(waiting: &mut Vec<Entry>) -> Vec<Entry> {
    let mut bytes = 0;
    let mut n = 0;
    for entry in waiting.iter() {
        if n > 0 && (n == MAX_GROUP || bytes + entry.bytes > MAX_GROUP_BYTES) {
            break;
        }
        bytes += entry.bytes;
        n += 1;
    }
    waiting.drain(..n).collect()
}

/// Whether a store error says that nothing was written (so each batch may
/// be committed again alone); an error whose outcome is unknown is not.
fn nothing_written(e: &Error) -> bool {
    matches!(
        e,
        Error::StoreFull(_) | Error::InvalidArgument(_) | Error::Unsupported(_)
    )
}

/// The same error for another member of a failed group.
fn duplicate(e: &Error) -> Error {
    match e {
        Error::StoreIo(m) => Error::StoreIo(m.clone()),
        Error::StoreUnavailable(m) => Error::StoreUnavailable(m.clone()),
        Error::StoreCorrupt(m) => Error::StoreCorrupt(m.clone()),
        Error::StoreBusy(m) => Error::StoreBusy(m.clone()),
        Error::StoreForeign(m) => Error::StoreForeign(m.clone()),
        Error::Transport(m) => Error::Transport(m.clone()),
        other => Error::StoreIo(format!("the group's commit failed: {other}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::AtomicBool;
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    use sesame_store::MemoryStore;

    use super::*;

    /// One commit lane whose first commit waits until `open` is set, and
    /// that counts the batches of each commit.
    #[derive(Default)]
    struct Gated {
        inner: MemoryStore,
        open: AtomicBool,
        commits: Mutex<Vec<usize>>,
    }

    impl Gated {
        fn hold(&self, batches: usize) {
            self.commits.lock().unwrap().push(batches);
            while !self.open.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    impl Store for Gated {
        sesame_store::forward_store!(|s| s.inner;
            get, get_many, scan_prefix, scan_from, ordered_probes, io_counts, write, backend);
        fn write_if(
            &self,
            expect: &[(&[u8], Option<&[u8]>)],
            batch: &WriteBatch,
        ) -> sesame_core::Result<bool> {
            self.hold(1);
            self.inner.write_if(expect, batch)
        }
        fn write_if_group(&self, group: &[Conditional<'_>]) -> sesame_core::Result<Vec<bool>> {
            self.hold(group.len());
            group
                .iter()
                .map(|(expect, batch)| self.inner.write_if(expect, batch))
                .collect()
        }
        fn commit_groups(&self) -> usize {
            1
        }
    }

    /// A store of `lanes` commit lanes whose commits take a moment (as
    /// a disk's `fsync` does), so that requests queue and share commits.
    #[derive(Default)]
    struct Slow {
        inner: MemoryStore,
        commits: AtomicU64,
        lanes: usize,
    }

    impl Store for Slow {
        sesame_store::forward_store!(|s| s.inner;
            get, get_many, scan_prefix, scan_from, ordered_probes, io_counts, write, backend);
        fn write_if(
            &self,
            expect: &[(&[u8], Option<&[u8]>)],
            batch: &WriteBatch,
        ) -> sesame_core::Result<bool> {
            self.write_if_group(&[(expect, batch)]).map(|a| a[0])
        }
        fn write_if_group(&self, group: &[Conditional<'_>]) -> sesame_core::Result<Vec<bool>> {
            self.commits.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_micros(300));
            group
                .iter()
                .map(|(expect, batch)| self.inner.write_if(expect, batch))
                .collect()
        }
        fn commit_groups(&self) -> usize {
            self.lanes
        }
    }

    #[test]
    fn each_request_of_many_groups_gets_its_own_answer_once() {
        // One lane (redb) and four (PostgreSQL).
        for lanes in [1, 4] {
            many_groups(lanes);
        }
    }

    /// Threads send requests one after another; every third one's
    /// condition fails (it expects a value its key never held). Each must
    /// be answered, with its own answer, and write once.
    fn many_groups(lanes: usize) {
        const THREADS: u8 = 12;
        const EACH: u8 = 40;
        let store = Arc::new(Slow {
            lanes,
            ..Slow::default()
        });
        let group = Arc::new(GroupCommit::default());
        let (tx, rx) = mpsc::channel();
        for t in 0..THREADS {
            let (store, group, tx) = (store.clone(), group.clone(), tx.clone());
            std::thread::spawn(move || {
                for n in 0..EACH {
                    let key = [t, n];
                    let mut batch = WriteBatch::new();
                    batch.put(key.to_vec(), vec![t, n, 1]);
                    let refused = n % 3 == 2;
                    let expect: &[u8] = &[9];
                    let want = if refused { Some(expect) } else { None };
                    let answer = group.write_if(&*store, &[(&key[..], want)], &batch);
                    tx.send((key, refused, answer.map_err(|e| e.to_string())))
                        .unwrap();
                }
            });
        }
        drop(tx);
        let mut answered = std::collections::HashSet::new();
        for _ in 0..usize::from(THREADS) * usize::from(EACH) {
            let (key, refused, answer) =
                rx.recv_timeout(Duration::from_secs(60))
                    .unwrap_or_else(|_| {
                        panic!(
                            "{lanes} lanes: a request was never answered ({} were)",
                            answered.len()
                        )
                    });
            assert_eq!(answer, Ok(!refused), "{lanes} lanes: request {key:?}");
            assert!(answered.insert(key), "request {key:?} answered twice");
            let stored = store.inner.get(&key).unwrap();
            assert_eq!(
                stored,
                (!refused).then(|| vec![key[0], key[1], 1]),
                "key {key:?}"
            );
        }
        let (commits, batches) = group.counts();
        assert_eq!(batches, u64::from(THREADS) * u64::from(EACH));
        assert_eq!(commits, store.commits.load(Ordering::SeqCst));
        assert!(
            commits < batches,
            "{lanes} lanes: no commit was shared: {commits} commits"
        );
    }

    #[test]
    fn requests_queued_behind_a_busy_lane_share_the_next_commit() {
        let store = Arc::new(Gated::default());
        let group = Arc::new(GroupCommit::default());
        let (tx, rx) = mpsc::channel();
        let send = |i: u8| {
            let (store, group, tx) = (store.clone(), group.clone(), tx.clone());
            std::thread::spawn(move || {
                let mut batch = WriteBatch::new();
                batch.put(vec![i], vec![i]);
                let answer = group.write_if(&*store, &[(&[i][..], None)], &batch);
                tx.send((i, answer.map_err(|e| e.to_string()))).unwrap();
            });
        };
        // The first request leads and holds the lane.
        send(0);
        while store.commits.lock().unwrap().is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Three more queue behind it.
        for i in 1..4 {
            send(i);
        }
        while group.lock().waiting.len() < 3 {
            std::thread::sleep(Duration::from_millis(1));
        }
        store.open.store(true, Ordering::SeqCst);
        let mut answered = Vec::new();
        for _ in 0..4 {
            let (i, answer) = rx
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("requests never answered; answered: {answered:?}"));
            assert_eq!(answer, Ok(true), "request {i}");
            answered.push(i);
        }
        // The lone leader's commit, then the three queued in one.
        assert_eq!(*store.commits.lock().unwrap(), vec![1, 3]);
        for i in 0..4u8 {
            assert_eq!(store.inner.get(&[i]).unwrap(), Some(vec![i]));
        }
    }
}
