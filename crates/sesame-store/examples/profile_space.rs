//! Where the bytes of an embedded profile's store go: the file's length
//! and blocks, redb's pages in use, and the live keys and values by area
//! (each index's documents, its keyword index, the client's own keys).
//!
//! ```text
//! cargo run --release -p sesame-store --example profile_space -- PROFILE/store.redb
//! ```
//!
//! Reads a copy of the store (run it on a profile no process has open),
//! so the profile is left as it is; then vacuums the copy
//! ([`RedbStore::vacuum`], what `sesame compact` does) and prints the
//! same figures again.

use std::collections::BTreeMap;

use sesame_core::Store;
use sesame_store::{documents, RedbStore, Space};

fn print_space(what: &str, s: &Space) {
    let mb = |b: u64| b as f64 / 1e6;
    println!(
        "{what}: file {:.1} MB long, {:.1} MB of blocks, {:.1} MB of pages in use \
         ({} leaf, {} branch), {:.1} MB of keys and values, {:.1} MB unused in pages, \
         {:.1} MB free or ahead of use",
        mb(s.file_bytes),
        mb(s.disk_bytes),
        mb(s.allocated_pages * s.page_size),
        s.leaf_pages,
        s.branch_pages,
        mb(s.stored_bytes),
        mb(s.fragmented_bytes),
        mb(s.free_bytes()),
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: profile_space STORE.redb")?;
    let tmp = tempfile::tempdir()?;
    let copy = tmp.path().join("copy.redb");
    std::fs::copy(&path, &copy)?;
    let store = RedbStore::open(&copy)?;
    print_space("as found", &store.space()?);

    // Live bytes by area: documents (pieces, heads, whole) per index, and
    // the rest by the key's first component.
    let mut areas: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (k, v) in store.scan_prefix(b"")? {
        let area = match k.strip_prefix(b"d/") {
            Some(rest) => {
                let end = rest.iter().position(|&b| b == b'/').unwrap_or(rest.len());
                let prefix = &k[..2 + (end + 1).min(rest.len())];
                let kind = match documents::document_id(prefix, &k) {
                    Some(_) => match k.get(prefix.len()) {
                        Some(b'p') => "piece",
                        Some(b'h') => "head",
                        _ => "whole",
                    },
                    None => "other",
                };
                format!("{} {kind}", String::from_utf8_lossy(prefix))
            }
            None => {
                let end = k.iter().position(|&b| b == b'/').unwrap_or(k.len().min(2));
                String::from_utf8_lossy(&k[..end]).into_owned()
            }
        };
        let e = areas.entry(area).or_default();
        e.0 += 1;
        e.1 += (k.len() + v.len()) as u64;
    }
    for (area, (pairs, bytes)) in &areas {
        println!(
            "  {area:<24} {pairs:>9} pairs {:>10.3} MB",
            *bytes as f64 / 1e6
        );
    }
    let (_, after) = store.vacuum()?;
    print_space("vacuumed", &after);
    Ok(())
}
