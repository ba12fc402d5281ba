//! The packed view (`sesame_store::packed`): the store suite through it,
//! its chunk layout, deltas appended beside chunks and merged into them,
//! damaged chunks and deltas, and pending pairs (`packed_pending/`).

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use sesame_core::{Error, Store, WriteBatch};
use sesame_store::packed::{Packed, CHUNK_BYTES, DELTA_BYTES, MAX_DELTAS};
use sesame_store::{MemoryStore, RedbStore};

mod support;
use support::label;

#[path = "packed_writes/mod.rs"]
mod writes;

#[path = "packed_form/mod.rs"]
mod form;

const PREFIX: &[u8] = b"i/x/1/#";

fn over(base: Arc<dyn Store>) -> Packed {
    // A neighbour on each side of the prefix: the view must not see them.
    base.put(b"i/x/1/\"", b"before").unwrap();
    base.put(b"i/x/1/$", b"after").unwrap();
    Packed::new(base, PREFIX)
}

fn memory() -> Packed {
    over(Arc::new(MemoryStore::new()))
}

fn redb() -> Packed {
    over(Arc::new(RedbStore::open_in_memory().unwrap()))
}

/// The suite's cases that do not need conditional writes (the view has
/// none: its host commits [`Packed::plan`] itself).
macro_rules! suite_cases {
    ($make:path; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                sesame_store::suite::$case(&$make());
            }
        )*
        #[test]
        fn random_ops_match_oracle() {
            sesame_store::suite::random_ops_match_oracle(&$make(), 48);
        }
    };
}

mod memory_base {
    suite_cases!(super::memory; get_missing, put_get, overwrite, delete, batch_applies_in_order,
        empty_batch, scan_prefix_order_and_bounds, empty_key_and_value, large_value, io_counts,
        concurrent_writers);
}

mod redb_base {
    suite_cases!(super::redb; get_missing, put_get, overwrite, delete, batch_applies_in_order,
        empty_batch, scan_prefix_order_and_bounds, empty_key_and_value, large_value, io_counts);
}

/// A FAST-like key: `e` and 32 bytes that look random (splitmix64).
/// A batch putting `label(i)` to 25 bytes of `i` for each `i` of `ids`,
/// each pair also put in `oracle`.
fn bulk_of(ids: std::ops::Range<u32>, oracle: &mut BTreeMap<Vec<u8>, Vec<u8>>) -> WriteBatch {
    let mut bulk = WriteBatch::new();
    for i in ids {
        bulk.put(label(i), vec![i as u8; 25]);
        oracle.insert(label(i), vec![i as u8; 25]);
    }
    bulk
}

/// A FAST-like update: `label(first + j)` put to 25 bytes of `j` for
/// each of 8 `j`, each pair also put in `oracle`.
fn update_of(first: u32, oracle: &mut BTreeMap<Vec<u8>, Vec<u8>>) -> WriteBatch {
    let mut batch = WriteBatch::new();
    for j in 0..8 {
        batch.put(label(first + j), vec![j as u8; 25]);
        oracle.insert(label(first + j), vec![j as u8; 25]);
    }
    batch
}

fn chunks(base: &dyn Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    base.scan_prefix(PREFIX).unwrap()
}

