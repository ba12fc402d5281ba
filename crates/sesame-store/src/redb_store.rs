//! The redb backend: one file, one write transaction per batch.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use redb::backends::{FileBackend, InMemoryBackend};
use redb::{Builder, Database, ReadableTable, TableDefinition, TableError, WriteTransaction};
use sesame_core::{Conditional, Error, IoCounter, Result, Store, WriteBatch, WriteOp};

use crate::probe::ProbeBackend;
use crate::redb_error::{from_redb, from_redb_probe, guard, panicked};
use crate::redb_header::require_repair_if_longer;
use crate::{counted_group, RangeScan};

/// The key of the format marker in the metadata table `sesame.meta`.
pub const FORMAT_KEY: &str = "sesame.format";

/// The format marker this build writes and reads: the value of
/// [`FORMAT_KEY`]. A file with another `sesame-store/N` is refused with
/// [`Error::StoreForeign`].
pub const FORMAT_VERSION: &str = "sesame-store/1";

const META: TableDefinition<&str, &str> = TableDefinition::new("sesame.meta");
const DATA: TableDefinition<&[u8], &[u8]> = TableDefinition::new("sesame.data");

/// The first bytes of every redb file (redb 2, `header.rs`).
const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

/// redb's page cache while a file is inspected before it is opened.
const PROBE_CACHE_BYTES: usize = 16 << 20;

/// redb's page cache of an open store file: 128 MiB (redb keeps 9/10 for
/// pages read and written, 1/10 for a transaction's dirty pages before
/// they are written out). redb's default, 1 GiB, kept every page a large
/// import wrote until it held 1 GiB: the largest part of an import's
/// peak memory once its other parts were bounded (`docs/performance.md`,
/// "An import's memory, bounded"). A page the cache no longer holds is
/// read again from the file, usually from the operating system's page
/// cache. A process that mostly reads sets a larger one with
/// [`RedbStore::set_cache_bytes`] (`sesame sql`: 1 GiB); `sesame import`,
/// which writes far more pages than it reads back, a smaller one (32 MiB).
const CACHE_BYTES: usize = 128 << 20;

/// The page cache of the store files this process opens from now on
/// ([`RedbStore::set_cache_bytes`]; [`CACHE_BYTES`] unless set).
static CACHE: AtomicUsize = AtomicUsize::new(CACHE_BYTES);

/// The smallest page cache [`RedbStore::set_cache_bytes`] sets.
const MIN_CACHE_BYTES: usize = 1 << 20;

/// A store in a redb database: the embedded default backend.
///
/// Each [`Store::write`] is one redb write transaction, committed with
/// two-phase commit and `fsync` before `write` returns: a batch is durable
/// once `write` returns, and all or nothing if the process or machine dies
/// during it. Writers queue for redb's single write transaction; readers
/// never wait (each read runs in its own read transaction, a snapshot).
///
/// [`RedbStore::open`] refuses, without writing to it, any file that is not a
/// Sesame store (see the crate docs and `docs/storage.md`).
///
/// Should redb panic (it can, on a damaged file), the operation returns
/// [`Error::StoreCorrupt`] and the store refuses every later operation;
/// dropping it then leaves the file as a crash would, and the file stays
/// locked until the process exits.
pub struct RedbStore {
    /// `None` while the store is dropped, and after an I/O error until the
    /// file could be opened again.
    db: RwLock<Option<Database>>,
    /// Set when redb panicked: its in-memory state may be broken.
    poisoned: AtomicBool,
    path: Option<PathBuf>,
    label: String,
    io: IoCounter,
}

impl Drop for RedbStore {
    fn drop(&mut self) {
        let Some(db) = self
            .db
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return;
        };
        if self.poisoned.load(Ordering::Acquire) {
            // After a panic inside redb, closing could write broken allocator
            // state or panic again. Leave the file as a crash would: the next
            // open recovers it from the last commit. The file handle, and
            // with it redb's lock on the file, stays open until the process
            // exits.
            std::mem::forget(db);
        } else {
            // redb writes on close; on a damaged file that can panic, which
            // must not escape a drop.
            let _ = catch_unwind(AssertUnwindSafe(move || drop(db)));
        }
    }
}

