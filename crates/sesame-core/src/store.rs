//! The `Store` interface: a key-value store with atomic write batches and
//! prefix scans, whose reads and writes are counted.
//!
//! Backends live in `sesame-store`; every backend embeds an [`IoCounter`]
//! and passes the generic store suite there.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::Result;

/// One operation of a [`WriteBatch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOp {
    /// Insert or overwrite `key` with `value`.
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// Remove `key` if present.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
}

impl WriteOp {
    /// Bytes of its key and value (a delete: its key).
    pub fn bytes(&self) -> usize {
        match self {
            WriteOp::Put { key, value } => key.len() + value.len(),
            WriteOp::Delete { key } => key.len(),
        }
    }
}

/// A list of writes applied all or nothing, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<WriteOp>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch with room for `n` operations.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            ops: Vec::with_capacity(n),
        }
    }

    /// Adds a put.
    pub fn put(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> &mut Self {
        self.ops.push(WriteOp::Put {
            key: key.into(),
            value: value.into(),
        });
        self
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: impl Into<Vec<u8>>) -> &mut Self {
        self.ops.push(WriteOp::Delete { key: key.into() });
        self
    }

    /// Keeps the first `len` operations, dropping those added after them.
    pub fn truncate(&mut self, len: usize) {
        self.ops.truncate(len);
    }

    /// The operations, in order.
    pub fn ops(&self) -> &[WriteOp] {
        &self.ops
    }

    /// Consumes the batch into its operations.
    pub fn into_ops(self) -> Vec<WriteOp> {
        self.ops
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Bytes of the keys and values it writes ([`WriteOp::bytes`]).
    pub fn bytes(&self) -> usize {
        self.ops.iter().map(WriteOp::bytes).sum()
    }
}

/// Counts of store operations, as reported by [`Store::io_counts`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoCounts {
    /// Point reads (`get`), one per key asked for.
    pub reads: u64,
    /// Key-value pairs written or deleted.
    pub writes: u64,
    /// Prefix scans.
    pub scans: u64,
    /// Pairs returned by prefix scans.
    pub scanned: u64,
    /// Bytes of keys and values returned by reads and scans.
    pub bytes_read: u64,
    /// Bytes of keys and values written.
    pub bytes_written: u64,
}

impl IoCounts {
    /// The operations between `earlier` and `self`.
    pub fn since(&self, earlier: &IoCounts) -> IoCounts {
        IoCounts {
            reads: self.reads.wrapping_sub(earlier.reads),
            writes: self.writes.wrapping_sub(earlier.writes),
            scans: self.scans.wrapping_sub(earlier.scans),
            scanned: self.scanned.wrapping_sub(earlier.scanned),
            bytes_read: self.bytes_read.wrapping_sub(earlier.bytes_read),
            bytes_written: self.bytes_written.wrapping_sub(earlier.bytes_written),
        }
    }

    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &IoCounts) {
        self.reads += other.reads;
        self.writes += other.writes;
        self.scans += other.scans;
        self.scanned += other.scanned;
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
    }
}

/// Thread-safe operation counters a backend embeds.
#[derive(Debug, Default)]
pub struct IoCounter {
    /// Write calls begun and settled ([`IoCounter::begin_write`]).
    writes_begun: AtomicU64,
    writes_settled: AtomicU64,
    reads: AtomicU64,
    writes: AtomicU64,
    scans: AtomicU64,
    scanned: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

impl IoCounter {
    /// Records a point read that returned `bytes` bytes.
    pub fn read(&self, bytes: usize) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.bytes_read.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Records a prefix scan that returned `pairs` pairs of `bytes` bytes.
    pub fn scan(&self, pairs: usize, bytes: usize) {
        self.scans.fetch_add(1, Ordering::Relaxed);
        self.scanned.fetch_add(pairs as u64, Ordering::Relaxed);
        self.bytes_read.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Records the writes of a committed batch.
    pub fn batch(&self, batch: &WriteBatch) {
        let bytes = batch.bytes();
        self.writes.fetch_add(batch.len() as u64, Ordering::Relaxed);
        self.bytes_written
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Marks a write call begun, before anything of it can be seen; the
    /// guard marks it settled when dropped, once what it wrote can be
    /// seen (or it failed). See [`WriteMarks`].
    pub fn begin_write(&self) -> WriteInFlight<'_> {
        self.writes_begun.fetch_add(1, Ordering::SeqCst);
        WriteInFlight(self)
    }

    /// The write calls begun and settled so far.
    pub fn write_marks(&self) -> WriteMarks {
        // Settled first: a write counted settled here is counted begun
        // below too.
        let settled = self.writes_settled.load(Ordering::SeqCst);
        let begun = self.writes_begun.load(Ordering::SeqCst);
        WriteMarks { begun, settled }
    }

    /// The counts so far.
    pub fn counts(&self) -> IoCounts {
        IoCounts {
            reads: self.reads.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            scans: self.scans.load(Ordering::Relaxed),
            scanned: self.scanned.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
        }
    }
}

/// A write call in flight ([`IoCounter::begin_write`]): settled when
/// dropped.
#[derive(Debug)]
#[must_use = "the write is settled when the guard is dropped"]
pub struct WriteInFlight<'a>(&'a IoCounter);

impl Drop for WriteInFlight<'_> {
    fn drop(&mut self) {
        self.0.writes_settled.fetch_add(1, Ordering::SeqCst);
    }
}

