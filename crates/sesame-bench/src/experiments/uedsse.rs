//! `uedsse`: seed 000's evaluation, in the paper's shape.
//!
//! - Fig. 2: UE Enc, ReEnc and Dec time per operation versus the number of
//!   documents encrypted (10 .. 100,000);
//! - Fig. 3 / 4: update time per document of FAST and UEDSSE under LAN and
//!   WAN versus the number of documents inserted (each size the fastest of
//!   3 to 7 rounds that alternate the two schemes, so that other work on
//!   the machine does not move their ratio: test
//!   `a_burst_during_one_scheme_does_not_move_the_update_ratio`);
//! - Fig. 5 / 6: search time of FAST and UEDSSE under LAN and WAN versus
//!   the number of matching documents (per search and per document);
//! - Table 4: communication of a search, SIMPLE versus UEDSSE, for 10 ..
//!   100,000 matching documents, and the reduction.
//!
//! Every search result is checked. WAN figures use the `wan103` model
//! (10 Mbit/s as in the paper, 103 ms one-way delay: the paper gives no
//! delay). See `docs/experiments/uedsse.md`.

use std::time::{Duration, Instant};

use rand::RngCore;
use rand_chacha::ChaCha20Rng;
use sesame_core::{Channel, LocalChannel, Params, Service, Snapshot};
use sesame_sse::uedsse::{UeKey, PAYLOAD_LEN};
use sesame_sse::{KeywordClient, KeywordScheme, Multimap, UpdateOp};

use crate::error::BenchError;
use crate::experiment::{Ctx, Experiment};
use crate::measure::{add_snapshot, local_channel, without_waits, Backend, OnCpu};
use crate::result::{Axis, Chart, ResultSet, Row, Value};

/// The `uedsse` experiment.
#[derive(Clone, Copy, Debug, Default)]
pub struct Uedsse;

const SOURCE_FIG2: &str = "seed 000 Fig. 2, at 1000 documents";
const SOURCE_FIG3: &str = "seed 000 Fig. 3 (LAN), at 1000 documents";
const SOURCE_FIG5: &str =
    "seed 000 Fig. 5 (LAN), at 100 documents; read as ms per matching document";

/// Why Fig. 5's ratio of UEDSSE's to FAST's search time can depart from
/// the paper's (docs/experiments/uedsse.md, "Reading the paper's figures").
const FIG5_WHY: &str = "FAST's search costs a hash and a store read per matching document: \
     the paper's reads RocksDB (0.016 ms per document), ours reads the in-process memory store \
     (microseconds), while UEDSSE's cost per document is its ReEnc and Dec, group operations on \
     both; so the ratio of the two searches follows the store's read cost against a group \
     operation, which differ between the two set-ups (the unit, ms per matching document, is \
     inferred from the paper's damaged text)";
/// Why Fig. 3's ratio of UEDSSE's to FAST's update time can depart from
/// the paper's 40 (docs/experiments/uedsse.md, "Reading the paper's
/// figures").
const FIG3_WHY: &str =
    "FAST's update is a keyed permutation, two hashes and a store write: the paper's writes \
     RocksDB (0.011 ms per update), ours the in-process memory store (about 1 to 2 µs), while \
     UEDSSE's update adds a UE Enc, a group operation in both set-ups (0.399 ms of the paper's \
     0.441); so the ratio of the two follows the store's write cost against a group \
     operation, which differ between the two set-ups, and ours is FAST-favoured (the two are \
     timed over alternating rounds, so the machine's load does not set it)";
const SOURCE_TABLE4: &str = "seed 000 Table 4 (KB = 1024 bytes)";

/// UE operations run before the timed ones.
const WARM_UP: usize = 200;

/// Table 4 of the paper: matching documents, SIMPLE KB, UEDSSE KB.
pub const TABLE4: [(usize, f64, f64); 5] = [
    (10, 1.13, 0.37),
    (100, 10.97, 3.19),
    (1000, 109.41, 31.31),
    (10_000, 1093.78, 312.56),
    (100_000, 10937.54, 3125.06),
];

