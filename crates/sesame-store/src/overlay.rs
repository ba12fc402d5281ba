//! A transaction over a store: a scheme server's writes during one request
//! are buffered here and committed by its host in one batch (the network
//! server's engine, together with the index's metadata and the replay
//! record; the client SDK's embedded backend, together with its intents).
//!
//! Scheme servers may write several batches per request (a reset, then
//! entries) and read back what they wrote; the overlay serves reads from
//! its buffer first. Nothing reaches the store unless the engine commits,
//! so a request that fails, a malformed message or a killed server leaves
//! the store as it was.
//!
//! Writes that the limit cannot refuse (even if every key were new) are
//! appended to a log, and sorted into the buffer's map only when something
//! reads: an upload that only writes (a dynamic scheme's new entries)
//! costs one sort when it is drained, not a map insertion per key.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use sesame_core::{Error, IoCounter, IoCounts, Result, Store, WriteBatch, WriteOp};

/// A buffered write: the key and its value (`None`: deleted).
type Write = (Vec<u8>, Option<Vec<u8>>);

/// Bytes a buffered key holds.
fn held(key: &[u8], value: Option<&Vec<u8>>) -> usize {
    key.len() + value.map_or(0, Vec::len)
}

fn into_write(op: WriteOp) -> Write {
    match op {
        WriteOp::Put { key, value } => (key, Some(value)),
        WriteOp::Delete { key } => (key, None),
    }
}

/// The buffered writes.
#[derive(Default)]
struct Pending {
    /// Settled writes, each key once.
    map: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Bytes the map holds (a key counts once, at its latest size).
    held: usize,
    /// Later writes, in the order they came.
    log: Vec<Write>,
    /// Bytes of the log, every write counted in full: with `held`, at
    /// least what the buffer holds.
    logged: usize,
}

impl Pending {
    /// The log, sorted by key, each key once with its last write.
    fn sorted_log(&mut self) -> Vec<Write> {
        let mut log = std::mem::take(&mut self.log);
        self.logged = 0;
        // Stable: of a key's writes, the last stays last.
        log.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<Write> = Vec::with_capacity(log.len());
        for (key, value) in log {
            match out.last_mut() {
                Some(last) if last.0 == key => last.1 = value,
                _ => out.push((key, value)),
            }
        }
        out
    }

    /// Moves the log into the map.
    fn settle(&mut self) {
        if self.log.is_empty() {
            return;
        }
        for (key, value) in self.sorted_log() {
            let size = held(&key, value.as_ref());
            let before = match self.map.entry(key) {
                Entry::Occupied(mut o) => {
                    let before = held(o.key(), o.get().as_ref());
                    o.insert(value);
                    before
                }
                Entry::Vacant(v) => {
                    v.insert(value);
                    0
                }
            };
            self.held = self.held.saturating_sub(before).saturating_add(size);
        }
    }

    /// Every write, in key order, each key once; the buffer is left empty.
    fn take(&mut self) -> Vec<Write> {
        let taken = if self.map.is_empty() {
            self.sorted_log()
        } else {
            self.settle();
            std::mem::take(&mut self.map).into_iter().collect()
        };
        *self = Pending::default();
        taken
    }
}

/// The part of a store under `prefix`, with buffered writes.
pub struct Overlay {
    base: Arc<dyn Store>,
    prefix: Vec<u8>,
    pending: Mutex<Pending>,
    limit: usize,
    over_limit: AtomicBool,
    io: IoCounter,
}

impl std::fmt::Debug for Overlay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Overlay")
            .field("prefix", &String::from_utf8_lossy(&self.prefix))
            .finish_non_exhaustive()
    }
}

impl Overlay {
    /// A transaction on the keys of `base` under `prefix`, holding at
    /// most `limit` bytes of buffered keys and values (a key written again
    /// counts once, at its latest size; beyond the limit, writes fail and
    /// [`Overlay::over_limit`] is set).
    pub fn new(base: Arc<dyn Store>, prefix: Vec<u8>, limit: usize) -> Self {
        Overlay {
            base,
            prefix,
            pending: Mutex::new(Pending::default()),
            limit,
            over_limit: AtomicBool::new(false),
            io: IoCounter::default(),
        }
    }

