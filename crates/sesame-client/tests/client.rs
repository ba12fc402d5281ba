//! End-to-end tests of the client SDK over the embedded redb store.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sesame_client::{
    insecure, ClientError, EmbeddedBackend, Phase, Profile, Progress, DEFAULT_INDEX, STORE_FILE,
};
use sesame_core::{Params, Store};
use sesame_store::{MemoryStore, RedbStore};

const PASS: &str = "correct horse battery staple";

fn create(dir: &Path, scheme: &str) -> Profile {
    Profile::create_with_kdf(dir, PASS, scheme, &Params::new(), insecure::fast_kdf()).unwrap()
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> Snapshot {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), fs::read(&p).unwrap());
            }
        }
    }
    Snapshot(out)
}

/// The files of a directory; equality failures name the files only.
#[derive(PartialEq, Eq)]
struct Snapshot(BTreeMap<PathBuf, Vec<u8>>);

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(p, b)| (p, b.len())))
            .finish()
    }
}

/// A corpus: two loose files and a directory with a nested directory.
fn corpus(root: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let a = root.join("a.txt");
    let b = root.join("b.md");
    let dir = root.join("notes");
    fs::create_dir_all(dir.join("deep")).unwrap();
    fs::write(&a, "The quick brown fox. ZEBRAMARKER").unwrap();
    fs::write(&b, "A lazy dog; the fox sleeps.").unwrap();
    fs::write(dir.join("c.txt"), "Größe ÉCOLE naïve dog").unwrap();
    fs::write(dir.join("deep/d.txt"), b"binary \xff\xfe dog bytes").unwrap();
    (a, b, dir)
}

fn paths(hits: &[sesame_client::DocumentInfo]) -> Vec<String> {
    let mut p: Vec<String> = hits
        .iter()
        .map(|h| {
            Path::new(&h.path)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    p.sort();
    p
}

#[test]
fn create_then_open_round_trips() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let created = create(&dir, "pibas");
    assert!(Profile::exists(&dir));
    let opened = Profile::open(&dir, PASS).unwrap();
    assert_eq!(created.id(), opened.id());
    assert_eq!(opened.kdf(), insecure::fast_kdf());
    assert_eq!(opened.indexes().unwrap(), vec![DEFAULT_INDEX.to_owned()]);
    let session = opened.session(DEFAULT_INDEX).unwrap();
    assert_eq!(session.scheme().name, "pibas");
    assert!(session.documents().is_empty());
    // The header is JSON with the KDF parameters and no key material.
    let header = fs::read_to_string(dir.join("profile.json")).unwrap();
    assert!(header.contains("argon2id") && header.contains("\"m_kib\": 8"));

    assert!(matches!(
        Profile::create_with_kdf(&dir, PASS, "pibas", &Params::new(), insecure::fast_kdf()),
        Err(ClientError::ProfileExists(_))
    ));
}

#[test]
fn default_kdf_params_are_moderate() {
    let k = sesame_client::KdfParams::default();
    assert_eq!((k.m_kib, k.t, k.p), (64 * 1024, 3, 1));
}

#[test]
fn wrong_passphrase_is_clear_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let (a, _, _) = corpus(tmp.path());
    {
        let p = create(&dir, "pibas");
        p.session(DEFAULT_INDEX)
            .unwrap()
            .add_documents(&[&a], &mut |_| {})
            .unwrap();
    }
    let before = snapshot(&dir);
    let err = Profile::open(&dir, "not the passphrase").unwrap_err();
    assert!(matches!(err, ClientError::WrongPassphrase), "{err:?}");
    assert_eq!(err.to_string(), "wrong passphrase");
    assert_eq!(snapshot(&dir), before);
}