/// Sizes of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Documents for the UE sweep and the update sweep.
    pub documents: Vec<usize>,
    /// Matching documents for the search sweep and Table 4.
    pub matches: Vec<usize>,
    /// Searches per result size and scheme.
    pub queries: usize,
}

impl Plan {
    /// Full: 10 .. 10^5 everywhere (the paper's sizes); standard: up to
    /// 10^4; quick: up to 10^3;
    /// tiny: 10 and 100.
    pub fn for_ctx(ctx: &Ctx) -> Plan {
        let full = vec![10, 100, 1_000, 10_000, 100_000];
        let standard = vec![10, 100, 1_000, 10_000];
        Plan {
            documents: ctx.pick(
                full.clone(),
                standard.clone(),
                vec![10, 100, 1_000],
                vec![10, 100],
            ),
            matches: ctx.pick(full, standard, vec![10, 100, 1_000], vec![10, 100]),
            queries: ctx.pick(3, 3, 2, 1),
        }
    }
}

fn scheme(name: &str) -> Result<KeywordScheme, BenchError> {
    sesame_sse::scheme(name).ok_or_else(|| {
        BenchError::InvalidArgument(format!("scheme {name} is not registered in sesame-sse"))
    })
}

fn ms_per(elapsed: std::time::Duration, n: usize) -> f64 {
    elapsed.as_secs_f64() * 1e3 / n.max(1) as f64
}

/// Fig. 2: the UE operations over `n` random payloads.
fn ue_row(ctx: &Ctx, n: usize) -> Result<Row, BenchError> {
    let mut rng = ctx.rng(&format!("ue/{n}"));
    let k = UeKey::generate(&mut rng);
    let k2 = UeKey::generate(&mut rng);
    let payloads: Vec<[u8; PAYLOAD_LEN]> = (0..n)
        .map(|_| {
            let mut p = [0u8; PAYLOAD_LEN];
            rng.fill_bytes(&mut p);
            p
        })
        .collect();
    let err = |what: &str| BenchError::WrongResult(format!("UE {what} failed at {n} documents"));
    // Warm caches and the CPU's clock before timing (small sizes would
    // otherwise measure a cold start).
    for p in payloads.iter().cycle().take(WARM_UP) {
        let c = k.encrypt(p).map_err(|_| err("Enc"))?;
        k.decrypt(&c).map_err(|_| err("Dec"))?;
    }
    // Each round times the three phases in turn; the fastest of each is
    // kept, so that a burst of other work on the machine during one
    // phase's loop (a shared machine) slows one round of it, not the ratio
    // between the phases the fidelity table compares.
    let token = k.update_token(&k2);
    let [enc, reenc, dec] = fastest_of_rounds(ue_rounds(n), || {
        let (cts, enc) = timed_all(&payloads, |p| k.encrypt(p), || err("Enc"))?;
        let (fresh, reenc) = timed_all(&cts, |c| token.re_encrypt(c), || err("ReEnc"))?;
        let (back, dec) = timed_all(&fresh, |c| k2.decrypt(c), || err("Dec"))?;
        if back != payloads {
            return Err(err("round trip"));
        }
        Ok([enc, reenc, dec])
    })?;
    // `size`: the count as a word, the categories of Fig. 2's bars.
    let mut row = Row::new()
        .param("op", "ue")
        .param("documents", n)
        .param("size", n.to_string());
    row.set("enc_ms", ms_per(enc, n))
        .set("reenc_ms", ms_per(reenc, n))
        .set("dec_ms", ms_per(dec, n));
    if n == 1000 {
        row.paper_any_scale("enc_ms", 0.399, "ms per Enc", SOURCE_FIG2)
            .paper_any_scale("reenc_ms", 0.535, "ms per ReEnc", SOURCE_FIG2)
            .paper_any_scale("dec_ms", 0.528, "ms per Dec", SOURCE_FIG2);
    }
    Ok(row)
}

