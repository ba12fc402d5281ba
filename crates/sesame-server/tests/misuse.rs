//! The server under misuse and faults: a store whose writes are applied
//! but not confirmed, a full disk under reads, floods of connections that
//! never speak, and the admin port under a flood. Every flood is bounded
//! in count and time and listens on loopback only.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use rand_core::OsRng;
use sesame_net::blocking::Connection;
use sesame_net::ClientConfig;
use sesame_server::{RunningServer, ServerConfig, Tokens};
use sesame_store::faulty::{Fault, FaultyStore};
use tonic::Code;

struct Fixture {
    server: RunningServer,
    alice: ClientConfig,
    ca_pem: Vec<u8>,
}

fn start_with(store: Arc<dyn sesame_core::Store>, tune: impl FnOnce(&mut ServerConfig)) -> Fixture {
    let certs = sesame_server::certs::localhost().unwrap();
    let alice = Tokens::generate(&mut OsRng);
    let mut config = sesame_server::certs::loopback_config(&certs, &[("alice", &alice)]).unwrap();
    config.admin = Some("127.0.0.1:0".parse().unwrap());
    tune(&mut config);
    let server = RunningServer::start(config, store).unwrap();
    let ca_pem = certs.ca_pem.into_bytes();
    let alice = ClientConfig::new(server.url(), alice).with_ca(ca_pem.clone());
    Fixture {
        server,
        alice,
        ca_pem,
    }
}

/// Issue 43.4: the first CreateIndex is applied but its confirmation
/// fails (a replica down); the retry with the same request id gets the
/// index, not ALREADY_EXISTS, and no second index is left behind.
#[test]
fn a_create_index_applied_but_unconfirmed_succeeds_on_retry() {
    let store = Arc::new(FaultyStore::new());
    let f = start_with(store.clone(), |_| {});
    let conn = Connection::connect(&f.alice).unwrap();
    // The tenant's place record is written first, then the index: the
    // second write is applied and reported unconfirmed, once.
    store.fail_times(Fault::Unconfirmed, 1, 1);
    let info = conn.create_index("fresh", "fast", "").unwrap();
    assert_eq!(info.index, "fresh");
    assert_eq!(info.scheme, "fast");
    let mut c = conn.client();
    let listed = conn.block_on(c.list_indexes()).unwrap();
    assert_eq!(listed.indexes.len(), 1, "{listed:?}");
    // A new create of the same name, another request, is still refused.
    let again = conn
        .block_on(c.create_index("fresh", "fast", ""))
        .unwrap_err();
    assert_eq!(again.code(), Code::AlreadyExists, "{again:?}");
}

/// Whether the server closed `s` (EOF or an error) within `limit`.
fn closed_within(s: &mut std::net::TcpStream, limit: Duration) -> bool {
    use std::io::Read;
    s.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 64];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => {
                return !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                )
            }
        }
    }
}

/// Issue 43.5: connections that never speak hold every place; a client
/// with a valid token still gets through (it takes the place of the
/// oldest connection without a token).
#[test]
fn idle_connections_holding_every_place_do_not_lock_out_a_client_with_a_token() {
    let f = start_with(Arc::new(sesame_store::MemoryStore::new()), |c| {
        c.connections.handshake_timeout = Duration::from_secs(60);
        c.connections.max_connections = 20;
    });
    let addr = f.server.bound().addr;
    let idle: Vec<std::net::TcpStream> = (0..20)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.list_indexes()).unwrap();
    drop(idle);
}

/// Issue 43.5: TLS and HTTP/2 connections that speak but present no
/// valid token hold every place; a client with a token gets through, and
/// once it has presented its token a later flood does not take its place.
#[test]
fn connections_without_a_token_do_not_lock_out_or_evict_a_client_with_one() {
    let f = start_with(Arc::new(sesame_store::MemoryStore::new()), |c| {
        c.connections.max_connections = 12;
    });
    let stranger =
        ClientConfig::new(f.server.url(), "not-a-token-of-this-server").with_ca(f.ca_pem.clone());
    let flood = |n: usize| -> Vec<Connection> {
        (0..n)
            .filter_map(|_| {
                let conn = Connection::connect(&stranger).ok()?;
                let mut c = conn.client();
                // Health needs no token; the listing is refused.
                conn.block_on(c.health()).ok()?;
                let refused = conn.block_on(c.list_indexes()).unwrap_err();
                assert_eq!(refused.code(), Code::Unauthenticated);
                Some(conn)
            })
            .collect()
    };
    let first = flood(12);
    assert_eq!(first.len(), 12);
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.list_indexes()).unwrap();
    let second = flood(24);
    assert!(!second.is_empty());
    // Its connection kept its place: the same connection answers.
    conn.block_on(c.list_indexes()).unwrap();
    drop((first, second));
}

