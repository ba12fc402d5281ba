//! Integrity of the SDK under faults: every scheme, a store that fails
//! writes at random points (not applied, or applied with the answer lost),
//! the same command interrupted again and again, then completed; `add` as
//! a sync; removals; searches that write; a second process; missing
//! profile parts; `check` finding damage. Every result is compared with a
//! plaintext oracle, and every path must be listed exactly once.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sesame_client::{
    insecure, ClientError, EmbeddedBackend, Profile, Session, DEFAULT_INDEX, SERVER_FILE,
    STORE_FILE,
};
use sesame_core::{Params, Store};
use sesame_store::faulty::{Fault, FaultyStore};

const PASS: &str = "pw";

/// Files with known words; the oracle maps each word to its paths.
struct Corpus {
    root: PathBuf,
    files: BTreeMap<String, String>,
}

impl Corpus {
    fn new(root: &Path, n: usize) -> Self {
        fs::create_dir_all(root).unwrap();
        let mut c = Corpus {
            root: root.to_path_buf(),
            files: BTreeMap::new(),
        };
        for i in 0..n {
            c.write(i, &format!("all group{} doc{i}", i % 4));
        }
        c
    }

    fn write(&mut self, i: usize, text: &str) {
        let path = self.root.join(format!("f{i:03}.txt"));
        fs::write(&path, text).unwrap();
        self.files
            .insert(path.to_string_lossy().into_owned(), text.to_owned());
    }

    fn remove(&mut self, i: usize) -> String {
        let path = self.root.join(format!("f{i:03}.txt"));
        fs::remove_file(&path).unwrap();
        let p = path.to_string_lossy().into_owned();
        self.files.remove(&p);
        p
    }

    fn oracle(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut o: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (path, text) in &self.files {
            for w in text.split_whitespace() {
                o.entry(w.to_owned()).or_default().insert(path.clone());
            }
        }
        o
    }
}

/// Mode 1 refuses the write, mode 2 applies it and loses the answer.
fn fault(mode: u8) -> Fault {
    if mode == 1 {
        Fault::Refused
    } else {
        Fault::AnswerLost
    }
}

fn profile(dir: &Path, scheme: &str) -> Profile {
    Profile::create_with_kdf(dir, PASS, scheme, &Params::new(), insecure::fast_kdf()).unwrap()
}

/// Documents per pending intent: an add of the test's 40 files makes six
/// intents, the full ones sent behind while the next is prepared.
const PER_INTENT: usize = 7;

fn session(p: &Profile, store: &Arc<FaultyStore>) -> Session {
    let store: Arc<dyn Store> = store.clone();
    let mut s = p
        .session_with(DEFAULT_INDEX, Box::new(EmbeddedBackend::over(store)))
        .unwrap();
    s.set_documents_per_intent(PER_INTENT);
    s
}

/// Every path listed once, the listing equal to the corpus, and every
/// word's search equal to the oracle (ids listed once, paths once).
fn check_exact(p: &Profile, store: &Arc<FaultyStore>, corpus: &Corpus, what: &str) {
    let mut s = session(p, store);
    let listed: Vec<String> = s
        .documents()
        .unwrap_or_else(|e| panic!("{e}"))
        .into_iter()
        .map(|d| d.path)
        .collect();
    let unique: BTreeSet<&String> = listed.iter().collect();
    assert_eq!(unique.len(), listed.len(), "{what}: a path listed twice");
    let expected: BTreeSet<&String> = corpus.files.keys().collect();
    assert_eq!(unique, expected, "{what}: the listing");
    for (word, paths) in corpus.oracle() {
        let hits = s.search(&word).unwrap();
        let found: Vec<String> = hits.into_iter().map(|d| d.path).collect();
        let set: BTreeSet<String> = found.iter().cloned().collect();
        assert_eq!(set.len(), found.len(), "{what}: {word} found twice");
        assert_eq!(set, paths, "{what}: search {word}");
    }
}

/// The schemes to drive: every registered keyword scheme that updates
/// (dynamic) or rebuilds (static) an index of documents.
fn schemes() -> Vec<&'static str> {
    sesame_sse::schemes()
        .into_iter()
        .filter(|s| s.descriptor.kind.is_sse())
        .map(|s| s.descriptor.name)
        .collect()
}

