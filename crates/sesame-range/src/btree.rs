//! A B+ tree with deletion over an abstract node store.
//!
//! The tree of Bayer and McCreight as Comer describes it ("The Ubiquitous
//! B-Tree", 1979): entries live in the leaves, internal nodes hold
//! separators, and the leaves are linked left to right for range scans.
//! Deletion is the proper algorithm (Jannink, "Implementing Deletion in
//! B+-Trees", SIGMOD Record 1995): an underfull node borrows an entry from
//! a sibling under the same parent, else merges with it, and a root left
//! with one child is collapsed.
//!
//! The tree is generic over
//! - where nodes live: a [`NodeStore`] (pages of a store on a server,
//!   Path ORAM blocks on a client, or memory: [`MemNodeStore`]);
//! - how keys compare: every operation takes a *probe*, a closure giving
//!   the order of the searched-for key relative to a stored key, and that
//!   may fail. The probe need not be of the stored key's type: a server
//!   compares an ORE query ciphertext (a Lewi-Wu left half) against stored
//!   ciphertexts (right halves) and never compares two stored keys;
//! - node capacities ([`Capacity`]), chosen by the caller.
//!
//! Duplicate keys are allowed, any number of times, across leaves. The
//! separator invariant is non-strict: for separators `s_1..s_m` and
//! children `c_0..c_m`, every key `k` under `c_i` has `s_i <= k <= s_{i+1}`.
//! An insertion goes after its equals; a scan starts at the first child
//! that may hold its lower bound; a deletion tries, in order, every child
//! that may hold its key.
//!
//! With `u64` keys the `*_ord` methods take the key itself:
//!
//! ```
//! use sesame_range::btree::{BTree, Capacity, MemNodeStore};
//!
//! let mut tree = BTree::new(MemNodeStore::new(), Capacity::new(4, 4).unwrap());
//! for k in [5u64, 1, 9, 5] {
//!     tree.insert_ord(k, k * 10).unwrap();
//! }
//! assert_eq!(tree.range_ord(&1, &5).unwrap(), vec![(1, 10), (5, 50), (5, 50)]);
//! assert_eq!(tree.delete_ord(&5, |v| Ok(*v == 50)).unwrap(), Some((5, 50)));
//! assert_eq!(tree.range_ord(&0, &u64::MAX).unwrap().len(), 3);
//! ```

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sesame_core::{Error, Result};

/// Identifier of a node in a [`NodeStore`].
pub type NodeId = u64;

/// A leaf: entries sorted by key, and the next leaf to the right.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leaf<K, V> {
    /// (key, value) entries, sorted by key (equal keys in insertion order).
    pub entries: Vec<(K, V)>,
    /// The next leaf in key order, if any.
    pub next: Option<NodeId>,
}

/// An internal node: `keys.len() + 1` children separated by `keys`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Internal<K> {
    /// Separators, sorted.
    pub keys: Vec<K>,
    /// Children; child `i` holds keys between separators `i - 1` and `i`
    /// (both included).
    pub children: Vec<NodeId>,
}

/// A node of the tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Node<K, V> {
    /// A leaf.
    Leaf(Leaf<K, V>),
    /// An internal node.
    Internal(Internal<K>),
}

impl<K, V> Node<K, V> {
    /// Entries of a leaf, separators of an internal node.
    pub fn len(&self) -> usize {
        match self {
            Node::Leaf(l) => l.entries.len(),
            Node::Internal(n) => n.keys.len(),
        }
    }

    /// Whether the node holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where the nodes of a tree live.
///
/// The tree loads a node, changes its copy and stores it back; it never
/// keeps a node across operations, so an implementation may cache, encrypt
/// or obliviously access them (Path ORAM) as it likes. The root pointer is
/// part of the store because it must persist with the nodes.
pub trait NodeStore<K, V> {
    /// The node `id` (stored earlier). A missing or undecodable node is an
    /// error ([`Error::StoreCorrupt`] or [`Error::Malformed`]).
    fn load(&mut self, id: NodeId) -> Result<Node<K, V>>;

    /// Stores `node` as `id` (an id from [`NodeStore::alloc`]).
    fn store(&mut self, id: NodeId, node: &Node<K, V>) -> Result<()>;

    /// A fresh id, not used by any live node. The tree stores a node under
    /// it right after.
    fn alloc(&mut self) -> Result<NodeId>;

    /// Releases `id`: its node is no longer part of the tree.
    fn free(&mut self, id: NodeId) -> Result<()>;

    /// The root, `None` for an empty tree.
    fn root(&self) -> Option<NodeId>;

