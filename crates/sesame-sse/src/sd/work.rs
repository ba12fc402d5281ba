//! The array entries an SDd update's steps hold in the client's hands, by
//! position (module `sdd`): one slot per position the update's plan reads
//! or writes, found by binary search in the sorted positions, so that a
//! step's read or write moves an entry into or out of a slot instead of
//! inserting into or removing from a map (tens to hundreds of positions an
//! update).

use super::*;

/// The slots of one update.
pub(super) struct Work {
    /// The positions (buffer, index) the plan reads or writes, sorted.
    at: Vec<(u64, u64)>,
    /// The entry held at each position.
    entries: Vec<Option<Entry>>,
    /// Whether a step wrote the position (it is sealed afresh at the end).
    dirty: Vec<bool>,
    /// Whether the fetch round asks for the position.
    requested: Vec<bool>,
}

impl Work {
    /// Empty slots for every position `ops` read or write.
    pub(super) fn of<'a>(ops: impl Iterator<Item = &'a Op> + Clone) -> Self {
        let mut at: Vec<(u64, u64)> = ops.flat_map(|op| op.reads().chain(op.writes())).collect();
        at.sort_unstable();
        at.dedup();
        let n = at.len();
        Work {
            at,
            entries: (0..n).map(|_| None).collect(),
            dirty: vec![false; n],
            requested: vec![false; n],
        }
    }

    /// Positions planned.
    pub(super) fn len(&self) -> usize {
        self.at.len()
    }

    fn slot(&self, (b, p): (u64, u64)) -> Result<usize> {
        self.at.binary_search(&(b, p)).map_err(|_| {
            Error::Protocol(format!(
                "SDd step outside its plan: entry {p} of buffer {b}"
            ))
        })
    }

    /// Whether the fetch round must ask for `at`, read by a step: no
    /// earlier step wrote it and it is not asked for already.
    pub(super) fn fetches(&mut self, at: (u64, u64)) -> Result<bool> {
        let s = self.slot(at)?;
        let fetch = !self.dirty[s] && !self.requested[s];
        self.requested[s] |= fetch;
        Ok(fetch)
    }

    /// Takes the entry at `at`, which a step reads.
    pub(super) fn take(&mut self, at: (u64, u64)) -> Result<Entry> {
        let s = self.slot(at)?;
        self.entries[s].take().ok_or_else(|| {
            Error::Protocol(format!("SDd step lacks entry {} of buffer {}", at.1, at.0))
        })
    }

    /// Puts `e` at `at`; `written`: a step wrote it (sealed afresh at the
    /// end), rather than put back unchanged.
    pub(super) fn put(&mut self, at: (u64, u64), e: Entry, written: bool) -> Result<()> {
        let s = self.slot(at)?;
        self.entries[s] = Some(e);
        self.dirty[s] |= written;
        Ok(())
    }

    /// Marks `at` written, before the steps run (planning the fetch).
    pub(super) fn plan_write(&mut self, at: (u64, u64)) -> Result<()> {
        let s = self.slot(at)?;
        self.dirty[s] = true;
        Ok(())
    }

    /// Clears the marks of [`plan_write`](Self::plan_write) once the
    /// fetch is planned.
    pub(super) fn planned(&mut self) {
        self.dirty.fill(false);
    }

    /// The entries steps wrote and still held, in position order.
    pub(super) fn written(&self) -> impl Iterator<Item = ((u64, u64), &Entry)> {
        self.at
            .iter()
            .zip(&self.entries)
            .zip(&self.dirty)
            .filter_map(|((&at, e), &dirty)| e.as_ref().filter(|_| dirty).map(|e| (at, e)))
    }
}
