//! Encrypted tables: structured records with equality, prefix and range
//! queries.
//!
//! A table is made of indexes the profile already knows how to keep:
//!
//! - its **records** live in a keyword index of the profile (named
//!   `t-<table>`, bound to the schema's `equality` scheme): each record
//!   is a document named by its key, stored AEAD-encrypted beside the
//!   index, and its equality and prefix values are the document's keywords
//!   (`carrier=UA`, `dest^S`, `dest^SF`, ...). Inserts, replacements and
//!   deletions are the index's own updates, with its guarantees: pending
//!   intents, exactly-once application, static schemes rebuilt;
//! - each **range field** has a range protocol's index of its own
//!   (`t-<table>-<n>`, module `ranges`), whose records are the encoded
//!   value and the record's identifier;
//! - a **verified group** of fields (`t-<table>-v`, module `verified`) is
//!   answered by a conjunctive scheme whose answers the client verifies
//!   (SI-SSE-RV).
//!
//! A query ([`query`]) is planned (module `plan`): every predicate goes to the
//! index that answers it, `and`/`or` combine identifier sets here, and the
//! matching records are fetched and decrypted. The schema and the range
//! clients' states are kept in `tables/<table>.table`, encrypted under
//! the profile's state key.
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

pub mod import;
mod plan;
pub mod query;
mod ranges;
pub mod schema;
mod verified;

pub use plan::{Access, Plan};
pub use schema::{Field, FieldType, Schema, Value};

use ranges::{RangeIndex, RangeState};
use verified::{GroupIndex, GroupState};

/// Directory of a profile's table states.
pub const TABLE_DIR: &str = "tables";
/// Records per pending intent of a table's keyword index.
const INTENT_RECORDS: usize = 2048;
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
    schema: Schema,
    ranges: Vec<RangeState>,
    /// The verified group's index, if the schema has one.
    group: Option<GroupState>,
    /// The next position given to a record inserted without a key.
    next_row: u64,
}

