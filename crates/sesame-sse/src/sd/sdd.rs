//! SDd: the de-amortised variant of SDa (Demertzis, Ghareh Chamani,
//! Papadopoulos and Papamanthou, NDSS 2020): every level holds up to three
//! buffers, and each update runs a fixed share of the ongoing merges, so
//! that no update pays for a whole rebuild. See `docs/schemes/sda_sdd.md`.
//!
//! A merge is *oblivious*: which entries it reads and writes depends only
//! on the level and the update count, never on the keywords. A buffer
//! keeps two copies of its entries, separately encrypted: an array in
//! keyword order (`a`, what the next merge reads) and the labelled entries
//! a search reads (`d`). Merging OLDEST and OLDER (`n` entries each) into
//! NEW runs, on arrays of `2n`:
//!
//! 1. a bitonic merge of OLDEST (ascending) and OLDER (read descending)
//!    into NEW's array: `log 2n` stages of `n` compare-exchanges;
//! 2. a scan of NEW's array in order, giving each entry its label
//!    `F(k_w, c)` (`c`: its rank among its keyword's entries), written to a
//!    scratch array;
//! 3. a bitonic sort of the scratch array by label (`log 2n (log 2n + 1)
//!    / 2` passes of `n` compare-exchanges): labels are pseudo-random, so
//!    this order says nothing of the keywords;
//! 4. publishing the scratch array in label order as NEW's labelled
//!    entries.
//!
//! The network runs in *units* of a block of `B = 2^BLOCK_BITS` entries
//! (`Schedule`): a pass whose compare-exchanges are `j >= B` apart runs
//! `B / 2` of them per unit, and all the consecutive passes with `j < B`
//! run together on each aligned block of `B` entries in the client's
//! hands, which reads and writes each entry once for up to `BLOCK_BITS`
//! passes. Every entry written is re-encrypted. The units of a merge at
//! level `l` are spread evenly over its `2^l` updates. A merge whose
//! arrays fit in one block (`2n <= B`) is a single unit (`Op::Whole`):
//! both inputs read, steps 1 to 4 done in the client's hands, NEW's array
//! written and its labelled entries published in label order, at the
//! merge's last update; the scratch array is not written.
//!
//! So the server sees which positions each update touches (fixed by the
//! update count) and the labels in label order, but neither the outcome of
//! any comparison nor where a label's entry sat in keyword order. For a
//! merge at level `l >= b` (`L = l + 1`, `b = BLOCK_BITS`), an update reads
//! and writes on average `2P` entries, `P = 5 + max(0, L - 1 - b) +
//! Σ_{k=b+1..L} (k - b + 1)` passes, where one compare-exchange at a time
//! needs `L + 4 + L(L+1)/2` steps of two entries; and at most one unit
//! more. A whole small merge reads 2 and writes 4 per update on average.
//!
//! The client keeps the keys of live buffers between updates
//! (`KeyCache`), in memory only. Within an update, the entries in hand
//! sit in one slot per position the update's plan touches (`Work`).

#[path = "schedule.rs"]
mod schedule;
use schedule::{Op, Schedule};
#[path = "seals.rs"]
mod seals;
use seals::Seals;
#[path = "work.rs"]
mod work;
use work::Work;

use std::collections::BTreeMap;
use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    channel, BackwardPrivacy, Channel, Error, Handler, IoCounts, Params, QueryKind, Result,
    SchemeDescriptor, SchemeKind, Store, WriteBatch,
};
use sesame_crypto::key::Key;
use sesame_crypto::prf::{Aes128Prf, HmacPrf};

use super::levels::*;
use crate::api::{self, DocId, Io, KeywordClient, KeywordScheme, Multimap};
use crate::common::{self, Sealed};

