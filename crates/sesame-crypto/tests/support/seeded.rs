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

/// The two tests of a crate's seeded vectors, over the crate's own
/// `vectors()` and `vector_path()`: `write_seeded_vectors` (ignored: run
/// it by name after a deliberate change, and say in the docs why the
/// outputs changed) and `seeded_vectors_are_stable`; `$package` names the
/// package in the command that regenerates them.
macro_rules! seeded_tests {
    ($package:literal) => {
        #[test]
        #[ignore = "writes the vector file; run by name after a deliberate change"]
        fn write_seeded_vectors() {
            seeded::write(&vector_path(), &vectors());
        }

        #[test]
        fn seeded_vectors_are_stable() {
            seeded::check(
                &vector_path(),
                &vectors(),
                concat!(
                    "cargo test -p ",
                    $package,
                    " --test seeded -- --ignored write_seeded_vectors"
                ),
            );
        }
    };
}
pub(crate) use seeded_tests;
