//! The catalog of an [`IndexState`]: identifier to origin, one entry per
//! document or table record, held in memory.
//!
//! Its entries are kept in sorted chunks of at most [`CHUNK`] pairs
//! ([`Entries`]) rather than a `BTreeMap`: a map filled in the order of
//! its identifiers (every add and import hands out increasing ones) leaves
//! its nodes part full, 166 bytes of node per entry of 88 (counted by an
//! allocator, 20,000 to 336,776 entries);
//! a chunk filled in order is full, 88 bytes per entry, and the path's
//! own bytes on the heap beside it. What grows with a table is still an
//! entry per record (`docs/performance.md`, "An import's memory,
//! bounded", says how much): the catalog is not kept on disk. Tested by
//! `state::catalog::tests`: the same answers as a `BTreeMap` under any
//! sequence of changes, and [`Entries::heap_bytes`] per entry at N and 4N
//! entries.

use super::*;

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

    /// Whether there is no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
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

    /// Whether `id` has an entry.
    pub(crate) fn contains_key(&self, id: &u64) -> bool {
        self.get(id).is_some()
    }

    /// The entries in identifier order.
    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = (&u64, &DocumentInfo)> + Clone {
        self.chunks.iter().flatten().map(|(k, d)| (k, d))
    }

    /// The identifiers in order.
    pub(crate) fn keys(&self) -> impl DoubleEndedIterator<Item = &u64> + Clone {
        self.iter().map(|(k, _)| k)
    }

    /// The entries' origins in identifier order.
    pub(crate) fn values(&self) -> impl DoubleEndedIterator<Item = &DocumentInfo> + Clone {
        self.iter().map(|(_, d)| d)
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

/// The catalog of an [`IndexState`]: identifier to origin, with the
/// changes made since the state was last saved or loaded (what the next
/// save logs). Read it as the [`Entries`] it derefs to; change it with
/// [`Catalog::insert`] and [`Catalog::remove`].
#[derive(Debug, Default)]
pub(crate) struct Catalog {
    map: Entries,
    /// `None`: not known since a save (a catalog made or replaced whole),
    /// so the next save writes the whole state.
    pub(super) changes: Mutex<Option<Vec<Change>>>,
}

impl Catalog {
    /// Adds or replaces the entry of `id`.
    pub(crate) fn insert(&mut self, id: u64, info: DocumentInfo) -> Option<DocumentInfo> {
        if let Some(list) = lock(&self.changes).as_mut() {
            list.push(Change::Put(info.clone()));
        }
        self.map.insert(id, info)
    }

    /// Removes the entry of `id`.
    pub(crate) fn remove(&mut self, id: &u64) -> Option<DocumentInfo> {
        let old = self.map.remove(id);
        if old.is_some() {
            if let Some(list) = lock(&self.changes).as_mut() {
                list.push(Change::Remove(*id));
            }
        }
        old
    }

    pub(super) fn apply(&mut self, changes: Vec<Change>) {
        for c in changes {
            match c {
                Change::Put(d) => {
                    self.map.insert(d.id, d);
                }
                Change::Remove(id) => {
                    self.map.remove(&id);
                }
            }
        }
    }
}

impl Clone for Catalog {
    fn clone(&self) -> Self {
        self.map.clone().into()
    }
}

impl PartialEq for Catalog {
    fn eq(&self, other: &Self) -> bool {
        self.map == other.map
    }
}

impl std::ops::Deref for Catalog {
    type Target = Entries;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl From<Entries> for Catalog {
    fn from(map: Entries) -> Self {
        Catalog {
            map,
            changes: Mutex::new(None),
        }
    }
}

impl From<BTreeMap<u64, DocumentInfo>> for Catalog {
    fn from(map: BTreeMap<u64, DocumentInfo>) -> Self {
        map.into_iter().collect::<Entries>().into()
    }
}

impl<'a> IntoIterator for &'a Catalog {
    type Item = (&'a u64, &'a DocumentInfo);
    type IntoIter = Box<dyn Iterator<Item = (&'a u64, &'a DocumentInfo)> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.map.iter())
    }
}

/// Encoded as the `BTreeMap` it was before (a map in identifier order):
/// states of every format read and write as before.
impl Serialize for Catalog {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.map.len()))?;
        for (id, info) in self.map.iter() {
            map.serialize_entry(id, info)?;
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
            assert!(catalog.iter().eq(oracle.iter()));
            assert!(catalog.keys().rev().eq(oracle.keys().rev()));
            for id in (0..span + 8_000).chain([u64::MAX, u64::MAX - 5]) {
                assert_eq!(catalog.get(&id), oracle.get(&id));
                assert_eq!(catalog.contains_key(&id), oracle.contains_key(&id));
            }
            assert!(catalog
                .map
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
