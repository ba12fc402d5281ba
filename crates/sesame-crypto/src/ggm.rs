//! GGM tree: a puncturable PRF on `depth`-bit inputs.
//!
//! Goldreich, Goldwasser and Micali (1986): from a 16-byte seed `s`, the
//! length-doubling PRG `G(s) = AES_s(0^128) || AES_s(0^127 1)` gives a left
//! child `AES_s(0)` and a right child `AES_s(1)`. A leaf `i` of a tree of
//! depth `d` is reached by following the `d` bits of `i`, most significant
//! first. Using the seed as the AES key makes `G` a PRG under the standard
//! assumption that AES is a PRF (no ideal-cipher model needed); it costs one
//! AES key expansion per node.
//!
//! Puncturing at a set of revoked leaves yields the minimal cover: the
//! maximal subtrees that contain no revoked leaf, each given as
//! `(level, prefix, node key)`. A holder of the cover derives every other
//! leaf and learns nothing about the revoked ones.
//!
//! Several leaves of one tree: [`GgmTree::leaves`] follows their paths
//! together and expands each node on them once, so positions that share a
//! prefix share its expansions (the same keys as [`GgmTree::leaf`] at each
//! position).
//!
//! Counting: every node expansion (one or both children of a node) is one
//! [`Primitive::Prg`] call; `leaf`, `cover`/`puncture` and
//! [`GgmNode::leaf`] are each one [`Primitive::Prf`] call with the
//! expansions nested in them; `leaves` is one Prf call per distinct
//! position, with only the expansions it makes nested in them (fewer than
//! `depth` per leaf where paths share nodes).

use core::fmt;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::aes_many;
use crate::counter::{self, Primitive};
use crate::error::{Error, Result};
use crate::key::Key;

/// Deepest supported tree: leaves are `u64`.
pub const GGM_MAX_DEPTH: u8 = 64;

/// The block a node key encrypts for its child on side `bit`: `0^127 bit`
/// (as [`aes_many`] reads 16 bytes: little-endian, byte 15 on top).
fn side(bit: u8) -> u128 {
    u128::from(bit) << 120
}

/// The child of `seed` on side `bit`, `AES_seed(bit)`; one Prg call (the
/// reference the tests check the side-by-side paths against).
#[cfg(test)]
fn child(seed: &Key<16>, bit: u8) -> Key<16> {
    counter::record(Primitive::Prg, 1);
    let mut key = aes_many::block(seed.as_bytes());
    let mut out = side(bit);
    aes_many::encrypt_each::<1>(&[key], core::slice::from_mut(&mut out));
    let child = Key::from_bytes(aes_many::bytes(out));
    key.zeroize();
    out.zeroize();
    child
}

/// Both children of `seed` with one key schedule; one Prg call.
fn children(seed: &Key<16>) -> (Key<16>, Key<16>) {
    counter::record(Primitive::Prg, 1);
    let mut key = aes_many::block(seed.as_bytes());
    let mut out = [side(0), side(1)];
    aes_many::encrypt_each::<2>(&[key], &mut out);
    let children = (
        Key::from_bytes(aes_many::bytes(out[0])),
        Key::from_bytes(aes_many::bytes(out[1])),
    );
    key.zeroize();
    out.zeroize();
    children
}

/// Both children of every node key of `seeds`, side by side
/// ([`aes_many`]): `out[2i]` and `out[2i + 1]` are the left and right
/// children of `seeds[i]`. One Prg call per seed, as [`children`].
fn expand_all(seeds: &[u128], out: &mut Vec<u128>) {
    counter::record(Primitive::Prg, seeds.len() as u64);
    out.clear();
    out.resize(2 * seeds.len(), 0);
    for pair in out.chunks_exact_mut(2) {
        pair[1] = side(1);
    }
    aes_many::encrypt_each::<2>(seeds, out);
}

/// Number of leaves `2^depth` (as `u128`, `depth <= 64`).
fn leaf_count(depth: u8) -> u128 {
    1u128 << depth
}

fn check_leaf(depth: u8, leaf: u64) -> Result<()> {
    if u128::from(leaf) >= leaf_count(depth) {
        return Err(Error::OutOfDomain {
            value: leaf,
            size: leaf_count(depth),
        });
    }
    Ok(())
}

