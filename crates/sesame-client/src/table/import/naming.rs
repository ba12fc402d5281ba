//! The names of an import's records in a table without a key, and the
//! keys an import checks for repeats (see the parent module's
//! documentation), in memory bounded whatever the file's size.
//!
//! A row of a table without a key is named after its values' digest,
//! with `.k` for the k-th repeat of the same values in the file. The
//! first pass keeps each row's 8-byte digest twice in a [`Spill`]: once
//! with its row number (to sort by digest) and once under its row number
//! (the file's order). At the end of the pass the digests merged in
//! order give the repeats (row, k) for k > 0, kept in a third spill; the
//! second pass reads the file's order and the repeats back merged by row
//! number, as streams: each row's name is the one the first pass's
//! content gives it, the same as counting the repeats in memory (tested
//! in `tests::spilled_names_are_those_counted_in_memory`). A row whose
//! digest is not the one the first pass read at that place (the file
//! changed in between) stops the import before the batch holding it is
//! inserted, saying to run it again.
//!
//! A table with a key: the first pass keeps each key's 16-byte SHA-256
//! digest, sorted, and in the file's order; a digest met twice is a key
//! given twice, reported at its line (the file read once more, only
//! then). The second pass compares each key's digest with the first
//! pass's at that row: while they agree the keys are those checked
//! distinct (the shortcut of a first import into an empty table holds).
//!
//! Memory: at most `run_pairs` pairs (16 bytes each) per spill before a
//! sorted run is written ([`run_pairs`]: 2^19 pairs, 8 MiB, unless
//! `SESAME_IMPORT_SPILL_PAIRS` says otherwise), and one 64 KiB block per
//! run while merging. The runs are sealed blocks in an anonymous
//! temporary file in `TMPDIR` (see [`Spill`]): digests under the table's
//! naming key or of the keys, nothing in clear, and gone when the import
//! ends or its process dies (nothing is left behind to clean up).

use std::collections::HashSet;
use std::iter::Peekable;
use std::path::{Path, PathBuf};

use rand_core::OsRng;
use sesame_core::wire;
use sesame_crypto::hash::KeyedHash;

use crate::error::{ClientError, Result};
use crate::table::ranges::Spill;
use crate::table::{Table, Value};

/// Pairs a spill of an import's naming holds before it writes a sorted
/// run, unless `SESAME_IMPORT_SPILL_PAIRS` says otherwise (8 MiB).
pub(super) const RUN_PAIRS: usize = 1 << 19;
/// Digests of keys given twice kept to find their lines.
const REPEATED_KEYS: usize = 1 << 16;

#[cfg(test)]
thread_local! {
    /// [`run_pairs`] for the tests of this thread.
    pub(super) static TEST_RUN_PAIRS: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
}

/// The pairs a spill holds before writing a run: [`RUN_PAIRS`], or
/// `SESAME_IMPORT_SPILL_PAIRS`.
pub(super) fn run_pairs() -> Result<usize> {
    #[cfg(test)]
    if let Some(n) = TEST_RUN_PAIRS.with(std::cell::Cell::get) {
        return Ok(n);
    }
    super::env_count(
        "SESAME_IMPORT_SPILL_PAIRS",
        RUN_PAIRS,
        "pairs of digests an import holds in memory before writing them to disk",
    )
}

/// The file changed between the two passes.
fn changed(path: &Path) -> ClientError {
    ClientError::InvalidArgument(format!(
        "{}: the file changed while it was imported (a row differs from the one checked \
         at its place); run the same import again",
        path.display()
    ))
}

/// Pairs of a spill read back in order (an error ends it).
type Merge<'a> = Box<dyn Iterator<Item = Result<(u64, u64)>> + Send + 'a>;

/// The pairs of a spill holding one index, merged in order.
fn merged(spill: &mut Spill) -> Result<Merge<'_>> {
    let merge = spill
        .sorted_all(1)?
        .pop()
        .ok_or_else(|| ClientError::InvalidArgument("an import's spill has no index".into()))?;
    Ok(Box::new(merge))
}

/// Names the records of one file of a table without a key (see the
/// module documentation).
pub(super) struct Naming<'a> {
    /// `NAME#SOURCE:`.
    prefix: String,
    /// The file's name, for the names of earlier builds (`NAME:LINE`).
    base: String,
    /// The file, for errors.
    path: PathBuf,
    /// Rows named so far.
    row: u64,
    state: State<'a>,
}

/// The first pass's spills.
struct Counts {
    by_digest: Spill,
    order: Spill,
    run_pairs: usize,
}

