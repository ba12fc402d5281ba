//! Aura: the non-interactive forward- and backward-private scheme of Sun,
//! Steinfeld, Lai, Yuan, Sakzad, Liu, Nepal and Gu, "Practical
//! Non-Interactive Searchable Encryption with Forward and Backward
//! Privacy", NDSS 2021, built on symmetric revocable encryption (SRE).
//!
//! SRE over a Bloom filter of `b = 2^depth` bits with `h` hash functions
//! and a GGM tree of the same depth: a message `m` with tag `t` is
//! encrypted `h` times, copy `j` under the GGM leaf key of the filter
//! position `H_j(t)`. Revoking `t` inserts it into the filter; the key
//! revoked at the filter is the GGM cover of the unset positions, which
//! decrypts a copy of every ciphertext whose tag has at least one unset
//! position and none of the others.
//!
//! For each keyword `w` the client keeps an epoch `i`, the number `c` of
//! additions in the epoch, and the deletion filter `D_w`. An addition of
//! `ind` stores, under the label `H(tkn_w ‖ c)` with `tkn_w = F(K, w ‖ i)`,
//! the tag `t = F(K_t, w ‖ ind ‖ g)` and the `h` SRE copies of `ind` under
//! the epoch's GGM root `sk_{w,i} = F(K_s, w ‖ i)`. A deletion inserts `t`
//! into `D_w` locally and sends nothing. A search sends, in one round,
//! `tkn_w`, `c`, and the cover of `D_w`'s unset positions in the tree of
//! `sk_{w,i}`; the server decrypts the copies it can, merges the previous
//! result it cached for the keyword (dropping cached identifiers whose tag
//! is now fully revoked), caches the merged result with the tags, and
//! answers with the identifiers. The client then moves to epoch `i + 1`:
//! later additions use a fresh token and a fresh tree (forward privacy).
//!
//! `g` (the generation of the pair) lets a deleted pair be added again: it
//! is the first `g` whose tag is not in `D_w`, so it needs no storage. See
//! `docs/schemes/aura.md` for leakage and deviations.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    BackwardPrivacy, Channel, Error, Handler, IoCounts, Params, QueryKind, Result,
    SchemeDescriptor, SchemeKind, Store, Typed, WriteBatch,
};
use sesame_crypto::ggm::{GgmNode, GgmTree};
use sesame_crypto::key::Key;
use sesame_crypto::prf::{Aes128Prf, HmacPrf};

use crate::api::{DocId, KeywordClient, KeywordScheme, Multimap, UpdateOp};
use crate::common;
use crate::renewal::{label, RenewedSearch};

/// Descriptor of Aura.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "aura",
    title: "Aura (non-interactive forward/backward-private SSE from revocable encryption)",
    citation: "S.-F. Sun, R. Steinfeld, S. Lai, X. Yuan, A. Sakzad, J. K. Liu, S. Nepal, D. Gu. \
               Practical Non-Interactive Searchable Encryption with Forward and Backward \
               Privacy. NDSS 2021",
    kind: SchemeKind::DynamicSse,
    forward_private: true,
    backward_privacy: BackwardPrivacy::TypeII,
    queries: &[QueryKind::Exact],
    leakage: "Update: an addition reveals the number of keywords and one fixed-size entry per \
              keyword, unlinkable to earlier searches (fresh token and GGM tree per epoch: \
              forward privacy); a deletion sends nothing. Search: the search pattern (the \
              previous epoch's token links searches of a keyword), the number of additions \
              since the last search and when they happened, the revoked positions of the \
              keyword's Bloom filter (the cover reveals which leaves are punctured, so the \
              number of deletions up to Bloom collisions), which entries were deleted (their \
              copies all fall on revoked positions), and the live identifiers: backward \
              privacy type II (Aura's claim), since the update times of the keyword's entries \
              are revealed. A Bloom false positive hides a live identifier (probability set \
              by b, h and the deletions per keyword). Between searches the server keeps each \
              searched keyword's last result in the clear (identifiers with their tags), so a \
              snapshot shows every past result; a tag is a PRF of (keyword, identifier, \
              generation), so adding a live pair again reuses its tag and the next search \
              shows that this entry repeats a cached one.",
    doc: "docs/schemes/aura.md",
};

/// The registry entry of Aura.
pub fn scheme() -> KeywordScheme {
    KeywordScheme {
        descriptor: &DESCRIPTOR,
        params: &[
            (
                "h",
                "13: hash functions of the Bloom filter (ciphertext copies per entry)",
            ),
            (
                "b",
                "1048576: Bloom filter bits per keyword (rounded up to a power of two)",
            ),
            (
                "fp",
                "unset: target false-positive rate; when set, b is the smallest power of two \
                 meeting it after dmax deletions",
            ),
            (
                "dmax",
                "10000: deletions per keyword that fp is computed for",
            ),
        ],
        new_client: |rng, params| Ok(Box::new(AuraClient::new(rng, params)?)),
        restore_client: |bytes| Ok(Box::new(AuraClient::restore(bytes)?)),
        new_server: Some(|store, _| Ok(Box::new(Typed(AuraServer::new(store))))),
    }
}

/// Bytes of a tag.
pub const TAG_LEN: usize = 16;
/// Bytes of an identifier and of one of its SRE copies.
const ID_LEN: usize = 8;
/// Bytes of a label and of a search token.
pub const LABEL_LEN: usize = 32;
/// Bytes of a cached result record: identifier and tag.
const CACHED_LEN: usize = ID_LEN + TAG_LEN;
/// Smallest and largest tree depth (`log2 b`).
const MIN_DEPTH: u8 = 4;
const MAX_DEPTH: u8 = 40;
/// Generations tried before giving up on re-adding a pair.
const MAX_GENERATIONS: u64 = 1 << 16;

/// Entries per worker thread below which additions are computed on the
/// calling thread alone (an entry costs about ten microseconds; a thread
/// about as much to start).
const PARALLEL_ENTRIES: usize = 32;

/// Entries of one keyword whose GGM leaves `setup` derives in one descent:
/// their positions share the upper levels of the keyword's tree (about
/// `log2(h * n)` of them for `n` entries), and the descent holds about
/// `h * n` node keys at a time.
const SHARED_ENTRIES: usize = 4096;

/// Tags per worker thread below which a batch's tags are computed on the
/// calling thread (a tag is one HMAC, about a microsecond).
const PARALLEL_TAGS: usize = 1024;

/// Bundles of additions a batch of updates is dealt into for the cores
/// (more than there are cores, so that any split of them is even).
const BUNDLES: usize = 16;

/// What [`AuraClient::plan_add`] takes from the client's state for one
/// addition.
struct AddPlan {
    tag: Tag,
    epoch: u64,
    count: u64,
}

