//! Range queries with a B+ tree over ORE ciphertexts (seed 004, section
//! 4.1), one protocol per scheme of `sesame-ore`, and the plaintext "no
//! encryption" baseline.
//!
//! The server keeps a B+ tree ([`crate::btree`]) whose keys are ORE
//! ciphertexts and whose values are records sealed by the client
//! ([`RecordKey`]); each node is one page of the store, and the node
//! capacities follow from the page size and the scheme's ciphertext size
//! ([`capacity`]), so the fan-out shrinks as ciphertexts grow. The server
//! runs the scheme's public comparison (it holds no key):
//! - for Lewi-Wu and CLOZ only the semantically secure right halves are
//!   stored; insertions navigate with the left half of the new ciphertext
//!   and queries send left halves only;
//! - for BCLO, CLWW and the baseline the server compares whole
//!   ciphertexts;
//! - FH-OPE's ciphertexts are order-preserving integers, so the server
//!   compares them as integers; the client turns a query into ciphertext
//!   bounds with its state (see `docs/schemes/bplus_ore.md`) and forwards
//!   the re-encodings of its rebalances.
//!
//! Messages: an insertion is one round (ciphertext and sealed record); a
//! query is one round (two query ciphertexts; the sealed records come
//! back); a deletion is two rounds (a query for `[v, v]`, then a delete
//! naming the sealed record that opens to the pair), one for the baseline.

use std::cmp::Ordering;
use std::marker::PhantomData;
use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    channel, wire, BackwardPrivacy, Channel, Error, Handler, IoCounts, Params, QueryKind, Result,
    SchemeDescriptor, SchemeKind, Store, Typed,
};
use sesame_ore::bclo::{Bclo, BcloCiphertext, BcloComparator, BcloParams};
use sesame_ore::cloz::{Cloz, ClozComparator, PairingPph, Pph};
use sesame_ore::clww::{Clww, ClwwCiphertext, ClwwComparator};
use sesame_ore::fh_ope::{FhOpe, FhOpeParams};
use sesame_ore::insecure::CorrectnessOnlyPph;
use sesame_ore::lewi_wu::{LewiWu, LewiWuCiphertext, LewiWuComparator, LewiWuLeft, LewiWuParams};
use sesame_ore::plain::{PlainCiphertext, PlainComparator};
use sesame_ore::{Comparator, LeftRight, OreScheme};
use zeroize::Zeroizing;

use crate::api::{bits_param, check_value, split_page, RangeAnswer, RangeClient, RangeProtocol};
use crate::btree::{BTree, Capacity, Node, NodeId, NodeStore};
use crate::paged::PageConfig;
use crate::record::RecordKey;

const DOC: &str = "docs/schemes/bplus_ore.md";

const CITATION: &str = "D. Bogatov, G. Kollios, L. Reyzin. A Comparative Evaluation of \
                        Order-Revealing Encryption Schemes and Secure Range-Query Protocols. \
                        VLDB 2019, section 4.1; B+ tree: D. Comer, The Ubiquitous B-Tree, 1979; \
                        deletion: J. Jannink, SIGMOD Record 1995";

const fn descriptor(
    name: &'static str,
    title: &'static str,
    leakage: &'static str,
) -> SchemeDescriptor {
    SchemeDescriptor {
        name,
        title,
        citation: CITATION,
        kind: SchemeKind::Range,
        forward_private: false,
        backward_privacy: BackwardPrivacy::None,
        queries: &[QueryKind::Range],
        leakage,
        doc: DOC,
    }
}

/// The "no encryption" baseline: INSECURE, plaintext values and records.
pub static PLAIN: SchemeDescriptor = descriptor(
    "bplus-plain",
    "B+ tree without encryption (INSECURE baseline)",
    "INSECURE baseline: the server sees every value and record in the clear, and every query.",
);

/// B+ tree over BCLO.
pub static BCLO: SchemeDescriptor = descriptor(
    "bplus-bclo",
    "B+ tree over BCLO order-preserving encryption",
    "BCLO's leakage (order, equality, and about the upper half of the plaintext bits) of every \
     stored value and query endpoint, the tree shape (which depends on insertion order), the \
     access pattern (visited nodes, returned sealed records) and result sizes.",
);

/// B+ tree over CLWW.
pub static CLWW: SchemeDescriptor = descriptor(
    "bplus-clww",
    "B+ tree over CLWW order-revealing encryption",
    "CLWW's leakage (order, equality and the position of the most significant differing bit) \
     among stored values and query endpoints, the tree shape (insertion order), the access \
     pattern and result sizes.",
);

/// B+ tree over Lewi-Wu, storing right ciphertexts only.
pub static LEWI_WU: SchemeDescriptor = descriptor(
    "bplus-lewi-wu",
    "B+ tree over Lewi-Wu ORE (right ciphertexts stored)",
    "A snapshot of the stored tree (semantically secure right ciphertexts only) reveals its \
     shape (insertion order) and size. Insertions send the full ciphertext and queries send \
     left ciphertexts: a server that keeps them learns, over time, the total order of all \
     inserted values and query endpoints, the index of the first differing d-bit block of \
     every pair, and (left ciphertexts are deterministic) the equality and frequency of \
     inserted values at upload; plus the access pattern and result sizes.",
);

