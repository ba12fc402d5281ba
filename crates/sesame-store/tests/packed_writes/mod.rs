//! The packed view's write path under import-sized batches (a module of
//! `tests/packed.rs`): a batch that brings chunks several pairs each
//! rewrites them in one ordered merge pass, without deltas; random
//! batches of every size, deletes included, answer as a `BTreeMap`; a
//! damaged chunk stops the pass; a write cut short leaves the state
//! before it. And `import_batches_cost`, a measurement.

use std::collections::BTreeMap;
use std::sync::Arc;

use sesame_core::{Error, Store, WriteBatch, WriteOp};
use sesame_store::faulty::{Fault, FaultyStore};
use sesame_store::packed::Packed;
use sesame_store::{MemoryStore, RedbStore};

use super::{bulk_of, chunks, deltas, label, PREFIX};

/// Every lookup of `oracle`'s keys and of `absent` answers as the oracle,
/// a scan lists it, and the layout checks out.
fn answers_as(view: &Packed, oracle: &BTreeMap<Vec<u8>, Vec<u8>>, absent: &[Vec<u8>]) {
    view.verify().unwrap();
    for (k, v) in oracle {
        assert_eq!(view.get(k).unwrap().as_ref(), Some(v), "key {k:02x?}");
    }
    for k in absent {
        assert_eq!(view.get(k).unwrap(), None, "key {k:02x?} is not there");
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = oracle.clone().into_iter().collect();
    assert_eq!(view.scan_prefix(b"").unwrap(), all);
}

/// An import's batch into a big index brings each chunk many pairs (16
/// here, 20 or more in the flights' import):
/// the plan rewrites each chunk it touches once, with the new pairs merged
/// in, and appends no delta (a delta is a random insertion into the base
/// store, dearer than its share of a chunk rewritten in order).
#[test]
fn a_batch_bringing_chunks_several_pairs_rewrites_each_once_without_deltas() {
    let base: Arc<dyn Store> = Arc::new(RedbStore::open_in_memory().unwrap());
    let view = Packed::new(base.clone(), PREFIX);
    let mut oracle = BTreeMap::new();
    view.write(bulk_of(0..16_000, &mut oracle)).unwrap();
    // Small updates first: a few chunks get deltas, the pass merges them.
    for i in 50_000..50_040 {
        view.write(bulk_of(i..i + 1, &mut oracle)).unwrap();
    }
    let had = deltas(base.as_ref());
    assert!(had > 0, "single puts append deltas");
    let count = chunks(base.as_ref()).len() - had;
    // About 16 new pairs a chunk.
    let batch = bulk_of(100_000..100_000 + 16 * count as u32, &mut oracle);
    let plan = view.plan(&batch).unwrap();
    let mut written = BTreeMap::new();
    for op in plan.batch.ops() {
        if let WriteOp::Put { key, value } = op {
            assert_ne!(
                value.first(),
                Some(&2),
                "a batch of about 16 pairs a chunk appended a delta under {key:02x?}"
            );
            assert!(written.insert(key.clone(), ()).is_none(), "written twice");
        }
    }
    base.write(plan.batch).unwrap();
    assert_eq!(deltas(base.as_ref()), 0, "deltas left after the pass");
    assert!(
        written.len() <= 2 * count,
        "{} chunks written",
        written.len()
    );
    answers_as(&view, &oracle, &[label(99_999), b"e".to_vec()]);
}

/// splitmix64: the tests' random numbers, the same on every run.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Random batches of every size, from one pair (deltas) to more than the
/// view holds (a merge pass over every chunk): new keys, overwrites of
/// stored keys and of keys of the same batch, deletes of stored and of
/// absent keys. After each, lookups of live and deleted keys, a scan and
/// the layout's check answer as a `BTreeMap` given the same batches.
#[test]
fn random_batches_of_every_size_answer_as_a_btreemap() {
    let base: Arc<dyn Store> = Arc::new(RedbStore::open_in_memory().unwrap());
    let view = Packed::new(base.clone(), PREFIX);
    let mut oracle: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let (mut live, mut gone): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
    let mut fresh = 0u32;
    let mut rng = 39;
    let sizes = [1, 2, 3, 4, 5, 9, 40, 400, 3_000, 9_000];
    for round in 0..48 {
        let size = sizes[next(&mut rng) as usize % sizes.len()];
        let mut batch = WriteBatch::new();
        for _ in 0..size {
            let roll = next(&mut rng) % 100;
            let value = vec![(roll as u8) ^ (round as u8); 1 + (next(&mut rng) % 40) as usize];
            if roll < 55 || live.is_empty() {
                let id = fresh;
                fresh += 1;
                batch.put(label(id), value.clone());
                oracle.insert(label(id), value);
                live.push(id);
            } else if roll < 75 {
                let id = live[next(&mut rng) as usize % live.len()];
                batch.put(label(id), value.clone());
                oracle.insert(label(id), value);
            } else if roll < 95 {
                let id = live.swap_remove(next(&mut rng) as usize % live.len());
                batch.delete(label(id));
                oracle.remove(&label(id));
                gone.push(id);
            } else {
                batch.delete(label(1_000_000 + round));
            }
        }
        view.write(batch).unwrap();
        view.verify().unwrap();
        for id in live.iter().step_by(17).chain(gone.iter().rev().take(40)) {
            assert_eq!(
                view.get(&label(*id)).unwrap().as_ref(),
                oracle.get(&label(*id)),
                "round {round} (a batch of {size}): label {id}"
            );
        }
    }
    println!(
        "{} pairs live, {} deleted, in {} stored pairs ({} deltas)",
        live.len(),
        gone.len(),
        chunks(base.as_ref()).len(),
        deltas(base.as_ref())
    );
    let absent: Vec<Vec<u8>> = gone.iter().map(|&i| label(i)).collect();
    answers_as(&view, &oracle, &absent);
}

/// A damaged chunk stops a plan, whether the batch rewrites the chunk in a
/// merge pass or appends beside it: [`Error::StoreCorrupt`] naming it, and
/// nothing written.
#[test]
fn a_damaged_chunk_stops_the_merge_pass() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let view = Packed::new(base.clone(), PREFIX);
    let mut oracle = BTreeMap::new();
    view.write(bulk_of(0..8_000, &mut oracle)).unwrap();
    let stored = chunks(base.as_ref());
    let (key, good) = stored[stored.len() / 2].clone();
    base.put(&key, &good[..good.len() - 3]).unwrap();
    let fence = key[PREFIX.len()..].to_vec();
    let mut inside = fence.clone();
    inside.push(0);
    let mut one = WriteBatch::new();
    one.put(inside, b"beside".to_vec());
    let all = bulk_of(10_000..10_000 + 16 * stored.len() as u32, &mut oracle);
    let written = base.io_counts().writes;
    for (what, batch) in [("a merge pass", all), ("an append", one)] {
        match view.write(batch) {
            Err(Error::StoreCorrupt(m)) => assert!(m.contains("packed chunk"), "{what}: {m}"),
            other => panic!("{what} over a damaged chunk: {other:?}"),
        }
    }
    assert_eq!(base.io_counts().writes, written, "a refused plan wrote");
}