impl fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedbStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl RedbStore {
    /// Opens the Sesame store at `path`, creating it if no file is there.
    ///
    /// A new store is built in a temporary file next to `path` and linked
    /// into place once its marker is committed, so `path` never holds a
    /// half-made store. An existing file is inspected read-only first: a file
    /// that is empty, not a redb database, or a redb database without the
    /// Sesame marker gives [`Error::StoreForeign`] and is left untouched; a
    /// damaged redb file gives [`Error::StoreCorrupt`] (or `StoreForeign`
    /// where the damage hides that it is a redb file); a file open elsewhere
    /// gives [`Error::StoreIo`].
    ///
    /// A store left by a process killed during redb's repair on open (its
    /// header marked clean over a file longer than the header's layout) is
    /// marked for repair first and recovered from its last commit, where
    /// redb alone would panic on every open (see `redb_header`).
    ///
    /// This does not read every page: redb verifies page checksums only when
    /// it recovers from a crash. Use [`RedbStore::open_checked`] to verify the
    /// whole file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_file(path.as_ref(), false)
    }

    /// Like [`RedbStore::open`], and also verifies the checksum of every page
    /// before the file is used (reading the whole file). A mismatch gives
    /// [`Error::StoreCorrupt`]; the file is not repaired or changed.
    pub fn open_checked(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_file(path.as_ref(), true)
    }

    /// Sets redb's page cache for the store files this process opens
    /// from now on (at least 1 MiB; 128 MiB unless set). A process that
    /// opens one profile and answers many queries from it (`sesame sql`)
    /// sets a cache that holds its working set: a page the cache lacks
    /// is read from the file again (a system call, a copy and an
    /// allocation each), which was half of a point query's time in
    /// `sesame sql` (`docs/performance.md`). The cache fills only as
    /// pages are read or written, up to this size.
    pub fn set_cache_bytes(bytes: usize) {
        CACHE.store(bytes.max(MIN_CACHE_BYTES), Ordering::Relaxed);
    }

    /// The page cache a store file opened now gets
    /// ([`RedbStore::set_cache_bytes`]).
    pub fn cache_bytes() -> usize {
        CACHE.load(Ordering::Relaxed)
    }

    /// A new, empty store held in memory by redb: the redb code paths without
    /// a file, for tests.
    pub fn open_in_memory() -> Result<Self> {
        let label = "in-memory redb store".to_string();
        let db = guard(&label, || {
            Builder::new()
                .create_with_backend(InMemoryBackend::new())
                .map_err(|e| from_redb(&label, e))
        })?;
        let store = Self::new(db, None, label);
        store.run(|db| init(db, &store.label))?;
        Ok(store)
    }

    /// The file of the store; `None` for [`RedbStore::open_in_memory`].
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn open_file(path: &Path, verify: bool) -> Result<Self> {
        let label = format!("redb store {}", path.display());
        match std::fs::metadata(path) {
            Err(e) if e.kind() == ErrorKind::NotFound => create(path, &label)?,
            Err(e) => return Err(Error::StoreIo(format!("{label}: {e}"))),
            Ok(meta) if meta.is_dir() => {
                return Err(Error::StoreForeign(format!(
                    "{label}: is a directory, not a Sesame store file"
                )))
            }
            Ok(_) => {}
        }
        check_magic(path, &label)?;
        guard(&label, || probe(path, &label, verify))?;
        let db = guard(&label, || open_db(path, &label))?;
        let store = Self::new(db, Some(path.to_path_buf()), label);
        // The probe saw the marker; checking again costs little and catches a
        // file swapped in between.
        store.run(|db| check_marker(db, &store.label, from_redb))?;
        Ok(store)
    }

    fn new(db: Database, path: Option<PathBuf>, label: String) -> Self {
        Self {
            db: RwLock::new(Some(db)),
            poisoned: AtomicBool::new(false),
            path,
            label,
            io: IoCounter::default(),
        }
    }

    /// Runs `f` on the database, turning a panic inside redb into
    /// [`Error::StoreCorrupt`]. After a panic the store refuses every
    /// operation: redb's in-memory state may be broken, and writing it out
    /// could damage the file.
    fn run<T>(&self, f: impl FnOnce(&Database) -> Result<T>) -> Result<T> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::StoreCorrupt(format!(
                "{}: an earlier operation panicked inside redb; reopen the store",
                self.label
            )));
        }
        let result = {
            let guard = self.db.read().unwrap_or_else(PoisonError::into_inner);
            match guard.as_ref() {
                Some(db) => catch_unwind(AssertUnwindSafe(|| f(db))).unwrap_or_else(|payload| {
                    self.poisoned.store(true, Ordering::Release);
                    Err(panicked(&self.label, &*payload))
                }),
                None => Err(Error::StoreIo(format!(
                    "{}: the store could not be opened again after an I/O error",
                    self.label
                ))),
            }
        };
        if matches!(result, Err(Error::StoreIo(_) | Error::StoreFull(_))) {
            self.reopen();
        }
        result
    }

    /// After an I/O error (a full disk, say) redb refuses every later
    /// operation, reads included, until the database is opened again: the
    /// file holds the last commit (two-phase commit), so the store drops
    /// its handle and opens the file again, and reads work at once and
    /// writes once space returns. A store held in memory, or one whose
    /// reopening fails (it is tried again on the next error), is left as
    /// it is.
    fn reopen(&self) {
        let Some(path) = &self.path else { return };
        if self.poisoned.load(Ordering::Acquire) {
            return;
        }
        let mut guard = self.db.write().unwrap_or_else(PoisonError::into_inner);
        // The handle must go first: it holds redb's lock on the file.
        if let Some(old) = guard.take() {
            let _ = catch_unwind(AssertUnwindSafe(move || drop(old)));
        }
        *guard = guard_open(|| open_db(path, &self.label)).ok();
    }

    /// Asks redb to compact the file (move live pages down and shrink it):
    /// copy-on-write commits leave freed pages behind, which redb reuses
    /// but does not return. Waits for every other operation on this
    /// handle; returns whether anything was reclaimed. The test checks
    /// that every live pair survives and a file of deleted pairs shrinks;
    /// behaviour under a crash during compaction is redb's and is not
    /// tested here.
    pub fn compact(&self) -> Result<bool> {
        let label = &self.label;
        self.run_exclusive(|db| {
            db.compact()
                .map_err(|e| Error::StoreIo(format!("{label}: compaction: {e}")))
        })
    }

    /// Rewrites the store into a fresh file and puts it in place of the
    /// old one: the way to give back the free pages that copy-on-write
    /// commits leave, which [`RedbStore::compact`] only partly returns
    /// (redb moves pages down only while a lower slot of their size is
    /// free). Waits for every other operation on this handle.
    ///
    /// Every pair is copied in key order into a new redb file next to the
    /// store (committed every [`VACUUM_BATCH_BYTES`], the last commit with
    /// two-phase commit and `fsync`), the copy's pairs and bytes are
    /// counted against the original's, and the copy is renamed over the
    /// store and the folder synced. The copy is opened before the rename,
    /// so redb's lock on the file is never released. A crash before the
    /// rename leaves the old store as it was and a temporary file that
    /// the next vacuum removes; after it, the new store. Returns the
    /// store's space before and after.
    pub fn vacuum(&self) -> Result<(Space, Space)> {
        let Some(path) = self.path.clone() else {
            return Err(Error::InvalidArgument(format!(
                "{}: a store held in memory has no file to rewrite",
                self.label
            )));
        };
        let before = self.space()?;
        let label = self.label.clone();
        let (dir, name) = split_path(&path, &label)?;
        let mut stale = std::ffi::OsString::from(".");
        stale.push(name);
        stale.push(".sesame-vacuum-");
        // Only this handle can vacuum this file (it holds redb's lock), so
        // a temporary file left under this name is a crashed vacuum's.
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                let file = entry.file_name();
                if file
                    .as_encoded_bytes()
                    .starts_with(stale.as_encoded_bytes())
                {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        let mut tmp_name = stale;
        tmp_name.push(std::process::id().to_string());
        let tmp = dir.join(tmp_name);
        self.run_exclusive(|db| {
            let copy = guard(&label, || copy_into(db, &tmp, &label));
            let copy = match copy {
                Ok(copy) => copy,
                Err(e) => {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(e);
                }
            };
            if let Err(e) = std::fs::rename(&tmp, &path) {
                drop(copy);
                let _ = std::fs::remove_file(&tmp);
                return Err(Error::StoreIo(format!(
                    "{label}: cannot move the rewritten store into place: {e}"
                )));
            }
            // From here the new file is the store: a failure to sync the
            // folder is reported, but the handle moves to the new file.
            let synced = sync_dir(dir);
            let old = std::mem::replace(db, copy);
            let _ = catch_unwind(AssertUnwindSafe(move || drop(old)));
            synced.map_err(|e| Error::StoreIo(format!("{label}: syncing the directory: {e}")))
        })?;
        let after = self.space()?;
        Ok((before, after))
    }

    /// Where the file's bytes go, by redb's own accounting (see
    /// [`Space`]). Opens a write transaction and aborts it, so it waits
    /// for a running write.
    pub fn space(&self) -> Result<Space> {
        let meta = self.path.as_deref().and_then(|p| std::fs::metadata(p).ok());
        let file_bytes = meta.as_ref().map_or(0, |m| m.len());
        let disk_bytes = meta.as_ref().map_or(0, disk_usage);
        self.run(|db| {
            let txn = self.begin_write(db)?;
            let stats = txn.stats().map_err(|e| from_redb(&self.label, e))?;
            let space = Space {
                file_bytes,
                disk_bytes,
                page_size: stats.page_size() as u64,
                allocated_pages: stats.allocated_pages(),
                leaf_pages: stats.leaf_pages(),
                branch_pages: stats.branch_pages(),
                stored_bytes: stats.stored_bytes(),
                metadata_bytes: stats.metadata_bytes(),
                fragmented_bytes: stats.fragmented_bytes(),
            };
            txn.abort().map_err(|e| from_redb(&self.label, e))?;
            Ok(space)
        })
    }

    /// Runs `f` with the database to itself (every other operation on
    /// this handle waits), turning a panic inside redb into
    /// [`Error::StoreCorrupt`] as [`RedbStore::run`] does.
    fn run_exclusive<T>(&self, f: impl FnOnce(&mut Database) -> Result<T>) -> Result<T> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::StoreCorrupt(format!(
                "{}: an earlier operation panicked inside redb; reopen the store",
                self.label
            )));
        }
        let mut guard = self.db.write().unwrap_or_else(PoisonError::into_inner);
        let Some(db) = guard.as_mut() else {
            return Err(Error::StoreIo(format!(
                "{}: the store could not be opened again after an I/O error",
                self.label
            )));
        };
        catch_unwind(AssertUnwindSafe(|| f(db))).unwrap_or_else(|payload| {
            self.poisoned.store(true, Ordering::Release);
            Err(panicked(&self.label, &*payload))
        })
    }

    fn begin_write(&self, db: &Database) -> Result<WriteTransaction> {
        let mut txn = db.begin_write().map_err(|e| from_redb(&self.label, e))?;
        // Values come from clients; two-phase commit keeps a crafted value
        // from passing for a commit slot (see redb's `set_two_phase_commit`).
        // Quick repair would make reopening after a crash cheap, but it saves
        // the allocator state in every commit: ~2 ms a commit instead of
        // ~0.06 ms (redb 2.6, in memory, release build).
        txn.set_two_phase_commit(true);
        Ok(txn)
    }
}

