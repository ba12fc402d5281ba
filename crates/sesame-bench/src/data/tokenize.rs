//! The keyword tokenizer of seed 001: lower-case, split on
//! non-alphanumerics, unique keywords per document.

use std::collections::HashSet;

/// The unique keywords of `text`, in order of first appearance.
///
/// A keyword is a maximal run of alphanumeric characters (Unicode letters
/// and digits, so "naïve" and "東京" are one keyword each), lower-cased
/// after the split (lower-casing can add combining marks, as for "İ", which
/// then stay inside their keyword). Everything else separates keywords.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_cases_splits_and_dedups() {
        assert_eq!(
            tokenize("Hello, hello WORLD!! e-mail: a.b@c.org\tx_y"),
            ["hello", "world", "e", "mail", "a", "b", "c", "org", "x", "y"]
        );
        assert!(tokenize("").is_empty());
        assert!(tokenize(" ,;!? \n").is_empty());
    }

    #[test]
    fn unicode_is_kept_whole() {
        assert_eq!(
            tokenize("Naïve CAFÉ—café…東京 ΣΊΣΥΦΟΣ"),
            ["naïve", "café", "東京", "σίσυφος"]
        );
        // Digits of other scripts are alphanumeric; emoji and marks separate.
        assert_eq!(tokenize("٣٤ 🙂abc🙂"), ["٣٤", "abc"]);
        // Lower-casing "İ" adds U+0307, which stays in the keyword.
        assert_eq!(tokenize("İstanbul"), ["i\u{307}stanbul"]);
    }
}
