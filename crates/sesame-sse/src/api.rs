//! The interface every keyword scheme implements, so that the client SDK,
//! the server, the benchmark harness and the generic test suite can drive
//! any of them by name.

use std::collections::BTreeMap;

use rand_core::CryptoRngCore;
use sesame_core::{Channel, Result, SchemeDescriptor};

pub use crate::query::DocId;
use crate::query::{intersect, unsupported, Query, QueryResult};

/// A plaintext inverted index: keyword to the identifiers of the documents
/// that contain it. Input of a static scheme's setup, and the oracle of the
/// generic test suite.
pub type Multimap = BTreeMap<Vec<u8>, Vec<DocId>>;

/// One update: the operation, the document, and its keywords.
pub type Update<'a> = (UpdateOp, DocId, &'a [Vec<u8>]);

/// An update of a dynamic scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum UpdateOp {
    /// The document now contains the keywords.
    Add,
    /// The document no longer contains the keywords.
    Delete,
}

/// The randomness and the channel one step runs with (one type for
/// every scheme crate, from `sesame-core`).
pub use sesame_core::Io;

/// The client half of a keyword scheme: keys, client state, and the
/// protocol driven over a [`Channel`].
///
/// A client holds no state that [`KeywordClient::save_state`] does not
/// return: the SDK persists that value (encrypted) after every operation,
/// and [`KeywordScheme::restore_client`] brings the client back.
pub trait KeywordClient: Send {
    /// The scheme's descriptor.
    fn descriptor(&self) -> &'static SchemeDescriptor;

    /// Builds the encrypted index of `db` on the server (static schemes);
    /// dynamic schemes insert every pair. Any earlier index is replaced.
    ///
    /// The same check for every scheme first: an identifier that collides
    /// with the padding marker ([`crate::common::check_ids`]) is
    /// [`sesame_core::Error::InvalidArgument`] before any message is sent
    /// or any state changes; then the scheme's
    /// [`KeywordClient::setup_checked`].
    fn setup(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        db: &Multimap,
    ) -> Result<()> {
        crate::common::check_ids(db)?;
        self.setup_checked(Io { rng, channel }, db)
    }

