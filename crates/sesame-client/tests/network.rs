//! Profiles bound to a server (loopback TLS, in-process): the same add,
//! search and get as embedded; updates that the server fails or never
//! acknowledges are kept and sent again, and nothing acknowledged is lost.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand_core::OsRng;
use sesame_client::{ClientError, NetworkBackend, Profile, ServerBinding, DEFAULT_INDEX};
use sesame_core::{Params, Store};
use sesame_server::RunningServer;
use sesame_store::faulty::{Fault, FaultyStore};
use sesame_store::MemoryStore;

struct Setup {
    _server: RunningServer,
    binding: ServerBinding,
    tmp: tempfile::TempDir,
}

fn serve(store: Arc<dyn Store>) -> Setup {
    serve_with(store, sesame_server::serve::DEFAULT_MAX_MESSAGE)
}

fn serve_with(store: Arc<dyn Store>, max_message: usize) -> Setup {
    let (server, mut binding) = support::serve(store, |c| c.max_message_bytes = max_message);
    binding.index_prefix = String::new();
    Setup {
        _server: server,
        binding,
        tmp: tempfile::tempdir().unwrap(),
    }
}

/// A profile bound to the server, its default index created there.
fn profile(s: &Setup, scheme: &str) -> Profile {
    let backend = NetworkBackend::connect(&s.binding).unwrap();
    backend
        .create_index(DEFAULT_INDEX, scheme, &Params::new())
        .unwrap();
    let p = support::profile_at(&s.tmp.path().join("profile"), scheme);
    p.bind_server(&s.binding).unwrap();
    p
}

/// Writes `n` files `f{i}.txt` under `dir/sub` and returns the directory
/// and the oracle: keyword to paths.
fn corpus(
    dir: &Path,
    sub: &str,
    first: usize,
    n: usize,
) -> (PathBuf, BTreeMap<String, BTreeSet<String>>) {
    let root = dir.join(sub);
    std::fs::create_dir_all(&root).unwrap();
    let mut oracle: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for i in first..first + n {
        let words = [
            "all".to_string(),
            format!("mod{}", i % 3),
            format!("doc{i}"),
        ];
        support::write_indexed_file(&root, i, words.into(), &mut oracle);
    }
    (root, oracle)
}

fn found(profile: &Profile, word: &str) -> BTreeSet<String> {
    let mut s = profile.session(DEFAULT_INDEX).unwrap();
    s.search(word)
        .unwrap()
        .into_iter()
        .map(|d| d.path)
        .collect()
}

fn check_oracle(profile: &Profile, oracle: &BTreeMap<String, BTreeSet<String>>) {
    for (w, paths) in oracle {
        assert_eq!(&found(profile, w), paths, "keyword {w}");
    }
}

/// Index entries of the default index, generation `g`, on the server.
fn entries(store: &dyn Store, g: u64) -> usize {
    server_entries(store, &format!("alice/{DEFAULT_INDEX}/{g}/")).len()
}

/// The server's index entries under `<tenant>/<index>/...`: under `i/`, or
/// `e/` for a scheme whose entries are written once (spread); packed ones
/// unpacked when `rest` names a generation.
fn server_entries(store: &dyn Store, rest: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    ["i/", "e/"]
        .iter()
        .flat_map(|letter| {
            sesame_store::packed::pairs_under(store, format!("{letter}{rest}").as_bytes()).unwrap()
        })
        .collect()
}

fn merge(a: &mut BTreeMap<String, BTreeSet<String>>, b: BTreeMap<String, BTreeSet<String>>) {
    for (w, p) in b {
        a.entry(w).or_default().extend(p);
    }
}