/// Many small batches of random keys, with deletes, as FAST-like entries
/// arrive, and a second bulk read ahead in few probes: every answer
/// equals a `BTreeMap`'s, every chunk but a lone
/// oversized pair stays within `CHUNK_BYTES`, and the base store holds one
/// pair per chunk, far fewer than pairs.
#[test]
fn entries_pack_into_few_bounded_chunks_and_read_back() {
    let base: Arc<dyn Store> = Arc::new(RedbStore::open_in_memory().unwrap());
    let view = Packed::new(base.clone(), PREFIX);
    let mut oracle = BTreeMap::new();
    // One bulk upload, then small updates landing all over the key space.
    let bulk = bulk_of(0..20_000, &mut oracle);
    view.write(bulk).unwrap();
    for round in 0..40u32 {
        let mut batch = WriteBatch::new();
        for j in 0..300 {
            let i = 20_000 + round * 300 + j;
            batch.put(label(i), vec![j as u8; 25]);
            oracle.insert(label(i), vec![j as u8; 25]);
        }
        for j in 0..20 {
            let gone = label(round * 500 + j);
            batch.delete(gone.clone());
            oracle.remove(&gone);
        }
        view.write(batch).unwrap();
    }
    // A second bulk lands in every chunk: read ahead, many at a time.
    let bulk = bulk_of(40_000..55_000, &mut oracle);
    let probes = base.io_counts().scans;
    view.write(bulk).unwrap();
    let probes = base.io_counts().scans - probes;
    let stored = chunks(base.as_ref());
    println!(
        "the second bulk read {} chunks in {probes} probes",
        stored.len()
    );
    assert!(probes * 8 < stored.len() as u64, "{probes} probes");
    let pairs = oracle.len();
    println!("{pairs} pairs in {} chunks", stored.len());
    assert!(stored.len() * 20 < pairs, "{} chunks", stored.len());
    for (_, bytes) in &stored {
        assert!(
            bytes.len() <= CHUNK_BYTES,
            "a chunk of {} bytes",
            bytes.len()
        );
    }
    view.verify().unwrap();
    for (k, v) in &oracle {
        assert_eq!(view.get(k).unwrap().as_ref(), Some(v));
    }
    for round in 0..40 {
        for i in round * 500..round * 500 + 20 {
            assert_eq!(view.get(&label(i)).unwrap(), None, "deleted {i}");
        }
    }
    assert_eq!(view.get(b"e").unwrap(), None);
    assert_eq!(view.get(b"\xff").unwrap(), None);
    let all: Vec<(Vec<u8>, Vec<u8>)> = oracle.into_iter().collect();
    assert_eq!(view.scan_prefix(b"").unwrap(), all);
    // Deleting everything leaves no chunk behind.
    let mut clear = WriteBatch::new();
    for (k, _) in &all {
        clear.delete(k.clone());
    }
    view.write(clear).unwrap();
    assert!(chunks(base.as_ref()).is_empty());
    assert_eq!(base.get(b"i/x/1/#").unwrap(), None);
}

/// Bytes of the chunks under the view, and how many there are.
fn fill(base: &dyn Store) -> (usize, usize) {
    let stored = chunks(base);
    (stored.iter().map(|(_, v)| v.len()).sum(), stored.len())
}

/// A batch that lands in every chunk (FAST's bulk of pseudorandom labels)
/// leaves them full, not split in halves; one small batch that
/// overflows a chunk splits it into two halves, not a full chunk and a
/// sliver.
#[test]
fn bulks_leave_chunks_full_and_a_small_overflow_splits_in_halves() {
    let base: Arc<dyn Store> = Arc::new(RedbStore::open_in_memory().unwrap());
    let view = Packed::new(base.clone(), PREFIX);
    for round in 0..4u32 {
        let mut bulk = WriteBatch::new();
        for i in round * 15_000..(round + 1) * 15_000 {
            bulk.put(label(i), vec![i as u8; 25]);
        }
        view.write(bulk).unwrap();
        let (bytes, count) = fill(base.as_ref());
        // All but the last two chunks are full to within one pair.
        let full = bytes as f64 / (count * CHUNK_BYTES) as f64;
        println!(
            "after bulk {round}: {count} chunks, {:.1} % full",
            100.0 * full
        );
        assert!(full > 0.9, "chunks {:.1} % full", 100.0 * full);
    }
    view.verify().unwrap();
    // Chunks of a bulk are full: a write of more pairs than the first one
    // takes as deltas merges them into it and overflows it.
    let first = chunks(base.as_ref())[0].clone();
    let (before_bytes, before_count) = fill(base.as_ref());
    let mut more = WriteBatch::new();
    let mut key = Vec::new();
    for n in 0..=MAX_DELTAS as u8 {
        key = first.0[PREFIX.len()..].to_vec();
        key.extend([0, n]);
        more.put(key.clone(), vec![1; 25]);
    }
    view.write(more).unwrap();
    let after = chunks(base.as_ref());
    assert_eq!(after.len(), before_count + 1);
    let (halves, _) = after.split_at(2);
    for (_, bytes) in halves {
        assert!(
            bytes.len() > CHUNK_BYTES / 3 && bytes.len() < CHUNK_BYTES * 2 / 3,
            "a half of {} bytes",
            bytes.len()
        );
    }
    assert!(fill(base.as_ref()).0 > before_bytes);
    assert_eq!(view.get(&key).unwrap(), Some(vec![1; 25]));
    for i in (0..60_000).step_by(97) {
        assert_eq!(view.get(&label(i)).unwrap(), Some(vec![i as u8; 25]));
    }
    view.verify().unwrap();
}

