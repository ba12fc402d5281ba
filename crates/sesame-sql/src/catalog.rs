//! The catalog a PostgreSQL client expects: the profile's tables as SQL
//! tables (`information_schema.tables`/`columns`, `pg_catalog.pg_tables`,
//! `pg_class`, `pg_namespace`, `pg_type`, `pg_attribute`), the settings
//! `SHOW` reads, and the functions drivers call at connect time
//! (`version()`, `current_schema()`, ...). Only the subset drivers and
//! psql's `\dt` ask for is answered; another catalog relation reads as
//! empty.

use sqlparser::ast::{self, SelectItem, SetExpr};

use crate::engine::Db;
use crate::error::SqlError;
use crate::exec::Rows;
use crate::plan::{self, object_name};
use crate::types::{ColType, Datum};

/// What `SELECT version()` answers.
pub(crate) const VERSION: &str =
    "PostgreSQL 16.0 (sesame sql: encrypted tables; the server holds no keys)";
/// The `server_version` parameter.
pub(crate) const SERVER_VERSION: &str = "16.0";
/// The schema every table is in.
const SCHEMA: &str = "public";
/// The first oid given to a table (by its position in the list).
const TABLE_OID: i64 = 16_384;
/// The oid of the `public` namespace.
const PUBLIC_OID: i64 = 2200;

/// A setting's value as `SHOW` reads it (`None`: unknown).
pub(crate) fn setting(name: &str, allow_scan: bool) -> Option<String> {
    Some(
        match name.to_ascii_lowercase().as_str() {
            "server_version" => SERVER_VERSION,
            "server_version_num" => "160000",
            "standard_conforming_strings" => "on",
            "client_encoding" | "server_encoding" => "UTF8",
            "datestyle" => "ISO, MDY",
            "timezone" => "UTC",
            "integer_datetimes" => "on",
            "transaction_isolation"
            | "default_transaction_isolation"
            | "transaction isolation level" => "read committed",
            "transaction_read_only" | "default_transaction_read_only" => "off",
            "search_path" => "\"$user\", public",
            "max_identifier_length" => "63",
            "intervalstyle" => "postgres",
            "application_name" => "",
            "is_superuser" => "off",
            "lc_collate" | "lc_ctype" => "C",
            "sesame.allow_scan" => {
                if allow_scan {
                    "on"
                } else {
                    "off"
                }
            }
            _ => return None,
        }
        .to_owned(),
    )
}

/// A `SELECT` without `FROM`: constants and the functions drivers call.
pub(crate) fn constant_select(sql: &str, q: &ast::Query) -> Result<Rows, SqlError> {
    let SetExpr::Select(select) = q.body.as_ref() else {
        return Err(SqlError::unsupported("only a plain SELECT is supported"));
    };
    let mut columns = Vec::new();
    let mut row = Vec::new();
    for item in &select.projection {
        let (e, alias) = match item {
            SelectItem::UnnamedExpr(e) => (e, None),
            SelectItem::ExprWithAlias { expr, alias } => (expr, Some(plan::ident(alias))),
            other => {
                return Err(
                    SqlError::unsupported("SELECT * needs a FROM").at(plan::pos_of(sql, other))
                )
            }
        };
        let (name, ty, value) = scalar(sql, e)?;
        columns.push((alias.unwrap_or(name), ty));
        row.push(value);
    }
    Ok(Rows {
        columns,
        rows: vec![row],
    })
}