/// The same add interrupted at random points again and again (failures
/// before and after the write is applied), then run to completion: every
/// file exactly once, for every scheme.
#[test]
fn repeated_interruptions_add_every_file_exactly_once() {
    for scheme in schemes() {
        let mut rng = StdRng::seed_from_u64(0x5e5a_3e00);
        for round in 0..3 {
            let tmp = tempfile::tempdir().unwrap();
            let p = profile(&tmp.path().join("p"), scheme);
            let store = Arc::new(FaultyStore::new());
            let mut corpus = Corpus::new(&tmp.path().join("c"), 40);
            // Part of it first, completed.
            session(&p, &store)
                .add_documents(&[corpus.root.join("f000.txt")], &mut |_| {})
                .unwrap();
            for _ in 0..4 {
                store.fail(fault(rng.gen_range(1..=2)), rng.gen_range(0..12));
                let _ = session(&p, &store).add_documents(&[&corpus.root], &mut |_| {});
                store.heal();
            }
            // Change and add files between interruptions too.
            corpus.write(3, "all changed doc3 fresh");
            corpus.write(40, "all newcomer");
            store.fail(fault(rng.gen_range(1..=2)), rng.gen_range(0..6));
            let _ = session(&p, &store).add_documents(&[&corpus.root], &mut |_| {});
            store.heal();
            let r = session(&p, &store)
                .add_documents(&[&corpus.root], &mut |_| {})
                .unwrap_or_else(|e| panic!("{scheme} round {round}: {e}"));
            assert!(
                r.added.len() + r.replaced.len() + r.unchanged >= 41,
                "{r:?}"
            );
            check_exact(&p, &store, &corpus, &format!("{scheme} round {round}"));
        }
    }
}

/// `add` is a sync: nothing twice, changed files replaced, removals by
/// path and id, for every scheme.
#[test]
fn add_is_a_sync_and_rm_removes() {
    for scheme in schemes() {
        let tmp = tempfile::tempdir().unwrap();
        let p = profile(&tmp.path().join("p"), scheme);
        let store = Arc::new(FaultyStore::new());
        let mut corpus = Corpus::new(&tmp.path().join("c"), 12);
        let r = session(&p, &store)
            .add_documents(&[&corpus.root], &mut |_| {})
            .unwrap();
        assert_eq!(r.added.len(), 12, "{scheme}");
        let r = session(&p, &store)
            .add_documents(&[&corpus.root], &mut |_| {})
            .unwrap();
        assert_eq!(
            (r.added.len(), r.unchanged, r.pairs),
            (0, 12, 0),
            "{scheme}"
        );
        check_exact(&p, &store, &corpus, scheme);

        corpus.write(2, "all rewritten");
        corpus.write(5, "all group1 doc5 extra");
        let gone = corpus.remove(7);
        let r = session(&p, &store)
            .add_documents(&[&corpus.root], &mut |_| {})
            .unwrap();
        assert_eq!((r.replaced.len(), r.removed.len(), r.unchanged), (2, 2, 9));
        let mut s = session(&p, &store);
        s.remove_documents(&[gone]).unwrap();
        let id = s.documents().unwrap_or_else(|e| panic!("{e}"))[0].id;
        let first = s.documents().unwrap_or_else(|e| panic!("{e}"))[0]
            .path
            .clone();
        s.remove_documents(&[id.to_string()]).unwrap();
        drop(s);
        fs::remove_file(&first).unwrap();
        corpus.files.remove(&first);
        check_exact(&p, &store, &corpus, &format!("{scheme} after sync"));
        // The removed documents are gone from the store too.
        let mut s = session(&p, &store);
        let report = s.check(&mut |_| {}).unwrap();
        assert_eq!(report.problems, Vec::<String>::new(), "{scheme}");
        assert_eq!(report.documents, corpus.files.len());
    }
}

/// A search that writes on the server, interrupted before or after its
/// writes are applied, leaves the index searchable; the next command
/// completes it.
#[test]
fn interrupted_searches_leave_the_index_searchable() {
    let mut rng = StdRng::seed_from_u64(7);
    let only = std::env::var("SESAME_TEST_SCHEMES").ok();
    for scheme in schemes().into_iter().filter(|s| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|x| x == *s))
    }) {
        let tmp = tempfile::tempdir().unwrap();
        let p = profile(&tmp.path().join("p"), scheme);
        let store = Arc::new(FaultyStore::new());
        let corpus = Corpus::new(&tmp.path().join("c"), 10);
        session(&p, &store)
            .add_documents(&[&corpus.root], &mut |_| {})
            .unwrap();
        for _ in 0..6 {
            store.fail(fault(rng.gen_range(1..=2)), rng.gen_range(0..3));
            let _ = session(&p, &store).search("group1");
            store.heal();
        }
        check_exact(&p, &store, &corpus, scheme);
    }
}

