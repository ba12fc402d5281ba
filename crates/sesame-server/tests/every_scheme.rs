//! Every registered scheme with a server half over the networked server
//! (loopback TLS, in-process), each answer checked against a plaintext
//! oracle: keyword schemes (static ones by upload, dynamic ones by calls,
//! interactive updates such as SIMPLE's refresh, SDa/SDd's rebuilds and
//! Aura's key renewal included), conjunctive simple-index schemes and
//! range protocols. ORE schemes have no server half; they reach the
//! server inside the `bplus-*` range protocols.
//!
//! The scheme tests run over the in-memory store, and again over a Redis
//! Cluster store (`SESAME_TEST_REDIS_CLUSTER`, or a throwaway cluster that
//! `scripts/redis-cluster.sh` starts; skipped with a note without
//! `redis-server`).

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_core::OsRng;
use sesame_core::Store;
use sesame_core::{Meter, Params, QueryKind, SchemeKind};
use sesame_net::blocking::Connection;
use sesame_net::ClientConfig;
use sesame_server::{RunningServer, Tokens};
use sesame_sse::query::Query;
use sesame_sse::{Multimap, UpdateOp};
use sesame_store::MemoryStore;

fn start() -> (RunningServer, ClientConfig) {
    start_on(Arc::new(MemoryStore::new()))
}

/// A server over a Redis Cluster store in a fresh namespace, or `None`
/// (with a note) where no cluster can be had.
fn start_on_redis_cluster() -> Option<(RunningServer, ClientConfig)> {
    use sesame_store::test_cluster::{fresh_namespace, shared_url, with_namespace};
    let url = shared_url()?;
    let spec = with_namespace(&url, &fresh_namespace("srv"), "");
    let store = sesame_store::open_store(&spec).unwrap();
    assert_eq!(store.backend(), "redis-cluster");
    Some(start_on(store))
}

fn start_on(store: Arc<dyn Store>) -> (RunningServer, ClientConfig) {
    let certs = sesame_server::certs::localhost().unwrap();
    let token = Tokens::generate(&mut OsRng);
    let config = sesame_server::certs::loopback_config(&certs, &[("alice", &token)]).unwrap();
    let server = RunningServer::start(config, store).unwrap();
    let client = ClientConfig::new(server.url(), token).with_ca(certs.ca_pem.into_bytes());
    (server, client)
}

/// The plaintext oracle: keyword to document set.
type Oracle = BTreeMap<Vec<u8>, BTreeSet<u64>>;

fn initial_db(rng: &mut ChaCha20Rng) -> Multimap {
    let mut db = Multimap::new();
    for doc in 1..=24u64 {
        for w in 0..10u32 {
            if rng.gen_bool(0.3) {
                db.entry(format!("word{w}").into_bytes())
                    .or_default()
                    .push(doc);
            }
        }
    }
    db
}

fn to_oracle(db: &Multimap) -> Oracle {
    db.iter()
        .map(|(w, ids)| (w.clone(), ids.iter().copied().collect()))
        .collect()
}

fn expected(oracle: &Oracle, w: &[u8]) -> Vec<u64> {
    oracle
        .get(w)
        .map(|s| s.iter().copied().collect())
        .unwrap_or_default()
}

#[test]
fn every_keyword_scheme_runs_over_the_network_server() {
    let (_server, config) = start();
    keyword_schemes(&config);
}

#[test]
fn every_keyword_scheme_runs_over_a_redis_cluster() {
    let Some((_server, config)) = start_on_redis_cluster() else {
        return;
    };
    keyword_schemes(&config);
}

