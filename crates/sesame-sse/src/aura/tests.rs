//! Unit tests of Aura: positions, parameters, and the batched and
//! shared-descent computations against the straightforward ones.

use super::*;
use crate::api::{KeywordClient, Multimap, UpdateOp};
use crate::renewal::{label, RenewedSearch};

#[test]
fn positions_are_in_range_and_depend_on_the_tag() {
    let p: Vec<u64> = positions(&[0x5a; TAG_LEN], 13, 4).collect();
    assert_eq!(p.len(), 13);
    assert!(p.iter().all(|&x| x < 16));
    let a: Vec<u64> = positions(&[1; TAG_LEN], 64, 40).collect();
    let b: Vec<u64> = positions(&[2; TAG_LEN], 64, 40).collect();
    assert_eq!(a.len(), 64);
    assert_ne!(a, b);
    assert_eq!(a, positions(&[1; TAG_LEN], 64, 40).collect::<Vec<_>>());
}

#[test]
fn false_positive_rate_meets_the_fp_parameter() {
    let p = Params::parse("h=5,fp=0.0001,dmax=1000").unwrap();
    let (h, depth) = parse_params(&p).unwrap();
    assert_eq!(h, 5);
    assert!(false_positive_rate((1u64 << depth) as f64, 5, 1000) <= 1e-4);
    assert!(false_positive_rate((1u64 << (depth - 1)) as f64, 5, 1000) > 1e-4);
}

/// The straightforward computation of an entry: one descent from the
/// root per position, a token per entry, a copy per ciphertext.
fn reference_entry(c: &AuraClient, doc: DocId, keyword: &[u8], plan: &AddPlan) -> Entry {
    let tree = c.tree(keyword, plan.epoch).unwrap();
    let mut value = Vec::with_capacity(TAG_LEN + ID_LEN * usize::from(c.h));
    value.extend_from_slice(&plan.tag);
    for p in positions(&plan.tag, c.h, c.depth) {
        let leaf = tree.leaf(p).unwrap();
        let pad = pad(&leaf, &plan.tag);
        let ct: Vec<u8> = doc
            .to_le_bytes()
            .iter()
            .zip(pad)
            .map(|(a, b)| a ^ b)
            .collect();
        value.extend_from_slice(&ct);
    }
    (label(&c.token(keyword, plan.epoch), plan.count), value)
}

/// The entries of adding `doc` under `list`, one by one, the
/// straightforward way (advancing `copy`'s state as an addition does).
fn reference_entries(copy: &mut AuraClient, doc: DocId, list: &[Vec<u8>]) -> Vec<Entry> {
    list.iter()
        .map(|w| {
            let plan = copy.plan_add(doc, w).unwrap();
            reference_entry(copy, doc, w, &plan)
        })
        .collect()
}

fn sorted(mut entries: Vec<Entry>) -> Vec<Entry> {
    entries.sort_unstable_by_key(|e| e.0);
    entries
}

