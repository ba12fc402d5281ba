//! Page I/O over a [`Store`], with a block cache: the I/O model of seed
//! 004 (section 5.3.3: 4 KiB pages, a 128-block cache).
//!
//! A [`PagedStore`] wraps any store and is itself a store, so every
//! protocol server (and the SSE servers under Logarithmic-BRC) runs on it
//! unchanged. It keeps a real cache of values in memory and counts, in
//! pages, the requests that reach the store underneath:
//! - a `get` served by the cache costs nothing; a `get` that misses costs
//!   `max(1, ceil(len / page_size))` page reads (one for a missing key),
//!   and the value enters the cache;
//! - every put costs `max(1, ceil(len / page_size))` page writes (write
//!   through) and leaves the value in the cache; a delete costs one page
//!   write and drops the key from the cache;
//! - a prefix scan reads every returned value's pages and bypasses the
//!   cache.
//!
//! [`PagedStore::io_counts`] reports these page counts (`reads`, `writes`
//! in pages, `bytes_read`, `bytes_written` in bytes), so a protocol's
//! [`sesame_core::Snapshot`] carries its I/O requests as seed 004's Table 3
//! counts them.

use std::sync::{Arc, Mutex, MutexGuard};

use sesame_core::{Error, IoCounts, Params, Result, Store, WriteBatch, WriteOp};

use crate::cache::{BlockCache, CachePolicy};

/// Page size and cache of a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageConfig {
    /// Bytes per page (4096 by default).
    pub page_size: usize,
    /// Pages the cache holds (128 by default; 0 disables it).
    pub cache_blocks: usize,
    /// Eviction policy.
    pub policy: CachePolicy,
}

impl Default for PageConfig {
    fn default() -> Self {
        PageConfig {
            page_size: 4096,
            cache_blocks: 128,
            policy: CachePolicy::Lru,
        }
    }
}

impl PageConfig {
    /// Reads `page_size`, `cache_size` and `cache_policy` from `params`,
    /// with the defaults above.
    pub fn from_params(params: &Params) -> Result<Self> {
        let d = PageConfig::default();
        let config = PageConfig {
            page_size: params.get_or("page_size", d.page_size)?,
            cache_blocks: params.get_or("cache_size", d.cache_blocks)?,
            policy: params.get_or("cache_policy", d.policy)?,
        };
        config.check()?;
        Ok(config)
    }

    /// `params` with this configuration's [`crate::api::PAGE_PARAMS`] set,
    /// so that a protocol's entry builds its client and server for it.
    pub fn with(&self, params: &Params) -> Params {
        let mut all = params.clone();
        all.set("page_size", self.page_size)
            .set("cache_size", self.cache_blocks)
            .set("cache_policy", self.policy);
        all
    }

    /// Fails unless the page size is in 64 bytes ..= 16 MiB.
    pub fn check(&self) -> Result<()> {
        if !(64..=16 << 20).contains(&self.page_size) {
            return Err(Error::InvalidArgument(format!(
                "page size {} is not in 64 ..= {} bytes",
                self.page_size,
                16 << 20
            )));
        }
        Ok(())
    }

    /// Pages an object of `bytes` bytes occupies (at least one).
    pub fn pages(&self, bytes: usize) -> usize {
        bytes.div_ceil(self.page_size).max(1)
    }
}

struct State {
    cache: BlockCache,
    io: IoCounts,
}

/// A store that counts page I/O and caches pages; see the module docs.
pub struct PagedStore {
    inner: Arc<dyn Store>,
    config: PageConfig,
    state: Mutex<State>,
}

impl std::fmt::Debug for PagedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PagedStore")
            .field("backend", &self.inner.backend())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl PagedStore {
    /// Pages over `inner` with `config`.
    pub fn new(inner: Arc<dyn Store>, config: PageConfig) -> Result<Self> {
        config.check()?;
        Ok(PagedStore {
            inner,
            config,
            state: Mutex::new(State {
                cache: BlockCache::new(config.policy, config.cache_blocks),
                io: IoCounts::default(),
            }),
        })
    }

    /// The page configuration.
    pub fn config(&self) -> &PageConfig {
        &self.config
    }

    /// The store underneath.
    pub fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }

    /// Empties the cache (a cold start).
    pub fn clear_cache(&self) {
        self.lock().cache.clear();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held left only counters and cached
        // copies of committed values behind: both stay usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn read_through(&self, state: &mut State, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = state.cache.get(key) {
            return Ok(Some(v.as_ref().clone()));
        }
        let value = self.inner.get(key)?;
        match &value {
            Some(v) => {
                let pages = self.config.pages(v.len());
                state.io.reads += pages as u64;
                state.io.bytes_read += v.len() as u64;
                state.cache.put(key, Arc::new(v.clone()), pages);
            }
            None => state.io.reads += 1,
        }
        Ok(value)
    }
}

