//! Range-query protocols of Sesame (seed 004, sections 4 and 5).
//!
//! Every protocol is a client/server pair behind one interface,
//! [`RangeClient`]: insert a value with its record, delete a (value,
//! record) pair, and query an interval `[lo, hi]` for the records whose
//! values lie in it. The client drives the protocol over a
//! [`sesame_core::Channel`] (so every message is encoded, counted in bytes
//! and rounds, and can cross the network server), and the server half is a
//! [`sesame_core::Service`] over a [`sesame_core::Store`].
//!
//! Servers keep their data in pages through a [`PagedStore`]: a store
//! wrapper with a real block cache (LRU, LFU or FIFO) that counts the page
//! I/O requests that miss it, the measure of seed 004's Table 3.
//! [`LocalRange`] runs a protocol's two halves in one process over one.
//!
//! The protocols ([`protocols`] lists them by name):
//! - [`bplus_ore`]: a B+ tree whose keys are ORE ciphertexts, one protocol
//!   per scheme of `sesame-ore`, and the plaintext "no encryption"
//!   baseline;
//! - [`kerschbaum_tueno`]: the rotated circular array of Kerschbaum and
//!   Tueno (ESORICS 2019);
//! - [`pope`]: the POPE buffer tree of Roche et al. (CCS 2016);
//! - [`log_brc`]: Logarithmic-BRC of Demertzis et al. (SIGMOD 2016) over
//!   PiBas and over 2Lev with the pack extension;
//! - [`path_oram`]: a B+ tree stored in Path ORAM (Stefanov et al., CCS
//!   2013).

pub mod api;
pub mod bplus_ore;
pub mod btree;
pub mod cache;
pub mod kerschbaum_tueno;
pub mod local;
pub mod log_brc;
pub mod paged;
pub mod path_oram;
pub mod pope;
pub mod record;

pub use api::{Io, RangeAnswer, RangeClient, RangeProtocol};
pub use cache::CachePolicy;
pub use local::LocalRange;
pub use paged::{PageConfig, PagedStore};

/// Every range protocol, in a fixed order.
pub fn protocols() -> Vec<RangeProtocol> {
    let mut all = Vec::new();
    all.extend(bplus_ore::protocols());
    all.extend(kerschbaum_tueno::protocols());
    all.extend(pope::protocols());
    all.extend(log_brc::protocols());
    all.extend(path_oram::protocols());
    all
}

/// The protocol called `name` (case-insensitive).
pub fn protocol(name: &str) -> Option<RangeProtocol> {
    protocols()
        .into_iter()
        .find(|p| p.descriptor.name.eq_ignore_ascii_case(name))
}
