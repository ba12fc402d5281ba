//! The tables' part of a master-key rotation
//! ([`crate::Profile::rotate_master`]): a table's indexes are named and
//! keyed from the master key (opaque names, the records' binding, range
//! payload tags, keyword padding, the shared table record, the profile's
//! list of tables), so each table is made again under the new key (new
//! opaque names, a fresh incarnation and scheme keys, the same schema)
//! and its records inserted there, and only then are the old table's
//! indexes and this device's files of it removed. The new table takes
//! the old one's naming key (the key that names the records imported
//! into a table without a key field: random, or for a table of an
//! earlier build derived from the old state key), sealed under the new
//! state key with the rest of its state: a file imported again after the
//! rotation names the same records and converges to the file.
//!
//! Progress is noted in [`PROGRESS_FILE`] (the tables to move, those
//! whose new table holds every record, those whose old table is gone),
//! and the new tables' files are kept in [`NEXT_DIR`] until every table
//! is moved, then put in place of the old ones. Interrupted anywhere, a
//! rerun goes on from the note: a new table half filled is filled again
//! (an insert of a record it holds changes nothing), an old table half
//! removed is removed again; the new table must hold exactly the old
//! one's records before the old one goes. An old table another device
//! changed since its records were read (the versions of its shared
//! records moved) is copied again before it goes. Tested in
//! `tests/master_key.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rand_core::OsRng;
use serde::{Deserialize, Serialize};

use super::{names, note_path, remove_file, remove_local_rows, shared, table_path, Table};
use crate::error::{ClientError, Result};
use crate::profile::Profile;
use crate::session::Progress;

/// The note of the tables' part of a rotation in progress, in the profile
/// directory.
pub(crate) const PROGRESS_FILE: &str = "tables.rotating.json";
/// Where the new tables' files are kept until every table is moved.
pub(crate) const NEXT_DIR: &str = "tables.next";

/// [`PROGRESS_FILE`] as stored (table names, nothing secret: they are
/// the names of the files in `tables/` too).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Note {
    /// The header version the rotation started from (a note of another
    /// rotation is not this one's).
    from_version: u64,
    /// The tables to move.
    tables: BTreeSet<String>,
    /// Tables whose new table holds every record: the old one's index
    /// names, to remove.
    copied: BTreeMap<String, Vec<String>>,
    /// The versions of the old table's shared records (table record,
    /// keyword index state) when its records were read; none on the
    /// embedded store.
    versions: BTreeMap<String, Vec<u64>>,
    /// Tables whose old indexes are being removed (checked unchanged
    /// before).
    removing: BTreeSet<String>,
    /// Tables whose old indexes and files are gone.
    moved: BTreeSet<String>,
}

/// What [`move_tables`] did: tables and records moved by this run, and
/// every name the moved tables' indexes may have under the old or the
/// new key (not document indexes: the rotation leaves them to the
/// tables' part).
#[derive(Default)]
pub(crate) struct Moved {
    pub(crate) tables: usize,
    pub(crate) records: usize,
    pub(crate) indexes: BTreeSet<String>,
}

fn write_note(path: &Path, note: &Note) -> Result<()> {
    let json = serde_json::to_vec_pretty(note)
        .map_err(|e| ClientError::InvalidArgument(format!("table rotation note: {e}")))?;
    crate::fsutil::write_atomic(path, &json)
}

