//! Reads never wait on writes that cannot be sent: while the server's
//! store refuses writes (a full disk), an add's index update stays a
//! pending intent, and search, list and get answer from the state the
//! server has (the committed documents), saying how many documents are
//! pending; once writes work again the next command sends the intent, and
//! its documents are found, indexed once. Embedded and served.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand_core::OsRng;
use sesame_client::{
    ClientError, EmbeddedBackend, NetworkBackend, Profile, Schema, ServerBinding, Session, Table,
    DEFAULT_INDEX,
};
use sesame_core::{Params, Store};
use sesame_server::{RunningServer, Tokens};
use sesame_store::faulty::{Fault, FaultyStore};

/// Writes `n` files `f{i}.txt` under `dir/sub`, each holding `all`,
/// `mod{i % 3}` and `doc{i}`.
fn corpus(dir: &Path, sub: &str, first: usize, n: usize) -> PathBuf {
    let root = dir.join(sub);
    std::fs::create_dir_all(&root).unwrap();
    for i in first..first + n {
        let text = format!("all mod{} doc{i}", i % 3);
        std::fs::write(root.join(format!("f{i}.txt")), text).unwrap();
    }
    root
}

/// Where a profile's sessions reach the store: embedded over the store,
/// or through a real server over it.
enum Place {
    Embedded,
    /// The server runs until the setup is dropped.
    Served {
        _server: Box<RunningServer>,
        binding: ServerBinding,
    },
}

struct Setup {
    place: Place,
    store: Arc<FaultyStore>,
    profile: Profile,
    tmp: tempfile::TempDir,
}

impl Setup {
    fn new(served: bool, scheme: &str) -> Setup {
        let store = Arc::new(FaultyStore::new());
        let tmp = tempfile::tempdir().unwrap();
        let place = if served {
            let certs = sesame_server::certs::localhost().unwrap();
            let token = Tokens::generate(&mut OsRng);
            let config =
                sesame_server::certs::loopback_config(&certs, &[("alice", &token)]).unwrap();
            let server = RunningServer::start(config, store.clone() as Arc<dyn Store>).unwrap();
            let binding = ServerBinding {
                url: server.url(),
                token,
                ca_pem: Some(certs.ca_pem.into_bytes()),
                index_prefix: String::new(),
            };
            NetworkBackend::connect(&binding)
                .unwrap()
                .create_index(DEFAULT_INDEX, scheme, &Params::new())
                .unwrap();
            Place::Served {
                _server: Box::new(server),
                binding,
            }
        } else {
            Place::Embedded
        };
        let profile = support::profile_at(&tmp.path().join("profile"), scheme);
        if let Place::Served { binding, .. } = &place {
            profile.bind_server(binding).unwrap();
        }
        Setup {
            place,
            store,
            profile,
            tmp,
        }
    }

    fn session(&self) -> Session {
        match &self.place {
            Place::Embedded => self
                .profile
                .session_with(
                    DEFAULT_INDEX,
                    Box::new(EmbeddedBackend::over(self.store.clone() as Arc<dyn Store>)),
                )
                .unwrap(),
            Place::Served { .. } => self.profile.session(DEFAULT_INDEX).unwrap(),
        }
    }

    /// Paths found by `word`, and the documents the answer says are
    /// pending.
    fn found(&self, word: &str) -> (BTreeSet<String>, usize) {
        let hits = self
            .session()
            .query(word)
            .unwrap_or_else(|e| panic!("search {word}: {e}"));
        let paths = hits.documents.into_iter().map(|d| d.path).collect();
        (paths, hits.pending)
    }

    /// The index entries of generation 0 on the server.
    fn entries(&self) -> usize {
        let tenant = match self.place {
            Place::Embedded => "",
            Place::Served { .. } => "alice/",
        };
        ["i/", "e/"]
            .iter()
            .map(|letter| {
                let prefix = format!("{letter}{tenant}{DEFAULT_INDEX}/0/");
                sesame_store::packed::pairs_under(self.store.inner(), prefix.as_bytes())
                    .unwrap()
                    .len()
            })
            .sum()
    }
}

