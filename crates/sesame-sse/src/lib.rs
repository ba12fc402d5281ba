//! Keyword searchable-encryption schemes of Sesame.
//!
//! Every scheme implements [`api::KeywordClient`] and registers a
//! [`api::KeywordScheme`] in [`schemes`].

pub mod api;
pub mod common;
pub mod fast;
pub mod pibas;
pub mod simple;
pub mod two_lev;
pub mod uedsse;

pub use api::{DocId, KeywordClient, KeywordScheme, Multimap, UpdateOp};

/// Every keyword scheme, in a fixed order.
pub fn schemes() -> Vec<KeywordScheme> {
    vec![
        pibas::scheme(),
        two_lev::scheme(),
        fast::scheme(),
        uedsse::scheme(),
        simple::scheme(),
    ]
}

/// The keyword scheme called `name` (case-insensitive).
pub fn scheme(name: &str) -> Option<KeywordScheme> {
    schemes()
        .into_iter()
        .find(|s| s.descriptor.name.eq_ignore_ascii_case(name))
}
