//! Rotating a profile's master key (`Profile::rotate_master`): every
//! document and state re-sealed, the header switched last; an old header
//! with its passphrase then opens nothing the profile holds; a rotation
//! interrupted at any write of the server completes when run again, and
//! until then nothing else runs on the half-moved profile.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use sesame_client::table::import::Format;
use sesame_client::table::{Record, Schema, Table};
use sesame_client::{insecure, ClientError, NetworkBackend, Profile, DEFAULT_INDEX};
use sesame_core::{Params, Store};
use sesame_store::faulty::{Fault, FaultyStore};

type Setup = support::Setup<FaultyStore>;

fn serve() -> Setup {
    support::setup(Arc::new(FaultyStore::new()), |_| {})
}

/// `n` files in `tmp/docs`, each with its own word and `all`.
fn files(tmp: &std::path::Path, n: usize) -> std::path::PathBuf {
    let dir = tmp.join("docs");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..n {
        std::fs::write(dir.join(format!("f{i}.txt")), format!("all word{i}")).unwrap();
    }
    dir
}

/// Every document's path and content, read through a session.
fn contents(p: &Profile) -> BTreeMap<String, Vec<u8>> {
    let mut s = p.session(DEFAULT_INDEX).unwrap();
    let docs: Vec<_> = s.documents().to_vec();
    let mut out = BTreeMap::new();
    for d in docs {
        out.insert(d.path.clone(), s.get(d.id).unwrap());
    }
    assert_eq!(s.search("all").unwrap().len(), out.len());
    out
}

#[test]
fn a_rotated_embedded_profile_reads_the_same_and_its_old_header_opens_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let p =
        Profile::create_with_kdf(&dir, "pw", "fast", &Params::new(), insecure::fast_kdf()).unwrap();
    let docs = files(tmp.path(), 6);
    support::add(&p, &docs);
    let before = contents(&p);
    let old_header = std::fs::read(dir.join("profile.json")).unwrap();
    let report = p.rotate_master(&mut |_| {}).unwrap();
    assert_eq!((report.indexes, report.documents), (1, 6), "{report:?}");
    assert!(!report.resumed);
    drop(p);
    let p = Profile::open(&dir, "pw").unwrap();
    assert_eq!(contents(&p), before, "everything reads the same");
    drop(p);
    // The old header, with the passphrase it was made for: it opens, but
    // nothing of the profile opens under its key.
    std::fs::write(dir.join("profile.json"), &old_header).unwrap();
    let old = Profile::open(&dir, "pw").unwrap();
    let err = old.session(DEFAULT_INDEX).unwrap_err();
    assert!(matches!(err, ClientError::StateCorrupt { .. }), "{err}");
}

/// The first device of a server profile, with `n` documents.
fn laptop(s: &Setup, n: usize) -> Profile {
    let p = support::server_profile(&s.binding, &s.tmp.path().join("laptop"), "fast");
    let docs = files(s.tmp.path(), n);
    support::add(&p, &docs);
    p
}

fn remote(s: &Setup) -> String {
    format!("{}{DEFAULT_INDEX}", s.binding.index_prefix)
}

/// Device `name` joined to the laptop's default index (with the
/// passphrase "pw"), and the index name the join reported.
fn join(s: &Setup, name: &str) -> (Profile, String) {
    Profile::join(s.tmp.path().join(name), "pw", None, &s.binding, &remote(s)).unwrap()
}

#[test]
fn on_a_server_the_old_header_opens_nothing_after_a_rotation() {
    let s = serve();
    let p = laptop(&s, 5);
    let before = contents(&p);
    let key = format!("v/alice/{}/profile", remote(&s)).into_bytes();
    let old_header = s.store.get(&key).unwrap().unwrap();
    p.rotate_master(&mut |_| {}).unwrap();
    let p = Profile::open(p.dir(), "pw").unwrap();
    assert_eq!(contents(&p), before);
    // A device joining now gets the new header and reads everything.
    let (phone, _) = join(&s, "phone");
    assert_eq!(contents(&phone), before);
    // The server puts the old header back: it opens with the passphrase,
    // but the shared state on the server does not open under its key.
    let now = s.store.get(&key).unwrap().unwrap();
    let mut record = (u64::from_be_bytes(now[..8].try_into().unwrap()) + 1)
        .to_be_bytes()
        .to_vec();
    record.extend_from_slice(&old_header[8..]);
    s.store.put(&key, &record).unwrap();
    let err = Profile::join(
        s.tmp.path().join("thief"),
        "pw",
        None,
        &s.binding,
        &remote(&s),
    )
    .map(drop)
    .unwrap_err();
    assert!(
        matches!(err, ClientError::SharedStateCorrupt { .. }),
        "{err}"
    );
}

