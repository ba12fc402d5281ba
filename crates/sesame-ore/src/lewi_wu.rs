//! Lewi-Wu block order-revealing encryption with left and right
//! ciphertexts (Lewi, Wu, CCS 2016), with seed 004's PRP-table
//! improvement.
//!
//! A plaintext of `n` bits is cut into `L = ceil(n / d)` blocks of `d`
//! bits (most significant first). For block `i` with the bits above it
//! `p` (the prefix) and value `b`:
//!
//! - a permutation `pi_p` of `0..2^d` is drawn by a Knuth shuffle whose
//!   randomness is `F(k2, (i, p, counter))`: one table per block, so all
//!   `2^d` points cost one shuffle (seed 004 §3.3) instead of one PRP call
//!   each;
//! - left half: `(F(k1, (i, p, pi_p(b))), pi_p(b))`;
//! - right half, under a fresh nonce `r`: for every slot `j`,
//!   `z_j = CMP(pi_p^-1(j), b) + H(F(k1, (i, p, j)), r) mod 3`.
//!
//! Comparing a left half of `x` with a right half of `y` reads, block by
//! block, `z_{h_i} - H(k_i, r) mod 3 = CMP(x_i, y_i)` until it is not 0.
//!
//! `F` is AES-128 (one pipelined batch of `2^d` slots per block); `H(k, r)`
//! is AES-128 keyed by the nonce in Matyas-Meyer-Oseas form,
//! `AES_r(k) xor k`, reduced mod 3: one key schedule per right ciphertext
//! and per comparison, then pipelined AES. See `docs/schemes/lewi_wu.md`.

use core::cmp::Ordering;

use aes::cipher::{BlockEncrypt, KeyInit};
use aes::{Aes128Enc, Block};
use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{BackwardPrivacy, Error, QueryKind, Result, SchemeDescriptor, SchemeKind};
use sesame_crypto::counter::{self, Primitive};
use sesame_crypto::Key;
use zeroize::Zeroizing;

use crate::api::{check_bits, check_plaintext, LeftRight, OreScheme};
use crate::saved;

/// Descriptor of Lewi-Wu.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "lewi-wu",
    title: "Lewi-Wu block order-revealing encryption (left/right)",
    citation: "K. Lewi, D. J. Wu. Order-Revealing Encryption: New Constructions, \
               Applications, and Lower Bounds. CCS 2016",
    kind: SchemeKind::Ore,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Range],
    leakage: "Right ciphertexts alone: nothing (semantically secure). Comparing a left with \
              a right: their order and the index of the first differing d-bit block. A left \
              ciphertext is deterministic, so lefts reveal equality among themselves.",
    doc: "docs/schemes/lewi_wu.md",
};

/// Largest block width: the permutation tables hold `u16` entries.
pub const MAX_BLOCK_BITS: u32 = 16;

/// Plaintext width and block width.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LewiWuParams {
    /// Plaintexts are `0..2^bits`, `1 <= bits <= 64`.
    pub bits: u32,
    /// Block width `d`, `1 <= d <= 16`.
    pub block_bits: u32,
}

impl Default for LewiWuParams {
    /// Seed 004's Table 4 setting: 32-bit plaintexts, 2-bit blocks.
    fn default() -> Self {
        LewiWuParams {
            bits: 32,
            block_bits: 2,
        }
    }
}

impl LewiWuParams {
    fn check(self) -> Result<Self> {
        check_bits(self.bits)?;
        if !(1..=MAX_BLOCK_BITS).contains(&self.block_bits) {
            return Err(Error::InvalidArgument(format!(
                "Lewi-Wu block width {} is not in 1..={MAX_BLOCK_BITS}",
                self.block_bits
            )));
        }
        Ok(self)
    }

    /// Number of blocks `ceil(bits / block_bits)`.
    pub fn blocks(&self) -> u32 {
        self.bits.div_ceil(self.block_bits)
    }

    /// Slots per block, `2^block_bits`.
    pub fn slots(&self) -> usize {
        1 << self.block_bits
    }
}

