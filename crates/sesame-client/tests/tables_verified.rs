//! Verified answers in tables: a verified group (SI-SSE-RV) answers
//! conjunctions of equalities as a plaintext filter, across replacements,
//! deletions, compaction and a restart; a server that drops, adds, alters
//! or replays a result is caught ("the server's answer did not verify");
//! and a table whose keyword scheme is KPR12 catches a server that rolls
//! its index back.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sesame_client::intercept::{Hook, Intercepted, ServerHalf};
use sesame_client::table::{Schema, Table, Value};
use sesame_client::{Backend, ClientError, EmbeddedBackend, Profile};
use sesame_core::{wire, Channel, Meter, Store};
use sesame_sse::conjunctive::protocol::{Hit, Response};
use sesame_store::MemoryStore;

fn profile(dir: &std::path::Path) -> Profile {
    support::profile_at(&dir.join("p"), "fast")
}

fn schema() -> Schema {
    support::verified_schema("[fields.v]\ntype = \"integer\"\nindex = [\"range\"]\nbits = 8\n")
}

/// A record's plaintext: carrier, origin, v.
type Plain = (String, String, i64);
type Oracle = BTreeMap<i64, Plain>;
type Pred = Box<dyn Fn(&Plain) -> bool>;
const CARRIERS: [&str; 3] = ["UA", "B6", "AA"];
const ORIGINS: [&str; 3] = ["JFK", "EWR", "LGA"];

fn insert(
    table: &mut Table,
    oracle: &mut Oracle,
    rng: &mut StdRng,
    ids: impl Iterator<Item = i64>,
) {
    let mut records = Vec::new();
    for id in ids {
        let c = CARRIERS[rng.gen_range(0..3)].to_owned();
        let o = ORIGINS[rng.gen_range(0..3)].to_owned();
        let v: i64 = rng.gen_range(-20..20);
        let cells = [
            ("id", id.to_string()),
            ("carrier", c.clone()),
            ("origin", o.clone()),
            ("v", v.to_string()),
        ];
        records.push(
            table
                .record_from_cells(cells.iter().map(|(k, v)| (*k, v.as_str())), None)
                .unwrap(),
        );
        oracle.insert(id, (c, o, v));
    }
    table.insert(records, &mut |_| {}).unwrap();
}

fn keys(table: &mut Table, q: &str) -> BTreeSet<i64> {
    table
        .query(q, None)
        .unwrap_or_else(|e| panic!("{q}: {e}"))
        .records
        .iter()
        .map(|r| match r.values.first() {
            Some(Some(Value::Int(k))) => *k,
            _ => panic!("no key"),
        })
        .collect()
}

fn check(table: &mut Table, oracle: &Oracle, rng: &mut StdRng, what: &str) {
    for _ in 0..4 {
        let c = CARRIERS[rng.gen_range(0..3)];
        let o = ORIGINS[rng.gen_range(0..3)];
        let a: i64 = rng.gen_range(-25..25);
        let cases: Vec<(String, Pred)> = vec![
            (format!("carrier = \"{c}\""), Box::new(move |r| r.0 == c)),
            (
                format!("carrier = \"{c}\" and origin = \"{o}\""),
                Box::new(move |r| r.0 == c && r.1 == o),
            ),
            (
                format!("origin = \"{o}\" and v > {a} and carrier = \"{c}\""),
                Box::new(move |r| r.0 == c && r.1 == o && r.2 > a),
            ),
            (
                format!("carrier = \"{c}\" or origin = \"{o}\""),
                Box::new(move |r| r.0 == c || r.1 == o),
            ),
        ];
        for (q, pred) in cases {
            let want: BTreeSet<i64> = oracle
                .iter()
                .filter(|(_, r)| pred(r))
                .map(|(k, _)| *k)
                .collect();
            assert_eq!(keys(table, &q), want, "{what}: {q}");
        }
    }
}

#[test]
fn a_verified_group_answers_conjunctions_as_a_plaintext_filter() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let mut table = Table::create(&p, "t", schema()).unwrap();
    let steps = table
        .explain("carrier = \"UA\" and origin = \"JFK\" and v > 1")
        .unwrap();
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert_eq!(steps[0].scheme, "si-sse-rv");
    assert!(
        steps[0].index.contains("verified group tbl-"),
        "{:?}",
        steps[0]
    );
    let mut oracle = Oracle::new();
    let mut rng = StdRng::seed_from_u64(1);
    insert(&mut table, &mut oracle, &mut rng, 0..20);
    check(&mut table, &oracle, &mut rng, "after insert");
    // Replacements and deletions leave stale entries, which the answers
    // leave out; enough of them rebuild the group.
    insert(&mut table, &mut oracle, &mut rng, 10..25);
    let n = table.delete("carrier = \"AA\"").unwrap();
    let before = oracle.len();
    oracle.retain(|_, r| r.0 != "AA");
    assert_eq!(n, before - oracle.len());
    check(&mut table, &oracle, &mut rng, "after replace and delete");
    table.delete("v > -100").unwrap();
    oracle.clear();
    assert!(keys(&mut table, "carrier = \"UA\"").is_empty());
    insert(&mut table, &mut oracle, &mut rng, 100..110);
    drop(table);
    let p = Profile::open(dir.path().join("p"), "pw").unwrap();
    let mut table = Table::open(&p, "t").unwrap();
    check(&mut table, &oracle, &mut rng, "after restart");
}

