//! Tables shared by two devices of one profile against one server: the
//! second device sees, queries and adds to the first's table, cannot
//! destroy it by creating one of the same name, and sees a drop and a new
//! table of the same name; a change made while another device changed the
//! table is refused and repaired; a server that serves an older table
//! record is refused.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;

use sesame_client::table::{self, Record, Schema, Table, Value};
use sesame_client::{ClientError, NetworkBackend, Profile, DEFAULT_INDEX};
use sesame_core::{Params, Store, WriteBatch};
use sesame_store::MemoryStore;

type Setup = support::Setup<MemoryStore>;

fn serve() -> Setup {
    support::setup(Arc::new(MemoryStore::new()), |_| {})
}

/// The first device, and a second joined to it.
fn devices(s: &Setup) -> (Profile, Profile) {
    let laptop = support::server_profile(&s.binding, &s.tmp.path().join("laptop"), "fast");
    drop(laptop.session(DEFAULT_INDEX).unwrap());
    let remote = format!("{}{DEFAULT_INDEX}", s.binding.index_prefix);
    let mut binding = s.binding.clone();
    binding.index_prefix = String::new();
    let (phone, _) =
        Profile::join(s.tmp.path().join("phone"), "pw", None, &binding, &remote).unwrap();
    (laptop, phone)
}

fn schema() -> Schema {
    Schema::from_toml(
        "key = \"id\"\n[fields.id]\ntype = \"integer\"\n\
         [fields.carrier]\ntype = \"string\"\nindex = [\"equality\"]\n\
         [fields.v]\ntype = \"integer\"\nindex = [\"range\"]\nbits = 12\n",
    )
    .unwrap()
}

fn record(id: i64, carrier: &str, v: i64) -> Record {
    Record {
        key: id.to_string(),
        values: vec![
            Some(Value::Int(id)),
            Some(Value::Text(carrier.into())),
            Some(Value::Int(v)),
        ],
    }
}

fn insert(p: &Profile, rows: &[(i64, &str, i64)]) {
    let mut t = Table::open(p, "t").unwrap();
    let records = rows.iter().map(|(i, c, v)| record(*i, c, *v)).collect();
    t.insert(records, &mut |_| {}).unwrap();
}

fn keys(p: &Profile, query: &str) -> BTreeSet<String> {
    let mut t = Table::open(p, "t").unwrap();
    t.query(query, None)
        .unwrap()
        .records
        .into_iter()
        .map(|r| r.key)
        .collect()
}

fn set(keys: &[&str]) -> BTreeSet<String> {
    keys.iter().map(|k| (*k).to_owned()).collect()
}

#[test]
fn a_second_device_sees_adds_to_and_cannot_destroy_the_table() {
    let s = serve();
    let (laptop, phone) = devices(&s);
    Table::create(&laptop, "t", schema()).unwrap();
    insert(&laptop, &[(1, "UA", 10), (2, "AA", 20), (3, "UA", 30)]);

    // The phone's create of the same name is refused and drops nothing.
    let err = Table::create(&phone, "t", schema()).unwrap_err();
    assert!(matches!(err, ClientError::TableExists(_)), "{err}");
    assert_eq!(keys(&laptop, "v > 0"), set(&["1", "2", "3"]));
    assert_eq!(table::tables(&phone).unwrap(), vec!["t".to_owned()]);

    insert(&phone, &[(4, "AA", 40)]);
    for p in [&laptop, &phone] {
        assert_eq!(keys(p, "v > 0"), set(&["1", "2", "3", "4"]));
        assert_eq!(keys(p, "carrier = \"AA\""), set(&["2", "4"]));
        let (n, problems) = Table::open(p, "t").unwrap().check().unwrap();
        assert_eq!((n, problems), (4, Vec::<String>::new()));
    }

    // Dropped on the phone and made again with other records: the laptop
    // sees the new table, not the old one.
    Table::open(&phone, "t")
        .unwrap()
        .drop_table(&phone)
        .unwrap();
    assert!(matches!(
        Table::open(&laptop, "t").unwrap_err(),
        ClientError::UnknownTable(_)
    ));
    assert!(table::tables(&laptop).unwrap().is_empty());
    Table::create(&phone, "t", schema()).unwrap();
    insert(&phone, &[(9, "B6", 90)]);
    assert_eq!(keys(&laptop, "v > 0"), set(&["9"]));
    insert(&laptop, &[(8, "B6", 80)]);
    assert_eq!(keys(&phone, "carrier = \"B6\""), set(&["8", "9"]));
}

