//! Routing a `WHERE` to the table's encrypted indexes: each leaf becomes
//! a predicate of the table's query language ([`query::Expr`], built as a
//! tree, never pasted from SQL text), which the table plans onto the index
//! that answers it. A leaf no index answers is refused (SQLSTATE `0A000`,
//! naming the column and the index that would answer it) unless the
//! session said `SET sesame.allow_scan = on`; then the rows the indexes
//! cannot narrow are read and the leaf is evaluated on the client, and
//! `EXPLAIN` says so.

use sesame_client::table::query::{Expr, Literal, Op, Predicate};
use sesame_client::table::{Field, FieldType, Schema};

use crate::error::SqlError;
use crate::plan::{CmpOp, Cond};
use crate::types::Datum;

/// How a `WHERE` is answered.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Route {
    /// The query sent to the table's indexes (`None`: every record is
    /// read).
    pub(crate) index: Option<Expr>,
    /// Whether the index query returns exactly the matching rows (else
    /// the client filters a superset).
    pub(crate) exact: bool,
    /// Leaves answered by a scan of decrypted rows (allowed by
    /// `sesame.allow_scan`), as SQL text.
    pub(crate) scanned: Vec<String>,
}

/// Routes `cond` over `schema`'s fields; `nulls`: the table's records
/// carry null keywords (`IS NULL` on an equality or prefix field is
/// answered by them).
pub(crate) fn route(
    schema: &Schema,
    nulls: bool,
    cond: &Cond,
    allow_scan: bool,
) -> Result<Route, SqlError> {
    let mut scanned = Vec::new();
    let mut exact = true;
    let at = Table { schema, nulls };
    let index = walk(at, cond, allow_scan, &mut scanned, &mut exact)?;
    if index.is_none() {
        exact = false;
    }
    Ok(Route {
        index,
        exact: exact && scanned.is_empty(),
        scanned,
    })
}

/// The table a `WHERE` is routed over.
#[derive(Clone, Copy)]
struct Table<'a> {
    schema: &'a Schema,
    nulls: bool,
}

fn walk(
    at: Table<'_>,
    cond: &Cond,
    allow_scan: bool,
    scanned: &mut Vec<String>,
    exact: &mut bool,
) -> Result<Option<Expr>, SqlError> {
    match cond {
        Cond::And(a, b) => {
            let a = walk(at, a, allow_scan, scanned, exact)?;
            let b = walk(at, b, allow_scan, scanned, exact)?;
            Ok(match (a, b) {
                (Some(a), Some(b)) => Some(Expr::And(Box::new(a), Box::new(b))),
                (Some(x), None) | (None, Some(x)) => {
                    *exact = false;
                    Some(x)
                }
                (None, None) => None,
            })
        }
        Cond::Or(a, b) => {
            let a = walk(at, a, allow_scan, scanned, exact)?;
            let b = walk(at, b, allow_scan, scanned, exact)?;
            Ok(match (a, b) {
                (Some(a), Some(b)) => Some(Expr::Or(Box::new(a), Box::new(b))),
                _ => None,
            })
        }
        leaf => match leaf_expr(at, leaf, exact) {
            Ok(e) => Ok(Some(e)),
            Err(refusal) if allow_scan => {
                scanned.push(describe(at.schema, leaf));
                let _ = refusal;
                Ok(None)
            }
            Err(refusal) => Err(refusal),
        },
    }
}

fn field(schema: &Schema, col: usize) -> Result<&Field, SqlError> {
    schema
        .fields
        .get(col)
        .ok_or_else(|| SqlError::new(crate::error::NO_COLUMN, "no such column"))
}

/// The query-language literal of a value of `field`.
fn lit(field: &Field, value: &Datum) -> Option<Literal> {
    let text = value.literal_text()?;
    Some(match field.ty {
        FieldType::String => Literal::Text(text),
        _ => Literal::Number(text),
    })
}

