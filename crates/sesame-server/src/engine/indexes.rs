//! Creating indexes: the name, the scheme and its parameters checked,
//! a place reserved under the tenant's limit, then the index's metadata
//! written on the condition that the name is free. A creation that
//! carries a request id writes its replay record in the same batch, so
//! that a retry after the first was applied (its answer or its replica
//! confirmation lost) gets the index's info instead of `ALREADY_EXISTS`.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use prost::Message;
use sesame_core::{wire, Params, WriteBatch};
use sesame_schemes::Scheme;

use super::{info, request_id, Engine, RequestDigest, MAX_COMMIT_ATTEMPTS};
use crate::error::EngineError;
use crate::keys;
use crate::proto;
use crate::records::{now_unix, IndexMeta, ReplayRecord};

/// A tenant's index names, each with when its place was reserved (Unix
/// seconds; 0 for indexes older than the record).
pub(super) type Places = BTreeMap<String, u64>;

/// How long a place reserved for a new index may stay without its index
/// before another creation takes it back: the server that reserved it
/// died before creating it.
pub(super) const RESERVATION_TTL_SECS: u64 = 300;

impl Engine {
    /// Creates an index bound to a scheme and its parameters.
    pub fn create_index(
        &self,
        tenant: &str,
        req: proto::CreateIndexRequest,
    ) -> Result<proto::IndexInfo, EngineError> {
        keys::check_name("index", &req.index)?;
        let scheme = sesame_schemes::get(&req.scheme)
            .filter(Scheme::hosted)
            .ok_or_else(|| {
                EngineError::InvalidArgument(format!(
                    "unknown scheme {:?} (a server hosts: {})",
                    req.scheme.chars().take(64).collect::<String>(),
                    sesame_schemes::hosted_names()
                ))
            })?;
        let params = Params::parse(&req.params)
            .map_err(|e| EngineError::InvalidArgument(format!("scheme parameters: {e}")))?;
        // The scheme checks its parameters when it makes a client; the
        // server half checks the ones it reads too.
        scheme
            .check_params(&params)
            .map_err(|e| EngineError::InvalidArgument(format!("scheme parameters: {e}")))?;

        let id = request_id(&req.request_id)?;
        let digest = {
            let mut d = RequestDigest::new("create-index");
            d.part(req.index.as_bytes())
                .part(scheme.name().as_bytes())
                .part(params.to_string().as_bytes());
            d.finish()
        };
        let _create = self.create.lock().unwrap_or_else(PoisonError::into_inner);
        // Sweeps left by a dropped index of this name (`engine/sweep.rs`).
        let _ = self.sweep(Some((tenant, &req.index)));
        let key = keys::meta_key(tenant, &req.index);
        if self.store.get(&key)?.is_some() {
            return self.created_before(tenant, &req.index, id.as_ref(), &digest);
        }
        self.reserve_place(tenant, &req.index)?;
        let lock = self.lock_of(tenant, &req.index);
        let _g = lock.write();
        // Remnants of an index of this name dropped halfway do not exist
        // (drops are one transaction), but a crash cannot leave any either.
        // The entries of a scheme whose server writes each one once are
        // spread (over a Redis Cluster's shards; one layout everywhere).
        // Entries read by point lookups are packed where the store has
        // ordered probes (not over a Redis Cluster, which spreads them).
        let server = scheme
            .server(Arc::new(sesame_store::MemoryStore::new()), &params)
            .map_err(EngineError::from_core)?;
        let meta = IndexMeta {
            scheme: scheme.name().to_owned(),
            params: params.to_string(),
            created_unix: now_unix(),
            spread: server.write_once(),
            packed: server.packable() && self.store.ordered_probes(),
            ..IndexMeta::default()
        };
        // Conditional on the name being free: another server may be
        // creating the same index at this moment.
        let answer = info(&req.index, &meta);
        let mut batch = WriteBatch::with_capacity(2);
        batch.put(key.clone(), meta.encode()?);
        if let Some(id) = &id {
            let record = ReplayRecord {
                digest,
                at_unix: now_unix(),
                response: answer.encode_to_vec(),
            };
            batch.put(keys::replay_key(tenant, &req.index, id), record.encode()?);
        }
        if !self.store.write_if(&[(key.as_slice(), None)], &batch)? {
            return self.created_before(tenant, &req.index, id.as_ref(), &digest);
        }
        Ok(answer)
    }

