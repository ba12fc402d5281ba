//! A table's range indexes: one per range field, each a range protocol's
//! client here (its state in the table's state file) and its server half
//! where the backend runs the table's keyword index (in this process over
//! the profile's store, or on the server as an index of its own).
//!
//! Range protocols are interactive (a B+ tree insertion reads its path
//! first, Path ORAM rewrites a path on every access), so their operations
//! cannot be saved as pending intents the way keyword updates are.
//! Instead an operation that changes a range index marks it *dirty* in the
//! table's state before it starts and clears the mark with the new client
//! state when it ends. A table opened with a dirty index rebuilds it from
//! the table's records (which are exactly-once, with the keyword index)
//! into a fresh generation with fresh keys, switches to it in one state
//! write and drops the old generation: whatever a crash interrupted, the
//! index again holds exactly the table's records.
//!
//! A first import keeps its range changes aside ([`Spill`]: bounded in
//! memory, the rest sealed in a temporary file) and fills each index at
//! the end from them in value order ([`RangeIndex::fill_sorted`]): in
//! pieces of [`BUILD_PIECE`] records, committed every [`BUILD_COMMIT`],
//! so that an import's memory does not grow with the file's range
//! changes (`docs/tables.md`, "Importing files"), the indexes side by
//! side on worker threads ([`fill_all`]: module `build`). A crash
//! between two commits leaves the index partly built and marked dirty:
//! repaired as above.

use std::sync::Arc;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{Channel, Params, Service, Store};
use sesame_crypto::hash::KeyedHash;
use sesame_crypto::Key;
use sesame_range::{RangeClient, RangeProtocol};
use subtle::ConstantTimeEq;
use zeroize::Zeroize;

use crate::backend::{Backend, SetupChannel};
use crate::doc_service::DocId;
use crate::error::{ClientError, Result};
use crate::table::schema::{Binding, Field};

mod build;
mod spill;
pub(crate) use build::{fill_all, workers, Fill};
pub(crate) use spill::Spill;

/// Records of a build sent through one transaction before it is
/// committed and the next begins. A transaction holds its writes in
/// memory until its commit (about 100 bytes per record for a B+ tree's
/// bulk load, more in the store's dirty pages), so this bounds a build's
/// memory whatever the number of records.
pub(crate) const BUILD_COMMIT: usize = 1 << 16;
/// Records per call of the protocol's build: each call holds its
/// records, their payloads and their ciphertexts in memory.
pub(crate) const BUILD_PIECE: usize = 1 << 13;

/// What the table's state keeps of one range index.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct RangeState {
    /// The field it answers.
    pub field: String,
    /// The index's name where the backend runs it.
    pub index: String,
    /// Its generation (each rebuild makes a new one).
    pub generation: u64,
    /// The protocol client's saved state (keys included).
    pub client: Vec<u8>,
    /// Records it holds.
    pub records: u64,
    /// An operation began and did not end: rebuild before use.
    pub dirty: bool,
}

impl Drop for RangeState {
    fn drop(&mut self) {
        self.client.zeroize();
    }
}

/// A range index at work: the protocol and its client.
pub(crate) struct RangeIndex {
    /// Position of its field in the schema.
    pub field: usize,
    /// The protocol's registry entry.
    pub protocol: RangeProtocol,
    /// The protocol's parameters (`bits` included).
    pub params: Params,
    /// The client half.
    pub client: Box<dyn RangeClient>,
}

/// The protocol entry and parameters of a range field.
pub(crate) fn binding(field: &Field) -> Result<(RangeProtocol, Params)> {
    let b: &Binding = field.range.as_ref().ok_or_else(|| {
        ClientError::InvalidArgument(format!("field {:?} has no range index", field.name))
    })?;
    let protocol = sesame_range::protocol(&b.scheme).ok_or_else(|| {
        ClientError::InvalidArgument(format!(
            "range protocol {:?} is not in the registry",
            b.scheme
        ))
    })?;
    let mut params = b.params()?;
    params.set("bits", field.bits);
    // Each pair a table puts in one index is unique: its payload starts
    // with the record's identifier, which names one version of one
    // record, is reserved before use and never handed out again, and a
    // generation (a key) takes each version once (a crash or a conflict
    // in between rebuilds into a fresh generation). So the index may seal
    // without a stored nonce (docs/schemes/bplus_ore.md, "Sealed
    // records"); a schema that names the sealing keeps its own.
    let seal = sesame_range::bplus_ore::SEAL_PARAM;
    if protocol.params.iter().any(|(name, _)| *name == seal)
        && params.get_or::<String>(seal, String::new())?.is_empty()
    {
        params.set(seal, "unique");
    }
    Ok((protocol, params))
}

