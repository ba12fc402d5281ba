//! The count attack (D. Cash, P. Grubbs, J. Perry, T. Ristenpart,
//! "Leakage-Abuse Attacks Against Searchable Encryption", CCS 2015, §5).
//!
//! Setting: the attacker observes queries' access patterns (the documents
//! each query's results name) and knows some of the indexed documents'
//! contents. For a query it knows the result count, and for two queries
//! how many results they share; for a keyword it computes the same from
//! the documents it knows. A query whose count only one keyword has is
//! that keyword; then a candidate keyword must co-occur with every keyword
//! already recovered as often as the query does with those queries, which
//! pins down more queries, until nothing changes.
//!
//! **Partial knowledge.** With every document known the counts must match
//! exactly. With a fraction `δ` known (a uniform sample of the `n`
//! documents), a count observed as `c` is seen in the known documents as
//! about `δ·c`: the paper gives each count a window (an interval of
//! confidence around the scaled known count) and keeps a candidate when
//! the observed count falls in it, for the counts as for the
//! co-occurrences. Our window: the known count of a keyword held by `c`
//! of `n` documents is hypergeometric (`δn` documents drawn without
//! replacement), so a candidate is kept when its known count lies within
//! `z` standard deviations `√(δ(1−δ)·c(1−c/n)·n/(n−1))` of `δ·c` (plus a
//! half for the rounding), and between `c − (1−δ)n` and `c`. The paper
//! bounds the deviation with Hoeffding's inequality instead, one width for
//! every count; ours is narrower for rare keywords and for keywords that
//! nearly every document holds.
//!
//! **Trials.** Below full knowledge, windows overlap and often no query
//! has a single candidate to start from. The attack then takes the
//! undecided query with the fewest candidates and tries each of them:
//! with that assumption it propagates (counts, co-occurrence with every
//! query taken so far) and counts the queries left with no keyword at
//! all. The candidates that leave fewest such queries stay; when one
//! does, it is taken, and the next query is tried. This brute-force step
//! is ours (the paper's description starts from the queries whose windows
//! hold one keyword). A window the truth falls outside of can make it
//! wrong, so wider windows (larger `z`) trade recovery for precision.
//!
//! Reported figure (CCS 2015, Fig. 4, Enron, 500 most frequent keywords,
//! queries drawn from the 150 most frequent): with all documents known the
//! count attack recovers about 100 % of the queries.

use std::collections::{BTreeMap, BTreeSet};

use crate::leakage::QueryLeakage;

/// What the attacker knows: some documents, by identifier, with their
/// keywords.
#[derive(Clone, Debug, Default)]
pub struct Knowledge {
    /// Keyword to the known documents holding it.
    by_keyword: BTreeMap<String, BTreeSet<u64>>,
    /// The number of known documents (with or without keywords).
    documents: usize,
    /// The fraction of all documents that are known, in `(0, 1]`.
    fraction: f64,
}

impl Knowledge {
    /// Knowledge of `documents` (identifier, keywords), which are
    /// `fraction` of all the documents indexed.
    pub fn new<'a>(
        documents: impl IntoIterator<Item = (u64, &'a [String])>,
        fraction: f64,
    ) -> Self {
        let mut by_keyword: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
        let mut ids = BTreeSet::new();
        for (id, words) in documents {
            ids.insert(id);
            for w in words {
                by_keyword.entry(w.clone()).or_default().insert(id);
            }
        }
        let fraction = if fraction.is_finite() {
            fraction.clamp(f64::MIN_POSITIVE, 1.0)
        } else {
            1.0
        };
        Knowledge {
            by_keyword,
            documents: ids.len(),
            fraction,
        }
    }

    /// The known documents holding each keyword.
    pub(crate) fn by_keyword(&self) -> &BTreeMap<String, BTreeSet<u64>> {
        &self.by_keyword
    }

    /// The fraction of all documents that are known.
    pub(crate) fn fraction(&self) -> f64 {
        self.fraction
    }

    /// The number of documents indexed, as the known ones and their
    /// fraction give it.
    fn total(&self) -> usize {
        let n = (self.documents as f64 / self.fraction).round();
        if n.is_finite() && n >= 0.0 && n < usize::MAX as f64 {
            (n as usize).max(self.documents)
        } else {
            self.documents
        }
    }
}

/// For each count observed over all documents, the known counts that fit
/// it: `lo[c]..=hi[c]`.
struct Windows {
    lo: Vec<u32>,
    hi: Vec<u32>,
}