#[test]
fn a_second_session_on_an_index_is_refused_until_the_first_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let p = profile(&tmp.path().join("p"), "fast");
    let first = p.session(DEFAULT_INDEX).unwrap();
    let again = Profile::open(tmp.path().join("p"), PASS).unwrap();
    let err = again.session(DEFAULT_INDEX).unwrap_err();
    assert!(matches!(err, ClientError::ProfileBusy(_)), "{err:?}");
    assert!(err.to_string().contains("in use by another Sesame process"));
    drop(first);
    again.session(DEFAULT_INDEX).unwrap();
}

#[test]
fn a_missing_part_is_an_error_and_nothing_is_recreated() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let p = profile(&dir, "fast");
    let doc = tmp.path().join("a.txt");
    fs::write(&doc, "alpha").unwrap();
    p.session(DEFAULT_INDEX)
        .unwrap()
        .add_documents(&[&doc], &mut |_| {})
        .unwrap();
    // An embedded profile without its store.
    fs::rename(dir.join(STORE_FILE), tmp.path().join("moved")).unwrap();
    let err = p.session(DEFAULT_INDEX).unwrap_err();
    assert!(matches!(err, ClientError::ProfileIncomplete(_)), "{err:?}");
    assert!(err.to_string().contains(STORE_FILE), "{err}");
    assert!(!dir.join(STORE_FILE).exists(), "the store was recreated");
    fs::rename(tmp.path().join("moved"), dir.join(STORE_FILE)).unwrap();
    let hits = p.session(DEFAULT_INDEX).unwrap().search("alpha").unwrap();
    assert_eq!(hits.len(), 1);
    // The client state of the default index.
    let state = dir.join("indexes/default.state");
    fs::rename(&state, tmp.path().join("state")).unwrap();
    let err = p.session(DEFAULT_INDEX).unwrap_err();
    assert!(err.to_string().contains("default.state"), "{err}");
    assert!(!state.exists());
}

#[test]
fn a_server_profile_without_its_binding_does_not_turn_embedded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let p = profile(&dir, "fast");
    // Bound to a server (never reached here): the header now says so.
    p.bind_server(&sesame_client::ServerBinding {
        url: "https://127.0.0.1:9".into(),
        token: "sst1_x".into(),
        ca_pem: None,
        index_prefix: String::new(),
    })
    .unwrap();
    fs::remove_file(dir.join(SERVER_FILE)).unwrap();
    let reopened = Profile::open(&dir, PASS).unwrap();
    let err = reopened.session(DEFAULT_INDEX).unwrap_err();
    assert!(err.to_string().contains(SERVER_FILE), "{err}");
    assert!(!dir.join(SERVER_FILE).exists());
}

#[test]
fn check_finds_a_damaged_document_and_a_lost_index_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let p = profile(&tmp.path().join("p"), "fast");
    let store = Arc::new(FaultyStore::new());
    let corpus = Corpus::new(&tmp.path().join("c"), 8);
    session(&p, &store)
        .add_documents(&[&corpus.root], &mut |_| {})
        .unwrap();
    let report = session(&p, &store).check(&mut |_| {}).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!((report.documents, report.verified), (8, 8));
    assert!(report.searches >= 8);

    // One flipped byte in a stored document.
    let docs = store.scan_prefix(b"d/").unwrap();
    let (key, mut blob) = docs[3].clone();
    blob[10] ^= 1;
    store.inner().put(&key, &blob).unwrap();
    let report = session(&p, &store).check(&mut |_| {}).unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(
        report.problems[0].contains("corrupt"),
        "{:?}",
        report.problems
    );

    // Every index entry gone: searches find nothing.
    let tmp2 = tempfile::tempdir().unwrap();
    let p2 = profile(&tmp2.path().join("p"), "fast");
    let store2 = Arc::new(FaultyStore::new());
    session(&p2, &store2)
        .add_documents(&[&corpus.root], &mut |_| {})
        .unwrap();
    for (k, _) in store2.scan_prefix(b"i/").unwrap() {
        store2.inner().delete(&k).unwrap();
    }
    let report = session(&p2, &store2).check(&mut |_| {}).unwrap();
    assert!(
        report.problems.iter().any(|p| p.contains("does not find")),
        "{:?}",
        report.problems
    );
}

/// Index entries of `generation` in the store, without the generation's
/// prefix: the scheme's own (label, value) pairs.
fn labels(store: &FaultyStore, generation: u64) -> BTreeSet<(Vec<u8>, Vec<u8>)> {
    let prefix = format!("i/{DEFAULT_INDEX}/{generation}/");
    store
        .inner()
        .scan_prefix(prefix.as_bytes())
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k[prefix.len()..].to_vec(), v))
        .collect()
}

