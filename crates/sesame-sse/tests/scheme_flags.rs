//! What each keyword scheme says about itself is true:
//!
//! - a scheme whose [`KeywordClient::search_writes`] is `false` neither
//!   writes to the server's store nor changes its saved state on search;
//! - a scheme whose search writes answers through `prepare_query` and
//!   `resolve_query`, and a client restored from the state saved right
//!   after `prepare_query` resolves the answers to the oracle's result;
//! - a scheme whose [`KeywordClient::prepares_updates`] is `true` returns
//!   requests from `prepare_update_interactive` for additions;
//! - a scheme with a one-round search token answers the token's request,
//!   sent by hand and resolved, as its `search` does.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{Channel, LocalChannel, Params, SchemeKind, Service, Store};
use sesame_sse::query::Query;
use sesame_sse::{DocId, KeywordClient, KeywordScheme, Multimap, UpdateOp};
use sesame_store::MemoryStore;

/// Everything the store holds.
fn snapshot(store: &MemoryStore) -> BTreeMap<Vec<u8>, Vec<u8>> {
    store.scan_prefix(b"").unwrap().into_iter().collect()
}

/// Documents 1..=12; keyword `k{i}` is in documents `d` with `d % (i+2) == 0`.
fn database() -> Multimap {
    let mut db = Multimap::new();
    for d in 1..=12u64 {
        for i in 0..4u64 {
            if d % (i + 2) == 0 {
                db.entry(format!("k{i}").into_bytes())
                    .or_default()
                    .push(d as DocId);
            }
        }
    }
    db
}

