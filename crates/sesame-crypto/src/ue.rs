//! Updatable encryption (UE): a group-exponent cipher on Ristretto255.
//!
//! A message is a [`PAYLOAD_LEN`]-byte payload, encoded as a group element
//! `M`; a key is a non-zero scalar `k` of the prime-order group (order
//! `q = 2^252 + 27742317777372353535851937790883648493`):
//!
//! ```text
//! Enc(k, m)      = k·M                 M = encode(m)
//! Token(k, k')   = Δ = k'·k⁻¹ mod q
//! ReEnc(Δ, C)    = Δ·C                 = k'·M
//! Dec(k', C')    = decode(k'⁻¹·C')
//! ```
//!
//! Ciphertexts are compressed Ristretto encodings: 32 bytes. Whoever holds
//! `Δ` can move a ciphertext from `k` to `k'` without learning `M`, and
//! (knowing `Δ`) can link the old and the new ciphertext. Ciphertexts are
//! deterministic: equal messages under one key give equal ciphertexts (the
//! property seed 000's deletions rely on).
//!
//! # Encoding (try-and-increment)
//!
//! A Ristretto255 element is encoded as a canonical, non-negative field
//! element `s` (32 bytes, little-endian, `s < p = 2^255 - 19`, low bit 0).
//! We build candidate encodings directly from the payload and a 13-bit
//! counter `ctr` and keep the first one that decodes:
//!
//! ```text
//! byte 0       = (ctr mod 128) << 1           (bit 0 = 0: non-negative)
//! bytes 1..=30 = payload                      (30 bytes)
//! byte 31      = ctr >> 7                     (6 bits: s < 2^254 < p)
//! ```
//!
//! Decoding compresses the point and reads bytes 1..=30 back; a point whose
//! byte 31 has either top bit set is not an encoding of ours. About a
//! quarter of such candidates are valid encodings (`2^252` group elements,
//! one non-negative encoding each, among `2^254` non-negative field
//! elements; measured in `tests/ue_pke.rs`), so the number of tries is
//! geometric with mean about 4, and all [`MAX_TRIES`] `= 8192` candidates
//! fail with probability about `(3/4)^8192 < 2^-3400`.
//! [`UeKey::encrypt`] then returns an error rather than looping.
//!
//! The encoding is variable-time in the payload (the number of tries
//! depends on it), hence [`encode_vartime`]: encrypting the same payload
//! twice takes the same time, so timing can link two encryptions of one
//! payload, as the deterministic ciphertexts do anyway.
//!
//! Counting: each `encrypt`, `decrypt` and `re_encrypt` is one
//! [`Primitive::GroupExp`] call; the decompressions of the encoding are not
//! counted.

use core::fmt;

use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::Identity;
use rand_core::CryptoRngCore;
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::counter::{self, Primitive};
use crate::error::{Error, Result};

/// Payload bytes per message.
pub const PAYLOAD_LEN: usize = 30;

/// Bytes of a ciphertext (a compressed Ristretto255 point).
pub const CIPHERTEXT_LEN: usize = 32;

/// Bytes of a key or update token (a canonical scalar).
pub const SCALAR_LEN: usize = 32;

/// Candidates tried by the encoding before giving up (13-bit counter).
pub const MAX_TRIES: u32 = 1 << 13;

/// A uniformly random non-zero scalar.
pub(crate) fn random_nonzero_scalar<R: CryptoRngCore + ?Sized>(rng: &mut R) -> Scalar {
    loop {
        let mut wide = [0u8; 64];
        rng.fill_bytes(&mut wide);
        let s = Scalar::from_bytes_mod_order_wide(&wide);
        wide.zeroize();
        if s != Scalar::ZERO {
            return s;
        }
    }
}

/// Reads a canonical non-zero scalar.
pub(crate) fn nonzero_scalar(bytes: &[u8; 32], what: &'static str) -> Result<Scalar> {
    Option::<Scalar>::from(Scalar::from_canonical_bytes(*bytes))
        .filter(|s| *s != Scalar::ZERO)
        .ok_or(Error::InvalidParameter {
            what,
            reason: "must be a canonical non-zero scalar modulo the group order",
        })
}

/// The candidate encoding of `payload` for counter `ctr`.
fn candidate(payload: &[u8; PAYLOAD_LEN], ctr: u32) -> [u8; 32] {
    let mut s = [0u8; 32];
    s[0] = ((ctr & 0x7f) as u8) << 1;
    s[1..=PAYLOAD_LEN].copy_from_slice(payload);
    s[31] = ((ctr >> 7) & 0x3f) as u8;
    s
}

