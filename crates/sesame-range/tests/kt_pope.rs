//! Kerschbaum-Tueno and POPE: plaintext-oracle equality over random
//! interleavings, the two Kerschbaum-Tueno fixes, POPE's discards, cold
//! and warm queries, malformed requests, client save/restore and server
//! restarts.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sesame_core::{Channel, LocalChannel, Params, Service, Store};
use sesame_range::kerschbaum_tueno::{self as kt, KtClient, Order};
use sesame_range::pope::{self, PopeClient};
use sesame_range::record::RecordKey;
use sesame_range::{CachePolicy, PageConfig, PagedStore, RangeClient, RangeProtocol};
use sesame_store::MemoryStore;

mod support;

type Chan = LocalChannel<Box<dyn Service>>;

fn page(size: usize, cache: usize) -> PageConfig {
    support::pages(size, cache, CachePolicy::Lru)
}

fn protocol(name: &str) -> RangeProtocol {
    sesame_range::protocol(name).unwrap()
}

fn paged(config: PageConfig) -> Arc<PagedStore> {
    Arc::new(PagedStore::new(Arc::new(MemoryStore::new()), config).unwrap())
}

fn channel(p: &RangeProtocol, store: &Arc<PagedStore>, config: PageConfig) -> Chan {
    let store: Arc<dyn Store> = store.clone();
    LocalChannel::new(p.server(store, &config.with(&Params::new())).unwrap())
}

fn params(pairs: &[(&str, &str)]) -> Params {
    let mut p = Params::new();
    for (k, v) in pairs {
        p.set(k, v);
    }
    p
}

/// Random inserts, deletes (present and absent) and queries against a
/// plaintext oracle, with duplicates, empty and full ranges and the
/// extreme values, a save/restore of the client half-way. Returns the
/// largest number of discarded records in one query.
fn oracle_run(
    name: &str,
    extra: &[(&str, &str)],
    config: PageConfig,
    seed: u64,
    ops: usize,
) -> u64 {
    let p = protocol(name);
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut pr = vec![("bits", "8")];
    pr.extend_from_slice(extra);
    let mut client = (p.new_client)(&mut rng, &config.with(&params(&pr))).unwrap();
    let store = paged(config);
    let mut chan = channel(&p, &store, config);
    let max = 255u64;
    let mut oracle: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut worst = 0u64;
    for step in 0..ops {
        if step == ops / 2 {
            let state = client.save_state().unwrap();
            client = (p.restore_client)(&state).unwrap();
        }
        let roll = rng.gen_range(0..10);
        if roll < 5 || oracle.is_empty() {
            let value = match rng.gen_range(0..6) {
                0 => 0,
                1 => max,
                2 => 77,
                _ => rng.gen_range(0..=max),
            };
            let data = format!("d{}", rng.gen_range(0..4)).repeat(rng.gen_range(1..4));
            client
                .insert(&mut rng, &mut chan, value, data.as_bytes())
                .unwrap();
            oracle.push((value, data.into_bytes()));
        } else if roll < 7 {
            let (value, data) = if rng.gen_bool(0.7) {
                oracle[rng.gen_range(0..oracle.len())].clone()
            } else {
                (rng.gen_range(0..=max), b"absent".to_vec())
            };
            let present = oracle.iter().position(|r| *r == (value, data.clone()));
            let deleted = client.delete(&mut rng, &mut chan, value, &data).unwrap();
            assert_eq!(
                deleted,
                present.is_some(),
                "{name}: delete ({value}, {data:?})"
            );
            if let Some(i) = present {
                oracle.swap_remove(i);
            }
        } else {
            let (lo, hi) = match rng.gen_range(0..6) {
                0 => (0, max),
                1 => (200, 100),
                2 => {
                    let v = oracle[rng.gen_range(0..oracle.len())].0;
                    (v, v)
                }
                3 => (0, 0),
                4 => (max, max),
                _ => {
                    let a = rng.gen_range(0..=max);
                    (a, (a + rng.gen_range(0..60)).min(max))
                }
            };
            let answer = client.query(&mut rng, &mut chan, lo, hi).unwrap();
            assert_eq!(
                answer.records,
                support::oracle(&oracle, lo, hi),
                "{name}: [{lo}, {hi}] at {step}"
            );
            worst = worst.max(answer.discarded);
        }
    }
    let all = client.query(&mut rng, &mut chan, 0, max).unwrap();
    assert_eq!(all.records, support::oracle(&oracle, 0, max));
    worst
}

