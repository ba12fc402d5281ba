//! CHLH15: "Efficient wildcard search over encrypted data", C. Hu and
//! L. Han, International Journal of Information Security 15(5), 2015, in
//! the variant of seed 001 (Liu, Tong, Lam: SSE schemes on mobile
//! devices): one keyed Bloom filter per document.
//!
//! Every keyword of a document contributes its (position, character)
//! pairs and its length to the document's filter, under a keyed hash. A
//! query (exact keyword, prefix `abc*`, or pattern with `?` and `*`)
//! becomes a trapdoor filter holding the pairs it fixes; the server
//! returns every document whose filter contains the trapdoor (bitwise AND
//! equals the trapdoor), together with the document's encrypted keyword
//! list. The client decrypts the lists, keeps the documents that really
//! match and counts the false positives it removed.
//!
//! See `docs/schemes/chlh15.md` for leakage and deviations.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    channel, BackwardPrivacy, Channel, Error, Handler, IoCounts, Params, QueryKind, Result,
    SchemeDescriptor, SchemeKind, Store, WriteBatch,
};
use sesame_crypto::aead::Aes256GcmSiv;
use sesame_crypto::bloom::{BloomFilter, BloomKey};
use sesame_crypto::key::Key;

use crate::api::{DocId, Io, KeywordClient, KeywordScheme, Multimap};
use crate::common;
use crate::query::{self, wildcard_matches, Query, QueryResult};

/// Descriptor of CHLH15.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "chlh15",
    title: "CHLH15 (wildcard search with per-document Bloom filters)",
    citation: "C. Hu, L. Han. Efficient wildcard search over encrypted data. International \
               Journal of Information Security 15(5), pp. 539-547, 2015; per-document variant of \
               D. Y. W. Liu, C. T. Tong, W. W. M. Lam, Performance Analysis of SSE Schemes on \
               Mobile Devices, 2018",
    kind: SchemeKind::StaticSse,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[
        QueryKind::Exact,
        QueryKind::Prefix,
        QueryKind::Wildcard,
        QueryKind::Conjunctive,
    ],
    leakage: "Setup: the number of documents, the filter size, the length of each document's \
              encrypted keyword list, and the number of set bits of each filter (about the \
              number of distinct (position, character) pairs and lengths). Every filter uses \
              one Bloom key, and a smaller filter holds an element at its larger position \
              folded, so a snapshot of the index shows which documents share elements (a \
              bit set in both filters, beyond chance) and how similar their keyword sets \
              are; once a trapdoor is seen, its positions label those elements in every \
              filter, present and future. Search: the \
              trapdoor's bit positions, so equal queries and queries sharing a (position, \
              character) pair are linkable (search pattern and more), and the candidate \
              documents, false positives included (response-revealing); the client fetches \
              the candidates' keyword lists, revealing their count.",
    doc: "docs/schemes/chlh15.md",
};

/// Default false-positive rate of a document filter.
pub const DEFAULT_FPR: f64 = 0.001;
/// Default number of distinct elements a document filter is sized for.
pub const DEFAULT_ELEMENTS: u64 = 4096;

/// The registry entry of CHLH15.
pub fn scheme() -> KeywordScheme {
    common::keyword_scheme!(
        &DESCRIPTOR,
        &[
            ("fpr", "false-positive rate of a document filter (0.001)"),
            (
                "elements",
                "distinct (position, character) pairs and lengths a document filter holds \
                 before it saturates (4096)",
            ),
        ],
        ChlhClient,
        ChlhServer
    )
}

crate::common::redacted_debug!(Request);

/// A CHLH15 request.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Stores documents: filter words and encrypted keyword list; `reset`
    /// first removes the earlier index.
    Put {
        /// Remove the earlier index first.
        reset: bool,
        /// (document, filter words, encrypted keyword list).
        docs: Vec<(DocId, Vec<u64>, Vec<u8>)>,
    },
    /// The candidates of a trapdoor filter.
    Search {
        /// The trapdoor filter's words.
        trapdoor: Vec<u64>,
    },
}

