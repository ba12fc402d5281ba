//! A redb file whose header says "closed cleanly" while the file is longer
//! than the header's layout, and how the store has redb repair it.
//!
//! redb's repair on open (after a crash) ends with a commit that marks the
//! header clean and, when the last region has free pages at its end,
//! shrinks the layout the header records; the file itself is truncated to
//! the new length only after that commit is on disk. A process killed
//! between the two (a `sesame` command killed while it opens a store that
//! an earlier kill left to repair) leaves a header marked clean over a
//! longer file. redb 2.6 opens such a file with its "needs recovery" state
//! set but runs no repair (the header says none is needed), and then fails
//! an assertion on the first transaction it ends: every open panics. The
//! store marks such a header "recovery required" before redb opens the
//! file, so redb runs its full repair (page checksums checked, allocator
//! state rebuilt from the last commit), as after any crash.
//!
//! Test: `a_clean_header_over_a_longer_file_is_recovered` (tests/redb.rs).

use std::io;

use redb::StorageBackend;

/// Offsets in redb's file header (file format 2 and 3; redb 2.6), after the
/// 9-byte magic number that `check_magic` has already seen.
const GOD_BYTE: usize = 9;
const PAGE_SIZE: usize = 12;
const REGION_HEADER_PAGES: usize = 16;
const REGION_MAX_DATA_PAGES: usize = 20;
const NUM_FULL_REGIONS: usize = 24;
const TRAILING_REGION_DATA_PAGES: usize = 28;
const FIELDS_END: usize = 32;
/// The flag in the god byte that says the file must be repaired on open.
const RECOVERY_REQUIRED: u8 = 2;

/// Whether the header of the redb file behind `file` is marked clean
/// while the file is longer than the header's layout (see the module
/// docs). A header whose fields make no sense gives `false`: redb's own
/// checks deal with it.
fn clean_over_longer_file(file: &dyn StorageBackend) -> io::Result<bool> {
    let len = file.len()?;
    if len < FIELDS_END as u64 {
        return Ok(false);
    }
    let head = file.read(0, FIELDS_END)?;
    if head[GOD_BYTE] & RECOVERY_REQUIRED != 0 {
        return Ok(false);
    }
    let field = |at: usize| {
        let mut bytes = [0; 4];
        bytes.copy_from_slice(&head[at..at + 4]);
        u64::from(u32::from_le_bytes(bytes))
    };
    let page = field(PAGE_SIZE);
    let region_header = field(REGION_HEADER_PAGES);
    let full_region = (region_header + field(REGION_MAX_DATA_PAGES)).saturating_mul(page);
    let trailing = match field(TRAILING_REGION_DATA_PAGES) {
        0 => 0,
        pages => (region_header + pages).saturating_mul(page),
    };
    // The header page, the full regions, then the partial one (redb's
    // `DatabaseLayout::len`).
    let layout_len = page
        .saturating_add(field(NUM_FULL_REGIONS).saturating_mul(full_region))
        .saturating_add(trailing);
    Ok(layout_len < len)
}

/// Marks the header of the redb file behind `file` "recovery required"
/// (and syncs it) where it is marked clean over a longer file; returns
/// whether it did. Only the flag changes: the commit slots, with their
/// checksums, stay as they are.
pub(crate) fn require_repair_if_longer(file: &dyn StorageBackend) -> io::Result<bool> {
    if !clean_over_longer_file(file)? {
        return Ok(false);
    }
    let god = file.read(GOD_BYTE as u64, 1)?[0];
    file.write(GOD_BYTE as u64, &[god | RECOVERY_REQUIRED])?;
    file.sync_data(false)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::fs::OpenOptions;
    use std::path::Path;

    use redb::backends::FileBackend;
    use sesame_core::{Store, WriteBatch};

    use super::*;
    use crate::RedbStore;

    fn mark(path: &Path) -> bool {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        require_repair_if_longer(&FileBackend::new(file).unwrap()).unwrap()
    }

    /// Only a header marked clean over a longer file is marked, once: a
    /// cleanly closed store (grown over several batches) keeps its header,
    /// so its next open runs no repair.
    #[test]
    fn only_a_clean_header_over_a_longer_file_is_marked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.redb");
        {
            let store = RedbStore::open(&path).unwrap();
            for round in 0..4u32 {
                let mut batch = WriteBatch::new();
                for i in 0..2000u32 {
                    batch.put(
                        [round.to_be_bytes(), i.to_be_bytes()].concat(),
                        vec![1; 300],
                    );
                }
                store.write(batch).unwrap();
            }
        }
        let before = std::fs::read(&path).unwrap();
        assert!(!mark(&path), "a cleanly closed store was marked");
        assert_eq!(std::fs::read(&path).unwrap(), before);
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(before.len() as u64 + 8 * 4096).unwrap();
        drop(file);
        assert!(mark(&path), "the longer file was not marked");
        assert!(!mark(&path), "marked twice");
        let after = std::fs::read(&path).unwrap();
        assert_eq!(after[GOD_BYTE], before[GOD_BYTE] | RECOVERY_REQUIRED);
        assert_eq!(after[..GOD_BYTE], before[..GOD_BYTE]);
        assert_eq!(after[GOD_BYTE + 1..before.len()], before[GOD_BYTE + 1..]);
    }
}
