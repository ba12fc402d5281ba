//! End-to-end tests of the client SDK over the embedded redb store.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

mod support;

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

/// A PiBas profile at `TMP/p` holding the corpus's folder `a`: the
/// scratch directory, the profile's directory, the folder and the profile.
fn pibas_with_a() -> (tempfile::TempDir, PathBuf, PathBuf, Profile) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let (a, _, _) = corpus(tmp.path());
    let p = create(&dir, "pibas");
    support::add(&p, &a);
    (tmp, dir, a, p)
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
    assert!(session
        .documents()
        .unwrap_or_else(|e| panic!("{e}"))
        .is_empty());
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
    let (_tmp, dir, _, p) = pibas_with_a();
    drop(p);
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
    let (tmp, dir, _, p) = pibas_with_a();
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
    assert_eq!(
        p.session(DEFAULT_INDEX)
            .unwrap()
            .documents()
            .unwrap_or_else(|e| panic!("{e}"))
            .len(),
        1
    );
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
    assert_eq!(s.documents().unwrap_or_else(|e| panic!("{e}")).len(), 4);
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
        assert_eq!(
            sesame_store::documents::list(&store, b"d/default/")
                .unwrap()
                .len(),
            4
        );
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
    let (_tmp, dir, _, p) = pibas_with_a();
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
    let (tmp, dir, a, p) = pibas_with_a();
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

/// The profile's files but its header (and the header lock).
fn all_but_the_header(dir: &Path) -> Snapshot {
    let mut s = snapshot(dir);
    s.0.retain(|p, _| {
        let name = p.file_name().unwrap().to_string_lossy();
        name != "profile.json" && name != "profile.lock"
    });
    s
}

/// One document added to a fresh profile of `format` (3, or 2 as earlier
/// builds made them); returns the profile directory.
fn profile_with_a_document(root: &Path, format: u8) -> PathBuf {
    let dir = root.join("p");
    let (a, _, _) = corpus(root);
    let p = match format {
        3 => create(&dir, "fast"),
        _ => Profile::create_format2_for_tests(
            &dir,
            PASS,
            "fast",
            &Params::new(),
            insecure::fast_kdf(),
        )
        .unwrap(),
    };
    assert_eq!(p.format(), format!("sesame-profile/{format}"));
    support::add(&p, &a);
    dir
}

fn finds_the_fox(dir: &Path, pass: &str) {
    let p = Profile::open(dir, pass).unwrap();
    let mut s = p.session(DEFAULT_INDEX).unwrap();
    assert_eq!(paths(&s.search("fox").unwrap()), ["a.txt"]);
}

/// A new profile's master key is random and sealed in the header; a
/// passphrase change rewrites the header only, after which the old
/// passphrase fails and the new one reads everything.
#[test]
fn the_passphrase_changes_and_nothing_else_does() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = profile_with_a_document(tmp.path(), 3);
    let header = fs::read_to_string(dir.join("profile.json")).unwrap();
    assert!(header.contains("\"wrapped\"") && !header.contains("\"check\""));
    let before = all_but_the_header(&dir);
    let p = Profile::open(&dir, PASS).unwrap();
    assert!(matches!(
        p.change_passphrase("", insecure::fast_kdf()),
        Err(ClientError::InvalidArgument(_))
    ));
    p.change_passphrase("a new passphrase", insecure::fast_kdf())
        .unwrap();
    assert_eq!(all_but_the_header(&dir), before);
    assert_ne!(
        fs::read_to_string(dir.join("profile.json")).unwrap(),
        header
    );
    assert!(matches!(
        Profile::open(&dir, PASS),
        Err(ClientError::WrongPassphrase)
    ));
    finds_the_fox(&dir, "a new passphrase");
    // And back, from a profile opened with the new one.
    Profile::open(&dir, "a new passphrase")
        .unwrap()
        .change_passphrase(PASS, insecure::fast_kdf())
        .unwrap();
    finds_the_fox(&dir, PASS);
}

/// A format-2 profile (master key = Argon2id output) opens as before; a
/// passphrase change moves it to format 3 with the same master key, so its
/// states and documents need no change.
#[test]
fn a_format2_profile_moves_to_format3_on_a_passphrase_change() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = profile_with_a_document(tmp.path(), 2);
    finds_the_fox(&dir, PASS);
    let before = all_but_the_header(&dir);
    let p = Profile::open(&dir, PASS).unwrap();
    assert_eq!(p.format(), "sesame-profile/2");
    p.change_passphrase("moved", insecure::fast_kdf()).unwrap();
    assert_eq!(all_but_the_header(&dir), before);
    let moved = Profile::open(&dir, "moved").unwrap();
    assert_eq!(moved.format(), "sesame-profile/3");
    assert_eq!(moved.id(), p.id());
    finds_the_fox(&dir, "moved");
    assert!(matches!(
        Profile::open(&dir, PASS),
        Err(ClientError::WrongPassphrase)
    ));
}