/// A CHLH15 response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The documents are stored.
    Stored,
    /// Candidate documents with their encrypted keyword lists.
    Candidates(Vec<(DocId, Vec<u8>)>),
}

#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    master: [u8; 32],
    fpr: f64,
    elements: u64,
}

/// Bits of a filter sized for `n` elements at rate `fpr`: the optimal size
/// rounded up to a power of two (at least 64), so that every smaller
/// filter's size divides it and a trapdoor folds onto any filter.
fn filter_bits(n: u64, fpr: f64) -> Result<u64> {
    let (m, _) = BloomFilter::optimal_params(n, fpr)
        .map_err(|e| Error::InvalidArgument(format!("chlh15: {e}")))?;
    Ok(m.max(64).next_power_of_two())
}

/// What a client matches keywords against.
enum Pattern<'a> {
    Exact(&'a [u8]),
    Prefix(&'a [u8]),
    Wildcard(&'a [u8]),
}

impl Pattern<'_> {
    fn matches(&self, keyword: &[u8]) -> bool {
        match self {
            Pattern::Exact(w) => keyword == *w,
            Pattern::Prefix(p) => keyword.starts_with(p),
            Pattern::Wildcard(p) => wildcard_matches(p, keyword),
        }
    }

    /// The filter elements every matching keyword has.
    fn elements(&self) -> Vec<Vec<u8>> {
        let (fixed, len) = match self {
            Pattern::Exact(w) => (*w, Some(w.len())),
            Pattern::Prefix(p) => (*p, None),
            Pattern::Wildcard(p) => match p.iter().position(|&b| b == b'*') {
                Some(star) => (&p[..star], None),
                None => (*p, Some(p.len())),
            },
        };
        let wildcard = matches!(self, Pattern::Wildcard(_));
        let known = |c: u8| !(wildcard && c == b'?');
        let mut out = Vec::new();
        for (i, &c) in fixed.iter().enumerate() {
            if !known(c) {
                continue;
            }
            out.push(char_element(i, c));
            for n in 2..=GRAM {
                if let Some(g) = fixed.get(i..i + n).filter(|g| g.iter().all(|&d| known(d))) {
                    out.push(gram_element(i, g));
                }
            }
        }
        if let Some(len) = len {
            out.push(length_element(len));
            if let Some(&last) = fixed.last().filter(|&&c| known(c)) {
                out.push(end_element(len, last));
            }
        }
        out
    }
}

/// The element of character `c` at position `i`.
fn char_element(i: usize, c: u8) -> Vec<u8> {
    let mut e = vec![b'c'];
    e.extend_from_slice(&(i as u64).to_le_bytes());
    e.push(c);
    e
}

/// Longest run of neighbouring characters that is one element.
const GRAM: usize = 3;

/// The element of the characters `g` (2 to [`GRAM`] of them) starting at
/// position `i`: binds neighbouring characters to one keyword, which cuts
/// the false positives of one filter per document (see the scheme's doc).
fn gram_element(i: usize, g: &[u8]) -> Vec<u8> {
    let mut e = vec![b'g'];
    e.extend_from_slice(&(i as u64).to_le_bytes());
    e.push(g.len() as u8);
    e.extend_from_slice(g);
    e
}

/// The element of a keyword length.
fn length_element(len: usize) -> Vec<u8> {
    let mut e = vec![b'l'];
    e.extend_from_slice(&(len as u64).to_le_bytes());
    e
}

/// The element of a keyword length with its last character.
fn end_element(len: usize, last: u8) -> Vec<u8> {
    let mut e = vec![b'e'];
    e.extend_from_slice(&(len as u64).to_le_bytes());
    e.push(last);
    e
}

/// The distinct elements of a document's keywords.
fn document_elements(words: &[&[u8]]) -> BTreeSet<Vec<u8>> {
    let mut out = BTreeSet::new();
    for w in words {
        for (i, &c) in w.iter().enumerate() {
            out.insert(char_element(i, c));
            for n in 2..=GRAM {
                if let Some(g) = w.get(i..i + n) {
                    out.insert(gram_element(i, g));
                }
            }
        }
        out.insert(length_element(w.len()));
        if let Some(&last) = w.last() {
            out.insert(end_element(w.len(), last));
        }
    }
    out
}

/// How many distinct elements a document with these keywords puts in its
/// filter (what the `elements` parameter must cover).
pub fn element_count(words: &[&[u8]]) -> usize {
    document_elements(words).len()
}

/// The client half of CHLH15: the filter and list keys and the filter
/// parameters.
pub struct ChlhClient {
    master: Key<32>,
    bloom: BloomKey,
    lists: Aes256GcmSiv,
    fpr: f64,
    elements: u64,
    m: u64,
    k: u32,
}

impl std::fmt::Debug for ChlhClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChlhClient")
            .field("fpr", &self.fpr)
            .field("elements", &self.elements)
            .field("m", &self.m)
            .field("k", &self.k)
            .finish_non_exhaustive()
    }
}