/// One block of a left ciphertext.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftBlock {
    /// `F(k1, (i, prefix, slot))`.
    pub key: [u8; 16],
    /// The permuted block value `pi(b)`.
    pub slot: u16,
}

/// A left ciphertext: one [`LeftBlock`] per block.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LewiWuLeft {
    /// The blocks, most significant first.
    pub blocks: Vec<LeftBlock>,
}

/// A right ciphertext: the nonce and `L * 2^d` trits, four per byte (slot
/// `j` of block `i` is trit `i * 2^d + j`, low bits first).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LewiWuRight {
    /// The nonce `r`.
    pub nonce: [u8; 16],
    /// The packed trits (written in one piece: `wire::bytes`).
    #[serde(with = "sesame_core::wire::bytes")]
    pub trits: Vec<u8>,
}

impl LewiWuRight {
    fn trit(&self, index: usize) -> Option<u8> {
        self.trits
            .get(index / 4)
            .map(|b| (b >> (2 * (index % 4))) & 3)
    }
}

/// A full Lewi-Wu ciphertext: both halves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LewiWuCiphertext {
    /// The left half.
    pub left: LewiWuLeft,
    /// The right half.
    pub right: LewiWuRight,
}

/// Lewi-Wu with a secret key.
pub struct LewiWu {
    params: LewiWuParams,
    master: Key<32>,
    /// `F(k1, .)`: slot keys (AES-128; the key schedule is wiped on drop).
    k1: Aes128Enc,
    /// `F(k2, .)`: randomness of the per-prefix permutations.
    k2: Aes128Enc,
}

redacted_key_debug!(LewiWu { params });

/// Buffers reused across calls on one thread, so that encryption does not
/// allocate per block. They hold key-dependent values (permutations, slot
/// keys) and are wiped after each use.
#[derive(Default)]
struct Scratch {
    table: Vec<u16>,
    words: Vec<u32>,
    stream: Vec<Block>,
    slots: Vec<Block>,
    hashed: Vec<Block>,
}

impl Scratch {
    /// Overwrites every buffer with zeros. Plain stores, not `zeroize`'s
    /// byte-wise volatile ones (which cost microseconds per encryption):
    /// the buffers stay reachable from the thread-local, so the stores
    /// cannot be elided, and the fence keeps them from being reordered
    /// past the end of the call.
    fn wipe(&mut self) {
        self.table.fill(0);
        self.words.fill(0);
        for b in self
            .stream
            .iter_mut()
            .chain(self.slots.iter_mut())
            .chain(self.hashed.iter_mut())
        {
            *b = Block::default();
        }
        core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
    }
}

std::thread_local! {
    static SCRATCH: core::cell::RefCell<Scratch> = core::cell::RefCell::new(Scratch::default());
}

/// Runs `f` with this thread's scratch buffers (fresh ones if they are
/// already in use), wiping them afterwards.
fn with_scratch<T>(f: impl FnOnce(&mut Scratch) -> T) -> T {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut s) => {
            let out = f(&mut s);
            s.wipe();
            out
        }
        Err(_) => {
            let mut s = Scratch::default();
            let out = f(&mut s);
            s.wipe();
            out
        }
    })
}

const TAG_SLOT: u8 = 0x01;
const TAG_SHUFFLE: u8 = 0x02;

/// PRF input: `tag || block || d || j (4 bytes, little-endian) || 0 ||
/// prefix (8 bytes, big-endian)`, where `j` is a slot or a counter.
#[inline]
fn prf_input(tag: u8, block: u32, d: u32, j: u32, prefix: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0] = tag;
    b[1] = block as u8;
    b[2] = d as u8;
    b[3..7].copy_from_slice(&j.to_le_bytes());
    b[8..].copy_from_slice(&prefix.to_be_bytes());
    b
}