/// A plan reports the puts that would change a stored value, and applies
/// nothing itself.
#[test]
fn a_plan_counts_overwrites_and_writes_nothing() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let view = Packed::new(base.clone(), PREFIX);
    let mut batch = WriteBatch::new();
    for i in 0..500 {
        batch.put(label(i), b"v".to_vec());
    }
    view.write(batch).unwrap();
    let before = chunks(base.as_ref());
    let mut again = WriteBatch::new();
    again.put(label(1), b"v".to_vec()); // the same value: not an overwrite
    again.put(label(2), b"w".to_vec());
    again.put(label(3), b"x".to_vec());
    again.put(label(9999), b"new".to_vec());
    again.delete(label(4));
    let plan = view.plan(&again).unwrap();
    assert_eq!(plan.overwrites, 2);
    assert!(!plan.batch.is_empty());
    assert_eq!(chunks(base.as_ref()), before, "planning wrote something");
    base.write(plan.batch).unwrap();
    assert_eq!(view.get(&label(2)).unwrap(), Some(b"w".to_vec()));
    assert_eq!(view.get(&label(4)).unwrap(), None);
    assert_eq!(view.get(&label(9999)).unwrap(), Some(b"new".to_vec()));
}

/// Keys below every fence (the first chunk's smallest key deleted, then
/// smaller keys added) still land in order.
#[test]
fn keys_below_the_first_fence_move_it_down() {
    let view = memory();
    view.put(b"m", b"1").unwrap();
    view.put(b"n", b"2").unwrap();
    view.delete(b"m").unwrap();
    view.put(b"a", b"3").unwrap();
    assert_eq!(view.get(b"a").unwrap(), Some(b"3".to_vec()));
    assert_eq!(view.get(b"m").unwrap(), None);
    assert_eq!(view.get(b"n").unwrap(), Some(b"2".to_vec()));
    view.verify().unwrap();
}

/// A chunk in the layout `sesame_store::packed` documents.
fn chunk_of(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = vec![0x01];
    for (k, v) in pairs {
        out.push(k.len() as u8);
        out.extend_from_slice(k);
        out.push(v.len() as u8);
        out.extend_from_slice(v);
    }
    out
}

/// Chunks whose ranges overlap, as a plan racing another writer's commit
/// can read them (the first chunk read before the other writer split it,
/// the next one after): the plan writes every chunk in key order (the
/// stale plan is then refused by its host's conditional commit), it does
/// not stream one chunk's pairs after the other's out of order.
#[test]
fn a_plan_over_overlapping_chunks_writes_sorted_chunks() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut key = PREFIX.to_vec();
    key.push(b'a');
    base.put(&key, &chunk_of(&[(b"a", b"1"), (b"m", b"1"), (b"z", b"1")]))
        .unwrap();
    let mut key = PREFIX.to_vec();
    key.push(b'k');
    base.put(&key, &chunk_of(&[(b"k", b"1"), (b"n", b"1")]))
        .unwrap();
    let view = Packed::new(base.clone(), PREFIX);
    let mut batch = WriteBatch::new();
    batch.put(b"b".to_vec(), b"2".to_vec());
    batch.put(b"l".to_vec(), b"2".to_vec());
    view.write(batch).unwrap();
    // Every chunk decodes: its keys are in order.
    let pairs =
        sesame_store::packed::pairs_under(base.as_ref(), &PREFIX[..PREFIX.len() - 1]).unwrap();
    assert_eq!(pairs.len(), 7, "{pairs:?}");
}

/// A damaged chunk is a `StoreCorrupt` error on every path that reads
/// it, never a panic, whatever its bytes.
#[test]
fn damaged_chunks_are_errors_not_panics() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let view = Packed::new(base.clone(), PREFIX);
    let mut batch = WriteBatch::new();
    for i in 0..10 {
        batch.put(label(i), vec![7; 25]);
    }
    view.write(batch).unwrap();
    let (chunk_key, good) = chunks(base.as_ref()).remove(0);
    let probe = label(3);
    let last = (0..10).map(label).max().unwrap();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("unknown format", {
            let mut b = good.clone();
            b[0] = 9;
            b
        }),
        ("cut short", good[..good.len() - 3].to_vec()),
        ("a length past the end", {
            let mut b = good.clone();
            b[1] = 0xFF;
            b[2] = 0x7F;
            b
        }),
        ("an endless length", {
            let mut b = vec![1u8];
            b.extend([0xFF; 12]);
            b
        }),
    ];
    for (what, bytes) in cases {
        base.put(&chunk_key, &bytes).unwrap();
        // A lookup reads the chunk up to its key: the last key's lookup
        // reads through every damage here.
        let errors = [
            view.get(&last).map(drop),
            view.scan_prefix(b"").map(drop),
            view.verify(),
            view.plan(&{
                let mut b = WriteBatch::new();
                b.put(label(4), vec![1]);
                b
            })
            .map(drop),
        ];
        for err in errors {
            assert!(
                matches!(&err, Err(Error::StoreCorrupt(m)) if m.contains("packed chunk")),
                "{what}: {err:?}"
            );
        }
    }
    // Arbitrary bytes: an answer or an error, never a panic.
    let mut runner = TestRunner::new(Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&prop::collection::vec(any::<u8>(), 0..200), |bytes| {
            base.put(&chunk_key, &bytes).unwrap();
            let _ = view.get(&probe);
            let _ = view.scan_prefix(b"e");
            let _ = view.verify();
            Ok(())
        })
        .unwrap();
}

