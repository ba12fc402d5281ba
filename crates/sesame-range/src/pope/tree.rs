//! The buffer tree in the store: metadata, nodes and buffer chunks, and
//! the [`Work`] of one request (nodes read or changed, written back in
//! one batch).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use sesame_core::{Error, Result, Store, WriteBatch};

/// The tree's metadata.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Meta {
    /// The root's id.
    pub(super) root: u64,
    /// The id the next node takes.
    pub(super) next: u64,
    /// Records per buffer chunk.
    pub(super) chunk: u32,
}

/// A stored node: labels and children (none for a leaf) and the number of
/// records in its buffer, which lives in chunks of `Meta::chunk` records
/// under separate keys.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct Node {
    pub(super) labels: Vec<Vec<u8>>,
    pub(super) children: Vec<u64>,
    pub(super) len: u64,
}

pub(super) const META_KEY: &[u8] = b"m";

pub(super) fn node_key(id: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(b'n');
    k.extend_from_slice(&id.to_be_bytes());
    k
}

pub(super) fn chunk_key(id: u64, c: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(b'b');
    k.extend_from_slice(&id.to_be_bytes());
    k.extend_from_slice(&c.to_be_bytes());
    k
}

pub(super) fn corrupt(what: &str) -> Error {
    Error::StoreCorrupt(format!("POPE {what}"))
}

pub(super) fn bad(what: impl Into<String>) -> Error {
    Error::InvalidArgument(what.into())
}

/// The indices, into a buffer of `len` records, of the `l` pivots that
/// `seed` draws (a partial Fisher-Yates shuffle driven by splitmix64):
/// the same for every server, so that a split can be continued by any.
pub(super) fn sample_pivots(len: usize, l: usize, seed: u64) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..len).collect();
    let mut state = seed;
    for i in 0..l.min(len) {
        let span = (idx.len() - i) as u64;
        let j = i + sesame_crypto::prg::below_with(span, || mix(&mut state)) as usize;
        idx.swap(i, j);
    }
    idx.truncate(l);
    idx
}

/// splitmix64, for the pivot sample.
fn mix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Nodes read or changed during one request, written back in one batch.
pub(super) struct Work<'a> {
    store: &'a dyn Store,
    pub(super) nodes: HashMap<u64, Node>,
    dirty: Vec<u64>,
    pub(super) batch: WriteBatch,
    pub(super) meta: Meta,
    original: Meta,
}

impl<'a> Work<'a> {
    pub(super) fn new(store: &'a dyn Store, meta: Meta) -> Self {
        Work {
            store,
            nodes: HashMap::new(),
            dirty: Vec::new(),
            batch: WriteBatch::new(),
            meta,
            original: meta,
        }
    }

    pub(super) fn node(&mut self, id: u64) -> Result<&mut Node> {
        if !self.nodes.contains_key(&id) {
            let bytes = self
                .store
                .get(&node_key(id))?
                .ok_or_else(|| corrupt("node"))?;
            let node: Node =
                sesame_core::wire::decode(&bytes).map_err(|_| corrupt("node encoding"))?;
            self.nodes.insert(id, node);
        }
        self.nodes.get_mut(&id).ok_or_else(|| corrupt("node"))
    }

    pub(super) fn touch(&mut self, id: u64) {
        if !self.dirty.contains(&id) {
            self.dirty.push(id);
        }
    }

    pub(super) fn create(&mut self, node: Node) -> u64 {
        let id = self.meta.next;
        self.meta.next += 1;
        self.nodes.insert(id, node);
        self.touch(id);
        id
    }

    fn read_chunk(&self, id: u64, c: u64) -> Result<Vec<Vec<u8>>> {
        let bytes = self
            .store
            .get(&chunk_key(id, c))?
            .ok_or_else(|| corrupt("buffer chunk"))?;
        sesame_core::wire::decode(&bytes).map_err(|_| corrupt("buffer chunk encoding"))
    }

