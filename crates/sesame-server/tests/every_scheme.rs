//! Every registered keyword scheme over the networked server (loopback
//! TLS, in-process): static schemes by upload, dynamic ones by calls,
//! interactive updates (SIMPLE's refresh, SDa/SDd's rebuilds, Aura's
//! key renewal) included, each answer checked against a plaintext oracle.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_core::OsRng;
use sesame_core::{Meter, Params, QueryKind, SchemeKind};
use sesame_server::blocking::Connection;
use sesame_server::{ClientConfig, RunningServer, ServerConfig, TlsFiles, Tokens};
use sesame_sse::query::Query;
use sesame_sse::{Multimap, UpdateOp};
use sesame_store::MemoryStore;

fn start() -> (RunningServer, ClientConfig) {
    let certs = sesame_server::certs::localhost().unwrap();
    let token = Tokens::generate(&mut OsRng);
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.tls = Some(TlsFiles {
        cert_pem: certs.cert_pem.into_bytes(),
        key_pem: certs.key_pem.into_bytes(),
    });
    config.tokens = Tokens::new().with("alice", &token).unwrap();
    let server = RunningServer::start(config, Arc::new(MemoryStore::new())).unwrap();
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
    let conn = Connection::connect(&config).unwrap();
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
