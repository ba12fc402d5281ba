//! The command-line arguments of `sesame bench`.

use std::path::PathBuf;

/// `sesame bench EXPERIMENT [--full | --quick] [--resume] [--out DIR]
/// [--data DIR] [--seed N]`: without `--full` or `--quick`, the standard
/// scale.
#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct BenchArgs {
    /// The experiment to run, several separated by commas, `all` for every
    /// one, or `list` to list them.
    #[arg(value_name = "EXPERIMENT")]
    pub experiment: String,

    /// Skip the experiments that an earlier run into the same --out folder
    /// finished at the same scale, seed and options (each finished
    /// experiment leaves `finished.json` in its folder): an interrupted
    /// `bench all --full` picks up where it stopped.
    #[arg(long)]
    pub resume: bool,

    /// Stop after this many experiments have run, as if the run had been
    /// interrupted there (the harness's tests of --resume).
    #[arg(long, hide = true, value_name = "N")]
    pub stop_after: Option<usize>,

    /// The papers' sizes (`bench all` takes hours). Without `--full` or
    /// `--quick`, every experiment runs at the standard scale: all of them
    /// in about twelve minutes, still showing each paper's trends.
    #[arg(long, conflicts_with = "quick")]
    pub full: bool,

    /// Shrink every experiment so that all of them run in about two minutes
    /// (smoke test).
    #[arg(long)]
    pub quick: bool,

    /// Smaller than --quick: seconds in a debug build (the harness's own
    /// tests).
    #[arg(long, hide = true, conflicts_with_all = ["quick", "full"])]
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

    /// `range` only: server page size in bytes (default 4096).
    #[arg(long, value_name = "BYTES")]
    pub page_size: Option<usize>,

    /// `range` only: server block cache size in pages (default 128; 0
    /// disables the cache).
    #[arg(long, value_name = "PAGES")]
    pub cache_size: Option<usize>,

    /// `range` only: cache eviction policy, `lru`, `lfu` or `fifo`
    /// (default lru).
    #[arg(long, value_name = "POLICY")]
    pub cache_policy: Option<String>,

    /// `range` and `tables`: queries per run (default 1000).
    #[arg(long, value_name = "N")]
    pub queries: Option<usize>,

    /// `range` only: query range as a percentage of the value domain
    /// (default 0.5).
    #[arg(long, value_name = "PERCENT")]
    pub range_percent: Option<f64>,

    /// `range` only: percentage of the data set's 247,000 records used
    /// (default 100).
    #[arg(long, value_name = "PERCENT")]
    pub data_percent: Option<f64>,
}

impl BenchArgs {
    /// Arguments for `experiment` with every default.
    pub fn new(experiment: &str) -> Self {
        BenchArgs {
            experiment: experiment.to_owned(),
            resume: false,
            stop_after: None,
            full: false,
            quick: false,
            tiny: false,
            out: PathBuf::from("bench-results"),
            data: PathBuf::from("data"),
            seed: 1,
            page_size: None,
            cache_size: None,
            cache_policy: None,
            queries: None,
            range_percent: None,
            data_percent: None,
        }
    }

    /// The scale the flags choose: `--tiny`, `--quick`, `--full`, else
    /// standard.
    pub fn scale(&self) -> crate::Scale {
        if self.tiny {
            crate::Scale::Tiny
        } else if self.quick {
            crate::Scale::Quick
        } else if self.full {
            crate::Scale::Full
        } else {
            crate::Scale::Standard
        }
    }

    /// The experiment-specific options given, as `name=value` pairs for
    /// [`crate::Ctx::options`].
    pub fn options(&self) -> sesame_core::Params {
        let mut p = sesame_core::Params::new();
        if let Some(v) = self.page_size {
            p.set("page_size", v);
        }
        if let Some(v) = self.cache_size {
            p.set("cache_size", v);
        }
        if let Some(v) = &self.cache_policy {
            p.set("cache_policy", v);
        }
        if let Some(v) = self.queries {
            p.set("queries", v);
        }
        if let Some(v) = self.range_percent {
            p.set("range_percent", v);
        }
        if let Some(v) = self.data_percent {
            p.set("data_percent", v);
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::Scale;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn parse(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).map(|c| c.bench)
    }

    #[test]
    fn the_standard_scale_is_the_default() {
        assert_eq!(parse(&["all"]).unwrap().scale(), Scale::Standard);
        assert_eq!(parse(&["all", "--full"]).unwrap().scale(), Scale::Full);
        assert_eq!(parse(&["all", "--quick"]).unwrap().scale(), Scale::Quick);
        assert_eq!(parse(&["all", "--tiny"]).unwrap().scale(), Scale::Tiny);
        assert!(parse(&["all", "--full", "--quick"]).is_err());
        for s in [Scale::Full, Scale::Standard, Scale::Quick, Scale::Tiny] {
            assert_eq!(Scale::parse(s.name()), Some(s));
        }
        assert_eq!(Scale::parse("huge"), None);
    }
}