/// A store that refuses a write of the merge pass (a full disk) leaves the
/// view as it was before the batch, chunks and deltas, for every point
/// of failure; the batch written again afterwards lands whole.
#[test]
fn a_write_cut_short_leaves_the_previous_state() {
    for after in 0..3 {
        let faulty = Arc::new(FaultyStore::new());
        let base: Arc<dyn Store> = faulty.clone();
        let view = Packed::new(base.clone(), PREFIX);
        let mut oracle = BTreeMap::new();
        view.write(bulk_of(0..8_000, &mut oracle)).unwrap();
        for i in 50_000..50_020 {
            view.write(bulk_of(i..i + 1, &mut oracle)).unwrap();
        }
        let before = oracle.clone();
        let mut batch = bulk_of(20_000..24_000, &mut oracle);
        for i in (0..8_000).step_by(5) {
            batch.delete(label(i));
            oracle.remove(&label(i));
        }
        faulty.fail_times(Fault::Refused, after, 1);
        let result = view.write(batch.clone());
        faulty.heal();
        match result {
            Err(_) => answers_as(&view, &before, &[label(20_000)]),
            Ok(()) => answers_as(&view, &oracle, &[label(0)]),
        }
        view.write(batch).unwrap();
        answers_as(&view, &oracle, &[label(0)]);
    }
}

