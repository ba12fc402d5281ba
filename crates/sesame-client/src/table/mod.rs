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

pub mod import;
#[cfg(test)]
mod legacy_tests;
mod names;
mod padding;
mod plan;
pub mod query;
mod ranges;
pub(crate) mod rotate;
pub mod schema;
mod shared;
mod verified;

pub use plan::{Access, Plan};
pub use schema::{Field, FieldType, Schema, Value};

use padding::KeywordPad;
use ranges::{PayloadBinder, RangeIndex, RangeState};
use verified::{GroupIndex, GroupState};

/// Directory of a profile's table states.
pub const TABLE_DIR: &str = "tables";
/// Records per pending intent of a table's keyword index.
const INTENT_RECORDS: usize = 2048;
/// The format of a table's state this build writes (the first field):
/// 3 holds the table's naming key, 2 does not.
const TABLE_FORMAT: u8 = 3;
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
    /// [`TABLE_FORMAT`]: a state of an earlier build starts with its
    /// schema's key (an option: 0 or 1), never with this.
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
}

/// A table's naming key as its state holds it (wiped on drop).
#[derive(Serialize, Deserialize)]
struct NamingKey([u8; 32]);

impl Drop for NamingKey {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
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
    /// Reads a table's state in the current form or one of the two
    /// before it. A table of an earlier build that uses an insecure
    /// scheme (which schemas now refuse without `insecure = true`) opens
    /// as insecure, and says so.
    fn decode(plain: &[u8]) -> Option<TableState> {
        if let Ok(state) = wire::decode::<TableState>(plain) {
            if state.format == TABLE_FORMAT {
                return Some(state);
            }
        }
        if let Ok(old) = wire::decode::<TableStateV2>(plain) {
            if old.format == TABLE_FORMAT_V2 {
                return Some(TableState {
                    format: TABLE_FORMAT,
                    schema: old.schema,
                    ranges: old.ranges,
                    group: old.group,
                    next_row: old.next_row,
                    incarnation: old.incarnation,
                    naming: None,
                });
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
        Some(TableState {
            format: TABLE_FORMAT,
            schema,
            ranges: old.ranges,
            group: old.group,
            next_row: old.next_row,
            incarnation: None,
            naming: None,
        })
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

fn check_table_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_TABLE_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ClientError::InvalidArgument(format!(
            "table name {name:?} must be 1 to {MAX_TABLE_NAME} characters of a-z, 0-9 and _"
        )))
    }
}

fn table_path(profile: &Profile, name: &str) -> PathBuf {
    profile.table_dir().join(format!("{name}.table"))
}

/// `tables/NAME.shared`: the shared record's version and incarnation
/// this device saw last.
fn note_path(profile: &Profile, name: &str) -> PathBuf {
    profile.table_dir().join(format!("{name}.shared"))
}

/// `tables/NAME.unfinished`: a create or drop in progress.
fn marker_path(profile: &Profile, name: &str) -> PathBuf {
    profile.table_dir().join(format!("{name}.unfinished"))
}

/// The lock of table `name`'s create, drop and their completion
/// (`tables/NAME.lock`): a second process is refused at once
/// ([`ClientError::ProfileBusy`]), so it never takes a create in progress
/// for one to undo.
fn table_lock(profile: &Profile, name: &str) -> Result<crate::lock::ProfileLock> {
    let dir = profile.table_dir();
    crate::fsutil::create_private_dir(&dir)?;
    crate::lock::ProfileLock::acquire(&dir.join(format!("{name}.lock")), profile.dir())
}

/// Table names with a file of `suffix` in the profile's table directory.
fn names_with(profile: &Profile, suffix: &str) -> Result<BTreeSet<String>> {
    let dir = profile.table_dir();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeSet::new()),
        Err(e) => return Err(ClientError::io("read", &dir, &e)),
    };
    let mut out = BTreeSet::new();
    for entry in entries {
        let entry = entry.map_err(|e| ClientError::io("read", &dir, &e))?;
        if let Some(name) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_suffix(suffix))
        {
            if check_table_name(name).is_ok() {
                out.insert(name.to_owned());
            }
        }
    }
    Ok(out)
}

/// The names of the profile's tables, sorted: those on the profile's
/// list of tables on the server (any device's), and this device's own
/// that are not shared. A create or drop that did not finish is finished
/// or undone first.
pub fn tables(profile: &Profile) -> Result<Vec<String>> {
    listed_tables(profile).map_err(|e| profile.explain_after_rotation(e))
}

/// [`tables`], before an error is told apart from a rotation made on
/// another device.
fn listed_tables(profile: &Profile) -> Result<Vec<String>> {
    profile.check_not_rotating()?;
    let unfinished = names_with(profile, ".unfinished")?;
    // The embedded store is opened only when there is something to finish
    // (a process holds it while a table of it is open).
    let listed = if unfinished.is_empty() && profile.server()?.is_none() {
        BTreeSet::new()
    } else {
        let mut backend = profile.backend()?;
        let cipher = profile.state_cipher();
        for name in unfinished {
            // One another process is working on is left to it.
            let _lock = match table_lock(profile, &name) {
                Ok(lock) => lock,
                Err(ClientError::ProfileBusy(_)) => continue,
                Err(e) => return Err(e),
            };
            finish_unfinished(profile, backend.as_mut(), &cipher, &name)?;
        }
        shared::catalog(backend.as_mut(), &cipher, crate::DEFAULT_INDEX)?
    };
    let mut out: BTreeSet<String> = listed.clone();
    for name in names_with(profile, ".table")? {
        // A shared table gone from the list was dropped on another device.
        if listed.contains(&name) || !note_path(profile, &name).exists() {
            out.insert(name);
        }
    }
    Ok(out.into_iter().collect())
}

/// What a create or drop in progress writes first
/// (`tables/NAME.unfinished`), so that whatever interrupts it, the next
/// table command on this device finishes or undoes it.
#[derive(Serialize, Deserialize)]
struct Marker {
    /// `create` or `drop`.
    op: String,
    /// The incarnation created or dropped (hex).
    incarnation: String,
    /// The keyword index's name.
    rows: String,
    /// Every index it may have made or must remove, the keyword index
    /// first.
    indexes: Vec<String>,
}

fn write_marker(profile: &Profile, name: &str, marker: &Marker) -> Result<()> {
    crate::fsutil::create_private_dir(&profile.table_dir())?;
    let json = serde_json::to_vec(marker)
        .map_err(|e| ClientError::InvalidArgument(format!("table marker: {e}")))?;
    crate::fsutil::write_atomic(&marker_path(profile, name), &json)
}

fn remove_file(p: &std::path::Path) -> Result<()> {
    match std::fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ClientError::io("remove", p, &e)),
    }
}

/// Removes this device's files of keyword index `rows`: its state, its
/// shared-state note and its intents.
fn remove_local_rows(profile: &Profile, rows: &str) -> Result<()> {
    remove_file(&profile.state_path(rows))?;
    remove_file(&profile.shared_sidecar(rows))?;
    let intents = profile
        .dir()
        .join(crate::INDEX_DIR)
        .join(format!("{rows}.intents"));
    match std::fs::remove_dir_all(&intents) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ClientError::io("remove", &intents, &e)),
    }
}

