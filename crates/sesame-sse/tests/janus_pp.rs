//! Janus++'s own properties: a deletion sends one punctured share, a
//! keyword is renewed (searched) before its d+1-th deletion, and searches
//! renew the keys.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{Channel, LocalChannel, Params, Store};
use sesame_sse::{KeywordClient, Multimap, UpdateOp};
use sesame_store::MemoryStore;

#[test]
fn deletions_send_a_share_and_respect_the_bound() {
    let s = sesame_sse::scheme("janus-pp").unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let mut c = (s.new_client)(&mut rng, &Params::parse("d=3").unwrap()).unwrap();
    let mut ch = support::memory_channel(&s);
    c.setup(&mut rng, &mut ch, &Multimap::new()).unwrap();
    let w = vec![b"w".to_vec()];
    for id in 0..6 {
        c.update(&mut rng, &mut ch, UpdateOp::Add, id, &w).unwrap();
    }
    let span = ch.meter().span();
    for id in 0..3 {
        c.update(&mut rng, &mut ch, UpdateOp::Delete, id, &w)
            .unwrap();
    }
    let snap = span.finish();
    assert_eq!(snap.rounds, 3);
    // A punctured share is the 64-node co-path of the tag.
    assert!(snap.bytes_up > 3 * 64 * 16, "{}", snap.bytes_up);
    // The fourth deletion renews the keyword first: its search, then the
    // deletion, in two rounds.
    let span = ch.meter().span();
    c.update(&mut rng, &mut ch, UpdateOp::Delete, 3, &w)
        .unwrap();
    assert_eq!(span.finish().rounds, 2);
    assert_eq!(c.search(&mut rng, &mut ch, b"w").unwrap(), vec![4, 5]);
    // Cached results are deleted in the next epoch; re-additions return.
    c.update(&mut rng, &mut ch, UpdateOp::Delete, 4, &w)
        .unwrap();
    c.update(&mut rng, &mut ch, UpdateOp::Add, 3, &w).unwrap();
    c.update(&mut rng, &mut ch, UpdateOp::Add, 1, &w).unwrap();
    let mut c = (s.restore_client)(&c.save_state().unwrap()).unwrap();
    assert_eq!(c.search(&mut rng, &mut ch, b"w").unwrap(), vec![1, 3, 5]);
    // Many deletions between two searches: each run of d is renewed.
    for id in 10..40 {
        c.update(&mut rng, &mut ch, UpdateOp::Add, id, &w).unwrap();
    }
    for id in 10..38 {
        c.update(&mut rng, &mut ch, UpdateOp::Delete, id, &w)
            .unwrap();
    }
    assert_eq!(
        c.search(&mut rng, &mut ch, b"w").unwrap(),
        vec![1, 3, 5, 38, 39]
    );
    assert!((s.new_client)(&mut rng, &Params::parse("d=0").unwrap()).is_err());
}

/// A Janus++ client (`d=4`, seeded with `seed`) over a fresh in-memory
/// server, with documents 1 to 6 added to keyword `w` and 2 and 4 deleted
/// (no search yet): its RNG, client, channel, store and keyword list.
#[allow(clippy::type_complexity)]
fn six_added_two_deleted(
    seed: u64,
) -> (
    ChaCha20Rng,
    Box<dyn KeywordClient>,
    LocalChannel<Box<dyn sesame_core::Service>>,
    Arc<MemoryStore>,
    Vec<Vec<u8>>,
) {
    let s = sesame_sse::scheme("janus-pp").unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut c = (s.new_client)(&mut rng, &Params::parse("d=4").unwrap()).unwrap();
    let store = Arc::new(MemoryStore::new());
    let mut ch = support::channel(&s, store.clone());
    c.setup(&mut rng, &mut ch, &Multimap::new()).unwrap();
    let w = vec![b"w".to_vec()];
    for id in 1..=6 {
        c.update(&mut rng, &mut ch, UpdateOp::Add, id, &w).unwrap();
    }
    for id in [2, 4] {
        c.update(&mut rng, &mut ch, UpdateOp::Delete, id, &w)
            .unwrap();
    }
    (rng, c, ch, store, w)
}

/// A search request that reaches the server twice (its first answer was
/// lost) gets the same answer, and later searches are still right: what a
/// search consumes is deleted by the next epoch's search.
#[test]
fn a_repeated_search_gets_the_same_answer() {
    use sesame_sse::query::Query;
    let (mut rng, mut c, mut ch, store, w) = six_added_two_deleted(9);
    let query = Query::Exact(b"w".to_vec());
    for round in 0..3 {
        let prepared = c.prepare_query(&mut rng, &mut ch, &query).unwrap();
        let first: Vec<Vec<u8>> = prepared
            .requests
            .iter()
            .map(|r| ch.call(r).unwrap())
            .collect();
        let again: Vec<Vec<u8>> = prepared
            .requests
            .iter()
            .map(|r| ch.call(r).unwrap())
            .collect();
        assert_eq!(first, again, "round {round}");
        let ids = c
            .resolve_query(&query, &prepared.context, &again)
            .unwrap()
            .ids;
        let want: Vec<u64> = match round {
            0 => vec![1, 3, 5, 6],
            1 => vec![1, 5, 6],
            _ => vec![1, 5, 6, 7],
        };
        assert_eq!(ids, want, "round {round}");
        if round == 0 {
            c.update(&mut rng, &mut ch, UpdateOp::Delete, 3, &w)
                .unwrap();
        } else {
            c.update(&mut rng, &mut ch, UpdateOp::Add, 7, &w).unwrap();
        }
    }
    // Two epochs on, nothing of the first epochs is left but the cache.
    let held = store.scan_prefix(b"").unwrap().len();
    assert!(held <= 8, "{held} keys kept");
}

/// What a search consumed is deleted by the keyword's next search: the
/// entries and shares of an epoch do not pile up on the server. After the
/// first search of six additions and two deletions, searches with nothing
/// in between leave the store at one size.
#[test]
fn consumed_keys_are_deleted_by_the_next_search() {
    let (mut rng, mut c, mut ch, store, _) = six_added_two_deleted(10);
    let keys = || store.scan_prefix(b"").unwrap().len();
    let before = keys();
    assert_eq!(c.search(&mut rng, &mut ch, b"w").unwrap(), vec![1, 3, 5, 6]);
    let after_first = keys();
    assert_eq!(c.search(&mut rng, &mut ch, b"w").unwrap(), vec![1, 3, 5, 6]);
    let after_second = keys();
    // The second search deleted the first epoch's entries and shares.
    assert!(
        after_second < after_first,
        "{before} {after_first} {after_second}"
    );
    for _ in 0..3 {
        assert_eq!(c.search(&mut rng, &mut ch, b"w").unwrap(), vec![1, 3, 5, 6]);
        assert_eq!(keys(), after_second);
    }
}
