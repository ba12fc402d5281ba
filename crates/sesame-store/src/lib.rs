#![doc = include_str!("../README.md")]

pub mod documents;
#[cfg(feature = "test-suite")]
pub mod faulty;
mod memory;
pub mod overlay;
pub mod packed;
#[cfg(feature = "postgres")]
mod postgres_store;
#[cfg(feature = "postgres")]
mod postgres_tls;
mod probe;
mod redb_error;
mod redb_store;
#[cfg(feature = "redis")]
mod redis_cluster;
#[cfg(any(feature = "postgres", feature = "redis"))]
mod remote;
mod spec;
#[cfg(feature = "test-suite")]
pub mod suite;
#[cfg(all(feature = "test-suite", feature = "redis"))]
pub mod test_cluster;

pub use memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use postgres_store::{PostgresStore, DEFAULT_NAMESPACE, META_TABLE};
pub use redb_store::{RedbStore, Space, FORMAT_KEY, FORMAT_VERSION, VACUUM_BATCH_BYTES};
#[cfg(feature = "redis")]
pub use redis_cluster::{
    RedisClusterStore, DEFAULT_FAILOVER_MS, DEFAULT_REDIS_NAMESPACE, DEFAULT_WAIT_MS,
    DEFAULT_WAIT_REPLICAS, SPREAD_SHARDS,
};
pub use spec::open_store;

/// The smallest key greater than every key that starts with `prefix`, or
/// `None` where no such key exists (`prefix` is empty or all `0xFF`).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let keep = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut end = prefix[..=keep].to_vec();
    end[keep] += 1;
    Some(end)
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn prefix_end_edges() {
        assert_eq!(prefix_end(b""), None);
        assert_eq!(prefix_end(&[0xFF, 0xFF]), None);
        assert_eq!(prefix_end(&[0x01, 0xFF]), Some(vec![0x02]));
        assert_eq!(prefix_end(&[0x00]), Some(vec![0x01]));
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
    }
}
