#![doc = include_str!("../README.md")]

pub mod documents;
#[cfg(feature = "test-suite")]
pub mod faulty;
mod forward;
mod memory;
pub mod overlay;
pub mod packed;
#[cfg(feature = "postgres")]
mod postgres_store;
#[cfg(feature = "postgres")]
mod postgres_tls;
mod probe;
mod redb_error;
mod redb_header;
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

#[doc(hidden)]
pub use sesame_core as __core;

use sesame_core::{Conditional, IoCounter, Result, Store, WriteBatch};
use std::ops::Bound;

/// The smallest key greater than every key that starts with `prefix`, or
/// `None` where no such key exists (`prefix` is empty or all `0xFF`).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let keep = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut end = prefix[..=keep].to_vec();
    end[keep] += 1;
    Some(end)
}

/// A range of keys: its lower and upper bounds.
pub(crate) type KeyRange<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// What an ordered scan reads: the pairs of `range`, at most `limit`,
/// ascending or `descending`.
pub(crate) struct RangeScan<'a> {
    pub(crate) range: KeyRange<'a>,
    pub(crate) descending: bool,
    pub(crate) limit: usize,
}

/// The key range a scan of `prefix` from `from` covers: the lower and
/// upper bounds to iterate (backwards where `descending`), or `None` where
/// no key of the prefix can match. Shared by the ordered backends (memory,
/// redb), whose `scan_from` differ only in how they iterate a range.
pub(crate) fn scan_range<'a>(
    prefix: &'a [u8],
    end: Option<&'a [u8]>,
    from: &'a [u8],
    descending: bool,
) -> Option<KeyRange<'a>> {
    if descending {
        if from < prefix {
            return None;
        }
        let upper = match end {
            Some(end) if from >= end => Bound::Excluded(end),
            _ => Bound::Included(from),
        };
        return Some((Bound::Included(prefix), upper));
    }
    let start = from.max(prefix);
    match end {
        Some(end) if start >= end => None,
        Some(end) => Some((Bound::Included(start), Bound::Excluded(end))),
        None => Some((Bound::Included(start), Bound::Unbounded)),
    }
}

/// The scans of a backend with ordered keys (memory, redb), written inside
/// its `impl Store`: `scan_prefix` and `scan_from` over its inherent
/// `ordered_range(RangeScan)` (the range from
/// [`scan_range`]), counted in its `io` field, and `ordered_probes`
/// (`true`) and `io_counts`.
macro_rules! ordered_scans {
    () => {
        fn scan_prefix(&self, prefix: &[u8]) -> sesame_core::Result<Vec<(Vec<u8>, Vec<u8>)>> {
            self.scan_from(prefix, prefix, false, usize::MAX)
        }

        fn scan_from(
            &self,
            prefix: &[u8],
            from: &[u8],
            descending: bool,
            limit: usize,
        ) -> sesame_core::Result<Vec<(Vec<u8>, Vec<u8>)>> {
            let end = $crate::prefix_end(prefix);
            let pairs = match $crate::scan_range(prefix, end.as_deref(), from, descending) {
                Some(range) => self.ordered_range($crate::RangeScan {
                    range,
                    descending,
                    limit,
                })?,
                None => Vec::new(),
            };
            $crate::counted_scan(&self.io, pairs)
        }

        fn ordered_probes(&self) -> bool {
            true
        }

        fn io_counts(&self) -> sesame_core::IoCounts {
            self.io.counts()
        }
    };
}
pub(crate) use ordered_scans;

/// Counts a scan's answer in `io` and returns it.
pub(crate) fn counted_scan(
    io: &IoCounter,
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let bytes = pairs.iter().map(|(k, v)| k.len() + v.len()).sum();
    io.scan(pairs.len(), bytes);
    Ok(pairs)
}

/// A backend's unconditional write: a conditional one with no condition
/// (nothing to do for an empty batch).
pub(crate) fn write_unconditional<S: Store + ?Sized>(store: &S, batch: &WriteBatch) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    store.write_if(&[], batch).map(|_| ())
}

/// A backend's conditional write as a group of one.
pub(crate) fn write_if_alone<S: Store + ?Sized>(
    store: &S,
    expect: &[(&[u8], Option<&[u8]>)],
    batch: &WriteBatch,
) -> Result<bool> {
    let applied = store.write_if_group(&[(expect, batch)])?;
    Ok(applied.first().copied().unwrap_or(false))
}

/// Counts the point reads of `values` in `io` and returns them.
pub(crate) fn counted_reads(
    io: &IoCounter,
    values: Vec<Option<Vec<u8>>>,
) -> Result<Vec<Option<Vec<u8>>>> {
    for value in &values {
        io.read(value.as_ref().map_or(0, Vec::len));
    }
    Ok(values)
}

/// Counts the writes of the batches of a group commit that were applied,
/// and returns which were.
pub(crate) fn counted_group(
    io: &IoCounter,
    group: &[Conditional<'_>],
    applied: Vec<bool>,
) -> Result<Vec<bool>> {
    for ((_, batch), written) in group.iter().zip(&applied) {
        if *written {
            io.batch(batch);
        }
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::{prefix_end, scan_range};
    use std::ops::Bound;

    #[test]
    fn scan_range_edges() {
        let end = prefix_end(b"ab");
        let end = end.as_deref();
        let inc = Bound::Included;
        assert_eq!(
            scan_range(b"ab", end, b"a", false),
            Some((inc(&b"ab"[..]), Bound::Excluded(&b"ac"[..])))
        );
        assert_eq!(scan_range(b"ab", end, b"ac", false), None);
        assert_eq!(scan_range(b"ab", end, b"aa", true), None);
        assert_eq!(
            scan_range(b"ab", end, b"abz", true),
            Some((inc(&b"ab"[..]), inc(&b"abz"[..])))
        );
        assert_eq!(
            scan_range(b"ab", end, b"b", true),
            Some((inc(&b"ab"[..]), Bound::Excluded(&b"ac"[..])))
        );
        assert_eq!(
            scan_range(b"", None, b"x", false),
            Some((inc(&b"x"[..]), Bound::Unbounded))
        );
    }

    #[test]
    fn prefix_end_edges() {
        assert_eq!(prefix_end(b""), None);
        assert_eq!(prefix_end(&[0xFF, 0xFF]), None);
        assert_eq!(prefix_end(&[0x01, 0xFF]), Some(vec![0x02]));
        assert_eq!(prefix_end(&[0x00]), Some(vec![0x01]));
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
    }
}
