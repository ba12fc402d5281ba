//! 2Lev: the two-level static scheme of Cash, Jaeger, Jarecki, Jutla,
//! Krawczyk, Rosu and Steiner, NDSS 2014 (Π_2lev), response-revealing.
//!
//! Each keyword has one dictionary entry of `b` slots under the label
//! AES_K1(0). Its list of n identifiers is stored by size class:
//! - small (n <= b): the identifiers sit in the dictionary entry;
//! - medium (ceil(n/B) <= b): the identifiers fill ceil(n/B) blocks of B
//!   slots in the array A, and the entry holds their positions;
//! - large: the identifier blocks' positions fill pointer blocks in A, and
//!   the entry holds the pointer blocks' positions;
//! - larger still (beyond b·B² identifiers): further pointer levels, added
//!   the same way, instead of refusing the list (a deviation: the paper
//!   picks b and B so that two levels suffice).
//!
//! Array positions are a uniformly random permutation over all blocks of
//! all keywords; the entry and each block are encrypted with the keyword's
//! K2-keystream (bound to the position for blocks). With a page-sized B
//! (4096 / 8 = 512 identifiers) this is the pack layout seed 004 uses.
//!
//! See `docs/schemes/two_lev.md` for leakage and deviations.

use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    channel, BackwardPrivacy, Error, Handler, IoCounts, Params, QueryKind, Result,
    SchemeDescriptor, SchemeKind, Store, WriteBatch,
};
use sesame_crypto::key::Key;
use sesame_crypto::prf::HmacPrf;

use crate::api::{DocId, Io, KeywordClient, KeywordScheme, Multimap};
use crate::common::{self, KeywordKeys, Tag, ID_BYTES};

/// Descriptor of 2Lev.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "2lev",
    title: "2Lev (Π_2lev)",
    citation: "D. Cash, J. Jaeger, S. Jarecki, C. Jutla, H. Krawczyk, M.-C. Rosu, M. Steiner. \
               Dynamic Searchable Encryption in Very-Large Databases: Data Structures and \
               Implementation. NDSS 2014",
    kind: SchemeKind::StaticSse,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Exact],
    leakage: "Setup: the number of keywords (dictionary entries) and of array blocks. Search: \
              the search pattern, the access pattern (matching identifiers, response-revealing, \
              and the array blocks read) and the list's size class.",
    doc: "docs/schemes/two_lev.md",
};

/// The registry entry of 2Lev.
pub fn scheme() -> KeywordScheme {
    common::keyword_scheme!(
        &DESCRIPTOR,
        &[
            ("b", "64 (slots per dictionary entry)"),
            (
                "block",
                "64 (identifiers per array block; 512 fills a 4 KiB page)",
            ),
        ],
        TwoLevClient,
        TwoLevServer
    )
}

/// Most pointer levels an entry may claim (2^64 identifiers need fewer
/// than 64 levels with blocks of at least two slots).
const MAX_LEVELS: u8 = 64;

crate::common::redacted_debug!(Request);

/// A 2Lev request.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Stores dictionary entries and array blocks; `reset` first removes
    /// the earlier index.
    Put {
        /// Remove the earlier index first.
        reset: bool,
        /// (label, encrypted entry) pairs.
        dict: Vec<([u8; 16], Vec<u8>)>,
        /// (position, encrypted block) pairs.
        array: Vec<(u64, Vec<u8>)>,
    },
    /// Returns the identifiers of the keyword whose keys these are.
    Search {
        /// Label key.
        k1: [u8; 16],
        /// Value key.
        k2: [u8; 16],
    },
}

/// A 2Lev response: stored, or the identifiers a search found.
pub type Response = crate::common::IdsResponse;

#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    master: [u8; 32],
    b: u32,
    block: u32,
}

/// The encrypted index of a database.
#[derive(Debug, Default)]
pub struct Index {
    /// Dictionary entries, sorted by label.
    pub dict: Vec<([u8; 16], Vec<u8>)>,
    /// Array blocks, by position.
    pub array: Vec<(u64, Vec<u8>)>,
}

/// The client half of 2Lev.
pub struct TwoLevClient {
    master: Key<32>,
    prf: HmacPrf,
    b: usize,
    block: usize,
}

impl std::fmt::Debug for TwoLevClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TwoLevClient")
            .field("b", &self.b)
            .field("block", &self.block)
            .finish_non_exhaustive()
    }
}

