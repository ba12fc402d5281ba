//! The server's block cache: a fixed number of pages kept in memory, with
//! an LRU, LFU or FIFO eviction policy (seed 004, section 5.3.3: 128
//! blocks by default).
//!
//! Entries are stored objects (a B+ tree node, an ORAM bucket, a run of
//! array slots); an object of `s` bytes takes `max(1, ceil(s / page))`
//! of the cache's pages.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use sesame_core::Error;

/// Which cached object leaves first when the cache is full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CachePolicy {
    /// Least recently used.
    #[default]
    Lru,
    /// Least frequently used (ties: least recently used).
    Lfu,
    /// First in, first out: the oldest insertion, whatever its use.
    Fifo,
}

impl CachePolicy {
    /// `lru`, `lfu` or `fifo`.
    pub fn name(self) -> &'static str {
        match self {
            CachePolicy::Lru => "lru",
            CachePolicy::Lfu => "lfu",
            CachePolicy::Fifo => "fifo",
        }
    }
}

impl fmt::Display for CachePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CachePolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.to_ascii_lowercase().as_str() {
            "lru" => Ok(CachePolicy::Lru),
            "lfu" => Ok(CachePolicy::Lfu),
            "fifo" => Ok(CachePolicy::Fifo),
            other => Err(Error::InvalidArgument(format!(
                "unknown cache policy {other:?} (known: lru, lfu, fifo)"
            ))),
        }
    }
}

struct Entry {
    value: Arc<Vec<u8>>,
    pages: usize,
    rank: (u64, u64),
    inserted: u64,
    frequency: u64,
}

/// A cache of `capacity` pages.
pub struct BlockCache {
    policy: CachePolicy,
    capacity: usize,
    used: usize,
    clock: u64,
    entries: HashMap<Vec<u8>, Entry>,
    order: BTreeMap<(u64, u64), Vec<u8>>,
}

impl fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockCache")
            .field("policy", &self.policy)
            .field("capacity", &self.capacity)
            .field("used", &self.used)
            .finish_non_exhaustive()
    }
}

impl BlockCache {
    /// An empty cache of `capacity` pages (0 caches nothing).
    pub fn new(policy: CachePolicy, capacity: usize) -> Self {
        BlockCache {
            policy,
            capacity,
            used: 0,
            clock: 0,
            entries: HashMap::new(),
            order: BTreeMap::new(),
        }
    }

    /// Pages in use.
    pub fn used(&self) -> usize {
        self.used
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn rank(&self, inserted: u64, frequency: u64, now: u64) -> (u64, u64) {
        match self.policy {
            CachePolicy::Lru => (now, inserted),
            CachePolicy::Lfu => (frequency, now),
            CachePolicy::Fifo => (inserted, 0),
        }
    }

    /// The cached value of `key`, counting a use.
    pub fn get(&mut self, key: &[u8]) -> Option<Arc<Vec<u8>>> {
        let now = self.tick();
        let (old, inserted, frequency) = {
            let e = self.entries.get(key)?;
            (e.rank, e.inserted, e.frequency + 1)
        };
        let rank = self.rank(inserted, frequency, now);
        if let Some(e) = self.entries.get_mut(key) {
            e.frequency = frequency;
            e.rank = rank;
        }
        if rank != old {
            if let Some(k) = self.order.remove(&old) {
                self.order.insert(rank, k);
            }
        }
        self.entries.get(key).map(|e| Arc::clone(&e.value))
    }

    /// Whether `key` is cached (without counting a use).
    pub fn contains(&self, key: &[u8]) -> bool {
        self.entries.contains_key(key)
    }

    /// Caches `value` under `key` (replacing an older value), taking
    /// `pages` pages and evicting as the policy says. Objects larger than
    /// the whole cache are not cached.
    pub fn put(&mut self, key: &[u8], value: Arc<Vec<u8>>, pages: usize) {
        let frequency = self.remove(key).map_or(0, |e| e.frequency) + 1;
        if pages > self.capacity {
            return;
        }
        while self.used + pages > self.capacity {
            let Some((_, victim)) = self.order.pop_first() else {
                break;
            };
            if let Some(e) = self.entries.remove(&victim) {
                self.used -= e.pages;
            }
        }
        let now = self.tick();
        let rank = self.rank(now, frequency, now);
        self.order.insert(rank, key.to_vec());
        self.entries.insert(
            key.to_vec(),
            Entry {
                value,
                pages,
                rank,
                inserted: now,
                frequency,
            },
        );
        self.used += pages;
    }

    /// Drops `key` from the cache.
    pub fn invalidate(&mut self, key: &[u8]) {
        self.remove(key);
    }

    fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let e = self.entries.remove(key)?;
        self.order.remove(&e.rank);
        self.used -= e.pages;
        Some(e)
    }

    /// Empties the cache.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.order.clear();
        self.used = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(b: u8) -> Arc<Vec<u8>> {
        Arc::new(vec![b])
    }

    #[test]
    fn lru_evicts_the_least_recently_used() {
        let mut c = BlockCache::new(CachePolicy::Lru, 2);
        c.put(b"a", v(1), 1);
        c.put(b"b", v(2), 1);
        assert!(c.get(b"a").is_some());
        c.put(b"c", v(3), 1);
        assert!(c.contains(b"a") && c.contains(b"c") && !c.contains(b"b"));
    }

    #[test]
    fn fifo_evicts_the_oldest_insertion_whatever_its_use() {
        let mut c = BlockCache::new(CachePolicy::Fifo, 2);
        c.put(b"a", v(1), 1);
        c.put(b"b", v(2), 1);
        assert!(c.get(b"a").is_some());
        c.put(b"c", v(3), 1);
        assert!(!c.contains(b"a") && c.contains(b"b") && c.contains(b"c"));
    }

    #[test]
    fn lfu_evicts_the_least_frequently_used() {
        let mut c = BlockCache::new(CachePolicy::Lfu, 2);
        c.put(b"a", v(1), 1);
        c.put(b"b", v(2), 1);
        for _ in 0..3 {
            assert!(c.get(b"b").is_some());
        }
        assert!(c.get(b"a").is_some());
        c.put(b"c", v(3), 1);
        assert!(!c.contains(b"a") && c.contains(b"b") && c.contains(b"c"));
    }

    #[test]
    fn multi_page_objects_take_their_pages_and_oversized_ones_are_skipped() {
        let mut c = BlockCache::new(CachePolicy::Lru, 4);
        c.put(b"a", v(1), 3);
        c.put(b"b", v(2), 2);
        assert_eq!(c.used(), 2);
        assert!(!c.contains(b"a"));
        c.put(b"big", v(3), 5);
        assert!(!c.contains(b"big"));
        assert_eq!(c.used(), 2);
        c.put(b"b", v(4), 1);
        assert_eq!(c.used(), 1);
        assert_eq!(c.get(b"b").unwrap()[0], 4);
        let mut none = BlockCache::new(CachePolicy::Lru, 0);
        none.put(b"a", v(1), 1);
        assert!(!none.contains(b"a"));
    }

    #[test]
    fn policies_parse_and_print() {
        for p in [CachePolicy::Lru, CachePolicy::Lfu, CachePolicy::Fifo] {
            assert_eq!(p.name().parse::<CachePolicy>().unwrap(), p);
        }
        assert!("mru".parse::<CachePolicy>().is_err());
    }
}
