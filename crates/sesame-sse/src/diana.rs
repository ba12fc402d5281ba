//! Diana: the forward-private dynamic scheme of Bost, Minaud and
//! Ohrimenko, "Forward and Backward Private Searchable Encryption from
//! Constrained Cryptographic Primitives", ACM CCS 2017, built from a
//! range-constrained PRF (a GGM tree) and hashing only.
//!
//! For each keyword w the client keeps one counter `c`, the number of its
//! updates. From `F(k, w)` it takes the root `r_w` of a GGM tree of depth
//! 32 and a tweak `t_w`. Update `c` of (op, w, ind) uses leaf
//! `s_c = GGM(r_w, c)` and stores
//!
//! ```text
//! (label ‖ pad) = H(t_w ‖ s_c)      label: 16 bytes, pad: 9 bytes
//! T[label] = (ind ‖ op) ⊕ pad
//! ```
//!
//! A search sends `t_w` and the minimal cover of the leaves `0..c` (one
//! GGM node per bit set in `c`, [`GgmTree::prefix_cover`]). The server
//! derives every leaf below the cover, newest first, looks their labels up
//! a batch at a time and cancels additions against later deletions. The
//! cover gives no leaf from `c` on: updates after a search are unlinkable
//! to it (forward privacy).
//!
//! Against FAST (module `fast`), an entry carries no key of the chain: 26
//! bytes (a 17-byte store key, a 9-byte value) instead of 42, and a search
//! reads its labels in batches instead of one label after the other. The
//! client keeps a counter per keyword instead of a 16-byte state; a search
//! token has up to 32 nodes instead of one state. See
//! `docs/schemes/diana.md` for leakage and deviations.
//!
//! **Short labels** (`labels = 12`, what a table's keyword index takes):
//! entries are stored under the first 12 bytes of their label, 22 bytes
//! an entry. A label is a random-oracle output on a leaf the server has
//! not been given, so before a search covers it the server can guess it
//! with probability 2^-96, and cutting it reveals nothing more of it. Two
//! entries of one index share a short label with probability about
//! n^2 / 2^97 for n entries (2^-33 at 2^32 entries): the later one then
//! overwrites the earlier (a result lost, never a secret revealed; a
//! packed store counts it as an overwrite of a write-once index). A
//! search asks for short labels (`SearchShort`), and the
//! server looks up the first 12 bytes of each label it derives. The
//! client's saved state records the length (a state of 16-byte labels
//! keeps the encoding of earlier builds, which they still read).
//!
//! **Short identifiers** (`ids = 5`, with `labels = 12`: what a table's
//! keyword index takes): an entry's value is `(ind ‖ op) ⊕ pad` over the
//! identifier's five low bytes and the operation, 6 bytes instead of 9,
//! 18 bytes an entry in all. The client refuses an identifier of 2^40 or
//! more before any counter moves. The pad is the first 6 bytes of the
//! same oracle output, so what the server learns is unchanged: it opens
//! each entry a search gives it to the same identifier and operation. It
//! tells the value's form by its length (a search asks for short labels
//! as above). The state records both lengths.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    BackwardPrivacy, Channel, Error, Handler, IoCounts, Params, QueryKind, Result,
    SchemeDescriptor, SchemeKind, Store,
};
use sesame_crypto::ggm::{GgmNode, GgmTree};
use sesame_crypto::hash::sha256;
use sesame_crypto::key::Key;
use sesame_crypto::prf::HmacPrf;
use zeroize::Zeroize;

use crate::api::{DocId, Io, KeywordClient, KeywordScheme, Multimap, Update, UpdateOp};
use crate::common::{self, LabelLengths, Saved};

/// Descriptor of Diana.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "diana",
    title: "Diana (forward-private SSE from a range-constrained PRF)",
    citation: "R. Bost, B. Minaud, O. Ohrimenko. Forward and Backward Private Searchable \
               Encryption from Constrained Cryptographic Primitives. ACM CCS 2017",
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
    doc: "docs/schemes/diana.md",
};