    /// The scheme's setup of a `db` whose identifiers
    /// [`KeywordClient::setup`] has checked.
    fn setup_checked(&mut self, io: Io<'_>, db: &Multimap) -> Result<()>;

    /// Adds or deletes (`doc`, keyword) pairs. Static schemes return
    /// [`sesame_core::Error::Unsupported`].
    ///
    /// The same check for every scheme first: `doc` must not be the
    /// padding marker ([`crate::common::check_doc`]), else
    /// [`sesame_core::Error::InvalidArgument`] before any message is sent
    /// or any state changes; then the scheme's
    /// [`KeywordClient::update_checked`].
    fn update(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        op: UpdateOp,
        doc: DocId,
        keywords: &[Vec<u8>],
    ) -> Result<()> {
        crate::common::check_doc(doc)?;
        self.update_checked(Io { rng, channel }, (op, doc, keywords))
    }

    /// The scheme's update, its identifier checked by
    /// [`KeywordClient::update`]. The default sends the requests of
    /// [`KeywordClient::prepare_checked`] and checks each answer with
    /// [`KeywordClient::check_update_response`]; interactive schemes
    /// override it.
    fn update_checked(&mut self, io: Io<'_>, update: Update<'_>) -> Result<()> {
        let Some(requests) = self.prepare_checked(io.rng, update)? else {
            return Err(sesame_core::Error::Unsupported(format!(
                "{} does not support updates: rebuild the index with setup",
                self.descriptor().name
            )));
        };
        for request in requests {
            let response = io.channel.call(&request)?;
            self.check_update_response(&response)?;
        }
        Ok(())
    }

    /// Computes the encoded requests that carry an update and advances the
    /// client state as if they had been sent, without sending anything.
    ///
    /// This is what makes updates crash-safe: the SDK persists the new
    /// state together with these requests (a pending intent) before sending
    /// them, and resends them after a crash. Every request must therefore
    /// be idempotent: the server ends in the same state whether it receives
    /// it once or several times. Static schemes, and dynamic schemes whose
    /// updates need the server's answers, return `Ok(None)`.
    ///
    /// The identifier is checked as in [`KeywordClient::update`], then the
    /// scheme's [`KeywordClient::prepare_checked`].
    fn prepare_update(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        op: UpdateOp,
        doc: DocId,
        keywords: &[Vec<u8>],
    ) -> Result<Option<Vec<Vec<u8>>>> {
        crate::common::check_doc(doc)?;
        self.prepare_checked(rng, (op, doc, keywords))
    }

    /// The scheme's [`KeywordClient::prepare_update`], its identifier
    /// checked. `Ok(None)` by default.
    fn prepare_checked(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        update: Update<'_>,
    ) -> Result<Option<Vec<Vec<u8>>>> {
        let _ = (rng, update);
        Ok(None)
    }

    /// [`KeywordClient::prepare_update`] for several updates, in order:
    /// the requests of each, exactly as one call per update would give
    /// them, and the same state after. A scheme whose work per update
    /// shares something across documents (Aura: the upper levels of a
    /// keyword's GGM tree) overrides it and says so in
    /// [`KeywordClient::batches_updates`]; the default makes one call per
    /// update, and `Ok(None)` where the first gives `None`.
    fn prepare_updates(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        updates: &[(UpdateOp, DocId, &[Vec<u8>])],
    ) -> Result<Option<Vec<Vec<Vec<u8>>>>> {
        let mut out = Vec::with_capacity(updates.len());
        for &(op, doc, keywords) in updates {
            match self.prepare_update(rng, op, doc, keywords)? {
                Some(requests) => out.push(requests),
                None if out.is_empty() => return Ok(None),
                None => {
                    return Err(sesame_core::Error::Protocol(format!(
                        "{} prepared some updates of a batch and not others",
                        self.descriptor().name
                    )))
                }
            }
        }
        Ok(Some(out))
    }

    /// Whether [`KeywordClient::prepare_updates`] gains from being given
    /// many updates at once (`false` by default): the SDK then prepares a
    /// pending intent's documents together.
    fn batches_updates(&self) -> bool {
        false
    }

    /// As [`KeywordClient::prepare_update`], for schemes whose updates
    /// need to read the server first (KPR12's free cells and proofs,
    /// SDa/SDd's levels to merge): the client may make **read-only** calls
    /// over `channel`, then returns every write of the update as requests,
    /// and advances its state as if they had been applied. The SDK sends
    /// nothing else to the index between this call and the requests, so
    /// what was read is still current when they arrive.
    ///
    /// The requests obey the same rules as `prepare_update`'s (idempotent,
    /// at most [`MAX_PREPARED_REQUEST`] bytes each). The default calls
    /// `prepare_update`; static schemes return `Ok(None)`.
    fn prepare_update_interactive(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        op: UpdateOp,
        doc: DocId,
        keywords: &[Vec<u8>],
    ) -> Result<Option<Vec<Vec<u8>>>> {
        let _ = channel;
        self.prepare_update(rng, op, doc, keywords)
    }

    /// Whether updates can be prepared: [`KeywordClient::prepare_update`]
    /// or [`KeywordClient::prepare_update_interactive`] return requests.
    /// `false` by default. The SDK keeps an index whose scheme says `false`
    /// correct and crash-safe by rebuilding it (a fresh `setup` over every
    /// document, switched to atomically) on each change, as for a static
    /// scheme; the scheme's own [`KeywordClient::update`] is what the
    /// benchmark harness measures.
    fn prepares_updates(&self) -> bool {
        false
    }

    /// Whether [`UpdateOp::Delete`] removes pairs from the index. Schemes
    /// without deletion return `false` (the default); the SDK then only
    /// hides a deleted document's identifier on the client.
    fn supports_deletion(&self) -> bool {
        false
    }

    /// Whether a search changes the client state or writes on the server
    /// (re-keying, refreshing, puncturing, moving entries). Such searches
    /// are run by the SDK as [`KeywordClient::prepare_query`] then
    /// [`KeywordClient::resolve_query`], so that a crash or a lost answer
    /// at any point leaves the index searchable. `false` by default; the
    /// generic suite checks that a scheme saying `false` neither writes to
    /// the store nor changes its saved state on search.
    fn search_writes(&self) -> bool {
        false
    }

    /// One-time server-side initialisation that a prepared query needs,
    /// idempotent (UEDSSE: the server's key pair, made by its first
    /// request). The SDK calls it over a writable channel before
    /// [`KeywordClient::prepare_query`], whose channel is read-only. The
    /// default does nothing.
    fn initialise_server(&mut self, channel: &mut dyn Channel) -> Result<()> {
        let _ = channel;
        Ok(())
    }

    /// For schemes whose search writes ([`KeywordClient::search_writes`]):
    /// computes the query's requests, after read-only calls over `channel`
    /// if the scheme needs them, and advances the client state as if they
    /// had been applied. The SDK persists the new state, the requests and
    /// [`Prepared::context`] together, then sends the requests as one
    /// operation that the server applies once (a repeat is answered with
    /// the first answers).
    fn prepare_query(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        query: &Query,
    ) -> Result<Prepared> {
        let _ = (rng, channel, query);
        Err(sesame_core::Error::Unsupported(format!(
            "{} answers searches without writing; use search",
            self.descriptor().name
        )))
    }

    /// Turns the answers to [`KeywordClient::prepare_query`]'s requests
    /// into the result. After a crash it is called on a client restored
    /// from the state saved with the requests, with the same `context` and
    /// the same answers, and must give the same result.
    fn resolve_query(
        &mut self,
        query: &Query,
        context: &[u8],
        responses: &[Vec<u8>],
    ) -> Result<QueryResult> {
        let _ = (query, context, responses);
        Err(sesame_core::Error::Unsupported(format!(
            "{} answers searches without writing; use search",
            self.descriptor().name
        )))
    }

    /// Checks the server's answer to one request of
    /// [`KeywordClient::prepare_update`].
    fn check_update_response(&self, response: &[u8]) -> Result<()> {
        let _ = response;
        Err(sesame_core::Error::Protocol(format!(
            "{} sent no update requests",
            self.descriptor().name
        )))
    }

    /// The identifiers of the documents containing `keyword`, sorted and
    /// without duplicates.
    ///
    /// The default composes [`KeywordClient::search_token`], one round,
    /// and [`KeywordClient::resolve`]; schemes whose search takes several
    /// rounds override it.
    fn search(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        keyword: &[u8],
    ) -> Result<Vec<DocId>> {
        match self.search_token(rng, keyword)? {
            None => Ok(Vec::new()),
            Some(request) => {
                let response = channel.call(&request)?;
                self.resolve(keyword, &response)
            }
        }
    }

    /// The encoded request of a one-round search for `keyword` (the
    /// literature's search token), built without sending it, or `None`
    /// when the client knows the answer is empty without asking (a
    /// keyword it never added). Other code can carry the token inside its
    /// own messages (Log-BRC sends the tokens of a whole range cover in
    /// one request). Schemes whose search takes several rounds, or
    /// writes, return [`sesame_core::Error::Unsupported`] (the default).
    fn search_token(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        keyword: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let _ = (rng, keyword);
        Err(sesame_core::Error::Unsupported(format!(
            "{} has no one-round search token",
            self.descriptor().name
        )))
    }

    /// The result of the search for `keyword` from the server's encoded
    /// answer to [`KeywordClient::search_token`]'s request: identifiers
    /// sorted and without duplicates.
    fn resolve(&mut self, keyword: &[u8], response: &[u8]) -> Result<Vec<DocId>> {
        let _ = (keyword, response);
        Err(sesame_core::Error::Unsupported(format!(
            "{} has no one-round search token",
            self.descriptor().name
        )))
    }

    /// The client state (keys included) to persist.
    fn save_state(&self) -> Result<Vec<u8>>;

    /// Answers a query of any kind (see [`crate::query`]). The default
    /// answers exact queries with [`KeywordClient::search`] and conjunctive
    /// ones by intersecting searches, when the descriptor lists them; other
    /// kinds are [`sesame_core::Error::Unsupported`]. Schemes with prefix,
    /// wildcard or ranked search override it.
    fn query(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        query: &Query,
    ) -> Result<QueryResult> {
        basic_query(self, rng, channel, query)
    }
}

/// Largest request, in bytes, that [`KeywordClient::prepare_update`],
/// [`KeywordClient::prepare_update_interactive`] and
/// [`KeywordClient::prepare_query`] may return: a scheme splits a large
/// update into several requests, so that any update, however many
/// keywords it has, can be sent in messages under a server's limit.
pub const MAX_PREPARED_REQUEST: usize = 1 << 20;

/// The requests of an operation computed ahead of sending, and what the
/// client needs to finish it after a restart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prepared {
    /// Encoded requests, applied in order, together and once.
    pub requests: Vec<Vec<u8>>,
    /// Opaque to the SDK; persisted encrypted with the requests and handed
    /// to [`KeywordClient::resolve_query`]. It may hold secrets.
    pub context: Vec<u8>,
}

