//! Client and server of any simple-index scheme over a [`Channel`].
//!
//! Upload: the client sends, per document, its encrypted simple index and
//! its AEAD-encrypted body (AES-256-GCM-SIV, the identifier and the
//! upload's version as associated data). Search: one round; the client
//! sends a token, the server tests every stored index and answers with the
//! matching documents. For a verifiable scheme the server answers with a
//! verdict and a proof for *every* stored document, and the client accepts
//! the answer only if it covers each document it uploaded exactly once,
//! every proof verifies and every returned body opens under its identifier
//! and version.
//!
//! Versions: every upload call takes the next number of a counter the
//! client keeps (and saves), and the client remembers, per identifier, the
//! version of its last upload. The scheme's tags and the body's associated
//! data bind it, so a server that kept an earlier upload of an identifier
//! cannot answer from it, nor mix its parts with the current one's. An
//! upload whose answer is lost leaves the client with the previous
//! version: upload the documents again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{channel, Channel, Error, Handler, IoCounts, Result, Store, WriteBatch};
use sesame_crypto::aead::Aes256GcmSiv;
use sesame_crypto::key::Key;

use super::{Conjunction, ConjunctiveScheme, SiAlgorithms};
use crate::api::DocId;

/// One document to upload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    /// Its identifier.
    pub id: DocId,
    /// Its n keyword-field values.
    pub fields: Vec<Vec<u8>>,
    /// Its body (encrypted before upload).
    pub body: Vec<u8>,
}

/// An uploaded document as the server stores it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upload {
    /// Identifier.
    pub id: DocId,
    /// Encrypted simple index.
    pub index: Vec<u8>,
    /// AEAD-encrypted body.
    pub body: Vec<u8>,
}

crate::common::redacted_debug!(Request);

/// A request of the simple-index protocol.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Stores documents; `reset` first removes every earlier one.
    Put {
        /// Remove the earlier documents first.
        reset: bool,
        /// The documents.
        docs: Vec<Upload>,
    },
    /// Tests every stored index against `token`.
    Search {
        /// The scheme's token.
        token: Vec<u8>,
        /// Answer with a verdict and proof for every document.
        prove: bool,
    },
}

/// One entry of a search answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hit {
    /// The document.
    pub id: DocId,
    /// Whether it matches.
    pub matched: bool,
    /// Its encrypted body when it matches (empty otherwise).
    pub body: Vec<u8>,
    /// The proof of the verdict (empty for schemes without verification).
    pub proof: Vec<u8>,
}

/// A response of the simple-index protocol.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The documents are stored.
    Stored,
    /// The answer to a search.
    Hits(Vec<Hit>),
}

fn index_key(id: DocId) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = b'x';
    k[1..].copy_from_slice(&id.to_be_bytes());
    k
}

fn body_key(id: DocId) -> [u8; 9] {
    let mut k = index_key(id);
    k[0] = b'b';
    k
}

/// The server half: stores indexes and bodies, tests tokens.
pub struct SiServer {
    store: Arc<dyn Store>,
    scheme: SiAlgorithms,
}

impl std::fmt::Debug for SiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SiServer")
            .field("scheme", &self.scheme.descriptor.name)
            .finish_non_exhaustive()
    }
}

impl SiServer {
    /// A server of `scheme` keeping its data in `store`.
    pub fn new(store: Arc<dyn Store>, scheme: SiAlgorithms) -> Self {
        Self { store, scheme }
    }

    /// The answer to a token.
    pub fn search(&self, token: &[u8], prove: bool) -> Result<Vec<Hit>> {
        let tester = (self.scheme.tester)(token)?;
        let mut hits = Vec::new();
        for (key, index) in self.store.scan_prefix(b"x")? {
            let id_bytes: [u8; 8] = key
                .get(1..9)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| Error::StoreCorrupt("simple-index key".into()))?;
            let id = DocId::from_be_bytes(id_bytes);
            let matched = tester.matches(&index)?;
            if !matched && !prove {
                continue;
            }
            let body = if matched {
                self.store
                    .get(&body_key(id))?
                    .ok_or_else(|| Error::StoreCorrupt("simple-index body missing".into()))?
            } else {
                Vec::new()
            };
            let proof = if prove {
                tester.prove(&index)?.unwrap_or_default()
            } else {
                Vec::new()
            };
            hits.push(Hit {
                id,
                matched,
                body,
                proof,
            });
        }
        Ok(hits)
    }
}

