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
//! Gathering: a group grows with what arrives while the commit before it
//! runs, and, before a leader takes the queue, with the requests *in
//! flight*: those that hold their index's lock on a path that may write
//! ([`GroupCommit::enter`]: a call from the moment it holds its index's
//! lock, a write of documents, records or uploads under its index's
//! exclusive lock). A leader that finds requests in flight that have not
//! queued yet waits for each to queue or to leave (a search leaves without
//! writing), at most the duration of the last commit and never more than
//! [`MAX_GATHER`]: so a request waits at most about one commit's time more
//! than it did, and many requests share the `fsync`s of one commit. A lone
//! request is never held: with nobody else in flight there is nothing to
//! wait for. A request blocked on another index's lock is not in flight
//! (it holds no lock), so a leader never waits for a request that waits
//! for it.
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
//! Tests: `crates/sesame-server/tests/group_commit.rs`; gathering, in
//! this module (`requests_in_flight_share_the_next_commit`,
//! `a_lone_request_is_committed_without_waiting`,
//! `a_request_that_leaves_without_writing_ends_the_wait`).

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use sesame_core::{Conditional, Error, Store, WriteBatch};

use crate::error::EngineError;

/// The most batches one group commits.
const MAX_GROUP: usize = 64;

/// The most bytes of writes one group commits (a batch bigger than this
/// is committed alone).
const MAX_GROUP_BYTES: usize = 32 << 20;

/// The longest a leader waits for requests in flight to join its group.
const MAX_GATHER: Duration = Duration::from_millis(1);

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
    /// Requests in flight ([`GroupCommit::enter`]) that have not queued a
    /// batch yet.
    in_flight: usize,
    /// A leader waits for requests in flight to queue.
    gathering: bool,
    /// How long the last group's commit took (`None` before the first).
    last_commit: Option<Duration>,
}

/// The group committer of one engine.
pub(super) struct GroupCommit {
    queue: Mutex<Queue>,
    settled: Condvar,
    /// Signalled, while a leader gathers, when a request queues or leaves.
    arrived: Condvar,
    /// The longest a leader waits for requests in flight.
    max_gather: Duration,
    /// Store commits made (each group or lone batch is one).
    commits: AtomicU64,
    /// Batches committed through groups.
    batches: AtomicU64,
    /// Leaders that waited for requests in flight, and those whose wait
    /// ran to its bound.
    gathers: AtomicU64,
    gathers_timed_out: AtomicU64,
}

impl Default for GroupCommit {
    fn default() -> Self {
        GroupCommit::with_gather(MAX_GATHER)
    }
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit").finish_non_exhaustive()
    }
}

/// A request in flight ([`GroupCommit::enter`]): until it queues its first
/// batch or leaves, a leader that finds the lane free waits for it.
pub(super) struct InFlight<'a>(Option<&'a GroupCommit>);

thread_local! {
    /// The group committer (its address) this thread's request is in
    /// flight on and has not queued on yet; 0 when none. Engine requests
    /// run on one thread from start to answer.
    static NOT_QUEUED: Cell<usize> = const { Cell::new(0) };
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let Some(group) = self.0 else { return };
        if NOT_QUEUED.with(|q| q.replace(0)) != group.address() {
            return; // it queued: counted out then
        }
        let mut queue = group.lock();
        queue.in_flight = queue.in_flight.saturating_sub(1);
        if queue.gathering {
            group.arrived.notify_one();
        }
    }
}

impl GroupCommit {
    /// A group committer that waits at most `max_gather` for requests in
    /// flight to join a commit.
    fn with_gather(max_gather: Duration) -> Self {
        GroupCommit {
            queue: Mutex::default(),
            settled: Condvar::new(),
            arrived: Condvar::new(),
            max_gather,
            commits: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            gathers: AtomicU64::new(0),
            gathers_timed_out: AtomicU64::new(0),
        }
    }

