//! Importing files into tables: keyless records of different files never
//! collide and a file imported again after an edit converges to it; bad
//! input (an unterminated quote, duplicate JSON members, a cell too large)
//! is refused naming the file and line; a byte-order mark is accepted in
//! both formats; an import cut off by the server says to run it again,
//! and running it again completes it.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use sesame_client::intercept::{Hook, Intercepted, Update};
use sesame_client::table::import::Format;
use sesame_client::table::{Schema, Table, Value};
use sesame_client::{Backend, ClientError, EmbeddedBackend, Phase, Profile, Progress};
use sesame_core::Store;
use sesame_store::MemoryStore;

fn profile(dir: &Path) -> Profile {
    support::profile_at(&dir.join("p"), "fast")
}

/// No key: records are named by the import. A range field, so that the
/// records an import removes leave the range index too.
fn keyless() -> Schema {
    support::keyless_schema()
}

/// The table's records as a multiset of `(name, n)`.
fn contents(table: &mut Table) -> BTreeMap<(String, i64), usize> {
    let mut out = BTreeMap::new();
    for r in table.records().unwrap() {
        let name = match &r.values[0] {
            Some(Value::Text(s)) => s.clone(),
            other => panic!("name {other:?}"),
        };
        let n = match &r.values[1] {
            Some(Value::Int(n)) => *n,
            other => panic!("n {other:?}"),
        };
        *out.entry((name, n)).or_insert(0) += 1;
    }
    out
}

/// A CSV file's rows as the same multiset.
fn expected(rows: &[(&str, i64)]) -> BTreeMap<(String, i64), usize> {
    let mut out = BTreeMap::new();
    for (name, n) in rows {
        *out.entry(((*name).to_owned(), *n)).or_insert(0) += 1;
    }
    out
}

fn write_csv(path: &Path, rows: &[(&str, i64)]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut text = String::from("name,n\n");
    for (name, n) in rows {
        text.push_str(&format!("{name},{n}\n"));
    }
    std::fs::write(path, text).unwrap();
}

/// The records whose `n` lies in `lo..=hi`, by the range index.
fn in_range(table: &mut Table, lo: i64, hi: i64) -> usize {
    table
        .query(&format!("n between {lo} and {hi}"), None)
        .unwrap()
        .total
}

#[test]
fn keyless_files_of_the_same_name_in_two_folders_do_not_replace_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let mut table = Table::create(&p, "t", keyless()).unwrap();
    let jan = dir.path().join("jan/export.csv");
    let feb = dir.path().join("feb/export.csv");
    let jan_rows = [("a", 1), ("b", 2), ("c", 3)];
    let feb_rows = [("d", 4), ("e", 5)];
    write_csv(&jan, &jan_rows);
    write_csv(&feb, &feb_rows);
    let r = table.import(&jan, Format::Csv, &mut |_| {}).unwrap();
    assert_eq!(r.insert.inserted, 3);
    let r = table.import(&feb, Format::Csv, &mut |_| {}).unwrap();
    assert_eq!(
        (r.insert.inserted, r.insert.replaced),
        (2, 0),
        "feb/export.csv replaced jan/export.csv's records: {r:?}"
    );
    let all: Vec<(&str, i64)> = jan_rows.iter().chain(&feb_rows).copied().collect();
    assert_eq!(contents(&mut table), expected(&all));
    // Each file imported again changes nothing.
    for f in [&jan, &feb] {
        let r = table.import(f, Format::Csv, &mut |_| {}).unwrap();
        assert_eq!(
            r.insert.inserted + r.insert.replaced + r.removed,
            0,
            "{r:?}"
        );
    }
    assert_eq!(contents(&mut table), expected(&all));
}

#[test]
fn a_keyless_file_imported_again_after_an_edit_converges_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let mut table = Table::create(&p, "t", keyless()).unwrap();
    let other = dir.path().join("other.csv");
    write_csv(&other, &[("z", 100)]);
    table.import(&other, Format::Csv, &mut |_| {}).unwrap();
    let file = dir.path().join("rows.csv");
    // Two identical rows are two records.
    let mut rows = vec![("a", 1), ("b", 2), ("b", 2), ("c", 3), ("d", 4), ("e", 5)];
    write_csv(&file, &rows);
    table.import(&file, Format::Csv, &mut |_| {}).unwrap();
    let mut want = rows.clone();
    want.push(("z", 100));
    assert_eq!(contents(&mut table), expected(&want));

    // Edits: a line deleted near the start, one of the twins deleted, a
    // line changed, a line added.
    rows.remove(0);
    rows.remove(1);
    rows[2] = ("d", 40);
    rows.push(("f", 6));
    write_csv(&file, &rows);
    let r = table.import(&file, Format::Csv, &mut |_| {}).unwrap();
    let mut want = rows.clone();
    want.push(("z", 100));
    assert_eq!(
        contents(&mut table),
        expected(&want),
        "the table does not hold the edited file's rows: {r:?}"
    );
    assert_eq!(
        (r.insert.inserted, r.removed, r.insert.unchanged),
        (2, 3, 3)
    );
    assert_eq!(in_range(&mut table, 0, 10), 4);
    assert_eq!(in_range(&mut table, 1, 1), 0);
    // Again: nothing to do.
    let r = table.import(&file, Format::Csv, &mut |_| {}).unwrap();
    assert_eq!((r.insert.inserted, r.removed), (0, 0), "{r:?}");
    // Reopened, the same.
    drop(table);
    let mut table = Table::open(&p, "t").unwrap();
    assert_eq!(contents(&mut table), expected(&want));
}