/// The server refuses (or applies without answering) a write at every
/// point of the rotation in turn: the rotation fails, every other command
/// is refused with what to do, and running it again completes it with
/// every document as it was.
#[test]
fn an_interrupted_rotation_completes_when_run_again() {
    for fault in [Fault::Refused, Fault::AnswerLost] {
        for after in 0..10 {
            let s = serve();
            let p = laptop(&s, 7);
            let before = contents(&p);
            s.store.fail(fault, after);
            let first = p.rotate_master(&mut |_| {});
            s.store.heal();
            drop(p);
            let what = format!("{fault:?} after {after} writes");
            let p = Profile::open(s.tmp.path().join("laptop"), "pw").unwrap();
            if first.is_err() && s.tmp.path().join("laptop/profile.rotating.json").exists() {
                let err = p.session(DEFAULT_INDEX).map(drop).unwrap_err();
                assert!(err.to_string().contains("rekey --master"), "{what}: {err}");
                let report = p
                    .rotate_master(&mut |_| {})
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(report.resumed, "{what}");
            }
            let p = Profile::open(s.tmp.path().join("laptop"), "pw").unwrap();
            assert_eq!(contents(&p), before, "{what}");
            let (phone, _) = join(&s, "phone");
            assert_eq!(contents(&phone), before, "{what}: a new device");
        }
    }
}

/// Another device holding the old master key: its next command sees the
/// newer header and asks for the passphrase; given it (the same one), the
/// device takes the new header and moves its own copies (server binding,
/// states) to the new key, and reads everything.
#[test]
fn another_device_follows_a_rotation_with_its_passphrase() {
    let s = serve();
    let p = laptop(&s, 4);
    let (phone, _) = join(&s, "phone");
    let before = contents(&phone);
    p.rotate_master(&mut |_| {}).unwrap();
    let err = phone.session(DEFAULT_INDEX).map(drop).unwrap_err();
    assert!(
        matches!(err, ClientError::PassphraseChanged { .. }),
        "{err}"
    );
    drop(phone);
    let phone = Profile::open(s.tmp.path().join("phone"), "pw").unwrap();
    assert_eq!(contents(&phone), before);
    // And it keeps working: an add from the phone, seen by the laptop.
    let more = s.tmp.path().join("more");
    std::fs::create_dir_all(&more).unwrap();
    std::fs::write(more.join("m.txt"), "all extra").unwrap();
    support::add(&phone, &more);
    let laptop = Profile::open(s.tmp.path().join("laptop"), "pw").unwrap();
    assert_eq!(contents(&laptop).len(), before.len() + 1);
}

/// A table of `n` records (an id key, a range field `v`, an equality
/// field `s`) in profile `p`; returns its index names where they run.
fn flights(p: &Profile, n: i64) -> Vec<String> {
    let schema = support::range_schema(
        "bplus-clww",
        "fast",
        10,
        "[fields.s]\ntype = \"string\"\nindex = [\"equality\"]\n",
    );
    let mut t = Table::create(p, "flights", schema).unwrap();
    let mut records = Vec::new();
    for id in 0..n {
        let v = (id * 37 % 1000 - 500).to_string();
        let s = ["x", "y", "z"][(id % 3) as usize];
        let cells = [("id", id.to_string()), ("v", v), ("s", s.to_owned())];
        records.push(
            t.record_from_cells(cells.iter().map(|(k, v)| (*k, v.as_str())), None)
                .unwrap(),
        );
    }
    t.insert(records, &mut |_| {}).unwrap();
    let (rows, ranges, group) = t.index_names();
    let mut names = vec![rows];
    names.extend(ranges.into_iter().map(|(_, i)| i));
    names.extend(group);
    names
}

