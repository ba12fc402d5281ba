//! The keyword index's layout after an import: its packed deltas merged
//! into their chunks (`sesame_store::packed`, [`Packed::compact`]).
//!
//! An import writes the keyword index's entries a batch at a time; the
//! packed view appends each batch's entries as deltas beside their
//! chunks. On the flights (336,776 records) that left about 11 deltas a
//! chunk, and a lookup whose probe lands on another delta of its chunk
//! reads the chunk a second time: most lookups of a search did. Once the
//! import ends, [`Table::compact_index`] rewrites each chunk with its
//! deltas in it, so that every lookup of a later search is one read.
//!
//! What it guarantees: the same entries (every search answers as before;
//! `sesame table check` decodes every chunk); a store cut off in the
//! middle keeps some chunks merged and the rest as they were, both valid.
//! What the store learns: nothing new (the entries it held, in other
//! chunks). Over a server nothing is merged: the server keeps its store's
//! layout, and its searches read the chunks as they lie
//! (`docs/storage.md`, "Packed entries").
//!
//! Test: `sesame_store`'s `compacting_merges_deltas_so_a_lookup_is_one_probe`
//! (`crates/sesame-store/tests/packed.rs`) and, through a table,
//! `an_import_leaves_no_delta_beside_the_keyword_chunks`.
//!
//! [`Packed::compact`]: sesame_store::packed::Packed::compact

use super::Table;
use crate::error::Result;

impl Table {
    /// Merges the keyword index's packed deltas into their chunks (see
    /// the module documentation); how many chunks were rewritten (none
    /// over a server).
    pub fn compact_index(&mut self) -> Result<usize> {
        self.rows.compact_entries()
    }
}
