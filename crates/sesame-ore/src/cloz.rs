//! CLOZ order-revealing encryption (Cash, Liu, O'Neill, Zhang,
//! "Parameter-hiding order revealing encryption", ASIACRYPT 2018), with a
//! property-preserving hash (PPH) built on the BLS12-381 pairing.
//!
//! The scheme starts from CLWW: for an `n`-bit plaintext, the values
//! `u_i = F(k, (i, b_1 ... b_{i-1})) + b_i` (here 127-bit integers, `F`
//! AES-128), so that at the first differing bit `i` of `x < y`,
//! `u_i(y) = u_i(x) + 1`, and no other pair of values is adjacent (but with
//! negligible probability). Each value is hashed with a PPH for the
//! property `P(a, b) = [b = a + 1]` and the list is shuffled with one random
//! permutation per encryption, so a comparison learns only whether *some*
//! pair is adjacent, not where: `n^2` PPH tests per direction.
//!
//! Ciphertexts come in left and right halves (as in Lewi-Wu): the left
//! half holds the G1 parts, the right half the G2 parts, so halves of the
//! same side cannot be paired with each other. See
//! [`PairingPph`] and `docs/schemes/cloz.md`; a fast, *insecure*
//! correctness-only PPH for benchmarks lives in [`crate::insecure`].

use core::cmp::Ordering;
use core::fmt::Debug;
use core::marker::PhantomData;

use bls12_381::{multi_miller_loop, G1Affine, G2Affine, G2Prepared, Gt, Scalar};
use rand_core::CryptoRngCore;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sesame_core::{BackwardPrivacy, Error, QueryKind, Result, SchemeDescriptor, SchemeKind};
use sesame_crypto::counter::{self, Primitive};
use sesame_crypto::{Aes128Prf, HmacPrf, Key};
use zeroize::Zeroizing;

use crate::api::{check_bits, check_plaintext, CiphertextType, LeftRight, OreScheme};
use crate::saved;

/// Descriptor of CLOZ with the pairing PPH.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "cloz",
    title: "CLOZ parameter-hiding ORE (pairing-based PPH on BLS12-381)",
    citation: "D. Cash, F.-H. Liu, A. O'Neill, C. Zhang. Reducing the Leakage in Practical \
               Order-Revealing Encryption (Parameter-Hiding Order Revealing Encryption). \
               ASIACRYPT 2018",
    kind: SchemeKind::Ore,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Range],
    leakage: "Total order, equality, and the equality pattern of the most significant \
              differing bits: for plaintexts m1, m2, m3, whether m2 differs from m1 at the \
              same bit as m3 does. Right halves alone reveal nothing.",
    doc: "docs/schemes/cloz.md",
};

/// A property-preserving hash for `P(a, b) = [b = a + 1]` on 128-bit
/// values, split in a left (query) and a right (stored) half.
pub trait Pph: Send + Sync + Sized {
    /// Hash of a value for the left side.
    type Left: CiphertextType;
    /// Hash of a value for the right side.
    type Right: CiphertextType;
    /// A right list made ready for many tests (e.g. prepared G2 points).
    type Prepared;

    /// The PPH keyed from the scheme's master key, for CLOZ over `bits`-bit
    /// plaintexts.
    fn new(master: &Key<32>, bits: u32) -> Self;

    /// The descriptor of CLOZ with this PPH.
    fn descriptor() -> &'static SchemeDescriptor;

    /// Left and right hashes of `u` (randomised); one counted Pph call.
    fn hash<R: CryptoRngCore + ?Sized>(&self, rng: &mut R, u: u128) -> (Self::Left, Self::Right);

    /// Left hash only; one counted Pph call.
    fn hash_left<R: CryptoRngCore + ?Sized>(&self, rng: &mut R, u: u128) -> Self::Left;

    /// Prepares a right list for testing.
    fn prepare(rights: &[Self::Right]) -> Self::Prepared;

    /// `[u_right = u_left + 1]` for right element `j`; one counted Pph call.
    fn test_succ(left: &Self::Left, rights: &Self::Prepared, j: usize) -> bool;

