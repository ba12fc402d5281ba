//! What Aura and Janus++ share. Both keep, per keyword, an epoch whose
//! token labels its additions ([`label`]) and whose keys encrypt them; a
//! search is one request that the server answers with the live
//! identifiers, after which the client moves the keyword to a fresh epoch
//! (new token and keys: forward privacy for later additions).
//! [`RenewedSearch`] names the scheme's two steps; [`search`],
//! [`prepare_query`] and [`resolve_query`] are its
//! [`KeywordClient`](crate::api::KeywordClient) search methods, run or
//! prepared. A setup cuts each keyword's additions into groups computed
//! together ([`setup_groups`]).

use rand_core::CryptoRngCore;
use serde::Serialize;
use sesame_core::{channel, Channel, Result, SchemeDescriptor};

use crate::api::{DocId, Multimap, Prepared};
use crate::common::{self, IdsResponse};
use crate::query::{Query, QueryResult};

/// A scheme whose search is one request answered by identifiers (a
/// [`IdsResponse`]) and followed by a key renewal.
pub(crate) trait RenewedSearch {
    /// The scheme's request.
    type Request: Serialize;

    /// The scheme's name in errors.
    const NAME: &'static str;

    /// The scheme's descriptor.
    fn descriptor() -> &'static SchemeDescriptor;

    /// The search request for `keyword`, or `None` for a keyword never
    /// updated.
    fn search_request(&self, keyword: &[u8]) -> Result<Option<Self::Request>>;

    /// Moves `keyword` to a fresh epoch.
    fn renew(&mut self, keyword: &[u8]);
}

/// [`KeywordClient::search`](crate::api::KeywordClient::search): the
/// request, its answer, then the renewal.
pub(crate) fn search<S: RenewedSearch>(
    client: &mut S,
    _rng: &mut dyn CryptoRngCore,
    channel: &mut dyn Channel,
    keyword: &[u8],
) -> Result<Vec<DocId>> {
    let Some(request) = client.search_request(keyword)? else {
        return Ok(Vec::new());
    };
    let ids = IdsResponse::sorted_ids(channel::call(channel, &request)?, S::NAME)?;
    client.renew(keyword);
    Ok(ids)
}

/// [`KeywordClient::prepare_query`](crate::api::KeywordClient::prepare_query):
/// the search request, with the key renewal applied to the client state at
/// once; the SDK has the server apply it once.
pub(crate) fn prepare_query<S: RenewedSearch>(client: &mut S, query: &Query) -> Result<Prepared> {
    let keyword = crate::query::exact_keyword(S::descriptor(), query)?;
    let Some(request) = client.search_request(keyword)? else {
        return Ok(Prepared::default());
    };
    client.renew(keyword);
    common::prepared_one(&request)
}

/// [`KeywordClient::resolve_query`](crate::api::KeywordClient::resolve_query):
/// the identifiers of the answers.
pub(crate) fn resolve_query<S: RenewedSearch>(responses: &[Vec<u8>]) -> Result<QueryResult> {
    common::resolve_ids(S::NAME, responses, IdsResponse::ids)
}

/// The label of the `c`-th addition of an epoch under its token `tkn`:
/// `SHA-256('l' ‖ tkn ‖ c)`.
pub(crate) fn label(tkn: &[u8; 32], c: u64) -> [u8; 32] {
    let mut input = [0u8; 1 + 32 + 8];
    input[0] = b'l';
    input[1..=32].copy_from_slice(tkn);
    input[33..].copy_from_slice(&c.to_le_bytes());
    sesame_crypto::hash::sha256(&input)
}

/// A keyword and planned additions of it (the plans are the scheme's).
pub(crate) type Planned<'a, P> = (&'a [u8], Vec<(DocId, P)>);

/// A setup's planned additions, per keyword, cut into the groups whose
/// entries are computed together: at most `shared` additions of a keyword
/// (they share the upper levels of its trees), and about an equal share
/// of the `total` per core (at least `per_thread`; one group per keyword
/// for fewer than `2 * per_thread` in all), so that every core gets work.
pub(crate) fn setup_groups<P>(
    planned: Vec<Planned<'_, P>>,
    per_thread: usize,
    shared: usize,
) -> Vec<Planned<'_, P>> {
    let total: usize = planned.iter().map(|(_, adds)| adds.len()).sum();
    let workers = if total < 2 * per_thread {
        1
    } else {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    };
    let size = total.div_ceil(workers).clamp(per_thread, shared);
    let mut groups = Vec::new();
    for (w, adds) in planned {
        let mut adds = adds.into_iter().peekable();
        while adds.peek().is_some() {
            groups.push((w, adds.by_ref().take(size).collect()));
        }
    }
    groups
}

/// The groups of a fresh index of `db`: every pair planned in order by
/// `plan` (keywords in order, each keyword's identifiers sorted and each
/// once: as many additions in turn would plan them), then cut by
/// [`setup_groups`].
pub(crate) fn setup_plan<'a, P>(
    db: &'a Multimap,
    per_thread: usize,
    shared: usize,
    mut plan: impl FnMut(DocId, &[u8]) -> Result<P>,
) -> Result<Vec<Planned<'a, P>>> {
    let mut planned = Vec::with_capacity(db.len());
    for (w, ids) in db {
        let adds = common::normalise(ids.clone())
            .into_iter()
            .map(|id| Ok((id, plan(id, w)?)))
            .collect::<Result<Vec<_>>>()?;
        planned.push((w.as_slice(), adds));
    }
    Ok(setup_groups(planned, per_thread, shared))
}

/// The [`KeywordClient`](crate::api::KeywordClient) search methods of a
/// [`RenewedSearch`] scheme (inside its `impl KeywordClient`): `search`,
/// `search_writes` (a search renews keys, so the SDK saves the state
/// after it), `prepare_query` and `resolve_query`.
macro_rules! renewed_search_methods {
    () => {
        fn search(
            &mut self,
            rng: &mut dyn rand_core::CryptoRngCore,
            channel: &mut dyn sesame_core::Channel,
            keyword: &[u8],
        ) -> sesame_core::Result<Vec<crate::api::DocId>> {
            crate::renewal::search(self, rng, channel, keyword)
        }

        fn search_writes(&self) -> bool {
            true
        }

        /// The search request, with the key renewal applied to the client
        /// state at once; the SDK has the server apply it once.
        fn prepare_query(
            &mut self,
            _rng: &mut dyn rand_core::CryptoRngCore,
            _channel: &mut dyn sesame_core::Channel,
            query: &crate::query::Query,
        ) -> sesame_core::Result<crate::api::Prepared> {
            crate::renewal::prepare_query(self, query)
        }

        fn resolve_query(
            &mut self,
            _query: &crate::query::Query,
            _context: &[u8],
            responses: &[Vec<u8>],
        ) -> sesame_core::Result<crate::query::QueryResult> {
            crate::renewal::resolve_query::<Self>(responses)
        }
    };
}
pub(crate) use renewed_search_methods;
