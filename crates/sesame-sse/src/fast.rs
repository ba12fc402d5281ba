//! FAST: the forward-private dynamic scheme of Song, Dong, Yuan, Xu and
//! Zhao, "Forward Private Searchable Symmetric Encryption with Optimized
//! I/O Efficiency", IEEE TDSC 2018 (arXiv 1710.00183), built from
//! symmetric primitives only; the baseline of seed 000's evaluation.
//!
//! For each keyword w the client keeps the state `st_c` of its latest
//! update; `t_w = F(k_s, w)`. An update of (op, w, ind) draws a fresh
//! 128-bit key `k_{c+1}`, moves the state forward with a keyed permutation,
//! `st_{c+1} = P(k_{c+1}, st_c)` (the first update starts from a random
//! `st_0`), and stores
//!
//! ```text
//! T[H1(t_w ‖ st_{c+1})] = (ind ‖ op ‖ k_{c+1}) ⊕ H2(t_w ‖ st_{c+1})
//! ```
//!
//! A search sends `(t_w, st_c)`; the server walks back, each entry giving
//! the key of the permutation that leads to the previous state
//! (`st_{i-1} = P⁻¹(k_i, st_i)`), until a label is missing, and cancels
//! additions against later deletions. Without a future `k_{c+1}` the
//! server cannot move a state forward: updates after a search are
//! unlinkable to it (forward privacy).
//!
//! `P` is AES-128 keyed with `k_{c+1}`; `H1`, `H2` are SHA-256 with a
//! domain byte; `F` is HMAC-SHA256. See `docs/schemes/fast.md` for leakage
//! and deviations.
//!
//! **Labels.** A label is the whole 32-byte digest by default (the
//! paper's implementation). With the parameter `labels=16` a client stores
//! its entries under the first 16 bytes of `H1(t_w ‖ st)` instead
//! ([`Request::PutShort`], searched by [`Request::SearchShort`]): a
//! truncated random-oracle output is a random oracle of 128 bits, which
//! the server cannot predict without `st` (the same 128 bits as the states
//! and keys); what 16 bytes give up is room against accidental collisions
//! of two labels (an entry overwritten: a result lost, not a secret
//! revealed), whose probability for `n` entries is at most `n² / 2^129`
//! (2^-65 for 2^32 entries). An entry is then 41 bytes instead of 57.
//! The client's saved state records which form it writes; a state saved
//! before the parameter existed is a client of 32-byte labels, unchanged.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use aes::cipher::{BlockDecrypt, BlockEncrypt, KeyInit};
use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    BackwardPrivacy, Channel, Error, Handler, IoCounts, Params, QueryKind, Result,
    SchemeDescriptor, SchemeKind, Store,
};
use sesame_crypto::counter::{self, Primitive};
use sesame_crypto::hash::sha256;
use sesame_crypto::key::Key;
use sesame_crypto::prf::HmacPrf;
use zeroize::Zeroize;

use crate::api::{DocId, Io, KeywordClient, KeywordScheme, Multimap, Update, UpdateOp};
use crate::common::{self, LabelLengths, Saved};

/// Descriptor of FAST.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "fast",
    title: "FAST (forward-private SSE from symmetric primitives)",
    citation: "X. Song, C. Dong, D. Yuan, Q. Xu, M. Zhao. Forward Private Searchable Symmetric \
               Encryption with Optimized I/O Efficiency. IEEE Transactions on Dependable and \
               Secure Computing, 2018 (arXiv 1710.00183)",
    kind: SchemeKind::DynamicSse,
    forward_private: true,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Exact],
    leakage: "Update: the number of keywords of the update and the time; nothing links it to \
              earlier searches (forward privacy). Search: the search pattern (t_w is \
              deterministic), the number of updates on the keyword and which entries they are, \
              and, response-revealing, every identifier the keyword was ever updated with: \
              live results, deleted identifiers and which deletion cancelled which addition \
              (no backward privacy).",
    doc: "docs/schemes/fast.md",
};

/// The registry entry of FAST.
pub fn scheme() -> KeywordScheme {
    common::keyword_scheme!(
        &DESCRIPTOR,
        &[(
            LABELS,
            "32: bytes of an entry's label, 32 or 16 (module documentation)"
        )],
        FastClient,
        FastServer
    )
}

/// Security parameter λ in bytes: states, keyword tokens, permutation keys.
pub const LAMBDA: usize = 16;

