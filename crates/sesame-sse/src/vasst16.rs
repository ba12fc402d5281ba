//! VASST16: "An efficient multi-keyword symmetric searchable encryption
//! scheme for secure data outsourcing", V. Arora and S. Tyagi, IJCNIS
//! 8(11), 2016: multi-keyword search ranked by TF-IDF, in the variant of
//! seed 001 (Liu, Tong, Lam: SSE schemes on mobile devices): the client
//! stores, per (keyword, document), the search entry and the term
//! frequency, and the server computes the inverse document frequency at
//! search time and ranks. VASST16-2 also indexes every keyword prefix.
//!
//! Each (keyword, document) pair becomes an entry `label_i = F(k1_w, i)`,
//! `value_i = (doc ‖ tf) ⊕ G(k2_w, i)` for the keyword's i-th document,
//! so that a snapshot of the index reveals neither keywords nor term
//! frequencies. A search sends `(k1_w, k2_w)` per keyword; the server
//! walks `i = 0, 1, ...` until a label is missing, decrypts, counts the
//! document frequency `df_w`, scores each document
//! `Σ_w tf(w, d) · ln(1 + N / df_w)` with `N` the number of documents, and
//! returns the top `k`.
//!
//! See `docs/schemes/vasst16.md` for leakage and deviations.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    channel, BackwardPrivacy, Channel, Error, Handler, IoCounts, Params, QueryKind, Result,
    SchemeDescriptor, SchemeKind, Store, WriteBatch,
};
use sesame_crypto::key::Key;
use sesame_crypto::prf::HmacPrf;

use crate::api::{DocId, Io, KeywordClient, KeywordScheme, Multimap};
use crate::common::{self, tagged, KeywordKeys, Tag};
use crate::query::{Query, QueryResult};

const LEAKAGE: &str = "Setup: the number of documents N and of (keyword, document) entries. \
    Search: the search pattern (per-keyword keys are deterministic), the number of keywords \
    of the query, and for each keyword its documents and their term frequencies (the server \
    decrypts them to rank: response- and frequency-revealing). A snapshot of the index alone \
    reveals neither keywords, documents nor term frequencies.";

/// Descriptor of VASST16.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "vasst16",
    title: "VASST16 (multi-keyword TF-IDF ranked SSE, server-side IDF)",
    citation: "V. Arora, S. Tyagi. An efficient multi-keyword symmetric searchable encryption \
               scheme for secure data outsourcing. International Journal of Computer Network \
               and Information Security 8(11), pp. 65-71, 2016; server-side IDF variant of \
               D. Y. W. Liu, C. T. Tong, W. W. M. Lam, 2018",
    kind: SchemeKind::StaticSse,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Exact, QueryKind::Conjunctive, QueryKind::Ranked],
    leakage: LEAKAGE,
    doc: "docs/schemes/vasst16.md",
};

/// Descriptor of VASST16-2, the prefix variant.
pub static DESCRIPTOR2: SchemeDescriptor = SchemeDescriptor {
    name: "vasst16-2",
    title: "VASST16-2 (VASST16 indexing every keyword prefix, seed 001)",
    citation: "V. Arora, S. Tyagi, IJCNIS 8(11), 2016; prefix variant of D. Y. W. Liu, \
               C. T. Tong, W. W. M. Lam, Performance Analysis of SSE Schemes on Mobile \
               Devices, 2018",
    kind: SchemeKind::StaticSse,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[
        QueryKind::Exact,
        QueryKind::Prefix,
        QueryKind::Conjunctive,
        QueryKind::Ranked,
    ],
    leakage: "As VASST16, for every prefix of every keyword as well; the number of entries \
              reveals the total length of the keywords.",
    doc: "docs/schemes/vasst16.md",
};

/// The registry entry of VASST16.
pub fn scheme() -> KeywordScheme {
    common::keyword_scheme!(&DESCRIPTOR, &[], VasstClient, VasstServer, false)
}

/// The registry entry of VASST16-2: VASST16 indexing every keyword prefix.
pub fn scheme_with_prefixes() -> KeywordScheme {
    common::keyword_scheme!(&DESCRIPTOR2, &[], VasstClient, VasstServer, true)
}

/// Bytes of an entry value: document (8) and term frequency (4).
pub const VALUE_LEN: usize = 12;

/// Token tag of an exact keyword.
const EXACT: u8 = 0;
/// Token tag of a prefix.
const PREFIX: u8 = 1;

/// An index entry: (label, encrypted document and term frequency).
pub type Entry = ([u8; 16], [u8; VALUE_LEN]);

crate::common::redacted_debug!(Request);

