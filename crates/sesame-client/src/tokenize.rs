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

#[cfg(test)]
mod tests {
    use super::*;

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