/// B+ tree over CLOZ with the pairing PPH, storing right ciphertexts only.
pub static CLOZ: SchemeDescriptor = descriptor(
    "bplus-cloz",
    "B+ tree over CLOZ ORE, pairing PPH (right ciphertexts stored; ~1.5 s per comparison)",
    "A snapshot of the stored tree (right ciphertexts only) reveals its shape (insertion \
     order) and size. Insertions send the full ciphertext and queries send left halves: a \
     server that keeps them learns, over time, CLOZ's leakage on all inserted values and \
     query endpoints (total order, equality, and the equality pattern of the most \
     significant differing bits); plus the access pattern and result sizes.",
);

/// B+ tree over CLOZ with the correctness-only PPH: INSECURE, benchmarks only.
pub static CLOZ_INSECURE: SchemeDescriptor = descriptor(
    "bplus-cloz-insecure",
    "B+ tree over CLOZ with seed 004's correctness-only PPH (INSECURE, benchmarks only)",
    "INSECURE: the stored hashes are CLWW values in the clear (shuffled); for measuring I/O, \
     sizes and counts with CLOZ-sized ciphertexts only.",
);

/// B+ tree over FH-OPE.
pub static FH_OPE: SchemeDescriptor = descriptor(
    "bplus-fh-ope",
    "B+ tree over frequency-hiding OPE (stateful client)",
    "The total order of the stored ciphertexts (ties among equal values broken at random: not \
     equality or frequency) and the insertion order, which shapes the client's FH-OPE tree and \
     the B+ tree; a rebalance re-encodes every stored ciphertext. Queries reveal the ciphertext \
     interval they cover; the access pattern and result sizes.",
);

// ---------------------------------------------------------------------
// Layout and fan-out.

/// The scheme parameters a server needs: sent with every request, fixed
/// by the first one and checked against it afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// Value width in bits.
    pub bits: u32,
    /// The scheme's second parameter: BCLO's ciphertext width, Lewi-Wu's
    /// block width, FH-OPE's ciphertext width; 0 for the others.
    pub extra: u32,
    /// Payload bytes per record that leaves are sized for.
    pub payload: u32,
}

impl Layout {
    fn check(&self) -> Result<()> {
        if !(1..=64).contains(&self.bits) || self.extra > 128 || self.payload > 1 << 20 {
            return Err(Error::Protocol(format!(
                "impossible B+ tree layout {self:?}"
            )));
        }
        Ok(())
    }
}

/// Bytes of a postcard varint of a `bits`-bit number, at most.
const fn varint_bytes(bits: u32) -> usize {
    if bits == 0 {
        1
    } else {
        bits.div_ceil(7) as usize
    }
}

/// Bytes of a postcard length prefix for `len`.
fn len_prefix(len: usize) -> usize {
    varint_bytes(usize::BITS - len.leading_zeros())
}

/// Bound on a node's bytes beyond its entries: kind tag, vector lengths,
/// the next-leaf pointer, the wire version.
pub const NODE_HEADER_BYTES: usize = 16;

/// Bytes a child pointer takes in a page (node ids below 2^35).
pub const CHILD_BYTES: usize = 5;

/// Node capacities for pages of `page_size` bytes, keys of at most
/// `key_bytes` bytes and leaf values of at most `value_bytes` bytes:
/// `leaf = (page - 16) / (key + value)` and
/// `internal = (page - 16 - 5) / (key + 5)`, at least 2 each (a key larger
/// than a page gives nodes of several pages).
pub fn capacity(page_size: usize, key_bytes: usize, value_bytes: usize) -> Result<Capacity> {
    let room = page_size.saturating_sub(NODE_HEADER_BYTES);
    let leaf = room / (key_bytes + value_bytes).max(1);
    let internal = room.saturating_sub(CHILD_BYTES) / (key_bytes + CHILD_BYTES);
    Capacity::new(leaf.max(2), internal.max(2))
}

// ---------------------------------------------------------------------
// Server-side comparison.

/// A scheme's public comparison as the tree runs it: the scheme's
/// [`Comparator`] (from `sesame-ore`, keyless), built for a layout. An
/// insertion sends a [`Comparator::Ciphertext`], the tree stores its
/// [`Comparator::right`] part, and a query sends [`Comparator::Left`]
/// endpoints.
pub trait ServerOrder: Comparator + Sized {
    /// The comparison for `layout`.
    fn new(layout: &Layout) -> Result<Self>;

    /// Bound on the encoded size of a stored key.
    fn key_bytes(layout: &Layout) -> usize;

    /// Applies a re-encoding (sorted `(old, new)` pairs) to a stored key;
    /// only FH-OPE has re-encodings.
    fn remap(_stored: &mut Self::Right, _changes: &[(u64, u64)]) -> Result<()> {
        Err(Error::Protocol("this scheme has no re-encoding".into()))
    }
}

impl ServerOrder for PlainComparator {
    fn new(_layout: &Layout) -> Result<Self> {
        Ok(PlainComparator)
    }
    fn key_bytes(layout: &Layout) -> usize {
        varint_bytes(layout.bits)
    }
}

impl ServerOrder for BcloComparator {
    fn new(_layout: &Layout) -> Result<Self> {
        Ok(BcloComparator)
    }
    fn key_bytes(layout: &Layout) -> usize {
        varint_bytes(layout.extra)
    }
}

impl ServerOrder for ClwwComparator {
    fn new(layout: &Layout) -> Result<Self> {
        ClwwComparator::new(layout.bits)
    }
    fn key_bytes(layout: &Layout) -> usize {
        varint_bytes(2 * layout.bits)
    }
}

