//! Aura insertion on the client, per entry, with the default parameters
//! (h = 13, b = 2^20: GGM depth 20):
//!
//! - `aura_insert/doc300`: one document of 300 keywords into a fresh
//!   client (one `prepare_update`, entries computed on every core the
//!   process may use);
//! - `aura_insert/kw300`: one keyword added to 300 documents (300
//!   `prepare_update` calls of one entry each);
//! - `aura_insert/batch30x10`: 30 documents of 10 keywords each (a pool
//!   of 60 keywords, each in five documents on average) prepared together
//!   with one `prepare_updates`, as `sesame add` does;
//! - `aura_insert/setup`: `setup` of 30 keywords x 10 documents (300
//!   entries; entries of one keyword share their GGM tree), client and
//!   in-process server;
//! - `aura_entry_core`: the GGM leaves and pads of one entry, computed
//!   leaf by leaf (`GgmTree::leaf` 13 times, each from the root: the
//!   earlier code path) and in one shared-prefix descent
//!   (`GgmTree::leaves`), in the same run.
//!
//! ```text
//! cargo bench -p sesame-sse --bench aura_insert
//! taskset -c 0 cargo bench -p sesame-sse --bench aura_insert   # one core
//! ```

// criterion_group! and criterion_main! generate undocumented items.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{LocalChannel, Params};
use sesame_crypto::{Aes128Prf, GgmTree, Key};
use sesame_sse::{KeywordClient, Multimap, UpdateOp};
use sesame_store::MemoryStore;

const ENTRIES: u64 = 300;

fn fresh_client(rng: &mut ChaCha20Rng) -> Box<dyn KeywordClient> {
    let scheme = sesame_sse::aura::scheme();
    (scheme.new_client)(rng, &Params::new()).expect("client")
}

fn insert(c: &mut Criterion) {
    let mut g = c.benchmark_group("aura_insert");
    g.sample_size(20);
    g.throughput(Throughput::Elements(ENTRIES));
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let keywords: Vec<Vec<u8>> = (0..ENTRIES)
        .map(|i| format!("keyword-{i}").into_bytes())
        .collect();
    let state = fresh_client(&mut rng).save_state().expect("state");
    let restore = sesame_sse::aura::scheme().restore_client;
    g.bench_function("doc300", |b| {
        b.iter_batched(
            || restore(&state).expect("restore"),
            |mut client| {
                black_box(
                    client
                        .prepare_update(&mut rng, UpdateOp::Add, 1, &keywords)
                        .expect("update"),
                );
            },
            BatchSize::LargeInput,
        )
    });
    let one = [b"keyword".to_vec()];
    g.bench_function("kw300", |b| {
        b.iter_batched(
            || restore(&state).expect("restore"),
            |mut client| {
                for doc in 1..=ENTRIES {
                    black_box(
                        client
                            .prepare_update(&mut rng, UpdateOp::Add, doc, &one)
                            .expect("update"),
                    );
                }
            },
            BatchSize::LargeInput,
        )
    });
    // The path of `sesame add`: 30 documents of 10 keywords each, prepared
    // together (`prepare_updates`); a keyword of a pool of 60 is in five
    // documents on average, as words recur across a corpus.
    let docs: Vec<Vec<Vec<u8>>> = (0..30u64)
        .map(|d| {
            (0..10u64)
                .map(|k| format!("keyword-{}", (d * 7 + k * 13) % 60).into_bytes())
                .collect()
        })
        .collect();
    g.bench_function("batch30x10", |b| {
        b.iter_batched(
            || restore(&state).expect("restore"),
            |mut client| {
                let updates: Vec<(UpdateOp, u64, &[Vec<u8>])> = docs
                    .iter()
                    .enumerate()
                    .map(|(d, words)| (UpdateOp::Add, d as u64 + 1, words.as_slice()))
                    .collect();
                black_box(client.prepare_updates(&mut rng, &updates).expect("updates"));
            },
            BatchSize::LargeInput,
        )
    });
    let mut db = Multimap::new();
    for w in 0..30u64 {
        db.insert(
            format!("keyword-{w}").into_bytes(),
            (0..10).map(|d| w * 100 + d).collect(),
        );
    }
    g.bench_function("setup", |b| {
        b.iter_batched(
            || {
                let server = sesame_sse::aura::scheme()
                    .server(Arc::new(MemoryStore::new()), &Params::new())
                    .expect("server");
                (restore(&state).expect("restore"), LocalChannel::new(server))
            },
            |(mut client, mut ch)| client.setup(&mut rng, &mut ch, &db).expect("setup"),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

/// The GGM leaves and pads of one entry (h = 13, depth 20, a fresh tag and
/// tree each time), leaf by leaf from the root against one shared descent.
fn entry_core(c: &mut Criterion) {
    const H: u8 = 13;
    const DEPTH: u8 = 20;
    let mut g = c.benchmark_group("aura_entry_core");
    g.throughput(Throughput::Elements(1));
    let mut n = 0u64;
    let mut next = || {
        n += 1;
        let mut tag = [0u8; 16];
        tag[..8].copy_from_slice(&n.to_le_bytes());
        let tree = GgmTree::new(Key::from_bytes(root(n)), DEPTH).expect("depth <= 64");
        let positions: Vec<u64> = sesame_sse::aura::positions(&tag, H, DEPTH).collect();
        (tag, tree, positions)
    };
    let pads = |leaves: &[Key<16>], tag: &[u8; 16]| -> Vec<[u8; 16]> {
        leaves
            .iter()
            .map(|l| Aes128Prf::new(l).eval_block(tag))
            .collect()
    };
    g.bench_function("per_leaf", |b| {
        b.iter_batched(
            &mut next,
            |(tag, tree, positions)| {
                let leaves: Vec<Key<16>> = positions
                    .iter()
                    .map(|&p| tree.leaf(p).expect("in range"))
                    .collect();
                black_box(pads(&leaves, &tag));
            },
            BatchSize::SmallInput,
        )
    });
    g.bench_function("shared_descent", |b| {
        b.iter_batched(
            &mut next,
            |(tag, tree, positions)| {
                let leaves = tree.leaves(&positions).expect("in range");
                black_box(pads(&leaves, &tag));
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

/// A root per entry: the first 16 bytes of a counter's hash.
fn root(n: u64) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(&sesame_crypto::hash::sha256(&n.to_le_bytes())[..16]);
    out
}

criterion_group!(benches, insert, entry_core);
criterion_main!(benches);