/// Whether a fresh index of `field` with payloads of `payload` bytes
/// carries its records in its ciphertexts' nonces (`seal=nonce`,
/// `docs/schemes/bplus_ore.md`, "Records in the nonce"): where the schema
/// names no sealing and the protocol can (Lewi-Wu, at most 10 bytes of
/// value and payload).
fn in_nonces_by_default(field: &Field, protocol: &RangeProtocol, payload: u32) -> Result<bool> {
    let seal = sesame_range::bplus_ore::SEAL_PARAM;
    let named = field
        .range
        .as_ref()
        .map(|b| b.params())
        .transpose()?
        .is_some_and(|p| {
            !p.get_or::<String>(seal, String::new())
                .unwrap_or_default()
                .is_empty()
        });
    Ok(!named
        && sesame_range::bplus_ore::seals_in_nonces(protocol.descriptor.name, field.bits, payload))
}

/// The fewest bytes a range entry gives a record identifier: identifiers
/// below 2^40 (`docs/tables.md`, "Limits").
pub(crate) const MIN_ID_BYTES: u32 = 5;

/// The payload of a fresh index of `field` whose payloads are the
/// identifier alone ([`UNTAGGED_PAYLOAD`]), when a shorter identifier
/// lets value and identifier travel in one nonce block (a field of 17 to
/// 40 bits: the block holds 10 bytes of them, so 10 less the value's
/// bytes, at least [`MIN_ID_BYTES`]) and the table's identifiers so far
/// (`ids_so_far`, the largest given) leave 256 times room below the
/// width's limit; `None` where the full identifier fits, or no shorter
/// one does.
fn short_identifier(
    field: &Field,
    protocol: &RangeProtocol,
    ids_so_far: u64,
) -> Result<Option<u32>> {
    if in_nonces_by_default(field, protocol, UNTAGGED_PAYLOAD)? {
        return Ok(None);
    }
    let value = sesame_range::record::value_bytes(field.bits);
    let Some(short) = sesame_range::record::BLOCK_MESSAGE
        .checked_sub(value)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| (MIN_ID_BYTES..UNTAGGED_PAYLOAD).contains(n))
    else {
        return Ok(None);
    };
    let room = ids_so_far < 1 << (8 * short - 8);
    Ok((room && in_nonces_by_default(field, protocol, short)?).then_some(short))
}

/// The payload bytes a fresh index's leaves are sized for (the
/// protocol's `payload`, where it takes one and the schema names none):
/// the identifier (8 bytes), with the table's tag (16 more) where the
/// table's payloads carry one; where there is no binder (a table of a
/// build before incarnations), 34, which sizes a unique-form record as
/// the random form's 16-byte default did. Sized exactly, a leaf of
/// Lewi-Wu ciphertexts of a 16-bit field holds 78 entries where the
/// default's 16 bytes in the random form left room for 52
/// (`docs/schemes/bplus_ore.md`, "Sealed records").
pub(crate) fn payload_bytes(binder: Option<&PayloadBinder>) -> u32 {
    match binder {
        None => 34,
        Some(b) if b.tags => UNTAGGED_PAYLOAD + TAG_LEN as u32,
        Some(_) => UNTAGGED_PAYLOAD,
    }
}

/// The payload of a new table's range entry: the record identifier.
pub(crate) const UNTAGGED_PAYLOAD: u32 = 8;

impl RangeIndex {
    /// A fresh client (fresh keys) for `field`, its leaves sized for
    /// payloads of `payload` bytes ([`payload_bytes`]) where the
    /// protocol takes the parameter and the schema names none. Payloads
    /// of the identifier alone may take a shorter identifier where that
    /// puts the records in the nonces ([`short_identifier`]; `ids_so_far`:
    /// the table's largest identifier given so far).
    pub(crate) fn fresh(
        position: usize,
        field: &Field,
        payload: u32,
        ids_so_far: u64,
        rng: &mut dyn CryptoRngCore,
    ) -> Result<RangeIndex> {
        // The index's own parameters (which a server checks when it
        // hosts the index) stay the binding's: the client's layout, sent
        // with every request, says how its records are sealed.
        Self::with_client(position, field, |protocol, params| {
            let mut params = params.clone();
            let named = !params
                .get_or::<String>("payload", String::new())?
                .is_empty();
            let mut payload = payload;
            if !named && protocol.params.iter().any(|(name, _)| *name == "payload") {
                if payload == UNTAGGED_PAYLOAD {
                    if let Some(short) = short_identifier(field, protocol, ids_so_far)? {
                        payload = short;
                    }
                }
                params.set("payload", payload);
            }
            let payload: u32 = params.get_or("payload", u32::MAX)?;
            if in_nonces_by_default(field, protocol, payload)? {
                params.set(sesame_range::bplus_ore::SEAL_PARAM, "nonce");
            }
            (protocol.new_client)(rng, &params).map_err(|e| {
                ClientError::InvalidArgument(format!(
                    "field {:?}: {} does not accept its parameters: {e}",
                    field.name, protocol.descriptor.name
                ))
            })
        })
    }

