//! Sweeps: the deletion of an index's spread entries after the commit
//! that removed them, made resumable.
//!
//! Over a Redis Cluster, an index's spread entries (`e/<tenant>/<index>/`)
//! lie in shards apart from its metadata, so a batch that deletes some of
//! them cannot be applied in one step: the store applies the index's own
//! group under the commit's condition, then the shard deletes. Were those
//! deletes to fail after the commit (a master unreachable), the request's
//! retry would be answered from its replay record (or, for a drop, find no
//! index) and the entries would stay forever.
//!
//! So a commit whose batch deletes spread entries does not carry those
//! deletes: it carries a sweep record `w/<tenant>/<index>/<16 random
//! bytes>` listing the keys, committed with the rest (in the index's own
//! group). Once the commit is applied, the sweep runs: the entries are
//! deleted (deletes are idempotent), then the record. A sweep that fails
//! is left as it is and run again: by the next commit of the index that
//! writes spread entries, by a retry answered from a replay record, by
//! the creation or drop of an index of that name, and by every server at
//! start. Readers never follow a deleted entry (the commit that removed it
//! made it unreachable), so a sweep that runs late costs only space.
//!
//! Tested by `tests/misuse.rs`
//! `spread_deletes_that_fail_after_the_commit_are_swept_later`.

use sesame_core::{wire, WriteBatch, WriteOp};

use super::Engine;
use crate::error::EngineError;
use crate::keys;

/// A commit's batch with its spread deletes set apart.
pub(super) struct Deferred {
    /// What to write: the batch without its spread deletes, with the
    /// sweep record.
    pub(super) batch: WriteBatch,
    /// The sweep record's key and the keys it lists.
    pub(super) sweep: (Vec<u8>, Vec<Vec<u8>>),
}

/// `batch` with its deletes of spread entries of the index replaced by a
/// sweep record; `None` when it deletes none (or deletes a key it also
/// puts, which it then keeps as it is).
pub(super) fn defer(batch: &WriteBatch, tenant: &str, index: &str) -> Option<Deferred> {
    let spread = keys::entries_prefix(true, tenant, index);
    let is_spread_delete =
        |op: &WriteOp| matches!(op, WriteOp::Delete { key } if key.starts_with(&spread));
    if !batch.ops().iter().any(is_spread_delete) {
        return None;
    }
    let mut kept = WriteBatch::with_capacity(batch.len());
    let mut swept = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for op in batch.ops() {
        match op {
            WriteOp::Delete { key } if key.starts_with(&spread) => {
                seen.insert(key.as_slice());
                swept.push(key.clone());
            }
            WriteOp::Put { key, value } => {
                if seen.contains(key.as_slice()) {
                    return None;
                }
                kept.put(key.clone(), value.clone());
            }
            WriteOp::Delete { key } => {
                kept.delete(key.clone());
            }
        }
    }
    let mut id = [0u8; 16];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut id);
    let mut key = keys::sweep_prefix(tenant, index);
    key.extend_from_slice(&id);
    let record = wire::encode(&swept).ok()?;
    kept.put(key.clone(), record);
    Some(Deferred {
        batch: kept,
        sweep: (key, swept),
    })
}

impl Engine {
    /// [`sesame_core::Store::write_if`] of a commit's `batch` of index
    /// `(tenant, index)`, its spread deletes made a sweep that runs once
    /// the commit is applied (its failure leaves the sweep for later).
    pub(super) fn write_swept(
        &self,
        expect: &[(&[u8], Option<&[u8]>)],
        batch: &WriteBatch,
        (tenant, index): (&str, &str),
    ) -> Result<bool, EngineError> {
        let Some(deferred) = defer(batch, tenant, index) else {
            return self.group.write_if(&*self.store, expect, batch);
        };
        if !self.group.write_if(&*self.store, expect, &deferred.batch)? {
            return Ok(false);
        }
        let (record, entries) = &deferred.sweep;
        if let Err(e) = self.sweep_one(record, entries) {
            crate::log(&format!(
                "a sweep of {} entries of an index failed after its commit; it runs again \
                 later: {e}",
                entries.len()
            ));
        }
        Ok(true)
    }

    /// Runs one sweep: its entries deleted, then its record. An error
    /// leaves the record for a later sweep.
    pub(super) fn sweep_one(&self, record: &[u8], entries: &[Vec<u8>]) -> Result<(), EngineError> {
        for part in entries.chunks(1024) {
            let mut batch = WriteBatch::with_capacity(part.len());
            for k in part {
                batch.delete(k.clone());
            }
            self.store.write(batch)?;
        }
        let mut done = WriteBatch::with_capacity(1);
        done.delete(record.to_vec());
        self.store.write(done)?;
        Ok(())
    }

    /// Runs the pending sweeps of one index, or (`None`) of every index.
    /// Best effort: a sweep that fails stays for the next run; the number
    /// still pending is returned.
    pub fn sweep(&self, index: Option<(&str, &str)>) -> Result<usize, EngineError> {
        let prefix = match index {
            Some((tenant, index)) => keys::sweep_prefix(tenant, index),
            None => b"w/".to_vec(),
        };
        let mut pending = 0;
        for (key, value) in self.store.scan_prefix(&prefix)? {
            let Ok(entries) = wire::decode::<Vec<Vec<u8>>>(&value) else {
                // Not a record this server wrote: left alone.
                pending += 1;
                continue;
            };
            if self.sweep_one(&key, &entries).is_err() {
                pending += 1;
            }
        }
        Ok(pending)
    }
}