impl TwoLevClient {
    /// A client with a fresh key. Parameters: `b` (slots per dictionary
    /// entry, default 64) and `block` (identifiers per array block, default
    /// 64).
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        params.only(DESCRIPTOR.name, &["b", "block"])?;
        let b = common::positive(params, "b", 64)?;
        let block = common::positive(params, "block", 64)?;
        if block < 2 {
            return Err(Error::InvalidArgument(
                "2Lev needs block >= 2 (a block must hold more than one position)".into(),
            ));
        }
        Ok(Self::with_key(Key::generate(rng), b, block))
    }

    fn with_key(master: Key<32>, b: usize, block: usize) -> Self {
        let prf = HmacPrf::new(&master);
        Self {
            master,
            prf,
            b,
            block,
        }
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let s: State = sesame_core::wire::decode(bytes)?;
        let ok = |v: u32| {
            usize::try_from(v)
                .ok()
                .filter(|v| (1..=1 << 20).contains(v))
                .ok_or_else(|| Error::Malformed("2Lev state with an invalid size".into()))
        };
        let block = ok(s.block)?;
        if block < 2 {
            return Err(Error::Malformed("2Lev state with block < 2".into()));
        }
        Ok(Self::with_key(Key::from_bytes(s.master), ok(s.b)?, block))
    }

    /// The pointer levels and array blocks a list of `n` identifiers
    /// needs: 0 levels keeps the list in the dictionary entry.
    fn blocks_for(&self, n: usize) -> (u8, usize) {
        let (mut level, mut count, mut blocks) = (0u8, n, 0usize);
        while count > self.b {
            count = count.div_ceil(self.block);
            blocks += count;
            level += 1;
        }
        (level, blocks)
    }

    /// Builds the encrypted index of `db`.
    pub fn build(&self, rng: &mut dyn CryptoRngCore, db: &Multimap) -> Result<Index> {
        common::check_ids(db)?;
        let lists: Vec<(&Vec<u8>, Vec<DocId>)> = db
            .iter()
            .map(|(w, ids)| (w, common::normalise(ids.clone())))
            .collect();
        let total: usize = lists
            .iter()
            .map(|(_, ids)| self.blocks_for(ids.len()).1)
            .sum();
        let positions = common::shuffled(rng, total);
        let mut next = positions.into_iter();
        let mut index = Index {
            dict: Vec::with_capacity(lists.len()),
            array: Vec::with_capacity(total),
        };
        for (w, ids) in lists {
            let keys = KeywordKeys::derive(&self.prf, w);
            let vp = keys.value_prf();
            let (levels, _) = self.blocks_for(ids.len());
            // Bottom-up: identifiers fill blocks, whose positions fill the
            // next level's blocks, until the dictionary entry holds them.
            let mut entry = ids;
            for _ in 0..levels {
                let mut above = Vec::with_capacity(entry.len().div_ceil(self.block));
                for chunk in entry.chunks(self.block) {
                    let pos = next
                        .next()
                        .ok_or_else(|| Error::Protocol("2Lev ran out of array positions".into()))?;
                    let mut v = common::encode_ids(chunk, self.block);
                    common::xor_keystream(&vp, Tag::Array, pos, &mut v);
                    index.array.push((pos, v));
                    above.push(pos);
                }
                entry = above;
            }
            let mut value = vec![levels];
            value.extend(common::encode_ids(&entry, self.b));
            common::xor_keystream(&vp, Tag::Entry, 0, &mut value);
            let label = common::labels(&keys.label_prf(), 0, 1)[0];
            index.dict.push((label, value));
        }
        index.dict.sort_unstable_by_key(|e| e.0);
        index.array.sort_unstable_by_key(|a| a.0);
        Ok(index)
    }
}