/// What a leaf is, as SQL.
pub(crate) fn describe(schema: &Schema, leaf: &Cond) -> String {
    let name = |c: &usize| {
        schema
            .fields
            .get(*c)
            .map_or("?".to_owned(), |f| f.name.clone())
    };
    let show = |d: &Datum| match d {
        Datum::Text(s) => format!("'{}'", s.replace('\'', "''")),
        Datum::Timestamp(t) => format!("'{}'", crate::types::format_timestamp(*t)),
        other => other.text().unwrap_or_else(|| "NULL".into()),
    };
    match leaf {
        Cond::Cmp { col, op, value } => format!("{} {} {}", name(col), op.symbol(), show(value)),
        Cond::Between {
            col,
            lo,
            hi,
            negated,
        } => format!(
            "{} {}BETWEEN {} AND {}",
            name(col),
            if *negated { "NOT " } else { "" },
            show(lo),
            show(hi)
        ),
        Cond::In { col, list, negated } => format!(
            "{} {}IN ({})",
            name(col),
            if *negated { "NOT " } else { "" },
            list.iter().map(show).collect::<Vec<_>>().join(", ")
        ),
        Cond::Like {
            col,
            pattern,
            negated,
        } => format!(
            "{} {}LIKE {}",
            name(col),
            if *negated { "NOT " } else { "" },
            show(&Datum::Text(pattern.clone()))
        ),
        Cond::IsNull { col, negated } => {
            format!(
                "{} IS {}NULL",
                name(col),
                if *negated { "NOT " } else { "" }
            )
        }
        Cond::Const(b) => b.to_string().to_uppercase(),
        Cond::Not(inner) => format!("NOT ({})", describe(schema, inner)),
        Cond::And(..) | Cond::Or(..) => "a combination".into(),
    }
}

fn refuse(schema: &Schema, leaf: &Cond, f: Option<&Field>, would: &str) -> SqlError {
    let has = match f {
        Some(f) if !f.kinds().is_empty() => f.kinds().join("; "),
        Some(_) => "no index".into(),
        None => String::new(),
    };
    let column = f.map_or(String::new(), |f| {
        format!(" on column {} (its indexes answer: {has})", f.name)
    });
    SqlError::unsupported(format!(
        "no index answers {}{column}: {would}; the server never scans, and this front end \
         scans decrypted rows only after SET sesame.allow_scan = on",
        describe(schema, leaf)
    ))
}

/// Why `IS NULL` and `IS NOT NULL` are refused on an equality or prefix
/// field of a table created before null keywords.
const NO_NULL_KEYWORDS: &str = "this table's records carry no null keywords (it was created by \
     an earlier build): make it again to add them (sesame rekey --master makes every table \
     again; or DROP TABLE and load its rows again)";

/// Whether the field has an index of the keyword index (equality or
/// prefix), whose null keyword answers `IS NULL`.
fn keyworded(f: &Field) -> bool {
    f.equality || f.prefix.is_some()
}

