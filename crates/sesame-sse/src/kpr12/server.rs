//! The server half: cells and the Merkle tree in the store, and the
//! transcript of every access.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use sesame_core::{Error, Handler, IoCounts, Result, Store, WriteBatch};

use super::{
    add_in, bulk_nodes, cell_leaf, corrupt, defaults, del_in, empty_root, parent, search_in,
    update_digest, Access, AddToken, Cell, DelToken, Memory, Request, Response, SearchToken, DEPTH,
};
use crate::api::DocId;
use crate::common;

// ------------------------------------------------------ server

pub(super) fn cell_key(addr: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = b'c';
    k[1..].copy_from_slice(&addr.to_be_bytes());
    k
}

pub(super) fn node_key(level: usize, idx: u64) -> [u8; 10] {
    let mut k = [0u8; 10];
    k[0] = b'n';
    k[1] = level as u8;
    k[2..].copy_from_slice(&idx.to_be_bytes());
    k
}

/// Key of the record of the last update applied: its digest and its
/// proof, written in the update's own batch.
const LAST_KEY: &[u8] = b"L";

pub(super) fn parse_hash(v: &[u8]) -> Result<[u8; 32]> {
    v.try_into()
        .map_err(|_| corrupt(&format!("tree node of {} bytes", v.len())))
}

/// The server's memory: the store with pending writes on top, recording
/// the proof transcript when asked.
pub(super) struct ServerMemory<'a> {
    store: &'a dyn Store,
    cells: HashMap<u64, Vec<u8>>,
    nodes: HashMap<(usize, u64), [u8; 32]>,
    log: Option<Vec<Access>>,
}

impl<'a> ServerMemory<'a> {
    pub(super) fn new(store: &'a dyn Store, prove: bool) -> Self {
        Self {
            store,
            cells: HashMap::new(),
            nodes: HashMap::new(),
            log: prove.then(Vec::new),
        }
    }

    fn cell(&self, addr: u64) -> Result<Vec<u8>> {
        if let Some(c) = self.cells.get(&addr) {
            return Ok(c.clone());
        }
        Ok(self.store.get(&cell_key(addr))?.unwrap_or_default())
    }

    /// The siblings on the path of `addr`, bottom-up.
    fn path(&self, addr: u64) -> Result<[[u8; 32]; DEPTH]> {
        let d = defaults();
        let mut out = [[0u8; 32]; DEPTH];
        let mut missing: Vec<(usize, [u8; 10])> = Vec::new();
        for (l, o) in out.iter_mut().enumerate() {
            let s = (addr >> l) ^ 1;
            match self.nodes.get(&(l, s)) {
                Some(h) => *o = *h,
                None => missing.push((l, node_key(l, s))),
            }
        }
        let keys: Vec<&[u8]> = missing.iter().map(|(_, k)| k.as_slice()).collect();
        for ((l, _), v) in missing.iter().zip(self.store.get_many(&keys)?) {
            out[*l] = match v {
                Some(v) => parse_hash(&v)?,
                None => d[*l],
            };
        }
        Ok(out)
    }

    fn record(&mut self, cell: &[u8], path: &[[u8; 32]; DEPTH]) {
        if let Some(log) = &mut self.log {
            let d = defaults();
            let mut present = 0u64;
            let mut siblings = Vec::new();
            for (l, s) in path.iter().enumerate() {
                if *s != d[l] {
                    present |= 1 << l;
                    siblings.push(*s);
                }
            }
            log.push(Access {
                cell: cell.to_vec(),
                present,
                siblings,
            });
        }
    }

    /// The pending writes as one batch.
    pub(super) fn commit(self) -> WriteBatch {
        let d = defaults();
        let mut batch = WriteBatch::with_capacity(self.cells.len() + self.nodes.len());
        for (a, c) in self.cells {
            if c.is_empty() {
                batch.delete(cell_key(a).to_vec());
            } else {
                batch.put(cell_key(a).to_vec(), c);
            }
        }
        for ((l, i), h) in self.nodes {
            if h == d[l] {
                batch.delete(node_key(l, i).to_vec());
            } else {
                batch.put(node_key(l, i).to_vec(), h.to_vec());
            }
        }
        batch
    }
}

impl Memory for ServerMemory<'_> {
    fn read(&mut self, addr: u64) -> Result<Vec<u8>> {
        let cell = self.cell(addr)?;
        if self.log.is_some() {
            let path = self.path(addr)?;
            self.record(&cell, &path);
        }
        Ok(cell)
    }

    fn write(&mut self, addr: u64, cell: Vec<u8>) -> Result<()> {
        let path = self.path(addr)?;
        if self.log.is_some() {
            let old = self.cell(addr)?;
            self.record(&old, &path);
        }
        let mut h = cell_leaf(addr, &cell);
        for (l, s) in path.iter().enumerate() {
            self.nodes.insert((l, addr >> l), h);
            h = parent(addr, l, &h, s);
        }
        self.nodes.insert((DEPTH, 0), h);
        self.cells.insert(addr, cell);
        Ok(())
    }
}

