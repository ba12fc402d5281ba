//! The server half: a B+ tree over [`PageNodes`], compared with the
//! scheme's [`ServerOrder`].

use std::sync::Arc;

use sesame_core::{wire, Error, Handler, IoCounts, Result, Store};

use super::{
    capacity, len_prefix, Layout, PageNodes, Request, Response, ServerOrder, MAX_RECORD,
    STORE_KEY_ROOM,
};
use crate::btree::{BTree, Capacity, Node, NodeId, NodeStore};
use crate::paged::PageConfig;
use crate::record::{value_bytes, RecordKey};

pub(super) struct Ready<O> {
    layout: Layout,
    order: O,
    capacity: Capacity,
    key_bytes: usize,
}

impl<O: ServerOrder> Ready<O> {
    /// The part of an entry (`full`, `record`) the tree stores, after
    /// checking the record's size and the stored ciphertext's against the
    /// layout.
    fn stored(&self, full: &O::Ciphertext, record: &[u8]) -> Result<O::Right> {
        let stored = O::right(full);
        self.check_stored(&stored, record)?;
        Ok(stored)
    }

    /// Checks a record's size and a stored half's against the layout.
    fn check_stored(&self, stored: &O::Right, record: &[u8]) -> Result<()> {
        if record.len() > MAX_RECORD {
            return Err(Error::Protocol("record too large".into()));
        }
        if self.layout.nonce_records() && !record.is_empty() {
            return Err(Error::Protocol(
                "a record of this tree is its ciphertext's nonce: the entry's own record \
                 must be empty"
                    .into(),
            ));
        }
        if wire::encode(stored)?.len() > self.key_bytes + 1 {
            return Err(Error::Protocol(
                "ciphertext larger than the scheme's parameters allow".into(),
            ));
        }
        Ok(())
    }
}

/// The server half: the tree in pages, and the scheme's public comparison.
pub struct BplusServer<O: ServerOrder> {
    nodes: PageNodes<O::Right>,
    page: PageConfig,
    ready: Option<Ready<O>>,
}

impl<O: ServerOrder> std::fmt::Debug for BplusServer<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BplusServer")
            .field("nodes", &self.nodes)
            .field("page", &self.page)
            .finish_non_exhaustive()
    }
}

/// Bytes of a sealed record (or of a plain one) with `payload` bytes.
pub(super) fn record_bytes(sealed: bool, payload: usize) -> usize {
    if sealed {
        RecordKey::sealed_len(payload)
    } else {
        8 + payload
    }
}

impl<O: ServerOrder> BplusServer<O> {
    /// A server over `store` (a [`crate::PagedStore`] to count page I/O)
    /// laid out for `page`; continues the tree already in `store`.
    pub fn new(store: Arc<dyn Store>, page: &PageConfig) -> Result<Self> {
        page.check()?;
        let mut server = BplusServer {
            nodes: PageNodes::open(store)?,
            page: *page,
            ready: None,
        };
        if let Some(layout) = server.nodes.meta.layout {
            server.prepare(layout)?;
        }
        Ok(server)
    }

    fn prepare(&mut self, layout: Layout) -> Result<()> {
        if let Some(ready) = &self.ready {
            if ready.layout != layout {
                return Err(Error::Protocol(format!(
                    "B+ tree laid out for {:?}, request for {layout:?}",
                    ready.layout
                )));
            }
            return Ok(());
        }
        layout.check()?;
        let key_bytes = O::key_bytes(&layout);
        // Sealed or not, records are sized the same way (the baseline's
        // are 16 bytes shorter, which only leaves room); the unique form
        // for what it takes.
        let payload = layout.payload_bytes();
        if layout.nonce_records() && !O::holds_nonces() {
            return Err(Error::Protocol(
                "records in the nonce need a scheme whose stored keys carry a nonce (Lewi-Wu)"
                    .into(),
            ));
        }
        let record = match (layout.nonce_records(), layout.unique_records()) {
            (true, _) => 0,
            (false, true) => RecordKey::unique_sealed_len(value_bytes(layout.bits), payload),
            (false, false) => record_bytes(true, payload),
        };
        let value_bytes = record + len_prefix(record);
        let page = match layout.unique_records() {
            true => self.page.page_size.saturating_sub(STORE_KEY_ROOM),
            false => self.page.page_size,
        };
        let capacity = capacity(page, key_bytes, value_bytes)?;
        let order = O::new(&layout)?;
        if self.nodes.meta.layout.is_none() {
            self.nodes.meta.layout = Some(layout);
            self.nodes.dirty = true;
        }
        self.ready = Some(Ready {
            layout,
            order,
            capacity,
            key_bytes,
        });
        Ok(())
    }

    /// The tree, and what the layout fixes (the comparison, the sizes),
    /// once `layout` is checked against the tree's.
    #[allow(clippy::type_complexity)]
    fn tree(
        &mut self,
        layout: Layout,
    ) -> Result<(
        &Ready<O>,
        BTree<O::Right, Vec<u8>, &mut PageNodes<O::Right>>,
    )> {
        self.prepare(layout)?;
        let Some(ready) = &self.ready else {
            return Err(Error::Protocol("B+ tree server not ready".into()));
        };
        Ok((ready, BTree::new(&mut self.nodes, ready.capacity)))
    }

    /// The node capacities, once the first request fixed the layout.
    pub fn capacity(&self) -> Option<Capacity> {
        self.ready.as_ref().map(|r| r.capacity)
    }

