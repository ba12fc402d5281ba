//! `range`: being written.

use crate::error::BenchError;
use crate::experiment::{Ctx, Experiment};
use crate::result::ResultSet;

/// The `range` experiment.
#[derive(Clone, Copy, Debug, Default)]
pub struct Range;

impl Experiment for Range {
    fn name(&self) -> &'static str {
        "range"
    }
    fn title(&self) -> &'static str {
        "range (being written)"
    }
    fn seed_paper(&self) -> &'static str {
        ""
    }
    fn run(&self, _ctx: &Ctx) -> Result<ResultSet, BenchError> {
        Err(BenchError::InvalidArgument("range is being written".into()))
    }
}
