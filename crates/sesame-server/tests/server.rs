//! The server end to end over loopback TLS: scheme calls, uploads,
//! documents, tenants, limits, hostile input, concurrency, metrics and
//! shutdown. The same tests run over PostgreSQL when
//! `SESAME_TEST_POSTGRES` is set.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prost::Message;
use rand_core::OsRng;
use sesame_core::{Channel, IoCounts, Meter, Params, Result as CoreResult, Store, WriteBatch};
use sesame_net::blocking::{new_request_id, Connection};
use sesame_net::ClientConfig;
use sesame_server::proto::{self, path};
use sesame_server::{Limits, RunningServer, ServerConfig, TlsFiles, Tokens};
use sesame_sse::{KeywordClient, Multimap, UpdateOp};
use sesame_store::MemoryStore;
use tonic::Code;

/// A store that can be slowed down, to test deadlines and shutdown.
struct SlowStore {
    inner: MemoryStore,
    delay_ms: AtomicU64,
    /// When set, the store says it cannot serve (`Store::health`).
    sick: AtomicBool,
    /// When set, prefix scans fail with an I/O error.
    failing_scans: AtomicBool,
}

impl Store for SlowStore {
    fn get(&self, key: &[u8]) -> CoreResult<Option<Vec<u8>>> {
        std::thread::sleep(Duration::from_millis(self.delay_ms.load(Ordering::Relaxed)));
        self.inner.get(key)
    }
    fn get_many(&self, keys: &[&[u8]]) -> CoreResult<Vec<Option<Vec<u8>>>> {
        std::thread::sleep(Duration::from_millis(self.delay_ms.load(Ordering::Relaxed)));
        self.inner.get_many(keys)
    }
    fn write(&self, batch: WriteBatch) -> CoreResult<()> {
        self.inner.write(batch)
    }
    fn write_if(&self, expect: &[(&[u8], Option<&[u8]>)], batch: &WriteBatch) -> CoreResult<bool> {
        self.inner.write_if(expect, batch)
    }
    fn scan_prefix(&self, prefix: &[u8]) -> CoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
        if self.failing_scans.load(Ordering::Relaxed) {
            return Err(sesame_core::Error::StoreIo("sector unreadable".into()));
        }
        self.inner.scan_prefix(prefix)
    }
    fn io_counts(&self) -> IoCounts {
        self.inner.io_counts()
    }
    fn backend(&self) -> &'static str {
        "slow-memory"
    }
    fn health(&self) -> CoreResult<()> {
        if self.sick.load(Ordering::Relaxed) {
            return Err(sesame_core::Error::StoreIo("disk gone".into()));
        }
        Ok(())
    }
}

struct Fixture {
    server: RunningServer,
    alice: ClientConfig,
    bob_token: String,
}

fn postgres_store() -> Option<Arc<dyn Store>> {
    postgres_spec().map(|spec| sesame_store::open_store(&spec).unwrap())
}

