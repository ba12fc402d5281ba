//! Path ORAM access time: Sesame's Path ORAM against Meta's `oram` crate
//! (`DefaultOram`, a doubly oblivious Path ORAM with Z = 4, no encryption)
//! for the same capacity and block size, in the same run.
//!
//! Three variants per (capacity, block size), each a random read:
//! - `sesame-direct`: our client calling our server in process
//!   ([`PathOramServer`] implements [`PathIo`]) over a `MemoryStore`: the
//!   ORAM logic, AES-256-GCM-SIV of every bucket and the store, no message
//!   encoding;
//! - `sesame-channel`: the same through a `LocalChannel` (every request
//!   and response encoded and decoded, as a real deployment does);
//! - `meta-oram`: `oram::DefaultOram<BlockValue<B>>::read`.
//!
//! Both ORAMs hold every block (ours is bulk-initialised with
//! `PathOram::initialize`, Meta's initialises itself). Measurement time is
//! short (`SESAME_BENCH_SECS`, default 2 s per variant).
//!
//! ```text
//! cargo bench -p sesame-range --bench path_oram
//! ```

// `criterion_group!` generates an undocumented `pub fn`.
#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use oram::{BlockValue, DefaultOram, Oram};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sesame_core::{LocalChannel, Typed};
use sesame_range::path_oram::oram::{ChannelIo, PathIo, PathOram, PathOramServer};
use sesame_store::MemoryStore;

const LOG_CAPACITIES: [u32; 2] = [14, 16];

fn fresh_server() -> PathOramServer {
    PathOramServer::new(Arc::new(MemoryStore::new()))
}

fn loaded(rng: &mut StdRng, io: &mut dyn PathIo, log: u32, block: usize) -> PathOram {
    let mut o = PathOram::new(rng, log, block).expect("ORAM parameters");
    o.initialize(rng, io, 1 << log, 256, |a| vec![a as u8; block])
        .expect("initialisation");
    o
}

fn bench_block<const B: usize>(c: &mut Criterion) {
    let mut group = c.benchmark_group(format!("path_oram_read/block={B}"));
    let secs = std::env::var("SESAME_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(secs));
    for log in LOG_CAPACITIES {
        let n = 1u64 << log;
        let mut rng = StdRng::seed_from_u64(1);
        {
            let mut server = fresh_server();
            let mut o = loaded(&mut rng, &mut server, log, B);
            group.bench_function(BenchmarkId::new("sesame-direct", n), |b| {
                b.iter(|| {
                    let a = rng.gen_range(0..n);
                    black_box(o.read(&mut rng, &mut server, a).expect("read"))
                })
            });
        }
        {
            let mut chan = LocalChannel::new(Typed(fresh_server()));
            let mut o = loaded(&mut rng, &mut ChannelIo(&mut chan), log, B);
            group.bench_function(BenchmarkId::new("sesame-channel", n), |b| {
                b.iter(|| {
                    let a = rng.gen_range(0..n);
                    black_box(
                        o.read(&mut rng, &mut ChannelIo(&mut chan), a)
                            .expect("read"),
                    )
                })
            });
        }
        {
            let mut o = DefaultOram::<BlockValue<B>>::new(n, &mut rng).expect("oram crate");
            group.bench_function(BenchmarkId::new("meta-oram", n), |b| {
                b.iter(|| {
                    let a = rng.gen_range(0..n);
                    black_box(o.read(a, &mut rng).expect("read"))
                })
            });
        }
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    bench_block::<64>(c);
    bench_block::<4096>(c);
}

criterion_group!(path_oram, benches);
criterion_main!(path_oram);