/// An open table. It holds the lock of its keyword index (one process at
/// a time) for as long as it lives.
pub struct Table {
    name: String,
    path: PathBuf,
    cipher: StateCipher,
    state: TableState,
    rows: Session,
    ranges: Vec<RangeIndex>,
    group: Option<GroupIndex>,
    rng: OsRng,
    /// Range fields whose index opening the table rebuilt.
    repaired: Vec<String>,
    /// Records the last query's range indexes returned, by identifier.
    covered: HashMap<DocId, Record>,
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

fn rows_index(name: &str) -> String {
    format!("t-{name}")
}

fn range_index(name: &str, position: usize) -> String {
    format!("t-{name}-{position}")
}

fn group_index(name: &str) -> String {
    format!("t-{name}-v")
}

fn table_path(profile: &Profile, name: &str) -> PathBuf {
    profile.dir().join(TABLE_DIR).join(format!("{name}.table"))
}

/// The names of the profile's tables, sorted.
pub fn tables(profile: &Profile) -> Result<Vec<String>> {
    let dir = profile.dir().join(TABLE_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ClientError::io("read", &dir, &e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| ClientError::io("read", &dir, &e))?;
        if let Some(name) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_suffix(".table"))
        {
            if check_table_name(name).is_ok() {
                out.push(name.to_owned());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The keywords of a stored record, for the keyword index's deletions,
/// rebuilds and checks.
fn extractor(schema: &Schema) -> crate::session::Extractor {
    let schema = schema.clone();
    Arc::new(
        move |content: &[u8]| match wire::decode::<Record>(content) {
            Ok(r) => schema.keywords(&r.values),
            Err(_) => Vec::new(),
        },
    )
}

impl Table {
    /// Creates table `name` with `schema` in the profile: its keyword
    /// index, its range indexes (fresh keys for each), and its state file.
    /// Every scheme's parameters are checked before anything is written.
    pub fn create(profile: &Profile, name: &str, schema: Schema) -> Result<Table> {
        Self::create_in(profile, name, schema, None)
    }

    /// As [`Table::create`], with the server halves reached through
    /// `backend` (another store, or a remote server).
    pub fn create_with(
        profile: &Profile,
        name: &str,
        schema: Schema,
        backend: Box<dyn Backend>,
    ) -> Result<Table> {
        Self::create_in(profile, name, schema, Some(backend))
    }

    fn session(
        profile: &Profile,
        index: &str,
        backend: Option<Box<dyn Backend>>,
    ) -> Result<Session> {
        match backend {
            Some(b) => profile.session_with(index, b),
            None => profile.session(index),
        }
    }

    fn create_in(
        profile: &Profile,
        name: &str,
        schema: Schema,
        backend: Option<Box<dyn Backend>>,
    ) -> Result<Table> {
        check_table_name(name)?;
        schema.check()?;
        let path = table_path(profile, name);
        if path.exists() {
            return Err(ClientError::TableExists(name.to_owned()));
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
                    index: range_index(name, position),
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
                index: group_index(name),
                generation: 0,
                client: g.client.save_state()?,
                stale: 0,
                dirty: false,
            };
            (Some(g), Some(state))
        } else {
            (None, None)
        };
        let rows = rows_index(name);
        // Index names `t-<table>...` belong to the table of that name: what
        // a table dropped or created part-way left under them is removed.
        let rows_scheme = schema.equality.scheme.clone();
        let fresh_rows = || -> Result<()> {
            for orphan in [profile.state_path(&rows), profile.shared_sidecar(&rows)] {
                if orphan.exists() {
                    std::fs::remove_file(&orphan)
                        .map_err(|e| ClientError::io("remove", &orphan, &e))?;
                }
            }
            profile.create_index(&rows, &rows_scheme, &keyword_params)
        };
        fresh_rows()?;
        let made = (|| {
            let mut session = Self::session(profile, &rows, backend)?;
            let mut names = vec![rows.clone()];
            names.extend(states.iter().map(|s| s.index.clone()));
            names.extend(group_state.as_ref().map(|g| g.index.clone()));
            for index in &names {
                session.backend.remove_index(index)?;
            }
            session
                .backend
                .ensure_index(&rows, &schema.equality.scheme, &keyword_params)?;
            for (index, state) in ranges.iter().zip(&states) {
                session.backend.ensure_index(
                    &state.index,
                    index.protocol.descriptor.name,
                    &index.params,
                )?;
            }
            if let (Some(g), Some(state)) = (&group, &group_state) {
                session
                    .backend
                    .ensure_index(&state.index, g.entry.descriptor.name, &g.params)?;
            }
            // The records' index is new on the server now: a session that
            // saw a state left there by an earlier table of this name starts
            // again from a fresh one, shared from here on.
            if session.is_shared() {
                let backend = session.into_backend();
                fresh_rows()?;
                session = profile.session_with(&rows, backend)?;
            } else {
                session.share()?;
            }
            crate::fsutil::create_private_dir(&profile.dir().join(TABLE_DIR))?;
            let mut table = Table {
                name: name.to_owned(),
                path: path.clone(),
                cipher: profile.state_cipher(),
                state: TableState {
                    schema,
                    ranges: states,
                    group: group_state,
                    next_row: 0,
                },
                rows: session,
                ranges,
                group,
                rng,
                repaired: Vec::new(),
                covered: HashMap::new(),
            };
            table.prepare_rows();
            table.save()?;
            Ok(table)
        })();
        if made.is_err() {
            let _ = std::fs::remove_file(profile.state_path(&rows));
        }
        made
    }

    /// Opens table `name`. An operation an earlier process left
    /// unfinished is completed first: the keyword index's pending intents
    /// are sent, and a range index marked dirty is rebuilt from the
    /// records.
    pub fn open(profile: &Profile, name: &str) -> Result<Table> {
        Self::open_in(profile, name, None)
    }

    /// As [`Table::open`], with the server halves reached through
    /// `backend`.
    pub fn open_with(profile: &Profile, name: &str, backend: Box<dyn Backend>) -> Result<Table> {
        Self::open_in(profile, name, Some(backend))
    }

    fn open_in(profile: &Profile, name: &str, backend: Option<Box<dyn Backend>>) -> Result<Table> {
        check_table_name(name)?;
        let path = table_path(profile, name);
        if !path.exists() {
            return Err(ClientError::UnknownTable(name.to_owned()));
        }
        // The keyword index's lock first: the state is read under it.
        let rows = Self::session(profile, &rows_index(name), backend)?;
        let cipher = profile.state_cipher();
        let plain = cipher
            .open_table(&path, name)?
            .ok_or_else(|| ClientError::UnknownTable(name.to_owned()))?;
        let corrupt = || ClientError::StateCorrupt {
            index: format!("table {name}"),
            path: path.clone(),
        };
        let state: TableState = wire::decode(&plain).map_err(|_| corrupt())?;
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
        let mut table = Table {
            name: name.to_owned(),
            path,
            cipher,
            state,
            rows,
            ranges,
            group,
            rng: OsRng,
            repaired: Vec::new(),
            covered: HashMap::new(),
        };
        table.prepare_rows();
        table.repaired = table.recover()?;
        Ok(table)
    }

    fn prepare_rows(&mut self) {
        self.rows
            .set_items(extractor(&self.state.schema), INTENT_RECORDS);
    }

    /// Completes what an interrupted operation left: pending keyword
    /// updates, then dirty range indexes. Returns the range indexes
    /// rebuilt.
    fn recover(&mut self) -> Result<Vec<String>> {
        self.rows.resume_pending()?;
        let dirty: Vec<usize> = (0..self.ranges.len())
            .filter(|&i| self.state.ranges.get(i).is_some_and(|r| r.dirty))
            .collect();
        let group_dirty = self.state.group.as_ref().is_some_and(|g| g.dirty);
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

    /// The range fields whose index was rebuilt from the records when the
    /// table was opened (an operation had been interrupted).
    pub fn repaired(&self) -> &[String] {
        &self.repaired
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
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

    fn save(&mut self) -> Result<()> {
        let plain = Zeroizing::new(wire::encode(&self.state)?);
        self.cipher
            .seal_table(&mut self.rng, &self.path, &self.name, &plain)
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
                items.push(Item {
                    name: key.clone(),
                    content: wire::encode(r)?,
                    keywords: self.state.schema.keywords(&r.values),
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
                        &index.payload(row.id, &row.content),
                    )? {
                        state.records = state.records.saturating_sub(1);
                    }
                }
                done += 1;
            }
            let records: Vec<(u64, Vec<u8>)> = inserts
                .iter()
                .filter_map(|row| match row.values.get(i) {
                    Some(Some(v)) => Some((*v, index.payload(row.id, &row.content))),
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
                    records.push((field.encode(v)?, fresh.payload(*id, &wire::encode(record)?)));
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
                    index: format!("keyword index {}", rows_index(&self.name)),
                    scheme: keyword.name.to_owned(),
                    request: if k.contains('^') {
                        "a search token for the prefix keyword".into()
                    } else {
                        "a search token for the value's keyword".into()
                    },
                    leakage: keyword.leakage.to_owned(),
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
                        request: format!(
                            "one token for the conjunction of {} equalit{}; the server tests \
                             every record and proves each verdict, which the client checks",
                            terms.len(),
                            if terms.len() == 1 { "y" } else { "ies" }
                        ),
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

    /// Answers a query ([`query`] for the language): the matching
    /// records, decrypted, the first `limit` of them in insertion order
    /// (all when `None`), and how many matched in all.
    pub fn query(&mut self, text: &str, limit: Option<usize>) -> Result<Answer> {
        let plan = self.plan(text)?;
        self.recover()?;
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
        covered: &mut HashMap<DocId, Record>,
    ) -> Result<BTreeSet<DocId>> {
        let ranges = &mut self.ranges;
        let states = &self.state.ranges;
        let group = &mut self.group;
        let group_state = &self.state.group;
        let rows = &mut self.rows;
        let rng = &mut self.rng;
        let rows_name = rows_index(&self.name);
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
                for (_, p) in &answer.records {
                    let (id, content) = ranges::split_payload(p)?;
                    if let Some(record) = content.and_then(|c| wire::decode::<Record>(c).ok()) {
                        covered.insert(id, record);
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
                .map(|d| {
                    covered
                        .remove(&d.id)
                        .or_else(|| fetched.remove(&d.id))
                        .ok_or(ClientError::DocumentMissing(d.id))
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

    /// Removes the table: its indexes where they run, its keyword index's
    /// state, and its state file.
    pub fn drop_table(mut self, profile: &Profile) -> Result<()> {
        // The table's state goes first: from then on the table is gone,
        // and a crash leaves at most index data nothing refers to (removed
        // again by a table of the same name being dropped or created).
        let rows = rows_index(&self.name);
        let remove = |p: &std::path::Path| match std::fs::remove_file(p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ClientError::io("remove", p, &e)),
        };
        remove(&self.path)?;
        remove(&profile.state_path(&rows))?;
        let mut indexes: Vec<String> = self.state.ranges.iter().map(|r| r.index.clone()).collect();
        indexes.extend(self.state.group.as_ref().map(|g| g.index.clone()));
        indexes.push(rows.clone());
        for index in &indexes {
            self.rows.backend.remove_index(index)?;
        }
        let intents = profile
            .dir()
            .join(crate::INDEX_DIR)
            .join(format!("{rows}.intents"));
        drop(self);
        match std::fs::remove_dir_all(&intents) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ClientError::io("remove", &intents, &e)),
        }
    }
}

fn state_index(state: &TableState, i: usize) -> String {
    state
        .ranges
        .get(i)
        .map(|r| r.index.clone())
        .unwrap_or_default()
}
