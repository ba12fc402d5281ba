//! The client state a server-bound table import uploads grows in
//! proportion to the records imported, not with their square: twice the
//! records upload less than three times the state bytes.
//!
//! `SESAME_IMPORT_SIZES=20000,40000,80000 cargo test -p sesame-client
//! --release --test import_state -- --nocapture` prints the bytes for
//! other sizes (the figures in `docs/client.md`).

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use sesame_client::intercept::{Hook, Intercepted};
use sesame_client::table::import::Format;
use sesame_client::table::{Schema, Table};
use sesame_client::{Backend, IndexRecord, IndexRecordWrite, NetworkBackend, ServerBinding};
use sesame_core::Store;
use sesame_store::MemoryStore;

/// Counts the bytes of the shared state's records a backend writes (the
/// state record and its chunks, in the format before content-named chunks
/// (`s-`) and since (`c-`); not the intents).
struct Counting {
    state_bytes: Arc<AtomicU64>,
}

impl Hook for Counting {
    fn write_records(
        &mut self,
        inner: &mut dyn Backend,
        index: &str,
        writes: Vec<IndexRecordWrite>,
    ) -> sesame_client::Result<Option<Vec<IndexRecord>>> {
        let bytes: usize = writes
            .iter()
            .filter(|w| w.name == "state" || w.name.starts_with("s-") || w.name.starts_with("c-"))
            .filter_map(|w| w.value.as_ref().map(Vec::len))
            .sum();
        self.state_bytes.fetch_add(bytes as u64, Ordering::SeqCst);
        inner.write_records(index, writes)
    }
}

fn schema() -> Schema {
    Schema::from_toml(
        r#"
key = "id"
equality = "fast"
[fields.id]
type = "integer"
[fields.carrier]
type = "string"
index = ["equality"]
[fields.origin]
type = "string"
index = ["equality"]
"#,
    )
    .unwrap()
}

/// The state bytes a fresh table's import of `n` records uploads.
fn state_bytes_of_import(binding: &ServerBinding, n: usize) -> u64 {
    let tmp = tempfile::tempdir().unwrap();
    let p = support::profile_at(&tmp.path().join("p"), "fast");
    let mut binding = binding.clone();
    binding.index_prefix = format!("n{n}-");
    p.bind_server(&binding).unwrap();
    let counted = Arc::new(AtomicU64::new(0));
    let backend = Box::new(Intercepted::new(
        Box::new(NetworkBackend::connect(&binding).unwrap()),
        Counting {
            state_bytes: counted.clone(),
        },
    ));
    let mut table = Table::create_with(&p, "t", schema(), backend).unwrap();
    let file = tmp.path().join("rows.csv");
    let mut text = String::from("id,carrier,origin\n");
    for i in 0..n {
        text.push_str(&format!("{i},C{},O{}\n", i % 16, i % 3));
    }
    std::fs::write(&file, text).unwrap();
    let before = counted.load(Ordering::SeqCst);
    let report = table.import(&file, Format::Csv, &mut |_| {}).unwrap();
    assert_eq!(report.insert.inserted, n);
    counted.load(Ordering::SeqCst) - before
}

#[test]
fn twice_the_records_upload_less_than_three_times_the_state() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (server, binding) = support::serve(store, |_| {});
    let sizes: Vec<usize> = std::env::var("SESAME_IMPORT_SIZES")
        .ok()
        .map(|s| s.split(',').map(|n| n.trim().parse().unwrap()).collect())
        .unwrap_or_else(|| vec![8_000, 16_000]);
    let mut bytes = Vec::new();
    for &n in &sizes {
        let b = state_bytes_of_import(&binding, n);
        println!(
            "{n} records: {b} bytes of state uploaded ({:.1} MiB)",
            b as f64 / (1 << 20) as f64
        );
        bytes.push(b);
    }
    for (w, n) in bytes.windows(2).zip(sizes.windows(2)) {
        if let ([a, b], [na, nb]) = (w, n) {
            if *nb == 2 * *na {
                assert!(
                    *b < 3 * *a,
                    "{nb} records uploaded {b} bytes of state, {na} records {a}: more than 3x"
                );
            }
        }
    }
    server.shutdown().unwrap();
}
