//! Forward privacy of UEDSSE and SIMPLE updates, tried as the server would
//! try to break it: the server keeps every byte it was sent and every byte
//! it stores, and looks for a new update's encrypted identifier among
//! them. An update must share no such value with what the server holds,
//! before any search (an addition and the deletion of the same pair) and
//! after one (a deletion of a pair the search returned).

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{Channel, LocalChannel, Params, Store};
use sesame_sse::{simple, uedsse, Multimap, UpdateOp};
use sesame_store::MemoryStore;

type Eid = [u8; uedsse::EID_LEN];

/// The encrypted identifiers an update request carries.
fn uploaded(scheme: &str, request: &[u8]) -> Vec<Eid> {
    let entries = match scheme {
        "uedsse" => match sesame_core::wire::decode(request).unwrap() {
            uedsse::Request::Put { entries, .. } => entries,
            other => panic!("not an update: {other:?}"),
        },
        _ => match sesame_core::wire::decode(request).unwrap() {
            simple::Request::Put { entries, .. } => entries,
            other => panic!("not an update: {other:?}"),
        },
    };
    entries.into_iter().map(|(_, _, eid)| eid).collect()
}

/// Every 32-byte window of every value the store holds: what a server
/// could compare an upload with.
fn held(store: &MemoryStore) -> HashSet<Eid> {
    let mut out = HashSet::new();
    for (_, v) in store.scan_prefix(b"").unwrap() {
        for w in v.windows(uedsse::EID_LEN) {
            out.insert(w.try_into().unwrap());
        }
    }
    out
}

#[test]
fn updates_share_no_encrypted_identifier_with_what_the_server_holds() {
    for name in ["uedsse", "simple"] {
        let scheme = sesame_sse::scheme(name).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(23);
        let mut client = (scheme.new_client)(&mut rng, &Params::new()).unwrap();
        let store = Arc::new(MemoryStore::new());
        let mut channel = LocalChannel::new(
            scheme
                .server(store.clone(), &sesame_core::Params::new())
                .unwrap(),
        );
        client.initialise_server(&mut channel).unwrap();
        client
            .setup(&mut rng, &mut channel, &Multimap::new())
            .unwrap();
        let w = vec![b"alpha".to_vec()];
        let mut seen: HashSet<Eid> = HashSet::new();
        let send = |client: &mut Box<dyn sesame_sse::KeywordClient>,
                    rng: &mut ChaCha20Rng,
                    channel: &mut dyn Channel,
                    op,
                    doc,
                    seen: &mut HashSet<Eid>| {
            let requests = client.prepare_update(rng, op, doc, &w).unwrap().unwrap();
            for r in &requests {
                for eid in uploaded(name, r) {
                    assert!(
                        !seen.contains(&eid) && !held(&store).contains(&eid),
                        "{name}: {op:?} of document {doc} uploads an identifier the server \
                         already holds"
                    );
                    seen.insert(eid);
                }
                client
                    .check_update_response(&channel.call(r).unwrap())
                    .unwrap();
            }
        };
        // Before any search: an addition, a second addition, the deletion
        // of the first.
        for (op, doc) in [
            (UpdateOp::Add, 1),
            (UpdateOp::Add, 2),
            (UpdateOp::Delete, 1),
        ] {
            send(&mut client, &mut rng, &mut channel, op, doc, &mut seen);
        }
        // After a search the server holds the refreshed identifiers; the
        // deletion of a returned pair, and a repeated addition, must not
        // match them.
        let found = client.search(&mut rng, &mut channel, b"alpha").unwrap();
        assert_eq!(found, vec![2], "{name}");
        for (op, doc) in [(UpdateOp::Add, 2), (UpdateOp::Delete, 2)] {
            send(&mut client, &mut rng, &mut channel, op, doc, &mut seen);
        }
        assert!(
            client
                .search(&mut rng, &mut channel, b"alpha")
                .unwrap()
                .is_empty(),
            "{name}"
        );
    }
}
