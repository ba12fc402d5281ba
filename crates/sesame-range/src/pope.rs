//! POPE, partial order preserving encoding (D. S. Roche, D. Apon, S. G.
//! Choi, A. Yerukhimovich, "POPE: Partial Order Preserving Encoding", CCS
//! 2016; seed 004, section 4.3).
//!
//! The server keeps a buffer tree: every node has an unsorted buffer of
//! sealed records, and an internal node also a sorted list of at most `L`
//! labels (copies of sealed records) separating its children. An insertion
//! appends the sealed record to the root's buffer: one round, no
//! comparison. A query splits the tree along the path of each endpoint:
//! on the way down, the server streams every buffer to the client in
//! chunks of at most `L` records and the client answers, for each, the
//! child it belongs to; a leaf holding more than `L` records is split
//! around `L` random pivots the client sorts, and its labels move up into
//! the parent (B-tree style, splitting internal nodes that grow past `L`
//! labels). The server then returns every record between the two endpoint
//! leaves, intermediate buffers included, and the client discards those
//! outside the interval (at most `2L` per query: the two leaves).
//!
//! Comparisons are on the pair (value, ciphertext bytes), a strict total
//! order, so equal values never stall a split. Each request/response is a
//! round, as seed 004 counts them. Deletion is our addition (POPE has
//! none): a query over `[v, v]` locates the record, which the server then
//! removes from its buffer. See `docs/schemes/pope.md`.

use std::collections::HashMap;
use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    channel, BackwardPrivacy, Channel, Error, Handler, IoCounts, Params, QueryKind, Result,
    SchemeDescriptor, SchemeKind, Service, Store, Typed, WriteBatch,
};

use crate::api::{bits_param, check_value, RangeAnswer, RangeClient, RangeProtocol, Record};
use crate::paged::PageConfig;
use crate::record::RecordKey;

/// Descriptor of POPE.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "pope",
    title: "POPE: Partial Order Preserving Encoding",
    citation: "D. S. Roche, D. Apon, S. G. Choi, A. Yerukhimovich. POPE: Partial Order \
               Preserving Encoding. CCS 2016",
    kind: SchemeKind::Range,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Range],
    leakage: "Insertions leak nothing but their number and sizes (appended to the root \
              buffer unsorted). Queries leak a partial order: the relative order of the \
              records the client partitions (each against the labels of the nodes on the \
              two endpoint paths, and the sorted pivots of split leaves), which grows with \
              the number of queries, plus the access pattern (the records returned, up to \
              2L of them outside the interval). Equality is hidden (semantically secure \
              ciphertexts).",
    doc: "docs/schemes/pope.md",
};

/// Associated data of the sealed records.
const AAD: &[u8] = b"pope";

/// Bytes a sealed record is assumed to take when sizing `L` and the buffer
/// chunks: a 16-byte payload sealed, with its length prefix.
const NOMINAL_ENTRY: usize = 8 + 16 + 28 + 2;

/// Largest sealed record the server accepts (1 MiB).
const MAX_RECORD: usize = 1 << 20;

/// Largest accepted `L`.
const MAX_L: usize = 1 << 16;

/// Re-descents a query tries before giving up on a changing tree.
const MAX_RETRIES: usize = 64;

/// The registry entries of this module.
pub fn protocols() -> Vec<RangeProtocol> {
    vec![RangeProtocol {
        descriptor: &DESCRIPTOR,
        params: &[
            ("bits", "32 (value width)"),
            (
                "l",
                "page_size / 54, at least 2 (labels per node, client working set)",
            ),
        ],
        new_client: |rng, params, page| Ok(Box::new(PopeClient::new(rng, params, page)?)),
        restore_client: |bytes| Ok(Box::new(PopeClient::restore(bytes)?)),
        new_server: |store, page| -> Result<Box<dyn Service>> {
            Ok(Box::new(Typed(PopeServer::new(store, page)?)))
        },
    }]
}

