//! The range changes an import keeps aside until its range indexes are
//! built ([`crate::table::write::Deferred`]): for each range index, the
//! pairs (encoded value, record identifier) of the records inserted, in
//! memory up to a bound, then sorted and written to a temporary file as
//! sorted runs, and read back merged in value order for the build.
//!
//! Memory stays bounded whatever the file's size: at most
//! [`RUN_PAIRS`] pairs (16 bytes each) are held before a run is written,
//! and the merge holds one block ([`BLOCK_PAIRS`] pairs) per run. The
//! file (an anonymous temporary file, in `TMPDIR`, gone when the import
//! ends or the process dies) holds 16 bytes per pair and range index
//! plus 32 bytes per block.
//!
//! The values are the table's plaintext, so the file is sealed: each
//! block is AES-256-GCM-SIV under a key drawn for this import and held
//! only in memory, with the block's number as associated data. A block
//! altered, moved, dropped or swapped with another fails to open, and
//! the build stops with [`ClientError::InvalidArgument`] saying to run
//! the import again (the range indexes, marked dirty, are rebuilt from
//! the records the next time the table is opened).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};

use rand_core::CryptoRngCore;
use sesame_crypto::aead::Aes256GcmSiv;
use sesame_crypto::Key;

use crate::doc_service::DocId;
use crate::error::{ClientError, Result};

/// Pairs held in memory, every range index together, before they are
/// written as runs (16 MiB).
pub(crate) const RUN_PAIRS: usize = 1 << 20;
/// Pairs in a sealed block of a run (64 KiB).
pub(crate) const BLOCK_PAIRS: usize = 4096;
/// Bytes of a pair: the value and the identifier, big-endian.
const PAIR: usize = 16;
/// Associated data of a block: this domain, then its number.
const DOMAIN: &[u8] = b"sesame-client/import-spill/v1";

/// A pair: an encoded value and the identifier of its record.
pub(crate) type Pair = (u64, DocId);

/// The pairs of every range index of one import (see the module
/// documentation).
pub(crate) struct Spill {
    /// Pairs held before a run is written (every index together).
    run_pairs: usize,
    /// Pairs not yet written, by index.
    buffers: Vec<Vec<Pair>>,
    /// Pairs in `buffers`.
    buffered: usize,
    /// Runs written, by index.
    runs: Vec<Vec<Run>>,
    /// Pairs pushed, by index.
    pushed: Vec<u64>,
    /// The file, once a run is written.
    disk: Option<Disk>,
}

impl Default for Spill {
    fn default() -> Self {
        Spill::with_run_pairs(RUN_PAIRS)
    }
}

/// A run: consecutive blocks of the file.
#[derive(Clone, Copy, Debug)]
struct Run {
    /// Where its first block starts.
    offset: u64,
    /// Number of its first block.
    first: u64,
    /// Blocks.
    blocks: u64,
}

/// The temporary file and its key.
struct Disk {
    file: File,
    /// Bytes written.
    end: u64,
    /// Blocks written.
    blocks: u64,
    cipher: Aes256GcmSiv,
}

fn damaged() -> ClientError {
    ClientError::InvalidArgument(
        "the import's temporary file of range changes was altered or cut short; \
         run the same import again (its range indexes are rebuilt from the records)"
            .into(),
    )
}

fn io_error(e: &std::io::Error) -> ClientError {
    ClientError::InvalidArgument(format!(
        "the import's temporary file of range changes (in the directory TMPDIR names, \
         else /tmp) could not be written or read: {e}; free some space there or set \
         TMPDIR to a directory with room, and run the same import again"
    ))
}

fn aad(block: u64) -> Vec<u8> {
    [DOMAIN, &block.to_be_bytes()].concat()
}

impl Spill {
    /// A spill that writes a run once `run_pairs` pairs are held.
    pub(crate) fn with_run_pairs(run_pairs: usize) -> Self {
        Spill {
            run_pairs: run_pairs.max(1),
            buffers: Vec::new(),
            buffered: 0,
            runs: Vec::new(),
            pushed: Vec::new(),
            disk: None,
        }
    }