/// `f` over every item, and the time it took on the CPU (the wall-clock
/// time less the thread's waits for a CPU, [`without_waits`]); a failure
/// is `fail()`.
fn timed_all<I, T, E>(
    items: &[I],
    f: impl Fn(&I) -> Result<T, E>,
    fail: impl Fn() -> BenchError,
) -> Result<(Vec<T>, Duration), BenchError> {
    let on_cpu = OnCpu::start();
    let t = Instant::now();
    let out = items
        .iter()
        .map(f)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| fail())?;
    let mut span = Snapshot {
        wall_ns: u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX),
        ..Snapshot::default()
    };
    without_waits(&mut span, on_cpu.elapsed());
    Ok((out, Duration::from_nanos(span.wall_ns)))
}

/// Rounds of the UE timing at `n` documents: 7 for small `n`, down to 3
/// at 100,000 (each round runs `3 n` group operations).
fn ue_rounds(n: usize) -> usize {
    (20_000 / n.max(1)).clamp(3, 7)
}

/// Runs `round` `rounds` times and keeps, for each of its `N` phases, the
/// fastest time: the least disturbed by other work on the machine.
fn fastest_of_rounds<const N: usize>(
    rounds: usize,
    mut round: impl FnMut() -> Result<[Duration; N], BenchError>,
) -> Result<[Duration; N], BenchError> {
    let mut best = round()?;
    for _ in 1..rounds {
        for (b, t) in best.iter_mut().zip(round()?) {
            *b = (*b).min(t);
        }
    }
    Ok(best)
}

/// The channel from a client to its in-process server.
type Link = LocalChannel<Box<dyn Service>>;

/// A client of `s` set up with `db` on a fresh memory store, and its
/// channel to the server.
fn set_up(
    ctx: &Ctx,
    s: &KeywordScheme,
    name: &str,
    rng: &mut ChaCha20Rng,
    db: &Multimap,
) -> Result<(Box<dyn KeywordClient>, Link), BenchError> {
    let (store, _) = Backend::Memory.open(&ctx.work_dir, "unused")?;
    let mut client = (s.new_client)(rng, &Params::new())
        .map_err(|e| BenchError::scheme(format!("{name}: new client"), e))?;
    let mut ch = local_channel(
        s.server(store, &Params::new())
            .map_err(|e| BenchError::scheme("server", e))?,
    );
    client
        .setup(rng, &mut ch, db)
        .map_err(|e| BenchError::scheme(format!("{name}: setup"), e))?;
    Ok((client, ch))
}

/// The schemes of Fig. 3 / 4, in the order each round times them.
const UPDATE_SCHEMES: [&str; 2] = ["fast", "uedsse"];

/// Rounds of the update timing at `n` documents: 7 for small `n`, down to
/// 3 at 10,000 (UEDSSE's update is a group operation, about 0.2 ms).
fn update_rounds(n: usize) -> usize {
    (20_000 / n.max(1)).clamp(3, 7)
}

/// Runs `time(i)` for each of the schemes `0..schemes` in turn, `rounds`
/// times, and keeps for each scheme the run of least `cost`: the one least
/// disturbed by other work on the machine. The schemes alternate within
/// each round, so that a burst of other work slows a round of each scheme
/// or one of them once, not every timing of one scheme: the ratio between
/// the schemes, which the fidelity table compares, is then the machine's
/// undisturbed one.
fn fastest_alternating<T>(
    schemes: usize,
    rounds: usize,
    cost: impl Fn(&T) -> u64,
    mut time: impl FnMut(usize) -> Result<T, BenchError>,
) -> Result<Vec<T>, BenchError> {
    let mut best: Vec<T> = Vec::with_capacity(schemes);
    for i in 0..schemes {
        best.push(time(i)?);
    }
    for _ in 1..rounds {
        for (i, b) in best.iter_mut().enumerate() {
            let t = time(i)?;
            if cost(&t) < cost(b) {
                *b = t;
            }
        }
    }
    Ok(best)
}