/// A POPE request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Appends a sealed record to the root's buffer.
    Insert {
        /// The sealed record.
        sealed: Vec<u8>,
    },
    /// Shows the node at the end of `path` (node ids from the root; empty:
    /// the root). For an internal node with a non-empty buffer this starts
    /// flushing it: the response carries the first chunk.
    Visit {
        /// Path from the root.
        path: Vec<u64>,
        /// Chunk size and label bound.
        l: u32,
    },
    /// The client's children (indices into the labels + 1 children) of the
    /// last chunk sent; the server answers with the next chunk, or moves
    /// the records once the whole buffer is assigned.
    Partition {
        /// One child index per record of the last chunk.
        assign: Vec<u32>,
    },
    /// Samples `l` pivots of the leaf at the end of `path` (which holds
    /// more than `l` records) to split it.
    Pivots {
        /// Path from the root to the leaf.
        path: Vec<u64>,
        /// Number of pivots.
        l: u32,
        /// Seed of the sampling, from the client.
        seed: u64,
    },
    /// The pivots in sorted order (a permutation of their indices); starts
    /// flushing the leaf into the buckets they delimit.
    Sort {
        /// `order[i]` is the index of the i-th smallest pivot.
        order: Vec<u32>,
    },
    /// Every record between the leaves at the ends of `left` and `right`.
    Collect {
        /// Path to the left endpoint's leaf.
        left: Vec<u64>,
        /// Path to the right endpoint's leaf.
        right: Vec<u64>,
    },
    /// Removes the record `sealed` from the buffer of `node`.
    Remove {
        /// Node holding the record.
        node: u64,
        /// The record's exact bytes.
        sealed: Vec<u8>,
    },
}

/// A node as [`Request::Visit`] shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct View {
    /// The node's id.
    pub id: u64,
    /// Sorted labels (internal nodes).
    pub labels: Vec<Vec<u8>>,
    /// Child ids (empty for a leaf).
    pub children: Vec<u64>,
    /// Records in the buffer.
    pub len: u64,
    /// First chunk of the buffer being flushed (internal nodes).
    pub chunk: Vec<Vec<u8>>,
}

/// A POPE response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// Done.
    Done,
    /// A node.
    Node(View),
    /// A chunk of records (buffer being flushed, or pivots).
    Chunk(Vec<Vec<u8>>),
    /// The buffer is flushed; `restructured` when the tree changed shape
    /// (a leaf split), so paths must be found again.
    Flushed {
        /// Whether the tree changed shape.
        restructured: bool,
    },
    /// A path no longer leads to a leaf; descend again.
    Stale,
    /// Records with the node holding each.
    Records(Vec<(u64, Vec<u8>)>),
}

fn unexpected(r: &Response) -> Error {
    Error::Protocol(format!(
        "unexpected POPE response {}",
        match r {
            Response::Done => "Done",
            Response::Node(_) => "Node",
            Response::Chunk(_) => "Chunk",
            Response::Flushed { .. } => "Flushed",
            Response::Stale => "Stale",
            Response::Records(_) => "Records",
        }
    ))
}

// ---------------------------------------------------------------------------
// Order.

/// A point of the strict total order on (value, ciphertext): `tie` 0 is
/// below every ciphertext of the value, 2 above, 1 a ciphertext.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    value: u64,
    tie: u8,
    bytes: Vec<u8>,
}

impl Key {
    fn entry(value: u64, sealed: Vec<u8>) -> Self {
        Key {
            value,
            tie: 1,
            bytes: sealed,
        }
    }
    fn below(value: u64) -> Self {
        Key {
            value,
            tie: 0,
            bytes: Vec::new(),
        }
    }
    fn above(value: u64) -> Self {
        Key {
            value,
            tie: 2,
            bytes: Vec::new(),
        }
    }
}

// ---------------------------------------------------------------------------
// Client.

#[derive(Serialize, Deserialize)]
struct State {
    key: [u8; 32],
    bits: u32,
    l: u32,
}

impl Drop for State {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.key);
    }
}

/// The client half of POPE: the record key and `L`.
pub struct PopeClient {
    key: RecordKey,
    bits: u32,
    l: u32,
}

impl std::fmt::Debug for PopeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PopeClient")
            .field("bits", &self.bits)
            .field("l", &self.l)
            .finish_non_exhaustive()
    }
}

fn check_l(l: u64) -> Result<u32> {
    if !(2..=MAX_L as u64).contains(&l) {
        return Err(Error::InvalidArgument(format!(
            "l={l}: must be in 2..={MAX_L}"
        )));
    }
    Ok(l as u32)
}

/// Records found by a query with their nodes.
type Located = Vec<(u64, Vec<u8>, Record)>;