/// The PRF inputs for `j = first, first + 1, ...` into `out`: only the
/// `j` field differs from `prf_input(tag, block, d, 0, prefix)`.
#[inline]
fn prf_inputs(tag: u8, block: u32, d: u32, first: u32, prefix: u64, out: &mut [Block]) {
    let base = prf_input(tag, block, d, 0, prefix);
    let mut lo = [0u8; 8];
    lo.copy_from_slice(&base[..8]);
    let lo = u64::from_le_bytes(lo);
    let mut hi = [0u8; 8];
    hi.copy_from_slice(&base[8..]);
    for (k, o) in out.iter_mut().enumerate() {
        let j = u64::from(first) + k as u64;
        let word = lo | (j << 24);
        o[..8].copy_from_slice(&word.to_le_bytes());
        o[8..].copy_from_slice(&hi);
    }
}

/// `AES_k` on every block of `blocks`, pipelined; counts one Prf call per
/// block (nested when called inside another primitive).
#[inline]
fn aes_batch(cipher: &Aes128Enc, blocks: &mut [Block]) {
    counter::record(Primitive::Prf, blocks.len() as u64);
    cipher.encrypt_blocks(blocks);
}

/// The first eight bytes of a block as a little-endian word.
#[inline]
fn word(block: &Block) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&block[..8]);
    u64::from_le_bytes(w)
}

/// `AES_r(k)` for every key `k` of `keys` into `out` (block to block),
/// the first half of `H(k, r) = (AES_r(k) xor k) mod 3`; counts one Hash
/// call per key, the AES blocks nested.
fn hash_batch(h: &Aes128Enc, keys: &[Block], out: &mut [Block]) {
    if keys.is_empty() {
        return;
    }
    counter::record(Primitive::Hash, keys.len() as u64 - 1);
    let _hash = counter::enter(Primitive::Hash);
    counter::record(Primitive::Prf, keys.len() as u64);
    // Same lengths by construction; a mismatch would leave `out` as is.
    let _ = h.encrypt_blocks_b2b(keys, out);
}

/// The public comparison of Lewi-Wu ciphertexts: a left half against a
/// right half, with the hash keyed by the right half's nonce. It needs only
/// the parameters.
#[derive(Clone, Copy, Debug)]
pub struct LewiWuComparator {
    params: LewiWuParams,
}

impl LewiWuComparator {
    /// The comparison for `params`.
    pub fn new(params: LewiWuParams) -> Result<Self> {
        Ok(LewiWuComparator {
            params: params.check()?,
        })
    }

    /// The order of the plaintext of `left` relative to that of `right`.
    pub fn compare_halves(&self, left: &LewiWuLeft, right: &LewiWuRight) -> Result<Ordering> {
        let blocks = self.params.blocks() as usize;
        let n = self.params.slots();
        if left.blocks.len() != blocks || right.trits.len() != (blocks * n).div_ceil(4) {
            return Err(Error::Malformed(
                "Lewi-Wu ciphertext of other parameters".into(),
            ));
        }
        let h = Aes128Enc::new(&right.nonce.into());
        for (i, lb) in left.blocks.iter().enumerate() {
            let slot = usize::from(lb.slot);
            if slot >= n {
                return Err(Error::Malformed("Lewi-Wu slot out of range".into()));
            }
            let z = right
                .trit(i * n + slot)
                .ok_or_else(|| Error::Malformed("Lewi-Wu right ciphertext too short".into()))?;
            match (z + 3 - hash_mod3(&h, &lb.key)) % 3 {
                0 => continue,
                1 => return Ok(Ordering::Greater),
                _ => return Ok(Ordering::Less),
            }
        }
        Ok(Ordering::Equal)
    }
}

impl crate::api::Comparator for LewiWuComparator {
    type Ciphertext = LewiWuCiphertext;
    type Left = LewiWuLeft;
    type Right = LewiWuRight;

    fn left(c: &LewiWuCiphertext) -> &LewiWuLeft {
        &c.left
    }
    fn right(c: &LewiWuCiphertext) -> LewiWuRight {
        c.right.clone()
    }
    fn compare(&self, left: &LewiWuLeft, right: &LewiWuRight) -> Result<Ordering> {
        self.compare_halves(left, right)
    }
}

