//! One run of reads of a packed view ([`Store::read_memo`]): the chunks
//! it has read, kept for the run's later lookups.
//!
//! A keyword search of FAST walks a chain whose next label follows from
//! the entry just read; the labels are pseudorandom, so consecutive
//! entries fall into chunks at random, and a search of `n` entries over
//! `c` chunks reads each chunk about `n / c` times. Here a lookup first
//! looks among the chunks the run has read:
//!
//! - a **span** is a chunk whose range is known: its fence, the fence of
//!   the chunk after it (its end), its pairs (decoded once and checked for
//!   order, searched by bisection) and its deltas. A key in a span's range
//!   is answered from it, as [`Packed::get`] answers it: the key's delta,
//!   else the chunk's pair, else absent;
//! - a lookup outside every span probes the base store as
//!   [`Packed::get`] does, and the chunk it lands on becomes a span: its
//!   deltas and its end are read by ascending probes from just after it,
//!   which end at the next chunk (the store returns its bytes with its
//!   key);
//! - a chunk read that way, or past it, is kept *pending* (its bytes, its
//!   deltas not yet read), so that it is not read again when a lookup
//!   lands in it: its deltas and end are then read from just after it.
//!
//! So each chunk's bytes are read at most once for its own range, and
//! again only when the probe for the end of the chunk before it returns
//! it after it was kept.
//!
//! **Not used by any scheme**: FAST's search through it was slower on
//! the flights index than one lookup per entry (`docs/performance.md`,
//! "A run of reads over packed chunks"): with about 11 deltas a chunk,
//! one range probe per delta costs more than the chunk reads it saves.
//! Reading a chunk's deltas and end in one probe needs a scan bounded by
//! a key, which [`Store::scan_from`] does not offer.
//!
//! The same checks as the view's other reads: a chunk that does not
//! decode (now the whole chunk, in order), a delta that does not decode,
//! names a missing chunk or another chunk than the one before it, or a
//! chunk with more than [`MAX_DELTAS`] deltas, are
//! [`Error::StoreCorrupt`]. The run assumes nothing writes under the view
//! while it lives (a search writes nothing; the host keeps writers
//! apart, as for the view itself), and holds at most [`MEMO_BYTES`] of
//! chunks: past that, the oldest are dropped and read again if needed.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::{Mutex, PoisonError};

use sesame_core::{Error, IoCounts, Result, Store, WriteBatch};

use super::{damaged, damaged_delta, decode_delta, is_delta, Packed, Reader, MAX_DELTAS};

/// The most bytes of chunks (and their deltas) one run keeps: 4,096
/// chunks of the limit.
pub const MEMO_BYTES: usize = 64 << 20;

