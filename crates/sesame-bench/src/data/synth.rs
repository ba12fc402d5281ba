//! Seeded synthetic data: the distributions of seed 004 and the keyword
//! workloads of the SSE experiments.
//!
//! - [`uniform`]: `n` integers uniform in `[0, n/3)` ("range is a third of
//!   the data size", seed 004 §5.2);
//! - [`normal`]: `n` integers from a normal law of mean `n/2` and standard
//!   deviation `0.1 n` (seed 004 §5.2), rounded and clamped to `[0, n]`;
//! - [`Zipf`] and [`zipf_counts`]/[`zipf_multimap`]: keyword frequencies
//!   proportional to `1 / rank^s`;
//! - [`keyword_groups`]: OpenSSE-style groups, keyword `g{k}_{i}` matching
//!   exactly `10^k` documents.

use std::collections::BTreeSet;

use rand::Rng;
use sesame_sse::Multimap;

use super::rng;

/// `n` values uniform in `[0, max(1, n/3))`.
pub fn uniform(n: usize, seed: u64) -> Vec<u64> {
    let range = (n as u64 / 3).max(1);
    let mut r = rng(seed, "uniform");
    (0..n).map(|_| r.gen_range(0..range)).collect()
}

/// `n` values from a normal law of mean `n/2` and standard deviation
/// `0.1 n`, rounded to integers and clamped to `[0, n]`.
pub fn normal(n: usize, seed: u64) -> Vec<u64> {
    let mean = n as f64 / 2.0;
    let sd = n as f64 / 10.0;
    let mut r = rng(seed, "normal");
    (0..n)
        .map(|_| {
            let x = mean + sd * standard_normal(&mut r);
            x.round().clamp(0.0, n as f64) as u64
        })
        .collect()
}

/// One standard normal sample (Box-Muller).
pub fn standard_normal(r: &mut impl Rng) -> f64 {
    // 1 - u is in (0, 1], so its logarithm is finite.
    let u: f64 = 1.0 - r.gen::<f64>();
    let v: f64 = r.gen();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// A Zipf law over ranks `1..=n`: `P(k)` proportional to `1 / k^s`.
#[derive(Clone, Debug)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// The law over `n >= 1` ranks with exponent `s >= 0` (`s = 1` is the
    /// classic word-frequency law).
    pub fn new(n: usize, s: f64) -> Zipf {
        let weights: Vec<f64> = (1..=n.max(1)).map(|k| (k as f64).powf(-s)).collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let cdf = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        Zipf { cdf }
    }

    /// The probability of rank `k` (from 1).
    pub fn probability(&self, k: usize) -> f64 {
        match k {
            0 => 0.0,
            1 => self.cdf.first().copied().unwrap_or(0.0),
            k => match (self.cdf.get(k - 1), self.cdf.get(k - 2)) {
                (Some(a), Some(b)) => a - b,
                _ => 0.0,
            },
        }
    }

    /// One rank, from 1.
    pub fn sample(&self, r: &mut impl Rng) -> usize {
        let u: f64 = r.gen();
        let i = self.cdf.partition_point(|&c| c <= u);
        i.min(self.cdf.len() - 1) + 1
    }
}

/// How many documents each of `keywords` keywords matches when `pairs`
/// (keyword, document) pairs follow a Zipf law of exponent `s`: rank `k`
/// gets `pairs / k^s / H` rounded, at least 1 and at most `docs`.
pub fn zipf_counts(keywords: usize, pairs: usize, docs: usize, s: f64) -> Vec<usize> {
    let z = Zipf::new(keywords, s);
    (1..=keywords)
        .map(|k| {
            let c = (pairs as f64 * z.probability(k)).round() as usize;
            c.clamp(1, docs.max(1))
        })
        .collect()
}

/// A multimap over documents `0..docs` whose keyword `z{rank}` matches
/// [`zipf_counts`] documents, chosen at random without repetition.
pub fn zipf_multimap(keywords: usize, pairs: usize, docs: usize, s: f64, seed: u64) -> Multimap {
    let mut r = rng(seed, "zipf");
    zipf_counts(keywords, pairs, docs, s)
        .into_iter()
        .enumerate()
        .map(|(i, count)| {
            let mut ids: Vec<u64> = rand::seq::index::sample(&mut r, docs.max(1), count)
                .into_iter()
                .map(|x| x as u64)
                .collect();
            ids.sort_unstable();
            (format!("z{}", i + 1).into_bytes(), ids)
        })
        .collect()
}

/// A level of keyword groups: `keywords` keywords with `10^k` matches each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    /// Each keyword matches `10^k` documents.
    pub k: u32,
    /// Number of keywords at this level.
    pub keywords: usize,
}

impl Level {
    /// Documents matched by each keyword: `10^k`.
    pub fn matches(&self) -> usize {
        10usize.pow(self.k)
    }

    /// The name of keyword `i` of this level: `g{k}_{i}`.
    pub fn keyword(&self, i: usize) -> Vec<u8> {
        format!("g{}_{i}", self.k).into_bytes()
    }
}

/// Levels `0..=max_k` holding about `pairs` pairs in all, split evenly: each
/// level gets `pairs / (max_k + 1)` pairs, that is that many divided by
/// `10^k` keywords (at least one, so every result size can be queried).
pub fn balanced_levels(pairs: usize, max_k: u32) -> Vec<Level> {
    let share = pairs / (max_k as usize + 1);
    (0..=max_k)
        .map(|k| Level {
            k,
            keywords: (share / 10usize.pow(k)).max(1),
        })
        .collect()
}

