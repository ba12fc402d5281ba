//! Table states written by earlier builds open in this one: a state
//! without a format and an incarnation is read as format 1 (no
//! incarnation: records and payloads bound as before, no keyword
//! padding), and a table of an insecure baseline opens as insecure; a
//! state of format 2 (no naming key) names its imported records under
//! the key the state key derives, as those builds did, and a rotation
//! of the master key carries that key over; a state of format 3 (no null
//! keywords) refuses `is null` until the table is made again; a state of
//! format 4 keeps tagging its range payloads.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::schema::{Binding, Field, Value, VerifiedGroup};
use super::{RangeState, Schema, Table, TableState, TABLE_FORMAT, TABLE_FORMAT_V4};
use crate::table::verified::GroupState;
use crate::Profile;

/// [`Schema`] as builds before `insecure` wrote it.
#[derive(Serialize)]
struct SchemaV1<'a> {
    key: &'a Option<String>,
    equality: &'a Binding,
    nulls: &'a Vec<String>,
    fields: &'a Vec<Field>,
    verified: &'a Option<VerifiedGroup>,
}

/// [`TableState`] as builds before incarnations wrote it.
#[derive(Serialize)]
struct StateV1<'a> {
    schema: SchemaV1<'a>,
    ranges: Vec<RangeState>,
    group: Option<GroupState>,
    next_row: u64,
}

fn v1(schema: &Schema, next_row: u64) -> Vec<u8> {
    let s = StateV1 {
        schema: SchemaV1 {
            key: &schema.key,
            equality: &schema.equality,
            nulls: &schema.nulls,
            fields: &schema.fields,
            verified: &schema.verified,
        },
        ranges: Vec::new(),
        group: None,
        next_row,
    };
    sesame_core::wire::encode(&s).unwrap_or_else(|e| panic!("{e}"))
}

fn schema(text: &str) -> Schema {
    Schema::from_toml(text).unwrap_or_else(|e| panic!("{e}"))
}

/// A state as this build writes it, of a one-field table, with naming
/// key `[5; 32]`.
fn current_state(next_row: u64, incarnation: [u8; 16]) -> TableState {
    TableState {
        format: TABLE_FORMAT,
        schema: schema("[fields.a]\ntype = \"integer\"\nindex = [\"range\"]\n"),
        ranges: Vec::new(),
        group: None,
        next_row,
        incarnation: Some(incarnation),
        naming: Some(super::NamingKey([5; 32])),
        null_keywords: true,
    }
}