    fn insert(&mut self, layout: Layout, full: O::Ciphertext, record: Vec<u8>) -> Result<Response> {
        let (ready, mut tree) = self.tree(layout)?;
        let stored = ready.stored(&full, &record)?;
        let order = &ready.order;
        tree.insert(stored, record, |k| order.compare(O::left(&full), k))?;
        Ok(Response::Done)
    }

    /// Appends entries sorted by value along the tree's right edge,
    /// after checking with the scheme's comparison that each is not below
    /// the one before it (the first: not below the largest stored key).
    fn append(
        &mut self,
        layout: Layout,
        entries: Vec<(O::Ciphertext, Vec<u8>)>,
    ) -> Result<Response> {
        let (ready, mut tree) = self.tree(layout)?;
        let order = &ready.order;
        let mut previous = tree.last_key()?;
        let mut stored = Vec::with_capacity(entries.len());
        for (full, record) in entries {
            let right = ready.stored(&full, &record)?;
            if let Some(p) = &previous {
                if order.compare(O::left(&full), p)? == std::cmp::Ordering::Less {
                    return Err(Error::Protocol(
                        "appended entries are not in order (each must be at least the one \
                         before it)"
                            .into(),
                    ));
                }
            }
            previous = Some(right.clone());
            stored.push((right, record));
        }
        tree.append(stored)?;
        Ok(Response::Done)
    }

    /// Appends stored halves sorted by value along the tree's right edge
    /// (`Request::AppendStored`): sizes checked, order taken as given.
    fn append_stored(
        &mut self,
        layout: Layout,
        entries: Vec<(O::Right, Vec<u8>)>,
    ) -> Result<Response> {
        let (ready, mut tree) = self.tree(layout)?;
        for (stored, record) in &entries {
            ready.check_stored(stored, record)?;
        }
        tree.append(entries)?;
        Ok(Response::Done)
    }

    fn query(&mut self, layout: Layout, lo: O::Left, hi: O::Left) -> Result<Response> {
        let (ready, mut tree) = self.tree(layout)?;
        let order = &ready.order;
        let nonces = layout.nonce_records();
        let mut out = Vec::new();
        tree.scan(
            |k| order.compare(&lo, k),
            |k| order.compare(&hi, k),
            |k, v| {
                out.push(match nonces {
                    true => nonce_record::<O>(k)?,
                    false => v.clone(),
                });
                Ok(())
            },
        )?;
        Ok(Response::Records(out))
    }

    fn delete(
        &mut self,
        layout: Layout,
        lo: O::Left,
        hi: O::Left,
        record: Vec<u8>,
    ) -> Result<Response> {
        let (ready, mut tree) = self.tree(layout)?;
        let order = &ready.order;
        let nonces = layout.nonce_records();
        let found = tree.delete(
            |k| order.compare(&lo, k),
            |k| order.compare(&hi, k),
            |k, v| match nonces {
                true => Ok(nonce_record::<O>(k)? == record),
                false => Ok(*v == record),
            },
        )?;
        Ok(Response::Deleted(found.is_some()))
    }

    /// Rewrites every stored key (leaves and separators) through the
    /// re-encoding; it preserves order, so the tree stays valid.
    fn reencode(&mut self, layout: Layout, changes: Vec<(u64, u64)>) -> Result<Response> {
        self.prepare(layout)?;
        if changes.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(Error::Protocol("re-encoding not sorted".into()));
        }
        let mut stack: Vec<NodeId> = self.nodes.root().into_iter().collect();
        let mut seen = 0u64;
        while let Some(id) = stack.pop() {
            seen += 1;
            if seen > self.nodes.meta.next {
                return Err(Error::StoreCorrupt("B+ tree has a cycle".into()));
            }
            let mut node = self.nodes.load(id)?;
            match &mut node {
                Node::Leaf(l) => {
                    for (k, _) in &mut l.entries {
                        O::remap(k, &changes)?;
                    }
                }
                Node::Internal(n) => {
                    for k in &mut n.keys {
                        O::remap(k, &changes)?;
                    }
                    stack.extend(n.children.iter().copied());
                }
            }
            self.nodes.store(id, &node)?;
        }
        Ok(Response::Done)
    }
}

/// The record an entry of a tree of [`super::NONCE_RECORDS`] holds: its
/// stored key's nonce.
fn nonce_record<O: ServerOrder>(stored: &O::Right) -> Result<Vec<u8>> {
    O::nonce(stored)
        .map(|n| n.to_vec())
        .ok_or_else(|| Error::Protocol("this scheme's stored keys carry no nonce".into()))
}

impl<O: ServerOrder> Handler for BplusServer<O> {
    type Request = Request<O::Ciphertext, O::Left, O::Right>;
    type Response = Response;

    fn handle(&mut self, request: Self::Request) -> Result<Response> {
        let response = match request {
            Request::Insert {
                layout,
                ciphertext,
                record,
            } => self.insert(layout, ciphertext, record),
            Request::Query { layout, lo, hi } => self.query(layout, lo, hi),
            Request::Delete {
                layout,
                lo,
                hi,
                record,
            } => self.delete(layout, lo, hi, record),
            Request::Reencode { layout, changes } => self.reencode(layout, changes),
            Request::Append { layout, entries } => self.append(layout, entries),
            Request::AppendStored { layout, entries } => self.append_stored(layout, entries),
        };
        // Persist the root and id counter even when the operation failed
        // half way: the nodes it wrote are then reachable and consistent.
        self.nodes.commit()?;
        response
    }

    fn io_counts(&self) -> IoCounts {
        self.nodes.io_counts()
    }
}