#[test]
fn static_and_dynamic_profiles_work_against_the_server() {
    for scheme in ["pibas", "fast"] {
        let store = Arc::new(MemoryStore::new());
        let s = serve(store.clone());
        let p = profile(&s, scheme);
        let (dir, mut oracle) = corpus(s.tmp.path(), "a", 0, 12);
        let mut session = p.session(DEFAULT_INDEX).unwrap();
        let r = session.add_documents(&[&dir], &mut |_| {}).unwrap();
        assert_eq!(r.added.len(), 12);
        assert_eq!(r.rebuilt, scheme == "pibas");
        let (dir2, more) = corpus(s.tmp.path(), "b", 12, 5);
        session.add_documents(&[&dir2], &mut |_| {}).unwrap();
        merge(&mut oracle, more);
        drop(session);
        check_oracle(&p, &oracle);
        let mut session = p.session(DEFAULT_INDEX).unwrap();
        let hit = session.search("doc3").unwrap();
        assert_eq!(session.get(hit[0].id).unwrap(), b"all mod0 doc3");
        // Nothing but ciphertexts on the server: no keyword, no file name.
        for (k, v) in store.scan_prefix(b"").unwrap() {
            for needle in [&b"mod0"[..], b"f3.txt", b"doc3"] {
                assert!(!k.windows(needle.len()).any(|w| w == needle));
                assert!(!v.windows(needle.len()).any(|w| w == needle), "{scheme}");
            }
        }
        if scheme == "pibas" {
            assert_eq!(store.scan_prefix(b"i/alice/default/1/").unwrap().len(), 0);
            assert!(
                entries(store.as_ref(), 2) > 0,
                "the rebuild replaced generation 1"
            );
        } else {
            // One entry per keyword-document pair: no label written twice.
            assert_eq!(entries(store.as_ref(), 0), 17 * 3);
        }
    }
}

