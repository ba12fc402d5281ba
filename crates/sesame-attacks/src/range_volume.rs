//! Database reconstruction from range queries' volumes alone: how many
//! records each value of `1..=N` holds, from nothing but how many records
//! range queries returned (after P. Grubbs, M.-S. Lacharité, B. Minaud,
//! K. G. Paterson, "Pump up the Volume: Practical Database Reconstruction
//! from Volume Leakage on Range Queries", CCS 2018, §3).
//!
//! Let `c_1..c_N` be the counts (the *elementary volumes*) and
//! `p_i = c_1 + … + c_i` their prefix sums, `p_0 = 0`, `p_N = R` the
//! number of records. The volume of the range `[a, b]` is `p_b − p_{a−1}`,
//! so:
//! - `R` is the largest volume;
//! - every prefix sum `p_i` (`0 < i < N`) is a volume (`[1, i]`) whose
//!   complement `R − p_i` is one too (`[i+1, N]`): only such
//!   *complemented* volumes are candidates;
//! - any two prefix sums differ by a volume: `0`, the prefix sums and `R`
//!   form an `N+1`-clique in the graph on candidates whose edges join
//!   values differing by an observed volume.
//!
//! [`counts`] searches that graph for every increasing chain
//! `0 < p_1 < … < p_{N−1} < R` whose pairwise differences are all
//! observed volumes, keeps those that also explain every observed volume
//! (each observed volume is some `p_j − p_i`), and answers when they agree
//! up to reflection (`c_i` or `c_{N+1−i}`: no volume tells the two apart).
//!
//! Deviations from the paper, each recorded in `docs/attacks.md`:
//! - GLMP first take the nodes every clique must hold ("necessary"
//!   nodes) and then extend them with a clique-finding step; we run one
//!   depth-first search over increasing chains with a step budget, fine
//!   on small domains (tens of values), and decline past the budget.
//! - We require every value to hold at least one record (an observed
//!   volume of `0` means some value holds none, and where it lies the
//!   chain does not say): we decline then.
//! - We decline where two chains fit that are not reflections of each
//!   other, rather than output one of them.

use std::collections::BTreeSet;

/// Why [`counts`] named no counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Declined {
    /// No volume was observed, or only empty ones, or the domain is empty.
    NoVolumes,
    /// A range returned no record: some value holds none.
    EmptyValue,
    /// No chain of prefix sums fits the volumes (too few queries, or
    /// volumes that are not the ranges' true sizes).
    NoChain,
    /// Two chains fit that are not reflections of each other.
    Ambiguous,
    /// The search took more than its budget of steps.
    Budget,
}

impl Declined {
    /// The reason in words, for a table.
    pub fn reason(self) -> &'static str {
        match self {
            Declined::NoVolumes => "no volume observed",
            Declined::EmptyValue => {
                "a query returned no record: a value holds none, or volumes are not ranges' sizes"
            }
            Declined::NoChain => "no chain of prefix sums fits the volumes",
            Declined::Ambiguous => "several histograms fit the volumes",
            Declined::Budget => "search budget spent",
        }
    }
}

/// Steps the search may take before it declines.
const BUDGET: u64 = 1_000_000;

/// The distinct volumes of `responses` (each the set of records a query
/// returned): what a server that counts returned records learns.
pub fn volumes<T>(responses: &[BTreeSet<T>]) -> BTreeSet<u64> {
    responses.iter().map(|s| s.len() as u64).collect()
}

/// The number of records of each value `1..=n` up to one global
/// reflection, from the distinct `volumes` (record counts) of range
/// queries over `1..=n`, or why not.
pub fn counts(volumes: &BTreeSet<u64>, n: u64) -> Result<Vec<u64>, Declined> {
    counts_within(volumes, n, BUDGET)
}

/// [`counts`] with a budget of `budget` search steps.
fn counts_within(volumes: &BTreeSet<u64>, n: u64, budget: u64) -> Result<Vec<u64>, Declined> {
    let r = match volumes.last() {
        Some(&r) if r > 0 && n > 0 => r,
        _ => return Err(Declined::NoVolumes),
    };
    if volumes.contains(&0) {
        return Err(Declined::EmptyValue);
    }
    let n = usize::try_from(n).map_err(|_| Declined::NoChain)?;
    if n as u64 > r {
        // Every value holds a record: more values than records cannot fit.
        return Err(Declined::NoChain);
    }
    let candidates: Vec<u64> = volumes
        .iter()
        .copied()
        .filter(|&v| v < r && volumes.contains(&(r - v)))
        .collect();
    let mut search = Search {
        volumes,
        r,
        adjacent: adjacency(&candidates, volumes),
        candidates,
        chain: Vec::with_capacity(n + 1),
        found: None,
        steps: 0,
        budget,
    };
    search.chain.push(0);
    let all = bits_from(0, search.candidates.len());
    search.extend(&all, n - 1)?;
    let chain = search.found.ok_or(Declined::NoChain)?;
    Ok(chain.windows(2).map(|w| w[1] - w[0]).collect())
}