    /// Sets the root.
    fn set_root(&mut self, root: Option<NodeId>) -> Result<()>;
}

impl<K, V, S: NodeStore<K, V> + ?Sized> NodeStore<K, V> for &mut S {
    fn load(&mut self, id: NodeId) -> Result<Node<K, V>> {
        (**self).load(id)
    }
    fn store(&mut self, id: NodeId, node: &Node<K, V>) -> Result<()> {
        (**self).store(id, node)
    }
    fn alloc(&mut self) -> Result<NodeId> {
        (**self).alloc()
    }
    fn free(&mut self, id: NodeId) -> Result<()> {
        (**self).free(id)
    }
    fn root(&self) -> Option<NodeId> {
        (**self).root()
    }
    fn set_root(&mut self, root: Option<NodeId>) -> Result<()> {
        (**self).set_root(root)
    }
}

/// A [`NodeStore`] in memory: for tests and for clients that keep the
/// whole tree.
#[derive(Clone, Debug)]
pub struct MemNodeStore<K, V> {
    nodes: BTreeMap<NodeId, Node<K, V>>,
    next: NodeId,
    root: Option<NodeId>,
}

impl<K, V> Default for MemNodeStore<K, V> {
    fn default() -> Self {
        MemNodeStore {
            nodes: BTreeMap::new(),
            next: 0,
            root: None,
        }
    }
}

impl<K, V> MemNodeStore<K, V> {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Live nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }
}

impl<K: Clone, V: Clone> NodeStore<K, V> for MemNodeStore<K, V> {
    fn load(&mut self, id: NodeId) -> Result<Node<K, V>> {
        self.nodes
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::StoreCorrupt(format!("B+ tree node {id} is missing")))
    }

    fn store(&mut self, id: NodeId, node: &Node<K, V>) -> Result<()> {
        self.nodes.insert(id, node.clone());
        Ok(())
    }

    fn alloc(&mut self) -> Result<NodeId> {
        let id = self.next;
        self.next += 1;
        Ok(id)
    }

    fn free(&mut self, id: NodeId) -> Result<()> {
        self.nodes.remove(&id);
        Ok(())
    }

    fn root(&self) -> Option<NodeId> {
        self.root
    }

    fn set_root(&mut self, root: Option<NodeId>) -> Result<()> {
        self.root = root;
        Ok(())
    }
}

/// Node capacities: the most entries a leaf holds and the most separators
/// an internal node holds (its fan-out is one more). Every node but the
/// root stays at least half full: a leaf keeps `ceil(leaf / 2)` entries, an
/// internal node `ceil((internal + 1) / 2)` children.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    leaf: usize,
    internal: usize,
}

impl Capacity {
    /// Capacities of at least 2 each.
    pub fn new(leaf: usize, internal: usize) -> Result<Self> {
        if leaf < 2 || internal < 2 {
            return Err(Error::InvalidArgument(format!(
                "B+ tree capacities must be at least 2 (leaf {leaf}, internal {internal})"
            )));
        }
        Ok(Capacity { leaf, internal })
    }

    /// Most entries in a leaf.
    pub fn leaf(&self) -> usize {
        self.leaf
    }

    /// Most separators in an internal node.
    pub fn internal(&self) -> usize {
        self.internal
    }

    /// Fewest entries in a leaf other than the root.
    pub fn min_leaf(&self) -> usize {
        self.leaf.div_ceil(2)
    }

    /// Fewest separators in an internal node other than the root.
    pub fn min_internal(&self) -> usize {
        (self.internal + 1).div_ceil(2) - 1
    }

    fn underfull<K, V>(&self, node: &Node<K, V>) -> bool {
        match node {
            Node::Leaf(l) => l.entries.len() < self.min_leaf(),
            Node::Internal(n) => n.keys.len() < self.min_internal(),
        }
    }

    fn can_lend<K, V>(&self, node: &Node<K, V>) -> bool {
        match node {
            Node::Leaf(l) => l.entries.len() > self.min_leaf(),
            Node::Internal(n) => n.keys.len() > self.min_internal(),
        }
    }
}

/// Node accesses made by a tree, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeStats {
    /// Nodes loaded (visited).
    pub loads: u64,
    /// Nodes stored.
    pub stores: u64,
    /// Nodes allocated.
    pub allocs: u64,
    /// Nodes freed.
    pub frees: u64,
}

