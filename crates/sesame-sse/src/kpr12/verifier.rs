//! The sparse Merkle tree over every cell, the [`Memory`] the algorithms
//! run over with its proof ([`Access`]), and the client's verifying memory.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use sesame_core::{Error, Result};
use sesame_crypto::merkle::{leaf_hash, node_hash};

use super::DEPTH;

/// The hashes of the empty subtrees: `defaults()[l]` is the root of an
/// empty subtree of height `l`.
pub(super) fn defaults() -> &'static [[u8; 32]; DEPTH + 1] {
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
pub(super) fn cell_leaf(addr: u64, cell: &[u8]) -> [u8; 32] {
    if cell.is_empty() {
        return defaults()[0];
    }
    let mut buf = Vec::with_capacity(8 + cell.len());
    buf.extend_from_slice(&addr.to_be_bytes());
    buf.extend_from_slice(cell);
    leaf_hash(&buf)
}

/// The parent of `h` at level `l` on the path of `addr`, `s` its sibling.
pub(super) fn parent(addr: u64, l: usize, h: &[u8; 32], s: &[u8; 32]) -> [u8; 32] {
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

// ------------------------------------------------------ client

/// Verifies a transcript against a root, moving the root on writes.
pub(super) struct VerifyMemory<'a> {
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
pub(super) fn verify_run<T>(
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
