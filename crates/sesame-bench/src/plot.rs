//! SVG line charts of result sets, drawn with `plotters`' SVG backend
//! (pure Rust: text is written as SVG `<text>` and laid out with estimated
//! glyph sizes, so no font files or system libraries are needed).

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
}

/// The lines of `chart` over the rows of `rs`: one per distinct value of
/// the series parameters and per y figure. Rows without the x or y value
/// are skipped, as are values that are not positive on a log axis.
pub fn series(rs: &ResultSet, chart: &Chart) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for row in rs.rows.iter().filter(|r| chart.selects(r)) {
        let Some(x) = row.number(&chart.x) else {
            continue;
        };
        for y_name in &chart.y {
            let Some(y) = row.figures.get(y_name).copied() else {
                continue;
            };
            if (chart.x_axis.log && x <= 0.0) || (chart.y_axis.log && y <= 0.0) {
                continue;
            }
            let label = label(row, chart, y_name);
            match out.iter_mut().find(|s| s.label == label) {
                Some(s) => s.points.push((x, y)),
                None => out.push(Series {
                    label,
                    points: vec![(x, y)],
                }),
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
            let color = Palette99::pick(i).to_rgba();
            cc.draw_series(LineSeries::new(
                s.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| plot_err(chart, e))?;
            cc.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| plot_err(chart, e))?;
        }
    }};
}

/// Width of the chart, and of the legend beside it, in pixels.
const PLOT_WIDTH: u32 = 720;
const LEGEND_WIDTH: u32 = 300;
const HEIGHT: u32 = 540;

/// Draws the legend in its own area, right of the chart, so that it never
/// hides a line.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &Chart,
    lines: &[Series],
) -> Result<(), BenchError> {
    let style = ("sans-serif", 13).into_font().color(&BLACK);
    for (i, s) in lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let y = 50 + 20 * i as i32;
        area.draw(&PathElement::new(
            vec![(5, y), (30, y)],
            color.stroke_width(2),
        ))
        .map_err(|e| plot_err(chart, e))?;
        area.draw(&Circle::new((17, y), 3, color.filled()))
            .map_err(|e| plot_err(chart, e))?;
        area.draw(&Text::new(s.label.clone(), (38, y - 7), style.clone()))
            .map_err(|e| plot_err(chart, e))?;
    }
    Ok(())
}

/// Draws `chart` over the rows of `rs` as SVG text.
pub fn render(rs: &ResultSet, chart: &Chart) -> Result<String, BenchError> {
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
        let root = SVGBackend::with_string(&mut svg, (PLOT_WIDTH + LEGEND_WIDTH, HEIGHT))
            .into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_err(chart, e))?;
        let (plot, side) = root.split_horizontally(PLOT_WIDTH);
        match (chart.x_axis.log, chart.y_axis.log) {
            (true, true) => draw!(
                &plot,
                chart,
                lines,
                (x0..x1).log_scale(),
                (y0..y1).log_scale()
            ),
            (true, false) => draw!(&plot, chart, lines, (x0..x1).log_scale(), y0..y1),
            (false, true) => draw!(&plot, chart, lines, x0..x1, (y0..y1).log_scale()),
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
        assert_eq!(tick(0.01), "0.01");
        assert_eq!(tick(0.0125), "0.0125");
        assert_eq!(tick(100.0), "100");
        assert_eq!(tick(2.5), "2.5");
        // An empty chart still renders.
        let mut empty = chart;
        empty.filter = vec![("op".into(), Value::from("none"))];
        assert!(render(&rs, &empty).unwrap().contains("</svg>"));
    }
}
