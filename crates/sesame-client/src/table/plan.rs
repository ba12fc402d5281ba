//! Planning a table query: each predicate goes to the index that answers
//! it (the keyword index for `=` on an equality field and for `like` on a
//! prefix field, the field's range index for comparisons, and for `=` on a
//! field with a range index only); `and` and `or` combine the identifier
//! sets on the client. A predicate that no index answers is an error that
//! names the fields and the kinds they answer: a table is never scanned.
//!
//! `is null` on a field of the verified group is a term of the group's
//! verified search (the group holds a "no value" for a null field); on an
//! equality or prefix field, the field's null keyword. `is not null` is
//! the complement of `is null` within the table's catalog (the client's
//! own list of its records, so nothing more is asked of the server than
//! for `is null`), or, on a field with only a range index, the index's
//! whole domain.

use std::collections::BTreeSet;

use crate::doc_service::DocId;
use crate::error::{ClientError, Result};
use crate::table::query::{Expr, Literal, Op, Predicate};
use crate::table::schema::{Field, Schema, Value};

/// How one predicate is answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// A search of the keyword index for this keyword.
    Keyword(String),
    /// A query of the field's range index for encoded values in
    /// `[lo, hi]`.
    Range {
        /// Smallest encoded value.
        lo: u64,
        /// Largest encoded value.
        hi: u64,
    },
    /// A verified search of the table's verified group for records whose
    /// group fields equal these values (field position in the group, the
    /// value as [`Field::group_value`] encodes it).
    Verified(Vec<(u32, Vec<u8>)>),
    /// Nothing can match (a bound outside the field's domain, an empty
    /// interval): nothing is sent.
    Nothing,
    /// Every record of the table's catalog but those the inner access
    /// answers (`is not null` as the complement of `is null`); the
    /// catalog is the client's, so only the inner access is sent.
    Complement(Box<Access>),
    /// Every record of the table's catalog (the client's own list;
    /// nothing is sent). Only asked by [`Plan::evaluate`] to answer a
    /// [`Access::Complement`].
    Every,
}

/// A planned query: the shape of the expression with each predicate
/// resolved to an index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// One predicate.
    Leaf {
        /// The predicate as written (canonical form).
        text: String,
        /// Position of its field in the schema.
        field: usize,
        /// How it is answered.
        access: Access,
    },
    /// Both sides (set intersection, on the client).
    And(Box<Plan>, Box<Plan>),
    /// Either side (set union, on the client).
    Or(Box<Plan>, Box<Plan>),
}

impl Plan {
    /// The leaves, left to right.
    pub fn leaves(&self) -> Vec<(&str, usize, &Access)> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect<'a>(&'a self, out: &mut Vec<(&'a str, usize, &'a Access)>) {
        match self {
            Plan::Leaf {
                text,
                field,
                access,
            } => out.push((text, *field, access)),
            Plan::And(a, b) | Plan::Or(a, b) => {
                a.collect(out);
                b.collect(out);
            }
        }
    }

    /// Evaluates the plan, answering each leaf with `leaf`.
    pub(crate) fn evaluate(
        &self,
        leaf: &mut dyn FnMut(usize, &Access) -> Result<BTreeSet<DocId>>,
    ) -> Result<BTreeSet<DocId>> {
        match self {
            Plan::Leaf { field, access, .. } => match access {
                Access::Nothing => Ok(BTreeSet::new()),
                Access::Complement(inner) => {
                    let hit = leaf(*field, inner)?;
                    let every = leaf(*field, &Access::Every)?;
                    Ok(every.difference(&hit).copied().collect())
                }
                _ => leaf(*field, access),
            },
            Plan::And(a, b) => {
                let left = a.evaluate(leaf)?;
                if left.is_empty() {
                    // The right side is still asked: skipping it would
                    // tell the server (by timing and by what it is not
                    // asked) that the left side was empty.
                    b.evaluate(leaf)?;
                    return Ok(left);
                }
                let right = b.evaluate(leaf)?;
                Ok(left.intersection(&right).copied().collect())
            }
            Plan::Or(a, b) => {
                let mut left = a.evaluate(leaf)?;
                left.extend(b.evaluate(leaf)?);
                Ok(left)
            }
        }
    }
}

