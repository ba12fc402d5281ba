//! One generic suite over every scheme: `compare(enc(a), enc(b))` is the
//! order of `a` and `b` on edge values (0, max, equal, adjacent, the sign
//! boundary of `i32`) and on random values; `decrypt(encrypt(x)) = x`
//! where the scheme decrypts; ciphertexts and saved clients round-trip
//! through their encodings; left halves compare against right halves.
//!
//! CLOZ with real pairings is slow in a debug build, so it runs on 3- and
//! 4-bit plaintexts with few comparisons; the insecure PPH covers CLOZ's
//! logic at 32 and 64 bits.

// Test code: a panic is a failed test (clippy.toml allows this only
// inside #[test] functions, not in their helpers).
#![allow(clippy::unwrap_used)]

use std::cmp::Ordering;

use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::wire;
use sesame_crypto::counter::{self, Primitive};
use sesame_crypto::Key;
use sesame_ore::bclo::{Bclo, BcloParams};
use sesame_ore::cloz::ClozPairing;
use sesame_ore::clww::Clww;
use sesame_ore::fh_ope::{FhOpe, FhOpeParams};
use sesame_ore::insecure::plain::Plain;
use sesame_ore::insecure::ClozInsecure;
use sesame_ore::lewi_wu::{LewiWu, LewiWuParams};
use sesame_ore::{LeftRight, OreScheme};

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

fn key() -> Key<32> {
    Key::from_bytes([0x5e; 32])
}

/// Edge values of a `bits`-bit domain: both ends, their neighbours, the
/// middle and its neighbours, and a repeated value.
fn edges(bits: u32) -> Vec<u64> {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    };
    let mid = max / 2 + 1;
    let mut v = vec![
        0,
        1,
        2,
        mid - 1,
        mid,
        mid + 1,
        max - 1,
        max,
        12345 & max,
        12345 & max,
    ];
    v.dedup();
    v
}

/// Encrypts every value, then checks every pair's comparison, decryption
/// and the ciphertexts' wire encoding.
fn check_all_pairs<S: OreScheme>(s: &mut S, xs: &[u64], seed: u64) {
    let mut r = rng(seed);
    let cts: Vec<S::Ciphertext> = xs.iter().map(|&x| s.encrypt(&mut r, x).unwrap()).collect();
    for (x, cx) in xs.iter().zip(&cts) {
        for (y, cy) in xs.iter().zip(&cts) {
            assert_eq!(
                s.compare(cx, cy).unwrap(),
                x.cmp(y),
                "{}: compare({x}, {y})",
                s.descriptor().name
            );
        }
        if s.can_decrypt() {
            assert_eq!(s.decrypt(cx).unwrap(), *x, "{}", s.descriptor().name);
        } else {
            assert!(s.decrypt(cx).is_err());
        }
        let bytes = wire::encode(cx).unwrap();
        assert_eq!(&wire::decode::<S::Ciphertext>(&bytes).unwrap(), cx);
        assert!(s.ciphertext_bits(cx) > 0);
    }
    let too_big = if s.bits() < 64 {
        Some(1u64 << s.bits())
    } else {
        None
    };
    if let Some(v) = too_big {
        assert!(s.encrypt(&mut r, v).is_err());
    }
}

/// `i32` values through the sign-flipping encoding.
fn check_i32<S: OreScheme>(s: &mut S, seed: u64) {
    let xs = [
        i32::MIN,
        i32::MIN + 1,
        -2,
        -1,
        0,
        1,
        2,
        i32::MAX - 1,
        i32::MAX,
        -1,
    ];
    let mut r = rng(seed);
    let cts: Vec<S::Ciphertext> = xs
        .iter()
        .map(|&x| s.encrypt_value(&mut r, x).unwrap())
        .collect();
    for (x, cx) in xs.iter().zip(&cts) {
        for (y, cy) in xs.iter().zip(&cts) {
            assert_eq!(s.compare(cx, cy).unwrap(), x.cmp(y), "i32 {x} {y}");
        }
        if s.can_decrypt() {
            assert_eq!(s.decrypt_value::<i32>(cx).unwrap(), *x);
        }
    }
}

