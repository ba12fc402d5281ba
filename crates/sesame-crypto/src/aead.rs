//! Authenticated encryption: AES-256-GCM-SIV (RFC 8452).
//!
//! Records are sealed under random 96-bit nonces. With many records under
//! one key, random nonces collide with probability about `q^2 / 2^97`, and a
//! client that crashes and retries may reuse a nonce (or an RNG state) by
//! accident. Plain GCM loses confidentiality of both messages and the
//! authentication key on a repeated nonce; GCM-SIV derives the IV from the
//! message (synthetic IV), so a repeat reveals only whether two messages
//! with the same nonce and associated data are equal. AES-256 keeps a
//! margin for the many records a store may hold. The backing crate is
//! RustCrypto `aes-gcm-siv`.
//!
//! Each `seal` or `open` is one [`Primitive::Ske`] call.

use core::fmt;

use aes_gcm_siv::aead::{AeadInPlace, KeyInit};
use rand_core::CryptoRngCore;
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::counter::{self, Primitive};
use crate::error::{Error, Result};
use crate::key::Key;

/// Largest plaintext and associated data accepted by AES-GCM-SIV: `2^36`
/// bytes (RFC 8452, section 6).
pub const AEAD_MAX_LEN: u64 = 1 << 36;

/// Authenticated encryption with associated data and random nonces.
pub trait Aead {
    /// The key type.
    type Key;
    /// Nonce length in bytes (prepended to the ciphertext).
    const NONCE_LEN: usize;
    /// Tag length in bytes (appended to the ciphertext).
    const TAG_LEN: usize;

    /// Keys the scheme.
    fn new(key: &Self::Key) -> Self
    where
        Self: Sized;

    /// Encrypts `plaintext` bound to `aad` under a fresh random nonce and
    /// returns `nonce || ciphertext || tag`. Fails only if an input exceeds
    /// the scheme's length limit.
    fn seal<R: CryptoRngCore + ?Sized>(
        &self,
        rng: &mut R,
        aad: &[u8],
        plaintext: &[u8],
    ) -> Result<Vec<u8>>;

    /// Decrypts the output of [`seal`](Self::seal); fails with the opaque
    /// [`Error::Decryption`] if anything was altered or the key or `aad`
    /// differ.
    fn open(&self, aad: &[u8], ciphertext: &[u8]) -> Result<Vec<u8>>;
}

/// AES-256-GCM-SIV with a 96-bit random nonce and 128-bit tag.
///
/// Ciphertexts are `nonce (12) || encrypted plaintext || tag (16)`, so they
/// are 28 bytes longer than the plaintext. Key schedules are wiped on drop.
pub struct Aes256GcmSiv {
    cipher: aes_gcm_siv::Aes256GcmSiv,
}

impl Aes256GcmSiv {
    /// Nonce length in bytes.
    pub const NONCE_LEN: usize = 12;
    /// Tag length in bytes.
    pub const TAG_LEN: usize = 16;
    /// Ciphertext expansion in bytes.
    pub const OVERHEAD: usize = Self::NONCE_LEN + Self::TAG_LEN;

    /// Keys the cipher.
    pub fn new(key: &Key<32>) -> Self {
        Aes256GcmSiv {
            cipher: aes_gcm_siv::Aes256GcmSiv::new(key.as_bytes().into()),
        }
    }

    /// Reads a 32-byte key from a slice.
    pub fn from_slice(key: &[u8]) -> Result<Self> {
        Ok(Self::new(&Key::from_slice(key)?))
    }

    /// Seals under a random nonce drawn from `rng`; one Ske call.
    pub fn seal<R: CryptoRngCore + ?Sized>(
        &self,
        rng: &mut R,
        aad: &[u8],
        plaintext: &[u8],
    ) -> Result<Vec<u8>> {
        let mut nonce = [0u8; Self::NONCE_LEN];
        rng.fill_bytes(&mut nonce);
        self.seal_with_nonce(&nonce, aad, plaintext)
    }

    /// Seals under a caller-chosen nonce; one Ske call. For known-answer
    /// tests and deterministic encryption: reusing a nonce with the same
    /// `aad` reveals whether two plaintexts are equal (and nothing else).
    pub fn seal_with_nonce(
        &self,
        nonce: &[u8; 12],
        aad: &[u8],
        plaintext: &[u8],
    ) -> Result<Vec<u8>> {
        check_len("plaintext", plaintext)?;
        check_len("associated data", aad)?;
        counter::record(Primitive::Ske, 1);
        let mut out = Vec::with_capacity(Self::OVERHEAD + plaintext.len());
        out.extend_from_slice(nonce);
        out.extend_from_slice(plaintext);
        let tag = self
            .cipher
            .encrypt_in_place_detached(nonce.into(), aad, &mut out[Self::NONCE_LEN..])
            .map_err(|_| Error::TooLong {
                what: "plaintext or associated data",
                max: AEAD_MAX_LEN,
            })?;
        out.extend_from_slice(&tag);
        Ok(out)
    }

    /// Opens `nonce || ciphertext || tag`; one Ske call. Any failure
    /// (too short, wrong key, wrong `aad`, altered bytes) is the same
    /// opaque [`Error::Decryption`].
    pub fn open(&self, aad: &[u8], ciphertext: &[u8]) -> Result<Vec<u8>> {
        counter::record(Primitive::Ske, 1);
        let Some((nonce, rest)) = ciphertext.split_first_chunk::<12>() else {
            return Err(Error::Decryption);
        };
        let Some((body, tag)) = rest.split_last_chunk::<16>() else {
            return Err(Error::Decryption);
        };
        let mut out = body.to_vec();
        match self
            .cipher
            .decrypt_in_place_detached(nonce.into(), aad, &mut out, tag.into())
        {
            Ok(()) => Ok(out),
            Err(_) => {
                out.zeroize();
                Err(Error::Decryption)
            }
        }
    }
}

fn check_len(what: &'static str, data: &[u8]) -> Result<()> {
    if data.len() as u64 > AEAD_MAX_LEN {
        return Err(Error::TooLong {
            what,
            max: AEAD_MAX_LEN,
        });
    }
    Ok(())
}

impl Aead for Aes256GcmSiv {
    type Key = Key<32>;
    const NONCE_LEN: usize = 12;
    const TAG_LEN: usize = 16;

    fn new(key: &Key<32>) -> Self {
        Aes256GcmSiv::new(key)
    }

    fn seal<R: CryptoRngCore + ?Sized>(
        &self,
        rng: &mut R,
        aad: &[u8],
        plaintext: &[u8],
    ) -> Result<Vec<u8>> {
        Aes256GcmSiv::seal(self, rng, aad, plaintext)
    }

    fn open(&self, aad: &[u8], ciphertext: &[u8]) -> Result<Vec<u8>> {
        Aes256GcmSiv::open(self, aad, ciphertext)
    }
}

/// Key schedules are wiped by `aes` (built with its `zeroize` feature).
impl ZeroizeOnDrop for Aes256GcmSiv {}

impl fmt::Debug for Aes256GcmSiv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Aes256GcmSiv([redacted])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ciphertexts_are_rejected_opaquely() {
        let a = Aes256GcmSiv::new(&Key::from_bytes([4; 32]));
        for len in 0..Aes256GcmSiv::OVERHEAD {
            assert_eq!(a.open(b"", &vec![0; len]), Err(Error::Decryption));
        }
        assert_eq!(
            a.open(b"", &[0; Aes256GcmSiv::OVERHEAD]),
            Err(Error::Decryption)
        );
        assert_eq!(format!("{a:?}"), "Aes256GcmSiv([redacted])");
    }
}
