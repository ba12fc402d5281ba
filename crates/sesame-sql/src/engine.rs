//! The one owner of the open profile and its tables. Every connection's
//! statements run here, one at a time, on the thread that opened the
//! profile (an actor: connections send it jobs and await the answer), so
//! the tables' locks, sessions and states are never shared between
//! threads.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc;

use sesame_client::table::{self, Record, Schema, Table};
use sesame_client::{ClientError, Profile};
use sqlparser::ast::{self, Statement};
use tokio::sync::oneshot;

use crate::error::{SqlError, INTERNAL, NO_TABLE};
use crate::exec::{self, Rows};
use crate::plan::{self, coerce, object_name, Cond};
use crate::route::{self, Route};
use crate::types::{ColType, Datum};

/// A job for the engine.
pub(crate) type Job = Box<dyn FnOnce(&mut Db) + Send>;

/// Rows sent a batch at a time while the engine fetches the next, and
/// whether the engine handed over the whole answer (else the stream ends
/// with an error, never with a silently shorter answer).
pub(crate) type Batches = (
    tokio::sync::mpsc::Receiver<Result<Vec<Vec<Datum>>, SqlError>>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
);

/// Records fetched and decrypted in the first batch of a streamed
/// answer: the connection encodes and sends those rows while the engine
/// fetches the next batch (twice as many, up to [`STREAM_BATCH`]), so a
/// point query's rows are not all encoded after its last fetch.
pub(crate) const FIRST_BATCH: usize = 16;
/// Records fetched and decrypted per batch of a streamed answer, at most.
pub(crate) const STREAM_BATCH: usize = 1024;
/// Batches a streamed answer holds ready for its connection.
const STREAM_AHEAD: usize = 4;
/// How long the engine waits for a client to take the next batch before
/// it gives up on that answer (the other connections wait meanwhile).
const STREAM_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// What a statement did.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Rows to send.
    Rows(Rows),
    /// Rows that follow a batch at a time.
    Stream(Vec<(String, ColType)>, Batches),
    /// A command tag and its row count.
    Command(&'static str, Option<usize>),
}

/// A connection's settings that change how statements run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Settings {
    /// `SET sesame.allow_scan = on`: predicates no index answers are
    /// evaluated on decrypted rows.
    pub(crate) allow_scan: bool,
}

/// The open profile and the table last used (kept open: it holds its
/// lock).
pub(crate) struct Db {
    profile: Profile,
    tables: HashMap<String, Table>,
}

/// A handle the connections use to reach the engine.
#[derive(Clone)]
pub(crate) struct Engine {
    tx: mpsc::Sender<Job>,
}

impl Engine {
    /// Runs `f` on the engine and returns its answer.
    pub(crate) async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Db) -> T + Send + 'static,
    ) -> Result<T, SqlError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Box::new(move |db| {
                let _ = tx.send(f(db));
            }))
            .map_err(|_| SqlError::new(INTERNAL, "the server is shutting down"))?;
        rx.await
            .map_err(|_| SqlError::new(INTERNAL, "the statement was abandoned"))
    }
}

impl Engine {
    /// Runs `f` on the engine; `f` answers through its second argument
    /// (once), and may go on working after it has (a streamed answer).
    pub(crate) async fn call_early<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Db, &mut dyn FnMut(T)) + Send + 'static,
    ) -> Result<T, SqlError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Box::new(move |db| {
                let mut tx = Some(tx);
                f(db, &mut |v| {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(v);
                    }
                });
            }))
            .map_err(|_| SqlError::new(INTERNAL, "the server is shutting down"))?;
        rx.await
            .map_err(|_| SqlError::new(INTERNAL, "the statement was abandoned"))
    }
}

