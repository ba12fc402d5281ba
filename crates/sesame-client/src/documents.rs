//! The session's documents: sealing and opening them, storing them in
//! batches under the server's message limit, reading back their keywords,
//! and deleting the stored documents the catalog no longer needs.

use std::sync::Arc;

use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use sesame_core::{wire, Channel};
use sesame_crypto::aead::Aes256GcmSiv;
use zeroize::Zeroizing;

use crate::collect::NewFile;
use crate::doc_service::{DocClient, DocId};
use crate::error::{ClientError, Result};
use crate::progress::{Phase, Progress};
use crate::session::Session;
use crate::state::DocumentInfo;
use crate::stored::{
    check_digest, pack, stored_bound, unpack, Compressor, DocRecord, BATCH_BYTES, SEAL_OVERHEAD,
};

/// Bytes of a document request beside the documents (names, ids,
/// framing), with room to spare.
const DOC_OVERHEAD: u64 = 64 << 10;
/// The forms of a sealed document, told apart by its associated data.
#[derive(Clone, Copy)]
enum Form {
    /// The encoded record sealed as it is (builds before compression).
    V1,
    /// The record packed ([`crate::stored::pack`]): compressed and padded
    /// to a length class, or stored as it is behind a header.
    V2,
}

/// The associated data of a sealed document: it binds the blob to its
/// form, profile, index and identifier, and, when the session has one, to
/// its context (a table's incarnation: a record of a dropped table of the
/// same name does not open in the table created after it).
fn doc_aad(form: Form, profile_id: &str, index: &str, id: DocId, context: &[u8]) -> Vec<u8> {
    let mut aad = match form {
        Form::V1 => b"sesame-client/document/v1\0".to_vec(),
        Form::V2 => b"sesame-client/document/v2\0".to_vec(),
    };
    for part in [profile_id, index] {
        aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
        aad.extend_from_slice(part.as_bytes());
    }
    aad.extend_from_slice(&id.to_be_bytes());
    if !context.is_empty() {
        aad.extend_from_slice(b"context");
        aad.extend_from_slice(&(context.len() as u64).to_be_bytes());
        aad.extend_from_slice(context);
    }
    aad
}

/// Seals a document's record: packed ([`pack`]: compressed, padded to a
/// length class) under the current form's associated data.
fn seal_record(
    aead: &Aes256GcmSiv,
    rng: &mut ChaCha20Rng,
    compressor: &mut Compressor,
    aad: &[u8],
    record: &DocRecord,
) -> Result<Vec<u8>> {
    let encoded = Zeroizing::new(wire::encode(record)?);
    let plain = pack(&encoded, compressor)?;
    aead.seal(rng, aad, &plain)
        .map_err(|_| ClientError::InvalidArgument("a document is too large to seal".into()))
}

/// Opens a sealed document of either form: the current one first, then
/// the form of builds before compression (so their documents still open:
/// an AEAD that fails under one associated data is tried under the
/// other). `None`: it opens under neither, or does not decode.
fn open_record(
    aead: &Aes256GcmSiv,
    aad: impl Fn(Form) -> Vec<u8>,
    blob: &[u8],
) -> Option<DocRecord> {
    if let Ok(plain) = aead.open(&aad(Form::V2), blob) {
        let plain = Zeroizing::new(plain);
        return wire::decode(&unpack(&plain)?).ok();
    }
    let plain = Zeroizing::new(aead.open(&aad(Form::V1), blob).ok()?);
    wire::decode(&plain).ok()
}

/// Seals documents and stores them through a document channel, in
/// batches under the message limit. `Send`: a static rebuild stores the
/// documents on another thread while it builds the index.
pub(crate) struct DocWriter {
    aead: Arc<Aes256GcmSiv>,
    profile_id: String,
    index: String,
    context: Vec<u8>,
    rng: ChaCha20Rng,
    compressor: Compressor,
    limit: u64,
    max_documents: usize,
    channel: Box<dyn Channel + Send>,
}

impl DocWriter {
    fn seal(&mut self, id: DocId, file: &NewFile) -> Result<Vec<u8>> {
        let record = DocRecord {
            path: file.path.to_string_lossy().into_owned(),
            content: file.content.clone(),
        };
        let aad = doc_aad(Form::V2, &self.profile_id, &self.index, id, &self.context);
        seal_record(
            &self.aead,
            &mut self.rng,
            &mut self.compressor,
            &aad,
            &record,
        )
        .map_err(|e| match e {
            ClientError::InvalidArgument(_) => {
                ClientError::InvalidArgument(format!("document {id}: {e}"))
            }
            e => e,
        })
    }

