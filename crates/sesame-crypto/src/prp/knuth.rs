//! A PRP as an explicit shuffled table.

use core::fmt;

use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::counter::{self, Primitive};
use crate::error::{Error, Result};
use crate::key::Key;
use crate::prg::AesCtrPrg;
use crate::prp::Prp;

/// Largest domain of a [`KnuthPrp`]: `2^16` points, so table entries fit
/// in `u16` and both tables take at most 256 KiB.
pub const KNUTH_MAX_DOMAIN: u32 = 1 << 16;

/// A pseudorandom permutation of `0..n` stored as a table.
///
/// Built by a Fisher–Yates (Knuth) shuffle of the identity driven by an
/// [`AesCtrPrg`] whose seed is derived from the key and `n`. Storing the
/// forward and inverse tables makes both directions one look-up. The tables
/// are as secret as the key and are wiped on drop.
///
/// Construction costs one key derivation (a Prf call), one Prg request (the
/// shuffle) and the AES blocks it consumes (nested Prf calls); it is not a
/// Prp call. Each `permute` and `invert` is one Prp call.
pub struct KnuthPrp {
    forward: Vec<u16>,
    inverse: Vec<u16>,
}

impl KnuthPrp {
    /// The permutation of `0..n` for `key`; `n` must be in `1..=2^16`.
    pub fn new(key: &Key<16>, n: u32) -> Result<Self> {
        if n == 0 || n > KNUTH_MAX_DOMAIN {
            return Err(Error::InvalidParameter {
                what: "Knuth PRP domain size",
                reason: "must be in 1..=65536",
            });
        }
        let seed: Key<16> = key.derive(&format!("sesame-crypto/knuth-prp/v1/n={n}"));
        let mut prg = AesCtrPrg::new(&seed);
        // n <= 2^16, so every index fits in u16.
        let mut forward: Vec<u16> = (0..n).map(|i| i as u16).collect();
        prg.shuffle(&mut forward);
        let mut inverse = vec![0u16; forward.len()];
        for (x, &y) in forward.iter().enumerate() {
            inverse[usize::from(y)] = x as u16;
        }
        Ok(KnuthPrp { forward, inverse })
    }

    fn lookup(table: &[u16], v: u64) -> Result<u64> {
        match usize::try_from(v).ok().and_then(|i| table.get(i)) {
            Some(&out) => {
                counter::record(Primitive::Prp, 1);
                Ok(u64::from(out))
            }
            None => Err(Error::OutOfDomain {
                value: v,
                size: table.len() as u128,
            }),
        }
    }
}

impl Prp for KnuthPrp {
    fn domain_size(&self) -> u128 {
        self.forward.len() as u128
    }

    fn permute(&self, x: u64) -> Result<u64> {
        Self::lookup(&self.forward, x)
    }

    fn invert(&self, y: u64) -> Result<u64> {
        Self::lookup(&self.inverse, y)
    }
}

impl KnuthPrp {
    /// Overwrites both tables with zeros in place: what dropping the
    /// permutation does (before the memory is freed).
    fn wipe(&mut self) {
        self.forward.as_mut_slice().zeroize();
        self.inverse.as_mut_slice().zeroize();
    }
}

impl Drop for KnuthPrp {
    fn drop(&mut self) {
        self.wipe();
    }
}

impl ZeroizeOnDrop for KnuthPrp {}

impl fmt::Debug for KnuthPrp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KnuthPrp")
            .field("n", &self.forward.len())
            .field("tables", &"[redacted]")
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What dropping the permutation runs leaves both tables zero, in
    /// place.
    #[test]
    fn wipe_zeroes_both_tables() {
        let mut p = KnuthPrp::new(&Key::from_bytes([1; 16]), 300).unwrap();
        assert!(p.forward.iter().any(|x| *x != 0) && p.inverse.iter().any(|x| *x != 0));
        p.wipe();
        assert_eq!(p.forward.len(), 300);
        assert!(p.forward.iter().chain(&p.inverse).all(|x| *x == 0));
    }

    #[test]
    fn rejects_bad_domains_and_points() {
        let key = Key::from_bytes([1; 16]);
        assert!(KnuthPrp::new(&key, 0).is_err());
        assert!(KnuthPrp::new(&key, KNUTH_MAX_DOMAIN + 1).is_err());
        let p = KnuthPrp::new(&key, KNUTH_MAX_DOMAIN).expect("max domain");
        assert_eq!(p.domain_size(), 65536);
        assert!(p.permute(65535).is_ok());
        assert!(p.permute(65536).is_err());
        assert!(p.invert(u64::MAX).is_err());
        let one = KnuthPrp::new(&key, 1).expect("n = 1");
        assert_eq!(one.permute(0), Ok(0));
    }

    #[test]
    fn debug_hides_tables() {
        let p = KnuthPrp::new(&Key::from_bytes([1; 16]), 4).expect("n = 4");
        assert_eq!(
            format!("{p:?}"),
            "KnuthPrp { n: 4, tables: \"[redacted]\" }"
        );
    }
}
