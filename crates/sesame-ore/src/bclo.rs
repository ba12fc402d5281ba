//! BCLO order-preserving encryption (Boldyreva, Chenette, Lee, O'Neill,
//! EUROCRYPT 2009), the scheme of CryptDB.
//!
//! A plaintext is mapped by a lazily sampled random order-preserving
//! function from the domain `0..2^bits` into the range `0..2^range_bits`:
//! at each node the range splits in half, a hypergeometric sample
//! ([`crate::hg::sample`]) says how many domain points fall in the lower
//! half, and the recursion follows the plaintext until one domain point
//! is left, whose ciphertext is uniform in what remains of the range.
//! Every random choice comes from a PRF keyed per node (BCLO's `TapeGen`):
//! AES-128 of `tag || counter || node`, so encryption is deterministic and
//! decryption retraces the same path. See `docs/schemes/bclo.md`.

pub mod pyope;

use core::cmp::Ordering;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{BackwardPrivacy, Error, QueryKind, Result, SchemeDescriptor, SchemeKind};
use sesame_crypto::{Aes128Prf, Key};
use zeroize::Zeroizing;

use crate::api::{check_bits, check_plaintext, OreScheme};
use crate::hg::{self, Coins};
use crate::saved;

/// Descriptor of BCLO.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "bclo",
    title: "BCLO order-preserving encryption",
    citation: "A. Boldyreva, N. Chenette, Y. Lee, A. O'Neill. Order-Preserving Symmetric \
               Encryption. EUROCRYPT 2009",
    kind: SchemeKind::Ope,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Range],
    leakage: "Total order and equality, and (as any random order-preserving function) roughly \
              the top half of the plaintext bits: distances are revealed to about the square \
              root of the domain size (Boldyreva, Chenette, O'Neill 2011).",
    doc: "docs/schemes/bclo.md",
};

/// Largest ciphertext range: node identifiers (range points) must fit the
/// 12 bytes of the PRF input left after the tag and the counter.
pub const MAX_RANGE_BITS: u32 = 96;

/// Plaintext and ciphertext widths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BcloParams {
    /// Plaintexts are `0..2^bits`, `1 <= bits <= 64`.
    pub bits: u32,
    /// Ciphertexts are `0..2^range_bits`, `bits <= range_bits <= 96`.
    pub range_bits: u32,
}

impl Default for BcloParams {
    /// Seed 004's setting: 32-bit plaintexts, 48-bit ciphertexts.
    fn default() -> Self {
        BcloParams {
            bits: 32,
            range_bits: 48,
        }
    }
}

impl BcloParams {
    fn check(self) -> Result<Self> {
        check_bits(self.bits)?;
        if self.range_bits < self.bits || self.range_bits > MAX_RANGE_BITS {
            return Err(Error::InvalidArgument(format!(
                "BCLO range of {} bits must be between the plaintext width {} and {MAX_RANGE_BITS}",
                self.range_bits, self.bits
            )));
        }
        Ok(self)
    }
}

/// A BCLO ciphertext: a number in `0..2^range_bits`, compared as such.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BcloCiphertext(pub u128);

/// The public comparison of BCLO ciphertexts: as numbers.
#[derive(Clone, Copy, Debug, Default)]
pub struct BcloComparator;

impl crate::api::Comparator for BcloComparator {
    type Ciphertext = BcloCiphertext;
    type Left = BcloCiphertext;
    type Right = BcloCiphertext;

    fn left(c: &BcloCiphertext) -> &BcloCiphertext {
        c
    }
    fn right(c: &BcloCiphertext) -> BcloCiphertext {
        *c
    }
    fn compare(&self, left: &BcloCiphertext, right: &BcloCiphertext) -> Result<Ordering> {
        Ok(left.0.cmp(&right.0))
    }
}

/// BCLO with a secret key.
pub struct Bclo {
    params: BcloParams,
    master: Key<32>,
    prf: Aes128Prf,
}

redacted_key_debug!(Bclo { params });

/// Tags of the PRF inputs: interior nodes and leaves.
const TAG_NODE: u8 = 0x01;
const TAG_LEAF: u8 = 0x02;

/// The coin tape of one node: AES-128 of `tag || counter (3 bytes) ||
/// id (12 bytes)` for counter 0, 1, 2, ...
struct Tape<'a> {
    prf: &'a Aes128Prf,
    input: [u8; 16],
    counter: u32,
    buf: [u8; 16],
    used: usize,
}

