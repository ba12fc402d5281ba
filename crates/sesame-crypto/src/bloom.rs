//! Keyed Bloom filters.
//!
//! The `k` hash functions are keyed so that only the key holder can compute
//! where an item lands. One HMAC-SHA256 evaluation of the item gives two
//! 64-bit words `h1` and `h2` (`h2` forced odd), and the `k` positions are
//! `g_i = (h1 + i * h2) mod m` for `i = 0..k` (Kirsch and Mitzenmacher,
//! "Less hashing, same performance", ESA 2006): two independent hashes give
//! the same asymptotic false-positive rate as `k`. So an insert or lookup is
//! one Prf call whatever `k` is.
//!
//! The key ([`BloomKey`]) and the public bit vector ([`BloomFilter`]) are
//! separate types: the filter serialises without any secret, and the
//! positions of an item ([`BloomPositions`]) can be computed by the key
//! holder and applied by someone who holds only the filter.

use core::fmt;

use serde::{Deserialize, Serialize};
use zeroize::ZeroizeOnDrop;

use crate::error::{Error, Result};
use crate::key::Key;
use crate::prf::HmacPrf;

/// Largest filter: `2^40` bits (128 GiB).
pub const BLOOM_MAX_BITS: u64 = 1 << 40;
/// Most hash functions per filter.
pub const BLOOM_MAX_HASHES: u32 = 64;

/// The key of a family of Bloom filters (wiped on drop).
pub struct BloomKey {
    prf: HmacPrf,
}

impl BloomKey {
    /// Keys the hash functions.
    pub fn new(key: &Key<32>) -> Self {
        BloomKey {
            prf: HmacPrf::new(key),
        }
    }

    /// The two hash words of `item`; one Prf call (HMAC-SHA256).
    pub fn positions(&self, item: &[u8]) -> BloomPositions {
        let d = self.prf.eval_bytes(item);
        let mut h1 = [0u8; 8];
        let mut h2 = [0u8; 8];
        h1.copy_from_slice(&d[..8]);
        h2.copy_from_slice(&d[8..16]);
        BloomPositions {
            h1: u64::from_le_bytes(h1),
            h2: u64::from_le_bytes(h2) | 1,
        }
    }
}

/// The key lives in an `HmacPrf`, which wipes it.
impl ZeroizeOnDrop for BloomKey {}

impl fmt::Debug for BloomKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BloomKey([redacted])")
    }
}

/// Where an item lands in any filter of a [`BloomKey`]: the two hash words
/// of double hashing. Reveals nothing about the item beyond equality to
/// someone without the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BloomPositions {
    h1: u64,
    h2: u64,
}

impl BloomPositions {
    /// The `k` bit indices in a filter of `m` bits (`m >= 1`).
    fn indices(self, m: u64, k: u32) -> impl Iterator<Item = u64> {
        (0..u64::from(k)).map(move |i| self.h1.wrapping_add(i.wrapping_mul(self.h2)) % m)
    }
}

/// A Bloom filter of `m` bits and `k` hash functions.
///
/// Holds no key; [`BloomFilter::insert`] and [`BloomFilter::contains`] take
/// the [`BloomKey`]. Serialises (serde) as `m`, `k`, the insert count and
/// the bit vector in 64-bit words; deserialisation checks that they agree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "BloomRepr", into = "BloomRepr")]
pub struct BloomFilter {
    m: u64,
    k: u32,
    inserted: u64,
    words: Vec<u64>,
}

#[derive(Serialize, Deserialize)]
struct BloomRepr {
    m: u64,
    k: u32,
    inserted: u64,
    words: Vec<u64>,
}

impl From<BloomFilter> for BloomRepr {
    fn from(f: BloomFilter) -> Self {
        BloomRepr {
            m: f.m,
            k: f.k,
            inserted: f.inserted,
            words: f.words,
        }
    }
}

impl TryFrom<BloomRepr> for BloomFilter {
    type Error = Error;

    fn try_from(r: BloomRepr) -> Result<Self> {
        check_params(r.m, r.k)?;
        let expected = words_for(r.m);
        if r.words.len() != expected {
            return Err(Error::InvalidLength {
                what: "Bloom filter words",
                expected,
                actual: r.words.len(),
            });
        }
        let tail = r.m % 64;
        if tail != 0 && r.words.last().is_some_and(|w| w >> tail != 0) {
            return Err(Error::InvalidParameter {
                what: "Bloom filter bits",
                reason: "bits beyond m must be zero",
            });
        }
        Ok(BloomFilter {
            m: r.m,
            k: r.k,
            inserted: r.inserted,
            words: r.words,
        })
    }
}