/// A TLS and HTTP/2 connection that sends nothing but pings (every 200
/// ms) and no request: whether the server closes it within `limit`.
fn pinging_connection_closed_within(
    addr: std::net::SocketAddr,
    ca_pem: &[u8],
    limit: Duration,
) -> bool {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap();
        tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .await
            .unwrap();
        // An empty SETTINGS frame.
        tls.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
        let start = std::time::Instant::now();
        let mut buf = [0u8; 1024];
        while start.elapsed() < limit {
            let ping = [0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
            if tls.write_all(&ping).await.is_err() {
                return true;
            }
            match tokio::time::timeout(Duration::from_millis(200), tls.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                _ => {}
            }
        }
        false
    })
}

/// Issue 43.5: HTTP/2 pings are not requests: a connection that only
/// pings is closed at the idle deadline.
#[test]
fn pings_do_not_keep_a_connection_open_past_the_idle_deadline() {
    let f = start_with(Arc::new(sesame_store::MemoryStore::new()), |c| {
        c.connections.idle_timeout = Duration::from_secs(1);
    });
    assert!(
        pinging_connection_closed_within(f.server.bound().addr, &f.ca_pem, Duration::from_secs(8)),
        "a connection that only sends pings was still open 8 s after a 1 s idle deadline"
    );
}

/// Issue 43.5: a connection on which no request carries a valid token is
/// closed at the authentication deadline, whatever it sends.
#[test]
fn a_connection_without_a_token_is_closed_at_the_auth_deadline() {
    let f = start_with(Arc::new(sesame_store::MemoryStore::new()), |c| {
        c.connections.auth_timeout = Duration::from_secs(1);
    });
    assert!(
        pinging_connection_closed_within(f.server.bound().addr, &f.ca_pem, Duration::from_secs(8)),
        "a connection without a token was still open 8 s after a 1 s deadline"
    );
    // A client with a token is served past that deadline on one connection.
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.list_indexes()).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    conn.block_on(c.list_indexes()).unwrap();
}

/// Issue 43.5: one peer address holds at most its limit of connections;
/// more from it are closed at once, while another address is served.
#[test]
fn connections_per_peer_address_are_limited() {
    let f = start_with(Arc::new(sesame_store::MemoryStore::new()), |c| {
        c.connections.max_connections_per_peer = 5;
        c.connections.handshake_timeout = Duration::from_secs(60);
    });
    let addr = f.server.bound().addr;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // A flood from 127.0.0.2 (loopback): 5 held, 15 closed at once.
    let flood: Vec<std::net::TcpStream> = rt.block_on(async {
        let mut out = Vec::new();
        for _ in 0..20 {
            let s = tokio::net::TcpSocket::new_v4().unwrap();
            s.bind("127.0.0.2:0".parse().unwrap()).unwrap();
            out.push(s.connect(addr).await.unwrap().into_std().unwrap());
        }
        out
    });
    let mut closed = 0;
    for mut s in flood {
        s.set_nonblocking(false).unwrap();
        if closed_within(&mut s, Duration::from_millis(500)) {
            closed += 1;
        }
    }
    assert_eq!(
        closed, 15,
        "connections from one address over its limit of 5"
    );
    // The client, from 127.0.0.1, is served.
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.list_indexes()).unwrap();
}

/// A memory store that plays a Redis Cluster whose shard deletes fail:
/// once armed, the first batch that deletes spread entries (`e/...`) has
/// its other keys applied (under the batch's conditions) and its spread
/// deletes lost, and is reported unavailable, as `RedisClusterStore` does
/// when a shard's master cannot be reached after the commit.
#[derive(Default)]
struct ShardDeletesFail {
    inner: sesame_store::MemoryStore,
    armed: std::sync::atomic::AtomicBool,
}

