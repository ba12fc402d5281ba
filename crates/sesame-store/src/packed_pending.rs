//! Pending pairs: a packed view's small writes kept together in one
//! stored pair until there are enough of them to merge
//! ([`Packed::with_pending`]).
//!
//! Why: a delta is one insertion at a pseudorandom key of the base store,
//! so an update of 8 keyword entries dirties 8 leaves of redb's B-tree,
//! each written back whole at the commit. On the server at 16 clients
//! that was about 14.6 writes of 4 KB to the disk per update (read from
//! `/proc/diskstats` over a `sesame bench server` run), and the commit
//! lane's `fdatasync` waits grew with them: a scattered 4 KB write cost
//! about 25 µs of `fdatasync` on this machine's disk, 120 of them about
//! 3 ms (`docs/scaling.md`, "Pending pairs"). Kept pending, an update's
//! pairs are one stored pair (one leaf); a merge moves up to
//! [`PENDING_BYTES`] of them into the chunks in one write, through the
//! plan every write takes ([`Packed::plan`]), so a chunk's range takes
//! several of them at once.
//!
//! The record lies at a key the host names, outside the view's prefix
//! (the server: [`pending_key`], beside the generation's chunks, so that
//! its chunk cache holds the two together and a request reads them in one
//! state). It is a chunk in one of the chunk forms (`packed_form.rs`),
//! its pairs the puts not yet merged, each key once; a pair there
//! replaces the chunks' pair of the same key. Only puts are held: a write
//! that deletes, that brings more than [`PENDING_OPS`] pairs, or that
//! would pass [`PENDING_BYTES`], merges the record and itself into the
//! chunks and deletes the record, in one batch.
//!
//! Lookups read the record first, then the chunks: a merge between the
//! two reads leaves the key in the chunks the second read sees, and a
//! record read later than the chunks would miss a key merged between
//! them, so that order is kept everywhere (`get`, `get_many`, scans).
//! What it costs: every lookup reads the record (from the server's chunk
//! cache, no copy: [`Store::scan_from_shared`]); a write decodes and
//! writes the record again (up to [`PENDING_BYTES`]). What a reader of
//! the store learns: nothing the pairs did not show (the server holds
//! them either way); that a pair is recent, which the deltas showed too.

use std::borrow::Cow;

use sesame_core::{Result, Store, StoredValue};

use super::{decode, encode, expand, find, Packed, Plan, MAX_APPEND};

/// The byte after a generation's prefix where its pending record lies
/// (its chunks lie under [`super::CHUNKS_MARK`]).
pub const PENDING_MARK: u8 = b'+';

/// The most encoded bytes a pending record holds: a write that would
/// pass them merges. 32,000 bytes: about 760 of FAST's entries (17-byte
/// keys, 25-byte values), some 95 updates of 8 keywords, in one redb page
/// of 32 KB. Measured at 16 clients on the server against 8,000, 16,000
/// and 64,000 (`docs/scaling.md`, "Pending pairs"): the most updates a
/// second; a larger record costs more to write again on every update
/// than its rarer merges save.
pub const PENDING_BYTES: usize = 32_000;

/// The most pairs of one write that may be held pending: a write that
/// brings more (an upload, an import's batch) goes to the chunks.
pub const PENDING_OPS: usize = 64;

/// Where the pending record of the generation under `generation` lies
/// (its chunks: under `generation ‖ CHUNKS_MARK`).
pub fn pending_key(generation: &[u8]) -> Vec<u8> {
    let mut key = generation.to_vec();
    key.push(PENDING_MARK);
    key
}

/// One write's operations, sorted, each key once.
type Ops<'a> = [(&'a [u8], Option<&'a [u8]>)];

impl Packed {
    /// This view keeping its small writes in one stored pair under `key`
    /// (module docs), which nothing else may write. `key` lies outside the
    /// view's prefix; a view without it writes deltas as before.
    pub fn with_pending(mut self, key: Vec<u8>) -> Self {
        self.pending = Some(key);
        self
    }

    /// The pending record as stored now (`None`: none, or no pending).
    pub(super) fn pending_record(&self) -> Result<Option<(&[u8], StoredValue)>> {
        let Some(key) = &self.pending else {
            return Ok(None);
        };
        let at = self.base.scan_from_shared(key, key, false, 1)?;
        Ok(at
            .into_iter()
            .next()
            .filter(|(stored, _)| stored == key)
            .map(|(_, value)| (key.as_slice(), value)))
    }

