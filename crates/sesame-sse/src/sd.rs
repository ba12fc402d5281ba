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
    SchemeDescriptor, SchemeKind, Store, Typed, WriteBatch,
};
use sesame_crypto::aead::Aes256GcmSiv;
use sesame_crypto::key::Key;
use sesame_crypto::prf::{Aes128Prf, HmacPrf};

use crate::api::{DocId, KeywordClient, KeywordScheme, Multimap, UpdateOp};
use crate::common::{self, Tag};

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
    KeywordScheme {
        descriptor: &DESCRIPTOR,
        params: &[],
        new_client: |rng, params| Ok(Box::new(SdaClient::new(rng, params)?)),
        restore_client: |bytes| Ok(Box::new(SdaClient::restore(bytes)?)),
        new_server: Some(|store, _| Ok(Box::new(Typed(SdServer::new(store))))),
    }
}

/// Bytes of a label.
pub const LABEL_LEN: usize = 16;
/// Most levels (`2^64` updates).
const MAX_LEVELS: usize = 64;
/// Longest keyword an entry carries.
const MAX_KEYWORD: usize = 1 << 16;

/// Bytes of an entry before its keyword: sequence number, operation,
/// identifier, keyword length.
const ENTRY_HEAD: usize = 8 + 1 + 8 + 4;

/// Entries are padded to a multiple of this many bytes.
const ENTRY_PAD: usize = 64;

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

/// A decrypted update entry.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Update {
    keyword: Vec<u8>,
    id: DocId,
    add: bool,
    seq: u64,
}

impl Update {
    /// `seq ‖ add ‖ id ‖ keyword length (u32 LE) ‖ keyword`, padded with
    /// zeros to a multiple of [`ENTRY_PAD`] bytes, so that sealed entries
    /// of keywords up to 43 bytes all have one length.
    fn encode(&self) -> Vec<u8> {
        let len = ENTRY_HEAD + self.keyword.len();
        let mut out = Vec::with_capacity(len.next_multiple_of(ENTRY_PAD));
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.push(u8::from(self.add));
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&(self.keyword.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.keyword);
        out.resize(len.next_multiple_of(ENTRY_PAD), 0);
        out
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        let bad = || Error::Protocol("SDa entry of a bad length".into());
        if bytes.len() < ENTRY_HEAD
            || !bytes.len().is_multiple_of(ENTRY_PAD)
            || bytes.len() > (ENTRY_HEAD + MAX_KEYWORD).next_multiple_of(ENTRY_PAD)
        {
            return Err(bad());
        }
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&bytes[..8]);
        let add = match bytes[8] {
            0 => false,
            1 => true,
            _ => return Err(Error::Protocol("SDa entry with a bad operation".into())),
        };
        let mut id = [0u8; 8];
        id.copy_from_slice(&bytes[9..17]);
        let mut len = [0u8; 4];
        len.copy_from_slice(&bytes[17..ENTRY_HEAD]);
        let end = ENTRY_HEAD + u32::from_le_bytes(len) as usize;
        let (keyword, padding) = (bytes.get(ENTRY_HEAD..end).ok_or_else(bad)?, &bytes[end..]);
        if padding.len() >= ENTRY_PAD || padding.iter().any(|&b| b != 0) {
            return Err(bad());
        }
        Ok(Update {
            keyword: keyword.to_vec(),
            id: DocId::from_le_bytes(id),
            add,
            seq: u64::from_le_bytes(seq),
        })
    }
}

/// The keys of one level version.
struct LevelKeys {
    aead: Aes256GcmSiv,
    labels: HmacPrf,
}

impl LevelKeys {
    fn label_key(&self, keyword: &[u8]) -> [u8; 16] {
        let full = self.labels.eval_bytes(keyword);
        let mut k = [0u8; 16];
        k.copy_from_slice(&full[..16]);
        k
    }
}

