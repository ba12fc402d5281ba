//! KPR12: the dynamic SSE scheme of Kamara, Papamanthou and Roeder,
//! "Dynamic Searchable Symmetric Encryption", ACM CCS 2012, with a Merkle
//! tree over the whole encrypted index so that a malicious server's answers
//! are verifiable (the II-based verifiable scheme of seed 003).
//!
//! The index is KPR12's: a search array `As` holding, per keyword `w`, an
//! encrypted singly linked list of nodes `(⟨id, next⟩ ⊕ H(K_w, r), r)`; a
//! search table `Ts[F(K1, w)] = ⟨head⟩ ⊕ G(K2, w)`; a deletion array `Ad`
//! with a dual node per node, `(⟨self, prev, next, F(K1, w)⟩ ⊕ H(K_f, r'), r')`
//! with `K_f = P(K3, f)`; and a free list threaded through the unused nodes
//! of `As`. Adding a pair takes a free node, writes the token's node with
//! its pointer set homomorphically (XOR) to the old head, and fixes the old
//! head's dual; deleting one decrypts the pair's dual with `K_f` and unlinks
//! the node by XOR-ing its neighbours' pointers, returning the node to the
//! free list.
//!
//! Verification: every cell of the index (each `As`, `Ad`, `Ts` entry, the
//! pair dictionary, the free-list head) is a leaf of one sparse Merkle tree
//! of depth [`DEPTH`] over SHA-256 (the leaf and node hashes of
//! [`sesame_crypto::merkle`]), at the cell's address. The client keeps only
//! its key and the root. Every server algorithm (Search, Add, Del) runs
//! over a [`Memory`]; the server's memory records, for each cell read or
//! written, the cell and its authentication path (an [`Access`]); that
//! transcript is the proof component. The client runs the same algorithm
//! over the transcript with a verifying memory: a read is accepted only if
//! its path leads to the current root; a write checks the old cell and
//! moves the root to the new one. So the client recomputes the result of a
//! search from authenticated cells (and compares it with the server's) and
//! keeps the root current after each update. See `docs/schemes/kpr12.md`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    channel, BackwardPrivacy, Channel, Error, Handler, IoCounts, Params, QueryKind, Result,
    SchemeDescriptor, SchemeKind, Store, Typed, WriteBatch,
};
use sesame_crypto::hash::ro;
use sesame_crypto::key::Key;
use sesame_crypto::merkle::{leaf_hash, node_hash};
use sesame_crypto::prf::HmacPrf;

use crate::api::{DocId, KeywordClient, KeywordScheme, Multimap, UpdateOp};
use crate::common;

/// Descriptor of KPR12 with Merkle-tree verification.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "kpr12",
    title: "KPR12 dynamic SSE with a Merkle tree over the index (verifiable)",
    citation: "S. Kamara, C. Papamanthou, T. Roeder. Dynamic Searchable Symmetric Encryption. \
               ACM CCS 2012, pp. 965-976; Merkle-tree verification as in seed 003 (Online \
               Resource 5/6)",
    kind: SchemeKind::DynamicSse,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Exact, QueryKind::Verifiable],
    leakage: "Setup: the number of (keyword, document) pairs plus free nodes (|As|), the number \
              of keywords (|Ts|) and of pairs (the pair dictionary). Search: the search pattern \
              (F(K1, w) is deterministic), the access pattern (the list's nodes and the \
              identifiers, which the server decrypts). Add: the labels F(K1, w) of the \
              document's keywords (linkable to past and future searches: no forward \
              privacy), their number, the identifier's pair tags, and where the nodes go. Del: \
              the document key P(K3, f), so the dual nodes of the deleted pairs, their keyword \
              labels and list neighbours; K_f is a PRF of the identifier, so a server that \
              keeps it opens the dual nodes of any later re-addition of that identifier as \
              well (their labels, which an addition reveals anyway, and list positions). \
              Proofs reveal nothing the server does not hold: \
              they are paths in a tree of the server's own cells.",
    doc: "docs/schemes/kpr12.md",
};

/// The registry entry of KPR12.
pub fn scheme() -> KeywordScheme {
    KeywordScheme {
        descriptor: &DESCRIPTOR,
        params: &[],
        new_client: |rng, params| Ok(Box::new(Kpr12Client::new(rng, params)?)),
        restore_client: |bytes| Ok(Box::new(Kpr12Client::restore(bytes)?)),
        new_server: Some(|store, _| Ok(Box::new(Typed(Kpr12Server::new(store))))),
    }
}

/// Depth of the sparse Merkle tree: cell addresses have this many bits.
pub const DEPTH: usize = 40;

/// Bits of a cell's index within its region.
const INDEX_BITS: u32 = 37;
/// Mask of an index within a region.
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

/// Region of the free-list head (one cell, index 0).
const META: u64 = 0;
/// Region of the search array `As`.
const AS: u64 = 1;
/// Region of the deletion array `Ad` (the dual of `As[i]` is `Ad[i]`).
const AD: u64 = 2;
/// Region of the search table `Ts` (open addressing on the label).
const TS: u64 = 3;
/// Region of the pair dictionary (open addressing on the pair tag).
const PAIRS: u64 = 4;

/// Probes of an open-addressing lookup before giving up (labels are PRF
/// outputs over 2^37 slots: a second probe is already rare).
const MAX_PROBES: u64 = 64;

/// Bytes of a plaintext node: `id ‖ next`.
pub const NODE_LEN: usize = 16;
/// Bytes of a plaintext dual node: `self ‖ prev ‖ next ‖ F(K1, w)`.
pub const DUAL_LEN: usize = 24 + 32;
/// Bytes of the nonces `r`, `r'`.
pub const NONCE_LEN: usize = 16;

const CELL_META: u8 = b'M';
const CELL_NODE: u8 = b'N';
const CELL_FREE: u8 = b'F';
const CELL_DUAL: u8 = b'D';
const CELL_TS: u8 = b'T';
const CELL_PAIR: u8 = b'P';

/// The address of index `index` in `region`.
fn address(region: u64, index: u64) -> u64 {
    (region << INDEX_BITS) | (index & INDEX_MASK)
}

