//! KPR12: the dynamic SSE scheme of Kamara, Papamanthou and Roeder,
//! "Dynamic Searchable Symmetric Encryption", ACM CCS 2012, with a Merkle
//! tree over the whole encrypted index so that a malicious server's answers
//! are verifiable (the II-based verifiable scheme of seed 003).
//!
//! The index is KPR12's: a search array `As` holding, per keyword `w`, an
//! encrypted singly linked list of nodes `(⟨id, next⟩ ⊕ H(K_w, r), r)`; a
//! search table `Ts[F(K1, w)] = ⟨head⟩ ⊕ G(K2, w)`; a deletion array `Ad`
//! with a dual node per node, `(⟨self, prev, next, F(K1, w)⟩ ⊕ H(K_f, r'), r')`
//! with `K_f = P(K3, f)`; and a free list threaded through the unused nodes
//! of `As`. Adding a pair takes a free node, writes the token's node with
//! its pointer set homomorphically (XOR) to the old head, and fixes the old
//! head's dual; deleting one decrypts the pair's dual with `K_f` and unlinks
//! the node by XOR-ing its neighbours' pointers, returning the node to the
//! free list.
//!
//! Verification: every cell of the index (each `As`, `Ad`, `Ts` entry, the
//! pair dictionary, the free-list head) is a leaf of one sparse Merkle tree
//! of depth [`DEPTH`] over SHA-256 (the leaf and node hashes of
//! [`sesame_crypto::merkle`]), at the cell's address. The client keeps only
//! its key and the root. Every server algorithm (Search, Add, Del) runs
//! over a [`Memory`]; the server's memory records, for each cell read or
//! written, the cell and its authentication path (an [`Access`]); that
//! transcript is the proof component. The client runs the same algorithm
//! over the transcript with a verifying memory: a read is accepted only if
//! its path leads to the current root; a write checks the old cell and
//! moves the root to the new one. So the client recomputes the result of a
//! search from authenticated cells (and compares it with the server's) and
//! keeps the root current after each update. See `docs/schemes/kpr12.md`.//!
//! The module's parts: `cells` (the index's cells and their encodings),
//! `verifier` (the sparse Merkle tree, the [`Memory`] the algorithms run
//! over, and the client's verifying memory), `algorithm` (KPR12's tokens
//! and its Search, Add and Del over a [`Memory`]), `client`, `server`.

use serde::{Deserialize, Serialize};
use sesame_core::{BackwardPrivacy, QueryKind, SchemeDescriptor, SchemeKind};

use crate::api::{DocId, KeywordScheme};

mod algorithm;
mod cells;
mod client;
mod server;
mod verifier;

pub use algorithm::*;
pub use client::*;
pub use server::*;
pub use verifier::*;
// The parts' crate-internal items, for one another.
#[allow(unused_imports)]
use {algorithm::*, cells::*, client::*, server::*, verifier::*};

/// Descriptor of KPR12 with Merkle-tree verification.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "kpr12",
    title: "KPR12 dynamic SSE with a Merkle tree over the index (verifiable)",
    citation: "S. Kamara, C. Papamanthou, T. Roeder. Dynamic Searchable Symmetric Encryption. \
               ACM CCS 2012, pp. 965-976; Merkle-tree verification as in seed 003 (Online \
               Resource 5/6)",
    kind: SchemeKind::DynamicSse,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Exact, QueryKind::Verifiable],
    leakage: "Setup: the number of (keyword, document) pairs plus free nodes (|As|), the number \
              of keywords (|Ts|) and of pairs (the pair dictionary). Search: the search pattern \
              (F(K1, w) is deterministic), the access pattern (the list's nodes and the \
              identifiers, which the server decrypts). Add: the labels F(K1, w) of the \
              document's keywords (linkable to past and future searches: no forward \
              privacy), their number, the identifier's pair tags, and where the nodes go. Del: \
              the document key P(K3, f), so the dual nodes of the deleted pairs, their keyword \
              labels and list neighbours; K_f is a PRF of the identifier, so a server that \
              keeps it opens the dual nodes of any later re-addition of that identifier as \
              well (their labels, which an addition reveals anyway, and list positions). \
              Proofs reveal nothing the server does not hold: \
              they are paths in a tree of the server's own cells.",
    doc: "docs/schemes/kpr12.md",
};

/// The registry entry of KPR12.
pub fn scheme() -> KeywordScheme {
    crate::common::keyword_scheme!(&DESCRIPTOR, &[], Kpr12Client, Kpr12Server)
}

