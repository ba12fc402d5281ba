//! An exact sampler for the hypergeometric distribution, for BCLO OPE.
//!
//! [`sample`] returns the number of good balls among `draws` balls drawn
//! without replacement from an urn of `good` good and `bad` bad balls,
//! with randomness from a [`Coins`] source: BCLO draws the coins from a PRF
//! keyed per recursion node, so that encryption is deterministic.
//!
//! # Algorithm
//!
//! Kachitvichyanukul and Schmeiser, "Computer generation of hypergeometric
//! random variates" (J. Stat. Comp. Simul. 22, 1985), the algorithm BCLO
//! recommend and CryptDB implements (ACM TOMS 668, H2PE):
//!
//! - the urn is reduced to `n1 <= n2` balls of the two colours and
//!   `k <= (n1 + n2) / 2` draws (by symmetry), the mode is
//!   `m = floor((k + 1)(n1 + 1) / (n1 + n2 + 2))`;
//! - if `m - max(0, k - n2) < 10`: inversion from the bottom of the support
//!   (HIN);
//! - otherwise H2PE: a hat made of a flat centre of width about `3 sigma`
//!   around the mode and two exponential tails whose slopes are the
//!   log-ratios of the probabilities at the centre's edges; a proposal is
//!   accepted when `ln v <= ln f(y) - ln f(m)`.
//!
//! # Arithmetic
//!
//! Floating point is the problem: the Fortran and R code compute
//! `ln f(y) - ln f(m)` as a difference of Stirling sums of size
//! `n ln n`, which in `f64` carries an absolute error of about
//! `n ln n * 2^-53`, already about 1 at `n = 2^48` (seed 004's ciphertext
//! range) and much worse beyond `2^53`. Here:
//!
//! - every integer (population, draws, mode, support bounds, proposals) is
//!   an exact `u128`; products of two of them are exact 256-bit integers;
//! - `ln f(y) - ln f(m)` is computed as
//!   `delta * ln(P / Q) + sum of E(u, delta)`, where `P / Q` is an exact
//!   ratio of 256-bit products whose logarithm comes from `ln_1p` of the
//!   exactly formed difference, and each `E(u, delta) = ln((u + delta)! / u!)
//!   - delta ln(u + delta)` is a small quantity (about `-delta^2 / 2u`)
//!   from the Stirling series written around `ln_1p(t) - t`. The terms of
//!   size `delta ln n` cancel algebraically, not numerically, so the
//!   result has an absolute error of about `1e-13` whatever the population
//!   (up to [`MAX_POPULATION`] = 2^126);
//! - the mode is exact (a 256-by-128-bit division); the flat centre is
//!   sampled as an exact uniform integer, not by truncating a float;
//! - inversion needs no closed-form `f(0)`: it accumulates the weights
//!   `f(i) / f(lo)` by the exact ratio recurrence, normalises by their sum,
//!   and stops once a geometric bound (valid by log-concavity) puts the
//!   rest below `2^-64` of the total.
//!
//! What remains inexact: coins are 53-bit reals, so a proposal from an
//! exponential tail lands in a cell with a relative error of about
//! `sigma * 2^-53`, below `2^-36` for seed 004's parameters (32-bit
//! domain, 48-bit range: `sigma <= 2^15`); and the acceptance test itself
//! is off by about `1e-13`. Both are documented in `docs/schemes/bclo.md`.
//! `rand_distr`'s sampler is not used: it is not exact, differs across
//! platforms, and fails on populations near `2^53`.
//!
//! [`pyope`] is a separate, bit-for-bit replica of the sampler in the
//! `pyope` Python package, used only to cross-check BCLO against it.

pub mod pyope;
mod wide;

use std::sync::OnceLock;

use sesame_core::{Error, Result};
use sesame_crypto::counter::{self, Primitive};

use wide::{ln_ratio, U256};

/// Largest population (`good + bad`) the sampler accepts: `2^126`.
pub const MAX_POPULATION: u128 = 1 << 126;

/// A source of random coins for the sampler.
pub trait Coins {
    /// A uniform real in the open interval `(0, 1)`, with 53 random bits.
    fn uniform(&mut self) -> f64;

    /// A uniform integer in `0..n`, for `n >= 1`.
    fn below(&mut self, n: u128) -> u128;
}

/// Deterministic coins from SplitMix64 (Steele, Lea and Flood, OOPSLA
/// 2014) seeded with the value inside: a generator simple enough to stay
/// the same forever, for known-answer vectors and tests. Not a secret
/// source: BCLO draws its coins from a PRF.
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl Coins for SplitMix64 {
    fn uniform(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / 9_007_199_254_740_992.0
    }

    fn below(&mut self, n: u128) -> u128 {
        ((u128::from(self.next()) << 64) | u128::from(self.next())) % n
    }
}

