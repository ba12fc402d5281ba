//! The run's front page: `index.html` over every experiment of a run, with
//! the machine, the date and the commit, and the **fidelity table**: one
//! row per paper figure we reproduce (the paper's value, ours, their ratio
//! and a verdict), also written as `fidelity.json` and `fidelity.csv`.
//!
//! Verdicts (see [`comparisons`]):
//! - `matches`: ours is within a factor of [`TOLERANCE`] of the paper's;
//!   a time by its ratio to the other times of its table or figure in the
//!   same run;
//! - `differs`: it is not (the `why` column and the experiment's page say
//!   why);
//! - `not comparable: a lone time`: a time with no other of its group
//!   (a time the paper did not take, marked with
//!   [`crate::result::Row::ratio_to`], is compared with its partner
//!   group's machine factor, which it does not enter);
//! - `not comparable: <scale> scale`: a run below the papers' sizes, for a
//!   figure that grows with the data size and whose paper states no law
//!   of that growth. Figures marked
//!   [`crate::result::PaperFigure::any_scale`] (counts per operation,
//!   sizes whose configuration the row's parameters fix) are compared at
//!   every scale; figures with a [`crate::result::Growth`] are compared at
//!   the paper's size, ours scaled by the paper's law (column `scaled`);
//!   where the law bounds the growth instead ([`crate::growth::Law::NonDecreasing`],
//!   [`crate::growth::Law::AtMostLinear`]), by the range ours lies in
//!   there: matched or differing only when the whole range is.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::error::BenchError;
use crate::measure::median;
use crate::report::escape;
use crate::result::{csv_cell, Growth, ResultSet};

/// Ours within this factor of the paper's value (either way) matches; for
/// a time, the factor applies to its ratio to the other times of the same
/// paper table or figure (see [`comparisons`]).
pub const TOLERANCE: f64 = 2.0;

/// One paper figure beside ours.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// The experiment.
    pub experiment: String,
    /// The row's parameters, `name=value` separated by spaces.
    pub configuration: String,
    /// The figure's name.
    pub figure: String,
    /// The paper's value.
    pub paper: f64,
    /// Its unit.
    pub unit: String,
    /// Where the paper says it.
    pub source: String,
    /// Ours, as measured.
    pub ours: f64,
    /// Where the paper states how the figure grows with the data size and
    /// our run is at another size: the law and the factor ours is scaled
    /// by to stand at the paper's size (empty otherwise).
    pub scaled: String,
    /// Ours (scaled to the paper's size where [`Comparison::scaled`] says
    /// so) divided by the paper's.
    pub ratio: f64,
    /// For a time: [`Comparison::ratio`] divided by the machine factor
    /// of its group (see [`comparisons`]; NaN, written as an empty cell or
    /// `null`, for other figures and for times that are not compared).
    pub relative: f64,
    /// See the module documentation.
    pub verdict: String,
    /// Why a figure differs or is not comparable (empty when it matches).
    pub why: String,
}

/// Whether a unit is a time (machine-dependent).
fn is_time(unit: &str) -> bool {
    let u = unit.to_ascii_lowercase();
    ["ms", "µs", "us", "ns", "second", "minute"]
        .iter()
        .any(|t| {
            u.split(|c: char| !c.is_alphanumeric() && c != 'µ')
                .any(|w| w == *t)
        })
        || u == "s"
        || u.starts_with("s ")
}

