//! Janus++: the forward- and backward-private scheme of Sun, Yuan, Liu,
//! Steinfeld, Sakzad, Vo and Nepal, "Practical Backward-Secure Searchable
//! Encryption from Symmetric Puncturable Encryption", CCS 2018, built on
//! symmetric puncturable encryption (SPE) from a puncturable PRF.
//!
//! SPE with a deletion bound `d`: the key of a keyword's epoch is `d`
//! shares, each the root of a GGM tree over 64-bit tags. A message with tag
//! `t` is encrypted under `H(t, ⊕_j GGM_j(t))`, which takes all `d` shares
//! (insertion cost grows with `d`). The `i`-th deletion punctures share
//! `i` at the deleted entry's tag and sends the punctured share (the GGM
//! co-path of `t`, 64 nodes) to the server. A search sends the shares not
//! yet punctured; the server combines them with the punctured ones it
//! holds, which decrypt every entry but the deleted ones.
//!
//! For forward privacy the epoch's token and shares are renewed after each
//! search; the server caches the result with its tags, and later
//! deletions of a cached identifier are applied at the next search (its
//! tag is punctured in a share of the new epoch). See
//! `docs/schemes/janus_pp.md` for leakage and deviations.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    BackwardPrivacy, Error, Handler, IoCounts, Params, QueryKind, Result, SchemeDescriptor,
    SchemeKind, Store, WriteBatch,
};
use sesame_crypto::ggm::{GgmTree, PuncturedKey};
use sesame_crypto::hash::sha256;
use sesame_crypto::key::Key;
use sesame_crypto::prf::HmacPrf;
use zeroize::Zeroize;

use crate::api::{DocId, Io, KeywordClient, KeywordScheme, Multimap, Update, UpdateOp};
use crate::common;
use crate::renewal::{label, setup_plan, RenewedSearch};

/// Entries per worker thread below which a document's additions are
/// computed on the calling thread alone.
const PARALLEL_ENTRIES: usize = 32;

/// Entries of one keyword that `setup` computes together: each share's
/// tree gives their leaves in one descent, holding about as many node
/// keys at a time.
const SHARED_ENTRIES: usize = 4096;

/// What an addition takes from the client's state: the keyword's epoch,
/// its counter, and the pair's generation.
type AddPlan = (u64, u64, u32);

/// Planned additions of one keyword in one epoch, computed together.
type AddGroup<'a> = (&'a [u8], u64, Vec<(DocId, AddPlan)>);

/// Descriptor of Janus++.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "janus-pp",
    title: "Janus++ (backward-private SSE from symmetric puncturable encryption)",
    citation: "S.-F. Sun, X. Yuan, J. K. Liu, R. Steinfeld, A. Sakzad, V. Vo, S. Nepal. \
               Practical Backward-Secure Searchable Encryption from Symmetric Puncturable \
               Encryption. ACM CCS 2018",
    kind: SchemeKind::DynamicSse,
    forward_private: true,
    backward_privacy: BackwardPrivacy::TypeIII,
    queries: &[QueryKind::Exact],
    leakage: "Update: an addition reveals one fixed-size entry per keyword, unlinkable to \
              earlier searches (fresh token and shares per epoch: forward privacy); a deletion \
              sends a punctured share under the keyword's epoch token, so the server links the \
              deletions of an epoch to each other and to the next search (not to additions); \
              the d+1-th deletion of a keyword since its last search is preceded by its search. \
              Search: the search pattern, the number of additions and deletions since the last \
              search, the punctured tags (hence which entries were deleted, and when), and the \
              live identifiers: backward privacy type III (the paper's claim for Janus++).",
    doc: "docs/schemes/janus_pp.md",
};

/// The registry entry of Janus++.
pub fn scheme() -> KeywordScheme {
    common::keyword_scheme!(
        &DESCRIPTOR,
        &[(
            "d",
            "8: deletions per keyword between two searches (shares of the SPE key)",
        )],
        JanusClient,
        JanusServer
    )
}