#[test]
fn a_change_raced_by_another_device_is_refused_and_repaired() {
    let s = serve();
    let (laptop, phone) = devices(&s);
    Table::create(&laptop, "t", schema()).unwrap();
    insert(&laptop, &[(1, "UA", 10)]);
    // The laptop holds the table open while the phone changes it.
    let mut held = Table::open(&laptop, "t").unwrap();
    insert(&phone, &[(2, "AA", 20)]);
    let err = held
        .insert(vec![record(3, "UA", 30)], &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, ClientError::TableChanged(_)), "{err}");
    drop(held);
    // The next command repairs (a rebuild from the records) and the
    // change runs again.
    insert(&laptop, &[(3, "UA", 30)]);
    for p in [&laptop, &phone] {
        assert_eq!(keys(p, "v > 0"), set(&["1", "2", "3"]));
        let (n, problems) = Table::open(p, "t").unwrap().check().unwrap();
        assert_eq!((n, problems), (3, Vec::<String>::new()));
    }
}

#[test]
fn a_server_serving_an_older_table_record_is_refused() {
    let s = serve();
    let (laptop, _phone) = devices(&s);
    Table::create(&laptop, "t", schema()).unwrap();
    insert(&laptop, &[(1, "UA", 10)]);
    // The server's table record (beside the table's keyword index), as it
    // is now; then newer versions.
    let records = |store: &MemoryStore| -> Vec<(Vec<u8>, Vec<u8>)> {
        store
            .scan_prefix(b"v/alice/")
            .unwrap()
            .into_iter()
            .filter(|(k, _)| k.ends_with(b"/table"))
            .collect()
    };
    let old = records(&s.store);
    assert_eq!(old.len(), 1, "one table record");
    insert(&laptop, &[(2, "AA", 20)]);
    assert_ne!(records(&s.store), old, "the record moved on");
    let mut batch = WriteBatch::new();
    for (k, v) in &old {
        batch.put(k.clone(), v.clone());
    }
    s.store.write(batch).unwrap();
    let err = Table::open(&laptop, "t").unwrap_err();
    assert!(
        matches!(err, ClientError::SharedStateRolledBack { .. }),
        "{err}"
    );
    // The record swapped for another table's is refused too.
    Table::create(&laptop, "u", schema()).unwrap();
    let all = records(&s.store);
    let (t_key, u_value) = {
        let t = all
            .iter()
            .find(|(k, _)| old.iter().any(|(o, _)| o == k))
            .unwrap();
        let u = all.iter().find(|(k, _)| k != &t.0).unwrap();
        (t.0.clone(), u.1.clone())
    };
    let mut batch = WriteBatch::new();
    batch.put(t_key, u_value);
    s.store.write(batch).unwrap();
    let err = Table::open(&laptop, "t").unwrap_err();
    assert!(
        matches!(err, ClientError::SharedStateCorrupt { .. }),
        "{err}"
    );
}

/// The server loses table `t`'s record (as a server restored from a
/// backup taken before the table was shared would).
fn drop_table_record(s: &Setup) {
    let (record_key, _) = s
        .store
        .scan_prefix(b"v/alice/")
        .unwrap()
        .into_iter()
        .find(|(k, _)| k.ends_with(b"t-t/table"))
        .unwrap();
    let mut batch = WriteBatch::new();
    batch.delete(record_key);
    s.store.write(batch).unwrap();
}