fn expected(db: &Multimap, keyword: &[u8]) -> Vec<DocId> {
    let mut ids = db.get(keyword).cloned().unwrap_or_default();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// A client, its in-process channel and the server's store.
type Loaded = (
    Box<dyn KeywordClient>,
    LocalChannel<Box<dyn Service>>,
    Arc<MemoryStore>,
);

/// A client holding `db`, over an in-process server on a memory store.
fn loaded(scheme: &KeywordScheme, db: &Multimap, rng: &mut ChaCha20Rng) -> Loaded {
    let mut client = (scheme.new_client)(rng, &Params::new()).unwrap();
    let store = Arc::new(MemoryStore::new());
    let mut channel = support::channel(scheme, store.clone());
    if scheme.descriptor.kind == SchemeKind::StaticSse {
        client.setup(rng, &mut channel, db).unwrap();
    } else {
        let mut by_doc: BTreeMap<DocId, Vec<Vec<u8>>> = BTreeMap::new();
        for (w, ids) in db {
            for id in ids {
                by_doc.entry(*id).or_default().push(w.clone());
            }
        }
        for (doc, keywords) in by_doc {
            client
                .update(rng, &mut channel, UpdateOp::Add, doc, &keywords)
                .unwrap();
        }
    }
    (client, channel, store)
}

fn keyword_schemes() -> Vec<KeywordScheme> {
    sesame_sse::schemes()
        .into_iter()
        .filter(|s| {
            matches!(
                s.descriptor.kind,
                SchemeKind::StaticSse | SchemeKind::DynamicSse
            )
        })
        .collect()
}

#[test]
fn a_search_that_says_it_writes_nothing_writes_nothing() {
    let db = database();
    let (mut checked, mut wrong) = (0, Vec::new());
    for scheme in keyword_schemes() {
        let name = scheme.descriptor.name;
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let (mut client, mut channel, store) = loaded(&scheme, &db, &mut rng);
        if client.search_writes() {
            continue;
        }
        let (state, stored) = (client.save_state().unwrap(), snapshot(&store));
        for w in ["k0", "k1", "absent"] {
            let ids = client.search(&mut rng, &mut channel, w.as_bytes()).unwrap();
            assert_eq!(ids, expected(&db, w.as_bytes()), "{name} {w}");
        }
        if snapshot(&store) != stored {
            wrong.push(format!("{name}: a search wrote"));
        }
        if client.save_state().unwrap() != state {
            wrong.push(format!("{name}: a search changed the client state"));
        }
        checked += 1;
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert!(checked > 5, "only {checked} schemes checked");
}

#[test]
fn a_search_that_writes_resolves_after_a_crash() {
    let db = database();
    let mut checked = 0;
    for scheme in keyword_schemes() {
        let name = scheme.descriptor.name;
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        let (mut client, mut channel, _store) = loaded(&scheme, &db, &mut rng);
        if !client.search_writes() {
            continue;
        }
        client.initialise_server(&mut channel).unwrap();
        for round in 0..3 {
            for w in ["k0", "k1", "k3", "absent"] {
                let query = Query::Exact(w.as_bytes().to_vec());
                let prepared = client
                    .prepare_query(&mut rng, &mut channel, &query)
                    .unwrap();
                // The state the SDK saves with the requests.
                let saved = client.save_state().unwrap();
                let answers: Vec<Vec<u8>> = prepared
                    .requests
                    .iter()
                    .map(|r| channel.call(r).unwrap())
                    .collect();
                // The process died before the answers arrived: a client
                // restored from the saved state resolves the (replayed)
                // answers.
                let mut restored = (scheme.restore_client)(&saved).unwrap();
                let result = restored
                    .resolve_query(&query, &prepared.context, &answers)
                    .unwrap();
                assert_eq!(
                    result.ids,
                    expected(&db, w.as_bytes()),
                    "{name} {w} {round}"
                );
                client = restored;
            }
        }
        checked += 1;
    }
    assert!(checked >= 2, "only {checked} schemes checked");
}

#[test]
fn schemes_that_prepare_updates_return_requests() {
    for scheme in keyword_schemes() {
        let name = scheme.descriptor.name;
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let (mut client, mut channel, _store) = loaded(&scheme, &database(), &mut rng);
        let prepared = client
            .prepare_update_interactive(
                &mut rng,
                &mut channel,
                UpdateOp::Add,
                99,
                &[b"k0".to_vec()],
            )
            .unwrap();
        assert_eq!(
            prepared.is_some(),
            client.prepares_updates(),
            "{name}: prepares_updates says {}",
            client.prepares_updates()
        );
    }
}

#[test]
fn schemes_that_support_deletion_delete() {
    let db = database();
    let mut checked = 0;
    for scheme in keyword_schemes() {
        let name = scheme.descriptor.name;
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let (mut client, mut channel, _store) = loaded(&scheme, &db, &mut rng);
        if !client.supports_deletion() {
            continue;
        }
        assert!(
            client.prepares_updates(),
            "{name}: deletion without prepared updates"
        );
        // Documents 2 and 6 contain k0 (and 6 contains k1): both deleted
        // from k0 only.
        for doc in [2, 6] {
            let requests = client
                .prepare_update_interactive(
                    &mut rng,
                    &mut channel,
                    UpdateOp::Delete,
                    doc,
                    &[b"k0".to_vec()],
                )
                .unwrap()
                .unwrap();
            for r in &requests {
                client
                    .check_update_response(&channel.call(r).unwrap())
                    .unwrap();
            }
        }
        let mut want = expected(&db, b"k0");
        want.retain(|d| ![2, 6].contains(d));
        let found = client.search(&mut rng, &mut channel, b"k0").unwrap();
        assert_eq!(found, want, "{name}: k0 after deleting 2 and 6");
        let found = client.search(&mut rng, &mut channel, b"k1").unwrap();
        assert_eq!(found, expected(&db, b"k1"), "{name}: k1 untouched");
        checked += 1;
    }
    assert!(checked >= 6, "only {checked} schemes checked");
}

#[test]
fn a_search_token_sent_by_hand_and_resolved_answers_as_search_does() {
    let db = database();
    let mut with_tokens = Vec::new();
    for scheme in sesame_sse::schemes() {
        let name = scheme.descriptor.name;
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let (mut client, mut channel, _store) = loaded(&scheme, &db, &mut rng);
        let mut supported = true;
        for w in ["k0", "k1", "k3", "absent"] {
            let request = match client.search_token(&mut rng, w.as_bytes()) {
                Err(sesame_core::Error::Unsupported(_)) => {
                    supported = false;
                    break;
                }
                other => other.unwrap(),
            };
            let got = match request {
                None => Vec::new(),
                Some(request) => {
                    let response = channel.call(&request).unwrap();
                    client.resolve(w.as_bytes(), &response).unwrap()
                }
            };
            assert_eq!(got, expected(&db, w.as_bytes()), "{name}: {w}");
            let searched = client.search(&mut rng, &mut channel, w.as_bytes()).unwrap();
            assert_eq!(got, searched, "{name}: {w}");
        }
        if supported {
            // An answer that is not this scheme's is an error.
            assert!(client.resolve(b"k0", &[0xff, 0xff]).is_err(), "{name}");
            with_tokens.push(name);
        }
    }
    for name in ["pibas", "2lev", "fast"] {
        assert!(with_tokens.contains(&name), "{name}: {with_tokens:?}");
    }
}
