//! What is particular to the redb backend: files, reopening, locking, and
//! `open_store`.

#![allow(clippy::unwrap_used)]

use sesame_core::{Error, IoCounts, Store, WriteBatch};
use sesame_store::{open_store, RedbStore, FORMAT_KEY, FORMAT_VERSION};

#[test]
fn reopen_sees_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.redb");
    let want: Vec<(Vec<u8>, Vec<u8>)>;
    {
        let store = RedbStore::open(&path).unwrap();
        assert_eq!(store.path(), Some(path.as_path()));
        let mut batch = WriteBatch::new();
        for i in 0..1000u32 {
            batch.put(i.to_be_bytes().to_vec(), vec![i as u8; (i % 100) as usize]);
        }
        store.write(batch).unwrap();
        let mut batch = WriteBatch::new();
        for i in (0..1000u32).step_by(3) {
            batch.delete(i.to_be_bytes().to_vec());
        }
        store.write(batch).unwrap();
        store.put(b"", b"empty key").unwrap();
        store.flush().unwrap();
        want = store.scan_prefix(b"").unwrap();
        assert_eq!(want.len(), 1 + 1000 - 334);
    }
    let store = RedbStore::open(&path).unwrap();
    assert_eq!(
        store.io_counts(),
        IoCounts::default(),
        "counts start at zero"
    );
    assert_eq!(store.scan_prefix(b"").unwrap(), want);
    assert_eq!(store.get(b"").unwrap().as_deref(), Some(&b"empty key"[..]));
    drop(store);
    let store = RedbStore::open_checked(&path).unwrap();
    assert_eq!(store.scan_prefix(b"").unwrap(), want);
}

#[test]
fn a_new_store_carries_the_marker_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.redb");
    drop(RedbStore::open(&path).unwrap());
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("new.redb")]);

    let db = redb::Database::open(&path).unwrap();
    let txn = db.begin_read().unwrap();
    let meta = txn
        .open_table(redb::TableDefinition::<&str, &str>::new("sesame.meta"))
        .unwrap();
    assert_eq!(
        meta.get(FORMAT_KEY).unwrap().unwrap().value(),
        FORMAT_VERSION
    );
}

#[test]
fn a_store_open_elsewhere_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.redb");
    let first = RedbStore::open(&path).unwrap();
    first.put(b"k", b"v").unwrap();
    let err = RedbStore::open(&path).unwrap_err();
    assert!(matches!(err, Error::StoreBusy(_)), "{err:?}");
    assert!(err.to_string().contains("already open"), "{err}");
    assert!(err.to_string().contains("store.redb"), "{err}");
    assert_eq!(first.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    drop(first);
    let again = RedbStore::open(&path).unwrap();
    assert_eq!(again.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn bad_paths_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let err = RedbStore::open(dir.path()).unwrap_err();
    assert!(matches!(err, Error::StoreForeign(_)), "{err:?}");
    assert!(err.to_string().contains("directory"), "{err}");

    let missing = dir.path().join("no/such/dir/store.redb");
    let err = RedbStore::open(&missing).unwrap_err();
    assert!(matches!(err, Error::StoreIo(_)), "{err:?}");
    assert!(err.to_string().contains("no/such/dir"), "{err}");
}

#[test]
fn open_store_specs() {
    let dir = tempfile::tempdir().unwrap();
    for spec in ["memory", "mem", "mem:", "memory:"] {
        assert_eq!(open_store(spec).unwrap().backend(), "memory", "{spec}");
    }

    let path = dir.path().join("a.redb");
    let store = open_store(&format!("redb:{}", path.display())).unwrap();
    assert_eq!(store.backend(), "redb");
    store.put(b"k", b"v").unwrap();
    drop(store);
    let store = open_store(path.to_str().unwrap()).unwrap();
    assert_eq!(store.backend(), "redb");
    assert_eq!(store.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));

    // postgres:// goes to the PostgreSQL backend (nothing listens on port 1).
    for spec in [
        "postgres://sesame@127.0.0.1:1/db?connect_timeout=2",
        "postgresql://x@127.0.0.1:1/y",
    ] {
        let err = open_store(spec).err().unwrap();
        assert!(matches!(err, Error::StoreIo(_)), "{err:?}");
        assert!(err.to_string().contains("PostgreSQL"), "{err}");
    }
    let err = open_store("s3://bucket/key").err().unwrap();
    assert!(matches!(err, Error::Unsupported(_)), "{err:?}");
    assert!(err.to_string().contains("\"s3\""), "{err}");
    for spec in ["", "redb:"] {
        let err = open_store(spec).err().unwrap();
        assert!(
            matches!(err, Error::InvalidArgument(_)),
            "{spec:?}: {err:?}"
        );
    }
}

