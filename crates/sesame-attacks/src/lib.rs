//! Leakage-abuse attacks on what a Sesame server really sees.
//!
//! Published attack frameworks run attacks on leakage they simulate from
//! plaintext. Here the input is the server's *recorded view*: every
//! request and response the server half received and sent, and every store
//! key it read or wrote, in order, cut into operations ([`view`]). The
//! leakage an attack needs is derived from that view and public parameters
//! only ([`leakage`]), then the attacks run on it:
//!
//! - [`count`]: the count attack on keyword search results (Cash, Grubbs,
//!   Perry, Ristenpart, CCS 2015), from result sizes and their pairwise
//!   intersections, with the documents the attacker knows;
//! - [`injection`]: the file-injection attack (Zhang, Katz, Papamanthou,
//!   USENIX Security 2016), before the queries and, against schemes that
//!   are not forward private, after them by replaying their requests;
//! - [`volume`]: which keyword a query was for from the bytes its answer
//!   took (after Blackstone, Kamara, Moataz, NDSS 2020);
//! - [`ikk`]: IKK, simulated annealing over co-occurrence (Islam, Kuzu,
//!   Kantarcioglu, NDSS 2012);
//! - [`ordered`]: the sorting and cumulative attacks on order-revealing
//!   columns (Naveed, Kamara, Wright, CCS 2015), the latter through the
//!   assignment problem ([`assignment`], Kuhn-Munkres);
//! - [`clww_bits`]: plaintext bits from CLWW's first differing position
//!   (after Grubbs, Sekniqi, Bindschaedler, Naveed, Ristenpart, S&P 2017);
//! - [`range`]: value reconstruction from range queries' access patterns
//!   (Kellaris, Kollios, Nissim, O'Neill, CCS 2016) and approximate order
//!   reconstruction (after Grubbs, Lacharité, Minaud, Paterson, S&P 2019);
//! - [`range_volume`]: the count of records of each value from range
//!   queries' volumes alone (after Grubbs, Lacharité, Minaud, Paterson,
//!   CCS 2018).
//!
//! This crate depends on nothing but the standard library: it cannot reach
//! a key, a plaintext or a client half, only the bytes a harness hands it
//! (`tests/separation.rs` checks its manifest). Whoever records the view
//! (the benchmark harness, or a server run with view recording, a research
//! feature that must never run in production) converts it into
//! [`view::Observation`]s.

pub mod assignment;
pub mod clww_bits;
pub mod count;
pub mod ikk;
pub mod injection;
pub mod leakage;
pub mod ordered;
pub mod range;
pub mod range_volume;
pub mod view;
pub mod volume;

/// The share of `recovered` answers that are right, in `0.0..=1.0`: the
/// figure the papers report. Zero for no answers.
pub fn accuracy<T: PartialEq>(recovered: &[(T, T)]) -> f64 {
    if recovered.is_empty() {
        return 0.0;
    }
    let right = recovered.iter().filter(|(got, want)| got == want).count();
    right as f64 / recovered.len() as f64
}