impl ServerOrder for LewiWuComparator {
    fn new(layout: &Layout) -> Result<Self> {
        LewiWuComparator::new(LewiWuParams {
            bits: layout.bits,
            block_bits: layout.extra,
        })
    }
    fn key_bytes(layout: &Layout) -> usize {
        let block = layout.extra.clamp(1, 16);
        let slots = 1usize << block;
        let trits = (layout.bits.div_ceil(block) as usize * slots).div_ceil(4);
        16 + len_prefix(trits) + trits
    }
}

/// A CLOZ hash function with the encoded size of its right hashes.
pub trait ClozHash: Pph + 'static {
    /// Bound on the encoded size of one right hash.
    const RIGHT_BYTES: usize;
}

impl ClozHash for PairingPph {
    /// Four compressed G2 points, each with a length byte.
    const RIGHT_BYTES: usize = 4 * 97;
}

impl ClozHash for CorrectnessOnlyPph {
    /// A `u128` varint.
    const RIGHT_BYTES: usize = 19;
}

impl<P: ClozHash> ServerOrder for ClozComparator<P> {
    fn new(layout: &Layout) -> Result<Self> {
        ClozComparator::new(layout.bits)
    }
    fn key_bytes(layout: &Layout) -> usize {
        let n = layout.bits as usize;
        len_prefix(n) + n * P::RIGHT_BYTES
    }
}

/// An FH-OPE number as the tree stores it. The client sends every
/// re-encoding to the server, which rewrites everything it stores, so the
/// epoch that [`sesame_ore::fh_ope::FhOpeCiphertext`] carries is not
/// needed here (and is not sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FhOpeNumber(pub u64);

/// FH-OPE: ciphertexts are order-preserving integers (unique per
/// insertion); query bounds come from the client's state.
#[derive(Clone, Copy, Debug, Default)]
pub struct FhOpeOrder;

impl Comparator for FhOpeOrder {
    type Ciphertext = FhOpeNumber;
    type Left = FhOpeNumber;
    type Right = FhOpeNumber;

    fn left(c: &FhOpeNumber) -> &FhOpeNumber {
        c
    }
    fn right(c: &FhOpeNumber) -> FhOpeNumber {
        *c
    }
    fn compare(&self, left: &FhOpeNumber, right: &FhOpeNumber) -> Result<Ordering> {
        Ok(left.0.cmp(&right.0))
    }
}

