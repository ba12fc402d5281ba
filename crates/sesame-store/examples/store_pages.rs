//! Where the pages of a store's large values go: every stored pair by
//! area (a packed view's chunks and deltas by their first byte), and the
//! large values by size and by the power-of-two page run that a redb leaf
//! holding one alone takes (its 4-byte header, 8 bytes of offsets, key
//! and value, rounded up to 4 KiB times a power of two). Reads a copy of
//! the store, as `profile_space` does.
//!
//! ```text
//! cargo run --release -p sesame-store --example store_pages -- PROFILE/store.redb
//! ```

use std::collections::BTreeMap;

use sesame_core::Store;
use sesame_store::RedbStore;

/// Per area and kind: pairs, bytes of keys and values, bytes of the runs
/// of large values stored alone, and the large values by size in KB.
type Areas = BTreeMap<(String, &'static str), (u64, u64, u64, BTreeMap<usize, u64>)>;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: store_pages STORE.redb")?;
    let tmp = tempfile::tempdir()?;
    let copy = tmp.path().join("copy.redb");
    std::fs::copy(&path, &copy)?;
    let store = RedbStore::open(&copy)?;
    let mut areas = Areas::new();
    for (k, v) in store.scan_prefix(b"")? {
        let cut = k.iter().position(|&b| b == b'#').map(|p| p + 1);
        let (area, kind) = match (cut, v.first()) {
            (Some(p), Some(1 | 3)) => (
                String::from_utf8_lossy(&k[..p.min(12)]).into_owned(),
                "chunk",
            ),
            (Some(p), Some(2)) => (
                String::from_utf8_lossy(&k[..p.min(12)]).into_owned(),
                "delta",
            ),
            _ => (
                String::from_utf8_lossy(&k[..k.len().min(6)]).into_owned(),
                if v.len() > 1000 { "large" } else { "small" },
            ),
        };
        let leaf = 4 + 8 + k.len() + v.len();
        let mut run = 4096;
        while run < leaf {
            run *= 2;
        }
        let e = areas.entry((area, kind)).or_default();
        e.0 += 1;
        e.1 += (k.len() + v.len()) as u64;
        if v.len() > 1000 {
            e.2 += run as u64;
            *e.3.entry(v.len() / 1024).or_default() += 1;
        }
    }
    for ((area, kind), (pairs, bytes, runs, sizes)) in &areas {
        println!(
            "{area:<14} {kind:<6} {pairs:>9} pairs {:>9.3} MB, large values alone in {:>8.3} MB",
            *bytes as f64 / 1e6,
            *runs as f64 / 1e6
        );
        if !sizes.is_empty() {
            let shown: Vec<String> = sizes.iter().map(|(kb, n)| format!("{kb}K:{n}")).collect();
            println!("    {}", shown.join(" "));
        }
    }
    Ok(())
}
