//! A table's keyword index merged into its chunks on a Sesame server
//! (`CompactIndex`, `crates/sesame-server/src/engine/compact.rs`,
//! `NetworkBackend::compact_on_server`): no delta or pending record is
//! left and every answer
//! is as before, a compaction cut short leaves a valid layout that the
//! next one finishes, and a token of another tenant, or none, compacts
//! nothing.

#![allow(clippy::unwrap_used)]

mod support;

use std::fs;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rand_core::OsRng;
use sesame_client::table::import::Format;
use sesame_client::table::{Schema, Table};
use sesame_client::{NetworkBackend, ServerBinding, DEFAULT_INDEX};
use sesame_core::{Conditional, Params, Store, WriteBatch, WriteOp};
use sesame_net::blocking::Connection;
use sesame_net::ClientConfig;
use sesame_server::{RunningServer, Tokens};
use sesame_store::MemoryStore;

/// How the wrapped store fails a compaction's commit.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fault {
    /// Nothing is written and the write fails.
    Refused,
    /// The batch is written, then the write fails (its answer lost).
    AnswerLost,
}

/// A memory store that fails the conditional writes of compactions
/// (batches that delete chunks or deltas and write no index metadata)
/// while a fault is set.
struct Wrapped {
    inner: MemoryStore,
    fault: Mutex<Option<Fault>>,
    faults: AtomicU64,
}

/// A packed chunk's, delta's or pending record's key: `i/` (or, spread,
/// `e/`) and `/#`, or ending in `/+`.
fn is_chunk_key(key: &[u8]) -> bool {
    (key.starts_with(b"i/") || key.starts_with(b"e/"))
        && (key.windows(2).any(|w| w == b"/#") || key.ends_with(b"/+"))
}

/// A compaction's batch: it deletes chunks or deltas and writes no metadata
/// (`x/...`), which every `Call` commit writes.
fn is_compaction(batch: &WriteBatch) -> bool {
    let ops = batch.ops();
    ops.iter()
        .any(|op| matches!(op, WriteOp::Delete { key } if is_chunk_key(key)))
        && !ops
            .iter()
            .any(|op| matches!(op, WriteOp::Put { key, .. } if key.starts_with(b"x/")))
}

impl Wrapped {
    fn new() -> Self {
        Wrapped {
            inner: MemoryStore::new(),
            fault: Mutex::new(None),
            faults: AtomicU64::new(0),
        }
    }

    fn set_fault(&self, fault: Option<Fault>) {
        *self.fault.lock().unwrap() = fault;
    }

    /// `Some(applied)` when the fault takes this write.
    fn faulty(
        &self,
        expect: &[(&[u8], Option<&[u8]>)],
        batch: &WriteBatch,
    ) -> sesame_core::Result<Option<()>> {
        let fault = *self.fault.lock().unwrap();
        let Some(fault) = fault.filter(|_| is_compaction(batch)) else {
            return Ok(None);
        };
        self.faults.fetch_add(1, Ordering::SeqCst);
        if fault == Fault::AnswerLost {
            self.inner.write_if(expect, batch)?;
        }
        Err(sesame_core::Error::StoreUnavailable(format!(
            "injected: {fault:?}"
        )))
    }
}

impl Store for Wrapped {
    sesame_store::forward_store!(|s| s.inner;
        get, get_many, write, commit_groups, scan_prefix, scan_from, ordered_probes, io_counts,
        backend);

    fn write_if(
        &self,
        expect: &[(&[u8], Option<&[u8]>)],
        batch: &WriteBatch,
    ) -> sesame_core::Result<bool> {
        self.faulty(expect, batch)?;
        self.inner.write_if(expect, batch)
    }

