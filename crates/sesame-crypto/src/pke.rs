//! Public-key encryption: ECIES over Ristretto255 with HKDF-SHA256 and
//! AES-256-GCM-SIV.
//!
//! ```text
//! keys      sk ← Z_q \ {0},  PK = sk·B                       (B: the Ristretto basepoint)
//! Enc(PK,m) r ← Z_q \ {0},  R = r·B,  S = r·PK
//!           (key ‖ nonce) = HKDF-SHA256(salt = "sesame-ecies/v1", ikm = S,
//!                                        info = R ‖ PK)[..44]
//!           ciphertext = R ‖ AES-256-GCM-SIV(key, nonce, aad, m)   (32 + |m| + 16 bytes)
//! Dec(sk,c) S = sk·R, same derivation, open
//! ```
//!
//! The AEAD key is used for one message only, so its nonce is derived with
//! the key rather than sent (as in HPKE's single-shot mode and ISO 18033-2's
//! ECIES-KEM + DEM): a ciphertext is 48 bytes longer than the message.
//! Ristretto255 is a prime-order group with canonical encodings, so there
//! is no cofactor to clear and no small-subgroup point to refuse beyond the
//! identity, which both sides reject. Binding `R` and `PK` into the key
//! derivation makes the ciphertext non-malleable in `R`. Backed by
//! `curve25519-dalek`, `hkdf` and `aes-gcm-siv`.
//!
//! Counting: each `encrypt` and `decrypt` is one [`Primitive::Pke`] call;
//! the scalar multiplications (two to encrypt, one to decrypt), the key
//! derivation and the AEAD call count as nested GroupExp, Prf and Ske.

use core::fmt;

use curve25519_dalek::constants::RISTRETTO_BASEPOINT_TABLE;
use curve25519_dalek::ristretto::{CompressedRistretto, RistrettoPoint};
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::Identity;
use hkdf::Hkdf;
use rand_core::CryptoRngCore;
use sha2::Sha256;
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::aead::Aes256GcmSiv;
use crate::counter::{self, Primitive};
use crate::error::{Error, Result};
use crate::key::Key;
use crate::ue::{nonzero_scalar, random_nonzero_scalar};

/// Bytes of a public key (a compressed Ristretto255 point).
pub const PUBLIC_KEY_LEN: usize = 32;

/// Bytes of a secret key (a canonical scalar).
pub const SECRET_KEY_LEN: usize = 32;

/// Bytes a ciphertext adds to its message: the ephemeral point and the tag.
pub const OVERHEAD: usize = 32 + Aes256GcmSiv::TAG_LEN;

/// HKDF salt: fixes the derivation to this construction and version.
const SALT: &[u8] = b"sesame-ecies/v1";

/// An ECIES public key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct EciesPublicKey {
    point: RistrettoPoint,
    bytes: [u8; PUBLIC_KEY_LEN],
}

/// An ECIES secret key. Wiped on drop, redacted in `Debug`.
pub struct EciesSecretKey {
    sk: Scalar,
    public: EciesPublicKey,
}

/// HKDF-SHA256(`salt`, ikm = the shared point, info = `r` ‖ `pk`): `N`
/// bytes for (shared point, ephemeral, recipient). One Prf call.
fn expand<const N: usize>(
    salt: &[u8],
    shared: &RistrettoPoint,
    r: &[u8; 32],
    pk: &[u8; 32],
) -> Zeroizing<[u8; N]> {
    counter::record(Primitive::Prf, 1);
    let ikm = Zeroizing::new(shared.compress().to_bytes());
    let hk = Hkdf::<Sha256>::new(Some(salt), ikm.as_ref());
    let mut info = [0u8; 64];
    info[..32].copy_from_slice(r);
    info[32..].copy_from_slice(pk);
    let mut okm = Zeroizing::new([0u8; N]);
    hk.expand(&info, okm.as_mut())
        .expect("44 bytes at most, within the HKDF-SHA256 limit");
    okm
}

/// The AEAD key and nonce for (shared point, ephemeral, recipient).
fn derive(shared: &RistrettoPoint, r: &[u8; 32], pk: &[u8; 32]) -> (Key<32>, [u8; 12]) {
    let okm = expand::<44>(SALT, shared, r, pk);
    let key = Key::from_slice(&okm[..32]).expect("32-byte slice");
    let mut nonce = [0u8; 12];
    nonce.copy_from_slice(&okm[32..]);
    (key, nonce)
}

impl EciesPublicKey {
    /// Reads a public key; an invalid encoding or the identity is refused.
    pub fn from_bytes(bytes: &[u8; PUBLIC_KEY_LEN]) -> Result<Self> {
        let point = CompressedRistretto(*bytes)
            .decompress()
            .filter(|p| *p != RistrettoPoint::identity())
            .ok_or(Error::InvalidParameter {
                what: "ECIES public key",
                reason: "must encode a Ristretto255 point other than the identity",
            })?;
        Ok(EciesPublicKey {
            point,
            bytes: *bytes,
        })
    }