fn check_depth(depth: u8) -> Result<()> {
    if depth > GGM_MAX_DEPTH {
        return Err(Error::InvalidParameter {
            what: "GGM depth",
            reason: "must be at most 64",
        });
    }
    Ok(())
}

/// A GGM tree of depth `d` over a secret root seed.
pub struct GgmTree {
    depth: u8,
    root: Key<16>,
}

impl GgmTree {
    /// The tree of depth `depth` (`<= 64`, leaves `0..2^depth`) under `root`.
    pub fn new(root: Key<16>, depth: u8) -> Result<Self> {
        check_depth(depth)?;
        Ok(GgmTree { depth, root })
    }

    /// A tree with a fresh random root.
    pub fn generate<R: CryptoRngCore + ?Sized>(rng: &mut R, depth: u8) -> Result<Self> {
        Self::new(Key::generate(rng), depth)
    }

    /// The depth.
    pub fn depth(&self) -> u8 {
        self.depth
    }

    /// The root as a node covering every leaf (a copy of the secret).
    pub fn root(&self) -> GgmNode {
        GgmNode {
            depth: self.depth,
            level: 0,
            prefix: 0,
            key: self.root.clone_secret(),
        }
    }

    /// The value of leaf `i`; one Prf call with `depth` nested Prg calls.
    pub fn leaf(&self, i: u64) -> Result<Key<16>> {
        check_leaf(self.depth, i)?;
        let _prf = counter::enter(Primitive::Prf);
        Ok(descend(&self.root, self.depth, 0, i))
    }

    /// The values of the leaves `positions`, in the order given (positions
    /// may repeat and come in any order; one out of range is an error):
    /// the same keys as [`leaf`](Self::leaf) at each position, computed in
    /// one descent that expands every node on the paths once, however many
    /// of the positions lie below it. `n` random positions share about
    /// `log2 n` levels, and positions of one call share the tree's upper
    /// levels. Counts one Prf call per distinct position, with one nested
    /// Prg call per node expanded.
    pub fn leaves(&self, positions: &[u64]) -> Result<Vec<Key<16>>> {
        let mut sorted = positions.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let Some(&last) = sorted.last() else {
            return Ok(Vec::new());
        };
        check_leaf(self.depth, last)?;
        counter::record(Primitive::Prf, sorted.len() as u64 - 1);
        let _prf = counter::enter(Primitive::Prf);
        let keys = descend_many(&self.root, self.depth, &sorted);
        Ok(positions
            .iter()
            .map(|p| {
                // Every position is in `sorted`.
                let i = sorted.partition_point(|s| s < p);
                keys[i].clone_secret()
            })
            .collect())
    }

    /// Leaf `positions[i]` of the tree of depth `depth` under `roots[i]`,
    /// for every `i`: the keys of
    /// `GgmTree::new(roots[i], depth)?.leaf(positions[i])`, with the
    /// paths followed side by side, one level at a time, every path's
    /// node of a level expanded together with the others' (independent
    /// keys: [`leaves`](Self::leaves) shares the nodes of one tree's
    /// paths, this shares the work of several trees' levels). Fails if
    /// the lengths differ, `depth > 64` or a position is out of range.
    /// One Prf call per path, with `depth` nested Prg calls each.
    pub fn leaves_under(roots: &[&Key<16>], depth: u8, positions: &[u64]) -> Result<Vec<Key<16>>> {
        check_depth(depth)?;
        if roots.len() != positions.len() {
            return Err(Error::InvalidLength {
                what: "GGM positions",
                expected: roots.len(),
                actual: positions.len(),
            });
        }
        for &p in positions {
            check_leaf(depth, p)?;
        }
        let Some(more) = positions.len().checked_sub(1) else {
            return Ok(Vec::new());
        };
        counter::record(Primitive::Prf, more as u64);
        let _prf = counter::enter(Primitive::Prf);
        let mut keys: Vec<u128> = roots
            .iter()
            .map(|k| aes_many::block(k.as_bytes()))
            .collect();
        let mut blocks = vec![0u128; keys.len()];
        for level in 0..depth {
            counter::record(Primitive::Prg, keys.len() as u64);
            // level < depth <= 64, so the shift is at most 63.
            let shift = depth - 1 - level;
            for (b, &p) in blocks.iter_mut().zip(positions) {
                *b = side(((p >> shift) & 1) as u8);
            }
            aes_many::encrypt_each::<1>(&keys, &mut blocks);
            core::mem::swap(&mut keys, &mut blocks);
        }
        let out = keys
            .iter()
            .map(|&k| Key::from_bytes(aes_many::bytes(k)))
            .collect();
        keys.zeroize();
        blocks.zeroize();
        Ok(out)
    }

