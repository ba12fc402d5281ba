//! Merkle trees over SHA-256 with inclusion proofs.
//!
//! Hashes are domain-separated as in RFC 6962 (Certificate Transparency):
//! a leaf is `SHA-256(0x00 || data)`, an inner node
//! `SHA-256(0x01 || left || right)`, so a leaf can never pass for an inner
//! node. Levels are built bottom-up by pairing; an odd node at the end of a
//! level is promoted unchanged to the next level, which yields exactly the
//! RFC 6962 tree shape. The empty tree's root is `SHA-256("")`.
//!
//! Every SHA-256 evaluation is one [`Primitive::Hash`] call: building a
//! tree of `n` leaves costs `2n - 1`, verifying a proof one per leaf and
//! sibling.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::counter::{self, Primitive};
use crate::error::{Error, Result};

const LEAF_TAG: u8 = 0x00;
const NODE_TAG: u8 = 0x01;

/// The hash of a leaf with contents `data`; one Hash call.
pub fn leaf_hash(data: &[u8]) -> [u8; 32] {
    counter::record(Primitive::Hash, 1);
    Sha256::new()
        .chain_update([LEAF_TAG])
        .chain_update(data)
        .finalize()
        .into()
}

/// The hash of an inner node with children `left` and `right`; one Hash
/// call.
pub fn node_hash(left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
    counter::record(Primitive::Hash, 1);
    Sha256::new()
        .chain_update([NODE_TAG])
        .chain_update(left)
        .chain_update(right)
        .finalize()
        .into()
}

/// A Merkle tree with every level kept, for proofs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MerkleTree {
    /// `levels[0]` holds the leaf hashes, the last level the root.
    levels: Vec<Vec<[u8; 32]>>,
}

impl MerkleTree {
    /// Builds the tree over `leaves` (any number, zero included).
    pub fn build<T: AsRef<[u8]>>(leaves: &[T]) -> Self {
        Self::from_leaf_hashes(leaves.iter().map(|l| leaf_hash(l.as_ref())).collect())
    }

    /// Builds the tree over leaf hashes already computed with
    /// [`leaf_hash`].
    pub fn from_leaf_hashes(hashes: Vec<[u8; 32]>) -> Self {
        let mut levels = vec![hashes];
        while let Some(level) = levels.last().filter(|l| l.len() > 1) {
            let pairs = level.chunks_exact(2);
            let promoted = pairs.remainder().first().copied();
            let mut next: Vec<[u8; 32]> = pairs.map(|p| node_hash(&p[0], &p[1])).collect();
            next.extend(promoted);
            levels.push(next);
        }
        MerkleTree { levels }
    }

    /// Number of leaves.
    pub fn len(&self) -> u64 {
        self.levels.first().map_or(0, |l| l.len() as u64)
    }

    /// Whether the tree has no leaves.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The root; `SHA-256("")` for the empty tree (no Hash call counted
    /// for it: it is a constant).
    pub fn root(&self) -> [u8; 32] {
        match self.levels.last().and_then(|l| l.first()) {
            Some(r) if !self.is_empty() => *r,
            _ => Sha256::digest([]).into(),
        }
    }

    /// The inclusion proof of leaf `index`.
    pub fn proof(&self, index: u64) -> Result<MerkleProof> {
        let n = self.len();
        if index >= n {
            return Err(Error::OutOfDomain {
                value: index,
                size: u128::from(n),
            });
        }
        let mut siblings = Vec::new();
        let mut i = index as usize;
        for level in &self.levels[..self.levels.len() - 1] {
            let sib = i ^ 1;
            if let Some(h) = level.get(sib) {
                siblings.push(*h);
            }
            i /= 2;
        }
        Ok(MerkleProof {
            index,
            leaf_count: n,
            siblings,
        })
    }
}

