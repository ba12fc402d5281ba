//! Scheme calls: a call's messages run against a fresh scheme server
//! over a transaction on one generation of an index; a call that wrote
//! nothing (a search) answers under the index's shared lock, one that
//! wrote commits under its exclusive lock, running again when another
//! commit came first (`commit.rs`).

use std::sync::Arc;
use std::time::Instant;

use prost::Message;
use sesame_core::{wire, ServerReport, Store, WriteBatch};
use sesame_store::overlay::Overlay;
use sesame_store::packed::Packed;

use super::{request_id, Engine, Hosted, RequestDigest, Token};
use crate::error::EngineError;
use crate::keys;
use crate::proto;
use crate::records::IndexMeta;

/// What a run answers, once its writes are planned.
struct Answer {
    responses: Vec<Vec<u8>>,
    report: ServerReport,
}

impl Run {
    /// The answer, the transaction's views dropped.
    fn answer(self) -> Answer {
        Answer {
            responses: self.responses,
            report: self.report,
        }
    }
}

/// What running scheme messages produced.
struct Run {
    responses: Vec<Vec<u8>>,
    report: ServerReport,
    overlay: Arc<Overlay>,
    /// The packed view under the overlay, for a packed index.
    packed: Option<Arc<Packed>>,
    /// The scheme's server writes each key once
    /// ([`sesame_core::Service::write_once`]).
    write_once: bool,
}

impl Engine {
    /// Runs scheme messages on one generation of an index and commits
    /// what they wrote, with the index's metadata and (given a request id)
    /// the replay record, in one transaction.
    pub fn call(
        &self,
        tenant: &str,
        req: proto::CallRequest,
    ) -> Result<proto::CallResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        let id = request_id(&req.request_id)?;
        if req.messages.is_empty() {
            return Err(EngineError::InvalidArgument(
                "a call carries at least one scheme message".into(),
            ));
        }
        if req.messages.len() > self.limits.max_messages_per_call {
            return Err(EngineError::ResourceExhausted(format!(
                "a call carries at most {} scheme messages",
                self.limits.max_messages_per_call
            )));
        }
        let digest = id.map(|_| {
            let mut d = RequestDigest::new("call");
            d.part(req.index.as_bytes())
                .part(req.scheme.as_bytes())
                .part(&req.generation.to_be_bytes());
            for m in &req.messages {
                d.part(m);
            }
            d.finish()
        });
        let lock = self.lock_of(tenant, &req.index);
        let replay = id.as_ref().zip(digest.as_ref());
        let first = {
            let _g = lock.read();
            let (run, seen, meta) = self.read_and_run(tenant, &req, replay)?;
            if !run.overlay.has_writes() {
                return Ok(proto::CallResponse {
                    messages: run.responses,
                    report: wire::encode(&run.report)?,
                });
            }
            (run, seen, meta)
        };
        // It writes: commit alone in this server, conditionally on the
        // token the run saw; run again when another commit came in since.
        let _g = lock.write();
        let start = Instant::now();
        let first_ns = first.0.report.handle_ns;
        let mut first = Some(first);
        let mut run = self.until_committed(|| {
            // The first try commits the first run on the token it read (a
            // commit since then moved the token, and the write fails);
            // later tries read everything again and run again.
            let (seen, mut meta, run) = match first.take() {
                Some((run, seen, meta)) => (seen, meta, run),
                None => {
                    let (run, seen, meta) = self.read_and_run(tenant, &req, replay)?;
                    (seen, meta, run)
                }
            };
            let mut writes = WriteBatch::new();
            run.overlay.drain_into(&mut writes);
            let mut batch = self.entry_writes(writes, run.packed.as_deref(), run.write_once)?;
            // The run's views hold the cached chunks they read: released
            // before the commit, which carries the cache forward in place
            // rather than copying it (`chunk_cache.rs`).
            let run = run.answer();
            meta.updates += 1;
            // The stored answer carries no report (it is not this call's).
            let replay = id.as_ref().zip(digest).map(|(id, digest)| {
                let stored = proto::CallResponse {
                    messages: run.responses.clone(),
                    report: Vec::new(),
                };
                (id, digest, stored.encode_to_vec())
            });
            Ok(self
                .commit(&mut batch, &mut meta, (tenant, &req.index), replay, &seen)?
                .then_some(run))
        })?;
        // The server's time: the first run, then everything under the
        // exclusive lock (runs again, the commit, which the client waits
        // for).
        run.report.handle_ns =
            first_ns.saturating_add(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
        Ok(proto::CallResponse {
            messages: run.responses,
            report: wire::encode(&run.report)?,
        })
    }

    /// Reads the index's commit token and metadata, checks the scheme the
    /// client speaks and (`replay`: the request id and digest) refuses or
    /// answers a repeated request id, then runs the call's messages: the
    /// run, with the token and metadata it was made from.
    fn read_and_run(
        &self,
        tenant: &str,
        req: &proto::CallRequest,
        replay: Option<(&[u8; 16], &[u8; 32])>,
    ) -> Result<(Run, Token, IndexMeta), EngineError> {
        let (seen, meta) = self.token_and_meta(tenant, &req.index)?;
        let scheme = Self::scheme_of(&meta, &req.index, &req.scheme)?;
        if let Some((id, digest)) = replay {
            if let Some(e) = self.replayed(tenant, &req.index, id, digest)? {
                return Err(e);
            }
        }
        let run = self.run(
            (tenant, &req.index),
            &scheme,
            (&meta, req.generation, &seen),
            &req.messages,
        )?;
        Ok((run, seen, meta))
    }

