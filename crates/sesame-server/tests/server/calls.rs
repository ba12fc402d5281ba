//! Scheme calls, uploads, documents, replays, tenants and hostile requests.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prost::Message;
use rand_core::OsRng;
use sesame_core::{Channel, Meter, Params, Result as CoreResult, Store};
use sesame_net::blocking::{new_request_id, Connection};
use sesame_server::proto::{self, path};
use sesame_sse::UpdateOp;
use sesame_store::MemoryStore;
use tonic::Code;

use crate::support::*;

#[test]
fn static_and_dynamic_indexes_documents_and_stats() {
    let f = start();
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    let health = conn.block_on(c.anonymous().health()).unwrap();
    assert_eq!(
        (health.status.as_str(), health.store.as_str()),
        ("serving", "memory")
    );
    static_round_trip(&conn, "static");

    conn.block_on(c.create_index("dyn", "fast", "")).unwrap();
    let mut fast = (scheme("fast").new_client)(&mut OsRng, &Params::new()).unwrap();
    fast_update(&conn, "dyn", &mut fast, 1, &["apple", "pear"]);
    fast_update(&conn, "dyn", &mut fast, 2, &["pear"]);
    let mut ch = conn.index_channel("dyn", "fast", 0, Meter::new());
    assert_eq!(fast.search(&mut OsRng, &mut ch, b"pear").unwrap(), [1, 2]);
    assert_eq!(fast.search(&mut OsRng, &mut ch, b"apple").unwrap(), [1]);

    // Documents.
    let put = proto::PutDocumentsRequest {
        index: "dyn".into(),
        request_id: new_request_id().to_vec(),
        documents: vec![
            proto::Document {
                id: 2,
                blob: b"two".to_vec(),
            },
            proto::Document {
                id: 1,
                blob: b"one".to_vec(),
            },
        ],
        packed: false,
    };
    assert_eq!(
        conn.block_on(c.put_documents(put.clone())).unwrap().added,
        2
    );
    let got = conn
        .block_on(c.get_documents("dyn", vec![1, 3, 2]))
        .unwrap();
    let got: Vec<Option<&[u8]>> = got
        .documents
        .iter()
        .map(|d| d.found.then_some(d.blob.as_slice()))
        .collect();
    assert_eq!(got, [Some(&b"one"[..]), None, Some(&b"two"[..])]);
    assert_eq!(conn.block_on(c.list_documents("dyn")).unwrap().ids, [1, 2]);
    // Other content under a stored id: refused, nothing stored (not even
    // the new document beside it); the same content again is fine.
    let clash = proto::PutDocumentsRequest {
        index: "dyn".into(),
        request_id: new_request_id().to_vec(),
        documents: vec![
            proto::Document {
                id: 5,
                blob: b"five".to_vec(),
            },
            proto::Document {
                id: 2,
                blob: b"TWO".to_vec(),
            },
        ],
        packed: false,
    };
    let err = conn.block_on(c.put_documents(clash)).unwrap_err();
    assert_eq!(err.code(), Code::Aborted, "{err:?}");
    assert!(err.message().contains("other content"), "{}", err.message());
    assert_eq!(conn.block_on(c.list_documents("dyn")).unwrap().ids, [1, 2]);
    let mut same = put.clone();
    same.request_id = new_request_id().to_vec();
    assert_eq!(conn.block_on(c.put_documents(same)).unwrap().added, 0);
    // A document of several stored pieces comes back whole and goes whole;
    // one request naming an id twice with other bytes is refused.
    let big: Vec<u8> = (0..50_000u32).map(|i| (i % 253) as u8).collect();
    let doc = |id: u64, blob: &[u8]| proto::Document {
        id,
        blob: blob.to_vec(),
    };
    let twice = proto::PutDocumentsRequest {
        index: "dyn".into(),
        request_id: new_request_id().to_vec(),
        documents: vec![doc(7, &big), doc(7, &big[..10])],
        packed: false,
    };
    let err = conn.block_on(c.put_documents(twice)).unwrap_err();
    assert!(err.message().contains("other content"), "{}", err.message());
    let put_big = proto::PutDocumentsRequest {
        index: "dyn".into(),
        request_id: new_request_id().to_vec(),
        documents: vec![doc(7, &big), doc(7, &big)],
        packed: false,
    };
    assert_eq!(conn.block_on(c.put_documents(put_big)).unwrap().added, 1);
    let got = conn.block_on(c.get_documents("dyn", vec![7])).unwrap();
    assert_eq!(got.documents[0].blob, big);
    assert_eq!(
        conn.block_on(c.list_documents("dyn")).unwrap().ids,
        [1, 2, 7]
    );
    let del_big = proto::DeleteDocumentsRequest {
        index: "dyn".into(),
        request_id: Vec::new(),
        ids: vec![7],
    };
    assert_eq!(
        conn.block_on(c.delete_documents(del_big)).unwrap().deleted,
        [true]
    );
    assert_eq!(conn.block_on(c.list_documents("dyn")).unwrap().ids, [1, 2]);
    let del = proto::DeleteDocumentsRequest {
        index: "dyn".into(),
        request_id: Vec::new(),
        ids: vec![1, 1, 9],
    };
    assert_eq!(
        conn.block_on(c.delete_documents(del)).unwrap().deleted,
        [true, false, false]
    );

    let stats = conn.block_on(c.stats()).unwrap();
    let by_name: BTreeMap<&str, &proto::IndexInfo> = stats
        .indexes
        .iter()
        .map(|i| (i.index.as_str(), i))
        .collect();
    assert_eq!(by_name["dyn"].updates, 2);
    assert_eq!(by_name["dyn"].documents, 1);
    assert_eq!(by_name["static"].uploads, 1);
    assert_eq!(by_name["static"].generation, 1);
    assert!(stats.requests > 0);

    // Dropping a generation and an index.
    let removed = conn
        .block_on(c.drop_generations("static", 7, false))
        .unwrap()
        .removed;
    assert!(removed > 0);
    conn.block_on(c.drop_index("dyn")).unwrap();
    let names: Vec<String> = conn
        .block_on(c.list_indexes())
        .unwrap()
        .indexes
        .into_iter()
        .map(|i| i.index)
        .collect();
    assert_eq!(names, ["static"]);
}