fn keyword_schemes(config: &ClientConfig) {
    let conn = Connection::connect(config).unwrap();
    let mut c = conn.client();
    for (i, scheme) in sesame_sse::schemes().into_iter().enumerate() {
        let name = scheme.descriptor.name;
        let index = format!("ix{i}");
        let mut rng = ChaCha20Rng::seed_from_u64(i as u64);
        conn.block_on(c.create_index(&index, name, "")).unwrap();
        let mut client = (scheme.new_client)(&mut rng, &Params::new()).unwrap();
        let db = initial_db(&mut rng);
        let mut oracle = to_oracle(&db);
        let meter = Meter::new();
        let span = meter.span();
        let generation = if scheme.descriptor.kind == SchemeKind::StaticSse {
            let mut up = conn.upload(&index, name, 1, meter.clone()).unwrap();
            client.setup(&mut rng, &mut up, &db).unwrap();
            up.commit().unwrap();
            1
        } else {
            let mut ch = conn.index_channel(&index, name, 0, meter.clone());
            client
                .setup(&mut rng, &mut ch, &db)
                .unwrap_or_else(|e| panic!("{name}: setup: {e}"));
            0
        };
        let mut ch = conn.index_channel(&index, name, generation, meter.clone());
        let dynamic = scheme.descriptor.kind == SchemeKind::DynamicSse;
        for step in 0..30 {
            if dynamic && step % 3 != 2 {
                let doc = rng.gen_range(1..=30u64);
                let w = format!("word{}", rng.gen_range(0..12)).into_bytes();
                let present = oracle.get(&w).is_some_and(|s| s.contains(&doc));
                // Add absent pairs, delete present ones: every scheme's
                // update contract.
                let op = if present {
                    UpdateOp::Delete
                } else {
                    UpdateOp::Add
                };
                client
                    .update(&mut rng, &mut ch, op, doc, std::slice::from_ref(&w))
                    .unwrap_or_else(|e| panic!("{name}: step {step}: {op:?} {doc}: {e}"));
                let set = oracle.entry(w).or_default();
                match op {
                    UpdateOp::Add => set.insert(doc),
                    UpdateOp::Delete => set.remove(&doc),
                };
            } else {
                let w = format!("word{}", rng.gen_range(0..12)).into_bytes();
                let got = client
                    .search(&mut rng, &mut ch, &w)
                    .unwrap_or_else(|e| panic!("{name}: step {step}: search: {e}"));
                assert_eq!(got, expected(&oracle, &w), "{name}: step {step}");
            }
        }
        if scheme.descriptor.supports(QueryKind::Prefix) {
            let got = client
                .query(&mut rng, &mut ch, &Query::parse("word1*").unwrap())
                .unwrap_or_else(|e| panic!("{name}: prefix query: {e}"));
            let want: BTreeSet<u64> = oracle
                .iter()
                .filter(|(w, _)| w.starts_with(b"word1"))
                .flat_map(|(_, s)| s.iter().copied())
                .collect();
            assert_eq!(
                got.ids,
                want.into_iter().collect::<Vec<_>>(),
                "{name}: prefix"
            );
        }
        let s = span.finish();
        assert!(
            s.rounds >= 20 && s.bytes_up > 0 && s.bytes_down > 0,
            "{name}: the traffic reaches the meter: {s:?}"
        );
        let stats = conn.block_on(c.stats()).unwrap();
        assert!(
            stats.indexes.iter().any(|x| x.index == index),
            "{name}: index listed"
        );
    }
}

#[test]
fn the_server_lists_every_scheme_it_hosts_of_every_family() {
    let (_server, config) = start();
    let conn = Connection::connect(&config).unwrap();
    let mut c = conn.client();
    let health = conn.block_on(c.health()).unwrap();
    for name in [
        "pibas",
        "fast",
        "kpr12",
        "si-sse-rv",
        "wwp08",
        "pope",
        "bplus-lewi-wu",
        "path-oram",
    ] {
        assert!(
            health.schemes.iter().any(|s| s == name),
            "{name}: {:?}",
            health.schemes
        );
    }
    // ORE schemes have no server half: an index cannot be bound to one.
    assert!(!health.schemes.iter().any(|s| s == "lewi-wu"));
    let err = conn
        .block_on(c.create_index("ore", "lewi-wu", ""))
        .unwrap_err();
    assert!(err.message().contains("a server hosts"), "{err}");
}

#[test]
fn every_conjunctive_scheme_runs_over_the_network_server() {
    let (_server, config) = start();
    conjunctive_schemes(&config);
}

#[test]
fn every_conjunctive_scheme_runs_over_a_redis_cluster() {
    let Some((_server, config)) = start_on_redis_cluster() else {
        return;
    };
    conjunctive_schemes(&config);
}

