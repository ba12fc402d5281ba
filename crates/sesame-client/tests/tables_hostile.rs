//! Tables and documents against a server that lies with what it once
//! held: each test plays that server over an in-memory store (a copy of
//! the store taken earlier and put back, bytes moved between records) and
//! checks that what the client returns is what was inserted, or a clear
//! error; never the server's substitute.
//!
//! - a dropped table's records served to the table created after it
//!   under the same name (identifiers restart at 1): refused, through the
//!   keyword index and through the verified group;
//! - a document served in an earlier version under the same identifier
//!   (`get`): refused;
//! - a range payload whose record bytes are moved to another record
//!   (where the protocol does not seal them: the `bplus-plain` baseline):
//!   refused;
//! - every record's update to the keyword index carries the same number
//!   of entries, whatever its nulls and string lengths.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::sync::{Arc, Mutex};

use sesame_client::intercept::{Hook, Intercepted, Update};
use sesame_client::table::{Record, Schema, Table, Value};
use sesame_client::{Backend, ClientError, EmbeddedBackend, Profile, DEFAULT_INDEX};
use sesame_core::{Params, Store, WriteBatch};
use sesame_store::packed::Packed;
use sesame_store::MemoryStore;

fn profile(dir: &std::path::Path) -> Profile {
    support::profile_at(&dir.join("p"), "fast")
}

fn backend(store: &Arc<MemoryStore>) -> Box<dyn Backend> {
    support::memory_backend(store)
}

/// Every key and value of the store under `prefix`.
fn snapshot(store: &MemoryStore, prefix: &[u8]) -> BTreeMap<Vec<u8>, Vec<u8>> {
    support::snapshot(store, prefix)
}

/// Puts back what `snapshot` took (the server restores an old copy).
fn restore(store: &MemoryStore, saved: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let mut batch = WriteBatch::new();
    for (k, v) in saved {
        batch.put(k.clone(), v.clone());
    }
    store.write(batch).unwrap();
}

fn people() -> Schema {
    Schema::from_toml(
        r#"
key = "id"
[fields.id]
type = "integer"
[fields.ssn]
type = "string"
[fields.carrier]
type = "string"
index = ["equality"]
[fields.origin]
type = "string"
[verified]
fields = ["origin"]
"#,
    )
    .unwrap()
}

fn person(table: &mut Table, id: &str, ssn: &str) -> Record {
    table
        .record_from_cells(
            [
                ("id", id),
                ("ssn", ssn),
                ("carrier", "UA"),
                ("origin", "JFK"),
            ],
            None,
        )
        .unwrap()
}

