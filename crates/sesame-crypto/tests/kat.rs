//! Known-answer tests from public vectors in `tests/vectors/`, one file per
//! source (FIPS 197, SP 800-38A, RFC 4231, FIPS 180-2, RFC 8452, Wycheproof).

// Test code: a panic is a failed test (clippy.toml allows this only
// inside #[test] functions, not in their helpers).
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use serde_json::Value;
use sesame_crypto::hash::sha256;
use sesame_crypto::{Aes128Prf, Aes256GcmSiv, AesCtrPrg, Error, HmacPrf, Key, Prf};

fn load(name: &str) -> Value {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "vectors", name]
        .iter()
        .collect();
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn hex(v: &Value, field: &str) -> Vec<u8> {
    hex::decode(v[field].as_str().unwrap()).unwrap()
}

fn block(v: &Value, field: &str) -> [u8; 16] {
    hex(v, field).try_into().unwrap()
}

fn tests(file: &Value) -> &Vec<Value> {
    file["tests"].as_array().unwrap()
}

#[test]
fn aes128_fips197() {
    let file = load("aes128_fips197.json");
    assert_eq!(tests(&file).len(), 2);
    for t in tests(&file) {
        let prf = Aes128Prf::from_slice(&hex(t, "key")).unwrap();
        assert_eq!(
            prf.eval(&block(t, "plaintext")),
            block(t, "ciphertext"),
            "{}",
            t["comment"]
        );
    }
}

#[test]
fn aes128_sp800_38a_ecb_single_and_batch() {
    let file = load("aes128_sp800_38a.json");
    let ecb = &file["ecb"];
    let prf = Aes128Prf::from_slice(&hex(ecb, "key")).unwrap();
    let blocks = ecb["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 4);
    let inputs: Vec<[u8; 16]> = blocks.iter().map(|b| block(b, "plaintext")).collect();
    let expected: Vec<[u8; 16]> = blocks.iter().map(|b| block(b, "ciphertext")).collect();
    for (i, e) in inputs.iter().zip(&expected) {
        assert_eq!(prf.eval(i), *e);
    }
    let mut out = vec![[0u8; 16]; inputs.len()];
    prf.eval_batch(&inputs, &mut out).unwrap();
    assert_eq!(out, expected);
}

#[test]
fn aes128_sp800_38a_ctr_is_the_prg_stream() {
    let file = load("aes128_sp800_38a.json");
    let ctr = &file["ctr"];
    let key = Key::<16>::from_slice(&hex(ctr, "key")).unwrap();
    let mut prg = AesCtrPrg::with_counter(&key, block(ctr, "initial_counter"));
    let pt = hex(ctr, "plaintext");
    let ct = hex(ctr, "ciphertext");
    // Read the keystream in uneven pieces to exercise the buffer.
    let mut ks = vec![0u8; pt.len()];
    let (a, rest) = ks.split_at_mut(5);
    prg.fill_bytes(a);
    let (b, c) = rest.split_at_mut(20);
    prg.fill_bytes(b);
    prg.fill_bytes(c);
    let xored: Vec<u8> = pt.iter().zip(&ks).map(|(p, k)| p ^ k).collect();
    assert_eq!(xored, ct);
}

#[test]
fn hmac_sha256_rfc4231() {
    let file = load("hmac_sha256_rfc4231.json");
    assert_eq!(tests(&file).len(), 7);
    for t in tests(&file) {
        let prf = HmacPrf::from_slice(&hex(t, "key")).unwrap();
        let tag = prf.eval(&hex(t, "data"));
        let expected = hex(t, "hmac_sha256");
        let len = t["truncate_bytes"].as_u64().map_or(32, |n| n as usize);
        assert_eq!(&tag[..len], &expected[..], "test case {}", t["test_case"]);
    }
}

#[test]
fn hmac_sha256_wycheproof() {
    let file = load("hmac_sha256_wycheproof.json");
    assert!(tests(&file).len() >= 10);
    for t in tests(&file) {
        let key = Key::<32>::from_slice(&hex(t, "key")).unwrap();
        let prf = HmacPrf::new(&key);
        assert_eq!(prf.eval(&hex(t, "msg")).to_vec(), hex(t, "tag"));
    }
}

#[test]
fn sha256_nist() {
    let file = load("sha256_nist.json");
    for t in tests(&file) {
        let unit = t["message_ascii"].as_str().unwrap();
        let repeat = t["repeat"].as_u64().unwrap_or(1) as usize;
        let msg = unit.repeat(repeat);
        assert_eq!(
            sha256(msg.as_bytes()).to_vec(),
            hex(t, "digest"),
            "{}",
            t["comment"]
        );
    }
}

fn check_gcm_siv(t: &Value) {
    let aead = Aes256GcmSiv::from_slice(&hex(t, "key")).unwrap();
    let nonce: [u8; 12] = hex(t, "nonce").try_into().unwrap();
    let aad = hex(t, "aad");
    let pt = hex(t, "plaintext");
    let mut wire = nonce.to_vec();
    wire.extend_from_slice(&hex(t, "ciphertext_and_tag"));
    if t["result"].as_str() == Some("invalid") {
        assert_eq!(aead.open(&aad, &wire), Err(Error::Decryption));
        return;
    }
    assert_eq!(aead.seal_with_nonce(&nonce, &aad, &pt).unwrap(), wire);
    assert_eq!(aead.open(&aad, &wire).unwrap(), pt);
}

#[test]
fn aes_gcm_siv_rfc8452() {
    let file = load("aes_gcm_siv_rfc8452.json");
    assert!(tests(&file).len() >= 20);
    for t in tests(&file) {
        check_gcm_siv(t);
    }
}

#[test]
fn aes256_gcm_siv_wycheproof() {
    let file = load("aes256_gcm_siv_wycheproof.json");
    let invalid = tests(&file)
        .iter()
        .filter(|t| t["result"] == "invalid")
        .count();
    // The whole 256-bit part of Wycheproof's file, negative cases included.
    assert_eq!(tests(&file).len(), 103);
    assert_eq!(invalid, 34);
    for t in tests(&file) {
        check_gcm_siv(t);
    }
}
