//! Two devices of one profile against one server index: the client state
//! is shared through the server (compare-and-swap), so adds and searches
//! from both, in turn or at the same time, lose nothing and reuse no
//! identifier or label; a tampered or rolled-back shared state is refused.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use sesame_client::{ClientError, Profile, DEFAULT_INDEX};
use sesame_core::{Store, WriteOp};
use sesame_store::faulty::FaultyStore;

type Oracle = BTreeMap<String, BTreeSet<String>>;

type Setup = support::Setup<FaultyStore>;

fn serve(max_message: usize) -> Setup {
    support::setup(Arc::new(FaultyStore::new()), |c| {
        c.max_message_bytes = max_message;
    })
}

/// The first device: a profile bound to the server, its default index
/// created there and its state shared by a first session.
fn first_device(s: &Setup, scheme: &str) -> Profile {
    let p = support::server_profile(&s.binding, &s.tmp.path().join("laptop"), scheme);
    let session = p.session(DEFAULT_INDEX).unwrap();
    assert!(session.is_shared(), "{scheme}: the server keeps the state");
    p
}

/// The second device, joined by the index's name on the server.
fn second_device(s: &Setup) -> Profile {
    let remote = format!("{}{DEFAULT_INDEX}", s.binding.index_prefix);
    let mut binding = s.binding.clone();
    binding.index_prefix = String::new();
    let (p, index) =
        Profile::join(s.tmp.path().join("phone"), "pw", None, &binding, &remote).unwrap();
    assert_eq!(index, DEFAULT_INDEX);
    p
}

/// Writes `n` files under `dir/sub` (each with keywords `all`, `mod<i%3>`,
/// `doc<i>` and the device's word) and adds them to the oracle.
fn files(dir: &Path, sub: &str, first: usize, n: usize, oracle: &mut Oracle) -> PathBuf {
    let root = dir.join(sub);
    std::fs::create_dir_all(&root).unwrap();
    for i in first..first + n {
        let words = [
            "all".to_string(),
            format!("mod{}", i % 3),
            format!("doc{i}"),
            sub.split('-').next().unwrap().to_owned(),
        ];
        support::write_indexed_file(&root, i, words.into(), oracle);
    }
    root
}

fn found(p: &Profile, word: &str) -> BTreeSet<String> {
    p.session(DEFAULT_INDEX)
        .unwrap()
        .search(word)
        .unwrap()
        .into_iter()
        .map(|d| d.path)
        .collect()
}

fn check(p: &Profile, oracle: &Oracle, what: &str) {
    for (w, paths) in oracle {
        assert_eq!(&found(p, w), paths, "{what}: keyword {w}");
    }
}

/// Every stored value of the index's generations, to check that no label
/// (key) was written twice: a reused counter would overwrite an entry.
fn index_entries(s: &Setup) -> usize {
    // `e/` for a scheme whose entries are written once (spread), else `i/`;
    // per generation, where packed entries are unpacked.
    let mut count = 0;
    for letter in ["i", "e"] {
        let index = format!("{letter}/alice/{}{DEFAULT_INDEX}/", s.binding.index_prefix);
        let mut generations = std::collections::BTreeSet::new();
        for (k, _) in s.store.scan_prefix(index.as_bytes()).unwrap() {
            let rest = &k[index.len()..];
            let end = rest.iter().position(|&b| b == b'/').map_or(0, |p| p + 1);
            generations.insert(k[..index.len() + end].to_vec());
        }
        for generation in generations {
            count += sesame_store::packed::pairs_under(s.store.as_ref(), &generation)
                .unwrap()
                .len();
        }
    }
    count
}