fn conjunctive_schemes(config: &ClientConfig) {
    use sesame_sse::conjunctive::protocol::Document;
    use sesame_sse::conjunctive::Conjunction;

    let conn = Connection::connect(config).unwrap();
    let mut c = conn.client();
    let docs: Vec<Document> = (1..=12u64)
        .map(|id| Document {
            id,
            fields: vec![
                format!("colour{}", id % 3).into_bytes(),
                format!("size{}", id % 2).into_bytes(),
            ],
            body: format!("record {id}").into_bytes(),
        })
        .collect();
    let entries = sesame_sse::conjunctive::entries();
    assert_eq!(entries.len(), 5);
    for (i, entry) in entries.into_iter().enumerate() {
        let name = entry.descriptor.name;
        let index = format!("cj{i}");
        let mut rng = ChaCha20Rng::seed_from_u64(100 + i as u64);
        conn.block_on(c.create_index(&index, name, "fields=2"))
            .unwrap_or_else(|e| panic!("{name}: create: {e}"));
        let mut params = Params::new();
        params.set("fields", 2);
        let mut client = (entry.new_client)(&mut rng, &params).unwrap();
        let mut ch = conn.index_channel(&index, name, 0, Meter::new());
        client
            .upload(&mut rng, &mut ch, &docs, true)
            .unwrap_or_else(|e| panic!("{name}: upload: {e}"));
        let query = Conjunction::new(vec![(0, b"colour1".to_vec()), (1, b"size0".to_vec())]);
        let got: Vec<(u64, Vec<u8>)> = client
            .search(&mut rng, &mut ch, &query)
            .unwrap_or_else(|e| panic!("{name}: search: {e}"));
        let want: Vec<(u64, Vec<u8>)> = docs
            .iter()
            .filter(|d| d.id % 3 == 1 && d.id % 2 == 0)
            .map(|d| (d.id, d.body.clone()))
            .collect();
        assert_eq!(got, want, "{name}");
        // A client restored from its saved state still searches.
        let saved = client.save_state().unwrap();
        let mut again = (entry.restore_client)(&saved).unwrap();
        let got = again.search(&mut rng, &mut ch, &query).unwrap();
        assert_eq!(got, want, "{name}: restored");
    }
    // Parameters are checked at creation.
    let err = conn
        .block_on(c.create_index("bad", "si-sse-rv", "fields=0"))
        .unwrap_err();
    assert!(err.to_string().contains("fields"), "{err}");
}

#[test]
fn every_range_protocol_runs_over_the_network_server() {
    let (_server, config) = start();
    range_protocols(&config);
}

#[test]
fn every_range_protocol_runs_over_a_redis_cluster() {
    let Some((_server, config)) = start_on_redis_cluster() else {
        return;
    };
    range_protocols(&config);
}

fn range_protocols(config: &ClientConfig) {
    let conn = Connection::connect(config).unwrap();
    let mut c = conn.client();
    let protocols = sesame_range::protocols();
    assert!(protocols.len() >= 10);
    for (i, protocol) in protocols.into_iter().enumerate() {
        let name = protocol.descriptor.name;
        let index = format!("rg{i}");
        let mut rng = ChaCha20Rng::seed_from_u64(200 + i as u64);
        // Small values and small pages, so that the structures split and
        // the protocols take several rounds.
        let text = "bits=10,page_size=512";
        conn.block_on(c.create_index(&index, name, text))
            .unwrap_or_else(|e| panic!("{name}: create: {e}"));
        let params = Params::parse(text).unwrap();
        let mut client = (protocol.new_client)(&mut rng, &params).unwrap();
        let mut ch = conn.index_channel(&index, name, 0, Meter::new());
        let mut oracle: Vec<(u64, Vec<u8>)> = (0..40u64)
            .map(|k| ((k * 37) % 1000, format!("r{k}").into_bytes()))
            .collect();
        client
            .build(&mut rng, &mut ch, &oracle)
            .unwrap_or_else(|e| panic!("{name}: build: {e}"));
        if !matches!(name, "log-brc-pibas" | "log-brc-2lev") {
            client
                .insert(&mut rng, &mut ch, 500, b"late")
                .unwrap_or_else(|e| panic!("{name}: insert: {e}"));
            oracle.push((500, b"late".to_vec()));
        }
        oracle.sort();
        for (lo, hi) in [(0, 1023), (100, 400), (500, 500), (901, 999)] {
            let answer = client
                .query(&mut rng, &mut ch, lo, hi)
                .unwrap_or_else(|e| panic!("{name}: [{lo}, {hi}]: {e}"));
            let want: Vec<_> = oracle
                .iter()
                .filter(|(v, _)| (lo..=hi).contains(v))
                .cloned()
                .collect();
            assert_eq!(answer.records, want, "{name}: [{lo}, {hi}]");
        }
    }
}
