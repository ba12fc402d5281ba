//! Every registered scheme through the object-safe interface: created by
//! name with parameters, encrypting, comparing and decrypting wire-encoded
//! ciphertexts, saved and restored.

// Test code: a panic is a failed test (clippy.toml allows this only
// inside #[test] functions, not in their helpers).
#![allow(clippy::unwrap_used)]

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{Params, SchemeKind};

#[test]
fn every_scheme_works_through_dyn_ore() {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let names: Vec<&str> = sesame_ore::schemes()
        .iter()
        .map(|s| s.descriptor.name)
        .collect();
    assert_eq!(
        names,
        [
            "plain",
            "bclo",
            "clww",
            "lewi-wu",
            "cloz",
            "cloz-insecure",
            "fh-ope"
        ]
    );
    for entry in sesame_ore::schemes() {
        let d = entry.descriptor;
        assert!(matches!(d.kind, SchemeKind::Ope | SchemeKind::Ore));
        assert!(d.doc.starts_with("docs/schemes/"));
        let mut params = Params::new();
        // Real pairings are slow in debug builds: 3-bit plaintexts.
        let bits = if d.name == "cloz" { 3 } else { 16 };
        params.set("bits", bits);
        let mut s = (entry.new_client)(&mut rng, &params).unwrap();
        assert_eq!(s.bits(), bits);
        let xs = [0u64, 5, 6, 5, (1 << bits) - 1];
        let cts: Vec<Vec<u8>> = xs
            .iter()
            .map(|&x| s.encrypt(&mut rng, x).unwrap())
            .collect();
        for (i, (x, a)) in xs.iter().zip(&cts).enumerate() {
            let j = (i + 1) % xs.len();
            assert_eq!(s.compare(a, &cts[j]).unwrap(), x.cmp(&xs[j]), "{}", d.name);
            if s.can_decrypt() {
                assert_eq!(s.decrypt(a).unwrap(), *x, "{}", d.name);
            }
            assert!(s.ciphertext_bits(a).unwrap() > 0);
        }
        let saved = s.save().unwrap();
        let back = (entry.restore_client)(&saved).unwrap();
        assert_eq!(back.descriptor().name, d.name);
        assert_eq!(back.compare(&cts[0], &cts[1]).unwrap(), xs[0].cmp(&xs[1]));
        if back.can_decrypt() {
            assert_eq!(back.decrypt(&cts[1]).unwrap(), xs[1]);
        }
        // Garbage is an error, not a panic.
        assert!(s.compare(&[1, 2, 3], &cts[0]).is_err());
        // Unknown parameters are refused.
        let mut bad = Params::new();
        bad.set("nonsense", 1);
        assert!((entry.new_client)(&mut rng, &bad).is_err(), "{}", d.name);
    }
    // A saved client of one scheme does not restore as another.
    let clww = sesame_ore::scheme("clww").unwrap();
    let saved = (clww.new_client)(&mut rng, &Params::new())
        .unwrap()
        .save()
        .unwrap();
    let bclo = sesame_ore::scheme("BCLO").unwrap();
    assert!((bclo.restore_client)(&saved).is_err());
    assert_eq!(sesame_ore::schemes().len(), 7);
}
