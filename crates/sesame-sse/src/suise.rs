//! SUISE: "Searchable encryption with secure and efficient updates",
//! F. Hahn and F. Kerschbaum, ACM CCS 2014, as implemented in seed 001
//! (Liu, Tong, Lam: SSE schemes on mobile devices), and SUISE2, the seed's
//! prefix variant that also indexes every prefix of every keyword.
//!
//! The server keeps, per document, a list of randomised keyword
//! ciphertexts `(p, AES(s_w, p))`, where `s_w = F(k_s, w)` is the
//! keyword's search key and `p` a pseudorandom label of the (document,
//! keyword) pair. A first search for `w` sends `s_w`; the server scans
//! every list, recomputes `AES(s_w, p)` and keeps the documents where it
//! matches, and stores the result as the inverted entry of `w` under
//! `s_w`. Later searches read that entry. An update of a keyword that was
//! searched before also names the entry so that the server keeps it
//! current; updates of keywords never searched reveal nothing that links
//! them to a keyword.
//!
//! See `docs/schemes/suise.md` for leakage and deviations.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    channel, BackwardPrivacy, Channel, Error, Handler, IoCounts, Params, QueryKind, Result,
    SchemeDescriptor, SchemeKind, Store, WriteBatch,
};
use sesame_crypto::key::Key;
use sesame_crypto::prf::{Aes128Prf, HmacPrf};

use crate::api::{DocId, Io, KeywordClient, KeywordScheme, Multimap, Prepared, Update, UpdateOp};
use crate::common::{self, tagged};
use crate::query::{self, Query, QueryResult};

const LEAKAGE: &str = "Setup and update: the document identifier and the number of \
    (keyword, document) pairs it gains or loses; for a keyword already searched, which \
    searched keyword it is. Search: the search pattern (s_w is deterministic) and the \
    identifiers of the matching documents (response-revealing); after the first search of a \
    keyword the server keeps its result list in plaintext identifiers, so every later update \
    of that keyword is linked to it (no forward privacy).";

/// Descriptor of SUISE.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "suise",
    title: "SUISE (dynamic SSE with lazily built inverted index)",
    citation: "F. Hahn, F. Kerschbaum. Searchable Encryption with Secure and Efficient Updates. \
               ACM CCS 2014, pp. 310-320",
    kind: SchemeKind::DynamicSse,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Exact, QueryKind::Conjunctive],
    leakage: LEAKAGE,
    doc: "docs/schemes/suise.md",
};

/// Descriptor of SUISE2, the prefix variant.
pub static DESCRIPTOR2: SchemeDescriptor = SchemeDescriptor {
    name: "suise2",
    title: "SUISE2 (SUISE indexing every keyword prefix, seed 001)",
    citation: "F. Hahn, F. Kerschbaum. Searchable Encryption with Secure and Efficient Updates. \
               ACM CCS 2014; prefix variant of D. Y. W. Liu, C. T. Tong, W. W. M. Lam, \
               Performance Analysis of SSE Schemes on Mobile Devices, 2018",
    kind: SchemeKind::DynamicSse,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Exact, QueryKind::Prefix, QueryKind::Conjunctive],
    leakage: "As SUISE, for every prefix of every keyword as well: updates reveal the number \
              of (prefix, document) pairs, hence the total length of the keywords; a prefix \
              search reveals its result like an exact one.",
    doc: "docs/schemes/suise.md",
};

/// The registry entry of SUISE.
pub fn scheme() -> KeywordScheme {
    common::keyword_scheme!(&DESCRIPTOR, &[], SuiseClient, SuiseServer, false)
}

/// The registry entry of SUISE2: SUISE indexing every keyword prefix.
pub fn scheme_with_prefixes() -> KeywordScheme {
    common::keyword_scheme!(&DESCRIPTOR2, &[], SuiseClient, SuiseServer, true)
}

/// Bytes of a search key, a pair label and a keyword ciphertext.
pub const LAMBDA: usize = 16;

/// Token tag of an exact keyword.
const EXACT: u8 = 0;
/// Token tag of a prefix.
const PREFIX: u8 = 1;

