//! The generic suite: every registered range protocol against a plaintext
//! oracle, over random interleavings of inserts, deletes (of present and
//! absent pairs) and queries, with duplicates, empty ranges, full ranges
//! and the extreme values, a client save/restore and a server restart
//! over the same store in the middle of each run.
//!
//! `SESAME_RANGE_OPS` sets the operations per run (default 240). Protocols
//! over CLOZ (a second per comparison) run only with
//! `SESAME_RANGE_SLOW=1`; their own tests cover them at tiny sizes.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sesame_core::{Error, Params, Service, Store};
use sesame_range::{protocols, CachePolicy, LocalRange, PageConfig, PagedStore, RangeProtocol};
use sesame_store::MemoryStore;

mod support;

fn ops() -> usize {
    std::env::var("SESAME_RANGE_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(240)
}

fn slow_allowed() -> bool {
    std::env::var("SESAME_RANGE_SLOW").is_ok_and(|v| v == "1")
}

fn selected() -> Vec<RangeProtocol> {
    let all = protocols();
    all.into_iter()
        .filter(|p| slow_allowed() || !p.descriptor.name.contains("cloz"))
        .collect()
}

/// A plaintext oracle: a multiset of (value, payload) pairs.
#[derive(Default)]
struct Oracle {
    pairs: Vec<(u64, Vec<u8>)>,
}

impl Oracle {
    fn insert(&mut self, v: u64, d: &[u8]) {
        self.pairs.push((v, d.to_vec()));
    }
    fn delete(&mut self, v: u64, d: &[u8]) -> bool {
        match self.pairs.iter().position(|(x, y)| *x == v && y == d) {
            Some(i) => {
                self.pairs.swap_remove(i);
                true
            }
            None => false,
        }
    }
    fn query(&self, lo: u64, hi: u64) -> Vec<(u64, Vec<u8>)> {
        support::oracle(&self.pairs, lo, hi)
    }
}

/// A protocol in process over a memory store, with `bits`-bit values.
fn run(protocol: RangeProtocol, bits: u32, page: PageConfig, rng: &mut ChaCha20Rng) -> LocalRange {
    let mut params = Params::new();
    params.set("bits", bits);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    LocalRange::new(protocol, &params, page, store, rng)
        .unwrap_or_else(|e| panic!("{}: {e}", protocol.descriptor.name))
}

fn value(rng: &mut ChaCha20Rng, bits: u32, pool: &[u64]) -> u64 {
    let max = support::max_value(bits);
    match rng.gen_range(0..10) {
        0 => 0,
        1 => max,
        2..=5 if !pool.is_empty() => pool[rng.gen_range(0..pool.len())],
        _ => rng.gen_range(0..=max),
    }
}

fn exercise(protocol: RangeProtocol, bits: u32, page: PageConfig, seed: u64, n: usize) {
    let name = protocol.descriptor.name;
    let ctx = format!(
        "{name} (bits={bits}, page={}, cache={} {}, seed={seed})",
        page.page_size, page.cache_blocks, page.policy
    );
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut run = run(protocol, bits, page, &mut rng);
    let mut oracle = Oracle::default();
    let mut pool: Vec<u64> = Vec::new();

    // Construction stage: a batch of records, with duplicates.
    let initial: Vec<(u64, Vec<u8>)> = (0..n / 4)
        .map(|i| {
            let v = value(&mut rng, bits, &pool);
            pool.push(v);
            (v, format!("r{}", i % 7).into_bytes())
        })
        .collect();
    run.client
        .build(&mut rng, &mut run.channel, &initial)
        .unwrap_or_else(|e| panic!("{ctx}: build: {e}"));
    for (v, d) in &initial {
        oracle.insert(*v, d);
    }

    for step in 0..n {
        if step == n / 2 {
            run.restart()
                .unwrap_or_else(|e| panic!("{ctx}: restart: {e}"));
        }
        match rng.gen_range(0..10) {
            0..=3 => {
                let v = value(&mut rng, bits, &pool);
                let d = format!("r{}", rng.gen_range(0..7)).into_bytes();
                pool.push(v);
                run.client
                    .insert(&mut rng, &mut run.channel, v, &d)
                    .unwrap_or_else(|e| panic!("{ctx}: step {step}: insert {v}: {e}"));
                oracle.insert(v, &d);
            }
            4..=5 => {
                let (v, d) = if rng.gen_bool(0.7) && !oracle.pairs.is_empty() {
                    oracle.pairs[rng.gen_range(0..oracle.pairs.len())].clone()
                } else {
                    (value(&mut rng, bits, &pool), b"absent".to_vec())
                };
                let got = run
                    .client
                    .delete(&mut rng, &mut run.channel, v, &d)
                    .unwrap_or_else(|e| panic!("{ctx}: step {step}: delete {v}: {e}"));
                assert_eq!(got, oracle.delete(v, &d), "{ctx}: step {step}: delete {v}");
            }
            _ => {
                let a = value(&mut rng, bits, &pool);
                let b = value(&mut rng, bits, &pool);
                let (lo, hi) = match rng.gen_range(0..8) {
                    0 => (a.max(b), a.min(b)),
                    1 => (a, a),
                    _ => (a.min(b), a.max(b)),
                };
                let answer = run
                    .client
                    .query(&mut rng, &mut run.channel, lo, hi)
                    .unwrap_or_else(|e| panic!("{ctx}: step {step}: query [{lo}, {hi}]: {e}"));
                assert_eq!(
                    answer.records,
                    oracle.query(lo, hi),
                    "{ctx}: step {step}: query [{lo}, {hi}]"
                );
            }
        }
    }
    let max = support::max_value(bits);
    let full = run
        .client
        .query(&mut rng, &mut run.channel, 0, max)
        .unwrap_or_else(|e| panic!("{ctx}: full query: {e}"));
    assert_eq!(full.records, oracle.query(0, max), "{ctx}: full range");
    assert!(
        run.client.client_storage_bytes() > 0,
        "{ctx}: client storage"
    );
}

#[test]
fn every_protocol_is_registered_once_with_a_range_descriptor() {
    let all = protocols();
    let mut names: Vec<_> = all.iter().map(|p| p.descriptor.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), all.len(), "duplicate protocol names");
    for p in &all {
        assert_eq!(
            p.descriptor.kind,
            sesame_core::SchemeKind::Range,
            "{}",
            p.descriptor.name
        );
        assert!(p.descriptor.supports(sesame_core::QueryKind::Range));
        assert!(sesame_range::protocol(p.descriptor.name).is_some());
        assert!(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(p.descriptor.doc)
                .exists(),
            "{}: missing doc page {}",
            p.descriptor.name,
            p.descriptor.doc
        );
    }
}

