//! Pseudorandom generator: buffered AES-128-CTR.
//!
//! Following seed 004 §5.1.1, the generator produces a buffer of keystream
//! at a time and serves bytes, words and bits from it, refilling when it is
//! empty, so that small requests (one bit, one `u64`) do not each cost an
//! AES call and no keystream is thrown away between requests.
//!
//! Counting: each request (`fill_bytes`, `next_u64`, `next_bit`, `below`,
//! `shuffle`, and each `RngCore` method) is one [`Primitive::Prg`] call.
//! Every AES block of keystream computed (32 per buffer refill, plus the
//! blocks a large request takes directly) is recorded as a
//! [`Primitive::Prf`] call nested in the request, so it appears in the
//! *total* Prf count but not in the *pure* one. A request served entirely
//! from the buffer costs no Prf call at all.

use core::fmt;

use aes::cipher::{KeyIvInit, StreamCipher};
use aes::Aes128Enc;
use ctr::Ctr128BE;
use rand_core::{CryptoRng, CryptoRngCore, RngCore};
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::counter::{self, Primitive};
use crate::error::{Error, Result};
use crate::key::Key;

/// Keystream bytes computed per refill: 32 blocks (512 bytes) keeps the
/// AES pipeline full and the buffer small.
const BUF_LEN: usize = 512;

/// A uniform integer in `0..n` from a source of uniform 64-bit words, by
/// Lemire's multiply-and-reject method: unbiased, rejecting with
/// probability below `n / 2^64`. Returns 0 without drawing when `n <= 1`.
///
/// The one bounded sampler of the workspace: [`uniform_below`],
/// [`shuffle_uniform`], [`AesCtrPrg::below`] and the schemes that sample
/// from their own word sources (POPE's server-side pivots) all call it.
/// Not counted: each caller counts in its own terms.
pub fn below_with(n: u64, mut next: impl FnMut() -> u64) -> u64 {
    if n <= 1 {
        return 0;
    }
    // 2^64 mod n: products whose low half falls below it are rejected.
    let threshold = n.wrapping_neg() % n;
    loop {
        let m = u128::from(next()) * u128::from(n);
        if (m as u64) >= threshold {
            return (m >> 64) as u64;
        }
    }
}

/// A uniform integer in `0..n` from `rng` ([`below_with`]); 0 when
/// `n <= 1`. Not counted.
pub fn uniform_below<R: RngCore + ?Sized>(rng: &mut R, n: u64) -> u64 {
    below_with(n, || rng.next_u64())
}