/// The stored values under the view that are deltas (first byte `0x02`).
fn deltas(base: &dyn Store) -> usize {
    chunks(base)
        .iter()
        .filter(|(_, v)| v.first() == Some(&2))
        .count()
}

/// FAST-like updates (8 pseudorandom labels a batch, each in another
/// chunk) after a bulk: each is appended as 8 small deltas instead of 8
/// rewritten chunks, a chunk is rewritten only when its deltas are full,
/// and every lookup and scan equals the oracle's all along. A bulk into
/// the empty view writes no delta.
#[test]
fn small_writes_append_deltas_that_lookups_read() {
    let base: Arc<dyn Store> = Arc::new(RedbStore::open_in_memory().unwrap());
    let view = Packed::new(base.clone(), PREFIX);
    let mut oracle = BTreeMap::new();
    let bulk = bulk_of(0..8_000, &mut oracle);
    view.write(bulk).unwrap();
    assert_eq!(deltas(base.as_ref()), 0, "a bulk upload wrote deltas");
    let chunk_count = chunks(base.as_ref()).len();
    let mut appended = 0;
    let mut rewrites = 0;
    for update in 0..400u32 {
        let batch = update_of(100_000 + update * 8, &mut oracle);
        let plan = view.plan(&batch).unwrap();
        assert_eq!(plan.overwrites, 0);
        if plan.batch.bytes() < 2_000 {
            appended += 1;
        } else {
            rewrites += 1;
        }
        base.write(plan.batch).unwrap();
        if update % 50 == 0 {
            view.verify().unwrap();
            for (k, v) in oracle.iter().step_by(7) {
                assert_eq!(view.get(k).unwrap().as_ref(), Some(v));
            }
        }
    }
    println!(
        "{appended} updates appended, {rewrites} rewrote a chunk; {} deltas beside {} chunks",
        deltas(base.as_ref()),
        chunks(base.as_ref()).len() - deltas(base.as_ref())
    );
    // Each chunk takes MAX_DELTAS appends between rewrites: 8 keys an
    // update over the chunks leaves most updates rewriting none.
    assert!(
        appended > 3 * rewrites,
        "{appended} updates appended, {rewrites} rewrote a chunk (of {chunk_count})"
    );
    assert!(deltas(base.as_ref()) > 0);
    view.verify().unwrap();
    for (k, v) in &oracle {
        assert_eq!(view.get(k).unwrap().as_ref(), Some(v));
    }
    assert_eq!(view.get(&label(99_999)).unwrap(), None);
    let all: Vec<(Vec<u8>, Vec<u8>)> = oracle.clone().into_iter().collect();
    assert_eq!(view.scan_prefix(b"").unwrap(), all);
    let under: Vec<(Vec<u8>, Vec<u8>)> = oracle
        .iter()
        .filter(|(k, _)| k.starts_with(&[b'e', 0x80]))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(view.scan_prefix(&[b'e', 0x80]).unwrap(), under);
    let full: Vec<(Vec<u8>, Vec<u8>)> = oracle
        .iter()
        .map(|(k, v)| {
            let mut key = b"i/x/1/".to_vec();
            key.extend_from_slice(k);
            (key, v.clone())
        })
        .collect();
    let mut expected = full;
    expected.extend([(b"i/x/1/$".to_vec(), b"after".to_vec())]);
    let listed = sesame_store::packed::pairs_under(base.as_ref(), b"i/x/1/").unwrap();
    assert_eq!(
        listed.len(),
        oracle.len(),
        "pairs_under counts each pair once"
    );
    assert!(listed.iter().all(|p| oracle.contains_key(&p.0[6..])));
}

