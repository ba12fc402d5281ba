//! Result sets: what an experiment measured, in rows of parameters and
//! figures, with the paper's reported figures beside ours.
//!
//! A [`ResultSet`] serializes to JSON (exactly, and back) and to a CSV
//! table (one column per parameter, figure and paper figure), and prints as
//! a plain-text aligned table.

use std::fmt::{self, Write as _};

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::BenchError;

/// A parameter value: an integer, a real number or a word.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// An integer (sizes, counts, block lengths).
    Int(i64),
    /// A real number.
    Float(f64),
    /// A word (scheme name, store backend, data set).
    Text(String),
}

impl Value {
    /// The value as a number, if it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            Value::Text(_) => None,
        }
    }

    /// Reads a value back from its text form: an integer, else a real
    /// number, else a word.
    pub fn parse(text: &str) -> Value {
        if let Ok(i) = text.parse::<i64>() {
            Value::Int(i)
        } else if let Some(f) = text.parse::<f64>().ok().filter(|f| f.is_finite()) {
            Value::Float(f)
        } else {
            Value::Text(text.to_owned())
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Text(s) => f.write_str(s),
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Text(s)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<usize> for Value {
    fn from(i: usize) -> Self {
        i64::try_from(i).map_or(Value::Text(i.to_string()), Value::Int)
    }
}

impl From<u64> for Value {
    fn from(i: u64) -> Self {
        i64::try_from(i).map_or(Value::Text(i.to_string()), Value::Int)
    }
}

impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}

/// Named values in insertion order; serializes as a JSON object whose keys
/// keep that order. Two `Fields` are equal when they map the same names to
/// equal values, in any order (as JSON objects are).
#[derive(Clone, Debug)]
pub struct Fields<T>(Vec<(String, T)>);

impl<T: PartialEq> PartialEq for Fields<T> {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len() && self.0.iter().all(|(n, v)| other.get(n) == Some(v))
    }
}

impl<T> Default for Fields<T> {
    fn default() -> Self {
        Fields(Vec::new())
    }
}

impl<T> Fields<T> {
    /// No fields.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `name` to `value`, in place if it is already there, else at the
    /// end.
    pub fn insert(&mut self, name: impl Into<String>, value: T) {
        let name = name.into();
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => *v = value,
            None => self.0.push((name, value)),
        }
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&T> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// The fields in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &T)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v))
    }

    /// The names in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(n, _)| n.as_str())
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no fields.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<T: Serialize> Serialize for Fields<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Fields<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for FieldsVisitor<T> {
            type Value = Fields<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of named values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Fields::new();
                while let Some((k, v)) = map.next_entry::<String, T>()? {
                    out.insert(k, v);
                }
                Ok(out)
            }
        }
        deserializer.deserialize_map(FieldsVisitor(std::marker::PhantomData))
    }
}

/// A figure the paper reported, shown beside ours.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PaperFigure {
    /// The name of our figure it compares to (a key of [`Row::figures`]).
    pub name: String,
    /// The paper's value.
    pub value: f64,
    /// Its unit ("ms", "KB", "I/O per result", ...).
    pub unit: String,
    /// Where the paper says it, e.g. "seed 004 Table 4".
    pub source: String,
    /// Whether the figure is the same at every scale: a per-operation
    /// count or a size whose configuration the row's parameters fix (e.g.
    /// reads per search at a given result size), not one that grows with
    /// the run's data size. Such figures are compared below full scale too.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub any_scale: bool,
    /// Why ours departs from the paper's, or why the two cannot be
    /// compared: the fidelity table's `why` column for a row that differs
    /// or is not comparable (see [`Row::why`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// How the figure grows with the data size, the paper's law: with it,
    /// a run below the paper's size is compared at the paper's size (see
    /// [`Growth`] and [`Row::grows`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub growth: Option<Growth>,
    /// For a time of a scheme or configuration the paper did not time,
    /// shown beside a paper figure of another one: the source of the
    /// paper's times (a table or figure of the same experiment) whose
    /// machine factor it is compared with, without entering that factor
    /// (see [`Row::ratio_to`] and [`crate::fidelity::comparisons`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_to: Option<String>,
}

pub use crate::growth::{Growth, Law};