impl Windows {
    fn new(max: usize, knowledge: &Knowledge, z: f64) -> Self {
        let delta = knowledge.fraction();
        let known = knowledge.documents as f64;
        let z = if z.is_finite() { z.max(0.0) } else { 0.0 };
        let mut lo = Vec::with_capacity(max + 1);
        let mut hi = Vec::with_capacity(max + 1);
        for c in 0..=max {
            if delta >= 1.0 {
                let c = u32::try_from(c).unwrap_or(u32::MAX);
                lo.push(c);
                hi.push(c);
                continue;
            }
            let cf = c as f64;
            let n = (knowledge.total() as f64).max(cf).max(1.0);
            let share = if n > 1.0 {
                (cf * (1.0 - cf / n) * n / (n - 1.0)).max(0.0)
            } else {
                0.0
            };
            let sd = (delta * (1.0 - delta) * share).sqrt();
            let mean = delta * cf;
            let unknown = n - known;
            let low = (mean - z * sd - 0.5).ceil().max(cf - unknown).max(0.0);
            let high = (mean + z * sd + 0.5).floor().min(cf).min(known);
            lo.push(low as u32);
            hi.push(high.max(0.0) as u32);
        }
        Windows { lo, hi }
    }

    fn fits(&self, observed: u32, known: u32) -> bool {
        let c = observed as usize;
        match (self.lo.get(c), self.hi.get(c)) {
            (Some(&lo), Some(&hi)) => lo <= known && known <= hi,
            _ => false,
        }
    }
}

/// Documents as bit sets, to count shared documents fast.
fn bitsets<'a>(sets: impl Iterator<Item = &'a BTreeSet<u64>> + Clone) -> Vec<Vec<u64>> {
    let ids: BTreeSet<u64> = sets.clone().flat_map(|s| s.iter().copied()).collect();
    let index: BTreeMap<u64, usize> = ids.iter().enumerate().map(|(i, d)| (*d, i)).collect();
    let blocks = ids.len().div_ceil(64).max(1);
    sets.map(|s| {
        let mut b = vec![0u64; blocks];
        for d in s {
            if let Some(&i) = index.get(d) {
                b[i / 64] |= 1 << (i % 64);
            }
        }
        b
    })
    .collect()
}

/// Pairwise shared counts of bit sets, row-major.
fn shared_matrix(sets: &[Vec<u64>]) -> Vec<u32> {
    let n = sets.len();
    let mut out = vec![0u32; n * n];
    for i in 0..n {
        for j in i..n {
            let s: u32 = sets[i]
                .iter()
                .zip(&sets[j])
                .map(|(x, y)| (x & y).count_ones())
                .sum();
            out[i * n + j] = s;
            out[j * n + i] = s;
        }
    }
    out
}

/// The fixed inputs of one run.
struct Problem {
    /// Patterns' observed counts and shared counts (`p × p`).
    shared: Vec<u32>,
    patterns: usize,
    /// Known keywords' counts and co-occurrences (`k × k`).
    cooc: Vec<u32>,
    words: usize,
    windows: Windows,
}

impl Problem {
    fn observed(&self, p: usize, q: usize) -> u32 {
        self.shared[p * self.patterns + q]
    }

    fn known(&self, a: usize, b: usize) -> u32 {
        self.cooc[a * self.words + b]
    }
}

/// What is decided so far.
#[derive(Clone)]
struct State {
    /// Candidates per pattern: keywords whose count and co-occurrence with
    /// every taken pattern fit (the one-to-one rule aside).
    candidates: Vec<Vec<usize>>,
    /// The keyword taken for each pattern.
    found: Vec<Option<usize>>,
    /// Whether a keyword is taken.
    used: Vec<bool>,
    /// Patterns taken, in order.
    order: Vec<usize>,
    /// How many of `order` each pattern's candidates were checked against.
    checked: Vec<usize>,
}

impl State {
    fn take(&mut self, p: usize, w: usize) {
        self.found[p] = Some(w);
        self.used[w] = true;
        self.order.push(p);
    }