/// The number of good balls among `draws` drawn without replacement from
/// `good` good and `bad` bad balls; one counted [`Primitive::HgSample`]
/// (the coins it consumes count as nested calls).
///
/// Fails if `good + bad > 2^126` or `draws > good + bad`.
pub fn sample<C: Coins + ?Sized>(
    good: u128,
    bad: u128,
    draws: u128,
    coins: &mut C,
) -> Result<u128> {
    let tn = good
        .checked_add(bad)
        .filter(|&t| t <= MAX_POPULATION)
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "hypergeometric population {good} + {bad} exceeds 2^126"
            ))
        })?;
    if draws > tn {
        return Err(Error::InvalidArgument(format!(
            "cannot draw {draws} balls from {tn}"
        )));
    }
    let _hg = counter::enter(Primitive::HgSample);
    let (n1, n2) = if good <= bad {
        (good, bad)
    } else {
        (bad, good)
    };
    // tn <= 2^126, so 2 draws cannot overflow.
    let complement = 2 * draws >= tn;
    let k = if complement { tn - draws } else { draws };
    let ix = Urn { n1, n2, k }.sample(coins);
    // Back from the reduced urn: ix counts balls of the rarer colour among
    // the k drawn (or, for the complement, among the k left in the urn).
    Ok(match (complement, good > bad) {
        (false, false) => ix,
        (false, true) => draws - ix,
        (true, false) => good - ix,
        (true, true) => draws - bad + ix,
    })
}

/// The reduced urn: `n1 <= n2` balls, `k <= (n1 + n2) / 2` draws; samples
/// the number of the `n1` kind drawn.
struct Urn {
    n1: u128,
    n2: u128,
    k: u128,
}

/// Stirling's series is used for `ln(u!)` from here up (its truncation
/// error is below `3e-17` there).
const U0: u128 = 32;
/// `ln(n!)` is tabulated (exactly rounded) up to here.
const LN_FACT_MAX: u128 = 34;

impl Urn {
    fn sample<C: Coins + ?Sized>(&self, coins: &mut C) -> u128 {
        let lo = self.k.saturating_sub(self.n2);
        let hi = self.n1.min(self.k);
        if lo == hi {
            return lo;
        }
        let m = self.mode();
        if m - lo < 10 {
            self.inversion(lo, hi, coins)
        } else {
            self.h2pe(m, lo, hi, coins)
        }
    }

    fn tn(&self) -> u128 {
        self.n1 + self.n2
    }

    /// `floor((k + 1)(n1 + 1) / (tn + 2))`, exactly.
    fn mode(&self) -> u128 {
        U256::mul(self.k + 1, self.n1 + 1).div_floor(self.tn() + 2)
    }

    /// `f(i + 1) / f(i)` as an `f64` (relative error about `2^-51`).
    fn ratio_up(&self, i: u128) -> f64 {
        let num = U256::mul(self.n1 - i, self.k - i);
        let den = U256::mul(i + 1, self.n2 - self.k + i + 1);
        num.to_f64() / den.to_f64()
    }

    /// Inversion over weights `f(i) / f(lo)` normalised by their sum.
    fn inversion<C: Coins + ?Sized>(&self, lo: u128, hi: u128, coins: &mut C) -> u128 {
        let mut weights: Vec<f64> = Vec::with_capacity(64);
        weights.push(1.0);
        let (mut total, mut w, mut i) = (1.0f64, 1.0f64, lo);
        while i < hi {
            let r = self.ratio_up(i);
            w *= r;
            i += 1;
            weights.push(w);
            total += w;
            // Ratios decrease (log-concavity): past the mode the rest is at
            // most a geometric series of ratio r.
            if r < 1.0 && w * r / (1.0 - r) < total * TAIL_CUT {
                break;
            }
        }
        let u = coins.uniform() * total;
        let mut acc = 0.0;
        for (j, &wj) in weights.iter().enumerate() {
            acc += wj;
            if u < acc {
                return lo + j as u128;
            }
        }
        lo + (weights.len() - 1) as u128
    }

