//! UEDSSE: dynamic SSE whose results are refreshed on the server with
//! updatable encryption after every search (seed 000, algorithm listings
//! 1-3).
//!
//! Index (per keyword w, a FAST-style chain of its updates, newest first):
//!
//! ```text
//! t_w = F(k_s, w)                              keyword token
//! T[H1(t_w ‖ st_{c+1})] = (u, eid ⊕ H3(t_w ‖ st_{c+1}))
//! u   = (st_c ‖ op) ⊕ H2(t_w ‖ st_{c+1})       st_0 = 0^λ ends the chain
//! eid = UE.Enc(k_w, N ‖ id),  N = PRF(k_n, w ‖ id)
//! ```
//!
//! The client keeps, per keyword, the latest state `st_c` and the UE key
//! `k_w`. A search draws a fresh key `k_w'`, the token `Δ = k_w'/k_w` and a
//! random mask, and sends `(t_w, st_c, Δ)` masked plus the mask encrypted
//! under the server's ECIES public key. The server decrypts the mask,
//! walks the chain, cancels additions against later deletions, replaces
//! every live `eid` by `UE.ReEnc(Δ, eid)` in its store and returns them.
//! The client decrypts with `k_w'`, checks each nonce `N` and keeps
//! `k_w'`.
//!
//! The nonce is a PRF of (w, id) rather than random, so that a deletion's
//! `eid` equals its addition's (the server cancels them by equality on its
//! walk). Stored `eid`s are masked by `H3(t_w ‖ st_{c+1})`, a pad of the
//! entry's fresh state (our addition to the paper): without it an upload
//! would carry the same bytes as the addition it deletes, or as a result
//! the server re-encrypted, and link itself to them before any search. See
//! `docs/schemes/uedsse.md` for leakage and deviations. [`crate::simple`]
//! shares this module's index and client state.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    channel, BackwardPrivacy, Channel, Error, Handler, IoCounts, Params, QueryKind, Result,
    SchemeDescriptor, SchemeKind, Store, WriteBatch,
};
use sesame_crypto::hash::ro;
use sesame_crypto::key::Key;
use sesame_crypto::pke::{EciesPublicKey, EciesSecretKey};
use sesame_crypto::prf::HmacPrf;
pub use sesame_crypto::ue::{self, Ciphertext, UeKey, UpdateToken, PAYLOAD_LEN};
use subtle::ConstantTimeEq;
use zeroize::Zeroize;

use crate::api::{DocId, Io, KeywordClient, KeywordScheme, Multimap, Prepared, Update, UpdateOp};
use crate::common;
use crate::fast::oracle;
use crate::query::{Query, QueryResult};

/// Descriptor of UEDSSE.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "uedsse",
    title: "UEDSSE (server-side refresh of results with updatable encryption)",
    citation: "Seed 000: an updatable dynamic searchable symmetric encryption scheme (UEDSSE), \
               Chinese journal paper; index after X. Song et al., FAST, IEEE TDSC 2018",
    kind: SchemeKind::DynamicSse,
    forward_private: true,
    backward_privacy: BackwardPrivacy::TypeIII,
    queries: &[QueryKind::Exact],
    leakage: "Update: the number of keywords of the update and the time; entries are masked \
              by pads of fresh states, so an update links to nothing before the search that \
              walks it (forward private). \
              Search: the server decrypts the mask, so it learns t_w (the search pattern), \
              st_c (which entries form the keyword's chain: the update history) and Δ (which \
              links every returned ciphertext to the stored one it came from); the number of \
              live results; which deletion cancels which addition (equal eids). It does not \
              learn document identifiers: eids are encrypted under per-keyword keys.",
    doc: "docs/schemes/uedsse.md",
};

/// The registry entry of UEDSSE.
pub fn scheme() -> KeywordScheme {
    common::keyword_scheme!(&DESCRIPTOR, &[], UedsseClient, UedsseServer)
}

/// Security parameter λ in bytes: states and keyword tokens.
pub const LAMBDA: usize = 16;

/// Bytes of a label `H1(t_w ‖ st)`: a whole SHA-256 digest, as in the
/// paper.
pub const LABEL_LEN: usize = 32;

/// Bytes of a chained value `(st ‖ op) ⊕ H2(t_w ‖ st')`.
pub const U_LEN: usize = LAMBDA + 1;

/// Bytes of an encrypted identifier (a UE ciphertext).
pub const EID_LEN: usize = ue::CIPHERTEXT_LEN;