/// Descriptor of SDd.
pub static SDD_DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "sdd",
    title: "SDd (de-amortised dynamic SSE with small client storage)",
    citation: "I. Demertzis, J. Ghareh Chamani, D. Papadopoulos, C. Papamanthou. Dynamic \
               Searchable Encryption with Small Client Storage. NDSS 2020",
    kind: SchemeKind::DynamicSse,
    forward_private: true,
    backward_privacy: BackwardPrivacy::TypeII,
    queries: &[QueryKind::Exact],
    leakage: "Update: at most two rounds, of a shape fixed by the update count: the merges \
              are oblivious (bitonic merge, then a bitonic sort by label), so which entries an \
              update reads and writes follows from the update count alone; merged buffers \
              are under fresh keys (forward privacy). Search: per live buffer (at most three \
              per level), the number of the keyword's entries (additions and deletions \
              alike), hence coarse update times; the search pattern within a buffer's \
              lifetime; no identifier (response-hiding, the client filters deletions): \
              backward privacy type II for searches. Entries are padded to multiples of 64 \
              bytes: their sizes reveal only keywords longer than 43 bytes (and, for those, \
              where a merge step moved them).",
    doc: "docs/schemes/sda_sdd.md",
};

/// The registry entry of SDd.
pub fn scheme() -> KeywordScheme {
    common::keyword_scheme!(&SDD_DESCRIPTOR, &[], SddClient, SddServer)
}

/// Prefix of a saved state (format 4: a merge whose arrays fit in a block
/// is one unit); format 3 (every merge a schedule of passes on blocks)
/// starts `SDD3`, format 2 (every pass one compare-exchange at a time)
/// `SDD2`; a state without either is format 1.
const STATE_V4: &[u8; 4] = b"SDD4";
/// Entries a setup seals per batch (so that it holds at most this many
/// plaintexts besides the sealed entries).
const SETUP_SEALS: usize = 4096;

/// Prefix of a format-3 state.
const STATE_V3: &[u8; 4] = b"SDD3";
/// Prefix of a format-2 state.
const STATE_V2: &[u8; 4] = b"SDD2";

crate::common::redacted_debug!(SddRequest);

/// An SDd request.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SddRequest {
    /// Removes every buffer.
    Reset,
    /// Sealed entries by (buffer, position).
    Fetch {
        /// Positions to read.
        items: Vec<(u64, u64)>,
    },
    /// Drops buffers, then writes entries.
    Put {
        /// Array entries: (buffer, position, sealed entry).
        positional: Vec<(u64, u64, Sealed)>,
        /// Searchable entries: (buffer, label, sealed entry).
        labelled: Vec<(u64, [u8; LABEL_LEN], Sealed)>,
        /// Buffers to drop.
        drop: Vec<u64>,
    },
    /// The sealed entries of a keyword in each listed buffer.
    Search {
        /// (buffer, label key).
        tokens: Vec<(u64, [u8; 16])>,
    },
}

/// An SDd response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SddResponse {
    /// Done.
    Done,
    /// Sealed entries of a fetch, in order.
    Items(Vec<Option<Sealed>>),
    /// Sealed entries of the keyword, per token.
    Found(Vec<Vec<Vec<u8>>>),
}

/// An ongoing merge of a level's OLDEST and OLDER buffers into NEW: a
/// fixed schedule of steps (see the module doc), `step` of them done.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Merge {
    /// The buffer being built (one level up).
    target: u64,
    /// Its scratch array, sorted by label, dropped at the end.
    scratch: u64,
    /// The two buffers merged (OLDEST, OLDER).
    from: [u64; 2],
    /// Units of its [`Schedule`] done.
    step: u64,
    /// Updates it has run in.
    updates: u64,
    /// The count scan: the last keyword seen and its entries so far.
    last: Option<(Vec<u8>, u64)>,
    /// Buffers to drop with the inputs (a format-1 merge's partial
    /// target).
    stale: Vec<u64>,
}

/// A format-2 merge (every pass of the network one compare-exchange at a
/// time, `step` counted in those).
#[derive(Deserialize)]
struct MergeV2 {
    target: u64,
    scratch: u64,
    from: [u64; 2],
    #[allow(dead_code)]
    step: u64,
    #[allow(dead_code)]
    last: Option<(Vec<u8>, u64)>,
    stale: Vec<u64>,
}

/// A format-2 level.
#[derive(Deserialize)]
struct LevelV2 {
    slots: [Option<u64>; 3],
    merge: Option<MergeV2>,
}

/// A format-2 state.
#[derive(Deserialize, zeroize::ZeroizeOnDrop)]
struct SddStateV2 {
    master: [u8; 32],
    seq: u64,
    next_buffer: u64,
    #[zeroize(skip)]
    levels: Vec<LevelV2>,
}

