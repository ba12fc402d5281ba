//! Packed pairs: a view of a store in which many pairs share one stored
//! value, for index entries looked up one by one by pseudorandom labels
//! (FAST's, Aura's, PiBas's: `sesame_core::Service::packable`).
//!
//! A B-tree engine pays per key: redb rewrites a leaf's offset arrays on
//! every insertion and keeps each key's own header; in a profile of a
//! FAST add of 576,364 entries of 58 bytes, 30 % of the time went to
//! redb's insertion of the random keys (`docs/performance.md`). Here the pairs
//! under the view are kept sorted in *chunks* of at most [`CHUNK_BYTES`]
//! encoded bytes; a chunk is stored under `prefix ‖ fence`, where its
//! fence is at most its smallest key and greater than every key of the
//! chunk before it. So:
//!
//! - a batch whose keys fall few to a chunk (at most [`MAX_APPEND`], and
//!   as few on average over the chunks it touched before) *appends* them:
//!   each pair is stored on its own as a *delta* under `prefix ‖ key`,
//!   next to its chunk, until the chunk has [`MAX_DELTAS`] deltas (or
//!   [`DELTA_BYTES`] of them); the write that would pass that bound, or
//!   that deletes a key, or that lands below the chunk's fence, or that
//!   brings more pairs (a bulk: an import's batch), rewrites the chunk
//!   with its deltas merged in, splitting any that outgrow
//!   [`CHUNK_BYTES`]: a bulk is one ordered merge pass, each chunk read
//!   once and each new chunk written once, no delta; a bulk upload into
//!   an empty view writes one stored pair per chunk, not one per entry;
//! - a lookup is one bounded probe of the base store
//!   ([`Store::scan_from`]): the stored pair at or before `prefix ‖ key`, the
//!   key's own delta (the answer), its chunk (the answer is in it), or
//!   another delta of the chunk, which names the chunk's fence: then one
//!   more probe, back from the key to the chunk (at most [`MAX_DELTAS`]
//!   deltas and the chunk, read together so that a write between the two
//!   probes cannot leave a chunk that no longer holds the key; the chunk
//!   must be the one the delta names; the test
//!   `a_write_between_a_lookups_probes_hides_no_key` in
//!   `tests/packed_memo.rs` writes between them). So at most two reads,
//!   one chunk's bytes;
//! - a chunk is its pairs in ascending key order, in the *fixed* form
//!   (`0x03`, the keys' and the values' common lengths, then keys and
//!   values back to back) when they all share their lengths (a keyword
//!   index's entries), else in the *variable* form (`0x01`, then per pair
//!   the key's length, the key, the value's length, the value); a delta
//!   is `0x02`, its chunk's fence's length, the fence, then the value
//!   (lengths in LEB128; `packed_form.rs`). A delta's value replaces the
//!   chunk's pair of the same key.
//!
//! A view may also hold its small writes in one stored pair outside its
//! prefix until there are enough to merge ([`Packed::with_pending`],
//! `packed_pending.rs`): the server's views do, so an update's entries
//! dirty one leaf of its store rather than one a delta.
//!
//! Every write of the view is one batch of the base store, so the base's
//! atomicity and durability carry over unchanged; [`Packed::plan`] gives
//! that batch to a host that commits it together with its own records.
//! The view counts its own operations as any store does (a `get` is one
//! read, whatever it cost below); the base store's counts show the probes
//! and chunk writes that really happened.
//!
//! What it costs: a lookup reads one chunk (up to 16 KB; a cold read
//! from the file costs more than a plain pair's page) where a plain store
//! reads one value, and a second read when a delta of the chunk lies
//! between the chunk's fence and the key; a write of a few pairs
//! rewrites a chunk only once the chunk's deltas are full. A damaged chunk or delta is
//! [`StoreCorrupt`](sesame_core::Error::StoreCorrupt), never a panic. Chunks written before deltas
//! existed read as they are (a chunk without deltas); a build before
//! deltas cannot read a view that holds some. Chunks in the variable form
//! (all chunks of builds before the fixed form) read as they are and are
//! written in the fixed form when a write rewrites them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use sesame_core::{IoCounter, IoCounts, Result, Store, StoredValue, WriteBatch, WriteOp};

#[path = "packed_memo.rs"]
mod memo;
pub use memo::ChunkMemo;

#[path = "packed_pending.rs"]
mod pending;
pub use pending::{pending_key, PENDING_BYTES, PENDING_MARK, PENDING_OPS};

#[path = "packed_form.rs"]
mod form;

#[path = "packed_window.rs"]
mod window;
use form::{
    damaged, damaged_delta, decode, decode_delta, delta_len, encode, encode_delta, encoded_len,
    expand, expand_owned, find, is_delta, is_fixed, put_varint, seal, Lookup, Widths, FORMAT,
};
use window::Window;

/// The byte that follows an index generation's prefix where its chunks
/// lie: the embedded backend and the server keep a packed generation
/// `G` under `G ‖ '#'`.
pub const CHUNKS_MARK: u8 = b'#';