/// Where a redb file's bytes go ([`RedbStore::space`]): redb's own
/// accounting of its pages at the last commit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Space {
    /// The file's length (0 in memory).
    pub file_bytes: u64,
    /// The file's blocks on disk (`du`): less than its length where redb
    /// grew the file ahead of what it wrote, which stays a hole.
    pub disk_bytes: u64,
    /// Bytes per page.
    pub page_size: u64,
    /// Pages in use (the rest of the file is free pages and the header).
    pub allocated_pages: u64,
    /// Leaf pages of the tables' B-trees.
    pub leaf_pages: u64,
    /// Branch pages of the tables' B-trees.
    pub branch_pages: u64,
    /// Bytes of keys and values in the leaves.
    pub stored_bytes: u64,
    /// Bytes of branch keys and redb's own tables.
    pub metadata_bytes: u64,
    /// Bytes of allocated pages that hold nothing: the unused end of pages,
    /// and of power-of-two page runs holding values larger than a page.
    pub fragmented_bytes: u64,
}

impl Space {
    /// Bytes of the file that are not allocated pages: free pages that
    /// copy-on-write commits left behind, and the header.
    pub fn free_bytes(&self) -> u64 {
        self.file_bytes
            .saturating_sub(self.allocated_pages * self.page_size)
    }
}

