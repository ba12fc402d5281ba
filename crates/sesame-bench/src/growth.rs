//! How a paper figure grows with the data size: the paper's law
//! ([`Law`]) and the two sizes ([`Growth`]), by which the fidelity table
//! compares a figure measured below the paper's size at the paper's size
//! (see [`crate::fidelity::comparisons`]).

use serde::{Deserialize, Serialize};

/// How a figure grows with the data size `n`, as the paper states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Law {
    /// It does not grow: the same at every size.
    Constant,
    /// `O(log n)`.
    Log,
    /// `O(log² n)`.
    LogSquared,
    /// `O(n)`.
    Linear,
    /// It never shrinks as `n` grows, by how much is not stated: ours
    /// already above the paper's band at a smaller size differs at the
    /// paper's size; below it, it cannot be judged.
    NonDecreasing,
    /// It never shrinks as `n` grows and grows at most linearly beyond a
    /// part that does not grow ([`Growth::fixed`]): at the paper's size
    /// ours lies between ours as measured and `fixed + (ours - fixed)
    /// paper / ours` (e.g. a Bloom filter's false positives, at a fixed
    /// rate per document, beside the results the row fixes). Judged when
    /// the whole range is on one side of the band or inside it.
    AtMostLinear,
}

impl Law {
    /// `O(...)` as the paper writes it.
    pub fn name(self) -> &'static str {
        match self {
            Law::Constant => "O(1)",
            Law::Log => "O(log n)",
            Law::LogSquared => "O(log\u{b2} n)",
            Law::Linear => "O(n)",
            Law::NonDecreasing => "non-decreasing in n",
            Law::AtMostLinear => "non-decreasing, at most O(n)",
        }
    }

    fn at(self, n: f64) -> f64 {
        match self {
            Law::Constant | Law::NonDecreasing | Law::AtMostLinear => 1.0,
            Law::Log => n.max(2.0).log2(),
            Law::LogSquared => n.max(2.0).log2().powi(2),
            Law::Linear => n,
        }
    }
}

/// A figure measured at `ours` of some size (records, pairs, insertions,
/// documents: `of`) and given by the paper at `paper`, with the law by
/// which it grows between the two.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Growth {
    /// The law.
    pub law: Law,
    /// What `n` counts ("records", "pairs", ...).
    pub of: String,
    /// Our run's `n`.
    pub ours: f64,
    /// The paper's `n`.
    pub paper: f64,
    /// The part of ours that does not grow with `n`, for
    /// [`Law::AtMostLinear`] (0 otherwise).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fixed: f64,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

impl Growth {
    /// What ours is multiplied by to stand at the paper's size: `f(paper)
    /// / f(ours)`; `None` for [`Law::NonDecreasing`] below the paper's size
    /// or a size that is not positive.
    pub fn factor(&self) -> Option<f64> {
        if !(self.ours > 0.0 && self.paper > 0.0) {
            return None;
        }
        if matches!(self.law, Law::NonDecreasing | Law::AtMostLinear) && self.ours < self.paper {
            return None;
        }
        Some(self.law.at(self.paper) / self.law.at(self.ours))
    }

    /// Where `measured` (ours at our size) lies at the paper's size, low
    /// and high: one value by [`Growth::factor`]; for [`Law::NonDecreasing`]
    /// from `measured` up, without bound; for [`Law::AtMostLinear`] up to
    /// `fixed + (measured - fixed) paper / ours`. `None` for a size that is
    /// not positive.
    pub fn range(&self, measured: f64) -> Option<(f64, f64)> {
        if let Some(f) = self.factor() {
            return Some((measured * f, measured * f));
        }
        if !(self.ours > 0.0 && self.paper > 0.0) {
            return None;
        }
        match self.law {
            Law::AtMostLinear => {
                let grows = (measured - self.fixed).max(0.0);
                Some((measured, measured - grows + grows * self.paper / self.ours))
            }
            _ => Some((measured, f64::INFINITY)),
        }
    }

    /// As a table cell: `LAW OF OURS PAPER` (`log records 40000 247000`),
    /// and `fixed F` after it where a part does not grow.
    pub fn to_cell(&self) -> String {
        let law = serde_json::to_value(self.law)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let fixed = if self.fixed == 0.0 {
            String::new()
        } else {
            format!(" fixed {}", self.fixed)
        };
        format!("{law} {} {} {}{fixed}", self.of, self.ours, self.paper)
    }

    /// Reads [`Growth::to_cell`]'s text; `None` for an empty or malformed
    /// cell.
    pub fn from_cell(cell: &str) -> Option<Growth> {
        let mut words: Vec<&str> = cell.split_whitespace().collect();
        let mut fixed = 0.0;
        if let [.., "fixed", f] = words.as_slice() {
            fixed = f.parse().ok()?;
            words.truncate(words.len() - 2);
        }
        let [law, of @ .., ours, paper] = words.as_slice() else {
            return None;
        };
        Some(Growth {
            law: serde_json::from_value(serde_json::Value::from(*law)).ok()?,
            of: of.join(" "),
            ours: ours.parse().ok()?,
            paper: paper.parse().ok()?,
            fixed,
        })
    }

    /// The scaling in words, for the fidelity table's `scaled` column.
    pub fn describe(&self) -> String {
        let f = match (self.factor(), self.range(1.0)) {
            (Some(f), _) => format!(": x{f:.3}"),
            (None, Some((_, hi))) if self.law == Law::AtMostLinear && self.fixed == 0.0 => {
                format!(": x1 to x{hi:.3}")
            }
            _ => String::new(),
        };
        let beyond = if self.fixed == 0.0 {
            String::new()
        } else {
            format!(" beyond {}", self.fixed)
        };
        format!(
            "{}{beyond} from {} to the paper's {} {}{f}",
            self.law.name(),
            self.ours,
            self.paper,
            self.of
        )
    }
}
