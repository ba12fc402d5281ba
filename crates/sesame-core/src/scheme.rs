//! Scheme descriptors and the registry that lists them.
//!
//! Every scheme and range protocol has a static [`SchemeDescriptor`]: its
//! name, paper, kind, privacy notions, the query kinds it answers and its
//! leakage in words. The crates that implement schemes export their
//! descriptors; the CLI, the server, the benchmark harness and the generic
//! test suites iterate over a [`Registry`] of them.

use std::fmt;

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

/// A list of descriptors with lookup by name.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    entries: Vec<&'static SchemeDescriptor>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds descriptors. A name already present is replaced, so the
    /// registry never holds two schemes of one name.
    pub fn extend(&mut self, descriptors: impl IntoIterator<Item = &'static SchemeDescriptor>) {
        for d in descriptors {
            self.entries.retain(|e| e.name != d.name);
            self.entries.push(d);
        }
    }

    /// The descriptor called `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&'static SchemeDescriptor> {
        self.entries
            .iter()
            .copied()
            .find(|d| d.name.eq_ignore_ascii_case(name))
    }

    /// Every descriptor, in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &'static SchemeDescriptor> + '_ {
        self.entries.iter().copied()
    }

    /// Every descriptor of `kind`.
    pub fn of_kind(
        &self,
        kind: SchemeKind,
    ) -> impl Iterator<Item = &'static SchemeDescriptor> + '_ {
        self.iter().filter(move |d| d.kind == kind)
    }

    /// Number of descriptors.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the registry is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static A: SchemeDescriptor = SchemeDescriptor {
        name: "a",
        title: "A",
        citation: "nobody",
        kind: SchemeKind::StaticSse,
        forward_private: false,
        backward_privacy: BackwardPrivacy::None,
        queries: &[QueryKind::Exact],
        leakage: "everything",
        doc: "docs/schemes/a.md",
    };
    static A2: SchemeDescriptor = SchemeDescriptor {
        title: "A again",
        ..A
    };

    #[test]
    fn lookup_is_case_insensitive_and_names_are_unique() {
        let mut r = Registry::new();
        r.extend([&A, &A2]);
        assert_eq!(r.len(), 1);
        assert_eq!(r.get("A").map(|d| d.title), Some("A again"));
        assert!(r.get("b").is_none());
        assert!(A.supports(QueryKind::Exact) && !A.supports(QueryKind::Range));
        assert_eq!(r.of_kind(SchemeKind::Ore).count(), 0);
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
