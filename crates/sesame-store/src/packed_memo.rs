//! A memo of packed chunks ([`crate::packed`]) kept in memory between
//! lookups, so that a long-running reader (`sesame sql`) answers a
//! lookup in a chunk it has read before without a probe of the store.
//!
//! Why: a point query of FAST's keyword index is one [`Packed`] lookup
//! per matched entry, each a range probe of the base store and a copy of
//! a whole chunk (up to 16 KB) to find one value of a few dozen bytes; a
//! server that has run a while reads the same chunks again and again.
//!
//! What a held chunk answers: a key in `[fence, end)`, where `end` is the
//! stored key that follows the chunk. It is held only when that stored
//! key is another chunk (or there is none): a chunk with deltas beside it
//! is never held, so the held bytes are the whole answer for every key of
//! its range, exactly what [`Packed`]'s own lookup finds.
//!
//! Why it is never stale: every held chunk is labelled with the base
//! store's count of settled writes ([`sesame_core::WriteMarks`]) read
//! *before* the chunk was read, and a lookup uses the memo only while the
//! store's count is still that label; any write through any handle of the
//! base store is settled after it is applied, and drops every held chunk
//! at the next lookup. A chunk and the key after it are two probes of the
//! store: the chunk is held only when no write was in flight at any
//! moment of them (the writes begun, read after the probes, are still the
//! label), so that the two saw one state; a write between them (a merge
//! of two chunks, then the key after the first is past its pairs) would
//! otherwise leave a chunk held over a range it no longer holds whole.
//! So the memo serves only a base store that marks every write
//! ([`Store::write_marks`]) and that no other process writes while the
//! memo lives: [`crate::RedbStore`] (its file is locked by the process
//! that opened it) and [`crate::MemoryStore`]; on any other a lookup goes
//! to the store as without the memo. The embedded client turns it on only
//! for `sesame sql`. A damaged chunk is refused when it is read, as
//! [`Packed`] refuses it, and is not held.
//!
//! What the store sees: the probes of the chunks read for the first time
//! (as without the memo) and, for each, one more probe of the stored key
//! that follows it; a lookup in a held chunk reads nothing. So the store
//! sees a subset of the chunk reads it saw before, each chunk once while
//! no write intervenes, plus the chunk that follows each one read.
//!
//! How a held key is found: besides the chunks by their keys, the memo
//! keeps one hash table over the held keys that lookups asked for (the
//! hash of its view's prefix and its key, under a key drawn per memo, to
//! its chunk and its place there), so that a lookup of such a key again is
//! a probe of that table and one comparison of the key and of the view,
//! not a search down the chunks and through one (a dozen cache misses
//! each in a memo of a few hundred megabytes). A key enters the table when
//! a lookup finds it through its held chunk, not when the chunk is held:
//! a chunk is read for one key and holds hundreds, and entering them all
//! (a cache miss each in a table of millions) made the chunk's first read
//! cost several times the read itself. A key the table does not send to
//! its own pair in its own view (a key not entered, or two keys sharing a
//! hash) is looked up through its chunk as before; so the table only
//! shortens the way to an answer the held chunk gives, and is emptied
//! with the chunks.
//!
//! How a key is found in its held chunk: each held chunk keeps, beside
//! its bytes, the bytes its keys share (those of its first and last key)
//! and a dense array of each key's next eight bytes as a number (its
//! head). A search guesses the key's place by interpolation between the
//! first and the last head (labels and identifiers spread evenly), gallops
//! from the guess to the heads equal to the key's, and compares whole
//! keys there only. A binary search over the pairs read a pair's range
//! and then its key's bytes at every step, two cache misses a step; it
//! was a fifth of a point query's time in `sesame sql`
//! (`docs/performance.md`, "A held chunk searched by its keys' heads").
//!
//! Bounded: all held chunks together (with their entries in the hash
//! table) take at most the bytes given to [`ChunkMemo::new`]; when a
//! chunk would pass that, the memo is emptied and filled again.
//!
//! Tests (`tests/packed_memo.rs`):
//! `a_memo_answers_as_the_store_after_writes_by_another_handle`,
//! `a_reader_beside_a_writer_sees_every_write_that_returned`,
//! `a_write_between_a_lookups_probes_hides_no_key`,
//! `a_chunk_read_while_a_write_is_in_flight_is_not_held`,
//! `a_memo_never_holds_a_chunk_with_deltas`, `a_memo_refuses_a_damaged_chunk`,
//! `a_memo_keeps_the_chunks_of_two_views_apart`,
//! `a_memo_reads_only_chunks_a_plain_view_reads_and_their_successors`;
//! and of the hash table (this module):
//! `a_key_whose_hash_is_shared_is_answered_through_its_chunk`,
//! `a_search_by_heads_finds_what_a_search_of_keys_finds` (proptest),
//! `the_gallop_finds_the_first_place_from_any_guess`,
//! `the_index_never_answers_a_key_of_another_view`,
//! `the_index_holds_the_keys_looked_up_not_every_held_pair`.
//!
//! [`Packed`]: crate::packed::Packed

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use sesame_core::{Result, Store, StoredValue};