#[test]
fn missing_profile_and_bad_arguments_are_clear() {
    let tmp = tempfile::tempdir().unwrap();
    let err = Profile::open(tmp.path(), PASS).unwrap_err();
    assert!(matches!(err, ClientError::NoProfile(_)));
    assert!(err.to_string().starts_with("no Sesame profile in "));

    let err = Profile::create_with_kdf(
        tmp.path().join("x"),
        PASS,
        "nope",
        &Params::new(),
        insecure::fast_kdf(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown scheme \"nope\" (known: pibas, 2lev)".replace(
            "pibas, 2lev",
            &sesame_sse::schemes()
                .iter()
                .map(|s| s.descriptor.name)
                .collect::<Vec<_>>()
                .join(", ")
        )
    );
    // Nothing was written for a refused profile.
    assert!(!tmp.path().join("x").exists());

    let bad = Params::parse("bogus=1").unwrap();
    let err = Profile::create_with_kdf(
        tmp.path().join("y"),
        PASS,
        "pibas",
        &bad,
        insecure::fast_kdf(),
    )
    .unwrap_err();
    assert!(matches!(err, ClientError::InvalidArgument(_)), "{err:?}");
    assert!(err.to_string().contains("bogus"));

    let err = Profile::create_with_kdf(
        tmp.path().join("z"),
        "",
        "pibas",
        &Params::new(),
        insecure::fast_kdf(),
    )
    .unwrap_err();
    assert!(matches!(err, ClientError::InvalidArgument(_)));
}

#[test]
fn tampered_state_is_clear_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let (a, _, _) = corpus(tmp.path());
    let p = create(&dir, "pibas");
    p.session(DEFAULT_INDEX)
        .unwrap()
        .add_documents(&[&a], &mut |_| {})
        .unwrap();
    let state = p.state_path(DEFAULT_INDEX);
    let good = fs::read(&state).unwrap();
    for at in [0, 9, good.len() / 2, good.len() - 1] {
        let mut bad = good.clone();
        bad[at] ^= 0x01;
        fs::write(&state, &bad).unwrap();
        let before = snapshot(&dir);
        let err = p.session(DEFAULT_INDEX).unwrap_err();
        assert!(
            matches!(err, ClientError::StateCorrupt { .. }),
            "byte {at}: {err:?}"
        );
        assert!(err.to_string().contains("corrupt or was tampered with"));
        assert_eq!(snapshot(&dir), before);
    }
    // Truncated, and swapped in from another profile.
    fs::write(&state, &good[..good.len() - 3]).unwrap();
    assert!(matches!(
        p.session(DEFAULT_INDEX),
        Err(ClientError::StateCorrupt { .. })
    ));
    let other = create(&tmp.path().join("q"), "pibas");
    fs::copy(other.state_path(DEFAULT_INDEX), &state).unwrap();
    assert!(matches!(
        p.session(DEFAULT_INDEX),
        Err(ClientError::StateCorrupt { .. })
    ));
    // Restored, it works again.
    fs::write(&state, &good).unwrap();
    assert_eq!(p.session(DEFAULT_INDEX).unwrap().documents().len(), 1);
}