fn ssns(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match r.values.get(1) {
            Some(Some(Value::Text(s))) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_dropped_tables_records_are_refused_by_the_table_made_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let store = Arc::new(MemoryStore::new());
    let mut table = Table::create_with(&p, "people", people(), backend(&store)).unwrap();
    let old = person(&mut table, "1", "111-11-1111");
    table.insert(vec![old], &mut |_| {}).unwrap();
    // The server keeps a copy of the stored records.
    let saved = snapshot(&store, b"d/");
    assert!(!saved.is_empty());
    table.drop_table(&p).unwrap();

    // A table of the same name again; its first record gets the
    // identifier the dropped one had.
    let mut table = Table::create_with(&p, "people", people(), backend(&store)).unwrap();
    let new = person(&mut table, "1", "222-22-2222");
    table.insert(vec![new], &mut |_| {}).unwrap();
    let honest = table.query("carrier = \"UA\"", None).unwrap();
    assert_eq!(ssns(&honest.records), ["222-22-2222"]);

    // The server serves the dropped table's records in their place.
    restore(&store, &saved);
    for q in ["carrier = \"UA\"", "origin = \"JFK\""] {
        match table.query(q, None) {
            Ok(a) => panic!(
                "{q}: the dropped table's record was returned: {:?}",
                ssns(&a.records)
            ),
            Err(e) => {
                assert!(
                    matches!(
                        e,
                        ClientError::DocumentCorrupt(1) | ClientError::DocumentNotAsAdded(1)
                    ),
                    "{q}: {e}"
                );
            }
        }
    }
    let e = table.records().unwrap_err();
    assert!(
        matches!(
            e,
            ClientError::DocumentCorrupt(1) | ClientError::DocumentNotAsAdded(1)
        ),
        "{e}"
    );
}

#[test]
fn a_document_served_in_an_older_version_is_refused() {
    older_version_refused(0);
}

/// The same, with the document's catalog entry read from a catalog run
/// of the compact form (2,100 more files added with it: the save writes
/// the catalog's entries as a run), which keeps the first 16 bytes of
/// the content's SHA-256: the older version is still refused.
#[test]
fn a_document_served_in_an_older_version_is_refused_by_a_compact_catalog_entry() {
    older_version_refused(2_100);
}

/// A document added, its index made again and the file, changed, added
/// again with `more` other files; the server then serves the first
/// version under the identifier both versions had.
fn older_version_refused(more: usize) {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let store = Arc::new(MemoryStore::new());
    let files = dir.path().join("files");
    fs::create_dir_all(&files).unwrap();
    // Two versions of the same length (so that nothing but the content
    // tells them apart).
    let first = files.join("notes.txt");
    fs::write(&first, "pay alice 100 euros").unwrap();
    let mut s = p.session_with(DEFAULT_INDEX, backend(&store)).unwrap();
    s.add_documents(&[&first], &mut |_| {}).unwrap();
    let id = s.documents().unwrap_or_else(|e| panic!("{e}"))[0].id;
    let saved = snapshot(&store, b"d/");
    drop(s);

    // The index is made again (its identifiers restart), and the file,
    // changed, is added to it.
    backend(&store).remove_index(DEFAULT_INDEX).unwrap();
    for f in [
        p.state_path(DEFAULT_INDEX),
        p.dir()
            .join(sesame_client::INDEX_DIR)
            .join(format!("{DEFAULT_INDEX}.shared")),
    ] {
        let _ = fs::remove_file(f);
    }
    p.create_index(DEFAULT_INDEX, "fast", &Params::new())
        .unwrap();
    fs::write(&first, "pay mallory 9000 eu").unwrap();
    let mut s = p.session_with(DEFAULT_INDEX, backend(&store)).unwrap();
    s.add_documents(&[&first], &mut |_| {}).unwrap();
    if more > 0 {
        let others = dir.path().join("others");
        fs::create_dir_all(&others).unwrap();
        for i in 0..more {
            fs::write(others.join(format!("f{i}.txt")), format!("file {i}")).unwrap();
        }
        s.add_documents(&[&others], &mut |_| {}).unwrap();
        drop(s);
        s = p.session_with(DEFAULT_INDEX, backend(&store)).unwrap();
        // Read back from a compact run: the digest's last 16 bytes are
        // not kept.
        let docs = s.documents().unwrap_or_else(|e| panic!("{e}"));
        let kept = docs
            .iter()
            .find(|d| d.id == id)
            .and_then(|d| d.digest)
            .unwrap_or_else(|| panic!("no digest"));
        assert_eq!(
            kept[16..],
            [0; 16],
            "the entry was not read from a compact run"
        );
    }
    assert_eq!(s.documents().unwrap_or_else(|e| panic!("{e}"))[0].id, id);
    assert_eq!(s.get(id).unwrap(), b"pay mallory 9000 eu");

    // The server puts its old copy back.
    restore(&store, &saved);
    match s.get(id) {
        Ok(content) => panic!(
            "the older version was returned: {:?}",
            String::from_utf8_lossy(&content)
        ),
        Err(e) => {
            assert!(
                matches!(e, ClientError::DocumentNotAsAdded(i) if i == id),
                "{e}"
            );
            assert!(e.to_string().contains("digest"), "{e}");
        }
    }
    let report = s.check(&mut |_| {}).unwrap();
    assert!(
        report.problems.iter().any(|p| p.contains("digest")),
        "{:?}",
        report.problems
    );
}

/// Where `needle` starts in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A table of the `bplus-plain` baseline, which does not seal its
/// records (the server can move their bytes at will, which is what the
/// table's own binding stops): keyed by string `name`, with an 8-bit
/// integer range field per name of `fields`.
fn plain_ranges(fields: &[&str]) -> Schema {
    let mut text =
        String::from("insecure = true\nkey = \"name\"\n[fields.name]\ntype = \"string\"\n");
    for f in fields {
        text.push_str(&format!(
            "[fields.{f}]\ntype = \"integer\"\nindex = [\"range\"]\nrange = \"bplus-plain\"\nbits = 8\n"
        ));
    }
    Schema::from_toml(&text)
        .or_else(|_| Schema::from_toml(&text.replace("insecure = true\n", "")))
        .unwrap()
}

/// Records `alice` and `bobby` with the values `a` and `b` of the range
/// fields, inserted into `table`; the two records and their identifiers.
fn alice_and_bobby(
    table: &mut Table,
    fields: &[&str],
    a: [&str; 2],
    b: [&str; 2],
) -> ([Record; 2], [u64; 2]) {
    let mut records = Vec::new();
    for (name, values) in [("alice", a), ("bobby", b)] {
        let cells = std::iter::once(("name", name)).chain(fields.iter().copied().zip(values));
        records.push(table.record_from_cells(cells, None).unwrap());
    }
    table.insert(records.clone(), &mut |_| {}).unwrap();
    let id_of = |key: &str| {
        table
            .keyword_index()
            .documents()
            .unwrap_or_else(|e| panic!("{e}"))
            .iter()
            .find(|d| d.path == key)
            .unwrap()
            .id
    };
    let ids = [id_of("alice"), id_of("bobby")];
    (records.try_into().unwrap(), ids)
}

/// Where the payload of record `id` (its identifier, then its 16-byte
/// tag) starts beside the plain value `value` (before the field's
/// encoding) in a page of the `bplus-plain` baseline (which stores
/// `encoded value || payload`).
fn payload_of(page: &[u8], value: i64, id: u64) -> Option<usize> {
    let schema =
        Schema::from_toml("[fields.v]\ntype = \"integer\"\nindex = [\"range\"]\nbits = 8\n")
            .unwrap();
    let encoded = schema.fields[0]
        .encode(&sesame_client::table::Value::Int(value))
        .unwrap();
    let needle = [encoded.to_be_bytes(), id.to_be_bytes()].concat();
    find(page, &needle).map(|at| at + 8)
}

#[test]
fn a_range_payload_moved_to_another_record_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let store = Arc::new(MemoryStore::new());
    let schema = plain_ranges(&["age"]);
    let mut table = Table::create_with(&p, "ages", schema, backend(&store)).unwrap();
    let ([alice, _], [id_a, id_b]) = alice_and_bobby(&mut table, &["age"], ["5"; 2], ["50"; 2]);
    let honest = table.query("age = 5", None).unwrap();
    assert_eq!(honest.records, std::slice::from_ref(&alice));

    // The server swaps the two records' payloads in its range index (a
    // payload is the identifier and its tag, beside the plain value: the
    // baseline stores `value || payload`).
    let mut batch = WriteBatch::new();
    let mut swapped = 0;
    for (k, v) in store.scan_prefix(b"i/").unwrap() {
        let (Some(ia), Some(ib)) = (payload_of(&v, 5, id_a), payload_of(&v, 50, id_b)) else {
            continue;
        };
        let mut v = v.clone();
        let (pa, pb) = (v[ia..ia + 24].to_vec(), v[ib..ib + 24].to_vec());
        v[ia..ia + 24].copy_from_slice(&pb);
        v[ib..ib + 24].copy_from_slice(&pa);
        swapped += 2;
        batch.put(k, v);
    }
    assert_eq!(
        swapped, 2,
        "the records' payloads were not found in the range index"
    );
    store.write(batch).unwrap();
    match table.query("age = 5", None) {
        Ok(answer) => panic!("a moved payload was accepted: {:?}", answer.records),
        Err(e) => {
            assert!(
                matches!(
                    e,
                    ClientError::AnswerNotVerified(_) | ClientError::DocumentNotAsAdded(_)
                ),
                "{e}"
            );
        }
    }
}

