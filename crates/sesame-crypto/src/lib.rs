//! Cryptographic primitives of Sesame.
//!
//! Every primitive reports its calls to [`counter`].

pub mod counter;
