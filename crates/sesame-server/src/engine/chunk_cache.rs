//! The packed chunks of an index's generation, held in memory between
//! requests and checked against the index's commit token, so that an
//! update or a search does not read from the store, on every request,
//! the chunks its entries fall into (`sesame_store::packed`).
//!
//! Why it is safe, on one server or on several sharing a store: every
//! write of an index's chunks is part of a commit that writes a fresh
//! random commit token in the same atomic write ([`Engine::commit_if`];
//! uploads buffer their chunks until their commit; a dropped index's token
//! is deleted, and no cached copy is labelled "no token"). So chunks
//! cached under token `T` are the store's chunks for as long as the
//! store's token is `T`: a request uses the cached copy only when the token
//! it has just read is its label, else it reads the store and caches what
//! it read under that token. A commit of this server, conditional on the
//! token its request read, carries the cached copy labelled with that
//! token forward to its fresh token with the commit's own writes applied
//! (writes a sweep finishes later included: the copy shows the committed
//! state). Chunks read just after the token might be newer than it when
//! another server commits in between; then the token has already moved,
//! no later request reads that label again, and the request that read
//! them fails its conditional commit, as it did without a cache.
//!
//! The copy holds every stored pair under the generation's prefix: its
//! chunks, the deltas appended beside them, and its pending record
//! (`sesame_store::packed`, `packed_pending.rs`), so a commit's small
//! writes carry the copy forward as a rewritten chunk does, and a request
//! reads the record and the chunks in one state.
//!
//! Bounded: an index's generation of more than [`MAX_INDEX_PAIRS`] stored
//! pairs (chunks and deltas) or of more than a quarter of [`MAX_BYTES`] is
//! not cached, and all copies together hold at most [`MAX_BYTES`].
//! A miss reads all the generation's chunks: with several servers
//! committing to one index in turn, each request after another server's
//! commit pays that full read.
//!
//! A request's view shares the cached chunks (`Arc`); a commit that
//! carries the copy forward while a view still holds it changes a copy of
//! the map, never the bytes a view was given.
//!
//! Tests (`engine/tests.rs`):
//! `a_second_server_sharing_the_store_is_seen_through_the_chunk_cache`
//! (a second engine's commit is seen by the first, whose copy is stale)
//! and `two_engines_writing_one_packed_index_lose_no_entry`; below,
//! `a_view_keeps_the_bytes_it_was_given_when_a_commit_changes_the_cache`
//! (a view held across a commit reads what it read before; a request on
//! the fresh token reads the commit from the cache; one on the old token
//! reads the store).

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use sesame_core::{Store, StoredValue, WriteBatch, WriteOp};

use super::Token;

/// The most chunks of one generation kept (16 KB each at most).
const MAX_INDEX_CHUNKS: usize = 1024;

/// The most stored pairs of one generation kept: its chunks and the
/// deltas beside them (`sesame_store::packed::MAX_DELTAS` a chunk at
/// most, each small).
const MAX_INDEX_PAIRS: usize = MAX_INDEX_CHUNKS * (1 + sesame_store::packed::MAX_DELTAS);

/// The most bytes of chunks kept for all indexes together.
const MAX_BYTES: usize = 64 << 20;

/// One generation's chunks by full store key.
type Chunks = BTreeMap<Vec<u8>, Arc<[u8]>>;

/// The cached chunks of one index.
struct Cached {
    /// Where they lie (the generation's prefix).
    prefix: Vec<u8>,
    /// The commit token they are the chunks of.
    token: Vec<u8>,
    chunks: Arc<Chunks>,
    bytes: usize,
}

#[derive(Default)]
struct Held {
    /// By `tenant/index`.
    indexes: HashMap<String, Cached>,
    bytes: usize,
}

/// The chunk cache of one engine.
#[derive(Default)]
pub(super) struct ChunkCache {
    held: Mutex<Held>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for ChunkCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkCache").finish_non_exhaustive()
    }
}

fn name(tenant: &str, index: &str) -> String {
    format!("{tenant}/{index}")
}

fn size(chunks: &Chunks) -> usize {
    chunks.iter().map(|(k, v)| k.len() + v.len()).sum()
}