impl PopeClient {
    /// A client with a fresh key. Parameters: `bits` (value width, default
    /// 32) and `l` (default: the records of 54 bytes a page holds, at
    /// least 2).
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params, page: &PageConfig) -> Result<Self> {
        params.only(DESCRIPTOR.name, &["bits", "l"])?;
        let default = (page.page_size / NOMINAL_ENTRY).max(2) as u64;
        let l = check_l(params.get_or("l", default)?)?;
        Ok(PopeClient {
            key: RecordKey::generate(rng),
            bits: bits_param(params)?,
            l,
        })
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let s: State = sesame_core::wire::decode(bytes)?;
        if !(1..=64).contains(&s.bits) {
            return Err(Error::Malformed("POPE state with bad bits".into()));
        }
        Ok(PopeClient {
            key: RecordKey::from_bytes(&s.key)?,
            bits: s.bits,
            l: check_l(u64::from(s.l)).map_err(|_| Error::Malformed("POPE state l".into()))?,
        })
    }

    /// `L`: labels per node and the client's working set.
    pub fn l(&self) -> usize {
        self.l as usize
    }

    fn key_of(&self, sealed: &[u8]) -> Result<Key> {
        let (value, _) = self.key.open(AAD, sealed)?;
        Ok(Key::entry(value, sealed.to_vec()))
    }

    /// Assigns each record of `chunk` to a child by the sorted `labels`,
    /// and runs the partition rounds until the buffer is flushed; returns
    /// whether the tree was restructured.
    fn flush(
        &self,
        channel: &mut dyn Channel,
        labels: &[Key],
        mut chunk: Vec<Vec<u8>>,
    ) -> Result<bool> {
        loop {
            if chunk.is_empty() || chunk.len() > self.l() {
                return Err(Error::Protocol("bad POPE chunk size".into()));
            }
            let mut assign = Vec::with_capacity(chunk.len());
            for s in &chunk {
                let k = self.key_of(s)?;
                assign.push(labels.partition_point(|x| *x < k) as u32);
            }
            match channel::call(channel, &Request::Partition { assign })? {
                Response::Chunk(next) => chunk = next,
                Response::Flushed { restructured } => return Ok(restructured),
                other => return Err(unexpected(&other)),
            }
        }
    }

    /// Descends to the leaf of `key`, flushing buffers and splitting leaves
    /// on the way; returns the path from the root.
    fn descend(
        &self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        key: &Key,
    ) -> Result<Vec<u64>> {
        'restart: for _ in 0..MAX_RETRIES * 1024 {
            let mut path: Vec<u64> = Vec::new();
            loop {
                let view = match channel::call(
                    channel,
                    &Request::Visit {
                        path: path.clone(),
                        l: self.l,
                    },
                )? {
                    Response::Node(v) => v,
                    other => return Err(unexpected(&other)),
                };
                if path.is_empty() {
                    path.push(view.id);
                } else if path.last() != Some(&view.id) {
                    return Err(Error::Protocol("POPE visited the wrong node".into()));
                }
                if view.children.is_empty() {
                    if view.len <= u64::from(self.l) {
                        return Ok(path);
                    }
                    let pivots = match channel::call(
                        channel,
                        &Request::Pivots {
                            path: path.clone(),
                            l: self.l,
                            seed: rng.next_u64(),
                        },
                    )? {
                        Response::Chunk(p) => p,
                        other => return Err(unexpected(&other)),
                    };
                    if pivots.len() != self.l() {
                        return Err(Error::Protocol("wrong number of POPE pivots".into()));
                    }
                    let mut keyed: Vec<(Key, u32)> = pivots
                        .iter()
                        .enumerate()
                        .map(|(i, s)| Ok((self.key_of(s)?, i as u32)))
                        .collect::<Result<_>>()?;
                    keyed.sort();
                    let order = keyed.iter().map(|(_, i)| *i).collect();
                    let labels: Vec<Key> = keyed.into_iter().map(|(k, _)| k).collect();
                    let chunk = match channel::call(channel, &Request::Sort { order })? {
                        Response::Chunk(c) => c,
                        other => return Err(unexpected(&other)),
                    };
                    self.flush(channel, &labels, chunk)?;
                    continue 'restart;
                }
                if view.labels.len() + 1 != view.children.len() || view.labels.len() > self.l() {
                    return Err(Error::Protocol("malformed POPE node".into()));
                }
                let labels: Vec<Key> = view
                    .labels
                    .iter()
                    .map(|s| self.key_of(s))
                    .collect::<Result<_>>()?;
                if view.len > 0 && self.flush(channel, &labels, view.chunk)? {
                    continue 'restart;
                }
                let child = labels.partition_point(|x| x < key);
                let Some(&id) = view.children.get(child) else {
                    return Err(Error::Protocol("malformed POPE node".into()));
                };
                path.push(id);
            }
        }
        Err(Error::Protocol("POPE tree keeps changing".into()))
    }

    /// The records with values in `[lo, hi]` with their nodes, and the
    /// number of records outside the interval the server returned.
    fn locate(
        &self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        lo: u64,
        hi: u64,
    ) -> Result<(Located, u64)> {
        if lo > hi {
            return Ok((Vec::new(), 0));
        }
        let (klo, khi) = (Key::below(lo), Key::above(hi));
        let mut left = self.descend(rng, channel, &klo)?;
        let mut right = self.descend(rng, channel, &khi)?;
        for _ in 0..MAX_RETRIES {
            let request = Request::Collect {
                left: left.clone(),
                right: right.clone(),
            };
            match channel::call(channel, &request)? {
                Response::Records(items) => {
                    let mut found = Vec::new();
                    let mut discarded = 0u64;
                    for (node, sealed) in items {
                        let record = self.key.open(AAD, &sealed)?;
                        if record.0 >= lo && record.0 <= hi {
                            found.push((node, sealed, record));
                        } else {
                            discarded += 1;
                        }
                    }
                    return Ok((found, discarded));
                }
                Response::Stale => {
                    left = self.descend(rng, channel, &klo)?;
                    right = self.descend(rng, channel, &khi)?;
                }
                other => return Err(unexpected(&other)),
            }
        }
        Err(Error::Protocol("POPE tree keeps changing".into()))
    }
}