/// A format-1 merge (moving entries by keyword comparisons).
#[derive(Deserialize)]
struct MergeV1 {
    target: u64,
    from: [u64; 2],
    #[allow(dead_code)]
    cursor: [u64; 2],
    #[allow(dead_code)]
    last: Option<(Vec<u8>, u64)>,
}

/// A format-1 level.
#[derive(Deserialize)]
struct LevelV1 {
    slots: [Option<u64>; 3],
    merge: Option<MergeV1>,
}

/// A format-1 state.
#[derive(Deserialize, zeroize::ZeroizeOnDrop)]
struct SddStateV1 {
    master: [u8; 32],
    seq: u64,
    next_buffer: u64,
    #[zeroize(skip)]
    levels: Vec<LevelV1>,
}

/// One level: OLDEST, OLDER and OLD buffers (ids) and the merge of OLDEST
/// and OLDER into the next level, if one runs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Level {
    slots: [Option<u64>; 3],
    merge: Option<Merge>,
}

#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct SddState {
    master: [u8; 32],
    seq: u64,
    next_buffer: u64,
    /// Buffer ids and merge cursors.
    #[zeroize(skip)]
    levels: Vec<Level>,
}

/// The client half of SDd: master key, counters and, per level, three
/// buffer ids and the state of one merge (two cursors and the last
/// keyword emitted): `O(log N)` words.
pub struct SddClient {
    master: Key<32>,
    prf: HmacPrf,
    seq: u64,
    next_buffer: u64,
    levels: Vec<Level>,
    /// The keys of live buffers derived so far (not saved).
    key_cache: KeyCache,
}

impl std::fmt::Debug for SddClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SddClient")
            .field("updates", &self.seq)
            .field("levels", &self.levels.len())
            .finish_non_exhaustive()
    }
}

