//! Statistical tests of the hypergeometric sampler against the exact
//! distribution: chi-square goodness of fit on urns small enough to
//! enumerate (both branches: inversion and H2PE, every symmetry), and the
//! mean and variance on populations from 2^32 to 2^126, where `f64`
//! samplers fail. Seeded, so a run is reproducible; thresholds are at a
//! significance of about 1e-6.

// Test code: a panic is a failed test (clippy.toml allows this only
// inside #[test] functions, not in their helpers).
#![allow(clippy::unwrap_used)]

use rand::RngCore;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_ore::hg::{self, Coins};

struct ChaChaCoins(ChaCha20Rng);

impl Coins for ChaChaCoins {
    fn uniform(&mut self) -> f64 {
        ((self.0.next_u64() >> 11) as f64 + 0.5) * (1.0 / 9_007_199_254_740_992.0)
    }
    fn below(&mut self, n: u128) -> u128 {
        let bits = 128 - (n - 1).leading_zeros();
        loop {
            let x = (u128::from(self.0.next_u64()) << 64) | u128::from(self.0.next_u64());
            let x = if bits == 0 { 0 } else { x >> (128 - bits) };
            if x < n {
                return x;
            }
        }
    }
}

fn coins(seed: u64) -> ChaChaCoins {
    ChaChaCoins(ChaCha20Rng::seed_from_u64(seed))
}

/// The exact pmf of the number of good balls, over its whole support,
/// from the ratio recurrence around the mode (independent of the
/// sampler's log-ratio code), normalised.
fn pmf(good: u64, bad: u64, draws: u64) -> (u64, Vec<f64>) {
    let (g, b, k) = (good as f64, bad as f64, draws as f64);
    let lo = draws.saturating_sub(bad);
    let hi = good.min(draws);
    let ratio = |i: u64| {
        let i = i as f64;
        (g - i) * (k - i) / ((i + 1.0) * (b - k + i + 1.0))
    };
    let mode = (((k + 1.0) * (g + 1.0)) / (g + b + 2.0)).floor() as u64;
    let mode = mode.clamp(lo, hi);
    let mut w = vec![0.0; (hi - lo + 1) as usize];
    w[(mode - lo) as usize] = 1.0;
    for i in mode..hi {
        w[(i + 1 - lo) as usize] = w[(i - lo) as usize] * ratio(i);
    }
    for i in (lo..mode).rev() {
        w[(i - lo) as usize] = w[(i + 1 - lo) as usize] / ratio(i);
    }
    let total: f64 = w.iter().sum();
    (lo, w.into_iter().map(|x| x / total).collect())
}

/// Chi-square critical value for `df` degrees of freedom at p ~ 1e-6
/// (Wilson-Hilferty).
fn critical(df: usize) -> f64 {
    let df = df as f64;
    let z = 4.75;
    let a = 2.0 / (9.0 * df);
    df * (1.0 - a + z * a.sqrt()).powi(3)
}

fn chi_square(good: u64, bad: u64, draws: u64, n: usize, seed: u64) {
    let (lo, p) = pmf(good, bad, draws);
    let mut counts = vec![0u64; p.len()];
    let mut c = coins(seed);
    for _ in 0..n {
        let x = hg::sample(good.into(), bad.into(), draws.into(), &mut c).unwrap() as u64;
        assert!(
            x >= lo && ((x - lo) as usize) < p.len(),
            "{x} outside the support"
        );
        counts[(x - lo) as usize] += 1;
    }
    // Merge cells until each expects at least 5.
    let (mut stat, mut df) = (0.0, 0usize);
    let (mut e_acc, mut o_acc) = (0.0, 0.0);
    for (pi, &ci) in p.iter().zip(&counts) {
        e_acc += pi * n as f64;
        o_acc += ci as f64;
        if e_acc >= 5.0 {
            stat += (o_acc - e_acc).powi(2) / e_acc;
            df += 1;
            e_acc = 0.0;
            o_acc = 0.0;
        }
    }
    if e_acc > 0.0 {
        stat += (o_acc - e_acc).powi(2) / e_acc.max(1e-9);
        df += 1;
    }
    let df = df.saturating_sub(1).max(1);
    assert!(
        stat < critical(df),
        "({good}, {bad}, {draws}): chi2 = {stat:.1} with {df} df, critical {:.1}",
        critical(df)
    );
}

#[test]
fn inversion_branch_fits_exactly() {
    chi_square(5, 45, 20, 40_000, 1);
    chi_square(12, 1_000_000, 400_000, 40_000, 2);
    // mode near the top after the symmetries: many good, few drawn back
    chi_square(45, 5, 30, 40_000, 3);
}

#[test]
fn h2pe_branch_fits_exactly() {
    chi_square(30, 30, 30, 40_000, 4);
    chi_square(200, 50, 120, 40_000, 5);
    chi_square(40, 60, 90, 40_000, 6);
    chi_square(1000, 3000, 1500, 40_000, 7);
    chi_square(100_000, 100_000, 100_000, 40_000, 8);
}

/// Mean and variance against the exact ones, for huge urns.
fn moments(good: u128, bad: u128, draws: u128, n: usize, seed: u64) {
    let tn = good + bad;
    let (g, b, k, t) = (good as f64, bad as f64, draws as f64, tn as f64);
    let mean = k * g / t;
    let var = k * (g / t) * (b / t) * ((t - k) / (t - 1.0));
    let centre = mean.round() as i128;
    let mut c = coins(seed);
    let (mut s1, mut s2) = (0.0f64, 0.0f64);
    for _ in 0..n {
        let x = hg::sample(good, bad, draws, &mut c).unwrap();
        assert!(x <= good.min(draws));
        let d = (x as i128 - centre) as f64;
        s1 += d;
        s2 += d * d;
    }
    let nf = n as f64;
    let m1 = s1 / nf + (centre as f64 - mean);
    let v = s2 / nf - (s1 / nf).powi(2);
    let sd = var.sqrt();
    assert!(
        m1.abs() < 5.0 * sd / nf.sqrt(),
        "({good}, {bad}, {draws}): mean off by {m1:.3e} (sd {sd:.3e})"
    );
    assert!(
        (v / var - 1.0).abs() < 6.0 * (2.0 / nf).sqrt(),
        "({good}, {bad}, {draws}): variance ratio {:.4}",
        v / var
    );
}

#[test]
fn huge_populations_have_the_right_moments() {
    // BCLO's first node for a 32-bit domain and a 48-bit range.
    moments(1 << 32, (1 << 48) - (1 << 32), 1 << 47, 20_000, 10);
    // 64-bit domain, 96-bit range.
    moments(1 << 64, (1 << 96) - (1 << 64), 1 << 95, 20_000, 11);
    moments(1 << 60, 1 << 100, 1 << 99, 20_000, 12);
    // The largest population accepted, draws a quarter of it.
    moments(1 << 125, 1 << 125, 1 << 124, 20_000, 13);
    // Tiny mode with huge draws: the inversion branch at scale.
    moments(7, 1 << 100, 1 << 99, 20_000, 14);
}

#[test]
fn same_coins_same_sample() {
    let a: Vec<u128> = {
        let mut c = coins(99);
        (0..50)
            .map(|_| hg::sample(1 << 40, 1 << 50, 1 << 45, &mut c).unwrap())
            .collect()
    };
    let mut c = coins(99);
    for x in a {
        assert_eq!(hg::sample(1 << 40, 1 << 50, 1 << 45, &mut c).unwrap(), x);
    }
}
