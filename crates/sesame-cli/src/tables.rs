//! `sesame table`, `sesame import` and `sesame query`: encrypted tables.

use std::path::Path;

use sesame_client::table::{self, import::Format, Answer, Schema, Table};

use crate::args::TableCommand;
use crate::error::CliError;
use crate::{count, open_profile, progress, warn_pending, write_stdout};

/// `sesame table ...`
pub(crate) fn table(dir: &Path, cmd: TableCommand) -> Result<(), CliError> {
    match cmd {
        TableCommand::Create { table, schema } => {
            // The schema is read and checked before the passphrase is asked.
            let text = std::fs::read_to_string(&schema)
                .map_err(|e| crate::error::file_error("read", &schema, &e))?;
            let parsed = Schema::from_toml(&text)?;
            let profile = open_profile(dir)?;
            let t = Table::create(&profile, &table, parsed)?;
            let mut out = format!("created table {table}\n");
            out.push_str(&describe(&t));
            write_stdout(out.as_bytes())
        }
        TableCommand::List => {
            let profile = open_profile(dir)?;
            let mut out = String::new();
            for name in table::tables(&profile)? {
                out.push_str(&name);
                out.push('\n');
            }
            write_stdout(out.as_bytes())
        }
        TableCommand::Show { table, space } => {
            let profile = open_profile(dir)?;
            let mut t = Table::open(&profile, &table)?;
            warn_pending(t.pending_records(), "record");
            let mut out = describe(&t);
            if space {
                match t.space()? {
                    Some(s) => {
                        out.push_str(
                            "\nWhere the bytes go (keys and values in the store; the catalog as \
                             the client files that hold it):\n",
                        );
                        out.push_str(&s.describe());
                    }
                    None => out.push_str(
                        "\nThe table's indexes are on the server: their space is not known here.\n",
                    ),
                }
            }
            write_stdout(out.as_bytes())
        }
        TableCommand::Delete { table, query } => {
            let profile = open_profile(dir)?;
            let mut t = Table::open(&profile, &table)?;
            let n = t.delete(&query)?;
            write_stdout(
                format!(
                    "deleted {}; {} left\n",
                    count(n, "record"),
                    count(t.len(), "record")
                )
                .as_bytes(),
            )
        }
        TableCommand::Drop { table } => {
            let profile = open_profile(dir)?;
            let t = match Table::open(&profile, &table) {
                Ok(t) => t,
                // No table: what an unfinished create left under its
                // names goes.
                Err(e @ sesame_client::ClientError::UnknownTable(_)) => {
                    return match table::remove_remnants(&profile, &table)? {
                        0 => Err(e.into()),
                        1 => write_stdout(
                            format!("removed 1 index left by an unfinished table {table}\n")
                                .as_bytes(),
                        ),
                        n => write_stdout(
                            format!("removed {n} indexes left by an unfinished table {table}\n")
                                .as_bytes(),
                        ),
                    }
                }
                Err(e) => return Err(e.into()),
            };
            let n = t.len();
            t.drop_table(&profile)?;
            write_stdout(format!("dropped table {table} ({})\n", count(n, "record")).as_bytes())
        }
    }
}

/// A table's fields, their indexes and its size.
fn describe(t: &Table) -> String {
    let schema = t.schema();
    let mut out = format!(
        "{} in table {}; keyword index: {}",
        count(t.len(), "record"),
        t.name(),
        schema.equality.scheme
    );
    if let Some(key) = &schema.key {
        out.push_str(&format!("; key: {key}"));
    }
    out.push('\n');
    let rows: Vec<[String; 3]> = schema
        .fields
        .iter()
        .map(|f| {
            let mut how = Vec::new();
            if f.equality {
                how.push("equality".to_owned());
            }
            if let Some(max) = f.prefix {
                how.push(format!("prefix (up to {max})"));
            }
            if let Some(b) = &f.range {
                how.push(format!("range: {} ({} bits)", b.scheme, f.bits));
            }
            if how.is_empty() {
                how.push("stored only".into());
            }
            [f.name.clone(), f.ty.to_string(), how.join(", ")]
        })
        .collect();
    out.push_str(&aligned(&["FIELD", "TYPE", "INDEXES"], &rows));
    if let Some(warning) = t.insecure_warning() {
        out.push_str(&warning);
        out.push('\n');
    }
    out
}

