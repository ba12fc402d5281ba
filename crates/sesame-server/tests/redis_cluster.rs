//! The server over a Redis Cluster store: a master killed during a stream
//! of acknowledged updates loses none of them and duplicates none, and two
//! servers over one cluster serve one index to a client that alternates
//! between them. Each test starts its own throwaway cluster with
//! `scripts/redis-cluster.sh` (skipped with a note without `redis-server`,
//! unless `SESAME_TEST_REDIS_CLUSTER_REQUIRE=1`).

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_core::OsRng;
use sesame_core::{Meter, Params, Store};
use sesame_net::blocking::{new_request_id, Connection};
use sesame_net::ClientConfig;
use sesame_server::{RunningServer, ServerConfig, TlsFiles, Tokens};
use sesame_sse::{KeywordClient, UpdateOp};
use sesame_store::test_cluster::{fresh_namespace, own_cluster, with_namespace};
use sesame_store::RedisClusterStore;

/// A server on loopback TLS over `store`, and a client configuration for
/// tenant `alice` with `token`.
fn serve(store: Arc<dyn Store>, token: &str) -> (RunningServer, ClientConfig) {
    let certs = sesame_server::certs::localhost().unwrap();
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.tls = Some(TlsFiles {
        cert_pem: certs.cert_pem.into_bytes(),
        key_pem: certs.key_pem.into_bytes(),
    });
    config.tokens = Tokens::new().with("alice", token).unwrap();
    let server = RunningServer::start(config, store).unwrap();
    let client =
        ClientConfig::new(server.url(), token.to_owned()).with_ca(certs.ca_pem.into_bytes());
    (server, client)
}

/// Two servers over the store `spec` names, a connection to each, and a
/// FAST index `index` made through the first.
fn two_servers_with_index(spec: &str, index: &str) -> (Vec<RunningServer>, Vec<Connection>) {
    let token = Tokens::generate(&mut OsRng);
    let (servers, configs): (Vec<RunningServer>, Vec<ClientConfig>) = (0..2)
        .map(|_| serve(Arc::new(RedisClusterStore::open(spec).unwrap()), &token))
        .unzip();
    let conns: Vec<Connection> = configs
        .iter()
        .map(|config| Connection::connect(config).unwrap())
        .collect();
    let mut c = conns[0].client();
    conns[0]
        .block_on(c.create_index(index, "fast", ""))
        .unwrap();
    (servers, conns)
}

fn fast() -> Box<dyn KeywordClient> {
    let scheme = sesame_sse::scheme("fast").unwrap();
    (scheme.new_client)(&mut OsRng, &Params::new()).unwrap()
}

