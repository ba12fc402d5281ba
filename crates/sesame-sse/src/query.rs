//! Query kinds beyond one exact keyword: prefix, wildcard, conjunctive and
//! ranked top-k, their text syntax, and the answer a client gives.
//!
//! Syntax of [`Query::parse`] (what `sesame search` accepts):
//!
//! | text             | query                                            |
//! |------------------|--------------------------------------------------|
//! | `word`           | [`Query::Exact`]                                 |
//! | `abc*`           | [`Query::Prefix`] (one trailing `*`, nothing else)|
//! | `a?c*`, `a*c`    | [`Query::Wildcard`] (`?` one byte, `*` any run)  |
//! | `a b c`          | [`Query::Conjunctive`] (documents holding all)   |
//! | `top:K a b c`    | [`Query::Ranked`] (the K best documents)         |
//!
//! Keywords are compared as bytes; callers that lower-case their corpus
//! should lower-case the query too.

use sesame_core::{Error, QueryKind, Result, SchemeDescriptor};

/// A document identifier.
pub type DocId = u64;

/// A query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Query {
    /// Documents containing the keyword.
    Exact(Vec<u8>),
    /// Documents containing a keyword that starts with the bytes.
    Prefix(Vec<u8>),
    /// Documents containing a keyword matching the pattern (`?` matches one
    /// byte, `*` any run of bytes).
    Wildcard(Vec<u8>),
    /// Documents containing every keyword.
    Conjunctive(Vec<Vec<u8>>),
    /// The `k` documents scoring best for the keywords.
    Ranked {
        /// The keywords.
        keywords: Vec<Vec<u8>>,
        /// How many documents to return.
        k: usize,
    },
}

/// The answer to a [`Query`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueryResult {
    /// Matching documents: sorted by identifier, except for ranked queries,
    /// where they come best first.
    pub ids: Vec<DocId>,
    /// For ranked queries, the score of each of `ids`; empty otherwise.
    pub scores: Vec<f64>,
    /// Candidates the server returned that the client found not to match
    /// after decryption (false positives of filter-based schemes) and
    /// removed.
    pub false_positives_removed: usize,
}

impl Query {
    /// Parses the syntax described in the module documentation.
    pub fn parse(text: &str) -> Result<Self> {
        let mut words: Vec<&str> = text.split_whitespace().collect();
        let Some(first) = words.first().copied() else {
            return Err(Error::InvalidArgument("empty query".into()));
        };
        if let Some(k) = first.strip_prefix("top:") {
            let k: usize = k.parse().map_err(|_| {
                Error::InvalidArgument(format!("`{first}`: expected top:K with K a number"))
            })?;
            words.remove(0);
            if k == 0 || words.is_empty() {
                return Err(Error::InvalidArgument(
                    "a ranked query needs K >= 1 and at least one keyword".into(),
                ));
            }
            let keywords = plain_words(&words)?;
            return Ok(Query::Ranked { keywords, k });
        }
        if words.len() > 1 {
            return Ok(Query::Conjunctive(plain_words(&words)?));
        }
        let w = first.as_bytes();
        let stars = w.iter().filter(|&&b| b == b'*').count();
        let marks = w.iter().filter(|&&b| b == b'?').count();
        match (stars, marks) {
            (0, 0) => Ok(Query::Exact(w.to_vec())),
            (1, 0) if w.ends_with(b"*") => Ok(Query::Prefix(w[..w.len() - 1].to_vec())),
            _ => Ok(Query::Wildcard(w.to_vec())),
        }
    }

    /// The kind of the query.
    pub fn kind(&self) -> QueryKind {
        match self {
            Query::Exact(_) => QueryKind::Exact,
            Query::Prefix(_) => QueryKind::Prefix,
            Query::Wildcard(_) => QueryKind::Wildcard,
            Query::Conjunctive(_) => QueryKind::Conjunctive,
            Query::Ranked { .. } => QueryKind::Ranked,
        }
    }
}