impl ServerOrder for FhOpeOrder {
    fn new(_layout: &Layout) -> Result<Self> {
        Ok(FhOpeOrder)
    }
    fn key_bytes(layout: &Layout) -> usize {
        varint_bytes(layout.extra)
    }
    fn remap(stored: &mut FhOpeNumber, changes: &[(u64, u64)]) -> Result<()> {
        if let Ok(i) = changes.binary_search_by_key(&stored.0, |c| c.0) {
            if let Some(&(_, new)) = changes.get(i) {
                stored.0 = new;
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------
// Messages.

/// A request of the B+ tree protocols.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request<F, P> {
    /// Inserts a ciphertext with its sealed record.
    Insert {
        /// Scheme parameters.
        layout: Layout,
        /// The value's ciphertext.
        ciphertext: F,
        /// The sealed record.
        record: Vec<u8>,
    },
    /// Returns the sealed records whose keys lie in `[lo, hi]`.
    Query {
        /// Scheme parameters.
        layout: Layout,
        /// Lower endpoint.
        lo: P,
        /// Upper endpoint.
        hi: P,
    },
    /// Deletes one entry in `[lo, hi]` whose sealed record is `record`.
    Delete {
        /// Scheme parameters.
        layout: Layout,
        /// Lower endpoint.
        lo: P,
        /// Upper endpoint.
        hi: P,
        /// The sealed record, byte for byte.
        record: Vec<u8>,
    },
    /// Replaces stored ciphertexts after an FH-OPE rebalance.
    Reencode {
        /// Scheme parameters.
        layout: Layout,
        /// `(old, new)` ciphertexts, sorted by `old`.
        changes: Vec<(u64, u64)>,
    },
}

/// A response of the B+ tree protocols.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The insertion or re-encoding is done.
    Done,
    /// The sealed records of a query, in key order.
    Records(Vec<Vec<u8>>),
    /// Whether a deletion found its entry.
    Deleted(bool),
}

// ---------------------------------------------------------------------
// Server.

/// Largest sealed record a server accepts.
pub const MAX_RECORD: usize = 1 << 20;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Meta {
    layout: Option<Layout>,
    root: Option<NodeId>,
    next: NodeId,
}

const META_KEY: &[u8] = b"m";

fn node_key(id: NodeId) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = b'n';
    k[1..].copy_from_slice(&id.to_be_bytes());
    k
}

/// Tree nodes as values of a store (one page each when the capacities
/// come from [`capacity`]), with the root and the id counter under a meta
/// key written once per request that changed them.
pub struct PageNodes<K> {
    store: Arc<dyn Store>,
    meta: Meta,
    dirty: bool,
    _keys: PhantomData<fn() -> K>,
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

struct Ready<O> {
    layout: Layout,
    order: O,
    capacity: Capacity,
    key_bytes: usize,
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
fn record_bytes(sealed: bool, payload: usize) -> usize {
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
        // are 16 bytes shorter, which only leaves room).
        let payload = layout.payload as usize;
        let value_bytes = record_bytes(true, payload) + len_prefix(record_bytes(true, payload));
        let capacity = capacity(self.page.page_size, key_bytes, value_bytes)?;
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

    /// The node capacities, once the first request fixed the layout.
    pub fn capacity(&self) -> Option<Capacity> {
        self.ready.as_ref().map(|r| r.capacity)
    }

    fn insert(&mut self, layout: Layout, full: O::Ciphertext, record: Vec<u8>) -> Result<Response> {
        self.prepare(layout)?;
        let Some(ready) = &self.ready else {
            return Err(Error::Protocol("B+ tree server not ready".into()));
        };
        if record.len() > MAX_RECORD {
            return Err(Error::Protocol("record too large".into()));
        }
        let stored = O::right(&full);
        if wire::encode(&stored)?.len() > ready.key_bytes + 1 {
            return Err(Error::Protocol(
                "ciphertext larger than the scheme's parameters allow".into(),
            ));
        }
        let order = &ready.order;
        let mut tree = BTree::new(&mut self.nodes, ready.capacity);
        tree.insert(stored, record, |k| order.compare(O::left(&full), k))?;
        Ok(Response::Done)
    }

    fn query(&mut self, layout: Layout, lo: O::Left, hi: O::Left) -> Result<Response> {
        self.prepare(layout)?;
        let Some(ready) = &self.ready else {
            return Err(Error::Protocol("B+ tree server not ready".into()));
        };
        let order = &ready.order;
        let mut tree = BTree::new(&mut self.nodes, ready.capacity);
        let mut out = Vec::new();
        tree.scan(
            |k| order.compare(&lo, k),
            |k| order.compare(&hi, k),
            |_, v| {
                out.push(v.clone());
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
        self.prepare(layout)?;
        let Some(ready) = &self.ready else {
            return Err(Error::Protocol("B+ tree server not ready".into()));
        };
        let order = &ready.order;
        let mut tree = BTree::new(&mut self.nodes, ready.capacity);
        let found = tree.delete(
            |k| order.compare(&lo, k),
            |k| order.compare(&hi, k),
            |_, v| Ok(*v == record),
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

impl<O: ServerOrder> Handler for BplusServer<O> {
    type Request = Request<O::Ciphertext, O::Left>;
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

// ---------------------------------------------------------------------
// Client.

type FullOf<C> = <<C as ClientOrder>::Server as Comparator>::Ciphertext;
type ProbeOf<C> = <<C as ClientOrder>::Server as Comparator>::Left;

/// A scheme's client side: keys (and state) and how values become
/// ciphertexts and query endpoints.
pub trait ClientOrder: Send + Sized + 'static {
    /// The server's comparison.
    type Server: ServerOrder;

    /// The protocol's descriptor.
    fn descriptor() -> &'static SchemeDescriptor;

    /// Whether records are sealed (all but the baseline).
    fn sealed() -> bool {
        true
    }

    /// Names of the scheme's own parameters (besides `bits`, `payload`).
    fn param_names() -> &'static [&'static str] {
        &[]
    }

    /// Fresh keys for `bits`-bit values; returns the scheme and
    /// [`Layout::extra`].
    fn generate(rng: &mut dyn CryptoRngCore, params: &Params, bits: u32) -> Result<(Self, u32)>;

    /// Keys and state saved by [`ClientOrder::save`].
    fn restore(bytes: &[u8]) -> Result<Self>;

    /// Keys and state.
    fn save(&self) -> Result<Zeroizing<Vec<u8>>>;

    /// Bytes of the scheme's key (32 unless it has none).
    fn key_bytes() -> u64 {
        32
    }

    /// Bits of state beyond the keys.
    fn state_bits(&self) -> u64 {
        0
    }

    /// The ciphertext an insertion of `v` sends.
    fn encrypt(&mut self, rng: &mut dyn CryptoRngCore, v: u64) -> Result<FullOf<Self>>;

    /// Query ciphertexts for `[lo, hi]` (`lo <= hi`); `None` when the
    /// scheme knows the range is empty.
    fn probes(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        lo: u64,
        hi: u64,
    ) -> Result<Option<(ProbeOf<Self>, ProbeOf<Self>)>>;

    /// The re-encoding the server must apply before the next request.
    fn take_reencoding(&mut self) -> Option<Vec<(u64, u64)>> {
        None
    }
}

/// The baseline: values in the clear.
#[derive(Debug)]
pub struct PlainClient;

impl ClientOrder for PlainClient {
    type Server = PlainComparator;

    fn descriptor() -> &'static SchemeDescriptor {
        &PLAIN
    }
    fn sealed() -> bool {
        false
    }
    fn key_bytes() -> u64 {
        0
    }
    fn generate(_rng: &mut dyn CryptoRngCore, _params: &Params, _bits: u32) -> Result<(Self, u32)> {
        Ok((PlainClient, 0))
    }
    fn restore(bytes: &[u8]) -> Result<Self> {
        if !bytes.is_empty() {
            return Err(Error::Malformed("plain B+ tree state is empty".into()));
        }
        Ok(PlainClient)
    }
    fn save(&self) -> Result<Zeroizing<Vec<u8>>> {
        Ok(Zeroizing::new(Vec::new()))
    }
    fn encrypt(&mut self, _rng: &mut dyn CryptoRngCore, v: u64) -> Result<PlainCiphertext> {
        Ok(PlainCiphertext(v))
    }
    fn probes(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        lo: u64,
        hi: u64,
    ) -> Result<Option<(PlainCiphertext, PlainCiphertext)>> {
        Ok(Some((PlainCiphertext(lo), PlainCiphertext(hi))))
    }
}

impl ClientOrder for Bclo {
    type Server = BcloComparator;

    fn descriptor() -> &'static SchemeDescriptor {
        &BCLO
    }
    fn param_names() -> &'static [&'static str] {
        &["range"]
    }
    fn generate(rng: &mut dyn CryptoRngCore, params: &Params, bits: u32) -> Result<(Self, u32)> {
        let range_bits = params.get_or("range", 48u32.max(bits))?;
        let scheme = Bclo::generate(rng, BcloParams { bits, range_bits })?;
        Ok((scheme, range_bits))
    }
    fn restore(bytes: &[u8]) -> Result<Self> {
        <Bclo as OreScheme>::restore(bytes)
    }
    fn save(&self) -> Result<Zeroizing<Vec<u8>>> {
        OreScheme::save(self)
    }
    fn encrypt(&mut self, rng: &mut dyn CryptoRngCore, v: u64) -> Result<BcloCiphertext> {
        OreScheme::encrypt(self, rng, v)
    }
    fn probes(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        lo: u64,
        hi: u64,
    ) -> Result<Option<(BcloCiphertext, BcloCiphertext)>> {
        Ok(Some((
            OreScheme::encrypt(self, rng, lo)?,
            OreScheme::encrypt(self, rng, hi)?,
        )))
    }
}

impl ClientOrder for Clww {
    type Server = ClwwComparator;

    fn descriptor() -> &'static SchemeDescriptor {
        &CLWW
    }
    fn generate(rng: &mut dyn CryptoRngCore, _params: &Params, bits: u32) -> Result<(Self, u32)> {
        Ok((Clww::generate(rng, bits)?, 0))
    }
    fn restore(bytes: &[u8]) -> Result<Self> {
        <Clww as OreScheme>::restore(bytes)
    }
    fn save(&self) -> Result<Zeroizing<Vec<u8>>> {
        OreScheme::save(self)
    }
    fn encrypt(&mut self, _rng: &mut dyn CryptoRngCore, v: u64) -> Result<ClwwCiphertext> {
        self.encrypt_u64(v)
    }
    fn probes(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        lo: u64,
        hi: u64,
    ) -> Result<Option<(ClwwCiphertext, ClwwCiphertext)>> {
        Ok(Some((self.encrypt_u64(lo)?, self.encrypt_u64(hi)?)))
    }
}

impl ClientOrder for LewiWu {
    type Server = LewiWuComparator;