/// Bytes of the nonce N in a UE payload (`N ‖ id` fills the payload).
pub const NONCE_LEN: usize = PAYLOAD_LEN - 8;

/// Bytes of the search mask.
pub const MASK_LEN: usize = 32;

/// Operation byte of an addition.
pub(crate) const OP_ADD: u8 = 0;
/// Operation byte of a deletion.
pub(crate) const OP_DEL: u8 = 1;

/// Domain bytes of the random oracles: labels, chained values, and the
/// masks of stored encrypted identifiers.
pub(crate) const H1: u8 = 1;
pub(crate) const H2: u8 = 2;
pub(crate) const H3: u8 = 3;

/// The mask of the encrypted identifier stored in the entry of state
/// `st`: `H3(t_w ‖ st)`. The state is fresh and random per entry, so an
/// uploaded (masked) identifier equals nothing the server holds, though
/// the identifier itself is deterministic (the nonce is a PRF of the
/// pair): updates are unlinkable until a search hands the server `st`.
fn eid_mask(tw: &[u8; LAMBDA], st: &[u8; LAMBDA]) -> [u8; EID_LEN] {
    oracle(H3, tw, st)
}

/// Store key of the server's ECIES secret key.
const SECRET_KEY: &[u8] = b"k";

/// An index entry: label, chained value and encrypted identifier.
pub type Entry = ([u8; LABEL_LEN], [u8; U_LEN], [u8; EID_LEN]);

crate::common::redacted_debug!(Request);

/// A UEDSSE request.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Stores entries; `reset` first removes the earlier index (the
    /// server's key pair stays).
    Put {
        /// Remove the earlier index first.
        reset: bool,
        /// The entries.
        entries: Vec<Entry>,
    },
    /// The server's ECIES public key (made on first use).
    PublicKey,
    /// A search: `(t_w, st_c, Δ)` XOR a pad expanded from the mask, and
    /// the mask encrypted under the server's public key.
    Search {
        /// Masked keyword token.
        tw: [u8; LAMBDA],
        /// Masked latest state.
        st: [u8; LAMBDA],
        /// Masked update token.
        delta: [u8; 32],
        /// ECIES-KEM encapsulation of the mask (the mask is the KEM's
        /// shared secret).
        emask: [u8; 32],
    },
}

/// A UEDSSE response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The entries are stored.
    Stored,
    /// The server's public key.
    PublicKey([u8; 32]),
    /// The live encrypted identifiers, re-encrypted.
    Eids(Vec<[u8; EID_LEN]>),
}

/// The 64-byte pad that masks `(t_w ‖ st_c ‖ Δ)`: two random-oracle calls
/// on the mask.
pub(crate) fn mask_pad(mask: &[u8; MASK_LEN]) -> [u8; 2 * LAMBDA + 32] {
    let mut pad = [0u8; 2 * LAMBDA + 32];
    pad[..32].copy_from_slice(&ro("sesame-sse/uedsse/pad/0", &[mask]));
    pad[32..].copy_from_slice(&ro("sesame-sse/uedsse/pad/1", &[mask]));
    pad
}

fn xor_into<const N: usize>(a: &mut [u8; N], pad: &[u8]) {
    for (x, p) in a.iter_mut().zip(pad) {
        *x ^= p;
    }
}

fn crypto_error(e: sesame_crypto::Error) -> Error {
    match e {
        sesame_crypto::Error::Decryption => Error::Crypto,
        other => Error::InvalidArgument(other.to_string()),
    }
}

/// Entries per worker thread below which an update's entries are computed
/// on the calling thread alone.
const PARALLEL_ENTRIES: usize = 16;

/// What one entry of an update takes from the client's state and its
/// random draws, so that entries can be encrypted on several threads.
struct EntryPlan {
    tw: [u8; LAMBDA],
    prev: [u8; LAMBDA],
    next: [u8; LAMBDA],
    payload: [u8; PAYLOAD_LEN],
    key: UeKey,
}

impl Drop for EntryPlan {
    fn drop(&mut self) {
        self.prev.zeroize();
        self.next.zeroize();
        self.payload.zeroize();
    }
}

/// A keyword's client state: its latest chain state and UE key.
pub(crate) struct KeywordState {
    pub(crate) st: [u8; LAMBDA],
    pub(crate) key: UeKey,
}

impl Drop for KeywordState {
    fn drop(&mut self) {
        self.st.zeroize();
    }
}

/// The saved client state of UEDSSE and SIMPLE.
#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    master: [u8; 32],
    public_key: Option<[u8; 32]>,
    keywords: Vec<(Vec<u8>, [u8; LAMBDA], [u8; 32])>,
}

