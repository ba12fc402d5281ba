//! A bit-for-bit replica of the hypergeometric sampler of the `pyope`
//! Python package (version 0.2.2, MIT), used only to cross-check BCLO
//! against an implementation written elsewhere.
//!
//! `pyope` follows NumPy's legacy sampler, not the Kachitvichyanukul and
//! Schmeiser algorithm its comment cites: for at most 10 draws, `HYP`
//! (drawing balls one at a time); otherwise Stadlober's ratio-of-uniforms
//! `HRUA*`, with `ln Gamma` from Zhang and Jin's `loggam`. Its arithmetic
//! is plain `f64`; the order of every operation below is Python's, so the
//! results match to the bit (given the same libm `log`, as on Linux). The
//! comparisons of `ln Gamma` differences lose their accuracy for
//! populations beyond about `2^30`: this is why [`super::sample`] exists.
//! Populations must stay below `2^53` (where Python's exact integers and
//! `f64` part ways).

use std::f64::consts::PI;

use sesame_crypto::counter::{self, Primitive};

/// A stream of coin bits (0 or 1).
pub trait Bits {
    /// The next bit.
    fn bit(&mut self) -> u8;
}

/// `pyope`'s `PRNG.draw`: 32 bits, most significant first, as
/// `out / (2^32 - 1)` (so both 0 and 1 can occur).
fn draw<B: Bits + ?Sized>(coins: &mut B) -> f64 {
    let mut out: u64 = 0;
    for _ in 0..32 {
        out = (out << 1) | u64::from(coins.bit());
    }
    out as f64 / 4_294_967_295.0
}

/// `pyope`'s `HGD.rhyper(kk, nn1, nn2, coins)`: white balls among `kk`
/// drawn from `nn1` white and `nn2` black; one counted
/// [`Primitive::HgSample`].
pub fn rhyper<B: Bits + ?Sized>(kk: i128, nn1: i128, nn2: i128, coins: &mut B) -> i128 {
    let _hg = counter::enter(Primitive::HgSample);
    if kk > 10 {
        hrua(coins, nn1, nn2, kk)
    } else {
        hyp(coins, nn1, nn2, kk)
    }
}

fn hyp<B: Bits + ?Sized>(coins: &mut B, good: i128, bad: i128, sample: i128) -> i128 {
    let d1 = bad + good - sample;
    let d2 = bad.min(good) as f64;
    let mut y = d2;
    let mut k = sample;
    while y > 0.0 {
        let u = draw(coins);
        y -= (u + y / (d1 + k) as f64).floor();
        k -= 1;
        if k == 0 {
            break;
        }
    }
    let mut z = (d2 - y) as i128;
    if good > bad {
        z = sample - z;
    }
    z
}

const D1: f64 = 1.715_527_769_921_413_5;
const D2: f64 = 0.898_916_162_058_898_8;

fn hrua<B: Bits + ?Sized>(coins: &mut B, good: i128, bad: i128, sample: i128) -> i128 {
    let mingoodbad = good.min(bad);
    let popsize = good + bad;
    let maxgoodbad = good.max(bad);
    let m = sample.min(popsize - sample);
    let d4 = mingoodbad as f64 / popsize as f64;
    let d5 = 1.0 - d4;
    let d6 = m as f64 * d4 + 0.5;
    let d7 = (((popsize - m) * sample) as f64 * d4 * d5 / (popsize - 1) as f64 + 0.5).sqrt();
    let d8 = D1 * d7 + D2;
    let d9 = ((m + 1) as f64 * (mingoodbad + 1) as f64 / (popsize + 2) as f64).floor() as i128;
    let d10 = loggam((d9 + 1) as f64)
        + loggam((mingoodbad - d9 + 1) as f64)
        + loggam((m - d9 + 1) as f64)
        + loggam((maxgoodbad - m + d9 + 1) as f64);
    // Python's min(a, b) returns b only when b < a.
    let a = (m.min(mingoodbad) + 1) as f64;
    let b = (d6 + 16.0 * d7).floor();
    let d11 = if b < a { b } else { a };
    let mut z;
    loop {
        let x = draw(coins);
        let yv = draw(coins);
        if x == 0.0 {
            // Python divides by zero here and raises; we draw again.
            continue;
        }
        let w = d6 + d8 * (yv - 0.5) / x;
        if w < 0.0 || w >= d11 {
            continue;
        }
        z = w.floor() as i128;
        let t = d10
            - (loggam((z + 1) as f64)
                + loggam((mingoodbad - z + 1) as f64)
                + loggam((m - z + 1) as f64)
                + loggam((maxgoodbad - m + z + 1) as f64));
        if x * (4.0 - x) - 3.0 <= t {
            break;
        }
        if x * (x - t) >= 1.0 {
            continue;
        }
        if 2.0 * x.ln() <= t {
            break;
        }
    }
    if good > bad {
        z = m - z;
    }
    if m < sample {
        z = good - z;
    }
    z
}

/// Zhang and Jin's `loggam`, as `pyope` writes it.
fn loggam(x: f64) -> f64 {
    const A: [f64; 10] = [
        8.333333333333333e-02,
        -2.777777777777778e-03,
        7.936507936507937e-04,
        -5.952380952380952e-04,
        8.417508417508418e-04,
        -1.917526917526918e-03,
        6.41025641025641e-03,
        -2.955065359477124e-02,
        1.796443723688307e-01,
        -1.392_432_216_905_9,
    ];
    let mut x0 = x;
    let mut n = 0i64;
    if x == 1.0 || x == 2.0 {
        return 0.0;
    } else if x <= 7.0 {
        n = (7.0 - x) as i64;
        x0 = x + n as f64;
    }
    let x2 = 1.0 / (x0 * x0);
    let xp = 2.0 * PI;
    let mut gl0 = A[9];
    for k in (0..=8).rev() {
        gl0 *= x2;
        gl0 += A[k];
    }
    let mut gl = gl0 / x0 + 0.5 * xp.ln() + (x0 - 0.5) * x0.ln() - x0;
    if x <= 7.0 {
        for _ in 1..=n {
            gl -= (x0 - 1.0).ln();
            x0 -= 1.0;
        }
    }
    gl
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Alternating(u64);
    impl Bits for Alternating {
        fn bit(&mut self) -> u8 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            (self.0 >> 63) as u8
        }
    }

    #[test]
    fn loggam_matches_ln_factorial() {
        let mut f = 1.0f64;
        for n in 1..30u32 {
            f *= f64::from(n);
            assert!((loggam(f64::from(n) + 1.0) - f.ln()).abs() < 1e-12, "{n}");
        }
    }

    #[test]
    fn samples_stay_in_the_support() {
        let mut c = Alternating(3);
        for (kk, g, b) in [
            (5i128, 3i128, 20i128),
            (100, 40, 200),
            (1000, 1 << 20, 1 << 30),
        ] {
            for _ in 0..200 {
                let z = rhyper(kk, g, b, &mut c);
                assert!(z >= (kk - b).max(0) && z <= kk.min(g), "{kk} {g} {b}: {z}");
            }
        }
    }
}
