//! Limits and budgets: what one request may carry and write, and the
//! bytes of uploads the server holds in memory before their commit, in
//! all and per tenant. Over a limit is `RESOURCE_EXHAUSTED`, with nothing
//! applied.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::Engine;
use crate::error::EngineError;
use crate::proto;

/// Limits a request is held to; over a limit is `RESOURCE_EXHAUSTED`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Indexes a tenant may hold.
    pub max_indexes_per_tenant: usize,
    /// Scheme messages in one call.
    pub max_messages_per_call: usize,
    /// Documents in one put, get or delete.
    pub max_documents_per_request: usize,
    /// Bytes of writes one call or one upload may buffer before its commit.
    pub max_transaction_bytes: usize,
    /// The largest gRPC message the server accepts (set from the server's
    /// configuration; told to clients by `Health`).
    pub max_message_bytes: usize,
    /// Bytes of uploads buffered before their commit, all tenants
    /// together; beyond, an upload message is refused.
    pub max_buffer_bytes: usize,
    /// The same, for one tenant.
    pub max_tenant_buffer_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_indexes_per_tenant: 100,
            max_messages_per_call: 100_000,
            max_documents_per_request: 100_000,
            max_transaction_bytes: 1 << 30,
            max_message_bytes: proto::DEFAULT_MAX_MESSAGE,
            max_buffer_bytes: 2 << 30,
            max_tenant_buffer_bytes: 1 << 30,
        }
    }
}

/// Bytes of uploads buffered in memory and not yet committed, in all and
/// per tenant, held under [`Limits::max_buffer_bytes`] and
/// [`Limits::max_tenant_buffer_bytes`].
#[derive(Debug, Default)]
pub struct UploadBudget {
    held: Mutex<(usize, HashMap<String, usize>)>,
}

impl UploadBudget {
    /// Bytes held now, all tenants together.
    pub fn total(&self) -> usize {
        self.held.lock().unwrap_or_else(PoisonError::into_inner).0
    }

    /// Adds `bytes` to `charge`, or refuses them (holding nothing more)
    /// when the server or the tenant would go over its limit.
    pub(super) fn charge(
        &self,
        charge: &mut Charge,
        bytes: usize,
        limits: &Limits,
    ) -> Result<(), EngineError> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let tenant = held.1.get(&charge.tenant).copied().unwrap_or(0);
        if held.0.saturating_add(bytes) > limits.max_buffer_bytes {
            return Err(EngineError::ResourceExhausted(format!(
                "the server holds {} bytes of uploads not yet committed, its limit is {}; \
                 the upload was dropped, send it again later",
                held.0, limits.max_buffer_bytes
            )));
        }
        if tenant.saturating_add(bytes) > limits.max_tenant_buffer_bytes {
            return Err(EngineError::ResourceExhausted(format!(
                "this tenant's uploads not yet committed hold {tenant} bytes, the limit is {}; \
                 the upload was dropped, commit or finish other uploads first",
                limits.max_tenant_buffer_bytes
            )));
        }
        held.0 += bytes;
        *held.1.entry(charge.tenant.clone()).or_default() += bytes;
        charge.bytes += bytes;
        Ok(())
    }

    fn release(&self, tenant: &str, bytes: usize) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.0 = held.0.saturating_sub(bytes);
        if let Some(n) = held.1.get_mut(tenant) {
            *n = n.saturating_sub(bytes);
            if *n == 0 {
                held.1.remove(tenant);
            }
        }
    }
}

/// What one upload holds of the [`UploadBudget`]; given back when the
/// upload is committed or dropped.
pub(super) struct Charge {
    pub(super) budget: Arc<UploadBudget>,
    pub(super) tenant: String,
    pub(super) bytes: usize,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.release(&self.tenant, self.bytes);
    }
}

impl Engine {
    /// Bytes of uploads held before their commit.
    pub fn uploads(&self) -> Arc<UploadBudget> {
        self.uploads.clone()
    }

    pub(super) fn check_documents(&self, n: usize) -> Result<(), EngineError> {
        if n > self.limits.max_documents_per_request {
            return Err(EngineError::ResourceExhausted(format!(
                "a request names at most {} documents",
                self.limits.max_documents_per_request
            )));
        }
        Ok(())
    }
}

pub(super) fn check_record_count(n: usize, max: usize) -> Result<(), EngineError> {
    if n > max {
        return Err(EngineError::ResourceExhausted(format!(
            "a request names at most {max} records"
        )));
    }
    Ok(())
}