/// The registry entry of Diana.
pub fn scheme() -> KeywordScheme {
    common::keyword_scheme!(
        &DESCRIPTOR,
        &[
            (
                LABELS,
                "16: bytes of an entry's label, 16 or 12 (module documentation)"
            ),
            (
                IDS,
                "8: bytes of a document identifier in an entry, 8 or 5 (identifiers below \
                 2^40; with labels = 12)"
            )
        ],
        DianaClient,
        DianaServer
    )
}

/// Security parameter λ in bytes: tree nodes, leaves, tweaks, labels.
pub const LAMBDA: usize = 16;

/// Depth of a keyword's GGM tree: a keyword takes at most `2^32 - 1`
/// updates.
pub const DEPTH: u8 = 32;

/// Bytes of a label: the first half of `H(t_w ‖ s_c)`.
pub const LABEL_LEN: usize = 16;

/// Bytes of a short label (`labels = 12`): the first 12 bytes of a
/// label. What a table's keyword index takes (module documentation).
pub const SHORT_LABEL_LEN: usize = 12;

/// The parameter that chooses the label's length.
const LABELS: &str = "labels";

/// Diana's two label lengths.
const LENGTHS: LabelLengths = LabelLengths {
    scheme: "Diana",
    long: LABEL_LEN,
    short: SHORT_LABEL_LEN,
};

/// Bytes of an encrypted entry: `ind (8) ‖ op (1)`.
pub const VALUE_LEN: usize = 8 + 1;

/// Bytes of an identifier in an entry of short identifiers (`ids = 5`):
/// identifiers below 2^40.
pub const SHORT_ID_LEN: usize = 5;

/// Bytes of an encrypted entry of short identifiers: `ind (5) ‖ op (1)`.
pub const SHORT_VALUE_LEN: usize = SHORT_ID_LEN + 1;

/// The parameter that chooses the identifier's length.
const IDS: &str = "ids";

/// Leaves a search derives and looks up together.
const SEARCH_BATCH: u64 = 4096;

/// Operation byte of an addition.
const OP_ADD: u8 = 0;
/// Operation byte of a deletion.
const OP_DEL: u8 = 1;

/// Domain byte of the random oracle.
const H: u8 = 1;

/// An index entry: (label, encrypted value).
pub type Entry = ([u8; LABEL_LEN], [u8; VALUE_LEN]);

/// An entry under a short label.
pub type ShortEntry = ([u8; SHORT_LABEL_LEN], [u8; VALUE_LEN]);

/// An entry under a short label with a short identifier.
pub type CompactEntry = ([u8; SHORT_LABEL_LEN], [u8; SHORT_VALUE_LEN]);

crate::common::redacted_debug!(Request);

/// A Diana request.
#[derive(PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Stores entries; `reset` first removes the earlier index.
    Put {
        /// Remove the earlier index first.
        reset: bool,
        /// The entries.
        entries: Vec<Entry>,
    },
    /// The identifiers of the keyword whose tweak and cover these are.
    Search {
        /// Keyword tweak `t_w`.
        tw: [u8; LAMBDA],
        /// The minimal cover of the leaves `0..c` of the keyword's tree,
        /// left to right.
        cover: Vec<GgmNode>,
    },
    /// [`Request::Put`] of a client of short labels (variants after the
    /// first two, so that requests of 16-byte labels, pending intents
    /// included, keep their encoding).
    PutShort {
        /// Remove the earlier index first.
        reset: bool,
        /// The entries.
        entries: Vec<ShortEntry>,
    },
    /// [`Request::Search`] of a client of short labels: the server looks
    /// up the first [`SHORT_LABEL_LEN`] bytes of each label it derives.
    SearchShort {
        /// Keyword tweak `t_w`.
        tw: [u8; LAMBDA],
        /// As [`Request::Search`]'s.
        cover: Vec<GgmNode>,
    },
    /// [`Request::Put`] of a client of short labels and short
    /// identifiers (`ids = 5`; its searches are [`Request::SearchShort`]).
    PutCompact {
        /// Remove the earlier index first.
        reset: bool,
        /// The entries.
        entries: Vec<CompactEntry>,
    },
}

/// A Diana response: stored, or the identifiers a search found.
pub type Response = crate::common::IdsResponse;

