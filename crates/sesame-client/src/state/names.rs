//! The name index of a catalog run: finds the entries of a batch of
//! names (`Catalog::with_paths`) in the blocks that can hold them, not
//! by reading every block of the catalog.
//!
//! A run written since `SSMCAT02` holds, after its blocks of entries,
//! blocks of up to [`NAME_BLOCK`] pairs (keyed hash of an entry's name,
//! its identifier) sorted by hash, sealed like the entries' blocks
//! (AES-256-GCM-SIV under the catalog key, the profile, the index, the
//! run id and the block's number in the associated data, here under
//! `"names"`); its sealed footer lists them (first and last hash,
//! offset, length), beside the entries' blocks. The hash is
//! HMAC-SHA256 under a key derived from the catalog key, cut to 32 bits
//! (`RunStore::narrow_hash`: its first 32 bits, so that the order of
//! the 64-bit hashes a batch looks up is kept; a run of `SSMCAT02` holds
//! 64): two names may share a hash, so every identifier found is
//! checked against its entry (which also tells whether a newer run or
//! the overlay replaced or removed it). A name block moved, swapped,
//! taken from another run or index, or cut short is refused when read
//! ([`ClientError::StateCorrupt`], naming the file).
//!
//! Runs written before (`SSMCAT01`) have no name index: a batch reads
//! them whole, as before, until a merge rewrites them with one.
//!
//! Writing a run sorts its pairs in memory up to [`SPILL_AT`] of them;
//! a larger run (a merge of a large catalog) sorts them in sealed
//! segments of that many in a file beside the run
//! (`NAME.<run id>.namespill`, deleted once the run is written) and
//! merges the segments: a run's writing holds at most [`SPILL_AT`]
//! pairs and a block per segment in memory, whatever its size.
//! Tested by `state::catalog_tests`
//! (`a_batch_finds_its_names_in_blocks_bounded_by_the_batch`,
//! `a_swapped_or_cut_name_block_is_refused`,
//! `a_run_larger_than_memory_sorts_its_names_in_segments`).

use super::runs::{BlockRef, Run, RunStore};
use super::*;
use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufWriter, Write};

/// Pairs in a block of a run's name index.
pub(super) const NAME_BLOCK: usize = 256;
/// Pairs sorted in memory while a run is written; more are sorted in
/// segments of this many on disk.
#[cfg(not(test))]
pub(super) const SPILL_AT: usize = 1 << 20;
#[cfg(test)]
pub(super) const SPILL_AT: usize = 5_000;

/// A pair of the name index: the keyed hash of a name, an identifier.
pub(super) type NamePair = (u64, u64);

/// The spill file of the run `id` beside the state file `state`.
pub(super) fn spill_path(state: &Path, id: &[u8; 16]) -> PathBuf {
    super::log::sibling_path(state, id, "namespill")
}

/// Sealed segments of sorted pairs on disk.
struct Spill {
    path: PathBuf,
    out: BufWriter<File>,
    offset: u64,
    /// Each segment's blocks (first and last hash, offset, length).
    segments: Vec<Vec<BlockRef>>,
    /// Blocks sealed so far (numbers them in the associated data).
    sealed: u64,
}

/// The name pairs of a run being written, sorted at the end.
pub(super) struct NameSorter {
    run: [u8; 16],
    pairs: Vec<NamePair>,
    spill: Option<Spill>,
    spill_path: PathBuf,
}

impl NameSorter {
    pub(super) fn new(store: &RunStore, run: &[u8; 16]) -> Self {
        NameSorter {
            run: *run,
            pairs: Vec::new(),
            spill: None,
            spill_path: spill_path(store.state_path(), run),
        }
    }

    /// Adds the entry `id` whose name has the hash `hash` (as the run
    /// holds it).
    pub(super) fn push(
        &mut self,
        store: &RunStore,
        rng: &mut dyn CryptoRngCore,
        hash: u64,
        id: u64,
    ) -> Result<()> {
        self.pairs.push((hash, id));
        if self.pairs.len() >= SPILL_AT {
            self.spill_segment(store, rng)?;
        }
        Ok(())
    }

    /// Sorts the pairs in memory and writes them as a segment.
    fn spill_segment(&mut self, store: &RunStore, rng: &mut dyn CryptoRngCore) -> Result<()> {
        if self.spill.is_none() {
            let io = |e: std::io::Error| ClientError::io("write", &self.spill_path, &e);
            let file = File::create(&self.spill_path).map_err(io)?;
            self.spill = Some(Spill {
                path: self.spill_path.clone(),
                out: BufWriter::new(file),
                offset: 0,
                segments: Vec::new(),
                sealed: 0,
            });
        }
        let Some(spill) = self.spill.as_mut() else {
            return Ok(());
        };
        self.pairs.sort_unstable();
        let mut blocks = Vec::new();
        for chunk in self.pairs.chunks(NAME_BLOCK) {
            let aad = store.aad(&self.run, "namespill", spill.sealed);
            let at = store.seal_block(
                rng,
                &mut spill.out,
                &spill.path,
                &aad,
                chunk,
                spill.offset,
                |p| p.0,
            )?;
            spill.offset += u64::from(at.len);
            spill.sealed += 1;
            blocks.push(at);
        }
        spill.segments.push(blocks);
        self.pairs.clear();
        Ok(())
    }

