//! Path ORAM: Stefanov, van Dijk, Shi, Fletcher, Ren, Yu, Devadas, "Path
//! ORAM: An Extremely Simple Oblivious RAM Protocol", CCS 2013.
//!
//! The server holds a binary tree of `height + 1` levels (2^height leaves,
//! 2^(height+1) - 1 buckets, numbered in heap order: the root is 0, the
//! children of `i` are `2i + 1` and `2i + 2`). Each bucket holds
//! [`Z`] = 4 block slots and is stored as one AES-256-GCM-SIV ciphertext
//! (fresh random nonce on every write) of exactly
//! [`PathOram::bucket_len`] bytes: empty slots are dummy blocks, so every
//! bucket has the same size.
//!
//! The client keeps the key, the position map (the leaf of every block,
//! one `u32` each) and the stash. An access to block `a`:
//! 1. reads the path from the root to the leaf `position[a]` (one round:
//!    the server returns the path's `height + 1` buckets) and moves its real
//!    blocks into the stash;
//! 2. remaps `a` to a fresh uniformly random leaf, reads or updates `a` in
//!    the stash;
//! 3. writes the same path back (one round), filling buckets greedily from
//!    the leaf up with the stash blocks whose own path crosses each bucket.
//!
//! The server sees only the leaf of each access (uniformly random and
//! independent of the address) and bucket ciphertexts of a fixed size.
//!
//! Freshness (the paper's integrity extension, §6 of the CCS version: a
//! Merkle tree laid on the ORAM tree): each bucket's plaintext ends with
//! the SHA-256 digests of its two children's current ciphertexts
//! ([`NEVER_WRITTEN`] for a child the server does not hold), and the client
//! keeps the digest of the root's ciphertext. A path is checked from the
//! root down before anything is used: a bucket whose digest is not the one
//! its parent (or the client, for the root) recorded is refused with
//! [`Error::Crypto`], so a replayed, rolled-back, swapped or dropped bucket
//! never reaches the stash. A write-back seals the path from the leaf up,
//! each parent taking its path child's new digest and its other child's
//! digest from the checked read.
//!
//! A write-back that fails stays pending and is sent again before the next
//! access; [`PathOram::grow`] doubles the capacity without moving a block;
//! [`PathOram::initialize`] bulk-loads an empty ORAM. The client talks to
//! the server through [`PathIo`]: a [`ChannelIo`] (two rounds per access)
//! or the [`PathOramServer`] itself in process. See
//! `docs/schemes/path_oram.md`.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{channel, Channel, Error, Handler, IoCounts, Result, Store, WriteBatch};
use sesame_crypto::aead::Aes256GcmSiv;
use sesame_crypto::key::Key;

/// Blocks per bucket (the paper's Z).
pub const Z: usize = 4;

/// Largest tree height (2^30 leaves).
pub const MAX_HEIGHT: u32 = 30;

/// Largest number of blocks the stash may hold after a write-back. The
/// paper proves `Pr[stash > R]` <= 14 * 0.6^R for Z = 5 and measures, for
/// Z = 4, an overflow probability falling exponentially in R (about 2^-80
/// at R = 89, extrapolated); an access that leaves more than this many
/// blocks in the stash fails with [`Error::Protocol`] instead of letting
/// the stash grow. The access itself completed: no block is lost.
pub const STASH_LIMIT: usize = 150;

/// Bytes of a slot's header: the block address (8) and data length (4).
pub const SLOT_HEADER: usize = 12;

/// Address marking an empty (dummy) slot.
const DUMMY: u64 = u64::MAX;

/// Bytes of a bucket's child digests (two SHA-256 digests), after its
/// slots.
pub const CHILD_DIGESTS: usize = 64;

/// The digest recorded for a bucket the server does not hold (never
/// written). A SHA-256 output equal to it is never expected.
pub const NEVER_WRITTEN: [u8; 32] = [0; 32];

/// The digest of a bucket ciphertext, as its parent records it.
fn digest(ct: &[u8]) -> [u8; 32] {
    sesame_crypto::hash::sha256(ct)
}

/// Associated data prefix of bucket ciphertexts.
const AAD_PREFIX: &[u8; 16] = b"sesame-path-oram";

/// A bucket ciphertext on the wire: encoded like a `Vec<u8>` (length, then
/// the bytes) but through serde's byte-string methods, which postcard
/// copies in one piece instead of byte by byte.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bytes(pub Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

struct BytesVisitor;

impl<'de> serde::de::Visitor<'de> for BytesVisitor {
    type Value = Bytes;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a byte string")
    }

    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> std::result::Result<Bytes, E> {
        Ok(Bytes(v.to_vec()))
    }

    fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> std::result::Result<Bytes, E> {
        Ok(Bytes(v))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Bytes, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
        while let Some(b) = seq.next_element::<u8>()? {
            out.push(b);
        }
        Ok(Bytes(out))
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Bytes, D::Error> {
        d.deserialize_byte_buf(BytesVisitor)
    }
}

