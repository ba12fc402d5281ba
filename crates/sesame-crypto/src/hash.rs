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

use core::fmt;

use hmac::Mac;
use sha2::Digest;
use zeroize::ZeroizeOnDrop;

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

    #[test]
    fn keyed_hash_depends_on_key() {
        let a = KeyedHash::new(&Key::from_bytes([1; 32]));
        let b = KeyedHash::new(&Key::from_bytes([2; 32]));
        assert_ne!(a.hash("d", &[b"x"]), b.hash("d", &[b"x"]));
        assert_ne!(a.hash("d", &[b"x"]), ro("d", &[b"x"]));
        assert_eq!(format!("{a:?}"), "KeyedHash([redacted])");
    }
}
