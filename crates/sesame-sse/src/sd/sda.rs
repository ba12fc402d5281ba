//! SDa: the amortised dynamic scheme with small client storage of
//! Demertzis, Ghareh Chamani, Papadopoulos and Papamanthou, "Dynamic
//! Searchable Encryption with Small Client Storage", NDSS 2020.
//!
//! The index is a sequence of levels `0, 1, …`; level `ℓ` is empty or a
//! static encrypted index of exactly `2^ℓ` update entries `(w, ind, op)`
//! under its own key. An update is a new entry: if level 0 is empty it
//! becomes level 0; otherwise, with `j` the first empty level, the client
//! **fetches** levels `0..j` from the server, decrypts them, adds the new
//! entry, re-encrypts the `2^j` entries under a fresh key for level `j`
//! and **uploads** it, and the server drops the merged levels. Every
//! rebuild is a real exchange over the [`Channel`] (two rounds), counted
//! like any other message.
//!
//! Each level's static index is PiBas-shaped (Cash et al., NDSS 2014):
//! the `c`-th entry of `w` sits under the label `F(K1_{ℓ,w}, c)`; its value
//! is an authenticated encryption of `(w, ind, op, seq)` under the level's
//! key, `seq` being the global update counter. A search sends `K1_{ℓ,w}`
//! for every full level in one round; the server returns the encrypted
//! values (response-hiding), and the client keeps, per identifier, the
//! operation with the largest `seq`.
//!
//! The client stores one counter per level (the key version) and the
//! update counter: `O(log N)` words. See `docs/schemes/sda_sdd.md`.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    channel, BackwardPrivacy, Channel, Error, Handler, IoCounts, Params, QueryKind, Result,
    SchemeDescriptor, SchemeKind, Store, WriteBatch,
};
use sesame_crypto::key::Key;
use sesame_crypto::prf::{Aes128Prf, HmacPrf};

use super::levels::*;
use crate::api::{self, DocId, Io, KeywordClient, KeywordScheme, Multimap};
use crate::common::{self};

/// Descriptor of SDa.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "sda",
    title: "SDa (amortised dynamic SSE with small client storage, levels of static SSE)",
    citation: "I. Demertzis, J. Ghareh Chamani, D. Papadopoulos, C. Papamanthou. Dynamic \
               Searchable Encryption with Small Client Storage. NDSS 2020",
    kind: SchemeKind::DynamicSse,
    forward_private: true,
    backward_privacy: BackwardPrivacy::TypeII,
    queries: &[QueryKind::Exact],
    leakage: "Update: the update count (which levels are rebuilt follows from it) and the \
              sizes of the encrypted entries of the rebuilt levels; a rebuilt level is under a \
              fresh key, so no earlier search token applies to it (forward privacy). Search: \
              per full level, the number of entries of the keyword (additions and deletions \
              alike) and, through the level, coarse times of the keyword's updates; the search \
              pattern within a level's lifetime; no identifier (response-hiding: the client \
              filters deletions): backward privacy type II. Entries are padded to multiples of \
              64 bytes: their sizes reveal only keywords longer than 43 bytes.",
    doc: "docs/schemes/sda_sdd.md",
};

/// The registry entry of SDa.
pub fn scheme() -> KeywordScheme {
    common::keyword_scheme!(&DESCRIPTOR, &[], SdaClient, SdServer)
}

/// An encrypted level entry: label and sealed `(w, ind, op, seq)`.
pub type Entry = ([u8; LABEL_LEN], Vec<u8>);

crate::common::redacted_debug!(Request);

/// An SDa request.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Removes every level.
    Reset,
    /// The sealed entries of the levels, for a rebuild.
    Fetch {
        /// Levels to read.
        levels: Vec<u8>,
    },
    /// Stores a rebuilt level and drops the merged ones.
    Build {
        /// The level written.
        level: u8,
        /// Its entries.
        entries: Vec<Entry>,
        /// Levels to drop.
        drop: Vec<u8>,
    },
    /// The sealed entries of a keyword in each listed level.
    Search {
        /// (level, label key `K1_{ℓ,w}`).
        tokens: Vec<(u8, [u8; 16])>,
    },
    /// Adds entries to a level a `Build` began: how a level too large for
    /// one request is sent (setup only). Idempotent: entries are keyed by
    /// their labels.
    Extend {
        /// The level written.
        level: u8,
        /// More of its entries.
        entries: Vec<Entry>,
    },
}