/// Encodes `payload` as a group element by try-and-increment, returning
/// the element and the number of candidates tried. Variable-time in the
/// payload (see the module documentation).
pub fn encode_vartime(payload: &[u8; PAYLOAD_LEN]) -> Result<(RistrettoPoint, u32)> {
    for ctr in 0..MAX_TRIES {
        if let Some(p) = CompressedRistretto(candidate(payload, ctr)).decompress() {
            return Ok((p, ctr + 1));
        }
    }
    Err(Error::InvalidParameter {
        what: "UE payload",
        reason: "no group element among 8192 candidate encodings",
    })
}

/// Reads the payload back from a group element produced by
/// [`encode_vartime`]; any other element is rejected with the opaque
/// [`Error::Decryption`].
pub fn decode(point: &RistrettoPoint) -> Result<[u8; PAYLOAD_LEN]> {
    let s = point.compress().to_bytes();
    if s[31] & 0xc0 != 0 {
        return Err(Error::Decryption);
    }
    let mut out = [0u8; PAYLOAD_LEN];
    out.copy_from_slice(&s[1..=PAYLOAD_LEN]);
    Ok(out)
}

/// A UE ciphertext: a compressed Ristretto255 point.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ciphertext([u8; CIPHERTEXT_LEN]);

impl Ciphertext {
    /// Wraps 32 bytes; they are checked when the ciphertext is used.
    pub fn from_bytes(bytes: [u8; CIPHERTEXT_LEN]) -> Self {
        Ciphertext(bytes)
    }

    /// Reads a ciphertext from a slice of exactly 32 bytes.
    pub fn from_slice(bytes: &[u8]) -> Result<Self> {
        let b: [u8; CIPHERTEXT_LEN] = bytes.try_into().map_err(|_| Error::InvalidLength {
            what: "UE ciphertext",
            expected: CIPHERTEXT_LEN,
            actual: bytes.len(),
        })?;
        Ok(Ciphertext(b))
    }

    /// The encoded ciphertext.
    pub fn to_bytes(&self) -> [u8; CIPHERTEXT_LEN] {
        self.0
    }

    /// The encoded ciphertext, borrowed.
    pub fn as_bytes(&self) -> &[u8; CIPHERTEXT_LEN] {
        &self.0
    }

    fn point(&self) -> Result<RistrettoPoint> {
        CompressedRistretto(self.0)
            .decompress()
            .filter(|p| *p != RistrettoPoint::identity())
            .ok_or(Error::Decryption)
    }
}

impl fmt::Debug for Ciphertext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Ciphertext(")?;
        for b in &self.0[..8] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..)")
    }
}

/// A UE key: a non-zero scalar and its inverse (kept so that decryption
/// and token generation cost no inversion). Wiped on drop, redacted in
/// `Debug`, copied only through [`UeKey::clone_secret`].
pub struct UeKey {
    k: Scalar,
    k_inv: Scalar,
}

impl UeKey {
    fn from_scalar(k: Scalar) -> Self {
        UeKey {
            k_inv: k.invert(),
            k,
        }
    }

    /// A fresh uniformly random key.
    pub fn generate<R: CryptoRngCore + ?Sized>(rng: &mut R) -> Self {
        Self::from_scalar(random_nonzero_scalar(rng))
    }

    /// Reads a key: a canonical non-zero scalar, little-endian.
    pub fn from_bytes(bytes: &[u8; SCALAR_LEN]) -> Result<Self> {
        Ok(Self::from_scalar(nonzero_scalar(bytes, "UE key")?))
    }

    /// The key's bytes. Handle with care: whatever copies them must wipe
    /// them.
    pub fn to_secret_bytes(&self) -> [u8; SCALAR_LEN] {
        self.k.to_bytes()
    }

    /// An explicit copy of the secret.
    pub fn clone_secret(&self) -> Self {
        UeKey {
            k: self.k,
            k_inv: self.k_inv,
        }
    }

    /// Encrypts an already encoded message: `k·M`. One GroupExp call.
    pub fn encrypt_point(&self, m: &RistrettoPoint) -> Ciphertext {
        counter::record(Primitive::GroupExp, 1);
        Ciphertext((self.k * m).compress().to_bytes())
    }

    /// Encrypts `payload`: encodes it ([`encode_vartime`]) and multiplies
    /// by the key. One GroupExp call. Fails only if no encoding is found
    /// (probability below `2^-3400`).
    pub fn encrypt(&self, payload: &[u8; PAYLOAD_LEN]) -> Result<Ciphertext> {
        let (m, _) = encode_vartime(payload)?;
        Ok(self.encrypt_point(&m))
    }

    /// Decrypts: `decode(k⁻¹·C)`. One GroupExp call. A ciphertext that is
    /// not a point, or that decrypts to no encoded payload, gives the
    /// opaque [`Error::Decryption`].
    pub fn decrypt(&self, c: &Ciphertext) -> Result<[u8; PAYLOAD_LEN]> {
        let p = c.point()?;
        counter::record(Primitive::GroupExp, 1);
        decode(&(self.k_inv * p))
    }