/// A Path ORAM request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Returns the buckets on the path from the root to `leaf`.
    ReadPath {
        /// Tree height (public parameter).
        height: u8,
        /// The leaf, in `0..2^height`, big-endian (fixed width, so every
        /// request of a tree has the same size).
        leaf: [u8; 4],
    },
    /// Replaces the buckets on the path from the root to `leaf`.
    WritePath {
        /// Tree height (public parameter).
        height: u8,
        /// The leaf, in `0..2^height`, big-endian.
        leaf: [u8; 4],
        /// `height + 1` bucket ciphertexts, root first.
        buckets: Vec<Bytes>,
    },
    /// Writes consecutive buckets `first, first + 1, ...` (the bulk
    /// initialisation of [`PathOram::initialize`]).
    PutBuckets {
        /// Tree height (public parameter).
        height: u8,
        /// Heap index of the first bucket.
        first: u64,
        /// Bucket ciphertexts.
        buckets: Vec<Bytes>,
    },
}

/// A Path ORAM response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The path's buckets, root first; `None` for a bucket never written
    /// (an empty bucket: the tree is initialised lazily).
    Path(Vec<Option<Bytes>>),
    /// The path was written.
    Written,
}

/// Heap index of the bucket at `level` on the path to `leaf`.
pub fn bucket_index(height: u32, leaf: u32, level: u32) -> u64 {
    ((1u64 << level) - 1) + (u64::from(leaf) >> (height - level))
}

fn check_path(height: u8, leaf: u32) -> Result<u32> {
    let h = u32::from(height);
    if h > MAX_HEIGHT || u64::from(leaf) >> h != 0 {
        return Err(Error::InvalidArgument(format!(
            "leaf {leaf} is not in a tree of height {height}"
        )));
    }
    Ok(h)
}

/// Store key of bucket `index`.
fn bucket_key(index: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = b'b';
    k[1..].copy_from_slice(&index.to_be_bytes());
    k
}

/// Where an access sends its two requests: a channel to the server, or
/// the server itself in process (benchmarks of the ORAM logic alone).
pub trait PathIo {
    /// The buckets on the path to `leaf`, root first.
    fn read_path(&mut self, height: u32, leaf: u32) -> Result<Vec<Option<Vec<u8>>>>;
    /// Writes the buckets on the path to `leaf`, root first.
    fn write_path(&mut self, height: u32, leaf: u32, buckets: Vec<Vec<u8>>) -> Result<()>;
    /// Writes consecutive buckets from heap index `first`.
    fn put_buckets(&mut self, height: u32, first: u64, buckets: Vec<Vec<u8>>) -> Result<()>;
}

/// [`PathIo`] over a [`Channel`]: each call is one round.
pub struct ChannelIo<'a>(pub &'a mut dyn Channel);

fn height_u8(height: u32) -> Result<u8> {
    u8::try_from(height).map_err(|_| Error::InvalidArgument("tree height too large".into()))
}

impl PathIo for ChannelIo<'_> {
    fn read_path(&mut self, height: u32, leaf: u32) -> Result<Vec<Option<Vec<u8>>>> {
        let request = Request::ReadPath {
            height: height_u8(height)?,
            leaf: leaf.to_be_bytes(),
        };
        match channel::call(self.0, &request)? {
            Response::Path(buckets) => Ok(buckets.into_iter().map(|b| b.map(|b| b.0)).collect()),
            Response::Written => Err(Error::Protocol(
                "Path ORAM server answered Written to ReadPath".into(),
            )),
        }
    }

    fn write_path(&mut self, height: u32, leaf: u32, buckets: Vec<Vec<u8>>) -> Result<()> {
        let request = Request::WritePath {
            height: height_u8(height)?,
            leaf: leaf.to_be_bytes(),
            buckets: buckets.into_iter().map(Bytes).collect(),
        };
        match channel::call(self.0, &request)? {
            Response::Written => Ok(()),
            Response::Path(_) => Err(Error::Protocol(
                "Path ORAM server answered Path to WritePath".into(),
            )),
        }
    }

    fn put_buckets(&mut self, height: u32, first: u64, buckets: Vec<Vec<u8>>) -> Result<()> {
        let request = Request::PutBuckets {
            height: height_u8(height)?,
            first,
            buckets: buckets.into_iter().map(Bytes).collect(),
        };
        match channel::call(self.0, &request)? {
            Response::Written => Ok(()),
            Response::Path(_) => Err(Error::Protocol(
                "Path ORAM server answered Path to PutBuckets".into(),
            )),
        }
    }
}

/// The server half: one store value per bucket, key `b` || index.
pub struct PathOramServer {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for PathOramServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PathOramServer").finish_non_exhaustive()
    }
}

impl PathOramServer {
    /// A server keeping its buckets in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        PathOramServer { store }
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The buckets on the path to `leaf` (one `get_many`).
    pub fn read(&self, height: u8, leaf: u32) -> Result<Vec<Option<Vec<u8>>>> {
        let h = check_path(height, leaf)?;
        let keys: Vec<[u8; 9]> = (0..=h)
            .map(|l| bucket_key(bucket_index(h, leaf, l)))
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        self.store.get_many(&refs)
    }

    /// Writes the buckets on the path to `leaf` (one batch).
    pub fn write(&self, height: u8, leaf: u32, buckets: Vec<Vec<u8>>) -> Result<()> {
        let h = check_path(height, leaf)?;
        if buckets.len() != h as usize + 1 {
            return Err(Error::InvalidArgument(format!(
                "{} buckets for a path of {} buckets",
                buckets.len(),
                h + 1
            )));
        }
        let mut batch = WriteBatch::with_capacity(buckets.len());
        for (l, bucket) in (0..=h).zip(buckets) {
            batch.put(bucket_key(bucket_index(h, leaf, l)).to_vec(), bucket);
        }
        self.store.write(batch)
    }