/// A table made with the names of builds before opaque names
/// (`t-<table>`, `t-<table>-<n>`) keeps working: on an embedded profile
/// it opens, answers, takes records and drops under its old names; on a
/// server the second device finds it too, and a create of its name is
/// refused.
#[test]
fn a_table_with_the_names_of_earlier_builds_keeps_working() {
    // Embedded.
    let tmp = tempfile::tempdir().unwrap();
    let p = support::profile_at(&tmp.path().join("p"), "fast");
    let mut t = Table::create_legacy_for_tests(&p, "t", schema(), None).unwrap();
    t.insert(vec![record(1, "UA", 10)], &mut |_| {}).unwrap();
    drop(t);
    assert!(p.state_path("t-t").exists(), "the legacy keyword index");
    insert(&p, &[(2, "AA", 20)]);
    assert_eq!(keys(&p, "v > 0"), set(&["1", "2"]));
    let explained = Table::open(&p, "t").unwrap().explain("v > 0").unwrap();
    assert!(explained[0].index.contains("t-t-2"), "{explained:?}");
    let (n, problems) = Table::open(&p, "t").unwrap().check().unwrap();
    assert_eq!((n, problems), (2, Vec::<String>::new()));
    assert!(matches!(
        Table::create(&p, "t", schema()).unwrap_err(),
        ClientError::TableExists(_)
    ));
    Table::open(&p, "t").unwrap().drop_table(&p).unwrap();
    assert!(table::tables(&p).unwrap().is_empty());
    assert!(!p.state_path("t-t").exists());

    // On a server, with a second device.
    let s = serve();
    let (laptop, phone) = devices(&s);
    let mut t = Table::create_legacy_for_tests(&laptop, "t", schema(), None).unwrap();
    t.insert(vec![record(1, "UA", 10)], &mut |_| {}).unwrap();
    drop(t);
    let names = NetworkBackend::connect(&s.binding)
        .unwrap()
        .indexes()
        .unwrap();
    assert!(names.iter().any(|n| n == "t-t"), "{names:?}");
    assert_eq!(table::tables(&phone).unwrap(), vec!["t".to_owned()]);
    assert!(matches!(
        Table::create(&phone, "t", schema()).unwrap_err(),
        ClientError::TableExists(_)
    ));
    insert(&phone, &[(2, "AA", 20)]);
    assert_eq!(keys(&laptop, "v > 0"), set(&["1", "2"]));
    assert_eq!(keys(&phone, "carrier = \"UA\""), set(&["1"]));

    // A table made before tables were shared (no record on the server, no
    // note on the device, no copy on the other) is shared when it is next
    // opened, and the other device takes it.
    drop_table_record(&s);
    std::fs::remove_file(laptop.dir().join("tables/t.shared")).unwrap();
    for file in ["tables/t.shared", "tables/t.table"] {
        std::fs::remove_file(phone.dir().join(file)).unwrap();
    }
    insert(&laptop, &[(3, "UA", 30)]);
    assert_eq!(keys(&phone, "v > 0"), set(&["1", "2", "3"]));
    // The record lost again: the device that saw it says the server
    // rolled it back.
    drop_table_record(&s);
    assert!(matches!(
        Table::open(&phone, "t").unwrap_err(),
        ClientError::SharedStateRolledBack { .. }
    ));
}