/// Fig. 3 / 4 at `n` documents: a row per scheme of [`UPDATE_SCHEMES`],
/// each the fastest of [`update_rounds`] rounds that alternate the
/// schemes (see [`fastest_alternating`]).
fn update_rows(ctx: &Ctx, n: usize) -> Result<Vec<Row>, BenchError> {
    let snaps = fastest_alternating(
        UPDATE_SCHEMES.len(),
        update_rounds(n),
        |s: &Snapshot| s.client_ns + s.server_ns,
        |i| update_once(ctx, UPDATE_SCHEMES[i], n),
    )?;
    Ok(UPDATE_SCHEMES
        .iter()
        .zip(&snaps)
        .map(|(name, snap)| {
            let mut row = Row::new()
                .param("op", "update")
                .param("scheme", *name)
                .param("documents", n);
            add_snapshot(&mut row, snap, n as u64);
            if n == 1000 {
                let paper = if *name == "fast" { 0.011 } else { 0.441 };
                row.paper_any_scale("lan_ms", paper, "ms per update", SOURCE_FIG3)
                    .why("lan_ms", FIG3_WHY);
            }
            row
        })
        .collect())
}

/// `n` documents inserted into a fresh index of `name`, one update (one
/// round) each, one keyword per document out of 10, the result checked:
/// what the meter saw over the updates.
fn update_once(ctx: &Ctx, name: &str, n: usize) -> Result<Snapshot, BenchError> {
    let s = scheme(name)?;
    let mut rng = ctx.rng(&format!("update/{name}/{n}"));
    let (mut client, mut ch) = set_up(ctx, &s, name, &mut rng, &Multimap::new())?;
    let keywords: Vec<Vec<u8>> = (0..10).map(|i| format!("w{i}").into_bytes()).collect();
    let span = ch.meter().span();
    for doc in 0..n {
        let w = std::slice::from_ref(&keywords[doc % keywords.len()]);
        client
            .update(&mut rng, &mut ch, UpdateOp::Add, doc as u64, w)
            .map_err(|e| BenchError::scheme(format!("{name}: update"), e))?;
    }
    let snap = span.finish();
    // The last keyword's documents must all be there.
    let w = &keywords[(n - 1) % keywords.len()];
    let want: Vec<u64> = (0..n as u64)
        .filter(|d| *d as usize % keywords.len() == (n - 1) % keywords.len())
        .collect();
    let got = client
        .search(&mut rng, &mut ch, w)
        .map_err(|e| BenchError::scheme(format!("{name}: search after updates"), e))?;
    if got != want {
        return Err(BenchError::WrongResult(format!(
            "{name}: {} ids after {n} updates, expected {}",
            got.len(),
            want.len()
        )));
    }
    Ok(snap)
}

/// The keyword of the search sweep that matches `n` documents.
fn level_keyword(n: usize) -> Vec<u8> {
    format!("m{n}").into_bytes()
}

/// Fig. 5 / 6 and Table 4: one index holding a keyword per result size;
/// `queries` searches each.
fn search_rows(ctx: &Ctx, name: &str, plan: &Plan) -> Result<Vec<Row>, BenchError> {
    let s = scheme(name)?;
    let mut rng = ctx.rng(&format!("search/{name}"));
    let mut db = Multimap::new();
    for &n in &plan.matches {
        db.insert(level_keyword(n), (0..n as u64).collect());
    }
    let (mut client, mut ch) = set_up(ctx, &s, name, &mut rng, &db)?;
    let mut rows = Vec::new();
    for &n in &plan.matches {
        let w = level_keyword(n);
        let mut total = Snapshot::default();
        for _ in 0..plan.queries {
            let span = ch.meter().span();
            let ids = client
                .search(&mut rng, &mut ch, &w)
                .map_err(|e| BenchError::scheme(format!("{name}: search"), e))?;
            total.add(&span.finish());
            if ids.len() != n || ids.iter().enumerate().any(|(i, &id)| id != i as u64) {
                return Err(BenchError::WrongResult(format!(
                    "{name}: search of {n} documents gave {} ids",
                    ids.len()
                )));
            }
        }
        let mut row = Row::new()
            .param("op", "search")
            .param("scheme", name)
            .param("matches", n)
            .param("queries", plan.queries);
        add_snapshot(&mut row, &total, plan.queries as u64);
        let get = |row: &Row, f: &str| row.figures.get(f).copied().unwrap_or(0.0);
        let (lan, wan) = (get(&row, "lan_ms"), get(&row, "wan103_ms"));
        let server = get(&row, "server_ms");
        let kb = (get(&row, "bytes_up") + get(&row, "bytes_down")) / 1024.0;
        row.set("lan_ms_per_doc", lan / n as f64)
            .set("wan103_ms_per_doc", wan / n as f64)
            .set("server_ms_per_doc", server / n as f64)
            .set("kb", kb);
        if n == 100 {
            match name {
                "fast" => {
                    row.paper_any_scale("lan_ms_per_doc", 0.016, "ms per document", SOURCE_FIG5)
                        .why("lan_ms_per_doc", FIG5_WHY);
                }
                "uedsse" => {
                    row.paper_any_scale("lan_ms_per_doc", 0.74, "ms per document", SOURCE_FIG5)
                        .why("lan_ms_per_doc", FIG5_WHY);
                }
                _ => {}
            }
        }
        if let Some(&(_, simple_kb, uedsse_kb)) = TABLE4.iter().find(|t| t.0 == n) {
            match name {
                "simple" => {
                    row.paper_any_scale("kb", simple_kb, "KB per search", SOURCE_TABLE4);
                }
                "uedsse" => {
                    row.paper_any_scale("kb", uedsse_kb, "KB per search", SOURCE_TABLE4);
                }
                _ => {}
            }
        }
        rows.push(row);
    }
    Ok(rows)
}

