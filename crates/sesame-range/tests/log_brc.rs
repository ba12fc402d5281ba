//! Logarithmic-BRC: the Best Range Cover, both protocols against a
//! plaintext oracle, the I/O of a query, one-round queries, malformed
//! input and client save/restore.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sesame_core::{Channel, Error, LocalChannel, Params, Service, Store};
use sesame_range::log_brc::{best_range_cover, path, Request};
use sesame_range::{protocol, CachePolicy, PageConfig, PagedStore, RangeClient, RangeProtocol};
use sesame_store::MemoryStore;

const PROTOCOLS: [&str; 2] = ["log-brc-pibas", "log-brc-2lev"];

use support::Record;

mod support;

struct Setup {
    inner: Arc<dyn Store>,
    paged: Arc<PagedStore>,
    channel: LocalChannel<Box<dyn Service>>,
    client: Box<dyn RangeClient>,
}

fn get(name: &str) -> RangeProtocol {
    protocol(name).unwrap_or_else(|| panic!("{name} is not registered"))
}

fn setup(name: &str, bits: u32, page: PageConfig, rng: &mut ChaCha20Rng) -> Setup {
    let mut params = Params::new();
    params.set("bits", bits);
    setup_with(name, &params, page, rng)
}

fn setup_with(name: &str, params: &Params, page: PageConfig, rng: &mut ChaCha20Rng) -> Setup {
    let p = get(name);
    let client = (p.new_client)(rng, &page.with(params)).unwrap();
    let inner: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let paged = Arc::new(PagedStore::new(Arc::clone(&inner), page).unwrap());
    let server = p.server(paged.clone(), &page.with(&Params::new())).unwrap();
    Setup {
        inner,
        paged,
        channel: LocalChannel::new(server),
        client,
    }
}

fn random_value(rng: &mut ChaCha20Rng, bits: u32, pool: &[u64]) -> u64 {
    let max = support::max_value(bits);
    match rng.gen_range(0..8) {
        0 => 0,
        1 => max,
        2..=4 if !pool.is_empty() => pool[rng.gen_range(0..pool.len())],
        _ => rng.gen_range(0..=max),
    }
}

/// The cover of `[lo, hi]` is exact (its nodes, left to right, tile the
/// interval) and minimal (no two siblings, which one parent would replace).
fn check_cover(lo: u64, hi: u64, bits: u32) {
    let cover = best_range_cover(lo, hi, bits);
    if lo > hi {
        assert!(cover.is_empty());
        return;
    }
    assert!(!cover.is_empty() && cover.len() <= 2 * bits as usize);
    let mut next = u128::from(lo);
    for node in &cover {
        assert!(node.level <= bits);
        let (a, b) = node.range();
        assert_eq!(
            u128::from(a),
            next,
            "gap or overlap in the cover of [{lo}, {hi}]"
        );
        next = u128::from(b) + 1;
    }
    assert_eq!(next, u128::from(hi) + 1);
    for pair in cover.windows(2) {
        let (x, y) = (pair[0], pair[1]);
        let siblings = x.level == y.level && x.index % 2 == 0 && y.index == x.index + 1;
        assert!(!siblings, "[{lo}, {hi}]: siblings {x:?} {y:?}");
    }
}

#[test]
fn the_cover_is_exact_and_minimal_on_every_interval_of_a_small_domain() {
    // Minimal: equal in size to the fewest nodes any tiling needs, found by
    // dynamic programming over all tilings.
    let bits = 5u32;
    let size = 1u64 << bits;
    for lo in 0..size {
        for hi in lo..size {
            check_cover(lo, hi, bits);
            // fewest[x] = tiles needed for [x, hi].
            let n = (hi - lo + 1) as usize;
            let mut fewest = vec![usize::MAX; n + 1];
            fewest[n] = 0;
            for start in (0..n).rev() {
                let x = lo + start as u64;
                for level in 0..=bits {
                    let len = 1usize << level;
                    if x.is_multiple_of(len as u64)
                        && start + len <= n
                        && fewest[start + len] != usize::MAX
                    {
                        fewest[start] = fewest[start].min(fewest[start + len] + 1);
                    }
                }
            }
            assert_eq!(
                best_range_cover(lo, hi, bits).len(),
                fewest[0],
                "[{lo}, {hi}]"
            );
        }
    }
    for lo in 1..size {
        check_cover(lo, lo - 1, bits);
    }
}

