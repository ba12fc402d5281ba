//! The memo of packed chunks (`sesame_store::packed::ChunkMemo`): a view
//! that keeps the chunks it read answers every lookup as the store does,
//! whoever writes the store and when; it holds no chunk with deltas
//! beside it, nor a damaged one; and what it reads of the store is what a
//! view without it reads, less the repeats, plus the key after each
//! chunk it holds.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use sesame_core::{Error, IoCounts, Store, WriteBatch};
use sesame_store::packed::{ChunkMemo, Packed};
use sesame_store::{MemoryStore, RedbStore};

mod support;
use support::label;

const PREFIX: &[u8] = b"i/x/1/#";

fn value(i: u32, round: u8) -> Vec<u8> {
    let mut v = i.to_be_bytes().to_vec();
    v.resize(25, round);
    v
}

/// A view with a memo and a plain view (the other handle) of one base
/// store, with neighbours on each side of the prefix.
fn views(base: Arc<dyn Store>) -> (Packed, Arc<ChunkMemo>, Packed) {
    base.put(b"i/x/1/\"", b"before").unwrap();
    base.put(b"i/x/1/$", b"after").unwrap();
    let memo = Arc::new(ChunkMemo::new(64 << 20));
    let reader = Packed::with_memo(base.clone(), PREFIX, memo.clone());
    (reader, memo, Packed::new(base, PREFIX))
}

/// Every key of `keys` looked up through `view` answers as `oracle`.
fn agrees(
    view: &Packed,
    oracle: &BTreeMap<Vec<u8>, Vec<u8>>,
    keys: impl Iterator<Item = u32>,
    when: &str,
) {
    for i in keys {
        let key = label(i);
        assert_eq!(
            view.get(&key).unwrap(),
            oracle.get(&key).cloned(),
            "key {i} {when}"
        );
    }
}

fn bases() -> Vec<(&'static str, Arc<dyn Store>)> {
    vec![
        ("memory", Arc::new(MemoryStore::new())),
        ("redb", Arc::new(RedbStore::open_in_memory().unwrap())),
    ]
}

/// The view with a memo reads back what another handle of the store
/// wrote: appended deltas, chunks rewritten and split, deletes, a
/// compaction; and between writes it answers from memory (no probe).
#[test]
fn a_memo_answers_as_the_store_after_writes_by_another_handle() {
    for (name, base) in bases() {
        let (reader, memo, writer) = views(base.clone());
        let mut oracle = BTreeMap::new();
        let mut bulk = WriteBatch::new();
        for i in 0..6_000 {
            bulk.put(label(i), value(i, 0));
            oracle.insert(label(i), value(i, 0));
        }
        writer.write(bulk).unwrap();
        agrees(
            &reader,
            &oracle,
            0..6_500,
            &format!("({name}) after the bulk"),
        );
        assert!(memo.held() > 10, "({name}) the memo holds the chunks read");
        let before: IoCounts = base.io_counts();
        agrees(&reader, &oracle, 0..6_500, &format!("({name}) read again"));
        let again = base.io_counts().since(&before);
        assert_eq!(
            (again.scans, again.reads),
            (0, 0),
            "({name}) a second pass probes nothing"
        );

        for round in 1..6u8 {
            let mut batch = WriteBatch::new();
            let r = u32::from(round);
            // New keys (deltas beside their chunks), overwrites and deletes.
            for i in (0..6_000).step_by(97).map(|i| i + r * 11) {
                batch.put(label(i), value(i, round));
                oracle.insert(label(i), value(i, round));
            }
            for i in (6_000 + r * 40)..(6_000 + r * 40 + 30) {
                batch.put(label(i), value(i, round));
                oracle.insert(label(i), value(i, round));
            }
            for i in (0..6_000).step_by(401).map(|i| i + r) {
                batch.delete(label(i));
                oracle.remove(&label(i));
            }
            writer.write(batch).unwrap();
            agrees(
                &reader,
                &oracle,
                0..6_500,
                &format!("({name}) after round {round}"),
            );
        }
        writer.compact().unwrap();
        agrees(
            &reader,
            &oracle,
            0..6_500,
            &format!("({name}) after a compaction"),
        );
    }
}

