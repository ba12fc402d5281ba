//! `sesame import` and `sesame table delete` killed (SIGKILL) at random
//! points, repeatedly, through the binary: every command run afterwards
//! completes or repairs what was left, and the table converges to exactly
//! the file's records, each once, with every range and equality query
//! answering as the plaintext does. The imports go in small batches
//! (`SESAME_IMPORT_BATCH`), so that kills also fall between batches.
//! Bounded: a fixed number of rounds and kills, each
//! command waited for at most a minute.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn sesame(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sesame"));
    c.current_dir(dir)
        .env_remove("SESAME_HOME")
        .env("SESAME_PASSPHRASE", "kill passphrase")
        .env("SESAME_KDF", "fast")
        // Imports in batches of 250 records, so that kills fall between
        // batches too (with a range index built at the end of a first
        // import, marked dirty from its first batch).
        .env("SESAME_IMPORT_BATCH", "250")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn run(dir: &Path, args: &[&str]) -> Output {
    let out = sesame(dir).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "sesame {args:?}: {err}");
    out
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = run(dir, args);
    assert!(
        out.status.success(),
        "sesame {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

const SCHEMA: &str = r#"
key = "id"
[fields.id]
type = "integer"
[fields.carrier]
type = "string"
index = ["equality"]
[fields.v]
type = "integer"
index = ["range"]
range = "RANGE"
bits = 12
"#;

/// id -> (carrier, v)
type Rows = BTreeMap<i64, (String, i64)>;

fn write_csv(path: &Path, rows: &Rows) {
    let mut text = String::from("id,carrier,v\n");
    for (id, (c, v)) in rows {
        text.push_str(&format!("{id},{c},{v}\n"));
    }
    std::fs::write(path, text).unwrap();
}

/// The table's records, by key, from `sesame query ... --format csv`.
fn table_rows(dir: &Path, query: &str) -> Vec<(i64, String, i64)> {
    let out = ok(dir, &["--dir", "p", "query", "t", query, "--format", "csv"]);
    out.lines()
        .skip(1)
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            (
                cells[0].parse().unwrap(),
                cells[1].to_owned(),
                cells[2].parse().unwrap(),
            )
        })
        .collect()
}

fn check(dir: &Path, rows: &Rows, rng: &mut ChaCha8Rng, what: &str) {
    let all = table_rows(dir, "v between -2048 and 2047");
    let mut seen = BTreeMap::new();
    for (id, c, v) in &all {
        assert!(
            seen.insert(*id, (c.clone(), *v)).is_none(),
            "{what}: record {id} twice"
        );
    }
    assert_eq!(&seen, rows, "{what}: the table is not the file");
    for _ in 0..3 {
        let a: i64 = rng.gen_range(-60..60);
        let b = a + rng.gen_range(0..40);
        let mut got: Vec<i64> = table_rows(dir, &format!("v between {a} and {b}"))
            .iter()
            .map(|r| r.0)
            .collect();
        got.sort();
        let want: Vec<i64> = rows
            .iter()
            .filter(|(_, (_, v))| a <= *v && *v <= b)
            .map(|(k, _)| *k)
            .collect();
        assert_eq!(got, want, "{what}: v between {a} and {b}");
        let c = ["UA", "B6", "AA"][rng.gen_range(0..3)];
        let got = table_rows(dir, &format!("carrier = \"{c}\"")).len();
        let want = rows.values().filter(|(x, _)| x == c).count();
        assert_eq!(got, want, "{what}: carrier = {c}");
    }
}

