//! An add stores its documents on another thread while it builds or
//! updates the index. Whatever the timing, no index entry that names a
//! document reaches the store before the document (dynamic schemes), and a
//! rebuilt index is not switched to before its documents are stored
//! (static schemes); a failure to store the documents leaves the index as
//! it was.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sesame_client::{insecure, EmbeddedBackend, Profile, Session, DEFAULT_INDEX};
use sesame_core::{IoCounts, Params, Result, Store, WriteBatch, WriteOp};
use sesame_store::MemoryStore;

const PASS: &str = "pw";

/// A memory store whose document writes are slow (so that the index is
/// ready to be written long before them), and fail while `fail_documents`
/// is set. It logs each applied write: whether it held documents.
#[derive(Default)]
struct SlowDocuments {
    inner: MemoryStore,
    fail_documents: AtomicBool,
    log: Mutex<Vec<bool>>,
}

fn holds_documents(batch: &WriteBatch) -> bool {
    batch.ops().iter().any(|op| match op {
        WriteOp::Put { key, .. } | WriteOp::Delete { key } => key.starts_with(b"d/"),
    })
}

impl SlowDocuments {
    fn documents_first(&self, batch: &WriteBatch) -> Result<bool> {
        let documents = holds_documents(batch);
        if documents {
            std::thread::sleep(Duration::from_millis(300));
            if self.fail_documents.load(Ordering::SeqCst) {
                return Err(sesame_core::Error::StoreFull(
                    "write: No space left on device (os error 28)".into(),
                ));
            }
        }
        Ok(documents)
    }

    fn logged(&self, documents: bool) {
        self.log.lock().unwrap().push(documents);
    }

    /// The keys of the index (everything but documents and replay
    /// records), with their values.
    fn index(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.inner.scan_prefix(b"i/").unwrap()
    }
}

impl Store for SlowDocuments {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner.get_many(keys)
    }
    fn write(&self, batch: WriteBatch) -> Result<()> {
        let documents = self.documents_first(&batch)?;
        self.inner.write(batch)?;
        self.logged(documents);
        Ok(())
    }
    fn write_if(&self, expect: &[(&[u8], Option<&[u8]>)], batch: &WriteBatch) -> Result<bool> {
        let documents = self.documents_first(batch)?;
        let written = self.inner.write_if(expect, batch)?;
        if written {
            self.logged(documents);
        }
        Ok(written)
    }
    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.inner.scan_prefix(prefix)
    }
    fn scan_from(
        &self,
        prefix: &[u8],
        from: &[u8],
        descending: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.inner.scan_from(prefix, from, descending, limit)
    }
    fn ordered_probes(&self) -> bool {
        self.inner.ordered_probes()
    }
    fn io_counts(&self) -> IoCounts {
        self.inner.io_counts()
    }
    fn backend(&self) -> &'static str {
        "slow-documents"
    }
}

fn session(p: &Profile, store: &Arc<SlowDocuments>) -> Session {
    let store: Arc<dyn Store> = store.clone();
    p.session_with(DEFAULT_INDEX, Box::new(EmbeddedBackend::over(store)))
        .unwrap()
}

fn paths(s: &mut Session, word: &str) -> Vec<String> {
    let mut found: Vec<String> = s
        .search(word)
        .unwrap()
        .into_iter()
        .map(|d| {
            let path = std::path::PathBuf::from(d.path);
            path.file_name().unwrap().to_string_lossy().into_owned()
        })
        .collect();
    found.sort();
    found
}

#[test]
fn documents_are_stored_before_the_index_names_them() {
    for scheme in ["fast", "aura", "pibas", "2lev"] {
        let tmp = tempfile::tempdir().unwrap();
        let p = Profile::create_with_kdf(
            tmp.path().join("p"),
            PASS,
            scheme,
            &Params::new(),
            insecure::fast_kdf(),
        )
        .unwrap();
        let store = Arc::new(SlowDocuments::default());
        let first = tmp.path().join("first");
        fs::create_dir_all(&first).unwrap();
        fs::write(first.join("old.txt"), "common older").unwrap();
        session(&p, &store)
            .add_documents(&[&first], &mut |_| {})
            .unwrap();
        let more = tmp.path().join("more");
        fs::create_dir_all(&more).unwrap();
        for i in 0..200 {
            fs::write(more.join(format!("f{i:03}.txt")), format!("common word{i}")).unwrap();
        }

        // The documents cannot be stored: the add fails, and the index
        // (its entries, and what a search finds) is as it was.
        let before = store.index();
        store.fail_documents.store(true, Ordering::SeqCst);
        let err = session(&p, &store).add_documents(&[&more], &mut |_| {});
        assert!(
            err.is_err(),
            "{scheme}: the add went on without its documents"
        );
        store.fail_documents.store(false, Ordering::SeqCst);
        if !matches!(scheme, "pibas" | "2lev") {
            // A static scheme may have written the generation it did not
            // switch to (the next rebuild drops it).
            let after = store.index();
            assert!(
                after == before,
                "{scheme}: index entries without documents ({} pairs before, {} after)",
                before.len(),
                after.len()
            );
        }
        let mut s = session(&p, &store);
        assert_eq!(paths(&mut s, "common"), ["old.txt"], "{scheme}");
        drop(s);

        // Stored slowly, the documents still come first: every index write
        // of the add follows the last document write.
        store.log.lock().unwrap().clear();
        session(&p, &store)
            .add_documents(&[&more], &mut |_| {})
            .unwrap();
        let log = store.log.lock().unwrap().clone();
        let last_document = log.iter().rposition(|&d| d).expect("documents written");
        if !matches!(scheme, "pibas" | "2lev") {
            let first_index = log.iter().position(|&d| !d).expect("index written");
            assert!(
                first_index > last_document,
                "{scheme}: an index write before the documents: {log:?}"
            );
        }
        let mut s = session(&p, &store);
        assert_eq!(paths(&mut s, "common").len(), 201, "{scheme}");
        assert_eq!(paths(&mut s, "word7"), ["f007.txt"], "{scheme}");
        let hit = s.search("word199").unwrap().remove(0);
        assert_eq!(s.get(hit.id).unwrap(), b"common word199", "{scheme}");
    }
}
