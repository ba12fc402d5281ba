//! AES-128 as a PRF on single blocks.

use core::fmt;

use aes::cipher::{BlockEncrypt, KeyInit};
use aes::{Aes128Enc, Block};
use zeroize::{Zeroize, ZeroizeOnDrop};

use crate::counter::{self, Primitive};
use crate::error::{Error, Result};
use crate::key::Key;
use crate::prf::Prf;

/// Blocks per call of the pipelined AES back end: a multiple of the eight
/// blocks AES-NI interleaves, large enough to amortise the call, small enough
/// to stay on the stack (1 KiB).
const CHUNK: usize = 64;

/// AES-128 as a PRF `{0,1}^128 -> {0,1}^128`.
///
/// Keeps the expanded encryption key schedule (wiped on drop), so a call is
/// one AES block encryption: AES-NI is detected at run time by the `aes`
/// crate. [`eval_batch`](Self::eval_batch) pipelines many blocks.
pub struct Aes128Prf {
    cipher: Aes128Enc,
}

impl Aes128Prf {
    /// Input and output length in bytes.
    pub const BLOCK_LEN: usize = 16;

    /// Expands the key schedule.
    pub fn new(key: &Key<16>) -> Self {
        Aes128Prf {
            cipher: Aes128Enc::new(key.as_bytes().into()),
        }
    }

    /// Reads a 16-byte key from a slice.
    pub fn from_slice(key: &[u8]) -> Result<Self> {
        Ok(Self::new(&Key::from_slice(key)?))
    }

    /// Evaluates the PRF on one block; one counted call.
    #[inline]
    pub fn eval_block(&self, input: &[u8; 16]) -> [u8; 16] {
        counter::record(Primitive::Prf, 1);
        self.encrypt_uncounted(input)
    }

    /// Evaluates the PRF on every block of `inputs` into `out`, pipelining
    /// the AES rounds of eight blocks at a time; counts `inputs.len()` calls
    /// in one counter update.
    ///
    /// Fails if `out` and `inputs` differ in length.
    pub fn eval_batch(&self, inputs: &[[u8; 16]], out: &mut [[u8; 16]]) -> Result<()> {
        if inputs.len() != out.len() {
            return Err(Error::InvalidLength {
                what: "batch output",
                expected: inputs.len(),
                actual: out.len(),
            });
        }
        counter::record(Primitive::Prf, inputs.len() as u64);
        let mut buf = [Block::default(); CHUNK];
        for (src, dst) in inputs.chunks(CHUNK).zip(out.chunks_mut(CHUNK)) {
            let buf = &mut buf[..src.len()];
            for (b, s) in buf.iter_mut().zip(src) {
                *b = (*s).into();
            }
            self.cipher.encrypt_blocks(buf);
            for (d, b) in dst.iter_mut().zip(buf.iter()) {
                *d = (*b).into();
            }
        }
        Ok(())
    }

    /// Replaces every block by its PRF value; counts `blocks.len()` calls.
    pub fn eval_in_place(&self, blocks: &mut [[u8; 16]]) {
        counter::record(Primitive::Prf, blocks.len() as u64);
        self.encrypt_in_place_uncounted(blocks);
    }

    /// `blocks[i]` becomes the PRF of `blocks[i]` under `keys[i]`, for
    /// every `i`: what `Aes128Prf::new(&keys[i]).eval_block(&blocks[i])`
    /// gives, with the key schedules expanded side by side (one key per
    /// block, as an Aura entry keys each of its pads with a GGM leaf).
    /// Counts `keys.len()` calls. Fails if the lengths differ.
    pub fn eval_each(keys: &[Key<16>], blocks: &mut [[u8; 16]]) -> Result<()> {
        if keys.len() != blocks.len() {
            return Err(Error::InvalidLength {
                what: "blocks, one per key",
                expected: keys.len(),
                actual: blocks.len(),
            });
        }
        counter::record(Primitive::Prf, keys.len() as u64);
        use crate::aes_many::{block, bytes, encrypt_each};
        let mut raw: Vec<u128> = keys.iter().map(|k| block(k.as_bytes())).collect();
        let mut out: Vec<u128> = blocks.iter().map(block).collect();
        encrypt_each::<1>(&raw, &mut out);
        for (b, o) in blocks.iter_mut().zip(&out) {
            *b = bytes(*o);
        }
        raw.zeroize();
        out.zeroize();
        Ok(())
    }

