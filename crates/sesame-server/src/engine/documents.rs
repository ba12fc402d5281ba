//! Encrypted documents stored beside an index: put (never replacing
//! other content), get, delete and list, each write committed with the
//! index's document count and replay record.

use sesame_core::WriteBatch;
use sesame_store::documents;

use super::{request_id, Engine, RequestDigest};
use crate::error::EngineError;
use crate::keys;
use crate::proto;

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
        let lock = self.lock_of(tenant, &req.index);
        let _g = lock.write();
        self.until_committed(|| self.put_documents_once(tenant, &req, id.as_ref(), digest))
    }

    fn put_documents_once(
        &self,
        tenant: &str,
        req: &proto::PutDocumentsRequest,
        id: Option<&[u8; 16]>,
        digest: Option<[u8; 32]>,
    ) -> Result<Option<proto::PutDocumentsResponse>, EngineError> {
        let (seen, mut meta) = self.meta_for_write(tenant, &req.index, id.zip(digest.as_ref()))?;
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
        let mut batch = WriteBatch::with_capacity(docs.len() * 2 + 3);
        documents::put(&mut batch, &prefix, new);
        let bytes: usize = batch
            .ops()
            .iter()
            .map(|op| match op {
                sesame_core::WriteOp::Put { key, value } => key.len() + value.len(),
                sesame_core::WriteOp::Delete { key } => key.len(),
            })
            .sum();
        if bytes > self.limits.max_transaction_bytes {
            return Err(EngineError::ResourceExhausted(format!(
                "the request writes more than the server's limit of {} bytes per transaction",
                self.limits.max_transaction_bytes
            )));
        }
        meta.documents += added;
        self.log_batch(tenant, &req.index, "PutDocuments", &batch)?;
        let response = proto::PutDocumentsResponse { added };
        self.commit_answer(
            &mut batch,
            &mut meta,
            (tenant, &req.index),
            id.zip(digest),
            response,
            &seen,
        )
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
        let lock = self.lock_of(tenant, &req.index);
        let _g = lock.write();
        self.until_committed(|| self.delete_documents_once(tenant, &req, id.as_ref(), digest))
    }

    fn delete_documents_once(
        &self,
        tenant: &str,
        req: &proto::DeleteDocumentsRequest,
        id: Option<&[u8; 16]>,
        digest: Option<[u8; 32]>,
    ) -> Result<Option<proto::DeleteDocumentsResponse>, EngineError> {
        let (seen, mut meta) = self.meta_for_write(tenant, &req.index, id.zip(digest.as_ref()))?;
        let prefix = keys::doc_prefix(tenant, &req.index);
        let mut batch = WriteBatch::new();
        let deleted = documents::delete(self.store.as_ref(), &prefix, &req.ids, &mut batch)?;
        let gone = deleted.iter().filter(|&&d| d).count();
        meta.documents = meta.documents.saturating_sub(gone as u64);
        let response = proto::DeleteDocumentsResponse { deleted };
        self.log_batch(tenant, &req.index, "DeleteDocuments", &batch)?;
        self.commit_answer(
            &mut batch,
            &mut meta,
            (tenant, &req.index),
            id.zip(digest),
            response,
            &seen,
        )
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
