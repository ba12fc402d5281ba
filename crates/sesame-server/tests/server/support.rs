//! What every test of the server binary shares: a slowed store, a
//! running server with two tenants, PostgreSQL specs, small databases.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand_core::OsRng;
use sesame_core::{Meter, Params, Result as CoreResult, Store};
use sesame_net::blocking::{new_request_id, Connection};
use sesame_net::ClientConfig;
use sesame_server::{RunningServer, ServerConfig, Tokens};
use sesame_sse::{KeywordClient, Multimap, UpdateOp};
use sesame_store::MemoryStore;

/// A store that can be slowed down, to test deadlines and shutdown.
pub(crate) struct SlowStore {
    pub(crate) inner: MemoryStore,
    pub(crate) delay_ms: AtomicU64,
    /// When set, the store says it cannot serve (`Store::health`).
    pub(crate) sick: AtomicBool,
    /// When set, prefix scans fail with an I/O error.
    pub(crate) failing_scans: AtomicBool,
}

impl SlowStore {
    /// The wrapped store, after the delay (reads are slowed).
    fn slowed(&self) -> &MemoryStore {
        std::thread::sleep(Duration::from_millis(self.delay_ms.load(Ordering::Relaxed)));
        &self.inner
    }
}

impl Store for SlowStore {
    sesame_store::forward_store!(|s| s.slowed(); get, get_many);
    sesame_store::forward_store!(|s| s.inner; write, write_if, io_counts);
    fn scan_prefix(&self, prefix: &[u8]) -> CoreResult<Vec<(Vec<u8>, Vec<u8>)>> {
        if self.failing_scans.load(Ordering::Relaxed) {
            return Err(sesame_core::Error::StoreIo("sector unreadable".into()));
        }
        self.inner.scan_prefix(prefix)
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

pub(crate) struct Fixture {
    pub(crate) server: RunningServer,
    pub(crate) alice: ClientConfig,
    pub(crate) bob_token: String,
}

pub(crate) fn postgres_store() -> Option<Arc<dyn Store>> {
    postgres_spec().map(|spec| sesame_store::open_store(&spec).unwrap())
}

/// The spec of a fresh namespace of the database `SESAME_TEST_POSTGRES`
/// names.
pub(crate) fn postgres_spec() -> Option<String> {
    use sesame_store::test_cluster::{fresh_namespace, with_namespace};
    let url = std::env::var("SESAME_TEST_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty())?;
    Some(with_namespace(&url, &fresh_namespace("srv"), ""))
}

/// `GET /metrics` on the admin port `admin`, with an `Authorization`
/// header when given: the whole HTTP answer.
pub(crate) fn admin_get(admin: std::net::SocketAddr, auth: Option<&str>) -> String {
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

pub(crate) fn start_with(store: Arc<dyn Store>, tune: impl FnOnce(&mut ServerConfig)) -> Fixture {
    let certs = sesame_server::certs::localhost().unwrap();
    let alice = Tokens::generate(&mut OsRng);
    let bob = Tokens::generate(&mut OsRng);
    let tenants = [("alice", alice.as_str()), ("bob", bob.as_str())];
    let mut config = sesame_server::certs::loopback_config(&certs, &tenants).unwrap();
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

pub(crate) fn start() -> Fixture {
    start_with(Arc::new(MemoryStore::new()), |_| {})
}

pub(crate) fn scheme(name: &str) -> sesame_sse::KeywordScheme {
    sesame_sse::scheme(name).unwrap()
}

/// A plaintext database of `docs` documents over `words` keywords.
pub(crate) fn database(docs: u64, words: u64) -> Multimap {
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
pub(crate) fn static_round_trip(conn: &Connection, name: &str) {
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
pub(crate) fn fast_update(
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