/// One chunk's deltas: up to `MAX_DELTAS` appends stay beside it (an
/// overwrite of a chunk's pair counted, a value sent again not), the next
/// write merges them into it, and a delete merges too; every answer is
/// the oracle's throughout.
#[test]
fn deltas_merge_into_their_chunk_when_full_or_on_a_delete() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let view = Packed::new(base.clone(), PREFIX);
    let mut oracle = BTreeMap::new();
    let mut batch = WriteBatch::new();
    for i in 0..100u8 {
        batch.put(vec![b'k', i * 2], vec![i]);
        oracle.insert(vec![b'k', i * 2], vec![i]);
    }
    view.write(batch).unwrap();
    assert_eq!(chunks(base.as_ref()).len(), 1);
    let check = |oracle: &BTreeMap<Vec<u8>, Vec<u8>>| {
        for i in 0..=255u8 {
            assert_eq!(
                view.get(&[b'k', i]).unwrap(),
                oracle.get(&vec![b'k', i]).cloned()
            );
        }
        let all: Vec<_> = oracle.clone().into_iter().collect();
        assert_eq!(view.scan_prefix(b"").unwrap(), all);
        let under: Vec<_> = all.into_iter().filter(|(k, _)| k[0] == b'k').collect();
        assert_eq!(view.scan_prefix(b"k").unwrap(), under);
        view.verify().unwrap();
    };
    // An overwrite of a chunk's pair, and the same value sent again.
    let mut again = WriteBatch::new();
    again.put(vec![b'k', 10], vec![0xAA]);
    again.put(vec![b'k', 12], vec![6]);
    let plan = view.plan(&again).unwrap();
    assert_eq!(plan.overwrites, 1);
    assert_eq!(plan.batch.len(), 1, "only the changed pair is appended");
    base.write(plan.batch).unwrap();
    oracle.insert(vec![b'k', 10], vec![0xAA]);
    assert_eq!(deltas(base.as_ref()), 1);
    check(&oracle);
    // Odd keys, one a write, until the chunk has MAX_DELTAS deltas.
    for n in 1..MAX_DELTAS as u8 {
        view.put(&[b'k', n * 2 + 1], &[n]).unwrap();
        oracle.insert(vec![b'k', n * 2 + 1], vec![n]);
        assert_eq!(deltas(base.as_ref()), usize::from(n) + 1);
        assert_eq!(chunks(base.as_ref()).len(), usize::from(n) + 2);
    }
    check(&oracle);
    // One more: merged, no delta left.
    view.put(b"k\xF1", b"last").unwrap();
    oracle.insert(b"k\xF1".to_vec(), b"last".to_vec());
    assert_eq!(deltas(base.as_ref()), 0);
    assert_eq!(chunks(base.as_ref()).len(), 1);
    check(&oracle);
    // A delete merges the chunk's deltas too.
    view.put(b"k\xF3", b"x").unwrap();
    view.put(b"k\xF5", b"y").unwrap();
    oracle.insert(b"k\xF3".to_vec(), b"x".to_vec());
    oracle.insert(b"k\xF5".to_vec(), b"y".to_vec());
    assert_eq!(deltas(base.as_ref()), 2);
    view.delete(b"k\xF3").unwrap();
    oracle.remove(b"k\xF3".as_slice());
    assert_eq!(deltas(base.as_ref()), 0);
    check(&oracle);
    // A key below the fence moves it, merging the deltas.
    view.put(b"k\xF7", b"z").unwrap();
    view.put(b"a", b"below").unwrap();
    oracle.insert(b"k\xF7".to_vec(), b"z".to_vec());
    oracle.insert(b"a".to_vec(), b"below".to_vec());
    assert_eq!(deltas(base.as_ref()), 0);
    assert_eq!(view.get(b"a").unwrap(), Some(b"below".to_vec()));
    check(&oracle);
    // Values too big to be deltas are merged at once.
    view.put(b"k\xF9", &vec![1; DELTA_BYTES]).unwrap();
    assert_eq!(deltas(base.as_ref()), 0);
    assert_eq!(view.get(b"k\xF9").unwrap(), Some(vec![1; DELTA_BYTES]));
}

/// A delta in the layout `sesame_store::packed` documents: `0x02`, the
/// fence's length, the fence, the value.
fn delta_of(fence: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = vec![0x02, fence.len() as u8];
    out.extend_from_slice(fence);
    out.extend_from_slice(value);
    out
}

fn stored_key(key: &[u8]) -> Vec<u8> {
    let mut k = PREFIX.to_vec();
    k.extend_from_slice(key);
    k
}

