//! SIMPLE: seed 000's baseline that refreshes results on the client.
//!
//! Same index and updates as [`crate::uedsse`]. A search takes two rounds:
//!
//! 1. the client sends `(t_w, st_c)`; the server walks the keyword's chain
//!    and returns the live encrypted identifiers, changing nothing;
//! 2. the client decrypts them with `k_w`, draws a fresh key `k_w'` and
//!    fresh chain states, re-encrypts every live identifier under `k_w'`
//!    into a new chain of additions, and uploads it together with
//!    `(t_w, st_c)`; the server deletes every entry of the old chain and
//!    stores the new one in one atomic batch.
//!
//! This is the "download, decrypt, re-encrypt, upload" refresh the paper
//! compares UEDSSE against (Table 4). See `docs/schemes/simple.md`.

use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{
    channel, BackwardPrivacy, Channel, Error, Handler, IoCounts, Params, QueryKind, Result,
    SchemeDescriptor, SchemeKind, Store, WriteBatch,
};

use crate::api::{DocId, Io, KeywordClient, KeywordScheme, Multimap, Prepared, Update};
use crate::common;
use crate::query::{Query, QueryResult};
use crate::uedsse::{
    self, entry_key, entry_value, walk, ChainClient, Entry, KeywordState, UeKey, EID_LEN, LAMBDA,
    OP_ADD,
};

/// Descriptor of SIMPLE.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "simple",
    title: "SIMPLE (client-side refresh baseline of UEDSSE)",
    citation: "Seed 000: the SIMPLE baseline of the UEDSSE evaluation (client downloads, \
               decrypts, re-encrypts and re-uploads the results of every search)",
    kind: SchemeKind::DynamicSse,
    forward_private: true,
    backward_privacy: BackwardPrivacy::TypeIII,
    queries: &[QueryKind::Exact],
    leakage: "Update: the number of keywords of the update and the time; entries are masked \
              by pads of fresh states, so an update links to nothing before the search that \
              walks it (forward private). \
              Search: t_w (the search pattern), the keyword's chain (update history), which \
              deletion cancels which addition, the number of live results; the refresh then \
              replaces the chain, and the server links the old chain to the new one (it sees \
              both in one request); the new chain is in a random order. Document \
              identifiers stay encrypted.",
    doc: "docs/schemes/simple.md",
};

/// The registry entry of SIMPLE.
pub fn scheme() -> KeywordScheme {
    common::keyword_scheme!(&DESCRIPTOR, &[], SimpleClient, SimpleServer)
}

crate::common::redacted_debug!(Request);

/// A SIMPLE request.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Stores entries; `reset` first removes the earlier index.
    Put {
        /// Remove the earlier index first.
        reset: bool,
        /// The entries.
        entries: Vec<Entry>,
    },
    /// Round 1 of a search: the live encrypted identifiers of the chain
    /// starting at (`tw`, `st`).
    Fetch {
        /// Keyword token.
        tw: [u8; LAMBDA],
        /// Latest state.
        st: [u8; LAMBDA],
    },
    /// Round 2: delete the chain starting at (`tw`, `st`) and store
    /// `entries` instead, atomically.
    Refresh {
        /// Keyword token.
        tw: [u8; LAMBDA],
        /// Latest state of the old chain.
        st: [u8; LAMBDA],
        /// The new chain.
        entries: Vec<Entry>,
    },
}

/// A SIMPLE response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// Stored (or refreshed).
    Stored,
    /// The live encrypted identifiers.
    Eids(Vec<[u8; EID_LEN]>),
}

/// A search up to its write (see `SimpleClient::fetch_and_rebuild`): the
/// live identifiers, the refresh request, and the keyword's next state.
type Refresh = (Vec<DocId>, Request, Option<KeywordState>);

/// The client half of SIMPLE.
pub struct SimpleClient {
    core: ChainClient,
}

impl std::fmt::Debug for SimpleClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimpleClient")
            .field("keywords", &self.core.keywords.len())
            .finish_non_exhaustive()
    }
}

impl SimpleClient {
    /// A client with a fresh key. SIMPLE has no parameters.
    pub fn new(rng: &mut dyn CryptoRngCore, params: &Params) -> Result<Self> {
        params.only(DESCRIPTOR.name, &[])?;
        Ok(Self {
            core: ChainClient::generate(rng),
        })
    }

