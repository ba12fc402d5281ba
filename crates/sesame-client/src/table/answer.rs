//! Planning, explaining and answering queries, and fetching records.

use super::*;
use crate::state::digest_matches;

impl Table {
    /// Parses and plans a query without running it.
    pub fn plan(&self, text: &str) -> Result<Plan> {
        let expr =
            query::parse(text).map_err(|e| ClientError::InvalidQuery(format!("query: {e}")))?;
        plan::plan(&self.state.schema, &expr, self.state.null_keywords)
    }

    /// Whether the records carry null keywords, so that `field is null`
    /// is answered by the keyword index (a table created by an earlier
    /// build has none: it is made again to get them).
    pub fn has_null_keywords(&self) -> bool {
        self.state.null_keywords
    }

    /// Describes how a query would be answered: for each predicate, the
    /// index and scheme that answer it and what the scheme lets the
    /// server learn. Nothing is sent.
    pub fn explain(&self, text: &str) -> Result<Vec<Step>> {
        let plan = self.plan(text)?;
        let keyword = self.rows.scheme();
        let mut out = Vec::new();
        for (predicate, position, access) in plan.leaves() {
            let step = match access {
                Access::Complement(inner) => {
                    let mut step = self.step(keyword, predicate, position, inner)?;
                    step.request = format!(
                        "{}; the answer is every record of the table's catalog (the client's \
                         own list) but those",
                        step.request
                    );
                    step
                }
                _ => self.step(keyword, predicate, position, access)?,
            };
            out.push(step);
        }
        Ok(out)
    }