/// `1.234` with at most three significant decimals.
fn short(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Every paper figure of `sets` that has our figure of the same name, with
/// its verdict:
///
/// - a figure that is not a time matches when ours is within a factor of
///   [`TOLERANCE`] of the paper's; below full scale, only figures marked
///   [`crate::result::PaperFigure::any_scale`] are compared;
/// - a time is compared by what the machine does not change: its ratio to
///   the other times of the same experiment and paper source (a table or a
///   figure) measured in the same run. With two times in the group, each is
///   compared with the other: their ratio (e.g. UEDSSE's update time over
///   FAST's, or Enc over ReEnc) against the paper's; with three or more,
///   the machine factor is the median of ours / paper over the group (the
///   geometric middle, which one outlying scheme does not move) and each
///   time's ours / paper divided by it is compared. Within [`TOLERANCE`]
///   matches. The same scale rule applies; a time with no other time of
///   its group to compare with is not comparable, and says so.
///
/// Each row that differs or is not comparable carries a reason: the one
/// the experiment recorded ([`crate::Row::why`]), else one stating the rule
/// that applied.
pub fn comparisons(sets: &[ResultSet]) -> Vec<Comparison> {
    let mut out = Vec::new();
    for rs in sets {
        // The times compared, settled once their groups are known.
        let mut times: Vec<Timed> = Vec::new();
        for row in &rs.rows {
            for p in &row.paper {
                let Some(measured) = row.figures.get(&p.name).copied() else {
                    continue;
                };
                // Ours at the paper's size, by the paper's growth law.
                let factor = p.growth.as_ref().and_then(Growth::factor);
                let ours = measured * factor.unwrap_or(1.0);
                let scaled = p.growth.as_ref().map_or_else(String::new, Growth::describe);
                let ratio = if p.value != 0.0 {
                    ours / p.value
                } else {
                    f64::NAN
                };
                let time = is_time(&p.unit);
                let (verdict, why) = if let (Some(g), None) = (&p.growth, factor) {
                    // Ours at the paper's size lies in [low, high]: the
                    // law's range (from ours up, without bound, for a law
                    // that only says it does not shrink).
                    let (low, high) = g.range(measured).unwrap_or((measured, f64::INFINITY));
                    let judged = !time && p.value > 0.0;
                    let within_reason = || -> String {
                        let rule = if high.is_finite() {
                            format!(
                                "by the law, ours at the paper's {} {} is between {} and {} \
                                 ({}x to {}x the paper's), not all of it within the factor \
                                 {TOLERANCE} nor all outside it: the full run (--full) \
                                 compares it",
                                g.paper,
                                g.of,
                                short(low),
                                short(high),
                                short(low / p.value),
                                short(high / p.value)
                            )
                        } else {
                            format!(
                                "ours at {} {} is within the paper's band or below it, \
                                 and the paper states no law by which it grows to its {} \
                                 {}: the full run (--full) compares it",
                                g.ours, g.of, g.paper, g.of
                            )
                        };
                        match &p.why {
                            Some(r) => format!("{r}; {rule}"),
                            None => rule,
                        }
                    };
                    if judged && low > TOLERANCE * p.value {
                        // Ours can only grow up to the paper's size: above
                        // the band already, it differs there too.
                        (
                            "differs".to_owned(),
                            p.why.clone().unwrap_or_else(|| {
                                format!(
                                    "ours is {}x the paper's at {} {}, and it does not shrink \
                                     as the {} grow to the paper's {}",
                                    short(ratio),
                                    g.ours,
                                    g.of,
                                    g.of,
                                    g.paper
                                )
                            }),
                        )
                    } else if judged && high < p.value / TOLERANCE {
                        (
                            "differs".to_owned(),
                            p.why.clone().unwrap_or_else(|| {
                                format!(
                                    "grown by the law to the paper's {} {}, ours is at most \
                                     {}x the paper's",
                                    g.paper,
                                    g.of,
                                    short(high / p.value)
                                )
                            }),
                        )
                    } else if judged && within(low, p.value) && within(high, p.value) {
                        ("matches".to_owned(), String::new())
                    } else {
                        (
                            format!("not comparable: {} scale", rs.scale),
                            within_reason(),
                        )
                    }
                } else if rs.scale != "full" && !p.any_scale && factor.is_none() {
                    (
                        format!("not comparable: {} scale", rs.scale),
                        p.why.clone().unwrap_or_else(|| {
                            format!(
                                "the figure grows with the data size and this run is at the {} \
                                 scale, below the paper's sizes: the full run (--full) compares it",
                                rs.scale
                            )
                        }),
                    )
                } else if time {
                    // Settled below, once every time of the group is known.
                    if ratio.is_finite() && ratio > 0.0 {
                        // A time the paper did not take (ratio_to) is
                        // compared with its partner group's factor.
                        let source = p.ratio_to.as_deref().unwrap_or(&p.source);
                        times.push(Timed {
                            at: out.len(),
                            group: format!("{source}|{}", network(&p.name)),
                            ratio,
                            why: p.why.clone(),
                            member: p.ratio_to.is_none(),
                        });
                    }
                    (
                        "not comparable: a lone time".to_owned(),
                        p.why.clone().unwrap_or_else(|| {
                            "the paper gives no other time in the same table or figure: \
                             a time alone depends on the machine, only ratios between times \
                             measured in the same run do not"
                                .to_owned()
                        }),
                    )
                } else if within(ours, p.value) {
                    ("matches".to_owned(), String::new())
                } else {
                    (
                        "differs".to_owned(),
                        p.why.clone().unwrap_or_else(|| {
                            format!(
                                "ours is {}x the paper's; no reason recorded yet",
                                short(ratio)
                            )
                        }),
                    )
                };
                out.push(Comparison {
                    experiment: rs.experiment.clone(),
                    configuration: row
                        .params
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(" "),
                    figure: p.name.clone(),
                    paper: p.value,
                    unit: p.unit.clone(),
                    source: p.source.clone(),
                    ours: measured,
                    scaled,
                    ratio,
                    relative: f64::NAN,
                    verdict,
                    why,
                });
            }
        }
        for t in &times {
            let n = times
                .iter()
                .filter(|u| u.member && u.group == t.group)
                .count();
            // A member needs another member; a guest one member.
            if n < 1 + usize::from(t.member) {
                continue;
            }
            // Two members: the other one; more: the members' median; a
            // guest: the members' median (it does not enter it).
            let mut logs: Vec<f64> = times
                .iter()
                .filter(|u| u.member && u.group == t.group && (n > 2 || !t.member || u.at != t.at))
                .map(|u| u.ratio.ln())
                .collect();
            let others = n - usize::from(t.member);
            let factor = median(&mut logs).exp();
            let relative = t.ratio / factor;
            let c = &mut out[t.at];
            c.relative = relative;
            if (1.0 / TOLERANCE..=TOLERANCE).contains(&relative) {
                c.verdict = "matches".to_owned();
                c.why = String::new();
            } else {
                c.verdict = "differs".to_owned();
                let measured = format!(
                    "relative to the {} other time(s) of {} in this run (machine factor {}), \
                     ours is {}x the paper's",
                    others,
                    t.group
                        .rsplit_once('|')
                        .map_or(t.group.as_str(), |(s, _)| s),
                    short(factor),
                    short(relative)
                );
                c.why = match &t.why {
                    Some(r) => format!("{r} ({measured})"),
                    None => format!("{measured}; no reason recorded yet"),
                };
            }
        }
    }
    out
}

/// Ours within [`TOLERANCE`] of the paper's; a paper's zero (no bytes, no
/// reads) is matched by zero only.
fn within(ours: f64, paper: f64) -> bool {
    if paper == 0.0 {
        ours == 0.0
    } else {
        (1.0 / TOLERANCE..=TOLERANCE).contains(&(ours / paper))
    }
}

/// The modelled network of a time figure (`wan103_ms`: `wan103`), empty
/// for a time measured here: a modelled WAN time is mostly the model's
/// round trips, which the machine does not scale, so it is compared with
/// the other times of the same network only.
fn network(figure: &str) -> &str {
    match figure.split_once('_') {
        Some((net, _)) if net.starts_with("wan") => net,
        _ => "",
    }
}

/// A time compared by its ratio to the other times of its group.
struct Timed {
    /// Its index in the comparisons.
    at: usize,
    /// The group: the paper's source (or the partner source of
    /// [`crate::result::PaperFigure::ratio_to`]) and the network.
    group: String,
    /// Ours / paper.
    ratio: f64,
    /// The reason the experiment recorded.
    why: Option<String>,
    /// Whether it enters the group's machine factor: a time the paper did
    /// not take (compared with a partner group) does not.
    member: bool,
}

/// Where and when the run happened.
#[derive(Clone, Debug, Serialize)]
pub struct RunInfo {
    /// UTC date and time, RFC 3339.
    pub date: String,
    /// CPU model and core count.
    pub machine: String,
    /// The commit of the checkout, if the run is inside one.
    pub commit: Option<String>,
}

impl RunInfo {
    /// This machine, now, this checkout (best effort: what cannot be read
    /// is said so).
    pub fn here() -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, m)| m.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown CPU".to_owned());
        let cores = std::thread::available_parallelism().map_or(0, std::num::NonZeroUsize::get);
        RunInfo {
            date: now_utc(),
            machine: format!("{cpu}, {cores} cores"),
            commit: commit(),
        }
    }
}