    /// Writes consecutive buckets from heap index `first` (one batch).
    pub fn put_buckets(&self, height: u8, first: u64, buckets: Vec<Vec<u8>>) -> Result<()> {
        let h = check_path(height, 0)?;
        let total = (1u64 << (h + 1)) - 1;
        if first
            .checked_add(buckets.len() as u64)
            .is_none_or(|end| end > total)
        {
            return Err(Error::InvalidArgument(format!(
                "buckets {first}.. beyond the {total} buckets of the tree"
            )));
        }
        let mut batch = WriteBatch::with_capacity(buckets.len());
        for (i, bucket) in (first..).zip(buckets) {
            batch.put(bucket_key(i).to_vec(), bucket);
        }
        self.store.write(batch)
    }
}

impl PathIo for PathOramServer {
    fn read_path(&mut self, height: u32, leaf: u32) -> Result<Vec<Option<Vec<u8>>>> {
        self.read(height_u8(height)?, leaf)
    }

    fn write_path(&mut self, height: u32, leaf: u32, buckets: Vec<Vec<u8>>) -> Result<()> {
        self.write(height_u8(height)?, leaf, buckets)
    }

    fn put_buckets(&mut self, height: u32, first: u64, buckets: Vec<Vec<u8>>) -> Result<()> {
        PathOramServer::put_buckets(self, height_u8(height)?, first, buckets)
    }
}

impl Handler for PathOramServer {
    type Request = Request;
    type Response = Response;

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::ReadPath { height, leaf } => {
                let path = self.read(height, u32::from_be_bytes(leaf))?;
                Ok(Response::Path(
                    path.into_iter().map(|b| b.map(Bytes)).collect(),
                ))
            }
            Request::WritePath {
                height,
                leaf,
                buckets,
            } => {
                let buckets = buckets.into_iter().map(|b| b.0).collect();
                self.write(height, u32::from_be_bytes(leaf), buckets)?;
                Ok(Response::Written)
            }
            Request::PutBuckets {
                height,
                first,
                buckets,
            } => {
                let buckets = buckets.into_iter().map(|b| b.0).collect();
                PathOramServer::put_buckets(self, height, first, buckets)?;
                Ok(Response::Written)
            }
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}

/// What an access does to its block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Reads the block.
    Read,
    /// Replaces the block's data (at most the block size).
    Write(Vec<u8>),
    /// Removes the block (a later read finds nothing).
    Remove,
}

#[derive(Serialize, Deserialize)]
struct SavedOram {
    key: [u8; 32],
    height: u32,
    block_size: u32,
    position: Vec<u32>,
    stash: Vec<(u64, Vec<u8>)>,
    pending: Option<Pending>,
    max_stash: u64,
    accesses: u64,
    root: [u8; 32],
}

impl Drop for SavedOram {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.key);
    }
}

/// The client half of Path ORAM: key, position map and stash.
///
/// Addresses are `0..capacity()`. A block holds up to `block_size` bytes;
/// a block never written reads as `None`.
pub struct PathOram {
    key: Key<32>,
    aead: Aes256GcmSiv,
    height: u32,
    block_size: usize,
    /// Leaf of each block, grown on demand with uniformly random leaves
    /// (the paper initialises every entry at random).
    position: Vec<u32>,
    stash: BTreeMap<u64, Vec<u8>>,
    /// A write-back not yet acknowledged by the server.
    pending: Option<Pending>,
    max_stash: usize,
    accesses: u64,
    /// Digest of the root bucket's ciphertext as last written
    /// ([`NEVER_WRITTEN`] before the first write).
    root: [u8; 32],
}

/// A write-back: the path's leaf, the stash blocks placed in each of its
/// buckets, root first, and for each bucket above the leaf the digest of
/// its child off the path (unchanged by the write-back).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Pending {
    leaf: u32,
    placed: Vec<Vec<u64>>,
    siblings: Vec<[u8; 32]>,
}

impl std::fmt::Debug for PathOram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PathOram")
            .field("height", &self.height)
            .field("block_size", &self.block_size)
            .field("stash", &self.stash.len())
            .finish_non_exhaustive()
    }
}

impl PathOram {
    /// A client with a fresh key for a tree of `height` (capacity
    /// 2^height blocks) and blocks of `block_size` bytes.
    pub fn new(rng: &mut dyn CryptoRngCore, height: u32, block_size: usize) -> Result<Self> {
        Self::with_key(Key::generate(rng), height, block_size)
    }

    fn with_key(key: Key<32>, height: u32, block_size: usize) -> Result<Self> {
        if !(1..=MAX_HEIGHT).contains(&height) {
            return Err(Error::InvalidArgument(format!(
                "Path ORAM height {height} is not in 1..={MAX_HEIGHT}"
            )));
        }
        if !(1..=1 << 24).contains(&block_size) {
            return Err(Error::InvalidArgument(format!(
                "Path ORAM block size {block_size} is not in 1..=2^24"
            )));
        }
        let aead = Aes256GcmSiv::new(&key);
        Ok(PathOram {
            key,
            aead,
            height,
            block_size,
            position: Vec::new(),
            stash: BTreeMap::new(),
            pending: None,
            max_stash: 0,
            accesses: 0,
            root: NEVER_WRITTEN,
        })
    }

