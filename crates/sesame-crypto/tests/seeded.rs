//! Seeded vectors for Sesame's own constructions.
//!
//! The outputs below, from fixed keys, are stored in
//! `tests/vectors/sesame_seeded.json` so that a refactor cannot silently
//! change a permutation, a stream, a filter layout or a tree. To accept a
//! deliberate change, regenerate the file:
//!
//! ```text
//! cargo test -p sesame-crypto --test seeded -- --ignored write_seeded_vectors
//! ```
//!
//! (a separate, ignored test: the checking test never writes the file).

// Test code: a panic is a failed test (clippy.toml allows this only
// inside #[test] functions, not in their helpers).
#![allow(clippy::unwrap_used)]

#[path = "support/seeded.rs"]
mod seeded;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{json, Value};
use sesame_crypto::hash::{ro, sha256};
use sesame_crypto::{
    Aes128Prf, Aes256GcmSiv, AesCtrPrg, BloomFilter, BloomKey, FeistelPrp, GgmTree, HmacPrf, Key,
    KeyedHash, KnuthPrp, MerkleTree, Prf, Prp,
};

fn key16(tag: u8) -> Key<16> {
    Key::from_bytes(core::array::from_fn(|i| tag.wrapping_add(i as u8)))
}

fn key32(tag: u8) -> Key<32> {
    Key::from_bytes(core::array::from_fn(|i| tag.wrapping_add(i as u8)))
}

fn vectors() -> BTreeMap<&'static str, Value> {
    let mut v = BTreeMap::new();

    let master = key32(0x10);
    let sub: Key<16> = master.derive("sesame/seeded/derive");
    v.insert("key_derive", json!(hex::encode(sub.as_bytes())));

    let prf = Aes128Prf::new(&key16(0x20));
    v.insert("aes128_prf", json!(hex::encode(prf.eval(&[0x42; 16]))));
    let hmac = HmacPrf::new(&key32(0x21));
    v.insert("hmac_prf", json!(hex::encode(hmac.eval(b"sesame"))));

    let mut prg = AesCtrPrg::new(&key16(0x30));
    let mut bytes = [0u8; 40];
    prg.fill_bytes(&mut bytes);
    let words: Vec<String> = (0..4).map(|_| format!("{:016x}", prg.next_u64())).collect();
    let bits: String = (0..40)
        .map(|_| if prg.next_bit() { '1' } else { '0' })
        .collect();
    let below: Vec<u64> = (0..12).map(|_| prg.below(1000).unwrap()).collect();
    let mut shuffled: Vec<u32> = (0..12).collect();
    prg.shuffle(&mut shuffled);
    v.insert(
        "prg",
        json!({
            "bytes": hex::encode(bytes),
            "u64": words,
            "bits": bits,
            "below_1000": below,
            "shuffle_12": shuffled,
        }),
    );

    let knuth16 = KnuthPrp::new(&key16(0x40), 16).unwrap();
    let knuth1000 = KnuthPrp::new(&key16(0x40), 1000).unwrap();
    v.insert(
        "knuth_prp",
        json!({
            "n16": (0..16).map(|x| knuth16.permute(x).unwrap()).collect::<Vec<_>>(),
            "n1000_first20": (0..20).map(|x| knuth1000.permute(x).unwrap()).collect::<Vec<_>>(),
        }),
    );

    let f1000 = FeistelPrp::new(&key16(0x50), 1000).unwrap();
    let f64b = FeistelPrp::with_bits(&key16(0x50), 64).unwrap();
    let f5 = FeistelPrp::new(&key16(0x50), 5).unwrap();
    let bits64: Vec<String> = [0u64, 1, u64::MAX]
        .iter()
        .map(|&x| format!("{:016x}", f64b.permute(x).unwrap()))
        .collect();
    v.insert(
        "feistel_prp",
        json!({
            "n1000_first16": (0..16).map(|x| f1000.permute(x).unwrap()).collect::<Vec<_>>(),
            "n5": (0..5).map(|x| f5.permute(x).unwrap()).collect::<Vec<_>>(),
            "bits64": bits64,
        }),
    );

    let bkey = BloomKey::new(&key32(0x60));
    let mut bloom = BloomFilter::new(256, 4).unwrap();
    for item in ["alpha", "beta", "gamma"] {
        bloom.insert(&bkey, item.as_bytes());
    }
    v.insert("bloom_m256_k4", serde_json::to_value(&bloom).unwrap());

    let tree = GgmTree::new(key16(0x70), 8).unwrap();
    let cover: Vec<Value> = tree
        .cover(&[3, 100, 101])
        .unwrap()
        .iter()
        .map(|n| json!([n.level(), n.prefix(), hex::encode(n.key().as_bytes())]))
        .collect();
    let ggm_leaves: Vec<String> = [0u64, 1, 200, 255]
        .iter()
        .map(|&i| hex::encode(tree.leaf(i).unwrap().as_bytes()))
        .collect();
    v.insert(
        "ggm_depth8",
        json!({
            "leaves": ggm_leaves,
            "cover_3_100_101": cover,
        }),
    );

    let leaves: Vec<[u8; 1]> = (0u8..5).map(|i| [i]).collect();
    let merkle = MerkleTree::build(&leaves);
    let proof = merkle.proof(2).unwrap();
    v.insert(
        "merkle_5",
        json!({
            "root": hex::encode(merkle.root()),
            "proof_2": proof.siblings.iter().map(hex::encode).collect::<Vec<_>>(),
        }),
    );

    let kh = KeyedHash::new(&key32(0x80));
    v.insert(
        "hash",
        json!({
            "sha256_sesame": hex::encode(sha256(b"sesame")),
            "ro": hex::encode(ro("sesame/seeded", &[b"a", b"bc"])),
            "keyed": hex::encode(kh.hash("sesame/seeded", &[b"a", b"bc"])),
        }),
    );

    let aead = Aes256GcmSiv::new(&key32(0x90));
    let sealed = aead.seal_with_nonce(&[7; 12], b"aad", b"record").unwrap();
    v.insert("aead_seal_with_nonce", json!(hex::encode(sealed)));

    v
}

fn vector_path() -> PathBuf {
    [
        env!("CARGO_MANIFEST_DIR"),
        "tests",
        "vectors",
        "sesame_seeded.json",
    ]
    .iter()
    .collect()
}

seeded::seeded_tests!("sesame-crypto");