/// Level of a keyword's tree whose nodes the client keeps between
/// additions (at most `2^10` node keys per keyword): a later addition's
/// leaves then cost `depth - 10` expansions each instead of up to `depth`.
const KEPT_LEVEL: u8 = 10;
/// Additions in an epoch after which all the kept level's nodes are
/// derived at once (`2^10 - 1` expansions, about what 8 entries cost),
/// rather than only those the additions reach; only for a keyword whose
/// nodes are kept already (one added to often), never for one whose nodes
/// were evicted (keywords added to in turn, more than [`KEPT_TREES`] of
/// them, would pay that derivation on every addition).
const KEEP_ALL_AFTER: u64 = 16;
/// Keywords whose nodes are kept (those added to last).
const KEPT_TREES: usize = 16;

/// The nodes of level [`KEPT_LEVEL`] of the current epoch's tree of the
/// keywords added to last, most recent last. Secret keys, wiped when
/// dropped (on eviction, when the keyword is searched, with the client).
/// Small updates (computed on the calling thread) use and fill them.
#[derive(Default)]
struct KeptNodes {
    trees: Vec<KeptTree>,
}

/// The kept nodes of one keyword's tree.
struct KeptTree {
    keyword: Vec<u8>,
    epoch: u64,
    /// The nodes derived so far, by path: a few per addition (a map, so
    /// that keeping a tree costs no table of all `2^10`).
    nodes: BTreeMap<u64, Key<16>>,
}

/// Planned additions of one keyword in one epoch, whose entries are
/// computed together.
struct AddGroup<'a> {
    keyword: &'a [u8],
    epoch: u64,
    adds: Vec<(DocId, AddPlan)>,
}

/// A tag.
pub type Tag = [u8; TAG_LEN];

/// An index entry: label and value `tag ‖ ct_1 ‖ … ‖ ct_h`.
pub type Entry = ([u8; LABEL_LEN], Vec<u8>);

/// Payload bytes of an entry in a request.
fn entry_size(e: &Entry) -> usize {
    LABEL_LEN + e.1.len()
}

crate::common::redacted_debug!(Request);

/// An Aura request.
#[derive(Serialize, Deserialize)]
pub enum Request {
    /// Stores entries; `reset` first removes the earlier index.
    Put {
        /// Remove the earlier index first.
        reset: bool,
        /// The entries.
        entries: Vec<Entry>,
    },
    /// A search: everything the server needs, in one message.
    Search {
        /// Token of the keyword's current epoch.
        tkn: [u8; LABEL_LEN],
        /// Token of the previous epoch, under which the server cached the
        /// previous result (none before the first search).
        prev: Option<[u8; LABEL_LEN]>,
        /// Additions in the current epoch.
        count: u64,
        /// Hash functions of the filter.
        h: u8,
        /// Depth of the GGM tree (`log2 b`).
        depth: u8,
        /// The revoked key: the cover of the filter's unset positions.
        cover: Vec<GgmNode>,
    },
}

/// An Aura response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The entries are stored.
    Stored,
    /// The live identifiers.
    Ids(Vec<DocId>),
}

/// The `h` filter positions of `tag` in a filter of `2^depth` bits:
/// `H_j(t)`, the `j`-th 64-bit word of AES-128 keyed with the
/// (pseudorandom, public to the server) tag over the counter blocks
/// `0, 1, …`, reduced mod `b`. Positions of one tag may repeat, as with any
/// Bloom filter. (Double hashing `h1 + j·h2 mod b` is cheaper but, with a
/// power-of-two `b`, makes position sets of different tags overlap far
/// more than independent hashes do: the false-positive rate it gave on
/// small filters was orders of magnitude above the formula.)
pub fn positions(tag: &Tag, h: u8, depth: u8) -> impl Iterator<Item = u64> {
    let mask = if depth >= 64 {
        u64::MAX
    } else {
        (1u64 << depth) - 1
    };
    let n = usize::from(h.min(64));
    let mut blocks = [[0u8; 16]; 32];
    for (i, b) in blocks.iter_mut().enumerate().take(n.div_ceil(2)) {
        b[..8].copy_from_slice(&(i as u64).to_le_bytes());
    }
    Aes128Prf::new(&Key::from_bytes(*tag)).eval_in_place(&mut blocks[..n.div_ceil(2)]);
    let mut out = [0u64; 64];
    for (o, w) in out
        .iter_mut()
        .zip(blocks.iter().flat_map(|b| b.chunks_exact(8)))
    {
        let mut x = [0u8; 8];
        x.copy_from_slice(w);
        *o = u64::from_le_bytes(x) & mask;
    }
    out.into_iter().take(n)
}

/// The pad of an SRE copy under a leaf key: `AES_leaf(tag)`, first 8 bytes.
fn pad(leaf: &Key<16>, tag: &Tag) -> [u8; ID_LEN] {
    let block = Aes128Prf::new(leaf).eval_block(tag);
    let mut out = [0u8; ID_LEN];
    out.copy_from_slice(&block[..ID_LEN]);
    out
}

/// The cover node holding `leaf`, if any (nodes sorted left to right, as
/// [`GgmTree::cover`] returns them; unsorted hostile input only gives a
/// wrong answer).
fn covering(cover: &[GgmNode], leaf: u64) -> Option<&GgmNode> {
    let i = cover.partition_point(|n| n.leaves().1 < leaf);
    cover.get(i).filter(|n| n.covers(leaf))
}

/// Per-keyword client state.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct KeywordState {
    /// Searches so far: the epoch of the token and tree.
    epoch: u64,
    /// Additions in the epoch.
    count: u64,
    /// The set bits of the keyword's deletion filter `D_w`, sorted.
    revoked: BTreeSet<u64>,
}

#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    master: [u8; 32],
    h: u8,
    depth: u8,
    /// Counters and sets (no Zeroize for B-tree collections).
    #[zeroize(skip)]
    keywords: Vec<(Vec<u8>, KeywordState)>,
}

/// The client half of Aura: master key, parameters and per-keyword state.
pub struct AuraClient {
    master: Key<32>,
    tkn_prf: HmacPrf,
    tag_prf: HmacPrf,
    sk_prf: HmacPrf,
    h: u8,
    depth: u8,
    keywords: BTreeMap<Vec<u8>, KeywordState>,
    /// Nodes of the trees of the keywords added to last (not saved).
    kept: KeptNodes,
}

impl std::fmt::Debug for AuraClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuraClient")
            .field("h", &self.h)
            .field("depth", &self.depth)
            .field("keywords", &self.keywords.len())
            .finish_non_exhaustive()
    }
}

/// The Bloom false-positive rate `(1 - e^{-h n / b})^h`.
pub fn false_positive_rate(b: f64, h: u32, n: u64) -> f64 {
    (1.0 - (-(f64::from(h)) * n as f64 / b).exp()).powi(h as i32)
}