/// Rows as columns padded to their widest cell.
fn aligned<const N: usize>(header: &[&str; N], rows: &[[String; N]]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  ", w = *w));
            }
        }
        s.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// `sesame import TABLE FILE`
pub(crate) fn import(
    dir: &Path,
    table: &str,
    file: &Path,
    format: Option<&str>,
) -> Result<(), CliError> {
    // A missing file or an unknown format is reported before the
    // passphrase is asked.
    if let Err(e) = std::fs::metadata(file) {
        return Err(crate::error::file_error("read", file, &e));
    }
    let format = match format {
        Some(f) => Format::parse(f)?,
        None => Format::of(file)?,
    };
    // A writer of many pages that reads few back: a smaller page cache
    // (see `IMPORT_CACHE_BYTES`).
    sesame_store::RedbStore::set_cache_bytes(table::import::IMPORT_CACHE_BYTES);
    let profile = open_profile(dir)?;
    let mut t = Table::open(&profile, table)?;
    let mut bar = progress::Bar::rows();
    let report = t.import(file, format, &mut |p| bar.update(p));
    bar.finish();
    let report = report?;
    let mut out = String::new();
    if report.insert.resumed > 0 {
        out.push_str(&format!(
            "completed an interrupted operation first ({})\n",
            count(report.insert.resumed, "record or index")
        ));
    }
    out.push_str(&format!(
        "read {}: inserted {}, replaced {}, unchanged {}; {} in table {table}\n",
        count(report.read, "record"),
        report.insert.inserted,
        report.insert.replaced,
        report.insert.unchanged,
        count(t.len(), "record"),
    ));
    if report.removed > 0 {
        out.push_str(&format!(
            "removed {}: the file no longer holds them (an earlier import of the same file)\n",
            count(report.removed, "record")
        ));
    }
    if report.insert.rebuilt {
        out.push_str("static keyword scheme: its index was rebuilt\n");
    }
    if !report.ignored_columns.is_empty() {
        out.push_str(&format!(
            "columns not in the schema, not stored: {}\n",
            report.ignored_columns.join(", ")
        ));
    }
    write_stdout(out.as_bytes())
}

/// `sesame query TABLE QUERY`
pub(crate) fn query(
    dir: &Path,
    table: &str,
    text: &str,
    limit: Option<usize>,
    format: &str,
    explain: bool,
) -> Result<(), CliError> {
    if !["table", "json", "csv"].contains(&format) {
        return Err(CliError::Usage(format!(
            "--format {format:?} is not table, json or csv"
        )));
    }
    let profile = open_profile(dir)?;
    let mut t = Table::open(&profile, table)?;
    if explain {
        let steps = t.explain(text)?;
        let mut out = String::new();
        if let Some(warning) = t.insecure_warning() {
            out.push_str(&warning);
            out.push('\n');
        }
        for (i, s) in steps.iter().enumerate() {
            out.push_str(&format!(
                "{}. {}\n   answered by: {} ({})\n   sends: {}\n   the server learns: {}\n",
                i + 1,
                s.predicate,
                s.index,
                s.scheme,
                s.request,
                s.leakage
            ));
        }
        out.push_str(
            "and/or are combined on the client; the matching records are then fetched by \
             identifier (the server sees which and how many)\n",
        );
        return write_stdout(out.as_bytes());
    }
    let answer = t.query(text, limit)?;
    warn_pending(t.pending_records(), "record");
    let out = match format {
        "json" => as_json(&t, &answer)?,
        "csv" => as_csv(&t, &answer)?,
        _ => as_table(&t, &answer),
    };
    write_stdout(out.as_bytes())?;
    if answer.records.len() < answer.total {
        eprintln!(
            "{} of {} matching records shown (--limit)",
            answer.records.len(),
            answer.total
        );
    }
    Ok(())
}