/// The hashes of the empty subtrees: `defaults()[l]` is the root of an
/// empty subtree of height `l`.
fn defaults() -> &'static [[u8; 32]; DEPTH + 1] {
    static D: OnceLock<[[u8; 32]; DEPTH + 1]> = OnceLock::new();
    D.get_or_init(|| {
        let mut d = [[0u8; 32]; DEPTH + 1];
        d[0] = leaf_hash(&[]);
        for l in 0..DEPTH {
            d[l + 1] = node_hash(&d[l], &d[l]);
        }
        d
    })
}

/// The leaf hash of `cell` at `addr`: `SHA-256(0x00 ‖ addr ‖ cell)`, or the
/// empty leaf for an empty cell.
fn cell_leaf(addr: u64, cell: &[u8]) -> [u8; 32] {
    if cell.is_empty() {
        return defaults()[0];
    }
    let mut buf = Vec::with_capacity(8 + cell.len());
    buf.extend_from_slice(&addr.to_be_bytes());
    buf.extend_from_slice(cell);
    leaf_hash(&buf)
}

/// The parent of `h` at level `l` on the path of `addr`, `s` its sibling.
fn parent(addr: u64, l: usize, h: &[u8; 32], s: &[u8; 32]) -> [u8; 32] {
    if (addr >> l) & 1 == 0 {
        node_hash(h, s)
    } else {
        node_hash(s, h)
    }
}

/// One cell as the server read or wrote it, with its authentication path:
/// one element of the proof component.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Access {
    /// The cell's contents (before the write, for a write); empty when the
    /// cell is unused.
    pub cell: Vec<u8>,
    /// Bit `l` is set when the sibling at level `l` is not the empty
    /// subtree and so is listed in `siblings`.
    pub present: u64,
    /// The listed siblings, bottom-up.
    pub siblings: Vec<[u8; 32]>,
}

impl Access {
    /// The root of the tree in which `addr` holds `cell` and the path has
    /// these siblings. Malformed paths are [`Error::Crypto`].
    pub fn root_with(&self, addr: u64, cell: &[u8]) -> Result<[u8; 32]> {
        if addr >> DEPTH != 0
            || self.present >> DEPTH != 0
            || self.siblings.len() != self.present.count_ones() as usize
        {
            return Err(Error::Crypto);
        }
        let d = defaults();
        let mut h = cell_leaf(addr, cell);
        let mut listed = self.siblings.iter();
        for (l, default) in d.iter().enumerate().take(DEPTH) {
            let s = if (self.present >> l) & 1 == 1 {
                listed.next().ok_or(Error::Crypto)?
            } else {
                default
            };
            h = parent(addr, l, &h, s);
        }
        Ok(h)
    }
}

/// A cell of the index at its address, as IndexGen uploads it.
pub type Cell = (u64, Vec<u8>);

/// Cell memory the KPR12 algorithms run over: the server's store, or the
/// client's verifier of a proof transcript.
pub trait Memory {
    /// The cell at `addr` (empty when unused).
    fn read(&mut self, addr: u64) -> Result<Vec<u8>>;
    /// Replaces the cell at `addr` (empty frees it).
    fn write(&mut self, addr: u64, cell: Vec<u8>) -> Result<()>;
}

// ---------------------------------------------------------------- cells

fn corrupt(what: &str) -> Error {
    Error::StoreCorrupt(format!("KPR12 {what}"))
}

fn u64_at(bytes: &[u8], at: usize) -> Result<u64> {
    let b: [u8; 8] = bytes
        .get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| corrupt("cell too short"))?;
    Ok(u64::from_le_bytes(b))
}

fn xor_u64(bytes: &mut [u8], at: usize, v: u64) {
    for (b, x) in bytes[at..at + 8].iter_mut().zip(v.to_le_bytes()) {
        *b ^= x;
    }
}

/// An index within a region read from a cell: must fit the region.
fn index(v: u64) -> Result<u64> {
    if v > INDEX_MASK {
        return Err(corrupt("pointer out of range"));
    }
    Ok(v)
}

fn meta_cell(free: u64, fresh: u64) -> Vec<u8> {
    let mut c = vec![CELL_META];
    c.extend_from_slice(&free.to_le_bytes());
    c.extend_from_slice(&fresh.to_le_bytes());
    c
}

/// `(head of the free list, next never-used index)`.
fn read_meta(m: &mut dyn Memory) -> Result<(u64, u64)> {
    let c = m.read(address(META, 0))?;
    if c.is_empty() {
        return Ok((0, 1));
    }
    if c.len() != 17 || c[0] != CELL_META {
        return Err(corrupt("free-list head"));
    }
    Ok((index(u64_at(&c, 1)?)?, index(u64_at(&c, 9)?)?))
}

fn node_cell(ct: &[u8; NODE_LEN], r: &[u8; NONCE_LEN]) -> Vec<u8> {
    let mut c = Vec::with_capacity(1 + NODE_LEN + NONCE_LEN);
    c.push(CELL_NODE);
    c.extend_from_slice(ct);
    c.extend_from_slice(r);
    c
}

fn parse_node(c: &[u8]) -> Result<([u8; NODE_LEN], [u8; NONCE_LEN])> {
    if c.len() != 1 + NODE_LEN + NONCE_LEN || c[0] != CELL_NODE {
        return Err(corrupt("search-array node"));
    }
    let mut ct = [0u8; NODE_LEN];
    let mut r = [0u8; NONCE_LEN];
    ct.copy_from_slice(&c[1..=NODE_LEN]);
    r.copy_from_slice(&c[1 + NODE_LEN..]);
    Ok((ct, r))
}

fn free_cell(next: u64) -> Vec<u8> {
    let mut c = vec![CELL_FREE];
    c.extend_from_slice(&next.to_le_bytes());
    c
}

fn dual_cell(ct: &[u8], r: &[u8; NONCE_LEN]) -> Vec<u8> {
    let mut c = Vec::with_capacity(1 + DUAL_LEN + NONCE_LEN);
    c.push(CELL_DUAL);
    c.extend_from_slice(ct);
    c.extend_from_slice(r);
    c
}