    /// The smallest height whose capacity holds `blocks` blocks (at least 1).
    pub fn height_for(blocks: u64) -> u32 {
        blocks.max(2).next_power_of_two().trailing_zeros()
    }

    /// The largest block size for which a bucket fits in `bytes` bytes.
    pub fn block_size_for_bucket(bytes: usize) -> usize {
        (bytes.saturating_sub(Aes256GcmSiv::OVERHEAD + CHILD_DIGESTS) / Z)
            .saturating_sub(SLOT_HEADER)
    }

    /// Bytes of a bucket for blocks of `block_size` bytes: the AEAD
    /// overhead, Z slots and the two child digests.
    pub fn bucket_len_for(block_size: usize) -> usize {
        Aes256GcmSiv::OVERHEAD + Z * (SLOT_HEADER + block_size) + CHILD_DIGESTS
    }

    /// Bytes of a bucket's plaintext.
    fn plain_len(&self) -> usize {
        Z * (SLOT_HEADER + self.block_size) + CHILD_DIGESTS
    }

    /// Tree height (the paper's L): paths have `height + 1` buckets.
    pub fn height(&self) -> u32 {
        self.height
    }

    /// Number of addressable blocks, 2^height.
    pub fn capacity(&self) -> u64 {
        1 << self.height
    }

    /// Largest block data, in bytes.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Bytes of every bucket ciphertext on the server.
    pub fn bucket_len(&self) -> usize {
        Self::bucket_len_for(self.block_size)
    }

    /// Blocks in the stash now.
    pub fn stash_len(&self) -> usize {
        self.stash.len()
    }

    /// Largest stash seen after a write-back.
    pub fn max_stash(&self) -> usize {
        self.max_stash
    }

    /// Accesses made.
    pub fn accesses(&self) -> u64 {
        self.accesses
    }

    /// Entries in the position map.
    pub fn position_len(&self) -> usize {
        self.position.len()
    }

    /// Bytes of client storage: key, position map (4 bytes a block) and
    /// stash (address, length and data of each block).
    pub fn client_storage_bytes(&self) -> u64 {
        let stash: usize = self.stash.values().map(|d| SLOT_HEADER + d.len()).sum();
        (32 + 4 * self.position.len() + stash) as u64
    }

    fn random_leaf(&self, rng: &mut dyn CryptoRngCore) -> u32 {
        rng.next_u32() & ((1u32 << self.height) - 1)
    }

    fn aad(index: u64) -> [u8; 24] {
        let mut aad = [0u8; 24];
        aad[..16].copy_from_slice(AAD_PREFIX);
        aad[16..].copy_from_slice(&index.to_be_bytes());
        aad
    }

    /// Reads block `addr`.
    pub fn read(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        io: &mut dyn PathIo,
        addr: u64,
    ) -> Result<Option<Vec<u8>>> {
        self.access(rng, io, addr, Op::Read)
    }

    /// Writes block `addr`; returns its previous data.
    pub fn write(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        io: &mut dyn PathIo,
        addr: u64,
        data: Vec<u8>,
    ) -> Result<Option<Vec<u8>>> {
        self.access(rng, io, addr, Op::Write(data))
    }

    /// One Path ORAM access (two rounds); returns the block's data before
    /// the access.
    pub fn access(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        io: &mut dyn PathIo,
        addr: u64,
        op: Op,
    ) -> Result<Option<Vec<u8>>> {
        if addr >= self.capacity() {
            return Err(Error::InvalidArgument(format!(
                "address {addr} beyond the ORAM capacity {}",
                self.capacity()
            )));
        }
        if let Op::Write(data) = &op {
            if data.len() > self.block_size {
                return Err(Error::InvalidArgument(format!(
                    "{} bytes exceed the ORAM block size {}",
                    data.len(),
                    self.block_size
                )));
            }
        }
        let a = addr as usize;
        while self.position.len() <= a {
            let leaf = self.random_leaf(rng);
            self.position.push(leaf);
        }
        self.flush(rng, io)?;
        let leaf = self.position.get(a).copied().ok_or(Error::Crypto)?;
        // Read the path and decrypt it before touching any state, so a
        // failed read leaves the client unchanged.
        let path = io.read_path(self.height, leaf)?;
        let (found, siblings) = self.open_path(leaf, &path)?;
        self.accesses += 1;
        for (b, data) in found {
            // A block already in the stash is newer than any copy on the
            // server (possible only after a failed write-back).
            self.stash.entry(b).or_insert(data);
        }
        let new_leaf = self.random_leaf(rng);
        if let Some(p) = self.position.get_mut(a) {
            *p = new_leaf;
        }
        let old = match op {
            Op::Read => self.stash.get(&addr).cloned(),
            Op::Write(data) => self.stash.insert(addr, data),
            Op::Remove => self.stash.remove(&addr),
        };
        self.write_back(rng, io, leaf, siblings)?;
        Ok(old)
    }