/// One `H(k, r)`; one Hash call.
fn hash_mod3(h: &Aes128Enc, key: &[u8; 16]) -> u8 {
    let _hash = counter::enter(Primitive::Hash);
    counter::record(Primitive::Prf, 1);
    let mut o = Block::clone_from_slice(key);
    h.encrypt_block(&mut o);
    let k = Block::clone_from_slice(key);
    ((word(&o) ^ word(&k)) % 3) as u8
}

/// Lemire's draw of `word` into `0..bound`: `(value, maybe_rejected)`,
/// where `maybe_rejected` (the low half below `bound`) must be settled by
/// the exact test `low >= 2^32 mod bound`.
#[inline]
fn lemire(word: u32, bound: u32) -> (usize, bool) {
    let m = u64::from(word) * u64::from(bound);
    ((m >> 32) as usize, (m as u32) < bound)
}

/// The shuffle when no draw needs the exact rejection test (all but about
/// `2^-17` of the tables for 8-bit blocks): the draws are computed first,
/// independently, then applied. Returns `false`, leaving `table` to be
/// redone by [`shuffle_from`], when some draw might be rejected.
fn shuffle_fast(table: &mut [u16], words: &[u32]) -> bool {
    let n = table.len();
    if words.len() + 1 < n {
        return false;
    }
    let mut draws = [0u16; 256];
    if n > draws.len() {
        return false;
    }
    let mut flagged = false;
    for (i, (d, &w)) in draws[1..n].iter_mut().zip(words).enumerate() {
        let (r, maybe) = lemire(w, i as u32 + 2);
        *d = r as u16;
        flagged |= maybe;
    }
    if flagged {
        return false;
    }
    table[0] = 0;
    for i in 1..n {
        let r = usize::from(draws[i]);
        let moved = table[r];
        table[i] = moved;
        table[r] = i as u16;
    }
    true
}

/// The inside-out Knuth shuffle from position `*next` on (position 0 is
/// 0), with the words from `*w` on: position `i` draws `r` uniform in
/// `0..=i` (rejecting as Lemire prescribes), then `table[i] = table[r];
/// table[r] = i`. Returns `false` if the words ran out first (then
/// `*next`, `*w` say where to resume).
fn shuffle_from(table: &mut [u16], words: &[u32], next: &mut usize, w: &mut usize) -> bool {
    if let Some(t0) = table.first_mut() {
        if *next == 1 {
            *t0 = 0;
        }
    }
    while *next < table.len() {
        let i = *next;
        let bound = i as u32 + 1;
        let r = loop {
            let Some(&word) = words.get(*w) else {
                return false;
            };
            *w += 1;
            let (r, maybe) = lemire(word, bound);
            let low = word.wrapping_mul(bound);
            if !maybe || low >= bound.wrapping_neg() % bound {
                break r;
            }
        };
        let moved = table[r];
        table[i] = moved;
        table[r] = i as u16;
        *next += 1;
    }
    true
}

/// `CMP(a, b) mod 3`: 0 if equal, 1 if `a > b`, 2 if `a < b`.
#[inline]
fn cmp3(a: u16, b: u16) -> u8 {
    u8::from(a > b) + 2 * u8::from(a < b)
}

impl LewiWu {
    /// Lewi-Wu keyed by `master`.
    pub fn new(master: Key<32>, params: LewiWuParams) -> Result<Self> {
        let params = params.check()?;
        let label = format!(
            "sesame-ore/lewi-wu/v2/bits={}/block-bits={}",
            params.bits, params.block_bits
        );
        let k1: Key<16> = master.derive(&format!("{label}/k1"));
        let k2: Key<16> = master.derive(&format!("{label}/k2"));
        let k1 = Aes128Enc::new(k1.as_bytes().into());
        let k2 = Aes128Enc::new(k2.as_bytes().into());
        Ok(LewiWu {
            params,
            master,
            k1,
            k2,
        })
    }

    /// Lewi-Wu with a fresh key.
    pub fn generate<R: CryptoRngCore + ?Sized>(rng: &mut R, params: LewiWuParams) -> Result<Self> {
        Self::new(Key::generate(rng), params)
    }

