//! `--resume`: each experiment that finishes leaves `finished.json` in its
//! report folder (the scale, seed and options it ran with, and its
//! seconds); a run with `--resume` into the same `--out` folder skips the
//! experiments whose record matches, reads their `results.json` for the
//! front page, and runs the others. An experiment interrupted half way
//! (the process killed, the machine stopped) has no record: its record is
//! removed before it starts and written only after its whole report is,
//! so it runs again.
//!
//! A result set read back is judged by the current code, not by the build
//! that measured it: [`rejudge`] sets the papers' figures and the reasons
//! anew from each row's parameters and measured values (for the
//! experiments that implement [`crate::Experiment::annotate`]), and the
//! front page's fidelity table computes every verdict from them (test:
//! `a_resumed_run_judges_stored_results_with_the_current_code`).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::BenchError;
use crate::experiment::Scale;
use crate::result::ResultSet;
use crate::BenchArgs;

/// The record's file name inside an experiment's folder.
pub const FINISHED: &str = "finished.json";

/// What a finished experiment ran with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finished {
    /// The experiment's name.
    pub experiment: String,
    /// Its scale.
    pub scale: String,
    /// The seed.
    pub seed: u64,
    /// The experiment-specific options, `name=value` separated by spaces.
    pub options: String,
    /// Seconds it took.
    pub seconds: f64,
}

fn finished_for(name: &str, scale: Scale, args: &BenchArgs, seconds: f64) -> Finished {
    Finished {
        experiment: name.to_owned(),
        scale: scale.name().to_owned(),
        seed: args.seed,
        options: args.options().to_string(),
        seconds,
    }
}

/// The result set and seconds of experiment `name` if `dir` holds a
/// finished run of it with the same scale, seed and options; `None`
/// otherwise (no record, another configuration, or a report that does not
/// read back).
pub fn finished(
    dir: &Path,
    name: &str,
    scale: Scale,
    args: &BenchArgs,
) -> Option<(ResultSet, f64)> {
    let record: Finished =
        serde_json::from_str(&std::fs::read_to_string(dir.join(FINISHED)).ok()?).ok()?;
    if record != finished_for(name, scale, args, record.seconds) {
        return None;
    }
    let rs = ResultSet::from_json(&std::fs::read_to_string(dir.join("results.json")).ok()?).ok()?;
    (rs.experiment == name).then_some((rs, record.seconds))
}

/// Records that experiment `name` finished into `dir`.
pub fn record(
    dir: &Path,
    name: &str,
    scale: Scale,
    args: &BenchArgs,
    seconds: f64,
) -> Result<(), BenchError> {
    let text = serde_json::to_string_pretty(&finished_for(name, scale, args, seconds))
        .map_err(|e| BenchError::Format(format!("{FINISHED}: {e}")))?;
    let path = dir.join(FINISHED);
    std::fs::write(&path, text + "\n").map_err(|e| BenchError::io("write", path, e))
}

/// Removes `dir`'s record, before the experiment runs again into it.
pub fn forget(dir: &Path) -> Result<(), BenchError> {
    let path = dir.join(FINISHED);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(BenchError::io("remove", path, e)),
    }
}

/// Sets the papers' figures and reasons of a stored result set `rs` by the
/// current code ([`crate::Experiment::annotate`] of its experiment);
/// returns whether any changed (then its report is written again). A set
/// of an experiment no longer registered is left as it is.
pub fn rejudge(rs: &mut ResultSet) -> bool {
    let Some(e) = crate::experiments::experiment(&rs.experiment) else {
        return false;
    };
    let before: Vec<Vec<crate::result::PaperFigure>> =
        rs.rows.iter().map(|r| r.paper.clone()).collect();
    e.annotate(rs);
    rs.rows.iter().map(|r| &r.paper).ne(before.iter())
}