    /// Checks a path from the root down and decrypts it; returns its real
    /// blocks and, for each bucket above the leaf, the digest of its child
    /// off the path.
    #[allow(clippy::type_complexity)]
    fn open_path(
        &self,
        leaf: u32,
        path: &[Option<Vec<u8>>],
    ) -> Result<(Vec<(u64, Vec<u8>)>, Vec<[u8; 32]>)> {
        if path.len() != self.height as usize + 1 {
            return Err(Error::Protocol(format!(
                "the server returned {} buckets for a path of {}",
                path.len(),
                self.height + 1
            )));
        }
        let slot = SLOT_HEADER + self.block_size;
        let mut blocks = Vec::new();
        let mut siblings = Vec::with_capacity(self.height as usize);
        // The digest the bucket at this level must have.
        let mut expected = self.root;
        for (level, bucket) in (0..=self.height).zip(path) {
            let Some(ct) = bucket else {
                // Never written: nor is anything below it.
                if expected != NEVER_WRITTEN {
                    return Err(Error::Crypto);
                }
                siblings.resize(self.height as usize, NEVER_WRITTEN);
                break;
            };
            if ct.len() != self.bucket_len() || expected == NEVER_WRITTEN || digest(ct) != expected
            {
                return Err(Error::Crypto);
            }
            let index = bucket_index(self.height, leaf, level);
            let plain = self.aead.open(&Self::aad(index), ct)?;
            let (slots, children) = plain.split_at(Z * slot);
            if level < self.height {
                let (Some(left), Some(right)) =
                    (children.first_chunk::<32>(), children.last_chunk::<32>())
                else {
                    return Err(Error::Crypto);
                };
                // The path goes right where the leaf's bit below this
                // level is 1.
                let right_side = (leaf >> (self.height - level - 1)) & 1 == 1;
                let (on, off) = if right_side {
                    (right, left)
                } else {
                    (left, right)
                };
                expected = *on;
                siblings.push(*off);
            }
            for s in slots.chunks_exact(slot) {
                let (Some(head), Some(len)) = (s.first_chunk::<8>(), s.get(8..12)) else {
                    return Err(Error::Crypto);
                };
                let b = u64::from_le_bytes(*head);
                if b == DUMMY {
                    continue;
                }
                let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
                let data = s.get(SLOT_HEADER..SLOT_HEADER + len).ok_or(Error::Crypto)?;
                if b >= self.position.len() as u64 {
                    return Err(Error::Crypto);
                }
                blocks.push((b, data.to_vec()));
            }
        }
        Ok((blocks, siblings))
    }

    /// Evicts the stash onto the path to `leaf` and writes it back.
    fn write_back(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        io: &mut dyn PathIo,
        leaf: u32,
        siblings: Vec<[u8; 32]>,
    ) -> Result<()> {
        let h = self.height;
        // by_depth[d]: stash blocks whose own path leaves the accessed path
        // below level d (they may sit at level d or above).
        let mut by_depth: Vec<Vec<u64>> = vec![Vec::new(); h as usize + 1];
        for &b in self.stash.keys() {
            let pos = self
                .position
                .get(b as usize)
                .copied()
                .ok_or(Error::Crypto)?;
            let diff = pos ^ leaf;
            let depth = h - (32 - diff.leading_zeros());
            if let Some(v) = by_depth.get_mut(depth as usize) {
                v.push(b);
            }
        }
        let mut pool: Vec<u64> = Vec::new();
        let mut placed: Vec<Vec<u64>> = vec![Vec::new(); h as usize + 1];
        for level in (0..=h as usize).rev() {
            if let Some(v) = by_depth.get_mut(level) {
                pool.append(v);
            }
            if let Some(bucket) = placed.get_mut(level) {
                while bucket.len() < Z {
                    match pool.pop() {
                        Some(b) => bucket.push(b),
                        None => break,
                    }
                }
            }
        }
        self.pending = Some(Pending {
            leaf,
            placed,
            siblings,
        });
        self.flush(rng, io)
    }

    /// Seals and sends the pending write-back, then drops its blocks from
    /// the stash. A write-back that failed stays pending (its blocks stay
    /// in the stash, their positions unchanged) and is sent again, freshly
    /// sealed, before the next access: the server never keeps a path whose
    /// blocks the client has moved on from.
    fn flush(&mut self, rng: &mut dyn CryptoRngCore, io: &mut dyn PathIo) -> Result<()> {
        let Some(pending) = &self.pending else {
            return Ok(());
        };
        let (h, leaf) = (self.height, pending.leaf);
        let mut buckets = Vec::with_capacity(h as usize + 1);
        let mut plain = vec![0u8; self.plain_len()];
        // From the leaf up: each bucket records its path child's new digest
        // and its other child's digest from the checked read.
        let mut below = NEVER_WRITTEN;
        for level in (0..=h).rev() {
            let blocks = pending.placed.get(level as usize).ok_or(Error::Crypto)?;
            let entries = blocks
                .iter()
                .filter_map(|b| self.stash.get(b).map(|d| (*b, d.as_slice())));
            let children = if level < h {
                let off = *pending.siblings.get(level as usize).ok_or(Error::Crypto)?;
                if (leaf >> (h - level - 1)) & 1 == 1 {
                    [off, below]
                } else {
                    [below, off]
                }
            } else {
                [NEVER_WRITTEN; 2]
            };
            self.encode_bucket(&mut plain, entries, &children);
            let index = bucket_index(h, leaf, level);
            let ct = self
                .aead
                .seal(rng, &Self::aad(index), &plain)
                .map_err(|e| Error::InvalidArgument(e.to_string()))?;
            below = digest(&ct);
            buckets.push(ct);
        }
        buckets.reverse();
        io.write_path(h, leaf, buckets)?;
        self.root = below;
        if let Some(pending) = self.pending.take() {
            for b in pending.placed.iter().flatten() {
                self.stash.remove(b);
            }
        }
        self.max_stash = self.max_stash.max(self.stash.len());
        if self.stash.len() > STASH_LIMIT {
            return Err(Error::Protocol(format!(
                "Path ORAM stash overflow: {} blocks exceed the limit of {STASH_LIMIT}",
                self.stash.len()
            )));
        }
        Ok(())
    }

