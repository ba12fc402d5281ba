//! The client half: keys, the Merkle root, tokens, and the check of every
//! answer against the root.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{channel, Channel, Error, Params, Result, SchemeDescriptor};
use sesame_crypto::key::Key;
use sesame_crypto::prf::HmacPrf;

use super::{
    add_in, address, cell_leaf, defaults, del_in, dual_cell, dual_pad, free_cell, head_value,
    meta_cell, node_cell, node_pad, pair_cell, parent, search_in, ts_cell, update_digest,
    verify_run, xor_into, Access, AddItem, AddToken, Cell, DelToken, Request, Response,
    SearchToken, AD, AS, DEPTH, DESCRIPTOR, DUAL_LEN, MAX_PROBES, META, NODE_LEN, NONCE_LEN, PAIRS,
    TS,
};
use crate::api::{DocId, Io, KeywordClient, Multimap, Update, UpdateOp};
use crate::common;

/// The saved state: key, root, and the encoded update request whose
/// answer was lost, if any.
#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    /// [`STATE_MAGIC`]: tells this format from [`StateV1`].
    magic: [u8; 4],
    master: [u8; 32],
    root: [u8; 32],
    pending: Option<Vec<u8>>,
}

const STATE_MAGIC: [u8; 4] = *b"KPR2";

/// The state as saved before lost answers were kept: key and root.
#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct StateV1 {
    master: [u8; 32],
    root: [u8; 32],
}

/// The client half of KPR12: the master key (from which `K1`, `K2`, `K3`
/// derive) and the Merkle root of the index.
///
/// An update whose answer does not arrive (the call fails after sending)
/// is kept as pending: before its next request the client asks the server
/// whether that update was the last one applied
/// ([`Request::LastUpdate`]); if so it checks the proof the server kept
/// and moves its root, as if the answer had come; if not, the update did
/// not happen. A server that denies an update it applied, keeping it,
/// leaves the client's root behind: every later answer then fails
/// verification ([`Error::Crypto`]); none is accepted wrongly. A server
/// that instead puts its whole store back as it was before the update
/// (its record of the last update included) and denies it is believed:
/// its store is then exactly the one the client's root describes, as
/// when the request never arrived, so the two cannot be told apart; the
/// client's view stays true (no answer holds the update, and the update
/// sent again is applied). See `docs/schemes/kpr12.md`.
pub struct Kpr12Client {
    master: Key<32>,
    f: HmacPrf,
    g: HmacPrf,
    p: HmacPrf,
    root: [u8; 32],
    pending: Option<Request>,
}