/// Chunks written before deltas existed (format 0x01, field by field)
/// read as they were and take deltas, which are stored in the documented
/// layout.
#[test]
fn chunks_written_before_deltas_read_and_take_deltas() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    base.put(
        &stored_key(b"a"),
        &chunk_of(&[(b"a", b"1"), (b"c", b"2"), (b"e", b"3")]),
    )
    .unwrap();
    base.put(&stored_key(b"m"), &chunk_of(&[(b"m", b"4"), (b"p", b"5")]))
        .unwrap();
    let view = Packed::new(base.clone(), PREFIX);
    view.verify().unwrap();
    assert_eq!(view.get(b"c").unwrap(), Some(b"2".to_vec()));
    assert_eq!(view.get(b"p").unwrap(), Some(b"5".to_vec()));
    assert_eq!(view.get(b"d").unwrap(), None);
    let mut batch = WriteBatch::new();
    batch.put(b"b".to_vec(), b"6".to_vec());
    batch.put(b"n".to_vec(), b"7".to_vec());
    view.write(batch).unwrap();
    assert_eq!(
        base.get(&stored_key(b"b")).unwrap(),
        Some(delta_of(b"a", b"6"))
    );
    assert_eq!(
        base.get(&stored_key(b"n")).unwrap(),
        Some(delta_of(b"m", b"7"))
    );
    // The chunks are as they were.
    assert_eq!(
        base.get(&stored_key(b"a")).unwrap(),
        Some(chunk_of(&[(b"a", b"1"), (b"c", b"2"), (b"e", b"3")]))
    );
    // A lookup past another delta reads the chunk it names.
    assert_eq!(view.get(b"c").unwrap(), Some(b"2".to_vec()));
    assert_eq!(view.get(b"b").unwrap(), Some(b"6".to_vec()));
    assert_eq!(view.get(b"o").unwrap(), None);
    assert_eq!(view.get(b"p").unwrap(), Some(b"5".to_vec()));
    let all: Vec<(Vec<u8>, Vec<u8>)> = [("a", "1"), ("b", "6"), ("c", "2"), ("e", "3")]
        .iter()
        .chain(&[("m", "4"), ("n", "7"), ("p", "5")])
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    assert_eq!(view.scan_prefix(b"").unwrap(), all);
    assert_eq!(view.scan_prefix(b"c").unwrap(), all[2..3].to_vec());
    view.verify().unwrap();
}

/// A damaged delta (torn, naming a missing chunk or another chunk, its
/// fence not below its key, before every chunk, or any bytes at all) is a
/// `StoreCorrupt` error on every path that reads it, never a panic.
#[test]
fn damaged_deltas_are_errors_not_panics() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    base.put(&stored_key(b"a"), &chunk_of(&[(b"a", b"1"), (b"c", b"2")]))
        .unwrap();
    base.put(&stored_key(b"m"), &chunk_of(&[(b"m", b"4")]))
        .unwrap();
    let view = Packed::new(base.clone(), PREFIX);
    view.put(b"b", b"6").unwrap();
    let good = base.get(&stored_key(b"b")).unwrap().unwrap();
    assert_eq!(good, delta_of(b"a", b"6"));
    let cases: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        ("torn", stored_key(b"b"), good[..2].to_vec()),
        ("an endless fence length", stored_key(b"b"), {
            let mut b = vec![2u8];
            b.extend([0xFF; 12]);
            b
        }),
        ("a missing chunk", stored_key(b"b"), delta_of(b"0", b"6")),
        (
            "a fence above its key",
            stored_key(b"b"),
            delta_of(b"bb", b"6"),
        ),
        (
            "another chunk's fence",
            stored_key(b"n"),
            delta_of(b"a", b"6"),
        ),
        ("before every chunk", stored_key(b"0"), delta_of(b"", b"6")),
    ];
    for (what, key, bytes) in cases {
        let fresh: Arc<dyn Store> = Arc::new(MemoryStore::new());
        for (k, v) in base.scan_prefix(b"").unwrap() {
            fresh.put(&k, &v).unwrap();
        }
        fresh.delete(&stored_key(b"b")).unwrap();
        fresh.put(&key, &bytes).unwrap();
        let view = Packed::new(fresh, PREFIX);
        let probe = &key[PREFIX.len()..];
        let mut later = probe.to_vec();
        later.push(0);
        let reads = [
            ("verify", view.verify()),
            ("scan", view.scan_prefix(b"").map(drop)),
        ];
        for (path, err) in reads {
            assert!(
                matches!(&err, Err(Error::StoreCorrupt(m)) if m.contains("packed")),
                "{what}, {path}: {err:?}"
            );
        }
        // A lookup or a plan that reads the delta is refused (a delta that
        // names another chunk is seen by verify and scans only).
        if what != "another chunk's fence" && what != "before every chunk" {
            let get = view.get(&later).map(drop);
            assert!(
                matches!(&get, Err(Error::StoreCorrupt(m)) if m.contains("packed delta")),
                "{what}, get: {get:?}"
            );
            let plan = view
                .plan(&{
                    let mut b = WriteBatch::new();
                    b.put(later.clone(), vec![1]);
                    b
                })
                .map(drop);
            assert!(
                matches!(&plan, Err(Error::StoreCorrupt(m)) if m.contains("packed")),
                "{what}, plan: {plan:?}"
            );
        }
    }
    // Arbitrary bytes under a delta's key: an answer or an error, never a
    // panic.
    let mut runner = TestRunner::new(Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&prop::collection::vec(any::<u8>(), 0..40), |mut bytes| {
            if let Some(b) = bytes.first_mut() {
                *b = 2;
            }
            base.put(&stored_key(b"b"), &bytes).unwrap();
            let _ = view.get(b"b");
            let _ = view.get(b"c");
            let _ = view.scan_prefix(b"");
            let _ = view.verify();
            let _ = view.plan(&{
                let mut b = WriteBatch::new();
                b.put(b"bb".to_vec(), vec![1]);
                b
            });
            Ok(())
        })
        .unwrap();
}

