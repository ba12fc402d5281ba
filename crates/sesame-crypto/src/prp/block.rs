//! AES-256 as a keyed permutation of 16-byte blocks, both directions.

use core::fmt;

use aes::cipher::{BlockDecrypt, BlockEncrypt, KeyInit};
use aes::Aes256;
use zeroize::ZeroizeOnDrop;

use crate::counter::{self, Primitive};
use crate::key::Key;

/// AES-256 on one 16-byte block: a pseudorandom permutation of
/// `{0,1}^128` with its inverse. Enciphering a block that carries a few
/// bytes of fixed redundancy besides a unique message is an authenticated
/// encryption of that message ("encode-then-encipher", Bellare and
/// Rogaway, ASIACRYPT 2000): a forged block deciphers to the redundancy
/// with probability `2^-(8 r)` for `r` bytes of it. Keeps the expanded
/// key schedules (wiped on drop); each call is one counted
/// [`Primitive::Prp`].
pub struct Aes256Block {
    cipher: Aes256,
}

impl Aes256Block {
    /// Expands the key schedules of `key`.
    pub fn new(key: &Key<32>) -> Self {
        Aes256Block {
            cipher: Aes256::new(key.as_bytes().into()),
        }
    }

    /// The image of `block`.
    pub fn encipher(&self, block: &[u8; 16]) -> [u8; 16] {
        counter::record(Primitive::Prp, 1);
        let mut out = *block;
        self.cipher.encrypt_block((&mut out).into());
        out
    }

    /// The preimage of `block`.
    pub fn decipher(&self, block: &[u8; 16]) -> [u8; 16] {
        counter::record(Primitive::Prp, 1);
        let mut out = *block;
        self.cipher.decrypt_block((&mut out).into());
        out
    }
}

impl ZeroizeOnDrop for Aes256Block {}

impl fmt::Debug for Aes256Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Aes256Block([redacted])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FIPS-197, appendix C.3: the AES-256 example vector, both ways.
    #[test]
    fn it_is_aes_256_both_ways() {
        let key: [u8; 32] = core::array::from_fn(|i| i as u8);
        let plain: [u8; 16] = core::array::from_fn(|i| (i as u8) * 0x11);
        let expected = [
            0x8e, 0xa2, 0xb7, 0xca, 0x51, 0x67, 0x45, 0xbf, 0xea, 0xfc, 0x49, 0x90, 0x4b, 0x49,
            0x60, 0x89,
        ];
        let b = Aes256Block::new(&Key::from_slice(&key).unwrap());
        assert_eq!(b.encipher(&plain), expected);
        assert_eq!(b.decipher(&expected), plain);
    }
}
