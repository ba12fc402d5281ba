//! The error type of `sesame-core`.

use thiserror::Error;

/// Errors of the shared layer: wire decoding, channels and stores.
///
/// Every variant is a cause a caller can act on. Decryption and
/// verification failures stay opaque ([`Error::Crypto`]).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// A message from a peer could not be decoded: it is malformed,
    /// truncated, too large or of another wire version.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// A message could not be encoded.
    #[error("cannot encode message: {0}")]
    Encode(String),
    /// The peer answered with a message that does not fit the protocol
    /// (wrong response kind for the request, impossible sizes, ...).
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// The server reported an error while handling a request.
    #[error("server error: {0}")]
    Server(String),
    /// The transport failed (connection refused, closed, timed out).
    #[error("transport error: {0}")]
    Transport(String),
    /// The store's file or database is not a Sesame store, or is of an
    /// incompatible format version.
    #[error("not a Sesame store: {0}")]
    StoreForeign(String),
    /// The store's data is corrupt.
    #[error("store is corrupt: {0}")]
    StoreCorrupt(String),
    /// The store is in use by another process or another open handle.
    #[error("store is busy: {0}")]
    StoreBusy(String),
    /// The store could not be read or written (I/O, space).
    #[error("store I/O error: {0}")]
    StoreIo(String),
    /// A cryptographic check failed: wrong key, tampered or corrupt data.
    /// Deliberately says nothing more.
    #[error("decryption or verification failed")]
    Crypto,
    /// The operation is not supported by this scheme or backend.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// An argument is out of the accepted range.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