impl KeywordClient for TwoLevClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn setup_checked(&mut self, Io { rng, channel }: Io<'_>, db: &Multimap) -> Result<()> {
        let index = self.build(rng, db)?;
        let mut dict = index.dict.into_iter().peekable();
        let mut array = index.array.into_iter().peekable();
        let mut reset = true;
        loop {
            // The dictionary first, then the array: one chunk a request,
            // so that each fits a server's message limit.
            let dict_chunk = crate::common::take_chunk(&mut dict, |e| 16 + e.1.len());
            let array_chunk = if dict_chunk.is_empty() {
                crate::common::take_chunk(&mut array, |e| 8 + e.1.len())
            } else {
                Vec::new()
            };
            let request = Request::Put {
                reset,
                dict: dict_chunk,
                array: array_chunk,
            };
            match channel::call(channel, &request)? {
                Response::Stored => {}
                Response::Ids(_) => return Err(Error::Protocol("2Lev: Ids after Put".into())),
            }
            reset = false;
            if dict.peek().is_none() && array.peek().is_none() {
                return Ok(());
            }
        }
    }

    fn search_token(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        keyword: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let keys = KeywordKeys::derive(&self.prf, keyword);
        let request = Request::Search {
            k1: keys.k1,
            k2: keys.k2,
        };
        sesame_core::wire::encode(&request).map(Some)
    }

    fn resolve(&mut self, _keyword: &[u8], response: &[u8]) -> Result<Vec<DocId>> {
        match sesame_core::wire::decode(response)? {
            Response::Ids(ids) => Ok(common::normalise(ids)),
            Response::Stored => Err(Error::Protocol("2Lev: Stored after Search".into())),
        }
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        let conv = |v: usize| {
            u32::try_from(v).map_err(|_| Error::InvalidArgument("2Lev size too large".into()))
        };
        sesame_core::wire::encode(&State {
            master: *self.master.as_bytes(),
            b: conv(self.b)?,
            block: conv(self.block)?,
        })
    }
}

fn dict_key(label: &[u8; 16]) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(b'd');
    k.extend_from_slice(label);
    k
}

fn array_key(pos: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(b'a');
    k.extend_from_slice(&pos.to_be_bytes());
    k
}

/// The server half of 2Lev.
pub struct TwoLevServer {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for TwoLevServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TwoLevServer").finish_non_exhaustive()
    }
}

impl TwoLevServer {
    /// A server keeping its index in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    fn blocks(
        &self,
        vp: &sesame_crypto::prf::Aes128Prf,
        positions: &[DocId],
        out: &mut Vec<DocId>,
    ) -> Result<()> {
        let keys: Vec<Vec<u8>> = positions.iter().map(|&p| array_key(p)).collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        for (value, &pos) in self.store.get_many(&refs)?.into_iter().zip(positions) {
            let mut value = value
                .ok_or_else(|| Error::Protocol(format!("2Lev array block {pos} is missing")))?;
            common::xor_keystream(vp, Tag::Array, pos, &mut value);
            common::decode_ids(&value, out)?;
        }
        Ok(())
    }

    /// The identifiers stored under the keys (k1, k2).
    pub fn search(&self, k1: [u8; 16], k2: [u8; 16]) -> Result<Vec<DocId>> {
        let keys = KeywordKeys { k1, k2 };
        let vp = keys.value_prf();
        let label = common::labels(&keys.label_prf(), 0, 1)[0];
        let Some(mut entry) = self.store.get(&dict_key(&label))? else {
            return Ok(Vec::new());
        };
        common::xor_keystream(&vp, Tag::Entry, 0, &mut entry);
        let Some((&class, slots)) = entry.split_first() else {
            return Err(Error::Protocol("empty 2Lev dictionary entry".into()));
        };
        if class > MAX_LEVELS {
            return Err(Error::Protocol(format!(
                "2Lev dictionary entry with {class} levels"
            )));
        }
        let mut out = Vec::with_capacity(slots.len() / ID_BYTES);
        common::decode_ids(slots, &mut out)?;
        for _ in 0..class {
            let mut below = Vec::new();
            self.blocks(&vp, &out, &mut below)?;
            out = below;
        }
        Ok(out)
    }
}

impl Handler for TwoLevServer {
    type Request = Request;
    type Response = Response;

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::Put { reset, dict, array } => {
                if reset {
                    crate::common::clear(self.store.as_ref(), b"")?;
                }
                let mut batch = WriteBatch::with_capacity(dict.len() + array.len());
                for (label, value) in dict {
                    batch.put(dict_key(&label), value);
                }
                for (pos, value) in array {
                    batch.put(array_key(pos), value);
                }
                self.store.write(batch)?;
                Ok(Response::Stored)
            }
            Request::Search { k1, k2 } => Ok(Response::Ids(self.search(k1, k2)?)),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}