/// A registered keyword scheme: its descriptor, parameters and
/// constructors (the registry entry of the keyword family).
pub type KeywordScheme = sesame_core::Entry<dyn KeywordClient>;

/// The answer every scheme can give from [`KeywordClient::search`]: exact
/// queries directly, conjunctive ones by intersecting one search per
/// keyword. Other kinds, and kinds the descriptor does not list, are
/// [`sesame_core::Error::Unsupported`].
pub fn basic_query<C: KeywordClient + ?Sized>(
    client: &mut C,
    rng: &mut dyn CryptoRngCore,
    channel: &mut dyn Channel,
    query: &Query,
) -> Result<QueryResult> {
    let d = client.descriptor();
    if !d.queries.contains(&query.kind()) {
        return Err(unsupported(d.name, query));
    }
    match query {
        Query::Exact(w) => Ok(QueryResult {
            ids: client.search(rng, channel, w)?,
            ..QueryResult::default()
        }),
        Query::Conjunctive(words) => {
            let mut sets = Vec::with_capacity(words.len());
            for w in words {
                sets.push(client.search(rng, channel, w)?);
            }
            Ok(QueryResult {
                ids: intersect(sets),
                ..QueryResult::default()
            })
        }
        _ => Err(unsupported(d.name, query)),
    }
}