    /// The value `key` has in the pending record: `None` when it holds
    /// none (look in the chunks).
    pub(super) fn pending_value(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let Some((at, record)) = self.pending_record()? else {
            return Ok(None);
        };
        // Read up to the key, not decoded whole: a record in the variable
        // form holds hundreds of pairs.
        find(&record, at, key)
    }

    /// [`Packed::plan`] for a view with a pending record: `ops` held in
    /// the record when they fit, else merged with it into the chunks.
    pub(super) fn plan_with_pending(&self, key: &[u8], ops: &Ops<'_>) -> Result<Plan> {
        let record = self.pending_record()?;
        let expanded: Option<Cow<'_, [u8]>> = match &record {
            Some((at, bytes)) => Some(expand(bytes, at)?),
            None => None,
        };
        let held = match &expanded {
            Some(bytes) => decode(bytes, key)?,
            None => Vec::new(),
        };
        // What each key of the write holds now: the record's value, else
        // the chunks'.
        let mut old: Vec<Option<Vec<u8>>> = ops
            .iter()
            .map(|(k, _)| {
                held.binary_search_by(|(h, _)| (*h).cmp(k))
                    .ok()
                    .map(|at| held[at].1.to_vec())
            })
            .collect();
        let unheld: Vec<usize> = (0..ops.len()).filter(|&i| old[i].is_none()).collect();
        if unheld.len() > MAX_APPEND {
            let keys: Vec<&[u8]> = unheld.iter().map(|&i| ops[i].0).collect();
            for (i, value) in unheld.iter().zip(self.chunk_values(&keys)?) {
                old[*i] = value;
            }
        } else {
            // A few keys (an update's): a probe each, where the window of
            // `chunk_values` reads ahead over chunks and deltas between
            // them.
            for &i in &unheld {
                old[i] = self.get_plain(ops[i].0, &self.full(ops[i].0))?;
            }
        }
        let overwrites = ops
            .iter()
            .zip(&old)
            .filter(
                |((_, new), old)| matches!((new, old), (Some(n), Some(o)) if *n != o.as_slice()),
            )
            .count();
        // The record with the write applied (the write's pairs win).
        let mut merged: Vec<(&[u8], Option<&[u8]>)> = Vec::with_capacity(held.len() + ops.len());
        let (mut a, mut b) = (0, 0);
        while a < held.len() || b < ops.len() {
            if b == ops.len() || (a < held.len() && held[a].0 < ops[b].0) {
                merged.push((held[a].0, Some(held[a].1)));
                a += 1;
                continue;
            }
            if a < held.len() && held[a].0 == ops[b].0 {
                a += 1;
            }
            merged.push(ops[b]);
            b += 1;
        }
        let puts_only = ops.iter().all(|(_, v)| v.is_some());
        let pairs: Vec<(&[u8], &[u8])> = merged
            .iter()
            .filter_map(|(k, v)| v.map(|v| (*k, v)))
            .collect();
        if puts_only && ops.len() <= PENDING_OPS {
            let changed = ops
                .iter()
                .zip(&old)
                .any(|((_, new), old)| *new != old.as_deref());
            if !changed {
                return Ok(Plan {
                    overwrites,
                    ..Plan::default()
                });
            }
            let record = encode(&pairs);
            if record.len() <= PENDING_BYTES {
                let mut plan = Plan {
                    overwrites,
                    ..Plan::default()
                };
                plan.batch.put(key.to_vec(), record);
                return Ok(plan);
            }
        }
        let mut plan = self.plan_ops(&merged)?;
        if record.is_some() {
            plan.batch.delete(key.to_vec());
        }
        plan.overwrites = overwrites;
        Ok(plan)
    }
}

impl Packed {
    /// The batch that merges the pending record into the chunks and
    /// deletes it (`None`: no record): the first step of
    /// [`Packed::compact`], after which every lookup is a probe of the
    /// chunks.
    pub(super) fn merge_pending(&self) -> Result<Option<sesame_core::WriteBatch>> {
        let (Some(key), Some((at, bytes))) = (&self.pending, self.pending_record()?) else {
            return Ok(None);
        };
        let held = pending_pairs(at, &bytes)?;
        let ops: Vec<(&[u8], Option<&[u8]>)> = held
            .iter()
            .map(|(k, v)| (k.as_slice(), Some(v.as_slice())))
            .collect();
        let mut plan = self.plan_ops(&ops)?;
        plan.batch.delete(key.clone());
        Ok(Some(plan.batch))
    }
}

/// The pairs of a pending record stored under `key`, checked as a chunk
/// is (lengths, ascending keys).
pub(super) fn pending_pairs(key: &[u8], bytes: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let expanded = expand(bytes, key)?;
    Ok(decode(&expanded, key)?
        .into_iter()
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect())
}
