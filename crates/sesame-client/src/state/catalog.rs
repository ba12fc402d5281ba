//! The catalog of an [`IndexState`]: identifier to origin, one entry per
//! document or table record. Its entries are on disk in sorted runs
//! (module `runs`); in memory are the entries changed since the runs
//! were last written (the overlay, kept in the [`Entries`] below), a
//! bounded cache of blocks read and each run's list of blocks
//! (`state::catalog_tests`; `docs/client.md`, "The catalog on disk").
//!
//! The overlay's entries are kept in sorted chunks of at most [`CHUNK`] pairs
//! ([`Entries`]) rather than a `BTreeMap`: a map filled in the order of
//! its identifiers (every add and import hands out increasing ones) leaves
//! its nodes part full, 166 bytes of node per entry of 88 (counted by an
//! allocator, 20,000 to 336,776 entries);
//! a chunk filled in order is full, 88 bytes per entry, and the path's
//! own bytes on the heap beside it. Tested by
//! `state::catalog::tests`: the same answers as a `BTreeMap` under any
//! sequence of changes, and [`Entries::heap_bytes`] per entry at N and 4N
//! entries.

use super::runs::{Entry, Merge, Run, RunIter, RunRef, RunStore};
use super::*;
use std::collections::{BTreeSet, HashSet};
use std::ops::Bound;
use std::sync::Arc;

/// Most pairs in a chunk: a chunk is split in two when an entry goes
/// into a full one before its end, and a new one is started past the
/// last entry; 1,024 pairs are 90 KB to move at most on an insertion in
/// the middle.
const CHUNK: usize = 1024;

/// A change to the catalog, as a log record holds it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum Change {
    /// An entry added (or replaced).
    Put(DocumentInfo),
    /// An entry removed.
    Remove(u64),
}

/// Identifier to origin, sorted: the map a [`Catalog`] derefs to, with
/// the read methods of a `BTreeMap` its callers use.
#[derive(Clone, Debug, Default)]
pub(crate) struct Entries {
    /// Chunks of pairs sorted by identifier, none empty, each chunk's
    /// identifiers below the next chunk's.
    chunks: Vec<Vec<(u64, DocumentInfo)>>,
    len: usize,
}

impl Entries {
    /// The number of entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The chunk that holds `id` or would: the first whose last
    /// identifier is at least `id`, else the last (`None` when empty).
    fn chunk_of(&self, id: u64) -> Option<usize> {
        let at = self
            .chunks
            .partition_point(|c| c.last().is_some_and(|(last, _)| *last < id));
        if self.chunks.is_empty() {
            None
        } else {
            Some(at.min(self.chunks.len() - 1))
        }
    }

    /// The entry of `id`.
    pub(crate) fn get(&self, id: &u64) -> Option<&DocumentInfo> {
        let chunk = self.chunks.get(self.chunk_of(*id)?)?;
        let at = chunk.binary_search_by_key(id, |(k, _)| *k).ok()?;
        chunk.get(at).map(|(_, d)| d)
    }

    /// The entries in identifier order.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (&u64, &DocumentInfo)> + Clone {
        self.chunks.iter().flatten().map(|(k, d)| (k, d))
    }

    /// Adds or replaces the entry of `id`; the one replaced.
    fn insert(&mut self, id: u64, info: DocumentInfo) -> Option<DocumentInfo> {
        let Some(c) = self.chunk_of(id) else {
            self.chunks.push(Self::chunk_with(id, info));
            self.len = 1;
            return None;
        };
        let last = c + 1 == self.chunks.len();
        let chunk = &mut self.chunks[c];
        let at = match chunk.binary_search_by_key(&id, |(k, _)| *k) {
            Ok(at) => return Some(std::mem::replace(&mut chunk[at].1, info)),
            Err(at) => at,
        };
        self.len += 1;
        if chunk.len() < CHUNK {
            chunk.insert(at, (id, info));
        } else if at == chunk.len() && last {
            // Past the last entry: the full chunk stays full.
            self.chunks.push(Self::chunk_with(id, info));
        } else {
            let mut right = chunk.split_off(CHUNK / 2);
            right.reserve_exact(CHUNK - right.len());
            if at <= chunk.len() {
                chunk.insert(at, (id, info));
            } else {
                right.insert(at - CHUNK / 2, (id, info));
            }
            self.chunks.insert(c + 1, right);
        }
        None
    }

    /// A new chunk holding one pair, with room for a full chunk.
    fn chunk_with(id: u64, info: DocumentInfo) -> Vec<(u64, DocumentInfo)> {
        let mut chunk = Vec::with_capacity(CHUNK);
        chunk.push((id, info));
        chunk
    }

    /// Removes the entry of `id`; the one removed.
    fn remove(&mut self, id: &u64) -> Option<DocumentInfo> {
        let c = self.chunk_of(*id)?;
        let chunk = &mut self.chunks[c];
        let at = chunk.binary_search_by_key(id, |(k, _)| *k).ok()?;
        let (_, old) = chunk.remove(at);
        if chunk.is_empty() {
            self.chunks.remove(c);
        }
        self.len -= 1;
        Some(old)
    }

    /// Bytes the entries hold on the heap: the chunks' room and each
    /// path's (what [`CHUNK`]'s choice and the tests measure; the
    /// allocator's own overhead is not counted).
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        let pair = std::mem::size_of::<(u64, DocumentInfo)>();
        let chunks = self.chunks.capacity() * std::mem::size_of::<Vec<(u64, DocumentInfo)>>();
        chunks
            + self
                .chunks
                .iter()
                .map(|c| {
                    c.capacity() * pair + c.iter().map(|(_, d)| d.path.capacity()).sum::<usize>()
                })
                .sum::<usize>()
    }
}