/// The server half of KPR12: the cells of the index and the Merkle tree
/// over them, in the store.
pub struct Kpr12Server {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for Kpr12Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kpr12Server").finish_non_exhaustive()
    }
}

impl Kpr12Server {
    /// A server keeping its index in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// Stores IndexGen's cells and the tree nodes above them.
    pub fn put(&self, reset: bool, cells: Vec<Cell>) -> Result<()> {
        if reset {
            crate::common::clear(self.store.as_ref(), b"")?;
        }
        let mut leaves = BTreeMap::new();
        let mut batch = WriteBatch::with_capacity(cells.len());
        for (a, c) in cells {
            if a >> DEPTH != 0 || c.is_empty() {
                return Err(Error::Protocol("KPR12 cell out of range or empty".into()));
            }
            leaves.insert(a, cell_leaf(a, &c));
            batch.put(cell_key(a).to_vec(), c);
        }
        let store = self.store.as_ref();
        let nodes = bulk_nodes(&leaves, |l, i| match store.get(&node_key(l, i))? {
            Some(v) => parse_hash(&v),
            None => Ok(defaults()[l]),
        })?;
        for (l, i, h) in nodes {
            batch.put(node_key(l, i).to_vec(), h.to_vec());
        }
        self.store.write(batch)
    }

    /// KPR12 Search alone, without a proof: the identifiers.
    pub fn search(&self, token: &SearchToken) -> Result<Vec<DocId>> {
        let mut m = ServerMemory::new(self.store.as_ref(), false);
        Ok(common::normalise(search_in(&mut m, token)?))
    }

    /// Search with the proof component: the identifiers and the path of
    /// every cell read.
    pub fn prove(&self, token: &SearchToken) -> Result<(Vec<DocId>, Vec<Access>)> {
        let mut m = ServerMemory::new(self.store.as_ref(), true);
        let ids = common::normalise(search_in(&mut m, token)?);
        Ok((ids, m.log.unwrap_or_default()))
    }

    /// Add: applies the token and returns its proof transcript.
    pub fn add(&self, token: &AddToken) -> Result<Vec<Access>> {
        let digest = update_digest(&Request::Add(token.clone()))?;
        self.add_named(token, digest)
    }

    /// Del: applies the token and returns its proof transcript.
    pub fn del(&self, token: &DelToken) -> Result<Vec<Access>> {
        let digest = update_digest(&Request::Del(token.clone()))?;
        self.del_named(token, digest)
    }

    fn add_named(&self, token: &AddToken, digest: [u8; 32]) -> Result<Vec<Access>> {
        let mut m = ServerMemory::new(self.store.as_ref(), true);
        add_in(&mut m, token)?;
        self.finish(m, digest)
    }

    fn del_named(&self, token: &DelToken, digest: [u8; 32]) -> Result<Vec<Access>> {
        let mut m = ServerMemory::new(self.store.as_ref(), true);
        del_in(&mut m, token)?;
        self.finish(m, digest)
    }

    /// Commits the update with the record of it (digest and proof), in
    /// one batch: a client whose answer is lost can fetch the proof.
    fn finish(&self, mut m: ServerMemory<'_>, digest: [u8; 32]) -> Result<Vec<Access>> {
        let log = m.log.take().unwrap_or_default();
        let record = sesame_core::wire::encode_raw_into(&(digest, &log), Vec::new())?;
        let mut batch = m.commit();
        batch.put(LAST_KEY.to_vec(), record);
        self.store.write(batch)?;
        Ok(log)
    }

    /// The proof of the last update applied, if its digest is `digest`.
    pub fn last_update(&self, digest: &[u8; 32]) -> Result<Option<Vec<Access>>> {
        let Some(v) = self.store.get(LAST_KEY)? else {
            return Ok(None);
        };
        let (last, log): ([u8; 32], Vec<Access>) =
            sesame_core::wire::decode_raw(&v).map_err(|_| corrupt("record of the last update"))?;
        Ok((last == *digest).then_some(log))
    }

    /// The root of the server's tree.
    pub fn root(&self) -> Result<[u8; 32]> {
        match self.store.get(&node_key(DEPTH, 0))? {
            Some(v) => parse_hash(&v),
            None => Ok(empty_root()),
        }
    }
}

impl Handler for Kpr12Server {
    type Request = Request;
    type Response = Response;

    fn handle(&mut self, request: Request) -> Result<Response> {
        let digest = match &request {
            Request::Add(_) | Request::Del(_) => update_digest(&request)?,
            _ => [0; 32],
        };
        match request {
            Request::Put { reset, cells } => {
                self.put(reset, cells)?;
                Ok(Response::Stored)
            }
            Request::Search(t) => {
                let (ids, proof) = self.prove(&t)?;
                Ok(Response::Found { ids, proof })
            }
            Request::Add(t) => Ok(Response::Updated(self.add_named(&t, digest)?)),
            Request::Del(t) => Ok(Response::Updated(self.del_named(&t, digest)?)),
            Request::LastUpdate { digest: asked } => Ok(match self.last_update(&asked)? {
                Some(proof) => Response::Updated(proof),
                None => Response::NotApplied,
            }),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}
