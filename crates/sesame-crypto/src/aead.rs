//! Authenticated encryption: AES-256-GCM-SIV (RFC 8452).
//!
//! Records are sealed under random 96-bit nonces. With many records under
//! one key, random nonces collide with probability about `q^2 / 2^97`, and a
//! client that crashes and retries may reuse a nonce (or an RNG state) by
//! accident. Plain GCM loses confidentiality of both messages and the
//! authentication key on a repeated nonce; GCM-SIV derives the IV from the
//! message (synthetic IV), so a repeat reveals only whether two messages
//! with the same nonce and associated data are equal. AES-256 keeps a
//! margin for the many records a store may hold.
//!
//! RFC 8452's construction is composed here from RustCrypto's `aes` and
//! `polyval` (the primitives `aes-gcm-siv` composes): the six blocks that
//! derive a message's keys go through the key-generating key in one
//! pipelined call rather than six, and the counter-mode blocks likewise.
//! The bytes are `aes-gcm-siv`'s: the RFC 8452 and Wycheproof vectors
//! (`tests/kat.rs`) and a comparison with the `aes-gcm-siv` crate on
//! random keys, nonces and lengths (`same_bytes_as_the_aes_gcm_siv_crate`)
//! check them.
//!
//! Each `seal` or `open` is one [`Primitive::Ske`] call.

use core::fmt;

use aes::cipher::{BlockEncrypt, KeyInit};
use aes::{Aes256Enc, Block};
use polyval::universal_hash::UniversalHash;
use polyval::Polyval;
use rand_core::CryptoRngCore;
use subtle::ConstantTimeEq;
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
    /// The key-generating key's schedule (RFC 8452, section 4).
    kgk: Aes256Enc,
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
            kgk: Aes256Enc::new(key.as_bytes().into()),
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
        let message = MessageKeys::derive(&self.kgk, nonce);
        let tag = message.tag(nonce, aad, plaintext);
        message.ctr(&tag, &mut out[Self::NONCE_LEN..]);
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
        if check_len("ciphertext", body).is_err() || check_len("associated data", aad).is_err() {
            return Err(Error::Decryption);
        }
        let mut out = body.to_vec();
        let message = MessageKeys::derive(&self.kgk, nonce);
        message.ctr(tag, &mut out);
        let expected = message.tag(nonce, aad, &out);
        if bool::from(expected.ct_eq(tag)) {
            Ok(out)
        } else {
            out.zeroize();
            Err(Error::Decryption)
        }
    }
}

/// The keys of one message (RFC 8452, section 4): POLYVAL's and the
/// message-encryption key's schedule. Both are wiped on drop.
struct MessageKeys {
    mac: Polyval,
    enc: Aes256Enc,
}

impl MessageKeys {
    /// Blocks `i || nonce` (`i` a 32-bit little-endian counter, 0 to 5)
    /// under the key-generating key, in one pipelined call; the first
    /// eight bytes of the first two are the authentication key, of the
    /// other four the encryption key.
    fn derive(kgk: &Aes256Enc, nonce: &[u8; 12]) -> Self {
        let mut blocks = [Block::default(); 6];
        for (i, b) in (0u32..).zip(blocks.iter_mut()) {
            b[..4].copy_from_slice(&i.to_le_bytes());
            b[4..].copy_from_slice(nonce);
        }
        kgk.encrypt_blocks(&mut blocks);
        let mut mac = [0u8; 16];
        let mut enc = [0u8; 32];
        let halves = blocks.iter().map(|b| &b[..8]);
        for (to, half) in mac
            .chunks_exact_mut(8)
            .chain(enc.chunks_exact_mut(8))
            .zip(halves)
        {
            to.copy_from_slice(half);
        }
        let keys = MessageKeys {
            mac: <Polyval as polyval::universal_hash::KeyInit>::new(&mac.into()),
            enc: Aes256Enc::new(&enc.into()),
        };
        mac.zeroize();
        enc.zeroize();
        for b in &mut blocks {
            b.as_mut_slice().zeroize();
        }
        keys
    }