/// The client core UEDSSE and SIMPLE share: keys, per-keyword state, the
/// building of index entries and the decryption of results.
pub(crate) struct ChainClient {
    master: Key<32>,
    tw_prf: HmacPrf,
    nonce_prf: HmacPrf,
    pub(crate) keywords: BTreeMap<Vec<u8>, KeywordState>,
    pub(crate) public_key: Option<EciesPublicKey>,
}

impl ChainClient {
    pub(crate) fn generate(rng: &mut dyn CryptoRngCore) -> Self {
        Self::with_key(Key::generate(rng))
    }

    fn with_key(master: Key<32>) -> Self {
        let tw_prf = HmacPrf::new(&master.derive("sesame-sse/uedsse/tw"));
        let nonce_prf = HmacPrf::new(&master.derive("sesame-sse/uedsse/nonce"));
        Self {
            master,
            tw_prf,
            nonce_prf,
            keywords: BTreeMap::new(),
            public_key: None,
        }
    }

    pub(crate) fn restore(bytes: &[u8], what: &str) -> Result<Self> {
        let s: State = sesame_core::wire::decode(bytes)?;
        let mut c = Self::with_key(Key::from_bytes(s.master));
        if let Some(pk) = &s.public_key {
            c.public_key =
                Some(EciesPublicKey::from_bytes(pk).map_err(|_| {
                    Error::Malformed(format!("{what} state with a bad public key"))
                })?);
        }
        for (w, st, k) in &s.keywords {
            let key = UeKey::from_bytes(k)
                .map_err(|_| Error::Malformed(format!("{what} state with a bad UE key")))?;
            let old = c.keywords.insert(w.clone(), KeywordState { st: *st, key });
            if old.is_some() {
                return Err(Error::Malformed(format!(
                    "{what} state lists a keyword twice"
                )));
            }
        }
        Ok(c)
    }

    pub(crate) fn save(&self) -> Result<Vec<u8>> {
        let s = State {
            master: *self.master.as_bytes(),
            public_key: self.public_key.map(|pk| pk.to_bytes()),
            keywords: self
                .keywords
                .iter()
                .map(|(w, ks)| (w.clone(), ks.st, ks.key.to_secret_bytes()))
                .collect(),
        };
        sesame_core::wire::encode(&s)
    }

    /// `t_w = F(k_s, w)`: HMAC-SHA256, first λ bytes.
    pub(crate) fn token(&self, keyword: &[u8]) -> [u8; LAMBDA] {
        let full = self.tw_prf.eval_bytes(keyword);
        let mut tw = [0u8; LAMBDA];
        tw.copy_from_slice(&full[..LAMBDA]);
        tw
    }

    /// `N = PRF(k_n, w ‖ id)`, first [`NONCE_LEN`] bytes.
    fn nonce(&self, keyword: &[u8], id: DocId) -> [u8; NONCE_LEN] {
        let full = self.nonce_prf.eval_concat(&[keyword, &id.to_le_bytes()]);
        let mut n = [0u8; NONCE_LEN];
        n.copy_from_slice(&full[..NONCE_LEN]);
        n
    }

    /// The UE payload `N ‖ id` of (w, id).
    pub(crate) fn payload(&self, keyword: &[u8], id: DocId) -> [u8; PAYLOAD_LEN] {
        let mut p = [0u8; PAYLOAD_LEN];
        p[..NONCE_LEN].copy_from_slice(&self.nonce(keyword, id));
        p[NONCE_LEN..].copy_from_slice(&id.to_le_bytes());
        p
    }

    /// Decrypts a result under `key` and checks its nonce: a ciphertext
    /// that is not an encryption of (keyword, id) under `key` is
    /// [`Error::Crypto`].
    pub(crate) fn open(&self, key: &UeKey, keyword: &[u8], eid: &[u8; EID_LEN]) -> Result<DocId> {
        let p = key
            .decrypt(&Ciphertext::from_bytes(*eid))
            .map_err(crypto_error)?;
        let mut id = [0u8; 8];
        id.copy_from_slice(&p[NONCE_LEN..]);
        let id = DocId::from_le_bytes(id);
        let expect = self.nonce(keyword, id);
        if !bool::from(expect[..].ct_eq(&p[..NONCE_LEN])) {
            return Err(Error::Crypto);
        }
        Ok(id)
    }