/// Depth of the share trees: tags are 64-bit.
const TAG_BITS: u8 = 64;
/// Largest deletion bound.
const MAX_D: usize = 1 << 16;
/// Bytes of a label and a token.
const LABEL_LEN: usize = 32;
/// Bytes of an entry: tag and encrypted identifier.
const ENTRY_LEN: usize = 16;

crate::common::redacted_debug!(Request);

/// A Janus++ request.
#[derive(Serialize, Deserialize)]
pub enum Request {
    /// Stores addition entries; `reset` first removes the earlier index.
    Put {
        /// Remove the earlier index first.
        reset: bool,
        /// (label, tag ‖ ciphertext).
        entries: Vec<([u8; LABEL_LEN], [u8; ENTRY_LEN])>,
    },
    /// Stores the `index`-th punctured share of the epoch of `tkn`.
    Delete {
        /// Epoch token.
        tkn: [u8; LABEL_LEN],
        /// Share index.
        index: u32,
        /// The share punctured at the deleted tag.
        share: PuncturedKey,
    },
    /// A search.
    Search {
        /// Epoch token.
        tkn: [u8; LABEL_LEN],
        /// Previous epoch's token (result cache), if any.
        prev: Option<[u8; LABEL_LEN]>,
        /// Additions in the epoch.
        count: u64,
        /// Punctured shares the server holds (deletions in the epoch).
        punctured: u32,
        /// The other shares, in order.
        shares: Vec<[u8; 16]>,
    },
}

/// A Janus++ response: stored, or the identifiers a search found.
pub type Response = crate::common::IdsResponse;

/// `H(t, k)`: the pad of an identifier.
fn pad(tag: u64, key: &[u8; 16]) -> [u8; 8] {
    let mut input = [0u8; 1 + 8 + 16];
    input[0] = b'j';
    input[1..9].copy_from_slice(&tag.to_le_bytes());
    input[9..].copy_from_slice(key);
    let d = sha256(&input);
    let mut out = [0u8; 8];
    out.copy_from_slice(&d[..8]);
    out
}

fn xor_into(acc: &mut [u8; 16], k: &Key<16>) {
    for (a, b) in acc.iter_mut().zip(k.as_bytes()) {
        *a ^= b;
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct KeywordState {
    epoch: u64,
    count: u64,
    deleted: u32,
    /// Deletions so far of each identifier: the generation of its tag.
    generations: BTreeMap<DocId, u32>,
}

#[derive(Serialize, Deserialize, zeroize::ZeroizeOnDrop)]
struct State {
    master: [u8; 32],
    d: u32,
    /// Counters and sets (no Zeroize for B-tree collections).
    #[zeroize(skip)]
    keywords: Vec<(Vec<u8>, KeywordState)>,
}

/// The client half of Janus++.
pub struct JanusClient {
    master: Key<32>,
    prf: HmacPrf,
    d: u32,
    keywords: BTreeMap<Vec<u8>, KeywordState>,
}

impl std::fmt::Debug for JanusClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JanusClient")
            .field("d", &self.d)
            .field("keywords", &self.keywords.len())
            .finish_non_exhaustive()
    }
}

