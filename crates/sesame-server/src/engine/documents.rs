//! Encrypted documents stored beside an index: put (never replacing
//! other content), get, delete and list, each write committed with the
//! index's document count and replay record.

use sesame_core::WriteBatch;
use sesame_store::documents;

use super::{request_id, Engine, RequestDigest};
use crate::error::EngineError;
use crate::keys;
use crate::proto;
use crate::records::IndexMeta;

impl Engine {
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
        let prefix = keys::doc_prefix(tenant, &req.index);
        // A stored document is never replaced by other content: two
        // clients sharing one profile's ids would otherwise lose one's
        // documents silently. The same content again is a no-op.
        let docs: Vec<(u64, &[u8])> = req
            .documents
            .iter()
            .map(|d| (d.id, d.blob.as_slice()))
            .collect();
        let new = documents::new_documents(self.store.as_ref(), &prefix, &docs)?.map_err(
            |documents::Conflict(id)| {
                EngineError::Conflict(format!(
                    "document {id} is already stored with other content; nothing was stored \
                     (is another client using the same profile?)"
                ))
            },
        )?;
        let added = new.len() as u64;
        documents::put(batch, &prefix, new);
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
        let prefix = keys::doc_prefix(tenant, &req.index);
        let found = documents::read(self.store.as_ref(), &prefix, &req.ids)?;
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
                let prefix = keys::doc_prefix(tenant, &req.index);
                let deleted = documents::delete(self.store.as_ref(), &prefix, &req.ids, batch)?;
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
        let prefix = keys::doc_prefix(tenant, &req.index);
        let ids = documents::list(self.store.as_ref(), &prefix)?;
        Ok(proto::ListDocumentsResponse { ids })
    }
}