/// Reads `h` and the tree depth from the parameters.
fn parse_params(params: &Params) -> Result<(u8, u8)> {
    params.only(DESCRIPTOR.name, &["h", "b", "fp", "dmax"])?;
    let h: u8 = params.get_or("h", 13u8)?;
    if h == 0 || h > 64 {
        return Err(Error::InvalidArgument(format!(
            "parameter h={h} must be between 1 and 64"
        )));
    }
    let fp: f64 = params.get_or("fp", 0.0f64)?;
    let depth = if fp > 0.0 {
        if fp >= 1.0 {
            return Err(Error::InvalidArgument(format!(
                "parameter fp={fp} must be below 1"
            )));
        }
        let dmax: u64 = params.get_or("dmax", 10_000u64)?;
        (MIN_DEPTH..=MAX_DEPTH)
            .find(|&d| false_positive_rate((1u64 << d) as f64, u32::from(h), dmax) <= fp)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "no filter of at most 2^{MAX_DEPTH} bits reaches fp={fp} after {dmax} deletions"
                ))
            })?
    } else {
        let b: u64 = params.get_or("b", 1u64 << 20)?;
        let depth = b.max(1).next_power_of_two().trailing_zeros() as u8;
        if !(MIN_DEPTH..=MAX_DEPTH).contains(&depth) {
            return Err(Error::InvalidArgument(format!(
                "parameter b={b} must be between 2^{MIN_DEPTH} and 2^{MAX_DEPTH}"
            )));
        }
        depth
    };
    if u64::from(h) > 1u64 << depth {
        return Err(Error::InvalidArgument(format!(
            "h={h} exceeds the filter size"
        )));
    }
    Ok((h, depth))
}

/// The Bloom filter bits per keyword that `params` give.
pub fn filter_bits(params: &Params) -> Result<u64> {
    Ok(1u64 << parse_params(params)?.1)
}