/// The spec of a fresh namespace of the database `SESAME_TEST_POSTGRES`
/// names.
fn postgres_spec() -> Option<String> {
    let url = std::env::var("SESAME_TEST_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty())?;
    let ns = format!(
        "srv{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let sep = if url.contains('?') { '&' } else { '?' };
    Some(format!("{url}{sep}namespace={ns}"))
}

/// `GET /metrics` on the admin port `admin`, with an `Authorization`
/// header when given: the whole HTTP answer.
fn admin_get(admin: std::net::SocketAddr, auth: Option<&str>) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(admin).unwrap();
    let mut req = "GET /metrics HTTP/1.1\r\nHost: x\r\n".to_owned();
    if let Some(a) = auth {
        req.push_str(&format!("Authorization: {a}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

fn start_with(store: Arc<dyn Store>, tune: impl FnOnce(&mut ServerConfig)) -> Fixture {
    let certs = sesame_server::certs::localhost().unwrap();
    let alice = Tokens::generate(&mut OsRng);
    let bob = Tokens::generate(&mut OsRng);
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.tls = Some(TlsFiles {
        cert_pem: certs.cert_pem.into_bytes(),
        key_pem: certs.key_pem.into_bytes(),
    });
    config.tokens = Tokens::new()
        .with("alice", &alice)
        .unwrap()
        .with("bob", &bob)
        .unwrap();
    config.admin = Some("127.0.0.1:0".parse().unwrap());
    tune(&mut config);
    let server = RunningServer::start(config, store).unwrap();
    let alice = ClientConfig::new(server.url(), alice).with_ca(certs.ca_pem.into_bytes());
    Fixture {
        server,
        alice,
        bob_token: bob,
    }
}

fn start() -> Fixture {
    start_with(Arc::new(MemoryStore::new()), |_| {})
}

fn scheme(name: &str) -> sesame_sse::KeywordScheme {
    sesame_sse::scheme(name).unwrap()
}

/// A plaintext database of `docs` documents over `words` keywords.
fn database(docs: u64, words: u64) -> Multimap {
    let mut db = Multimap::new();
    for d in 1..=docs {
        for w in 0..words {
            if (d * 7 + w * 3) % 5 < 2 {
                db.entry(format!("w{w}").into_bytes()).or_default().push(d);
            }
        }
    }
    db
}

/// Builds a static index by upload and checks every keyword.
fn static_round_trip(conn: &Connection, name: &str) {
    let mut c = conn.client();
    conn.block_on(c.create_index(name, "pibas", "")).unwrap();
    let db = database(40, 12);
    let mut client = (scheme("pibas").new_client)(&mut OsRng, &Params::new()).unwrap();
    let mut up = conn.upload(name, "pibas", 1, Meter::new()).unwrap();
    client.setup(&mut OsRng, &mut up, &db).unwrap();
    // Not visible before the commit.
    let meter = Meter::new();
    let mut ch = conn.index_channel(name, "pibas", 1, meter.clone());
    assert!(client
        .search(&mut OsRng, &mut ch, b"w0")
        .unwrap()
        .is_empty());
    up.commit().unwrap();
    let span = meter.span();
    for (w, ids) in &db {
        assert_eq!(&client.search(&mut OsRng, &mut ch, w).unwrap(), ids);
    }
    let s = span.finish();
    assert!(s.rounds > 0 && s.bytes_up > 0 && s.bytes_down > 0);
    assert!(s.server_ns > 0, "the server's report reaches the meter");
    assert!(s.store.reads > 0, "{:?}", s.store);
}

/// Adds `(doc, keywords)` to a FAST index with one atomic call per update.
fn fast_update(
    conn: &Connection,
    index: &str,
    client: &mut Box<dyn KeywordClient>,
    doc: u64,
    words: &[&str],
) -> [u8; 16] {
    let words: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
    let requests = client
        .prepare_update(&mut OsRng, UpdateOp::Add, doc, &words)
        .unwrap()
        .unwrap();
    let id = new_request_id();
    let (responses, _) = conn.call_batch(index, "fast", 0, id, requests).unwrap();
    for r in responses {
        client.check_update_response(&r).unwrap();
    }
    id
}

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
    };
    let err = conn.block_on(c.put_documents(twice)).unwrap_err();
    assert!(err.message().contains("other content"), "{}", err.message());
    let put_big = proto::PutDocumentsRequest {
        index: "dyn".into(),
        request_id: new_request_id().to_vec(),
        documents: vec![doc(7, &big), doc(7, &big)],
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
fn limits_give_resource_exhausted_and_deadlines_deadline_exceeded() {
    let slow = Arc::new(SlowStore {
        inner: MemoryStore::new(),
        delay_ms: AtomicU64::new(0),
        sick: AtomicBool::new(false),
        failing_scans: AtomicBool::new(false),
    });
    let f = start_with(slow.clone(), |c| {
        c.limits = Limits {
            max_indexes_per_tenant: 2,
            max_transaction_bytes: 64 << 10,
            ..Limits::default()
        };
        c.request_timeout = Duration::from_millis(300);
    });
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.create_index("a", "pibas", "")).unwrap();
    conn.block_on(c.create_index("b", "pibas", "")).unwrap();
    let err = conn.block_on(c.create_index("c", "pibas", "")).unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("at most 2"), "{}", err.message());

    // An upload larger than a transaction may be.
    let mut client = (scheme("pibas").new_client)(&mut OsRng, &Params::new()).unwrap();
    let mut up = conn.upload("a", "pibas", 1, Meter::new()).unwrap();
    let err = client
        .setup(&mut OsRng, &mut up, &database(3000, 20))
        .unwrap_err();
    assert!(err.to_string().contains("RESOURCE_EXHAUSTED"), "{err}");

    // A request slower than the server's deadline.
    slow.delay_ms.store(600, Ordering::Relaxed);
    let err = conn.block_on(c.get_documents("a", vec![1])).unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert!(
        err.message().contains("deadline of 300 ms"),
        "{}",
        err.message()
    );
    // Or than the client's, which the server hears (grpc-timeout).
    let mut hasty = c.with_timeout(Duration::from_millis(100));
    let err = conn
        .block_on(hasty.get_documents("a", vec![1]))
        .unwrap_err();
    assert!(
        matches!(err.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{err:?}"
    );
    slow.delay_ms.store(0, Ordering::Relaxed);
    assert!(conn.block_on(c.get_documents("a", vec![1])).is_ok());
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

#[test]
fn metrics_are_served_on_the_admin_port() {
    let f = start();
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.list_indexes()).unwrap();
    let _ = conn.block_on(c.anonymous().list_indexes());
    // Refused by the protobuf decoder, and a method the server lacks:
    // counted too.
    let err = conn
        .block_on(c.clone().raw(path::CALL, vec![0xff, 0xff, 0xff, 0x0f]))
        .unwrap_err();
    let decoded = format!("{:?}", err.code());
    let err = conn
        .block_on(c.clone().raw("/sesame.v1.Sesame/Nope", Vec::new()))
        .map(drop)
        .map_err(|e| e.code())
        .unwrap_err();
    assert_eq!(err, Code::Unimplemented);
    let text = admin_get(f.server.bound().admin.unwrap(), None);
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    for want in [
        "sesame_requests_total{method=\"ListIndexes\",code=\"OK\"} 1",
        "sesame_requests_total{method=\"ListIndexes\",code=\"UNAUTHENTICATED\"} 1",
        "sesame_request_duration_seconds_bucket{method=\"ListIndexes\",le=\"+Inf\"} 2",
        "sesame_store_operations_total{op=\"scan\"}",
        "sesame_requests_in_flight 0",
        "sesame_requests_total{method=\"unknown\",code=\"UNIMPLEMENTED\"} 1",
    ] {
        assert!(text.contains(want), "missing {want} in\n{text}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("sesame_requests_total{method=\"Call\"") && l.ends_with(" 1")),
        "the malformed Call ({decoded}) is not counted in\n{text}"
    );
}

#[test]
fn shutdown_lets_requests_in_flight_finish() {
    let slow = Arc::new(SlowStore {
        inner: MemoryStore::new(),
        delay_ms: AtomicU64::new(0),
        sick: AtomicBool::new(false),
        failing_scans: AtomicBool::new(false),
    });
    let f = start_with(slow.clone(), |c| c.shutdown_grace = Duration::from_secs(5));
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.create_index("a", "pibas", "")).unwrap();
    slow.delay_ms.store(400, Ordering::Relaxed);
    let config = f.alice.clone();
    let slow_request = std::thread::spawn(move || {
        let conn = Connection::connect(&config).unwrap();
        let mut c = conn.client();
        conn.block_on(c.get_documents("a", vec![1]))
    });
    std::thread::sleep(Duration::from_millis(150));
    f.server.shutdown().unwrap();
    let r = slow_request.join().unwrap();
    assert!(r.is_ok(), "the request in flight finished: {r:?}");
    // And nothing listens any more.
    let err = conn.block_on(c.list_indexes()).unwrap_err();
    assert!(
        matches!(err.code(), Code::Unavailable | Code::Unknown),
        "{err:?}"
    );
}

#[test]
fn configuration_refuses_public_plaintext() {
    let mut config = ServerConfig::new("0.0.0.0:0".parse().unwrap());
    config.insecure_plaintext = true;
    config.tokens = Tokens::new().with("a", "t").unwrap();
    let err = config.check().unwrap_err();
    assert!(err.to_string().contains("loopback"), "{err}");
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.check().unwrap();
    config.insecure_plaintext = false;
    assert!(config
        .check()
        .unwrap_err()
        .to_string()
        .contains("--tls-cert"));
    // Clients refuse plaintext to anything but loopback.
    let err =
        sesame_net::client::endpoint(&ClientConfig::new("http://example.com:1", "t")).unwrap_err();
    assert!(err.to_string().contains("loopback"), "{err}");
    assert!(sesame_net::client::endpoint(&ClientConfig::new("http://[::1]:1", "t")).is_ok());
}

#[test]
fn plaintext_on_loopback_works_when_asked_for() {
    let token = Tokens::generate(&mut OsRng);
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.insecure_plaintext = true;
    config.tokens = Tokens::new().with("t", &token).unwrap();
    let server = RunningServer::start(config, Arc::new(MemoryStore::new())).unwrap();
    assert!(server.url().starts_with("http://127.0.0.1:"));
    let conn = Connection::connect(&ClientConfig::new(server.url(), token)).unwrap();
    static_round_trip(&conn, "p");
}

#[test]
fn a_foreign_store_is_refused() {
    let store = Arc::new(MemoryStore::new());
    store.put(b"i/default/0/dxyz", b"profile data").unwrap();
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.insecure_plaintext = true;
    config.tokens = Tokens::new().with("t", "x").unwrap();
    let err = RunningServer::start(config, store).unwrap_err();
    assert!(err.to_string().contains("no Sesame server marker"), "{err}");
}

#[test]
fn postgres_backend_end_to_end() {
    let Some(store) = postgres_store() else {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "note: server-over-PostgreSQL test skipped: SESAME_TEST_POSTGRES is not set"
        );
        return;
    };
    let f = start_with(store, |_| {});
    let conn = Connection::connect(&f.alice).unwrap();
    static_round_trip(&conn, "pg");
    let mut c = conn.client();
    conn.block_on(c.create_index("dyn", "fast", "")).unwrap();
    let mut fast = (scheme("fast").new_client)(&mut OsRng, &Params::new()).unwrap();
    for d in 1..=20 {
        fast_update(
            &conn,
            "dyn",
            &mut fast,
            d,
            &["all", if d % 2 == 0 { "even" } else { "odd" }],
        );
    }
    let mut ch = conn.index_channel("dyn", "fast", 0, Meter::new());
    assert_eq!(fast.search(&mut OsRng, &mut ch, b"all").unwrap().len(), 20);
    assert_eq!(
        fast.search(&mut OsRng, &mut ch, b"even").unwrap(),
        (1..=10).map(|i| i * 2).collect::<Vec<_>>()
    );
    assert_eq!(f.server.bound().addr.ip().to_string(), "127.0.0.1");
}

/// Two servers over one PostgreSQL namespace write one index at once:
/// four clients (each with its own keys) add to it, each call through
/// the other server than the previous one. Each add is counted once in the
/// index's metadata (a commit that met another server's ran again), and
/// each client finds exactly its documents through either server.
#[test]
fn two_servers_on_one_postgres_write_one_index_at_once() {
    const CLIENTS: u64 = 4;
    const ADDS: u64 = 15;
    let Some(spec) = postgres_spec() else {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "note: two-servers-over-PostgreSQL test skipped: SESAME_TEST_POSTGRES is not set"
        );
        return;
    };
    let fixtures: Vec<Fixture> = (0..2)
        .map(|_| start_with(sesame_store::open_store(&spec).unwrap(), |_| {}))
        .collect();
    let conns: Vec<Connection> = fixtures
        .iter()
        .map(|f| Connection::connect(&f.alice).unwrap())
        .collect();
    let mut c = conns[0].client();
    conns[0]
        .block_on(c.create_index("shared", "fast", ""))
        .unwrap();
    let start = std::sync::Barrier::new(CLIENTS as usize);
    let mut clients: Vec<Box<dyn KeywordClient>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|k| {
                let (conns, start) = (&conns, &start);
                scope.spawn(move || {
                    let mut fast = (scheme("fast").new_client)(&mut OsRng, &Params::new()).unwrap();
                    start.wait();
                    for d in 1..=ADDS {
                        let conn = &conns[((k + d) % 2) as usize];
                        fast_update(conn, "shared", &mut fast, d, &["all", &format!("c{k}")]);
                    }
                    fast
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for conn in &conns {
        let mut c = conn.client();
        let stats = conn.block_on(c.stats()).unwrap();
        let shared = stats.indexes.iter().find(|x| x.index == "shared").unwrap();
        assert_eq!(
            shared.updates,
            CLIENTS * ADDS,
            "a commit was lost or counted twice"
        );
    }
    for (k, fast) in clients.iter_mut().enumerate() {
        let mut ch = conns[k % 2].index_channel("shared", "fast", 0, Meter::new());
        let mine = fast
            .search(&mut OsRng, &mut ch, format!("c{k}").as_bytes())
            .unwrap();
        assert_eq!(mine, (1..=ADDS).collect::<Vec<_>>(), "client {k}");
        assert_eq!(
            fast.search(&mut OsRng, &mut ch, b"all").unwrap().len() as u64,
            ADDS
        );
    }
}

/// `Health` tells the server's limits and the store's real state: a store
/// that cannot serve is reported as degraded, and as serving again once it
/// recovers.
#[test]
fn health_tells_the_limits_and_the_stores_state() {
    let store = Arc::new(SlowStore {
        inner: MemoryStore::new(),
        delay_ms: AtomicU64::new(0),
        sick: AtomicBool::new(false),
        failing_scans: AtomicBool::new(false),
    });
    let f = start_with(store.clone(), |c| c.max_message_bytes = 3 << 20);
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    let health = conn.block_on(c.health()).unwrap();
    assert_eq!(health.status, "serving");
    assert_eq!(health.max_message_bytes, 3 << 20);
    assert_eq!(
        health.max_messages_per_call,
        Limits::default().max_messages_per_call as u64
    );
    store.sick.store(true, Ordering::Relaxed);
    let health = conn.block_on(c.health()).unwrap();
    assert!(health.status.starts_with("degraded"), "{}", health.status);
    assert!(
        !health.status.contains("disk gone"),
        "details stay in the log"
    );
    store.sick.store(false, Ordering::Relaxed);
    assert_eq!(conn.block_on(c.health()).unwrap().status, "serving");
}

/// A read that fails in the store fails that request only, is counted in
/// `sesame_store_errors_total`, and later requests are served.
#[test]
fn store_failures_are_counted_and_fail_only_their_request() {
    let store = Arc::new(SlowStore {
        inner: MemoryStore::new(),
        delay_ms: AtomicU64::new(0),
        sick: AtomicBool::new(false),
        failing_scans: AtomicBool::new(false),
    });
    let f = start_with(store.clone(), |_| {});
    let errors = || -> u64 {
        admin_get(f.server.bound().admin.unwrap(), None)
            .lines()
            .find_map(|l| l.strip_prefix("sesame_store_errors_total ")?.parse().ok())
            .unwrap()
    };
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.list_indexes()).unwrap();
    assert_eq!(errors(), 0);
    store.failing_scans.store(true, Ordering::Relaxed);
    let err = conn.block_on(c.list_indexes()).unwrap_err();
    assert_eq!(err.code(), Code::Internal);
    assert!(
        !err.message().contains("sector unreadable"),
        "details stay in the log: {}",
        err.message()
    );
    assert!(errors() >= 1);
    store.failing_scans.store(false, Ordering::Relaxed);
    let before = errors();
    conn.block_on(c.list_indexes()).unwrap();
    assert_eq!(errors(), before);
}

/// A flood of connections that never start TLS neither blocks a real
/// client nor is held: each is closed at the handshake deadline.
#[test]
fn connections_that_never_finish_tls_are_closed_and_do_not_block_clients() {
    use std::io::Read;
    let f = start_with(Arc::new(MemoryStore::new()), |c| {
        c.connections.handshake_timeout = Duration::from_secs(1);
    });
    let addr = f.server.bound().addr;
    let idle: Vec<std::net::TcpStream> = (0..200)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    // A real client gets through during the flood.
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.list_indexes()).unwrap();
    // Every idle connection is closed by the server (EOF or reset), not
    // held: bounded by a read timeout well past the deadline.
    let mut closed = 0;
    for mut s in idle {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 16];
        match s.read(&mut buf) {
            Ok(0) => closed += 1,
            Err(e)
                if e.kind() != std::io::ErrorKind::WouldBlock
                    && e.kind() != std::io::ErrorKind::TimedOut =>
            {
                closed += 1
            }
            _ => {}
        }
    }
    assert_eq!(closed, 200, "idle connections still open");
    conn.block_on(c.list_indexes()).unwrap();
}

/// Uploads held before their commit are bounded per tenant and in all: an
/// upload over the budget is refused with RESOURCE_EXHAUSTED, what it held
/// is given back, and an upload within the budget still works.
#[test]
fn uncommitted_uploads_are_bounded() {
    let store = Arc::new(MemoryStore::new());
    let f = start_with(store.clone(), |c| {
        c.limits = Limits {
            max_tenant_buffer_bytes: 64 << 10,
            max_buffer_bytes: 96 << 10,
            ..Limits::default()
        };
    });
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.create_index("big", "pibas", "")).unwrap();
    let gauge = || -> u64 {
        admin_get(f.server.bound().admin.unwrap(), None)
            .lines()
            .find_map(|l| l.strip_prefix("sesame_uncommitted_bytes ")?.parse().ok())
            .unwrap()
    };
    // Far more than 64 KiB of entries: the budget is checked as each
    // message is buffered.
    let mut db = Multimap::new();
    for i in 0..4000u64 {
        db.insert(format!("word{i}").into_bytes(), vec![i + 1]);
    }
    let mut client = (scheme("pibas").new_client)(&mut OsRng, &Params::new()).unwrap();
    let mut up = conn.upload("big", "pibas", 1, Meter::new()).unwrap();
    let err = client.setup(&mut OsRng, &mut up, &db).unwrap_err();
    assert!(err.to_string().contains("not yet committed"), "{err}");
    drop(up);
    // Given back once the server has dropped the upload.
    let start = std::time::Instant::now();
    while gauge() != 0 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(gauge(), 0);
    // Within the budget: works.
    static_round_trip(&conn, "small");
}