use super::{decode, expand_owned, is_delta, Packed};

impl Packed {
    /// [`Store::get`] through `memo`: a held chunk answers; else the
    /// chunk is read as without the memo and, when no delta lies beside
    /// it, held.
    pub(super) fn get_through(
        &self,
        memo: &ChunkMemo,
        key: &[u8],
        full: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        // Read before the store: a write settled after it moves the count,
        // and what is read now is then never used again.
        let Some(before) = self.base.write_marks() else {
            // A store that cannot say when it was written: no memo.
            return self.get_plain(key, full);
        };
        let count = before.settled;
        if let Some(value) = memo.lookup(&self.prefix, key, full, count) {
            return Ok(value);
        }
        let at = self.base.scan_from(&self.prefix, full, true, 1)?;
        let (chunk_key, bytes) = match at.into_iter().next() {
            Some((k, b)) if !is_delta(&b) => (k, b),
            // A delta, or nothing at or before the key: as without the memo.
            other => return self.answer(key, full, other.map(|(k, b)| (k, StoredValue::Owned(b)))),
        };
        let mut after = chunk_key.clone();
        after.push(0);
        let end = match self
            .base
            .scan_from(&self.prefix, &after, false, 1)?
            .into_iter()
            .next()
        {
            // Deltas beside the chunk: answered as without the memo.
            Some((_, next)) if is_delta(&next) => {
                return self.answer(key, full, Some((chunk_key, StoredValue::Owned(bytes))));
            }
            next => next.map(|(k, _)| k),
        };
        let held = Held::read(bytes, &chunk_key, self.prefix.len(), end)?;
        let value = held.find(key);
        // The chunk and the key after it were read in two probes: held
        // only when no write was in flight at any moment of them (one was
        // settled before the first, none begun since), so that both saw
        // one state of the store.
        let quiet = self
            .base
            .write_marks()
            .is_some_and(|after| after.begun == count);
        if quiet {
            memo.hold(chunk_key, held, count);
        }
        Ok(value)
    }
}

/// One held chunk: its encoding, where each pair starts in it, and the
/// stored key that follows it.
pub(crate) struct Held {
    /// The length of its view's prefix in its key.
    prefix_len: usize,
    /// The full key of the stored pair after the chunk, `None` when it is
    /// the last under the view.
    pub(crate) end: Option<Vec<u8>>,
    /// The chunk's encoding.
    pub(crate) bytes: Vec<u8>,
    /// Per pair in ascending key order: its key's and its value's ranges
    /// in `bytes`.
    pub(crate) pairs: Vec<(Range<u32>, Range<u32>)>,
    /// The bytes every key of the chunk starts with (those its first and
    /// its last key share).
    common: Range<u32>,
    /// Per pair: the eight bytes of its key after `common` (zeros past
    /// its end), big-endian: what a search reads (see the module's
    /// docs, "How a key is found in its held chunk").
    heads: Vec<u64>,
}