    /// Writes the pairs, sorted, as the run's name blocks to `out` from
    /// `offset`; the blocks written.
    pub(super) fn write(
        mut self,
        store: &RunStore,
        rng: &mut dyn CryptoRngCore,
        out: &mut impl Write,
        path: &Path,
        mut offset: u64,
    ) -> Result<Vec<BlockRef>> {
        let mut refs = Vec::new();
        let mut block: Vec<NamePair> = Vec::with_capacity(NAME_BLOCK);
        let mut put = |pair: Option<NamePair>, refs: &mut Vec<BlockRef>| -> Result<()> {
            let done = pair.is_none();
            block.extend(pair);
            if block.len() == NAME_BLOCK || (done && !block.is_empty()) {
                let aad = store.aad(&self.run, "names", refs.len() as u64);
                let at = store.seal_block(rng, out, path, &aad, &block, offset, |p| p.0)?;
                offset += u64::from(at.len);
                refs.push(at);
                block.clear();
            }
            Ok(())
        };
        let Some(mut spill) = self.spill.take() else {
            self.pairs.sort_unstable();
            for p in std::mem::take(&mut self.pairs) {
                put(Some(p), &mut refs)?;
            }
            put(None, &mut refs)?;
            return Ok(refs);
        };
        // The rest as a last segment, then the segments merged.
        let mut rest = std::mem::take(&mut self.pairs);
        rest.sort_unstable();
        let mut heads: Vec<Segment> = Vec::new();
        if !rest.is_empty() {
            heads.push(Segment::memory(rest));
        }
        let io = |e: std::io::Error| ClientError::io("write", &spill.path, &e);
        spill.out.flush().map_err(io)?;
        let mut first = 0u64;
        for blocks in std::mem::take(&mut spill.segments) {
            let n = blocks.len() as u64;
            heads.push(Segment::on_disk(&spill.path, blocks, first)?);
            first += n;
        }
        loop {
            let mut least: Option<(usize, NamePair)> = None;
            for (i, seg) in heads.iter_mut().enumerate() {
                if let Some(p) = seg.peek(store, &self.run)? {
                    if least.is_none_or(|(_, l)| p < l) {
                        least = Some((i, p));
                    }
                }
            }
            let Some((i, p)) = least else { break };
            if let Some(seg) = heads.get_mut(i) {
                seg.at += 1;
            }
            put(Some(p), &mut refs)?;
        }
        put(None, &mut refs)?;
        Ok(refs)
    }
}

impl Drop for NameSorter {
    fn drop(&mut self) {
        if self.spill.is_some() || self.spill_path.exists() {
            let _ = std::fs::remove_file(&self.spill_path);
        }
    }
}

/// A sorted segment being merged: in memory, or sealed blocks on disk
/// read one at a time.
struct Segment {
    file: Option<(File, PathBuf)>,
    blocks: Vec<BlockRef>,
    /// The number of the segment's first block in the spill file.
    first: u64,
    next: usize,
    current: Vec<NamePair>,
    at: usize,
}

impl Segment {
    fn memory(pairs: Vec<NamePair>) -> Self {
        Segment {
            file: None,
            blocks: Vec::new(),
            first: 0,
            next: 0,
            current: pairs,
            at: 0,
        }
    }

    fn on_disk(path: &Path, blocks: Vec<BlockRef>, first: u64) -> Result<Self> {
        let file = File::open(path).map_err(|e| ClientError::io("read", path, &e))?;
        Ok(Segment {
            file: Some((file, path.to_path_buf())),
            blocks,
            first,
            next: 0,
            current: Vec::new(),
            at: 0,
        })
    }

    /// The segment's next pair, reading its next block when needed.
    fn peek(&mut self, store: &RunStore, run: &[u8; 16]) -> Result<Option<NamePair>> {
        while self.at >= self.current.len() {
            let (Some((file, path)), Some(at)) = (self.file.as_mut(), self.blocks.get(self.next))
            else {
                return Ok(None);
            };
            let aad = store.aad(run, "namespill", self.first + self.next as u64);
            self.current = store.open_block(file, path, at, &aad, |p: &NamePair| p.0)?;
            self.next += 1;
            self.at = 0;
        }
        Ok(self.current.get(self.at).copied())
    }
}

impl RunStore {
    /// The identifiers `run`'s name index pairs with one of `hashes`
    /// (sorted, each once), added to `out`; `false` when the run has no
    /// name index (written before it).
    pub(super) fn named(&self, run: &Run, hashes: &[u64], out: &mut BTreeSet<u64>) -> Result<bool> {
        let Some(names) = run.names.as_ref() else {
            return Ok(false);
        };
        let narrow: Vec<u64>;
        let hashes = if run.narrow {
            narrow = hashes.iter().map(|&h| RunStore::narrow_hash(h)).collect();
            narrow.as_slice()
        } else {
            hashes
        };
        let mut current: Option<(usize, Vec<NamePair>)> = None;
        for (i, &h) in hashes.iter().enumerate() {
            if i > 0 && hashes.get(i - 1) == Some(&h) {
                continue;
            }
            let mut b = names.partition_point(|blk| blk.last < h);
            while let Some(at) = names.get(b).filter(|blk| blk.first <= h) {
                if current.as_ref().is_none_or(|(c, _)| *c != b) {
                    self.count_read();
                    let mut file = lock(&run.file);
                    let aad = self.aad(&run.r.id, "names", b as u64);
                    let pairs: Vec<NamePair> =
                        self.open_block(&mut file, &run.path, at, &aad, |p: &NamePair| p.0)?;
                    current = Some((b, pairs));
                }
                if let Some((_, pairs)) = &current {
                    let from = pairs.partition_point(|p| p.0 < h);
                    out.extend(pairs[from..].iter().take_while(|p| p.0 == h).map(|p| p.1));
                }
                b += 1;
            }
        }
        Ok(true)
    }
}
