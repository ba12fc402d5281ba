//! The catalog's entries on disk: sealed sorted runs beside the state
//! file, read through a bounded cache.
//!
//! A run is an immutable file `indexes/NAME.<run id>.catalog`:
//! `"SSMCAT03" || block* || name block* || footer || u32 footer length`
//! (the name blocks: module `names`, of 32-bit hashes; its blocks in the
//! compact forms of module `forms`). Runs of earlier builds are still
//! read: `"SSMCAT02"`, the same with 64-bit name hashes, and
//! `"SSMCAT01" || block* || footer || u32 footer length`, before the
//! name index; their footers are sealed as `"footer/names"` and
//! `"footer"` where this build's is `"footer/names32"`, so that no layout
//! opens as another. A block holds up
//! to [`BLOCK`] entries in identifier order (an identifier and its origin,
//! or a removal that hides the entry of an older run), sealed with
//! AES-256-GCM-SIV under the catalog key (derived from the state key) with
//! the profile, the index, the run id and the block's number in the
//! associated data; the footer lists the blocks (first and last
//! identifier, offset, length), sealed with the run id. The state names
//! each run of its catalog ([`RunRef`]: id, entries, identifier range and
//! the SHA-256 of the sealed footer), so a run opens only as the run the
//! state was saved with: a run file missing, replaced by another run's
//! (an older copy of the catalog put back), or with a block moved, swapped
//! or taken from another run or index is refused
//! ([`ClientError::StateCorrupt`], naming the file). Run ids are random
//! and a run is never rewritten: a new or merged run is a new file, named
//! by the state only once its bytes are synced, and the files the saved
//! state no longer names are deleted after the save.
//!
//! A block's plaintext is the wire encoding of its items, or, where zstd
//! (level 1) makes it shorter, [`ZSTD_BLOCK`], the encoding's length (8
//! bytes, big-endian) and the compressed encoding ([`pack_block`]): an
//! imported table's names share their file's prefix (`flights.csv#` and
//! 12 hexadecimal digits of the source, 25 bytes) and spend two digits a
//! byte, which the compression takes back (`docs/client.md`, "The
//! catalog on disk"). Blocks of either kind are read; a run of an
//! earlier build holds the first kind only. The files are this
//! machine's alone (a server never sees them), so what a compressed
//! length says of the names reaches no one who lacks the key.

use super::forms::{self, BlockItem};
use super::names::NameSorter;
use super::*;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::sync::Arc;

/// First bytes of a run file written with a name index of 32-bit
/// hashes (module `names`).
const RUN_MAGIC: &[u8; 8] = b"SSMCAT03";
/// First bytes of a run file written with a name index of 64-bit
/// hashes: still read.
const RUN_MAGIC_V2: &[u8; 8] = b"SSMCAT02";
/// First bytes of a run file written before the name index: still read.
const RUN_MAGIC_V1: &[u8; 8] = b"SSMCAT01";
/// Entries in a block of a run.
pub(super) const BLOCK: usize = 1024;

/// The first byte of a block's plaintext compressed with zstd (a wire
/// encoding starts with its version, 1).
const ZSTD_BLOCK: u8 = 0xc3;

/// The largest encoding a compressed block may claim: 1,024 entries of
/// paths up to 64 KiB. A claim beyond it is refused before anything is
/// allocated for it.
const MAX_BLOCK_PLAIN: u64 = 1 << 26;

/// A block's plaintext from the wire encoding of its items: compressed
/// where that is shorter (module docs).
pub(super) fn pack_block(encoded: Zeroizing<Vec<u8>>) -> Zeroizing<Vec<u8>> {
    let Ok(compressed) = zstd::bulk::compress(&encoded, 1) else {
        return encoded;
    };
    let compressed = Zeroizing::new(compressed);
    if 9 + compressed.len() >= encoded.len() || encoded.len() as u64 > MAX_BLOCK_PLAIN {
        return encoded;
    }
    let mut out = Zeroizing::new(Vec::with_capacity(9 + compressed.len()));
    out.push(ZSTD_BLOCK);
    out.extend_from_slice(&(encoded.len() as u64).to_be_bytes());
    out.extend_from_slice(&compressed);
    out
}