impl sesame_core::Store for ShardDeletesFail {
    sesame_store::forward_store!(|s| s.inner; get, get_many, scan_prefix, io_counts);
    fn write(&self, batch: sesame_core::WriteBatch) -> sesame_core::Result<()> {
        self.write_if(&[], &batch).map(drop)
    }
    fn write_if(
        &self,
        expect: &[(&[u8], Option<&[u8]>)],
        batch: &sesame_core::WriteBatch,
    ) -> sesame_core::Result<bool> {
        use sesame_core::WriteOp;
        let spread_delete =
            |op: &WriteOp| matches!(op, WriteOp::Delete { key } if key.starts_with(b"e/"));
        if !batch.ops().iter().any(spread_delete)
            || !self.armed.swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            return self.inner.write_if(expect, batch);
        }
        let mut rest = sesame_core::WriteBatch::new();
        for op in batch.ops().iter().filter(|op| !spread_delete(op)) {
            match op {
                WriteOp::Put { key, value } => rest.put(key.clone(), value.clone()),
                WriteOp::Delete { key } => rest.delete(key.clone()),
            };
        }
        if !self.inner.write_if(expect, &rest)? {
            return Ok(false);
        }
        Err(sesame_core::Error::StoreUnavailable(
            "the master of a shard could not be reached; the batch's other groups were applied"
                .into(),
        ))
    }
    fn backend(&self) -> &'static str {
        "shard-deletes-fail"
    }
}

/// Issue 37.15: the deletes of an index's spread entries that fail after
/// the commit (a Redis Cluster shard unreachable) are not lost: they are
/// swept later, and no entry of a dropped index stays.
#[test]
fn spread_deletes_that_fail_after_the_commit_are_swept_later() {
    use sesame_core::{Params, Store};
    let store = Arc::new(ShardDeletesFail::default());
    let f = start_with(store.clone(), |_| {});
    let conn = Connection::connect(&f.alice).unwrap();
    let (mut c, mut client) = fast_index(&conn, "f");
    for doc in 1..=5u64 {
        let requests = add_requests(&mut client, doc, &["alpha", &format!("w{doc}")]);
        let id = sesame_net::blocking::new_request_id();
        conn.call_batch("f", "fast", 0, id, requests).unwrap();
    }
    let entries = || store.inner.scan_prefix(b"e/alice/f/").unwrap().len();
    assert!(entries() > 0, "FAST's entries are spread (e/...)");
    // The drop's commit is applied; its shard deletes fail once.
    store.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    match conn.with_retries(|mut c| async move { c.drop_index("f").await }) {
        Ok(_) => {}
        Err(s) => assert_eq!(s.code(), Code::NotFound, "{s:?}"),
    }
    // A new index of that name: nothing of the old one is left.
    conn.block_on(c.create_index("f", "fast", "")).unwrap();
    assert_eq!(entries(), 0, "entries of the dropped index stayed");
    assert!(store.inner.scan_prefix(b"w/").unwrap().is_empty());

    // Again, and this time the server restarts before anything else: the
    // new server sweeps at start.
    let mut client =
        (sesame_sse::scheme("fast").unwrap().new_client)(&mut OsRng, &Params::new()).unwrap();
    let requests = add_requests(&mut client, 1, &["beta"]);
    let id = sesame_net::blocking::new_request_id();
    conn.call_batch("f", "fast", 0, id, requests).unwrap();
    assert!(entries() > 0);
    store.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    conn.block_on(c.drop_index("f")).unwrap();
    assert!(entries() > 0, "the shard deletes failed");
    assert_eq!(store.inner.scan_prefix(b"w/").unwrap().len(), 1);
    drop((conn, f));
    let _again = start_with(store.clone(), |_| {});
    assert_eq!(entries(), 0, "the restarted server did not sweep");
    assert!(store.inner.scan_prefix(b"w/").unwrap().is_empty());
}

/// Index `index` created on FAST through `conn`: the connection's
/// service client and a scheme client for the index.
fn fast_index(
    conn: &Connection,
    index: &str,
) -> (sesame_net::SesameClient, Box<dyn sesame_sse::KeywordClient>) {
    let mut c = conn.client();
    conn.block_on(c.create_index(index, "fast", "")).unwrap();
    let client =
        (sesame_sse::scheme("fast").unwrap().new_client)(&mut OsRng, &sesame_core::Params::new())
            .unwrap();
    (c, client)
}