#[test]
fn replays_get_the_first_answer_and_change_nothing() {
    let store = Arc::new(MemoryStore::new());
    let f = start_with(store.clone(), |_| {});
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.create_index("dyn", "fast", "")).unwrap();
    let mut fast = (scheme("fast").new_client)(&mut OsRng, &Params::new()).unwrap();
    let requests = fast
        .prepare_update(&mut OsRng, UpdateOp::Add, 5, &[b"kiwi".to_vec()])
        .unwrap()
        .unwrap();
    let id = new_request_id();
    let call = proto::CallRequest {
        index: "dyn".into(),
        scheme: "fast".into(),
        generation: 0,
        request_id: id.to_vec(),
        messages: requests.clone(),
    };
    let first = conn.block_on(c.call(call.clone())).unwrap();
    let before = store.scan_prefix(b"").unwrap();
    // The same request again: the first answer, as an answer.
    let again = conn.block_on(c.call(call.clone())).unwrap();
    assert_eq!(again.messages, first.messages);
    assert_eq!(
        store.scan_prefix(b"").unwrap(),
        before,
        "nothing applied twice"
    );
    // The same id for another request: refused, no details.
    let mut other = call.clone();
    other.messages = fast
        .prepare_update(&mut OsRng, UpdateOp::Add, 6, &[b"fig".to_vec()])
        .unwrap()
        .unwrap();
    let err = conn.block_on(c.call(other)).unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    assert!(err.details().is_empty());
    assert_eq!(store.scan_prefix(b"").unwrap(), before, "no data changed");
    // The blocking client's own retry gets the first answer too.
    let (answers, _) = conn.call_batch("dyn", "fast", 0, id, requests).unwrap();
    assert_eq!(answers, first.messages);
    let stats = conn.block_on(c.stats()).unwrap();
    assert_eq!(stats.indexes[0].updates, 1);
}

#[test]
fn tenants_see_only_their_own_indexes_and_tokens_are_checked() {
    let f = start();
    let conn = Connection::connect(&f.alice).unwrap();
    let mut alice = conn.client();
    let mut bob = alice.with_token(&f.bob_token).unwrap();
    conn.block_on(alice.create_index("notes", "pibas", ""))
        .unwrap();
    let err = conn
        .block_on(bob.get_documents("notes", vec![1]))
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    assert!(conn
        .block_on(bob.list_indexes())
        .unwrap()
        .indexes
        .is_empty());
    // Bob's index of the same name is his own.
    conn.block_on(bob.create_index("notes", "fast", ""))
        .unwrap();
    let mine = conn.block_on(alice.list_indexes()).unwrap().indexes;
    assert_eq!(mine[0].scheme, "pibas");

    for bad in [alice.with_token("sst1_wrong").unwrap(), alice.anonymous()] {
        let mut bad = bad;
        let err = conn.block_on(bad.list_indexes()).unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated, "{err:?}");
        let err = conn
            .block_on(bad.create_index("x", "pibas", ""))
            .unwrap_err();
        assert_eq!(err.code(), Code::Unauthenticated);
    }
    assert_eq!(
        conn.block_on(alice.list_indexes()).unwrap().indexes.len(),
        1
    );
}