/// Finishes or undoes what a create or drop of table `name` on this
/// device left unfinished (`tables/NAME.unfinished`); the caller holds the
/// table's lock:
///
/// - a create whose table record was written (or, without records, whose
///   state file was) is complete: it is put on the profile's list;
/// - a create that did not get that far is undone: every index it may
///   have made is removed, with this device's files of it;
/// - a drop is carried out again.
///
/// Indexes are removed only where no other incarnation of the table is
/// recorded (another device made the table again meanwhile: it is left
/// alone).
fn finish_unfinished(
    profile: &Profile,
    backend: &mut dyn Backend,
    cipher: &StateCipher,
    name: &str,
) -> Result<()> {
    let path = marker_path(profile, name);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(ClientError::io("read", &path, &e)),
    };
    let marker: Marker =
        serde_json::from_slice(&bytes).map_err(|_| ClientError::ProfileCorrupt {
            path: path.clone(),
            reason: "not a table marker of this build".into(),
        })?;
    let incarnation = hex::decode(&marker.incarnation).unwrap_or_default();
    let found = shared::read(backend, cipher, &marker.rows, name)?;
    let (ours, other) = match &found {
        shared::Found::Table(seen, _) => {
            let ours = seen.incarnation.as_slice() == incarnation.as_slice();
            (ours, !ours)
        }
        _ => (false, false),
    };
    let mut rng = OsRng;
    if marker.op == "create" {
        let committed = ours
            || (matches!(found, shared::Found::NoRecords) && table_path(profile, name).exists());
        if committed {
            if ours {
                shared::change_catalog(
                    backend,
                    cipher,
                    &mut rng,
                    crate::DEFAULT_INDEX,
                    name,
                    true,
                )?;
            }
        } else if other {
            // Another device's table of that name: this device's copy of
            // its own attempt goes.
            remove_local_rows(profile, &marker.rows)?;
        } else {
            for index in &marker.indexes {
                backend.remove_index(index)?;
            }
            remove_local_rows(profile, &marker.rows)?;
            remove_file(&table_path(profile, name))?;
            remove_file(&note_path(profile, name))?;
        }
    } else {
        if !other {
            for index in &marker.indexes {
                backend.remove_index(index)?;
            }
            shared::change_catalog(backend, cipher, &mut rng, crate::DEFAULT_INDEX, name, false)?;
        }
        remove_file(&table_path(profile, name))?;
        remove_file(&note_path(profile, name))?;
        remove_local_rows(profile, &marker.rows)?;
    }
    remove_file(&path)
}

/// Removes what a table of name `name` left where its indexes run with
/// no table referring to it (a create or drop interrupted on another
/// device, or by an earlier build): every index with one of the table's
/// names, opaque or of earlier builds (`t-<table>...`), where the backend
/// can list them, and this device's files of its keyword index. Returns
/// how many indexes were removed. A table of that name that exists is not
/// touched ([`ClientError::TableExists`]).
pub fn remove_remnants(profile: &Profile, name: &str) -> Result<usize> {
    check_table_name(name)?;
    let _lock = table_lock(profile, name)?;
    let mut backend = profile.backend()?;
    let cipher = profile.state_cipher();
    finish_unfinished(profile, backend.as_mut(), &cipher, name)?;
    let key = profile.table_names_key();
    let rows = names::rows(&key, name);
    let legacy = names::legacy_rows(name);
    if table_path(profile, name).exists() {
        return Err(ClientError::TableExists(name.to_owned()));
    }
    for index in [&rows, &legacy] {
        if matches!(
            shared::read(backend.as_mut(), &cipher, index, name)?,
            shared::Found::Table(..)
        ) {
            return Err(ClientError::TableExists(name.to_owned()));
        }
    }
    let mut removed = 0;
    if let Some(list) = backend.index_names()? {
        for index in names::every(&key, name)
            .into_iter()
            .chain(names::every_legacy(name))
        {
            if list.contains(&index) {
                backend.remove_index(&index)?;
                removed += 1;
            }
        }
    }
    remove_local_rows(profile, &rows)?;
    remove_local_rows(profile, &legacy)?;
    Ok(removed)
}

/// The keywords of a stored record (padded with `pad`'s dummies), for the
/// keyword index's deletions, rebuilds and checks.
fn extractor(schema: &Schema, pad: Option<Arc<KeywordPad>>) -> crate::session::Extractor {
    let schema = schema.clone();
    Arc::new(
        move |content: &[u8]| match wire::decode::<Record>(content) {
            Ok(r) => padding::keywords(&schema, pad.as_deref(), &r.values, content),
            Err(_) => Vec::new(),
        },
    )
}

impl Table {
    /// Creates table `name` with `schema` in the profile: its keyword
    /// index, its range indexes (fresh keys for each), and its state file.
    /// Every scheme's parameters are checked before anything is written.
    pub fn create(profile: &Profile, name: &str, schema: Schema) -> Result<Table> {
        Self::create_in(profile, name, schema, None, false)
    }

    /// A table with the names builds before opaque names gave
    /// (`t-<table>`, `t-<table>-<n>`, `t-<table>-v`), for the tests that
    /// such tables keep working. Not for use: those names tell the server
    /// the table's name.
    #[doc(hidden)]
    pub fn create_legacy_for_tests(
        profile: &Profile,
        name: &str,
        schema: Schema,
        backend: Option<Box<dyn Backend>>,
    ) -> Result<Table> {
        Self::create_in(profile, name, schema, backend, true)
    }

    /// As [`Table::create`], with the server halves reached through
    /// `backend` (another store, or a remote server).
    pub fn create_with(
        profile: &Profile,
        name: &str,
        schema: Schema,
        backend: Box<dyn Backend>,
    ) -> Result<Table> {
        Self::create_in(profile, name, schema, Some(backend), false)
    }