/// The eight bytes of `key` from `skip` on (zeros past its end), as a
/// big-endian number: keys in ascending order give heads in ascending
/// order (not strictly: keys that agree on those bytes share a head).
fn head(key: &[u8], skip: usize) -> u64 {
    let mut eight = [0u8; 8];
    let rest = key.get(skip..).unwrap_or_default();
    let n = rest.len().min(8);
    eight[..n].copy_from_slice(&rest[..n]);
    u64::from_be_bytes(eight)
}

impl Held {
    /// The chunk `bytes` stored under `chunk_key`, checked whole as
    /// [`decode`] checks it, followed by the stored key `end`.
    fn read(
        bytes: Vec<u8>,
        chunk_key: &[u8],
        prefix_len: usize,
        end: Option<Vec<u8>>,
    ) -> Result<Self> {
        let bytes = expand_owned(bytes, chunk_key)?;
        let base = bytes.as_ptr() as usize;
        let range = |s: &[u8]| {
            let start = s.as_ptr() as usize - base;
            // A chunk is at most a few times CHUNK_BYTES: offsets fit.
            u32::try_from(start).unwrap_or(u32::MAX)
                ..u32::try_from(start + s.len()).unwrap_or(u32::MAX)
        };
        let decoded = decode(&bytes, chunk_key)?;
        let common = match (decoded.first(), decoded.last()) {
            (Some((first, _)), Some((last, _))) => {
                let n = first.iter().zip(*last).take_while(|(a, b)| a == b).count();
                range(&first[..n])
            }
            _ => 0..0,
        };
        let skip = common.len();
        let heads = decoded.iter().map(|(k, _)| head(k, skip)).collect();
        let pairs = decoded
            .into_iter()
            .map(|(k, v)| (range(k), range(v)))
            .collect();
        Ok(Self {
            prefix_len,
            end,
            bytes,
            pairs,
            common,
            heads,
        })
    }

    fn size(&self, chunk_key: &[u8]) -> usize {
        chunk_key.len()
            + self.end.as_ref().map_or(0, Vec::len)
            + self.bytes.len()
            + self.pairs.len()
                * (std::mem::size_of::<(Range<u32>, Range<u32>)>()
                    + std::mem::size_of::<u64>()
                    + INDEX_BYTES_PER_PAIR)
    }

    /// The key (without its view's prefix) and the value of pair `i`.
    fn pair(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let (k, v) = self.pairs.get(i)?;
        let at = |r: &Range<u32>| self.bytes.get(r.start as usize..r.end as usize);
        Some((at(k)?, at(v)?))
    }

    /// The value of `key` (the view's key, without its prefix).
    pub(crate) fn find(&self, key: &[u8]) -> Option<Vec<u8>> {
        let i = self.position(key)?;
        self.pair(i).map(|(_, v)| v.to_vec())
    }

    /// The place of `key` (the view's key, without its prefix) among the
    /// pairs.
    ///
    /// The search runs on the heads: a first guess by interpolation
    /// (labels and identifiers spread evenly over their range, so the
    /// guess lands within a few places), a gallop from it to the run of
    /// pairs sharing the key's head, then a comparison of whole keys in
    /// that run only (one pair, but for keys that agree on all eight
    /// bytes).
    fn position(&self, key: &[u8]) -> Option<usize> {
        let common = self
            .bytes
            .get(self.common.start as usize..self.common.end as usize)?;
        if !key.starts_with(common) {
            return None;
        }
        let want = head(key, common.len());
        let heads = &self.heads;
        let first = first_not_below(heads, guess(heads, want), want);
        let run = heads
            .get(first..)
            .unwrap_or_default()
            .partition_point(|&h| h == want);
        let at = |r: &Range<u32>| self.bytes.get(r.start as usize..r.end as usize);
        let pairs = self.pairs.get(first..first + run)?;
        pairs
            .binary_search_by(|(k, _)| at(k).unwrap_or_default().cmp(key))
            .ok()
            .map(|i| first + i)
    }
}