/// Bytes of a label `H1(t_w ‖ st)` (a whole SHA-256 digest, as in the
/// paper's implementation).
pub const LABEL_LEN: usize = 32;

/// Bytes of a label of a client made with `labels=16`: the first half of
/// `H1(t_w ‖ st)` (see the module documentation).
pub const SHORT_LABEL_LEN: usize = 16;

/// Bytes of an encrypted entry: `ind (8) ‖ op (1) ‖ k (16)`.
pub const VALUE_LEN: usize = 8 + 1 + LAMBDA;

/// The parameter that chooses the label length (`32`, the default, or
/// `16`).
const LABELS: &str = "labels";

/// FAST's two label lengths.
const LENGTHS: LabelLengths = LabelLengths {
    scheme: "FAST",
    long: LABEL_LEN,
    short: SHORT_LABEL_LEN,
};

/// Operation byte of an addition.
const OP_ADD: u8 = 0;
/// Operation byte of a deletion.
const OP_DEL: u8 = 1;

/// Domain bytes of the two random oracles.
const H1: u8 = 1;
const H2: u8 = 2;

/// An index entry: (label, encrypted value).
pub type Entry = ([u8; LABEL_LEN], [u8; VALUE_LEN]);

/// An index entry under a 16-byte label (`labels=16`).
pub type ShortEntry = ([u8; SHORT_LABEL_LEN], [u8; VALUE_LEN]);

/// Payload bytes of an entry in a request.
fn entry_size(_: &Entry) -> usize {
    LABEL_LEN + VALUE_LEN
}

crate::common::redacted_debug!(Request);

/// A FAST request.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Stores entries; `reset` first removes the earlier index.
    Put {
        /// Remove the earlier index first.
        reset: bool,
        /// The entries.
        entries: Vec<Entry>,
    },
    /// The identifiers of the keyword whose token and latest state these
    /// are.
    Search {
        /// Keyword token `t_w`.
        tw: [u8; LAMBDA],
        /// State of the latest update `st_c`.
        st: [u8; LAMBDA],
    },
    /// As [`Request::Put`], entries under 16-byte labels (`labels=16`).
    PutShort {
        /// Remove the earlier index first.
        reset: bool,
        /// The entries.
        entries: Vec<ShortEntry>,
    },
    /// As [`Request::Search`], for an index of 16-byte labels: each label
    /// is the first 16 bytes of `H1(t_w ‖ st)`.
    SearchShort {
        /// Keyword token `t_w`.
        tw: [u8; LAMBDA],
        /// State of the latest update `st_c`.
        st: [u8; LAMBDA],
    },
}

/// A FAST response: stored, or the identifiers a search found.
pub type Response = crate::common::IdsResponse;

/// `H_tag(t_w ‖ st)`: SHA-256 over one 33-byte block; one Hash call.
pub(crate) fn oracle(tag: u8, tw: &[u8; LAMBDA], st: &[u8; LAMBDA]) -> [u8; 32] {
    let mut input = [0u8; 1 + 2 * LAMBDA];
    input[0] = tag;
    input[1..=LAMBDA].copy_from_slice(tw);
    input[LAMBDA + 1..].copy_from_slice(st);
    sha256(&input)
}

/// `P(k, st)`: AES-128 under `k`; one Prp call.
fn permute(k: &[u8; LAMBDA], st: &[u8; LAMBDA]) -> [u8; LAMBDA] {
    counter::record(Primitive::Prp, 1);
    let cipher = aes::Aes128Enc::new(k.into());
    let mut block = aes::Block::from(*st);
    cipher.encrypt_block(&mut block);
    block.into()
}

/// `P⁻¹(k, st)`: AES-128 decryption under `k`; one Prp call.
fn unpermute(k: &[u8; LAMBDA], st: &[u8; LAMBDA]) -> [u8; LAMBDA] {
    counter::record(Primitive::Prp, 1);
    let cipher = aes::Aes128Dec::new(k.into());
    let mut block = aes::Block::from(*st);
    cipher.decrypt_block(&mut block);
    block.into()
}

/// The keyword token `t_w = F(k_s, w)` (HMAC-SHA256, first λ bytes).
fn token(prf: &HmacPrf, keyword: &[u8]) -> [u8; LAMBDA] {
    let full = prf.eval_bytes(keyword);
    let mut tw = [0u8; LAMBDA];
    tw.copy_from_slice(&full[..LAMBDA]);
    tw
}