impl std::fmt::Debug for Kpr12Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kpr12Client")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl Kpr12Client {
    /// A client with a fresh key and an empty index. KPR12 has no
    /// parameters.
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        params.only(DESCRIPTOR.name, &[])?;
        Ok(Self::with_key(Key::generate(rng), empty_root()))
    }

    fn with_key(master: Key<32>, root: [u8; 32]) -> Self {
        Self {
            f: HmacPrf::new(&master.derive("sesame-sse/kpr12/k1")),
            g: HmacPrf::new(&master.derive("sesame-sse/kpr12/k2")),
            p: HmacPrf::new(&master.derive("sesame-sse/kpr12/k3")),
            master,
            root,
            pending: None,
        }
    }

    /// A client from saved state (either format).
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        if let Ok(s) = sesame_core::wire::decode::<State>(bytes) {
            if s.magic != STATE_MAGIC {
                return Err(Error::Malformed("KPR12 state of an unknown format".into()));
            }
            let mut client = Self::with_key(Key::from_bytes(s.master), s.root);
            if let Some(p) = &s.pending {
                client.pending = Some(sesame_core::wire::decode(p)?);
            }
            return Ok(client);
        }
        let s: StateV1 = sesame_core::wire::decode(bytes)?;
        Ok(Self::with_key(Key::from_bytes(s.master), s.root))
    }

    /// Whether an update's answer was lost and the server has not yet been
    /// asked about it.
    pub fn has_pending_update(&self) -> bool {
        self.pending.is_some()
    }

    /// Settles an update whose answer was lost: asks the server whether it
    /// was the last update applied and, if so, checks its proof and moves
    /// the root. Called before every request; does nothing when no update
    /// is pending.
    pub fn resync(&mut self, channel: &mut dyn Channel) -> Result<()> {
        let Some(pending) = self.pending.take() else {
            return Ok(());
        };
        let digest = update_digest(&pending)?;
        let answer = match channel::call(channel, &Request::LastUpdate { digest }) {
            Ok(a) => a,
            Err(e) => {
                self.pending = Some(pending);
                return Err(e);
            }
        };
        match (answer, &pending) {
            (Response::NotApplied, _) => Ok(()),
            (Response::Updated(proof), Request::Add(token)) => self.apply_add(token, &proof),
            (Response::Updated(proof), Request::Del(token)) => self.apply_del(token, &proof),
            (other, _) => {
                self.pending = Some(pending);
                Err(Error::unexpected("KPR12", &other))
            }
        }
    }

    /// Sends an update and checks its proof; keeps it as pending when the
    /// call fails, since the server may have applied it.
    fn send_update(&mut self, channel: &mut dyn Channel, request: Request) -> Result<()> {
        let answer = match channel::call(channel, &request) {
            Ok(a) => a,
            Err(e) => {
                self.pending = Some(request);
                return Err(e);
            }
        };
        match (answer, &request) {
            (Response::Updated(proof), Request::Add(token)) => self.apply_add(token, &proof),
            (Response::Updated(proof), Request::Del(token)) => self.apply_del(token, &proof),
            (other, _) => Err(Error::unexpected("KPR12", &other)),
        }
    }

    /// The Merkle root the client holds.
    pub fn root(&self) -> [u8; 32] {
        self.root
    }

    fn label(&self, w: &[u8]) -> [u8; 32] {
        self.f.eval_concat(&[b"w", w])
    }

    fn file_key(&self, f: DocId) -> [u8; 32] {
        self.p.eval_concat(&[b"f", &f.to_le_bytes()])
    }

    fn pair_tag(&self, f: DocId, w: &[u8]) -> [u8; 32] {
        self.f.eval_concat(&[b"p", &f.to_le_bytes(), w])
    }

    /// The search token of `keyword`.
    pub fn keyword_token(&self, keyword: &[u8]) -> SearchToken {
        let g = self.g.eval_concat(&[b"w", keyword]);
        let mut pad = [0u8; 16];
        pad.copy_from_slice(&g[..16]);
        SearchToken {
            label: self.label(keyword),
            pad,
            key: self.p.eval_concat(&[b"w", keyword]),
        }
    }

    /// Verify: the identifiers of the search `token` was made for, computed
    /// from the authenticated cells of `proof`, if they are exactly
    /// `claimed` (in any order); [`Error::Crypto`] otherwise.
    pub fn verify(
        &self,
        token: &SearchToken,
        claimed: &[DocId],
        proof: &[Access],
    ) -> Result<Vec<DocId>> {
        let (ids, _) = verify_run(self.root, proof, |m| search_in(m, token))?;
        let ids = common::normalise(ids);
        if ids != common::normalise(claimed.to_vec()) {
            return Err(Error::Crypto);
        }
        Ok(ids)
    }

    /// AddTok: the add token of (`doc`, `keywords`).
    pub fn add_token(
        &self,
        rng: &mut dyn CryptoRngCore,
        doc: DocId,
        keywords: &[Vec<u8>],
    ) -> Result<AddToken> {
        common::check_doc(doc)?;
        let kf = self.file_key(doc);
        let words: BTreeSet<&Vec<u8>> = keywords.iter().collect();
        let mut items: Vec<AddItem> = words
            .into_iter()
            .map(|w| {
                let t = self.keyword_token(w);
                let mut node_r = [0u8; NONCE_LEN];
                rng.fill_bytes(&mut node_r);
                let mut node = [0u8; NODE_LEN];
                node[..8].copy_from_slice(&doc.to_le_bytes());
                xor_into(&mut node, &node_pad(&t.key, &node_r));
                let mut dual_r = [0u8; NONCE_LEN];
                rng.fill_bytes(&mut dual_r);
                let mut dual = vec![0u8; DUAL_LEN];
                dual[24..].copy_from_slice(&t.label);
                xor_into(&mut dual, &dual_pad(&kf, &dual_r));
                AddItem {
                    label: t.label,
                    pad: t.pad,
                    pair: self.pair_tag(doc, w),
                    node,
                    node_r,
                    dual,
                    dual_r,
                }
            })
            .collect();
        items.sort_unstable_by_key(|i| i.label);
        Ok(AddToken { items })
    }

    /// DelTok: the delete token of (`doc`, `keywords`).
    pub fn del_token(&self, doc: DocId, keywords: &[Vec<u8>]) -> Result<DelToken> {
        common::check_doc(doc)?;
        let words: BTreeSet<&Vec<u8>> = keywords.iter().collect();
        let mut pairs: Vec<[u8; 32]> = words.into_iter().map(|w| self.pair_tag(doc, w)).collect();
        pairs.sort_unstable();
        Ok(DelToken {
            key: self.file_key(doc),
            pairs,
        })
    }

    /// Checks the proof of an Add the server ran and moves the root.
    pub fn apply_add(&mut self, token: &AddToken, proof: &[Access]) -> Result<()> {
        let ((), root) = verify_run(self.root, proof, |m| add_in(m, token))?;
        self.root = root;
        Ok(())
    }

    /// Checks the proof of a Del the server ran and moves the root.
    pub fn apply_del(&mut self, token: &DelToken, proof: &[Access]) -> Result<()> {
        let ((), root) = verify_run(self.root, proof, |m| del_in(m, token))?;
        self.root = root;
        Ok(())
    }

    /// IndexGen: the cells of the index of `db` (nodes at random places
    /// of `As`, a quarter more free nodes) and their Merkle root, which
    /// the client now holds.
    pub fn index_gen(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        db: &Multimap,
    ) -> Result<(Vec<Cell>, [u8; 32])> {
        common::check_ids(db)?;
        let lists: Vec<(&Vec<u8>, Vec<DocId>)> = db
            .iter()
            .map(|(w, ids)| (w, common::normalise(ids.clone())))
            .filter(|(_, ids)| !ids.is_empty())
            .collect();
        let n: usize = lists.iter().map(|(_, ids)| ids.len()).sum();
        let size = n + n / 4 + 8;
        // A random permutation of 1..=size places the nodes.
        let mut places: Vec<u64> = (1..=size as u64).collect();
        for i in (1..places.len()).rev() {
            let j = (rng.next_u64() % (i as u64 + 1)) as usize;
            places.swap(i, j);
        }
        let mut cells: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        let mut file_keys: HashMap<DocId, [u8; 32]> = HashMap::new();
        let mut next_place = places.iter().copied();
        for (w, ids) in lists {
            let t = self.keyword_token(w);
            let at: Vec<u64> = next_place.by_ref().take(ids.len()).collect();
            for (j, &id) in ids.iter().enumerate() {
                let me = at[j];
                let prev = if j == 0 { 0 } else { at[j - 1] };
                let next = at.get(j + 1).copied().unwrap_or(0);
                let mut r = [0u8; NONCE_LEN];
                rng.fill_bytes(&mut r);
                let mut node = [0u8; NODE_LEN];
                node[..8].copy_from_slice(&id.to_le_bytes());
                node[8..].copy_from_slice(&next.to_le_bytes());
                xor_into(&mut node, &node_pad(&t.key, &r));
                cells.insert(address(AS, me), node_cell(&node, &r));
                let kf = *file_keys.entry(id).or_insert_with(|| self.file_key(id));
                rng.fill_bytes(&mut r);
                let mut dual = vec![0u8; DUAL_LEN];
                dual[..8].copy_from_slice(&me.to_le_bytes());
                dual[8..16].copy_from_slice(&prev.to_le_bytes());
                dual[16..24].copy_from_slice(&next.to_le_bytes());
                dual[24..].copy_from_slice(&t.label);
                xor_into(&mut dual, &dual_pad(&kf, &r));
                cells.insert(address(AD, me), dual_cell(&dual, &r));
                let tag = self.pair_tag(id, w);
                let slot = local_slot(&cells, PAIRS, &tag)?;
                cells.insert(slot, pair_cell(&tag, Some(me)));
            }
            let mut v = head_value(at[0]);
            xor_into(&mut v, &t.pad);
            let slot = local_slot(&cells, TS, &t.label)?;
            cells.insert(slot, ts_cell(&t.label, &v));
        }
        let free: Vec<u64> = next_place.collect();
        for (k, &i) in free.iter().enumerate() {
            cells.insert(
                address(AS, i),
                free_cell(free.get(k + 1).copied().unwrap_or(0)),
            );
        }
        cells.insert(
            address(META, 0),
            meta_cell(free.first().copied().unwrap_or(0), size as u64 + 1),
        );
        let leaves: BTreeMap<u64, [u8; 32]> =
            cells.iter().map(|(&a, c)| (a, cell_leaf(a, c))).collect();
        let nodes = bulk_nodes(&leaves, |l, _| Ok(defaults()[l]))?;
        let root = nodes
            .last()
            .map(|n| n.2)
            .ok_or_else(|| Error::Protocol("KPR12 tree without a root".into()))?;
        self.root = root;
        Ok((cells.into_iter().collect(), root))
    }
}

