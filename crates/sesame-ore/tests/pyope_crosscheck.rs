//! Cross-check of BCLO against `pyope` (PyPI, MIT), a pure-Python BCLO
//! written by someone else.
//!
//! The test installs `pyope==0.2.2` (and its dependencies) with `pip` into
//! a temporary folder, encrypts and decrypts a few thousand plaintexts in
//! Python, and requires `sesame_ore::bclo::pyope::PyopeOpe` to produce the
//! same ciphertexts, byte for byte, for the same key, domain and range;
//! it also checks order and decryption on both sides. It is skipped, with a
//! message, only when `pip` cannot reach the package index. Set
//! `SESAME_PYTHON` to choose the interpreter (default `python3`).

// Test code: a panic is a failed test (clippy.toml allows this only
// inside #[test] functions, not in their helpers).
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::process::{Command, Stdio};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde_json::{json, Value};
use sesame_ore::bclo::pyope::{PyopeOpe, ValueRange};

const PYOPE: &str = "pyope==0.2.2";

const SCRIPT: &str = r#"
import json, sys
from pyope.ope import OPE, ValueRange
cases = json.load(sys.stdin)
out = []
for case in cases:
    ope = OPE(bytes.fromhex(case["key"]), ValueRange(*case["in"]), ValueRange(*case["out"]))
    cts = [ope.encrypt(p) for p in case["plaintexts"]]
    dec = [ope.decrypt(c) for c in cts]
    out.append({"ciphertexts": cts, "decrypted": dec})
json.dump(out, sys.stdout)
"#;

fn python() -> String {
    std::env::var("SESAME_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// Installs pyope into `dir`; `Err(message)` when the index is unreachable.
fn install(dir: &std::path::Path) -> Result<(), String> {
    let out = Command::new(python())
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(["--no-input", "--target"])
        .arg(dir)
        .arg(PYOPE)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python()))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let offline = [
        "Failed to establish a new connection",
        "Temporary failure in name resolution",
        "Network is unreachable",
        "No matching distribution found",
        "Could not fetch URL",
        "ConnectionError",
        "ProxyError",
        "timed out",
    ];
    if offline.iter().any(|s| err.contains(s)) {
        Err(err)
    } else {
        panic!("pip install {PYOPE} failed (not a network error):\n{err}");
    }
}

/// Key, plaintext range, ciphertext range, plaintexts.
type Case = (Vec<u8>, (i128, i128), (i128, i128), Vec<i128>);

fn cases() -> Vec<Case> {
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let mut random = |lo: i128, hi: i128, n: usize| -> Vec<i128> {
        let mut v: Vec<i128> = (0..n)
            .map(|_| rng.gen_range(lo as i64..=hi as i64).into())
            .collect();
        v.extend([lo, lo + 1, hi - 1, hi, (lo + hi) / 2, (lo + hi) / 2 + 1]);
        v
    };
    let mut keyrng = ChaCha20Rng::seed_from_u64(5);
    let mut key = |n: usize| -> Vec<u8> { (0..n).map(|_| keyrng.gen()).collect() };
    vec![
        // pyope's defaults: 15-bit plaintexts, 31-bit ciphertexts.
        (
            b"key".to_vec(),
            (0, (1 << 15) - 1),
            (0, (1 << 31) - 1),
            random(0, (1 << 15) - 1, 600),
        ),
        // Seed 004's setting: 32-bit plaintexts, 48-bit ciphertexts.
        (
            key(32),
            (0, (1 << 32) - 1),
            (0, (1 << 48) - 1),
            random(0, (1 << 32) - 1, 600),
        ),
        // A small domain: every plaintext, HYP for the small draws.
        (key(16), (0, 255), (0, 1023), (0..256).collect()),
        // Negative values and an odd range.
        (
            key(7),
            (-1000, 1000),
            (-50_000, 50_001),
            random(-1000, 1000, 300),
        ),
        // Equal sizes (identity) on the last levels.
        (key(64), (0, 99), (0, 100), (0..100).collect()),
    ]
}

#[test]
fn byte_identical_to_pyope() {
    let dir = tempfile::tempdir().unwrap();
    if let Err(msg) = install(dir.path()) {
        eprintln!("SKIPPED: pip cannot reach the package index to install {PYOPE}:\n{msg}");
        return;
    }
    let cases = cases();
    let input: Vec<Value> = cases
        .iter()
        .map(|(k, i, o, p)| {
            json!({
                "key": hex::encode(k),
                "in": [i.0 as i64, i.1 as i64],
                "out": [o.0 as i64, o.1 as i64],
                "plaintexts": p.iter().map(|&x| x as i64).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut child = Command::new(python())
        .args(["-c", SCRIPT])
        .env("PYTHONPATH", dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(&input).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "pyope failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut compared = 0;
    for ((key, inr, outr, plaintexts), res) in cases.iter().zip(&results) {
        let ope = PyopeOpe::new(
            key,
            ValueRange::new(inr.0, inr.1).unwrap(),
            ValueRange::new(outr.0, outr.1).unwrap(),
        )
        .unwrap();
        let theirs: Vec<i128> = res["ciphertexts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| i128::from(v.as_i64().unwrap()))
            .collect();
        let decrypted: Vec<i128> = res["decrypted"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| i128::from(v.as_i64().unwrap()))
            .collect();
        assert_eq!(&decrypted, plaintexts, "pyope's own decryption");
        for ((&p, &c), _) in plaintexts.iter().zip(&theirs).zip(0..) {
            let ours = ope.encrypt(p).unwrap();
            assert_eq!(ours, c, "key {}, plaintext {p}", hex::encode(key));
            assert_eq!(ope.decrypt(c).unwrap(), p);
            compared += 1;
        }
        // Order: sorting plaintexts sorts ciphertexts.
        let mut pairs: Vec<(i128, i128)> = plaintexts.iter().copied().zip(theirs).collect();
        pairs.sort();
        for w in pairs.windows(2) {
            assert!(w[0].0 == w[1].0 && w[0].1 == w[1].1 || w[0].1 < w[1].1);
        }
    }
    assert!(compared > 1800);
}