    /// `[u_left = u_right + 1]` for right element `j`; one counted Pph call.
    fn test_pred(left: &Self::Left, rights: &Self::Prepared, j: usize) -> bool;

    /// Size of a left hash in bits.
    fn left_bits() -> u64;

    /// Size of a right hash in bits.
    fn right_bits() -> u64;
}

/// A CLOZ ciphertext: `n` left hashes and `n` right hashes, both lists in
/// one random order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClozCiphertext<L, R> {
    /// The left half.
    pub left: Vec<L>,
    /// The right half.
    pub right: Vec<R>,
}

/// CLOZ over the PPH `P`.
pub struct Cloz<P: Pph> {
    bits: u32,
    master: Key<32>,
    prf: Aes128Prf,
    pph: P,
}

impl<P: Pph> Debug for Cloz<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Cloz")
            .field("scheme", &P::descriptor().name)
            .field("bits", &self.bits)
            .field("key", &"[redacted]")
            .finish()
    }
}

/// The CLWW-style values `u_i` of `x`, most significant bit first.
fn values(prf: &Aes128Prf, bits: u32, x: u64) -> Vec<u128> {
    let mut blocks: Vec<[u8; 16]> = (0..bits)
        .map(|i| {
            let prefix = if i == 0 { 0 } else { x >> (bits - i) };
            let mut b = [0u8; 16];
            b[0] = i as u8;
            b[1] = bits as u8;
            b[8..].copy_from_slice(&prefix.to_be_bytes());
            b
        })
        .collect();
    prf.eval_in_place(&mut blocks);
    blocks
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let f = u128::from_be_bytes(*b) >> 1;
            f + u128::from((x >> (bits - 1 - i as u32)) & 1)
        })
        .collect()
}

/// A uniformly random permutation of `0..n` from `rng` (Fisher-Yates,
/// [`sesame_crypto::prg::shuffle_uniform`]); one counted Prp call, as
/// seed 004 counts CLOZ's shuffle.
fn permutation<R: CryptoRngCore + ?Sized>(rng: &mut R, n: usize) -> Vec<usize> {
    counter::record(Primitive::Prp, 1);
    let mut p: Vec<usize> = (0..n).collect();
    sesame_crypto::prg::shuffle_uniform(rng, &mut p);
    p
}

impl<P: Pph> Cloz<P> {
    /// CLOZ for `bits`-bit plaintexts keyed by `master`.
    pub fn new(master: Key<32>, bits: u32) -> Result<Self> {
        check_bits(bits)?;
        // The variant (secure or insecure PPH) and the width are part of
        // every label: a key used once with the insecure variant, whose
        // ciphertexts show the CLWW values, says nothing of the secure one.
        let name = P::descriptor().name;
        let prf = Aes128Prf::new(&master.derive(&format!("sesame-ore/{name}/v2/bits={bits}/prf")));
        let pph = P::new(&master, bits);
        Ok(Cloz {
            bits,
            master,
            prf,
            pph,
        })
    }

    /// CLOZ with a fresh key.
    pub fn generate<R: CryptoRngCore + ?Sized>(rng: &mut R, bits: u32) -> Result<Self> {
        Self::new(Key::generate(rng), bits)
    }

    /// The PPH.
    pub fn pph(&self) -> &P {
        &self.pph
    }

    /// Encrypts both halves of `x`.
    pub fn encrypt_full<R: CryptoRngCore + ?Sized>(
        &self,
        rng: &mut R,
        x: u64,
    ) -> Result<ClozCiphertext<P::Left, P::Right>> {
        check_plaintext(x, self.bits)?;
        let us = values(&self.prf, self.bits, x);
        let order = permutation(rng, us.len());
        let mut left = Vec::with_capacity(us.len());
        let mut right = Vec::with_capacity(us.len());
        for &i in &order {
            let (l, r) = self.pph.hash(rng, us[i]);
            left.push(l);
            right.push(r);
        }
        Ok(ClozCiphertext { left, right })
    }

