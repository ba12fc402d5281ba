//! The command-line arguments of `sesame bench`.

use std::path::PathBuf;

/// `sesame bench EXPERIMENT [--quick] [--out DIR] [--data DIR] [--seed N]`.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct BenchArgs {
    /// The experiment to run, `all` for every one, or `list` to list them.
    #[arg(value_name = "EXPERIMENT")]
    pub experiment: String,

    /// Shrink every experiment so that all of them run in under a minute
    /// (smoke test).
    #[arg(long)]
    pub quick: bool,

    /// Smaller than --quick: seconds in a debug build (the harness's own
    /// tests).
    #[arg(long, hide = true, conflicts_with = "quick")]
    pub tiny: bool,

    /// Where to write the reports: one folder per experiment.
    #[arg(long, value_name = "DIR", default_value = "bench-results")]
    pub out: PathBuf,

    /// Where the data sets are (see scripts/fetch-data.sh).
    #[arg(long, value_name = "DIR", default_value = "data")]
    pub data: PathBuf,

    /// Seed of every random choice of data and workload.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

impl BenchArgs {
    /// Arguments for `experiment` with every default.
    pub fn new(experiment: &str) -> Self {
        BenchArgs {
            experiment: experiment.to_owned(),
            quick: false,
            tiny: false,
            out: PathBuf::from("bench-results"),
            data: PathBuf::from("data"),
            seed: 1,
        }
    }
}
