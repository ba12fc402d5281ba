//! Small-domain pseudorandom permutations.
//!
//! - [`KnuthPrp`]: an explicit random permutation of `0..n` (`n <= 2^16`),
//!   shuffled from the key with the PRG; both directions are table look-ups.
//! - [`FeistelPrp`]: an alternating Feistel network over `b`-bit strings with
//!   AES-128 round functions and cycle walking onto `0..n`, for any
//!   `n <= 2^64`.
//! - [`Aes256Block`]: AES-256 on one 16-byte block, both directions.
//!
//! Each `permute` or `invert` is one [`Primitive::Prp`](crate::counter::Primitive::Prp)
//! call. The Feistel network's AES calls are nested Prf calls.

mod block;
mod feistel;
mod knuth;

pub use block::Aes256Block;
pub use feistel::{FeistelPrp, FEISTEL_ROUNDS};
pub use knuth::{KnuthPrp, KNUTH_MAX_DOMAIN};

use crate::error::Result;

/// A keyed permutation of a finite domain `0..domain_size()`.
pub trait Prp {
    /// The number of points permuted (up to `2^64`, hence `u128`).
    fn domain_size(&self) -> u128;

    /// The image of `x`; fails if `x` is outside the domain.
    fn permute(&self, x: u64) -> Result<u64>;

    /// The preimage of `y`; fails if `y` is outside the domain.
    fn invert(&self, y: u64) -> Result<u64>;
}