/// Hands a batch to the connection, waiting while its channel is full;
/// `false` when the client has gone or did not take it in time.
fn hand_over(
    tx: &tokio::sync::mpsc::Sender<Result<Vec<Vec<Datum>>, SqlError>>,
    mut item: Result<Vec<Vec<Datum>>, SqlError>,
) -> bool {
    let start = std::time::Instant::now();
    // A connection takes a batch within microseconds unless its client
    // is slow: the wait starts short (a millisecond's sleep was longer
    // than a point query's whole answer) and grows to a millisecond.
    let mut pause = std::time::Duration::from_micros(20);
    loop {
        match tx.try_send(item) {
            Ok(()) => return true,
            Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => return false,
            Err(tokio::sync::mpsc::error::TrySendError::Full(back)) => {
                if start.elapsed() > STREAM_WAIT {
                    return false;
                }
                item = back;
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(1));
            }
        }
    }
}

/// Makes the engine's channel: the handle for connections, and the
/// receiver [`serve_jobs`] drains.
pub(crate) fn channel() -> (Engine, mpsc::Receiver<Job>) {
    let (tx, rx) = mpsc::channel();
    (Engine { tx }, rx)
}

/// Runs jobs until every handle is dropped.
pub(crate) fn serve_jobs(profile: Profile, rx: mpsc::Receiver<Job>) {
    let mut db = Db {
        profile,
        tables: HashMap::new(),
    };
    while let Ok(job) = rx.recv() {
        // A defect that panics answers that statement's client with an
        // error (its reply is dropped) instead of ending every
        // connection's engine; the open table is closed, so the next
        // statement opens it again and completes what it left.
        let run = std::panic::AssertUnwindSafe(|| job(&mut db));
        if std::panic::catch_unwind(run).is_err() {
            db.tables.clear();
        }
    }
}

/// A table name as SQL writes it, without a `public.` schema.
pub(crate) fn table_name(name: &ast::ObjectName) -> String {
    let full = object_name(name);
    full.strip_prefix("public.").unwrap_or(&full).to_owned()
}

impl Db {
    /// The profile's tables.
    pub(crate) fn table_names(&self) -> Result<Vec<String>, SqlError> {
        Ok(table::tables(&self.profile)?)
    }

    /// The schema of a table.
    pub(crate) fn schema(&mut self, name: &str) -> Result<Schema, SqlError> {
        Ok(self.table(name)?.schema().clone())
    }

    /// An open table (opened on first use and kept: it holds its lock).
    pub(crate) fn table(&mut self, name: &str) -> Result<&mut Table, SqlError> {
        if !self.tables.contains_key(name) {
            if !table::tables(&self.profile)?.iter().any(|t| t == name) {
                return Err(SqlError::new(
                    NO_TABLE,
                    format!(
                        "relation {name:?} does not exist (sesame table list shows the tables)"
                    ),
                ));
            }
            // One table open at a time: the embedded store admits one
            // open handle per process (the next table's open waits for
            // the last one's handle to close).
            self.tables.clear();
            let t = Table::open(&self.profile, name).map_err(|e| match e {
                ClientError::UnknownTable(_) | ClientError::InvalidArgument(_) => {
                    SqlError::new(NO_TABLE, format!("relation {name:?} does not exist"))
                }
                other => other.into(),
            })?;
            self.tables.insert(name.to_owned(), t);
        }
        self.tables
            .get_mut(name)
            .ok_or_else(|| SqlError::new(NO_TABLE, format!("relation {name:?} does not exist")))
    }

