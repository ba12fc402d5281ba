//! The experiments, one module each.

pub mod datasets;
pub mod ore;
pub mod sse_static;
pub mod uedsse;