impl ChlhClient {
    /// A client with a fresh key; parameters `fpr` and `elements`.
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        params.only(DESCRIPTOR.name, &["fpr", "elements"])?;
        let fpr: f64 = params.get_or("fpr", DEFAULT_FPR)?;
        let elements: u64 = params.get_or("elements", DEFAULT_ELEMENTS)?;
        Self::with_key(Key::generate(rng), fpr, elements)
    }

    fn with_key(master: Key<32>, fpr: f64, elements: u64) -> Result<Self> {
        if !(fpr > 0.0 && fpr < 1.0) {
            return Err(Error::InvalidArgument(format!(
                "chlh15: fpr={fpr} must be between 0 and 1"
            )));
        }
        if elements == 0 || elements > 1 << 24 {
            return Err(Error::InvalidArgument(format!(
                "chlh15: elements={elements} must be between 1 and {}",
                1u64 << 24
            )));
        }
        let (_, k) = BloomFilter::optimal_params(elements, fpr)
            .map_err(|e| Error::InvalidArgument(format!("chlh15: {e}")))?;
        let m = filter_bits(elements, fpr)?;
        Ok(Self {
            bloom: BloomKey::new(&master.derive("sesame-sse/chlh15/bloom")),
            lists: Aes256GcmSiv::new(&master.derive("sesame-sse/chlh15/lists")),
            master,
            fpr,
            elements,
            m,
            k,
        })
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let s: State = sesame_core::wire::decode(bytes)?;
        Self::with_key(Key::from_bytes(s.master), s.fpr, s.elements)
    }

    /// Bits of the largest document filter, and of a trapdoor.
    pub fn trapdoor_bits(&self) -> u64 {
        self.m
    }

    fn filter(&self, m: u64, elements: impl IntoIterator<Item = Vec<u8>>) -> Result<BloomFilter> {
        let mut f = BloomFilter::new(m, self.k)
            .map_err(|e| Error::InvalidArgument(format!("chlh15: {e}")))?;
        for e in elements {
            f.insert(&self.bloom, &e);
        }
        Ok(f)
    }

    /// The document's filter words and encrypted keyword list; an error if
    /// the filter would saturate.
    fn document(
        &self,
        rng: &mut dyn CryptoRngCore,
        doc: DocId,
        words: &[&[u8]],
    ) -> Result<(Vec<u64>, Vec<u8>)> {
        let elements = document_elements(words);
        if elements.len() as u64 > self.elements {
            return Err(Error::InvalidArgument(format!(
                "chlh15: document {doc} has {} distinct (position, character) pairs and \
                 lengths, more than the {} its filter is sized for: the filter would saturate \
                 (false-positive rate {:.2e} instead of {:.2e}); set a larger `elements`",
                elements.len(),
                self.elements,
                BloomFilter::false_positive_rate(self.m, self.k, elements.len() as u64),
                self.fpr
            )));
        }
        let m = filter_bits(elements.len().max(1) as u64, self.fpr)?;
        let filter = self.filter(m, elements)?;
        let list = sesame_core::wire::encode(words)?;
        let sealed = self
            .lists
            .seal(rng, &doc.to_le_bytes(), &list)
            .map_err(|_| Error::Encode("chlh15: keyword list too long".into()))?;
        Ok((filter.words().to_vec(), sealed))
    }

    fn run(&mut self, channel: &mut dyn Channel, pattern: &Pattern<'_>) -> Result<QueryResult> {
        let trapdoor = self.filter(self.m, pattern.elements())?.words().to_vec();
        let candidates = match channel::call(channel, &Request::Search { trapdoor })? {
            Response::Candidates(c) => c,
            other => return Err(Error::unexpected("CHLH15", &other)),
        };
        let mut result = QueryResult::default();
        for (doc, sealed) in candidates {
            let list = self.lists.open(&doc.to_le_bytes(), &sealed)?;
            let words: Vec<Vec<u8>> = sesame_core::wire::decode(&list)?;
            if words.iter().any(|w| pattern.matches(w)) {
                result.ids.push(doc);
            } else {
                result.false_positives_removed += 1;
            }
        }
        result.ids = common::normalise(result.ids);
        Ok(result)
    }
}