fn check_params(m: u64, k: u32) -> Result<()> {
    if m == 0 || m > BLOOM_MAX_BITS {
        return Err(Error::InvalidParameter {
            what: "Bloom filter size m",
            reason: "must be in 1..=2^40 bits",
        });
    }
    if k == 0 || k > BLOOM_MAX_HASHES {
        return Err(Error::InvalidParameter {
            what: "Bloom filter hash count k",
            reason: "must be in 1..=64",
        });
    }
    Ok(())
}

/// 64-bit words holding `m <= 2^40` bits; fits in `usize` on 64-bit targets.
fn words_for(m: u64) -> usize {
    m.div_ceil(64) as usize
}

impl BloomFilter {
    /// An empty filter of `m` bits and `k` hash functions.
    pub fn new(m: u64, k: u32) -> Result<Self> {
        check_params(m, k)?;
        Ok(BloomFilter {
            m,
            k,
            inserted: 0,
            words: vec![0; words_for(m)],
        })
    }

    /// An empty filter sized by [`BloomFilter::optimal_params`] for `n`
    /// items at false-positive rate `p`.
    pub fn with_rate(n: u64, p: f64) -> Result<Self> {
        let (m, k) = Self::optimal_params(n, p)?;
        Self::new(m, k)
    }

    /// The optimal `(m, k)` for `n` items at false-positive rate `p`:
    /// `m = ceil(-n ln p / (ln 2)^2)` and `k = round((m / n) ln 2)`, at
    /// least 1. Fails unless `n >= 1` and `0 < p < 1`, or if `m` or `k`
    /// exceed the limits.
    pub fn optimal_params(n: u64, p: f64) -> Result<(u64, u32)> {
        if n == 0 {
            return Err(Error::InvalidParameter {
                what: "expected item count n",
                reason: "must be at least 1",
            });
        }
        if !(p > 0.0 && p < 1.0) {
            return Err(Error::InvalidParameter {
                what: "false-positive rate p",
                reason: "must be in (0, 1)",
            });
        }
        let ln2 = core::f64::consts::LN_2;
        let m = (-(n as f64) * p.ln() / (ln2 * ln2)).ceil();
        if m.is_nan() || m > BLOOM_MAX_BITS as f64 {
            return Err(Error::InvalidParameter {
                what: "Bloom filter size m",
                reason: "must be in 1..=2^40 bits",
            });
        }
        let m = (m as u64).max(1);
        let k = ((m as f64 / n as f64) * ln2).round().max(1.0);
        if k > f64::from(BLOOM_MAX_HASHES) {
            return Err(Error::InvalidParameter {
                what: "Bloom filter hash count k",
                reason: "must be in 1..=64",
            });
        }
        Ok((m, k as u32))
    }

    /// The false-positive rate `(1 - e^{-kn/m})^k` of a filter of `m` bits
    /// and `k` hashes after `n` distinct insertions.
    pub fn false_positive_rate(m: u64, k: u32, n: u64) -> f64 {
        let k = f64::from(k);
        (1.0 - (-k * n as f64 / m as f64).exp()).powf(k)
    }

    /// [`BloomFilter::false_positive_rate`] of this filter with `n` set to
    /// the number of insertions so far (an upper bound on distinct items).
    pub fn estimated_false_positive_rate(&self) -> f64 {
        Self::false_positive_rate(self.m, self.k, self.inserted)
    }

    /// Number of bits `m`.
    pub fn m(&self) -> u64 {
        self.m
    }

    /// Number of hash functions `k`.
    pub fn k(&self) -> u32 {
        self.k
    }

    /// Insertions so far, repeats included (summed by [`union`](Self::union)).
    pub fn inserted(&self) -> u64 {
        self.inserted
    }

    /// Number of bits set.
    pub fn count_ones(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }

    /// The bit vector, bit `i` at `words()[i / 64] >> (i % 64)`.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Whether bit `i` is set (`false` beyond `m`).
    pub fn bit(&self, i: u64) -> bool {
        i < self.m && self.words[(i / 64) as usize] >> (i % 64) & 1 == 1
    }

    /// Inserts `item`; one Prf call.
    pub fn insert(&mut self, key: &BloomKey, item: &[u8]) {
        self.insert_positions(key.positions(item));
    }