/// Every header field is bound to the sealed master key: a header whose
/// store kind, salt or cost was edited does not open, and says the
/// passphrase is wrong rather than opening the wrong way.
#[test]
fn an_edited_format3_header_does_not_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = profile_with_a_document(tmp.path(), 3);
    let path = dir.join("profile.json");
    let good = fs::read_to_string(&path).unwrap();
    for (from, to) in [("\"embedded\"", "\"server\""), ("\"t\": 1", "\"t\": 2")] {
        assert!(good.contains(from), "{from}");
        fs::write(&path, good.replacen(from, to, 1)).unwrap();
        assert!(
            matches!(Profile::open(&dir, PASS), Err(ClientError::WrongPassphrase)),
            "{from} -> {to}"
        );
    }
    // A format-3 header with a key check instead of a wrapped key.
    fs::write(&path, good.replacen("\"wrapped\"", "\"check\"", 1)).unwrap();
    assert!(matches!(
        Profile::open(&dir, PASS),
        Err(ClientError::ProfileCorrupt { .. })
    ));
    fs::write(&path, &good).unwrap();
    finds_the_fox(&dir, PASS);
}

/// A profile opened before another process changed the passphrase cannot
/// write the old header back.
#[test]
fn a_stale_profile_cannot_undo_a_passphrase_change() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = profile_with_a_document(tmp.path(), 3);
    let first = Profile::open(&dir, PASS).unwrap();
    let second = Profile::open(&dir, PASS).unwrap();
    second
        .change_passphrase("second", insecure::fast_kdf())
        .unwrap();
    let err = first
        .change_passphrase("first", insecure::fast_kdf())
        .unwrap_err();
    assert!(err.to_string().contains("run the command again"), "{err}");
    finds_the_fox(&dir, "second");
}

/// Like ssh with a private key, a profile whose directory, header or
/// index state other users can reach is refused before the passphrase is
/// used, with the command that fixes it; `create` makes an existing
/// directory private.
#[cfg(unix)]
#[test]
fn a_profile_others_can_reach_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    create(&dir, "pibas");
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    let state = dir.join("indexes/default.state");
    for (path, open, fix) in [
        (dir.join("profile.json"), 0o644, "chmod 600"),
        (state.clone(), 0o640, "chmod 600"),
        (dir.clone(), 0o755, "chmod 700"),
        (dir.join("indexes"), 0o711, "chmod 700"),
    ] {
        let private = mode(&path);
        fs::set_permissions(&path, fs::Permissions::from_mode(open)).unwrap();
        let err = Profile::open(&dir, PASS).unwrap_err();
        assert!(matches!(err, ClientError::TooOpen { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains(fix) && text.contains(&format!("{open:03o}")),
            "{text}"
        );
        fs::set_permissions(&path, fs::Permissions::from_mode(private)).unwrap();
        Profile::open(&dir, PASS).unwrap();
    }
}

/// A profile with the corpus added (embedded, FAST); its directory.
fn profile_with_the_corpus(root: &Path) -> PathBuf {
    let dir = root.join("p");
    let (a, b, notes) = corpus(root);
    let p = create(&dir, "fast");
    p.session(DEFAULT_INDEX)
        .unwrap()
        .add_documents(&[&a, &b, &notes], &mut |_| {})
        .unwrap();
    dir
}

/// What a profile answers: its documents and a few searches.
fn answers(dir: &Path, pass: &str) -> Vec<Vec<String>> {
    let p = Profile::open(dir, pass).unwrap();
    let mut s = p.session(DEFAULT_INDEX).unwrap();
    let mut out = vec![paths(&s.documents().unwrap_or_else(|e| panic!("{e}")))];
    for q in ["fox", "dog", "école", "absent"] {
        out.push(paths(&s.search(q).unwrap()));
    }
    out
}

/// A backup restored into a new directory answers every search as the
/// profile did, passes `check`, and the profile itself is untouched.
#[test]
fn a_restored_backup_answers_as_the_profile_did() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = profile_with_the_corpus(tmp.path());
    let want = answers(&dir, PASS);
    assert_eq!(want[0].len(), 4);
    let before = snapshot(&dir);
    let report = Profile::open(&dir, PASS)
        .unwrap()
        .backup(&tmp.path().join("b"))
        .unwrap();
    assert!(report.files >= 3 && report.bytes > 0, "{report:?}");
    let mut after = snapshot(&dir);
    after.0.retain(|p, _| !p.ends_with("profile.lock"));
    assert_eq!(after, before);
    let restored =
        sesame_client::restore(&tmp.path().join("b"), &tmp.path().join("r"), PASS).unwrap();
    let mut s = restored.session(DEFAULT_INDEX).unwrap();
    let check = s.check(&mut |_| {}).unwrap();
    assert!(check.problems.is_empty(), "{:?}", check.problems);
    assert_eq!(check.verified, 4);
    drop(s);
    assert_eq!(answers(&tmp.path().join("r"), PASS), want);
    // A second backup into a directory that is not empty is refused.
    let err = Profile::open(&dir, PASS)
        .unwrap()
        .backup(&tmp.path().join("b"))
        .unwrap_err();
    assert!(err.to_string().contains("not empty"), "{err}");
}