    fn create_in(
        profile: &Profile,
        name: &str,
        schema: Schema,
        backend: Option<Box<dyn Backend>>,
        legacy: bool,
    ) -> Result<Table> {
        check_table_name(name)?;
        profile.check_not_rotating()?;
        schema.check()?;
        let path = table_path(profile, name);
        if path.exists() && !marker_path(profile, name).exists() {
            return Err(ClientError::TableExists(name.to_owned()));
        }
        let _lock = table_lock(profile, name)?;
        let cipher = profile.state_cipher();
        let mut backend = match backend {
            Some(b) => b,
            None => profile.backend()?,
        };
        finish_unfinished(profile, backend.as_mut(), &cipher, name)?;
        if path.exists() {
            return Err(ClientError::TableExists(name.to_owned()));
        }
        let key = profile.table_names_key();
        let rows = if legacy {
            names::legacy_rows(name)
        } else {
            names::rows(&key, name)
        };
        // A table of this name that another device made (or this one,
        // whose files are gone), under opaque or legacy names, is refused:
        // nothing of it is touched.
        for index in [rows.clone(), names::legacy_rows(name)] {
            let found = shared::read(backend.as_mut(), &cipher, &index, name)?;
            if matches!(found, shared::Found::Table(..)) {
                return Err(ClientError::TableExists(name.to_owned()));
            }
        }
        let mut rng = OsRng;
        let keyword_params = schema.equality.params()?;
        crate::profile::check_scheme(&schema.equality.scheme, &keyword_params)?;
        let mut ranges = Vec::new();
        let mut states = Vec::new();
        for (position, field) in schema.fields.iter().enumerate() {
            if field.range.is_some() {
                let index = RangeIndex::fresh(position, field, &mut rng)?;
                states.push(RangeState {
                    field: field.name.clone(),
                    index: if legacy {
                        names::legacy_range(name, position)
                    } else {
                        names::range(&key, name, position)
                    },
                    generation: 0,
                    client: index.client.save_state()?,
                    records: 0,
                    dirty: false,
                });
                ranges.push(index);
            }
        }
        let (group, group_state) = if schema.verified.is_some() {
            let g = GroupIndex::fresh(&schema, &mut rng)?;
            let state = GroupState {
                index: if legacy {
                    names::legacy_group(name)
                } else {
                    names::group(&key, name)
                },
                generation: 0,
                client: g.client.save_state()?,
                stale: 0,
                dirty: false,
            };
            (Some(g), Some(state))
        } else {
            (None, None)
        };
        let mut indexes = vec![rows.clone()];
        indexes.extend(states.iter().map(|s| s.index.clone()));
        indexes.extend(group_state.as_ref().map(|g| g.index.clone()));
        // What a create or drop that did not finish left under this
        // table's names (no table refers to it: there is no record) goes
        // first; the marker makes the next command undo this create if it
        // does not finish.
        let mut remnants = match backend.index_names()? {
            Some(list) if !legacy => names::every(&key, name)
                .into_iter()
                .filter(|n| list.contains(n))
                .collect(),
            _ => indexes.clone(),
        };
        let mut incarnation = [0u8; 16];
        rand_core::RngCore::fill_bytes(&mut rng, &mut incarnation);
        let naming = Key::<32>::generate(&mut rng);
        let mut undo = indexes.clone();
        undo.extend(remnants.iter().filter(|r| !indexes.contains(r)).cloned());
        write_marker(
            profile,
            name,
            &Marker {
                op: "create".into(),
                incarnation: hex::encode(incarnation),
                rows: rows.clone(),
                indexes: undo,
            },
        )?;
        for index in remnants.drain(..) {
            backend.remove_index(&index)?;
        }
        remove_local_rows(profile, &rows)?;
        profile.create_index(&rows, &schema.equality.scheme, &keyword_params)?;
        let ensured = (|| -> Result<()> {
            backend.ensure_index(&rows, &schema.equality.scheme, &keyword_params)?;
            for (index, state) in ranges.iter().zip(&states) {
                backend.ensure_index(
                    &state.index,
                    index.protocol.descriptor.name,
                    &index.params,
                )?;
            }
            if let (Some(g), Some(state)) = (&group, &group_state) {
                backend.ensure_index(&state.index, g.entry.descriptor.name, &g.params)?;
            }
            Ok(())
        })();
        if let Err(e) = ensured {
            // Refused (the server's limit on indexes, a lost connection):
            // what was made goes now, or with the next command.
            let _ = finish_unfinished(profile, backend.as_mut(), &cipher, name);
            return Err(e);
        }
        // The keyword index is new where it runs: its session shares its
        // fresh state there.
        let session = profile.session_with(&rows, backend)?;
        crate::fsutil::create_private_dir(&profile.table_dir())?;
        let shared = session.is_shared().then_some(shared::Seen {
            version: 0,
            incarnation,
            chunks: None,
        });
        let mut table = Table {
            name: name.to_owned(),
            rows_name: rows,
            shared,
            path: path.clone(),
            cipher,
            state: TableState {
                format: TABLE_FORMAT,
                schema,
                ranges: states,
                group: group_state,
                next_row: 0,
                incarnation: Some(incarnation),
                naming: Some(NamingKey(*naming.as_bytes())),
            },
            rows: session,
            ranges,
            group,
            rng,
            repaired: Vec::new(),
            covered: HashMap::new(),
            binder: Some(PayloadBinder::new(
                profile.doc_key(),
                profile.id(),
                incarnation,
            )?),
            pad: Some(Arc::new(KeywordPad::new(
                profile.doc_key(),
                profile.id(),
                incarnation,
            )?)),
            names: KeyedHash::new(&naming),
        };
        table.prepare_rows();
        match table.save() {
            Ok(()) => {}
            Err(ClientError::TableChanged(_)) => {
                // Another device made a table of this name at the same
                // moment, and recorded it first: it is theirs.
                let _ =
                    finish_unfinished(profile, table.rows.backend.as_mut(), &table.cipher, name);
                return Err(ClientError::TableExists(name.to_owned()));
            }
            Err(e) => return Err(e),
        }
        if table.shared.is_some() {
            shared::change_catalog(
                table.rows.backend.as_mut(),
                &table.cipher,
                &mut table.rng,
                crate::DEFAULT_INDEX,
                name,
                true,
            )?;
        }
        remove_file(&marker_path(profile, name))?;
        Ok(table)
    }

    /// Opens table `name`. An operation an earlier process left
    /// unfinished is completed first: the keyword index's pending intents
    /// are sent, and a range index marked dirty is rebuilt from the
    /// records.
    pub fn open(profile: &Profile, name: &str) -> Result<Table> {
        Self::open_in(profile, name, None).map_err(|e| profile.explain_after_rotation(e))
    }

    /// As [`Table::open`], with the server halves reached through
    /// `backend`.
    pub fn open_with(profile: &Profile, name: &str, backend: Box<dyn Backend>) -> Result<Table> {
        Self::open_in(profile, name, Some(backend))
    }