    /// Runs a statement, answering through `reply`: a plain `SELECT` of a
    /// table (no aggregate, `ORDER BY` or `DISTINCT`) answers its columns
    /// at once and then its rows a batch at a time, fetched and decrypted
    /// as the client takes them; it stops when the client goes away or
    /// the `LIMIT` is reached. Other statements answer when done.
    pub(crate) fn execute_streaming(
        &mut self,
        sql: &str,
        stmt: &Statement,
        settings: &Settings,
        reply: &mut dyn FnMut(Result<Outcome, SqlError>),
    ) {
        match self.streamable(sql, stmt, settings) {
            Ok(Some((name, schema, plan, route))) => {
                let (tx, rx) = tokio::sync::mpsc::channel(STREAM_AHEAD);
                let complete = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                let columns = plan
                    .outputs
                    .iter()
                    .take(plan.visible)
                    .map(|o| (o.name.clone(), o.ty))
                    .collect();
                reply(Ok(Outcome::Stream(columns, (rx, complete.clone()))));
                let mut handed = true;
                let mut skip = plan.offset;
                let mut left = plan.limit.unwrap_or(usize::MAX);
                let mut each_plan = plan.clone();
                each_plan.limit = None;
                each_plan.offset = 0;
                let result = match self.table(&name) {
                    Ok(t) => {
                        let text = route
                            .as_ref()
                            .and_then(|r| r.index.as_ref())
                            .map(|e| e.to_string());
                        t.query_batches(
                            text.as_deref(),
                            FIRST_BATCH,
                            STREAM_BATCH,
                            &mut |records| {
                                if left == 0 {
                                    return false;
                                }
                                let rows = to_rows(&schema, records, plan.filter.as_ref());
                                let mut out = exec::run(&each_plan, rows).rows;
                                let dropped = skip.min(out.len());
                                out.drain(..dropped);
                                skip -= dropped;
                                out.truncate(left);
                                left -= out.len();
                                handed = out.is_empty() || hand_over(&tx, Ok(out));
                                handed
                            },
                        )
                        .map(drop)
                        .map_err(SqlError::from)
                    }
                    Err(e) => Err(e),
                };
                match result {
                    Err(e) => {
                        hand_over(&tx, Err(e));
                    }
                    Ok(()) if handed => complete.store(true, std::sync::atomic::Ordering::SeqCst),
                    Ok(()) => {}
                }
            }
            Ok(None) => reply(self.execute(sql, stmt, settings)),
            Err(e) => reply(Err(e)),
        }
    }

    /// The table, schema, plan and route of a `SELECT` that can be
    /// streamed.
    #[allow(clippy::type_complexity)]
    fn streamable(
        &mut self,
        sql: &str,
        stmt: &Statement,
        settings: &Settings,
    ) -> Result<Option<(String, Schema, plan::SelectPlan, Option<Route>)>, SqlError> {
        let Statement::Query(q) = stmt else {
            return Ok(None);
        };
        let ast::SetExpr::Select(select) = q.body.as_ref() else {
            return Ok(None);
        };
        let Ok(Some(name)) = plan::relation_name(select) else {
            return Ok(None);
        };
        if name.contains('.') && !name.starts_with("public.") || name.starts_with("pg_") {
            return Ok(None);
        }
        let name = name.strip_prefix("public.").unwrap_or(&name).to_owned();
        let (schema, columns) = self.columns(&name)?;
        let plan = plan::plan_select(sql, q, &columns, Some(name.clone()))?;
        if plan.aggregates() || plan.distinct || !plan.order.is_empty() {
            return Ok(None);
        }
        let route = self.route_of(&name, &schema, plan.filter.as_ref(), settings)?;
        Ok(Some((name, schema, plan, route)))
    }

    /// Runs a statement that reads or writes a table.
    pub(crate) fn execute(
        &mut self,
        sql: &str,
        stmt: &Statement,
        settings: &Settings,
    ) -> Result<Outcome, SqlError> {
        match stmt {
            Statement::Query(q) => self.select(sql, q, settings).map(Outcome::Rows),
            Statement::Explain { statement, .. } => {
                self.explain(sql, statement, settings).map(Outcome::Rows)
            }
            Statement::Insert(ins) => self.insert(sql, ins),
            Statement::Delete(del) => self.delete(sql, del, settings),
            Statement::Update(up) => self.update(sql, up, settings),
            Statement::CreateTable(ct) => {
                let (name, schema) = crate::ddl::schema_of(ct)?;
                if ct.if_not_exists && self.table_names()?.contains(&name) {
                    return Ok(Outcome::Command("CREATE TABLE", None));
                }
                // The open table (if any) is closed first: one at a time.
                self.tables.clear();
                let t = Table::create(&self.profile, &name, schema)?;
                self.tables.insert(name, t);
                Ok(Outcome::Command("CREATE TABLE", None))
            }
            Statement::Drop {
                object_type: ast::ObjectType::Table,
                if_exists,
                names,
                ..
            } => {
                for n in names {
                    self.drop_table(&table_name(n), *if_exists)?;
                }
                Ok(Outcome::Command("DROP TABLE", None))
            }
            _ => Err(SqlError::unsupported(format!(
                "{}: statement not supported (supported: SELECT, INSERT, UPDATE, DELETE, \
                 COPY FROM STDIN, CREATE TABLE, DROP TABLE, EXPLAIN, SET, SHOW)",
                first_words(sql)
            ))),
        }
    }

