//! `verify`: being written.

use crate::error::BenchError;
use crate::experiment::{Ctx, Experiment};
use crate::result::ResultSet;

/// The `verify` experiment.
#[derive(Clone, Copy, Debug, Default)]
pub struct Verify;

impl Experiment for Verify {
    fn name(&self) -> &'static str {
        "verify"
    }
    fn title(&self) -> &'static str {
        "verify (being written)"
    }
    fn seed_paper(&self) -> &'static str {
        ""
    }
    fn run(&self, _ctx: &Ctx) -> Result<ResultSet, BenchError> {
        Err(BenchError::InvalidArgument("verify is being written".into()))
    }
}