fn plain_words(words: &[&str]) -> Result<Vec<Vec<u8>>> {
    words
        .iter()
        .map(|w| {
            if w.contains(['*', '?']) {
                Err(Error::InvalidArgument(format!(
                    "`{w}`: wildcards are allowed only in a single-keyword query"
                )))
            } else {
                Ok(w.as_bytes().to_vec())
            }
        })
        .collect()
}

/// Whether `keyword` matches `pattern` (`?` one byte, `*` any run).
pub fn wildcard_matches(pattern: &[u8], keyword: &[u8]) -> bool {
    // Iterative matcher with backtracking to the last `*`: linear space,
    // no recursion on hostile patterns.
    let (mut p, mut k) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while k < keyword.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == keyword[k]) {
            p += 1;
            k += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, k));
            p += 1;
        } else if let Some((sp, sk)) = star {
            p = sp + 1;
            k = sk + 1;
            star = Some((sp, sk + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// The error for a query kind the scheme does not declare.
pub fn unsupported(scheme: &str, query: &Query) -> Error {
    Error::Unsupported(format!(
        "scheme {scheme} does not support {:?} queries",
        query.kind()
    ))
}

/// The keyword of an exact query, for schemes that answer only those in
/// `KeywordClient::prepare_query`.
pub(crate) fn exact_keyword<'q>(d: &SchemeDescriptor, query: &'q Query) -> Result<&'q [u8]> {
    match query {
        Query::Exact(keyword) => Ok(keyword),
        _ => Err(unsupported(d.name, query)),
    }
}

/// The intersection of sorted, duplicate-free lists (empty for none).
pub fn intersect(mut sets: Vec<Vec<DocId>>) -> Vec<DocId> {
    sets.sort_by_key(Vec::len);
    let mut it = sets.into_iter();
    let Some(mut acc) = it.next() else {
        return Vec::new();
    };
    for s in it {
        acc.retain(|id| s.binary_search(id).is_ok());
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!(Query::parse("abc").unwrap(), Query::Exact(b"abc".to_vec()));
        assert_eq!(
            Query::parse(" abc* ").unwrap(),
            Query::Prefix(b"abc".to_vec())
        );
        assert_eq!(
            Query::parse("a?c*").unwrap(),
            Query::Wildcard(b"a?c*".to_vec())
        );
        assert_eq!(
            Query::parse("*bc").unwrap(),
            Query::Wildcard(b"*bc".to_vec())
        );
        assert_eq!(
            Query::parse("a b").unwrap(),
            Query::Conjunctive(vec![b"a".to_vec(), b"b".to_vec()])
        );
        assert_eq!(
            Query::parse("top:3 a b").unwrap(),
            Query::Ranked {
                keywords: vec![b"a".to_vec(), b"b".to_vec()],
                k: 3
            }
        );
        assert!(Query::parse("").is_err());
        assert!(Query::parse("top:x a").is_err());
        assert!(Query::parse("top:0 a").is_err());
        assert!(Query::parse("top:2").is_err());
        assert!(Query::parse("a* b").is_err());
    }

    #[test]
    fn wildcards_match_like_globs() {
        assert!(wildcard_matches(b"a?c*", b"abcd"));
        assert!(wildcard_matches(b"a?c*", b"abc"));
        assert!(!wildcard_matches(b"a?c*", b"ac"));
        assert!(wildcard_matches(b"*b*", b"abc"));
        assert!(wildcard_matches(b"a*c", b"abbbc"));
        assert!(!wildcard_matches(b"a*c", b"abcb"));
        assert!(wildcard_matches(b"", b""));
        assert!(!wildcard_matches(b"", b"a"));
        assert!(wildcard_matches(b"*", b""));
    }

    #[test]
    fn intersects_sorted_lists() {
        assert_eq!(
            intersect(vec![vec![1, 2, 3], vec![2, 3, 4], vec![3]]),
            vec![3]
        );
        assert!(intersect(vec![]).is_empty());
    }
}
