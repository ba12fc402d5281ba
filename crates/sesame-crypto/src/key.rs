//! Secret keys and key derivation.
//!
//! [`Key<N>`] is the one secret type of this crate: `N` bytes that are wiped
//! when dropped, print as `[redacted]`, compare in constant time and are
//! copied only through [`Key::clone_secret`]. Sub-keys come from a master key
//! through [`Key::derive`] (HKDF-SHA256, RFC 5869) with a label per use, so
//! that no two primitives ever share key material.
//!
//! ```compile_fail
//! # use sesame_crypto::Key;
//! let k = Key::<16>::from_bytes([7; 16]);
//! let copy = k.clone(); // keys are not `Clone`: use `clone_secret()`
//! ```

use core::fmt;

use hkdf::Hkdf;
use rand_core::CryptoRngCore;
use sha2::Sha256;
use subtle::{Choice, ConstantTimeEq};
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::counter::{self, Primitive};
use crate::error::{Error, Result};

/// HKDF salt of [`Key::derive`]; fixes the derivation to this crate and
/// version so that a label reused by another system yields other keys.
const DERIVE_SALT: &[u8] = b"sesame-crypto/derive/v1";

/// A secret key of `N` bytes.
///
/// Wiped on drop, redacted in `Debug`, compared in constant time, and not
/// `Clone`: copies are made with [`Key::clone_secret`] only.
pub struct Key<const N: usize> {
    bytes: [u8; N],
}

/// A 128-bit key (AES-128 PRF, PRG, PRPs, GGM seeds).
pub type Key128 = Key<16>;
/// A 256-bit key (HMAC PRF, AEAD, Bloom filter, keyed hash).
pub type Key256 = Key<32>;

impl<const N: usize> Key<N> {
    /// Length of the key in bytes.
    pub const LEN: usize = N;

    /// Takes the key from an array.
    ///
    /// Arrays are `Copy`: the caller should wipe its own copy.
    pub fn from_bytes(bytes: [u8; N]) -> Self {
        Key { bytes }
    }

    /// Reads the key from a slice of exactly `N` bytes.
    pub fn from_slice(bytes: &[u8]) -> Result<Self> {
        if bytes.len() != N {
            return Err(Error::InvalidLength {
                what: "key",
                expected: N,
                actual: bytes.len(),
            });
        }
        let mut key = Key { bytes: [0; N] };
        key.bytes.copy_from_slice(bytes);
        Ok(key)
    }

    /// Draws a fresh uniformly random key.
    pub fn generate<R: CryptoRngCore + ?Sized>(rng: &mut R) -> Self {
        let mut key = Key { bytes: [0; N] };
        rng.fill_bytes(&mut key.bytes);
        key
    }

    /// The key bytes. Handle with care: whatever copies them must wipe them.
    pub fn as_bytes(&self) -> &[u8; N] {
        &self.bytes
    }

    /// An explicit copy of the secret.
    pub fn clone_secret(&self) -> Self {
        Key { bytes: self.bytes }
    }

    /// Derives an `M`-byte sub-key for the use named by `label`, with
    /// HKDF-SHA256 (extract with a fixed crate salt, expand with `label` as
    /// info). Distinct labels give independent keys.
    ///
    /// Counted as one [`Primitive::Prf`] call. `M` is checked at compile time
    /// to be at most `255 * 32` (the HKDF limit).
    pub fn derive<const M: usize>(&self, label: &str) -> Key<M> {
        const { assert!(M <= 255 * 32, "HKDF-SHA256 output is at most 8160 bytes") };
        counter::record(Primitive::Prf, 1);
        let hk = Hkdf::<Sha256>::new(Some(DERIVE_SALT), &self.bytes);
        let mut out = Key { bytes: [0; M] };
        hk.expand(label.as_bytes(), &mut out.bytes)
            .expect("M <= 255 * 32 is asserted at compile time");
        out
    }
}

impl<const N: usize> Key<N> {
    /// Overwrites the key with zeros: what dropping it does (and what the
    /// tests check).
    pub(crate) fn wipe(&mut self) {
        self.bytes.zeroize();
    }
}

impl<const N: usize> Drop for Key<N> {
    fn drop(&mut self) {
        self.wipe();
    }
}

impl<const N: usize> ZeroizeOnDrop for Key<N> {}

impl<const N: usize> fmt::Debug for Key<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl<const N: usize> ConstantTimeEq for Key<N> {
    fn ct_eq(&self, other: &Self) -> Choice {
        self.bytes.ct_eq(&other.bytes)
    }
}

impl<const N: usize> PartialEq for Key<N> {
    fn eq(&self, other: &Self) -> bool {
        self.ct_eq(other).into()
    }
}

impl<const N: usize> Eq for Key<N> {}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;

    /// What dropping a key runs leaves every byte zero.
    #[test]
    fn wipe_zeroes_every_byte() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(4);
        let mut k = Key::<32>::generate(&mut rng);
        assert!(k.as_bytes().iter().any(|b| *b != 0));
        k.wipe();
        assert_eq!(k.as_bytes(), &[0u8; 32]);
    }

    #[test]
    fn debug_is_redacted() {
        let k = Key::<16>::from_bytes([0xab; 16]);
        assert_eq!(format!("{k:?}"), "[redacted]");
        assert_eq!(format!("{k:#?}"), "[redacted]");
    }

    #[test]
    fn from_slice_checks_length() {
        assert!(Key::<16>::from_slice(&[0; 16]).is_ok());
        assert_eq!(
            Key::<16>::from_slice(&[0; 15]).err(),
            Some(Error::InvalidLength {
                what: "key",
                expected: 16,
                actual: 15
            })
        );
        assert!(Key::<32>::from_slice(&[]).is_err());
    }

    #[test]
    fn equality_and_clone_secret() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        let a = Key::<32>::generate(&mut rng);
        let b = a.clone_secret();
        assert_eq!(a, b);
        assert_ne!(a, Key::<32>::generate(&mut rng));
    }

    #[test]
    fn derive_separates_labels() {
        let master = Key::<32>::from_bytes([1; 32]);
        let a: Key<16> = master.derive("a");
        let b: Key<16> = master.derive("b");
        assert_ne!(a, b);
        let a2: Key<16> = master.derive("a");
        assert_eq!(a, a2);
        // A longer output extends the shorter one (HKDF expand property).
        let a32: Key<32> = master.derive("a");
        assert_eq!(&a32.as_bytes()[..16], a.as_bytes());
    }

    /// Outputs computed outside this crate, with Python's `hmac` and
    /// `hashlib` following RFC 5869 (that oracle reproduces RFC 5869's test
    /// case 1), salt `sesame-crypto/derive/v1`, master key `00 01 ... 1f`.
    #[test]
    fn derive_is_hkdf_sha256_with_the_crate_salt() {
        let master = Key::<32>::from_bytes(core::array::from_fn(|i| i as u8));
        let clww: Key<16> = master.derive("sesame-ore/clww/v2/bits=32/prf");
        assert_eq!(
            hex::encode(clww.as_bytes()),
            "fcfd1e43e6def79b32f88f305cb37550"
        );
        let a: Key<48> = master.derive("a");
        assert_eq!(
            hex::encode(a.as_bytes()),
            "74eb25e13323183d211face7f015c915554b63ceb7b0f3d610d35852fec8c286\
             3ba3f55815b0e927cfc9417b231d3140"
        );
    }
}