/// Adds 10 documents, then 6 whose index update the full store refuses;
/// while writes fail with `fault` (refused, or applied but reported
/// unavailable as by a Redis Cluster whose replica is down), reads answer
/// the 10 with 6 pending; once the store works the next search sends the
/// update and finds all 16, each entry written once.
fn reads_answer_the_committed_documents(served: bool, fault: Fault) {
    let s = Setup::new(served, "fast");
    let first = corpus(s.tmp.path(), "a", 0, 10);
    s.session().add_documents(&[&first], &mut |_| {}).unwrap();
    let entries = s.entries();
    assert_eq!(entries, 10 * 3);

    // The documents are stored and the pending update saved; the update
    // itself is refused (the disk is full). Count the writes an add makes
    // before its update by refusing later and later writes.
    let second = corpus(s.tmp.path(), "b", 10, 6);
    let mut refused = None;
    for after in 0..8 {
        s.store.fail(Fault::Refused, after);
        let err = s.session().add_documents(&[&second], &mut |_| {});
        s.store.heal();
        match err {
            Err(ClientError::Unacknowledged { documents: 6, .. }) => {
                refused = Some(after);
                break;
            }
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.contains("out of space") || e.contains("store is full"),
                    "{e}"
                );
            }
            Ok(r) => panic!("the add went through: {r:?}"),
        }
    }
    // The last attempt's update is pending; from now on every write is
    // refused.
    assert!(refused.is_some(), "no add left its update pending");
    s.store.fail(fault, 0);
    let before = s.store.inner().scan_prefix(b"").unwrap();

    let (found, pending) = s.found("all");
    assert_eq!(found.len(), 10, "{found:?}");
    assert_eq!(pending, 6);
    if fault == Fault::Unconfirmed {
        // The resend was applied: once the store confirms again, the
        // update is completed from the server's record, not applied twice.
        s.store.heal();
        let (found, pending) = s.found("all");
        assert_eq!((found.len(), pending), (16, 0), "{found:?}");
        assert_eq!(s.entries(), 16 * 3);
        return;
    }
    assert_eq!(s.found("doc12"), (BTreeSet::new(), 6));
    assert_eq!(s.found("doc3").0.len(), 1);
    let mut session = s.session();
    assert_eq!(session.pending_documents(), 6);
    let listed = session.documents().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(listed.len(), 10);
    let doc = listed.iter().find(|d| d.path.ends_with("f3.txt")).unwrap();
    assert_eq!(session.get(doc.id).unwrap(), b"all mod0 doc3");
    drop(session);
    if fault == Fault::Refused {
        // Reading wrote nothing.
        assert!(s.store.inner().scan_prefix(b"").unwrap() == before);
    }

    // Room again: the next search sends the pending update first.
    s.store.heal();
    let (found, pending) = s.found("all");
    assert_eq!((found.len(), pending), (16, 0), "{found:?}");
    assert_eq!(s.found("doc12").0.len(), 1);
    assert_eq!(s.session().pending_documents(), 0);
    assert_eq!(s.entries(), 16 * 3);
}

#[test]
fn embedded_reads_answer_the_committed_documents_while_writes_are_refused() {
    reads_answer_the_committed_documents(false, Fault::Refused);
}

#[test]
fn served_reads_answer_the_committed_documents_while_writes_are_refused() {
    reads_answer_the_committed_documents(true, Fault::Refused);
}

/// The resent update is applied each time but reported unavailable: reads
/// still answer the committed state, and the update, applied already, is
/// completed once from the server's record.
#[test]
fn embedded_reads_answer_the_committed_documents_while_writes_are_unconfirmed() {
    reads_answer_the_committed_documents(false, Fault::Unconfirmed);
}

#[test]
fn served_reads_answer_the_committed_documents_while_writes_are_unconfirmed() {
    reads_answer_the_committed_documents(true, Fault::Unconfirmed);
}

