//! Shared records: small versioned values kept beside an index (a
//! client's state shared by its devices, their pending operations), read
//! with their versions and written compare-and-swap, all or nothing.
//! (`crate::records` is another thing: the server's own stored
//! metadata and replay records.)

use std::sync::atomic::Ordering;

use sesame_core::WriteBatch;

use super::limits::check_record_count;
use super::Engine;
use crate::error::EngineError;
use crate::keys;
use crate::proto;

impl Engine {
    /// Reads records kept beside an index, with their versions; a record
    /// at the version the reader says it knows comes without its value.
    pub fn read_records(
        &self,
        tenant: &str,
        req: proto::ReadRecordsRequest,
    ) -> Result<proto::ReadRecordsResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        check_record_count(req.names.len(), self.limits.max_messages_per_call)?;
        if !req.known.is_empty() && req.known.len() != req.names.len() {
            return Err(EngineError::InvalidArgument(
                "`known` gives one version per name, or none".into(),
            ));
        }
        for name in &req.names {
            keys::check_name("record", name)?;
        }
        let lock = self.lock_of(tenant, &req.index);
        let _g = lock.read();
        self.meta(tenant, &req.index)?;
        let keys: Vec<Vec<u8>> = req
            .names
            .iter()
            .map(|n| keys::record_key(tenant, &req.index, n))
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let mut records = Vec::with_capacity(req.names.len());
        for (i, (name, stored)) in req
            .names
            .into_iter()
            .zip(self.store.get_many(&refs)?)
            .enumerate()
        {
            let mut record = decode_record(name, stored.as_deref())?;
            if req.known.get(i) == Some(&record.version) {
                record.value.clear();
            }
            records.push(record);
        }
        Ok(proto::ReadRecordsResponse { records })
    }

    /// Writes records if each is at the version the request expects, all
    /// in one transaction under the index's exclusive lock; otherwise
    /// writes nothing and answers every record as it is.
    pub fn write_records(
        &self,
        tenant: &str,
        req: proto::WriteRecordsRequest,
    ) -> Result<proto::WriteRecordsResponse, EngineError> {
        keys::check_name("index", &req.index)?;
        if req.writes.is_empty() {
            return Err(EngineError::InvalidArgument(
                "a record write names at least one record".into(),
            ));
        }
        check_record_count(req.writes.len(), self.limits.max_messages_per_call)?;
        let mut names = std::collections::HashSet::new();
        for w in &req.writes {
            keys::check_name("record", &w.name)?;
            if !names.insert(w.name.as_str()) {
                return Err(EngineError::InvalidArgument(format!(
                    "record {:?} is written twice in one request",
                    w.name
                )));
            }
        }
        self.commit_locked(tenant, &req.index, || self.write_records_once(tenant, &req))
    }

    /// One try of [`Engine::write_records`]: its write is conditional on
    /// every record still holding the bytes read here, so two servers
    /// cannot both move a record from one version.
    fn write_records_once(
        &self,
        tenant: &str,
        req: &proto::WriteRecordsRequest,
    ) -> Result<Option<proto::WriteRecordsResponse>, EngineError> {
        self.meta(tenant, &req.index)?;
        let keys: Vec<Vec<u8>> = req
            .writes
            .iter()
            .map(|w| keys::record_key(tenant, &req.index, &w.name))
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let stored = self.store.get_many(&refs)?;
        let mut current = Vec::with_capacity(req.writes.len());
        for (w, stored) in req.writes.iter().zip(&stored) {
            current.push(decode_record(w.name.clone(), stored.as_deref())?);
        }
        if req
            .writes
            .iter()
            .zip(&current)
            .any(|(w, c)| w.expected != ANY_VERSION && w.expected != c.version)
        {
            return Ok(Some(proto::WriteRecordsResponse {
                committed: false,
                current,
            }));
        }
        let created = req
            .writes
            .iter()
            .zip(&current)
            .filter(|(w, c)| c.version == 0 && !w.delete)
            .count();
        if created > 0 {
            let held = self
                .store
                .scan_prefix(&keys::record_prefix(tenant, &req.index))?
                .len();
            if held + created > MAX_RECORDS_PER_INDEX {
                return Err(EngineError::ResourceExhausted(format!(
                    "an index keeps at most {MAX_RECORDS_PER_INDEX} records"
                )));
            }
        }
        let mut batch = WriteBatch::with_capacity(req.writes.len());
        for ((w, key), c) in req.writes.iter().zip(&keys).zip(&current) {
            if w.delete {
                batch.delete(key.clone());
            } else {
                let version = c.version.checked_add(1).ok_or_else(|| {
                    EngineError::InvalidArgument(format!("record {:?} has no next version", w.name))
                })?;
                let mut value = Vec::with_capacity(8 + w.value.len());
                value.extend_from_slice(&version.to_be_bytes());
                value.extend_from_slice(&w.value);
                batch.put(key.clone(), value);
            }
        }
        let expect: Vec<(&[u8], Option<&[u8]>)> = refs
            .iter()
            .zip(&stored)
            .map(|(k, v)| (*k, v.as_deref()))
            .collect();
        if !self.group.write_if(&*self.store, &expect, &batch)? {
            self.conflicts.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        }
        Ok(Some(proto::WriteRecordsResponse {
            committed: true,
            current: Vec::new(),
        }))
    }
}

/// `RecordWrite::expected` that accepts any version.
pub const ANY_VERSION: u64 = u64::MAX;

/// Records one index may keep (a client's state and its pending
/// operations, a few per device).
pub const MAX_RECORDS_PER_INDEX: usize = 1024;

/// A stored record (version, then value) as the protocol gives it.
fn decode_record(name: String, stored: Option<&[u8]>) -> Result<proto::Record, EngineError> {
    let Some(stored) = stored else {
        return Ok(proto::Record {
            name,
            version: 0,
            value: Vec::new(),
        });
    };
    let (version, value) = stored
        .split_first_chunk::<8>()
        .ok_or_else(|| EngineError::Internal(format!("record {name:?} is damaged in the store")))?;
    Ok(proto::Record {
        name,
        version: u64::from_be_bytes(*version),
        value: value.to_vec(),
    })
}