/// The optional columns of a paper figure in a table, after its value,
/// unit and source: the suffix, and the figure's cell (`None`: empty).
type Extra = (&'static str, fn(&PaperFigure) -> Option<String>);
const PAPER_EXTRAS: [Extra; 4] = [
    (".any_scale", |x| x.any_scale.then(|| "yes".to_owned())),
    (".why", |x| x.why.clone()),
    (".growth", |x| x.growth.as_ref().map(Growth::to_cell)),
    (".ratio_to", |x| x.ratio_to.clone()),
];

/// One measured configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// What was varied: scheme, store, sizes.
    pub params: Fields<Value>,
    /// What was measured (times in ms, sizes in bytes, counts).
    pub figures: Fields<f64>,
    /// The paper's figures for the same configuration, if it reported any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paper: Vec<PaperFigure>,
}

impl Row {
    /// An empty row.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets a parameter.
    pub fn param(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.params.insert(name, value.into());
        self
    }

    /// Sets a figure; a value that is not finite is left out (JSON has no
    /// NaN).
    pub fn set(&mut self, name: &str, value: f64) -> &mut Self {
        if value.is_finite() {
            self.figures.insert(name, value);
        }
        self
    }

    /// Adds the paper's figure for this row.
    pub fn paper(&mut self, name: &str, value: f64, unit: &str, source: &str) -> &mut Self {
        self.paper.push(PaperFigure {
            name: name.to_owned(),
            value,
            unit: unit.to_owned(),
            source: source.to_owned(),
            any_scale: false,
            why: None,
            growth: None,
            ratio_to: None,
        });
        self
    }

    /// Says why ours departs from the paper's figure `name` (or cannot be
    /// compared with it), for every paper figure of that name in the row.
    pub fn why(&mut self, name: &str, why: &str) -> &mut Self {
        for p in self.paper.iter_mut().filter(|p| p.name == name) {
            p.why = Some(why.to_owned());
        }
        self
    }

    /// Compares the time `name` (of a scheme or configuration the paper
    /// did not time, beside the paper's figure of another) with the times
    /// of `source`: ours / paper divided by that group's machine factor,
    /// which this time does not enter (see [`PaperFigure::ratio_to`]).
    pub fn ratio_to(&mut self, name: &str, source: &str) -> &mut Self {
        for p in self.paper.iter_mut().filter(|p| p.name == name) {
            p.ratio_to = Some(source.to_owned());
        }
        self
    }

    /// As [`Row::paper`], for a figure that does not depend on the run's
    /// scale (see [`PaperFigure::any_scale`]).
    pub fn paper_any_scale(
        &mut self,
        name: &str,
        value: f64,
        unit: &str,
        source: &str,
    ) -> &mut Self {
        self.paper(name, value, unit, source);
        if let Some(p) = self.paper.last_mut() {
            p.any_scale = true;
        }
        self
    }

    /// Says how the paper's figure `name` grows with the data size, for
    /// every paper figure of that name in the row: our run has `ours` of
    /// `of` ("records"), the paper `paper`. The fidelity table then
    /// compares ours scaled to the paper's size by `law` (see [`Growth`]),
    /// at every scale.
    pub fn grows(&mut self, name: &str, law: Law, of: &str, ours: f64, paper: f64) -> &mut Self {
        for p in self.paper.iter_mut().filter(|p| p.name == name) {
            p.growth = Some(Growth {
                law,
                of: of.to_owned(),
                ours,
                paper,
                fixed: 0.0,
            });
        }
        self
    }

    /// As [`Row::grows`] with [`Law::AtMostLinear`]: the figure `name`
    /// never shrinks and grows at most linearly in `of` beyond `fixed`, a
    /// part of ours that does not grow (the results the row fixes).
    pub fn grows_at_most_linearly(
        &mut self,
        name: &str,
        fixed: f64,
        of: &str,
        ours: f64,
        paper: f64,
    ) -> &mut Self {
        self.grows(name, Law::AtMostLinear, of, ours, paper);
        for p in self.paper.iter_mut().filter(|p| p.name == name) {
            if let Some(g) = p.growth.as_mut() {
                g.fixed = fixed;
            }
        }
        self
    }

    /// The row's values of `params`, as text (empty where it has none).
    fn param_cells(&self, params: &[String]) -> Vec<String> {
        params
            .iter()
            .map(|p| self.params.get(p).map(Value::to_string).unwrap_or_default())
            .collect()
    }

    /// A parameter or figure as a number: parameters first.
    pub fn number(&self, name: &str) -> Option<f64> {
        self.params
            .get(name)
            .and_then(Value::as_f64)
            .or_else(|| self.figures.get(name).copied())
    }
}

