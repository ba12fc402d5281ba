//! Opening a table and completing what an earlier process left
//! unfinished.

use super::*;

impl Table {
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
        backend.pack_documents(&rows_name);
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
            .transpose()?
            .map(|b| b.with_tags(state.format != TABLE_FORMAT));
        let pad = state
            .incarnation
            .map(|i| {
                KeywordPad::new(profile.doc_key(), profile.id(), i, state.null_keywords)
                    .map(Arc::new)
            })
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
            table.list_on_profile(name)?;
        } else if table.shared.is_some() {
            table.cache()?;
        }
        table.repaired = table.recover_as(true)?;
        Ok(table)
    }

    pub(super) fn prepare_rows(&mut self) {
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
    pub(super) fn recover(&mut self) -> Result<Vec<String>> {
        self.recover_as(false)
    }

    /// As [`Table::recover`]; for a `read`, pending keyword updates that
    /// cannot be sent (the server refuses writes or cannot be reached)
    /// are kept and the read answers from the records the server has
    /// ([`Table::pending_records`]), unless a side index must be rebuilt
    /// from the records: not without the pending ones.
    pub(super) fn recover_as(&mut self, read: bool) -> Result<Vec<String>> {
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
    pub(super) fn fetch_all(
        &mut self,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<(DocId, Record)>> {
        let docs: Vec<DocumentInfo> = self.rows.state.catalog.values().collect::<Result<_>>()?;
        let mut all: Vec<(DocId, Record)> = Vec::with_capacity(docs.len());
        self.rows
            .fetch_documents(&docs, Phase::Fetching, progress, &mut |doc, r| {
                let record = r.and_then(|r| {
                    write::decode_record(&doc.path, &r.content)
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
    pub(super) fn rebuild_group(&mut self) -> Result<()> {
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
}