    /// The encoded key.
    pub fn to_bytes(&self) -> [u8; PUBLIC_KEY_LEN] {
        self.bytes
    }

    /// A fresh ephemeral `r`: returns `R = r·B` encoded and the shared
    /// point `r·PK`; `r` is wiped. Two group exponentiations.
    fn ephemeral<R: CryptoRngCore + ?Sized>(&self, rng: &mut R) -> ([u8; 32], RistrettoPoint) {
        let mut r = random_nonzero_scalar(rng);
        counter::record(Primitive::GroupExp, 2);
        let big_r = (&r * RISTRETTO_BASEPOINT_TABLE).compress().to_bytes();
        let shared = r * self.point;
        r.zeroize();
        (big_r, shared)
    }

    /// Encrypts `plaintext` bound to `aad`; returns `R ‖ ciphertext ‖ tag`.
    /// One Pke call.
    pub fn encrypt<R: CryptoRngCore + ?Sized>(
        &self,
        rng: &mut R,
        aad: &[u8],
        plaintext: &[u8],
    ) -> Result<Vec<u8>> {
        let _pke = counter::enter(Primitive::Pke);
        let (big_r, shared) = self.ephemeral(rng);
        let (key, nonce) = derive(&shared, &big_r, &self.bytes);
        let sealed = Aes256GcmSiv::new(&key).seal_with_nonce(&nonce, aad, plaintext)?;
        let mut out = Vec::with_capacity(OVERHEAD + plaintext.len());
        out.extend_from_slice(&big_r);
        out.extend_from_slice(&sealed[Aes256GcmSiv::NONCE_LEN..]);
        Ok(out)
    }
}

impl EciesPublicKey {
    /// The KEM half of ECIES alone (hashed ElGamal, ISO 18033-2
    /// ECIES-KEM): a fresh 32-byte secret shared with the holder of the
    /// secret key, and its 32-byte encapsulation `R = r·B`. The secret is
    /// HKDF-SHA256(salt = "sesame-ecies-kem/v1", ikm = r·PK, info = R ‖ PK).
    ///
    /// For sending a fresh random value (a key, a mask) this replaces
    /// encrypting it with [`EciesPublicKey::encrypt`] and is 48 bytes
    /// shorter: the value is the KEM's output rather than a DEM payload.
    /// One Pke call.
    pub fn encapsulate<R: CryptoRngCore + ?Sized>(
        &self,
        rng: &mut R,
    ) -> ([u8; PUBLIC_KEY_LEN], Zeroizing<[u8; 32]>) {
        let _pke = counter::enter(Primitive::Pke);
        let (big_r, shared) = self.ephemeral(rng);
        (big_r, kem_secret(&shared, &big_r, &self.bytes))
    }
}

/// The KEM secret for (shared point, encapsulation, recipient).
fn kem_secret(shared: &RistrettoPoint, r: &[u8; 32], pk: &[u8; 32]) -> Zeroizing<[u8; 32]> {
    expand(KEM_SALT, shared, r, pk)
}

/// HKDF salt of the KEM alone.
const KEM_SALT: &[u8] = b"sesame-ecies-kem/v1";

impl fmt::Debug for EciesPublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EciesPublicKey(")?;
        for b in &self.bytes[..8] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..)")
    }
}

impl EciesSecretKey {
    fn from_scalar(sk: Scalar) -> Self {
        let point = &sk * RISTRETTO_BASEPOINT_TABLE;
        let public = EciesPublicKey {
            point,
            bytes: point.compress().to_bytes(),
        };
        EciesSecretKey { sk, public }
    }

    /// A fresh key pair.
    pub fn generate<R: CryptoRngCore + ?Sized>(rng: &mut R) -> Self {
        Self::from_scalar(random_nonzero_scalar(rng))
    }

    /// Reads a secret key: a canonical non-zero scalar, little-endian.
    pub fn from_bytes(bytes: &[u8; SECRET_KEY_LEN]) -> Result<Self> {
        Ok(Self::from_scalar(nonzero_scalar(
            bytes,
            "ECIES secret key",
        )?))
    }

    /// The key's bytes. Handle with care: whatever copies them must wipe
    /// them.
    pub fn to_secret_bytes(&self) -> [u8; SECRET_KEY_LEN] {
        self.sk.to_bytes()
    }

    /// The matching public key.
    pub fn public_key(&self) -> EciesPublicKey {
        self.public
    }

    /// The shared point `sk·R` of an encoded ephemeral `R`; an encoding
    /// that is not a point, or the identity, gives [`Error::Decryption`].
    /// One group exponentiation.
    fn shared(&self, big_r: &[u8; 32]) -> Result<RistrettoPoint> {
        let r_point = CompressedRistretto(*big_r)
            .decompress()
            .filter(|p| *p != RistrettoPoint::identity())
            .ok_or(Error::Decryption)?;
        counter::record(Primitive::GroupExp, 1);
        Ok(self.sk * r_point)
    }

