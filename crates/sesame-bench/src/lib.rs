#![doc = include_str!("../README.md")]

pub mod args;
pub mod data;
pub mod error;
pub mod experiment;
pub mod experiments;
pub mod fidelity;
pub mod measure;
pub mod plot;
pub mod report;
pub mod result;

use std::io::Write;

pub use args::BenchArgs;
pub use error::BenchError;
pub use experiment::{experiment, experiments, Ctx, Experiment, Scale};
pub use result::{Chart, PaperFigure, ResultSet, Row, Value};

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

/// The line printed (on standard error) before experiment `k` of `total`
/// starts: which one, how far the run is, and, once one experiment has
/// finished, the time left if the others take as long on average (a rough
/// estimate: experiments differ a lot).
fn progress_line(k: usize, total: usize, name: &str, elapsed: std::time::Duration) -> String {
    let mut line = format!(
        "[{}/{total}] {name} ({:.0} s elapsed",
        k + 1,
        elapsed.as_secs_f64()
    );
    if k > 0 {
        let left = elapsed.as_secs_f64() / k as f64 * (total - k) as f64;
        line.push_str(&format!(", about {left:.0} s left at the average so far"));
    }
    line.push(')');
    line
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
        name => vec![
            experiment(name).ok_or_else(|| BenchError::UnknownExperiment {
                name: name.to_owned(),
                known: experiments()
                    .iter()
                    .map(|e| e.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?,
        ],
    };
    let range_only = args.options();
    if !range_only.is_empty() && !chosen.iter().any(|e| e.name() == "range") {
        return Err(BenchError::InvalidArgument(
            "--page-size, --cache-size, --cache-policy, --queries, --range-percent and \
             --data-percent apply to the range experiment only"
                .into(),
        ));
    }
    let scale = if args.tiny {
        Scale::Tiny
    } else if args.quick {
        Scale::Quick
    } else {
        Scale::Full
    };
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
    let run_started = std::time::Instant::now();
    for (k, e) in chosen.into_iter().enumerate() {
        if total > 1 {
            eprintln!(
                "{}",
                progress_line(k, total, e.name(), run_started.elapsed())
            );
        }
        let started = std::time::Instant::now();
        let outcome = e
            .run(&ctx)
            .and_then(|rs| report::write_all(&rs, &args.out.join(e.name())).map(|w| (rs, w)));
        match outcome {
            Ok((rs, written)) => {
                write!(out, "{}", rs.to_text()).map_err(stdout_err)?;
                writeln!(
                    out,
                    "({:.1} s; report: {})\n",
                    started.elapsed().as_secs_f64(),
                    written.html.display()
                )
                .map_err(stdout_err)?;
                seconds.push((rs.experiment.clone(), started.elapsed().as_secs_f64()));
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
        writeln!(
            out,
            "front page: {} (fidelity table: fidelity.json, fidelity.csv)",
            args.out.join("index.html").display()
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
        let zero = std::time::Duration::ZERO;
        assert_eq!(progress_line(0, 9, "ore", zero), "[1/9] ore (0 s elapsed)");
        assert_eq!(
            progress_line(2, 4, "range", std::time::Duration::from_secs(60)),
            "[3/4] range (60 s elapsed, about 60 s left at the average so far)"
        );
    }
}