#[test]
fn kerschbaum_tueno_matches_the_oracle() {
    for (seed, cache) in [(1, 0), (2, 16), (3, 128)] {
        let worst = oracle_run("kerschbaum-tueno", &[], page(256, cache), seed, 300);
        assert_eq!(worst, 0, "an exact protocol discards nothing");
    }
}

#[test]
fn pope_matches_the_oracle_and_discards_at_most_2l() {
    for (seed, cache, l) in [(4, 0, 4usize), (5, 16, 2), (6, 128, 7)] {
        let ls = l.to_string();
        let worst = oracle_run("pope", &[("l", &ls)], page(256, cache), seed, 300);
        assert!(worst <= 2 * l as u64, "{worst} discarded with L = {l}");
    }
    // The default L: what fits a 256-byte page.
    oracle_run("pope", &[], page(256, 8), 7, 200);
}

/// Reads the record key out of a Kerschbaum-Tueno client's saved state
/// (wire version byte, then the 32 key bytes).
fn kt_key(client: &dyn RangeClient) -> RecordKey {
    let state = client.save_state().unwrap();
    RecordKey::from_bytes(&state[1..33]).unwrap()
}

fn kt_slot(chan: &mut Chan, key: &RecordKey, slot: u64) -> (u64, u64) {
    let r: kt::Response = sesame_core::channel::call(chan, &kt::Request::Get { slot }).unwrap();
    match r {
        kt::Response::Slot { n, sealed } => (n, key.open(b"kerschbaum-tueno", &sealed).unwrap().0),
        other => panic!("{other:?}"),
    }
}

#[test]
fn kerschbaum_tueno_duplicates_spanning_the_rotation_point() {
    // Many copies of 7 among few other values: the random rotations often
    // leave copies of 7 both in the last slot and in slot 0, the reference
    // of the binary searches. Every query must still be exact.
    let config = page(256, 4);
    let p = protocol("kerschbaum-tueno");
    let mut spanning = 0;
    for seed in 0..12u64 {
        let mut rng = ChaCha20Rng::seed_from_u64(100 + seed);
        let mut client = (p.new_client)(&mut rng, &config.with(&params(&[("bits", "8")]))).unwrap();
        let key = kt_key(client.as_ref());
        let store = paged(config);
        let mut chan = channel(&p, &store, config);
        let mut oracle = Vec::new();
        for (i, v) in [7u64, 3, 7, 9, 7, 7, 7, 0, 7, 255, 7]
            .into_iter()
            .enumerate()
        {
            let data = vec![i as u8];
            client.insert(&mut rng, &mut chan, v, &data).unwrap();
            oracle.push((v, data));
            let (n, first) = kt_slot(&mut chan, &key, 0);
            let (_, last) = kt_slot(&mut chan, &key, n - 1);
            if n > 2 && first == 7 && last == 7 && oracle.iter().any(|r| r.0 != 7) {
                spanning += 1;
            }
            for (lo, hi) in [(7, 7), (0, 7), (7, 255), (8, 255), (0, 6), (3, 9), (0, 255)] {
                let got = client.query(&mut rng, &mut chan, lo, hi).unwrap();
                assert_eq!(
                    got.records,
                    support::oracle(&oracle, lo, hi),
                    "[{lo}, {hi}]"
                );
            }
        }
        // Deleting copies of 7 while they span the rotation point.
        for i in [0u8, 2, 4] {
            assert!(client.delete(&mut rng, &mut chan, 7, &[i]).unwrap());
            oracle.retain(|r| *r != (7, vec![i]));
            let got = client.query(&mut rng, &mut chan, 7, 7).unwrap();
            assert_eq!(got.records, support::oracle(&oracle, 7, 7));
        }
    }
    assert!(
        spanning >= 5,
        "only {spanning} layouts had duplicates spanning the rotation"
    );
}