const QUERIES: [&str; 4] = [
    "v between -100 and 250",
    "s = \"y\"",
    "s = \"x\" and v < 0",
    "s = \"z\" or v >= 400",
];

/// Each query's answer (the records, sorted) and every record.
fn answers(p: &Profile) -> Vec<Vec<Record>> {
    let mut t = Table::open(p, "flights").unwrap();
    let mut out = Vec::new();
    for q in QUERIES {
        let mut records = t.query(q, None).unwrap().records;
        records.sort_by(|a, b| a.key.cmp(&b.key));
        out.push(records);
    }
    let mut all = t.records().unwrap();
    all.sort_by(|a, b| a.key.cmp(&b.key));
    out.push(all);
    out
}

#[test]
fn a_rotated_embedded_profile_with_a_table_answers_as_before() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let p =
        Profile::create_with_kdf(&dir, "pw", "fast", &Params::new(), insecure::fast_kdf()).unwrap();
    flights(&p, 300);
    let before = answers(&p);
    assert_eq!(before.last().unwrap().len(), 300);
    let old_header = std::fs::read(dir.join("profile.json")).unwrap();
    let started = std::time::Instant::now();
    let report = p.rotate_master(&mut |_| {}).unwrap();
    eprintln!(
        "rotation of an embedded profile with a table of 300 records: {:.2} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!((report.tables, report.records), (1, 300), "{report:?}");
    drop(p);
    let p = Profile::open(&dir, "pw").unwrap();
    assert_eq!(sesame_client::table::tables(&p).unwrap(), ["flights"]);
    assert_eq!(answers(&p), before, "every query answers as before");
    drop(p);
    std::fs::write(dir.join("profile.json"), &old_header).unwrap();
    let old = Profile::open(&dir, "pw").unwrap();
    let err = Table::open(&old, "flights").unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::StateCorrupt { .. }
                | ClientError::UnknownTable(_)
                | ClientError::UnknownIndex(_)
        ),
        "{err}"
    );
}