impl KeywordClient for ChlhClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn setup_checked(&mut self, Io { rng, channel }: Io<'_>, db: &Multimap) -> Result<()> {
        let mut per_doc: BTreeMap<DocId, BTreeSet<&[u8]>> = BTreeMap::new();
        for (w, ids) in db {
            for &id in ids {
                per_doc.entry(id).or_default().insert(w);
            }
        }
        let mut docs = Vec::with_capacity(per_doc.len());
        for (doc, words) in per_doc {
            let words: Vec<&[u8]> = words.into_iter().collect();
            let (filter, sealed) = self.document(rng, doc, &words)?;
            docs.push((doc, filter, sealed));
        }
        common::upload(
            channel,
            docs,
            |(_, f, s)| 8 + f.len() * 8 + s.len(),
            |reset, docs| Request::Put { reset, docs },
            common::answered("CHLH15", Response::Stored),
        )
    }

    fn search(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        keyword: &[u8],
    ) -> Result<Vec<DocId>> {
        Ok(self.run(channel, &Pattern::Exact(keyword))?.ids)
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        sesame_core::wire::encode(&State {
            master: *self.master.as_bytes(),
            fpr: self.fpr,
            elements: self.elements,
        })
    }

    fn query(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        q: &Query,
    ) -> Result<QueryResult> {
        match q {
            Query::Exact(w) => self.run(channel, &Pattern::Exact(w)),
            Query::Prefix(p) => self.run(channel, &Pattern::Prefix(p)),
            Query::Wildcard(p) => self.run(channel, &Pattern::Wildcard(p)),
            Query::Conjunctive(words) => {
                let mut sets = Vec::with_capacity(words.len());
                let mut removed = 0;
                for w in words {
                    let r = self.run(channel, &Pattern::Exact(w))?;
                    removed += r.false_positives_removed;
                    sets.push(r.ids);
                }
                Ok(QueryResult {
                    ids: query::intersect(sets),
                    scores: Vec::new(),
                    false_positives_removed: removed,
                })
            }
            _ => Err(query::unsupported(DESCRIPTOR.name, q)),
        }
    }
}

fn filter_key(doc: DocId) -> Vec<u8> {
    let mut k = vec![b'f'];
    k.extend_from_slice(&doc.to_be_bytes());
    k
}

fn list_key(doc: DocId) -> Vec<u8> {
    let mut k = vec![b'k'];
    k.extend_from_slice(&doc.to_be_bytes());
    k
}