    /// The parameters.
    pub fn params(&self) -> LewiWuParams {
        self.params
    }

    /// Block `i` of `x` and the bits above it.
    #[inline]
    fn block(&self, x: u64, i: u32) -> (u16, u64) {
        let d = self.params.block_bits;
        let below = d * (self.params.blocks() - 1 - i);
        let value = ((x >> below) & ((1u64 << d) - 1)) as u16;
        let above = below + d;
        let prefix = if above >= 64 { 0 } else { x >> above };
        (value, prefix)
    }

    /// The permutation of block `i` under `prefix`, as `table[j] = pi^-1(j)`,
    /// by a Knuth shuffle (Durstenfeld's inside-out form) driven by 32-bit
    /// words of `F(k2, (i, prefix, counter))`, each drawn with Lemire's
    /// multiply-and-reject; one counted Prp call (its AES blocks nested).
    /// `words` and `draws` are scratch.
    fn permutation(&self, i: u32, prefix: u64, scratch: &mut Scratch) {
        let Scratch {
            table,
            words,
            stream,
            ..
        } = scratch;
        let _prp = counter::enter(Primitive::Prp);
        let n = self.params.slots();
        table.clear();
        table.resize(n, 0);
        // n - 1 draws of one word each, four words per AES block, and a
        // block of slack for rejections (below 2^-16 per table for d <= 8).
        let mut blocks = 0u32;
        words.clear();
        self.shuffle_words(
            stream,
            i,
            prefix,
            &mut blocks,
            (n - 1).div_ceil(4) as u32 + 1,
            words,
        );
        if shuffle_fast(table, words) {
            return;
        }
        let (mut next, mut w) = (1usize, 0usize);
        while !shuffle_from(table, words, &mut next, &mut w) {
            self.shuffle_words(stream, i, prefix, &mut blocks, 8, words);
        }
    }