impl Store for PagedStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut state = self.lock();
        self.read_through(&mut state, key)
    }

    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut state = self.lock();
        keys.iter()
            .map(|k| self.read_through(&mut state, k))
            .collect()
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        let mut state = self.lock();
        let mut cached = Vec::with_capacity(batch.len());
        let mut io = IoCounts::default();
        for op in batch.ops() {
            match op {
                WriteOp::Put { key, value } => {
                    let pages = self.config.pages(value.len());
                    io.writes += pages as u64;
                    io.bytes_written += value.len() as u64;
                    cached.push((key.clone(), Some((Arc::new(value.clone()), pages))));
                }
                WriteOp::Delete { key } => {
                    io.writes += 1;
                    cached.push((key.clone(), None));
                }
            }
        }
        self.inner.write(batch)?;
        state.io.add(&io);
        for (key, value) in cached {
            match value {
                Some((v, pages)) => state.cache.put(&key, v, pages),
                None => state.cache.invalidate(&key),
            }
        }
        Ok(())
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let pairs = self.inner.scan_prefix(prefix)?;
        let mut state = self.lock();
        state.io.scans += 1;
        state.io.scanned += pairs.len() as u64;
        for (_, v) in &pairs {
            state.io.reads += self.config.pages(v.len()) as u64;
            state.io.bytes_read += v.len() as u64;
        }
        Ok(pairs)
    }

    fn io_counts(&self) -> IoCounts {
        self.lock().io
    }

    fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sesame_store::MemoryStore;

    fn paged(cache: usize) -> PagedStore {
        let config = PageConfig {
            page_size: 100,
            cache_blocks: cache,
            policy: CachePolicy::Lru,
        };
        PagedStore::new(Arc::new(MemoryStore::new()), config).unwrap()
    }

    #[test]
    fn cache_hits_cost_no_io_and_misses_cost_pages() {
        let s = paged(4);
        s.put(b"a", &[1; 250]).unwrap();
        assert_eq!(s.io_counts().writes, 3);
        assert_eq!(s.get(b"a").unwrap().unwrap().len(), 250);
        assert_eq!(s.io_counts().reads, 0, "written pages stay cached");
        s.put(b"b", &[2; 150]).unwrap();
        assert_eq!(s.io_counts().writes, 5);
        // a (3 pages) + b (2 pages) exceed 4 pages: a was evicted.
        assert_eq!(s.get(b"a").unwrap().unwrap()[0], 1);
        assert_eq!(s.io_counts().reads, 3);
        assert_eq!(s.get(b"missing").unwrap(), None);
        assert_eq!(s.io_counts().reads, 4);
        s.delete(b"a").unwrap();
        assert_eq!(s.get(b"a").unwrap(), None);
        assert_eq!(s.io_counts().reads, 5);
    }

    #[test]
    fn without_a_cache_every_access_is_io_and_scans_bypass_it() {
        let s = paged(0);
        s.put(b"k1", &[0; 10]).unwrap();
        s.put(b"k2", &[0; 101]).unwrap();
        s.get(b"k1").unwrap();
        s.get(b"k1").unwrap();
        assert_eq!(s.io_counts().reads, 2);
        assert_eq!(s.scan_prefix(b"k").unwrap().len(), 2);
        let io = s.io_counts();
        assert_eq!((io.reads, io.scans, io.scanned), (5, 1, 2));
        s.clear_cache();
    }

    #[test]
    fn bad_configurations_are_refused() {
        let mut p = Params::new();
        p.set("page_size", 10);
        assert!(PageConfig::from_params(&p).is_err());
        let mut p = Params::new();
        p.set("cache_policy", "random");
        assert!(PageConfig::from_params(&p).is_err());
        let mut p = Params::new();
        p.set("page_size", 8192)
            .set("cache_size", 7)
            .set("cache_policy", "lfu");
        let c = PageConfig::from_params(&p).unwrap();
        assert_eq!(
            (c.page_size, c.cache_blocks, c.policy),
            (8192, 7, CachePolicy::Lfu)
        );
    }
}