fn cells(t: &Table, answer: &Answer) -> Vec<Vec<String>> {
    answer
        .records
        .iter()
        .map(|r| {
            t.schema()
                .fields
                .iter()
                .zip(&r.values)
                .map(|(f, v)| v.as_ref().map(|v| f.display(v)).unwrap_or_default())
                .collect()
        })
        .collect()
}

fn as_table(t: &Table, answer: &Answer) -> String {
    let fields = &t.schema().fields;
    let mut widths: Vec<usize> = fields.iter().map(|f| f.name.chars().count()).collect();
    let rows = cells(t, answer);
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count().min(40));
        }
    }
    let line = |cells: &[String]| -> String {
        let mut s = String::new();
        for (c, w) in cells.iter().zip(&widths) {
            let shown: String = if c.chars().count() > 40 {
                c.chars().take(39).chain(['…']).collect()
            } else {
                c.clone()
            };
            s.push_str(&format!("{shown:<w$}  ", w = *w));
        }
        s.trim_end().to_owned() + "\n"
    };
    let header: Vec<String> = fields.iter().map(|f| f.name.clone()).collect();
    let mut out = line(&header);
    for row in &rows {
        out.push_str(&line(row));
    }
    out.push_str(&format!("({})\n", count(answer.total, "record")));
    out
}

fn as_json(t: &Table, answer: &Answer) -> Result<String, CliError> {
    // Written by hand so that the fields keep the schema's order.
    let fields = &t.schema().fields;
    let bad = |e: serde_json::Error| CliError::Other(format!("cannot write JSON: {e}"));
    let mut out = String::from("[");
    for (i, r) in answer.records.iter().enumerate() {
        out.push_str(if i == 0 { "\n  {" } else { ",\n  {" });
        for (j, (f, v)) in fields.iter().zip(&r.values).enumerate() {
            if j > 0 {
                out.push_str(", ");
            }
            let value = v.as_ref().map_or(serde_json::Value::Null, |v| f.json(v));
            out.push_str(&serde_json::to_string(&f.name).map_err(bad)?);
            out.push_str(": ");
            out.push_str(&serde_json::to_string(&value).map_err(bad)?);
        }
        out.push('}');
    }
    out.push_str(if answer.records.is_empty() {
        "]\n"
    } else {
        "\n]\n"
    });
    Ok(out)
}

fn as_csv(t: &Table, answer: &Answer) -> Result<String, CliError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let bad = |e: csv::Error| CliError::Other(format!("cannot write CSV: {e}"));
    w.write_record(t.schema().fields.iter().map(|f| f.name.as_str()))
        .map_err(bad)?;
    for row in cells(t, answer) {
        w.write_record(&row).map_err(bad)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| CliError::Other(format!("cannot write CSV: {e}")))?;
    String::from_utf8(bytes).map_err(|e| CliError::Other(format!("cannot write CSV: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sesame import` sets the import's page cache before it opens the
    /// profile (here a missing one: the error comes after the setting).
    #[test]
    fn an_import_opens_its_store_with_the_import_cache() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let csv = dir.path().join("rows.csv");
        std::fs::write(&csv, "a\n1\n").expect("a file");
        sesame_store::RedbStore::set_cache_bytes(7 << 20);
        let r = import(&dir.path().join("no-profile"), "t", &csv, None);
        assert!(r.is_err(), "no profile there");
        assert_eq!(
            sesame_store::RedbStore::cache_bytes(),
            table::import::IMPORT_CACHE_BYTES
        );
    }
}