#[test]
fn entries_equal_the_straightforward_computation() {
    use rand::SeedableRng;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
    // Default parameters, a small filter (positions of a tag often
    // repeat, and tags share most of their paths) and the largest one.
    for params in ["", "h=5,b=16", "h=64,b=1099511627776"] {
        let params = Params::parse(params).unwrap();
        let mut c = AuraClient::new(&mut rng, &params).unwrap();
        let words: Vec<Vec<u8>> = (0..80).map(|i| format!("w{i}").into_bytes()).collect();
        // Earlier additions, a deletion (the re-added pair gets a new
        // generation) and searched keywords (a later epoch).
        for (i, w) in words[..10].iter().enumerate() {
            c.add_entry(1, w).unwrap();
            c.add_entry(2, w).unwrap();
            if i % 2 == 0 {
                c.delete(1, w).unwrap();
            }
            if i % 3 == 0 {
                c.renew(w);
            }
        }
        // A document with a keyword listed twice, on several threads
        // (80 entries) and on one (3).
        let mut doc_words = words.clone();
        doc_words.push(words[3].clone());
        for (doc, list) in [(1, &doc_words[..]), (9, &doc_words[..3])] {
            let mut copy = AuraClient::restore(&c.save_state().unwrap()).unwrap();
            let expected = reference_entries(&mut copy, doc, list);
            let got = c.add_entries(doc, list).unwrap();
            assert_eq!(sorted(got), sorted(expected));
            assert_eq!(c.save_state().unwrap(), copy.save_state().unwrap());
        }
        // Small updates of the same keywords: through the kept nodes,
        // first those reached, then (from the 16th addition of an
        // epoch) all of them; a search drops the keyword's nodes.
        let mut copy = AuraClient::restore(&c.save_state().unwrap()).unwrap();
        for doc in 10..40 {
            let list = &words[doc as usize % 3..doc as usize % 3 + 2];
            let expected = reference_entries(&mut copy, doc, list);
            let got = c.add_entries(doc, list).unwrap();
            assert_eq!(sorted(got), sorted(expected));
            if doc == 30 {
                c.renew(&words[1]);
                copy.renew(&words[1]);
                assert!(c.kept.trees.iter().all(|t| t.keyword != words[1]));
            }
        }
        if c.depth > KEPT_LEVEL {
            assert!(c
                .kept
                .trees
                .iter()
                .any(|t| t.nodes.len() == 1 << KEPT_LEVEL));
        }
        assert_eq!(c.save_state().unwrap(), copy.save_state().unwrap());
        // Setup: one keyword of 300 identifiers (split between the
        // cores) and many of a few.
        let mut db = Multimap::new();
        db.insert(b"big".to_vec(), (0..300).collect());
        for w in &words {
            db.insert(w.clone(), vec![5, 3, 5, 8]);
        }
        let mut copy = AuraClient::restore(&c.save_state().unwrap()).unwrap();
        copy.keywords.clear();
        let mut expected = Vec::new();
        for (w, ids) in &db {
            for id in common::normalise(ids.clone()) {
                let plan = copy.plan_add(id, w).unwrap();
                expected.push(reference_entry(&copy, id, w, &plan));
            }
        }
        let got = c.setup_entries(&db).unwrap();
        assert_eq!(got.len(), 300 + 3 * words.len());
        assert_eq!(sorted(got), sorted(expected));
        assert_eq!(c.save_state().unwrap(), copy.save_state().unwrap());
    }
}

/// Keywords added to in turn, more of them than the client keeps
/// nodes for: a keyword's tree is evicted before its next addition.
/// That addition must cost about what its keyword's first one costs
/// (one descent), not a derivation of all `2^10` kept nodes.
#[test]
fn additions_in_turn_over_more_keywords_than_kept_cost_one_descent() {
    use rand::SeedableRng;
    use sesame_crypto::counter::{self, Primitive};
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(8);
    let mut c = AuraClient::new(&mut rng, &Params::new()).unwrap();
    let words: Vec<Vec<u8>> = (0..2 * KEPT_TREES)
        .map(|i| format!("w{i}").into_bytes())
        .collect();
    let mut doc = 0;
    let (_, first) = counter::measure(|| {
        for w in &words {
            doc += 1;
            c.add_entries(doc, std::slice::from_ref(w)).unwrap();
        }
    });
    for _ in 0..KEEP_ALL_AFTER {
        for w in &words {
            doc += 1;
            c.add_entries(doc, std::slice::from_ref(w)).unwrap();
        }
    }
    let (_, later) = counter::measure(|| {
        for w in &words {
            doc += 1;
            c.add_entries(doc, std::slice::from_ref(w)).unwrap();
        }
    });
    let (first, later) = (first.total(Primitive::Prg), later.total(Primitive::Prg));
    assert!(
        later <= first + first / 10,
        "{later} node expansions for {} additions in turn, {first} for their first",
        words.len()
    );
}