/// Every pair under `prefix` as a scheme's server sees them: the plain
/// pairs, and the pairs packed under `prefix ‖ CHUNKS_MARK` with those
/// pending at [`pending_key`]`(prefix)`, with full keys, in key order. For tools and tests that count a generation's
/// entries.
pub fn pairs_under(base: &dyn Store, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut chunks = prefix.to_vec();
    chunks.push(CHUNKS_MARK);
    let pending = pending_key(prefix);
    let mut pairs = Vec::new();
    let mut stored = Vec::new();
    let mut held = Vec::new();
    for (key, value) in base.scan_prefix(prefix)? {
        if key.starts_with(&chunks) {
            stored.push((key, value));
        } else if key == pending {
            held = pending::pending_pairs(&key, &value)?;
        } else {
            pairs.push((key, value));
        }
    }
    let mut packed = unpack(chunks.len(), &stored, |_| true)?;
    packed.extend(held);
    for (k, v) in packed {
        let mut full = prefix.to_vec();
        full.extend_from_slice(&k);
        pairs.push((full, v));
    }
    pairs.sort();
    Ok(pairs)
}

/// The pairs that `stored` (chunks and deltas, in key order, each delta
/// after its chunk, keys `prefix_len` bytes into the view) hold, those
/// whose key `keep` accepts: a delta replaces its chunk's pair.
fn unpack(
    prefix_len: usize,
    stored: &[(Vec<u8>, Vec<u8>)],
    keep: impl Fn(&[u8]) -> bool,
) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
    let mut pairs = BTreeMap::new();
    let mut fence: Option<&[u8]> = None;
    for (key, bytes) in stored {
        if is_delta(bytes) {
            let (named, value) = decode_delta(bytes, key, prefix_len)?;
            if fence != Some(named) {
                return Err(damaged_delta(key, "it does not name the chunk before it"));
            }
            let k = &key[prefix_len..];
            if keep(k) {
                pairs.insert(k.to_vec(), value.to_vec());
            }
            continue;
        }
        fence = key.get(prefix_len..);
        let bytes = expand(bytes, key)?;
        for (k, v) in decode(&bytes, key)? {
            if keep(k) {
                pairs.insert(k.to_vec(), v.to_vec());
            }
        }
    }
    Ok(pairs)
}

/// A chunk is split once its encoding exceeds this many bytes.
pub const CHUNK_BYTES: usize = 16_128;

/// The most deltas a chunk has: a write that would add more rewrites the
/// chunk with its deltas merged in.
pub const MAX_DELTAS: usize = 32;

/// The most bytes (keys and stored values) of one chunk's deltas.
pub const DELTA_BYTES: usize = CHUNK_BYTES / 4;

/// The most pairs of one batch that a chunk takes as deltas: a batch
/// that brings a chunk more, or that brought the chunks it touched before
/// more on average (a bulk: an import's batch), rewrites it, its deltas
/// merged in, in one ordered merge pass. A delta is one insertion at a
/// random key of the base store, which in a B-tree rewrites the leaf
/// beside the chunk; in `import_batches_cost` (`tests/packed_writes`,
/// over redb) a delta cost about 47 µs and a rewritten chunk about
/// 180 µs. An import's batch brings a big index's chunks 20 or more
/// pairs each; a small import or an update (a few pairs a chunk) still
/// appends, so its write stays a few small pairs.
pub const MAX_APPEND: usize = 8;

/// The most bytes of stored chunks one write rewrites because its batch is
/// a bulk ([`MAX_APPEND`]): past them, the batch's other chunks take its
/// pairs as deltas (up to [`MAX_DELTAS`] a chunk) as a smaller batch's
/// would, and only a chunk whose deltas are full is rewritten. A write's
/// plan is held in memory until its commit, so without this bound an
/// import's batch into a large index would hold the whole index's
/// rewritten chunks at once (568 MB peak for a table of 1,000,000 rows);
/// with it the rewrite is spread over the batches that follow.
pub const MERGE_BYTES: usize = 48 << 20;

/// One pair of a chunk, borrowed from its encoding or from a batch.
type Pair<'a> = (&'a [u8], &'a [u8]);

/// A view of the pairs packed under `prefix` of a base store.
pub struct Packed {
    base: Arc<dyn Store>,
    prefix: Vec<u8>,
    io: IoCounter,
    /// Held from a write's plan to its commit.
    writer: Mutex<()>,
    /// Chunks kept between lookups ([`Packed::with_memo`]).
    memo: Option<Arc<ChunkMemo>>,
    /// The bulk rewrite's budget of one write ([`MERGE_BYTES`]).
    merge_bytes: usize,
    /// Where small writes are held ([`Packed::with_pending`]).
    pending: Option<Vec<u8>>,
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packed")
            .field("prefix", &String::from_utf8_lossy(&self.prefix))
            .finish_non_exhaustive()
    }
}

/// The base store's writes for a logical batch ([`Packed::plan`]).
#[derive(Debug, Default)]
pub struct Plan {
    /// The writes, with full keys of the base store.
    pub batch: WriteBatch,
    /// How many puts change the value of a key already stored (a
    /// write-once scheme refuses such a batch).
    pub overwrites: usize,
}