/// `H(t_w ‖ s)`: SHA-256 over one 33-byte block, split into the label
/// (its first 16 bytes) and the pad of the value (the next 9); one Hash
/// call. Public so that a test can play a server that tries to derive
/// labels from what it was sent.
pub fn oracle(tw: &[u8; LAMBDA], leaf: &[u8; LAMBDA]) -> ([u8; LABEL_LEN], [u8; VALUE_LEN]) {
    let mut input = [0u8; 1 + 2 * LAMBDA];
    input[0] = H;
    input[1..=LAMBDA].copy_from_slice(tw);
    input[LAMBDA + 1..].copy_from_slice(leaf);
    let mut out = sha256(&input);
    input.zeroize();
    let mut label = [0u8; LABEL_LEN];
    label.copy_from_slice(&out[..LABEL_LEN]);
    let mut pad = [0u8; VALUE_LEN];
    pad.copy_from_slice(&out[LABEL_LEN..LABEL_LEN + VALUE_LEN]);
    out.zeroize();
    (label, pad)
}

/// The entry of update (op, doc) at leaf `leaf` of the keyword of tweak
/// `tw`, its identifier in `id_len` bytes (8, or [`SHORT_ID_LEN`]: the
/// value's first [`SHORT_VALUE_LEN`] bytes are the entry's, the rest
/// zeros).
fn seal(op: UpdateOp, doc: DocId, tw: &[u8; LAMBDA], leaf: &[u8; LAMBDA], id_len: usize) -> Entry {
    let (label, mut pad) = oracle(tw, leaf);
    let mut value = [0u8; VALUE_LEN];
    let id_len = id_len.min(8);
    value[..id_len].copy_from_slice(&doc.to_le_bytes()[..id_len]);
    value[id_len] = match op {
        UpdateOp::Add => OP_ADD,
        UpdateOp::Delete => OP_DEL,
    };
    for (v, p) in value.iter_mut().zip(pad).take(id_len + 1) {
        *v ^= p;
    }
    pad.zeroize();
    (label, value)
}

/// A keyword's GGM root and tweak: `F(k, w)` split in two halves.
#[derive(Clone, Copy, zeroize::Zeroize)]
struct KeywordKeys {
    root: [u8; LAMBDA],
    tw: [u8; LAMBDA],
}

fn keyword_keys(prf: &HmacPrf, keyword: &[u8]) -> KeywordKeys {
    let mut full = prf.eval_bytes(keyword);
    let mut keys = KeywordKeys {
        root: [0; LAMBDA],
        tw: [0; LAMBDA],
    };
    keys.root.copy_from_slice(&full[..LAMBDA]);
    keys.tw.copy_from_slice(&full[LAMBDA..2 * LAMBDA]);
    full.zeroize();
    keys
}

#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    master: [u8; 32],
    counts: Vec<(Vec<u8>, u32)>,
}

/// The state of a client of short labels: [`State`]'s fields and the
/// label's length after them (one byte more: neither form decodes as
/// the other, the encoding refusing trailing bytes and a missing field).
#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct StateWithLabels {
    master: [u8; 32],
    counts: Vec<(Vec<u8>, u32)>,
    labels: u8,
}

/// The state of a client of short labels and short identifiers:
/// [`StateWithLabels`]'s fields and the identifier's length (a byte more
/// again: no form decodes as another).
#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct StateWithIds {
    master: [u8; 32],
    counts: Vec<(Vec<u8>, u32)>,
    labels: u8,
    ids: u8,
}

/// A keyword's count of updates, and its keys once computed in this
/// process (they follow from the master key, so they are never saved).
#[derive(Clone, Copy, zeroize::Zeroize)]
struct Slot {
    count: u32,
    keys: Option<KeywordKeys>,
}

/// The client half of Diana: the master key and, per keyword, its count
/// of updates.
pub struct DianaClient {
    master: Key<32>,
    prf: HmacPrf,
    counts: BTreeMap<Vec<u8>, Slot>,
    /// Entries under [`SHORT_LABEL_LEN`]-byte labels.
    short: bool,
    /// Entries with [`SHORT_ID_LEN`]-byte identifiers (and short labels).
    short_ids: bool,
}

impl std::fmt::Debug for DianaClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DianaClient")
            .field("keywords", &self.counts.len())
            .finish_non_exhaustive()
    }
}

