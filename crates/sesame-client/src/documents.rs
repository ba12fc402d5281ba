//! The session's documents: sealing and opening them, storing them in
//! batches under the server's message limit, reading back their keywords,
//! and deleting the stored documents the catalog no longer needs.

use std::sync::Arc;

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
    /// The encoded record (path and content) sealed as it is (builds
    /// before compression).
    V1,
    /// The encoded record (path and content) packed
    /// ([`crate::stored::pack`]): compressed and padded to a length class,
    /// or stored as it is behind a header.
    V2,
    /// The content alone packed ([`crate::stored::pack`]); the path is
    /// not stored but bound by the associated data, and comes from the
    /// catalog when the document is opened. A table's record is a few
    /// dozen bytes, its path (the record's name) as long again: storing
    /// it once in the catalog instead of in every blob as well saves the
    /// path and the record encoding's framing (3 bytes) per document.
    V3,
    /// As [`Form::V3`], sealed under one fixed nonce that is not stored
    /// ([`seal_content`]): 12 bytes fewer a document. AES-GCM-SIV under a
    /// repeated nonce is a deterministic authenticated encryption (RFC
    /// 8452, section 9): it reveals whether two sealed (associated data,
    /// plaintext) pairs are equal and nothing else, and the associated
    /// data holds the document's identifier, which the server sees as the
    /// blob's name: equal blobs are the same document sealed again with
    /// the same content (a write sent again), which the server sees as
    /// such anyway.
    V4,
}

/// The nonce of every document of [`Form::V4`].
const FIXED_NONCE: [u8; 12] = [0; 12];

/// The associated data of a sealed document: it binds the blob to its
/// form, profile, index and identifier, in form [`Form::V3`] to its path
/// (which the blob no longer holds), and, when the session has one, to
/// its context (a table's incarnation: a record of a dropped table of the
/// same name does not open in the table created after it).
fn doc_aad(
    form: Form,
    profile_id: &str,
    index: &str,
    id: DocId,
    path: &str,
    context: &[u8],
) -> Vec<u8> {
    let tag: &[u8] = match form {
        Form::V1 => b"sesame-client/document/v1\0",
        Form::V2 => b"sesame-client/document/v2\0",
        Form::V3 => b"sesame-client/document/v3\0",
        Form::V4 => b"sesame-client/document/v4\0",
    };
    // Sized once: every record's open builds one (growing it by
    // reallocation showed in a point query's profile).
    let mut aad = Vec::with_capacity(
        tag.len() + profile_id.len() + index.len() + path.len() + context.len() + 55,
    );
    aad.extend_from_slice(tag);
    for part in [profile_id, index] {
        aad.extend_from_slice(&(part.len() as u64).to_be_bytes());
        aad.extend_from_slice(part.as_bytes());
    }
    aad.extend_from_slice(&id.to_be_bytes());
    if let Form::V3 | Form::V4 = form {
        aad.extend_from_slice(&(path.len() as u64).to_be_bytes());
        aad.extend_from_slice(path.as_bytes());
    }
    if !context.is_empty() {
        aad.extend_from_slice(b"context");
        aad.extend_from_slice(&(context.len() as u64).to_be_bytes());
        aad.extend_from_slice(context);
    }
    aad
}

/// Seals a document's content in form [`Form::V4`]: packed ([`pack`]:
/// compressed, padded to a length class) under `aad` (the associated
/// data of that form, which binds its path) and the fixed nonce, which
/// the blob does not hold.
fn seal_content(
    aead: &Aes256GcmSiv,
    compressor: &mut Compressor,
    aad: &[u8],
    content: &[u8],
) -> Result<Vec<u8>> {
    let plain = pack(content, compressor)?;
    let mut sealed = aead
        .seal_with_nonce(&FIXED_NONCE, aad, &plain)
        .map_err(|_| ClientError::InvalidArgument("a document is too large to seal".into()))?;
    sealed.drain(..FIXED_NONCE.len());
    Ok(sealed)
}

/// Opens a blob of [`Form::V4`] under the fixed nonce.
fn open_v4(aead: &Aes256GcmSiv, aad: &[u8], blob: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
    aead.open_with_nonce(&FIXED_NONCE, aad, blob)
        .ok()
        .map(Zeroizing::new)
}

/// Opens a sealed document of any form, as the document at `path`: the
/// current form first, then those of earlier builds (so their documents
/// still open: an AEAD that fails under one associated data is tried
/// under the next). `None`: it opens under none, or does not decode. A
/// blob of form [`Form::V3`] or [`Form::V4`] opens only under the path
/// it was sealed with.
fn open_record(
    aead: &Aes256GcmSiv,
    aad: impl Fn(Form) -> Vec<u8>,
    blob: &[u8],
    path: &str,
) -> Option<DocRecord> {
    let plain = open_v4(aead, &aad(Form::V4), blob)
        .or_else(|| aead.open(&aad(Form::V3), blob).ok().map(Zeroizing::new));
    if let Some(plain) = plain {
        let mut content = unpack(&plain)?;
        return Some(DocRecord {
            path: path.to_owned(),
            content: std::mem::take(&mut *content),
        });
    }
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
    compressor: Compressor,
    limit: u64,
    max_documents: usize,
    channel: Box<dyn Channel + Send>,
}