/// A chart axis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Axis {
    /// Axis label, with its unit.
    pub label: String,
    /// Logarithmic scale.
    pub log: bool,
}

/// A line chart over the rows of a result set, drawn as SVG.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Chart {
    /// File stem: the chart is written as `<file>.svg`.
    pub file: String,
    /// Title above the chart.
    pub title: String,
    /// The parameter or figure on the x axis.
    pub x: String,
    /// The figures on the y axis (one line per figure and series).
    pub y: Vec<String>,
    /// Parameters whose values split the rows into lines.
    pub series: Vec<String>,
    /// Only rows whose parameters have these values are drawn.
    #[serde(default)]
    pub filter: Vec<(String, Value)>,
    /// The x axis.
    pub x_axis: Axis,
    /// The y axis.
    pub y_axis: Axis,
}

impl Chart {
    /// Whether `row` belongs on this chart.
    pub fn selects(&self, row: &Row) -> bool {
        self.filter
            .iter()
            .all(|(name, value)| row.params.get(name) == Some(value))
    }
}

/// Everything one experiment run produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResultSet {
    /// The experiment's registry name.
    pub experiment: String,
    /// Its title.
    pub title: String,
    /// The seed paper it reproduces (e.g. "seed 004: Bogatov, Kollios,
    /// Reyzin, VLDB 2019").
    pub seed_paper: String,
    /// The scale it ran at: `full`, `standard`, `quick` or `tiny`.
    pub scale: String,
    /// The random seed of data and workload.
    pub seed: u64,
    /// Remarks: skipped parts, stand-in data sets, deviations.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Figure names shown in the printed and HTML tables (all when empty);
    /// the JSON and CSV files have every figure.
    #[serde(default)]
    pub display: Vec<String>,
    /// The measurements.
    pub rows: Vec<Row>,
    /// Charts to draw.
    #[serde(default)]
    pub charts: Vec<Chart>,
}

/// A table of text cells, as in a CSV file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// Rows of cells, each as long as the header.
    pub rows: Vec<Vec<String>>,
}

const PAPER: &str = "paper.";

impl ResultSet {
    /// JSON text of the result set.
    pub fn to_json(&self) -> Result<String, BenchError> {
        serde_json::to_string_pretty(self).map_err(|e| BenchError::Format(e.to_string()))
    }

    /// Reads a result set from its JSON text.
    pub fn from_json(text: &str) -> Result<Self, BenchError> {
        serde_json::from_str(text).map_err(|e| BenchError::Format(e.to_string()))
    }

    /// Parameter names over all rows, in order of first appearance.
    pub fn param_names(&self) -> Vec<String> {
        union(self.rows.iter().map(|r| r.params.names()))
    }

    /// Figure names over all rows, in order of first appearance.
    pub fn figure_names(&self) -> Vec<String> {
        union(self.rows.iter().map(|r| r.figures.names()))
    }

    /// How many rows have the parameter `param` equal to `value`.
    pub fn rows_with(&self, param: &str, value: &str) -> usize {
        let value = Value::from(value);
        self.rows
            .iter()
            .filter(|r| r.params.get(param) == Some(&value))
            .count()
    }

    /// Names of the paper figures over all rows.
    pub fn paper_names(&self) -> Vec<String> {
        union(
            self.rows
                .iter()
                .map(|r| r.paper.iter().map(|p| p.name.as_str())),
        )
    }

