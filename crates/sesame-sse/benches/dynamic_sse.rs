//! Seed 000's dynamic schemes: UE operations, FAST / UEDSSE / SIMPLE
//! updates (client preparation alone and the whole in-process round) and
//! searches (results/s) over 100 and 1000 matching documents.

// criterion_group! and criterion_main! generate undocumented items.
#![allow(missing_docs)]

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{LocalChannel, Params};
use sesame_sse::uedsse::{UeKey, PAYLOAD_LEN};
use sesame_sse::{Multimap, UpdateOp};
use sesame_store::MemoryStore;

const DYNAMIC: [&str; 3] = ["fast", "uedsse", "simple"];

fn ue(c: &mut Criterion) {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let k = UeKey::generate(&mut rng);
    let k2 = UeKey::generate(&mut rng);
    let token = k.update_token(&k2);
    let m = [0x5a; PAYLOAD_LEN];
    let ct = k.encrypt(&m).expect("encodes");
    let ct2 = token.re_encrypt(&ct).expect("point");
    let mut g = c.benchmark_group("ue");
    g.throughput(Throughput::Elements(1));
    let mut i = 0u64;
    g.bench_function("enc", |b| {
        b.iter(|| {
            // A different payload each time: the encoding's tries vary.
            i += 1;
            let mut p = m;
            p[..8].copy_from_slice(&i.to_le_bytes());
            k.encrypt(&p).expect("encodes")
        })
    });
    g.bench_function("re_enc", |b| {
        b.iter(|| token.re_encrypt(&ct).expect("point"))
    });
    g.bench_function("dec", |b| b.iter(|| k2.decrypt(&ct2).expect("decodes")));
    g.bench_function("token", |b| b.iter(|| k.update_token(&k2)));
    g.finish();
}

fn update(c: &mut Criterion) {
    let mut g = c.benchmark_group("update");
    g.throughput(Throughput::Elements(1));
    for name in DYNAMIC {
        let scheme = sesame_sse::scheme(name).expect("registered");
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let mut client = (scheme.new_client)(&mut rng, &Params::new()).expect("client");
        let keywords = [b"keyword".to_vec()];
        let mut doc = 0u64;
        g.bench_function(BenchmarkId::new("prepare", name), |b| {
            b.iter(|| {
                doc += 1;
                client
                    .prepare_update(&mut rng, UpdateOp::Add, doc, &keywords)
                    .expect("update")
            })
        });
        let mut ch = LocalChannel::new(
            scheme
                .server(Arc::new(MemoryStore::new()), &sesame_core::Params::new())
                .expect("server"),
        );
        client
            .setup(&mut rng, &mut ch, &Multimap::new())
            .expect("setup");
        g.bench_function(BenchmarkId::new("round", name), |b| {
            b.iter(|| {
                doc += 1;
                client
                    .update(&mut rng, &mut ch, UpdateOp::Add, doc, &keywords)
                    .expect("update")
            })
        });
    }
    g.finish();
}

fn search(c: &mut Criterion) {
    let mut g = c.benchmark_group("search");
    g.sample_size(10);
    for results in [100u64, 1000] {
        let mut db = Multimap::new();
        db.insert(b"w".to_vec(), (0..results).collect());
        g.throughput(Throughput::Elements(results));
        for name in DYNAMIC {
            let scheme = sesame_sse::scheme(name).expect("registered");
            let mut rng = ChaCha20Rng::seed_from_u64(3);
            let mut client = (scheme.new_client)(&mut rng, &Params::new()).expect("client");
            let mut ch = LocalChannel::new(
                scheme
                    .server(Arc::new(MemoryStore::new()), &sesame_core::Params::new())
                    .expect("server"),
            );
            client.setup(&mut rng, &mut ch, &db).expect("setup");
            g.bench_function(BenchmarkId::new(name, results), |b| {
                b.iter(|| {
                    let ids = client.search(&mut rng, &mut ch, b"w").expect("search");
                    assert_eq!(ids.len() as u64, results);
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, ue, update, search);
criterion_main!(benches);
