//! The shared vocabulary of Sesame.
//!
//! - [`channel`]: how a scheme's client half reaches its server half
//!   ([`Channel`], [`LocalChannel`], [`Service`], [`Handler`]);
//! - [`store`]: the key-value [`Store`] the server half keeps its index in;
//! - [`meter`]: the [`Meter`] every layer reports to, and its [`Snapshot`];
//! - [`network`]: [`NetworkModel`] profiles that turn a snapshot into a
//!   modelled time over LAN or WAN;
//! - [`wire`]: the versioned binary encoding of every message;
//! - [`view`]: the server's view (requests, responses, store keys in
//!   order) recorded for leakage analysis;
//! - [`scheme`]: scheme descriptors and the registry [`Entry`] of every
//!   scheme family.
//!
//! Scheme crates depend on this crate and on `sesame-crypto` only; they do
//! no I/O of their own.

pub mod channel;
pub mod error;
pub mod meter;
pub mod network;
pub mod scheme;
pub mod store;
pub mod view;
pub mod wire;

pub use channel::{Channel, Handler, Io, LocalChannel, Service, Typed};
pub use error::{Error, Result};
pub use meter::{Meter, ServerReport, Snapshot, Span};
pub use network::NetworkModel;
pub use scheme::{
    BackwardPrivacy, Entry, NewServer, Params, QueryKind, SchemeDescriptor, SchemeKind,
};
pub use store::{
    Conditional, IoCounter, IoCounts, Prefixed, Store, StoredValue, WriteBatch, WriteInFlight,
    WriteMarks, WriteOp,
};
