//! The server half of Aura: stores entries, decrypts what a search
//! token and cover open, and caches each keyword's merged result.

use std::sync::Arc;

use sesame_core::{Error, Handler, IoCounts, Result, Store, WriteBatch};

use super::*;
use crate::api::DocId;
use crate::renewal::label;

fn entry_key(label: &[u8; LABEL_LEN]) -> Vec<u8> {
    common::tagged(b'e', label)
}

fn cache_key(tkn: &[u8; LABEL_LEN]) -> Vec<u8> {
    common::tagged(b'g', tkn)
}

/// The server half of Aura.
pub struct AuraServer {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for AuraServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuraServer").finish_non_exhaustive()
    }
}

impl AuraServer {
    /// A server keeping its index in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// Reads a cached result (identifier, tag) list.
    fn cached(&self, tkn: &[u8; LABEL_LEN], out: &mut Vec<(DocId, Tag)>) -> Result<()> {
        let Some(v) = self.store.get(&cache_key(tkn))? else {
            return Ok(());
        };
        if !v.len().is_multiple_of(CACHED_LEN) {
            return Err(Error::StoreCorrupt(format!(
                "Aura cache of {} bytes",
                v.len()
            )));
        }
        for rec in v.chunks_exact(CACHED_LEN) {
            let mut id = [0u8; ID_LEN];
            id.copy_from_slice(&rec[..ID_LEN]);
            let mut tag = [0u8; TAG_LEN];
            tag.copy_from_slice(&rec[ID_LEN..]);
            out.push((DocId::from_le_bytes(id), tag));
        }
        Ok(())
    }

    /// Runs a search; see the module documentation.
    pub fn search(
        &self,
        tkn: [u8; LABEL_LEN],
        prev: Option<[u8; LABEL_LEN]>,
        count: u64,
        h: u8,
        depth: u8,
        cover: &[GgmNode],
    ) -> Result<Vec<DocId>> {
        if h == 0 || h > 64 || !(MIN_DEPTH..=MAX_DEPTH).contains(&depth) {
            return Err(Error::InvalidArgument("Aura search parameters".into()));
        }
        if cover.iter().any(|n| n.depth() != depth) {
            return Err(Error::InvalidArgument(
                "Aura cover node of another depth".into(),
            ));
        }
        let live = |tag: &Tag| positions(tag, h, depth).any(|p| covering(cover, p).is_some());
        // The previous result, and this epoch's own if the search is
        // retried, minus what is now revoked.
        let mut result: Vec<(DocId, Tag)> = Vec::new();
        if let Some(p) = &prev {
            self.cached(p, &mut result)?;
        }
        self.cached(&tkn, &mut result)?;
        result.retain(|(_, t)| live(t));
        let mut batch = WriteBatch::new();
        for c in 0..count {
            let key = entry_key(&label(&tkn, c));
            // The epoch's entries are consecutive; a retried search finds
            // none (they moved to the cache), and a hostile count stops at
            // the first missing label.
            let Some(value) = self.store.get(&key)? else {
                break;
            };
            batch.delete(key);
            let n = usize::from(h);
            if value.len() != TAG_LEN + ID_LEN * n {
                return Err(Error::InvalidArgument(format!(
                    "Aura entry of {} bytes for h={h}",
                    value.len()
                )));
            }
            let mut tag = [0u8; TAG_LEN];
            tag.copy_from_slice(&value[..TAG_LEN]);
            for (j, p) in positions(&tag, h, depth).enumerate() {
                let Some(node) = covering(cover, p) else {
                    continue;
                };
                let leaf = node.leaf(p)?;
                let pad = pad(&leaf, &tag);
                let ct = &value[TAG_LEN + j * ID_LEN..TAG_LEN + (j + 1) * ID_LEN];
                let mut id = [0u8; ID_LEN];
                for ((o, c), p) in id.iter_mut().zip(ct).zip(pad) {
                    *o = c ^ p;
                }
                result.push((DocId::from_le_bytes(id), tag));
                break;
            }
        }
        result.sort_unstable();
        result.dedup();
        let mut cache = Vec::with_capacity(result.len() * CACHED_LEN);
        for (id, tag) in &result {
            cache.extend_from_slice(&id.to_le_bytes());
            cache.extend_from_slice(tag);
        }
        batch.put(cache_key(&tkn), cache);
        if let Some(p) = &prev {
            batch.delete(cache_key(p));
        }
        self.store.write(batch)?;
        Ok(common::normalise(
            result.into_iter().map(|(id, _)| id).collect(),
        ))
    }
}

impl Handler for AuraServer {
    type Request = Request;
    type Response = Response;

    /// Entries and cached results are read by label, one at a time.
    fn packable(&self) -> bool {
        true
    }

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::Put { reset, entries } => {
                let mut batch = WriteBatch::with_capacity(entries.len());
                if reset {
                    common::delete_prefix(self.store.as_ref(), b"", &mut batch)?;
                }
                for (label, value) in entries {
                    batch.put(entry_key(&label), value);
                }
                self.store.write(batch)?;
                Ok(Response::Stored)
            }
            Request::Search {
                tkn,
                prev,
                count,
                h,
                depth,
                cover,
            } => Ok(Response::Ids(
                self.search(tkn, prev, count, h, depth, &cover)?,
            )),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}
