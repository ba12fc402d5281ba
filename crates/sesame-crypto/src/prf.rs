//! Pseudorandom functions.
//!
//! - [`Aes128Prf`]: AES-128 on one 16-byte block, the fast path, with a
//!   pipelined batch API;
//! - [`HmacPrf`]: HMAC-SHA256 on inputs of any length, 32-byte output.
//!
//! Each evaluation counts one [`Primitive::Prf`](crate::counter::Primitive::Prf)
//! call; a batch of `n` blocks counts `n`.

mod aes_prf;
mod hmac_prf;

pub use aes_prf::Aes128Prf;
pub use hmac_prf::HmacPrf;

/// A keyed function whose outputs look random to anyone without the key.
///
/// Sizes are in the types: `Key`, `Input` and `Output` fix the lengths, so
/// a wrong-sized input is a compile error rather than a runtime one.
pub trait Prf {
    /// The key type.
    type Key;
    /// The input domain (`[u8; 16]` or `[u8]`).
    type Input: ?Sized;
    /// The output, a fixed-size array.
    type Output;

    /// Keys the function.
    fn new(key: &Self::Key) -> Self
    where
        Self: Sized;

    /// Evaluates the function on `input`; one counted call.
    fn eval(&self, input: &Self::Input) -> Self::Output;
}