/// After FAST-like small updates (an import's batches), most lookups land
/// on another delta of their chunk and probe back to the chunk a second
/// time;
/// `Packed::compact` merges every chunk's deltas into it, after which each
/// lookup is one probe of the base store and no point read, and every
/// answer (lookups, scans, `pairs_under`) is the oracle's as before.
#[test]
fn compacting_merges_deltas_so_a_lookup_is_one_probe() {
    let base: Arc<dyn Store> = Arc::new(RedbStore::open_in_memory().unwrap());
    let view = over(base.clone());
    let mut oracle = BTreeMap::new();
    let bulk = bulk_of(0..8_000, &mut oracle);
    view.write(bulk).unwrap();
    for update in 0..400u32 {
        let mut batch = WriteBatch::new();
        for j in 0..8 {
            let i = 100_000 + update * 8 + j;
            batch.put(label(i), vec![j as u8; 25]);
            oracle.insert(label(i), vec![j as u8; 25]);
        }
        view.write(batch).unwrap();
    }
    let before = deltas(base.as_ref());
    assert!(before > 500, "{before} deltas");
    let lookups = |oracle: &BTreeMap<Vec<u8>, Vec<u8>>| {
        let start = base.io_counts();
        for (k, v) in oracle {
            assert_eq!(view.get(k).unwrap().as_ref(), Some(v));
        }
        assert_eq!(view.get(&label(99_999)).unwrap(), None);
        base.io_counts().since(&start)
    };
    let io = lookups(&oracle);
    // A second probe: back from the key to its chunk, in one scan.
    let second = io.scans - (oracle.len() as u64 + 1);
    println!(
        "before compacting: {second} second probes in {} lookups, {before} deltas",
        oracle.len() + 1
    );
    assert_eq!(io.reads, 0, "a lookup read a chunk on its own");
    assert!(
        second > oracle.len() as u64 / 4,
        "{second} second probes of {} lookups",
        oracle.len()
    );
    let rewritten = view.compact().unwrap();
    println!("compacting rewrote {rewritten} chunks");
    assert!(rewritten > 0);
    assert_eq!(deltas(base.as_ref()), 0, "deltas left after compacting");
    view.verify().unwrap();
    let io = lookups(&oracle);
    assert_eq!(io.reads, 0, "a lookup read a chunk on its own");
    assert_eq!(io.scans, oracle.len() as u64 + 1, "one probe a lookup");
    let all: Vec<(Vec<u8>, Vec<u8>)> = oracle.clone().into_iter().collect();
    assert_eq!(view.scan_prefix(b"").unwrap(), all);
    let listed = sesame_store::packed::pairs_under(base.as_ref(), b"i/x/1/").unwrap();
    assert_eq!(
        listed.len(),
        oracle.len() + 2,
        "the pairs and the two neighbours"
    );
    assert_eq!(base.get(b"i/x/1/\"").unwrap(), Some(b"before".to_vec()));
    assert_eq!(base.get(b"i/x/1/$").unwrap(), Some(b"after".to_vec()));
    // Nothing left to merge; later writes append deltas again.
    assert_eq!(view.compact().unwrap(), 0);
    view.put(&label(7), b"again").unwrap();
    oracle.insert(label(7), b"again".to_vec());
    assert_eq!(deltas(base.as_ref()), 1);
    lookups(&oracle);
    // A delta before every chunk is refused, not merged into nothing.
    let lone: Arc<dyn Store> = Arc::new(MemoryStore::new());
    lone.put(&stored_key(b"k"), &delta_of(b"a", b"v")).unwrap();
    let err = Packed::new(lone, PREFIX).compact().unwrap_err();
    assert!(err.to_string().contains("before every chunk"), "{err}");
}