impl Packed {
    /// The pairs packed under `prefix` of `base`. Nothing else may write
    /// keys under `prefix`, and writes are one at a time: this view's own
    /// writes wait for each other, but two views of one prefix, or a
    /// [`Packed::plan`] and another write, must be kept apart by their host
    /// (the embedded client: one process per profile, one operation at a
    /// time).
    pub fn new(base: Arc<dyn Store>, prefix: impl Into<Vec<u8>>) -> Self {
        Self {
            base,
            prefix: prefix.into(),
            io: IoCounter::default(),
            writer: Mutex::new(()),
            memo: None,
            merge_bytes: MERGE_BYTES,
            pending: None,
        }
    }

    /// This view with another budget than [`MERGE_BYTES`] for the chunks
    /// one write rewrites as a bulk (tests use a small one).
    pub fn with_merge_bytes(mut self, bytes: usize) -> Self {
        self.merge_bytes = bytes;
        self
    }

    /// The view of [`Packed::new`] whose lookups keep the chunks they
    /// read in `memo` and answer from it while the base store is
    /// unwritten (`packed_memo.rs`: which base stores it serves).
    pub fn with_memo(
        base: Arc<dyn Store>,
        prefix: impl Into<Vec<u8>>,
        memo: Arc<ChunkMemo>,
    ) -> Self {
        Self {
            memo: Some(memo),
            ..Self::new(base, prefix)
        }
    }

    fn full(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix.len() + key.len());
        k.extend_from_slice(&self.prefix);
        k.extend_from_slice(key);
        k
    }

    /// The chunk whose range holds `key`: the one at or before it (found
    /// through a delta of it when one lies between), else (a key below
    /// every fence) the first one. Returns its full key and encoding.
    fn chunk_for(&self, key: &[u8]) -> Result<Option<(Vec<u8>, StoredValue)>> {
        let at = self
            .base
            .scan_from_shared(&self.prefix, &self.full(key), true, 1)?;
        if let Some((stored, bytes)) = at.into_iter().next() {
            if is_delta(&bytes) {
                let (fence, _) = decode_delta(&bytes, &stored, self.prefix.len())?;
                return self.chunk_of_delta(fence, &stored).map(Some);
            }
            return Ok(Some((stored, bytes)));
        }
        let first = self
            .base
            .scan_from_shared(&self.prefix, &self.prefix, false, 1)?;
        match first.into_iter().next() {
            Some((stored, bytes)) if is_delta(&bytes) => {
                Err(damaged_delta(&stored, "it lies before every chunk"))
            }
            first => Ok(first),
        }
    }

    /// The chunk of fence `fence` that the delta stored under `delta`
    /// names: its full key and encoding.
    fn chunk_of_delta(&self, fence: &[u8], delta: &[u8]) -> Result<(Vec<u8>, StoredValue)> {
        let key = self.full(fence);
        let at = self.base.scan_from_shared(&self.prefix, &key, false, 1)?;
        match at.into_iter().next() {
            Some((stored, bytes)) if stored == key && !is_delta(&bytes) => Ok((key, bytes)),
            _ => Err(damaged_delta(delta, "the chunk it names is missing")),
        }
    }

    /// The base store's batch that applies `batch` (read against the base
    /// store as it is now: the caller commits it before anything else
    /// writes under the prefix).
    pub fn plan(&self, batch: &WriteBatch) -> Result<Plan> {
        let ascending = batch
            .ops()
            .windows(2)
            .all(|w| key_value(&w[0]).0 < key_value(&w[1]).0);
        let ops: Vec<(&[u8], Option<&[u8]>)> = if ascending {
            // A drained overlay's batch: in order, each key once.
            batch.ops().iter().map(key_value).collect()
        } else {
            // The last operation on a key is the one that counts.
            let mut ops: BTreeMap<&[u8], Option<&[u8]>> = BTreeMap::new();
            for (key, value) in batch.ops().iter().map(key_value) {
                ops.insert(key, value);
            }
            ops.into_iter().collect()
        };
        match &self.pending {
            Some(key) => self.plan_with_pending(key, &ops),
            None => self.plan_ops(&ops),
        }
    }

    /// The plan of `ops` (sorted, each key once) into the chunks.
    fn plan_ops(&self, ops: &[(&[u8], Option<&[u8]>)]) -> Result<Plan> {
        let plen = self.prefix.len();
        let mut plan = Plan::default();
        let mut chunks = Window::default();
        let mut out = Emitter::default();
        // The chunk that follows the last one rewritten: a batch that
        // rewrites it too continues the run.
        let mut follows: Option<Vec<u8>> = None;
        // The chunks this batch touched so far: a batch that brought them
        // more than MAX_APPEND pairs each on average is a bulk.
        let mut touched = 0;
        // The bytes of chunks rewritten as a bulk so far (MERGE_BYTES).
        let mut merged_bytes = 0;
        let mut i = 0;
        while i < ops.len() {
            chunks.seek(self, ops[i].0)?;
            let (chunk_key, stored, deltas) = match chunks.current() {
                Some((key, value, deltas)) => (Some(key), value, deltas),
                None => (None, [].as_slice(), Vec::new()),
            };
            let upto = match chunks.next_fence(plen) {
                Some(end) => i + ops[i..].partition_point(|(k, _)| *k < end),
                None => ops.len(),
            };
            let here = &ops[i..upto];
            touched += 1;
            let within = merged_bytes < self.merge_bytes;
            let bulk = upto > MAX_APPEND * touched && within;
            // A bulk past its budget appends as much as a chunk's deltas hold.
            let limit = if within { MAX_APPEND } else { MAX_DELTAS };
            if let Some(chunk_key) = chunk_key.filter(|_| !bulk) {
                if appendable(&chunk_key[plen..], &deltas, here, plen, limit) {
                    // The chunk stays; its new pairs are deltas beside it.
                    out.finish(self, &mut plan.batch)?;
                    follows = None;
                    let fence = &chunk_key[plen..];
                    // Searched in place, not decoded whole: the chunk is
                    // not rewritten (`packed_form.rs`, `Lookup`).
                    let pairs = Lookup::new(stored, chunk_key)?;
                    for &(key, value) in here {
                        let Some(value) = value else { continue };
                        let old = match deltas.binary_search_by(|(k, _)| k[plen..].cmp(key)) {
                            Ok(at) => Some(decode_delta(deltas[at].1, deltas[at].0, plen)?.1),
                            Err(_) => pairs.get(key),
                        };
                        match old {
                            Some(old) if old == value => continue,
                            Some(_) => plan.overwrites += 1,
                            None => {}
                        }
                        plan.batch.put(self.full(key), encode_delta(fence, value));
                    }
                    i = upto;
                    continue;
                }
            }
            let expanded = chunk_key.map(|key| expand(stored, key)).transpose()?;
            let old = match (chunk_key, expanded.as_deref()) {
                (Some(key), Some(stored)) => {
                    let pairs = decode(stored, key)?;
                    let mut appended = Vec::with_capacity(deltas.len());
                    for (k, bytes) in &deltas {
                        appended.push((&k[plen..], Some(decode_delta(bytes, k, plen)?.1)));
                    }
                    merge(&pairs, &appended).0
                }
                _ => Vec::new(),
            };
            let (merged, overwrites) = merge(&old, here);
            plan.overwrites += overwrites;
            if bulk {
                merged_bytes += merged.iter().map(|(k, v)| encoded_len(k, v)).sum::<usize>();
            }
            if chunk_key.is_none() || chunk_key != follows.as_deref() {
                out.finish(self, &mut plan.batch)?;
                out.fence = chunk_key.map(|k| k[plen..].to_vec());
            }
            if let Some(key) = chunk_key {
                plan.batch.delete(key.to_vec());
                for (k, _) in &deltas {
                    plan.batch.delete(k.to_vec());
                }
            }
            for (key, value) in merged {
                out.push(self, &mut plan.batch, key, value)?;
            }
            follows = chunks.next_chunk().map(|(k, _)| k.to_vec());
            i = upto;
        }
        out.finish(self, &mut plan.batch)?;
        Ok(plan)
    }
}