    fn descriptor() -> &'static SchemeDescriptor {
        &LEWI_WU
    }
    fn param_names() -> &'static [&'static str] {
        &["block"]
    }
    fn generate(rng: &mut dyn CryptoRngCore, params: &Params, bits: u32) -> Result<(Self, u32)> {
        let block_bits = params.get_or("block", 2u32)?;
        Ok((
            LewiWu::generate(rng, LewiWuParams { bits, block_bits })?,
            block_bits,
        ))
    }
    fn restore(bytes: &[u8]) -> Result<Self> {
        <LewiWu as OreScheme>::restore(bytes)
    }
    fn save(&self) -> Result<Zeroizing<Vec<u8>>> {
        OreScheme::save(self)
    }
    fn encrypt(&mut self, rng: &mut dyn CryptoRngCore, v: u64) -> Result<LewiWuCiphertext> {
        OreScheme::encrypt(self, rng, v)
    }
    fn probes(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        lo: u64,
        hi: u64,
    ) -> Result<Option<(LewiWuLeft, LewiWuLeft)>> {
        Ok(Some((
            self.encrypt_left_only(lo)?,
            self.encrypt_left_only(hi)?,
        )))
    }
}

/// CLOZ protocol descriptors by hash function.
pub trait ClozProtocol: ClozHash {
    /// The protocol's descriptor.
    fn protocol_descriptor() -> &'static SchemeDescriptor;
}

impl ClozProtocol for PairingPph {
    fn protocol_descriptor() -> &'static SchemeDescriptor {
        &CLOZ
    }
}

impl ClozProtocol for CorrectnessOnlyPph {
    fn protocol_descriptor() -> &'static SchemeDescriptor {
        &CLOZ_INSECURE
    }
}

impl<P: ClozProtocol> ClientOrder for Cloz<P> {
    type Server = ClozComparator<P>;

    fn descriptor() -> &'static SchemeDescriptor {
        P::protocol_descriptor()
    }
    fn generate(rng: &mut dyn CryptoRngCore, _params: &Params, bits: u32) -> Result<(Self, u32)> {
        Ok((Cloz::generate(rng, bits)?, 0))
    }
    fn restore(bytes: &[u8]) -> Result<Self> {
        <Cloz<P> as OreScheme>::restore(bytes)
    }
    fn save(&self) -> Result<Zeroizing<Vec<u8>>> {
        OreScheme::save(self)
    }
    fn encrypt(&mut self, rng: &mut dyn CryptoRngCore, v: u64) -> Result<FullOf<Self>> {
        OreScheme::encrypt(self, rng, v)
    }
    fn probes(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        lo: u64,
        hi: u64,
    ) -> Result<Option<(ProbeOf<Self>, ProbeOf<Self>)>> {
        Ok(Some((
            LeftRight::encrypt_left(self, rng, lo)?,
            LeftRight::encrypt_left(self, rng, hi)?,
        )))
    }
}