#[test]
fn every_protocol_equals_the_oracle_with_small_pages_and_no_cache() {
    let page = support::tiny_pages();
    for (i, p) in selected().into_iter().enumerate() {
        exercise(p, 8, page, 10 + i as u64, ops());
    }
}

#[test]
fn every_protocol_equals_the_oracle_with_32_bit_values_and_a_cache() {
    let policies = [CachePolicy::Lru, CachePolicy::Lfu, CachePolicy::Fifo];
    for (i, p) in selected().into_iter().enumerate() {
        let page = PageConfig {
            page_size: 512,
            cache_blocks: 8,
            policy: policies[i % 3],
        };
        exercise(p, 32, page, 100 + i as u64, ops());
    }
}

#[test]
fn every_protocol_equals_the_oracle_with_default_pages() {
    for (i, p) in selected().into_iter().enumerate() {
        exercise(p, 20, PageConfig::default(), 200 + i as u64, ops() / 2);
    }
}

#[test]
fn every_protocol_refuses_garbage_requests_without_panicking() {
    let inner: Arc<dyn Store> = Arc::new(MemoryStore::new());
    for p in selected() {
        let page = PageConfig::default();
        let paged = PagedStore::new(Arc::clone(&inner), page).expect("page config");
        let mut server = p
            .server(Arc::new(paged), &page.with(&Params::new()))
            .expect("server");
        for garbage in [&b""[..], &[0xff; 3][..], &[1, 200, 200, 200, 200][..]] {
            assert!(
                server.handle(garbage).is_err(),
                "{}: garbage {garbage:?} accepted",
                p.descriptor.name
            );
        }
        assert!(
            (p.restore_client)(b"not a state").is_err(),
            "{}",
            p.descriptor.name
        );
    }
}

#[test]
fn the_registry_holds_every_protocol_of_seed_004() {
    for name in [
        "bplus-plain",
        "bplus-bclo",
        "bplus-clww",
        "bplus-lewi-wu",
        "bplus-cloz",
        "bplus-fh-ope",
        "kerschbaum-tueno",
        "pope",
        "log-brc-pibas",
        "log-brc-2lev",
        "path-oram",
    ] {
        assert!(
            sesame_range::protocol(name).is_some(),
            "{name} is not registered"
        );
    }
}

/// Every protocol checks its input the same way (the provided operations
/// of `RangeClient`): a value beyond `bits` bits is refused in an insert,
/// a delete and either end of a query (Log-BRC and POPE included, which
/// used to clamp or pass such a query on), and `lo > hi` is empty.
#[test]
fn every_protocol_refuses_values_beyond_its_width() {
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    for p in selected() {
        let name = p.descriptor.name;
        let mut r = run(p, 8, PageConfig::default(), &mut rng);
        r.insert(&mut rng, 3, b"x")
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for (lo, hi) in [(0, 256), (256, 300), (0, u64::MAX)] {
            let got = r.query(&mut rng, lo, hi);
            assert!(
                matches!(got, Err(Error::InvalidArgument(_))),
                "{name}: [{lo}, {hi}] gave {got:?}"
            );
        }
        let got = r.insert(&mut rng, 256, b"x");
        assert!(
            matches!(got, Err(Error::InvalidArgument(_))),
            "{name}: insert 256 gave {got:?}"
        );
        let empty = r
            .query(&mut rng, 5, 4)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(empty.records.is_empty(), "{name}");
        let all = r
            .query(&mut rng, 0, 255)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(all.records, vec![(3, b"x".to_vec())], "{name}");
    }
}