/// Equal when they hold the same entries, however chunked.
impl PartialEq for Entries {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for Entries {}

impl FromIterator<(u64, DocumentInfo)> for Entries {
    fn from_iter<I: IntoIterator<Item = (u64, DocumentInfo)>>(iter: I) -> Self {
        let mut entries = Entries::default();
        for (id, info) in iter {
            entries.insert(id, info);
        }
        entries
    }
}

/// Entries changed since the catalog's runs were last written: those
/// put, and the identifiers removed (hiding their entries in the runs).
#[derive(Clone, Debug, Default)]
struct Overlay {
    puts: Entries,
    removed: BTreeSet<u64>,
}

impl Overlay {
    fn size(&self) -> usize {
        self.puts.len() + self.removed.len()
    }

    /// What the overlay says of `id`: `None` nothing, `Some(None)`
    /// removed.
    fn find(&self, id: u64) -> Option<Option<DocumentInfo>> {
        if self.removed.contains(&id) {
            return Some(None);
        }
        self.puts.get(&id).map(|d| Some(d.clone()))
    }
}

/// The overlay's entries in order, removals included.
struct OverlayIter {
    overlay: Arc<Overlay>,
    /// The next chunk and place in it of the puts.
    chunk: usize,
    at: usize,
    /// The last removal returned.
    removed: Option<u64>,
}

impl Iterator for OverlayIter {
    type Item = Result<Entry>;
    fn next(&mut self) -> Option<Self::Item> {
        let put = loop {
            match self.overlay.puts.chunks.get(self.chunk) {
                None => break None,
                Some(c) => match c.get(self.at) {
                    Some(p) => break Some(p),
                    None => {
                        self.chunk += 1;
                        self.at = 0;
                    }
                },
            }
        };
        let gone = match self.removed {
            None => self.overlay.removed.iter().next(),
            Some(r) => self
                .overlay
                .removed
                .range((Bound::Excluded(r), Bound::Unbounded))
                .next(),
        };
        match (put, gone) {
            (Some((id, d)), g) if g.is_none_or(|g| id < g) => {
                self.at += 1;
                Some(Ok((*id, Some(d.clone()))))
            }
            (_, Some(g)) => {
                self.removed = Some(*g);
                Some(Ok((*g, None)))
            }
            _ => None,
        }
    }
}

/// The mutable part of a [`Catalog`].
#[derive(Clone, Debug, Default)]
struct Core {
    overlay: Arc<Overlay>,
    /// Runs on disk, oldest first.
    runs: Vec<Arc<Run>>,
    /// Where the runs are; `None` while there is none.
    store: Option<Arc<RunStore>>,
    /// Entries in the catalog.
    len: usize,
    /// A read of a run failed while the catalog changed: the catalog may
    /// count wrongly, and is not saved.
    poisoned: Option<String>,
}

impl Core {
    /// The entry of `id`.
    fn lookup(&self, id: u64) -> Result<Option<DocumentInfo>> {
        if let Some(found) = self.overlay.find(id) {
            return Ok(found);
        }
        let Some(store) = &self.store else {
            return Ok(None);
        };
        for run in self.runs.iter().rev() {
            if let Some(found) = store.find(run, id)? {
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// Sources of entries, the newest first, for [`Merge`]: the overlay
    /// then the runs from the newest.
    fn sources(&self, runs: usize) -> Vec<Box<dyn Iterator<Item = Result<Entry>> + Send>> {
        let mut out: Vec<Box<dyn Iterator<Item = Result<Entry>> + Send>> =
            vec![Box::new(OverlayIter {
                overlay: self.overlay.clone(),
                chunk: 0,
                at: 0,
                removed: None,
            })];
        if let Some(store) = &self.store {
            let from = self.runs.len().saturating_sub(runs);
            for run in self.runs.iter().skip(from).rev() {
                out.push(Box::new(RunIter::new(store.clone(), run.clone())));
            }
        }
        out
    }
}

/// The catalog of an [`IndexState`]: identifier to origin, with the
/// changes made since the state was last saved or loaded (what the next
/// save logs). Its entries are in sorted runs on disk beside the state
/// (module `runs`) and an overlay in memory of those changed since the
/// runs were last written; a save writes the overlay as a new run once
/// it holds [`FLUSH_AT`] entries.
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    core: Mutex<Core>,
    /// `None`: not known since a save (a catalog made or replaced whole),
    /// so the next save writes the whole state.
    pub(super) changes: Mutex<Option<Vec<Change>>>,
}

/// Overlay entries from which a save writes them as a run.
pub(super) const FLUSH_AT: usize = 2048;

impl Catalog {
    /// The number of entries.
    pub(crate) fn len(&self) -> usize {
        lock(&self.core).len
    }

    /// Whether there is no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry of `id` (read from disk when not in memory).
    pub(crate) fn get(&self, id: &u64) -> Result<Option<DocumentInfo>> {
        lock(&self.core).lookup(*id)
    }

    /// Whether `id` has an entry.
    pub(crate) fn contains_key(&self, id: &u64) -> Result<bool> {
        Ok(self.get(id)?.is_some())
    }

    /// The entries in identifier order, read a block at a time (memory
    /// stays bounded).
    pub(crate) fn iter(&self) -> impl Iterator<Item = Result<(u64, DocumentInfo)>> + Send {
        let core = lock(&self.core);
        let merge = Merge::new(core.sources(usize::MAX));
        drop(core);
        let (merge, failed) = match merge {
            Ok(m) => (Some(m), None),
            Err(e) => (None, Some(Err(e))),
        };
        failed.into_iter().chain(
            merge
                .into_iter()
                .flatten()
                .filter_map(|e| e.map(|(id, d)| d.map(|d| (id, d))).transpose()),
        )
    }

    /// The identifiers in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = Result<u64>> + Send {
        self.iter().map(|e| e.map(|(id, _)| id))
    }

    /// The entries' origins in identifier order.
    pub(crate) fn values(&self) -> impl Iterator<Item = Result<DocumentInfo>> + Send {
        self.iter().map(|e| e.map(|(_, d)| d))
    }

    /// The entries whose path is one of `paths`, in identifier order.
    ///
    /// Each run's name index (module `names`) gives the identifiers
    /// that may bear these names, in the blocks that can hold them: a
    /// batch reads about a block per name and run, then the entry of
    /// each identifier found, whatever the catalog's size; a run written
    /// before the name index is read whole. The overlay (in memory) is
    /// read whole.
    pub(crate) fn with_paths(&self, paths: &HashSet<&str>) -> Result<Vec<DocumentInfo>> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let core = lock(&self.core);
        let mut ids: BTreeSet<u64> = core
            .overlay
            .puts
            .iter()
            .filter(|(_, d)| paths.contains(d.path.as_str()))
            .map(|(id, _)| *id)
            .collect();
        if let Some(store) = &core.store {
            let mut hashes: Vec<u64> = paths.iter().map(|p| store.name_hash(p)).collect();
            hashes.sort_unstable();
            hashes.dedup();
            for run in &core.runs {
                if !store.named(run, &hashes, &mut ids)? {
                    for e in RunIter::new(store.clone(), run.clone()) {
                        if let (id, Some(d)) = e? {
                            if paths.contains(d.path.as_str()) {
                                ids.insert(id);
                            }
                        }
                    }
                }
            }
        }
        // Each identifier found as the newest source says (a newer run
        // or the overlay may have replaced or removed it; two names may
        // share a hash).
        let mut out = Vec::new();
        for id in ids {
            if let Some(d) = core.lookup(id)? {
                if paths.contains(d.path.as_str()) {
                    out.push(d);
                }
            }
        }
        Ok(out)
    }

