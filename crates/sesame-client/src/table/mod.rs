//! Encrypted tables: structured records with equality, prefix and range
//! queries.
//!
//! A table is made of indexes the profile already knows how to keep:
//!
//! - its **records** live in a keyword index of the profile (its rows
//!   index, bound to the schema's `equality` scheme): each record
//!   is a document named by its key, stored AEAD-encrypted beside the
//!   index, and its equality and prefix values are the document's keywords
//!   (`carrier=UA`, `dest^S`, `dest^SF`, ...). Inserts, replacements and
//!   deletions are the index's own updates, with its guarantees: pending
//!   intents, exactly-once application, static schemes rebuilt;
//! - each **range field** has a range protocol's index of its own
//!   (module `ranges`), whose records are the encoded value and the
//!   record's identifier;
//! - a **verified group** of fields (module `verified`) is
//!   answered by a conjunctive scheme whose answers the client verifies
//!   (SI-SSE-RV).
//!
//! A query ([`query`]) is planned (module `plan`): every predicate goes to the
//! index that answers it, `and`/`or` combine identifier sets here, and the
//! matching records are fetched and decrypted.
//!
//! The indexes' names where they run are opaque (module `names`: keyed
//! HMAC of the table's name and the index's role), so the server learns
//! neither the table's name nor its fields'. The schema, the range
//! clients' states and the key that names imported records (module
//! `import`; the table's state) are kept in `tables/<table>.table`,
//! encrypted under the profile's state key; on a server that keeps
//! records, that file is this device's copy of a sealed, versioned record
//! beside the rows index that every device of the profile shares
//! (module `shared`: compare-and-swap, rollback refused, the table's
//! incarnation bound in). A create or drop writes `tables/<table>.unfinished`
//! first, so that the next table command finishes or undoes it and no
//! index is left that nothing refers to.
//!
//! What the server learns is what each index's scheme leaks for the
//! queries sent to it ([`Table::explain`] names them), plus which records
//! are fetched. How the guarantees are tested is in `docs/tables.md`.
//!
//! The code of [`Table`] is split by concern: this file holds the types,
//! the table's state and its saving; `lifecycle` creates, lists and drops
//! tables (names, files, locks, the markers of unfinished creates and
//! drops); `open` opens a table and completes what an earlier process left
//! unfinished; `write` inserts and deletes records and keeps the range
//! indexes and the verified group; `answer` plans, explains and answers
//! queries and fetches records; `check` is the table check.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use rand_core::OsRng;
use serde::{Deserialize, Serialize};
use sesame_core::{wire, Meter};
use sesame_sse::query::Query;
use zeroize::Zeroizing;

use crate::backend::Backend;
use crate::doc_service::DocId;
use crate::error::{ClientError, Result};
use crate::profile::Profile;
use crate::session::{Item, Phase, Progress, Session};
use crate::state::{DocumentInfo, StateCipher};
use sesame_crypto::hash::KeyedHash;
use sesame_crypto::Key;

mod answer;
mod check;
mod compact;
mod content;
pub mod import;
#[cfg(test)]
mod legacy_tests;
mod lifecycle;
mod names;
mod open;
mod padding;
mod plan;
pub mod query;
mod ranges;
pub(crate) mod rotate;
pub mod schema;
mod shared;
pub mod space;
mod sql_api;
mod verified;
mod write;

pub use lifecycle::{remove_remnants, tables};
pub use plan::{Access, Plan};
pub use schema::{Field, FieldType, Schema, Value};

use lifecycle::{
    check_table_name, finish_unfinished, marker_path, note_path, remove_file, remove_local_rows,
    table_lock, table_path,
};

use padding::KeywordPad;
use ranges::{HostedIndex, PayloadBinder, RangeIndex, RangeState};
use verified::{GroupIndex, GroupState};