#[test]
fn kerschbaum_tueno_paper_order_fails_and_the_fix_passes() {
    // The paper's insertion compares m and m' the other way round: the
    // array stops being a rotated sorted array and queries go wrong.
    let config = page(256, 4);
    let values = [10u64, 20, 30, 40, 15, 25, 5, 35];
    let run = |order: Order| -> bool {
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let mut client = KtClient::new(&mut rng, &params(&[("bits", "8")]))
            .unwrap()
            .with_order(order);
        let store = paged(config);
        let mut chan = channel(&protocol("kerschbaum-tueno"), &store, config);
        let mut oracle = Vec::new();
        let mut all_ok = true;
        for (i, v) in values.into_iter().enumerate() {
            client.insert(&mut rng, &mut chan, v, &[i as u8]).unwrap();
            oracle.push((v, vec![i as u8]));
            for (lo, hi) in [(0, 12), (12, 27), (21, 255), (v, v)] {
                let ok = matches!(client.query(&mut rng, &mut chan, lo, hi),
                    Ok(a) if a.records == support::oracle(&oracle, lo, hi));
                all_ok &= ok;
            }
        }
        all_ok
    };
    assert!(run(Order::Fixed), "the corrected order answers every query");
    assert!(
        !run(Order::Paper),
        "the paper's order must fail on this sequence"
    );
}

#[test]
fn pope_cold_query_costs_more_than_warm_queries() {
    let config = page(256, 16);
    let p = protocol("pope");
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let mut client = (p.new_client)(&mut rng, &config.with(&params(&[("l", "4")]))).unwrap();
    let store = paged(config);
    let mut chan = channel(&p, &store, config);
    let mut oracle = Vec::new();
    for i in 0..300u64 {
        let v = rng.gen_range(0..1000);
        let span = chan.meter().span();
        client
            .insert(&mut rng, &mut chan, v, &i.to_be_bytes())
            .unwrap();
        let s = span.finish();
        assert_eq!(s.rounds, 1, "an insertion is one round");
        oracle.push((v, i.to_be_bytes().to_vec()));
    }
    let mut query = |lo: u64, hi: u64| {
        let span = chan.meter().span();
        let a = client.query(&mut rng, &mut chan, lo, hi).unwrap();
        assert_eq!(a.records, support::oracle(&oracle, lo, hi));
        assert!(a.discarded <= 8);
        span.finish()
    };
    let cold = query(400, 450);
    let warm = query(410, 440);
    let warm2 = query(410, 440);
    assert!(
        cold.rounds > 3 * warm.rounds,
        "cold {} warm {}",
        cold.rounds,
        warm.rounds
    );
    assert!(cold.bytes() > warm.bytes());
    assert!(warm2.rounds <= warm.rounds);
}

fn handle<Req: serde::Serialize>(chan: &mut Chan, r: &Req) -> bool {
    let bytes = sesame_core::wire::encode(r).unwrap();
    chan.service_mut().handle(&bytes).is_ok()
}