/// Whether `ops` (sorted, within the range of the chunk of fence `fence`
/// whose deltas are `deltas`) may be appended as deltas: at most
/// `limit` of them ([`MAX_APPEND`], or [`MAX_DELTAS`] for a bulk past
/// [`MERGE_BYTES`]), puts only, every key above the fence (a delta
/// under the fence would be the chunk's own key), and the chunk's deltas
/// within [`MAX_DELTAS`] and [`DELTA_BYTES`] afterwards.
fn appendable(
    fence: &[u8],
    deltas: &[(&[u8], &[u8])],
    ops: &[(&[u8], Option<&[u8]>)],
    plen: usize,
    limit: usize,
) -> bool {
    if ops.len() > limit
        || !ops
            .iter()
            .all(|(key, value)| value.is_some() && *key > fence)
    {
        return false;
    }
    let mut count = deltas.len();
    let mut bytes: usize = deltas.iter().map(|(k, v)| k.len() + v.len()).sum();
    for (key, value) in ops {
        if deltas
            .binary_search_by(|(k, _)| k[plen..].cmp(key))
            .is_err()
        {
            count += 1;
        }
        bytes += plen + key.len() + delta_len(fence, value.unwrap_or_default());
    }
    count <= MAX_DELTAS && bytes <= DELTA_BYTES
}

/// The key of a write, and its value (`None`: a deletion).
fn key_value(op: &WriteOp) -> (&[u8], Option<&[u8]>) {
    match op {
        WriteOp::Put { key, value } => (key, Some(value)),
        WriteOp::Delete { key } => (key, None),
    }
}