/// The commit of the checkout around the working directory, read from
/// `.git` (no `git` binary needed).
fn commit() -> Option<String> {
    let mut dir = std::env::current_dir().ok()?;
    loop {
        let git = dir.join(".git");
        if let Ok(head) = std::fs::read_to_string(git.join("HEAD")) {
            let head = head.trim();
            return match head.strip_prefix("ref: ") {
                Some(r) => std::fs::read_to_string(git.join(r))
                    .ok()
                    .map(|s| s.trim().to_owned())
                    .or_else(|| {
                        std::fs::read_to_string(git.join("packed-refs"))
                            .ok()?
                            .lines()
                            .find(|l| l.ends_with(r))
                            .and_then(|l| l.split_whitespace().next())
                            .map(str::to_owned)
                    }),
                None => Some(head.to_owned()),
            };
        }
        if !dir.pop() {
            return None;
        }
    }
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`, written as the
/// client writes a table's timestamps.
fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    sesame_client::table::schema::format_timestamp(i64::try_from(secs).unwrap_or(i64::MAX))
}

fn number(v: f64) -> String {
    if v.is_finite() {
        let s = format!("{v:.4}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        s.to_owned()
    } else {
        String::new()
    }
}

/// The result sets of the reports under `out` (`*/results.json`), their
/// papers' figures and reasons set by the current code
/// ([`crate::resume::rejudge`]); a file that does not read as one is left
/// out.
pub fn reports_in(out: &Path) -> Vec<ResultSet> {
    let Ok(entries) = std::fs::read_dir(out) else {
        return Vec::new();
    };
    let mut sets: Vec<ResultSet> = entries
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("results.json")).ok())
        .filter_map(|t| serde_json::from_str(&t).ok())
        .map(|mut rs| {
            crate::resume::rejudge(&mut rs);
            rs
        })
        .collect();
    sets.sort_by(|a, b| a.experiment.cmp(&b.experiment));
    sets
}

/// Writes `index.html`, `fidelity.json` and `fidelity.csv` into `out`.
pub fn write_index(
    out: &Path,
    sets: &[ResultSet],
    seconds: &[(String, f64)],
    info: &RunInfo,
) -> Result<(), BenchError> {
    let rows = comparisons(sets);
    std::fs::create_dir_all(out).map_err(|e| BenchError::io("create", out, e))?;
    let json = serde_json::to_string_pretty(&serde_json::json!({
        "run": info,
        "tolerance": TOLERANCE,
        "comparisons": rows,
    }))
    .map_err(|e| BenchError::Format(format!("fidelity table: {e}")))?;
    let write = |name: &str, text: &str| {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|e| BenchError::io("write", path, e))
    };
    write("fidelity.json", &(json + "\n"))?;
    let mut csv = String::from(
        "experiment,configuration,figure,paper,unit,source,ours,scaled,ratio,relative,verdict,why\n",
    );
    for r in &rows {
        let cells = [
            r.experiment.clone(),
            r.configuration.clone(),
            r.figure.clone(),
            number(r.paper),
            r.unit.clone(),
            r.source.clone(),
            number(r.ours),
            r.scaled.clone(),
            number(r.ratio),
            number(r.relative),
            r.verdict.clone(),
            r.why.clone(),
        ];
        let line: Vec<String> = cells.iter().map(|c| csv_cell(c)).collect();
        csv.push_str(&line.join(","));
        csv.push('\n');
    }
    write("fidelity.csv", &csv)?;

    let count = |v: &str| rows.iter().filter(|r| r.verdict.starts_with(v)).count();
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Sesame benchmark results</title>\n<style>\n\
         body {{ font-family: sans-serif; margin: 2em; }}\n\
         table {{ border-collapse: collapse; font-size: 0.85em; }}\n\
         th, td {{ border: 1px solid #ccc; padding: 0.2em 0.5em; }}\n\
         td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}\n\
         tr.matches td.v {{ background: #e3f4e3; }}\n\
         tr.differs td.v {{ background: #fbe3e3; }}\n</style>\n{errors}</head>\n\
         <body data-page=\"index\">\n\
         <h1>Sesame benchmark results</h1>\n\
         <p>Run {date} on {machine}; commit {commit}.</p>\n\
         <p>Where Sesame reproduces the papers: {m} figures match (ours within a factor of \
         {tol} of the paper's), {d} differ (each experiment's page says why), {n} are not \
         comparable. Data: <a href=\"fidelity.json\">JSON</a>, \
         <a href=\"fidelity.csv\">CSV</a>. Explore every result, filter and sort: \
         <a href=\"explore.html\">explore.html</a>.</p>\n\
         <p id=\"rule\">The rule: a figure matches when ours is within a factor of {tol} \
         of the paper's. A time is compared by what the machine does not change: its ratio to \
         the other times of the same paper table or figure measured in the same run: two \
         times are compared by their ratio, against the paper's; with more, ours / paper is \
         divided by the machine factor, the group's median ours / paper (the column \
         <i>relative</i>); a time the paper gives alone is not comparable. Figures that grow with the data size are compared at the full scale \
         (<code>--full</code>, the papers' sizes); below it (the default standard scale, \
         <code>--quick</code>) only figures that do not (counts and times per operation, \
         ciphertext and state sizes, reads and bytes per search at a result size the row \
         fixes). The column <i>why</i> gives the reason of every row that differs or is not \
         comparable.</p>\n",
        date = escape(&info.date),
        machine = escape(&info.machine),
        commit = escape(info.commit.as_deref().unwrap_or("unknown")),
        m = count("matches"),
        d = count("differs"),
        n = count("not comparable"),
        tol = TOLERANCE,
        errors = crate::explore::script(crate::explore::ERRORS_JS),
    );
    html.push_str(
        "<h2>Experiments</h2>\n<table>\n<thead><tr><th>experiment</th><th>reproduces</th>\
         <th>scale</th><th>match</th><th>differ</th><th>not comparable</th><th>seconds</th>\
         </tr></thead>\n<tbody>\n",
    );
    for rs in sets {
        let secs = seconds
            .iter()
            .find(|(n, _)| *n == rs.experiment)
            .map_or(String::new(), |(_, s)| format!("{s:.1}"));
        let of = |v: &str| {
            rows.iter()
                .filter(|r| r.experiment == rs.experiment && r.verdict.starts_with(v))
                .count()
        };
        let _ = writeln!(
            html,
            "<tr><td><a href=\"{e}/index.html\">{e}</a>: {t}</td><td>{p}</td><td>{sc}</td>\
             <td class=\"num\">{m}</td><td class=\"num\">{d}</td><td class=\"num\">{n}</td>\
             <td class=\"num\">{secs}</td></tr>",
            e = escape(&rs.experiment),
            t = escape(&rs.title),
            p = escape(&rs.seed_paper),
            sc = escape(&rs.scale),
            m = of("matches"),
            d = of("differs"),
            n = of("not comparable"),
        );
    }
    html.push_str(
        "</tbody>\n</table>\n<h2>Fidelity</h2>\n<p>Figures that differ first, then those \
        that match, then those not comparable.</p>\n<table>\n<thead><tr>\
        <th>experiment</th><th>configuration</th><th>figure</th><th>paper</th><th>unit</th>\
        <th>ours</th><th>scaled to the paper's size</th><th>ours / paper</th>\
        <th>relative (times)</th><th>verdict</th><th>why</th>\
        <th>source</th></tr></thead>\n<tbody>\n",
    );
    // Where Sesame departs from a paper comes first: the question the
    // page answers.
    let rank = |v: &str| match v {
        "differs" => 0,
        "matches" => 1,
        _ => 2,
    };
    let mut ordered: Vec<&Comparison> = rows.iter().collect();
    ordered.sort_by_key(|r| rank(&r.verdict));
    for r in ordered {
        let class = if r.verdict == "matches" {
            "matches"
        } else if r.verdict == "differs" {
            "differs"
        } else {
            "other"
        };
        let _ = writeln!(
            html,
            "<tr class=\"{class}\"><td><a href=\"{e}/index.html\">{e}</a></td><td>{c}</td>\
             <td>{f}</td><td class=\"num\">{p}</td><td>{u}</td><td class=\"num\">{o}</td>\
             <td>{sc}</td><td class=\"num\">{ra}</td><td class=\"num\">{rel}</td><td class=\"v\">{v}</td>\
             <td class=\"why\">{w}</td><td>{s}</td></tr>",
            e = escape(&r.experiment),
            c = escape(&r.configuration),
            f = escape(&r.figure),
            p = number(r.paper),
            u = escape(&r.unit),
            o = number(r.ours),
            sc = escape(&r.scaled),
            ra = number(r.ratio),
            rel = number(r.relative),
            v = escape(&r.verdict),
            w = escape(&r.why),
            s = escape(&r.source),
        );
    }
    html.push_str("</tbody>\n</table>\n");
    html.push_str(&crate::explore::script(crate::explore::SELFCHECK_JS));
    html.push_str("</body>\n</html>\n");
    write("index.html", &html)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{Law, Row};

    fn set(scale: &str) -> ResultSet {
        let mut io = Row::new().param("protocol", "x");
        io.set("query_io", 30.0)
            .set("insert_us", 5.0)
            .set("bytes", 900.0)
            .set("prf", 33.0);
        io.paper("query_io", 44.0, "I/O", "Table 3")
            .paper("insert_us", 1.0, "µs", "Table 3")
            .paper("bytes", 100.0, "bytes", "Table 3")
            .paper("absent", 1.0, "I/O", "Table 3")
            .paper_any_scale("prf", 32.0, "PRF per encryption", "Table 4");
        ResultSet {
            experiment: "range".into(),
            title: "t".into(),
            seed_paper: "seed 004".into(),
            scale: scale.into(),
            seed: 1,
            notes: vec![],
            display: vec![],
            rows: vec![io],
            charts: vec![],
        }
    }

    /// A figure that grows with the data size, measured below the paper's
    /// size, is compared at the paper's size by the paper's law, and can
    /// differ there.
    #[test]
    fn a_figure_that_grows_is_compared_at_the_papers_size_by_its_law() {
        let mut rs = set("standard");
        let mut row = Row::new().param("protocol", "x");
        row.set("log_io", 4.0)
            .set("linear_io", 4.0)
            .set("above", 30.0)
            .set("below", 3.0)
            .set("ms_a", 2.0)
            .set("ms_b", 4.0);
        let (ours, paper) = (40_000.0, 247_000.0);
        row.paper("log_io", 44.0, "I/O", "Table 3")
            .paper("linear_io", 20.0, "I/O", "Table 3")
            .paper("above", 10.0, "reads", "§4")
            .paper("below", 10.0, "reads", "§4")
            .paper("ms_a", 10.0, "ms", "Fig. 9")
            .paper("ms_b", 100.0, "ms", "Fig. 9")
            .grows("log_io", Law::Log, "records", ours, paper)
            .grows("linear_io", Law::Linear, "records", ours, paper)
            .grows("above", Law::NonDecreasing, "records", ours, paper)
            .grows("below", Law::NonDecreasing, "records", ours, paper)
            .grows("ms_a", Law::Constant, "documents", 250.0, 1000.0)
            .grows("ms_b", Law::Linear, "documents", 250.0, 1000.0);
        rs.rows = vec![row];
        let c = comparisons(&[rs]);
        let verdicts: Vec<&str> = c.iter().map(|c| c.verdict.as_str()).collect();
        assert_eq!(
            verdicts,
            [
                // 4 x log(247,000) / log(40,000) = 4.69 against 44.
                "differs",
                // 4 x 247,000 / 40,000 = 24.7 against 20.
                "matches",
                // 30 at 40,000 records, already 3x the paper's.
                "differs",
                "not comparable: standard scale",
                // Times: 2 and 4 x 4 = 16 against 10 and 100: 0.2 against 0.1.
                "matches",
                "matches",
            ]
        );
        assert!((c[0].ratio - 4.0 * 247_000f64.log2() / 40_000f64.log2() / 44.0).abs() < 1e-9);
        assert_eq!(c[0].ours, 4.0);
        assert!(c[0]
            .scaled
            .starts_with("O(log n) from 40000 to the paper's 247000 records"));
        assert!(c[1].scaled.contains("x6.175"), "{}", c[1].scaled);
        assert!(c[2].why.contains("does not shrink"), "{}", c[2].why);
        assert!(c[3].why.contains("no law"), "{}", c[3].why);
        assert!(c[3].scaled.starts_with("non-decreasing"));
        for c in &c {
            assert_eq!(c.why.is_empty(), c.verdict == "matches", "{c:?}");
        }
        // Without the law, the same figures are not compared at this scale.
        let plain = comparisons(&[set("standard")]);
        assert_eq!(plain[0].verdict, "not comparable: standard scale");
        assert!(plain[0].scaled.is_empty());
    }

    /// A figure that does not shrink and grows at most linearly beyond a
    /// part that does not grow (CHLH15's reads: the results the row
    /// fixes, and false positives at a fixed rate per document) is judged
    /// where its whole range at the paper's size is on one side of the
    /// band or inside it, and stays not comparable where it is not.
    #[test]
    fn a_figure_growing_at_most_linearly_is_judged_by_its_range() {
        let mut rs = set("standard");
        let (ours, paper) = (300_000.0, 1_000_000.0);
        let mut row = Row::new().param("scheme", "x");
        // (name, measured, fixed part, paper): 1,166 reads for 1,000
        // results: at most 1,000 + 166 x 10/3 = 1,553 at the paper's size.
        let cases = [
            ("fp", 1166.0, 1000.0, 1000.0),
            ("exact", 10_000.0, 10_000.0, 10_000.0),
            ("all_grows", 1166.0, 0.0, 1000.0),
            ("above", 208.0, 1.0, 1.0),
            ("below", 100.0, 0.0, 1000.0),
        ];
        for (name, measured, fixed, value) in cases {
            row.set(name, measured)
                .paper(name, value, "reads", "§4.3")
                .grows_at_most_linearly(name, fixed, "pairs", ours, paper);
        }
        rs.rows = vec![row];
        let c = comparisons(&[rs]);
        let verdicts: Vec<&str> = c.iter().map(|c| c.verdict.as_str()).collect();
        assert_eq!(
            verdicts,
            [
                "matches",
                "matches",
                // 1,166 to 3,887 against 1,000: one end in the band.
                "not comparable: standard scale",
                "differs",
                // At most 333 against 1,000.
                "differs",
            ]
        );
        assert!(c[2].why.contains("between 1166 and 3887"), "{}", c[2].why);
        assert!(c[4].why.contains("at most 0.33x"), "{}", c[4].why);
        assert!(c[0]
            .scaled
            .starts_with("non-decreasing, at most O(n) beyond 1000 from 300000"));
        for c in &c {
            assert_eq!(c.why.is_empty(), c.verdict == "matches", "{c:?}");
        }
        // The law and its fixed part survive the CSV's growth cell.
        let g = Growth {
            law: Law::AtMostLinear,
            of: "pairs".into(),
            ours,
            paper,
            fixed: 1000.0,
        };
        assert_eq!(Growth::from_cell(&g.to_cell()), Some(g));
    }

    #[test]
    fn verdicts_follow_the_tolerance_units_and_scale() {
        let full = comparisons(&[set("full")]);
        let verdicts: Vec<(&str, &str)> = full
            .iter()
            .map(|c| (c.figure.as_str(), c.verdict.as_str()))
            .collect();
        assert_eq!(
            verdicts,
            [
                ("query_io", "matches"),
                ("insert_us", "not comparable: a lone time"),
                ("bytes", "differs"),
                ("prf", "matches"),
            ]
        );
        assert!((full[0].ratio - 30.0 / 44.0).abs() < 1e-12);
        let standard = comparisons(&[set("standard")]);
        assert_eq!(standard[0].verdict, "not comparable: standard scale");
        assert_eq!(standard[1].verdict, "not comparable: standard scale");
        // Every row that is not a match says why.
        for c in full.iter().chain(&standard) {
            assert_eq!(c.why.is_empty(), c.verdict == "matches", "{c:?}");
        }
        assert!(full[1].why.contains("no other time"));
        assert!(full[2].why.contains("9.00x"), "{}", full[2].why);
        // A count per operation is compared at every scale.
        assert_eq!(standard[3].verdict, "matches");
        assert!(is_time("ms per update") && is_time("s") && !is_time("messages"));
    }

    /// Times of three schemes from one paper table, measured on a machine
    /// ten times slower than the paper's: the machine factor cancels, and
    /// only the scheme whose ratio to the others departs from the paper's
    /// differs; its recorded reason leads.
    #[test]
    fn times_are_compared_by_their_ratios_within_a_run() {
        let mut rs = set("full");
        rs.rows.clear();
        for (scheme, ours, paper) in [("a", 10.0, 1.0), ("b", 40.0, 4.0), ("c", 500.0, 10.0)] {
            let mut row = Row::new().param("scheme", scheme);
            row.set("ms", ours)
                .paper("ms", paper, "ms per update", "Fig. 3");
            if scheme == "c" {
                row.why("ms", "c's server recomputes its tree");
            }
            rs.rows.push(row);
        }
        let c = comparisons(&[rs.clone()]);
        let verdicts: Vec<&str> = c.iter().map(|c| c.verdict.as_str()).collect();
        assert_eq!(verdicts, ["matches", "matches", "differs"]);
        // The machine factor is the median ours / paper, 10 (one outlying
        // scheme does not move it): a and b are where the paper has them.
        assert!((c[0].relative - 1.0).abs() < 1e-9);
        // c: 50 against 10: five times the paper's ratio.
        assert!((c[2].relative - 5.0).abs() < 1e-9);
        assert!(c[2].why.starts_with("c's server recomputes its tree ("));
        assert!(c[2].why.contains("5.00x"), "{}", c[2].why);
        // The same run on a machine twice as fast: the same verdicts.
        for row in &mut rs.rows {
            let v = row.figures.get("ms").copied().unwrap();
            row.set("ms", v / 2.0);
        }
        let fast = comparisons(&[rs]);
        assert_eq!(
            fast.iter().map(|c| c.verdict.as_str()).collect::<Vec<_>>(),
            verdicts
        );
    }

    /// A time of a scheme the paper did not time (its figure the paper's
    /// value of another scheme) is compared with the machine factor of the
    /// paper's times it stands beside, which it does not move: the other
    /// verdicts are those of the run without it, and a faster machine
    /// leaves its verdict as it is.
    #[test]
    fn a_time_the_paper_did_not_take_is_compared_with_its_partner_group() {
        let mut rs = set("full");
        rs.rows.clear();
        for (scheme, ours, paper) in [("a", 10.0, 1.0), ("b", 40.0, 4.0), ("c", 500.0, 10.0)] {
            let mut row = Row::new().param("scheme", scheme);
            row.set("ms", ours)
                .paper("ms", paper, "ms per update", "Fig. 3");
            rs.rows.push(row);
        }
        let without = comparisons(&[rs.clone()]);
        // Guests beside c's paper figure: one where the paper has c (ratio
        // 10, the group's factor), one a hundred times faster.
        for (scheme, ours) in [("g", 100.0), ("h", 1.0)] {
            let mut row = Row::new().param("scheme", scheme);
            row.set("ms", ours)
                .paper("ms", 10.0, "ms per update", "Fig. 3 (the paper's c)")
                .ratio_to("ms", "Fig. 3");
            if scheme == "h" {
                row.why("ms", "the paper has no h");
            }
            rs.rows.push(row);
        }
        let c = comparisons(&[rs.clone()]);
        let verdicts: Vec<&str> = c.iter().map(|c| c.verdict.as_str()).collect();
        assert_eq!(
            verdicts,
            ["matches", "matches", "differs", "matches", "differs"]
        );
        // The members' factor (10) is not moved by the guests.
        for (with, alone) in c.iter().zip(&without) {
            assert_eq!(with.verdict, alone.verdict);
            assert!((with.relative - alone.relative).abs() < 1e-9);
        }
        assert!((c[3].relative - 1.0).abs() < 1e-9);
        assert!((c[4].relative - 0.01).abs() < 1e-9);
        assert!(
            c[4].why
                .starts_with("the paper has no h (relative to the 3 other time(s) of Fig. 3"),
            "{}",
            c[4].why
        );
        // Without a member to compare with, a guest stays a lone time.
        let mut lone = rs.clone();
        lone.rows.drain(..3);
        assert!(comparisons(&[lone])
            .iter()
            .all(|c| c.verdict == "not comparable: a lone time"));
        // A machine three times as fast: the same verdicts.
        for row in &mut rs.rows {
            let v = row.figures.get("ms").copied().unwrap();
            row.set("ms", v / 3.0);
        }
        let fast = comparisons(&[rs]);
        assert_eq!(
            fast.iter().map(|c| c.verdict.as_str()).collect::<Vec<_>>(),
            verdicts
        );
    }

    #[test]
    fn the_index_and_the_tables_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let info = RunInfo {
            date: "2026-01-01T00:00:00Z".into(),
            machine: "test CPU, 2 cores".into(),
            commit: Some("abc".into()),
        };
        write_index(dir.path(), &[set("full")], &[("range".into(), 1.5)], &info).unwrap();
        let html = std::fs::read_to_string(dir.path().join("index.html")).unwrap();
        assert!(html.contains("2 figures match") && html.contains("1 differ"));
        assert!(html.contains("explore.html") && html.contains("id=\"rule\""));
        assert!(html.contains("range/index.html") && html.contains("test CPU"));
        // The experiment's counts, and what differs before what matches
        // (the table's order is query_io, insert_us, bytes, prf).
        assert!(html
            .contains("<td class=\"num\">2</td><td class=\"num\">1</td><td class=\"num\">1</td>"));
        let at = |figure: &str| html.find(&format!("<td>{figure}</td>")).unwrap();
        assert!(at("bytes") < at("query_io") && at("prf") < at("insert_us"));
        let csv = std::fs::read_to_string(dir.path().join("fidelity.csv")).unwrap();
        assert_eq!(csv.lines().count(), 5);
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("fidelity.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(json["comparisons"].as_array().unwrap().len(), 4);
        assert_eq!(now_utc().len(), 20);
    }
}