fn generation_keys(store: &FaultyStore, generation: u64) -> usize {
    labels(store, generation).len()
}

/// `rekey`, for every scheme: a new generation under fresh scheme keys,
/// the old one gone, every search as before. A rekey whose writes fail
/// (before or after they apply) leaves the old index answering, and
/// running it again completes it.
#[test]
fn rekey_moves_every_scheme_to_fresh_keys_and_survives_failures() {
    for s in sesame_sse::schemes() {
        let name = s.descriptor.name;
        let tmp = tempfile::tempdir().unwrap();
        let corpus = Corpus::new(&tmp.path().join("files"), 12);
        let p = profile(&tmp.path().join("p"), name);
        let store = Arc::new(FaultyStore::new());
        {
            let mut sess = session(&p, &store);
            sess.add_documents(&[&corpus.root], &mut |_| {}).unwrap();
        }
        check_exact(&p, &store, &corpus, name);
        let before = fs::read(p.state_path(DEFAULT_INDEX)).unwrap();
        let g0 = session(&p, &store).generation();
        let old_labels = labels(&store, g0);
        assert!(
            !old_labels.is_empty(),
            "{name}: no index entries in generation {g0}"
        );

        // A failing rekey (nothing applied, then applied but unanswered).
        for mode in [Fault::Refused, Fault::AnswerLost] {
            let mut sess = session(&p, &store);
            store.fail(mode, 0);
            assert!(sess.rekey(&mut |_| {}).is_err(), "{name} {mode:?}");
            store.heal();
            drop(sess);
            assert_eq!(session(&p, &store).generation(), g0, "{name} {mode:?}");
            check_exact(&p, &store, &corpus, &format!("{name} after a failed rekey"));
        }

        let mut sess = session(&p, &store);
        assert_eq!(sess.rekey(&mut |_| {}).unwrap(), 12, "{name}");
        let g1 = sess.generation();
        drop(sess);
        assert!(g1 > g0, "{name}");
        assert_eq!(
            generation_keys(&store, g0),
            0,
            "{name}: old generation left"
        );
        // Under fresh keys no entry repeats an old one (label and value),
        // but for one piece of public metadata some schemes keep (the
        // server's public key, a document count).
        let new_labels = labels(&store, g1);
        // KPR12 keeps its free list and the list's head in clear
        // (docs/schemes/kpr12.md), under Merkle nodes: structure that no
        // key touches, laid out by a random permutation, so some of it can
        // repeat by chance. Only key-dependent entries count.
        let keyed = |(k, v): &&(Vec<u8>, Vec<u8>)| {
            name != "kpr12" || !(k.first() == Some(&b'n') || matches!(v.first(), Some(b'F' | b'M')))
        };
        let shared = old_labels.intersection(&new_labels).filter(keyed).count();
        assert!(
            shared <= 1,
            "{name}: {shared} of {} entries unchanged by the rekey",
            new_labels.len()
        );
        // The state (which holds the scheme keys) changed.
        assert_ne!(
            fs::read(p.state_path(DEFAULT_INDEX)).unwrap(),
            before,
            "{name}"
        );
        check_exact(&p, &store, &corpus, &format!("{name} after rekey"));
    }
}

/// A search completes what an interrupted add left, in the same pass, and
/// says how many documents that was; a second search has nothing left.
#[test]
fn a_search_completes_an_interrupted_add_and_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let p = profile(&tmp.path().join("p"), "fast");
    let store = Arc::new(FaultyStore::new());
    let corpus = Corpus::new(&tmp.path().join("c"), 8);
    // The write that would apply the update is applied but reported lost:
    // the intent stays pending.
    store.fail(Fault::AnswerLost, 1);
    let interrupted = session(&p, &store).add_documents(&[&corpus.root], &mut |_| {});
    store.heal();
    assert!(interrupted.is_err());
    let mut s = session(&p, &store);
    let pending = s.pending_documents();
    assert!(pending > 0, "nothing was left pending");
    let query = sesame_client::parse_query("all").unwrap();
    let hits = s.answer(&query).unwrap();
    assert_eq!(hits.resumed, pending);
    assert_eq!(
        hits.documents.len(),
        s.documents().unwrap_or_else(|e| panic!("{e}")).len()
    );
    assert_eq!(s.pending_documents(), 0);
    assert_eq!(s.answer(&query).unwrap().resumed, 0);
}