/// Over the connection limit a new connection takes the place of the
/// oldest one that presented no token (closed by the server); once the
/// idle connections holding the places reach their handshake deadline,
/// they are gone; an idle TLS connection is closed at the idle deadline.
#[test]
fn the_connection_limit_and_the_idle_deadline_hold() {
    use std::io::Read;
    let f = start_with(Arc::new(MemoryStore::new()), |c| {
        c.connections.handshake_timeout = Duration::from_secs(1);
        c.connections.idle_timeout = Duration::from_secs(1);
        c.connections.max_connections = 20;
    });
    let addr = f.server.bound().addr;
    let mut held: Vec<std::net::TcpStream> = (0..20)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    // The 21st takes the place of the oldest, which the server closes.
    let _extra = std::net::TcpStream::connect(addr).unwrap();
    let oldest = &mut held[0];
    oldest
        .set_read_timeout(Some(Duration::from_millis(900)))
        .unwrap();
    let mut buf = [0u8; 8];
    let closed = match oldest.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    };
    assert!(
        closed,
        "the oldest connection without a token kept its place"
    );
    // After the handshake deadline the places are free again.
    std::thread::sleep(Duration::from_millis(1200));
    drop(held);
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.list_indexes()).unwrap();
    // Idle past the idle deadline: the connection is closed, and the
    // client's next call reconnects.
    std::thread::sleep(Duration::from_millis(1500));
    conn.block_on(c.list_indexes())
        .or_else(|_| conn.block_on(c.list_indexes()))
        .unwrap();
}

