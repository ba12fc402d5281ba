//! The interface every keyword scheme implements, so that the client SDK,
//! the server, the benchmark harness and the generic test suite can drive
//! any of them by name.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand_core::CryptoRngCore;
use sesame_core::{Channel, Params, Result, SchemeDescriptor, Service, Store};

/// A document identifier.
pub type DocId = u64;

/// A plaintext inverted index: keyword to the identifiers of the documents
/// that contain it. Input of a static scheme's setup, and the oracle of the
/// generic test suite.
pub type Multimap = BTreeMap<Vec<u8>, Vec<DocId>>;

/// An update of a dynamic scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum UpdateOp {
    /// The document now contains the keywords.
    Add,
    /// The document no longer contains the keywords.
    Delete,
}

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
    fn setup(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        db: &Multimap,
    ) -> Result<()>;

    /// Adds or deletes (`doc`, keyword) pairs. Static schemes return
    /// [`sesame_core::Error::Unsupported`].
    ///
    /// The default sends the requests of [`KeywordClient::prepare_update`]
    /// and checks each answer with [`KeywordClient::check_update_response`];
    /// interactive schemes override it.
    fn update(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        op: UpdateOp,
        doc: DocId,
        keywords: &[Vec<u8>],
    ) -> Result<()> {
        let Some(requests) = self.prepare_update(rng, op, doc, keywords)? else {
            return Err(sesame_core::Error::Unsupported(format!(
                "{} does not support updates: rebuild the index with setup",
                self.descriptor().name
            )));
        };
        for request in requests {
            let response = channel.call(&request)?;
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
    fn prepare_update(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        op: UpdateOp,
        doc: DocId,
        keywords: &[Vec<u8>],
    ) -> Result<Option<Vec<Vec<u8>>>> {
        let _ = (rng, op, doc, keywords);
        Ok(None)
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
    fn search(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        keyword: &[u8],
    ) -> Result<Vec<DocId>>;

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
        query: &crate::query::Query,
    ) -> Result<crate::query::QueryResult> {
        crate::query::basic_query(self, rng, channel, query)
    }
}

/// A registered keyword scheme: its descriptor and constructors.
#[derive(Clone, Copy)]
pub struct KeywordScheme {
    /// The scheme's descriptor.
    pub descriptor: &'static SchemeDescriptor,
    /// Parameter names the scheme reads, with their defaults in words.
    pub params: &'static [(&'static str, &'static str)],
    /// A client with fresh keys.
    pub new_client: fn(&mut dyn CryptoRngCore, &Params) -> Result<Box<dyn KeywordClient>>,
    /// A client restored from [`KeywordClient::save_state`]'s bytes.
    pub restore_client: fn(&[u8]) -> Result<Box<dyn KeywordClient>>,
    /// The server half over a store (the index's own key space).
    pub new_server: fn(Arc<dyn Store>) -> Box<dyn Service>,
}

impl std::fmt::Debug for KeywordScheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeywordScheme")
            .field("name", &self.descriptor.name)
            .finish_non_exhaustive()
    }
}
