//! The range-protocol rows: value reconstruction, approximate order and
//! the volume attack from the records each range query returned.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::Rng;
use sesame_core::view::{Event, RecordingService, RecordingStore, View};
use sesame_core::{LocalChannel, Params, Store};
use sesame_store::MemoryStore;

use super::returned::{log_brc_records, values_from_intervals, Returned};
use super::{bits_for, pct, scheme_err, Plan, RANGE_PROTOCOLS};
use crate::data::Flights;
use crate::error::BenchError;
use crate::experiment::Ctx;
use crate::result::{ResultSet, Row};

/// The range-protocol rows: uniform range queries over a small domain,
/// the records each returned read from the server's view, then value
/// reconstruction (KKNO) and approximate order (GLMP, simplified).
pub(super) fn range_rows(ctx: &Ctx, plan: &Plan, rs: &mut ResultSet) -> Result<(), BenchError> {
    // A dense, small-domain column: the flights' departure hour, or a
    // synthetic stand-in (the notes of the numeric rows say which).
    let values: Vec<u64> = match Flights::load(&ctx.data_dir) {
        Ok(f) => {
            let col = f.column("hour")?;
            let mut v: Vec<u64> = col
                .present()
                .into_iter()
                .filter(|v| *v >= 0.0)
                .map(|v| v as u64)
                .collect();
            v.shuffle(&mut ctx.rng("attacks/range/rows"));
            v.truncate(plan.range_rows);
            v
        }
        Err(BenchError::DataMissing { .. }) => {
            let mut rng = ctx.rng("attacks/range/rows");
            (0..plan.range_rows)
                .map(|_| 5 + (rng.gen::<f64>().powi(2) * 19.0) as u64)
                .collect()
        }
        Err(e) => return Err(e),
    };
    let lo = values.iter().copied().min().unwrap_or(0);
    let hi = values.iter().copied().max().unwrap_or(0);
    let n = hi - lo + 1;
    let truth: Vec<u64> = values.iter().map(|v| v - lo + 1).collect();
    // How many records each value holds: what the volume attack recovers.
    let mut histogram = vec![0u64; usize::try_from(n).unwrap_or(0)];
    for v in &truth {
        if let Some(c) = histogram.get_mut((*v - 1) as usize) {
            *c += 1;
        }
    }
    let mut qrng = ctx.rng("attacks/range/queries");
    let intervals: Vec<(u64, u64)> = (lo..=hi)
        .flat_map(|a| (a..=hi).map(move |b| (a, b)))
        .collect();
    let queries: Vec<(u64, u64)> = (0..plan.range_queries)
        .filter_map(|_| intervals.choose(&mut qrng).copied())
        .collect();
    let bits = bits_for(hi);
    for name in RANGE_PROTOCOLS {
        let protocol = sesame_range::protocol(name).ok_or_else(|| {
            BenchError::InvalidArgument(format!("{name} is not registered in sesame-range"))
        })?;
        let view = View::new();
        let store: Arc<dyn Store> = Arc::new(RecordingStore::new(
            Arc::new(MemoryStore::new()),
            view.clone(),
        ));
        let page = sesame_range::PageConfig::default();
        let server = protocol
            .server(store, &page.with(&Params::new()))
            .map_err(|e| scheme_err(name, "server", e))?;
        let mut ch = LocalChannel::new(RecordingService::new(server, view.clone()));
        let mut rng = ctx.rng(&format!("attacks/range/{name}"));
        let mut params = Params::new();
        params.set("bits", bits);
        let mut client = (protocol.new_client)(&mut rng, &page.with(&params))
            .map_err(|e| scheme_err(name, "client", e))?;
        view.start();
        let mut insertions = Vec::with_capacity(values.len());
        // Log-BRC is built in one batch (its paper's construction; each
        // insertion would rebuild): its records are named by their sealed
        // bytes in the build's requests.
        let batch = name.starts_with("log-brc");
        if batch {
            let records: Vec<(u64, Vec<u8>)> = values
                .iter()
                .enumerate()
                .map(|(i, v)| (*v, (i as u64).to_be_bytes().to_vec()))
                .collect();
            view.take();
            client
                .build(&mut rng, &mut ch, &records)
                .map_err(|e| scheme_err(name, "build", e))?;
            let requests: Vec<Vec<u8>> = view
                .take()
                .into_iter()
                .filter_map(|e| match e {
                    Event::Request(r) => Some(r),
                    _ => None,
                })
                .collect();
            insertions = log_brc_records(&requests);
        }
        for (i, v) in values.iter().enumerate() {
            if batch {
                break;
            }
            view.take();
            client
                .insert(&mut rng, &mut ch, *v, &(i as u64).to_be_bytes())
                .map_err(|e| scheme_err(name, "insert", e))?;
            let mut req = Vec::new();
            for e in view.take() {
                if let Event::Request(r) = e {
                    req.extend_from_slice(&r);
                    req.push(0);
                }
            }
            insertions.push(req);
        }
        // Path ORAM answers with whole paths (megabytes per query): it
        // runs the first `plan.oram_queries` queries only.
        let queries = if name == "path-oram" {
            &queries[..plan.oram_queries.min(queries.len())]
        } else {
            &queries[..]
        };
        // Each query's responses are read as they come: only the records
        // they returned are kept.
        let records = insertions.len();
        let mut returned = Returned::new(&insertions);
        drop(insertions);
        let mut sets = Vec::with_capacity(queries.len());
        // The queries' time, not the reading of their responses.
        let mut elapsed = Duration::ZERO;
        for (a, b) in queries {
            view.take();
            let start = Instant::now();
            client
                .query(&mut rng, &mut ch, *a, *b)
                .map_err(|e| scheme_err(name, "query", e))?;
            elapsed += start.elapsed();
            let responses: Vec<Vec<u8>> = view
                .take()
                .into_iter()
                .filter_map(|e| match e {
                    Event::Response(r) => Some(r),
                    _ => None,
                })
                .collect();
            sets.push(returned.query(&responses));
        }
        let query_ms = elapsed.as_secs_f64() * 1e3 / queries.len().max(1) as f64;
        view.stop();
        let identified = returned.identified();
        drop(returned);
        // A batch build's records are in an order the client chose: their
        // values, for scoring, come from the intervals that returned them.
        let truth = if batch {
            values_from_intervals(records, &sets, queries, lo, hi)
        } else {
            truth.clone()
        };
        let got = sesame_attacks::range::values(truth.len(), n, &sets);
        let ranking = sesame_attacks::range::order(truth.len(), &sets);
        // Volumes alone: the number of records each query returned.
        let by_volume =
            sesame_attacks::range_volume::counts(&sesame_attacks::range_volume::volumes(&sets), n);
        // For scoring only: the queries whose observed volume is their
        // interval's true number of records.
        let exact_volumes = queries
            .iter()
            .zip(&sets)
            .filter(|((a, b), set)| {
                values.iter().filter(|v| (*a..=*b).contains(*v)).count() == set.len()
            })
            .count();
        let mut row = Row::new()
            .param("op", "range")
            .param("scheme", name)
            .param("queries", queries.len());
        row.set(
            "volumes_exact",
            pct(exact_volumes as f64 / queries.len().max(1) as f64),
        );
        match &by_volume {
            Ok(counts) => {
                row.set(
                    "volume_counts",
                    pct(sesame_attacks::range_volume::count_agreement(
                        counts, &histogram,
                    )),
                );
            }
            Err(why) => {
                row = row.param("volume_declined", why.reason());
                row.set("volume_counts", 0.0);
            }
        }
        row.set(
            "recovery",
            pct(sesame_attacks::range::value_agreement(&got, &truth, n, 0)),
        );
        row.set(
            "within_one",
            pct(sesame_attacks::range::value_agreement(&got, &truth, n, 1)),
        );
        row.set(
            "order",
            pct(sesame_attacks::range::order_agreement(&ranking, &truth)),
        );
        row.set(
            "identified",
            pct(identified as f64 / values.len().max(1) as f64),
        );
        row.set("query_ms", query_ms);
        rs.rows.push(row);
    }
    rs.rows.push(
        Row::new()
            .param("op", "range")
            .param("scheme", "bplus-cloz")
            .param(
                "not_applicable",
                "not run: its comparisons are pairings, too slow for this many queries; it \
                 returns records as bplus-clww does",
            ),
    );
    rs.notes.push(format!(
        "range protocols: {} records of a {n}-value column (flights departure hour, or a \
         synthetic stand-in), {} range queries drawn uniformly from the column's intervals; \
         a record counts as returned when a response holds a 16-byte window that only its \
         insertion request held (Log-BRC, built in one batch: only its sealed record in the \
         build's requests; its values, for scoring, from the intervals that returned it); \
         recovery = records whose value KKNO names exactly, within_one \
         = within one, order = record pairs GLMP-style ordering puts right (50 % is chance), \
         volume_counts = values whose record count the volume attack (GLMP, CCS 2018) names \
         exactly from the distinct numbers of records the queries returned (0 where it \
         declines, with the reason), all up to reflection; volumes_exact = queries whose \
         number of records returned is their interval's true one (scoring only); Path ORAM runs the first {} queries only (its answers are \
         whole paths)",
        values.len(),
        queries.len(),
        plan.oram_queries
    ));
    Ok(())
}