/// Keyword ciphertexts of one document sent in one request (about 49
/// bytes each with its optional search key, counted as 64): a document's
/// list longer than this is split, so that every request fits
/// [`crate::MAX_PREPARED_REQUEST`].
const PAIRS_PER_REQUEST: usize = common::SETUP_CHUNK_BYTES / 64;

/// One keyword ciphertext of a document: (pair label `p`, `AES(s_w, p)`).
pub type Pair = ([u8; LAMBDA], [u8; LAMBDA]);

/// A keyword ciphertext with the search key of its token when the token
/// was searched before (so that the server updates its inverted entry).
pub type NamedPair = (Pair, Option<[u8; LAMBDA]>);

crate::common::redacted_debug!(Request);

/// A SUISE request.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Stores the keyword ciphertexts of documents; `reset` first removes
    /// the earlier index.
    Put {
        /// Remove the earlier index first.
        reset: bool,
        /// Per document and list (0: exact keywords, 1: SUISE2's
        /// prefixes) its keyword ciphertexts.
        docs: Vec<(DocId, u8, Vec<Pair>)>,
    },
    /// Adds keyword ciphertexts to a document; a pair whose keyword was
    /// searched before names its inverted entry.
    Add {
        /// The document.
        doc: DocId,
        /// The document's list (0: exact, 1: prefixes).
        list: u8,
        /// Ciphertexts, each with its search key if searched before.
        pairs: Vec<(Pair, Option<[u8; LAMBDA]>)>,
    },
    /// Removes keyword ciphertexts (by label) from a document.
    Delete {
        /// The document.
        doc: DocId,
        /// The document's list (0: exact, 1: prefixes).
        list: u8,
        /// Labels, each with its search key if searched before.
        labels: Vec<([u8; LAMBDA], Option<[u8; LAMBDA]>)>,
    },
    /// The documents of the keyword whose search key this is.
    Search {
        /// `s_w`.
        key: [u8; LAMBDA],
        /// The lists to scan if there is no inverted entry (0: exact, 1:
        /// prefixes).
        list: u8,
    },
}

/// A SUISE response: stored, or the identifiers a search found.
pub type Response = crate::common::IdsResponse;

#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    master: [u8; 32],
    searched: Vec<Vec<u8>>,
}

/// The client half of SUISE and SUISE2: the key and the set of tokens
/// searched so far (to name their inverted entries in updates).
pub struct SuiseClient {
    master: Key<32>,
    search_prf: HmacPrf,
    label_prf: HmacPrf,
    prefixes: bool,
    searched: BTreeSet<Vec<u8>>,
}

impl std::fmt::Debug for SuiseClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SuiseClient")
            .field("prefixes", &self.prefixes)
            .field("searched", &self.searched.len())
            .finish_non_exhaustive()
    }
}

/// `AES(s, p)`: the keyword ciphertext of label `p` under search key `s`.
fn seal(prf: &Aes128Prf, p: &[u8; LAMBDA]) -> [u8; LAMBDA] {
    let mut b = [*p];
    prf.eval_in_place(&mut b);
    b[0]
}