/// The share of values whose count `got` names exactly, up to one global
/// reflection (whichever fits better); `0.0` for lengths that differ.
pub fn count_agreement(got: &[u64], truth: &[u64]) -> f64 {
    if truth.is_empty() || got.len() != truth.len() {
        return 0.0;
    }
    let straight = got.iter().zip(truth).filter(|(g, t)| g == t).count();
    let reflected = got.iter().rev().zip(truth).filter(|(g, t)| g == t).count();
    straight.max(reflected) as f64 / truth.len() as f64
}

/// A set of candidate indices as 64-bit words.
type Bits = Vec<u64>;

/// The indices `from..len`.
fn bits_from(from: usize, len: usize) -> Bits {
    let mut b = vec![0u64; len.div_ceil(64)];
    for i in from..len {
        b[i / 64] |= 1 << (i % 64);
    }
    b
}

/// For each candidate, the later candidates it differs from by an
/// observed volume.
fn adjacency(candidates: &[u64], volumes: &BTreeSet<u64>) -> Vec<Bits> {
    candidates
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let mut b = vec![0u64; candidates.len().div_ceil(64)];
            for (j, &c) in candidates.iter().enumerate().skip(i + 1) {
                if volumes.contains(&(c - a)) {
                    b[j / 64] |= 1 << (j % 64);
                }
            }
            b
        })
        .collect()
}

/// The depth-first search over increasing chains of prefix sums.
struct Search<'a> {
    volumes: &'a BTreeSet<u64>,
    r: u64,
    candidates: Vec<u64>,
    adjacent: Vec<Bits>,
    /// `0` and the prefix sums chosen so far, increasing.
    chain: Vec<u64>,
    /// The one chain found so far (with `0` and `r`), up to reflection.
    found: Option<Vec<u64>>,
    steps: u64,
    budget: u64,
}