    /// The tag: POLYVAL of the padded associated data, the padded
    /// plaintext and their lengths in bits, XORed with the nonce, its top
    /// bit cleared, encrypted.
    fn tag(&self, nonce: &[u8; 12], aad: &[u8], plaintext: &[u8]) -> [u8; 16] {
        let mut mac = self.mac.clone();
        mac.update_padded(aad);
        mac.update_padded(plaintext);
        let mut lengths = polyval::Block::default();
        lengths[..8].copy_from_slice(&(aad.len() as u64 * 8).to_le_bytes());
        lengths[8..].copy_from_slice(&(plaintext.len() as u64 * 8).to_le_bytes());
        mac.update(&[lengths]);
        let mut s = mac.finalize();
        for (b, n) in s.iter_mut().zip(nonce) {
            *b ^= n;
        }
        s[15] &= 0x7f;
        self.enc.encrypt_block(&mut s);
        let tag: [u8; 16] = s.into();
        s.as_mut_slice().zeroize();
        tag
    }

    /// XORs `buf` with the key stream of the counter blocks from the tag
    /// (its top bit set), the first 32 bits a little-endian counter that
    /// wraps; eight blocks per pipelined call.
    fn ctr(&self, tag: &[u8; 16], buf: &mut [u8]) {
        let mut first = *tag;
        first[15] |= 0x80;
        let mut word = [0u8; 4];
        word.copy_from_slice(&first[..4]);
        let mut counter = u32::from_le_bytes(word);
        let mut blocks = [Block::default(); 8];
        for chunk in buf.chunks_mut(16 * blocks.len()) {
            let n = chunk.len().div_ceil(16);
            for b in &mut blocks[..n] {
                b.copy_from_slice(&first);
                b[..4].copy_from_slice(&counter.to_le_bytes());
                counter = counter.wrapping_add(1);
            }
            self.enc.encrypt_blocks(&mut blocks[..n]);
            for (bytes, stream) in chunk.chunks_mut(16).zip(&blocks) {
                for (x, k) in bytes.iter_mut().zip(stream) {
                    *x ^= k;
                }
            }
        }
        for b in &mut blocks {
            b.as_mut_slice().zeroize();
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

    /// Seals and opens give the `aes-gcm-siv` crate's bytes, for random
    /// keys, nonces, associated data and plaintexts of every length up to
    /// a few counter chunks (and that crate opens ours).
    #[test]
    fn same_bytes_as_the_aes_gcm_siv_crate() {
        use aes_gcm_siv::aead::{Aead as _, KeyInit as _, Payload};
        use rand_chacha::rand_core::{RngCore, SeedableRng};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(11);
        for len in 0..300usize {
            let mut key = [0u8; 32];
            let mut nonce = [0u8; 12];
            rng.fill_bytes(&mut key);
            rng.fill_bytes(&mut nonce);
            let mut aad = vec![0u8; len % 37];
            let mut msg = vec![0u8; len];
            rng.fill_bytes(&mut aad);
            rng.fill_bytes(&mut msg);
            let ours = Aes256GcmSiv::new(&Key::from_bytes(key));
            let theirs = aes_gcm_siv::Aes256GcmSiv::new((&key).into());
            let sealed = ours.seal_with_nonce(&nonce, &aad, &msg).expect("short");
            let expected = theirs
                .encrypt(
                    (&nonce).into(),
                    Payload {
                        msg: &msg,
                        aad: &aad,
                    },
                )
                .expect("short");
            assert_eq!(&sealed[..12], &nonce);
            assert_eq!(&sealed[12..], &expected[..], "length {len}");
            assert_eq!(ours.open(&aad, &sealed).expect("authentic"), msg);
            let mut bad = sealed.clone();
            bad[12 + len % (len + 16)] ^= 1;
            assert_eq!(ours.open(&aad, &bad), Err(Error::Decryption));
        }
    }

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