fn add_search_get(scheme: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let (a, b, notes) = corpus(tmp.path());
    let p = create(&dir, scheme);
    let mut s = p.session(DEFAULT_INDEX).unwrap();
    let mut seen = Vec::new();
    let report = s
        .add_documents(&[&a, &b, &notes], &mut |pr: Progress| seen.push(pr))
        .unwrap();
    assert_eq!(report.added.len(), 4);
    assert_eq!(report.indexed, 4);
    // Static schemes rebuild their index; dynamic ones update it, unless
    // their updates cannot be prepared ahead (then they rebuild too).
    assert_eq!(report.rebuilt, s.rebuilds());
    assert!(!s.is_static() || s.rebuilds());
    assert_eq!(
        report.added.iter().map(|d| d.id).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    assert!(seen
        .iter()
        .any(|p| p.phase == Phase::Reading && p.done == p.total));
    assert!(seen.iter().any(|p| p.phase == Phase::Indexing));

    assert_eq!(paths(&s.search("fox").unwrap()), ["a.txt", "b.md"]);
    assert_eq!(paths(&s.search("DOG").unwrap()), ["b.md", "c.txt", "d.txt"]);
    assert_eq!(paths(&s.search("école").unwrap()), ["c.txt"]);
    assert_eq!(paths(&s.search("Größe").unwrap()), ["c.txt"]);
    assert!(s.search("absent").unwrap().is_empty());
    assert!(matches!(s.search(" !? "), Err(ClientError::EmptyQuery)));
    assert!(matches!(
        s.search("two words"),
        Err(ClientError::InvalidQuery(_))
    ));

    let fox = s.search("quick").unwrap();
    assert_eq!(s.get(fox[0].id).unwrap(), fs::read(&a).unwrap());
    let bin = s.search("binary").unwrap();
    assert_eq!(s.get(bin[0].id).unwrap(), b"binary \xff\xfe dog bytes");
    assert!(matches!(s.get(99), Err(ClientError::UnknownDocument(99))));
    drop(s);

    // A new session (a restart) sees the same index.
    let p = Profile::open(&dir, PASS).unwrap();
    let mut s = p.session(DEFAULT_INDEX).unwrap();
    assert_eq!(paths(&s.search("fox").unwrap()), ["a.txt", "b.md"]);
    assert_eq!(s.documents().len(), 4);
}

#[test]
fn add_search_get_pibas() {
    add_search_get("pibas");
}

#[test]
fn add_search_get_2lev() {
    add_search_get("2lev");
}

#[test]
fn every_registered_scheme_indexes_and_finds() {
    for scheme in sesame_sse::schemes() {
        add_search_get(scheme.descriptor.name);
    }
}

#[test]
fn static_index_is_rebuilt_and_keeps_old_documents() {
    for scheme in ["pibas", "2lev"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        let (a, b, notes) = corpus(tmp.path());
        let p = create(&dir, scheme);
        {
            let mut s = p.session(DEFAULT_INDEX).unwrap();
            s.add_documents(&[&a], &mut |_| {}).unwrap();
            assert_eq!(paths(&s.search("fox").unwrap()), ["a.txt"]);
        }
        {
            // Remnants of a rebuild that crashed: entries of generation 2,
            // which the state never switched to.
            let store = RedbStore::open(dir.join(STORE_FILE)).unwrap();
            store.put(b"i/default/2/junk", b"left over").unwrap();
        }
        let mut s = Profile::open(&dir, PASS)
            .unwrap()
            .session(DEFAULT_INDEX)
            .unwrap();
        let mut fetched = 0;
        let report = s
            .add_documents(&[&b, &notes], &mut |pr: Progress| {
                if pr.phase == Phase::Fetching {
                    fetched = pr.total;
                }
            })
            .unwrap();
        assert!(report.rebuilt);
        assert_eq!(report.added.len(), 3);
        assert_eq!(report.indexed, 4);
        assert_eq!(fetched, 1, "the one stored document is fetched back");
        assert_eq!(paths(&s.search("fox").unwrap()), ["a.txt", "b.md"]);
        assert_eq!(paths(&s.search("zebramarker").unwrap()), ["a.txt"]);
        assert_eq!(paths(&s.search("dog").unwrap()), ["b.md", "c.txt", "d.txt"]);
        drop(s);

        // Only the newest generation of the index is left in the store.
        let store = RedbStore::open(dir.join(STORE_FILE)).unwrap();
        let keys = store.scan_prefix(b"i/default/").unwrap();
        assert!(!keys.is_empty());
        assert!(keys.iter().all(|(k, _)| k.starts_with(b"i/default/2/")));
        assert!(keys
            .iter()
            .all(|(k, _)| k.as_slice() != b"i/default/2/junk"));
        assert_eq!(store.scan_prefix(b"d/default/").unwrap().len(), 4);
    }
}

#[test]
fn documents_and_index_are_stored_encrypted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let (a, b, notes) = corpus(tmp.path());
    let p = create(&dir, "pibas");
    p.session(DEFAULT_INDEX)
        .unwrap()
        .add_documents(&[&a, &b, &notes], &mut |_| {})
        .unwrap();
    let marker = b"zebramarker";
    let upper = b"ZEBRAMARKER";
    let contains = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);

    let store = RedbStore::open(dir.join(STORE_FILE)).unwrap();
    let all = store.scan_prefix(b"").unwrap();
    assert!(all.len() > 4);
    for (k, v) in &all {
        for needle in [&marker[..], &upper[..], b"a.txt", b"quick"] {
            assert!(!contains(k, needle) && !contains(v, needle));
        }
    }
    drop(store);
    // Nor anywhere in the profile's files, state included.
    for (path, bytes) in snapshot(&dir).0 {
        for needle in [&marker[..], &upper[..], b"a.txt"] {
            assert!(
                !contains(&bytes, needle),
                "{} holds plaintext",
                path.display()
            );
        }
    }
}

#[test]
fn tampered_document_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let (a, _, _) = corpus(tmp.path());
    let p = create(&dir, "pibas");
    p.session(DEFAULT_INDEX)
        .unwrap()
        .add_documents(&[&a], &mut |_| {})
        .unwrap();
    {
        let store = RedbStore::open(dir.join(STORE_FILE)).unwrap();
        let (k, mut v) = store.scan_prefix(b"d/default/").unwrap().remove(0);
        v[20] ^= 1;
        store.put(&k, &v).unwrap();
    }
    let mut s = p.session(DEFAULT_INDEX).unwrap();
    let err = s.get(1).unwrap_err();
    assert!(matches!(err, ClientError::DocumentCorrupt(1)), "{err:?}");
}

