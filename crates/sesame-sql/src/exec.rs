//! Evaluating a plan on the client over the rows the indexes returned:
//! the `WHERE` again (exact SQL semantics: `NULL` matches no comparison),
//! grouping and aggregates, `DISTINCT`, `ORDER BY` (a stable sort, so
//! ties keep the table's order), `OFFSET` and `LIMIT`.

use std::cmp::Ordering;
use std::collections::HashMap;

use rust_decimal::Decimal;

use crate::plan::{AggKind, CmpOp, Cond, Scalar, SelectPlan};
use crate::types::{ColType, Datum};

/// A result: its columns and rows.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Rows {
    pub(crate) columns: Vec<(String, ColType)>,
    pub(crate) rows: Vec<Vec<Datum>>,
}

/// Whether `row` satisfies `cond` (SQL's unknown counts as false).
pub(crate) fn matches(cond: &Cond, row: &[Datum]) -> bool {
    truth(cond, row) == Some(true)
}

/// Three-valued logic: `None` is unknown.
fn truth(cond: &Cond, row: &[Datum]) -> Option<bool> {
    let cell = |c: &usize| row.get(*c).unwrap_or(&Datum::Null);
    match cond {
        Cond::Const(b) => Some(*b),
        Cond::And(a, b) => match (truth(a, row), truth(b, row)) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
        Cond::Or(a, b) => match (truth(a, row), truth(b, row)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
        Cond::Not(a) => truth(a, row).map(|b| !b),
        Cond::Cmp { col, op, value } => {
            let o = cell(col).compare(value)?;
            Some(match op {
                CmpOp::Eq => o == Ordering::Equal,
                CmpOp::Ne => o != Ordering::Equal,
                CmpOp::Lt => o == Ordering::Less,
                CmpOp::Le => o != Ordering::Greater,
                CmpOp::Gt => o == Ordering::Greater,
                CmpOp::Ge => o != Ordering::Less,
            })
        }
        Cond::Between {
            col,
            lo,
            hi,
            negated,
        } => {
            let v = cell(col);
            let inside = v.compare(lo)? != Ordering::Less && v.compare(hi)? != Ordering::Greater;
            Some(inside != *negated)
        }
        Cond::In { col, list, negated } => {
            let v = cell(col);
            if v.is_null() {
                return None;
            }
            let mut unknown = false;
            for x in list {
                match v.compare(x) {
                    Some(Ordering::Equal) => return Some(!*negated),
                    None => unknown = true,
                    _ => {}
                }
            }
            if unknown {
                None
            } else {
                Some(*negated)
            }
        }
        Cond::Like {
            col,
            pattern,
            negated,
        } => match cell(col) {
            Datum::Null => None,
            v => Some(like(&v.text().unwrap_or_default(), pattern) != *negated),
        },
        Cond::IsNull { col, negated } => Some(cell(col).is_null() != *negated),
    }
}

/// SQL `LIKE`: `%` any run, `_` one character, `\` escapes.
pub(crate) fn like(text: &str, pattern: &str) -> bool {
    let t: Vec<char> = text.chars().collect();
    let mut p: Vec<(char, bool)> = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                p.push((n, true));
            }
        } else {
            p.push((c, false));
        }
    }
    // Dynamic programming over (text position, pattern position).
    let mut reach = vec![false; t.len() + 1];
    reach[0] = true;
    for &(pc, literal) in &p {
        let mut next = vec![false; t.len() + 1];
        if pc == '%' && !literal {
            let mut any = false;
            for i in 0..=t.len() {
                any |= reach[i];
                next[i] = any;
            }
        } else {
            for i in 0..t.len() {
                if reach[i] && ((pc == '_' && !literal) || t[i] == pc) {
                    next[i + 1] = true;
                }
            }
        }
        reach = next;
    }
    reach[t.len()]
}

struct Acc {
    count: i64,
    sum: Option<Decimal>,
    min: Option<Datum>,
    max: Option<Datum>,
}

impl Acc {
    fn new() -> Self {
        Acc {
            count: 0,
            sum: None,
            min: None,
            max: None,
        }
    }

    fn add(&mut self, v: &Datum) {
        if v.is_null() {
            return;
        }
        self.count += 1;
        if let Some(d) = v.decimal() {
            self.sum = Some(self.sum.unwrap_or_default().saturating_add(d));
        }
        if self
            .min
            .as_ref()
            .is_none_or(|m| v.compare(m) == Some(Ordering::Less))
        {
            self.min = Some(v.clone());
        }
        if self
            .max
            .as_ref()
            .is_none_or(|m| v.compare(m) == Some(Ordering::Greater))
        {
            self.max = Some(v.clone());
        }
    }

    fn value(&self, kind: AggKind, rows: i64, star: bool) -> Datum {
        match kind {
            AggKind::Count => Datum::Int(if star { rows } else { self.count }),
            AggKind::Sum => self.sum.map_or(Datum::Null, Datum::Numeric),
            AggKind::Avg => match (self.sum, self.count) {
                (Some(s), n) if n > 0 => Datum::Numeric(
                    s.checked_div(Decimal::from(n))
                        .map(|d| d.round_dp(16).normalize())
                        .unwrap_or_default(),
                ),
                _ => Datum::Null,
            },
            AggKind::Min => self.min.clone().unwrap_or(Datum::Null),
            AggKind::Max => self.max.clone().unwrap_or(Datum::Null),
        }
    }
}