impl SddClient {
    /// A client with a fresh key; SDd has no parameters.
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        params.only(SDD_DESCRIPTOR.name, &[])?;
        Ok(Self::with(Key::generate(rng), 0, 0, Vec::new()))
    }

    fn with(master: Key<32>, seq: u64, next_buffer: u64, levels: Vec<Level>) -> Self {
        Self {
            prf: HmacPrf::new(&master.derive("sesame-sse/sdd/buffers")),
            master,
            seq,
            next_buffer,
            levels,
            key_cache: KeyCache::default(),
        }
    }

    /// A client from saved state.
    ///
    /// A format-1 state (before merges were oblivious), format-2 state
    /// (before passes ran on blocks) or format-3 state (before small merges
    /// were one unit) is read too: a merge it had under way
    /// starts again into fresh buffers (the old partial ones are dropped
    /// when it ends); a merge has twice the updates it needs before its
    /// level fills, so it still ends in time.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        if let Some(v4) = bytes.strip_prefix(STATE_V4.as_slice()) {
            let s: SddState = sesame_core::wire::decode(v4)?;
            if s.levels.len() > MAX_LEVELS {
                return Err(Error::Malformed("SDd state with too many levels".into()));
            }
            return Ok(Self::with(
                Key::from_bytes(s.master),
                s.seq,
                s.next_buffer,
                s.levels.clone(),
            ));
        }
        if let Some(v3) = bytes.strip_prefix(STATE_V3.as_slice()) {
            // The same fields; a merge's units were counted in another
            // schedule, so each merge under way starts again.
            let s: SddState = sesame_core::wire::decode(v3)?;
            let levels = s.levels.iter().map(|l| {
                let merge = l.merge.as_ref();
                (
                    l.slots,
                    merge.map(|m| partial(m.target, m.scratch, m.from, &m.stale)),
                )
            });
            return Self::restarted(s.master, s.seq, s.next_buffer, levels);
        }
        if let Some(v2) = bytes.strip_prefix(STATE_V2.as_slice()) {
            let s: SddStateV2 = sesame_core::wire::decode(v2)?;
            let levels = s.levels.iter().map(|l| {
                let merge = l.merge.as_ref();
                (
                    l.slots,
                    merge.map(|m| partial(m.target, m.scratch, m.from, &m.stale)),
                )
            });
            return Self::restarted(s.master, s.seq, s.next_buffer, levels);
        }
        let s: SddStateV1 = sesame_core::wire::decode(bytes)?;
        let levels = s.levels.iter().map(|l| {
            let merge = l.merge.as_ref().map(|m| (m.from, vec![m.target]));
            (l.slots, merge)
        });
        Self::restarted(s.master, s.seq, s.next_buffer, levels)
    }

    /// A client from an older format's levels: each slot as it was, each
    /// merge under way (its inputs, and the partial buffers to drop) begun
    /// again into fresh buffers.
    fn restarted(
        master: [u8; 32],
        seq: u64,
        mut next_buffer: u64,
        levels: impl ExactSizeIterator<Item = ([Option<u64>; 3], Option<([u64; 2], Vec<u64>)>)>,
    ) -> Result<Self> {
        if levels.len() > MAX_LEVELS {
            return Err(Error::Malformed("SDd state with too many levels".into()));
        }
        let mut fresh = || {
            let b = next_buffer;
            next_buffer += 1;
            b
        };
        let levels = levels
            .map(|(slots, merge)| Level {
                slots,
                merge: merge.map(|(from, stale)| Merge {
                    target: fresh(),
                    scratch: fresh(),
                    from,
                    step: 0,
                    updates: 0,
                    last: None,
                    stale,
                }),
            })
            .collect();
        Ok(Self::with(
            Key::from_bytes(master),
            seq,
            next_buffer,
            levels,
        ))
    }

    /// The live buffers (searched), as (level, buffer id).
    pub fn buffers(&self) -> Vec<(usize, u64)> {
        let mut out = Vec::new();
        for (l, level) in self.levels.iter().enumerate() {
            for b in level.slots.iter().flatten() {
                out.push((l, *b));
            }
        }
        out
    }

    fn keys(&self, buffer: u64) -> LevelKeys {
        LevelKeys::derive(self.prf.eval_bytes(&buffer.to_le_bytes()))
    }

    fn open(&self, buffer: u64, sealed: &[u8]) -> Result<Update> {
        let plain = self.keys(buffer).aead.open(&buffer.to_le_bytes(), sealed)?;
        Update::decode(&plain)
    }

    fn level(&mut self, l: usize) -> Result<&mut Level> {
        if l >= MAX_LEVELS {
            return Err(Error::InvalidArgument("SDd index is full".into()));
        }
        if self.levels.len() <= l {
            self.levels.resize(l + 1, Level::default());
        }
        Ok(&mut self.levels[l])
    }

    /// Puts a complete buffer into the first free slot of level `l`.
    fn place(&mut self, l: usize, buffer: u64) -> Result<()> {
        let level = self.level(l)?;
        let slot = level
            .slots
            .iter_mut()
            .find(|s| s.is_none())
            .ok_or_else(|| Error::Protocol(format!("SDd level {l} overflows")))?;
        *slot = Some(buffer);
        Ok(())
    }

    /// Writes `updates` whole as a new buffer of level `level`: its array
    /// in keyword order and its labelled entries in label order, in
    /// requests of about [`common::SETUP_CHUNK_BYTES`]. Everything is
    /// written at once, so where an entry lands follows from nothing the
    /// server sees.
    fn build(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        level: usize,
        updates: &[Update],
    ) -> Result<()> {
        let buffer = self.next_buffer;
        self.next_buffer += 1;
        let keys = self.keys(buffer);
        let mut sorted: Vec<&Update> = updates.iter().collect();
        sorted.sort_by(|x, y| x.keyword.cmp(&y.keyword));
        let mut seals = Seals::default();
        // The sealing keys, derived in the first batch.
        let mut cache = KeyCache::default();
        let (mut positional, mut labelled) = (Vec::new(), Vec::new());
        let mut count = 0;
        let mut prf: Option<(&[u8], Aes128Prf)> = None;
        for (p, u) in (0u64..).zip(sorted) {
            if seals.len() >= SETUP_SEALS {
                let (a, d) = std::mem::take(&mut seals).seal(self, &mut cache)?;
                positional.extend(a);
                labelled.extend(d);
            }
            let prf = match &prf {
                Some((w, prf)) if *w == u.keyword.as_slice() => {
                    count += 1;
                    prf
                }
                _ => {
                    count = 0;
                    &prf.insert((u.keyword.as_slice(), keys.label_prf(&u.keyword)))
                        .1
                }
            };
            seals.labelled(rng, buffer, label(prf, count), u);
            let entry = Entry {
                label: [0; LABEL_LEN],
                update: u.clone(),
            };
            seals.positional(rng, buffer, p, &entry);
        }
        let (a, d) = seals.seal(self, &mut cache)?;
        positional.extend(a);
        labelled.extend(d);
        labelled.sort_unstable_by_key(|e| e.1);
        // The array, then the labelled entries, each in requests of about
        // a chunk.
        let mut puts = Vec::new();
        let mut rest = positional.into_iter().peekable();
        while rest.peek().is_some() {
            let chunk = common::take_chunk(&mut rest, |e| 16 + e.2.len());
            puts.push((chunk, Vec::new()));
        }
        let mut rest = labelled.into_iter().peekable();
        while rest.peek().is_some() {
            let chunk = common::take_chunk(&mut rest, |e| 8 + LABEL_LEN + e.2.len());
            puts.push((Vec::new(), chunk));
        }
        for (positional, labelled) in puts {
            let put = SddRequest::Put {
                positional,
                labelled,
                drop: Vec::new(),
            };
            common::call_answered(channel, "SDd", &put, SddResponse::Done)?;
        }
        self.place(level, buffer)
    }

    /// One update: one fetch round for this update's steps of the ongoing
    /// merges, one put round with what they wrote and the new entry.
    fn update_one(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        update: Update,
    ) -> Result<()> {
        // This update's steps, per level: fixed by the level and the step
        // counter, never by the data.
        let mut plan: Vec<(usize, Schedule, Vec<Op>)> = Vec::new();
        for (l, level) in self.levels.iter().enumerate() {
            if let Some(m) = &level.merge {
                let schedule = Schedule::of(l);
                let end = schedule.done_after(m.updates + 1);
                let ops = (m.step..end).flat_map(|u| schedule.unit(m, u)).collect();
                plan.push((l, schedule, ops));
            }
        }
        // Round 1: every array entry a step reads that no earlier step of
        // this update wrote.
        let mut work = Work::of(plan.iter().flat_map(|(_, _, ops)| ops));
        let mut items = Vec::new();
        for (_, _, ops) in &plan {
            for op in ops {
                for at in op.reads() {
                    if work.fetches(at)? {
                        items.push(at);
                    }
                }
                for at in op.writes() {
                    work.plan_write(at)?;
                }
            }
        }
        work.planned();
        // The keys of each buffer this update touches, derived once and
        // kept while the buffer lives.
        let mut cache = std::mem::take(&mut self.key_cache);
        if !items.is_empty() {
            let fetch = SddRequest::Fetch { items };
            let got = match channel::call(channel, &fetch)? {
                SddResponse::Items(v) => v,
                other => return Err(Error::unexpected("SDd", &other)),
            };
            let SddRequest::Fetch { items } = fetch else {
                unreachable!("the fetch just sent")
            };
            if got.len() != items.len() {
                return Err(Error::Protocol(format!(
                    "SDd fetch answered {} entries for {}",
                    got.len(),
                    items.len()
                )));
            }
            let fetched = items
                .into_iter()
                .zip(got)
                .map(|((b, p), sealed)| {
                    let sealed = sealed.ok_or_else(|| {
                        Error::Protocol(format!("SDd buffer {b} lacks entry {p}"))
                    })?;
                    Ok(((b, p), sealed))
                })
                .collect::<Result<Vec<_>>>()?;
            let entries = seals::open_positional(self, &mut cache, &fetched)?;
            for ((at, _), e) in fetched.into_iter().zip(entries) {
                work.put(at, e, false)?;
            }
        }
        // The steps, on the entries in hand (about one entry sealed per
        // position held, and the new entry's two).
        let mut seals = Seals::with_capacity(work.len() + 2);
        let mut drop = Vec::new();
        // Top level first, so that a finished merge below finds room above.
        for (l, schedule, ops) in plan.into_iter().rev() {
            let Some(mut m) = self.levels[l].merge.take() else {
                continue;
            };
            let target_keys = cache.get(self, m.target);
            for op in ops {
                match op {
                    Op::Exchange { a, b, to, by_label } => {
                        let (x, y) = (work.take(a)?, work.take(b)?);
                        let (lo, hi) = if x.greater(&y, by_label) {
                            (y, x)
                        } else {
                            (x, y)
                        };
                        work.put(to.0, lo, true)?;
                        work.put(to.1, hi, true)?;
                    }
                    Op::Block {
                        array,
                        start,
                        len,
                        k,
                        top,
                        by_label,
                    } => {
                        let mut block = (start..start + len)
                            .map(|p| work.take((array, p)))
                            .collect::<Result<Vec<Entry>>>()?;
                        sort_block(&mut block, start, k, top, by_label);
                        for (p, e) in (start..).zip(block) {
                            work.put((array, p), e, true)?;
                        }
                    }
                    Op::Count { from, to } => {
                        let mut e = work.take(from)?;
                        // The array entry stays for the next merge.
                        work.put(from, e.clone(), false)?;
                        let count = match &mut m.last {
                            Some((w, c)) if *w == e.update.keyword => {
                                *c += 1;
                                *c
                            }
                            last => {
                                *last = Some((e.update.keyword.clone(), 0));
                                0
                            }
                        };
                        e.label = label(&target_keys.label_prf(&e.update.keyword), count);
                        work.put(to, e, true)?;
                    }
                    Op::Publish { from } => {
                        let e = work.take(from)?;
                        seals.labelled(rng, m.target, e.label, &e.update);
                    }
                    Op::Whole { .. } => {
                        let inputs = op
                            .reads()
                            .map(|at| work.take(at))
                            .collect::<Result<Vec<Entry>>>()?;
                        let (array, published) =
                            merge_whole(inputs, |entries| target_keys.labels(entries))?;
                        for &(label, i) in &published {
                            seals.labelled(rng, m.target, label, &array[i].update);
                        }
                        for (at, e) in op.writes().zip(array) {
                            work.put(at, e, true)?;
                        }
                    }
                }
            }
            m.updates += 1;
            m.step = schedule.done_after(m.updates);
            if m.step == schedule.len() {
                // NEW is complete: OLDEST and OLDER go (and the scratch),
                // OLD becomes OLDEST.
                drop.extend(m.from);
                drop.push(m.scratch);
                drop.extend(m.stale.iter().copied());
                let level = &mut self.levels[l];
                level.slots = [level.slots[2], None, None];
                self.place(l + 1, m.target)?;
            } else {
                self.levels[l].merge = Some(m);
            }
        }
        // What the steps wrote, each array entry sealed afresh once.
        for (at, e) in work.written() {
            if !drop.contains(&at.0) {
                seals.positional(rng, at.0, at.1, e);
            }
        }
        // The new entry is a buffer of one at level 0, in both copies.
        let buffer = self.next_buffer;
        self.next_buffer += 1;
        let first = cache
            .get(self, buffer)
            .labels([(update.keyword.as_slice(), 0)].into_iter())?;
        seals.labelled(rng, buffer, first[0], &update);
        let entry = Entry {
            label: [0; LABEL_LEN],
            update,
        };
        seals.positional(rng, buffer, 0, &entry);
        let (positional, labelled) = seals.seal(self, &mut cache)?;
        self.place(0, buffer)?;
        // Full OLDEST and OLDER start a merge into a fresh buffer.
        for l in 0..self.levels.len() {
            let level = &self.levels[l];
            if let (None, [Some(a), Some(b), _]) = (&level.merge, level.slots) {
                let target = self.next_buffer;
                let scratch = self.next_buffer + 1;
                self.next_buffer += 2;
                self.levels[l].merge = Some(Merge {
                    target,
                    scratch,
                    from: [a, b],
                    step: 0,
                    updates: 0,
                    last: None,
                    stale: Vec::new(),
                });
            }
        }
        cache.retain(&self.levels);
        self.key_cache = cache;
        let put = SddRequest::Put {
            positional,
            labelled,
            drop,
        };
        common::call_answered(channel, "SDd", &put, SddResponse::Done)
    }
}