    /// The update token from this key to `next`: `Δ = k'·k⁻¹ mod q`.
    pub fn update_token(&self, next: &UeKey) -> UpdateToken {
        UpdateToken {
            delta: next.k * self.k_inv,
        }
    }
}

impl UeKey {
    /// Overwrites both scalars with zero: what dropping the key does.
    fn wipe(&mut self) {
        self.k.zeroize();
        self.k_inv.zeroize();
    }
}

impl Drop for UeKey {
    fn drop(&mut self) {
        self.wipe();
    }
}

impl ZeroizeOnDrop for UeKey {}

impl fmt::Debug for UeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UeKey([redacted])")
    }
}

impl PartialEq for UeKey {
    fn eq(&self, other: &Self) -> bool {
        use subtle::ConstantTimeEq;
        self.k.to_bytes().ct_eq(&other.k.to_bytes()).into()
    }
}

impl Eq for UeKey {}

/// An update token `Δ = k'·k⁻¹`: moves ciphertexts from `k` to `k'`.
/// Wiped on drop, redacted in `Debug`.
pub struct UpdateToken {
    delta: Scalar,
}

impl UpdateToken {
    /// Reads a token: a canonical non-zero scalar, little-endian.
    pub fn from_bytes(bytes: &[u8; SCALAR_LEN]) -> Result<Self> {
        Ok(UpdateToken {
            delta: nonzero_scalar(bytes, "UE update token")?,
        })
    }

    /// The token's bytes.
    pub fn to_bytes(&self) -> [u8; SCALAR_LEN] {
        self.delta.to_bytes()
    }

    /// Re-encrypts: `Δ·C`. One GroupExp call; a ciphertext that is not a
    /// point gives the opaque [`Error::Decryption`].
    pub fn re_encrypt(&self, c: &Ciphertext) -> Result<Ciphertext> {
        let p = c.point()?;
        counter::record(Primitive::GroupExp, 1);
        Ok(Ciphertext((self.delta * p).compress().to_bytes()))
    }
}

impl UpdateToken {
    /// Overwrites the scalar with zero: what dropping the token does.
    fn wipe(&mut self) {
        self.delta.zeroize();
    }
}

impl Drop for UpdateToken {
    fn drop(&mut self) {
        self.wipe();
    }
}

impl ZeroizeOnDrop for UpdateToken {}

impl fmt::Debug for UpdateToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UpdateToken([redacted])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;

    /// What dropping a key or a token runs leaves its scalars zero.
    #[test]
    fn wipe_zeroes_keys_and_tokens() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(4);
        let mut k = UeKey::generate(&mut rng);
        let next = UeKey::generate(&mut rng);
        let mut t = k.update_token(&next);
        assert_ne!(t.delta, Scalar::ZERO);
        t.wipe();
        assert_eq!(t.delta, Scalar::ZERO);
        assert!(k.k != Scalar::ZERO && k.k_inv != Scalar::ZERO);
        k.wipe();
        assert_eq!((k.k, k.k_inv), (Scalar::ZERO, Scalar::ZERO));
    }

    #[test]
    fn round_trip_and_re_encryption() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        let k = UeKey::generate(&mut rng);
        let k2 = UeKey::generate(&mut rng);
        let m = [0xa5; PAYLOAD_LEN];
        let c = k.encrypt(&m).unwrap();
        assert_eq!(k.decrypt(&c).unwrap(), m);
        let c2 = k.update_token(&k2).re_encrypt(&c).unwrap();
        assert_ne!(c, c2);
        assert_eq!(k2.decrypt(&c2).unwrap(), m);
        assert_eq!(k2.encrypt(&m).unwrap(), c2);
        assert!(k.decrypt(&c2).is_err() || k.decrypt(&c2).unwrap() != m);
    }

    #[test]
    fn invalid_inputs_are_errors() {
        assert!(UeKey::from_bytes(&[0; 32]).is_err());
        assert!(UeKey::from_bytes(&[0xff; 32]).is_err());
        assert!(UpdateToken::from_bytes(&[0; 32]).is_err());
        let k = UeKey::from_bytes(&[1; 32]).unwrap();
        // Not a point: an odd (negative) encoding.
        assert_eq!(
            k.decrypt(&Ciphertext::from_bytes([1; 32])),
            Err(Error::Decryption)
        );
        // The identity is refused.
        assert_eq!(
            k.decrypt(&Ciphertext::from_bytes([0; 32])),
            Err(Error::Decryption)
        );
        assert!(Ciphertext::from_slice(&[0; 31]).is_err());
        assert_eq!(format!("{k:?}"), "UeKey([redacted])");
    }
}
