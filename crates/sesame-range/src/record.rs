//! Client-side record encryption shared by the protocols.
//!
//! A record (value, payload) reaches the server as
//! AES-256-GCM-SIV(value as 8 big-endian bytes || payload) under a random
//! nonce, with the protocol's name as associated data, so a record sealed
//! for one protocol does not open under another. The server never sees a
//! value in the clear unless a protocol says so (the plaintext baseline).
//!
//! A caller that inserts every (value, payload) pair at most once into
//! the structure a key serves (a table: the payload is a record
//! identifier, which names one version of one record and is never
//! reused) may ask for the *unique* form instead
//! ([`RecordKey::seal_unique`]): the value in the `value_bytes` bytes its
//! width needs, the payload, and the tag, with no stored nonce (28 + 6
//! bytes fewer for a 16-bit value). AES-GCM-SIV under one fixed nonce is
//! a deterministic authenticated encryption (RFC 8452, section 9; Gueron
//! and Lindell, CCS 2015): it reveals whether two sealed plaintexts are
//! equal and nothing else, and here no two are. Its associated data is
//! the protocol's name after a form byte and the value's width, so a
//! record of one form never opens as the other, nor with another width.

use rand_core::CryptoRngCore;
use sesame_core::{Error, Result};
use sesame_crypto::aead::Aes256GcmSiv;
use sesame_crypto::key::Key;
use zeroize::Zeroizing;

use crate::api::Record;

/// The key that seals records.
pub struct RecordKey {
    key: Key<32>,
    aead: Aes256GcmSiv,
}

impl std::fmt::Debug for RecordKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecordKey([redacted])")
    }
}

impl Clone for RecordKey {
    fn clone(&self) -> Self {
        Self::from_key(self.key.clone_secret())
    }
}

impl RecordKey {
    /// A fresh random key.
    pub fn generate(rng: &mut dyn CryptoRngCore) -> Self {
        Self::from_key(Key::generate(rng))
    }

    /// The key `key`.
    pub fn from_key(key: Key<32>) -> Self {
        let aead = Aes256GcmSiv::new(&key);
        RecordKey { key, aead }
    }

    /// The key's bytes, to persist with the client state.
    pub fn to_bytes(&self) -> Zeroizing<[u8; 32]> {
        Zeroizing::new(*self.key.as_bytes())
    }