/// Runs `args`, killing it after a random delay below `typical`, up to
/// three times in a row; returns how many were killed while running.
fn interrupt(dir: &Path, args: &[&str], typical: Duration, rng: &mut ChaCha8Rng) -> u64 {
    let mut kills = 0;
    for _ in 0..rng.gen_range(1..=3) {
        let delay = Duration::from_micros(rng.gen_range(0..typical.as_micros().max(1000) as u64));
        let mut child = sesame(dir).args(args).spawn().unwrap();
        std::thread::sleep(delay);
        if child.try_wait().unwrap().is_none() {
            kills += 1;
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    kills
}

fn harness(range: &str, seed: u64) {
    let site = tempfile::tempdir().unwrap();
    let dir = site.path();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    ok(dir, &["init", "--dir", "p", "--scheme", "fast"]);
    std::fs::write(dir.join("schema.toml"), SCHEMA.replace("RANGE", range)).unwrap();
    ok(
        dir,
        &[
            "--dir",
            "p",
            "table",
            "create",
            "t",
            "--schema",
            "schema.toml",
        ],
    );
    let csv = dir.join("rows.csv");
    let mut rows = Rows::new();
    let mut next = 0i64;
    let mut kills = 0;
    let mut typical = Duration::from_millis(300);
    for round in 0..10 {
        // The file changes: new records, changed records, records gone.
        for _ in 0..300 {
            rows.insert(
                next,
                (
                    ["UA", "B6", "AA"][rng.gen_range(0..3)].to_owned(),
                    rng.gen_range(-100..100),
                ),
            );
            next += 1;
        }
        for _ in 0..20 {
            let k = rng.gen_range(0..next);
            if let Some(r) = rows.get_mut(&k) {
                r.1 = rng.gen_range(-100..100);
            }
        }
        write_csv(&csv, &rows);
        kills += interrupt(
            dir,
            &["--dir", "p", "import", "t", "rows.csv"],
            typical,
            &mut rng,
        );
        // A query after the kills completes or repairs what they left.
        let _ = table_rows(dir, "v between -2048 and 2047");
        let start = Instant::now();
        ok(dir, &["--dir", "p", "import", "t", "rows.csv"]);
        typical = start.elapsed();
        let what = format!("{range}, round {round}");
        // Deletions, interrupted too.
        let cut: i64 = rng.gen_range(-100..-60);
        let q = format!("v < {cut}");
        kills += interrupt(
            dir,
            &["--dir", "p", "table", "delete", "t", &q],
            typical,
            &mut rng,
        );
        ok(dir, &["--dir", "p", "table", "delete", "t", &q]);
        rows.retain(|_, (_, v)| *v >= cut);
        // The file keeps the deleted records out from now on.
        write_csv(&csv, &rows);
        check(dir, &rows, &mut rng, &what);
    }
    eprintln!("table kills ({range}): {kills} commands killed while running");
    assert!(kills > 0, "no command was killed while running");
}

#[test]
fn imports_and_deletes_killed_at_random_converge() {
    harness("bplus-lewi-wu", 1);
    harness("pope", 2);
}

const KEYLESS: &str = r#"
[fields.carrier]
type = "string"
index = ["equality"]
[fields.v]
type = "integer"
index = ["range"]
bits = 12
"#;

/// A table without a key (records named after their values and repeat
/// index), its rows repeating each other, imported with the naming's
/// spill writing runs of 64 digests (`SESAME_IMPORT_SPILL_PAIRS`),
/// killed at random: the table converges to the file's rows, each as
/// many times as the file gives it, and no spill file is left in TMPDIR
/// (the spills are anonymous files, gone with the process).
#[test]
fn a_keyless_import_with_spilled_runs_killed_at_random_converges() {
    let site = tempfile::tempdir().unwrap();
    let dir = site.path();
    let tmp = dir.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(39);
    let cmd = |args: &[&str]| {
        let mut c = sesame(dir);
        c.env("SESAME_IMPORT_SPILL_PAIRS", "64")
            .env("TMPDIR", &tmp)
            .args(args);
        c
    };
    let ok = |args: &[&str]| {
        let out = cmd(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !err.contains("panicked"),
            "sesame {args:?}: {err}"
        );
        String::from_utf8(out.stdout).unwrap()
    };
    ok(&["init", "--dir", "p", "--scheme", "fast"]);
    std::fs::write(dir.join("schema.toml"), KEYLESS).unwrap();
    ok(&[
        "--dir",
        "p",
        "table",
        "create",
        "t",
        "--schema",
        "schema.toml",
    ]);
    let csv = dir.join("rows.csv");
    let mut rows: Vec<(String, i64)> = Vec::new();
    let mut kills = 0;
    let mut typical = Duration::from_millis(300);
    for round in 0..4 {
        // New rows, most of them repeating others, and rows gone.
        for _ in 0..400 {
            let c = ["UA", "B6", "AA"][rng.gen_range(0..3)].to_owned();
            rows.push((c, rng.gen_range(-20..20)));
        }
        for _ in 0..30 {
            let i = rng.gen_range(0..rows.len());
            rows.swap_remove(i);
        }
        let mut text = String::from("carrier,v\n");
        for (c, v) in &rows {
            text.push_str(&format!("{c},{v}\n"));
        }
        std::fs::write(&csv, text).unwrap();
        for _ in 0..rng.gen_range(1..=3) {
            let delay =
                Duration::from_micros(rng.gen_range(0..typical.as_micros().max(1000) as u64));
            let mut child = cmd(&["--dir", "p", "import", "t", "rows.csv"])
                .spawn()
                .unwrap();
            std::thread::sleep(delay);
            if child.try_wait().unwrap().is_none() {
                kills += 1;
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let start = Instant::now();
        ok(&["--dir", "p", "import", "t", "rows.csv"]);
        typical = start.elapsed();
        let mut want: BTreeMap<(String, i64), usize> = BTreeMap::new();
        for r in &rows {
            *want.entry(r.clone()).or_default() += 1;
        }
        let out = ok(&[
            "--dir",
            "p",
            "query",
            "t",
            "v between -2048 and 2047",
            "--format",
            "csv",
        ]);
        let mut got: BTreeMap<(String, i64), usize> = BTreeMap::new();
        for line in out.lines().skip(1) {
            let (c, v) = line.split_once(',').unwrap();
            *got.entry((c.to_owned(), v.parse().unwrap())).or_default() += 1;
        }
        assert_eq!(got, want, "round {round}: the table is not the file");
        let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
        assert!(
            left.is_empty(),
            "round {round}: files left in TMPDIR: {left:?}"
        );
    }
    eprintln!("keyless table kills: {kills} imports killed while running");
    assert!(kills > 0, "no import was killed while running");
}