/// The keys of the buffers updates touch, each derived once while the
/// buffer lives (a derivation is an HMAC, two key derivations and an AEAD
/// key schedule, and an update reads and writes tens of entries of a few
/// buffers, most of them the same as the update before). Held in memory
/// only, wiped when dropped, never saved.
#[derive(Default)]
struct KeyCache(BTreeMap<u64, LevelKeys>);

impl KeyCache {
    fn get(&mut self, client: &SddClient, buffer: u64) -> &LevelKeys {
        self.0.entry(buffer).or_insert_with(|| client.keys(buffer))
    }

    /// The keys of `buffer`, derived before by [`get`](Self::get).
    fn peek(&self, buffer: u64) -> Result<&LevelKeys> {
        self.0
            .get(&buffer)
            .ok_or_else(|| Error::Protocol(format!("SDd keys of buffer {buffer} not derived")))
    }

    /// Drops the keys of every buffer that no level holds or merges (a
    /// few tens of buffers and levels: compared in place).
    fn retain(&mut self, levels: &[Level]) {
        let live = |b: u64| {
            levels.iter().any(|l| {
                l.slots.contains(&Some(b))
                    || l.merge
                        .as_ref()
                        .is_some_and(|m| [m.target, m.scratch, m.from[0], m.from[1]].contains(&b))
            })
        };
        self.0.retain(|&b, _| live(b));
    }
}