    fn open_in(profile: &Profile, name: &str, backend: Option<Box<dyn Backend>>) -> Result<Table> {
        check_table_name(name)?;
        profile.check_not_rotating()?;
        let path = table_path(profile, name);
        let note = note_path(profile, name);
        let cipher = profile.state_cipher();
        let mut backend = match backend {
            Some(b) => b,
            None => profile.backend()?,
        };
        if marker_path(profile, name).exists() {
            let _lock = table_lock(profile, name)?;
            finish_unfinished(profile, backend.as_mut(), &cipher, name)?;
        }
        let unknown = || ClientError::UnknownTable(name.to_owned());
        // A table made before names were opaque keeps its names.
        let opaque = names::rows(&profile.table_names_key(), name);
        let legacy = names::legacy_rows(name);
        let mut rows_name = if path.exists()
            && profile.state_path(&legacy).exists()
            && !profile.state_path(&opaque).exists()
        {
            legacy
        } else {
            opaque
        };
        let noted = shared::read_note(&note)?;
        let mut upload = false;
        let mut found = shared::read(backend.as_mut(), &cipher, &rows_name, name)?;
        if matches!(found, shared::Found::NoRecords) && noted.is_none() && !path.exists() {
            // Another device's table made before names were opaque.
            let legacy = names::legacy_rows(name);
            let old = shared::read(backend.as_mut(), &cipher, &legacy, name)?;
            if matches!(old, shared::Found::Table(..)) {
                rows_name = legacy;
                found = old;
            }
        }
        let (shared, adopted) = match found {
            shared::Found::Table(seen, plain) => {
                match noted {
                    Some((version, incarnation))
                        if incarnation == seen.incarnation && seen.version < version =>
                    {
                        return Err(ClientError::SharedStateRolledBack {
                            index: format!("table {name}"),
                            server: seen.version,
                            seen: version,
                        });
                    }
                    Some((_, incarnation)) if incarnation == seen.incarnation => {}
                    // Another incarnation (the table was dropped and made
                    // again), or a table this device has not seen: this
                    // device's copy of the keyword index is not its.
                    Some(_) => remove_local_rows(profile, &rows_name)?,
                    None if !path.exists() => remove_local_rows(profile, &rows_name)?,
                    None => {}
                }
                (Some(seen), Some(plain))
            }
            shared::Found::Absent => match noted {
                Some((version, _)) => {
                    return Err(ClientError::SharedStateRolledBack {
                        index: format!("table {name}"),
                        server: 0,
                        seen: version,
                    })
                }
                // This device's table, made before tables were shared:
                // shared from now on.
                None if path.exists() => {
                    let mut incarnation = [0u8; 16];
                    rand_core::RngCore::fill_bytes(&mut OsRng, &mut incarnation);
                    upload = true;
                    (
                        Some(shared::Seen {
                            version: 0,
                            incarnation,
                            chunks: None,
                        }),
                        None,
                    )
                }
                None => return Err(unknown()),
            },
            shared::Found::NoRecords => {
                if noted.is_some() {
                    // A shared table whose indexes are gone: dropped on
                    // another device. This device's copy goes too.
                    remove_file(&path)?;
                    remove_file(&note)?;
                    remove_local_rows(profile, &rows_name)?;
                    return Err(unknown());
                }
                if !path.exists() {
                    return Err(unknown());
                }
                (None, None)
            }
        };
        if adopted.is_some() && !profile.state_path(&rows_name).exists() {
            // The keyword index's state, as the devices share it.
            let fetched = crate::session::shared::fetch(backend.as_mut(), &cipher, &rows_name)?;
            if let Some((version, (state, _))) =
                fetched.and_then(|f| f.opened.map(|o| (f.version, o)))
            {
                crate::session::shared::adopt_locally(
                    &profile.shared_sidecar(&rows_name),
                    version,
                    || profile.save_state(&mut OsRng, &rows_name, &state),
                )?;
            }
        }
        // The keyword index's lock first: a local state is read under it.
        let rows = profile.session_with(&rows_name, backend)?;
        let plain = match adopted {
            Some(plain) => plain,
            None => cipher.open_table(&path, name)?.ok_or_else(unknown)?,
        };
        let corrupt = || ClientError::StateCorrupt {
            index: format!("table {name}"),
            path: path.clone(),
        };
        let state = TableState::decode(&plain).ok_or_else(corrupt)?;
        let binder = state
            .incarnation
            .map(|i| PayloadBinder::new(profile.doc_key(), profile.id(), i))
            .transpose()?;
        let pad = state
            .incarnation
            .map(|i| KeywordPad::new(profile.doc_key(), profile.id(), i).map(Arc::new))
            .transpose()?;
        state.schema.check()?;
        let mut ranges = Vec::new();
        for rs in &state.ranges {
            let (position, field) = state
                .schema
                .fields
                .iter()
                .enumerate()
                .find(|(_, f)| f.name == rs.field)
                .ok_or_else(corrupt)?;
            ranges.push(RangeIndex::restore(position, field, rs)?);
        }
        let group = match &state.group {
            Some(g) => Some(GroupIndex::restore(&state.schema, g)?),
            None => None,
        };
        crate::fsutil::create_private_dir(&profile.table_dir())?;
        let names = KeyedHash::new(&naming_key(&state, &cipher));
        let mut table = Table {
            name: name.to_owned(),
            rows_name,
            shared,
            path,
            cipher,
            state,
            rows,
            ranges,
            group,
            rng: OsRng,
            repaired: Vec::new(),
            covered: HashMap::new(),
            binder,
            pad,
            names,
        };
        table.prepare_rows();
        if upload {
            // The record's incarnation is the table's, where it has one.
            if let (Some(seen), Some(incarnation)) =
                (table.shared.as_mut(), table.state.incarnation)
            {
                seen.incarnation = incarnation;
            }
            table.save()?;
            shared::change_catalog(
                table.rows.backend.as_mut(),
                &table.cipher,
                &mut table.rng,
                crate::DEFAULT_INDEX,
                name,
                true,
            )?;
        } else if table.shared.is_some() {
            table.cache()?;
        }
        table.repaired = table.recover_as(true)?;
        Ok(table)
    }

    fn prepare_rows(&mut self) {
        self.rows.set_items(
            extractor(&self.state.schema, self.pad.clone()),
            INTENT_RECORDS,
        );
        // Records are bound to the table's incarnation.
        self.rows.doc_context = self.state.incarnation.map_or_else(Vec::new, |i| i.to_vec());
    }

    /// Completes what an interrupted operation left: pending keyword
    /// updates, then dirty range indexes. Returns the range indexes
    /// rebuilt.
    fn recover(&mut self) -> Result<Vec<String>> {
        self.recover_as(false)
    }

    /// As [`Table::recover`]; for a `read`, pending keyword updates that
    /// cannot be sent (the server refuses writes or cannot be reached)
    /// are kept and the read answers from the records the server has
    /// ([`Table::pending_records`]), unless a side index must be rebuilt
    /// from the records: not without the pending ones.
    fn recover_as(&mut self, read: bool) -> Result<Vec<String>> {
        let pending = if read {
            self.rows.resume_pending_for_read()?
        } else {
            self.rows.resume_pending()?;
            0
        };
        let dirty: Vec<usize> = (0..self.ranges.len())
            .filter(|&i| self.state.ranges.get(i).is_some_and(|r| r.dirty))
            .collect();
        let group_dirty = self.state.group.as_ref().is_some_and(|g| g.dirty);
        if pending > 0 && (!dirty.is_empty() || group_dirty) {
            // The unsendable update's error.
            self.rows.resume_pending()?;
        }
        let mut repaired = Vec::new();
        if !dirty.is_empty() {
            repaired = self.rebuild_ranges(&dirty, &mut |_| {})?;
        }
        if group_dirty {
            self.rebuild_group()?;
            repaired.push("[verified]".into());
        }
        Ok(repaired)
    }

    /// Every record with its identifier, in insertion order.
    fn fetch_all(&mut self, progress: &mut dyn FnMut(Progress)) -> Result<Vec<(DocId, Record)>> {
        let docs: Vec<DocumentInfo> = self.rows.state.catalog.values().cloned().collect();
        let mut all: Vec<(DocId, Record)> = Vec::with_capacity(docs.len());
        self.rows
            .fetch_documents(&docs, Phase::Fetching, progress, &mut |doc, r| {
                let record = r.and_then(|r| {
                    wire::decode::<Record>(&r.content)
                        .map_err(|_| ClientError::DocumentCorrupt(doc.id))
                })?;
                all.push((doc.id, record));
                Ok(())
            })?;
        Ok(all)
    }

    /// Rebuilds the verified group's index from the records: a fresh
    /// client (fresh keys) uploads every record into a new generation, the
    /// state switches to it, the old generations are dropped.
    fn rebuild_group(&mut self) -> Result<()> {
        let Some(old) = self.state.group.clone() else {
            return Ok(());
        };
        let all = self.fetch_all(&mut |_| {})?;
        let mut fresh = GroupIndex::fresh(&self.state.schema, &mut self.rng)?;
        let docs: Vec<_> = all
            .iter()
            .map(|(id, r)| fresh.document(&self.state.schema, *id, &r.values))
            .collect();
        let generation = old.generation + 1;
        let mut target = GroupState {
            index: old.index.clone(),
            generation,
            client: Vec::new(),
            stale: 0,
            dirty: false,
        };
        self.rows
            .backend
            .drop_other_generations(&old.index, old.generation)?;
        let mut channel = fresh.transaction(self.rows.backend.as_mut(), &target)?;
        fresh.upload(&mut self.rng, channel.as_mut(), &docs, true)?;
        channel.commit()?;
        target.client = fresh.client.save_state()?;
        self.group = Some(fresh);
        self.state.group = Some(target);
        self.save()?;
        let _ = self
            .rows
            .backend
            .drop_other_generations(&old.index, generation);
        Ok(())
    }

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