/// Shuffles `items` uniformly with `rng` (Fisher-Yates, Knuth's Algorithm
/// P, over [`below_with`]). Not counted.
pub fn shuffle_uniform<R: RngCore + ?Sized, T>(rng: &mut R, items: &mut [T]) {
    for i in (1..items.len()).rev() {
        // `i + 1 <= items.len()` fits in u64 and the result is <= i.
        let j = uniform_below(rng, i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

/// A cryptographic pseudorandom generator with a seed.
pub trait Prg: RngCore + CryptoRng {
    /// The seed type.
    type Seed;

    /// Starts the generator from `seed`.
    fn new(seed: &Self::Seed) -> Self
    where
        Self: Sized;

    /// One uniformly random bit.
    fn next_bit(&mut self) -> bool;

    /// A uniformly random integer in `0..n`, without modulo bias.
    /// Fails if `n == 0`.
    fn below(&mut self, n: u64) -> Result<u64>;
}

/// AES-128 in counter mode (SP 800-38A, 128-bit big-endian counter) as a
/// buffered PRG.
///
/// The stream equals the CTR keystream from the initial counter: block `i`
/// is `AES_k(c0 + i mod 2^128)`, computed by the `ctr` crate (eight blocks
/// at a time through AES-NI). Requests of at least 512 bytes are written
/// straight into the output; smaller ones are served from a 512-byte
/// buffer. The key schedule, counter and unused keystream are wiped on drop.
pub struct AesCtrPrg {
    ctr: Ctr128BE<Aes128Enc>,
    buf: [u8; BUF_LEN],
    /// Next unused byte of `buf`; `BUF_LEN` when empty.
    pos: usize,
    /// Unused random bits for `next_bit`, least significant first.
    bits: u64,
    nbits: u32,
}

impl AesCtrPrg {
    /// The generator seeded with `seed`, counter starting at zero.
    pub fn new(seed: &Key<16>) -> Self {
        Self::with_counter(seed, [0; 16])
    }

    /// The generator keyed with `key` whose first keystream block is
    /// `AES_key(initial_counter)` (big-endian counter).
    pub fn with_counter(key: &Key<16>, initial_counter: [u8; 16]) -> Self {
        AesCtrPrg {
            ctr: Ctr128BE::new(key.as_bytes().into(), (&initial_counter).into()),
            buf: [0; BUF_LEN],
            pos: BUF_LEN,
            bits: 0,
            nbits: 0,
        }
    }

    /// Reads a 16-byte seed from a slice.
    pub fn from_slice(seed: &[u8]) -> Result<Self> {
        Ok(Self::new(&Key::from_slice(seed)?))
    }

    /// A generator with a fresh seed drawn from `rng`.
    pub fn from_rng<R: CryptoRngCore + ?Sized>(rng: &mut R) -> Self {
        Self::new(&Key::generate(rng))
    }

    /// Fills `out` with pseudorandom bytes; one counted request.
    pub fn fill_bytes(&mut self, out: &mut [u8]) {
        let _prg = counter::enter(Primitive::Prg);
        self.fill_uncounted(out);
    }

    /// A pseudorandom `u64`; one counted request.
    pub fn next_u64(&mut self) -> u64 {
        let _prg = counter::enter(Primitive::Prg);
        self.u64_uncounted()
    }

    /// A pseudorandom `u32`; one counted request.
    pub fn next_u32(&mut self) -> u32 {
        let _prg = counter::enter(Primitive::Prg);
        let mut b = [0u8; 4];
        self.fill_uncounted(&mut b);
        u32::from_le_bytes(b)
    }

    /// One pseudorandom bit; one counted request. Bits come from a 64-bit
    /// reservoir, so 64 bits cost 8 bytes of keystream.
    pub fn next_bit(&mut self) -> bool {
        let _prg = counter::enter(Primitive::Prg);
        if self.nbits == 0 {
            self.bits = self.u64_uncounted();
            self.nbits = 64;
        }
        let bit = self.bits & 1 == 1;
        self.bits >>= 1;
        self.nbits -= 1;
        bit
    }

    /// A uniform integer in `0..n`; one counted request. Uses Lemire's
    /// multiply-and-reject method: unbiased, and it rejects with probability
    /// below `n / 2^64`. Fails if `n == 0`.
    pub fn below(&mut self, n: u64) -> Result<u64> {
        if n == 0 {
            return Err(Error::InvalidParameter {
                what: "bound",
                reason: "must be at least 1",
            });
        }
        let _prg = counter::enter(Primitive::Prg);
        Ok(self.below_uncounted(n))
    }

    /// Shuffles `items` uniformly (Fisher–Yates / Knuth, Algorithm P); one
    /// counted request whatever the length.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        let _prg = counter::enter(Primitive::Prg);
        for i in (1..items.len()).rev() {
            // `i + 1 <= items.len()` fits in u64 and the result is <= i.
            let j = self.below_uncounted(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }

    fn below_uncounted(&mut self, n: u64) -> u64 {
        below_with(n, || self.u64_uncounted())
    }

    fn u64_uncounted(&mut self) -> u64 {
        let mut b = [0u8; 8];
        self.fill_uncounted(&mut b);
        u64::from_le_bytes(b)
    }

    fn fill_uncounted(&mut self, mut out: &mut [u8]) {
        // Unused keystream first.
        let n = (BUF_LEN - self.pos).min(out.len());
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        out = &mut out[n..];
        // Whole blocks of a large request straight into the output: the
        // buffer is empty, so the stream position is block-aligned.
        if out.len() >= BUF_LEN {
            let direct = out.len() - out.len() % 16;
            let (head, tail) = out.split_at_mut(direct);
            keystream(&mut self.ctr, head);
            out = tail;
        }
        if !out.is_empty() {
            keystream(&mut self.ctr, &mut self.buf);
            out.copy_from_slice(&self.buf[..out.len()]);
            self.pos = out.len();
        }
    }
}

/// Overwrites `out` (a whole number of blocks) with the next keystream
/// blocks; counts them as Prf calls (nested in the caller's request).
fn keystream(ctr: &mut Ctr128BE<Aes128Enc>, out: &mut [u8]) {
    counter::record(Primitive::Prf, (out.len() / 16) as u64);
    out.fill(0);
    // `Ctr128BE` counts blocks from 0 in a u128 whatever the initial
    // counter, so it reports no limit and never fails.
    ctr.try_apply_keystream(out)
        .expect("a 128-bit block counter is never exhausted");
}

impl RngCore for AesCtrPrg {
    fn next_u32(&mut self) -> u32 {
        AesCtrPrg::next_u32(self)
    }

    fn next_u64(&mut self) -> u64 {
        AesCtrPrg::next_u64(self)
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        AesCtrPrg::fill_bytes(self, dest);
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        AesCtrPrg::fill_bytes(self, dest);
        Ok(())
    }
}

impl CryptoRng for AesCtrPrg {}

impl Prg for AesCtrPrg {
    type Seed = Key<16>;

    fn new(seed: &Key<16>) -> Self {
        AesCtrPrg::new(seed)
    }

    fn next_bit(&mut self) -> bool {
        AesCtrPrg::next_bit(self)
    }

    fn below(&mut self, n: u64) -> Result<u64> {
        AesCtrPrg::below(self, n)
    }
}

impl AesCtrPrg {
    /// Overwrites the buffered output and bits with zeros: what dropping
    /// it does (the AES-CTR state is wiped by `ctr`'s own `zeroize`
    /// feature when it drops).
    fn wipe(&mut self) {
        self.buf.zeroize();
        self.bits.zeroize();
    }
}

impl Drop for AesCtrPrg {
    fn drop(&mut self) {
        self.wipe();
    }
}

impl ZeroizeOnDrop for AesCtrPrg {}

impl fmt::Debug for AesCtrPrg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AesCtrPrg([redacted])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What dropping a PRG runs leaves its buffered output and bits zero.
    #[test]
    fn wipe_zeroes_the_buffered_output() {
        let mut g = AesCtrPrg::new(&Key::from_bytes([5; 16]));
        let _ = g.next_u64();
        let _ = g.next_bit();
        assert!(g.buf.iter().any(|b| *b != 0) && g.bits != 0);
        g.wipe();
        assert!(g.buf.iter().all(|b| *b == 0));
        assert_eq!(g.bits, 0);
    }

    fn prg() -> AesCtrPrg {
        AesCtrPrg::new(&Key::from_bytes([5; 16]))
    }

    #[test]
    fn requests_of_any_size_read_one_stream() {
        let mut whole = [0u8; 10 * BUF_LEN];
        prg().fill_bytes(&mut whole);
        let mut g = prg();
        let mut pieces = Vec::new();
        // Sizes that end inside the buffer, exhaust it, and bypass it.
        for len in [1usize, 15, 16, 17, 500, 513, 3, 1500, 512, 1024, 1] {
            let mut b = vec![0u8; len];
            g.fill_bytes(&mut b);
            pieces.extend_from_slice(&b);
        }
        assert_eq!(&whole[..pieces.len()], &pieces[..]);
        let mut g = prg();
        assert_eq!(
            g.next_u64(),
            u64::from_le_bytes(whole[..8].try_into().expect("8 bytes"))
        );
    }

    #[test]
    fn bits_come_from_le_words() {
        let word = prg().next_u64();
        let mut g = prg();
        for i in 0..64 {
            assert_eq!(g.next_bit(), (word >> i) & 1 == 1);
        }
    }

    #[test]
    fn below_is_in_range_and_rejects_zero() {
        let mut g = prg();
        assert!(g.below(0).is_err());
        for n in [1u64, 2, 3, 7, 1000, u64::MAX] {
            for _ in 0..100 {
                assert!(g.below(n).expect("n > 0") < n);
            }
        }
        assert_eq!(g.below(1).expect("n > 0"), 0);
    }

    #[test]
    fn below_small_range_is_roughly_uniform() {
        let mut g = prg();
        let mut hist = [0u32; 6];
        for _ in 0..60_000 {
            hist[g.below(6).expect("n > 0") as usize] += 1;
        }
        for h in hist {
            assert!((9_000..11_000).contains(&h), "{hist:?}");
        }
    }

    #[test]
    fn counter_wraps_instead_of_panicking() {
        let mut g = AesCtrPrg::with_counter(&Key::from_bytes([1; 16]), [0xff; 16]);
        let mut b = [0u8; 2 * BUF_LEN];
        g.fill_bytes(&mut b);
        let mut z = AesCtrPrg::new(&Key::from_bytes([1; 16]));
        let mut c = [0u8; 16];
        z.fill_bytes(&mut c);
        assert_eq!(&b[16..32], &c);
    }
}
