//! The session's documents: sealing and opening them, storing them in
//! batches under the server's message limit, reading back their keywords,
//! and deleting the stored documents the catalog no longer needs.

use serde::{Deserialize, Serialize};
use sesame_core::wire;
use zeroize::{Zeroize, Zeroizing};

use crate::collect::NewFile;
use crate::doc_service::{DocClient, DocId};
use crate::error::{ClientError, Result};
use crate::session::{Phase, Progress, Session};
use crate::state::DocumentInfo;

/// Bytes of documents per request to the document service, at most.
pub(crate) const BATCH_BYTES: u64 = 16 << 20;
/// The most documents one document request names (fewer where the server
/// says so).
pub(crate) const DOCS_PER_REQUEST: usize = 10_000;

/// Bytes of a document request beside the documents (names, ids,
/// framing), with room to spare.
const DOC_OVERHEAD: u64 = 64 << 10;
/// Bytes of a sealed document beside its content: the encoded path and
/// lengths, the AEAD's nonce and tag, and the message framing.
const SEAL_OVERHEAD: u64 = 256;

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

impl Session {
    /// The largest content a document at `path` may have: the embedded
    /// store's [`crate::MAX_DOCUMENT`], and under a server, what fits one
    /// of its messages once sealed.
    pub(crate) fn max_document(&self, path: &str) -> u64 {
        let fits = self.max_message.map_or(u64::MAX, |m| {
            (m as u64).saturating_sub(DOC_OVERHEAD + SEAL_OVERHEAD + path.len() as u64)
        });
        crate::MAX_DOCUMENT.min(fits)
    }

    /// Bytes of documents one request carries.
    fn batch_bytes(&self) -> u64 {
        self.max_message.map_or(BATCH_BYTES, |m| {
            BATCH_BYTES.min((m as u64).saturating_sub(DOC_OVERHEAD))
        })
    }

    fn doc_aad(&self, id: DocId) -> Vec<u8> {
        let mut aad = b"sesame-client/document/v1\0".to_vec();
        for part in [self.profile_id.as_str(), self.index.as_str()] {
            aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
            aad.extend_from_slice(part.as_bytes());
        }
        aad.extend_from_slice(&id.to_be_bytes());
        aad
    }

    fn seal_document(&mut self, id: DocId, file: &NewFile) -> Result<Vec<u8>> {
        let record = DocRecord {
            path: file.path.to_string_lossy().into_owned(),
            content: file.content.clone(),
        };
        let plain = Zeroizing::new(wire::encode(&record)?);
        let aad = self.doc_aad(id);
        self.docs
            .seal(&mut self.rng, &aad, &plain)
            .map_err(|_| ClientError::InvalidArgument(format!("document {id} is too large")))
    }

    pub(crate) fn open_document(&self, id: DocId, blob: &[u8]) -> Result<DocRecord> {
        let plain = Zeroizing::new(
            self.docs
                .open(&self.doc_aad(id), blob)
                .map_err(|_| ClientError::DocumentCorrupt(id))?,
        );
        wire::decode(&plain).map_err(|_| ClientError::DocumentCorrupt(id))
    }

    /// Encrypts and stores new documents, in batches under the limit.
    pub(crate) fn store_documents(
        &mut self,
        batch: &[(DocId, &NewFile)],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        let total = batch.len() as u64;
        let limit = self.batch_bytes();
        let mut channel = self.backend.document_channel(&self.index)?;
        let mut pending = Vec::new();
        let mut bytes = 0u64;
        for (i, (id, file)) in batch.iter().enumerate() {
            let blob = self.seal_document(*id, file)?;
            if !pending.is_empty()
                && (bytes + blob.len() as u64 > limit || pending.len() >= self.max_documents)
            {
                DocClient::put(channel.as_mut(), std::mem::take(&mut pending))?;
                bytes = 0;
            }
            bytes += blob.len() as u64;
            pending.push((*id, blob));
            progress(Progress {
                phase: Phase::Storing,
                done: i as u64,
                total,
            });
        }
        if !pending.is_empty() {
            DocClient::put(channel.as_mut(), pending)?;
        }
        progress(Progress {
            phase: Phase::Storing,
            done: total,
            total,
        });
        Ok(())
    }