    /// How one predicate's access is answered, for [`Table::explain`].
    fn step(
        &self,
        keyword: &sesame_core::SchemeDescriptor,
        predicate: &str,
        position: usize,
        access: &Access,
    ) -> Result<Step> {
        let field = self
            .state
            .schema
            .fields
            .get(position)
            .ok_or_else(|| ClientError::InvalidArgument("a field vanished".into()))?;
        {
            let step = match access {
                Access::Keyword(k) => Step {
                    predicate: predicate.to_owned(),
                    field: field.name.clone(),
                    index: format!("keyword index {}", self.rows_name),
                    scheme: keyword.name.to_owned(),
                    request: if k.contains('^') {
                        "a search token for the prefix keyword".into()
                    } else if k.ends_with("!null") {
                        "a search token for the field's null keyword (no value)".into()
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
                Access::Every | Access::Complement(_) => Step {
                    predicate: predicate.to_owned(),
                    field: field.name.clone(),
                    index: "the table's catalog (kept by the client)".into(),
                    scheme: "-".into(),
                    request: "nothing".into(),
                    leakage: "nothing".into(),
                },
            };
            Ok(step)
        }
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
        let matching = self.matching_docs(&plan)?;
        let total = matching.len();
        let docs: Vec<DocumentInfo> = matching
            .into_iter()
            .take(limit.unwrap_or(usize::MAX))
            .collect();
        let records = self.fetch_records(&docs);
        self.covered.clear();
        let records = records?;
        Ok(Answer {
            total,
            records,
            plan,
        })
    }

    /// The catalog's entries of the records that match `plan`, in
    /// insertion order, after recovering what an interrupted write left
    /// (for [`Table::query`] and [`Table::query_batches`]). A range index
    /// whose query writes is marked dirty while it runs.
    pub(super) fn matching_docs(&mut self, plan: &Plan) -> Result<Vec<DocumentInfo>> {
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
        let mut known = HashMap::new();
        let ids = self.matching_ids_known(plan, &mut known);
        // Saved whatever happened: a failed query leaves the mark, and
        // the next open rebuilds.
        if writes && ids.is_ok() {
            self.save_ranges(false)?;
        }
        // An identifier the catalog lacks belongs to a record deleted or
        // replaced (an index without deletion still holds it). The
        // keyword index's hits came with their catalog entries, read from
        // this same catalog during this call (nothing writes it between):
        // they are taken as they are rather than looked up a second time
        // (the lookups' scattered loads were a tenth of a point query's
        // time in `sesame sql`).
        let mut docs = Vec::new();
        for id in ids?.iter() {
            match known.remove(id) {
                Some(d) => docs.push(d),
                None => docs.extend(self.rows.state.catalog.get(id)?),
            }
        }
        Ok(docs)
    }

    pub(super) fn matching_ids(&mut self, plan: &Plan) -> Result<BTreeSet<DocId>> {
        self.matching_ids_known(plan, &mut HashMap::new())
    }

    /// As `matching_ids`, keeping in `known` the catalog entries the
    /// keyword index's answers came with.
    fn matching_ids_known(
        &mut self,
        plan: &Plan,
        known: &mut HashMap<DocId, DocumentInfo>,
    ) -> Result<BTreeSet<DocId>> {
        let mut covered = HashMap::new();
        let ids = self.matching_ids_into(plan, &mut covered, known)?;
        self.covered = covered;
        Ok(ids)
    }

    /// As `matching_ids`, keeping the records that range indexes returned
    /// with their identifiers in `covered`.
    fn matching_ids_into(
        &mut self,
        plan: &Plan,
        covered: &mut HashMap<DocId, (Record, [u8; 32])>,
        known: &mut HashMap<DocId, DocumentInfo>,
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
                let ids = hits.documents.iter().map(|d| d.id).collect();
                // A search that completed an interrupted write first may
                // have changed entries handed by an earlier access.
                if hits.resumed > 0 {
                    known.clear();
                }
                for d in hits.documents {
                    known.insert(d.id, d);
                }
                Ok(ids)
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
                    // and bound to its field, identifier and value in this
                    // table's incarnation (by the protocol's seal under
                    // this index's own key, or by its tag).
                    let (id, content) = index.open_payload(binder, state, *v, (*lo, *hi), p)?;
                    if let Some(c) = content {
                        if let Ok(record) = wire::decode::<Record>(c) {
                            covered.insert(id, (record, sesame_crypto::hash::sha256(c)));
                        }
                    }
                    ids.insert(id);
                }
                Ok(ids)
            }
            Access::Every => rows.state.catalog.keys().collect(),
            // Split by `Plan::evaluate` into its inner access and `Every`.
            Access::Nothing | Access::Complement(_) => Ok(BTreeSet::new()),
        })
    }

    /// Fetches and decrypts records. A record that the last query's
    /// range index returned with its identifier (`covered`) is taken from
    /// there (and removed from it) instead of fetched a second time, so
    /// that the batches of [`Table::query_batches`] all use them; the
    /// caller clears what is left when its answer is done.
    pub(super) fn fetch_records(&mut self, docs: &[DocumentInfo]) -> Result<Vec<Record>> {
        if self.covered.is_empty() {
            return self.fetch_stored(docs);
        }
        let mut taken: HashMap<DocId, (Record, [u8; 32])> = HashMap::new();
        let mut missing: Vec<DocumentInfo> = Vec::new();
        for d in docs {
            match self.covered.remove(&d.id) {
                Some(c) => {
                    taken.insert(d.id, c);
                }
                None => missing.push(d.clone()),
            }
        }
        let mut fetched: HashMap<DocId, Record> = HashMap::new();
        if !missing.is_empty() {
            for (d, r) in missing.iter().zip(self.fetch_stored(&missing)?) {
                fetched.insert(d.id, r);
            }
        }
        docs.iter()
            .map(|d| match taken.remove(&d.id) {
                // A record carried by a range payload is the one the
                // catalog recorded, or nothing of it is used.
                Some((_, digest))
                    if d.digest.is_some_and(|want| !digest_matches(&want, &digest)) =>
                {
                    Err(ClientError::DocumentNotAsAdded(d.id))
                }
                Some((mut record, _)) => {
                    // Carried without its key: the catalog's path.
                    if record.key.is_empty() {
                        record.key.clone_from(&d.path);
                    }
                    Ok(record)
                }
                None => fetched
                    .remove(&d.id)
                    .ok_or(ClientError::DocumentMissing(d.id)),
            })
            .collect()
    }

    /// Fetches and decrypts records from the records store.
    fn fetch_stored(&mut self, docs: &[DocumentInfo]) -> Result<Vec<Record>> {
        let mut out = Vec::with_capacity(docs.len());
        self.rows
            .fetch_documents(docs, Phase::Fetching, &mut |_| {}, &mut |doc, r| {
                let record = r.and_then(|r| {
                    write::decode_record(&doc.path, &r.content)
                        .map_err(|_| ClientError::DocumentCorrupt(doc.id))
                })?;
                out.push(record);
                Ok(())
            })?;
        Ok(out)
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