    /// Appends the 32-bit words of `count` more AES blocks of the shuffle
    /// stream of block `i` under `prefix` (`stream` is scratch).
    fn shuffle_words(
        &self,
        stream: &mut Vec<Block>,
        i: u32,
        prefix: u64,
        done: &mut u32,
        count: u32,
        words: &mut Vec<u32>,
    ) {
        stream.clear();
        stream.resize(count as usize, Block::default());
        prf_inputs(
            TAG_SHUFFLE,
            i,
            self.params.block_bits,
            *done,
            prefix,
            stream,
        );
        *done += count;
        aes_batch(&self.k2, stream);
        let old = words.len();
        words.resize(old + 4 * stream.len(), 0);
        for (dst, src) in words[old..].chunks_exact_mut(4).zip(stream.iter()) {
            for (d, quad) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *d = u32::from_le_bytes([quad[0], quad[1], quad[2], quad[3]]);
            }
        }
    }

    /// Encrypts both halves of `x`.
    pub fn encrypt_full<R: CryptoRngCore + ?Sized>(
        &self,
        rng: &mut R,
        x: u64,
    ) -> Result<LewiWuCiphertext> {
        check_plaintext(x, self.params.bits)?;
        let mut nonce = Zeroizing::new([0u8; 16]);
        rng.fill_bytes(nonce.as_mut());
        with_scratch(|sc| self.encrypt_with(x, &nonce, sc))
    }

    /// Encrypts both halves of `x` with the right half under `nonce`
    /// instead of a fresh random one. The security argument needs `nonce`
    /// unpredictable to the server and never repeated under this key: for
    /// example the image, under a pseudorandom permutation of an
    /// independent key, of an input that is never enciphered twice (the
    /// B+ tree's records in the nonce, `sesame-range`'s `seal=nonce`).
    /// A repeated nonce reveals how the two plaintexts' blocks compare
    /// beyond their order.
    pub fn encrypt_full_with_nonce(&self, x: u64, nonce: &[u8; 16]) -> Result<LewiWuCiphertext> {
        check_plaintext(x, self.params.bits)?;
        with_scratch(|sc| self.encrypt_with(x, nonce, sc))
    }

    fn encrypt_with(&self, x: u64, nonce: &[u8; 16], sc: &mut Scratch) -> Result<LewiWuCiphertext> {
        let blocks = self.params.blocks();
        let n = self.params.slots();
        let d = self.params.block_bits;
        let h = Aes128Enc::new(nonce.into());
        let mut left = Vec::with_capacity(blocks as usize);
        let mut trits = vec![0u8; (blocks as usize * n).div_ceil(4)];
        sc.slots.resize(n, Block::default());
        sc.hashed.resize(n, Block::default());
        for i in 0..blocks {
            let (b, prefix) = self.block(x, i);
            self.permutation(i, prefix, sc);
            let Scratch {
                table,
                slots,
                hashed,
                ..
            } = &mut *sc;
            prf_inputs(TAG_SLOT, i, d, 0, prefix, slots);
            aes_batch(&self.k1, slots);
            let pos = table
                .iter()
                .position(|&v| v == b)
                .ok_or_else(|| Error::Unsupported("permutation table lost a point".into()))?;
            left.push(LeftBlock {
                key: slots[pos].into(),
                slot: pos as u16,
            });
            hash_batch(&h, slots, hashed);
            // z_j = CMP(pi^-1(j), b) + H(k_j, r) mod 3.
            let trit = |v: u16, k: &Block, e: &Block| {
                let t = cmp3(v, b) + ((word(e) ^ word(k)) % 3) as u8;
                if t >= 3 {
                    t - 3
                } else {
                    t
                }
            };
            if n & 3 == 0 {
                // Whole bytes per block: four trits per byte, one store.
                let out = &mut trits[i as usize * n / 4..(i as usize + 1) * n / 4];
                for (((o, v), k), e) in out
                    .iter_mut()
                    .zip(table.chunks_exact(4))
                    .zip(slots.chunks_exact(4))
                    .zip(hashed.chunks_exact(4))
                {
                    *o = trit(v[0], &k[0], &e[0])
                        | (trit(v[1], &k[1], &e[1]) << 2)
                        | (trit(v[2], &k[2], &e[2]) << 4)
                        | (trit(v[3], &k[3], &e[3]) << 6);
                }
            } else {
                let base = i as usize * n;
                for (j, ((&v, k), e)) in table
                    .iter()
                    .zip(slots.iter())
                    .zip(hashed.iter())
                    .enumerate()
                {
                    let idx = base + j;
                    trits[idx / 4] |= trit(v, k, e) << (2 * (idx % 4));
                }
            }
        }
        Ok(LewiWuCiphertext {
            left: LewiWuLeft { blocks: left },
            right: LewiWuRight {
                nonce: *nonce,
                trits,
            },
        })
    }

    /// `F(k1, (i, prefix, slot))`; one Prf call.
    fn slot_key(&self, i: u32, slot: u32, prefix: u64) -> [u8; 16] {
        let mut b = Block::from(prf_input(TAG_SLOT, i, self.params.block_bits, slot, prefix));
        aes_batch(&self.k1, core::slice::from_mut(&mut b));
        b.into()
    }

    /// The left half of `x` alone (deterministic).
    pub fn encrypt_left_only(&self, x: u64) -> Result<LewiWuLeft> {
        check_plaintext(x, self.params.bits)?;
        with_scratch(|sc| {
            let mut left = Vec::with_capacity(self.params.blocks() as usize);
            for i in 0..self.params.blocks() {
                let (b, prefix) = self.block(x, i);
                self.permutation(i, prefix, sc);
                let pos =
                    sc.table.iter().position(|&v| v == b).ok_or_else(|| {
                        Error::Unsupported("permutation table lost a point".into())
                    })?;
                left.push(LeftBlock {
                    key: self.slot_key(i, pos as u32, prefix),
                    slot: pos as u16,
                });
            }
            Ok(LewiWuLeft { blocks: left })
        })
    }

    /// The public comparison of this scheme's ciphertexts.
    pub fn comparator(&self) -> LewiWuComparator {
        LewiWuComparator {
            params: self.params,
        }
    }

    /// Compares a left half with a right half, without the key.
    pub fn compare_halves(&self, left: &LewiWuLeft, right: &LewiWuRight) -> Result<Ordering> {
        self.comparator().compare_halves(left, right)
    }

    /// The plaintext of a left half: each block's permutation is rebuilt
    /// from the bits above it and inverted; the slot keys are checked.
    pub fn decrypt_left(&self, left: &LewiWuLeft) -> Result<u64> {
        let d = self.params.block_bits;
        if left.blocks.len() != self.params.blocks() as usize {
            return Err(Error::Crypto);
        }
        let x = with_scratch(|sc| {
            let mut x: u64 = 0;
            for (i, lb) in left.blocks.iter().enumerate() {
                let i = i as u32;
                self.permutation(i, x, sc);
                let b = *sc.table.get(usize::from(lb.slot)).ok_or(Error::Crypto)?;
                let key = self.slot_key(i, u32::from(lb.slot), x);
                if key != lb.key {
                    return Err(Error::Crypto);
                }
                x = (x << d) | u64::from(b);
            }
            Ok(x)
        })?;
        check_plaintext(x, self.params.bits).map_err(|_| Error::Crypto)?;
        Ok(x)
    }
}