impl AuraClient {
    /// A client with a fresh key; parameters `h`, `b`, `fp`, `dmax`.
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        let (h, depth) = parse_params(params)?;
        Ok(Self::with_key(
            Key::generate(rng),
            h,
            depth,
            BTreeMap::new(),
        ))
    }

    fn with_key(
        master: Key<32>,
        h: u8,
        depth: u8,
        keywords: BTreeMap<Vec<u8>, KeywordState>,
    ) -> Self {
        Self {
            tkn_prf: HmacPrf::new(&master.derive("sesame-sse/aura/tkn")),
            tag_prf: HmacPrf::new(&master.derive("sesame-sse/aura/tag")),
            sk_prf: HmacPrf::new(&master.derive("sesame-sse/aura/sk")),
            master,
            h,
            depth,
            keywords,
            kept: KeptNodes::default(),
        }
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let s: State = sesame_core::wire::decode(bytes)?;
        if s.h == 0
            || s.h > 64
            || !(MIN_DEPTH..=MAX_DEPTH).contains(&s.depth)
            || u64::from(s.h) > 1u64 << s.depth
        {
            return Err(Error::Malformed("Aura state with bad parameters".into()));
        }
        let mut keywords = BTreeMap::new();
        for (w, st) in &s.keywords {
            if st.revoked.iter().any(|&p| p >> s.depth != 0) {
                return Err(Error::Malformed("Aura filter bit out of range".into()));
            }
            if keywords.insert(w.clone(), st.clone()).is_some() {
                return Err(Error::Malformed("Aura state lists a keyword twice".into()));
            }
        }
        Ok(Self::with_key(
            Key::from_bytes(s.master),
            s.h,
            s.depth,
            keywords,
        ))
    }

    /// Bloom hash functions (= ciphertext copies per entry).
    pub fn h(&self) -> u8 {
        self.h
    }

    /// Bloom filter bits per keyword.
    pub fn filter_bits(&self) -> u64 {
        1u64 << self.depth
    }

    /// Set bits in the deletion filter of `keyword`.
    pub fn revoked_bits(&self, keyword: &[u8]) -> usize {
        self.keywords.get(keyword).map_or(0, |s| s.revoked.len())
    }

    fn keyed(prf: &HmacPrf, keyword: &[u8], n: u64, g: u64) -> [u8; 32] {
        prf.eval_concat(&[
            &(keyword.len() as u64).to_le_bytes(),
            keyword,
            &n.to_le_bytes(),
            &g.to_le_bytes(),
        ])
    }

    fn token(&self, keyword: &[u8], epoch: u64) -> [u8; LABEL_LEN] {
        Self::keyed(&self.tkn_prf, keyword, epoch, 0)
    }

    fn tag(&self, keyword: &[u8], doc: DocId, g: u64) -> Tag {
        let full = Self::keyed(&self.tag_prf, keyword, doc, g);
        let mut t = [0u8; TAG_LEN];
        t.copy_from_slice(&full[..TAG_LEN]);
        t
    }

    fn tree(&self, keyword: &[u8], epoch: u64) -> Result<GgmTree> {
        self.tree_of_depth(keyword, epoch, self.depth)
    }

    /// The tree of `sk_{w,i}` cut at `depth`: its leaf `p` is the node of
    /// the full tree at level `depth` whose path is `p`.
    fn tree_of_depth(&self, keyword: &[u8], epoch: u64, depth: u8) -> Result<GgmTree> {
        let full = Self::keyed(&self.sk_prf, keyword, epoch, 0);
        let mut root = [0u8; 16];
        root.copy_from_slice(&full[..16]);
        GgmTree::new(Key::from_bytes(root), depth).map_err(Error::from)
    }

    /// The leaves at `positions` of the keyword's tree, through the nodes
    /// of level [`KEPT_LEVEL`] kept for it from its second addition in the
    /// epoch on (`count`: the epoch's additions before the last entry of
    /// `positions`): the missing ones are derived (all of them once the
    /// epoch has [`KEEP_ALL_AFTER`] additions, if the keyword's nodes were
    /// still kept from its previous one) and kept, and each leaf is
    /// derived from its level's node. The same keys
    /// as [`GgmTree::leaf`]: the node of level `L` on the path `t` is leaf
    /// `t` of the tree cut at depth `L`, and leaf `p` is leaf `p mod
    /// 2^(depth - L)` of the subtree below node `p >> (depth - L)`.
    fn kept_leaves(
        &self,
        kept: &mut KeptNodes,
        keyword: &[u8],
        epoch: u64,
        count: u64,
        positions: &[u64],
    ) -> Result<Vec<Key<16>>> {
        let below = self.depth - KEPT_LEVEL;
        let at = kept
            .trees
            .iter()
            .position(|t| t.keyword == keyword && t.epoch == epoch);
        let (mut nodes, all) = match at {
            Some(i) => (kept.trees.remove(i).nodes, count >= KEEP_ALL_AFTER),
            // A keyword's first addition in the epoch keeps nothing: most
            // keywords of a document are added to once between searches.
            None if count == 0 => {
                return Ok(self.tree(keyword, epoch)?.leaves(positions)?);
            }
            None => (BTreeMap::new(), false),
        };
        let tops: Vec<u64> = positions.iter().map(|p| p >> below).collect();
        let mut missing: Vec<u64> = if all && nodes.len() < 1 << KEPT_LEVEL {
            (0..1u64 << KEPT_LEVEL).collect()
        } else {
            tops.clone()
        };
        missing.retain(|t| !nodes.contains_key(t));
        missing.sort_unstable();
        missing.dedup();
        if !missing.is_empty() {
            let upper = self.tree_of_depth(keyword, epoch, KEPT_LEVEL)?;
            nodes.extend(missing.iter().copied().zip(upper.leaves(&missing)?));
        }
        let mask = (1u64 << below) - 1;
        let mut order: Vec<usize> = (0..positions.len()).collect();
        order.sort_unstable_by_key(|&i| tops[i]);
        let mut out: Vec<Option<Key<16>>> = positions.iter().map(|_| None).collect();
        for run in order.chunk_by(|a, b| tops[*a] == tops[*b]) {
            let top = tops[run[0]];
            let node = nodes
                .get(&top)
                .ok_or_else(|| Error::Protocol("Aura kept node missing".into()))?;
            let sub = GgmTree::new(node.clone_secret(), below)?;
            if let [i] = *run {
                // The common case: one position below the node.
                out[i] = Some(sub.leaf(positions[i] & mask)?);
                continue;
            }
            let lows: Vec<u64> = run.iter().map(|&i| positions[i] & mask).collect();
            for (&i, k) in run.iter().zip(sub.leaves(&lows)?) {
                out[i] = Some(k);
            }
        }
        kept.trees.push(KeptTree {
            keyword: keyword.to_vec(),
            epoch,
            nodes,
        });
        if kept.trees.len() > KEPT_TREES {
            kept.trees.remove(0);
        }
        out.into_iter()
            .map(|k| k.ok_or_else(|| Error::Protocol("Aura leaf missing".into())))
            .collect()
    }

    /// The tag of the pair's live generation: the first one not in `D_w`.
    /// `first` is the tag of generation 0 where the caller has it already.
    fn live_tag(&self, keyword: &[u8], doc: DocId, first: Option<Tag>) -> Result<Tag> {
        // No position of an empty filter is revoked: its tags need no
        // positions.
        let revoked = self
            .keywords
            .get(keyword)
            .map(|s| &s.revoked)
            .filter(|r| !r.is_empty());
        for g in 0..MAX_GENERATIONS {
            let t = match first {
                Some(t) if g == 0 => t,
                _ => self.tag(keyword, doc, g),
            };
            let dead =
                revoked.is_some_and(|r| positions(&t, self.h, self.depth).all(|p| r.contains(&p)));
            if !dead {
                return Ok(t);
            }
        }
        Err(Error::InvalidArgument(format!(
            "Aura filter of keyword is saturated: {MAX_GENERATIONS} generations revoked"
        )))
    }

    /// The entry of an addition, advancing the keyword's counter.
    #[cfg(test)]
    fn add_entry(&mut self, doc: DocId, keyword: &[u8]) -> Result<Entry> {
        let plan = self.plan_add(doc, keyword)?;
        let epoch = plan.epoch;
        let mut entries = self.entries(keyword, epoch, &[(doc, plan)], None)?;
        entries
            .pop()
            .ok_or_else(|| Error::Protocol("Aura entry missing".into()))
    }

    /// What an addition needs from the client's state: the pair's live tag
    /// and the keyword's epoch and counter, which it advances.
    fn plan_add(&mut self, doc: DocId, keyword: &[u8]) -> Result<AddPlan> {
        self.plan_add_from(doc, keyword, None)
    }

    /// [`plan_add`](Self::plan_add), given the tag of generation 0 if it
    /// is computed already.
    fn plan_add_from(&mut self, doc: DocId, keyword: &[u8], first: Option<Tag>) -> Result<AddPlan> {
        let tag = self.live_tag(keyword, doc, first)?;
        if !self.keywords.contains_key(keyword) {
            self.keywords
                .insert(keyword.to_vec(), KeywordState::default());
        }
        let st = self
            .keywords
            .get_mut(keyword)
            .ok_or_else(|| Error::Protocol("Aura keyword state missing".into()))?;
        let plan = AddPlan {
            tag,
            epoch: st.epoch,
            count: st.count,
        };
        st.count += 1;
        Ok(plan)
    }

    /// The entries of planned additions of `keyword`, all in `epoch`, in
    /// order: for each, the label, and the tag with the identifier masked
    /// by the GGM leaf of each of the tag's positions. The additions share
    /// the epoch's tree, so the leaves of all their positions are derived
    /// in one descent that expands each node on their paths once
    /// ([`GgmTree::leaves`]; the same leaves as one descent per position),
    /// and the token once. With `kept`, the leaves come through the
    /// keyword's kept nodes ([`kept_leaves`](Self::kept_leaves)); without,
    /// it reads no mutable state, so entries can be computed on several
    /// threads.
    fn entries(
        &self,
        keyword: &[u8],
        epoch: u64,
        adds: &[(DocId, AddPlan)],
        kept: Option<&mut KeptNodes>,
    ) -> Result<Vec<Entry>> {
        let h = usize::from(self.h);
        let mut all = Vec::with_capacity(adds.len() * h);
        for (_, plan) in adds {
            debug_assert_eq!(plan.epoch, epoch);
            all.extend(positions(&plan.tag, self.h, self.depth));
        }
        if all.len() != adds.len() * h {
            return Err(Error::Protocol("Aura positions per tag".into()));
        }
        let leaves = match kept {
            Some(kept) if self.depth > KEPT_LEVEL => {
                let count = adds.last().map_or(0, |(_, p)| p.count);
                self.kept_leaves(kept, keyword, epoch, count, &all)?
            }
            _ => self.tree(keyword, epoch)?.leaves(&all)?,
        };
        let tkn = self.token(keyword, epoch);
        Ok(adds
            .iter()
            .zip(leaves.chunks_exact(h))
            .map(|((doc, plan), leaves)| {
                let id = doc.to_le_bytes();
                let mut value = Vec::with_capacity(TAG_LEN + ID_LEN * h);
                value.extend_from_slice(&plan.tag);
                for leaf in leaves {
                    let pad = pad(leaf, &plan.tag);
                    value.extend(id.iter().zip(pad).map(|(a, b)| a ^ b));
                }
                (label(&tkn, plan.count), value)
            })
            .collect())
    }

    /// The entries of groups of planned additions (each group one keyword
    /// and epoch), group by group: on the calling thread for fewer than
    /// `2 * PARALLEL_ENTRIES` entries in all (through the kept nodes, if
    /// given), otherwise on every core, the groups dealt into bundles of
    /// about equal entries (largest first, each to the lightest bundle: the
    /// groups of one batch range from one entry to one per document). The
    /// primitive calls made on the other threads are counted as this
    /// thread's.
    fn compute(
        &self,
        groups: &[AddGroup<'_>],
        mut kept: Option<&mut KeptNodes>,
    ) -> Result<Vec<Vec<Entry>>> {
        let total: usize = groups.iter().map(|g| g.adds.len()).sum();
        if total < 2 * PARALLEL_ENTRIES {
            return groups
                .iter()
                .map(|g| self.entries(g.keyword, g.epoch, &g.adds, kept.as_deref_mut()))
                .collect();
        }
        let mut order: Vec<usize> = (0..groups.len()).collect();
        order.sort_by_key(|&g| std::cmp::Reverse(groups[g].adds.len()));
        let mut bundles: Vec<(usize, Vec<usize>)> = vec![(0, Vec::new()); BUNDLES];
        for g in order {
            if let Some(lightest) = bundles.iter_mut().min_by_key(|b| b.0) {
                lightest.0 += groups[g].adds.len();
                lightest.1.push(g);
            }
        }
        let parts = common::par_map(&bundles, 1, |(_, members)| {
            members
                .iter()
                .map(|&g| {
                    let group = &groups[g];
                    Ok((
                        g,
                        self.entries(group.keyword, group.epoch, &group.adds, None)?,
                    ))
                })
                .collect::<Result<Vec<_>>>()
        })?;
        let mut out: Vec<Vec<Entry>> = (0..groups.len()).map(|_| Vec::new()).collect();
        for (g, entries) in parts.into_iter().flatten() {
            out[g] = entries;
        }
        Ok(out)
    }

    /// The entries of several updates, update by update (none for a
    /// deletion): every update planned in order, as one call per update
    /// would plan it (tags, epochs, counters, deletions), then the additions
    /// of each keyword, across all the documents, computed together in one
    /// descent of its tree, and handed back to their documents.
    fn batch_entries(
        &mut self,
        updates: &[(UpdateOp, DocId, &[Vec<u8>])],
    ) -> Result<Vec<Vec<Entry>>> {
        // The generation-0 tag of every addition, on every core (a PRF call
        // each, the bulk of planning): the planning below, in order, takes
        // it unless the filter revokes it by then.
        let pairs: Vec<(DocId, &[u8])> = updates
            .iter()
            .filter(|u| u.0 == UpdateOp::Add)
            .flat_map(|&(_, doc, keywords)| keywords.iter().map(move |w| (doc, w.as_slice())))
            .collect();
        let firsts = common::par_map(&pairs, PARALLEL_TAGS, |&(doc, w)| Ok(self.tag(w, doc, 0)))?;
        let mut firsts = firsts.into_iter();
        let mut groups: Vec<AddGroup<'_>> = Vec::new();
        // For each group, the update each of its additions belongs to.
        let mut owners: Vec<Vec<usize>> = Vec::new();
        let mut seen: HashMap<(&[u8], u64), usize> = HashMap::new();
        for (i, &(op, doc, keywords)) in updates.iter().enumerate() {
            Self::check_doc(doc)?;
            match op {
                UpdateOp::Delete => {
                    for w in keywords {
                        self.delete(doc, w)?;
                    }
                }
                UpdateOp::Add => {
                    for w in keywords {
                        let plan = self.plan_add_from(doc, w, firsts.next())?;
                        match seen.get(&(w.as_slice(), plan.epoch)) {
                            Some(&g) => {
                                groups[g].adds.push((doc, plan));
                                owners[g].push(i);
                            }
                            None => {
                                seen.insert((w, plan.epoch), groups.len());
                                groups.push(AddGroup {
                                    keyword: w,
                                    epoch: plan.epoch,
                                    adds: vec![(doc, plan)],
                                });
                                owners.push(vec![i]);
                            }
                        }
                    }
                }
            }
        }
        let mut kept = std::mem::take(&mut self.kept);
        let computed = self.compute(&groups, Some(&mut kept));
        self.kept = kept;
        let mut per_update: Vec<Vec<Entry>> = (0..updates.len()).map(|_| Vec::new()).collect();
        for (entries, owners) in computed?.into_iter().zip(&owners) {
            for (entry, &i) in entries.into_iter().zip(owners) {
                per_update[i].push(entry);
            }
        }
        Ok(per_update)
    }

    /// The requests of several updates ([`KeywordClient::prepare_updates`],
    /// and [`KeywordClient::prepare_update`] as a batch of one): those of
    /// [`batch_entries`](Self::batch_entries), each document's apart.
    fn batch_requests(
        &mut self,
        updates: &[(UpdateOp, DocId, &[Vec<u8>])],
    ) -> Result<Vec<Vec<Vec<u8>>>> {
        self.batch_entries(updates)?
            .into_iter()
            .zip(updates)
            .map(|(entries, &(op, _, _))| match op {
                UpdateOp::Delete => Ok(Vec::new()),
                UpdateOp::Add => Self::add_requests(entries),
            })
            .collect()
    }

    /// The requests that store one document's entries.
    fn add_requests(mut entries: Vec<Entry>) -> Result<Vec<Vec<u8>>> {
        // The order of the entries says nothing about the keywords.
        entries.sort_unstable_by_key(|e| e.0);
        common::chunked_requests(entries, entry_size, |entries| Request::Put {
            reset: false,
            entries,
        })
    }

    /// The entries of one document's additions, planned in order (a batch
    /// of one); the additions of a keyword listed more than once share one
    /// descent of its tree.
    #[cfg(test)]
    fn add_entries(&mut self, doc: DocId, keywords: &[Vec<u8>]) -> Result<Vec<Entry>> {
        let mut entries = self.batch_entries(&[(UpdateOp::Add, doc, keywords)])?;
        entries
            .pop()
            .ok_or_else(|| Error::Protocol("Aura entries missing".into()))
    }

    /// The entries of a fresh index of `db`: every pair planned in order,
    /// then each keyword's additions computed in groups of at most
    /// [`SHARED_ENTRIES`] (sharing the upper levels of the keyword's tree),
    /// split further so that every core gets work.
    fn setup_entries(&mut self, db: &Multimap) -> Result<Vec<Entry>> {
        self.keywords.clear();
        self.kept = KeptNodes::default();
        let mut planned = Vec::with_capacity(db.len());
        for (w, ids) in db {
            let adds = common::normalise(ids.clone())
                .into_iter()
                .map(|id| Ok((id, self.plan_add(id, w)?)))
                .collect::<Result<Vec<_>>>()?;
            planned.push((w.as_slice(), adds));
        }
        let groups: Vec<AddGroup<'_>> =
            crate::renewal::setup_groups(planned, PARALLEL_ENTRIES, SHARED_ENTRIES)
                .into_iter()
                .map(|(keyword, adds)| AddGroup {
                    keyword,
                    epoch: 0,
                    adds,
                })
                .collect();
        Ok(self.compute(&groups, None)?.into_iter().flatten().collect())
    }

    /// A deletion: inserts the live tag into `D_w`. Local only.
    fn delete(&mut self, doc: DocId, keyword: &[u8]) -> Result<()> {
        let tag = self.live_tag(keyword, doc, None)?;
        let (h, depth) = (self.h, self.depth);
        let st = self.keywords.entry(keyword.to_vec()).or_default();
        st.revoked.extend(positions(&tag, h, depth));
        Ok(())
    }

    fn check_doc(doc: DocId) -> Result<()> {
        if doc == common::PAD {
            return Err(Error::InvalidArgument(format!(
                "document identifier {} is reserved",
                common::PAD
            )));
        }
        Ok(())
    }
}

