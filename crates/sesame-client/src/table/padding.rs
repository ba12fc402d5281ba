//! Padding of a record's keywords to its schema's fixed count.
//!
//! A record gives the table's keyword index one keyword per equality
//! field with a value and one per prefix of a prefix field's value, up to
//! `prefix_max`: left alone, the number of entries of a record's update
//! would tell the server how many of its fields are null and how long its
//! prefixed strings are. Each record of a table with an incarnation is
//! therefore padded with dummy keywords to [`Schema::keyword_slots`]: one
//! per equality field plus `prefix_max` per prefix field, whatever its
//! values.
//!
//! A dummy keyword is 32 hexadecimal digits: the first 16 bytes of an
//! HMAC-SHA256, under a key of the table's incarnation (derived from the
//! profile's document key), of the record's whole encoding (its key
//! included, as builds before stored it; a record is now stored without
//! its key, module `write`) and the dummy's position. It is the same for
//! the same record (deletions, rebuilds and
//! checks find the keywords a record was inserted with), differs from
//! record to record (each dummy is updated once: no keyword of the index
//! collects the padding), and never matches a query: a query's keywords
//! are `field=value`, `field^prefix` or `field!null`, dummies hold none of
//! `=`, `^` and `!`.
//!
//! A null keyword `field!null` stands for "no value" in a field with an
//! equality or a prefix index, in tables created by builds that write it
//! ([`KeywordPad::nulls`]): `field is null` searches it. A field name is
//! letters, digits and `_`, so `field!null` is neither a value's keyword
//! (`=` follows the field name) nor a prefix's (`^`). It takes one of the
//! slots the field's null value leaves empty (one per equality field,
//! `prefix_max` per prefix field), so the padded count, and what the
//! count shows, stay as they were.
//! Padding costs index entries (measured in `docs/tables.md`); it hides
//! nothing about the record's size (records are not padded).

use sesame_crypto::hash::KeyedHash;
use sesame_crypto::Key;

use crate::error::{ClientError, Result};
use crate::table::schema::{Schema, Value};

/// Domain of the dummy keywords.
const DOMAIN: &str = "sesame-client/table-keyword-pad/v1";

/// The key of a table incarnation's dummy keywords.
pub(crate) struct KeywordPad {
    mac: KeyedHash,
    /// Whether records get a null keyword per null equality or prefix
    /// field (tables created by builds that write them).
    nulls: bool,
}

impl KeywordPad {
    /// The pad of table incarnation `incarnation` of a profile; `nulls`:
    /// its records carry null keywords.
    pub(crate) fn new(
        doc_key: &Key<32>,
        profile_id: &str,
        incarnation: [u8; 16],
        nulls: bool,
    ) -> Result<Self> {
        let derived = KeyedHash::new(doc_key).hash(
            "sesame-client/table-keyword-pad-key/v1",
            &[profile_id.as_bytes(), &incarnation],
        );
        let key = Key::from_slice(&derived)
            .map_err(|_| ClientError::InvalidArgument("a derived key has the wrong size".into()))?;
        Ok(KeywordPad {
            mac: KeyedHash::new(&key),
            nulls,
        })
    }

    /// The dummy keyword at `position` of the record stored as `content`.
    fn dummy(&self, content: &[u8], position: usize) -> String {
        let h = self
            .mac
            .hash(DOMAIN, &[content, &(position as u64).to_be_bytes()]);
        hex::encode(&h[..16])
    }
}

/// The keywords of `record`: the schema's, padded with dummies to the
/// schema's fixed count when `pad` is given, each dummy derived from the
/// record's whole encoding, its key included ([`keywords`] of the
/// encoding): the same whether the record is stored with its key (builds
/// before keyless records) or without it (module `write`,
/// [`super::write::record_content`]), and different for two records of
/// the same values under different keys.
pub(crate) fn record_keywords(
    schema: &Schema,
    pad: Option<&KeywordPad>,
    record: &super::Record,
) -> Vec<String> {
    match sesame_core::wire::encode(record) {
        Ok(whole) => keywords(schema, pad, &record.values, &whole),
        // Encoding into a vector does not fail; without the encoding the
        // real keywords are still right (a dummy would not be).
        Err(_) => schema.keywords(&record.values),
    }
}

