//! SDd: the de-amortised variant of SDa (Demertzis, Ghareh Chamani,
//! Papadopoulos and Papamanthou, NDSS 2020): every level holds up to three
//! buffers, and each update moves a fixed number of entries of the ongoing
//! merges, so that no update pays for a whole rebuild. See
//! `docs/schemes/sda_sdd.md`.

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

use super::levels::*;
use crate::api::{DocId, KeywordClient, KeywordScheme, Multimap, UpdateOp};
use crate::common::{self};

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
pub fn scheme() -> KeywordScheme {
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

#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct SddState {
    master: [u8; 32],
    seq: u64,
    next_buffer: u64,
    /// Buffer ids and merge cursors.
    #[zeroize(skip)]
    levels: Vec<Level>,
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
                other => return Err(Error::unexpected("SDd", &other)),
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
            other => Err(Error::unexpected("SDd", &other)),
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
            other => return Err(Error::unexpected("SDd", &other)),
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
            other => return Err(Error::unexpected("SDd", &other)),
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