impl JanusClient {
    /// A client with a fresh key; parameter `d`.
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        params.only(DESCRIPTOR.name, &["d"])?;
        let d: usize = params.get_or("d", 8usize)?;
        if d == 0 || d > MAX_D {
            return Err(Error::InvalidArgument(format!(
                "parameter d={d} must be between 1 and {MAX_D}"
            )));
        }
        Ok(Self::with(Key::generate(rng), d as u32, BTreeMap::new()))
    }

    fn with(master: Key<32>, d: u32, keywords: BTreeMap<Vec<u8>, KeywordState>) -> Self {
        Self {
            prf: HmacPrf::new(&master.derive("sesame-sse/janus++")),
            master,
            d,
            keywords,
        }
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let s: State = sesame_core::wire::decode(bytes)?;
        if s.d == 0 || s.d as usize > MAX_D {
            return Err(Error::Malformed("Janus++ state with a bad bound".into()));
        }
        let mut keywords = BTreeMap::new();
        for (w, st) in &s.keywords {
            if st.deleted > s.d || keywords.insert(w.clone(), st.clone()).is_some() {
                return Err(Error::Malformed("Janus++ state is inconsistent".into()));
            }
        }
        Ok(Self::with(Key::from_bytes(s.master), s.d, keywords))
    }

    fn keyed(&self, domain: u8, keyword: &[u8], a: u64, b: u64) -> [u8; 32] {
        self.prf.eval_concat(&[
            &[domain],
            &(keyword.len() as u64).to_le_bytes(),
            keyword,
            &a.to_le_bytes(),
            &b.to_le_bytes(),
        ])
    }

    fn token(&self, keyword: &[u8], epoch: u64) -> [u8; LABEL_LEN] {
        self.keyed(b't', keyword, epoch, 0)
    }

    fn tag(&self, keyword: &[u8], doc: DocId, generation: u32) -> u64 {
        let full = self.keyed(b'g', keyword, doc, u64::from(generation));
        let mut t = [0u8; 8];
        t.copy_from_slice(&full[..8]);
        u64::from_le_bytes(t)
    }

    fn share(&self, keyword: &[u8], epoch: u64, j: u32) -> [u8; 16] {
        let full = self.keyed(b's', keyword, epoch, u64::from(j));
        let mut k = [0u8; 16];
        k.copy_from_slice(&full[..16]);
        k
    }

    fn tree(&self, keyword: &[u8], epoch: u64, j: u32) -> Result<GgmTree> {
        GgmTree::new(Key::from_bytes(self.share(keyword, epoch, j)), TAG_BITS).map_err(Error::from)
    }

    #[cfg(test)]
    fn add_entry(&mut self, doc: DocId, keyword: &[u8]) -> Result<([u8; LABEL_LEN], [u8; 16])> {
        let plan = self.plan_add(doc, keyword);
        let mut entries = self.entries(keyword, plan.0, &[(doc, plan)])?;
        entries
            .pop()
            .ok_or_else(|| Error::Protocol("Janus++ entry missing".into()))
    }

    /// What an addition takes from the client's state: the keyword's epoch
    /// and counter (which it advances) and the pair's tag.
    fn plan_add(&mut self, doc: DocId, keyword: &[u8]) -> AddPlan {
        let st = self.keywords.entry(keyword.to_vec()).or_default();
        let g = st.generations.get(&doc).copied().unwrap_or(0);
        let plan = (st.epoch, st.count, g);
        st.count += 1;
        plan
    }

    /// The entries of planned additions of `keyword`, all in `epoch`, in
    /// order. Each share's tree gives the leaves of all their tags in one
    /// descent ([`GgmTree::leaves`]: the tags share the tree's upper
    /// levels, and the shares and the token are derived once); reads no
    /// mutable state.
    fn entries(
        &self,
        keyword: &[u8],
        epoch: u64,
        adds: &[(DocId, AddPlan)],
    ) -> Result<Vec<([u8; LABEL_LEN], [u8; 16])>> {
        let tags: Vec<u64> = adds
            .iter()
            .map(|(doc, (e, _, g))| {
                debug_assert_eq!(*e, epoch);
                self.tag(keyword, *doc, *g)
            })
            .collect();
        // SPE encryption under every share: O(d) GGM evaluations per tag.
        let mut keys = vec![[0u8; 16]; adds.len()];
        for j in 0..self.d {
            let leaves = self.tree(keyword, epoch, j)?.leaves(&tags)?;
            for (key, leaf) in keys.iter_mut().zip(&leaves) {
                xor_into(key, leaf);
            }
        }
        let tkn = self.token(keyword, epoch);
        let out = adds
            .iter()
            .zip(&tags)
            .zip(&keys)
            .map(|(((doc, (_, count, _)), &t), key)| {
                let p = pad(t, key);
                let mut entry = [0u8; ENTRY_LEN];
                entry[..8].copy_from_slice(&t.to_le_bytes());
                for (i, (a, b)) in doc.to_le_bytes().iter().zip(p).enumerate() {
                    entry[8 + i] = a ^ b;
                }
                (label(&tkn, *count), entry)
            })
            .collect();
        keys.zeroize();
        Ok(out)
    }

    /// The entries of groups of planned additions (each one keyword and
    /// epoch), group after group: on the calling thread for fewer than
    /// `2 * PARALLEL_ENTRIES` entries in all, otherwise on every core.
    /// The primitive calls made on other threads are counted as this
    /// thread's.
    fn compute(&self, groups: &[AddGroup<'_>]) -> Result<Vec<([u8; LABEL_LEN], [u8; 16])>> {
        let total: usize = groups.iter().map(|g| g.2.len()).sum();
        let run = |(w, epoch, adds): &AddGroup<'_>| self.entries(w, *epoch, adds);
        let parts = if total < 2 * PARALLEL_ENTRIES {
            groups.iter().map(run).collect::<Result<Vec<_>>>()?
        } else {
            common::par_map(groups, 1, run)?
        };
        Ok(parts.into_iter().flatten().collect())
    }

    /// The entries of one document's additions, planned in order; the
    /// additions of a keyword listed more than once share its trees'
    /// descents.
    fn add_entries(
        &mut self,
        doc: DocId,
        keywords: &[Vec<u8>],
    ) -> Result<Vec<([u8; LABEL_LEN], [u8; 16])>> {
        let mut groups: Vec<AddGroup<'_>> = Vec::with_capacity(keywords.len());
        let mut seen: BTreeMap<&[u8], usize> = BTreeMap::new();
        for w in keywords {
            let plan = self.plan_add(doc, w);
            match seen.get(w.as_slice()) {
                Some(&i) => groups[i].2.push((doc, plan)),
                None => {
                    seen.insert(w, groups.len());
                    groups.push((w, plan.0, vec![(doc, plan)]));
                }
            }
        }
        self.compute(&groups)
    }

    /// The entries of a fresh index of `db`: every pair planned in order,
    /// then each keyword's additions computed in groups of at most
    /// [`SHARED_ENTRIES`], split further so that every core gets work.
    fn setup_entries(&mut self, db: &Multimap) -> Result<Vec<([u8; LABEL_LEN], [u8; 16])>> {
        self.keywords.clear();
        let groups: Vec<_> = setup_plan(db, PARALLEL_ENTRIES, SHARED_ENTRIES, |id, w| {
            Ok(self.plan_add(id, w))
        })?
        .into_iter()
        .map(|(w, adds)| (w, 0, adds))
        .collect();
        self.compute(&groups)
    }

    fn delete_request(&mut self, doc: DocId, keyword: &[u8]) -> Result<Request> {
        let st = self.keywords.get(keyword).cloned().unwrap_or_default();
        if st.deleted >= self.d {
            return Err(Error::InvalidArgument(format!(
                "Janus++ allows {} deletions per keyword between searches: search first",
                self.d
            )));
        }
        let g = st.generations.get(&doc).copied().unwrap_or(0);
        let t = self.tag(keyword, doc, g);
        let share = self.tree(keyword, st.epoch, st.deleted)?.puncture(&[t])?;
        let request = Request::Delete {
            tkn: self.token(keyword, st.epoch),
            index: st.deleted,
            share,
        };
        let st = self.keywords.entry(keyword.to_vec()).or_default();
        st.deleted += 1;
        *st.generations.entry(doc).or_insert(0) += 1;
        Ok(request)
    }
}