/// The first index whose element satisfies `pred` (which must be false,
/// then true, along `items`).
fn partition<T>(items: &[T], mut pred: impl FnMut(&T) -> Result<bool>) -> Result<usize> {
    let (mut lo, mut hi) = (0usize, items.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let item = items
            .get(mid)
            .ok_or_else(|| Error::InvalidArgument("binary search out of range".into()))?;
        if pred(item)? {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(lo)
}

/// Index of the first key not below the probe (`probe <= key`).
fn lower_bound<K, F>(keys: &[K], probe: &mut F) -> Result<usize>
where
    F: FnMut(&K) -> Result<Ordering>,
{
    partition(keys, |k| Ok(probe(k)? != Ordering::Greater))
}

/// Index of the first key above the probe (`probe < key`).
fn upper_bound<K, F>(keys: &[K], probe: &mut F) -> Result<usize>
where
    F: FnMut(&K) -> Result<Ordering>,
{
    partition(keys, |k| Ok(probe(k)? == Ordering::Less))
}

fn corrupt(what: &str) -> Error {
    Error::StoreCorrupt(format!("B+ tree: {what}"))
}

/// A B+ tree over a [`NodeStore`]; see the module docs.
///
/// Probes: `probe(stored_key)` returns the order of the searched-for key
/// relative to `stored_key` (`Less` when the searched-for key is smaller).
#[derive(Debug)]
pub struct BTree<K, V, S> {
    store: S,
    capacity: Capacity,
    stats: TreeStats,
    _types: std::marker::PhantomData<fn() -> (K, V)>,
}

impl<K: Clone, V, S: NodeStore<K, V>> BTree<K, V, S> {
    /// A tree over `store` (empty, or holding a tree built with the same
    /// capacities).
    pub fn new(store: S, capacity: Capacity) -> Self {
        BTree {
            store,
            capacity,
            stats: TreeStats::default(),
            _types: std::marker::PhantomData,
        }
    }

    /// The capacities.
    pub fn capacity(&self) -> Capacity {
        self.capacity
    }

    /// The node store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The node store, mutably.
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// The node store, giving up the tree.
    pub fn into_store(self) -> S {
        self.store
    }

    /// Node accesses so far.
    pub fn stats(&self) -> TreeStats {
        self.stats
    }

    /// Whether the tree holds no entry.
    pub fn is_empty(&self) -> bool {
        self.store.root().is_none()
    }

    fn load(&mut self, id: NodeId) -> Result<Node<K, V>> {
        self.stats.loads += 1;
        self.store.load(id)
    }

    fn put(&mut self, id: NodeId, node: &Node<K, V>) -> Result<()> {
        self.stats.stores += 1;
        self.store.store(id, node)
    }

    fn alloc(&mut self) -> Result<NodeId> {
        self.stats.allocs += 1;
        self.store.alloc()
    }

    fn free(&mut self, id: NodeId) -> Result<()> {
        self.stats.frees += 1;
        self.store.free(id)
    }

    /// The largest key (the last entry of the last leaf), `None` for an
    /// empty tree.
    pub fn last_key(&mut self) -> Result<Option<K>> {
        let Some(mut id) = self.store.root() else {
            return Ok(None);
        };
        for _ in 0..=64 {
            match self.load(id)? {
                Node::Leaf(l) => return Ok(l.entries.last().map(|e| e.0.clone())),
                Node::Internal(n) => {
                    id = *n
                        .children
                        .last()
                        .ok_or_else(|| corrupt("internal node without children"))?;
                }
            }
        }
        Err(corrupt("deeper than 64 levels"))
    }

    /// Appends `entries`, sorted by key and none below a key the tree
    /// holds, along the right edge of the tree: each node is filled to
    /// its capacity before the next is opened, and written once per call
    /// (a bulk load, where insertions one by one would write each leaf
    /// about `leaf / 2` times and leave it half full). The tree is valid
    /// after every call: the last node of each level, if underfull, takes
    /// entries from its left sibling. The caller guarantees the order
    /// (the tree cannot compare two stored keys of an ORE scheme).
    pub fn append(&mut self, entries: Vec<(K, V)>) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        // The right edge, leaf first.
        let mut edge: Vec<(NodeId, Node<K, V>)> = Vec::new();
        match self.store.root() {
            Some(root) => {
                let mut id = root;
                loop {
                    if edge.len() > 64 {
                        return Err(corrupt("deeper than 64 levels"));
                    }
                    let node = self.load(id)?;
                    let next = match &node {
                        Node::Internal(n) => Some(
                            *n.children
                                .last()
                                .ok_or_else(|| corrupt("internal node without children"))?,
                        ),
                        Node::Leaf(_) => None,
                    };
                    edge.push((id, node));
                    match next {
                        Some(child) => id = child,
                        None => break,
                    }
                }
                edge.reverse();
            }
            None => {
                let id = self.alloc()?;
                edge.push((
                    id,
                    Node::Leaf(Leaf {
                        entries: Vec::new(),
                        next: None,
                    }),
                ));
            }
        }
        for (key, value) in entries {
            let Some((leaf_id, Node::Leaf(leaf))) = edge.first_mut() else {
                return Err(corrupt("the right edge does not end in a leaf"));
            };
            if leaf.entries.len() < self.capacity.leaf {
                leaf.entries.push((key, value));
                continue;
            }
            let (old_id, new_id) = (*leaf_id, self.alloc()?);
            leaf.next = Some(new_id);
            let fresh = Node::Leaf(Leaf {
                entries: vec![(key.clone(), value)],
                next: None,
            });
            let full = std::mem::replace(&mut edge[0], (new_id, fresh));
            self.put(old_id, &full.1)?;
            self.append_child(&mut edge, 1, key, new_id, old_id)?;
        }
        // The last node of each level, top down (a sibling that lends
        // must first be under the same parent).
        for level in (0..edge.len().saturating_sub(1)).rev() {
            self.fill_last(&mut edge, level)?;
        }
        for (id, node) in &edge {
            self.put(*id, node)?;
        }
        let root = edge.last().map(|(id, _)| *id);
        self.store.set_root(root)
    }

    /// Adds `child` (first key `separator`, right of `left`) as the last
    /// child at `level` of the right edge, opening a node there (or a new
    /// root) when the last one is full.
    fn append_child(
        &mut self,
        edge: &mut Vec<(NodeId, Node<K, V>)>,
        level: usize,
        separator: K,
        child: NodeId,
        left: NodeId,
    ) -> Result<()> {
        if level > 64 {
            return Err(corrupt("deeper than 64 levels"));
        }
        let Some((node_id, node)) = edge.get_mut(level) else {
            let id = self.alloc()?;
            edge.push((
                id,
                Node::Internal(Internal {
                    keys: vec![separator],
                    children: vec![left, child],
                }),
            ));
            return Ok(());
        };
        let Node::Internal(n) = node else {
            return Err(corrupt("a leaf above the leaves"));
        };
        if n.keys.len() < self.capacity.internal {
            n.keys.push(separator);
            n.children.push(child);
            return Ok(());
        }
        let (old_id, new_id) = (*node_id, self.alloc()?);
        let fresh = Node::Internal(Internal {
            keys: Vec::new(),
            children: vec![child],
        });
        let full = std::mem::replace(&mut edge[level], (new_id, fresh));
        self.put(old_id, &full.1)?;
        self.append_child(edge, level + 1, separator, new_id, old_id)
    }

    /// Makes the last node at `level` of the right edge at least half
    /// full by taking entries from its left sibling (full when the last
    /// node was opened), through their parent (`level + 1`).
    fn fill_last(&mut self, edge: &mut [(NodeId, Node<K, V>)], level: usize) -> Result<()> {
        let underfull = match edge.get(level) {
            Some((_, node)) => self.capacity.underfull(node),
            None => false,
        };
        if !underfull {
            return Ok(());
        }
        let (below, above) = edge.split_at_mut(level + 1);
        let (Some((_, node)), Some((_, Node::Internal(parent)))) =
            (below.last_mut(), above.first_mut())
        else {
            return Err(corrupt("the right edge has no parent"));
        };
        let at = parent
            .children
            .len()
            .checked_sub(2)
            .ok_or_else(|| corrupt("a last node without a left sibling"))?;
        let left_id = *parent
            .children
            .get(at)
            .ok_or_else(|| corrupt("no sibling"))?;
        let mut left = self.load(left_id)?;
        let separator = parent
            .keys
            .last_mut()
            .ok_or_else(|| corrupt("internal node without separators"))?;
        match (&mut left, node) {
            (Node::Leaf(l), Node::Leaf(r)) => {
                let total = l.entries.len() + r.entries.len();
                let mut moved = l.entries.split_off(total / 2);
                moved.append(&mut r.entries);
                r.entries = moved;
                *separator = r
                    .entries
                    .first()
                    .map(|e| e.0.clone())
                    .ok_or_else(|| corrupt("empty leaf"))?;
            }
            (Node::Internal(l), Node::Internal(r)) => {
                let mut keys = std::mem::take(&mut l.keys);
                keys.push(separator.clone());
                keys.append(&mut r.keys);
                let mut children = std::mem::take(&mut l.children);
                children.append(&mut r.children);
                let keep = (keys.len() - 1) / 2;
                r.keys = keys.split_off(keep + 1);
                *separator = keys.pop().ok_or_else(|| corrupt("empty split"))?;
                l.keys = keys;
                r.children = children.split_off(keep + 1);
                l.children = children;
            }
            _ => return Err(corrupt("siblings of different kinds")),
        }
        if self.capacity.underfull(&left) {
            return Err(corrupt("a left sibling too small to lend"));
        }
        self.put(left_id, &left)
    }

    /// Inserts (`key`, `value`) after every entry with an equal key.
    /// `probe` orders `key` against stored keys (for a plain key:
    /// `|k| Ok(key.cmp(k))`).
    pub fn insert<F>(&mut self, key: K, value: V, mut probe: F) -> Result<()>
    where
        F: FnMut(&K) -> Result<Ordering>,
    {
        let Some(root) = self.store.root() else {
            let id = self.alloc()?;
            let leaf = Node::Leaf(Leaf {
                entries: vec![(key, value)],
                next: None,
            });
            self.put(id, &leaf)?;
            return self.store.set_root(Some(id));
        };
        if let Some((separator, right)) = self.insert_at(root, key, value, &mut probe, 0)? {
            let id = self.alloc()?;
            let node = Node::Internal(Internal {
                keys: vec![separator],
                children: vec![root, right],
            });
            self.put(id, &node)?;
            self.store.set_root(Some(id))?;
        }
        Ok(())
    }

    /// Inserts into the subtree `id`; returns the separator and the new
    /// right sibling when `id` split.
    fn insert_at<F>(
        &mut self,
        id: NodeId,
        key: K,
        value: V,
        probe: &mut F,
        depth: usize,
    ) -> Result<Option<(K, NodeId)>>
    where
        F: FnMut(&K) -> Result<Ordering>,
    {
        if depth > 64 {
            return Err(corrupt("deeper than 64 levels"));
        }
        match self.load(id)? {
            Node::Leaf(mut leaf) => {
                let at = partition(&leaf.entries, |e| Ok(probe(&e.0)? == Ordering::Less))?;
                leaf.entries.insert(at, (key, value));
                if leaf.entries.len() <= self.capacity.leaf {
                    self.put(id, &Node::Leaf(leaf))?;
                    return Ok(None);
                }
                let right_id = self.alloc()?;
                let entries = leaf.entries.split_off(leaf.entries.len() / 2);
                let separator = entries
                    .first()
                    .map(|e| e.0.clone())
                    .ok_or_else(|| corrupt("empty split"))?;
                let right = Leaf {
                    entries,
                    next: leaf.next,
                };
                leaf.next = Some(right_id);
                self.put(right_id, &Node::Leaf(right))?;
                self.put(id, &Node::Leaf(leaf))?;
                Ok(Some((separator, right_id)))
            }
            Node::Internal(mut node) => {
                let i = upper_bound(&node.keys, probe)?;
                let child = *node
                    .children
                    .get(i)
                    .ok_or_else(|| corrupt("internal node with too few children"))?;
                let Some((separator, new_child)) =
                    self.insert_at(child, key, value, probe, depth + 1)?
                else {
                    return Ok(None);
                };
                node.keys.insert(i, separator);
                node.children.insert(i + 1, new_child);
                if node.keys.len() <= self.capacity.internal {
                    self.put(id, &Node::Internal(node))?;
                    return Ok(None);
                }
                let mid = node.keys.len() / 2;
                let keys = node.keys.split_off(mid + 1);
                let promoted = node.keys.pop().ok_or_else(|| corrupt("empty split"))?;
                let children = node.children.split_off(mid + 1);
                let right_id = self.alloc()?;
                self.put(right_id, &Node::Internal(Internal { keys, children }))?;
                self.put(id, &Node::Internal(node))?;
                Ok(Some((promoted, right_id)))
            }
        }
    }

    /// The entries whose keys lie between the probes `lo` and `hi` (both
    /// included), in key order: `lo(k) != Greater && hi(k) != Less`.
    pub fn range<L, H>(&mut self, lo: L, hi: H) -> Result<Vec<(K, V)>>
    where
        L: FnMut(&K) -> Result<Ordering>,
        H: FnMut(&K) -> Result<Ordering>,
        V: Clone,
    {
        let mut out = Vec::new();
        self.scan(lo, hi, |k, v| {
            out.push((k.clone(), v.clone()));
            Ok(())
        })?;
        Ok(out)
    }

    /// Calls `visit` on every entry of [`BTree::range`], in key order,
    /// without cloning.
    pub fn scan<L, H, W>(&mut self, mut lo: L, mut hi: H, mut visit: W) -> Result<()>
    where
        L: FnMut(&K) -> Result<Ordering>,
        H: FnMut(&K) -> Result<Ordering>,
        W: FnMut(&K, &V) -> Result<()>,
    {
        let Some(mut id) = self.store.root() else {
            return Ok(());
        };
        let mut depth = 0;
        let mut leaf = loop {
            match self.load(id)? {
                Node::Leaf(leaf) => break leaf,
                Node::Internal(node) => {
                    let i = lower_bound(&node.keys, &mut lo)?;
                    id = *node
                        .children
                        .get(i)
                        .ok_or_else(|| corrupt("internal node with too few children"))?;
                }
            }
            depth += 1;
            if depth > 64 {
                return Err(corrupt("deeper than 64 levels"));
            }
        };
        let mut start = partition(&leaf.entries, |e| Ok(lo(&e.0)? != Ordering::Greater))?;
        loop {
            for (k, v) in leaf.entries.get(start..).unwrap_or_default() {
                if hi(k)? == Ordering::Less {
                    return Ok(());
                }
                visit(k, v)?;
            }
            let Some(next) = leaf.next else {
                return Ok(());
            };
            leaf = match self.load(next)? {
                Node::Leaf(l) => l,
                Node::Internal(_) => return Err(corrupt("leaf chain reaches an internal node")),
            };
            start = 0;
        }
    }

    /// Deletes the first entry, in key order, whose key lies between the
    /// probes `lo` and `hi` and for which `matches(key, value)` holds;
    /// returns it, or `None` when there is none. Underfull nodes borrow
    /// from or merge with a sibling; a root left with one child is
    /// replaced by it.
    pub fn delete<L, H, M>(
        &mut self,
        mut lo: L,
        mut hi: H,
        mut matches: M,
    ) -> Result<Option<(K, V)>>
    where
        L: FnMut(&K) -> Result<Ordering>,
        H: FnMut(&K) -> Result<Ordering>,
        M: FnMut(&K, &V) -> Result<bool>,
    {
        let Some(root) = self.store.root() else {
            return Ok(None);
        };
        let mut node = self.load(root)?;
        let Some((entry, changed)) =
            self.delete_in(&mut node, &mut lo, &mut hi, &mut matches, 0)?
        else {
            return Ok(None);
        };
        if changed {
            match &node {
                Node::Internal(n) if n.keys.is_empty() => {
                    let child = *n.children.first().ok_or_else(|| corrupt("empty root"))?;
                    self.store.set_root(Some(child))?;
                    self.free(root)?;
                }
                Node::Leaf(l) if l.entries.is_empty() => {
                    self.store.set_root(None)?;
                    self.free(root)?;
                }
                _ => self.put(root, &node)?,
            }
        }
        Ok(Some(entry))
    }

    /// Deletes from the subtree whose root is `node` (loaded, changed in
    /// place, not stored: the caller stores it when the flag says it
    /// changed).
    fn delete_in<L, H, M>(
        &mut self,
        node: &mut Node<K, V>,
        lo: &mut L,
        hi: &mut H,
        matches: &mut M,
        depth: usize,
    ) -> Result<Option<((K, V), bool)>>
    where
        L: FnMut(&K) -> Result<Ordering>,
        H: FnMut(&K) -> Result<Ordering>,
        M: FnMut(&K, &V) -> Result<bool>,
    {
        if depth > 64 {
            return Err(corrupt("deeper than 64 levels"));
        }
        match node {
            Node::Leaf(leaf) => {
                let start = partition(&leaf.entries, |e| Ok(lo(&e.0)? != Ordering::Greater))?;
                let mut found = None;
                for (j, (k, v)) in leaf.entries.iter().enumerate().skip(start) {
                    if hi(k)? == Ordering::Less {
                        break;
                    }
                    if matches(k, v)? {
                        found = Some(j);
                        break;
                    }
                }
                Ok(found.map(|j| (leaf.entries.remove(j), true)))
            }
            Node::Internal(parent) => {
                let first = lower_bound(&parent.keys, lo)?;
                let last = upper_bound(&parent.keys, hi)?;
                for i in first..=last {
                    let child_id = *parent
                        .children
                        .get(i)
                        .ok_or_else(|| corrupt("internal node with too few children"))?;
                    let mut child = self.load(child_id)?;
                    let Some((entry, changed)) =
                        self.delete_in(&mut child, lo, hi, matches, depth + 1)?
                    else {
                        continue;
                    };
                    if !changed {
                        return Ok(Some((entry, false)));
                    }
                    if !self.capacity.underfull(&child) {
                        self.put(child_id, &child)?;
                        return Ok(Some((entry, false)));
                    }
                    self.rebalance(parent, i, child)?;
                    return Ok(Some((entry, true)));
                }
                Ok(None)
            }
        }
    }

    /// Fixes the underfull child `i` of `parent`: borrow from the left
    /// sibling, else from the right one, else merge with one of them.
    /// Stores the children; the caller stores `parent`.
    fn rebalance(
        &mut self,
        parent: &mut Internal<K>,
        i: usize,
        mut child: Node<K, V>,
    ) -> Result<()> {
        let child_id = *parent.children.get(i).ok_or_else(|| corrupt("no child"))?;
        let left = match i.checked_sub(1) {
            Some(l) => {
                let id = *parent.children.get(l).ok_or_else(|| corrupt("no child"))?;
                let node = self.load(id)?;
                if self.capacity.can_lend(&node) {
                    let mut node = node;
                    let sep = parent.keys.get_mut(l).ok_or_else(|| corrupt("no key"))?;
                    borrow_from_left(&mut node, &mut child, sep)?;
                    self.put(id, &node)?;
                    return self.put(child_id, &child);
                }
                Some((id, node))
            }
            None => None,
        };
        let right_id = parent.children.get(i + 1).copied();
        if let Some(right_id) = right_id {
            let mut right = self.load(right_id)?;
            if self.capacity.can_lend(&right) {
                let sep = parent.keys.get_mut(i).ok_or_else(|| corrupt("no key"))?;
                borrow_from_right(&mut child, &mut right, sep)?;
                self.put(right_id, &right)?;
                return self.put(child_id, &child);
            }
            if left.is_none() {
                // Merge the right sibling into the child.
                let sep = parent.keys.remove(i);
                merge(&mut child, right, sep)?;
                parent.children.remove(i + 1);
                self.put(child_id, &child)?;
                return self.free(right_id);
            }
        }
        let Some((left_id, mut left)) = left else {
            return Err(corrupt("a non-root node without siblings"));
        };
        // Merge the child into its left sibling.
        let sep = parent.keys.remove(i - 1);
        merge(&mut left, child, sep)?;
        parent.children.remove(i);
        self.put(left_id, &left)?;
        self.free(child_id)
    }
}

/// Moves the last entry (or child) of `left` to the front of `right`,
/// updating their separator `sep`.
fn borrow_from_left<K: Clone, V>(
    left: &mut Node<K, V>,
    right: &mut Node<K, V>,
    sep: &mut K,
) -> Result<()> {
    match (left, right) {
        (Node::Leaf(l), Node::Leaf(r)) => {
            let e = l.entries.pop().ok_or_else(|| corrupt("empty sibling"))?;
            *sep = e.0.clone();
            r.entries.insert(0, e);
        }
        (Node::Internal(l), Node::Internal(r)) => {
            let k = l.keys.pop().ok_or_else(|| corrupt("empty sibling"))?;
            let c = l.children.pop().ok_or_else(|| corrupt("empty sibling"))?;
            r.keys.insert(0, std::mem::replace(sep, k));
            r.children.insert(0, c);
        }
        _ => return Err(corrupt("siblings of different kinds")),
    }
    Ok(())
}

/// Moves the first entry (or child) of `right` to the end of `left`,
/// updating their separator `sep`.
fn borrow_from_right<K: Clone, V>(
    left: &mut Node<K, V>,
    right: &mut Node<K, V>,
    sep: &mut K,
) -> Result<()> {
    match (left, right) {
        (Node::Leaf(l), Node::Leaf(r)) => {
            if r.entries.len() < 2 {
                return Err(corrupt("sibling too small to lend"));
            }
            let e = r.entries.remove(0);
            l.entries.push(e);
            *sep = r
                .entries
                .first()
                .map(|e| e.0.clone())
                .ok_or_else(|| corrupt("empty sibling"))?;
        }
        (Node::Internal(l), Node::Internal(r)) => {
            if r.keys.is_empty() || r.children.is_empty() {
                return Err(corrupt("empty sibling"));
            }
            let k = r.keys.remove(0);
            let c = r.children.remove(0);
            l.keys.push(std::mem::replace(sep, k));
            l.children.push(c);
        }
        _ => return Err(corrupt("siblings of different kinds")),
    }
    Ok(())
}

/// Appends `right` to `left`; `sep` separated them.
fn merge<K, V>(left: &mut Node<K, V>, right: Node<K, V>, sep: K) -> Result<()> {
    match (left, right) {
        (Node::Leaf(l), Node::Leaf(mut r)) => {
            l.entries.append(&mut r.entries);
            l.next = r.next;
        }
        (Node::Internal(l), Node::Internal(mut r)) => {
            l.keys.push(sep);
            l.keys.append(&mut r.keys);
            l.children.append(&mut r.children);
        }
        _ => return Err(corrupt("siblings of different kinds")),
    }
    Ok(())
}

impl<K: Ord + Clone, V, S: NodeStore<K, V>> BTree<K, V, S> {
    /// Inserts (`key`, `value`) with `key`'s own order.
    pub fn insert_ord(&mut self, key: K, value: V) -> Result<()> {
        let probe = key.clone();
        self.insert(key, value, move |k| Ok(probe.cmp(k)))
    }

    /// The entries with keys in `[lo, hi]`.
    pub fn range_ord(&mut self, lo: &K, hi: &K) -> Result<Vec<(K, V)>>
    where
        V: Clone,
    {
        self.range(|k| Ok(lo.cmp(k)), |k| Ok(hi.cmp(k)))
    }

    /// Deletes the first entry with key `key` whose value `matches`.
    pub fn delete_ord<M>(&mut self, key: &K, mut matches: M) -> Result<Option<(K, V)>>
    where
        M: FnMut(&V) -> Result<bool>,
    {
        self.delete(|k| Ok(key.cmp(k)), |k| Ok(key.cmp(k)), |_, v| matches(v))
    }

    /// Checks every invariant of the tree (sorted keys, separators bound
    /// their subtrees, nodes at least half full but the root, all leaves
    /// at the same depth, the leaf chain links the leaves in order);
    /// returns the number of entries. For tests, and for clients that can
    /// compare keys (plaintext keys, or ORAM clients).
    pub fn check(&mut self) -> Result<usize> {
        let Some(root) = self.store.root() else {
            return Ok(0);
        };
        let mut leaves = Vec::new();
        let mut leaf_depth = None;
        let count = self.check_node(root, None, None, 0, true, &mut leaf_depth, &mut leaves)?;
        for (w, (_, next)) in leaves.iter().enumerate() {
            let expected = leaves.get(w + 1).map(|l| l.0);
            if *next != expected {
                return Err(corrupt("broken leaf chain"));
            }
        }
        Ok(count)
    }

    #[allow(clippy::too_many_arguments)]
    fn check_node(
        &mut self,
        id: NodeId,
        lo: Option<&K>,
        hi: Option<&K>,
        depth: usize,
        is_root: bool,
        leaf_depth: &mut Option<usize>,
        leaves: &mut Vec<(NodeId, Option<NodeId>)>,
    ) -> Result<usize> {
        if depth > 64 {
            return Err(corrupt("deeper than 64 levels"));
        }
        let node = self.store.load(id)?;
        if !is_root && self.capacity.underfull(&node) {
            return Err(corrupt("underfull node"));
        }
        let within = |k: &K| lo.is_none_or(|lo| lo <= k) && hi.is_none_or(|hi| k <= hi);
        match node {
            Node::Leaf(l) => {
                if l.entries.len() > self.capacity.leaf || l.entries.is_empty() {
                    return Err(corrupt("leaf size"));
                }
                if l.entries.windows(2).any(|w| w[0].0 > w[1].0) {
                    return Err(corrupt("unsorted leaf"));
                }
                if !l.entries.iter().all(|e| within(&e.0)) {
                    return Err(corrupt("leaf key outside its separators"));
                }
                match leaf_depth {
                    None => *leaf_depth = Some(depth),
                    Some(d) if *d != depth => return Err(corrupt("leaves at different depths")),
                    Some(_) => {}
                }
                leaves.push((id, l.next));
                Ok(l.entries.len())
            }
            Node::Internal(n) => {
                if n.keys.len() > self.capacity.internal
                    || n.keys.is_empty()
                    || n.children.len() != n.keys.len() + 1
                {
                    return Err(corrupt("internal node size"));
                }
                if n.keys.windows(2).any(|w| w[0] > w[1]) || !n.keys.iter().all(within) {
                    return Err(corrupt("unsorted separators"));
                }
                let mut total = 0;
                for (i, &child) in n.children.iter().enumerate() {
                    let clo = if i == 0 { lo } else { n.keys.get(i - 1) };
                    let chi = if i == n.keys.len() { hi } else { n.keys.get(i) };
                    total +=
                        self.check_node(child, clo, chi, depth + 1, false, leaf_depth, leaves)?;
                }
                Ok(total)
            }
        }
    }
}

#[cfg(test)]
mod tests;