    /// Adds or replaces the entry of `id`; the one replaced.
    pub(crate) fn insert(&mut self, id: u64, info: DocumentInfo) -> Option<DocumentInfo> {
        if let Some(list) = lock(&self.changes).as_mut() {
            list.push(Change::Put(info.clone()));
        }
        let core = self
            .core
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let old = core.lookup(id).unwrap_or_else(|e| {
            core.poisoned = Some(e.to_string());
            None
        });
        let overlay = Arc::make_mut(&mut core.overlay);
        overlay.removed.remove(&id);
        overlay.puts.insert(id, info);
        if old.is_none() {
            core.len += 1;
        }
        old
    }

    /// Removes the entry of `id`.
    pub(crate) fn remove(&mut self, id: &u64) -> Option<DocumentInfo> {
        let core = self
            .core
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let old = core.lookup(*id).unwrap_or_else(|e| {
            core.poisoned = Some(e.to_string());
            None
        });
        if old.is_some() {
            if let Some(list) = lock(&self.changes).as_mut() {
                list.push(Change::Remove(*id));
            }
            let in_runs = core
                .runs
                .iter()
                .any(|r| (r.r.first..=r.r.last).contains(id));
            let overlay = Arc::make_mut(&mut core.overlay);
            overlay.puts.remove(id);
            if in_runs {
                overlay.removed.insert(*id);
            }
            core.len -= 1;
        }
        old
    }