    /// `ln f(y) - ln f(m)`, for `lo <= y <= hi`.
    fn log_ratio(&self, m: u128, y: u128) -> f64 {
        let (n1, k) = (self.n1, self.k);
        let b = self.n2 - k;
        if y == m {
            0.0
        } else if y > m {
            let d = y - m;
            let main = d as f64 * ln_ratio(U256::mul(n1 - m, k - m), U256::mul(y, b + y));
            main + e_term(n1 - y, d) + e_term(k - y, d) - e_term(m, d) - e_term(b + m, d)
        } else {
            let d = m - y;
            let main = d as f64 * ln_ratio(U256::mul(m, b + m), U256::mul(n1 - y, k - y));
            main + e_term(y, d) + e_term(b + y, d) - e_term(n1 - m, d) - e_term(k - m, d)
        }
    }

    /// H2PE: flat centre `[xl, xr)`, exponential tails below `xl` and from
    /// `xr` on.
    fn h2pe<C: Coins + ?Sized>(&self, m: u128, lo: u128, hi: u128, coins: &mut C) -> u128 {
        let (n1, n2, k) = (self.n1 as f64, self.n2 as f64, self.k as f64);
        let tn = n1 + n2;
        let s = ((tn - k) * k * n1 * n2 / ((tn - 1.0) * tn * tn)).sqrt();
        let d = (1.5 * s).floor() as u128;
        let xl = m.saturating_sub(d).max(lo);
        let xr = m.saturating_add(d).saturating_add(1).min(hi + 1);
        let b = self.n2 - self.k;
        // Left tail: y < xl, slope ln(f(xl) / f(xl - 1)).
        let (left, lamdl, tl) = if xl > lo {
            let lam = ln_ratio(
                U256::mul(self.n1 - xl + 1, self.k - xl + 1),
                U256::mul(xl, b + xl),
            );
            let t = self.log_ratio(m, xl);
            (t.exp() / lam, lam, t)
        } else {
            (0.0, 1.0, 0.0)
        };
        // Right tail: y >= xr, slope ln(f(xr - 1) / f(xr)).
        let (right, lamdr, tr) = if xr <= hi {
            let lam = ln_ratio(
                U256::mul(xr, b + xr),
                U256::mul(self.n1 - xr + 1, self.k - xr + 1),
            );
            let t = self.log_ratio(m, xr - 1);
            (t.exp() / lam, lam, t)
        } else {
            (0.0, 1.0, 0.0)
        };
        if !(lamdl > 0.0 && lamdr > 0.0 && left.is_finite() && right.is_finite()) {
            // Not reachable for a hypergeometric distribution (strictly
            // log-concave); inversion is exact, only slower.
            return self.inversion(lo, hi, coins);
        }
        let width = xr - xl;
        let p1 = width as f64;
        let p2 = p1 + left;
        let p3 = p2 + right;
        loop {
            let u = coins.uniform() * p3;
            if u < p1 {
                let y = xl + coins.below(width);
                if coins.uniform().ln() <= self.log_ratio(m, y) {
                    return y;
                }
            } else if u < p2 {
                // y = floor(xl - E / lamdl), E ~ Exp(1); hat ln = tl - E.
                let e = -coins.uniform().ln();
                let c = (e / lamdl).ceil();
                if c > (xl - lo) as f64 {
                    continue;
                }
                let y = xl - c as u128;
                if coins.uniform().ln() + tl - e <= self.log_ratio(m, y) {
                    return y;
                }
            } else {
                // y = floor(xr + E / lamdr); hat ln = tr - E.
                let e = -coins.uniform().ln();
                let c = (e / lamdr).floor();
                if c > (hi - xr) as f64 {
                    continue;
                }
                let y = xr + c as u128;
                if coins.uniform().ln() + tr - e <= self.log_ratio(m, y) {
                    return y;
                }
            }
        }
    }
}

/// Inversion stops when the rest of the distribution weighs less than
/// this fraction of what has been summed.
const TAIL_CUT: f64 = 1.0 / 18_446_744_073_709_551_616.0;

/// `E(u, d) = ln((u + d)! / u!) - d ln(u + d)`, a quantity of size about
/// `-d^2 / 2u`, computed without forming the large terms.
fn e_term(u: u128, d: u128) -> f64 {
    if d == 0 {
        return 0.0;
    }
    if u >= U0 {
        let (uf, df) = (u as f64, d as f64);
        // ln((u+d)!/u!) = (u+d+1/2) ln(u+d) - (u+1/2) ln u - d + S(u+d) - S(u)
        //               = d ln(u+d) + (u+1/2)(ln1p(t) - t) + d/(2u) + S(u+d) - S(u)
        (uf + 0.5) * log1pmx(df / uf) + df / (2.0 * uf) + stirling_tail((u + d) as f64)
            - stirling_tail(uf)
    } else if u + d <= LN_FACT_MAX {
        ln_fact(u + d) - ln_fact(u) - d as f64 * ((u + d) as f64).ln()
    } else {
        // (u+d)!/u! = (U0!/u!) ((U0 + d2)!/U0!) with U0 + d2 = u + d.
        let d2 = d - (U0 - u);
        ln_fact(U0) - ln_fact(u) - (U0 - u) as f64 * ((u + d) as f64).ln() + e_term(U0, d2)
    }
}