/// A server profile with documents and a table: after a rotation the
/// table answers as before on this device, on a device that follows it
/// with its passphrase and on one that joins; the server holds no index
/// under the table's old names.
#[test]
fn a_rotated_server_profile_with_a_table_answers_as_before_and_keeps_no_old_index() {
    let s = serve();
    let p = laptop(&s, 3);
    let old_names = flights(&p, 300);
    let before = answers(&p);
    let (phone, _) = join(&s, "phone");
    assert_eq!(answers(&phone), before);
    let started = std::time::Instant::now();
    let report = p.rotate_master(&mut |_| {}).unwrap();
    eprintln!(
        "rotation of a server profile with a table of 300 records: {:.2} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!((report.tables, report.records), (1, 300), "{report:?}");
    let listed = NetworkBackend::connect(&s.binding)
        .unwrap()
        .indexes()
        .unwrap();
    for old in &old_names {
        assert!(!listed.contains(old), "{old} is still on the server");
    }
    let p = Profile::open(p.dir(), "pw").unwrap();
    assert_eq!(answers(&p), before);
    // The phone's first commands after the rotation are table commands:
    // each says the passphrase changed, not that the table is gone or
    // its list damaged.
    let err = sesame_client::table::tables(&phone).unwrap_err();
    assert!(
        matches!(err, ClientError::PassphraseChanged { .. }),
        "table list: {err:?}"
    );
    let err = Table::open(&phone, "flights").map(drop).unwrap_err();
    assert!(
        matches!(err, ClientError::PassphraseChanged { .. }),
        "table open: {err:?}"
    );
    let err = phone.session(DEFAULT_INDEX).map(drop).unwrap_err();
    assert!(
        matches!(err, ClientError::PassphraseChanged { .. }),
        "{err}"
    );
    drop(phone);
    let phone = Profile::open(s.tmp.path().join("phone"), "pw").unwrap();
    assert_eq!(sesame_client::table::tables(&phone).unwrap(), ["flights"]);
    assert_eq!(answers(&phone), before, "the other device");
    let (tablet, _) = join(&s, "tablet");
    assert_eq!(answers(&tablet), before, "a device joining now");
    // The device that followed rotates in turn (it holds a copy of the
    // old keyword index's state): everyone answers the same after.
    let report = phone.rotate_master(&mut |_| {}).unwrap();
    assert_eq!((report.tables, report.records), (1, 300), "{report:?}");
    let phone = Profile::open(s.tmp.path().join("phone"), "pw").unwrap();
    assert_eq!(answers(&phone), before, "the device that rotated next");
    drop(p);
    let p = Profile::open(s.tmp.path().join("laptop"), "pw");
    let err = p.as_ref().map(|p| p.session(DEFAULT_INDEX).map(drop));
    assert!(
        matches!(err, Ok(Err(ClientError::PassphraseChanged { .. }))),
        "{err:?}"
    );
    let p = Profile::open(s.tmp.path().join("laptop"), "pw").unwrap();
    assert_eq!(answers(&p), before, "the first device, following");
}

/// A rotation of a profile with a table, cut off by the server at every
/// write of its run in turn (until one is not cut off): running
/// it again completes it, and every query answers as before (no record
/// lost or held twice).
#[test]
fn an_interrupted_rotation_of_a_profile_with_a_table_completes_when_run_again() {
    for fault in [Fault::Refused, Fault::AnswerLost] {
        let mut after = 0;
        let mut cut = 0;
        loop {
            assert!(after < 100_000, "{fault:?}: the rotation never completes");
            let s = serve();
            let p = laptop(&s, 2);
            flights(&p, 120);
            let before = answers(&p);
            s.store.fail(fault, after);
            let first = p.rotate_master(&mut |_| {});
            s.store.heal();
            drop(p);
            let what = format!("{fault:?} after {after} writes");
            let p = Profile::open(s.tmp.path().join("laptop"), "pw").unwrap();
            let done = first.is_ok();
            if first.is_err() && s.tmp.path().join("laptop/profile.rotating.json").exists() {
                let err = Table::open(&p, "flights").map(drop).unwrap_err();
                assert!(err.to_string().contains("rekey --master"), "{what}: {err}");
                let report = p
                    .rotate_master(&mut |_| {})
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(report.resumed, "{what}");
            } else if let Err(e) = first {
                // Refused before anything was noted: run again.
                p.rotate_master(&mut |_| {})
                    .unwrap_or_else(|e2| panic!("{what}: {e}, then {e2}"));
            }
            let p = Profile::open(s.tmp.path().join("laptop"), "pw").unwrap();
            assert_eq!(answers(&p), before, "{what}");
            assert_eq!(
                sesame_client::table::tables(&p).unwrap(),
                ["flights"],
                "{what}"
            );
            if done {
                break;
            }
            cut += 1;
            after += 1;
        }
        assert!(cut >= 8, "{fault:?}: cut off {cut} times only");
        eprintln!("{fault:?}: cut off at {cut} points, completed after {after} writes");
    }
}

/// Two more tables beside `flights`, one with a verified group and one
/// empty: all three are moved, and each answers as before.
#[test]
fn every_table_is_moved_an_empty_one_and_one_with_a_verified_group_too() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let p =
        Profile::create_with_kdf(&dir, "pw", "fast", &Params::new(), insecure::fast_kdf()).unwrap();
    flights(&p, 50);
    let mut t = Table::create(&p, "verified", support::verified_schema("")).unwrap();
    let mut records = Vec::new();
    for id in 0..60 {
        let cells = [
            ("id", id.to_string()),
            ("carrier", ["UA", "B6", "AA"][id % 3].to_owned()),
            ("origin", ["JFK", "EWR"][id % 2].to_owned()),
        ];
        records.push(
            t.record_from_cells(cells.iter().map(|(k, v)| (*k, v.as_str())), None)
                .unwrap(),
        );
    }
    t.insert(records, &mut |_| {}).unwrap();
    drop(t);
    drop(Table::create(&p, "empty", support::verified_schema("")).unwrap());
    let verified = |p: &Profile| {
        let mut t = Table::open(p, "verified").unwrap();
        let mut out = Vec::new();
        for q in [
            "carrier = \"UA\" and origin = \"JFK\"",
            "origin = \"EWR\"",
            "carrier = \"AA\"",
        ] {
            let mut records = t.query(q, None).unwrap().records;
            records.sort_by(|a, b| a.key.cmp(&b.key));
            out.push(records);
        }
        out
    };
    let before = (answers(&p), verified(&p));
    assert_eq!(before.1[0].len(), 10);
    let report = p.rotate_master(&mut |_| {}).unwrap();
    assert_eq!((report.tables, report.records), (3, 110), "{report:?}");
    drop(p);
    let p = Profile::open(&dir, "pw").unwrap();
    assert_eq!(
        sesame_client::table::tables(&p).unwrap(),
        ["empty", "flights", "verified"]
    );
    assert_eq!((answers(&p), verified(&p)), before);
    let mut empty = Table::open(&p, "empty").unwrap();
    assert!(empty.records().unwrap().is_empty());
    assert!(
        !dir.join("tables.next").exists() && !dir.join("tables.rotating.json").exists(),
        "the rotation's files are gone"
    );
}

