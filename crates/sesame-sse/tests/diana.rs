//! Diana tried as the server would try to break it: after a search the
//! server holds the keyword's tweak and the cover of its leaves; it derives
//! every leaf the cover gives and looks for a later update's labels among
//! their labels (forward privacy). A hostile search request (a cover that
//! claims far more leaves than were written) must end after the entries
//! stored, not after the cover's two billion leaves.

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{Channel, Handler, LocalChannel, Params, Store};
use sesame_crypto::ggm::GgmTree;
use sesame_crypto::Key;
use sesame_sse::diana::{self, DianaServer, Request};
use sesame_sse::{KeywordClient, Multimap, UpdateOp};
use sesame_store::MemoryStore;

/// The labels an update request stores.
fn labels_of(request: &[u8]) -> Vec<[u8; diana::LABEL_LEN]> {
    match sesame_core::wire::decode(request).unwrap() {
        Request::Put { entries, .. } => entries.into_iter().map(|(l, _)| l).collect(),
        Request::Search { .. } => panic!("not an update"),
    }
}

/// Every label the server can derive from a search request it was sent.
fn derivable(request: &[u8]) -> HashSet<[u8; diana::LABEL_LEN]> {
    let Request::Search { tw, cover } = sesame_core::wire::decode(request).unwrap() else {
        panic!("not a search");
    };
    let mut out = HashSet::new();
    for node in &cover {
        let (first, last) = node.leaves();
        for leaf in node.leaves_in(first, last).unwrap() {
            out.insert(diana::oracle(&tw, leaf.as_bytes()).0);
        }
    }
    out
}

#[test]
fn a_search_gives_the_server_the_labels_before_it_and_none_after() {
    let scheme = sesame_sse::scheme("diana").unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(31);
    let mut client = (scheme.new_client)(&mut rng, &Params::new()).unwrap();
    let store = Arc::new(MemoryStore::new());
    let mut channel = LocalChannel::new(scheme.server(store.clone(), &Params::new()).unwrap());
    client
        .setup(&mut rng, &mut channel, &Multimap::new())
        .unwrap();
    let w = vec![b"alpha".to_vec()];
    let mut send = |client: &mut Box<dyn KeywordClient>, rng: &mut ChaCha20Rng, op, doc| {
        let requests = client.prepare_update(rng, op, doc, &w).unwrap().unwrap();
        let mut labels = Vec::new();
        for r in &requests {
            labels.extend(labels_of(r));
            client
                .check_update_response(&channel.call(r).unwrap())
                .unwrap();
        }
        labels
    };
    let mut before = Vec::new();
    for doc in 1..=13 {
        before.extend(send(&mut client, &mut rng, UpdateOp::Add, doc));
    }
    before.extend(send(&mut client, &mut rng, UpdateOp::Delete, 4));
    let token = client.search_token(&mut rng, b"alpha").unwrap().unwrap();
    let known = derivable(&token);
    // The server derives exactly the labels written so far ...
    assert_eq!(known.len(), 14);
    for label in &before {
        assert!(known.contains(label), "a label written before the search");
    }
    // ... and none written after, however many.
    for doc in 20..60 {
        for label in send(&mut client, &mut rng, UpdateOp::Add, doc) {
            assert!(
                !known.contains(&label),
                "an update after the search stores a label the search gave"
            );
        }
    }
    let found = client.search(&mut rng, &mut channel, b"alpha").unwrap();
    let mut expect: Vec<u64> = (1..=13).filter(|&d| d != 4).chain(20..60).collect();
    expect.sort_unstable();
    assert_eq!(found, expect);
}

#[test]
fn a_cover_that_claims_more_leaves_than_were_written_ends_at_the_entries() {
    let store = Arc::new(MemoryStore::new());
    let mut server = DianaServer::new(store.clone());
    // A cover of 2^31 leaves of a tree nobody wrote to: the newest leaf is
    // missing, so the search ends after its first batch.
    let tree = GgmTree::new(Key::from_bytes([9; 16]), diana::DEPTH).unwrap();
    let cover = tree.prefix_cover(1 << 31).unwrap();
    assert_eq!(cover.len(), 1);
    let found = server
        .handle(Request::Search {
            tw: [1; diana::LAMBDA],
            cover,
        })
        .unwrap();
    assert_eq!(found, sesame_sse::common::IdsResponse::Ids(Vec::new()));
    assert_eq!(
        store.io_counts().reads,
        4096,
        "one batch of labels read, then the walk stopped"
    );
}
