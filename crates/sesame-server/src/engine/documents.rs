//! Encrypted documents stored beside an index: put (never replacing
//! other content), get, delete and list, each write committed with the
//! index's document count and replay record.
//!
//! **Packed documents.** An index's documents lie in the layout of
//! `sesame_store::documents` under `d/<tenant>/<index>/`, one stored pair
//! per document (a head) and per piece of a long one; or, for an index
//! whose first put asked for it (`PutDocumentsRequest.packed`: a table's
//! records, tens of bytes each) on a store with ordered probes (redb),
//! in that same layout inside a packed view (`sesame_store::packed`)
//! under `d/<tenant>/<index>/#`, as an embedded profile keeps a table's
//! records (`docs/storage.md`, "Packed entries"). Which layout an index
//! has is read off the store, by one bounded probe of the first key under
//! its prefix ([`Engine::doc_layout`]): an index that holds documents
//! keeps their layout whatever a request says, so a client of an earlier
//! build (which never asks) and one of this build share an index safely.
//! Stored plain, the flights' records were 40.0 MB of keys and values on
//! the server (a 60-byte key each); packed, 21.2 MB (`docs/performance.md`,
//! "A compact catalog and chunks that state their keys' prefix once").

use std::sync::Arc;

use sesame_core::{Store, WriteBatch, WriteOp};
use sesame_store::documents;
use sesame_store::packed::{Packed, CHUNKS_MARK};

use super::{request_id, Engine, RequestDigest};
use crate::error::EngineError;
use crate::keys;
use crate::proto;
use crate::records::IndexMeta;

/// Where an index's documents lie ([`Engine::doc_layout`]): the store
/// their layout's keys are read from and the prefix of those keys, and
/// the packed view whose plan turns a write into the base store's writes
/// (`None`: plain, written as they are).
struct DocLayout {
    store: Arc<dyn Store>,
    prefix: Vec<u8>,
    packed: Option<Arc<Packed>>,
}

impl DocLayout {
    /// Adds to `batch` the store writes of the documents' writes `writes`.
    fn apply(&self, writes: WriteBatch, batch: &mut WriteBatch) -> Result<(), EngineError> {
        let writes = match &self.packed {
            Some(packed) => packed.plan(&writes)?.batch,
            None => writes,
        };
        for op in writes.into_ops() {
            match op {
                WriteOp::Put { key, value } => batch.put(key, value),
                WriteOp::Delete { key } => batch.delete(key),
            };
        }
        Ok(())
    }
}

impl Engine {
    /// The layout of the documents of `index` (see the module's
    /// documentation): packed where its prefix holds a packed view's
    /// chunks, or holds nothing and `asked` on a store with ordered
    /// probes; else plain.
    fn doc_layout(&self, tenant: &str, index: &str, asked: bool) -> Result<DocLayout, EngineError> {
        let prefix = keys::doc_prefix(tenant, index);
        // A store without ordered probes never holds packed documents,
        // and its `scan_from` would read every document under the
        // prefix: it is not probed.
        let packed = self.store.ordered_probes() && {
            let first = self.store.scan_from(&prefix, &prefix, false, 1)?;
            match first.first() {
                Some((key, _)) => key.get(prefix.len()) == Some(&CHUNKS_MARK),
                None => asked,
            }
        };
        if !packed {
            return Ok(DocLayout {
                store: self.store.clone(),
                prefix,
                packed: None,
            });
        }
        let mut chunks = prefix;
        chunks.push(CHUNKS_MARK);
        let view = Arc::new(Packed::new(self.store.clone(), chunks));
        Ok(DocLayout {
            store: view.clone(),
            prefix: Vec::new(),
            packed: Some(view),
        })
    }