    /// Seals and stores `batch`, in order, calling `stored(n)` once the
    /// first `n` documents are stored.
    pub(crate) fn store(
        mut self,
        batch: &[(DocId, &NewFile)],
        stored: &mut dyn FnMut(usize),
    ) -> Result<()> {
        let mut pending = Vec::new();
        let mut bytes = 0u64;
        for (i, (id, file)) in batch.iter().enumerate() {
            let blob = self.seal(*id, file)?;
            if !pending.is_empty()
                && (bytes + blob.len() as u64 > self.limit || pending.len() >= self.max_documents)
            {
                DocClient::put(self.channel.as_mut(), std::mem::take(&mut pending))?;
                stored(i);
                bytes = 0;
            }
            bytes += blob.len() as u64;
            pending.push((*id, blob));
        }
        if !pending.is_empty() {
            DocClient::put(self.channel.as_mut(), pending)?;
        }
        stored(batch.len());
        Ok(())
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

    pub(crate) fn open_document(&self, id: DocId, blob: &[u8]) -> Result<DocRecord> {
        let aad = |form| doc_aad(form, &self.profile_id, &self.index, id, &self.doc_context);
        open_record(&self.docs, aad, blob).ok_or(ClientError::DocumentCorrupt(id))
    }

    /// What sealing and storing documents needs, taken from the session
    /// so that another thread can do it while the session builds an index
    /// (its own generator, seeded from the session's).
    pub(crate) fn doc_writer(&mut self) -> Result<DocWriter> {
        Ok(DocWriter {
            aead: Arc::clone(&self.docs),
            profile_id: self.profile_id.clone(),
            index: self.index.clone(),
            context: self.doc_context.clone(),
            rng: ChaCha20Rng::from_rng(&mut self.rng)
                .map_err(|e| ClientError::InvalidArgument(format!("a generator failed: {e}")))?,
            compressor: Compressor::new()?,
            limit: self.batch_bytes(),
            max_documents: self.max_documents,
            channel: self.backend.document_channel(&self.index)?,
        })
    }

    /// The sealed blob of catalogued document `id`, read within the size
    /// its catalog entry allows ([`stored_bound`]).
    pub(crate) fn fetch_blob(&self, channel: &mut dyn Channel, id: DocId) -> Result<Vec<u8>> {
        let doc = self
            .state
            .catalog
            .get(&id)
            .ok_or(ClientError::UnknownDocument(id))?;
        DocClient::get_within(channel, &[(id, stored_bound(doc))])?
            .pop()
            .flatten()
            .ok_or(ClientError::DocumentMissing(id))
    }

    /// Fetches and decrypts stored documents in batches, handing each
    /// (document, record) to `each`; `phase` is reported as progress. A
    /// document whose content differs from the digest its catalog entry
    /// recorded is handed over as [`ClientError::DocumentNotAsAdded`].
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
            let bounds: Vec<(DocId, u64)> = chunk.iter().map(|d| (d.id, stored_bound(d))).collect();
            let blobs = DocClient::get_within(channel.as_mut(), &bounds)?;
            for (doc, blob) in chunk.iter().zip(blobs) {
                let record = match blob {
                    Some(blob) => self
                        .open_document(doc.id, &blob)
                        .and_then(|r| check_digest(doc, r)),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn record(content: &[u8]) -> DocRecord {
        DocRecord {
            path: "dir/file.txt".into(),
            content: content.to_vec(),
        }
    }

    #[test]
    fn documents_sealed_before_compression_still_open() {
        let aead = Aes256GcmSiv::from_slice(&[7; 32]).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let aad = |form| doc_aad(form, "p1", "default", 42, b"");
        let content = b"the earlier form: the encoded record, sealed as it is ".repeat(40);
        // As builds before compression sealed a document.
        let plain = wire::encode(&record(&content)).unwrap();
        let old = aead.seal(&mut rng, &aad(Form::V1), &plain).unwrap();
        let opened = open_record(&aead, aad, &old).unwrap();
        assert_eq!(opened.content, content);
        assert_eq!(opened.path, "dir/file.txt");

        // The current form opens too, and is shorter for text.
        let mut c = Compressor::new().unwrap();
        let new = seal_record(&aead, &mut rng, &mut c, &aad(Form::V2), &record(&content)).unwrap();
        assert!(
            new.len() * 4 < old.len(),
            "{} against {}",
            new.len(),
            old.len()
        );
        assert_eq!(open_record(&aead, aad, &new).unwrap().content, content);

        // Under another identifier neither opens; nor does an altered blob.
        let other = |form| doc_aad(form, "p1", "default", 43, b"");
        assert!(open_record(&aead, other, &old).is_none());
        assert!(open_record(&aead, other, &new).is_none());
        let mut altered = new.clone();
        altered[20] ^= 1;
        assert!(open_record(&aead, aad, &altered).is_none());
    }
}
