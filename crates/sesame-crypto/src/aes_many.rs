//! AES-128 and AES-256 under many keys at once: each key's schedule
//! expanded and its blocks encrypted side by side, for the GGM tree (one
//! AES-128 key per node), the schemes that key AES with a GGM leaf, and
//! batches of AES-256-GCM-SIV messages (one key-generating key and one
//! message key per message, `aead::Aes256GcmSiv::seal_each`).
//!
//! The `aes` crate expands one key at a time: about 46 ns an AES-128 key
//! here through its autodetecting `Aes128Enc` (ten dependent
//! `aeskeygenassist` steps, and a copy of its key schedule union on every
//! `new`; thirteen steps for AES-256), whatever the caller does around it.
//! A GGM level, an Aura entry or an SDd update has tens of independent
//! keys; expanding them side by side lets the CPU overlap them:
//!
//! - with AVX-512 and VAES, four keys per 512-bit register and up to
//!   sixteen in flight;
//! - with AES-NI alone, up to eight keys in 128-bit registers;
//! - otherwise, through the `aes` crate, key by key.
//!
//! Both instruction-set kernels are one generic kernel (`rounds_on`) over
//! the register width and the key length (one block, AES-128; two,
//! AES-256), and step the schedule in the `aesenclast` form (Gueron's
//! white paper, section "key expansion using AESENCLAST"): the last round
//! key's `w3` shuffled into every word (rotated, or not for AES-256's odd
//! steps), then one `aesenclast` with the round constant in every word.
//!
//! The same batches' POLYVAL (RFC 8452), each message under its own key,
//! runs here too ([`polyval_each`]): with PCLMULQDQ, the `polyval` crate's
//! multiplication on several messages in turn, so that their independent
//! multiplications overlap; otherwise through that crate. Tested against
//! it and RFC 8452's example.
//!
//! All three compute FIPS 197 AES-128 and AES-256, byte for byte the
//! `aes` crate's (the tests compare them on random keys and blocks, every
//! path this CPU has). The round keys live in registers and in the stack frame of the
//! call; the frame's copies are overwritten before it returns.
//!
//! `unsafe` here: the one call into the function compiled for the
//! detected instruction set (Rust requires `unsafe` to call a
//! `#[target_feature]` function from code that lacks the feature); the
//! feature is detected at run time just before. The register types'
//! methods (`Zmm`, `Xmm`) call their intrinsics in `unsafe` blocks too:
//! they have no `target_feature` of their own, are private, and are only
//! called (inlined) from the kernel of their instruction set, after the
//! same detection. The unaligned 64-byte loads and stores of the VAES
//! kernel read and write arrays of exactly that size.

/// `blocks[i * P + p]` becomes `AES-128_{keys[i]}(blocks[i * P + p])`:
/// `P` blocks under each key. Keys and blocks are 16-byte strings read as
/// little-endian `u128` ([`block`], [`bytes`]), so that wiping a copy is
/// one store per block. Not counted (callers count in their terms).
///
/// # Panics
///
/// If `blocks.len() != keys.len() * P` (a caller's invariant).
pub(crate) fn encrypt_each<const P: usize>(keys: &[u128], blocks: &mut [u128]) {
    let (keys, []) = keys.as_chunks::<1>() else {
        unreachable!("chunks of one")
    };
    each::<1, P>(keys, blocks);
}

/// [`encrypt_each`] for AES-256: a key is its two 16-byte halves, in
/// order, each read as [`block`] reads it.
///
/// # Panics
///
/// If `blocks.len() != keys.len() * P` (a caller's invariant).
pub(crate) fn encrypt_each_256<const P: usize>(keys: &[[u128; 2]], blocks: &mut [u128]) {
    each::<2, P>(keys, blocks);
}