/// Plans `expr` over `schema`. The equality predicates of one
/// conjunction on fields of the verified group become one verified search.
/// `nulls`: the table's records carry null keywords (`is null` is
/// answered by them; else it is refused).
pub(crate) fn plan(schema: &Schema, expr: &Expr, nulls: bool) -> Result<Plan> {
    match expr {
        Expr::Pred(p) => match verified_term(schema, p)? {
            Some(term) => Ok(verified_leaf(schema, vec![(p, term)])),
            None => leaf(schema, p, nulls),
        },
        Expr::And(..) => {
            let mut conjuncts = Vec::new();
            flatten_and(expr, &mut conjuncts);
            let mut group = Vec::new();
            let mut rest = Vec::new();
            for c in conjuncts {
                match c {
                    Expr::Pred(p) => match verified_term(schema, p)? {
                        // A field asked twice (`a = 1 and a = 2`) is one
                        // term of the group and one ordinary predicate.
                        Some(term) if !group.iter().any(|(_, (j, _))| *j == term.0) => {
                            group.push((p, term));
                        }
                        _ => rest.push(c),
                    },
                    other => rest.push(other),
                }
            }
            let mut planned: Option<Plan> = None;
            if !group.is_empty() {
                planned = Some(verified_leaf(schema, group));
            }
            for c in rest {
                let next = plan(schema, c, nulls)?;
                planned = Some(match planned {
                    Some(p) => Plan::And(Box::new(p), Box::new(next)),
                    None => next,
                });
            }
            planned.ok_or_else(|| ClientError::InvalidQuery("an empty conjunction".into()))
        }
        Expr::Or(a, b) => Ok(Plan::Or(
            Box::new(plan(schema, a, nulls)?),
            Box::new(plan(schema, b, nulls)?),
        )),
    }
}

fn flatten_and<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::And(a, b) => {
            flatten_and(a, out);
            flatten_and(b, out);
        }
        other => out.push(other),
    }
}

/// The verified group's term for `p`, when it is an equality or `is null`
/// on a field of the group.
fn verified_term(schema: &Schema, p: &Predicate) -> Result<Option<(u32, Vec<u8>)>> {
    let (Some(j), Some(field)) = (schema.group_position(&p.field), schema.field(&p.field)) else {
        return Ok(None);
    };
    match &p.op {
        Op::Eq(l) => {
            let v = literal_value(field, l)?;
            Ok(Some((j, field.group_value(Some(&v)))))
        }
        Op::IsNull => Ok(Some((j, field.group_value(None)))),
        _ => Ok(None),
    }
}

fn verified_leaf(schema: &Schema, group: Vec<(&Predicate, (u32, Vec<u8>))>) -> Plan {
    let text = group
        .iter()
        .map(|(p, _)| Expr::Pred((*p).clone()).to_string())
        .collect::<Vec<_>>()
        .join(" and ");
    let field = group
        .first()
        .and_then(|(p, _)| schema.fields.iter().position(|f| f.name == p.field))
        .unwrap_or(0);
    Plan::Leaf {
        text,
        field,
        access: Access::Verified(group.into_iter().map(|(_, t)| t).collect()),
    }
}

/// A literal read as a value of `field`.
fn literal_value(field: &Field, l: &Literal) -> Result<Value> {
    match (l, field.ty) {
        (Literal::Number(_), crate::table::schema::FieldType::String) => {
            Err(ClientError::InvalidQuery(format!(
                "field {:?} is a string: quote the value",
                field.name
            )))
        }
        _ => field
            .parse_literal(literal_text(l))
            .map_err(|e| ClientError::InvalidQuery(e.to_string())),
    }
}

/// What can be asked of the table, for error messages.
pub(crate) fn askable(schema: &Schema) -> String {
    let list: Vec<String> = schema
        .fields
        .iter()
        .filter(|f| !f.kinds().is_empty())
        .map(|f| format!("{} ({})", f.name, f.kinds().join("; ")))
        .collect();
    if list.is_empty() {
        "no field of this table is indexed".into()
    } else {
        format!("indexed fields: {}", list.join(", "))
    }
}

fn literal_text(l: &Literal) -> &str {
    match l {
        Literal::Number(s) | Literal::Text(s) => s,
    }
}

