//! Seed 001's query kinds (prefix, wildcard, conjunctive, ranked) over the
//! schemes that declare them, against a plaintext oracle.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Arc;

use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{Error, LocalChannel, Params, QueryKind, Service};
use sesame_sse::query::{wildcard_matches, Query};
use sesame_sse::{DocId, KeywordScheme, Multimap};
use sesame_store::MemoryStore;

fn channel(s: &KeywordScheme) -> LocalChannel<Box<dyn Service>> {
    LocalChannel::new(
        s.server(Arc::new(MemoryStore::new()), &sesame_core::Params::new())
            .unwrap(),
    )
}

/// The documents holding a keyword for which `pred` holds.
fn oracle(db: &Multimap, pred: impl Fn(&[u8]) -> bool) -> Vec<DocId> {
    let set: BTreeSet<DocId> = db
        .iter()
        .filter(|(w, _)| pred(w))
        .flat_map(|(_, ids)| ids.iter().copied())
        .collect();
    set.into_iter().collect()
}

fn conjunctive_oracle(db: &Multimap, words: &[Vec<u8>]) -> Vec<DocId> {
    let mut sets = words.iter().map(|w| oracle(db, |k| k == w.as_slice()));
    let Some(first) = sets.next() else {
        return Vec::new();
    };
    sets.fold(first, |acc, s| {
        acc.into_iter().filter(|d| s.contains(d)).collect()
    })
}

/// TF-IDF top-k: tf = how often the document is listed under the
/// keyword, idf = ln(1 + N / df), N = documents in the multimap.
fn ranked_oracle(db: &Multimap, words: &[Vec<u8>], k: usize) -> Vec<(DocId, f64)> {
    let n = db.values().flatten().collect::<BTreeSet<_>>().len() as f64;
    let mut scores: std::collections::BTreeMap<DocId, f64> = Default::default();
    for w in words {
        let Some(ids) = db.get(w) else { continue };
        let df = ids.iter().collect::<BTreeSet<_>>().len() as f64;
        for id in ids {
            *scores.entry(*id).or_insert(0.0) += (1.0 + n / df).ln();
        }
    }
    let mut v: Vec<(DocId, f64)> = scores.into_iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(k);
    v
}

fn seed001() -> Vec<KeywordScheme> {
    ["suise", "suise2", "chlh15", "vasst16", "vasst16-2"]
        .iter()
        .filter_map(|n| sesame_sse::scheme(n))
        .collect()
}

fn check(db: &Multimap, queries: &[Query], seed: u64) {
    for s in seed001() {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut client = (s.new_client)(&mut rng, &Params::new()).unwrap();
        let mut ch = channel(&s);
        client.setup(&mut rng, &mut ch, db).unwrap();
        for q in queries {
            let got = client.query(&mut rng, &mut ch, q);
            if !s.descriptor.queries.contains(&q.kind()) {
                assert!(
                    matches!(got, Err(Error::Unsupported(_))),
                    "{} {q:?}",
                    s.descriptor.name
                );
                continue;
            }
            let want = match q {
                Query::Exact(w) => oracle(db, |k| k == w.as_slice()),
                Query::Prefix(p) if p.is_empty() => continue,
                Query::Prefix(p) => oracle(db, |k| k.starts_with(p)),
                Query::Wildcard(p) => oracle(db, |k| wildcard_matches(p, k)),
                Query::Conjunctive(ws) => conjunctive_oracle(db, ws),
                Query::Ranked { keywords, k } => {
                    let want = ranked_oracle(db, keywords, *k);
                    let got = got.unwrap();
                    let pairs: Vec<(DocId, f64)> = got.ids.into_iter().zip(got.scores).collect();
                    assert_eq!(pairs.len(), want.len(), "{} {q:?}", s.descriptor.name);
                    for ((d, sc), (wd, wsc)) in pairs.iter().zip(&want) {
                        assert_eq!(d, wd, "{} {q:?}", s.descriptor.name);
                        assert!((sc - wsc).abs() < 1e-9);
                    }
                    continue;
                }
            };
            assert_eq!(got.unwrap().ids, want, "{} {q:?}", s.descriptor.name);
        }
    }
}

fn arb_db() -> impl Strategy<Value = Multimap> {
    prop::collection::btree_map(
        prop::collection::vec(b'a'..=b'd', 1..5),
        prop::collection::vec(0u64..30, 0..20),
        0..12,
    )
}

