//! The plaintext baseline ("no encryption" in seed 004): the identity
//! function, so that every experiment has a floor to compare with.

use core::cmp::Ordering;

use rand_core::CryptoRngCore;
use serde::{Deserialize, Serialize};
use sesame_core::{BackwardPrivacy, QueryKind, Result, SchemeDescriptor, SchemeKind};
use sesame_crypto::Key;
use zeroize::Zeroizing;

use crate::api::{check_bits, check_plaintext, OreScheme};
use crate::saved;

/// Descriptor of the plaintext baseline.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "plain",
    title: "No encryption (plaintext baseline)",
    citation: "Baseline of D. Bogatov, G. Kollios, L. Reyzin. A Comparative Evaluation of \
               Order-Revealing Encryption Schemes and Secure Range-Query Protocols. VLDB 2019",
    kind: SchemeKind::Ope,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Range],
    leakage: "Everything: ciphertexts are the plaintexts.",
    doc: "docs/schemes/plain_ore.md",
};

/// The identity "encryption" of `bits`-bit integers.
#[derive(Clone, Debug)]
pub struct Plain {
    bits: u32,
}

/// A plaintext standing in for a ciphertext.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PlainCiphertext(pub u64);

/// The public comparison of plaintext-baseline ciphertexts: as numbers.
#[derive(Clone, Copy, Debug, Default)]
pub struct PlainComparator;

impl crate::api::Comparator for PlainComparator {
    type Ciphertext = PlainCiphertext;
    type Left = PlainCiphertext;
    type Right = PlainCiphertext;

    fn left(c: &PlainCiphertext) -> &PlainCiphertext {
        c
    }
    fn right(c: &PlainCiphertext) -> PlainCiphertext {
        *c
    }
    fn compare(&self, left: &PlainCiphertext, right: &PlainCiphertext) -> Result<Ordering> {
        Ok(left.0.cmp(&right.0))
    }
}

impl Plain {
    /// The baseline for `bits`-bit plaintexts (`1..=64`).
    pub fn new(bits: u32) -> Result<Self> {
        check_bits(bits)?;
        Ok(Plain { bits })
    }
}

impl OreScheme for Plain {
    type Ciphertext = PlainCiphertext;

    descriptor_and_bits!(bits);

    fn encrypt<R: CryptoRngCore + ?Sized>(
        &mut self,
        _rng: &mut R,
        x: u64,
    ) -> Result<PlainCiphertext> {
        check_plaintext(x, self.bits)?;
        Ok(PlainCiphertext(x))
    }

    fn compare(&self, a: &PlainCiphertext, b: &PlainCiphertext) -> Result<Ordering> {
        crate::api::Comparator::compare(&PlainComparator, a, b)
    }

    fn can_decrypt(&self) -> bool {
        true
    }

    fn decrypt(&self, c: &PlainCiphertext) -> Result<u64> {
        check_plaintext(c.0, self.bits)?;
        Ok(c.0)
    }

    fn ciphertext_bits(&self, _c: &PlainCiphertext) -> u64 {
        u64::from(self.bits)
    }

    fn save(&self) -> Result<Zeroizing<Vec<u8>>> {
        saved::save(DESCRIPTOR.name, self.bits, &Key::from_bytes([0; 32]), ())
    }

    fn restore(bytes: &[u8]) -> Result<Self> {
        let s: saved::Saved<u32, ()> = saved::restore(DESCRIPTOR.name, bytes)?;
        Plain::new(s.params)
    }
}
