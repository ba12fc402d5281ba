//! Every ORE scheme's public comparator, built from public parameters
//! alone (no key), orders ciphertexts as their plaintexts, and refuses
//! ciphertexts of other parameters.

#![allow(clippy::unwrap_used)]

use std::cmp::Ordering;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sesame_ore::bclo::{Bclo, BcloComparator, BcloParams};
use sesame_ore::cloz::{ClozComparator, PairingPph};
use sesame_ore::clww::{Clww, ClwwComparator};
use sesame_ore::fh_ope::{FhOpe, FhOpeComparator, FhOpeParams};
use sesame_ore::insecure::plain::{Plain, PlainComparator};
use sesame_ore::insecure::{ClozInsecure, CorrectnessOnlyPph};
use sesame_ore::lewi_wu::{LewiWu, LewiWuComparator, LewiWuParams};
use sesame_ore::{Comparator, OreScheme};

/// Encrypts `xs` with `scheme` and checks `cmp` on every pair.
fn orders<S, C>(scheme: &mut S, cmp: &C, xs: &[u64], rng: &mut ChaCha20Rng)
where
    S: OreScheme,
    C: Comparator<Ciphertext = S::Ciphertext>,
{
    let cts: Vec<S::Ciphertext> = xs
        .iter()
        .map(|&x| scheme.encrypt(rng, x).unwrap())
        .collect();
    for (i, a) in cts.iter().enumerate() {
        for (j, b) in cts.iter().enumerate() {
            if i == j {
                continue;
            }
            let got = cmp.compare(C::left(a), &C::right(b)).unwrap();
            assert_eq!(got, xs[i].cmp(&xs[j]), "{} vs {}", xs[i], xs[j]);
            // The scheme's own comparison is its comparator's.
            assert_eq!(scheme.compare(a, b).unwrap(), got);
        }
    }
}

fn values(rng: &mut ChaCha20Rng, bits: u32, n: usize) -> Vec<u64> {
    let mut xs: Vec<u64> = (0..n).map(|_| rng.gen_range(0..1u64 << bits)).collect();
    // Equal plaintexts too.
    xs.push(xs[0]);
    xs
}

#[test]
fn keyless_comparators_order_every_scheme_s_ciphertexts() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let xs = values(&mut rng, 16, 12);
    orders(
        &mut Plain::new(16).unwrap(),
        &PlainComparator,
        &xs,
        &mut rng,
    );
    let params = BcloParams {
        bits: 16,
        range_bits: 48,
    };
    orders(
        &mut Bclo::generate(&mut rng, params).unwrap(),
        &BcloComparator,
        &xs,
        &mut rng,
    );
    let cmp = ClwwComparator::new(16).unwrap();
    orders(
        &mut Clww::generate(&mut rng, 16).unwrap(),
        &cmp,
        &xs,
        &mut rng,
    );
    for block_bits in [1, 2, 4] {
        let params = LewiWuParams {
            bits: 16,
            block_bits,
        };
        let cmp = LewiWuComparator::new(params).unwrap();
        orders(
            &mut LewiWu::generate(&mut rng, params).unwrap(),
            &cmp,
            &xs,
            &mut rng,
        );
    }
    let cmp = ClozComparator::<CorrectnessOnlyPph>::new(16).unwrap();
    orders(
        &mut ClozInsecure::generate(&mut rng, 16).unwrap(),
        &cmp,
        &xs,
        &mut rng,
    );
    // The pairing PPH is slow: a few 6-bit values.
    let small = values(&mut rng, 6, 3);
    let cmp = ClozComparator::<PairingPph>::new(6).unwrap();
    let mut cloz = sesame_ore::cloz::ClozPairing::generate(&mut rng, 6).unwrap();
    orders(&mut cloz, &cmp, &small, &mut rng);
}

#[test]
fn fh_ope_ciphertexts_compare_within_an_epoch_only() {
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let params = FhOpeParams {
        bits: 16,
        cipher_bits: 64,
    };
    let mut s = FhOpe::new(params).unwrap();
    let a = s.encrypt(&mut rng, 10).unwrap();
    let b = s.encrypt(&mut rng, 20).unwrap();
    let cmp = FhOpeComparator;
    assert_eq!(cmp.compare(&a, &b).unwrap(), Ordering::Less);
    assert_eq!(cmp.compare(&b, &a).unwrap(), Ordering::Greater);
    let mut later = b;
    later.epoch += 1;
    assert!(cmp.compare(&a, &later).is_err());
}

#[test]
fn comparators_refuse_ciphertexts_of_other_parameters() {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let p8 = LewiWuParams {
        bits: 8,
        block_bits: 2,
    };
    let p16 = LewiWuParams {
        bits: 16,
        block_bits: 2,
    };
    let mut s = LewiWu::generate(&mut rng, p8).unwrap();
    let c = s.encrypt(&mut rng, 3).unwrap();
    let wrong = LewiWuComparator::new(p16).unwrap();
    assert!(wrong.compare(&c.left, &c.right).is_err());
    let mut s = ClozInsecure::generate(&mut rng, 8).unwrap();
    let c = s.encrypt(&mut rng, 3).unwrap();
    let wrong = ClozComparator::<CorrectnessOnlyPph>::new(16).unwrap();
    assert!(wrong.compare(&c.left, &c.right).is_err());
    // Bad parameters are refused when the comparator is made.
    assert!(ClwwComparator::new(65).is_err());
    assert!(LewiWuComparator::new(LewiWuParams {
        bits: 8,
        block_bits: 0
    })
    .is_err());
}