    /// A client from saved state.
    pub fn restore(bytes: &[u8]) -> Result<Self> {
        Ok(Self {
            core: ChainClient::restore(bytes, "SIMPLE")?,
        })
    }

    /// The new chain of `ids` (live) under `key`, in a random order;
    /// returns the entries (sorted by label) and the new head state.
    fn rebuild(
        &self,
        rng: &mut dyn CryptoRngCore,
        keyword: &[u8],
        ids: &[DocId],
        key: &UeKey,
    ) -> Result<(Vec<Entry>, [u8; LAMBDA])> {
        let tw = self.core.token(keyword);
        let mut prev = [0u8; LAMBDA];
        let mut entries = Vec::with_capacity(ids.len());
        // The chain's order is the order of the walk on the next search:
        // drawn at random, so that it says nothing about the identifiers.
        let mut order = ids.to_vec();
        common::shuffle(rng, &mut order);
        for &id in &order {
            let next = ChainClient::fresh_state(rng);
            let eid = key
                .encrypt(&self.core.payload(keyword, id))
                .map_err(|e| Error::InvalidArgument(e.to_string()))?;
            entries.push(ChainClient::chain_entry(
                &tw,
                &prev,
                &next,
                OP_ADD,
                eid.to_bytes(),
            ));
            prev = next;
        }
        entries.sort_unstable_by_key(|e| e.0);
        Ok((entries, prev))
    }

    /// A search up to its write: round 1 (the fetch) and the request of
    /// round 2. Returns the live identifiers, the refresh (the chain
    /// rebuilt under a fresh key), and the keyword's state once the
    /// refresh is stored (`None`: no live identifier, the keyword is
    /// forgotten); `None` for a keyword never updated. Changes nothing.
    fn fetch_and_rebuild(
        &self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        keyword: &[u8],
    ) -> Result<Option<Refresh>> {
        let Some(ks) = self.core.keywords.get(keyword) else {
            return Ok(None);
        };
        let tw = self.core.token(keyword);
        let st = ks.st;
        let eids = match channel::call(channel, &Request::Fetch { tw, st })? {
            Response::Eids(eids) => eids,
            other => return Err(Error::unexpected("SIMPLE", &other)),
        };
        let ids = self.core.open_all(&ks.key, keyword, &eids)?;
        let next = UeKey::generate(rng);
        let (entries, head) = self.rebuild(rng, keyword, &ids, &next)?;
        let state = (!ids.is_empty()).then_some(KeywordState {
            st: head,
            key: next,
        });
        Ok(Some((ids, Request::Refresh { tw, st, entries }, state)))
    }

    /// Moves `keyword` to its refreshed chain, or forgets it.
    fn move_to(&mut self, keyword: &[u8], state: Option<KeywordState>) {
        match state {
            Some(state) => {
                self.core.keywords.insert(keyword.to_vec(), state);
            }
            None => {
                self.core.keywords.remove(keyword);
            }
        }
    }
}

impl KeywordClient for SimpleClient {
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn setup_checked(&mut self, Io { rng, channel }: Io<'_>, db: &Multimap) -> Result<()> {
        let entries = self.core.setup_entries(rng, db)?;
        common::upload(
            channel,
            entries,
            |_| uedsse::ENTRY_SIZE,
            |reset, entries| Request::Put { reset, entries },
            expect_stored,
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
        rng: &mut dyn CryptoRngCore,
        (op, doc, keywords): Update<'_>,
    ) -> Result<Option<Vec<Vec<u8>>>> {
        let entries = self.core.update_entries(rng, op, doc, keywords)?;
        uedsse::update_requests(entries, |entries| Request::Put {
            reset: false,
            entries,
        })
    }

    fn check_update_response(&self, response: &[u8]) -> Result<()> {
        expect_stored(sesame_core::wire::decode(response)?)
    }

    fn search(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        keyword: &[u8],
    ) -> Result<Vec<DocId>> {
        let Some((ids, refresh, state)) = self.fetch_and_rebuild(rng, channel, keyword)? else {
            return Ok(Vec::new());
        };
        expect_stored(channel::call(channel, &refresh)?)?;
        self.move_to(keyword, state);
        Ok(ids)
    }

    fn search_writes(&self) -> bool {
        true
    }

    /// [`KeywordClient::search`] split at its write: the fetch is a read
    /// made now, the refresh (the keyword's rebuilt chain under a fresh
    /// key) is the prepared request, and the client state moves to the new
    /// chain at once. The result travels in the context, so that a client
    /// restored after a crash answers the same.
    fn prepare_query(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        query: &Query,
    ) -> Result<Prepared> {
        let keyword = uedsse::exact_keyword(query)?;
        let Some((ids, refresh, state)) = self.fetch_and_rebuild(rng, channel, keyword)? else {
            return Ok(Prepared::default());
        };
        let request = sesame_core::wire::encode(&refresh)?;
        self.move_to(keyword, state);
        Ok(Prepared {
            requests: vec![request],
            context: sesame_core::wire::encode(&ids)?,
        })
    }

    fn resolve_query(
        &mut self,
        query: &Query,
        context: &[u8],
        responses: &[Vec<u8>],
    ) -> Result<QueryResult> {
        uedsse::exact_keyword(query)?;
        for response in responses {
            expect_stored(sesame_core::wire::decode(response)?)?;
        }
        if responses.is_empty() {
            return Ok(QueryResult::default());
        }
        Ok(QueryResult {
            ids: sesame_core::wire::decode(context)?,
            ..QueryResult::default()
        })
    }

    fn save_state(&self) -> Result<Vec<u8>> {
        self.core.save()
    }
}

fn expect_stored(r: Response) -> Result<()> {
    match r {
        Response::Stored => Ok(()),
        other => Err(Error::unexpected("SIMPLE", &other)),
    }
}

/// The server half of SIMPLE.
pub struct SimpleServer {
    store: Arc<dyn Store>,
}

impl std::fmt::Debug for SimpleServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimpleServer").finish_non_exhaustive()
    }
}