impl RenewedSearch for AuraClient {
    type Request = Request;
    type Response = Response;
    const NAME: &'static str = "Aura";

    fn descriptor() -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    /// The search request for `keyword`, or `None` for a keyword never
    /// updated.
    fn search_request(&self, keyword: &[u8]) -> Result<Option<Request>> {
        let Some(st) = self.keywords.get(keyword) else {
            return Ok(None);
        };
        let revoked: Vec<u64> = st.revoked.iter().copied().collect();
        let (epoch, count) = (st.epoch, st.count);
        let cover = self.tree(keyword, epoch)?.cover(&revoked)?;
        Ok(Some(Request::Search {
            tkn: self.token(keyword, epoch),
            prev: epoch.checked_sub(1).map(|e| self.token(keyword, e)),
            count,
            h: self.h,
            depth: self.depth,
            cover,
        }))
    }

    /// Key renewal after a search: later additions use a fresh token and
    /// tree.
    fn renew(&mut self, keyword: &[u8]) {
        if let Some(st) = self.keywords.get_mut(keyword) {
            st.epoch += 1;
            st.count = 0;
        }
        // The finished epoch's nodes are not needed again.
        self.kept.trees.retain(|t| t.keyword != keyword);
    }

    fn ids(response: Response) -> std::result::Result<Vec<DocId>, Response> {
        match response {
            Response::Ids(ids) => Ok(ids),
            other => Err(other),
        }
    }
}