    /// The columns a statement (its parameters bound to `NULL`) answers,
    /// without fetching a record.
    pub(crate) fn describe(
        &mut self,
        sql: &str,
        stmt: &Statement,
        settings: &Settings,
    ) -> Result<Vec<(String, ColType)>, SqlError> {
        let Statement::Query(q) = stmt else {
            return Ok(Vec::new());
        };
        let ast::SetExpr::Select(select) = q.body.as_ref() else {
            return Err(SqlError::unsupported("only a plain SELECT is supported"));
        };
        if let Some(rows) = crate::catalog::psql_list_tables(self, sql)? {
            return Ok(rows.columns);
        }
        match plan::relation_name(select) {
            Ok(Some(name)) if crate::catalog::relation(self, sql, &name)?.is_none() => {
                let name = name.strip_prefix("public.").unwrap_or(&name).to_owned();
                let (_, columns) = self.columns(&name)?;
                let plan = plan::plan_select(sql, q, &columns, Some(name))?;
                Ok(plan
                    .outputs
                    .iter()
                    .take(plan.visible)
                    .map(|o| (o.name.clone(), o.ty))
                    .collect())
            }
            _ => Ok(self.select(sql, q, settings)?.columns),
        }
    }

    /// Whether the table's records carry null keywords.
    fn nulls(&mut self, name: &str) -> Result<bool, SqlError> {
        Ok(self.table(name)?.has_null_keywords())
    }

    /// The route of an optional condition on a table (none without a
    /// condition: every record).
    fn route_of(
        &mut self,
        name: &str,
        schema: &Schema,
        cond: Option<&Cond>,
        settings: &Settings,
    ) -> Result<Option<Route>, SqlError> {
        match cond {
            Some(c) => Ok(Some(route::route(
                schema,
                self.nulls(name)?,
                c,
                settings.allow_scan,
            )?)),
            None => Ok(None),
        }
    }

    fn columns(&mut self, name: &str) -> Result<(Schema, plan::Columns), SqlError> {
        let schema = self.schema(name)?;
        let columns = schema
            .fields
            .iter()
            .map(|f| (f.name.clone(), ColType::of(f)))
            .collect();
        Ok((schema, columns))
    }

    fn select(&mut self, sql: &str, q: &ast::Query, settings: &Settings) -> Result<Rows, SqlError> {
        let ast::SetExpr::Select(select) = q.body.as_ref() else {
            return Err(SqlError::unsupported("only a plain SELECT is supported"));
        };
        let name = match plan::relation_name(select) {
            Ok(Some(name)) => name,
            Ok(None) => return crate::catalog::constant_select(sql, q),
            // A join of catalog relations (drivers' introspection): empty.
            Err(_) if sql.contains("pg_catalog.") || sql.contains("information_schema.") => {
                return Ok(empty_projection(select))
            }
            Err(e) => return Err(e),
        };
        if let Some(rows) = crate::catalog::relation(self, sql, &name)? {
            if rows.columns.is_empty() {
                return Ok(empty_projection(select));
            }
            // A column this subset of the catalog lacks: no rows.
            let Ok(plan) = plan::plan_select(sql, q, &rows.columns, Some(name)) else {
                return Ok(empty_projection(select));
            };
            let kept = rows
                .rows
                .into_iter()
                .filter(|r| plan.filter.as_ref().is_none_or(|c| exec::matches(c, r)))
                .collect();
            return Ok(exec::run(&plan, kept));
        }
        let name = name.strip_prefix("public.").unwrap_or(&name).to_owned();
        let (schema, columns) = self.columns(&name)?;
        let plan = plan::plan_select(sql, q, &columns, Some(name.clone()))?;
        let route = self.route_of(&name, &schema, plan.filter.as_ref(), settings)?;
        // count(*) alone: the index's count, no record fetched.
        let count_only = plan.group_by.is_empty()
            && plan.outputs.iter().all(|o| {
                matches!(
                    o.expr,
                    plan::Scalar::Agg {
                        kind: plan::AggKind::Count,
                        arg: None
                    }
                )
            });
        let t = self.table(&name)?;
        if count_only {
            let n = match &route {
                None => Some(t.len()),
                Some(r) if r.exact => match &r.index {
                    Some(e) => Some(t.query(&e.to_string(), Some(0))?.total),
                    None => None,
                },
                Some(_) => None,
            };
            if let Some(n) = n {
                return Ok(exec::run(&plan, vec![Vec::new(); n]));
            }
        }
        let records = fetch(t, route.as_ref())?;
        let rows = to_rows(&schema, records, plan.filter.as_ref());
        Ok(exec::run(&plan, rows))
    }