    /// Keeps the pair (`value`, `id`) of range index `index`.
    pub(crate) fn push(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        index: usize,
        value: u64,
        id: DocId,
    ) -> Result<()> {
        if self.buffers.len() <= index {
            self.buffers.resize_with(index + 1, Vec::new);
            self.runs.resize_with(index + 1, Vec::new);
            self.pushed.resize(index + 1, 0);
        }
        if let (Some(buffer), Some(pushed)) =
            (self.buffers.get_mut(index), self.pushed.get_mut(index))
        {
            buffer.push((value, id));
            *pushed += 1;
            self.buffered += 1;
        }
        if self.buffered >= self.run_pairs {
            self.write_runs(rng)?;
        }
        Ok(())
    }

    /// Pairs kept for range index `index`.
    pub(crate) fn len(&self, index: usize) -> u64 {
        self.pushed.get(index).copied().unwrap_or(0)
    }

    /// Bytes held in memory (the pairs not yet written and what the
    /// runs' places take), not counting the file.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        let pairs: usize = self.buffers.iter().map(Vec::capacity).sum();
        let runs: usize = self.runs.iter().map(Vec::capacity).sum();
        pairs * std::mem::size_of::<Pair>() + runs * std::mem::size_of::<Run>()
    }

    /// Sorts every index's buffer and writes it as a run.
    fn write_runs(&mut self, rng: &mut dyn CryptoRngCore) -> Result<()> {
        if self.disk.is_none() {
            let file = tempfile::tempfile().map_err(|e| io_error(&e))?;
            self.disk = Some(Disk {
                file,
                end: 0,
                blocks: 0,
                cipher: Aes256GcmSiv::new(&Key::generate(rng)),
            });
        }
        let Some(disk) = self.disk.as_mut() else {
            return Ok(());
        };
        for (buffer, runs) in self.buffers.iter_mut().zip(self.runs.iter_mut()) {
            if buffer.is_empty() {
                continue;
            }
            buffer.sort_unstable();
            runs.push(disk.write_run(rng, buffer)?);
            // The memory goes back, not only the length.
            *buffer = Vec::new();
        }
        self.buffered = 0;
        Ok(())
    }

    /// The pairs of range index `index` in order (by value, then
    /// identifier), each once as pushed. Reads the runs back block by
    /// block; the pairs still in memory are sorted in place.
    #[cfg(test)]
    pub(crate) fn sorted(&mut self, index: usize) -> Result<Merge<'_>> {
        let tail = self.take_tail(index);
        self.merge(index, tail)
    }

    /// [`Spill::sorted`] of range indexes `0..indexes` at once: merges
    /// that read the file side by side (each block is read at its
    /// offset, so that merges may run on threads of their own).
    pub(crate) fn sorted_all(&mut self, indexes: usize) -> Result<Vec<Merge<'_>>> {
        let tails: Vec<Vec<Pair>> = (0..indexes).map(|i| self.take_tail(i)).collect();
        let this = &*self;
        tails
            .into_iter()
            .enumerate()
            .map(|(i, tail)| this.merge(i, tail))
            .collect()
    }

    /// The pairs of range index `index` still in memory, sorted, taken
    /// out of the buffer.
    fn take_tail(&mut self, index: usize) -> Vec<Pair> {
        let mut tail = self
            .buffers
            .get_mut(index)
            .map(std::mem::take)
            .unwrap_or_default();
        self.buffered = self.buffered.saturating_sub(tail.len());
        tail.sort_unstable();
        tail
    }

    /// The merge of range index `index`'s runs and `tail` (sorted).
    fn merge(&self, index: usize, tail: Vec<Pair>) -> Result<Merge<'_>> {
        let runs = self.runs.get(index).cloned().unwrap_or_default();
        let mut merge = Merge {
            disk: self.disk.as_ref(),
            sources: Vec::with_capacity(runs.len() + 1),
            heap: BinaryHeap::new(),
        };
        for run in runs {
            merge.sources.push(Source::Run {
                run,
                next: 0,
                block: Vec::new().into_iter(),
            });
        }
        merge.sources.push(Source::Memory(tail.into_iter()));
        for s in 0..merge.sources.len() {
            merge.refill(s)?;
        }
        Ok(merge)
    }
}

