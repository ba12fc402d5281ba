//! A table's verified group: fields whose equality predicates are answered
//! together by a conjunctive scheme of seed 003 (SI-SSE-RV), whose server
//! returns, for every record, a verdict and a proof. The client checks
//! every verdict against its keys and the version of each record's last
//! upload: a server that drops, adds, replays (an older upload) or alters
//! a result makes the query fail with
//! [`ClientError::AnswerNotVerified`].
//!
//! The group's index is `t-<table>-v`, run like a range index (through the
//! backend's hosted channels, marked dirty while an operation runs,
//! rebuilt from the records when the table opens dirty). The simple-index
//! protocol has no deletion: a record deleted or replaced stays in the
//! group's index (its identifier is filtered out of answers) until the
//! next rebuild, which the table runs when more than half of the group's
//! entries are stale.

use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{Channel, Params, Service, Store};
use sesame_sse::conjunctive::protocol::{Document, SiClient};
use sesame_sse::conjunctive::{Conjunction, ConjunctiveEntry};
use zeroize::Zeroize;

use crate::doc_service::DocId;
use crate::error::{ClientError, Result};
use crate::table::ranges::HostedIndex;
use crate::table::schema::{Schema, Value};

/// Records per upload request.
const UPLOAD_BATCH: usize = 512;

/// What the table's state keeps of the verified group's index.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct GroupState {
    /// The index's name where the backend runs it.
    pub index: String,
    /// Its generation.
    pub generation: u64,
    /// The conjunctive client's saved state (keys, uploaded identifiers
    /// and their versions).
    pub client: Vec<u8>,
    /// Entries of records no longer in the table.
    pub stale: u64,
    /// An operation began and did not end: rebuild before use.
    pub dirty: bool,
}

impl Drop for GroupState {
    fn drop(&mut self) {
        self.client.zeroize();
    }
}

/// The verified group at work.
pub(crate) struct GroupIndex {
    /// The scheme's registry entry.
    pub entry: ConjunctiveEntry,
    /// Its parameters (`fields` included).
    pub params: Params,
    /// Positions of the group's fields in the schema, in group order.
    pub positions: Vec<usize>,
    /// The client half.
    pub client: Box<SiClient>,
}

impl GroupIndex {
    /// The entry, parameters and field positions of `schema`'s group.
    fn binding(schema: &Schema) -> Result<(ConjunctiveEntry, Params, Vec<usize>)> {
        let g = schema.verified.as_ref().ok_or_else(|| {
            ClientError::InvalidArgument("the table has no verified group".into())
        })?;
        let entry = sesame_sse::conjunctive::entries()
            .into_iter()
            .find(|e| e.descriptor.name == g.binding.scheme)
            .ok_or_else(|| {
                ClientError::InvalidArgument(format!(
                    "conjunctive scheme {:?} is not in the registry",
                    g.binding.scheme
                ))
            })?;
        let mut params = g.binding.params()?;
        params.set("fields", g.fields.len());
        let positions = g
            .fields
            .iter()
            .map(|name| {
                schema
                    .fields
                    .iter()
                    .position(|f| &f.name == name)
                    .ok_or_else(|| {
                        ClientError::InvalidArgument(format!("verified field {name:?} vanished"))
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((entry, params, positions))
    }

    /// A fresh client (fresh keys).
    pub(crate) fn fresh(schema: &Schema, rng: &mut dyn CryptoRngCore) -> Result<Self> {
        Self::with_client(schema, |entry, params| {
            (entry.new_client)(rng, params).map_err(|e| {
                ClientError::InvalidArgument(format!(
                    "[verified]: {} does not accept its parameters: {e}",
                    entry.descriptor.name
                ))
            })
        })
    }

    /// The client restored from its saved state.
    pub(crate) fn restore(schema: &Schema, state: &GroupState) -> Result<Self> {
        Self::with_client(schema, |entry, _| {
            (entry.restore_client)(&state.client).map_err(|_| {
                ClientError::InvalidArgument(
                    "the verified group's index has a damaged client state".into(),
                )
            })
        })
    }

    /// `schema`'s group with the client that `client` makes from the
    /// scheme's entry and parameters.
    fn with_client(
        schema: &Schema,
        client: impl FnOnce(&ConjunctiveEntry, &Params) -> Result<Box<SiClient>>,
    ) -> Result<Self> {
        let (entry, params, positions) = Self::binding(schema)?;
        let client = client(&entry, &params)?;
        Ok(GroupIndex {
            entry,
            params,
            positions,
            client,
        })
    }

    /// A record's document for the group: its group fields' values.
    pub(crate) fn document(
        &self,
        schema: &Schema,
        id: DocId,
        values: &[Option<Value>],
    ) -> Document {
        let fields = self
            .positions
            .iter()
            .map(|&p| {
                let value = values.get(p).and_then(Option::as_ref);
                schema
                    .fields
                    .get(p)
                    .map_or_else(Vec::new, |f| f.group_value(value))
            })
            .collect();
        Document {
            id,
            fields,
            body: Vec::new(),
        }
    }

    /// Uploads documents in batches (each a new version); `reset` first
    /// replaces everything the index held.
    pub(crate) fn upload(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        docs: &[Document],
        reset: bool,
    ) -> Result<()> {
        if docs.is_empty() && reset {
            return Ok(self.client.upload(rng, channel, &[], true)?);
        }
        for (i, chunk) in docs.chunks(UPLOAD_BATCH).enumerate() {
            self.client.upload(rng, channel, chunk, reset && i == 0)?;
        }
        Ok(())
    }

    /// The identifiers of the records whose group fields equal `terms`,
    /// after the answer is verified.
    pub(crate) fn search(
        &mut self,
        rng: &mut dyn CryptoRngCore,
        channel: &mut dyn Channel,
        terms: &[(u32, Vec<u8>)],
        index: &str,
    ) -> Result<Vec<DocId>> {
        let query = Conjunction::new(terms.to_vec());
        match self.client.search(rng, channel, &query) {
            Ok(hits) => Ok(hits.into_iter().map(|(id, _)| id).collect()),
            Err(sesame_core::Error::Crypto) => {
                Err(ClientError::AnswerNotVerified(index.to_owned()))
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl HostedIndex for GroupIndex {
    type State = GroupState;

    fn place(state: &GroupState) -> (&str, u64) {
        (&state.index, state.generation)
    }

    fn scheme(&self) -> &'static str {
        self.entry.descriptor.name
    }

    fn serve(&self, store: Arc<dyn Store>) -> sesame_core::Result<Box<dyn Service>> {
        self.entry.server(store, &self.params)
    }
}
