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
//! With every document known the counts must match exactly. With a
//! fraction `δ` known (a uniform sample), a keyword's known count is about
//! `δ` times its true count: a candidate is kept when the two lie within
//! `z` standard deviations of that binomial (the paper uses confidence
//! intervals in the same way).
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
        for (id, words) in documents {
            for w in words {
                by_keyword.entry(w.clone()).or_default().insert(id);
            }
        }
        Knowledge {
            by_keyword,
            fraction: fraction.clamp(f64::MIN_POSITIVE, 1.0),
        }
    }

    pub(crate) fn count(&self, w: &str) -> usize {
        self.by_keyword.get(w).map_or(0, BTreeSet::len)
    }

    /// The known documents holding each keyword.
    pub(crate) fn by_keyword(&self) -> &BTreeMap<String, BTreeSet<u64>> {
        &self.by_keyword
    }

    /// The fraction of all documents that are known.
    pub(crate) fn fraction(&self) -> f64 {
        self.fraction
    }

    fn cooccurrence(&self, a: &str, b: &str) -> usize {
        match (self.by_keyword.get(a), self.by_keyword.get(b)) {
            (Some(x), Some(y)) => x.intersection(y).count(),
            _ => 0,
        }
    }

    /// Whether `known` (counted in the known documents) fits `observed`
    /// (counted in all of them).
    fn fits(&self, observed: usize, known: usize, z: f64) -> bool {
        if self.fraction >= 1.0 {
            return observed == known;
        }
        let n = observed as f64;
        let mean = n * self.fraction;
        let sd = (n * self.fraction * (1.0 - self.fraction)).sqrt();
        (known as f64 - mean).abs() <= z * sd + 0.5 && known <= observed
    }
}

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
    let shared = |a: usize, b: usize| results[&a].intersection(results[&b]).count();

    // Candidates by count.
    let mut candidates: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for &p in &patterns {
        let c = results[&p].len();
        let fit: Vec<&str> = knowledge
            .by_keyword
            .keys()
            .map(String::as_str)
            .filter(|w| knowledge.fits(c, knowledge.count(w), z))
            .collect();
        candidates.insert(p, fit);
    }
    let mut found: BTreeMap<usize, &str> = BTreeMap::new();
    loop {
        let mut progress = false;
        for &p in &patterns {
            if found.contains_key(&p) {
                continue;
            }
            let used: BTreeSet<&str> = found.values().copied().collect();
            let fit: Vec<&str> = candidates[&p]
                .iter()
                .copied()
                .filter(|w| !used.contains(w))
                .filter(|w| {
                    found.iter().all(|(&q, v)| {
                        knowledge.fits(shared(p, q), knowledge.cooccurrence(w, v), z)
                    })
                })
                .collect();
            if let [only] = fit[..] {
                found.insert(p, only);
                progress = true;
            }
            candidates.insert(p, fit);
        }
        if !progress {
            break;
        }
    }
    found.into_iter().map(|(p, w)| (p, w.to_owned())).collect()
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
}
