//! The engine's unit tests: two engines over one store (two servers on
//! one database), replay records, compare-and-swap records, generations,
//! write-once batches, a packed index's pending record under a second
//! server's merge.

use super::indexes::RESERVATION_TTL_SECS;
use super::*;
use crate::records::now_unix;
use sesame_core::wire;
use sesame_store::documents;
use sesame_store::MemoryStore;
use std::collections::BTreeMap;

/// Creates index `index` of tenant `t` bound to `scheme`.
fn create(engine: &Engine, index: &str, scheme: &str) -> Result<proto::IndexInfo, EngineError> {
    engine.create_index(
        "t",
        proto::CreateIndexRequest {
            index: index.into(),
            scheme: scheme.into(),
            params: String::new(),
            request_id: Vec::new(),
        },
    )
}

fn write(name: &str, expected: u64, value: Option<&[u8]>) -> proto::RecordWrite {
    proto::RecordWrite {
        name: name.into(),
        expected,
        delete: value.is_none(),
        value: value.unwrap_or_default().to_vec(),
    }
}

/// Records `names` of index `a` of tenant `t` (those at the version
/// `known` gives for them without their value).
fn read_records(engine: &Engine, names: &[&str], known: Vec<u64>) -> Vec<proto::Record> {
    let req = proto::ReadRecordsRequest {
        index: "a".into(),
        names: names.iter().map(|n| (*n).to_owned()).collect(),
        known,
    };
    engine.read_records("t", req).expect("a read").records
}

/// `writes` to the records of index `a` of tenant `t`, all or nothing.
fn write_records(engine: &Engine, writes: Vec<proto::RecordWrite>) -> proto::WriteRecordsResponse {
    let req = proto::WriteRecordsRequest {
        index: "a".into(),
        writes,
    };
    engine.write_records("t", req).expect("a record write")
}

/// One call to index `index` (scheme `fast`, generation 0) of tenant
/// `t`: a write-once batch that puts `entries`.
fn fast_put(
    engine: &Engine,
    index: &str,
    entries: Vec<([u8; 32], [u8; 25])>,
) -> Result<proto::CallResponse, EngineError> {
    let request = sesame_sse::fast::Request::Put {
        reset: false,
        entries,
    };
    engine.call(
        "t",
        proto::CallRequest {
            index: index.into(),
            scheme: "fast".into(),
            generation: 0,
            request_id: Vec::new(),
            messages: vec![wire::encode(&request).expect("encoded")],
        },
    )
}

/// The value a packed index stores for `label` (its key is `e` and the
/// label), read through `view`.
fn packed_entry(view: &sesame_store::packed::Packed, label: &[u8]) -> Option<Vec<u8>> {
    let mut key = vec![b'e'];
    key.extend_from_slice(label);
    view.get(&key).expect("a read")
}

/// A memory store whose reads take a while, so that requests of two
/// engines overlap between their reads and their commits.
struct Unhurried(MemoryStore);

impl Unhurried {
    /// The memory store, after a pause: what its reads go through.
    fn paused(&self) -> &MemoryStore {
        std::thread::sleep(std::time::Duration::from_micros(50));
        &self.0
    }
}

impl Store for Unhurried {
    sesame_store::forward_store!(|s| s.0; write, write_if, scan_prefix, io_counts);
    sesame_store::forward_store!(|s| s.paused(); get, get_many, scan_from);
    fn ordered_probes(&self) -> bool {
        true
    }
    fn backend(&self) -> &'static str {
        "unhurried-memory"
    }
}

/// Two engines over one store are two servers on one database: each
/// has its own in-memory locks, so only the store's conditional
/// commits keep their read-modify-writes of one index apart. Threads
/// of both add documents (each add rewrites the index's document
/// count) and move one record version by version; no add and no
/// version is lost, and the name of a new index is taken once.
impl Engine {
    fn tenant_indexes(&self, tenant: &str) -> Result<BTreeMap<String, u64>, EngineError> {
        Ok(self.read_places(tenant)?.1)
    }

