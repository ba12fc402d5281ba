//! The packed view (`sesame_store::packed`): the store suite through it,
//! its chunk layout, and damaged chunks.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use sesame_core::{Error, Store, WriteBatch};
use sesame_store::packed::{Packed, CHUNK_BYTES};
use sesame_store::{MemoryStore, RedbStore};

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
fn label(i: u32) -> Vec<u8> {
    let mut k = vec![b'e'];
    let mut x = u64::from(i);
    for _ in 0..4 {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        k.extend_from_slice(&(z ^ (z >> 31)).to_be_bytes());
    }
    k
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
    let mut bulk = WriteBatch::new();
    for i in 0..20_000 {
        bulk.put(label(i), vec![i as u8; 25]);
        oracle.insert(label(i), vec![i as u8; 25]);
    }
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
    let mut bulk = WriteBatch::new();
    for i in 40_000..55_000 {
        bulk.put(label(i), vec![i as u8; 25]);
        oracle.insert(label(i), vec![i as u8; 25]);
    }
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
    // Chunks of a bulk are full: one more pair in the first overflows it.
    let first = chunks(base.as_ref())[0].clone();
    let (before_bytes, before_count) = fill(base.as_ref());
    let mut key = first.0[PREFIX.len()..].to_vec();
    key.push(0);
    let mut one = WriteBatch::new();
    one.put(key.clone(), vec![1; 25]);
    view.write(one).unwrap();
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