/// With a bearer token, the admin port answers 401 to a request without
/// it or with another, and serves the metrics with it; off loopback, an
/// admin port without a token is refused at configuration.
#[test]
fn the_admin_port_can_require_a_bearer_token() {
    use sesame_server::metrics::AdminToken;
    let f = start_with(Arc::new(MemoryStore::new()), |c| {
        c.admin_token = Some(AdminToken::new("an-admin-token-of-some-length").unwrap());
    });
    let admin = f.server.bound().admin.unwrap();
    let get = |auth: Option<&str>| admin_get(admin, auth);
    for auth in [
        None,
        Some("Bearer wrong-token-of-some-length"),
        Some("Basic abc"),
    ] {
        let text = get(auth);
        assert!(
            text.starts_with("HTTP/1.1 401 Unauthorized"),
            "{auth:?}: {text}"
        );
        assert!(!text.contains("sesame_requests_total"), "{text}");
    }
    let text = get(Some("bearer an-admin-token-of-some-length"));
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(text.contains("sesame_uptime_seconds"), "{text}");
    assert!(AdminToken::new("too short").is_err());

    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.insecure_plaintext = true;
    config.tokens = Tokens::new()
        .with("t", &Tokens::generate(&mut OsRng))
        .unwrap();
    config.admin = Some("0.0.0.0:9100".parse().unwrap());
    let err = config.check().unwrap_err().to_string();
    assert!(err.contains("not on a loopback address"), "{err}");
    config.admin_token = Some(AdminToken::new("an-admin-token-of-some-length").unwrap());
    config.check().unwrap();
}
