//! Conjunctive keyword search over per-document simple indexes
//! (SI-SSE-RV and its baselines). (Being written.)