/// Depth of the sparse Merkle tree: cell addresses have this many bits.
pub const DEPTH: usize = 40;

/// Bits of a cell's index within its region.
const INDEX_BITS: u32 = 37;
/// Mask of an index within a region.
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

/// Region of the free-list head (one cell, index 0).
const META: u64 = 0;
/// Region of the search array `As`.
const AS: u64 = 1;
/// Region of the deletion array `Ad` (the dual of `As[i]` is `Ad[i]`).
const AD: u64 = 2;
/// Region of the search table `Ts` (open addressing on the label).
const TS: u64 = 3;
/// Region of the pair dictionary (open addressing on the pair tag).
const PAIRS: u64 = 4;

/// Probes of an open-addressing lookup before giving up (labels are PRF
/// outputs over 2^37 slots: a second probe is already rare).
const MAX_PROBES: u64 = 64;

/// Bytes of a plaintext node: `id ‖ next`.
pub const NODE_LEN: usize = 16;
/// Bytes of a plaintext dual node: `self ‖ prev ‖ next ‖ F(K1, w)`.
pub const DUAL_LEN: usize = 24 + 32;
/// Bytes of the nonces `r`, `r'`.
pub const NONCE_LEN: usize = 16;

const CELL_META: u8 = b'M';
const CELL_NODE: u8 = b'N';
const CELL_FREE: u8 = b'F';
const CELL_DUAL: u8 = b'D';
const CELL_TS: u8 = b'T';
const CELL_PAIR: u8 = b'P';

crate::common::redacted_debug!(Request);

/// A KPR12 request.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Stores the cells of IndexGen; `reset` first removes the earlier
    /// index.
    Put {
        /// Remove the earlier index first.
        reset: bool,
        /// `(address, cell)` pairs.
        cells: Vec<Cell>,
    },
    /// Search with a proof.
    Search(SearchToken),
    /// Add a document's pairs.
    Add(AddToken),
    /// Delete (document, keyword) pairs.
    Del(DelToken),
    /// Whether the last update the server applied is the one with this
    /// digest ([`update_digest`]); if so, its proof again. A client whose
    /// update answer was lost asks this before anything else.
    LastUpdate {
        /// The digest of the update request whose answer was lost.
        digest: [u8; 32],
    },
}

/// The digest that names an update request: SHA-256 over a domain label
/// and the request's wire encoding. Add tokens carry fresh nonces, so two
/// updates never share one.
pub fn update_digest(request: &Request) -> sesame_core::Result<[u8; 32]> {
    let mut bytes = b"sesame-sse/kpr12/update/v1".to_vec();
    bytes.extend(sesame_core::wire::encode(request)?);
    Ok(sesame_crypto::hash::sha256(&bytes))
}

/// A KPR12 response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The cells are stored.
    Stored,
    /// The result of a search and its proof component.
    Found {
        /// The identifiers, sorted.
        ids: Vec<DocId>,
        /// Every cell the search read, with its path.
        proof: Vec<Access>,
    },
    /// The update is done; every cell it read or wrote, with its path
    /// before the access.
    Updated(Vec<Access>),
    /// The last update the server applied is not the one asked about.
    NotApplied,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sesame_core::Store;

    use super::*;

    #[test]
    fn empty_path_gives_the_empty_root() {
        let a = Access {
            cell: Vec::new(),
            present: 0,
            siblings: Vec::new(),
        };
        assert_eq!(a.root_with(address(TS, 5), &[]).ok(), Some(empty_root()));
        assert!(a.root_with(1 << DEPTH, &[]).is_err());
    }

    #[test]
    fn bulk_and_incremental_trees_agree() {
        let store: Arc<dyn Store> = Arc::new(sesame_store::MemoryStore::new());
        let server = Kpr12Server::new(store.clone());
        let cells = vec![(address(AS, 1), vec![1u8, 2]), (address(TS, 77), vec![3u8])];
        server.put(true, cells.clone()).ok();
        let bulk = server.root().ok();
        let store2: Arc<dyn Store> = Arc::new(sesame_store::MemoryStore::new());
        let mut m = ServerMemory::new(store2.as_ref(), false);
        for (a, c) in cells {
            m.write(a, c).ok();
        }
        store2.write(m.commit()).ok();
        assert_eq!(bulk, Kpr12Server::new(store2).root().ok());
    }
}