    /// The left half of `x` alone.
    pub fn encrypt_left_half<R: CryptoRngCore + ?Sized>(
        &self,
        rng: &mut R,
        x: u64,
    ) -> Result<Vec<P::Left>> {
        check_plaintext(x, self.bits)?;
        let us = values(&self.prf, self.bits, x);
        let order = permutation(rng, us.len());
        Ok(order
            .iter()
            .map(|&i| self.pph.hash_left(rng, us[i]))
            .collect())
    }

    /// The public comparison of this scheme's ciphertexts.
    pub fn comparator(&self) -> ClozComparator<P> {
        ClozComparator {
            bits: self.bits,
            pph: PhantomData,
        }
    }

    /// Compares a left half with a right half, without the key (see
    /// [`ClozComparator::compare_halves`]).
    pub fn compare_halves(&self, left: &[P::Left], right: &[P::Right]) -> Result<Ordering> {
        self.comparator().compare_halves(left, right)
    }
}

/// The public comparison of CLOZ ciphertexts: PPH tests between a left
/// half and a right half. It needs only the width (the PPH's tests use no
/// key).
pub struct ClozComparator<P: Pph> {
    bits: u32,
    pph: PhantomData<fn() -> P>,
}

impl<P: Pph> Debug for ClozComparator<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ClozComparator")
            .field("scheme", &P::descriptor().name)
            .field("bits", &self.bits)
            .finish()
    }
}

impl<P: Pph> ClozComparator<P> {
    /// The comparison of `bits`-bit ciphertexts (`1..=64`).
    pub fn new(bits: u32) -> Result<Self> {
        check_bits(bits)?;
        Ok(ClozComparator {
            bits,
            pph: PhantomData,
        })
    }

    /// Compares a left half with a right half: `x < y` if some right value
    /// is a left value plus one, `x > y` if some left value is a right
    /// value plus one, else equal. At most `2 n^2` PPH tests; about `n^2`
    /// on average for distinct plaintexts.
    pub fn compare_halves(&self, left: &[P::Left], right: &[P::Right]) -> Result<Ordering> {
        let n = self.bits as usize;
        if left.len() != n || right.len() != n {
            return Err(Error::Malformed("CLOZ ciphertext of another width".into()));
        }
        let prepared = P::prepare(right);
        for l in left {
            for j in 0..n {
                if P::test_succ(l, &prepared, j) {
                    return Ok(Ordering::Less);
                }
            }
        }
        for l in left {
            for j in 0..n {
                if P::test_pred(l, &prepared, j) {
                    return Ok(Ordering::Greater);
                }
            }
        }
        Ok(Ordering::Equal)
    }
}

impl<P: Pph + 'static> crate::api::Comparator for ClozComparator<P> {
    type Ciphertext = ClozCiphertext<P::Left, P::Right>;
    type Left = Vec<P::Left>;
    type Right = Vec<P::Right>;

    fn left(c: &Self::Ciphertext) -> &Vec<P::Left> {
        &c.left
    }
    fn right(c: &Self::Ciphertext) -> Vec<P::Right> {
        c.right.clone()
    }
    fn compare(&self, left: &Vec<P::Left>, right: &Vec<P::Right>) -> Result<Ordering> {
        self.compare_halves(left, right)
    }
}

impl<P: Pph> OreScheme for Cloz<P> {
    type Ciphertext = ClozCiphertext<P::Left, P::Right>;

    fn descriptor(&self) -> &'static SchemeDescriptor {
        P::descriptor()
    }

    fn bits(&self) -> u32 {
        self.bits
    }

    fn encrypt<R: CryptoRngCore + ?Sized>(
        &mut self,
        rng: &mut R,
        x: u64,
    ) -> Result<Self::Ciphertext> {
        self.encrypt_full(rng, x)
    }

    fn compare(&self, a: &Self::Ciphertext, b: &Self::Ciphertext) -> Result<Ordering> {
        self.compare_halves(&a.left, &b.right)
    }

    fn can_decrypt(&self) -> bool {
        false
    }

    fn decrypt(&self, _c: &Self::Ciphertext) -> Result<u64> {
        Err(Error::Unsupported(
            "CLOZ ciphertexts cannot be decrypted (store an AEAD encryption beside them)".into(),
        ))
    }

    fn ciphertext_bits(&self, c: &Self::Ciphertext) -> u64 {
        c.left.len() as u64 * P::left_bits() + c.right.len() as u64 * P::right_bits()
    }

    fn save(&self) -> Result<Zeroizing<Vec<u8>>> {
        saved::save(P::descriptor().name, self.bits, &self.master, ())
    }

    fn restore(bytes: &[u8]) -> Result<Self> {
        let s: saved::Saved<u32, ()> = saved::restore(P::descriptor().name, bytes)?;
        Cloz::new(s.key.key(), s.params)
    }
}