    // Nothing panics while the lock is held short of running out of memory.
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The buffer, its log settled: ready for reads.
    fn settled(&self) -> MutexGuard<'_, Pending> {
        let mut pending = self.lock();
        pending.settle();
        pending
    }

    fn full(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix.len() + key.len());
        k.extend_from_slice(&self.prefix);
        k.extend_from_slice(key);
        k
    }

    /// Whether anything was written.
    pub fn has_writes(&self) -> bool {
        let pending = self.lock();
        !pending.map.is_empty() || !pending.log.is_empty()
    }

    /// Whether a write was refused for exceeding the limit.
    pub fn over_limit(&self) -> bool {
        self.over_limit.load(Ordering::Acquire)
    }

    /// Bytes of keys and values buffered (a key counts once).
    pub fn buffered_bytes(&self) -> usize {
        self.settled().held
    }

    /// Moves the buffered writes, with full keys and in key order, into
    /// `batch`.
    pub fn drain_into(&self, batch: &mut WriteBatch) {
        let taken = self.lock().take();
        for (key, value) in taken {
            let key = self.full(&key);
            match value {
                Some(value) => batch.put(key, value),
                None => batch.delete(key),
            };
        }
    }
}

impl Store for Overlay {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let buffered = self.settled().map.get(key).cloned();
        let value = match buffered {
            Some(v) => v,
            None => self.base.get(&self.full(key))?,
        };
        self.io.read(value.as_ref().map_or(0, Vec::len));
        Ok(value)
    }

    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out: Vec<Option<Option<Vec<u8>>>> = {
            let pending = self.settled();
            keys.iter().map(|k| pending.map.get(*k).cloned()).collect()
        };
        let missing: Vec<Vec<u8>> = keys
            .iter()
            .zip(&out)
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| self.full(k))
            .collect();
        if !missing.is_empty() {
            let refs: Vec<&[u8]> = missing.iter().map(Vec::as_slice).collect();
            let mut fetched = self.base.get_many(&refs)?.into_iter();
            for slot in out.iter_mut().filter(|v| v.is_none()) {
                *slot = Some(fetched.next().ok_or_else(|| {
                    Error::StoreCorrupt("the store answered fewer keys than asked".into())
                })?);
            }
        }
        let values: Vec<Option<Vec<u8>>> = out.into_iter().map(Option::flatten).collect();
        crate::counted_reads(&self.io, values)
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut pending = self.lock();
        let most = batch
            .ops()
            .iter()
            .fold(pending.held.saturating_add(pending.logged), |sum, op| {
                sum.saturating_add(op.bytes())
            });
        if most <= self.limit {
            // Even if every key were new the limit would hold: nothing is
            // refused, and the writes wait in the log.
            self.io.batch(&batch);
            pending.logged = most - pending.held;
            pending
                .log
                .extend(batch.into_ops().into_iter().map(into_write));
            return Ok(());
        }
        // The limit bounds what the overlay holds: a key written again
        // replaces its earlier value, so only the difference counts.
        pending.settle();
        let mut total = pending.held;
        // Keys written earlier in this batch (hashed: a batch of an index
        // upload holds hundreds of thousands of keys).
        let mut seen: HashMap<&[u8], usize> = HashMap::with_capacity(batch.len());
        for op in batch.ops() {
            let size = op.bytes();
            let key = match op {
                WriteOp::Put { key, .. } | WriteOp::Delete { key } => key.as_slice(),
            };
            let before = match seen.get(key) {
                Some(&s) => s,
                None => pending.map.get(key).map_or(0, |v| held(key, v.as_ref())),
            };
            seen.insert(key, size);
            total = total.saturating_sub(before).saturating_add(size);
        }
        if total > self.limit {
            self.over_limit.store(true, Ordering::Release);
            return Err(Error::InvalidArgument(format!(
                "the request writes more than the server's limit of {} bytes",
                self.limit
            )));
        }
        self.io.batch(&batch);
        for (key, value) in batch.into_ops().into_iter().map(into_write) {
            pending.map.insert(key, value);
        }
        pending.held = total;
        Ok(())
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let n = self.prefix.len();
        let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = self
            .base
            .scan_prefix(&self.full(prefix))?
            .into_iter()
            .map(|(mut k, v)| {
                k.drain(..n);
                (k, v)
            })
            .collect();
        {
            let pending = self.settled();
            let range = pending
                .map
                .range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded));
            for (k, v) in range.take_while(|(k, _)| k.starts_with(prefix)) {
                match v {
                    Some(v) => merged.insert(k.clone(), v.clone()),
                    None => merged.remove(k),
                };
            }
        }
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = merged.into_iter().collect();
        crate::counted_scan(&self.io, pairs)
    }

    fn io_counts(&self) -> IoCounts {
        self.io.counts()
    }

    fn backend(&self) -> &'static str {
        self.base.backend()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sesame_store::MemoryStore;

    #[test]
    fn reads_see_buffered_writes_and_nothing_reaches_the_store_before_commit() {
        let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
        base.put(b"p/a", b"1").unwrap();
        base.put(b"p/b", b"2").unwrap();
        base.put(b"q/a", b"x").unwrap();
        let o = Overlay::new(base.clone(), b"p/".to_vec(), 1 << 20);
        o.put(b"c", b"3").unwrap();
        o.delete(b"a").unwrap();
        o.put(b"b", b"22").unwrap();
        assert_eq!(o.get(b"a").unwrap(), None);
        assert_eq!(o.get(b"b").unwrap(), Some(b"22".to_vec()));
        assert_eq!(
            o.get_many(&[b"a", b"b", b"c", b"d"]).unwrap(),
            vec![None, Some(b"22".to_vec()), Some(b"3".to_vec()), None]
        );
        assert_eq!(
            o.scan_prefix(b"").unwrap(),
            vec![
                (b"b".to_vec(), b"22".to_vec()),
                (b"c".to_vec(), b"3".to_vec())
            ]
        );
        assert_eq!(base.get(b"p/c").unwrap(), None, "not committed yet");
        let mut batch = WriteBatch::new();
        o.drain_into(&mut batch);
        base.write(batch).unwrap();
        assert_eq!(
            base.scan_prefix(b"").unwrap(),
            vec![
                (b"p/b".to_vec(), b"22".to_vec()),
                (b"p/c".to_vec(), b"3".to_vec()),
                (b"q/a".to_vec(), b"x".to_vec())
            ]
        );
    }

    #[test]
    fn logged_writes_drain_in_key_order_with_the_last_write_of_each_key() {
        let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let o = Overlay::new(base, b"p/".to_vec(), usize::MAX);
        o.put(b"c", b"1").unwrap();
        o.put(b"a", b"1").unwrap();
        o.put(b"c", b"2").unwrap();
        // A read settles the log; later writes are logged again.
        assert_eq!(o.get(b"c").unwrap(), Some(b"2".to_vec()));
        o.delete(b"a").unwrap();
        o.put(b"b", b"1").unwrap();
        o.put(b"c", b"3").unwrap();
        o.put(b"b", b"2").unwrap();
        // a deleted (its key), b and c (key and value).
        assert_eq!(o.buffered_bytes(), 1 + 2 + 2);
        let mut batch = WriteBatch::new();
        o.drain_into(&mut batch);
        assert_eq!(
            batch.into_ops(),
            vec![
                WriteOp::Delete {
                    key: b"p/a".to_vec()
                },
                WriteOp::Put {
                    key: b"p/b".to_vec(),
                    value: b"2".to_vec()
                },
                WriteOp::Put {
                    key: b"p/c".to_vec(),
                    value: b"3".to_vec()
                },
            ]
        );
        assert!(!o.has_writes());
        assert_eq!(o.buffered_bytes(), 0);
        // Only logged writes: the log alone is sorted.
        o.put(b"z", b"1").unwrap();
        o.put(b"y", b"1").unwrap();
        o.put(b"z", b"2").unwrap();
        let mut batch = WriteBatch::new();
        o.drain_into(&mut batch);
        let keys: Vec<Vec<u8>> = batch
            .ops()
            .iter()
            .map(|op| match op {
                WriteOp::Put { key, .. } | WriteOp::Delete { key } => key.clone(),
            })
            .collect();
        assert_eq!(keys, vec![b"p/y".to_vec(), b"p/z".to_vec()]);
    }

    #[test]
    fn the_limit_refuses_writes() {
        let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let o = Overlay::new(base, b"p/".to_vec(), 10);
        o.put(b"k", b"12345").unwrap();
        assert!(o.put(b"l", b"123456789").is_err());
        assert!(o.over_limit());
    }

    #[test]
    fn the_limit_counts_what_is_held_not_what_was_overwritten() {
        // A protocol that rewrites the same keys (Path ORAM rewrites a
        // path on every access) holds one value per key.
        let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let o = Overlay::new(base, b"p/".to_vec(), 100);
        for i in 0..50u8 {
            o.put(b"k", &[i; 60]).unwrap();
        }
        o.delete(b"k").unwrap();
        o.put(b"l", &[1; 90]).unwrap();
        assert!(!o.over_limit());
        assert!(o.put(b"m", &[1; 20]).is_err());
        // Within one batch too: a key put three times holds one value.
        let o = Overlay::new(Arc::new(MemoryStore::new()), b"p/".to_vec(), 100);
        let mut batch = WriteBatch::new();
        for i in 0..3u8 {
            batch.put(b"k".as_slice(), [i; 60].as_slice());
        }
        o.write(batch).unwrap();
        assert_eq!(o.get(b"k").unwrap(), Some(vec![2; 60]));
        let mut batch = WriteBatch::new();
        batch.put(b"k".as_slice(), [3; 60].as_slice());
        batch.put(b"n".as_slice(), [3; 60].as_slice());
        assert!(o.write(batch).is_err());
    }
}