/// An inclusion proof: the siblings on the path from leaf `index` to the
/// root of a tree of `leaf_count` leaves, bottom-up (levels where the path
/// node is promoted have no sibling).
///
/// As in RFC 6962, the proof binds the leaf to the root but not the tree
/// size: `leaf_count` must come from the same trusted source as the root
/// (a proof for leaf 2 of 3 also verifies as leaf 1 of 2 when the path
/// shapes agree).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MerkleProof {
    /// The leaf position.
    pub index: u64,
    /// Number of leaves in the tree.
    pub leaf_count: u64,
    /// Sibling hashes, bottom-up.
    pub siblings: Vec<[u8; 32]>,
}

impl MerkleProof {
    /// Whether `leaf` is at `self.index` in the tree with root `root`.
    /// Any malformed proof (index out of range, too few or too many
    /// siblings) is simply `false`. The final comparison is constant-time.
    pub fn verify(&self, root: &[u8; 32], leaf: &[u8]) -> bool {
        if self.index >= self.leaf_count {
            return false;
        }
        let mut h = leaf_hash(leaf);
        let mut siblings = self.siblings.iter();
        let (mut i, mut n) = (self.index, self.leaf_count);
        while n > 1 {
            let promoted = i == n - 1 && n % 2 == 1;
            if !promoted {
                let Some(s) = siblings.next() else {
                    return false;
                };
                h = if i % 2 == 0 {
                    node_hash(&h, s)
                } else {
                    node_hash(s, &h)
                };
            }
            i /= 2;
            n = n.div_ceil(2);
        }
        siblings.next().is_none() && bool::from(h.ct_eq(root))
    }
}

/// Whether `proof` shows `leaf` in the tree with root `root`; see
/// [`MerkleProof::verify`].
pub fn verify(root: &[u8; 32], leaf: &[u8], proof: &MerkleProof) -> bool {
    proof.verify(root, leaf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_follow_rfc6962() {
        let leaves: Vec<Vec<u8>> = (0u8..7).map(|i| vec![i]).collect();
        let l: Vec<[u8; 32]> = leaves.iter().map(|d| leaf_hash(d)).collect();
        // n = 3: H(H(a, b), c).
        let t = MerkleTree::build(&leaves[..3]);
        assert_eq!(t.root(), node_hash(&node_hash(&l[0], &l[1]), &l[2]));
        // n = 7: H(H(ab, cd), H(ef, g)).
        let t = MerkleTree::build(&leaves);
        let ab = node_hash(&l[0], &l[1]);
        let cd = node_hash(&l[2], &l[3]);
        let ef = node_hash(&l[4], &l[5]);
        assert_eq!(
            t.root(),
            node_hash(&node_hash(&ab, &cd), &node_hash(&ef, &l[6]))
        );
        assert_eq!(MerkleTree::build(&leaves[..1]).root(), l[0]);
    }

    #[test]
    fn empty_tree() {
        let t = MerkleTree::build::<&[u8]>(&[]);
        assert!(t.is_empty());
        assert_eq!(
            hex::encode(t.root()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(t.proof(0).is_err());
    }

    #[test]
    fn malformed_proofs_are_false() {
        let leaves: Vec<[u8; 1]> = (0u8..5).map(|i| [i]).collect();
        let t = MerkleTree::build(&leaves);
        let root = t.root();
        let p = t.proof(4).expect("in range");
        assert!(p.verify(&root, &[4]));
        assert_eq!(p.siblings.len(), 1);
        let mut q = p.clone();
        q.siblings.push([0; 32]);
        assert!(!q.verify(&root, &[4]));
        let mut q = p.clone();
        q.siblings.clear();
        assert!(!q.verify(&root, &[4]));
        let mut q = p.clone();
        q.leaf_count = 0;
        assert!(!q.verify(&root, &[4]));
        let mut q = p.clone();
        q.leaf_count = u64::MAX;
        q.index = u64::MAX - 1;
        assert!(!q.verify(&root, &[4]));
        assert!(!verify(&root, &[3], &p));
    }
}