/// A chunk whose range is known.
struct Span {
    /// The fence of the chunk after it (`None`: the last chunk).
    end: Option<Vec<u8>>,
    /// The chunk's full key (for errors) and encoding.
    chunk: (Vec<u8>, Vec<u8>),
    /// Where each pair's encoding begins in the chunk, keys ascending.
    pairs: Vec<u32>,
    /// Its deltas: keys (view-relative) ascending, and values.
    deltas: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Span {
    fn bytes(&self) -> usize {
        self.chunk.0.len()
            + self.chunk.1.len()
            + self.pairs.len() * 4
            + self
                .deltas
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
            + self.end.as_ref().map_or(0, Vec::len)
    }

    /// The pair whose encoding begins at `at` (checked when the span was
    /// made; a failure reads as an empty pair).
    fn pair(&self, at: u32) -> (&[u8], &[u8]) {
        let mut reader = Reader {
            bytes: &self.chunk.1,
            at: at as usize,
            chunk_key: &self.chunk.0,
        };
        reader.next_pair().ok().flatten().unwrap_or((&[], &[]))
    }

    /// The value of `key` (in this span's range).
    fn find(&self, key: &[u8]) -> Option<Vec<u8>> {
        if let Ok(at) = self.deltas.binary_search_by(|(k, _)| k.as_slice().cmp(key)) {
            return Some(self.deltas[at].1.clone());
        }
        let at = self
            .pairs
            .binary_search_by(|&p| self.pair(p).0.cmp(key))
            .ok()?;
        Some(self.pair(self.pairs[at]).1.to_vec())
    }
}

/// Where each pair of a chunk begins, the chunk checked as
/// [`super::decode`] checks it (every length, keys strictly ascending).
fn offsets(bytes: &[u8], chunk_key: &[u8]) -> Result<Vec<u32>> {
    let mut reader = Reader::new(bytes, chunk_key)?;
    let mut out: Vec<u32> = Vec::new();
    let mut last: Option<&[u8]> = None;
    loop {
        let start =
            u32::try_from(reader.at).map_err(|_| damaged(chunk_key, "a chunk over 4 GB"))?;
        let Some((key, _)) = reader.next_pair()? else {
            return Ok(out);
        };
        if last.is_some_and(|last| last >= key) {
            return Err(damaged(chunk_key, "keys out of order"));
        }
        last = Some(key);
        out.push(start);
    }
}

/// What a run holds.
#[derive(Default)]
struct Held {
    /// Chunks whose range is known, by fence (view-relative).
    spans: BTreeMap<Vec<u8>, Span>,
    /// Chunks read but whose deltas and end are not: by fence, their full
    /// key and encoding.
    pending: BTreeMap<Vec<u8>, (Vec<u8>, Vec<u8>)>,
    /// Fences in the order they were kept, each with the number it was
    /// kept under, for dropping the oldest.
    order: VecDeque<(u64, Vec<u8>)>,
    /// The number each fence held now was last kept under (an entry of
    /// `order` with another number is stale: the fence was kept again).
    kept: BTreeMap<Vec<u8>, u64>,
    /// How many times a chunk was kept.
    count: u64,
    bytes: usize,
    /// The most bytes held.
    limit: usize,
}

impl Held {
    /// The answer for `key` when a span's range holds it.
    fn answer(&self, key: &[u8]) -> Option<Option<Vec<u8>>> {
        let (_, span) = self
            .spans
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()?;
        if span.end.as_deref().is_some_and(|end| key >= end) {
            return None;
        }
        Some(span.find(key))
    }

    /// The greatest fence at or below `key` that the run knows of, when it
    /// is a pending chunk's.
    fn pending_for(&self, key: &[u8]) -> Option<Vec<u8>> {
        let below = (Bound::Unbounded, Bound::Included(key));
        let pending = self.pending.range::<[u8], _>(below).next_back()?.0;
        match self.spans.range::<[u8], _>(below).next_back() {
            Some((span, _)) if span > pending => None,
            _ => Some(pending.clone()),
        }
    }

    fn knows(&self, fence: &[u8]) -> bool {
        self.spans.contains_key(fence) || self.pending.contains_key(fence)
    }

    fn keep_pending(&mut self, fence: &[u8], chunk: (Vec<u8>, Vec<u8>)) {
        if self.knows(fence) {
            return;
        }
        self.bytes += chunk.0.len() + chunk.1.len();
        self.pending.insert(fence.to_vec(), chunk);
        self.note(fence);
    }

    fn take_pending(&mut self, fence: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
        let chunk = self.pending.remove(fence)?;
        self.bytes -= chunk.0.len() + chunk.1.len();
        Some(chunk)
    }

    fn keep_span(&mut self, fence: Vec<u8>, span: Span) {
        self.bytes += span.bytes();
        if let Some(old) = self.spans.insert(fence.clone(), span) {
            self.bytes -= old.bytes();
        }
        self.note(&fence);
    }

    /// Notes that the chunk of `fence` was kept now, and drops the oldest
    /// chunks while more than the limit is held (never the one just
    /// kept).
    fn note(&mut self, fence: &[u8]) {
        self.count += 1;
        self.kept.insert(fence.to_vec(), self.count);
        self.order.push_back((self.count, fence.to_vec()));
        while self.bytes > self.limit {
            let Some((count, oldest)) = self.order.pop_front() else {
                return;
            };
            if count == self.count {
                self.order.push_front((count, oldest));
                return;
            }
            if self.kept.get(&oldest) != Some(&count) {
                continue;
            }
            self.kept.remove(&oldest);
            if let Some(span) = self.spans.remove(&oldest) {
                self.bytes -= span.bytes();
            }
            self.take_pending(&oldest);
        }
    }
}

/// A run of reads of a [`Packed`] view (see the module documentation).
pub(super) struct Memo<'a> {
    view: &'a Packed,
    held: Mutex<Held>,
}

