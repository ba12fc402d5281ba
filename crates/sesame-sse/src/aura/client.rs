//! The client half of Aura: planning, computing and batching additions,
//! local deletions, search requests and key renewal.

use std::collections::HashMap;

use rand_core::CryptoRngCore;
use sesame_core::{Error, Params, Result, SchemeDescriptor};
use sesame_crypto::ggm::GgmTree;
use sesame_crypto::key::Key;
use sesame_crypto::prf::{Aes128Prf, HmacPrf};

use super::*;
use crate::api::{DocId, Io, KeywordClient, Multimap, Update, UpdateOp};
use crate::common;
use crate::renewal::{label, setup_plan, RenewedSearch};

impl AuraClient {
    /// A client with a fresh key; parameters `h`, `b`, `fp`, `dmax`.
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        let (h, depth) = parse_params(params)?;
        Ok(Self::with_key(
            Key::generate(rng),
            h,
            depth,
            BTreeMap::new(),
        ))
    }

    pub(super) fn with_key(
        master: Key<32>,
        h: u8,
        depth: u8,
        keywords: BTreeMap<Vec<u8>, KeywordState>,
    ) -> Self {
        Self {
            tkn_prf: HmacPrf::new(&master.derive("sesame-sse/aura/tkn")),
            tag_prf: HmacPrf::new(&master.derive("sesame-sse/aura/tag")),
            sk_prf: HmacPrf::new(&master.derive("sesame-sse/aura/sk")),
            master,
            h,
            depth,
            keywords,
            kept: KeptNodes::default(),
        }
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        let s: State = sesame_core::wire::decode(bytes)?;
        if s.h == 0
            || s.h > 64
            || !(MIN_DEPTH..=MAX_DEPTH).contains(&s.depth)
            || u64::from(s.h) > 1u64 << s.depth
        {
            return Err(Error::Malformed("Aura state with bad parameters".into()));
        }
        let mut keywords = BTreeMap::new();
        for (w, st) in &s.keywords {
            if st.revoked.iter().any(|&p| p >> s.depth != 0) {
                return Err(Error::Malformed("Aura filter bit out of range".into()));
            }
            if keywords.insert(w.clone(), st.clone()).is_some() {
                return Err(Error::Malformed("Aura state lists a keyword twice".into()));
            }
        }
        Ok(Self::with_key(
            Key::from_bytes(s.master),
            s.h,
            s.depth,
            keywords,
        ))
    }

    /// Bloom hash functions (= ciphertext copies per entry).
    pub fn h(&self) -> u8 {
        self.h
    }

    /// Bloom filter bits per keyword.
    pub fn filter_bits(&self) -> u64 {
        1u64 << self.depth
    }

    /// Set bits in the deletion filter of `keyword`.
    pub fn revoked_bits(&self, keyword: &[u8]) -> usize {
        self.keywords.get(keyword).map_or(0, |s| s.revoked.len())
    }

    pub(super) fn keyed(prf: &HmacPrf, keyword: &[u8], n: u64, g: u64) -> [u8; 32] {
        prf.eval_concat(&[
            &(keyword.len() as u64).to_le_bytes(),
            keyword,
            &n.to_le_bytes(),
            &g.to_le_bytes(),
        ])
    }

    pub(super) fn token(&self, keyword: &[u8], epoch: u64) -> [u8; LABEL_LEN] {
        Self::keyed(&self.tkn_prf, keyword, epoch, 0)
    }

    pub(super) fn tag(&self, keyword: &[u8], doc: DocId, g: u64) -> Tag {
        let full = Self::keyed(&self.tag_prf, keyword, doc, g);
        let mut t = [0u8; TAG_LEN];
        t.copy_from_slice(&full[..TAG_LEN]);
        t
    }

    pub(super) fn tree(&self, keyword: &[u8], epoch: u64) -> Result<GgmTree> {
        self.tree_of_depth(keyword, epoch, self.depth)
    }

    /// The tree of `sk_{w,i}` cut at `depth`: its leaf `p` is the node of
    /// the full tree at level `depth` whose path is `p`.
    pub(super) fn tree_of_depth(&self, keyword: &[u8], epoch: u64, depth: u8) -> Result<GgmTree> {
        let full = Self::keyed(&self.sk_prf, keyword, epoch, 0);
        let mut root = [0u8; 16];
        root.copy_from_slice(&full[..16]);
        GgmTree::new(Key::from_bytes(root), depth).map_err(Error::from)
    }

    /// The leaves at `positions` of the keyword's tree, through the nodes
    /// of level [`KEPT_LEVEL`] kept for it from its second addition in the
    /// epoch on (`count`: the epoch's additions before the last entry of
    /// `positions`): the missing ones are derived (all of them once the
    /// epoch has [`KEEP_ALL_AFTER`] additions, if the keyword's nodes were
    /// still kept from its previous one) and kept, and each leaf is
    /// derived from its level's node. The same keys
    /// as [`GgmTree::leaf`]: the node of level `L` on the path `t` is leaf
    /// `t` of the tree cut at depth `L`, and leaf `p` is leaf `p mod
    /// 2^(depth - L)` of the subtree below node `p >> (depth - L)`.
    pub(super) fn kept_leaves(
        &self,
        kept: &mut KeptNodes,
        keyword: &[u8],
        epoch: u64,
        count: u64,
        positions: &[u64],
    ) -> Result<Vec<Key<16>>> {
        let below = self.depth - KEPT_LEVEL;
        let at = kept
            .trees
            .iter()
            .position(|t| t.keyword == keyword && t.epoch == epoch);
        let (mut nodes, all) = match at {
            Some(i) => (kept.trees.remove(i).nodes, count >= KEEP_ALL_AFTER),
            // A keyword's first addition in the epoch keeps nothing: most
            // keywords of a document are added to once between searches.
            None if count == 0 => {
                return Ok(self.tree(keyword, epoch)?.leaves(positions)?);
            }
            None => (BTreeMap::new(), false),
        };
        let tops: Vec<u64> = positions.iter().map(|p| p >> below).collect();
        let mut missing: Vec<u64> = if all && nodes.len() < 1 << KEPT_LEVEL {
            (0..1u64 << KEPT_LEVEL).collect()
        } else {
            tops.clone()
        };
        missing.retain(|t| !nodes.contains_key(t));
        missing.sort_unstable();
        missing.dedup();
        if !missing.is_empty() {
            let upper = self.tree_of_depth(keyword, epoch, KEPT_LEVEL)?;
            nodes.extend(missing.iter().copied().zip(upper.leaves(&missing)?));
        }
        let mask = (1u64 << below) - 1;
        let mut order: Vec<usize> = (0..positions.len()).collect();
        order.sort_unstable_by_key(|&i| tops[i]);
        let mut out: Vec<Option<Key<16>>> = positions.iter().map(|_| None).collect();
        let node = |top: u64| {
            nodes
                .get(&top)
                .ok_or_else(|| Error::Protocol("Aura kept node missing".into()))
        };
        // The common case, one position below a node: those paths are
        // followed side by side ([`GgmTree::leaves_under`]), the same
        // leaves as one descent each.
        let (mut alone, mut roots, mut lows) = (Vec::new(), Vec::new(), Vec::new());
        for run in order.chunk_by(|a, b| tops[*a] == tops[*b]) {
            let top = tops[run[0]];
            if let [i] = *run {
                alone.push(i);
                roots.push(node(top)?);
                lows.push(positions[i] & mask);
                continue;
            }
            let sub = GgmTree::new(node(top)?.clone_secret(), below)?;
            let lows: Vec<u64> = run.iter().map(|&i| positions[i] & mask).collect();
            for (&i, k) in run.iter().zip(sub.leaves(&lows)?) {
                out[i] = Some(k);
            }
        }
        for (i, k) in alone
            .into_iter()
            .zip(GgmTree::leaves_under(&roots, below, &lows)?)
        {
            out[i] = Some(k);
        }
        drop(roots);
        kept.trees.push(KeptTree {
            keyword: keyword.to_vec(),
            epoch,
            nodes,
        });
        if kept.trees.len() > KEPT_TREES {
            kept.trees.remove(0);
        }
        out.into_iter()
            .map(|k| k.ok_or_else(|| Error::Protocol("Aura leaf missing".into())))
            .collect()
    }

    /// The tag of the pair's live generation: the first one not in `D_w`.
    /// `first` is the tag of generation 0 where the caller has it already.
    pub(super) fn live_tag(&self, keyword: &[u8], doc: DocId, first: Option<Tag>) -> Result<Tag> {
        // No position of an empty filter is revoked: its tags need no
        // positions.
        let revoked = self
            .keywords
            .get(keyword)
            .map(|s| &s.revoked)
            .filter(|r| !r.is_empty());
        for g in 0..MAX_GENERATIONS {
            let t = match first {
                Some(t) if g == 0 => t,
                _ => self.tag(keyword, doc, g),
            };
            let dead =
                revoked.is_some_and(|r| positions(&t, self.h, self.depth).all(|p| r.contains(&p)));
            if !dead {
                return Ok(t);
            }
        }
        Err(Error::InvalidArgument(format!(
            "Aura filter of keyword is saturated: {MAX_GENERATIONS} generations revoked"
        )))
    }

    /// The entry of an addition, advancing the keyword's counter.
    #[cfg(test)]
    pub(super) fn add_entry(&mut self, doc: DocId, keyword: &[u8]) -> Result<Entry> {
        let plan = self.plan_add(doc, keyword)?;
        let epoch = plan.epoch;
        let mut entries = self.entries(keyword, epoch, &[(doc, plan)], None)?;
        entries
            .pop()
            .ok_or_else(|| Error::Protocol("Aura entry missing".into()))
    }

    /// What an addition needs from the client's state: the pair's live tag
    /// and the keyword's epoch and counter, which it advances.
    pub(super) fn plan_add(&mut self, doc: DocId, keyword: &[u8]) -> Result<AddPlan> {
        self.plan_add_from(doc, keyword, None)
    }

    /// [`plan_add`](Self::plan_add), given the tag of generation 0 if it
    /// is computed already.
    pub(super) fn plan_add_from(
        &mut self,
        doc: DocId,
        keyword: &[u8],
        first: Option<Tag>,
    ) -> Result<AddPlan> {
        let tag = self.live_tag(keyword, doc, first)?;
        if !self.keywords.contains_key(keyword) {
            self.keywords
                .insert(keyword.to_vec(), KeywordState::default());
        }
        let st = self
            .keywords
            .get_mut(keyword)
            .ok_or_else(|| Error::Protocol("Aura keyword state missing".into()))?;
        let plan = AddPlan {
            tag,
            epoch: st.epoch,
            count: st.count,
        };
        st.count += 1;
        Ok(plan)
    }

    /// The entries of planned additions of `keyword`, all in `epoch`, in
    /// order: for each, the label, and the tag with the identifier masked
    /// by the GGM leaf of each of the tag's positions. The additions share
    /// the epoch's tree, so the leaves of all their positions are derived
    /// in one descent that expands each node on their paths once
    /// ([`GgmTree::leaves`]; the same leaves as one descent per position),
    /// and the token once. With `kept`, the leaves come through the
    /// keyword's kept nodes ([`kept_leaves`](Self::kept_leaves)); without,
    /// it reads no mutable state, so entries can be computed on several
    /// threads.
    pub(super) fn entries(
        &self,
        keyword: &[u8],
        epoch: u64,
        adds: &[(DocId, AddPlan)],
        kept: Option<&mut KeptNodes>,
    ) -> Result<Vec<Entry>> {
        let h = usize::from(self.h);
        let mut all = Vec::with_capacity(adds.len() * h);
        for (_, plan) in adds {
            debug_assert_eq!(plan.epoch, epoch);
            all.extend(positions(&plan.tag, self.h, self.depth));
        }
        if all.len() != adds.len() * h {
            return Err(Error::Protocol("Aura positions per tag".into()));
        }
        let leaves = match kept {
            Some(kept) if self.depth > KEPT_LEVEL => {
                let count = adds.last().map_or(0, |(_, p)| p.count);
                self.kept_leaves(kept, keyword, epoch, count, &all)?
            }
            _ => self.tree(keyword, epoch)?.leaves(&all)?,
        };
        // The pads, `AES_leaf(tag)` (first 8 bytes), every leaf's key
        // schedule expanded side by side.
        let mut pads: Vec<[u8; 16]> = adds
            .iter()
            .flat_map(|(_, plan)| std::iter::repeat_n(plan.tag, h))
            .collect();
        Aes128Prf::eval_each(&leaves, &mut pads)?;
        let tkn = self.token(keyword, epoch);
        Ok(adds
            .iter()
            .zip(pads.chunks_exact(h))
            .map(|((doc, plan), pads)| {
                let id = doc.to_le_bytes();
                let mut value = Vec::with_capacity(TAG_LEN + ID_LEN * h);
                value.extend_from_slice(&plan.tag);
                for pad in pads {
                    value.extend(id.iter().zip(pad).map(|(a, b)| a ^ b));
                }
                (label(&tkn, plan.count), value)
            })
            .collect())
    }

    /// The entries of groups of planned additions (each group one keyword
    /// and epoch), group by group: on the calling thread for fewer than
    /// `2 * PARALLEL_ENTRIES` entries in all (through the kept nodes, if
    /// given), otherwise on every core, the groups dealt into bundles of
    /// about equal entries (largest first, each to the lightest bundle: the
    /// groups of one batch range from one entry to one per document). The
    /// primitive calls made on the other threads are counted as this
    /// thread's.
    pub(super) fn compute(
        &self,
        groups: &[AddGroup<'_>],
        mut kept: Option<&mut KeptNodes>,
    ) -> Result<Vec<Vec<Entry>>> {
        let total: usize = groups.iter().map(|g| g.adds.len()).sum();
        if total < 2 * PARALLEL_ENTRIES {
            return groups
                .iter()
                .map(|g| self.entries(g.keyword, g.epoch, &g.adds, kept.as_deref_mut()))
                .collect();
        }
        let mut order: Vec<usize> = (0..groups.len()).collect();
        order.sort_by_key(|&g| std::cmp::Reverse(groups[g].adds.len()));
        let mut bundles: Vec<(usize, Vec<usize>)> = vec![(0, Vec::new()); BUNDLES];
        for g in order {
            if let Some(lightest) = bundles.iter_mut().min_by_key(|b| b.0) {
                lightest.0 += groups[g].adds.len();
                lightest.1.push(g);
            }
        }
        let parts = common::par_map(&bundles, 1, |(_, members)| {
            members
                .iter()
                .map(|&g| {
                    let group = &groups[g];
                    Ok((
                        g,
                        self.entries(group.keyword, group.epoch, &group.adds, None)?,
                    ))
                })
                .collect::<Result<Vec<_>>>()
        })?;
        let mut out: Vec<Vec<Entry>> = (0..groups.len()).map(|_| Vec::new()).collect();
        for (g, entries) in parts.into_iter().flatten() {
            out[g] = entries;
        }
        Ok(out)
    }

    /// The entries of several updates, update by update (none for a
    /// deletion): every update planned in order, as one call per update
    /// would plan it (tags, epochs, counters, deletions), then the additions
    /// of each keyword, across all the documents, computed together in one
    /// descent of its tree, and handed back to their documents.
    pub(super) fn batch_entries(
        &mut self,
        updates: &[(UpdateOp, DocId, &[Vec<u8>])],
    ) -> Result<Vec<Vec<Entry>>> {
        // The generation-0 tag of every addition, on every core (a PRF call
        // each, the bulk of planning): the planning below, in order, takes
        // it unless the filter revokes it by then.
        let pairs: Vec<(DocId, &[u8])> = updates
            .iter()
            .filter(|u| u.0 == UpdateOp::Add)
            .flat_map(|&(_, doc, keywords)| keywords.iter().map(move |w| (doc, w.as_slice())))
            .collect();
        let firsts = common::par_map(&pairs, PARALLEL_TAGS, |&(doc, w)| Ok(self.tag(w, doc, 0)))?;
        let mut firsts = firsts.into_iter();
        let mut groups: Vec<AddGroup<'_>> = Vec::new();
        // For each group, the update each of its additions belongs to.
        let mut owners: Vec<Vec<usize>> = Vec::new();
        let mut seen: HashMap<(&[u8], u64), usize> = HashMap::new();
        for (i, &(op, doc, keywords)) in updates.iter().enumerate() {
            common::check_doc(doc)?;
            match op {
                UpdateOp::Delete => {
                    for w in keywords {
                        self.delete(doc, w)?;
                    }
                }
                UpdateOp::Add => {
                    for w in keywords {
                        let plan = self.plan_add_from(doc, w, firsts.next())?;
                        match seen.get(&(w.as_slice(), plan.epoch)) {
                            Some(&g) => {
                                groups[g].adds.push((doc, plan));
                                owners[g].push(i);
                            }
                            None => {
                                seen.insert((w, plan.epoch), groups.len());
                                groups.push(AddGroup {
                                    keyword: w,
                                    epoch: plan.epoch,
                                    adds: vec![(doc, plan)],
                                });
                                owners.push(vec![i]);
                            }
                        }
                    }
                }
            }
        }
        let mut kept = std::mem::take(&mut self.kept);
        let computed = self.compute(&groups, Some(&mut kept));
        self.kept = kept;
        let mut per_update: Vec<Vec<Entry>> = (0..updates.len()).map(|_| Vec::new()).collect();
        for (entries, owners) in computed?.into_iter().zip(&owners) {
            for (entry, &i) in entries.into_iter().zip(owners) {
                per_update[i].push(entry);
            }
        }
        Ok(per_update)
    }

    /// The requests of several updates ([`KeywordClient::prepare_updates`],
    /// and [`KeywordClient::prepare_update`] as a batch of one): those of
    /// [`batch_entries`](Self::batch_entries), each document's apart.
    pub(super) fn batch_requests(
        &mut self,
        updates: &[(UpdateOp, DocId, &[Vec<u8>])],
    ) -> Result<Vec<Vec<Vec<u8>>>> {
        self.batch_entries(updates)?
            .into_iter()
            .zip(updates)
            .map(|(entries, &(op, _, _))| match op {
                UpdateOp::Delete => Ok(Vec::new()),
                UpdateOp::Add => Self::add_requests(entries),
            })
            .collect()
    }

    /// The requests that store one document's entries.
    pub(super) fn add_requests(mut entries: Vec<Entry>) -> Result<Vec<Vec<u8>>> {
        // The order of the entries says nothing about the keywords.
        entries.sort_unstable_by_key(|e| e.0);
        common::chunked_requests(entries, entry_size, |entries| Request::Put {
            reset: false,
            entries,
        })
    }

    /// The entries of one document's additions, planned in order (a batch
    /// of one); the additions of a keyword listed more than once share one
    /// descent of its tree.
    #[cfg(test)]
    pub(super) fn add_entries(&mut self, doc: DocId, keywords: &[Vec<u8>]) -> Result<Vec<Entry>> {
        let mut entries = self.batch_entries(&[(UpdateOp::Add, doc, keywords)])?;
        entries
            .pop()
            .ok_or_else(|| Error::Protocol("Aura entries missing".into()))
    }

    /// The entries of a fresh index of `db`: every pair planned in order,
    /// then each keyword's additions computed in groups of at most
    /// [`SHARED_ENTRIES`] (sharing the upper levels of the keyword's tree),
    /// split further so that every core gets work.
    pub(super) fn setup_entries(&mut self, db: &Multimap) -> Result<Vec<Entry>> {
        self.keywords.clear();
        self.kept = KeptNodes::default();
        let groups: Vec<AddGroup<'_>> =
            setup_plan(db, PARALLEL_ENTRIES, SHARED_ENTRIES, |id, w| {
                self.plan_add(id, w)
            })?
            .into_iter()
            .map(|(keyword, adds)| AddGroup {
                keyword,
                epoch: 0,
                adds,
            })
            .collect();
        Ok(self.compute(&groups, None)?.into_iter().flatten().collect())
    }

    /// A deletion: inserts the live tag into `D_w`. Local only.
    pub(super) fn delete(&mut self, doc: DocId, keyword: &[u8]) -> Result<()> {
        let tag = self.live_tag(keyword, doc, None)?;
        let (h, depth) = (self.h, self.depth);
        let st = self.keywords.entry(keyword.to_vec()).or_default();
        st.revoked.extend(positions(&tag, h, depth));
        Ok(())
    }
}

