#![doc = include_str!("../README.md")]

pub mod args;
pub mod data;
pub mod error;
pub mod experiment;
pub mod experiments;
pub mod explore;
pub mod fidelity;
pub mod growth;
pub mod measure;
pub mod plot;
pub mod report;
pub mod result;
pub mod resume;
pub mod sql;

use std::io::{IsTerminal, Write};

pub use args::BenchArgs;
pub use error::BenchError;
pub use experiment::{Ctx, Experiment, Scale};
pub use experiments::{experiment, experiments};
pub use result::{Chart, Growth, Law, PaperFigure, ResultSet, Row, Value};

/// Runs `sesame bench`: prints the tables on standard output and writes the
/// reports under `args.out`.
pub fn run(args: &BenchArgs) -> Result<(), BenchError> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    run_to(args, &mut out).map(|_| ())
}

/// Prints the registered experiments.
pub fn list(out: &mut dyn Write) -> Result<(), BenchError> {
    let all = experiments();
    let width = all.iter().map(|e| e.name().len()).max().unwrap_or(0);
    for e in &all {
        writeln!(out, "{:<width$}  {}", e.name(), e.title()).map_err(stdout_err)?;
        writeln!(out, "{:<width$}  reproduces {}", "", e.seed_paper()).map_err(stdout_err)?;
    }
    Ok(())
}

/// Seconds an experiment took on the reference machine (2 vCPUs, other
/// builds running), per scale: the weights of the time-left estimate. The
/// standard and quick figures are measured (`bench all`, release build);
/// at full scale those of range, tables, verify, sse-static, ore, attacks
/// and ingest are measured, the others rough.
fn expected_seconds(name: &str, scale: Scale) -> f64 {
    // (name, full, standard, quick)
    const TABLE: [(&str, f64, f64, f64); 12] = [
        ("datasets", 5.0, 1.0, 1.0),
        ("sse-static", 150.0, 51.0, 6.0),
        ("ore", 32.0, 5.0, 1.0),
        ("range", 2820.0, 180.0, 29.0),
        ("uedsse", 120.0, 7.0, 1.0),
        ("aura", 1500.0, 106.0, 4.0),
        ("mobile", 120.0, 22.0, 4.0),
        ("verify", 370.0, 74.0, 13.0),
        ("server", 60.0, 6.0, 1.0),
        ("tables", 1320.0, 185.0, 60.0),
        ("attacks", 1600.0, 40.0, 7.0),
        ("ingest", 200.0, 19.0, 12.0),
    ];
    let row = TABLE.iter().find(|r| r.0 == name);
    match (row, scale) {
        (Some(r), Scale::Full) => r.1,
        (Some(r), Scale::Standard) => r.2,
        (Some(r), Scale::Quick) => r.3,
        (Some(r), Scale::Tiny) => r.3 / 10.0,
        (None, _) => 10.0,
    }
}

/// `95 s` or `7 min 40 s`.
fn duration(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s < 100 {
        format!("{s} s")
    } else {
        format!("{} min {:02} s", s / 60, s % 60)
    }
}

/// Where a run of several experiments is: printed on standard error
/// before each experiment starts.
struct Progress {
    names: Vec<&'static str>,
    scale: Scale,
    started: std::time::Instant,
    /// Whether standard error is a terminal and standard output is not:
    /// the line then rewrites itself; otherwise each is a plain line (logs,
    /// CI, or the reports printed on the same terminal).
    terminal: bool,
}

impl Progress {
    /// The line before experiment `k` starts, `elapsed` into the run: which
    /// one, how many are done, and the time left, from the reference
    /// timings scaled by how fast the finished experiments ran here.
    fn line(&self, k: usize, elapsed: std::time::Duration) -> String {
        let total = self.names.len();
        let expected =
            |names: &[&str]| -> f64 { names.iter().map(|n| expected_seconds(n, self.scale)).sum() };
        let done = expected(&self.names[..k.min(total)]);
        let left = expected(&self.names[k.min(total)..]);
        let secs = elapsed.as_secs_f64();
        // How much slower (or faster) this machine is than the reference:
        // the time so far against the reference's, with half a minute of
        // the reference's own pace mixed in so that the first short
        // experiments do not swing it; bounded.
        const PRIOR: f64 = 30.0;
        let speed = if k > 0 {
            ((secs + PRIOR) / (done + PRIOR)).clamp(0.2, 5.0)
        } else {
            1.0
        };
        format!(
            "[{}/{total}] {} ({k} done, {} elapsed, about {} left of {} in all)",
            k + 1,
            self.names.get(k).copied().unwrap_or("?"),
            duration(secs),
            duration(left * speed),
            duration(secs + left * speed),
        )
    }

    /// Shows the line before experiment `k`.
    fn start(&self, k: usize) {
        let line = self.line(k, self.started.elapsed());
        if self.terminal {
            // Carriage return and erase-line: the line overwrites the last.
            eprint!("\r\x1b[K{line}");
        } else {
            eprintln!("{line}");
        }
    }

    /// Clears the terminal line before the experiment's report is printed.
    fn clear(&self) {
        if self.terminal {
            eprint!("\r\x1b[K");
        }
    }
}

fn stdout_err(e: std::io::Error) -> BenchError {
    BenchError::io("write", "standard output", e)
}