enum State<'a> {
    /// The first pass: each row's digest kept by digest and in order.
    Count(Box<Counts>),
    /// The second pass: the first pass's digests in order, and the
    /// repeats (row, k > 0) by row.
    Replay {
        order: Merge<'a>,
        repeats: Peekable<Merge<'a>>,
    },
}

/// What the first pass over a file of a table without a key leaves to
/// the second ([`Naming::plan`]).
pub(super) struct Plan {
    prefix: String,
    base: String,
    path: PathBuf,
    /// (row, digest), one per row.
    order: Spill,
    /// (row, k) of each row that repeats an earlier one's values.
    repeats: Spill,
}

impl Naming<'static> {
    /// The naming of the first pass over `path`, whose file name is
    /// `base`, spilling runs of `run_pairs` pairs.
    pub(super) fn new(
        table: &Table,
        path: &Path,
        base: &str,
        run_pairs: usize,
    ) -> Result<Naming<'static>> {
        let canonical: PathBuf =
            std::fs::canonicalize(path).map_err(|e| ClientError::io("read", path, &e))?;
        let source = table.name_digest(
            "sesame-client/import-source/v1",
            &[canonical.as_os_str().as_encoded_bytes()],
        );
        Ok(Naming {
            prefix: format!(
                "{base}#{}:",
                hex::encode(source.get(..6).unwrap_or_default())
            ),
            base: base.to_owned(),
            path: path.to_path_buf(),
            row: 0,
            state: State::Count(Box::new(Counts {
                by_digest: Spill::with_run_pairs(run_pairs),
                order: Spill::with_run_pairs(run_pairs),
                run_pairs,
            })),
        })
    }

    /// Ends the first pass: the repeats of the rows' digests, found by a
    /// merge of the digests in order.
    pub(super) fn plan(self) -> Result<Plan> {
        let State::Count(counts) = self.state else {
            return Err(ClientError::InvalidArgument(
                "an import's names were planned twice".into(),
            ));
        };
        let Counts {
            mut by_digest,
            order,
            run_pairs,
        } = *counts;
        let mut repeats = Spill::with_run_pairs(run_pairs);
        let mut last = None;
        let mut k = 0u64;
        for pair in merged(&mut by_digest)? {
            let (digest, row) = pair?;
            if last == Some(digest) {
                k += 1;
                repeats.push(&mut OsRng, 0, row, k)?;
            } else {
                last = Some(digest);
                k = 0;
            }
        }
        Ok(Plan {
            prefix: self.prefix,
            base: self.base,
            path: self.path,
            order,
            repeats,
        })
    }
}

impl Plan {
    /// The naming of the second pass: the same names as the first
    /// pass's rows, read back as streams.
    pub(super) fn replay(&mut self) -> Result<Naming<'_>> {
        let order = merged(&mut self.order)?;
        let repeats = merged(&mut self.repeats)?.peekable();
        Ok(Naming {
            prefix: self.prefix.clone(),
            base: self.base.clone(),
            path: self.path.clone(),
            row: 0,
            state: State::Replay { order, repeats },
        })
    }
}

impl Naming<'_> {
    /// The file's name, for the names of earlier builds (`NAME:LINE`).
    pub(super) fn base(&self) -> &str {
        &self.base
    }

    /// The name of the next row, of values `values`, under the table's
    /// naming key `names`. In the first pass, the name of a first
    /// occurrence (its repeats are known at the end of the pass).
    pub(super) fn name(&mut self, names: &KeyedHash, values: &[Option<Value>]) -> Result<String> {
        let digest = names.hash("sesame-client/import-row/v1", &[&wire::encode(values)?]);
        let mut short = [0u8; 8];
        short.copy_from_slice(digest.get(..8).unwrap_or(&[0; 8]));
        let value = u64::from_be_bytes(short);
        let row = self.row;
        self.row += 1;
        let k = match &mut self.state {
            State::Count(counts) => {
                counts.by_digest.push(&mut OsRng, 0, value, row)?;
                counts.order.push(&mut OsRng, 0, row, value)?;
                0
            }
            State::Replay { order, repeats } => {
                match order.next().transpose()? {
                    Some((r, d)) if r == row && d == value => {}
                    _ => return Err(changed(&self.path)),
                }
                match repeats.peek() {
                    Some(Ok((r, _))) if *r == row => repeats.next().transpose()?.map_or(0, |p| p.1),
                    Some(Err(_)) => {
                        return Err(repeats
                            .next()
                            .and_then(Result::err)
                            .unwrap_or_else(|| changed(&self.path)))
                    }
                    _ => 0,
                }
            }
        };
        Ok(if k == 0 {
            format!("{}{}", self.prefix, hex::encode(short))
        } else {
            format!("{}{}.{k}", self.prefix, hex::encode(short))
        })
    }

    /// Whether `name` is one of this source's records.
    pub(super) fn owns(&self, name: &str) -> bool {
        name.starts_with(&self.prefix)
    }
}