/// Another device, still on the old key, inserts a record into the table
/// while the rotation copies it: the rotation makes the new table again
/// from the old one, so the record is kept.
#[test]
fn a_record_another_device_inserts_during_the_rotation_is_kept() {
    let s = serve();
    let p = laptop(&s, 1);
    flights(&p, 100);
    let (phone, _) = join(&s, "phone");
    let mut wrote = None;
    let report = p
        .rotate_master(&mut |_| {
            if wrote.is_none() {
                // The first progress is the new table's insert: the old
                // table has been read.
                let mut t = Table::open(&phone, "flights").unwrap();
                let cells = [("id", "1000"), ("v", "7"), ("s", "y")];
                let r = t.record_from_cells(cells, None).unwrap();
                wrote = Some(t.insert(vec![r], &mut |_| {}).map(|r| r.inserted));
            }
        })
        .unwrap();
    assert_eq!(wrote.unwrap().unwrap(), 1);
    assert_eq!(report.tables, 1, "{report:?}");
    let p = Profile::open(p.dir(), "pw").unwrap();
    let all = answers(&p).pop().unwrap();
    assert_eq!(all.len(), 101);
    assert!(all.iter().any(|r| r.key == "1000"), "the phone's record");
}

/// The profile's list names a table whose indexes are gone (a drop on
/// another device that stopped before the list): the rotation moves the
/// others and takes it off the list.
#[test]
fn a_listed_table_that_is_gone_does_not_stop_the_rotation() {
    let s = serve();
    let p = laptop(&s, 1);
    let gone = flights(&p, 10);
    let schema = Table::open(&p, "flights").unwrap().schema().clone();
    let mut kept = Table::create(&p, "kept", schema).unwrap();
    let cells = [("id", "1"), ("v", "2"), ("s", "x")];
    let r = kept.record_from_cells(cells, None).unwrap();
    kept.insert(vec![r], &mut |_| {}).unwrap();
    drop(kept);
    let server = NetworkBackend::connect(&s.binding).unwrap();
    for index in &gone {
        server.drop_index(index).unwrap();
    }
    let report = p.rotate_master(&mut |_| {}).unwrap();
    assert_eq!((report.tables, report.records), (1, 1), "{report:?}");
    let p = Profile::open(p.dir(), "pw").unwrap();
    assert_eq!(sesame_client::table::tables(&p).unwrap(), ["kept"]);
    let mut kept = Table::open(&p, "kept").unwrap();
    assert_eq!(kept.records().unwrap().len(), 1);
}

/// A table made under the names of earlier builds (not keyed) is refused
/// before anything changes, with what to do; the profile works as before.
#[test]
fn a_table_under_the_names_of_earlier_builds_is_refused_and_nothing_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let p =
        Profile::create_with_kdf(&dir, "pw", "fast", &Params::new(), insecure::fast_kdf()).unwrap();
    let schema = Schema::from_toml(
        "key = \"id\"\n[fields.id]\ntype = \"integer\"\n[fields.s]\ntype = \"string\"\n\
         index = [\"equality\"]\n",
    )
    .unwrap();
    let mut t = Table::create_legacy_for_tests(&p, "old", schema, None).unwrap();
    let r = t
        .record_from_cells([("id", "1"), ("s", "x")], None)
        .unwrap();
    t.insert(vec![r], &mut |_| {}).unwrap();
    drop(t);
    let header = std::fs::read(dir.join("profile.json")).unwrap();
    let err = p.rotate_master(&mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("earlier build"), "{err}");
    assert!(err.to_string().contains("nothing was changed"), "{err}");
    assert_eq!(std::fs::read(dir.join("profile.json")).unwrap(), header);
    assert!(!dir.join("profile.rotating.json").exists());
    let mut t = Table::open(&p, "old").unwrap();
    assert_eq!(t.query("s = \"x\"", None).unwrap().total, 1);
}