    fn put_tenant_indexes(&self, tenant: &str, names: &BTreeMap<String, u64>) {
        self.store
            .put(
                &keys::tenant_key(tenant),
                &wire::encode(names).expect("encoded"),
            )
            .expect("a put");
    }
}

/// A request whose commit was applied but whose confirmation failed
/// (the store's answer lost, as when a Redis master has no replica to
/// confirm to) is answered from its replay record only once the store
/// confirms the record: while writes fail, the retry fails too; once
/// they work, it gets the first answer, applied once.
#[test]
fn an_answer_from_a_replay_record_waits_for_the_store_to_confirm_it() {
    use sesame_store::faulty::{Fault, FaultyStore};
    let store = Arc::new(FaultyStore::new());
    let engine = Engine::new(store.clone(), Limits::default()).expect("a fresh engine");
    create(&engine, "a", "fast").expect("created");
    let put = || {
        engine.put_documents(
            "t",
            proto::PutDocumentsRequest {
                index: "a".into(),
                request_id: vec![7; 16],
                documents: vec![proto::Document {
                    id: 1,
                    blob: vec![1; 8],
                }],
                packed: false,
            },
        )
    };
    store.fail(Fault::AnswerLost, 0);
    assert!(put().is_err(), "the commit's answer is lost");
    store.fail(Fault::Refused, 0);
    let retry = put().unwrap_err();
    assert!(
        !matches!(retry, EngineError::Replayed { .. }),
        "answered from an unconfirmed record: {retry:?}"
    );
    store.heal();
    let retry = put().unwrap_err();
    assert!(matches!(retry, EngineError::Replayed { .. }), "{retry:?}");
    let docs = documents::list(store.inner(), &keys::doc_prefix("t", "a")).expect("a scan");
    assert_eq!(docs.len(), 1, "applied once");
}

/// Two engines on one store (two servers) creating indexes of one
/// tenant at once never pass its limit; a dropped index frees its
/// place; a place reserved by a creation that never finished (a server
/// that died between reserving and creating) is taken back once it is
/// old, not while it is fresh.
#[test]
fn two_engines_keep_to_the_index_limit_together() {
    const LIMIT: usize = 3;
    const THREADS: usize = 8;
    let store = Arc::new(Unhurried(MemoryStore::new()));
    let limits = Limits {
        max_indexes_per_tenant: LIMIT,
        ..Limits::default()
    };
    let engines = [
        Engine::new(store.clone(), limits).expect("a fresh engine"),
        Engine::new(store.clone(), limits).expect("a second engine"),
    ];
    let create = |engine: &Engine, name: &str| create(engine, name, "fast");
    for round in 0..4 {
        let start = std::sync::Barrier::new(THREADS);
        let made = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for t in 0..THREADS {
                let (engine, start, made) = (&engines[t % 2], &start, &made);
                scope.spawn(move || {
                    start.wait();
                    match create(engine, &format!("r{round}-{t}")) {
                        Ok(_) => {
                            made.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(EngineError::ResourceExhausted(_)) => {}
                        Err(e) => panic!("{e:?}"),
                    }
                });
            }
        });
        let listed = engines[0]
            .list_indexes("t", proto::ListIndexesRequest {})
            .expect("a list")
            .indexes;
        assert_eq!(listed.len(), LIMIT, "round {round}: {listed:?}");
        assert_eq!(made.load(Ordering::SeqCst), LIMIT, "round {round}");
        for i in listed {
            engines[1]
                .drop_index("t", proto::DropIndexRequest { index: i.index })
                .expect("dropped");
        }
    }
    // A reservation that never became an index: it holds its place
    // while fresh, and is taken back once old.
    for name in ["a", "b"] {
        create(&engines[0], name).expect("created");
    }
    let mut names = engines[0].tenant_indexes("t").expect("the record");
    names.insert("ghost".into(), now_unix());
    engines[0].put_tenant_indexes("t", &names);
    assert!(matches!(
        create(&engines[1], "c"),
        Err(EngineError::ResourceExhausted(_))
    ));
    names.insert("ghost".into(), now_unix() - RESERVATION_TTL_SECS - 1);
    engines[0].put_tenant_indexes("t", &names);
    create(&engines[1], "c").expect("the old reservation was taken back");
    let names = engines[0].tenant_indexes("t").expect("the record");
    assert_eq!(
        names.keys().map(String::as_str).collect::<Vec<_>>(),
        ["a", "b", "c"]
    );
}