fn leaf_expr(at: Table<'_>, leaf: &Cond, exact: &mut bool) -> Result<Expr, SqlError> {
    let schema = at.schema;
    let pred = |f: &Field, op: Op| {
        Expr::Pred(Predicate {
            field: f.name.clone(),
            op,
        })
    };
    let eq_answered = |f: &Field| f.equality || f.verified || f.range.is_some();
    let eq_would = |f: &Field| {
        format!(
            "an equality index (index = [\"equality\"] on {}) or a range index would answer it",
            f.name
        )
    };
    let range_would = |f: &Field| {
        format!(
            "a range index (index = [\"range\"] on {}) would answer it",
            f.name
        )
    };
    match leaf {
        Cond::Const(_) => Err(SqlError::unsupported(
            "a constant condition is not answered by an index",
        )),
        Cond::Cmp { col, op, value } => {
            let f = field(schema, *col)?;
            if value.is_null() {
                // `col = NULL` is never true.
                return Err(refuse(
                    schema,
                    leaf,
                    Some(f),
                    "a comparison with NULL matches nothing (write IS NULL)",
                ));
            }
            let l = lit(f, value).ok_or_else(|| refuse(schema, leaf, Some(f), "no value"))?;
            match op {
                CmpOp::Eq if eq_answered(f) => Ok(pred(f, Op::Eq(l))),
                CmpOp::Eq => Err(refuse(schema, leaf, Some(f), &eq_would(f))),
                CmpOp::Ne => Err(refuse(
                    schema,
                    leaf,
                    Some(f),
                    "no index kind answers <> (write the values wanted with IN, or a range as two \
                     comparisons joined by OR)",
                )),
                _ if f.range.is_some() => Ok(pred(
                    f,
                    match op {
                        CmpOp::Lt => Op::Lt(l),
                        CmpOp::Le => Op::Le(l),
                        CmpOp::Gt => Op::Gt(l),
                        _ => Op::Ge(l),
                    },
                )),
                _ => Err(refuse(schema, leaf, Some(f), &range_would(f))),
            }
        }
        Cond::Between {
            col,
            lo,
            hi,
            negated: false,
        } => {
            let f = field(schema, *col)?;
            if f.range.is_none() {
                return Err(refuse(schema, leaf, Some(f), &range_would(f)));
            }
            match (lit(f, lo), lit(f, hi)) {
                (Some(a), Some(b)) => Ok(pred(f, Op::Between(a, b))),
                _ => Err(refuse(
                    schema,
                    leaf,
                    Some(f),
                    "BETWEEN NULL matches nothing",
                )),
            }
        }
        Cond::In {
            col,
            list,
            negated: false,
        } => {
            let f = field(schema, *col)?;
            if !eq_answered(f) {
                return Err(refuse(schema, leaf, Some(f), &eq_would(f)));
            }
            let mut out: Option<Expr> = None;
            for v in list.iter().filter(|v| !v.is_null()) {
                let Some(l) = lit(f, v) else { continue };
                let next = pred(f, Op::Eq(l));
                out = Some(match out {
                    Some(o) => Expr::Or(Box::new(o), Box::new(next)),
                    None => next,
                });
            }
            out.ok_or_else(|| refuse(schema, leaf, Some(f), "IN () of only NULL matches nothing"))
        }
        Cond::Like {
            col,
            pattern,
            negated: false,
        } => {
            let f = field(schema, *col)?;
            let prefix_would = format!(
                "a prefix index (index = [\"prefix\"] on {}) would answer LIKE 'prefix%'",
                f.name
            );
            let Some(max) = f.prefix else {
                return Err(refuse(schema, leaf, Some(f), &prefix_would));
            };
            // Only `abc%`: a prefix, then one `%` at the end.
            let Some(prefix) = pattern.strip_suffix('%') else {
                return Err(refuse(schema, leaf, Some(f), &prefix_would));
            };
            if prefix.is_empty() || prefix.contains(['%', '_', '\\']) {
                return Err(refuse(schema, leaf, Some(f), &prefix_would));
            }
            // A prefix longer than the index keeps is asked at its
            // longest kept length; the client keeps the rows that match.
            let kept: String = prefix.chars().take(max).collect();
            if kept.chars().count() < prefix.chars().count() {
                *exact = false;
            }
            Ok(pred(f, Op::Like(kept)))
        }
        // IS NOT NULL: the complement, within the table's catalog, of
        // the verified group's "no value" or of the field's null keyword;
        // else a range index's whole domain (it holds every value of its
        // field). The table's planner picks among them.
        Cond::IsNull { col, negated: true }
            if {
                let f = field(schema, *col)?;
                f.verified || f.range.is_some() || (at.nulls && keyworded(f))
            } =>
        {
            Ok(pred(field(schema, *col)?, Op::IsNotNull))
        }
        // A null equality or prefix field gives the keyword index its
        // null keyword (tables created since null keywords); a field of
        // the verified group has its "no value" there.
        Cond::IsNull {
            col,
            negated: false,
        } if {
            let f = field(schema, *col)?;
            f.verified || (at.nulls && keyworded(f))
        } =>
        {
            Ok(pred(field(schema, *col)?, Op::IsNull))
        }
        Cond::IsNull {
            col,
            negated: false,
        } => {
            let f = field(schema, *col)?;
            let would = if keyworded(f) {
                NO_NULL_KEYWORDS.to_owned()
            } else {
                format!(
                    "an equality index (index = [\"equality\"] on {}) would answer IS NULL with \
                     its null keyword, or the verified group ([verified] fields) with its \
                     verified search",
                    f.name
                )
            };
            Err(refuse(schema, leaf, Some(f), &would))
        }
        Cond::IsNull { col, .. } => {
            let f = field(schema, *col)?;
            let would = if keyworded(f) {
                NO_NULL_KEYWORDS.to_owned()
            } else {
                format!(
                    "IS NOT NULL is answered as the complement of IS NULL by an equality index \
                     (index = [\"equality\"] on {0}) or the verified group ([verified] fields), \
                     or by a range index (index = [\"range\"] on {0}) over its whole domain",
                    f.name
                )
            };
            Err(refuse(schema, leaf, Some(f), &would))
        }
        Cond::Not(_) | Cond::Between { .. } | Cond::In { .. } | Cond::Like { .. } => Err(refuse(
            schema,
            leaf,
            None,
            "no index kind answers a negation",
        )),
        Cond::And(..) | Cond::Or(..) => Err(SqlError::unsupported("nested condition")),
    }
}