/// As above, with the server cutting the rotation off at writes spread
/// over its run after the other device's insert (every one of the first
/// eight, then sparser: the new table dropped and made again is
/// interrupted too): run again, the rotation completes and the record is
/// kept, each record once.
#[test]
fn a_rotation_redoing_a_table_another_device_changed_completes_when_cut_off() {
    for fault in [Fault::Refused, Fault::AnswerLost] {
        let mut after = 0;
        loop {
            assert!(after < 10_000, "{fault:?}: the rotation never completes");
            let s = serve();
            let p = laptop(&s, 1);
            flights(&p, 30);
            let (phone, _) = join(&s, "phone");
            let mut wrote = false;
            let first = p.rotate_master(&mut |_| {
                if !wrote {
                    wrote = true;
                    let mut t = Table::open(&phone, "flights").unwrap();
                    let r = t
                        .record_from_cells([("id", "1000"), ("v", "7"), ("s", "y")], None)
                        .unwrap();
                    t.insert(vec![r], &mut |_| {}).unwrap();
                    s.store.fail(fault, after);
                }
            });
            s.store.heal();
            let what = format!("{fault:?} after {after} writes");
            let done = first.is_ok();
            drop(p);
            let p = Profile::open(s.tmp.path().join("laptop"), "pw").unwrap();
            if let Err(e) = first {
                p.rotate_master(&mut |_| {})
                    .unwrap_or_else(|e2| panic!("{what}: {e}, then {e2}"));
            }
            let p = Profile::open(s.tmp.path().join("laptop"), "pw").unwrap();
            let all = answers(&p).pop().unwrap();
            assert_eq!(all.len(), 31, "{what}");
            assert!(all.iter().any(|r| r.key == "1000"), "{what}");
            if done {
                break;
            }
            after += 1 + after / 3;
        }
        eprintln!("{fault:?}: completed when cut off after {after} writes");
    }
}

/// A table without a key: its records are named by the import.
fn keyless_schema() -> Schema {
    support::keyless_schema()
}

/// A CSV file of the rows `name{i},i` for each `i` of `rows`.
fn write_rows(path: &std::path::Path, rows: impl IntoIterator<Item = i64>) {
    let mut text = String::from("name,n\n");
    for i in rows {
        text.push_str(&format!("name{i},{i}\n"));
    }
    std::fs::write(path, text).unwrap();
}

/// The `n` values of a keyless table's records, sorted (repeats kept).
fn keyless_values(p: &Profile) -> Vec<i64> {
    let mut t = Table::open(p, "keyless").unwrap();
    let mut out: Vec<i64> = t
        .records()
        .unwrap()
        .into_iter()
        .map(|r| match &r.values[1] {
            Some(sesame_client::table::Value::Int(n)) => *n,
            other => panic!("n {other:?}"),
        })
        .collect();
    out.sort_unstable();
    out
}

/// A file imported into a table without a key before a rotation and
/// again after it (one row removed, one added) converges to the file:
/// its records keep their names, instead of the file's rows being added
/// a second time under names digested from the new key.
#[test]
fn a_keyless_table_imported_again_after_a_rotation_converges_to_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let p =
        Profile::create_with_kdf(&dir, "pw", "fast", &Params::new(), insecure::fast_kdf()).unwrap();
    let file = tmp.path().join("rows.csv");
    write_rows(&file, 0..100);
    let mut t = Table::create(&p, "keyless", keyless_schema()).unwrap();
    t.import(&file, Format::Csv, &mut |_| {}).unwrap();
    drop(t);
    let report = p.rotate_master(&mut |_| {}).unwrap();
    assert_eq!((report.tables, report.records), (1, 100), "{report:?}");
    drop(p);
    let p = Profile::open(&dir, "pw").unwrap();
    write_rows(&file, 1..101);
    let r = Table::open(&p, "keyless")
        .unwrap()
        .import(&file, Format::Csv, &mut |_| {})
        .unwrap();
    assert_eq!(
        keyless_values(&p),
        (1..101).collect::<Vec<_>>(),
        "the table does not hold exactly the file's rows after the rotation: {r:?}"
    );
    assert_eq!(
        (r.insert.inserted, r.insert.unchanged, r.removed),
        (1, 99, 1),
        "{r:?}"
    );
}