#[test]
fn two_engines_on_one_store_lose_no_commit() {
    const THREADS: u64 = 4;
    const ADDS: u64 = 60;
    let store = Arc::new(Unhurried(MemoryStore::new()));
    let engines = [
        Engine::new(store.clone(), Limits::default()).expect("a fresh engine"),
        Engine::new(store.clone(), Limits::default()).expect("a second engine"),
    ];
    let create = proto::CreateIndexRequest {
        index: "a".into(),
        scheme: "fast".into(),
        params: String::new(),
        request_id: Vec::new(),
    };
    engines[0]
        .create_index("t", create.clone())
        .expect("created");
    let again = engines[1].create_index("t", create).unwrap_err();
    assert!(matches!(again, EngineError::AlreadyExists(_)), "{again:?}");
    let start = std::sync::Barrier::new(THREADS as usize);
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let engine = &engines[(t % 2) as usize];
            let start = &start;
            scope.spawn(move || {
                start.wait();
                for i in 0..ADDS {
                    let added = engine
                        .put_documents(
                            "t",
                            proto::PutDocumentsRequest {
                                index: "a".into(),
                                request_id: Vec::new(),
                                documents: vec![proto::Document {
                                    id: t * 1000 + i,
                                    blob: vec![t as u8; 8],
                                }],
                                packed: false,
                            },
                        )
                        .expect("an add")
                        .added;
                    assert_eq!(added, 1);
                    loop {
                        let held = read_records(engine, &["n"], Vec::new())[0].version;
                        let writes = vec![write("n", held, Some(&held.to_be_bytes()))];
                        if write_records(engine, writes).committed {
                            break;
                        }
                    }
                }
            });
        }
    });
    let info = engines[1]
        .list_indexes("t", proto::ListIndexesRequest {})
        .expect("a listing")
        .indexes;
    assert_eq!(info.len(), 1);
    assert_eq!(
        info[0].documents,
        THREADS * ADDS,
        "a document count was lost"
    );
    let n = read_records(&engines[0], &["n"], Vec::new());
    assert_eq!(n[0].version, THREADS * ADDS, "a record version was lost");
    eprintln!(
        "two engines: {} and {} commits ran again",
        engines[0].commit_conflicts(),
        engines[1].commit_conflicts()
    );
}

#[test]
fn records_are_compare_and_swap_all_or_nothing() {
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::new(store.clone(), Limits::default()).expect("a fresh engine");
    let create = |index: &str| proto::CreateIndexRequest {
        index: index.into(),
        scheme: "fast".into(),
        params: String::new(),
        request_id: Vec::new(),
    };
    engine.create_index("t", create("a")).expect("created");
    let put = |writes: Vec<proto::RecordWrite>| write_records(&engine, writes);
    let read = |names: &[&str], known: Vec<u64>| read_records(&engine, names, known);
    assert!(put(vec![write("state", 0, Some(b"one"))]).committed);
    // A stale version changes nothing, and says what is there.
    let r = put(vec![
        write("intent-x", 0, Some(b"i")),
        write("state", 0, Some(b"two")),
    ]);
    assert!(!r.committed);
    assert_eq!(
        r.current.iter().map(|c| c.version).collect::<Vec<_>>(),
        [0, 1]
    );
    assert_eq!(r.current[1].value, b"one");
    assert_eq!(read(&["intent-x"], vec![])[0].version, 0, "nothing applied");
    assert!(
        put(vec![
            write("intent-x", 0, Some(b"i")),
            write("state", 1, Some(b"two")),
        ])
        .committed
    );
    let got = read(&["state", "intent-x", "none"], vec![]);
    assert_eq!((got[0].version, got[0].value.as_slice()), (2, &b"two"[..]));
    assert_eq!((got[1].version, got[2].version), (1, 0));
    // A reader that knows the version gets no value.
    assert!(read(&["state"], vec![2])[0].value.is_empty());
    // Any version, and deletion.
    assert!(put(vec![write("state", ANY_VERSION, Some(b"three"))]).committed);
    assert_eq!(read(&["state"], vec![])[0].version, 3);
    assert!(put(vec![write("intent-x", 1, None)]).committed);
    assert_eq!(read(&["intent-x"], vec![])[0].version, 0);
    // Bad names and repeats are refused.
    for bad in [
        vec![write("a/b", 0, Some(b"x"))],
        vec![write("s", 0, Some(b"x")), write("s", 0, Some(b"y"))],
    ] {
        assert!(engine
            .write_records(
                "t",
                proto::WriteRecordsRequest {
                    index: "a".into(),
                    writes: bad
                }
            )
            .is_err());
    }
    // Dropping the index drops its records.
    engine
        .drop_index("t", proto::DropIndexRequest { index: "a".into() })
        .expect("dropped");
    assert!(store.scan_prefix(b"v/").expect("a scan").is_empty());
}