fn arb_query() -> impl Strategy<Value = Query> {
    let word = || prop::collection::vec(b'a'..=b'd', 0..4);
    prop_oneof![
        word().prop_map(Query::Exact),
        word().prop_map(Query::Prefix),
        prop::collection::vec(
            prop_oneof![Just(b'a'), Just(b'b'), Just(b'?'), Just(b'*')],
            0..5
        )
        .prop_map(Query::Wildcard),
        prop::collection::vec(word(), 1..4).prop_map(Query::Conjunctive),
        (prop::collection::vec(word(), 1..4), 1usize..6)
            .prop_map(|(keywords, k)| Query::Ranked { keywords, k }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("SESAME_SUITE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(200)
    ))]

    #[test]
    fn every_declared_query_kind_equals_the_oracle(
        db in arb_db(),
        queries in prop::collection::vec(arb_query(), 1..8),
        seed in any::<u64>(),
    ) {
        check(&db, &queries, seed);
    }
}

#[test]
fn chlh15_counts_the_false_positives_it_removes() {
    let s = sesame_sse::scheme("chlh15").unwrap();
    let mut db = Multimap::new();
    db.insert(b"abc".to_vec(), vec![1]);
    db.insert(b"xb".to_vec(), vec![1]);
    db.insert(b"ab".to_vec(), vec![2]);
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let mut client = (s.new_client)(&mut rng, &Params::new()).unwrap();
    let mut ch = channel(&s);
    client.setup(&mut rng, &mut ch, &db).unwrap();
    // Document 1's filter holds every element of `ab`, from two keywords
    // ((0,a), (1,b) and the pair "ab" from `abc`; the length 2 ending in b
    // from `xb`): a structural false positive the client removes.
    let r = client
        .query(&mut rng, &mut ch, &Query::Exact(b"ab".to_vec()))
        .unwrap();
    assert_eq!(r.ids, vec![2]);
    assert_eq!(r.false_positives_removed, 1);
}

#[test]
fn chlh15_refuses_a_filter_that_would_saturate() {
    let s = sesame_sse::scheme("chlh15").unwrap();
    let mut db = Multimap::new();
    db.insert(b"abcdefgh".to_vec(), vec![1]);
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let mut client = (s.new_client)(&mut rng, &Params::parse("elements=4").unwrap()).unwrap();
    let mut ch = channel(&s);
    let err = client.setup(&mut rng, &mut ch, &db).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("saturate")),
        "{err}"
    );
    assert!((s.new_client)(&mut rng, &Params::parse("fpr=1.5").unwrap()).is_err());
}

#[test]
fn schemes_without_a_kind_say_so() {
    let s = sesame_sse::scheme("pibas").unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let mut client = (s.new_client)(&mut rng, &Params::new()).unwrap();
    let mut ch = channel(&s);
    client.setup(&mut rng, &mut ch, &Multimap::new()).unwrap();
    for q in ["ab*", "a?c", "top:3 a b"] {
        let q = Query::parse(q).unwrap();
        match client.query(&mut rng, &mut ch, &q) {
            Err(Error::Unsupported(m)) => assert!(m.contains("pibas"), "{m}"),
            other => panic!("{q:?}: {other:?}"),
        }
    }
    assert!(client
        .query(&mut rng, &mut ch, &Query::parse("ab").unwrap())
        .is_ok());
}

#[test]
fn declared_kinds_match_the_issue() {
    let kinds = |n: &str| sesame_sse::scheme(n).unwrap().descriptor.queries;
    assert!(kinds("suise2").contains(&QueryKind::Prefix));
    assert!(!kinds("suise").contains(&QueryKind::Prefix));
    assert!(kinds("chlh15").contains(&QueryKind::Wildcard));
    assert!(kinds("vasst16").contains(&QueryKind::Ranked));
    assert!(kinds("vasst16-2").contains(&QueryKind::Prefix));
}