impl Drop for DianaClient {
    fn drop(&mut self) {
        for slot in self.counts.values_mut() {
            slot.zeroize();
        }
    }
}

impl DianaClient {
    /// A client with a fresh key. Two parameters: `labels`, the bytes of
    /// a label, `16` (the default) or `12`; `ids`, the bytes of an
    /// identifier, `8` (the default) or `5` with `labels = 12` (module
    /// documentation).
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        params.only(DESCRIPTOR.name, &[LABELS, IDS])?;
        let short = LENGTHS.short(params)?;
        let short_ids = match params.get_or(IDS, 8usize)? {
            8 => false,
            SHORT_ID_LEN if short => true,
            n => {
                return Err(Error::InvalidArgument(format!(
                    "Diana ids={n}: an identifier has 8 bytes, or {SHORT_ID_LEN} with \
                     labels={SHORT_LABEL_LEN}"
                )))
            }
        };
        let mut client = Self::with_key(Key::generate(rng), BTreeMap::new(), short);
        client.short_ids = short_ids;
        Ok(client)
    }

    fn with_key(master: Key<32>, counts: BTreeMap<Vec<u8>, Slot>, short: bool) -> Self {
        let prf = HmacPrf::new(&master.derive("sesame-sse/diana/keyword"));
        Self {
            master,
            prf,
            counts,
            short,
            short_ids: false,
        }
    }

    /// The bytes of an identifier in this client's entries.
    fn id_len(&self) -> usize {
        if self.short_ids {
            SHORT_ID_LEN
        } else {
            8
        }
    }

    /// A client from saved state (of any label and identifier length).
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let compact = sesame_core::wire::decode::<StateWithIds>(bytes).ok();
        if let Some(s) = &compact {
            if (usize::from(s.labels), usize::from(s.ids)) != (SHORT_LABEL_LEN, SHORT_ID_LEN) {
                return Err(Error::Malformed(format!(
                    "Diana state with labels of {} bytes and identifiers of {}",
                    s.labels, s.ids
                )));
            }
        }
        let (master, saved, short) = match &compact {
            Some(s) => (s.master, s.counts.clone(), true),
            None => match LENGTHS.restore::<State, StateWithLabels>(bytes, |s| s.labels)? {
                Saved::Long(s) => (s.master, s.counts.clone(), false),
                Saved::Short(s) => (s.master, s.counts.clone(), true),
            },
        };
        let mut counts = BTreeMap::new();
        for (w, count) in saved {
            let slot = Slot { count, keys: None };
            if counts.insert(w, slot).is_some() {
                return Err(Error::Malformed("Diana state lists a keyword twice".into()));
            }
        }
        let mut client = Self::with_key(Key::from_bytes(master), counts, short);
        client.short_ids = compact.is_some();
        Ok(client)
    }

    /// Checks that every keyword of `updates` has a leaf left for each
    /// of its updates (a keyword takes at most `2^32 - 1`), before any
    /// counter moves: a refused batch leaves the state as it was.
    fn check_room(&self, updates: &[(UpdateOp, DocId, &[Vec<u8>])]) -> Result<()> {
        let mut wanted: BTreeMap<&[u8], u64> = BTreeMap::new();
        for &(_, doc, keywords) in updates {
            common::check_doc(doc)?;
            if self.short_ids && doc >> (8 * SHORT_ID_LEN) != 0 {
                return Err(Error::InvalidArgument(format!(
                    "document identifier {doc} does not fit this Diana index's \
                     {SHORT_ID_LEN}-byte identifiers (ids = {SHORT_ID_LEN}: below 2^40)"
                )));
            }
            for w in keywords {
                *wanted.entry(w.as_slice()).or_insert(0) += 1;
            }
        }
        for (w, more) in wanted {
            let count = self.counts.get(w).map_or(0, |s| u64::from(s.count));
            if count + more > u64::from(u32::MAX) {
                return Err(Error::InvalidArgument(
                    "a Diana keyword takes at most 2^32 - 1 updates".into(),
                ));
            }
        }
        Ok(())
    }

    /// Takes the next leaf of `keyword`: its keys and the leaf's position
    /// ([`DianaClient::check_room`] has checked there is one).
    fn take_leaf(&mut self, keyword: &[u8]) -> (KeywordKeys, u64) {
        let prf = &self.prf;
        let slot = self.counts.entry(keyword.to_vec()).or_insert(Slot {
            count: 0,
            keys: None,
        });
        let keys = *slot.keys.get_or_insert_with(|| keyword_keys(prf, keyword));
        let position = u64::from(slot.count);
        slot.count = slot.count.saturating_add(1);
        (keys, position)
    }

    /// The entries of several updates, each sorted by label: every
    /// keyword's leaf derived in one side-by-side descent of the trees
    /// ([`GgmTree::leaves_under`]).
    fn entries(&mut self, updates: &[(UpdateOp, DocId, &[Vec<u8>])]) -> Result<Vec<Vec<Entry>>> {
        self.check_room(updates)?;
        let mut taken = Vec::new();
        for &(op, doc, keywords) in updates {
            for w in keywords {
                taken.push((op, doc, self.take_leaf(w)));
            }
        }
        let roots: Vec<Key<16>> = taken
            .iter()
            .map(|(_, _, (keys, _))| Key::from_bytes(keys.root))
            .collect();
        let root_refs: Vec<&Key<16>> = roots.iter().collect();
        let positions: Vec<u64> = taken.iter().map(|(_, _, (_, p))| *p).collect();
        let leaves = GgmTree::leaves_under(&root_refs, DEPTH, &positions)?;
        let id_len = self.id_len();
        let mut sealed = taken
            .iter()
            .zip(&leaves)
            .map(|((op, doc, (keys, _)), leaf)| seal(*op, *doc, &keys.tw, leaf.as_bytes(), id_len));
        let mut out = Vec::with_capacity(updates.len());
        for &(_, _, keywords) in updates {
            let mut entries: Vec<Entry> = sealed.by_ref().take(keywords.len()).collect();
            // The order of the entries says nothing about the keywords.
            entries.sort_unstable_by_key(|e| e.0);
            out.push(entries);
        }
        for (_, _, (keys, _)) in &mut taken {
            keys.zeroize();
        }
        Ok(out)
    }

    /// The requests that store `entries` (sorted by label), in chunks.
    fn put_requests(&self, entries: Vec<Entry>) -> Result<Vec<Vec<u8>>> {
        if self.short_ids {
            common::chunked_requests(compact(entries), compact_size, |entries| {
                Request::PutCompact {
                    reset: false,
                    entries,
                }
            })
        } else if self.short {
            common::chunked_requests(shorten(entries), short_size, |entries| Request::PutShort {
                reset: false,
                entries,
            })
        } else {
            common::chunked_requests(entries, entry_size, |entries| Request::Put {
                reset: false,
                entries,
            })
        }
    }
}