    /// Runs scheme messages against a fresh server over a transaction.
    fn run(
        &self,
        what: (&str, &str),
        scheme: &Hosted,
        (meta, generation, seen): (&IndexMeta, u64, &Token),
        messages: &[Vec<u8>],
    ) -> Result<Run, EngineError> {
        let (overlay, packed) = self.transaction(meta, what, generation, Some(seen));
        let view = self.new_view();
        let (answered, report) = ServerReport::measure(
            || overlay.io_counts(),
            || {
                let mut server = scheme.server_over(&overlay, view.as_ref())?;
                let responses = messages
                    .iter()
                    .map(|m| server.handle(m))
                    .collect::<sesame_core::Result<Vec<_>>>();
                Ok::<_, EngineError>((responses, server.write_once()))
            },
        );
        if let (Some(log), Some(v)) = (&self.view_log, &view) {
            log.operation(what.0, what.1, "Call", &v.take())?;
        }
        let (responses, write_once) = answered?;
        let responses = responses.map_err(|e| {
            if overlay.over_limit() {
                EngineError::ResourceExhausted(format!(
                    "the request writes more than the server's limit of {} bytes per transaction",
                    self.limits.max_transaction_bytes
                ))
            } else {
                EngineError::from_core(e)
            }
        })?;
        Ok(Run {
            responses,
            report,
            overlay,
            packed,
            write_once,
        })
    }

    /// A transaction over one generation of an index's entries: over the
    /// packed view of its chunks when the index is packed (returned too,
    /// for [`Engine::entry_writes`]). Given the index's commit token as
    /// the request read it (`seen`), the chunks come from the engine's
    /// cache when it holds them under that token (`chunk_cache.rs`).
    pub(super) fn transaction(
        &self,
        meta: &IndexMeta,
        (tenant, index): (&str, &str),
        generation: u64,
        seen: Option<&Token>,
    ) -> (Arc<Overlay>, Option<Arc<Packed>>) {
        let limit = self.limits.max_transaction_bytes;
        if meta.packed {
            // The cache holds the generation's chunks and its pending
            // record together, so a request reads both in one state.
            let held = meta.generation_prefix(tenant, index, generation);
            let base = match seen {
                Some(seen) => self.chunks.view(&self.store, (tenant, index), &held, seen),
                None => self.store.clone(),
            };
            let packed = Arc::new(meta.packed_view(base, (tenant, index), generation));
            let overlay = Overlay::new(packed.clone(), Vec::new(), limit);
            (Arc::new(overlay), Some(packed))
        } else {
            let prefix = meta.generation_prefix(tenant, index, generation);
            (
                Arc::new(Overlay::new(self.store.clone(), prefix, limit)),
                None,
            )
        }
    }

    /// The store writes that apply a transaction's writes `batch`: the
    /// chunks they change for a packed index, else the batch itself. For
    /// a scheme whose server writes each key once, a batch that would
    /// change a stored value is refused ([`Engine::check_write_once`]).
    fn entry_writes(
        &self,
        batch: WriteBatch,
        packed: Option<&Packed>,
        write_once: bool,
    ) -> Result<WriteBatch, EngineError> {
        let Some(packed) = packed else {
            if write_once {
                self.check_write_once(&batch)?;
            }
            return Ok(batch);
        };
        let plan = packed.plan(&batch)?;
        if write_once && plan.overwrites > 0 {
            return Err(overwrite_conflict(plan.overwrites));
        }
        Ok(plan.batch)
    }

    /// Refuses a batch that would change a stored value, for schemes whose
    /// server writes each key once: two clients updated from the same
    /// state, or a stale update was sent. Nothing is applied.
    pub(super) fn check_write_once(&self, batch: &WriteBatch) -> Result<(), EngineError> {
        let puts: Vec<(&[u8], &[u8])> = batch
            .ops()
            .iter()
            .filter_map(|op| match op {
                sesame_core::WriteOp::Put { key, value } => {
                    Some((key.as_slice(), value.as_slice()))
                }
                sesame_core::WriteOp::Delete { .. } => None,
            })
            .collect();
        let keys: Vec<&[u8]> = puts.iter().map(|(k, _)| *k).collect();
        let stored = self.store.get_many(&keys)?;
        let conflicts = puts
            .iter()
            .zip(&stored)
            .filter(|((_, new), old)| old.as_deref().is_some_and(|old| old != *new))
            .count();
        if conflicts > 0 {
            return Err(overwrite_conflict(conflicts));
        }
        Ok(())
    }
}

/// The refusal of a write-once scheme's batch that would change
/// `conflicts` stored values.
fn overwrite_conflict(conflicts: usize) -> EngineError {
    EngineError::Conflict(format!(
        "the update would overwrite {conflicts} stored index entries with other content \
         (is another client using the same profile?); nothing was applied"
    ))
}
