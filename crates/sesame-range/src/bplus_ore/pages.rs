//! Tree nodes as page-sized store values, with the tree's metadata.

use std::marker::PhantomData;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sesame_core::{wire, Error, IoCounts, Result, Store};

use super::Layout;
use crate::btree::{Node, NodeId, NodeStore};

// ---------------------------------------------------------------------
// Server.

/// Largest sealed record a server accepts.
pub const MAX_RECORD: usize = 1 << 20;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct Meta {
    pub(super) layout: Option<Layout>,
    pub(super) root: Option<NodeId>,
    pub(super) next: NodeId,
}

pub(super) const META_KEY: &[u8] = b"m";

pub(super) fn node_key(id: NodeId) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = b'n';
    k[1..].copy_from_slice(&id.to_be_bytes());
    k
}

/// Tree nodes as values of a store (one page each when the capacities
/// come from [`capacity`](super::capacity)), with the root and the id counter under a meta
/// key written once per request that changed them.
pub struct PageNodes<K> {
    pub(super) store: Arc<dyn Store>,
    pub(super) meta: Meta,
    pub(super) dirty: bool,
    pub(super) _keys: PhantomData<fn() -> K>,
}

impl<K> std::fmt::Debug for PageNodes<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageNodes")
            .field("root", &self.meta.root)
            .field("next", &self.meta.next)
            .finish_non_exhaustive()
    }
}

impl<K> PageNodes<K> {
    /// The nodes kept in `store` (reads its meta key).
    pub fn open(store: Arc<dyn Store>) -> Result<Self> {
        let meta = match store.get(META_KEY)? {
            Some(bytes) => wire::decode(&bytes)
                .map_err(|e| Error::StoreCorrupt(format!("B+ tree meta: {e}")))?,
            None => Meta::default(),
        };
        Ok(PageNodes {
            store,
            meta,
            dirty: false,
            _keys: PhantomData,
        })
    }

    /// Writes the meta key if it changed.
    pub fn commit(&mut self) -> Result<()> {
        if self.dirty {
            self.store.put(META_KEY, &wire::encode(&self.meta)?)?;
            self.dirty = false;
        }
        Ok(())
    }

    /// The store's I/O counts.
    pub fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}

impl<K: Serialize + serde::de::DeserializeOwned> NodeStore<K, Vec<u8>> for PageNodes<K> {
    fn load(&mut self, id: NodeId) -> Result<Node<K, Vec<u8>>> {
        let bytes = self
            .store
            .get(&node_key(id))?
            .ok_or_else(|| Error::StoreCorrupt(format!("B+ tree node {id} is missing")))?;
        wire::decode(&bytes).map_err(|e| Error::StoreCorrupt(format!("B+ tree node {id}: {e}")))
    }

    fn store(&mut self, id: NodeId, node: &Node<K, Vec<u8>>) -> Result<()> {
        self.store.put(&node_key(id), &wire::encode(node)?)
    }

    fn alloc(&mut self) -> Result<NodeId> {
        let id = self.meta.next;
        self.meta.next = id
            .checked_add(1)
            .ok_or_else(|| Error::StoreCorrupt("B+ tree node ids exhausted".into()))?;
        self.dirty = true;
        Ok(id)
    }

    fn free(&mut self, id: NodeId) -> Result<()> {
        self.store.delete(&node_key(id))
    }

    fn root(&self) -> Option<NodeId> {
        self.meta.root
    }

    fn set_root(&mut self, root: Option<NodeId>) -> Result<()> {
        self.meta.root = root;
        self.dirty = true;
        Ok(())
    }
}
