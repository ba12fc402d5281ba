//! KPR12 series for the `verify` experiment (being written).
