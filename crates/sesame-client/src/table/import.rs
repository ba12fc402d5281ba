//! Importing records from files: CSV (the first line names the columns)
//! and JSON Lines (one object per line).
//!
//! An import reads the file twice: the first pass checks every record
//! (types, range domains, keys, sizes) and counts them, so a bad line is
//! an error naming the file and line before anything is saved or sent;
//! the second inserts them in batches, the file read and its records
//! made on a thread of its own one batch ahead of the batch being
//! inserted (at most that one batch more in memory). In the first pass
//! too the file is read and split into rows on a thread of its own, a
//! few chunks of rows ahead of the checks, so that both passes use two
//! cores; the checks see the rows in the file's order and the first bad
//! line is still the error (tested by
//! `a_pass_read_ahead_sees_the_rows_in_order_up_to_the_first_error`). Running the same import again
//! after an interruption skips what is already there and inserts each
//! record exactly once; an import the server cut off says so
//! ([`ClientError::ImportInterrupted`]). Columns the schema does not name
//! are skipped and reported.
//!
//! A record is named by its key field. In a table without one, the
//! records of a file are named after the file and their content:
//! `NAME#SOURCE:ROW`, where `NAME` is the file's name, `SOURCE` a keyed
//! digest of the file's canonical path, and `ROW` a keyed digest of the
//! record's values, with `.k` added for the k-th repeat of the same
//! values in the file. Both digests are HMAC-SHA256 under the table's
//! naming key: random 32 bytes drawn when the table is created, kept in
//! its sealed state (shared by the profile's devices) and carried over by
//! a rotation of the master key, so that the same file names the same
//! records on every device and under every master key (a table made by
//! a build before naming keys uses the key its profile's state key
//! derives, which a rotation then carries over in the same way; tested
//! in `tests/master_key.rs`).
//! Files of the same name in other folders are other sources and never
//! replace each other's records; the same file imported again converges
//! to it: rows it still holds are unchanged, new or edited rows are
//! inserted, and the records of that source whose rows the file no longer
//! holds are deleted ([`ImportReport::removed`]). A file moved or renamed
//! is another source. Records named by earlier builds after the file's
//! name and line (`flights.csv:42`) that hold the same values as that line
//! are taken as this import's and renamed. The format is tested in
//! `tests/import.rs`.
//!
//! The repeats that name rows without a key, and the check of a key
//! given twice, keep digests in sorted runs on disk, not maps of the
//! file's rows: memory bounded whatever the file's size (`naming.rs`).
//!
//! CSV is read as RFC 4180 with the `csv` crate's leniency, except that a
//! quoted cell never closed (which would swallow the rest of the file) is
//! refused; JSON Lines refuses an object that names a member twice. A
//! UTF-8 byte-order mark at the start of the file is skipped in both.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::{mpsc, Arc};

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use sesame_core::wire;
use sesame_crypto::hash::KeyedHash;

use crate::error::{ClientError, Result};
use crate::session::{Phase, Progress};
use crate::state::DocumentInfo;
use crate::table::write::record_values;
use crate::table::{InsertReport, Record, Schema, Table};

mod naming;
use naming::{Keys, Naming};

/// Records per insertion of an import (a static keyword scheme takes
/// the whole file in one), unless `SESAME_IMPORT_BATCH` says otherwise
/// (the kill tests import in small batches, so that a kill falls between
/// two of them).
pub const IMPORT_BATCH: usize = 20_000;

/// A positive count from the environment variable `var`, else
/// `default` (unset or empty); `what` says what it counts, for the error
/// when it is not a positive whole number.
fn env_count(var: &str, default: usize, what: &str) -> Result<usize> {
    match std::env::var(var) {
        Err(std::env::VarError::NotPresent) => Ok(default),
        Ok(v) if v.trim().is_empty() => Ok(default),
        Ok(v) => match v.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(ClientError::InvalidArgument(format!(
                "{var}={v:?} is not a positive whole number ({what}; unset it for {default})"
            ))),
        },
        Err(std::env::VarError::NotUnicode(_)) => Err(ClientError::InvalidArgument(format!(
            "{var} is not valid UTF-8"
        ))),
    }
}