/// One transaction per batch: a large batch is fast enough to load an index.
#[test]
fn a_large_batch_is_one_commit() {
    let store = RedbStore::open_in_memory().unwrap();
    let mut batch = WriteBatch::with_capacity(20_000);
    for i in 0..20_000u32 {
        batch.put(i.to_be_bytes().to_vec(), i.to_le_bytes().to_vec());
    }
    store.write(batch).unwrap();
    assert_eq!(store.io_counts().writes, 20_000);
    assert_eq!(store.scan_prefix(&[0, 0, 0x40]).unwrap().len(), 256);
    assert_eq!(
        store.get(&19_999u32.to_be_bytes()).unwrap(),
        Some(19_999u32.to_le_bytes().to_vec())
    );
}

/// The backup of a redb store documented in `docs/storage.md`: with the
/// store closed (the server stopped), a copy of the file is a complete
/// store; restored elsewhere it opens, verifies and holds every pair.
#[test]
fn a_copied_closed_store_restores_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.redb");
    let want = {
        let store = RedbStore::open(&path).unwrap();
        let mut batch = WriteBatch::new();
        for i in 0..500u32 {
            batch.put(i.to_le_bytes().to_vec(), vec![i as u8; (i % 64) as usize]);
        }
        store.write(batch).unwrap();
        store.flush().unwrap();
        store.scan_prefix(b"").unwrap()
    };
    let backup = dir.path().join("backup.redb");
    std::fs::copy(&path, &backup).unwrap();
    let restored_path = dir.path().join("restored.redb");
    std::fs::copy(&backup, &restored_path).unwrap();
    let restored = RedbStore::open(&restored_path).unwrap();
    restored.verify().unwrap();
    assert_eq!(restored.scan_prefix(b"").unwrap(), want);
}

#[test]
fn compaction_keeps_every_live_pair_and_shrinks_a_file_of_deleted_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let store = RedbStore::open(&path).unwrap();
    for round in 0u32..8 {
        let mut b = WriteBatch::new();
        for i in 0u32..2_000 {
            b.put(
                [round.to_be_bytes(), i.to_be_bytes()].concat(),
                vec![7u8; 200],
            );
        }
        store.write(b).unwrap();
    }
    let mut b = WriteBatch::new();
    for round in 1u32..8 {
        for i in 0u32..2_000 {
            b.delete([round.to_be_bytes(), i.to_be_bytes()].concat());
        }
    }
    store.write(b).unwrap();
    let before = std::fs::metadata(&path).unwrap().len();
    assert!(store.compact().unwrap(), "freed pages were reclaimed");
    let after = std::fs::metadata(&path).unwrap().len();
    assert!(after < before, "{after} < {before}");
    let live = store.scan_prefix(b"").unwrap();
    let data: Vec<_> = live.iter().filter(|(k, _)| k.len() == 8).collect();
    assert_eq!(data.len(), 2_000);
    assert!(data
        .iter()
        .all(|(k, v)| k.starts_with(&0u32.to_be_bytes()) && v.len() == 200));
    drop(store);
    let again = RedbStore::open(&path).unwrap();
    assert_eq!(
        again.get(&[0, 0, 0, 0, 0, 0, 0, 5]).unwrap(),
        Some(vec![7u8; 200])
    );
}

/// Every pair of a store, in key order.
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// A store whose file holds many free pages: rounds of large values, each
/// round overwriting the one before.
fn churned_store(path: &std::path::Path) -> (RedbStore, Pairs) {
    let store = RedbStore::open(path).unwrap();
    for round in 0u32..6 {
        let mut b = WriteBatch::new();
        for i in 0u32..400 {
            b.put(
                i.to_be_bytes().to_vec(),
                vec![round as u8; 3_000 + (i % 7) as usize * 1_000],
            );
        }
        store.write(b).unwrap();
    }
    store.put(b"", b"empty key").unwrap();
    let want = store.scan_prefix(b"").unwrap();
    (store, want)
}

