//! A PRP on `0..n` from a Feistel network with cycle walking.

use core::fmt;

use zeroize::ZeroizeOnDrop;

use crate::counter::{self, Primitive};
use crate::error::{Error, Result};
use crate::key::Key;
use crate::prf::Aes128Prf;
use crate::prp::Prp;

/// Rounds of the Feistel network.
///
/// Luby–Rackoff's 4 rounds give a strong PRP only up to about `2^(b/4)`
/// queries, which is nothing on a 16-bit domain where the adversary may see
/// every point. Security on small domains comes from more rounds (Patarin;
/// Hoang–Rogaway), and 8-round FF3 fell to small-domain attacks (Durak and
/// Vaudenay 2017). We use 10 rounds, as NIST FF1 (SP 800-38G) does; the
/// price is 10 AES calls per pass.
pub const FEISTEL_ROUNDS: u8 = 10;

/// Label of the round-key derivation; the domain's largest point follows
/// it, so that permutations of different domains (say `0..1000` and
/// `0..1024`, which share a width) have independent keys.
const LABEL: &str = "sesame-crypto/feistel-prp/v2/max=";

/// A pseudorandom permutation of `0..n` for any `1 <= n <= 2^64`.
///
/// An alternating (unbalanced when `b` is odd) Feistel network permutes
/// `b`-bit strings, `b = max(2, ceil(log2 n))`: the string splits into a
/// high half of `u = floor(b/2)` bits and a low half of `v = b - u` bits,
/// and round `i` XORs `AES_k(i || b || other half)` truncated to the width of
/// the half it changes (as in FF1, with XOR for addition). Points that land
/// outside `0..n` are encrypted again (cycle walking, Black and Rogaway
/// 2002); as `2^b < 2n`, fewer than two passes are expected.
///
/// Each `permute`/`invert` is one Prp call with its `10 × passes` AES calls
/// counted as nested Prf calls. The AES key is derived from the given key
/// with the label `sesame-crypto/feistel-prp/v2/max=` followed by `n - 1`
/// in decimal (the domain is bound into the key, as for [`crate::KnuthPrp`])
/// and wiped on drop.
pub struct FeistelPrp {
    prf: Aes128Prf,
    bits: u32,
    /// Largest point of the domain (`n - 1`).
    max: u64,
}

impl FeistelPrp {
    /// The permutation of `0..n`; fails if `n == 0`.
    pub fn new(key: &Key<16>, n: u64) -> Result<Self> {
        let max = n.checked_sub(1).ok_or(Error::InvalidParameter {
            what: "Feistel PRP domain size",
            reason: "must be at least 1",
        })?;
        let bits = (u64::BITS - max.leading_zeros()).max(2);
        Ok(Self::build(key, bits, max))
    }

    /// The permutation of all `bits`-bit strings, `bits` in `1..=64`.
    pub fn with_bits(key: &Key<16>, bits: u32) -> Result<Self> {
        if !(1..=64).contains(&bits) {
            return Err(Error::InvalidParameter {
                what: "Feistel PRP width",
                reason: "must be in 1..=64 bits",
            });
        }
        Ok(Self::build(key, bits.max(2), mask(bits)))
    }

    fn build(key: &Key<16>, bits: u32, max: u64) -> Self {
        FeistelPrp {
            prf: Aes128Prf::new(&key.derive(&format!("{LABEL}{max}"))),
            bits,
            max,
        }
    }

    /// Width in bits of the network (at least 2; one-bit domains walk).
    pub fn bits(&self) -> u32 {
        self.bits
    }

    fn check(&self, x: u64) -> Result<()> {
        if x > self.max {
            return Err(Error::OutOfDomain {
                value: x,
                size: u128::from(self.max) + 1,
            });
        }
        Ok(())
    }

    fn round(&self, i: u8, half: u64, width: u32) -> u64 {
        let mut block = [0u8; 16];
        block[0] = i;
        block[1] = self.bits as u8;
        block[8..].copy_from_slice(&half.to_le_bytes());
        let out = self.prf.encrypt_uncounted(&block);
        let mut word = [0u8; 8];
        word.copy_from_slice(&out[..8]);
        u64::from_le_bytes(word) & mask(width)
    }