    fn explain(
        &mut self,
        sql: &str,
        stmt: &Statement,
        settings: &Settings,
    ) -> Result<Rows, SqlError> {
        let (name, filter) = match stmt {
            Statement::Query(q) => {
                let ast::SetExpr::Select(select) = q.body.as_ref() else {
                    return Err(SqlError::unsupported("EXPLAIN of a plain SELECT only"));
                };
                let Some(name) = plan::relation_name(select)? else {
                    return Ok(plan_rows(vec!["a constant: nothing is sent".into()]));
                };
                (name, select.selection.clone())
            }
            Statement::Delete(d) => (delete_table(d)?, d.selection.clone()),
            Statement::Update(u) => (update_table(u)?, u.selection.clone()),
            _ => {
                return Err(SqlError::unsupported(
                    "EXPLAIN of SELECT, DELETE or UPDATE only",
                ))
            }
        };
        let name = name.strip_prefix("public.").unwrap_or(&name).to_owned();
        let (schema, columns) = self.columns(&name)?;
        let cond = match &filter {
            Some(e) => Some(plan::cond(sql, e, &columns)?),
            None => None,
        };
        let route = self.route_of(&name, &schema, cond.as_ref(), settings)?;
        let t = self.table(&name)?;
        let mut lines = Vec::new();
        if let Some(w) = t.insecure_warning() {
            lines.push(w);
        }
        let mut n = 0;
        if let Some(Route {
            index: Some(e),
            exact,
            ..
        }) = &route
        {
            for s in t.explain(&e.to_string())? {
                n += 1;
                lines.push(format!("{n}. {}", s.predicate));
                lines.push(format!("   answered by: {} ({})", s.index, s.scheme));
                lines.push(format!("   sends: {}", s.request));
                lines.push(format!("   the server learns: {}", s.leakage));
            }
            if !exact {
                lines.push(
                    "the client keeps the rows of these answers that match the whole WHERE".into(),
                );
            }
        }
        let scanned = route
            .as_ref()
            .map(|r| r.scanned.clone())
            .unwrap_or_default();
        for s in &scanned {
            n += 1;
            lines.push(format!("{n}. {s}"));
            lines.push(
                "   answered by: a scan of decrypted records on the client (sesame.allow_scan = \
                 on): no index answers it"
                    .into(),
            );
        }
        match &route {
            None => lines.push(
                "no WHERE: every record is fetched by identifier (the server sees how many)".into(),
            ),
            Some(Route { index: None, .. }) => lines.push(
                "SCAN: every record is fetched and decrypted, and the WHERE evaluated on the \
                 client (the server sees that all records are read)"
                    .into(),
            ),
            Some(_) => lines.push(
                "and/or are combined on the client; the matching records are then fetched by \
                 identifier (the server sees which and how many)"
                    .into(),
            ),
        }
        Ok(plan_rows(lines))
    }