#[test]
fn space_accounts_for_the_stored_bytes_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let (store, want) = churned_store(&path);
    let space = store.space().unwrap();
    let live: u64 = want.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
    assert_eq!(space.file_bytes, std::fs::metadata(&path).unwrap().len());
    assert!(
        space.stored_bytes >= live,
        "{space:?} holds {live} live bytes"
    );
    assert!(
        space.allocated_pages * space.page_size >= space.stored_bytes,
        "{space:?}"
    );
    assert!(
        space.free_bytes() > 0,
        "six rounds of overwrites leave free pages: {space:?}"
    );
    assert_eq!(
        space.free_bytes(),
        space.file_bytes - space.allocated_pages * space.page_size
    );
}

#[test]
fn vacuum_keeps_every_pair_gives_back_free_pages_and_keeps_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let (store, want) = churned_store(&path);
    // A crashed vacuum's temporary file is removed by the next one.
    let stale = dir.path().join(".s.redb.sesame-vacuum-1");
    std::fs::write(&stale, b"left by a crash").unwrap();
    let (before, after) = store.vacuum().unwrap();
    assert!(!stale.exists(), "the stale temporary file is gone");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("s.redb")]);
    assert_eq!(store.scan_prefix(b"").unwrap(), want);
    assert_eq!(after.stored_bytes, before.stored_bytes);
    assert!(
        after.file_bytes < before.file_bytes / 2,
        "{} bytes, from {}",
        after.file_bytes,
        before.file_bytes
    );
    assert!(
        after.allocated_pages <= before.allocated_pages,
        "{before:?} {after:?}"
    );
    assert_eq!(after.file_bytes, std::fs::metadata(&path).unwrap().len());
    // The handle never let go of the file, and writes on.
    assert!(matches!(RedbStore::open(&path), Err(Error::StoreBusy(_))));
    store.put(b"after", b"vacuum").unwrap();
    drop(store);
    let again = RedbStore::open(&path).unwrap();
    again.verify().unwrap();
    let mut expected = want.clone();
    expected.push((b"after".to_vec(), b"vacuum".to_vec()));
    expected.sort();
    assert_eq!(again.scan_prefix(b"").unwrap(), expected);
}

#[test]
fn vacuum_of_a_store_in_memory_is_refused() {
    let store = RedbStore::open_in_memory().unwrap();
    store.put(b"k", b"v").unwrap();
    assert!(matches!(store.vacuum(), Err(Error::InvalidArgument(_))));
    assert_eq!(store.get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// The state a process killed while opening a crashed store can leave:
/// redb's repair on open commits with the header marked clean and a
/// layout shrunk to drop the free pages at the end, then truncates the
/// file; killed between the two, the header says "clean" and the file is
/// longer than the header's layout. (Here: a cleanly closed store with
/// free pages appended.) Opening it must recover the store, not panic.
#[test]
fn a_clean_header_over_a_longer_file_is_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.redb");
    let want;
    {
        let store = RedbStore::open(&path).unwrap();
        let mut batch = WriteBatch::new();
        for i in 0..500u32 {
            batch.put(i.to_be_bytes().to_vec(), vec![i as u8; 200]);
        }
        store.write(batch).unwrap();
        want = store.scan_prefix(b"").unwrap();
    }
    let len = std::fs::metadata(&path).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(len + 64 * 4096).unwrap();
    drop(file);
    for round in 0..2 {
        let store = RedbStore::open(&path)
            .unwrap_or_else(|e| panic!("open {round} of the longer file: {e}"));
        let mut got = store.scan_prefix(b"").unwrap();
        got.retain(|(k, _)| k != b"after");
        assert!(got == want, "open {round}: the pairs changed");
        store.put(b"after", b"recovery").unwrap();
        assert_eq!(
            store.get(b"after").unwrap().as_deref(),
            Some(&b"recovery"[..])
        );
    }
    let store = RedbStore::open_checked(&path).unwrap();
    assert_eq!(store.scan_prefix(b"").unwrap().len(), want.len() + 1);
}