/// As [`run`], printing to `out`, and returning the result sets.
///
/// With `all`, every experiment runs even if one fails; the first error is
/// returned at the end.
pub fn run_to(args: &BenchArgs, out: &mut dyn Write) -> Result<Vec<ResultSet>, BenchError> {
    let chosen: Vec<Box<dyn Experiment>> = match args.experiment.as_str() {
        "list" => {
            list(out)?;
            return Ok(Vec::new());
        }
        "all" => experiments(),
        names => names
            .split(',')
            .map(|name| {
                experiment(name.trim()).ok_or_else(|| BenchError::UnknownExperiment {
                    name: name.trim().to_owned(),
                    known: experiments()
                        .iter()
                        .map(|e| e.name())
                        .collect::<Vec<_>>()
                        .join(", "),
                })
            })
            .collect::<Result<_, _>>()?,
    };
    let range_only = args.options();
    if !range_only.is_empty() && !chosen.iter().any(|e| e.name() == "range") {
        return Err(BenchError::InvalidArgument(
            "--page-size, --cache-size, --cache-policy, --queries, --range-percent and \
             --data-percent apply to the range experiment only"
                .into(),
        ));
    }
    let scale = args.scale();
    let work = tempfile::Builder::new()
        .prefix("sesame-bench-")
        .tempdir()
        .map_err(|e| BenchError::io("create", std::env::temp_dir(), e))?;
    let ctx = Ctx {
        scale,
        seed: args.seed,
        data_dir: args.data.clone(),
        work_dir: work.path().to_path_buf(),
        options: args.options(),
    };
    let mut results = Vec::new();
    let mut seconds = Vec::new();
    let mut first_error = None;
    let total = chosen.len();
    let progress = Progress {
        names: chosen.iter().map(|e| e.name()).collect(),
        scale,
        started: std::time::Instant::now(),
        // Rewriting the line only helps when the reports printed between
        // experiments go elsewhere: on one terminal, they stay in view.
        terminal: std::io::stderr().is_terminal() && !std::io::stdout().is_terminal(),
    };
    let mut ran = 0usize;
    for (k, e) in chosen.into_iter().enumerate() {
        let dir = args.out.join(e.name());
        if args.resume {
            if let Some((mut rs, secs)) = resume::finished(&dir, e.name(), scale, args) {
                // Judged by this build: its report shows the same.
                let rejudged = resume::rejudge(&mut rs);
                if rejudged {
                    report::write_all(&rs, &dir)?;
                }
                writeln!(
                    out,
                    "== {}: finished by an earlier run ({}), skipped (--resume){}\n",
                    e.name(),
                    dir.display(),
                    if rejudged {
                        "; the papers' figures and reasons set anew by this build"
                    } else {
                        ""
                    }
                )
                .map_err(stdout_err)?;
                seconds.push((rs.experiment.clone(), secs));
                results.push(rs);
                continue;
            }
        }
        if args.stop_after.is_some_and(|n| ran >= n) {
            writeln!(
                out,
                "== stopped after {ran} experiment(s) (--stop-after); `--resume` finishes the run\n"
            )
            .map_err(stdout_err)?;
            break;
        }
        ran += 1;
        // A folder without its record is unfinished: this run redoes it.
        resume::forget(&dir)?;
        if total > 1 {
            progress.start(k);
        }
        let started = std::time::Instant::now();
        let outcome = e
            .run(&ctx)
            .and_then(|rs| report::write_all(&rs, &dir).map(|w| (rs, w)));
        if total > 1 {
            progress.clear();
        }
        match outcome {
            Ok((rs, written)) => {
                let secs = started.elapsed().as_secs_f64();
                resume::record(&dir, e.name(), scale, args, secs)?;
                write!(out, "{}", rs.to_text()).map_err(stdout_err)?;
                writeln!(out, "({secs:.1} s; report: {})\n", written.html.display())
                    .map_err(stdout_err)?;
                seconds.push((rs.experiment.clone(), secs));
                results.push(rs);
            }
            Err(err) => {
                writeln!(out, "== {} failed: {err}\n", e.name()).map_err(stdout_err)?;
                first_error.get_or_insert(err);
            }
        }
    }
    if !results.is_empty() {
        // The front page covers every experiment whose report is in the
        // output folder: this run's, and earlier runs' of the others.
        let mut all = fidelity::reports_in(&args.out);
        for rs in &results {
            all.retain(|r| r.experiment != rs.experiment);
            all.push(rs.clone());
        }
        all.sort_by(|a, b| a.experiment.cmp(&b.experiment));
        fidelity::write_index(&args.out, &all, &seconds, &fidelity::RunInfo::here())?;
        let explore = explore::write(&args.out, &all)?;
        writeln!(
            out,
            "front page: {} (fidelity table: fidelity.json, fidelity.csv; interactive: {})",
            args.out.join("index.html").display(),
            explore.display()
        )
        .map_err(stdout_err)?;
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(results),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_say_where_the_run_is() {
        let p = Progress {
            names: vec!["ore", "range", "tables"],
            scale: Scale::Quick,
            started: std::time::Instant::now(),
            terminal: false,
        };
        let zero = std::time::Duration::ZERO;
        // Before anything ran: the reference timings (1 + 29 + 60 s).
        assert_eq!(
            p.line(0, zero),
            "[1/3] ore (0 done, 0 s elapsed, about 90 s left of 90 s in all)"
        );
        // ore took 2 s here where the reference says 1 s: one short
        // experiment moves the pace a little (32 / 31), not twofold.
        assert_eq!(
            p.line(1, std::time::Duration::from_secs(2)),
            "[2/3] range (1 done, 2 s elapsed, about 92 s left of 94 s in all)"
        );
        // After range too took twice the reference (60 s against 30 s),
        // the pace is (62 + 30) / (30 + 30): the 60 s left become 92 s.
        assert_eq!(
            p.line(2, std::time::Duration::from_secs(62)),
            "[3/3] tables (2 done, 62 s elapsed, about 92 s left of 2 min 34 s in all)"
        );
        assert_eq!(duration(61.4), "61 s");
        assert_eq!(duration(460.0), "7 min 40 s");
        assert!(expected_seconds("no such", Scale::Full) > 0.0);
    }
}