impl RangeClient for PopeClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn bits(&self) -> u32 {
        self.bits
    }

    fn insert(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        value: u64,
        data: &[u8],
    ) -> Result<()> {
        check_value(value, self.bits)?;
        let sealed = self.key.seal(rng, AAD, value, data)?;
        match channel::call(channel, &Request::Insert { sealed })? {
            Response::Done => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    fn delete(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        value: u64,
        data: &[u8],
    ) -> Result<bool> {
        check_value(value, self.bits)?;
        let (found, _) = self.locate(rng, channel, value, value)?;
        let Some((node, sealed, _)) = found.into_iter().find(|(_, _, r)| r.1 == data) else {
            return Ok(false);
        };
        match channel::call(channel, &Request::Remove { node, sealed })? {
            Response::Done => Ok(true),
            other => Err(unexpected(&other)),
        }
    }

    fn query(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        lo: u64,
        hi: u64,
    ) -> Result<RangeAnswer> {
        let (found, discarded) = self.locate(rng, channel, lo, hi)?;
        let records = found.into_iter().map(|(_, _, r)| r).collect();
        Ok(RangeAnswer::from_records(records, discarded))
    }

    fn client_storage_bytes(&self) -> u64 {
        32 + 4 + 4
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        sesame_core::wire::encode(&State {
            key: *self.key.to_bytes(),
            bits: self.bits,
            l: self.l,
        })
    }
}

// ---------------------------------------------------------------------------
// Server.

#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Meta {
    root: u64,
    next: u64,
    chunk: u32,
}

/// A stored node: labels and children (none for a leaf) and the number of
/// records in its buffer, which lives in chunks of `Meta::chunk` records
/// under separate keys.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Node {
    labels: Vec<Vec<u8>>,
    children: Vec<u64>,
    len: u64,
}

const META_KEY: &[u8] = b"m";

fn node_key(id: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(b'n');
    k.extend_from_slice(&id.to_be_bytes());
    k
}

fn chunk_key(id: u64, c: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(b'b');
    k.extend_from_slice(&id.to_be_bytes());
    k.extend_from_slice(&c.to_be_bytes());
    k
}

fn corrupt(what: &str) -> Error {
    Error::StoreCorrupt(format!("POPE {what}"))
}

fn bad(what: impl Into<String>) -> Error {
    Error::InvalidArgument(what.into())
}

/// A buffer being flushed into children (or a split leaf into buckets).
struct Session {
    path: Vec<u64>,
    /// The labels the records are partitioned by.
    labels: Vec<Vec<u8>>,
    /// Whether this splits the leaf at the end of `path`.
    split: bool,
    l: usize,
    items: Vec<Vec<u8>>,
    assign: Vec<u32>,
    /// Records sent in the last chunk.
    sent: usize,
}

/// Pivots sampled for a leaf split, waiting for their order.
struct Pending {
    path: Vec<u64>,
    l: usize,
    items: Vec<Vec<u8>>,
    pivots: Vec<usize>,
}

