//! Path ORAM (Stefanov et al., CCS 2013) and the "ORAM" range protocol of
//! seed 004 (section 4.5.2): a B+ tree whose nodes are Path ORAM blocks.
//!
//! [`oram`] is the ORAM itself: a client ([`oram::PathOram`]: key, position
//! map, stash) and a server ([`oram::PathOramServer`]) that stores one AEAD
//! ciphertext per bucket.
//!
//! The range protocol ([`OramRangeClient`], registered as `path-oram`)
//! runs the generic [`crate::btree::BTree`] on the client, with plaintext
//! `u64` keys and the records inline in the leaves; every node load or
//! store is one ORAM access (two rounds). The client keeps no node cache:
//! the root pointer, the node allocator (next id and free list) and the
//! ORAM state are its whole state. See `docs/schemes/path_oram.md`.

pub mod oram;

use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    BackwardPrivacy, Channel, Error, Params, QueryKind, Result, SchemeDescriptor, SchemeKind,
    Service, Store, Typed,
};

use crate::api::{bits_param, split_page, Io, RangeAnswer, RangeClient, RangeProtocol};
use crate::btree::{BTree, Capacity, Node, NodeId, NodeStore};
use crate::paged::PageConfig;
use oram::{ChannelIo, PathOram, PathOramServer};

/// Descriptor of the ORAM range protocol.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "path-oram",
    title: "B+ tree in Path ORAM",
    citation: "E. Stefanov, M. van Dijk, E. Shi, C. Fletcher, L. Ren, X. Yu, S. Devadas. \
               Path ORAM: An Extremely Simple Oblivious RAM Protocol. CCS 2013 \
               (the ORAM baseline of seed 004, section 4.5.2)",
    kind: SchemeKind::Range,
    forward_private: true,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Range],
    leakage: "The server stores fixed-size bucket ciphertexts and sees, per ORAM access, only \
              a uniformly random leaf. Per operation it learns the number of ORAM accesses \
              (node accesses), which reveals the tree height, whether an insert split or a \
              delete merged nodes, and for a query the number of leaves scanned (about the \
              result size). The ORAM capacity and block size are public; the capacity doubles \
              when the tree outgrows it, which shows the number of nodes to within a factor \
              of two.",
    doc: "docs/schemes/path_oram.md",
};

/// Default initial ORAM capacity in blocks (B+ tree nodes); the ORAM
/// doubles when the tree needs more nodes.
pub const DEFAULT_CAPACITY: u64 = 1 << 10;

/// Default largest record payload stored inline in a leaf, in bytes.
pub const DEFAULT_RECORD_SIZE: usize = 64;

/// Smallest leaf and internal node capacity the block size must allow.
pub const MIN_NODE_CAPACITY: usize = 4;

/// The registry entry of the ORAM range protocol.
pub fn protocol() -> RangeProtocol {
    RangeProtocol {
        descriptor: &DESCRIPTOR,
        params: &[
            ("bits", "32 (value width)"),
            (
                "capacity",
                "65536 (ORAM blocks = most B+ tree nodes; rounded up to 2^k)",
            ),
            (
                "record_size",
                "64 (largest record payload in bytes, stored inline in leaves)",
            ),
            (
                "block_size",
                "the largest block whose bucket fits one page, at least what 4 entries of \
                 record_size need",
            ),
        ],
        new_client: |rng, params| {
            let (params, page) = split_page(params)?;
            Ok(Box::new(OramRangeClient::new(rng, &params, &page)?))
        },
        restore_client: |bytes| Ok(Box::new(OramRangeClient::restore(bytes)?)),
        new_server: Some(new_server),
    }
}

fn new_server(store: Arc<dyn Store>, params: &Params) -> Result<Box<dyn Service>> {
    split_page(params)?;
    Ok(Box::new(Typed(PathOramServer::new(store))))
}

/// The protocols of this module.
pub fn protocols() -> Vec<RangeProtocol> {
    vec![protocol()]
}

/// Bytes a leaf of `cap` entries with payloads of at most `record` bytes
/// may take in its encoding (an upper bound).
fn leaf_bytes(cap: usize, record: usize) -> usize {
    // enum tag, entry count, `next` (option tag + varint id), and per
    // entry a varint u64 (<= 10), a varint length (<= 4) and the payload.
    1 + 5 + 11 + cap * (10 + 4 + record)
}