/// Records the bytes of every update the keyword index is sent (what the
/// server sees of each record's keywords).
struct Watching {
    updates: Arc<Mutex<Vec<usize>>>,
}

impl Hook for Watching {
    fn update_job(
        &mut self,
        inner: &mut dyn Backend,
        update: Update<'_>,
    ) -> sesame_client::Result<sesame_client::UpdateJob> {
        let bytes = update.requests.iter().map(Vec::len).sum();
        self.updates.lock().unwrap().push(bytes);
        update.send(inner)
    }
}

#[test]
fn every_records_keyword_update_has_the_schemas_fixed_size() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let updates = Arc::new(Mutex::new(Vec::new()));
    let schema = Schema::from_toml(
        r#"
key = "id"
[fields.id]
type = "integer"
[fields.carrier]
type = "string"
index = ["equality"]
[fields.dest]
type = "string"
index = ["equality", "prefix"]
prefix_max = 4
[fields.note]
type = "string"
"#,
    )
    .unwrap();
    let watching = Box::new(Intercepted::new(
        Box::new(EmbeddedBackend::over(store)),
        Watching {
            updates: updates.clone(),
        },
    ));
    let mut table = Table::create_with(&p, "t", schema, watching).unwrap();
    let mut sizes = Vec::new();
    for cells in [
        vec![
            ("id", "1"),
            ("carrier", "UA"),
            ("dest", "SFO"),
            ("note", "x"),
        ],
        vec![("id", "2"), ("carrier", "UA"), ("dest", "ANCHORAGE")],
        vec![("id", "3"), ("carrier", ""), ("dest", "")],
        vec![("id", "4"), ("dest", "B")],
    ] {
        updates.lock().unwrap().clear();
        let r = table.record_from_cells(cells.clone(), None).unwrap();
        table.insert(vec![r], &mut |_| {}).unwrap();
        let sent: usize = updates.lock().unwrap().iter().sum();
        sizes.push((cells, sent));
    }
    let first = sizes[0].1;
    assert!(first > 0);
    assert!(
        sizes.iter().all(|(_, n)| *n == first),
        "bytes of each record's keyword update differ: {sizes:?}"
    );
    // Padding never answers a query.
    assert_eq!(table.query("dest like \"B*\"", None).unwrap().total, 1);
    assert_eq!(table.query("carrier = \"UA\"", None).unwrap().total, 2);
}

