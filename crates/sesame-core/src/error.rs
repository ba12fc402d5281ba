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
    /// The peer answered with a response of another kind than the request
    /// calls for (see [`Error::unexpected`]).
    #[error("protocol violation: unexpected {scheme} response {response}")]
    UnexpectedResponse {
        /// The scheme or service whose protocol was broken.
        scheme: &'static str,
        /// The kind of response received.
        response: String,
    },
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
    /// The store could not be read or written (an I/O error).
    #[error("store I/O error: {0}")]
    StoreIo(String),
    /// The store has no room for the write (a full disk, a database out of
    /// space, a Redis Cluster at its `maxmemory`); nothing was applied.
    #[error("store is full: {0}")]
    StoreFull(String),
    /// A store on other machines cannot serve the operation for the
    /// moment (a node is down or failing over, or a write was not
    /// confirmed by the replicas asked for). The operation may have been
    /// applied; repeating it is the remedy.
    #[error("store is unavailable: {0}")]
    StoreUnavailable(String),
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

impl Error {
    /// The error for a `response` of the wrong kind in `scheme`'s protocol:
    /// it names the response's variant (the first word of its `Debug`
    /// form), never its contents.
    pub fn unexpected(scheme: &'static str, response: &impl std::fmt::Debug) -> Self {
        let text = format!("{response:?}");
        let variant: String = text
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .take(64)
            .collect();
        Error::UnexpectedResponse {
            scheme,
            response: variant,
        }
    }
}

/// A primitive's error is [`Error::Crypto`], whatever its cause: the
/// primitives fail on keys, tags, ciphertexts and tree nodes that came from
/// a peer or a store, and a failed check stays opaque. (The primitives'
/// parameter errors on the caller's own values are checked for before the
/// call, with their own messages.)
impl From<sesame_crypto::Error> for Error {
    fn from(_: sesame_crypto::Error) -> Self {
        Error::Crypto
    }
}

/// Result with [`Error`](enum@Error).
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `e` and its sources on one line, each after `: `, leaving out a
/// source whose text the line already holds (a wrapper that repeats its
/// cause): what a log line or a message to the user shows of a transport
/// or store error.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    #[allow(dead_code)]
    enum Response {
        Stored,
        Ids(Vec<u64>),
    }

    #[test]
    fn an_unexpected_response_names_its_kind_not_its_contents() {
        let e = Error::unexpected("PiBas", &Response::Ids(vec![12345]));
        assert_eq!(
            e.to_string(),
            "protocol violation: unexpected PiBas response Ids"
        );
        let e = Error::unexpected("PiBas", &Response::Stored);
        assert!(
            matches!(e, Error::UnexpectedResponse { scheme: "PiBas", ref response } if response == "Stored")
        );
        let crypto: Error = sesame_crypto::Error::Decryption.into();
        assert!(matches!(crypto, Error::Crypto));
    }
}