/// The new chunks of a *run*: neighbouring chunks that one batch rewrites,
/// whose pairs are written again in order. Each chunk is filled up to
/// [`CHUNK_BYTES`] before the next begins, so a batch that touches every
/// chunk (a bulk of pseudorandom labels) leaves them full rather than
/// split in halves; the run's last two chunks are evened out when the
/// last one would be under half full, so a chunk that one small batch
/// overflows splits in two halves, not into a full chunk and a sliver.
///
/// The old chunks' deletions are all in the batch before any new chunk
/// that could reuse one of their keys: a new chunk's fence is at most its
/// first key, which lies in an old chunk already read.
#[derive(Default)]
struct Emitter {
    /// The fence of the run's first old chunk, until the first new chunk
    /// takes it (`None`: the view held no chunk, or it was taken).
    fence: Option<Vec<u8>>,
    /// The full chunk before `cur`, kept until it is known whether `cur`
    /// will be evened out with it.
    prev: Option<Building>,
    /// The chunk being filled (no pair: none).
    cur: Building,
    /// The last key pushed in this run (empty: none yet).
    last: Vec<u8>,
}

/// A chunk being built: its fence, its pairs in the variable form, and
/// the lengths they share (the form it is stored in: `packed_form.rs`).
#[derive(Default)]
struct Building {
    fence: Vec<u8>,
    variable: Vec<u8>,
    widths: Widths,
    count: usize,
}

impl Building {
    /// Its stored bytes, with one more pair of `key` and `value`.
    fn stored_len_with(&self, key: &[u8], value: &[u8]) -> usize {
        self.widths.with(key, value).stored_len(
            self.count + 1,
            self.variable.len().max(1) + encoded_len(key, value),
        )
    }

    fn stored_len(&self) -> usize {
        self.widths.stored_len(self.count, self.variable.len())
    }

    /// Puts the chunk in `batch` in its stored form.
    fn put(self, view: &Packed, batch: &mut WriteBatch) -> Result<()> {
        let key = view.full(&self.fence);
        let bytes = seal(self.variable, &key)?;
        batch.put(key, bytes);
        Ok(())
    }
}

impl Emitter {
    fn push(
        &mut self,
        view: &Packed,
        batch: &mut WriteBatch,
        key: &[u8],
        value: &[u8],
    ) -> Result<()> {
        // Neighbouring chunks hold ascending keys, unless the plan read
        // them while another writer changed them (its host's conditional
        // commit then refuses the plan) or the layout is damaged: a key
        // out of order ends the run, so every chunk written stays sorted.
        if !self.last.is_empty() && key <= self.last.as_slice() {
            self.finish(view, batch)?;
        }
        self.last.clear();
        self.last.extend_from_slice(key);
        if self.cur.count > 0 && self.cur.stored_len_with(key, value) > CHUNK_BYTES {
            let full = std::mem::take(&mut self.cur);
            if let Some(prev) = self.prev.replace(full) {
                prev.put(view, batch)?;
            }
        }
        if self.cur.count == 0 {
            // The first chunk keeps the run's old fence while it is still at
            // most its smallest key; every other fence is its first key.
            self.cur.fence = match self.fence.take() {
                Some(f) if f.as_slice() <= key => f,
                _ => key.to_vec(),
            };
            self.cur.variable.push(FORMAT);
        }
        let cur = &mut self.cur;
        cur.widths = cur.widths.with(key, value);
        cur.count += 1;
        put_varint(&mut cur.variable, key.len());
        cur.variable.extend_from_slice(key);
        put_varint(&mut cur.variable, value.len());
        cur.variable.extend_from_slice(value);
        Ok(())
    }

    /// Puts the run's remaining chunks and starts afresh.
    fn finish(&mut self, view: &Packed, batch: &mut WriteBatch) -> Result<()> {
        let cur = std::mem::take(&mut self.cur);
        let prev = self.prev.take();
        self.fence = None;
        self.last.clear();
        match prev {
            Some(prev) if cur.count > 0 && cur.stored_len() < CHUNK_BYTES / 2 => {
                let mut pairs = decode(&prev.variable, &prev.fence)?;
                pairs.extend(decode(&cur.variable, &cur.fence)?);
                let total: usize = pairs.iter().map(|(k, v)| encoded_len(k, v)).sum();
                let mut size = 0;
                let mut split = 0;
                while split + 1 < pairs.len() && size < total / 2 {
                    size += encoded_len(pairs[split].0, pairs[split].1);
                    split += 1;
                }
                let split = split.max(1);
                batch.put(view.full(&prev.fence), encode(&pairs[..split]));
                batch.put(view.full(pairs[split].0), encode(&pairs[split..]));
            }
            prev => {
                if let Some(prev) = prev {
                    prev.put(view, batch)?;
                }
                if cur.count > 0 {
                    cur.put(view, batch)?;
                }
            }
        }
        Ok(())
    }
}

