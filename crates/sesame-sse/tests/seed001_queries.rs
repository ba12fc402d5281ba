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

/// The collection as documents: each document's bag of terms. In a
/// multimap a document is listed under a keyword once per occurrence, so
/// the bag holds the keyword that many times.
fn documents(db: &Multimap) -> std::collections::BTreeMap<DocId, Vec<&[u8]>> {
    let mut docs: std::collections::BTreeMap<DocId, Vec<&[u8]>> = Default::default();
    for (w, ids) in db {
        for id in ids {
            docs.entry(*id).or_default().push(w.as_slice());
        }
    }
    docs
}

/// TF-IDF top-k by the textbook definition (Salton and Buckley 1988;
/// Manning, Raghavan, Schütze, *Introduction to Information Retrieval*,
/// §6.2), computed from the documents, not from the index: for each query
/// term `t` and document `d`, `tf(t, d)` is the number of times `t` occurs
/// in `d`, `df(t)` the number of documents in which it occurs at all, `N`
/// the number of documents, and `score(q, d) = Σ_t tf(t, d) · idf(t)`.
/// `idf` is the scheme's documented variant `ln(1 + N / df)`
/// (`docs/schemes/vasst16.md`); `ranking_follows_the_tf_idf_definition`
/// checks the order against the definition without that choice.
fn ranked_oracle(db: &Multimap, words: &[Vec<u8>], k: usize) -> Vec<(DocId, f64)> {
    let docs = documents(db);
    let n = docs.len() as f64;
    let tf = |t: &[u8], bag: &[&[u8]]| bag.iter().filter(|x| **x == t).count() as f64;
    let df = |t: &[u8]| docs.values().filter(|bag| tf(t, bag) > 0.0).count() as f64;
    let mut ranked: Vec<(DocId, f64)> = docs
        .iter()
        .map(|(d, bag)| {
            let score = words
                .iter()
                .filter(|t| df(t) > 0.0)
                .map(|t| tf(t, bag) * (1.0 + n / df(t)).ln())
                .sum::<f64>();
            (*d, score)
        })
        .filter(|(_, score)| *score > 0.0)
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(k);
    ranked
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

/// Checks a ranked answer against what every TF-IDF weighting implies,
/// whatever its exact `idf`: a score is `Σ_t tf(t, d) · idf(t)` with `idf`
/// positive and strictly decreasing in the document frequency. So the
/// answer holds exactly the documents with a query term; a document whose
/// term counts are all at least another's, one larger, ranks above it; equal
/// term counts score equally; of two documents each holding a single
/// occurrence of one term, the one with the rarer term ranks above; and the
/// top `k` is a prefix of the whole ranking.
fn check_ranking_definition(db: &Multimap, terms: &[Vec<u8>], k: usize, seed: u64) {
    let docs = documents(db);
    let tf = |t: &[u8], d: DocId| {
        docs.get(&d)
            .map_or(0, |bag| bag.iter().filter(|x| **x == t).count())
    };
    let df = |t: &[u8]| docs.keys().filter(|d| tf(t, **d) > 0).count();
    let counts = |d: DocId| terms.iter().map(|t| tf(t, d)).collect::<Vec<_>>();
    for name in ["vasst16", "vasst16-2"] {
        let s = sesame_sse::scheme(name).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut client = (s.new_client)(&mut rng, &Params::new()).unwrap();
        let mut ch = channel(&s);
        client.setup(&mut rng, &mut ch, db).unwrap();
        let all = Query::Ranked {
            keywords: terms.to_vec(),
            k: docs.len() + 1,
        };
        let r = client.query(&mut rng, &mut ch, &all).unwrap();
        let ranked: Vec<(DocId, f64)> = r.ids.into_iter().zip(r.scores).collect();
        let matching: BTreeSet<DocId> = docs
            .keys()
            .copied()
            .filter(|d| counts(*d).iter().any(|c| *c > 0))
            .collect();
        let got: BTreeSet<DocId> = ranked.iter().map(|(d, _)| *d).collect();
        assert_eq!(got, matching, "{name}: documents with a query term");
        assert_eq!(got.len(), ranked.len(), "{name}: a document twice");
        for w in ranked.windows(2) {
            assert!(
                w[0].1 > w[1].1 || (w[0].1 == w[1].1 && w[0].0 < w[1].0),
                "{name}: order {w:?}"
            );
        }
        let pos = |d: DocId| ranked.iter().position(|(x, _)| *x == d).unwrap();
        for (a, sa) in &ranked {
            for (b, sb) in &ranked {
                let (ca, cb) = (counts(*a), counts(*b));
                if ca == cb {
                    assert!((sa - sb).abs() < 1e-9, "{name}: equal counts {a} {b}");
                } else if ca.iter().zip(&cb).all(|(x, y)| x >= y) {
                    assert!(pos(*a) < pos(*b), "{name}: {a} {ca:?} dominates {b} {cb:?}");
                }
                let single = |c: &[usize]| {
                    (c.iter().sum::<usize>() == 1).then(|| c.iter().position(|x| *x == 1))
                };
                if let (Some(Some(i)), Some(Some(j))) = (single(&ca), single(&cb)) {
                    if df(&terms[i]) < df(&terms[j]) {
                        assert!(pos(*a) < pos(*b), "{name}: rarer term of {a} first");
                    }
                }
            }
        }
        let top = client
            .query(
                &mut rng,
                &mut ch,
                &Query::Ranked {
                    keywords: terms.to_vec(),
                    k,
                },
            )
            .unwrap();
        let prefix: Vec<DocId> = ranked.iter().take(k).map(|(d, _)| *d).collect();
        assert_eq!(top.ids, prefix, "{name}: top {k}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("SESAME_SUITE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(100)
    ))]

    #[test]
    fn ranking_follows_the_tf_idf_definition(
        db in arb_db(),
        terms in prop::collection::btree_set(prop::collection::vec(b'a'..=b'd', 1..5), 1..4),
        k in 1usize..6,
        seed in any::<u64>(),
    ) {
        let terms: Vec<Vec<u8>> = terms.into_iter().collect();
        check_ranking_definition(&db, &terms, k, seed);
    }
}

#[test]
fn ranking_definition_check_catches_a_wrong_weighting() {
    // "rare" is in document 2 only, "common" in documents 1, 3 and 4: under
    // any TF-IDF weighting document 2 ranks first; a plain term count would
    // tie all four and put document 1 first by identifier.
    let mut db = Multimap::new();
    db.insert(b"rare".to_vec(), vec![2]);
    db.insert(b"common".to_vec(), vec![1, 3, 4]);
    let terms = vec![b"rare".to_vec(), b"common".to_vec()];
    check_ranking_definition(&db, &terms, 2, 5);
    let s = sesame_sse::scheme("vasst16").unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let mut client = (s.new_client)(&mut rng, &Params::new()).unwrap();
    let mut ch = channel(&s);
    client.setup(&mut rng, &mut ch, &db).unwrap();
    let r = client
        .query(
            &mut rng,
            &mut ch,
            &Query::Ranked {
                keywords: terms,
                k: 1,
            },
        )
        .unwrap();
    assert_eq!(r.ids, vec![2]);
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