/// Bytes an internal node of `cap` separators may take (an upper bound).
fn internal_bytes(cap: usize) -> usize {
    1 + 5 + 5 + cap * 10 + (cap + 1) * 10
}

/// Node capacities for a block size.
fn capacities(block: usize, record: usize) -> (usize, usize) {
    let leaf = block.saturating_sub(leaf_bytes(0, record)) / (14 + record);
    let internal = block.saturating_sub(internal_bytes(0)) / 20;
    (leaf, internal)
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Allocator {
    root: Option<NodeId>,
    next: u64,
    free: Vec<NodeId>,
}

#[derive(Serialize, Deserialize)]
struct Saved {
    bits: u32,
    record_size: u32,
    oram: Vec<u8>,
    alloc: Allocator,
}

/// The nodes of the tree as ORAM blocks, for the length of one operation.
struct OramNodes<'a> {
    oram: &'a mut PathOram,
    alloc: &'a mut Allocator,
    rng: &'a mut dyn CryptoRngCore,
    io: ChannelIo<'a>,
}

type Entry = Vec<u8>;

impl NodeStore<u64, Entry> for OramNodes<'_> {
    fn load(&mut self, id: NodeId) -> Result<Node<u64, Entry>> {
        match self.oram.read(self.rng, &mut self.io, id)? {
            Some(bytes) => sesame_core::wire::decode_raw(&bytes),
            None => Err(Error::StoreCorrupt(format!(
                "B+ tree node {id} is not in the ORAM"
            ))),
        }
    }

    fn store(&mut self, id: NodeId, node: &Node<u64, Entry>) -> Result<()> {
        let bytes = sesame_core::wire::encode_raw_into(node, Vec::new())?;
        if bytes.len() > self.oram.block_size() {
            return Err(Error::InvalidArgument(format!(
                "a B+ tree node of {} bytes exceeds the ORAM block size {}",
                bytes.len(),
                self.oram.block_size()
            )));
        }
        self.oram.write(self.rng, &mut self.io, id, bytes)?;
        Ok(())
    }

    fn alloc(&mut self) -> Result<NodeId> {
        if let Some(id) = self.alloc.free.pop() {
            return Ok(id);
        }
        if self.alloc.next >= self.oram.capacity() {
            // Full: add a level of leaves (the capacity doubles).
            self.oram.grow(self.rng)?;
        }
        self.alloc.next += 1;
        Ok(self.alloc.next - 1)
    }

    fn free(&mut self, id: NodeId) -> Result<()> {
        // No ORAM access: the stale block stays until the id is reused.
        self.alloc.free.push(id);
        Ok(())
    }

    fn root(&self) -> Option<NodeId> {
        self.alloc.root
    }

    fn set_root(&mut self, root: Option<NodeId>) -> Result<()> {
        self.alloc.root = root;
        Ok(())
    }
}

/// The client of the ORAM range protocol.
pub struct OramRangeClient {
    bits: u32,
    record_size: usize,
    capacity: Capacity,
    oram: PathOram,
    alloc: Allocator,
}

impl std::fmt::Debug for OramRangeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OramRangeClient")
            .field("bits", &self.bits)
            .field("capacity", &self.capacity)
            .field("oram", &self.oram)
            .finish_non_exhaustive()
    }
}