/// The wire encoding a block's plaintext holds, of either kind; `None`
/// where a compressed one claims too much, does not decompress, or not
/// to the length it claims.
pub(super) fn unpack_block(plain: Zeroizing<Vec<u8>>) -> Option<Zeroizing<Vec<u8>>> {
    if plain.first() != Some(&ZSTD_BLOCK) {
        return Some(plain);
    }
    let (len, body) = plain.get(1..)?.split_first_chunk::<8>()?;
    let len = u64::from_be_bytes(*len);
    if len > MAX_BLOCK_PLAIN {
        return None;
    }
    let out = Zeroizing::new(zstd::bulk::decompress(body, len as usize).ok()?);
    (out.len() as u64 == len).then_some(out)
}

#[cfg(test)]
thread_local! {
    /// The layout of the runs this thread writes, where not this build's
    /// (`Some(1)`: `SSMCAT01`, before the name index; `Some(2)`:
    /// `SSMCAT02`, 64-bit name hashes and blocks in the wire form): the
    /// tests make the runs of earlier builds.
    pub(super) static WRITE_EARLIER: std::cell::Cell<Option<u8>> =
        const { std::cell::Cell::new(None) };
}

/// The layout of the runs written: 3 (`SSMCAT03`), or an earlier one in
/// tests.
fn written_layout() -> u8 {
    #[cfg(test)]
    if let Some(layout) = WRITE_EARLIER.with(std::cell::Cell::get) {
        return layout;
    }
    3
}

/// An entry of a run: an identifier and its origin, or `None`: removed
/// (hiding the entry of an older run).
pub(super) type Entry = (u64, Option<DocumentInfo>);

/// A run as the state names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct RunRef {
    /// The run's random identifier (names its file).
    pub id: [u8; 16],
    /// Entries it holds, removals included.
    pub entries: u64,
    /// Its first and last identifier.
    pub first: u64,
    pub last: u64,
    /// SHA-256 of its sealed footer.
    pub footer: [u8; 32],
}

/// A block of a run, as its footer lists it: its first and last
/// identifier (or, in the name index, hash), where it is.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct BlockRef {
    pub first: u64,
    pub last: u64,
    pub offset: u64,
    pub len: u32,
}

/// The footer of a run with a name index.
#[derive(Serialize, Deserialize)]
struct Footer {
    blocks: Vec<BlockRef>,
    names: Vec<BlockRef>,
}

/// An open run: its reference, its blocks, its name index's blocks
/// (`None`: written before the name index) and its file.
pub(super) struct Run {
    pub r: RunRef,
    blocks: Vec<BlockRef>,
    pub(super) names: Option<Vec<BlockRef>>,
    /// Whether the name index's hashes are cut to 32 bits
    /// ([`RunStore::narrow_hash`]; `SSMCAT03`).
    pub(super) narrow: bool,
    pub(super) file: Mutex<File>,
    pub(super) path: PathBuf,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run").field("r", &self.r).finish()
    }
}

/// A cached block: its entries, when it was last used, its bytes.
type Cached = (Arc<Vec<Entry>>, u64, usize);

/// Decoded blocks kept in memory (by run and block), least recently used
/// dropped first.
#[derive(Default)]
struct Cache {
    blocks: HashMap<([u8; 16], usize), Cached>,
    bytes: usize,
    tick: u64,
}

/// Bytes a decoded block takes on the heap (as the cache counts them).
fn block_bytes(entries: &[Entry]) -> usize {
    std::mem::size_of_val(entries)
        + entries
            .iter()
            .map(|(_, d)| d.as_ref().map_or(0, |d| d.path.capacity()))
            .sum::<usize>()
}

/// Seals, opens and reads the runs of one index's catalog.
pub(crate) struct RunStore {
    aead: Aes256GcmSiv,
    profile_id: String,
    index: String,
    /// The index's state file: runs are named after it.
    state: PathBuf,
    cache: Mutex<Cache>,
    /// Most bytes of decoded blocks the cache holds.
    cache_bytes: usize,
    /// A digest of the catalog key, telling stores of another key apart.
    key_id: [u8; 32],
    /// Hashes the names of the name index (module `names`).
    names: sesame_crypto::hash::KeyedHash,
    /// Blocks read from run files and opened so far (what a lookup
    /// costs; the tests count it).
    reads: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for RunStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunStore")
            .field("state", &self.state)
            .finish()
    }
}