/// Where `want` probably lies in the ascending `heads`: its place by
/// linear interpolation between the first and the last head.
fn guess(heads: &[u64], want: u64) -> usize {
    let (Some(&lo), Some(&hi)) = (heads.first(), heads.last()) else {
        return 0;
    };
    if want <= lo || hi <= lo {
        return 0;
    }
    if want >= hi {
        return heads.len() - 1;
    }
    let span = u128::from(hi - lo);
    let at = u128::from(want - lo) * (heads.len() as u128 - 1) / span;
    usize::try_from(at).unwrap_or(0)
}

/// The first place in the ascending `heads` whose head is not below
/// `want`, searched outwards from `guess`: a gallop to a window that
/// holds it, then a binary search of the window.
fn first_not_below(heads: &[u64], guess: usize, want: u64) -> usize {
    let n = heads.len();
    let guess = guess.min(n.saturating_sub(1));
    let below = |i: usize| heads.get(i).is_some_and(|&h| h < want);
    // Every place before `lo` is below `want`; `hi` is past the answer.
    let (mut lo, mut hi, mut step) = (guess, guess, 1);
    if below(guess) {
        lo = guess + 1;
        hi = lo;
        while hi < n && below(hi) {
            lo = hi + 1;
            hi = (hi + step).min(n);
            step *= 2;
        }
    } else {
        while lo > 0 && !below(lo - 1) {
            hi = lo - 1;
            lo = lo.saturating_sub(step);
            step *= 2;
        }
    }
    lo + heads
        .get(lo..hi)
        .unwrap_or_default()
        .partition_point(|&h| h < want)
}

/// What one pair costs in [`Chunks::index`] (its entry and the hash
/// table's spare room), counted against the memo's bound for every held
/// pair, entered or not, so that the bound holds however many lookups
/// enter.
const INDEX_BYTES_PER_PAIR: usize = 24;

/// An entry of [`Chunks::index`] that two held keys share the hash of:
/// those keys are found through their chunks.
const SHARED: u32 = u32::MAX;

#[derive(Default)]
struct Chunks {
    /// The base store's settled writes (`Store::write_marks`) the chunks
    /// were read at.
    label: u64,
    /// By full chunk key, with its place in `list`.
    held: BTreeMap<Vec<u8>, (u32, Arc<Held>)>,
    /// The held chunks in the order they were held, each with its view
    /// (a place in `views`): what [`Chunks::index`] points into.
    list: Vec<(u32, Arc<Held>)>,
    /// The prefixes of the views whose chunks are held.
    views: Vec<Vec<u8>>,
    /// Per held pair, by the hash of its full key: its chunk in `list`
    /// and its place in the chunk, so that a lookup of a held key is one
    /// probe of this table and one comparison of the key, not a search
    /// down `held` and through the chunk (each step a cache miss in a
    /// memo of hundreds of megabytes). A hit is checked against the
    /// stored key and view; a miss is looked up through `held`.
    index: HashMap<u64, (u32, u32), BuildHasherDefault<Spread>>,
    bytes: usize,
}

impl Chunks {
    /// The place of the view `prefix` in `views`.
    fn view(&self, prefix: &[u8]) -> Option<usize> {
        self.views.iter().position(|v| v == prefix)
    }
}

/// The hasher of [`Chunks::index`], whose keys are already hashes (by
/// [`ChunkMemo::key_hash`], keyed per memo): taken as they are.
#[derive(Default)]
struct Spread(u64);