    /// The minimal cover of the leaves not in `revoked`: the maximal
    /// subtrees free of revoked leaves, left to right. Revoked indices may
    /// repeat and come in any order; one out of range is an error. One Prf
    /// call, with one nested Prg call per node expanded.
    pub fn cover(&self, revoked: &[u64]) -> Result<Vec<GgmNode>> {
        let mut sorted = revoked.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if let Some(&last) = sorted.last() {
            check_leaf(self.depth, last)?;
        }
        let _prf = counter::enter(Primitive::Prf);
        let mut out = Vec::new();
        cover_rec(self.root(), &sorted, &mut out);
        Ok(out)
    }

    /// The minimal cover of the first `count` leaves, `0..count`, left to
    /// right: one node per bit set in `count`, at most `depth` nodes (a
    /// holder derives every leaf below `count` and none from `count` on:
    /// the range-constrained key of Diana). Fails if `count > 2^depth`.
    /// One Prf call, with one nested Prg call per level descended.
    pub fn prefix_cover(&self, count: u64) -> Result<Vec<GgmNode>> {
        if u128::from(count) > leaf_count(self.depth) {
            return Err(Error::OutOfDomain {
                value: count,
                size: leaf_count(self.depth),
            });
        }
        let _prf = counter::enter(Primitive::Prf);
        let mut out = Vec::new();
        let mut start = 0u128;
        for below in (0..=self.depth).rev() {
            let span = 1u128 << below;
            if u128::from(count) & span == 0 {
                continue;
            }
            let level = self.depth - below;
            // start < count <= 2^depth and is a multiple of 2^below, so
            // the prefix is below 2^level <= 2^64.
            let prefix = (start >> below) as u64;
            out.push(GgmNode {
                depth: self.depth,
                level,
                prefix,
                key: descend(&self.root, level, 0, prefix),
            });
            start += span;
        }
        Ok(out)
    }

    /// The key punctured at `revoked`: its [`cover`](Self::cover).
    pub fn puncture(&self, revoked: &[u64]) -> Result<PuncturedKey> {
        Ok(PuncturedKey {
            depth: self.depth,
            nodes: self.cover(revoked)?,
        })
    }
}

/// The root is a [`Key`], which wipes itself.
impl ZeroizeOnDrop for GgmTree {}

impl fmt::Debug for GgmTree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GgmTree")
            .field("depth", &self.depth)
            .field("root", &self.root)
            .finish()
    }
}

/// Keys of the leaves `sorted` (ascending, distinct, below `2^depth`)
/// under the root `root`, in that order: the paths are followed one level
/// at a time, and each node on them is expanded once, all the nodes of a
/// level side by side ([`expand_all`]).
fn descend_many(root: &Key<16>, depth: u8, sorted: &[u64]) -> Vec<Key<16>> {
    // The node keys of the current level on the paths, left to right, and
    // their prefixes (the paths' first `level` bits).
    let mut keys = vec![aes_many::block(root.as_bytes())];
    let mut prefixes = vec![0u64];
    let mut next_keys = Vec::with_capacity(sorted.len());
    let mut next_prefixes = Vec::with_capacity(sorted.len());
    let mut both = Vec::with_capacity(2 * sorted.len());
    for level in 0..depth {
        // level < depth <= 64, so the shift is at most 63.
        let shift = depth - 1 - level;
        let mut wanted = sorted.iter().map(|&i| i >> shift).peekable();
        expand_all(&keys, &mut both);
        next_keys.clear();
        next_prefixes.clear();
        for (pair, &prefix) in both.chunks_exact(2).zip(&prefixes) {
            // prefix < 2^level <= 2^63, so the shift does not overflow.
            let left = prefix << 1;
            for (side, child) in [left, left | 1].into_iter().zip(pair) {
                let mut want = false;
                while wanted.next_if_eq(&side).is_some() {
                    want = true;
                }
                // Every node kept is on a path.
                if want {
                    next_keys.push(*child);
                    next_prefixes.push(side);
                }
            }
        }
        core::mem::swap(&mut keys, &mut next_keys);
        core::mem::swap(&mut prefixes, &mut next_prefixes);
    }
    let out = keys
        .iter()
        .map(|&k| Key::from_bytes(aes_many::bytes(k)))
        .collect();
    for scratch in [&mut keys, &mut next_keys, &mut both] {
        scratch.zeroize();
    }
    out
}

