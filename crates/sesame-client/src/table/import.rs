//! Importing records from files: CSV (the first line names the columns)
//! and JSON Lines (one object per line).
//!
//! An import reads the file twice: the first pass checks every record
//! (types, range domains, keys) and counts them, so a bad line is an error
//! naming it before anything is saved or sent; the second inserts them in
//! batches. A record is named by its key field, or, without one, by the
//! file's name and its line (`flights.csv:42`), so running the same
//! import again after an interruption skips what is already there and
//! inserts each record exactly once. Columns the schema does not name are
//! skipped and reported.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;

use crate::error::{ClientError, Result};
use crate::session::{Phase, Progress};
use crate::table::{InsertReport, Record, Table};

/// Records per insertion of an import (a static keyword scheme, and a
/// table with an empty range index, take the whole file in one).
pub const IMPORT_BATCH: usize = 20_000;

/// The format of a file to import.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated values with a header line.
    Csv,
    /// One JSON object per line.
    JsonLines,
}

impl Format {
    /// The format a file's extension names (`.csv`; `.jsonl`, `.ndjson`
    /// or `.json`).
    pub fn of(path: &Path) -> Result<Format> {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("csv") => Ok(Format::Csv),
            Some("jsonl" | "ndjson" | "json") => Ok(Format::JsonLines),
            _ => Err(ClientError::InvalidArgument(format!(
                "{}: give the format (csv or jsonl): the extension does not say",
                path.display()
            ))),
        }
    }

    /// Parses `csv` or `jsonl`.
    pub fn parse(text: &str) -> Result<Format> {
        match text {
            "csv" => Ok(Format::Csv),
            "jsonl" | "ndjson" | "json" => Ok(Format::JsonLines),
            other => Err(ClientError::InvalidArgument(format!(
                "format {other:?} is not csv or jsonl"
            ))),
        }
    }
}

/// What an import did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Records read from the file.
    pub read: usize,
    /// What the insertions did, summed.
    pub insert: InsertReport,
    /// Columns of the file that the schema does not name (skipped).
    pub ignored_columns: Vec<String>,
}

/// One record of a file: its line and its cells.
struct Row {
    line: u64,
    cells: Vec<(String, String)>,
}

/// Reads the rows of a file one at a time.
fn each_row(
    path: &Path,
    format: Format,
    each: &mut dyn FnMut(Row) -> Result<()>,
) -> Result<BTreeSet<String>> {
    let file = std::fs::File::open(path).map_err(|e| ClientError::io("read", path, &e))?;
    let at = |line: u64, why: String| {
        ClientError::InvalidArgument(format!("{}:{line}: {why}", path.display()))
    };
    let mut columns = BTreeSet::new();
    match format {
        Format::Csv => {
            let mut reader = csv::ReaderBuilder::new()
                .has_headers(true)
                .flexible(false)
                .from_reader(BufReader::new(file));
            let header: Vec<String> = reader
                .headers()
                .map_err(|e| at(1, e.to_string()))?
                .iter()
                .map(|h| h.trim().to_owned())
                .collect();
            let mut seen = BTreeSet::new();
            for h in &header {
                if !seen.insert(h.clone()) {
                    return Err(at(1, format!("column {h:?} appears twice")));
                }
            }
            columns.extend(header.iter().cloned());
            let mut record = csv::StringRecord::new();
            loop {
                match reader.read_record(&mut record) {
                    Ok(false) => break,
                    Ok(true) => {
                        let line = record.position().map_or(0, |p| p.line());
                        let cells = header
                            .iter()
                            .zip(record.iter())
                            .map(|(h, v)| (h.clone(), v.to_owned()))
                            .collect();
                        each(Row { line, cells })?;
                    }
                    Err(e) => {
                        let line = e.position().map_or(0, |p| p.line());
                        return Err(at(line, e.to_string()));
                    }
                }
            }
        }
        Format::JsonLines => {
            for (n, line) in BufReader::new(file).lines().enumerate() {
                let number = n as u64 + 1;
                let line = line.map_err(|e| ClientError::io("read", path, &e))?;
                if line.trim().is_empty() {
                    continue;
                }
                let value: serde_json::Value = serde_json::from_str(&line)
                    .map_err(|e| at(number, format!("not JSON: {e}")))?;
                let serde_json::Value::Object(object) = value else {
                    return Err(at(number, "a line must hold one JSON object".into()));
                };
                let mut cells = Vec::with_capacity(object.len());
                for (k, v) in object {
                    let text = match v {
                        serde_json::Value::Null => continue,
                        serde_json::Value::String(s) => s,
                        serde_json::Value::Number(n) => n.to_string(),
                        serde_json::Value::Bool(b) => b.to_string(),
                        _ => {
                            return Err(at(
                                number,
                                format!("field {k:?}: nested values are not supported"),
                            ))
                        }
                    };
                    columns.insert(k.clone());
                    cells.push((k, text));
                }
                each(Row {
                    line: number,
                    cells,
                })?;
            }
        }
    }
    Ok(columns)
}