/// Moves every table of the profile from `old` to `new`: the profile
/// under its current and under its new master key, both made for the
/// rotation (`new`'s table files in [`NEXT_DIR`]). `from_version` is the
/// header version the rotation started from.
pub(crate) fn move_tables(
    old: &Profile,
    new: &Profile,
    from_version: u64,
    progress: &mut dyn FnMut(Progress),
) -> Result<Moved> {
    let path = old.dir().join(PROGRESS_FILE);
    let noted = match std::fs::read(&path) {
        Ok(bytes) => Some(serde_json::from_slice::<Note>(&bytes).map_err(|_| {
            ClientError::ProfileCorrupt {
                path: path.clone(),
                reason: "not a note of a table rotation".into(),
            }
        })?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(ClientError::io("read", &path, &e)),
    };
    let mut note = match noted {
        Some(note) if note.from_version == from_version => note,
        _ => {
            // Unfinished creates and drops are finished under the old key.
            let tables: BTreeSet<String> = super::tables(old)?.into_iter().collect();
            let key = old.table_names_key();
            for name in &tables {
                if !old.state_path(&names::rows(&key, name)).exists()
                    && old.state_path(&names::legacy_rows(name)).exists()
                {
                    return Err(legacy(name));
                }
            }
            let note = Note {
                from_version,
                tables,
                copied: BTreeMap::new(),
                versions: BTreeMap::new(),
                removing: BTreeSet::new(),
                moved: BTreeSet::new(),
            };
            write_note(&path, &note)?;
            note
        }
    };
    let mut moved = Moved::default();
    let (old_key, new_key) = (old.table_names_key(), new.table_names_key());
    for name in &note.tables {
        moved.indexes.extend(names::every(&old_key, name));
        moved.indexes.extend(names::every(&new_key, name));
    }
    if note.tables.iter().all(|t| note.moved.contains(t)) {
        return put_in_place(&new.table_dir(), &old.table_dir()).map(|()| moved);
    }
    {
        // The profile's list of tables (a server's), under the new key.
        let mut backend = old.backend()?;
        shared::reseal_catalog(
            backend.as_mut(),
            &old.state_cipher(),
            &new.state_cipher(),
            &mut OsRng,
            crate::DEFAULT_INDEX,
            &note.tables,
        )?;
    }
    for name in note.tables.clone() {
        if note.moved.contains(&name) {
            continue;
        }
        let mut attempts = 0;
        while !note.removing.contains(&name) {
            if !note.copied.contains_key(&name) {
                let Some(copy) = copy_table(old, new, &name, progress)? else {
                    // Listed, but gone (a drop on another device that did
                    // not finish): nothing to move, and off the list.
                    let mut backend = old.backend()?;
                    shared::change_catalog(
                        backend.as_mut(),
                        &new.state_cipher(),
                        &mut OsRng,
                        crate::DEFAULT_INDEX,
                        &name,
                        false,
                    )?;
                    note.removing.insert(name.clone());
                    write_note(&path, &note)?;
                    break;
                };
                moved.records += copy.records;
                note.copied.insert(name.clone(), copy.indexes);
                note.versions.insert(name.clone(), copy.versions);
                write_note(&path, &note)?;
            }
            // Another device that changed the old table since its records
            // were read: the new table is made again from it.
            let rows = note.copied.get(&name).and_then(|i| i.first()).cloned();
            let now = match &rows {
                Some(rows) => record_versions(old.backend()?.as_mut(), rows)?,
                None => Vec::new(),
            };
            if note.versions.get(&name).is_some_and(|seen| *seen != now) {
                attempts += 1;
                if attempts > ATTEMPTS {
                    return Err(ClientError::StateContended {
                        index: format!("table {name}"),
                        attempts: ATTEMPTS,
                    });
                }
                match Table::open_with(new, &name, old.backend()?) {
                    Ok(table) => table.drop_table(new)?,
                    // Dropped by an interrupted run (its marker finished
                    // by the open).
                    Err(ClientError::UnknownTable(_)) => {}
                    Err(e) => return Err(e),
                }
                note.copied.remove(&name);
                note.versions.remove(&name);
                write_note(&path, &note)?;
                continue;
            }
            note.removing.insert(name.clone());
            write_note(&path, &note)?;
        }
        let indexes = note.copied.get(&name).cloned().unwrap_or_default();
        remove_old(old, &name, &indexes)?;
        note.moved.insert(name.clone());
        write_note(&path, &note)?;
        if !indexes.is_empty() {
            moved.tables += 1;
        }
    }
    put_in_place(&new.table_dir(), &old.table_dir())?;
    Ok(moved)
}

fn legacy(name: &str) -> ClientError {
    ClientError::InvalidArgument(format!(
        "table {name:?} was made by an earlier build under names that are not keyed, which a \
         rotation of the master key does not move: export it (`sesame query {name} ... --format \
         csv`), drop it, run `sesame rekey --master`, then create and import it again; nothing \
         of the tables was changed"
    ))
}

/// Times a table changed by another device during the rotation is made
/// again before the rotation gives up (and is to be run again).
const ATTEMPTS: usize = 3;

/// The versions of the shared records beside a table's keyword index
/// `rows` (its table record, its keyword index's state); empty where the
/// backend keeps no records.
fn record_versions(backend: &mut dyn crate::backend::Backend, rows: &str) -> Result<Vec<u64>> {
    let names = [
        shared::TABLE_RECORD.to_owned(),
        crate::session::shared::STATE_RECORD.to_owned(),
    ];
    Ok(backend
        .read_records(rows, &names, &[])?
        .map(|records| records.iter().map(|r| r.version).collect())
        .unwrap_or_default())
}

/// What [`copy_table`] did.
struct Copy {
    /// The old table's index names, its keyword index first.
    indexes: Vec<String>,
    /// Its records.
    records: usize,
    /// [`record_versions`] of the old table before its records were read.
    versions: Vec<u64>,
}

/// Reads every record of the old table and inserts them into its new
/// table (made now, or made by an interrupted run), whose naming key is
/// made the old table's first (so that a file imported again names the
/// records its import named before); `None` when the old table is not
/// there (it is removed only after it was copied: a table the list names
/// that was dropped).
fn copy_table(
    old: &Profile,
    new: &Profile,
    name: &str,
    progress: &mut dyn FnMut(Progress),
) -> Result<Option<Copy>> {
    let (schema, records, indexes, versions, naming) = {
        let mut table = match Table::open(old, name) {
            Ok(table) => table,
            Err(ClientError::UnknownTable(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        if table.rows_name.starts_with("t-") {
            return Err(legacy(name));
        }
        let versions = record_versions(table.rows.backend.as_mut(), &table.rows_name)?;
        let records = table.records()?;
        let (rows, ranges, group) = table.index_names();
        let mut indexes = vec![rows];
        indexes.extend(ranges.into_iter().map(|(_, index)| index));
        indexes.extend(group);
        let naming = table.naming_key();
        (table.schema().clone(), records, indexes, versions, naming)
        // The old table (and its store) is closed here.
    };
    let count = records.len();
    // The server binding is still sealed under the old key: the new
    // table reaches the server through the old profile's backend.
    let mut table = match Table::open_with(new, name, old.backend()?) {
        Ok(table) => table,
        Err(ClientError::UnknownTable(_)) => Table::create_with(new, name, schema, old.backend()?)?,
        Err(e) => return Err(e),
    };
    table.set_naming_key(&naming)?;
    table.insert(records, progress)?;
    if table.len() != count {
        return Err(ClientError::InvalidArgument(format!(
            "table {name:?} holds {} records under the new master key where it held {count}: \
             the old table is kept; run `sesame rekey --master` again",
            table.len()
        )));
    }
    Ok(Some(Copy {
        indexes,
        records: count,
        versions,
    }))
}

/// Removes the old table's indexes where they run (and, where the
/// backend lists its indexes, any other under one of the table's old
/// names: remnants of an interrupted create) and this device's files of
/// it (its keyword index's state, its table files).
fn remove_old(old: &Profile, name: &str, indexes: &[String]) -> Result<()> {
    let mut backend = old.backend()?;
    for index in indexes {
        backend.remove_index(index)?;
    }
    if let Some(listed) = backend.index_names()? {
        for index in names::every(&old.table_names_key(), name) {
            if listed.contains(&index) {
                backend.remove_index(&index)?;
            }
        }
    }
    drop(backend);
    if let Some(rows) = indexes.first() {
        remove_local_rows(old, rows)?;
    }
    remove_file(&table_path(old, name))?;
    remove_file(&note_path(old, name))?;
    remove_file(&super::marker_path(old, name))
}

/// Moves every file of `from` into `to` (replacing), then removes `from`.
fn put_in_place(from: &Path, to: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(from) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(ClientError::io("read", from, &e)),
    };
    crate::fsutil::create_private_dir(to)?;
    for entry in entries {
        let entry = entry.map_err(|e| ClientError::io("read", from, &e))?;
        let target = to.join(entry.file_name());
        std::fs::rename(entry.path(), &target)
            .map_err(|e| ClientError::io("rename", &entry.path(), &e))?;
    }
    crate::fsutil::sync_dir(to)?;
    std::fs::remove_dir(from).map_err(|e| ClientError::io("remove", from, &e))
}

/// Whether `index` is left to the tables' part of a rotation: a name of
/// the form tables' indexes have (`tbl-` and 32 hex digits: a table's
/// index, the remnant of a create interrupted on another device, or
/// this device's copy of the keyword index of a table that another
/// device moved), taken for no document index's.
pub(crate) fn is_table_index(index: &str) -> bool {
    names::looks_opaque(index)
}

/// Removes the note of a rotation that completed.
pub(crate) fn forget(dir: &Path) -> Result<()> {
    remove_file(&dir.join(PROGRESS_FILE))
}