    /// The identifiers of the encrypted identifiers `eids` of `keyword`'s
    /// chain under `key`, each checked as [`open`](Self::open) checks it,
    /// sorted and without duplicates.
    pub(crate) fn open_all(
        &self,
        key: &UeKey,
        keyword: &[u8],
        eids: &[[u8; EID_LEN]],
    ) -> Result<Vec<DocId>> {
        let ids = eids
            .iter()
            .map(|eid| self.open(key, keyword, eid))
            .collect::<Result<Vec<_>>>()?;
        Ok(common::normalise(ids))
    }

    /// A fresh non-zero chain state.
    pub(crate) fn fresh_state(rng: &mut dyn CryptoRngCore) -> [u8; LAMBDA] {
        loop {
            let mut st = [0u8; LAMBDA];
            rng.fill_bytes(&mut st);
            if st != [0u8; LAMBDA] {
                return st;
            }
        }
    }

    /// One chain entry: state `next` chained to `prev` (zero for the first
    /// entry), holding `eid`.
    pub(crate) fn chain_entry(
        tw: &[u8; LAMBDA],
        prev: &[u8; LAMBDA],
        next: &[u8; LAMBDA],
        op: u8,
        eid: [u8; EID_LEN],
    ) -> Entry {
        let mut u = [0u8; U_LEN];
        u[..LAMBDA].copy_from_slice(prev);
        u[LAMBDA] = op;
        xor_into(&mut u, &oracle(H2, tw, next));
        let mut masked = eid;
        xor_into(&mut masked, &eid_mask(tw, next));
        (oracle(H1, tw, next), u, masked)
    }

    /// The entry of one update (listing 2), advancing the keyword's state.
    pub(crate) fn entry(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        op: UpdateOp,
        doc: DocId,
        keyword: &[u8],
    ) -> Result<Entry> {
        let tw = self.token(keyword);
        let next = Self::fresh_state(rng);
        let payload = self.payload(keyword, doc);
        let (prev, key) = match self.keywords.get(keyword) {
            Some(ks) => (ks.st, ks.key.clone_secret()),
            None => ([0u8; LAMBDA], UeKey::generate(rng)),
        };
        // Nothing changes if the (astronomically unlikely) encoding fails.
        let eid = key.encrypt(&payload).map_err(crypto_error)?;
        let op = match op {
            UpdateOp::Add => OP_ADD,
            UpdateOp::Delete => OP_DEL,
        };
        let entry = Self::chain_entry(&tw, &prev, &next, op, eid.to_bytes());
        self.keywords
            .insert(keyword.to_vec(), KeywordState { st: next, key });
        Ok(entry)
    }

    /// The sorted entries of an update of `doc` on `keywords`.
    pub(crate) fn update_entries(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        op: UpdateOp,
        doc: DocId,
        keywords: &[Vec<u8>],
    ) -> Result<Vec<Entry>> {
        common::check_doc(doc)?;
        let distinct = keywords
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        if distinct < keywords.len() || keywords.len() < 2 * PARALLEL_ENTRIES {
            // A repeated keyword chains to its own earlier entry: in order.
            let mut out = keywords
                .iter()
                .map(|w| self.entry(rng, op, doc, w))
                .collect::<Result<Vec<_>>>()?;
            out.sort_unstable_by_key(|e| e.0);
            return Ok(out);
        }
        // Planned in order (tokens, fresh states, keys: the random draws of
        // `entry`), encrypted on every core (a UE encryption is a few group
        // exponentiations), then the state moves, all or nothing.
        let op_byte = match op {
            UpdateOp::Add => OP_ADD,
            UpdateOp::Delete => OP_DEL,
        };
        let plans = keywords
            .iter()
            .map(|w| {
                let next = Self::fresh_state(rng);
                let (prev, key) = match self.keywords.get(w) {
                    Some(ks) => (ks.st, ks.key.clone_secret()),
                    None => ([0u8; LAMBDA], UeKey::generate(rng)),
                };
                EntryPlan {
                    tw: self.token(w),
                    prev,
                    next,
                    payload: self.payload(w, doc),
                    key,
                }
            })
            .collect::<Vec<_>>();
        let mut out = common::par_map(&plans, PARALLEL_ENTRIES, |p| {
            let eid = p.key.encrypt(&p.payload).map_err(crypto_error)?;
            Ok(Self::chain_entry(
                &p.tw,
                &p.prev,
                &p.next,
                op_byte,
                eid.to_bytes(),
            ))
        })?;
        for (w, p) in keywords.iter().zip(plans) {
            self.keywords.insert(
                w.clone(),
                KeywordState {
                    st: p.next,
                    key: p.key.clone_secret(),
                },
            );
        }
        out.sort_unstable_by_key(|e| e.0);
        Ok(out)
    }

