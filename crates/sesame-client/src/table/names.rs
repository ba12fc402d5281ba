//! The names a table's indexes have where they run.
//!
//! A table's keyword index, range indexes and verified group are indexes
//! of the profile like any other, and the server (or anyone holding the
//! embedded store) sees their names. Those names are *opaque*:
//! `tbl-` and 32 hex digits of HMAC-SHA256, under a key derived from the
//! profile's master key (`sesame-client/v1/table-names`), of the table's
//! name and the index's role (the records, the range index of the field
//! at position `n`, the verified group). Every device of the profile
//! computes the same names, so a device finds a table another device
//! made; the server learns neither the table's name nor its fields' (a
//! range index is named by its field's position, never by its name), only
//! how many indexes a table has.
//!
//! Tables made before the names were opaque keep the names they were made
//! with (`t-<table>`, `t-<table>-<n>`, `t-<table>-v`): their state says
//! so, and they keep working unchanged (see `docs/tables.md`).

use sesame_crypto::{HmacPrf, Key, Prf};

use super::schema::MAX_FIELDS;

/// How every opaque name begins (a legacy name begins `t-`).
const PREFIX: &str = "tbl-";

fn name(key: &Key<32>, table: &str, role: &str) -> String {
    let mut input = b"sesame-client/table-index/v1\0".to_vec();
    for part in [table, role] {
        input.extend_from_slice(&(part.len() as u64).to_be_bytes());
        input.extend_from_slice(part.as_bytes());
    }
    let tag = HmacPrf::new(key).eval(&input);
    format!("{PREFIX}{}", hex::encode(&tag[..16]))
}

/// The name of table `table`'s keyword index (its records).
pub(crate) fn rows(key: &Key<32>, table: &str) -> String {
    name(key, table, "rows")
}

/// The name of the range index of the field at `position`.
pub(crate) fn range(key: &Key<32>, table: &str, position: usize) -> String {
    name(key, table, &format!("range/{position}"))
}

/// The name of the verified group's index.
pub(crate) fn group(key: &Key<32>, table: &str) -> String {
    name(key, table, "group")
}

/// Whether `index` has the form of an opaque name (`tbl-` and 32
/// lowercase hex digits).
pub(crate) fn looks_opaque(index: &str) -> bool {
    index.strip_prefix(PREFIX).is_some_and(|tag| {
        tag.len() == 32
            && tag
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Every name an index of table `table` can have, the keyword index's
/// first: what is removed of a table whose schema is not known (the
/// remnants of a create that did not finish).
pub(crate) fn every(key: &Key<32>, table: &str) -> Vec<String> {
    let mut out = vec![rows(key, table), group(key, table)];
    out.extend((0..MAX_FIELDS).map(|p| range(key, table, p)));
    out
}

/// Every legacy name an index of table `table` can have (what a create
/// or drop of builds before opaque names may have left).
pub(crate) fn every_legacy(table: &str) -> Vec<String> {
    let mut out = vec![legacy_rows(table), legacy_group(table)];
    out.extend((0..MAX_FIELDS).map(|p| legacy_range(table, p)));
    out
}

/// The legacy name of table `table`'s keyword index (tables made before
/// names were opaque).
pub(crate) fn legacy_rows(table: &str) -> String {
    format!("t-{table}")
}

/// The legacy name of the range index of the field at `position`.
pub(crate) fn legacy_range(table: &str, position: usize) -> String {
    format!("t-{table}-{position}")
}

/// The legacy name of the verified group's index.
pub(crate) fn legacy_group(table: &str) -> String {
    format!("t-{table}-v")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_keyed_distinct_and_hide_the_table() {
        let k1 = Key::<32>::from_bytes([1; 32]);
        let k2 = Key::<32>::from_bytes([2; 32]);
        let a = every(&k1, "flights");
        let set: std::collections::BTreeSet<&String> = a.iter().collect();
        assert_eq!(set.len(), a.len(), "every name is distinct");
        assert_eq!(rows(&k1, "flights"), rows(&k1, "flights"));
        assert_ne!(rows(&k1, "flights"), rows(&k2, "flights"));
        assert_ne!(rows(&k1, "flights"), rows(&k1, "flight"));
        for n in &a {
            assert!(!n.contains("flights"), "{n}");
            assert_eq!(n.len(), PREFIX.len() + 32);
            assert!(crate::profile::check_index_name(n).is_ok(), "{n}");
            assert!(looks_opaque(n), "{n}");
        }
        for other in [
            "default",
            "tbl-",
            "tbl-notes",
            &format!("{}0", a[0]),
            "t-flights",
        ] {
            assert!(!looks_opaque(other), "{other}");
        }
    }
}