/// Bytes of the blocks a file takes on disk.
#[cfg(unix)]
fn disk_usage(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.blocks() * 512
}

#[cfg(not(unix))]
fn disk_usage(meta: &std::fs::Metadata) -> u64 {
    meta.len()
}

/// Creates a new store at `path` (which did not exist a moment ago).
fn create(path: &Path, label: &str) -> Result<()> {
    let (dir, name) = split_path(path, label)?;
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".sesame-new-{}-{nanos}", std::process::id()));
    let tmp = dir.join(tmp_name);

    let result = build_new(&tmp, path, label);
    // Once linked the store lives on under `path`; on failure this cleans up.
    let _ = std::fs::remove_file(&tmp);
    result?;
    sync_dir(dir).map_err(|e| Error::StoreIo(format!("{label}: syncing the directory: {e}")))
}

/// The folder and file name of a store's path.
fn split_path<'a>(path: &'a Path, label: &str) -> Result<(&'a Path, &'a std::ffi::OsStr)> {
    let name = path
        .file_name()
        .ok_or_else(|| Error::InvalidArgument(format!("{label}: the path names no file")))?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    Ok((dir, name))
}

/// Bytes of pairs a vacuum copies per write transaction: a transaction
/// holds its pages in memory until it commits.
pub const VACUUM_BATCH_BYTES: usize = 64 << 20;