#[test]
fn a_group_scheme_without_proofs_is_refused_and_explain_says_what_is_verified() {
    // The conjunctive baselines answer without proofs: nothing to check.
    for scheme in ["gsw04", "bkm05", "bll06", "wwp08"] {
        let text = format!(
            "[fields.c]\ntype = \"string\"\n[verified]\nfields = [\"c\"]\nscheme = \"{scheme}\"\n"
        );
        match Schema::from_toml(&text) {
            Ok(_) => panic!("[verified] scheme {scheme} was accepted"),
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.contains(scheme) && e.contains("no proof") && e.contains("si-sse-rv"),
                    "{e}"
                );
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let store = Arc::new(MemoryStore::new());
    let table = Table::create_with(&p, "people", people(), backend(&store)).unwrap();
    let steps = table.explain("origin = \"JFK\"").unwrap();
    let request = &steps[0].request;
    assert!(
        request.contains("proof")
            && request.contains("Verified: which records match")
            && request.contains("digest"),
        "{request}"
    );
}

#[test]
fn a_range_payload_moved_to_another_field_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let store = Arc::new(MemoryStore::new());
    let fields = ["x", "y"];
    let mut table = Table::create_with(&p, "xy", plain_ranges(&fields), backend(&store)).unwrap();
    let ([_, bobby], [id_a, id_b]) = alice_and_bobby(&mut table, &fields, ["5", "50"], ["50", "5"]);
    assert_eq!(
        table.query("y = 5", None).unwrap().records,
        std::slice::from_ref(&bobby)
    );
    // A payload is the identifier and its tag (24 bytes), beside the
    // plain value. The leaf of field x holds alice at 5 and bobby at 50;
    // the leaf of field y the other way round. The server puts alice's
    // payload from x's leaf in place of bobby's in y's leaf, beside the
    // value 5.
    let leaves: Vec<(Vec<u8>, Vec<u8>)> = store
        .scan_prefix(b"i/")
        .unwrap()
        .into_iter()
        .filter(|(_, v)| payload_of(v, 5, id_a).is_some() || payload_of(v, 5, id_b).is_some())
        .collect();
    assert_eq!(leaves.len(), 2, "one leaf per field");
    let (x_leaf, y_leaf) = if payload_of(&leaves[0].1, 5, id_a).is_some() {
        (&leaves[0], &leaves[1])
    } else {
        (&leaves[1], &leaves[0])
    };
    let s = payload_of(&x_leaf.1, 5, id_a).unwrap();
    let alice_in_x = x_leaf.1[s..s + 24].to_vec();
    let s = payload_of(&y_leaf.1, 5, id_b).unwrap();
    let mut forged = y_leaf.1.clone();
    forged[s..s + 24].copy_from_slice(&alice_in_x);
    let mut batch = WriteBatch::new();
    batch.put(y_leaf.0.clone(), forged);
    store.write(batch).unwrap();
    match table.query("y = 5", None) {
        Ok(answer) => panic!(
            "a payload of field x was accepted for y = 5: {:?}",
            answer.records
        ),
        Err(e) => assert!(matches!(e, ClientError::AnswerNotVerified(_)), "{e}"),
    }
}