/// The sequenced updates of (`doc`, `keywords`), numbered after `seq`
/// (advanced): the update path shared by SDa and SDd.
fn sequenced(
    scheme: &str,
    seq: &mut u64,
    op: UpdateOp,
    doc: DocId,
    keywords: &[Vec<u8>],
) -> Result<Vec<Update>> {
    if doc == common::PAD {
        return Err(Error::InvalidArgument(format!(
            "document identifier {} is reserved",
            common::PAD
        )));
    }
    let mut out = Vec::with_capacity(keywords.len());
    for w in keywords {
        if w.len() > MAX_KEYWORD {
            return Err(Error::InvalidArgument(format!("{scheme} keyword too long")));
        }
        *seq += 1;
        out.push(Update {
            keyword: w.clone(),
            id: doc,
            add: op == UpdateOp::Add,
            seq: *seq,
        });
    }
    Ok(out)
}

/// The live identifiers of `keyword` among opened updates: for each
/// identifier, the update with the highest sequence number decides.
fn live_ids(
    scheme: &str,
    keyword: &[u8],
    updates: impl IntoIterator<Item = Result<Update>>,
) -> Result<Vec<DocId>> {
    let mut latest: BTreeMap<DocId, (u64, bool)> = BTreeMap::new();
    for u in updates {
        let u = u?;
        if u.keyword != keyword {
            return Err(Error::Protocol(format!(
                "{scheme} entry of another keyword"
            )));
        }
        let e = latest.entry(u.id).or_insert((0, false));
        if u.seq >= e.0 {
            *e = (u.seq, u.add);
        }
    }
    Ok(latest
        .into_iter()
        .filter(|(_, (_, add))| *add)
        .map(|(id, _)| id)
        .collect())
}

/// The label of the `c`-th entry under a label key.
fn label(prf: &Aes128Prf, c: u64) -> [u8; LABEL_LEN] {
    prf.eval_block(&common::block(Tag::Label, c, 0))
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
        let key: Key<32> = Key::from_bytes(k);
        LevelKeys {
            aead: Aes256GcmSiv::new(&key.derive("aead")),
            labels: HmacPrf::new(&key.derive("labels")),
        }
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
        match channel::call(
            channel,
            &Request::Build {
                level: j as u8,
                entries,
                drop: merged,
            },
        )? {
            Response::Done => Ok(()),
            other => Err(Error::unexpected("SDa", &other)),
        }
    }
}

impl KeywordClient for SdaClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn setup(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        db: &Multimap,
    ) -> Result<()> {
        common::check_ids(db)?;
        match channel::call(channel, &Request::Reset)? {
            Response::Done => {}
            other => return Err(Error::unexpected("SDa", &other)),
        }
        self.levels.clear();
        self.seq = 0;
        let mut all = Vec::new();
        for (w, ids) in db {
            for id in common::normalise(ids.clone()) {
                self.seq += 1;
                all.push(Update {
                    keyword: w.clone(),
                    id,
                    add: true,
                    seq: self.seq,
                });
            }
        }
        // Pairs go to levels in random order: cut in keyword order, the
        // level a search hits would tell the keyword's alphabetical place.
        common::shuffle(rng, &mut all);
        // The binary decomposition of the count: one level per set bit.
        let mut rest = all.as_slice();
        for level in (0..MAX_LEVELS).rev() {
            let size = 1usize.checked_shl(level as u32).unwrap_or(usize::MAX);
            if rest.len() >= size {
                let (now, later) = rest.split_at(size);
                rest = later;
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
                    match channel::call(channel, &request)? {
                        Response::Done => {}
                        other => return Err(Error::unexpected("SDa", &other)),
                    }
                }
            }
        }
        Ok(())
    }

    fn update(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        op: UpdateOp,
        doc: DocId,
        keywords: &[Vec<u8>],
    ) -> Result<()> {
        for u in sequenced("SDa", &mut self.seq, op, doc, keywords)? {
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
        if full.is_empty() {
            return Ok(Vec::new());
        }
        let tokens: Vec<(u8, [u8; 16])> = full
            .iter()
            .map(|&l| {
                let v = self.levels[usize::from(l)].unwrap_or_default();
                (l, self.keys(usize::from(l), v).label_key(keyword))
            })
            .collect();
        let found = match channel::call(channel, &Request::Search { tokens })? {
            Response::Found(f) if f.len() == full.len() => f,
            other => return Err(Error::unexpected("SDa", &other)),
        };
        let this = &*self;
        let opened = full.iter().zip(&found).flat_map(|(&l, items)| {
            items
                .iter()
                .map(move |sealed| this.open(usize::from(l), sealed))
        });
        live_ids("SDa", keyword, opened)
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
                let mut batch = WriteBatch::new();
                for (k, _) in self.store.scan_prefix(b"")? {
                    batch.delete(k);
                }
                self.store.write(batch)?;
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
            Request::Search { tokens } => {
                let mut out = Vec::with_capacity(tokens.len());
                for (level, k1) in tokens {
                    let prf = Aes128Prf::new(&Key::from_bytes(k1));
                    let mut items = Vec::new();
                    for c in 0.. {
                        match self.store.get(&entry_key(level, &label(&prf, c)))? {
                            Some(v) => items.push(v),
                            None => break,
                        }
                    }
                    out.push(items);
                }
                Ok(Response::Found(out))
            }
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}

/// Descriptor of SDd.
pub static SDD_DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "sdd",
    title: "SDd (de-amortised dynamic SSE with small client storage)",
    citation: "I. Demertzis, J. Ghareh Chamani, D. Papadopoulos, C. Papamanthou. Dynamic \
               Searchable Encryption with Small Client Storage. NDSS 2020",
    kind: SchemeKind::DynamicSse,
    forward_private: true,
    backward_privacy: BackwardPrivacy::TypeII,
    queries: &[QueryKind::Exact],
    leakage: "Update: two rounds of fixed shape given the update count (which merge steps run \
              follows from it), the sizes of the entries moved; merged buffers are under fresh \
              keys (forward privacy). Search: per live buffer (at most three per level), the \
              number of the keyword's entries (additions and deletions alike), hence coarse \
              update times; the search pattern within a buffer's lifetime; no identifier \
              (response-hiding, the client filters deletions): backward privacy type II \
              for searches. But the merge is not oblivious: the entries each update fetches \
              show which input cursor advanced (the outcome of each keyword comparison), and \
              merged entries sit in keyword order, so a search shows the keyword's rank in each \
              buffer. Entries are padded to multiples of 64 bytes: their sizes reveal only \
              keywords longer than 43 bytes.",
    doc: "docs/schemes/sda_sdd.md",
};