/// The requests that add document `doc` under `words` with `client`.
fn add_requests(
    client: &mut Box<dyn sesame_sse::KeywordClient>,
    doc: u64,
    words: &[&str],
) -> Vec<Vec<u8>> {
    let words: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
    client
        .prepare_update(&mut OsRng, sesame_sse::UpdateOp::Add, doc, &words)
        .unwrap()
        .unwrap()
}

/// Issue 43.7: while the store refuses every write (a full disk), reads
/// work (listing, a search, documents, records, health) and writes get
/// RESOURCE_EXHAUSTED. (A write applied before and sent again is refused
/// too: its replay record cannot be confirmed by a write;
/// `src/engine/tests.rs` `an_answer_from_a_replay_record_waits_for_the_store_to_confirm_it`.)
#[test]
fn reads_work_while_the_store_refuses_writes() {
    use sesame_server::proto;
    let store = Arc::new(FaultyStore::new());
    let f = start_with(store.clone(), |_| {});
    let conn = Connection::connect(&f.alice).unwrap();
    let (mut c, mut client) = fast_index(&conn, "r");
    let requests = add_requests(&mut client, 1, &["alpha"]);
    conn.call_batch(
        "r",
        "fast",
        0,
        sesame_net::blocking::new_request_id(),
        requests,
    )
    .unwrap();
    let put = |id: u8| proto::PutDocumentsRequest {
        index: "r".into(),
        request_id: vec![id; 16],
        documents: vec![proto::Document {
            id: u64::from(id),
            blob: vec![id; 100],
        }],
        packed: false,
    };
    conn.block_on(c.put_documents(put(1))).unwrap();

    store.fail(Fault::Refused, 0);
    // Writes are refused.
    let refused = conn.block_on(c.put_documents(put(2))).unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    let more = add_requests(&mut client, 2, &["beta"]);
    let err = conn
        .call_batch("r", "fast", 0, sesame_net::blocking::new_request_id(), more)
        .unwrap_err();
    assert!(err.to_string().contains("out of space"), "{err}");
    // Reads work.
    let listed = conn.block_on(c.list_indexes()).unwrap();
    assert_eq!(listed.indexes.len(), 1);
    let mut fresh =
        (sesame_sse::scheme("fast").unwrap().restore_client)(&client.save_state().unwrap())
            .unwrap();
    let mut channel = conn.index_channel("r", "fast", 0, sesame_core::Meter::new());
    let found = fresh.search(&mut OsRng, &mut channel, b"alpha").unwrap();
    assert_eq!(found, vec![1]);
    let docs = conn.block_on(c.get_documents("r", vec![1])).unwrap();
    assert_eq!(docs.documents.len(), 1);
    conn.block_on(c.list_documents("r")).unwrap();
    conn.block_on(c.read_records(proto::ReadRecordsRequest {
        index: "r".into(),
        names: vec!["state".into()],
        known: Vec::new(),
    }))
    .unwrap();
    conn.block_on(c.health()).unwrap();
}

/// A client that connects and sends its first request with a token only
/// after the authentication deadline finds its connection closed; the
/// SDK's retry reconnects and the request is served.
#[test]
fn a_client_slower_than_the_auth_deadline_reconnects() {
    let f = start_with(Arc::new(sesame_store::MemoryStore::new()), |c| {
        c.connections.auth_timeout = Duration::from_secs(1);
    });
    let conn = Connection::connect(&f.alice).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    conn.with_retries(|mut c| async move { c.list_indexes().await })
        .unwrap();
    // The same through a scheme channel, on a fresh connection.
    let conn = Connection::connect(&f.alice).unwrap();
    let mut channel = conn.index_channel("none", "fast", 0, sesame_core::Meter::new());
    std::thread::sleep(Duration::from_millis(1500));
    // Any answer from the server (here: no such index) shows the
    // connection was made again.
    let err = sesame_core::Channel::call(&mut channel, b"x").unwrap_err();
    assert!(err.to_string().contains("no index"), "{err}");
}