/// The root of the empty index.
pub(super) fn empty_root() -> [u8; 32] {
    defaults()[DEPTH]
}

/// The slot of `key` in a table being built (first free slot of its probe
/// sequence).
pub(super) fn local_slot(
    cells: &BTreeMap<u64, Vec<u8>>,
    region: u64,
    key: &[u8; 32],
) -> Result<u64> {
    let mut start = [0u8; 8];
    start.copy_from_slice(&key[..8]);
    let start = u64::from_le_bytes(start);
    (0..MAX_PROBES)
        .map(|p| address(region, start.wrapping_add(p)))
        .find(|a| !cells.contains_key(a))
        .ok_or_else(|| Error::InvalidArgument("KPR12 dictionary probe sequence too long".into()))
}

/// Every node of the tree that changes when the leaves `leaves` are set,
/// as `(level, index, hash)`, level by level up to the root (last);
/// `sibling(level, index)` gives the unchanged nodes.
pub(super) fn bulk_nodes(
    leaves: &BTreeMap<u64, [u8; 32]>,
    mut sibling: impl FnMut(usize, u64) -> Result<[u8; 32]>,
) -> Result<Vec<(usize, u64, [u8; 32])>> {
    let mut out: Vec<(usize, u64, [u8; 32])> = leaves.iter().map(|(&i, &h)| (0, i, h)).collect();
    let mut level = leaves.clone();
    if level.is_empty() {
        out.push((DEPTH, 0, empty_root()));
        return Ok(out);
    }
    for l in 0..DEPTH {
        let mut up = BTreeMap::new();
        for (&i, h) in &level {
            let p = i >> 1;
            if up.contains_key(&p) {
                continue;
            }
            let s = match level.get(&(i ^ 1)) {
                Some(s) => *s,
                None => sibling(l, i ^ 1)?,
            };
            up.insert(p, parent(i, 0, h, &s));
        }
        out.extend(up.iter().map(|(&i, &h)| (l + 1, i, h)));
        level = up;
    }
    Ok(out)
}