/// The entry of update (op, doc) on the keyword of token `tw` whose state
/// is `st`, and the next state.
fn seal(
    rng: &mut dyn CryptoRngCore,
    op: UpdateOp,
    doc: DocId,
    tw: &[u8; LAMBDA],
    st: &[u8; LAMBDA],
) -> (Entry, [u8; LAMBDA]) {
    let mut k = [0u8; LAMBDA];
    rng.fill_bytes(&mut k);
    let next = permute(&k, st);
    let mut value = [0u8; VALUE_LEN];
    value[..8].copy_from_slice(&doc.to_le_bytes());
    value[8] = match op {
        UpdateOp::Add => OP_ADD,
        UpdateOp::Delete => OP_DEL,
    };
    value[9..].copy_from_slice(&k);
    k.zeroize();
    let pad = oracle(H2, tw, &next);
    for (v, p) in value.iter_mut().zip(pad) {
        *v ^= p;
    }
    let label = oracle(H1, tw, &next);
    ((label, value), next)
}

#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    master: [u8; 32],
    states: Vec<(Vec<u8>, [u8; LAMBDA])>,
}

/// The saved state of a client of 16-byte labels: [`State`]'s fields,
/// then the label length. A saved [`State`] never decodes as this (it
/// ends one byte early) nor this as a [`State`] (a byte is left over).
#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct StateWithLabels {
    master: [u8; 32],
    states: Vec<(Vec<u8>, [u8; LAMBDA])>,
    labels: u8,
}

/// The client half of FAST: the master key and, per keyword, the state of
/// its latest update.
pub struct FastClient {
    master: Key<32>,
    tw_prf: HmacPrf,
    states: BTreeMap<Vec<u8>, Slot>,
    /// Entries under 16-byte labels (`labels=16`).
    short: bool,
}

/// A keyword's state, and its token once computed in this process (the
/// token is not saved: it follows from the key).
#[derive(Clone, Copy, zeroize::Zeroize)]
struct Slot {
    st: [u8; LAMBDA],
    tw: Option<[u8; LAMBDA]>,
}

impl Slot {
    fn saved(st: [u8; LAMBDA]) -> Self {
        Slot { st, tw: None }
    }
}

impl std::fmt::Debug for FastClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastClient")
            .field("keywords", &self.states.len())
            .finish_non_exhaustive()
    }
}

impl Drop for FastClient {
    fn drop(&mut self) {
        for slot in self.states.values_mut() {
            slot.zeroize();
        }
    }
}

impl FastClient {
    /// A client with a fresh key. One parameter: `labels`, the bytes of
    /// a label, `32` (the default) or `16` (see the module documentation).
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        params.only(DESCRIPTOR.name, &[LABELS])?;
        let short = LENGTHS.short(params)?;
        Ok(Self::with_key(Key::generate(rng), BTreeMap::new(), short))
    }

    fn with_key(master: Key<32>, states: BTreeMap<Vec<u8>, Slot>, short: bool) -> Self {
        let tw_prf = HmacPrf::new(&master.derive("sesame-sse/fast/tw"));
        Self {
            master,
            tw_prf,
            states,
            short,
        }
    }

    /// A client from saved state (of either label length).
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        fn slots(saved: &[(Vec<u8>, [u8; LAMBDA])]) -> Result<BTreeMap<Vec<u8>, Slot>> {
            let mut states = BTreeMap::new();
            for (w, st) in saved {
                if states.insert(w.clone(), Slot::saved(*st)).is_some() {
                    return Err(Error::Malformed("FAST state lists a keyword twice".into()));
                }
            }
            Ok(states)
        }
        Ok(
            match LENGTHS.restore::<State, StateWithLabels>(bytes, |s| s.labels)? {
                Saved::Long(s) => {
                    Self::with_key(Key::from_bytes(s.master), slots(&s.states)?, false)
                }
                Saved::Short(s) => {
                    Self::with_key(Key::from_bytes(s.master), slots(&s.states)?, true)
                }
            },
        )
    }

    /// The requests that store `entries` (sorted by label), in chunks.
    fn put_requests(&self, entries: Vec<Entry>) -> Result<Vec<Vec<u8>>> {
        if self.short {
            common::chunked_requests(shorten(entries), short_entry_size, |entries| {
                Request::PutShort {
                    reset: false,
                    entries,
                }
            })
        } else {
            common::chunked_requests(entries, entry_size, |entries| Request::Put {
                reset: false,
                entries,
            })
        }
    }

    /// The entry of one update, advancing the keyword's state: one
    /// lookup of the keyword, and its token computed once per process.
    fn entry(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        op: UpdateOp,
        doc: DocId,
        keyword: &[u8],
    ) -> Entry {
        if let Some(slot) = self.states.get_mut(keyword) {
            let tw = match slot.tw {
                Some(tw) => tw,
                None => {
                    let tw = token(&self.tw_prf, keyword);
                    slot.tw = Some(tw);
                    tw
                }
            };
            let (entry, next) = seal(rng, op, doc, &tw, &slot.st);
            slot.st = next;
            return entry;
        }
        let tw = token(&self.tw_prf, keyword);
        let mut st0 = [0u8; LAMBDA];
        rng.fill_bytes(&mut st0);
        let (entry, next) = seal(rng, op, doc, &tw, &st0);
        self.states.insert(
            keyword.to_vec(),
            Slot {
                st: next,
                tw: Some(tw),
            },
        );
        entry
    }

    fn entries(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        op: UpdateOp,
        doc: DocId,
        keywords: &[Vec<u8>],
    ) -> Result<Vec<Entry>> {
        common::check_doc(doc)?;
        let mut out: Vec<Entry> = keywords
            .iter()
            .map(|w| self.entry(rng, op, doc, w))
            .collect();
        // The order of the entries says nothing about the keywords.
        out.sort_unstable_by_key(|e| e.0);
        Ok(out)
    }
}

