//! Translating a parsed `SELECT` (and the `WHERE` of `DELETE` and
//! `UPDATE`) into a plan over one relation: a condition tree whose leaves
//! name a column and hold typed values, the output columns, grouping,
//! order and limits. Which index answers each leaf is decided in
//! `route`; the plan itself is evaluated on the client in `exec`.

use sqlparser::ast::{
    self, BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr,
    LimitClause, OrderByKind, SelectItem, SetExpr, Spanned, UnaryOperator, Value as AstValue,
};

use crate::error::{SqlError, BAD_VALUE, NO_COLUMN};
use crate::types::{ColType, Datum};

/// The columns of the relation a statement reads.
pub(crate) type Columns = Vec<(String, ColType)>;

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "<>",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// A `WHERE` condition with typed leaves.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cond {
    Const(bool),
    And(Box<Cond>, Box<Cond>),
    Or(Box<Cond>, Box<Cond>),
    Not(Box<Cond>),
    Cmp {
        col: usize,
        op: CmpOp,
        value: Datum,
    },
    Between {
        col: usize,
        lo: Datum,
        hi: Datum,
        negated: bool,
    },
    In {
        col: usize,
        list: Vec<Datum>,
        negated: bool,
    },
    Like {
        col: usize,
        pattern: String,
        negated: bool,
    },
    IsNull {
        col: usize,
        negated: bool,
    },
}

/// An aggregate function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AggKind {
    Count,
    Min,
    Max,
    Sum,
    Avg,
}

/// What an output column holds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Scalar {
    Col(usize),
    Lit(Datum),
    /// `arg: None` is `count(*)`.
    Agg {
        kind: AggKind,
        arg: Option<usize>,
    },
}

/// An output column.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Output {
    pub(crate) name: String,
    pub(crate) ty: ColType,
    pub(crate) expr: Scalar,
}

/// A planned `SELECT` over one relation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SelectPlan {
    /// The relation's name as written (`None`: no `FROM`).
    pub(crate) from: Option<String>,
    pub(crate) filter: Option<Cond>,
    /// Output columns; those past `visible` are sort keys only.
    pub(crate) outputs: Vec<Output>,
    pub(crate) visible: usize,
    pub(crate) group_by: Vec<usize>,
    pub(crate) distinct: bool,
    /// Output position, descending, nulls first.
    pub(crate) order: Vec<(usize, bool, bool)>,
    pub(crate) limit: Option<usize>,
    pub(crate) offset: usize,
}

impl SelectPlan {
    /// Whether any output is an aggregate.
    pub(crate) fn aggregates(&self) -> bool {
        !self.group_by.is_empty()
            || self
                .outputs
                .iter()
                .any(|o| matches!(o.expr, Scalar::Agg { .. }))
    }
}

/// The 1-based position of a node in `sql`.
pub(crate) fn pos_of(sql: &str, node: &impl Spanned) -> Option<usize> {
    let start = node.span().start;
    crate::error::position(sql, start.line, start.column)
}

/// The name of the single relation of a `SELECT` (lower-cased parts
/// joined with dots), or `None` without `FROM`.
pub(crate) fn relation_name(select: &ast::Select) -> Result<Option<String>, SqlError> {
    match select.from.as_slice() {
        [] => Ok(None),
        [one] if one.joins.is_empty() => match &one.relation {
            ast::TableFactor::Table { name, .. } => Ok(Some(object_name(name))),
            _ => Err(SqlError::unsupported(
                "only a table can follow FROM (no subqueries or table functions)",
            )),
        },
        _ => Err(SqlError::unsupported(
            "a SELECT reads one table: joins are not supported",
        )),
    }
}