proptest! {
    #[test]
    fn covers_are_exact_and_minimal_for_any_width(
        a in any::<u64>(),
        b in any::<u64>(),
        bits in 1u32..=64,
    ) {
        let max = support::max_value(bits);
        let (a, b) = (a & max, b & max);
        check_cover(a.min(b), a.max(b), bits);
        check_cover(a.max(b), a.min(b), bits);
        check_cover(0, max, bits);
        // Every node of a value's path covers it, from leaf to root.
        let p = path(a, bits);
        prop_assert_eq!(p.len(), bits as usize + 1);
        for (level, node) in p.iter().enumerate() {
            prop_assert_eq!(node.level, level as u32);
            let (lo, hi) = node.range();
            prop_assert!(lo <= a && a <= hi);
        }
    }
}

/// Random interleavings of inserts, deletes (present and absent pairs) and
/// queries, with duplicates and the extreme values, against the oracle.
fn interleave(name: &str, bits: u32, page: PageConfig, seed: u64, steps: usize) {
    let mut params = Params::new();
    params.set("bits", bits);
    interleave_with(name, &params, page, seed, steps);
}

fn interleave_with(name: &str, params: &Params, page: PageConfig, seed: u64, steps: usize) {
    let bits: u32 = params.get_or("bits", 32).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut s = setup_with(name, params, page, &mut rng);
    let mut pool = Vec::new();
    let initial: Vec<Record> = (0..30)
        .map(|i| {
            let v = random_value(&mut rng, bits, &pool);
            pool.push(v);
            (v, vec![i % 3])
        })
        .collect();
    s.client.build(&mut rng, &mut s.channel, &initial).unwrap();
    let mut records = initial;
    for step in 0..steps {
        let ctx = format!("{name} bits={bits} seed={seed} step={step}");
        match rng.gen_range(0..10) {
            0..=2 => {
                let v = random_value(&mut rng, bits, &pool);
                let d = vec![rng.gen_range(0..3u8)];
                pool.push(v);
                s.client.insert(&mut rng, &mut s.channel, v, &d).unwrap();
                records.push((v, d));
            }
            3..=4 => {
                let (v, d) = if rng.gen_bool(0.6) && !records.is_empty() {
                    records[rng.gen_range(0..records.len())].clone()
                } else {
                    (random_value(&mut rng, bits, &pool), vec![9])
                };
                let present = records.iter().position(|r| r.0 == v && r.1 == d);
                let got = s.client.delete(&mut rng, &mut s.channel, v, &d).unwrap();
                assert_eq!(got, present.is_some(), "{ctx}");
                if let Some(i) = present {
                    records.swap_remove(i);
                }
            }
            5 => {
                let saved = s.client.save_state().unwrap();
                s.client = (get(name).restore_client)(&saved).unwrap();
            }
            _ => {
                let a = random_value(&mut rng, bits, &pool);
                let b = random_value(&mut rng, bits, &pool);
                let (lo, hi) = match rng.gen_range(0..6) {
                    0 => (a.max(b), a.min(b)),
                    1 => (a, a),
                    2 => (0, support::max_value(bits)),
                    _ => (a.min(b), a.max(b)),
                };
                let answer = s.client.query(&mut rng, &mut s.channel, lo, hi).unwrap();
                assert_eq!(
                    answer.records,
                    support::oracle(&records, lo, hi),
                    "{ctx}: [{lo}, {hi}]"
                );
                assert_eq!(answer.discarded, 0);
            }
        }
    }
    let all = s
        .client
        .query(&mut rng, &mut s.channel, 0, support::max_value(bits))
        .unwrap();
    assert_eq!(
        all.records,
        support::oracle(&records, 0, support::max_value(bits))
    );
}