/// Payload bytes of an entry in a request.
fn entry_size(_: &Entry) -> usize {
    LABEL_LEN + VALUE_LEN
}

/// Payload bytes of an entry of a short label in a request.
fn short_size(_: &ShortEntry) -> usize {
    SHORT_LABEL_LEN + VALUE_LEN
}

/// Payload bytes of an entry of a short label and identifier in a
/// request.
fn compact_size(_: &CompactEntry) -> usize {
    SHORT_LABEL_LEN + SHORT_VALUE_LEN
}

/// The first `N` bytes of `bytes` (which holds at least `N`).
fn first<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[..N]);
    out
}

/// `entries` (sealed with short identifiers) under short labels, their
/// values cut to [`SHORT_VALUE_LEN`] bytes.
fn compact(entries: Vec<Entry>) -> Vec<CompactEntry> {
    entries
        .into_iter()
        .map(|(label, value)| (first(&label), first(&value)))
        .collect()
}

/// `entries` under the first [`SHORT_LABEL_LEN`] bytes of their labels
/// (in the same order: a label's first bytes sort as the label does).
fn shorten(entries: Vec<Entry>) -> Vec<ShortEntry> {
    entries
        .into_iter()
        .map(|(label, value)| (first(&label), value))
        .collect()
}

impl KeywordClient for DianaClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn setup_checked(&mut self, Io { rng: _, channel }: Io<'_>, db: &Multimap) -> Result<()> {
        self.counts.clear();
        let mut pairs = Vec::new();
        for (w, ids) in db {
            for id in common::normalise(ids.clone()) {
                pairs.push((id, std::slice::from_ref(w)));
            }
        }
        let updates: Vec<(UpdateOp, DocId, &[Vec<u8>])> = pairs
            .iter()
            .map(|&(id, w)| (UpdateOp::Add, id, w))
            .collect();
        let mut entries: Vec<Entry> = self.entries(&updates)?.into_iter().flatten().collect();
        entries.sort_unstable_by_key(|e| e.0);
        if self.short_ids {
            upload(channel, compact(entries), compact_size, |reset, entries| {
                Request::PutCompact { reset, entries }
            })
        } else if self.short {
            upload(channel, shorten(entries), short_size, |reset, entries| {
                Request::PutShort { reset, entries }
            })
        } else {
            upload(channel, entries, entry_size, |reset, entries| {
                Request::Put { reset, entries }
            })
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
        _rng: &mut dyn CryptoRngCore,
        (op, doc, keywords): Update<'_>,
    ) -> Result<Option<Vec<Vec<u8>>>> {
        let entries = self.entries(&[(op, doc, keywords)])?;
        self.put_requests(entries.into_iter().flatten().collect())
            .map(Some)
    }

    fn prepare_updates(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        updates: &[(UpdateOp, DocId, &[Vec<u8>])],
    ) -> Result<Option<Vec<Vec<Vec<u8>>>>> {
        let entries = self.entries(updates)?;
        entries
            .into_iter()
            .map(|e| self.put_requests(e))
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    /// Every keyword's leaf of a batch is derived in one descent.
    fn batches_updates(&self) -> bool {
        true
    }

    fn check_update_response(&self, response: &[u8]) -> Result<()> {
        common::check_answered("Diana", Response::Stored, response)
    }

    fn search_token(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        keyword: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let Some(slot) = self.counts.get(keyword).copied() else {
            return Ok(None);
        };
        let mut keys = slot
            .keys
            .unwrap_or_else(|| keyword_keys(&self.prf, keyword));
        let tree = GgmTree::new(Key::from_bytes(keys.root), DEPTH)?;
        let cover = tree.prefix_cover(u64::from(slot.count))?;
        let request = match self.short {
            true => Request::SearchShort { tw: keys.tw, cover },
            false => Request::Search { tw: keys.tw, cover },
        };
        keys.zeroize();
        sesame_core::wire::encode(&request).map(Some)
    }

    fn resolve(&mut self, _keyword: &[u8], response: &[u8]) -> Result<Vec<DocId>> {
        Response::sorted_ids(sesame_core::wire::decode(response)?, "Diana")
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        let master = *self.master.as_bytes();
        let counts = self
            .counts
            .iter()
            .map(|(w, slot)| (w.clone(), slot.count))
            .collect();
        if self.short_ids {
            sesame_core::wire::encode(&StateWithIds {
                master,
                counts,
                labels: SHORT_LABEL_LEN as u8,
                ids: SHORT_ID_LEN as u8,
            })
        } else if self.short {
            sesame_core::wire::encode(&StateWithLabels {
                master,
                counts,
                labels: SHORT_LABEL_LEN as u8,
            })
        } else {
            // The form of earlier builds, which they still read.
            sesame_core::wire::encode(&State { master, counts })
        }
    }
}

fn upload<E>(
    channel: &mut dyn Channel,
    entries: Vec<E>,
    size: fn(&E) -> usize,
    request: impl Fn(bool, Vec<E>) -> Request,
) -> Result<()> {
    crate::common::upload(
        channel,
        entries,
        size,
        request,
        common::answered("Diana", Response::Stored),
    )
}

/// Store key of a label.
fn entry_key(label: &[u8; LABEL_LEN]) -> [u8; LABEL_LEN + 1] {
    common::prefixed(b'e', label)
}

/// The server half of Diana.
pub struct DianaServer {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for DianaServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DianaServer").finish_non_exhaustive()
    }
}