/// Indexes left on the server by a create that did not finish, under the
/// table's opaque names or the names of earlier builds (issue 43.3: 5
/// indexes left by a refused create, `table drop` saying "no table"), are
/// removed by `remove_remnants` (what `sesame table drop NAME` does when
/// there is no table); a table that exists is not touched.
#[test]
fn remnants_of_a_table_that_does_not_exist_are_removed() {
    let s = serve();
    let (laptop, _phone) = devices(&s);
    let backend = NetworkBackend::connect(&s.binding).unwrap();
    for index in ["t-w", "t-w-1", "t-w-2", "t-w-v"] {
        backend.create_index(index, "fast", &Params::new()).unwrap();
    }
    assert_eq!(table::remove_remnants(&laptop, "w").unwrap(), 4);
    let names = backend.indexes().unwrap();
    assert_eq!(names, vec![DEFAULT_INDEX.to_owned()], "{names:?}");
    assert_eq!(table::remove_remnants(&laptop, "w").unwrap(), 0);
    // A table is not remnants.
    Table::create(&laptop, "t", schema()).unwrap();
    assert!(matches!(
        table::remove_remnants(&laptop, "t").unwrap_err(),
        ClientError::TableExists(_)
    ));
    insert(&laptop, &[(1, "UA", 10)]);
    assert_eq!(keys(&laptop, "v > 0"), set(&["1"]));
}

/// A create or drop in progress in another process (its marker written,
/// its table lock held) is left to it: the list of tables skips it and a
/// create of the same name is refused as busy; once that process is gone,
/// the next command undoes what it left.
#[test]
fn a_create_in_progress_in_another_process_is_left_to_it() {
    let tmp = tempfile::tempdir().unwrap();
    let p = support::profile_at(&tmp.path().join("p"), "fast");
    let dir = p.dir().join("tables");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("w.unfinished"),
        r#"{"op":"create","incarnation":"00000000000000000000000000000000","rows":"tbl-0","indexes":["tbl-0"]}"#,
    )
    .unwrap();
    let held = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("w.lock"))
        .unwrap();
    held.try_lock().unwrap();
    assert!(table::tables(&p).unwrap().is_empty());
    assert!(dir.join("w.unfinished").exists(), "left to its process");
    assert!(matches!(
        Table::create(&p, "w", schema()).unwrap_err(),
        ClientError::ProfileBusy(_)
    ));
    drop(held);
    assert!(table::tables(&p).unwrap().is_empty());
    assert!(!dir.join("w.unfinished").exists(), "undone");
    Table::create(&p, "w", schema()).unwrap();
    assert_eq!(table::tables(&p).unwrap(), vec!["w".to_owned()]);
}

/// `check` looks at tables: a range index that lost its entries (the
/// store's copy damaged) is a problem, marked for a rebuild from the
/// records; the next open rebuilds it and the table checks clean.
#[test]
fn check_finds_a_range_index_that_lost_its_records_and_it_is_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let p = support::profile_at(&tmp.path().join("p"), "fast");
    let store = Arc::new(MemoryStore::new());
    let backend = || {
        Box::new(sesame_client::EmbeddedBackend::over(
            store.clone() as Arc<dyn Store>
        ))
    };
    let mut t = Table::create_with(&p, "t", schema(), backend()).unwrap();
    let records = (1..=5).map(|i| record(i, "UA", i * 10)).collect();
    t.insert(records, &mut |_| {}).unwrap();
    assert_eq!(t.check().unwrap(), (5, Vec::<String>::new()));
    let step = t.explain("v > 0").unwrap().remove(0);
    let index = step.index.strip_prefix("range index ").unwrap().to_owned();
    drop(t);
    let mut batch = WriteBatch::new();
    for (k, _) in store.scan_prefix(format!("i/{index}/").as_bytes()).unwrap() {
        batch.delete(k);
    }
    assert!(!batch.is_empty(), "the range index has entries");
    store.write(batch).unwrap();
    let mut t = Table::open_with(&p, "t", backend()).unwrap();
    let (n, problems) = t.check().unwrap();
    assert_eq!(n, 5);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("field v"), "{problems:?}");
    drop(t);
    let mut t = Table::open_with(&p, "t", backend()).unwrap();
    assert_eq!(t.repaired(), ["v".to_owned()]);
    assert_eq!(t.check().unwrap(), (5, Vec::<String>::new()));
    assert_eq!(t.query("v >= 30", None).unwrap().total, 3);
}