/// How the server lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lie {
    Honest,
    /// Leaves out a matching record.
    Drop,
    /// Says a record that does not match matches.
    Add,
    /// Changes a proof.
    Alter,
    /// Answers with the answer to an earlier search.
    Replay,
}

#[derive(Default)]
struct Tamper {
    lie: Option<Lie>,
    last: Option<Vec<u8>>,
}

/// A channel to the verified group's server that lies as told.
struct Lying {
    inner: Box<dyn Channel>,
    tamper: Arc<Mutex<Tamper>>,
}

impl Channel for Lying {
    fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
        let response = self.inner.call(request)?;
        let Ok(Response::Hits(mut hits)) = wire::decode::<Response>(&response) else {
            return Ok(response);
        };
        let mut t = self.tamper.lock().unwrap();
        let lie = t.lie.unwrap_or(Lie::Honest);
        let honest = response.clone();
        let out = match lie {
            Lie::Honest => response,
            Lie::Replay => t.last.clone().unwrap_or(response),
            Lie::Drop => {
                if let Some(i) = hits.iter().position(|h| h.matched) {
                    hits.remove(i);
                }
                wire::encode(&Response::Hits(hits))?
            }
            Lie::Add => {
                let body = hits.iter().find(|h| h.matched).map(|h| h.body.clone());
                if let (Some(h), Some(body)) = (hits.iter_mut().find(|h| !h.matched), body) {
                    h.matched = true;
                    h.body = body;
                }
                wire::encode(&Response::Hits(hits))?
            }
            Lie::Alter => {
                if let Some(Hit { proof, .. }) = hits.iter_mut().find(|h| !h.proof.is_empty()) {
                    if let Some(b) = proof.last_mut() {
                        *b ^= 1;
                    }
                }
                wire::encode(&Response::Hits(hits))?
            }
        };
        t.last = Some(honest);
        Ok(out)
    }

    fn meter(&self) -> &Meter {
        self.inner.meter()
    }
}

/// Passes the verified group's answers through a [`Lying`] channel.
struct LyingBackend {
    tamper: Arc<Mutex<Tamper>>,
}

impl Hook for LyingBackend {
    fn hosted_channel(
        &mut self,
        inner: &mut dyn Backend,
        index: &str,
        generation: u64,
        scheme: &str,
        server: ServerHalf<'_>,
    ) -> sesame_client::Result<Box<dyn Channel>> {
        let inner = inner.hosted_channel(index, generation, scheme, server)?;
        Ok(Box::new(Lying {
            inner,
            tamper: self.tamper.clone(),
        }))
    }
}

#[test]
fn a_server_that_drops_adds_alters_or_replays_a_result_is_caught() {
    for lie in [Lie::Drop, Lie::Add, Lie::Alter, Lie::Replay] {
        let dir = tempfile::tempdir().unwrap();
        let p = profile(dir.path());
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let tamper = Arc::new(Mutex::new(Tamper::default()));
        let backend = || {
            Box::new(Intercepted::new(
                Box::new(EmbeddedBackend::over(store.clone())),
                LyingBackend {
                    tamper: tamper.clone(),
                },
            ))
        };
        let mut table = Table::create_with(&p, "t", schema(), backend()).unwrap();
        let mut oracle = Oracle::new();
        let mut rng = StdRng::seed_from_u64(7);
        insert(&mut table, &mut oracle, &mut rng, 0..12);
        let q = "carrier = \"UA\"";
        let honest = keys(&mut table, q);
        assert!(!honest.is_empty());
        if lie == Lie::Replay {
            // A record inserted after the answer (to the same query) that
            // the server replays.
            let cells = [
                ("id", "51"),
                ("carrier", "UA"),
                ("origin", "JFK"),
                ("v", "0"),
            ];
            let r = table.record_from_cells(cells, None).unwrap();
            table.insert(vec![r], &mut |_| {}).unwrap();
        }
        tamper.lock().unwrap().lie = Some(lie);
        let e = table.query(q, None).unwrap_err();
        assert!(
            matches!(e, ClientError::AnswerNotVerified(_)),
            "{lie:?}: {e}"
        );
        assert!(e.to_string().contains("did not verify"), "{e}");
        // Honest again, the same query answers.
        tamper.lock().unwrap().lie = None;
        let mut want = honest;
        if lie == Lie::Replay {
            want.insert(51);
        }
        assert_eq!(keys(&mut table, q), want, "{lie:?}");
    }
}