/// AES with keys of `NK` blocks (1: AES-128, 2: AES-256), `P` blocks per
/// key, on the best path this CPU has.
fn each<const NK: usize, const P: usize>(keys: &[[u128; NK]], blocks: &mut [u128]) {
    assert_eq!(blocks.len(), keys.len() * P, "P blocks per key");
    #[cfg(target_arch = "x86_64")]
    {
        if x86::vaes() {
            x86::each_vaes::<NK, P>(keys, blocks);
            return;
        }
        if x86::aesni() {
            x86::each_aesni::<NK, P>(keys, blocks);
            return;
        }
    }
    portable::each::<NK, P>(keys, blocks);
}

/// POLYVAL (RFC 8452) of many messages, each under its own key,
/// side by side: `out[i]` becomes POLYVAL under `keys[i]` of the blocks
/// `blocks[start..start + len]`, `(start, len) = spans[i]` (keys, blocks
/// and results read as [`block`] reads a 16-byte string). The batches of
/// AES-256-GCM-SIV messages (`aead::Aes256GcmSiv::seal_each`) hash each
/// message under a fresh key, so no precomputed powers of a key pay off;
/// but one message's multiplications depend each on the one before, and
/// those of several messages do not, so the CPU overlaps them. With
/// PCLMULQDQ, the `polyval` crate's multiplication, several messages in
/// turn; otherwise, through the `polyval` crate, message by message.
///
/// # Panics
///
/// If the lengths of `keys`, `spans` and `out` differ, or a span is
/// outside `blocks` (a caller's invariant).
pub(crate) fn polyval_each(
    keys: &[u128],
    blocks: &[u128],
    spans: &[(usize, usize)],
    out: &mut [u128],
) {
    assert!(
        keys.len() == spans.len() && spans.len() == out.len(),
        "a key, a span and a result per message"
    );
    #[cfg(target_arch = "x86_64")]
    {
        if x86::clmul() {
            x86::polyval_each(keys, blocks, spans, out);
            return;
        }
    }
    portable::polyval_each(keys, blocks, spans, out);
}

/// A 16-byte string as [`encrypt_each`] takes it.
pub(crate) fn block(bytes: &[u8; 16]) -> u128 {
    u128::from_le_bytes(*bytes)
}

/// The 16-byte string of a block of [`encrypt_each`].
pub(crate) fn bytes(block: u128) -> [u8; 16] {
    block.to_le_bytes()
}

/// Rounds of AES with a key of `NK` blocks: 10 (AES-128), 14 (AES-256).
const fn rounds(nk: usize) -> usize {
    6 + 4 * nk
}

/// FIPS 197's round constants (AES-128 uses ten, AES-256 seven).
const RCON: [i32; 10] = [0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x1b, 0x36];

/// Key by key through the `aes` crate.
mod portable {
    use aes::cipher::consts::U16;
    use aes::cipher::{BlockEncrypt, KeyInit};
    use aes::{Aes128Enc, Aes256Enc, Block};
    use zeroize::Zeroize;

    pub(super) fn each<const NK: usize, const P: usize>(keys: &[[u128; NK]], blocks: &mut [u128]) {
        for (key, chunk) in keys.iter().zip(blocks.chunks_exact_mut(P)) {
            let mut k = [0u8; 32];
            for (to, half) in k.chunks_exact_mut(16).zip(key) {
                to.copy_from_slice(&super::bytes(*half));
            }
            match NK {
                1 => run(&Aes128Enc::new(k[..16].into()), chunk),
                _ => run(&Aes256Enc::new((&k).into()), chunk),
            }
            k.zeroize();
        }
    }

    fn run(cipher: &impl BlockEncrypt<BlockSize = U16>, chunk: &mut [u128]) {
        for b in chunk {
            let mut x = Block::from(super::bytes(*b));
            cipher.encrypt_block(&mut x);
            *b = u128::from_le_bytes(x.into());
            x.as_mut_slice().zeroize();
        }
    }