/// Left halves (fresh, from `encrypt_left`) against right halves.
fn check_left_right<S: LeftRight>(s: &mut S, xs: &[u64], seed: u64) {
    let mut r = rng(seed);
    let cts: Vec<S::Ciphertext> = xs.iter().map(|&x| s.encrypt(&mut r, x).unwrap()).collect();
    for &x in xs {
        let left = s.encrypt_left(&mut r, x).unwrap();
        for (y, cy) in xs.iter().zip(&cts) {
            assert_eq!(s.compare_left_right(&left, S::right(cy)).unwrap(), x.cmp(y));
        }
    }
}

/// The client saved and restored behaves the same.
fn check_save_restore<S: OreScheme>(s: &mut S, xs: &[u64]) {
    let mut r = rng(9);
    let cts: Vec<S::Ciphertext> = xs.iter().map(|&x| s.encrypt(&mut r, x).unwrap()).collect();
    let saved = s.save().unwrap();
    let back = S::restore(&saved).unwrap();
    for (x, c) in xs.iter().zip(&cts) {
        if s.can_decrypt() {
            assert_eq!(back.decrypt(c).unwrap(), *x);
        }
        assert_eq!(back.compare(c, &cts[0]).unwrap(), x.cmp(&xs[0]));
    }
}

#[test]
fn plain_baseline() {
    check_all_pairs(&mut Plain::new(32).unwrap(), &edges(32), 1);
    check_all_pairs(&mut Plain::new(64).unwrap(), &edges(64), 1);
    check_i32(&mut Plain::new(32).unwrap(), 1);
}

#[test]
fn bclo_orders_and_decrypts() {
    let mut s = Bclo::new(key(), BcloParams::default()).unwrap();
    check_all_pairs(&mut s, &edges(32), 2);
    check_i32(&mut s, 2);
    check_save_restore(&mut s, &edges(32));
    let mut s64 = Bclo::new(
        key(),
        BcloParams {
            bits: 64,
            range_bits: 96,
        },
    )
    .unwrap();
    check_all_pairs(&mut s64, &edges(64), 2);
    let mut small = Bclo::new(
        key(),
        BcloParams {
            bits: 10,
            range_bits: 12,
        },
    )
    .unwrap();
    check_all_pairs(&mut small, &(0..1024).step_by(37).collect::<Vec<_>>(), 2);
}

#[test]
fn clww_orders_and_decrypts() {
    let mut s = Clww::new(key(), 32).unwrap();
    check_all_pairs(&mut s, &edges(32), 3);
    check_i32(&mut s, 3);
    check_save_restore(&mut s, &edges(32));
    check_all_pairs(&mut Clww::new(key(), 64).unwrap(), &edges(64), 3);
}

#[test]
fn lewi_wu_every_block_width() {
    for d in [1, 2, 3, 4, 7, 8] {
        let mut s = LewiWu::new(
            key(),
            LewiWuParams {
                bits: 32,
                block_bits: d,
            },
        )
        .unwrap();
        check_all_pairs(&mut s, &edges(32), 4);
        check_left_right(&mut s, &edges(32)[..6], 4);
    }
    let mut s = LewiWu::new(
        key(),
        LewiWuParams {
            bits: 32,
            block_bits: 8,
        },
    )
    .unwrap();
    check_i32(&mut s, 4);
    check_save_restore(&mut s, &edges(32));
    let mut s64 = LewiWu::new(
        key(),
        LewiWuParams {
            bits: 64,
            block_bits: 8,
        },
    )
    .unwrap();
    check_all_pairs(&mut s64, &edges(64), 4);
    let mut wide = LewiWu::new(
        key(),
        LewiWuParams {
            bits: 32,
            block_bits: 16,
        },
    )
    .unwrap();
    check_all_pairs(
        &mut wide,
        &[0, 65535, 65536, 1 << 31, u64::from(u32::MAX)],
        4,
    );
}

#[test]
fn cloz_insecure_orders() {
    let mut s = ClozInsecure::new(key(), 32).unwrap();
    check_all_pairs(&mut s, &edges(32), 5);
    check_i32(&mut s, 5);
    check_left_right(&mut s, &edges(32)[..6], 5);
    check_save_restore(&mut s, &edges(32));
    check_all_pairs(&mut ClozInsecure::new(key(), 64).unwrap(), &edges(64), 5);
}