    pub(super) fn apply(&mut self, changes: Vec<Change>) {
        for c in changes {
            match c {
                Change::Put(d) => {
                    self.insert(d.id, d);
                }
                Change::Remove(id) => {
                    self.remove(&id);
                }
            }
        }
    }

    /// The runs as the state names them, oldest first.
    pub(super) fn run_refs(&self) -> Vec<RunRef> {
        lock(&self.core).runs.iter().map(|r| r.r.clone()).collect()
    }

    /// Writes the overlay as a run in `store` when it holds at least
    /// `flush_at` entries (all of it when the runs are in another store:
    /// a state saved under another key, index or file), then merges the
    /// newest runs while the one before the newest is no larger than it,
    /// so that there are about log2 of entries / `flush_at` runs;
    /// whether the runs changed. A catalog whose reads failed while it
    /// changed is not saved.
    pub(super) fn flush(
        &self,
        rng: &mut dyn CryptoRngCore,
        store: Arc<RunStore>,
        flush_at: usize,
    ) -> Result<bool> {
        let mut core = lock(&self.core);
        if let Some(e) = &core.poisoned {
            return Err(ClientError::InvalidArgument(format!(
                "the catalog could not be read while it changed ({e}); nothing was saved"
            )));
        }
        let store = match &core.store {
            Some(s) if s.same_as(&store) => s.clone(),
            _ => store.clone(),
        };
        let moved =
            !core.runs.is_empty() && !core.store.as_ref().is_some_and(|s| Arc::ptr_eq(s, &store));
        if !moved && core.overlay.size() < flush_at.max(1) {
            return Ok(false);
        }
        let merge_all = if moved { usize::MAX } else { 0 };
        // The overlay (and, when moved, every run) in one new run.
        let first = Merge::new(core.sources(merge_all))?;
        let keep_removed = !moved && !core.runs.is_empty();
        let written = store.write(
            rng,
            first.filter(|e| keep_removed || !matches!(e, Ok((_, None)))),
        )?;
        if moved {
            core.runs.clear();
        }
        core.overlay = Arc::new(Overlay::default());
        core.store = Some(store.clone());
        if let Some(r) = written {
            core.runs.push(Arc::new(store.open(&r)?));
        }
        loop {
            let n = core.runs.len();
            let (Some(older), Some(newer)) = (
                n.checked_sub(2).and_then(|i| core.runs.get(i)).cloned(),
                core.runs.last().cloned(),
            ) else {
                break;
            };
            if older.r.entries > newer.r.entries {
                break;
            }
            let sources: Vec<Box<dyn Iterator<Item = Result<Entry>> + Send>> = vec![
                Box::new(RunIter::new(store.clone(), newer)),
                Box::new(RunIter::new(store.clone(), older)),
            ];
            // Removals are dropped once nothing older is left to hide.
            let oldest = n == 2;
            let merged = store.write(
                rng,
                Merge::new(sources)?.filter(|e| !oldest || !matches!(e, Ok((_, None)))),
            )?;
            core.runs.truncate(n - 2);
            if let Some(r) = merged {
                core.runs.push(Arc::new(store.open(&r)?));
            }
        }
        Ok(true)
    }

