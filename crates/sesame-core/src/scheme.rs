//! Scheme descriptors and registry entries.
//!
//! Every scheme and range protocol has a static [`SchemeDescriptor`]: its
//! name, paper, kind, privacy notions, the query kinds it answers and its
//! leakage in words. Its [`Entry`] adds the parameters it reads and the
//! constructors of its client and server halves. The crates that implement
//! schemes export their entries; `sesame_schemes::all()` lists every one,
//! and the CLI, the server, the benchmark harness and the generic test
//! suites iterate over that list.

use std::fmt;
use std::sync::Arc;

use rand_core::CryptoRngCore;

use crate::{Service, Store};

use serde::Serialize;

/// What family a scheme belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub enum SchemeKind {
    /// Static searchable symmetric encryption: the index is built once.
    StaticSse,
    /// Dynamic SSE: documents can be added and deleted after setup.
    DynamicSse,
    /// Order-preserving encryption.
    Ope,
    /// Order-revealing encryption.
    Ore,
    /// A range-query protocol.
    Range,
}

impl SchemeKind {
    /// Whether schemes of this kind index documents by keyword (static
    /// or dynamic SSE).
    pub fn is_sse(self) -> bool {
        matches!(self, SchemeKind::StaticSse | SchemeKind::DynamicSse)
    }
}

impl fmt::Display for SchemeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SchemeKind::StaticSse => "static SSE",
            SchemeKind::DynamicSse => "dynamic SSE",
            SchemeKind::Ope => "OPE",
            SchemeKind::Ore => "ORE",
            SchemeKind::Range => "range protocol",
        })
    }
}

/// A kind of query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub enum QueryKind {
    /// One keyword, exact match.
    Exact,
    /// Keywords starting with a given prefix (`abc*`).
    Prefix,
    /// Keywords matching a pattern with `*` and `?`.
    Wildcard,
    /// Documents holding all of several keywords.
    Conjunctive,
    /// The k best documents for several keywords.
    Ranked,
    /// Results come with a proof the client verifies.
    Verifiable,
    /// Values in an interval.
    Range,
}

impl fmt::Display for QueryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QueryKind::Exact => "exact",
            QueryKind::Prefix => "prefix",
            QueryKind::Wildcard => "wildcard",
            QueryKind::Conjunctive => "conjunctive",
            QueryKind::Ranked => "ranked",
            QueryKind::Verifiable => "verifiable",
            QueryKind::Range => "range",
        })
    }
}

/// Backward-privacy notion of a dynamic scheme (Bost, Minaud, Ohrimenko,
/// CCS 2017).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[non_exhaustive]
pub enum BackwardPrivacy {
    /// Not applicable (static scheme) or not claimed.
    None,
    /// Type I: leaks only the matching documents currently present and
    /// when they were inserted.
    TypeI,
    /// Type II: also leaks when every update on the keyword happened.
    TypeII,
    /// Type III: also leaks which deletion cancelled which insertion.
    TypeIII,
}

/// The static description of a scheme or protocol.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SchemeDescriptor {
    /// Registry name, lower-case (`pibas`, `2lev`, ...).
    pub name: &'static str,
    /// Human-readable title.
    pub title: &'static str,
    /// The paper: authors, venue, year, title.
    pub citation: &'static str,
    /// Family.
    pub kind: SchemeKind,
    /// Whether updates leak nothing about earlier searches (dynamic SSE).
    pub forward_private: bool,
    /// Backward-privacy type.
    pub backward_privacy: BackwardPrivacy,
    /// The query kinds answered.
    pub queries: &'static [QueryKind],
    /// Leakage in words.
    pub leakage: &'static str,
    /// Path of the scheme's page under `docs/`.
    pub doc: &'static str,
}

impl SchemeDescriptor {
    /// Whether the scheme answers `kind` queries.
    pub fn supports(&self, kind: QueryKind) -> bool {
        self.queries.contains(&kind)
    }
}

/// Constructor of a scheme's server half over a store (the index's own key
/// space), with the index's parameters.
pub type NewServer = fn(Arc<dyn Store>, &Params) -> crate::Result<Box<dyn Service>>;

/// A scheme's registry entry: its descriptor and parameters, and how to
/// make its client and server halves.
///
/// One type for every family; `C` is the family's client interface
/// (`dyn KeywordClient` for keyword schemes, `dyn DynOre` for ORE schemes,
/// `dyn RangeClient` for range protocols, the simple-index protocol's client
/// for conjunctive schemes). The list of every entry, across families, is
/// `sesame_schemes::all()`.
pub struct Entry<C: ?Sized + 'static> {
    /// The descriptor.
    pub descriptor: &'static SchemeDescriptor,
    /// Parameter names the scheme reads, with their defaults in words.
    pub params: &'static [(&'static str, &'static str)],
    /// A client with fresh keys. It checks the parameters: an unknown name
    /// or a bad value is [`crate::Error::InvalidArgument`].
    pub new_client: fn(&mut dyn CryptoRngCore, &Params) -> crate::Result<Box<C>>,
    /// A client restored from the bytes its family's `save_state` returned.
    pub restore_client: fn(&[u8]) -> crate::Result<Box<C>>,
    /// The server half, or `None` for a scheme that runs on the client
    /// alone (an ORE scheme: its ciphertexts are compared by whatever
    /// structure stores them, such as the B+ tree protocols).
    pub new_server: Option<NewServer>,
}