    /// The client restored from its saved state.
    pub(crate) fn restore(position: usize, field: &Field, state: &RangeState) -> Result<Self> {
        Self::with_client(position, field, |protocol, _| {
            (protocol.restore_client)(&state.client).map_err(|_| {
                ClientError::InvalidArgument(format!(
                    "the range index of field {:?} has a damaged client state",
                    field.name
                ))
            })
        })
    }

    /// The index of `field` (at `position`) with the client that `client`
    /// makes from its protocol entry and parameters.
    fn with_client(
        position: usize,
        field: &Field,
        client: impl FnOnce(&RangeProtocol, &Params) -> Result<Box<dyn RangeClient>>,
    ) -> Result<Self> {
        let (protocol, params) = binding(field)?;
        let client = client(&protocol, &params)?;
        Ok(RangeIndex {
            field: position,
            protocol,
            params,
            client,
        })
    }

    /// Whether a query may change the index or the client state.
    pub(crate) fn query_writes(&self) -> bool {
        self.client.query_writes()
    }

    /// The bytes of a record identifier in this index's untagged
    /// payloads: 8, or fewer where its records travel in nonces with a
    /// short identifier ([`short_identifier`]).
    fn id_bytes(&self) -> usize {
        self.client
            .payload_len()
            .filter(|n| (MIN_ID_BYTES as usize..UNTAGGED_PAYLOAD as usize).contains(n))
            .unwrap_or(UNTAGGED_PAYLOAD as usize)
    }
}

/// A table's index that the backend hosts (a range index, the verified
/// group): its scheme's name and server half, and from them the channels
/// and transactions on a generation of it.
pub(crate) trait HostedIndex {
    /// What the table keeps of the index: where it runs.
    type State;

    /// The index's name and generation in `state`.
    fn place(state: &Self::State) -> (&str, u64);

    /// The scheme's name.
    fn scheme(&self) -> &'static str;

    /// The scheme's server half over a store (for a backend that runs it
    /// in this process).
    fn serve(&self, store: Arc<dyn Store>) -> sesame_core::Result<Box<dyn Service>>;

    /// A channel to the index's generation in `state` (for searches).
    fn channel(&self, backend: &mut dyn Backend, state: &Self::State) -> Result<Box<dyn Channel>> {
        let (index, generation) = Self::place(state);
        backend.hosted_channel(index, generation, self.scheme(), &|s| self.serve(s))
    }

    /// A transaction on the index's generation in `state` (for uploads;
    /// see [`Backend::hosted_transaction`]).
    fn transaction(
        &self,
        backend: &mut dyn Backend,
        state: &Self::State,
    ) -> Result<Box<dyn SetupChannel>> {
        let (index, generation) = Self::place(state);
        backend.hosted_transaction(index, generation, self.scheme(), &|s| self.serve(s))
    }
}

impl HostedIndex for RangeIndex {
    type State = RangeState;

    fn place(state: &RangeState) -> (&str, u64) {
        (&state.index, state.generation)
    }

    fn scheme(&self) -> &'static str {
        self.protocol.descriptor.name
    }

    fn serve(&self, store: Arc<dyn Store>) -> sesame_core::Result<Box<dyn Service>> {
        self.protocol.server(store, &self.params)
    }
}

/// The largest payload a range index takes whole (less where the protocol
/// says so: Path ORAM's `record_size`).
const COVER_MAX: usize = 1024;
/// Bytes of a payload's binding tag.
const TAG_LEN: usize = 16;
/// Domain of the binding tags.
const TAG_DOMAIN: &str = "sesame-client/table-range-payload/v1";

/// Binds a table's range payloads to their place.
///
/// Where the protocol seals its records ([`RangeClient::seals_records`]:
/// every protocol but the plaintext baseline and Path ORAM), a payload
/// is the record identifier alone (8 bytes): the protocol's AEAD, under
/// a key drawn for this index's generation alone (a fresh key for each
/// field, each rebuild, each incarnation of the table, each profile),
/// covers the encoded value and the identifier (a record's identifier
/// changes with every version: it names the version), so a payload
/// moved to another field, record, value, generation, table incarnation
/// or profile does not open, and the query fails.
///
/// Elsewhere, and in every table whose state predates untagged payloads
/// ([`TABLE_FORMAT_V4`](super::TABLE_FORMAT_V4): `tags`), the table adds
/// inside the payload a tag: an HMAC-SHA256 (truncated to 16 bytes)
/// under a key of the table's incarnation (derived from the profile's
/// document key) over the profile id, the incarnation, the field's name,
/// the record identifier, the encoded value and the record bytes the
/// payload carries. A payload moved to another field, record, value,
/// table incarnation or profile fails its tag.
pub(crate) struct PayloadBinder {
    mac: KeyedHash,
    profile_id: String,
    incarnation: [u8; 16],
    /// Every payload carries a tag (a table of an earlier build).
    tags: bool,
}