#[test]
fn only_older_generations_are_dropped_when_asked() {
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::new(store.clone(), Limits::default()).expect("a fresh engine");
    create(&engine, "a", "pibas").expect("created");
    for g in [1u64, 2, 3, 10] {
        let mut k = keys::generation_prefix("t", "a", g);
        k.push(b'k');
        store.put(&k, b"v").expect("a put");
    }
    engine
        .drop_generations(
            "t",
            proto::DropGenerationsRequest {
                index: "a".into(),
                keep: 3,
                only_older: true,
            },
        )
        .expect("dropped");
    let left: Vec<Vec<u8>> = store
        .scan_prefix(&keys::index_prefix("t", "a"))
        .expect("a scan")
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(left, [b"i/t/a/10/k".to_vec(), b"i/t/a/3/k".to_vec()]);
}

#[test]
fn a_write_once_batch_that_changes_a_stored_value_is_a_conflict() {
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::new(store.clone(), Limits::default()).expect("a fresh engine");
    store.put(b"k", b"first").expect("a memory write");
    let mut same = WriteBatch::new();
    same.put(b"k".to_vec(), b"first".to_vec())
        .put(b"new".to_vec(), b"x".to_vec())
        .delete(b"gone".to_vec());
    assert!(engine.check_write_once(&same).is_ok());
    let mut other = WriteBatch::new();
    other
        .put(b"new".to_vec(), b"x".to_vec())
        .put(b"k".to_vec(), b"second".to_vec());
    let err = engine.check_write_once(&other).unwrap_err();
    assert!(matches!(err, EngineError::Conflict(_)), "{err}");
}

/// FAST's entries as two engines on one store write them at once into
/// one packed index: each commit rewrites the chunks its entries fall
/// into, planned from the chunks as read after the commit token, so a
/// plan made stale by the other engine's commit fails and is made
/// again. Every entry of every call must be found at the end; an
/// update that would change an entry is a conflict.
#[test]
fn two_engines_writing_one_packed_index_lose_no_entry() {
    const THREADS: u32 = 4;
    const CALLS: u32 = 25;
    const ENTRIES: u32 = 40;
    let store = Arc::new(Unhurried(MemoryStore::new()));
    let engines = [
        Engine::new(store.clone(), Limits::default()).expect("a fresh engine"),
        Engine::new(store.clone(), Limits::default()).expect("a second engine"),
    ];
    create(&engines[0], "a", "fast").expect("created");
    let meta = engines[1].meta("t", "a").expect("its record");
    assert!(meta.packed && meta.spread, "{meta:?}");
    let label = |t: u32, c: u32, e: u32| {
        let mut l = [0u8; 32];
        l[..12]
            .copy_from_slice(&sha2::Sha256::digest([t, c, e].map(u32::to_be_bytes).concat())[..12]);
        l
    };
    let call = |engine: &Engine, entries| fast_put(engine, "a", entries);
    let start = std::sync::Barrier::new(THREADS as usize);
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let engine = &engines[(t % 2) as usize];
            let (start, call) = (&start, &call);
            scope.spawn(move || {
                start.wait();
                for c in 0..CALLS {
                    let entries = (0..ENTRIES)
                        .map(|e| (label(t, c, e), [t as u8; 25]))
                        .collect();
                    call(engine, entries).expect("a call");
                }
            });
        }
    });
    let chunks = meta.chunks_prefix("t", "a", 0);
    let stored = sesame_store::packed::pairs_under(store.as_ref(), &chunks[..chunks.len() - 1])
        .expect("the entries");
    assert_eq!(stored.len() as u32, THREADS * CALLS * ENTRIES);
    let view = meta.packed_view(store.clone(), ("t", "a"), 0);
    for t in 0..THREADS {
        for c in 0..CALLS {
            for e in 0..ENTRIES {
                let value = packed_entry(&view, &label(t, c, e));
                assert_eq!(value, Some(vec![t as u8; 25]), "entry {t}/{c}/{e}");
            }
        }
    }
    // The generation: its chunks and its pending record.
    let generation = &chunks[..chunks.len() - 1];
    let before = store.scan_prefix(generation).expect("a scan");
    let err = call(&engines[0], vec![(label(1, 1, 1), [9; 25])]).unwrap_err();
    assert!(matches!(err, EngineError::Conflict(_)), "{err:?}");
    assert_eq!(store.scan_prefix(generation).expect("a scan"), before);
}