impl Disk {
    /// Writes `pairs` (sorted) as sealed blocks at the end of the file.
    fn write_run(&mut self, rng: &mut dyn CryptoRngCore, pairs: &[Pair]) -> Result<Run> {
        let run = Run {
            offset: self.end,
            first: self.blocks,
            blocks: pairs.len().div_ceil(BLOCK_PAIRS) as u64,
        };
        self.file
            .seek(SeekFrom::Start(self.end))
            .map_err(|e| io_error(&e))?;
        let mut out = BufWriter::new(&self.file);
        let mut plain = Vec::with_capacity(BLOCK_PAIRS * PAIR);
        for chunk in pairs.chunks(BLOCK_PAIRS) {
            plain.clear();
            for (value, id) in chunk {
                plain.extend_from_slice(&value.to_be_bytes());
                plain.extend_from_slice(&id.to_be_bytes());
            }
            let sealed = self
                .cipher
                .seal(rng, &aad(self.blocks), &plain)
                .map_err(|e| ClientError::InvalidArgument(format!("sealing a block: {e}")))?;
            let len = u32::try_from(sealed.len())
                .map_err(|_| ClientError::InvalidArgument("a block is too large".into()))?;
            out.write_all(&len.to_be_bytes())
                .and_then(|()| out.write_all(&sealed))
                .map_err(|e| io_error(&e))?;
            self.end += 4 + sealed.len() as u64;
            self.blocks += 1;
        }
        out.flush().map_err(|e| io_error(&e))?;
        Ok(run)
    }
}

/// Where the merge takes pairs from.
enum Source {
    /// A run on disk: the block read last, and the next block's number
    /// within the run.
    Run {
        run: Run,
        next: u64,
        block: std::vec::IntoIter<Pair>,
    },
    /// The pairs that stayed in memory, sorted.
    Memory(std::vec::IntoIter<Pair>),
}

/// The pairs of one range index in order: an iterator of
/// `Result<(value, id)>` (an error ends it).
pub(crate) struct Merge<'a> {
    disk: Option<&'a Disk>,
    sources: Vec<Source>,
    /// The next pair of each source that has one.
    heap: BinaryHeap<Reverse<(Pair, usize)>>,
}

impl Merge<'_> {
    /// Puts source `s`'s next pair on the heap, reading its next block
    /// when the last one is used up.
    fn refill(&mut self, s: usize) -> Result<()> {
        let disk = self.disk;
        let Some(source) = self.sources.get_mut(s) else {
            return Ok(());
        };
        let next = match source {
            Source::Memory(pairs) => pairs.next(),
            Source::Run { run, next, block } => match block.next() {
                Some(p) => Some(p),
                None if *next < run.blocks => {
                    let disk = disk.ok_or_else(damaged)?;
                    let (pairs, offset) = disk.read_block(run, *next)?;
                    // The next block starts where this one ends.
                    run.offset = offset;
                    *next += 1;
                    *block = pairs.into_iter();
                    block.next()
                }
                None => None,
            },
        };
        if let Some(pair) = next {
            self.heap.push(Reverse((pair, s)));
        }
        Ok(())
    }
}

