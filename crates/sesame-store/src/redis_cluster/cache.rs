//! The values of write-once keys, kept in memory (see
//! [`super::RedisClusterStore`], "Cache").

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The values held, by key, and the bytes they are counted as.
type Held = (HashMap<Vec<u8>, Vec<u8>>, usize);

/// Values by key, up to a number of bytes; emptied when full.
#[derive(Debug)]
pub(super) struct EntryCache {
    limit: usize,
    held: Mutex<Held>,
}

/// What an entry costs beyond its bytes (the map's own structures).
const OVERHEAD: usize = 64;

impl EntryCache {
    /// A cache of at most `mb` MiB (0: keeps nothing).
    pub(super) fn new(mb: u64) -> Self {
        let limit = usize::try_from(mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
        EntryCache {
            limit,
            held: Mutex::new((HashMap::new(), 0)),
        }
    }

    // No code panics while it holds the lock, short of running out of
    // memory; a poisoned lock is safe to take over.
    fn lock(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        if self.limit == 0 {
            return None;
        }
        self.lock().0.get(key).cloned()
    }

    pub(super) fn insert(&self, key: &[u8], value: &[u8]) {
        let cost = key.len() + value.len() + OVERHEAD;
        if cost > self.limit / 2 {
            return;
        }
        let mut held = self.lock();
        let (map, bytes) = &mut *held;
        if *bytes + cost > self.limit {
            map.clear();
            *bytes = 0;
        }
        if map.insert(key.to_vec(), value.to_vec()).is_none() {
            *bytes += cost;
        }
    }

    pub(super) fn remove(&self, key: &[u8]) {
        if self.limit == 0 {
            return;
        }
        let mut held = self.lock();
        let (map, bytes) = &mut *held;
        if let Some(v) = map.remove(key) {
            *bytes = bytes.saturating_sub(key.len() + v.len() + OVERHEAD);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::EntryCache;

    #[test]
    fn a_full_cache_starts_over_and_an_empty_one_keeps_nothing() {
        let cache = EntryCache::new(1);
        cache.insert(b"a", b"1");
        assert_eq!(cache.get(b"a").as_deref(), Some(&b"1"[..]));
        cache.remove(b"a");
        assert_eq!(cache.get(b"a"), None);
        let big = vec![7u8; 300 * 1024];
        cache.insert(b"b", &big);
        cache.insert(b"c", &big);
        cache.insert(b"d", &big);
        cache.insert(b"e", &big);
        assert_eq!(cache.get(b"b"), None, "emptied when full");
        assert_eq!(cache.get(b"e").map(|v| v.len()), Some(big.len()));
        let off = EntryCache::new(0);
        off.insert(b"a", b"1");
        assert_eq!(off.get(b"a"), None);
    }
}