/// The registry entry of SDd.
pub fn scheme_sdd() -> KeywordScheme {
    KeywordScheme {
        descriptor: &SDD_DESCRIPTOR,
        params: &[],
        new_client: |rng, params| Ok(Box::new(SddClient::new(rng, params)?)),
        restore_client: |bytes| Ok(Box::new(SddClient::restore(bytes)?)),
        new_server: Some(|store, _| Ok(Box::new(Typed(SddServer::new(store))))),
    }
}

/// Entries each ongoing merge moves per update: a merge of two buffers of
/// `2^ℓ` entries ends after `2^ℓ` updates, before level `ℓ` can fill
/// again.
const MERGE_STEP: usize = 2;

crate::common::redacted_debug!(SddRequest);

/// An SDd request.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SddRequest {
    /// Removes every buffer.
    Reset,
    /// Sealed entries by (buffer, position).
    Fetch {
        /// Positions to read.
        items: Vec<(u64, u64)>,
    },
    /// Writes entries and drops buffers.
    Put {
        /// (buffer, position, label, sealed entry).
        entries: Vec<(u64, u64, [u8; LABEL_LEN], Vec<u8>)>,
        /// Buffers to drop.
        drop: Vec<u64>,
    },
    /// The sealed entries of a keyword in each listed buffer.
    Search {
        /// (buffer, label key).
        tokens: Vec<(u64, [u8; 16])>,
    },
}

/// An SDd response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SddResponse {
    /// Done.
    Done,
    /// Sealed entries of a fetch, in order.
    Items(Vec<Option<Vec<u8>>>),
    /// Sealed entries of the keyword, per token.
    Found(Vec<Vec<Vec<u8>>>),
}

/// An ongoing merge of a level's OLDEST and OLDER buffers into NEW.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Merge {
    /// The buffer being built (one level up).
    target: u64,
    /// The two buffers merged (OLDEST, OLDER).
    from: [u64; 2],
    /// Entries consumed from each.
    cursor: [u64; 2],
    /// The last keyword emitted and how many of its entries so far.
    last: Option<(Vec<u8>, u64)>,
}