/// Where a query endpoint falls among FH-OPE ciphertexts: the extreme
/// ciphertext of the value if it was encrypted, else the ciphertext a new
/// encryption would get (computed on a copy of the state, and strictly
/// between those of the smaller and the larger values). `None` when the
/// copy had to rebalance.
fn fh_bound(
    scheme: &FhOpe,
    scratch: &mut Option<FhOpe>,
    rng: &mut dyn CryptoRngCore,
    x: u64,
    lower: bool,
) -> Result<Option<u64>> {
    if let Some((min, max)) = scheme.ciphertext_range(x) {
        return Ok(Some(if lower { min } else { max }));
    }
    let copy = scratch.get_or_insert_with(|| {
        let mut copy = scheme.clone();
        // A re-encoding pending on the original is not the copy's.
        let _ = copy.take_reencoding();
        copy
    });
    let c = copy.encrypt_u64(rng, x)?;
    if copy.take_reencoding().is_some() {
        return Ok(None);
    }
    Ok(Some(c))
}

impl ClientOrder for FhOpe {
    type Server = FhOpeOrder;

    fn descriptor() -> &'static SchemeDescriptor {
        &FH_OPE
    }
    fn param_names() -> &'static [&'static str] {
        &["cipher_bits"]
    }
    fn key_bytes() -> u64 {
        0
    }
    fn generate(_rng: &mut dyn CryptoRngCore, params: &Params, bits: u32) -> Result<(Self, u32)> {
        let cipher_bits = params.get_or("cipher_bits", 64u32)?;
        Ok((FhOpe::new(FhOpeParams { bits, cipher_bits })?, cipher_bits))
    }
    fn restore(bytes: &[u8]) -> Result<Self> {
        <FhOpe as OreScheme>::restore(bytes)
    }
    fn save(&self) -> Result<Zeroizing<Vec<u8>>> {
        OreScheme::save(self)
    }
    fn state_bits(&self) -> u64 {
        OreScheme::state_bits(self)
    }
    fn encrypt(&mut self, rng: &mut dyn CryptoRngCore, v: u64) -> Result<FhOpeNumber> {
        self.encrypt_u64(rng, v).map(FhOpeNumber)
    }
    fn probes(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        lo: u64,
        hi: u64,
    ) -> Result<Option<(FhOpeNumber, FhOpeNumber)>> {
        if self.is_empty() {
            return Ok(None);
        }
        for _ in 0..2 {
            let mut scratch = None;
            let a = fh_bound(self, &mut scratch, rng, lo, true)?;
            let b = fh_bound(self, &mut scratch, rng, hi, false)?;
            if let (Some(a), Some(b)) = (a, b) {
                if a > b {
                    // `lo == hi`, never encrypted: nothing lies between.
                    return Ok(None);
                }
                return Ok(Some((FhOpeNumber(a), FhOpeNumber(b))));
            }
            // The copy ran out of room: rebalance for real (the server
            // receives the re-encoding first) and try again.
            self.rebalance()?;
        }
        Err(Error::Unsupported(
            "FH-OPE ciphertext range exhausted even after rebalancing".into(),
        ))
    }
    fn take_reencoding(&mut self) -> Option<Vec<(u64, u64)>> {
        FhOpe::take_reencoding(self).map(|r| r.changes)
    }
}

#[derive(Serialize, Deserialize)]
struct SavedClient {
    protocol: String,
    bits: u32,
    extra: u32,
    payload: u32,
    record_key: [u8; 32],
    scheme: Vec<u8>,
}

impl Drop for SavedClient {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.record_key);
        zeroize::Zeroize::zeroize(&mut self.scheme);
    }
}

/// The client half of a B+ tree protocol.
pub struct BplusClient<C: ClientOrder> {
    scheme: C,
    record_key: RecordKey,
    layout: Layout,
}

impl<C: ClientOrder> std::fmt::Debug for BplusClient<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BplusClient")
            .field("protocol", &C::descriptor().name)
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