#[test]
fn an_unterminated_quote_at_the_end_of_a_csv_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let mut table = Table::create(&p, "t", keyless()).unwrap();
    let file = dir.path().join("q.csv");
    std::fs::write(&file, "name,n\na,1\n\"b,\nc,3\nd,4\n").unwrap();
    let e = table.import(&file, Format::Csv, &mut |_| {}).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("q.csv:3") && text.contains("quote"),
        "not refused as an unterminated quote: {text}"
    );
    assert_eq!(table.len(), 0);
    // The last cell's quote left open.
    std::fs::write(&file, "name,n\na,1\nb,\"2\nc,3\n").unwrap();
    let e = table.import(&file, Format::Csv, &mut |_| {}).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("q.csv:3") && text.contains("quote"),
        "not refused as an unterminated quote: {text}"
    );
    // A quoted cell over two lines, closed, is a value.
    std::fs::write(&file, "name,n\n\"a\nb\",1\n\"c\"\"\",2\n").unwrap();
    let r = table.import(&file, Format::Csv, &mut |_| {}).unwrap();
    assert_eq!(r.insert.inserted, 2);
    assert_eq!(contents(&mut table), expected(&[("a\nb", 1), ("c\"", 2)]));
}

#[test]
fn duplicate_json_members_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let mut table = Table::create(&p, "t", keyless()).unwrap();
    let file = dir.path().join("d.jsonl");
    std::fs::write(
        &file,
        "{\"name\": \"a\", \"n\": 1}\n{\"name\": \"b\", \"n\": 2, \"n\": 3}\n",
    )
    .unwrap();
    let e = table
        .import(&file, Format::JsonLines, &mut |_| {})
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("d.jsonl:2") && text.contains("\"n\"") && text.contains("twice"),
        "duplicate member not refused: {text}"
    );
    assert_eq!(table.len(), 0);
    // Not an object, not JSON: each named.
    std::fs::write(&file, "[1, 2]\n").unwrap();
    let e = table.import(&file, Format::JsonLines, &mut |_| {});
    assert!(
        e.as_ref().is_err_and(|e| e
            .to_string()
            .contains("d.jsonl:1: a line must hold one JSON object")),
        "{e:?}"
    );
    std::fs::write(&file, "{\"name\": \n").unwrap();
    let e = table.import(&file, Format::JsonLines, &mut |_| {});
    assert!(
        e.as_ref()
            .is_err_and(|e| e.to_string().contains("d.jsonl:1: not JSON")),
        "{e:?}"
    );
}

#[test]
fn a_byte_order_mark_is_accepted_in_json_lines_as_in_csv() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let mut table = Table::create(&p, "t", keyless()).unwrap();
    let csv = dir.path().join("b.csv");
    std::fs::write(&csv, "\u{feff}name,n\na,1\n").unwrap();
    let jsonl = dir.path().join("b.jsonl");
    std::fs::write(&jsonl, "\u{feff}{\"name\": \"b\", \"n\": 2}\n").unwrap();
    let r = table.import(&csv, Format::Csv, &mut |_| {}).unwrap();
    assert!(r.ignored_columns.is_empty(), "{r:?}");
    let r = table.import(&jsonl, Format::JsonLines, &mut |_| {});
    assert!(r.is_ok(), "a BOM refused in JSON Lines: {r:?}");
    assert_eq!(contents(&mut table), expected(&[("a", 1), ("b", 2)]));
    // Elsewhere than the start of the file it is not JSON.
    std::fs::write(
        &jsonl,
        "{\"name\": \"c\", \"n\": 3}\n\u{feff}{\"name\": \"d\"}\n",
    )
    .unwrap();
    let e = table
        .import(&jsonl, Format::JsonLines, &mut |_| {})
        .unwrap_err();
    assert!(e.to_string().contains("b.jsonl:2: not JSON"), "{e}");
}