impl RenewedSearch for JanusClient {
    type Request = Request;
    const NAME: &'static str = "Janus++";

    fn descriptor() -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    /// The search request for `keyword`, or `None` for a keyword never
    /// updated.
    fn search_request(&self, keyword: &[u8]) -> Result<Option<Request>> {
        let Some(st) = self.keywords.get(keyword) else {
            return Ok(None);
        };
        Ok(Some(Request::Search {
            tkn: self.token(keyword, st.epoch),
            prev: st.epoch.checked_sub(1).map(|e| self.token(keyword, e)),
            count: st.count,
            punctured: st.deleted,
            shares: (st.deleted..self.d)
                .map(|j| self.share(keyword, st.epoch, j))
                .collect(),
        }))
    }

    /// After a search the keyword moves to a fresh epoch: new token, new
    /// puncturable key, nothing punctured.
    fn renew(&mut self, keyword: &[u8]) {
        if let Some(st) = self.keywords.get_mut(keyword) {
            st.epoch += 1;
            st.count = 0;
            st.deleted = 0;
        }
    }
}

impl KeywordClient for JanusClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn setup_checked(&mut self, Io { channel, .. }: Io<'_>, db: &Multimap) -> Result<()> {
        let mut entries = self.setup_entries(db)?;
        entries.sort_unstable_by_key(|e| e.0);
        common::upload(
            channel,
            entries,
            |_| LABEL_LEN + ENTRY_LEN,
            |reset, entries| Request::Put { reset, entries },
            common::answered("Janus++", Response::Stored),
        )
    }

    fn prepares_updates(&self) -> bool {
        true
    }

    /// A deletion removes the pair from search results.
    fn supports_deletion(&self) -> bool {
        true
    }

    fn prepare_checked(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        (op, doc, keywords): Update<'_>,
    ) -> Result<Option<Vec<Vec<u8>>>> {
        match op {
            UpdateOp::Add => {
                // Planned in order, computed on every core (d GGM
                // evaluations each).
                let mut entries = self.add_entries(doc, keywords)?;
                entries.sort_unstable_by_key(|e| e.0);
                common::chunked_requests(
                    entries,
                    |_| LABEL_LEN + ENTRY_LEN,
                    |entries| Request::Put {
                        reset: false,
                        entries,
                    },
                )
                .map(Some)
            }
            UpdateOp::Delete => {
                let mut out = Vec::with_capacity(keywords.len());
                for w in keywords {
                    // A keyword whose d shares are all punctured is renewed
                    // first: its search moves the live entries to the cache
                    // of a fresh epoch (the server answers with identifiers,
                    // which the update ignores). The SDK applies prepared
                    // requests once (a replay record), as it does searches.
                    if self.keywords.get(w).is_some_and(|st| st.deleted >= self.d) {
                        if let Some(search) = self.search_request(w)? {
                            out.push(sesame_core::wire::encode(&search)?);
                            self.renew(w);
                        }
                    }
                    let request = self.delete_request(doc, w)?;
                    out.push(sesame_core::wire::encode(&request)?);
                }
                Ok(Some(out))
            }
        }
    }

    /// `Stored`, or the identifiers of a renewal search (see
    /// `prepare_update`).
    fn check_update_response(&self, response: &[u8]) -> Result<()> {
        match sesame_core::wire::decode(response)? {
            Response::Stored | Response::Ids(_) => Ok(()),
        }
    }

    crate::renewal::renewed_search_methods!();

    fn save_state(&self) -> Result<Vec<u8>> {
        sesame_core::wire::encode(&State {
            master: *self.master.as_bytes(),
            d: self.d,
            keywords: self
                .keywords
                .iter()
                .map(|(w, s)| (w.clone(), s.clone()))
                .collect(),
        })
    }
}