fn parse_dual(c: &[u8]) -> Result<(Vec<u8>, [u8; NONCE_LEN])> {
    if c.len() != 1 + DUAL_LEN + NONCE_LEN || c[0] != CELL_DUAL {
        return Err(corrupt("deletion-array node"));
    }
    let mut r = [0u8; NONCE_LEN];
    r.copy_from_slice(&c[1 + DUAL_LEN..]);
    Ok((c[1..=DUAL_LEN].to_vec(), r))
}

fn ts_cell(label: &[u8; 32], value: &[u8; 16]) -> Vec<u8> {
    let mut c = vec![CELL_TS];
    c.extend_from_slice(label);
    c.extend_from_slice(value);
    c
}

fn pair_cell(tag: &[u8; 32], node: Option<u64>) -> Vec<u8> {
    let mut c = vec![CELL_PAIR];
    c.extend_from_slice(tag);
    match node {
        Some(i) => {
            c.push(1);
            c.extend_from_slice(&i.to_le_bytes());
        }
        None => {
            c.push(0);
            c.extend_from_slice(&0u64.to_le_bytes());
        }
    }
    c
}

/// The live node of a pair cell, `None` for a deleted pair.
fn parse_pair(c: &[u8]) -> Result<Option<u64>> {
    if c.len() != 42 || c[0] != CELL_PAIR {
        return Err(corrupt("pair cell"));
    }
    match c[33] {
        0 => Ok(None),
        1 => Ok(Some(index(u64_at(c, 34)?)?)),
        _ => Err(corrupt("pair cell state")),
    }
}

/// Finds `key` in the open-addressing table of `region`: the slot's
/// address and its cell when the key is there, or the first empty slot.
fn dict_find(
    m: &mut dyn Memory,
    region: u64,
    key: &[u8; 32],
    tag: u8,
) -> Result<(u64, Option<Vec<u8>>)> {
    let mut start = [0u8; 8];
    start.copy_from_slice(&key[..8]);
    let start = u64::from_le_bytes(start);
    for probe in 0..MAX_PROBES {
        let a = address(region, start.wrapping_add(probe));
        let c = m.read(a)?;
        if c.is_empty() {
            return Ok((a, None));
        }
        if c.len() < 33 || c[0] != tag {
            return Err(corrupt("dictionary slot"));
        }
        if c[1..33] == key[..] {
            return Ok((a, Some(c)));
        }
    }
    Err(corrupt("dictionary probe sequence too long"))
}

// ------------------------------------------------------------ crypto

/// `H(K_w, r)`: the pad of a node; one Hash call.
fn node_pad(key: &[u8; 32], r: &[u8; NONCE_LEN]) -> [u8; NODE_LEN] {
    let h = ro("sesame-sse/kpr12/node", &[key, r]);
    let mut out = [0u8; NODE_LEN];
    out.copy_from_slice(&h[..NODE_LEN]);
    out
}

/// `H(K_f, r')`: the pad of a dual node; two Hash calls.
fn dual_pad(key: &[u8; 32], r: &[u8; NONCE_LEN]) -> [u8; DUAL_LEN] {
    let a = ro("sesame-sse/kpr12/dual", &[key, r, &[0]]);
    let b = ro("sesame-sse/kpr12/dual", &[key, r, &[1]]);
    let mut out = [0u8; DUAL_LEN];
    out[..32].copy_from_slice(&a);
    out[32..].copy_from_slice(&b[..DUAL_LEN - 32]);
    out
}

fn xor_into(dst: &mut [u8], pad: &[u8]) {
    for (d, p) in dst.iter_mut().zip(pad) {
        *d ^= p;
    }
}

/// The search table value `⟨s, d⟩` of head node `i` (`d = s`: the dual of
/// `As[i]` is `Ad[i]`).
fn head_value(i: u64) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v[8..].copy_from_slice(&i.to_le_bytes());
    v
}

// -------------------------------------------------------- tokens

crate::common::redacted_debug!(SearchToken);

/// The search token `τ_s = (F(K1, w), G(K2, w), P(K3, w))`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchToken {
    /// `F(K1, w)`: the search-table label.
    pub label: [u8; 32],
    /// `G(K2, w)`: the pad of the search-table value.
    pub pad: [u8; 16],
    /// `P(K3, w)`: the key of the keyword's nodes.
    pub key: [u8; 32],
}

crate::common::redacted_debug!(AddItem);

/// One keyword of an add token (`λ_i` of the paper).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddItem {
    /// `F(K1, w)`.
    pub label: [u8; 32],
    /// `G(K2, w)`.
    pub pad: [u8; 16],
    /// The pair tag `F(K1, (f, w))` of the pair dictionary.
    pub pair: [u8; 32],
    /// `⟨f, 0⟩ ⊕ H(K_w, r)`.
    pub node: [u8; NODE_LEN],
    /// `r`.
    pub node_r: [u8; NONCE_LEN],
    /// `⟨0, 0, 0, F(K1, w)⟩ ⊕ H(K_f, r')` ([`DUAL_LEN`] bytes).
    pub dual: Vec<u8>,
    /// `r'`.
    pub dual_r: [u8; NONCE_LEN],
}

crate::common::redacted_debug!(AddToken);

/// The add token `τ_a` of a document: one item per keyword, in label
/// order.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddToken {
    /// The keywords.
    pub items: Vec<AddItem>,
}

crate::common::redacted_debug!(DelToken);

/// The delete token `τ_d` of (document, keywords) pairs.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelToken {
    /// `K_f = P(K3, f)`: the key of the document's dual nodes.
    pub key: [u8; 32],
    /// The pair tags, in order.
    pub pairs: Vec<[u8; 32]>,
}

// ------------------------------------------------------ algorithms