#[test]
fn both_protocols_equal_the_oracle_over_random_interleavings() {
    let small = support::tiny_pages();
    let cached = support::pages(512, 16, CachePolicy::Lfu);
    for (i, name) in PROTOCOLS.iter().enumerate() {
        let seed = 10 * i as u64;
        interleave(name, 4, small, seed, 120);
        interleave(name, 8, small, seed + 1, 120);
        interleave(name, 32, cached, seed + 2, 80);
        interleave(name, 64, PageConfig::default(), seed + 3, 80);
    }
}

#[test]
fn the_sse_block_parameters_keep_results_exact() {
    let page = support::pages(256, 4, CachePolicy::Fifo);
    // PiBas with the pack extension.
    let mut params = Params::new();
    params.set("bits", 10).set("block", 3);
    interleave_with("log-brc-pibas", &params, page, 30, 80);
    // 2Lev with tiny entries and blocks: every size class and several
    // pointer levels.
    let mut params = Params::new();
    params.set("bits", 10).set("block", 2).set("b", 2);
    interleave_with("log-brc-2lev", &params, page, 31, 80);
    // Parameters of the other SSE scheme are refused.
    let mut rng = ChaCha20Rng::seed_from_u64(32);
    let mut params = Params::new();
    params.set("b", 4);
    assert!((get("log-brc-pibas").new_client)(&mut rng, &page.with(&params)).is_err());
    let mut params = Params::new();
    params.set("block", 1);
    assert!((get("log-brc-2lev").new_client)(&mut rng, &page.with(&params)).is_err());
}

#[test]
fn an_empty_index_answers_every_query_with_nothing() {
    for name in PROTOCOLS {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let mut s = setup(name, 16, PageConfig::default(), &mut rng);
        s.client.build(&mut rng, &mut s.channel, &[]).unwrap();
        let answer = s.client.query(&mut rng, &mut s.channel, 0, 65535).unwrap();
        assert!(answer.records.is_empty());
        assert!(!s.client.delete(&mut rng, &mut s.channel, 3, b"x").unwrap());
        // Inserting into a never-built index works too.
        let mut s = setup(name, 16, PageConfig::default(), &mut rng);
        s.client
            .insert(&mut rng, &mut s.channel, 65535, b"top")
            .unwrap();
        let answer = s
            .client
            .query(&mut rng, &mut s.channel, 65535, 65535)
            .unwrap();
        assert_eq!(answer.records, vec![(65535, b"top".to_vec())]);
        assert!(s
            .client
            .insert(&mut rng, &mut s.channel, 65536, b"x")
            .is_err());
    }
}

/// Page reads of the query `[1000, 1010]` over `extra` records outside it
/// and the same three records inside it, with no cache.
fn query_reads(name: &str, extra: u64) -> (u64, usize) {
    let page = support::pages(4096, 0, CachePolicy::Lru);
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let mut s = setup(name, 32, page, &mut rng);
    let mut records: Vec<Record> = vec![
        (1000, b"a".to_vec()),
        (1005, b"b".to_vec()),
        (1010, b"c".to_vec()),
    ];
    records.extend((0..extra).map(|i| (2000 + i * 3, b"out".to_vec())));
    s.client.build(&mut rng, &mut s.channel, &records).unwrap();
    let before = s.paged.io_counts();
    let answer = s
        .client
        .query(&mut rng, &mut s.channel, 1000, 1010)
        .unwrap();
    let io = s.paged.io_counts().since(&before);
    (io.reads, answer.records.len())
}

#[test]
fn query_io_follows_the_result_size_not_the_data_size() {
    for name in PROTOCOLS {
        let (small, n1) = query_reads(name, 100);
        let (large, n2) = query_reads(name, 3000);
        assert_eq!((n1, n2), (3, 3));
        assert_eq!(
            small, large,
            "{name}: reads {small} at 103 records, {large} at 3003"
        );
        assert!(small > 0);
    }
}