/// A server over `store` on loopback TLS, and a profile bound to it.
fn served(
    store: &Arc<MemoryStore>,
    dir: &std::path::Path,
) -> (sesame_server::RunningServer, Profile) {
    let (server, binding) = support::serve(store.clone(), |_| {});
    let p = support::server_profile(&binding, &dir.join("p"), "fast");
    (server, p)
}

#[test]
fn a_dropped_tables_keyword_index_put_back_on_a_server_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(MemoryStore::new());
    let (_server, p) = served(&store, dir.path());
    let mut table = Table::create(&p, "people", people()).unwrap();
    // More changes than the table made after it will have, so that the
    // dropped table's keyword state has the higher version.
    for (id, ssn) in [
        ("1", "111-11-1111"),
        ("2", "111-11-2222"),
        ("3", "111-11-3333"),
    ] {
        let r = person(&mut table, id, ssn);
        table.insert(vec![r], &mut |_| {}).unwrap();
    }
    let saved = snapshot(&store, b"");
    table.drop_table(&p).unwrap();
    let mut table = Table::create(&p, "people", people()).unwrap();
    let r = person(&mut table, "1", "222-22-2222");
    table.insert(vec![r], &mut |_| {}).unwrap();
    drop(table);

    // The server puts back everything of the dropped table's keyword
    // index (its shared state, its entries, its stored records) but the
    // table's record, whose incarnation the device knows.
    let back: BTreeMap<Vec<u8>, Vec<u8>> = saved
        .into_iter()
        .filter(|(k, _)| !k.ends_with(b"/table") && !k.ends_with(b"/tables"))
        .collect();
    restore(&store, &back);
    let open_and_read = || {
        Table::open(&p, "people").and_then(|mut t| {
            let a = t.query("carrier = \"UA\"", None)?;
            let all = t.records()?;
            Ok((ssns(&a.records), ssns(&all)))
        })
    };
    // This device remembers its last write of the keyword state: the
    // state put back does not continue it.
    match open_and_read() {
        Ok(got) => panic!("the dropped table's keyword state was taken: {got:?}"),
        Err(e) => assert!(matches!(e, ClientError::SharedStateForked { .. }), "{e}"),
    }
    // A device that holds nothing of the keyword index (its state and its
    // notes of it deleted; the issue's reproduction deletes the version
    // note) takes the state put back, whose records are of the dropped
    // incarnation: none opens.
    for entry in fs::read_dir(p.dir().join(sesame_client::INDEX_DIR)).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("tbl-") && path.is_file() {
            fs::remove_file(&path).unwrap();
        }
    }
    match open_and_read() {
        Ok(got) => panic!("the dropped table's records came back: {got:?}"),
        Err(e) => assert!(matches!(e, ClientError::DocumentCorrupt(_)), "{e}"),
    }
}

#[test]
fn explain_states_the_keyword_padding() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let store = Arc::new(MemoryStore::new());
    let table = Table::create_with(&p, "people", people(), backend(&store)).unwrap();
    let steps = table.explain("carrier = \"UA\"").unwrap();
    assert!(
        steps[0].leakage.contains("1 keyword entry, padded"),
        "{}",
        steps[0].leakage
    );
}