/// KPR12 Search over `m`: walks the keyword's list from the search table.
pub fn search_in(m: &mut dyn Memory, t: &SearchToken) -> Result<Vec<DocId>> {
    let (_, slot) = dict_find(m, TS, &t.label, CELL_TS)?;
    let Some(c) = slot else {
        return Ok(Vec::new());
    };
    if c.len() != 49 {
        return Err(corrupt("search-table entry"));
    }
    let mut v = [0u8; 16];
    v.copy_from_slice(&c[33..]);
    xor_into(&mut v, &t.pad);
    let mut at = index(u64_at(&v, 0)?)?;
    let mut ids = Vec::new();
    let mut seen = HashSet::new();
    while at != 0 {
        if !seen.insert(at) {
            return Err(corrupt("cycle in a list"));
        }
        let (mut plain, r) = parse_node(&m.read(address(AS, at))?)?;
        xor_into(&mut plain, &node_pad(&t.key, &r));
        ids.push(u64_at(&plain, 0)?);
        at = index(u64_at(&plain, 8)?)?;
    }
    Ok(ids)
}

/// Takes a node from the free list (or a never-used one).
fn alloc(m: &mut dyn Memory) -> Result<u64> {
    let (free, fresh) = read_meta(m)?;
    if free != 0 {
        let c = m.read(address(AS, free))?;
        if c.len() != 9 || c[0] != CELL_FREE {
            return Err(corrupt("free node"));
        }
        let next = index(u64_at(&c, 1)?)?;
        m.write(address(META, 0), meta_cell(next, fresh))?;
        Ok(free)
    } else {
        if fresh >= INDEX_MASK {
            return Err(Error::InvalidArgument("KPR12 search array is full".into()));
        }
        m.write(address(META, 0), meta_cell(0, fresh + 1))?;
        Ok(fresh)
    }
}

/// KPR12 Add over `m`: prepends a node per keyword whose pair is not yet
/// there.
pub fn add_in(m: &mut dyn Memory, t: &AddToken) -> Result<()> {
    for item in &t.items {
        if item.dual.len() != DUAL_LEN {
            return Err(Error::Protocol("KPR12 add token of a wrong size".into()));
        }
        let (pair_at, pair) = dict_find(m, PAIRS, &item.pair, CELL_PAIR)?;
        if let Some(c) = &pair {
            if parse_pair(c)?.is_some() {
                continue;
            }
        }
        let phi = alloc(m)?;
        let (ts_at, ts) = dict_find(m, TS, &item.label, CELL_TS)?;
        let old = match ts {
            Some(c) => {
                if c.len() != 49 {
                    return Err(corrupt("search-table entry"));
                }
                let mut v = [0u8; 16];
                v.copy_from_slice(&c[33..]);
                xor_into(&mut v, &item.pad);
                index(u64_at(&v, 0)?)?
            }
            None => 0,
        };
        // The new node points to the old head: its pointer field is
        // 0 ⊕ H(K_w, r), so XOR-ing the address sets it.
        let mut node = item.node;
        xor_u64(&mut node, 8, old);
        m.write(address(AS, phi), node_cell(&node, &item.node_r))?;
        let mut dual = item.dual.clone();
        xor_u64(&mut dual, 0, phi);
        xor_u64(&mut dual, 16, old);
        m.write(address(AD, phi), dual_cell(&dual, &item.dual_r))?;
        if old != 0 {
            let (mut d, r) = parse_dual(&m.read(address(AD, old))?)?;
            xor_u64(&mut d, 8, phi);
            m.write(address(AD, old), dual_cell(&d, &r))?;
        }
        let mut v = head_value(phi);
        xor_into(&mut v, &item.pad);
        m.write(ts_at, ts_cell(&item.label, &v))?;
        m.write(pair_at, pair_cell(&item.pair, Some(phi)))?;
    }
    Ok(())
}

/// KPR12 Del over `m`: unlinks the node of each live pair and frees it.
pub fn del_in(m: &mut dyn Memory, t: &DelToken) -> Result<()> {
    for tag in &t.pairs {
        let (pair_at, pair) = dict_find(m, PAIRS, tag, CELL_PAIR)?;
        let Some(phi) = pair.as_deref().map(parse_pair).transpose()?.flatten() else {
            continue;
        };
        let (mut d, r) = parse_dual(&m.read(address(AD, phi))?)?;
        xor_into(&mut d, &dual_pad(&t.key, &r));
        let (me, prev, next) = (
            index(u64_at(&d, 0)?)?,
            index(u64_at(&d, 8)?)?,
            index(u64_at(&d, 16)?)?,
        );
        if me != phi {
            return Err(corrupt("dual node of another node"));
        }
        let mut label = [0u8; 32];
        label.copy_from_slice(&d[24..]);
        if prev != 0 {
            let (mut ct, nr) = parse_node(&m.read(address(AS, prev))?)?;
            xor_u64(&mut ct, 8, phi ^ next);
            m.write(address(AS, prev), node_cell(&ct, &nr))?;
            let (mut pd, pr) = parse_dual(&m.read(address(AD, prev))?)?;
            xor_u64(&mut pd, 16, phi ^ next);
            m.write(address(AD, prev), dual_cell(&pd, &pr))?;
        } else {
            let (ts_at, ts) = dict_find(m, TS, &label, CELL_TS)?;
            let c = ts.ok_or_else(|| corrupt("list without a search-table entry"))?;
            if c.len() != 49 {
                return Err(corrupt("search-table entry"));
            }
            let mut v = [0u8; 16];
            v.copy_from_slice(&c[33..]);
            let mut delta = head_value(phi);
            xor_into(&mut delta, &head_value(next));
            xor_into(&mut v, &delta);
            m.write(ts_at, ts_cell(&label, &v))?;
        }
        if next != 0 {
            let (mut nd, nr) = parse_dual(&m.read(address(AD, next))?)?;
            xor_u64(&mut nd, 8, phi ^ prev);
            m.write(address(AD, next), dual_cell(&nd, &nr))?;
        }
        let (free, fresh) = read_meta(m)?;
        m.write(address(AS, phi), free_cell(free))?;
        m.write(address(AD, phi), Vec::new())?;
        m.write(address(META, 0), meta_cell(phi, fresh))?;
        m.write(pair_at, pair_cell(tag, None))?;
    }
    Ok(())
}

// ------------------------------------------------------ client

/// Verifies a transcript against a root, moving the root on writes.
struct VerifyMemory<'a> {
    root: [u8; 32],
    accesses: std::slice::Iter<'a, Access>,
}