    /// The untaken candidates of `p`.
    fn free(&self, p: usize) -> impl Iterator<Item = usize> + '_ {
        self.candidates[p]
            .iter()
            .copied()
            .filter(|&w| !self.used[w])
    }

    /// Filters candidates by co-occurrence with every pattern taken and
    /// takes each pattern left with one untaken candidate, until nothing
    /// changes. Returns how many patterns lost their last candidate, or
    /// stops as soon as more than `limit` did.
    fn propagate(&mut self, pr: &Problem, limit: usize) -> usize {
        let mut emptied = 0;
        loop {
            let mut progress = false;
            for p in 0..pr.patterns {
                if self.found[p].is_some() {
                    continue;
                }
                let had = !self.candidates[p].is_empty();
                let from = self.checked[p];
                let taken: Vec<(usize, usize)> = self.order[from..]
                    .iter()
                    .filter_map(|&q| self.found[q].map(|v| (q, v)))
                    .collect();
                self.checked[p] = self.order.len();
                self.candidates[p].retain(|&w| {
                    taken
                        .iter()
                        .all(|&(q, v)| pr.windows.fits(pr.observed(p, q), pr.known(w, v)))
                });
                if had && self.candidates[p].is_empty() {
                    emptied += 1;
                    if emptied > limit {
                        return emptied;
                    }
                }
                let only = {
                    let mut free = self.free(p);
                    match (free.next(), free.next()) {
                        (Some(w), None) => Some(w),
                        _ => None,
                    }
                };
                if let Some(w) = only {
                    self.take(p, w);
                    progress = true;
                }
            }
            if !progress {
                return emptied;
            }
        }
    }
}

/// At most this many trial propagations per run (each copies the state).
const TRIALS: usize = 4000;