/// The packed chunks an engine keeps between requests
/// (`engine/chunk_cache.rs`) against a second server on the same store:
/// engine `a` caches the index's chunks; engine `b` commits an entry;
/// `a`'s next update of that entry must see it (a write-once scheme's
/// overwrite is a conflict, and `b`'s entry stays) and a later update of
/// `a` must keep `b`'s entry, so a cached copy is used only under the
/// commit token it was read or written under.
#[test]
fn a_second_server_sharing_the_store_is_seen_through_the_chunk_cache() {
    let store = Arc::new(Unhurried(MemoryStore::new()));
    let a = Engine::new(store.clone(), Limits::default()).expect("a fresh engine");
    let b = Engine::new(store.clone(), Limits::default()).expect("a second engine");
    create(&a, "i", "fast").expect("created");
    let call = |engine: &Engine, entries| fast_put(engine, "i", entries);
    let label = |n: u8| [n; 32];
    for n in 0..4 {
        call(&a, vec![(label(n), [1; 25])]).expect("an update of a");
    }
    let (hits, _) = a.chunk_cache_counts();
    assert!(
        hits >= 2,
        "a's updates after its first use its cache: {hits} hits"
    );
    call(&b, vec![(label(9), [2; 25])]).expect("an update of b");
    let err = call(&a, vec![(label(9), [3; 25])]).unwrap_err();
    assert!(matches!(err, EngineError::Conflict(_)), "{err:?}");
    call(&a, vec![(label(10), [1; 25])]).expect("a later update of a");
    let meta = a.meta("t", "i").expect("its record");
    let view = meta.packed_view(store.clone(), ("t", "i"), 0);
    let entry = |n: u8| packed_entry(&view, &label(n));
    assert_eq!(entry(9), Some(vec![2; 25]), "b's entry");
    assert_eq!(entry(10), Some(vec![1; 25]), "a's later entry");
    assert_eq!(entry(0), Some(vec![1; 25]), "a's first entry");
}