/// An SDa response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// Done.
    Done,
    /// Sealed entries of the fetched levels, level by level.
    Levels(Vec<Vec<Vec<u8>>>),
    /// Sealed entries of the keyword, per token.
    Found(Vec<Vec<Vec<u8>>>),
}

#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    master: [u8; 32],
    seq: u64,
    builds: u64,
    levels: Vec<Option<u64>>,
}

/// The client half of SDa: a master key, the update counter and, per
/// level, the version of its key (none when empty).
pub struct SdaClient {
    master: Key<32>,
    prf: HmacPrf,
    seq: u64,
    builds: u64,
    levels: Vec<Option<u64>>,
}

impl std::fmt::Debug for SdaClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SdaClient")
            .field("updates", &self.seq)
            .field("levels", &self.levels)
            .finish_non_exhaustive()
    }
}

impl SdaClient {
    /// A client with a fresh key; SDa has no parameters.
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        params.only(DESCRIPTOR.name, &[])?;
        Ok(Self::with(Key::generate(rng), 0, 0, Vec::new()))
    }

    fn with(master: Key<32>, seq: u64, builds: u64, levels: Vec<Option<u64>>) -> Self {
        Self {
            prf: HmacPrf::new(&master.derive("sesame-sse/sda/levels")),
            master,
            seq,
            builds,
            levels,
        }
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let s: State = sesame_core::wire::decode(bytes)?;
        if s.levels.len() > MAX_LEVELS {
            return Err(Error::Malformed("SDa state with too many levels".into()));
        }
        Ok(Self::with(
            Key::from_bytes(s.master),
            s.seq,
            s.builds,
            s.levels.clone(),
        ))
    }

    /// The full levels.
    pub fn full_levels(&self) -> Vec<u8> {
        (0..self.levels.len())
            .filter(|&l| self.levels[l].is_some())
            .map(|l| l as u8)
            .collect()
    }

    fn keys(&self, level: usize, version: u64) -> LevelKeys {
        let k = self
            .prf
            .eval_concat(&[&(level as u64).to_le_bytes(), &version.to_le_bytes()]);
        LevelKeys::derive(k)
    }

    /// Encrypts `updates` as level `level` under a fresh key version.
    fn build(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        level: usize,
        updates: &[Update],
    ) -> Result<Vec<Entry>> {
        self.builds += 1;
        let version = self.builds;
        let keys = self.keys(level, version);
        let mut counts: BTreeMap<&[u8], u64> = BTreeMap::new();
        let mut entries = Vec::with_capacity(updates.len());
        for u in updates {
            let c = counts.entry(&u.keyword).or_insert(0);
            let prf = Aes128Prf::new(&Key::from_bytes(keys.label_key(&u.keyword)));
            let sealed = keys
                .aead
                .seal(rng, &(level as u64).to_le_bytes(), &u.encode())?;
            entries.push((label(&prf, *c), sealed));
            *c += 1;
        }
        entries.sort_unstable();
        if self.levels.len() <= level {
            self.levels.resize(level + 1, None);
        }
        self.levels[level] = Some(version);
        Ok(entries)
    }

    fn open(&self, level: usize, sealed: &[u8]) -> Result<Update> {
        let version = self
            .levels
            .get(level)
            .copied()
            .flatten()
            .ok_or_else(|| Error::Protocol(format!("SDa level {level} is empty")))?;
        let plain = self
            .keys(level, version)
            .aead
            .open(&(level as u64).to_le_bytes(), sealed)?;
        Update::decode(&plain)
    }

    /// One update: a new entry, merged with the full levels below the
    /// first empty one.
    fn update_one(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        update: Update,
    ) -> Result<()> {
        let j = (0..MAX_LEVELS)
            .find(|&l| self.levels.get(l).copied().flatten().is_none())
            .ok_or_else(|| Error::InvalidArgument("SDa index is full".into()))?;
        let merged: Vec<u8> = (0..j as u8).collect();
        let mut updates = Vec::with_capacity(1 << j);
        if j > 0 {
            let fetched = match channel::call(
                channel,
                &Request::Fetch {
                    levels: merged.clone(),
                },
            )? {
                Response::Levels(l) if l.len() == j => l,
                other => return Err(Error::unexpected("SDa", &other)),
            };
            for (level, items) in fetched.iter().enumerate() {
                if items.len() != 1 << level {
                    return Err(Error::Protocol(format!(
                        "SDa level {level} holds {} entries",
                        items.len()
                    )));
                }
                for sealed in items {
                    updates.push(self.open(level, sealed)?);
                }
            }
        }
        updates.push(update);
        for l in 0..j {
            self.levels[l] = None;
        }
        let entries = self.build(rng, j, &updates)?;
        common::call_answered(
            channel,
            "SDa",
            &Request::Build {
                level: j as u8,
                entries,
                drop: merged,
            },
            Response::Done,
        )
    }
}

