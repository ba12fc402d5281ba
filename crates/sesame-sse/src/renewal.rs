//! What Aura and Janus++ share: a search is one request that the server
//! answers with the live identifiers, after which the client moves the
//! keyword to a fresh epoch (new token and keys: forward privacy for later
//! additions). [`RenewedSearch`] names the scheme's two steps; the
//! functions below are its [`KeywordClient`](crate::api::KeywordClient)
//! search methods, run or prepared.

use rand_core::CryptoRngCore;
use serde::de::DeserializeOwned;
use serde::Serialize;
use sesame_core::{channel, Channel, Error, Result, SchemeDescriptor};

use crate::api::{DocId, Prepared};
use crate::common;
use crate::query::{Query, QueryResult};

/// A scheme whose search is one request answered by identifiers and
/// followed by a key renewal.
pub(crate) trait RenewedSearch {
    /// The scheme's request.
    type Request: Serialize;
    /// The scheme's response.
    type Response: DeserializeOwned + std::fmt::Debug;

    /// The scheme's name in errors.
    const NAME: &'static str;

    /// The scheme's descriptor.
    fn descriptor() -> &'static SchemeDescriptor;

    /// The search request for `keyword`, or `None` for a keyword never
    /// updated.
    fn search_request(&self, keyword: &[u8]) -> Result<Option<Self::Request>>;

    /// Moves `keyword` to a fresh epoch.
    fn renew(&mut self, keyword: &[u8]);

    /// The identifiers a response carries, or the response back if it is
    /// not a search's answer.
    fn ids(response: Self::Response) -> std::result::Result<Vec<DocId>, Self::Response>;
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
    let ids = match S::ids(channel::call(channel, &request)?) {
        Ok(ids) => common::normalise(ids),
        Err(other) => return Err(Error::unexpected(S::NAME, &other)),
    };
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
    common::resolve_ids(S::NAME, responses, S::ids)
}