    /// The key saved by [`RecordKey::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let key = Key::from_slice(bytes)
            .map_err(|_| Error::Malformed("record key is not 32 bytes".into()))?;
        Ok(Self::from_key(key))
    }

    /// Seals (`value`, `data`); `aad` names the protocol.
    pub fn seal(
        &self,
        rng: &mut dyn CryptoRngCore,
        aad: &[u8],
        value: u64,
        data: &[u8],
    ) -> Result<Vec<u8>> {
        let mut plain = Vec::with_capacity(8 + data.len());
        plain.extend_from_slice(&value.to_be_bytes());
        plain.extend_from_slice(data);
        self.aead
            .seal(rng, aad, &plain)
            .map_err(|e| Error::InvalidArgument(e.to_string()))
    }

    /// Opens a sealed record; a wrong key or altered bytes give
    /// [`Error::Crypto`].
    pub fn open(&self, aad: &[u8], sealed: &[u8]) -> Result<Record> {
        let plain = self.aead.open(aad, sealed)?;
        let Some((value, data)) = plain.split_first_chunk::<8>() else {
            return Err(Error::Crypto);
        };
        Ok((u64::from_be_bytes(*value), data.to_vec()))
    }

    /// Bytes the sealed form of a `len`-byte payload takes.
    pub fn sealed_len(len: usize) -> usize {
        8 + len + Aes256GcmSiv::OVERHEAD
    }

    /// Seals (`value`, `data`) in the unique form (module docs): the
    /// value's low `value_bytes` bytes (1 to 8), big-endian, then `data`,
    /// under the fixed nonce, which is not stored. The caller seals each
    /// pair at most once under this key; a value that does not fit in
    /// `value_bytes` bytes is refused.
    pub fn seal_unique(
        &self,
        aad: &[u8],
        value: u64,
        value_bytes: usize,
        data: &[u8],
    ) -> Result<Vec<u8>> {
        let width = unique_width(value_bytes)?;
        if width < 8 && value >> (8 * width) != 0 {
            return Err(Error::InvalidArgument(format!(
                "value {value} does not fit in {width} bytes"
            )));
        }
        let mut plain = Zeroizing::new(Vec::with_capacity(width + data.len()));
        plain.extend_from_slice(&value.to_be_bytes()[8 - width..]);
        plain.extend_from_slice(data);
        let mut sealed = self
            .aead
            .seal_with_nonce(&UNIQUE_NONCE, &unique_aad(width, aad), &plain)
            .map_err(|e| Error::InvalidArgument(e.to_string()))?;
        // The nonce is fixed: the reader puts it back.
        sealed.drain(..UNIQUE_NONCE.len());
        Ok(sealed)
    }

    /// Opens a record sealed by [`RecordKey::seal_unique`] with the same
    /// `value_bytes`; a wrong key, form or width, or altered bytes, give
    /// [`Error::Crypto`].
    pub fn open_unique(&self, aad: &[u8], value_bytes: usize, sealed: &[u8]) -> Result<Record> {
        let width = unique_width(value_bytes).map_err(|_| Error::Crypto)?;
        let mut full = Vec::with_capacity(UNIQUE_NONCE.len() + sealed.len());
        full.extend_from_slice(&UNIQUE_NONCE);
        full.extend_from_slice(sealed);
        let plain = Zeroizing::new(self.aead.open(&unique_aad(width, aad), &full)?);
        let (value, data) = plain.split_at_checked(width).ok_or(Error::Crypto)?;
        let mut be = [0u8; 8];
        be[8 - width..].copy_from_slice(value);
        Ok((u64::from_be_bytes(be), data.to_vec()))
    }

    /// Bytes the unique form of a `len`-byte payload takes with values of
    /// `value_bytes` bytes.
    pub fn unique_sealed_len(value_bytes: usize, len: usize) -> usize {
        value_bytes + len + Aes256GcmSiv::TAG_LEN
    }
}

/// The nonce of every record of the unique form.
const UNIQUE_NONCE: [u8; 12] = [0; 12];

/// The form byte before the protocol's name in the unique form's
/// associated data (the random form's is the name alone, which never
/// starts with it).
const UNIQUE_FORM: u8 = 0xff;

/// The unique form's associated data: the form byte, the value's width
/// (so a record read with another width does not open), then `aad`.
fn unique_aad(width: usize, aad: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + aad.len());
    out.push(UNIQUE_FORM);
    out.push(width as u8);
    out.extend_from_slice(aad);
    out
}

fn unique_width(value_bytes: usize) -> Result<usize> {
    if (1..=8).contains(&value_bytes) {
        Ok(value_bytes)
    } else {
        Err(Error::InvalidArgument(format!(
            "a sealed value takes 1 to 8 bytes, not {value_bytes}"
        )))
    }
}

/// Bytes a value of `bits` bits takes in the unique form.
pub fn value_bytes(bits: u32) -> usize {
    (bits.clamp(1, 64) as usize).div_ceil(8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn records_round_trip_and_reject_tampering() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        let k = RecordKey::generate(&mut rng);
        let sealed = k.seal(&mut rng, b"p", 42, b"hello").unwrap();
        assert_eq!(sealed.len(), RecordKey::sealed_len(5));
        assert_eq!(k.open(b"p", &sealed).unwrap(), (42, b"hello".to_vec()));
        assert!(matches!(k.open(b"q", &sealed), Err(Error::Crypto)));
        let mut bad = sealed.clone();
        bad[15] ^= 1;
        assert!(matches!(k.open(b"p", &bad), Err(Error::Crypto)));
        assert!(matches!(k.open(b"p", &sealed[..10]), Err(Error::Crypto)));
        let other = RecordKey::generate(&mut rng);
        assert!(matches!(other.open(b"p", &sealed), Err(Error::Crypto)));
        let restored = RecordKey::from_bytes(&k.to_bytes()[..]).unwrap();
        assert_eq!(restored.open(b"p", &sealed).unwrap().0, 42);
    }
}