/// Directory of a profile's table states.
pub const TABLE_DIR: &str = "tables";
/// Records per pending intent of a table's keyword index: an import's
/// batch is one intent (up to the session's bound on an intent's bytes
/// of requests). Each intent is saved and synced before it is sent (its
/// file, the client state that refers to it, then the store's commit):
/// at 2,048 records an intent, those syncs were most of an import's
/// waits.
const INTENT_RECORDS: usize = import::IMPORT_BATCH;
/// The format of a table's state this build writes (the first field):
/// 5 is the layout of 4 for a table whose range payloads carry no tag
/// where the protocol seals its records ([`PayloadBinder`]); 4 says
/// whether its records carry null keywords, 3 holds the table's naming
/// key, 2 does not.
const TABLE_FORMAT: u8 = 5;
/// The format of a table's state written by builds before untagged
/// range payloads: the layout of [`TABLE_FORMAT`], every payload tagged.
/// A state of an earlier format is read as this one and keeps it.
const TABLE_FORMAT_V4: u8 = 4;
/// The format of a table's state written by builds before null keywords.
const TABLE_FORMAT_V3: u8 = 3;
/// The format of a table's state written by builds before naming keys.
const TABLE_FORMAT_V2: u8 = 2;
/// The longest table name.
const MAX_TABLE_NAME: usize = 32;

/// A record: its key and its values, in the schema's field order (`None`:
/// no value).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The name the table knows it by.
    pub key: String,
    /// Its values, in field order.
    pub values: Vec<Option<Value>>,
}

/// What an insertion did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InsertReport {
    /// Records new to the table.
    pub inserted: usize,
    /// Records that replaced one with the same key and other values.
    pub replaced: usize,
    /// Records the table already held, unchanged (skipped).
    pub unchanged: usize,
    /// The keyword index was rebuilt (a static scheme).
    pub rebuilt: bool,
    /// Records of an interrupted operation completed first.
    pub resumed: usize,
}

/// The answer to a query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// Records matching, in all.
    pub total: usize,
    /// The matching records (up to the limit asked), in insertion order.
    pub records: Vec<Record>,
    /// How it was answered.
    pub plan: Plan,
}

/// One step of a query plan, as [`Table::explain`] describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The predicate.
    pub predicate: String,
    /// The field.
    pub field: String,
    /// The index that answers it (`keyword index t-flights (fast)`).
    pub index: String,
    /// The scheme's name.
    pub scheme: String,
    /// What the request sends (the keyword's kind, or the interval).
    pub request: String,
    /// What the scheme lets the server learn, from its descriptor.
    pub leakage: String,
}

#[derive(Serialize, Deserialize)]
struct TableState {
    /// [`TABLE_FORMAT`], or [`TABLE_FORMAT_V4`] for a table whose range
    /// payloads are all tagged (kept as long as the table lives): a state
    /// of an earlier build starts with its schema's key (an option: 0 or
    /// 1), never with these.
    format: u8,
    schema: Schema,
    ranges: Vec<RangeState>,
    /// The verified group's index, if the schema has one.
    group: Option<GroupState>,
    /// The next position given to a record inserted without a key.
    next_row: u64,
    /// Random 16 bytes drawn when the table is created, bound into the
    /// associated data of its records and the tags of its range payloads:
    /// what a dropped table of the same name left (records whose
    /// identifiers a new table reuses from 1) does not open in this one.
    /// `None`: a table created by a build before incarnations, whose
    /// records and payloads stay bound as they were (profile, index,
    /// identifier; the range protocol's key) until it is created again.
    incarnation: Option<[u8; 16]>,
    /// The key that names the records imported into the table when it
    /// has no key field (module `import`): random 32 bytes drawn when
    /// the table is created, carried over when a rotation of the master
    /// key makes the table again, so that a file names the same records
    /// under every master key. `None`: a table of a build before naming
    /// keys, whose records are named under the key the profile's state
    /// key derives ([`StateCipher::derived_names_key`]).
    naming: Option<NamingKey>,
    /// Whether every record gave the keyword index a null keyword for
    /// each of its null equality and prefix fields (module `padding`):
    /// `true` for a table created by this build, `false` for one of an
    /// earlier build (`IS NULL` is then refused until the table is made
    /// again).
    null_keywords: bool,
}

/// A table's naming key as its state holds it (wiped on drop).
#[derive(Serialize, Deserialize)]
struct NamingKey([u8; 32]);

