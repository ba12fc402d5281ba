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
    fn update(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        op: UpdateOp,
        doc: DocId,
        keywords: &[Vec<u8>],
    ) -> Result<()> {
        let _ = (rng, channel, op, doc, keywords);
        Err(sesame_core::Error::Unsupported(format!(
            "{} is a static scheme: rebuild the index with setup",
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