/// `old` (sorted) with `ops` (sorted, one per key) applied, and how many
/// puts changed a stored value.
fn merge<'a>(old: &[Pair<'a>], ops: &[(&'a [u8], Option<&'a [u8]>)]) -> (Vec<Pair<'a>>, usize) {
    let mut out = Vec::with_capacity(old.len() + ops.len());
    let mut overwrites = 0;
    let (mut a, mut b) = (0, 0);
    while a < old.len() || b < ops.len() {
        let take_old = b == ops.len() || (a < old.len() && old[a].0 < ops[b].0);
        if take_old {
            out.push(old[a]);
            a += 1;
            continue;
        }
        let (key, value) = ops[b];
        if a < old.len() && old[a].0 == key {
            if value.is_some_and(|v| v != old[a].1) {
                overwrites += 1;
            }
            a += 1;
        }
        if let Some(value) = value {
            out.push((key, value));
        }
        b += 1;
    }
    (out, overwrites)
}

impl Packed {
    /// The value of `key` (full key `full`) given the stored pair at or
    /// before `full` (`at`).
    fn answer(
        &self,
        key: &[u8],
        full: &[u8],
        at: Option<(Vec<u8>, StoredValue)>,
    ) -> Result<Option<Vec<u8>>> {
        Ok(match at {
            Some((stored, bytes)) if is_delta(&bytes) => {
                let (_, value) = decode_delta(&bytes, &stored, self.prefix.len())?;
                if stored == full {
                    Some(value.to_vec())
                } else {
                    // Another delta of the key's chunk: the chunk itself.
                    self.answer_past_deltas(key, full)?
                }
            }
            Some((chunk_key, bytes)) => find(&bytes, &chunk_key, key)?,
            None => None,
        })
    }
}

impl Packed {
    /// The chunks' values of `keys` (any order), sought in ascending order
    /// through one [`Window`] ([`Store::get_many`]); the pending record is
    /// not read.
    fn chunk_values(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by(|&a, &b| keys[a].cmp(keys[b]));
        let mut out = vec![None; keys.len()];
        let plen = self.prefix.len();
        let mut window = Window::default();
        let mut at = 0;
        while at < order.len() {
            window.seek(self, keys[order[at]])?;
            let Some((chunk_key, stored, deltas)) = window.current() else {
                break; // The view holds no chunk.
            };
            let end = window.next_fence(plen);
            let from = at;
            while order
                .get(at)
                .is_some_and(|&i| end.is_none_or(|end| keys[i] < end))
            {
                at += 1;
            }
            // A chunk of one width is searched in place for each key (a
            // keyword index: a key or two a chunk); one of mixed widths
            // is read once for all of them (a table's records).
            let pairs = match is_fixed(stored) {
                true => None,
                false => Some(Lookup::new(stored, chunk_key)?),
            };
            for &i in &order[from..at] {
                let key = keys[i];
                out[i] = match deltas.binary_search_by(|(k, _)| k[plen..].cmp(key)) {
                    Ok(d) => Some(decode_delta(deltas[d].1, deltas[d].0, plen)?.1.to_vec()),
                    Err(_) => match &pairs {
                        Some(pairs) => pairs.get(key).map(<[u8]>::to_vec),
                        None => find(stored, chunk_key, key)?,
                    },
                };
            }
            if at == from {
                // Not reached: the chunk sought holds the key's range. A
                // guard against looping on a window that does not.
                at += 1;
            }
        }
        Ok(out)
    }

    /// [`Store::get`] without a memo: one probe at or before `full`, and
    /// a second back to the chunk when it finds another delta.
    fn get_plain(&self, key: &[u8], full: &[u8]) -> Result<Option<Vec<u8>>> {
        let at = self.base.scan_from_shared(&self.prefix, full, true, 1)?;
        self.answer(key, full, at.into_iter().next())
    }

    /// The answer for `key` (`full`: with the prefix) when the stored pair
    /// at or before it is another delta of its chunk: the pairs from the
    /// key back to its chunk, read in one probe (a chunk has at most
    /// [`MAX_DELTAS`] deltas), so that the chunk is the one of the state
    /// the deltas were read in. Read in two probes (the delta, then the
    /// chunk it names), a write between them that merges the chunk's
    /// deltas and splits it leaves at the fence a chunk that no longer
    /// holds the key: the key would be answered absent.
    fn answer_past_deltas(&self, key: &[u8], full: &[u8]) -> Result<Option<Vec<u8>>> {
        let window = self
            .base
            .scan_from_shared(&self.prefix, full, true, MAX_DELTAS + 2)?;
        // The chunk the nearest delta names: the first chunk back from it.
        let mut named: Option<(&[u8], Vec<u8>)> = None;
        for (stored, bytes) in &window {
            if !is_delta(bytes) {
                return match named {
                    Some((delta, fence)) if *stored != fence => {
                        Err(damaged_delta(delta, "the chunk it names is missing"))
                    }
                    _ => find(bytes, stored, key),
                };
            }
            let (fence, value) = decode_delta(bytes, stored, self.prefix.len())?;
            if stored == full {
                return Ok(Some(value.to_vec()));
            }
            if named.is_none() {
                named = Some((stored, self.full(fence)));
            }
        }
        // More deltas than a chunk holds before its chunk (or none left):
        // the chunk the last one names, read on its own.
        match window.last() {
            Some((stored, bytes)) => {
                let (fence, _) = decode_delta(bytes, stored, self.prefix.len())?;
                let (chunk_key, chunk) = self.chunk_of_delta(fence, stored)?;
                find(&chunk, &chunk_key, key)
            }
            None => Ok(None),
        }
    }
}