/// The count attack: the keyword recovered for each search pattern (see
/// [`crate::leakage::QueryLeakage::pattern`]) it could pin down, as
/// (pattern, keyword). `z`: the width of the windows, in standard
/// deviations, when only part of the documents is known (unused with all
/// of them known).
pub fn attack(queries: &[QueryLeakage], knowledge: &Knowledge, z: f64) -> Vec<(usize, String)> {
    // One result set per distinct query.
    let mut results: BTreeMap<usize, &BTreeSet<u64>> = BTreeMap::new();
    for q in queries {
        results.entry(q.pattern).or_insert(&q.results);
    }
    let patterns: Vec<usize> = results.keys().copied().collect();
    let words: Vec<&str> = knowledge.by_keyword.keys().map(String::as_str).collect();
    if patterns.is_empty() || words.is_empty() {
        return Vec::new();
    }
    let shared = shared_matrix(&bitsets(results.values().copied()));
    let cooc = shared_matrix(&bitsets(knowledge.by_keyword.values()));
    let (np, nw) = (patterns.len(), words.len());
    let max = (0..np).map(|p| shared[p * np + p]).max().unwrap_or(0) as usize;
    let pr = Problem {
        shared,
        patterns: np,
        cooc,
        words: nw,
        windows: Windows::new(max, knowledge, z),
    };
    let mut state = State {
        candidates: (0..np)
            .map(|p| {
                (0..nw)
                    .filter(|&w| pr.windows.fits(pr.observed(p, p), pr.known(w, w)))
                    .collect()
            })
            .collect(),
        found: vec![None; np],
        used: vec![false; nw],
        order: Vec::new(),
        checked: vec![0; np],
    };
    // Without an assumption, a query left without a keyword is one whose
    // window missed: it stays undecided and the others go on.
    state.propagate(&pr, usize::MAX);
    let mut trials = 0;
    let mut tried = vec![false; np];
    loop {
        // The undecided pattern with the fewest untaken candidates.
        let next = (0..np)
            .filter(|&p| state.found[p].is_none() && !tried[p])
            .map(|p| (state.free(p).count(), p))
            .filter(|&(n, _)| n >= 2)
            .min();
        let Some((n, p)) = next else { break };
        if trials + n > TRIALS {
            break;
        }
        tried[p] = true;
        // Each candidate's conflicts: the queries it leaves without a
        // keyword. Keep those with the fewest.
        let mut scored = Vec::new();
        let mut best = usize::MAX;
        for w in state.free(p).collect::<Vec<_>>() {
            trials += 1;
            let mut trial = state.clone();
            trial.take(p, w);
            let conflicts = trial.propagate(&pr, best);
            best = best.min(conflicts);
            scored.push((conflicts, w));
        }
        let survivors: Vec<usize> = scored
            .iter()
            .filter(|&&(c, _)| c == best)
            .map(|&(_, w)| w)
            .collect();
        match survivors[..] {
            [w] => {
                state.take(p, w);
                state.propagate(&pr, usize::MAX);
                tried.iter_mut().for_each(|t| *t = false);
            }
            [] => {}
            _ => {
                let keep: BTreeSet<usize> = survivors.into_iter().collect();
                state.candidates[p].retain(|w| keep.contains(w) || state.used[*w]);
            }
        }
    }
    state
        .found
        .iter()
        .enumerate()
        .filter_map(|(p, w)| w.map(|w| (patterns[p], words[w].to_owned())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pattern: usize, ids: &[u64]) -> QueryLeakage {
        QueryLeakage {
            pattern,
            results: ids.iter().copied().collect(),
            volume: 0,
        }
    }

    /// Counts alone pin `a` (3 documents); co-occurrence with `a` then
    /// tells `b` from `c` (both in 2 documents).
    #[test]
    fn counts_then_cooccurrence_recover_the_queries() {
        let docs: Vec<(u64, Vec<String>)> = vec![
            (1, vec!["a".into(), "b".into()]),
            (2, vec!["a".into(), "b".into()]),
            (3, vec!["a".into(), "c".into()]),
            (4, vec!["c".into()]),
        ];
        let k = Knowledge::new(docs.iter().map(|(i, w)| (*i, &w[..])), 1.0);
        let got = attack(&[q(0, &[1, 2, 3]), q(1, &[3, 4]), q(2, &[1, 2])], &k, 0.0);
        assert_eq!(
            got,
            vec![
                (0, "a".to_owned()),
                (1, "c".to_owned()),
                (2, "b".to_owned())
            ]
        );
    }

    /// Two keywords with the same documents cannot be told apart: nothing
    /// is claimed for them.
    #[test]
    fn indistinguishable_keywords_are_not_guessed() {
        let docs: Vec<(u64, Vec<String>)> = vec![
            (1, vec!["a".into(), "b".into()]),
            (2, vec!["a".into(), "b".into()]),
        ];
        let k = Knowledge::new(docs.iter().map(|(i, w)| (*i, &w[..])), 1.0);
        assert!(attack(&[q(0, &[1, 2])], &k, 0.0).is_empty());
    }

    /// A toy index: 2,000 documents, keyword `k{i}` in each with
    /// probability `0.05 + 0.02·i`, independently.
    fn toy() -> Vec<(u64, Vec<String>)> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        (0..2000u64)
            .map(|id| {
                let words = (0..40)
                    .filter(|&i| rng.gen_bool(0.05 + 0.02 * f64::from(i)))
                    .map(|i| format!("k{i}"))
                    .collect();
                (id, words)
            })
            .collect()
    }

    /// Each keyword queried once, its results the documents holding it.
    fn queries_of(docs: &[(u64, Vec<String>)]) -> (Vec<QueryLeakage>, Vec<String>) {
        let truth: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
        let queries = truth
            .iter()
            .enumerate()
            .map(|(p, w)| QueryLeakage {
                pattern: p,
                results: docs
                    .iter()
                    .filter(|(_, ws)| ws.contains(w))
                    .map(|(id, _)| *id)
                    .collect(),
                volume: 0,
            })
            .collect();
        (queries, truth)
    }

    /// Three quarters of the documents known: no count is unique, but
    /// windows, co-occurrence and trials name most queries, and rightly.
    #[test]
    fn partial_knowledge_recovers_most_queries_of_a_leaky_index() {
        let docs = toy();
        let (queries, truth) = queries_of(&docs);
        let known = docs.iter().filter(|(id, _)| id % 4 != 0);
        let k = Knowledge::new(known.map(|(i, w)| (*i, &w[..])), 0.75);
        let got = attack(&queries, &k, 3.0);
        let right = got.iter().filter(|(p, w)| truth[*p] == *w).count();
        assert!(right >= 30, "{right} of 40 right, {} claimed", got.len());
        assert!(
            right * 10 >= got.len() * 9,
            "{right} of {} right",
            got.len()
        );
    }

    /// The same index, but the results no longer follow the keywords
    /// (each query returns random documents): little is named rightly.
    #[test]
    fn partial_knowledge_names_little_without_the_access_pattern() {
        use rand::{Rng, SeedableRng};
        let docs = toy();
        let (mut queries, truth) = queries_of(&docs);
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(8);
        for q in &mut queries {
            let share = rng.gen_range(0.05..0.85);
            q.results = (0..2000u64).filter(|_| rng.gen_bool(share)).collect();
        }
        let known = docs.iter().filter(|(id, _)| id % 4 != 0);
        let k = Knowledge::new(known.map(|(i, w)| (*i, &w[..])), 0.75);
        let got = attack(&queries, &k, 3.0);
        let right = got.iter().filter(|(p, w)| truth[*p] == *w).count();
        assert!(right <= 4, "{right} of 40 right");
    }
}
