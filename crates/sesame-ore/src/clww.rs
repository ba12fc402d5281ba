//! CLWW "practical" order-revealing encryption (Chenette, Lewi, Weis, Wu,
//! FSE 2016).
//!
//! For an `n`-bit plaintext `x = b_1 ... b_n` (most significant first),
//! `u_i = F(k, (i, b_1 ... b_{i-1})) + b_i mod 3`; the ciphertext is the
//! list `(u_1, ..., u_n)`, packed two bits per trit. Comparison finds the
//! first index where two lists differ: there `u_i(y) = u_i(x) + 1 mod 3`
//! exactly when `x < y`. `F` is AES-128; the `n` evaluations of an
//! encryption run as one pipelined batch. See `docs/schemes/clww.md`.

use core::cmp::Ordering;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{BackwardPrivacy, Error, QueryKind, Result, SchemeDescriptor, SchemeKind};
use sesame_crypto::{Aes128Prf, Key};
use zeroize::Zeroizing;

use crate::api::{check_bits, check_plaintext, OreScheme};
use crate::saved;

/// Descriptor of CLWW.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "clww",
    title: "CLWW practical order-revealing encryption",
    citation: "N. Chenette, K. Lewi, S. A. Weis, D. J. Wu. Practical Order-Revealing \
               Encryption with Limited Leakage. FSE 2016",
    kind: SchemeKind::Ore,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Range],
    leakage: "Total order, equality, and for every pair of plaintexts the position of the \
              most significant differing bit (hence their approximate distance).",
    doc: "docs/schemes/clww.md",
};

/// A CLWW ciphertext: `n` trits, two bits each, the first trit in the
/// highest position (bits `2n - 1`, `2n - 2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ClwwCiphertext(pub u128);

/// CLWW with a secret key.
pub struct Clww {
    bits: u32,
    master: Key<32>,
    prf: Aes128Prf,
}

redacted_key_debug!(Clww { bits });

/// The PRF input for position `i` (0-based) and the `i` bits above it.
#[inline]
fn prf_input(i: u32, bits: u32, prefix: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[0] = i as u8;
    b[1] = bits as u8;
    b[8..].copy_from_slice(&prefix.to_be_bytes());
    b
}

#[inline]
fn mod3(block: &[u8; 16]) -> u8 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&block[..8]);
    (u64::from_le_bytes(w) % 3) as u8
}

/// The `i` most significant of the `bits` low bits of `x`.
#[inline]
fn prefix(x: u64, bits: u32, i: u32) -> u64 {
    if i == 0 {
        0
    } else {
        (x >> (bits - i)) & (u64::MAX >> (64 - i))
    }
}

fn trit(bits: u32, c: u128, i: u32) -> u8 {
    ((c >> (2 * (bits - 1 - i))) & 3) as u8
}

/// The public comparison of CLWW ciphertexts: the first differing trit
/// says which plaintext is smaller. It needs only the width.
#[derive(Clone, Copy, Debug)]
pub struct ClwwComparator {
    bits: u32,
}

impl ClwwComparator {
    /// The comparison of `bits`-bit CLWW ciphertexts (`1..=64`).
    pub fn new(bits: u32) -> Result<Self> {
        check_bits(bits)?;
        Ok(ClwwComparator { bits })
    }

    /// The order of the plaintexts of `a` and `b`.
    pub fn compare_ct(&self, a: &ClwwCiphertext, b: &ClwwCiphertext) -> Ordering {
        let diff = a.0 ^ b.0;
        if diff == 0 {
            return Ordering::Equal;
        }
        let unused = 128 - 2 * self.bits;
        let i = (diff.leading_zeros().saturating_sub(unused)) / 2;
        let (ua, ub) = (trit(self.bits, a.0, i), trit(self.bits, b.0, i));
        if ub == (ua + 1) % 3 {
            Ordering::Less
        } else {
            Ordering::Greater
        }
    }
}

impl crate::api::Comparator for ClwwComparator {
    type Ciphertext = ClwwCiphertext;
    type Left = ClwwCiphertext;
    type Right = ClwwCiphertext;

    fn left(c: &ClwwCiphertext) -> &ClwwCiphertext {
        c
    }
    fn right(c: &ClwwCiphertext) -> ClwwCiphertext {
        *c
    }
    fn compare(&self, left: &ClwwCiphertext, right: &ClwwCiphertext) -> Result<Ordering> {
        Ok(self.compare_ct(left, right))
    }
}

impl Clww {
    /// CLWW for `bits`-bit plaintexts keyed by `master`.
    pub fn new(master: Key<32>, bits: u32) -> Result<Self> {
        check_bits(bits)?;
        let prf = Aes128Prf::new(&master.derive(&format!("sesame-ore/clww/v2/bits={bits}/prf")));
        Ok(Clww { bits, master, prf })
    }