fn scalar(sql: &str, e: &ast::Expr) -> Result<(String, ColType, Datum), SqlError> {
    let text = |name: &str, v: &str| Ok((name.to_owned(), ColType::Text, Datum::Text(v.into())));
    match e {
        ast::Expr::Function(f) => {
            let name = object_name(&f.name);
            let name = name.strip_prefix("pg_catalog.").unwrap_or(&name);
            match name {
                "version" => text("version", VERSION),
                "current_schema" => text("current_schema", SCHEMA),
                "current_database" => text("current_database", "sesame"),
                "current_user" | "session_user" | "user" => text(name, "sesame"),
                "pg_backend_pid" => Ok((name.to_owned(), ColType::Int, Datum::Int(0))),
                "current_setting" => {
                    let arg = match &f.args {
                        ast::FunctionArguments::List(l) => l.args.first().map(|a| a.to_string()),
                        _ => None,
                    };
                    let key = arg.unwrap_or_default().trim_matches('\'').to_owned();
                    text("current_setting", &setting(&key, false).unwrap_or_default())
                }
                other => Err(
                    SqlError::unsupported(format!("function {other}() is not supported"))
                        .at(plan::pos_of(sql, e)),
                ),
            }
        }
        ast::Expr::Identifier(i) => match plan::ident(i).as_str() {
            "current_user" | "session_user" | "user" => text(&plan::ident(i), "sesame"),
            "current_schema" => text("current_schema", SCHEMA),
            other => Err(SqlError::new(
                crate::error::NO_COLUMN,
                format!("column {other:?} does not exist"),
            )
            .at(plan::pos_of(sql, e))),
        },
        other => match plan::typed_literal(other) {
            Some((d, ty)) => Ok(("?column?".into(), ty, d)),
            None => Err(SqlError::unsupported(format!(
                "{other}: only constants and catalog functions without FROM"
            ))
            .at(plan::pos_of(sql, other))),
        },
    }
}

fn cols(names: &[(&str, ColType)]) -> Vec<(String, ColType)> {
    names.iter().map(|(n, t)| ((*n).to_owned(), *t)).collect()
}

fn t(s: &str) -> Datum {
    Datum::Text(s.to_owned())
}

/// The rows of a catalog relation, or `None` when `name` is no catalog's.
pub(crate) fn relation(db: &mut Db, _sql: &str, name: &str) -> Result<Option<Rows>, SqlError> {
    let bare = name
        .strip_prefix("pg_catalog.")
        .or_else(|| name.strip_prefix("information_schema."));
    let is_info = name.starts_with("information_schema.");
    let Some(bare) = bare.or_else(|| name.starts_with("pg_").then_some(name)) else {
        return Ok(None);
    };
    let tables = db.table_names()?;
    let rows = match (is_info, bare) {
        (true, "tables") => Rows {
            columns: cols(&[
                ("table_catalog", ColType::Text),
                ("table_schema", ColType::Text),
                ("table_name", ColType::Text),
                ("table_type", ColType::Text),
            ]),
            rows: tables
                .iter()
                .map(|n| vec![t("sesame"), t(SCHEMA), t(n), t("BASE TABLE")])
                .collect(),
        },
        (true, "columns") => {
            let mut rows = Vec::new();
            for n in &tables {
                let schema = db.schema(n)?;
                for (i, f) in schema.fields.iter().enumerate() {
                    let ty = ColType::of(f);
                    rows.push(vec![
                        t("sesame"),
                        t(SCHEMA),
                        t(n),
                        t(&f.name),
                        Datum::Int(i as i64 + 1),
                        t(ty.sql_name()),
                        t(if schema.key.as_deref() == Some(&f.name) {
                            "NO"
                        } else {
                            "YES"
                        }),
                        Datum::Null,
                        t(ty.pg().name()),
                    ]);
                }
            }
            Rows {
                columns: cols(&[
                    ("table_catalog", ColType::Text),
                    ("table_schema", ColType::Text),
                    ("table_name", ColType::Text),
                    ("column_name", ColType::Text),
                    ("ordinal_position", ColType::Int),
                    ("data_type", ColType::Text),
                    ("is_nullable", ColType::Text),
                    ("column_default", ColType::Text),
                    ("udt_name", ColType::Text),
                ]),
                rows,
            }
        }
        (true, "schemata") => Rows {
            columns: cols(&[
                ("catalog_name", ColType::Text),
                ("schema_name", ColType::Text),
            ]),
            rows: vec![vec![t("sesame"), t(SCHEMA)]],
        },
        (false, "pg_tables") => Rows {
            columns: cols(&[
                ("schemaname", ColType::Text),
                ("tablename", ColType::Text),
                ("tableowner", ColType::Text),
            ]),
            rows: tables
                .iter()
                .map(|n| vec![t(SCHEMA), t(n), t("sesame")])
                .collect(),
        },
        (false, "pg_namespace") => Rows {
            columns: cols(&[("oid", ColType::Oid), ("nspname", ColType::Text)]),
            rows: vec![
                vec![Datum::Int(11), t("pg_catalog")],
                vec![Datum::Int(PUBLIC_OID), t(SCHEMA)],
            ],
        },
        (false, "pg_class") => Rows {
            columns: cols(&[
                ("oid", ColType::Oid),
                ("relname", ColType::Text),
                ("relnamespace", ColType::Oid),
                ("relkind", ColType::Text),
            ]),
            rows: tables
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    vec![
                        Datum::Int(TABLE_OID + i as i64),
                        t(n),
                        Datum::Int(PUBLIC_OID),
                        t("r"),
                    ]
                })
                .collect(),
        },
        (false, "pg_type") => Rows {
            columns: cols(&[
                ("oid", ColType::Oid),
                ("typname", ColType::Text),
                ("typnamespace", ColType::Oid),
                ("typarray", ColType::Oid),
                ("typtype", ColType::Text),
                ("typdelim", ColType::Text),
            ]),
            rows: [
                ColType::Int,
                ColType::Numeric,
                ColType::Timestamp,
                ColType::Text,
                ColType::Bool,
                ColType::Float,
                ColType::Oid,
            ]
            .iter()
            .map(|c| {
                let ty = c.pg();
                vec![
                    Datum::Int(i64::from(ty.oid())),
                    t(ty.name()),
                    Datum::Int(11),
                    Datum::Int(0),
                    t("b"),
                    t(","),
                ]
            })
            .collect(),
        },
        (false, "pg_attribute") => {
            let mut rows = Vec::new();
            for (i, n) in tables.iter().enumerate() {
                let schema = db.schema(n)?;
                for (j, f) in schema.fields.iter().enumerate() {
                    rows.push(vec![
                        Datum::Int(TABLE_OID + i as i64),
                        t(&f.name),
                        Datum::Int(i64::from(ColType::of(f).pg().oid())),
                        Datum::Int(j as i64 + 1),
                        Datum::Bool(schema.key.as_deref() == Some(&f.name)),
                    ]);
                }
            }
            Rows {
                columns: cols(&[
                    ("attrelid", ColType::Oid),
                    ("attname", ColType::Text),
                    ("atttypid", ColType::Oid),
                    ("attnum", ColType::Int),
                    ("attnotnull", ColType::Bool),
                ]),
                rows,
            }
        }
        // Another catalog relation: known to be a catalog's, read as empty.
        _ => Rows {
            columns: Vec::new(),
            rows: Vec::new(),
        },
    };
    Ok(Some(rows))
}