impl<P: Pph> LeftRight for Cloz<P> {
    type Left = Vec<P::Left>;
    type Right = Vec<P::Right>;

    fn encrypt_left<R: CryptoRngCore + ?Sized>(&self, rng: &mut R, x: u64) -> Result<Vec<P::Left>> {
        self.encrypt_left_half(rng, x)
    }

    fn left(c: &Self::Ciphertext) -> &Vec<P::Left> {
        &c.left
    }

    fn right(c: &Self::Ciphertext) -> &Vec<P::Right> {
        &c.right
    }

    fn compare_left_right(&self, left: &Vec<P::Left>, right: &Vec<P::Right>) -> Result<Ordering> {
        self.compare_halves(left, right)
    }
}

/// CLOZ with the pairing PPH.
pub type ClozPairing = Cloz<PairingPph>;

/// The pairing-based PPH for `P(a, b) = [b = a + 1]` on BLS12-381.
///
/// With `G` and `H` two independently keyed PRFs into the scalar field
/// (HMAC-SHA256, 64 bytes reduced mod `q`) and fresh random scalars
/// `r, r', s, s'` per hash:
///
/// - left hash of `u`: `(A, B, A', B') = (g1^r, g1^(r G(u+1)), g1^r', g1^(r' H(u)))`;
/// - right hash of `v`: `(C, D, C', D') = (g2^s, g2^(s G(v)), g2^s', g2^(s' H(v+1)))`;
/// - `v = u + 1` iff `e(B, C) = e(A, D)`, tested as
///   `e(B, C) e(-A, D) = 1`: one two-term Miller loop over prepared G2
///   points and one final exponentiation;
/// - `u = v + 1` iff `e(B', C') e(-A', D') = 1`.
///
/// Under SXDH the G1 (left) and G2 (right) encodings hide `G(.)` and
/// `H(.)`. A pairing can only join a G1 pair with a G2 pair, and the four
/// ways to do so compare `G(u+1)` with `G(v)` (the successor test),
/// `H(u)` with `H(v+1)` (the predecessor test), `G(u+1)` with `H(v+1)` and
/// `H(u)` with `G(v)`. The last two compare outputs of independent PRFs,
/// so they hold for no pair of values: a cross pairing says nothing. (With
/// one PRF for both tests, `H = G`, the cross pairings would test
/// `u = v`, and counting equal values over a comparison's `n^2` pairs
/// would give the common-prefix length of the two plaintexts, which is
/// CLWW's leakage, the one CLOZ exists to hide.)
pub struct PairingPph {
    succ_prf: HmacPrf,
    pred_prf: HmacPrf,
}

/// A G1 point with a compressed (48-byte) serde encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct G1(pub G1Affine);

/// A G2 point with a compressed (96-byte) serde encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct G2(pub G2Affine);

/// The left hash of [`PairingPph`]: four G1 points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairingLeft {
    /// `g1^r`.
    pub a: G1,
    /// `g1^(r G(u+1))`.
    pub b: G1,
    /// `g1^r'`.
    pub a2: G1,
    /// `g1^(r' H(u))`.
    pub b2: G1,
}

/// The right hash of [`PairingPph`]: four G2 points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairingRight {
    /// `g2^s`.
    pub c: G2,
    /// `g2^(s G(v))`.
    pub d: G2,
    /// `g2^s'`.
    pub c2: G2,
    /// `g2^(s' H(v+1))`.
    pub d2: G2,
}

/// Prepared G2 points of a right list, for [`PairingPph`].
pub struct PreparedRights {
    points: Vec<[G2Prepared; 4]>,
}