fn key(kind: u8, tkn: &[u8; LABEL_LEN], extra: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + LABEL_LEN + extra.len());
    k.push(kind);
    k.extend_from_slice(tkn);
    k.extend_from_slice(extra);
    k
}

/// The server half of Janus++.
pub struct JanusServer {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for JanusServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JanusServer").finish_non_exhaustive()
    }
}

impl JanusServer {
    /// A server keeping its index in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    fn search(
        &self,
        tkn: [u8; LABEL_LEN],
        prev: Option<[u8; LABEL_LEN]>,
        count: u64,
        punctured: u32,
        shares: &[[u8; 16]],
    ) -> Result<Vec<DocId>> {
        if punctured as usize > MAX_D || shares.len() > MAX_D {
            return Err(Error::InvalidArgument("Janus++ search too large".into()));
        }
        // What this search consumes (the epoch's shares and entries, the
        // previous epoch's cache) is deleted by the next epoch's search,
        // not by this one: a repeat of this search (after a lost answer)
        // reads the same and writes the same.
        let mut batch = WriteBatch::new();
        let mut consumed: Vec<Vec<u8>> = Vec::new();
        if let Some(p) = &prev {
            let list = key(b'z', p, &[]);
            if let Some(bytes) = self.store.get(&list)? {
                let keys: Vec<Vec<u8>> = sesame_core::wire::decode(&bytes)
                    .map_err(|_| Error::StoreCorrupt("Janus++ consumed list".into()))?;
                for k in keys {
                    batch.delete(k);
                }
                batch.delete(list);
            }
        }
        let mut held = Vec::with_capacity(punctured as usize);
        for j in 0..punctured {
            let k = key(b'p', &tkn, &j.to_le_bytes());
            let v = self
                .store
                .get(&k)?
                .ok_or_else(|| Error::InvalidArgument(format!("Janus++ share {j} missing")))?;
            let share: PuncturedKey = sesame_core::wire::decode(&v)
                .map_err(|_| Error::StoreCorrupt("Janus++ share".into()))?;
            held.push(share);
            consumed.push(k);
        }
        let trees = shares
            .iter()
            .map(|s| GgmTree::new(Key::from_bytes(*s), TAG_BITS).map_err(Error::from))
            .collect::<Result<Vec<_>>>()?;
        // The punctured shares' part of the key of tag t, or None if a
        // share is punctured at t.
        let held_part = |t: u64| -> Option<[u8; 16]> {
            let mut k = [0u8; 16];
            for s in &held {
                xor_into(&mut k, &s.leaf(t).ok()?);
            }
            Some(k)
        };
        // Decrypts a batch of live entries (tag, ciphertext, punctured
        // shares' part of the key): each unpunctured share's tree gives
        // the leaves of all the tags in one descent.
        let decrypt = |batch: &mut Vec<(u64, [u8; 8], [u8; 16])>,
                       result: &mut Vec<(DocId, u64)>|
         -> Result<()> {
            let tags: Vec<u64> = batch.iter().map(|e| e.0).collect();
            for tree in &trees {
                for (e, leaf) in batch.iter_mut().zip(tree.leaves(&tags)?) {
                    xor_into(&mut e.2, &leaf);
                }
            }
            for (t, ct, k) in batch.iter_mut() {
                let p = pad(*t, k);
                let mut id = [0u8; 8];
                for ((o, c), p) in id.iter_mut().zip(ct.iter()).zip(p) {
                    *o = c ^ p;
                }
                result.push((DocId::from_le_bytes(id), *t));
                k.zeroize();
            }
            batch.clear();
            Ok(())
        };
        let mut result: Vec<(DocId, u64)> = Vec::new();
        for p in prev.iter().chain([&tkn]) {
            if let Some(v) = self.store.get(&key(b'g', p, &[]))? {
                if !v.len().is_multiple_of(16) {
                    return Err(Error::StoreCorrupt("Janus++ cache".into()));
                }
                for rec in v.chunks_exact(16) {
                    let mut a = [0u8; 8];
                    let mut b = [0u8; 8];
                    a.copy_from_slice(&rec[..8]);
                    b.copy_from_slice(&rec[8..]);
                    let t = u64::from_le_bytes(b);
                    // A cached identifier deleted in this epoch.
                    if held.iter().all(|s| s.leaf(t).is_ok()) {
                        result.push((DocId::from_le_bytes(a), t));
                    }
                }
            }
        }
        let mut live = Vec::new();
        for c in 0..count {
            let k = key(b'e', &label(&tkn, c), &[]);
            let Some(v) = self.store.get(&k)? else {
                break;
            };
            consumed.push(k);
            if v.len() != ENTRY_LEN {
                return Err(Error::StoreCorrupt("Janus++ entry".into()));
            }
            let mut tb = [0u8; 8];
            tb.copy_from_slice(&v[..8]);
            let t = u64::from_le_bytes(tb);
            let Some(k) = held_part(t) else {
                continue;
            };
            let mut ct = [0u8; 8];
            ct.copy_from_slice(&v[8..]);
            live.push((t, ct, k));
            if live.len() == SHARED_ENTRIES {
                decrypt(&mut live, &mut result)?;
            }
        }
        decrypt(&mut live, &mut result)?;
        result.sort_unstable();
        result.dedup();
        let mut cache = Vec::with_capacity(16 * result.len());
        for (id, t) in &result {
            cache.extend_from_slice(&id.to_le_bytes());
            cache.extend_from_slice(&t.to_le_bytes());
        }
        batch.put(key(b'g', &tkn, &[]), cache);
        if let Some(p) = &prev {
            consumed.push(key(b'g', p, &[]));
        }
        batch.put(key(b'z', &tkn, &[]), sesame_core::wire::encode(&consumed)?);
        self.store.write(batch)?;
        Ok(common::normalise(
            result.into_iter().map(|(id, _)| id).collect(),
        ))
    }
}