    /// The full table: parameters, figures, then for each paper figure
    /// `paper.NAME`, `paper.NAME.unit` and `paper.NAME.source`, and
    /// `paper.NAME.any_scale` (`yes` or empty) where a row marks it so
    /// (see [`PaperFigure::any_scale`]), `paper.NAME.why` where a row
    /// gives a reason ([`PaperFigure::why`]), `paper.NAME.growth` where
    /// a row states a growth law ([`Growth::to_cell`]) and
    /// `paper.NAME.ratio_to` where a time is compared with another source's
    /// times ([`PaperFigure::ratio_to`]). Missing values are empty cells.
    pub fn to_table(&self) -> Table {
        let params = self.param_names();
        let figures = self.figure_names();
        let papers = self.paper_names();
        // Per paper figure, which optional columns some row fills.
        let extras: Vec<Vec<bool>> = papers
            .iter()
            .map(|p| {
                PAPER_EXTRAS
                    .iter()
                    .map(|(_, cell)| {
                        self.rows
                            .iter()
                            .any(|r| r.paper.iter().any(|x| &x.name == p && cell(x).is_some()))
                    })
                    .collect()
            })
            .collect();
        let mut header: Vec<String> = params.iter().chain(&figures).cloned().collect();
        for (p, has) in papers.iter().zip(&extras) {
            header.push(format!("{PAPER}{p}"));
            header.push(format!("{PAPER}{p}.unit"));
            header.push(format!("{PAPER}{p}.source"));
            for ((suffix, _), _) in PAPER_EXTRAS.iter().zip(has).filter(|(_, &h)| h) {
                header.push(format!("{PAPER}{p}{suffix}"));
            }
        }
        let rows = self
            .rows
            .iter()
            .map(|row| {
                let mut cells = row.param_cells(&params);
                cells.extend(
                    figures
                        .iter()
                        .map(|f| row.figures.get(f).map(f64::to_string).unwrap_or_default()),
                );
                for (p, has) in papers.iter().zip(&extras) {
                    let x = row.paper.iter().find(|x| &x.name == p);
                    match x {
                        Some(x) => {
                            cells.extend([x.value.to_string(), x.unit.clone(), x.source.clone()])
                        }
                        None => cells.extend([String::new(), String::new(), String::new()]),
                    }
                    for ((_, cell), _) in PAPER_EXTRAS.iter().zip(has).filter(|(_, &h)| h) {
                        cells.push(x.and_then(cell).unwrap_or_default());
                    }
                }
                cells
            })
            .collect();
        Table { header, rows }
    }

    /// CSV text of [`ResultSet::to_table`].
    pub fn to_csv(&self) -> String {
        self.to_table().to_csv()
    }

    /// Rebuilds rows from a table written by [`ResultSet::to_table`]:
    /// columns named in `params` are parameters, `paper.*` columns are paper
    /// figures, the others figures. Empty cells are missing values.
    pub fn rows_from_table(table: &Table, params: &[String]) -> Result<Vec<Row>, BenchError> {
        table
            .rows
            .iter()
            .map(|cells| {
                let mut row = Row::new();
                for (name, cell) in table.header.iter().zip(cells) {
                    if cell.is_empty() {
                        continue;
                    }
                    if params.contains(name) {
                        row.params.insert(name.clone(), Value::parse(cell));
                    } else if let Some(rest) = name.strip_prefix(PAPER) {
                        if rest.ends_with(".unit")
                            || rest.ends_with(".source")
                            || PAPER_EXTRAS
                                .iter()
                                .any(|(suffix, _)| rest.ends_with(suffix))
                        {
                            continue;
                        }
                        let find = |suffix: &str| {
                            let col = format!("{name}{suffix}");
                            table
                                .header
                                .iter()
                                .position(|h| *h == col)
                                .and_then(|i| cells.get(i))
                                .cloned()
                                .unwrap_or_default()
                        };
                        row.paper.push(PaperFigure {
                            name: rest.to_owned(),
                            value: parse_number(name, cell)?,
                            unit: find(".unit"),
                            source: find(".source"),
                            any_scale: find(".any_scale") == "yes",
                            why: Some(find(".why")).filter(|w| !w.is_empty()),
                            growth: Growth::from_cell(&find(".growth")),
                            ratio_to: Some(find(".ratio_to")).filter(|w| !w.is_empty()),
                        });
                    } else {
                        row.figures.insert(name.clone(), parse_number(name, cell)?);
                    }
                }
                Ok(row)
            })
            .collect()
    }

    /// The columns of the printed table: parameters, the displayed figures,
    /// and one `paper` column when a row has a paper figure.
    pub fn display_table(&self) -> Table {
        let params = self.param_names();
        let figures = if self.display.is_empty() {
            self.figure_names()
        } else {
            self.display.clone()
        };
        let with_paper = self.rows.iter().any(|r| !r.paper.is_empty());
        let mut header: Vec<String> = params.iter().chain(&figures).cloned().collect();
        if with_paper {
            header.push("paper".to_owned());
        }
        let rows = self
            .rows
            .iter()
            .map(|row| {
                let mut cells = row.param_cells(&params);
                cells.extend(figures.iter().map(|f| {
                    row.figures
                        .get(f)
                        .map(|&v| format_number(v))
                        .unwrap_or_default()
                }));
                if with_paper {
                    let paper: Vec<String> = row
                        .paper
                        .iter()
                        .map(|p| {
                            format!(
                                "{}={} {} ({})",
                                p.name,
                                format_number(p.value),
                                p.unit,
                                p.source
                            )
                        })
                        .collect();
                    cells.push(paper.join("; "));
                }
                cells
            })
            .collect();
        Table { header, rows }
    }

