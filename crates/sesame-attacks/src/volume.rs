//! A volume attack: which keyword a query was for, from the bytes its
//! answer took alone (the decoding idea of L. Blackstone, S. Kamara,
//! T. Moataz, "Revisiting Leakage Abuse Attacks", NDSS 2020, on
//! response volume).
//!
//! The attacker knows the documents (their keywords and sizes). A
//! keyword's *volume* is the total size of its documents; a query whose
//! observed volume only one keyword's volume explains is that keyword.
//! Schemes that hide the access pattern (the results' identifiers) still
//! leak the volume unless they pad it; this needs nothing but the sizes.
//!
//! Observed volumes carry a per-query overhead (framing, tokens) that the
//! attacker measures once: `overhead` is subtracted, and a keyword fits
//! when its volume is within `slack` bytes of what remains.

use std::collections::BTreeMap;

/// The keyword taken for each observed volume it explains alone, by
/// position in `observed`. `volumes`: keyword to the total bytes of its
/// documents.
pub fn attack(
    observed: &[usize],
    volumes: &BTreeMap<String, usize>,
    overhead: usize,
    slack: usize,
) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, &v) in observed.iter().enumerate() {
        let v = v.saturating_sub(overhead);
        let mut fits = volumes.iter().filter(|(_, &w)| w.abs_diff(v) <= slack);
        if let (Some((w, _)), None) = (fits.next(), fits.next()) {
            out.push((i, w.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unique_volume_names_its_keyword() {
        let volumes = BTreeMap::from([
            ("a".to_owned(), 100),
            ("b".to_owned(), 250),
            ("c".to_owned(), 252),
        ]);
        // 100 + 10 overhead: a; 261: b or c within a slack of 2.
        let got = attack(&[110, 261, 30], &volumes, 10, 2);
        assert_eq!(got, vec![(0, "a".to_owned())]);
        // With no slack, b alone explains 260.
        assert_eq!(attack(&[260], &volumes, 10, 0), vec![(0, "b".to_owned())]);
    }
}
