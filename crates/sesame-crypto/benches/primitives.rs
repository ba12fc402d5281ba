//! Criterion micro-benchmarks of every primitive, beside the hardware limits
//! measured in the same run (bulk AES-128-CTR and SHA-256 from the raw
//! RustCrypto crates) and the cost of call counting (the counted AES PRF
//! against the same raw `aes` call without counting).
//!
//! ```text
//! cargo bench -p sesame-crypto --bench primitives -- --warm-up-time 1 --measurement-time 2
//! ```

// `criterion_group!` generates an undocumented `pub fn`.
#![allow(missing_docs)]

// Closures hand their results to `std::hint::black_box` and return `()`:
// criterion 0.5's own `black_box` (a `read_volatile`) reads a returned
// `[u8; 16]` byte by byte, which costs more than the AES call measured.

use std::hint::black_box;

use aes::cipher::{BlockEncrypt, KeyInit, KeyIvInit, StreamCipher};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sha2::Digest;

use sesame_crypto::counter::{self, Primitive};
use sesame_crypto::hash::sha256;
use sesame_crypto::{
    Aes128Prf, Aes256GcmSiv, AesCtrPrg, BloomFilter, BloomKey, FeistelPrp, GgmTree, HmacPrf, Key,
    KnuthPrp, MerkleTree, Prf, Prp,
};

const MIB: usize = 1 << 20;

fn limits(c: &mut Criterion) {
    let mut g = c.benchmark_group("limits");
    g.throughput(Throughput::Bytes(MIB as u64));
    let mut buf = vec![0u8; MIB];
    g.bench_function("aes128_ctr_keystream_1MiB", |b| {
        let mut ctr = ctr::Ctr128BE::<aes::Aes128>::new(&[1u8; 16].into(), &[0u8; 16].into());
        b.iter(|| {
            ctr.apply_keystream(&mut buf);
            black_box(&buf);
        })
    });
    let data = vec![0x5au8; MIB];
    g.bench_function("sha256_raw_1MiB", |b| {
        b.iter(|| {
            black_box(sha2::Sha256::digest(black_box(&data)));
        })
    });
    g.finish();
}