/// The server half of CHLH15.
pub struct ChlhServer {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for ChlhServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChlhServer").finish_non_exhaustive()
    }
}

impl ChlhServer {
    /// A server keeping its index in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// The documents whose filter contains the trapdoor, with their
    /// encrypted keyword lists.
    ///
    /// Filters have power-of-two sizes; bit `i` of an element in the
    /// trapdoor (the largest size) is bit `i mod m` in a filter of `m`
    /// bits, so the server folds the trapdoor onto each filter's size
    /// (OR of its `m`-bit slices) and checks `filter AND folded == folded`.
    pub fn search(&self, trapdoor: &[u64]) -> Result<Vec<(DocId, Vec<u8>)>> {
        if !trapdoor.len().is_power_of_two() {
            return Err(Error::Protocol(format!(
                "CHLH15 trapdoor of {} words",
                trapdoor.len()
            )));
        }
        // Folded trapdoors by filter size in words: only non-zero words.
        let mut folded: HashMap<usize, Vec<(usize, u64)>> = HashMap::new();
        let mut docs = Vec::new();
        for (key, value) in self.store.scan_prefix(b"f")? {
            let doc: [u8; 8] = key
                .get(1..)
                .and_then(|k| k.try_into().ok())
                .ok_or_else(|| Error::StoreCorrupt("CHLH15 filter key".into()))?;
            let words = value.len() / 8;
            if !value.len().is_multiple_of(8) || !words.is_power_of_two() {
                return Err(Error::StoreCorrupt(format!(
                    "CHLH15 filter of {} bytes",
                    value.len()
                )));
            }
            if words > trapdoor.len() {
                return Err(Error::Protocol(format!(
                    "CHLH15 trapdoor of {} words for a filter of {words}",
                    trapdoor.len()
                )));
            }
            let set = folded.entry(words).or_insert_with(|| {
                let mut f = vec![0u64; words];
                for chunk in trapdoor.chunks_exact(words) {
                    for (a, b) in f.iter_mut().zip(chunk) {
                        *a |= b;
                    }
                }
                f.into_iter().enumerate().filter(|&(_, w)| w != 0).collect()
            });
            let hit = set.iter().all(|&(i, t)| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&value[i * 8..i * 8 + 8]);
                u64::from_le_bytes(b) & t == t
            });
            if hit {
                docs.push(DocId::from_be_bytes(doc));
            }
        }
        let keys: Vec<Vec<u8>> = docs.iter().map(|&d| list_key(d)).collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let lists = self.store.get_many(&refs)?;
        docs.into_iter()
            .zip(lists)
            .map(|(d, l)| {
                l.map(|l| (d, l))
                    .ok_or_else(|| Error::StoreCorrupt(format!("CHLH15 document {d} has no list")))
            })
            .collect()
    }
}

impl Handler for ChlhServer {
    type Request = Request;
    type Response = Response;

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::Put { reset, docs } => {
                if reset {
                    crate::common::clear(self.store.as_ref(), b"")?;
                }
                let mut batch = WriteBatch::with_capacity(2 * docs.len());
                for (doc, filter, list) in docs {
                    let bytes: Vec<u8> = filter.iter().flat_map(|w| w.to_le_bytes()).collect();
                    batch.put(filter_key(doc), bytes);
                    batch.put(list_key(doc), list);
                }
                self.store.write(batch)?;
                Ok(Response::Stored)
            }
            Request::Search { trapdoor } => Ok(Response::Candidates(self.search(&trapdoor)?)),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_elements_are_a_subset_of_the_keywords() {
        let doc = document_elements(&[b"hello"]);
        for p in [
            Pattern::Exact(b"hello"),
            Pattern::Prefix(b"hel"),
            Pattern::Wildcard(b"h?l*"),
            Pattern::Wildcard(b"h*o"),
            Pattern::Wildcard(b"?ello"),
        ] {
            assert!(p.matches(b"hello"));
            for e in p.elements() {
                assert!(doc.contains(&e));
            }
        }
    }
}