#[test]
fn cloz_with_pairings_orders_small_domains() {
    let mut s = ClozPairing::new(key(), 3).unwrap();
    let mut r = rng(6);
    let xs = [0u64, 3, 4, 7, 4];
    let cts: Vec<_> = xs.iter().map(|&x| s.encrypt(&mut r, x).unwrap()).collect();
    for (i, j) in [(0, 1), (1, 0), (1, 2), (2, 3), (3, 2), (2, 4), (0, 3)] {
        assert_eq!(
            s.compare(&cts[i], &cts[j]).unwrap(),
            xs[i].cmp(&xs[j]),
            "{i} {j}"
        );
    }
    let left = s.encrypt_left(&mut r, 5).unwrap();
    assert_eq!(
        s.compare_left_right(&left, &cts[2].right).unwrap(),
        Ordering::Greater
    );
    assert_eq!(
        s.compare_left_right(&left, &cts[3].right).unwrap(),
        Ordering::Less
    );
    let bytes = wire::encode(&cts[0]).unwrap();
    assert_eq!(
        wire::decode::<<ClozPairing as OreScheme>::Ciphertext>(&bytes).unwrap(),
        cts[0]
    );
    assert!(s.decrypt(&cts[0]).is_err());
    let back = ClozPairing::restore(&s.save().unwrap()).unwrap();
    assert_eq!(back.compare(&cts[1], &cts[2]).unwrap(), Ordering::Less);
    // i32 at 4 bits is out of width: typed inputs are checked.
    let mut narrow = ClozPairing::new(key(), 4).unwrap();
    assert!(narrow.encrypt_value(&mut r, 1i32).is_err());
}

#[test]
fn fh_ope_orders_decrypts_and_persists() {
    let mut s = FhOpe::new(FhOpeParams::default()).unwrap();
    check_all_pairs(&mut s, &edges(32), 7);
    check_i32(&mut s, 7);
    check_save_restore(&mut s, &edges(32));
    let mut s64 = FhOpe::new(FhOpeParams {
        bits: 64,
        cipher_bits: 64,
    })
    .unwrap();
    check_all_pairs(&mut s64, &edges(64), 7);
    // Equal plaintexts: distinct ciphertexts that still compare equal.
    let mut r = rng(7);
    let a = s.encrypt(&mut r, 77).unwrap();
    let b = s.encrypt(&mut r, 77).unwrap();
    assert_ne!(a, b);
    assert_eq!(s.compare(&a, &b).unwrap(), Ordering::Equal);
}

/// After a rebalance, a ciphertext issued before it is refused by the
/// generic interface (the code before epochs decrypted the old ciphertext
/// of 0 to 6 in this very setting: sorted inserts, 12-bit ciphertexts);
/// brought forward with the rebalance's re-encoding, it decrypts and
/// compares correctly.
#[test]
fn fh_ope_refuses_stale_ciphertexts_and_reencodes_them() {
    let mut r = rng(11);
    let mut s = FhOpe::new(FhOpeParams {
        bits: 16,
        cipher_bits: 12,
    })
    .unwrap();
    let mut held = Vec::new();
    let mut stale = Vec::new();
    for x in 0..40u64 {
        let c = OreScheme::encrypt(&mut s, &mut r, x).unwrap();
        if let Some(re) = s.take_reencoding() {
            stale.extend(held.iter().copied());
            for (old, _) in held.iter_mut() {
                *old = re.apply(old).unwrap();
            }
            // A ciphertext of the new epoch takes no re-encoding again.
            assert!(re.apply(&held[0].0).is_err());
        }
        held.push((c, x));
    }
    assert!(s.epoch() >= 2, "{} rebalances", s.epoch());
    assert!(!stale.is_empty());
    for &(c, x) in &stale {
        let now = s.epoch();
        assert!(c.epoch < now);
        assert!(s.decrypt(&c).is_err(), "stale ciphertext of {x} was read");
        assert!(s.compare(&c, &held[0].0).is_err());
        assert!(s.compare(&held[0].0, &c).is_err());
    }
    for &(c, x) in &held {
        assert_eq!(s.decrypt(&c).unwrap(), x);
        for &(d, y) in &held {
            assert_eq!(s.compare(&c, &d).unwrap(), x.cmp(&y));
        }
    }
}