/// A scheme whose search writes (re-keys or refreshes what it searched)
/// cannot search around a pending update: the search says so, naming the
/// scheme, and the documents are listed as before; once the store has
/// room the search sends the update and finds everything.
#[test]
fn a_scheme_whose_search_writes_says_it_must_send_the_pending_update_first() {
    for scheme in ["simple", "suise"] {
        let s = Setup::new(false, scheme);
        let first = corpus(s.tmp.path(), "a", 0, 4);
        s.session().add_documents(&[&first], &mut |_| {}).unwrap();
        let second = corpus(s.tmp.path(), "b", 4, 3);
        let mut pending = false;
        for after in 0..8 {
            s.store.fail(Fault::Refused, after);
            let err = s.session().add_documents(&[&second], &mut |_| {});
            s.store.heal();
            if let Err(ClientError::Unacknowledged { documents: 3, .. }) = err {
                pending = true;
                break;
            }
        }
        assert!(pending, "{scheme}: no add left its update pending");
        s.store.fail(Fault::Refused, 0);
        let err = s.session().query("all").unwrap_err();
        assert!(
            matches!(err, ClientError::PendingFirst { documents: 3, .. }),
            "{scheme}: {err}"
        );
        let text = err.to_string();
        assert!(text.contains(&format!("scheme {scheme}")), "{text}");
        assert!(text.contains("search writes"), "{text}");
        assert_eq!(
            s.session()
                .documents()
                .unwrap_or_else(|e| panic!("{e}"))
                .len(),
            4,
            "{scheme}"
        );

        s.store.heal();
        let (found, pending) = s.found("all");
        assert_eq!((found.len(), pending), (7, 0), "{scheme}: {found:?}");
    }
}

/// A table of keyword fields only: its insertion the full store refuses
/// stays pending; opening the table and `query` answer the committed
/// records, saying how many are pending; then the next query sends it.
fn a_table_answers_its_committed_records(served: bool) {
    let s = Setup::new(served, "fast");
    let schema = Schema::from_toml(
        r#"
key = "id"
equality = "fast"
[fields.id]
type = "integer"
[fields.s]
type = "string"
index = ["equality"]
"#,
    )
    .unwrap();
    let open = |create: bool| -> Result<Table, ClientError> {
        match (&s.place, create) {
            (Place::Embedded, true) => Table::create_with(
                &s.profile,
                "t",
                schema.clone(),
                Box::new(EmbeddedBackend::over(s.store.clone() as Arc<dyn Store>)),
            ),
            (Place::Embedded, false) => Table::open_with(
                &s.profile,
                "t",
                Box::new(EmbeddedBackend::over(s.store.clone() as Arc<dyn Store>)),
            ),
            (Place::Served { .. }, true) => Table::create(&s.profile, "t", schema.clone()),
            (Place::Served { .. }, false) => Table::open(&s.profile, "t"),
        }
    };
    let records = |t: &mut Table, ids: std::ops::Range<i64>| -> Vec<_> {
        ids.map(|i| {
            let id = i.to_string();
            t.record_from_cells([("id", id.as_str()), ("s", "x")], None)
                .unwrap()
        })
        .collect()
    };
    let mut t = open(true).unwrap();
    let first = records(&mut t, 0..5);
    t.insert(first, &mut |_| {}).unwrap();
    drop(t);

    let mut pending = false;
    for after in 0..10 {
        let mut t = open(false).unwrap();
        let more = records(&mut t, 5..8);
        s.store.fail(Fault::Refused, after);
        let err = t.insert(more, &mut |_| {});
        s.store.heal();
        match err {
            Err(ClientError::Unacknowledged { documents: 3, .. }) => {
                pending = true;
                break;
            }
            Err(_) => {}
            Ok(r) => panic!("the insertion went through: {r:?}"),
        }
    }
    assert!(pending, "no insertion left its update pending");

    s.store.fail(Fault::Refused, 0);
    let mut t = open(false).unwrap_or_else(|e| panic!("open: {e}"));
    assert_eq!(t.pending_records(), 3);
    assert_eq!(t.len(), 5);
    let answer = t
        .query("s = \"x\"", None)
        .unwrap_or_else(|e| panic!("query: {e}"));
    assert_eq!(answer.total, 5);
    // Writes are refused as before, with the pending update kept.
    let more = records(&mut t, 8..9);
    assert!(t.insert(more, &mut |_| {}).is_err());
    drop(t);

    s.store.heal();
    let mut t = open(false).unwrap();
    assert_eq!(t.pending_records(), 0);
    assert_eq!(t.query("s = \"x\"", None).unwrap().total, 8);
}

#[test]
fn an_embedded_table_answers_its_committed_records_while_writes_are_refused() {
    a_table_answers_its_committed_records(false);
}

#[test]
fn a_served_table_answers_its_committed_records_while_writes_are_refused() {
    a_table_answers_its_committed_records(true);
}
