//! SVG charts of result sets, drawn with `plotters`' SVG backend (pure
//! Rust: text is written as SVG `<text>` and laid out with estimated glyph
//! sizes, so no font files or system libraries are needed): lines when the
//! x parameter is a number, grouped bars when it is a word (categories
//! such as encrypt / decrypt / compare, which a line would join as if they
//! were points of a scale).

use plotters::prelude::*;

use crate::error::BenchError;
use crate::result::{Chart, ResultSet, Row};

/// One line of a chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// Points sorted by x.
    pub points: Vec<(f64, f64)>,
    /// The paper's reported values for the line of the same label without
    /// " (paper)": drawn dashed with hollow markers, in that line's colour.
    pub paper: bool,
}

/// Suffix of the label of a paper series.
const PAPER: &str = " (paper)";

/// The lines of `chart` over the rows of `rs`: one per distinct value of
/// the series parameters and per y figure, and beside it one of the
/// paper's values where the rows carry the paper's figure of that name.
/// Rows without the x or y value are skipped, as are values that are not
/// positive on a log axis.
pub fn series(rs: &ResultSet, chart: &Chart) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    let mut add = |label: String, point: (f64, f64), paper: bool| match out
        .iter_mut()
        .find(|s| s.label == label)
    {
        Some(s) => s.points.push(point),
        None => out.push(Series {
            label,
            points: vec![point],
            paper,
        }),
    };
    for row in rs.rows.iter().filter(|r| chart.selects(r)) {
        let Some(x) = row.number(&chart.x) else {
            continue;
        };
        if chart.x_axis.log && x <= 0.0 {
            continue;
        }
        for y_name in &chart.y {
            let ours = row.figures.get(y_name).copied();
            let theirs = row
                .paper
                .iter()
                .find(|p| p.name == *y_name)
                .map(|p| p.value);
            for (y, paper) in [(ours, false), (theirs, true)] {
                let Some(y) = y.filter(|y| y.is_finite() && !(chart.y_axis.log && *y <= 0.0))
                else {
                    continue;
                };
                let mut label = label(row, chart, y_name);
                if paper {
                    label.push_str(PAPER);
                }
                add(label, (x, y), paper);
            }
        }
    }
    for s in &mut out {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

fn label(row: &Row, chart: &Chart, y_name: &str) -> String {
    let mut parts: Vec<String> = chart
        .series
        .iter()
        .filter_map(|p| row.params.get(p).map(|v| format!("{p}={v}")))
        .collect();
    if chart.y.len() > 1 || parts.is_empty() {
        parts.push(y_name.to_owned());
    }
    parts.join(" ")
}

fn range(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !lo.is_finite() {
        return if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        (lo / 1.5, hi * 1.5)
    } else {
        let pad = ((hi - lo) * 0.05).max(hi.abs() * 0.05).max(1e-9);
        let lo = if lo >= 0.0 { 0.0 } else { lo - pad };
        (lo, hi + pad)
    }
}

/// Tick positions for a log axis over `lo..hi`: the powers of ten and
/// their 2 and 5 multiples inside the range, more multiples when that
/// gives fewer than four, and evenly spaced values when the range is too
/// narrow for any of them (a range inside one decade would otherwise get
/// no tick at all).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && lo.is_finite() && hi.is_finite()) {
        return Vec::new();
    }
    let decades = (lo.log10().floor() as i32)..=(hi.log10().ceil() as i32);
    let with = |multiples: &[f64]| -> Vec<f64> {
        decades
            .clone()
            .flat_map(|k| multiples.iter().map(move |m| m * 10f64.powi(k)))
            .filter(|v| *v >= lo && *v <= hi)
            .collect()
    };
    let mut ticks = with(&[1.0, 2.0, 5.0]);
    if ticks.len() < 4 {
        ticks = with(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    }
    if ticks.len() < 3 {
        // Five values spread over the range, three significant digits.
        ticks = (0..5)
            .map(|i| {
                let v = lo * (hi / lo).powf(f64::from(i) / 4.0);
                let scale = 10f64.powi(v.log10().floor() as i32 - 2);
                (v / scale).round() * scale
            })
            .filter(|v| *v >= lo && *v <= hi)
            .collect();
        ticks.dedup();
    }
    ticks
}