    /// Every record in node `id`'s buffer.
    pub(super) fn items(&mut self, id: u64) -> Result<Vec<Vec<u8>>> {
        let len = self.node(id)?.len;
        let per = u64::from(self.meta.chunk);
        let mut out = Vec::new();
        for c in 0..len.div_ceil(per) {
            out.extend(self.read_chunk(id, c)?);
        }
        if out.len() as u64 != len {
            return Err(corrupt("buffer length"));
        }
        Ok(out)
    }

    /// The records `start..end` of node `id`'s buffer (fewer when the
    /// buffer is shorter), reading only the chunks that hold them.
    pub(super) fn items_range(&mut self, id: u64, start: u64, end: u64) -> Result<Vec<Vec<u8>>> {
        let len = self.node(id)?.len;
        let end = end.min(len);
        if start >= end {
            return Ok(Vec::new());
        }
        let per = u64::from(self.meta.chunk);
        let mut out = Vec::new();
        for c in start / per..end.div_ceil(per) {
            let chunk = self.read_chunk(id, c)?;
            let first = c * per;
            let from = usize::try_from(start.saturating_sub(first)).unwrap_or(usize::MAX);
            let to = usize::try_from((end - first).min(per)).unwrap_or(usize::MAX);
            match chunk.get(from..to) {
                Some(part) => out.extend_from_slice(part),
                None => return Err(corrupt("buffer chunk length")),
            }
        }
        Ok(out)
    }