fn random_scalar<R: CryptoRngCore + ?Sized>(rng: &mut R) -> Scalar {
    let mut wide = Zeroizing::new([0u8; 64]);
    rng.fill_bytes(wide.as_mut());
    Scalar::from_bytes_wide(&wide)
}

impl PairingPph {
    /// `prf(v)` into the scalar field: HMAC-SHA256 of `v` under two labels,
    /// reduced mod `q`.
    fn scalar(prf: &HmacPrf, v: u128) -> Scalar {
        let bytes = v.to_be_bytes();
        let mut wide = Zeroizing::new([0u8; 64]);
        wide[..32].copy_from_slice(&prf.eval_concat(&[b"lo", &bytes]));
        wide[32..].copy_from_slice(&prf.eval_concat(&[b"hi", &bytes]));
        Scalar::from_bytes_wide(&wide)
    }

    /// `G(v)`, the successor test's PRF.
    fn g(&self, v: u128) -> Scalar {
        Self::scalar(&self.succ_prf, v)
    }

    /// `H(v)`, the predecessor test's PRF.
    fn h(&self, v: u128) -> Scalar {
        Self::scalar(&self.pred_prf, v)
    }

    fn g1_pair<R: CryptoRngCore + ?Sized>(rng: &mut R, g: &Scalar) -> (G1, G1) {
        counter::record(Primitive::GroupExp, 2);
        let r = random_scalar(rng);
        let a = G1Affine::from(G1Affine::generator() * r);
        let b = G1Affine::from(G1Affine::generator() * (r * g));
        (G1(a), G1(b))
    }

    fn g2_pair<R: CryptoRngCore + ?Sized>(rng: &mut R, g: &Scalar) -> (G2, G2) {
        counter::record(Primitive::GroupExp, 2);
        let s = random_scalar(rng);
        let c = G2Affine::from(G2Affine::generator() * s);
        let d = G2Affine::from(G2Affine::generator() * (s * g));
        (G2(c), G2(d))
    }

    /// `e(p, q) e(p2, q2) = 1`, one two-term Miller loop and one final
    /// exponentiation; counts two Pairing calls.
    fn product_is_one(p: &G1Affine, q: &G2Prepared, p2: &G1Affine, q2: &G2Prepared) -> bool {
        counter::record(Primitive::Pairing, 2);
        multi_miller_loop(&[(p, q), (p2, q2)]).final_exponentiation() == Gt::identity()
    }
}

impl Pph for PairingPph {
    type Left = PairingLeft;
    type Right = PairingRight;
    type Prepared = PreparedRights;

    fn new(master: &Key<32>, bits: u32) -> Self {
        let label = format!("sesame-ore/cloz/v2/bits={bits}/pph");
        PairingPph {
            succ_prf: HmacPrf::new(&master.derive(&format!("{label}/succ"))),
            pred_prf: HmacPrf::new(&master.derive(&format!("{label}/pred"))),
        }
    }

    fn descriptor() -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn hash<R: CryptoRngCore + ?Sized>(&self, rng: &mut R, u: u128) -> (PairingLeft, PairingRight) {
        let _pph = counter::enter(Primitive::Pph);
        let next = u.wrapping_add(1);
        let (a, b) = Self::g1_pair(rng, &self.g(next));
        let (a2, b2) = Self::g1_pair(rng, &self.h(u));
        let (c, d) = Self::g2_pair(rng, &self.g(u));
        let (c2, d2) = Self::g2_pair(rng, &self.h(next));
        (PairingLeft { a, b, a2, b2 }, PairingRight { c, d, c2, d2 })
    }

    fn hash_left<R: CryptoRngCore + ?Sized>(&self, rng: &mut R, u: u128) -> PairingLeft {
        let _pph = counter::enter(Primitive::Pph);
        let (a, b) = Self::g1_pair(rng, &self.g(u.wrapping_add(1)));
        let (a2, b2) = Self::g1_pair(rng, &self.h(u));
        PairingLeft { a, b, a2, b2 }
    }