    /// The answer to a creation whose name is taken: the index's info
    /// when this very request (same id, same name, scheme and parameters)
    /// created it, its replay record written again so that the store
    /// confirms it as it confirms a commit; else `ALREADY_EXISTS`.
    fn created_before(
        &self,
        tenant: &str,
        index: &str,
        id: Option<&[u8; 16]>,
        digest: &[u8; 32],
    ) -> Result<proto::IndexInfo, EngineError> {
        let exists =
            || EngineError::AlreadyExists(format!("an index named {index:?} already exists"));
        let Some(id) = id else {
            return Err(exists());
        };
        let key = keys::replay_key(tenant, index, id);
        let Some(bytes) = self.store.get(&key)? else {
            return Err(exists());
        };
        let record = ReplayRecord::decode(&bytes)?;
        if &record.digest != digest {
            return Err(exists());
        }
        let answer = proto::IndexInfo::decode(record.response.as_slice()).map_err(|e| {
            EngineError::Internal(format!("a stored replay record is damaged ({e})"))
        })?;
        let mut again = WriteBatch::with_capacity(1);
        again.put(key, bytes);
        self.store.write(again)?;
        Ok(answer)
    }

    /// The tenant's index names, each with the time its place was
    /// reserved, and the stored record they were read from (absent before
    /// the first creation that kept one: then the names of the indexes
    /// that exist, reserved at time 0).
    pub(super) fn read_places(
        &self,
        tenant: &str,
    ) -> Result<(Option<Vec<u8>>, Places), EngineError> {
        let held = self.store.get(&keys::tenant_key(tenant))?;
        let names = match &held {
            Some(bytes) => wire::decode(bytes).map_err(|e| {
                EngineError::Internal(format!("a stored tenant record is damaged ({e})"))
            })?,
            None => {
                let prefix = keys::meta_prefix(tenant);
                self.store
                    .scan_prefix(&prefix)?
                    .into_iter()
                    .map(|(k, _)| (String::from_utf8_lossy(&k[prefix.len()..]).into_owned(), 0))
                    .collect()
            }
        };
        Ok((held, names))
    }

    /// Reserves the place of index `index` under the tenant's limit, as a
    /// conditional write of the tenant's record, so that servers creating
    /// indexes at once never pass it together. A place whose index does
    /// not exist [`RESERVATION_TTL_SECS`] after its reservation is taken
    /// back when the limit is reached.
    fn reserve_place(&self, tenant: &str, index: &str) -> Result<(), EngineError> {
        for _ in 0..MAX_COMMIT_ATTEMPTS {
            let (held, mut names) = self.read_places(tenant)?;
            if names.contains_key(index) {
                return Ok(());
            }
            let now = now_unix();
            if names.len() >= self.limits.max_indexes_per_tenant {
                let old: Vec<String> = names
                    .iter()
                    .filter(|(_, at)| now.saturating_sub(**at) > RESERVATION_TTL_SECS)
                    .map(|(n, _)| n.clone())
                    .collect();
                for name in old {
                    if self.store.get(&keys::meta_key(tenant, &name))?.is_none() {
                        names.remove(&name);
                    }
                }
            }
            if names.len() >= self.limits.max_indexes_per_tenant {
                return Err(EngineError::ResourceExhausted(format!(
                    "a tenant may hold at most {} indexes (drop one first)",
                    self.limits.max_indexes_per_tenant
                )));
            }
            names.insert(index.to_owned(), now);
            if self.write_places(tenant, held.as_deref(), &names)? {
                return Ok(());
            }
            self.conflicts.fetch_add(1, Ordering::Relaxed);
        }
        Err(EngineError::Unavailable(
            "other servers kept creating indexes of this tenant; nothing was applied: try again"
                .into(),
        ))
    }

    /// Gives back the place of a dropped index. A place left behind (the
    /// server died first) is taken back by a later creation.
    pub(super) fn release_place(&self, tenant: &str, index: &str) -> Result<(), EngineError> {
        for _ in 0..MAX_COMMIT_ATTEMPTS {
            let (held, mut names) = self.read_places(tenant)?;
            if held.is_none() || names.remove(index).is_none() {
                return Ok(());
            }
            if self.write_places(tenant, held.as_deref(), &names)? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Writes the tenant's record if it still holds `held`: `false`, and
    /// nothing written, when another creation or drop came first.
    fn write_places(
        &self,
        tenant: &str,
        held: Option<&[u8]>,
        names: &Places,
    ) -> Result<bool, EngineError> {
        let key = keys::tenant_key(tenant);
        let mut batch = WriteBatch::with_capacity(1);
        batch.put(key.clone(), wire::encode(names)?);
        Ok(self.store.write_if(&[(key.as_slice(), held)], &batch)?)
    }
}