#[test]
fn a_kpr12_table_catches_a_server_that_rolls_its_index_back() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let store = Arc::new(MemoryStore::new());
    let backend = || Box::new(EmbeddedBackend::over(store.clone() as Arc<dyn Store>));
    let schema = Schema::from_toml(
        r#"
equality = "kpr12"
[fields.carrier]
type = "string"
index = ["equality"]
"#,
    )
    .unwrap();
    let mut table = Table::create_with(&p, "k", schema, backend()).unwrap();
    let r = table.record_from_cells([("carrier", "UA")], None).unwrap();
    table.insert(vec![r], &mut |_| {}).unwrap();
    assert_eq!(table.query("carrier = \"UA\"", None).unwrap().total, 1);
    // The server keeps a copy of its index, then rolls back to it after
    // the next insertion.
    let index_keys =
        |s: &MemoryStore| -> Vec<(Vec<u8>, Vec<u8>)> { s.scan_prefix(b"i/tbl-").unwrap() };
    let saved = index_keys(&store);
    let r = table.record_from_cells([("carrier", "UA")], None).unwrap();
    table.insert(vec![r], &mut |_| {}).unwrap();
    assert_eq!(table.query("carrier = \"UA\"", None).unwrap().total, 2);
    let mut batch = sesame_core::WriteBatch::new();
    for (k, _) in index_keys(&store) {
        batch.delete(k);
    }
    for (k, v) in saved {
        batch.put(k, v);
    }
    store.write(batch).unwrap();
    let e = table.query("carrier = \"UA\"", None).unwrap_err();
    assert!(matches!(e, ClientError::AnswerNotVerified(_)), "{e}");
}

/// `is null` on a field only in the verified group is a term of the
/// group's verified search (the group holds a "no value" for a null
/// field), and `is not null` its complement within the table's catalog:
/// a server that drops or adds a row of either answer is caught.
#[test]
fn is_null_on_a_verified_field_is_a_verified_search() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let tamper = Arc::new(Mutex::new(Tamper::default()));
    let backend = Box::new(Intercepted::new(
        Box::new(EmbeddedBackend::over(store.clone())),
        LyingBackend {
            tamper: tamper.clone(),
        },
    ));
    // `carrier` is in the verified group only (no equality index).
    let mut table = Table::create_with(&p, "t", schema(), backend).unwrap();
    let mut records = Vec::new();
    for id in 0..12i64 {
        let carrier = if id % 3 == 0 {
            ""
        } else {
            CARRIERS[(id % 2) as usize]
        };
        let origin = ORIGINS[(id % 3) as usize];
        let cells = [
            ("id", id.to_string()),
            ("carrier", carrier.to_owned()),
            ("origin", origin.to_owned()),
            ("v", "1".to_owned()),
        ];
        records.push(
            table
                .record_from_cells(cells.iter().map(|(k, v)| (*k, v.as_str())), None)
                .unwrap(),
        );
    }
    table.insert(records, &mut |_| {}).unwrap();
    let nulls: BTreeSet<i64> = (0..12).filter(|i| i % 3 == 0).collect();
    let values: BTreeSet<i64> = (0..12).filter(|i| i % 3 != 0).collect();
    assert_eq!(keys(&mut table, "carrier is null"), nulls);
    assert_eq!(keys(&mut table, "carrier is not null"), values);
    // With an equality of the group: one verified search.
    assert_eq!(
        keys(&mut table, "carrier is null and origin = \"JFK\""),
        nulls
    );
    assert!(keys(&mut table, "carrier is null and origin = \"EWR\"").is_empty());
    for q in [
        "carrier is null",
        "carrier is not null",
        "carrier is null and origin = \"JFK\"",
    ] {
        let steps = table.explain(q).unwrap();
        assert_eq!(steps.len(), 1, "{q}: {steps:?}");
        assert_eq!(steps[0].scheme, "si-sse-rv", "{q}");
        assert!(steps[0].index.contains("verified group"), "{q}: {steps:?}");
    }
    for lie in [Lie::Drop, Lie::Add] {
        for q in ["carrier is null", "carrier is not null"] {
            tamper.lock().unwrap().lie = Some(lie);
            let e = table.query(q, None).unwrap_err();
            assert!(
                matches!(e, ClientError::AnswerNotVerified(_)),
                "{lie:?} {q}: {e}"
            );
            tamper.lock().unwrap().lie = None;
        }
    }
    assert_eq!(keys(&mut table, "carrier is null"), nulls);
}