/// A writer thread of the same process inserts keys one batch at a time
/// and says how far it got once each write returned; a reader thread
/// looking keys up through the memo meanwhile finds every key said to be
/// written, and none that is not yet.
#[test]
fn a_reader_beside_a_writer_sees_every_write_that_returned() {
    for (name, base) in bases() {
        let (reader, _memo, writer) = views(base);
        let mut bulk = WriteBatch::new();
        for i in 0..3_000 {
            bulk.put(label(i), value(i, 0));
        }
        writer.write(bulk).unwrap();
        let done = Arc::new(AtomicU32::new(3_000));
        let failure = Arc::new(Mutex::new(None));
        std::thread::scope(|s| {
            s.spawn(|| {
                for next in (3_000..4_500).step_by(5) {
                    let mut batch = WriteBatch::new();
                    for i in next..next + 5 {
                        batch.put(label(i), value(i, 1));
                    }
                    writer.write(batch).unwrap();
                    done.store(next + 5, Ordering::Release);
                }
            });
            s.spawn(|| {
                let mut i = 0u32;
                loop {
                    let written = done.load(Ordering::Acquire);
                    // One key just written, one old, one not yet written.
                    for k in [written - 1, i % written, 4_600 + i % 50] {
                        let want = (k < written).then(|| value(k, u8::from(k >= 3_000)));
                        let got = reader.get(&label(k)).unwrap();
                        if got != want {
                            *failure.lock().unwrap() = Some(format!("({name}) key {k}: {got:?}"));
                            return;
                        }
                    }
                    if written == 4_500 {
                        break;
                    }
                    i += 7;
                }
            });
        });
        assert_eq!(*failure.lock().unwrap(), None);
    }
}

/// A chunk with deltas beside it is answered through the store, never
/// held: the memo holds only chunks whose range it knows whole.
#[test]
fn a_memo_never_holds_a_chunk_with_deltas() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (reader, memo, writer) = views(base.clone());
    let mut oracle = BTreeMap::new();
    let mut bulk = WriteBatch::new();
    for i in 0..2_000 {
        bulk.put(label(i), value(i, 0));
        oracle.insert(label(i), value(i, 0));
    }
    writer.write(bulk).unwrap();
    // A few new keys: each lands beside its chunk as a delta.
    let mut batch = WriteBatch::new();
    for i in 2_000..2_004 {
        batch.put(label(i), value(i, 1));
        oracle.insert(label(i), value(i, 1));
    }
    writer.write(batch).unwrap();
    let stored = base.scan_prefix(PREFIX).unwrap();
    let is_delta = |v: &[u8]| v.first() == Some(&2);
    let chunks = stored.iter().filter(|(_, v)| !is_delta(v)).count();
    // Chunks followed by a delta.
    let with_deltas = stored
        .windows(2)
        .filter(|w| !is_delta(&w[0].1) && is_delta(&w[1].1))
        .count();
    assert!(with_deltas > 0, "the small batch left deltas");
    for _ in 0..2 {
        agrees(&reader, &oracle, 0..2_100, "with deltas");
    }
    assert_eq!(
        memo.held(),
        chunks - with_deltas,
        "held of {chunks} chunks, {with_deltas} with deltas"
    );
}

