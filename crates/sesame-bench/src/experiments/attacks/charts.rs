//! The charts the `attacks` experiment draws.

use crate::result::{Axis, Chart, Value};

pub(super) fn charts() -> Vec<Chart> {
    let axis = |label: &str, log: bool| Axis {
        label: label.to_owned(),
        log,
    };
    // Queries recovered by the attack `op` as more documents are known.
    let vs_known = |op: &str, title: &str| Chart {
        file: format!("{op}-vs-known"),
        title: title.to_owned(),
        x: "known".to_owned(),
        y: vec!["recovery".to_owned()],
        series: vec!["scheme".to_owned()],
        filter: vec![("op".to_owned(), Value::from(op))],
        x_axis: axis("fraction of documents known", false),
        y_axis: axis("% of queries recovered", false),
    };
    let mut charts = vec![
        vs_known(
            "count",
            "Count attack: queries recovered versus documents known",
        ),
        vs_known("ikk", "IKK: queries recovered versus documents known"),
    ];
    // The cost-versus-leakage map, one chart per attack (one point per
    // scheme, labelled with its name), so that no point hides another's
    // legend entry.
    for (figure, attack) in [
        ("count_full", "count attack, every document known"),
        ("ikk_half", "IKK, half the documents known"),
        ("injection_after", "file injection, after the setup"),
        ("volume", "volume attack"),
    ] {
        charts.push(Chart {
            file: format!("map-{}", figure.replace('_', "-")),
            title: format!("Cost versus leakage: search time and {attack}, per scheme"),
            x: "search_ms".to_owned(),
            y: vec![figure.to_owned()],
            series: vec!["scheme".to_owned()],
            filter: vec![("op".to_owned(), Value::from("map"))],
            x_axis: axis("ms per search (index only)", true),
            y_axis: axis("% of queries recovered", false),
        });
    }
    charts.extend([Chart {
        file: "ordered-map".to_owned(),
        title: "Cost versus leakage, order-revealing schemes: comparison time and rows \
                    recovered (cumulative attack)"
            .to_owned(),
        x: "compare_us".to_owned(),
        y: vec!["recovery".to_owned()],
        series: vec!["scheme".to_owned(), "column".to_owned()],
        filter: vec![("op".to_owned(), Value::from("cumulative"))],
        x_axis: axis("µs per comparison", true),
        y_axis: axis("% of rows recovered", false),
    }]);
    // The range protocols: values, then order, recovered from the access
    // pattern, one chart each.
    for (figure, file, what) in [
        ("recovery", "range-map", "values"),
        ("order", "range-order-map", "order"),
    ] {
        charts.push(Chart {
            file: file.to_owned(),
            title: format!(
                "Cost versus leakage, range protocols: query time and records' {what} \
                 recovered from the access pattern"
            ),
            x: "query_ms".to_owned(),
            y: vec![figure.to_owned()],
            series: vec!["scheme".to_owned()],
            filter: vec![("op".to_owned(), Value::from("range"))],
            x_axis: axis("ms per range query", true),
            y_axis: axis(&format!("% of {what} recovered"), false),
        });
    }
    charts
}