    /// Stores encrypted documents, with the index's document count (and
    /// the replay record) in the same transaction.
    pub fn put_documents(
        &self,
        tenant: &str,
        req: proto::PutDocumentsRequest,
    ) -> Result<proto::PutDocumentsResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        self.check_documents(req.documents.len())?;
        let id = request_id(&req.request_id)?;
        let digest = id.map(|_| {
            let mut d = RequestDigest::new("put-documents");
            d.part(req.index.as_bytes());
            for doc in &req.documents {
                d.part(&doc.id.to_be_bytes()).part(&doc.blob);
            }
            d.finish()
        });
        let replay = id.as_ref().zip(digest.as_ref());
        self.write_documents(tenant, &req.index, "PutDocuments", replay, |meta, batch| {
            self.put_documents_once(tenant, &req, meta, batch)
        })
    }

    /// One try of [`Engine::put_documents`]: its writes into `batch`.
    fn put_documents_once(
        &self,
        tenant: &str,
        req: &proto::PutDocumentsRequest,
        meta: &mut IndexMeta,
        batch: &mut WriteBatch,
    ) -> Result<proto::PutDocumentsResponse, EngineError> {
        let layout = self.doc_layout(tenant, &req.index, req.packed)?;
        // A stored document is never replaced by other content: two
        // clients sharing one profile's ids would otherwise lose one's
        // documents silently. The same content again is a no-op.
        let docs: Vec<(u64, &[u8])> = req
            .documents
            .iter()
            .map(|d| (d.id, d.blob.as_slice()))
            .collect();
        let new = documents::new_documents(layout.store.as_ref(), &layout.prefix, &docs)?.map_err(
            |documents::Conflict(id)| {
                EngineError::Conflict(format!(
                    "document {id} is already stored with other content; nothing was stored \
                     (is another client using the same profile?)"
                ))
            },
        )?;
        let added = new.len() as u64;
        let mut writes = WriteBatch::new();
        documents::put(&mut writes, &layout.prefix, new);
        layout.apply(writes, batch)?;
        let bytes = batch.bytes();
        if bytes > self.limits.max_transaction_bytes {
            return Err(EngineError::ResourceExhausted(format!(
                "the request writes more than the server's limit of {} bytes per transaction",
                self.limits.max_transaction_bytes
            )));
        }
        meta.documents += added;
        Ok(proto::PutDocumentsResponse { added })
    }

    /// Encrypted documents, in the order asked.
    pub fn get_documents(
        &self,
        tenant: &str,
        req: proto::GetDocumentsRequest,
    ) -> Result<proto::GetDocumentsResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        self.check_documents(req.ids.len())?;
        let lock = self.lock_of(tenant, &req.index);
        let _g = lock.read();
        self.meta(tenant, &req.index)?;
        let layout = self.doc_layout(tenant, &req.index, false)?;
        let prefix = keys::doc_prefix(tenant, &req.index);
        let found = documents::read(layout.store.as_ref(), &layout.prefix, &req.ids)?;
        if let Some(log) = &self.view_log {
            let events: Vec<sesame_core::view::Event> = req
                .ids
                .iter()
                .zip(&found)
                .map(|(&id, v)| sesame_core::view::Event::Read {
                    key: documents::head_key(&prefix, id),
                    size: v.as_ref().map(Vec::len),
                })
                .collect();
            log.operation(tenant, &req.index, "GetDocuments", &events)?;
        }
        let documents = found
            .into_iter()
            .map(|v| proto::MaybeDocument {
                found: v.is_some(),
                blob: v.unwrap_or_default(),
            })
            .collect();
        Ok(proto::GetDocumentsResponse { documents })
    }

    /// Deletes documents.
    pub fn delete_documents(
        &self,
        tenant: &str,
        req: proto::DeleteDocumentsRequest,
    ) -> Result<proto::DeleteDocumentsResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        self.check_documents(req.ids.len())?;
        let id = request_id(&req.request_id)?;
        let digest = id.map(|_| {
            let mut d = RequestDigest::new("delete-documents");
            d.part(req.index.as_bytes());
            for i in &req.ids {
                d.part(&i.to_be_bytes());
            }
            d.finish()
        });
        let replay = id.as_ref().zip(digest.as_ref());
        self.write_documents(
            tenant,
            &req.index,
            "DeleteDocuments",
            replay,
            |meta, batch| {
                let layout = self.doc_layout(tenant, &req.index, false)?;
                let mut writes = WriteBatch::new();
                let deleted = documents::delete(
                    layout.store.as_ref(),
                    &layout.prefix,
                    &req.ids,
                    &mut writes,
                )?;
                layout.apply(writes, batch)?;
                let gone = deleted.iter().filter(|&&d| d).count();
                meta.documents = meta.documents.saturating_sub(gone as u64);
                Ok(proto::DeleteDocumentsResponse { deleted })
            },
        )
    }

    /// A write of documents (`method`, as the view log names it) under the
    /// index's exclusive lock until its commit lands: each try reads the
    /// token and metadata (refusing or answering a repeated request id,
    /// `replay`), lets `change` add its writes to a batch and update the
    /// metadata, and commits both with the answer `change` gave.
    fn write_documents<M: prost::Message>(
        &self,
        tenant: &str,
        index: &str,
        method: &str,
        replay: Option<(&[u8; 16], &[u8; 32])>,
        change: impl Fn(&mut IndexMeta, &mut WriteBatch) -> Result<M, EngineError>,
    ) -> Result<M, EngineError> {
        self.commit_locked(tenant, index, || {
            let (seen, mut meta) = self.meta_for_write(tenant, index, replay)?;
            let mut batch = WriteBatch::new();
            let response = change(&mut meta, &mut batch)?;
            self.log_batch(tenant, index, method, &batch)?;
            let replay = replay.map(|(id, digest)| (id, *digest));
            self.commit_answer(
                &mut batch,
                &mut meta,
                (tenant, index),
                replay,
                response,
                &seen,
            )
        })
    }

    /// Identifiers of every stored document, ascending.
    pub fn list_documents(
        &self,
        tenant: &str,
        req: proto::ListDocumentsRequest,
    ) -> Result<proto::ListDocumentsResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        let lock = self.lock_of(tenant, &req.index);
        let _g = lock.read();
        self.meta(tenant, &req.index)?;
        let layout = self.doc_layout(tenant, &req.index, false)?;
        let ids = documents::list(layout.store.as_ref(), &layout.prefix)?;
        Ok(proto::ListDocumentsResponse { ids })
    }
}
