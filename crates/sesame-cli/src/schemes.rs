//! `sesame schemes`: every registered scheme and protocol as a table, from
//! the one registry (`sesame_schemes::all`): keyword schemes, conjunctive
//! simple-index schemes, ORE schemes and range protocols.

use std::fmt::Write;

use sesame_core::{BackwardPrivacy, SchemeDescriptor};
use sesame_schemes::Scheme;

/// Every registered scheme, family by family.
pub(crate) fn all() -> Vec<Scheme> {
    sesame_schemes::all()
}

/// Width the leakage column is wrapped to.
const LEAKAGE_WIDTH: usize = 60;

/// The table of `schemes`: name, family, kind, paper, query kinds,
/// leakage.
pub(crate) fn table(schemes: &[Scheme]) -> String {
    let rows: Vec<[String; 5]> = schemes
        .iter()
        .map(|s| {
            let d = s.descriptor();
            [
                d.name.to_owned(),
                s.family().to_string(),
                d.kind.to_string(),
                short_citation(d.citation),
                queries(d),
            ]
        })
        .collect();
    let head = ["NAME", "FAMILY", "KIND", "PAPER", "QUERIES"];
    let mut widths = head.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let indent: usize = widths.iter().map(|w| w + 2).sum();
    let mut out = String::new();
    let line = |out: &mut String, cells: [&str; 5], last: &str| {
        for (cell, w) in cells.iter().zip(widths) {
            let _ = write!(out, "{cell:<w$}  ");
        }
        out.push_str(last);
        out.push('\n');
    };
    line(&mut out, head, "LEAKAGE");
    for (row, s) in rows.iter().zip(schemes) {
        let wrapped = wrap(s.descriptor().leakage, LEAKAGE_WIDTH);
        let mut parts = wrapped.iter();
        let first = parts.next().map(String::as_str).unwrap_or("");
        line(
            &mut out,
            [&row[0], &row[1], &row[2], &row[3], &row[4]],
            first,
        );
        for rest in parts {
            let _ = writeln!(out, "{:indent$}{rest}", "");
        }
    }
    out
}

/// Every field of every scheme.
pub(crate) fn long(schemes: &[Scheme]) -> String {
    let mut out = String::new();
    for s in schemes {
        let d = s.descriptor();
        let _ = writeln!(out, "{} - {}", d.name, d.title);
        let _ = writeln!(out, "  paper:     {}", d.citation);
        let _ = writeln!(out, "  family:    {}", s.family());
        let _ = writeln!(out, "  kind:      {}", d.kind);
        let _ = writeln!(
            out,
            "  server:    {}",
            if s.hosted() {
                "hosted by `sesame serve`"
            } else {
                "none (runs on the client; stored through the bplus-* protocols)"
            }
        );
        let _ = writeln!(
            out,
            "  privacy:   forward {}, backward {}",
            if d.forward_private { "yes" } else { "no" },
            backward(d.backward_privacy)
        );
        let _ = writeln!(out, "  queries:   {}", queries(d));
        if s.params().is_empty() {
            let _ = writeln!(out, "  params:    none");
        }
        for (name, default) in s.params() {
            let _ = writeln!(out, "  params:    {name} = {default}");
        }
        let mut first = true;
        for l in wrap(d.leakage, 70) {
            let _ = writeln!(out, "  {:<10} {l}", if first { "leakage:" } else { "" });
            first = false;
        }
        let _ = writeln!(out, "  notes:     {}\n", d.doc);
    }
    out
}

fn backward(b: BackwardPrivacy) -> &'static str {
    match b {
        BackwardPrivacy::TypeI => "type I",
        BackwardPrivacy::TypeII => "type II",
        BackwardPrivacy::TypeIII => "type III",
        _ => "none",
    }
}

fn queries(d: &SchemeDescriptor) -> String {
    d.queries
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// "D. Cash, J. Jaeger, .... Title. NDSS 2014" as "Cash et al., NDSS 2014".
pub(crate) fn short_citation(citation: &str) -> String {
    let citation = citation.split_whitespace().collect::<Vec<_>>().join(" ");
    // The author list ends at the first ". " that follows a word longer
    // than an initial.
    let mut authors_end = None;
    for (i, _) in citation.match_indices(". ") {
        let word = citation[..i].rsplit([' ', ',']).next().unwrap_or("");
        if word.chars().count() > 2 {
            authors_end = Some(i);
            break;
        }
    }
    let venue = citation
        .rsplit(". ")
        .next()
        .unwrap_or(&citation)
        .trim_end_matches('.');
    let Some(end) = authors_end else {
        return citation;
    };
    let authors: Vec<&str> = citation[..end]
        .split([','])
        .flat_map(|a| a.split(" and "))
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .collect();
    let surname = |a: &str| a.rsplit(' ').next().unwrap_or(a).to_owned();
    let who = match authors.as_slice() {
        [] => return citation,
        [one] => surname(one),
        [a, b] => format!("{} and {}", surname(a), surname(b)),
        [a, ..] => format!("{} et al.", surname(a)),
    };
    format!("{who}, {venue}")
}

/// `text` in lines of at most `width` characters (longer words stand alone).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citations_shorten() {
        assert_eq!(
            short_citation(
                "D. Cash, J. Jaeger, S. Jarecki, C. Jutla, H. Krawczyk, M.-C. Rosu, M. Steiner. \
                 Dynamic Searchable Encryption in Very-Large Databases. NDSS 2014"
            ),
            "Cash et al., NDSS 2014"
        );
        assert_eq!(
            short_citation("R. Bost. Forward Secure Searchable Encryption. CCS 2016"),
            "Bost, CCS 2016"
        );
        assert_eq!(
            short_citation("R. Bost and B. Minaud. A title. CCS 2017"),
            "Bost and Minaud, CCS 2017"
        );
        assert_eq!(short_citation("unparsed"), "unparsed");
    }

    #[test]
    fn wrap_keeps_words_whole() {
        assert_eq!(wrap("aa bb cc", 5), ["aa bb", "cc"]);
        assert_eq!(wrap("", 5), Vec::<String>::new());
        assert_eq!(wrap("abcdefgh x", 4), ["abcdefgh", "x"]);
    }

    #[test]
    fn table_lists_every_scheme() {
        let all = all();
        assert_eq!(
            all.len(),
            sesame_sse::schemes().len()
                + sesame_sse::conjunctive::entries().len()
                + sesame_ore::schemes().len()
                + sesame_range::protocols().len()
        );
        let t = table(&all);
        for s in &all {
            assert!(t.contains(s.name()));
        }
        assert!(t.starts_with("NAME"));
        assert!(long(&all).contains("leakage:"));
    }
}
