//! The experiments, one module each.

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