/// A profile in a fresh temporary folder (password `pw`, the tests' fast
/// key derivation), that folder, the profile's own and its table `old` of
/// schema `schema_text`.
fn table_old(schema_text: &str) -> (tempfile::TempDir, PathBuf, Profile, Table) {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = tmp.path().join("p");
    let p = Profile::create_with_kdf(
        &dir,
        "pw",
        "fast",
        &sesame_core::Params::new(),
        crate::insecure::fast_kdf(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let table = Table::create(&p, "old", schema(schema_text)).unwrap_or_else(|e| panic!("{e}"));
    (tmp, dir, p, table)
}

/// Closes `table` (named `old`) and seals `plain` as its state, as an
/// earlier build wrote it.
fn seal_as_earlier(p: &Profile, table: Table, plain: &[u8]) {
    let path = table.path.clone();
    drop(table);
    p.state_cipher()
        .seal_table(&mut rand_core::OsRng, &path, "old", plain)
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Closes `table` (named `old`), rotates the master key of the profile
/// at `dir` (which makes each table again) and opens both again.
fn rotated(p: Profile, table: Table, dir: &Path) -> (Profile, Table) {
    drop(table);
    p.rotate_master(&mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    drop(p);
    let p = Profile::open(dir, "pw").unwrap_or_else(|e| panic!("{e}"));
    let table = Table::open(&p, "old").unwrap_or_else(|e| panic!("{e}"));
    (p, table)
}

#[test]
fn a_state_of_an_earlier_build_opens_without_an_incarnation() {
    let plain = schema("key = \"k\"\n[fields.k]\ntype = \"string\"\nindex = [\"equality\"]\n");
    for next_row in [0, 1, 300] {
        let state = TableState::decode(&v1(&plain, next_row))
            .unwrap_or_else(|| panic!("a format-1 state does not decode"));
        assert_eq!(state.format, TABLE_FORMAT_V4);
        assert_eq!(state.incarnation, None);
        assert_eq!(state.next_row, next_row);
        assert!(!state.schema.insecure);
        assert_eq!(state.schema.fields, plain.fields);
    }
    // A table an earlier build made over the plaintext baseline opens as
    // insecure (and says so), instead of being refused.
    let baseline = schema(
        "insecure = true\n[fields.v]\ntype = \"integer\"\nindex = [\"range\"]\nrange = \"bplus-plain\"\n",
    );
    let state = TableState::decode(&v1(&baseline, 0))
        .unwrap_or_else(|| panic!("a format-1 state does not decode"));
    assert!(state.schema.insecure);
    assert_eq!(state.schema.insecure_schemes(), ["bplus-plain"]);
}

#[test]
fn a_current_state_keeps_its_incarnation() {
    let state = current_state(7, [9; 16]);
    let bytes = sesame_core::wire::encode(&state).unwrap_or_else(|e| panic!("{e}"));
    let back = TableState::decode(&bytes).unwrap_or_else(|| panic!("no decode"));
    assert_eq!(back.incarnation, Some([9; 16]));
    assert_eq!(back.next_row, 7);
    assert_eq!(back.naming.as_ref().map(|k| k.0), Some([5; 32]));
    // Neither form decodes from damaged bytes.
    assert!(TableState::decode(&bytes[..bytes.len() - 3]).is_none());
}

/// [`TableState`] as format 2 wrote it (no naming key).
#[derive(Serialize)]
struct StateV2<'a> {
    format: u8,
    schema: &'a Schema,
    ranges: &'a Vec<RangeState>,
    group: &'a Option<GroupState>,
    next_row: u64,
    incarnation: Option<[u8; 16]>,
}

#[test]
fn a_format_2_state_opens_without_a_naming_key() {
    let state = current_state(3, [4; 16]);
    let bytes = sesame_core::wire::encode(&v2(&state)).unwrap_or_else(|e| panic!("{e}"));
    let back = TableState::decode(&bytes).unwrap_or_else(|| panic!("no decode"));
    assert_eq!(back.format, TABLE_FORMAT_V4);
    assert_eq!(back.incarnation, Some([4; 16]));
    assert_eq!(back.next_row, 3);
    assert!(back.naming.is_none());
}

fn v2(state: &TableState) -> StateV2<'_> {
    StateV2 {
        format: super::TABLE_FORMAT_V2,
        schema: &state.schema,
        ranges: &state.ranges,
        group: &state.group,
        next_row: state.next_row,
        incarnation: state.incarnation,
    }
}

/// A keyless table whose state an earlier build wrote (format 2: no
/// naming key): its imports are named under the key the state key
/// derives, as before; a rotation of the master key carries that key
/// over, so the same file imported again after it converges.
#[test]
fn a_keyless_table_of_an_earlier_build_converges_after_a_rotation() {
    use super::import::Format;

    let (tmp, dir, p, table) = table_old(
        "equality = \"fast\"\n[fields.name]\ntype = \"string\"\nindex = [\"equality\"]\n\
         [fields.n]\ntype = \"integer\"\nindex = [\"range\"]\nrange = \"bplus-clww\"\nbits = 16\n",
    );
    // Its state as format 2 wrote it.
    let plain = sesame_core::wire::encode(&v2(&table.state)).unwrap_or_else(|e| panic!("{e}"));
    seal_as_earlier(&p, table, &plain);
    let write = |rows: std::ops::Range<i64>| {
        let mut text = String::from("name,n\n");
        for i in rows {
            text.push_str(&format!("name{i},{i}\n"));
        }
        let file = tmp.path().join("rows.csv");
        std::fs::write(&file, text).unwrap_or_else(|e| panic!("{e}"));
        file
    };
    let file = write(0..30);
    let mut table = Table::open(&p, "old").unwrap_or_else(|e| panic!("{e}"));
    assert!(table.state.naming.is_none());
    assert!(table.naming_key() == p.state_cipher().derived_names_key());
    table
        .import(&file, Format::Csv, &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    let (_p, mut table) = rotated(p, table, &dir);
    assert!(table.state.naming.is_some(), "the rotation carries the key");
    let file = write(1..31);
    let r = table
        .import(&file, Format::Csv, &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (r.insert.inserted, r.insert.unchanged, r.removed),
        (1, 29, 1),
        "{r:?}"
    );
    assert_eq!(table.len(), 30);
}

/// [`TableState`] as format 3 wrote it (no null keywords): the fields of
/// format 2, then the naming key (the wire encoding writes a nested
/// struct's fields in place, so this is the flat format-3 layout).
#[derive(Serialize)]
struct StateV3<'a> {
    v2: StateV2<'a>,
    naming: &'a Option<super::NamingKey>,
}

/// A table whose state format 3 wrote holds no null keywords: `is null`
/// is refused, saying how to get them, never answered short; made again
/// (a rotation of the master key), it answers.
#[test]
fn a_table_of_an_earlier_build_refuses_is_null_until_made_again() {
    let (_tmp, dir, p, table) = table_old(
        "key = \"id\"\n[fields.id]\ntype = \"integer\"\nindex = [\"equality\"]\n\
         [fields.city]\ntype = \"string\"\nindex = [\"equality\"]\n",
    );
    assert!(table.has_null_keywords());
    let state = &table.state;
    let plain = sesame_core::wire::encode(&StateV3 {
        v2: StateV2 {
            format: super::TABLE_FORMAT_V3,
            ..v2(state)
        },
        naming: &state.naming,
    })
    .unwrap_or_else(|e| panic!("{e}"));
    seal_as_earlier(&p, table, &plain);
    let mut table = Table::open(&p, "old").unwrap_or_else(|e| panic!("{e}"));
    assert!(!table.has_null_keywords());
    let records = (1..=6)
        .map(|i| {
            let city = (i % 3 != 0).then(|| Value::Text("sf".into()));
            super::Record {
                key: i.to_string(),
                values: vec![Some(Value::Int(i)), city],
            }
        })
        .collect();
    table
        .insert(records, &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    super::plan::assert_no_null_keywords(table.query("city is null", None));
    let (_p, mut table) = rotated(p, table, &dir);
    assert!(table.has_null_keywords());
    let mut keys: Vec<String> = table
        .query("city is null", None)
        .unwrap_or_else(|e| panic!("{e}"))
        .records
        .into_iter()
        .map(|r| r.key)
        .collect();
    keys.sort();
    assert_eq!(keys, ["3", "6"]);
}

/// The keys of the records of `table` that `query` answers, sorted.
fn keys(table: &mut Table, query: &str) -> Vec<i64> {
    let mut out: Vec<i64> = table
        .query(query, None)
        .unwrap_or_else(|e| panic!("{e}"))
        .records
        .into_iter()
        .map(|r| r.key.parse().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    out.sort();
    out
}

/// A table whose state format 4 wrote (every range payload tagged: the
/// identifier and 16 bytes of tag) keeps that form: it opens as format
/// 4, its records are found by range, replaced and deleted (their
/// tagged entries found and removed from the range index) and the table
/// checks clean; a table of this build stores payloads of the
/// identifier alone, 16 bytes less per entry.
#[test]
fn a_table_of_tagged_range_payloads_keeps_them() {
    // Its range index sealed as those builds did (the unique form: a
    // tagged payload does not fit in a nonce).
    let text = "key = \"id\"\n[fields.id]\ntype = \"integer\"\nindex = [\"equality\"]\n\
                [fields.n]\ntype = \"integer\"\nindex = [\"range\"]\nbits = 16\n\
                range = { scheme = \"bplus-lewi-wu\", params = { seal = \"unique\" } }\n";
    let (_tmp, _dir, p, mut table) = table_old(text);
    assert_eq!(table.state.format, TABLE_FORMAT);
    // As a build before untagged payloads made it.
    table.state.format = TABLE_FORMAT_V4;
    table.binder = table.binder.take().map(|b| b.with_tags(true));
    table.save().unwrap_or_else(|e| panic!("{e}"));
    let rows = |ids: std::ops::RangeInclusive<i64>, shift: i64| -> Vec<super::Record> {
        ids.map(|i| super::Record {
            key: i.to_string(),
            values: vec![Some(Value::Int(i)), Some(Value::Int(i + shift))],
        })
        .collect()
    };
    let range_bytes = |t: &mut Table| -> u64 {
        t.insert(rows(1..=30, 0), &mut |_| {})
            .unwrap_or_else(|e| panic!("{e}"));
        let space = t.space().unwrap_or_else(|e| panic!("{e}"));
        let space = space.unwrap_or_else(|| panic!("an embedded table has a space"));
        space
            .parts
            .iter()
            .filter(|p| p.what.starts_with("range index"))
            .map(|p| p.bytes)
            .sum()
    };
    let tagged = range_bytes(&mut table);
    drop(table);
    let mut new = Table::create(&p, "new", schema(text)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tagged, range_bytes(&mut new) + 30 * 16);
    drop(new);
    let mut table = Table::open(&p, "old").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(table.state.format, TABLE_FORMAT_V4);
    table
        .insert(rows(1..=10, 100), &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(table.delete("n between 25 and 30").ok(), Some(6));
    assert_eq!(
        keys(&mut table, "n between 0 and 99"),
        (11..=24).collect::<Vec<_>>()
    );
    assert_eq!(keys(&mut table, "n >= 100"), (1..=10).collect::<Vec<_>>());
    let (_, problems) = table.check().unwrap_or_else(|e| panic!("{e}"));
    assert!(problems.is_empty(), "{problems:?}");
}