    /// Marks a request as in flight until the guard is dropped: one that
    /// holds its index's lock on a path that may write. A leader of a
    /// group waits (briefly) for it to queue its batch or to leave, so it
    /// must not be taken by a request that then waits for a lock another
    /// request holds while committing.
    pub(super) fn enter(&self) -> InFlight<'_> {
        if NOT_QUEUED.with(|q| q.get()) != 0 {
            return InFlight(None); // in flight already
        }
        NOT_QUEUED.with(|q| q.set(self.address()));
        self.lock().in_flight += 1;
        InFlight(Some(self))
    }

    fn address(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// Requests in flight that have not queued a batch yet.
    #[cfg(test)]
    pub(super) fn in_flight(&self) -> usize {
        self.lock().in_flight
    }

    /// Leaders that waited for requests in flight to join their group,
    /// and those whose wait ran to its bound.
    #[cfg(test)]
    fn gathers(&self) -> (u64, u64) {
        (
            self.gathers.load(Ordering::Relaxed),
            self.gathers_timed_out.load(Ordering::Relaxed),
        )
    }

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
        if NOT_QUEUED.with(|q| q.get()) == self.address() {
            NOT_QUEUED.with(|q| q.set(0));
            queue.in_flight = queue.in_flight.saturating_sub(1);
        }
        if queue.gathering {
            self.arrived.notify_one();
        }
        loop {
            if let Some(answer) = queue.settled.remove(&id) {
                drop(queue);
                return Ok(answer?);
            }
            if queue.committing < lanes && !queue.gathering && !queue.waiting.is_empty() {
                queue.committing += 1;
                queue = self.gather(queue);
                let group = take_group(&mut queue.waiting);
                drop(queue);
                let start = Instant::now();
                let answers = self.commit(store, &group);
                let took = start.elapsed();
                queue = self.lock();
                queue.committing -= 1;
                queue.last_commit = Some(took);
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

    /// Waits, as the leader of the next group (its lane taken), for the
    /// requests in flight that have not queued yet to queue or leave: at
    /// most the last commit's duration and [`GroupCommit::max_gather`],
    /// and not once the group is full.
    fn gather<'a>(&self, mut queue: MutexGuard<'a, Queue>) -> MutexGuard<'a, Queue> {
        let missing = |q: &Queue| q.in_flight > 0 && q.waiting.len() < MAX_GROUP;
        if !missing(&queue) {
            return queue;
        }
        let bound = queue
            .last_commit
            .map_or(self.max_gather, |d| d.min(self.max_gather));
        let deadline = Instant::now() + bound;
        self.gathers.fetch_add(1, Ordering::Relaxed);
        queue.gathering = true;
        while missing(&queue) {
            let now = Instant::now();
            if now >= deadline {
                self.gathers_timed_out.fetch_add(1, Ordering::Relaxed);
                break;
            }
            queue = self
                .arrived
                .wait_timeout(queue, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        queue.gathering = false;
        queue
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
    use super::*;
    use sesame_store::RedbStore;
    use std::sync::{Arc, Barrier};
    use std::time::Duration;

    /// A bound no test reaches: a wait that ends does so because every
    /// request in flight joined or left.
    const LONG: Duration = Duration::from_secs(20);

    /// `n` threads, each in flight, then each committing a batch of its
    /// own key (`round`, thread); every batch must be applied.
    fn commit_from(group: &Arc<GroupCommit>, store: &Arc<RedbStore>, round: usize, n: usize) {
        let barrier = Arc::new(Barrier::new(n));
        let threads: Vec<_> = (0..n)
            .map(|i| {
                let (group, store, barrier) = (group.clone(), store.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let _in_flight = group.enter();
                    barrier.wait();
                    let key = format!("k{round}/{i}").into_bytes();
                    let mut batch = WriteBatch::new();
                    batch.put(key.clone(), b"v".to_vec());
                    let expect: [Condition<'_>; 1] = [(key.as_slice(), None)];
                    group
                        .write_if(&*store, &expect, &batch)
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().expect("a committing thread"), Ok(true));
        }
    }

    #[test]
    fn requests_in_flight_share_the_next_commit() {
        let store = Arc::new(RedbStore::open_in_memory().unwrap());
        let group = Arc::new(GroupCommit::with_gather(LONG));
        commit_from(&group, &store, 0, 16);
        assert_eq!(
            group.counts(),
            (1, 16),
            "16 requests in flight when the lane was free: one commit holds them all"
        );
        assert_eq!(
            group.gathers(),
            (1, 0),
            "one wait, ended by the last arrival"
        );
    }

    #[test]
    fn a_lone_request_is_committed_without_waiting() {
        let store = Arc::new(RedbStore::open_in_memory().unwrap());
        let group = Arc::new(GroupCommit::with_gather(LONG));
        for round in 0..3 {
            commit_from(&group, &store, round, 1);
        }
        assert_eq!(group.counts(), (3, 3));
        assert_eq!(group.gathers(), (0, 0), "nothing to wait for");
    }

    #[test]
    fn a_request_that_leaves_without_writing_ends_the_wait() {
        let store = RedbStore::open_in_memory().unwrap();
        let group = GroupCommit::with_gather(LONG);
        let reader = group.enter();
        std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let _in_flight = group.enter();
                let mut batch = WriteBatch::new();
                batch.put(b"k".to_vec(), b"v".to_vec());
                group
                    .write_if(&store, &[], &batch)
                    .map_err(|e| e.to_string())
            });
            while group.gathers().0 == 0 && !writer.is_finished() {
                std::thread::yield_now();
            }
            drop(reader);
            assert_eq!(writer.join().expect("the writer"), Ok(true));
        });
        assert_eq!(
            group.gathers(),
            (1, 0),
            "the wait ended when the reader left"
        );
    }
}
