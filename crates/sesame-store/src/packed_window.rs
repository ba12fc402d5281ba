//! The read-ahead window of a packed view's plans and multi-key reads
//! ([`Window`]).

use sesame_core::{Result, StoredValue};

use super::{is_delta, Packed, Pair};

/// Consecutive chunks (each followed by its deltas) read ahead while a
/// batch is planned, so that a batch touching neighbouring chunks (a bulk
/// upload) reads them in a few ordered probes rather than two per chunk.
/// The front pair is the chunk that holds the key last sought.
#[derive(Default)]
pub(super) struct Window {
    /// Stored pairs in key order: chunks, each followed by its deltas.
    pairs: std::collections::VecDeque<(Vec<u8>, StoredValue)>,
    /// No pair follows the last one held.
    at_end: bool,
    /// How many pairs the next read-ahead asks for.
    ahead: usize,
}

/// The most pairs (chunks and deltas) one read-ahead asks for.
const MAX_AHEAD: usize = 256;

impl Window {
    /// Where the chunk after the front one is held.
    fn next_at(&self) -> Option<usize> {
        (1..self.pairs.len()).find(|&i| !is_delta(&self.pairs[i].1))
    }

    /// Makes the front chunk the one whose range holds `key` (none: the
    /// view holds no chunk), with all its deltas held, reading ahead while
    /// keys come in neighbouring chunks and probing afresh when they skip
    /// some.
    pub(super) fn seek(&mut self, view: &Packed, key: &[u8]) -> Result<()> {
        let plen = view.prefix.len();
        let mut passed = 0;
        loop {
            while let Some(next) = self.next_at() {
                if &self.pairs[next].0[plen..] > key {
                    break;
                }
                self.pairs.drain(..next);
                passed += 1;
            }
            if self.next_at().is_some() || (!self.pairs.is_empty() && self.at_end) {
                return Ok(());
            }
            if self.pairs.is_empty() || passed > 1 {
                // First use, or chunks without keys were passed: probe.
                self.pairs.clear();
                self.ahead = 2;
                passed = 0;
                match view.chunk_for(key)? {
                    Some(chunk) => {
                        self.pairs.push_back(chunk);
                        self.at_end = false;
                    }
                    None => {
                        self.at_end = true;
                        return Ok(());
                    }
                }
                continue;
            }
            let mut after = self.pairs[self.pairs.len() - 1].0.clone();
            after.push(0);
            let more = view
                .base
                .scan_from_shared(&view.prefix, &after, false, self.ahead)?;
            self.at_end = more.len() < self.ahead;
            self.ahead = (self.ahead * 2).min(MAX_AHEAD);
            self.pairs.extend(more);
        }
    }

    /// The chunk whose range holds the key last sought: its full key, its
    /// encoding, and its deltas (full keys and stored values).
    pub(super) fn current(&self) -> Option<(&[u8], &[u8], Vec<Pair<'_>>)> {
        let (key, bytes) = self.pairs.front()?;
        let end = self.next_at().unwrap_or(self.pairs.len());
        let deltas = (1..end)
            .map(|i| (self.pairs[i].0.as_slice(), &*self.pairs[i].1))
            .collect();
        Some((key, bytes, deltas))
    }

    /// The chunk after the current one: its full key and encoding.
    pub(super) fn next_chunk(&self) -> Option<(&[u8], &[u8])> {
        self.next_at()
            .map(|i| (self.pairs[i].0.as_slice(), &*self.pairs[i].1))
    }

    /// The fence that ends the current chunk's range (`None`: the last).
    pub(super) fn next_fence(&self, prefix_len: usize) -> Option<&[u8]> {
        self.next_chunk().map(|(k, _)| &k[prefix_len..])
    }
}