impl SuiseClient {
    /// A client with a fresh key; `prefixes` selects SUISE2. No parameters.
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params, prefixes: bool) -> Result<Self> {
        params.only(if prefixes { "suise2" } else { "suise" }, &[])?;
        Ok(Self::with_key(
            Key::generate(rng),
            prefixes,
            BTreeSet::new(),
        ))
    }

    fn with_key(master: Key<32>, prefixes: bool, searched: BTreeSet<Vec<u8>>) -> Self {
        Self {
            search_prf: HmacPrf::new(&master.derive("sesame-sse/suise/search")),
            label_prf: HmacPrf::new(&master.derive("sesame-sse/suise/label")),
            master,
            prefixes,
            searched,
        }
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8], prefixes: bool) -> Result<Self> {
        let s: State = sesame_core::wire::decode(bytes)?;
        let searched: BTreeSet<Vec<u8>> = s.searched.iter().cloned().collect();
        if searched.len() != s.searched.len() {
            return Err(Error::Malformed("SUISE state lists a token twice".into()));
        }
        Ok(Self::with_key(
            Key::from_bytes(s.master),
            prefixes,
            searched,
        ))
    }

    /// The search key of a token (tag and keyword bytes).
    fn search_key(&self, token: &[u8]) -> [u8; LAMBDA] {
        let full = self.search_prf.eval_bytes(token);
        let mut s = [0u8; LAMBDA];
        s.copy_from_slice(&full[..LAMBDA]);
        s
    }

    /// The tokens a keyword is indexed under, each with the number that
    /// makes its pair label unique within the keyword.
    fn tokens(&self, keyword: &[u8]) -> Vec<(Vec<u8>, u32)> {
        let mut out = vec![(tagged(EXACT, keyword), 0)];
        if self.prefixes {
            for i in 1..=keyword.len() {
                out.push((tagged(PREFIX, &keyword[..i]), i as u32));
            }
        }
        out
    }

    /// The pair label of (doc, keyword, i): distinct for every source
    /// keyword, so that SUISE2's shared prefixes are counted per keyword.
    fn label(&self, doc: DocId, keyword: &[u8], i: u32) -> [u8; LAMBDA] {
        let mut input = Vec::with_capacity(12 + keyword.len());
        input.extend_from_slice(&doc.to_le_bytes());
        input.extend_from_slice(&i.to_le_bytes());
        input.extend_from_slice(keyword);
        let full = self.label_prf.eval_bytes(&input);
        let mut p = [0u8; LAMBDA];
        p.copy_from_slice(&full[..LAMBDA]);
        p
    }

    /// The keyword ciphertexts of one keyword of `doc`, each with the
    /// search key when its token was searched before.
    fn pairs(&self, doc: DocId, keyword: &[u8]) -> Vec<(u8, Pair, Option<[u8; LAMBDA]>)> {
        self.tokens(keyword)
            .into_iter()
            .map(|(token, i)| {
                let s = self.search_key(&token);
                let p = self.label(doc, keyword, i);
                let h = seal(&Aes128Prf::new(&Key::from_bytes(s)), &p);
                let named = self.searched.contains(&token).then_some(s);
                (token[0], (p, h), named)
            })
            .collect()
    }

    /// Searches one token.
    fn search_with_token(
        &mut self,
        channel: &mut dyn Channel,
        token: Vec<u8>,
    ) -> Result<Vec<DocId>> {
        let request = self.search_request(token);
        Response::sorted_ids(channel::call(channel, &request)?, "SUISE")
    }

    /// The search request for a tagged token; the token is recorded as
    /// searched at once (the server moves its matches to the searched
    /// list when it answers).
    fn search_request(&mut self, token: Vec<u8>) -> Request {
        let key = self.search_key(&token);
        let list = token.first().copied().unwrap_or(EXACT);
        self.searched.insert(token);
        Request::Search { key, list }
    }

    /// The tagged tokens a query searches, one request each; their
    /// results are intersected.
    fn query_tokens(&self, q: &Query) -> Result<Vec<Vec<u8>>> {
        match q {
            Query::Exact(w) => Ok(vec![tagged(EXACT, w)]),
            Query::Conjunctive(words) => Ok(words.iter().map(|w| tagged(EXACT, w)).collect()),
            Query::Prefix(p) if self.prefixes => {
                if p.is_empty() {
                    return Err(Error::InvalidArgument(
                        "a prefix query needs at least one byte before `*`".into(),
                    ));
                }
                Ok(vec![tagged(PREFIX, p)])
            }
            _ => Err(query::unsupported(self.descriptor().name, q)),
        }
    }
}

