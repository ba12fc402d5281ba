//! Where a table's bytes go in the store ([`Table::space`]): its records
//! (the keyword index's stored documents), its keyword index, each range
//! index and the verified group, as keys and values before the store's
//! own overhead (`sesame compact` and the store's `space` report that);
//! and the compact entry formats a new table's indexes are created with
//! ([`keyword_params`]). Where each byte of a record and of an index entry
//! goes, and what each format leaks, is in `docs/tables.md` ("Where a
//! table's bytes go").

use super::*;
use sesame_core::Params;

/// The parameters a new table's keyword index is created with: the
/// schema's, and unless the schema chooses, entries under short labels:
/// for FAST 16-byte labels (`labels=16`: 41 bytes an entry instead of
/// 57), for Diana 12-byte ones (`labels=12`: 22 bytes instead of 26);
/// the security arguments are in `sesame_sse::fast` and
/// `sesame_sse::diana`. Tables created before keep the form their
/// index's saved state records.
pub(super) fn keyword_params(binding: &schema::Binding) -> Result<Params> {
    let mut params = binding.params()?;
    if params.get_or("labels", 0u32)? == 0 {
        if binding.scheme == sesame_sse::fast::DESCRIPTOR.name {
            params.set("labels", sesame_sse::fast::SHORT_LABEL_LEN);
        } else if binding.scheme == sesame_sse::diana::DESCRIPTOR.name {
            params.set("labels", sesame_sse::diana::SHORT_LABEL_LEN);
        }
    }
    Ok(params)
}

/// Bytes of one part of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// What it is: `records`, `keyword index`, `range index dep_time`,
    /// `verified group`.
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
