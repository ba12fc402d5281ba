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
//!
//! A record short enough may also travel in one enciphered block
//! ([`RecordKey::seal_block`], the *block form*): AES-256 under a key
//! derived from the record key, over the value, the payload and at least
//! six bytes of fixed redundancy. On unique inputs the block is a
//! deterministic encryption that reveals nothing, and a forged block
//! opens with probability at most 2^-48 ("encode-then-encipher", Bellare
//! and Rogaway, ASIACRYPT 2000). Being pseudorandom and never repeated, the
//! block can serve as a Lewi-Wu right half's nonce, which is how the B+
//! tree stores such a record in no bytes of its own
//! (`docs/schemes/bplus_ore.md`, "Records in the nonce").

use rand_core::CryptoRngCore;
use sesame_core::{Error, Result};
use sesame_crypto::aead::Aes256GcmSiv;
use sesame_crypto::key::Key;
use sesame_crypto::prp::Aes256Block;
use zeroize::Zeroizing;

use crate::api::Record;

/// The key that seals records.
pub struct RecordKey {
    key: Key<32>,
    aead: Aes256GcmSiv,
    block: Aes256Block,
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
        let block = Aes256Block::new(&key.derive(BLOCK_KEY_LABEL));
        RecordKey { key, aead, block }
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
        let plain = Zeroizing::new(self.aead.open_with_nonce(
            &UNIQUE_NONCE,
            &unique_aad(width, aad),
            sealed,
        )?);
        let (value, data) = plain.split_at_checked(width).ok_or(Error::Crypto)?;
        let mut be = [0u8; 8];
        be[8 - width..].copy_from_slice(value);
        Ok((u64::from_be_bytes(be), data.to_vec()))
    }

    /// Seals (`value`, `data`) in the block form (module docs): one AES-256
    /// block over a form byte, the value's width, the payload's length,
    /// zeros, then the value's low `value_bytes` bytes and `data`. The
    /// caller seals each pair at most once under this key; a pair longer
    /// than [`BLOCK_MESSAGE`] bytes, or a value that does not fit in
    /// `value_bytes` bytes, is refused.
    pub fn seal_block(&self, value: u64, value_bytes: usize, data: &[u8]) -> Result<[u8; 16]> {
        let width = unique_width(value_bytes)?;
        if width < 8 && value >> (8 * width) != 0 {
            return Err(Error::InvalidArgument(format!(
                "value {value} does not fit in {width} bytes"
            )));
        }
        if width + data.len() > BLOCK_MESSAGE {
            return Err(Error::InvalidArgument(format!(
                "a record in one block takes at most {BLOCK_MESSAGE} bytes of value and \
                 payload, not {}",
                width + data.len()
            )));
        }
        let mut plain = Zeroizing::new(block_redundancy(width, data.len()));
        let start = 16 - width - data.len();
        plain[start..start + width].copy_from_slice(&value.to_be_bytes()[8 - width..]);
        plain[start + width..].copy_from_slice(data);
        Ok(self.block.encipher(&plain))
    }

    /// Opens a block sealed by [`RecordKey::seal_block`] with the same
    /// `value_bytes` and a payload of `data_len` bytes; a block that does
    /// not decipher to the redundancy (a forged or altered one, another
    /// key, width or length) gives [`Error::Crypto`].
    pub fn open_block(&self, value_bytes: usize, data_len: usize, block: &[u8]) -> Result<Record> {
        let width = unique_width(value_bytes).map_err(|_| Error::Crypto)?;
        let block: &[u8; 16] = block.try_into().map_err(|_| Error::Crypto)?;
        if width + data_len > BLOCK_MESSAGE {
            return Err(Error::Crypto);
        }
        let plain = Zeroizing::new(self.block.decipher(block));
        let start = 16 - width - data_len;
        let expected = block_redundancy(width, data_len);
        if plain[..start] != expected[..start] {
            return Err(Error::Crypto);
        }
        let mut be = [0u8; 8];
        be[8 - width..].copy_from_slice(&plain[start..start + width]);
        Ok((u64::from_be_bytes(be), plain[start + width..].to_vec()))
    }

    /// Bytes the unique form of a `len`-byte payload takes with values of
    /// `value_bytes` bytes.
    pub fn unique_sealed_len(value_bytes: usize, len: usize) -> usize {
        value_bytes + len + Aes256GcmSiv::TAG_LEN
    }
}

/// Most bytes of value and payload in one block of the block form: the
/// other six (at least) are redundancy, 48 bits a forgery must hit.
pub const BLOCK_MESSAGE: usize = 10;

/// The HKDF label of the block form's key, derived from the record key.
const BLOCK_KEY_LABEL: &str = "sesame-range record block v1";

/// The block form's first byte.
const BLOCK_FORM: u8 = 0xfe;

/// A block of the block form before its message: the form byte, the
/// value's width, the payload's length, then zeros.
fn block_redundancy(width: usize, data_len: usize) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[0] = BLOCK_FORM;
    out[1] = width as u8;
    out[2] = data_len as u8;
    out
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

    /// A record in one block opens as sealed, with the key restored, and
    /// every flipped bit, another width or length, a truncation and
    /// another key are refused; a message over ten bytes is refused.
    #[test]
    fn blocks_round_trip_and_refuse_every_change() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(2);
        let k = RecordKey::generate(&mut rng);
        let id = 77u64.to_be_bytes();
        let block = k.seal_block(513, 2, &id).unwrap();
        assert_eq!(k.open_block(2, 8, &block).unwrap(), (513, id.to_vec()));
        let restored = RecordKey::from_bytes(&k.to_bytes()[..]).unwrap();
        assert_eq!(restored.open_block(2, 8, &block).unwrap().0, 513);
        assert_ne!(k.seal_block(514, 2, &id).unwrap(), block);
        for bit in 0..128 {
            let mut bad = block;
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(
                matches!(k.open_block(2, 8, &bad), Err(Error::Crypto)),
                "bit {bit}"
            );
        }
        assert!(matches!(k.open_block(1, 8, &block), Err(Error::Crypto)));
        assert!(matches!(k.open_block(2, 7, &block), Err(Error::Crypto)));
        assert!(matches!(
            k.open_block(2, 8, &block[..15]),
            Err(Error::Crypto)
        ));
        let other = RecordKey::generate(&mut rng);
        assert!(matches!(other.open_block(2, 8, &block), Err(Error::Crypto)));
        assert!(k.seal_block(1, 3, &id).is_err());
        assert!(k.seal_block(1 << 16, 2, &id).is_err());
    }
}