/// The view of the stored records of the one table in `store`: a new
/// table's records are packed in chunks under `d/<index>/#`
/// (`docs/tables.md`, "How it is stored").
fn records_view(store: &Arc<MemoryStore>) -> Packed {
    let prefix = snapshot(store, b"d/")
        .keys()
        .find_map(|k| {
            let at = k.windows(2).position(|w| w == b"/#")?;
            Some(k[..at + 2].to_vec())
        })
        .expect("the records are packed");
    Packed::new(store.clone(), prefix)
}

/// The head of each stored record (its key in the records' view: `h`
/// and the identifier) with its value, in the store's order.
fn record_heads(store: &Arc<MemoryStore>) -> Vec<(Vec<u8>, Vec<u8>)> {
    records_view(store)
        .scan_prefix(b"h")
        .unwrap()
        .into_iter()
        .filter(|(k, v)| k.len() == 9 && !v.is_empty())
        .collect()
}

/// Makes the keys under `prefix` exactly `saved` (the server puts back
/// an old copy of its store: what was written since is gone too).
fn restore_exactly(store: &MemoryStore, prefix: &[u8], saved: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let mut batch = WriteBatch::new();
    for (k, _) in store.scan_prefix(prefix).unwrap() {
        if !saved.contains_key(&k) {
            batch.delete(k);
        }
    }
    for (k, v) in saved {
        batch.put(k.clone(), v.clone());
    }
    store.write(batch).unwrap();
}

/// A table's records are stored without their path (the record's key,
/// which the catalog holds and the blob's associated data binds): a
/// record's bytes moved under another record, cut short, or a record
/// replaced and its earlier bytes put back, are refused (the record
/// named, nothing of the substitute returned), and the records of an
/// honest store read back whole, keys included.
#[test]
fn a_records_bytes_moved_cut_or_put_back_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let store = Arc::new(MemoryStore::new());
    let schema = Schema::from_toml(
        r#"
key = "id"
[fields.id]
type = "integer"
[fields.ssn]
type = "string"
[fields.carrier]
type = "string"
index = ["equality"]
"#,
    )
    .unwrap();
    let mut table = Table::create_with(&p, "people", schema, backend(&store)).unwrap();
    let cells =
        |id: &'static str, ssn: &'static str| vec![("id", id), ("ssn", ssn), ("carrier", "UA")];
    let records: Vec<Record> = [cells("1", "111-11-1111"), cells("2", "222-22-2222")]
        .into_iter()
        .map(|c| table.record_from_cells(c, None).unwrap())
        .collect();
    table.insert(records, &mut |_| {}).unwrap();
    let mut keys: Vec<String> = table
        .records()
        .unwrap()
        .into_iter()
        .map(|r| r.key)
        .collect();
    keys.sort();
    assert_eq!(keys, ["1", "2"]);
    let honest = snapshot(&store, b"d/");
    let heads = record_heads(&store);
    assert_eq!(heads.len(), 2, "{heads:?}");
    let refused = |table: &mut Table, what: &str| {
        match table.query("carrier = \"UA\"", None) {
            Ok(a) => panic!("{what}: returned {:?}", ssns(&a.records)),
            Err(e) => assert!(
                matches!(
                    e,
                    ClientError::DocumentCorrupt(_) | ClientError::DocumentNotAsAdded(_)
                ),
                "{what}: {e}"
            ),
        }
        assert!(table.records().is_err(), "{what}");
    };

    let view = records_view(&store);

    // Record 1's bytes under record 2's key.
    view.put(&heads[1].0, &heads[0].1).unwrap();
    refused(&mut table, "moved");
    restore_exactly(&store, b"d/", &honest);
    assert_eq!(table.query("carrier = \"UA\"", None).unwrap().total, 2);

    // Cut short by one byte, and to its head alone.
    for cut in [heads[0].1.len() - 1, 4] {
        view.put(&heads[0].0, &heads[0].1[..cut]).unwrap();
        refused(&mut table, &format!("cut to {cut} bytes"));
    }
    restore_exactly(&store, b"d/", &honest);

    // Record 2 replaced, then its earlier bytes put back under every
    // key the store held.
    let newer = table
        .record_from_cells(cells("2", "999-99-9999"), None)
        .unwrap();
    table.insert(vec![newer], &mut |_| {}).unwrap();
    for (k, _) in record_heads(&store) {
        view.put(&k, &heads[1].1).unwrap();
    }
    refused(&mut table, "put back");
}