/// A damaged chunk is refused through the memo as it is without it, and
/// is not held: the next lookup refuses it again.
#[test]
fn a_memo_refuses_a_damaged_chunk() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (reader, memo, writer) = views(base.clone());
    let mut bulk = WriteBatch::new();
    for i in 0..2_000 {
        bulk.put(label(i), value(i, 0));
    }
    writer.write(bulk).unwrap();
    let stored = base.scan_prefix(PREFIX).unwrap();
    let (chunk_key, bytes) = &stored[1];
    // The chunk's first two pairs swapped: keys out of order. Its entries
    // share their lengths: the fixed form (`0x03`, key and value lengths
    // of one byte each here, then the pairs).
    assert_eq!(bytes[0], 0x03, "a chunk of entries of one width");
    let mut at = 3;
    let pair_len = |_: usize| bytes[1] as usize + bytes[2] as usize;
    let (a, b) = (pair_len(at), pair_len(at + pair_len(at)));
    let mut swapped = bytes[..at].to_vec();
    swapped.extend_from_slice(&bytes[at + a..at + a + b]);
    swapped.extend_from_slice(&bytes[at..at + a]);
    swapped.extend_from_slice(&bytes[at + a + b..]);
    at += a + b;
    assert!(at < bytes.len());
    base.put(chunk_key, &swapped).unwrap();
    let key_in_chunk = chunk_key[PREFIX.len()..].to_vec();
    for _ in 0..2 {
        match reader.get(&key_in_chunk) {
            Err(Error::StoreCorrupt(what)) => assert!(what.contains("out of order"), "{what}"),
            other => panic!("a damaged chunk answered {other:?}"),
        }
    }
    assert_eq!(memo.held(), 0);
}

/// Records the keys of the stored pairs a store hands out.
struct Recording {
    inner: Arc<dyn Store>,
    seen: Mutex<Vec<Vec<u8>>>,
}

impl Recording {
    fn record(&self, pairs: &[(Vec<u8>, Vec<u8>)]) {
        self.seen
            .lock()
            .unwrap()
            .extend(pairs.iter().map(|(k, _)| k.clone()));
    }
    fn take(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.seen.lock().unwrap())
    }
}

impl Store for Recording {
    fn get(&self, key: &[u8]) -> sesame_core::Result<Option<Vec<u8>>> {
        let v = self.inner.get(key)?;
        if v.is_some() {
            self.seen.lock().unwrap().push(key.to_vec());
        }
        Ok(v)
    }
    fn write(&self, batch: WriteBatch) -> sesame_core::Result<()> {
        self.inner.write(batch)
    }
    fn scan_prefix(&self, prefix: &[u8]) -> sesame_core::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let pairs = self.inner.scan_prefix(prefix)?;
        self.record(&pairs);
        Ok(pairs)
    }
    fn scan_from(
        &self,
        prefix: &[u8],
        from: &[u8],
        descending: bool,
        limit: usize,
    ) -> sesame_core::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let pairs = self.inner.scan_from(prefix, from, descending, limit)?;
        self.record(&pairs);
        Ok(pairs)
    }
    fn ordered_probes(&self) -> bool {
        true
    }
    fn io_counts(&self) -> IoCounts {
        self.inner.io_counts()
    }
    fn write_marks(&self) -> Option<sesame_core::WriteMarks> {
        self.inner.write_marks()
    }
    fn backend(&self) -> &'static str {
        "recording"
    }
}

/// What the store sees: every chunk a lookup through the memo reads is
/// one a view without it reads for the same lookups, or the stored pair
/// right after one of those; and it reads each at most twice (once for
/// its own lookups, once as the chunk after another).
#[test]
fn a_memo_reads_only_chunks_a_plain_view_reads_and_their_successors() {
    let recording = Arc::new(Recording {
        inner: Arc::new(MemoryStore::new()),
        seen: Mutex::new(Vec::new()),
    });
    let base: Arc<dyn Store> = recording.clone();
    let (reader, _memo, writer) = views(base.clone());
    let mut bulk = WriteBatch::new();
    for i in 0..5_000 {
        bulk.put(label(i), value(i, 0));
    }
    writer.write(bulk).unwrap();
    let stored: Vec<Vec<u8>> = base
        .scan_prefix(PREFIX)
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let lookups: Vec<u32> = (0..400).map(|n| (n * 7_919) % 5_200).collect();
    recording.take();
    for &i in &lookups {
        writer.get(&label(i)).unwrap();
    }
    let plain: BTreeSet<Vec<u8>> = recording.take().into_iter().collect();
    for &i in &lookups {
        reader.get(&label(i)).unwrap();
    }
    let memo_reads = recording.take();
    let successors: BTreeSet<Vec<u8>> = stored
        .windows(2)
        .filter(|w| plain.contains(&w[0]))
        .map(|w| w[1].clone())
        .collect();
    for key in &memo_reads {
        assert!(
            plain.contains(key) || successors.contains(key),
            "the memo read a chunk no plain lookup reads"
        );
    }
    let distinct: BTreeSet<&Vec<u8>> = memo_reads.iter().collect();
    assert!(
        memo_reads.len() <= 2 * distinct.len(),
        "{} reads of {} chunks",
        memo_reads.len(),
        distinct.len()
    );
    assert!(
        memo_reads.len() < lookups.len(),
        "{} reads for {} lookups",
        memo_reads.len(),
        lookups.len()
    );
}

