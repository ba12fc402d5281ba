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

use crate::aes_many;
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
    /// The key-generating key as [`aes_many`] takes it, for
    /// [`seal_each`](Self::seal_each) and [`open_each`](Self::open_each).
    key: [u128; 2],
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
        let (lo, hi) = key.as_bytes().split_at(16);
        Aes256GcmSiv {
            kgk: Aes256Enc::new(key.as_bytes().into()),
            key: [lo, hi].map(|half| aes_many::block(half.try_into().expect("16 of 32 bytes"))),
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
        let Some((nonce, rest)) = ciphertext.split_first_chunk::<12>() else {
            counter::record(Primitive::Ske, 1);
            return Err(Error::Decryption);
        };
        self.open_with_nonce(nonce, aad, rest)
    }

    /// Opens `ciphertext || tag` sealed under `nonce`, which the sealed
    /// bytes do not hold (a fixed nonce the reader knows); one Ske call,
    /// the same opaque [`Error::Decryption`] as [`Aes256GcmSiv::open`].
    pub fn open_with_nonce(&self, nonce: &[u8; 12], aad: &[u8], rest: &[u8]) -> Result<Vec<u8>> {
        counter::record(Primitive::Ske, 1);
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

/// One message of [`Aes256GcmSiv::seal_each`]: the cipher, the nonce,
/// the associated data and the plaintext.
#[derive(Clone, Copy)]
pub struct SealItem<'a> {
    /// The cipher (each message may have its own).
    pub aead: &'a Aes256GcmSiv,
    /// A nonce drawn from a `CryptoRng`, as [`Aes256GcmSiv::seal`] draws
    /// one (see [`Aes256GcmSiv::seal_with_nonce`] for what a repeat
    /// reveals).
    pub nonce: [u8; 12],
    /// Associated data.
    pub aad: &'a [u8],
    /// Plaintext.
    pub plaintext: &'a [u8],
}

/// One message of [`Aes256GcmSiv::open_each`]: the cipher, the associated
/// data and `nonce || ciphertext || tag`.
#[derive(Clone, Copy)]
pub struct OpenItem<'a> {
    /// The cipher (each message may have its own).
    pub aead: &'a Aes256GcmSiv,
    /// Associated data.
    pub aad: &'a [u8],
    /// What a seal returned.
    pub ciphertext: &'a [u8],
}

/// Most plaintext bytes a message of a batch takes through the batched
/// path (four passes of [`CTR_PASS`] blocks); longer ones are sealed or
/// opened one by one, whose counter mode runs on one key schedule.
const BATCH_MAX: usize = 256;

/// Counter blocks per key and pass of a batch's counter mode.
const CTR_PASS: usize = 4;