fn leaf(schema: &Schema, p: &Predicate, nulls: bool) -> Result<Plan> {
    let Some((position, field)) = schema
        .fields
        .iter()
        .enumerate()
        .find(|(_, f)| f.name == p.field)
    else {
        return Err(ClientError::InvalidQuery(format!(
            "the table has no field {:?}; {}",
            p.field,
            askable(schema)
        )));
    };
    let text = Expr::Pred(p.clone()).to_string();
    let unanswered = |kind: &str| {
        ClientError::InvalidQuery(format!(
            "no index answers {kind} on field {:?} (it answers: {}); {}",
            field.name,
            if field.kinds().is_empty() {
                "nothing".to_owned()
            } else {
                field.kinds().join("; ")
            },
            askable(schema)
        ))
    };
    let value = |l: &Literal| literal_value(field, l);
    let access = match &p.op {
        Op::Eq(l) => {
            let v = value(l)?;
            if field.equality {
                Access::Keyword(field.equality_keyword(&v))
            } else if field.range.is_some() {
                interval(field, Bound::At(&v), Bound::At(&v))
            } else {
                return Err(unanswered("="));
            }
        }
        Op::Lt(l) | Op::Le(l) | Op::Gt(l) | Op::Ge(l) => {
            if field.range.is_none() {
                return Err(unanswered("comparisons"));
            }
            let v = value(l)?;
            match &p.op {
                Op::Lt(_) => interval(field, Bound::Open, Bound::Below(&v)),
                Op::Le(_) => interval(field, Bound::Open, Bound::At(&v)),
                Op::Gt(_) => interval(field, Bound::Above(&v), Bound::Open),
                _ => interval(field, Bound::At(&v), Bound::Open),
            }
        }
        Op::Between(a, b) => {
            if field.range.is_none() {
                return Err(unanswered("between"));
            }
            let (a, b) = (value(a)?, value(b)?);
            interval(field, Bound::At(&a), Bound::At(&b))
        }
        Op::Like(prefix) => {
            let Some(max) = field.prefix else {
                return Err(unanswered("like"));
            };
            let chars = prefix.chars().count();
            if chars > max {
                return Err(ClientError::InvalidQuery(format!(
                    "field {:?} answers prefixes of at most {max} characters, not {chars} \
                     (prefix_max in the schema)",
                    field.name
                )));
            }
            Access::Keyword(field.prefix_keyword(prefix))
        }
        Op::IsNull => {
            if !field.equality && field.prefix.is_none() {
                return Err(unanswered(
                    "is null (an equality or prefix index, or the verified group, would)",
                ));
            }
            if !nulls {
                return Err(no_null_keywords(field, "is null"));
            }
            Access::Keyword(field.null_keyword())
        }
        Op::IsNotNull => {
            if let Some(j) = schema.group_position(&field.name) {
                // The verified "no value" records, taken from the catalog:
                // as verified as the group's answer.
                Access::Complement(Box::new(Access::Verified(vec![(
                    j,
                    field.group_value(None),
                )])))
            } else if (field.equality || field.prefix.is_some()) && nulls {
                Access::Complement(Box::new(Access::Keyword(field.null_keyword())))
            } else if field.range.is_some() {
                // A range index holds every value of its field.
                interval(field, Bound::Open, Bound::Open)
            } else if field.equality || field.prefix.is_some() {
                return Err(no_null_keywords(field, "is not null"));
            } else {
                return Err(unanswered(
                    "is not null (an equality, prefix or range index, or the verified group, \
                     would)",
                ));
            }
        }
    };
    Ok(Plan::Leaf {
        text,
        field: position,
        access,
    })
}

/// The refusal of `is null` or `is not null` on a table whose records
/// carry no null keywords.
fn no_null_keywords(field: &Field, what: &str) -> ClientError {
    ClientError::InvalidQuery(format!(
        "this table's records carry no null keywords (it was created by an earlier build), so \
         no index answers {:?} {what}: make the table again to add them (sesame rekey --master \
         makes every table again; or drop it and import its records again)",
        field.name
    ))
}

