//! The experiments, one module each, and their list.
//!
//! Each module implements [`Experiment`] (module `experiment`, which knows
//! none of them); this module alone names them all.

pub mod attacks;
pub mod aura;
pub mod datasets;
pub mod ingest;
pub mod mobile;
pub mod ore;
pub mod range;
pub mod server;
pub mod sse_static;
pub mod tables;
pub mod uedsse;
pub mod verify;
pub mod verify_kpr12;

use crate::experiment::Experiment;

/// Every experiment, in a fixed order.
pub fn experiments() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(datasets::Datasets),
        Box::new(sse_static::SseStatic),
        Box::new(ore::Ore),
        Box::new(range::Range),
        Box::new(uedsse::Uedsse),
        Box::new(aura::Aura),
        Box::new(mobile::Mobile),
        Box::new(verify::Verify),
        Box::new(server::Server),
        Box::new(tables::Tables),
        Box::new(attacks::Attacks),
        Box::new(ingest::Ingest),
    ]
}

/// The experiment called `name` (case-insensitive).
pub fn experiment(name: &str) -> Option<Box<dyn Experiment>> {
    experiments()
        .into_iter()
        .find(|e| e.name().eq_ignore_ascii_case(name))
}
