//! The shared vocabulary of Sesame.

pub mod error;
pub mod store;

pub use error::{Error, Result};
pub use store::{IoCounter, IoCounts, Store, WriteBatch, WriteOp};