/// Checks that `cover` is a cover of the leaves `0..c` of a tree of
/// [`DEPTH`]: nodes of that depth, left to right, each starting where the
/// one before ends, the first at leaf 0.
fn check_cover(cover: &[GgmNode]) -> Result<()> {
    let mut next = 0u64;
    for node in cover {
        let (first, last) = node.leaves();
        if node.depth() != DEPTH || first != next {
            return Err(Error::Malformed(
                "a Diana search's cover is not the leaves of one tree from leaf 0 on".into(),
            ));
        }
        next = last.saturating_add(1);
    }
    Ok(())
}

impl DianaServer {
    /// A server keeping its index in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// The live identifiers of the keyword of tweak `tw` whose leaves
    /// `cover` covers, sorted: its entries read newest first, a batch of
    /// leaves at a time, until the cover's first leaf or a label that is
    /// not stored (where FAST's walk ends too: the work is bounded by the
    /// entries stored, whatever the cover claims). A deletion cancels
    /// every older addition of its identifier (set semantics).
    ///
    /// `label_len` is the stored labels' length ([`LABEL_LEN`] or
    /// [`SHORT_LABEL_LEN`]): the first bytes of each derived label are
    /// looked up.
    pub fn search(
        &self,
        tw: [u8; LAMBDA],
        cover: &[GgmNode],
        label_len: usize,
    ) -> Result<Vec<DocId>> {
        let key_len = 1 + label_len.min(LABEL_LEN);
        check_cover(cover)?;
        let mut ids = Vec::new();
        let mut deleted: HashSet<DocId> = HashSet::new();
        for node in cover.iter().rev() {
            let (first, last) = node.leaves();
            let mut end = u128::from(last) + 1;
            while end > u128::from(first) {
                // end - first <= 2^32, so the batch's start fits a u64.
                let start = end
                    .saturating_sub(u128::from(SEARCH_BATCH))
                    .max(u128::from(first)) as u64;
                let leaves = node
                    .leaves_in(start, (end - 1) as u64)
                    .map_err(|e| Error::Malformed(e.to_string()))?;
                let mut pads = Vec::with_capacity(leaves.len());
                let mut keys = Vec::with_capacity(leaves.len());
                for leaf in &leaves {
                    let (label, pad) = oracle(&tw, leaf.as_bytes());
                    keys.push(entry_key(&label));
                    pads.push(pad);
                }
                let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..key_len]).collect();
                let values = self.store.get_many(&refs)?;
                for (value, pad) in values.iter().zip(&pads).rev() {
                    let Some(value) = value else {
                        return Ok(common::normalise(ids));
                    };
                    let (id, op) = open(value, pad)?;
                    match op {
                        OP_ADD if !deleted.contains(&id) => ids.push(id),
                        OP_ADD => {}
                        _ => {
                            deleted.insert(id);
                        }
                    }
                }
                pads.zeroize();
                end = u128::from(start);
            }
        }
        Ok(common::normalise(ids))
    }
}