/// The run file of id `id` beside the state file `state`.
pub(super) fn run_path(state: &Path, id: &[u8; 16]) -> PathBuf {
    super::log::sibling_path(state, id, "catalog")
}

/// Deletes the run files beside the state file `state` but those of
/// `keep` (what a save leaves behind: merged runs, a run written by a
/// save that did not complete), and the name index's spill files; failures only leave a file that takes
/// room.
pub(crate) fn remove_runs(state: &Path, keep: &[[u8; 16]]) {
    let kept: Vec<PathBuf> = keep.iter().map(|k| run_path(state, k)).collect();
    super::log::remove_siblings(state, "catalog", &kept);
    // Name index spills of runs a killed process was writing.
    super::log::remove_siblings(state, "namespill", &[]);
}

impl RunStore {
    pub(super) fn new(
        key: &Key<32>,
        profile_id: &str,
        index: &str,
        state: &Path,
        cache_bytes: usize,
    ) -> Self {
        RunStore {
            aead: Aes256GcmSiv::new(key),
            profile_id: profile_id.to_owned(),
            index: index.to_owned(),
            state: state.to_path_buf(),
            cache: Mutex::new(Cache::default()),
            cache_bytes,
            key_id: sesame_crypto::hash::ro("sesame-client/catalog-key-id/v1", &[key.as_bytes()]),
            reads: std::sync::atomic::AtomicU64::new(0),
            names: sesame_crypto::hash::KeyedHash::new(&key.derive("sesame-client/catalog-names")),
        }
    }

    /// Whether `other` reads and writes the same runs (the same file,
    /// index, profile and key).
    pub(super) fn same_as(&self, other: &RunStore) -> bool {
        self.state == other.state
            && self.index == other.index
            && self.profile_id == other.profile_id
            && self.key_id == other.key_id
    }

    /// The state file the runs are named after.
    pub(super) fn state_path(&self) -> &Path {
        &self.state
    }

    /// The keyed hash of an entry's name in the name index.
    pub(super) fn name_hash(&self, name: &str) -> u64 {
        let h = self
            .names
            .hash("sesame-client/catalog-name/v1", &[name.as_bytes()]);
        let mut first = [0u8; 8];
        first.copy_from_slice(&h[..8]);
        u64::from_be_bytes(first)
    }

    /// The hash a run of 32-bit name hashes (`SSMCAT03`) holds for a name
    /// of [`RunStore::name_hash`] `hash`: its first 32 bits, so that the
    /// order of hashes is kept.
    pub(super) fn narrow_hash(hash: u64) -> u64 {
        hash >> 32
    }

    /// Counts a block read from a run file.
    pub(super) fn count_read(&self) {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Seals `items` (keyed by `key`, in order) as a block written to
    /// `out` at `offset`; where it is.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn seal_block<T: BlockItem>(
        &self,
        rng: &mut dyn CryptoRngCore,
        out: &mut impl Write,
        path: &Path,
        aad: &[u8],
        items: &[T],
        offset: u64,
        key: impl Fn(&T) -> u64,
    ) -> Result<BlockRef> {
        let too_large = || ClientError::InvalidArgument("catalog block is too large".into());
        let encoded = if written_layout() < 3 {
            wire::encode(items)?
        } else {
            forms::encode(items)?
        };
        let plain = pack_block(Zeroizing::new(encoded));
        let sealed = self.aead.seal(rng, aad, &plain).map_err(|_| too_large())?;
        let len = u32::try_from(sealed.len()).map_err(|_| too_large())?;
        out.write_all(&sealed)
            .map_err(|e| ClientError::io("write", path, &e))?;
        Ok(BlockRef {
            first: items.first().map_or(0, &key),
            last: items.last().map_or(0, &key),
            offset,
            len,
        })
    }

