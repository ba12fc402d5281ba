//! The in-memory backend.

use std::collections::BTreeMap;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use sesame_core::{IoCounter, Result, Store, WriteBatch, WriteOp};

use crate::RangeScan;

/// A store in a `BTreeMap` behind a lock: nothing survives the process.
///
/// A batch is applied under the write lock, so readers see all of it or none
/// of it. Readers run in parallel; writers one at a time.
#[derive(Debug, Default)]
pub struct MemoryStore {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
    io: IoCounter,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    // A panic elsewhere cannot leave the map half-written: no code that holds
    // the lock panics between two operations of a batch short of running out
    // of memory, which aborts. So a poisoned lock is safe to take over.
    fn read_map(&self) -> RwLockReadGuard<'_, BTreeMap<Vec<u8>, Vec<u8>>> {
        self.map.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_map(&self) -> RwLockWriteGuard<'_, BTreeMap<Vec<u8>, Vec<u8>>> {
        self.map.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl MemoryStore {
    /// The pairs `scan` reads (for [`crate::ordered_scans`]).
    fn ordered_range(&self, scan: RangeScan<'_>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let map = self.read_map();
        let clone = |(k, v): (&Vec<u8>, &Vec<u8>)| (k.clone(), v.clone());
        let range = map.range::<[u8], _>(scan.range);
        Ok(if scan.descending {
            range.rev().take(scan.limit).map(clone).collect()
        } else {
            range.take(scan.limit).map(clone).collect()
        })
    }
}

impl Store for MemoryStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let value = self.read_map().get(key).cloned();
        self.io.read(value.as_ref().map_or(0, Vec::len));
        Ok(value)
    }

    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let map = self.read_map();
        Ok(keys
            .iter()
            .map(|key| {
                let value = map.get(*key).cloned();
                self.io.read(value.as_ref().map_or(0, Vec::len));
                value
            })
            .collect())
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        // Marked begun before the lock and settled after it is released
        // (the guard is dropped last): see `Store::write_marks`.
        let _marked = self.io.begin_write();
        let mut map = self.write_map();
        self.io.batch(&batch);
        for op in batch.into_ops() {
            match op {
                WriteOp::Put { key, value } => {
                    map.insert(key, value);
                }
                WriteOp::Delete { key } => {
                    map.remove(&key);
                }
            }
        }
        Ok(())
    }

    fn write_if(&self, expect: &[(&[u8], Option<&[u8]>)], batch: &WriteBatch) -> Result<bool> {
        let _marked = self.io.begin_write();
        let mut map = self.write_map();
        for (key, want) in expect {
            let held = map.get(*key).map(Vec::as_slice);
            self.io.read(held.map_or(0, <[u8]>::len));
            if held != *want {
                return Ok(false);
            }
        }
        if batch.is_empty() {
            return Ok(true);
        }
        self.io.batch(batch);
        for op in batch.ops() {
            match op {
                WriteOp::Put { key, value } => {
                    map.insert(key.clone(), value.clone());
                }
                WriteOp::Delete { key } => {
                    map.remove(key);
                }
            }
        }
        Ok(true)
    }

    crate::ordered_scans!();

    /// Every write of a memory store goes through its handle and is marked.
    fn write_marks(&self) -> Option<sesame_core::WriteMarks> {
        Some(self.io.write_marks())
    }

    fn backend(&self) -> &'static str {
        "memory"
    }
}