#[test]
fn entries_computed_on_several_threads_equal_those_computed_on_one() {
    use rand::SeedableRng;
    use sesame_crypto::counter;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
    let mut one = AuraClient::new(&mut rng, &Params::new()).unwrap();
    let words: Vec<Vec<u8>> = (0..300).map(|i| format!("w{i}").into_bytes()).collect();
    // A few keywords with earlier additions and a deletion.
    for w in &words[..5] {
        one.add_entry(1, w).unwrap();
        one.delete(1, w).unwrap();
    }
    let mut many = AuraClient::restore(&one.save_state().unwrap()).unwrap();
    let (mut seq, seq_counts) = counter::measure(|| {
        words
            .iter()
            .map(|w| one.add_entry(7, w))
            .collect::<Result<Vec<_>>>()
            .unwrap()
    });
    let (mut par, par_counts) = counter::measure(|| many.add_entries(7, &words).unwrap());
    seq.sort_unstable_by_key(|e| e.0);
    par.sort_unstable_by_key(|e| e.0);
    assert_eq!(seq, par);
    assert_eq!(seq_counts, par_counts);
    assert!(seq_counts.total(sesame_crypto::counter::Primitive::Prg) > 0);
    assert_eq!(one.save_state().unwrap(), many.save_state().unwrap());
}

/// One batch of updates gives, update by update, the requests one call
/// per update gives, and the same state after, on one thread (a small
/// batch, through the kept nodes) and on several; documents sharing
/// keywords share their descents, so the batch expands fewer nodes.
#[test]
fn a_batch_prepares_what_one_call_per_update_prepares() {
    use rand::SeedableRng;
    use sesame_crypto::counter::{self, Primitive};
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(11);
    let words: Vec<Vec<u8>> = (0..60).map(|i| format!("w{i}").into_bytes()).collect();
    for params in ["", "h=5,b=16"] {
        let mut c = AuraClient::new(&mut rng, &Params::parse(params).unwrap()).unwrap();
        // Earlier additions, a deletion and a searched keyword.
        for w in &words[..6] {
            c.add_entry(1, w).unwrap();
            c.add_entry(2, w).unwrap();
        }
        c.delete(1, &words[0]).unwrap();
        c.renew(&words[1]);
        let mut updates: Vec<(UpdateOp, DocId, Vec<Vec<u8>>)> = (3..43)
            .map(|d: u64| {
                let list = (0..30).map(|j| words[(d as usize * 7 + j) % 60].clone());
                (UpdateOp::Add, d, list.collect())
            })
            .collect();
        // A deletion and a re-addition inside the batch (a new
        // generation of the pair), a keyword listed twice, no keyword.
        updates.insert(10, (UpdateOp::Delete, 5, updates[2].2.clone()));
        updates.insert(11, (UpdateOp::Add, 5, updates[2].2[..4].to_vec()));
        updates.push((UpdateOp::Add, 50, vec![words[3].clone(), words[3].clone()]));
        updates.push((UpdateOp::Add, 51, Vec::new()));
        let small = vec![
            (UpdateOp::Add, 60, words[..3].to_vec()),
            (UpdateOp::Add, 61, words[2..5].to_vec()),
        ];
        for batch in [&updates, &small] {
            let mut one = AuraClient::restore(&c.save_state().unwrap()).unwrap();
            let mut all = AuraClient::restore(&c.save_state().unwrap()).unwrap();
            let (expected, one_counts) = counter::measure(|| {
                batch
                    .iter()
                    .map(|(op, d, ws)| one.prepare_update(&mut rng, *op, *d, ws).unwrap().unwrap())
                    .collect::<Vec<_>>()
            });
            let refs: Vec<(UpdateOp, DocId, &[Vec<u8>])> = batch
                .iter()
                .map(|(op, d, ws)| (*op, *d, ws.as_slice()))
                .collect();
            let (got, all_counts) =
                counter::measure(|| all.prepare_updates(&mut rng, &refs).unwrap().unwrap());
            assert_eq!(got, expected, "params {params:?}, {} updates", batch.len());
            assert_eq!(all.save_state().unwrap(), one.save_state().unwrap());
            if batch.len() > 2 && params.is_empty() {
                assert!(
                    all_counts.total(Primitive::Prg) < one_counts.total(Primitive::Prg) * 9 / 10,
                    "{} node expansions, one by one {}",
                    all_counts.total(Primitive::Prg),
                    one_counts.total(Primitive::Prg)
                );
            }
        }
    }
}
