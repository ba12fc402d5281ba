//! Rotating a profile's master key (`Profile::rotate_master`): every
//! document and state re-sealed, the header switched last; an old header
//! with its passphrase then opens nothing the profile holds; a rotation
//! interrupted at any write of the server completes when run again, and
//! until then nothing else runs on the half-moved profile.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use sesame_client::table::import::{Format, ImportReport};
use sesame_client::table::{Record, Schema, Table};
use sesame_client::{ClientError, MasterRotation, NetworkBackend, Profile, DEFAULT_INDEX};
use sesame_core::Store;
use sesame_store::faulty::{Fault, FaultyStore};

type Setup = support::Setup<FaultyStore>;

fn serve() -> Setup {
    support::setup(Arc::new(FaultyStore::new()), |_| {})
}

/// An embedded profile at `p` in a fresh scratch directory (passphrase
/// "pw"): the directory, the profile's folder and the profile.
fn embedded() -> (tempfile::TempDir, std::path::PathBuf, Profile) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let p = support::profile_at(&dir, "fast");
    (tmp, dir, p)
}

/// `p`'s master key rotated, without a hitch.
fn rotate(p: &Profile) -> MasterRotation {
    p.rotate_master(&mut |_| {}).unwrap()
}

/// Rotates `p` (`kind`, for the time printed), which holds one table of
/// 300 records: the rotation reports that table and those records.
fn rotate_300(p: &Profile, kind: &str) {
    let started = std::time::Instant::now();
    let report = rotate(p);
    eprintln!(
        "rotation of {kind} with a table of 300 records: {:.2} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!((report.tables, report.records), (1, 300), "{report:?}");
}

/// [`cut_until_done`] at writes spread over the run: every one of the
/// first eight, then sparser.
fn sparse_cuts(round: impl FnMut(Fault, i64) -> bool) -> Vec<usize> {
    cut_until_done(10_000, |after| after + 1 + after / 3, round)
}

/// Another command on a profile, to see it refused.
type Command = dyn Fn(&Profile) -> sesame_client::Result<()>;

/// The laptop's profile of `s` after a first rotation `first` that the
/// server may have cut off: the server healed, the profile opened again
/// and the rotation run again where it failed. Where the profile notes a
/// half-done rotation and `blocked` is given, that other command is
/// first refused with what to do, and the second run says it resumed.
fn completed(
    s: &Setup,
    p: Profile,
    first: sesame_client::Result<MasterRotation>,
    what: &str,
    blocked: Option<&Command>,
) -> Profile {
    s.store.heal();
    drop(p);
    let laptop = s.tmp.path().join("laptop");
    let p = Profile::open(&laptop, "pw").unwrap();
    if let Err(e) = first {
        let again = || {
            p.rotate_master(&mut |_| {})
                .unwrap_or_else(|e2| panic!("{what}: {e}, then {e2}"))
        };
        match blocked {
            Some(blocked) if laptop.join("profile.rotating.json").exists() => {
                let err = blocked(&p).unwrap_err();
                assert!(err.to_string().contains("rekey --master"), "{what}: {err}");
                assert!(again().resumed, "{what}");
            }
            _ => drop(again()),
        }
    }
    Profile::open(&laptop, "pw").unwrap()
}

/// Runs `round(fault, after)` for each fault, the server cutting the
/// rotation off after `after` writes, `after` going from 0 by `step`
/// until a round's first rotation ran to its end (`round` returns true),
/// and at most to `limit`; the number of rounds cut off, per fault.
fn cut_until_done(
    limit: i64,
    step: impl Fn(i64) -> i64,
    mut round: impl FnMut(Fault, i64) -> bool,
) -> Vec<usize> {
    let mut cuts = Vec::new();
    for fault in [Fault::Refused, Fault::AnswerLost] {
        let (mut after, mut cut) = (0, 0);
        while !round(fault, after) {
            cut += 1;
            after = step(after);
            assert!(after < limit, "{fault:?}: the rotation never completes");
        }
        eprintln!("{fault:?}: cut off at {cut} points, completed after {after} writes");
        cuts.push(cut);
    }
    cuts
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
    let docs: Vec<_> = s.documents().unwrap_or_else(|e| panic!("{e}")).to_vec();
    let mut out = BTreeMap::new();
    for d in docs {
        out.insert(d.path.clone(), s.get(d.id).unwrap());
    }
    assert_eq!(s.search("all").unwrap().len(), out.len());
    out
}

#[test]
fn a_rotated_embedded_profile_reads_the_same_and_its_old_header_opens_nothing() {
    let (tmp, dir, p) = embedded();
    let docs = files(tmp.path(), 6);
    support::add(&p, &docs);
    let before = contents(&p);
    let old_header = std::fs::read(dir.join("profile.json")).unwrap();
    let report = rotate(&p);
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
    rotate(&p);
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
            let what = format!("{fault:?} after {after} writes");
            let session = |p: &Profile| p.session(DEFAULT_INDEX).map(drop);
            let p = completed(&s, p, first, &what, Some(&session));
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
    rotate(&p);
    support::assert_passphrase_changed(phone.session(DEFAULT_INDEX), "session");
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
    support::insert_rows(
        &mut t,
        (0..n).map(|id| {
            let v = (id * 37 % 1000 - 500).to_string();
            let s = ["x", "y", "z"][(id % 3) as usize];
            vec![("id", id.to_string()), ("v", v), ("s", s.to_owned())]
        }),
    );
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

/// The answer of each of `queries` on table `table` of `p`, the
/// records sorted by key.
fn sorted_answers(p: &Profile, table: &str, queries: &[&str]) -> Vec<Vec<Record>> {
    let mut t = Table::open(p, table).unwrap();
    let mut out = Vec::new();
    for q in queries {
        let mut records = t.query(q, None).unwrap().records;
        records.sort_by(|a, b| a.key.cmp(&b.key));
        out.push(records);
    }
    out
}

/// Each query's answer (the records, sorted) and every record.
fn answers(p: &Profile) -> Vec<Vec<Record>> {
    let mut out = sorted_answers(p, "flights", &QUERIES);
    let mut t = Table::open(p, "flights").unwrap();
    let mut all = t.records().unwrap();
    all.sort_by(|a, b| a.key.cmp(&b.key));
    out.push(all);
    out
}

#[test]
fn a_rotated_embedded_profile_with_a_table_answers_as_before() {
    let (_tmp, dir, p) = embedded();
    flights(&p, 300);
    let before = answers(&p);
    assert_eq!(before.last().unwrap().len(), 300);
    let old_header = std::fs::read(dir.join("profile.json")).unwrap();
    rotate_300(&p, "an embedded profile");
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
    rotate_300(&p, "a server profile");
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
    support::assert_passphrase_changed(sesame_client::table::tables(&phone), "table list");
    support::assert_passphrase_changed(Table::open(&phone, "flights"), "table open");
    support::assert_passphrase_changed(phone.session(DEFAULT_INDEX), "session");
    drop(phone);
    let phone = Profile::open(s.tmp.path().join("phone"), "pw").unwrap();
    assert_eq!(sesame_client::table::tables(&phone).unwrap(), ["flights"]);
    assert_eq!(answers(&phone), before, "the other device");
    let (tablet, _) = join(&s, "tablet");
    assert_eq!(answers(&tablet), before, "a device joining now");
    // The device that followed rotates in turn (it holds a copy of the
    // old keyword index's state): everyone answers the same after.
    let report = rotate(&phone);
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
    let cuts = cut_until_done(
        100_000,
        |after| after + 1,
        |fault, after| {
            let s = serve();
            let p = laptop(&s, 2);
            flights(&p, 120);
            let before = answers(&p);
            s.store.fail(fault, after);
            let first = p.rotate_master(&mut |_| {});
            let done = first.is_ok();
            let what = format!("{fault:?} after {after} writes");
            // Refused before anything was noted, the rotation just runs again.
            let open = |p: &Profile| Table::open(p, "flights").map(drop);
            let p = completed(&s, p, first, &what, Some(&open));
            assert_eq!(answers(&p), before, "{what}");
            assert_eq!(
                sesame_client::table::tables(&p).unwrap(),
                ["flights"],
                "{what}"
            );
            done
        },
    );
    for cut in cuts {
        assert!(cut >= 8, "cut off {cut} times only");
    }
}

/// Two more tables beside `flights`, one with a verified group and one
/// empty: all three are moved, and each answers as before.
#[test]
fn every_table_is_moved_an_empty_one_and_one_with_a_verified_group_too() {
    let (_tmp, dir, p) = embedded();
    flights(&p, 50);
    let mut t = Table::create(&p, "verified", support::verified_schema("")).unwrap();
    support::insert_rows(
        &mut t,
        (0..60).map(|id: usize| {
            vec![
                ("id", id.to_string()),
                ("carrier", ["UA", "B6", "AA"][id % 3].to_owned()),
                ("origin", ["JFK", "EWR"][id % 2].to_owned()),
            ]
        }),
    );
    drop(t);
    drop(Table::create(&p, "empty", support::verified_schema("")).unwrap());
    let verified = |p: &Profile| {
        let queries = [
            "carrier = \"UA\" and origin = \"JFK\"",
            "origin = \"EWR\"",
            "carrier = \"AA\"",
        ];
        sorted_answers(p, "verified", &queries)
    };
    let before = (answers(&p), verified(&p));
    assert_eq!(before.1[0].len(), 10);
    let report = rotate(&p);
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
    support::insert_rows(
        &mut kept,
        [vec![
            ("id", "1".into()),
            ("v", "2".into()),
            ("s", "x".into()),
        ]],
    );
    drop(kept);
    let server = NetworkBackend::connect(&s.binding).unwrap();
    for index in &gone {
        server.drop_index(index).unwrap();
    }
    let report = rotate(&p);
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
    let (_tmp, dir, p) = embedded();
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
    sparse_cuts(|fault, after| {
        let s = serve();
        let p = laptop(&s, 1);
        flights(&p, 30);
        let (phone, _) = join(&s, "phone");
        let mut wrote = false;
        let first = p.rotate_master(&mut |_| {
            if !wrote {
                wrote = true;
                let mut t = Table::open(&phone, "flights").unwrap();
                let cells = vec![("id", "1000".into()), ("v", "7".into()), ("s", "y".into())];
                support::insert_rows(&mut t, [cells]);
                s.store.fail(fault, after);
            }
        });
        let done = first.is_ok();
        let what = format!("{fault:?} after {after} writes");
        let p = completed(&s, p, first, &what, None);
        let all = answers(&p).pop().unwrap();
        assert_eq!(all.len(), 31, "{what}");
        assert!(all.iter().any(|r| r.key == "1000"), "{what}");
        done
    });
}

/// `file` imported (CSV) into table `keyless` of `p`, made first where
/// `create` (a table without a key: its records are named by the import).
fn import_keyless(
    p: &Profile,
    file: &std::path::Path,
    create: bool,
) -> sesame_client::Result<ImportReport> {
    let mut t = match create {
        true => Table::create(p, "keyless", support::keyless_schema())?,
        false => Table::open(p, "keyless")?,
    };
    t.import(file, Format::Csv, &mut |_| {})
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
    let (tmp, dir, p) = embedded();
    let file = tmp.path().join("rows.csv");
    write_rows(&file, 0..100);
    import_keyless(&p, &file, true).unwrap();
    let report = rotate(&p);
    assert_eq!((report.tables, report.records), (1, 100), "{report:?}");
    drop(p);
    let p = Profile::open(&dir, "pw").unwrap();
    write_rows(&file, 1..101);
    let r = import_keyless(&p, &file, false).unwrap();
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
    import_keyless(&p, &file, true).unwrap();
    let (phone, _) = join(&s, "phone");
    let r = import_keyless(&phone, &file, false).unwrap();
    assert_eq!((r.insert.inserted, r.insert.unchanged), (0, 40), "{r:?}");
    let report = rotate(&p);
    assert_eq!((report.tables, report.records), (1, 40), "{report:?}");
    support::assert_passphrase_changed(phone.session(DEFAULT_INDEX), "session");
    drop(phone);
    let phone = Profile::open(s.tmp.path().join("phone"), "pw").unwrap();
    write_rows(&file, 1..41);
    let r = import_keyless(&phone, &file, false).unwrap();
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
    sparse_cuts(|fault, after| {
        let s = serve();
        let p = laptop(&s, 1);
        let file = s.tmp.path().join("rows.csv");
        write_rows(&file, 0..30);
        import_keyless(&p, &file, true).unwrap();
        s.store.fail(fault, after);
        let first = p.rotate_master(&mut |_| {});
        let done = first.is_ok();
        let what = format!("{fault:?} after {after} writes");
        let p = completed(&s, p, first, &what, None);
        let r = import_keyless(&p, &file, false).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            (r.insert.inserted, r.insert.unchanged, r.removed),
            (0, 30, 0),
            "{what}: {r:?}"
        );
        assert_eq!(keyless_values(&p), (0..30).collect::<Vec<_>>(), "{what}");
        done
    });
}