impl KeywordClient for Kpr12Client {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn setup_checked(&mut self, Io { rng, channel }: Io<'_>, db: &Multimap) -> Result<()> {
        let (cells, root) = self.index_gen(rng, db)?;
        common::upload(
            channel,
            cells,
            |c| 16 + c.1.len(),
            |reset, cells| Request::Put { reset, cells },
            common::answered("KPR12", Response::Stored),
        )?;
        self.root = root;
        self.pending = None;
        Ok(())
    }

    fn update_checked(
        &mut self,
        Io { rng, channel }: Io<'_>,
        (op, doc, keywords): Update<'_>,
    ) -> Result<()> {
        self.resync(channel)?;
        match op {
            UpdateOp::Add => {
                let token = self.add_token(rng, doc, keywords)?;
                if token.items.is_empty() {
                    return Ok(());
                }
                self.send_update(channel, Request::Add(token))
            }
            UpdateOp::Delete => {
                let token = self.del_token(doc, keywords)?;
                if token.pairs.is_empty() {
                    return Ok(());
                }
                self.send_update(channel, Request::Del(token))
            }
        }
    }

    fn search(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        keyword: &[u8],
    ) -> Result<Vec<DocId>> {
        self.resync(channel)?;
        let request = Request::Search(self.keyword_token(keyword));
        match channel::call(channel, &request)? {
            Response::Found { ids, proof } => {
                let Request::Search(token) = &request else {
                    return Err(Error::Protocol("KPR12 request changed".into()));
                };
                self.verify(token, &ids, &proof)
            }
            other => Err(Error::unexpected("KPR12", &other)),
        }
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        let s = State {
            magic: STATE_MAGIC,
            master: *self.master.as_bytes(),
            root: self.root,
            pending: self
                .pending
                .as_ref()
                .map(sesame_core::wire::encode)
                .transpose()?,
        };
        sesame_core::wire::encode(&s)
    }
}
