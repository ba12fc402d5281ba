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

/// The labels an update request stores (16 or 12 bytes).
fn labels_of(request: &[u8]) -> Vec<Vec<u8>> {
    match sesame_core::wire::decode(request).unwrap() {
        Request::Put { entries, .. } => entries.into_iter().map(|(l, _)| l.to_vec()).collect(),
        Request::PutShort { entries, .. } => entries.into_iter().map(|(l, _)| l.to_vec()).collect(),
        Request::PutCompact { entries, .. } => {
            entries.into_iter().map(|(l, _)| l.to_vec()).collect()
        }
        _ => panic!("not an update"),
    }
}

/// Every label the server can derive from a search request it was sent,
/// cut to the length the request says the labels have.
fn derivable(request: &[u8]) -> HashSet<Vec<u8>> {
    let (tw, cover, len) = match sesame_core::wire::decode(request).unwrap() {
        Request::Search { tw, cover } => (tw, cover, diana::LABEL_LEN),
        Request::SearchShort { tw, cover } => (tw, cover, diana::SHORT_LABEL_LEN),
        _ => panic!("not a search"),
    };
    let mut out = HashSet::new();
    for node in &cover {
        let (first, last) = node.leaves();
        for leaf in node.leaves_in(first, last).unwrap() {
            out.insert(diana::oracle(&tw, leaf.as_bytes()).0[..len].to_vec());
        }
    }
    out
}

/// The three forms of Diana's entries: the default, short labels, and
/// short labels with short identifiers (`labels`, `ids`).
const FORMS: [(Option<usize>, Option<usize>); 3] = [
    (None, None),
    (Some(diana::SHORT_LABEL_LEN), None),
    (Some(diana::SHORT_LABEL_LEN), Some(diana::SHORT_ID_LEN)),
];

/// A client of `labels` and `ids` (the defaults where `None`) and its
/// server over `store`, set up empty.
fn setup(
    (labels, ids): (Option<usize>, Option<usize>),
    store: &Arc<MemoryStore>,
    rng: &mut ChaCha20Rng,
) -> (
    Box<dyn KeywordClient>,
    LocalChannel<Box<dyn sesame_core::Service>>,
) {
    let scheme = sesame_sse::scheme("diana").unwrap();
    let mut params = Params::new();
    if let Some(labels) = labels {
        params.set("labels", labels);
    }
    if let Some(ids) = ids {
        params.set("ids", ids);
    }
    let mut client = (scheme.new_client)(rng, &params).unwrap();
    let mut channel = LocalChannel::new(scheme.server(store.clone(), &Params::new()).unwrap());
    client.setup(rng, &mut channel, &Multimap::new()).unwrap();
    (client, channel)
}

/// Sends the addition of `doc` under `keywords` and checks each answer.
fn add(
    client: &mut Box<dyn KeywordClient>,
    channel: &mut dyn Channel,
    rng: &mut ChaCha20Rng,
    doc: u64,
    keywords: &[Vec<u8>],
) {
    for r in client
        .prepare_update(rng, UpdateOp::Add, doc, keywords)
        .unwrap()
        .unwrap()
    {
        client
            .check_update_response(&channel.call(&r).unwrap())
            .unwrap();
    }
}

/// For each form of entries: the server derives from a search exactly the
/// labels written before it, and none of the updates after it stores one
/// of them (forward privacy); the search answers every live identifier.
#[test]
fn a_search_gives_the_server_the_labels_before_it_and_none_after() {
    for form @ (labels, _) in FORMS {
        let mut rng = ChaCha20Rng::seed_from_u64(31);
        let store = Arc::new(MemoryStore::new());
        let (mut client, mut channel) = setup(form, &store, &mut rng);
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
        let want = labels.unwrap_or(diana::LABEL_LEN);
        assert!(before.iter().all(|l| l.len() == want), "{labels:?}");
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
        assert_eq!(found, expect, "{form:?}");
    }
}

/// `labels = 12`: the same answers as 16-byte labels, 4 bytes fewer per
/// stored entry; `ids = 5` beside it, 3 bytes fewer again; a state that
/// survives a save and a restore (and says its lengths: a restored
/// client searches the entries it wrote), and any other length refused.
#[test]
fn short_labels_answer_the_same_in_fewer_bytes() {
    let mut stored = Vec::new();
    for form @ (labels, ids) in FORMS {
        let mut rng = ChaCha20Rng::seed_from_u64(8);
        let store = Arc::new(MemoryStore::new());
        let (mut client, mut channel) = setup(form, &store, &mut rng);
        for doc in 1..=50u64 {
            let kw = vec![format!("w{}", doc % 5).into_bytes(), b"all".to_vec()];
            add(&mut client, &mut channel, &mut rng, doc, &kw);
        }
        let saved = client.save_state().unwrap();
        let scheme = sesame_sse::scheme("diana").unwrap();
        let mut restored = (scheme.restore_client)(&saved).unwrap();
        let all = restored.search(&mut rng, &mut channel, b"all").unwrap();
        assert_eq!(all, (1..=50).collect::<Vec<u64>>(), "{form:?}");
        let w3 = restored.search(&mut rng, &mut channel, b"w3").unwrap();
        assert_eq!(w3, (1..=50).filter(|d| d % 5 == 3).collect::<Vec<u64>>());
        let pairs = store.scan_prefix(b"").unwrap();
        assert_eq!(pairs.len(), 100);
        let key_len = 1 + labels.unwrap_or(diana::LABEL_LEN);
        let value_len = match ids {
            Some(_) => diana::SHORT_VALUE_LEN,
            None => diana::VALUE_LEN,
        };
        assert!(pairs
            .iter()
            .all(|(k, v)| k.len() == key_len && v.len() == value_len));
        stored.push(pairs.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>());
    }
    assert_eq!(stored[0] - stored[1], 100 * 4);
    assert_eq!(stored[1] - stored[2], 100 * 3);
    let scheme = sesame_sse::scheme("diana").unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    for bad in [8, 15, 32] {
        let mut params = Params::new();
        params.set("labels", bad);
        assert!(
            (scheme.new_client)(&mut rng, &params).is_err(),
            "labels={bad}"
        );
    }
    // Short identifiers need short labels; no other identifier length.
    for (labels, ids) in [(16, 5), (12, 4), (12, 6), (12, 9)] {
        let mut params = Params::new();
        params.set("labels", labels);
        params.set("ids", ids);
        assert!(
            (scheme.new_client)(&mut rng, &params).is_err(),
            "labels={labels} ids={ids}"
        );
    }
}

/// With `ids = 5` an identifier of 2^40 or more is refused before any
/// counter moves (the next update of the keyword still lands where a
/// search finds it), and the largest that fits is found.
#[test]
fn short_identifiers_refuse_what_does_not_fit_and_keep_the_state() {
    let mut rng = ChaCha20Rng::seed_from_u64(10);
    let store = Arc::new(MemoryStore::new());
    let (mut client, mut channel) = setup(FORMS[2], &store, &mut rng);
    let w = vec![b"w".to_vec()];
    let top = (1u64 << 40) - 1;
    let refused = client.prepare_update(&mut rng, UpdateOp::Add, top + 1, &w);
    match refused {
        Err(sesame_core::Error::InvalidArgument(m)) => assert!(m.contains("2^40"), "{m}"),
        other => panic!("an identifier past 2^40 was taken: {other:?}"),
    }
    for doc in [1, top] {
        add(&mut client, &mut channel, &mut rng, doc, &w);
    }
    assert_eq!(
        client.search(&mut rng, &mut channel, b"w").unwrap(),
        [1, top]
    );
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