impl Drop for NamingKey {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

/// [`TableState`] as builds before null keywords wrote it (format 3;
/// read, then written in the current form without null keywords).
#[derive(Deserialize)]
struct TableStateV3 {
    format: u8,
    schema: Schema,
    ranges: Vec<RangeState>,
    group: Option<GroupState>,
    next_row: u64,
    incarnation: Option<[u8; 16]>,
    naming: Option<NamingKey>,
}

/// [`TableState`] as builds before naming keys wrote it (format 2; read,
/// then written in the current form with no naming key).
#[derive(Deserialize)]
struct TableStateV2 {
    format: u8,
    schema: Schema,
    ranges: Vec<RangeState>,
    group: Option<GroupState>,
    next_row: u64,
    incarnation: Option<[u8; 16]>,
}

/// [`TableState`] as builds before incarnations wrote it (read, then
/// written in the current form with no incarnation).
#[derive(Deserialize)]
struct TableStateV1 {
    schema: SchemaV1,
    ranges: Vec<RangeState>,
    group: Option<GroupState>,
    next_row: u64,
}

/// [`Schema`] as builds before `insecure` wrote it.
#[derive(Deserialize)]
struct SchemaV1 {
    key: Option<String>,
    equality: schema::Binding,
    nulls: Vec<String>,
    fields: Vec<Field>,
    verified: Option<schema::VerifiedGroup>,
}

impl TableState {
    /// Reads a table's state in the current form or one of the three
    /// before it. A table of an earlier build that uses an insecure
    /// scheme (which schemas now refuse without `insecure = true`) opens
    /// as insecure, and says so.
    fn decode(plain: &[u8]) -> Option<TableState> {
        if let Ok(state) = wire::decode::<TableState>(plain) {
            if state.format == TABLE_FORMAT || state.format == TABLE_FORMAT_V4 {
                return Some(state);
            }
        }
        if let Ok(old) = wire::decode::<TableStateV3>(plain) {
            if old.format == TABLE_FORMAT_V3 {
                return Some(old.current());
            }
        }
        if let Ok(old) = wire::decode::<TableStateV2>(plain) {
            if old.format == TABLE_FORMAT_V2 {
                return Some(old.next().current());
            }
        }
        let old: TableStateV1 = wire::decode(plain).ok()?;
        let mut schema = Schema {
            key: old.schema.key,
            equality: old.schema.equality,
            nulls: old.schema.nulls,
            fields: old.schema.fields,
            verified: old.schema.verified,
            insecure: false,
        };
        schema.insecure = !schema.insecure_schemes().is_empty();
        let v2 = TableStateV2 {
            format: TABLE_FORMAT_V2,
            schema,
            ranges: old.ranges,
            group: old.group,
            next_row: old.next_row,
            incarnation: None,
        };
        Some(v2.next().current())
    }
}

impl TableStateV2 {
    /// As format 3 holds it: no naming key.
    fn next(self) -> TableStateV3 {
        TableStateV3 {
            format: TABLE_FORMAT_V3,
            schema: self.schema,
            ranges: self.ranges,
            group: self.group,
            next_row: self.next_row,
            incarnation: self.incarnation,
            naming: None,
        }
    }
}

impl TableStateV3 {
    /// In the current layout: no null keywords, tagged range payloads.
    fn current(self) -> TableState {
        TableState {
            format: TABLE_FORMAT_V4,
            schema: self.schema,
            ranges: self.ranges,
            group: self.group,
            next_row: self.next_row,
            incarnation: self.incarnation,
            naming: self.naming,
            null_keywords: false,
        }
    }
}

/// An open table. It holds the lock of its keyword index (one process at
/// a time) for as long as it lives.
pub struct Table {
    name: String,
    /// The keyword index's name (opaque, or a legacy table's `t-<table>`).
    rows_name: String,
    /// The version and incarnation of the shared record this state is;
    /// `None` where the backend keeps no records (the embedded store).
    shared: Option<shared::Seen>,
    path: PathBuf,
    cipher: StateCipher,
    state: TableState,
    rows: Session,
    ranges: Vec<RangeIndex>,
    group: Option<GroupIndex>,
    rng: OsRng,
    /// Range fields whose index opening the table rebuilt.
    repaired: Vec<String>,
    /// Records the last query's range indexes returned, by identifier,
    /// with the SHA-256 of their stored bytes.
    covered: HashMap<DocId, (Record, [u8; 32])>,
    /// Binds range payloads to the table's incarnation (none for a table
    /// created before incarnations).
    binder: Option<PayloadBinder>,
    /// Pads each record's keywords to the schema's fixed count (none for
    /// a table created before incarnations).
    pad: Option<Arc<KeywordPad>>,
    /// Digests the names of imported records under the table's naming
    /// key ([`TableState::naming`]).
    names: KeyedHash,
}

/// A record as the range indexes see it: its identifier, its encoded
/// range values, and its stored bytes (carried in range payloads).
#[derive(Clone, Debug)]
struct RangeRow {
    id: DocId,
    values: Vec<Option<u64>>,
    content: Vec<u8>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.name)
            .field("records", &self.len())
            .finish_non_exhaustive()
    }
}

