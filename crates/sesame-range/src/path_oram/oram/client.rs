//! The client half of Path ORAM: the position map, the stash, accesses,
//! write-backs, growth, bulk loading, and the saved state.

use super::*;

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
    pub(super) pending: Option<Pending>,
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
pub(super) struct Pending {
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