/// How many write calls a store has begun and settled in this process
/// ([`Store::write_marks`]): a reader that reads `settled` before its
/// reads and finds `begun` unchanged at that value after them knows that
/// no write was in flight at any moment of its reads, so that they all
/// saw one state of the store (`sesame_store::packed::ChunkMemo` holds
/// only what it read so). A write is begun before anything of it can be
/// seen and settled once all of it can.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteMarks {
    /// Write calls begun.
    pub begun: u64,
    /// Write calls settled (applied or failed).
    pub settled: u64,
}

/// A stored value as a scan hands it out ([`Store::scan_from_shared`]):
/// shared with the store where the store holds it in memory (a server's
/// cache of packed chunks), else the scan's own copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoredValue {
    /// The scan's own copy.
    Owned(Vec<u8>),
    /// The store's bytes, shared.
    Shared(std::sync::Arc<[u8]>),
}

impl std::ops::Deref for StoredValue {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Owned(v) => v,
            Self::Shared(v) => v,
        }
    }
}

impl StoredValue {
    /// The bytes as an owned vector (a copy when shared).
    pub fn into_vec(self) -> Vec<u8> {
        match self {
            Self::Owned(v) => v,
            Self::Shared(v) => v.to_vec(),
        }
    }
}

/// One conditional batch of a group ([`Store::write_if_group`]): the
/// keys with the value each must hold (`None`: absent), and the writes.
pub type Conditional<'a> = (&'a [(&'a [u8], Option<&'a [u8]>)], &'a WriteBatch);

/// A key-value store with atomic write batches and prefix scans.
///
/// Keys and values are byte strings. Methods take `&self`: a store is shared
/// by the threads of a server, and each backend synchronises internally.
/// A write batch is applied all or nothing, also if the process dies while
/// it is being written.
pub trait Store: Send + Sync {
    /// The value of `key`, if present.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;

    /// The values of many keys, in order. Backends may override this with a
    /// faster multi-get; each key counts as one read.
    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    /// Applies `batch` atomically.
    fn write(&self, batch: WriteBatch) -> Result<()>;

    /// Applies `batch` atomically if, at that moment, every key of
    /// `expect` holds the value given with it (`None`: the key is absent);
    /// otherwise writes nothing and returns `Ok(false)`.
    ///
    /// The check and the write are one step of the backend (one
    /// transaction, one script), so of two writers that read the same
    /// value and both expect it, exactly one succeeds: the compare-and-swap
    /// that lets several servers write one index without a lock in any
    /// server's memory. A key that is written conditionally is to be
    /// written only conditionally: a plain [`Store::write`] of it does not
    /// wait for a conditional write in flight on every backend.
    ///
    /// The default refuses with [`Error::Unsupported`](crate::Error::Unsupported):
    /// a backend without an atomic check must not pretend to have one.
    fn write_if(&self, expect: &[(&[u8], Option<&[u8]>)], batch: &WriteBatch) -> Result<bool> {
        let _ = (expect, batch);
        Err(crate::Error::Unsupported(format!(
            "the {} store has no conditional writes",
            self.backend()
        )))
    }