#[test]
fn a_query_is_one_round_with_sealed_records() {
    for name in PROTOCOLS {
        let mut rng = ChaCha20Rng::seed_from_u64(8);
        let mut s = setup(name, 16, PageConfig::default(), &mut rng);
        let records: Vec<Record> = (0..50u64)
            .map(|v| (v * 7, b"secret-payload".to_vec()))
            .collect();
        s.client.build(&mut rng, &mut s.channel, &records).unwrap();
        s.channel.record_transcript();
        let span = s.channel.meter().span();
        let answer = s.client.query(&mut rng, &mut s.channel, 14, 200).unwrap();
        let snap = span.finish();
        assert_eq!(snap.rounds, 1, "{name}");
        assert_eq!(answer.records, support::oracle(&records, 14, 200));
        // The server sees neither values nor payloads in the clear.
        let stored = s.inner.scan_prefix(b"").unwrap();
        assert!(stored
            .iter()
            .all(|(_, v)| !v.windows(14).any(|w| w == b"secret-payload")));
        // An empty interval costs no round.
        let span = s.channel.meter().span();
        assert!(s
            .client
            .query(&mut rng, &mut s.channel, 9, 8)
            .unwrap()
            .records
            .is_empty());
        assert_eq!(span.finish().rounds, 0);
        // Repeating a query repeats its tokens (the search pattern); a
        // rebuild changes them.
        s.channel.take_transcript();
        s.client.query(&mut rng, &mut s.channel, 7, 7).unwrap();
        s.client.query(&mut rng, &mut s.channel, 7, 7).unwrap();
        s.client
            .insert(&mut rng, &mut s.channel, 1, b"new")
            .unwrap();
        s.client.query(&mut rng, &mut s.channel, 7, 7).unwrap();
        let t = s.channel.take_transcript();
        assert_eq!(t[0].request, t[1].request);
        assert_ne!(t[0].request, t.last().unwrap().request);
    }
}

#[test]
fn malformed_requests_responses_and_records_give_errors() {
    for name in PROTOCOLS {
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let mut s = setup(name, 8, PageConfig::default(), &mut rng);
        let records: Vec<Record> = (0..20u64).map(|v| (v * 10, vec![v as u8])).collect();
        s.client.build(&mut rng, &mut s.channel, &records).unwrap();
        let server = s.channel.service_mut();
        for bad in [&b""[..], &[0xff; 4][..], &[7, 1, 2][..]] {
            assert!(server.handle(bad).is_err(), "{name}: {bad:?}");
        }
        let forwarded_garbage = sesame_core::wire::encode(&Request::Index(vec![1, 2, 3])).unwrap();
        assert!(server.handle(&forwarded_garbage).is_err());
        // A token of no keyword matches nothing.
        let token = sesame_range::log_brc::Token {
            k1: [0; 16],
            k2: [0; 16],
        };
        let unknown = sesame_core::wire::encode(&Request::Query {
            tokens: vec![token],
        })
        .unwrap();
        assert!(server.handle(&unknown).is_ok());
        // A server that lost a record: the query fails on the server, and
        // the fetch of a rebuild sees the count is wrong.
        let lost = s.inner.scan_prefix(b"r").unwrap();
        let (key, value) = lost.first().unwrap().clone();
        s.inner.delete(&key).unwrap();
        let page = PageConfig::default();
        let fresh = || {
            let paged = PagedStore::new(Arc::clone(&s.inner), page).unwrap();
            LocalChannel::new(
                get(name)
                    .server(Arc::new(paged), &page.with(&Params::new()))
                    .unwrap(),
            )
        };
        let mut ch = fresh();
        assert!(matches!(
            s.client.query(&mut rng, &mut ch, 0, 255),
            Err(Error::Server(_))
        ));
        assert!(matches!(
            s.client.insert(&mut rng, &mut ch, 5, b"x"),
            Err(Error::Protocol(_))
        ));
        // A tampered record: the client refuses it.
        let mut tampered = value;
        if let Some(b) = tampered.last_mut() {
            *b ^= 1;
        }
        s.inner.put(&key, &tampered).unwrap();
        let mut ch = fresh();
        assert!(matches!(
            s.client.query(&mut rng, &mut ch, 0, 255),
            Err(Error::Crypto)
        ));
        assert!(matches!(
            s.client.delete(&mut rng, &mut ch, 0, &[0]),
            Err(Error::Crypto)
        ));
        // Bad parameters and states.
        let p = get(name);
        let mut params = Params::new();
        params.set("nonsense", 1);
        assert!((p.new_client)(&mut rng, &PageConfig::default().with(&params)).is_err());
        let mut params = Params::new();
        params.set("bits", 65);
        assert!((p.new_client)(&mut rng, &PageConfig::default().with(&params)).is_err());
        assert!((p.restore_client)(b"garbage").is_err());
        assert!((p.restore_client)(&[]).is_err());
    }
}

