//! Every scheme and protocol of Sesame in one list.
//!
//! Each family defines its client interface and lists its entries (all of
//! type [`sesame_core::Entry`]): keyword schemes in `sesame-sse`
//! ([`sesame_sse::schemes`]), conjunctive simple-index schemes in
//! `sesame-sse` ([`sesame_sse::conjunctive::entries`]), ORE schemes in
//! `sesame-ore` ([`sesame_ore::schemes`]) and range protocols in
//! `sesame-range` ([`sesame_range::protocols`]). [`all`] joins them, and it
//! is what the CLI (`sesame schemes`), the server (which hosts every entry
//! with a server half), the benchmark harness and the test suites iterate.
//!
//! ```
//! let hosted = sesame_schemes::all().into_iter().filter(|s| s.hosted()).count();
//! assert!(hosted > 0);
//! let pope = sesame_schemes::get("POPE").unwrap();
//! assert_eq!(pope.family(), sesame_schemes::Family::Range);
//! ```

use std::fmt;
use std::sync::Arc;

use sesame_core::{Params, Result, SchemeDescriptor, Service, Store};
use sesame_ore::OreEntry;
use sesame_range::RangeProtocol;
use sesame_sse::conjunctive::ConjunctiveEntry;
use sesame_sse::KeywordScheme;

/// A scheme family: which client interface its entries build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Family {
    /// Keyword search over documents ([`sesame_sse::KeywordClient`]).
    Keyword,
    /// Conjunctive (and verifiable) search over fielded records, one
    /// encrypted simple index per record
    /// ([`sesame_sse::conjunctive::protocol::SiClient`]).
    Conjunctive,
    /// Order-preserving and order-revealing encryption
    /// ([`sesame_ore::DynOre`]); no server half.
    Ore,
    /// Range queries over encrypted values ([`sesame_range::RangeClient`]).
    Range,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::Keyword => "keyword",
            Family::Conjunctive => "conjunctive",
            Family::Ore => "ore",
            Family::Range => "range",
        })
    }
}

/// One registered scheme, with the entry of its family.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum Scheme {
    /// A keyword scheme.
    Keyword(KeywordScheme),
    /// A conjunctive simple-index scheme.
    Conjunctive(ConjunctiveEntry),
    /// An ORE or OPE scheme.
    Ore(OreEntry),
    /// A range protocol.
    Range(RangeProtocol),
}

/// Applies `$body` to the entry inside any variant (they differ only in
/// their client type).
macro_rules! each {
    ($scheme:expr, $entry:ident => $body:expr) => {
        match $scheme {
            Scheme::Keyword($entry) => $body,
            Scheme::Conjunctive($entry) => $body,
            Scheme::Ore($entry) => $body,
            Scheme::Range($entry) => $body,
        }
    };
}

impl Scheme {
    /// The descriptor.
    pub fn descriptor(&self) -> &'static SchemeDescriptor {
        each!(self, e => e.descriptor)
    }

    /// The registry name.
    pub fn name(&self) -> &'static str {
        self.descriptor().name
    }

    /// Parameter names with their defaults in words.
    pub fn params(&self) -> &'static [(&'static str, &'static str)] {
        each!(self, e => e.params)
    }

    /// The family.
    pub fn family(&self) -> Family {
        match self {
            Scheme::Keyword(_) => Family::Keyword,
            Scheme::Conjunctive(_) => Family::Conjunctive,
            Scheme::Ore(_) => Family::Ore,
            Scheme::Range(_) => Family::Range,
        }
    }

    /// Whether the scheme has a server half, so that a server can host an
    /// index of it.
    pub fn hosted(&self) -> bool {
        each!(self, e => e.new_server.is_some())
    }

    /// The server half over `store` with the index's `params`
    /// ([`sesame_core::Error::Unsupported`] for a scheme without one).
    pub fn server(&self, store: Arc<dyn Store>, params: &Params) -> Result<Box<dyn Service>> {
        each!(self, e => e.server(store, params))
    }

    /// Checks `params` as the scheme's client would: unknown names and bad
    /// values are [`sesame_core::Error::InvalidArgument`]. It builds (and
    /// drops) a client with fresh keys, so it costs what key generation
    /// costs.
    pub fn check_params(&self, params: &Params) -> Result<()> {
        let mut rng = rand_core::OsRng;
        each!(self, e => (e.new_client)(&mut rng, params).map(drop))
    }
}

/// Every registered scheme: keyword schemes, conjunctive schemes, ORE
/// schemes, then range protocols, each family in its own order.
pub fn all() -> Vec<Scheme> {
    let keyword = sesame_sse::schemes().into_iter().map(Scheme::Keyword);
    let conjunctive = sesame_sse::conjunctive::entries()
        .into_iter()
        .map(Scheme::Conjunctive);
    let ore = sesame_ore::schemes().into_iter().map(Scheme::Ore);
    let range = sesame_range::protocols().into_iter().map(Scheme::Range);
    keyword.chain(conjunctive).chain(ore).chain(range).collect()
}

/// The scheme called `name` (case-insensitive).
pub fn get(name: &str) -> Option<Scheme> {
    all()
        .into_iter()
        .find(|s| s.name().eq_ignore_ascii_case(name))
}

/// The names of the schemes a server can host, comma-separated (for
/// error messages).
pub fn hosted_names() -> String {
    all()
        .iter()
        .filter(|s| s.hosted())
        .map(Scheme::name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn names_are_unique_across_families_and_lookup_ignores_case() {
        let all = all();
        let names: BTreeSet<String> = all.iter().map(|s| s.name().to_lowercase()).collect();
        assert_eq!(names.len(), all.len(), "two entries share a name");
        for s in &all {
            let found = get(&s.name().to_uppercase()).map(|f| f.name());
            assert_eq!(found, Some(s.name()));
        }
        assert!(get("no-such-scheme").is_none());
    }

    #[test]
    fn every_family_is_listed_and_only_ore_runs_without_a_server() {
        let all = all();
        for family in [
            Family::Keyword,
            Family::Conjunctive,
            Family::Ore,
            Family::Range,
        ] {
            assert!(all.iter().any(|s| s.family() == family), "{family}");
        }
        for s in &all {
            assert_eq!(s.hosted(), s.family() != Family::Ore, "{}", s.name());
        }
        for name in ["si-sse-rv", "gsw04", "bkm05", "bll06", "wwp08", "kpr12"] {
            assert!(get(name).is_some(), "{name} is not listed");
        }
    }

    #[test]
    fn every_hosted_scheme_makes_a_server_and_checks_its_parameters() {
        let store: Arc<dyn Store> = Arc::new(sesame_store::MemoryStore::new());
        for s in all() {
            s.check_params(&Params::new())
                .unwrap_or_else(|e| panic!("{}: defaults refused: {e}", s.name()));
            let mut bad = Params::new();
            bad.set("no_such_parameter", 1);
            assert!(
                s.check_params(&bad).is_err(),
                "{} accepts anything",
                s.name()
            );
            if s.hosted() {
                assert!(
                    s.server(store.clone(), &Params::new()).is_ok(),
                    "{}",
                    s.name()
                );
            } else {
                assert!(
                    s.server(store.clone(), &Params::new()).is_err(),
                    "{}",
                    s.name()
                );
            }
        }
    }
}