    /// Applies several conditional batches, each as [`Store::write_if`]
    /// would, in one commit of the backend: in order, each batch is
    /// written if its `expect` holds against the store as the batches
    /// before it in `group` left it; the answer says, per batch, whether it
    /// was written. When this returns `Ok`, every batch it says was written
    /// is as durable as a `write_if` that returned `Ok(true)`; an `Err`
    /// means none was written as far as the backend can tell (an error of
    /// the commit itself may be ambiguous, as for `write_if`).
    ///
    /// Group commit: a server whose requests to different indexes arrive
    /// together pays one durable commit (one `fsync`) for all of them.
    /// The default writes each batch with its own `write_if`, in order;
    /// backends that gain from one commit override it and say so in
    /// [`Store::commit_groups`].
    fn write_if_group(&self, group: &[Conditional<'_>]) -> Result<Vec<bool>> {
        group
            .iter()
            .map(|(expect, batch)| self.write_if(expect, batch))
            .collect()
    }

    /// How many [`Store::write_if_group`] commits a caller should run at
    /// once: 0 (the default) when grouping gains nothing (the default
    /// `write_if_group`, or a backend whose commits are cheap or spread
    /// over nodes); 1 for a backend with one writer at a time (redb); more
    /// for a database that commits several transactions at once.
    fn commit_groups(&self) -> usize {
        0
    }

    /// Inserts or overwrites one pair.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::with_capacity(1);
        b.put(key, value);
        self.write(b)
    }

    /// Removes one key if present.
    fn delete(&self, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::with_capacity(1);
        b.delete(key);
        self.write(b)
    }

    /// Every pair whose key starts with `prefix`, in ascending key order.
    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;

    /// At most `limit` pairs whose keys start with `prefix`, from `from`
    /// on: ascending from the first key `>= from`, or, `descending`,
    /// downwards from the last key `<= from`. One scan in the counts.
    ///
    /// A bounded probe, where [`Store::scan_prefix`] reads everything:
    /// "the pair at or before this key" is `scan_from(p, key, true, 1)`.
    /// The default filters a full prefix scan (correct, not fast);
    /// backends with ordered keys override it and say so in
    /// [`Store::ordered_probes`].
    fn scan_from(
        &self,
        prefix: &[u8],
        from: &[u8],
        descending: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut pairs = self.scan_prefix(prefix)?;
        if descending {
            pairs.retain(|(k, _)| k.as_slice() <= from);
            pairs.reverse();
        } else {
            pairs.retain(|(k, _)| k.as_slice() >= from);
        }
        pairs.truncate(limit);
        Ok(pairs)
    }

    /// [`Store::scan_from`], with values shared rather than copied where
    /// the store holds them in memory: a packed plan reads whole chunks
    /// (up to 16 KB) to place a few keys, and a copy of each was most of
    /// its time on a server (`docs/scaling.md`). The default copies, as
    /// `scan_from` does; counted as `scan_from` is.
    fn scan_from_shared(
        &self,
        prefix: &[u8],
        from: &[u8],
        descending: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, StoredValue)>> {
        Ok(self
            .scan_from(prefix, from, descending, limit)?
            .into_iter()
            .map(|(k, v)| (k, StoredValue::Owned(v)))
            .collect())
    }

    /// Whether [`Store::scan_from`] is a bounded probe here, not the
    /// default's filtered full scan: layouts that probe on every lookup
    /// (packed entries) are used only where it is. A wrapper forwards it
    /// together with `scan_from`; one that does not says `false`, the
    /// default, and so stays on the safe side.
    fn ordered_probes(&self) -> bool {
        false
    }

    /// Operation counts since the store was opened.
    fn io_counts(&self) -> IoCounts;

    /// The write calls begun and settled on this store ([`WriteMarks`]),
    /// where every write of the store goes through this handle in this
    /// process and is marked; `None` (the default) where the store cannot
    /// say (another process or server may write it, or a wrapper does not
    /// pass them on).
    fn write_marks(&self) -> Option<WriteMarks> {
        None
    }

    /// Makes every committed batch durable (a no-op where commits already
    /// are).
    fn flush(&self) -> Result<()> {
        Ok(())
    }

    /// A short name of the backend, for reports ("memory", "redb", ...).
    fn backend(&self) -> &'static str;

    /// Whether the store can serve requests now: `Ok` when a read would
    /// succeed, else the error a read would meet (a backend that recovers
    /// from a failure, such as a full disk, tries to recover first). Hosts
    /// report it in their health checks.
    fn health(&self) -> Result<()> {
        Ok(())
    }

    /// Checks the whole store for damage the engine can detect (page
    /// checksums, tree structure, record checksums): `Ok` when none is
    /// found, else [`Error::StoreCorrupt`](crate::Error::StoreCorrupt) naming what is wrong.
    /// Reads everything: meant for `sesame check`, not for every request.
    fn verify(&self) -> Result<()> {
        Ok(())
    }
}