/// Documents put with `packed` into an index that holds none lie in a
/// packed view under `d/t/<index>/#` (a store with ordered probes), a
/// few stored pairs for 209 documents; an index that holds plain
/// documents stays plain when a later put asks, and a packed one stays
/// packed when a later put does not: puts, gets, lists and deletes
/// answer alike in both, and a dropped index leaves nothing behind.
#[test]
fn documents_asked_packed_are_packed_and_answer_as_plain_ones() {
    let store = Arc::new(MemoryStore::new());
    let engine = Engine::new(store.clone(), Limits::default()).expect("a fresh engine");
    for index in ["a", "b"] {
        create(&engine, index, "fast").expect("created");
    }
    let put = |index: &str, ids: std::ops::Range<u64>, packed: bool| {
        let req = proto::PutDocumentsRequest {
            index: index.into(),
            request_id: Vec::new(),
            documents: ids
                .map(|id| proto::Document {
                    id,
                    blob: vec![id as u8; 30 + (id % 5) as usize],
                })
                .collect(),
            packed,
        };
        engine.put_documents("t", req).expect("a put").added
    };
    assert_eq!(put("a", 1..200, true), 199);
    assert_eq!(put("b", 1..200, false), 199);
    assert_eq!(put("b", 200..210, true), 10);
    assert_eq!(put("a", 200..210, false), 10);
    // The same content again adds nothing; other content is refused.
    assert_eq!(put("a", 100..105, true), 0);
    let clash = proto::PutDocumentsRequest {
        index: "a".into(),
        request_id: Vec::new(),
        documents: vec![proto::Document {
            id: 7,
            blob: vec![9; 3],
        }],
        packed: true,
    };
    assert!(matches!(
        engine.put_documents("t", clash),
        Err(EngineError::Conflict(_))
    ));
    let stored = |index: &str| {
        store
            .scan_prefix(&keys::doc_prefix("t", index))
            .expect("a scan")
    };
    let under_a = stored("a");
    assert!(under_a.len() <= 4, "{} stored pairs", under_a.len());
    let chunk_mark = keys::doc_prefix("t", "a").len();
    assert!(under_a.iter().all(|(k, _)| k[chunk_mark] == b'#'));
    assert!(stored("b").len() >= 209);
    assert!(stored("b").iter().all(|(k, _)| k[chunk_mark] != b'#'));
    for index in ["a", "b"] {
        let list = |engine: &Engine| {
            let req = proto::ListDocumentsRequest {
                index: index.into(),
            };
            engine.list_documents("t", req).expect("a list").ids
        };
        assert_eq!(list(&engine), (1..210).collect::<Vec<u64>>(), "{index}");
        let req = proto::GetDocumentsRequest {
            index: index.into(),
            ids: vec![5, 150, 205, 999],
        };
        let got = engine.get_documents("t", req).expect("a get").documents;
        let want = |id: u64| vec![id as u8; 30 + (id % 5) as usize];
        assert_eq!(got[0].blob, want(5), "{index}");
        assert_eq!(got[1].blob, want(150), "{index}");
        assert_eq!(got[2].blob, want(205), "{index}");
        assert!(!got[3].found, "{index}");
        let req = proto::DeleteDocumentsRequest {
            index: index.into(),
            request_id: Vec::new(),
            ids: vec![5, 205, 999],
        };
        let deleted = engine.delete_documents("t", req).expect("a delete").deleted;
        assert_eq!(deleted, vec![true, true, false], "{index}");
        let left: Vec<u64> = (1..210).filter(|&i| i != 5 && i != 205).collect();
        assert_eq!(list(&engine), left, "{index}");
    }
    let drop = proto::DropIndexRequest { index: "a".into() };
    engine.drop_index("t", drop).expect("dropped");
    assert!(stored("a").is_empty(), "the packed documents are gone");

    // A store without ordered probes (PostgreSQL, a Redis Cluster) keeps
    // documents plain, asked or not.
    let unordered = Arc::new(Unordered(MemoryStore::new()));
    let engine = Engine::new(unordered.clone(), Limits::default()).expect("a fresh engine");
    create(&engine, "a", "fast").expect("created");
    let req = proto::PutDocumentsRequest {
        index: "a".into(),
        request_id: Vec::new(),
        documents: (1..50)
            .map(|id| proto::Document {
                id,
                blob: vec![1; 30],
            })
            .collect(),
        packed: true,
    };
    assert_eq!(engine.put_documents("t", req).expect("a put").added, 49);
    let plain = unordered
        .0
        .scan_prefix(&keys::doc_prefix("t", "a"))
        .expect("a scan");
    assert!(plain.len() >= 49);
    assert!(plain.iter().all(|(k, _)| k[chunk_mark] != b'#'));
}

/// A memory store that says it has no ordered probes, as PostgreSQL and
/// a Redis Cluster do.
struct Unordered(MemoryStore);

impl Store for Unordered {
    sesame_store::forward_store!(|s| s.0; write, write_if, scan_prefix, io_counts, get, get_many, scan_from);
    fn backend(&self) -> &'static str {
        "unordered-memory"
    }
}