impl Table {
    /// Imports the records of a file (see the module documentation).
    /// `progress` hears of the checking pass ([`Phase::Reading`]) and of
    /// the insertions.
    pub fn import(
        &mut self,
        path: &Path,
        format: Format,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ImportReport> {
        let base = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "import".into());
        let known: BTreeSet<String> = self
            .schema()
            .fields
            .iter()
            .map(|f| f.name.clone())
            .collect();
        let record_of = |table: &mut Table, row: &Row| -> Result<Record> {
            let cells = row
                .cells
                .iter()
                .filter(|(k, _)| known.contains(k))
                .map(|(k, v)| (k.as_str(), v.as_str()));
            table
                .record_from_cells(cells, Some(format!("{base}:{}", row.line)))
                .map_err(|e| {
                    ClientError::InvalidArgument(format!("{}:{}: {e}", path.display(), row.line))
                })
        };

        // First pass: check everything, count.
        let mut total = 0u64;
        let mut keys = BTreeSet::new();
        let has_key = self.schema().key.is_some();
        let columns = each_row(path, format, &mut |row| {
            let record = record_of(self, &row)?;
            self.range_values(&record).map_err(|e| {
                ClientError::InvalidArgument(format!("{}:{}: {e}", path.display(), row.line))
            })?;
            if has_key && !keys.insert(record.key.clone()) {
                return Err(ClientError::InvalidArgument(format!(
                    "{}:{}: key {:?} appears twice in the file",
                    path.display(),
                    row.line,
                    record.key
                )));
            }
            total += 1;
            if total.is_multiple_of(10_000) {
                progress(Progress {
                    phase: Phase::Reading,
                    done: total,
                    total: 0,
                });
            }
            Ok(())
        })?;
        drop(keys);
        let ignored_columns: Vec<String> = columns.difference(&known).cloned().collect();

        // Second pass: insert in batches.
        // One batch when a range index is empty: its protocol's `build`
        // then takes every record at once (Kerschbaum-Tueno's insertions
        // rewrite its whole array, its build writes it once).
        let batch_size = if self.keyword_index().rebuilds() || self.has_empty_range() {
            usize::MAX
        } else {
            IMPORT_BATCH
        };
        let mut report = ImportReport {
            read: 0,
            insert: InsertReport::default(),
            ignored_columns,
        };
        let mut batch = Vec::new();
        let mut flush = |table: &mut Table, batch: &mut Vec<Record>, done: usize| -> Result<()> {
            let r = table.insert(std::mem::take(batch), &mut *progress)?;
            report.insert.inserted += r.inserted;
            report.insert.replaced += r.replaced;
            report.insert.unchanged += r.unchanged;
            report.insert.rebuilt |= r.rebuilt;
            report.insert.resumed += r.resumed;
            progress(Progress {
                phase: Phase::Imported,
                done: done as u64,
                total,
            });
            Ok(())
        };
        let mut read = 0usize;
        each_row(path, format, &mut |row| {
            batch.push(record_of(self, &row)?);
            read += 1;
            if batch.len() >= batch_size {
                flush(self, &mut batch, read)?;
            }
            Ok(())
        })?;
        if !batch.is_empty() {
            flush(self, &mut batch, read)?;
        }
        report.read = read;
        Ok(report)
    }
}