    fn insert(&mut self, sql: &str, ins: &ast::Insert) -> Result<Outcome, SqlError> {
        let ast::TableObject::TableName(tn) = &ins.table else {
            return Err(SqlError::unsupported("INSERT INTO a table name"));
        };
        let name = table_name(tn);
        let (schema, columns) = self.columns(&name)?;
        let targets: Vec<usize> = if ins.columns.is_empty() {
            (0..columns.len()).collect()
        } else {
            ins.columns
                .iter()
                .map(|c| {
                    let e = ast::Expr::Identifier(ast::Ident::new(object_name(c)));
                    plan::column_of(sql, &e, &columns)
                })
                .collect::<Result<_, _>>()?
        };
        let Some(source) = &ins.source else {
            return Err(SqlError::unsupported("INSERT ... VALUES (...)"));
        };
        let ast::SetExpr::Values(values) = source.body.as_ref() else {
            return Err(SqlError::unsupported(
                "INSERT ... VALUES (...) only (no INSERT ... SELECT)",
            ));
        };
        let t = self.table(&name)?;
        let mut records = Vec::with_capacity(values.rows.len());
        for row in &values.rows {
            if row.content.len() != targets.len() {
                return Err(SqlError::new(
                    "42601",
                    format!(
                        "INSERT has {} values for {} columns",
                        row.content.len(),
                        targets.len()
                    ),
                )
                .at(row.content.first().and_then(|e| plan::pos_of(sql, e))));
            }
            let mut datums = vec![Datum::Null; columns.len()];
            for (c, e) in targets.iter().zip(&row.content) {
                let ty = columns.get(*c).map_or(ColType::Text, |(_, t)| *t);
                if let Some(slot) = datums.get_mut(*c) {
                    *slot = coerce(sql, e, ty)?;
                }
            }
            records.push(record(t, &schema, &datums)?);
        }
        let n = records.len();
        t.insert(records, &mut |_| {})?;
        Ok(Outcome::Command("INSERT 0", Some(n)))
    }

    fn delete(
        &mut self,
        sql: &str,
        del: &ast::Delete,
        settings: &Settings,
    ) -> Result<Outcome, SqlError> {
        let name = delete_table(del)?;
        let (schema, columns) = self.columns(&name)?;
        let Some(selection) = &del.selection else {
            return Err(SqlError::unsupported(
                "DELETE without WHERE: DROP TABLE removes the table, or give a WHERE",
            ));
        };
        let cond = plan::cond(sql, selection, &columns)?;
        let route = route::route(&schema, self.nulls(&name)?, &cond, settings.allow_scan)?;
        let (Some(index), true) = (&route.index, route.exact) else {
            return Err(SqlError::unsupported(
                "DELETE needs a WHERE that the indexes answer exactly (no scan, no <>, no NOT, \
                 no IS NULL but on an equality or prefix field)",
            ));
        };
        let n = self.table(&name)?.delete(&index.to_string())?;
        Ok(Outcome::Command("DELETE", Some(n)))
    }

    fn update(
        &mut self,
        sql: &str,
        up: &ast::Update,
        settings: &Settings,
    ) -> Result<Outcome, SqlError> {
        let name = update_table(up)?;
        let (schema, columns) = self.columns(&name)?;
        let mut sets = Vec::new();
        for a in &up.assignments {
            let ast::AssignmentTarget::ColumnName(c) = &a.target else {
                return Err(SqlError::unsupported("UPDATE ... SET column = value"));
            };
            let e = ast::Expr::Identifier(ast::Ident::new(object_name(c)));
            let col = plan::column_of(sql, &e, &columns)?;
            if schema.key.as_deref() == columns.get(col).map(|(n, _)| n.as_str()) {
                return Err(SqlError::unsupported(format!(
                    "column {} is the table's key: UPDATE sets other columns (DELETE and INSERT \
                     to change a key)",
                    object_name(c)
                )));
            }
            let ty = columns.get(col).map_or(ColType::Text, |(_, t)| *t);
            sets.push((col, coerce(sql, &a.value, ty)?));
        }
        let cond = match &up.selection {
            Some(e) => Some(plan::cond(sql, e, &columns)?),
            None => None,
        };
        let route = self.route_of(&name, &schema, cond.as_ref(), settings)?;
        let t = self.table(&name)?;
        let records = fetch(t, route.as_ref())?;
        let mut changed = Vec::new();
        for r in records {
            let row: Vec<Datum> = schema
                .fields
                .iter()
                .zip(&r.values)
                .map(|(f, v)| Datum::of(f, v.as_ref()))
                .collect();
            if cond.as_ref().is_some_and(|c| !exec::matches(c, &row)) {
                continue;
            }
            let mut row = row;
            for (c, v) in &sets {
                if let Some(slot) = row.get_mut(*c) {
                    *slot = v.clone();
                }
            }
            let mut new = record_values(&schema, &row)?;
            new.key = r.key.clone();
            changed.push(new);
        }
        let n = changed.len();
        // The same key with other values: the table replaces each record
        // (a deletion and an insertion through each index, exactly once).
        t.insert(changed, &mut |_| {})?;
        Ok(Outcome::Command("UPDATE", Some(n)))
    }

