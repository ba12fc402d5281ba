//! The server's view, as an attacker holds it: operations, each the
//! requests, responses and store accesses the server saw while serving it.
//!
//! A harness records the view (`sesame_core::view` wraps a server half and
//! its store) and converts each event into a [`Seen`]; it also says where
//! one operation ends and the next begins, and what kind each is (a
//! server tells a search from an update by the request's public wire
//! shape; the harness, which drives the client, knows it anyway).

/// What kind of operation an [`Observation`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Building the index.
    Setup,
    /// Adding or removing documents.
    Update,
    /// A query, with the fetch of its result documents.
    Search,
}

/// One thing the server saw or did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seen {
    /// A request's bytes, as received.
    Request(Vec<u8>),
    /// A response's size in bytes.
    Response(usize),
    /// A key read, and the size of the value found (`None`: absent).
    Read {
        /// The key.
        key: Vec<u8>,
        /// The value's size, if there was one.
        size: Option<usize>,
    },
    /// A key written, with the value's size.
    Write {
        /// The key.
        key: Vec<u8>,
        /// The value's size.
        size: usize,
    },
    /// A key deleted.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
    /// A prefix scanned, and the entries found.
    Scan {
        /// The prefix.
        prefix: Vec<u8>,
        /// Entries found.
        found: usize,
    },
}

/// One operation as the server saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// Its kind.
    pub op: Op,
    /// What the server saw, in order.
    pub events: Vec<Seen>,
}