/// What the first pass of an import keeps of a key to refuse a repeat.
pub(super) fn key_digest(key: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(
        sesame_crypto::hash::sha256(key.as_bytes())
            .get(..16)
            .unwrap_or(&[0; 16]),
    );
    out
}

/// A key's digest as two numbers.
fn halves(key: &str) -> (u64, u64) {
    let d = key_digest(key);
    let mut hi = [0u8; 8];
    let mut lo = [0u8; 8];
    hi.copy_from_slice(d.get(..8).unwrap_or(&[0; 8]));
    lo.copy_from_slice(d.get(8..).unwrap_or(&[0; 8]));
    (u64::from_be_bytes(hi), u64::from_be_bytes(lo))
}

/// The keys of an import's file (see the module documentation).
pub(super) struct Keys {
    /// Rows seen so far.
    row: u64,
    /// The digests, sorted: a pair (high, low half).
    by_digest: Spill,
    /// The digests in order: (2 row, high half), (2 row + 1, low half).
    order: Spill,
}

impl Keys {
    pub(super) fn new(run_pairs: usize) -> Keys {
        Keys {
            row: 0,
            by_digest: Spill::with_run_pairs(run_pairs),
            order: Spill::with_run_pairs(run_pairs),
        }
    }

    /// Keeps the key of the next row of the first pass.
    pub(super) fn add(&mut self, key: &str) -> Result<()> {
        let (hi, lo) = halves(key);
        self.by_digest.push(&mut OsRng, 0, hi, lo)?;
        self.order.push(&mut OsRng, 0, 2 * self.row, hi)?;
        self.order.push(&mut OsRng, 0, 2 * self.row + 1, lo)?;
        self.row += 1;
        Ok(())
    }

    /// Ends the first pass: the digests of keys given more than once
    /// (at most [`REPEATED_KEYS`] of them), none when every key is
    /// distinct.
    pub(super) fn repeated(&mut self) -> Result<HashSet<[u8; 16]>> {
        let mut out = HashSet::new();
        let mut last = None;
        for pair in merged(&mut self.by_digest)? {
            let pair = pair?;
            if last == Some(pair) && out.len() < REPEATED_KEYS {
                let mut d = [0u8; 16];
                d[..8].copy_from_slice(&pair.0.to_be_bytes());
                d[8..].copy_from_slice(&pair.1.to_be_bytes());
                out.insert(d);
            }
            last = Some(pair);
        }
        // The memory goes back.
        self.by_digest = Spill::with_run_pairs(1);
        Ok(out)
    }

    /// The second pass: the first pass's keys read back in order.
    pub(super) fn replay(&mut self) -> Result<Replay<'_>> {
        Ok(Replay {
            order: Some(merged(&mut self.order)?),
            row: 0,
        })
    }
}

/// The first pass's keys in order, in the second pass ([`Keys::replay`]).
pub(super) struct Replay<'a> {
    /// `None` once a key differed.
    order: Option<Merge<'a>>,
    row: u64,
}