/// What the epoch does and does not catch. It is a label, not
/// authenticated (FH-OPE has no key): a ciphertext carrying another epoch
/// than the tree's, earlier or later, is refused; a stale ciphertext
/// relabelled with the current epoch by whoever holds it is refused only
/// when its number is no current ciphertext, and is otherwise read as the
/// plaintext of the current ciphertext with that number (here the old
/// ciphertext of 0 is read as 6). Stated in `docs/schemes/fh_ope.md`.
#[test]
fn fh_ope_a_relabelled_stale_ciphertext_is_refused_only_if_its_number_is_not_current() {
    use sesame_ore::fh_ope::FhOpeCiphertext;
    let mut r = rng(12);
    let mut s = FhOpe::new(FhOpeParams {
        bits: 16,
        cipher_bits: 12,
    })
    .unwrap();
    // Sorted inserts: the tree is rebalanced; `held` is kept current with
    // every re-encoding, `stale` keeps what was issued before.
    let mut held: Vec<(FhOpeCiphertext, u64)> = Vec::new();
    let mut stale = Vec::new();
    for x in 0..20u64 {
        let c = OreScheme::encrypt(&mut s, &mut r, x).unwrap();
        if let Some(re) = s.take_reencoding() {
            stale.extend(held.iter().copied());
            for (old, _) in held.iter_mut() {
                *old = re.apply(old).unwrap();
            }
        }
        held.push((c, x));
    }
    let now = s.epoch();
    assert!(now >= 1 && !stale.is_empty());
    let (mut refused, mut misread) = (0, 0);
    for &(c, x) in &stale {
        // Labelled as issued, or with a later epoch: refused.
        for epoch in [c.epoch, now + 1] {
            let labelled = FhOpeCiphertext { epoch, ..c };
            assert!(s.decrypt(&labelled).is_err());
            assert!(s.compare(&labelled, &held[0].0).is_err());
        }
        // Relabelled with the current epoch: read as the current
        // ciphertext with the same number, if there is one.
        let relabelled = FhOpeCiphertext { epoch: now, ..c };
        match held.iter().find(|(h, _)| h.value == c.value) {
            Some(&(_, y)) => {
                assert_eq!(s.decrypt(&relabelled).unwrap(), y);
                if y != x {
                    misread += 1;
                }
            }
            None => {
                assert!(matches!(
                    s.decrypt(&relabelled),
                    Err(sesame_core::Error::Crypto)
                ));
                refused += 1;
            }
        }
    }
    assert!(refused > 0, "no relabelled ciphertext was refused");
    // The limit the docs state: the old ciphertext of 0 reads as 6.
    assert!(misread > 0, "no relabelled ciphertext was misread");
    let zero = stale.iter().find(|&&(_, x)| x == 0).unwrap().0;
    assert_eq!(
        s.decrypt(&FhOpeCiphertext { epoch: now, ..zero }).unwrap(),
        6
    );
}

