//! The server half of POPE: requests against the buffer tree. It keeps
//! nothing between requests; see [`super::Flush`].

use std::sync::Arc;

use sesame_core::{Handler, IoCounts, Result, Store, WriteBatch};

use super::tree::{bad, chunk_key, corrupt, node_key, sample_pivots, Meta, Node, Work, META_KEY};
use super::{Flush, Request, Response, Split, View, MAX_L, MAX_RECORD, NOMINAL_ENTRY};
use crate::paged::PageConfig;

/// The server half of POPE: the buffer tree in the store. Every request
/// reads what it needs from the store and writes its changes in one
/// batch; a flush in progress lives in the requests that continue it, so
/// a restart (or another server over the same store) continues it too.
pub struct PopeServer {
    store: Arc<dyn Store>,
    meta: Meta,
}

impl std::fmt::Debug for PopeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PopeServer")
            .field("root", &self.meta.root)
            .finish_non_exhaustive()
    }
}

/// A flush checked against the tree: the node, its records and the
/// labels they are partitioned by.
struct Checked {
    id: u64,
    items: Vec<Vec<u8>>,
    labels: Vec<Vec<u8>>,
}

impl PopeServer {
    /// A server over `store`, continuing the tree already there.
    pub fn new(store: Arc<dyn Store>, page: &PageConfig) -> Result<Self> {
        page.check()?;
        let meta = match store.get(META_KEY)? {
            Some(bytes) => {
                let m: Meta = sesame_core::wire::decode(&bytes).map_err(|_| corrupt("metadata"))?;
                if m.chunk == 0 {
                    return Err(corrupt("metadata"));
                }
                m
            }
            None => {
                let chunk = u32::try_from((page.page_size / NOMINAL_ENTRY).max(1))
                    .map_err(|_| bad("page size"))?;
                let meta = Meta {
                    root: 0,
                    next: 1,
                    chunk,
                };
                let mut batch = WriteBatch::new();
                batch.put(node_key(0), sesame_core::wire::encode(&Node::default())?);
                batch.put(META_KEY.to_vec(), sesame_core::wire::encode(&meta)?);
                store.write(batch)?;
                meta
            }
        };
        Ok(PopeServer { store, meta })
    }