impl Replay<'_> {
    /// Whether the next row's key is the one the first pass read at
    /// its place, and every key before it was: the keys are then
    /// distinct so far. False from the first that is not on.
    pub(super) fn same(&mut self, key: &str) -> Result<bool> {
        let Some(order) = self.order.as_mut() else {
            return Ok(false);
        };
        let (hi, lo) = halves(key);
        let row = self.row;
        self.row += 1;
        let a = order.next().transpose()?;
        let b = order.next().transpose()?;
        let same = a == Some((2 * row, hi)) && b == Some((2 * row + 1, lo));
        if !same {
            self.order = None;
        }
        Ok(same)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use rand::seq::SliceRandom;
    use rand::SeedableRng;

    use super::*;
    use crate::table::import::Format;
    use crate::table::Schema;

    const SCHEMA: &str = "[fields.c]\ntype = \"string\"\nindex = [\"equality\"]\n\
                          [fields.v]\ntype = \"integer\"\n";

    /// Rows (c, v): 1,000 distinct rows, each given 1, 2 or 5 times, in
    /// scattered order.
    fn rows() -> Vec<(String, i64)> {
        let mut rows = Vec::new();
        for i in 0..1000i64 {
            for _ in 0..[1, 2, 5][(i % 3) as usize] {
                rows.push((["a", "b", "c"][(i % 7 % 3) as usize].to_owned(), i));
            }
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(39);
        rows.shuffle(&mut rng);
        rows
    }

    fn values(row: &(String, i64)) -> Vec<Option<Value>> {
        vec![Some(Value::Text(row.0.clone())), Some(Value::Int(row.1))]
    }

    /// The names counted in memory (the naming before spills): the
    /// oracle.
    fn in_memory(prefix: &str, names: &KeyedHash, rows: &[Vec<Option<Value>>]) -> Vec<String> {
        let mut seen: HashMap<[u8; 8], u32> = HashMap::new();
        rows.iter()
            .map(|values| {
                let encoded = wire::encode(values).unwrap_or_else(|e| panic!("{e}"));
                let digest = names.hash("sesame-client/import-row/v1", &[&encoded]);
                let mut short = [0u8; 8];
                short.copy_from_slice(&digest[..8]);
                let repeat = seen.entry(short).or_insert(0);
                let k = *repeat;
                *repeat += 1;
                if k == 0 {
                    format!("{prefix}{}", hex::encode(short))
                } else {
                    format!("{prefix}{}.{k}", hex::encode(short))
                }
            })
            .collect()
    }

    fn table(dir: &Path, schema: &str) -> Table {
        let profile = crate::table::write::fast_profile(dir);
        let schema = Schema::from_toml(schema).unwrap_or_else(|e| panic!("{e}"));
        Table::create(&profile, "t", schema).unwrap_or_else(|e| panic!("{e}"))
    }

    fn write_csv(path: &Path, rows: &[(String, i64)]) {
        let mut text = String::from("c,v\n");
        for (c, v) in rows {
            text.push_str(&format!("{c},{v}\n"));
        }
        std::fs::write(path, text).unwrap_or_else(|e| panic!("{e}"));
    }

    /// The names the spilled runs give (runs of 64 pairs: dozens of runs
    /// per spill, the memory held a few runs' worth) are exactly those
    /// counted in memory, repeats included.
    #[test]
    fn spilled_names_are_those_counted_in_memory() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let table = table(dir.path(), SCHEMA);
        let csv = dir.path().join("rows.csv");
        let rows = rows();
        write_csv(&csv, &rows);
        let names = KeyedHash::new(&table.naming_key());
        let values: Vec<_> = rows.iter().map(values).collect();
        let mut first = Naming::new(&table, &csv, "rows.csv", 64).unwrap_or_else(|e| panic!("{e}"));
        for v in &values {
            first.name(&names, v).unwrap_or_else(|e| panic!("{e}"));
        }
        let State::Count(counts) = &first.state else {
            panic!("the first pass counts")
        };
        // Dozens of runs written, a few runs' worth held.
        assert!(counts.by_digest.held() < 64 * 16 * 4);
        assert!(counts.order.held() < 64 * 16 * 4);
        let prefix = first.prefix.clone();
        let mut plan = first.plan().unwrap_or_else(|e| panic!("{e}"));
        // 1,665 of the 2,665 rows repeat an earlier one.
        assert_eq!(plan.repeats.len(0), 1665);
        let mut second = plan.replay().unwrap_or_else(|e| panic!("{e}"));
        let got: Vec<String> = values
            .iter()
            .map(|v| second.name(&names, v).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        let want = in_memory(&prefix, &names, &values);
        let differ = got.iter().zip(&want).position(|(g, w)| g != w);
        let differ = differ.map(|i| (i, &got[i], &want[i]));
        assert_eq!(
            differ, None,
            "the first name that differs (row, spilled, in memory)"
        );
        assert_eq!(got.len(), want.len());
        assert!(got.iter().any(|n| n.ends_with(".4")));
    }

    /// An import whose naming spills runs stores the names counted in
    /// memory, and the same import again finds every record unchanged.
    #[test]
    fn an_import_with_spilled_runs_names_its_rows_as_in_memory() {
        TEST_RUN_PAIRS.with(|c| c.set(Some(64)));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut table = table(dir.path(), SCHEMA);
        let csv = dir.path().join("rows.csv");
        let rows = rows();
        write_csv(&csv, &rows);
        let report = table
            .import_file(&csv, Format::Csv, &mut |_| {}, 300)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(report.insert.inserted, rows.len());
        let prefix = Naming::new(&table, &csv, "rows.csv", 64)
            .unwrap_or_else(|e| panic!("{e}"))
            .prefix;
        let names = KeyedHash::new(&table.naming_key());
        let values: Vec<_> = rows.iter().map(values).collect();
        let mut want = in_memory(&prefix, &names, &values);
        want.sort();
        let mut got: Vec<String> = table
            .rows
            .state
            .catalog
            .values()
            .map(|d| d.map(|d| d.path))
            .collect::<Result<_>>()
            .unwrap_or_else(|e| panic!("{e}"));
        got.sort();
        let differ = got.iter().zip(&want).position(|(g, w)| g != w);
        let differ = differ.map(|i| (&got[i], &want[i]));
        assert_eq!(
            differ, None,
            "the first name that differs (stored, in memory)"
        );
        assert_eq!(got.len(), want.len());
        let again = table
            .import_file(&csv, Format::Csv, &mut |_| {}, 300)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again.insert.unchanged, rows.len());
        assert_eq!((again.insert.inserted, again.removed), (0, 0));
        TEST_RUN_PAIRS.with(|c| c.set(None));
    }

    /// A key given twice, far apart, is found in the spilled runs and
    /// reported at the line of its second occurrence, before anything
    /// is stored.
    #[test]
    fn a_key_given_twice_is_found_in_spilled_runs() {
        TEST_RUN_PAIRS.with(|c| c.set(Some(64)));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut table = table(dir.path(), &format!("key = \"v\"\n{SCHEMA}"));
        let csv = dir.path().join("rows.csv");
        let mut rows: Vec<(String, i64)> = (0..3000).map(|i| ("a".to_owned(), i)).collect();
        // Line 2,502 (a header, then rows from line 2) gives key 7 again.
        rows[2500].1 = 7;
        write_csv(&csv, &rows);
        let e = table
            .import_file(&csv, Format::Csv, &mut |_| {}, 300)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.ends_with("rows.csv:2502: key \"7\" appears twice in the file"),
            "the import's error: {e:?}; {} records stored",
            table.len()
        );
        assert_eq!(table.len(), 0);
        rows[2500].1 = 2500;
        write_csv(&csv, &rows);
        let report = table
            .import_file(&csv, Format::Csv, &mut |_| {}, 300)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(report.insert.inserted, 3000);
        TEST_RUN_PAIRS.with(|c| c.set(None));
    }

    /// A file whose rows change between the two passes (a row rewritten
    /// once the first batch is in) stops the import before the batch
    /// holding the row is inserted; the same import again converges to
    /// the file: each row once.
    #[test]
    fn a_row_changed_between_the_passes_stops_the_import() {
        TEST_RUN_PAIRS.with(|c| c.set(Some(64)));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut table = table(dir.path(), SCHEMA);
        let csv = dir.path().join("rows.csv");
        let mut rows = rows();
        write_csv(&csv, &rows);
        let mut changed = rows.clone();
        // The same length: a row near the end now repeats the first.
        let last = changed.len() - 3;
        changed[last] = changed[0].clone();
        let mut edited = false;
        let e = table.import_file(
            &csv,
            Format::Csv,
            &mut |p| {
                if p.phase == crate::session::Phase::Imported && !edited {
                    edited = true;
                    write_csv(&csv, &changed);
                }
            },
            300,
        );
        let e = e.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            e.contains("the file changed while it was imported"),
            "the import's error: {e:?}; {} records stored",
            table.len()
        );
        assert!(table.len() < rows.len());
        let again = table
            .import_file(&csv, Format::Csv, &mut |_| {}, 300)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again.read, rows.len());
        rows = changed;
        let mut want: BTreeMap<(String, i64), usize> = BTreeMap::new();
        for r in &rows {
            *want.entry(r.clone()).or_default() += 1;
        }
        let mut got: BTreeMap<(String, i64), usize> = BTreeMap::new();
        for c in ["a", "b", "c"] {
            let all = table
                .query(&format!("c = \"{c}\""), None)
                .unwrap_or_else(|e| panic!("{e}"));
            for r in all.records {
                let v = match r.values.get(1) {
                    Some(Some(Value::Int(v))) => *v,
                    v => panic!("{v:?}"),
                };
                *got.entry((c.to_owned(), v)).or_default() += 1;
            }
        }
        assert_eq!(got, want);
        TEST_RUN_PAIRS.with(|c| c.set(None));
    }
}