impl Hasher for Spread {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Chunks of packed views held between lookups (see the module's docs).
/// One memo may serve several views of one base store (their prefixes
/// keep their chunks apart).
pub struct ChunkMemo {
    max_bytes: usize,
    chunks: Mutex<Chunks>,
    /// Hashes full keys for [`Chunks::index`] (keyed per memo).
    hasher: RandomState,
}

impl std::fmt::Debug for ChunkMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkMemo")
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl ChunkMemo {
    /// A memo holding at most `max_bytes` of chunks.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            chunks: Mutex::new(Chunks::default()),
            hasher: RandomState::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Chunks> {
        self.chunks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The answer of the held chunks for `key` of the view `prefix`
    /// (`full`: the two together), while the base store's settled writes are
    /// still `count`: `None` when no held chunk's range holds the key.
    pub(crate) fn lookup(
        &self,
        prefix: &[u8],
        key: &[u8],
        full: &[u8],
        count: u64,
    ) -> Option<Option<Vec<u8>>> {
        let hash = self.key_hash(prefix, key);
        {
            let chunks = self.lock();
            if chunks.label == count {
                if let Some(&(at, i)) = chunks.index.get(&hash) {
                    let view = chunks.view(prefix);
                    let found = (at != SHARED)
                        .then(|| chunks.list.get(at as usize))
                        .flatten()
                        .and_then(|(of, held)| {
                            let ours = view == Some(*of as usize);
                            let (k, v) = held.pair(i as usize)?;
                            (ours && k == key).then(|| v.to_vec())
                        });
                    if found.is_some() {
                        return Some(found);
                    }
                }
            }
        }
        let (at, held) = self.chunk_for(prefix, full, count)?;
        let Some(i) = held.position(key) else {
            return Some(None);
        };
        let value = held.pair(i).map(|(_, v)| v.to_vec());
        // Found through its chunk: the key enters the index, so that its
        // next lookup is one probe.
        if let Ok(i) = u32::try_from(i) {
            let mut chunks = self.lock();
            let same = chunks
                .list
                .get(at as usize)
                .is_some_and(|(_, h)| Arc::ptr_eq(h, &held));
            if chunks.label == count && same {
                chunks
                    .index
                    .entry(hash)
                    .and_modify(|e| {
                        if *e != (at, i) {
                            *e = (SHARED, 0);
                        }
                    })
                    .or_insert((at, i));
            }
        }
        Some(value)
    }

    /// The hash of the key `key` of the view `prefix` in
    /// [`Chunks::index`].
    fn key_hash(&self, prefix: &[u8], key: &[u8]) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write(prefix);
        h.write(key);
        h.finish()
    }

    /// The held chunk whose range holds `full` (a full key), while the
    /// base store's settled writes are still `count`.
    /// Its place in [`Chunks::list`] comes with it.
    pub(crate) fn chunk_for(
        &self,
        prefix: &[u8],
        full: &[u8],
        count: u64,
    ) -> Option<(u32, Arc<Held>)> {
        let mut chunks = self.lock();
        if chunks.label != count {
            *chunks = Chunks {
                label: count,
                ..Chunks::default()
            };
            return None;
        }
        let (chunk_key, (at, held)) = chunks
            .held
            .range::<[u8], _>((std::ops::Bound::Unbounded, std::ops::Bound::Included(full)))
            .next_back()?;
        // A chunk of this view (another view's may lie just before it),
        // and the key before the stored key that follows it.
        let ours = held.prefix_len == prefix.len() && chunk_key.starts_with(prefix);
        (ours && held.end.as_deref().is_none_or(|end| full < end)).then(|| (*at, held.clone()))
    }

    /// Holds `chunk`, read while the base store's settled writes were
    /// `count` and none was in flight.
    pub(crate) fn hold(&self, chunk_key: Vec<u8>, chunk: Held, count: u64) {
        let size = chunk.size(&chunk_key);
        if size > self.max_bytes {
            return;
        }
        let mut chunks = self.lock();
        if chunks.label != count || chunks.bytes + size > self.max_bytes {
            *chunks = Chunks {
                label: count,
                ..Chunks::default()
            };
        }
        // Read twice at one count (two readers at once): the same bytes,
        // held once.
        if chunks.held.contains_key(&chunk_key) {
            return;
        }
        let Ok(at) = u32::try_from(chunks.list.len()) else {
            return;
        };
        let prefix = chunk_key.get(..chunk.prefix_len).unwrap_or_default();
        let view = match chunks.view(prefix) {
            Some(v) => v,
            None => {
                chunks.views.push(prefix.to_vec());
                chunks.views.len() - 1
            }
        };
        let Ok(view) = u32::try_from(view) else {
            return;
        };
        // Its keys enter the index one by one, when a lookup finds them
        // through the chunk (`ChunkMemo::lookup`): a chunk is read for one
        // key, and holds hundreds that may never be looked up.
        let chunk = Arc::new(chunk);
        chunks.bytes += size;
        chunks.list.push((view, chunk.clone()));
        chunks.held.insert(chunk_key, (at, chunk));
    }

    /// How many chunks are held now.
    pub fn held(&self) -> usize {
        self.lock().held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStore;
    use sesame_core::WriteBatch;

    /// Distinct keys in no particular order (an odd multiplier is a
    /// bijection of `u64`).
    fn key(i: u32) -> Vec<u8> {
        let mut k = u64::from(i)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .to_be_bytes()
            .to_vec();
        k.extend_from_slice(&i.to_le_bytes());
        k
    }

    /// `n` pairs written under `prefix` through a plain view of `base`,
    /// each value naming `tag`.
    fn fill(base: &Arc<dyn Store>, prefix: &[u8], n: u32, tag: u8) {
        let mut batch = WriteBatch::new();
        for i in 0..n {
            batch.put(key(i), vec![tag; 1 + (i % 40) as usize]);
        }
        Packed::new(base.clone(), prefix)
            .write(batch)
            .unwrap_or_else(|e| panic!("{e}"));
    }

    fn get(view: &Packed, i: u32) -> Option<Vec<u8>> {
        view.get(&key(i)).unwrap_or_else(|e| panic!("{e}"))
    }

    /// 3,000 pairs under `a/` in a memory store: a memo, a view through
    /// it and a plain view.
    fn three_thousand_keys() -> (Arc<ChunkMemo>, Packed, Packed) {
        let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
        fill(&base, b"a/", 3_000, 1);
        let memo = Arc::new(ChunkMemo::new(64 << 20));
        let view = Packed::with_memo(base.clone(), b"a/", memo.clone());
        (memo, view, Packed::new(base, b"a/"))
    }

    proptest::proptest! {
        /// A search by heads finds exactly the pairs a search of the
        /// whole keys finds, in chunks of either form whose keys share a
        /// leading part, agree on their first eight bytes after it, end
        /// in zeros or are prefixes of one another; and finds no key the
        /// chunk lacks.
        #[test]
        fn a_search_by_heads_finds_what_a_search_of_keys_finds(
            common in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..10),
            tails in proptest::collection::btree_set(
                proptest::collection::vec(0u8..3, 0..12), 1..300),
            fixed in 0usize..12,
            probes in proptest::collection::vec(
                proptest::collection::vec(0u8..3, 0..12), 0..60),
        ) {
            // Either keys of one length (the fixed form) or of many.
            let keys: std::collections::BTreeSet<Vec<u8>> = tails
                .into_iter()
                .map(|mut t| {
                    if fixed > 0 {
                        t.resize(fixed, 1);
                    }
                    [common.clone(), t].concat()
                })
                .collect();
            let keys: Vec<Vec<u8>> = keys.into_iter().collect();
            let pairs: Vec<(&[u8], &[u8])> =
                keys.iter().map(|k| (k.as_slice(), &b"v"[..])).collect();
            let bytes = super::super::form::encode(&pairs);
            let held = Held::read(bytes, b"a/", 2, None).unwrap_or_else(|e| panic!("{e}"));
            for (i, k) in keys.iter().enumerate() {
                proptest::prop_assert_eq!(held.position(k), Some(i));
            }
            for t in probes {
                let probe = [common.clone(), t].concat();
                let want = keys.iter().position(|k| *k == probe);
                proptest::prop_assert_eq!(held.position(&probe), want);
                let other = [&[7u8][..], &probe].concat();
                let want = keys.iter().position(|k| *k == other);
                proptest::prop_assert_eq!(held.position(&other), want);
            }
        }
    }

    /// The gallop from a guess finds the first head not below the one
    /// wanted, from every guess, in runs of equal heads too.
    #[test]
    fn the_gallop_finds_the_first_place_from_any_guess() {
        let heads: Vec<u64> = vec![1, 3, 3, 3, 7, 9, 9, 20, 20, 20, 20, 21];
        for want in 0..23 {
            let truth = heads.partition_point(|&h| h < want);
            for guess in 0..heads.len() + 3 {
                assert_eq!(
                    first_not_below(&heads, guess, want),
                    truth,
                    "want {want}, guess {guess}"
                );
            }
        }
        assert_eq!(first_not_below(&[], 0, 5), 0);
    }

    /// A key whose hash another held key shares (made so here for every
    /// key) is still answered, through its chunk, as the store answers.
    #[test]
    fn a_key_whose_hash_is_shared_is_answered_through_its_chunk() {
        let (memo, view, plain) = three_thousand_keys();
        for i in 0..3_100 {
            assert_eq!(get(&view, i), get(&plain, i), "key {i}");
        }
        assert!(memo.held() > 1, "the chunks are held");
        for e in memo.lock().index.values_mut() {
            *e = (SHARED, 0);
        }
        for i in 0..3_100 {
            assert_eq!(get(&view, i), get(&plain, i), "key {i}, hashes shared");
        }
    }

    /// Two views of one store share a memo and hold the same keys: each
    /// key's lookup answers its own view's value, never the other's held
    /// pair, whichever view was read first, even when the index sends a
    /// key of one view to the same key's pair in the other (a collision
    /// of hashes, made so here for every key).
    #[test]
    fn the_index_never_answers_a_key_of_another_view() {
        let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
        fill(&base, b"a/", 2_000, 1);
        fill(&base, b"b/", 1_000, 2);
        let memo = Arc::new(ChunkMemo::new(64 << 20));
        let a = Packed::with_memo(base.clone(), b"a/", memo.clone());
        let b = Packed::with_memo(base, b"b/", memo.clone());
        let first = |v: Option<Vec<u8>>| v.and_then(|v| v.first().copied());
        for i in 0..2_000 {
            assert_eq!(first(get(&a, i)), Some(1));
        }
        {
            let mut chunks = memo.lock();
            for i in 0..2_000 {
                let at = chunks.index.get(&memo.key_hash(b"a/", &key(i))).copied();
                if let Some(at) = at {
                    chunks.index.insert(memo.key_hash(b"b/", &key(i)), at);
                }
            }
        }
        for i in 0..2_000 {
            let want = (i < 1_000).then_some(2);
            assert_eq!(first(get(&b, i)), want, "key {i}");
            assert_eq!(first(get(&a, i)), Some(1));
        }
    }

    /// Holding a chunk enters none of its pairs in the index; a key
    /// enters it when a lookup finds it through its held chunk, and is
    /// then answered through the index (the same answer as the store's).
    #[test]
    fn the_index_holds_the_keys_looked_up_not_every_held_pair() {
        let (memo, view, plain) = three_thousand_keys();
        let asked: Vec<u32> = (0..3_000).step_by(10).collect();
        for i in &asked {
            assert_eq!(get(&view, *i), get(&plain, *i), "key {i}");
        }
        let held = memo.held();
        assert!(held > 1, "the chunks are held");
        let pairs: usize = memo.lock().list.iter().map(|(_, h)| h.pairs.len()).sum();
        assert!(pairs >= 3_000, "every pair is in a held chunk: {pairs}");
        let entered = memo.lock().index.len();
        assert!(
            entered <= asked.len() - held,
            "{entered} keys entered after {} lookups that read {held} chunks",
            asked.len()
        );
        for i in &asked {
            assert_eq!(get(&view, *i), get(&plain, *i), "key {i}, again");
        }
        let chunks = memo.lock();
        assert_eq!(
            chunks.index.len(),
            asked.len(),
            "every key asked is entered"
        );
        for i in &asked {
            let hit = chunks.index.get(&memo.key_hash(b"a/", &key(*i))).copied();
            let (at, place) = hit.unwrap_or_else(|| panic!("key {i} is not entered"));
            let (_, chunk) = &chunks.list[at as usize];
            let (k, _) = chunk
                .pair(place as usize)
                .unwrap_or_else(|| panic!("key {i}"));
            assert_eq!(k, key(*i).as_slice(), "key {i} is entered at its own pair");
        }
    }
}