impl VerifyMemory<'_> {
    fn next(&mut self, addr: u64) -> Result<&Access> {
        let a = self.accesses.next().ok_or(Error::Crypto)?;
        if a.root_with(addr, &a.cell)? != self.root {
            return Err(Error::Crypto);
        }
        Ok(a)
    }

    fn finish(mut self) -> Result<[u8; 32]> {
        if self.accesses.next().is_some() {
            return Err(Error::Crypto);
        }
        Ok(self.root)
    }
}

impl Memory for VerifyMemory<'_> {
    fn read(&mut self, addr: u64) -> Result<Vec<u8>> {
        Ok(self.next(addr)?.cell.clone())
    }

    fn write(&mut self, addr: u64, cell: Vec<u8>) -> Result<()> {
        let root = self.next(addr)?.root_with(addr, &cell)?;
        self.root = root;
        Ok(())
    }
}

/// Runs `f` over the transcript `proof` from `root`: the verified result
/// and the new root. Any failure is [`Error::Crypto`].
fn verify_run<T>(
    root: [u8; 32],
    proof: &[Access],
    f: impl FnOnce(&mut dyn Memory) -> Result<T>,
) -> Result<(T, [u8; 32])> {
    let mut m = VerifyMemory {
        root,
        accesses: proof.iter(),
    };
    let out = f(&mut m).map_err(|_| Error::Crypto)?;
    Ok((out, m.finish()?))
}

#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    master: [u8; 32],
    root: [u8; 32],
}

/// The client half of KPR12: the master key (from which `K1`, `K2`, `K3`
/// derive) and the Merkle root of the index.
pub struct Kpr12Client {
    master: Key<32>,
    f: HmacPrf,
    g: HmacPrf,
    p: HmacPrf,
    root: [u8; 32],
}

