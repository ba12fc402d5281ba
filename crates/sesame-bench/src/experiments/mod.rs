//! The experiments, one module each.

pub mod aura;
pub mod datasets;
pub mod mobile;
pub mod ore;
pub mod server;
pub mod sse_static;
pub mod uedsse;
