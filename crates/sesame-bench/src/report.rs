//! Writing a result set to disk: `results.json`, `results.csv`, one SVG
//! per chart, `results.txt` (the printed table) and an `index.html` that
//! embeds the charts and the table.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::error::BenchError;
use crate::plot;
use crate::result::ResultSet;

/// The files written for one result set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// `results.json`.
    pub json: PathBuf,
    /// `results.csv`.
    pub csv: PathBuf,
    /// `results.txt`.
    pub text: PathBuf,
    /// One SVG per chart.
    pub svgs: Vec<PathBuf>,
    /// `index.html`.
    pub html: PathBuf,
}

fn write(path: &Path, content: &str) -> Result<(), BenchError> {
    std::fs::write(path, content).map_err(|e| BenchError::io("write", path, e))
}

/// Writes every report file of `rs` into `dir` (created if needed).
pub fn write_all(rs: &ResultSet, dir: &Path) -> Result<Written, BenchError> {
    std::fs::create_dir_all(dir).map_err(|e| BenchError::io("create", dir, e))?;
    let mut w = Written {
        json: dir.join("results.json"),
        csv: dir.join("results.csv"),
        text: dir.join("results.txt"),
        svgs: Vec::new(),
        html: dir.join("index.html"),
    };
    write(&w.json, &rs.to_json()?)?;
    write(&w.csv, &rs.to_csv())?;
    write(&w.text, &rs.to_text())?;
    let mut svgs = Vec::new();
    for chart in &rs.charts {
        let svg = plot::render(rs, chart)?;
        let path = dir.join(format!("{}.svg", chart.file));
        write(&path, &svg)?;
        w.svgs.push(path);
        svgs.push((chart, svg));
    }
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{title}</title>\n<style>\n\
         body {{ font-family: sans-serif; margin: 2em; }}\n\
         table {{ border-collapse: collapse; font-size: 0.85em; }}\n\
         th, td {{ border: 1px solid #ccc; padding: 0.2em 0.5em; }}\n\
         td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}\n\
         figure {{ margin: 1em 0; }}\n</style>\n{errors}</head>\n<body data-page=\"experiment\">\n\
         <h1>{name}: {title}</h1>\n<p>Reproduces {paper}. Scale <b>{scale}</b>, seed {seed}. \
         Data: <a href=\"results.json\">JSON</a>, <a href=\"results.csv\">CSV</a> \
         (every figure; the table below shows a selection). \
         <a href=\"../index.html\">Front page</a>, \
         <a href=\"../explore.html#exp={name}\">explore</a> (filter, sort, toggle).</p>\n",
        errors = crate::explore::script(crate::explore::ERRORS_JS),
        name = escape(&rs.experiment),
        title = escape(&rs.title),
        paper = escape(&rs.seed_paper),
        scale = escape(&rs.scale),
        seed = rs.seed,
    );
    if !rs.notes.is_empty() {
        html.push_str("<ul>\n");
        for n in &rs.notes {
            let _ = writeln!(html, "<li>{}</li>", escape(n));
        }
        html.push_str("</ul>\n");
    }
    for (chart, svg) in &svgs {
        let _ = writeln!(
            html,
            "<figure id=\"{file}\" data-kind=\"{kind}\" data-paper=\"{paper}\">\n{svg}\n\
             <figcaption>{title} (<a href=\"{file}.svg\">{file}.svg</a>)</figcaption>\n</figure>",
            file = escape(&chart.file),
            kind = if plot::categories(rs, chart).is_some() {
                "bars"
            } else {
                "lines"
            },
            paper = u8::from(plot::has_paper(rs, chart)),
            title = escape(&chart.title),
            svg = strip_xml_declaration(svg),
        );
    }
    let table = rs.display_table();
    html.push_str("<table>\n<thead><tr>");
    for h in &table.header {
        let _ = write!(html, "<th>{}</th>", escape(h));
    }
    html.push_str("</tr></thead>\n<tbody>\n");
    for row in &table.rows {
        html.push_str("<tr>");
        for c in row {
            let class = if c.parse::<f64>().is_ok() {
                " class=\"num\""
            } else {
                ""
            };
            let _ = write!(html, "<td{class}>{}</td>", escape(c));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody>\n</table>\n");
    html.push_str(&crate::explore::script(crate::explore::SELFCHECK_JS));
    html.push_str("</body>\n</html>\n");
    write(&w.html, &html)?;
    Ok(w)
}

fn strip_xml_declaration(svg: &str) -> &str {
    match svg.strip_prefix("<?xml") {
        Some(rest) => rest.split_once("?>").map_or(svg, |(_, s)| s.trim_start()),
        None => svg,
    }
}

/// Escapes text for HTML.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_html() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
        assert_eq!(
            strip_xml_declaration("<?xml version=\"1.0\"?>\n<svg/>"),
            "<svg/>"
        );
        assert_eq!(strip_xml_declaration("<svg/>"), "<svg/>");
    }

    #[test]
    fn pages_say_which_charts_carry_the_papers_values_and_check_themselves() {
        use crate::result::{Axis, Chart, Row};
        let mut rows = Vec::new();
        for n in [10usize, 100] {
            let mut r = Row::new().param("n", n).param("op", "setup");
            r.set("ms", n as f64);
            r.paper("ms", 2.0 * n as f64, "ms", "a paper");
            rows.push(r);
            let mut r = Row::new().param("n", n).param("op", "search");
            r.set("ms", 1.0);
            rows.push(r);
        }
        let chart = |file: &str, op: &str| Chart {
            file: file.into(),
            title: file.into(),
            x: "n".into(),
            y: vec!["ms".into()],
            series: vec![],
            filter: vec![("op".into(), crate::result::Value::from(op))],
            x_axis: Axis {
                label: "documents".into(),
                log: false,
            },
            y_axis: Axis {
                label: "time (ms)".into(),
                log: false,
            },
        };
        let rs = ResultSet {
            experiment: "demo".into(),
            title: "t".into(),
            seed_paper: "p".into(),
            scale: "tiny".into(),
            seed: 1,
            notes: vec![],
            display: vec![],
            rows,
            charts: vec![chart("setup", "setup"), chart("search", "search")],
        };
        let dir = tempfile::tempdir().unwrap();
        let w = write_all(&rs, dir.path()).unwrap();
        let html = std::fs::read_to_string(&w.html).unwrap();
        assert!(html.contains("id=\"setup\" data-kind=\"lines\" data-paper=\"1\""));
        assert!(html.contains("id=\"search\" data-kind=\"lines\" data-paper=\"0\""));
        assert!(html.contains("data-page=\"experiment\"") && html.contains("#selfcheck"));
        assert!(html.contains("sesameErrors") && html.contains("../explore.html#exp=demo"));
    }
}