impl SimpleServer {
    /// A server keeping its index in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// The live encrypted identifiers of a chain, each once.
    pub fn fetch(&self, tw: &[u8; LAMBDA], st: &[u8; LAMBDA]) -> Result<Vec<[u8; EID_LEN]>> {
        let mut seen = std::collections::HashSet::new();
        Ok(walk(self.store.as_ref(), tw, st)?
            .into_iter()
            .filter(|v| v.live && seen.insert(v.eid))
            .map(|v| v.eid)
            .collect())
    }

    /// Replaces the chain at (`tw`, `st`) by `entries` in one batch. A
    /// repeated request finds the old chain gone and stores the same
    /// entries again: it is idempotent.
    pub fn refresh(&self, tw: &[u8; LAMBDA], st: &[u8; LAMBDA], entries: Vec<Entry>) -> Result<()> {
        let old = walk(self.store.as_ref(), tw, st)?;
        let mut batch = WriteBatch::with_capacity(old.len() + entries.len());
        for v in old {
            batch.delete(v.key.to_vec());
        }
        for (label, u, eid) in entries {
            batch.put(entry_key(&label).to_vec(), entry_value(&u, &eid));
        }
        self.store.write(batch)
    }
}

impl Handler for SimpleServer {
    type Request = Request;
    type Response = Response;

    fn handle(&mut self, request: Request) -> Result<Response> {
        match request {
            Request::Put { reset, entries } => {
                uedsse::put_entries(self.store.as_ref(), reset, entries)?;
                Ok(Response::Stored)
            }
            Request::Fetch { tw, st } => Ok(Response::Eids(self.fetch(&tw, &st)?)),
            Request::Refresh { tw, st, entries } => {
                self.refresh(&tw, &st, entries)?;
                Ok(Response::Stored)
            }
        }
    }

    fn io_counts(&self) -> IoCounts {
        self.store.io_counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use sesame_store::MemoryStore;

    /// The next search walks a refreshed chain in the order it was built:
    /// a random order, not the identifiers' order.
    #[test]
    fn a_refreshed_chain_is_in_random_order() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        let client = SimpleClient::new(&mut rng, &Params::new()).unwrap();
        let key = UeKey::generate(&mut rng);
        let ids: Vec<DocId> = (1..=32).collect();
        let (entries, head) = client.rebuild(&mut rng, b"w", &ids, &key).unwrap();
        let store = MemoryStore::new();
        uedsse::put_entries(&store, false, entries).unwrap();
        let walked: Vec<DocId> = walk(&store, &client.core.token(b"w"), &head)
            .unwrap()
            .iter()
            .map(|v| client.core.open(&key, b"w", &v.eid).unwrap())
            .collect();
        let mut sorted = walked.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, ids, "every identifier once");
        let mut descending = ids.clone();
        descending.reverse();
        assert!(walked != ids && walked != descending, "{walked:?}");
    }
}