/// Store methods that pass the call on unchanged: `|s| inner;` names what
/// `s` (the wrapper) forwards to, then each method's signature. For the
/// wrappers of this crate (an `Arc`, [`Prefixed`], the recording store of
/// [`crate::view`]), which differ only in what they change.
macro_rules! forward_store_calls {
    (|$s:ident| $inner:expr; $(fn $m:ident(&self $(, $a:ident: $t:ty)*) -> $ret:ty;)+) => {
        $(
            fn $m(&self $(, $a: $t)*) -> $ret {
                let $s = self;
                $inner.$m($($a),*)
            }
        )+
    };
}
pub(crate) use forward_store_calls;

impl<S: Store + ?Sized> Store for std::sync::Arc<S> {
    forward_store_calls! { |s| (**s);
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
        fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>>;
        fn write(&self, batch: WriteBatch) -> Result<()>;
        fn write_if(&self, expect: &[(&[u8], Option<&[u8]>)], batch: &WriteBatch) -> Result<bool>;
        fn write_if_group(&self, group: &[Conditional<'_>]) -> Result<Vec<bool>>;
        fn commit_groups(&self) -> usize;
        fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
        fn scan_from(&self, prefix: &[u8], from: &[u8], descending: bool, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
        fn scan_from_shared(&self, prefix: &[u8], from: &[u8], descending: bool, limit: usize) -> Result<Vec<(Vec<u8>, StoredValue)>>;
        fn ordered_probes(&self) -> bool;
        fn io_counts(&self) -> IoCounts;
        fn write_marks(&self) -> Option<WriteMarks>;
        fn flush(&self) -> Result<()>;
        fn backend(&self) -> &'static str;
        fn health(&self) -> Result<()>;
        fn verify(&self) -> Result<()>;
    }
}

/// A view of a store under a fixed key prefix: the server gives each index
/// its own key space this way. Keys seen through the view have the prefix
/// removed.
#[derive(Clone, Debug)]
pub struct Prefixed<S> {
    inner: S,
    prefix: Vec<u8>,
}

impl<S: Store> Prefixed<S> {
    /// The part of `inner` whose keys start with `prefix`.
    pub fn new(inner: S, prefix: impl Into<Vec<u8>>) -> Self {
        Self {
            inner,
            prefix: prefix.into(),
        }
    }

    fn key(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.prefix.len() + key.len());
        k.extend_from_slice(&self.prefix);
        k.extend_from_slice(key);
        k
    }

    fn batch(&self, batch: WriteBatch) -> WriteBatch {
        let mut out = WriteBatch::with_capacity(batch.len());
        for op in batch.into_ops() {
            match op {
                WriteOp::Put { key, value } => out.put(self.key(&key), value),
                WriteOp::Delete { key } => out.delete(self.key(&key)),
            };
        }
        out
    }
}

impl<S: Store> Store for Prefixed<S> {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(&self.key(key))
    }

    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let full: Vec<Vec<u8>> = keys.iter().map(|k| self.key(k)).collect();
        let refs: Vec<&[u8]> = full.iter().map(Vec::as_slice).collect();
        self.inner.get_many(&refs)
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.inner.write(self.batch(batch))
    }

    fn write_if(&self, expect: &[(&[u8], Option<&[u8]>)], batch: &WriteBatch) -> Result<bool> {
        let keys: Vec<Vec<u8>> = expect.iter().map(|(k, _)| self.key(k)).collect();
        let full: Vec<(&[u8], Option<&[u8]>)> = keys
            .iter()
            .zip(expect)
            .map(|(k, (_, v))| (k.as_slice(), *v))
            .collect();
        self.inner.write_if(&full, &self.batch(batch.clone()))
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let n = self.prefix.len();
        Ok(self
            .inner
            .scan_prefix(&self.key(prefix))?
            .into_iter()
            .map(|(mut k, v)| {
                k.drain(..n);
                (k, v)
            })
            .collect())
    }

    fn scan_from(
        &self,
        prefix: &[u8],
        from: &[u8],
        descending: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let n = self.prefix.len();
        Ok(self
            .inner
            .scan_from(&self.key(prefix), &self.key(from), descending, limit)?
            .into_iter()
            .map(|(mut k, v)| {
                k.drain(..n);
                (k, v)
            })
            .collect())
    }

    forward_store_calls! { |s| s.inner;
        fn ordered_probes(&self) -> bool;
        fn io_counts(&self) -> IoCounts;
        // Every write through the view is a write of the store it views.
        fn write_marks(&self) -> Option<WriteMarks>;
        fn flush(&self) -> Result<()>;
        fn backend(&self) -> &'static str;
        fn health(&self) -> Result<()>;
    }
}