impl KeywordClient for AuraClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn setup(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        db: &Multimap,
    ) -> Result<()> {
        common::check_ids(db)?;
        let mut entries = self.setup_entries(db)?;
        entries.sort_unstable_by_key(|e| e.0);
        common::upload(
            channel,
            entries,
            |e: &Entry| LABEL_LEN + e.1.len(),
            |reset, entries| Request::Put { reset, entries },
            |r: Response| match r {
                Response::Stored => Ok(()),
                other => Err(Error::unexpected("Aura", &other)),
            },
        )
    }

    fn prepares_updates(&self) -> bool {
        true
    }

    /// A deletion removes the pair from search results.
    fn supports_deletion(&self) -> bool {
        true
    }

    fn prepare_update(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        op: UpdateOp,
        doc: DocId,
        keywords: &[Vec<u8>],
    ) -> Result<Option<Vec<Vec<u8>>>> {
        let mut requests = self.batch_requests(&[(op, doc, keywords)])?;
        Ok(requests.pop())
    }

    fn prepare_updates(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        updates: &[(UpdateOp, DocId, &[Vec<u8>])],
    ) -> Result<Option<Vec<Vec<Vec<u8>>>>> {
        self.batch_requests(updates).map(Some)
    }

    /// A keyword's additions in several documents share the upper levels
    /// of its tree.
    fn batches_updates(&self) -> bool {
        true
    }

    fn check_update_response(&self, response: &[u8]) -> Result<()> {
        match sesame_core::wire::decode(response)? {
            Response::Stored => Ok(()),
            other => Err(Error::unexpected("Aura", &other)),
        }
    }

    crate::renewal::renewed_search_methods!();

    fn save_state(&self) -> Result<Vec<u8>> {
        let s = State {
            master: *self.master.as_bytes(),
            h: self.h,
            depth: self.depth,
            keywords: self
                .keywords
                .iter()
                .map(|(w, st)| (w.clone(), st.clone()))
                .collect(),
        };
        sesame_core::wire::encode(&s)
    }
}

fn entry_key(label: &[u8; LABEL_LEN]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + LABEL_LEN);
    k.push(b'e');
    k.extend_from_slice(label);
    k
}

fn cache_key(tkn: &[u8; LABEL_LEN]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + LABEL_LEN);
    k.push(b'g');
    k.extend_from_slice(tkn);
    k
}

/// The server half of Aura.
pub struct AuraServer {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for AuraServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuraServer").finish_non_exhaustive()
    }
}

impl AuraServer {
    /// A server keeping its index in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// Reads a cached result (identifier, tag) list.
    fn cached(&self, tkn: &[u8; LABEL_LEN], out: &mut Vec<(DocId, Tag)>) -> Result<()> {
        let Some(v) = self.store.get(&cache_key(tkn))? else {
            return Ok(());
        };
        if !v.len().is_multiple_of(CACHED_LEN) {
            return Err(Error::StoreCorrupt(format!(
                "Aura cache of {} bytes",
                v.len()
            )));
        }
        for rec in v.chunks_exact(CACHED_LEN) {
            let mut id = [0u8; ID_LEN];
            id.copy_from_slice(&rec[..ID_LEN]);
            let mut tag = [0u8; TAG_LEN];
            tag.copy_from_slice(&rec[ID_LEN..]);
            out.push((DocId::from_le_bytes(id), tag));
        }
        Ok(())
    }

    /// Runs a search; see the module documentation.
    pub fn search(
        &self,
        tkn: [u8; LABEL_LEN],
        prev: Option<[u8; LABEL_LEN]>,
        count: u64,
        h: u8,
        depth: u8,
        cover: &[GgmNode],
    ) -> Result<Vec<DocId>> {
        if h == 0 || h > 64 || !(MIN_DEPTH..=MAX_DEPTH).contains(&depth) {
            return Err(Error::InvalidArgument("Aura search parameters".into()));
        }
        if cover.iter().any(|n| n.depth() != depth) {
            return Err(Error::InvalidArgument(
                "Aura cover node of another depth".into(),
            ));
        }
        let live = |tag: &Tag| positions(tag, h, depth).any(|p| covering(cover, p).is_some());
        // The previous result, and this epoch's own if the search is
        // retried, minus what is now revoked.
        let mut result: Vec<(DocId, Tag)> = Vec::new();
        if let Some(p) = &prev {
            self.cached(p, &mut result)?;
        }
        self.cached(&tkn, &mut result)?;
        result.retain(|(_, t)| live(t));
        let mut batch = WriteBatch::new();
        for c in 0..count {
            let key = entry_key(&label(&tkn, c));
            // The epoch's entries are consecutive; a retried search finds
            // none (they moved to the cache), and a hostile count stops at
            // the first missing label.
            let Some(value) = self.store.get(&key)? else {
                break;
            };
            batch.delete(key);
            let n = usize::from(h);
            if value.len() != TAG_LEN + ID_LEN * n {
                return Err(Error::InvalidArgument(format!(
                    "Aura entry of {} bytes for h={h}",
                    value.len()
                )));
            }
            let mut tag = [0u8; TAG_LEN];
            tag.copy_from_slice(&value[..TAG_LEN]);
            for (j, p) in positions(&tag, h, depth).enumerate() {
                let Some(node) = covering(cover, p) else {
                    continue;
                };
                let leaf = node.leaf(p)?;
                let pad = pad(&leaf, &tag);
                let ct = &value[TAG_LEN + j * ID_LEN..TAG_LEN + (j + 1) * ID_LEN];
                let mut id = [0u8; ID_LEN];
                for ((o, c), p) in id.iter_mut().zip(ct).zip(pad) {
                    *o = c ^ p;
                }
                result.push((DocId::from_le_bytes(id), tag));
                break;
            }
        }
        result.sort_unstable();
        result.dedup();
        let mut cache = Vec::with_capacity(result.len() * CACHED_LEN);
        for (id, tag) in &result {
            cache.extend_from_slice(&id.to_le_bytes());
            cache.extend_from_slice(tag);
        }
        batch.put(cache_key(&tkn), cache);
        if let Some(p) = &prev {
            batch.delete(cache_key(p));
        }
        self.store.write(batch)?;
        Ok(common::normalise(
            result.into_iter().map(|(id, _)| id).collect(),
        ))
    }
}

