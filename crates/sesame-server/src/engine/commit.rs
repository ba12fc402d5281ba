//! Commits and replay: a request's batch written on the condition that
//! the index's commit token is the one it read (with a fresh token, the
//! index's metadata and, given a request id, its replay record, in one
//! atomic write), run again from fresh reads when another commit came
//! first; a request id seen before answered from its replay record.
//!
//! Every request that writes one index goes through
//! [`Engine::commit_locked`] (or [`Engine::until_committed`] under a lock
//! it holds), so the retry loop exists once. (Creating an index and
//! reserving its place are conditional on other keys: `indexes.rs`.)

use std::sync::atomic::Ordering;

use sesame_core::WriteBatch;

use super::Engine;
use crate::error::EngineError;
use crate::keys;
use crate::records::{now_unix, IndexMeta, ReplayRecord};

/// How long a replay record is kept (by the server's clock).
pub const REPLAY_HORIZON_SECS: u64 = 7 * 24 * 3600;

/// Replay records written to an index between two prunings.
const PRUNE_EVERY: u64 = 1024;

/// Times a request that writes is run and committed before it gives up
/// because other servers kept committing to the same index first.
pub const MAX_COMMIT_ATTEMPTS: u32 = 64;

/// An index's commit token as read (`None`: no commit has set one yet).
pub(super) type Token = Option<Vec<u8>>;

impl Engine {
    /// Conditional commits so far that found their index changed by
    /// another commit (from this server or another one) and ran again.
    pub fn commit_conflicts(&self) -> u64 {
        self.conflicts.load(Ordering::Relaxed)
    }

    /// Store commits of index requests so far, and the requests' batches
    /// they carried: fewer commits than batches when requests to
    /// different indexes shared commits (group commit, `engine/group.rs`).
    pub fn group_commits(&self) -> (u64, u64) {
        self.group.counts()
    }

    /// Requests that found their index's packed chunks in the engine's
    /// cache under the commit token they read, and requests that read
    /// them from the store (`engine/chunk_cache.rs`).
    pub fn chunk_cache_counts(&self) -> (u64, u64) {
        self.chunks.counts()
    }

