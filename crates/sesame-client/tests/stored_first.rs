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
use sesame_core::{Params, Store, WriteOp};
use sesame_store::faulty::FaultyStore;

const PASS: &str = "pw";

/// A store whose document writes are slow (so that the index is ready to
/// be written long before them), and fail while `fail_documents` is set.
/// It logs each write it lets through: whether it held documents.
struct SlowDocuments {
    store: Arc<FaultyStore>,
    fail_documents: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<bool>>>,
}

impl SlowDocuments {
    fn new() -> Self {
        let store = Arc::new(FaultyStore::new());
        let fail_documents = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (fail, logged) = (Arc::clone(&fail_documents), Arc::clone(&log));
        store.on_write(move |batch| {
            let documents = batch.ops().iter().any(|op| match op {
                WriteOp::Put { key, .. } | WriteOp::Delete { key } => key.starts_with(b"d/"),
            });
            if documents {
                std::thread::sleep(Duration::from_millis(300));
                if fail.load(Ordering::SeqCst) {
                    return Err(sesame_core::Error::StoreFull(
                        "write: No space left on device (os error 28)".into(),
                    ));
                }
            }
            logged.lock().unwrap().push(documents);
            Ok(())
        });
        SlowDocuments {
            store,
            fail_documents,
            log,
        }
    }

    /// The index's pairs.
    fn index(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.store.inner().scan_prefix(b"i/").unwrap()
    }
}

fn session(p: &Profile, slow: &SlowDocuments) -> Session {
    let store: Arc<dyn Store> = slow.store.clone();
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
        let store = SlowDocuments::new();
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
