//! The file-injection attack (Y. Zhang, J. Katz, C. Papamanthou, "All Your
//! Queries Are Belong to Us: The Power of File-Injection Attacks on
//! Searchable Encryption", USENIX Security 2016, §4, the binary-search
//! attack).
//!
//! The attacker makes the client index documents of its choosing (an
//! e-mail sent to the victim). Over a universe of `K` keywords it injects
//! `⌈log₂(K + 1)⌉` documents; document `j` holds the keywords whose number
//! (counting from 1) has bit `j` set. A query then touches exactly the
//! injected documents of its keyword's bits, which spells its number.
//!
//! What "touches" means comes from the view alone: the store keys each
//! injected document's update wrote, and the keys a query read. Injected
//! *before* the queries, every scheme whose searches read the keyword's
//! entries gives the keyword away. Injected *after* the queries (the
//! adaptive form), the server replays the queries' recorded requests: a
//! forward-private scheme's old tokens reach no entry added since, so the
//! replays read none of the injected documents' keys.
//!
//! Reported figure (USENIX Security 2016): with `K = 5,000` keywords,
//! 13 injected files recover every query on schemes that are not forward
//! private.

use std::collections::BTreeSet;

/// The documents to inject over `universe`: document `j` holds the
/// keywords whose position in `universe`, plus one, has bit `j` set.
/// There are enough documents that no keyword holds them all: a query
/// that touches every injected document (a scheme whose search reads
/// every document's entries) spells no keyword.
pub fn plan(universe: &[String]) -> Vec<Vec<String>> {
    let n = universe.len() as u64 + 1;
    let bits = (u64::BITS - n.leading_zeros()) as usize;
    (0..bits)
        .map(|j| {
            universe
                .iter()
                .enumerate()
                .filter(|(i, _)| (*i as u64 + 1) >> j & 1 == 1)
                .map(|(_, w)| w.clone())
                .collect()
        })
        .collect()
}

/// The keyword a query is taken for: `written[j]` holds the store keys
/// the update that injected document `j` wrote, `read` the keys the query
/// (or its replay) read. Only keys that exactly one injected document
/// wrote count: a key several wrote (a keyword's list head, a tree node)
/// does not say which of them a query touched. `None` when the query read
/// no injected document's key, or spells a number outside the universe.
pub fn recover(
    universe: &[String],
    written: &[BTreeSet<Vec<u8>>],
    read: &BTreeSet<Vec<u8>>,
) -> Option<String> {
    let mut writers: std::collections::BTreeMap<&[u8], usize> = Default::default();
    for keys in written {
        for k in keys {
            *writers.entry(k.as_slice()).or_default() += 1;
        }
    }
    let mut number = 0u64;
    for (j, keys) in written.iter().enumerate() {
        let touched = keys
            .iter()
            .any(|k| writers[k.as_slice()] == 1 && read.contains(k));
        if touched {
            number |= 1 << j;
        }
    }
    let index = usize::try_from(number.checked_sub(1)?).ok()?;
    universe.get(index).cloned()
}

/// The keyword a query is taken for from its result identifiers (the
/// access pattern, as the paper uses it): `injected[j]` is the identifier
/// of injected document `j`, `results` the documents the query fetched.
/// `None` when it fetched no injected document, or spells a number outside
/// the universe.
pub fn recover_from_results(
    universe: &[String],
    injected: &[u64],
    results: &BTreeSet<u64>,
) -> Option<String> {
    let mut number = 0u64;
    for (j, id) in injected.iter().enumerate().take(63) {
        if results.contains(id) {
            number |= 1 << j;
        }
    }
    let index = usize::try_from(number.checked_sub(1)?).ok()?;
    universe.get(index).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_keyword_has_its_own_set_of_injected_documents() {
        let universe: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
        let docs = plan(&universe);
        assert_eq!(docs.len(), 4, "four documents tell eleven numbers apart");
        // Simulate: document j's key is [j]; a query for keyword i reads
        // the keys of the documents that hold it.
        let written: Vec<BTreeSet<Vec<u8>>> = (0..docs.len())
            .map(|j| BTreeSet::from([vec![j as u8]]))
            .collect();
        for w in &universe {
            let read: BTreeSet<Vec<u8>> = docs
                .iter()
                .enumerate()
                .filter(|(_, d)| d.contains(w))
                .map(|(j, _)| vec![j as u8])
                .collect();
            assert_eq!(recover(&universe, &written, &read).as_ref(), Some(w));
        }
        assert_eq!(recover(&universe, &written, &BTreeSet::new()), None);
    }

    #[test]
    fn result_identifiers_spell_the_keyword() {
        let universe: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
        let docs = plan(&universe);
        let ids: Vec<u64> = (0..docs.len() as u64).map(|j| 100 + j).collect();
        for w in &universe {
            let mut results: BTreeSet<u64> = BTreeSet::from([1, 2, 3]);
            for (j, d) in docs.iter().enumerate() {
                if d.contains(w) {
                    results.insert(ids[j]);
                }
            }
            assert_eq!(
                recover_from_results(&universe, &ids, &results).as_ref(),
                Some(w)
            );
        }
        // No injected document fetched: nothing is claimed.
        assert_eq!(
            recover_from_results(&universe, &ids, &BTreeSet::from([1])),
            None
        );
    }
}