    fn write_if_group(&self, group: &[Conditional<'_>]) -> sesame_core::Result<Vec<bool>> {
        for (expect, batch) in group {
            self.faulty(expect, batch)?;
        }
        self.inner.write_if_group(group)
    }
}

/// Pairs not yet in a chunk on the server: deltas (chunk keys whose
/// value is `0x02`) and pending records (keys ending in `/+`).
fn deltas(store: &dyn Store) -> usize {
    store
        .scan_prefix(b"")
        .unwrap()
        .iter()
        .filter(|(key, value)| {
            is_chunk_key(key) && (value.first() == Some(&2) || key.ends_with(b"/+"))
        })
        .count()
}

struct Setup {
    _tmp: tempfile::TempDir,
    store: Arc<Wrapped>,
    server: RunningServer,
    certs: sesame_server::certs::GeneratedCerts,
    alice: String,
    bob: String,
    table: Table,
    backend: NetworkBackend,
}

const ROWS: usize = 3_000;

/// A server over a wrapped store with tenants alice and bob; alice's
/// profile bound to it with a table of one equality field, 3,000 rows
/// imported, then 40 more in five imports (whose keyword entries land
/// beside the chunks as deltas).
fn setup() -> Setup {
    let store = Arc::new(Wrapped::new());
    let certs = sesame_server::certs::localhost().unwrap();
    let alice = Tokens::generate(&mut OsRng);
    let bob = Tokens::generate(&mut OsRng);
    let config =
        sesame_server::certs::loopback_config(&certs, &[("alice", &alice), ("bob", &bob)]).unwrap();
    let server = RunningServer::start(config, store.clone() as Arc<dyn Store>).unwrap();
    let binding = ServerBinding {
        url: server.url(),
        token: alice.clone(),
        ca_pem: Some(certs.ca_pem.clone().into_bytes()),
        index_prefix: "p1-".into(),
    };
    NetworkBackend::connect(&binding)
        .unwrap()
        .create_index(DEFAULT_INDEX, "fast", &Params::new())
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let p = support::profile_at(&tmp.path().join("p"), "fast");
    p.bind_server(&binding).unwrap();
    let schema = Schema::from_toml(
        "key = \"id\"\n[fields.id]\ntype = \"integer\"\n[fields.tail]\ntype = \"string\"\n\
         index = [\"equality\"]\n",
    )
    .unwrap();
    let mut table = Table::create(&p, "t", schema).unwrap();
    let csv = |name: &str, rows: std::ops::Range<usize>| {
        let path = tmp.path().join(name);
        let mut text = String::from("id,tail\n");
        for i in rows {
            text.push_str(&format!("{i},N{}\n", i % 97));
        }
        fs::write(&path, text).unwrap();
        path
    };
    table
        .import(&csv("a.csv", 0..ROWS), Format::Csv, &mut |_| {})
        .unwrap();
    // Eight rows at a time: each import brings the few chunks it touches
    // a pair or two each, which are appended as deltas (40 rows at once
    // over the five or six chunks could count as a bulk and rewrite them:
    // how the labels fall is random).
    for first in (ROWS..ROWS + 40).step_by(8) {
        table
            .import(
                &csv(&format!("b{first}.csv"), first..first + 8),
                Format::Csv,
                &mut |_| {},
            )
            .unwrap();
    }
    let backend = NetworkBackend::connect(&binding).unwrap();
    Setup {
        _tmp: tmp,
        store,
        server,
        certs,
        alice,
        bob,
        table,
        backend,
    }
}

/// Alice's indexes on the server, by their full names there.
fn server_names(store: &dyn Store) -> Vec<String> {
    store
        .scan_prefix(b"x/alice/")
        .unwrap()
        .into_iter()
        .map(|(k, _)| String::from_utf8(k[b"x/alice/".len()..].to_vec()).unwrap())
        .collect()
}

/// Compacts every index of the profile on the server (generation 0): the
/// chunks written.
fn compact_all(s: &Setup) -> sesame_client::Result<usize> {
    let mut written = 0;
    for name in server_names(s.store.as_ref()) {
        let name = name.strip_prefix("p1-").unwrap();
        written += s.backend.compact_on_server(name, 0)?;
    }
    Ok(written)
}

/// Every tail's query answers as the rows say.
fn answers_right(table: &mut Table, rows: usize, what: &str) {
    for tail in [0, 5, 96] {
        let answer = table.query(&format!("tail = \"N{tail}\""), None).unwrap();
        let want = (0..rows).filter(|i| i % 97 == tail).count();
        assert_eq!(answer.records.len(), want, "{what}: N{tail}");
    }
}

/// After a compaction through the server, no delta is left beside the
/// keyword index's chunks (a lookup's probe lands on its key's chunk,
/// which it reads once), and every answer is as before.
#[test]
fn a_compaction_on_the_server_leaves_no_delta_and_the_same_answers() {
    let mut s = setup();
    assert!(deltas(s.store.as_ref()) > 0, "no delta to merge");
    assert!(compact_all(&s).unwrap() > 0);
    assert_eq!(
        deltas(s.store.as_ref()),
        0,
        "deltas left beside the keyword chunks on the server after a compaction"
    );
    answers_right(&mut s.table, ROWS + 40, "after the compaction");
    let (_, problems) = s.table.check().unwrap();
    assert!(problems.is_empty(), "{problems:?}");
}

/// A compaction whose commit fails (nothing written, or written with the
/// answer lost) leaves a layout that answers as before; the next one
/// finishes.
#[test]
fn a_compaction_cut_short_on_a_server_leaves_a_valid_layout() {
    // Refused on every attempt: the client retried, then gave up.
    let mut s = setup();
    let left = deltas(s.store.as_ref());
    assert!(left > 0, "no delta to merge");
    s.store.set_fault(Some(Fault::Refused));
    assert!(
        compact_all(&s).is_err(),
        "a refused compaction was not reported"
    );
    assert!(s.store.faults.load(Ordering::SeqCst) > 0);
    assert_eq!(deltas(s.store.as_ref()), left);
    s.store.set_fault(None);
    answers_right(&mut s.table, ROWS + 40, "after a refused compaction");
    assert!(compact_all(&s).unwrap() > 0);
    assert_eq!(deltas(s.store.as_ref()), 0, "after a second compaction");
    answers_right(&mut s.table, ROWS + 40, "after a second compaction");

    // Written, its answer lost: the client's retry finds nothing left.
    let mut s = setup();
    s.store.set_fault(Some(Fault::AnswerLost));
    compact_all(&s).unwrap();
    assert!(s.store.faults.load(Ordering::SeqCst) > 0);
    assert_eq!(
        deltas(s.store.as_ref()),
        0,
        "after a compaction's lost answer"
    );
    s.store.set_fault(None);
    answers_right(&mut s.table, ROWS + 40, "after a compaction's lost answer");
    let (_, problems) = s.table.check().unwrap();
    assert!(problems.is_empty(), "{problems:?}");
}

/// `CompactIndex` without a valid token is refused; with another tenant's
/// token it finds no such index; either way alice's deltas stay.
#[test]
fn a_compaction_without_the_tenants_token_is_refused() {
    let mut s = setup();
    let left = deltas(s.store.as_ref());
    assert!(left > 0);
    let names = server_names(s.store.as_ref());
    assert!(!names.is_empty());
    let ask = |token: &str, index: &str| {
        let config =
            ClientConfig::new(s.server.url(), token).with_ca(s.certs.ca_pem.clone().into_bytes());
        let conn = Connection::connect(&config).unwrap();
        let index = index.to_owned();
        conn.with_retries(|mut c| {
            let index = index.clone();
            async move { c.compact_index(&index, 0).await }
        })
    };
    for name in &names {
        let none = ask("sst1_not-a-token", name).unwrap_err();
        assert_eq!(none.code(), tonic::Code::Unauthenticated, "{none:?}");
        let foreign = ask(&s.bob, name).unwrap_err();
        assert_eq!(foreign.code(), tonic::Code::NotFound, "{foreign:?}");
    }
    assert_eq!(
        deltas(s.store.as_ref()),
        left,
        "deltas merged without alice's token"
    );
    // Alice's token compacts.
    for name in &names {
        assert!(ask(&s.alice, name).unwrap().done);
    }
    assert_eq!(deltas(s.store.as_ref()), 0);
    answers_right(&mut s.table, ROWS + 40, "after alice's compaction");
}
