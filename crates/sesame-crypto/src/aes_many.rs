//! AES-128 under many keys at once: each key's schedule expanded and its
//! blocks encrypted side by side, for the GGM tree (one key per node) and
//! the schemes that key AES with a GGM leaf.
//!
//! The `aes` crate expands one key at a time: about 46 ns a key here
//! through its autodetecting `Aes128Enc` (ten dependent `aeskeygenassist`
//! steps, and a copy of its 704-byte key schedule union on every `new`),
//! whatever the caller does around it. A GGM level or an Aura entry has
//! tens of independent keys; expanding them side by side lets the CPU
//! overlap them:
//!
//! - with AVX-512 and VAES, four keys per 512-bit register and up to
//!   sixteen in flight; the schedule step is the `aesenclast` form
//!   (`SubWord(RotWord(w3)) ^ rcon` by a byte shuffle and one
//!   `aesenclast`, Gueron's white paper, section "key expansion using
//!   AESENCLAST"), which the VAES registers take four keys at a time;
//! - with AES-NI alone, up to eight keys in 128-bit registers with
//!   `aeskeygenassist` (as the `aes` crate does, interleaved);
//! - otherwise, through the `aes` crate, key by key.
//!
//! All three compute FIPS 197 AES-128, byte for byte the `aes` crate's
//! (the tests compare them on random keys and blocks, every path this CPU
//! has). The round keys live in registers and in the stack frame of the
//! call; the frame's copies are overwritten before it returns.
//!
//! `unsafe` here: the one call into the function compiled for the
//! detected instruction set (Rust requires `unsafe` to call a
//! `#[target_feature]` function from code that lacks the feature); the
//! feature is detected at run time just before. The intrinsics themselves
//! are called from safe code (none of them takes a pointer).

/// `blocks[i * P + p]` becomes `AES_{keys[i]}(blocks[i * P + p])`: `P`
/// blocks under each key. Keys and blocks are 16-byte strings read as
/// little-endian `u128` ([`block`], [`bytes`]), so that wiping a copy is
/// one store per block. Not counted (callers count in their terms).
///
/// # Panics
///
/// If `blocks.len() != keys.len() * P` (a caller's invariant).
pub(crate) fn encrypt_each<const P: usize>(keys: &[u128], blocks: &mut [u128]) {
    assert_eq!(blocks.len(), keys.len() * P, "P blocks per key");
    #[cfg(target_arch = "x86_64")]
    {
        if x86::vaes() {
            x86::each_vaes::<P>(keys, blocks);
            return;
        }
        if x86::aesni() {
            x86::each_aesni::<P>(keys, blocks);
            return;
        }
    }
    portable::each::<P>(keys, blocks);
}

/// A 16-byte string as [`encrypt_each`] takes it.
pub(crate) fn block(bytes: &[u8; 16]) -> u128 {
    u128::from_le_bytes(*bytes)
}

/// The 16-byte string of a block of [`encrypt_each`].
pub(crate) fn bytes(block: u128) -> [u8; 16] {
    block.to_le_bytes()
}

/// Key by key through the `aes` crate.
mod portable {
    use aes::cipher::{BlockEncrypt, KeyInit};
    use aes::{Aes128Enc, Block};
    use zeroize::Zeroize;

    pub(super) fn each<const P: usize>(keys: &[u128], blocks: &mut [u128]) {
        for (key, chunk) in keys.iter().zip(blocks.chunks_exact_mut(P)) {
            let mut k = super::bytes(*key);
            let cipher = Aes128Enc::new((&k).into());
            k.zeroize();
            for b in chunk {
                let mut x = Block::from(super::bytes(*b));
                cipher.encrypt_block(&mut x);
                *b = u128::from_le_bytes(x.into());
                x.as_mut_slice().zeroize();
            }
        }
    }

