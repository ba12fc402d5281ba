#![doc = include_str!("../README.md")]

pub mod accept;
#[cfg(feature = "certs")]
pub mod certs;
pub mod codec;
pub mod engine;
pub mod error;
pub mod gate;
pub mod hostile;
pub mod keys;
pub mod metrics;
pub mod records;
pub mod serve;
pub mod service;
pub mod tokens;
pub mod view_log;
pub mod watched;

pub use engine::{Engine, Limits};
pub use error::{EngineError, ServerError};
pub use serve::{run, Bound, RunningServer, ServerConfig, TlsFiles};
/// The protocol the server serves (from `sesame-net`).
pub use sesame_net::proto;
pub use tokens::Tokens;

/// Writes one line to the server's log (standard error).
pub(crate) fn log(line: &str) {
    eprintln!("sesame serve: {line}");
}
