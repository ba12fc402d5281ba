//! The attack code cannot reach keys, plaintexts or client halves: its
//! manifest names no dependency but the standard library's, so no Sesame
//! crate (schemes, keys, clients) is linked into it; only its tests use
//! them, to produce views.

#![allow(clippy::unwrap_used)]

#[test]
fn the_library_depends_on_no_sesame_crate() {
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    let mut section = "";
    let mut deps = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
            continue;
        }
        if section == "[dependencies]" && !line.is_empty() && !line.starts_with('#') {
            deps.push(line.to_owned());
        }
    }
    assert!(deps.is_empty(), "the attack library depends on {deps:?}");
    assert!(
        manifest.contains("[dev-dependencies]\nsesame-core"),
        "the check reads the manifest"
    );
}