    /// The plain-text report: title, notes and the aligned table.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "== {}: {} ==", self.experiment, self.title);
        let _ = writeln!(
            out,
            "reproduces {}; scale {}, seed {}",
            self.seed_paper, self.scale, self.seed
        );
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        out.push_str(&self.display_table().to_aligned());
        out
    }
}

fn parse_number(column: &str, cell: &str) -> Result<f64, BenchError> {
    cell.parse()
        .map_err(|_| BenchError::Format(format!("column {column}: {cell:?} is not a number")))
}

fn union<'a, I, J>(lists: I) -> Vec<String>
where
    I: Iterator<Item = J>,
    J: Iterator<Item = &'a str>,
{
    let mut out: Vec<String> = Vec::new();
    for list in lists {
        for name in list {
            if !out.iter().any(|n| n == name) {
                out.push(name.to_owned());
            }
        }
    }
    out
}

/// A number for people: integers as such, others with four significant
/// digits.
pub fn format_number(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 1000.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        let digits = 3 - v.abs().log10().floor() as usize;
        format!("{v:.digits$}")
    } else if v.abs() >= 1e-4 {
        let digits = 3 + (-v.abs().log10()).ceil() as usize;
        format!("{v:.digits$}")
    } else {
        format!("{v:.3e}")
    }
}

