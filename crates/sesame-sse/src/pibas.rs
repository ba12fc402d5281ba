//! PiBas: the basic static scheme of Cash, Jaeger, Jarecki, Jutla,
//! Krawczyk, Rosu and Steiner, "Dynamic Searchable Encryption in Very-Large
//! Databases: Data Structures and Implementation", NDSS 2014 (Π_bas), in
//! its response-revealing form, with the Π_pack extension.
//!
//! For each keyword w the client derives K1 = F(K, w)[..16] and
//! K2 = F(K, w)[16..]. The identifiers of w are cut into blocks of `block`
//! identifiers (block = 1 is plain Π_bas; larger blocks are Π_pack, the
//! last block padded); block c is stored under the label AES_K1(c) as the
//! block XOR AES_K2-keystream(c). A search sends (K1, K2); the server
//! derives labels c = 0, 1, ... until one is missing and decrypts the
//! blocks (response-revealing).
//!
//! See `docs/schemes/pibas.md` for leakage and deviations.

use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    BackwardPrivacy, Channel, Error, Handler, IoCounts, Params, QueryKind, Result,
    SchemeDescriptor, SchemeKind, Store,
};
use sesame_crypto::key::Key;
use sesame_crypto::prf::HmacPrf;

use crate::api::{DocId, Io, KeywordClient, KeywordScheme, Multimap};
use crate::common::{self, KeywordKeys, Tag};

/// Descriptor of PiBas.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "pibas",
    title: "PiBas (Π_bas, with the Π_pack extension)",
    citation: "D. Cash, J. Jaeger, S. Jarecki, C. Jutla, H. Krawczyk, M.-C. Rosu, M. Steiner. \
               Dynamic Searchable Encryption in Very-Large Databases: Data Structures and \
               Implementation. NDSS 2014",
    kind: SchemeKind::StaticSse,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Exact],
    leakage: "Setup: the number of stored blocks (pairs when block=1). Search: the search \
              pattern (a repeated keyword sends the same token) and the access pattern: the \
              matching document identifiers (response-revealing) and which entries are read.",
    doc: "docs/schemes/pibas.md",
};

/// The registry entry of PiBas.
pub fn scheme() -> KeywordScheme {
    common::keyword_scheme!(
        &DESCRIPTOR,
        &[(
            "block",
            "1 (identifiers per entry; >1 is the pack extension)",
        )],
        PiBasClient,
        PiBasServer
    )
}

crate::common::redacted_debug!(Request);

/// A PiBas request.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Stores entries; `reset` first removes every earlier entry.
    Put {
        /// Remove the earlier index first.
        reset: bool,
        /// (label, encrypted block) pairs.
        entries: Vec<([u8; 16], Vec<u8>)>,
    },
    /// Returns the identifiers of the keyword whose keys these are.
    Search {
        /// Label key.
        k1: [u8; 16],
        /// Value key.
        k2: [u8; 16],
    },
}

/// A PiBas response: stored, or the identifiers a search found.
pub type Response = crate::common::IdsResponse;

#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    master: [u8; 32],
    block: u32,
}

/// The client half of PiBas.
pub struct PiBasClient {
    master: Key<32>,
    prf: HmacPrf,
    block: usize,
}

impl std::fmt::Debug for PiBasClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PiBasClient")
            .field("block", &self.block)
            .finish_non_exhaustive()
    }
}

impl PiBasClient {
    /// A client with a fresh key. Parameter: `block` (identifiers per
    /// entry, default 1).
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        params.only(DESCRIPTOR.name, &["block"])?;
        let block = common::positive(params, "block", 1)?;
        Ok(Self::with_key(Key::generate(rng), block))
    }

    fn with_key(master: Key<32>, block: usize) -> Self {
        let prf = HmacPrf::new(&master);
        Self { master, prf, block }
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let s: State = sesame_core::wire::decode(bytes)?;
        let block = usize::try_from(s.block)
            .ok()
            .filter(|b| (1..=1 << 20).contains(b))
            .ok_or_else(|| Error::Malformed("PiBas state with an invalid block size".into()))?;
        Ok(Self::with_key(Key::from_bytes(s.master), block))
    }

    /// The encrypted entries of `db`, sorted by label.
    pub fn build(&self, db: &Multimap) -> Result<Vec<([u8; 16], Vec<u8>)>> {
        common::check_ids(db)?;
        let mut entries = Vec::new();
        for (w, ids) in db {
            let ids = common::normalise(ids.clone());
            let keys = KeywordKeys::derive(&self.prf, w);
            let chunks: Vec<&[DocId]> = ids.chunks(self.block).collect();
            let labels = common::labels(&keys.label_prf(), 0, chunks.len());
            let vp = keys.value_prf();
            for (c, (label, chunk)) in labels.into_iter().zip(chunks).enumerate() {
                let mut value = common::encode_ids(chunk, self.block);
                common::xor_keystream(&vp, Tag::Entry, c as u64, &mut value);
                entries.push((label, value));
            }
        }
        entries.sort_unstable_by_key(|e| e.0);
        Ok(entries)
    }
}

impl KeywordClient for PiBasClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn setup_checked(&mut self, Io { channel, .. }: Io<'_>, db: &Multimap) -> Result<()> {
        let entries = self.build(db)?;
        upload(channel, entries)
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
        Response::sorted_ids(sesame_core::wire::decode(response)?, "PiBas")
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        let s = State {
            master: *self.master.as_bytes(),
            block: u32::try_from(self.block)
                .map_err(|_| Error::InvalidArgument("block size too large".into()))?,
        };
        sesame_core::wire::encode(&s)
    }
}

fn upload(channel: &mut dyn Channel, entries: Vec<([u8; 16], Vec<u8>)>) -> Result<()> {
    common::upload(
        channel,
        entries,
        |e| 16 + e.1.len(),
        |reset, entries| Request::Put { reset, entries },
        common::answered("PiBas", Response::Stored),
    )
}

/// Store key of a dictionary label.
fn dict_key(label: &[u8; 16]) -> [u8; 17] {
    let mut k = [0u8; 17];
    k[0] = b'd';
    k[1..].copy_from_slice(label);
    k
}

/// The server half of PiBas.
pub struct PiBasServer {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for PiBasServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PiBasServer").finish_non_exhaustive()
    }
}

impl PiBasServer {
    /// A server keeping its index in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// The identifiers stored under the keys (k1, k2).
    pub fn search(&self, k1: [u8; 16], k2: [u8; 16]) -> Result<Vec<DocId>> {
        let keys = KeywordKeys { k1, k2 };
        let (lp, vp) = (keys.label_prf(), keys.value_prf());
        let mut out = Vec::new();
        common::read_labels(self.store.as_ref(), &lp, dict_key, |c, mut value| {
            common::xor_keystream(&vp, Tag::Entry, c, &mut value);
            common::decode_ids(&value, &mut out)
        })?;
        Ok(out)
    }
}

impl Handler for PiBasServer {
    type Request = Request;
    type Response = Response;

    /// Entries are found by their labels, a few at a time.
    fn packable(&self) -> bool {
        true
    }

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            // Under dict_key's `d ‖ label`.
            Request::Put { reset, entries } => {
                common::put_labelled(self.store.as_ref(), reset, b'd', entries)?;
                Ok(Response::Stored)
            }
            Request::Search { k1, k2 } => Ok(Response::Ids(self.search(k1, k2)?)),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}