fn plot_err(chart: &Chart, e: impl std::fmt::Display) -> BenchError {
    BenchError::Plot {
        chart: chart.file.clone(),
        message: e.to_string(),
    }
}

/// A tick label: integers as such, others with up to four significant
/// digits and no trailing zeros.
fn tick(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        return format!("{v:.0}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 12) as usize;
    let s = format!("{v:.digits$}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_owned()
}

macro_rules! draw {
    ($root:expr, $chart:expr, $lines:expr, $xr:expr, $yr:expr) => {{
        let chart = $chart;
        let mut cc = ChartBuilder::on($root)
            .caption(&chart.title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d($xr, $yr)
            .map_err(|e| plot_err(chart, e))?;
        cc.configure_mesh()
            .x_desc(chart.x_axis.label.as_str())
            .y_desc(chart.y_axis.label.as_str())
            .x_labels(7)
            .y_labels(8)
            .x_label_formatter(&|v: &f64| tick(*v))
            .y_label_formatter(&|v: &f64| tick(*v))
            .draw()
            .map_err(|e| plot_err(chart, e))?;
        for (i, s) in $lines.iter().enumerate() {
            let color = Palette99::pick(colour_of(&$lines, i)).to_rgba();
            if s.paper {
                cc.draw_series(DashedLineSeries::new(
                    s.points.iter().copied(),
                    6,
                    4,
                    color.stroke_width(1),
                ))
                .map_err(|e| plot_err(chart, e))?;
                cc.draw_series(
                    s.points
                        .iter()
                        .map(|&p| Circle::new(p, 4, color.stroke_width(2))),
                )
                .map_err(|e| plot_err(chart, e))?;
            } else {
                cc.draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(|e| plot_err(chart, e))?;
                cc.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                    .map_err(|e| plot_err(chart, e))?;
            }
        }
    }};
}

/// The palette index of line `i`: a paper series takes the colour of our
/// line of the same label, so that the two read as a pair.
fn colour_of(lines: &[Series], i: usize) -> usize {
    let Some(s) = lines.get(i) else {
        return i;
    };
    if !s.paper {
        return lines[..i].iter().filter(|l| !l.paper).count();
    }
    let ours = s.label.trim_end_matches(PAPER);
    match lines.iter().position(|l| !l.paper && l.label == ours) {
        Some(j) => colour_of(lines, j),
        None => lines.iter().filter(|l| !l.paper).count() + i,
    }
}

/// Width of the chart, and of the legend beside it, in pixels.
const PLOT_WIDTH: u32 = 720;
const LEGEND_WIDTH: u32 = 300;
const HEIGHT: u32 = 540;

/// The image's height: the chart's, or more when the legend needs it (one
/// entry per 20 pixels from 50 down).
fn height_for(entries: usize) -> u32 {
    let legend = 50 + 20 * u32::try_from(entries).unwrap_or(u32::MAX / 40) + 20;
    HEIGHT.max(legend)
}

/// Draws the legend in its own area, right of the chart, so that it never
/// hides a line.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &Chart,
    lines: &[Series],
) -> Result<(), BenchError> {
    let style = ("sans-serif", 13).into_font().color(&BLACK);
    for (i, s) in lines.iter().enumerate() {
        let color = Palette99::pick(colour_of(lines, i)).to_rgba();
        let y = 50 + 20 * i as i32;
        if s.paper {
            for x in [5, 17, 29] {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 6, y)],
                    color.stroke_width(1),
                ))
                .map_err(|e| plot_err(chart, e))?;
            }
            area.draw(&Circle::new((17, y), 4, color.stroke_width(2)))
                .map_err(|e| plot_err(chart, e))?;
        } else {
            area.draw(&PathElement::new(
                vec![(5, y), (30, y)],
                color.stroke_width(2),
            ))
            .map_err(|e| plot_err(chart, e))?;
            area.draw(&Circle::new((17, y), 3, color.filled()))
                .map_err(|e| plot_err(chart, e))?;
        }
        area.draw(&Text::new(s.label.clone(), (38, y - 7), style.clone()))
            .map_err(|e| plot_err(chart, e))?;
    }
    Ok(())
}