#[test]
fn a_failed_write_reaches_the_user_and_nothing_acknowledged_is_lost() {
    let store = Arc::new(FaultyStore::new());
    let s = serve(store.clone());
    let p = profile(&s, "fast");
    let (dir, mut oracle) = corpus(s.tmp.path(), "a", 0, 10);
    p.session(DEFAULT_INDEX)
        .unwrap()
        .add_documents(&[&dir], &mut |_| {})
        .unwrap();

    // The disk is full: the documents cannot be stored.
    store.fail(Fault::Refused, 0);
    let (dir2, more) = corpus(s.tmp.path(), "b", 10, 6);
    merge(&mut oracle, more);
    let err = p
        .session(DEFAULT_INDEX)
        .unwrap()
        .add_documents(&[&dir2], &mut |_| {})
        .unwrap_err();
    assert!(err.to_string().contains("out of space"), "{err}");
    // Searches still work, and the acknowledged documents are all there.
    assert_eq!(found(&p, "all").len(), 10);

    // Space for a moment: the next command deletes what the failed add
    // left (documents reserved but never indexed).
    store.heal();
    assert_eq!(found(&p, "all").len(), 10);

    // The documents are stored, but the index update fails: it is kept.
    // (The writes of an add: the shared state reserving the identifiers,
    // the documents, the state with the pending update, the update.)
    store.fail(Fault::Refused, 3);
    let err = p
        .session(DEFAULT_INDEX)
        .unwrap()
        .add_documents(&[&dir2], &mut |_| {})
        .unwrap_err();
    assert!(
        matches!(err, ClientError::Unacknowledged { documents: 6, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("out of space"), "{err}");
    assert!(err.to_string().contains("sent again"), "{err}");
    // Searches answer from what the server has (tests/pending_reads.rs).
    assert_eq!(found(&p, "all").len(), 10);

    // Space again: the next command sends the saved update first, and the
    // same add finds its files done.
    store.heal();
    let r = p
        .session(DEFAULT_INDEX)
        .unwrap()
        .add_documents(&[&dir2], &mut |_| {})
        .unwrap();
    assert_eq!((r.added.len(), r.resumed), (0, 6), "{r:?}");
    check_oracle(&p, &oracle);
    assert_eq!(entries(store.as_ref() as &dyn Store, 0), 16 * 3);
}

#[test]
fn an_update_applied_but_not_acknowledged_is_not_applied_twice() {
    let store = Arc::new(FaultyStore::new());
    let s = serve(store.clone());
    let p = profile(&s, "fast");
    let (dir, oracle) = corpus(s.tmp.path(), "a", 0, 8);
    // Documents stored; the update is committed, but its answer is lost
    // (writes: the first upload of the shared state, the state reserving
    // identifiers, the documents, the state with the pending update, the
    // update).
    store.fail(Fault::AnswerLost, 4);
    let err = p
        .session(DEFAULT_INDEX)
        .unwrap()
        .add_documents(&[&dir], &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, ClientError::Unacknowledged { .. }), "{err}");
    store.heal();
    let before = server_entries(store.as_ref(), "");
    // The resend is recognised by the server: answered from its replay
    // record, nothing written again.
    check_oracle(&p, &oracle);
    assert_eq!(server_entries(store.as_ref(), ""), before);
    assert_eq!(entries(store.as_ref() as &dyn Store, 0), 8 * 3);
}

/// An update far larger than the server's message limit is sent in calls
/// under it; a document that cannot fit one message is refused before
/// anything is saved; the profile keeps working either way.
#[test]
fn updates_of_any_size_fit_the_servers_messages() {
    for scheme in ["fast", "pibas"] {
        let store = Arc::new(MemoryStore::new());
        let s = serve_with(store.clone(), 2 << 20);
        let p = profile(&s, scheme);
        // 150,000 distinct words: megabytes of update requests.
        let big = s.tmp.path().join("big.txt");
        let text: Vec<String> = (0..150_000).map(|i| format!("w{i}")).collect();
        std::fs::write(&big, text.join(" ")).unwrap();
        let r = p
            .session(DEFAULT_INDEX)
            .unwrap()
            .add_documents(&[&big], &mut |_| {})
            .unwrap_or_else(|e| panic!("{scheme}: {e}"));
        assert_eq!((r.added.len(), r.pairs), (1, 150_000), "{scheme}");
        for w in ["w0", "w77777", "w149999"] {
            assert_eq!(found(&p, w).len(), 1, "{scheme} {w}");
        }

        // Larger than one message can carry: refused, nothing saved.
        let huge = s.tmp.path().join("huge.txt");
        std::fs::write(&huge, vec![b'x'; 2 << 20]).unwrap();
        let state = p.dir().join("indexes/default.state");
        let before = std::fs::read(&state).unwrap();
        let err = p
            .session(DEFAULT_INDEX)
            .unwrap()
            .add_documents(&[&huge], &mut |_| {})
            .unwrap_err();
        assert!(matches!(err, ClientError::DocumentTooLarge { .. }), "{err}");
        assert_eq!(std::fs::read(&state).unwrap(), before, "{scheme}");
        assert_eq!(found(&p, "w5").len(), 1, "{scheme}");
    }
}

/// A search that writes on the server (UEDSSE re-encrypts), whose answer
/// is lost after the server applied it: the next command gets the first
/// answer again, however large, and the index stays searchable.
#[test]
fn a_lost_answer_to_a_search_that_writes_is_recovered_whatever_its_size() {
    let store = Arc::new(FaultyStore::new());
    let s = serve(store.clone());
    let p = profile(&s, "uedsse");
    let (dir, oracle) = corpus(s.tmp.path(), "a", 0, 600);
    p.session(DEFAULT_INDEX)
        .unwrap()
        .add_documents(&[&dir], &mut |_| {})
        .unwrap();
    // A first search (the server makes its key pair on the first one).
    assert_eq!(found(&p, "all").len(), 600);
    // The search's writes are committed, but its answer is lost (writes:
    // the shared state with the pending search, the search; the shared
    // state of 600 documents, its catalog in compact blocks, is short
    // enough to be held inline, with no chunk of its own to write).
    store.fail(Fault::AnswerLost, 1);
    let err = p.session(DEFAULT_INDEX).unwrap().search("all").unwrap_err();
    assert!(matches!(err, ClientError::Unacknowledged { .. }), "{err}");
    store.heal();
    assert_eq!(found(&p, "all").len(), 600);
    // Every keyword shared by many documents, and one document's keyword
    // in fifty (each UEDSSE search re-encrypts what it finds).
    for (w, paths) in &oracle {
        let sampled = w
            .strip_prefix("doc")
            .is_none_or(|i| i.parse::<usize>().is_ok_and(|i| i % 50 == 7));
        if sampled {
            assert_eq!(&found(&p, w), paths, "keyword {w}");
        }
    }
}

/// Two profiles share one tenant, each under its own index prefix: each
/// finds only its own documents, and lists only its own index.
#[test]
fn two_profiles_share_a_tenant_under_their_prefixes() {
    let s = serve(Arc::new(MemoryStore::new()));
    let make = |name: &str, text: &str| {
        let mut binding = s.binding.clone();
        binding.index_prefix = ServerBinding::fresh_prefix(&mut OsRng);
        let backend = NetworkBackend::connect(&binding).unwrap();
        backend
            .create_index(DEFAULT_INDEX, "fast", &Params::new())
            .unwrap();
        let p = support::profile_at(&s.tmp.path().join(name), "fast");
        p.bind_server(&binding).unwrap();
        let file = s.tmp.path().join(format!("{name}.txt"));
        std::fs::write(&file, text).unwrap();
        p.session(DEFAULT_INDEX)
            .unwrap()
            .add_documents(&[&file], &mut |_| {})
            .unwrap();
        (p, backend, file)
    };
    let (a, backend_a, file_a) = make("a", "alpha shared");
    let (b, _, file_b) = make("b", "beta shared");
    for (p, file) in [(&a, &file_a), (&b, &file_b)] {
        let hits = p.session(DEFAULT_INDEX).unwrap().search("shared").unwrap();
        let paths: Vec<String> = hits.into_iter().map(|d| d.path).collect();
        assert_eq!(paths, vec![file.to_string_lossy().into_owned()]);
    }
    assert_eq!(backend_a.indexes().unwrap(), vec![DEFAULT_INDEX.to_owned()]);
    // The prefix is bound to the sealed token: an edited one is refused.
    let path = a.server_path();
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replacen("\"index_prefix\": \"p", "\"index_prefix\": \"q", 1);
    assert_ne!(edited, text);
    std::fs::write(&path, edited).unwrap();
    let reopened = Profile::open(s.tmp.path().join("a"), "pw").unwrap();
    assert!(matches!(
        reopened.session(DEFAULT_INDEX),
        Err(ClientError::ProfileCorrupt { .. })
    ));
}

/// `rekey` on a server-bound profile: a new generation under fresh keys on
/// the server, the old one dropped there, every search as before; a rekey
/// whose write the server refuses leaves the old generation answering.
#[test]
fn rekey_moves_a_server_index_to_fresh_keys() {
    for scheme in ["pibas", "fast", "aura"] {
        let store = Arc::new(FaultyStore::new());
        let s = serve(store.clone());
        let p = profile(&s, scheme);
        let (root, oracle) = corpus(s.tmp.path(), "files", 0, 9);
        p.session(DEFAULT_INDEX)
            .unwrap()
            .add_documents(&[&root], &mut |_| {})
            .unwrap();
        check_oracle(&p, &oracle);
        let g0 = p.session(DEFAULT_INDEX).unwrap().generation();
        let values = |g: u64| -> BTreeSet<Vec<u8>> {
            server_entries(store.inner(), &format!("alice/{DEFAULT_INDEX}/{g}/"))
                .into_iter()
                .map(|(_, v)| v)
                .collect()
        };
        let before = values(g0);
        assert!(!before.is_empty(), "{scheme}");

        // Refused by the server's store: the old generation still answers.
        store.fail(Fault::Refused, 0);
        assert!(p
            .session(DEFAULT_INDEX)
            .unwrap()
            .rekey(&mut |_| {})
            .is_err());
        store.heal();
        assert_eq!(p.session(DEFAULT_INDEX).unwrap().generation(), g0);
        check_oracle(&p, &oracle);

        let mut sess = p.session(DEFAULT_INDEX).unwrap();
        assert_eq!(sess.rekey(&mut |_| {}).unwrap(), 9, "{scheme}");
        let g1 = sess.generation();
        drop(sess);
        assert!(g1 > g0, "{scheme}");
        assert_eq!(
            entries(store.as_ref(), g0),
            0,
            "{scheme}: old generation left"
        );
        assert!(entries(store.as_ref(), g1) > 0, "{scheme}");
        check_oracle(&p, &oracle);
        // Fresh keys: the stored values are not the old ones (at most one
        // piece of public metadata repeats).
        assert!(
            before.intersection(&values(g1)).count() <= 1,
            "{scheme}: values repeat after the rekey"
        );
    }
}

/// A server's view of a store it shares with another server: once the
/// `dies_at`-th conditional write through it is applied, the server is
/// cut off (its store answers every call unavailable, as a server that
/// died would answer none): that write is applied but never acknowledged.
struct Dying {
    inner: Arc<MemoryStore>,
    writes: std::sync::atomic::AtomicU64,
    dies_at: u64,
}

impl Dying {
    /// The wrapped store, while this server is not cut off.
    fn live(&self) -> sesame_core::Result<&MemoryStore> {
        if self.writes.load(std::sync::atomic::Ordering::SeqCst) >= self.dies_at {
            return Err(sesame_core::Error::StoreUnavailable(
                "this server is cut off".into(),
            ));
        }
        Ok(&self.inner)
    }
}

impl Store for Dying {
    sesame_store::forward_store!(|s| s.live()?; get, get_many, write, scan_prefix, scan_from);
    sesame_store::forward_store!(|s| s.inner; ordered_probes, io_counts);
    fn write_if(
        &self,
        expect: &[(&[u8], Option<&[u8]>)],
        batch: &sesame_core::WriteBatch,
    ) -> sesame_core::Result<bool> {
        let applied = self.live()?.write_if(expect, batch)?;
        let n = self
            .writes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        if n >= self.dies_at {
            // Applied, and the answer never leaves.
            self.live()?;
        }
        Ok(applied)
    }
    fn backend(&self) -> &'static str {
        "dying"
    }
}

