//! Insertions and deletions of records, and the upkeep of the range
//! indexes and the verified group they write to.

use super::*;
use crate::state::digest_matches;
use crate::table::ranges::{self, Fill, Spill, BUILD_COMMIT};
use std::collections::HashSet;

/// The range changes of an import's batches, applied at its end
/// ([`Table::finish_deferred`]): the insertions as pairs of encoded value
/// and identifier (a payload carries no record) in a [`Spill`], bounded
/// in memory whatever the file's size, and built in transactions of
/// `commit` records.
pub(super) struct Deferred {
    /// A batch went through (the indexes are marked dirty).
    started: bool,
    deletes: Vec<RangeRow>,
    pub(super) inserts: Spill,
    /// Records of a range build per transaction.
    pub(super) commit: usize,
    /// Threads that fill the range indexes side by side
    /// ([`ranges::fill_all`]).
    pub(super) workers: usize,
}

impl Default for Deferred {
    fn default() -> Self {
        Deferred {
            started: false,
            deletes: Vec::new(),
            inserts: Spill::default(),
            commit: BUILD_COMMIT,
            workers: ranges::workers(),
        }
    }
}

/// The insertions [`Table::apply_ranges`] makes: rows in memory, or an
/// import's pairs kept aside, each index's read back in value order.
pub(super) enum Inserts<'a> {
    Rows(&'a [RangeRow]),
    Spilled {
        spill: &'a mut Spill,
        commit: usize,
        workers: usize,
    },
}

/// A record as builds before the compact form stored it: its values,
/// and an empty key. Encoded as a [`Record`] is (postcard: the key's
/// string, then the values).
#[derive(Serialize)]
struct StoredRecord<'a> {
    key: &'a str,
    values: &'a [Option<Value>],
}

/// The stored content of `record`: its values in the compact form
/// (module `content`), without its key. The key is the record's document
/// path, which the catalog holds and the sealed blob's associated data
/// binds (`crate::documents`, form V3): storing it in the content as well
/// took as many bytes again as the values of a flight (`docs/tables.md`,
/// "Where a table's bytes go").
pub(super) fn record_content(record: &Record) -> Result<Vec<u8>> {
    Ok(super::content::encode(&record.values))
}

/// Whether a catalog entry's digest is of `record` stored in any form:
/// compact, or as builds before stored it (postcard, with its key or
/// without).
pub(super) fn digest_is_of(digest: Option<[u8; 32]>, record: &Record) -> Result<bool> {
    let Some(digest) = digest else {
        return Ok(false);
    };
    Ok(digest_matches(
        &digest,
        &sesame_crypto::hash::sha256(&record_content(record)?),
    ) || earlier_form(&digest, record, wire::encode(record)?)?.is_some())
}

/// The content to give `record` where the table holds a record of its
/// key with `digest`: the form of earlier builds that digest is of, if
/// any (so that the record stays unchanged), else the compact form.
/// `whole` is the keyed form.
fn held_form(digest: &[u8; 32], record: &Record, whole: Vec<u8>) -> Result<Vec<u8>> {
    match earlier_form(digest, record, whole)? {
        Some(content) => Ok(content),
        None => record_content(record),
    }
}

/// `record` in the form of earlier builds that `digest` is of: `whole`
/// (the keyed form), or the postcard form without the key; `None` where
/// it is of neither.
fn earlier_form(digest: &[u8; 32], record: &Record, whole: Vec<u8>) -> Result<Option<Vec<u8>>> {
    let sha = sesame_crypto::hash::sha256;
    if digest_matches(digest, &sha(&whole)) {
        return Ok(Some(whole));
    }
    let keyless = wire::encode(&StoredRecord {
        key: "",
        values: &record.values,
    })?;
    Ok(digest_matches(digest, &sha(&keyless)).then_some(keyless))
}

/// The record stored at `path` as `content`, in any form (module
/// `content`): a record stored without its key takes `path` as its key;
/// one stored with it (builds before) keeps its own.
pub(super) fn decode_record(path: &str, content: &[u8]) -> sesame_core::Result<Record> {
    super::content::decode(path, content)
}