/// A memory store that runs `hook` once, right after the next read of a
/// commit token (`c/...`) returns: another server's commit landing
/// between a request's read of the token and its reads of the entries.
struct AfterTokenRead {
    inner: Arc<MemoryStore>,
    hook: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl AfterTokenRead {
    fn after<T>(&self, keys: &[&[u8]], read: sesame_core::Result<T>) -> sesame_core::Result<T> {
        if keys.iter().any(|k| k.starts_with(b"c/")) {
            let hook = self
                .hook
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some(hook) = hook {
                hook();
            }
        }
        read
    }
}

impl Store for AfterTokenRead {
    fn get(&self, key: &[u8]) -> sesame_core::Result<Option<Vec<u8>>> {
        self.after(&[key], self.inner.get(key))
    }

    fn get_many(&self, keys: &[&[u8]]) -> sesame_core::Result<Vec<Option<Vec<u8>>>> {
        self.after(keys, self.inner.get_many(keys))
    }

    sesame_store::forward_store!(|s| s.inner; write, write_if, write_if_group, commit_groups,
        scan_prefix, scan_from, ordered_probes, io_counts, backend);
}

/// A search on server `a` while server `b` merges the index's pending
/// record into its chunks, between `a`'s read of the commit token and its
/// reads of the entries: the search finds every document. `a` reads the
/// record and the chunks from its cache under the token it read, one
/// state; with the cache holding the chunks alone (the record read from
/// the store, already deleted by the merge, and the chunks from the
/// cache, from before it) the search found none of them.
#[test]
fn a_merge_by_another_server_during_a_search_hides_no_entry() {
    use rand_chacha::rand_core::SeedableRng;
    use sesame_sse::UpdateOp;

    let memory = Arc::new(MemoryStore::new());
    let hooked = Arc::new(AfterTokenRead {
        inner: memory.clone(),
        hook: Mutex::new(None),
    });
    let a = Arc::new(Engine::new(hooked.clone(), Limits::default()).expect("a fresh engine"));
    let b = Arc::new(Engine::new(memory.clone(), Limits::default()).expect("a second engine"));
    create(&a, "i", "fast").expect("created");
    let scheme = sesame_sse::scheme("fast").expect("FAST");
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
    let mut client = (scheme.new_client)(&mut rng, &sesame_core::Params::new()).expect("a client");
    let call = |engine: &Engine, messages: Vec<Vec<u8>>| {
        engine
            .call(
                "t",
                proto::CallRequest {
                    index: "i".into(),
                    scheme: "fast".into(),
                    generation: 0,
                    request_id: Vec::new(),
                    messages,
                },
            )
            .expect("a call")
    };
    for doc in 1..=4u64 {
        let messages = client
            .prepare_update(&mut rng, UpdateOp::Add, doc, &[b"w".to_vec()])
            .expect("prepared")
            .expect("FAST prepares its updates");
        call(&a, messages);
    }
    let meta = a.meta("t", "i").expect("its record");
    let record = sesame_store::packed::pending_key(&meta.generation_prefix("t", "i", 0));
    assert!(
        memory.get(&record).expect("a read").is_some(),
        "the updates were not held pending"
    );
    // b's put of more pairs than a record takes merges the record.
    let b_for_hook = b.clone();
    *hooked.hook.lock().expect("the hook") = Some(Box::new(move || {
        let entries = (0..=sesame_store::packed::PENDING_OPS as u8)
            .map(|n| ([n; 32], [n; 25]))
            .collect();
        fast_put(&b_for_hook, "i", entries).expect("b's merging put");
    }));
    let token = client
        .search_token(&mut rng, b"w")
        .expect("a token")
        .expect("a keyword it added");
    let response = call(&a, vec![token]);
    assert!(
        hooked.hook.lock().expect("the hook").is_none(),
        "b never merged"
    );
    assert_eq!(
        memory.get(&record).expect("a read"),
        None,
        "b's put did not merge the record"
    );
    let found = client
        .resolve(b"w", &response.messages[0])
        .expect("resolved");
    assert_eq!(found, vec![1, 2, 3, 4]);
}