#[test]
fn malformed_requests_are_errors() {
    let config = page(256, 4);
    let mut rng = ChaCha20Rng::seed_from_u64(12);

    let p = protocol("kerschbaum-tueno");
    let mut client = (p.new_client)(&mut rng, &config.with(&Params::new())).unwrap();
    let store = paged(config);
    let mut chan = channel(&p, &store, config);
    for v in [5u64, 1, 9] {
        client.insert(&mut rng, &mut chan, v, b"x").unwrap();
    }
    assert!(chan.service_mut().handle(&[]).is_err());
    assert!(chan.service_mut().handle(&[1, 200, 3]).is_err());
    use kt::Request as K;
    assert!(!handle(&mut chan, &K::Get { slot: 3 }));
    assert!(!handle(
        &mut chan,
        &K::Insert {
            position: 4,
            sealed: vec![1],
            offset: 0
        }
    ));
    assert!(!handle(
        &mut chan,
        &K::Insert {
            position: 0,
            sealed: vec![1],
            offset: 4
        }
    ));
    assert!(!handle(
        &mut chan,
        &K::Insert {
            position: 0,
            sealed: vec![],
            offset: 0
        }
    ));
    assert!(!handle(&mut chan, &K::Delete { slot: 3, offset: 0 }));
    assert!(!handle(&mut chan, &K::Delete { slot: 0, offset: 2 }));
    assert!(!handle(
        &mut chan,
        &K::Range {
            from: 2,
            to: 1,
            wrap: false
        }
    ));
    assert!(!handle(
        &mut chan,
        &K::Range {
            from: 0,
            to: 4,
            wrap: true
        }
    ));
    assert!(handle(
        &mut chan,
        &K::Range {
            from: 2,
            to: 1,
            wrap: true
        }
    ));
    // The server still works after the errors.
    let a = client.query(&mut rng, &mut chan, 0, 10).unwrap();
    assert_eq!(a.records.len(), 3);
    // Bad parameters.
    assert!((p.new_client)(&mut rng, &config.with(&params(&[("l", "3")]))).is_err());
    assert!((p.new_client)(&mut rng, &config.with(&params(&[("bits", "65")]))).is_err());
    assert!((p.restore_client)(&[1, 2, 3]).is_err());

    let p = protocol("pope");
    let mut client = (p.new_client)(&mut rng, &config.with(&params(&[("l", "2")]))).unwrap();
    let store = paged(config);
    let mut chan = channel(&p, &store, config);
    for v in [5u64, 1, 9, 4, 4] {
        client.insert(&mut rng, &mut chan, v, b"x").unwrap();
    }
    use pope::Request as P;
    assert!(chan.service_mut().handle(&[1, 99]).is_err());
    let flush = |split: Option<pope::Split>| pope::Flush {
        path: vec![0],
        l: 2,
        split,
    };
    let split = |order: Vec<u32>| Some(pope::Split { seed: 1, order });
    // The root is a leaf: there is no buffer of children to flush into.
    assert!(!handle(
        &mut chan,
        &P::Partition {
            flush: flush(None),
            assign: vec![0]
        }
    ));
    assert!(!handle(
        &mut chan,
        &P::Next {
            flush: flush(None),
            offset: 0
        }
    ));
    // A split past the buffer's end.
    assert!(!handle(
        &mut chan,
        &P::Next {
            flush: flush(split(vec![0, 1])),
            offset: 5
        }
    ));
    assert!(!handle(
        &mut chan,
        &P::Visit {
            path: vec![77],
            l: 2
        }
    ));
    assert!(!handle(&mut chan, &P::Visit { path: vec![], l: 1 }));
    assert!(!handle(
        &mut chan,
        &P::Pivots {
            path: vec![0],
            l: 9,
            seed: 1
        }
    ));
    assert!(!handle(
        &mut chan,
        &P::Remove {
            node: 0,
            sealed: vec![1, 2]
        }
    ));
    assert!(!handle(
        &mut chan,
        &P::Remove {
            node: 55,
            sealed: vec![1, 2]
        }
    ));
    assert!(!handle(&mut chan, &P::Insert { sealed: vec![] }));
    // Pivots then a bad order, then a bad assignment.
    assert!(handle(
        &mut chan,
        &P::Pivots {
            path: vec![0],
            l: 2,
            seed: 1
        }
    ));
    assert!(!handle(
        &mut chan,
        &P::Next {
            flush: flush(split(vec![1, 1])),
            offset: 0
        }
    ));
    assert!(handle(
        &mut chan,
        &P::Next {
            flush: flush(split(vec![1, 0])),
            offset: 0
        }
    ));
    // An assignment of the wrong length, then one to a bucket that does
    // not exist (two pivots make three buckets).
    for assign in [vec![0, 0], vec![0, 1, 2, 3, 1]] {
        assert!(!handle(
            &mut chan,
            &P::Partition {
                flush: flush(split(vec![1, 0])),
                assign
            }
        ));
    }
    let a = client.query(&mut rng, &mut chan, 0, 10).unwrap();
    assert_eq!(a.records.len(), 5);
    assert!((p.new_client)(&mut rng, &config.with(&params(&[("l", "1")]))).is_err());
    assert!((p.new_client)(&mut rng, &config.with(&params(&[("k", "1")]))).is_err());
    assert!(PopeClient::restore(&[1, 2, 3]).is_err());
}