    /// Decrypts the output of [`EciesPublicKey::encrypt`]; anything altered
    /// (or a wrong key or `aad`) gives the opaque [`Error::Decryption`].
    /// One Pke call.
    pub fn decrypt(&self, aad: &[u8], ciphertext: &[u8]) -> Result<Vec<u8>> {
        let _pke = counter::enter(Primitive::Pke);
        if ciphertext.len() < OVERHEAD {
            return Err(Error::Decryption);
        }
        let (r_bytes, body) = ciphertext.split_at(32);
        let mut big_r = [0u8; 32];
        big_r.copy_from_slice(r_bytes);
        let shared = self.shared(&big_r)?;
        let (key, nonce) = derive(&shared, &big_r, &self.public.bytes);
        let mut sealed = Vec::with_capacity(Aes256GcmSiv::NONCE_LEN + body.len());
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(body);
        Aes256GcmSiv::new(&key).open(aad, &sealed)
    }
}

impl EciesSecretKey {
    /// The secret of an encapsulation made by
    /// [`EciesPublicKey::encapsulate`]; an encoding that is not a point, or
    /// the identity, gives [`Error::Decryption`]. (A KEM has no tag: any
    /// other valid point decapsulates to an unrelated secret.) One Pke
    /// call.
    pub fn decapsulate(&self, encapsulation: &[u8; PUBLIC_KEY_LEN]) -> Result<Zeroizing<[u8; 32]>> {
        let _pke = counter::enter(Primitive::Pke);
        let shared = self.shared(encapsulation)?;
        Ok(kem_secret(&shared, encapsulation, &self.public.bytes))
    }
}

impl EciesSecretKey {
    /// Overwrites the secret scalar with zero: what dropping it does.
    fn wipe(&mut self) {
        self.sk.zeroize();
    }
}

impl Drop for EciesSecretKey {
    fn drop(&mut self) {
        self.wipe();
    }
}

impl ZeroizeOnDrop for EciesSecretKey {}

impl fmt::Debug for EciesSecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EciesSecretKey([redacted])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;

    /// What dropping a secret key runs leaves its scalar zero.
    #[test]
    fn wipe_zeroes_the_secret_scalar() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(4);
        let mut sk = EciesSecretKey::generate(&mut rng);
        assert_ne!(sk.sk, Scalar::ZERO);
        sk.wipe();
        assert_eq!(sk.sk, Scalar::ZERO);
    }

    #[test]
    fn kem_shares_a_secret_with_the_key_holder_only() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(9);
        let sk = EciesSecretKey::generate(&mut rng);
        let (enc, secret) = sk.public_key().encapsulate(&mut rng);
        assert_eq!(*sk.decapsulate(&enc).unwrap(), *secret);
        let (enc2, secret2) = sk.public_key().encapsulate(&mut rng);
        assert_ne!(enc, enc2);
        assert_ne!(*secret, *secret2);
        let other = EciesSecretKey::generate(&mut rng);
        assert_ne!(*other.decapsulate(&enc).unwrap(), *secret);
        assert!(sk.decapsulate(&[0u8; 32]).is_err(), "identity refused");
        assert!(sk.decapsulate(&[0xff; 32]).is_err(), "not a point");
        // The KEM and the full ECIES derive different keys from one point.
        let c = sk.public_key().encrypt(&mut rng, b"", &[1; 32]).unwrap();
        assert_eq!(sk.decrypt(b"", &c).unwrap(), [1; 32]);
    }

    #[test]
    fn round_trip_and_tampering() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
        let sk = EciesSecretKey::generate(&mut rng);
        let pk = sk.public_key();
        let c = pk.encrypt(&mut rng, b"ad", b"hello").unwrap();
        assert_eq!(c.len(), 5 + OVERHEAD);
        assert_eq!(sk.decrypt(b"ad", &c).unwrap(), b"hello");
        assert_eq!(sk.decrypt(b"other", &c), Err(Error::Decryption));
        for i in 0..c.len() {
            let mut bad = c.clone();
            bad[i] ^= 0x10;
            assert_eq!(sk.decrypt(b"ad", &bad), Err(Error::Decryption), "byte {i}");
        }
        assert_eq!(
            sk.decrypt(b"ad", &c[..OVERHEAD - 1]),
            Err(Error::Decryption)
        );
        let back = EciesPublicKey::from_bytes(&pk.to_bytes()).unwrap();
        assert_eq!(back, pk);
        assert!(EciesPublicKey::from_bytes(&[0; 32]).is_err());
        assert_eq!(format!("{sk:?}"), "EciesSecretKey([redacted])");
    }
}