/// redb's page cache of the store an import opens (`sesame import`
/// sets it before the profile is opened): 32 MiB instead of the store's
/// 128 MiB. An import writes pages far more than it reads them back, and
/// the larger cache was the largest bounded part of its peak: the
/// flights' peak resident set 416 MB with 128 MiB, 287 to 294 MB with
/// 32 MiB, a generated million rows 437 to 439 MB against 294 to 313
/// MB, at no more CPU time (`docs/performance.md`, "An import's page
/// cache").
pub const IMPORT_CACHE_BYTES: usize = 32 << 20;

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
    /// Records of an earlier import of the same file (a table without
    /// a key) that the file no longer holds, deleted.
    pub removed: usize,
}

/// One record of a file: its line and its cells, of the columns the
/// schema names (a column's name shared by every row).
struct Row {
    line: u64,
    cells: Vec<(Arc<str>, String)>,
}

/// Reads the rows of a file one at a time, keeping the cells of the
/// columns in `known`; returns every column the file names.
fn each_row(
    path: &Path,
    format: Format,
    known: &BTreeSet<String>,
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
            // The columns kept, by position.
            let kept: Vec<(usize, Arc<str>)> = header
                .iter()
                .enumerate()
                .filter(|(_, h)| known.contains(*h))
                .map(|(i, h)| (i, Arc::from(h.as_str())))
                .collect();
            let mut record = csv::StringRecord::new();
            // The last record read, held back until the next one shows
            // that its quotes closed (or the end of the file is checked).
            let mut held: Option<(Row, u64)> = None;
            loop {
                match reader.read_record(&mut record) {
                    Ok(false) => break,
                    Ok(true) => {
                        let (line, byte) =
                            record.position().map_or((0, 0), |p| (p.line(), p.byte()));
                        let cells = kept
                            .iter()
                            .filter_map(|(i, h)| {
                                record.get(*i).map(|v| (Arc::clone(h), v.to_owned()))
                            })
                            .collect();
                        if let Some((row, _)) = held.replace((Row { line, cells }, byte)) {
                            each(row)?;
                        }
                    }
                    Err(e) => {
                        let (line, byte) = e.position().map_or((0, 0), |p| (p.line(), p.byte()));
                        if unclosed_quote(path, byte)? {
                            return Err(at(line, UNCLOSED.into()));
                        }
                        return Err(at(line, e.to_string()));
                    }
                }
            }
            if let Some((row, byte)) = held {
                if unclosed_quote(path, byte)? {
                    return Err(at(row.line, UNCLOSED.into()));
                }
                each(row)?;
            }
        }
        Format::JsonLines => {
            for (n, line) in BufReader::new(file).lines().enumerate() {
                let number = n as u64 + 1;
                let line = line.map_err(|e| ClientError::io("read", path, &e))?;
                // A byte-order mark starts the file, as in CSV.
                let line = match (n, line.strip_prefix('\u{feff}')) {
                    (0, Some(rest)) => rest,
                    _ => line.as_str(),
                };
                if line.trim().is_empty() {
                    continue;
                }
                let members = match serde_json::from_str::<Members>(line) {
                    Ok(m) => m.0,
                    Err(e) => {
                        return Err(match serde_json::from_str::<serde_json::Value>(line) {
                            Ok(_) => at(number, "a line must hold one JSON object".into()),
                            Err(_) => at(number, format!("not JSON: {e}")),
                        })
                    }
                };
                let mut names = HashSet::with_capacity(members.len());
                for (k, _) in &members {
                    if !names.insert(k.as_str()) {
                        return Err(at(
                            number,
                            format!("member {k:?} appears twice in the object: keep one"),
                        ));
                    }
                }
                let mut cells = Vec::with_capacity(members.len());
                for (k, v) in members {
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
                    if known.contains(&k) {
                        cells.push((Arc::from(k.as_str()), text));
                    }
                    columns.insert(k);
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

/// Rows a reading thread hands over at a time ([`each_row_ahead`]).
const ROWS_AHEAD: usize = 1024;

/// As [`each_row`], the file read and split into rows on a thread of its
/// own while `each` runs on the calling thread, so that a pass over the
/// file uses two cores. `each` sees the same rows in the same order, and
/// the first error in the file's order is the one returned: the reader
/// hands over every row before the line it fails on, and stops when the
/// calling thread does. At most a few chunks of [`ROWS_AHEAD`] rows are
/// in memory between the two.
fn each_row_ahead(
    path: &Path,
    format: Format,
    known: &BTreeSet<String>,
    each: &mut dyn FnMut(Row) -> Result<()>,
) -> Result<BTreeSet<String>> {
    std::thread::scope(|scope| {
        let (ahead, chunks) = mpsc::sync_channel::<Vec<Row>>(2);
        let reader = scope.spawn(move || {
            let mut rows = Vec::with_capacity(ROWS_AHEAD);
            let stopped = || ClientError::InvalidArgument("the import stopped".into());
            let read = each_row(path, format, known, &mut |row| {
                rows.push(row);
                if rows.len() >= ROWS_AHEAD {
                    let full = std::mem::replace(&mut rows, Vec::with_capacity(ROWS_AHEAD));
                    ahead.send(full).map_err(|_| stopped())?;
                }
                Ok(())
            });
            // The rows before a failing line are checked first, as when
            // the file is read on one thread; a calling thread that
            // stopped has its own error.
            if !rows.is_empty() {
                let _ = ahead.send(rows);
            }
            read
        });
        for chunk in chunks.iter() {
            for row in chunk {
                // Dropping `chunks` on return stops the reader.
                each(row)?;
            }
        }
        reader
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// What an unclosed quote is called.
const UNCLOSED: &str = "a quoted cell starting in this record is never closed (a closing '\"' \
                        is missing), so the rest of the file would be read as one cell";

/// Whether the CSV record starting at byte `start` of `path` opens a
/// quoted cell that the file never closes (the states of `csv_core`).
fn unclosed_quote(path: &Path, start: u64) -> Result<bool> {
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum S {
        FieldStart,
        Unquoted,
        Quoted,
        QuoteInQuoted,
    }
    let mut file = std::fs::File::open(path).map_err(|e| ClientError::io("read", path, &e))?;
    file.seek(SeekFrom::Start(start))
        .map_err(|e| ClientError::io("read", path, &e))?;
    let mut state = S::FieldStart;
    let mut reader = BufReader::new(file);
    let mut buf = [0u8; 8192];
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| ClientError::io("read", path, &e))?;
        if n == 0 {
            return Ok(state == S::Quoted);
        }
        for &b in buf.get(..n).unwrap_or_default() {
            state = match (state, b) {
                (S::FieldStart, b'"') => S::Quoted,
                (S::FieldStart | S::Unquoted | S::QuoteInQuoted, b',' | b'\n' | b'\r') => {
                    S::FieldStart
                }
                (S::FieldStart | S::Unquoted, _) => S::Unquoted,
                (S::Quoted, b'"') => S::QuoteInQuoted,
                (S::Quoted, _) => S::Quoted,
                (S::QuoteInQuoted, b'"') => S::Quoted,
                (S::QuoteInQuoted, _) => S::Unquoted,
            };
        }
    }
}

/// A JSON object's members in order, duplicates kept (so that they can be
/// refused: `serde_json::Value` keeps the last).
struct Members(Vec<(String, serde_json::Value)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Each;
        impl<'de> Visitor<'de> for Each {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("one JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Members, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry::<String, serde_json::Value>()? {
                    out.push(entry);
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(Each)
    }
}

/// Turns a file's rows into records, apart from the table (its schema
/// and naming key copied), so that the second pass reads ahead on a
/// thread of its own.
struct RowReader<'a> {
    path: &'a Path,
    schema: Schema,
    /// The table's naming key ([`Table::name_digest`]).
    names: KeyedHash,
}

impl RowReader<'_> {
    /// `FILE:LINE: e`.
    fn at(&self, line: u64, e: &dyn std::fmt::Display) -> ClientError {
        ClientError::InvalidArgument(format!("{}:{line}: {e}", self.path.display()))
    }

    /// The record of `row`: named by its key field, else by `naming`.
    fn record(&self, naming: &mut Option<Naming>, row: &Row) -> Result<Record> {
        let cells = row.cells.iter().map(|(k, v)| (&**k, v.as_str()));
        let (values, key) =
            record_values(&self.schema, cells).map_err(|e| self.at(row.line, &e))?;
        let key = match naming.as_mut() {
            Some(naming) => naming.name(&self.names, &values)?,
            None => key.unwrap_or_default(),
        };
        Ok(Record { key, values })
    }
}

/// Whether `e` comes from the transport (the server or the connection
/// failed), which running the same command again gets past.
fn is_transport(e: &ClientError) -> bool {
    match e {
        ClientError::Core(
            sesame_core::Error::Transport(_) | sesame_core::Error::StoreUnavailable(_),
        ) => true,
        ClientError::Unacknowledged { cause, .. } => is_transport(cause),
        _ => false,
    }
}

impl Table {
    /// Imports the records of a file (see the module documentation).
    /// `progress` hears of the checking pass ([`Phase::Reading`], rows
    /// checked), of the insertions as rows of the file imported so far
    /// ([`Phase::Imported`], out of the file's rows, never going back,
    /// several times per batch; the count reaches the end of a batch once
    /// the batch is inserted), then of the range indexes' build at the
    /// end of a first import ([`Phase::Indexing`]). An import the server
    /// or the connection cut off is [`ClientError::ImportInterrupted`]:
    /// run it again.
    pub fn import(
        &mut self,
        path: &Path,
        format: Format,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ImportReport> {
        let batch = env_count(
            "SESAME_IMPORT_BATCH",
            IMPORT_BATCH,
            "records per insertion of an import",
        );
        batch
            .and_then(|batch| self.import_file(path, format, progress, batch))
            // Each lookup of a later search one read (`compact.rs`).
            .and_then(|report| self.compact_index().map(|_| report))
            .map_err(|e| {
                if is_transport(&e) {
                    let cause = match e {
                        // Its own advice ("sent again by the next command")
                        // is the import's, said once.
                        ClientError::Unacknowledged { cause, .. } => cause,
                        e => Box::new(e),
                    };
                    ClientError::ImportInterrupted {
                        path: path.to_path_buf(),
                        cause,
                    }
                } else {
                    e
                }
            })
    }

    fn import_file(
        &mut self,
        path: &Path,
        format: Format,
        progress: &mut dyn FnMut(Progress),
        import_batch: usize,
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
        let has_key = self.schema().key.is_some();
        let run_pairs = naming::run_pairs()?;
        let mut first = if has_key {
            None
        } else {
            Some(Naming::new(self, path, &base, run_pairs)?)
        };
        let reader = RowReader {
            path,
            schema: self.schema().clone(),
            names: KeyedHash::new(&self.naming_key()),
        };
        let at = |line: u64, e: &dyn std::fmt::Display| reader.at(line, e);

        // First pass: check everything, count.
        let mut total = 0u64;
        // 16 bytes of SHA-256 per key, not the key, kept in sorted runs
        // on disk: memory stays bounded whatever the file (two keys
        // that differ share a digest with a chance of about n^2 / 2^129).
        let mut keys = has_key.then(|| Keys::new(run_pairs));
        let columns = each_row_ahead(path, format, &known, &mut |row| {
            let record = reader.record(&mut first, &row)?;
            self.range_values(&record).map_err(|e| at(row.line, &e))?;
            let size = wire::encode(&record)?.len() as u64;
            let max = self.rows.max_document(&record.key);
            if size > max {
                let widest = row
                    .cells
                    .iter()
                    .max_by_key(|(_, v)| v.len())
                    .map(|(k, v)| format!("; its largest cell, {k:?}, holds {} bytes", v.len()))
                    .unwrap_or_default();
                return Err(at(
                    row.line,
                    &format!(
                        "the record is too large to store ({size} bytes encoded; at most \
                         {max}){widest}"
                    ),
                ));
            }
            if let Some(keys) = keys.as_mut() {
                keys.add(&record.key)?;
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
        if let Some(keys) = keys.as_mut() {
            let repeated = keys.repeated()?;
            if !repeated.is_empty() {
                // Their lines: the file read once more.
                let mut seen = HashSet::new();
                each_row(path, format, &known, &mut |row| {
                    let record = reader.record(&mut None, &row)?;
                    let d = naming::key_digest(&record.key);
                    if repeated.contains(&d) && !seen.insert(d) {
                        return Err(at(
                            row.line,
                            &format!("key {:?} appears twice in the file", record.key),
                        ));
                    }
                    Ok(())
                })?;
                return Err(ClientError::InvalidArgument(format!(
                    "{}: the file changed while it was checked; run the same import again",
                    path.display()
                )));
            }
        }
        let mut plan = first.map(Naming::plan).transpose()?;
        let ignored_columns: Vec<String> = columns.difference(&known).cloned().collect();

        // Records of this source (a table without a key) the file may no
        // longer hold, and those an earlier build named by line, once an
        // interrupted operation's records are in the catalog.
        let mut naming = plan.as_mut().map(naming::Plan::replay).transpose()?;
        let mut earlier: HashMap<String, DocumentInfo> = HashMap::new();
        let mut legacy: HashMap<String, DocumentInfo> = HashMap::new();
        let resumed = self.recover()?.len();
        if let Some(n) = &naming {
            for d in self.rows.state.catalog.values() {
                let d = d?;
                if n.owns(&d.path) {
                    earlier.insert(d.path.clone(), d.clone());
                } else if d
                    .path
                    .strip_prefix(n.base())
                    .and_then(|rest| rest.strip_prefix(':'))
                    .is_some_and(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
                {
                    legacy.insert(d.path.clone(), d.clone());
                }
            }
        }

        // Second pass: insert in batches.
        // When a range index is empty, the range changes of every batch
        // are applied at the end, at once: its protocol's `build` then
        // takes every record (a B+ tree is loaded bottom up, each page
        // written once; Kerschbaum-Tueno's insertions rewrite its whole
        // array, its build writes it once), while the records go in by
        // batches. A static keyword scheme takes the whole file in one.
        let batch_size = if self.keyword_index().rebuilds() {
            usize::MAX
        } else {
            import_batch
        };
        let mut deferred = self
            .has_empty_range()
            .then(crate::table::write::Deferred::default);
        let mut report = ImportReport {
            read: 0,
            insert: InsertReport::default(),
            ignored_columns,
            removed: 0,
        };
        report.insert.resumed = resumed;
        // A table empty once the interrupted operations are completed
        // holds none of the file's names: they are distinct (a key given
        // twice was refused above, and a name made for a table without a
        // key counts its repeats), so the batches need not look for the
        // records they replace in the catalog. The file is read again
        // below: a key that now repeats (the file changed in between)
        // ends that shortcut for the rest of the import.
        let mut new_names = self.is_empty();
        // The keys read in the same order as in the first pass: those
        // checked distinct (see `naming.rs`).
        let mut same_keys = match keys.as_mut() {
            Some(keys) if new_names => Some(keys.replay()?),
            _ => None,
        };
        let mut batch = Vec::new();
        let mut flush = |table: &mut Table,
                         batch: &mut Vec<Record>,
                         done: usize,
                         new_names: bool|
         -> Result<()> {
            // The steps of a batch (its records stored, its keyword
            // updates prepared) are shown as rows of the file imported,
            // never going back: one bar of rows for the whole import.
            // They stop one row short of the batch's end, which is
            // shown once the batch is inserted.
            let size = batch.len() as u64;
            let before = (done as u64).saturating_sub(size);
            let mut shown = before;
            let mut within = |p: Progress| {
                if p.phase == Phase::Indexing && p.total > 0 {
                    let step = p.done.min(p.total) * size / p.total;
                    let at = before + step.min(size.saturating_sub(1));
                    if at > shown {
                        shown = at;
                        progress(Progress {
                            phase: Phase::Imported,
                            done: at,
                            total,
                        });
                    }
                }
            };
            let r = table.insert_batch(
                std::mem::take(batch),
                &mut within,
                deferred.as_mut(),
                new_names,
            )?;
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
        let mut stale: Vec<DocumentInfo> = Vec::new();
        // The file is read and its records made on a thread of its own,
        // one batch ahead of the batch being inserted (a rendezvous: at
        // most that one batch more in memory).
        std::thread::scope(|scope| -> Result<()> {
            let (ahead, batches) = mpsc::sync_channel::<Result<Vec<(u64, Record)>>>(0);
            let reader = &reader;
            scope.spawn(move || {
                let mut rows = Vec::new();
                let read = each_row(path, format, &known, &mut |row| {
                    rows.push((row.line, reader.record(&mut naming, &row)?));
                    if rows.len() >= batch_size {
                        ahead.send(Ok(std::mem::take(&mut rows))).map_err(|_| {
                            ClientError::InvalidArgument("the import stopped".into())
                        })?;
                    }
                    Ok(())
                });
                let last = match read {
                    Ok(_) if rows.is_empty() => return,
                    Ok(_) => Ok(rows),
                    Err(e) => Err(e),
                };
                // The importing thread may have stopped: it has its error.
                let _ = ahead.send(last);
            });
            for rows in batches {
                for (line, record) in rows? {
                    if !has_key {
                        earlier.remove(&record.key);
                    }
                    if !has_key && !legacy.is_empty() {
                        // The same values under the name an earlier build
                        // gave this line: that record is this one. (Not
                        // made for every row of a table without such
                        // records: a copy of its values each.)
                        let old = Record {
                            key: format!("{base}:{line}"),
                            values: record.values.clone(),
                        };
                        if let Some(d) = legacy.remove(&old.key) {
                            if crate::table::write::digest_is_of(d.digest, &old)? {
                                stale.push(d);
                            }
                        }
                    }
                    if let Some(keys) = same_keys.as_mut().filter(|_| new_names) {
                        new_names = keys.same(&record.key)?;
                    }
                    batch.push(record);
                    read += 1;
                }
                flush(self, &mut batch, read, new_names)?;
            }
            Ok(())
        })?;
        if let Some(d) = deferred {
            self.finish_deferred(d, progress)?;
        }
        report.read = read;
        stale.extend(earlier.into_values());
        report.removed = self.remove_stale(stale)?;
        Ok(report)
    }

    /// Deletes records an import found its file no longer holds, through
    /// each index's own deletion (as [`Table::delete`] does).
    fn remove_stale(&mut self, mut docs: Vec<DocumentInfo>) -> Result<usize> {
        if docs.is_empty() {
            return Ok(0);
        }
        docs.sort_by_key(|d| d.id);
        self.recover()?;
        if self.has_side_indexes() {
            self.save_ranges(true)?;
        }
        self.remove_records(&docs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Phase;

    /// A first import into an empty table skips the catalog's look-ups
    /// for the records a batch replaces, its keys being distinct. A file
    /// that changes between the two passes (a line appended that gives a
    /// key again, with other values) ends that shortcut: the key is held
    /// once, with the values read last, as when the two lines are in one
    /// batch.
    #[test]
    fn a_key_repeated_by_a_file_changed_during_the_import_is_held_once() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let profile = crate::table::write::fast_profile(dir.path());
        let schema = crate::table::Schema::from_toml(
            "key = \"k\"\n[fields.k]\ntype = \"integer\"\n[fields.c]\ntype = \"string\"\n\
             index = [\"equality\"]\n[fields.v]\ntype = \"integer\"\nindex = [\"range\"]\n\
             bits = 10\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let csv = dir.path().join("rows.csv");
        let mut text = String::from("k,c,v\n");
        for k in 0..500 {
            text.push_str(&format!("{k},{},{}\n", ["a", "b"][k % 2], k % 97));
        }
        std::fs::write(&csv, text).unwrap_or_else(|e| panic!("{e}"));
        let mut table = Table::create(&profile, "t", schema).unwrap_or_else(|e| panic!("{e}"));
        let mut appended = false;
        let report = table
            .import_file(
                &csv,
                Format::Csv,
                &mut |p| {
                    // Once the first batch is in: the second pass is
                    // under way, the first pass long over.
                    if p.phase == Phase::Imported && !appended {
                        appended = true;
                        let mut f = std::fs::OpenOptions::new()
                            .append(true)
                            .open(&csv)
                            .unwrap_or_else(|e| panic!("{e}"));
                        std::io::Write::write_all(&mut f, b"0,z,5\n")
                            .unwrap_or_else(|e| panic!("{e}"));
                    }
                },
                60,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(appended);
        assert_eq!(report.read, 501);
        let check = |table: &mut Table| {
            assert_eq!(table.len(), 500, "each key once");
            let z = table
                .query("c = \"z\"", None)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(z.records.len(), 1, "the values read last");
            let a = table
                .query("c = \"a\"", None)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(a.records.len(), 249);
            let v = table.query("v between 5 and 5", None);
            let v = v.unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(v.total, (0..500).filter(|k| k % 97 == 5).count() + 1);
        };
        check(&mut table);
        drop(table);
        let mut table = Table::open(&profile, "t").unwrap_or_else(|e| panic!("{e}"));
        check(&mut table);
    }

    /// The first pass reads the file on a thread of its own: the
    /// checking thread sees every row in the file's order, across the
    /// chunks handed over, up to the line the reader fails on (whose
    /// error is returned, not a later one), and a check that fails first
    /// is the error returned, with the rows after it never seen.
    #[test]
    fn a_pass_read_ahead_sees_the_rows_in_order_up_to_the_first_error() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let csv = dir.path().join("rows.csv");
        // Line 1 is the header; row k is on line k + 2; line 2,502 has
        // a cell too many (a reading error), two chunks and a part in.
        let mut text = String::from("a,b\n");
        for k in 0..3_000 {
            if k == 2_500 {
                text.push_str("1,2,3\n");
            } else {
                text.push_str(&format!("{k},x\n"));
            }
        }
        std::fs::write(&csv, text).unwrap_or_else(|e| panic!("{e}"));
        let known: BTreeSet<String> = ["a".to_owned()].into();
        let mut lines = Vec::new();
        let read = each_row_ahead(&csv, Format::Csv, &known, &mut |row| {
            assert_eq!(row.cells.len(), 1, "only the known column");
            lines.push(row.line);
            Ok(())
        });
        let e = read.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("rows.csv:2502"), "{e}");
        // The row just before the failing line is held back until the
        // next one is read (`each_row`'s check of an unclosed quote), so
        // it is not seen either, as when one thread reads and checks.
        assert_eq!(lines, (2..2_501).collect::<Vec<u64>>());

        // A check failing first: its error, nothing after its row.
        let mut seen = 0u64;
        let read = each_row_ahead(&csv, Format::Csv, &known, &mut |row| {
            seen = row.line;
            if row.line == 1_500 {
                return Err(ClientError::InvalidArgument("checked: line 1500".into()));
            }
            Ok(())
        });
        let e = read.err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(e, "checked: line 1500");
        assert_eq!(seen, 1_500);
    }

    /// A count from the environment (`SESAME_IMPORT_BATCH`,
    /// `SESAME_IMPORT_SPILL_PAIRS`): unset or empty is the default, a
    /// positive number is taken, anything else is an error that names
    /// the variable and what to do.
    #[test]
    fn a_count_from_the_environment_is_checked() {
        const VAR: &str = "SESAME_TEST_IMPORT_ENV_COUNT";
        let count = || env_count(VAR, 7, "things");
        std::env::remove_var(VAR);
        assert_eq!(count().unwrap_or_else(|e| panic!("{e}")), 7);
        std::env::set_var(VAR, " ");
        assert_eq!(count().unwrap_or_else(|e| panic!("{e}")), 7);
        std::env::set_var(VAR, "250");
        assert_eq!(count().unwrap_or_else(|e| panic!("{e}")), 250);
        for bad in ["0", "-3", "many"] {
            std::env::set_var(VAR, bad);
            let e = count().err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                e.contains(VAR) && e.contains("positive whole number") && e.contains("unset it"),
                "{bad}: {e}"
            );
        }
        std::env::remove_var(VAR);
    }

    /// An import whose range changes are deferred (a first import, in
    /// batches), stopped dead between two batches (a panic in its
    /// progress callback, the table dropped unsaved: what a kill leaves
    /// on disk), then the table opened again: the range indexes, left
    /// marked dirty, are rebuilt from the records, every query answers
    /// as the file does, and the same import run again completes the
    /// file with each record once.
    #[test]
    fn a_deferred_import_stopped_between_batches_is_repaired() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let profile = crate::table::write::fast_profile(dir.path());
        let schema = crate::table::Schema::from_toml(
            "key = \"k\"\n[fields.k]\ntype = \"integer\"\n[fields.c]\ntype = \"string\"\n\
             index = [\"equality\"]\n[fields.v]\ntype = \"integer\"\nindex = [\"range\"]\n\
             bits = 10\n[fields.w]\ntype = \"integer\"\nindex = [\"range\"]\n\
             range = \"bplus-clww\"\nbits = 10\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let csv = dir.path().join("rows.csv");
        let mut text = String::from("k,c,v,w\n");
        for k in 0..500 {
            text.push_str(&format!(
                "{k},{},{},{}\n",
                ["a", "b"][k % 2],
                k % 97,
                k % 13
            ));
        }
        std::fs::write(&csv, text).unwrap_or_else(|e| panic!("{e}"));
        let mut table = Table::create(&profile, "t", schema).unwrap_or_else(|e| panic!("{e}"));
        let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut batches = 0;
            let _ = table.import_file(
                &csv,
                Format::Csv,
                &mut |p| {
                    // The end of a batch (the count moves within one,
                    // and reaches its end once it is inserted).
                    if p.phase == Phase::Imported && p.done.is_multiple_of(60) {
                        batches += 1;
                        if batches == 3 {
                            panic!("stopped after three batches");
                        }
                    }
                },
                60,
            );
        }));
        assert!(stopped.is_err(), "the import was not stopped");
        drop(table);
        let check = |table: &mut Table, want: usize| {
            assert_eq!(table.len(), want);
            for (q, n) in [
                (
                    "v between 0 and 9",
                    (0..want).filter(|k| k % 97 <= 9).count(),
                ),
                ("w = 3", (0..want).filter(|k| k % 13 == 3).count()),
                (
                    "c = \"a\" and w < 2",
                    (0..want).filter(|k| k % 2 == 0 && k % 13 < 2).count(),
                ),
            ] {
                let answer = table.query(q, None).unwrap_or_else(|e| panic!("{q}: {e}"));
                assert_eq!(answer.total, n, "{q}");
                assert_eq!(answer.records.len(), n, "{q}");
            }
        };
        let mut table = Table::open(&profile, "t").unwrap_or_else(|e| panic!("{e}"));
        check(&mut table, 180);
        let report = table
            .import_file(&csv, Format::Csv, &mut |_| {}, 60)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(report.insert.inserted, 320);
        assert_eq!(report.insert.unchanged, 180);
        check(&mut table, 500);
        drop(table);
        let mut table = Table::open(&profile, "t").unwrap_or_else(|e| panic!("{e}"));
        check(&mut table, 500);
    }
}