    /// Whether `item` may have been inserted (no false negatives); one Prf
    /// call.
    pub fn contains(&self, key: &BloomKey, item: &[u8]) -> bool {
        self.contains_positions(key.positions(item))
    }

    /// Sets the bits of precomputed positions; no primitive call.
    pub fn insert_positions(&mut self, pos: BloomPositions) {
        for i in pos.indices(self.m, self.k) {
            self.words[(i / 64) as usize] |= 1 << (i % 64);
        }
        self.inserted = self.inserted.saturating_add(1);
    }

    /// Tests the bits of precomputed positions; no primitive call.
    pub fn contains_positions(&self, pos: BloomPositions) -> bool {
        pos.indices(self.m, self.k).all(|i| self.bit(i))
    }

    /// Adds every item of `other` to `self` (bitwise OR). Both filters must
    /// have the same `m` and `k` and, for the result to mean anything, the
    /// same key.
    pub fn union(&mut self, other: &BloomFilter) -> Result<()> {
        if self.m != other.m || self.k != other.k {
            return Err(Error::Incompatible {
                what: "Bloom filters differ in m or k",
            });
        }
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
        self.inserted = self.inserted.saturating_add(other.inserted);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> BloomKey {
        BloomKey::new(&Key::from_bytes([7; 32]))
    }

    #[test]
    fn parameters_are_checked() {
        assert!(BloomFilter::new(0, 1).is_err());
        assert!(BloomFilter::new(1, 0).is_err());
        assert!(BloomFilter::new(BLOOM_MAX_BITS + 1, 1).is_err());
        assert!(BloomFilter::new(1, BLOOM_MAX_HASHES + 1).is_err());
        assert!(BloomFilter::optimal_params(0, 0.01).is_err());
        for p in [0.0, 1.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(BloomFilter::optimal_params(10, p).is_err(), "{p}");
        }
        assert!(BloomFilter::optimal_params(u64::MAX, 1e-9).is_err());
    }

    #[test]
    fn optimal_params_match_the_textbook_example() {
        // n = 1000, p = 1%: m = 9586 bits, k = 7.
        assert_eq!(BloomFilter::optimal_params(1000, 0.01), Ok((9586, 7)));
        let rate = BloomFilter::false_positive_rate(9586, 7, 1000);
        assert!((rate - 0.01).abs() < 0.001, "{rate}");
    }

    #[test]
    fn observed_false_positives_match_the_estimate() {
        let key = key();
        let mut f = BloomFilter::with_rate(2000, 0.02).expect("valid");
        for i in 0u32..2000 {
            f.insert(&key, &i.to_le_bytes());
        }
        let fp = (10_000u32..30_000)
            .filter(|i| f.contains(&key, &i.to_le_bytes()))
            .count() as f64
            / 20_000.0;
        let est = f.estimated_false_positive_rate();
        assert!((est - 0.02).abs() < 0.005, "{est}");
        assert!(fp < 0.03 && fp > 0.01, "{fp}");
    }

    #[test]
    fn union_and_serde() {
        let key = key();
        let mut a = BloomFilter::new(1000, 5).expect("valid");
        let mut b = a.clone();
        a.insert(&key, b"a");
        b.insert(&key, b"b");
        a.union(&b).expect("same parameters");
        assert!(a.contains(&key, b"a") && a.contains(&key, b"b"));
        assert_eq!(a.inserted(), 2);
        assert!(a.union(&BloomFilter::new(999, 5).expect("valid")).is_err());
        let json = serde_json::to_string(&a).expect("serialises");
        let back: BloomFilter = serde_json::from_str(&json).expect("round trip");
        assert_eq!(back, a);
        // 1000 bits = 16 words; bits beyond m and wrong lengths are refused.
        let bad = r#"{"m":1000,"k":5,"inserted":0,"words":[0]}"#;
        assert!(serde_json::from_str::<BloomFilter>(bad).is_err());
        let mut words = vec![0u64; 16];
        words[15] = 1 << 63;
        let bad = serde_json::json!({"m": 1000, "k": 5, "inserted": 0, "words": words});
        assert!(serde_json::from_value::<BloomFilter>(bad).is_err());
        let bad = r#"{"m":0,"k":5,"inserted":0,"words":[]}"#;
        assert!(serde_json::from_str::<BloomFilter>(bad).is_err());
    }
}