    /// Writes `batch` with a fresh commit token if the index's token is
    /// still `seen`: `Ok(false)`, nothing written and `batch` as it was,
    /// when another commit came first.
    pub(super) fn commit_if(
        &self,
        batch: &mut WriteBatch,
        (tenant, index): (&str, &str),
        seen: &Token,
    ) -> Result<bool, EngineError> {
        let key = keys::commit_key(tenant, index);
        let mut fresh = [0u8; 16];
        rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut fresh);
        let base = batch.len();
        batch.put(key.clone(), fresh.to_vec());
        let applied =
            self.write_swept(&[(key.as_slice(), seen.as_deref())], batch, (tenant, index))?;
        if applied {
            self.chunks.committed((tenant, index), seen, &fresh, batch);
        } else {
            batch.truncate(base);
            self.conflicts.fetch_add(1, Ordering::Relaxed);
        }
        Ok(applied)
    }

    /// Runs `attempt` until its conditional commit lands: `Some` is its
    /// answer, `None` says another commit came first and it must run again
    /// from fresh reads. Pauses grow (with jitter) between attempts, so
    /// servers that collide spread out.
    pub(super) fn until_committed<T>(
        &self,
        mut attempt: impl FnMut() -> Result<Option<T>, EngineError>,
    ) -> Result<T, EngineError> {
        for n in 0..MAX_COMMIT_ATTEMPTS {
            if let Some(answer) = attempt()? {
                return Ok(answer);
            }
            let mut jitter = [0u8; 1];
            rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut jitter);
            let ms = u64::from(n.min(5)) * 2 + u64::from(jitter[0] % 4);
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        Err(EngineError::Unavailable(format!(
            "the index was changed by other requests first on each of {MAX_COMMIT_ATTEMPTS} \
             attempts; nothing was applied: send the request again"
        )))
    }

    /// Runs `attempt` under the exclusive lock of index `index` of
    /// `tenant` until its conditional commit lands
    /// ([`Engine::until_committed`]): the one loop of every request that
    /// writes an index.
    pub(super) fn commit_locked<T>(
        &self,
        tenant: &str,
        index: &str,
        attempt: impl FnMut() -> Result<Option<T>, EngineError>,
    ) -> Result<T, EngineError> {
        let lock = self.lock_of(tenant, index);
        let _g = lock.write();
        self.until_committed(attempt)
    }

    /// The index's commit token and metadata for a request that writes,
    /// taken under the index's exclusive lock (which the caller holds),
    /// the token first; a request id that
    /// was used before is refused here, and an exact repeat is answered
    /// with the first answer ([`EngineError::Replayed`]).
    pub(super) fn meta_for_write(
        &self,
        tenant: &str,
        index: &str,
        replay: Option<(&[u8; 16], &[u8; 32])>,
    ) -> Result<(Token, IndexMeta), EngineError> {
        let (seen, meta) = self.token_and_meta(tenant, index)?;
        if let Some((id, digest)) = replay {
            if let Some(e) = self.replayed(tenant, index, id, digest)? {
                return Err(e);
            }
        }
        Ok((seen, meta))
    }

    pub(super) fn replayed(
        &self,
        tenant: &str,
        index: &str,
        id: &[u8; 16],
        digest: &[u8; 32],
    ) -> Result<Option<EngineError>, EngineError> {
        let Some(bytes) = self.store.get(&keys::replay_key(tenant, index, id))? else {
            return Ok(None);
        };
        let record = ReplayRecord::decode(&bytes)?;
        if &record.digest == digest {
            // The first attempt's sweep may have failed after its commit.
            let _ = self.sweep(Some((tenant, index)));
        }
        Ok(Some(if &record.digest == digest {
            // The first attempt may have failed after its commit was
            // applied but before the store confirmed it (over Redis
            // Cluster: before a replica had it). Written again, the record
            // is confirmed as a commit is, and with it the commit before
            // it, so an answer from it promises what a first answer does.
            let mut again = WriteBatch::with_capacity(1);
            again.put(keys::replay_key(tenant, index, id), bytes);
            self.store.write(again)?;
            EngineError::Replayed {
                id: hex::encode(id),
                response: record.response,
            }
        } else {
            EngineError::AlreadyExists(format!(
                "request id {} was already used for another request",
                hex::encode(id)
            ))
        }))
    }

    /// Adds the replay record of a committed request to `batch`, and
    /// prunes old records now and then.
    fn remember(
        &self,
        batch: &mut WriteBatch,
        meta: &mut IndexMeta,
        (tenant, index): (&str, &str),
        id: &[u8; 16],
        (digest, response): ([u8; 32], Vec<u8>),
    ) -> Result<(), EngineError> {
        let now = now_unix();
        let record = ReplayRecord {
            digest,
            at_unix: now,
            response,
        };
        batch.put(keys::replay_key(tenant, index, id), record.encode()?);
        meta.records_since_prune += 1;
        if meta.records_since_prune >= PRUNE_EVERY {
            meta.records_since_prune = 0;
            for (k, v) in self
                .store
                .scan_prefix(&keys::replay_prefix(tenant, index))?
            {
                let old = ReplayRecord::decode(&v).map_or(true, |r| {
                    r.at_unix.saturating_add(REPLAY_HORIZON_SECS) < now
                });
                if old {
                    batch.delete(k);
                }
            }
        }
        Ok(())
    }

    /// Commits a request's batch: records its answer for replays when it
    /// carries a request id (`replay`: id, request digest, encoded answer),
    /// then the index's metadata, in one atomic write.
    /// The write is conditional on the index's commit token `seen`
    /// ([`Engine::commit_if`]): `Ok(false)` when another commit came first.
    /// What it adds to `batch` is taken out again when it fails.
    pub(super) fn commit(
        &self,
        batch: &mut WriteBatch,
        meta: &mut IndexMeta,
        (tenant, index): (&str, &str),
        replay: Option<(&[u8; 16], [u8; 32], Vec<u8>)>,
        seen: &Token,
    ) -> Result<bool, EngineError> {
        let base = batch.len();
        if let Some((id, digest, stored)) = replay {
            self.remember(batch, meta, (tenant, index), id, (digest, stored))?;
        }
        batch.put(keys::meta_key(tenant, index), meta.encode()?);
        let applied = self.commit_if(batch, (tenant, index), seen)?;
        if !applied {
            batch.truncate(base);
        }
        Ok(applied)
    }

    /// Commits a request's batch as [`Engine::commit`] does, remembering
    /// `response` as its answer when the request has an id, and returns
    /// the response (`None` when another commit came first).
    pub(super) fn commit_answer<M: prost::Message>(
        &self,
        batch: &mut WriteBatch,
        meta: &mut IndexMeta,
        index: (&str, &str),
        replay: Option<(&[u8; 16], [u8; 32])>,
        response: M,
        seen: &Token,
    ) -> Result<Option<M>, EngineError> {
        let replay = replay.map(|(id, digest)| (id, digest, response.encode_to_vec()));
        Ok(self
            .commit(batch, meta, index, replay, seen)?
            .then_some(response))
    }
}