impl KeywordClient for FastClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn setup_checked(&mut self, Io { rng, channel }: Io<'_>, db: &Multimap) -> Result<()> {
        self.states.clear();
        let mut entries = Vec::new();
        for (w, ids) in db {
            for id in common::normalise(ids.clone()) {
                entries.push(self.entry(rng, UpdateOp::Add, id, w));
            }
        }
        entries.sort_unstable_by_key(|e| e.0);
        if self.short {
            upload_short(channel, shorten(entries))
        } else {
            upload(channel, entries)
        }
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
        let entries = self.entries(rng, op, doc, keywords)?;
        self.put_requests(entries).map(Some)
    }

    fn check_update_response(&self, response: &[u8]) -> Result<()> {
        common::check_answered("FAST", Response::Stored, response)
    }

    fn search_token(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        keyword: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let Some(slot) = self.states.get(keyword).copied() else {
            return Ok(None);
        };
        let tw = slot.tw.unwrap_or_else(|| token(&self.tw_prf, keyword));
        let request = if self.short {
            Request::SearchShort { tw, st: slot.st }
        } else {
            Request::Search { tw, st: slot.st }
        };
        sesame_core::wire::encode(&request).map(Some)
    }

    fn resolve(&mut self, _keyword: &[u8], response: &[u8]) -> Result<Vec<DocId>> {
        Response::sorted_ids(sesame_core::wire::decode(response)?, "FAST")
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        let states = self
            .states
            .iter()
            .map(|(w, slot)| (w.clone(), slot.st))
            .collect();
        if self.short {
            sesame_core::wire::encode(&StateWithLabels {
                master: *self.master.as_bytes(),
                states,
                labels: SHORT_LABEL_LEN as u8,
            })
        } else {
            sesame_core::wire::encode(&State {
                master: *self.master.as_bytes(),
                states,
            })
        }
    }
}

/// Entries under the first [`SHORT_LABEL_LEN`] bytes of their labels (in
/// the same order: a prefix keeps the sort).
fn shorten(entries: Vec<Entry>) -> Vec<ShortEntry> {
    entries
        .into_iter()
        .map(|(label, value)| (short_label(&label), value))
        .collect()
}

/// The first [`SHORT_LABEL_LEN`] bytes of a label.
fn short_label(label: &[u8; LABEL_LEN]) -> [u8; SHORT_LABEL_LEN] {
    let mut out = [0u8; SHORT_LABEL_LEN];
    out.copy_from_slice(&label[..SHORT_LABEL_LEN]);
    out
}

/// Payload bytes of a short entry in a request.
fn short_entry_size(_: &ShortEntry) -> usize {
    SHORT_LABEL_LEN + VALUE_LEN
}

fn upload_short(channel: &mut dyn Channel, entries: Vec<ShortEntry>) -> Result<()> {
    crate::common::upload(
        channel,
        entries,
        short_entry_size,
        |reset, entries| Request::PutShort { reset, entries },
        common::answered("FAST", Response::Stored),
    )
}