    /// The sorted entries of every pair of `db`, from empty client state.
    pub(crate) fn setup_entries(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        db: &Multimap,
    ) -> Result<Vec<Entry>> {
        common::check_ids(db)?;
        self.keywords.clear();
        let mut entries = Vec::new();
        for (w, ids) in db {
            for id in common::normalise(ids.clone()) {
                entries.push(self.entry(rng, UpdateOp::Add, id, w)?);
            }
        }
        entries.sort_unstable_by_key(|e| e.0);
        Ok(entries)
    }
}

/// The payload an entry adds to a request (label, `u` and `eid`).
pub(crate) const ENTRY_SIZE: usize = LABEL_LEN + U_LEN + EID_LEN;

/// The requests of a prepared update of UEDSSE or SIMPLE (one index and
/// update format): `entries` in chunks, each the request `put` makes.
pub(crate) fn update_requests<R: Serialize>(
    entries: Vec<Entry>,
    put: impl Fn(Vec<Entry>) -> R,
) -> Result<Option<Vec<Vec<u8>>>> {
    common::chunked_requests(entries, |_| ENTRY_SIZE, put).map(Some)
}

/// Store key of a label.
pub(crate) fn entry_key(label: &[u8; LABEL_LEN]) -> [u8; LABEL_LEN + 1] {
    common::prefixed(b'e', label)
}

/// The stored value of an entry: `u ‖ eid`.
pub(crate) fn entry_value(u: &[u8; U_LEN], eid: &[u8; EID_LEN]) -> Vec<u8> {
    let mut v = Vec::with_capacity(U_LEN + EID_LEN);
    v.extend_from_slice(u);
    v.extend_from_slice(eid);
    v
}

/// Removes every index entry (keys starting with `e`), keeping other
/// server state.
pub(crate) fn clear_entries(store: &dyn Store) -> Result<()> {
    common::clear(store, b"e")
}

/// Puts entries (after clearing the index when `reset`), in one batch.
pub(crate) fn put_entries(store: &dyn Store, reset: bool, entries: Vec<Entry>) -> Result<()> {
    if reset {
        clear_entries(store)?;
    }
    let mut batch = WriteBatch::with_capacity(entries.len());
    for (label, u, eid) in entries {
        batch.put(entry_key(&label).to_vec(), entry_value(&u, &eid));
    }
    store.write(batch)
}

/// One entry met on a chain walk.
pub(crate) struct Visited {
    /// Its store key.
    pub(crate) key: [u8; LABEL_LEN + 1],
    /// Its chained value as stored.
    pub(crate) u: [u8; U_LEN],
    /// Its encrypted identifier, unmasked.
    pub(crate) eid: [u8; EID_LEN],
    /// The mask it is stored under (`H3(t_w ‖ st)`).
    pub(crate) mask: [u8; EID_LEN],
    /// Whether it is a live addition (not cancelled by a later deletion).
    pub(crate) live: bool,
}

/// Walks the chain of (`tw`, `st`) from the newest entry back to the state
/// `0^λ` (listing 3, lines 19-33). A missing head is an empty chain; a
/// missing later entry, a value of the wrong size, an unknown operation or
/// a cycle is [`Error::StoreCorrupt`]. A deletion cancels every older
/// addition with its `eid` (set semantics).
pub(crate) fn walk(
    store: &dyn Store,
    tw: &[u8; LAMBDA],
    st: &[u8; LAMBDA],
) -> Result<Vec<Visited>> {
    let mut out = Vec::new();
    let mut deleted: HashSet<[u8; EID_LEN]> = HashSet::new();
    let mut seen: HashSet<[u8; LAMBDA]> = HashSet::new();
    let mut st = *st;
    while st != [0u8; LAMBDA] {
        if !seen.insert(st) {
            return Err(Error::StoreCorrupt("UEDSSE chain has a cycle".into()));
        }
        let key = entry_key(&oracle(H1, tw, &st));
        let Some(value) = store.get(&key)? else {
            if out.is_empty() {
                return Ok(out);
            }
            return Err(Error::StoreCorrupt("UEDSSE chain is broken".into()));
        };
        if value.len() != U_LEN + EID_LEN {
            return Err(Error::StoreCorrupt(format!(
                "UEDSSE entry of {} bytes",
                value.len()
            )));
        }
        let mut u = [0u8; U_LEN];
        u.copy_from_slice(&value[..U_LEN]);
        let mut eid = [0u8; EID_LEN];
        eid.copy_from_slice(&value[U_LEN..]);
        let mask = eid_mask(tw, &st);
        xor_into(&mut eid, &mask);
        let mut plain = u;
        xor_into(&mut plain, &oracle(H2, tw, &st));
        let live = match plain[LAMBDA] {
            OP_DEL => {
                deleted.insert(eid);
                false
            }
            OP_ADD => !deleted.contains(&eid),
            op => {
                return Err(Error::StoreCorrupt(format!(
                    "UEDSSE entry with operation {op}"
                )))
            }
        };
        out.push(Visited {
            key,
            u,
            eid,
            mask,
            live,
        });
        st.copy_from_slice(&plain[..LAMBDA]);
    }
    Ok(out)
}

