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

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sesame_core::{
    BackwardPrivacy, Error, Params, QueryKind, Result, SchemeDescriptor, SchemeKind,
};
use sesame_crypto::ggm::GgmNode;
use sesame_crypto::key::Key;
use sesame_crypto::prf::{Aes128Prf, HmacPrf};

use crate::api::{DocId, KeywordScheme};
use crate::common;

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
    common::keyword_scheme!(
        &DESCRIPTOR,
        &[
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
        AuraClient,
        AuraServer
    )
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

/// An Aura response: stored, or the identifiers a search found.
pub type Response = crate::common::IdsResponse;

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

mod client;
mod server;
#[cfg(test)]
mod tests;

pub use server::AuraServer;
