//! The keyword tokenizer of seed 001: lower-case, split on
//! non-alphanumerics, unique keywords per document.
//!
//! The same rule serves documents and queries, so a query finds what a
//! document was indexed under.

use std::collections::HashSet;

use crate::error::{ClientError, Result};

/// The unique keywords of `text`, in order of first appearance.
///
/// A keyword is a maximal run of alphanumeric characters
/// ([`char::is_alphanumeric`]: Unicode letters and digits, so "naïve" and
/// "東京" are one keyword each), lower-cased with [`str::to_lowercase`]
/// after the split. Everything else (spaces, punctuation, symbols, emoji,
/// `_`) separates keywords.
///
/// ```
/// use sesame_client::tokenize;
/// assert_eq!(tokenize("Größe, ÉCOLE; naïve größe"), ["größe", "école", "naïve"]);
/// ```
pub fn tokenize(text: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        let word = word.to_lowercase();
        if seen.insert(word.clone()) {
            out.push(word);
        }
    }
    out
}

/// The keywords of a file's bytes: invalid UTF-8 is decoded lossily (each
/// bad sequence becomes U+FFFD, which separates keywords).
pub fn tokenize_bytes(bytes: &[u8]) -> Vec<String> {
    tokenize(&String::from_utf8_lossy(bytes))
}

/// The one keyword of a search query, tokenized as documents are.
///
/// No keyword is [`ClientError::EmptyQuery`]; several (`"e-mail"` is "e"
/// and "mail") are [`ClientError::InvalidQuery`].
pub fn query_keyword(query: &str) -> Result<String> {
    let mut words = tokenize(query);
    match words.len() {
        0 => Err(ClientError::EmptyQuery),
        1 => Ok(words.remove(0)),
        n => Err(ClientError::InvalidQuery(format!(
            "the query {query:?} is {n} keywords ({}); search takes one",
            words.join(", ")
        ))),
    }
}

/// A query of any kind ([`sesame_sse::query::Query`]), its keywords
/// tokenized as documents are:
/// - `word` is an exact query; `abc*` a prefix query; a pattern with `*`
///   or `?` elsewhere a wildcard query;
/// - several words are a conjunctive query (all of them);
/// - `top:K w1 w2 ...` is a ranked query for the `K` best documents.
///
/// Plain words are lower-cased and split as documents are (`"E-Mail"` is
/// the two keywords "e" and "mail"); patterns are lower-cased and may hold
/// only letters, digits, `*` and `?`.
///
/// ```
/// use sesame_client::parse_query;
/// use sesame_sse::query::Query;
/// assert_eq!(parse_query("Pre*").unwrap(), Query::Prefix(b"pre".to_vec()));
/// assert_eq!(
///     parse_query("E-Mail").unwrap(),
///     Query::Conjunctive(vec![b"e".to_vec(), b"mail".to_vec()])
/// );
/// ```
pub fn parse_query(text: &str) -> Result<sesame_sse::query::Query> {
    let mut parts: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    for (i, token) in text.split_whitespace().enumerate() {
        if i == 0 && token.starts_with("top:") {
            parts.push(token.to_owned());
            continue;
        }
        let words = if token.contains(['*', '?']) {
            let lower = token.to_lowercase();
            if let Some(c) = lower
                .chars()
                .find(|c| !(c.is_alphanumeric() || *c == '*' || *c == '?'))
            {
                return Err(ClientError::InvalidQuery(format!(
                    "the pattern {token:?} holds {c:?}: patterns may hold only letters, \
                     digits, * and ?"
                )));
            }
            vec![lower]
        } else {
            tokenize(token)
        };
        for w in words {
            if seen.insert(w.clone()) {
                parts.push(w);
            }
        }
    }
    if parts.is_empty() {
        return Err(ClientError::EmptyQuery);
    }
    sesame_sse::query::Query::parse(&parts.join(" "))
        .map_err(|e| ClientError::InvalidQuery(format!("{text:?}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sesame_sse::query::Query;

    #[test]
    fn queries_of_every_kind_are_tokenized_like_documents() {
        assert_eq!(
            parse_query(" Apple ").unwrap(),
            Query::Exact(b"apple".to_vec())
        );
        assert_eq!(parse_query("APP*").unwrap(), Query::Prefix(b"app".to_vec()));
        assert_eq!(
            parse_query("a?p*e").unwrap(),
            Query::Wildcard(b"a?p*e".to_vec())
        );
        assert_eq!(
            parse_query("Apple pear apple").unwrap(),
            Query::Conjunctive(vec![b"apple".to_vec(), b"pear".to_vec()])
        );
        assert_eq!(
            parse_query("top:3 Apple, pear").unwrap(),
            Query::Ranked {
                keywords: vec![b"apple".to_vec(), b"pear".to_vec()],
                k: 3
            }
        );
        assert!(matches!(parse_query(""), Err(ClientError::EmptyQuery)));
        assert!(matches!(parse_query(" ,; "), Err(ClientError::EmptyQuery)));
        assert!(matches!(
            parse_query("top:3"),
            Err(ClientError::InvalidQuery(_))
        ));
        assert!(matches!(
            parse_query("top:x a"),
            Err(ClientError::InvalidQuery(_))
        ));
        assert!(matches!(
            parse_query("a-b*"),
            Err(ClientError::InvalidQuery(_))
        ));
        assert!(matches!(
            parse_query("a* b"),
            Err(ClientError::InvalidQuery(_))
        ));
    }

    #[test]
    fn unicode_words_are_lower_cased_whole() {
        assert_eq!(tokenize("Größe ÉCOLE naïve"), ["größe", "école", "naïve"]);
        assert_eq!(tokenize("東京 ΣΊΣΥΦΟΣ"), ["東京", "σίσυφος"]);
    }

    #[test]
    fn punctuation_splits_and_duplicates_go() {
        assert_eq!(
            tokenize("Hello, hello WORLD!! e-mail: a.b@c.org\tx_y"),
            ["hello", "world", "e", "mail", "a", "b", "c", "org", "x", "y"]
        );
        assert!(tokenize("").is_empty());
        assert!(tokenize(" ,;!? \n--").is_empty());
        assert_eq!(tokenize("a A a"), ["a"]);
    }

    #[test]
    fn digits_are_keywords() {
        assert_eq!(
            tokenize("route 66, v2.0 2024-01-31"),
            ["route", "66", "v2", "0", "2024", "01", "31"]
        );
        // Digits of other scripts are alphanumeric; emoji separate.
        assert_eq!(tokenize("٣٤ 🙂abc🙂"), ["٣٤", "abc"]);
    }

    #[test]
    fn a_query_is_one_keyword() {
        assert_eq!(query_keyword(" Größe! ").unwrap(), "größe");
        assert!(matches!(query_keyword(""), Err(ClientError::EmptyQuery)));
        assert!(matches!(query_keyword("?!"), Err(ClientError::EmptyQuery)));
        let e = query_keyword("e-mail").unwrap_err();
        assert_eq!(
            e.to_string(),
            "the query \"e-mail\" is 2 keywords (e, mail); search takes one"
        );
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily() {
        assert_eq!(
            tokenize_bytes(b"caf\xe9 ok\xff\xfeyes"),
            ["caf", "ok", "yes"]
        );
        assert_eq!(tokenize_bytes("naïve".as_bytes()), ["naïve"]);
    }
}