/// A VASST16 request.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Stores entries and the document count; `reset` first removes the
    /// earlier index.
    Put {
        /// Remove the earlier index first.
        reset: bool,
        /// Number of documents `N`.
        documents: u64,
        /// (label, encrypted document and term frequency).
        entries: Vec<Entry>,
    },
    /// Ranks the documents of the keywords whose keys these are.
    Search {
        /// `(k1_w, k2_w)` per keyword.
        keys: Vec<([u8; 16], [u8; 16])>,
        /// How many documents to return; all when `None`.
        top: Option<u64>,
    },
}

/// A VASST16 response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Response {
    /// The entries are stored.
    Stored,
    /// Documents with their TF-IDF scores, best first.
    Ranked(Vec<(DocId, f64)>),
}

#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    master: [u8; 32],
}

/// The client half of VASST16 and VASST16-2.
pub struct VasstClient {
    master: Key<32>,
    prf: HmacPrf,
    prefixes: bool,
}

impl std::fmt::Debug for VasstClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VasstClient")
            .field("prefixes", &self.prefixes)
            .finish_non_exhaustive()
    }
}

impl VasstClient {
    /// A client with a fresh key; `prefixes` selects VASST16-2. No
    /// parameters.
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params, prefixes: bool) -> Result<Self> {
        params.only(if prefixes { "vasst16-2" } else { "vasst16" }, &[])?;
        Ok(Self::with_key(Key::generate(rng), prefixes))
    }

    fn with_key(master: Key<32>, prefixes: bool) -> Self {
        Self {
            prf: HmacPrf::new(&master.derive("sesame-sse/vasst16/tokens")),
            master,
            prefixes,
        }
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8], prefixes: bool) -> Result<Self> {
        let s: State = sesame_core::wire::decode(bytes)?;
        Ok(Self::with_key(Key::from_bytes(s.master), prefixes))
    }

    fn keys(&self, token: &[u8]) -> ([u8; 16], [u8; 16]) {
        let k = KeywordKeys::derive(&self.prf, token);
        (k.k1, k.k2)
    }

    /// The encrypted entries of `db`; a document listed `t` times under a
    /// keyword has term frequency `t`.
    pub fn build(&self, db: &Multimap) -> Result<(u64, Vec<Entry>)> {
        common::check_ids(db)?;
        // token -> document -> term frequency
        let mut index: BTreeMap<Vec<u8>, BTreeMap<DocId, u32>> = BTreeMap::new();
        let mut docs = std::collections::BTreeSet::new();
        for (w, ids) in db {
            for &id in ids {
                docs.insert(id);
                let mut add = |token: Vec<u8>| {
                    let tf = index.entry(token).or_default().entry(id).or_insert(0);
                    *tf = tf.saturating_add(1);
                };
                add(tagged(EXACT, w));
                if self.prefixes {
                    for i in 1..=w.len() {
                        add(tagged(PREFIX, &w[..i]));
                    }
                }
            }
        }
        let mut entries = Vec::new();
        for (token, postings) in index {
            let keys = KeywordKeys::derive(&self.prf, &token);
            let labels = common::labels(&keys.label_prf(), 0, postings.len());
            let vp = keys.value_prf();
            for (i, (label, (doc, tf))) in labels.into_iter().zip(postings).enumerate() {
                let mut value = [0u8; VALUE_LEN];
                value[..8].copy_from_slice(&doc.to_le_bytes());
                value[8..].copy_from_slice(&tf.to_le_bytes());
                common::xor_keystream(&vp, Tag::Entry, i as u64, &mut value);
                entries.push((label, value));
            }
        }
        entries.sort_unstable_by_key(|e| e.0);
        Ok((docs.len() as u64, entries))
    }

    fn ranked(
        &self,
        channel: &mut dyn Channel,
        tokens: &[Vec<u8>],
        top: Option<u64>,
    ) -> Result<Vec<(DocId, f64)>> {
        let keys = tokens.iter().map(|t| self.keys(t)).collect();
        match channel::call(channel, &Request::Search { keys, top })? {
            Response::Ranked(r) => {
                if top.is_some_and(|k| r.len() as u64 > k) {
                    return Err(Error::Protocol(
                        "VASST16 returned more than k documents".into(),
                    ));
                }
                Ok(r)
            }
            other => Err(Error::unexpected("VASST16", &other)),
        }
    }
}

