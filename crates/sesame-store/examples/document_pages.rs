//! How many redb pages a profile's documents take, in pieces (the layout
//! of `sesame_store::documents`) and whole (the earlier layout, one value
//! per document).
//!
//! ```text
//! cargo run --release -p sesame-store --example document_pages -- PROFILE/store.redb [d/default/]
//! ```
//!
//! Reads every document under the prefix from a copy of the store (run it
//! on a profile no process has open), then writes them again into two
//! fresh redb files, in batches of 64 documents in identifier order as an
//! add does, once in each layout, and prints the sealed bytes and the
//! pages each layout takes.

use std::sync::Arc;

use sesame_core::{Store, WriteBatch};
use sesame_store::{documents, RedbStore};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: document_pages STORE.redb [PREFIX]")?;
    let prefix = args.next().unwrap_or_else(|| "d/default/".into());
    let prefix = prefix.as_bytes();
    let tmp = tempfile::tempdir()?;
    let copy = tmp.path().join("copy.redb");
    std::fs::copy(&path, &copy)?;
    let source = RedbStore::open(&copy)?;
    let ids = documents::list(&source, prefix)?;
    let docs: Vec<(u64, Vec<u8>)> = ids
        .iter()
        .zip(documents::read(&source, prefix, &ids)?)
        .map(|(&id, doc)| doc.map(|d| (id, d)).ok_or("a listed document is missing"))
        .collect::<Result<_, _>>()?;
    let sealed: usize = docs.iter().map(|(_, d)| d.len()).sum();
    println!(
        "{} documents, {} sealed bytes ({:.1} KB on average)",
        docs.len(),
        sealed,
        sealed as f64 / docs.len().max(1) as f64 / 1e3
    );
    for layout in ["pieces", "whole"] {
        let file = tmp.path().join(format!("{layout}.redb"));
        let store = Arc::new(RedbStore::open(&file)?);
        for group in docs.chunks(64) {
            let mut batch = WriteBatch::new();
            if layout == "pieces" {
                documents::put(
                    &mut batch,
                    prefix,
                    group.iter().map(|(id, b)| (*id, b.as_slice())),
                );
            } else {
                for (id, blob) in group {
                    let mut key = prefix.to_vec();
                    key.push(b'b');
                    key.extend_from_slice(&id.to_be_bytes());
                    batch.put(key, blob.clone());
                }
            }
            store.write(batch)?;
        }
        let space = store.space()?;
        let pages = space.allocated_pages * space.page_size;
        println!(
            "{layout:>6}: {} pairs, {} bytes of pages in use, {:.3}x the sealed bytes",
            store.scan_prefix(prefix)?.len(),
            pages,
            pages as f64 / sealed as f64
        );
    }
    Ok(())
}
