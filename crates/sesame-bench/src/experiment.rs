//! The [`Experiment`] trait, the context an experiment runs in, and the
//! registry of experiments.

use std::path::PathBuf;

use rand_chacha::ChaCha20Rng;

use crate::error::BenchError;
use crate::result::ResultSet;

/// How big an experiment runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scale {
    /// The paper's sizes, or as close as this machine allows (`--full`).
    Full,
    /// The default: sizes chosen so that every experiment together runs in
    /// about twelve minutes on a 2-core machine while still showing each
    /// paper's trends (each experiment's page lists them).
    Standard,
    /// Shrunk so that every experiment together runs in about two minutes
    /// (`--quick`, the CI smoke test).
    Quick,
    /// Smaller still: a few seconds in a debug build (the crate's own
    /// tests).
    Tiny,
}

impl Scale {
    /// `full`, `standard`, `quick` or `tiny`.
    pub fn name(self) -> &'static str {
        match self {
            Scale::Full => "full",
            Scale::Standard => "standard",
            Scale::Quick => "quick",
            Scale::Tiny => "tiny",
        }
    }

    /// The scale called `name` (as [`Scale::name`] writes it).
    pub fn parse(name: &str) -> Option<Scale> {
        [Scale::Full, Scale::Standard, Scale::Quick, Scale::Tiny]
            .into_iter()
            .find(|s| s.name() == name)
    }
}

/// What an experiment gets to run with.
#[derive(Clone, Debug)]
pub struct Ctx {
    /// The size to run at.
    pub scale: Scale,
    /// The seed of every random choice: data, workload and scheme keys.
    pub seed: u64,
    /// Where the fetched data sets are (`--data`).
    pub data_dir: PathBuf,
    /// A scratch folder for store files, removed after the run.
    pub work_dir: PathBuf,
    /// Experiment-specific options from the command line, as `name=value`
    /// pairs (`page_size`, `cache_size`, `cache_policy`, `queries`,
    /// `range_percent`, `data_percent` for `range`); empty for defaults.
    pub options: sesame_core::Params,
}

impl Ctx {
    /// The value for the current scale.
    pub fn pick<T>(&self, full: T, standard: T, quick: T, tiny: T) -> T {
        match self.scale {
            Scale::Full => full,
            Scale::Standard => standard,
            Scale::Quick => quick,
            Scale::Tiny => tiny,
        }
    }

    /// The tiny scale over `dir` (data and scratch folder both), seed 1:
    /// the context of the experiments' own tests.
    #[cfg(test)]
    pub(crate) fn tiny(dir: &std::path::Path) -> Ctx {
        Ctx {
            scale: Scale::Tiny,
            seed: 1,
            data_dir: dir.to_owned(),
            work_dir: dir.to_owned(),
            options: sesame_core::Params::new(),
        }
    }

    /// A seeded random stream for `label` (see [`crate::data::rng`]).
    pub fn rng(&self, label: &str) -> ChaCha20Rng {
        crate::data::rng(self.seed, label)
    }

    /// An empty result set for `experiment`, with its header filled in.
    pub fn result_set(&self, experiment: &dyn Experiment) -> ResultSet {
        ResultSet {
            experiment: experiment.name().to_owned(),
            title: experiment.title().to_owned(),
            seed_paper: experiment.seed_paper().to_owned(),
            scale: self.scale.name().to_owned(),
            seed: self.seed,
            notes: Vec::new(),
            display: Vec::new(),
            rows: Vec::new(),
            charts: Vec::new(),
        }
    }
}

/// One reproducible experiment, run by `sesame bench NAME`.
pub trait Experiment: Send + Sync {
    /// Registry name, lower-case with dashes (`sse-static`).
    fn name(&self) -> &'static str;

    /// One-line title.
    fn title(&self) -> &'static str;

    /// The seed paper whose evaluation it follows, and where in it.
    fn seed_paper(&self) -> &'static str;

    /// Runs the experiment and returns what it measured.
    fn run(&self, ctx: &Ctx) -> Result<ResultSet, BenchError>;

    /// Sets the papers' figures beside ours on the rows of `rs` (values,
    /// units, sources, growth laws and the reasons where ours departs),
    /// from each row's parameters and measured figures alone, replacing
    /// the ones `rs` holds. An experiment that implements it ends its
    /// [`Experiment::run`] with it, and a run that reads a stored result
    /// set back (`--resume`, the front page's other experiments: see
    /// [`crate::resume::rejudge`]) calls it, so that the fidelity table's
    /// verdicts and reasons are the current code's, not those of the build
    /// that measured. The default keeps the stored figures (experiments
    /// that set them while measuring).
    fn annotate(&self, rs: &mut ResultSet) {
        let _ = rs;
    }
}