/// A damaged, altered, incomplete or padded backup is refused before
/// anything is written, naming what is wrong; a wrong passphrase too.
#[cfg(unix)]
#[test]
fn a_damaged_backup_is_refused_and_nothing_is_restored() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = profile_with_the_corpus(tmp.path());
    let good = tmp.path().join("b");
    Profile::open(&dir, PASS).unwrap().backup(&good).unwrap();
    let copy = |name: &str| {
        let to = tmp.path().join(name);
        fs::create_dir(&to).unwrap();
        for (p, bytes) in snapshot(&good).0 {
            let rel = p.strip_prefix(&good).unwrap();
            fs::create_dir_all(to.join(rel).parent().unwrap()).unwrap();
            fs::write(to.join(rel), bytes).unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        for d in [to.clone(), to.join("indexes")] {
            fs::set_permissions(&d, fs::Permissions::from_mode(0o700)).unwrap();
        }
        for (p, _) in snapshot(&to).0 {
            fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        }
        to
    };
    let refused = |backup: &Path, needle: &str, pass: &str| {
        let dest = tmp.path().join("dest");
        let err = sesame_client::restore(backup, &dest, pass).unwrap_err();
        assert!(err.to_string().contains(needle), "{needle}: {err}");
        assert!(!dest.exists(), "{needle}: something was restored");
    };
    let flipped = copy("flipped");
    let state = flipped.join("indexes/default.state");
    let mut bytes = fs::read(&state).unwrap();
    bytes[40] ^= 1;
    fs::write(&state, bytes).unwrap();
    refused(&flipped, "default.state", PASS);

    let altered = copy("altered");
    let manifest = altered.join("backup.json");
    let text = fs::read_to_string(&manifest).unwrap();
    let edited = text.replacen("\"size\": ", "\"size\": 1", 1);
    assert_ne!(edited, text);
    fs::write(&manifest, edited).unwrap();
    refused(&altered, "authentication tag", PASS);

    let incomplete = copy("incomplete");
    fs::remove_file(incomplete.join("backup.json")).unwrap();
    refused(&incomplete, "not a complete Sesame backup", PASS);

    let padded = copy("padded");
    fs::write(padded.join("indexes/extra.state"), b"x").unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(
        padded.join("indexes/extra.state"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    refused(&padded, "files not in the manifest", PASS);

    let err = sesame_client::restore(&good, &tmp.path().join("dest"), "wrong").unwrap_err();
    assert!(matches!(err, ClientError::WrongPassphrase), "{err:?}");
    // The good one restores.
    sesame_client::restore(&good, &tmp.path().join("dest"), PASS).unwrap();
}

/// A backup waits for no one: while a session holds an index it is
/// refused (run it again afterwards), and nothing is created.
#[test]
fn a_backup_during_a_session_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = profile_with_the_corpus(tmp.path());
    let p = Profile::open(&dir, PASS).unwrap();
    let session = p.session(DEFAULT_INDEX).unwrap();
    let err = p.backup(&tmp.path().join("b")).unwrap_err();
    assert!(matches!(err, ClientError::ProfileBusy(_)), "{err:?}");
    assert!(!tmp.path().join("b").exists());
    drop(session);
    p.backup(&tmp.path().join("b")).unwrap();
}

/// A profile made with a key file opens only with the passphrase and that
/// file; a passphrase change keeps the file; the file can be dropped or
/// replaced; a backup restores with it.
#[test]
fn a_key_file_is_needed_as_well_as_the_passphrase() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let (a, _, _) = corpus(tmp.path());
    let key = [7u8; 32];
    let other = [8u8; 32];
    assert!(matches!(
        Profile::create_with_key_file(
            &dir,
            PASS,
            "fast",
            &Params::new(),
            insecure::fast_kdf(),
            b"short"
        ),
        Err(ClientError::InvalidArgument(_))
    ));
    let p = Profile::create_with_key_file(
        &dir,
        PASS,
        "fast",
        &Params::new(),
        insecure::fast_kdf(),
        &key,
    )
    .unwrap();
    support::add(&p, &a);
    drop(p);
    let err = Profile::open(&dir, PASS).unwrap_err();
    assert!(matches!(err, ClientError::KeyFileNeeded(_)), "{err:?}");
    assert!(err.to_string().contains("--key-file"), "{err}");
    assert!(matches!(
        Profile::open_with_key_file(&dir, PASS, Some(&other)),
        Err(ClientError::WrongPassphrase)
    ));
    assert!(matches!(
        Profile::open_with_key_file(&dir, "not it", Some(&key)),
        Err(ClientError::WrongPassphrase)
    ));
    let open = |pass: &str, kf: Option<&[u8]>| {
        let p = Profile::open_with_key_file(&dir, pass, kf).unwrap();
        let mut s = p.session(DEFAULT_INDEX).unwrap();
        assert_eq!(paths(&s.search("fox").unwrap()), ["a.txt"]);
    };
    open(PASS, Some(&key));
    // A passphrase change keeps the key file.
    Profile::open_with_key_file(&dir, PASS, Some(&key))
        .unwrap()
        .change_passphrase("two", insecure::fast_kdf())
        .unwrap();
    assert!(matches!(
        Profile::open(&dir, "two"),
        Err(ClientError::KeyFileNeeded(_))
    ));
    open("two", Some(&key));
    // A backup needs it to restore.
    Profile::open_with_key_file(&dir, "two", Some(&key))
        .unwrap()
        .backup(&tmp.path().join("b"))
        .unwrap();
    assert!(matches!(
        sesame_client::restore(&tmp.path().join("b"), &tmp.path().join("r"), "two"),
        Err(ClientError::KeyFileNeeded(_))
    ));
    sesame_client::restore_with_key_file(
        &tmp.path().join("b"),
        &tmp.path().join("r"),
        "two",
        Some(&key),
    )
    .unwrap();
    // Replaced, then dropped.
    Profile::open_with_key_file(&dir, "two", Some(&key))
        .unwrap()
        .change_key_file("three", insecure::fast_kdf(), Some(&other))
        .unwrap();
    assert!(matches!(
        Profile::open_with_key_file(&dir, "three", Some(&key)),
        Err(ClientError::WrongPassphrase)
    ));
    open("three", Some(&other));
    Profile::open_with_key_file(&dir, "three", Some(&other))
        .unwrap()
        .change_key_file("four", insecure::fast_kdf(), None)
        .unwrap();
    assert!(matches!(
        Profile::open_with_key_file(&dir, "four", Some(&other)),
        Err(ClientError::InvalidArgument(_))
    ));
    open("four", None);
}