/// Table 4's reduction rows from the SIMPLE and UEDSSE search rows.
fn reduction_rows(rows: &[Row]) -> Vec<Row> {
    let kb = |scheme: &str, n: usize| {
        rows.iter()
            .find(|r| {
                r.params.get("op") == Some(&Value::from("search"))
                    && r.params.get("scheme") == Some(&Value::from(scheme))
                    && r.number("matches") == Some(n as f64)
            })
            .and_then(|r| r.figures.get("kb").copied())
    };
    let mut out = Vec::new();
    let matches: Vec<usize> = rows
        .iter()
        .filter(|r| r.params.get("op") == Some(&Value::from("search")))
        .filter_map(|r| r.number("matches").map(|m| m as usize))
        .fold(Vec::new(), |mut v, m| {
            if !v.contains(&m) {
                v.push(m);
            }
            v
        });
    for n in matches {
        let (Some(simple), Some(ue)) = (kb("simple", n), kb("uedsse", n)) else {
            continue;
        };
        let mut row = Row::new().param("op", "table4").param("matches", n);
        row.set("simple_kb", simple)
            .set("uedsse_kb", ue)
            .set("reduction_pct", 100.0 * (1.0 - ue / simple));
        if let Some(&(_, s, u)) = TABLE4.iter().find(|t| t.0 == n) {
            // Per search at a result size the row fixes: the same at
            // every scale.
            row.paper_any_scale("simple_kb", s, "KB", SOURCE_TABLE4)
                .paper_any_scale("uedsse_kb", u, "KB", SOURCE_TABLE4)
                .paper_any_scale("reduction_pct", 100.0 * (1.0 - u / s), "%", SOURCE_TABLE4);
        }
        out.push(row);
    }
    out
}