/// One level: OLDEST, OLDER and OLD buffers (ids) and the merge of OLDEST
/// and OLDER into the next level, if one runs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Level {
    slots: [Option<u64>; 3],
    merge: Option<Merge>,
}

#[derive(Serialize, Deserialize)]
struct SddState {
    master: [u8; 32],
    seq: u64,
    next_buffer: u64,
    levels: Vec<Level>,
}

impl Drop for SddState {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.master);
    }
}

/// The client half of SDd: master key, counters and, per level, three
/// buffer ids and the state of one merge (two cursors and the last
/// keyword emitted): `O(log N)` words.
pub struct SddClient {
    master: Key<32>,
    prf: HmacPrf,
    seq: u64,
    next_buffer: u64,
    levels: Vec<Level>,
}

impl std::fmt::Debug for SddClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SddClient")
            .field("updates", &self.seq)
            .field("levels", &self.levels.len())
            .finish_non_exhaustive()
    }
}

type Put = Vec<(u64, u64, [u8; LABEL_LEN], Vec<u8>)>;

impl SddClient {
    /// A client with a fresh key; SDd has no parameters.
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        params.only(SDD_DESCRIPTOR.name, &[])?;
        Ok(Self::with(Key::generate(rng), 0, 0, Vec::new()))
    }

    fn with(master: Key<32>, seq: u64, next_buffer: u64, levels: Vec<Level>) -> Self {
        Self {
            prf: HmacPrf::new(&master.derive("sesame-sse/sdd/buffers")),
            master,
            seq,
            next_buffer,
            levels,
        }
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let s: SddState = sesame_core::wire::decode(bytes)?;
        if s.levels.len() > MAX_LEVELS {
            return Err(Error::Malformed("SDd state with too many levels".into()));
        }
        Ok(Self::with(
            Key::from_bytes(s.master),
            s.seq,
            s.next_buffer,
            s.levels.clone(),
        ))
    }

    /// The live buffers (searched), as (level, buffer id).
    pub fn buffers(&self) -> Vec<(usize, u64)> {
        let mut out = Vec::new();
        for (l, level) in self.levels.iter().enumerate() {
            for b in level.slots.iter().flatten() {
                out.push((l, *b));
            }
        }
        out
    }

    fn keys(&self, buffer: u64) -> LevelKeys {
        let k = self.prf.eval_bytes(&buffer.to_le_bytes());
        let key: Key<32> = Key::from_bytes(k);
        LevelKeys {
            aead: Aes256GcmSiv::new(&key.derive("aead")),
            labels: HmacPrf::new(&key.derive("labels")),
        }
    }

    fn seal(
        &self,
        rng: &mut dyn CryptoRngCore,
        buffer: u64,
        position: u64,
        count: u64,
        u: &Update,
    ) -> Result<(u64, u64, [u8; LABEL_LEN], Vec<u8>)> {
        let keys = self.keys(buffer);
        let prf = Aes128Prf::new(&Key::from_bytes(keys.label_key(&u.keyword)));
        let sealed = keys.aead.seal(rng, &buffer.to_le_bytes(), &u.encode())?;
        Ok((buffer, position, label(&prf, count), sealed))
    }

    fn open(&self, buffer: u64, sealed: &[u8]) -> Result<Update> {
        let plain = self.keys(buffer).aead.open(&buffer.to_le_bytes(), sealed)?;
        Update::decode(&plain)
    }

    fn level(&mut self, l: usize) -> Result<&mut Level> {
        if l >= MAX_LEVELS {
            return Err(Error::InvalidArgument("SDd index is full".into()));
        }
        if self.levels.len() <= l {
            self.levels.resize(l + 1, Level::default());
        }
        Ok(&mut self.levels[l])
    }

    /// Puts a complete buffer into the first free slot of level `l`.
    fn place(&mut self, l: usize, buffer: u64) -> Result<()> {
        let level = self.level(l)?;
        let slot = level
            .slots
            .iter_mut()
            .find(|s| s.is_none())
            .ok_or_else(|| Error::Protocol(format!("SDd level {l} overflows")))?;
        *slot = Some(buffer);
        Ok(())
    }

    /// One update: one fetch round for the ongoing merges, one put round
    /// with their next entries and the new entry.
    fn update_one(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        update: Update,
    ) -> Result<()> {
        // Round 1: the next MERGE_STEP entries of both inputs of each merge.
        let mut items = Vec::new();
        for (l, level) in self.levels.iter().enumerate() {
            if let Some(m) = &level.merge {
                let size = 1u64 << l;
                for side in 0..2 {
                    let end = (m.cursor[side] + MERGE_STEP as u64).min(size);
                    for p in m.cursor[side]..end {
                        items.push((m.from[side], p));
                    }
                }
            }
        }
        let mut fetched: BTreeMap<(u64, u64), Update> = BTreeMap::new();
        if !items.is_empty() {
            let got = match channel::call(
                channel,
                &SddRequest::Fetch {
                    items: items.clone(),
                },
            )? {
                SddResponse::Items(v) if v.len() == items.len() => v,
                other => return Err(sdd_unexpected(&other)),
            };
            for (&(b, p), sealed) in items.iter().zip(got) {
                let sealed = sealed
                    .ok_or_else(|| Error::Protocol(format!("SDd buffer {b} lacks entry {p}")))?;
                fetched.insert((b, p), self.open(b, &sealed)?);
            }
        }
        // Merge steps, top level first so that a finished merge below finds
        // room above.
        let mut put: Put = Vec::new();
        let mut drop = Vec::new();
        for l in (0..self.levels.len()).rev() {
            let Some(mut m) = self.levels[l].merge.take() else {
                continue;
            };
            let size = 1u64 << l;
            for _ in 0..MERGE_STEP {
                let heads = [0, 1].map(|s| {
                    (m.cursor[s] < size)
                        .then(|| fetched.get(&(m.from[s], m.cursor[s])))
                        .flatten()
                });
                let side = match heads {
                    [Some(a), Some(b)] => usize::from(b.keyword < a.keyword),
                    [Some(_), None] => 0,
                    [None, Some(_)] => 1,
                    [None, None] => break,
                };
                let Some(u) = heads[side].cloned() else {
                    break;
                };
                let count = match &mut m.last {
                    Some((w, c)) if *w == u.keyword => {
                        *c += 1;
                        *c
                    }
                    last => {
                        *last = Some((u.keyword.clone(), 0));
                        0
                    }
                };
                let position = m.cursor[0] + m.cursor[1];
                put.push(self.seal(rng, m.target, position, count, &u)?);
                m.cursor[side] += 1;
            }
            if m.cursor == [size, size] {
                // NEW is complete: OLDEST and OLDER go, OLD becomes OLDEST.
                drop.extend(m.from);
                let level = &mut self.levels[l];
                level.slots = [level.slots[2], None, None];
                self.place(l + 1, m.target)?;
            } else {
                self.levels[l].merge = Some(m);
            }
        }
        // The new entry is a buffer of one at level 0.
        let buffer = self.next_buffer;
        self.next_buffer += 1;
        put.push(self.seal(rng, buffer, 0, 0, &update)?);
        self.place(0, buffer)?;
        // Full OLDEST and OLDER start a merge into a fresh buffer.
        for l in 0..self.levels.len() {
            let level = &self.levels[l];
            if let (None, [Some(a), Some(b), _]) = (&level.merge, level.slots) {
                let target = self.next_buffer;
                self.next_buffer += 1;
                self.levels[l].merge = Some(Merge {
                    target,
                    from: [a, b],
                    cursor: [0, 0],
                    last: None,
                });
            }
        }
        match channel::call(channel, &SddRequest::Put { entries: put, drop })? {
            SddResponse::Done => Ok(()),
            other => Err(sdd_unexpected(&other)),
        }
    }
}

