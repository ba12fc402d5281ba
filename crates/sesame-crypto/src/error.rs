//! The error type of this crate.

/// Errors returned by the primitives of `sesame-crypto`.
///
/// Each variant is a cause the caller can act on. A failed decryption is
/// deliberately opaque ([`Error::Decryption`]): it says that the input was
/// rejected, not which of key, nonce, associated data or ciphertext was
/// wrong. Merkle proof verification returns `false` rather than an error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A byte string (key, seed, nonce) has the wrong length.
    #[error("{what}: expected {expected} bytes, got {actual}")]
    InvalidLength {
        /// What was being read.
        what: &'static str,
        /// The length required.
        expected: usize,
        /// The length given.
        actual: usize,
    },
    /// A parameter (domain size, depth, false-positive rate, ...) is outside
    /// the range the primitive supports.
    #[error("invalid {what}: {reason}")]
    InvalidParameter {
        /// The parameter.
        what: &'static str,
        /// The range it must lie in.
        reason: &'static str,
    },
    /// An input lies outside the domain of the primitive (a PRP point
    /// `>= n`, a leaf index `>= 2^depth`, a proof index `>= len`).
    #[error("{value} is outside the domain of size {size}")]
    OutOfDomain {
        /// The input.
        value: u64,
        /// The size of the domain (up to `2^64`, hence `u128`).
        size: u128,
    },
    /// A GGM leaf is not below the node (or punctured key) asked to derive it.
    #[error("leaf {leaf} is not covered")]
    LeafNotCovered {
        /// The leaf index.
        leaf: u64,
    },
    /// Two objects that must share parameters do not (Bloom filter union).
    #[error("incompatible parameters: {what}")]
    Incompatible {
        /// Which parameters differ.
        what: &'static str,
    },
    /// A message exceeds what the primitive can process.
    #[error("{what} too long: at most {max} bytes")]
    TooLong {
        /// What was too long.
        what: &'static str,
        /// The largest accepted length in bytes.
        max: u64,
    },
    /// Decryption or authentication failed. Opaque on purpose.
    #[error("decryption failed")]
    Decryption,
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;