impl OramRangeClient {
    /// A client with a fresh key; parameters as in [`protocol`].
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params, page: &PageConfig) -> Result<Self> {
        params.only(
            DESCRIPTOR.name,
            &[
                "bits",
                "capacity",
                "record_size",
                "block_size",
                "page_size",
                "cache_size",
                "cache_policy",
            ],
        )?;
        let bits = bits_param(params)?;
        let blocks: u64 = params.get_or("capacity", DEFAULT_CAPACITY)?;
        if !(2..=1 << oram::MAX_HEIGHT).contains(&blocks) {
            return Err(Error::InvalidArgument(format!(
                "capacity={blocks} is not in 2..=2^{}",
                oram::MAX_HEIGHT
            )));
        }
        let record_size: usize = params.get_or("record_size", DEFAULT_RECORD_SIZE)?;
        if record_size > 1 << 16 {
            return Err(Error::InvalidArgument(format!(
                "record_size={record_size} exceeds 65536"
            )));
        }
        let min_block =
            leaf_bytes(MIN_NODE_CAPACITY, record_size).max(internal_bytes(MIN_NODE_CAPACITY));
        let default_block = PathOram::block_size_for_bucket(page.page_size).max(min_block);
        let block: usize = params.get_or("block_size", default_block)?;
        if block < min_block {
            return Err(Error::InvalidArgument(format!(
                "block_size={block} is below the {min_block} bytes that nodes of \
                 {MIN_NODE_CAPACITY} entries of record_size={record_size} need"
            )));
        }
        let oram = PathOram::new(rng, PathOram::height_for(blocks), block)?;
        Self::assemble(bits, record_size, oram, Allocator::default())
    }

    fn assemble(bits: u32, record_size: usize, oram: PathOram, alloc: Allocator) -> Result<Self> {
        let (leaf, internal) = capacities(oram.block_size(), record_size);
        let capacity = Capacity::new(leaf, internal)?;
        Ok(OramRangeClient {
            bits,
            record_size,
            capacity,
            oram,
            alloc,
        })
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let s: Saved = sesame_core::wire::decode(bytes)?;
        if !(1..=64).contains(&s.bits) {
            return Err(Error::Malformed("path-oram state with invalid bits".into()));
        }
        let oram = PathOram::restore(&s.oram)?;
        if s.alloc.next > oram.capacity()
            || s.alloc.root.is_some_and(|r| r >= s.alloc.next)
            || s.alloc.free.iter().any(|&f| f >= s.alloc.next)
        {
            return Err(Error::Malformed(
                "path-oram state with an invalid allocator".into(),
            ));
        }
        Self::assemble(s.bits, s.record_size as usize, oram, s.alloc)
            .map_err(|e| Error::Malformed(format!("path-oram state: {e}")))
    }

    /// The ORAM client (position map, stash).
    pub fn oram(&self) -> &PathOram {
        &self.oram
    }

    /// Leaf and internal node capacities of the tree.
    pub fn node_capacity(&self) -> Capacity {
        self.capacity
    }

    /// Nodes allocated (live or free).
    pub fn nodes_allocated(&self) -> u64 {
        self.alloc.next
    }

    fn tree<'a>(
        &'a mut self,
        rng: &'a mut dyn CryptoRngCore,
        channel: &'a mut dyn Channel,
    ) -> BTree<u64, Entry, OramNodes<'a>> {
        let nodes = OramNodes {
            oram: &mut self.oram,
            alloc: &mut self.alloc,
            rng,
            io: ChannelIo(channel),
        };
        BTree::new(nodes, self.capacity)
    }

    /// Checks the tree's invariants (every node is read through the
    /// ORAM); returns the number of entries. For tests.
    pub fn check(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
    ) -> Result<usize> {
        self.tree(rng, channel).check()
    }
}

impl RangeClient for OramRangeClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn bits(&self) -> u32 {
        self.bits
    }

    fn insert_checked(&mut self, io: Io<'_>, value: u64, data: &[u8]) -> Result<()> {
        self.tree(io.rng, io.channel)
            .insert_ord(value, data.to_vec())
    }

    fn delete_checked(&mut self, io: Io<'_>, value: u64, data: &[u8]) -> Result<bool> {
        let deleted = self
            .tree(io.rng, io.channel)
            .delete_ord(&value, |d| Ok(d.as_slice() == data))?;
        Ok(deleted.is_some())
    }

    fn query_checked(&mut self, io: Io<'_>, lo: u64, hi: u64) -> Result<RangeAnswer> {
        let records = self.tree(io.rng, io.channel).range_ord(&lo, &hi)?;
        Ok(RangeAnswer::from_records(records, 0))
    }

    fn max_record(&self) -> Option<usize> {
        Some(self.record_size)
    }

    fn client_storage_bytes(&self) -> u64 {
        // ORAM state, then the root, the next id and the free list.
        self.oram.client_storage_bytes() + 16 + 8 * self.alloc.free.len() as u64
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        let s = Saved {
            bits: self.bits,
            record_size: u32::try_from(self.record_size)
                .map_err(|_| Error::InvalidArgument("record size too large".into()))?,
            oram: self.oram.save()?,
            alloc: self.alloc.clone(),
        };
        sesame_core::wire::encode(&s)
    }
}