impl<C: ?Sized> Entry<C> {
    /// The server half over `store` with the index's `params`, or
    /// [`crate::Error::Unsupported`] for a scheme without one.
    pub fn server(
        &self,
        store: Arc<dyn Store>,
        params: &Params,
    ) -> crate::Result<Box<dyn Service>> {
        match self.new_server {
            Some(new) => new(store, params),
            None => Err(crate::Error::Unsupported(format!(
                "{} has no server half: it runs on the client alone",
                self.descriptor.name
            ))),
        }
    }

    /// The names of the parameters the scheme reads.
    pub fn param_names(&self) -> impl Iterator<Item = &'static str> {
        self.params.iter().map(|(name, _)| *name)
    }
}

impl<C: ?Sized> Clone for Entry<C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C: ?Sized> Copy for Entry<C> {}

impl<C: ?Sized> fmt::Debug for Entry<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("name", &self.descriptor.name)
            .field("kind", &self.descriptor.kind)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static A: SchemeDescriptor = SchemeDescriptor {
        name: "a",
        title: "A",
        citation: "nobody",
        kind: SchemeKind::Ore,
        forward_private: false,
        backward_privacy: BackwardPrivacy::None,
        queries: &[QueryKind::Range],
        leakage: "everything",
        doc: "docs/schemes/a.md",
    };

    /// A store that holds nothing; the entry under test never reads it.
    struct Empty;

    impl Store for Empty {
        fn get(&self, _: &[u8]) -> crate::Result<Option<Vec<u8>>> {
            Ok(None)
        }
        fn write(&self, _: crate::WriteBatch) -> crate::Result<()> {
            Ok(())
        }
        fn scan_prefix(&self, _: &[u8]) -> crate::Result<Vec<(Vec<u8>, Vec<u8>)>> {
            Ok(Vec::new())
        }
        fn io_counts(&self) -> crate::IoCounts {
            crate::IoCounts::default()
        }
        fn backend(&self) -> &'static str {
            "empty"
        }
    }

    #[test]
    fn an_entry_without_a_server_half_says_so() {
        let entry: Entry<()> = Entry {
            descriptor: &A,
            params: &[("bits", "32")],
            new_client: |_, _| Ok(Box::new(())),
            restore_client: |_| Ok(Box::new(())),
            new_server: None,
        };
        let store: Arc<dyn Store> = Arc::new(Empty);
        let err = entry
            .server(store, &Params::new())
            .err()
            .map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("a has no server half")),
            "{err:?}"
        );
        assert_eq!(entry.param_names().collect::<Vec<_>>(), ["bits"]);
        assert!(A.supports(QueryKind::Range) && !A.supports(QueryKind::Exact));
    }
}

/// Scheme parameters given at index creation, as `name=value` pairs
/// (`block=512`, `h=5`, ...). Each scheme documents the names it reads and
/// refuses the ones it does not know.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Params {
    pairs: std::collections::BTreeMap<String, String>,
}

impl Params {
    /// No parameters: every scheme's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `a=1,b=2` (empty text gives no parameters).
    pub fn parse(text: &str) -> crate::Result<Self> {
        let mut p = Params::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = item.split_once('=').ok_or_else(|| {
                crate::Error::InvalidArgument(format!("parameter {item:?} is not name=value"))
            })?;
            p.set(k.trim(), v.trim());
        }
        Ok(p)
    }

    /// Sets one parameter.
    pub fn set(&mut self, name: &str, value: impl ToString) -> &mut Self {
        self.pairs.insert(name.to_owned(), value.to_string());
        self
    }

    /// The parameter `name` parsed as `T`, or `default` when absent.
    pub fn get_or<T: std::str::FromStr>(&self, name: &str, default: T) -> crate::Result<T> {
        match self.pairs.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                crate::Error::InvalidArgument(format!("parameter {name}={v:?} is not valid"))
            }),
        }
    }

    /// Fails if a parameter is not among `known`.
    pub fn only(&self, scheme: &str, known: &[&str]) -> crate::Result<()> {
        match self.pairs.keys().find(|k| !known.contains(&k.as_str())) {
            None => Ok(()),
            Some(k) => Err(crate::Error::InvalidArgument(format!(
                "scheme {scheme} has no parameter {k:?} (known: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ))),
        }
    }

    /// These parameters less the ones called `names`.
    pub fn without(&self, names: &[&str]) -> Params {
        let mut rest = self.clone();
        rest.pairs.retain(|k, _| !names.contains(&k.as_str()));
        rest
    }

    /// Whether no parameter is set.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }
}

impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, v) in &self.pairs {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}