impl ChunkCache {
    /// Requests answered from cached chunks, and requests that read them.
    pub(super) fn counts(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `base` as seen by a request on index `index` of `tenant` whose
    /// chunks lie under `prefix`, the index's token read as `token`: its
    /// chunks from memory when they are cached under that token (read and
    /// cached now otherwise), everything else from `base`. `base` itself
    /// when nothing can be cached.
    pub(super) fn view(
        &self,
        base: &Arc<dyn Store>,
        (tenant, index): (&str, &str),
        prefix: &[u8],
        token: &Token,
    ) -> Arc<dyn Store> {
        let Some(token) = token else {
            return base.clone();
        };
        let key = name(tenant, index);
        {
            let held = self.lock();
            if let Some(c) = held.indexes.get(&key) {
                if c.prefix == prefix && c.token == *token {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    return Arc::new(CachedChunks {
                        base: base.clone(),
                        prefix: prefix.to_vec(),
                        chunks: c.chunks.clone(),
                    });
                }
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        // A read error is left to the request's own reads to meet.
        let Ok(pairs) = base.scan_from(prefix, prefix, false, MAX_INDEX_PAIRS + 1) else {
            return base.clone();
        };
        if pairs.len() > MAX_INDEX_PAIRS {
            return base.clone();
        }
        let chunks: Chunks = pairs.into_iter().map(|(k, v)| (k, v.into())).collect();
        let bytes = size(&chunks);
        if bytes > MAX_BYTES / 4 {
            return base.clone();
        }
        let chunks = Arc::new(chunks);
        let mut held = self.lock();
        let held = &mut *held;
        if let Some(old) = held.indexes.remove(&key) {
            held.bytes -= old.bytes;
        }
        make_room(held, bytes);
        held.bytes += bytes;
        held.indexes.insert(
            key,
            Cached {
                prefix: prefix.to_vec(),
                token: token.clone(),
                chunks: chunks.clone(),
                bytes,
            },
        );
        Arc::new(CachedChunks {
            base: base.clone(),
            prefix: prefix.to_vec(),
            chunks,
        })
    }

    /// A commit on index `index` of `tenant`, conditional on token `seen`,
    /// landed with token `fresh` and the writes `batch`: the chunks cached
    /// under `seen` move to `fresh` with the batch's writes under their
    /// prefix applied.
    pub(super) fn committed(
        &self,
        (tenant, index): (&str, &str),
        seen: &Token,
        fresh: &[u8],
        batch: &WriteBatch,
    ) {
        let key = name(tenant, index);
        let mut held = self.lock();
        let held = &mut *held;
        let Some(mut c) = held.indexes.remove(&key) else {
            return;
        };
        held.bytes -= c.bytes;
        if seen.as_deref() != Some(c.token.as_slice()) {
            return;
        }
        // In place when no request holds the copy any more (a request
        // drops its views before its commit), else a copy.
        let chunks = Arc::make_mut(&mut c.chunks);
        let stored = |k: &[u8], v: &[u8]| k.len() + v.len();
        for op in batch.ops() {
            match op {
                WriteOp::Put { key, value } if key.starts_with(&c.prefix) => {
                    c.bytes += stored(key, value);
                    if let Some(old) = chunks.insert(key.clone(), value.as_slice().into()) {
                        c.bytes -= stored(key, &old);
                    }
                }
                WriteOp::Delete { key } if key.starts_with(&c.prefix) => {
                    if let Some(old) = chunks.remove(key) {
                        c.bytes -= stored(key, &old);
                    }
                }
                _ => {}
            }
        }
        if chunks.len() > MAX_INDEX_PAIRS || c.bytes > MAX_BYTES / 4 {
            return;
        }
        c.token = fresh.to_vec();
        make_room(held, c.bytes);
        held.bytes += c.bytes;
        held.indexes.insert(key, c);
    }
}

/// Drops cached indexes until `bytes` more fit under [`MAX_BYTES`].
fn make_room(held: &mut Held, bytes: usize) {
    while held.bytes + bytes > MAX_BYTES {
        let Some(victim) = held.indexes.keys().next().cloned() else {
            return;
        };
        if let Some(c) = held.indexes.remove(&victim) {
            held.bytes -= c.bytes;
        }
    }
}

/// The least key above every key that starts with `prefix` (`None`: no
/// such key, the prefix being all `0xff` bytes).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix[..=last].to_vec();
    end[last] += 1;
    Some(end)
}

/// A store whose pairs under `prefix` are a cached copy of one
/// generation's chunks; reads elsewhere and every write go to `base`.
struct CachedChunks {
    base: Arc<dyn Store>,
    prefix: Vec<u8>,
    chunks: Arc<Chunks>,
}

impl CachedChunks {
    fn ours(&self, key: &[u8]) -> bool {
        key.starts_with(&self.prefix)
    }

    /// [`Store::scan_from`] over the copy, each value given by `value`.
    fn scan_with<V>(
        &self,
        (prefix, from, descending, limit): (&[u8], &[u8], bool, usize),
        value: impl Fn(&Arc<[u8]>) -> V,
    ) -> Vec<(Vec<u8>, V)> {
        let pair = |(k, v): (&Vec<u8>, &Arc<[u8]>)| (k.clone(), value(v));
        // The keys under `prefix` are one range of the map: bounded by it,
        // the scan compares no key against the prefix.
        let end = prefix_end(prefix);
        let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        if descending {
            if from < prefix {
                return Vec::new();
            }
            let top = match upper {
                Bound::Excluded(end) if from >= end => Bound::Excluded(end),
                _ => Bound::Included(from),
            };
            self.chunks
                .range::<[u8], _>((Bound::Included(prefix), top))
                .rev()
                .take(limit)
                .map(pair)
                .collect()
        } else {
            let start = from.max(prefix);
            if let Bound::Excluded(end) = upper {
                if start >= end {
                    return Vec::new();
                }
            }
            self.chunks
                .range::<[u8], _>((Bound::Included(start), upper))
                .take(limit)
                .map(pair)
                .collect()
        }
    }
}

impl Store for CachedChunks {
    fn get(&self, key: &[u8]) -> sesame_core::Result<Option<Vec<u8>>> {
        if self.ours(key) {
            return Ok(self.chunks.get(key).map(|v| v.to_vec()));
        }
        self.base.get(key)
    }

    fn get_many(&self, keys: &[&[u8]]) -> sesame_core::Result<Vec<Option<Vec<u8>>>> {
        if !keys.iter().any(|k| self.ours(k)) {
            return self.base.get_many(keys);
        }
        keys.iter().map(|k| self.get(k)).collect()
    }

    fn scan_prefix(&self, prefix: &[u8]) -> sesame_core::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        if !self.ours(prefix) {
            return self.base.scan_prefix(prefix);
        }
        Ok(self
            .chunks
            .range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.to_vec()))
            .collect())
    }

    fn scan_from(
        &self,
        prefix: &[u8],
        from: &[u8],
        descending: bool,
        limit: usize,
    ) -> sesame_core::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        if !self.ours(prefix) {
            return self.base.scan_from(prefix, from, descending, limit);
        }
        Ok(self.scan_with((prefix, from, descending, limit), |v| v.to_vec()))
    }

    /// The scan without a copy of the cached chunks' bytes: a packed
    /// plan's read-ahead scans here for every update.
    fn scan_from_shared(
        &self,
        prefix: &[u8],
        from: &[u8],
        descending: bool,
        limit: usize,
    ) -> sesame_core::Result<Vec<(Vec<u8>, StoredValue)>> {
        if !self.ours(prefix) {
            return self.base.scan_from_shared(prefix, from, descending, limit);
        }
        Ok(self.scan_with((prefix, from, descending, limit), |v| {
            StoredValue::Shared(v.clone())
        }))
    }

    fn ordered_probes(&self) -> bool {
        true
    }

    sesame_store::forward_store!(|s| s.base; write, write_if, write_if_group, commit_groups,
        io_counts, backend, flush, health, verify);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use sesame_store::MemoryStore;

    use super::*;

    const PREFIX: &[u8] = b"t/i/0#";

    fn key(k: &[u8]) -> Vec<u8> {
        [PREFIX, k].concat()
    }

    /// Scans of the cached copy (copied or shared) answer what the store
    /// itself answers, at the prefix's edges too: `from` before, inside
    /// and past the prefix, both directions, a prefix that ends in `0xff`
    /// bytes, and pairs of the copy just outside the prefix asked for.
    #[test]
    fn cached_scans_answer_as_the_store_does() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let mut batch = WriteBatch::new();
        let keys: Vec<Vec<u8>> = [
            &b"t/i/0#"[..],
            b"t/i/0#a",
            b"t/i/0#a\xff",
            b"t/i/0#b",
            b"t/i/0#\xff",
            b"t/i/0#\xff\xff",
            b"t/i/0#\xff\xffz",
            b"t/i/0$",
        ]
        .iter()
        .map(|k| k.to_vec())
        .collect();
        for (n, k) in keys.iter().enumerate() {
            batch.put(k.clone(), vec![n as u8]);
        }
        store.write(batch).unwrap();
        let prefixes: [&[u8]; 4] = [PREFIX, b"t/i/0#a", b"t/i/0#\xff", b"t/i/0#\xff\xff"];
        let froms: [&[u8]; 10] = [
            b"",
            b"t/i/0",
            b"t/i/0#",
            b"t/i/0#a",
            b"t/i/0#a\x00",
            b"t/i/0#c",
            b"t/i/0#\xff",
            b"t/i/0#\xff\xff\xff",
            b"t/i/0$",
            b"u",
        ];
        for cached in [PREFIX, b"t/i/0"] {
            let cache = ChunkCache::default();
            let view = cache.view(&store, ("t", "i"), cached, &Some(b"T".to_vec()));
            for prefix in prefixes {
                for from in froms {
                    for descending in [false, true] {
                        for limit in [1, 2, 100] {
                            let want = store.scan_from(prefix, from, descending, limit).unwrap();
                            assert_eq!(
                                view.scan_from(prefix, from, descending, limit).unwrap(),
                                want,
                                "cached {cached:?}, prefix {prefix:?}, from {from:?}, \
                                 descending {descending}, limit {limit}"
                            );
                            let shared: Vec<(Vec<u8>, Vec<u8>)> = view
                                .scan_from_shared(prefix, from, descending, limit)
                                .unwrap()
                                .into_iter()
                                .map(|(k, v)| (k, v.to_vec()))
                                .collect();
                            assert_eq!(shared, want, "shared: cached {cached:?}, from {from:?}");
                        }
                    }
                }
            }
        }
        assert_eq!(prefix_end(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff"), None);
    }

    #[test]
    fn a_view_keeps_the_bytes_it_was_given_when_a_commit_changes_the_cache() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let mut first = WriteBatch::new();
        first.put(key(b"a"), b"old chunk".to_vec());
        first.put(key(b"b"), b"other".to_vec());
        store.write(first).unwrap();
        let cache = ChunkCache::default();
        let (seen, fresh) = (Some(b"T1".to_vec()), b"T2".to_vec());
        let view = cache.view(&store, ("t", "i"), PREFIX, &seen);
        assert_eq!(view.get(&key(b"a")).unwrap(), Some(b"old chunk".to_vec()));
        // A commit of this server on the token the view read: the store
        // and the cache move on while the view is still held.
        let mut batch = WriteBatch::new();
        batch.put(key(b"a"), b"new chunk".to_vec());
        batch.delete(key(b"b"));
        store.write(batch.clone()).unwrap();
        cache.committed(("t", "i"), &seen, &fresh, &batch);
        assert_eq!(
            view.get(&key(b"a")).unwrap(),
            Some(b"old chunk".to_vec()),
            "the held view's chunk"
        );
        let scanned = view.scan_from(PREFIX, PREFIX, false, 10).unwrap();
        assert_eq!(
            scanned,
            vec![
                (key(b"a"), b"old chunk".to_vec()),
                (key(b"b"), b"other".to_vec())
            ],
            "the held view's scan"
        );
        // A request on the fresh token sees the commit, from the cache.
        let (hits, _) = cache.counts();
        let after = cache.view(&store, ("t", "i"), PREFIX, &Some(fresh.clone()));
        assert_eq!(cache.counts().0, hits + 1, "served from the cache");
        assert_eq!(after.get(&key(b"a")).unwrap(), Some(b"new chunk".to_vec()));
        assert_eq!(after.get(&key(b"b")).unwrap(), None);
        let before = after.scan_from(PREFIX, &key(b"z"), true, 1).unwrap();
        assert_eq!(before, vec![(key(b"a"), b"new chunk".to_vec())]);
        // The old token is no longer a label: a request on it reads the
        // store.
        let (_, misses) = cache.counts();
        let stale = cache.view(&store, ("t", "i"), PREFIX, &seen);
        assert_eq!(cache.counts().1, misses + 1, "a miss");
        assert_eq!(stale.get(&key(b"a")).unwrap(), Some(b"new chunk".to_vec()));
    }
}
