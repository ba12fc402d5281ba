//! IKK (M. S. Islam, M. Kuzu, M. Kantarcioglu, "Access Pattern
//! disclosure on Searchable Encryption: Ramification, Attack and
//! Mitigation", NDSS 2012, §4): query recovery by simulated annealing over
//! the keywords' co-occurrence matrix.
//!
//! Setting: the attacker observes each query's result set and knows a
//! fraction of the documents. From the results it forms the queries'
//! co-occurrence matrix `M` (how many documents two queries share, the
//! diagonal being each query's count); from the known documents, the
//! keywords' matrix `M'`, scaled by the known fraction. It then searches
//! for the assignment of a keyword to each distinct query that minimises
//! `Σ (M[i][j] − M'[σ(i)][σ(j)])²` with simulated annealing: a move gives
//! one query another keyword (swapping with the query holding it, if
//! any), a worse assignment is kept with probability `exp(−Δ/T)`, and `T`
//! cools geometrically.
//!
//! Deviations: the paper also feeds the annealer some known queries; we
//! give it none (only known documents, as for the count attack). The
//! paper's matrices are normalised by the number of documents; ours are
//! scaled by the largest observed count, which changes only the
//! temperature's unit. The start is the assignment by nearest counts, not
//! a random one. Reported figure (NDSS 2012, Fig. 3, Enron, 1,500 and
//! 2,500 keywords, 15 % of queries known): above 80 % of the queries
//! recovered; without known queries and with partial knowledge of the
//! documents, CCS 2015 (§6) found IKK far weaker.

use std::collections::{BTreeMap, BTreeSet};

use crate::count::Knowledge;
use crate::leakage::QueryLeakage;

/// How long and how hot the annealer runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Seed of the annealer's random choices.
    pub seed: u64,
    /// Moves tried.
    pub iterations: usize,
    /// Starting temperature, in units of the squared, scaled counts.
    pub start: f64,
    /// Final temperature.
    pub end: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            seed: 1,
            iterations: 20_000,
            start: 1e-2,
            end: 1e-6,
        }
    }
}

/// A small deterministic generator (SplitMix64): the crate has no
/// dependencies, and the annealer needs no more.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Co-occurrence counts of known keywords, as bit sets over the known
/// documents.
fn keyword_matrix(knowledge: &Knowledge, words: &[&str]) -> Vec<Vec<f64>> {
    let docs: BTreeSet<u64> = knowledge
        .by_keyword()
        .values()
        .flat_map(|s| s.iter().copied())
        .collect();
    let index: BTreeMap<u64, usize> = docs.iter().enumerate().map(|(i, d)| (*d, i)).collect();
    let blocks = docs.len().div_ceil(64).max(1);
    let sets: Vec<Vec<u64>> = words
        .iter()
        .map(|w| {
            let mut b = vec![0u64; blocks];
            if let Some(s) = knowledge.by_keyword().get(*w) {
                for d in s {
                    let i = index[d];
                    b[i / 64] |= 1 << (i % 64);
                }
            }
            b
        })
        .collect();
    let scale = 1.0 / knowledge.fraction();
    sets.iter()
        .map(|a| {
            sets.iter()
                .map(|b| {
                    let shared: u32 = a.iter().zip(b).map(|(x, y)| (x & y).count_ones()).sum();
                    shared as f64 * scale
                })
                .collect()
        })
        .collect()
}