impl Handler for SiServer {
    type Request = Request;
    type Response = Response;

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::Put { reset, docs } => {
                let mut batch = WriteBatch::with_capacity(2 * docs.len());
                if reset {
                    crate::common::delete_prefix(self.store.as_ref(), b"", &mut batch)?;
                }
                for d in docs {
                    (self.scheme.validate)(&d.index)?;
                    batch.put(index_key(d.id).to_vec(), d.index);
                    batch.put(body_key(d.id).to_vec(), d.body);
                }
                self.store.write(batch)?;
                Ok(Response::Stored)
            }
            Request::Search { token, prove } => Ok(Response::Hits(self.search(&token, prove)?)),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}

/// The client half: keys of the scheme, the document key, the uploaded
/// identifiers with the version of their last upload (needed to check
/// that no result was dropped, and that none comes from an older upload)
/// and the version the next upload takes.
pub struct SiClient {
    scheme: Box<dyn ConjunctiveScheme>,
    aead: Aes256GcmSiv,
    ids: BTreeMap<DocId, u64>,
    next_version: u64,
    master: Key<32>,
    doc_key: Key<32>,
}

/// The client's durable state: scheme, n, keys, uploaded identifiers and
/// their versions, the next version.
#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    scheme: String,
    n: u32,
    master: [u8; 32],
    doc_key: [u8; 32],
    ids: Vec<(DocId, u64)>,
    next_version: u64,
}

impl std::fmt::Debug for SiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SiClient")
            .field("scheme", &self.scheme.descriptor().name)
            .field("documents", &self.ids.len())
            .finish_non_exhaustive()
    }
}

impl SiClient {
    /// A client of `scheme` with fresh keys for `n` fields.
    pub fn new(rng: &mut dyn CryptoRngCore, scheme: &SiAlgorithms, n: usize) -> Result<Self> {
        Self::with_keys(
            scheme,
            n,
            Key::generate(rng),
            Key::generate(rng),
            BTreeMap::new(),
            1,
        )
    }

    fn with_keys(
        scheme: &SiAlgorithms,
        n: usize,
        master: Key<32>,
        doc_key: Key<32>,
        ids: BTreeMap<DocId, u64>,
        next_version: u64,
    ) -> Result<Self> {
        if ids.values().any(|&v| v >= next_version) {
            return Err(Error::Malformed(
                "simple-index state: a version not below the next one".into(),
            ));
        }
        Ok(Self {
            scheme: (scheme.new)(&master, n)?,
            aead: Aes256GcmSiv::new(&doc_key),
            ids,
            next_version,
            master,
            doc_key,
        })
    }

    /// The state to persist: keys and uploaded identifiers (secret).
    pub fn save_state(&self) -> Result<Vec<u8>> {
        let s = State {
            scheme: self.scheme.descriptor().name.to_owned(),
            n: u32::try_from(self.scheme.fields())
                .map_err(|_| Error::InvalidArgument("too many fields".into()))?,
            master: *self.master.as_bytes(),
            doc_key: *self.doc_key.as_bytes(),
            ids: self.ids.iter().map(|(&id, &v)| (id, v)).collect(),
            next_version: self.next_version,
        };
        sesame_core::wire::encode(&s)
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let s: State = sesame_core::wire::decode(bytes)?;
        let scheme = super::algorithms_of(&s.scheme).ok_or_else(|| {
            Error::Malformed(format!(
                "state of an unknown simple-index scheme {}",
                s.scheme
            ))
        })?;
        Self::with_keys(
            &scheme,
            s.n as usize,
            Key::from_bytes(s.master),
            Key::from_bytes(s.doc_key),
            s.ids.iter().copied().collect(),
            s.next_version,
        )
    }

    /// The scheme's client half.
    pub fn scheme(&self) -> &dyn ConjunctiveScheme {
        self.scheme.as_ref()
    }

    /// The identifiers uploaded so far.
    pub fn ids(&self) -> BTreeSet<DocId> {
        self.ids.keys().copied().collect()
    }

