//! The leakage attacks need, derived from a recorded view and public
//! parameters only.
//!
//! For keyword search, per query:
//! - the **search pattern**: which queries repeat. Two queries are taken
//!   for the same when their requests are byte for byte equal (schemes
//!   with deterministic tokens); schemes that re-randomise their tokens
//!   hide it from this derivation.
//! - the **access pattern**: the documents fetched while answering it
//!   (the store keys of the document service, whose layout is public:
//!   `b` and the identifier, 8 bytes big-endian, after the index's
//!   prefix).
//! - the **volume**: the bytes of the responses.

use std::collections::{BTreeSet, HashMap};

use crate::view::{Observation, Op, Seen};

/// What one query leaked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryLeakage {
    /// Queries with the same number sent the same request bytes.
    pub pattern: usize,
    /// Documents read while answering it.
    pub results: BTreeSet<u64>,
    /// Bytes of the responses.
    pub volume: usize,
}

/// The document identifier a document-service key names, if it is one:
/// `prefix`, then `h` (a document's head) or `b` (a whole document of the
/// earlier layout) and eight bytes big-endian, or `p` (a piece), eight
/// bytes and a four-byte piece number. The store's layout, read from the
/// keys alone (this crate links nothing of Sesame's).
pub fn document_id(prefix: &[u8], key: &[u8]) -> Option<u64> {
    let id = match key.strip_prefix(prefix)?.split_first()? {
        (b'h' | b'b', id) if id.len() == 8 => id,
        (b'p', id) if id.len() == 12 => &id[..8],
        _ => return None,
    };
    Some(u64::from_be_bytes(id.try_into().ok()?))
}

/// The leakage of every search in `view`, in order. `doc` maps a store key
/// to the document it holds (see [`document_id`]).
pub fn queries(view: &[Observation], doc: impl Fn(&[u8]) -> Option<u64>) -> Vec<QueryLeakage> {
    let mut patterns: HashMap<Vec<Vec<u8>>, usize> = HashMap::new();
    let mut out = Vec::new();
    for o in view.iter().filter(|o| o.op == Op::Search) {
        let mut requests = Vec::new();
        let mut results = BTreeSet::new();
        let mut volume = 0;
        for e in &o.events {
            match e {
                Seen::Request(bytes) => {
                    // Document fetches are requests too, and name the
                    // results: only the index's requests make the pattern.
                    requests.push(bytes.clone());
                }
                Seen::Response(n) => volume += n,
                Seen::Read { key, size: Some(_) } => {
                    if let Some(id) = doc(key) {
                        results.insert(id);
                    }
                }
                _ => {}
            }
        }
        let next = patterns.len();
        let pattern = *patterns.entry(requests).or_insert(next);
        out.push(QueryLeakage {
            pattern,
            results,
            volume,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_keys_name_documents() {
        let key = sesame_store::documents::head_key(b"d/i/", 258);
        assert_eq!(document_id(b"d/i/", &key), Some(258));
        assert_eq!(document_id(b"d/j/", &key), None);
        assert_eq!(document_id(b"d/i/", b"d/i/h123"), None);
        // Every key the store writes for a document names it.
        let mut batch = sesame_core::WriteBatch::new();
        sesame_store::documents::put(&mut batch, b"d/i/", [(7, &[1; 10_000][..])]);
        let named: Vec<Option<u64>> = batch
            .ops()
            .iter()
            .map(|op| match op {
                sesame_core::WriteOp::Put { key, .. } => document_id(b"d/i/", key),
                sesame_core::WriteOp::Delete { .. } => panic!("a delete"),
            })
            .collect();
        // Two pieces and the head; then the heads' end marker, no document.
        assert_eq!(named, [Some(7), Some(7), Some(7), None]);
    }

    #[test]
    fn equal_requests_share_a_pattern() {
        let search = |req: &[u8], id: u64| Observation {
            op: Op::Search,
            events: vec![
                Seen::Request(req.to_vec()),
                Seen::Response(10),
                Seen::Read {
                    key: id.to_be_bytes().to_vec(),
                    size: Some(3),
                },
            ],
        };
        let view = vec![
            search(b"a", 1),
            Observation {
                op: Op::Update,
                events: vec![Seen::Request(b"u".to_vec())],
            },
            search(b"b", 2),
            search(b"a", 1),
        ];
        let doc = |k: &[u8]| k.try_into().ok().map(u64::from_be_bytes);
        let q = queries(&view, doc);
        assert_eq!(q.len(), 3);
        assert_eq!((q[0].pattern, q[1].pattern, q[2].pattern), (0, 1, 0));
        assert_eq!(q[1].results, BTreeSet::from([2]));
        assert_eq!(q[2].volume, 10);
    }
}