/// `ln(1 + t) - t`, accurate also for small `t`.
fn log1pmx(t: f64) -> f64 {
    if t.abs() < 0.1 {
        let mut power = t * t;
        let mut sum = 0.0;
        let mut k = 2.0;
        loop {
            let term = power / k;
            let signed = if (k as u32) & 1 == 0 { -term } else { term };
            sum += signed;
            if term.abs() <= sum.abs() * 1e-17 || k > 60.0 {
                return sum;
            }
            power *= t;
            k += 1.0;
        }
    } else {
        t.ln_1p() - t
    }
}

/// The tail of Stirling's series, `ln(x!) - ((x + 1/2) ln x - x + ln(2 pi)/2)`,
/// to four terms (error below `3e-17` for `x >= 32`).
fn stirling_tail(x: f64) -> f64 {
    let y = 1.0 / x;
    let y2 = y * y;
    y * (1.0 / 12.0 - y2 * (1.0 / 360.0 - y2 * (1.0 / 1260.0 - y2 / 1680.0)))
}

/// `ln(n!)` for `n <= 34`, from the exact factorial.
fn ln_fact(n: u128) -> f64 {
    static TABLE: OnceLock<[f64; LN_FACT_MAX as usize + 1]> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0.0; LN_FACT_MAX as usize + 1];
        let mut f: u128 = 1;
        for (i, slot) in t.iter_mut().enumerate().skip(1) {
            // 34! < 2^128.
            f *= i as u128;
            *slot = (f as f64).ln();
        }
        t
    });
    table[n as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lgamma1(n: u128) -> f64 {
        // ln(n!) by summing logs: slow but independent.
        (2..=n).map(|i| (i as f64).ln()).sum()
    }

    #[test]
    fn e_term_matches_direct_sums() {
        for (u, d) in [
            (0u128, 5u128),
            (3, 40),
            (31, 1),
            (32, 7),
            (100, 3),
            (500, 200),
            (5, 29),
        ] {
            let direct = lgamma1(u + d) - lgamma1(u) - d as f64 * ((u + d) as f64).ln();
            let e = e_term(u, d);
            assert!(
                (e - direct).abs() < 1e-9 * direct.abs().max(1.0),
                "{u} {d}: {e} vs {direct}"
            );
        }
    }

    #[test]
    fn log_ratio_matches_products_on_small_urns() {
        let urn = Urn {
            n1: 300,
            n2: 700,
            k: 400,
        };
        let m = urn.mode();
        // f(y)/f(m) by the ratio recurrence in f64.
        let mut lr = 0.0;
        for y in m..m + 60 {
            assert!((urn.log_ratio(m, y) - lr).abs() < 1e-10, "y = {y}");
            lr += urn.ratio_up(y).ln();
        }
        let mut lr = 0.0;
        for y in (m - 60..=m).rev() {
            assert!((urn.log_ratio(m, y) - lr).abs() < 1e-10, "y = {y}");
            lr -= urn.ratio_up(y - 1).ln();
        }
    }

    #[test]
    fn mode_is_the_mode() {
        for (n1, n2, k) in [
            (300u128, 700u128, 400u128),
            (1 << 40, 1 << 80, 1 << 79),
            (11, 11, 11),
        ] {
            let urn = Urn { n1, n2, k };
            let m = urn.mode();
            assert!(urn.ratio_up(m) <= 1.0 && (m == 0 || urn.ratio_up(m - 1) >= 1.0));
        }
    }

    #[test]
    fn degenerate_urns_need_no_coins() {
        let mut c = SplitMix64(1);
        assert_eq!(sample(10, 0, 4, &mut c).ok(), Some(4));
        assert_eq!(sample(0, 10, 4, &mut c).ok(), Some(0));
        assert_eq!(sample(5, 5, 10, &mut c).ok(), Some(5));
        assert_eq!(sample(5, 5, 0, &mut c).ok(), Some(0));
        assert!(sample(5, 5, 11, &mut c).is_err());
        assert!(sample(1 << 126, 1, 1, &mut c).is_err());
    }
}