/// A compaction whose write is refused (a full disk) changes nothing; one
/// whose answer is lost after the write (a process killed as it commits)
/// leaves the merged layout: either way every lookup answers as before,
/// the chunks verify, and running it again finishes the work.
#[test]
fn a_compaction_cut_short_leaves_a_valid_layout() {
    use sesame_store::faulty::{Fault, FaultyStore};
    for fault in [Fault::Refused, Fault::AnswerLost] {
        let faulty = Arc::new(FaultyStore::new());
        let base: Arc<dyn Store> = faulty.clone();
        let view = over(base.clone());
        let mut oracle = BTreeMap::new();
        let bulk = bulk_of(0..2_000, &mut oracle);
        view.write(bulk).unwrap();
        for i in 100_000..100_200 {
            view.put(&label(i), b"late").unwrap();
            oracle.insert(label(i), b"late".to_vec());
        }
        let before = deltas(base.as_ref());
        assert!(before > 0);
        faulty.fail(fault, 0);
        assert!(
            view.compact().is_err(),
            "{fault:?}: the write's failure is reported"
        );
        faulty.heal();
        match fault {
            Fault::Refused => assert_eq!(deltas(base.as_ref()), before),
            _ => assert_eq!(deltas(base.as_ref()), 0),
        }
        view.verify().unwrap();
        for (k, v) in &oracle {
            assert_eq!(view.get(k).unwrap().as_ref(), Some(v), "{fault:?}");
        }
        view.compact().unwrap();
        assert_eq!(deltas(base.as_ref()), 0);
        let all: Vec<(Vec<u8>, Vec<u8>)> = oracle.into_iter().collect();
        assert_eq!(view.scan_prefix(b"").unwrap(), all);
    }
}

/// `get_many` reads each chunk once for all the keys it holds: the
/// answers of a batch of keys (unsorted, some twice, some missing, some
/// below every fence or above the last, some in deltas, some deleted)
/// are `get`'s and the oracle's, in the order asked, and reading every
/// key probes the base store about once per chunk, where `get` probes
/// at least once per key.
#[test]
fn get_many_reads_each_chunk_once_and_answers_as_get() {
    let base: Arc<dyn Store> = Arc::new(RedbStore::open_in_memory().unwrap());
    let view = Packed::new(base.clone(), PREFIX);
    let mut oracle = BTreeMap::new();
    view.write(bulk_of(0..12_000, &mut oracle)).unwrap();
    for update in 0..60u32 {
        let from = 50_000 + update * 6;
        let mut batch = bulk_of(from..from + 6, &mut oracle);
        if update % 10 == 0 {
            batch.delete(label(update * 7));
            oracle.remove(&label(update * 7));
        }
        view.write(batch).unwrap();
    }
    assert!(deltas(base.as_ref()) > 0, "no delta to read");
    let mut keys: Vec<Vec<u8>> = (0..12_000u32)
        .rev()
        .chain(50_000..50_360)
        .chain(90_000..90_050)
        .map(label)
        .collect();
    keys.extend([b"".to_vec(), b"\xff".to_vec(), label(5), label(50_001)]);
    let scans = base.io_counts().scans;
    let asked: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let many = view.get_many(&asked).unwrap();
    let probes = base.io_counts().scans - scans;
    let chunk_count = chunks(base.as_ref()).len() - deltas(base.as_ref());
    println!(
        "{} keys over {chunk_count} chunks read in {probes} probes",
        keys.len()
    );
    assert!(
        probes < 2 * chunk_count as u64,
        "{probes} probes for {chunk_count} chunks"
    );
    assert_eq!(many.len(), keys.len());
    for (key, value) in keys.iter().zip(&many) {
        assert_eq!(value.as_ref(), oracle.get(key), "{key:?}");
        assert_eq!(value, &view.get(key).unwrap(), "{key:?}");
    }
    assert_eq!(view.get_many(&[]).unwrap(), Vec::<Option<Vec<u8>>>::new());
    let empty = Packed::new(Arc::new(MemoryStore::new()), PREFIX);
    assert_eq!(empty.get_many(&asked[..3]).unwrap(), vec![None, None, None]);
}

#[path = "packed_pending/mod.rs"]
mod pending;