/// Runs `plan` over `rows` (already filtered by its `WHERE`).
pub(crate) fn run(plan: &SelectPlan, rows: Vec<Vec<Datum>>) -> Rows {
    // `SELECT *` (each column once, in order): the rows as they are.
    let whole = |rows: &[Vec<Datum>]| {
        rows.iter().all(|r| r.len() == plan.outputs.len())
            && plan
                .outputs
                .iter()
                .enumerate()
                .all(|(i, o)| matches!(o.expr, Scalar::Col(c) if c == i))
    };
    let mut out: Vec<Vec<Datum>> = if plan.aggregates() {
        aggregate(plan, rows)
    } else if whole(&rows) {
        rows
    } else {
        rows.into_iter()
            .map(|row| {
                plan.outputs
                    .iter()
                    .map(|o| match &o.expr {
                        Scalar::Col(c) => row.get(*c).cloned().unwrap_or(Datum::Null),
                        Scalar::Lit(d) => d.clone(),
                        Scalar::Agg { .. } => Datum::Null,
                    })
                    .collect()
            })
            .collect()
    };
    if plan.distinct {
        let mut seen = std::collections::HashSet::new();
        out.retain(|r| {
            seen.insert(
                r.iter()
                    .take(plan.visible)
                    .map(Datum::group_key)
                    .collect::<Vec<_>>(),
            )
        });
    }
    if !plan.order.is_empty() {
        out.sort_by(|a, b| {
            for &(i, desc, nulls_first) in &plan.order {
                let (x, y) = (&a[i], &b[i]);
                let o = match (x.is_null(), y.is_null()) {
                    (true, true) => Ordering::Equal,
                    (true, false) => {
                        if nulls_first {
                            Ordering::Less
                        } else {
                            Ordering::Greater
                        }
                    }
                    (false, true) => {
                        if nulls_first {
                            Ordering::Greater
                        } else {
                            Ordering::Less
                        }
                    }
                    _ => {
                        let o = x.sort_cmp(y);
                        if desc {
                            o.reverse()
                        } else {
                            o
                        }
                    }
                };
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        });
    }
    let rows = out
        .into_iter()
        .skip(plan.offset)
        .take(plan.limit.unwrap_or(usize::MAX))
        .map(|mut r| {
            r.truncate(plan.visible);
            r
        })
        .collect();
    Rows {
        columns: plan
            .outputs
            .iter()
            .take(plan.visible)
            .map(|o| (o.name.clone(), o.ty))
            .collect(),
        rows,
    }
}

fn aggregate(plan: &SelectPlan, rows: Vec<Vec<Datum>>) -> Vec<Vec<Datum>> {
    let mut groups: Vec<(Vec<Datum>, i64, Vec<Acc>)> = Vec::new();
    let mut index: HashMap<Vec<String>, usize> = HashMap::new();
    for row in rows {
        let key: Vec<Datum> = plan
            .group_by
            .iter()
            .map(|c| row.get(*c).cloned().unwrap_or(Datum::Null))
            .collect();
        let k: Vec<String> = key.iter().map(Datum::group_key).collect();
        let at = *index.entry(k).or_insert_with(|| {
            groups.push((
                key.clone(),
                0,
                plan.outputs.iter().map(|_| Acc::new()).collect(),
            ));
            groups.len() - 1
        });
        let Some((_, n, accs)) = groups.get_mut(at) else {
            continue;
        };
        *n += 1;
        for (o, acc) in plan.outputs.iter().zip(accs.iter_mut()) {
            if let Scalar::Agg { arg: Some(c), .. } = &o.expr {
                acc.add(row.get(*c).unwrap_or(&Datum::Null));
            }
        }
    }
    // An aggregate without GROUP BY answers one row even over no rows.
    if groups.is_empty() && plan.group_by.is_empty() {
        groups.push((
            Vec::new(),
            0,
            plan.outputs.iter().map(|_| Acc::new()).collect(),
        ));
    }
    groups
        .into_iter()
        .map(|(key, n, accs)| {
            plan.outputs
                .iter()
                .zip(&accs)
                .map(|(o, acc)| match &o.expr {
                    Scalar::Col(c) => plan
                        .group_by
                        .iter()
                        .position(|g| g == c)
                        .and_then(|i| key.get(i).cloned())
                        .unwrap_or(Datum::Null),
                    Scalar::Lit(d) => d.clone(),
                    Scalar::Agg { kind, arg } => acc.value(*kind, n, arg.is_none()),
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_follows_sql() {
        assert!(like("SFO", "SF%"));
        assert!(like("SFO", "S_O"));
        assert!(!like("SFO", "sf%"));
        assert!(like("50%", "50\\%"));
        assert!(!like("500", "50\\%"));
        assert!(like("", "%"));
    }

    #[test]
    fn null_matches_no_comparison() {
        let c = Cond::Cmp {
            col: 0,
            op: CmpOp::Ne,
            value: Datum::Int(1),
        };
        assert!(!matches(&c, &[Datum::Null]));
        assert!(matches(&Cond::Not(Box::new(c.clone())), &[Datum::Int(1)]));
        assert!(!matches(&Cond::Not(Box::new(c)), &[Datum::Null]));
    }
}
