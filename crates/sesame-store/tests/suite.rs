//! The generic store suite over every backend of this crate.

#![allow(clippy::unwrap_used)]

use sesame_core::{IoCounts, Result, Store, WriteBatch};
use sesame_store::suite::Dropping;
use sesame_store::RedbStore;

/// A redb store in a file of its own temporary directory.
struct TempRedb {
    store: RedbStore,
    _dir: tempfile::TempDir,
}

impl TempRedb {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = RedbStore::open(dir.path().join("store.redb")).expect("open redb store");
        Self { store, _dir: dir }
    }
}

impl Store for TempRedb {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.store.get(key)
    }
    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        self.store.get_many(keys)
    }
    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.store.write(batch)
    }
    fn write_if(&self, expect: &[(&[u8], Option<&[u8]>)], batch: &WriteBatch) -> Result<bool> {
        self.store.write_if(expect, batch)
    }
    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.store.scan_prefix(prefix)
    }
    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
    fn backend(&self) -> &'static str {
        self.store.backend()
    }
}

mod memory {
    sesame_store::store_suite!(sesame_store::MemoryStore::new);
}

mod redb_in_memory {
    sesame_store::store_suite!(|| sesame_store::RedbStore::open_in_memory().expect("open"));
}

mod redb_file {
    sesame_store::store_suite!(super::TempRedb::new, 16);
}

mod spec_memory {
    sesame_store::store_suite!(|| sesame_store::open_store("memory").expect("open"));
}

/// A PostgreSQL store in a fresh namespace of the database that
/// `SESAME_TEST_POSTGRES` names (`.ci/run` starts a throwaway server and
/// sets it); the namespace is dropped afterwards. `None`, with a notice,
/// when the variable is unset.
type TempPostgres = Dropping<sesame_store::PostgresStore>;

fn temp_postgres() -> Option<TempPostgres> {
    let Some(url) = std::env::var("SESAME_TEST_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty())
    else {
        // Once per test binary, past the test harness's output capture.
        static NOTICE: std::sync::Once = std::sync::Once::new();
        NOTICE.call_once(|| {
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "note: PostgreSQL store tests skipped: SESAME_TEST_POSTGRES is not set \
                 (see README, \"PostgreSQL tests\")"
            );
        });
        return None;
    };
    let ns = format!(
        "t{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let sep = if url.contains('?') { '&' } else { '?' };
    let store = sesame_store::PostgresStore::open(&format!("{url}{sep}namespace={ns}"))
        .expect("open PostgreSQL store");
    Some(Dropping::new(store, |s| drop(s.destroy())))
}

mod postgres {
    sesame_store::store_suite!(optional super::temp_postgres, 16);
}