/// The categories of a chart whose x parameter is a word, in order of
/// first appearance; `None` when it is a number.
pub fn categories(rs: &ResultSet, chart: &Chart) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for row in rs.rows.iter().filter(|r| chart.selects(r)) {
        match row.params.get(&chart.x) {
            Some(crate::result::Value::Text(t)) if !out.contains(t) => out.push(t.clone()),
            Some(crate::result::Value::Text(_)) => {}
            Some(_) => return None,
            None => {}
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The bars of a categorical chart: per series (as for lines), the value
/// of each category (`None` where it has none); beside a series whose rows
/// carry the paper's figure, a paper series (label ending " (paper)",
/// flag `true`), drawn as outlined bars of the same colour.
fn bar_series(rs: &ResultSet, chart: &Chart, cats: &[String]) -> Vec<(Series, Vec<Option<f64>>)> {
    let mut out: Vec<(Series, Vec<Option<f64>>)> = Vec::new();
    for row in rs.rows.iter().filter(|r| chart.selects(r)) {
        let Some(crate::result::Value::Text(cat)) = row.params.get(&chart.x) else {
            continue;
        };
        let Some(at) = cats.iter().position(|c| c == cat) else {
            continue;
        };
        for y_name in &chart.y {
            let ours = row.figures.get(y_name).copied();
            let theirs = row
                .paper
                .iter()
                .find(|p| p.name == *y_name)
                .map(|p| p.value);
            for (y, paper) in [(ours, false), (theirs, true)] {
                let Some(y) = y.filter(|y| y.is_finite() && !(chart.y_axis.log && *y <= 0.0))
                else {
                    continue;
                };
                let mut label = label(row, chart, y_name);
                if paper {
                    label.push_str(PAPER);
                }
                let i = match out.iter().position(|(s, _)| s.label == label) {
                    Some(i) => i,
                    None => {
                        out.push((
                            Series {
                                label,
                                points: Vec::new(),
                                paper,
                            },
                            vec![None; cats.len()],
                        ));
                        out.len() - 1
                    }
                };
                if let Some(slot) = out.get_mut(i).and_then(|(_, v)| v.get_mut(at)) {
                    *slot = Some(y);
                }
            }
        }
    }
    // Each paper series right after ours, so that the pair stands together
    // in every group.
    let mut ordered: Vec<(Series, Vec<Option<f64>>)> = Vec::with_capacity(out.len());
    for (s, v) in out.iter().filter(|(s, _)| !s.paper) {
        ordered.push((s.clone(), v.clone()));
        let theirs = format!("{}{PAPER}", s.label);
        if let Some(p) = out.iter().find(|(p, _)| p.paper && p.label == theirs) {
            ordered.push(p.clone());
        }
    }
    for p in out.iter().filter(|(p, _)| p.paper) {
        if !ordered.iter().any(|(o, _)| o.label == p.0.label) {
            ordered.push(p.clone());
        }
    }
    ordered
}

macro_rules! draw_bars {
    ($root:expr, $chart:expr, $cats:expr, $bars:expr, $yr:expr, $base:expr) => {{
        let chart = $chart;
        let cats: &[String] = $cats;
        // Each category is a group of one segment per series and a gap.
        let group = $bars.len() as i32 + 1;
        let segments = cats.len() as i32 * group;
        let mut cc = ChartBuilder::on($root)
            .caption(&chart.title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d((0..segments).into_segmented(), $yr)
            .map_err(|e| plot_err(chart, e))?;
        cc.configure_mesh()
            .x_desc(chart.x_axis.label.as_str())
            .y_desc(chart.y_axis.label.as_str())
            .x_labels(segments as usize + 1)
            .y_labels(8)
            .x_label_formatter(&|v: &SegmentValue<i32>| match v {
                // The category's name under the middle of its bars.
                SegmentValue::CenterOf(k) if k % group == (group - 1) / 2 => {
                    cats.get((k / group) as usize).cloned().unwrap_or_default()
                }
                _ => String::new(),
            })
            .y_label_formatter(&|v: &f64| tick(*v))
            .disable_x_mesh()
            .draw()
            .map_err(|e| plot_err(chart, e))?;
        let lines: Vec<Series> = $bars.iter().map(|(s, _)| s.clone()).collect();
        for (j, (s, values)) in $bars.iter().enumerate() {
            let color = Palette99::pick(colour_of(&lines, j)).to_rgba();
            // Ours filled; the paper's outlined in the same colour.
            let style = if s.paper {
                color.stroke_width(2)
            } else {
                color.filled()
            };
            let rects = values.iter().enumerate().filter_map(|(i, v)| {
                v.map(|v| {
                    let k = i as i32 * group + j as i32;
                    Rectangle::new(
                        [
                            (SegmentValue::Exact(k), $base),
                            (SegmentValue::Exact(k + 1), v),
                        ],
                        style,
                    )
                })
            });
            cc.draw_series(rects).map_err(|e| plot_err(chart, e))?;
        }
    }};
}

/// Whether `chart` draws the paper's values: some row it selects carries
/// the paper's figure of a plotted y beside ours.
pub fn has_paper(rs: &ResultSet, chart: &Chart) -> bool {
    match categories(rs, chart) {
        Some(cats) => bar_series(rs, chart, &cats).iter().any(|(s, _)| s.paper),
        None => series(rs, chart).iter().any(|s| s.paper),
    }
}

/// Draws a categorical chart as grouped bars.
fn render_bars(rs: &ResultSet, chart: &Chart, cats: &[String]) -> Result<String, BenchError> {
    let bars = bar_series(rs, chart, cats);
    let (y0, y1) = range(
        bars.iter().flat_map(|(_, v)| v.iter().flatten().copied()),
        chart.y_axis.log,
    );
    let lines: Vec<Series> = bars.iter().map(|(s, _)| s.clone()).collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(
            &mut svg,
            (PLOT_WIDTH + LEGEND_WIDTH, height_for(lines.len())),
        )
        .into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(chart, e))?;
        let (left, side) = root.split_horizontally(PLOT_WIDTH);
        // The chart keeps its size when a long legend makes the image taller.
        let (plot, _) = left.split_vertically(HEIGHT);
        if chart.y_axis.log {
            draw_bars!(
                &plot,
                chart,
                cats,
                bars,
                (y0..y1).log_scale().with_key_points(log_ticks(y0, y1)),
                y0
            );
        } else {
            draw_bars!(&plot, chart, cats, bars, y0..y1, y0);
        }
        legend(&side, chart, &lines)?;
        root.present().map_err(|e| plot_err(chart, e))?;
    }
    Ok(svg)
}

/// Draws `chart` over the rows of `rs` as SVG text.
pub fn render(rs: &ResultSet, chart: &Chart) -> Result<String, BenchError> {
    if let Some(cats) = categories(rs, chart) {
        return render_bars(rs, chart, &cats);
    }
    let lines = series(rs, chart);
    let (x0, x1) = range(
        lines.iter().flat_map(|s| s.points.iter().map(|p| p.0)),
        chart.x_axis.log,
    );
    let (y0, y1) = range(
        lines.iter().flat_map(|s| s.points.iter().map(|p| p.1)),
        chart.y_axis.log,
    );
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(
            &mut svg,
            (PLOT_WIDTH + LEGEND_WIDTH, height_for(lines.len())),
        )
        .into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(chart, e))?;
        let (left, side) = root.split_horizontally(PLOT_WIDTH);
        // The chart keeps its size when a long legend makes the image taller.
        let (plot, _) = left.split_vertically(HEIGHT);
        match (chart.x_axis.log, chart.y_axis.log) {
            (true, true) => draw!(
                &plot,
                chart,
                lines,
                (x0..x1).log_scale().with_key_points(log_ticks(x0, x1)),
                (y0..y1).log_scale().with_key_points(log_ticks(y0, y1))
            ),
            (true, false) => draw!(
                &plot,
                chart,
                lines,
                (x0..x1).log_scale().with_key_points(log_ticks(x0, x1)),
                y0..y1
            ),
            (false, true) => draw!(
                &plot,
                chart,
                lines,
                x0..x1,
                (y0..y1).log_scale().with_key_points(log_ticks(y0, y1))
            ),
            (false, false) => draw!(&plot, chart, lines, x0..x1, y0..y1),
        }
        legend(&side, chart, &lines)?;
        root.present().map_err(|e| plot_err(chart, e))?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{Axis, Value};

    #[test]
    fn series_group_rows_and_render_as_svg() {
        let mut rows = Vec::new();
        for scheme in ["a", "b"] {
            for n in [10usize, 100, 1000] {
                let mut r = Row::new()
                    .param("scheme", scheme)
                    .param("n", n)
                    .param("op", "setup");
                r.set("ms", n as f64 * if scheme == "a" { 1.0 } else { 2.0 });
                rows.push(r);
            }
        }
        rows.push(
            Row::new()
                .param("scheme", "a")
                .param("n", 5usize)
                .param("op", "search"),
        );
        let chart = Chart {
            file: "setup".into(),
            title: "Setup time".into(),
            x: "n".into(),
            y: vec!["ms".into()],
            series: vec!["scheme".into()],
            filter: vec![("op".into(), Value::from("setup"))],
            x_axis: Axis {
                label: "pairs".into(),
                log: true,
            },
            y_axis: Axis {
                label: "time (ms)".into(),
                log: true,
            },
        };
        let rs = ResultSet {
            experiment: "t".into(),
            title: "t".into(),
            seed_paper: "none".into(),
            scale: "tiny".into(),
            seed: 1,
            notes: vec![],
            display: vec![],
            rows,
            charts: vec![chart.clone()],
        };
        let lines = series(&rs, &chart);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].label, "scheme=b");
        assert_eq!(
            lines[1].points,
            [(10.0, 20.0), (100.0, 200.0), (1000.0, 2000.0)]
        );
        let svg = render(&rs, &chart).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("Setup time") && svg.contains("scheme=b"));
        for (xl, yl) in [(false, false), (true, false), (false, true)] {
            let mut c = chart.clone();
            c.x_axis.log = xl;
            c.y_axis.log = yl;
            assert!(render(&rs, &c).unwrap().contains("</svg>"));
        }
        // The paper's values, where rows carry them, beside ours: a dashed
        // series of the same colour.
        let mut with_paper = rs.clone();
        for r in with_paper.rows.iter_mut() {
            if r.params.get("scheme") == Some(&Value::from("a"))
                && r.params.get("op") == Some(&Value::from("setup"))
            {
                let n = r.number("n").unwrap();
                r.paper("ms", n * 1.5, "ms", "a paper");
            }
        }
        let lines = series(&with_paper, &chart);
        let labels: Vec<(&str, bool)> = lines.iter().map(|s| (s.label.as_str(), s.paper)).collect();
        assert_eq!(
            labels,
            [
                ("scheme=a", false),
                ("scheme=a (paper)", true),
                ("scheme=b", false)
            ]
        );
        assert_eq!(
            lines[1].points,
            [(10.0, 15.0), (100.0, 150.0), (1000.0, 1500.0)]
        );
        assert_eq!(colour_of(&lines, 1), colour_of(&lines, 0));
        assert_ne!(colour_of(&lines, 2), colour_of(&lines, 0));
        assert!(render(&with_paper, &chart)
            .unwrap()
            .contains("scheme=a (paper)"));
        // A word on the x axis: grouped bars, one per series and category,
        // with the categories' names under them (a line joined them as if
        // they were points of a scale).
        let mut ops = Vec::new();
        for scheme in ["a", "b"] {
            for (i, op) in ["encrypt", "decrypt", "compare"].iter().enumerate() {
                let mut r = Row::new().param("scheme", scheme).param("op", *op);
                r.set("us", (i + 1) as f64 * if scheme == "a" { 1.0 } else { 3.0 });
                ops.push(r);
            }
        }
        let bar_chart = Chart {
            x: "op".into(),
            y: vec!["us".into()],
            filter: vec![],
            ..chart.clone()
        };
        let bars = ResultSet {
            rows: ops,
            ..rs.clone()
        };
        assert_eq!(
            categories(&bars, &bar_chart).unwrap(),
            ["encrypt", "decrypt", "compare"]
        );
        let svg = render(&bars, &bar_chart).unwrap();
        for op in ["encrypt", "decrypt", "compare", "scheme=a", "scheme=b"] {
            assert!(svg.contains(op), "{op} missing");
        }
        // The background and six bars.
        assert!(svg.matches("<rect").count() > 6, "{svg}");
        assert!(!svg.contains("(paper)"));
        // The paper's values on a bar chart: outlined bars beside ours,
        // in ours' colour, and a legend entry.
        let mut bars_paper = bars.clone();
        for r in bars_paper.rows.iter_mut() {
            if r.params.get("scheme") == Some(&Value::from("a")) {
                r.paper("us", 2.0, "µs", "a paper");
            }
        }
        let with = bar_series(
            &bars_paper,
            &bar_chart,
            &categories(&bars_paper, &bar_chart).unwrap(),
        );
        let labels: Vec<&str> = with.iter().map(|(s, _)| s.label.as_str()).collect();
        assert_eq!(labels, ["scheme=a", "scheme=a (paper)", "scheme=b"]);
        assert_eq!(with[1].1, [Some(2.0), Some(2.0), Some(2.0)]);
        let svg_paper = render(&bars_paper, &bar_chart).unwrap();
        assert!(svg_paper.contains("scheme=a (paper)"));
        assert_eq!(
            svg_paper.matches("<rect").count(),
            svg.matches("<rect").count() + 3
        );
        assert!(categories(&rs, &chart).is_none());
        // A log axis inside one decade still gets ticks (it got none).
        let narrow = log_ticks(103.0, 110.0);
        assert!(narrow.len() >= 3, "{narrow:?}");
        assert!(narrow.iter().all(|v| (103.0..=110.0).contains(v)));
        assert_eq!(
            log_ticks(1.0, 1000.0),
            [1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]
        );
        assert!(log_ticks(0.001, 0.03).len() >= 4);
        let mut tight = chart.clone();
        tight.x_axis.log = false;
        let svg = render(
            &ResultSet {
                rows: (0..3)
                    .map(|i| {
                        let mut r = Row::new()
                            .param("scheme", "a")
                            .param("n", i as usize)
                            .param("op", "setup");
                        r.set("ms", 103.0 + f64::from(i));
                        r
                    })
                    .collect(),
                ..rs.clone()
            },
            &tight,
        )
        .unwrap();
        let labels = svg.matches("<text").count();
        // Title, two axis names, one legend entry, and ticks on both axes.
        assert!(labels >= 4 + 3 + 3, "{labels} texts in\n{svg}");
        assert_eq!(tick(0.01), "0.01");
        assert_eq!(tick(0.0125), "0.0125");
        assert_eq!(tick(100.0), "100");
        assert_eq!(tick(2.5), "2.5");
        // A legend longer than the chart makes the image taller, so that
        // every entry is drawn inside it.
        let many = ResultSet {
            rows: (0..30usize)
                .map(|i| {
                    let mut r = Row::new()
                        .param("scheme", format!("s{i}"))
                        .param("n", 10usize)
                        .param("op", "setup");
                    r.set("ms", 1.0 + i as f64);
                    r
                })
                .collect(),
            ..rs.clone()
        };
        let svg = render(&many, &chart).unwrap();
        assert!(svg.contains("scheme=s29"));
        assert!(svg.starts_with(&format!(
            "<svg width=\"1020\" height=\"{}\"",
            height_for(30)
        )));
        assert!(height_for(30) > HEIGHT && height_for(3) == HEIGHT);
        // An empty chart still renders.
        let mut empty = chart;
        empty.filter = vec![("op".into(), Value::from("none"))];
        assert!(render(&rs, &empty).unwrap().contains("</svg>"));
    }
}