/// One memo serves the views of two prefixes: a key of one view is never
/// answered from the other's chunk held just before it.
#[test]
fn a_memo_keeps_the_chunks_of_two_views_apart() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let memo = Arc::new(ChunkMemo::new(64 << 20));
    let first = Packed::with_memo(base.clone(), b"i/x/1/#".to_vec(), memo.clone());
    let second = Packed::with_memo(base.clone(), b"i/x/2/#".to_vec(), memo.clone());
    let (low, high) = (b"k0".to_vec(), b"k9".to_vec());
    first.put(&low, b"first's").unwrap();
    second.put(&high, b"second's").unwrap();
    assert_eq!(first.get(&low).unwrap(), Some(b"first's".to_vec()));
    assert!(memo.held() > 0);
    // Below every key of the second view: nothing, not the first's value.
    assert_eq!(second.get(&low).unwrap(), None);
    assert_eq!(second.get(&high).unwrap(), Some(b"second's".to_vec()));
    assert_eq!(first.get(&high).unwrap(), None);
}

/// A store that, when a probe it answers finds a delta first, lets a
/// writer run once before the answer reaches the reader: the reader's
/// next probe sees the store after that write.
struct WriteAfterDelta {
    inner: Arc<dyn Store>,
    armed: std::sync::atomic::AtomicBool,
    meddle: Box<dyn Fn() + Send + Sync>,
}

impl Store for WriteAfterDelta {
    fn scan_from(
        &self,
        prefix: &[u8],
        from: &[u8],
        descending: bool,
        limit: usize,
    ) -> sesame_core::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let found = self.inner.scan_from(prefix, from, descending, limit)?;
        // 0x02: a delta (`packed_form.rs`).
        let delta_first = found.first().is_some_and(|(_, v)| v.first() == Some(&0x02));
        if delta_first && self.armed.swap(false, Ordering::SeqCst) {
            (self.meddle)();
        }
        Ok(found)
    }
    sesame_store::forward_store!(|s| s.inner;
        get, get_many, write, write_if, scan_prefix, ordered_probes, io_counts, write_marks, backend);
}

