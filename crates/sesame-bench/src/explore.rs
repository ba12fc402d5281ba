//! The interactive page `explore.html`, written beside the front page by
//! every run: every result set inlined as JSON, and a hand-written script
//! (`site/explore.js`) that draws the charts as SVG and the tables, with
//! an experiment picker, filters per parameter, the paper overlay and log
//! axes as toggles, and tables sorted by a click on a column header. It
//! needs no network and works from `file://`.
//!
//! Every page of the site carries two small scripts as well:
//! `site/errors.js` (collects script and console errors) and a self-check
//! (`site/selfcheck.js` for the report pages, built into `explore.js` for
//! this one), run when the page is opened with the fragment `#selfcheck`:
//! it writes its verdict into `<pre id="selfcheck">`, which
//! `scripts/check-site.sh` reads from headless Chromium.

use std::path::{Path, PathBuf};

use crate::error::BenchError;
use crate::result::ResultSet;

/// Collects script and console errors for the self-check.
pub const ERRORS_JS: &str = include_str!("site/errors.js");

/// The report pages' self-check (`#selfcheck`).
pub const SELFCHECK_JS: &str = include_str!("site/selfcheck.js");

/// The explore page's script.
const EXPLORE_JS: &str = include_str!("site/explore.js");

/// `code` as an inline script element.
pub fn script(code: &str) -> String {
    format!("<script>\n{code}</script>\n")
}

/// JSON text that is safe inside a `<script>` element: every `<` (which
/// JSON has only inside strings) is written as `\u003c`, so no `</script>`
/// or `<!--` can end the element early.
fn inline_json(sets: &[ResultSet]) -> Result<String, BenchError> {
    let json = serde_json::to_string(sets)
        .map_err(|e| BenchError::Format(format!("explore page: {e}")))?;
    Ok(json.replace('<', "\\u003c"))
}

/// The palette and every chart key's site-wide colour index (see
/// [`crate::plot::colour_index`]), for the page's script.
fn colours_json(sets: &[ResultSet]) -> String {
    let mut keys = serde_json::Map::new();
    for rs in sets {
        for chart in &rs.charts {
            for row in &rs.rows {
                let key = chart
                    .series
                    .first()
                    .and_then(|p| row.params.get(p))
                    .map(ToString::to_string);
                let names: Vec<String> = match key {
                    Some(k) => vec![k],
                    None => chart.y.clone(),
                };
                for k in names {
                    let c = crate::plot::colour_index(&k);
                    keys.insert(k, c.into());
                }
            }
        }
    }
    let palette: Vec<String> = (0..crate::plot::PALETTE.len())
        .map(crate::plot::hex)
        .collect();
    serde_json::json!({ "palette": palette, "keys": keys })
        .to_string()
        .replace('<', "\\u003c")
}

/// The explore page over `sets`.
pub fn page(sets: &[ResultSet]) -> Result<String, BenchError> {
    let data = inline_json(sets)?;
    let colours = colours_json(sets);
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>Sesame benchmark results: explore</title>\n{errors}<style>\n\
         body {{ font-family: sans-serif; margin: 2em; }}\n\
         #controls {{ position: sticky; top: 0; background: #fff; padding: 0.5em 0; \
         border-bottom: 1px solid #ccc; z-index: 1; }}\n\
         #controls label {{ margin-right: 1.2em; white-space: nowrap; }}\n\
         #filters {{ margin-top: 0.4em; }}\n\
         svg.chart text {{ font-size: 12px; }}\n\
         svg.chart text.axis-label {{ font-size: 13px; }}\n\
         figure {{ margin: 1em 0; }}\n\
         figcaption {{ font-weight: bold; margin-bottom: 0.3em; }}\n\
         table {{ border-collapse: collapse; font-size: 0.85em; }}\n\
         th, td {{ border: 1px solid #ccc; padding: 0.2em 0.5em; }}\n\
         th {{ cursor: pointer; background: #f4f4f4; user-select: none; }}\n\
         td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}\n\
         td.paper {{ font-size: 0.85em; min-width: 24em; }}\n\
         </style>\n</head>\n<body data-page=\"explore\">\n\
         <h1>Sesame benchmark results: explore</h1>\n\
         <p><a href=\"index.html\">Front page</a> (fidelity table). Pick an experiment, \
         filter its rows by a parameter, show or hide the paper's values (dashed, hollow \
         markers), change the axes, click a column header to sort the table.</p>\n\
         <div id=\"controls\"></div>\n<div id=\"main\"></div>\n\
         <script type=\"application/json\" id=\"sesame-data\">{data}</script>\n\
         <script type=\"application/json\" id=\"sesame-colours\">{colours}</script>\n{explore}\
         </body>\n</html>\n",
        errors = script(ERRORS_JS),
        explore = script(EXPLORE_JS),
    ))
}

/// Writes `explore.html` over `sets` into `out`.
pub fn write(out: &Path, sets: &[ResultSet]) -> Result<PathBuf, BenchError> {
    std::fs::create_dir_all(out).map_err(|e| BenchError::io("create", out, e))?;
    let path = out.join("explore.html");
    std::fs::write(&path, page(sets)?).map_err(|e| BenchError::io("write", &path, e))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::Row;

    #[test]
    fn the_data_is_inlined_and_cannot_end_its_script() {
        let mut row = Row::new().param("scheme", "</script><b>");
        row.set("ms", 1.5);
        let rs = ResultSet {
            experiment: "x".into(),
            title: "t".into(),
            seed_paper: "p".into(),
            scale: "quick".into(),
            seed: 1,
            notes: vec![],
            display: vec![],
            rows: vec![row],
            charts: vec![],
        };
        let html = page(std::slice::from_ref(&rs)).unwrap();
        assert!(!html.contains("</script><b>"));
        let start = html.find("id=\"sesame-data\">").unwrap() + "id=\"sesame-data\">".len();
        let end = start + html[start..].find("</script>").unwrap();
        let back: Vec<ResultSet> = serde_json::from_str(&html[start..end]).unwrap();
        assert_eq!(back, vec![rs]);
        assert!(html.contains("function selfcheck()") && html.contains("sesameErrors"));
        // Nothing is loaded from elsewhere.
        assert!(!html.contains(" src="));
        let dir = tempfile::tempdir().unwrap();
        assert!(write(dir.path(), &[]).unwrap().exists());
    }
}