#[test]
fn hostile_requests_get_clear_statuses_and_change_nothing() {
    let store = Arc::new(MemoryStore::new());
    let f = start_with(store.clone(), |c| c.max_message_bytes = 1 << 20);
    let mut big = f.alice.clone();
    big.max_message_bytes = 8 << 20;
    let conn = Connection::connect(&big).unwrap();
    let mut c = conn.client();
    static_round_trip(&conn, "idx");
    conn.block_on(c.create_index("dyn", "fast", "")).unwrap();
    let before = store.scan_prefix(b"").unwrap();

    let call = |messages: Vec<Vec<u8>>, scheme: &str, index: &str| proto::CallRequest {
        index: index.into(),
        scheme: scheme.into(),
        generation: 1,
        request_id: new_request_id().to_vec(),
        messages,
    };
    let pibas_search = {
        // A well-formed search message, recorded from a channel.
        struct Tap(Vec<Vec<u8>>, Meter);
        impl Channel for Tap {
            fn call(&mut self, r: &[u8]) -> CoreResult<Vec<u8>> {
                self.0.push(r.to_vec());
                Err(sesame_core::Error::Transport("tap".into()))
            }
            fn meter(&self) -> &Meter {
                &self.1
            }
        }
        let mut tap = Tap(Vec::new(), Meter::new());
        let mut client = (scheme("pibas").new_client)(&mut OsRng, &Params::new()).unwrap();
        let _ = client.search(&mut OsRng, &mut tap, b"w1");
        tap.0.remove(0)
    };

    type Send<'a> = Box<dyn Fn() -> Result<Vec<u8>, tonic::Status> + 'a>;
    let cases: Vec<(&str, Code, Send)> = vec![
        (
            "garbage body",
            Code::InvalidArgument,
            Box::new(|| conn.block_on(c.clone().raw(path::CALL, vec![0xff, 0xff, 0xff, 0x0f]))),
        ),
        (
            "truncated body",
            Code::InvalidArgument,
            Box::new(|| {
                let mut body = call(vec![pibas_search.clone()], "pibas", "idx").encode_to_vec();
                body.truncate(body.len() - 3);
                conn.block_on(c.clone().raw(path::CALL, body))
            }),
        ),
        (
            "garbage scheme message",
            Code::InvalidArgument,
            Box::new(|| {
                let body = call(vec![vec![1, 9, 9, 9]], "pibas", "idx").encode_to_vec();
                conn.block_on(c.clone().raw(path::CALL, body))
            }),
        ),
        (
            "wrong wire version",
            Code::InvalidArgument,
            Box::new(|| {
                let mut m = pibas_search.clone();
                m[0] = 77;
                conn.block_on(
                    c.clone()
                        .raw(path::CALL, call(vec![m], "pibas", "idx").encode_to_vec()),
                )
            }),
        ),
        (
            "empty call",
            Code::InvalidArgument,
            Box::new(|| {
                conn.block_on(
                    c.clone()
                        .raw(path::CALL, call(vec![], "pibas", "idx").encode_to_vec()),
                )
            }),
        ),
        (
            "bad request id",
            Code::InvalidArgument,
            Box::new(|| {
                let mut r = call(vec![pibas_search.clone()], "pibas", "idx");
                r.request_id = vec![1, 2, 3];
                conn.block_on(c.clone().raw(path::CALL, r.encode_to_vec()))
            }),
        ),
        (
            "oversized",
            Code::OutOfRange,
            Box::new(|| {
                let r = call(vec![vec![1; 2 << 20]], "pibas", "idx");
                conn.block_on(c.clone().raw(path::CALL, r.encode_to_vec()))
            }),
        ),
        (
            "other scheme named",
            Code::FailedPrecondition,
            Box::new(|| {
                let r = call(vec![pibas_search.clone()], "2lev", "idx");
                conn.block_on(c.clone().raw(path::CALL, r.encode_to_vec()))
            }),
        ),
        (
            "pibas client on a fast index",
            Code::FailedPrecondition,
            Box::new(|| {
                let r = call(vec![pibas_search.clone()], "pibas", "dyn");
                conn.block_on(c.clone().raw(path::CALL, r.encode_to_vec()))
            }),
        ),
        (
            "unknown index",
            Code::NotFound,
            Box::new(|| {
                let r = call(vec![pibas_search.clone()], "pibas", "nope");
                conn.block_on(c.clone().raw(path::CALL, r.encode_to_vec()))
            }),
        ),
        (
            "bad index name",
            Code::InvalidArgument,
            Box::new(|| {
                let r = call(vec![pibas_search.clone()], "pibas", "../x");
                conn.block_on(c.clone().raw(path::CALL, r.encode_to_vec()))
            }),
        ),
        (
            "unknown method",
            Code::Unimplemented,
            Box::new(|| conn.block_on(c.clone().raw("/sesame.v1.Sesame/Frobnicate", vec![]))),
        ),
        (
            "unknown scheme",
            Code::InvalidArgument,
            Box::new(|| {
                let r = proto::CreateIndexRequest {
                    index: "z".into(),
                    scheme: "sophos".into(),
                    params: "".into(),
                    request_id: Vec::new(),
                };
                conn.block_on(c.clone().raw(path::CREATE_INDEX, r.encode_to_vec()))
            }),
        ),
        (
            "bad parameters",
            Code::InvalidArgument,
            Box::new(|| {
                let r = proto::CreateIndexRequest {
                    index: "z".into(),
                    scheme: "pibas".into(),
                    params: "block=0".into(),
                    request_id: Vec::new(),
                };
                conn.block_on(c.clone().raw(path::CREATE_INDEX, r.encode_to_vec()))
            }),
        ),
        (
            "existing index",
            Code::AlreadyExists,
            Box::new(|| {
                let r = proto::CreateIndexRequest {
                    index: "idx".into(),
                    scheme: "pibas".into(),
                    params: "".into(),
                    request_id: Vec::new(),
                };
                conn.block_on(c.clone().raw(path::CREATE_INDEX, r.encode_to_vec()))
            }),
        ),
    ];
    for (what, code, send) in cases {
        let err = send().expect_err(what);
        assert_eq!(err.code(), code, "{what}: {err:?}");
        assert!(!err.message().is_empty(), "{what}");
    }
    let mut c = conn.client();
    assert_eq!(store.scan_prefix(b"").unwrap(), before, "no data changed");
    // An upload that ends without its commit leaves nothing.
    let mut client = (scheme("pibas").new_client)(&mut OsRng, &Params::new()).unwrap();
    let mut up = conn.upload("idx", "pibas", 9, Meter::new()).unwrap();
    client.setup(&mut OsRng, &mut up, &database(5, 3)).unwrap();
    drop(up);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(store.scan_prefix(b"").unwrap(), before, "no data changed");
    // The server still serves.
    let r = conn.block_on(c.call(call(vec![pibas_search.clone()], "pibas", "idx")));
    assert!(r.is_ok(), "{r:?}");
}