/// The server half of POPE: the buffer tree in the store; a flush in
/// progress is kept in memory (a restart abandons it; the tree stays
/// consistent because a flush is written in one batch at its end).
pub struct PopeServer {
    store: Arc<dyn Store>,
    meta: Meta,
    session: Option<Session>,
    pending: Option<Pending>,
}

impl std::fmt::Debug for PopeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PopeServer")
            .field("root", &self.meta.root)
            .finish_non_exhaustive()
    }
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
struct Work<'a> {
    store: &'a dyn Store,
    nodes: HashMap<u64, Node>,
    dirty: Vec<u64>,
    batch: WriteBatch,
    meta: Meta,
    original: Meta,
}

impl<'a> Work<'a> {
    fn new(store: &'a dyn Store, meta: Meta) -> Self {
        Work {
            store,
            nodes: HashMap::new(),
            dirty: Vec::new(),
            batch: WriteBatch::new(),
            meta,
            original: meta,
        }
    }

    fn node(&mut self, id: u64) -> Result<&mut Node> {
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

    fn touch(&mut self, id: u64) {
        if !self.dirty.contains(&id) {
            self.dirty.push(id);
        }
    }

    fn create(&mut self, node: Node) -> u64 {
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
    fn items(&mut self, id: u64) -> Result<Vec<Vec<u8>>> {
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

    /// Appends `items` to node `id`'s buffer.
    fn append(&mut self, id: u64, items: Vec<Vec<u8>>) -> Result<()> {
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
    fn clear(&mut self, id: u64) -> Result<()> {
        let per = u64::from(self.meta.chunk);
        let len = self.node(id)?.len;
        for c in 0..len.div_ceil(per) {
            self.batch.delete(chunk_key(id, c));
        }
        self.node(id)?.len = 0;
        self.touch(id);
        Ok(())
    }

    fn commit(mut self) -> Result<Meta> {
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
    fn valid_path(&mut self, path: &[u64]) -> Result<bool> {
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

    fn store_has(&mut self, id: u64) -> Result<bool> {
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
    fn subtree(&mut self, id: u64, out: &mut Vec<(u64, Vec<u8>)>) -> Result<()> {
        let mut stack = vec![id];
        while let Some(id) = stack.pop() {
            out.extend(self.items(id)?.into_iter().map(|s| (id, s)));
            stack.extend(self.node(id)?.children.iter().rev().copied());
        }
        Ok(())
    }

    /// Splits the internal node `path[level]` while it has more than `l`
    /// labels, then its ancestors.
    fn rebalance(&mut self, path: &mut Vec<u64>, mut level: usize, l: usize) -> Result<()> {
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
        Ok(PopeServer {
            store,
            meta,
            session: None,
            pending: None,
        })
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

    fn next_chunk(s: &mut Session) -> Vec<Vec<u8>> {
        let start = s.assign.len();
        let end = (start + s.l).min(s.items.len());
        s.sent = end - start;
        s.items
            .get(start..end)
            .map(<[_]>::to_vec)
            .unwrap_or_default()
    }

    fn visit(&mut self, path: Vec<u64>, l: u32) -> Result<Response> {
        let l = Self::l_of(l)?;
        self.session = None;
        self.pending = None;
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
        let mut view = View {
            id,
            labels: node.labels.clone(),
            children: node.children.clone(),
            len: node.len,
            chunk: Vec::new(),
        };
        if !node.children.is_empty() && node.len > 0 {
            let items = w.items(id)?;
            let mut s = Session {
                path,
                labels: node.labels,
                split: false,
                l,
                items,
                assign: Vec::new(),
                sent: 0,
            };
            view.chunk = Self::next_chunk(&mut s);
            self.session = Some(s);
        }
        Ok(Response::Node(view))
    }

    fn pivots(&mut self, path: Vec<u64>, l: u32, seed: u64) -> Result<Response> {
        let l = Self::l_of(l)?;
        self.session = None;
        self.pending = None;
        let mut w = self.work();
        if !w.valid_path(&path)? {
            return Err(bad("invalid POPE path"));
        }
        let id = *path.last().ok_or_else(|| bad("empty path"))?;
        for &p in &path[..path.len() - 1] {
            if w.node(p)?.len != 0 {
                return Err(bad("a node above the leaf has an unflushed buffer"));
            }
        }
        let node = w.node(id)?;
        if !node.children.is_empty() || node.len <= l as u64 {
            return Err(bad("pivots of a node that is not a full leaf"));
        }
        let items = w.items(id)?;
        // Partial Fisher-Yates: l distinct indices.
        let mut idx: Vec<usize> = (0..items.len()).collect();
        let mut state = seed;
        for i in 0..l {
            let span = (idx.len() - i) as u64;
            let j = i + sesame_crypto::prg::below_with(span, || mix(&mut state)) as usize;
            idx.swap(i, j);
        }
        idx.truncate(l);
        let out = idx.iter().filter_map(|&i| items.get(i).cloned()).collect();
        self.pending = Some(Pending {
            path,
            l,
            items,
            pivots: idx,
        });
        Ok(Response::Chunk(out))
    }

    fn sort(&mut self, order: Vec<u32>) -> Result<Response> {
        let p = self
            .pending
            .take()
            .ok_or_else(|| bad("no pivots to sort"))?;
        let mut seen = vec![false; p.l];
        let mut labels = Vec::with_capacity(p.l);
        if order.len() != p.l {
            return Err(bad("the order is not a permutation of the pivots"));
        }
        for &o in &order {
            let o = o as usize;
            match seen.get_mut(o) {
                Some(s) if !*s => *s = true,
                _ => return Err(bad("the order is not a permutation of the pivots")),
            }
            let item = p
                .pivots
                .get(o)
                .and_then(|&i| p.items.get(i))
                .ok_or_else(|| bad("pivot"))?;
            labels.push(item.clone());
        }
        let mut s = Session {
            path: p.path,
            labels,
            split: true,
            l: p.l,
            items: p.items,
            assign: Vec::new(),
            sent: 0,
        };
        let chunk = Self::next_chunk(&mut s);
        self.session = Some(s);
        Ok(Response::Chunk(chunk))
    }

    fn partition(&mut self, assign: Vec<u32>) -> Result<Response> {
        let mut s = self
            .session
            .take()
            .ok_or_else(|| bad("no buffer is being flushed"))?;
        let children = s.labels.len() as u32 + 1;
        if assign.len() != s.sent || assign.iter().any(|&a| a >= children) {
            return Err(bad("the assignment does not fit the chunk"));
        }
        s.assign.extend(assign);
        if s.assign.len() < s.items.len() {
            let chunk = Self::next_chunk(&mut s);
            self.session = Some(s);
            return Ok(Response::Chunk(chunk));
        }
        let restructured = s.split;
        self.apply(s)?;
        Ok(Response::Flushed { restructured })
    }

    /// Moves a flushed buffer's records to where the client assigned them.
    fn apply(&mut self, s: Session) -> Result<()> {
        let mut w = self.work();
        if !w.valid_path(&s.path)? {
            return Err(bad("the tree changed during a flush"));
        }
        let id = *s.path.last().ok_or_else(|| bad("empty path"))?;
        let mut buckets: Vec<Vec<Vec<u8>>> = vec![Vec::new(); s.labels.len() + 1];
        for (item, &a) in s.items.into_iter().zip(&s.assign) {
            if let Some(b) = buckets.get_mut(a as usize) {
                b.push(item);
            }
        }
        if !s.split {
            let children = w.node(id)?.children.clone();
            if children.len() != buckets.len() {
                return Err(bad("the node changed during a flush"));
            }
            w.clear(id)?;
            for (child, bucket) in children.into_iter().zip(buckets) {
                w.append(child, bucket)?;
            }
            self.meta = w.commit()?;
            return Ok(());
        }
        // Leaf split: one new leaf per non-empty bucket; bucket i holds the
        // records in (label i - 1, label i].
        let kept: Vec<usize> = (0..buckets.len())
            .filter(|&i| !buckets[i].is_empty())
            .collect();
        let mut labels = Vec::new();
        for &i in kept.iter().take(kept.len().saturating_sub(1)) {
            labels.push(s.labels.get(i).cloned().ok_or_else(|| corrupt("labels"))?);
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
        let mut path = s.path;
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
        w.rebalance(&mut path, level, s.l)?;
        self.meta = w.commit()?;
        Ok(())
    }

    fn collect(&mut self, left: Vec<u64>, right: Vec<u64>) -> Result<Response> {
        self.session = None;
        self.pending = None;
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
        self.session = None;
        self.pending = None;
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
        self.session = None;
        self.pending = None;
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
            Request::Partition { assign } => self.partition(assign),
            Request::Pivots { path, l, seed } => self.pivots(path, l, seed),
            Request::Sort { order } => self.sort(order),
            Request::Collect { left, right } => self.collect(left, right),
            Request::Remove { node, sealed } => self.remove(node, sealed),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}