impl RenewedSearch for AuraClient {
    type Request = Request;
    const NAME: &'static str = "Aura";

    fn descriptor() -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    /// The search request for `keyword`, or `None` for a keyword never
    /// updated.
    fn search_request(&self, keyword: &[u8]) -> Result<Option<Request>> {
        let Some(st) = self.keywords.get(keyword) else {
            return Ok(None);
        };
        let revoked: Vec<u64> = st.revoked.iter().copied().collect();
        let (epoch, count) = (st.epoch, st.count);
        let cover = self.tree(keyword, epoch)?.cover(&revoked)?;
        Ok(Some(Request::Search {
            tkn: self.token(keyword, epoch),
            prev: epoch.checked_sub(1).map(|e| self.token(keyword, e)),
            count,
            h: self.h,
            depth: self.depth,
            cover,
        }))
    }

    /// Key renewal after a search: later additions use a fresh token and
    /// tree.
    fn renew(&mut self, keyword: &[u8]) {
        if let Some(st) = self.keywords.get_mut(keyword) {
            st.epoch += 1;
            st.count = 0;
        }
        // The finished epoch's nodes are not needed again.
        self.kept.trees.retain(|t| t.keyword != keyword);
    }
}

impl KeywordClient for AuraClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn setup_checked(&mut self, Io { channel, .. }: Io<'_>, db: &Multimap) -> Result<()> {
        let mut entries = self.setup_entries(db)?;
        entries.sort_unstable_by_key(|e| e.0);
        common::upload(
            channel,
            entries,
            |e: &Entry| LABEL_LEN + e.1.len(),
            |reset, entries| Request::Put { reset, entries },
            common::answered("Aura", Response::Stored),
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
        update: Update<'_>,
    ) -> Result<Option<Vec<Vec<u8>>>> {
        let mut requests = self.batch_requests(&[update])?;
        Ok(requests.pop())
    }

    fn prepare_updates(
        &mut self,
        _rng: &mut dyn CryptoRngCore,
        updates: &[(UpdateOp, DocId, &[Vec<u8>])],
    ) -> Result<Option<Vec<Vec<Vec<u8>>>>> {
        self.batch_requests(updates).map(Some)
    }

    /// A keyword's additions in several documents share the upper levels
    /// of its tree.
    fn batches_updates(&self) -> bool {
        true
    }

    fn check_update_response(&self, response: &[u8]) -> Result<()> {
        common::check_answered("Aura", Response::Stored, response)
    }

    crate::renewal::renewed_search_methods!();

    fn save_state(&self) -> Result<Vec<u8>> {
        let s = State {
            master: *self.master.as_bytes(),
            h: self.h,
            depth: self.depth,
            keywords: self
                .keywords
                .iter()
                .map(|(w, st)| (w.clone(), st.clone()))
                .collect(),
        };
        sesame_core::wire::encode(&s)
    }
}