fn charts() -> Vec<Chart> {
    let log = |label: &str| Axis {
        label: label.to_owned(),
        log: true,
    };
    let chart =
        |file: &str, title: &str, op: &str, x: &str, y: &[&str], xl: &str, yl: &str| Chart {
            file: file.to_owned(),
            title: title.to_owned(),
            x: x.to_owned(),
            y: y.iter().map(|s| (*s).to_owned()).collect(),
            series: if op == "ue" {
                Vec::new()
            } else {
                vec!["scheme".to_owned()]
            },
            filter: vec![("op".to_owned(), Value::from(op))],
            x_axis: log(xl),
            y_axis: log(yl),
        };
    let mut fig5 = chart(
        "fig5-search-lan",
        "Fig. 5: search time per matching document, LAN",
        "search",
        "matches",
        &["lan_ms_per_doc"],
        "matching documents",
        "ms per document",
    );
    let mut fig6 = chart(
        "fig6-search-wan",
        "Fig. 6: search time per matching document, WAN (10 Mbit/s, 103 ms)",
        "search",
        "matches",
        &["wan103_ms_per_doc"],
        "matching documents",
        "ms per document",
    );
    for c in [&mut fig5, &mut fig6] {
        c.series = vec!["scheme".to_owned()];
    }
    let mut fig2 = chart(
        "fig2-ue",
        "Fig. 2: UE Enc, ReEnc, Dec time per operation",
        "ue",
        "documents",
        &["enc_ms", "reenc_ms", "dec_ms"],
        "documents",
        "ms per operation",
    );
    // Grouped bars over the document counts, with a linear y axis, as the
    // paper draws it (the times are flat in the count).
    fig2.x = "size".to_owned();
    fig2.x_axis.log = false;
    fig2.y_axis.log = false;
    vec![
        fig2,
        chart(
            "fig3-update-lan",
            "Fig. 3: update time per document, LAN",
            "update",
            "documents",
            &["lan_ms"],
            "documents inserted",
            "ms per update",
        ),
        chart(
            "fig4-update-wan",
            "Fig. 4: update time per document, WAN (10 Mbit/s, 103 ms)",
            "update",
            "documents",
            &["wan103_ms"],
            "documents inserted",
            "ms per update",
        ),
        fig5,
        fig6,
        chart(
            "table4-communication",
            "Table 4: communication per search, SIMPLE vs UEDSSE (KB)",
            "search",
            "matches",
            &["kb"],
            "matching documents",
            "KB per search (up + down)",
        ),
    ]
}