/// An array entry in the client's hands.
#[derive(Clone)]
struct Entry {
    /// Its label once counted (zeros before).
    label: [u8; LABEL_LEN],
    update: Update,
}

impl Entry {
    /// Whether this entry goes after `other`: by label, or by keyword.
    fn greater(&self, other: &Entry, by_label: bool) -> bool {
        if by_label {
            self.label > other.label
        } else {
            self.update.keyword > other.update.keyword
        }
    }
}

/// Runs, on the entries of an aligned block that starts at position
/// `start` of its array, the passes `(k, j)` of a bitonic network for `k`
/// from `k.0` to `k.1` and `j` from `min(k / 2, top)` down to 1 (all inside
/// the block): `i` against `i + j` (`i & j == 0`), ascending where `i & k
/// == 0`. Which entries are compared follows from the positions alone.
fn sort_block(block: &mut [Entry], start: u64, k: (u64, u64), top: u64, by_label: bool) {
    let mut kk = k.0;
    while kk <= k.1 {
        let mut j = (kk / 2).min(top);
        while j >= 1 {
            for x in 0..block.len() as u64 {
                if x & j != 0 {
                    continue;
                }
                let (a, b) = (x as usize, (x + j) as usize);
                let ascending = (start + x) & kk == 0;
                let swap = if ascending {
                    block[a].greater(&block[b], by_label)
                } else {
                    block[b].greater(&block[a], by_label)
                };
                if swap {
                    block.swap(a, b);
                }
            }
            j /= 2;
        }
        kk *= 2;
    }
}