    fn drop_table(&mut self, name: &str, if_exists: bool) -> Result<(), SqlError> {
        let t = match self.tables.remove(name) {
            Some(t) => t,
            None => match self.table(name) {
                Ok(_) => self
                    .tables
                    .remove(name)
                    .ok_or_else(|| SqlError::new(NO_TABLE, "vanished"))?,
                Err(e) if e.code == NO_TABLE && if_exists => return Ok(()),
                Err(e) => return Err(e),
            },
        };
        t.drop_table(&self.profile)?;
        Ok(())
    }

    /// Imports a COPY's data, written to `path` as CSV with a header line,
    /// through the table's import (see [`crate::copy`]), then closes the
    /// table: the next statement opens it afresh. An import leaves the
    /// store's page cache full of the pages it wrote and glibc's heap
    /// scattered with what it freed; queries after it allocated into
    /// those holes and ran at twice the CPU time of a fresh process (the
    /// flights: a 0.5% range 12 to 17 against 7 ms a query,
    /// `docs/performance.md`, "A table closed after a COPY").
    ///
    /// The table is opened afresh for the import, with the settings
    /// `sesame import` uses ([`crate::copy::ImportSettings`]).
    pub(crate) fn import(&mut self, name: &str, path: &Path) -> Result<usize, SqlError> {
        self.tables.remove(name);
        let settings = crate::copy::ImportSettings::apply();
        let t = self.table(name)?;
        drop(settings);
        let report = t.import(path, table::import::Format::Csv, &mut |_| {});
        self.tables.remove(name);
        Ok(report?.read)
    }
}

/// No rows, with a text column named after each select item.
fn empty_projection(select: &ast::Select) -> Rows {
    Rows {
        columns: select
            .projection
            .iter()
            .map(|item| {
                let name = match item {
                    ast::SelectItem::ExprWithAlias { alias, .. } => plan::ident(alias),
                    ast::SelectItem::UnnamedExpr(ast::Expr::Identifier(i)) => plan::ident(i),
                    ast::SelectItem::UnnamedExpr(ast::Expr::CompoundIdentifier(p)) => {
                        p.last().map(plan::ident).unwrap_or_default()
                    }
                    other => other.to_string(),
                };
                (name, ColType::Text)
            })
            .collect(),
        rows: Vec::new(),
    }
}

fn first_words(sql: &str) -> String {
    sql.split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
        .to_uppercase()
}

fn plan_rows(lines: Vec<String>) -> Rows {
    Rows {
        columns: vec![("QUERY PLAN".into(), ColType::Text)],
        rows: lines.into_iter().map(|l| vec![Datum::Text(l)]).collect(),
    }
}

fn delete_table(d: &ast::Delete) -> Result<String, SqlError> {
    let (ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from)) = &d.from;
    match from.as_slice() {
        [one] if one.joins.is_empty() => match &one.relation {
            ast::TableFactor::Table { name, .. } => Ok(table_name(name)),
            _ => Err(SqlError::unsupported("DELETE FROM a table")),
        },
        _ => Err(SqlError::unsupported("DELETE FROM one table")),
    }
}

fn update_table(u: &ast::Update) -> Result<String, SqlError> {
    if !u.table.joins.is_empty() || u.from.is_some() {
        return Err(SqlError::unsupported("UPDATE of one table, without FROM"));
    }
    match &u.table.relation {
        ast::TableFactor::Table { name, .. } => Ok(table_name(name)),
        _ => Err(SqlError::unsupported("UPDATE a table")),
    }
}

