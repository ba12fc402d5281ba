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

/// Columns every line of `schemes` fits in (a terminal's 100).
pub(crate) const WIDTH: usize = 100;
/// Indent of a scheme's queries and leakage under its row.
const INDENT: &str = "    ";

/// The table of `schemes`, every line at most [`WIDTH`] columns: a row per
/// scheme (name, family, kind, paper, the paper wrapped in its column),
/// then its query kinds and its leakage, wrapped under the row. `--long`
/// ([`long`]) gives every field.
pub(crate) fn table(schemes: &[Scheme]) -> String {
    let rows: Vec<[String; 4]> = schemes
        .iter()
        .map(|s| {
            let d = s.descriptor();
            [
                d.name.to_owned(),
                s.family().to_string(),
                d.kind.to_string(),
                short_citation(d.citation),
            ]
        })
        .collect();
    let head = ["NAME", "FAMILY", "KIND", "PAPER"];
    let mut widths = [0; 3];
    for row in std::iter::once(&head.map(str::to_owned)).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let lead: usize = widths.iter().map(|w| w + 2).sum();
    let paper_width = WIDTH.saturating_sub(lead).max(20);
    let mut out = String::new();
    let row = |out: &mut String, cells: [&str; 3], paper: &str| {
        let mut lines = wrap(paper, paper_width).into_iter();
        let mut text = String::new();
        for (cell, w) in cells.iter().zip(widths) {
            let _ = write!(text, "{cell:<w$}  ");
        }
        text.push_str(&lines.next().unwrap_or_default());
        let _ = writeln!(out, "{}", text.trim_end());
        for rest in lines {
            let _ = writeln!(out, "{:lead$}{rest}", "");
        }
    };
    row(&mut out, [head[0], head[1], head[2]], head[3]);
    for (cells, s) in rows.iter().zip(schemes) {
        row(&mut out, [&cells[0], &cells[1], &cells[2]], &cells[3]);
        let d = s.descriptor();
        labelled(&mut out, "queries:", &queries(d));
        labelled(&mut out, "leakage:", d.leakage);
    }
    out
}

/// `text` under `label`, indented and wrapped to [`WIDTH`].
fn labelled(out: &mut String, label: &str, text: &str) {
    let pad = INDENT.len() + label.len() + 1;
    for (i, line) in wrap(text, WIDTH - pad).iter().enumerate() {
        let tag = if i == 0 { label } else { "" };
        let _ = writeln!(out, "{INDENT}{tag:<w$} {line}", w = label.len());
    }
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
        for line in t.lines() {
            assert!(
                line.chars().count() <= WIDTH,
                "{} columns: {line}",
                line.chars().count()
            );
        }
    }
}