enum Bound<'a> {
    Open,
    At(&'a Value),
    Below(&'a Value),
    Above(&'a Value),
}

/// The encoded interval of a comparison, clamped to the field's domain.
fn interval(field: &Field, lo: Bound<'_>, hi: Bound<'_>) -> Access {
    let (min, max) = field.limits();
    let int = |v: &Value| match v {
        Value::Int(i) => i128::from(*i),
        Value::Text(_) => i128::MAX,
    };
    let lo = match lo {
        Bound::Open => i128::from(min),
        Bound::At(v) => int(v),
        Bound::Above(v) => int(v) + 1,
        Bound::Below(v) => int(v) - 1,
    }
    .max(i128::from(min));
    let hi = match hi {
        Bound::Open => i128::from(max),
        Bound::At(v) => int(v),
        Bound::Below(v) => int(v) - 1,
        Bound::Above(v) => int(v) + 1,
    }
    .min(i128::from(max));
    if lo > hi {
        return Access::Nothing;
    }
    let shift = |v: i128| (v - i128::from(min)) as u64;
    Access::Range {
        lo: shift(lo),
        hi: shift(hi),
    }
}

/// Asserts that `result` is the refusal of `is null` on a table whose
/// records carry no null keywords, one that says how to get them.
#[cfg(test)]
pub(super) fn assert_no_null_keywords<T>(result: Result<T, impl std::fmt::Display>) {
    let e = match result {
        Ok(_) => panic!("is null was answered without null keywords"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("no null keywords") && e.contains("rekey --master"),
        "{e}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::query::parse;

    fn schema() -> Schema {
        Schema::from_toml(
            r#"
[fields.carrier]
type = "string"
index = ["equality"]
[fields.dest]
type = "string"
index = ["prefix"]
prefix_max = 3
[fields.delay]
type = "integer"
index = ["range"]
bits = 8
[fields.note]
type = "string"
"#,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn planned(q: &str) -> Result<Plan> {
        let expr = parse(q).map_err(|e| ClientError::InvalidQuery(e.to_string()))?;
        plan(&schema(), &expr, true)
    }

    fn access(q: &str) -> Access {
        match planned(q).unwrap_or_else(|e| panic!("{q}: {e}")) {
            Plan::Leaf { access, .. } => access,
            other => panic!("{q}: {other:?}"),
        }
    }

    #[test]
    fn each_predicate_goes_to_its_index() {
        assert_eq!(
            access(r#"carrier = "UA""#),
            Access::Keyword("carrier=UA".into())
        );
        assert_eq!(
            access(r#"dest like "SF*""#),
            Access::Keyword("dest^SF".into())
        );
        // 8 bits: values -128..=127 at 0..=255.
        assert_eq!(access("delay = 3"), Access::Range { lo: 131, hi: 131 });
        assert_eq!(access("delay < 0"), Access::Range { lo: 0, hi: 127 });
        assert_eq!(access("delay >= -1"), Access::Range { lo: 127, hi: 255 });
        assert_eq!(access("delay between 5 and 1"), Access::Nothing);
        assert_eq!(access("delay > 1000"), Access::Nothing);
        assert_eq!(access("delay <= 1000"), Access::Range { lo: 0, hi: 255 });
        assert_eq!(
            access("carrier is null"),
            Access::Keyword("carrier!null".into())
        );
        assert_eq!(access("dest is null"), Access::Keyword("dest!null".into()));
        assert_eq!(
            access("carrier is not null"),
            Access::Complement(Box::new(Access::Keyword("carrier!null".into())))
        );
        assert_eq!(
            access("delay is not null"),
            Access::Range { lo: 0, hi: 255 }
        );
    }

    #[test]
    fn is_not_null_is_the_catalog_but_the_nulls() {
        let planned_ = planned("carrier is not null").unwrap_or_else(|e| panic!("{e}"));
        let mut asked = Vec::new();
        let got = planned_
            .evaluate(&mut |_, a| {
                asked.push(a.clone());
                Ok(match a {
                    Access::Keyword(_) => [2, 5].into(),
                    Access::Every => [1, 2, 3, 5, 8].into(),
                    other => panic!("{other:?}"),
                })
            })
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, [1, 3, 8].into());
        assert_eq!(
            asked,
            [Access::Keyword("carrier!null".into()), Access::Every]
        );
        let e = planned("note is not null")
            .map(drop)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no index answers is not null"), "{e}");
        let expr = parse("carrier is not null").unwrap_or_else(|e| panic!("{e}"));
        let e = plan(&schema(), &expr, false)
            .map(drop)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no null keywords"), "{e}");
    }

    #[test]
    fn is_null_needs_a_keyword_index_and_null_keywords() {
        let e = planned("delay is null").map(drop).unwrap_err().to_string();
        assert!(e.contains("no index answers is null"), "{e}");
        let expr = parse("carrier is null").unwrap_or_else(|e| panic!("{e}"));
        super::assert_no_null_keywords(plan(&schema(), &expr, false));
    }

    #[test]
    fn what_no_index_answers_is_an_error_naming_what_can_be_asked() {
        for (q, want) in [
            (r#"note = "x""#, "no index answers ="),
            (r#"carrier < "x""#, "no index answers comparisons"),
            (r#"carrier like "U*""#, "no index answers like"),
            (r#"nope = 1"#, "no field \"nope\""),
            (r#"dest like "SFOX*""#, "at most 3"),
            (r#"carrier = 5"#, "quote the value"),
            (r#"delay = "x""#, "not an integer"),
        ] {
            let e = planned(q).map(drop).unwrap_err().to_string();
            assert!(e.contains(want), "{q}: {e}");
            if !want.contains("at most") && !want.contains("quote") && !want.contains("integer") {
                assert!(e.contains("indexed fields: carrier"), "{q}: {e}");
            }
        }
    }

    #[test]
    fn and_or_combine_sets() {
        let plan = planned(r#"carrier = "A" and (delay < 0 or dest like "S*")"#)
            .unwrap_or_else(|e| panic!("{e}"));
        let sets = |access: &Access| -> BTreeSet<DocId> {
            match access {
                Access::Keyword(k) if k == "carrier=A" => [1, 2, 3].into(),
                Access::Range { .. } => [2, 9].into(),
                _ => [3, 7].into(),
            }
        };
        let got = plan
            .evaluate(&mut |_, a| Ok(sets(a)))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, [2, 3].into());
        assert_eq!(plan.leaves().len(), 3);
    }
}