impl KeywordClient for SddClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &SDD_DESCRIPTOR
    }

    fn setup(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        db: &Multimap,
    ) -> Result<()> {
        common::check_ids(db)?;
        match channel::call(channel, &SddRequest::Reset)? {
            SddResponse::Done => {}
            other => return Err(sdd_unexpected(&other)),
        }
        self.levels.clear();
        self.seq = 0;
        // SDd has no bulk build: every pair is an update, in random order
        // (in keyword order, which buffer holds a pair would follow the
        // keyword's alphabetical place).
        let mut pairs: Vec<(&Vec<u8>, DocId)> = Vec::new();
        for (w, ids) in db {
            for id in common::normalise(ids.clone()) {
                pairs.push((w, id));
            }
        }
        common::shuffle(rng, &mut pairs);
        for (w, id) in pairs {
            self.seq += 1;
            let u = Update {
                keyword: w.clone(),
                id,
                add: true,
                seq: self.seq,
            };
            self.update_one(rng, channel, u)?;
        }
        Ok(())
    }

    fn update(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        op: UpdateOp,
        doc: DocId,
        keywords: &[Vec<u8>],
    ) -> Result<()> {
        for u in sequenced("SDd", &mut self.seq, op, doc, keywords)? {
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
        let buffers = self.buffers();
        if buffers.is_empty() {
            return Ok(Vec::new());
        }
        let tokens: Vec<(u64, [u8; 16])> = buffers
            .iter()
            .map(|&(_, b)| (b, self.keys(b).label_key(keyword)))
            .collect();
        let found = match channel::call(channel, &SddRequest::Search { tokens })? {
            SddResponse::Found(f) if f.len() == buffers.len() => f,
            other => return Err(sdd_unexpected(&other)),
        };
        let this = &*self;
        let opened = buffers
            .iter()
            .zip(&found)
            .flat_map(|(&(_, b), items)| items.iter().map(move |sealed| this.open(b, sealed)));
        live_ids("SDd", keyword, opened)
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        sesame_core::wire::encode(&SddState {
            master: *self.master.as_bytes(),
            seq: self.seq,
            next_buffer: self.next_buffer,
            levels: self.levels.clone(),
        })
    }
}