    /// The catalog the state names: `local`'s runs opened in `store`.
    pub(super) fn from_local(local: CatalogLocal, store: Arc<RunStore>) -> Result<Catalog> {
        let runs = local
            .runs
            .iter()
            .map(|r| store.open(r).map(Arc::new))
            .collect::<Result<Vec<_>>>()?;
        let mut overlay = Overlay::default();
        for (id, d) in local.overlay {
            match d {
                Some(d) => {
                    overlay.puts.insert(id, d);
                }
                None => {
                    overlay.removed.insert(id);
                }
            }
        }
        let core = Core {
            overlay: Arc::new(overlay),
            runs,
            store: Some(store),
            len: usize::try_from(local.len).unwrap_or(usize::MAX),
            poisoned: None,
        };
        Ok(Catalog {
            core: Mutex::new(core),
            changes: Mutex::new(None),
        })
    }

    /// Where the name blocks of each run are (offset and length), oldest
    /// run first; `None` for a run without a name index.
    #[cfg(test)]
    pub(crate) fn name_blocks(&self) -> Vec<Option<Vec<(u64, u32)>>> {
        let core = lock(&self.core);
        core.runs.iter().map(|r| RunStore::name_blocks(r)).collect()
    }

    /// Blocks its runs have read from their files so far.
    #[cfg(test)]
    pub(crate) fn blocks_read(&self) -> u64 {
        lock(&self.core)
            .store
            .as_ref()
            .map_or(0, |s| s.blocks_read())
    }

    /// Bytes the catalog holds in memory: the overlay, the cache of
    /// blocks read, the runs' lists of blocks (the allocator's own
    /// overhead is not counted).
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        let core = lock(&self.core);
        core.overlay.puts.heap_bytes()
            + core.overlay.removed.len() * 2 * std::mem::size_of::<u64>()
            + core.store.as_ref().map_or(0, |s| s.heap_bytes(&core.runs))
    }
}

/// A catalog as a state file of format 5 or 6 holds it: the runs it
/// names, its number of entries and its overlay.
#[derive(Deserialize)]
pub(super) struct CatalogLocal {
    pub runs: Vec<RunRef>,
    pub len: u64,
    pub overlay: Vec<Entry>,
}

/// Encodes a catalog as [`CatalogLocal`] reads it.
pub(super) struct LocalCatalog<'a>(pub &'a Catalog);

impl Serialize for LocalCatalog<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::{SerializeSeq, SerializeStruct};
        struct OverlaySeq<'a>(&'a Overlay);
        impl Serialize for OverlaySeq<'_> {
            fn serialize<S: serde::Serializer>(
                &self,
                s: S,
            ) -> std::result::Result<S::Ok, S::Error> {
                let mut seq = s.serialize_seq(Some(self.0.size()))?;
                let all = OverlayIter {
                    overlay: Arc::new(self.0.clone()),
                    chunk: 0,
                    at: 0,
                    removed: None,
                };
                for e in all.flatten() {
                    seq.serialize_element(&e)?;
                }
                seq.end()
            }
        }
        let core = lock(&self.0.core);
        let runs: Vec<RunRef> = core.runs.iter().map(|r| r.r.clone()).collect();
        let mut st = s.serialize_struct("CatalogLocal", 3)?;
        st.serialize_field("runs", &runs)?;
        st.serialize_field("len", &(core.len as u64))?;
        st.serialize_field("overlay", &OverlaySeq(&core.overlay))?;
        st.end()
    }
}

impl Clone for Catalog {
    fn clone(&self) -> Self {
        Catalog {
            core: Mutex::new(lock(&self.core).clone()),
            changes: Mutex::new(None),
        }
    }
}

/// Equal when they hold the same entries (a catalog that cannot be read
/// is equal to none).
impl PartialEq for Catalog {
    fn eq(&self, other: &Self) -> bool {
        let (mut a, mut b) = (self.iter(), other.iter());
        loop {
            match (a.next(), b.next()) {
                (None, None) => return self.len() == other.len(),
                (Some(Ok(x)), Some(Ok(y))) if x == y => {}
                _ => return false,
            }
        }
    }
}