#[test]
fn searches_never_see_part_of_an_update_under_concurrency() {
    let f = start();
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.create_index("dyn", "fast", "")).unwrap();
    let client = Arc::new(Mutex::new(
        (scheme("fast").new_client)(&mut OsRng, &Params::new()).unwrap(),
    ));
    const GROUP: u64 = 5;
    const GROUPS: u64 = 12;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..3 {
        let (config, client, done) = (f.alice.clone(), client.clone(), done.clone());
        readers.push(std::thread::spawn(move || {
            let conn = Connection::connect(&config).unwrap();
            let mut ch = conn.index_channel("dyn", "fast", 0, Meter::new());
            let mut searches = 0;
            while !done.load(Ordering::Acquire) || searches < 3 {
                let state = client.lock().unwrap().save_state().unwrap();
                let mut copy = (scheme("fast").restore_client)(&state).unwrap();
                let ids = copy.search(&mut OsRng, &mut ch, b"x").unwrap();
                let groups: BTreeSet<u64> = ids.iter().map(|i| (i - 1) / GROUP).collect();
                for g in groups {
                    let want: Vec<u64> = (g * GROUP + 1..=(g + 1) * GROUP).collect();
                    let got: Vec<u64> = ids
                        .iter()
                        .copied()
                        .filter(|i| (i - 1) / GROUP == g)
                        .collect();
                    assert_eq!(got, want, "a search saw part of update {g}");
                }
                searches += 1;
            }
            searches
        }));
    }
    let mut writers = Vec::new();
    for w in 0..2u64 {
        let (config, client) = (f.alice.clone(), client.clone());
        writers.push(std::thread::spawn(move || {
            let conn = Connection::connect(&config).unwrap();
            for g in (w..GROUPS).step_by(2) {
                // Lock the client across prepare and send, so updates reach
                // the server in the order their state was advanced.
                let mut client = client.lock().unwrap();
                let mut requests = Vec::new();
                for d in g * GROUP + 1..=(g + 1) * GROUP {
                    requests.extend(
                        client
                            .prepare_update(&mut OsRng, UpdateOp::Add, d, &[b"x".to_vec()])
                            .unwrap()
                            .unwrap(),
                    );
                }
                conn.call_batch("dyn", "fast", 0, new_request_id(), requests)
                    .unwrap();
            }
        }));
    }
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Release);
    for r in readers {
        assert!(r.join().unwrap() >= 3);
    }
    let mut ch = conn.index_channel("dyn", "fast", 0, Meter::new());
    let ids = client
        .lock()
        .unwrap()
        .search(&mut OsRng, &mut ch, b"x")
        .unwrap();
    assert_eq!(ids, (1..=GROUP * GROUPS).collect::<Vec<_>>());
}