    fn prepare(rights: &[PairingRight]) -> PreparedRights {
        PreparedRights {
            points: rights
                .iter()
                .map(|r| {
                    [
                        G2Prepared::from(r.c.0),
                        G2Prepared::from(r.d.0),
                        G2Prepared::from(r.c2.0),
                        G2Prepared::from(r.d2.0),
                    ]
                })
                .collect(),
        }
    }

    fn test_succ(left: &PairingLeft, rights: &PreparedRights, j: usize) -> bool {
        let _pph = counter::enter(Primitive::Pph);
        let Some(p) = rights.points.get(j) else {
            return false;
        };
        Self::product_is_one(&left.b.0, &p[0], &-left.a.0, &p[1])
    }

    fn test_pred(left: &PairingLeft, rights: &PreparedRights, j: usize) -> bool {
        let _pph = counter::enter(Primitive::Pph);
        let Some(p) = rights.points.get(j) else {
            return false;
        };
        Self::product_is_one(&left.b2.0, &p[2], &-left.a2.0, &p[3])
    }

    fn left_bits() -> u64 {
        4 * 48 * 8
    }

    fn right_bits() -> u64 {
        4 * 96 * 8
    }
}

impl Serialize for G1 {
    fn serialize<S: Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0.to_compressed())
    }
}

impl Serialize for G2 {
    fn serialize<S: Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0.to_compressed())
    }
}

/// Reads a compressed point of `N` bytes, checked to be on the curve and in
/// the prime-order subgroup.
struct PointVisitor<const N: usize, T>(PhantomData<T>);

trait FromCompressed<const N: usize>: Sized {
    fn from_compressed(bytes: &[u8; N]) -> Option<Self>;
}

impl FromCompressed<48> for G1 {
    fn from_compressed(bytes: &[u8; 48]) -> Option<Self> {
        Option::from(G1Affine::from_compressed(bytes)).map(G1)
    }
}

impl FromCompressed<96> for G2 {
    fn from_compressed(bytes: &[u8; 96]) -> Option<Self> {
        Option::from(G2Affine::from_compressed(bytes)).map(G2)
    }
}

impl<'de, const N: usize, T: FromCompressed<N>> Visitor<'de> for PointVisitor<N, T> {
    type Value = T;

    fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "a compressed BLS12-381 point of {N} bytes")
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> core::result::Result<T, E> {
        let bytes: &[u8; N] = v
            .try_into()
            .map_err(|_| E::invalid_length(v.len(), &self))?;
        T::from_compressed(bytes).ok_or_else(|| E::custom("not a valid BLS12-381 point"))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> core::result::Result<T, A::Error> {
        let mut bytes = [0u8; N];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = seq
                .next_element()?
                .ok_or_else(|| de::Error::invalid_length(i, &self))?;
        }
        T::from_compressed(&bytes).ok_or_else(|| de::Error::custom("not a valid BLS12-381 point"))
    }
}

impl<'de> Deserialize<'de> for G1 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> core::result::Result<Self, D::Error> {
        d.deserialize_bytes(PointVisitor::<48, G1>(PhantomData))
    }
}