/// `a.B."c"` as `a.b.c` (unquoted parts lower-cased as PostgreSQL does).
pub(crate) fn object_name(name: &ast::ObjectName) -> String {
    name.0
        .iter()
        .map(|p| match p.as_ident() {
            Some(i) => ident(i),
            None => p.to_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

pub(crate) fn ident(i: &ast::Ident) -> String {
    if i.quote_style.is_some() {
        i.value.clone()
    } else {
        i.value.to_lowercase()
    }
}

/// Plans `SELECT ... FROM <relation with these columns>`.
pub(crate) fn plan_select(
    sql: &str,
    query: &ast::Query,
    columns: &Columns,
    from: Option<String>,
) -> Result<SelectPlan, SqlError> {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return Err(SqlError::unsupported(
            "only a plain SELECT is supported (no UNION, INTERSECT, EXCEPT or VALUES)",
        )
        .at(pos_of(sql, query)));
    };
    if query.with.is_some() {
        return Err(SqlError::unsupported("WITH is not supported").at(pos_of(sql, query)));
    }
    let filter = match &select.selection {
        Some(e) => Some(cond(sql, e, columns)?),
        None => None,
    };
    let mut outputs = Vec::new();
    for item in &select.projection {
        match item {
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                for (i, (name, ty)) in columns.iter().enumerate() {
                    outputs.push(Output {
                        name: name.clone(),
                        ty: *ty,
                        expr: Scalar::Col(i),
                    });
                }
            }
            SelectItem::UnnamedExpr(e) => outputs.push(output(sql, e, None, columns)?),
            SelectItem::ExprWithAlias { expr, alias } => {
                outputs.push(output(sql, expr, Some(ident(alias)), columns)?)
            }
            other => {
                return Err(SqlError::unsupported("this select item is not supported")
                    .at(pos_of(sql, other)))
            }
        }
    }
    let group_by = match &select.group_by {
        GroupByExpr::Expressions(exprs, _) => exprs
            .iter()
            .map(|e| column_of(sql, e, columns).or_else(|err| by_output(e, &outputs).ok_or(err)))
            .collect::<Result<Vec<_>, _>>()?,
        GroupByExpr::All(_) => return Err(SqlError::unsupported("GROUP BY ALL is not supported")),
    };
    let plan_aggregates =
        !group_by.is_empty() || outputs.iter().any(|o| matches!(o.expr, Scalar::Agg { .. }));
    if plan_aggregates {
        for o in &outputs {
            if let Scalar::Col(c) = o.expr {
                if !group_by.contains(&c) {
                    return Err(SqlError::new(
                        "42803",
                        format!(
                            "column {:?} must appear in the GROUP BY clause or be used in an \
                             aggregate function",
                            o.name
                        ),
                    ));
                }
            }
        }
    }
    if select.having.is_some() {
        return Err(SqlError::unsupported("HAVING is not supported"));
    }
    let visible = outputs.len();
    let mut order = Vec::new();
    if let Some(ob) = &query.order_by {
        let OrderByKind::Expressions(exprs) = &ob.kind else {
            return Err(SqlError::unsupported("ORDER BY ALL is not supported"));
        };
        for o in exprs {
            let desc = matches!(o.options.sort, Some(ast::OrderBySort::Desc));
            let nulls_first = o.options.nulls_first.unwrap_or(desc);
            let at = match order_target(sql, &o.expr, &outputs, visible, columns)? {
                Some(i) => i,
                None => {
                    if plan_aggregates {
                        return Err(SqlError::unsupported(
                            "ORDER BY of an aggregate query names an output column",
                        )
                        .at(pos_of(sql, &o.expr)));
                    }
                    outputs.push(output(sql, &o.expr, None, columns)?);
                    outputs.len() - 1
                }
            };
            order.push((at, desc, nulls_first));
        }
    }
    let (limit, offset) = match &query.limit_clause {
        None => (None, 0),
        Some(LimitClause::LimitOffset { limit, offset, .. }) => (
            limit.as_ref().map(|e| count_of(sql, e)).transpose()?,
            offset
                .as_ref()
                .map(|o| count_of(sql, &o.value))
                .transpose()?
                .unwrap_or(0),
        ),
        Some(other) => {
            return Err(SqlError::unsupported("use LIMIT n OFFSET m").at(pos_of(sql, other)))
        }
    };
    Ok(SelectPlan {
        from,
        filter,
        outputs,
        visible,
        group_by,
        distinct: select.distinct.is_some(),
        order,
        limit,
        offset,
    })
}

fn by_output(e: &Expr, outputs: &[Output]) -> Option<usize> {
    if let Expr::Identifier(i) = e {
        let name = ident(i);
        return outputs.iter().find_map(|o| match o.expr {
            Scalar::Col(c) if o.name == name => Some(c),
            _ => None,
        });
    }
    None
}

/// The output an `ORDER BY` item names: a position, an output's name, or
/// a column already output.
fn order_target(
    sql: &str,
    e: &Expr,
    outputs: &[Output],
    visible: usize,
    columns: &Columns,
) -> Result<Option<usize>, SqlError> {
    if let Expr::Value(v) = e {
        if let AstValue::Number(n, _) = &v.value {
            let i: usize = n.parse().map_err(|_| {
                SqlError::new(BAD_VALUE, format!("ORDER BY {n}: not a column position"))
            })?;
            if i == 0 || i > visible {
                return Err(SqlError::new(
                    NO_COLUMN,
                    format!("ORDER BY position {i} is not in select list"),
                )
                .at(pos_of(sql, e)));
            }
            return Ok(Some(i - 1));
        }
    }
    if let Expr::Identifier(i) = e {
        let name = ident(i);
        if let Some(at) = outputs.iter().take(visible).position(|o| o.name == name) {
            return Ok(Some(at));
        }
    }
    if let Ok(c) = column_of(sql, e, columns) {
        if let Some(at) = outputs
            .iter()
            .take(visible)
            .position(|o| o.expr == Scalar::Col(c))
        {
            return Ok(Some(at));
        }
    }
    let planned = output(sql, e, None, columns)?;
    Ok(outputs
        .iter()
        .take(visible)
        .position(|o| o.expr == planned.expr))
}

fn count_of(sql: &str, e: &Expr) -> Result<usize, SqlError> {
    match e {
        Expr::Value(v) => match &v.value {
            AstValue::Number(n, _) => n.parse().map_err(|_| {
                SqlError::new(BAD_VALUE, format!("{n} is not a row count")).at(pos_of(sql, e))
            }),
            AstValue::Null => Ok(usize::MAX),
            _ => Err(
                SqlError::new(BAD_VALUE, "LIMIT and OFFSET take a whole number").at(pos_of(sql, e)),
            ),
        },
        Expr::Identifier(_) if e.to_string().eq_ignore_ascii_case("all") => Ok(usize::MAX),
        _ => {
            Err(SqlError::new(BAD_VALUE, "LIMIT and OFFSET take a whole number").at(pos_of(sql, e)))
        }
    }
}

/// The column an expression names.
pub(crate) fn column_of(sql: &str, e: &Expr, columns: &Columns) -> Result<usize, SqlError> {
    let name = match e {
        Expr::Identifier(i) => ident(i),
        Expr::CompoundIdentifier(parts) => match parts.last() {
            Some(i) => ident(i),
            None => String::new(),
        },
        Expr::Nested(inner) => return column_of(sql, inner, columns),
        other => {
            return Err(
                SqlError::unsupported(format!("expected a column name, not {other}"))
                    .at(pos_of(sql, other)),
            )
        }
    };
    columns.iter().position(|(c, _)| *c == name).ok_or_else(|| {
        SqlError::new(
            NO_COLUMN,
            format!(
                "column {name:?} does not exist (columns: {})",
                columns
                    .iter()
                    .map(|(c, _)| c.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .at(pos_of(sql, e))
    })
}

fn output(
    sql: &str,
    e: &Expr,
    alias: Option<String>,
    columns: &Columns,
) -> Result<Output, SqlError> {
    if let Expr::Function(f) = e {
        let fname = object_name(&f.name);
        let fname = fname
            .strip_prefix("pg_catalog.")
            .unwrap_or(&fname)
            .to_owned();
        let kind = match fname.as_str() {
            "count" => Some(AggKind::Count),
            "min" => Some(AggKind::Min),
            "max" => Some(AggKind::Max),
            "sum" => Some(AggKind::Sum),
            "avg" => Some(AggKind::Avg),
            _ => None,
        };
        if let Some(kind) = kind {
            let args = match &f.args {
                FunctionArguments::List(list) => {
                    if list.duplicate_treatment.is_some() {
                        return Err(SqlError::unsupported(format!(
                            "{fname}(DISTINCT ...) is not supported"
                        ))
                        .at(pos_of(sql, e)));
                    }
                    list.args.clone()
                }
                FunctionArguments::None => Vec::new(),
                FunctionArguments::Subquery(_) => {
                    return Err(SqlError::unsupported(
                        "a subquery argument is not supported",
                    ))
                }
            };
            let arg = match args.as_slice() {
                [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)] if kind == AggKind::Count => None,
                [FunctionArg::Unnamed(FunctionArgExpr::Expr(x))] => {
                    Some(column_of(sql, x, columns)?)
                }
                _ => {
                    return Err(SqlError::unsupported(format!(
                        "{fname} takes one column{}",
                        if kind == AggKind::Count { " or *" } else { "" }
                    ))
                    .at(pos_of(sql, e)))
                }
            };
            let ty = match (kind, arg) {
                (AggKind::Count, _) => ColType::Int,
                (AggKind::Sum | AggKind::Avg, _) => ColType::Numeric,
                (_, Some(c)) => columns.get(c).map_or(ColType::Text, |(_, t)| *t),
                (_, None) => ColType::Int,
            };
            return Ok(Output {
                name: alias.unwrap_or(fname),
                ty,
                expr: Scalar::Agg { kind, arg },
            });
        }
    }
    if let Ok(c) = column_of(sql, e, columns) {
        let (name, ty) = columns
            .get(c)
            .cloned()
            .unwrap_or_else(|| (String::new(), ColType::Text));
        return Ok(Output {
            name: alias.unwrap_or(name),
            ty,
            expr: Scalar::Col(c),
        });
    }
    match typed_literal(e) {
        Some((d, ty)) => Ok(Output {
            name: alias.unwrap_or_else(|| "?column?".into()),
            ty,
            expr: Scalar::Lit(d),
        }),
        None => match e {
            Expr::Identifier(_) | Expr::CompoundIdentifier(_) => Err(column_of(sql, e, columns)
                .err()
                .unwrap_or_else(|| SqlError::new(NO_COLUMN, "no such column"))),
            _ => Err(SqlError::unsupported(format!(
                "{e}: only columns, constants and count/min/max/sum/avg can be selected"
            ))
            .at(pos_of(sql, e))),
        },
    }
}

/// A constant's value and the column type it gives an output (text
/// for a string or NULL).
pub(crate) fn typed_literal(e: &Expr) -> Option<(Datum, ColType)> {
    let d = literal(e)?;
    let ty = match &d {
        Datum::Int(_) => ColType::Int,
        Datum::Numeric(_) => ColType::Numeric,
        Datum::Bool(_) => ColType::Bool,
        _ => ColType::Text,
    };
    Some((d, ty))
}

/// A constant's value.
pub(crate) fn literal(e: &Expr) -> Option<Datum> {
    match e {
        Expr::Value(v) => match &v.value {
            AstValue::Number(n, _) => Some(number(n)?),
            AstValue::SingleQuotedString(s)
            | AstValue::EscapedStringLiteral(s)
            | AstValue::DoubleQuotedString(s) => Some(Datum::Text(s.clone())),
            AstValue::Boolean(b) => Some(Datum::Bool(*b)),
            AstValue::Null => Some(Datum::Null),
            _ => None,
        },
        Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match literal(expr)? {
            Datum::Int(i) => Some(Datum::Int(i.checked_neg()?)),
            Datum::Numeric(d) => Some(Datum::Numeric(-d)),
            _ => None,
        },
        Expr::Nested(inner) => literal(inner),
        Expr::Cast { expr, .. } => literal(expr),
        Expr::TypedString(t) => match &t.value.value {
            AstValue::SingleQuotedString(s) => Some(Datum::Text(s.clone())),
            _ => None,
        },
        _ => None,
    }
}

fn number(n: &str) -> Option<Datum> {
    if let Ok(i) = n.parse::<i64>() {
        return Some(Datum::Int(i));
    }
    n.parse::<rust_decimal::Decimal>()
        .ok()
        .map(Datum::Numeric)
        .or_else(|| n.parse::<f64>().ok().map(Datum::Float))
}

/// A constant read as a value of a column of type `ty`.
pub(crate) fn coerce(sql: &str, e: &Expr, ty: ColType) -> Result<Datum, SqlError> {
    let value = literal(e).ok_or_else(|| {
        SqlError::unsupported(format!("{e}: compare a column with a constant")).at(pos_of(sql, e))
    })?;
    coerce_value(value, ty).map_err(|m| SqlError::new(BAD_VALUE, m).at(pos_of(sql, e)))
}

/// A value read as type `ty`.
pub(crate) fn coerce_value(value: Datum, ty: ColType) -> Result<Datum, String> {
    let bad = |v: &Datum| {
        format!(
            "invalid input syntax for type {}: {:?}",
            ty.sql_name(),
            v.text().unwrap_or_default()
        )
    };
    Ok(match (value, ty) {
        (Datum::Null, _) => Datum::Null,
        (Datum::Text(s), ColType::Int) => {
            Datum::Int(s.trim().parse().map_err(|_| bad(&Datum::Text(s.clone())))?)
        }
        (Datum::Text(s), ColType::Numeric) => {
            Datum::Numeric(s.trim().parse().map_err(|_| bad(&Datum::Text(s.clone())))?)
        }
        (Datum::Text(s), ColType::Timestamp) => {
            Datum::Timestamp(parse_timestamp(&s).ok_or_else(|| bad(&Datum::Text(s.clone())))?)
        }
        (Datum::Int(i), ColType::Timestamp) => Datum::Timestamp(i),
        (d @ (Datum::Int(_) | Datum::Numeric(_) | Datum::Float(_)), ColType::Text) => {
            Datum::Text(d.literal_text().unwrap_or_default())
        }
        (d, _) => d,
    })
}

/// A `timestamptz` literal (`2013-01-01 05:00:00+00`, RFC 3339, or a
/// date) as seconds since 1970.
pub(crate) fn parse_timestamp(text: &str) -> Option<i64> {
    let mut t = text.trim().to_owned();
    // PostgreSQL writes offsets as `+00`; the table's reader wants `+00:00`.
    if let Some(at) = t.rfind(['+', '-']) {
        let tail = &t[at + 1..];
        if at > 10 && tail.len() == 2 && tail.bytes().all(|b| b.is_ascii_digit()) {
            t.push_str(":00");
        }
    }
    let field = sesame_client::table::Field {
        name: "t".into(),
        ty: sesame_client::table::FieldType::Timestamp,
        equality: false,
        prefix: None,
        range: None,
        bits: 64,
        verified: false,
    };
    match field.parse_literal(&t) {
        Ok(sesame_client::table::Value::Int(v)) => Some(v),
        _ => None,
    }
}

/// The condition of a `WHERE`.
pub(crate) fn cond(sql: &str, e: &Expr, columns: &Columns) -> Result<Cond, SqlError> {
    let ty = |c: usize| columns.get(c).map_or(ColType::Text, |(_, t)| *t);
    Ok(match e {
        Expr::Nested(inner) => cond(sql, inner, columns)?,
        Expr::BinaryOp { left, op, right } => match op {
            BinaryOperator::And => Cond::And(
                Box::new(cond(sql, left, columns)?),
                Box::new(cond(sql, right, columns)?),
            ),
            BinaryOperator::Or => Cond::Or(
                Box::new(cond(sql, left, columns)?),
                Box::new(cond(sql, right, columns)?),
            ),
            BinaryOperator::Eq
            | BinaryOperator::NotEq
            | BinaryOperator::Lt
            | BinaryOperator::LtEq
            | BinaryOperator::Gt
            | BinaryOperator::GtEq => {
                let mut cmp = match op {
                    BinaryOperator::Eq => CmpOp::Eq,
                    BinaryOperator::NotEq => CmpOp::Ne,
                    BinaryOperator::Lt => CmpOp::Lt,
                    BinaryOperator::LtEq => CmpOp::Le,
                    BinaryOperator::Gt => CmpOp::Gt,
                    _ => CmpOp::Ge,
                };
                // `5 < col` is `col > 5`.
                let (col_e, lit_e) = if literal(left).is_some() && literal(right).is_none() {
                    cmp = match cmp {
                        CmpOp::Lt => CmpOp::Gt,
                        CmpOp::Le => CmpOp::Ge,
                        CmpOp::Gt => CmpOp::Lt,
                        CmpOp::Ge => CmpOp::Le,
                        other => other,
                    };
                    (right, left)
                } else {
                    (left, right)
                };
                let col = column_of(sql, col_e, columns)?;
                Cond::Cmp {
                    col,
                    op: cmp,
                    value: coerce(sql, lit_e, ty(col))?,
                }
            }
            other => {
                return Err(SqlError::unsupported(format!(
                    "operator {other} is not supported in WHERE"
                ))
                .at(pos_of(sql, e)))
            }
        },
        Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } => Cond::Not(Box::new(cond(sql, expr, columns)?)),
        Expr::Between {
            expr,
            negated,
            low,
            high,
        } => {
            let col = column_of(sql, expr, columns)?;
            Cond::Between {
                col,
                lo: coerce(sql, low, ty(col))?,
                hi: coerce(sql, high, ty(col))?,
                negated: *negated,
            }
        }
        Expr::In {
            expr,
            target: ast::InTarget::List(list),
            negated,
            ..
        } => {
            let col = column_of(sql, expr, columns)?;
            Cond::In {
                col,
                list: list
                    .iter()
                    .map(|x| coerce(sql, x, ty(col)))
                    .collect::<Result<_, _>>()?,
                negated: *negated,
            }
        }
        Expr::Like {
            negated,
            expr,
            pattern,
            escape_char,
            any: false,
        } if escape_char.is_none() => {
            let col = column_of(sql, expr, columns)?;
            // `LIKE NULL` matches nothing.
            if literal(pattern) == Some(Datum::Null) {
                return Ok(Cond::Const(false));
            }
            let Some(Datum::Text(p)) = literal(pattern) else {
                return Err(SqlError::unsupported("LIKE takes a quoted pattern")
                    .at(pos_of(sql, pattern.as_ref())));
            };
            Cond::Like {
                col,
                pattern: p,
                negated: *negated,
            }
        }
        Expr::IsNull(x) => Cond::IsNull {
            col: column_of(sql, x, columns)?,
            negated: false,
        },
        Expr::IsNotNull(x) => Cond::IsNull {
            col: column_of(sql, x, columns)?,
            negated: true,
        },
        Expr::Value(v) => match &v.value {
            AstValue::Boolean(b) => Cond::Const(*b),
            _ => {
                return Err(
                    SqlError::unsupported(format!("WHERE {e} is not a condition"))
                        .at(pos_of(sql, e)),
                )
            }
        },
        other => {
            return Err(SqlError::unsupported(format!(
                "{other}: WHERE supports =, <>, <, <=, >, >=, BETWEEN, IN, LIKE, IS [NOT] NULL, \
                 AND, OR, NOT and parentheses"
            ))
            .at(pos_of(sql, other)))
        }
    })
}
