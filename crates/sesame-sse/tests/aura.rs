//! Aura's own properties: deletions are local, a search is one round, keys
//! are renewed after a search, and the deletion filters persist with the
//! client state.

#![allow(clippy::unwrap_used)]

mod support;
use support::Chan;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{Channel, Params};
use sesame_sse::{KeywordClient, UpdateOp};

fn fresh(params: &str) -> (Box<dyn KeywordClient>, Chan, ChaCha20Rng) {
    support::fresh("aura", 7, |rng| {
        let s = sesame_sse::scheme("aura").unwrap();
        (s.new_client)(rng, &Params::parse(params).unwrap()).unwrap()
    })
}

#[test]
fn deletion_sends_nothing_and_search_is_one_round() {
    let (mut c, mut ch, mut rng) = fresh("h=5");
    let w = vec![b"w".to_vec()];
    for id in 0..20 {
        c.update(&mut rng, &mut ch, UpdateOp::Add, id, &w).unwrap();
    }
    let span = ch.meter().span();
    for id in 0..10 {
        c.update(&mut rng, &mut ch, UpdateOp::Delete, id, &w)
            .unwrap();
    }
    let del = span.finish();
    assert_eq!((del.rounds, del.bytes()), (0, 0));
    let span = ch.meter().span();
    let got = c.search(&mut rng, &mut ch, b"w").unwrap();
    assert_eq!(span.finish().rounds, 1);
    assert_eq!(got, (10..20).collect::<Vec<_>>());
}

#[test]
fn results_survive_key_renewal_deletions_and_re_additions() {
    let (mut c, mut ch, mut rng) = fresh("");
    let w = vec![b"w".to_vec()];
    for id in 0..5 {
        c.update(&mut rng, &mut ch, UpdateOp::Add, id, &w).unwrap();
    }
    assert_eq!(
        c.search(&mut rng, &mut ch, b"w").unwrap(),
        vec![0, 1, 2, 3, 4]
    );
    // Deleting a cached result after the search, in a new epoch.
    c.update(&mut rng, &mut ch, UpdateOp::Delete, 2, &w)
        .unwrap();
    c.update(&mut rng, &mut ch, UpdateOp::Add, 9, &w).unwrap();
    // Save and restore in between: the filter travels with the state.
    let mut c =
        (sesame_sse::scheme("aura").unwrap().restore_client)(&c.save_state().unwrap()).unwrap();
    assert_eq!(
        c.search(&mut rng, &mut ch, b"w").unwrap(),
        vec![0, 1, 3, 4, 9]
    );
    c.update(&mut rng, &mut ch, UpdateOp::Add, 2, &w).unwrap();
    assert_eq!(
        c.search(&mut rng, &mut ch, b"w").unwrap(),
        vec![0, 1, 2, 3, 4, 9]
    );
    c.update(&mut rng, &mut ch, UpdateOp::Delete, 2, &w)
        .unwrap();
    assert_eq!(
        c.search(&mut rng, &mut ch, b"w").unwrap(),
        vec![0, 1, 3, 4, 9]
    );
}

#[test]
fn additions_after_a_search_use_fresh_labels() {
    // The update requests for the same pair before and after a search share
    // no label: the server cannot link them to the search token.
    let (mut c, mut ch, mut rng) = fresh("h=5");
    let w = vec![b"w".to_vec()];
    let before = c
        .prepare_update(&mut rng, UpdateOp::Add, 1, &w)
        .unwrap()
        .unwrap();
    for r in &before {
        ch.call(r).unwrap();
    }
    c.search(&mut rng, &mut ch, b"w").unwrap();
    let after = c
        .prepare_update(&mut rng, UpdateOp::Add, 1, &w)
        .unwrap()
        .unwrap();
    assert_ne!(before, after);
    assert_eq!(before[0].len(), after[0].len());
}

#[test]
fn bad_parameters_are_refused() {
    let s = sesame_sse::scheme("aura").unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    for p in ["h=0", "h=65", "b=2", "fp=2", "h=64,b=16"] {
        assert!(
            (s.new_client)(&mut rng, &Params::parse(p).unwrap()).is_err(),
            "{p}"
        );
    }
}