/// Two servers on one store, with one certificate and one token; the
/// binding names both, the first first.
fn two_servers(
    first: Arc<dyn Store>,
    second: Arc<dyn Store>,
) -> (RunningServer, RunningServer, ServerBinding) {
    let certs = sesame_server::certs::localhost().unwrap();
    let token = sesame_server::Tokens::generate(&mut OsRng);
    let start = |store: Arc<dyn Store>| {
        let config = sesame_server::certs::loopback_config(&certs, &[("alice", &token)]).unwrap();
        RunningServer::start(config, store).unwrap()
    };
    let (a, b) = (start(first), start(second));
    let binding = ServerBinding {
        url: format!("{},{}", a.url(), b.url()),
        token: token.clone(),
        ca_pem: Some(certs.ca_pem.clone().into_bytes()),
        index_prefix: String::new(),
    };
    (a, b, binding)
}

/// Failover: the first of two servers on one store dies in the middle of
/// an add (its update applied, its answer lost); the add completes through
/// the second, each update applied once; searches go on; with the first
/// gone altogether (connections refused), the next command connects to
/// the second.
#[test]
fn an_add_goes_on_through_the_second_server_when_the_first_dies() {
    let store = Arc::new(MemoryStore::new());
    let dying = Arc::new(Dying {
        inner: store.clone(),
        writes: std::sync::atomic::AtomicU64::new(0),
        // The index's creation and the profile's first writes, then
        // the add's documents and updates: it dies among them.
        dies_at: 9,
    });
    let (first, second, binding) = two_servers(dying.clone(), store.clone());
    let tmp = tempfile::tempdir().unwrap();
    let s = Setup {
        _server: second,
        binding,
        tmp,
    };
    let p = profile(&s, "fast");
    let mut oracle = BTreeMap::new();
    for part in 0..4 {
        let (dir, o) = corpus(s.tmp.path(), &format!("d{part}"), part * 20, 20);
        merge(&mut oracle, o);
        p.session(DEFAULT_INDEX)
            .unwrap()
            .add_documents(&[&dir], &mut |_| {})
            .unwrap();
    }
    assert!(
        dying.writes.load(std::sync::atomic::Ordering::SeqCst) >= 9,
        "the first server did not die during the adds"
    );
    check_oracle(&p, &oracle);
    // Each keyword-document pair once: no update applied twice.
    let pairs: usize = oracle.values().map(BTreeSet::len).sum();
    assert_eq!(entries(store.as_ref() as &dyn Store, 0), pairs);
    // The first server gone: refused connections, the second answers.
    first.shutdown().unwrap();
    let (dir, o) = corpus(s.tmp.path(), "d9", 900, 5);
    merge(&mut oracle, o);
    p.session(DEFAULT_INDEX)
        .unwrap()
        .add_documents(&[&dir], &mut |_| {})
        .unwrap();
    check_oracle(&p, &oracle);
}

/// A list of server URLs with a mistake is refused when a profile is
/// bound, and nothing is written.
#[test]
fn a_bad_server_url_list_is_refused_when_binding() {
    let s = serve(Arc::new(MemoryStore::new()));
    let p = support::profile_at(&s.tmp.path().join("profile"), "fast");
    for bad in [
        format!("{},", s.binding.url),
        format!("{},ftp://localhost:1", s.binding.url),
        format!("{0},{0}", s.binding.url),
    ] {
        let mut binding = s.binding.clone();
        binding.url = bad.clone();
        let err = p.bind_server(&binding).unwrap_err();
        assert!(err.to_string().contains("server URL list"), "{bad}: {err}");
        assert!(
            p.server().unwrap().is_none(),
            "{bad}: a binding was written"
        );
    }
    // One URL, as every profile bound before lists existed has: the file
    // keeps its form (`url` is that URL) and opens.
    p.bind_server(&s.binding).unwrap();
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p.server_path()).unwrap()).unwrap();
    assert_eq!(file["url"].as_str(), Some(s.binding.url.as_str()));
    assert_eq!(p.server().unwrap().unwrap().url, s.binding.url);
}
