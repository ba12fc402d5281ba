//! One connection's handlers: the simple query protocol, the extended
//! protocol (Parse/Bind/Describe/Execute, with `$n` parameters bound into
//! the parsed statement, never pasted into text), and the statements a
//! connection answers itself (`SET`, `SHOW`, transaction statements).
//! Everything else runs on the engine.

use std::fmt::Debug;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::{stream, Sink, StreamExt};
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{
    DataRowEncoder, DescribePortalResponse, DescribeResponse, DescribeStatementResponse,
    FieldFormat, FieldInfo, QueryResponse, Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, Type};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use sqlparser::ast::{self, Statement};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::{Parser, ParserError};

use crate::engine::{Engine, Outcome, Settings};
use crate::error::{SqlError, SYNTAX};
use crate::exec::Rows;
use crate::types::{ColType, Datum};

/// The longest statement accepted, in bytes.
pub(crate) const MAX_STATEMENT: usize = 1 << 20;

/// A statement as parsed for the extended protocol.
#[derive(Clone, Debug)]
pub(crate) struct Parsed {
    pub(crate) sql: String,
    pub(crate) stmt: Option<Statement>,
    pub(crate) params: usize,
}

/// Parses `sql` into statements; a syntax error carries its position.
pub(crate) fn parse(sql: &str) -> Result<Vec<Statement>, SqlError> {
    if sql.len() > MAX_STATEMENT {
        return Err(SqlError::new(
            "54000",
            format!(
                "statement of {} bytes: the most is {MAX_STATEMENT}",
                sql.len()
            ),
        ));
    }
    Parser::parse_sql(&PostgreSqlDialect {}, sql).map_err(|e| {
        let message = match &e {
            ParserError::TokenizerError(m) | ParserError::ParserError(m) => m.clone(),
            ParserError::RecursionLimitExceeded => "statement nested too deeply".into(),
        };
        let position = locate(&message).and_then(|(l, c)| crate::error::position(sql, l, c));
        SqlError::new(SYNTAX, format!("syntax error: {message}")).at(position)
    })
}