    /// Doubles the capacity by adding a level of leaves: leaf x becomes
    /// leaf 2x or 2x + 1 (a uniformly random bit) for every block. Bucket
    /// indices of the existing levels do not change and the path to 2x + b
    /// extends the path to x, so every block stays on its path and no
    /// bucket is moved; the new level is empty (absent on the server). The
    /// server sees the new height in later requests.
    pub fn grow(&mut self, rng: &mut dyn CryptoRngCore) -> Result<()> {
        if self.pending.is_some() {
            return Err(Error::Protocol(
                "a failed write-back is pending: access the ORAM again first".into(),
            ));
        }
        if self.height >= MAX_HEIGHT {
            return Err(Error::InvalidArgument(format!(
                "the ORAM cannot grow beyond height {MAX_HEIGHT}"
            )));
        }
        for p in &mut self.position {
            *p = (*p << 1) | (rng.next_u32() & 1);
        }
        self.height += 1;
        Ok(())
    }

    /// Loads blocks `0..n` (block `a` holds `data(a)`) into an empty ORAM
    /// in one pass and writes every bucket of the tree, empty ones
    /// included, `batch` buckets per request. Each block gets a uniformly
    /// random leaf and goes to the deepest bucket on its path with a free
    /// slot (the stash if none). The server sees the whole tree written
    /// once, level by level from the leaves up (a parent records its
    /// children's digests), each level in index order: nothing that depends
    /// on the data.
    pub fn initialize(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        io: &mut dyn PathIo,
        n: u64,
        batch: usize,
        mut data: impl FnMut(u64) -> Vec<u8>,
    ) -> Result<()> {
        if !self.position.is_empty() || !self.stash.is_empty() || self.pending.is_some() {
            return Err(Error::InvalidArgument(
                "Path ORAM initialisation needs an empty ORAM".into(),
            ));
        }
        if n > self.capacity() {
            return Err(Error::InvalidArgument(format!(
                "{n} blocks exceed the ORAM capacity {}",
                self.capacity()
            )));
        }
        let h = self.height;
        if h > 24 {
            return Err(Error::InvalidArgument(format!(
                "bulk initialisation builds the whole tree in memory: height {h} exceeds 24"
            )));
        }
        let total = (1usize << (h + 1)) - 1;
        let mut slots: Vec<Vec<(u64, Vec<u8>)>> = Vec::new();
        slots.resize_with(total, Vec::new);
        for a in 0..n {
            let block = data(a);
            if block.len() > self.block_size {
                return Err(Error::InvalidArgument(format!(
                    "{} bytes exceed the ORAM block size {}",
                    block.len(),
                    self.block_size
                )));
            }
            let leaf = self.random_leaf(rng);
            self.position.push(leaf);
            let mut home = None;
            for level in (0..=h).rev() {
                let i = bucket_index(h, leaf, level) as usize;
                if slots.get(i).is_some_and(|s| s.len() < Z) {
                    home = Some(i);
                    break;
                }
            }
            match home.and_then(|i| slots.get_mut(i)) {
                Some(s) => s.push((a, block)),
                None => {
                    self.stash.insert(a, block);
                }
            }
        }
        let mut plain = vec![0u8; self.plain_len()];
        let batch = batch.max(1);
        // Digests of the level below, by position within its level.
        let mut below: Vec<[u8; 32]> = Vec::new();
        for level in (0..=h).rev() {
            let start = (1usize << level) - 1;
            let width = 1usize << level;
            let mut digests = Vec::with_capacity(width);
            let mut first = start as u64;
            let mut out = Vec::with_capacity(batch.min(width));
            for p in 0..width {
                let index = start + p;
                let blocks = slots.get(index).ok_or(Error::Crypto)?;
                let children = if level < h {
                    [
                        *below.get(2 * p).ok_or(Error::Crypto)?,
                        *below.get(2 * p + 1).ok_or(Error::Crypto)?,
                    ]
                } else {
                    [NEVER_WRITTEN; 2]
                };
                self.encode_bucket(
                    &mut plain,
                    blocks.iter().map(|(a, d)| (*a, d.as_slice())),
                    &children,
                );
                let ct = self
                    .aead
                    .seal(rng, &Self::aad(index as u64), &plain)
                    .map_err(|e| Error::InvalidArgument(e.to_string()))?;
                digests.push(digest(&ct));
                out.push(ct);
                if out.len() >= batch {
                    io.put_buckets(h, first, std::mem::take(&mut out))?;
                    first = index as u64 + 1;
                }
            }
            if !out.is_empty() {
                io.put_buckets(h, first, out)?;
            }
            below = digests;
        }
        self.root = below.first().copied().ok_or(Error::Crypto)?;
        self.max_stash = self.max_stash.max(self.stash.len());
        Ok(())
    }