    fn work(&self) -> Work<'_> {
        Work::new(self.store.as_ref(), self.meta)
    }

    fn l_of(l: u32) -> Result<usize> {
        let l = l as usize;
        if !(2..=MAX_L).contains(&l) {
            return Err(bad(format!("l={l} is not in 2..={MAX_L}")));
        }
        Ok(l)
    }

    fn visit(&mut self, path: Vec<u64>, l: u32) -> Result<Response> {
        let l = Self::l_of(l)?;
        let mut w = self.work();
        let path = if path.is_empty() {
            vec![w.meta.root]
        } else {
            path
        };
        if !w.valid_path(&path)? {
            return Err(bad("invalid POPE path"));
        }
        let id = *path.last().ok_or_else(|| bad("empty path"))?;
        let node = w.node(id)?.clone();
        let chunk = if !node.children.is_empty() && node.len > 0 {
            w.items_range(id, 0, l as u64)?
        } else {
            Vec::new()
        };
        Ok(Response::Node(View {
            id,
            labels: node.labels,
            children: node.children,
            len: node.len,
            chunk,
        }))
    }

    /// The leaf at the end of `path`, if it may be split with `l` pivots:
    /// a leaf holding more than `l` records, every buffer above it empty.
    fn splittable_leaf(w: &mut Work<'_>, path: &[u64], l: usize) -> Result<u64> {
        if !w.valid_path(path)? {
            return Err(bad("invalid POPE path"));
        }
        let (&id, above) = path.split_last().ok_or_else(|| bad("empty path"))?;
        for &p in above {
            if w.node(p)?.len != 0 {
                return Err(bad("a node above the leaf has an unflushed buffer"));
            }
        }
        let node = w.node(id)?;
        if !node.children.is_empty() || node.len <= l as u64 {
            return Err(bad("pivots of a node that is not a full leaf"));
        }
        Ok(id)
    }

    fn pivots(&mut self, path: Vec<u64>, l: u32, seed: u64) -> Result<Response> {
        let l = Self::l_of(l)?;
        let mut w = self.work();
        let id = Self::splittable_leaf(&mut w, &path, l)?;
        let items = w.items(id)?;
        let out = sample_pivots(items.len(), l, seed)
            .into_iter()
            .filter_map(|i| items.get(i).cloned())
            .collect();
        Ok(Response::Chunk(out))
    }

    /// Checks `flush` against the tree. With `all`, reads every record of
    /// the buffer and the labels; without, only the node.
    fn check(w: &mut Work<'_>, flush: &Flush, all: bool) -> Result<Checked> {
        let l = Self::l_of(flush.l)?;
        let (id, labels) = match &flush.split {
            None => {
                if !w.valid_path(&flush.path)? {
                    return Err(bad("invalid POPE path"));
                }
                let id = *flush.path.last().ok_or_else(|| bad("empty path"))?;
                let node = w.node(id)?;
                if node.children.is_empty() || node.len == 0 {
                    return Err(bad("no buffer to flush at the end of the path"));
                }
                (id, node.labels.clone())
            }
            Some(Split { order, .. }) => {
                let id = Self::splittable_leaf(w, &flush.path, l)?;
                let mut seen = vec![false; l];
                if order.len() != l {
                    return Err(bad("the order is not a permutation of the pivots"));
                }
                for &o in order {
                    match seen.get_mut(o as usize) {
                        Some(s) if !*s => *s = true,
                        _ => return Err(bad("the order is not a permutation of the pivots")),
                    }
                }
                (id, Vec::new())
            }
        };
        if !all {
            return Ok(Checked {
                id,
                items: Vec::new(),
                labels,
            });
        }
        let items = w.items(id)?;
        let labels = match &flush.split {
            None => labels,
            Some(Split { seed, order }) => {
                let sample = sample_pivots(items.len(), l, *seed);
                order
                    .iter()
                    .map(|&o| {
                        sample
                            .get(o as usize)
                            .and_then(|&i| items.get(i))
                            .cloned()
                            .ok_or_else(|| bad("pivot"))
                    })
                    .collect::<Result<_>>()?
            }
        };
        Ok(Checked { id, items, labels })
    }

    fn next(&mut self, flush: Flush, offset: u64) -> Result<Response> {
        let mut w = self.work();
        let checked = Self::check(&mut w, &flush, false)?;
        if offset >= w.node(checked.id)?.len {
            return Err(bad("the offset is past the buffer"));
        }
        let chunk = w.items_range(
            checked.id,
            offset,
            offset.saturating_add(u64::from(flush.l)),
        )?;
        Ok(Response::Chunk(chunk))
    }

    fn partition(&mut self, flush: Flush, assign: Vec<u32>) -> Result<Response> {
        let mut w = self.work();
        let checked = Self::check(&mut w, &flush, true)?;
        let buckets = checked.labels.len() as u32 + 1;
        if assign.len() != checked.items.len() || assign.iter().any(|&a| a >= buckets) {
            return Err(bad("the assignment does not fit the buffer"));
        }
        let restructured = flush.split.is_some();
        self.meta = Self::apply(w, flush, checked, &assign)?;
        Ok(Response::Flushed { restructured })
    }

    /// Moves a flushed buffer's records to where the client assigned them.
    fn apply(mut w: Work<'_>, flush: Flush, checked: Checked, assign: &[u32]) -> Result<Meta> {
        let Checked {
            id,
            items,
            labels: labels_in,
        } = checked;
        let split = flush.split.is_some();
        let l = Self::l_of(flush.l)?;
        let mut buckets: Vec<Vec<Vec<u8>>> = vec![Vec::new(); labels_in.len() + 1];
        for (item, &a) in items.into_iter().zip(assign) {
            if let Some(b) = buckets.get_mut(a as usize) {
                b.push(item);
            }
        }
        if !split {
            let children = w.node(id)?.children.clone();
            if children.len() != buckets.len() {
                return Err(bad("the node changed during a flush"));
            }
            w.clear(id)?;
            for (child, bucket) in children.into_iter().zip(buckets) {
                w.append(child, bucket)?;
            }
            return w.commit();
        }
        // Leaf split: one new leaf per non-empty bucket; bucket i holds the
        // records in (label i - 1, label i].
        let kept: Vec<usize> = (0..buckets.len())
            .filter(|&i| !buckets[i].is_empty())
            .collect();
        let mut labels = Vec::new();
        for &i in kept.iter().take(kept.len().saturating_sub(1)) {
            labels.push(labels_in.get(i).cloned().ok_or_else(|| corrupt("labels"))?);
        }
        let mut leaves = Vec::new();
        for (i, bucket) in buckets.into_iter().enumerate() {
            if bucket.is_empty() {
                continue;
            }
            let leaf = w.create(Node::default());
            w.append(leaf, bucket)?;
            leaves.push(leaf);
            debug_assert!(kept.contains(&i));
        }
        w.clear(id)?;
        w.nodes.remove(&id);
        w.touch(id);
        let mut path = flush.path;
        path.pop();
        match path.last().copied() {
            None => {
                let root = w.create(Node {
                    labels,
                    children: leaves,
                    len: 0,
                });
                w.meta.root = root;
                path.push(root);
            }
            Some(parent) => {
                let p = w.node(parent)?;
                let pos = p
                    .children
                    .iter()
                    .position(|&c| c == id)
                    .ok_or_else(|| corrupt("parent"))?;
                p.children.splice(pos..=pos, leaves);
                p.labels.splice(pos..pos, labels);
                w.touch(parent);
            }
        }
        let level = path.len() - 1;
        w.rebalance(&mut path, level, l)?;
        w.commit()
    }

    fn collect(&mut self, left: Vec<u64>, right: Vec<u64>) -> Result<Response> {
        let mut w = self.work();
        if !w.valid_path(&left)? || !w.valid_path(&right)? {
            return Ok(Response::Stale);
        }
        for path in [&left, &right] {
            let last = *path.last().ok_or_else(|| bad("empty path"))?;
            if !w.node(last)?.children.is_empty() {
                return Ok(Response::Stale);
            }
        }
        let mut out = Vec::new();
        // Buffers on both paths (empty after the descents, but returned).
        let common = left.iter().zip(&right).take_while(|(a, b)| a == b).count();
        for &id in left.iter().chain(right.iter().skip(common)) {
            out.extend(w.items(id)?.into_iter().map(|s| (id, s)));
        }
        if common < left.len() {
            let (Some(&lca), Some(&lc), Some(&rc)) = (
                left.get(common.wrapping_sub(1)),
                left.get(common),
                right.get(common),
            ) else {
                return Ok(Response::Stale);
            };
            let children = w.node(lca)?.children.clone();
            let pos = |c: u64| children.iter().position(|&x| x == c);
            let (Some(i), Some(j)) = (pos(lc), pos(rc)) else {
                return Ok(Response::Stale);
            };
            if i >= j {
                return Err(bad("the endpoints are in the wrong order"));
            }
            for &c in children.get(i + 1..j).unwrap_or_default() {
                w.subtree(c, &mut out)?;
            }
            for pair in left[common..].windows(2) {
                let kids = w.node(pair[0])?.children.clone();
                let k = kids
                    .iter()
                    .position(|&x| x == pair[1])
                    .unwrap_or(kids.len());
                for &c in kids.iter().skip(k + 1) {
                    w.subtree(c, &mut out)?;
                }
            }
            for pair in right.get(common..).unwrap_or_default().windows(2) {
                let kids = w.node(pair[0])?.children.clone();
                let k = kids.iter().position(|&x| x == pair[1]).unwrap_or(0);
                for &c in kids.get(..k).unwrap_or_default() {
                    w.subtree(c, &mut out)?;
                }
            }
        }
        Ok(Response::Records(out))
    }

    fn remove(&mut self, id: u64, sealed: Vec<u8>) -> Result<Response> {
        let mut w = self.work();
        if !w.store_has(id)? {
            return Err(bad("no such POPE node"));
        }
        let mut items = w.items(id)?;
        let pos = items
            .iter()
            .position(|s| *s == sealed)
            .ok_or_else(|| bad("no such record in the node"))?;
        // Keep the chunks dense: the last record fills the hole.
        items.swap_remove(pos);
        let per = w.meta.chunk as usize;
        let len = items.len() + 1;
        let (c_hole, c_last) = (pos / per, (len - 1) / per);
        for c in [c_hole, c_last] {
            let start = c * per;
            if start < items.len() {
                let end = (start + per).min(items.len());
                w.batch.put(
                    chunk_key(id, c as u64),
                    sesame_core::wire::encode(&items[start..end].to_vec())?,
                );
            } else {
                w.batch.delete(chunk_key(id, c as u64));
            }
        }
        w.node(id)?.len = items.len() as u64;
        w.touch(id);
        self.meta = w.commit()?;
        Ok(Response::Done)
    }

    fn insert(&mut self, sealed: Vec<u8>) -> Result<Response> {
        if sealed.is_empty() || sealed.len() > MAX_RECORD {
            return Err(bad("record size"));
        }
        let mut w = self.work();
        let root = w.meta.root;
        w.append(root, vec![sealed])?;
        self.meta = w.commit()?;
        Ok(Response::Done)
    }
}