fn prf(c: &mut Criterion) {
    let key = Key::<16>::from_bytes([1; 16]);
    let prf = Aes128Prf::new(&key);
    let raw = aes::Aes128Enc::new(key.as_bytes().into());
    let mut g = c.benchmark_group("prf");
    g.throughput(Throughput::Bytes(16));
    g.bench_function("aes128_single_counted", |b| {
        b.iter(|| {
            black_box(prf.eval(black_box(&[7u8; 16])));
        })
    });
    g.bench_function("aes128_single_raw_uncounted", |b| {
        b.iter(|| {
            let mut block = aes::Block::from(*black_box(&[7u8; 16]));
            raw.encrypt_block(&mut block);
            let out: [u8; 16] = block.into();
            black_box(out);
        })
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("counter_record_alone", |b| {
        b.iter(|| {
            counter::record(Primitive::Prf, black_box(1));
        })
    });
    g.throughput(Throughput::Bytes(16));
    // Latency: each input is the previous output.
    g.bench_function("aes128_single_chained_counted", |b| {
        let mut x = [7u8; 16];
        b.iter(|| {
            x = prf.eval(&x);
            black_box(&x);
        })
    });
    g.bench_function("aes128_single_chained_raw_uncounted", |b| {
        let mut x = [7u8; 16];
        b.iter(|| {
            let mut block = aes::Block::from(x);
            raw.encrypt_block(&mut block);
            x = block.into();
            black_box(&x);
        })
    });
    g.bench_function("aes128_single_chained_raw_in_place", |b| {
        let mut x = aes::Block::from([7u8; 16]);
        b.iter(|| {
            raw.encrypt_block(&mut x);
            black_box(&x);
        })
    });
    for n in [16usize, 256, 1024, 16384] {
        let inputs: Vec<[u8; 16]> = (0..n as u128).map(|i| i.to_le_bytes()).collect();
        let mut out = vec![[0u8; 16]; n];
        g.throughput(Throughput::Bytes(16 * n as u64));
        g.bench_with_input(BenchmarkId::new("aes128_batch", n), &n, |b, _| {
            b.iter(|| {
                prf.eval_batch(black_box(&inputs), &mut out)
                    .expect("equal lengths");
                black_box(&out);
            })
        });
    }
    let hmac = HmacPrf::new(&Key::from_bytes([2; 32]));
    for len in [32usize, 1024] {
        let input = vec![3u8; len];
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("hmac_sha256", len), &len, |b, _| {
            b.iter(|| {
                black_box(hmac.eval(black_box(&input)));
            })
        });
    }
    g.finish();
}

fn prg(c: &mut Criterion) {
    let mut prg = AesCtrPrg::new(&Key::from_bytes([3; 16]));
    let mut g = c.benchmark_group("prg");
    for len in [16usize, 4096, MIB] {
        let mut buf = vec![0u8; len];
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_with_input(BenchmarkId::new("fill_bytes", len), &len, |b, _| {
            b.iter(|| {
                prg.fill_bytes(&mut buf);
                black_box(&buf);
            })
        });
    }
    g.throughput(Throughput::Elements(1));
    g.bench_function("next_u64", |b| b.iter(|| prg.next_u64()));
    g.bench_function("next_bit", |b| b.iter(|| prg.next_bit()));
    g.bench_function("below_1000", |b| {
        b.iter(|| {
            black_box(prg.below(black_box(1000)).expect("n > 0"));
        })
    });
    g.finish();
}

fn prp(c: &mut Criterion) {
    let key = Key::<16>::from_bytes([4; 16]);
    let mut g = c.benchmark_group("prp");
    g.throughput(Throughput::Elements(1));
    let knuth = KnuthPrp::new(&key, 1 << 16).expect("valid domain");
    g.bench_function("knuth_permute_n65536", |b| {
        let mut x = 0u64;
        b.iter(|| {
            x = (x + 1) & 0xffff;
            knuth.permute(black_box(x)).expect("in domain")
        })
    });
    g.bench_function("knuth_new_n65536", |b| {
        b.iter(|| {
            black_box(KnuthPrp::new(&key, black_box(1 << 16)).expect("valid domain"));
        })
    });
    for n in [1_000_000u64, 1 << 32] {
        let f = FeistelPrp::new(&key, n).expect("n > 0");
        g.bench_with_input(BenchmarkId::new("feistel_permute", n), &n, |b, &n| {
            let mut x = 0u64;
            b.iter(|| {
                x = (x + 1) % n;
                f.permute(black_box(x)).expect("in domain")
            })
        });
    }
    g.finish();
}

fn aead(c: &mut Criterion) {
    let a = Aes256GcmSiv::new(&Key::from_bytes([5; 32]));
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let pt = vec![6u8; 4096];
    let ct = a.seal(&mut rng, b"aad", &pt).expect("short");
    let mut g = c.benchmark_group("aead");
    g.throughput(Throughput::Bytes(4096));
    g.bench_function("gcm_siv_seal_4KiB", |b| {
        b.iter(|| {
            black_box(a.seal(&mut rng, b"aad", black_box(&pt)).expect("short"));
        })
    });
    g.bench_function("gcm_siv_open_4KiB", |b| {
        b.iter(|| {
            black_box(a.open(b"aad", black_box(&ct)).expect("authentic"));
        })
    });
    g.finish();
}

fn hash(c: &mut Criterion) {
    let data = vec![0x5au8; MIB];
    let mut g = c.benchmark_group("hash");
    g.throughput(Throughput::Bytes(MIB as u64));
    g.bench_function("sha256_1MiB", |b| {
        b.iter(|| {
            black_box(sha256(black_box(&data)));
        })
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("ro_2_parts", |b| {
        b.iter(|| {
            black_box(sesame_crypto::hash::ro(
                "bench",
                &[black_box(b"part one"), b"part two"],
            ));
        })
    });
    g.finish();
}

fn bloom(c: &mut Criterion) {
    let key = BloomKey::new(&Key::from_bytes([7; 32]));
    let mut f = BloomFilter::with_rate(100_000, 0.01).expect("valid");
    let mut g = c.benchmark_group("bloom");
    g.throughput(Throughput::Elements(1));
    let mut i = 0u64;
    g.bench_function("insert_n1e5_p1pct", |b| {
        b.iter(|| {
            i += 1;
            f.insert(&key, &i.to_le_bytes());
        })
    });
    g.bench_function("contains_n1e5_p1pct", |b| {
        b.iter(|| {
            i += 1;
            f.contains(&key, &i.to_le_bytes())
        })
    });
    g.finish();
}

fn ggm(c: &mut Criterion) {
    let mut g = c.benchmark_group("ggm");
    g.throughput(Throughput::Elements(1));
    for depth in [16u8, 32] {
        let tree = GgmTree::new(Key::from_bytes([8; 16]), depth).expect("depth <= 64");
        g.bench_with_input(BenchmarkId::new("leaf", depth), &depth, |b, _| {
            let mut i = 0u64;
            b.iter(|| {
                i = (i + 1) & 0xffff;
                black_box(tree.leaf(black_box(i)).expect("in range"));
            })
        });
    }
    let tree = GgmTree::new(Key::from_bytes([8; 16]), 20).expect("depth <= 64");
    // Thirteen spread positions (an Aura entry's), one descent each against
    // one shared descent; per leaf.
    g.throughput(Throughput::Elements(13));
    let mut rng = ChaCha20Rng::seed_from_u64(20);
    let sets: Vec<Vec<u64>> = (0..64)
        .map(|_| (0..13).map(|_| rng.next_u64() & 0xf_ffff).collect())
        .collect();
    let mut k = 0usize;
    g.bench_function("leaf_x13_depth20", |b| {
        b.iter(|| {
            k = (k + 1) % sets.len();
            for &p in &sets[k] {
                black_box(tree.leaf(p).expect("in range"));
            }
        })
    });
    g.bench_function("leaves_13_depth20", |b| {
        b.iter(|| {
            k = (k + 1) % sets.len();
            black_box(tree.leaves(&sets[k]).expect("in range"));
        })
    });
    g.throughput(Throughput::Elements(1));
    let revoked: Vec<u64> = (0..100u64).map(|i| i * 10_007).collect();
    g.bench_function("cover_depth20_revoked100", |b| {
        b.iter(|| {
            black_box(tree.cover(black_box(&revoked)).expect("in range"));
        })
    });
    g.finish();
}

fn merkle(c: &mut Criterion) {
    let leaves: Vec<[u8; 32]> = (0..1024u32)
        .map(|i| {
            let mut l = [0u8; 32];
            l[..4].copy_from_slice(&i.to_le_bytes());
            l
        })
        .collect();
    let tree = MerkleTree::build(&leaves);
    let proof = tree.proof(517).expect("in range");
    let root = tree.root();
    let mut g = c.benchmark_group("merkle");
    g.throughput(Throughput::Elements(1024));
    g.bench_function("build_1024", |b| {
        b.iter(|| {
            black_box(MerkleTree::build(black_box(&leaves)));
        })
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("verify_1024", |b| {
        b.iter(|| {
            black_box(proof.verify(&root, black_box(&leaves[517])));
        })
    });
    g.finish();
}

criterion_group!(benches, limits, prf, prg, prp, aead, hash, bloom, ggm, merkle);
criterion_main!(benches);