impl std::fmt::Debug for Kpr12Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kpr12Client")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl Kpr12Client {
    /// A client with a fresh key and an empty index. KPR12 has no
    /// parameters.
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        params.only(DESCRIPTOR.name, &[])?;
        Ok(Self::with_key(Key::generate(rng), empty_root()))
    }

    fn with_key(master: Key<32>, root: [u8; 32]) -> Self {
        Self {
            f: HmacPrf::new(&master.derive("sesame-sse/kpr12/k1")),
            g: HmacPrf::new(&master.derive("sesame-sse/kpr12/k2")),
            p: HmacPrf::new(&master.derive("sesame-sse/kpr12/k3")),
            master,
            root,
        }
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let s: State = sesame_core::wire::decode(bytes)?;
        Ok(Self::with_key(Key::from_bytes(s.master), s.root))
    }

    /// The Merkle root the client holds.
    pub fn root(&self) -> [u8; 32] {
        self.root
    }

    fn label(&self, w: &[u8]) -> [u8; 32] {
        self.f.eval_concat(&[b"w", w])
    }

    fn file_key(&self, f: DocId) -> [u8; 32] {
        self.p.eval_concat(&[b"f", &f.to_le_bytes()])
    }

    fn pair_tag(&self, f: DocId, w: &[u8]) -> [u8; 32] {
        self.f.eval_concat(&[b"p", &f.to_le_bytes(), w])
    }

    /// The search token of `keyword`.
    pub fn keyword_token(&self, keyword: &[u8]) -> SearchToken {
        let g = self.g.eval_concat(&[b"w", keyword]);
        let mut pad = [0u8; 16];
        pad.copy_from_slice(&g[..16]);
        SearchToken {
            label: self.label(keyword),
            pad,
            key: self.p.eval_concat(&[b"w", keyword]),
        }
    }

    /// Verify: the identifiers of the search `token` was made for, computed
    /// from the authenticated cells of `proof`, if they are exactly
    /// `claimed` (in any order); [`Error::Crypto`] otherwise.
    pub fn verify(
        &self,
        token: &SearchToken,
        claimed: &[DocId],
        proof: &[Access],
    ) -> Result<Vec<DocId>> {
        let (ids, _) = verify_run(self.root, proof, |m| search_in(m, token))?;
        let ids = common::normalise(ids);
        if ids != common::normalise(claimed.to_vec()) {
            return Err(Error::Crypto);
        }
        Ok(ids)
    }

    /// AddTok: the add token of (`doc`, `keywords`).
    pub fn add_token(
        &self,
        rng: &mut dyn CryptoRngCore,
        doc: DocId,
        keywords: &[Vec<u8>],
    ) -> Result<AddToken> {
        check_doc(doc)?;
        let kf = self.file_key(doc);
        let words: BTreeSet<&Vec<u8>> = keywords.iter().collect();
        let mut items: Vec<AddItem> = words
            .into_iter()
            .map(|w| {
                let t = self.keyword_token(w);
                let mut node_r = [0u8; NONCE_LEN];
                rng.fill_bytes(&mut node_r);
                let mut node = [0u8; NODE_LEN];
                node[..8].copy_from_slice(&doc.to_le_bytes());
                xor_into(&mut node, &node_pad(&t.key, &node_r));
                let mut dual_r = [0u8; NONCE_LEN];
                rng.fill_bytes(&mut dual_r);
                let mut dual = vec![0u8; DUAL_LEN];
                dual[24..].copy_from_slice(&t.label);
                xor_into(&mut dual, &dual_pad(&kf, &dual_r));
                AddItem {
                    label: t.label,
                    pad: t.pad,
                    pair: self.pair_tag(doc, w),
                    node,
                    node_r,
                    dual,
                    dual_r,
                }
            })
            .collect();
        items.sort_unstable_by_key(|i| i.label);
        Ok(AddToken { items })
    }

    /// DelTok: the delete token of (`doc`, `keywords`).
    pub fn del_token(&self, doc: DocId, keywords: &[Vec<u8>]) -> Result<DelToken> {
        check_doc(doc)?;
        let words: BTreeSet<&Vec<u8>> = keywords.iter().collect();
        let mut pairs: Vec<[u8; 32]> = words.into_iter().map(|w| self.pair_tag(doc, w)).collect();
        pairs.sort_unstable();
        Ok(DelToken {
            key: self.file_key(doc),
            pairs,
        })
    }

    /// Checks the proof of an Add the server ran and moves the root.
    pub fn apply_add(&mut self, token: &AddToken, proof: &[Access]) -> Result<()> {
        let ((), root) = verify_run(self.root, proof, |m| add_in(m, token))?;
        self.root = root;
        Ok(())
    }

    /// Checks the proof of a Del the server ran and moves the root.
    pub fn apply_del(&mut self, token: &DelToken, proof: &[Access]) -> Result<()> {
        let ((), root) = verify_run(self.root, proof, |m| del_in(m, token))?;
        self.root = root;
        Ok(())
    }

    /// IndexGen: the cells of the index of `db` (nodes at random places
    /// of `As`, a quarter more free nodes) and their Merkle root, which
    /// the client now holds.
    pub fn index_gen(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        db: &Multimap,
    ) -> Result<(Vec<Cell>, [u8; 32])> {
        common::check_ids(db)?;
        let lists: Vec<(&Vec<u8>, Vec<DocId>)> = db
            .iter()
            .map(|(w, ids)| (w, common::normalise(ids.clone())))
            .filter(|(_, ids)| !ids.is_empty())
            .collect();
        let n: usize = lists.iter().map(|(_, ids)| ids.len()).sum();
        let size = n + n / 4 + 8;
        // A random permutation of 1..=size places the nodes.
        let mut places: Vec<u64> = (1..=size as u64).collect();
        for i in (1..places.len()).rev() {
            let j = (rng.next_u64() % (i as u64 + 1)) as usize;
            places.swap(i, j);
        }
        let mut cells: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        let mut file_keys: HashMap<DocId, [u8; 32]> = HashMap::new();
        let mut next_place = places.iter().copied();
        for (w, ids) in lists {
            let t = self.keyword_token(w);
            let at: Vec<u64> = next_place.by_ref().take(ids.len()).collect();
            for (j, &id) in ids.iter().enumerate() {
                let me = at[j];
                let prev = if j == 0 { 0 } else { at[j - 1] };
                let next = at.get(j + 1).copied().unwrap_or(0);
                let mut r = [0u8; NONCE_LEN];
                rng.fill_bytes(&mut r);
                let mut node = [0u8; NODE_LEN];
                node[..8].copy_from_slice(&id.to_le_bytes());
                node[8..].copy_from_slice(&next.to_le_bytes());
                xor_into(&mut node, &node_pad(&t.key, &r));
                cells.insert(address(AS, me), node_cell(&node, &r));
                let kf = *file_keys.entry(id).or_insert_with(|| self.file_key(id));
                rng.fill_bytes(&mut r);
                let mut dual = vec![0u8; DUAL_LEN];
                dual[..8].copy_from_slice(&me.to_le_bytes());
                dual[8..16].copy_from_slice(&prev.to_le_bytes());
                dual[16..24].copy_from_slice(&next.to_le_bytes());
                dual[24..].copy_from_slice(&t.label);
                xor_into(&mut dual, &dual_pad(&kf, &r));
                cells.insert(address(AD, me), dual_cell(&dual, &r));
                let tag = self.pair_tag(id, w);
                let slot = local_slot(&cells, PAIRS, &tag)?;
                cells.insert(slot, pair_cell(&tag, Some(me)));
            }
            let mut v = head_value(at[0]);
            xor_into(&mut v, &t.pad);
            let slot = local_slot(&cells, TS, &t.label)?;
            cells.insert(slot, ts_cell(&t.label, &v));
        }
        let free: Vec<u64> = next_place.collect();
        for (k, &i) in free.iter().enumerate() {
            cells.insert(
                address(AS, i),
                free_cell(free.get(k + 1).copied().unwrap_or(0)),
            );
        }
        cells.insert(
            address(META, 0),
            meta_cell(free.first().copied().unwrap_or(0), size as u64 + 1),
        );
        let leaves: BTreeMap<u64, [u8; 32]> =
            cells.iter().map(|(&a, c)| (a, cell_leaf(a, c))).collect();
        let nodes = bulk_nodes(&leaves, |l, _| Ok(defaults()[l]))?;
        let root = nodes
            .last()
            .map(|n| n.2)
            .ok_or_else(|| Error::Protocol("KPR12 tree without a root".into()))?;
        self.root = root;
        Ok((cells.into_iter().collect(), root))
    }
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

/// The root of the empty index.
fn empty_root() -> [u8; 32] {
    defaults()[DEPTH]
}

/// The slot of `key` in a table being built (first free slot of its probe
/// sequence).
fn local_slot(cells: &BTreeMap<u64, Vec<u8>>, region: u64, key: &[u8; 32]) -> Result<u64> {
    let mut start = [0u8; 8];
    start.copy_from_slice(&key[..8]);
    let start = u64::from_le_bytes(start);
    (0..MAX_PROBES)
        .map(|p| address(region, start.wrapping_add(p)))
        .find(|a| !cells.contains_key(a))
        .ok_or_else(|| Error::InvalidArgument("KPR12 dictionary probe sequence too long".into()))
}

/// Every node of the tree that changes when the leaves `leaves` are set,
/// as `(level, index, hash)`, level by level up to the root (last);
/// `sibling(level, index)` gives the unchanged nodes.
fn bulk_nodes(
    leaves: &BTreeMap<u64, [u8; 32]>,
    mut sibling: impl FnMut(usize, u64) -> Result<[u8; 32]>,
) -> Result<Vec<(usize, u64, [u8; 32])>> {
    let mut out: Vec<(usize, u64, [u8; 32])> = leaves.iter().map(|(&i, &h)| (0, i, h)).collect();
    let mut level = leaves.clone();
    if level.is_empty() {
        out.push((DEPTH, 0, empty_root()));
        return Ok(out);
    }
    for l in 0..DEPTH {
        let mut up = BTreeMap::new();
        for (&i, h) in &level {
            let p = i >> 1;
            if up.contains_key(&p) {
                continue;
            }
            let s = match level.get(&(i ^ 1)) {
                Some(s) => *s,
                None => sibling(l, i ^ 1)?,
            };
            up.insert(p, parent(i, 0, h, &s));
        }
        out.extend(up.iter().map(|(&i, &h)| (l + 1, i, h)));
        level = up;
    }
    Ok(out)
}