/// The client half of UEDSSE.
pub struct UedsseClient {
    core: ChainClient,
}

impl std::fmt::Debug for UedsseClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UedsseClient")
            .field("keywords", &self.core.keywords.len())
            .finish_non_exhaustive()
    }
}

impl UedsseClient {
    /// A client with a fresh key. UEDSSE has no parameters.
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        params.only(DESCRIPTOR.name, &[])?;
        Ok(Self {
            core: ChainClient::generate(rng),
        })
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        Ok(Self {
            core: ChainClient::restore(bytes, "UEDSSE")?,
        })
    }

    /// The server's public key, fetched once and kept in the client state.
    fn public_key(&mut self, channel: &mut dyn Channel) -> Result<EciesPublicKey> {
        if let Some(pk) = self.core.public_key {
            return Ok(pk);
        }
        match channel::call(channel, &Request::PublicKey)? {
            Response::PublicKey(b) => {
                let pk = EciesPublicKey::from_bytes(&b)
                    .map_err(|_| Error::Protocol("invalid UEDSSE server public key".into()))?;
                self.core.public_key = Some(pk);
                Ok(pk)
            }
            other => Err(Error::unexpected("UEDSSE", &other)),
        }
    }

    /// The search request for `keyword` with the fresh key `next`
    /// (listing 3, lines 1-13), or `None` for a keyword never updated.
    pub fn search_request(
        &self,
        rng: &mut dyn CryptoRngCore,
        pk: &EciesPublicKey,
        keyword: &[u8],
        next: &UeKey,
    ) -> Result<Option<Request>> {
        let Some(ks) = self.core.keywords.get(keyword) else {
            return Ok(None);
        };
        let mut tw = self.core.token(keyword);
        let mut st = ks.st;
        let mut delta = ks.key.update_token(next).to_bytes();
        let (emask, mask) = pk.encapsulate(rng);
        let pad = mask_pad(&mask);
        xor_into(&mut tw, &pad[..LAMBDA]);
        xor_into(&mut st, &pad[LAMBDA..2 * LAMBDA]);
        xor_into(&mut delta, &pad[2 * LAMBDA..]);
        Ok(Some(Request::Search {
            tw,
            st,
            delta,
            emask,
        }))
    }
}

