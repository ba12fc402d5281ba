//! Store micro-benchmarks: batch puts and point reads, memory vs redb.
//!
//! Run briefly with
//! `cargo bench -p sesame-store -- --warm-up-time 1 --measurement-time 3`.

// criterion_group! defines an undocumented function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use sesame_core::{Store, WriteBatch};
use sesame_store::{MemoryStore, RedbStore};

const PAIRS: usize = 100_000;
const GETS: usize = 1_000;

/// A store and what keeps it alive (the temporary directory of a redb file).
struct Fixture {
    store: Box<dyn Store>,
    _dir: Option<tempfile::TempDir>,
}

fn memory() -> Fixture {
    Fixture {
        store: Box::new(MemoryStore::new()),
        _dir: None,
    }
}

fn redb() -> Fixture {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = RedbStore::open(dir.path().join("bench.redb")).expect("open redb store");
    Fixture {
        store: Box::new(store),
        _dir: Some(dir),
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A 32-byte pseudo-random key, like the PRF outputs schemes store under.
fn key(i: usize) -> Vec<u8> {
    (0..4u64)
        .flat_map(|j| splitmix(i as u64 * 4 + j).to_le_bytes())
        .collect()
}

fn batch(n: usize) -> WriteBatch {
    let mut batch = WriteBatch::with_capacity(n);
    for i in 0..n {
        batch.put(key(i), vec![i as u8; 64]);
    }
    batch
}

type Backend = (&'static str, fn() -> Fixture);

fn backends() -> [Backend; 2] {
    [("memory", memory), ("redb", redb)]
}

fn put_batch(c: &mut Criterion) {
    let mut group = c.benchmark_group("put_batch_32B_64B");
    group.sample_size(10);
    group.throughput(Throughput::Elements(PAIRS as u64));
    for (name, make) in backends() {
        group.bench_function(name, |b| {
            b.iter_batched(
                || (make(), batch(PAIRS)),
                |(fixture, batch)| {
                    fixture.store.write(batch).expect("write");
                    fixture
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

fn put_one(c: &mut Criterion) {
    let mut group = c.benchmark_group("put_one_commit");
    group.throughput(Throughput::Elements(1));
    for (name, make) in backends() {
        let fixture = make();
        let mut i = 0;
        group.bench_function(name, |b| {
            b.iter(|| {
                i += 1;
                fixture.store.put(&key(i), &[7; 64]).expect("put");
            })
        });
    }
    group.finish();
}

fn get(c: &mut Criterion) {
    let probe: Vec<Vec<u8>> = (0..GETS).map(|i| key(i * 97 % PAIRS)).collect();
    let refs: Vec<&[u8]> = probe.iter().map(Vec::as_slice).collect();
    let mut group = c.benchmark_group("get_of_100k");
    group.throughput(Throughput::Elements(GETS as u64));
    for (name, make) in backends() {
        let fixture = make();
        fixture.store.write(batch(PAIRS)).expect("load");
        group.bench_function(format!("{name}/get"), |b| {
            b.iter(|| {
                for k in &refs {
                    black_box(fixture.store.get(k).expect("get"));
                }
            })
        });
        group.bench_function(format!("{name}/get_many"), |b| {
            b.iter(|| black_box(fixture.store.get_many(&refs).expect("get_many")))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1));
    targets = put_batch, put_one, get
}
criterion_main!(benches);