/// psql's `\dt` (a join of `pg_class` and `pg_namespace` naming the
/// columns `Schema`, `Name`, `Type`, `Owner`): the profile's tables.
pub(crate) fn psql_list_tables(db: &mut Db, sql: &str) -> Result<Option<Rows>, SqlError> {
    let wanted = [
        "pg_catalog.pg_class c",
        "\"Schema\"",
        "\"Name\"",
        "\"Owner\"",
    ];
    if !wanted.iter().all(|w| sql.contains(w)) || sql.contains("c.oid =") {
        return Ok(None);
    }
    let mut tables = db.table_names()?;
    tables.sort();
    Ok(Some(Rows {
        columns: cols(&[
            ("Schema", ColType::Text),
            ("Name", ColType::Text),
            ("Type", ColType::Text),
            ("Owner", ColType::Text),
        ]),
        rows: tables
            .iter()
            .map(|n| vec![t(SCHEMA), t(n), t("table"), t("sesame")])
            .collect(),
    }))
}

/// The oid a table is shown under.
fn oid_of(tables: &[String], name: &str) -> Option<i64> {
    tables
        .iter()
        .position(|t| t == name)
        .map(|i| TABLE_OID + i as i64)
}

/// The quoted number after `marker` (`c.oid = '16384'`).
fn quoted_after(sql: &str, marker: &str) -> Option<String> {
    let at = sql.find(marker)? + marker.len();
    let rest = sql.get(at..)?.trim_start().strip_prefix('\'')?;
    Some(rest.get(..rest.find('\'')?)?.to_owned())
}

