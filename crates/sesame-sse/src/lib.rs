//! Keyword searchable-encryption schemes of Sesame.
//!
//! Every scheme implements [`api::KeywordClient`] and registers a
//! [`api::KeywordScheme`] in [`schemes`].

pub mod api;
pub mod aura;
pub mod chlh15;
pub mod common;
pub mod conjunctive;
pub mod diana;
pub mod fast;
pub mod janus_pp;
pub mod kpr12;
pub mod pibas;
pub mod query;
mod renewal;
pub mod sd;
pub mod simple;
pub mod suise;
pub mod two_lev;
pub mod uedsse;
pub mod vasst16;

pub use api::{
    DocId, KeywordClient, KeywordScheme, Multimap, Prepared, UpdateOp, MAX_PREPARED_REQUEST,
};

/// Every keyword scheme, in a fixed order.
pub fn schemes() -> Vec<KeywordScheme> {
    vec![
        pibas::scheme(),
        two_lev::scheme(),
        fast::scheme(),
        diana::scheme(),
        uedsse::scheme(),
        simple::scheme(),
        aura::scheme(),
        sd::sda::scheme(),
        sd::sdd::scheme(),
        janus_pp::scheme(),
        suise::scheme(),
        suise::scheme_with_prefixes(),
        chlh15::scheme(),
        vasst16::scheme(),
        vasst16::scheme_with_prefixes(),
        kpr12::scheme(),
    ]
}

/// The keyword scheme called `name` (case-insensitive).
pub fn scheme(name: &str) -> Option<KeywordScheme> {
    schemes()
        .into_iter()
        .find(|s| s.descriptor.name.eq_ignore_ascii_case(name))
}