    /// One AES block, not counted: for primitives of this crate that count
    /// the call themselves.
    #[inline]
    pub(crate) fn encrypt_uncounted(&self, input: &[u8; 16]) -> [u8; 16] {
        let mut block = *input;
        self.cipher.encrypt_block((&mut block).into());
        block
    }

    /// Pipelined AES over `blocks`, not counted.
    pub(crate) fn encrypt_in_place_uncounted(&self, blocks: &mut [[u8; 16]]) {
        let mut buf = [Block::default(); CHUNK];
        for chunk in blocks.chunks_mut(CHUNK) {
            let buf = &mut buf[..chunk.len()];
            for (b, s) in buf.iter_mut().zip(chunk.iter()) {
                *b = (*s).into();
            }
            self.cipher.encrypt_blocks(buf);
            for (d, b) in chunk.iter_mut().zip(buf.iter()) {
                *d = (*b).into();
            }
        }
    }
}

impl Prf for Aes128Prf {
    type Key = Key<16>;
    type Input = [u8; 16];
    type Output = [u8; 16];

    fn new(key: &Key<16>) -> Self {
        Aes128Prf::new(key)
    }

    #[inline]
    fn eval(&self, input: &[u8; 16]) -> [u8; 16] {
        self.eval_block(input)
    }
}

/// The key schedule is wiped by `aes` (built with its `zeroize` feature).
impl ZeroizeOnDrop for Aes128Prf {}

impl fmt::Debug for Aes128Prf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Aes128Prf([redacted])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_matches_single_calls_across_chunk_boundaries() {
        let prf = Aes128Prf::new(&Key::from_bytes([9; 16]));
        let inputs: Vec<[u8; 16]> = (0..(2 * CHUNK as u32 + 5))
            .map(|i| {
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&i.to_le_bytes());
                b
            })
            .collect();
        let mut out = vec![[0u8; 16]; inputs.len()];
        prf.eval_batch(&inputs, &mut out).expect("same lengths");
        for (i, o) in inputs.iter().zip(&out) {
            assert_eq!(prf.eval_block(i), *o);
        }
        let mut in_place = inputs.clone();
        prf.eval_in_place(&mut in_place);
        assert_eq!(in_place, out);
        assert!(prf.eval_batch(&inputs, &mut out[1..]).is_err());
    }

    #[test]
    fn each_key_on_its_block_matches_one_prf_per_key() {
        let keys: Vec<Key<16>> = (0..19u8).map(|i| Key::from_bytes([i; 16])).collect();
        let blocks: Vec<[u8; 16]> = (0..19u8).map(|i| [i.wrapping_mul(37); 16]).collect();
        let mut each = blocks.clone();
        let ((), counts) =
            counter::measure(|| Aes128Prf::eval_each(&keys, &mut each).expect("same lengths"));
        assert_eq!(counts.total(Primitive::Prf), 19);
        for ((k, b), e) in keys.iter().zip(&blocks).zip(&each) {
            assert_eq!(Aes128Prf::new(k).eval_block(b), *e);
        }
        assert!(Aes128Prf::eval_each(&keys, &mut each[1..]).is_err());
    }

    #[test]
    fn debug_is_redacted() {
        let prf = Aes128Prf::new(&Key::from_bytes([9; 16]));
        assert_eq!(format!("{prf:?}"), "Aes128Prf([redacted])");
    }
}