#[test]
fn two_devices_take_turns_and_each_sees_the_others_documents() {
    for scheme in ["fast", "pibas", "uedsse", "sdd"] {
        let s = serve(sesame_server::serve::DEFAULT_MAX_MESSAGE);
        let laptop = first_device(&s, scheme);
        let phone = second_device(&s);
        let mut oracle = Oracle::new();

        // Sessions open on both at once, used in turn: each command sees
        // what the other device did before it.
        let mut sessions = [
            laptop.session(DEFAULT_INDEX).unwrap(),
            phone.session(DEFAULT_INDEX).unwrap(),
        ];
        for round in 0..3 {
            // Each device adds, then the other searches.
            for (adder, seer, name, first, n) in [
                (0usize, 1usize, "laptop", round * 10, 4),
                (1, 0, "phone", round * 10 + 5, 3),
            ] {
                let dir = files(
                    s.tmp.path(),
                    &format!("{name}-{round}"),
                    first,
                    n,
                    &mut oracle,
                );
                sessions[adder].add_documents(&[&dir], &mut |_| {}).unwrap();
                let seen: BTreeSet<String> = sessions[seer]
                    .search("all")
                    .unwrap()
                    .into_iter()
                    .map(|d| d.path)
                    .collect();
                assert_eq!(
                    &seen, &oracle["all"],
                    "{scheme} round {round}: the other device sees the {name}'s"
                );
            }
        }
        let [mut a, mut b] = sessions;
        // The phone removes one of the laptop's documents; the laptop no
        // longer finds it.
        let gone = a.search("doc0").unwrap();
        assert_eq!(gone.len(), 1, "{scheme}");
        b.remove_documents(&[gone[0].path.clone()]).unwrap();
        for set in oracle.values_mut() {
            set.remove(&gone[0].path);
        }
        oracle.retain(|_, v| !v.is_empty());
        assert!(a.search("doc0").unwrap().is_empty(), "{scheme}");
        let ids_a: Vec<u64> = a
            .documents()
            .unwrap_or_else(|e| panic!("{e}"))
            .iter()
            .map(|d| d.id)
            .collect();
        let ids_b: Vec<u64> = b
            .documents()
            .unwrap_or_else(|e| panic!("{e}"))
            .iter()
            .map(|d| d.id)
            .collect();
        assert_eq!(ids_a, ids_b, "{scheme}: one catalog");
        drop((a, b));
        check(&laptop, &oracle, scheme);
        check(&phone, &oracle, scheme);
        if scheme == "fast" {
            // One entry per (keyword, document) pair added, and one per
            // keyword of the deleted document: no label was written twice.
            let pairs = 4 * 3 * 4 + 3 * 3 * 4;
            assert_eq!(index_entries(&s), pairs + 4, "{scheme}");
        }
    }
}

#[test]
fn two_devices_adding_at_the_same_time_lose_nothing() {
    for scheme in ["fast", "pibas"] {
        let s = serve(sesame_server::serve::DEFAULT_MAX_MESSAGE);
        let laptop = first_device(&s, scheme);
        let phone = second_device(&s);
        let mut oracle = Oracle::new();
        let mut batches: Vec<(usize, PathBuf)> = Vec::new();
        for round in 0..6 {
            for (device, name) in [(0, "laptop"), (1, "phone")] {
                let dir = files(
                    s.tmp.path(),
                    &format!("{name}-{round}"),
                    round * 100 + device * 50,
                    3,
                    &mut oracle,
                );
                batches.push((device, dir));
            }
        }
        std::thread::scope(|scope| {
            for (device, profile) in [(0, &laptop), (1, &phone)] {
                let mine: Vec<PathBuf> = batches
                    .iter()
                    .filter(|(d, _)| *d == device)
                    .map(|(_, p)| p.clone())
                    .collect();
                scope.spawn(move || {
                    for dir in mine {
                        let mut session = profile.session(DEFAULT_INDEX).unwrap();
                        session
                            .add_documents(&[&dir], &mut |_| {})
                            .unwrap_or_else(|e| panic!("{scheme}: {e}"));
                        session.search("all").unwrap();
                    }
                });
            }
        });
        check(&laptop, &oracle, scheme);
        check(&phone, &oracle, scheme);
        let ids: Vec<u64> = laptop
            .session(DEFAULT_INDEX)
            .unwrap()
            .documents()
            .unwrap_or_else(|e| panic!("{e}"))
            .iter()
            .map(|d| d.id)
            .collect();
        let distinct: BTreeSet<u64> = ids.iter().copied().collect();
        assert_eq!(
            (ids.len(), distinct.len()),
            (36, 36),
            "{scheme}: no identifier twice"
        );
        if scheme == "fast" {
            assert_eq!(index_entries(&s), 36 * 4, "{scheme}: no label twice");
        }
    }
}