impl PayloadBinder {
    /// The binder of the table incarnation `incarnation` of a profile
    /// (`doc_key`, `profile_id`).
    pub(crate) fn new(doc_key: &Key<32>, profile_id: &str, incarnation: [u8; 16]) -> Result<Self> {
        let derived = KeyedHash::new(doc_key).hash(
            "sesame-client/table-range-key/v1",
            &[profile_id.as_bytes(), &incarnation],
        );
        let key = Key::from_slice(&derived)
            .map_err(|_| ClientError::InvalidArgument("a derived key has the wrong size".into()))?;
        Ok(PayloadBinder {
            mac: KeyedHash::new(&key),
            profile_id: profile_id.to_owned(),
            incarnation,
            tags: false,
        })
    }

    /// The binder of a table whose every payload carries a tag (`tags`:
    /// a state of format 4 or earlier), or this one.
    pub(crate) fn with_tags(mut self, tags: bool) -> Self {
        self.tags = tags;
        self
    }

    fn tag(&self, field: &str, id: DocId, value: u64, content: &[u8]) -> [u8; TAG_LEN] {
        let full = self.mac.hash(
            TAG_DOMAIN,
            &[
                self.profile_id.as_bytes(),
                &self.incarnation,
                field.as_bytes(),
                &id.to_be_bytes(),
                &value.to_be_bytes(),
                content,
            ],
        );
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(&full[..TAG_LEN]);
        out
    }
}

impl RangeIndex {
    /// Whether this index's payloads carry `binder`'s tag: where the
    /// table's state says so, or where the protocol does not seal its
    /// records under a key of its own.
    fn tagged(&self, binder: &PayloadBinder) -> bool {
        binder.tags || !self.client.seals_records()
    }

    /// The payload of a record in this index: its identifier, and the
    /// tag of `binder` (a table with an incarnation) over an empty record
    /// where this index's payloads carry one ([`PayloadBinder`]). The
    /// record itself is not carried: a query fetches the records it
    /// matches from the keyword index's document store, so that each
    /// record is stored once (builds before this one carried a copy in
    /// every range index: see [`RangeIndex::carrying_payload`]).
    ///
    /// An untagged payload holds the identifier in [`Self::id_bytes`]
    /// bytes, big-endian; an identifier that does not fit them is refused
    /// (`docs/tables.md`, "Limits").
    pub(crate) fn payload(
        &self,
        binder: Option<&PayloadBinder>,
        field: &str,
        id: DocId,
        value: u64,
    ) -> Result<Vec<u8>> {
        if let Some(b) = binder.filter(|b| self.tagged(b)) {
            let mut out = id.to_be_bytes().to_vec();
            out.extend_from_slice(&b.tag(field, id, value, &[]));
            return Ok(out);
        }
        let width = self.id_bytes();
        let bytes = id.to_be_bytes();
        let (high, low) = bytes.split_at(8 - width);
        if high.iter().any(|&b| b != 0) {
            return Err(ClientError::InvalidArgument(format!(
                "record identifier {id} does not fit the {width}-byte identifiers of the range \
                 index of field {field:?} (identifiers below 2^{}): copy the table into a new \
                 one, whose identifiers start again at 1",
                8 * width
            )));
        }
        Ok(low.to_vec())
    }

    /// The identifier in a payload this index returned for value `value`
    /// to a query of `[lo, hi]`, and the record's stored bytes when the
    /// payload carries them: [`open_payload`] where the payloads carry a
    /// tag (or, without a binder, the layout of a table of a build before
    /// incarnations); else the identifier alone, the protocol having
    /// opened the sealed record. A value outside what the query asked, or
    /// a payload not of its form, is [`ClientError::AnswerNotVerified`]
    /// naming the index.
    pub(crate) fn open_payload<'a>(
        &self,
        binder: Option<&PayloadBinder>,
        state: &RangeState,
        value: u64,
        (lo, hi): (u64, u64),
        payload: &'a [u8],
    ) -> Result<(DocId, Option<&'a [u8]>)> {
        match binder {
            Some(b) if !self.tagged(b) => {
                let refused = || ClientError::AnswerNotVerified(state.index.clone());
                if value < lo || value > hi {
                    return Err(refused());
                }
                if payload.len() != self.id_bytes() {
                    return Err(refused());
                }
                let id = payload.iter().fold(0u64, |id, &b| id << 8 | u64::from(b));
                Ok((id, None))
            }
            _ => open_payload(binder, &state.index, &state.field, value, (lo, hi), payload),
        }
    }

    /// The payload builds before [`RangeIndex::payload`] wrote: the
    /// identifier, the tag, then the record's stored bytes when the whole
    /// fits the protocol (else nothing more). A deletion from an index
    /// those builds filled names the payload this way when the short
    /// form finds nothing; queries open both forms ([`open_payload`]).
    pub(crate) fn carrying_payload(
        &self,
        binder: Option<&PayloadBinder>,
        field: &str,
        id: DocId,
        value: u64,
        content: &[u8],
    ) -> Vec<u8> {
        let max = self
            .client
            .max_record()
            .map_or(COVER_MAX, |m| m.min(COVER_MAX));
        let mut out = id.to_be_bytes().to_vec();
        let tag_len = if binder.is_some() { TAG_LEN } else { 0 };
        let carried: &[u8] = if out.len() + tag_len + content.len() <= max {
            content
        } else {
            &[]
        };
        if let Some(b) = binder {
            out.extend_from_slice(&b.tag(field, id, value, carried));
        }
        out.extend_from_slice(carried);
        out
    }
}

