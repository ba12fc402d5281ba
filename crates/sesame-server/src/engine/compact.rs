//! `CompactIndex`: a packed generation's pending record and deltas merged
//! into its chunks on the server, as
//! [`Packed::compact`](sesame_store::packed::Packed::compact) does on an
//! embedded store.
//!
//! An import through a server appends each batch's entries beside their
//! chunks as deltas (`sesame_store::packed`). The client sends this
//! request on demand (`NetworkBackend::compact_on_server`); an import does
//! not send it, as the merged layout measured slower for point queries on
//! the server (`docs/performance.md`, "The flights' import over loopback
//! TLS").
//!
//! How: [`Packed::compact`](sesame_store::packed::Packed::compact) runs on a thread of its own over the store,
//! with its writes handed back to the request's thread, which commits each
//! batch (at most 4 MiB of chunks) conditionally on the index's commit
//! token ([`Engine::commit_if`]), under the index's exclusive lock. So
//! each batch is atomic and, between servers sharing one store, a batch
//! read before another server's commit is refused and nothing of it is
//! written. A request merges for at most [`COMPACT_BUDGET`] and answers
//! whether it finished; the client sends it again until it did. A request
//! cut short (the connection dropped, the server killed, another commit
//! first) leaves some chunks merged and the rest as they were: both valid
//! layouts of the same pairs, and the next request goes on from there.
//!
//! What the server learns: nothing new. It writes the pairs it held,
//! regrouped into other chunks, and learns which chunks had deltas, which
//! it saw when they were written. The request names an index of the
//! token's tenant and a generation, as a `Call` does.
//!
//! Tests: `crates/sesame-client/tests/server_compact.rs`.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sesame_core::{Store, WriteBatch, WriteOp};

use super::{Engine, Token};
use crate::error::EngineError;
use crate::keys;
use crate::proto;

/// How long one `CompactIndex` request merges before it answers
/// `done: false` (the batch under way is committed first).
const COMPACT_BUDGET: Duration = Duration::from_secs(5);

/// Why the compacting thread was told to stop.
const STOP: &str = "the compaction was stopped by the server";

/// A store whose reads are the engine's store's and whose writes are
/// handed to the request's thread, which commits them and answers whether
/// to go on.
struct Handed {
    base: Arc<dyn Store>,
    batches: SyncSender<WriteBatch>,
    answers: Mutex<Receiver<bool>>,
}

impl Store for Handed {
    sesame_store::forward_store!(|s| s.base;
        get, get_many, scan_prefix, scan_from, ordered_probes, io_counts, backend);

    fn write(&self, batch: WriteBatch) -> sesame_core::Result<()> {
        let stop = || sesame_core::Error::Server(STOP.into());
        self.batches.send(batch).map_err(|_| stop())?;
        let go_on = self
            .answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .recv()
            .unwrap_or(false);
        if go_on {
            Ok(())
        } else {
            Err(stop())
        }
    }
}

/// How a run of the request's commits ended.
enum Stopped {
    /// Out of time, or another commit came first: not done, send again.
    Again,
    /// A commit failed.
    Failed(EngineError),
}

impl Engine {
    /// Merges the deltas of generation `req.generation` of index
    /// `req.index` into their chunks, for at most [`COMPACT_BUDGET`]
    /// (module docs). An index that is not packed has nothing to merge.
    pub fn compact_index(
        &self,
        tenant: &str,
        req: proto::CompactIndexRequest,
    ) -> Result<proto::CompactIndexResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        let lock = self.lock_of(tenant, &req.index);
        let _g = lock.write();
        let (seen, meta) = self.token_and_meta(tenant, &req.index)?;
        if !meta.packed {
            return Ok(proto::CompactIndexResponse {
                chunks_written: 0,
                done: true,
            });
        }
        let (to_commit, batches) = sync_channel(0);
        let (answer, answers) = sync_channel(1);
        let view = meta.packed_view(
            Arc::new(Handed {
                base: self.store.clone(),
                batches: to_commit,
                answers: Mutex::new(answers),
            }),
            (tenant, &req.index),
            req.generation,
        );
        let start = Instant::now();
        let mut written = 0u64;
        let mut stopped = None;
        let compacted = std::thread::scope(|s| {
            let worker = s.spawn(move || view.compact());
            let mut seen = seen;
            for batch in batches.iter() {
                let go_on = match self.commit_compacted(batch, (tenant, &req.index), &mut seen) {
                    Ok(Some(chunks)) => {
                        written += chunks;
                        if start.elapsed() < COMPACT_BUDGET {
                            true
                        } else {
                            stopped = Some(Stopped::Again);
                            false
                        }
                    }
                    Ok(None) => {
                        stopped = Some(Stopped::Again);
                        false
                    }
                    Err(e) => {
                        stopped = Some(Stopped::Failed(e));
                        false
                    }
                };
                // The thread waits for the answer; a send fails only when
                // it is gone, which the join below reports.
                let _ = answer.send(go_on);
            }
            worker.join()
        });
        let compacted = compacted.map_err(|_| {
            EngineError::Internal("the compacting thread stopped unexpectedly".into())
        })?;
        match (compacted, stopped) {
            (Ok(_), None) => Ok(proto::CompactIndexResponse {
                chunks_written: written,
                done: true,
            }),
            (_, Some(Stopped::Again)) => Ok(proto::CompactIndexResponse {
                chunks_written: written,
                done: false,
            }),
            (_, Some(Stopped::Failed(e))) => Err(e),
            (Err(e), None) => Err(EngineError::from_core(e)),
        }
    }

    /// Commits one batch of a compaction if the index's commit token is
    /// still `seen`, which then becomes the fresh token: the chunks it
    /// wrote, or `None` when another commit came first.
    fn commit_compacted(
        &self,
        mut batch: WriteBatch,
        (tenant, index): (&str, &str),
        seen: &mut Token,
    ) -> Result<Option<u64>, EngineError> {
        let chunks = batch
            .ops()
            .iter()
            .filter(|op| matches!(op, WriteOp::Put { .. }))
            .count() as u64;
        if !self.commit_if(&mut batch, (tenant, index), seen)? {
            return Ok(None);
        }
        // The commit's last put is the index's fresh token.
        let token = keys::commit_key(tenant, index);
        *seen = batch.ops().iter().rev().find_map(|op| match op {
            WriteOp::Put { key, value } if *key == token => Some(value.clone()),
            _ => None,
        });
        if seen.is_none() {
            return Err(EngineError::Internal(
                "a committed batch carried no commit token".into(),
            ));
        }
        Ok(Some(chunks))
    }
}