impl<'a> Tape<'a> {
    fn new(prf: &'a Aes128Prf, tag: u8, id: u128) -> Self {
        let mut input = [0u8; 16];
        input[0] = tag;
        input[4..].copy_from_slice(&id.to_be_bytes()[4..]);
        Tape {
            prf,
            input,
            counter: 0,
            buf: [0; 16],
            used: 16,
        }
    }

    fn next_u64(&mut self) -> u64 {
        if self.used == 16 {
            self.input[1..4].copy_from_slice(&self.counter.to_be_bytes()[1..]);
            self.counter = self.counter.wrapping_add(1);
            self.buf = self.prf.eval_block(&self.input);
            self.used = 0;
        }
        let mut w = [0u8; 8];
        w.copy_from_slice(&self.buf[self.used..self.used + 8]);
        self.used += 8;
        u64::from_be_bytes(w)
    }
}

impl Coins for Tape<'_> {
    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) * (1.0 / 9_007_199_254_740_992.0)
    }

    fn below(&mut self, n: u128) -> u128 {
        // Rejection on the smallest number of bits: fewer than two tries
        // expected.
        let bits = 128 - n.saturating_sub(1).leading_zeros();
        if bits == 0 {
            return 0;
        }
        loop {
            let x = if bits <= 64 {
                u128::from(self.next_u64() >> (64 - bits))
            } else {
                let hi = u128::from(self.next_u64()) << 64;
                (hi | u128::from(self.next_u64())) >> (128 - bits)
            };
            if x < n {
                return x;
            }
        }
    }
}

/// One step of the recursion: the current domain `[d_lo, d_lo + d_size)`
/// and range `[r_lo, r_lo + r_size)`.
#[derive(Clone, Copy, Debug)]
struct Node {
    d_lo: u128,
    d_size: u128,
    r_lo: u128,
    r_size: u128,
}

impl Node {
    /// One step down the tree, split at `x` plaintexts and `half`
    /// ciphertexts ([`Bclo::split`]): to the lower part (`low`) or the
    /// upper one. Encryption and decryption take the same steps.
    fn descend(&mut self, half: u128, x: u128, low: bool) {
        if low {
            self.d_size = x;
            self.r_size = half;
        } else {
            self.d_lo += x;
            self.d_size -= x;
            self.r_lo += half;
            self.r_size -= half;
        }
    }
}

impl Bclo {
    /// BCLO keyed by `master` (a 256-bit key; the AES key is derived from it).
    pub fn new(master: Key<32>, params: BcloParams) -> Result<Self> {
        let params = params.check()?;
        let prf = Aes128Prf::new(&master.derive(&format!(
            "sesame-ore/bclo/v2/bits={}/range-bits={}/prf",
            params.bits, params.range_bits
        )));
        Ok(Bclo {
            params,
            master,
            prf,
        })
    }

    /// BCLO with a fresh key.
    pub fn generate<R: CryptoRngCore + ?Sized>(rng: &mut R, params: BcloParams) -> Result<Self> {
        Self::new(Key::generate(rng), params)
    }

    /// The parameters.
    pub fn params(&self) -> BcloParams {
        self.params
    }

    fn root(&self) -> Node {
        Node {
            d_lo: 0,
            d_size: 1u128 << self.params.bits,
            r_lo: 0,
            r_size: 1u128 << self.params.range_bits,
        }
    }

    /// Splits `node`: returns the size of the lower half of the range and
    /// how many domain points map into it.
    fn split(&self, node: &Node) -> Result<(u128, u128)> {
        let half = node.r_size.div_ceil(2);
        let mut tape = Tape::new(&self.prf, TAG_NODE, node.r_lo + half);
        let x = hg::sample(node.d_size, node.r_size - node.d_size, half, &mut tape)?;
        Ok((half, x))
    }

    fn leaf(&self, node: &Node) -> u128 {
        let mut tape = Tape::new(&self.prf, TAG_LEAF, node.d_lo);
        node.r_lo + tape.below(node.r_size)
    }

    /// The ciphertext of `m`.
    pub fn encrypt_value_u64(&self, m: u64) -> Result<BcloCiphertext> {
        check_plaintext(m, self.params.bits)?;
        let m = u128::from(m);
        let mut node = self.root();
        while node.d_size > 1 {
            let (half, x) = self.split(&node)?;
            node.descend(half, x, m < node.d_lo + x);
        }
        Ok(BcloCiphertext(self.leaf(&node)))
    }