impl Table {
    /// CSV text (RFC 4180: cells with a comma, quote or line break are
    /// quoted, quotes doubled; lines end with `\n`).
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        for line in std::iter::once(&self.header).chain(&self.rows) {
            let cells: Vec<String> = line.iter().map(|c| csv_cell(c)).collect();
            out.push_str(&cells.join(","));
            out.push('\n');
        }
        out
    }

    /// Parses CSV text: the first line is the header.
    pub fn from_csv(text: &str) -> Result<Self, BenchError> {
        let mut lines = parse_csv(text)?.into_iter();
        let header = lines.next().unwrap_or_default();
        let rows: Vec<Vec<String>> = lines.collect();
        if let Some(bad) = rows.iter().position(|r| r.len() != header.len()) {
            return Err(BenchError::Format(format!(
                "CSV line {} has {} cells, the header {}",
                bad + 2,
                rows[bad].len(),
                header.len()
            )));
        }
        Ok(Table { header, rows })
    }

    /// The table with columns padded to line up; numbers are right-aligned.
    pub fn to_aligned(&self) -> String {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|i| {
                std::iter::once(&self.header)
                    .chain(&self.rows)
                    .filter_map(|r| r.get(i))
                    .map(|c| c.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let numeric: Vec<bool> = (0..self.header.len())
            .map(|i| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .all(|c| c.is_empty() || c.parse::<f64>().is_ok())
            })
            .collect();
        let mut out = String::new();
        let line = |cells: &[String], out: &mut String| {
            let mut text = String::new();
            for (i, c) in cells.iter().enumerate() {
                let w = widths.get(i).copied().unwrap_or(0);
                if i > 0 {
                    text.push_str("  ");
                }
                if numeric.get(i).copied().unwrap_or(false) {
                    let _ = write!(text, "{c:>w$}");
                } else {
                    let _ = write!(text, "{c:<w$}");
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(&self.header, &mut out);
        let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
        line(&rule, &mut out);
        for r in &self.rows {
            line(r, &mut out);
        }
        out
    }
}

/// `c` as a CSV cell: quoted (quotes doubled) where it holds a comma, a
/// quote or a line break.
pub(crate) fn csv_cell(c: &str) -> String {
    if c.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", c.replace('"', "\"\""))
    } else {
        c.to_owned()
    }
}

/// Parses RFC 4180 CSV into lines of cells.
pub(crate) fn parse_csv(text: &str) -> Result<Vec<Vec<String>>, BenchError> {
    let mut lines = Vec::new();
    let mut line = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    let mut any = false;
    while let Some(c) = chars.next() {
        any = true;
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    cell.push('"');
                }
                '"' => quoted = false,
                c => cell.push(c),
            }
            continue;
        }
        match c {
            '"' if cell.is_empty() => quoted = true,
            ',' => line.push(std::mem::take(&mut cell)),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                line.push(std::mem::take(&mut cell));
                lines.push(std::mem::take(&mut line));
                any = false;
            }
            c => cell.push(c),
        }
    }
    if quoted {
        return Err(BenchError::Format("CSV ends inside a quoted cell".into()));
    }
    if any {
        line.push(cell);
        lines.push(line);
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ResultSet {
        let mut a = Row::new()
            .param("scheme", "pibas")
            .param("n", 1000usize)
            .param("ratio", 0.5);
        a.set("setup_ms", 12.25).set("bytes_written", 64000.0);
        a.paper("setup_ms", 10.0, "ms", "seed 004 Table 4, \"quoted\"");
        let mut b = Row::new()
            .param("scheme", "2lev, packed")
            .param("n", 10usize);
        b.set("setup_ms", 0.1 + 0.2).set("store_reads", 3.0);
        b.set("nan", f64::NAN);
        ResultSet {
            experiment: "demo".into(),
            title: "Demo".into(),
            seed_paper: "seed 004".into(),
            scale: "tiny".into(),
            seed: 7,
            notes: vec!["a note".into()],
            display: vec!["setup_ms".into()],
            rows: vec![a, b],
            charts: vec![Chart {
                file: "setup".into(),
                title: "Setup".into(),
                x: "n".into(),
                y: vec!["setup_ms".into()],
                series: vec!["scheme".into()],
                filter: vec![("ratio".into(), Value::Float(0.5))],
                x_axis: Axis {
                    label: "pairs".into(),
                    log: true,
                },
                y_axis: Axis {
                    label: "ms".into(),
                    log: false,
                },
            }],
        }
    }

    #[test]
    fn json_round_trip_keeps_order_and_types() {
        let rs = sample();
        let json = rs.to_json().unwrap();
        let back = ResultSet::from_json(&json).unwrap();
        assert_eq!(back, rs);
        assert!(json.find("\"scheme\"").unwrap() < json.find("\"ratio\"").unwrap());
        assert!(back.rows[1].figures.get("nan").is_none());
        assert_eq!(back.rows[0].params.get("n"), Some(&Value::Int(1000)));
    }

    #[test]
    fn csv_round_trip() {
        let rs = sample();
        let csv = rs.to_csv();
        let table = Table::from_csv(&csv).unwrap();
        assert_eq!(table, rs.to_table());
        assert_eq!(
            table.header,
            [
                "scheme",
                "n",
                "ratio",
                "setup_ms",
                "bytes_written",
                "store_reads",
                "paper.setup_ms",
                "paper.setup_ms.unit",
                "paper.setup_ms.source"
            ]
        );
        let rows = ResultSet::rows_from_table(&table, &rs.param_names()).unwrap();
        assert_eq!(rows, rs.rows);
        // A figure compared at every scale keeps its mark through the CSV.
        let mut marked = rs.clone();
        marked.rows[1].paper_any_scale("store_reads", 4.0, "reads", "Table 1");
        let table = Table::from_csv(&marked.to_csv()).unwrap();
        assert!(table
            .header
            .contains(&"paper.store_reads.any_scale".to_owned()));
        let rows = ResultSet::rows_from_table(&table, &marked.param_names()).unwrap();
        assert_eq!(rows, marked.rows);
        assert!(rows[1].paper[0].any_scale && !rows[0].paper[0].any_scale);
    }

    #[test]
    fn csv_parser_edges() {
        let t = parse_csv("a,\"b,\"\"c\"\"\",\r\n\"x\ny\",,z").unwrap();
        assert_eq!(t, vec![vec!["a", "b,\"c\"", ""], vec!["x\ny", "", "z"]]);
        assert!(parse_csv("\"open").is_err());
        assert!(Table::from_csv("a,b\n1\n").is_err());
    }

    #[test]
    fn text_table_is_aligned() {
        let text = sample().to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("demo"));
        let header = lines.iter().position(|l| l.starts_with("scheme")).unwrap();
        // Every column starts at the same offset on the header and rule lines.
        assert!(lines[header + 1].starts_with("------------  ----"));
        assert!(text.contains("setup_ms=10 ms (seed 004 Table 4"));
        assert!(text.contains("0.3000"));
    }

    #[test]
    fn numbers_for_people() {
        assert_eq!(format_number(1234.0), "1234");
        assert_eq!(format_number(1234.56), "1234.6");
        assert_eq!(format_number(12.3456), "12.35");
        assert_eq!(format_number(0.012345), "0.01235");
        assert_eq!(format_number(1.5e-7), "1.500e-7");
    }
}