/// Adds `doc` under `words`: the requests are prepared once, then sent
/// with one request id until the server acknowledges them (a retry of an
/// applied request gets the first answer). Gives the attempts it took, or
/// panics after `deadline`.
fn add_until_acknowledged(
    conn: &Connection,
    index: &str,
    client: &mut Box<dyn KeywordClient>,
    doc: u64,
    words: &[Vec<u8>],
    deadline: Instant,
) -> usize {
    let requests = client
        .prepare_update(&mut OsRng, UpdateOp::Add, doc, words)
        .unwrap()
        .unwrap();
    let id = new_request_id();
    let mut attempts = 0;
    loop {
        attempts += 1;
        match conn.call_batch(index, "fast", 0, id, requests.clone()) {
            Ok((responses, _)) => {
                for r in responses {
                    client.check_update_response(&r).unwrap();
                }
                return attempts;
            }
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "update of document {doc} still failing at the deadline: {e}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// A search, retried (with the client's state as it was before) until the
/// server answers or `deadline` passes.
fn search_until_answered(
    conn: &Connection,
    index: &str,
    client: &mut Box<dyn KeywordClient>,
    word: &[u8],
    deadline: Instant,
) -> Vec<u64> {
    let saved = client.save_state().unwrap();
    loop {
        let mut ch = conn.index_channel(index, "fast", 0, Meter::new());
        match client.search(&mut OsRng, &mut ch, word) {
            Ok(ids) => return ids,
            Err(e) => {
                assert!(Instant::now() < deadline, "search still failing: {e}");
                let scheme = sesame_sse::scheme("fast").unwrap();
                *client = (scheme.restore_client)(&saved).unwrap();
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// SIGKILL of the master that holds the index, in the middle of a stream
/// of updates through the server (`wait=1`: a batch is acknowledged once a
/// replica has it). The replica takes over; the killed node comes back as
/// a replica; every acknowledged update is found, none twice.
#[test]
fn a_killed_master_loses_no_acknowledged_update() {
    let Some(cluster) = own_cluster() else { return };
    let spec = with_namespace(cluster.url(), &fresh_namespace("fo"), "wait=1&wait_ms=500");
    let store = Arc::new(RedisClusterStore::open(&spec).unwrap());
    let slot = store.slot_of(b"x/alice/fo");
    let token = Tokens::generate(&mut OsRng);
    let (_server, config) = serve(store, &token);
    let conn = Connection::connect(&config).unwrap();
    let mut c = conn.client();
    conn.block_on(c.create_index("fo", "fast", "")).unwrap();
    let mut client = fast();
    let deadline = Instant::now() + Duration::from_secs(120);

    const UPDATES: u64 = 60;
    const KILL_AT: u64 = 20;
    let mut oracle: BTreeMap<Vec<u8>, BTreeSet<u64>> = BTreeMap::new();
    let mut killed = None;
    let mut first_write_after = None;
    let mut retried = 0;
    std::thread::scope(|scope| {
        for doc in 1..=UPDATES {
            if doc == KILL_AT {
                let port = cluster
                    .master_of_slot(slot)
                    .expect("a master serves the index");
                cluster.kill_node(port).unwrap();
                killed = Some((port, Instant::now()));
                // The failed node is repaired once its replica has taken
                // over: with wait=1 the promoted master takes no write
                // until it has a replica again.
                let cluster = &cluster;
                scope.spawn(move || {
                    while cluster.master_of_slot(slot).is_none_or(|m| m == port) {
                        assert!(Instant::now() < deadline, "no replica took over");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    cluster.restart_node(port).unwrap();
                });
            }
            let words = vec![b"all".to_vec(), format!("m{}", doc % 3).into_bytes()];
            let attempts = add_until_acknowledged(&conn, "fo", &mut client, doc, &words, deadline);
            retried += attempts - 1;
            for w in words {
                oracle.entry(w).or_default().insert(doc);
            }
            if let Some((_, at)) = killed {
                if first_write_after.is_none() {
                    first_write_after = Some(at.elapsed());
                }
            }
        }
    });
    let new_master = cluster.master_of_slot(slot).unwrap();
    assert_ne!(
        Some(new_master),
        killed.map(|k| k.0),
        "the replica took over"
    );
    for (word, want) in &oracle {
        let got = search_until_answered(&conn, "fo", &mut client, word, deadline);
        let distinct: BTreeSet<u64> = got.iter().copied().collect();
        assert_eq!(
            got.len(),
            distinct.len(),
            "no duplicate for {word:?}: {got:?}"
        );
        assert_eq!(&distinct, want, "{word:?}");
    }
    eprintln!(
        "failover: first acknowledged write {:?} after the master's death; {retried} retries",
        first_write_after.unwrap()
    );
}

/// Three clients, each on its own index, send updates through two servers
/// in turn while the master that holds the first client's index is
/// SIGKILLed: every client's acknowledged updates are all found, through
/// either server, none twice.
#[test]
fn several_clients_through_two_servers_survive_a_killed_master() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let Some(cluster) = own_cluster() else { return };
    let spec = with_namespace(cluster.url(), &fresh_namespace("fm"), "wait=1&wait_ms=500");
    let token = Tokens::generate(&mut OsRng);
    let servers: Vec<(RunningServer, ClientConfig)> = (0..2)
        .map(|_| serve(Arc::new(RedisClusterStore::open(&spec).unwrap()), &token))
        .collect();
    let configs: Vec<ClientConfig> = servers.iter().map(|(_, c)| c.clone()).collect();
    let probe = RedisClusterStore::open(&spec).unwrap();
    let slot = probe.slot_of(b"x/alice/k0");
    const CLIENTS: usize = 3;
    const UPDATES: u64 = 30;
    let deadline = Instant::now() + Duration::from_secs(150);
    let progress: Vec<AtomicU64> = (0..CLIENTS).map(|_| AtomicU64::new(0)).collect();
    let searched =
        std::thread::scope(|scope| {
            let handles: Vec<_> =
                (0..CLIENTS)
                    .map(|k| {
                        let (configs, progress) = (&configs, &progress);
                        scope.spawn(move || {
                    let conns: Vec<Connection> = configs
                        .iter()
                        .map(|c| Connection::connect(c).unwrap())
                        .collect();
                    let index = format!("k{k}");
                    let mut c = conns[k % 2].client();
                    conns[k % 2]
                        .block_on(c.create_index(&index, "fast", ""))
                        .unwrap();
                    let mut client = fast();
                    let mut oracle: BTreeMap<Vec<u8>, BTreeSet<u64>> = BTreeMap::new();
                    let mut retries = 0;
                    for doc in 1..=UPDATES {
                        let conn = &conns[(doc as usize + k) % 2];
                        let words = vec![b"all".to_vec(), format!("m{}", doc % 3).into_bytes()];
                        retries +=
                            add_until_acknowledged(conn, &index, &mut client, doc, &words, deadline)
                                - 1;
                        for w in words {
                            oracle.entry(w).or_default().insert(doc);
                        }
                        progress[k].store(doc, Ordering::Release);
                    }
                    eprintln!("client {k}: {UPDATES} updates acknowledged after {retries} retries");
                    let mut results = Vec::new();
                    for (i, (word, want)) in oracle.iter().enumerate() {
                        let got = search_until_answered(
                            &conns[i % 2],
                            &index,
                            &mut client,
                            word,
                            deadline,
                        );
                        results.push((k, word.clone(), got, want.clone()));
                    }
                    results
                })
                    })
                    .collect();
            // The first client's master dies a third of the way in, and comes
            // back as a replica once its replica has taken over.
            while progress[0].load(Ordering::Acquire) < UPDATES / 3 {
                assert!(Instant::now() < deadline, "no progress before the kill");
                std::thread::sleep(Duration::from_millis(20));
            }
            cluster.fail_over(slot, deadline).unwrap();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        });
    assert_eq!(searched.len(), CLIENTS * 4, "all, m0, m1, m2 per client");
    for (k, word, got, want) in searched {
        let distinct: BTreeSet<u64> = got.iter().copied().collect();
        assert_eq!(
            got.len(),
            distinct.len(),
            "client {k}: duplicate for {word:?}"
        );
        assert_eq!(distinct, want, "client {k}: {word:?}");
    }
}

/// Three clients rebuild their static (PiBas) indexes by bulk upload,
/// three times each, through two servers in turn, while the master that
/// holds the first client's index is SIGKILLed during its second upload.
/// An upload that fails is made again into a fresh generation; after each
/// acknowledged upload, searches through the other server equal the
/// oracle, with no duplicate.
#[test]
fn bulk_uploads_through_two_servers_survive_a_killed_master() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let Some(cluster) = own_cluster() else { return };
    let spec = with_namespace(cluster.url(), &fresh_namespace("fu"), "wait=1&wait_ms=500");
    let token = Tokens::generate(&mut OsRng);
    let servers: Vec<(RunningServer, ClientConfig)> = (0..2)
        .map(|_| serve(Arc::new(RedisClusterStore::open(&spec).unwrap()), &token))
        .collect();
    let configs: Vec<ClientConfig> = servers.iter().map(|(_, c)| c.clone()).collect();
    let slot = RedisClusterStore::open(&spec)
        .unwrap()
        .slot_of(b"x/alice/u0");
    const CLIENTS: usize = 3;
    const ROUNDS: u64 = 3;
    let deadline = Instant::now() + Duration::from_secs(150);
    let started = AtomicU64::new(0);
    let retried = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|k| {
                let (configs, started) = (&configs, &started);
                scope.spawn(move || {
                    let conns: Vec<Connection> = configs
                        .iter()
                        .map(|c| Connection::connect(c).unwrap())
                        .collect();
                    let index = format!("u{k}");
                    let mut c = conns[0].client();
                    conns[0]
                        .block_on(c.create_index(&index, "pibas", ""))
                        .unwrap();
                    let scheme = sesame_sse::scheme("pibas").unwrap();
                    let mut rng = ChaCha20Rng::seed_from_u64(40 + k as u64);
                    let mut generation = 0;
                    let mut failed = 0;
                    for round in 1..=ROUNDS {
                        let mut db = sesame_sse::Multimap::new();
                        for doc in 1..=(200 * round) {
                            for w in 0..20u32 {
                                if rng.gen_bool(0.2) {
                                    db.entry(format!("w{w}").into_bytes())
                                        .or_default()
                                        .push(doc);
                                }
                            }
                        }
                        if k == 0 && round == 2 {
                            started.store(1, Ordering::Release);
                        }
                        let mut client;
                        loop {
                            generation += 1;
                            client = (scheme.new_client)(&mut rng, &Params::new()).unwrap();
                            let conn = &conns[(round as usize + k) % 2];
                            let uploaded = conn
                                .upload(&index, "pibas", generation, Meter::new())
                                .and_then(|mut up| {
                                    client.setup(&mut rng, &mut up, &db)?;
                                    up.commit()
                                });
                            match uploaded {
                                Ok(_) => break,
                                Err(e) => {
                                    assert!(Instant::now() < deadline, "upload still failing: {e}");
                                    failed += 1;
                                    std::thread::sleep(Duration::from_millis(200));
                                }
                            }
                        }
                        let conn = &conns[(round as usize + k + 1) % 2];
                        for (word, want) in db.iter().take(5) {
                            let mut ch =
                                conn.index_channel(&index, "pibas", generation, Meter::new());
                            let got = client.search(&mut rng, &mut ch, word).unwrap();
                            let distinct: BTreeSet<u64> = got.iter().copied().collect();
                            assert_eq!(got.len(), distinct.len(), "client {k}: duplicate");
                            let want: BTreeSet<u64> = want.iter().copied().collect();
                            assert_eq!(distinct, want, "client {k} round {round}: {word:?}");
                        }
                    }
                    failed
                })
            })
            .collect();
        while started.load(Ordering::Acquire) == 0 {
            assert!(Instant::now() < deadline, "the second upload never began");
            std::thread::sleep(Duration::from_millis(5));
        }
        cluster.fail_over(slot, deadline).unwrap();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    eprintln!("failed uploads made again, per client: {retried:?}");
}

/// Two servers over one cluster write one index at the same time: four
/// clients (each with its own keys, so their entries never collide) add
/// to index `shared`, each call through the server after the previous
/// one's. Every add is counted once in the index's metadata (a commit
/// that raced another server's ran again instead of overwriting it), and
/// every client's searches, through either server, equal its oracle.
/// A Redis Cluster store that, while `armed`, dies between a spread
/// commit's entries and its commit: it writes the `e/...` puts of a batch
/// (into the index's shards, as the store does first) and then fails as
/// an unreachable master would, without the rest.
struct DiesBeforeCommit {
    inner: RedisClusterStore,
    armed: std::sync::atomic::AtomicUsize,
    died: std::sync::atomic::AtomicUsize,
}

impl Store for DiesBeforeCommit {
    sesame_store::forward_store!(|s| s.inner;
        get, get_many, write, scan_prefix, io_counts, backend);
    fn write_if(
        &self,
        expect: &[(&[u8], Option<&[u8]>)],
        batch: &sesame_core::WriteBatch,
    ) -> sesame_core::Result<bool> {
        use std::sync::atomic::Ordering;
        let spread: Vec<_> = batch
            .ops()
            .iter()
            .filter_map(|op| match op {
                sesame_core::WriteOp::Put { key, value } if key.starts_with(b"e/") => {
                    Some((key.clone(), value.clone()))
                }
                _ => None,
            })
            .collect();
        if !spread.is_empty()
            && self
                .armed
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        {
            let mut entries = sesame_core::WriteBatch::new();
            for (k, v) in spread {
                entries.put(k, v);
            }
            self.inner.write(entries)?;
            self.died.fetch_add(1, Ordering::SeqCst);
            return Err(sesame_core::Error::StoreUnavailable(
                "the master died before the commit".into(),
            ));
        }
        self.inner.write_if(expect, batch)
    }
}

/// A Redis Cluster store whose first batch of spread deletes alone (a
/// sweep) fails, applying nothing, as when a shard's master cannot be
/// reached.
struct SweepFails {
    inner: RedisClusterStore,
    armed: std::sync::atomic::AtomicBool,
}

impl Store for SweepFails {
    sesame_store::forward_store!(|s| s.inner;
        get, get_many, write_through_write_if, scan_prefix, io_counts, backend);
    fn write_if(
        &self,
        expect: &[(&[u8], Option<&[u8]>)],
        batch: &sesame_core::WriteBatch,
    ) -> sesame_core::Result<bool> {
        let sweep = !batch.is_empty()
            && batch.ops().iter().all(
                |op| matches!(op, sesame_core::WriteOp::Delete { key } if key.starts_with(b"e/")),
            );
        if sweep && self.armed.swap(false, std::sync::atomic::Ordering::SeqCst) {
            return Err(sesame_core::Error::StoreUnavailable(
                "a shard's master cannot be reached".into(),
            ));
        }
        self.inner.write_if(expect, batch)
    }
}

/// A dropped FAST index's spread entries are deleted after the drop's
/// commit, by a sweep; a sweep that fails (a shard unreachable) is kept
/// in the index's group and run by the next server to start, over the
/// real cluster: no entry and no sweep record is left.
#[test]
fn a_failed_sweep_of_spread_entries_is_run_by_the_next_server() {
    let Some(cluster) = own_cluster() else { return };
    let spec = with_namespace(cluster.url(), &fresh_namespace("sw"), "");
    let store = Arc::new(SweepFails {
        inner: RedisClusterStore::open(&spec).unwrap(),
        armed: std::sync::atomic::AtomicBool::new(false),
    });
    let token = Tokens::generate(&mut OsRng);
    let (server, config) = serve(store.clone(), &token);
    let conn = Connection::connect(&config).unwrap();
    let mut c = conn.client();
    conn.block_on(c.create_index("sw", "fast", "")).unwrap();
    let mut client = fast();
    let deadline = Instant::now() + Duration::from_secs(60);
    for doc in 1..=20u64 {
        let words = [format!("w{}", doc % 7).into_bytes(), b"all".to_vec()];
        add_until_acknowledged(&conn, "sw", &mut client, doc, &words, deadline);
    }
    let entries = || store.inner.scan_prefix(b"e/alice/sw/").unwrap().len();
    assert_eq!(entries(), 40);
    store.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    conn.block_on(c.drop_index("sw")).unwrap();
    assert_eq!(
        entries(),
        40,
        "the sweep failed: the entries are still there"
    );
    assert_eq!(store.inner.scan_prefix(b"w/alice/sw/").unwrap().len(), 1);
    drop((conn, server));
    let (_next, _) = serve(Arc::new(RedisClusterStore::open(&spec).unwrap()), &token);
    assert_eq!(entries(), 0, "the next server's sweep left entries");
    assert!(store.inner.scan_prefix(b"w/").unwrap().is_empty());
}

/// A FAST index's entries are spread over its 32 shards, on every master,
/// while its metadata, commit token and replay records stay in its group;
/// a server that dies after writing an update's entries but before its
/// commit leaves searches as they were (the entries are reachable only
/// from the client's next state), and the client's retry with the same
/// request id commits it once: every search equals the oracle and the
/// index holds exactly one entry per keyword-document pair.
#[test]
fn spread_entries_written_before_a_lost_commit_are_invisible_then_committed_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let Some(cluster) = own_cluster() else { return };
    let spec = with_namespace(cluster.url(), &fresh_namespace("sp"), "");
    let store = Arc::new(DiesBeforeCommit {
        inner: RedisClusterStore::open(&spec).unwrap(),
        armed: AtomicUsize::new(0),
        died: AtomicUsize::new(0),
    });
    let token = Tokens::generate(&mut OsRng);
    let (_server, config) = serve(store.clone(), &token);
    let mut conn = Connection::connect(&config).unwrap();
    // Each failure is seen here, not retried inside the connection.
    conn.set_retries(0);
    let mut c = conn.client();
    conn.block_on(c.create_index("sp", "fast", "")).unwrap();
    let mut client = fast();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut oracle: BTreeMap<Vec<u8>, BTreeSet<u64>> = BTreeMap::new();
    let mut pairs = 0;
    for doc in 1..=40u64 {
        let words: Vec<Vec<u8>> = (0..8)
            .map(|j| format!("w{}", (doc * j) % 13).into_bytes())
            .collect();
        let words: Vec<Vec<u8>> = words
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if doc % 10 == 5 {
            // This update's first attempt dies between entries and commit.
            store.armed.store(1, Ordering::SeqCst);
            // The committed state: what another device knows, and what
            // this one searches from until its pending update is settled.
            let saved = client.save_state().unwrap();
            let requests = client
                .prepare_update(&mut OsRng, UpdateOp::Add, doc, &words)
                .unwrap()
                .unwrap();
            let id = new_request_id();
            assert!(conn
                .call_batch("sp", "fast", 0, id, requests.clone())
                .is_err());
            // Searches from the committed state: as before the update.
            for (word, want) in &oracle {
                let mut probe =
                    (sesame_sse::scheme("fast").unwrap().restore_client)(&saved).unwrap();
                let got = search_until_answered(&conn, "sp", &mut probe, word, deadline);
                let got: BTreeSet<u64> = got.into_iter().collect();
                assert!(
                    !got.contains(&doc),
                    "{word:?} finds the uncommitted document"
                );
                assert_eq!(&got, want, "{word:?}");
            }
            let (responses, _) = conn.call_batch("sp", "fast", 0, id, requests).unwrap();
            for r in responses {
                client.check_update_response(&r).unwrap();
            }
        } else {
            add_until_acknowledged(&conn, "sp", &mut client, doc, &words, deadline);
        }
        pairs += words.len();
        for w in words {
            oracle.entry(w).or_default().insert(doc);
        }
    }
    assert_eq!(store.died.load(Ordering::SeqCst), 4);
    for (word, want) in &oracle {
        let got = search_until_answered(&conn, "sp", &mut client, word, deadline);
        let distinct: BTreeSet<u64> = got.iter().copied().collect();
        assert_eq!(got.len(), distinct.len(), "no duplicate for {word:?}");
        assert_eq!(&distinct, want, "{word:?}");
    }
    let entries = store.inner.scan_prefix(b"e/alice/sp/").unwrap();
    assert_eq!(entries.len(), pairs, "one entry per pair, none twice");
    assert!(store.inner.scan_prefix(b"i/alice/sp/").unwrap().is_empty());
    let sizes = store.inner.group_sizes().unwrap();
    let shards = sizes
        .iter()
        .filter(|(g, n)| g.as_ref().is_some_and(|g| g.starts_with(b"alice/sp#")) && *n > 0)
        .count();
    assert!(shards >= 28, "{pairs} entries fill {shards} of 32 shards");
    let masters: BTreeSet<u16> = entries
        .iter()
        .map(|(k, _)| store.inner.slot_of(k) / 5462)
        .collect();
    assert_eq!(masters.len(), 3, "the index's entries lie on every master");
    let group: Vec<Vec<u8>> = sizes
        .iter()
        .filter_map(|(g, _)| g.clone())
        .filter(|g| g.as_slice() == b"alice/sp")
        .collect();
    assert_eq!(group.len(), 1, "the index's own group holds its metadata");
}

#[test]
fn two_servers_write_one_index_at_the_same_time() {
    const CLIENTS: usize = 4;
    const ADDS: u64 = 20;
    let Some(cluster) = own_cluster() else { return };
    let spec = with_namespace(cluster.url(), &fresh_namespace("cw"), "");
    let (_servers, conns) = two_servers_with_index(&spec, "shared");
    let deadline = Instant::now() + Duration::from_secs(120);
    let start = std::sync::Barrier::new(CLIENTS);
    type Oracle = BTreeMap<Vec<u8>, BTreeSet<u64>>;
    let clients: Vec<(Box<dyn KeywordClient>, Oracle)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|k| {
                let (conns, start) = (&conns, &start);
                scope.spawn(move || {
                    let mut rng = ChaCha20Rng::seed_from_u64(90 + k as u64);
                    let mut client = fast();
                    let mut oracle = Oracle::new();
                    start.wait();
                    for doc in 1..=ADDS {
                        let w = format!("w{}", rng.gen_range(0..4)).into_bytes();
                        let conn = &conns[(k + doc as usize) % 2];
                        add_until_acknowledged(
                            conn,
                            "shared",
                            &mut client,
                            doc,
                            std::slice::from_ref(&w),
                            deadline,
                        );
                        oracle.entry(w).or_default().insert(doc);
                    }
                    (client, oracle)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for conn in &conns {
        let mut c = conn.client();
        let stats = conn.block_on(c.stats()).unwrap();
        let shared = stats
            .indexes
            .iter()
            .find(|x| x.index == "shared")
            .expect("the shared index");
        assert_eq!(
            shared.updates,
            CLIENTS as u64 * ADDS,
            "an update's commit was lost or counted twice"
        );
    }
    for (k, (mut client, oracle)) in clients.into_iter().enumerate() {
        for (i, (w, want)) in oracle.iter().enumerate() {
            let got =
                search_until_answered(&conns[(k + i) % 2], "shared", &mut client, w, deadline);
            let distinct: BTreeSet<u64> = got.iter().copied().collect();
            assert_eq!(got.len(), distinct.len(), "client {k}: duplicate for {w:?}");
            assert_eq!(&distinct, want, "client {k}: {w:?}");
        }
    }
}

/// Two servers over one cluster; one client sends each call to either at
/// random: updates, searches and documents agree with an oracle.
#[test]
fn two_servers_serve_one_index_to_a_client_that_alternates() {
    let Some(cluster) = own_cluster() else { return };
    let spec = with_namespace(cluster.url(), &fresh_namespace("two"), "");
    let (_servers, conns) = two_servers_with_index(&spec, "two");
    let mut rng = ChaCha20Rng::seed_from_u64(17);
    let mut client = fast();
    let mut oracle: BTreeMap<Vec<u8>, BTreeSet<u64>> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut used = [0usize; 2];
    for step in 0..80u64 {
        let which = rng.gen_range(0..2);
        used[which] += 1;
        let conn = &conns[which];
        let w = format!("w{}", rng.gen_range(0..5)).into_bytes();
        if step % 4 != 3 {
            let doc = rng.gen_range(1..=40u64);
            if oracle.get(&w).is_some_and(|s| s.contains(&doc)) {
                continue;
            }
            add_until_acknowledged(
                conn,
                "two",
                &mut client,
                doc,
                std::slice::from_ref(&w),
                deadline,
            );
            oracle.entry(w).or_default().insert(doc);
        } else {
            let got = search_until_answered(conn, "two", &mut client, &w, deadline);
            let want: Vec<u64> = oracle
                .get(&w)
                .map(|s| s.iter().copied().collect())
                .unwrap_or_default();
            let mut sorted = got.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, want, "step {step} through server {which}");
        }
    }
    assert!(used[0] > 10 && used[1] > 10, "{used:?}");
    // Both servers list the index the first one created.
    for conn in &conns {
        let mut c = conn.client();
        let stats = conn.block_on(c.stats()).unwrap();
        assert!(stats.indexes.iter().any(|x| x.index == "two"));
    }
}

/// Figures for `docs/scaling.md` (not run by default: `cargo test -p
/// sesame-server --test redis_cluster -- --ignored --nocapture`): every
/// keyword scheme's index of one database through the server, with the
/// bytes its entries take in the store and in Redis (`MEMORY USAGE` of its
/// group's hash and sorted set, and of its shards' where its entries are
/// spread); then one-pair commits per second on one
/// master from 1, 4 and 16 threads, with `wait=1` and `wait=0`.
#[test]
#[ignore = "a measurement; run by hand"]
fn measure_bytes_per_entry_and_shard_rates() {
    use sesame_core::SchemeKind;
    let Some(cluster) = own_cluster() else { return };
    let ns = fresh_namespace("sc");
    let spec = with_namespace(cluster.url(), &ns, "");
    let store = Arc::new(RedisClusterStore::open(&spec).unwrap());
    let token = Tokens::generate(&mut OsRng);
    let (_server, config) = serve(store.clone(), &token);
    let conn = Connection::connect(&config).unwrap();
    let mut c = conn.client();
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let mut db = sesame_sse::Multimap::new();
    for doc in 1..=400u64 {
        for w in 0..40u32 {
            if rng.gen_bool(0.15) {
                db.entry(format!("w{w}").into_bytes())
                    .or_default()
                    .push(doc);
            }
        }
    }
    let pairs: usize = db.values().map(Vec::len).sum();
    let port = cluster.ports()[0].to_string();
    let memory = |key: &str| -> u64 {
        let out = std::process::Command::new("redis-cli")
            .args(["-c", "-p", &port, "memory", "usage", key, "samples", "0"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    };
    eprintln!("{pairs} keyword-document pairs, {} keywords", db.len());
    eprintln!("scheme | entries | store bytes/pair | Redis bytes/pair");
    for (i, scheme) in sesame_sse::schemes().into_iter().enumerate() {
        let name = scheme.descriptor.name;
        let index = format!("s{i}");
        conn.block_on(c.create_index(&index, name, "")).unwrap();
        let mut client = (scheme.new_client)(&mut rng, &Params::new()).unwrap();
        let generation = if scheme.descriptor.kind == SchemeKind::StaticSse {
            let mut up = conn.upload(&index, name, 1, Meter::new()).unwrap();
            client.setup(&mut rng, &mut up, &db).unwrap();
            up.commit().unwrap();
            1
        } else {
            let mut ch = conn.index_channel(&index, name, 0, Meter::new());
            client.setup(&mut rng, &mut ch, &db).unwrap();
            0
        };
        // Under `e/` (in the index's shards) for a scheme whose entries
        // are written once, else `i/` (in the index's group).
        let entries: Vec<(Vec<u8>, Vec<u8>)> = ["i", "e"]
            .iter()
            .flat_map(|l| {
                store
                    .scan_prefix(format!("{l}/alice/{index}/{generation}/").as_bytes())
                    .unwrap()
            })
            .collect();
        let bytes: usize = entries.iter().map(|(k, v)| k.len() + v.len()).sum();
        // The index's group and, spread, its shards `alice/<index>#nn`.
        let own = format!("alice/{index}").into_bytes();
        let redis: u64 = store
            .group_sizes()
            .unwrap()
            .into_iter()
            .filter_map(|(g, _)| g)
            .filter(|g| {
                *g == own
                    || g.strip_prefix(own.as_slice())
                        .is_some_and(|r| r.starts_with(b"#"))
            })
            .map(|g| {
                let (values, keys) = store.redis_keys_of(Some(&g));
                memory(&values) + memory(&keys)
            })
            .sum();
        eprintln!(
            "{name} | {} | {:.1} | {:.1}",
            entries.len(),
            bytes as f64 / pairs as f64,
            redis as f64 / pairs as f64
        );
    }
    for wait in ["wait=1", "wait=0"] {
        let s = RedisClusterStore::open(&with_namespace(cluster.url(), &ns, wait)).unwrap();
        for threads in [1usize, 4, 16] {
            const EACH: usize = 300;
            let start = Instant::now();
            std::thread::scope(|scope| {
                for t in 0..threads {
                    let s = &s;
                    scope.spawn(move || {
                        for n in 0..EACH {
                            let key = format!("i/alice/rate/0/{t}/{n}");
                            s.put(key.as_bytes(), &[9u8; 64]).unwrap();
                        }
                    });
                }
            });
            let secs = start.elapsed().as_secs_f64();
            eprintln!(
                "{wait}: {threads} threads, {:.0} one-pair commits/s on one master",
                (threads * EACH) as f64 / secs
            );
        }
    }
}

/// A fault the harness below drives on a whole cluster.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// SIGKILL of the master that holds the index's group; nobody starts
    /// it again until the fault is over.
    KillMaster,
    /// SIGKILL of that master's replica.
    KillReplica,
    /// SIGKILL of that master and of another shard's replica.
    KillTwoShards,
    /// SIGSTOP of that master for longer than the node timeout (its
    /// replica takes over), then SIGCONT: it comes back as a replica.
    StopMaster,
}

/// The fault harness: one cluster, one server, a FAST index with a
/// stream of adds (its entries spread over every master). For each fault
/// in turn: the fault, then adds, each sent again with its request id
/// until acknowledged; writes must resume within 10 s of the fault with
/// nobody acting (no node restarted), and after the adds every search
/// equals the oracle of acknowledged adds (nothing lost, nothing extra,
/// none twice). Between faults the harness repairs the cluster (restarts
/// killed nodes) and waits until every master has a replica in sync.
#[test]
fn writes_resume_after_each_fault_and_lose_no_acknowledged_update() {
    let Some(cluster) = own_cluster() else { return };
    let spec = with_namespace(cluster.url(), &fresh_namespace("fh"), "wait=1&wait_ms=500");
    let store = Arc::new(RedisClusterStore::open(&spec).unwrap());
    let slot = store.slot_of(b"x/alice/fh");
    let token = Tokens::generate(&mut OsRng);
    let (_server, config) = serve(store, &token);
    let conn = Connection::connect(&config).unwrap();
    let mut c = conn.client();
    conn.block_on(c.create_index("fh", "fast", "")).unwrap();
    let mut client = fast();
    let mut oracle: BTreeMap<Vec<u8>, BTreeSet<u64>> = BTreeMap::new();
    let mut doc = 0;
    let mut add = |client: &mut Box<dyn KeywordClient>,
                   oracle: &mut BTreeMap<Vec<u8>, BTreeSet<u64>>,
                   deadline: Instant| {
        doc += 1;
        let words = vec![b"all".to_vec(), format!("m{}", doc % 5).into_bytes()];
        add_until_acknowledged(&conn, "fh", client, doc, &words, deadline);
        for w in words {
            oracle.entry(w).or_default().insert(doc);
        }
    };
    let long = Instant::now() + Duration::from_secs(60);
    for _ in 0..20 {
        add(&mut client, &mut oracle, long);
    }
    const RESUME: Duration = Duration::from_secs(10);
    let mut report = Vec::new();
    for fault in [
        Fault::KillMaster,
        Fault::KillReplica,
        Fault::KillTwoShards,
        Fault::StopMaster,
    ] {
        let master = cluster
            .master_of_slot(slot)
            .expect("a master serves the index");
        let replica = cluster.replicas_of_slot(slot)[0];
        let other_slot = (0..16384u16)
            .step_by(1000)
            .find(|&s| cluster.master_of_slot(s).is_some_and(|m| m != master))
            .unwrap();
        let other_replica = cluster.replicas_of_slot(other_slot)[0];
        let mut down = Vec::new();
        let at = Instant::now();
        match fault {
            Fault::KillMaster => down.push(master),
            Fault::KillReplica => down.push(replica),
            Fault::KillTwoShards => down.extend([master, other_replica]),
            Fault::StopMaster => {}
        }
        for &port in &down {
            cluster.kill_node(port).unwrap();
        }
        let first_ack = std::thread::scope(|scope| {
            if let Fault::StopMaster = fault {
                cluster.signal_node(master, "STOP").unwrap();
                let cluster = &cluster;
                scope.spawn(move || {
                    // Stopped until its replica has taken over, and 1 s
                    // more (the node timeout is 2 s).
                    while cluster.master_of_slot(slot).is_none_or(|m| m == master) {
                        assert!(Instant::now() < long, "no replica took over");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    std::thread::sleep(Duration::from_secs(1));
                    cluster.signal_node(master, "CONT").unwrap();
                });
            }
            add(&mut client, &mut oracle, at + RESUME);
            let first_ack = at.elapsed();
            for _ in 0..4 {
                add(
                    &mut client,
                    &mut oracle,
                    at + RESUME + Duration::from_secs(20),
                );
            }
            first_ack
        });
        for (word, want) in &oracle {
            let got = search_until_answered(&conn, "fh", &mut client, word, long);
            let distinct: BTreeSet<u64> = got.iter().copied().collect();
            assert_eq!(
                got.len(),
                distinct.len(),
                "{fault:?}: no duplicate for {word:?}"
            );
            assert_eq!(&distinct, want, "{fault:?}: {word:?}");
        }
        report.push(format!(
            "{fault:?}: first write acknowledged {first_ack:?} after"
        ));
        // Repair, so that the next fault meets a whole cluster.
        for &port in &down {
            cluster.restart_node(port).unwrap();
        }
        cluster
            .wait_whole(Instant::now() + Duration::from_secs(60))
            .unwrap();
    }
    eprintln!("fault harness: {}", report.join("; "));
}