/// Copies every table of `db` into a new database at `tmp`, in key order,
/// and checks the copy's pairs and bytes against the original's. Returns
/// the copy, open.
fn copy_into(db: &Database, tmp: &Path, label: &str) -> Result<Database> {
    let map = |e: redb::Error| from_redb(label, e);
    let copy = Builder::new().create(tmp).map_err(|e| map(e.into()))?;
    let read = db.begin_read().map_err(|e| map(e.into()))?;
    {
        let meta = read.open_table(META).map_err(|e| map(e.into()))?;
        let mut txn = copy.begin_write().map_err(|e| map(e.into()))?;
        txn.set_two_phase_commit(true);
        {
            let mut out = txn.open_table(META).map_err(|e| map(e.into()))?;
            for item in meta.iter().map_err(|e| map(e.into()))? {
                let (k, v) = item.map_err(|e| map(e.into()))?;
                out.insert(k.value(), v.value())
                    .map_err(|e| map(e.into()))?;
            }
            txn.open_table(DATA).map_err(|e| map(e.into()))?;
        }
        txn.commit().map_err(|e| map(e.into()))?;
    }
    let data = read.open_table(DATA).map_err(|e| map(e.into()))?;
    let mut pairs = data.iter().map_err(|e| map(e.into()))?.peekable();
    let (mut count, mut bytes) = (0u64, 0u64);
    while pairs.peek().is_some() {
        let mut txn = copy.begin_write().map_err(|e| map(e.into()))?;
        txn.set_two_phase_commit(true);
        {
            let mut out = txn.open_table(DATA).map_err(|e| map(e.into()))?;
            let mut batch = 0;
            while batch < VACUUM_BATCH_BYTES {
                let Some(item) = pairs.next() else { break };
                let (k, v) = item.map_err(|e| map(e.into()))?;
                let (k, v) = (k.value(), v.value());
                out.insert(k, v).map_err(|e| map(e.into()))?;
                batch += k.len() + v.len();
                count += 1;
                bytes += (k.len() + v.len()) as u64;
            }
        }
        txn.commit().map_err(|e| map(e.into()))?;
    }
    let check = copy.begin_read().map_err(|e| map(e.into()))?;
    let table = check.open_table(DATA).map_err(|e| map(e.into()))?;
    let (mut seen, mut seen_bytes) = (0u64, 0u64);
    for item in table.iter().map_err(|e| map(e.into()))? {
        let (k, v) = item.map_err(|e| map(e.into()))?;
        seen += 1;
        seen_bytes += (k.value().len() + v.value().len()) as u64;
    }
    if (seen, seen_bytes) != (count, bytes) {
        return Err(Error::StoreIo(format!(
            "{label}: the rewritten store holds {seen} pairs ({seen_bytes} bytes) where \
             {count} ({bytes} bytes) were copied; the store was left as it was"
        )));
    }
    drop(table);
    drop(check);
    Ok(copy)
}