impl Handler for JanusServer {
    type Request = Request;
    type Response = Response;

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::Put { reset, entries } => {
                let mut batch = WriteBatch::with_capacity(entries.len());
                if reset {
                    common::delete_prefix(self.store.as_ref(), b"", &mut batch)?;
                }
                for (l, e) in entries {
                    batch.put(key(b'e', &l, &[]), e.to_vec());
                }
                self.store.write(batch)?;
                Ok(Response::Stored)
            }
            Request::Delete { tkn, index, share } => {
                self.store.put(
                    &key(b'p', &tkn, &index.to_le_bytes()),
                    &sesame_core::wire::encode(&share)?,
                )?;
                Ok(Response::Stored)
            }
            Request::Search {
                tkn,
                prev,
                count,
                punctured,
                shares,
            } => Ok(Response::Ids(
                self.search(tkn, prev, count, punctured, &shares)?,
            )),
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The straightforward computation of an entry: one descent from the
    /// root of each share's tree per entry.
    fn reference_entry(
        c: &JanusClient,
        doc: DocId,
        keyword: &[u8],
        (epoch, count, g): AddPlan,
    ) -> ([u8; LABEL_LEN], [u8; 16]) {
        let t = c.tag(keyword, doc, g);
        let mut key = [0u8; 16];
        for j in 0..c.d {
            let leaf = c.tree(keyword, epoch, j).unwrap().leaf(t).unwrap();
            xor_into(&mut key, &leaf);
        }
        let p = pad(t, &key);
        let mut entry = [0u8; ENTRY_LEN];
        entry[..8].copy_from_slice(&t.to_le_bytes());
        for (i, (a, b)) in doc.to_le_bytes().iter().zip(p).enumerate() {
            entry[8 + i] = a ^ b;
        }
        (label(&c.token(keyword, epoch), count), entry)
    }