/// A lookup whose first probe finds another delta of the key's chunk, then
/// a write that merges that chunk's deltas and splits it before the
/// lookup's next probe: every old key is still found, through a view with
/// a memo and through one without (the chunk named by the delta, read on
/// its own, would no longer hold the key).
#[test]
fn a_write_between_a_lookups_probes_hides_no_key() {
    const OLD: u32 = 1_200;
    let fresh = || {
        let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let writer = Packed::new(base.clone(), PREFIX);
        let mut bulk = WriteBatch::new();
        for i in 0..OLD {
            bulk.put(label(i), value(i, 0));
        }
        writer.write(bulk).unwrap();
        // A few new keys: deltas beside their chunks.
        for i in OLD..OLD + 40 {
            let mut one = WriteBatch::new();
            one.put(label(i), value(i, 1));
            writer.write(one).unwrap();
        }
        base
    };
    let probe = fresh();
    // The old keys whose first probe finds another key's delta.
    let behind_a_delta: Vec<u32> = (0..OLD)
        .step_by(7)
        .filter(|&i| {
            let mut full = PREFIX.to_vec();
            full.extend_from_slice(&label(i));
            let at = probe.scan_from(PREFIX, &full, true, 1).unwrap();
            at.first()
                .is_some_and(|(k, v)| v.first() == Some(&0x02) && *k != full)
        })
        .collect();
    assert!(
        (10..=200).contains(&behind_a_delta.len()),
        "{}",
        behind_a_delta.len()
    );
    let mut moved = 0;
    for (n, &i) in behind_a_delta.iter().enumerate() {
        let inner = fresh();
        let writer = Packed::new(inner.clone(), PREFIX);
        let chunks = || {
            let stored = inner.scan_prefix(PREFIX).unwrap();
            stored
                .iter()
                .filter(|(_, v)| v.first() != Some(&0x02))
                .count()
        };
        let before_chunks = chunks();
        let meddle = {
            let writer = Packed::new(inner.clone(), PREFIX);
            Box::new(move || {
                // A bulk of new keys: every chunk merged and split.
                let mut bulk = WriteBatch::new();
                for j in 10_000..14_000 {
                    bulk.put(label(j), value(j, 2));
                }
                writer.write(bulk).unwrap();
            })
        };
        let base: Arc<dyn Store> = Arc::new(WriteAfterDelta {
            inner: inner.clone(),
            armed: std::sync::atomic::AtomicBool::new(true),
            meddle,
        });
        let view = if n % 2 == 0 {
            Packed::new(base, PREFIX)
        } else {
            Packed::with_memo(base, PREFIX, Arc::new(ChunkMemo::new(64 << 20)))
        };
        assert_eq!(
            view.get(&label(i)).unwrap(),
            Some(value(i, 0)),
            "old key {i} (lookup {n})"
        );
        assert_eq!(writer.get(&label(i)).unwrap(), Some(value(i, 0)));
        moved += usize::from(chunks() > before_chunks);
    }
    // The write did split chunks under the lookups.
    assert_eq!(moved, behind_a_delta.len());
}

/// A memory store that reports one more write begun than it has settled
/// while `in_flight` is set: a write in flight, as another thread's would
/// be between its start and its commit.
struct InFlight {
    inner: Arc<dyn Store>,
    in_flight: std::sync::atomic::AtomicBool,
}

impl Store for InFlight {
    fn write_marks(&self) -> Option<sesame_core::WriteMarks> {
        let mut marks = self.inner.write_marks()?;
        if self.in_flight.load(Ordering::SeqCst) {
            marks.begun += 1;
        }
        Some(marks)
    }
    sesame_store::forward_store!(|s| s.inner;
        get, get_many, write, write_if, scan_prefix, scan_from, ordered_probes, io_counts, backend);
}

/// A chunk whose two probes may have seen a write in flight is answered
/// but not held; once no write is in flight, the same lookups hold it.
#[test]
fn a_chunk_read_while_a_write_is_in_flight_is_not_held() {
    let inner: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let store = Arc::new(InFlight {
        inner: inner.clone(),
        in_flight: std::sync::atomic::AtomicBool::new(true),
    });
    let base: Arc<dyn Store> = store.clone();
    let (reader, memo, writer) = views(base);
    let mut bulk = WriteBatch::new();
    for i in 0..3_000 {
        bulk.put(label(i), value(i, 0));
    }
    writer.write(bulk).unwrap();
    for i in (0..3_000).step_by(97) {
        assert_eq!(reader.get(&label(i)).unwrap(), Some(value(i, 0)));
    }
    assert_eq!(
        memo.held(),
        0,
        "a chunk was held while a write was in flight"
    );
    store.in_flight.store(false, Ordering::SeqCst);
    for i in (0..3_000).step_by(97) {
        assert_eq!(reader.get(&label(i)).unwrap(), Some(value(i, 0)));
    }
    assert!(memo.held() > 0, "no chunk was held with no write in flight");
}
