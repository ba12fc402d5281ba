//! SHA-256 and a domain-separated random oracle.
//!
//! [`ro`] models a random oracle `H_domain(parts...)`: SHA-256 over an
//! injective encoding of the domain label and the parts, so that distinct
//! `(domain, parts)` never hash the same input:
//!
//! ```text
//! "sesame-ro/v1" || u64be(len(domain)) || domain || u64be(#parts)
//!                || u64be(len(part_1)) || part_1 || ... || u64be(len(part_k)) || part_k
//! ```
//!
//! [`KeyedHash`] is the keyed variant (HMAC-SHA256 over the same encoding).
//! Every evaluation is one [`Primitive::Hash`] call.
//!
//! [`Sha256Midstate`] is SHA-256 resumed after one 64-byte block: HMAC's
//! inner and outer hashes from their keyed states, computed once per key
//! (`prf::HmacPrf`) and held as plain words that are wiped on drop.

use core::fmt;

use hmac::Mac;
use sha2::digest::generic_array::GenericArray;
use sha2::Digest;
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::counter::{self, Primitive};
use crate::key::Key;
use crate::prf::HmacPrf;

/// Digest length of SHA-256 in bytes.
pub const DIGEST_LEN: usize = 32;

/// Prefix of every random-oracle input: separates [`ro`] from plain
/// [`sha256`] of attacker-chosen data.
const RO_TAG: &[u8] = b"sesame-ro/v1";

/// A hash function with a fixed output size.
pub trait HashFunction {
    /// The digest.
    type Output;

    /// Hashes `data`; one counted Hash call.
    fn digest(data: &[u8]) -> Self::Output;
}

/// SHA-256 (FIPS 180-4), backed by RustCrypto `sha2` (SHA-NI when present).
#[derive(Clone, Copy, Debug, Default)]
pub struct Sha256;

impl HashFunction for Sha256 {
    type Output = [u8; 32];

    fn digest(data: &[u8]) -> [u8; 32] {
        sha256(data)
    }
}

/// SHA-256 of `data`; one Hash call.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    counter::record(Primitive::Hash, 1);
    sha2::Sha256::digest(data).into()
}

/// SHA-256's initial hash value (FIPS 180-4, section 5.3.3).
const SHA256_IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// The SHA-256 state after one 64-byte block, from which the hash of
/// that block followed by any message is finished with the message's
/// compressions alone: HMAC's keyed inner and outer states (the key XOR
/// `ipad` or `opad`), so that an evaluation costs two compressions fewer
/// than hashing the padded key again. Not counted (its callers count).
/// Wiped on drop.
#[derive(Clone)]
pub(crate) struct Sha256Midstate([u32; 8]);

impl Sha256Midstate {
    /// The state after `block`.
    pub(crate) fn after(block: &[u8; 64]) -> Self {
        let mut state = SHA256_IV;
        sha2::compress256(&mut state, &[*GenericArray::from_slice(block)]);
        Sha256Midstate(state)
    }

    /// SHA-256 of the block given to [`after`](Self::after) followed by the
    /// concatenation of `parts`.
    pub(crate) fn finish(&self, parts: &[&[u8]]) -> [u8; 32] {
        let mut state = self.0;
        let mut buf = [0u8; 64];
        let mut fill = 0;
        let mut total = 64u64;
        for part in parts {
            total += part.len() as u64;
            let mut rest: &[u8] = part;
            if fill > 0 {
                let take = (64 - fill).min(rest.len());
                buf[fill..fill + take].copy_from_slice(&rest[..take]);
                fill += take;
                rest = &rest[take..];
                if fill < 64 {
                    continue;
                }
                sha2::compress256(&mut state, &[*GenericArray::from_slice(&buf)]);
            }
            let mut blocks = rest.chunks_exact(64);
            for block in &mut blocks {
                sha2::compress256(&mut state, &[*GenericArray::from_slice(block)]);
            }
            let tail = blocks.remainder();
            buf[..tail.len()].copy_from_slice(tail);
            fill = tail.len();
        }
        // Padding: 0x80, zeros, the length in bits (big-endian) at the end
        // of the last block.
        buf[fill] = 0x80;
        buf[fill + 1..].fill(0);
        if fill >= 56 {
            sha2::compress256(&mut state, &[*GenericArray::from_slice(&buf)]);
            buf.fill(0);
        }
        buf[56..].copy_from_slice(&(total * 8).to_be_bytes());
        sha2::compress256(&mut state, &[*GenericArray::from_slice(&buf)]);
        let mut out = [0u8; 32];
        for (bytes, word) in out.chunks_exact_mut(4).zip(state) {
            bytes.copy_from_slice(&word.to_be_bytes());
        }
        buf.zeroize();
        state.zeroize();
        out
    }