    #[test]
    fn entries_equal_the_straightforward_computation() {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(6);
        for params in ["", "d=1", "d=3"] {
            let params = Params::parse(params).unwrap();
            let mut c = JanusClient::new(&mut rng, &params).unwrap();
            let words: Vec<Vec<u8>> = (0..70).map(|i| format!("w{i}").into_bytes()).collect();
            // Earlier additions, a deletion (a new generation) and
            // searched keywords (a later epoch).
            for (i, w) in words[..10].iter().enumerate() {
                c.add_entry(1, w).unwrap();
                if i % 2 == 0 {
                    c.delete_request(1, w).unwrap();
                }
                if i % 3 == 0 {
                    c.renew(w);
                }
            }
            let mut doc_words = words.clone();
            doc_words.push(words[4].clone());
            for (doc, list) in [(1, &doc_words[..]), (9, &doc_words[..3])] {
                let mut copy = JanusClient::restore(&c.save_state().unwrap()).unwrap();
                let mut expected: Vec<_> = list
                    .iter()
                    .map(|w| {
                        let plan = copy.plan_add(doc, w);
                        reference_entry(&copy, doc, w, plan)
                    })
                    .collect();
                let mut got = c.add_entries(doc, list).unwrap();
                expected.sort_unstable_by_key(|e| e.0);
                got.sort_unstable_by_key(|e| e.0);
                assert_eq!(got, expected);
                assert_eq!(c.save_state().unwrap(), copy.save_state().unwrap());
            }
            let mut db = Multimap::new();
            db.insert(b"big".to_vec(), (0..200).collect());
            for w in &words {
                db.insert(w.clone(), vec![5, 3, 5, 8]);
            }
            let mut copy = JanusClient::restore(&c.save_state().unwrap()).unwrap();
            copy.keywords.clear();
            let mut expected = Vec::new();
            for (w, ids) in &db {
                for id in common::normalise(ids.clone()) {
                    let plan = copy.plan_add(id, w);
                    expected.push(reference_entry(&copy, id, w, plan));
                }
            }
            let mut got = c.setup_entries(&db).unwrap();
            assert_eq!(got.len(), 200 + 3 * words.len());
            expected.sort_unstable_by_key(|e| e.0);
            got.sort_unstable_by_key(|e| e.0);
            assert_eq!(got, expected);
            assert_eq!(c.save_state().unwrap(), copy.save_state().unwrap());
        }
    }