#[test]
fn the_client_survives_save_and_restore_and_the_server_a_restart() {
    for name in PROTOCOLS {
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        let mut s = setup(name, 12, PageConfig::default(), &mut rng);
        let records: Vec<Record> = (0..64u64)
            .map(|v| (v * 61 % 4096, vec![v as u8; 3]))
            .collect();
        s.client.build(&mut rng, &mut s.channel, &records).unwrap();
        let storage = s.client.client_storage_bytes();
        assert!(storage > 0 && storage < 200, "{name}: {storage}");
        let saved = s.client.save_state().unwrap();
        let mut client = (get(name).restore_client)(&saved).unwrap();
        assert_eq!(client.bits(), 12);
        assert_eq!(client.descriptor().name, name);
        let page = PageConfig::default();
        let paged = PagedStore::new(Arc::clone(&s.inner), page).unwrap();
        let mut ch = LocalChannel::new(
            get(name)
                .server(Arc::new(paged), &page.with(&Params::new()))
                .unwrap(),
        );
        let answer = client.query(&mut rng, &mut ch, 100, 3000).unwrap();
        assert_eq!(answer.records, support::oracle(&records, 100, 3000));
        assert!(client
            .delete(&mut rng, &mut ch, records[0].0, &records[0].1)
            .unwrap());
        let answer = client.query(&mut rng, &mut ch, 0, 4095).unwrap();
        assert_eq!(answer.records, support::oracle(&records[1..], 0, 4095));
    }
}

/// Costs of a query at seed 004's settings (4 KiB pages, a 128-page LRU
/// cache, a range of 0.5 % of the records), printed. Run with
/// `cargo test -p sesame-range --test log_brc -- --ignored --nocapture`;
/// `LOG_BRC_N` sets the record count (default 20,000).
#[test]
#[ignore = "prints figures; slow"]
fn report_query_costs_at_the_seed_settings() {
    let n: u64 = std::env::var("LOG_BRC_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    for name in PROTOCOLS {
        let mut rng = ChaCha20Rng::seed_from_u64(12);
        let page = PageConfig::default();
        let mut s = setup(name, 32, page, &mut rng);
        let records: Vec<Record> = (0..n)
            .map(|_| (rng.gen_range(0..1u64 << 32), vec![0; 16]))
            .collect();
        s.client.build(&mut rng, &mut s.channel, &records).unwrap();
        let mut values: Vec<u64> = records.iter().map(|r| r.0).collect();
        values.sort_unstable();
        let width = (n / 200).max(1) as usize;
        let (mut io, mut up, mut down, mut results, mut queries) = (0, 0, 0, 0, 0);
        for _ in 0..50 {
            let start = rng.gen_range(0..values.len() - width);
            let (lo, hi) = (values[start], values[start + width - 1]);
            let before = s.paged.io_counts();
            let span = s.channel.meter().span();
            let answer = s.client.query(&mut rng, &mut s.channel, lo, hi).unwrap();
            let snap = span.finish();
            io += s.paged.io_counts().since(&before).reads;
            up += snap.bytes_up;
            down += snap.bytes_down;
            results += answer.records.len() as u64;
            queries += 1;
        }
        println!(
            "{name}: N={n}, per query: {} results, {} page reads (results included), \
             {} bytes up, {} bytes down, 1 round",
            results / queries,
            io / queries,
            up / queries,
            down / queries
        );
    }
}
