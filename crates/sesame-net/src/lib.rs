//! Sesame's network protocol and client, apart from the server, so that a
//! client (the SDK, the CLI, the Python package) does not build the server
//! and its store backends.
//!
//! - [`proto`]: the `sesame.v1.Sesame` gRPC protocol: method paths and the
//!   messages, generated from `proto/sesame.proto` (`scripts/gen-proto.sh`);
//! - [`client`]: the async client ([`SesameClient`]) and its
//!   configuration ([`ClientConfig`]: URL, token, CA);
//! - [`blocking`]: a synchronous client over its own runtime, with
//!   retries, and [`sesame_core::Channel`]s to an index
//!   ([`blocking::IndexChannel`], [`blocking::UploadChannel`]).
//!
//! The server (`sesame-server`) serves the same [`proto`].

pub mod blocking;
pub mod client;
pub mod proto;

pub use client::{ClientConfig, SesameClient};