impl KeywordClient for SuiseClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        if self.prefixes {
            &DESCRIPTOR2
        } else {
            &DESCRIPTOR
        }
    }

    fn setup_checked(&mut self, Io { channel, .. }: Io<'_>, db: &Multimap) -> Result<()> {
        self.searched.clear();
        let mut per_doc: BTreeMap<DocId, Vec<&[u8]>> = BTreeMap::new();
        for (w, ids) in db {
            for &id in ids {
                per_doc.entry(id).or_default().push(w);
            }
        }
        let mut docs: Vec<(DocId, u8, Vec<Pair>)> = Vec::new();
        let mut rest = Vec::new();
        for (doc, words) in per_doc {
            let mut lists: BTreeMap<u8, Vec<Pair>> = BTreeMap::new();
            for (list, pair, _) in words.iter().flat_map(|w| self.pairs(doc, w)) {
                lists.entry(list).or_default().push(pair);
            }
            for (list, mut pairs) in lists {
                // The order says nothing about the keywords.
                pairs.sort_unstable();
                pairs.dedup();
                // A list too long for one request: the rest is merged in
                // by `Add` requests once the lists are stored.
                if pairs.len() > PAIRS_PER_REQUEST {
                    for chunk in pairs.split_off(PAIRS_PER_REQUEST).chunks(PAIRS_PER_REQUEST) {
                        let pairs = chunk.iter().map(|&p| (p, None)).collect();
                        rest.push(Request::Add { doc, list, pairs });
                    }
                }
                docs.push((doc, list, pairs));
            }
        }
        let stored = common::answered("SUISE", Response::Stored);
        common::upload(
            channel,
            docs,
            |(_, _, pairs)| 9 + pairs.len() * 2 * LAMBDA,
            |reset, docs| Request::Put { reset, docs },
            &stored,
        )?;
        for request in rest {
            stored(channel::call(channel, &request)?)?;
        }
        Ok(())
    }

    fn prepares_updates(&self) -> bool {
        true
    }

    /// A deletion removes the pair from search results.
    fn supports_deletion(&self) -> bool {
        true
    }

    fn prepare_checked(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        (op, doc, keywords): Update<'_>,
    ) -> Result<Option<Vec<Vec<u8>>>> {
        if keywords.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let mut lists: BTreeMap<u8, Vec<NamedPair>> = BTreeMap::new();
        for (list, pair, s) in keywords.iter().flat_map(|w| self.pairs(doc, w)) {
            lists.entry(list).or_default().push((pair, s));
        }
        let mut requests = Vec::with_capacity(lists.len());
        for (list, mut pairs) in lists {
            pairs.sort_unstable();
            pairs.dedup();
            // A document with many keywords is sent in several requests:
            // each merges its pairs into the document's list, so any prefix
            // of them, applied any number of times, is a consistent state.
            for chunk in pairs.chunks(PAIRS_PER_REQUEST) {
                let request = match op {
                    UpdateOp::Add => Request::Add {
                        doc,
                        list,
                        pairs: chunk.to_vec(),
                    },
                    UpdateOp::Delete => Request::Delete {
                        doc,
                        list,
                        labels: chunk.iter().map(|((p, _), s)| (*p, *s)).collect(),
                    },
                };
                requests.push(sesame_core::wire::encode(&request)?);
            }
        }
        Ok(Some(requests))
    }

    fn check_update_response(&self, response: &[u8]) -> Result<()> {
        common::check_answered("SUISE", Response::Stored, response)
    }

    fn search(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        keyword: &[u8],
    ) -> Result<Vec<DocId>> {
        self.search_with_token(channel, tagged(EXACT, keyword))
    }

    fn search_writes(&self) -> bool {
        true
    }

    /// One search request per token of the query, each recorded as
    /// searched at once; the SDK has the server apply them once.
    fn prepare_query(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        _channel: &mut dyn Channel,
        q: &Query,
    ) -> Result<Prepared> {
        let tokens = self.query_tokens(q)?;
        let requests = tokens
            .into_iter()
            .map(|t| sesame_core::wire::encode(&self.search_request(t)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Prepared {
            requests,
            context: Vec::new(),
        })
    }

    fn resolve_query(
        &mut self,
        q: &Query,
        _context: &[u8],
        responses: &[Vec<u8>],
    ) -> Result<QueryResult> {
        let expected = self.query_tokens(q)?.len();
        if responses.len() != expected {
            return Err(Error::Protocol(format!(
                "{} answers to {expected} SUISE searches",
                responses.len()
            )));
        }
        let mut sets = Vec::with_capacity(expected);
        for response in responses {
            sets.push(Response::sorted_ids(
                sesame_core::wire::decode(response)?,
                "SUISE",
            )?);
        }
        Ok(QueryResult {
            ids: query::intersect(sets),
            ..QueryResult::default()
        })
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        let s = State {
            master: *self.master.as_bytes(),
            searched: self.searched.iter().cloned().collect(),
        };
        sesame_core::wire::encode(&s)
    }

    fn query(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        q: &Query,
    ) -> Result<QueryResult> {
        match q {
            Query::Prefix(p) if self.prefixes => {
                if p.is_empty() {
                    return Err(Error::InvalidArgument(
                        "a prefix query needs at least one byte before `*`".into(),
                    ));
                }
                Ok(QueryResult {
                    ids: self.search_with_token(channel, tagged(PREFIX, p))?,
                    ..QueryResult::default()
                })
            }
            _ => crate::api::basic_query(self, rng, channel, q),
        }
    }
}