impl Search<'_> {
    /// Chooses `need` more prefix sums among `open` (candidates above the
    /// chain's last, adjacent to all of it).
    fn extend(&mut self, open: &Bits, need: usize) -> Result<(), Declined> {
        self.steps += 1;
        if self.steps > self.budget {
            return Err(Declined::Budget);
        }
        if need == 0 {
            return self.complete();
        }
        let available: u32 = open.iter().map(|w| w.count_ones()).sum();
        if (available as usize) < need {
            return Ok(());
        }
        for (w, &word) in open.iter().enumerate() {
            let mut word = word;
            while word != 0 {
                let i = w * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                let next: Bits = open
                    .iter()
                    .zip(&self.adjacent[i])
                    .map(|(a, b)| a & b)
                    .collect();
                self.chain.push(self.candidates[i]);
                let result = self.extend(&next, need - 1);
                self.chain.pop();
                result?;
            }
        }
        Ok(())
    }

    /// Checks a full chain: it must explain every observed volume, and
    /// agree up to reflection with any chain found before.
    fn complete(&mut self) -> Result<(), Declined> {
        let mut chain = self.chain.clone();
        chain.push(self.r);
        let mut differences = BTreeSet::new();
        for (i, &a) in chain.iter().enumerate() {
            for &b in &chain[i + 1..] {
                differences.insert(b - a);
            }
        }
        if !self.volumes.is_subset(&differences) {
            return Ok(());
        }
        let reflected: Vec<u64> = chain.iter().rev().map(|p| self.r - p).collect();
        match &self.found {
            None => self.found = Some(chain),
            Some(f) if *f == chain || *f == reflected => {}
            Some(_) => return Err(Declined::Ambiguous),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator for the tests.
    fn next(x: &mut u64) -> u64 {
        *x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *x >> 33
    }

    /// The volumes of `q` range queries drawn uniformly from the
    /// intervals of `1..=histogram.len()`, computed from the histogram.
    fn observed(histogram: &[u64], q: usize, seed: u64) -> BTreeSet<u64> {
        let n = histogram.len();
        let intervals: Vec<(usize, usize)> =
            (0..n).flat_map(|a| (a..n).map(move |b| (a, b))).collect();
        let mut x = seed;
        (0..q)
            .map(|_| {
                let (a, b) = intervals[next(&mut x) as usize % intervals.len()];
                histogram[a..=b].iter().sum()
            })
            .collect()
    }

    /// A toy table: `records` values drawn at random in `1..=n`, as a
    /// histogram; every value holds at least one.
    fn histogram(n: usize, records: usize, seed: u64) -> Vec<u64> {
        let mut h = vec![1u64; n];
        let mut x = seed;
        for _ in n..records {
            h[next(&mut x) as usize % n] += 1;
        }
        h
    }

    #[test]
    fn uniform_volumes_give_the_histogram_back() {
        for seed in 1..=5 {
            let truth = histogram(12, 400, seed);
            let got = counts(&observed(&truth, 5_000, seed), 12).expect("unique chain");
            assert_eq!(count_agreement(&got, &truth), 1.0, "seed {seed}: {got:?}");
            let mirrored: Vec<u64> = truth.iter().rev().copied().collect();
            assert!(got == truth || got == mirrored);
        }
    }

    /// The same through the access-pattern derivation: the volume of a
    /// query is the number of records it returned.
    #[test]
    fn volumes_of_returned_records_give_the_histogram_back() {
        let truth = histogram(8, 120, 7);
        let values: Vec<usize> = truth
            .iter()
            .enumerate()
            .flat_map(|(v, &c)| std::iter::repeat_n(v, c as usize))
            .collect();
        let returned: Vec<BTreeSet<usize>> = (0..8)
            .flat_map(|a| (a..8).map(move |b| (a, b)))
            .map(|(a, b)| {
                (0..values.len())
                    .filter(|&r| (a..=b).contains(&values[r]))
                    .collect()
            })
            .collect();
        let got = counts(&volumes(&returned), 8).expect("unique chain");
        assert_eq!(count_agreement(&got, &truth), 1.0);
    }

    /// Volumes padded to the whole table (an oblivious protocol), padded
    /// to powers of two, absent, or from too few queries: it declines.
    #[test]
    fn padded_or_absent_volumes_are_declined() {
        let truth = histogram(12, 400, 3);
        let all = BTreeSet::from([400]);
        assert_eq!(counts(&all, 12), Err(Declined::NoChain));
        let powers: BTreeSet<u64> = observed(&truth, 5_000, 3)
            .into_iter()
            .map(u64::next_power_of_two)
            .collect();
        assert_eq!(counts(&powers, 12), Err(Declined::NoChain));
        assert_eq!(counts(&BTreeSet::new(), 12), Err(Declined::NoVolumes));
        assert_eq!(counts(&observed(&truth, 20, 3), 12), Err(Declined::NoChain));
        let mut with_empty = observed(&truth, 5_000, 3);
        with_empty.insert(0);
        assert_eq!(counts(&with_empty, 12), Err(Declined::EmptyValue));
        assert_eq!(
            counts(&observed(&truth, 5_000, 3), 0),
            Err(Declined::NoVolumes)
        );
    }

    /// Volumes that are off by a record here and there (a protocol that
    /// returns extra records) do not give the histogram back.
    #[test]
    fn noisy_volumes_do_not_give_the_histogram_back() {
        let truth = histogram(12, 400, 4);
        let noisy: BTreeSet<u64> = observed(&truth, 5_000, 4)
            .into_iter()
            .map(|v| v + v % 3)
            .collect();
        let got = counts(&noisy, 12);
        assert!(
            got.as_ref()
                .map_or(true, |g| count_agreement(g, &truth) < 0.5),
            "{got:?}"
        );
    }

    /// Two histograms with the same volumes that are not reflections of
    /// each other are not told apart: the attack declines.
    #[test]
    fn homometric_histograms_are_declined() {
        // Prefix sums {0,1,4,10,12,17} and {0,1,8,11,13,17} differ by
        // the same multiset of distances (a classic homometric pair).
        let a = [1u64, 3, 6, 2, 5];
        let b = [1u64, 7, 3, 2, 4];
        let va = observed(&a, 2_000, 1);
        assert_eq!(va, observed(&b, 2_000, 1));
        assert_eq!(counts(&va, 5), Err(Declined::Ambiguous));
    }

    /// Every number observed as a volume (noise, not ranges): the search
    /// stops at its budget instead of running on.
    #[test]
    fn volumes_that_fit_everything_stop_at_the_budget() {
        let every: BTreeSet<u64> = (1..=300).collect();
        assert_eq!(counts_within(&every, 19, 20_000), Err(Declined::Budget));
    }

    #[test]
    fn agreement_is_up_to_reflection() {
        assert_eq!(count_agreement(&[3, 2, 1], &[1, 2, 3]), 1.0);
        assert_eq!(count_agreement(&[1, 5, 3], &[1, 2, 3]), 2.0 / 3.0);
        assert_eq!(count_agreement(&[1, 2], &[1, 2, 3]), 0.0);
    }
}