impl<'de> Deserialize<'de> for G2 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> core::result::Result<Self, D::Error> {
        d.deserialize_bytes(PointVisitor::<96, G2>(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;

    #[test]
    fn values_are_adjacent_exactly_at_the_first_differing_bit() {
        let prf = Aes128Prf::new(&Key::from_bytes([1; 16]));
        let (x, y) = (0b1010_0110u64, 0b1010_1001u64);
        let (ux, uy) = (values(&prf, 8, x), values(&prf, 8, y));
        let adjacent: Vec<(usize, usize)> = (0..8)
            .flat_map(|i| (0..8).map(move |j| (i, j)))
            .filter(|&(i, j)| uy[j] == ux[i] + 1 || ux[i] == uy[j] + 1)
            .collect();
        assert_eq!(adjacent, vec![(4, 4)]);
        assert_eq!(uy[4], ux[4] + 1);
    }

    #[test]
    fn pairing_pph_tests_the_successor_only() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        let pph = PairingPph::new(&Key::from_bytes([2; 32]), 8);
        let u = 1000u128;
        let (l, _) = pph.hash(&mut rng, u);
        let (_, r_next) = pph.hash(&mut rng, u + 1);
        let (_, r_same) = pph.hash(&mut rng, u);
        let (_, r_prev) = pph.hash(&mut rng, u - 1);
        let prepared = PairingPph::prepare(&[r_next, r_same, r_prev]);
        assert!(PairingPph::test_succ(&l, &prepared, 0));
        assert!(!PairingPph::test_succ(&l, &prepared, 1));
        assert!(!PairingPph::test_succ(&l, &prepared, 2));
        assert!(!PairingPph::test_pred(&l, &prepared, 0));
        assert!(!PairingPph::test_pred(&l, &prepared, 1));
        assert!(PairingPph::test_pred(&l, &prepared, 2));
        let bytes = sesame_core::wire::encode(&l).unwrap();
        assert_eq!(sesame_core::wire::decode::<PairingLeft>(&bytes).unwrap(), l);
        let mut bad = bytes.clone();
        bad[5] ^= 1;
        assert!(sesame_core::wire::decode::<PairingLeft>(&bad).is_err());
    }

    /// Every relation `e(P1, Q0) = e(P0, Q1)` or `e(P1, Q1) = e(P0, Q0)`
    /// that an attacker holding `x`'s left half and `y`'s right half can
    /// test, for each G1 pair `(P0, P1)` of a left hash and each G2 pair
    /// `(Q0, Q1)` of a right hash: the number that hold.
    fn relations_that_hold(left: &[PairingLeft], right: &[PairingRight]) -> usize {
        let one = |p: &G1, q: &G2, p2: &G1, q2: &G2| {
            PairingPph::product_is_one(
                &p.0,
                &G2Prepared::from(q.0),
                &-p2.0,
                &G2Prepared::from(q2.0),
            )
        };
        let mut holds = 0;
        for l in left {
            for r in right {
                for (p0, p1) in [(&l.a, &l.b), (&l.a2, &l.b2)] {
                    for (q0, q1) in [(&r.c, &r.d), (&r.c2, &r.d2)] {
                        holds += usize::from(one(p1, q0, p0, q1));
                        holds += usize::from(one(p1, q1, p0, q0));
                    }
                }
            }
        }
        holds
    }

    /// A comparison reveals the order and nothing else: over all `n^2`
    /// pairs and every way of pairing their parts, exactly one relation
    /// holds for distinct plaintexts (the designed successor or predecessor
    /// test) and none for equal ones, whatever their common prefix. With
    /// one PRF for both tests, 15 relations held for 0b1010_0110 against
    /// 0b1010_0111: the designed one and two cross pairings for each of the
    /// 7 bits of their common prefix.
    #[test]
    fn no_cross_pairing_reveals_more_than_the_order() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        let cloz = ClozPairing::new(Key::from_bytes([4; 32]), 8).unwrap();
        let x = 0b1010_0110;
        for (y, expected) in [(0b1010_0111u64, 1), (0b0010_0110, 1), (x, 0)] {
            let cx = cloz.encrypt_full(&mut rng, x).unwrap();
            let cy = cloz.encrypt_full(&mut rng, y).unwrap();
            assert_eq!(
                relations_that_hold(&cx.left, &cy.right),
                expected,
                "x vs {y:#b}"
            );
            assert_eq!(
                relations_that_hold(&cy.left, &cx.right),
                expected,
                "{y:#b} vs x"
            );
            assert_eq!(cloz.compare(&cx, &cy).unwrap(), x.cmp(&y));
        }
    }

    #[test]
    fn variants_and_widths_have_independent_keys() {
        // The insecure variant publishes its CLWW values; under the same
        // master key they must not be the secure variant's.
        let master = Key::<32>::from_bytes([5; 32]);
        let secure = ClozPairing::new(master.clone_secret(), 8).unwrap();
        let insecure = crate::insecure::ClozInsecure::new(master.clone_secret(), 8).unwrap();
        assert_ne!(values(&secure.prf, 8, 77), values(&insecure.prf, 8, 77));
        let wider = ClozPairing::new(master, 9).unwrap();
        assert_ne!(values(&secure.prf, 8, 77)[0], values(&wider.prf, 9, 77)[0]);
    }
}