/// On a server, the key that names a keyless table's imported records is
/// the table's, shared with the table: a device that joins converges
/// with the first device's import of the same file, before and after a
/// rotation (the device following it with its passphrase).
#[test]
fn every_device_names_a_keyless_import_alike_before_and_after_a_rotation() {
    let s = serve();
    let p = laptop(&s, 1);
    let file = s.tmp.path().join("rows.csv");
    write_rows(&file, 0..40);
    let mut t = Table::create(&p, "keyless", keyless_schema()).unwrap();
    t.import(&file, Format::Csv, &mut |_| {}).unwrap();
    drop(t);
    let (phone, _) = join(&s, "phone");
    let r = Table::open(&phone, "keyless")
        .unwrap()
        .import(&file, Format::Csv, &mut |_| {})
        .unwrap();
    assert_eq!((r.insert.inserted, r.insert.unchanged), (0, 40), "{r:?}");
    let report = p.rotate_master(&mut |_| {}).unwrap();
    assert_eq!((report.tables, report.records), (1, 40), "{report:?}");
    let err = phone.session(DEFAULT_INDEX).map(drop).unwrap_err();
    assert!(
        matches!(err, ClientError::PassphraseChanged { .. }),
        "{err}"
    );
    drop(phone);
    let phone = Profile::open(s.tmp.path().join("phone"), "pw").unwrap();
    write_rows(&file, 1..41);
    let r = Table::open(&phone, "keyless")
        .unwrap()
        .import(&file, Format::Csv, &mut |_| {})
        .unwrap();
    assert_eq!(
        (r.insert.inserted, r.insert.unchanged, r.removed),
        (1, 39, 1),
        "{r:?}"
    );
    let p = Profile::open(s.tmp.path().join("laptop"), "pw").unwrap();
    assert_eq!(keyless_values(&p), (1..41).collect::<Vec<_>>());
}

/// A rotation of a profile with a keyless table, cut off by the server
/// at writes spread over its run (a new table made, but not yet given
/// the old one's naming key, among them): the rerun completes, and the
/// same file imported again changes nothing.
#[test]
fn a_keyless_table_converges_after_an_interrupted_rotation_completes() {
    for fault in [Fault::Refused, Fault::AnswerLost] {
        let mut after = 0;
        loop {
            assert!(after < 10_000, "{fault:?}: the rotation never completes");
            let s = serve();
            let p = laptop(&s, 1);
            let file = s.tmp.path().join("rows.csv");
            write_rows(&file, 0..30);
            let mut t = Table::create(&p, "keyless", keyless_schema()).unwrap();
            t.import(&file, Format::Csv, &mut |_| {}).unwrap();
            drop(t);
            s.store.fail(fault, after);
            let first = p.rotate_master(&mut |_| {});
            s.store.heal();
            let what = format!("{fault:?} after {after} writes");
            let done = first.is_ok();
            drop(p);
            let p = Profile::open(s.tmp.path().join("laptop"), "pw").unwrap();
            if let Err(e) = first {
                p.rotate_master(&mut |_| {})
                    .unwrap_or_else(|e2| panic!("{what}: {e}, then {e2}"));
            }
            let p = Profile::open(s.tmp.path().join("laptop"), "pw").unwrap();
            let r = Table::open(&p, "keyless")
                .unwrap()
                .import(&file, Format::Csv, &mut |_| {})
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(
                (r.insert.inserted, r.insert.unchanged, r.removed),
                (0, 30, 0),
                "{what}: {r:?}"
            );
            assert_eq!(keyless_values(&p), (0..30).collect::<Vec<_>>(), "{what}");
            if done {
                break;
            }
            after += 1 + after / 3;
        }
        eprintln!("{fault:?}: completed when cut off after {after} writes");
    }
}