/// A whole merge in the client's hands ([`Op::Whole`]): the entries of
/// both inputs in keyword order (NEW's array, labels zero as every array
/// entry), and, in label order, each entry's label and place in that
/// array, to publish. `labels_of` labels the entries, given as (keyword,
/// `c`: the entry's rank among its keyword's entries), in array order.
#[allow(clippy::type_complexity)]
fn merge_whole(
    mut entries: Vec<Entry>,
    labels_of: impl FnOnce(&mut dyn Iterator<Item = (&[u8], u64)>) -> Result<Vec<[u8; LABEL_LEN]>>,
) -> Result<(Vec<Entry>, Vec<([u8; LABEL_LEN], usize)>)> {
    entries.sort_by(|x, y| x.update.keyword.cmp(&y.update.keyword));
    let mut count = 0;
    let mut ranked = entries.iter().enumerate().map(|(i, e)| {
        count = match i.checked_sub(1).map(|p| &entries[p]) {
            Some(last) if last.update.keyword == e.update.keyword => count + 1,
            _ => 0,
        };
        (e.update.keyword.as_slice(), count)
    });
    let labels = labels_of(&mut ranked)?;
    if labels.len() != entries.len() {
        return Err(Error::Protocol(
            "SDd merge labelled the wrong number of entries".into(),
        ));
    }
    let mut published: Vec<([u8; LABEL_LEN], usize)> = labels.into_iter().zip(0..).collect();
    published.sort_unstable_by_key(|e| e.0);
    for e in &mut entries {
        e.label = [0; LABEL_LEN];
    }
    Ok((entries, published))
}

/// A merge of `from` under way in an older format, as
/// [`SddClient::restarted`] takes it: its inputs, and the buffers to drop
/// when the merge begun again ends (its partial target and scratch, and
/// what it was to drop already).
fn partial(target: u64, scratch: u64, from: [u64; 2], stale: &[u64]) -> ([u64; 2], Vec<u64>) {
    let mut drop = vec![target, scratch];
    drop.extend(stale);
    (from, drop)
}