/// The records a route selects (every record without one).
fn fetch(t: &mut Table, route: Option<&Route>) -> Result<Vec<Record>, SqlError> {
    Ok(match route.and_then(|r| r.index.as_ref()) {
        Some(e) => t.query(&e.to_string(), None)?.records,
        None => t.records()?,
    })
}

/// Records as rows, keeping those that satisfy `filter`.
fn to_rows(schema: &Schema, records: Vec<Record>, filter: Option<&Cond>) -> Vec<Vec<Datum>> {
    records
        .into_iter()
        .map(|r| {
            schema
                .fields
                .iter()
                .zip(r.values)
                .map(|(f, v)| Datum::of_owned(f, v))
                .collect::<Vec<_>>()
        })
        .filter(|row| filter.is_none_or(|c| exec::matches(c, row)))
        .collect()
}

/// A row's values as a record's (its key left empty).
fn record_values(schema: &Schema, row: &[Datum]) -> Result<Record, SqlError> {
    let mut values = Vec::with_capacity(schema.fields.len());
    for (f, d) in schema.fields.iter().zip(row) {
        values.push(match d {
            Datum::Null => None,
            Datum::Timestamp(t) => Some(table::Value::Int(*t)),
            Datum::Text(s) if ColType::of(f) == ColType::Text => {
                Some(table::Value::Text(s.clone()))
            }
            other => Some(
                f.parse_literal(&other.literal_text().unwrap_or_default())
                    .map_err(SqlError::from)?,
            ),
        });
    }
    Ok(Record {
        key: String::new(),
        values,
    })
}

/// A new record of `t` holding `row`: keyed by its key field, or by the
/// table's next position when it has none.
fn record(t: &mut Table, schema: &Schema, row: &[Datum]) -> Result<Record, SqlError> {
    let mut r = record_values(schema, row)?;
    r.key = match &schema.key {
        Some(k) => {
            let at = schema.fields.iter().position(|f| &f.name == k);
            match at.and_then(|i| Some((schema.fields.get(i)?, r.values.get(i)?.as_ref()?))) {
                Some((f, v)) => f.display(v),
                None => {
                    return Err(SqlError::new(
                        "23502",
                        format!("null value in column {k:?}: it is the table's key"),
                    ))
                }
            }
        }
        None => t.record_from_cells(std::iter::empty(), None)?.key,
    };
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &str = r#"
key = "id"
[fields.id]
type = "integer"
index = ["equality"]
[fields.qty]
type = "integer"
index = ["range"]
bits = 16
"#;

    /// A COPY's import leaves the heap and the page cache filled by its
    /// writes; the table is closed after it, so the next statement opens
    /// it afresh (`docs/performance.md`, "A table closed after a COPY"),
    /// and still answers every row.
    #[test]
    fn a_copy_closes_its_table_and_the_next_statement_reopens_it() {
        let _alone = crate::copy::SETTINGS_IN_TESTS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = tempfile::tempdir().expect("temp dir");
        let profile = Profile::create_with_kdf(
            dir.path().join("p"),
            "pass",
            "fast",
            &sesame_core::Params::new(),
            sesame_client::insecure::fast_kdf(),
        )
        .expect("profile");
        Table::create(&profile, "t", Schema::from_toml(SCHEMA).expect("schema")).expect("table");
        let mut db = Db {
            profile,
            tables: HashMap::new(),
        };
        let csv = dir.path().join("copy.csv");
        std::fs::write(&csv, "id,qty\n1,5\n2,7\n3,9\n").expect("write");
        assert_eq!(db.import("t", &csv).expect("import"), 3);
        assert!(
            db.tables.is_empty(),
            "the table stays open after a COPY: {:?}",
            db.tables.keys().collect::<Vec<_>>()
        );
        let t = db.table("t").expect("the table opens again");
        let mut keys: Vec<String> = t
            .query("qty >= 6", None)
            .expect("query")
            .records
            .into_iter()
            .map(|r| r.key)
            .collect();
        keys.sort();
        assert_eq!(keys, ["2", "3"]);
    }
}