#[test]
fn missing_file_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let (a, _, _) = corpus(tmp.path());
    let p = create(&dir, "pibas");
    p.session(DEFAULT_INDEX)
        .unwrap()
        .add_documents(&[&a], &mut |_| {})
        .unwrap();
    let before = snapshot(&dir);
    let mut s = p.session(DEFAULT_INDEX).unwrap();
    let err = s
        .add_documents(&[a.clone(), tmp.path().join("missing.txt")], &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, ClientError::Io { .. }), "{err:?}");
    assert!(err
        .to_string()
        .contains("missing.txt: no such file or directory"));
    drop(s);
    assert_eq!(snapshot(&dir), before);
}

#[test]
fn adding_the_profiles_parent_skips_the_profile() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, _, _) = corpus(tmp.path());
    let p = create(&tmp.path().join(".sesame"), "pibas");
    let mut s = p.session(DEFAULT_INDEX).unwrap();
    let report = s.add_documents(&[tmp.path()], &mut |_| {}).unwrap();
    assert_eq!(report.added.len(), 4);
    assert!(report.added.iter().all(|d| !d.path.contains(".sesame")));
}

#[test]
fn empty_directory_adds_nothing_and_empty_files_are_documents() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let p = create(&tmp.path().join("p"), "2lev");
    let mut s = p.session(DEFAULT_INDEX).unwrap();
    let r = s.add_documents(&[&empty], &mut |_| {}).unwrap();
    assert!(r.added.is_empty() && !r.rebuilt);
    assert!(s.search("anything").unwrap().is_empty());
    fs::write(empty.join("zero"), "").unwrap();
    let r = s.add_documents(&[&empty], &mut |_| {}).unwrap();
    assert_eq!((r.added.len(), r.keywords), (1, 0));
    assert_eq!(s.get(1).unwrap(), b"");
}

#[test]
fn indexes_are_separate_and_any_backend_works() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, _) = corpus(tmp.path());
    let p = create(&tmp.path().join("p"), "pibas");
    p.create_index("second", "2lev", &Params::new()).unwrap();
    assert!(matches!(
        p.create_index("second", "2lev", &Params::new()),
        Err(ClientError::IndexExists(_))
    ));
    assert!(matches!(
        p.create_index("Bad/Name", "2lev", &Params::new()),
        Err(ClientError::InvalidArgument(_))
    ));
    assert!(matches!(
        p.session("nope"),
        Err(ClientError::UnknownIndex(_))
    ));
    assert_eq!(p.indexes().unwrap(), ["default", "second"]);

    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut one = p
        .session_with("default", Box::new(EmbeddedBackend::over(store.clone())))
        .unwrap();
    let meter_span = one.meter().span();
    one.add_documents(&[&a], &mut |_| {}).unwrap();
    let mut two = p
        .session_with("second", Box::new(EmbeddedBackend::over(store.clone())))
        .unwrap();
    assert_eq!(two.scheme().name, "2lev");
    two.add_documents(&[&b], &mut |_| {}).unwrap();
    assert_eq!(paths(&one.search("fox").unwrap()), ["a.txt"]);
    assert_eq!(paths(&two.search("fox").unwrap()), ["b.md"]);
    assert!(meter_span.finish().rounds > 0);
}

#[test]
fn the_store_is_locked_while_a_session_is_open() {
    let tmp = tempfile::tempdir().unwrap();
    let p = create(&tmp.path().join("p"), "pibas");
    let _s = p.session(DEFAULT_INDEX).unwrap();
    let err = p.session(DEFAULT_INDEX).unwrap_err();
    assert!(matches!(err, ClientError::ProfileBusy(_)), "{err:?}");
}

#[test]
fn tokenizer_cases() {
    use sesame_client::tokenize;
    assert_eq!(tokenize("Größe ÉCOLE naïve"), ["größe", "école", "naïve"]);
    assert_eq!(tokenize("well... (yes!) well?"), ["well", "yes"]);
    assert_eq!(tokenize("R2-D2 v1.0 42 42"), ["r2", "d2", "v1", "0", "42"]);
    assert_eq!(tokenize("dup Dup DUP"), ["dup"]);
}