impl Handler for PopeServer {
    type Request = Request;
    type Response = Response;

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::Insert { sealed } => self.insert(sealed),
            Request::Visit { path, l } => self.visit(path, l),
            Request::Next { flush, offset } => self.next(flush, offset),
            Request::Partition { flush, assign } => self.partition(flush, assign),
            Request::Pivots { path, l, seed } => self.pivots(path, l, seed),
            Request::Collect { left, right } => self.collect(left, right),
            Request::Remove { node, sealed } => self.remove(node, sealed),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}

#[cfg(test)]
mod tests {
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;
    use sesame_core::{Channel, LocalChannel, Typed};
    use sesame_store::MemoryStore;

    use super::*;
    use crate::api::RangeClient;
    use crate::pope::PopeClient;

    /// A channel that makes a new server half for every request, as the
    /// networked server does.
    struct FreshEachCall {
        store: Arc<dyn Store>,
        meter: sesame_core::Meter,
    }

    impl Channel for FreshEachCall {
        fn call(&mut self, request: &[u8]) -> Result<Vec<u8>> {
            let server = PopeServer::new(self.store.clone(), &PageConfig::default())?;
            LocalChannel::new(Typed(server)).call(request)
        }
        fn meter(&self) -> &sesame_core::Meter {
            &self.meter
        }
    }