impl<C: ClientOrder> BplusClient<C> {
    /// A client with fresh keys. Parameters: `bits` (value width, default
    /// 32), `payload` (record bytes leaves are sized for, default 16) and
    /// the scheme's own (see [`protocols`]).
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        let mut known = vec!["bits", "payload"];
        known.extend_from_slice(C::param_names());
        params.only(C::descriptor().name, &known)?;
        let bits = bits_param(params)?;
        let payload: u32 = params.get_or("payload", 16)?;
        let (scheme, extra) = C::generate(rng, params, bits)?;
        let layout = Layout {
            bits,
            extra,
            payload,
        };
        layout
            .check()
            .map_err(|_| Error::InvalidArgument(format!("invalid parameters {layout:?}")))?;
        Ok(BplusClient {
            scheme,
            record_key: RecordKey::generate(rng),
            layout,
        })
    }

    /// A client from [`RangeClient::save_state`]'s bytes.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let saved: SavedClient = wire::decode(bytes)?;
        if saved.protocol != C::descriptor().name {
            return Err(Error::Malformed(format!(
                "state of {}, not {}",
                saved.protocol,
                C::descriptor().name
            )));
        }
        let layout = Layout {
            bits: saved.bits,
            extra: saved.extra,
            payload: saved.payload,
        };
        layout
            .check()
            .map_err(|_| Error::Malformed("impossible saved layout".into()))?;
        Ok(BplusClient {
            scheme: C::restore(&saved.scheme)?,
            record_key: RecordKey::from_bytes(&saved.record_key)?,
            layout,
        })
    }

    fn aad() -> &'static [u8] {
        C::descriptor().name.as_bytes()
    }

    fn seal(&self, rng: &mut dyn CryptoRngCore, value: u64, data: &[u8]) -> Result<Vec<u8>> {
        if C::sealed() {
            self.record_key.seal(rng, Self::aad(), value, data)
        } else {
            let mut plain = Vec::with_capacity(8 + data.len());
            plain.extend_from_slice(&value.to_be_bytes());
            plain.extend_from_slice(data);
            Ok(plain)
        }
    }

    fn open(&self, record: &[u8]) -> Result<(u64, Vec<u8>)> {
        if C::sealed() {
            self.record_key.open(Self::aad(), record)
        } else {
            let (value, data) = record
                .split_first_chunk::<8>()
                .ok_or_else(|| Error::Protocol("plain record shorter than 8 bytes".into()))?;
            Ok((u64::from_be_bytes(*value), data.to_vec()))
        }
    }

    fn send(
        &self,
        channel: &mut dyn Channel,
        request: &Request<FullOf<C>, ProbeOf<C>>,
    ) -> Result<Response> {
        channel::call(channel, request)
    }

    /// Sends the pending FH-OPE re-encoding, if any.
    fn flush_reencoding(&mut self, channel: &mut dyn Channel) -> Result<()> {
        if let Some(changes) = self.scheme.take_reencoding() {
            let request = Request::Reencode {
                layout: self.layout,
                changes,
            };
            match self.send(channel, &request)? {
                Response::Done => {}
                other => return Err(Error::unexpected("B+ tree", &other)),
            }
        }
        Ok(())
    }

    /// The sealed records of `[lo, hi]` (`lo <= hi`), with the endpoints
    /// sent.
    #[allow(clippy::type_complexity)]
    fn fetch(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        lo: u64,
        hi: u64,
    ) -> Result<Option<(ProbeOf<C>, ProbeOf<C>, Vec<Vec<u8>>)>> {
        let probes = self.scheme.probes(rng, lo, hi)?;
        self.flush_reencoding(channel)?;
        let Some((a, b)) = probes else {
            return Ok(None);
        };
        let request = Request::Query {
            layout: self.layout,
            lo: a,
            hi: b,
        };
        let records = match self.send(channel, &request)? {
            Response::Records(records) => records,
            other => return Err(Error::unexpected("B+ tree", &other)),
        };
        let Request::Query { lo: a, hi: b, .. } = request else {
            return Err(Error::Protocol("request changed".into()));
        };
        Ok(Some((a, b, records)))
    }
}

impl<C: ClientOrder> RangeClient for BplusClient<C> {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        C::descriptor()
    }

    fn bits(&self) -> u32 {
        self.layout.bits
    }

    fn insert(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        value: u64,
        data: &[u8],
    ) -> Result<()> {
        check_value(value, self.layout.bits)?;
        let ciphertext = self.scheme.encrypt(rng, value)?;
        self.flush_reencoding(channel)?;
        let record = self.seal(rng, value, data)?;
        let request = Request::Insert {
            layout: self.layout,
            ciphertext,
            record,
        };
        match self.send(channel, &request)? {
            Response::Done => Ok(()),
            other => Err(Error::unexpected("B+ tree", &other)),
        }
    }

    fn delete(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        value: u64,
        data: &[u8],
    ) -> Result<bool> {
        check_value(value, self.layout.bits)?;
        let (lo, hi, record) = if C::sealed() {
            // Round 1: the sealed records of [v, v]; pick the pair's.
            let Some((lo, hi, records)) = self.fetch(rng, channel, value, value)? else {
                return Ok(false);
            };
            let mut found = None;
            for r in records {
                let (v, d) = self.open(&r)?;
                if v == value && d == data {
                    found = Some(r);
                    break;
                }
            }
            let Some(record) = found else {
                return Ok(false);
            };
            (lo, hi, record)
        } else {
            // The baseline's records are deterministic: one round.
            let Some((lo, hi)) = self.scheme.probes(rng, value, value)? else {
                return Ok(false);
            };
            (lo, hi, self.seal(rng, value, data)?)
        };
        // Round 2 (round 1 for the baseline): delete that entry.
        let request = Request::Delete {
            layout: self.layout,
            lo,
            hi,
            record,
        };
        match self.send(channel, &request)? {
            Response::Deleted(found) => Ok(found),
            other => Err(Error::unexpected("B+ tree", &other)),
        }
    }

    fn query(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        lo: u64,
        hi: u64,
    ) -> Result<RangeAnswer> {
        check_value(lo, self.layout.bits)?;
        check_value(hi, self.layout.bits)?;
        if lo > hi {
            return Ok(RangeAnswer::default());
        }
        let Some((_, _, sealed)) = self.fetch(rng, channel, lo, hi)? else {
            return Ok(RangeAnswer::default());
        };
        let mut records = Vec::with_capacity(sealed.len());
        for r in &sealed {
            let (v, d) = self.open(r)?;
            if v < lo || v > hi {
                return Err(Error::Protocol(format!(
                    "the server returned value {v} for the query [{lo}, {hi}]"
                )));
            }
            records.push((v, d));
        }
        Ok(RangeAnswer::from_records(records, 0))
    }

    fn client_storage_bytes(&self) -> u64 {
        // The parameters (bits, extra, payload), the keys and the state.
        let record_key = if C::sealed() { 32 } else { 0 };
        12 + record_key + C::key_bytes() + self.scheme.state_bits().div_ceil(8)
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        let saved = SavedClient {
            protocol: C::descriptor().name.to_owned(),
            bits: self.layout.bits,
            extra: self.layout.extra,
            payload: self.layout.payload,
            record_key: *self.record_key.to_bytes(),
            scheme: self.scheme.save()?.to_vec(),
        };
        wire::encode(&saved)
    }
}