impl KeywordClient for Kpr12Client {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn setup(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        db: &Multimap,
    ) -> Result<()> {
        let (cells, root) = self.index_gen(rng, db)?;
        common::upload(
            channel,
            cells,
            |c| 16 + c.1.len(),
            |reset, cells| Request::Put { reset, cells },
            |r: Response| match r {
                Response::Stored => Ok(()),
                other => Err(Error::unexpected("KPR12", &other)),
            },
        )?;
        self.root = root;
        Ok(())
    }

    fn update(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        op: UpdateOp,
        doc: DocId,
        keywords: &[Vec<u8>],
    ) -> Result<()> {
        match op {
            UpdateOp::Add => {
                let token = self.add_token(rng, doc, keywords)?;
                if token.items.is_empty() {
                    return Ok(());
                }
                let request = Request::Add(token);
                match channel::call(channel, &request)? {
                    Response::Updated(proof) => {
                        let Request::Add(token) = &request else {
                            return Err(Error::Protocol("KPR12 request changed".into()));
                        };
                        self.apply_add(token, &proof)
                    }
                    other => Err(Error::unexpected("KPR12", &other)),
                }
            }
            UpdateOp::Delete => {
                let token = self.del_token(doc, keywords)?;
                if token.pairs.is_empty() {
                    return Ok(());
                }
                let request = Request::Del(token);
                match channel::call(channel, &request)? {
                    Response::Updated(proof) => {
                        let Request::Del(token) = &request else {
                            return Err(Error::Protocol("KPR12 request changed".into()));
                        };
                        self.apply_del(token, &proof)
                    }
                    other => Err(Error::unexpected("KPR12", &other)),
                }
            }
        }
    }

    fn search(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        keyword: &[u8],
    ) -> Result<Vec<DocId>> {
        let request = Request::Search(self.keyword_token(keyword));
        match channel::call(channel, &request)? {
            Response::Found { ids, proof } => {
                let Request::Search(token) = &request else {
                    return Err(Error::Protocol("KPR12 request changed".into()));
                };
                self.verify(token, &ids, &proof)
            }
            other => Err(Error::unexpected("KPR12", &other)),
        }
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        let s = State {
            master: *self.master.as_bytes(),
            root: self.root,
        };
        sesame_core::wire::encode(&s)
    }
}

crate::common::redacted_debug!(Request);

/// A KPR12 request.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Stores the cells of IndexGen; `reset` first removes the earlier
    /// index.
    Put {
        /// Remove the earlier index first.
        reset: bool,
        /// `(address, cell)` pairs.
        cells: Vec<Cell>,
    },
    /// Search with a proof.
    Search(SearchToken),
    /// Add a document's pairs.
    Add(AddToken),
    /// Delete (document, keyword) pairs.
    Del(DelToken),
}

/// A KPR12 response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The cells are stored.
    Stored,
    /// The result of a search and its proof component.
    Found {
        /// The identifiers, sorted.
        ids: Vec<DocId>,
        /// Every cell the search read, with its path.
        proof: Vec<Access>,
    },
    /// The update is done; every cell it read or wrote, with its path
    /// before the access.
    Updated(Vec<Access>),
}

// ------------------------------------------------------ server

fn cell_key(addr: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = b'c';
    k[1..].copy_from_slice(&addr.to_be_bytes());
    k
}

fn node_key(level: usize, idx: u64) -> [u8; 10] {
    let mut k = [0u8; 10];
    k[0] = b'n';
    k[1] = level as u8;
    k[2..].copy_from_slice(&idx.to_be_bytes());
    k
}

fn parse_hash(v: &[u8]) -> Result<[u8; 32]> {
    v.try_into()
        .map_err(|_| corrupt(&format!("tree node of {} bytes", v.len())))
}

/// The server's memory: the store with pending writes on top, recording
/// the proof transcript when asked.
struct ServerMemory<'a> {
    store: &'a dyn Store,
    cells: HashMap<u64, Vec<u8>>,
    nodes: HashMap<(usize, u64), [u8; 32]>,
    log: Option<Vec<Access>>,
}

impl<'a> ServerMemory<'a> {
    fn new(store: &'a dyn Store, prove: bool) -> Self {
        Self {
            store,
            cells: HashMap::new(),
            nodes: HashMap::new(),
            log: prove.then(Vec::new),
        }
    }

    fn cell(&self, addr: u64) -> Result<Vec<u8>> {
        if let Some(c) = self.cells.get(&addr) {
            return Ok(c.clone());
        }
        Ok(self.store.get(&cell_key(addr))?.unwrap_or_default())
    }

    /// The siblings on the path of `addr`, bottom-up.
    fn path(&self, addr: u64) -> Result<[[u8; 32]; DEPTH]> {
        let d = defaults();
        let mut out = [[0u8; 32]; DEPTH];
        let mut missing: Vec<(usize, [u8; 10])> = Vec::new();
        for (l, o) in out.iter_mut().enumerate() {
            let s = (addr >> l) ^ 1;
            match self.nodes.get(&(l, s)) {
                Some(h) => *o = *h,
                None => missing.push((l, node_key(l, s))),
            }
        }
        let keys: Vec<&[u8]> = missing.iter().map(|(_, k)| k.as_slice()).collect();
        for ((l, _), v) in missing.iter().zip(self.store.get_many(&keys)?) {
            out[*l] = match v {
                Some(v) => parse_hash(&v)?,
                None => d[*l],
            };
        }
        Ok(out)
    }

    fn record(&mut self, cell: &[u8], path: &[[u8; 32]; DEPTH]) {
        if let Some(log) = &mut self.log {
            let d = defaults();
            let mut present = 0u64;
            let mut siblings = Vec::new();
            for (l, s) in path.iter().enumerate() {
                if *s != d[l] {
                    present |= 1 << l;
                    siblings.push(*s);
                }
            }
            log.push(Access {
                cell: cell.to_vec(),
                present,
                siblings,
            });
        }
    }