/// The keywords of a record (`values`, whose whole encoding, key included,
/// is `content`): the schema's, padded with dummies to the schema's fixed
/// count when `pad` is given.
pub(crate) fn keywords(
    schema: &Schema,
    pad: Option<&KeywordPad>,
    values: &[Option<Value>],
    content: &[u8],
) -> Vec<String> {
    let mut out = schema.keywords(values);
    if pad.is_some_and(|p| p.nulls) {
        for (f, v) in schema.fields.iter().zip(values) {
            if v.is_none() && (f.equality || f.prefix.is_some()) {
                out.push(f.null_keyword());
            }
        }
    }
    if let Some(pad) = pad {
        let slots = schema.keyword_slots();
        let mut position = 0;
        while out.len() < slots {
            out.push(pad.dummy(content, position));
            position += 1;
        }
        out.sort();
        out.dedup();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_record_has_the_fixed_count_and_dummies_match_no_query() {
        let schema = Schema::from_toml(
            "[fields.c]\ntype = \"string\"\nindex = [\"equality\"]\n\
             [fields.d]\ntype = \"string\"\nindex = [\"equality\", \"prefix\"]\nprefix_max = 3\n\
             [fields.n]\ntype = \"integer\"\nindex = [\"equality\"]\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(schema.keyword_slots(), 6);
        let pad = KeywordPad::new(&Key::from_bytes([7; 32]), "p", [1; 16], false)
            .unwrap_or_else(|e| panic!("{e}"));
        let t = |s: &str| Some(Value::Text(s.into()));
        for (values, content) in [
            (
                vec![t("UA"), t("SFO"), Some(Value::Int(3))],
                b"a".as_slice(),
            ),
            (vec![None, t("S"), None], b"b"),
            (vec![None, None, None], b"c"),
        ] {
            let k = keywords(&schema, Some(&pad), &values, content);
            assert_eq!(k.len(), 6, "{k:?}");
            let real = schema.keywords(&values);
            for w in k.iter().filter(|w| !real.contains(w)) {
                assert!(!w.contains(['=', '^', '!']), "{w}");
            }
            // The same record gives the same keywords.
            assert_eq!(k, keywords(&schema, Some(&pad), &values, content));
        }
        // Without a pad (a table of an earlier build): the real ones only.
        assert_eq!(
            keywords(&schema, None, &[None, t("S"), None], b"b"),
            ["d=S", "d^S"]
        );
    }

    /// A record stored without its key gives, read back under its path,
    /// the keywords it was inserted with (so deletions and checks find
    /// them), as a record stored with its key by builds before does; two
    /// records of the same values under different keys get different
    /// dummies.
    #[test]
    fn keywords_read_back_are_those_inserted_in_either_form() {
        use crate::table::write::{decode_record, record_content};
        let schema = Schema::from_toml(
            "[fields.c]\ntype = \"string\"\nindex = [\"equality\"]\n\
             [fields.d]\ntype = \"string\"\nindex = [\"prefix\"]\nprefix_max = 3\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let pad = KeywordPad::new(&Key::from_bytes([7; 32]), "p", [1; 16], true)
            .unwrap_or_else(|e| panic!("{e}"));
        let record = |key: &str| crate::table::Record {
            key: key.into(),
            values: vec![Some(Value::Text("UA".into())), None],
        };
        let a = record("rows.csv#0a1b2c:0011223344556677");
        let inserted = record_keywords(&schema, Some(&pad), &a);
        assert_eq!(inserted.len(), schema.keyword_slots());
        let keyless = record_content(&a).unwrap_or_else(|e| panic!("{e}"));
        let keyed = sesame_core::wire::encode(&a).unwrap_or_else(|e| panic!("{e}"));
        assert!(keyless.len() + a.key.len() <= keyed.len());
        for stored in [&keyless, &keyed] {
            let back = decode_record(&a.key, stored).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(back, a);
            assert_eq!(record_keywords(&schema, Some(&pad), &back), inserted);
        }
        let b = record("rows.csv#0a1b2c:8899aabbccddeeff");
        assert_eq!(record_content(&b).ok(), Some(keyless));
        let other = record_keywords(&schema, Some(&pad), &b);
        let dummies = |k: &[String]| -> Vec<String> {
            k.iter()
                .filter(|w| !w.contains(['=', '^', '!']))
                .cloned()
                .collect()
        };
        assert!(!dummies(&inserted).is_empty());
        assert!(dummies(&inserted)
            .iter()
            .all(|w| !dummies(&other).contains(w)));
    }

    #[test]
    fn a_null_field_gives_its_null_keyword_in_a_slot_it_leaves_empty() {
        let schema = Schema::from_toml(
            "[fields.c]\ntype = \"string\"\nindex = [\"equality\"]\n\
             [fields.d]\ntype = \"string\"\nindex = [\"prefix\"]\nprefix_max = 2\n\
             [fields.r]\ntype = \"integer\"\nindex = [\"range\"]\n\
             [fields.s]\ntype = \"string\"\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let pad = KeywordPad::new(&Key::from_bytes([7; 32]), "p", [1; 16], true)
            .unwrap_or_else(|e| panic!("{e}"));
        let k = keywords(&schema, Some(&pad), &[None, None, None, None], b"x");
        assert_eq!(k.len(), schema.keyword_slots(), "{k:?}");
        // The equality and the prefix field, not the range or stored one.
        let nulls: Vec<&String> = k.iter().filter(|w| w.contains('!')).collect();
        assert_eq!(nulls, ["c!null", "d!null"]);
        let t = |s: &str| Some(Value::Text(s.into()));
        let full = keywords(&schema, Some(&pad), &[t("a"), t("bc"), None, t("z")], b"y");
        assert_eq!(full.len(), schema.keyword_slots(), "{full:?}");
        assert!(!full.iter().any(|w| w.contains('!')), "{full:?}");
        // No value's or prefix's keyword is a null keyword, whatever it holds.
        let odd = schema.keywords(&[t("!null"), t("!n"), None, None]);
        assert!(
            !odd.iter().any(|w| w == "c!null" || w == "d!null"),
            "{odd:?}"
        );
    }
}
