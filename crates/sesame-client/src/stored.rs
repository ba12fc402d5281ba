//! What a stored document is, and what bounds its reads: the sealed
//! record, the bound of its blob and the check of its digest, the batch
//! limits of the document service, and the gate an add's indexing waits
//! on while its documents are stored. Used by the session's documents
//! (`documents.rs`), its rotation and its sync.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use zeroize::Zeroize;

use crate::doc_service::DocId;
use crate::error::{ClientError, Result};
use crate::state::DocumentInfo;

/// Bytes of documents per request to the document service, at most.
pub(crate) const BATCH_BYTES: u64 = 16 << 20;
/// The most documents one document request names (fewer where the server
/// says so).
pub(crate) const DOCS_PER_REQUEST: usize = 10_000;

/// Bytes of a sealed document beside its content: the encoded path and
/// lengths, the AEAD's nonce and tag, and the message framing.
pub(crate) const SEAL_OVERHEAD: u64 = 256;

/// The most bytes the sealed blob of a catalogued document may have: its
/// content and path as the catalog recorded them when it was added, and
/// the sealing's overhead. Every read of a document is bounded by it, so
/// a store (or server) that claims a larger document costs the client no
/// more reads and memory than the document it stored.
pub(crate) fn stored_bound(doc: &DocumentInfo) -> u64 {
    doc.size
        .saturating_add(doc.path.len() as u64)
        .saturating_add(SEAL_OVERHEAD)
}

/// What an encrypted document holds.
#[derive(Serialize, Deserialize)]
pub(crate) struct DocRecord {
    pub path: String,
    pub content: Vec<u8>,
}

impl Drop for DocRecord {
    fn drop(&mut self) {
        self.content.zeroize();
    }
}

/// Checks an opened document against the digest the catalog recorded
/// when it was added (none for documents of builds that did not record
/// one): a server that serves another version under the identifier is
/// caught here.
pub(crate) fn check_digest(doc: &DocumentInfo, record: DocRecord) -> Result<DocRecord> {
    match doc.digest {
        Some(d) if d != sesame_crypto::hash::sha256(&record.content) => {
            Err(ClientError::DocumentNotAsAdded(doc.id))
        }
        _ => Ok(record),
    }
}

/// How far another thread has stored the documents of an add, for the
/// updates that index them meanwhile: an intent is saved only once every
/// document it adds is stored (identifiers are handed out in order).
#[derive(Debug, Default)]
pub(crate) struct StoredGate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    /// Every document of the add with a smaller identifier is stored.
    below: DocId,
    /// The storing thread ended (all stored, or failed).
    ended: bool,
}

impl StoredGate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every document of the add below `below` is stored.
    pub(crate) fn advance(&self, below: DocId) {
        self.lock().below = below;
        self.changed.notify_all();
    }

    /// The storing thread ended; a wait for a document it did not store
    /// fails from now on.
    pub(crate) fn end(&self) {
        self.lock().ended = true;
        self.changed.notify_all();
    }

    /// Waits until document `id` is stored.
    pub(crate) fn wait(&self, id: DocId) -> Result<()> {
        let mut state = self.lock();
        while state.below <= id {
            if state.ended {
                return Err(ClientError::DocumentMissing(id));
            }
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        Ok(())
    }
}
