//! POPE, partial order preserving encoding (D. S. Roche, D. Apon, S. G.
//! Choi, A. Yerukhimovich, "POPE: Partial Order Preserving Encoding", CCS
//! 2016; seed 004, section 4.3).
//!
//! The server keeps a buffer tree: every node has an unsorted buffer of
//! sealed records, and an internal node also a sorted list of at most `L`
//! labels (copies of sealed records) separating its children. An insertion
//! appends the sealed record to the root's buffer: one round, no
//! comparison. A query splits the tree along the path of each endpoint:
//! on the way down, the server streams every buffer to the client in
//! chunks of at most `L` records and the client answers, for each, the
//! child it belongs to; a leaf holding more than `L` records is split
//! around `L` random pivots the client sorts, and its labels move up into
//! the parent (B-tree style, splitting internal nodes that grow past `L`
//! labels). The server then returns every record between the two endpoint
//! leaves, intermediate buffers included, and the client discards those
//! outside the interval (at most `2L` per query: the two leaves).
//!
//! Comparisons are on the pair (value, ciphertext bytes), a strict total
//! order, so equal values never stall a split. Each request/response is a
//! round, as seed 004 counts them. Deletion is our addition (POPE has
//! none): a query over `[v, v]` locates the record, which the server then
//! removes from its buffer.
//!
//! The server keeps nothing in memory between requests: a flush in
//! progress is named in every request that continues it ([`Flush`]: the
//! path, and for a leaf split the pivot sample's seed and the pivots'
//! order), so any server over the same store answers it, as a networked
//! server that makes one server half per request needs. See
//! `docs/schemes/pope.md`.
//!
//! - [`client`]: the client half (keys, the order, the descent);
//! - [`server`]: the server half (requests against the tree);
//! - `tree`: the buffer tree's layout in the store.

use serde::{Deserialize, Serialize};
use sesame_core::{
    BackwardPrivacy, QueryKind, Result, SchemeDescriptor, SchemeKind, Service, Typed,
};

use crate::api::{split_page, RangeProtocol};

pub mod client;
pub mod server;
mod tree;

pub use client::PopeClient;
pub use server::PopeServer;

/// Descriptor of POPE.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "pope",
    title: "POPE: Partial Order Preserving Encoding",
    citation: "D. S. Roche, D. Apon, S. G. Choi, A. Yerukhimovich. POPE: Partial Order \
               Preserving Encoding. CCS 2016",
    kind: SchemeKind::Range,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Range],
    leakage: "Insertions leak nothing but their number and sizes (appended to the root \
              buffer unsorted). Queries leak a partial order: the relative order of the \
              records the client partitions (each against the labels of the nodes on the \
              two endpoint paths, and the sorted pivots of split leaves), which grows with \
              the number of queries, plus the access pattern (the records returned, up to \
              2L of them outside the interval). Equality is hidden (semantically secure \
              ciphertexts).",
    doc: "docs/schemes/pope.md",
};

/// Associated data of the sealed records.
const AAD: &[u8] = b"pope";

/// Bytes a sealed record is assumed to take when sizing `L` and the buffer
/// chunks: a 16-byte payload sealed, with its length prefix.
const NOMINAL_ENTRY: usize = 8 + 16 + 28 + 2;

/// Largest sealed record the server accepts (1 MiB).
const MAX_RECORD: usize = 1 << 20;

/// Largest accepted `L`.
const MAX_L: usize = 1 << 16;

/// Re-descents a query tries before giving up on a changing tree.
const MAX_RETRIES: usize = 64;

/// The registry entries of this module.
pub fn protocols() -> Vec<RangeProtocol> {
    vec![RangeProtocol {
        descriptor: &DESCRIPTOR,
        params: &[
            ("bits", "32 (value width)"),
            (
                "l",
                "page_size / 54, at least 2 (labels per node, client working set)",
            ),
        ],
        new_client: |rng, params| {
            let (params, page) = split_page(params)?;
            Ok(Box::new(PopeClient::new(rng, &params, &page)?))
        },
        restore_client: |bytes| Ok(Box::new(PopeClient::restore(bytes)?)),
        new_server: Some(|store, params| -> Result<Box<dyn Service>> {
            let (_, page) = split_page(params)?;
            Ok(Box::new(Typed(PopeServer::new(store, &page)?)))
        }),
    }]
}

/// A flush in progress, named by every request that continues it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flush {
    /// Path from the root to the node whose buffer is flushed.
    pub path: Vec<u64>,
    /// Chunk size and label bound.
    pub l: u32,
    /// For a leaf split, how its pivots were drawn and sorted; `None` for
    /// a flush of an internal node into its children.
    pub split: Option<Split>,
}

/// The pivots of a leaf split.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Split {
    /// Seed of the sample [`Request::Pivots`] drew.
    pub seed: u64,
    /// The pivots in sorted order: `order[i]` is the index, in the sample,
    /// of the i-th smallest pivot.
    pub order: Vec<u32>,
}

/// A POPE request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Appends a sealed record to the root's buffer.
    Insert {
        /// The sealed record.
        sealed: Vec<u8>,
    },
    /// Shows the node at the end of `path` (node ids from the root; empty:
    /// the root). For an internal node with a non-empty buffer the
    /// response carries the buffer's first chunk.
    Visit {
        /// Path from the root.
        path: Vec<u64>,
        /// Chunk size and label bound.
        l: u32,
    },
    /// The records of the buffer being flushed from `offset` on, at most
    /// `l` of them.
    Next {
        /// The flush.
        flush: Flush,
        /// Records already sent.
        offset: u64,
    },
    /// Moves the records of the flushed buffer: the child (or, for a leaf
    /// split, the bucket) of each record, in buffer order.
    Partition {
        /// The flush.
        flush: Flush,
        /// One child index per record of the buffer.
        assign: Vec<u32>,
    },
    /// Samples `l` pivots of the leaf at the end of `path` (which holds
    /// more than `l` records) to split it.
    Pivots {
        /// Path from the root to the leaf.
        path: Vec<u64>,
        /// Number of pivots.
        l: u32,
        /// Seed of the sampling, from the client.
        seed: u64,
    },
    /// Every record between the leaves at the ends of `left` and `right`.
    Collect {
        /// Path to the left endpoint's leaf.
        left: Vec<u64>,
        /// Path to the right endpoint's leaf.
        right: Vec<u64>,
    },
    /// Removes the record `sealed` from the buffer of `node`.
    Remove {
        /// Node holding the record.
        node: u64,
        /// The record's exact bytes.
        sealed: Vec<u8>,
    },
}

/// A node as [`Request::Visit`] shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct View {
    /// The node's id.
    pub id: u64,
    /// Sorted labels (internal nodes).
    pub labels: Vec<Vec<u8>>,
    /// Child ids (empty for a leaf).
    pub children: Vec<u64>,
    /// Records in the buffer.
    pub len: u64,
    /// First chunk of the buffer being flushed (internal nodes).
    pub chunk: Vec<Vec<u8>>,
}

/// A POPE response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// Done.
    Done,
    /// A node.
    Node(View),
    /// A chunk of records (buffer being flushed, or pivots).
    Chunk(Vec<Vec<u8>>),
    /// The buffer is flushed; `restructured` when the tree changed shape
    /// (a leaf split), so paths must be found again.
    Flushed {
        /// Whether the tree changed shape.
        restructured: bool,
    },
    /// A path no longer leads to a leaf; descend again.
    Stale,
    /// Records with the node holding each.
    Records(Vec<(u64, Vec<u8>)>),
}