impl Disk {
    /// Reads and opens block `n` of `run` (its blocks before `n` read
    /// already: `run.offset` is where block `n` starts); returns its pairs
    /// and where the next block starts.
    fn read_block(&self, run: &Run, n: u64) -> Result<(Vec<Pair>, u64)> {
        let mut len = [0u8; 4];
        read_at(&self.file, &mut len, run.offset).map_err(|_| damaged())?;
        let len = u32::from_be_bytes(len) as usize;
        if len > BLOCK_PAIRS * PAIR + Aes256GcmSiv::OVERHEAD {
            return Err(damaged());
        }
        let mut sealed = vec![0u8; len];
        read_at(&self.file, &mut sealed, run.offset + 4).map_err(|_| damaged())?;
        let plain = self
            .cipher
            .open(&aad(run.first + n), &sealed)
            .map_err(|_| damaged())?;
        if plain.is_empty() || plain.len() % PAIR != 0 {
            return Err(damaged());
        }
        let pairs = plain
            .chunks_exact(PAIR)
            .map(|c| {
                let (v, id) = c.split_at(8);
                let v: [u8; 8] = v.try_into().unwrap_or_default();
                let id: [u8; 8] = id.try_into().unwrap_or_default();
                (u64::from_be_bytes(v), u64::from_be_bytes(id))
            })
            .collect();
        Ok((pairs, run.offset + 4 + len as u64))
    }
}

/// Fills `buf` from `file` at `offset`, without moving the file's
/// cursor (merges of several indexes read the same file at once).
#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Fills `buf` from `file` at `offset` (see the Unix version).
#[cfg(windows)]
fn read_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                let rest = std::mem::take(&mut buf);
                buf = rest.get_mut(n..).unwrap_or_default();
                offset += n as u64;
            }
        }
    }
    Ok(())
}