    #[test]
    fn search_decrypts_more_entries_than_one_descent_takes() {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        let mut client = JanusClient::new(&mut rng, &Params::parse("d=2").unwrap()).unwrap();
        let server = scheme()
            .server(Arc::new(sesame_store::MemoryStore::new()), &Params::new())
            .unwrap();
        let mut ch = sesame_core::LocalChannel::new(server);
        let n = SHARED_ENTRIES as u64 + 5;
        let mut db = Multimap::new();
        db.insert(b"w".to_vec(), (0..n).collect());
        client.setup(&mut rng, &mut ch, &db).unwrap();
        let w = [b"w".to_vec()];
        client
            .update(&mut rng, &mut ch, UpdateOp::Delete, 3, &w)
            .unwrap();
        client
            .update(&mut rng, &mut ch, UpdateOp::Delete, n - 1, &w)
            .unwrap();
        client
            .update(&mut rng, &mut ch, UpdateOp::Add, n + 7, &w)
            .unwrap();
        let expected: Vec<DocId> = (0..=n + 7)
            .filter(|&d| d != 3 && d != n - 1 && (d < n || d == n + 7))
            .collect();
        assert_eq!(client.search(&mut rng, &mut ch, b"w").unwrap(), expected);
        // The next epoch: the cached result minus a later deletion.
        client
            .update(&mut rng, &mut ch, UpdateOp::Delete, 0, &w)
            .unwrap();
        assert_eq!(
            client.search(&mut rng, &mut ch, b"w").unwrap(),
            expected[1..].to_vec()
        );
    }

    #[test]
    fn additions_computed_on_several_threads_equal_those_computed_on_one() {
        use rand::SeedableRng;
        use sesame_crypto::counter;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(4);
        let mut one = JanusClient::new(&mut rng, &Params::new()).unwrap();
        let words: Vec<Vec<u8>> = (0..200).map(|i| format!("w{i}").into_bytes()).collect();
        one.add_entry(1, &words[0]).unwrap();
        let mut many = JanusClient::restore(&one.save_state().unwrap()).unwrap();
        let (mut seq, seq_counts) = counter::measure(|| {
            words
                .iter()
                .map(|w| one.add_entry(9, w))
                .collect::<Result<Vec<_>>>()
                .unwrap()
        });
        seq.sort_unstable_by_key(|e| e.0);
        let want = common::chunked_requests(
            seq,
            |_| LABEL_LEN + ENTRY_LEN,
            |entries| Request::Put {
                reset: false,
                entries,
            },
        )
        .unwrap();
        let (got, par_counts) = counter::measure(|| {
            many.prepare_update(&mut rng, UpdateOp::Add, 9, &words)
                .unwrap()
                .unwrap()
        });
        assert_eq!(got, want);
        assert_eq!(seq_counts, par_counts);
        assert_eq!(one.save_state().unwrap(), many.save_state().unwrap());
    }
}