/// Fails (as a dead server's connection does) every update after
/// `updates` have gone through, and says the server takes messages of
/// `max_message` bytes.
struct Dying {
    updates: Arc<AtomicUsize>,
    max_message: Option<usize>,
}

fn dead() -> ClientError {
    ClientError::Core(sesame_core::Error::Transport(
        "h2 protocol error: error reading a body from connection".into(),
    ))
}

impl Hook for Dying {
    fn max_message(&mut self, _: &mut dyn Backend) -> sesame_client::Result<Option<usize>> {
        Ok(self.max_message)
    }

    fn update_job(
        &mut self,
        inner: &mut dyn Backend,
        update: Update<'_>,
    ) -> sesame_client::Result<sesame_client::UpdateJob> {
        let left = self.updates.load(Ordering::SeqCst);
        if left == 0 {
            return Ok(Box::new(|| Err(dead())));
        }
        self.updates.store(left - 1, Ordering::SeqCst);
        update.send(inner)
    }
}

#[test]
fn an_import_cut_off_by_the_server_says_to_run_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let updates = Arc::new(AtomicUsize::new(usize::MAX));
    let backend = || {
        Box::new(Intercepted::new(
            Box::new(EmbeddedBackend::over(store.clone())),
            Dying {
                updates: updates.clone(),
                max_message: None,
            },
        ))
    };
    let table = Table::create_with(&p, "t", keyless(), backend()).unwrap();
    drop(table);
    // Intents of 1,000 records: the import sends five updates, and the
    // server goes away after the first (an import's default intent, up
    // to 20,000 records, would send one).
    let open = || {
        let mut table = Table::open_with(&p, "t", backend()).unwrap();
        table.set_records_per_intent(1_000);
        table
    };
    let file = dir.path().join("big.csv");
    let rows: Vec<(String, i64)> = (0..5000).map(|i| (format!("r{i}"), i % 1000)).collect();
    let borrowed: Vec<(&str, i64)> = rows.iter().map(|(s, n)| (s.as_str(), *n)).collect();
    write_csv(&file, &borrowed);

    // The server goes away after the first of the import's updates.
    updates.store(1, Ordering::SeqCst);
    let mut table = open();
    let e = table.import(&file, Format::Csv, &mut |_| {}).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("big.csv") && text.contains("run the same import again"),
        "the error does not say what to do: {text}"
    );
    assert!(
        text.contains("h2 protocol error"),
        "the cause is lost: {text}"
    );
    drop(table);

    // Back: the same import completes it, each record once.
    updates.store(usize::MAX, Ordering::SeqCst);
    let mut table = open();
    let report = table.import(&file, Format::Csv, &mut |_| {}).unwrap();
    // The first intent was applied before the cut; the pending one is
    // completed first, and the rest inserted once.
    assert!(report.insert.resumed + report.insert.unchanged >= 1_000);
    assert_eq!(
        report.insert.resumed + report.insert.unchanged + report.insert.inserted,
        5000
    );
    assert_eq!(contents(&mut table), expected(&borrowed));
}

/// Counts the updates sent to the table's keyword index: one per
/// pending intent.
struct Counting(Arc<AtomicUsize>);

impl Hook for Counting {
    fn update_job(
        &mut self,
        inner: &mut dyn Backend,
        update: Update<'_>,
    ) -> sesame_client::Result<sesame_client::UpdateJob> {
        self.0.fetch_add(1, Ordering::SeqCst);
        update.send(inner)
    }
}

/// Each pending intent costs its synced files (the intent, the client
/// state that refers to it) and a store commit before its update is
/// sent: an import puts up to 20,000 records in one
/// (`docs/tables.md`), so 5,000 records are one update. Run again, it
/// sends nothing.
#[test]
fn an_import_sends_one_update_per_twenty_thousand_records() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let updates = Arc::new(AtomicUsize::new(0));
    let backend = || {
        Box::new(Intercepted::new(
            Box::new(EmbeddedBackend::over(store.clone())),
            Counting(updates.clone()),
        ))
    };
    drop(Table::create_with(&p, "t", keyless(), backend()).unwrap());
    let file = dir.path().join("rows.csv");
    let rows: Vec<(String, i64)> = (0..5000).map(|i| (format!("r{i}"), i % 1000)).collect();
    let borrowed: Vec<(&str, i64)> = rows.iter().map(|(s, n)| (s.as_str(), *n)).collect();
    write_csv(&file, &borrowed);
    let mut table = Table::open_with(&p, "t", backend()).unwrap();
    updates.store(0, Ordering::SeqCst);
    let report = table.import(&file, Format::Csv, &mut |_| {}).unwrap();
    assert_eq!(report.insert.inserted, 5000);
    let sent = updates.load(Ordering::SeqCst);
    assert_eq!(
        sent, 1,
        "an import of 5,000 records sent {sent} updates (a pending intent each)"
    );
    assert_eq!(contents(&mut table), expected(&borrowed));
    updates.store(0, Ordering::SeqCst);
    let report = table.import(&file, Format::Csv, &mut |_| {}).unwrap();
    assert_eq!(report.insert.unchanged, 5000);
    assert_eq!(updates.load(Ordering::SeqCst), 0);
}