    fn widths(&self) -> (u32, u32) {
        let u = self.bits / 2;
        (u, self.bits - u)
    }

    fn encrypt(&self, x: u64) -> u64 {
        let (u, v) = self.widths();
        let (mut a, mut b) = (x >> v, x & mask(v));
        for i in 0..FEISTEL_ROUNDS {
            let width = if i % 2 == 0 { u } else { v };
            let c = a ^ self.round(i, b, width);
            a = b;
            b = c;
        }
        (a << v) | b
    }

    fn decrypt(&self, y: u64) -> u64 {
        let (u, v) = self.widths();
        let (mut a, mut b) = (y >> v, y & mask(v));
        for i in (0..FEISTEL_ROUNDS).rev() {
            let width = if i % 2 == 0 { u } else { v };
            let prev_a = b ^ self.round(i, a, width);
            b = a;
            a = prev_a;
        }
        (a << v) | b
    }

    /// Applies `f` until the result is in the domain; terminates because
    /// the cycle of an in-domain point returns to the domain.
    fn walk(&self, x: u64, f: impl Fn(&Self, u64) -> u64) -> u64 {
        let _prp = counter::enter(Primitive::Prp);
        let mut passes = 1u64;
        let mut y = f(self, x);
        while y > self.max {
            y = f(self, y);
            passes += 1;
        }
        counter::record(Primitive::Prf, passes * u64::from(FEISTEL_ROUNDS));
        y
    }
}

/// The `width` low bits set (`width <= 64`).
fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

impl Prp for FeistelPrp {
    fn domain_size(&self) -> u128 {
        u128::from(self.max) + 1
    }

    fn permute(&self, x: u64) -> Result<u64> {
        self.check(x)?;
        Ok(self.walk(x, Self::encrypt))
    }

    fn invert(&self, y: u64) -> Result<u64> {
        self.check(y)?;
        Ok(self.walk(y, Self::decrypt))
    }
}

/// The only secret is the AES key schedule, which `Aes128Prf` wipes.
impl ZeroizeOnDrop for FeistelPrp {}

impl fmt::Debug for FeistelPrp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FeistelPrp")
            .field("bits", &self.bits)
            .field("domain_size", &self.domain_size())
            .field("key", &"[redacted]")
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key<16> {
        Key::from_bytes([2; 16])
    }

    #[test]
    fn parameters_are_checked() {
        assert!(FeistelPrp::new(&key(), 0).is_err());
        assert!(FeistelPrp::with_bits(&key(), 0).is_err());
        assert!(FeistelPrp::with_bits(&key(), 65).is_err());
        let p = FeistelPrp::new(&key(), 1000).expect("n > 0");
        assert_eq!(p.bits(), 10);
        assert!(p.permute(1000).is_err());
        assert!(p.invert(1000).is_err());
    }

    #[test]
    fn full_width_round_trips() {
        let p = FeistelPrp::with_bits(&key(), 64).expect("64 bits");
        assert_eq!(p.domain_size(), 1u128 << 64);
        for x in [0u64, 1, u64::MAX, 0x0123_4567_89ab_cdef] {
            let y = p.permute(x).expect("in domain");
            assert_eq!(p.invert(y), Ok(x));
        }
        let p = FeistelPrp::with_bits(&key(), 33).expect("33 bits");
        let x = (1u64 << 33) - 1;
        let y = p.permute(x).expect("in domain");
        assert!(y < 1 << 33);
        assert_eq!(p.invert(y), Ok(x));
    }

    #[test]
    fn tiny_domains_are_permuted() {
        for n in 1..=5u64 {
            let p = FeistelPrp::new(&key(), n).expect("n > 0");
            let mut seen: Vec<u64> = (0..n).map(|x| p.permute(x).expect("in domain")).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>());
        }
        let one_bit = FeistelPrp::with_bits(&key(), 1).expect("1 bit");
        assert_eq!(one_bit.domain_size(), 2);
        let y = one_bit.permute(1).expect("in domain");
        assert_eq!(one_bit.invert(y), Ok(1));
    }

    #[test]
    fn debug_is_redacted() {
        let p = FeistelPrp::new(&key(), 10).expect("n > 0");
        assert!(format!("{p:?}").contains("[redacted]"));
    }
}