    /// Appends `items` to node `id`'s buffer.
    pub(super) fn append(&mut self, id: u64, items: Vec<Vec<u8>>) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let per = u64::from(self.meta.chunk);
        let len = self.node(id)?.len;
        let mut c = len / per;
        let mut chunk = if len % per != 0 {
            self.read_chunk(id, c)?
        } else {
            Vec::new()
        };
        let added = items.len() as u64;
        for item in items {
            chunk.push(item);
            if chunk.len() as u64 == per {
                self.batch
                    .put(chunk_key(id, c), sesame_core::wire::encode(&chunk)?);
                chunk.clear();
                c += 1;
            }
        }
        if !chunk.is_empty() {
            self.batch
                .put(chunk_key(id, c), sesame_core::wire::encode(&chunk)?);
        }
        self.node(id)?.len = len + added;
        self.touch(id);
        Ok(())
    }

    /// Empties node `id`'s buffer.
    pub(super) fn clear(&mut self, id: u64) -> Result<()> {
        let per = u64::from(self.meta.chunk);
        let len = self.node(id)?.len;
        for c in 0..len.div_ceil(per) {
            self.batch.delete(chunk_key(id, c));
        }
        self.node(id)?.len = 0;
        self.touch(id);
        Ok(())
    }

    pub(super) fn commit(mut self) -> Result<Meta> {
        for id in std::mem::take(&mut self.dirty) {
            match self.nodes.get(&id) {
                Some(n) => {
                    let bytes = sesame_core::wire::encode(n)?;
                    self.batch.put(node_key(id), bytes);
                }
                None => {
                    self.batch.delete(node_key(id));
                }
            }
        }
        if self.meta != self.original {
            self.batch
                .put(META_KEY.to_vec(), sesame_core::wire::encode(&self.meta)?);
        }
        self.store.write(self.batch)?;
        Ok(self.meta)
    }

    /// Checks that `path` leads from the root through children.
    pub(super) fn valid_path(&mut self, path: &[u64]) -> Result<bool> {
        if path.first() != Some(&self.meta.root) {
            return Ok(false);
        }
        for w in path.windows(2) {
            if !self.store_has(w[0])? || !self.node(w[0])?.children.contains(&w[1]) {
                return Ok(false);
            }
        }
        match path.last() {
            Some(&id) => self.store_has(id),
            None => Ok(false),
        }
    }

    pub(super) fn store_has(&mut self, id: u64) -> Result<bool> {
        if self.nodes.contains_key(&id) {
            return Ok(true);
        }
        match self.store.get(&node_key(id))? {
            None => Ok(false),
            Some(bytes) => {
                let node: Node =
                    sesame_core::wire::decode(&bytes).map_err(|_| corrupt("node encoding"))?;
                self.nodes.insert(id, node);
                Ok(true)
            }
        }
    }

    /// Every record in the subtree of `id`, with its node.
    pub(super) fn subtree(&mut self, id: u64, out: &mut Vec<(u64, Vec<u8>)>) -> Result<()> {
        let mut stack = vec![id];
        while let Some(id) = stack.pop() {
            out.extend(self.items(id)?.into_iter().map(|s| (id, s)));
            stack.extend(self.node(id)?.children.iter().rev().copied());
        }
        Ok(())
    }

    /// Splits the internal node `path[level]` while it has more than `l`
    /// labels, then its ancestors.
    pub(super) fn rebalance(
        &mut self,
        path: &mut Vec<u64>,
        mut level: usize,
        l: usize,
    ) -> Result<()> {
        loop {
            let Some(&id) = path.get(level) else {
                return Ok(());
            };
            while self.node(id)?.labels.len() > l {
                let count = self.node(id)?.labels.len();
                let n = if count > 2 * l { l / 2 } else { count / 2 }.max(1);
                if level == 0 {
                    let root = self.create(Node {
                        labels: Vec::new(),
                        children: vec![id],
                        len: 0,
                    });
                    self.meta.root = root;
                    path.insert(0, root);
                    level += 1;
                }
                let parent = path[level - 1];
                let node = self.node(id)?;
                if node.len != 0 {
                    return Err(Error::Protocol("splitting a node with a buffer".into()));
                }
                let labels: Vec<Vec<u8>> = node.labels.drain(..=n).collect();
                let children: Vec<u64> = node.children.drain(..=n).collect();
                let mut labels = labels;
                let promoted = labels.pop().ok_or_else(|| corrupt("labels"))?;
                self.touch(id);
                let left = self.create(Node {
                    labels,
                    children,
                    len: 0,
                });
                let p = self.node(parent)?;
                let pos = p
                    .children
                    .iter()
                    .position(|&c| c == id)
                    .ok_or_else(|| corrupt("parent"))?;
                p.children.insert(pos, left);
                p.labels.insert(pos, promoted);
                self.touch(parent);
            }
            if level == 0 {
                return Ok(());
            }
            level -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use sesame_store::MemoryStore;

    use super::*;

    fn records(n: u8) -> Vec<Vec<u8>> {
        (0..n).map(|i| vec![i; 3]).collect()
    }

    #[test]
    fn a_range_of_the_buffer_reads_across_chunks() {
        let store = MemoryStore::new();
        let meta = Meta {
            root: 0,
            next: 1,
            chunk: 4,
        };
        let mut w = Work::new(&store, meta);
        w.nodes.insert(0, Node::default());
        w.append(0, records(11)).unwrap();
        w.commit().unwrap();
        let mut w = Work::new(&store, meta);
        let all = w.items(0).unwrap();
        assert_eq!(all, records(11));
        for (start, end) in [(0, 4), (3, 9), (8, 11), (10, 30), (0, 11)] {
            let got = w.items_range(0, start, end).unwrap();
            let want = all[start as usize..(end as usize).min(11)].to_vec();
            assert_eq!(got, want, "{start}..{end}");
        }
        assert!(w.items_range(0, 11, 20).unwrap().is_empty());
    }

    #[test]
    fn a_seed_draws_the_same_distinct_pivots_every_time() {
        for seed in 0..50 {
            let a = sample_pivots(40, 7, seed);
            assert_eq!(a, sample_pivots(40, 7, seed));
            assert_eq!(a.len(), 7);
            assert_eq!(a.iter().collect::<BTreeSet<_>>().len(), 7);
            assert!(a.iter().all(|&i| i < 40));
        }
        assert_ne!(sample_pivots(40, 7, 1), sample_pivots(40, 7, 2));
        assert_eq!(sample_pivots(3, 7, 1).len(), 3);
    }
}