fn build_new(tmp: &Path, path: &Path, label: &str) -> Result<()> {
    {
        let db = guard(label, || {
            Builder::new().create(tmp).map_err(|e| from_redb(label, e))
        })?;
        guard(label, || init(&db, label))?;
    }
    match std::fs::hard_link(tmp, path) {
        Ok(()) => Ok(()),
        // Another opener created it first; open theirs.
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(link_err) => {
            // No hard links on this file system: rename, unless the path
            // appeared meanwhile.
            if path.exists() {
                return Ok(());
            }
            std::fs::rename(tmp, path).map_err(|e| {
                Error::StoreIo(format!(
                    "{label}: cannot move the new store into place ({link_err}; {e})"
                ))
            })
        }
    }
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> std::io::Result<()> {
    Ok(())
}

/// Writes the marker and creates the data table.
fn init(db: &Database, label: &str) -> Result<()> {
    let map = |e: redb::Error| from_redb(label, e);
    let mut txn = db.begin_write().map_err(|e| map(e.into()))?;
    txn.set_two_phase_commit(true);
    {
        let mut meta = txn.open_table(META).map_err(|e| map(e.into()))?;
        meta.insert(FORMAT_KEY, FORMAT_VERSION)
            .map_err(|e| map(e.into()))?;
        txn.open_table(DATA).map_err(|e| map(e.into()))?;
    }
    txn.commit().map_err(|e| map(e.into()))
}

/// Refuses, from its first bytes, a file that is not a redb database.
fn check_magic(path: &Path, label: &str) -> Result<()> {
    let file = File::open(path).map_err(|e| Error::StoreIo(format!("{label}: {e}")))?;
    let mut head = Vec::with_capacity(REDB_MAGIC.len());
    file.take(REDB_MAGIC.len() as u64)
        .read_to_end(&mut head)
        .map_err(|e| Error::StoreIo(format!("{label}: {e}")))?;
    if head.is_empty() {
        return Err(Error::StoreForeign(format!(
            "{label}: the file is empty; a Sesame store is never empty (remove the file or \
             choose another path to create a store)"
        )));
    }
    if head != REDB_MAGIC {
        return Err(Error::StoreForeign(format!(
            "{label}: not a redb database (no redb magic number at the start); left untouched"
        )));
    }
    Ok(())
}

/// Opens the store file with redb (its page cache
/// [`RedbStore::cache_bytes`]), once a header marked clean over a longer
/// file has been marked for repair (see [`crate::redb_header`]).
fn open_db(path: &Path, label: &str) -> Result<Database> {
    let io = |e: std::io::Error| Error::StoreIo(format!("{label}: {e}"));
    {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io)?;
        // Holds redb's lock on the file while the header is read and marked.
        let file = FileBackend::new(file).map_err(|e| from_redb(label, e))?;
        require_repair_if_longer(&file).map_err(io)?;
    }
    Builder::new()
        .set_cache_size(RedbStore::cache_bytes())
        .open(path)
        .map_err(|e| from_redb(label, e))
}

/// Opens the file read-only through a copy-on-write view and checks the
/// marker (and, if `verify`, every checksum), so that nothing is written to a
/// file that is not ours or not sound.
fn probe(path: &Path, label: &str, verify: bool) -> Result<()> {
    let file = File::open(path).map_err(|e| Error::StoreIo(format!("{label}: {e}")))?;
    let backend = ProbeBackend::new(file).map_err(|e| from_redb_probe(label, e))?;
    // The mark lands in the view only; `open_db` writes it to the file.
    require_repair_if_longer(&backend).map_err(|e| from_redb_probe(label, e))?;
    let mut db = Builder::new()
        .set_cache_size(PROBE_CACHE_BYTES)
        .create_with_backend(backend)
        .map_err(|e| from_redb_probe(label, e))?;
    if verify {
        match db.check_integrity() {
            Ok(true) => {}
            Ok(false) => {
                return Err(Error::StoreCorrupt(format!(
                    "{label}: page checksums do not match; redb could only recover by \
                     discarding the damaged commit (file left untouched)"
                )))
            }
            Err(e) => {
                return Err(match redb::Error::from(e) {
                    redb::Error::Corrupted(msg) => Error::StoreCorrupt(format!(
                        "{label}: page checksums do not match ({msg}); file left untouched"
                    )),
                    e => from_redb_probe(label, e),
                })
            }
        }
    }
    check_marker(&db, label, from_redb_probe)
}

/// Checks that `db` carries the Sesame marker and the data table.
fn check_marker(db: &Database, label: &str, map: fn(&str, redb::Error) -> Error) -> Result<()> {
    let txn = db.begin_read().map_err(|e| map(label, e.into()))?;
    let meta = match txn.open_table(META) {
        Ok(meta) => meta,
        Err(TableError::TableDoesNotExist(_)) => {
            return Err(Error::StoreForeign(format!(
                "{label}: a redb database without the Sesame marker (no table sesame.meta); \
                 it belongs to another program and was left untouched"
            )))
        }
        Err(e) => return Err(map(label, e.into())),
    };
    let marker = meta.get(FORMAT_KEY).map_err(|e| map(label, e.into()))?;
    match marker.as_ref().map(|v| v.value()) {
        Some(FORMAT_VERSION) => {}
        Some(other) if other.starts_with("sesame-store/") => {
            return Err(Error::StoreForeign(format!(
                "{label}: Sesame store format {:?} is not the one this build reads ({FORMAT_VERSION})",
                truncated(other)
            )))
        }
        Some(other) => {
            return Err(Error::StoreForeign(format!(
                "{label}: unexpected format marker {:?}; left untouched",
                truncated(other)
            )))
        }
        None => {
            return Err(Error::StoreForeign(format!(
                "{label}: table sesame.meta has no {FORMAT_KEY} marker; left untouched"
            )))
        }
    }
    match txn.open_table(DATA) {
        Ok(_) => Ok(()),
        Err(TableError::TableDoesNotExist(_)) => Err(Error::StoreCorrupt(format!(
            "{label}: the Sesame marker is present but the data table is missing"
        ))),
        Err(e) => Err(map(label, e.into())),
    }
}

