//! Index operations: creating, dropping and listing indexes, the
//! server's statistics, and dropping an index's old generations.
//!
//! Creating an index: the name, the scheme and its parameters checked,
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

impl Engine {
    /// Removes an index with its entries, documents and replay records, in
    /// one transaction, then gives back its place under the tenant's limit.
    pub fn drop_index(
        &self,
        tenant: &str,
        req: proto::DropIndexRequest,
    ) -> Result<proto::DropIndexResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        let lock = self.lock_of(tenant, &req.index);
        let _g = lock.write();
        let dropped = self.until_committed(|| self.drop_index_once(tenant, &req.index))?;
        self.release_place(tenant, &req.index)?;
        Ok(dropped)
    }

    fn drop_index_once(
        &self,
        tenant: &str,
        index: &str,
    ) -> Result<Option<proto::DropIndexResponse>, EngineError> {
        let (seen, meta) = self.token_and_meta(tenant, index)?;
        let mut batch = WriteBatch::new();
        for prefix in [
            meta.entries_prefix(tenant, index),
            keys::doc_prefix(tenant, index),
            keys::replay_prefix(tenant, index),
            keys::record_prefix(tenant, index),
            keys::sweep_prefix(tenant, index),
        ] {
            for (k, _) in self.store.scan_prefix(&prefix)? {
                batch.delete(k);
            }
        }
        let removed = batch.len() as u64;
        batch.delete(keys::meta_key(tenant, index));
        let token = keys::commit_key(tenant, index);
        batch.delete(token.clone());
        if !self.write_swept(
            &[(token.as_slice(), seen.as_deref())],
            &batch,
            (tenant, index),
        )? {
            self.conflicts.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        }
        Ok(Some(proto::DropIndexResponse { removed }))
    }

    /// The tenant's indexes, by name.
    pub fn list_indexes(
        &self,
        tenant: &str,
        _req: proto::ListIndexesRequest,
    ) -> Result<proto::ListIndexesResponse, EngineError> {
        let prefix = keys::meta_prefix(tenant);
        let mut indexes = Vec::new();
        for (k, v) in self.store.scan_prefix(&prefix)? {
            let name = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
            indexes.push(info(&name, &IndexMeta::decode(&v)?));
        }
        Ok(proto::ListIndexesResponse { indexes })
    }

    /// The tenant's indexes and the server's counters.
    pub fn stats(
        &self,
        tenant: &str,
        _req: proto::StatsRequest,
    ) -> Result<proto::StatsResponse, EngineError> {
        let indexes = self
            .list_indexes(tenant, proto::ListIndexesRequest {})?
            .indexes;
        Ok(proto::StatsResponse {
            indexes,
            uptime_seconds: self.started.elapsed().as_secs(),
            requests: self.requests.load(Ordering::Relaxed),
            store: self.store.backend().to_owned(),
        })
    }

    /// Removes every generation of an index but `keep` (with
    /// `only_older`, only those older than `keep`).
    pub fn drop_generations(
        &self,
        tenant: &str,
        req: proto::DropGenerationsRequest,
    ) -> Result<proto::DropGenerationsResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        self.commit_locked(tenant, &req.index, || {
            self.drop_generations_once(tenant, &req)
        })
    }

    fn drop_generations_once(
        &self,
        tenant: &str,
        req: &proto::DropGenerationsRequest,
    ) -> Result<Option<proto::DropGenerationsResponse>, EngineError> {
        let (seen, meta) = self.token_and_meta(tenant, &req.index)?;
        let keep = meta.generation_prefix(tenant, &req.index, req.keep);
        let prefix = meta.entries_prefix(tenant, &req.index);
        let mut batch = WriteBatch::new();
        for (k, _) in self.store.scan_prefix(&prefix)? {
            if k.starts_with(&keep) {
                continue;
            }
            if req.only_older {
                // The generation is the decimal number after the prefix.
                let number = k[prefix.len()..]
                    .split(|&b| b == b'/')
                    .next()
                    .and_then(|g| std::str::from_utf8(g).ok())
                    .and_then(|g| g.parse::<u64>().ok());
                if number.is_none_or(|g| g > req.keep) {
                    continue;
                }
            }
            batch.delete(k);
        }
        let removed = batch.len() as u64;
        Ok(self
            .commit_if(&mut batch, (tenant, &req.index), &seen)?
            .then_some(proto::DropGenerationsResponse { removed }))
    }
}