    /// Reads and opens the block `at` of `file` (at `path`), sealed with
    /// `aad`: its items, whose keys must run from `at.first` to
    /// `at.last` without decreasing.
    pub(super) fn open_block<T: BlockItem>(
        &self,
        file: &mut File,
        path: &Path,
        at: &BlockRef,
        aad: &[u8],
        key: impl Fn(&T) -> u64,
    ) -> Result<Vec<T>> {
        let corrupt = || self.corrupt(path);
        let io = |e: std::io::Error| ClientError::io("read", path, &e);
        let mut sealed = vec![0u8; at.len as usize];
        file.seek(SeekFrom::Start(at.offset)).map_err(io)?;
        file.read_exact(&mut sealed).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                corrupt()
            } else {
                io(e)
            }
        })?;
        let plain = Zeroizing::new(self.aead.open(aad, &sealed).map_err(|_| corrupt())?);
        let plain = unpack_block(plain).ok_or_else(corrupt)?;
        let items: Vec<T> = forms::decode(&plain).ok_or_else(corrupt)?;
        let ordered = items.windows(2).all(|w| key(&w[0]) <= key(&w[1]));
        if !ordered
            || items.first().map(&key) != Some(at.first)
            || items.last().map(&key) != Some(at.last)
        {
            return Err(corrupt());
        }
        Ok(items)
    }

    pub(super) fn aad(&self, run: &[u8; 16], what: &str, seq: u64) -> Vec<u8> {
        let mut aad = b"sesame-client/catalog-run/v1\0".to_vec();
        for part in [
            self.profile_id.as_bytes(),
            self.index.as_bytes(),
            run,
            what.as_bytes(),
        ] {
            aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
            aad.extend_from_slice(part);
        }
        aad.extend_from_slice(&seq.to_be_bytes());
        aad
    }

    fn corrupt(&self, path: &Path) -> ClientError {
        ClientError::StateCorrupt {
            index: self.index.clone(),
            path: path.to_path_buf(),
        }
    }

    /// Writes `entries` (in increasing identifier order) as a new run and
    /// syncs it; `None` when there are none.
    pub(super) fn write(
        &self,
        rng: &mut dyn CryptoRngCore,
        entries: impl Iterator<Item = Result<Entry>>,
    ) -> Result<Option<RunRef>> {
        let mut id = [0u8; 16];
        rng.fill_bytes(&mut id);
        let path = run_path(&self.state, &id);
        let written = self.write_to(rng, &id, &path, entries);
        if !matches!(written, Ok(Some(_))) {
            let _ = std::fs::remove_file(&path);
        }
        if written.is_ok() {
            if let Some(dir) = path.parent() {
                fsutil::sync_dir(dir)?;
            }
        }
        written
    }

    fn write_to(
        &self,
        rng: &mut dyn CryptoRngCore,
        id: &[u8; 16],
        path: &Path,
        mut entries: impl Iterator<Item = Result<Entry>>,
    ) -> Result<Option<RunRef>> {
        let io = |e: std::io::Error| ClientError::io("write", path, &e);
        let too_large = || ClientError::InvalidArgument("catalog block is too large".into());
        let file = File::create(path).map_err(io)?;
        let mut out = BufWriter::new(file);
        let layout = written_layout();
        let magic = match layout {
            1 => RUN_MAGIC_V1,
            2 => RUN_MAGIC_V2,
            _ => RUN_MAGIC,
        };
        out.write_all(magic).map_err(io)?;
        let mut offset = RUN_MAGIC.len() as u64;
        let mut blocks: Vec<BlockRef> = Vec::new();
        let mut names = NameSorter::new(self, id);
        let mut count = 0u64;
        let mut block: Vec<Entry> = Vec::with_capacity(BLOCK);
        let mut last_id: Option<u64> = None;
        loop {
            let next = entries.next().transpose()?;
            if let Some((i, d)) = &next {
                if last_id.is_some_and(|l| l >= *i) {
                    return Err(ClientError::InvalidArgument(
                        "catalog entries out of order".into(),
                    ));
                }
                last_id = Some(*i);
                if let Some(d) = d.as_ref().filter(|_| layout > 1) {
                    let hash = self.name_hash(&d.path);
                    let hash = if layout > 2 {
                        Self::narrow_hash(hash)
                    } else {
                        hash
                    };
                    names.push(self, rng, hash, *i)?;
                }
            }
            let done = next.is_none();
            if let Some(e) = next {
                block.push(e);
            }
            if block.len() == BLOCK || (done && !block.is_empty()) {
                let aad = self.aad(id, "block", blocks.len() as u64);
                let at = self.seal_block(rng, &mut out, path, &aad, &block, offset, |e| e.0)?;
                offset += u64::from(at.len);
                blocks.push(at);
                count += block.len() as u64;
                block.clear();
            }
            if done {
                break;
            }
        }
        let (Some(first), Some(last)) = (blocks.first(), blocks.last()) else {
            return Ok(None);
        };
        let (first, last) = (first.first, last.last);
        let names = names.write(self, rng, &mut out, path, offset)?;
        let (what, plain) = match layout {
            1 => ("footer", wire::encode(&blocks)?),
            2 => ("footer/names", wire::encode(&Footer { blocks, names })?),
            _ => ("footer/names32", wire::encode(&Footer { blocks, names })?),
        };
        let footer = self
            .aead
            .seal(rng, &self.aad(id, what, count), &plain)
            .map_err(|_| too_large())?;
        let footer_len = u32::try_from(footer.len()).map_err(|_| too_large())?;
        out.write_all(&footer).map_err(io)?;
        out.write_all(&footer_len.to_be_bytes()).map_err(io)?;
        let file = out.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        Ok(Some(RunRef {
            id: *id,
            entries: count,
            first,
            last,
            footer: sesame_crypto::hash::sha256(&footer),
        }))
    }

    /// Opens the run the state names `r`: its file must hold exactly the
    /// footer `r` names.
    pub(super) fn open(&self, r: &RunRef) -> Result<Run> {
        let path = run_path(&self.state, &r.id);
        let mut file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ClientError::InvalidArgument(format!(
                    "{} is missing: the client state of index {:?} names it as part of its \
                     catalog (the catalog files were removed or restored from an older copy; \
                     restore the profile's indexes folder whole from one backup)",
                    path.display(),
                    self.index
                )))
            }
            Err(e) => return Err(ClientError::io("read", &path, &e)),
        };
        let corrupt = || self.corrupt(&path);
        let io = |e: std::io::Error| ClientError::io("read", &path, &e);
        let mut magic = [0u8; 8];
        file.read_exact(&mut magic).map_err(|_| corrupt())?;
        let size = file.seek(SeekFrom::End(0)).map_err(io)?;
        let tail = size.checked_sub(4).ok_or_else(corrupt)?;
        let mut len = [0u8; 4];
        file.seek(SeekFrom::Start(tail)).map_err(io)?;
        file.read_exact(&mut len).map_err(io)?;
        let footer_len = u64::from(u32::from_be_bytes(len));
        let at = tail.checked_sub(footer_len).ok_or_else(corrupt)?;
        let mut footer = vec![0u8; usize::try_from(footer_len).map_err(|_| corrupt())?];
        file.seek(SeekFrom::Start(at)).map_err(io)?;
        file.read_exact(&mut footer).map_err(io)?;
        if sesame_crypto::hash::sha256(&footer) != r.footer {
            return Err(corrupt());
        }
        // The footer's associated data says which layout it is: a run's
        // first bytes cannot make it read as the other.
        let narrow = &magic == RUN_MAGIC;
        let (blocks, names) = if narrow || &magic == RUN_MAGIC_V2 {
            let what = if narrow {
                "footer/names32"
            } else {
                "footer/names"
            };
            let plain = self
                .aead
                .open(&self.aad(&r.id, what, r.entries), &footer)
                .map_err(|_| corrupt())?;
            let f: Footer = wire::decode(&plain).map_err(|_| corrupt())?;
            (f.blocks, Some(f.names))
        } else if &magic == RUN_MAGIC_V1 {
            let plain = self
                .aead
                .open(&self.aad(&r.id, "footer", r.entries), &footer)
                .map_err(|_| corrupt())?;
            (wire::decode(&plain).map_err(|_| corrupt())?, None)
        } else {
            return Err(corrupt());
        };
        Ok(Run {
            r: r.clone(),
            blocks,
            names,
            narrow,
            file: Mutex::new(file),
            path,
        })
    }

    /// Block `b` of `run`, from the cache or the file.
    pub(super) fn block(&self, run: &Run, b: usize) -> Result<Arc<Vec<Entry>>> {
        {
            let mut cache = lock(&self.cache);
            cache.tick += 1;
            let tick = cache.tick;
            if let Some((entries, used, _)) = cache.blocks.get_mut(&(run.r.id, b)) {
                *used = tick;
                return Ok(entries.clone());
            }
        }
        let at = run.blocks.get(b).ok_or_else(|| self.corrupt(&run.path))?;
        self.count_read();
        let entries: Vec<Entry> = {
            let mut file = lock(&run.file);
            let aad = self.aad(&run.r.id, "block", b as u64);
            self.open_block(&mut file, &run.path, at, &aad, |e: &Entry| e.0)?
        };
        if !entries.windows(2).all(|w| w[0].0 < w[1].0) {
            return Err(self.corrupt(&run.path));
        }
        let entries = Arc::new(entries);
        let bytes = block_bytes(&entries);
        let mut cache = lock(&self.cache);
        let tick = cache.tick;
        cache.bytes += bytes;
        cache
            .blocks
            .insert((run.r.id, b), (entries.clone(), tick, bytes));
        while cache.bytes > self.cache_bytes && cache.blocks.len() > 1 {
            let Some(oldest) = cache
                .blocks
                .iter()
                .min_by_key(|(_, (_, used, _))| *used)
                .map(|(k, _)| *k)
            else {
                break;
            };
            if let Some((_, _, b)) = cache.blocks.remove(&oldest) {
                cache.bytes -= b;
            }
        }
        Ok(entries)
    }

    /// The entry of `id` in `run`: `None` when the run says nothing of
    /// it, `Some(None)` when it removes it.
    pub(super) fn find(&self, run: &Run, id: u64) -> Result<Option<Option<DocumentInfo>>> {
        if id < run.r.first || id > run.r.last {
            return Ok(None);
        }
        let b = run.blocks.partition_point(|blk| blk.last < id);
        if run.blocks.get(b).is_none_or(|blk| blk.first > id) {
            return Ok(None);
        }
        let block = self.block(run, b)?;
        // Identifiers are handed out in order, so most blocks hold a run
        // of consecutive ones: look where `id` is in such a block first,
        // then search. (The search's scattered loads were most of the
        // catalog's time in a point query of `sesame sql`.)
        let dense = block
            .first()
            .and_then(|first| usize::try_from(id.checked_sub(first.0)?).ok())
            .filter(|&at| block.get(at).is_some_and(|e| e.0 == id));
        Ok(dense
            .or_else(|| block.binary_search_by_key(&id, |e| e.0).ok())
            .and_then(|at| block.get(at))
            .map(|e| e.1.clone()))
    }

    /// The blocks of the name index of `run` (`None`: it has none).
    #[cfg(test)]
    pub(super) fn name_blocks(run: &Run) -> Option<Vec<(u64, u32)>> {
        run.names
            .as_ref()
            .map(|n| n.iter().map(|b| (b.offset, b.len)).collect())
    }

    /// Blocks read from run files so far.
    #[cfg(test)]
    pub(super) fn blocks_read(&self) -> u64 {
        self.reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes held in memory: the cache and the runs' block lists.
    #[cfg(test)]
    pub(super) fn heap_bytes(&self, runs: &[Arc<Run>]) -> usize {
        lock(&self.cache).bytes
            + runs
                .iter()
                .map(|r| r.blocks.capacity() * std::mem::size_of::<BlockRef>())
                .sum::<usize>()
    }
}