    /// Writes the plaintext of a bucket holding `blocks` (at most Z) and
    /// its children's digests (left, right).
    fn encode_bucket<'b>(
        &self,
        plain: &mut [u8],
        blocks: impl Iterator<Item = (u64, &'b [u8])>,
        children: &[[u8; 32]; 2],
    ) {
        plain.fill(0);
        let slot = SLOT_HEADER + self.block_size;
        let (slots, digests) = plain.split_at_mut(Z * slot);
        digests[..32].copy_from_slice(&children[0]);
        digests[32..].copy_from_slice(&children[1]);
        let mut blocks = blocks;
        for s in slots.chunks_exact_mut(slot) {
            match blocks.next() {
                Some((b, data)) => {
                    s[..8].copy_from_slice(&b.to_le_bytes());
                    s[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
                    s[SLOT_HEADER..SLOT_HEADER + data.len()].copy_from_slice(data);
                }
                None => s[..8].copy_from_slice(&DUMMY.to_le_bytes()),
            }
        }
    }

    /// The client state (key included) to persist.
    pub fn save(&self) -> Result<Vec<u8>> {
        let s = SavedOram {
            key: *self.key.as_bytes(),
            height: self.height,
            block_size: u32::try_from(self.block_size)
                .map_err(|_| Error::InvalidArgument("block size too large".into()))?,
            position: self.position.clone(),
            stash: self.stash.iter().map(|(b, d)| (*b, d.clone())).collect(),
            pending: self.pending.clone(),
            max_stash: self.max_stash as u64,
            accesses: self.accesses,
            root: self.root,
        };
        sesame_core::wire::encode(&s)
    }

    /// A client from [`PathOram::save`]'s bytes.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let s: SavedOram = sesame_core::wire::decode(bytes)?;
        let mut oram = Self::with_key(Key::from_bytes(s.key), s.height, s.block_size as usize)
            .map_err(|e| Error::Malformed(format!("Path ORAM state: {e}")))?;
        let leaves = oram.capacity();
        if s.position.len() as u64 > leaves || s.position.iter().any(|&p| u64::from(p) >= leaves) {
            return Err(Error::Malformed(
                "Path ORAM state with an invalid position map".into(),
            ));
        }
        oram.position = s.position.clone();
        for (b, d) in &s.stash {
            if *b >= oram.position.len() as u64 || d.len() > oram.block_size {
                return Err(Error::Malformed(
                    "Path ORAM state with an invalid stash".into(),
                ));
            }
            oram.stash.insert(*b, d.clone());
        }
        if let Some(p) = &s.pending {
            let valid = u64::from(p.leaf) < leaves
                && p.placed.len() == oram.height as usize + 1
                && p.siblings.len() == oram.height as usize
                && p.placed
                    .iter()
                    .all(|v| v.len() <= Z && v.iter().all(|b| oram.stash.contains_key(b)));
            if !valid {
                return Err(Error::Malformed(
                    "Path ORAM state with an invalid pending write-back".into(),
                ));
            }
        }
        oram.pending = s.pending.clone();
        oram.max_stash = usize::try_from(s.max_stash).unwrap_or(usize::MAX);
        oram.accesses = s.accesses;
        oram.root = s.root;
        Ok(oram)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use sesame_store::MemoryStore;
    use std::collections::HashMap;

    fn server() -> PathOramServer {
        PathOramServer::new(Arc::new(MemoryStore::new()))
    }

    #[test]
    fn random_accesses_match_a_map() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        let mut s = server();
        let mut oram = PathOram::new(&mut rng, 6, 40).unwrap();
        let mut oracle: HashMap<u64, Vec<u8>> = HashMap::new();
        for i in 0..2000u32 {
            let a = rng.gen_range(0..64u64);
            match rng.gen_range(0..5) {
                0 | 1 => {
                    let len = rng.gen_range(0..=40);
                    let data: Vec<u8> = (0..len).map(|j| (i as u8) ^ j).collect();
                    let old = oram.write(&mut rng, &mut s, a, data.clone()).unwrap();
                    assert_eq!(old, oracle.insert(a, data));
                }
                2 => {
                    let old = oram.access(&mut rng, &mut s, a, Op::Remove).unwrap();
                    assert_eq!(old, oracle.remove(&a));
                }
                _ => assert_eq!(
                    oram.read(&mut rng, &mut s, a).unwrap(),
                    oracle.get(&a).cloned()
                ),
            }
        }
        assert!(oram.max_stash() < 40, "stash grew to {}", oram.max_stash());
    }

    #[test]
    fn bytes_encode_like_a_vec_and_refuse_garbage() {
        for v in [
            vec![],
            vec![7u8; 3],
            (0..=255u8).cycle().take(5000).collect(),
        ] {
            let a = sesame_core::wire::encode(&Bytes(v.clone())).unwrap();
            assert_eq!(a, sesame_core::wire::encode(&v).unwrap());
            assert_eq!(sesame_core::wire::decode::<Bytes>(&a).unwrap(), Bytes(v));
        }
        assert!(sesame_core::wire::decode::<Bytes>(&[1, 5, 1]).is_err());
        assert!(sesame_core::wire::decode::<Request>(&[1, 9]).is_err());
    }