/// Store key of a document's list of keyword ciphertexts.
fn doc_key(list: u8, doc: DocId) -> Vec<u8> {
    let mut k = Vec::with_capacity(10);
    k.push(b'd');
    k.push(list);
    k.extend_from_slice(&doc.to_be_bytes());
    k
}

/// Store key of the inverted entry of a search key.
fn inverted_key(s: &[u8; LAMBDA]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + LAMBDA);
    k.push(b'i');
    k.extend_from_slice(s);
    k
}

/// Bytes of an inverted-entry record: document (8) and pair label (16).
const RECORD: usize = 8 + LAMBDA;

fn decode_pairs(bytes: &[u8]) -> Result<BTreeMap<[u8; LAMBDA], [u8; LAMBDA]>> {
    if !bytes.len().is_multiple_of(2 * LAMBDA) {
        return Err(Error::StoreCorrupt(format!(
            "SUISE document list of {} bytes",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(2 * LAMBDA)
        .map(|c| {
            let mut p = [0u8; LAMBDA];
            let mut h = [0u8; LAMBDA];
            p.copy_from_slice(&c[..LAMBDA]);
            h.copy_from_slice(&c[LAMBDA..]);
            (p, h)
        })
        .collect())
}

fn encode_pairs(pairs: &BTreeMap<[u8; LAMBDA], [u8; LAMBDA]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(pairs.len() * 2 * LAMBDA);
    for (p, h) in pairs {
        out.extend_from_slice(p);
        out.extend_from_slice(h);
    }
    out
}

fn decode_records(bytes: &[u8]) -> Result<BTreeSet<(DocId, [u8; LAMBDA])>> {
    if !bytes.len().is_multiple_of(RECORD) {
        return Err(Error::StoreCorrupt(format!(
            "SUISE inverted entry of {} bytes",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(RECORD)
        .map(|c| {
            let mut d = [0u8; 8];
            let mut p = [0u8; LAMBDA];
            d.copy_from_slice(&c[..8]);
            p.copy_from_slice(&c[8..]);
            (DocId::from_le_bytes(d), p)
        })
        .collect())
}

fn encode_records(records: &BTreeSet<(DocId, [u8; LAMBDA])>) -> Vec<u8> {
    let mut out = Vec::with_capacity(records.len() * RECORD);
    for (d, p) in records {
        out.extend_from_slice(&d.to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

/// The server half of SUISE and SUISE2.
pub struct SuiseServer {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for SuiseServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SuiseServer").finish_non_exhaustive()
    }
}

impl SuiseServer {
    /// A server keeping its index in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// The documents of search key `s`: from its inverted entry when there
    /// is one, otherwise by scanning every document's list, after which
    /// the entry is stored.
    pub fn search(&self, s: [u8; LAMBDA], list: u8) -> Result<Vec<DocId>> {
        let ikey = inverted_key(&s);
        if let Some(bytes) = self.store.get(&ikey)? {
            let records = decode_records(&bytes)?;
            return Ok(common::normalise(
                records.into_iter().map(|(d, _)| d).collect(),
            ));
        }
        let prf = Aes128Prf::new(&Key::from_bytes(s));
        let mut records = BTreeSet::new();
        let mut blocks = Vec::new();
        for (key, value) in self.store.scan_prefix(&[b'd', list])? {
            let doc: [u8; 8] = key
                .get(2..)
                .and_then(|k| k.try_into().ok())
                .ok_or_else(|| Error::StoreCorrupt("SUISE document key".into()))?;
            let doc = DocId::from_be_bytes(doc);
            if !value.len().is_multiple_of(2 * LAMBDA) {
                return Err(Error::StoreCorrupt(format!(
                    "SUISE document list of {} bytes",
                    value.len()
                )));
            }
            blocks.clear();
            blocks.extend(value.chunks_exact(2 * LAMBDA).map(|c| {
                let mut p = [0u8; LAMBDA];
                p.copy_from_slice(&c[..LAMBDA]);
                p
            }));
            let labels = blocks.clone();
            prf.eval_in_place(&mut blocks);
            for ((c, sealed), p) in value.chunks_exact(2 * LAMBDA).zip(&blocks).zip(labels) {
                if &c[LAMBDA..] == sealed.as_slice() {
                    records.insert((doc, p));
                }
            }
        }
        self.store.put(&ikey, &encode_records(&records))?;
        Ok(common::normalise(
            records.into_iter().map(|(d, _)| d).collect(),
        ))
    }

    fn add(&self, doc: DocId, list_id: u8, pairs: Vec<(Pair, Option<[u8; LAMBDA]>)>) -> Result<()> {
        let dkey = doc_key(list_id, doc);
        let mut list = match self.store.get(&dkey)? {
            Some(b) => decode_pairs(&b)?,
            None => BTreeMap::new(),
        };
        let mut batch = WriteBatch::new();
        for ((p, h), s) in pairs {
            list.insert(p, h);
            if let Some(s) = s {
                let ikey = inverted_key(&s);
                if let Some(bytes) = self.store.get(&ikey)? {
                    let mut records = decode_records(&bytes)?;
                    records.insert((doc, p));
                    batch.put(ikey, encode_records(&records));
                }
            }
        }
        batch.put(dkey, encode_pairs(&list));
        self.store.write(batch)
    }

    fn delete(
        &self,
        doc: DocId,
        list_id: u8,
        labels: Vec<([u8; LAMBDA], Option<[u8; LAMBDA]>)>,
    ) -> Result<()> {
        let dkey = doc_key(list_id, doc);
        let mut list = match self.store.get(&dkey)? {
            Some(b) => decode_pairs(&b)?,
            None => BTreeMap::new(),
        };
        let mut batch = WriteBatch::new();
        for (p, s) in labels {
            list.remove(&p);
            if let Some(s) = s {
                let ikey = inverted_key(&s);
                if let Some(bytes) = self.store.get(&ikey)? {
                    let mut records = decode_records(&bytes)?;
                    records.remove(&(doc, p));
                    batch.put(ikey, encode_records(&records));
                }
            }
        }
        if list.is_empty() {
            batch.delete(dkey);
        } else {
            batch.put(dkey, encode_pairs(&list));
        }
        self.store.write(batch)
    }
}

impl Handler for SuiseServer {
    type Request = Request;
    type Response = Response;

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::Put { reset, docs } => {
                if reset {
                    crate::common::clear(self.store.as_ref(), b"")?;
                }
                let mut batch = WriteBatch::with_capacity(docs.len());
                for (doc, list_id, pairs) in docs {
                    let list: BTreeMap<_, _> = pairs.into_iter().collect();
                    batch.put(doc_key(list_id, doc), encode_pairs(&list));
                }
                self.store.write(batch)?;
                Ok(Response::Stored)
            }
            Request::Add { doc, list, pairs } => {
                self.add(doc, list, pairs)?;
                Ok(Response::Stored)
            }
            Request::Delete { doc, list, labels } => {
                self.delete(doc, list, labels)?;
                Ok(Response::Stored)
            }
            Request::Search { key, list } => Ok(Response::Ids(self.search(key, list)?)),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}