#[test]
fn clients_restore_and_servers_restart_over_the_same_store() {
    let config = page(256, 8);
    for (name, pr) in [("kerschbaum-tueno", vec![]), ("pope", vec![("l", "3")])] {
        let p = protocol(name);
        let mut rng = ChaCha20Rng::seed_from_u64(13);
        let mut client = (p.new_client)(&mut rng, &config.with(&params(&pr))).unwrap();
        let store = paged(config);
        let mut oracle = Vec::new();
        {
            let mut chan = channel(&p, &store, config);
            for i in 0..60u64 {
                let v = rng.gen_range(0..50);
                client
                    .insert(&mut rng, &mut chan, v, &i.to_be_bytes())
                    .unwrap();
                oracle.push((v, i.to_be_bytes().to_vec()));
            }
            let a = client.query(&mut rng, &mut chan, 10, 30).unwrap();
            assert_eq!(a.records, support::oracle(&oracle, 10, 30));
        }
        let state = client.save_state().unwrap();
        let mut client = (p.restore_client)(&state).unwrap();
        assert_eq!(client.descriptor().name, name);
        store.clear_cache();
        let mut chan = channel(&p, &store, config);
        for i in 60..90u64 {
            let v = rng.gen_range(0..50);
            client
                .insert(&mut rng, &mut chan, v, &i.to_be_bytes())
                .unwrap();
            oracle.push((v, i.to_be_bytes().to_vec()));
        }
        assert!(client
            .delete(&mut rng, &mut chan, oracle[3].0, &oracle[3].1)
            .unwrap());
        oracle.swap_remove(3);
        for (lo, hi) in [(0, 49), (10, 30), (25, 25), (40, 20)] {
            let a = client.query(&mut rng, &mut chan, lo, hi).unwrap();
            assert_eq!(
                a.records,
                support::oracle(&oracle, lo, hi),
                "{name} [{lo}, {hi}]"
            );
        }
        assert!(client.client_storage_bytes() >= 32);
    }
}

#[test]
fn kerschbaum_tueno_insertion_rewrites_every_page() {
    // O(N/B) page writes per insertion, logarithmic probes per query.
    let config = page(256, 0);
    let p = protocol("kerschbaum-tueno");
    let mut rng = ChaCha20Rng::seed_from_u64(14);
    let mut client = (p.new_client)(&mut rng, &config.with(&Params::new())).unwrap();
    let store = paged(config);
    let mut chan = channel(&p, &store, config);
    for i in 0..100u64 {
        client
            .insert(&mut rng, &mut chan, i * 3, b"abcdefghijklmnop")
            .unwrap();
    }
    let per_page = 256 / 56;
    let before = store.io_counts();
    client
        .insert(&mut rng, &mut chan, 50, b"abcdefghijklmnop")
        .unwrap();
    let io = store.io_counts().since(&before);
    let pages = 101u64.div_ceil(per_page);
    assert!(io.writes >= pages, "{} writes for {pages} pages", io.writes);
    let span = chan.meter().span();
    let a = client.query(&mut rng, &mut chan, 30, 60).unwrap();
    assert_eq!(a.records.len(), 12);
    let s = span.finish();
    // 1 + two binary searches of at most ceil(log2 101) = 7 probes + 1.
    assert!(s.rounds <= 16, "{} rounds", s.rounds);
}