    /// CLWW with a fresh key.
    pub fn generate<R: CryptoRngCore + ?Sized>(rng: &mut R, bits: u32) -> Result<Self> {
        Self::new(Key::generate(rng), bits)
    }

    /// The ciphertext of `x` (deterministic).
    pub fn encrypt_u64(&self, x: u64) -> Result<ClwwCiphertext> {
        check_plaintext(x, self.bits)?;
        let n = self.bits;
        let mut blocks = [[0u8; 16]; 64];
        let blocks = &mut blocks[..n as usize];
        for (i, b) in blocks.iter_mut().enumerate() {
            *b = prf_input(i as u32, n, prefix(x, n, i as u32));
        }
        self.prf.eval_in_place(blocks);
        let mut packed: u128 = 0;
        for (i, b) in blocks.iter().enumerate() {
            let bit = ((x >> (n - 1 - i as u32)) & 1) as u8;
            let u = (mod3(b) + bit) % 3;
            packed = (packed << 2) | u128::from(u);
        }
        Ok(ClwwCiphertext(packed))
    }

    fn trit(&self, c: u128, i: u32) -> u8 {
        trit(self.bits, c, i)
    }

    /// The public comparison of this scheme's ciphertexts.
    pub fn comparator(&self) -> ClwwComparator {
        ClwwComparator { bits: self.bits }
    }

    /// Compares two ciphertexts without the key.
    pub fn compare_ct(&self, a: &ClwwCiphertext, b: &ClwwCiphertext) -> Ordering {
        self.comparator().compare_ct(a, b)
    }

    /// The plaintext of `c`: the bits are recovered one at a time, each
    /// PRF input needing the bits above it.
    pub fn decrypt_ct(&self, c: &ClwwCiphertext) -> Result<u64> {
        let n = self.bits;
        if n < 64 && c.0 >> (2 * n) != 0 {
            return Err(Error::Crypto);
        }
        let mut x: u64 = 0;
        for i in 0..n {
            let f = mod3(&self.prf.eval_block(&prf_input(i, n, x)));
            let bit = (self.trit(c.0, i) + 3 - f) % 3;
            if bit > 1 {
                return Err(Error::Crypto);
            }
            x = (x << 1) | u64::from(bit);
        }
        Ok(x)
    }
}

impl OreScheme for Clww {
    type Ciphertext = ClwwCiphertext;

    descriptor_and_bits!(bits);

    fn encrypt<R: CryptoRngCore + ?Sized>(
        &mut self,
        _rng: &mut R,
        x: u64,
    ) -> Result<ClwwCiphertext> {
        self.encrypt_u64(x)
    }

    fn compare(&self, a: &ClwwCiphertext, b: &ClwwCiphertext) -> Result<Ordering> {
        Ok(self.compare_ct(a, b))
    }

    fn can_decrypt(&self) -> bool {
        true
    }

    fn decrypt(&self, c: &ClwwCiphertext) -> Result<u64> {
        self.decrypt_ct(c)
    }

    fn ciphertext_bits(&self, _c: &ClwwCiphertext) -> u64 {
        2 * u64::from(self.bits)
    }

    fn save(&self) -> Result<Zeroizing<Vec<u8>>> {
        saved::save(DESCRIPTOR.name, self.bits, &self.master, saved::NoState)
    }

    fn restore(bytes: &[u8]) -> Result<Self> {
        let s: saved::Saved<u32, saved::NoState> = saved::restore(DESCRIPTOR.name, bytes)?;
        Clww::new(s.key.key(), s.params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sesame_crypto::counter::{self, Primitive};

    #[test]
    fn orders_and_decrypts_small_domains_exhaustively() {
        let s = Clww::new(Key::from_bytes([9; 32]), 5).unwrap();
        let cts: Vec<ClwwCiphertext> = (0..32).map(|x| s.encrypt_u64(x).unwrap()).collect();
        for (x, cx) in cts.iter().enumerate() {
            assert_eq!(s.decrypt_ct(cx).unwrap(), x as u64);
            for (y, cy) in cts.iter().enumerate() {
                assert_eq!(s.compare_ct(cx, cy), x.cmp(&y), "{x} {y}");
            }
        }
    }

    #[test]
    fn encryption_is_n_prf_calls() {
        let s = Clww::new(Key::from_bytes([9; 32]), 32).unwrap();
        let (_, c) = counter::measure(|| s.encrypt_u64(123_456).unwrap());
        assert_eq!(c.pure(Primitive::Prf), 32);
        let s64 = Clww::new(Key::from_bytes([9; 32]), 64).unwrap();
        let a = s64.encrypt_u64(u64::MAX).unwrap();
        let b = s64.encrypt_u64(u64::MAX - 1).unwrap();
        assert_eq!(s64.compare_ct(&a, &b), Ordering::Greater);
        assert_eq!(s64.decrypt_ct(&a).unwrap(), u64::MAX);
    }
}