/// The select items of a catalog query, split at top-level commas
/// between `SELECT` and `FROM` (for queries sqlparser need not read).
fn items(sql: &str) -> Vec<String> {
    let lower = sql.to_ascii_lowercase();
    let Some(start) = lower.find("select") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut current = String::new();
    let body = &sql[start + 6..];
    let lower_body = &lower[start + 6..];
    let mut i = 0;
    let bytes = body.as_bytes();
    while i < bytes.len() {
        let rest = lower_body.get(i..).unwrap_or("");
        if depth == 0 && (rest.starts_with(" from ") || rest.starts_with("\nfrom ")) {
            break;
        }
        let c = bytes[i] as char;
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            out.push(current.trim().to_owned());
            current.clear();
        } else {
            current.push(c);
        }
        i += 1;
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_owned());
    }
    out
}

/// The introspection queries psql's `\d NAME` sends: the relation's oid,
/// its kind and options, and its columns with their types. Other
/// catalog queries psql sends for `\d` (indexes, policies, triggers,
/// ...) read as empty elsewhere.
pub(crate) fn psql_describe(db: &mut Db, sql: &str) -> Result<Option<Rows>, SqlError> {
    let tables = db.table_names()?;
    if sql.contains("OPERATOR(pg_catalog.~)") && sql.contains("pg_catalog.pg_class c") {
        let Some(at) = sql.find("'^(") else {
            return Ok(None);
        };
        let rest = &sql[at + 3..];
        let Some(end) = rest.find(")$'") else {
            return Ok(None);
        };
        let name = rest[..end].replace("\\", "");
        let rows = match oid_of(&tables, &name) {
            Some(oid) => vec![vec![Datum::Int(oid), t(SCHEMA), t(&name)]],
            None => Vec::new(),
        };
        return Ok(Some(Rows {
            columns: cols(&[
                ("oid", ColType::Oid),
                ("nspname", ColType::Text),
                ("relname", ColType::Text),
            ]),
            rows,
        }));
    }
    if sql.contains("c.relchecks") && sql.contains("c.oid =") {
        let Some(oid) = quoted_after(sql, "c.oid =").and_then(|o| o.parse::<i64>().ok()) else {
            return Ok(None);
        };
        let known = oid
            .checked_sub(TABLE_OID)
            .and_then(|i| usize::try_from(i).ok())
            .is_some_and(|i| i < tables.len());
        let mut columns = Vec::new();
        let mut row = Vec::new();
        for (i, item) in items(sql).iter().enumerate() {
            let v = if item.contains("relchecks") || item.contains("reltablespace") {
                "0"
            } else if item.contains("relkind") {
                "r"
            } else if item.contains("relpersistence") {
                "p"
            } else if item.contains("relreplident") {
                "d"
            } else if item.contains("amname") {
                "heap"
            } else if item.contains("reloptions") || item.contains("reloftype") {
                ""
            } else {
                "f"
            };
            columns.push((format!("c{i}"), ColType::Text));
            row.push(t(v));
        }
        return Ok(Some(Rows {
            columns,
            rows: if known { vec![row] } else { Vec::new() },
        }));
    }
    if sql.contains("a.attname") && sql.contains("a.attrelid =") {
        let Some(oid) = quoted_after(sql, "a.attrelid =").and_then(|o| o.parse::<i64>().ok())
        else {
            return Ok(None);
        };
        let Some(name) = oid
            .checked_sub(TABLE_OID)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| tables.get(i))
            .cloned()
        else {
            return Ok(Some(Rows::default()));
        };
        let schema = db.schema(&name)?;
        let list = items(sql);
        let columns = (0..list.len())
            .map(|i| (format!("c{i}"), ColType::Text))
            .collect();
        let rows = schema
            .fields
            .iter()
            .map(|f| {
                list.iter()
                    .map(|item| {
                        if item.contains("format_type") {
                            t(ColType::of(f).sql_name())
                        } else if item.contains("attname") && !item.contains("(") {
                            t(&f.name)
                        } else if item.contains("attnotnull") {
                            t(if schema.key.as_deref() == Some(&f.name) {
                                "t"
                            } else {
                                "f"
                            })
                        } else if item.contains("attidentity") || item.contains("attgenerated") {
                            t("")
                        } else {
                            Datum::Null
                        }
                    })
                    .collect()
            })
            .collect();
        return Ok(Some(Rows { columns, rows }));
    }
    Ok(None)
}