/// IKK: a keyword for every distinct query (search pattern, see
/// [`crate::leakage::QueryLeakage::pattern`]), as (pattern, keyword).
pub fn attack(
    queries: &[QueryLeakage],
    knowledge: &Knowledge,
    settings: &Settings,
) -> Vec<(usize, String)> {
    let mut results: BTreeMap<usize, &BTreeSet<u64>> = BTreeMap::new();
    for q in queries {
        results.entry(q.pattern).or_insert(&q.results);
    }
    let patterns: Vec<usize> = results.keys().copied().collect();
    let words: Vec<&str> = knowledge.by_keyword().keys().map(String::as_str).collect();
    let (p, k) = (patterns.len(), words.len());
    if p == 0 || k == 0 {
        return Vec::new();
    }
    let norm = results.values().map(|r| r.len()).max().unwrap_or(1).max(1) as f64;
    let observed: Vec<Vec<f64>> = patterns
        .iter()
        .map(|a| {
            patterns
                .iter()
                .map(|b| results[a].intersection(results[b]).count() as f64 / norm)
                .collect()
        })
        .collect();
    let known: Vec<Vec<f64>> = keyword_matrix(knowledge, &words)
        .into_iter()
        .map(|row| row.into_iter().map(|x| x / norm).collect())
        .collect();

    // Start: by nearest counts, largest queries first.
    let mut order: Vec<usize> = (0..p).collect();
    order.sort_by(|&a, &b| observed[b][b].total_cmp(&observed[a][a]));
    let mut sigma = vec![usize::MAX; p];
    let mut owner: Vec<Option<usize>> = vec![None; k];
    for &i in &order {
        let best = (0..k).filter(|&w| owner[w].is_none()).min_by(|&a, &b| {
            (known[a][a] - observed[i][i])
                .abs()
                .total_cmp(&(known[b][b] - observed[i][i]).abs())
        });
        if let Some(w) = best {
            sigma[i] = w;
            owner[w] = Some(i);
        }
    }
    if sigma.contains(&usize::MAX) {
        // More distinct queries than known keywords: the rest go unnamed.
        return patterns
            .iter()
            .zip(&sigma)
            .filter(|(_, &w)| w != usize::MAX)
            .map(|(&pat, &w)| (pat, words[w].to_owned()))
            .collect();
    }

    // The cost of the rows of `a` and `b` (their shared entry once).
    let part = |sigma: &[usize], a: usize, b: Option<usize>| -> f64 {
        let d = |i: usize, j: usize| {
            let e = observed[i][j] - known[sigma[i]][sigma[j]];
            e * e
        };
        let mut c: f64 = (0..p).map(|j| d(a, j)).sum();
        if let Some(b) = b {
            c += (0..p).filter(|&j| j != a).map(|j| d(b, j)).sum::<f64>();
        }
        c
    };
    let mut rng = SplitMix(settings.seed);
    let steps = settings.iterations.max(1);
    let ratio = (settings.end / settings.start).powf(1.0 / steps as f64);
    let mut t = settings.start;
    for _ in 0..steps {
        let a = rng.below(p);
        let w = rng.below(k);
        let old = sigma[a];
        if w == old {
            t *= ratio;
            continue;
        }
        let b = owner[w];
        let before = part(&sigma, a, b);
        sigma[a] = w;
        if let Some(b) = b {
            sigma[b] = old;
        }
        let after = part(&sigma, a, b);
        let delta = after - before;
        if delta <= 0.0 || rng.unit() < (-delta / t).exp() {
            owner[w] = Some(a);
            owner[old] = b;
        } else {
            sigma[a] = old;
            if let Some(b) = b {
                sigma[b] = w;
            }
        }
        t *= ratio;
    }
    patterns
        .iter()
        .zip(&sigma)
        .map(|(&pat, &w)| (pat, words[w].to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 40 keywords over 200 documents, keyword `k` in a document with
    /// probability about `1 / (k / 4 + 2)`, from a fixed generator.
    fn corpus() -> Vec<(u64, Vec<String>)> {
        let mut rng = SplitMix(7);
        (0..200u64)
            .map(|d| {
                let words = (0..40)
                    .filter(|k| rng.unit() < 1.0 / (*k as f64 / 4.0 + 2.0))
                    .map(|k| format!("w{k}"))
                    .collect();
                (d, words)
            })
            .collect()
    }

    fn leak(docs: &[(u64, Vec<String>)], words: &[String]) -> Vec<QueryLeakage> {
        words
            .iter()
            .enumerate()
            .map(|(i, w)| QueryLeakage {
                pattern: i,
                results: docs
                    .iter()
                    .filter(|(_, ws)| ws.contains(w))
                    .map(|(d, _)| *d)
                    .collect(),
                volume: 0,
            })
            .collect()
    }

    fn right(got: &[(usize, String)], words: &[String]) -> usize {
        got.iter().filter(|(p, w)| &words[*p] == w).count()
    }

    /// Every document known, the access pattern leaked: the co-occurrence
    /// matrix pins the queries down.
    #[test]
    fn recovers_queries_when_the_access_pattern_leaks() {
        let docs = corpus();
        let words: Vec<String> = (0..20).map(|k| format!("w{k}")).collect();
        let knowledge = Knowledge::new(docs.iter().map(|(d, w)| (*d, &w[..])), 1.0);
        let got = attack(&leak(&docs, &words), &knowledge, &Settings::default());
        assert!(right(&got, &words) >= 18, "{} of 20", right(&got, &words));
    }

    /// Results that say nothing (every query returns the same documents,
    /// as a scheme that hides the access pattern behind fixed-size
    /// answers would): at most chance.
    #[test]
    fn recovers_nothing_without_the_access_pattern() {
        let docs = corpus();
        let words: Vec<String> = (0..20).map(|k| format!("w{k}")).collect();
        let knowledge = Knowledge::new(docs.iter().map(|(d, w)| (*d, &w[..])), 1.0);
        let flat: Vec<QueryLeakage> = (0..20)
            .map(|i| QueryLeakage {
                pattern: i,
                results: (0..50).collect(),
                volume: 0,
            })
            .collect();
        let got = attack(&flat, &knowledge, &Settings::default());
        assert!(right(&got, &words) <= 2, "{} of 20", right(&got, &words));
    }
}
