//! PiBas and 2Lev: setup throughput (pairs/s) and in-memory search
//! throughput (results/s), with and without packing.

// criterion_group! and criterion_main! generate undocumented items.
#![allow(missing_docs)]

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{LocalChannel, Params, Service};
use sesame_sse::{KeywordClient, KeywordScheme, Multimap};
use sesame_store::MemoryStore;

const CONFIGS: [(&str, &str); 4] = [
    ("pibas", "block=1"),
    ("pibas", "block=512"),
    ("2lev", "b=64,block=64"),
    ("2lev", "b=64,block=512"),
];

/// `pairs` pairs over keywords holding 100 identifiers each.
fn database(pairs: u64) -> Multimap {
    let mut db = Multimap::new();
    for w in 0..pairs / 100 {
        db.insert(
            format!("w{w}").into_bytes(),
            (w * 100..w * 100 + 100).collect(),
        );
    }
    db
}

/// A client of `scheme` with the index of `db`, on a server over a fresh
/// memory store.
fn set_up(
    scheme: &KeywordScheme,
    params: &Params,
    db: &Multimap,
    rng: &mut ChaCha20Rng,
) -> (Box<dyn KeywordClient>, LocalChannel<Box<dyn Service>>) {
    let mut client = (scheme.new_client)(rng, params).expect("client");
    let mut ch = LocalChannel::new(
        scheme
            .server(Arc::new(MemoryStore::new()), &sesame_core::Params::new())
            .expect("server"),
    );
    client.setup(rng, &mut ch, db).expect("setup");
    (client, ch)
}

fn setup(c: &mut Criterion) {
    let pairs = 200_000u64;
    let db = database(pairs);
    let mut g = c.benchmark_group("setup");
    g.sample_size(10);
    g.throughput(Throughput::Elements(pairs));
    for (name, params) in CONFIGS {
        let scheme = sesame_sse::scheme(name).expect("registered");
        let params = Params::parse(params).expect("valid");
        g.bench_function(BenchmarkId::new(name, &params), |b| {
            let mut rng = ChaCha20Rng::seed_from_u64(1);
            b.iter(|| set_up(&scheme, &params, &db, &mut rng));
        });
    }
    g.finish();
}

fn search(c: &mut Criterion) {
    let results = 100_000u64;
    let mut db = Multimap::new();
    db.insert(b"big".to_vec(), (0..results).collect());
    let mut g = c.benchmark_group("search");
    g.sample_size(20);
    g.throughput(Throughput::Elements(results));
    for (name, params) in CONFIGS {
        let scheme = sesame_sse::scheme(name).expect("registered");
        let params = Params::parse(params).expect("valid");
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let (mut client, mut ch) = set_up(&scheme, &params, &db, &mut rng);
        g.bench_function(BenchmarkId::new(name, &params), |b| {
            b.iter(|| {
                let ids = client.search(&mut rng, &mut ch, b"big").expect("search");
                assert_eq!(ids.len() as u64, results);
            });
        });
    }
    g.finish();
}

criterion_group!(benches, setup, search);
criterion_main!(benches);
