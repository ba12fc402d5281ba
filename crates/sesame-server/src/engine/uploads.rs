//! Bulk uploads: a stream of scheme messages into one generation of an
//! index, each run by the upload's own scheme server over a transaction
//! and buffered (within the upload budget, `limits.rs`) until the upload
//! is committed in one transaction. Nothing is visible before.

use std::sync::Arc;

use sesame_core::{wire, ServerReport, Service, Store, WriteBatch};
use sesame_store::overlay::Overlay;
use sesame_store::packed::Packed;

use super::limits::Charge;
use super::{request_id, Engine, RequestDigest};
use crate::error::EngineError;
use crate::keys;
use crate::proto;

/// An upload in progress: its own scheme server over a transaction on the
/// generation being built. Nothing is visible until
/// [`Engine::commit_upload`].
pub struct Upload {
    tenant: String,
    index: String,
    generation: u64,
    request_id: Option<[u8; 16]>,
    digest: RequestDigest,
    overlay: Arc<Overlay>,
    /// The packed view under the overlay, for a packed index.
    packed: Option<Arc<Packed>>,
    server: Box<dyn Service>,
    /// With `--record-view`: what `server` sees.
    view: Option<sesame_core::view::View>,
    messages: u64,
    charge: Charge,
}

impl std::fmt::Debug for Upload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upload")
            .field("index", &self.index)
            .field("generation", &self.generation)
            .field("messages", &self.messages)
            .finish_non_exhaustive()
    }
}

impl Upload {
    /// Bytes of writes buffered so far.
    pub fn buffered_bytes(&self) -> usize {
        self.overlay.buffered_bytes()
    }
}

impl Engine {
    /// Starts an upload into generation `start.generation` of an index.
    pub fn start_upload(
        &self,
        tenant: &str,
        start: proto::UploadStart,
    ) -> Result<Upload, EngineError> {
        keys::check_name("index", &start.index)?;
        let id = request_id(&start.request_id)?;
        let meta = self.meta(tenant, &start.index)?;
        let scheme = Self::scheme_of(&meta, &start.index, &start.scheme)?;
        let (overlay, packed) =
            self.transaction(&meta, (tenant, &start.index), start.generation, None);
        // With `--record-view`, each message's view is its own operation.
        let view = self.new_view();
        let server = scheme.server_over(&overlay, view.as_ref())?;
        let mut digest = RequestDigest::new("upload");
        digest
            .part(start.index.as_bytes())
            .part(start.scheme.as_bytes())
            .part(&start.generation.to_be_bytes());
        Ok(Upload {
            tenant: tenant.to_owned(),
            index: start.index,
            generation: start.generation,
            request_id: id,
            digest,
            overlay,
            packed,
            server,
            view,
            messages: 0,
            charge: Charge {
                budget: self.uploads.clone(),
                tenant: tenant.to_owned(),
                bytes: 0,
            },
        })
    }

    /// Handles one message of an upload (buffered, not yet visible).
    pub fn upload_message(
        &self,
        upload: &mut Upload,
        message: &[u8],
    ) -> Result<proto::UploadResponse, EngineError> {
        let buffered = upload.overlay.buffered_bytes();
        let overlay = upload.overlay.clone();
        let server = &mut upload.server;
        let (result, report) =
            ServerReport::measure(|| overlay.io_counts(), || server.handle(message));
        if let (Some(log), Some(v)) = (&self.view_log, &upload.view) {
            log.operation(&upload.tenant, &upload.index, "Upload", &v.take())?;
        }
        let response = result.map_err(|e| {
            if upload.overlay.over_limit() {
                EngineError::ResourceExhausted(format!(
                    "the upload writes more than the server's limit of {} bytes",
                    self.limits.max_transaction_bytes
                ))
            } else {
                EngineError::from_core(e)
            }
        })?;
        // Held in memory until the commit: within the server's and the
        // tenant's budget, or the upload ends here (its bytes are given
        // back when it is dropped).
        let added = upload.overlay.buffered_bytes().saturating_sub(buffered);
        self.uploads
            .charge(&mut upload.charge, added, &self.limits)?;
        upload.messages += 1;
        upload.digest.part(message);
        Ok(proto::UploadResponse {
            message: response,
            committed: false,
            report: wire::encode(&report)?,
        })
    }

    /// Commits an upload: every entry it wrote, the index's metadata and
    /// (given a request id) the replay record, in one transaction.
    pub fn commit_upload(&self, upload: Upload) -> Result<proto::UploadResponse, EngineError> {
        let Upload {
            tenant,
            index,
            generation,
            request_id,
            digest,
            overlay,
            packed,
            ..
        } = upload;
        let digest = digest.finish();
        // Plain writes are the batch itself (a failed commit takes back
        // what it added); packed ones are planned into it on every try.
        let (mut batch, mut writes) = (WriteBatch::new(), WriteBatch::new());
        overlay.drain_into(if packed.is_some() {
            &mut writes
        } else {
            &mut batch
        });
        self.commit_locked(&tenant, &index, || {
            // The index may have been dropped meanwhile.
            let (seen, mut meta) =
                self.meta_for_write(&tenant, &index, request_id.as_ref().zip(Some(&digest)))?;
            // Planned after the token is read: the commit is conditional
            // on it, so chunks changed since fail the commit.
            if let Some(packed) = &packed {
                batch = packed.plan(&writes)?.batch;
            }
            meta.uploads += 1;
            meta.generation = generation;
            let response = proto::UploadResponse {
                message: Vec::new(),
                committed: true,
                report: Vec::new(),
            };
            self.commit_answer(
                &mut batch,
                &mut meta,
                (&tenant, &index),
                request_id.as_ref().zip(Some(digest)),
                response,
                &seen,
            )
        })
    }
}