impl KeywordClient for SdaClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn setup_checked(&mut self, Io { rng, channel }: Io<'_>, db: &Multimap) -> Result<()> {
        common::call_answered(channel, "SDa", &Request::Reset, Response::Done)?;
        self.levels.clear();
        self.seq = 0;
        let all = shuffled_additions(rng, &mut self.seq, db);
        // The binary decomposition of the count: one level per set bit.
        for (level, now) in by_set_bits(&all) {
            let entries = self.build(rng, level, now)?;
            // A large level goes in several requests: a `Build` with
            // the first part, then `Extend`s, each under
            // `MAX_PREPARED_REQUEST`.
            let mut rest = entries.into_iter().peekable();
            let mut first = true;
            while first || rest.peek().is_some() {
                let entries = common::take_chunk(&mut rest, |(_, v)| LABEL_LEN + 8 + v.len());
                let level = level as u8;
                let request = if first {
                    Request::Build {
                        level,
                        entries,
                        drop: Vec::new(),
                    }
                } else {
                    Request::Extend { level, entries }
                };
                first = false;
                common::call_answered(channel, "SDa", &request, Response::Done)?;
            }
        }
        Ok(())
    }

    fn update_checked(
        &mut self,
        Io { rng, channel }: Io<'_>,
        update: api::Update<'_>,
    ) -> Result<()> {
        for u in sequenced("SDa", &mut self.seq, update)? {
            self.update_one(rng, channel, u)?;
        }
        Ok(())
    }

    fn search(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        keyword: &[u8],
    ) -> Result<Vec<DocId>> {
        let full = self.full_levels();
        search_containers(
            "SDa",
            keyword,
            &full,
            |l| {
                let v = self.levels[usize::from(l)].unwrap_or_default();
                self.keys(usize::from(l), v).label_key(keyword)
            },
            |tokens| match channel::call(channel, &Request::Search { tokens })? {
                Response::Found(f) if f.len() == full.len() => Ok(f),
                other => Err(Error::unexpected("SDa", &other)),
            },
            |l, sealed| self.open(usize::from(l), sealed),
        )
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        sesame_core::wire::encode(&State {
            master: *self.master.as_bytes(),
            seq: self.seq,
            builds: self.builds,
            levels: self.levels.clone(),
        })
    }
}

fn level_prefix(level: u8) -> [u8; 2] {
    [b'L', level]
}

fn entry_key(level: u8, label: &[u8; LABEL_LEN]) -> Vec<u8> {
    let mut k = level_prefix(level).to_vec();
    k.extend_from_slice(label);
    k
}

/// The server half of SDa (and of the static levels in general): levels
/// of label → sealed entry.
pub struct SdServer {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for SdServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SdServer").finish_non_exhaustive()
    }
}

impl SdServer {
    /// A server keeping its levels in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    fn drop_level(&self, level: u8, batch: &mut WriteBatch) -> Result<()> {
        for (k, _) in self.store.scan_prefix(&level_prefix(level))? {
            batch.delete(k);
        }
        Ok(())
    }
}

impl Handler for SdServer {
    type Request = Request;
    type Response = Response;

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::Reset => {
                common::clear(self.store.as_ref(), b"")?;
                Ok(Response::Done)
            }
            Request::Fetch { levels } => {
                let mut out = Vec::with_capacity(levels.len());
                for l in levels {
                    let items = self.store.scan_prefix(&level_prefix(l))?;
                    out.push(items.into_iter().map(|(_, v)| v).collect());
                }
                Ok(Response::Levels(out))
            }
            Request::Build {
                level,
                entries,
                drop,
            } => {
                let mut batch = WriteBatch::with_capacity(entries.len());
                for l in drop.iter().copied().chain([level]) {
                    self.drop_level(l, &mut batch)?;
                }
                for (label, value) in entries {
                    batch.put(entry_key(level, &label), value);
                }
                self.store.write(batch)?;
                Ok(Response::Done)
            }
            Request::Extend { level, entries } => {
                let mut batch = WriteBatch::with_capacity(entries.len());
                for (label, value) in entries {
                    batch.put(entry_key(level, &label), value);
                }
                self.store.write(batch)?;
                Ok(Response::Done)
            }
            Request::Search { tokens } => Ok(Response::Found(found_by_label(
                self.store.as_ref(),
                tokens,
                entry_key,
            )?)),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}