/// The identifier in a tagged range index's payload (or one of a table
/// without an incarnation) returned for value `value` by a query of
/// `[lo, hi]` on field `field`, and the record's stored bytes when the
/// payload carries them. A value outside what the query
/// asked, or (with a binder) a payload whose tag does not match its
/// field, identifier, value and bytes, is
/// [`ClientError::AnswerNotVerified`] naming `index`.
fn open_payload<'a>(
    binder: Option<&PayloadBinder>,
    index: &str,
    field: &str,
    value: u64,
    (lo, hi): (u64, u64),
    payload: &'a [u8],
) -> Result<(DocId, Option<&'a [u8]>)> {
    let refused = || ClientError::AnswerNotVerified(index.to_owned());
    if value < lo || value > hi {
        return Err(refused());
    }
    let (id, rest) = payload.split_first_chunk::<8>().ok_or_else(refused)?;
    let id = u64::from_be_bytes(*id);
    let rest = match binder {
        None => rest,
        Some(b) => {
            let (tag, rest) = rest.split_first_chunk::<TAG_LEN>().ok_or_else(refused)?;
            if !bool::from(tag.ct_eq(&b.tag(field, id, value, rest))) {
                return Err(refused());
            }
            rest
        }
    };
    Ok((id, (!rest.is_empty()).then_some(rest)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::schema::Schema;
    use sesame_core::LocalChannel;

    /// The index of a 16-bit field (whole identifiers in its payloads).
    fn index() -> RangeIndex {
        let schema =
            Schema::from_toml("[fields.v]\ntype = \"integer\"\nindex = [\"range\"]\nbits = 16\n")
                .unwrap_or_else(|e| panic!("{e}"));
        let field = schema.fields.first().unwrap_or_else(|| unreachable!());
        RangeIndex::fresh(0, field, UNTAGGED_PAYLOAD, 0, &mut rand_core::OsRng)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn binder(incarnation: u8) -> PayloadBinder {
        PayloadBinder::new(&Key::from_bytes([3; 32]), "profile", [incarnation; 16])
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A table's default range index (a B+ tree) seals its records in the
    /// unique form: the precondition is the table's, so the table says so.
    #[test]
    fn a_table_range_index_seals_in_the_unique_form() {
        let schema = Schema::from_toml("[fields.v]\ntype = \"integer\"\nindex = [\"range\"]\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let field = schema.fields.first().unwrap_or_else(|| unreachable!());
        let (_, params) = binding(field).unwrap_or_else(|e| panic!("{e}"));
        let seal = params
            .get_or::<String>(sesame_range::bplus_ore::SEAL_PARAM, String::new())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(seal, "unique");
    }

    #[test]
    fn a_payload_opens_only_in_its_place() {
        let index = index();
        let b = binder(1);
        let payload = index.carrying_payload(Some(&b), "v", 7, 40, b"record");
        let open = |b: &PayloadBinder, field: &str, value: u64, range, p: &[u8]| {
            open_payload(Some(b), "i", field, value, range, p)
                .map(|(id, c)| (id, c.map(<[u8]>::to_vec)))
        };
        assert_eq!(
            open(&b, "v", 40, (0, 100), &payload).ok(),
            Some((7, Some(b"record".to_vec())))
        );
        // Another field, value, table incarnation; a value outside what
        // the query asked; an altered byte anywhere: refused.
        let refused = |r: Result<(DocId, Option<Vec<u8>>)>| matches!(r, Err(ClientError::AnswerNotVerified(ref i)) if i == "i");
        assert!(refused(open(&b, "w", 40, (0, 100), &payload)));
        assert!(refused(open(&b, "v", 41, (0, 100), &payload)));
        assert!(refused(open(&binder(2), "v", 40, (0, 100), &payload)));
        assert!(refused(open(&b, "v", 40, (41, 100), &payload)));
        for i in 0..payload.len() {
            let mut bad = payload.clone();
            if let Some(x) = bad.get_mut(i) {
                *x ^= 1;
            }
            assert!(refused(open(&b, "v", 40, (0, 100), &bad)), "byte {i}");
        }
        // Every truncation is refused, never a panic.
        for n in 0..payload.len() {
            assert!(refused(open(&b, "v", 40, (0, 100), &payload[..n])), "{n}");
        }
    }

    /// A tagged payload carries the identifier and tag only (24 bytes
    /// with a binder, 8 without), whatever the record's size, and opens
    /// to the identifier with no record; it too is bound to its place.
    #[test]
    fn a_payload_carries_no_copy_of_the_record() {
        let index = index();
        let b = binder(1).with_tags(true);
        let payload = index
            .payload(Some(&b), "v", 7, 40)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(payload.len(), 8 + TAG_LEN);
        assert_eq!(
            open_payload(Some(&b), "i", "v", 40, (0, 100), &payload)
                .map(|(id, c)| (id, c.is_none()))
                .ok(),
            Some((7, true))
        );
        assert!(open_payload(Some(&b), "i", "v", 41, (0, 100), &payload).is_err());
        assert!(open_payload(Some(&b), "i", "w", 40, (0, 100), &payload).is_err());
        assert_eq!(
            index.payload(None, "v", 7, 40).ok(),
            Some(7u64.to_be_bytes().to_vec())
        );
    }

    /// A range index, its state and a channel to its server.
    type Served = (RangeIndex, RangeState, LocalChannel<Box<dyn Service>>);

    /// The two range indexes of fields `a` and `b` of `bits` bits over
    /// `protocol`, each with its own server over a store of its own, and
    /// their states.
    fn two_indexes(protocol: &str, bits: u32) -> Vec<Served> {
        let schema = Schema::from_toml(&format!(
            "insecure = true\n[fields.a]\ntype = \"integer\"\nindex = [\"range\"]\n\
             range = \"{protocol}\"\nbits = {bits}\n[fields.b]\ntype = \"integer\"\n\
             index = [\"range\"]\nrange = \"{protocol}\"\nbits = {bits}\n"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        schema
            .fields
            .iter()
            .enumerate()
            .map(|(position, field)| {
                let index =
                    RangeIndex::fresh(position, field, UNTAGGED_PAYLOAD, 0, &mut rand_core::OsRng)
                        .unwrap_or_else(|e| panic!("{e}"));
                let server = index
                    .serve(Arc::new(sesame_store::MemoryStore::new()))
                    .unwrap_or_else(|e| panic!("{e}"));
                let state = RangeState {
                    field: field.name.clone(),
                    index: format!("i-{}", field.name),
                    generation: 0,
                    client: Vec::new(),
                    records: 0,
                    dirty: false,
                };
                (index, state, LocalChannel::new(server))
            })
            .collect()
    }

    /// A server that answers every request with the bytes it holds.
    struct Replay(Vec<u8>, sesame_core::Meter);

    impl Channel for Replay {
        fn call(&mut self, _: &[u8]) -> sesame_core::Result<Vec<u8>> {
            Ok(self.0.clone())
        }
        fn meter(&self) -> &sesame_core::Meter {
            &self.1
        }
    }

    /// A channel that keeps the last answer it got.
    struct Keep<'a>(&'a mut dyn Channel, Vec<u8>);

    impl Channel for Keep<'_> {
        fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
            let answer = self.0.call(request)?;
            self.1.clone_from(&answer);
            Ok(answer)
        }
        fn meter(&self) -> &sesame_core::Meter {
            self.0.meter()
        }
    }

    /// The identifiers a table takes from a query of `[lo, hi]`: the
    /// protocol's answer, each payload opened in its place.
    fn ids(
        index: &mut RangeIndex,
        state: &RangeState,
        binder: &PayloadBinder,
        channel: &mut dyn Channel,
        (lo, hi): (u64, u64),
    ) -> Result<Vec<DocId>> {
        let answer = index.client.query(&mut rand_core::OsRng, channel, lo, hi)?;
        let mut out = Vec::new();
        for (v, p) in &answer.records {
            out.push(index.open_payload(Some(binder), state, *v, (lo, hi), p)?.0);
        }
        Ok(out)
    }

    /// A hostile server answers a query on one range index with the
    /// entries of another (another field of the same table, the same
    /// protocol and values), or with entries of the same index for
    /// other values: refused with payloads of the identifier alone
    /// (Lewi-Wu: the protocol's seal under the index's own key) as with
    /// tagged ones (the plaintext baseline: the table's tag), never
    /// answered with another index's records; so with the short
    /// identifiers of a 40-bit field's nonce blocks. An honest answer is
    /// read.
    #[test]
    fn an_index_answered_with_another_indexs_entries_is_refused() {
        for (protocol, bits, payload_len) in [
            ("bplus-lewi-wu", 16, 8),
            ("bplus-lewi-wu", 40, 5),
            ("bplus-plain", 16, 8 + TAG_LEN),
        ] {
            let b = binder(1);
            let mut indexes = two_indexes(protocol, bits);
            let mut lengths = std::collections::BTreeSet::new();
            for (index, state, channel) in &mut indexes {
                let records: Vec<_> = (1..=20u64)
                    .map(|id| {
                        let p = index.payload(Some(&b), &state.field, id, id * 3);
                        (id * 3, p.unwrap_or_else(|e| panic!("{e}")))
                    })
                    .collect();
                lengths.extend(records.iter().map(|(_, p)| p.len()));
                index
                    .client
                    .build(&mut rand_core::OsRng, channel, &records)
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            let [(a, sa, ca), (bi, sb, cb)] = &mut indexes[..] else {
                unreachable!()
            };
            let mut keep = Keep(ca, Vec::new());
            let honest = ids(a, sa, &b, &mut keep, (0, 30)).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(honest, (1..=10).collect::<Vec<_>>(), "{protocol}");
            let of_a = keep.1;
            // Index a's answer served for index b.
            let got = ids(
                bi,
                sb,
                &b,
                &mut Replay(of_a, sesame_core::Meter::new()),
                (0, 30),
            );
            assert!(
                got.is_err(),
                "{protocol}: b answered with a's entries: {got:?}"
            );
            // Index b's answer for [30, 60] served for [0, 30].
            let mut keep = Keep(cb, Vec::new());
            ids(bi, sb, &b, &mut keep, (30, 60)).unwrap_or_else(|e| panic!("{e}"));
            let other = keep.1;
            let got = ids(
                bi,
                sb,
                &b,
                &mut Replay(other, sesame_core::Meter::new()),
                (0, 29),
            );
            assert!(got.is_err(), "{protocol}: other values accepted: {got:?}");
            assert_eq!(lengths, [payload_len].into(), "{protocol} {bits}");
        }
    }

    /// The index of a `bits`-bit field made fresh when the table has
    /// given identifiers up to `ids_so_far`, with a server of its own.
    fn served(bits: u32, ids_so_far: u64) -> Served {
        let schema = Schema::from_toml(&format!(
            "[fields.v]\ntype = \"integer\"\nindex = [\"range\"]\nbits = {bits}\n"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let field = schema.fields.first().unwrap_or_else(|| unreachable!());
        let index = RangeIndex::fresh(
            0,
            field,
            UNTAGGED_PAYLOAD,
            ids_so_far,
            &mut rand_core::OsRng,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let server = index
            .serve(Arc::new(sesame_store::MemoryStore::new()))
            .unwrap_or_else(|e| panic!("{e}"));
        let state = RangeState {
            field: "v".into(),
            index: "i-v".into(),
            generation: 0,
            client: Vec::new(),
            records: 0,
            dirty: false,
        };
        (index, state, LocalChannel::new(server))
    }

    /// A field of 17 to 40 bits gives its records' identifiers 10 less
    /// its value's bytes, so that value and identifier travel in one
    /// nonce block; a 16-bit field the whole 8 bytes in the block; a
    /// wider field, or a table whose identifiers leave less than 256
    /// times room below the short width's limit, the unique form.
    #[test]
    fn fields_up_to_40_bits_carry_short_identifiers_in_their_nonces() {
        for (bits, ids_so_far, in_nonce) in [
            (16, 0, Some(8)),
            (24, 0, Some(7)),
            (32, 0, Some(6)),
            (40, 0, Some(5)),
            (40, (1 << 32) - 1, Some(5)),
            (40, 1 << 32, None),
            (48, 0, None),
        ] {
            let (index, ..) = served(bits, ids_so_far);
            let case = format!("{bits} bits, {ids_so_far} ids so far");
            assert_eq!(index.client.payload_len(), in_nonce, "{case}");
            assert_eq!(index.id_bytes(), in_nonce.unwrap_or(8), "{case}");
        }
    }

    /// Short identifiers round-trip through a server up to their width's
    /// limit; one past it is refused with an error naming the field, and
    /// a payload of another length than the index's is refused as an
    /// answer.
    #[test]
    fn short_identifiers_answer_to_their_limit_and_refuse_beyond() {
        let b = binder(1);
        let (mut index, state, mut channel) = served(40, 0);
        let top = (1u64 << 40) - 1;
        for (v, id) in [(5u64, 1u64), (6, 256), (7, top)] {
            let p = index
                .payload(Some(&b), "v", id, v)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(p.len(), 5);
            index
                .client
                .insert(&mut rand_core::OsRng, &mut channel, v, &p)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let got =
            ids(&mut index, &state, &b, &mut channel, (0, 10)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, [1, 256, top]);
        match index.payload(Some(&b), "v", top + 1, 8) {
            Err(ClientError::InvalidArgument(m)) => {
                assert!(m.contains("field \"v\"") && m.contains("2^40"), "{m}");
            }
            other => panic!("an identifier past 2^40 was taken: {other:?}"),
        }
        for len in [4, 6, 8] {
            let payload = vec![0; len];
            let got = index.open_payload(Some(&b), &state, 5, (0, 10), &payload);
            assert!(
                matches!(got, Err(ClientError::AnswerNotVerified(_))),
                "{len}: {got:?}"
            );
        }
    }

    /// A table of an earlier build (state format 4) keeps tagging its
    /// payloads, and refuses an untagged one; a current table's payload
    /// over a sealing protocol is the identifier alone and a longer one
    /// is refused.
    #[test]
    fn payload_forms_follow_the_tables_format() {
        let index = index();
        let state = RangeState {
            field: "v".into(),
            index: "i".into(),
            generation: 0,
            client: Vec::new(),
            records: 0,
            dirty: false,
        };
        let old = binder(1).with_tags(true);
        let new = binder(1);
        let tagged = index
            .payload(Some(&old), "v", 7, 40)
            .unwrap_or_else(|e| panic!("{e}"));
        let bare = index
            .payload(Some(&new), "v", 7, 40)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((tagged.len(), bare.len()), (8 + TAG_LEN, 8));
        let open = |b: &PayloadBinder, p: &[u8]| {
            index
                .open_payload(Some(b), &state, 40, (0, 100), p)
                .map(|(id, c)| (id, c.is_none()))
        };
        assert_eq!(open(&old, &tagged).ok(), Some((7, true)));
        assert_eq!(open(&new, &bare).ok(), Some((7, true)));
        for (b, p) in [(&old, &bare), (&new, &tagged)] {
            assert!(matches!(open(b, p), Err(ClientError::AnswerNotVerified(ref i)) if i == "i"));
        }
        assert!(index
            .open_payload(Some(&new), &state, 41, (0, 40), &bare)
            .is_err());
    }

    #[test]
    fn a_table_without_an_incarnation_keeps_the_earlier_layout() {
        let index = index();
        let payload = index.carrying_payload(None, "v", 7, 40, b"record");
        assert_eq!(payload, [&7u64.to_be_bytes()[..], b"record"].concat());
        let (id, content) =
            open_payload(None, "i", "v", 40, (40, 40), &payload).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((id, content), (7, Some(&b"record"[..])));
        // The value is still checked against what the query asked.
        assert!(open_payload(None, "i", "v", 39, (40, 50), &payload).is_err());
    }
    /// A store that remembers the largest batch written to it (bytes of
    /// keys and values), the size of one commit.
    struct LargestBatch {
        inner: sesame_store::MemoryStore,
        largest: std::sync::atomic::AtomicUsize,
    }

    impl LargestBatch {
        fn note(&self, batch: &sesame_core::WriteBatch) {
            let bytes = batch.bytes();
            self.largest
                .fetch_max(bytes, std::sync::atomic::Ordering::SeqCst);
        }
    }

    impl Store for LargestBatch {
        fn write(&self, batch: sesame_core::WriteBatch) -> sesame_core::Result<()> {
            self.note(&batch);
            self.inner.write(batch)
        }
        fn write_if(
            &self,
            expect: &[(&[u8], Option<&[u8]>)],
            batch: &sesame_core::WriteBatch,
        ) -> sesame_core::Result<bool> {
            self.note(batch);
            self.inner.write_if(expect, batch)
        }
        fn write_if_group(
            &self,
            group: &[sesame_core::Conditional<'_>],
        ) -> sesame_core::Result<Vec<bool>> {
            for c in group {
                self.note(c.1);
            }
            self.inner.write_if_group(group)
        }
        sesame_store::forward_store!(|s| s.inner; get, get_many, scan_prefix, scan_from, io_counts, backend);
    }

    /// A first import defers its range changes and builds each range
    /// index at the end: the build is committed in transactions of a
    /// bounded size (not one holding every record of the file), and
    /// the index then answers for every record.
    #[test]
    fn a_deferred_range_build_commits_in_bounded_transactions() {
        use crate::table::write::Deferred;
        use crate::table::{Record, Table, Value};
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let profile = crate::table::write::fast_profile(dir.path());
        let schema = Schema::from_toml(
            "key = \"k\"\n[fields.k]\ntype = \"integer\"\n[fields.v]\ntype = \"integer\"\n\
             index = [\"range\"]\nbits = 16\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let store = Arc::new(LargestBatch {
            inner: sesame_store::MemoryStore::new(),
            largest: 0.into(),
        });
        let backend = crate::EmbeddedBackend::over(store.clone());
        let mut table = Table::create_with(&profile, "t", schema, Box::new(backend))
            .unwrap_or_else(|e| panic!("{e}"));
        // Transactions of 1,000 records, runs of 3,000 pairs: the build
        // reads back runs from the file and commits twelve times.
        let mut deferred = Deferred::default();
        deferred.inserts = Spill::with_run_pairs(3000);
        deferred.commit = 1000;
        let rows = 12_000i64;
        for batch in 0..6 {
            let records = (batch * 2000..(batch + 1) * 2000)
                .map(|k| Record {
                    key: k.to_string(),
                    values: vec![Some(Value::Int(k)), Some(Value::Int((k * 7919) % rows))],
                })
                .collect();
            table
                .insert_batch(records, &mut |_| {}, Some(&mut deferred), false)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        store.largest.store(0, std::sync::atomic::Ordering::SeqCst);
        table
            .finish_deferred(deferred, &mut |_| {})
            .unwrap_or_else(|e| panic!("{e}"));
        let largest = store.largest.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            largest <= 256 << 10,
            "the range build committed {largest} bytes in one transaction"
        );
        let answer = table
            .query("v between 0 and 11999", None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(answer.total, 12_000);
        let answer = table
            .query("v between 100 and 199", None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(answer.total, 100);
    }
}