    /// Overwrites the state with zeros: what dropping it does.
    pub(crate) fn wipe(&mut self) {
        self.0.zeroize();
    }

    /// Whether the state is all zeros (for the wipe tests).
    #[cfg(test)]
    pub(crate) fn is_zero(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }
}

impl Drop for Sha256Midstate {
    fn drop(&mut self) {
        self.wipe();
    }
}

/// Feeds the injective encoding of `(domain, parts)` to `update`.
fn encode(domain: &str, parts: &[&[u8]], mut update: impl FnMut(&[u8])) {
    update(RO_TAG);
    update(&(domain.len() as u64).to_be_bytes());
    update(domain.as_bytes());
    update(&(parts.len() as u64).to_be_bytes());
    for p in parts {
        update(&(p.len() as u64).to_be_bytes());
        update(p);
    }
}

/// The random oracle for `domain` on `parts`; one Hash call.
pub fn ro(domain: &str, parts: &[&[u8]]) -> [u8; 32] {
    counter::record(Primitive::Hash, 1);
    let mut h = sha2::Sha256::new();
    encode(domain, parts, |b| h.update(b));
    h.finalize().into()
}

/// A keyed, domain-separated hash: HMAC-SHA256 over the encoding of [`ro`].
///
/// Use where the hash must be unpredictable to anyone without the key
/// (keyed tokens, keyed Bloom positions). The key is wiped on drop.
pub struct KeyedHash {
    prf: HmacPrf,
}

impl KeyedHash {
    /// Keys the hash.
    pub fn new(key: &Key<32>) -> Self {
        KeyedHash {
            prf: HmacPrf::new(key),
        }
    }

    /// The keyed hash of `parts` in `domain`; one Hash call.
    pub fn hash(&self, domain: &str, parts: &[&[u8]]) -> [u8; 32] {
        counter::record(Primitive::Hash, 1);
        let mut mac = self.prf.mac_uncounted();
        encode(domain, parts, |b| mac.update(b));
        mac.finalize().into_bytes().into()
    }
}

/// The key lives in an `HmacPrf`, which wipes it.
impl ZeroizeOnDrop for KeyedHash {}

impl fmt::Debug for KeyedHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyedHash([redacted])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_is_unambiguous() {
        let a = ro("d", &[b"ab", b"c"]);
        assert_ne!(a, ro("d", &[b"a", b"bc"]));
        assert_ne!(a, ro("d", &[b"abc"]));
        assert_ne!(a, ro("d", &[b"ab", b"c", b""]));
        assert_ne!(a, ro("e", &[b"ab", b"c"]));
        assert_ne!(ro("", &[b"x"]), ro("x", &[]));
        assert_eq!(a, ro("d", &[b"ab", b"c"]));
    }

    #[test]
    fn ro_is_sha256_of_the_encoding() {
        let mut enc = Vec::new();
        encode("dom", &[b"p"], |b| enc.extend_from_slice(b));
        let mut expect = b"sesame-ro/v1".to_vec();
        expect.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 3]);
        expect.extend_from_slice(b"dom");
        expect.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
        expect.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
        expect.extend_from_slice(b"p");
        assert_eq!(enc, expect);
        assert_eq!(ro("dom", &[b"p"]), sha256(&enc));
    }

    /// Resuming after a block gives SHA-256 of the block and the message,
    /// for messages of every length across three blocks, cut into parts
    /// at every place.
    #[test]
    fn midstate_finishes_as_sha256() {
        let block: [u8; 64] = core::array::from_fn(|i| (i * 7 + 1) as u8);
        let mid = Sha256Midstate::after(&block);
        let message: Vec<u8> = (0..200u32).map(|i| (i * 13 + 5) as u8).collect();
        for len in 0..message.len() {
            let m = &message[..len];
            let mut whole = block.to_vec();
            whole.extend_from_slice(m);
            let expected: [u8; 32] = sha2::Sha256::digest(&whole).into();
            assert_eq!(mid.finish(&[m]), expected, "length {len}");
            let cut = len * 5 / 7;
            let (a, b) = m.split_at(cut);
            let (b, c) = b.split_at(b.len() / 2);
            assert_eq!(mid.finish(&[a, &[], b, c]), expected, "length {len}");
        }
        let mut wiped = mid.clone();
        wiped.wipe();
        assert!(wiped.is_zero() && !mid.is_zero());
    }

    #[test]
    fn keyed_hash_depends_on_key() {
        let a = KeyedHash::new(&Key::from_bytes([1; 32]));
        let b = KeyedHash::new(&Key::from_bytes([2; 32]));
        assert_ne!(a.hash("d", &[b"x"]), b.hash("d", &[b"x"]));
        assert_ne!(a.hash("d", &[b"x"]), ro("d", &[b"x"]));
        assert_eq!(format!("{a:?}"), "KeyedHash([redacted])");
    }
}