    #[test]
    fn a_server_made_for_each_request_answers_as_one_server_does() {
        let mut params = sesame_core::Params::new();
        params.set("l", 3);
        let page = PageConfig::default();
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let mut client = PopeClient::new(&mut rng, &params, &page).unwrap();
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let mut fresh = FreshEachCall {
            store: store.clone(),
            meter: sesame_core::Meter::new(),
        };
        let mut oracle = Vec::new();
        for i in 0..60u64 {
            let v = (i * 7) % 40;
            client
                .insert(&mut rng, &mut fresh, v, &i.to_be_bytes())
                .unwrap();
            oracle.push((v, i.to_be_bytes().to_vec()));
            if i % 20 == 19 {
                let got = client.query(&mut rng, &mut fresh, 5, 25).unwrap();
                let mut want: Vec<_> = oracle
                    .iter()
                    .filter(|(v, _)| (5..=25).contains(v))
                    .cloned()
                    .collect();
                want.sort();
                assert_eq!(got.records, want, "after {} insertions", i + 1);
            }
        }
        // The splits reached the store: the root is no longer node 0.
        let meta: Meta = sesame_core::wire::decode(&store.get(META_KEY).unwrap().unwrap()).unwrap();
        assert_ne!(meta.root, 0);
    }

    #[test]
    fn a_flush_of_a_changed_tree_is_refused_and_changes_nothing() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let mut server = PopeServer::new(store.clone(), &PageConfig::default()).unwrap();
        for i in 0..5u8 {
            server
                .handle(Request::Insert { sealed: vec![i; 4] })
                .unwrap();
        }
        let before = store.scan_prefix(b"").unwrap();
        // A path that does not start at the root, an l out of range, and
        // a split whose order repeats a pivot.
        for flush in [
            Flush {
                path: vec![9],
                l: 2,
                split: None,
            },
            Flush {
                path: vec![0],
                l: 1,
                split: Some(Split {
                    seed: 1,
                    order: vec![0],
                }),
            },
            Flush {
                path: vec![0],
                l: 2,
                split: Some(Split {
                    seed: 1,
                    order: vec![0, 0],
                }),
            },
        ] {
            let assign = vec![0; 5];
            assert!(server.handle(Request::Partition { flush, assign }).is_err());
        }
        assert_eq!(store.scan_prefix(b"").unwrap(), before);
    }
}