#[test]
fn sixty_four_bit_extreme_values() {
    let config = page(256, 4);
    for (name, pr) in [
        ("kerschbaum-tueno", vec![("bits", "64")]),
        ("pope", vec![("bits", "64"), ("l", "2")]),
    ] {
        let p = protocol(name);
        let mut rng = ChaCha20Rng::seed_from_u64(15);
        let mut client = (p.new_client)(&mut rng, &config.with(&params(&pr))).unwrap();
        let store = paged(config);
        let mut chan = channel(&p, &store, config);
        let mut oracle = Vec::new();
        for (i, v) in [u64::MAX, 0, u64::MAX, 1, u64::MAX - 1, 0, 1 << 63]
            .into_iter()
            .enumerate()
        {
            client.insert(&mut rng, &mut chan, v, &[i as u8]).unwrap();
            oracle.push((v, vec![i as u8]));
        }
        for (lo, hi) in [
            (0, u64::MAX),
            (u64::MAX, u64::MAX),
            (0, 0),
            (1, u64::MAX - 1),
            (2, 5),
        ] {
            let a = client.query(&mut rng, &mut chan, lo, hi).unwrap();
            assert_eq!(
                a.records,
                support::oracle(&oracle, lo, hi),
                "{name} [{lo}, {hi}]"
            );
        }
        assert!(client.delete(&mut rng, &mut chan, u64::MAX, &[2]).unwrap());
        assert!(!client.delete(&mut rng, &mut chan, u64::MAX, &[2]).unwrap());
        oracle.retain(|r| *r != (u64::MAX, vec![2]));
        let a = client
            .query(&mut rng, &mut chan, u64::MAX, u64::MAX)
            .unwrap();
        assert_eq!(a.records, support::oracle(&oracle, u64::MAX, u64::MAX));
    }
}

#[test]
fn kerschbaum_tueno_bulk_load_is_one_round_and_only_into_an_empty_array() {
    let config = page(256, 0);
    let p = protocol("kerschbaum-tueno");
    let store = paged(config);
    let mut ch = channel(&p, &store, config);
    let mut rng = ChaCha20Rng::seed_from_u64(41);
    let mut client = (p.new_client)(&mut rng, &config.with(&params(&[("bits", "8")]))).unwrap();
    let records: Vec<(u64, Vec<u8>)> = (0..200u64)
        .map(|i| ((i * 37) % 50, vec![i as u8]))
        .collect();
    let span = ch.meter().span();
    client.build(&mut rng, &mut ch, &records).unwrap();
    // One probe of slot 0 (empty) and the load.
    assert_eq!(span.finish().rounds, 2);
    for (lo, hi) in [(0, 255), (10, 20), (49, 49), (60, 70)] {
        let got = client.query(&mut rng, &mut ch, lo, hi).unwrap();
        assert_eq!(
            got.records,
            support::oracle(&records, lo, hi),
            "[{lo}, {hi}]"
        );
    }
    // A second build on the non-empty array inserts one by one.
    let more = vec![(7u64, b"x".to_vec()), (255, b"y".to_vec())];
    client.build(&mut rng, &mut ch, &more).unwrap();
    let all: Vec<_> = records.iter().chain(&more).cloned().collect();
    assert_eq!(
        client.query(&mut rng, &mut ch, 0, 255).unwrap().records,
        support::oracle(&all, 0, 255)
    );
    // A raw load into the non-empty array is refused and changes nothing.
    let load = kt::Request::Load {
        sealed: vec![vec![1; 40]],
    };
    assert!(ch.call(&sesame_core::wire::encode(&load).unwrap()).is_err());
    assert_eq!(
        client
            .query(&mut rng, &mut ch, 0, 255)
            .unwrap()
            .records
            .len(),
        all.len()
    );
}