impl Store for Packed {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let full = self.full(key);
        // The pending record first, then the chunks (`packed_pending.rs`).
        let value = match self.pending_value(key)? {
            Some(value) => Some(value),
            None => match &self.memo {
                Some(memo) => self.get_through(memo, key, &full)?,
                None => self.get_plain(key, &full)?,
            },
        };
        self.io.read(value.as_ref().map_or(0, Vec::len));
        Ok(value)
    }

    /// Without a memo, the keys are sought in ascending order through
    /// one [`Window`]: each chunk they fall in is read once (with its
    /// deltas, reading ahead while they fall in neighbouring chunks) and
    /// decoded once, where one `get` per key would read and search a
    /// chunk per key. A table's records read by a query (thousands of
    /// identifiers, tens to a chunk) are the case it serves. With a memo,
    /// each key goes through it as [`Store::get`] does.
    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        if self.memo.is_some() || keys.len() < 2 {
            return keys.iter().map(|k| self.get(k)).collect();
        }
        // The pending record first, then the chunks (`packed_pending.rs`).
        let record = self.pending_record()?;
        let held = match &record {
            Some((at, bytes)) => Some(Lookup::new(bytes, at)?),
            None => None,
        };
        let mut out = self.chunk_values(keys)?;
        if let Some(held) = held {
            for (value, key) in out.iter_mut().zip(keys) {
                if let Some(v) = held.get(key) {
                    *value = Some(v.to_vec());
                }
            }
        }
        for value in &out {
            self.io.read(value.as_ref().map_or(0, Vec::len));
        }
        Ok(out)
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let _one_at_a_time = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        self.base.write(self.plan(&batch)?.batch)?;
        self.io.batch(&batch);
        Ok(())
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        // The chunk whose range holds the first key under `prefix` may lie
        // before it; every later chunk and delta lies under it.
        let full = self.full(prefix);
        // The pending record first, then the chunks (`packed_pending.rs`).
        let held = match self.pending_record()? {
            Some((at, bytes)) => pending::pending_pairs(at, &bytes)?,
            None => Vec::new(),
        };
        let mut stored = Vec::new();
        let before = self.base.scan_from(&self.prefix, &full, true, 1)?;
        if let Some((key, bytes)) = before.into_iter().next() {
            if is_delta(&bytes) {
                // Its chunk lies before `full` (a fence is below its
                // deltas' keys), not under it.
                let (fence, _) = decode_delta(&bytes, &key, self.prefix.len())?;
                let (chunk_key, chunk) = self.chunk_of_delta(fence, &key)?;
                stored.push((chunk_key, chunk.into_vec()));
            } else if key < full {
                stored.push((key, bytes));
            }
        }
        stored.extend(self.base.scan_prefix(&full)?);
        let mut pairs = unpack(self.prefix.len(), &stored, |k| k.starts_with(prefix))?;
        pairs.extend(held.into_iter().filter(|(k, _)| k.starts_with(prefix)));
        crate::counted_scan(&self.io, pairs.into_iter().collect())
    }

    fn io_counts(&self) -> IoCounts {
        self.io.counts()
    }

    fn flush(&self) -> Result<()> {
        self.base.flush()
    }

    fn backend(&self) -> &'static str {
        self.base.backend()
    }

    fn health(&self) -> Result<()> {
        self.base.health()
    }

    /// The base store's check, then [`Packed::check_chunks`].
    fn verify(&self) -> Result<()> {
        self.base.verify()?;
        self.check_chunks()
    }
}

/// How many stored pairs (chunks and deltas) [`Packed::compact`] reads a
/// probe.
const COMPACT_PAGE: usize = 128;

/// The bytes of rewritten chunks [`Packed::compact`] puts in one batch of
/// the base store.
const COMPACT_BATCH_BYTES: usize = 4 << 20;