impl DocWriter {
    fn seal(&mut self, id: DocId, file: &NewFile) -> Result<Vec<u8>> {
        let path = file.path.to_string_lossy();
        let aad = doc_aad(
            Form::V4,
            &self.profile_id,
            &self.index,
            id,
            &path,
            &self.context,
        );
        seal_content(&self.aead, &mut self.compressor, &aad, &file.content).map_err(|e| match e {
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

    /// Opens the sealed blob of document `id`, catalogued at `path`.
    pub(crate) fn open_document(&self, id: DocId, path: &str, blob: &[u8]) -> Result<DocRecord> {
        let aad = |form| {
            doc_aad(
                form,
                &self.profile_id,
                &self.index,
                id,
                path,
                &self.doc_context,
            )
        };
        open_record(&self.docs, aad, blob, path).ok_or(ClientError::DocumentCorrupt(id))
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
            .get(&id)?
            .ok_or(ClientError::UnknownDocument(id))?;
        DocClient::get_within(channel, &[(id, stored_bound(&doc))])?
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
                        .open_document(doc.id, &doc.path, &blob)
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
            let record = record?;
            out.push(extract(&record.path, &record.content));
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
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    const PATH: &str = "dir/file.txt";

    fn record(content: &[u8]) -> DocRecord {
        DocRecord {
            path: PATH.into(),
            content: content.to_vec(),
        }
    }

    /// Documents of every earlier form still open, the current form is the
    /// shortest, and none opens under another identifier, another path
    /// (the current form binds it without storing it) or altered.
    #[test]
    fn documents_of_every_form_open_and_only_as_sealed() {
        let aead = Aes256GcmSiv::from_slice(&[7; 32]).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let aad = |form| doc_aad(form, "p1", "default", 42, PATH, b"");
        let content = b"the earlier form: the encoded record, sealed as it is ".repeat(40);
        // As builds before compression sealed a document.
        let plain = wire::encode(&record(&content)).unwrap();
        let v1 = aead.seal(&mut rng, &aad(Form::V1), &plain).unwrap();
        let opened = open_record(&aead, aad, &v1, PATH).unwrap();
        assert_eq!(opened.content, content);
        assert_eq!(opened.path, PATH);

        // As builds before the path left the blob sealed one: packed.
        let mut c = Compressor::new().unwrap();
        let packed = pack(&plain, &mut c).unwrap();
        let v2 = aead.seal(&mut rng, &aad(Form::V2), &packed).unwrap();
        assert!(v2.len() * 4 < v1.len(), "{} against {}", v2.len(), v1.len());
        assert_eq!(open_record(&aead, aad, &v2, PATH).unwrap().content, content);

        // As builds before the fixed nonce sealed one: the content alone,
        // the path bound, a random nonce stored.
        let v3 = aead
            .seal(&mut rng, &aad(Form::V3), &pack(&content, &mut c).unwrap())
            .unwrap();
        let opened = open_record(&aead, aad, &v3, PATH).unwrap();
        assert_eq!((opened.path.as_str(), &opened.content), (PATH, &content));

        // The current form: as V3, under the fixed nonce, not stored: 12
        // bytes fewer, and the same document sealed again is the same blob.
        let v4 = seal_content(&aead, &mut c, &aad(Form::V4), &content).unwrap();
        let opened = open_record(&aead, aad, &v4, PATH).unwrap();
        assert_eq!((opened.path.as_str(), &opened.content), (PATH, &content));
        assert_eq!(v3.len() - v4.len(), 12);
        assert_eq!(
            seal_content(&aead, &mut c, &aad(Form::V4), &content).unwrap(),
            v4
        );
        let other_id = |form| doc_aad(form, "p1", "default", 43, PATH, b"");
        assert_ne!(
            seal_content(&aead, &mut c, &aad(Form::V4), b"x").unwrap(),
            seal_content(&aead, &mut c, &other_id(Form::V4), b"x").unwrap()
        );

        // A small record: the path and the framing are what the current
        // form saves (a record this short is stored as it is).
        let small = b"a record of a few dozen bytes".to_vec();
        let small_v2 = aead
            .seal(
                &mut rng,
                &aad(Form::V2),
                &pack(&wire::encode(&record(&small)).unwrap(), &mut c).unwrap(),
            )
            .unwrap();
        let small_v3 = aead
            .seal(&mut rng, &aad(Form::V3), &pack(&small, &mut c).unwrap())
            .unwrap();
        assert_eq!(small_v2.len() - small_v3.len(), PATH.len() + 3);

        // Under another identifier none opens; the current form not under
        // another path either; nor does an altered blob.
        let other = |form| doc_aad(form, "p1", "default", 43, PATH, b"");
        for blob in [&v1, &v2, &v3, &v4] {
            assert!(open_record(&aead, other, blob, PATH).is_none());
        }
        let moved = |form| doc_aad(form, "p1", "default", 42, "dir/other.txt", b"");
        for blob in [&v3, &v4] {
            assert!(open_record(&aead, moved, blob, "dir/other.txt").is_none());
            for at in [0, 5, 20, blob.len() - 1] {
                let mut altered = blob.clone();
                altered[at] ^= 1;
                assert!(open_record(&aead, aad, &altered, PATH).is_none(), "{at}");
            }
            assert!(open_record(&aead, aad, &blob[..blob.len() - 1], PATH).is_none());
        }
    }
}