#[test]
fn a_cell_too_large_is_named_by_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let backend = Box::new(Intercepted::new(
        Box::new(EmbeddedBackend::over(store)),
        Dying {
            updates: Arc::new(AtomicUsize::new(usize::MAX)),
            max_message: Some(256 << 10),
        },
    ));
    // Keyed by `n`: the error names the file's line, not the key.
    let schema = Schema::from_toml(
        "key = \"n\"\n[fields.name]\ntype = \"string\"\n[fields.n]\ntype = \"integer\"\n",
    )
    .unwrap();
    let mut table = Table::create_with(&p, "t", schema, backend).unwrap();
    let file = dir.path().join("wide.csv");
    let big = "x".repeat(300 << 10);
    std::fs::write(&file, format!("name,n\na,1\n{big},2\nc,3\n")).unwrap();
    let e = table.import(&file, Format::Csv, &mut |_| {}).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("wide.csv:3") && text.contains("too large"),
        "not named by file and line: {}",
        &text[..text.len().min(300)]
    );
    assert_eq!(table.len(), 0, "a record was stored before the refusal");
}

#[test]
fn records_named_by_line_by_an_earlier_build_are_taken_over_when_they_match() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let mut table = Table::create(&p, "t", keyless()).unwrap();
    // As an earlier build named an import of rows.csv: by line. Line 3
    // was edited since; line 9 is another folder's rows.csv.
    let old: Vec<_> = [
        ("rows.csv:2", "a", "1"),
        ("rows.csv:3", "b", "20"),
        ("rows.csv:9", "q", "9"),
    ]
    .into_iter()
    .map(|(key, name, n)| {
        table
            .record_from_cells([("name", name), ("n", n)], Some(key.to_owned()))
            .unwrap()
    })
    .collect();
    table.insert(old, &mut |_| {}).unwrap();
    let file = dir.path().join("rows.csv");
    write_csv(&file, &[("a", 1), ("b", 2)]);
    let r = table.import(&file, Format::Csv, &mut |_| {}).unwrap();
    assert_eq!((r.insert.inserted, r.removed), (2, 1), "{r:?}");
    assert_eq!(
        contents(&mut table),
        expected(&[("a", 1), ("b", 2), ("b", 20), ("q", 9)])
    );
    let r = table.import(&file, Format::Csv, &mut |_| {}).unwrap();
    assert_eq!((r.insert.inserted, r.removed), (0, 0), "{r:?}");
}

/// An import's progress is one count of the file's rows: checked, then
/// imported, several steps per batch, never going back and ending at the
/// file's rows, with no other count in between (what `sesame import`
/// shows as a bar of rows per second).
#[test]
fn an_imports_progress_counts_the_files_rows() {
    let dir = tempfile::tempdir().unwrap();
    let p = profile(dir.path());
    let mut table = Table::create(&p, "t", keyless()).unwrap();
    let file = dir.path().join("rows.csv");
    let rows: Vec<(String, i64)> = (0..3000).map(|i| (format!("r{i}"), i % 100)).collect();
    let borrowed: Vec<(&str, i64)> = rows.iter().map(|(s, n)| (s.as_str(), *n)).collect();
    write_csv(&file, &borrowed);
    let mut seen: Vec<Progress> = Vec::new();
    table
        .import(&file, Format::Csv, &mut |p| seen.push(p))
        .unwrap();
    let first = seen.iter().position(|p| p.phase == Phase::Imported);
    let last = seen.iter().rposition(|p| p.phase == Phase::Imported);
    let (Some(first), Some(last)) = (first, last) else {
        panic!("no rows imported shown: {seen:?}")
    };
    let imported = &seen[first..=last];
    let other: Vec<_> = imported
        .iter()
        .filter(|p| p.phase != Phase::Imported)
        .collect();
    assert!(other.is_empty(), "other counts amid the rows: {other:?}");
    assert!(
        imported.len() >= 10,
        "{} steps shown for a batch of 3,000 rows",
        imported.len()
    );
    assert!(imported.windows(2).all(|w| w[0].done <= w[1].done));
    assert_eq!(
        imported.last().map(|p| (p.done, p.total)),
        Some((3000, 3000))
    );
}