impl KeywordClient for UedsseClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn setup_checked(&mut self, Io { rng, channel }: Io<'_>, db: &Multimap) -> Result<()> {
        let entries = self.core.setup_entries(rng, db)?;
        upload(channel, entries)?;
        self.public_key(channel)?;
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
        rng: &mut dyn CryptoRngCore,
        (op, doc, keywords): Update<'_>,
    ) -> Result<Option<Vec<Vec<u8>>>> {
        let entries = self.core.update_entries(rng, op, doc, keywords)?;
        update_requests(entries, |entries| Request::Put {
            reset: false,
            entries,
        })
    }

    fn check_update_response(&self, response: &[u8]) -> Result<()> {
        common::check_answered("UEDSSE", Response::Stored, response)
    }

    fn search(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        keyword: &[u8],
    ) -> Result<Vec<DocId>> {
        if !self.core.keywords.contains_key(keyword) {
            return Ok(Vec::new());
        }
        let pk = self.public_key(channel)?;
        let next = UeKey::generate(rng);
        let Some(request) = self.search_request(rng, &pk, keyword, &next)? else {
            return Ok(Vec::new());
        };
        // A server error (or no answer) leaves the client on k_w. An answer,
        // whatever its bytes, means the server re-encrypted the keyword's
        // entries: the client keeps k_w' (Listing 3, line 35) before it
        // reads the answer, so a damaged answer does not strand it on a key
        // the server no longer uses.
        let raw = channel.call(&sesame_core::wire::encode(&request)?)?;
        let Some(ks) = self.core.keywords.get_mut(keyword) else {
            return Ok(Vec::new());
        };
        ks.key = next;
        let eids = match sesame_core::wire::decode(&raw)? {
            Response::Eids(eids) => eids,
            other => return Err(Error::unexpected("UEDSSE", &other)),
        };
        let core = &self.core;
        let key = core
            .keywords
            .get(keyword)
            .map(|ks| &ks.key)
            .ok_or_else(|| Error::InvalidArgument("UEDSSE keyword vanished".into()))?;
        core.open_all(key, keyword, &eids)
    }

    fn search_writes(&self) -> bool {
        true
    }

    /// The server makes its key pair on the first request for its public
    /// key; later requests read it.
    fn initialise_server(&mut self, channel: &mut dyn Channel) -> Result<()> {
        self.public_key(channel).map(drop)
    }

    /// The search of [`KeywordClient::search`] as a prepared request: the
    /// client keeps `k_w'` at once (Listing 3, line 35, moved before the
    /// call), and the server applies the re-encryption once (the SDK sends
    /// the request under a request id). After a crash the restored client
    /// holds `k_w'`, which opens the re-encrypted answer.
    fn prepare_query(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        query: &Query,
    ) -> Result<Prepared> {
        let keyword = exact_keyword(query)?;
        if !self.core.keywords.contains_key(keyword) {
            return Ok(Prepared::default());
        }
        let pk = self.public_key(channel)?;
        let next = UeKey::generate(rng);
        let Some(request) = self.search_request(rng, &pk, keyword, &next)? else {
            return Ok(Prepared::default());
        };
        if let Some(ks) = self.core.keywords.get_mut(keyword) {
            ks.key = next;
        }
        Ok(Prepared {
            requests: vec![sesame_core::wire::encode(&request)?],
            context: Vec::new(),
        })
    }

    fn resolve_query(
        &mut self,
        query: &Query,
        _context: &[u8],
        responses: &[Vec<u8>],
    ) -> Result<QueryResult> {
        let keyword = exact_keyword(query)?;
        let (Some(ks), [response]) = (self.core.keywords.get(keyword), responses) else {
            return Ok(QueryResult::default());
        };
        let eids = match sesame_core::wire::decode(response)? {
            Response::Eids(eids) => eids,
            other => return Err(Error::unexpected("UEDSSE", &other)),
        };
        Ok(QueryResult {
            ids: self.core.open_all(&ks.key, keyword, &eids)?,
            ..QueryResult::default()
        })
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        self.core.save()
    }
}

/// The keyword of an exact query: the only kind UEDSSE and SIMPLE answer.
pub(crate) fn exact_keyword(query: &Query) -> Result<&[u8]> {
    match query {
        Query::Exact(keyword) => Ok(keyword),
        _ => Err(Error::Unsupported(
            "this scheme answers exact keyword queries only".into(),
        )),
    }
}

fn upload(channel: &mut dyn Channel, entries: Vec<Entry>) -> Result<()> {
    crate::common::upload(
        channel,
        entries,
        |_| ENTRY_SIZE,
        |reset, entries| Request::Put { reset, entries },
        common::answered("UEDSSE", Response::Stored),
    )
}

/// The server half of UEDSSE: the index entries and its ECIES key pair,
/// both in its store.
pub struct UedsseServer {
    store: Arc<dyn Store>,
    secret: Option<EciesSecretKey>,
}

impl std::fmt::Debug for UedsseServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UedsseServer").finish_non_exhaustive()
    }
}

