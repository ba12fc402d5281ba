//! Table states written by earlier builds open in this one: a state
//! without a format and an incarnation is read as format 1 (no
//! incarnation: records and payloads bound as before, no keyword
//! padding), and a table of an insecure baseline opens as insecure.

use serde::Serialize;

use super::schema::{Binding, Field, VerifiedGroup};
use super::{RangeState, Schema, TableState, TABLE_FORMAT};
use crate::table::verified::GroupState;

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

#[test]
fn a_state_of_an_earlier_build_opens_without_an_incarnation() {
    let plain = schema("key = \"k\"\n[fields.k]\ntype = \"string\"\nindex = [\"equality\"]\n");
    for next_row in [0, 1, 300] {
        let state = TableState::decode(&v1(&plain, next_row))
            .unwrap_or_else(|| panic!("a format-1 state does not decode"));
        assert_eq!(state.format, TABLE_FORMAT);
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
    let state = TableState {
        format: TABLE_FORMAT,
        schema: schema("[fields.a]\ntype = \"integer\"\nindex = [\"range\"]\n"),
        ranges: Vec::new(),
        group: None,
        next_row: 7,
        incarnation: Some([9; 16]),
    };
    let bytes = sesame_core::wire::encode(&state).unwrap_or_else(|e| panic!("{e}"));
    let back = TableState::decode(&bytes).unwrap_or_else(|| panic!("no decode"));
    assert_eq!(back.incarnation, Some([9; 16]));
    assert_eq!(back.next_row, 7);
    // Neither form decodes from damaged bytes.
    assert!(TableState::decode(&bytes[..bytes.len() - 3]).is_none());
}
