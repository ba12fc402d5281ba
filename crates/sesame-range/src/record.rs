//! Client-side record encryption shared by the protocols.
//!
//! A record (value, payload) reaches the server as
//! AES-256-GCM-SIV(value as 8 big-endian bytes || payload) under a random
//! nonce, with the protocol's name as associated data, so a record sealed
//! for one protocol does not open under another. The server never sees a
//! value in the clear unless a protocol says so (the plaintext baseline).

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