    /// The pending writes as one batch.
    fn commit(self) -> WriteBatch {
        let d = defaults();
        let mut batch = WriteBatch::with_capacity(self.cells.len() + self.nodes.len());
        for (a, c) in self.cells {
            if c.is_empty() {
                batch.delete(cell_key(a).to_vec());
            } else {
                batch.put(cell_key(a).to_vec(), c);
            }
        }
        for ((l, i), h) in self.nodes {
            if h == d[l] {
                batch.delete(node_key(l, i).to_vec());
            } else {
                batch.put(node_key(l, i).to_vec(), h.to_vec());
            }
        }
        batch
    }
}

impl Memory for ServerMemory<'_> {
    fn read(&mut self, addr: u64) -> Result<Vec<u8>> {
        let cell = self.cell(addr)?;
        if self.log.is_some() {
            let path = self.path(addr)?;
            self.record(&cell, &path);
        }
        Ok(cell)
    }

    fn write(&mut self, addr: u64, cell: Vec<u8>) -> Result<()> {
        let path = self.path(addr)?;
        if self.log.is_some() {
            let old = self.cell(addr)?;
            self.record(&old, &path);
        }
        let mut h = cell_leaf(addr, &cell);
        for (l, s) in path.iter().enumerate() {
            self.nodes.insert((l, addr >> l), h);
            h = parent(addr, l, &h, s);
        }
        self.nodes.insert((DEPTH, 0), h);
        self.cells.insert(addr, cell);
        Ok(())
    }
}

/// The server half of KPR12: the cells of the index and the Merkle tree
/// over them, in the store.
pub struct Kpr12Server {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for Kpr12Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kpr12Server").finish_non_exhaustive()
    }
}

impl Kpr12Server {
    /// A server keeping its index in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// Stores IndexGen's cells and the tree nodes above them.
    pub fn put(&self, reset: bool, cells: Vec<Cell>) -> Result<()> {
        if reset {
            crate::pibas::clear(self.store.as_ref())?;
        }
        let mut leaves = BTreeMap::new();
        let mut batch = WriteBatch::with_capacity(cells.len());
        for (a, c) in cells {
            if a >> DEPTH != 0 || c.is_empty() {
                return Err(Error::Protocol("KPR12 cell out of range or empty".into()));
            }
            leaves.insert(a, cell_leaf(a, &c));
            batch.put(cell_key(a).to_vec(), c);
        }
        let store = self.store.as_ref();
        let nodes = bulk_nodes(&leaves, |l, i| match store.get(&node_key(l, i))? {
            Some(v) => parse_hash(&v),
            None => Ok(defaults()[l]),
        })?;
        for (l, i, h) in nodes {
            batch.put(node_key(l, i).to_vec(), h.to_vec());
        }
        self.store.write(batch)
    }

    /// KPR12 Search alone, without a proof: the identifiers.
    pub fn search(&self, token: &SearchToken) -> Result<Vec<DocId>> {
        let mut m = ServerMemory::new(self.store.as_ref(), false);
        Ok(common::normalise(search_in(&mut m, token)?))
    }

    /// Search with the proof component: the identifiers and the path of
    /// every cell read.
    pub fn prove(&self, token: &SearchToken) -> Result<(Vec<DocId>, Vec<Access>)> {
        let mut m = ServerMemory::new(self.store.as_ref(), true);
        let ids = common::normalise(search_in(&mut m, token)?);
        Ok((ids, m.log.unwrap_or_default()))
    }

    /// Add: applies the token and returns its proof transcript.
    pub fn add(&self, token: &AddToken) -> Result<Vec<Access>> {
        let mut m = ServerMemory::new(self.store.as_ref(), true);
        add_in(&mut m, token)?;
        self.finish(m)
    }

    /// Del: applies the token and returns its proof transcript.
    pub fn del(&self, token: &DelToken) -> Result<Vec<Access>> {
        let mut m = ServerMemory::new(self.store.as_ref(), true);
        del_in(&mut m, token)?;
        self.finish(m)
    }

    fn finish(&self, mut m: ServerMemory<'_>) -> Result<Vec<Access>> {
        let log = m.log.take().unwrap_or_default();
        self.store.write(m.commit())?;
        Ok(log)
    }

    /// The root of the server's tree.
    pub fn root(&self) -> Result<[u8; 32]> {
        match self.store.get(&node_key(DEPTH, 0))? {
            Some(v) => parse_hash(&v),
            None => Ok(empty_root()),
        }
    }
}

impl Handler for Kpr12Server {
    type Request = Request;
    type Response = Response;

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::Put { reset, cells } => {
                self.put(reset, cells)?;
                Ok(Response::Stored)
            }
            Request::Search(t) => {
                let (ids, proof) = self.prove(&t)?;
                Ok(Response::Found { ids, proof })
            }
            Request::Add(t) => Ok(Response::Updated(self.add(&t)?)),
            Request::Del(t) => Ok(Response::Updated(self.del(&t)?)),
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
    fn empty_path_gives_the_empty_root() {
        let a = Access {
            cell: Vec::new(),
            present: 0,
            siblings: Vec::new(),
        };
        assert_eq!(a.root_with(address(TS, 5), &[]).ok(), Some(empty_root()));
        assert!(a.root_with(1 << DEPTH, &[]).is_err());
    }

    #[test]
    fn bulk_and_incremental_trees_agree() {
        let store: Arc<dyn Store> = Arc::new(sesame_store::MemoryStore::new());
        let server = Kpr12Server::new(store.clone());
        let cells = vec![(address(AS, 1), vec![1u8, 2]), (address(TS, 77), vec![3u8])];
        server.put(true, cells.clone()).ok();
        let bulk = server.root().ok();
        let store2: Arc<dyn Store> = Arc::new(sesame_store::MemoryStore::new());
        let mut m = ServerMemory::new(store2.as_ref(), false);
        for (a, c) in cells {
            m.write(a, c).ok();
        }
        store2.write(m.commit()).ok();
        assert_eq!(bulk, Kpr12Server::new(store2).root().ok());
    }
}