/// Files are read on several threads, but the error is the first failing
/// file in the order they are listed, every time, and nothing is added.
#[test]
fn the_first_failing_file_in_order_is_the_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let files = tmp.path().join("files");
    fs::create_dir_all(&files).unwrap();
    for name in ["a.txt", "c.txt", "e.txt"] {
        fs::write(files.join(name), "small words").unwrap();
    }
    // Sparse files over the largest document: nothing is written to disk.
    for name in ["b.big", "d.big"] {
        fs::File::create(files.join(name))
            .unwrap()
            .set_len(sesame_client::MAX_DOCUMENT + 1)
            .unwrap();
    }
    let p = create(&dir, "fast");
    let before = snapshot(&dir);
    for _ in 0..5 {
        let mut s = p.session(DEFAULT_INDEX).unwrap();
        match s.add_documents(&[&files], &mut |_| {}) {
            Err(ClientError::DocumentTooLarge { path, .. }) => {
                assert_eq!(path, files.join("b.big"));
            }
            other => panic!("{other:?}"),
        }
        assert!(s.documents().unwrap_or_else(|e| panic!("{e}")).is_empty());
    }
    let mut after = snapshot(&dir);
    after.0.retain(|p, _| !p.ends_with("default.lock"));
    let mut before_clean = before;
    before_clean.0.retain(|p, _| !p.ends_with("default.lock"));
    assert_eq!(after, before_clean);
}
