//! Exact 256-bit products of 128-bit integers, for the hypergeometric
//! sampler's ratios of products (a population of up to 2^126 balls makes
//! products of up to 2^252).

use core::cmp::Ordering;

/// An unsigned 256-bit integer `hi * 2^128 + lo`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct U256 {
    hi: u128,
    lo: u128,
}

impl Ord for U256 {
    fn cmp(&self, other: &Self) -> Ordering {
        self.hi.cmp(&other.hi).then(self.lo.cmp(&other.lo))
    }
}

impl PartialOrd for U256 {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// `2^128` as an `f64` (exact).
const TWO_128: f64 = 340_282_366_920_938_463_463_374_607_431_768_211_456.0;

impl U256 {
    /// `x` widened.
    pub(crate) const fn from_u128(x: u128) -> Self {
        U256 { hi: 0, lo: x }
    }

    /// The exact product `a * b`.
    pub(crate) fn mul(a: u128, b: u128) -> Self {
        let (a1, a0) = (a >> 64, a & u128::from(u64::MAX));
        let (b1, b0) = (b >> 64, b & u128::from(u64::MAX));
        let p00 = a0 * b0;
        let p01 = a0 * b1;
        let p10 = a1 * b0;
        let p11 = a1 * b1;
        // Column 64..128: at most 3 (2^64 - 1), no overflow.
        let mid = (p00 >> 64) + (p01 & u128::from(u64::MAX)) + (p10 & u128::from(u64::MAX));
        let lo = (p00 & u128::from(u64::MAX)) | (mid << 64);
        let hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
        U256 { hi, lo }
    }

    /// `|self - other|` and whether `self < other`.
    pub(crate) fn abs_diff(self, other: Self) -> (Self, bool) {
        if self >= other {
            (self.wrapping_sub(other), false)
        } else {
            (other.wrapping_sub(self), true)
        }
    }

    fn wrapping_sub(self, other: Self) -> Self {
        let (lo, borrow) = self.lo.overflowing_sub(other.lo);
        let hi = self
            .hi
            .wrapping_sub(other.hi)
            .wrapping_sub(u128::from(borrow));
        U256 { hi, lo }
    }

    fn wrapping_add(self, other: Self) -> Self {
        let (lo, carry) = self.lo.overflowing_add(other.lo);
        let hi = self
            .hi
            .wrapping_add(other.hi)
            .wrapping_add(u128::from(carry));
        U256 { hi, lo }
    }

    /// The nearest `f64` up to a relative error of `1.5 * 2^-53`.
    pub(crate) fn to_f64(self) -> f64 {
        (self.hi as f64) * TWO_128 + self.lo as f64
    }

    /// `floor(self / b)`, for `b > 0` and a quotient below `2^128`.
    ///
    /// A floating-point estimate corrected with the exact remainder: each
    /// round shrinks the error by a factor of about 2^50, so two or three
    /// rounds suffice; schoolbook division is the fallback.
    pub(crate) fn div_floor(self, b: u128) -> u128 {
        debug_assert!(b > 0);
        let bf = b as f64;
        let wide_b = U256::from_u128(b);
        let mut q = (self.to_f64() / bf) as u128;
        for _ in 0..8 {
            let qb = U256::mul(q, b);
            if qb > self {
                let over = qb.wrapping_sub(self);
                let step = ((over.to_f64() / bf).ceil() as u128).max(1);
                q = q.saturating_sub(step);
            } else {
                let r = self.wrapping_sub(qb);
                if r < wide_b {
                    return q;
                }
                let step = ((r.to_f64() / bf) as u128).max(1);
                q = q.saturating_add(step);
            }
        }
        self.div_floor_schoolbook(b)
    }

    fn div_floor_schoolbook(self, b: u128) -> u128 {
        // Restoring division, one bit at a time: the remainder stays below
        // 2b <= 2^129, kept as a U256.
        let wide_b = U256::from_u128(b);
        let mut rem = U256::from_u128(0);
        let mut q: u128 = 0;
        for i in (0..256).rev() {
            let bit = if i >= 128 {
                (self.hi >> (i - 128)) & 1
            } else {
                (self.lo >> i) & 1
            };
            rem = rem.wrapping_add(rem).wrapping_add(U256::from_u128(bit));
            q = q.wrapping_shl(1);
            if rem >= wide_b {
                rem = rem.wrapping_sub(wide_b);
                q |= 1;
            }
        }
        q
    }
}

/// `ln(num / den)`, accurate to a few ulps of the result when the ratio is
/// close to one (the difference is formed exactly first).
pub(crate) fn ln_ratio(num: U256, den: U256) -> f64 {
    let (diff, negative) = num.abs_diff(den);
    let x = diff.to_f64() / den.to_f64();
    if !negative {
        x.ln_1p()
    } else if x < 0.5 {
        (-x).ln_1p()
    } else {
        (num.to_f64() / den.to_f64()).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_match_u128_when_small_and_known_values_when_large() {
        assert_eq!(U256::mul(12345, 678910), U256::from_u128(12345 * 678910));
        let m = U256::mul(u128::MAX, u128::MAX);
        // (2^128 - 1)^2 = 2^256 - 2^129 + 1
        assert_eq!(m.hi, u128::MAX - 1);
        assert_eq!(m.lo, 1);
        let p = U256::mul(1 << 100, 1 << 100);
        assert_eq!(p.hi, 1 << 72);
        assert_eq!(p.lo, 0);
    }

    #[test]
    fn division_is_exact() {
        let cases: [(u128, u128, u128); 5] = [
            (7, 9, 4),
            ((1 << 126) + 12345, (1 << 120) - 1, (1 << 125) + 3),
            (u128::MAX / 3, 987_654_321_987_654_321, 1 << 90),
            (1, 1, 1),
            ((1 << 64) + 1, (1 << 64) - 1, (1 << 64) + 13),
        ];
        for (a, b, d) in cases {
            let n = U256::mul(a, b);
            let q = n.div_floor(d);
            assert_eq!(q, n.div_floor_schoolbook(d));
            // q d <= n < (q + 1) d
            assert!(U256::mul(q, d) <= n);
            assert!(U256::mul(q + 1, d) > n);
        }
    }

    #[test]
    fn ln_ratio_is_accurate_near_one() {
        let a = 1u128 << 100;
        let r = ln_ratio(U256::mul(a + 1, a), U256::mul(a, a));
        let expect = (2f64).powi(-100);
        assert!((r - expect).abs() < expect * 1e-12, "{r}");
        assert_eq!(ln_ratio(U256::from_u128(5), U256::from_u128(5)), 0.0);
        let big = ln_ratio(U256::from_u128(1), U256::from_u128(1 << 20));
        assert!((big + 20.0 * 2f64.ln()).abs() < 1e-12);
        assert_eq!(
            ln_ratio(U256::from_u128(0), U256::from_u128(3)),
            f64::NEG_INFINITY
        );
    }
}