// ---------------------------------------------------------------------
// Registry.

const BITS: (&str, &str) = ("bits", "32 (value width, 1..=64)");
const PAYLOAD: (&str, &str) = (
    "payload",
    "16 (record payload bytes the leaves are sized for; larger records still fit, a node \
     then spans more pages)",
);

fn entry<C: ClientOrder>(params: &'static [(&'static str, &'static str)]) -> RangeProtocol {
    RangeProtocol {
        descriptor: C::descriptor(),
        params,
        new_client: |rng, params| {
            let (params, _) = split_page(params)?;
            Ok(Box::new(BplusClient::<C>::new(rng, &params)?))
        },
        restore_client: |bytes| Ok(Box::new(BplusClient::<C>::restore(bytes)?)),
        new_server: Some(|store, params| {
            let (_, page) = split_page(params)?;
            Ok(Box::new(Typed(BplusServer::<C::Server>::new(
                store, &page,
            )?)))
        }),
    }
}

/// The protocols of this module: the baseline, then one per ORE scheme.
pub fn protocols() -> Vec<RangeProtocol> {
    vec![
        entry::<PlainClient>(&[BITS, PAYLOAD]),
        entry::<Bclo>(&[BITS, PAYLOAD, ("range", "max(48, bits) (ciphertext width)")]),
        entry::<Clww>(&[BITS, PAYLOAD]),
        entry::<LewiWu>(&[BITS, PAYLOAD, ("block", "2 (block width d, 1..=16)")]),
        entry::<Cloz<PairingPph>>(&[BITS, PAYLOAD]),
        entry::<Cloz<CorrectnessOnlyPph>>(&[BITS, PAYLOAD]),
        entry::<FhOpe>(&[
            BITS,
            PAYLOAD,
            ("cipher_bits", "64 (ciphertext width, 2..=64)"),
        ]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn fan_out<O: ServerOrder>(bits: u32, extra: u32) -> (usize, usize) {
        let layout = Layout {
            bits,
            extra,
            payload: 16,
        };
        let v = record_bytes(true, 16) + 1;
        let c = capacity(4096, O::key_bytes(&layout), v).unwrap();
        (c.leaf(), c.internal())
    }

    /// The figures quoted in docs/schemes/bplus_ore.md.
    #[test]
    fn fan_outs_of_the_documentation() {
        assert_eq!(fan_out::<PlainComparator>(32, 0), (70, 407));
        assert_eq!(fan_out::<ClwwComparator>(32, 0), (64, 271));
        assert_eq!(fan_out::<FhOpeOrder>(32, 64), (64, 271));
        assert_eq!(fan_out::<LewiWuComparator>(32, 2), (47, 107));
        assert_eq!(fan_out::<ClozComparator<PairingPph>>(32, 0), (2, 2));
        assert_eq!(
            <LewiWuComparator as ServerOrder>::key_bytes(&Layout {
                bits: 32,
                extra: 2,
                payload: 16
            }),
            33
        );
        assert_eq!(
            ClozComparator::<PairingPph>::key_bytes(&Layout {
                bits: 32,
                extra: 0,
                payload: 16
            }),
            12_417
        );
    }

    #[test]
    fn key_bounds_hold_for_extreme_ciphertexts() {
        let mut rng = rand_chacha::ChaCha20Rng::from_seed([3; 32]);
        let layout = Layout {
            bits: 32,
            extra: 2,
            payload: 16,
        };
        let mut lw = LewiWu::generate(
            &mut rng,
            LewiWuParams {
                bits: 32,
                block_bits: 2,
            },
        )
        .unwrap();
        let clww = Clww::generate(&mut rng, 32).unwrap();
        for x in [0, 1, u64::from(u32::MAX)] {
            let c = OreScheme::encrypt(&mut lw, &mut rng, x).unwrap();
            assert!(
                wire::encode_raw_into(&c.right, Vec::new()).unwrap().len()
                    <= <LewiWuComparator as ServerOrder>::key_bytes(&layout)
            );
            let c = clww.encrypt_u64(x).unwrap();
            assert!(
                wire::encode_raw_into(&c, Vec::new()).unwrap().len()
                    <= <ClwwComparator as ServerOrder>::key_bytes(&layout)
            );
        }
        let mut pairing = Cloz::<PairingPph>::generate(&mut rng, 2).unwrap();
        let c = OreScheme::encrypt(&mut pairing, &mut rng, 3).unwrap();
        let two = Layout {
            bits: 2,
            extra: 0,
            payload: 16,
        };
        assert_eq!(
            wire::encode_raw_into(&c.right, Vec::new()).unwrap().len(),
            ClozComparator::<PairingPph>::key_bytes(&two)
        );
    }
}