/// Key of leaf `i` below the node `(level, key)`; uncounted walk with one
/// Prg call per level.
fn descend(key: &Key<16>, depth: u8, level: u8, i: u64) -> Key<16> {
    let mut cur = aes_many::block(key.as_bytes());
    for l in level..depth {
        counter::record(Primitive::Prg, 1);
        // l < depth <= 64, so the shift is at most 63.
        let bit = ((i >> (depth - 1 - l)) & 1) as u8;
        let mut next = side(bit);
        aes_many::encrypt_each::<1>(&[cur], core::slice::from_mut(&mut next));
        cur = next;
        next.zeroize();
    }
    let out = Key::from_bytes(aes_many::bytes(cur));
    cur.zeroize();
    out
}

/// Appends to `out` the minimal cover of the leaves below `node` that are
/// not in `revoked` (sorted, distinct, all below `node`).
fn cover_rec(node: GgmNode, revoked: &[u64], out: &mut Vec<GgmNode>) {
    if revoked.is_empty() {
        out.push(node);
        return;
    }
    let below = node.depth - node.level;
    if revoked.len() as u128 == 1u128 << below {
        return;
    }
    // Not all leaves revoked, so the node has children: level < depth.
    let shift = below - 1;
    let split = revoked.partition_point(|&r| (r >> shift) & 1 == 0);
    let (left, right) = children(&node.key);
    let prefix = node.prefix << 1;
    let level = node.level + 1;
    let depth = node.depth;
    drop(node);
    cover_rec(
        GgmNode {
            depth,
            level,
            prefix,
            key: left,
        },
        &revoked[..split],
        out,
    );
    cover_rec(
        GgmNode {
            depth,
            level,
            prefix: prefix | 1,
            key: right,
        },
        &revoked[split..],
        out,
    );
}

/// A subtree of a GGM tree: the node at `level` whose path from the root is
/// the `level` bits of `prefix`, with its secret key.
///
/// Serialisable, key included: a serialised node is as secret as the
/// leaves below it. Deserialisation checks `level <= depth <= 64` and
/// `prefix < 2^level`.
#[derive(Deserialize, PartialEq, Eq)]
#[serde(try_from = "NodeRepr")]
pub struct GgmNode {
    depth: u8,
    level: u8,
    prefix: u64,
    key: Key<16>,
}

#[derive(Serialize, Deserialize, Zeroize, ZeroizeOnDrop)]
struct NodeRepr {
    depth: u8,
    level: u8,
    prefix: u64,
    key: [u8; 16],
}

impl Serialize for GgmNode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        // The copy of the key in the representation is wiped on drop.
        NodeRepr {
            depth: self.depth,
            level: self.level,
            prefix: self.prefix,
            key: *self.key.as_bytes(),
        }
        .serialize(s)
    }
}

impl TryFrom<NodeRepr> for GgmNode {
    type Error = Error;

    fn try_from(r: NodeRepr) -> Result<Self> {
        check_depth(r.depth)?;
        if r.level > r.depth {
            return Err(Error::InvalidParameter {
                what: "GGM node level",
                reason: "must be at most the depth",
            });
        }
        if u128::from(r.prefix) >= leaf_count(r.level) {
            return Err(Error::InvalidParameter {
                what: "GGM node prefix",
                reason: "must be below 2^level",
            });
        }
        Ok(GgmNode {
            depth: r.depth,
            level: r.level,
            prefix: r.prefix,
            key: Key::from_bytes(r.key),
        })
    }
}

impl GgmNode {
    /// Depth of the tree the node belongs to.
    pub fn depth(&self) -> u8 {
        self.depth
    }