impl Experiment for Uedsse {
    fn name(&self) -> &'static str {
        "uedsse"
    }

    fn title(&self) -> &'static str {
        "UEDSSE vs FAST vs SIMPLE: UE costs, update, search, communication"
    }

    fn seed_paper(&self) -> &'static str {
        "seed 000 (UEDSSE), §6: Fig. 2-6 and Table 4"
    }

    fn run(&self, ctx: &Ctx) -> Result<ResultSet, BenchError> {
        let mut rs = ctx.result_set(self);
        rs.display = [
            "enc_ms",
            "reenc_ms",
            "dec_ms",
            "client_ms",
            "server_ms",
            "lan_ms",
            "wan103_ms",
            "lan_ms_per_doc",
            "wan103_ms_per_doc",
            "bytes_up",
            "bytes_down",
            "kb",
            "simple_kb",
            "uedsse_kb",
            "reduction_pct",
        ]
        .map(str::to_owned)
        .to_vec();
        rs.charts = charts();
        let plan = Plan::for_ctx(ctx);
        for &n in &plan.documents {
            rs.rows.push(ue_row(ctx, n)?);
        }
        let mut updates = Vec::new();
        for &n in &plan.documents {
            updates.extend(update_rows(ctx, n)?);
        }
        // FAST's rows first, then UEDSSE's, as the paper's series.
        for name in UPDATE_SCHEMES {
            rs.rows.extend(
                updates
                    .iter()
                    .filter(|r| r.params.get("scheme") == Some(&Value::from(name)))
                    .cloned(),
            );
        }
        for name in ["fast", "uedsse", "simple"] {
            let rows = search_rows(ctx, name, &plan)?;
            rs.rows.extend(rows);
        }
        let reductions = reduction_rows(&rs.rows);
        rs.rows.extend(reductions);
        rs.notes.push(
            "times are in-process on the memory store (client and server on one thread); lan and \
             wan103 add rounds x RTT and bytes / bandwidth; the paper's WAN is 10 Mbit/s with no \
             stated delay: wan103 takes 103 ms one way"
                .to_owned(),
        );
        rs.notes.push(format!(
            "updates: one update (one round) per document, documents spread over 10 keywords; \
             searches: {} per result size, every result checked; UEDSSE and SIMPLE searches \
             refresh the index, so each search runs on the previous one's ciphertexts",
            plan.queries
        ));
        rs.notes.push(
            "search figures per matching document (lan_ms_per_doc) are the paper's unit for \
             Fig. 5/6 (see docs/experiments/uedsse.md); kb = (bytes up + down) / 1024"
                .to_owned(),
        );
        Ok(rs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cause of Fig. 2's Dec time once measured at 0.39x the paper's
    /// ratio to Enc and ReEnc: each phase timed once, in turn, on a shared
    /// machine, so a burst of other work during one phase's loop was that
    /// phase's time. Here the first round's Dec ran during such a burst.
    #[test]
    fn a_burst_during_one_phase_does_not_move_the_ue_ratios() {
        let ms = Duration::from_millis;
        let rounds = [
            [ms(40), ms(30), ms(90)],
            [ms(41), ms(31), ms(30)],
            [ms(40), ms(30), ms(31)],
        ];
        let run = |n: usize| {
            let mut it = rounds.iter().copied();
            fastest_of_rounds(n, || Ok(it.next().unwrap_or([ms(99); 3]))).unwrap()
        };
        // One round (the timing before): the burst is the measurement.
        assert_eq!(run(1), [ms(40), ms(30), ms(90)]);
        // Three rounds: the fastest of each phase, the burst left out.
        assert_eq!(run(3), [ms(40), ms(30), ms(30)]);
        assert_eq!(ue_rounds(1000), 7);
        assert_eq!(ue_rounds(100_000), 3);
    }

    /// Fig. 3's update time of FAST against UEDSSE, once timed by one run
    /// of each scheme: a burst of other work on the machine during one of
    /// them was that scheme's time, and the ratio the fidelity table
    /// compares moved with it (FAST at 0.28x, UEDSSE at 3.6x the paper's in
    /// a loaded run). Here the machine is five times slower during some
    /// timings: the first one alone, or the first three in a row.
    #[test]
    fn a_burst_during_one_scheme_does_not_move_the_update_ratio() {
        let (fast, uedsse) = (10u64, 400u64);
        let run = |rounds: usize, burst: usize| {
            let mut calls = 0;
            fastest_alternating(
                2,
                rounds,
                |t: &u64| *t,
                |i| {
                    let slow = if calls < burst { 5 } else { 1 };
                    calls += 1;
                    Ok([fast, uedsse][i] * slow)
                },
            )
            .unwrap()
        };
        // One burst during the first timing, FAST's.
        assert_eq!(run(update_rounds(1000), 1), [fast, uedsse]);
        // A burst over three timings in a row: alternating, each scheme
        // still has a round outside it.
        assert_eq!(run(3, 3), [fast, uedsse]);
        assert_eq!(update_rounds(1000), 7);
        assert_eq!(update_rounds(10_000), 3);
    }

    #[test]
    fn tiny_run_has_every_figure_of_the_paper() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Ctx::tiny(dir.path());
        let rs = Uedsse.run(&ctx).unwrap();
        let count = |op: &str| rs.rows_with("op", op);
        // Two sizes: UE rows, 2 schemes x 2 update rows, 3 x 2 search rows,
        // 2 Table 4 rows.
        assert_eq!(
            (
                count("ue"),
                count("update"),
                count("search"),
                count("table4")
            ),
            (2, 4, 6, 2)
        );
        let t4 = rs
            .rows
            .iter()
            .find(|r| {
                r.params.get("op") == Some(&Value::from("table4"))
                    && r.number("matches") == Some(100.0)
            })
            .unwrap();
        let pct = t4.figures.get("reduction_pct").copied().unwrap();
        assert!(pct > 60.0 && pct < 75.0, "{pct}");
        for c in &rs.charts {
            assert!(rs.rows.iter().any(|r| c.selects(r)), "{}", c.file);
        }
    }

    #[test]
    fn reduction_matches_the_papers_arithmetic() {
        let mut rows = Vec::new();
        for (scheme, kb) in [("simple", 10.97), ("uedsse", 3.19)] {
            let mut r = Row::new()
                .param("op", "search")
                .param("scheme", scheme)
                .param("matches", 100usize);
            r.set("kb", kb);
            rows.push(r);
        }
        let red = reduction_rows(&rows);
        assert_eq!(red.len(), 1);
        let pct = red[0].figures.get("reduction_pct").copied().unwrap();
        // The paper's 70.92% at 100 documents.
        assert!((pct - 70.92).abs() < 0.01, "{pct}");
    }
}