impl Aes256GcmSiv {
    /// Seals many messages, each under its own cipher and nonce: entry
    /// `i` of the result is what `items[i].aead.seal_with_nonce(...)`
    /// returns, byte for byte. The key schedules of the messages' keys
    /// (RFC 8452's derivation, the tag and the counter mode) are expanded
    /// side by side, as the GGM's are ([`aes_many`]). One Ske call per
    /// message. Fails, sealing nothing, if any input exceeds
    /// [`AEAD_MAX_LEN`].
    pub fn seal_each(items: &[SealItem<'_>]) -> Result<Vec<Vec<u8>>> {
        for item in items {
            check_len("plaintext", item.plaintext)?;
            check_len("associated data", item.aad)?;
        }
        let mut out: Vec<Vec<u8>> = Vec::with_capacity(items.len());
        let mut short = Vec::with_capacity(items.len());
        for item in items {
            if item.plaintext.len() <= BATCH_MAX {
                let mut sealed = Vec::with_capacity(Self::OVERHEAD + item.plaintext.len());
                sealed.extend_from_slice(&item.nonce);
                sealed.extend_from_slice(item.plaintext);
                short.push(out.len());
                out.push(sealed);
            } else {
                out.push(
                    item.aead
                        .seal_with_nonce(&item.nonce, item.aad, item.plaintext)?,
                );
            }
        }
        counter::record(Primitive::Ske, short.len() as u64);
        let mut keys = BatchKeys::derive(short.iter().map(|&i| (items[i].aead, &items[i].nonce)));
        let inputs = keys.tag_inputs(short.iter().map(|&i| {
            let item = &items[i];
            (&item.nonce, item.aad, item.plaintext)
        }));
        let tags = keys.tags(inputs);
        let mut bodies: Vec<&mut [u8]> = Vec::with_capacity(short.len());
        let mut at = short.iter().peekable();
        for (i, sealed) in out.iter_mut().enumerate() {
            if at.next_if(|&&s| s == i).is_some() {
                bodies.push(&mut sealed[Self::NONCE_LEN..]);
            }
        }
        keys.ctr(&tags, &mut bodies);
        for (&i, tag) in short.iter().zip(&tags) {
            out[i].extend_from_slice(tag);
        }
        Ok(out)
    }

    /// Opens many messages, each under its own cipher: entry `i` of the
    /// result is what `items[i].aead.open(items[i].aad,
    /// items[i].ciphertext)` returns, the same opaque
    /// [`Error::Decryption`] for any failure. Batched as
    /// [`seal_each`](Self::seal_each) is; one Ske call per message.
    pub fn open_each(items: &[OpenItem<'_>]) -> Vec<Result<Vec<u8>>> {
        let mut out: Vec<Result<Vec<u8>>> = Vec::with_capacity(items.len());
        // (index, nonce, tag) of the messages opened side by side.
        let mut short = Vec::with_capacity(items.len());
        for item in items {
            let parts = item
                .ciphertext
                .split_first_chunk::<12>()
                .and_then(|(nonce, rest)| {
                    rest.split_last_chunk::<16>().map(|(b, t)| (nonce, b, t))
                });
            match parts {
                Some((nonce, body, tag))
                    if body.len() <= BATCH_MAX
                        && check_len("associated data", item.aad).is_ok() =>
                {
                    short.push((out.len(), nonce, tag));
                    out.push(Ok(body.to_vec()));
                }
                Some(_) => out.push(item.aead.open(item.aad, item.ciphertext)),
                None => {
                    counter::record(Primitive::Ske, 1);
                    out.push(Err(Error::Decryption));
                }
            }
        }
        counter::record(Primitive::Ske, short.len() as u64);
        let mut keys = BatchKeys::derive(short.iter().map(|&(i, nonce, _)| (items[i].aead, nonce)));
        let received: Vec<[u8; 16]> = short.iter().map(|&(_, _, tag)| *tag).collect();
        let mut bodies: Vec<&mut [u8]> = Vec::with_capacity(short.len());
        let mut at = short.iter().peekable();
        for (i, body) in out.iter_mut().enumerate() {
            if at.next_if(|s| s.0 == i).is_some() {
                if let Ok(body) = body {
                    bodies.push(body);
                }
            }
        }
        keys.ctr(&received, &mut bodies);
        let inputs = keys.tag_inputs(short.iter().map(|&(i, nonce, _)| {
            let plaintext = out[i].as_deref().unwrap_or_default();
            (nonce, items[i].aad, plaintext)
        }));
        let expected = keys.tags(inputs);
        for (&(i, _, tag), expected) in short.iter().zip(&expected) {
            if !bool::from(expected.ct_eq(tag)) {
                if let Ok(plain) = &mut out[i] {
                    plain.zeroize();
                }
                out[i] = Err(Error::Decryption);
            }
        }
        out
    }
}

/// The keys of a batch's messages: POLYVAL's and the message encryption
/// keys, as [`aes_many`] takes them (wiped on drop).
struct BatchKeys {
    mac: Vec<u128>,
    enc: Vec<[u128; 2]>,
}

impl BatchKeys {
    /// Each message's six derivation blocks under its key-generating key,
    /// side by side; the first eight bytes of the first two are the
    /// authentication key, of the other four the encryption key.
    fn derive<'a>(
        messages: impl ExactSizeIterator<Item = (&'a Aes256GcmSiv, &'a [u8; 12])>,
    ) -> Self {
        let n = messages.len();
        let mut kgks = Vec::with_capacity(n);
        let mut blocks = Vec::with_capacity(6 * n);
        for (aead, nonce) in messages {
            kgks.push(aead.key);
            blocks.extend(derivation_blocks(nonce).iter().map(aes_many::block));
        }
        aes_many::encrypt_each_256::<6>(&kgks, &mut blocks);
        let low = |b: u128| b & u128::from(u64::MAX);
        let mut mac = Vec::with_capacity(n);
        let mut enc = Vec::with_capacity(n);
        for b in blocks.chunks_exact(6) {
            mac.push(low(b[0]) | (low(b[1]) << 64));
            enc.push([low(b[2]) | (low(b[3]) << 64), low(b[4]) | (low(b[5]) << 64)]);
        }
        kgks.zeroize();
        blocks.zeroize();
        BatchKeys { mac, enc }
    }

    /// Each message's [`tag_input`] from its (nonce, associated data,
    /// plaintext), the POLYVAL of every message side by side
    /// ([`aes_many::polyval_each`]).
    fn tag_inputs<'a>(
        &self,
        messages: impl ExactSizeIterator<Item = (&'a [u8; 12], &'a [u8], &'a [u8])>,
    ) -> Vec<u128> {
        let n = messages.len();
        let (mut blocks, mut spans, mut nonces) =
            (Vec::new(), Vec::with_capacity(n), Vec::with_capacity(n));
        for (nonce, aad, plaintext) in messages {
            let start = blocks.len();
            for data in [aad, plaintext] {
                blocks.extend(data.chunks(16).map(|chunk| {
                    let mut b = [0u8; 16];
                    b[..chunk.len()].copy_from_slice(chunk);
                    let block = aes_many::block(&b);
                    b.zeroize();
                    block
                }));
            }
            // The lengths in bits: associated data, then plaintext.
            blocks.push(
                u128::from(aad.len() as u64 * 8) | (u128::from(plaintext.len() as u64 * 8) << 64),
            );
            spans.push((start, blocks.len() - start));
            nonces.push(nonce);
        }
        let mut sums = vec![0; n];
        aes_many::polyval_each(&self.mac, &blocks, &spans, &mut sums);
        blocks.zeroize();
        for (s, nonce) in sums.iter_mut().zip(nonces) {
            let mut padded = [0u8; 16];
            padded[..12].copy_from_slice(nonce);
            *s ^= aes_many::block(&padded);
            *s &= !(1 << 127);
        }
        sums
    }

    /// The tag of each message from its [`tag_input`].
    fn tags(&self, mut blocks: Vec<u128>) -> Vec<[u8; 16]> {
        aes_many::encrypt_each_256::<1>(&self.enc, &mut blocks);
        let tags = blocks.iter().map(|&b| aes_many::bytes(b)).collect();
        blocks.zeroize();
        tags
    }

    /// XORs each message's `bodies[i]` (at most [`BATCH_MAX`] bytes) with
    /// the key stream of its counter blocks from `tags[i]`, as
    /// [`MessageKeys::ctr`] does: [`CTR_PASS`] blocks per message and
    /// pass, side by side.
    fn ctr(&mut self, tags: &[[u8; 16]], bodies: &mut [&mut [u8]]) {
        let mut keys = Vec::with_capacity(bodies.len());
        let mut blocks = Vec::with_capacity(CTR_PASS * bodies.len());
        for pass in 0..BATCH_MAX.div_ceil(16 * CTR_PASS) {
            let skip = 16 * CTR_PASS * pass;
            keys.clear();
            blocks.clear();
            for ((tag, body), key) in tags.iter().zip(bodies.iter()).zip(&self.enc) {
                if body.len() <= skip {
                    continue;
                }
                let first = aes_many::block(tag) | (1 << 127);
                let counter = first as u32;
                keys.push(*key);
                for j in 0..CTR_PASS as u32 {
                    let c = counter.wrapping_add(j + (CTR_PASS * pass) as u32);
                    blocks.push((first & !u128::from(u32::MAX)) | u128::from(c));
                }
            }
            if keys.is_empty() {
                break;
            }
            aes_many::encrypt_each_256::<CTR_PASS>(&keys, &mut blocks);
            let mut stream = blocks.chunks_exact(CTR_PASS);
            for body in bodies.iter_mut().filter(|b| b.len() > skip) {
                let stream = stream.next().expect("a pass of blocks per body");
                for (bytes, k) in body[skip..].chunks_mut(16).zip(stream) {
                    if let Ok(whole) = <&mut [u8; 16]>::try_from(&mut *bytes) {
                        *whole = aes_many::bytes(aes_many::block(whole) ^ k);
                    } else {
                        for (x, k) in bytes.iter_mut().zip(aes_many::bytes(*k)) {
                            *x ^= k;
                        }
                    }
                }
            }
        }
        keys.zeroize();
        blocks.zeroize();
    }
}

impl Drop for BatchKeys {
    fn drop(&mut self) {
        self.mac.zeroize();
        self.enc.zeroize();
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
        let mut blocks = derivation_blocks(nonce).map(Block::from);
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
        let mut s = Block::from(tag_input(self.mac.clone(), nonce, aad, plaintext));
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

/// The six blocks `i || nonce` (`i` a 32-bit little-endian counter, 0 to
/// 5) that the key-generating key encrypts into a message's keys.
fn derivation_blocks(nonce: &[u8; 12]) -> [[u8; 16]; 6] {
    let mut blocks = [[0u8; 16]; 6];
    for (i, b) in (0u32..).zip(blocks.iter_mut()) {
        b[..4].copy_from_slice(&i.to_le_bytes());
        b[4..].copy_from_slice(nonce);
    }
    blocks
}

/// What the message key encrypts into the tag: POLYVAL (keyed `mac`) of
/// the padded associated data, the padded plaintext and their lengths in
/// bits, XORed with the nonce, its top bit cleared.
fn tag_input(mut mac: Polyval, nonce: &[u8; 12], aad: &[u8], plaintext: &[u8]) -> [u8; 16] {
    mac.update_padded(aad);
    mac.update_padded(plaintext);
    let mut lengths = polyval::Block::default();
    lengths[..8].copy_from_slice(&(aad.len() as u64 * 8).to_le_bytes());
    lengths[8..].copy_from_slice(&(plaintext.len() as u64 * 8).to_le_bytes());
    mac.update(&[lengths]);
    let mut s: [u8; 16] = mac.finalize().into();
    for (b, n) in s.iter_mut().zip(nonce) {
        *b ^= n;
    }
    s[15] &= 0x7f;
    s
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

/// Key schedules are wiped by `aes` (built with its `zeroize` feature),
/// the key's copy here by `drop`.
impl ZeroizeOnDrop for Aes256GcmSiv {}

impl Drop for Aes256GcmSiv {
    fn drop(&mut self) {
        self.key.zeroize();
    }
}

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

    /// `seal_each` and `open_each` give what `seal_with_nonce` and `open`
    /// give one message at a time, byte for byte: batches of messages
    /// under three ciphers, of every length up to past the batched
    /// path's limit, with altered and short ciphertexts among them.
    #[test]
    fn batches_equal_one_message_at_a_time() {
        use rand_chacha::rand_core::{RngCore, SeedableRng};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(12);
        let ciphers: Vec<Aes256GcmSiv> = (0..3)
            .map(|_| Aes256GcmSiv::new(&Key::generate(&mut rng)))
            .collect();
        for batch in 0..12usize {
            // (cipher, nonce, associated data, plaintext)
            type Message = (usize, [u8; 12], Vec<u8>, Vec<u8>);
            let messages: Vec<Message> = (0..batch * 3)
                .map(|i| {
                    let len = (batch * 37 + i * 29) % (BATCH_MAX + 40);
                    let mut nonce = [0u8; 12];
                    let mut aad = vec![0u8; i % 40];
                    let mut msg = vec![0u8; len];
                    rng.fill_bytes(&mut nonce);
                    rng.fill_bytes(&mut aad);
                    rng.fill_bytes(&mut msg);
                    (i % 3, nonce, aad, msg)
                })
                .collect();
            let items: Vec<SealItem<'_>> = messages
                .iter()
                .map(|(c, nonce, aad, msg)| SealItem {
                    aead: &ciphers[*c],
                    nonce: *nonce,
                    aad,
                    plaintext: msg,
                })
                .collect();
            let sealed = Aes256GcmSiv::seal_each(&items).expect("short");
            for (item, got) in items.iter().zip(&sealed) {
                let one = item
                    .aead
                    .seal_with_nonce(&item.nonce, item.aad, item.plaintext)
                    .expect("short");
                assert_eq!(got, &one, "length {}", item.plaintext.len());
            }
            let mut altered = sealed.clone();
            for (i, c) in altered.iter_mut().enumerate() {
                match i % 4 {
                    1 => {
                        let at = i % c.len();
                        c[at] ^= 1;
                    }
                    2 => c.truncate(i % Aes256GcmSiv::OVERHEAD),
                    _ => {}
                }
            }
            let opened = Aes256GcmSiv::open_each(
                &items
                    .iter()
                    .zip(&altered)
                    .map(|(item, c)| OpenItem {
                        aead: item.aead,
                        aad: item.aad,
                        ciphertext: c,
                    })
                    .collect::<Vec<_>>(),
            );
            for ((item, c), got) in items.iter().zip(&altered).zip(opened) {
                assert_eq!(got, item.aead.open(item.aad, c));
            }
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
