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
//! replays read none of the injected documents' keys. Where one store key
//! holds several injected documents' entries (SUISE's inverted entry of a
//! keyword), the replay's responses tell which it returned: a
//! response-revealing scheme's answer carries each document's identifier,
//! which the document's update request carried too
//! ([`Echoes`]).
//!
//! Reported figure (USENIX Security 2016): with `K = 5,000` keywords,
//! 13 injected files recover every query on schemes that are not forward
//! private.

use std::collections::{BTreeMap, BTreeSet, HashMap};

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
    spell(universe, &touched_keys(written, read))
}

/// The injected documents (by position in `written`) a query touched
/// through the store: it read a key that exactly one of them wrote (see
/// [`recover`]).
pub fn touched_keys(written: &[BTreeSet<Vec<u8>>], read: &BTreeSet<Vec<u8>>) -> BTreeSet<usize> {
    let mut writers: BTreeMap<&[u8], usize> = BTreeMap::new();
    for keys in written {
        for k in keys {
            *writers.entry(k.as_slice()).or_default() += 1;
        }
    }
    written
        .iter()
        .enumerate()
        .filter(|(_, keys)| {
            keys.iter()
                .any(|k| writers.get(k.as_slice()) == Some(&1) && read.contains(k))
        })
        .map(|(j, _)| j)
        .collect()
}

/// Which injected documents a query's responses name, by bytes alone.
///
/// `requests[j]` holds the requests of the update that injected document
/// `j`; a document is named when a response holds a `window`-byte run
/// that its requests hold and no other injected document's do. A
/// response-revealing scheme names a matching document by its identifier,
/// which its update request carries too: this finds the documents a replay
/// returned where no store key tells them apart (SUISE: one inverted entry
/// per keyword, which every injected document holding the keyword
/// rewrites).
#[derive(Clone, Debug)]
pub struct Echoes {
    /// Each run, packed, to the one document whose requests hold it, or
    /// `None` once a second document's do.
    owner: HashMap<u64, Option<usize>>,
    window: usize,
}

impl Echoes {
    /// The runs of `window` bytes (1 to 8; otherwise nothing is ever
    /// named) of each injected document's update requests.
    pub fn new(requests: &[Vec<Vec<u8>>], window: usize) -> Self {
        let mut owner: HashMap<u64, Option<usize>> = HashMap::new();
        if (1..=8).contains(&window) {
            for (j, reqs) in requests.iter().enumerate() {
                for r in reqs {
                    for w in r.windows(window) {
                        owner
                            .entry(pack(w))
                            .and_modify(|o| {
                                if *o != Some(j) {
                                    *o = None;
                                }
                            })
                            .or_insert(Some(j));
                    }
                }
            }
        }
        Echoes { owner, window }
    }

    /// The documents `responses` name.
    pub fn named(&self, responses: &[Vec<u8>]) -> BTreeSet<usize> {
        if self.owner.is_empty() {
            return BTreeSet::new();
        }
        responses
            .iter()
            .flat_map(|r| r.windows(self.window))
            .filter_map(|w| self.owner.get(&pack(w)).copied().flatten())
            .collect()
    }
}

/// Up to eight bytes as one number.
fn pack(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |acc, &b| acc << 8 | u64::from(b))
}

/// The keyword whose number (from 1) has bit `j` set exactly for the
/// injected documents `j` in `touched`. `None` when `touched` is empty or
/// spells a number outside the universe.
pub fn spell(universe: &[String], touched: &BTreeSet<usize>) -> Option<String> {
    let mut number = 0u64;
    for &j in touched {
        if j >= 63 {
            return None;
        }
        number |= 1 << j;
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

    /// A response names the documents whose requests alone hold one of
    /// its runs; runs that two documents' requests share name nobody.
    #[test]
    fn responses_name_the_documents_whose_requests_they_echo() {
        let requests = vec![
            vec![b"add:AAAAAA:common".to_vec()],
            vec![b"add:BBBBBB:common".to_vec()],
            vec![b"add:CCCCCC:common".to_vec()],
        ];
        let echoes = Echoes::new(&requests, 6);
        let named = echoes.named(&[b"ids:xxAAAAAAyyCCCCCC".to_vec()]);
        assert_eq!(named, BTreeSet::from([0, 2]));
        assert!(echoes.named(&[b"common".to_vec()]).is_empty());
        for unusable in [0, 9] {
            let echoes = Echoes::new(&requests, unusable);
            assert!(echoes.named(&[b"AAAAAAAAAA".to_vec()]).is_empty());
        }
        let universe: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
        assert_eq!(spell(&universe, &named).as_deref(), Some("k4"));
        assert_eq!(spell(&universe, &BTreeSet::new()), None);
        assert_eq!(spell(&universe, &BTreeSet::from([70])), None);
    }
}
