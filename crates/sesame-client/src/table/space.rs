//! Where a table's bytes go ([`Table::space`]): its records (the keyword
//! index's stored documents), its keyword index, each range index and the
//! verified group, as keys and values in the store before the store's
//! own overhead (`sesame compact` and the store's `space` report that),
//! and the records' catalog, as the client files that hold it;
//! and the compact entry formats a new table's indexes are created with
//! ([`keyword_params`]). Where each byte of a record and of an index entry
//! goes, and what each format leaks, is in `docs/tables.md` ("Where a
//! table's bytes go").

use super::*;
use sesame_core::Params;

/// The parameters a new table's keyword index is created with: the
/// schema's, and unless the schema chooses, entries under short labels:
/// for FAST 16-byte labels (`labels=16`: 41 bytes an entry instead of
/// 57), for Diana 12-byte ones (`labels=12`: 22 bytes instead of 26)
/// and 5-byte identifiers (`ids=5`: 19 bytes; a table's identifiers stay
/// below 2^40, `docs/tables.md`, "Limits"); the security arguments are
/// in `sesame_sse::fast` and `sesame_sse::diana`. Tables created before keep the form their
/// index's saved state records.
pub(super) fn keyword_params(binding: &schema::Binding) -> Result<Params> {
    let mut params = binding.params()?;
    if params.get_or("labels", 0u32)? == 0 {
        if binding.scheme == sesame_sse::fast::DESCRIPTOR.name {
            params.set("labels", sesame_sse::fast::SHORT_LABEL_LEN);
        } else if binding.scheme == sesame_sse::diana::DESCRIPTOR.name {
            params.set("labels", sesame_sse::diana::SHORT_LABEL_LEN);
            if params.get_or("ids", 0u32)? == 0 {
                params.set("ids", sesame_sse::diana::SHORT_ID_LEN);
            }
        }
    }
    Ok(params)
}

/// The part that is not in the store: the records' catalog (each
/// record's name, identifier, size and SHA-256) and the keyword index's
/// client state, as the files the profile keeps them in (sealed, on this
/// machine).
pub const CATALOG_PART: &str = "catalog (client files)";

/// Bytes of one part of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// What it is: `records`, [`CATALOG_PART`], `keyword index`,
    /// `range index dep_time`, `verified group`.
    pub what: String,
    /// Bytes of keys and values.
    pub bytes: u64,
}

/// Where a table's bytes go ([`Table::space`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSpace {
    /// Records in the table.
    pub records: usize,
    /// The parts, records first.
    pub parts: Vec<Part>,
}

impl TableSpace {
    /// Bytes of every part.
    pub fn total(&self) -> u64 {
        self.parts.iter().map(|p| p.bytes).sum()
    }

    /// A table of the parts: bytes, share, bytes per record.
    pub fn describe(&self) -> String {
        let total = self.total().max(1);
        let per = |b: u64| b as f64 / self.records.max(1) as f64;
        let mut out = format!(
            "{:<28} {:>14} {:>7} {:>12}\n",
            "PART", "BYTES", "SHARE", "PER RECORD"
        );
        for p in &self.parts {
            out.push_str(&format!(
                "{:<28} {:>14} {:>6.1}% {:>12.1}\n",
                p.what,
                p.bytes,
                p.bytes as f64 * 100.0 / total as f64,
                per(p.bytes)
            ));
        }
        out.push_str(&format!(
            "{:<28} {:>14} {:>6.1}% {:>12.1}\n",
            "total",
            self.total(),
            100.0,
            per(self.total())
        ));
        out
    }
}

impl Table {
    /// Where the table's bytes go, by index (keys and values as stored,
    /// every generation counted); `None` where the store is not here (a
    /// table on a server).
    pub fn space(&mut self) -> Result<Option<TableSpace>> {
        let catalog = self.rows.state_file_bytes()?;
        let backend = self.rows.backend.as_mut();
        let Some((keyword, records)) = backend.index_bytes(&self.rows_name)? else {
            return Ok(None);
        };
        let mut parts = vec![
            Part {
                what: "records".into(),
                bytes: records,
            },
            Part {
                what: CATALOG_PART.into(),
                bytes: catalog,
            },
            Part {
                what: "keyword index".into(),
                bytes: keyword,
            },
        ];
        for state in &self.state.ranges {
            let (index, docs) = backend.index_bytes(&state.index)?.unwrap_or_default();
            parts.push(Part {
                what: format!("range index {}", state.field),
                bytes: index + docs,
            });
        }
        if let Some(g) = &self.state.group {
            let (index, docs) = backend.index_bytes(&g.index)?.unwrap_or_default();
            parts.push(Part {
                what: "verified group".into(),
                bytes: index + docs,
            });
        }
        Ok(Some(TableSpace {
            records: self.len(),
            parts,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(profile: &crate::Profile, name: &str) -> Table {
        let schema = Schema::from_toml(
            "key = \"k\"\n[fields.k]\ntype = \"integer\"\n[fields.c]\ntype = \"string\"\n\
             index = [\"equality\"]\n[fields.v]\ntype = \"integer\"\nindex = [\"range\"]\n\
             bits = 16\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        Table::create(profile, name, schema).unwrap_or_else(|e| panic!("{e}"))
    }

    fn insert(t: &mut Table, keys: std::ops::Range<i64>) {
        let rows = keys
            .map(|k| Record {
                key: k.to_string(),
                values: vec![
                    Some(Value::Int(k)),
                    Some(Value::Text(format!("c{}", k % 5))),
                    Some(Value::Int(k % 1000)),
                ],
            })
            .collect();
        t.insert(rows, &mut |_| {})
            .unwrap_or_else(|e| panic!("{e}"));
    }

    fn part(space: &TableSpace, what: &str) -> u64 {
        space
            .parts
            .iter()
            .find(|p| p.what == what)
            .unwrap_or_else(|| panic!("no part {what}"))
            .bytes
    }

    /// The space counts the records' catalog, as the files of this
    /// table's index alone (another table's beside them are not counted),
    /// and it grows with the records; every part is named in the report.
    #[test]
    fn the_catalog_is_counted_as_its_own_files() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let profile = crate::table::write::fast_profile(dir.path());
        let mut a = table(&profile, "a");
        insert(&mut a, 0..50);
        let small = a.space().unwrap_or_else(|e| panic!("{e}"));
        let small = small.unwrap_or_else(|| panic!("an embedded table has a space"));
        drop(a);
        let mut b = table(&profile, "b");
        insert(&mut b, 0..3000);
        drop(b);
        let mut a = Table::open(&profile, "a").unwrap_or_else(|e| panic!("{e}"));
        let again = a.space().unwrap_or_else(|e| panic!("{e}"));
        let again = again.unwrap_or_else(|| panic!("an embedded table has a space"));
        assert!(part(&small, CATALOG_PART) > 0);
        assert!(part(&again, CATALOG_PART) < 2 * part(&small, CATALOG_PART));
        insert(&mut a, 50..3000);
        let large = a.space().unwrap_or_else(|e| panic!("{e}"));
        let large = large.unwrap_or_else(|| panic!("an embedded table has a space"));
        assert!(part(&large, CATALOG_PART) > 10 * part(&small, CATALOG_PART));
        let report = large.describe();
        for what in [
            "records",
            CATALOG_PART,
            "keyword index",
            "range index v",
            "total",
        ] {
            assert!(report.contains(what), "{what} missing from {report}");
        }
    }
}