    /// [`super::polyval_each`] through the `polyval` crate.
    pub(super) fn polyval_each(
        keys: &[u128],
        blocks: &[u128],
        spans: &[(usize, usize)],
        out: &mut [u128],
    ) {
        use polyval::universal_hash::{KeyInit, UniversalHash};
        for ((key, &(start, len)), out) in keys.iter().zip(spans).zip(out) {
            let mut mac = polyval::Polyval::new(&super::bytes(*key).into());
            for b in &blocks[start..start + len] {
                mac.update(&[super::bytes(*b).into()]);
            }
            *out = super::block(&mac.finalize().into());
        }
    }

    #[cfg(test)]
    pub(super) use each as reference;
    #[cfg(test)]
    pub(super) use polyval_each as polyval_reference;
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86 {
    use core::arch::x86_64::*;
    use core::hint::black_box;

    use zeroize::Zeroize;

    use super::{rounds, RCON};

    /// AVX-512 with VAES (and AES-NI, which VAES extends).
    pub(super) fn vaes() -> bool {
        std::arch::is_x86_feature_detected!("aes")
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("vaes")
    }

    /// AES-NI (and SSSE3 and SSE4.1 to shuffle and move words).
    pub(super) fn aesni() -> bool {
        std::arch::is_x86_feature_detected!("aes")
            && std::arch::is_x86_feature_detected!("ssse3")
            && std::arch::is_x86_feature_detected!("sse4.1")
    }

    /// Keys per call of the VAES kernel: four 512-bit registers of four.
    const VAES_KEYS: usize = 16;

    pub(super) fn each_vaes<const NK: usize, const P: usize>(
        keys: &[[u128; NK]],
        blocks: &mut [u128],
    ) {
        // The kernel's operands, padded with zeros to whole registers:
        // `k[h][i]` is block `h` of key `i`.
        let mut k = [[0u128; VAES_KEYS]; NK];
        let mut b = [[0u128; VAES_KEYS]; P];
        for (keys, blocks) in keys.chunks(VAES_KEYS).zip(blocks.chunks_mut(VAES_KEYS * P)) {
            let n = keys.len();
            for (h, kh) in k.iter_mut().enumerate() {
                for (to, key) in kh.iter_mut().zip(keys) {
                    *to = key[h];
                }
                kh[n..].fill(0);
            }
            for (i, per_key) in blocks.chunks_exact(P).enumerate() {
                for (bp, block) in b.iter_mut().zip(per_key) {
                    bp[i] = *block;
                }
            }
            // SAFETY: `vaes()` found every feature the kernels enable.
            unsafe {
                match n {
                    1..=4 => vaes_kernel::<NK, 1, P>(&k, &mut b),
                    5..=8 => vaes_kernel::<NK, 2, P>(&k, &mut b),
                    9..=12 => vaes_kernel::<NK, 3, P>(&k, &mut b),
                    _ => vaes_kernel::<NK, 4, P>(&k, &mut b),
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

    /// The key schedule and the rounds, on 128-bit lanes of whatever
    /// width: `V` is a register of one or four lanes (AES-NI, VAES).
    /// The schedule step is the `aesenclast` form (Gueron's white paper,
    /// "key expansion using AESENCLAST"): each 32-bit word of `last`
    /// shuffled to `RotWord(w3)` (or `w3`, AES-256's odd steps), then one
    /// `aesenclast` with the round constant in every word: every column
    /// equal, ShiftRows is the identity, so each word is
    /// `SubWord(RotWord(w3)) ^ rcon`.
    trait Lanes: Copy {
        /// Each word of every lane `RotWord(w3)` (`rot`) or `w3`.
        fn w3(self, rot: bool) -> Self;
        /// `aesenclast(self, rcon in every word)`.
        fn sub(self, rcon: i32) -> Self;
        /// `w0, w0^w1, w0^w1^w2, w0^w1^w2^w3` in every lane.
        fn prefix_xor(self) -> Self;
        fn xor(self, other: Self) -> Self;
        fn enc(self, round_key: Self) -> Self;
        fn enc_last(self, round_key: Self) -> Self;
        fn zero() -> Self;
    }

    /// One step of the schedule: the round key after the last `NK`,
    /// `w[0]` the oldest; step `i` counted from 0.
    #[inline(always)]
    fn schedule_step<const NK: usize, V: Lanes>(w: &mut [V; NK], i: usize) -> V {
        let last = w[NK - 1];
        let t = if i.is_multiple_of(NK) {
            last.w3(true).sub(RCON[i / NK])
        } else {
            last.w3(false).sub(0)
        };
        let new = w[0].prefix_xor().xor(t);
        w.copy_within(1.., 0);
        w[NK - 1] = new;
        new
    }

    /// Expands `M` keys (`k[h][j]`: block `h` of key `j`) and encrypts
    /// `b[p][j]` under key `j`, for every `p`, round by round.
    #[inline(always)]
    fn rounds_on<const NK: usize, const M: usize, const P: usize, V: Lanes>(
        mut k: [[V; M]; NK],
        b: &mut [[V; M]; P],
    ) {
        for bp in b.iter_mut() {
            for (x, k0) in bp.iter_mut().zip(&k[0]) {
                *x = x.xor(*k0);
            }
        }
        let last = rounds(NK);
        for r in 1..=last {
            for j in 0..M {
                let rk = if r < NK {
                    k[r][j]
                } else {
                    let mut w: [V; NK] = core::array::from_fn(|h| k[h][j]);
                    let rk = schedule_step(&mut w, r - NK);
                    for (h, wh) in w.into_iter().enumerate() {
                        k[h][j] = wh;
                    }
                    rk
                };
                for bp in b.iter_mut() {
                    bp[j] = if r == last {
                        bp[j].enc_last(rk)
                    } else {
                        bp[j].enc(rk)
                    };
                }
            }
        }
        // The last round keys, in the frame if they were spilled.
        k = [[V::zero(); M]; NK];
        black_box(&k);
    }

    /// Four 128-bit lanes (VAES).
    #[derive(Clone, Copy)]
    struct Zmm(__m512i);

    impl Lanes for Zmm {
        #[inline(always)]
        fn w3(self, rot: bool) -> Self {
            // SAFETY: only called from the VAES kernel, which enables
            // every feature used here.
            unsafe {
                let order = if rot {
                    _mm_set_epi8(
                        12, 15, 14, 13, 12, 15, 14, 13, 12, 15, 14, 13, 12, 15, 14, 13,
                    )
                } else {
                    _mm_set_epi8(
                        15, 14, 13, 12, 15, 14, 13, 12, 15, 14, 13, 12, 15, 14, 13, 12,
                    )
                };
                Zmm(_mm512_shuffle_epi8(self.0, _mm512_broadcast_i32x4(order)))
            }
        }
        #[inline(always)]
        fn sub(self, rcon: i32) -> Self {
            // SAFETY: as for `w3`.
            unsafe { Zmm(_mm512_aesenclast_epi128(self.0, _mm512_set1_epi32(rcon))) }
        }
        #[inline(always)]
        fn prefix_xor(self) -> Self {
            // SAFETY: as for `w3`.
            unsafe {
                let mut x = self.0;
                let mut s = _mm512_bslli_epi128::<4>(x);
                x = _mm512_xor_si512(x, s);
                s = _mm512_bslli_epi128::<4>(s);
                x = _mm512_xor_si512(x, s);
                s = _mm512_bslli_epi128::<4>(s);
                Zmm(_mm512_xor_si512(x, s))
            }
        }
        #[inline(always)]
        fn xor(self, other: Self) -> Self {
            // SAFETY: as for `w3`.
            unsafe { Zmm(_mm512_xor_si512(self.0, other.0)) }
        }
        #[inline(always)]
        fn enc(self, round_key: Self) -> Self {
            // SAFETY: as for `w3`.
            unsafe { Zmm(_mm512_aesenc_epi128(self.0, round_key.0)) }
        }
        #[inline(always)]
        fn enc_last(self, round_key: Self) -> Self {
            // SAFETY: as for `w3`.
            unsafe { Zmm(_mm512_aesenclast_epi128(self.0, round_key.0)) }
        }
        #[inline(always)]
        fn zero() -> Self {
            // SAFETY: as for `w3`.
            unsafe { Zmm(_mm512_setzero_si512()) }
        }
    }

    /// The first `4 * M` keys of `keys` (`M <= 4`), and for each `P`
    /// blocks, `blocks[p][i]` under `keys[i]`.
    #[target_feature(enable = "aes,avx512f,avx512bw,vaes")]
    fn vaes_kernel<const NK: usize, const M: usize, const P: usize>(
        keys: &[[u128; VAES_KEYS]; NK],
        blocks: &mut [[u128; VAES_KEYS]; P],
    ) {
        let k: [[Zmm; M]; NK] =
            core::array::from_fn(|h| core::array::from_fn(|j| Zmm(load4(&keys[h], j))));
        let mut b: [[Zmm; M]; P] =
            core::array::from_fn(|p| core::array::from_fn(|j| Zmm(load4(&blocks[p], j))));
        rounds_on::<NK, M, P, Zmm>(k, &mut b);
        for (bp, to) in b.iter().zip(blocks.iter_mut()) {
            for (j, v) in bp.iter().enumerate() {
                store4(to, j, v.0);
            }
        }
    }

    /// Keys per call of the AES-NI kernel.
    const NI_KEYS: usize = 8;

    pub(super) fn each_aesni<const NK: usize, const P: usize>(
        keys: &[[u128; NK]],
        blocks: &mut [u128],
    ) {
        for (k, b) in keys.chunks(NI_KEYS).zip(blocks.chunks_mut(NI_KEYS * P)) {
            // SAFETY: `aesni()` found every feature the kernels enable.
            unsafe {
                match k.len() {
                    1 => ni_kernel::<NK, 1, P>(k, b),
                    2 => ni_kernel::<NK, 2, P>(k, b),
                    3 | 4 => ni_kernel::<NK, 4, P>(k, b),
                    _ => ni_kernel::<NK, 8, P>(k, b),
                }
            }
        }
    }

    /// One 128-bit lane (AES-NI).
    #[derive(Clone, Copy)]
    struct Xmm(__m128i);

    impl Lanes for Xmm {
        #[inline(always)]
        fn w3(self, rot: bool) -> Self {
            // SAFETY: only called from the AES-NI kernel, which enables
            // every feature used here.
            unsafe {
                let order = if rot {
                    _mm_set_epi8(
                        12, 15, 14, 13, 12, 15, 14, 13, 12, 15, 14, 13, 12, 15, 14, 13,
                    )
                } else {
                    _mm_set_epi8(
                        15, 14, 13, 12, 15, 14, 13, 12, 15, 14, 13, 12, 15, 14, 13, 12,
                    )
                };
                Xmm(_mm_shuffle_epi8(self.0, order))
            }
        }
        #[inline(always)]
        fn sub(self, rcon: i32) -> Self {
            // SAFETY: as for `w3`.
            unsafe { Xmm(_mm_aesenclast_si128(self.0, _mm_set1_epi32(rcon))) }
        }
        #[inline(always)]
        fn prefix_xor(self) -> Self {
            // SAFETY: as for `w3`.
            unsafe {
                let mut x = self.0;
                let mut s = _mm_slli_si128::<4>(x);
                x = _mm_xor_si128(x, s);
                s = _mm_slli_si128::<4>(s);
                x = _mm_xor_si128(x, s);
                s = _mm_slli_si128::<4>(s);
                Xmm(_mm_xor_si128(x, s))
            }
        }
        #[inline(always)]
        fn xor(self, other: Self) -> Self {
            // SAFETY: as for `w3`.
            unsafe { Xmm(_mm_xor_si128(self.0, other.0)) }
        }
        #[inline(always)]
        fn enc(self, round_key: Self) -> Self {
            // SAFETY: as for `w3`.
            unsafe { Xmm(_mm_aesenc_si128(self.0, round_key.0)) }
        }
        #[inline(always)]
        fn enc_last(self, round_key: Self) -> Self {
            // SAFETY: as for `w3`.
            unsafe { Xmm(_mm_aesenclast_si128(self.0, round_key.0)) }
        }
        #[inline(always)]
        fn zero() -> Self {
            // SAFETY: as for `w3`.
            unsafe { Xmm(_mm_setzero_si128()) }
        }
    }

    /// Up to `M` keys (`keys.len() <= M`), `P` blocks each.
    #[target_feature(enable = "aes,ssse3,sse4.1")]
    fn ni_kernel<const NK: usize, const M: usize, const P: usize>(
        keys: &[[u128; NK]],
        blocks: &mut [u128],
    ) {
        let n = keys.len();
        let load = |b: u128| Xmm(_mm_set_epi64x((b >> 64) as i64, b as i64));
        let k: [[Xmm; M]; NK] = core::array::from_fn(|h| {
            core::array::from_fn(|j| load(keys.get(j).map_or(0, |key| key[h])))
        });
        let mut b: [[Xmm; M]; P] = core::array::from_fn(|p| {
            core::array::from_fn(|j| load(if j < n { blocks[j * P + p] } else { 0 }))
        });
        rounds_on::<NK, M, P, Xmm>(k, &mut b);
        for (p, bp) in b.iter().enumerate() {
            for (j, v) in bp.iter().enumerate().take(n) {
                let (lo, hi) = (_mm_cvtsi128_si64(v.0), _mm_extract_epi64::<1>(v.0));
                blocks[j * P + p] = u128::from(lo as u64) | (u128::from(hi as u64) << 64);
            }
        }
    }

    /// PCLMULQDQ (and SSE2).
    pub(super) fn clmul() -> bool {
        std::arch::is_x86_feature_detected!("pclmulqdq")
            && std::arch::is_x86_feature_detected!("sse2")
    }

    /// Messages hashed in turn, block by block.
    const POLYVAL_LANES: usize = 8;

    pub(super) fn polyval_each(
        keys: &[u128],
        blocks: &[u128],
        spans: &[(usize, usize)],
        out: &mut [u128],
    ) {
        for ((keys, spans), out) in keys
            .chunks(POLYVAL_LANES)
            .zip(spans.chunks(POLYVAL_LANES))
            .zip(out.chunks_mut(POLYVAL_LANES))
        {
            // SAFETY: `clmul()` found every feature the kernel enables;
            // the spans are inside `blocks` (checked by slicing).
            unsafe { polyval_kernel(keys, blocks, spans, out) }
        }
    }

    /// Up to [`POLYVAL_LANES`] messages: at each block index, one
    /// multiplication for each message that has a block there.
    #[target_feature(enable = "pclmulqdq,sse2")]
    unsafe fn polyval_kernel(
        keys: &[u128],
        blocks: &[u128],
        spans: &[(usize, usize)],
        out: &mut [u128],
    ) {
        let load = |b: u128| _mm_set_epi64x((b >> 64) as i64, b as i64);
        let mut h = [_mm_setzero_si128(); POLYVAL_LANES];
        let mut y = [_mm_setzero_si128(); POLYVAL_LANES];
        let mut message: [&[u128]; POLYVAL_LANES] = [&[]; POLYVAL_LANES];
        for (j, (key, &(start, len))) in keys.iter().zip(spans).enumerate() {
            h[j] = load(*key);
            message[j] = &blocks[start..start + len];
        }
        let longest = message.iter().map(|m| m.len()).max().unwrap_or(0);
        for i in 0..longest {
            for j in 0..POLYVAL_LANES {
                if let Some(&x) = message[j].get(i) {
                    y[j] = polyval_mul(_mm_xor_si128(y[j], load(x)), h[j]);
                }
            }
        }
        for (o, v) in out.iter_mut().zip(&y) {
            let (lo, hi) = (_mm_cvtsi128_si64(*v), _mm_extract_epi64::<1>(*v));
            *o = u128::from(lo as u64) | (u128::from(hi as u64) << 64);
        }
        // The keys' and the sums' copies in this frame.
        for v in h.iter_mut().chain(y.iter_mut()) {
            *v = black_box(_mm_setzero_si128());
        }
    }

    /// `y * h` in POLYVAL's field (RFC 8452: the product times `x^-128`
    /// modulo `x^128 + x^127 + x^126 + x^121 + 1`), as the `polyval`
    /// crate's PCLMULQDQ backend computes it (Karatsuba, then the
    /// reduction by shifts).
    #[inline(always)]
    unsafe fn polyval_mul(y: __m128i, h: __m128i) -> __m128i {
        let h1 = _mm_shuffle_epi32(h, 0x0E);
        let h2 = _mm_xor_si128(h, h1);
        let y1 = _mm_shuffle_epi32(y, 0x0E);
        let y2 = _mm_xor_si128(y, y1);
        let t0 = _mm_clmulepi64_si128(y, h, 0x00);
        let t1 = _mm_clmulepi64_si128(y, h, 0x11);
        let t2 = _mm_clmulepi64_si128(y2, h2, 0x00);
        let t2 = _mm_xor_si128(t2, _mm_xor_si128(t0, t1));
        let v0 = t0;
        let v1 = _mm_xor_si128(_mm_shuffle_epi32(t0, 0x0E), t2);
        let v2 = _mm_xor_si128(t1, _mm_shuffle_epi32(t2, 0x0E));
        let v3 = _mm_shuffle_epi32(t1, 0x0E);
        let x = |a, b| _mm_xor_si128(a, b);
        let v2 = x(
            x(v2, v0),
            x(
                x(_mm_srli_epi64(v0, 1), _mm_srli_epi64(v0, 2)),
                _mm_srli_epi64(v0, 7),
            ),
        );
        let v1 = x(
            x(v1, _mm_slli_epi64(v0, 63)),
            x(_mm_slli_epi64(v0, 62), _mm_slli_epi64(v0, 57)),
        );
        let v3 = x(
            x(v3, v1),
            x(
                x(_mm_srli_epi64(v1, 1), _mm_srli_epi64(v1, 2)),
                _mm_srli_epi64(v1, 7),
            ),
        );
        let v2 = x(
            x(v2, _mm_slli_epi64(v1, 63)),
            x(_mm_slli_epi64(v1, 62), _mm_slli_epi64(v1, 57)),
        );
        _mm_unpacklo_epi64(v2, v3)
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

    /// FIPS 197, appendix C.3 (AES-256).
    #[test]
    fn fips_197_example_256() {
        let key: [u8; 32] = core::array::from_fn(|i| i as u8);
        let halves = [
            block(key[..16].try_into().expect("16")),
            block(key[16..].try_into().expect("16")),
        ];
        let mut out = block(&core::array::from_fn(|i| (i as u8) * 0x11));
        encrypt_each_256::<1>(&[halves], core::slice::from_mut(&mut out));
        assert_eq!(
            bytes(out),
            [
                0x8e, 0xa2, 0xb7, 0xca, 0x51, 0x67, 0x45, 0xbf, 0xea, 0xfc, 0x49, 0x90, 0x4b, 0x49,
                0x60, 0x89
            ]
        );
    }

    /// The blocks of every path this CPU has, against the `aes` crate's.
    fn every_path<const NK: usize, const P: usize>(keys: &[[u128; NK]], blocks: &[u128]) {
        let what = format!(
            "AES with {NK}-block keys, {} keys, {P} blocks each",
            keys.len()
        );
        let mut expected = blocks.to_vec();
        portable::reference::<NK, P>(keys, &mut expected);
        let mut got = blocks.to_vec();
        each::<NK, P>(keys, &mut got);
        assert_eq!(got, expected, "{what}");
        #[cfg(target_arch = "x86_64")]
        {
            if x86::aesni() {
                let mut got = blocks.to_vec();
                x86::each_aesni::<NK, P>(keys, &mut got);
                assert_eq!(got, expected, "AES-NI, {what}");
            }
            if x86::vaes() {
                let mut got = blocks.to_vec();
                x86::each_vaes::<NK, P>(keys, &mut got);
                assert_eq!(got, expected, "VAES, {what}");
            }
        }
    }

    /// Every path this CPU has gives the `aes` crate's blocks, AES-128
    /// and AES-256, for every number of keys up to two kernels' worth and
    /// one, two, four or six blocks each.
    #[test]
    fn every_path_equals_the_aes_crate() {
        for n in 0..40 {
            let seed = n as u64;
            let keys = random(n, seed);
            let keys128: Vec<[u128; 1]> = keys.iter().map(|&k| [k]).collect();
            let keys256: Vec<[u128; 2]> = keys
                .iter()
                .zip(random(n, 300 + seed))
                .map(|(&a, b)| [a, b])
                .collect();
            every_path::<1, 1>(&keys128, &random(n, 100 + seed));
            every_path::<1, 2>(&keys128, &random(2 * n, 200 + seed));
            every_path::<2, 1>(&keys256, &random(n, 400 + seed));
            every_path::<2, 2>(&keys256, &random(2 * n, 500 + seed));
            every_path::<2, 4>(&keys256, &random(4 * n, 600 + seed));
            every_path::<2, 6>(&keys256, &random(6 * n, 700 + seed));
            let mut got = random(n, 100 + seed);
            let mut expected = got.clone();
            encrypt_each::<1>(&keys, &mut got);
            portable::reference::<1, 1>(&keys128, &mut expected);
            assert_eq!(got, expected, "encrypt_each, {n} keys");
        }
    }

    /// POLYVAL of every path this CPU has equals the `polyval` crate's,
    /// for batches of every size up to three kernels' worth, messages of
    /// 0 to 12 blocks; and RFC 8452's POLYVAL example (appendix A).
    #[test]
    fn polyval_of_every_path_equals_the_polyval_crate() {
        for n in 0..26usize {
            let seed = 800 + n as u64;
            let keys = random(n, seed);
            let lens: Vec<usize> = (0..n).map(|i| (i * 7 + n) % 13).collect();
            let blocks = random(lens.iter().sum(), seed + 1000);
            let mut spans = Vec::new();
            let mut start = 0;
            for len in &lens {
                spans.push((start, *len));
                start += len;
            }
            let mut expected = vec![0; n];
            portable::polyval_reference(&keys, &blocks, &spans, &mut expected);
            let mut got = vec![1; n];
            polyval_each(&keys, &blocks, &spans, &mut got);
            assert_eq!(got, expected, "{n} messages");
        }
        let hex = |s: &str| -> u128 {
            let b: Vec<u8> = (0..16)
                .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
                .collect();
            block(b.as_slice().try_into().expect("16 bytes"))
        };
        let key = hex("25629347589242761d31f826ba4b757b");
        let blocks = [
            hex("4f4f95668c83dfb6401762bb2d01a262"),
            hex("d1a24ddd2721d006bbe45f20d3c9f362"),
        ];
        let mut got = [0];
        polyval_each(&[key], &blocks, &[(0, 2)], &mut got);
        assert_eq!(got[0], hex("f7a3b47b846119fae5b7866cf5e5b77e"));
    }

    #[test]
    #[should_panic(expected = "P blocks per key")]
    fn a_wrong_number_of_blocks_is_a_caller_bug() {
        encrypt_each::<2>(&[0], &mut [0]);
    }
}