/// The identifier and operation of a stored value under its pad: a
/// value of [`VALUE_LEN`] bytes holds an 8-byte identifier, one of
/// [`SHORT_VALUE_LEN`] a [`SHORT_ID_LEN`]-byte one.
fn open(value: &[u8], pad: &[u8; VALUE_LEN]) -> Result<(DocId, u8)> {
    let id_len = match value.len() {
        VALUE_LEN => 8,
        SHORT_VALUE_LEN => SHORT_ID_LEN,
        n => return Err(Error::StoreCorrupt(format!("Diana entry of {n} bytes"))),
    };
    let mut plain = [0u8; VALUE_LEN];
    for ((o, v), p) in plain.iter_mut().zip(value).zip(pad) {
        *o = v ^ p;
    }
    let mut id = [0u8; 8];
    id[..id_len].copy_from_slice(&plain[..id_len]);
    match plain[id_len] {
        op @ (OP_ADD | OP_DEL) => Ok((DocId::from_le_bytes(id), op)),
        op => Err(Error::StoreCorrupt(format!(
            "Diana entry with operation {op}"
        ))),
    }
}

impl Handler for DianaServer {
    type Request = Request;
    type Response = Response;

    /// Every entry is stored under the label of a leaf used once: no two
    /// updates write the same label, and a stored value never changes.
    fn write_once(&self) -> bool {
        true
    }

