//! The check of a crate's seeded vectors (`tests/vectors/*_seeded.json`):
//! shared by the `seeded` tests of `sesame-crypto` and `sesame-ore`, which
//! include this file (`#[path]`), so that a refactor of either cannot
//! silently change an output.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

/// Writes `now` to `path` as the stored vectors.
pub(crate) fn write(path: &Path, now: &BTreeMap<&'static str, Value>) {
    let text = serde_json::to_string_pretty(now).unwrap();
    std::fs::write(path, text + "\n").unwrap();
}

/// Every vector stored at `path` equals the one computed `now`, and none
/// is missing or extra; `regenerate` is the command that writes them
/// anew (after a deliberate change).
pub(crate) fn check(path: &Path, now: &BTreeMap<&'static str, Value>, regenerate: &str) {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}; regenerate with `{regenerate}`", path.display()));
    let stored: BTreeMap<String, Value> = serde_json::from_str(&text).unwrap();
    for (name, value) in now {
        assert_eq!(
            stored.get(*name),
            Some(value),
            "seeded vector `{name}` changed; if deliberate, regenerate with `{regenerate}`"
        );
    }
    assert_eq!(stored.len(), now.len(), "stored vectors have extra entries");
}