fn truncated(s: &str) -> String {
    s.chars().take(64).collect()
}

impl RedbStore {
    /// The pairs `scan` reads (for [`crate::ordered_scans`]).
    fn ordered_range(&self, scan: RangeScan<'_>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let map = |e: redb::Error| from_redb(&self.label, e);
        self.run(|db| {
            let txn = db.begin_read().map_err(|e| map(e.into()))?;
            let table = txn.open_table(DATA).map_err(|e| map(e.into()))?;
            let copy = |item: std::result::Result<_, redb::StorageError>| {
                let (k, v): (redb::AccessGuard<&[u8]>, redb::AccessGuard<&[u8]>) =
                    item.map_err(|e| map(e.into()))?;
                Ok((k.value().to_vec(), v.value().to_vec()))
            };
            let range = table
                .range::<&[u8]>(scan.range)
                .map_err(|e| map(e.into()))?;
            if scan.descending {
                range
                    .rev()
                    .take(scan.limit)
                    .map(copy)
                    .collect::<Result<Vec<_>>>()
            } else {
                range.take(scan.limit).map(copy).collect::<Result<Vec<_>>>()
            }
        })
    }
}

impl Store for RedbStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut values = self.get_many(&[key])?;
        Ok(values.pop().flatten())
    }

    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let map = |e: redb::Error| from_redb(&self.label, e);
        let values = self.run(|db| {
            let txn = db.begin_read().map_err(|e| map(e.into()))?;
            let table = txn.open_table(DATA).map_err(|e| map(e.into()))?;
            keys.iter()
                .map(|key| {
                    let value = table.get(*key).map_err(|e| map(e.into()))?;
                    Ok(value.map(|v| v.value().to_vec()))
                })
                .collect::<Result<Vec<_>>>()
        })?;
        crate::counted_reads(&self.io, values)
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        crate::write_unconditional(self, &batch)
    }

    fn write_if(&self, expect: &[(&[u8], Option<&[u8]>)], batch: &WriteBatch) -> Result<bool> {
        crate::write_if_alone(self, expect, batch)
    }

    /// One write transaction, one commit (one `fsync`) for the whole
    /// group: each batch's condition is checked inside it, after the
    /// batches before it were applied. An error anywhere aborts the
    /// transaction: nothing of the group is written.
    fn write_if_group(&self, group: &[Conditional<'_>]) -> Result<Vec<bool>> {
        let map = |e: redb::Error| from_redb(&self.label, e);
        // Begun before the transaction and settled once its commit can be
        // seen or it failed: see `Store::write_marks`.
        let _marked = self.io.begin_write();
        let applied = self.run(|db| {
            // redb has one write transaction at a time: the checks below
            // and the writes cannot interleave with another batch.
            let txn = self.begin_write(db)?;
            let mut applied = Vec::with_capacity(group.len());
            {
                let mut table = txn.open_table(DATA).map_err(|e| map(e.into()))?;
                for (expect, batch) in group {
                    let mut holds = true;
                    for (key, want) in *expect {
                        let held = table.get(*key).map_err(|e| map(e.into()))?;
                        let held = held.as_ref().map(|v| v.value());
                        self.io.read(held.map_or(0, <[u8]>::len));
                        if held != *want {
                            holds = false;
                            break;
                        }
                    }
                    applied.push(holds);
                    if !holds {
                        continue;
                    }
                    for op in batch.ops() {
                        match op {
                            WriteOp::Put { key, value } => {
                                table
                                    .insert(key.as_slice(), value.as_slice())
                                    .map_err(|e| map(e.into()))?;
                            }
                            WriteOp::Delete { key } => {
                                table.remove(key.as_slice()).map_err(|e| map(e.into()))?;
                            }
                        }
                    }
                }
            }
            if applied.iter().any(|a| *a) {
                txn.commit().map_err(|e| map(e.into()))?;
            } else {
                txn.abort().map_err(|e| map(e.into()))?;
            }
            Ok(applied)
        })?;
        counted_group(&self.io, group, applied)
    }

    fn commit_groups(&self) -> usize {
        1
    }

    crate::ordered_scans!();

    /// The file is locked by the process that opened it, and every write
    /// of this handle is marked (the copy of `compact` moves the same
    /// pairs while every other operation waits).
    fn write_marks(&self) -> Option<sesame_core::WriteMarks> {
        Some(self.io.write_marks())
    }

    fn backend(&self) -> &'static str {
        "redb"
    }

    /// redb's integrity check (page checksums and tree structure, on a
    /// database reloaded from the file), then a read of every pair. A file
    /// redb had to repair is reported as damaged: entries of the damaged
    /// pages may be lost.
    fn verify(&self) -> Result<()> {
        let label = &self.label;
        self.run_exclusive(|db| match db.check_integrity() {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::StoreCorrupt(format!(
                "{label}: the file was damaged; redb repaired its structure, and entries in \
                 the damaged pages may be lost"
            ))),
            Err(e) => Err(from_redb(label, e)),
        })?;
        self.scan_prefix(b"").map(drop)
    }

    /// Broken after a panic inside redb; unavailable while the file could
    /// not be opened again after an I/O error (tried again here).
    fn health(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::StoreCorrupt(format!(
                "{}: an earlier operation panicked inside redb; restart the server",
                self.label
            )));
        }
        let open = self
            .db
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        if !open {
            self.reopen();
            if self
                .db
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .is_none()
            {
                return Err(Error::StoreIo(format!(
                    "{}: the store could not be opened again after an I/O error",
                    self.label
                )));
            }
        }
        Ok(())
    }
}

