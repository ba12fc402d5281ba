//! Creating, listing and dropping tables: their names, their files, their
//! locks, and the markers that let the next table command finish or undo
//! an interrupted create or drop.

use super::*;

pub(super) fn check_table_name(name: &str) -> Result<()> {
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

pub(super) fn table_path(profile: &Profile, name: &str) -> PathBuf {
    profile.table_dir().join(format!("{name}.table"))
}

/// `tables/NAME.shared`: the shared record's version and incarnation
/// this device saw last.
pub(super) fn note_path(profile: &Profile, name: &str) -> PathBuf {
    profile.table_dir().join(format!("{name}.shared"))
}

/// `tables/NAME.unfinished`: a create or drop in progress.
pub(super) fn marker_path(profile: &Profile, name: &str) -> PathBuf {
    profile.table_dir().join(format!("{name}.unfinished"))
}

/// The lock of table `name`'s create, drop and their completion
/// (`tables/NAME.lock`): a second process is refused at once
/// ([`ClientError::ProfileBusy`]), so it never takes a create in progress
/// for one to undo.
pub(super) fn table_lock(profile: &Profile, name: &str) -> Result<crate::lock::ProfileLock> {
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

pub(super) fn remove_file(p: &std::path::Path) -> Result<()> {
    match std::fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ClientError::io("remove", p, &e)),
    }
}

/// Removes this device's files of keyword index `rows`: its state (its
/// log and its catalog's runs), its shared-state note and its intents.
pub(super) fn remove_local_rows(profile: &Profile, rows: &str) -> Result<()> {
    remove_file(&profile.state_path(rows))?;
    crate::state::remove_logs(&profile.state_path(rows), None);
    crate::state::remove_runs(&profile.state_path(rows), &[]);
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
pub(super) fn finish_unfinished(
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
        let keyword_params = space::keyword_params(&schema.equality)?;
        crate::profile::check_scheme(&schema.equality.scheme, &keyword_params)?;
        let mut ranges = Vec::new();
        let mut states = Vec::new();
        for (position, field) in schema.fields.iter().enumerate() {
            if field.range.is_some() {
                // A new table's payloads are the identifier alone.
                let index = RangeIndex::fresh(
                    position,
                    field,
                    crate::table::ranges::UNTAGGED_PAYLOAD,
                    0,
                    &mut rng,
                )?;
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
        backend.pack_documents(&rows);
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
                null_keywords: true,
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
                true,
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
            table.list_on_profile(name)?;
        }
        remove_file(&marker_path(profile, name))?;
        Ok(table)
    }

    /// Adds the table, as `name`, to the profile's list of tables where
    /// the backend keeps records (see [`shared::change_catalog`]).
    pub(super) fn list_on_profile(&mut self, name: &str) -> Result<()> {
        shared::change_catalog(
            self.rows.backend.as_mut(),
            &self.cipher,
            &mut self.rng,
            crate::DEFAULT_INDEX,
            name,
            true,
        )
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
}
