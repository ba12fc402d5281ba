//! Seeded known-answer vectors for every scheme.
//!
//! Outputs from fixed keys and seeded randomness are stored in
//! `tests/vectors/sesame_ore_seeded.json`, so that a refactor cannot
//! silently change a ciphertext, a wire encoding, the hypergeometric
//! sampler's coin use or FH-OPE's tree. Long ciphertexts are stored as the
//! SHA-256 of their wire encoding. To accept a deliberate change:
//!
//! ```text
//! cargo test -p sesame-ore --test seeded -- --ignored write_seeded_vectors
//! ```
//!
//! (a separate, ignored test: the checking test never writes the file).

// Test code: a panic is a failed test (clippy.toml allows this only
// inside #[test] functions, not in their helpers).
#![allow(clippy::unwrap_used)]

#[path = "../../sesame-crypto/tests/support/seeded.rs"]
mod seeded;

use std::collections::BTreeMap;
use std::path::PathBuf;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::Serialize;
use serde_json::{json, Value};
use sesame_core::wire;
use sesame_crypto::hash::sha256;
use sesame_crypto::Key;
use sesame_ore::bclo::pyope::{PyopeOpe, ValueRange};
use sesame_ore::bclo::{Bclo, BcloParams};
use sesame_ore::cloz::ClozPairing;
use sesame_ore::clww::Clww;
use sesame_ore::fh_ope::{FhOpe, FhOpeParams};
use sesame_ore::hg;
use sesame_ore::insecure::ClozInsecure;
use sesame_ore::lewi_wu::{LewiWu, LewiWuParams};
use sesame_ore::OreScheme;

fn key(tag: u8) -> Key<32> {
    Key::from_bytes(core::array::from_fn(|i| tag.wrapping_add(i as u8)))
}

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

fn digest<T: Serialize>(value: &T) -> String {
    hex::encode(sha256(&wire::encode(value).unwrap()))
}

fn vectors() -> BTreeMap<&'static str, Value> {
    let mut v = BTreeMap::new();
    let plaintexts32 = [0u64, 1, 12345, 1 << 31, u64::from(u32::MAX)];

    let mut coins = hg::SplitMix64(42);
    let urns: [(u128, u128, u128); 5] = [
        (5, 45, 20),
        (30, 30, 30),
        (1 << 32, (1 << 48) - (1 << 32), 1 << 47),
        (1 << 64, (1 << 96) - (1 << 64), 1 << 95),
        (7, 1 << 100, 1 << 99),
    ];
    let samples: Vec<String> = urns
        .iter()
        .map(|&(g, b, k)| hg::sample(g, b, k, &mut coins).unwrap().to_string())
        .collect();
    v.insert("hg_samples", json!(samples));

    let bclo = Bclo::new(key(0x10), BcloParams::default()).unwrap();
    let cts: Vec<String> = plaintexts32
        .iter()
        .map(|&x| bclo.encrypt_value_u64(x).unwrap().0.to_string())
        .collect();
    v.insert("bclo_u32_r48", json!(cts));
    let bclo64 = Bclo::new(
        key(0x11),
        BcloParams {
            bits: 64,
            range_bits: 96,
        },
    )
    .unwrap();
    let cts: Vec<String> = [0, 1, u64::MAX / 3, u64::MAX]
        .iter()
        .map(|&x| bclo64.encrypt_value_u64(x).unwrap().0.to_string())
        .collect();
    v.insert("bclo_u64_r96", json!(cts));

    let pyope = PyopeOpe::new(
        b"key",
        ValueRange::new(0, (1 << 15) - 1).unwrap(),
        ValueRange::new(0, (1 << 31) - 1).unwrap(),
    )
    .unwrap();
    let cts: Vec<String> = [0i128, 1, 1000, 32767]
        .iter()
        .map(|&x| pyope.encrypt(x).unwrap().to_string())
        .collect();
    v.insert("pyope_compat_default_ranges", json!(cts));

    let clww = Clww::new(key(0x20), 32).unwrap();
    let cts: Vec<String> = plaintexts32
        .iter()
        .map(|&x| format!("{:016x}", clww.encrypt_u64(x).unwrap().0))
        .collect();
    v.insert("clww_u32", json!(cts));

    for (name, bits, d, seed) in [
        ("lewi_wu_u32_d2", 32, 2, 30),
        ("lewi_wu_u32_d8", 32, 8, 31),
        ("lewi_wu_u64_d8", 64, 8, 32),
    ] {
        let s = LewiWu::new(
            key(0x30),
            LewiWuParams {
                bits,
                block_bits: d,
            },
        )
        .unwrap();
        let mut r = rng(seed);
        let c = s.encrypt_full(&mut r, 0x1234_5678).unwrap();
        v.insert(
            name,
            json!({
                "left_first_block": hex::encode(c.left.blocks[0].key),
                "left_first_slot": c.left.blocks[0].slot,
                "ciphertext_sha256": digest(&c),
            }),
        );
    }

    let cloz = ClozInsecure::new(key(0x40), 32).unwrap();
    let c = cloz.encrypt_full(&mut rng(40), 0x1234_5678).unwrap();
    v.insert(
        "cloz_insecure_u32",
        json!({ "first_value": c.left[0].to_string(), "ciphertext_sha256": digest(&c) }),
    );
    let cloz = ClozPairing::new(key(0x41), 3).unwrap();
    let c = cloz.encrypt_full(&mut rng(41), 5).unwrap();
    v.insert("cloz_pairing_u3_sha256", json!(digest(&c)));

    let mut fh = FhOpe::new(FhOpeParams::default()).unwrap();
    let mut r = rng(50);
    let cts: Vec<String> = [10u64, 5, 10, 20, 10, 1, 15]
        .iter()
        .map(|&x| fh.encrypt_u64(&mut r, x).unwrap().to_string())
        .collect();
    v.insert("fh_ope_u32", json!(cts));
    v.insert(
        "fh_ope_state_sha256",
        json!(hex::encode(sha256(&fh.save().unwrap()))),
    );
    v
}

fn vector_path() -> PathBuf {
    [
        env!("CARGO_MANIFEST_DIR"),
        "tests",
        "vectors",
        "sesame_ore_seeded.json",
    ]
    .iter()
    .collect()
}

seeded::seeded_tests!("sesame-ore");