/// Opens a database, a panic inside redb being an error.
fn guard_open(open: impl FnOnce() -> Result<Database>) -> Result<Database> {
    catch_unwind(AssertUnwindSafe(open))
        .unwrap_or_else(|_| Err(Error::StoreCorrupt("redb panicked while opening".into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_redb_poisons_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.redb");
        let store = RedbStore::open(&path).unwrap();
        store.put(b"k", b"v").unwrap();
        let err = store
            .run(|db| -> Result<()> {
                let _txn = db.begin_write().unwrap();
                panic!("boom in the middle of a write");
            })
            .unwrap_err();
        assert!(
            matches!(&err, Error::StoreCorrupt(m) if m.contains("boom")),
            "{err:?}"
        );
        let err = store.get(b"k").unwrap_err();
        assert!(
            matches!(&err, Error::StoreCorrupt(m) if m.contains("earlier")),
            "{err:?}"
        );
        assert!(store.put(b"k", b"w").is_err());
        drop(store);
        // The handle was leaked, so the file is still locked here.
        let err = RedbStore::open(&path).unwrap_err();
        assert!(matches!(err, Error::StoreBusy(_)), "{err:?}");
    }

    /// Read system calls this thread has made (`/proc/thread-self/io`).
    fn reads_by_this_thread() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
        io.lines()
            .find_map(|l| l.strip_prefix("syscr: "))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// Reads every key twice; returns the file reads of the second pass.
    fn second_pass_reads(path: &Path, keys: &[[u8; 8]]) -> u64 {
        let store = RedbStore::open(path).unwrap();
        let keys: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        for chunk in keys.chunks(64) {
            assert!(store.get_many(chunk).unwrap().iter().all(Option::is_some));
        }
        let before = reads_by_this_thread();
        for chunk in keys.chunks(64) {
            assert!(store.get_many(chunk).unwrap().iter().all(Option::is_some));
        }
        reads_by_this_thread() - before
    }

    /// A store opened after `set_cache_bytes` keeps that much of the file
    /// in memory: the pages read once are not read from the file again
    /// (where the cache holds them all), and are (where it does not).
    #[test]
    #[cfg(target_os = "linux")]
    fn the_page_cache_set_holds_what_was_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.redb");
        // About 4 MiB of values under scattered keys.
        let keys: Vec<[u8; 8]> = (0u64..4096)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes())
            .collect();
        {
            let store = RedbStore::open(&path).unwrap();
            let mut batch = WriteBatch::new();
            for (i, k) in keys.iter().enumerate() {
                batch.put(k.to_vec(), vec![i as u8; 1000]);
            }
            store.write(batch).unwrap();
        }
        let default = RedbStore::cache_bytes();
        RedbStore::set_cache_bytes(0);
        assert_eq!(RedbStore::cache_bytes(), MIN_CACHE_BYTES);
        let small = second_pass_reads(&path, &keys);
        RedbStore::set_cache_bytes(64 << 20);
        let large = second_pass_reads(&path, &keys);
        RedbStore::set_cache_bytes(default);
        // A few reads that redb makes outside its page cache remain.
        assert!(small > 500, "a 1 MiB cache read {small} pages again");
        assert!(large <= 8, "a 64 MiB cache read {large} pages again");
        eprintln!("second pass: {small} file reads with 1 MiB, {large} with 64 MiB");
    }
}
