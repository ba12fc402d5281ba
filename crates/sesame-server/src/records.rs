//! Records the server keeps beside the indexes: per-index metadata and
//! the replay records of requests that wrote.
//!
//! Both are versioned wire messages (`sesame_core::wire`). Whoever can
//! write to the store controls them, so they are decoded like any peer
//! input: a damaged record is an error, never a panic (fuzzed in
//! `fuzz/`).

use serde::{Deserialize, Serialize};
use sesame_core::wire;

use crate::error::EngineError;

/// What the server knows about one index.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexMeta {
    /// The scheme the index is bound to.
    pub scheme: String,
    /// Its parameters, `a=1,b=2`.
    pub params: String,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix: u64,
    /// Documents stored.
    pub documents: u64,
    /// Committed calls that wrote.
    pub updates: u64,
    /// Committed bulk uploads.
    pub uploads: u64,
    /// Generation of the last committed bulk upload.
    pub generation: u64,
    /// Replay records written since the last pruning.
    pub records_since_prune: u64,
    /// The scheme's entries live under `e/<tenant>/<index>/` (spread
    /// over a Redis Cluster's shards), not `i/...`: set at creation for
    /// schemes whose server writes each entry once. Records written
    /// before this field existed decode as `false`.
    pub spread: bool,
    /// The scheme's entries are packed, many to a stored value
    /// (`sesame_store::packed`), under each generation's prefix followed
    /// by `#`: set at creation for schemes whose server allows it
    /// ([`sesame_core::Service::packable`]) on stores with ordered probes.
    /// Records written before this field existed decode as `false`.
    pub packed: bool,
}

/// [`IndexMeta`] as stored before it had `spread`.
#[derive(Deserialize)]
struct IndexMetaV1 {
    scheme: String,
    params: String,
    created_unix: u64,
    documents: u64,
    updates: u64,
    uploads: u64,
    generation: u64,
    records_since_prune: u64,
}

/// The memory of a request that wrote: a repeat of its id is refused, and
/// an exact repeat is answered with the first response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayRecord {
    /// SHA-256 of the request's content.
    pub digest: [u8; 32],
    /// When it was applied, seconds since the Unix epoch (server clock).
    pub at_unix: u64,
    /// The encoded response that was sent.
    pub response: Vec<u8>,
}

fn damaged(what: &str, e: &sesame_core::Error) -> EngineError {
    EngineError::Internal(format!("a stored {what} record is damaged ({e})"))
}

impl IndexMeta {
    /// Encodes the record.
    pub fn encode(&self) -> Result<Vec<u8>, EngineError> {
        wire::encode(self).map_err(|e| EngineError::Internal(e.to_string()))
    }

    /// Decodes a stored record.
    pub fn decode(bytes: &[u8]) -> Result<Self, EngineError> {
        wire::decode(bytes).or_else(|e| {
            // Fields are encoded in order: a record from before `packed`
            // is the first version and `spread`.
            let (old, spread) = match wire::decode::<(IndexMetaV1, bool)>(bytes) {
                Ok(v2) => v2,
                Err(_) => (
                    wire::decode::<IndexMetaV1>(bytes).map_err(|_| damaged("index", &e))?,
                    false,
                ),
            };
            Ok(IndexMeta {
                scheme: old.scheme,
                params: old.params,
                created_unix: old.created_unix,
                documents: old.documents,
                updates: old.updates,
                uploads: old.uploads,
                generation: old.generation,
                records_since_prune: old.records_since_prune,
                spread,
                packed: false,
            })
        })
    }

    /// Where the index's entries live: `e/<tenant>/<index>/` when
    /// [`IndexMeta::spread`], else `i/<tenant>/<index>/`.
    pub fn entries_prefix(&self, tenant: &str, index: &str) -> Vec<u8> {
        crate::keys::entries_prefix(self.spread, tenant, index)
    }

    /// The prefix of one generation of the index's entries.
    pub fn generation_prefix(&self, tenant: &str, index: &str, generation: u64) -> Vec<u8> {
        crate::keys::generation_prefix_in(self.spread, tenant, index, generation)
    }

    /// Where a packed generation's chunks lie: its prefix and `#`.
    pub fn chunks_prefix(&self, tenant: &str, index: &str, generation: u64) -> Vec<u8> {
        let mut prefix = self.generation_prefix(tenant, index, generation);
        prefix.push(sesame_store::packed::CHUNKS_MARK);
        prefix
    }

    /// The packed view of one generation's entries as the engine reads
    /// and writes them: its chunks under [`IndexMeta::chunks_prefix`], its
    /// small writes pending beside them
    /// ([`sesame_store::packed::pending_key`] of the generation's prefix).
    pub fn packed_view(
        &self,
        base: std::sync::Arc<dyn sesame_core::Store>,
        (tenant, index): (&str, &str),
        generation: u64,
    ) -> sesame_store::packed::Packed {
        let held = self.generation_prefix(tenant, index, generation);
        sesame_store::packed::Packed::new(base, self.chunks_prefix(tenant, index, generation))
            .with_pending(sesame_store::packed::pending_key(&held))
    }
}

impl ReplayRecord {
    /// Encodes the record.
    pub fn encode(&self) -> Result<Vec<u8>, EngineError> {
        wire::encode(self).map_err(|e| EngineError::Internal(e.to_string()))
    }

    /// Decodes a stored record.
    pub fn decode(bytes: &[u8]) -> Result<Self, EngineError> {
        wire::decode(bytes).map_err(|e| damaged("replay", &e))
    }
}

/// Seconds since the Unix epoch.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_garbage_is_an_error() {
        let meta = IndexMeta {
            scheme: "fast".into(),
            params: "".into(),
            created_unix: 1,
            documents: 2,
            updates: 3,
            uploads: 4,
            generation: 5,
            records_since_prune: 6,
            spread: true,
            packed: true,
        };
        assert_eq!(IndexMeta::decode(&meta.encode().unwrap()).unwrap(), meta);
        // A record stored before `packed` existed: the same fields less
        // the last, read as not packed; before `spread`, one fewer again.
        let mut old = meta.encode().unwrap();
        assert_eq!(old.pop(), Some(1));
        assert_eq!(
            IndexMeta::decode(&old).unwrap(),
            IndexMeta {
                packed: false,
                ..meta.clone()
            }
        );
        assert_eq!(old.pop(), Some(1));
        let read = IndexMeta::decode(&old).unwrap();
        assert_eq!(
            read,
            IndexMeta {
                spread: false,
                packed: false,
                ..meta.clone()
            }
        );
        assert_eq!(read.generation_prefix("t", "a", 5), b"i/t/a/5/");
        assert_eq!(meta.generation_prefix("t", "a", 5), b"e/t/a/5/");
        let rec = ReplayRecord {
            digest: [7; 32],
            at_unix: 9,
            response: vec![1, 2, 3],
        };
        assert_eq!(ReplayRecord::decode(&rec.encode().unwrap()).unwrap(), rec);
        for bad in [
            &b""[..],
            b"\x01",
            b"\x02abc",
            &[1, 0xff, 0xff, 0xff, 0xff, 0x7f],
        ] {
            assert!(IndexMeta::decode(bad).is_err());
            assert!(ReplayRecord::decode(bad).is_err());
        }
    }
}
