//! Single dynamic updates: one keyword per update, 1,000 keywords in turn,
//! memory store, client and in-process server. Aura and SDd beside FAST
//! and SUISE, and a plaintext `HashMap<Vec<u8>, Vec<u64>>` doing the same
//! insertions (the floor: the workload with no cryptography, no encoding
//! and no store), in two shapes:
//!
//! - `single_update/in_turn/<scheme>`: one long-lived index; update `i`
//!   adds document `i` under keyword `i mod 1000`, so every keyword is
//!   added to again and again between no searches (one update per
//!   iteration; the index grows with the run);
//! - `single_update/fresh/<scheme>`: a fresh index per iteration, then
//!   1,000 updates, update `i` adding document `i` under keyword `i`
//!   (every update is its keyword's first); time per update is the
//!   iteration's over the 1,000 (`Throughput::Elements`).
//!
//! ```text
//! cargo bench -p sesame-sse --bench single_update
//! cargo bench -p sesame-sse --bench single_update -- --quick
//! ```
//!
//! With `SINGLE_UPDATE_FIXED=<shape>/<scheme>` set, the binary runs a
//! fixed workload instead of criterion, for `perf stat -e task-clock`
//! (CPU time, which the load of a shared machine moves far less than wall
//! time): `fresh/<scheme>` is 5 fresh indexes of 1,000 updates each,
//! `in_turn/<scheme>` one index, 1,000 updates to warm up, then 20,000.
//!
//! ```text
//! cargo bench -p sesame-sse --bench single_update --no-run
//! SINGLE_UPDATE_FIXED=fresh/sdd perf stat -e task-clock target/release/deps/single_update-*
//! ```

// criterion_group! and criterion_main! generate undocumented items.
#![allow(missing_docs)]

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, BatchSize, BenchmarkId, Criterion, Throughput};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{LocalChannel, Params};
use sesame_sse::UpdateOp;
use sesame_store::MemoryStore;

/// Keywords, one update each.
const UPDATES: u64 = 1000;

const SCHEMES: [&str; 4] = ["aura", "sdd", "fast", "suise"];

fn keywords() -> Vec<[Vec<u8>; 1]> {
    (0..UPDATES)
        .map(|i| [format!("keyword-{i}").into_bytes()])
        .collect()
}

/// Update `i` of a long-lived index adds document `i` under keyword
/// `i mod 1000`: every keyword is added to again and again, the index
/// grows with the run (one update per criterion iteration).
fn in_turn(c: &mut Criterion) {
    let mut g = c.benchmark_group("single_update");
    g.throughput(Throughput::Elements(1));
    let words = keywords();
    let mut map = HashMap::<Vec<u8>, Vec<u64>>::new();
    let mut doc = 0u64;
    g.bench_function(BenchmarkId::new("in_turn", "plaintext"), |b| {
        b.iter(|| {
            doc += 1;
            let [w] = &words[(doc % UPDATES) as usize];
            map.entry(w.clone()).or_default().push(doc);
        })
    });
    black_box(map);
    for name in SCHEMES {
        let scheme = sesame_sse::scheme(name).expect("registered");
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let mut client = (scheme.new_client)(&mut rng, &Params::new()).expect("client");
        let server = scheme
            .server(Arc::new(MemoryStore::new()), &Params::new())
            .expect("server");
        let mut ch = LocalChannel::new(server);
        let mut doc = 0u64;
        g.bench_function(BenchmarkId::new("in_turn", name), |b| {
            b.iter(|| {
                doc += 1;
                let w = &words[(doc % UPDATES) as usize];
                client
                    .update(&mut rng, &mut ch, UpdateOp::Add, doc, w)
                    .expect("update");
            })
        });
    }
    g.finish();
}

/// A fresh index each iteration, then 1,000 updates, each adding
/// document `i` under keyword `i`: every update is its keyword's first.
fn fresh(c: &mut Criterion) {
    let mut g = c.benchmark_group("single_update");
    g.sample_size(10);
    g.throughput(Throughput::Elements(UPDATES));
    let words = keywords();
    g.bench_function(BenchmarkId::new("fresh", "plaintext"), |b| {
        b.iter_batched(
            HashMap::<Vec<u8>, Vec<u64>>::new,
            |mut map| {
                for (doc, [w]) in (1..).zip(&words) {
                    map.entry(w.clone()).or_default().push(doc);
                }
                map
            },
            BatchSize::LargeInput,
        )
    });
    for name in SCHEMES {
        let scheme = sesame_sse::scheme(name).expect("registered");
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let mut keys = ChaCha20Rng::seed_from_u64(2);
        g.bench_function(BenchmarkId::new("fresh", name), |b| {
            b.iter_batched(
                || {
                    let client = (scheme.new_client)(&mut keys, &Params::new()).expect("client");
                    let server = scheme
                        .server(Arc::new(MemoryStore::new()), &Params::new())
                        .expect("server");
                    (client, LocalChannel::new(server))
                },
                |(mut client, mut ch)| {
                    for (doc, w) in (1..).zip(&words) {
                        client
                            .update(&mut rng, &mut ch, UpdateOp::Add, doc, w)
                            .expect("update");
                    }
                    (client, ch)
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

/// The fixed workload of `SINGLE_UPDATE_FIXED` (see the module doc).
fn fixed(spec: &str) {
    let (shape, name) = spec
        .split_once('/')
        .expect("SINGLE_UPDATE_FIXED is <fresh|in_turn>/<scheme>");
    let scheme = sesame_sse::scheme(name).expect("a registered scheme");
    let words = keywords();
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let (indexes, warm_up, updates) = match shape {
        "fresh" => (5, 0, UPDATES),
        "in_turn" => (1, UPDATES, 20 * UPDATES),
        other => panic!("unknown shape {other}: fresh or in_turn"),
    };
    let mut timed = std::time::Duration::ZERO;
    for _ in 0..indexes {
        let mut client = (scheme.new_client)(&mut rng, &Params::new()).expect("client");
        let server = scheme
            .server(Arc::new(MemoryStore::new()), &Params::new())
            .expect("server");
        let mut ch = LocalChannel::new(server);
        let mut start = std::time::Instant::now();
        for doc in 1..=warm_up + updates {
            if doc == warm_up + 1 {
                start = std::time::Instant::now();
            }
            let w = &words[(doc % UPDATES) as usize];
            client
                .update(&mut rng, &mut ch, UpdateOp::Add, doc, w)
                .expect("update");
        }
        timed += start.elapsed();
        black_box((client, ch));
    }
    let n = indexes * updates;
    println!(
        "{spec}: {n} updates, {:.2} µs of wall time each",
        timed.as_secs_f64() * 1e6 / n as f64
    );
}

criterion_group!(benches, in_turn, fresh);

fn main() {
    if let Ok(spec) = std::env::var("SINGLE_UPDATE_FIXED") {
        fixed(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