impl KeywordClient for SddClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &SDD_DESCRIPTOR
    }

    fn setup_checked(&mut self, Io { rng, channel }: Io<'_>, db: &Multimap) -> Result<()> {
        common::call_answered(channel, "SDd", &SddRequest::Reset, SddResponse::Done)?;
        self.levels.clear();
        self.key_cache = KeyCache::default();
        self.seq = 0;
        let all = shuffled_additions(rng, &mut self.seq, db);
        // One whole buffer per set bit of the count, no merge under way:
        // the state a run of updates reaches when its merges have ended.
        for (level, now) in by_set_bits(&all) {
            self.build(rng, channel, level, now)?;
        }
        Ok(())
    }

    fn update_checked(
        &mut self,
        Io { rng, channel }: Io<'_>,
        update: api::Update<'_>,
    ) -> Result<()> {
        for u in sequenced("SDd", &mut self.seq, update)? {
            self.update_one(rng, channel, u)?;
        }
        Ok(())
    }

    fn search(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        keyword: &[u8],
    ) -> Result<Vec<DocId>> {
        let buffers: Vec<u64> = self.buffers().into_iter().map(|(_, b)| b).collect();
        search_containers(
            "SDd",
            keyword,
            &buffers,
            |b| self.keys(b).label_key(keyword),
            |tokens| match channel::call(channel, &SddRequest::Search { tokens })? {
                SddResponse::Found(f) if f.len() == buffers.len() => Ok(f),
                other => Err(Error::unexpected("SDd", &other)),
            },
            |b, sealed| self.open(b, sealed),
        )
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        let state = sesame_core::wire::encode(&SddState {
            master: *self.master.as_bytes(),
            seq: self.seq,
            next_buffer: self.next_buffer,
            levels: self.levels.clone(),
        })?;
        let mut out = Vec::with_capacity(STATE_V4.len() + state.len());
        out.extend_from_slice(STATE_V4);
        out.extend_from_slice(&state);
        Ok(out)
    }
}

fn buffer_key(kind: u8, buffer: u64, rest: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + rest.len());
    k.push(kind);
    k.extend_from_slice(&buffer.to_be_bytes());
    k.extend_from_slice(rest);
    k
}

/// The server half of SDd: buffers of positional entries (`a`) and of
/// labelled entries (`d`).
pub struct SddServer {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for SddServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SddServer").finish_non_exhaustive()
    }
}

impl SddServer {
    /// A server keeping its buffers in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }
}

impl Handler for SddServer {
    type Request = SddRequest;
    type Response = SddResponse;

    fn handle(&mut self, request: SddRequest) -> Result<SddResponse> {
        match request {
            SddRequest::Reset => {
                common::clear(self.store.as_ref(), b"")?;
                Ok(SddResponse::Done)
            }
            SddRequest::Fetch { items } => {
                // One read of the store for all of them.
                let keys: Vec<Vec<u8>> = items
                    .iter()
                    .map(|&(b, p)| buffer_key(b'a', b, &p.to_be_bytes()))
                    .collect();
                let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                let values = self.store.get_many(&keys)?;
                Ok(SddResponse::Items(
                    values.into_iter().map(|v| v.map(Sealed)).collect(),
                ))
            }
            SddRequest::Put {
                positional,
                labelled,
                drop,
            } => {
                let mut batch = WriteBatch::with_capacity(positional.len() + labelled.len());
                for b in drop {
                    for kind in [b'a', b'd'] {
                        for (k, _) in self.store.scan_prefix(&buffer_key(kind, b, &[]))? {
                            batch.delete(k);
                        }
                    }
                }
                for (b, p, sealed) in positional {
                    batch.put(buffer_key(b'a', b, &p.to_be_bytes()), sealed);
                }
                for (b, label, sealed) in labelled {
                    batch.put(buffer_key(b'd', b, &label), sealed);
                }
                self.store.write(batch)?;
                Ok(SddResponse::Done)
            }
            SddRequest::Search { tokens } => Ok(SddResponse::Found(found_by_label(
                self.store.as_ref(),
                tokens,
                |b, label| buffer_key(b'd', b, label),
            )?)),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}

#[cfg(test)]
#[path = "sdd_tests.rs"]
mod tests;
