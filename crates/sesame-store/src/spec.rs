//! Opening a store from a textual spec, as given on a command line.

use std::sync::Arc;

use sesame_core::{Error, Result, Store};

use crate::{MemoryStore, RedbStore};

/// Opens the store that `spec` names:
///
/// | spec                                  | store                              |
/// |---------------------------------------|------------------------------------|
/// | `memory`, `mem`, `memory:`, `mem:`     | a new, empty [`MemoryStore`]       |
/// | `redb:PATH`                           | [`RedbStore::open`]`(PATH)`        |
/// | `PATH` (no `scheme://`)                | [`RedbStore::open`]`(PATH)`        |
/// | `postgres://...`, `postgresql://...`  | `PostgresStore::open(spec)` (feature `postgres`; without it [`Error::Unsupported`]) |
/// | `redis-cluster://host:port[,...]`, `rediss-cluster://...` (TLS) | `RedisClusterStore::open(spec)` (feature `redis`; without it [`Error::Unsupported`]) |
///
/// Any other `scheme://...` gives [`Error::Unsupported`]; an empty spec gives
/// [`Error::InvalidArgument`].
pub fn open_store(spec: &str) -> Result<Arc<dyn Store>> {
    if matches!(spec, "memory" | "mem" | "memory:" | "mem:") {
        return Ok(Arc::new(MemoryStore::new()));
    }
    if let Some(path) = spec.strip_prefix("redb:") {
        if path.is_empty() {
            return Err(Error::InvalidArgument(
                "store spec \"redb:\" names no file; write redb:PATH".to_string(),
            ));
        }
        return Ok(Arc::new(RedbStore::open(path)?));
    }
    if let Some((scheme, _)) = spec.split_once("://") {
        return match scheme {
            "postgres" | "postgresql" => open_postgres(spec),
            "redis-cluster" | "rediss-cluster" => open_redis_cluster(spec),
            _ => Err(Error::Unsupported(format!(
                "unknown store scheme {scheme:?}; use memory, redb:PATH, postgres://..., \
                 redis-cluster://... or a file path"
            ))),
        };
    }
    if spec.is_empty() {
        return Err(Error::InvalidArgument(
            "empty store spec; use memory, redb:PATH, postgres://..., redis-cluster://... or a \
             file path"
                .to_string(),
        ));
    }
    Ok(Arc::new(RedbStore::open(spec)?))
}

#[cfg(feature = "postgres")]
fn open_postgres(spec: &str) -> Result<Arc<dyn Store>> {
    Ok(Arc::new(crate::PostgresStore::open(spec)?))
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_spec: &str) -> Result<Arc<dyn Store>> {
    Err(Error::Unsupported(
        "this build of sesame-store has no PostgreSQL backend (feature \"postgres\")".to_string(),
    ))
}

#[cfg(feature = "redis")]
fn open_redis_cluster(spec: &str) -> Result<Arc<dyn Store>> {
    Ok(Arc::new(crate::RedisClusterStore::open(spec)?))
}

#[cfg(not(feature = "redis"))]
fn open_redis_cluster(_spec: &str) -> Result<Arc<dyn Store>> {
    Err(Error::Unsupported(
        "this build of sesame-store has no Redis Cluster backend (feature \"redis\")".to_string(),
    ))
}
