//! A dynamic scheme's add sends each full pending intent on a thread of
//! its own while it prepares the next one. Whatever the sending thread
//! meets, the guarantees of a serial add hold: an intent is saved before
//! it is sent, the next one only once the last is completed, and an
//! interrupted add run again leaves every file in the index exactly once.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use sesame_client::{insecure, ClientError, EmbeddedBackend, Profile, Session, DEFAULT_INDEX};
use sesame_core::{Params, Store, WriteOp};
use sesame_store::faulty::FaultyStore;

const PASS: &str = "pw";
/// Six full intents and a last one of two documents.
const FILES: usize = 26;
const PER_INTENT: usize = 4;
const INTENTS: usize = FILES.div_ceil(PER_INTENT);

/// Documents of intent `n` (from 1).
fn intent_documents(n: usize) -> usize {
    PER_INTENT.min(FILES - (n - 1) * PER_INTENT)
}

/// Schemes whose updates are prepared without reading the server (FAST
/// one document at a time, Aura in batches), so that every full intent
/// is sent behind.
const SCHEMES: [&str; 3] = ["fast", "aura", "uedsse"];

/// Which thread wrote each index write, in order; the index write
/// numbered `refuse` (from 1) is refused.
struct Watched {
    store: Arc<FaultyStore>,
    threads: Arc<Mutex<Vec<String>>>,
}

fn watched(refuse: usize) -> Watched {
    let store = Arc::new(FaultyStore::new());
    let threads = Arc::new(Mutex::new(Vec::new()));
    let (logged, seen) = (Arc::clone(&threads), Arc::new(AtomicUsize::new(0)));
    store.on_write(move |batch| {
        let index = batch.ops().iter().any(|op| match op {
            WriteOp::Put { key, .. } | WriteOp::Delete { key } => key.starts_with(b"i/"),
        });
        if index {
            if seen.fetch_add(1, Ordering::SeqCst) + 1 == refuse {
                return Err(sesame_core::Error::StoreFull(
                    "write: No space left on device (os error 28)".into(),
                ));
            }
            let name = std::thread::current().name().unwrap_or("").to_owned();
            logged.lock().unwrap().push(name);
        }
        Ok(())
    });
    Watched { store, threads }
}

fn profile(dir: &Path, scheme: &str) -> Profile {
    Profile::create_with_kdf(
        dir.join("p"),
        PASS,
        scheme,
        &Params::new(),
        insecure::fast_kdf(),
    )
    .unwrap()
}

fn session(p: &Profile, w: &Watched) -> Session {
    let store: Arc<dyn Store> = w.store.clone();
    let mut s = p
        .session_with(DEFAULT_INDEX, Box::new(EmbeddedBackend::over(store)))
        .unwrap();
    s.set_documents_per_intent(PER_INTENT);
    s
}

/// `FILES` files, each with a word of its own and words shared by groups;
/// the plaintext answer of every word.
fn corpus(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    fs::create_dir_all(dir).unwrap();
    let mut oracle: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for i in 0..FILES {
        let path = dir.join(format!("f{i:02}.txt"));
        let text = format!("all group{} doc{i}", i % 5);
        fs::write(&path, &text).unwrap();
        for w in text.split_whitespace() {
            oracle
                .entry(w.to_owned())
                .or_default()
                .insert(path.to_string_lossy().into_owned());
        }
    }
    oracle
}

/// Nothing of a completed intent is left: no intent file in the profile,
/// no answers kept in the store.
fn nothing_pending_left(dir: &Path, w: &Watched, what: &str) {
    let intents = dir
        .join("p/indexes")
        .join(format!("{DEFAULT_INDEX}.intents"));
    let files = fs::read_dir(&intents).unwrap().count();
    assert_eq!(files, 0, "{what}: intent files left in {intents:?}");
    let kept = w.store.inner().scan_prefix(b"r/").unwrap();
    assert!(kept.is_empty(), "{what}: {} kept answers", kept.len());
}

fn check(s: &mut Session, oracle: &BTreeMap<String, BTreeSet<String>>, what: &str) {
    let listed: Vec<String> = s
        .documents()
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|d| d.path)
        .collect();
    assert_eq!(listed.len(), FILES, "{what}: the listing");
    for (word, paths) in oracle {
        let found: Vec<String> = s
            .search(word)
            .unwrap()
            .into_iter()
            .map(|d| d.path)
            .collect();
        let set: BTreeSet<String> = found.iter().cloned().collect();
        assert_eq!(set.len(), found.len(), "{what}: {word} found twice");
        assert_eq!(&set, paths, "{what}: search {word}");
    }
}

#[test]
fn full_intents_are_sent_on_their_own_thread() {
    for scheme in SCHEMES {
        let tmp = tempfile::tempdir().unwrap();
        let p = profile(tmp.path(), scheme);
        let oracle = corpus(&tmp.path().join("c"));
        let w = watched(usize::MAX);
        let mut s = session(&p, &w);
        s.add_documents(&[tmp.path().join("c")], &mut |_| {})
            .unwrap();
        let threads = w.threads.lock().unwrap().clone();
        // One commit per intent: the full ones sent behind, the last
        // (not full) at the end of the add, on the calling thread.
        assert_eq!(threads.len(), INTENTS, "{scheme}: {threads:?}");
        let (last, behind) = threads.split_last().unwrap();
        assert!(
            behind.iter().all(|t| t == "sesame-send"),
            "{scheme}: {threads:?}"
        );
        assert_ne!(last, "sesame-send", "{scheme}");
        check(&mut s, &oracle, scheme);
        nothing_pending_left(tmp.path(), &w, scheme);
    }
}

#[test]
fn a_refused_send_behind_fails_the_add_and_the_next_run_completes_it() {
    for scheme in SCHEMES {
        for refuse in [1, 2, INTENTS] {
            let what = format!("{scheme}, index write {refuse} refused");
            let tmp = tempfile::tempdir().unwrap();
            let p = profile(tmp.path(), scheme);
            let oracle = corpus(&tmp.path().join("c"));
            let w = watched(refuse);
            let failed = session(&p, &w).add_documents(&[tmp.path().join("c")], &mut |_| {});
            match failed {
                Err(ClientError::Unacknowledged { .. }) => {}
                other => panic!("{what}: {other:?}"),
            }
            // The intents before the refused one are in the index; the
            // refused one is still pending and completed first; the
            // files after it were never saved as an intent.
            let mut s = session(&p, &w);
            let report = s
                .add_documents(&[tmp.path().join("c")], &mut |_| {})
                .unwrap();
            assert_eq!(
                report.resumed,
                intent_documents(refuse),
                "{what}: {report:?}"
            );
            let before: usize = (1..=refuse).map(intent_documents).sum();
            assert_eq!(report.added.len(), FILES - before, "{what}: {report:?}");
            check(&mut s, &oracle, &what);
            nothing_pending_left(tmp.path(), &w, &what);
        }
    }
}