    /// The version of the last upload of `id`, if it was uploaded.
    pub fn version(&self, id: DocId) -> Option<u64> {
        self.ids.get(&id).copied()
    }

    fn aad(&self, id: DocId, version: u64) -> Vec<u8> {
        let mut a = self.scheme.descriptor().name.as_bytes().to_vec();
        a.extend_from_slice(&id.to_le_bytes());
        a.extend_from_slice(&version.to_le_bytes());
        a
    }

    /// Encrypts one document for upload as version `version`.
    pub fn encrypt(
        &self,
        rng: &mut dyn CryptoRngCore,
        doc: &Document,
        version: u64,
    ) -> Result<Upload> {
        let index = self
            .scheme
            .encrypt_index(rng, doc.id, version, &doc.fields)?;
        let body = self
            .aead
            .seal(rng, &self.aad(doc.id, version), &doc.body)
            .map_err(|_| Error::Encode("simple index: document too long".into()))?;
        Ok(Upload {
            id: doc.id,
            index,
            body,
        })
    }

    /// Uploads documents; `reset` replaces every earlier one.
    pub fn upload(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        docs: &[Document],
        reset: bool,
    ) -> Result<()> {
        let mut seen = BTreeSet::new();
        for d in docs {
            if !seen.insert(d.id) {
                return Err(Error::InvalidArgument(format!("document {} twice", d.id)));
            }
        }
        // The version is spent before the call: a retry after a lost answer
        // takes a new one, so no two uploads of different content share one.
        let version = self.next_version;
        self.next_version = version
            .checked_add(1)
            .ok_or_else(|| Error::Unsupported("simple index: upload versions exhausted".into()))?;
        let uploads = docs
            .iter()
            .map(|d| self.encrypt(rng, d, version))
            .collect::<Result<Vec<_>>>()?;
        match channel::call(
            channel,
            &Request::Put {
                reset,
                docs: uploads,
            },
        )? {
            Response::Stored => {}
            Response::Hits(_) => {
                return Err(Error::Protocol("unexpected simple-index response".into()))
            }
        }
        if reset {
            self.ids.clear();
        }
        self.ids.extend(seen.into_iter().map(|id| (id, version)));
        Ok(())
    }

    /// Searches: returns the matching documents' (identifier, body),
    /// sorted by identifier. For a verifiable scheme the answer is
    /// verified first; a wrong answer is [`Error::Crypto`].
    pub fn search(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        query: &Conjunction,
    ) -> Result<Vec<(DocId, Vec<u8>)>> {
        let token = self.scheme.token(rng, query)?;
        let prove = self.scheme.verifiable();
        let hits = match channel::call(
            channel,
            &Request::Search {
                token: token.clone(),
                prove,
            },
        )? {
            Response::Hits(h) => h,
            Response::Stored => {
                return Err(Error::Protocol("unexpected simple-index response".into()))
            }
        };
        self.check_answer(&token, hits)
    }

    /// Checks an answer to `token` and opens the matching bodies.
    pub fn check_answer(&self, token: &[u8], hits: Vec<Hit>) -> Result<Vec<(DocId, Vec<u8>)>> {
        let verify = self.scheme.verifiable();
        let verifier = if verify {
            Some(self.scheme.verifier(token)?)
        } else {
            None
        };
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for hit in hits {
            let version = match self.ids.get(&hit.id) {
                Some(&v) if seen.insert(hit.id) => v,
                _ => {
                    return Err(if verify {
                        Error::Crypto
                    } else {
                        Error::Protocol("unknown or repeated document in answer".into())
                    })
                }
            };
            if let Some(v) = &verifier {
                v.verify(hit.id, version, hit.matched, &hit.proof)?;
            }
            if hit.matched {
                let body = self.aead.open(&self.aad(hit.id, version), &hit.body)?;
                out.push((hit.id, body));
            } else if !verify {
                return Err(Error::Protocol("non-matching document in answer".into()));
            } else if !hit.body.is_empty() {
                return Err(Error::Crypto);
            }
        }
        if verify && seen.len() != self.ids.len() {
            return Err(Error::Crypto);
        }
        out.sort_by_key(|(id, _)| *id);
        Ok(out)
    }
}
