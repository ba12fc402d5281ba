//! Errors of the server: what a request can fail with
//! ([`EngineError`], mapped to gRPC status codes), and what starting the
//! server can fail with ([`ServerError`]).

use thiserror::Error;

/// Why a request was refused or failed. Each variant maps to one gRPC
/// status code (see `service.rs`); the message is meant for the client.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EngineError {
    /// No such index (for this tenant). `NOT_FOUND`.
    #[error("{0}")]
    NotFound(String),
    /// The index exists already, or a request id was reused for another
    /// request. `ALREADY_EXISTS`.
    #[error("{0}")]
    AlreadyExists(String),
    /// The request was applied before; `response` is the first answer.
    /// `ALREADY_EXISTS`, with the response as status details.
    #[error("request {id} was already applied; its first answer is attached")]
    Replayed {
        /// The request id, hex.
        id: String,
        /// The encoded response sent the first time.
        response: Vec<u8>,
    },
    /// The request does not fit the index (another scheme, a protocol
    /// violation). `FAILED_PRECONDITION`.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The request is malformed. `INVALID_ARGUMENT`.
    #[error("{0}")]
    InvalidArgument(String),
    /// Over a limit (indexes per tenant, upload size, messages, space).
    /// `RESOURCE_EXHAUSTED`.
    #[error("{0}")]
    ResourceExhausted(String),
    /// The scheme does not support the operation. `UNIMPLEMENTED`.
    #[error("{0}")]
    Unimplemented(String),
    /// The request conflicts with what is stored (other content under a
    /// stored document's id); nothing was applied. `ABORTED`.
    #[error("{0}")]
    Conflict(String),
    /// The server is shutting down or its store is busy. `UNAVAILABLE`.
    #[error("{0}")]
    Unavailable(String),
    /// The server's store failed; nothing was applied. `INTERNAL`.
    #[error("{0}")]
    Internal(String),
}

impl EngineError {
    /// Maps an error of a scheme's server half or of the store. Store
    /// failures are logged in full on the server and reported to the
    /// client without the server's paths.
    pub fn from_core(e: sesame_core::Error) -> Self {
        use sesame_core::Error as E;
        match e {
            E::Malformed(m) => EngineError::InvalidArgument(format!("malformed message: {m}")),
            E::Protocol(m) => EngineError::FailedPrecondition(format!("protocol violation: {m}")),
            e @ E::UnexpectedResponse { .. } => EngineError::FailedPrecondition(e.to_string()),
            E::InvalidArgument(m) => EngineError::InvalidArgument(m),
            E::Unsupported(m) => EngineError::Unimplemented(m),
            E::Crypto => EngineError::InvalidArgument("decryption or verification failed".into()),
            E::StoreBusy(m) => {
                crate::log(&format!("store busy: {m}"));
                EngineError::Unavailable("the server's store is busy; try again".into())
            }
            E::StoreIo(m) => {
                crate::log(&format!("store error: {m}"));
                EngineError::Internal(
                    "the server's store failed to read or write; the request was not applied"
                        .into(),
                )
            }
            E::StoreFull(m) => {
                crate::log(&format!("store full: {m}"));
                EngineError::ResourceExhausted(
                    "the server's store is out of space; the request was not applied".into(),
                )
            }
            E::StoreUnavailable(m) => {
                crate::log(&format!("store unavailable: {m}"));
                EngineError::Unavailable(
                    "the server's store is unavailable for the moment (a store node is down or \
                     failing over); the request may or may not have been applied: send it again"
                        .into(),
                )
            }
            E::StoreCorrupt(m) | E::StoreForeign(m) => {
                crate::log(&format!("store damaged: {m}"));
                EngineError::Internal("the server's store is damaged (see the server log)".into())
            }
            other => {
                crate::log(&format!("error: {other}"));
                EngineError::Internal(format!("server error: {other}"))
            }
        }
    }
}

impl From<sesame_core::Error> for EngineError {
    fn from(e: sesame_core::Error) -> Self {
        EngineError::from_core(e)
    }
}

/// Why the server could not start or run.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The configuration is refused (insecure plaintext on a public
    /// address, missing TLS files, bad limits, ...).
    #[error("{0}")]
    Config(String),
    /// A file could not be read.
    #[error("cannot read {path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// The tokens file is malformed.
    #[error("tokens file {path}: {message}")]
    Tokens {
        /// The file.
        path: String,
        /// What is wrong, with the line number.
        message: String,
    },
    /// The TLS certificate or key is not usable.
    #[error("TLS: {0}")]
    Tls(String),
    /// The listening address could not be bound.
    #[error("cannot listen on {addr}: {message}")]
    Bind {
        /// The address.
        addr: String,
        /// The operating system's message.
        message: String,
    },
    /// The store could not be opened, is not a server store, or failed.
    #[error("store: {0}")]
    Store(String),
    /// The server failed while running.
    #[error("{0}")]
    Runtime(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use sesame_core::Error as E;

    /// The class of an error decides what a client does (wait for room,
    /// send again, report a bug), so it comes from the error's kind, never
    /// from words that happen to be in its text: a store's label names a
    /// namespace, a path or a host.
    #[test]
    fn store_errors_are_classed_by_kind_not_by_their_text() {
        let refused = EngineError::from_core(E::StoreIo(
            "Redis Cluster store 127.0.0.1:7000 namespace tenants: Connection refused".into(),
        ));
        assert!(matches!(refused, EngineError::Internal(_)), "{refused:?}");
        let in_space_dir = EngineError::from_core(E::StoreIo(
            "redb store /srv/space/store.redb: Input/output error (os error 5)".into(),
        ));
        assert!(
            matches!(in_space_dir, EngineError::Internal(_)),
            "{in_space_dir:?}"
        );
        let full = EngineError::from_core(E::StoreFull("redb store /srv/x: disk full".into()));
        assert!(
            matches!(&full, EngineError::ResourceExhausted(m) if m.contains("out of space")),
            "{full:?}"
        );
        let failing_over = EngineError::from_core(E::StoreUnavailable(
            "Redis Cluster store namespace n: the master of slot 3 is down".into(),
        ));
        assert!(
            matches!(&failing_over, EngineError::Unavailable(m) if m.contains("send it again")),
            "{failing_over:?}"
        );
        for e in [refused, in_space_dir, full, failing_over] {
            let text = e.to_string();
            assert!(
                !text.contains("127.0.0.1") && !text.contains("/srv"),
                "{text}"
            );
        }
    }
}
