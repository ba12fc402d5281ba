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
    /// What the colour follows, the same on every chart of the site: the
    /// value of the chart's first series parameter (the scheme or
    /// protocol), or the figure's name when the chart has no series
    /// parameter.
    pub key: String,
    /// The small multiple it is drawn in: the label's other parts (the
    /// other series parameters, the figure when the chart plots several);
    /// empty when the chart is one panel.
    pub panel: String,
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
    let mut add = |id: Ident, point: (f64, f64), paper: bool| {
        let mut label = id.label;
        if paper {
            label.push_str(PAPER);
        }
        match out.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push(point),
            None => out.push(Series {
                label,
                points: vec![point],
                paper,
                key: id.key,
                panel: id.panel,
            }),
        }
    };
    for row in rs.rows.iter().filter(|r| chart.selects(r)) {
        let Some(x) = row.number(&chart.x) else {
            continue;
        };
        if chart.x_axis.log && x <= 0.0 {
            continue;
        }
        for y_name in &chart.y {
            for (y, paper) in y_values(row, chart, y_name) {
                add(ident(row, chart, y_name), (x, y), paper);
            }
        }
    }
    for s in &mut out {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// Ours and the paper's value of `y_name` in `row` (flag: the paper's),
/// those the chart's y axis can show.
fn y_values(row: &Row, chart: &Chart, y_name: &str) -> Vec<(f64, bool)> {
    let ours = row.figures.get(y_name).copied();
    let theirs = row
        .paper
        .iter()
        .find(|p| p.name == *y_name)
        .map(|p| p.value);
    [(ours, false), (theirs, true)]
        .into_iter()
        .filter_map(|(y, paper)| {
            y.filter(|y| y.is_finite() && !(chart.y_axis.log && *y <= 0.0))
                .map(|y| (y, paper))
        })
        .collect()
}

/// A series' label, colour key and panel (see [`Series`]).
struct Ident {
    label: String,
    key: String,
    panel: String,
}

fn ident(row: &Row, chart: &Chart, y_name: &str) -> Ident {
    let named: Vec<(String, String)> = chart
        .series
        .iter()
        .filter_map(|p| row.params.get(p).map(|v| (p.clone(), v.to_string())))
        .collect();
    let mut parts: Vec<String> = named.iter().map(|(p, v)| format!("{p}={v}")).collect();
    if chart.y.len() > 1 || parts.is_empty() {
        parts.push(y_name.to_owned());
    }
    let (key, panel) = match named.first() {
        Some((_, v)) => (v.clone(), parts[1..].join(" ")),
        None => (y_name.to_owned(), String::new()),
    };
    Ident {
        label: parts.join(" "),
        key,
        panel,
    }
}

/// Fifteen colours that colour-blind readers tell apart, none of them
/// yellow (unreadable on white): Okabe and Ito's palette without its
/// yellow, then Paul Tol's muted palette without its sand, and a grey.
pub const PALETTE: [(u8, u8, u8); 15] = [
    (0x00, 0x72, 0xB2), // blue
    (0xE6, 0x9F, 0x00), // orange
    (0x00, 0x9E, 0x73), // bluish green
    (0xD5, 0x5E, 0x00), // vermilion
    (0xCC, 0x79, 0xA7), // reddish purple
    (0x56, 0xB4, 0xE9), // sky blue
    (0x00, 0x00, 0x00), // black
    (0x33, 0x22, 0x88), // indigo
    (0x88, 0x22, 0x55), // wine
    (0x11, 0x77, 0x33), // green
    (0x99, 0x99, 0x33), // olive
    (0xAA, 0x44, 0x99), // purple
    (0x44, 0xAA, 0x99), // teal
    (0xCC, 0x66, 0x77), // rose
    (0x88, 0x88, 0x88), // grey
];

/// At most this many of our series in one panel; more are drawn as small
/// multiples.
pub const MAX_SERIES: usize = 8;

/// The schemes and protocols of the site in a fixed order: each keeps its
/// colour (its index modulo 15) on every chart. Other keys take one from
/// a hash of their name.
const KNOWN: [&str; 30] = [
    "pibas",
    "2lev",
    "fast",
    "uedsse",
    "simple",
    "aura",
    "sda",
    "sdd",
    "janus-pp",
    "suise",
    "suise2",
    "chlh15",
    "vasst16",
    "vasst16-2",
    "kpr12",
    "bclo",
    "clww",
    "lewi-wu",
    "cloz",
    "fh-ope",
    "cloz-insecure",
    "pope",
    "kerschbaum-tueno",
    "log-brc-pibas",
    "log-brc-2lev",
    "path-oram",
    "plain",
    "si-sse-rv",
    "memory",
    "redb",
];

/// The site-wide colour of `key`: an index into [`PALETTE`].
pub fn colour_index(key: &str) -> usize {
    match KNOWN.iter().position(|k| *k == key) {
        Some(i) => i % PALETTE.len(),
        None => {
            // FNV-1a: the same on every run and machine.
            let h = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
            (h % PALETTE.len() as u64) as usize
        }
    }
}

/// The colour of each series of one panel: its key's site-wide colour,
/// or, when another key of the panel already has it, the next colour no
/// series of the panel uses (no colour repeats within a panel while it has
/// at most 15 keys); a paper series takes the colour of ours of the same
/// label.
fn panel_colours(lines: &[Series]) -> Vec<usize> {
    let mut by_key: Vec<(&str, usize)> = Vec::new();
    let mut out = Vec::with_capacity(lines.len());
    for s in lines {
        let c = match by_key.iter().find(|(k, _)| *k == s.key) {
            Some((_, c)) => *c,
            None => {
                let mut c = colour_index(&s.key);
                for step in 0..PALETTE.len() {
                    let t = (c + step) % PALETTE.len();
                    if !by_key.iter().any(|(_, u)| *u == t) {
                        c = t;
                        break;
                    }
                }
                by_key.push((s.key.as_str(), c));
                c
            }
        };
        out.push(c);
    }
    out
}

fn rgb(i: usize) -> RGBColor {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    RGBColor(r, g, b)
}

/// `#rrggbb` of palette colour `i`, as the SVG writes it.
pub fn hex(i: usize) -> String {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    format!("#{r:02X}{g:02X}{b:02X}")
}

/// Splits a chart's series into panels: one per distinct
/// [`Series::panel`], in order of first appearance, each cut into parts of
/// at most [`MAX_SERIES`] of our series (a paper series goes with ours).
/// Returns each panel's name and the indices of its series.
fn panels(lines: &[Series]) -> Vec<(String, Vec<usize>)> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, s) in lines.iter().enumerate() {
        match groups.iter_mut().find(|(p, _)| *p == s.panel) {
            Some((_, v)) => v.push(i),
            None => groups.push((s.panel.clone(), vec![i])),
        }
    }
    let mut out = Vec::new();
    for (name, members) in groups {
        let ours: Vec<usize> = members
            .iter()
            .copied()
            .filter(|&i| !lines[i].paper)
            .collect();
        if ours.len() <= MAX_SERIES {
            out.push((name, members));
            continue;
        }
        let parts = ours.len().div_ceil(MAX_SERIES);
        for (k, chunk) in ours.chunks(MAX_SERIES).enumerate() {
            let mut part: Vec<usize> = Vec::new();
            for &i in chunk {
                part.push(i);
                let theirs = format!("{}{PAPER}", lines[i].label);
                part.extend(
                    members
                        .iter()
                        .copied()
                        .filter(|&j| lines[j].label == theirs),
                );
            }
            let label = if name.is_empty() {
                format!("{} of {parts}", k + 1)
            } else {
                format!("{name}, {} of {parts}", k + 1)
            };
            out.push((label, part));
        }
        // Paper series whose line of ours is absent: the last part.
        let placed: Vec<usize> = out.iter().flat_map(|(_, v)| v.clone()).collect();
        let rest: Vec<usize> = members
            .iter()
            .copied()
            .filter(|i| !placed.contains(i))
            .collect();
        if let Some(last) = out.last_mut() {
            last.1.extend(rest);
        }
    }
    if out.is_empty() {
        out.push((String::new(), Vec::new()));
    }
    out
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
    ($root:expr, $chart:expr, $title:expr, $lines:expr, $colours:expr, $xr:expr, $yr:expr) => {{
        let chart = $chart;
        let lines: &[Series] = $lines;
        let colours: &[usize] = $colours;
        let mut cc = ChartBuilder::on($root)
            .caption($title, ("sans-serif", 20))
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
        // A map (one point per series, e.g. cost versus leakage): each
        // point carries its scheme's name, which a legend of lookalike
        // markers could not tell apart.
        let map = lines.len() > 1 && lines.iter().all(|s| s.paper || s.points.len() == 1);
        for (i, s) in lines.iter().enumerate() {
            let color = rgb(colours[i]);
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
                if map {
                    let style = ("sans-serif", 11).into_font().color(&color);
                    cc.draw_series(s.points.iter().map(|&p| {
                        EmptyElement::at(p) + Text::new(s.key.clone(), (5, -12), style.clone())
                    }))
                    .map_err(|e| plot_err(chart, e))?;
                }
            }
        }
    }};
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
    colours: &[usize],
) -> Result<(), BenchError> {
    let style = ("sans-serif", 13).into_font().color(&BLACK);
    for (i, s) in lines.iter().enumerate() {
        let color = rgb(colours[i]);
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
            for (y, paper) in y_values(row, chart, y_name) {
                let id = ident(row, chart, y_name);
                let mut label = id.label;
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
                                key: id.key,
                                panel: id.panel,
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
    ($root:expr, $chart:expr, $title:expr, $cats:expr, $bars:expr, $colours:expr, $yr:expr, $base:expr) => {{
        let chart = $chart;
        let colours: &[usize] = $colours;
        let cats: &[String] = $cats;
        // Each category is a group of one segment per series and a gap.
        let group = $bars.len() as i32 + 1;
        let segments = cats.len() as i32 * group;
        let mut cc = ChartBuilder::on($root)
            .caption($title, ("sans-serif", 20))
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
        for (j, (s, values)) in $bars.iter().enumerate() {
            let color = rgb(colours[j]);
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

/// The caption of a panel: the chart's title, and the panel's name when
/// the chart has several.
fn caption(chart: &Chart, panel: &str) -> String {
    if panel.is_empty() {
        chart.title.clone()
    } else {
        format!("{} ({panel})", chart.title)
    }
}

/// One panel as an SVG document, tagged for the site's check: the colours
/// of our series in order (`data-colours`), the axes' declared scales
/// (`data-x-scale`, `data-y-scale`: `log`, `linear` or, for the x axis of
/// bars, `categories`) and, on a bar chart, the categories
/// (`data-categories`, separated by `|`).
fn tag(
    svg: String,
    chart: &Chart,
    colours: &[usize],
    lines: &[Series],
    cats: Option<&[String]>,
) -> String {
    let ours: Vec<String> = colours
        .iter()
        .zip(lines)
        .filter(|(_, s)| !s.paper)
        .map(|(&c, _)| hex(c))
        .collect();
    let scale = |log: bool| if log { "log" } else { "linear" };
    // The axes as declared, which the page's self-check compares with
    // the tick labels as drawn.
    let mut attrs = format!(
        " class=\"panel\" data-colours=\"{}\" data-x-scale=\"{}\" data-y-scale=\"{}\"",
        ours.join(" "),
        if cats.is_some() {
            "categories"
        } else {
            scale(chart.x_axis.log)
        },
        scale(chart.y_axis.log)
    );
    if let Some(cats) = cats {
        let names: Vec<String> = cats.iter().map(|c| crate::report::escape(c)).collect();
        attrs.push_str(&format!(" data-categories=\"{}\"", names.join("|")));
    }
    svg.replacen("<svg ", &format!("<svg{attrs} "), 1)
}

/// Panels stacked into one SVG document (the `*.svg` file); one panel is
/// returned as it is.
fn stack(panels: Vec<(u32, String)>) -> String {
    if panels.len() == 1 {
        return panels
            .into_iter()
            .next()
            .map(|(_, s)| s)
            .unwrap_or_default();
    }
    let width = PLOT_WIDTH + LEGEND_WIDTH;
    let height: u32 = panels.iter().map(|(h, _)| h).sum();
    let mut out = format!(
        "<svg width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" \
         xmlns=\"http://www.w3.org/2000/svg\">\n"
    );
    let mut y = 0;
    for (h, svg) in panels {
        // A nested document, moved down to its place.
        let svg = svg.trim_start_matches(|c| c != '<').replacen(
            "<svg ",
            &format!("<svg x=\"0\" y=\"{y}\" "),
            1,
        );
        out.push_str(svg.trim_start_matches("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"));
        out.push('\n');
        y += h;
    }
    out.push_str("</svg>\n");
    out
}

/// One panel of `chart` as SVG text: the plot area, drawn by `draw`, with
/// the legend of `lines` beside it; the plot keeps its size when a long
/// legend makes the image taller.
fn panel_svg(
    chart: &Chart,
    lines: &[Series],
    colours: &[usize],
    height: u32,
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> Result<(), BenchError>,
) -> Result<String, BenchError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH + LEGEND_WIDTH, height))
            .into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(chart, e))?;
        let (left, side) = root.split_horizontally(PLOT_WIDTH);
        let (plot, _) = left.split_vertically(HEIGHT);
        draw(&plot)?;
        legend(&side, chart, lines, colours)?;
        root.present().map_err(|e| plot_err(chart, e))?;
    }
    Ok(svg)
}

/// Draws a categorical chart as grouped bars, one panel per
/// [`Series::panel`] (see [`panels`]).
fn render_bars(rs: &ResultSet, chart: &Chart, cats: &[String]) -> Result<String, BenchError> {
    let all = bar_series(rs, chart, cats);
    let lines: Vec<Series> = all.iter().map(|(s, _)| s.clone()).collect();
    let mut out = Vec::new();
    for (name, members) in panels(&lines) {
        let bars: Vec<(Series, Vec<Option<f64>>)> =
            members.iter().map(|&i| all[i].clone()).collect();
        let lines: Vec<Series> = bars.iter().map(|(s, _)| s.clone()).collect();
        let colours = panel_colours(&lines);
        let (y0, y1) = range(
            bars.iter().flat_map(|(_, v)| v.iter().flatten().copied()),
            chart.y_axis.log,
        );
        let height = height_for(lines.len());
        let title = caption(chart, &name);
        let svg = panel_svg(chart, &lines, &colours, height, |plot| {
            if chart.y_axis.log {
                draw_bars!(
                    plot,
                    chart,
                    &title,
                    cats,
                    bars,
                    &colours,
                    (y0..y1).log_scale().with_key_points(log_ticks(y0, y1)),
                    y0
                );
            } else {
                draw_bars!(plot, chart, &title, cats, bars, &colours, y0..y1, y0);
            }
            Ok(())
        })?;
        out.push((height, tag(svg, chart, &colours, &lines, Some(cats))));
    }
    Ok(stack(out))
}

/// Draws `chart` over the rows of `rs` as SVG text: grouped bars when its
/// x parameter is a word, lines otherwise; in small multiples when its
/// series differ in more than the scheme or are more than
/// [`MAX_SERIES`] (see [`panels`]), each scheme in its site-wide colour.
pub fn render(rs: &ResultSet, chart: &Chart) -> Result<String, BenchError> {
    if let Some(cats) = categories(rs, chart) {
        return render_bars(rs, chart, &cats);
    }
    let all = series(rs, chart);
    let mut out = Vec::new();
    for (name, members) in panels(&all) {
        let lines: Vec<Series> = members.iter().map(|&i| all[i].clone()).collect();
        let colours = panel_colours(&lines);
        let (x0, x1) = range(
            lines.iter().flat_map(|s| s.points.iter().map(|p| p.0)),
            chart.x_axis.log,
        );
        let (y0, y1) = range(
            lines.iter().flat_map(|s| s.points.iter().map(|p| p.1)),
            chart.y_axis.log,
        );
        let height = height_for(lines.len());
        let title = caption(chart, &name);
        // Logarithmic axes, made only where the chart asks for them.
        let log_x = || (x0..x1).log_scale().with_key_points(log_ticks(x0, x1));
        let log_y = || (y0..y1).log_scale().with_key_points(log_ticks(y0, y1));
        let svg = panel_svg(chart, &lines, &colours, height, |plot| {
            let (t, l, c) = (&title, &lines, &colours);
            match (chart.x_axis.log, chart.y_axis.log) {
                (true, true) => draw!(plot, chart, t, l, c, log_x(), log_y()),
                (true, false) => draw!(plot, chart, t, l, c, log_x(), y0..y1),
                (false, true) => draw!(plot, chart, t, l, c, x0..x1, log_y()),
                (false, false) => draw!(plot, chart, t, l, c, x0..x1, y0..y1),
            }
            Ok(())
        })?;
        out.push((height, tag(svg, chart, &colours, &lines, None)));
    }
    Ok(stack(out))
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
        let colours = panel_colours(&lines);
        assert_eq!(colours[1], colours[0]);
        assert_ne!(colours[2], colours[0]);
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
        // More than eight schemes: small multiples of at most eight, each
        // with its own legend; one point per scheme (a map) labels every
        // point with its scheme; no colour repeats within a panel.
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
        // The legend's "scheme=s29" and the point's "s29".
        assert!(svg.contains("scheme=s29") && svg.matches("s29").count() >= 2);
        assert!(svg.starts_with(&format!("<svg width=\"1020\" height=\"{}\"", 4 * HEIGHT)));
        assert_eq!(svg.matches("class=\"panel\"").count(), 4);
        assert!(svg.contains("Setup time (4 of 4)"));
        for panel in svg.split("data-colours=\"").skip(1) {
            let colours: Vec<&str> = panel[..panel.find('"').unwrap()].split(' ').collect();
            assert!(colours.len() <= MAX_SERIES);
            let mut unique = colours.clone();
            unique.sort_unstable();
            unique.dedup();
            assert_eq!(unique.len(), colours.len(), "{colours:?}");
        }
        assert!(height_for(30) > HEIGHT && height_for(3) == HEIGHT);
        // A scheme has the same colour on every chart, whatever else the
        // chart shows; series that differ in more than the scheme (here
        // the store) go to one panel per store.
        assert_eq!(colour_index("pibas"), colour_index("pibas"));
        assert_ne!(colour_index("pibas"), colour_index("2lev"));
        let stores = ResultSet {
            rows: ["memory", "redb"]
                .iter()
                .flat_map(|store| {
                    ["pibas", "2lev"].iter().map(move |scheme| {
                        let mut r = Row::new()
                            .param("scheme", *scheme)
                            .param("store", *store)
                            .param("n", 10usize)
                            .param("op", "setup");
                        r.set("ms", 2.0);
                        r
                    })
                })
                .collect(),
            ..rs.clone()
        };
        let by_store = Chart {
            series: vec!["scheme".into(), "store".into()],
            ..chart.clone()
        };
        let svg = render(&stores, &by_store).unwrap();
        assert!(
            svg.contains("Setup time (store=memory)") && svg.contains("Setup time (store=redb)")
        );
        let expect = format!(
            "data-colours=\"{} {}\"",
            hex(colour_index("pibas")),
            hex(colour_index("2lev"))
        );
        assert_eq!(svg.matches(&expect).count(), 2, "{svg}");
        // No yellow: every colour is dark enough to read on white.
        for (r, g, b) in PALETTE {
            assert!(!(r > 0xC0 && g > 0xC0 && b < 0x80), "{r:x}{g:x}{b:x}");
        }
        // An empty chart still renders.
        let mut empty = chart;
        empty.filter = vec![("op".into(), Value::from("none"))];
        assert!(render(&rs, &empty).unwrap().contains("</svg>"));
    }
}
