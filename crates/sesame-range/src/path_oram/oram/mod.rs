//! Path ORAM: Stefanov, van Dijk, Shi, Fletcher, Ren, Yu, Devadas, "Path
//! ORAM: An Extremely Simple Oblivious RAM Protocol", CCS 2013.
//!
//! The server holds a binary tree of `height + 1` levels (2^height leaves,
//! 2^(height+1) - 1 buckets, numbered in heap order: the root is 0, the
//! children of `i` are `2i + 1` and `2i + 2`). Each bucket holds
//! [`Z`] = 4 block slots and is stored as one AES-256-GCM-SIV ciphertext
//! (fresh random nonce on every write) of exactly
//! [`PathOram::bucket_len`] bytes: empty slots are dummy blocks, so every
//! bucket has the same size.
//!
//! The client keeps the key, the position map (the leaf of every block,
//! one `u32` each) and the stash. An access to block `a`:
//! 1. reads the path from the root to the leaf `position[a]` (one round:
//!    the server returns the path's `height + 1` buckets) and moves its real
//!    blocks into the stash;
//! 2. remaps `a` to a fresh uniformly random leaf, reads or updates `a` in
//!    the stash;
//! 3. writes the same path back (one round), filling buckets greedily from
//!    the leaf up with the stash blocks whose own path crosses each bucket.
//!
//! The server sees only the leaf of each access (uniformly random and
//! independent of the address) and bucket ciphertexts of a fixed size.
//!
//! Freshness (the paper's integrity extension, §6 of the CCS version: a
//! Merkle tree laid on the ORAM tree): each bucket's plaintext ends with
//! the SHA-256 digests of its two children's current ciphertexts
//! ([`NEVER_WRITTEN`] for a child the server does not hold), and the client
//! keeps the digest of the root's ciphertext. A path is checked from the
//! root down before anything is used: a bucket whose digest is not the one
//! its parent (or the client, for the root) recorded is refused with
//! [`Error::Crypto`], so a replayed, rolled-back, swapped or dropped bucket
//! never reaches the stash. A write-back seals the path from the leaf up,
//! each parent taking its path child's new digest and its other child's
//! digest from the checked read.
//!
//! A write-back that fails stays pending and is sent again before the next
//! access; [`PathOram::grow`] doubles the capacity without moving a block;
//! [`PathOram::initialize`] bulk-loads an empty ORAM. The client talks to
//! the server through [`PathIo`]: a [`ChannelIo`] (two rounds per access)
//! or the [`PathOramServer`] itself in process. See
//! `docs/schemes/path_oram.md`.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{channel, Channel, Error, Handler, IoCounts, Result, Store, WriteBatch};
use sesame_crypto::aead::Aes256GcmSiv;
use sesame_crypto::key::Key;

/// Blocks per bucket (the paper's Z).
pub const Z: usize = 4;

/// Largest tree height (2^30 leaves).
pub const MAX_HEIGHT: u32 = 30;

/// Largest number of blocks the stash may hold after a write-back. The
/// paper proves `Pr[stash > R]` <= 14 * 0.6^R for Z = 5 and measures, for
/// Z = 4, an overflow probability falling exponentially in R (about 2^-80
/// at R = 89, extrapolated); an access that leaves more than this many
/// blocks in the stash fails with [`Error::Protocol`] instead of letting
/// the stash grow. The access itself completed: no block is lost.
pub const STASH_LIMIT: usize = 150;

/// Bytes of a slot's header: the block address (8) and data length (4).
pub const SLOT_HEADER: usize = 12;

/// Address marking an empty (dummy) slot.
const DUMMY: u64 = u64::MAX;

/// Bytes of a bucket's child digests (two SHA-256 digests), after its
/// slots.
pub const CHILD_DIGESTS: usize = 64;

/// The digest recorded for a bucket the server does not hold (never
/// written). A SHA-256 output equal to it is never expected.
pub const NEVER_WRITTEN: [u8; 32] = [0; 32];

/// The digest of a bucket ciphertext, as its parent records it.
fn digest(ct: &[u8]) -> [u8; 32] {
    sesame_crypto::hash::sha256(ct)
}

/// Associated data prefix of bucket ciphertexts.
const AAD_PREFIX: &[u8; 16] = b"sesame-path-oram";

/// A bucket ciphertext on the wire: encoded like a `Vec<u8>` (length, then
/// the bytes) but through serde's byte-string methods, which postcard
/// copies in one piece instead of byte by byte.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bytes(pub Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        sesame_core::wire::bytes::serialize(&self.0, s)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Bytes, D::Error> {
        sesame_core::wire::bytes::deserialize(d).map(Bytes)
    }
}

/// A Path ORAM request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Returns the buckets on the path from the root to `leaf`.
    ReadPath {
        /// Tree height (public parameter).
        height: u8,
        /// The leaf, in `0..2^height`, big-endian (fixed width, so every
        /// request of a tree has the same size).
        leaf: [u8; 4],
    },
    /// Replaces the buckets on the path from the root to `leaf`.
    WritePath {
        /// Tree height (public parameter).
        height: u8,
        /// The leaf, in `0..2^height`, big-endian.
        leaf: [u8; 4],
        /// `height + 1` bucket ciphertexts, root first.
        buckets: Vec<Bytes>,
    },
    /// Writes consecutive buckets `first, first + 1, ...` (the bulk
    /// initialisation of [`PathOram::initialize`]).
    PutBuckets {
        /// Tree height (public parameter).
        height: u8,
        /// Heap index of the first bucket.
        first: u64,
        /// Bucket ciphertexts.
        buckets: Vec<Bytes>,
    },
}

/// A Path ORAM response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The path's buckets, root first; `None` for a bucket never written
    /// (an empty bucket: the tree is initialised lazily).
    Path(Vec<Option<Bytes>>),
    /// The path was written.
    Written,
}

/// Heap index of the bucket at `level` on the path to `leaf`.
pub fn bucket_index(height: u32, leaf: u32, level: u32) -> u64 {
    ((1u64 << level) - 1) + (u64::from(leaf) >> (height - level))
}

fn check_path(height: u8, leaf: u32) -> Result<u32> {
    let h = u32::from(height);
    if h > MAX_HEIGHT || u64::from(leaf) >> h != 0 {
        return Err(Error::InvalidArgument(format!(
            "leaf {leaf} is not in a tree of height {height}"
        )));
    }
    Ok(h)
}

/// Store key of bucket `index`.
fn bucket_key(index: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = b'b';
    k[1..].copy_from_slice(&index.to_be_bytes());
    k
}

mod client;
mod server;
#[cfg(test)]
mod tests;

pub use client::{Op, PathOram};
pub use server::{ChannelIo, PathIo, PathOramServer};