/// A server with 1 MiB messages and a first device (FAST) that added one
/// document of 40,000 words (`w0` to `w39999`): its state takes chunks.
fn with_a_large_state() -> (Setup, Profile) {
    let s = serve(1 << 20);
    let laptop = first_device(&s, "fast");
    let big = s.tmp.path().join("big.txt");
    let words: Vec<String> = (0..40_000).map(|i| format!("w{i}")).collect();
    std::fs::write(&big, words.join(" ")).unwrap();
    support::add(&laptop, &big);
    (s, laptop)
}

/// Two devices (FAST) on a server, the first having added three files
/// (`laptop-0`): the server, both profiles and the oracle.
fn two_devices_with_three_files() -> (Setup, Profile, Profile, Oracle) {
    let s = serve(sesame_server::serve::DEFAULT_MAX_MESSAGE);
    let laptop = first_device(&s, "fast");
    let phone = second_device(&s);
    let mut oracle = Oracle::new();
    let dir = files(s.tmp.path(), "laptop-0", 0, 3, &mut oracle);
    support::add(&laptop, &dir);
    (s, laptop, phone, oracle)
}

/// States and intents larger than a quarter of a message go in chunks.
#[test]
fn a_state_larger_than_a_message_is_shared_in_chunks() {
    let (s, _laptop) = with_a_large_state();
    // Content-named chunks (`session::chunks`).
    let records = format!("v/alice/{}{DEFAULT_INDEX}/c-", s.binding.index_prefix);
    assert!(
        !s.store.scan_prefix(records.as_bytes()).unwrap().is_empty(),
        "the state is in chunks"
    );
    let phone = second_device(&s);
    for w in ["w0", "w23456", "w39999"] {
        assert_eq!(found(&phone, w).len(), 1, "{w}");
    }
    // The completed intent's record and chunks are gone.
    let intents = format!("v/alice/{}{DEFAULT_INDEX}/i", s.binding.index_prefix);
    assert!(s.store.scan_prefix(intents.as_bytes()).unwrap().is_empty());
}

/// A save of the shared state that fails keeps what an earlier intent
/// staged for it: the deletion of the intent completed before goes with
/// the next save that works, so no intent record is left on the server.
#[test]
fn a_failed_save_keeps_the_deletions_staged_before_it() {
    let s = serve(sesame_server::serve::DEFAULT_MAX_MESSAGE);
    let laptop = first_device(&s, "fast");
    let records = format!("v/alice/{}{DEFAULT_INDEX}/", s.binding.index_prefix);
    let intents = format!("{records}i");
    // While `refusing`, a write that deletes an intent's record fails:
    // the save of the second intent, which carries the first one's
    // deletion.
    let refusing = Arc::new(AtomicBool::new(true));
    let refused = Arc::new(AtomicUsize::new(0));
    let (on, count, prefix) = (refusing.clone(), refused.clone(), intents.clone());
    s.store.on_write(move |batch| {
        let deletes_intent = batch
            .ops()
            .iter()
            .any(|op| matches!(op, WriteOp::Delete { key } if key.starts_with(prefix.as_bytes())));
        if deletes_intent && on.load(Ordering::SeqCst) {
            count.fetch_add(1, Ordering::SeqCst);
            return Err(sesame_core::Error::StoreFull(
                "write: No space left on device (os error 28)".into(),
            ));
        }
        Ok(())
    });
    let mut oracle = Oracle::new();
    let dir = files(s.tmp.path(), "laptop-0", 0, 6, &mut oracle);
    let mut session = laptop.session(DEFAULT_INDEX).unwrap();
    session.set_documents_per_intent(2);
    assert!(session.add_documents(&[&dir], &mut |_| {}).is_err());
    assert!(refused.load(Ordering::SeqCst) > 0, "a save was refused");
    refusing.store(false, Ordering::SeqCst);
    // The same session adds what the failed add left out.
    session.add_documents(&[&dir], &mut |_| {}).unwrap();
    drop(session);
    check(&laptop, &oracle, "after the refused save");
    let left: Vec<String> = s
        .store
        .scan_prefix(intents.as_bytes())
        .unwrap()
        .into_iter()
        .map(|(k, _)| String::from_utf8_lossy(&k[records.len()..]).into_owned())
        .collect();
    assert!(left.is_empty(), "intent records left: {left:?}");
}

