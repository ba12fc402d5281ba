//! An index's part of a master-key rotation
//! ([`crate::Profile::rotate_master`]): every stored document sealed again
//! under the new document key (under new identifiers, the index rebuilt
//! over them with fresh scheme keys), then the state under the new state
//! key (locally, and as the next version of the shared state on a server).
//!
//! Safe to interrupt: until the rebuild's state switch the old documents
//! and index are in force (the new identifiers are reserved and cleaned up
//! like an interrupted add's); after it, a rerun finds the catalog under
//! the new document key and only writes the state under the new key.
//!
//! A table's keyword index is not re-sealed here: tables are moved
//! before the indexes, each made again under the new key
//! (`crate::table::rotate`).

use std::sync::Arc;

use sesame_crypto::aead::Aes256GcmSiv;

use super::{Phase, Progress, Session};
use crate::collect::NewFile;
use crate::doc_service::DocClient;
use crate::error::{ClientError, Result};
use crate::intents::IntentFiles;
use crate::state::{DocumentInfo, StateCipher};
use crate::stored::{check_digest, stored_bound, BATCH_BYTES};

/// Documents read per request while re-sealing, at most.
const RESEAL_BATCH: usize = 256;

impl Session {
    /// Moves the index to `docs` (the new document key) and `cipher` (the
    /// new state key; intents from now on under `intents`); returns how
    /// many documents were re-sealed by this run.
    ///
    /// Stored documents cannot be replaced in place (a server refuses other
    /// content under an identifier), so each is stored again under a new,
    /// reserved identifier and the new document key, and the index is
    /// rebuilt over them with a fresh scheme client, as `rekey` does; the
    /// state switches to it in one write and the old documents become
    /// garbage. Then the state is written under the new state key. A
    /// rerun after a crash between the two finds the catalog already
    /// under the new document key and only switches the state.
    /// Interrupted operations are completed first, under the old keys.
    pub(crate) fn reseal(
        &mut self,
        cipher: StateCipher,
        docs: Arc<Aes256GcmSiv>,
        intents: IntentFiles,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<usize> {
        if !self.doc_context.is_empty() {
            return Err(ClientError::InvalidArgument(
                "a table's index cannot be re-sealed on its own".into(),
            ));
        }
        let resealed = self.shared_op(|s| {
            s.recover()?;
            s.reseal_documents(&docs, progress)
        })?;
        // The switch: the next shared version and the local file, under
        // the new state key.
        self.cipher = cipher;
        self.docs = docs;
        self.intents = intents;
        self.save()?;
        Ok(resealed)
    }

    fn reseal_documents(
        &mut self,
        docs: &Arc<Aes256GcmSiv>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<usize> {
        let all: Vec<DocumentInfo> = self.state.catalog.values().collect::<Result<_>>()?;
        let Some(first) = all.first() else {
            return Ok(0);
        };
        let old = Arc::clone(&self.docs);
        let mut channel = self.backend.document_channel(&self.index)?;
        // Already under the new key: an interrupted run rebuilt over them.
        let blob = self.fetch_blob(channel.as_mut(), first.id)?;
        self.docs = Arc::clone(docs);
        let moved = self.open_document(first.id, &first.path, &blob).is_ok();
        self.docs = Arc::clone(&old);
        if moved {
            return Ok(0);
        }
        // New identifiers, reserved before anything is stored.
        let ids = self.reserve_ids(all.len())?;

        let limit = self
            .max_message
            .map_or(BATCH_BYTES, |m| BATCH_BYTES.min(m as u64 / 2));
        let total = all.len() as u64;
        let mut adds = Vec::with_capacity(all.len());
        let mut start = 0;
        while start < all.len() {
            // A batch under the size and count limits (one at least).
            let mut end = start;
            let mut bytes = 0u64;
            while end < all.len()
                && end - start < RESEAL_BATCH.min(self.max_documents)
                && (end == start || bytes + stored_bound(&all[end]) <= limit)
            {
                bytes += stored_bound(&all[end]);
                end += 1;
            }
            progress(Progress {
                phase: Phase::Storing,
                done: start as u64,
                total,
            });
            let batch = &all[start..end];
            let bounds: Vec<_> = batch.iter().map(|d| (d.id, stored_bound(d))).collect();
            let blobs = DocClient::get_within(channel.as_mut(), &bounds)?;
            let mut files = Vec::with_capacity(batch.len());
            for ((doc, blob), id) in batch.iter().zip(blobs).zip(&ids[start..end]) {
                let blob = blob.ok_or(ClientError::DocumentMissing(doc.id))?;
                let record = check_digest(doc, self.open_document(doc.id, &doc.path, &blob)?)?;
                adds.push((
                    DocumentInfo {
                        id: *id,
                        ..doc.clone()
                    },
                    (self.extract)(&record.path, &record.content),
                ));
                files.push((
                    *id,
                    NewFile {
                        path: record.path.clone().into(),
                        content: record.content.clone(),
                    },
                ));
            }
            self.docs = Arc::clone(docs);
            let refs: Vec<_> = files.iter().map(|(id, f)| (*id, f)).collect();
            let stored = self.doc_writer().and_then(|w| w.store(&refs, &mut |_| {}));
            self.docs = Arc::clone(&old);
            for (_, f) in &mut files {
                zeroize::Zeroize::zeroize(&mut f.content);
            }
            stored?;
            start = end;
        }
        // The new generation over the new identifiers; the old documents
        // become garbage.
        self.rebuild(adds, &all, progress)?;
        let _ = self.collect_garbage();
        Ok(all.len())
    }
}