impl OreScheme for LewiWu {
    type Ciphertext = LewiWuCiphertext;

    descriptor_and_bits!(params.bits);

    fn encrypt<R: CryptoRngCore + ?Sized>(
        &mut self,
        rng: &mut R,
        x: u64,
    ) -> Result<LewiWuCiphertext> {
        self.encrypt_full(rng, x)
    }

    fn compare(&self, a: &LewiWuCiphertext, b: &LewiWuCiphertext) -> Result<Ordering> {
        self.compare_halves(&a.left, &b.right)
    }

    fn can_decrypt(&self) -> bool {
        true
    }

    fn decrypt(&self, c: &LewiWuCiphertext) -> Result<u64> {
        self.decrypt_left(&c.left)
    }

    fn ciphertext_bits(&self, _c: &LewiWuCiphertext) -> u64 {
        let blocks = u64::from(self.params.blocks());
        let n = self.params.slots() as u64;
        let left = blocks * (128 + u64::from(self.params.block_bits));
        let right = 128 + 2 * blocks * n;
        left + right
    }

    fn save(&self) -> Result<Zeroizing<Vec<u8>>> {
        saved::save(DESCRIPTOR.name, self.params, &self.master, saved::NoState)
    }

    fn restore(bytes: &[u8]) -> Result<Self> {
        let s: saved::Saved<LewiWuParams, saved::NoState> = saved::restore(DESCRIPTOR.name, bytes)?;
        LewiWu::new(s.key.key(), s.params)
    }
}

impl LeftRight for LewiWu {
    type Left = LewiWuLeft;
    type Right = LewiWuRight;

    fn encrypt_left<R: CryptoRngCore + ?Sized>(&self, _rng: &mut R, x: u64) -> Result<LewiWuLeft> {
        self.encrypt_left_only(x)
    }

    fn left(c: &LewiWuCiphertext) -> &LewiWuLeft {
        &c.left
    }

    fn right(c: &LewiWuCiphertext) -> &LewiWuRight {
        &c.right
    }

