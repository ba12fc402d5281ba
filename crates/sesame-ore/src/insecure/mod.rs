//! **Insecure** modes, for benchmarks only.
//!
//! [`plain`] is the plaintext baseline of the OPE/ORE comparisons (values
//! in the clear, registry name `plain`, and `bplus-plain` in the range
//! protocols): what an index costs without encryption.
//!
//! [`CorrectnessOnlyPph`] is the "fake" property-preserving hash that
//! seed 004 used to run CLOZ at all ("correct, but insecure, which does not
//! use pairings", §3.4): its hashes are the values themselves, so a CLOZ
//! ciphertext under it reveals every CLWW value, hence far more than CLWW
//! itself. It exists so that CLOZ's primitive counts, sizes and the cost of
//! everything but the pairings can be measured at scale. The first
//! construction in a process prints a warning on standard error (once, so
//! that a benchmark creating thousands of them stays readable).

pub mod plain;

use rand_core::CryptoRngCore;
use sesame_core::{BackwardPrivacy, QueryKind, SchemeDescriptor, SchemeKind};
use sesame_crypto::counter::{self, Primitive};
use sesame_crypto::Key;

use crate::cloz::{Cloz, Pph};

/// Descriptor of CLOZ with the insecure PPH.
pub static CLOZ_INSECURE_DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "cloz-insecure",
    title: "CLOZ with seed 004's correctness-only PPH (INSECURE, benchmarks only)",
    citation: "D. Cash, F.-H. Liu, A. O'Neill, C. Zhang. ASIACRYPT 2018, with the fake PPH \
               of D. Bogatov, G. Kollios, L. Reyzin, VLDB 2019, §3.4",
    kind: SchemeKind::Ore,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Range],
    leakage: "INSECURE: ciphertexts hold the CLWW values in the clear (shuffled), revealing at \
              least what CLWW reveals. For measuring counts and sizes only.",
    doc: "docs/schemes/cloz.md",
};

/// The warning printed when an insecure PPH is constructed.
pub const WARNING: &str = "WARNING: sesame_ore::insecure::CorrectnessOnlyPph is INSECURE \
                           (its hashes are the values in the clear); use it for benchmarks only";

/// Seed 004's correctness-only PPH: `hash(u) = u`, `test(a, b) = [b = a + 1]`.
/// **Insecure.**
#[derive(Debug)]
pub struct CorrectnessOnlyPph {
    _private: (),
}

/// CLOZ over the insecure PPH. **Insecure.**
pub type ClozInsecure = Cloz<CorrectnessOnlyPph>;

impl Pph for CorrectnessOnlyPph {
    type Left = u128;
    type Right = u128;
    type Prepared = Vec<u128>;

    fn new(_master: &Key<32>, _bits: u32) -> Self {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| eprintln!("{WARNING}"));
        CorrectnessOnlyPph { _private: () }
    }

    fn descriptor() -> &'static SchemeDescriptor {
        &CLOZ_INSECURE_DESCRIPTOR
    }

    fn hash<R: CryptoRngCore + ?Sized>(&self, _rng: &mut R, u: u128) -> (u128, u128) {
        counter::record(Primitive::Pph, 1);
        (u, u)
    }

    fn hash_left<R: CryptoRngCore + ?Sized>(&self, _rng: &mut R, u: u128) -> u128 {
        counter::record(Primitive::Pph, 1);
        u
    }

    fn prepare(rights: &[u128]) -> Vec<u128> {
        rights.to_vec()
    }

    fn test_succ(left: &u128, rights: &Vec<u128>, j: usize) -> bool {
        counter::record(Primitive::Pph, 1);
        rights.get(j) == Some(&left.wrapping_add(1))
    }

    fn test_pred(left: &u128, rights: &Vec<u128>, j: usize) -> bool {
        counter::record(Primitive::Pph, 1);
        rights.get(j).map(|r| r.wrapping_add(1)) == Some(*left)
    }

    fn left_bits() -> u64 {
        128
    }

    fn right_bits() -> u64 {
        128
    }
}