impl KeywordClient for VasstClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        if self.prefixes {
            &DESCRIPTOR2
        } else {
            &DESCRIPTOR
        }
    }

    fn setup_checked(&mut self, Io { channel, .. }: Io<'_>, db: &Multimap) -> Result<()> {
        let (documents, entries) = self.build(db)?;
        common::upload(
            channel,
            entries,
            |_| 16 + VALUE_LEN,
            |reset, entries| Request::Put {
                reset,
                documents,
                entries,
            },
            common::answered("VASST16", Response::Stored),
        )
    }

    fn search(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        keyword: &[u8],
    ) -> Result<Vec<DocId>> {
        let r = self.ranked(channel, &[tagged(EXACT, keyword)], None)?;
        Ok(common::normalise(r.into_iter().map(|(d, _)| d).collect()))
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        sesame_core::wire::encode(&State {
            master: *self.master.as_bytes(),
        })
    }

    fn query(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        q: &Query,
    ) -> Result<QueryResult> {
        match q {
            Query::Prefix(p) if self.prefixes => {
                let r = self.ranked(channel, &[tagged(PREFIX, p)], None)?;
                Ok(QueryResult {
                    ids: common::normalise(r.into_iter().map(|(d, _)| d).collect()),
                    ..QueryResult::default()
                })
            }
            Query::Ranked { keywords, k } => {
                let tokens: Vec<Vec<u8>> = keywords.iter().map(|w| tagged(EXACT, w)).collect();
                let r = self.ranked(channel, &tokens, Some(*k as u64))?;
                let (ids, scores) = r.into_iter().unzip();
                Ok(QueryResult {
                    ids,
                    scores,
                    false_positives_removed: 0,
                })
            }
            _ => crate::api::basic_query(self, rng, channel, q),
        }
    }
}

fn entry_key(label: &[u8; 16]) -> [u8; 17] {
    common::prefixed(b'e', label)
}

/// Store key of the document count.
const COUNT_KEY: &[u8] = b"n";

/// The server half of VASST16 and VASST16-2.
pub struct VasstServer {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for VasstServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VasstServer").finish_non_exhaustive()
    }
}

impl VasstServer {
    /// A server keeping its index in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// The (document, term frequency) postings under keys (k1, k2).
    fn postings(&self, k1: [u8; 16], k2: [u8; 16]) -> Result<Vec<(DocId, u32)>> {
        let keys = KeywordKeys { k1, k2 };
        let (lp, vp) = (keys.label_prf(), keys.value_prf());
        let mut out = Vec::new();
        common::read_labels(self.store.as_ref(), &lp, entry_key, |c, mut value| {
            if value.len() != VALUE_LEN {
                return Err(Error::StoreCorrupt(format!(
                    "VASST16 entry of {} bytes",
                    value.len()
                )));
            }
            common::xor_keystream(&vp, Tag::Entry, c, &mut value);
            let mut d = [0u8; 8];
            let mut t = [0u8; 4];
            d.copy_from_slice(&value[..8]);
            t.copy_from_slice(&value[8..]);
            out.push((DocId::from_le_bytes(d), u32::from_le_bytes(t)));
            Ok(())
        })?;
        Ok(out)
    }

    /// The documents of the keywords, scored `Σ tf · ln(1 + N / df)`, best
    /// first (ties by identifier), at most `top`.
    pub fn search(
        &self,
        keys: &[([u8; 16], [u8; 16])],
        top: Option<u64>,
    ) -> Result<Vec<(DocId, f64)>> {
        let n = match self.store.get(COUNT_KEY)? {
            Some(b) => {
                let b: [u8; 8] = b
                    .as_slice()
                    .try_into()
                    .map_err(|_| Error::StoreCorrupt("VASST16 document count".into()))?;
                u64::from_le_bytes(b)
            }
            None => 0,
        };
        let mut scores: HashMap<DocId, f64> = HashMap::new();
        for &(k1, k2) in keys {
            let postings = self.postings(k1, k2)?;
            if postings.is_empty() {
                continue;
            }
            let idf = (1.0 + n as f64 / postings.len() as f64).ln();
            for (doc, tf) in postings {
                *scores.entry(doc).or_insert(0.0) += f64::from(tf) * idf;
            }
        }
        let mut ranked: Vec<(DocId, f64)> = scores.into_iter().collect();
        ranked.sort_unstable_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        if let Some(k) = top {
            ranked.truncate(usize::try_from(k).unwrap_or(usize::MAX));
        }
        Ok(ranked)
    }
}

impl Handler for VasstServer {
    type Request = Request;
    type Response = Response;

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::Put {
                reset,
                documents,
                entries,
            } => {
                if reset {
                    crate::common::clear(self.store.as_ref(), b"")?;
                }
                let mut batch = WriteBatch::with_capacity(entries.len() + 1);
                batch.put(COUNT_KEY.to_vec(), documents.to_le_bytes().to_vec());
                for (label, value) in entries {
                    batch.put(entry_key(&label).to_vec(), value.to_vec());
                }
                self.store.write(batch)?;
                Ok(Response::Stored)
            }
            Request::Search { keys, top } => Ok(Response::Ranked(self.search(&keys, top)?)),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}