impl Handler for AuraServer {
    type Request = Request;
    type Response = Response;

    /// Entries and cached results are read by label, one at a time.
    fn packable(&self) -> bool {
        true
    }

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::Put { reset, entries } => {
                let mut batch = WriteBatch::with_capacity(entries.len());
                if reset {
                    for (k, _) in self.store.scan_prefix(b"")? {
                        batch.delete(k);
                    }
                }
                for (label, value) in entries {
                    batch.put(entry_key(&label), value);
                }
                self.store.write(batch)?;
                Ok(Response::Stored)
            }
            Request::Search {
                tkn,
                prev,
                count,
                h,
                depth,
                cover,
            } => Ok(Response::Ids(
                self.search(tkn, prev, count, h, depth, &cover)?,
            )),
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
    fn positions_are_in_range_and_depend_on_the_tag() {
        let p: Vec<u64> = positions(&[0x5a; TAG_LEN], 13, 4).collect();
        assert_eq!(p.len(), 13);
        assert!(p.iter().all(|&x| x < 16));
        let a: Vec<u64> = positions(&[1; TAG_LEN], 64, 40).collect();
        let b: Vec<u64> = positions(&[2; TAG_LEN], 64, 40).collect();
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert_eq!(a, positions(&[1; TAG_LEN], 64, 40).collect::<Vec<_>>());
    }

    #[test]
    fn false_positive_rate_meets_the_fp_parameter() {
        let p = Params::parse("h=5,fp=0.0001,dmax=1000").unwrap();
        let (h, depth) = parse_params(&p).unwrap();
        assert_eq!(h, 5);
        assert!(false_positive_rate((1u64 << depth) as f64, 5, 1000) <= 1e-4);
        assert!(false_positive_rate((1u64 << (depth - 1)) as f64, 5, 1000) > 1e-4);
    }

    /// The straightforward computation of an entry: one descent from the
    /// root per position, a token per entry, a copy per ciphertext.
    fn reference_entry(c: &AuraClient, doc: DocId, keyword: &[u8], plan: &AddPlan) -> Entry {
        let tree = c.tree(keyword, plan.epoch).unwrap();
        let mut value = Vec::with_capacity(TAG_LEN + ID_LEN * usize::from(c.h));
        value.extend_from_slice(&plan.tag);
        for p in positions(&plan.tag, c.h, c.depth) {
            let leaf = tree.leaf(p).unwrap();
            let pad = pad(&leaf, &plan.tag);
            let ct: Vec<u8> = doc
                .to_le_bytes()
                .iter()
                .zip(pad)
                .map(|(a, b)| a ^ b)
                .collect();
            value.extend_from_slice(&ct);
        }
        (label(&c.token(keyword, plan.epoch), plan.count), value)
    }

    /// The entries of adding `doc` under `list`, one by one, the
    /// straightforward way (advancing `copy`'s state as an addition does).
    fn reference_entries(copy: &mut AuraClient, doc: DocId, list: &[Vec<u8>]) -> Vec<Entry> {
        list.iter()
            .map(|w| {
                let plan = copy.plan_add(doc, w).unwrap();
                reference_entry(copy, doc, w, &plan)
            })
            .collect()
    }

    fn sorted(mut entries: Vec<Entry>) -> Vec<Entry> {
        entries.sort_unstable_by_key(|e| e.0);
        entries
    }

    #[test]
    fn entries_equal_the_straightforward_computation() {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        // Default parameters, a small filter (positions of a tag often
        // repeat, and tags share most of their paths) and the largest one.
        for params in ["", "h=5,b=16", "h=64,b=1099511627776"] {
            let params = Params::parse(params).unwrap();
            let mut c = AuraClient::new(&mut rng, &params).unwrap();
            let words: Vec<Vec<u8>> = (0..80).map(|i| format!("w{i}").into_bytes()).collect();
            // Earlier additions, a deletion (the re-added pair gets a new
            // generation) and searched keywords (a later epoch).
            for (i, w) in words[..10].iter().enumerate() {
                c.add_entry(1, w).unwrap();
                c.add_entry(2, w).unwrap();
                if i % 2 == 0 {
                    c.delete(1, w).unwrap();
                }
                if i % 3 == 0 {
                    c.renew(w);
                }
            }
            // A document with a keyword listed twice, on several threads
            // (80 entries) and on one (3).
            let mut doc_words = words.clone();
            doc_words.push(words[3].clone());
            for (doc, list) in [(1, &doc_words[..]), (9, &doc_words[..3])] {
                let mut copy = AuraClient::restore(&c.save_state().unwrap()).unwrap();
                let expected = reference_entries(&mut copy, doc, list);
                let got = c.add_entries(doc, list).unwrap();
                assert_eq!(sorted(got), sorted(expected));
                assert_eq!(c.save_state().unwrap(), copy.save_state().unwrap());
            }
            // Small updates of the same keywords: through the kept nodes,
            // first those reached, then (from the 16th addition of an
            // epoch) all of them; a search drops the keyword's nodes.
            let mut copy = AuraClient::restore(&c.save_state().unwrap()).unwrap();
            for doc in 10..40 {
                let list = &words[doc as usize % 3..doc as usize % 3 + 2];
                let expected = reference_entries(&mut copy, doc, list);
                let got = c.add_entries(doc, list).unwrap();
                assert_eq!(sorted(got), sorted(expected));
                if doc == 30 {
                    c.renew(&words[1]);
                    copy.renew(&words[1]);
                    assert!(c.kept.trees.iter().all(|t| t.keyword != words[1]));
                }
            }
            if c.depth > KEPT_LEVEL {
                assert!(c
                    .kept
                    .trees
                    .iter()
                    .any(|t| t.nodes.len() == 1 << KEPT_LEVEL));
            }
            assert_eq!(c.save_state().unwrap(), copy.save_state().unwrap());
            // Setup: one keyword of 300 identifiers (split between the
            // cores) and many of a few.
            let mut db = Multimap::new();
            db.insert(b"big".to_vec(), (0..300).collect());
            for w in &words {
                db.insert(w.clone(), vec![5, 3, 5, 8]);
            }
            let mut copy = AuraClient::restore(&c.save_state().unwrap()).unwrap();
            copy.keywords.clear();
            let mut expected = Vec::new();
            for (w, ids) in &db {
                for id in common::normalise(ids.clone()) {
                    let plan = copy.plan_add(id, w).unwrap();
                    expected.push(reference_entry(&copy, id, w, &plan));
                }
            }
            let got = c.setup_entries(&db).unwrap();
            assert_eq!(got.len(), 300 + 3 * words.len());
            assert_eq!(sorted(got), sorted(expected));
            assert_eq!(c.save_state().unwrap(), copy.save_state().unwrap());
        }
    }