    /// Distance from the root (0 for the root, `depth` for a leaf).
    pub fn level(&self) -> u8 {
        self.level
    }

    /// The path from the root, `level` bits.
    pub fn prefix(&self) -> u64 {
        self.prefix
    }

    /// The node key (secret).
    pub fn key(&self) -> &Key<16> {
        &self.key
    }

    /// An explicit copy of the node and its secret.
    pub fn clone_secret(&self) -> Self {
        GgmNode {
            depth: self.depth,
            level: self.level,
            prefix: self.prefix,
            key: self.key.clone_secret(),
        }
    }

    /// The leaves below this node, `first..=last`.
    pub fn leaves(&self) -> (u64, u64) {
        let below = u32::from(self.depth - self.level);
        // prefix < 2^level, so prefix << below < 2^depth <= 2^64.
        let first = self.prefix.checked_shl(below).unwrap_or(0);
        let span = ((1u128 << below) - 1) as u64;
        (first, first | span)
    }

    /// Whether leaf `i` is below this node.
    pub fn covers(&self, i: u64) -> bool {
        let (first, last) = self.leaves();
        (first..=last).contains(&i)
    }

    /// The values of leaves `first..=last` below this node, in ascending
    /// order, in one descent that expands each node on their paths once
    /// (about two Prg calls a leaf for a long run). Fails if `first >
    /// last` or the node does not cover both. One Prf call per leaf.
    pub fn leaves_in(&self, first: u64, last: u64) -> Result<Vec<Key<16>>> {
        if !self.covers(first) {
            return Err(Error::LeafNotCovered { leaf: first });
        }
        if !self.covers(last) || last < first {
            return Err(Error::LeafNotCovered { leaf: last });
        }
        let (start, _) = self.leaves();
        let relative: Vec<u64> = (first - start..=last - start).collect();
        counter::record(Primitive::Prf, relative.len() as u64 - 1);
        let _prf = counter::enter(Primitive::Prf);
        Ok(descend_many(&self.key, self.depth - self.level, &relative))
    }

    /// The value of leaf `i` derived from this node; fails if the node does
    /// not cover `i`. One Prf call with `depth - level` nested Prg calls.
    pub fn leaf(&self, i: u64) -> Result<Key<16>> {
        if !self.covers(i) {
            return Err(Error::LeafNotCovered { leaf: i });
        }
        let _prf = counter::enter(Primitive::Prf);
        Ok(descend(&self.key, self.depth, self.level, i))
    }
}

/// The node key is a [`Key`], which wipes itself.
impl ZeroizeOnDrop for GgmNode {}

impl fmt::Debug for GgmNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GgmNode")
            .field("depth", &self.depth)
            .field("level", &self.level)
            .field("prefix", &self.prefix)
            .field("key", &self.key)
            .finish()
    }
}

/// A GGM key punctured at a set of leaves: the minimal cover of the others.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct PuncturedKey {
    depth: u8,
    nodes: Vec<GgmNode>,
}

impl PuncturedKey {
    /// The cover nodes, left to right.
    pub fn nodes(&self) -> &[GgmNode] {
        &self.nodes
    }