#[test]
fn a_tampered_or_rolled_back_shared_state_is_refused() {
    let (s, laptop, phone, mut oracle) = two_devices_with_three_files();
    check(&phone, &oracle, "before");
    let key = format!("v/alice/{}{DEFAULT_INDEX}/state", s.binding.index_prefix);
    let old = s.store.get(key.as_bytes()).unwrap().unwrap();
    let dir = files(s.tmp.path(), "laptop-1", 10, 3, &mut oracle);
    support::add(&laptop, &dir);
    let good = s.store.get(key.as_bytes()).unwrap().unwrap();
    check(&phone, &oracle, "after");
    let local = phone.dir().join("indexes/default.state");
    let local_before = std::fs::read(&local).unwrap();

    // A flipped byte in the sealed state (the version, first 8 bytes, kept).
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    s.store.put(key.as_bytes(), &bad).unwrap();
    // Version one more, so the phone reads it.
    let mut bumped = bad.clone();
    bumped[..8]
        .copy_from_slice(&(u64::from_be_bytes(good[..8].try_into().unwrap()) + 1).to_be_bytes());
    s.store.put(key.as_bytes(), &bumped).unwrap();
    let err = phone.session(DEFAULT_INDEX).unwrap_err();
    assert!(
        matches!(err, ClientError::SharedStateCorrupt { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("tampered"), "{err}");
    assert_eq!(
        std::fs::read(&local).unwrap(),
        local_before,
        "nothing changed"
    );

    // The older version put back: the phone saw a newer one.
    s.store.put(key.as_bytes(), &old).unwrap();
    let err = phone.session(DEFAULT_INDEX).unwrap_err();
    assert!(
        matches!(err, ClientError::SharedStateRolledBack { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("rolled back"), "{err}");

    // The honest state back: both devices work again.
    s.store.put(key.as_bytes(), &good).unwrap();
    check(&phone, &oracle, "restored");
    check(&laptop, &oracle, "restored");
}

#[test]
fn joining_needs_the_passphrase_and_a_shared_index() {
    let s = serve(sesame_server::serve::DEFAULT_MAX_MESSAGE);
    let _laptop = first_device(&s, "fast");
    let remote = format!("{}{DEFAULT_INDEX}", s.binding.index_prefix);
    let dir = s.tmp.path().join("phone");
    let err = Profile::join(&dir, "wrong", None, &s.binding, &remote).unwrap_err();
    assert!(matches!(err, ClientError::WrongPassphrase), "{err}");
    assert!(!Profile::exists(&dir), "nothing made a profile");
    assert!(!dir.join("server.json").exists(), "nothing written");
    let err = Profile::join(&dir, "pw", None, &s.binding, "p00000000-other").unwrap_err();
    assert!(err.to_string().contains("other"), "{err}");
    assert!(!Profile::exists(&dir));
    // The right passphrase joins; a second join into the same directory is
    // refused.
    Profile::join(&dir, "pw", None, &s.binding, &remote).unwrap();
    let err = Profile::join(&dir, "pw", None, &s.binding, &remote).unwrap_err();
    assert!(matches!(err, ClientError::ProfileExists(_)), "{err}");
}

/// A backup restored elsewhere is another device: its own identifier (so
/// neither takes the other's adds in progress for interrupted ones), and
/// both keep working on the shared index.
#[test]
fn a_restored_backup_is_another_device() {
    let s = serve(sesame_server::serve::DEFAULT_MAX_MESSAGE);
    let laptop = first_device(&s, "fast");
    let mut oracle = Oracle::new();
    let dir = files(s.tmp.path(), "laptop-0", 0, 3, &mut oracle);
    support::add(&laptop, &dir);
    let backup = s.tmp.path().join("backup");
    laptop.backup(&backup).unwrap();
    let restored = sesame_client::restore(&backup, &s.tmp.path().join("restored"), "pw").unwrap();
    let note = |p: &Profile| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(p.dir().join("indexes/default.shared")).unwrap())
            .unwrap()
    };
    let (a, b) = (note(&laptop), note(&restored));
    assert_ne!(a["device"], b["device"], "a device of its own");
    assert_eq!(a["version"], b["version"], "the version it had seen");
    let dir = files(s.tmp.path(), "restored-0", 10, 3, &mut oracle);
    support::add(&restored, &dir);
    let dir = files(s.tmp.path(), "laptop-1", 20, 3, &mut oracle);
    support::add(&laptop, &dir);
    check(&laptop, &oracle, "laptop");
    check(&restored, &oracle, "restored");
}

/// Every pair of the server's store.
fn snapshot(s: &Setup) -> Vec<(Vec<u8>, Vec<u8>)> {
    s.store.scan_prefix(b"").unwrap()
}

/// Puts back the pairs of `copy` under `prefix` (deleting those written
/// since), as an operator restoring a copy of the store would.
fn put_back(s: &Setup, copy: &[(Vec<u8>, Vec<u8>)], prefix: &[u8]) {
    for (k, _) in s.store.scan_prefix(prefix).unwrap() {
        s.store.delete(&k).unwrap();
    }
    for (k, v) in copy.iter().filter(|(k, _)| k.starts_with(prefix)) {
        s.store.put(k, v).unwrap();
    }
}

fn note(p: &Profile) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p.dir().join("indexes/default.shared")).unwrap()).unwrap()
}