impl<'a> Memo<'a> {
    /// A run holding at most `limit` bytes of chunks.
    pub(super) fn new(view: &'a Packed, limit: usize) -> Self {
        Self {
            view,
            held: Mutex::new(Held {
                limit,
                ..Held::default()
            }),
        }
    }

    fn lookup(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(value) = held.answer(key) {
            return Ok(value);
        }
        if let Some(fence) = held.pending_for(key) {
            if let Some(chunk) = held.take_pending(&fence) {
                self.span(&mut held, chunk)?;
                if let Some(value) = held.answer(key) {
                    return Ok(value);
                }
            }
        }
        // As `Packed::get`: the stored pair at or before the key.
        let view = self.view;
        let plen = view.prefix.len();
        let full = view.full(key);
        let at = view.base.scan_from(&view.prefix, &full, true, 1)?;
        let Some((stored, bytes)) = at.into_iter().next() else {
            return Ok(None);
        };
        let chunk = if is_delta(&bytes) {
            let (fence, _) = decode_delta(&bytes, &stored, plen)?;
            match held.take_pending(fence) {
                Some(chunk) => chunk,
                None => view.chunk_of_delta(fence, &stored)?,
            }
        } else {
            (stored.clone(), bytes)
        };
        self.span(&mut held, chunk)?;
        held.answer(key).ok_or_else(|| {
            // The pair found lies past the end of the chunk it names.
            damaged_delta(&stored, "it does not name the chunk before it")
        })
    }

    /// Makes the chunk `(full key, encoding)` a span: decodes it, reads
    /// its deltas and its end from just after it, keeps every other chunk
    /// those probes return as pending.
    fn span(&self, held: &mut Held, (chunk_key, chunk): (Vec<u8>, Vec<u8>)) -> Result<()> {
        let view = self.view;
        let plen = view.prefix.len();
        let pairs = offsets(&chunk, &chunk_key)?;
        let fence = chunk_key[plen..].to_vec();
        held.take_pending(&fence);
        let mut deltas: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut after = chunk_key.clone();
        after.push(0);
        // One pair a probe: a probe of more could pass the next chunk
        // and read the one after it too.
        let end = loop {
            let Some((stored, bytes)) = view
                .base
                .scan_from(&view.prefix, &after, false, 1)?
                .into_iter()
                .next()
            else {
                break None;
            };
            if !is_delta(&bytes) {
                // The next chunk: kept, its deltas read if a lookup lands
                // in it.
                let next = stored[plen..].to_vec();
                held.keep_pending(&next, (stored, bytes));
                break Some(next);
            }
            let (named, value) = decode_delta(&bytes, &stored, plen)?;
            if named != fence.as_slice() {
                return Err(damaged_delta(
                    &stored,
                    "it does not name the chunk before it",
                ));
            }
            if deltas.len() == MAX_DELTAS {
                return Err(damaged(&chunk_key, "more deltas than a chunk may have"));
            }
            deltas.push((stored[plen..].to_vec(), value.to_vec()));
            after = stored;
            after.push(0);
        };
        held.keep_span(
            fence,
            Span {
                end,
                chunk: (chunk_key, chunk),
                pairs,
                deltas,
            },
        );
        Ok(())
    }
}

impl Store for Memo<'_> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let value = self.lookup(key)?;
        self.view.io.read(value.as_ref().map_or(0, Vec::len));
        Ok(value)
    }

    fn write(&self, _: WriteBatch) -> Result<()> {
        Err(Error::Unsupported(
            "a run of reads of packed entries does not write: write through the view".into(),
        ))
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.view.scan_prefix(prefix)
    }

    fn io_counts(&self) -> IoCounts {
        self.view.io_counts()
    }

    fn backend(&self) -> &'static str {
        self.view.backend()
    }
}
