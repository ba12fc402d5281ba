//! The experiments, one module each.

pub mod datasets;
pub mod sse_static;