    fn compare_left_right(&self, left: &LewiWuLeft, right: &LewiWuRight) -> Result<Ordering> {
        self.compare_halves(left, right)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;

    fn scheme(bits: u32, block_bits: u32) -> LewiWu {
        LewiWu::new(Key::from_bytes([5; 32]), LewiWuParams { bits, block_bits }).unwrap()
    }

    /// A right half under a given nonce carries that nonce, compares as
    /// one under a random nonce does, and differs from the right half of
    /// the same value under another nonce.
    #[test]
    fn a_given_nonce_is_the_right_halfs_and_orders_the_same() {
        let s = scheme(16, 2);
        let (a, b) = ([7u8; 16], [8u8; 16]);
        for (x, y) in [(5u64, 9u64), (9, 5), (300, 300), (0, 65535)] {
            let c = s.encrypt_full_with_nonce(y, &a).unwrap();
            assert_eq!(c.right.nonce, a);
            let left = s.encrypt_left_only(x).unwrap();
            assert_eq!(s.compare_halves(&left, &c.right).unwrap(), x.cmp(&y));
            let other = s.encrypt_full_with_nonce(y, &b).unwrap();
            assert_ne!(other.right.trits, c.right.trits);
        }
        assert!(s.encrypt_full_with_nonce(1 << 16, &a).is_err());
    }

    #[test]
    fn permutations_are_permutations() {
        for d in [1, 2, 3, 8, 16] {
            let s = scheme(16.max(d), d);
            let mut sc = Scratch::default();
            s.permutation(0, 7, &mut sc);
            let t = sc.table.clone();
            let mut sorted = t.clone();
            sorted.sort_unstable();
            assert!(
                sorted.iter().enumerate().all(|(i, &v)| usize::from(v) == i),
                "d={d}"
            );
            s.permutation(0, 8, &mut sc);
            let t2 = sc.table.clone();
            if d > 2 {
                assert_ne!(t, t2, "prefixes must give different permutations");
            }
        }
    }

    #[test]
    fn fast_shuffle_equals_the_exact_one() {
        use rand_chacha::rand_core::RngCore;
        let mut r = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        let mut fast = 0;
        for n in [2usize, 3, 16, 256] {
            for _ in 0..200 {
                let words: Vec<u32> = (0..n + 8).map(|_| r.next_u32()).collect();
                let mut exact = vec![0u16; n];
                let (mut next, mut w) = (1, 0);
                assert!(shuffle_from(&mut exact, &words, &mut next, &mut w));
                let mut sorted = exact.clone();
                sorted.sort_unstable();
                assert!(sorted.iter().enumerate().all(|(i, &v)| usize::from(v) == i));
                let mut quick = vec![0u16; n];
                if shuffle_fast(&mut quick, &words) {
                    assert_eq!(quick, exact);
                    fast += 1;
                }
            }
        }
        assert!(fast > 750);
        // A draw that must be rejected (2^32 mod 3 = 1 > low = 0): the fast
        // path declines and the exact path consumes the next word.
        let words = [0u32, 0, 5, 6, 7, 8];
        let mut t = vec![0u16; 3];
        assert!(!shuffle_fast(&mut t, &words));
        let (mut next, mut w) = (1, 0);
        assert!(shuffle_from(&mut t, &words, &mut next, &mut w));
        assert_eq!(w, 3);
        // Running out of words is reported, and resumes.
        let mut t = vec![0u16; 16];
        let (mut next, mut w) = (1, 0);
        assert!(!shuffle_from(&mut t, &words[..2], &mut next, &mut w));
    }

    #[test]
    fn exhaustive_small_domain_every_block_width() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        for d in [1, 2, 3, 5] {
            let s = scheme(5, d);
            let cts: Vec<LewiWuCiphertext> = (0..32)
                .map(|x| s.encrypt_full(&mut rng, x).unwrap())
                .collect();
            for (x, cx) in cts.iter().enumerate() {
                assert_eq!(s.decrypt_left(&cx.left).unwrap(), x as u64);
                assert_eq!(s.encrypt_left_only(x as u64).unwrap(), cx.left);
                for (y, cy) in cts.iter().enumerate() {
                    assert_eq!(
                        s.compare_halves(&cx.left, &cy.right).unwrap(),
                        x.cmp(&y),
                        "d={d} {x} {y}"
                    );
                }
            }
        }
    }

    #[test]
    fn right_halves_are_randomised() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(2);
        let s = scheme(32, 4);
        let a = s.encrypt_full(&mut rng, 77).unwrap();
        let b = s.encrypt_full(&mut rng, 77).unwrap();
        assert_eq!(a.left, b.left);
        assert_ne!(a.right, b.right);
        assert_eq!(
            s.compare_halves(&a.left, &b.right).unwrap(),
            Ordering::Equal
        );
    }
}