/// An import's writes into a packed index, measured: 17 batches of
/// 140,000 FAST-like entries (the flights' keyword index: 20,000 rows of
/// 7 keywords a batch) into a view over a redb file, each batch planned
/// and committed as the embedded client does. Prints, per batch, the base
/// store's bytes read and written and the time; run with
/// `cargo test --release -p sesame-store --test packed -- --ignored --nocapture import_batches`.
#[test]
#[ignore = "a measurement, not a check"]
fn import_batches_cost() {
    let dir = tempfile::tempdir().unwrap();
    let base: Arc<dyn Store> = Arc::new(RedbStore::open(dir.path().join("s.redb")).unwrap());
    let view = Packed::new(base.clone(), PREFIX);
    let (batches, per) = (17u32, 140_000u32);
    let started = std::time::Instant::now();
    let (mut read, mut written) = (0, 0);
    for b in 0..batches {
        let mut batch = WriteBatch::new();
        for i in b * per..(b + 1) * per {
            batch.put(label(i), i.to_be_bytes().repeat(2));
        }
        let before = base.io_counts();
        let t = std::time::Instant::now();
        let plan = view.plan(&batch).unwrap();
        let planned = t.elapsed();
        base.write(plan.batch).unwrap();
        let io = base.io_counts().since(&before);
        read += io.bytes_read;
        written += io.bytes_written;
        println!(
            "batch {b:2}: plan {planned:6.2?} total {:6.2?} read {:5.1} MB written {:5.1} MB ({} pairs, {} scans)",
            t.elapsed(),
            io.bytes_read as f64 / 1e6,
            io.bytes_written as f64 / 1e6,
            io.writes,
            io.scans
        );
    }
    let stored = base.scan_prefix(PREFIX).unwrap();
    let bytes: usize = stored.iter().map(|(k, v)| k.len() + v.len()).sum();
    println!(
        "{batches} batches in {:.2?}: read {:.0} MB, written {:.0} MB; the view holds {} stored pairs, {:.1} MB",
        started.elapsed(),
        read as f64 / 1e6,
        written as f64 / 1e6,
        stored.len(),
        bytes as f64 / 1e6
    );
}

/// A bulk batch into an index larger than the merge budget rewrites at
/// most the budget's bytes of chunks (and, once chunks hold deltas, those
/// whose deltas are full), appending the other chunks' pairs as deltas,
/// where without the budget it would rewrite the whole index in one
/// write; every answer stays the oracle's over many such batches.
#[test]
fn a_bulk_into_an_index_past_the_merge_budget_rewrites_at_most_the_budget() {
    let chunk = sesame_store::packed::CHUNK_BYTES;
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let budget = 24 * chunk;
    let view = Packed::new(base.clone(), PREFIX).with_merge_bytes(budget);
    let mut oracle = BTreeMap::new();
    view.write(bulk_of(0..40_000, &mut oracle)).unwrap();
    let count = chunks(base.as_ref()).len();
    assert!(
        count > 4 * 24,
        "{count} chunks: the index outgrows the budget"
    );
    let mut start = 100_000u32;
    for round in 0..4 {
        // About 12 new pairs a chunk: a bulk, as an import's batch.
        let n = 12 * (chunks(base.as_ref()).len() - deltas(base.as_ref())) as u32;
        let batch = bulk_of(start..start + n, &mut oracle);
        start += n;
        let plan = view.plan(&batch).unwrap();
        let stored = |form: u8| {
            plan.batch.ops().iter().filter_map(move |op| match op {
                WriteOp::Put { value, .. } if value.first() == Some(&form) => Some(value.len()),
                _ => None,
            })
        };
        let rewritten: usize = stored(1).sum();
        assert!(
            stored(2).count() > 0,
            "round {round}: no pair appended past the budget"
        );
        // The first round meets chunks without deltas: it rewrites the
        // budget and the chunk that crossed it. Later rounds also rewrite
        // the chunks whose deltas are full (as a batch of few pairs a
        // chunk does), which the budget does not bound.
        if round == 0 {
            assert!(
                rewritten <= budget + 2 * chunk,
                "{rewritten} bytes of chunks rewritten in one write (budget {budget}, index {})",
                count * chunk
            );
        }
        base.write(plan.batch).unwrap();
        answers_as(&view, &oracle, &[label(99_999)]);
    }
}