    /// The plaintext of `c`; [`Error::Crypto`] if `c` is no ciphertext
    /// under this key.
    pub fn decrypt_u128(&self, c: u128) -> Result<u64> {
        if c >> self.params.range_bits != 0 {
            return Err(Error::Crypto);
        }
        let mut node = self.root();
        loop {
            match node.d_size {
                0 => return Err(Error::Crypto),
                1 => {
                    return if self.leaf(&node) == c {
                        u64::try_from(node.d_lo).map_err(|_| Error::Crypto)
                    } else {
                        Err(Error::Crypto)
                    }
                }
                _ => {}
            }
            let (half, x) = self.split(&node)?;
            node.descend(half, x, c < node.r_lo + half);
        }
    }
}

impl OreScheme for Bclo {
    type Ciphertext = BcloCiphertext;

    descriptor_and_bits!(params.bits);

    fn encrypt<R: CryptoRngCore + ?Sized>(
        &mut self,
        _rng: &mut R,
        x: u64,
    ) -> Result<BcloCiphertext> {
        self.encrypt_value_u64(x)
    }

    fn compare(&self, a: &BcloCiphertext, b: &BcloCiphertext) -> Result<Ordering> {
        crate::api::Comparator::compare(&BcloComparator, a, b)
    }

    fn can_decrypt(&self) -> bool {
        true
    }

    fn decrypt(&self, c: &BcloCiphertext) -> Result<u64> {
        self.decrypt_u128(c.0)
    }

    fn ciphertext_bits(&self, _c: &BcloCiphertext) -> u64 {
        u64::from(self.params.range_bits)
    }

    fn save(&self) -> Result<Zeroizing<Vec<u8>>> {
        saved::save(DESCRIPTOR.name, self.params, &self.master, saved::NoState)
    }

    fn restore(bytes: &[u8]) -> Result<Self> {
        let s: saved::Saved<BcloParams, saved::NoState> = saved::restore(DESCRIPTOR.name, bytes)?;
        Bclo::new(s.key.key(), s.params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bclo(bits: u32, range_bits: u32) -> Bclo {
        Bclo::new(Key::from_bytes([3; 32]), BcloParams { bits, range_bits }).unwrap()
    }

    #[test]
    fn small_domain_is_order_preserving_and_invertible() {
        let s = bclo(8, 20);
        let cts: Vec<u128> = (0..256)
            .map(|m| s.encrypt_value_u64(m).unwrap().0)
            .collect();
        for w in cts.windows(2) {
            assert!(w[0] < w[1]);
        }
        for (m, &c) in cts.iter().enumerate() {
            assert_eq!(s.decrypt_u128(c).unwrap(), m as u64);
        }
        // Points that are no ciphertext do not decrypt.
        let bogus = (0..1u128 << 20).find(|c| !cts.contains(c)).unwrap();
        assert!(matches!(s.decrypt_u128(bogus), Err(Error::Crypto)));
        assert!(matches!(s.decrypt_u128(1 << 20), Err(Error::Crypto)));
    }

    #[test]
    fn equal_widths_are_the_identity() {
        let s = bclo(6, 6);
        for m in 0..64 {
            assert_eq!(s.encrypt_value_u64(m).unwrap().0, u128::from(m));
        }
    }

    #[test]
    fn parameters_are_checked() {
        let k = || Key::from_bytes([1; 32]);
        assert!(Bclo::new(
            k(),
            BcloParams {
                bits: 32,
                range_bits: 31
            }
        )
        .is_err());
        assert!(Bclo::new(
            k(),
            BcloParams {
                bits: 64,
                range_bits: 97
            }
        )
        .is_err());
        assert!(Bclo::new(
            k(),
            BcloParams {
                bits: 0,
                range_bits: 8
            }
        )
        .is_err());
        let s = Bclo::new(
            k(),
            BcloParams {
                bits: 64,
                range_bits: 96,
            },
        )
        .unwrap();
        let a = s.encrypt_value_u64(u64::MAX - 1).unwrap();
        let b = s.encrypt_value_u64(u64::MAX).unwrap();
        assert!(a < b);
        assert_eq!(s.decrypt_u128(b.0).unwrap(), u64::MAX);
        assert!(bclo(8, 16).encrypt_value_u64(256).is_err());
    }
}