fn sdd_unexpected(r: &SddResponse) -> Error {
    Error::Protocol(format!(
        "unexpected SDd response {}",
        match r {
            SddResponse::Done => "Done",
            SddResponse::Items(_) => "Items",
            SddResponse::Found(_) => "Found",
        }
    ))
}

fn buffer_key(kind: u8, buffer: u64, rest: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + rest.len());
    k.push(kind);
    k.extend_from_slice(&buffer.to_be_bytes());
    k.extend_from_slice(rest);
    k
}

/// The server half of SDd: buffers of positional entries (`a`) and of
/// labelled entries (`d`).
pub struct SddServer {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for SddServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SddServer").finish_non_exhaustive()
    }
}

impl SddServer {
    /// A server keeping its buffers in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }
}

impl Handler for SddServer {
    type Request = SddRequest;
    type Response = SddResponse;

    fn handle(&mut self, request: SddRequest) -> Result<SddResponse> {
        match request {
            SddRequest::Reset => {
                let mut batch = WriteBatch::new();
                for (k, _) in self.store.scan_prefix(b"")? {
                    batch.delete(k);
                }
                self.store.write(batch)?;
                Ok(SddResponse::Done)
            }
            SddRequest::Fetch { items } => {
                let mut out = Vec::with_capacity(items.len());
                for (b, p) in items {
                    out.push(self.store.get(&buffer_key(b'a', b, &p.to_be_bytes()))?);
                }
                Ok(SddResponse::Items(out))
            }
            SddRequest::Put { entries, drop } => {
                let mut batch = WriteBatch::with_capacity(2 * entries.len());
                for b in drop {
                    for kind in [b'a', b'd'] {
                        for (k, _) in self.store.scan_prefix(&buffer_key(kind, b, &[]))? {
                            batch.delete(k);
                        }
                    }
                }
                for (b, p, label, sealed) in entries {
                    batch.put(buffer_key(b'a', b, &p.to_be_bytes()), sealed.clone());
                    batch.put(buffer_key(b'd', b, &label), sealed);
                }
                self.store.write(batch)?;
                Ok(SddResponse::Done)
            }
            SddRequest::Search { tokens } => {
                let mut out = Vec::with_capacity(tokens.len());
                for (b, k1) in tokens {
                    let prf = Aes128Prf::new(&Key::from_bytes(k1));
                    let mut items = Vec::new();
                    for c in 0.. {
                        match self.store.get(&buffer_key(b'd', b, &label(&prf, c)))? {
                            Some(v) => items.push(v),
                            None => break,
                        }
                    }
                    out.push(items);
                }
                Ok(SddResponse::Found(out))
            }
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}