    /// Entries are found by their labels.
    fn packable(&self) -> bool {
        true
    }

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::Put { reset, entries } => {
                common::put_labelled(self.store.as_ref(), reset, b'e', entries)?;
                Ok(Response::Stored)
            }
            Request::Search { tw, cover } => Ok(Response::Ids(self.search(tw, &cover, LABEL_LEN)?)),
            Request::PutShort { reset, entries } => {
                common::put_labelled(self.store.as_ref(), reset, b'e', entries)?;
                Ok(Response::Stored)
            }
            Request::SearchShort { tw, cover } => {
                Ok(Response::Ids(self.search(tw, &cover, SHORT_LABEL_LEN)?))
            }
            Request::PutCompact { reset, entries } => {
                common::put_labelled(self.store.as_ref(), reset, b'e', entries)?;
                Ok(Response::Stored)
            }
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> GgmTree {
        GgmTree::new(Key::from_bytes([7; 16]), DEPTH).expect("depth 32")
    }

    #[test]
    fn a_cover_must_start_at_leaf_zero_without_gaps() {
        let cover = tree().prefix_cover(13).expect("in range");
        assert!(check_cover(&cover).is_ok());
        assert!(
            check_cover(&cover[1..]).is_err(),
            "a cover missing its first node"
        );
        let mut gap = tree().prefix_cover(13).expect("in range");
        gap.remove(1);
        assert!(check_cover(&gap).is_err(), "a cover with a gap");
        let shallow = GgmTree::new(Key::from_bytes([7; 16]), 8)
            .expect("depth 8")
            .prefix_cover(3)
            .expect("in range");
        assert!(check_cover(&shallow).is_err(), "a tree of another depth");
    }

    #[test]
    fn a_keyword_past_its_last_leaf_is_refused_and_nothing_moves() {
        let mut client = DianaClient::with_key(Key::from_bytes([3; 32]), BTreeMap::new(), false);
        let full = Slot {
            count: u32::MAX - 1,
            keys: None,
        };
        client.counts.insert(b"w".to_vec(), full);
        let w = [b"w".to_vec()];
        let v = [b"v".to_vec()];
        let two: [(UpdateOp, DocId, &[Vec<u8>]); 3] = [
            (UpdateOp::Add, 1, &v),
            (UpdateOp::Add, 1, &w),
            (UpdateOp::Add, 2, &w),
        ];
        assert!(matches!(
            client.entries(&two),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(client.counts[b"w".as_slice()].count, u32::MAX - 1);
        assert!(
            !client.counts.contains_key(b"v".as_slice()),
            "nothing taken"
        );
        let one = client.entries(&two[1..2]).expect("the last leaf");
        assert_eq!(one.len(), 1);
        assert_eq!(client.counts[b"w".as_slice()].count, u32::MAX);
        let restored =
            DianaClient::restore(&client.save_state().expect("saved")).expect("restored");
        assert_eq!(restored.counts[b"w".as_slice()].count, u32::MAX);
    }

    #[test]
    fn a_sealed_entry_opens_under_its_leaf_only() {
        let tw = [1u8; LAMBDA];
        let leaves = tree().leaves(&[0, 1]).expect("in range");
        let (label, value) = seal(UpdateOp::Delete, 42, &tw, leaves[0].as_bytes(), 8);
        let (same, pad) = oracle(&tw, leaves[0].as_bytes());
        assert_eq!(label, same);
        assert_eq!(open(&value, &pad).expect("its pad"), (42, OP_DEL));
        let (other, pad1) = oracle(&tw, leaves[1].as_bytes());
        assert_ne!(label, other);
        let wrong = open(&value, &pad1);
        assert!(!matches!(wrong, Ok((42, OP_DEL))));
        assert!(open(&value[..8], &pad).is_err(), "a truncated entry");
        // A short identifier's entry: its value's first 6 bytes.
        let (_, value) = seal(UpdateOp::Add, 42, &tw, leaves[0].as_bytes(), SHORT_ID_LEN);
        let short = &value[..SHORT_VALUE_LEN];
        assert_eq!(open(short, &pad).expect("its pad"), (42, OP_ADD));
        assert!(!matches!(open(short, &pad1), Ok((42, OP_ADD))));
        assert!(open(&value[..SHORT_VALUE_LEN - 1], &pad).is_err());
    }
}