impl UedsseServer {
    /// A server keeping its index and key pair in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            secret: None,
        }
    }

    /// The server's secret key: read from the store, or made from the
    /// operating system's generator and stored on first use.
    fn secret(&mut self) -> Result<&EciesSecretKey> {
        if self.secret.is_none() {
            let sk = match self.store.get(SECRET_KEY)? {
                Some(mut bytes) => {
                    let arr: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
                        Error::StoreCorrupt("UEDSSE secret key of the wrong size".into())
                    })?;
                    bytes.zeroize();
                    EciesSecretKey::from_bytes(&arr)
                        .map_err(|_| Error::StoreCorrupt("invalid UEDSSE secret key".into()))?
                }
                None => {
                    let sk = EciesSecretKey::generate(&mut rand_core::OsRng);
                    let mut bytes = sk.to_secret_bytes();
                    self.store.put(SECRET_KEY, &bytes)?;
                    bytes.zeroize();
                    sk
                }
            };
            self.secret = Some(sk);
        }
        self.secret
            .as_ref()
            .ok_or_else(|| Error::StoreCorrupt("UEDSSE secret key missing".into()))
    }

    /// Answers a masked search (listing 3, lines 15-33): unmasks, walks the
    /// chain, re-encrypts every live identifier with Δ in the store and
    /// returns the re-encrypted identifiers (each once).
    pub fn search(
        &mut self,
        mut tw: [u8; LAMBDA],
        mut st: [u8; LAMBDA],
        mut delta: [u8; 32],
        emask: &[u8; 32],
    ) -> Result<Vec<[u8; EID_LEN]>> {
        let mask = self.secret()?.decapsulate(emask)?;
        let pad = mask_pad(&mask);
        xor_into(&mut tw, &pad[..LAMBDA]);
        xor_into(&mut st, &pad[LAMBDA..2 * LAMBDA]);
        xor_into(&mut delta, &pad[2 * LAMBDA..]);
        let token = UpdateToken::from_bytes(&delta)
            .map_err(|_| Error::Protocol("UEDSSE update token is not a valid scalar".into()))?;
        delta.zeroize();
        let visited = walk(self.store.as_ref(), &tw, &st)?;
        let mut fresh: HashMap<[u8; EID_LEN], [u8; EID_LEN]> = HashMap::new();
        let mut out = Vec::new();
        let mut batch = WriteBatch::new();
        for v in visited.into_iter().filter(|v| v.live) {
            let new = match fresh.get(&v.eid) {
                Some(new) => *new,
                None => {
                    let new = token
                        .re_encrypt(&Ciphertext::from_bytes(v.eid))
                        .map_err(|_| {
                            Error::StoreCorrupt("UEDSSE entry holds no UE ciphertext".into())
                        })?
                        .to_bytes();
                    fresh.insert(v.eid, new);
                    out.push(new);
                    new
                }
            };
            let mut masked = new;
            xor_into(&mut masked, &v.mask);
            batch.put(v.key.to_vec(), entry_value(&v.u, &masked));
        }
        self.store.write(batch)?;
        Ok(out)
    }
}

impl Handler for UedsseServer {
    type Request = Request;
    type Response = Response;

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::Put { reset, entries } => {
                put_entries(self.store.as_ref(), reset, entries)?;
                Ok(Response::Stored)
            }
            Request::PublicKey => Ok(Response::PublicKey(self.secret()?.public_key().to_bytes())),
            Request::Search {
                tw,
                st,
                delta,
                emask,
            } => Ok(Response::Eids(self.search(tw, st, delta, &emask)?)),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries encrypted on several threads are those `entry` makes one by
    /// one from the same state and random stream, and the state moves the
    /// same way.
    #[test]
    fn entries_computed_on_several_threads_equal_those_computed_on_one() {
        use rand::SeedableRng;
        let words: Vec<Vec<u8>> = (0..100).map(|i| format!("w{i}").into_bytes()).collect();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        let mut one = ChainClient::generate(&mut rng);
        one.entry(&mut rng, UpdateOp::Add, 1, &words[3]).unwrap();
        let mut many = ChainClient::with_key(Key::from_bytes(*one.master.as_bytes()));
        many.keywords.insert(
            words[3].clone(),
            KeywordState {
                st: one.keywords[&words[3]].st,
                key: one.keywords[&words[3]].key.clone_secret(),
            },
        );
        let mut r1 = rand_chacha::ChaCha20Rng::seed_from_u64(6);
        let mut r2 = rand_chacha::ChaCha20Rng::seed_from_u64(6);
        let mut seq = words
            .iter()
            .map(|w| one.entry(&mut r1, UpdateOp::Add, 2, w))
            .collect::<Result<Vec<_>>>()
            .unwrap();
        seq.sort_unstable_by_key(|e| e.0);
        let par = many
            .update_entries(&mut r2, UpdateOp::Add, 2, &words)
            .unwrap();
        assert_eq!(seq, par);
        for w in &words {
            assert_eq!(one.keywords[w].st, many.keywords[w].st);
        }
        // A repeated keyword takes the path in order and chains to itself.
        let twice = vec![words[0].clone(); 2 * PARALLEL_ENTRIES + 1];
        let chained = many
            .update_entries(&mut r2, UpdateOp::Add, 3, &twice)
            .unwrap();
        assert_eq!(chained.len(), twice.len());
    }
}
