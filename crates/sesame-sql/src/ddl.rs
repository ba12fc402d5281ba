//! `CREATE TABLE`: a table of the profile, its index kinds and schemes
//! given in a `WITH (...)` clause (the same schema `sesame table create`
//! reads from TOML, which this builds and checks):
//!
//! ```sql
//! CREATE TABLE flights (
//!   id bigint PRIMARY KEY,          -- the key field (an equality index)
//!   carrier text, dest text, dep_delay bigint,
//!   price numeric(10, 2), dep_time timestamptz, note text
//! ) WITH (
//!   equality = 'carrier',           -- fields answered by =
//!   prefix = 'dest:3',              -- LIKE 'abc%', up to 3 characters
//!   range = 'dep_delay:16, price:24, dep_time',  -- comparisons (bits)
//!   keyword_scheme = 'diana',       -- the equality and prefix fields' scheme
//!   range_scheme = 'bplus-lewi-wu'  -- the range fields' protocol
//! );
//! ```
//!
//! Types: `bigint`/`int8`/`integer`/`int`/`smallint` → integer,
//! `numeric(p, s)`/`decimal(p, s)` → decimal of scale `s` (2 without
//! one), `timestamptz`/`timestamp` → timestamp, `text`/`varchar` →
//! string. A column in no list is stored only.

use std::collections::BTreeMap;

use sesame_client::table::Schema;
use sqlparser::ast::{self, ColumnOption, CreateTableOptions, DataType, SqlOption};

use crate::error::SqlError;
use crate::plan::{ident, object_name};

/// The name and schema a `CREATE TABLE` describes.
pub(crate) fn schema_of(ct: &ast::CreateTable) -> Result<(String, Schema), SqlError> {
    let name = crate::engine::table_name(&ct.name);
    let mut options: BTreeMap<String, String> = BTreeMap::new();
    let list = match &ct.table_options {
        CreateTableOptions::None => Vec::new(),
        CreateTableOptions::With(l) => l.clone(),
        _ => {
            return Err(SqlError::unsupported(
                "CREATE TABLE takes its indexes in WITH (...)",
            ))
        }
    };
    for o in list {
        let SqlOption::KeyValue { key, value } = o else {
            return Err(SqlError::unsupported("WITH (name = 'value', ...)"));
        };
        let v = match crate::plan::literal(&value) {
            Some(d) => d.literal_text().unwrap_or_default(),
            None => value.to_string(),
        };
        options.insert(object_name(&key), v);
    }
    let split = |key: &str| -> Vec<(String, Option<String>)> {
        options
            .get(key)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|s| match s.split_once(':') {
                        Some((f, n)) => (f.trim().to_lowercase(), Some(n.trim().to_owned())),
                        None => (s.to_lowercase(), None),
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    for k in options.keys() {
        if ![
            "equality",
            "prefix",
            "range",
            "keyword_scheme",
            "range_scheme",
        ]
        .contains(&k.as_str())
        {
            return Err(SqlError::unsupported(format!(
                "WITH option {k:?}: the options are equality, prefix, range, keyword_scheme, \
                 range_scheme"
            )));
        }
    }
    let equality = split("equality");
    let prefix = split("prefix");
    let range = split("range");
    let mut key = None;
    let mut toml = String::new();
    let mut fields = String::new();
    for c in &ct.columns {
        let col = ident(&c.name);
        let primary = c
            .options
            .iter()
            .any(|o| matches!(o.option, ColumnOption::PrimaryKey(_)));
        if primary {
            if key.is_some() {
                return Err(SqlError::unsupported("one PRIMARY KEY column"));
            }
            key = Some(col.clone());
        }
        let (ty, scale) = match &c.data_type {
            DataType::BigInt(_)
            | DataType::Int8(_)
            | DataType::Int(_)
            | DataType::Integer(_)
            | DataType::Int4(_)
            | DataType::SmallInt(_)
            | DataType::Int2(_) => ("integer", None),
            DataType::Numeric(info) | DataType::Decimal(info) => (
                "decimal",
                Some(match info {
                    ast::ExactNumberInfo::PrecisionAndScale(_, s) => (*s).max(0) as u64,
                    _ => 2,
                }),
            ),
            DataType::Timestamp(..) | DataType::TimestampNtz(..) => ("timestamp", None),
            DataType::Text | DataType::Varchar(_) | DataType::String(_) => ("string", None),
            other => {
                return Err(SqlError::unsupported(format!(
                    "column {col}: type {other} (bigint, numeric(p, s), timestamptz or text)"
                )))
            }
        };
        let mut index = Vec::new();
        if primary || equality.iter().any(|(f, _)| *f == col) {
            index.push("\"equality\"".to_owned());
        }
        let pre = prefix.iter().find(|(f, _)| *f == col);
        if pre.is_some() {
            index.push("\"prefix\"".to_owned());
        }
        let ran = range.iter().find(|(f, _)| *f == col);
        if ran.is_some() {
            index.push("\"range\"".to_owned());
        }
        fields.push_str(&format!(
            "[fields.{}]\ntype = \"{ty}\"\nindex = [{}]\n",
            toml_key(&col),
            index.join(", ")
        ));
        if let Some(s) = scale {
            fields.push_str(&format!("scale = {s}\n"));
        }
        if let Some((_, Some(n))) = pre {
            fields.push_str(&format!("prefix_max = {}\n", number(n)?));
        }
        if let Some((_, bits)) = ran {
            if let Some(b) = bits {
                fields.push_str(&format!("bits = {}\n", number(b)?));
            }
            if let Some(s) = options.get("range_scheme") {
                fields.push_str(&format!("range = {}\n", toml_string(s)));
            }
        }
    }
    for (list, what) in [
        (&equality, "equality"),
        (&prefix, "prefix"),
        (&range, "range"),
    ] {
        for (f, _) in list.iter() {
            if !ct.columns.iter().any(|c| ident(&c.name) == *f) {
                return Err(SqlError::new(
                    crate::error::NO_COLUMN,
                    format!("{what} = '{f}': no such column"),
                ));
            }
        }
    }
    if let Some(k) = &key {
        toml.push_str(&format!("key = {}\n", toml_string(k)));
    }
    toml.push_str("nulls = [\"\"]\n");
    if let Some(s) = options.get("keyword_scheme") {
        toml.push_str(&format!("equality = {}\n", toml_string(s)));
    }
    toml.push_str(&fields);
    let schema = Schema::from_toml(&toml)
        .map_err(|e| SqlError::new(crate::error::BAD_VALUE, e.to_string()))?;
    Ok((name, schema))
}

fn number(text: &str) -> Result<u64, SqlError> {
    text.parse()
        .map_err(|_| SqlError::new(crate::error::BAD_VALUE, format!("{text:?} is not a number")))
}

fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn toml_key(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        s.to_owned()
    } else {
        toml_string(s)
    }
}