    /// Fetches and decrypts stored documents in batches, handing each
    /// (document, record) to `each`; `phase` is reported as progress.
    pub(crate) fn fetch_documents(
        &mut self,
        docs: &[DocumentInfo],
        phase: Phase,
        progress: &mut dyn FnMut(Progress),
        each: &mut dyn FnMut(&DocumentInfo, Result<DocRecord>) -> Result<()>,
    ) -> Result<()> {
        let total = docs.len() as u64;
        let limit = self.batch_bytes();
        let mut channel = self.backend.document_channel(&self.index)?;
        let mut done = 0u64;
        for chunk in chunk_by_size(docs, limit, self.max_documents) {
            progress(Progress { phase, done, total });
            let ids: Vec<DocId> = chunk.iter().map(|d| d.id).collect();
            let blobs = DocClient::get_many(channel.as_mut(), &ids)?;
            for (doc, blob) in chunk.iter().zip(blobs) {
                let record = match blob {
                    Some(blob) => self.open_document(doc.id, &blob),
                    None => Err(ClientError::DocumentMissing(doc.id)),
                };
                each(doc, record)?;
            }
            done += chunk.len() as u64;
        }
        if total > 0 {
            progress(Progress {
                phase,
                done: total,
                total,
            });
        }
        Ok(())
    }

    /// The keywords of stored documents, in the order given.
    pub(crate) fn stored_keywords(
        &mut self,
        docs: &[DocumentInfo],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<Vec<String>>> {
        let mut out = Vec::with_capacity(docs.len());
        let extract = std::sync::Arc::clone(&self.extract);
        self.fetch_documents(docs, Phase::Fetching, progress, &mut |_, record| {
            out.push(extract(&record?.content));
            Ok(())
        })?;
        Ok(out)
    }

    /// SHA-256 of a stored document's content (for catalog entries of
    /// earlier builds, which did not record it).
    pub(crate) fn stored_digest(&mut self, doc: &DocumentInfo) -> Result<[u8; 32]> {
        if let Some(d) = doc.digest {
            return Ok(d);
        }
        let mut digest = None;
        self.fetch_documents(
            std::slice::from_ref(doc),
            Phase::Fetching,
            &mut |_| {},
            &mut |_, record| {
                digest = Some(sesame_crypto::hash::sha256(&record?.content));
                Ok(())
            },
        )?;
        digest.ok_or(ClientError::DocumentMissing(doc.id))
    }

    /// Deletes the stored documents listed as garbage, then forgets them.
    /// Callers may ignore a failure: the list is kept and retried by the
    /// next command, and `check` reports documents left over.
    pub(crate) fn collect_garbage(&mut self) -> Result<()> {
        if self.state.garbage.is_empty() {
            return Ok(());
        }
        let mut channel = self.backend.document_channel(&self.index)?;
        for chunk in self.state.garbage.clone().chunks(self.max_documents) {
            DocClient::delete_many(channel.as_mut(), chunk)?;
        }
        self.state.garbage.clear();
        self.save()
    }
}

/// Splits documents into runs of at most `limit` bytes (by their sizes in
/// the catalog) and `count` documents, each run at least one document.
fn chunk_by_size(docs: &[DocumentInfo], limit: u64, count: usize) -> Vec<&[DocumentInfo]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0u64;
    for (i, d) in docs.iter().enumerate() {
        if i > start && (bytes + d.size + SEAL_OVERHEAD > limit || i - start >= count) {
            out.push(&docs[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += d.size + SEAL_OVERHEAD;
    }
    if start < docs.len() {
        out.push(&docs[start..]);
    }
    out
}