    /// Reads the cells of one record (`(field, text)` pairs; a field
    /// missing or with a null text has no value) into a [`Record`]. The
    /// key is the key field's value, else `default_key`, else the next
    /// free position.
    pub fn record_from_cells<'a>(
        &mut self,
        cells: impl IntoIterator<Item = (&'a str, &'a str)>,
        default_key: Option<String>,
    ) -> Result<Record> {
        let schema = &self.state.schema;
        let mut values: Vec<Option<Value>> = vec![None; schema.fields.len()];
        for (name, text) in cells {
            let Some(position) = schema.fields.iter().position(|f| f.name == name) else {
                return Err(ClientError::InvalidArgument(format!(
                    "the table has no field {name:?} (fields: {})",
                    schema
                        .fields
                        .iter()
                        .map(|f| f.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            };
            let field = schema
                .fields
                .get(position)
                .ok_or_else(|| ClientError::InvalidArgument(format!("field {name:?} vanished")))?;
            if let Some(slot) = values.get_mut(position) {
                *slot = field.parse(text, &schema.nulls)?;
            }
        }
        let key = match &schema.key {
            Some(k) => {
                let position = schema
                    .fields
                    .iter()
                    .position(|f| &f.name == k)
                    .ok_or_else(|| ClientError::InvalidArgument(format!("key {k:?} vanished")))?;
                match (values.get(position), schema.fields.get(position)) {
                    (Some(Some(v)), Some(f)) => f.display(v),
                    _ => {
                        return Err(ClientError::InvalidArgument(format!(
                            "a record has no value for the key field {k:?}"
                        )))
                    }
                }
            }
            None => match default_key {
                Some(k) => k,
                None => {
                    let k = format!("#{}", self.state.next_row);
                    self.state.next_row += 1;
                    k
                }
            },
        };
        Ok(Record { key, values })
    }

    /// Inserts records: a key the table does not hold is inserted, a key
    /// it holds with other values is replaced (delete and insert through
    /// each index's own operations), a key it holds with the same values
    /// is skipped. Every value is checked (types, range domains) before
    /// anything is saved or sent. Interrupted at any point, the next
    /// operation on the table completes or repairs the work, and inserting
    /// the same records again changes nothing more: each is held once.
    pub fn insert(
        &mut self,
        records: Vec<Record>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<InsertReport> {
        let mut report = InsertReport::default();
        let rebuilt = self.recover()?;
        report.resumed = rebuilt.len();
        // The last record of a key wins.
        let mut by_key: BTreeMap<String, Record> = BTreeMap::new();
        let mut order = Vec::new();
        for r in records {
            if r.values.len() != self.state.schema.fields.len() {
                return Err(ClientError::InvalidArgument(format!(
                    "record {:?} has {} values; the table has {} fields",
                    r.key,
                    r.values.len(),
                    self.state.schema.fields.len()
                )));
            }
            if !by_key.contains_key(&r.key) {
                order.push(r.key.clone());
            }
            by_key.insert(r.key.clone(), r);
        }
        // Encoded range values, checked before anything changes.
        let mut encoded: HashMap<String, Vec<Option<u64>>> = HashMap::new();
        for (key, r) in &by_key {
            encoded.insert(key.clone(), self.range_values(r)?);
        }
        // What the replaced records held, for their range deletions.
        let old = if self.ranges.is_empty() {
            HashMap::new()
        } else {
            let names: BTreeSet<&str> = by_key.keys().map(String::as_str).collect();
            let docs: Vec<DocumentInfo> = self
                .rows
                .state
                .catalog
                .values()
                .filter(|d| names.contains(d.path.as_str()))
                .cloned()
                .collect();
            self.fetch_range_values(&docs)?
        };
        let mut items = Vec::with_capacity(by_key.len());
        for key in &order {
            if let Some(r) = by_key.get(key) {
                let content = wire::encode(r)?;
                let keywords =
                    padding::keywords(&self.state.schema, self.pad.as_deref(), &r.values, &content);
                items.push(Item {
                    name: key.clone(),
                    content,
                    keywords,
                });
            }
        }
        if self.has_side_indexes() {
            self.save_ranges(true)?;
        }
        let added = self.rows.put_items(items, progress)?;
        report.inserted = added.added.len();
        report.replaced = added.replaced.len();
        report.unchanged = added.unchanged;
        report.rebuilt = added.rebuilt;
        report.resumed += added.resumed;
        if !self.has_side_indexes() {
            return Ok(report);
        }
        if self.group.is_some() {
            let fresh: Vec<(DocId, &Record)> = added
                .added
                .iter()
                .chain(&added.replaced)
                .filter_map(|d| by_key.get(&d.path).map(|r| (d.id, r)))
                .collect();
            self.apply_group(&fresh, added.removed.len() as u64)?;
        }
        let deletes: Vec<RangeRow> = added
            .removed
            .iter()
            .filter_map(|doc| old.get(&doc.id).cloned())
            .collect();
        let mut inserts: Vec<RangeRow> = Vec::new();
        for doc in added.added.iter().chain(&added.replaced) {
            if let (Some(values), Some(r)) = (encoded.get(&doc.path), by_key.get(&doc.path)) {
                inserts.push(RangeRow {
                    id: doc.id,
                    values: values.clone(),
                    content: wire::encode(r)?,
                });
            }
        }
        self.apply_ranges(&deletes, &inserts, progress)?;
        self.compact_group()?;
        Ok(report)
    }

    /// Uploads new records to the verified group's index (one
    /// transaction), and counts `stale` entries of records gone. The
    /// caller saves the state.
    fn apply_group(&mut self, fresh: &[(DocId, &Record)], stale: u64) -> Result<()> {
        let (Some(group), Some(state)) = (self.group.as_mut(), self.state.group.as_mut()) else {
            return Ok(());
        };
        state.stale += stale;
        if fresh.is_empty() {
            return Ok(());
        }
        let docs: Vec<_> = fresh
            .iter()
            .map(|(id, r)| group.document(&self.state.schema, *id, &r.values))
            .collect();
        let mut channel = group.transaction(self.rows.backend.as_mut(), state)?;
        group.upload(&mut self.rng, channel.as_mut(), &docs, false)?;
        channel.commit()?;
        Ok(())
    }

    /// Rebuilds the verified group's index when more than half of its
    /// entries belong to records no longer in the table (the protocol
    /// has no deletion).
    fn compact_group(&mut self) -> Result<()> {
        let stale = self.state.group.as_ref().map_or(0, |g| g.stale);
        if stale > 0 && stale as usize > self.len() {
            self.rebuild_group()?;
        }
        Ok(())
    }

    /// The encoded values of a record's range fields, in range index
    /// order.
    fn range_values(&self, r: &Record) -> Result<Vec<Option<u64>>> {
        self.ranges
            .iter()
            .map(|index| {
                let field =
                    self.state.schema.fields.get(index.field).ok_or_else(|| {
                        ClientError::InvalidArgument("a range field vanished".into())
                    })?;
                match r.values.get(index.field) {
                    Some(Some(v)) => field.encode(v).map(Some),
                    _ => Ok(None),
                }
            })
            .collect()
    }

    /// Fetches stored records and gives their encoded range values, by
    /// identifier. A record that cannot be read is left out (it cannot
    /// be deleted from a range index it is not known to be in).
    fn fetch_range_values(&mut self, docs: &[DocumentInfo]) -> Result<HashMap<DocId, RangeRow>> {
        let mut records = Vec::new();
        self.rows
            .fetch_documents(docs, Phase::Fetching, &mut |_| {}, &mut |doc, r| {
                if let Ok(r) = r {
                    if let Ok(record) = wire::decode::<Record>(&r.content) {
                        records.push((doc.id, record));
                    }
                }
                Ok(())
            })?;
        let mut out = HashMap::new();
        for (id, record) in records {
            if let (Ok(values), Ok(content)) = (self.range_values(&record), wire::encode(&record)) {
                out.insert(
                    id,
                    RangeRow {
                        id,
                        values,
                        content,
                    },
                );
            }
        }
        Ok(out)
    }

    /// Applies deletions then insertions to every range index, the
    /// indexes marked dirty until it ends. An empty index is built in one
    /// batch (the protocol's `build`).
    fn apply_ranges(
        &mut self,
        deletes: &[RangeRow],
        inserts: &[RangeRow],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        let total = (deletes.len() + inserts.len()) as u64 * self.ranges.len() as u64;
        let mut done = 0u64;
        let binder = self.binder.as_ref();
        for (i, (index, state)) in self
            .ranges
            .iter_mut()
            .zip(self.state.ranges.iter_mut())
            .enumerate()
        {
            let mut channel = index.transaction(self.rows.backend.as_mut(), state)?;
            for row in deletes {
                if let Some(Some(v)) = row.values.get(i) {
                    if index.client.delete(
                        &mut self.rng,
                        channel.as_mut(),
                        *v,
                        &index.payload(binder, &state.field, row.id, *v, &row.content),
                    )? {
                        state.records = state.records.saturating_sub(1);
                    }
                }
                done += 1;
            }
            let records: Vec<(u64, Vec<u8>)> = inserts
                .iter()
                .filter_map(|row| match row.values.get(i) {
                    Some(Some(v)) => Some((
                        *v,
                        index.payload(binder, &state.field, row.id, *v, &row.content),
                    )),
                    _ => None,
                })
                .collect();
            if state.records == 0 && !records.is_empty() {
                index
                    .client
                    .build(&mut self.rng, channel.as_mut(), &records)?;
                done += inserts.len() as u64;
            } else {
                for (v, payload) in &records {
                    index
                        .client
                        .insert(&mut self.rng, channel.as_mut(), *v, payload)?;
                    done += 1;
                    if done.is_multiple_of(1024) {
                        progress(Progress {
                            phase: Phase::Indexing,
                            done,
                            total,
                        });
                    }
                }
                done += (inserts.len() - records.len()) as u64;
            }
            channel.commit()?;
            state.records += records.len() as u64;
        }
        self.save_ranges(false)
    }

    /// Rebuilds range indexes (by position in the table's range list)
    /// from the records: a fresh client (fresh keys) builds a new
    /// generation, the state switches to it in one write, the old
    /// generations are dropped. Returns the fields rebuilt.
    fn rebuild_ranges(
        &mut self,
        which: &[usize],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<String>> {
        let all = self.fetch_all(progress)?;
        let mut rebuilt = Vec::new();
        for &i in which {
            let (Some(index), Some(state)) = (self.ranges.get(i), self.state.ranges.get(i)) else {
                continue;
            };
            let field = self
                .state
                .schema
                .fields
                .get(index.field)
                .ok_or_else(|| ClientError::InvalidArgument("a range field vanished".into()))?
                .clone();
            let mut records = Vec::new();
            let mut fresh = RangeIndex::fresh(index.field, &field, &mut self.rng)?;
            for (id, record) in &all {
                if let Some(Some(v)) = record.values.get(index.field) {
                    let v = field.encode(v)?;
                    let payload = fresh.payload(
                        self.binder.as_ref(),
                        &field.name,
                        *id,
                        v,
                        &wire::encode(record)?,
                    );
                    records.push((v, payload));
                }
            }
            let generation = state.generation + 1;
            let target = RangeState {
                field: state.field.clone(),
                index: state.index.clone(),
                generation,
                client: Vec::new(),
                records: records.len() as u64,
                dirty: false,
            };
            self.rows
                .backend
                .drop_other_generations(&state.index, state.generation)?;
            let mut channel = fresh.transaction(self.rows.backend.as_mut(), &target)?;
            if !records.is_empty() {
                fresh
                    .client
                    .build(&mut self.rng, channel.as_mut(), &records)?;
            }
            channel.commit()?;
            let mut target = target;
            target.client = fresh.client.save_state()?;
            if let (Some(slot), Some(state_slot)) =
                (self.ranges.get_mut(i), self.state.ranges.get_mut(i))
            {
                *slot = fresh;
                *state_slot = target;
            }
            self.save()?;
            let _ = self
                .rows
                .backend
                .drop_other_generations(&state_index(&self.state, i), generation);
            rebuilt.push(field.name.clone());
        }
        Ok(rebuilt)
    }

    /// Rebuilds every range index from the records with fresh keys (what
    /// opening a table does for an index an interrupted operation left
    /// dirty). Returns the fields rebuilt.
    pub fn rebuild_range_indexes(
        &mut self,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<String>> {
        self.rows.resume_pending()?;
        let all: Vec<usize> = (0..self.ranges.len()).collect();
        self.rebuild_ranges(&all, progress)
    }

    /// Parses and plans a query without running it.
    pub fn plan(&self, text: &str) -> Result<Plan> {
        let expr =
            query::parse(text).map_err(|e| ClientError::InvalidQuery(format!("query: {e}")))?;
        plan::plan(&self.state.schema, &expr)
    }

    /// Describes how a query would be answered: for each predicate, the
    /// index and scheme that answer it and what the scheme lets the
    /// server learn. Nothing is sent.
    pub fn explain(&self, text: &str) -> Result<Vec<Step>> {
        let plan = self.plan(text)?;
        let keyword = self.rows.scheme();
        let mut out = Vec::new();
        for (predicate, position, access) in plan.leaves() {
            let field = self
                .state
                .schema
                .fields
                .get(position)
                .ok_or_else(|| ClientError::InvalidArgument("a field vanished".into()))?;
            let step = match access {
                Access::Keyword(k) => Step {
                    predicate: predicate.to_owned(),
                    field: field.name.clone(),
                    index: format!("keyword index {}", self.rows_name),
                    scheme: keyword.name.to_owned(),
                    request: if k.contains('^') {
                        "a search token for the prefix keyword".into()
                    } else {
                        "a search token for the value's keyword".into()
                    },
                    leakage: format!("{} {}", keyword.leakage, self.padding_note()),
                },
                Access::Range { lo, hi } => {
                    let (index, state) = self
                        .ranges
                        .iter()
                        .zip(&self.state.ranges)
                        .find(|(r, _)| r.field == position)
                        .ok_or_else(|| {
                            ClientError::InvalidArgument("a range index vanished".into())
                        })?;
                    Step {
                        predicate: predicate.to_owned(),
                        field: field.name.clone(),
                        index: format!("range index {}", state.index),
                        scheme: index.protocol.descriptor.name.to_owned(),
                        request: format!(
                            "a range query for encoded values [{lo}, {hi}] of 0..2^{}",
                            field.bits
                        ),
                        leakage: index.protocol.descriptor.leakage.to_owned(),
                    }
                }
                Access::Verified(terms) => {
                    let (g, state) = self
                        .group
                        .as_ref()
                        .zip(self.state.group.as_ref())
                        .ok_or_else(|| {
                            ClientError::InvalidArgument("the verified group vanished".into())
                        })?;
                    let d = g.entry.descriptor;
                    Step {
                        predicate: predicate.to_owned(),
                        field: field.name.clone(),
                        index: format!("verified group {}", state.index),
                        scheme: d.name.to_owned(),
                        request: verified_request(terms.len()),
                        leakage: d.leakage.to_owned(),
                    }
                }
                Access::Nothing => Step {
                    predicate: predicate.to_owned(),
                    field: field.name.clone(),
                    index: "none".into(),
                    scheme: "-".into(),
                    request: "nothing: no value can match".into(),
                    leakage: "nothing".into(),
                },
            };
            out.push(step);
        }
        Ok(out)
    }

    /// For a table whose schema opted in to insecure schemes
    /// (`insecure = true`), what `table show` and `--explain` print:
    /// which schemes hand the server what in the clear.
    pub fn insecure_warning(&self) -> Option<String> {
        let schema = &self.state.schema;
        if !schema.insecure {
            return None;
        }
        let names = schema.insecure_schemes();
        Some(if names.is_empty() {
            "INSECURE: the schema says `insecure = true` (it uses no insecure scheme now)".into()
        } else {
            format!(
                "INSECURE: this table uses {} (benchmark baselines): the server sees the values \
                 and records these indexes hold IN THE CLEAR",
                names.join(", ")
            )
        })
    }

    /// Answers a query ([`query`] for the language): the matching
    /// records, decrypted, the first `limit` of them in insertion order
    /// (all when `None`), and how many matched in all.
    pub fn query(&mut self, text: &str, limit: Option<usize>) -> Result<Answer> {
        let plan = self.plan(text)?;
        self.recover_as(true)?;
        let writes = plan.leaves().iter().any(|(_, field, access)| {
            matches!(access, Access::Range { .. })
                && self
                    .ranges
                    .iter()
                    .any(|r| r.field == *field && r.query_writes())
        });
        if writes {
            self.save_ranges(true)?;
        }
        let ids = self.matching_ids(&plan);
        if writes {
            // Saved whatever happened: a failed query leaves the mark,
            // and the next open rebuilds.
            if ids.is_ok() {
                self.save_ranges(false)?;
            }
        }
        // An identifier the catalog lacks belongs to a record deleted or
        // replaced (an index without deletion still holds it).
        let matching: Vec<DocumentInfo> = ids?
            .iter()
            .filter_map(|id| self.rows.state.catalog.get(id).cloned())
            .collect();
        let total = matching.len();
        let docs: Vec<DocumentInfo> = matching
            .into_iter()
            .take(limit.unwrap_or(usize::MAX))
            .collect();
        let records = self.fetch_records(&docs)?;
        Ok(Answer {
            total,
            records,
            plan,
        })
    }

    fn matching_ids(&mut self, plan: &Plan) -> Result<BTreeSet<DocId>> {
        let mut covered = HashMap::new();
        let ids = self.matching_ids_into(plan, &mut covered)?;
        self.covered = covered;
        Ok(ids)
    }

    /// As `matching_ids`, keeping the records that range indexes returned
    /// with their identifiers in `covered`.
    fn matching_ids_into(
        &mut self,
        plan: &Plan,
        covered: &mut HashMap<DocId, (Record, [u8; 32])>,
    ) -> Result<BTreeSet<DocId>> {
        let binder = self.binder.as_ref();
        let ranges = &mut self.ranges;
        let states = &self.state.ranges;
        let group = &mut self.group;
        let group_state = &self.state.group;
        let rows = &mut self.rows;
        let rng = &mut self.rng;
        let rows_name = self.rows_name.clone();
        plan.evaluate(&mut |field, access| match access {
            Access::Keyword(k) => {
                let hits = match rows.answer(&Query::Exact(k.clone().into_bytes())) {
                    Ok(h) => h,
                    // A verifying keyword scheme (KPR12) says so when the
                    // server's answer does not match its root.
                    Err(ClientError::Core(sesame_core::Error::Crypto)) => {
                        return Err(ClientError::AnswerNotVerified(rows_name.clone()))
                    }
                    Err(e) => return Err(e),
                };
                Ok(hits.documents.iter().map(|d| d.id).collect())
            }
            Access::Verified(terms) => {
                let (Some(g), Some(state)) = (group.as_mut(), group_state.as_ref()) else {
                    return Err(ClientError::InvalidArgument(
                        "the verified group's index vanished".into(),
                    ));
                };
                let mut channel = g.channel(rows.backend.as_mut(), state)?;
                Ok(g.search(rng, channel.as_mut(), terms, &state.index)?
                    .into_iter()
                    .collect())
            }
            Access::Range { lo, hi } => {
                let Some(i) = ranges.iter().position(|r| r.field == field) else {
                    return Err(ClientError::InvalidArgument(
                        "a range index vanished".into(),
                    ));
                };
                let (Some(index), Some(state)) = (ranges.get_mut(i), states.get(i)) else {
                    return Ok(BTreeSet::new());
                };
                let mut channel = index.channel(rows.backend.as_mut(), state)?;
                let answer = index.client.query(rng, channel.as_mut(), *lo, *hi)?;
                let mut ids = BTreeSet::new();
                for (v, p) in &answer.records {
                    // Each record is checked against what the query asked
                    // and, by its tag, against its field, identifier and
                    // value in this table's incarnation.
                    let (id, content) = ranges::open_payload(
                        binder,
                        &state.index,
                        &state.field,
                        *v,
                        (*lo, *hi),
                        p,
                    )?;
                    if let Some(c) = content {
                        if let Ok(record) = wire::decode::<Record>(c) {
                            covered.insert(id, (record, sesame_crypto::hash::sha256(c)));
                        }
                    }
                    ids.insert(id);
                }
                Ok(ids)
            }
            Access::Nothing => Ok(BTreeSet::new()),
        })
    }

    /// Fetches and decrypts records.
    fn fetch_records(&mut self, docs: &[DocumentInfo]) -> Result<Vec<Record>> {
        // Records a range index returned with their identifiers need no
        // second fetch.
        let covered = std::mem::take(&mut self.covered);
        if !covered.is_empty() {
            let missing: Vec<DocumentInfo> = docs
                .iter()
                .filter(|d| !covered.contains_key(&d.id))
                .cloned()
                .collect();
            let mut fetched: HashMap<DocId, Record> = HashMap::new();
            if !missing.is_empty() {
                for (d, r) in missing.iter().zip(self.fetch_records(&missing)?) {
                    fetched.insert(d.id, r);
                }
            }
            let mut covered = covered;
            return docs
                .iter()
                .map(|d| match covered.remove(&d.id) {
                    // A record carried by a range payload is the one the
                    // catalog recorded, or nothing of it is used.
                    Some((_, digest)) if d.digest.is_some_and(|want| want != digest) => {
                        Err(ClientError::DocumentNotAsAdded(d.id))
                    }
                    Some((record, _)) => Ok(record),
                    None => fetched
                        .remove(&d.id)
                        .ok_or(ClientError::DocumentMissing(d.id)),
                })
                .collect();
        }
        let mut out = Vec::with_capacity(docs.len());
        self.rows
            .fetch_documents(docs, Phase::Fetching, &mut |_| {}, &mut |doc, r| {
                let record = r.and_then(|r| {
                    wire::decode::<Record>(&r.content)
                        .map_err(|_| ClientError::DocumentCorrupt(doc.id))
                })?;
                out.push(record);
                Ok(())
            })?;
        Ok(out)
    }

    /// Deletes the records matching a query; returns how many. Each
    /// index deletes through its scheme's own deletion (a static keyword
    /// scheme rebuilds).
    pub fn delete(&mut self, text: &str) -> Result<usize> {
        let answer_ids = {
            let plan = self.plan(text)?;
            self.recover()?;
            if self.has_side_indexes() {
                self.save_ranges(true)?;
            }
            let ids = self.matching_ids(&plan)?;
            self.covered.clear();
            ids
        };
        let docs: Vec<DocumentInfo> = answer_ids
            .iter()
            .filter_map(|id| self.rows.state.catalog.get(id).cloned())
            .collect();
        if docs.is_empty() {
            if self.has_side_indexes() {
                self.save_ranges(false)?;
            }
            return Ok(0);
        }
        let old = if self.ranges.is_empty() {
            HashMap::new()
        } else {
            self.fetch_range_values(&docs)?
        };
        let names: Vec<String> = docs.iter().map(|d| d.id.to_string()).collect();
        self.rows.remove_documents(&names)?;
        if self.has_side_indexes() {
            self.apply_group(&[], docs.len() as u64)?;
            let deletes: Vec<RangeRow> = docs
                .iter()
                .filter_map(|d| old.get(&d.id).cloned())
                .collect();
            self.apply_ranges(&deletes, &[], &mut |_| {})?;
            self.compact_group()?;
        }
        Ok(docs.len())
    }

    /// Every record, in insertion order (for export and checks).
    pub fn records(&mut self) -> Result<Vec<Record>> {
        self.rows.resume_pending()?;
        let docs: Vec<DocumentInfo> = self.rows.state.catalog.values().cloned().collect();
        self.fetch_records(&docs)
    }

    /// Removes the table: its indexes where they run (the keyword index
    /// first: with it goes the shared record, so from then on the table is
    /// gone for every device), its place on the profile's list, and this
    /// device's files of it. A marker written first makes the next table
    /// command carry out a drop that was interrupted.
    pub fn drop_table(self, profile: &Profile) -> Result<()> {
        let mut indexes = vec![self.rows_name.clone()];
        indexes.extend(self.state.ranges.iter().map(|r| r.index.clone()));
        indexes.extend(self.state.group.as_ref().map(|g| g.index.clone()));
        let marker = Marker {
            op: "drop".into(),
            incarnation: hex::encode(self.shared.as_ref().map_or([0; 16], |s| s.incarnation)),
            rows: self.rows_name.clone(),
            indexes,
        };
        let _lock = table_lock(profile, &self.name)?;
        write_marker(profile, &self.name, &marker)?;
        let name = self.name.clone();
        let cipher = profile.state_cipher();
        let mut backend = self.rows.into_backend();
        finish_unfinished(profile, backend.as_mut(), &cipher, &name)
    }

    /// Checks the table: every record is read and decrypted, and every
    /// range index answers its whole domain with exactly the records that
    /// have a value in its field. Returns the records read and the
    /// problems found (an empty list: none).
    pub fn check(&mut self) -> Result<(usize, Vec<String>)> {
        self.recover()?;
        let mut problems = Vec::new();
        let all = match self.fetch_all(&mut |_| {}) {
            Ok(all) => all,
            Err(e) => return Ok((0, vec![format!("table {}: records: {e}", self.name)])),
        };
        for i in 0..self.ranges.len() {
            let (Some(index), Some(state)) = (self.ranges.get(i), self.state.ranges.get(i)) else {
                continue;
            };
            let field = index.field;
            let bits = self.state.schema.fields.get(field).map_or(64, |f| f.bits);
            let hi = if bits >= 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            let want: BTreeSet<DocId> = all
                .iter()
                .filter(|(_, r)| matches!(r.values.get(field), Some(Some(_))))
                .map(|(id, _)| *id)
                .collect();
            let writes = index.query_writes();
            let label = state.field.clone();
            if writes {
                self.save_ranges(true)?;
            }
            let got = (|| -> Result<BTreeSet<DocId>> {
                let (Some(index), Some(state)) = (self.ranges.get_mut(i), self.state.ranges.get(i))
                else {
                    return Ok(BTreeSet::new());
                };
                let mut channel = index.channel(self.rows.backend.as_mut(), state)?;
                let answer = index.client.query(&mut self.rng, channel.as_mut(), 0, hi)?;
                let mut ids = BTreeSet::new();
                for (v, p) in &answer.records {
                    let binder = self.binder.as_ref();
                    ids.insert(
                        ranges::open_payload(binder, &state.index, &state.field, *v, (0, hi), p)?.0,
                    );
                }
                Ok(ids)
            })();
            if writes && got.is_ok() {
                self.save_ranges(false)?;
            }
            match got {
                Ok(got) if got == want => {}
                Ok(got) => {
                    problems.push(format!(
                        "table {}: the range index of field {label} holds {} of the {} records \
                         with a value ({} others); it is marked for a rebuild from the records, \
                         which the next command on the table makes",
                        self.name,
                        got.intersection(&want).count(),
                        want.len(),
                        got.difference(&want).count()
                    ));
                    if let Some(s) = self.state.ranges.get_mut(i) {
                        s.dirty = true;
                    }
                    self.save()?;
                }
                Err(e) => {
                    problems.push(format!(
                        "table {}: the range index of field {label}: {e}; it is marked for a \
                         rebuild from the records, which the next command on the table makes",
                        self.name
                    ));
                    if let Some(s) = self.state.ranges.get_mut(i) {
                        s.dirty = true;
                    }
                    self.save()?;
                }
            }
        }
        Ok((all.len(), problems))
    }
}

impl Table {
    /// What `--explain` says of the number of keyword entries each
    /// record's update carries.
    fn padding_note(&self) -> String {
        let slots = self.state.schema.keyword_slots();
        if self.pad.is_some() {
            format!(
                "Each record's update carries {slots} keyword entr{}, padded with dummies \
                 whatever its nulls and string lengths (the schema's fixed count).",
                if slots == 1 { "y" } else { "ies" }
            )
        } else {
            format!(
                "Each record's update carries one keyword entry per equality value and one per \
                 prefix (up to {slots} in all): the count shows which fields are null and how \
                 long prefixed strings are (a table of an earlier build: not padded)."
            )
        }
    }
}

/// What `--explain` says a verified group's search sends and what the
/// client checks of its answer.
fn verified_request(terms: usize) -> String {
    format!(
        "one token for the conjunction of {terms} equalit{}; the server tests every record of \
         the group's index and returns a verdict and a proof for each; the client checks every \
         proof against its keys and the version of each record's last upload (an answer that \
         drops, adds, alters or replays a verdict is refused), then checks each record it \
         fetches against the SHA-256 digest it recorded when the record was inserted. \
         Verified: which records match these equalities, and their contents; not verified: \
         the query's other predicates",
        if terms == 1 { "y" } else { "ies" }
    )
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