/// The reproduction: the phone joins; the operator copies the
/// server's store; the laptop adds; the copy is put back; the phone adds
/// as much. The server now holds the phone's history at the version the
/// laptop saw: the laptop's next search is refused, and changes nothing.
#[test]
fn a_restored_copy_of_the_store_is_a_fork_the_laptop_refuses() {
    let (s, laptop, phone, oracle) = two_devices_with_three_files();
    check(&phone, &oracle, "before the copy");
    let copy = snapshot(&s);

    let dir = files(s.tmp.path(), "laptop-1", 10, 3, &mut Oracle::new());
    support::add(&laptop, &dir);
    put_back(&s, &copy, b"");
    let dir = files(s.tmp.path(), "phone-1", 20, 3, &mut Oracle::new());
    support::add(&phone, &dir);
    assert_eq!(
        note(&laptop)["version"],
        note(&phone)["version"],
        "both histories at one version"
    );

    let local = laptop.dir().join("indexes/default.state");
    let (state_before, note_before) = (std::fs::read(&local).unwrap(), note(&laptop));
    let store_before = snapshot(&s);
    let err = laptop
        .session(DEFAULT_INDEX)
        .and_then(|mut session| session.search("all"))
        .unwrap_err();
    assert!(
        matches!(err, ClientError::SharedStateForked { .. }),
        "the laptop's search after the fork: {err}"
    );
    assert!(err.to_string().contains("sesame devices"), "{err}");
    assert_eq!(std::fs::read(&local).unwrap(), state_before, "state kept");
    assert_eq!(note(&laptop), note_before, "note kept");
    assert!(
        snapshot(&s) == store_before,
        "nothing written on the server"
    );
    // The phone's history never held the laptop's write: the phone cannot
    // tell (what a fork leaves undetectable until the two meet).
    assert_eq!(found(&phone, "all").len(), 6);
}