impl Packed {
    /// Merges the pending record ([`Packed::with_pending`]) and every
    /// chunk's deltas into the chunks: each chunk that has
    /// deltas is written again with them in it (split as a plan splits a
    /// chunk that outgrows [`CHUNK_BYTES`]) and its deltas are deleted.
    /// Returns how many chunks were rewritten.
    ///
    /// Why: a lookup whose probe lands on another delta of its chunk reads
    /// the chunk a second time (after an import, most lookups: an import
    /// appends each batch's entries as deltas); after this, every lookup is
    /// one probe.
    ///
    /// What it changes: the layout, not the pairs (every lookup and scan
    /// answers as before), in batches of the base store of at most
    /// [`COMPACT_BATCH_BYTES`] of chunks, each atomic: a run cut short
    /// leaves some chunks merged and the rest as they were, both valid.
    /// What a reader of the store learns: the pairs it already held, in
    /// other chunks; which chunks had deltas, which it saw already. The
    /// writes wait for this view's other writes, as [`Packed::plan`]'s do
    /// (the host keeps other writers of the prefix apart).
    pub fn compact(&self) -> Result<usize> {
        let _one_at_a_time = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        // The pending record first (its pairs may land as deltas, which
        // the pass below merges).
        if let Some(batch) = self.merge_pending()? {
            self.base.write(batch)?;
        }
        let mut from = self.prefix.clone();
        // The chunk being read and its deltas so far.
        let mut group: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut batch = WriteBatch::new();
        let mut rewritten = 0;
        loop {
            let page = self
                .base
                .scan_from(&self.prefix, &from, false, COMPACT_PAGE)?;
            let last_page = page.len() < COMPACT_PAGE;
            if let Some((key, _)) = page.last() {
                from.clone_from(key);
                from.push(0);
            }
            for (key, value) in page {
                if is_delta(&value) {
                    if group.is_empty() {
                        return Err(damaged_delta(&key, "it lies before every chunk"));
                    }
                } else {
                    rewritten += usize::from(self.merge_group(&group, &mut batch)?);
                    group.clear();
                }
                group.push((key, value));
            }
            // Every rewritten chunk lies before the group still open, so
            // before `from`: the scan goes on past what is written.
            if batch.bytes() >= COMPACT_BATCH_BYTES {
                self.base.write(std::mem::take(&mut batch))?;
            }
            if last_page {
                break;
            }
        }
        rewritten += usize::from(self.merge_group(&group, &mut batch)?);
        if !batch.is_empty() {
            self.base.write(batch)?;
        }
        Ok(rewritten)
    }

    /// Puts in `batch` the rewrite of `group` (a chunk, then its deltas)
    /// with its deltas merged in; whether there were any.
    fn merge_group(&self, group: &[(Vec<u8>, Vec<u8>)], batch: &mut WriteBatch) -> Result<bool> {
        let Some(((chunk_key, bytes), deltas)) = group.split_first() else {
            return Ok(false);
        };
        if deltas.is_empty() {
            return Ok(false);
        }
        let plen = self.prefix.len();
        let fence = &chunk_key[plen..];
        let mut appended = Vec::with_capacity(deltas.len());
        for (key, stored) in deltas {
            let (named, value) = decode_delta(stored, key, plen)?;
            if named != fence {
                return Err(damaged_delta(key, "it does not name the chunk before it"));
            }
            appended.push((&key[plen..], Some(value)));
        }
        let bytes = expand(bytes, chunk_key)?;
        let (merged, _) = merge(&decode(&bytes, chunk_key)?, &appended);
        batch.delete(chunk_key.clone());
        for (key, _) in deltas {
            batch.delete(key.clone());
        }
        let mut out = Emitter {
            fence: Some(fence.to_vec()),
            ..Emitter::default()
        };
        for (key, value) in merged {
            out.push(self, batch, key, value)?;
        }
        out.finish(self, batch)?;
        Ok(true)
    }

    /// Decodes every chunk and delta under the view and checks it:
    /// lengths, key order, every key within its chunk's range, every delta
    /// naming the chunk before it, at most [`MAX_DELTAS`] deltas a chunk.
    /// A damaged chunk or delta is [`StoreCorrupt`](sesame_core::Error::StoreCorrupt) naming it.
    /// (What [`Store::verify`] adds to the base store's own check.)
    pub fn check_chunks(&self) -> Result<()> {
        if let Some((at, bytes)) = self.pending_record()? {
            pending::pending_pairs(at, &bytes)?;
        }
        let plen = self.prefix.len();
        let stored = self.base.scan_prefix(&self.prefix)?;
        let chunks: Vec<usize> = (0..stored.len())
            .filter(|&i| !is_delta(&stored[i].1))
            .collect();
        for (n, &i) in chunks.iter().enumerate() {
            let (chunk_key, bytes) = &stored[i];
            let bytes = expand(bytes, chunk_key)?;
            let pairs = decode(&bytes, chunk_key)?;
            let fence = &chunk_key[plen..];
            let next = chunks.get(n + 1).map(|&j| &stored[j].0[plen..]);
            let inside = |k: &[u8]| k >= fence && next.is_none_or(|n| k < n);
            if pairs.is_empty() || !pairs.iter().all(|(k, _)| inside(k)) {
                return Err(damaged(chunk_key, "a key outside the chunk's range"));
            }
            let end = chunks.get(n + 1).copied().unwrap_or(stored.len());
            if end - i - 1 > MAX_DELTAS {
                return Err(damaged(chunk_key, "more deltas than a chunk may have"));
            }
            for (key, bytes) in &stored[i + 1..end] {
                let (named, _) = decode_delta(bytes, key, plen)?;
                if named != fence || !inside(&key[plen..]) {
                    return Err(damaged_delta(key, "it names another chunk"));
                }
            }
        }
        match (stored.first(), chunks.first()) {
            (Some((key, _)), first) if first != Some(&0) => {
                Err(damaged_delta(key, "it lies before every chunk"))
            }
            _ => Ok(()),
        }
    }
}