/// Total pairs of `levels`.
pub fn pairs_of(levels: &[Level]) -> usize {
    levels.iter().map(|l| l.keywords * l.matches()).sum()
}

/// The keyword-group multimap of `levels`: keyword `g{k}_{i}` matches
/// exactly `10^k` distinct documents, drawn at random from
/// `0..max(pairs, 10^max_k)`.
pub fn keyword_groups(levels: &[Level], seed: u64) -> Multimap {
    let space = levels
        .iter()
        .map(Level::matches)
        .max()
        .unwrap_or(1)
        .max(pairs_of(levels));
    let mut r = rng(seed, "keyword-groups");
    let mut map = Multimap::new();
    for level in levels {
        for i in 0..level.keywords {
            let ids: BTreeSet<u64> = rand::seq::index::sample(&mut r, space, level.matches())
                .into_iter()
                .map(|x| x as u64)
                .collect();
            map.insert(level.keyword(i), ids.into_iter().collect());
        }
    }
    map
}

/// Number of (keyword, document) pairs of a multimap.
pub fn pair_count(map: &Multimap) -> usize {
    map.values().map(Vec::len).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_sd(v: &[u64]) -> (f64, f64) {
        let n = v.len() as f64;
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt())
    }

    #[test]
    fn uniform_has_the_promised_range_and_moments() {
        let n = 30_000;
        let v = uniform(n, 1);
        assert_eq!(v.len(), n);
        assert_eq!(v, uniform(n, 1));
        assert_ne!(v, uniform(n, 2));
        assert!(v.iter().all(|&x| x < 10_000));
        let (mean, sd) = mean_sd(&v);
        // Uniform on [0, 10000): mean 5000, sd 10000 / sqrt(12) = 2887.
        assert!((mean - 5000.0).abs() < 100.0, "{mean}");
        assert!((sd - 2887.0).abs() < 100.0, "{sd}");
        assert!(v.iter().any(|&x| x < 50) && v.iter().any(|&x| x > 9950));
    }

    #[test]
    fn normal_has_the_promised_moments() {
        let n = 20_000;
        let v = normal(n, 1);
        assert_eq!(v.len(), n);
        assert_eq!(v, normal(n, 1));
        assert_ne!(v, normal(n, 2));
        let (mean, sd) = mean_sd(&v);
        assert!((mean - 10_000.0).abs() < 100.0, "{mean}");
        assert!((sd - 2_000.0).abs() < 100.0, "{sd}");
        // About 68% within one standard deviation.
        let within = v.iter().filter(|&&x| x.abs_diff(10_000) <= 2_000).count();
        let share = within as f64 / n as f64;
        assert!((share - 0.6827).abs() < 0.02, "{share}");
    }

    #[test]
    fn zipf_frequencies_follow_the_law() {
        let z = Zipf::new(100, 1.0);
        let total: f64 = (1..=100).map(|k| z.probability(k)).sum();
        assert!((total - 1.0).abs() < 1e-9);
        assert!((z.probability(1) / z.probability(2) - 2.0).abs() < 1e-9);
        let mut r = rng(5, "t");
        let mut hits = [0usize; 101];
        for _ in 0..50_000 {
            hits[z.sample(&mut r)] += 1;
        }
        assert_eq!(hits[0], 0);
        let ratio = hits[1] as f64 / hits[10] as f64;
        assert!((ratio - 10.0).abs() < 2.0, "{ratio}");

        let counts = zipf_counts(1000, 100_000, 5_000, 1.0);
        assert!(counts.windows(2).all(|w| w[0] >= w[1]));
        assert_eq!(counts[0], 5_000); // capped at the number of documents
        let m = zipf_multimap(1000, 100_000, 5_000, 1.0, 9);
        assert_eq!(m, zipf_multimap(1000, 100_000, 5_000, 1.0, 9));
        assert_eq!(m.len(), 1000);
        assert_eq!(m[b"z2".as_slice()].len(), counts[1]);
        assert!(m.values().all(|ids| ids.windows(2).all(|w| w[0] < w[1])));
    }

    #[test]
    fn keyword_groups_have_exact_sizes() {
        let levels = balanced_levels(30_000, 3);
        assert_eq!(
            levels,
            [
                Level {
                    k: 0,
                    keywords: 7500
                },
                Level {
                    k: 1,
                    keywords: 750
                },
                Level { k: 2, keywords: 75 },
                Level { k: 3, keywords: 7 }
            ]
        );
        let m = keyword_groups(&levels, 3);
        assert_eq!(m, keyword_groups(&levels, 3));
        assert_ne!(m, keyword_groups(&levels, 4));
        assert_eq!(pair_count(&m), pairs_of(&levels));
        assert_eq!(m[b"g3_6".as_slice()].len(), 1000);
        assert_eq!(m[b"g0_7499".as_slice()].len(), 1);
        assert!(!m.contains_key(b"g3_7".as_slice()));
        for ids in m.values() {
            assert!(ids.windows(2).all(|w| w[0] < w[1]));
        }
        // Every level is present even when the share is small.
        assert_eq!(balanced_levels(10, 3)[3].keywords, 1);
    }
}