impl Iterator for Merge<'_> {
    type Item = Result<Pair>;

    fn next(&mut self) -> Option<Result<Pair>> {
        let Reverse((pair, s)) = self.heap.pop()?;
        if let Err(e) = self.refill(s) {
            self.heap.clear();
            return Some(Err(e));
        }
        Some(Ok(pair))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn pairs(n: u64) -> Vec<Pair> {
        // Values repeat (ties broken by identifier); not in order.
        (0..n).map(|i| ((i * 7919) % 1000, i)).collect()
    }

    fn merged(spill: &mut Spill, index: usize) -> Result<Vec<Pair>> {
        spill.sorted(index)?.collect()
    }

    /// Pairs pushed in any order come back sorted, each once, whether
    /// they stayed in memory or went through the file; what stays in
    /// memory is bounded by the run size, not by the pairs pushed.
    #[test]
    fn pairs_come_back_sorted_and_memory_stays_bounded() {
        let mut rng = rand_core::OsRng;
        let mut spill = Spill::with_run_pairs(1000);
        let a = pairs(25_000);
        let b: Vec<Pair> = pairs(7_000).into_iter().map(|(v, i)| (v + 5, i)).collect();
        let mut most = 0;
        for (i, p) in a.iter().enumerate() {
            spill
                .push(&mut rng, 0, p.0, p.1)
                .unwrap_or_else(|e| panic!("{e}"));
            if let Some(q) = b.get(i) {
                spill
                    .push(&mut rng, 2, q.0, q.1)
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            most = most.max(spill.held());
        }
        assert!(
            most <= 2 * 1000 * std::mem::size_of::<Pair>() + 4096,
            "{most} bytes held"
        );
        assert_eq!(
            (spill.len(0), spill.len(1), spill.len(2)),
            (25_000, 0, 7_000)
        );
        let mut want = a;
        want.sort_unstable();
        assert_eq!(
            merged(&mut spill, 0).unwrap_or_else(|e| panic!("{e}")),
            want
        );
        let mut want = b;
        want.sort_unstable();
        assert_eq!(
            merged(&mut spill, 2).unwrap_or_else(|e| panic!("{e}")),
            want
        );
        assert!(merged(&mut spill, 1)
            .unwrap_or_else(|e| panic!("{e}"))
            .is_empty());
    }

    /// A file whose bytes were altered, whose blocks were swapped or
    /// that was cut short is refused with a message saying what to do,
    /// never read as other pairs.
    #[test]
    fn an_altered_spill_file_is_refused() {
        let mut rng = rand_core::OsRng;
        let fill = |rng: &mut rand_core::OsRng| {
            let mut spill = Spill::with_run_pairs(BLOCK_PAIRS * 2);
            for p in pairs(BLOCK_PAIRS as u64 * 4) {
                spill
                    .push(rng, 0, p.0, p.1)
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            spill
        };
        let refused = |spill: &mut Spill| match merged(spill, 0) {
            Err(ClientError::InvalidArgument(m)) => {
                assert!(m.contains("run the same import again"), "{m}")
            }
            other => panic!("not refused: {:?}", other.map(|p| p.len())),
        };
        let file = |spill: &Spill| {
            spill
                .disk
                .as_ref()
                .map(|d| d.file.try_clone().unwrap_or_else(|e| panic!("{e}")))
                .unwrap_or_else(|| panic!("no file"))
        };
        let read_all = |f: &mut File| {
            let mut bytes = Vec::new();
            f.seek(SeekFrom::Start(0)).unwrap_or_else(|e| panic!("{e}"));
            f.read_to_end(&mut bytes).unwrap_or_else(|e| panic!("{e}"));
            bytes
        };
        let write_all = |f: &mut File, bytes: &[u8]| {
            f.set_len(0).unwrap_or_else(|e| panic!("{e}"));
            f.seek(SeekFrom::Start(0)).unwrap_or_else(|e| panic!("{e}"));
            f.write_all(bytes).unwrap_or_else(|e| panic!("{e}"));
        };

        // One byte flipped.
        let mut spill = fill(&mut rng);
        let mut f = file(&spill);
        let mut bytes = read_all(&mut f);
        let at = bytes.len() / 3;
        if let Some(b) = bytes.get_mut(at) {
            *b ^= 1;
        }
        write_all(&mut f, &bytes);
        refused(&mut spill);

        // The first two blocks (of the same size) swapped.
        let mut spill = fill(&mut rng);
        let mut f = file(&spill);
        let bytes = read_all(&mut f);
        let block = 4 + BLOCK_PAIRS * PAIR + Aes256GcmSiv::OVERHEAD;
        let swapped = [
            &bytes[block..2 * block],
            &bytes[..block],
            &bytes[2 * block..],
        ]
        .concat();
        write_all(&mut f, &swapped);
        refused(&mut spill);

        // Cut short.
        let mut spill = fill(&mut rng);
        let mut f = file(&spill);
        let bytes = read_all(&mut f);
        write_all(&mut f, &bytes[..bytes.len() - 100]);
        refused(&mut spill);
    }

    /// What an onlooker of the temporary directory reads: the spilled
    /// pairs (an import's value digests and row numbers) never appear in
    /// the file as they were pushed, in either byte order.
    #[test]
    fn a_spill_file_holds_no_pair_in_clear() {
        let mut rng = rand_core::OsRng;
        let mut spill = Spill::with_run_pairs(BLOCK_PAIRS);
        let pushed: Vec<Pair> = (0..BLOCK_PAIRS as u64 * 3)
            .map(|i| (0x5E5A_4E00_0000_0000 | i, i))
            .collect();
        for p in &pushed {
            spill
                .push(&mut rng, 0, p.0, p.1)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let mut f = spill
            .disk
            .as_ref()
            .map(|d| d.file.try_clone().unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|| panic!("nothing was spilled"));
        let mut bytes = Vec::new();
        f.seek(SeekFrom::Start(0)).unwrap_or_else(|e| panic!("{e}"));
        f.read_to_end(&mut bytes).unwrap_or_else(|e| panic!("{e}"));
        assert!(bytes.len() >= pushed.len() * 16, "{} bytes", bytes.len());
        // Every pushed value in both byte orders, looked up at every offset
        // of the file in one pass.
        let needles: std::collections::HashSet<[u8; 8]> = pushed
            .iter()
            .flat_map(|(value, _)| [value.to_be_bytes(), value.to_le_bytes()])
            .collect();
        assert_eq!(needles.len(), pushed.len() * 2);
        if let Some(at) = bytes.windows(8).position(|w| needles.contains(w)) {
            panic!("a pushed value is in the file in clear at byte {at}");
        }
        assert_eq!(
            merged(&mut spill, 0).unwrap_or_else(|e| panic!("{e}")),
            pushed
        );
    }
}