/// The `Line: L, Column: C` sqlparser writes into its messages.
fn locate(message: &str) -> Option<(u64, u64)> {
    let after = |key: &str| -> Option<u64> {
        let at = message.rfind(key)? + key.len();
        let digits: String = message[at..]
            .chars()
            .skip_while(|c| c.is_whitespace())
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    Some((after("Line:")?, after("Column:")?))
}

/// The highest `$n` in a statement.
fn param_count(stmt: &Statement) -> usize {
    let mut max = 0;
    let mut stmt = stmt.clone();
    let _ = ast::visit_expressions_mut(&mut stmt, |e| {
        if let ast::Expr::Value(v) = e {
            if let ast::Value::Placeholder(p) = &v.value {
                if let Some(n) = p.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
                    max = max.max(n);
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    max
}

/// The `$n` of a placeholder expression.
fn placeholder(e: &ast::Expr) -> Option<usize> {
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Placeholder(p) => p.strip_prefix('$')?.parse().ok(),
            _ => None,
        },
        ast::Expr::Cast { expr, .. } | ast::Expr::Nested(expr) => placeholder(expr),
        _ => None,
    }
}

fn column_name(e: &ast::Expr) -> Option<String> {
    match e {
        ast::Expr::Identifier(i) => Some(crate::plan::ident(i)),
        ast::Expr::CompoundIdentifier(p) => p.last().map(crate::plan::ident),
        ast::Expr::Nested(inner) => column_name(inner),
        _ => None,
    }
}

/// The table a statement reads or writes, and the column each `$n` is
/// compared with or written to (for describing parameter types).
pub(crate) fn param_columns(stmt: &Statement) -> (Option<String>, Vec<(usize, String)>) {
    let mut out = Vec::new();
    let mut stmt = stmt.clone();
    let table = match &stmt {
        Statement::Query(q) => match q.body.as_ref() {
            ast::SetExpr::Select(s) => crate::plan::relation_name(s).ok().flatten(),
            _ => None,
        },
        Statement::Insert(ins) => match &ins.table {
            ast::TableObject::TableName(n) => {
                let cols: Vec<String> = ins.columns.iter().map(crate::plan::object_name).collect();
                if let Some(src) = &ins.source {
                    if let ast::SetExpr::Values(v) = src.body.as_ref() {
                        for row in &v.rows {
                            for (c, e) in cols.iter().zip(&row.content) {
                                if let Some(n) = placeholder(e) {
                                    out.push((n, c.clone()));
                                }
                            }
                        }
                    }
                }
                Some(crate::engine::table_name(n))
            }
            _ => None,
        },
        Statement::Update(u) => {
            for a in &u.assignments {
                if let (ast::AssignmentTarget::ColumnName(c), Some(n)) =
                    (&a.target, placeholder(&a.value))
                {
                    out.push((n, crate::plan::object_name(c)));
                }
            }
            match &u.table.relation {
                ast::TableFactor::Table { name, .. } => Some(crate::engine::table_name(name)),
                _ => None,
            }
        }
        Statement::Delete(d) => {
            let (ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f)) = &d.from;
            f.first().and_then(|t| match &t.relation {
                ast::TableFactor::Table { name, .. } => Some(crate::engine::table_name(name)),
                _ => None,
            })
        }
        _ => None,
    };
    let _ = ast::visit_expressions_mut(&mut stmt, |e| {
        match e {
            ast::Expr::BinaryOp { left, right, .. } => {
                if let (Some(c), Some(n)) = (column_name(left), placeholder(right)) {
                    out.push((n, c));
                } else if let (Some(n), Some(c)) = (placeholder(left), column_name(right)) {
                    out.push((n, c));
                }
            }
            ast::Expr::Between {
                expr, low, high, ..
            } => {
                if let Some(c) = column_name(expr) {
                    for x in [low, high] {
                        if let Some(n) = placeholder(x) {
                            out.push((n, c.clone()));
                        }
                    }
                }
            }
            ast::Expr::In {
                expr,
                target: ast::InTarget::List(list),
                ..
            } => {
                if let Some(c) = column_name(expr) {
                    for x in list.iter() {
                        if let Some(n) = placeholder(x) {
                            out.push((n, c.clone()));
                        }
                    }
                }
            }
            ast::Expr::Like { expr, pattern, .. } => {
                if let (Some(c), Some(n)) = (column_name(expr), placeholder(pattern)) {
                    out.push((n, c));
                }
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    (table, out)
}

/// `stmt` with each `$n` replaced by the n-th value.
pub(crate) fn bind(stmt: &Statement, values: &[Datum]) -> Statement {
    let mut stmt = stmt.clone();
    let _ = ast::visit_expressions_mut(&mut stmt, |e| {
        if let ast::Expr::Value(v) = e {
            if let ast::Value::Placeholder(p) = &v.value {
                if let Some(n) = p.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
                    let d = n
                        .checked_sub(1)
                        .and_then(|i| values.get(i))
                        .cloned()
                        .unwrap_or(Datum::Null);
                    v.value = match d {
                        Datum::Null => ast::Value::Null,
                        Datum::Bool(b) => ast::Value::Boolean(b),
                        Datum::Text(s) => ast::Value::SingleQuotedString(s),
                        Datum::Timestamp(t) => ast::Value::Number(t.to_string(), false),
                        other => {
                            ast::Value::Number(other.literal_text().unwrap_or_default(), false)
                        }
                    };
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    stmt
}

/// One connection's state and handlers.
pub(crate) struct Conn {
    pub(crate) engine: Engine,
    pub(crate) settings: Mutex<Settings>,
    pub(crate) parser: Arc<SqlParser>,
    pub(crate) copy: crate::copy::CopyIn,
}

impl Conn {
    pub(crate) fn new(engine: Engine, copy_dir: std::path::PathBuf) -> Self {
        Conn {
            engine,
            settings: Mutex::new(Settings::default()),
            parser: Arc::new(SqlParser),
            copy: crate::copy::CopyIn::new(copy_dir),
        }
    }

    fn settings(&self) -> Settings {
        self.settings.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Runs one statement.
    pub(crate) async fn run(
        &self,
        sql: &str,
        stmt: Statement,
        stream: bool,
    ) -> Result<Outcome, SqlError> {
        match &stmt {
            Statement::Set(set) => return self.set(&set.to_string()),
            Statement::ShowVariable { variable } => {
                let parts: Vec<String> = variable.iter().map(crate::plan::ident).collect();
                let allow = self.settings().allow_scan;
                // `SHOW sesame.allow_scan`, `SHOW TRANSACTION ISOLATION LEVEL`.
                let dotted = parts.join(".");
                let spaced = parts.join(" ");
                let (name, value) = match crate::catalog::setting(&dotted, allow) {
                    Some(v) => (dotted, Some(v)),
                    None => {
                        let v = crate::catalog::setting(&spaced, allow);
                        (spaced, v)
                    }
                };
                let value = value.ok_or_else(|| {
                    SqlError::new(
                        "42704",
                        format!("unrecognized configuration parameter {name:?}"),
                    )
                })?;
                return Ok(Outcome::Rows(Rows {
                    columns: vec![(name, ColType::Text)],
                    rows: vec![vec![Datum::Text(value)]],
                }));
            }
            Statement::StartTransaction { .. } => return Ok(Outcome::Command("BEGIN", None)),
            Statement::Commit { .. } => return Ok(Outcome::Command("COMMIT", None)),
            Statement::Rollback { .. } => return Ok(Outcome::Command("ROLLBACK", None)),
            Statement::Discard { .. } => return Ok(Outcome::Command("DISCARD ALL", None)),
            Statement::Deallocate { .. } => return Ok(Outcome::Command("DEALLOCATE", None)),
            Statement::Copy { .. } => {
                return Err(SqlError::new(
                    crate::error::PROTOCOL,
                    "COPY FROM STDIN runs through the simple query protocol",
                ))
            }
            _ => {}
        }
        let settings = self.settings();
        let sql = sql.to_owned();
        self.engine
            .call_early(
                move |db, reply| match crate::catalog::psql_list_tables(db, &sql) {
                    Ok(Some(rows)) => reply(Ok(Outcome::Rows(rows))),
                    Err(e) => reply(Err(e)),
                    Ok(None) if stream => db.execute_streaming(&sql, &stmt, &settings, reply),
                    Ok(None) => reply(db.execute(&sql, &stmt, &settings)),
                },
            )
            .await?
    }

    /// The columns a statement answers, without running it.
    async fn describe(&self, parsed: &Parsed) -> Result<Vec<(String, ColType)>, SqlError> {
        let Some(stmt) = &parsed.stmt else {
            return Ok(Vec::new());
        };
        match stmt {
            Statement::Query(_) | Statement::Explain { .. } | Statement::ShowVariable { .. } => {}
            _ => return Ok(Vec::new()),
        }
        if let Statement::ShowVariable { .. } | Statement::Explain { .. } = stmt {
            let name = match stmt {
                Statement::Explain { .. } => "QUERY PLAN".to_owned(),
                _ => stmt.to_string().trim_start_matches("SHOW ").to_lowercase(),
            };
            return Ok(vec![(name, ColType::Text)]);
        }
        let bound = bind(stmt, &vec![Datum::Null; parsed.params]);
        let sql = parsed.sql.clone();
        let settings = self.settings();
        self.engine
            .call(move |db| db.describe(&sql, &bound, &settings))
            .await?
    }

    /// The types of a statement's parameters: the type of the column
    /// each is compared with or written to, else text.
    async fn parameter_types(&self, parsed: &Parsed) -> Vec<Type> {
        let mut types = vec![Type::TEXT; parsed.params];
        let Some(stmt) = &parsed.stmt else {
            return types;
        };
        let (Some(table), uses) = param_columns(stmt) else {
            return types;
        };
        let Ok(Ok(schema)) = self.engine.call(move |db| db.schema(&table)).await else {
            return types;
        };
        for (n, column) in uses {
            if let (Some(slot), Some(f)) = (
                n.checked_sub(1).and_then(|i| types.get_mut(i)),
                schema.field(&column),
            ) {
                *slot = ColType::of(f).pg();
            }
        }
        types
    }

    fn set(&self, text: &str) -> Result<Outcome, SqlError> {
        let body = text.trim_start_matches("SET ").trim();
        let body = body
            .strip_prefix("SESSION ")
            .or_else(|| body.strip_prefix("LOCAL "))
            .unwrap_or(body);
        let (name, value) = body
            .split_once(" = ")
            .or_else(|| body.split_once(" TO "))
            .unwrap_or((body, ""));
        let name = name.trim().to_lowercase();
        let value = value.trim().trim_matches('\'').to_lowercase();
        if name == "sesame.allow_scan" {
            let on = match value.as_str() {
                "on" | "true" | "1" | "yes" => true,
                "off" | "false" | "0" | "no" | "default" => false,
                other => {
                    return Err(SqlError::new(
                        "22023",
                        format!("sesame.allow_scan is on or off, not {other:?}"),
                    ))
                }
            };
            if let Ok(mut s) = self.settings.lock() {
                s.allow_scan = on;
            }
        }
        // Other settings (client_encoding, DateStyle, extra_float_digits,
        // application_name, ...) are accepted and do not change answers.
        Ok(Outcome::Command("SET", None))
    }
}

/// Writes an outcome as a response.
pub(crate) fn respond(outcome: Outcome, format: &Format) -> Response {
    match outcome {
        Outcome::Command(tag, rows) => {
            let t = Tag::new(tag);
            Response::Execution(match rows {
                Some(n) => t.with_rows(n),
                None => t,
            })
        }
        Outcome::Stream(columns, batches) => {
            let fields = Arc::new(fields(&columns, format));
            let types: Vec<(ColType, FieldFormat)> = columns
                .iter()
                .zip(fields.iter())
                .map(|((_, t), f)| (*t, f.format()))
                .collect();
            let schema = fields.clone();
            let (rx, complete) = batches;
            let data = stream::unfold(
                (rx, complete, false),
                |(mut rx, complete, ended)| async move {
                    if ended {
                        return None;
                    }
                    match rx.recv().await {
                        Some(batch) => Some((batch, (rx, complete, false))),
                        None if complete.load(std::sync::atomic::Ordering::SeqCst) => None,
                        None => Some((
                            Err(SqlError::new(
                                "57014",
                                "the answer was abandoned: the client did not read it in time",
                            )),
                            (rx, complete, true),
                        )),
                    }
                },
            )
            .flat_map(move |batch| {
                let encoded: Vec<PgWireResult<_>> = match batch {
                    Err(e) => vec![Err(e.into())],
                    Ok(rows) => rows
                        .into_iter()
                        .map(|row| {
                            let mut enc = DataRowEncoder::new(schema.clone());
                            for (d, (ty, format)) in row.iter().zip(&types) {
                                d.encode(*ty, *format, &mut enc)?;
                            }
                            Ok(enc.take_row())
                        })
                        .collect(),
                };
                stream::iter(encoded)
            });
            Response::Query(QueryResponse::new(fields, data))
        }
        Outcome::Rows(rows) => {
            let fields = Arc::new(fields(&rows.columns, format));
            let types: Vec<(ColType, FieldFormat)> = rows
                .columns
                .iter()
                .zip(fields.iter())
                .map(|((_, t), f)| (*t, f.format()))
                .collect();
            let schema = fields.clone();
            let data = stream::iter(rows.rows.into_iter().map(move |row| {
                let mut enc = DataRowEncoder::new(schema.clone());
                for (d, (ty, format)) in row.iter().zip(&types) {
                    d.encode(*ty, *format, &mut enc)?;
                }
                Ok(enc.take_row())
            }));
            Response::Query(QueryResponse::new(fields, data))
        }
    }
}

fn fields(columns: &[(String, ColType)], format: &Format) -> Vec<FieldInfo> {
    columns
        .iter()
        .enumerate()
        .map(|(i, (name, ty))| {
            FieldInfo::new(name.clone(), None, None, ty.pg(), format.format_for(i))
        })
        .collect()
}

#[async_trait]
impl SimpleQueryHandler for Conn {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        // psql's and drivers' introspection: answered from the catalog
        // before parsing (it uses syntax outside the supported subset).
        if query.contains("pg_catalog.") {
            let sql = query.to_owned();
            let found = self
                .engine
                .call(move |db| crate::catalog::psql_describe(db, &sql))
                .await;
            match found {
                Ok(Ok(Some(rows))) => {
                    return Ok(vec![respond(Outcome::Rows(rows), &Format::UnifiedText)])
                }
                Ok(Err(e)) | Err(e) => return Ok(vec![Response::Error(Box::new(error_info(e)))]),
                Ok(Ok(None)) => {}
            }
        }
        let stmts = match parse(query) {
            Ok(s) => s,
            // A catalog query outside what sqlparser reads: no rows.
            Err(_) if query.contains("pg_catalog.") => {
                return Ok(vec![respond(
                    Outcome::Rows(Rows::default()),
                    &Format::UnifiedText,
                )])
            }
            Err(e) => return Ok(vec![Response::Error(Box::new(error_info(e)))]),
        };
        let single = stmts.len() == 1;
        let count = stmts.len();
        let mut out = Vec::new();
        for (i, stmt) in stmts.into_iter().enumerate() {
            // The text of one statement (positions refer to the whole
            // query when it holds one statement).
            let sql = if single {
                query.to_owned()
            } else {
                stmt.to_string()
            };
            if let Statement::Copy { .. } = &stmt {
                match self.copy.start(&stmt, &self.engine).await {
                    Ok(r) => {
                        out.push(r);
                        break;
                    }
                    Err(e) => {
                        out.push(Response::Error(Box::new(error_info(e))));
                        break;
                    }
                }
            }
            // Only the last statement streams: the responses are sent after
            // every statement has run.
            match self.run(&sql, stmt, i + 1 == count).await {
                Ok(o) => out.push(respond(o, &Format::UnifiedText)),
                // Introspection outside the catalog's subset (psql's
                // footers of `\d`: indexes, policies, publications): no rows.
                Err(_) if sql.contains("pg_catalog.") => out.push(respond(
                    Outcome::Rows(Rows::default()),
                    &Format::UnifiedText,
                )),
                Err(e) => {
                    out.push(Response::Error(Box::new(error_info(e))));
                    break;
                }
            }
            let _ = client.socket_addr();
        }
        Ok(out)
    }
}

pub(crate) fn error_info(e: SqlError) -> pgwire::error::ErrorInfo {
    let mut info = pgwire::error::ErrorInfo::new("ERROR".to_owned(), e.code.to_owned(), e.message);
    info.position = e.position.map(|p| p.to_string());
    info
}

/// Parses statements for the extended protocol.
#[derive(Debug)]
pub(crate) struct SqlParser;

#[async_trait]
impl QueryParser for SqlParser {
    type Statement = Parsed;

    async fn parse_sql<C>(
        &self,
        _client: &C,
        sql: &str,
        _types: &[Option<Type>],
    ) -> PgWireResult<Option<Parsed>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let mut stmts = parse(sql).map_err(PgWireError::from)?;
        if stmts.len() > 1 {
            return Err(SqlError::new(
                SYNTAX,
                "cannot insert multiple commands into a prepared statement",
            )
            .into());
        }
        let stmt = stmts.pop();
        let params = stmt.as_ref().map_or(0, param_count);
        Ok(Some(Parsed {
            sql: sql.to_owned(),
            stmt,
            params,
        }))
    }

    fn get_parameter_types(&self, stmt: &Parsed) -> PgWireResult<Vec<Type>> {
        Ok(vec![Type::TEXT; stmt.params])
    }

    fn get_result_schema(
        &self,
        _stmt: &Parsed,
        _column_format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        Ok(Vec::new())
    }
}

/// 2000-01-01T00:00:00Z in seconds since 1970 (the epoch of PostgreSQL's
/// binary timestamps).
const PG_EPOCH: i64 = 946_684_800;

/// A bound parameter's value, read as its type says.
fn parameter(portal: &Portal<Parsed>, i: usize, described: &[Type]) -> PgWireResult<Datum> {
    let ty = portal
        .statement
        .parameter_types
        .get(i)
        .cloned()
        .flatten()
        .or_else(|| described.get(i).cloned())
        .unwrap_or(Type::TEXT);
    Ok(match ty {
        Type::INT2 => portal
            .parameter::<i16>(i, &ty)?
            .map_or(Datum::Null, |v| Datum::Int(v.into())),
        Type::INT4 => portal
            .parameter::<i32>(i, &ty)?
            .map_or(Datum::Null, |v| Datum::Int(v.into())),
        Type::INT8 => portal
            .parameter::<i64>(i, &ty)?
            .map_or(Datum::Null, Datum::Int),
        Type::FLOAT4 => portal
            .parameter::<f32>(i, &ty)?
            .map_or(Datum::Null, |v| Datum::Float(v.into())),
        Type::FLOAT8 => portal
            .parameter::<f64>(i, &ty)?
            .map_or(Datum::Null, Datum::Float),
        Type::NUMERIC => portal
            .parameter::<rust_decimal::Decimal>(i, &ty)?
            .map_or(Datum::Null, Datum::Numeric),
        Type::TIMESTAMPTZ | Type::TIMESTAMP | Type::DATE => {
            let Some(Some(raw)) = portal.parameters.get(i) else {
                return Ok(Datum::Null);
            };
            let bad = || {
                SqlError::new(
                    crate::error::BAD_VALUE,
                    format!("parameter ${}: not a timestamp", i + 1),
                )
            };
            match portal.parameter_format.format_for(i) {
                FieldFormat::Binary if ty == Type::DATE => {
                    let days = i32::from_be_bytes(raw.as_ref().try_into().map_err(|_| bad())?);
                    Datum::Timestamp(PG_EPOCH + i64::from(days) * 86_400)
                }
                FieldFormat::Binary => {
                    let micros = i64::from_be_bytes(raw.as_ref().try_into().map_err(|_| bad())?);
                    Datum::Timestamp(PG_EPOCH + micros.div_euclid(1_000_000))
                }
                FieldFormat::Text => {
                    let text = std::str::from_utf8(raw).map_err(|_| bad())?;
                    Datum::Timestamp(crate::plan::parse_timestamp(text).ok_or_else(bad)?)
                }
            }
        }
        Type::BOOL => portal
            .parameter::<bool>(i, &ty)?
            .map_or(Datum::Null, Datum::Bool),
        _ => portal
            .parameter::<String>(i, &Type::TEXT)?
            .map_or(Datum::Null, Datum::Text),
    })
}

#[async_trait]
impl ExtendedQueryHandler for Conn {
    type Statement = Parsed;
    type QueryParser = SqlParser;

    fn query_parser(&self) -> Arc<SqlParser> {
        self.parser.clone()
    }

    async fn do_query<C>(
        &self,
        _client: &mut C,
        portal: &Portal<Parsed>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Parsed>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let parsed = &portal.statement.statement;
        let Some(stmt) = &parsed.stmt else {
            return Ok(Response::EmptyQuery);
        };
        // A parameter the client left untyped has the type this server
        // described (and the client encoded it as such).
        let described = if portal.parameter_len() > 0
            && (0..portal.parameter_len()).any(|i| {
                portal
                    .statement
                    .parameter_types
                    .get(i)
                    .cloned()
                    .flatten()
                    .is_none()
            }) {
            self.parameter_types(parsed).await
        } else {
            Vec::new()
        };
        let mut values = Vec::with_capacity(portal.parameter_len());
        for i in 0..portal.parameter_len() {
            values.push(parameter(portal, i, &described)?);
        }
        if let Statement::Copy { .. } = stmt {
            return self
                .copy
                .start(stmt, &self.engine)
                .await
                .map_err(|e| -> PgWireError { e.into() });
        }
        let bound = bind(stmt, &values);
        match self.run(&parsed.sql, bound, true).await {
            Ok(o) => Ok(respond(o, &portal.result_column_format)),
            Err(e) => Err(e.into()),
        }
    }

    async fn do_describe_statement<C>(
        &self,
        _client: &mut C,
        target: &StoredStatement<Parsed>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Parsed>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let columns = self.describe(&target.statement).await?;
        let inferred = self.parameter_types(&target.statement).await;
        let params = (0..target.statement.params)
            .map(|i| {
                target
                    .parameter_types
                    .get(i)
                    .cloned()
                    .flatten()
                    .or_else(|| inferred.get(i).cloned())
                    .unwrap_or(Type::TEXT)
            })
            .collect();
        let d = DescribeStatementResponse::new(params, fields(&columns, &Format::UnifiedBinary));
        if d.is_no_data() {
            return Ok(DescribeStatementResponse::no_data());
        }
        Ok(d)
    }

    async fn do_describe_portal<C>(
        &self,
        _client: &mut C,
        portal: &Portal<Parsed>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Parsed>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let columns = self.describe(&portal.statement.statement).await?;
        if columns.is_empty() {
            return Ok(DescribePortalResponse::no_data());
        }
        Ok(DescribePortalResponse::new(fields(
            &columns,
            &portal.result_column_format,
        )))
    }
}