    #[test]
    fn growing_keeps_every_block() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(70);
        let mut s = server();
        let mut oram = PathOram::new(&mut rng, 2, 8).unwrap();
        let mut oracle: HashMap<u64, Vec<u8>> = HashMap::new();
        for round in 0..6u32 {
            let cap = oram.capacity();
            for _ in 0..300 {
                let a = rng.gen_range(0..cap);
                if rng.gen_bool(0.5) {
                    let d = vec![round as u8; rng.gen_range(0..=8)];
                    assert_eq!(
                        oram.write(&mut rng, &mut s, a, d.clone()).unwrap(),
                        oracle.insert(a, d)
                    );
                } else {
                    assert_eq!(
                        oram.read(&mut rng, &mut s, a).unwrap(),
                        oracle.get(&a).cloned()
                    );
                }
            }
            oram.grow(&mut rng).unwrap();
            assert_eq!(oram.capacity(), cap * 2);
        }
        for (a, d) in &oracle {
            assert_eq!(oram.read(&mut rng, &mut s, *a).unwrap().as_ref(), Some(d));
        }
        let mut top = PathOram::new(&mut rng, MAX_HEIGHT, 1).unwrap();
        assert!(top.grow(&mut rng).is_err());
    }

    /// Fails some requests: 1 = read refused, 2 = write refused, 3 = write
    /// applied but its answer lost.
    struct Flaky<'a>(&'a mut PathOramServer, u8);

    impl PathIo for Flaky<'_> {
        fn read_path(&mut self, height: u32, leaf: u32) -> Result<Vec<Option<Vec<u8>>>> {
            if self.1 == 1 {
                return Err(Error::Transport("read lost".into()));
            }
            self.0.read_path(height, leaf)
        }
        fn write_path(&mut self, height: u32, leaf: u32, buckets: Vec<Vec<u8>>) -> Result<()> {
            match self.1 {
                2 => Err(Error::Transport("write lost".into())),
                3 => {
                    self.0.write_path(height, leaf, buckets)?;
                    Err(Error::Transport("answer lost".into()))
                }
                _ => self.0.write_path(height, leaf, buckets),
            }
        }
        fn put_buckets(&mut self, height: u32, first: u64, buckets: Vec<Vec<u8>>) -> Result<()> {
            self.0.put_buckets(height, first, buckets)
        }
    }

    #[test]
    fn failed_requests_lose_nothing() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(99);
        let mut s = server();
        let mut oram = PathOram::new(&mut rng, 5, 8).unwrap();
        let mut oracle: HashMap<u64, Vec<u8>> = HashMap::new();
        for i in 0..3000u32 {
            let a = rng.gen_range(0..32u64);
            let mode = if rng.gen_bool(0.3) {
                rng.gen_range(1..=3)
            } else {
                0
            };
            // An access applies unless it fails before reading its path:
            // a refused read, or a failed retry of a pending write-back.
            let applies = mode == 0 || (mode != 1 && oram.pending.is_none());
            let mut io = Flaky(&mut s, mode);
            if rng.gen_bool(0.5) {
                let d = i.to_le_bytes().to_vec();
                let r = oram.write(&mut rng, &mut io, a, d.clone());
                assert_eq!(r.is_err(), mode != 0);
                if applies {
                    let old = oracle.insert(a, d);
                    if let Ok(got) = r {
                        assert_eq!(got, old);
                    }
                }
            } else {
                let r = oram.read(&mut rng, &mut io, a);
                assert_eq!(r.is_err(), mode != 0);
                if let Ok(got) = r {
                    assert_eq!(got, oracle.get(&a).cloned());
                }
            }
            if i % 97 == 0 {
                oram = PathOram::restore(&oram.save().unwrap()).unwrap();
            }
            if i % 500 == 499 && oram.grow(&mut rng).is_err() {
                assert!(oram.pending.is_some());
            }
        }
        for (a, d) in &oracle {
            assert_eq!(oram.read(&mut rng, &mut s, *a).unwrap().as_ref(), Some(d));
        }
        assert!(oram.max_stash() < 40);
    }

    #[test]
    fn bad_arguments_are_errors() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        let mut s = server();
        assert!(PathOram::new(&mut rng, 0, 10).is_err());
        assert!(PathOram::new(&mut rng, 31, 10).is_err());
        let mut oram = PathOram::new(&mut rng, 3, 10).unwrap();
        assert!(oram.read(&mut rng, &mut s, 8).is_err());
        assert!(oram.write(&mut rng, &mut s, 1, vec![0; 11]).is_err());
        assert!(s.read(3, 8).is_err());
        assert!(s.read(31, 0).is_err());
        assert!(s.write(3, 1, vec![vec![]; 3]).is_err());
        assert_eq!(PathOram::height_for(1), 1);
        assert_eq!(PathOram::height_for(1000), 10);
        assert_eq!(PathOram::height_for(1024), 10);
        let b = PathOram::block_size_for_bucket(4096);
        assert!(PathOram::bucket_len_for(b) <= 4096);
        assert!(PathOram::bucket_len_for(b + 1) > 4096);
        assert_eq!(PathOram::block_size_for_bucket(10), 0);
    }
}