/// Item 2: the server serves an older genuine state after the laptop
/// searched (Aura renews a keyword's keys on search); the phone writes on
/// it until its history is ahead of the laptop's. The laptop, whose add
/// would otherwise reuse the searched keyword's revealed keys and the
/// phone's document identifiers, refuses the state and writes nothing.
#[test]
fn a_device_served_an_older_state_after_its_search_writes_nothing() {
    let s = serve(sesame_server::serve::DEFAULT_MAX_MESSAGE);
    let laptop = first_device(&s, "aura");
    let phone = second_device(&s);
    let mut oracle = Oracle::new();
    let dir = files(s.tmp.path(), "laptop-0", 0, 3, &mut oracle);
    support::add(&laptop, &dir);
    check(&phone, &oracle, "before");
    // The state records as they are now: the older genuine state.
    let records = format!("v/alice/{}{DEFAULT_INDEX}/", s.binding.index_prefix);
    let older = snapshot(&s);
    assert_eq!(found(&laptop, "all").len(), 3);
    let seen = note(&laptop)["version"].as_u64().unwrap();
    put_back(&s, &older, records.as_bytes());
    // The phone adds on the older state until it is ahead of the laptop.
    for round in 1..=4 {
        if note(&phone)["version"].as_u64().unwrap() > seen {
            break;
        }
        let dir = files(
            s.tmp.path(),
            &format!("phone-{round}"),
            round * 10,
            2,
            &mut oracle,
        );
        support::add(&phone, &dir);
    }
    assert!(note(&phone)["version"].as_u64().unwrap() > seen);

    let store_before = snapshot(&s);
    let dir = files(s.tmp.path(), "laptop-9", 90, 2, &mut Oracle::new());
    let err = laptop
        .session(DEFAULT_INDEX)
        .and_then(|mut session| session.add_documents(&[&dir], &mut |_| {}))
        .unwrap_err();
    assert!(
        matches!(err, ClientError::SharedStateForked { .. }),
        "the laptop's add on the older state: {err}"
    );
    assert!(err.to_string().contains("own last write"), "{err}");
    assert!(
        snapshot(&s) == store_before,
        "no index entry, document or record written"
    );
}

/// A server that swaps two chunk records of a large state, serves one
/// chunk's bytes altered, or drops one: a joining device refuses the
/// state (`SharedStateCorrupt`); given the chunks back, it joins and
/// finds every document.
#[test]
fn a_state_whose_chunks_are_swapped_altered_or_missing_is_refused() {
    let (s, _laptop) = with_a_large_state();
    let prefix = format!("v/alice/{}{DEFAULT_INDEX}/c-", s.binding.index_prefix);
    let chunks = s.store.scan_prefix(prefix.as_bytes()).unwrap();
    assert!(chunks.len() >= 2, "{} chunks", chunks.len());
    let (a, b) = (chunks[0].clone(), chunks[1].clone());
    let mut altered = a.1.clone();
    let last = altered.len() - 1;
    altered[last] ^= 1;
    // Store keys and what the server puts there (`None`: deleted).
    type Writes = Vec<(Vec<u8>, Option<Vec<u8>>)>;
    let attacks: [(&str, Writes); 3] = [
        (
            "swapped",
            vec![
                (a.0.clone(), Some(b.1.clone())),
                (b.0.clone(), Some(a.1.clone())),
            ],
        ),
        ("altered", vec![(a.0.clone(), Some(altered))]),
        ("missing", vec![(a.0.clone(), None)]),
    ];
    for (what, writes) in attacks {
        for (k, v) in &writes {
            match v {
                Some(v) => s.store.put(k, v).unwrap(),
                None => s.store.delete(k).unwrap(),
            }
        }
        let remote = format!("{}{DEFAULT_INDEX}", s.binding.index_prefix);
        let mut binding = s.binding.clone();
        binding.index_prefix = String::new();
        let joined = Profile::join(s.tmp.path().join(what), "pw", None, &binding, &remote);
        assert!(
            matches!(joined, Err(ClientError::SharedStateCorrupt { .. })),
            "{what}: {:?}",
            joined.map(|_| ())
        );
        s.store.put(&a.0, &a.1).unwrap();
        s.store.put(&b.0, &b.1).unwrap();
    }
    let phone = second_device(&s);
    for w in ["w0", "w39999"] {
        assert_eq!(found(&phone, w).len(), 1, "{w}");
    }
}