/// Primitive counts per operation, as seed 004's Table 4 reports them.
#[test]
fn primitive_counts_per_operation() {
    let mut r = rng(8);
    let clww = Clww::new(key(), 32).unwrap();
    let (_, c) = counter::measure(|| clww.encrypt_u64(99).unwrap());
    assert_eq!(c.pure(Primitive::Prf), 32);

    let lw = LewiWu::new(key(), LewiWuParams::default()).unwrap();
    let (ct, c) = counter::measure(|| lw.encrypt_full(&mut r, 99).unwrap());
    assert_eq!(c.pure(Primitive::Prp), 16);
    assert_eq!(c.pure(Primitive::Prf), 64);
    assert_eq!(c.pure(Primitive::Hash), 64);
    let other = lw.encrypt_full(&mut r, 1 << 31).unwrap();
    let (_, c) = counter::measure(|| lw.compare_halves(&ct.left, &other.right).unwrap());
    assert_eq!(c.pure(Primitive::Hash), 1);

    let bclo = Bclo::new(key(), BcloParams::default()).unwrap();
    let (_, c) = counter::measure(|| bclo.encrypt_value_u64(99).unwrap());
    assert!((32..=64).contains(&c.pure(Primitive::HgSample)), "{c:?}");
    assert_eq!(c.pure(Primitive::Prf), 1, "one PRF call for the leaf");

    let cloz = ClozInsecure::new(key(), 32).unwrap();
    let (_, c) = counter::measure(|| cloz.encrypt_full(&mut r, 99).unwrap());
    assert_eq!(c.pure(Primitive::Prf), 32);
    assert_eq!(c.pure(Primitive::Pph), 32);
    assert_eq!(c.pure(Primitive::Prp), 1);

    let mut fh = FhOpe::new(FhOpeParams::default()).unwrap();
    let (_, c) = counter::measure(|| fh.encrypt_u64(&mut r, 5).unwrap());
    assert_eq!(c.pure(Primitive::Traversal), 1);
    let x = fh.encrypt_u64(&mut r, 6).unwrap();
    let (_, c) = counter::measure(|| fh.decrypt_u64(x).unwrap());
    assert_eq!(c.pure(Primitive::Traversal), 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn random_u32_values_keep_their_order(xs in proptest::collection::vec(any::<u32>(), 2..8)) {
        let xs: Vec<u64> = xs.into_iter().map(u64::from).collect();
        check_all_pairs(&mut Bclo::new(key(), BcloParams::default()).unwrap(), &xs, 10);
        check_all_pairs(&mut Clww::new(key(), 32).unwrap(), &xs, 10);
        check_all_pairs(
            &mut LewiWu::new(key(), LewiWuParams { bits: 32, block_bits: 4 }).unwrap(),
            &xs,
            10,
        );
        check_all_pairs(&mut ClozInsecure::new(key(), 32).unwrap(), &xs, 10);
        check_all_pairs(&mut FhOpe::new(FhOpeParams::default()).unwrap(), &xs, 10);
    }

    #[test]
    fn adjacent_u64_values_keep_their_order(x in any::<u64>()) {
        let xs = [x, x.wrapping_add(1), x.wrapping_sub(1), x ^ 1, x];
        check_all_pairs(&mut Clww::new(key(), 64).unwrap(), &xs, 11);
        check_all_pairs(
            &mut LewiWu::new(key(), LewiWuParams { bits: 64, block_bits: 8 }).unwrap(),
            &xs,
            11,
        );
        check_all_pairs(&mut Bclo::new(key(), BcloParams { bits: 64, range_bits: 80 }).unwrap(), &xs, 11);
        check_all_pairs(&mut FhOpe::new(FhOpeParams { bits: 64, cipher_bits: 64 }).unwrap(), &xs, 11);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoders(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = wire::decode::<<Bclo as OreScheme>::Ciphertext>(&bytes);
        let _ = wire::decode::<<LewiWu as OreScheme>::Ciphertext>(&bytes);
        let _ = wire::decode::<<ClozPairing as OreScheme>::Ciphertext>(&bytes);
        let _ = FhOpe::restore(&bytes);
        let _ = Bclo::restore(&bytes);
    }
}

/// Malformed ciphertexts are errors, not panics, in compare and decrypt.
#[test]
fn malformed_ciphertexts_are_errors() {
    let mut r = rng(12);
    let lw = LewiWu::new(
        key(),
        LewiWuParams {
            bits: 32,
            block_bits: 8,
        },
    )
    .unwrap();
    let mut c = lw.encrypt_full(&mut r, 5).unwrap();
    c.right.trits.pop();
    assert!(lw.compare(&c, &c).is_err());
    c.left.blocks[0].slot = 999;
    assert!(lw.decrypt(&c).is_err());
    let clww = Clww::new(key(), 8).unwrap();
    assert!(clww
        .decrypt(&sesame_ore::clww::ClwwCiphertext(u128::MAX))
        .is_err());
    let bclo = Bclo::new(key(), BcloParams::default()).unwrap();
    assert!(bclo
        .decrypt(&sesame_ore::bclo::BcloCiphertext(1 << 48))
        .is_err());
    let fh = FhOpe::new(FhOpeParams::default()).unwrap();
    assert!(fh
        .decrypt(&sesame_ore::fh_ope::FhOpeCiphertext { value: 5, epoch: 0 })
        .is_err());
}