/// The keywords of a stored record (padded with `pad`'s dummies), for the
/// keyword index's deletions, rebuilds and checks.
fn extractor(schema: &Schema, pad: Option<Arc<KeywordPad>>) -> crate::session::Extractor {
    let schema = schema.clone();
    Arc::new(
        move |path: &str, content: &[u8]| match write::decode_record(path, content) {
            Ok(r) => padding::record_keywords(&schema, pad.as_deref(), &r),
            Err(_) => Vec::new(),
        },
    )
}

impl Table {
    /// Records of saved insertions and deletions not yet on the server
    /// (it refused writes or could not be reached): reads answer without
    /// them, and the next command that can sends them.
    pub fn pending_records(&self) -> usize {
        self.rows.pending_documents()
    }

    /// The range fields whose index was rebuilt from the records when the
    /// table was opened (an operation had been interrupted).
    pub fn repaired(&self) -> &[String] {
        &self.repaired
    }

    /// How many records one pending intent of the table's keyword index
    /// carries ([`INTENT_RECORDS`] unless set; at least 1; an intent
    /// also ends at the session's bound on its requests' bytes). Each
    /// intent is saved and synced before its update is sent: larger
    /// intents mean fewer syncs, and a larger update to send again after
    /// an interruption. Tests set it low to cut an import between two
    /// updates.
    pub fn set_records_per_intent(&mut self, records: usize) {
        self.rows.set_documents_per_intent(records);
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The names the server (or the embedded store) knows this table's
    /// indexes by: the keyword index holding the records, each range
    /// field's index (field name, index name), and the verified group's.
    /// They are keyed and opaque, except for a table of earlier builds.
    pub fn index_names(&self) -> (String, Vec<(String, String)>, Option<String>) {
        (
            self.rows_name.clone(),
            self.state
                .ranges
                .iter()
                .map(|r| (r.field.clone(), r.index.clone()))
                .collect(),
            self.state.group.as_ref().map(|g| g.index.clone()),
        )
    }

    /// Its schema.
    pub fn schema(&self) -> &Schema {
        &self.state.schema
    }

    /// Records it holds.
    pub fn len(&self) -> usize {
        self.rows.state.catalog.len()
    }

    /// Whether it holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a range index holds no record (its next insertion is a
    /// batch build).
    pub(crate) fn has_empty_range(&self) -> bool {
        self.state.ranges.iter().any(|r| r.records == 0)
    }

    /// The meter every index of the table reports to.
    pub fn meter(&self) -> &Meter {
        self.rows.meter()
    }

    /// The keyword index's session (for checks and statistics).
    pub fn keyword_index(&self) -> &Session {
        &self.rows
    }

    /// The keyed digest of `parts` in `domain` under the table's naming
    /// key: names of imported records that only the profile's devices
    /// can compute, the same under every master key.
    pub(crate) fn name_digest(&self, domain: &str, parts: &[&[u8]]) -> [u8; 32] {
        self.names.hash(domain, parts)
    }

    /// The table's naming key (its own, or the one the state key derives
    /// for a table of an earlier build), for a rotation to carry over.
    pub(crate) fn naming_key(&self) -> Key<32> {
        naming_key(&self.state, &self.cipher)
    }

    /// Makes `key` the table's naming key (a rotation carrying the old
    /// table's over), saving the state if it changes.
    pub(crate) fn set_naming_key(&mut self, key: &Key<32>) -> Result<()> {
        if self
            .state
            .naming
            .as_ref()
            .is_some_and(|NamingKey(bytes)| Key::from_bytes(*bytes) == *key)
        {
            return Ok(());
        }
        self.state.naming = Some(NamingKey(*key.as_bytes()));
        self.names = KeyedHash::new(key);
        self.save()
    }

    /// Saves the state: first as the next version of the shared record
    /// (compare-and-swap; [`ClientError::TableChanged`] when another
    /// device wrote it since this one read it), then this device's copy.
    fn save(&mut self) -> Result<()> {
        let plain = Zeroizing::new(wire::encode(&self.state)?);
        if let Some(seen) = self.shared.as_mut() {
            let first = seen.version == 0;
            let written = shared::write(
                self.rows.backend.as_mut(),
                &self.cipher,
                &mut self.rng,
                &self.rows_name,
                seen,
                &plain,
            )?;
            if !written {
                if !first {
                    self.mark_dirty_after_conflict();
                }
                return Err(ClientError::TableChanged(self.name.clone()));
            }
        }
        self.cipher
            .seal_table(&mut self.rng, &self.path, &self.name, &plain)?;
        self.note()
    }

    /// Writes this device's copy of a state adopted from the shared
    /// record, and the note of its version.
    fn cache(&mut self) -> Result<()> {
        let plain = Zeroizing::new(wire::encode(&self.state)?);
        self.cipher
            .seal_table(&mut self.rng, &self.path, &self.name, &plain)?;
        self.note()
    }

    fn note(&self) -> Result<()> {
        match &self.shared {
            Some(seen) => shared::write_note(&self.path.with_extension("shared"), seen),
            None => Ok(()),
        }
    }

    /// After a save another device's write beat: this command's range
    /// and group changes may be missing from the state now in force, so
    /// that state is marked dirty (the next command rebuilds the indexes
    /// from the records, which the keyword index holds exactly once).
    /// Best effort: a failure here leaves the next conflict to do it.
    fn mark_dirty_after_conflict(&mut self) {
        if !self.has_side_indexes() {
            return;
        }
        let Some(mine) = self.shared.as_ref().map(|s| s.incarnation) else {
            return;
        };
        for _ in 0..4 {
            let Ok(shared::Found::Table(mut seen, plain)) = shared::read(
                self.rows.backend.as_mut(),
                &self.cipher,
                &self.rows_name,
                &self.name,
            ) else {
                return;
            };
            if seen.incarnation != mine {
                return;
            }
            let Some(mut state) = TableState::decode(&plain) else {
                return;
            };
            for r in &mut state.ranges {
                r.dirty = true;
            }
            if let Some(g) = state.group.as_mut() {
                g.dirty = true;
            }
            let Ok(plain) = wire::encode(&state).map(Zeroizing::new) else {
                return;
            };
            match shared::write(
                self.rows.backend.as_mut(),
                &self.cipher,
                &mut self.rng,
                &self.rows_name,
                &mut seen,
                &plain,
            ) {
                Ok(true) | Err(_) => return,
                Ok(false) => {}
            }
        }
    }

    /// Saves every range client's state, and whether each is dirty.
    fn save_ranges(&mut self, dirty: bool) -> Result<()> {
        for (index, state) in self.ranges.iter().zip(self.state.ranges.iter_mut()) {
            state.client = index.client.save_state()?;
            state.dirty = dirty;
        }
        if let (Some(g), Some(state)) = (&self.group, self.state.group.as_mut()) {
            state.client = g.client.save_state()?;
            state.dirty = dirty;
        }
        self.save()
    }

    /// Whether the table has indexes besides the keyword index (range
    /// indexes, a verified group), whose operations are marked dirty.
    fn has_side_indexes(&self) -> bool {
        !self.ranges.is_empty() || self.group.is_some()
    }
}

/// The key that names a table's imported records: its own, or for a
/// table of a build before naming keys the one the state key derives.
fn naming_key(state: &TableState, cipher: &StateCipher) -> Key<32> {
    match &state.naming {
        Some(NamingKey(bytes)) => Key::from_bytes(*bytes),
        None => cipher.derived_names_key(),
    }
}

fn state_index(state: &TableState, i: usize) -> String {
    state
        .ranges
        .get(i)
        .map(|r| r.index.clone())
        .unwrap_or_default()
}