impl From<Entries> for Catalog {
    fn from(puts: Entries) -> Self {
        let len = puts.len();
        Catalog {
            core: Mutex::new(Core {
                overlay: Arc::new(Overlay {
                    puts,
                    removed: BTreeSet::new(),
                }),
                len,
                ..Core::default()
            }),
            changes: Mutex::new(None),
        }
    }
}

impl From<BTreeMap<u64, DocumentInfo>> for Catalog {
    fn from(map: BTreeMap<u64, DocumentInfo>) -> Self {
        map.into_iter().collect::<Entries>().into()
    }
}

/// Encoded as the `BTreeMap` it was before (a map in identifier order),
/// read from its runs a block at a time: the server's shared copy of a
/// state carries every entry, and states of formats 1 to 4 read as
/// before.
impl Serialize for Catalog {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeMap};
        let mut map = s.serialize_map(Some(self.len()))?;
        for e in self.iter() {
            let (id, info) = e.map_err(S::Error::custom)?;
            map.serialize_entry(&id, &info)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Catalog {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of identifiers to documents")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut access: A,
            ) -> std::result::Result<Entries, A::Error> {
                let mut entries = Entries::default();
                while let Some((id, info)) = access.next_entry::<u64, DocumentInfo>()? {
                    entries.insert(id, info);
                }
                Ok(entries)
            }
        }
        d.deserialize_map(Visit).map(Catalog::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn doc(id: u64) -> DocumentInfo {
        DocumentInfo {
            id,
            path: format!("t:{id:039}"),
            size: id,
            digest: Some([id as u8; 32]),
        }
    }

    #[test]
    fn answers_as_a_btreemap_under_any_changes() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(39);
        for round in 0..6 {
            let mut oracle = BTreeMap::new();
            let mut catalog = Catalog::default();
            let span = [50u64, 3_000, 20_000][round % 3];
            for step in 0..8_000u64 {
                // Mostly increasing identifiers (as adds hand them out),
                // some anywhere, some removed.
                let id = match rng.gen_range(0..10) {
                    0..=5 => step + span,
                    6..=7 => rng.gen_range(0..span),
                    _ => u64::MAX - rng.gen_range(0..3),
                };
                if rng.gen_range(0..6) == 0 {
                    assert_eq!(catalog.remove(&id), oracle.remove(&id));
                } else {
                    assert_eq!(catalog.insert(id, doc(id)), oracle.insert(id, doc(id)));
                }
            }
            assert_eq!(catalog.len(), oracle.len());
            let all: Vec<(u64, DocumentInfo)> = catalog.iter().flatten().collect();
            assert!(all.iter().map(|(k, v)| (k, v)).eq(oracle.iter()));
            for id in (0..span + 8_000).chain([u64::MAX, u64::MAX - 5]) {
                assert_eq!(catalog.get(&id).ok().flatten().as_ref(), oracle.get(&id));
                assert_eq!(
                    catalog.contains_key(&id).ok(),
                    Some(oracle.contains_key(&id))
                );
            }
            assert!(lock(&catalog.core)
                .overlay
                .puts
                .chunks
                .iter()
                .all(|c| !c.is_empty() && c.len() <= CHUNK));
            // The encoding is the map's.
            let bytes = wire::encode(&catalog).expect("encodes");
            assert_eq!(bytes, wire::encode(&oracle).expect("encodes"));
            let back: Catalog = wire::decode(&bytes).expect("decodes");
            assert!(back == catalog);
        }
    }

    /// Heap bytes of the catalog per entry, importing `n` records in
    /// order (as an import hands out identifiers).
    fn per_entry(n: u64) -> f64 {
        let mut catalog = Catalog::default();
        for id in 1..=n {
            catalog.insert(id, doc(id));
        }
        catalog.heap_bytes() as f64 / n as f64
    }

    #[test]
    fn an_entry_costs_its_pair_and_path_at_n_and_4n() {
        let pair = std::mem::size_of::<(u64, DocumentInfo)>() as f64;
        let path = doc(1).path.capacity() as f64;
        for n in [20_000, 80_000] {
            let bytes = per_entry(n);
            // A chunk filled in order is full: the last chunk's room and
            // the list of chunks are under 6% more (a `BTreeMap` filled in
            // order took 166 bytes of node per pair of 88).
            assert!(
                bytes <= (pair + path) * 1.06,
                "{bytes:.1} bytes per entry for {n} entries (pair {pair}, path {path})"
            );
        }
    }
}