fn upload(channel: &mut dyn Channel, entries: Vec<Entry>) -> Result<()> {
    crate::common::upload(
        channel,
        entries,
        |_| LABEL_LEN + VALUE_LEN,
        |reset, entries| Request::Put { reset, entries },
        common::answered("FAST", Response::Stored),
    )
}

/// Store key of a label.
fn entry_key(label: &[u8; LABEL_LEN]) -> [u8; LABEL_LEN + 1] {
    common::prefixed(b'e', label)
}

/// Store key of a 16-byte label: the same key space (`e`), one length
/// per index (a client writes one form only).
fn short_entry_key(label: &[u8; SHORT_LABEL_LEN]) -> [u8; SHORT_LABEL_LEN + 1] {
    common::prefixed(b'e', label)
}

/// The server half of FAST.
pub struct FastServer {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for FastServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastServer").finish_non_exhaustive()
    }
}

impl FastServer {
    /// A server keeping its index in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// Walks the keyword's chain back from `st` and returns the live
    /// identifiers, sorted. A deletion cancels every older addition of its
    /// identifier (set semantics).
    pub fn search(&self, tw: [u8; LAMBDA], st: [u8; LAMBDA]) -> Result<Vec<DocId>> {
        self.search_labels(tw, st, false)
    }

    /// As [`FastServer::search`], over entries under 16-byte labels
    /// (`short`) or whole ones.
    fn search_labels(
        &self,
        tw: [u8; LAMBDA],
        mut st: [u8; LAMBDA],
        short: bool,
    ) -> Result<Vec<DocId>> {
        let mut ids = Vec::new();
        let mut deleted: HashSet<DocId> = HashSet::new();
        loop {
            let label = oracle(H1, &tw, &st);
            let value = if short {
                self.store.get(&short_entry_key(&short_label(&label)))?
            } else {
                self.store.get(&entry_key(&label))?
            };
            let Some(value) = value else {
                break;
            };
            let value: [u8; VALUE_LEN] = value
                .as_slice()
                .try_into()
                .map_err(|_| Error::StoreCorrupt(format!("FAST entry of {} bytes", value.len())))?;
            let pad = oracle(H2, &tw, &st);
            let mut plain = [0u8; VALUE_LEN];
            for ((o, v), p) in plain.iter_mut().zip(value).zip(pad) {
                *o = v ^ p;
            }
            let mut id = [0u8; 8];
            id.copy_from_slice(&plain[..8]);
            let id = DocId::from_le_bytes(id);
            match plain[8] {
                OP_ADD => {
                    if !deleted.contains(&id) {
                        ids.push(id);
                    }
                }
                OP_DEL => {
                    deleted.insert(id);
                }
                op => {
                    return Err(Error::StoreCorrupt(format!(
                        "FAST entry with operation {op}"
                    )))
                }
            }
            let mut k = [0u8; LAMBDA];
            k.copy_from_slice(&plain[9..]);
            st = unpermute(&k, &st);
            k.zeroize();
        }
        Ok(common::normalise(ids))
    }
}

impl Handler for FastServer {
    type Request = Request;
    type Response = Response;

    /// Every entry is stored under a label `H1(t_w ‖ st)` of a state drawn
    /// from a fresh random key: no two updates write the same label, and a
    /// stored value never changes.
    fn write_once(&self) -> bool {
        true
    }

    /// Entries are found one label at a time along a chain.
    fn packable(&self) -> bool {
        true
    }

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            // Both forms in the same key space (`e`): entry_key and
            // short_entry_key.
            Request::Put { reset, entries } => {
                common::put_labelled(self.store.as_ref(), reset, b'e', entries)?;
                Ok(Response::Stored)
            }
            Request::PutShort { reset, entries } => {
                common::put_labelled(self.store.as_ref(), reset, b'e', entries)?;
                Ok(Response::Stored)
            }
            Request::Search { tw, st } => Ok(Response::Ids(self.search(tw, st)?)),
            Request::SearchShort { tw, st } => Ok(Response::Ids(self.search_labels(tw, st, true)?)),
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
    fn permutation_inverts() {
        let k = [3u8; LAMBDA];
        let st = [9u8; LAMBDA];
        assert_eq!(unpermute(&k, &permute(&k, &st)), st);
        assert_ne!(permute(&k, &st), st);
    }
}