/// The entries of one run in order, a block at a time.
pub(super) struct RunIter {
    store: Arc<RunStore>,
    run: Arc<Run>,
    block: usize,
    at: usize,
    current: Option<Arc<Vec<Entry>>>,
}

impl RunIter {
    pub(super) fn new(store: Arc<RunStore>, run: Arc<Run>) -> Self {
        RunIter {
            store,
            run,
            block: 0,
            at: 0,
            current: None,
        }
    }
}

impl Iterator for RunIter {
    type Item = Result<Entry>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(block) = &self.current {
                if let Some(e) = block.get(self.at) {
                    self.at += 1;
                    return Some(Ok(e.clone()));
                }
                self.current = None;
                self.block += 1;
                self.at = 0;
            }
            if self.block >= self.run.blocks.len() {
                return None;
            }
            match self.store.block(&self.run, self.block) {
                Ok(b) => self.current = Some(b),
                Err(e) => {
                    self.block = usize::MAX;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Merges sources of entries, each in increasing identifier order, the
/// first source the newest: each identifier once, as the newest source
/// holding it says.
pub(super) struct Merge {
    heads: Vec<Option<Entry>>,
    sources: Vec<Box<dyn Iterator<Item = Result<Entry>> + Send>>,
    failed: bool,
}

impl Merge {
    pub(super) fn new(
        mut sources: Vec<Box<dyn Iterator<Item = Result<Entry>> + Send>>,
    ) -> Result<Self> {
        let heads = sources
            .iter_mut()
            .map(|s| s.next().transpose())
            .collect::<Result<Vec<_>>>()?;
        Ok(Merge {
            heads,
            sources,
            failed: false,
        })
    }
}

impl Iterator for Merge {
    type Item = Result<Entry>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let least = self.heads.iter().flatten().map(|e| e.0).min()?;
        let mut taken: Option<Entry> = None;
        for (head, source) in self.heads.iter_mut().zip(self.sources.iter_mut()) {
            if head.as_ref().is_some_and(|e| e.0 == least) {
                let e = head.take();
                if taken.is_none() {
                    taken = e;
                }
                match source.next().transpose() {
                    Ok(next) => *head = next,
                    Err(err) => {
                        self.failed = true;
                        return Some(Err(err));
                    }
                }
            }
        }
        taken.map(Ok)
    }
}

#[cfg(test)]
mod block_tests {
    use super::*;

    fn encoded(names: usize) -> Zeroizing<Vec<u8>> {
        let items: Vec<(u64, String)> = (0..names)
            .map(|i| {
                (
                    i as u64,
                    format!("flights.csv#a1b2c3d4e5f6:{:016x}", i * 7919),
                )
            })
            .collect();
        Zeroizing::new(wire::encode(&items).unwrap_or_else(|e| panic!("{e}")))
    }

    /// A block of names that share a prefix is compressed, to under half
    /// its encoding, and comes back whole; a block too short to gain is
    /// kept as it is, and an encoding of an earlier build (the wire
    /// version first) passes through unchanged.
    #[test]
    fn blocks_compress_where_it_pays_and_come_back_whole() {
        let long = encoded(1024);
        let packed = pack_block(long.clone());
        assert_eq!(packed.first(), Some(&ZSTD_BLOCK));
        assert!(
            packed.len() * 2 < long.len(),
            "{} of {}",
            packed.len(),
            long.len()
        );
        assert_eq!(
            unpack_block(packed).map(|p| p.to_vec()),
            Some(long.to_vec())
        );
        let short = encoded(1);
        assert_eq!(&pack_block(short.clone())[..], &short[..]);
        assert_eq!(
            unpack_block(short.clone()).map(|p| p.to_vec()),
            Some(short.to_vec())
        );
    }

    /// A compressed block that claims more than the bound, a length
    /// other than its content's, or holds damaged or cut bytes is
    /// refused (no panic, nothing allocated for the claim).
    #[test]
    fn a_compressed_block_that_lies_is_refused() {
        let packed = pack_block(encoded(1024));
        let claim = |len: u64| {
            let mut p = packed.clone();
            p[1..9].copy_from_slice(&len.to_be_bytes());
            p
        };
        assert!(unpack_block(claim(MAX_BLOCK_PLAIN + 1)).is_none());
        assert!(unpack_block(claim(u64::MAX)).is_none());
        let real = u64::from_be_bytes(packed[1..9].try_into().unwrap_or_default());
        assert!(unpack_block(claim(real - 1)).is_none());
        assert!(unpack_block(claim(real + 1)).is_none());
        let mut cut = packed.clone();
        cut.truncate(packed.len() / 2);
        assert!(unpack_block(cut).is_none());
        assert!(unpack_block(Zeroizing::new(vec![ZSTD_BLOCK, 0, 0])).is_none());
    }
}