#[test]
fn suise_updates_after_a_search_keep_the_inverted_entry_current() {
    use sesame_sse::UpdateOp;
    for name in ["suise", "suise2"] {
        let s = sesame_sse::scheme(name).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(4);
        let mut client = (s.new_client)(&mut rng, &Params::new()).unwrap();
        let mut ch = channel(&s);
        let mut db = Multimap::new();
        db.insert(b"apple".to_vec(), vec![1, 2]);
        db.insert(b"apricot".to_vec(), vec![2]);
        client.setup(&mut rng, &mut ch, &db).unwrap();
        assert_eq!(
            client.search(&mut rng, &mut ch, b"apple").unwrap(),
            vec![1, 2]
        );
        client
            .update(&mut rng, &mut ch, UpdateOp::Add, 3, &[b"apple".to_vec()])
            .unwrap();
        client
            .update(&mut rng, &mut ch, UpdateOp::Delete, 1, &[b"apple".to_vec()])
            .unwrap();
        let mut again = (s.restore_client)(&client.save_state().unwrap()).unwrap();
        assert_eq!(
            again.search(&mut rng, &mut ch, b"apple").unwrap(),
            vec![2, 3]
        );
        if name == "suise2" {
            let p = Query::Prefix(b"ap".to_vec());
            assert_eq!(again.query(&mut rng, &mut ch, &p).unwrap().ids, vec![2, 3]);
            again
                .update(&mut rng, &mut ch, UpdateOp::Delete, 2, &[b"apple".to_vec()])
                .unwrap();
            // Document 2 still has "apricot" under the prefix "ap".
            assert_eq!(again.query(&mut rng, &mut ch, &p).unwrap().ids, vec![2, 3]);
        }
    }
}

#[test]
fn hostile_requests_are_errors_not_panics() {
    use rand::RngCore;
    use sesame_core::Channel;
    let mut db = Multimap::new();
    db.insert(b"hello".to_vec(), vec![1, 2]);
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    for s in seed001() {
        let mut client = (s.new_client)(&mut rng, &Params::new()).unwrap();
        let mut ch = channel(&s);
        client.setup(&mut rng, &mut ch, &db).unwrap();
        for len in [0usize, 1, 7, 64, 300] {
            let mut junk = vec![0u8; len];
            rng.fill_bytes(&mut junk);
            // Either the server refuses it or answers something; it must
            // not panic.
            let _ = ch.call(&junk);
        }
        // The index still answers.
        assert_eq!(
            client.search(&mut rng, &mut ch, b"hello").unwrap(),
            vec![1, 2]
        );
    }
    // CHLH15: trapdoors of the wrong shape are refused.
    let s = sesame_sse::scheme("chlh15").unwrap();
    let mut client = (s.new_client)(&mut rng, &Params::new()).unwrap();
    let mut ch = channel(&s);
    client.setup(&mut rng, &mut ch, &db).unwrap();
    for trapdoor in [vec![0u64; 3], vec![1u64; 1]] {
        let r: sesame_core::Result<sesame_sse::chlh15::Response> =
            sesame_core::channel::call(&mut ch, &sesame_sse::chlh15::Request::Search { trapdoor });
        assert!(r.is_err());
    }
}

#[test]
fn chlh15_prefix_false_positives_stay_within_the_configured_rate() {
    use rand::Rng;
    // For a 3-byte prefix every element is bound to one keyword (the run
    // of 3 characters at position 0), so a false candidate needs a Bloom
    // false positive: the rate over (document, query) pairs must stay
    // near `fpr`.
    let fpr = 0.01;
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let mut db = Multimap::new();
    let docs = 200u64;
    for doc in 0..docs {
        for _ in 0..30 {
            let len = rng.gen_range(3..8);
            let w: Vec<u8> = (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect();
            db.entry(w).or_default().push(doc);
        }
    }
    let s = sesame_sse::scheme("chlh15").unwrap();
    let params = Params::parse(&format!("fpr={fpr},elements=4096")).unwrap();
    let mut client = (s.new_client)(&mut rng, &params).unwrap();
    let mut ch = channel(&s);
    client.setup(&mut rng, &mut ch, &db).unwrap();
    let (mut removed, mut negatives) = (0usize, 0usize);
    for _ in 0..200 {
        let p: Vec<u8> = (0..3).map(|_| rng.gen_range(b'a'..=b'z')).collect();
        let r = client
            .query(&mut rng, &mut ch, &Query::Prefix(p.clone()))
            .unwrap();
        assert_eq!(r.ids, oracle(&db, |k| k.starts_with(&p)));
        removed += r.false_positives_removed;
        negatives += docs as usize - r.ids.len();
    }
    let rate = removed as f64 / negatives as f64;
    assert!(rate <= 2.0 * fpr, "false-positive rate {rate} above {fpr}");
}