    /// Keywords added to in turn, more of them than the client keeps
    /// nodes for: a keyword's tree is evicted before its next addition.
    /// That addition must cost about what its keyword's first one costs
    /// (one descent), not a derivation of all `2^10` kept nodes.
    #[test]
    fn additions_in_turn_over_more_keywords_than_kept_cost_one_descent() {
        use rand::SeedableRng;
        use sesame_crypto::counter::{self, Primitive};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(8);
        let mut c = AuraClient::new(&mut rng, &Params::new()).unwrap();
        let words: Vec<Vec<u8>> = (0..2 * KEPT_TREES)
            .map(|i| format!("w{i}").into_bytes())
            .collect();
        let mut doc = 0;
        let (_, first) = counter::measure(|| {
            for w in &words {
                doc += 1;
                c.add_entries(doc, std::slice::from_ref(w)).unwrap();
            }
        });
        for _ in 0..KEEP_ALL_AFTER {
            for w in &words {
                doc += 1;
                c.add_entries(doc, std::slice::from_ref(w)).unwrap();
            }
        }
        let (_, later) = counter::measure(|| {
            for w in &words {
                doc += 1;
                c.add_entries(doc, std::slice::from_ref(w)).unwrap();
            }
        });
        let (first, later) = (first.total(Primitive::Prg), later.total(Primitive::Prg));
        assert!(
            later <= first + first / 10,
            "{later} node expansions for {} additions in turn, {first} for their first",
            words.len()
        );
    }

    #[test]
    fn entries_computed_on_several_threads_equal_those_computed_on_one() {
        use rand::SeedableRng;
        use sesame_crypto::counter;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        let mut one = AuraClient::new(&mut rng, &Params::new()).unwrap();
        let words: Vec<Vec<u8>> = (0..300).map(|i| format!("w{i}").into_bytes()).collect();
        // A few keywords with earlier additions and a deletion.
        for w in &words[..5] {
            one.add_entry(1, w).unwrap();
            one.delete(1, w).unwrap();
        }
        let mut many = AuraClient::restore(&one.save_state().unwrap()).unwrap();
        let (mut seq, seq_counts) = counter::measure(|| {
            words
                .iter()
                .map(|w| one.add_entry(7, w))
                .collect::<Result<Vec<_>>>()
                .unwrap()
        });
        let (mut par, par_counts) = counter::measure(|| many.add_entries(7, &words).unwrap());
        seq.sort_unstable_by_key(|e| e.0);
        par.sort_unstable_by_key(|e| e.0);
        assert_eq!(seq, par);
        assert_eq!(seq_counts, par_counts);
        assert!(seq_counts.total(sesame_crypto::counter::Primitive::Prg) > 0);
        assert_eq!(one.save_state().unwrap(), many.save_state().unwrap());
    }

    /// One batch of updates gives, update by update, the requests one call
    /// per update gives, and the same state after, on one thread (a small
    /// batch, through the kept nodes) and on several; documents sharing
    /// keywords share their descents, so the batch expands fewer nodes.
    #[test]
    fn a_batch_prepares_what_one_call_per_update_prepares() {
        use rand::SeedableRng;
        use sesame_crypto::counter::{self, Primitive};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(11);
        let words: Vec<Vec<u8>> = (0..60).map(|i| format!("w{i}").into_bytes()).collect();
        for params in ["", "h=5,b=16"] {
            let mut c = AuraClient::new(&mut rng, &Params::parse(params).unwrap()).unwrap();
            // Earlier additions, a deletion and a searched keyword.
            for w in &words[..6] {
                c.add_entry(1, w).unwrap();
                c.add_entry(2, w).unwrap();
            }
            c.delete(1, &words[0]).unwrap();
            c.renew(&words[1]);
            let mut updates: Vec<(UpdateOp, DocId, Vec<Vec<u8>>)> = (3..43)
                .map(|d: u64| {
                    let list = (0..30).map(|j| words[(d as usize * 7 + j) % 60].clone());
                    (UpdateOp::Add, d, list.collect())
                })
                .collect();
            // A deletion and a re-addition inside the batch (a new
            // generation of the pair), a keyword listed twice, no keyword.
            updates.insert(10, (UpdateOp::Delete, 5, updates[2].2.clone()));
            updates.insert(11, (UpdateOp::Add, 5, updates[2].2[..4].to_vec()));
            updates.push((UpdateOp::Add, 50, vec![words[3].clone(), words[3].clone()]));
            updates.push((UpdateOp::Add, 51, Vec::new()));
            let small = vec![
                (UpdateOp::Add, 60, words[..3].to_vec()),
                (UpdateOp::Add, 61, words[2..5].to_vec()),
            ];
            for batch in [&updates, &small] {
                let mut one = AuraClient::restore(&c.save_state().unwrap()).unwrap();
                let mut all = AuraClient::restore(&c.save_state().unwrap()).unwrap();
                let (expected, one_counts) = counter::measure(|| {
                    batch
                        .iter()
                        .map(|(op, d, ws)| {
                            one.prepare_update(&mut rng, *op, *d, ws).unwrap().unwrap()
                        })
                        .collect::<Vec<_>>()
                });
                let refs: Vec<(UpdateOp, DocId, &[Vec<u8>])> = batch
                    .iter()
                    .map(|(op, d, ws)| (*op, *d, ws.as_slice()))
                    .collect();
                let (got, all_counts) =
                    counter::measure(|| all.prepare_updates(&mut rng, &refs).unwrap().unwrap());
                assert_eq!(got, expected, "params {params:?}, {} updates", batch.len());
                assert_eq!(all.save_state().unwrap(), one.save_state().unwrap());
                if batch.len() > 2 && params.is_empty() {
                    assert!(
                        all_counts.total(Primitive::Prg)
                            < one_counts.total(Primitive::Prg) * 9 / 10,
                        "{} node expansions, one by one {}",
                        all_counts.total(Primitive::Prg),
                        one_counts.total(Primitive::Prg)
                    );
                }
            }
        }
    }
}