    /// The value of leaf `i`, or [`Error::LeafNotCovered`] if `i` was
    /// punctured (or is out of range). One Prf call.
    pub fn leaf(&self, i: u64) -> Result<Key<16>> {
        let idx = self.nodes.partition_point(|n| n.leaves().1 < i);
        match self.nodes.get(idx) {
            Some(n) if n.depth == self.depth => n.leaf(i),
            _ => Err(Error::LeafNotCovered { leaf: i }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(depth: u8) -> GgmTree {
        GgmTree::new(Key::from_bytes([3; 16]), depth).expect("depth <= 64")
    }

    #[test]
    fn a_prefix_cover_gives_the_leaves_below_its_count_and_no_other() {
        let t = tree(6);
        for count in [0u64, 1, 2, 5, 37, 63, 64] {
            let cover = t.prefix_cover(count).expect("count <= 64");
            assert_eq!(cover.len(), count.count_ones() as usize, "count {count}");
            let mut next = 0;
            for node in &cover {
                let (first, last) = node.leaves();
                assert_eq!(first, next, "count {count}: nodes left to right, no gap");
                let keys = node.leaves_in(first, last).expect("its own leaves");
                for (i, k) in (first..=last).zip(&keys) {
                    assert_eq!(*k, t.leaf(i).expect("in range"), "leaf {i}");
                }
                next = last + 1;
            }
            assert_eq!(next, count, "the cover ends at its count");
        }
        assert!(t.prefix_cover(65).is_err());
        let cover = t.prefix_cover(37).expect("in range");
        let last = cover.last().expect("37 has bits");
        assert!(
            last.leaves_in(36, 37).is_err(),
            "leaf 37 is not below the cover"
        );
        assert!(last.leaves_in(36, 35).is_err());
        let t32 = tree(32);
        let top = t32.prefix_cover(u64::from(u32::MAX)).expect("in range");
        assert_eq!(top.len(), 32);
        let tail = top.last().expect("bits").leaves().1;
        assert_eq!(tail, u64::from(u32::MAX) - 1);
        assert_eq!(
            top.last()
                .expect("bits")
                .leaves_in(tail, tail)
                .expect("covered")[0],
            t32.leaf(tail).expect("in range")
        );
    }

    #[test]
    fn depth_and_range_are_checked() {
        assert!(GgmTree::new(Key::from_bytes([0; 16]), 65).is_err());
        let t = tree(3);
        assert!(t.leaf(7).is_ok());
        assert!(t.leaf(8).is_err());
        assert!(t.cover(&[8]).is_err());
        let t64 = tree(64);
        assert!(t64.leaf(u64::MAX).is_ok());
        assert_eq!(t64.root().leaves(), (0, u64::MAX));
        let t0 = tree(0);
        assert_eq!(t0.leaf(0).expect("one leaf"), Key::from_bytes([3; 16]));
        assert!(t0.cover(&[0]).expect("in range").is_empty());
    }

    #[test]
    fn leaves_follow_the_bits() {
        let t = tree(2);
        let root = Key::from_bytes([3; 16]);
        let expected = child(&child(&root, 1), 0);
        assert_eq!(t.leaf(2).expect("in range"), expected);
        let (l, r) = children(&root);
        assert_eq!(l, child(&root, 0));
        assert_eq!(r, child(&root, 1));
    }

    #[test]
    fn cover_of_one_revoked_leaf_is_the_copath() {
        let t = tree(4);
        let cover = t.cover(&[5]).expect("in range");
        assert_eq!(cover.len(), 4);
        for i in 0..16 {
            let n = cover.iter().filter(|n| n.covers(i)).count();
            assert_eq!(n, usize::from(i != 5));
        }
        let p = t.puncture(&[5]).expect("in range");
        assert_eq!(p.leaf(5), Err(Error::LeafNotCovered { leaf: 5 }));
        assert_eq!(p.leaf(6).expect("covered"), t.leaf(6).expect("in range"));
        assert!(p.leaf(16).is_err());
    }

    #[test]
    fn serde_round_trip_and_validation() {
        let t = tree(5);
        let cover = t.cover(&[0, 31]).expect("in range");
        let json = serde_json::to_string(&cover).expect("serialises");
        let back: Vec<GgmNode> = serde_json::from_str(&json).expect("round trip");
        assert_eq!(back, cover);
        let bad = r#"{"depth":3,"level":2,"prefix":4,"key":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}"#;
        assert!(serde_json::from_str::<GgmNode>(bad).is_err());
        let bad = r#"{"depth":3,"level":4,"prefix":0,"key":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}"#;
        assert!(serde_json::from_str::<GgmNode>(bad).is_err());
        let bad = r#"{"depth":65,"level":0,"prefix":0,"key":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}"#;
        assert!(serde_json::from_str::<GgmNode>(bad).is_err());
    }

    #[test]
    fn leaves_share_the_expansions_of_common_nodes() {
        let t = tree(2);
        let (keys, counts) = counter::measure(|| t.leaves(&[1, 0, 1]).expect("in range"));
        let expected = [1u64, 0, 1].map(|i| t.leaf(i).expect("in range"));
        assert_eq!(keys, expected);
        // The root's left child (one Prg), then both of its children with
        // one key schedule (one Prg), against 2 x 2 for two descents.
        assert_eq!(counts.total(Primitive::Prg), 2);
        assert_eq!(counts.total(Primitive::Prf), 2);
        assert_eq!(counts.pure(Primitive::Prf), 2);
        assert_eq!(counts.pure(Primitive::Prg), 0);
        assert!(t.leaves(&[]).expect("nothing to check").is_empty());
        assert!(t.leaves(&[0, 4]).is_err());
        let t0 = tree(0);
        assert_eq!(
            t0.leaves(&[0, 0]).expect("in range"),
            [Key::from_bytes([3; 16]), Key::from_bytes([3; 16])]
        );
    }

    #[test]
    fn leaves_under_equal_a_tree_each() {
        let roots: Vec<Key<16>> = (0..21u8).map(|i| Key::from_bytes([i; 16])).collect();
        let refs: Vec<&Key<16>> = roots.iter().collect();
        for depth in [0u8, 1, 10, 20, 64] {
            let mask = if depth == 64 {
                u64::MAX
            } else {
                (1u64 << depth) - 1
            };
            let positions: Vec<u64> = (0..21u64)
                .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) & mask)
                .collect();
            let (keys, counts) = counter::measure(|| {
                GgmTree::leaves_under(&refs, depth, &positions).expect("in range")
            });
            for ((root, &p), k) in roots.iter().zip(&positions).zip(&keys) {
                let tree = GgmTree::new(root.clone_secret(), depth).expect("depth <= 64");
                assert_eq!(k, &tree.leaf(p).expect("in range"));
            }
            assert_eq!(counts.total(Primitive::Prf), 21);
            assert_eq!(counts.pure(Primitive::Prf), 21);
            assert_eq!(counts.total(Primitive::Prg), 21 * u64::from(depth));
        }
        assert!(GgmTree::leaves_under(&[], 3, &[])
            .expect("nothing")
            .is_empty());
        assert!(GgmTree::leaves_under(&refs[..1], 3, &[8]).is_err());
        assert!(GgmTree::leaves_under(&refs[..2], 3, &[1]).is_err());
        assert!(GgmTree::leaves_under(&refs[..1], 65, &[1]).is_err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// `leaves` gives exactly the keys of `leaf`, position by position,
        /// for any depth (1..=64, with 20 and 64 drawn more often), root,
        /// order and repetition of the positions.
        #[test]
        fn leaves_equal_leaf_by_leaf(
            depth in proptest::prop_oneof![1u8..=64, proptest::strategy::Just(20u8), proptest::strategy::Just(64u8)],
            root in proptest::prelude::any::<[u8; 16]>(),
            raw in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..40),
            repeats in proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 0..10),
            near in proptest::prelude::any::<bool>(),
        ) {
            let t = GgmTree::new(Key::from_bytes(root), depth).expect("depth <= 64");
            let mask = if depth == 64 { u64::MAX } else { (1u64 << depth) - 1 };
            // Positions spread over the tree, or close together (sharing
            // most of their paths).
            let mut positions: Vec<u64> = raw
                .iter()
                .map(|&r| if near { (raw.first().copied().unwrap_or(0) ^ (r & 0xff)) & mask } else { r & mask })
                .collect();
            if !positions.is_empty() {
                for r in &repeats {
                    positions.push(positions[r.index(positions.len())]);
                }
            }
            let many = t.leaves(&positions).expect("in range");
            proptest::prop_assert_eq!(many.len(), positions.len());
            for (p, k) in positions.iter().zip(&many) {
                proptest::prop_assert_eq!(k, &t.leaf(*p).expect("in range"));
            }
            let mut distinct = positions.clone();
            distinct.sort_unstable();
            distinct.dedup();
            let (_, counts) = counter::measure(|| t.leaves(&positions).expect("in range"));
            proptest::prop_assert_eq!(counts.total(Primitive::Prf), distinct.len() as u64);
            proptest::prop_assert!(
                counts.total(Primitive::Prg) <= distinct.len() as u64 * u64::from(depth)
            );
        }
    }

    #[test]
    fn debug_is_redacted() {
        let t = tree(2);
        assert!(format!("{t:?}").contains("[redacted]"));
        assert!(format!("{:?}", t.root()).contains("[redacted]"));
    }
}