/// The values of one record's cells (`(field, text)` pairs, see
/// [`Table::record_from_cells`]) under `schema`, and its key field's
/// value (`None` for a schema without a key field).
pub(super) fn record_values<'a>(
    schema: &Schema,
    cells: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<(Vec<Option<Value>>, Option<String>)> {
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
    let Some(k) = &schema.key else {
        return Ok((values, None));
    };
    let position = schema
        .fields
        .iter()
        .position(|f| &f.name == k)
        .ok_or_else(|| ClientError::InvalidArgument(format!("key {k:?} vanished")))?;
    let key = match (values.get(position), schema.fields.get(position)) {
        (Some(Some(v)), Some(f)) => f.display(v),
        _ => {
            return Err(ClientError::InvalidArgument(format!(
                "a record has no value for the key field {k:?}"
            )))
        }
    };
    Ok((values, Some(key)))
}

impl Table {
    /// Reads the cells of one record (`(field, text)` pairs; a field
    /// missing or with a null text has no value) into a [`Record`]. The
    /// key is the key field's value, else `default_key`, else the next
    /// free position.
    pub fn record_from_cells<'a>(
        &mut self,
        cells: impl IntoIterator<Item = (&'a str, &'a str)>,
        default_key: Option<String>,
    ) -> Result<Record> {
        let (values, key) = record_values(&self.state.schema, cells)?;
        let key = match key.or(default_key) {
            Some(k) => k,
            None => {
                let k = format!("#{}", self.state.next_row);
                self.state.next_row += 1;
                k
            }
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
        self.insert_batch(records, progress, None, false)
    }

    /// As [`Table::insert`]; with `deferred`, the range indexes' changes
    /// are added to it instead of being applied, and stay marked dirty
    /// (a crash before [`Table::finish_deferred`] rebuilds them from the
    /// records), so that an import applies them all at once: an empty
    /// index is then built in one go (the protocol's `build`, a bulk load
    /// for the B+ trees) while the records go in by batches. With
    /// `new_names` the caller vouches that the table holds none of the
    /// records' keys (an import into a table that was empty, whose keys
    /// are distinct): the passes over the catalog that look for the
    /// records they replace are skipped (a shared index still looks).
    pub(super) fn insert_batch(
        &mut self,
        records: Vec<Record>,
        progress: &mut dyn FnMut(Progress),
        deferred: Option<&mut Deferred>,
        new_names: bool,
    ) -> Result<InsertReport> {
        let mut report = InsertReport::default();
        // Batches after the first of a deferred import find the range
        // indexes marked dirty on purpose: not a crash to repair.
        let rebuilt = match deferred.as_deref() {
            Some(d) if d.started => {
                self.rows.resume_pending()?;
                Vec::new()
            }
            _ => self.recover()?,
        };
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
        // The records the batch replaces, found in one pass over the
        // catalog (on disk, a pass reads every block).
        let new_names = new_names && !self.rows.is_shared();
        let replaced = if new_names || self.rows.state.catalog.is_empty() {
            Vec::new()
        } else {
            let names: HashSet<&str> = by_key.keys().map(String::as_str).collect();
            self.rows.state.catalog.with_paths(&names)?
        };
        // What the replaced records held, for their range deletions.
        let old = if self.ranges.is_empty() {
            HashMap::new()
        } else {
            self.fetch_range_values(&replaced)?
        };
        // A record the table holds unchanged in a form of earlier builds
        // (its key in its content, or the postcard form without it) is
        // given in that form, so that it stays unchanged; every other is
        // stored in the compact form.
        let held: HashMap<String, [u8; 32]> = replaced
            .into_iter()
            .filter_map(|d| d.digest.map(|g| (d.path, g)))
            .collect();
        let mut items = Vec::with_capacity(by_key.len());
        for key in &order {
            if let Some(r) = by_key.get(key) {
                let whole = wire::encode(r)?;
                let keywords =
                    padding::keywords(&self.state.schema, self.pad.as_deref(), &r.values, &whole);
                let content = match held.get(key.as_str()) {
                    Some(d) => held_form(d, r, whole)?,
                    None => record_content(r)?,
                };
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
        let added = self.rows.put_items(items, new_names, progress)?;
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
            if let Some(values) = encoded.get(&doc.path) {
                // A payload carries no copy of the record (module
                // `ranges`): only deletions of earlier builds' payloads
                // need the content.
                inserts.push(RangeRow {
                    id: doc.id,
                    values: values.clone(),
                    content: Vec::new(),
                });
            }
        }
        if let Some(d) = deferred {
            d.started = true;
            d.deletes.extend(deletes);
            for row in &inserts {
                for (i, v) in row.values.iter().enumerate() {
                    if let Some(v) = v {
                        d.inserts.push(&mut self.rng, i, *v, row.id)?;
                    }
                }
            }
            self.compact_group()?;
            return Ok(report);
        }
        self.apply_ranges(&deletes, Inserts::Rows(&inserts), progress)?;
        self.compact_group()?;
        Ok(report)
    }

    /// Applies the range changes an import deferred (see
    /// [`Table::insert_batch`]) and clears the indexes' dirty marks.
    pub(super) fn finish_deferred(
        &mut self,
        deferred: Deferred,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        if !deferred.started || !self.has_side_indexes() {
            return Ok(());
        }
        let Deferred {
            deletes,
            mut inserts,
            commit,
            workers,
            ..
        } = deferred;
        let inserts = Inserts::Spilled {
            spill: &mut inserts,
            commit,
            workers,
        };
        self.apply_ranges(&deletes, inserts, progress)?;
        self.compact_group()
    }

    /// Uploads new records to the verified group's index (one
    /// transaction), and counts `stale` entries of records gone. The
    /// caller saves the state.
    pub(super) fn apply_group(&mut self, fresh: &[(DocId, &Record)], stale: u64) -> Result<()> {
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
    pub(super) fn compact_group(&mut self) -> Result<()> {
        let stale = self.state.group.as_ref().map_or(0, |g| g.stale);
        if stale > 0 && stale as usize > self.len() {
            self.rebuild_group()?;
        }
        Ok(())
    }

    /// The encoded values of a record's range fields, in range index
    /// order.
    pub(super) fn range_values(&self, r: &Record) -> Result<Vec<Option<u64>>> {
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
    pub(super) fn fetch_range_values(
        &mut self,
        docs: &[DocumentInfo],
    ) -> Result<HashMap<DocId, RangeRow>> {
        // The content as stored: what a payload of an earlier build
        // carried (such a record was stored with its key).
        let mut records = Vec::new();
        self.rows
            .fetch_documents(docs, Phase::Fetching, &mut |_| {}, &mut |doc, r| {
                if let Ok(r) = r {
                    if let Ok(record) = decode_record(&doc.path, &r.content) {
                        records.push((doc.id, record, r.content.clone()));
                    }
                }
                Ok(())
            })?;
        let mut out = HashMap::new();
        for (id, record, content) in records {
            if let Ok(values) = self.range_values(&record) {
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
    /// batch (the protocol's `build`); spilled insertions are read back in
    /// value order and built in pieces and transactions of bounded size
    /// ([`RangeIndex::fill_sorted`]), the indexes side by side on worker
    /// threads ([`ranges::fill_all`]).
    pub(super) fn apply_ranges(
        &mut self,
        deletes: &[RangeRow],
        inserts: Inserts<'_>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<()> {
        let inserted = match &inserts {
            Inserts::Rows(rows) => rows.len() as u64 * self.ranges.len() as u64,
            Inserts::Spilled { spill, .. } => (0..self.ranges.len()).map(|i| spill.len(i)).sum(),
        };
        let total = deletes.len() as u64 * self.ranges.len() as u64 + inserted;
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
                    // The short payload of this build, else the one
                    // carrying the record that earlier builds wrote.
                    let short = index.payload(binder, &state.field, row.id, *v)?;
                    let mut found =
                        index
                            .client
                            .delete(&mut self.rng, channel.as_mut(), *v, &short)?;
                    if !found {
                        let carrying =
                            index.carrying_payload(binder, &state.field, row.id, *v, &row.content);
                        if carrying != short {
                            found = index.client.delete(
                                &mut self.rng,
                                channel.as_mut(),
                                *v,
                                &carrying,
                            )?;
                        }
                    }
                    if found {
                        state.records = state.records.saturating_sub(1);
                    }
                }
                done += 1;
            }
            let Inserts::Rows(inserts) = &inserts else {
                // Spilled insertions fill every index below, side by side.
                channel.commit()?;
                continue;
            };
            let records: Vec<(u64, Vec<u8>)> = inserts
                .iter()
                .filter_map(|row| match row.values.get(i) {
                    Some(Some(v)) => Some(
                        index
                            .payload(binder, &state.field, row.id, *v)
                            .map(|p| (*v, p)),
                    ),
                    _ => None,
                })
                .collect::<Result<_>>()?;
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
        if let Inserts::Spilled {
            spill,
            commit,
            workers,
        } = inserts
        {
            let merges = spill.sorted_all(self.ranges.len())?;
            let fills = self
                .ranges
                .iter_mut()
                .zip(self.state.ranges.iter())
                .zip(merges)
                .map(|((index, state), pairs)| Fill {
                    index,
                    state,
                    pairs: Box::new(pairs),
                })
                .collect();
            let filled = ranges::fill_all(
                self.rows.backend.as_mut(),
                fills,
                binder,
                &mut self.rng,
                commit,
                workers,
                &mut |n| {
                    progress(Progress {
                        phase: Phase::Indexing,
                        done: done + n,
                        total,
                    })
                },
            )?;
            for (state, filled) in self.state.ranges.iter_mut().zip(filled) {
                state.records += filled.added;
            }
        }
        self.save_ranges(false)
    }

    /// Rebuilds range indexes (by position in the table's range list)
    /// from the records: a fresh client (fresh keys) builds a new
    /// generation, the state switches to it in one write, the old
    /// generations are dropped. Returns the fields rebuilt.
    pub(super) fn rebuild_ranges(
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
            // Identifiers given so far: the next one less one.
            let most = self.rows.state.next_doc.saturating_sub(1);
            let mut fresh = RangeIndex::fresh(
                index.field,
                &field,
                ranges::payload_bytes(self.binder.as_ref()),
                most,
                &mut self.rng,
            )?;
            for (id, record) in &all {
                if let Some(Some(v)) = record.values.get(index.field) {
                    let v = field.encode(v)?;
                    let payload = fresh.payload(self.binder.as_ref(), &field.name, *id, v)?;
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
        let mut docs: Vec<DocumentInfo> = Vec::new();
        for id in &answer_ids {
            docs.extend(self.rows.state.catalog.get(id)?);
        }
        if docs.is_empty() {
            if self.has_side_indexes() {
                self.save_ranges(false)?;
            }
            return Ok(0);
        }
        self.remove_records(&docs)
    }

    /// Removes stored records and their entries in every index: the
    /// records by identifier, the group index's count, each range
    /// index's leaves (their values read from the records first).
    pub(super) fn remove_records(&mut self, docs: &[DocumentInfo]) -> Result<usize> {
        let old = if self.ranges.is_empty() {
            HashMap::new()
        } else {
            self.fetch_range_values(docs)?
        };
        let names: Vec<String> = docs.iter().map(|d| d.id.to_string()).collect();
        self.rows.remove_documents(&names)?;
        if self.has_side_indexes() {
            self.apply_group(&[], docs.len() as u64)?;
            let deletes: Vec<RangeRow> = docs
                .iter()
                .filter_map(|d| old.get(&d.id).cloned())
                .collect();
            self.apply_ranges(&deletes, Inserts::Rows(&[]), &mut |_| {})?;
            self.compact_group()?;
        }
        Ok(docs.len())
    }

    /// Every record, in insertion order (for export and checks).
    pub fn records(&mut self) -> Result<Vec<Record>> {
        self.rows.resume_pending()?;
        let docs: Vec<DocumentInfo> = self.rows.state.catalog.values().collect::<Result<_>>()?;
        self.fetch_records(&docs)
    }
}

/// A profile at `dir/p` (passphrase `pass`, backend `fast`) with the
/// fast test KDF, for the table's tests.
#[cfg(test)]
pub(super) fn fast_profile(dir: &std::path::Path) -> Profile {
    Profile::create_with_kdf(
        dir.join("p"),
        "pass",
        "fast",
        &sesame_core::Params::new(),
        crate::insecure::fast_kdf(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(k: i64, v: i64) -> Record {
        Record {
            key: k.to_string(),
            values: vec![Some(Value::Int(k)), Some(Value::Int(v))],
        }
    }

    /// A range index filled by an earlier build holds payloads carrying
    /// the record; replacing and deleting those records still removes
    /// their entries (the deletion falls back to the carrying form), so
    /// no stale entry is left behind.
    #[test]
    fn records_of_an_earlier_builds_payloads_are_replaced_and_deleted() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let profile = fast_profile(dir.path());
        let schema = Schema::from_toml(
            "key = \"k\"\n[fields.k]\ntype = \"integer\"\n[fields.v]\ntype = \"integer\"\n\
             index = [\"range\"]\nbits = 8\n\
             range = { scheme = \"bplus-lewi-wu\", params = { seal = \"unique\" } }\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut table = Table::create(&profile, "t", schema).unwrap_or_else(|e| panic!("{e}"));
        // A table of those builds: its payloads tagged (state format 4),
        // its index sealed in the unique form (above: a payload carrying
        // the record does not fit in a nonce).
        table.state.format = super::TABLE_FORMAT_V4;
        table.binder = table.binder.take().map(|b| b.with_tags(true));
        let ok = |r: Result<InsertReport>| r.unwrap_or_else(|e| panic!("{e}"));
        ok(table.insert((0..6).map(|k| record(k, 10 + k)).collect(), &mut |_| {}));
        // Rewrite every entry as an earlier build wrote it.
        let docs: Vec<DocumentInfo> = table
            .rows
            .state
            .catalog
            .values()
            .collect::<Result<_>>()
            .unwrap_or_else(|e| panic!("{e}"));
        let rows = table
            .fetch_range_values(&docs)
            .unwrap_or_else(|e| panic!("{e}"));
        {
            let binder = table.binder.as_ref();
            let (Some(index), Some(state)) = (table.ranges.first_mut(), table.state.ranges.first())
            else {
                panic!("no range index")
            };
            let mut channel = index
                .transaction(table.rows.backend.as_mut(), state)
                .unwrap_or_else(|e| panic!("{e}"));
            for row in rows.values() {
                let Some(Some(v)) = row.values.first() else {
                    continue;
                };
                let short = index
                    .payload(binder, &state.field, row.id, *v)
                    .unwrap_or_else(|e| panic!("{e}"));
                let carrying =
                    index.carrying_payload(binder, &state.field, row.id, *v, &row.content);
                assert_ne!(short, carrying);
                let deleted = index
                    .client
                    .delete(&mut table.rng, channel.as_mut(), *v, &short)
                    .unwrap_or_else(|e| panic!("{e}"));
                assert!(deleted);
                index
                    .client
                    .insert(&mut table.rng, channel.as_mut(), *v, &carrying)
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            channel.commit().unwrap_or_else(|e| panic!("{e}"));
        }
        table.save_ranges(false).unwrap_or_else(|e| panic!("{e}"));
        // The carrying payloads answer (and their records are used).
        let answer = table
            .query("v between 10 and 15", None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(answer.total, 6);
        // Replace two records, delete one: their old entries go.
        ok(table.insert(vec![record(0, 40), record(1, 41)], &mut |_| {}));
        assert_eq!(table.delete("v = 12").unwrap_or_else(|e| panic!("{e}")), 1);
        let entries = |table: &mut Table| {
            let (Some(index), Some(state)) = (table.ranges.first_mut(), table.state.ranges.first())
            else {
                panic!("no range index")
            };
            let mut channel = index
                .channel(table.rows.backend.as_mut(), state)
                .unwrap_or_else(|e| panic!("{e}"));
            index
                .client
                .query(&mut table.rng, channel.as_mut(), 0, 255)
                .unwrap_or_else(|e| panic!("{e}"))
                .records
                .len()
        };
        assert_eq!(entries(&mut table), 5, "a stale entry is left");
        let answer = table
            .query("v between 10 and 15", None)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut keys: Vec<String> = answer.records.iter().map(|r| r.key.clone()).collect();
        keys.sort();
        assert_eq!(keys, ["3", "4", "5"]);
        let answer = table
            .query("v >= 40", None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(answer.total, 2);
    }
}