    #[cfg(test)]
    pub(super) use each as reference;
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86 {
    use core::arch::x86_64::*;
    use core::hint::black_box;

    use zeroize::Zeroize;

    /// AVX-512 with VAES (and AES-NI, which VAES extends).
    pub(super) fn vaes() -> bool {
        std::arch::is_x86_feature_detected!("aes")
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("vaes")
    }

    /// AES-NI (and SSE4.1 to move words in and out).
    pub(super) fn aesni() -> bool {
        std::arch::is_x86_feature_detected!("aes") && std::arch::is_x86_feature_detected!("sse4.1")
    }

    /// Keys per call of the VAES kernel: four 512-bit registers of four.
    const VAES_KEYS: usize = 16;

    pub(super) fn each_vaes<const P: usize>(keys: &[u128], blocks: &mut [u128]) {
        // The kernel's operands, padded with zeros to whole registers.
        let mut k = [0u128; VAES_KEYS];
        let mut b = [[0u128; VAES_KEYS]; P];
        for (keys, blocks) in keys.chunks(VAES_KEYS).zip(blocks.chunks_mut(VAES_KEYS * P)) {
            let n = keys.len();
            k[..n].copy_from_slice(keys);
            k[n..].fill(0);
            for (i, per_key) in blocks.chunks_exact(P).enumerate() {
                for (bp, block) in b.iter_mut().zip(per_key) {
                    bp[i] = *block;
                }
            }
            // SAFETY: `vaes()` found every feature the kernels enable.
            unsafe {
                match n {
                    1..=4 => vaes_kernel::<1, P>(&k, &mut b),
                    5..=8 => vaes_kernel::<2, P>(&k, &mut b),
                    9..=12 => vaes_kernel::<3, P>(&k, &mut b),
                    _ => vaes_kernel::<4, P>(&k, &mut b),
                }
            }
            for (i, per_key) in blocks.chunks_exact_mut(P).enumerate() {
                for (bp, block) in b.iter().zip(per_key) {
                    *block = bp[i];
                }
            }
        }
        k.zeroize();
        b.zeroize();
    }

    /// Blocks `4j..4j + 4` of `from` in one register.
    #[target_feature(enable = "avx512f")]
    fn load4(from: &[u128; VAES_KEYS], j: usize) -> __m512i {
        let four: &[u128; 4] = from[4 * j..4 * j + 4]
            .try_into()
            .expect("four blocks of sixteen");
        // SAFETY: `four` is 64 readable bytes; the load is unaligned.
        unsafe { _mm512_loadu_si512(four.as_ptr().cast()) }
    }

    /// `v` into blocks `4j..4j + 4` of `to`.
    #[target_feature(enable = "avx512f")]
    fn store4(to: &mut [u128; VAES_KEYS], j: usize, v: __m512i) {
        let four: &mut [u128; 4] = (&mut to[4 * j..4 * j + 4])
            .try_into()
            .expect("four blocks of sixteen");
        // SAFETY: `four` is 64 writable bytes; the store is unaligned.
        unsafe { _mm512_storeu_si512(four.as_mut_ptr().cast(), v) }
    }

    /// The first `4 * M` keys of `keys` (`M <= 4`), and for each `P`
    /// blocks, `blocks[p][i]` under `keys[i]`.
    #[target_feature(enable = "aes,avx512f,avx512bw,vaes")]
    fn vaes_kernel<const M: usize, const P: usize>(
        keys: &[u128; VAES_KEYS],
        blocks: &mut [[u128; VAES_KEYS]; P],
    ) {
        let mut k = [_mm512_setzero_si512(); M];
        for (j, kj) in k.iter_mut().enumerate() {
            *kj = load4(keys, j);
        }
        let mut b = [[_mm512_setzero_si512(); M]; P];
        for (bp, from) in b.iter_mut().zip(blocks.iter()) {
            for (j, bj) in bp.iter_mut().enumerate() {
                *bj = _mm512_xor_si512(load4(from, j), k[j]);
            }
        }
        // Each 32-bit word of a lane becomes RotWord(w3): bytes 13, 14,
        // 15, 12 of the lane.
        let rot = _mm512_broadcast_i32x4(_mm_set_epi8(
            12, 15, 14, 13, 12, 15, 14, 13, 12, 15, 14, 13, 12, 15, 14, 13,
        ));
        const RCON: [i32; 10] = [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1b, 0x36];
        for (round, rc) in RCON.into_iter().enumerate() {
            let rcon = _mm512_set1_epi32(rc);
            for j in 0..M {
                // Every column equal, so ShiftRows is the identity:
                // SubWord(RotWord(w3)) ^ rcon in each word.
                let t = _mm512_aesenclast_epi128(_mm512_shuffle_epi8(k[j], rot), rcon);
                // w0, w0^w1, w0^w1^w2, w0^w1^w2^w3.
                let mut x = k[j];
                let mut s = _mm512_bslli_epi128::<4>(x);
                x = _mm512_xor_si512(x, s);
                s = _mm512_bslli_epi128::<4>(s);
                x = _mm512_xor_si512(x, s);
                s = _mm512_bslli_epi128::<4>(s);
                x = _mm512_xor_si512(x, s);
                k[j] = _mm512_xor_si512(x, t);
                for bp in b.iter_mut() {
                    bp[j] = if round == 9 {
                        _mm512_aesenclast_epi128(bp[j], k[j])
                    } else {
                        _mm512_aesenc_epi128(bp[j], k[j])
                    };
                }
            }
        }
        for (bp, to) in b.iter().zip(blocks.iter_mut()) {
            for (j, &v) in bp.iter().enumerate() {
                store4(to, j, v);
            }
        }
        // The last round keys, in the frame if they were spilled.
        k = [_mm512_setzero_si512(); M];
        black_box(&k);
    }

    /// Keys per call of the AES-NI kernel.
    const NI_KEYS: usize = 8;

    pub(super) fn each_aesni<const P: usize>(keys: &[u128], blocks: &mut [u128]) {
        for (k, b) in keys.chunks(NI_KEYS).zip(blocks.chunks_mut(NI_KEYS * P)) {
            // SAFETY: `aesni()` found every feature the kernels enable.
            unsafe {
                match k.len() {
                    1 => ni_kernel::<1, P>(k, b),
                    2 => ni_kernel::<2, P>(k, b),
                    3 | 4 => ni_kernel::<4, P>(k, b),
                    _ => ni_kernel::<8, P>(k, b),
                }
            }
        }
    }

    /// One key schedule step with `aeskeygenassist` (round constant `RC`).
    #[target_feature(enable = "aes,sse4.1")]
    fn ni_step<const RC: i32>(key: __m128i) -> __m128i {
        let t = _mm_shuffle_epi32::<0xff>(_mm_aeskeygenassist_si128::<RC>(key));
        let mut x = key;
        let mut s = _mm_slli_si128::<4>(x);
        x = _mm_xor_si128(x, s);
        s = _mm_slli_si128::<4>(s);
        x = _mm_xor_si128(x, s);
        s = _mm_slli_si128::<4>(s);
        x = _mm_xor_si128(x, s);
        _mm_xor_si128(x, t)
    }

    /// Up to `M` keys (`keys.len() <= M`), `P` blocks each.
    #[target_feature(enable = "aes,sse4.1")]
    fn ni_kernel<const M: usize, const P: usize>(keys: &[u128], blocks: &mut [u128]) {
        let n = keys.len();
        let load = |b: &u128| _mm_set_epi64x((*b >> 64) as i64, *b as i64);
        let mut k = [_mm_setzero_si128(); M];
        for (kj, key) in k.iter_mut().zip(keys) {
            *kj = load(key);
        }
        let mut b = [[_mm_setzero_si128(); M]; P];
        for (p, bp) in b.iter_mut().enumerate() {
            for (j, bj) in bp.iter_mut().enumerate().take(n) {
                *bj = _mm_xor_si128(load(&blocks[j * P + p]), k[j]);
            }
        }
        macro_rules! round {
            ($rc:literal, $enc:ident) => {
                for j in 0..M {
                    k[j] = ni_step::<$rc>(k[j]);
                    for bp in b.iter_mut() {
                        bp[j] = $enc(bp[j], k[j]);
                    }
                }
            };
        }
        round!(0x01, _mm_aesenc_si128);
        round!(0x02, _mm_aesenc_si128);
        round!(0x04, _mm_aesenc_si128);
        round!(0x08, _mm_aesenc_si128);
        round!(0x10, _mm_aesenc_si128);
        round!(0x20, _mm_aesenc_si128);
        round!(0x40, _mm_aesenc_si128);
        round!(0x80, _mm_aesenc_si128);
        round!(0x1b, _mm_aesenc_si128);
        round!(0x36, _mm_aesenclast_si128);
        for (p, bp) in b.iter().enumerate() {
            for (j, &v) in bp.iter().enumerate().take(n) {
                let (lo, hi) = (_mm_cvtsi128_si64(v), _mm_extract_epi64::<1>(v));
                blocks[j * P + p] = u128::from(lo as u64) | (u128::from(hi as u64) << 64);
            }
        }
        k = [_mm_setzero_si128(); M];
        black_box(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn random(n: usize, seed: u64) -> Vec<u128> {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        (0..n).map(|_| rng.gen()).collect()
    }

    /// FIPS 197, appendix C.1 (AES-128).
    #[test]
    fn fips_197_example() {
        let key = block(&core::array::from_fn(|i| i as u8));
        let mut out = block(&core::array::from_fn(|i| (i as u8) * 0x11));
        encrypt_each::<1>(&[key], core::slice::from_mut(&mut out));
        assert_eq!(
            bytes(out),
            [
                0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30, 0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4,
                0xc5, 0x5a
            ]
        );
    }

    /// Every path this CPU has gives the `aes` crate's blocks, for every
    /// number of keys up to two kernels' worth and one or two blocks each.
    #[test]
    fn every_path_equals_the_aes_crate() {
        for n in 0..40 {
            let keys = random(n, n as u64);
            let one = random(n, 100 + n as u64);
            let two = random(2 * n, 200 + n as u64);
            let mut expected_one = one.clone();
            portable::reference::<1>(&keys, &mut expected_one);
            let mut expected_two = two.clone();
            portable::reference::<2>(&keys, &mut expected_two);
            let mut got = one.clone();
            encrypt_each::<1>(&keys, &mut got);
            assert_eq!(got, expected_one, "{n} keys, one block");
            let mut got = two.clone();
            encrypt_each::<2>(&keys, &mut got);
            assert_eq!(got, expected_two, "{n} keys, two blocks");
            #[cfg(target_arch = "x86_64")]
            {
                if x86::aesni() {
                    let mut got = two.clone();
                    x86::each_aesni::<2>(&keys, &mut got);
                    assert_eq!(got, expected_two, "AES-NI, {n} keys");
                    let mut got = one.clone();
                    x86::each_aesni::<1>(&keys, &mut got);
                    assert_eq!(got, expected_one, "AES-NI, {n} keys");
                }
                if x86::vaes() {
                    let mut got = two.clone();
                    x86::each_vaes::<2>(&keys, &mut got);
                    assert_eq!(got, expected_two, "VAES, {n} keys");
                    let mut got = one.clone();
                    x86::each_vaes::<1>(&keys, &mut got);
                    assert_eq!(got, expected_one, "VAES, {n} keys");
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "P blocks per key")]
    fn a_wrong_number_of_blocks_is_a_caller_bug() {
        encrypt_each::<2>(&[0], &mut [0]);
    }
}
