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
//! store's write count ([`sesame_core::IoCounts::writes`]) read *before*
//! the chunk was read, and a lookup uses the memo only while the store's
//! count is still that label; any write through any handle of the base
//! store raises the count after it is applied, and drops every held
//! chunk at the next lookup. So the memo serves only a base store that
//! counts every write after it is applied and that no other process
//! writes while the memo lives: [`crate::RedbStore`] (its file is
//! locked by the process that opened it) and [`crate::MemoryStore`]; the
//! embedded client uses it only on those, and only when it is turned on
//! (`sesame sql`). A damaged chunk is refused when it is read, as
//! [`Packed`] refuses it, and is not held.
//!
//! What the store sees: the probes of the chunks read for the first time
//! (as without the memo) and, for each, one more probe of the stored key
//! that follows it; a lookup in a held chunk reads nothing. So the store
//! sees a subset of the chunk reads it saw before, each chunk once while
//! no write intervenes, plus the chunk that follows each one read.
//!
//! Bounded: all held chunks together take at most the bytes given to
//! [`ChunkMemo::new`]; when a chunk would pass that, the memo is emptied
//! and filled again.
//!
//! Tests (`tests/packed_memo.rs`):
//! `a_memo_answers_as_the_store_after_writes_by_another_handle`,
//! `a_reader_beside_a_writer_sees_every_write_that_returned`,
//! `a_memo_never_holds_a_chunk_with_deltas`, `a_memo_refuses_a_damaged_chunk`,
//! `a_memo_keeps_the_chunks_of_two_views_apart`,
//! `a_memo_reads_only_chunks_a_plain_view_reads_and_their_successors`.
//!
//! [`Packed`]: crate::packed::Packed

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use sesame_core::{Result, Store};

use super::{decode, is_delta, Packed};

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
        // Read before the store: a write after it moves the count, and
        // what is read now is then never used again.
        let count = self.base.io_counts().writes;
        if let Some(held) = memo.chunk_for(&self.prefix, full, count) {
            return Ok(held.find(key));
        }
        let at = self.base.scan_from(&self.prefix, full, true, 1)?;
        let (chunk_key, bytes) = match at.into_iter().next() {
            Some((k, b)) if !is_delta(&b) => (k, b),
            // A delta, or nothing at or before the key: as without the memo.
            other => return self.answer(key, full, other),
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
                return self.answer(key, full, Some((chunk_key, bytes)));
            }
            next => next.map(|(k, _)| k),
        };
        let held = Held::read(bytes, &chunk_key, self.prefix.len(), end)?;
        let value = held.find(key);
        memo.hold(chunk_key, held, count, self.base.io_counts().writes);
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
        let base = bytes.as_ptr() as usize;
        let range = |s: &[u8]| {
            let start = s.as_ptr() as usize - base;
            // A chunk is at most a few times CHUNK_BYTES: offsets fit.
            u32::try_from(start).unwrap_or(u32::MAX)
                ..u32::try_from(start + s.len()).unwrap_or(u32::MAX)
        };
        let pairs = decode(&bytes, chunk_key)?
            .into_iter()
            .map(|(k, v)| (range(k), range(v)))
            .collect();
        Ok(Self {
            prefix_len,
            end,
            bytes,
            pairs,
        })
    }

    fn size(&self, chunk_key: &[u8]) -> usize {
        chunk_key.len()
            + self.end.as_ref().map_or(0, Vec::len)
            + self.bytes.len()
            + self.pairs.len() * std::mem::size_of::<(Range<u32>, Range<u32>)>()
    }

    /// The value of `key` (the view's key, without its prefix).
    pub(crate) fn find(&self, key: &[u8]) -> Option<Vec<u8>> {
        let at = |r: &Range<u32>| &self.bytes[r.start as usize..r.end as usize];
        self.pairs
            .binary_search_by(|(k, _)| at(k).cmp(key))
            .ok()
            .map(|i| at(&self.pairs[i].1).to_vec())
    }
}

#[derive(Default)]
struct Chunks {
    /// The base store's write count the chunks were read at.
    label: u64,
    /// By full chunk key.
    held: BTreeMap<Vec<u8>, Arc<Held>>,
    bytes: usize,
}

/// Chunks of packed views held between lookups (see the module's docs).
/// One memo may serve several views of one base store (their prefixes
/// keep their chunks apart).
pub struct ChunkMemo {
    max_bytes: usize,
    chunks: Mutex<Chunks>,
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
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Chunks> {
        self.chunks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The held chunk whose range holds `full` (a full key), while the
    /// base store's write count is still `count`.
    pub(crate) fn chunk_for(&self, prefix: &[u8], full: &[u8], count: u64) -> Option<Arc<Held>> {
        let mut chunks = self.lock();
        if chunks.label != count {
            *chunks = Chunks {
                label: count,
                ..Chunks::default()
            };
            return None;
        }
        let (chunk_key, held) = chunks
            .held
            .range::<[u8], _>((std::ops::Bound::Unbounded, std::ops::Bound::Included(full)))
            .next_back()?;
        // A chunk of this view (another view's may lie just before it),
        // and the key before the stored key that follows it.
        let ours = held.prefix_len == prefix.len() && chunk_key.starts_with(prefix);
        (ours && held.end.as_deref().is_none_or(|end| full < end)).then(|| held.clone())
    }

    /// Holds `chunk` (read after the base store's write count was
    /// `count`) unless the count has moved since (`now`).
    pub(crate) fn hold(&self, chunk_key: Vec<u8>, chunk: Held, count: u64, now: u64) {
        if count != now {
            return;
        }
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
        chunks.bytes += size;
        if let Some(old) = chunks.held.insert(chunk_key.clone(), Arc::new(chunk)) {
            chunks.bytes -= old.size(&chunk_key);
        }
    }

    /// How many chunks are held now.
    pub fn held(&self) -> usize {
        self.lock().held.len()
    }
}
