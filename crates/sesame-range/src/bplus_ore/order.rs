//! Server-side comparison: each ORE scheme's keyless [`Comparator`] as
//! the tree runs it, built for a [`Layout`].

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};
use sesame_core::{Error, Result};
use sesame_ore::bclo::BcloComparator;
use sesame_ore::cloz::{ClozComparator, PairingPph, Pph};
use sesame_ore::clww::ClwwComparator;
use sesame_ore::insecure::plain::PlainComparator;
use sesame_ore::insecure::CorrectnessOnlyPph;
use sesame_ore::lewi_wu::{LewiWuComparator, LewiWuParams};
use sesame_ore::Comparator;

use super::{len_prefix, varint_bytes, Layout};

// ---------------------------------------------------------------------
// Server-side comparison.

/// A scheme's public comparison as the tree runs it: the scheme's
/// [`Comparator`] (from `sesame-ore`, keyless), built for a layout. An
/// insertion sends a [`Comparator::Ciphertext`], the tree stores its
/// [`Comparator::right`] part, and a query sends [`Comparator::Left`]
/// endpoints.
pub trait ServerOrder: Comparator + Sized {
    /// The comparison for `layout`.
    fn new(layout: &Layout) -> Result<Self>;

    /// Bound on the encoded size of a stored key.
    fn key_bytes(layout: &Layout) -> usize;

    /// Applies a re-encoding (sorted `(old, new)` pairs) to a stored key;
    /// only FH-OPE has re-encodings.
    fn remap(_stored: &mut Self::Right, _changes: &[(u64, u64)]) -> Result<()> {
        Err(Error::Protocol("this scheme has no re-encoding".into()))
    }

    /// The 16-byte nonce a stored key carries, for schemes whose client
    /// may choose it and carry a record in it ([`super::NONCE_RECORDS`]):
    /// Lewi-Wu's right halves. `None` for the others.
    fn nonce(_stored: &Self::Right) -> Option<&[u8; 16]> {
        None
    }

    /// Whether [`ServerOrder::nonce`] gives every stored key's nonce.
    fn holds_nonces() -> bool {
        false
    }
}

impl ServerOrder for PlainComparator {
    fn new(_layout: &Layout) -> Result<Self> {
        Ok(PlainComparator)
    }
    fn key_bytes(layout: &Layout) -> usize {
        varint_bytes(layout.bits)
    }
}

impl ServerOrder for BcloComparator {
    fn new(_layout: &Layout) -> Result<Self> {
        Ok(BcloComparator)
    }
    fn key_bytes(layout: &Layout) -> usize {
        varint_bytes(layout.extra)
    }
}

impl ServerOrder for ClwwComparator {
    fn new(layout: &Layout) -> Result<Self> {
        ClwwComparator::new(layout.bits)
    }
    fn key_bytes(layout: &Layout) -> usize {
        varint_bytes(2 * layout.bits)
    }
}

impl ServerOrder for LewiWuComparator {
    fn new(layout: &Layout) -> Result<Self> {
        LewiWuComparator::new(LewiWuParams {
            bits: layout.bits,
            block_bits: layout.extra,
        })
    }
    fn key_bytes(layout: &Layout) -> usize {
        let block = layout.extra.clamp(1, 16);
        let slots = 1usize << block;
        let trits = (layout.bits.div_ceil(block) as usize * slots).div_ceil(4);
        16 + len_prefix(trits) + trits
    }
    fn nonce(stored: &Self::Right) -> Option<&[u8; 16]> {
        Some(&stored.nonce)
    }
    fn holds_nonces() -> bool {
        true
    }
}

/// A CLOZ hash function with the encoded size of its right hashes.
pub trait ClozHash: Pph + 'static {
    /// Bound on the encoded size of one right hash.
    const RIGHT_BYTES: usize;
}

impl ClozHash for PairingPph {
    /// Four compressed G2 points, each with a length byte.
    const RIGHT_BYTES: usize = 4 * 97;
}

impl ClozHash for CorrectnessOnlyPph {
    /// A `u128` varint.
    const RIGHT_BYTES: usize = 19;
}

impl<P: ClozHash> ServerOrder for ClozComparator<P> {
    fn new(layout: &Layout) -> Result<Self> {
        ClozComparator::new(layout.bits)
    }
    fn key_bytes(layout: &Layout) -> usize {
        let n = layout.bits as usize;
        len_prefix(n) + n * P::RIGHT_BYTES
    }
}

/// An FH-OPE number as the tree stores it. The client sends every
/// re-encoding to the server, which rewrites everything it stores, so the
/// epoch that [`sesame_ore::fh_ope::FhOpeCiphertext`] carries is not
/// needed here (and is not sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FhOpeNumber(pub u64);

/// FH-OPE: ciphertexts are order-preserving integers (unique per
/// insertion); query bounds come from the client's state.
#[derive(Clone, Copy, Debug, Default)]
pub struct FhOpeOrder;

impl Comparator for FhOpeOrder {
    type Ciphertext = FhOpeNumber;
    type Left = FhOpeNumber;
    type Right = FhOpeNumber;

    fn left(c: &FhOpeNumber) -> &FhOpeNumber {
        c
    }
    fn right(c: &FhOpeNumber) -> FhOpeNumber {
        *c
    }
    fn compare(&self, left: &FhOpeNumber, right: &FhOpeNumber) -> Result<Ordering> {
        Ok(left.0.cmp(&right.0))
    }
}

impl ServerOrder for FhOpeOrder {
    fn new(_layout: &Layout) -> Result<Self> {
        Ok(FhOpeOrder)
    }
    fn key_bytes(layout: &Layout) -> usize {
        varint_bytes(layout.extra)
    }
    fn remap(stored: &mut FhOpeNumber, changes: &[(u64, u64)]) -> Result<()> {
        if let Ok(i) = changes.binary_search_by_key(&stored.0, |c| c.0) {
            if let Some(&(_, new)) = changes.get(i) {
                stored.0 = new;
            }
        }
        Ok(())
    }
}
