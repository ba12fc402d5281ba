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
    vec![
        vs_known(
            "count",
            "Count attack: queries recovered versus documents known",
        ),
        vs_known("ikk", "IKK: queries recovered versus documents known"),
        Chart {
            file: "map".to_owned(),
            title: "Cost versus leakage: search time and what attacks recover, per scheme"
                .to_owned(),
            x: "search_ms".to_owned(),
            y: vec![
                "count_full".to_owned(),
                "ikk_half".to_owned(),
                "injection_after".to_owned(),
                "volume".to_owned(),
            ],
            series: vec!["scheme".to_owned()],
            filter: vec![("op".to_owned(), Value::from("map"))],
            x_axis: axis("ms per search (index only)", true),
            y_axis: axis("% of queries recovered", false),
        },
        Chart {
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
        },
        Chart {
            file: "range-map".to_owned(),
            title: "Cost versus leakage, range protocols: query time and records' values and \
                    order recovered from the access pattern"
                .to_owned(),
            x: "query_ms".to_owned(),
            y: vec!["recovery".to_owned(), "order".to_owned()],
            series: vec!["scheme".to_owned()],
            filter: vec![("op".to_owned(), Value::from("range"))],
            x_axis: axis("ms per range query", true),
            y_axis: axis("% recovered", false),
        },
    ]
}
