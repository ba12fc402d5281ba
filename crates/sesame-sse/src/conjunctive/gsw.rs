//! Golle-Staddon-Waters, "Secure Conjunctive Keyword Search over Encrypted
//! Data", ACNS 2004: the scheme with constant-size capabilities (bilinear
//! maps), reconstructed on the type-3 BLS12-381 pairing.
//!
//! - Encryption (n+2 exponentiations): a random; C_j = (a·h_j)·g1,
//!   A1 = a·g1, A2 = (a·α)·g1.
//! - Capability (3 exponentiations, constant in t): u, w random;
//!   T1 = u·g2, T2 = (u·Σh − w)·g2, T3 = (w/α)·g2, plus the field indexes.
//! - Test (3 pairings): e(Σ_J C_j, T1) = e(A1, T2)·e(A2, T3).
//!
//! See `docs/schemes/conjunctive_baselines.md` for leakage and for how this
//! reconstruction relates to the paper.

use bls12_381::{G2Affine, G2Prepared, Scalar};
use rand_core::CryptoRngCore;
use sesame_core::{Error, Result, SchemeDescriptor};
use sesame_crypto::key::Key;

use super::glue::{
    baseline, decode_token, encode_token, scaled, scheme_glue, scheme_methods, Group, InG1, InG2,
    IndexShape,
};
use super::{
    derive_scalar, pairing_product_is_one, random_nonzero, Check, Conjunction, ConjunctiveScheme,
    FieldHash, Tester, G1_LEN, G2_LEN,
};
use crate::api::DocId;

/// Descriptor of GSW04.
pub static DESCRIPTOR: SchemeDescriptor = baseline(
    "gsw04",
    "Golle-Staddon-Waters conjunctive keyword search (constant-size capabilities)",
    "P. Golle, J. Staddon, B. Waters. Secure Conjunctive Keyword Search over \
     Encrypted Data. ACNS 2004, LNCS 3089, pp. 31-45",
    "Upload: number of documents and fields. Search: the queried field positions, \
     t, and the access pattern. Capabilities are randomised.",
);

scheme_glue!("GSW04", Gsw, GswTester);

/// The index: `n`, then C_1..C_n, A1, A2 in G1.
const SHAPE: IndexShape = IndexShape::new("GSW index", |n| 4 + G1_LEN * (n + 2), |n| n + 2, |_| 0);

/// The client half of GSW04.
pub struct Gsw {
    n: usize,
    fh: FieldHash,
    alpha: Scalar,
    alpha_inv: Scalar,
}

impl Gsw {
    /// Keys derived from `master`.
    pub fn with_key(master: &Key<32>, n: usize) -> Result<Self> {
        let fh = FieldHash::for_scheme(master, n, "sesame-sse/gsw04/fields")?;
        let alpha = derive_scalar(master, "sesame-sse/gsw04/alpha");
        let alpha_inv = Option::from(alpha.invert()).ok_or(Error::Crypto)?;
        Ok(Self {
            n,
            fh,
            alpha,
            alpha_inv,
        })
    }

    /// The encrypted index of `fields` under the mask `r`.
    fn encrypt_with(&self, r: &Scalar, _id: DocId, _version: u64, fields: &[Vec<u8>]) -> Vec<u8> {
        let hashes = self.fh.hash_fields(fields);
        let proj = scaled::<InG1>(r, hashes.chain([Scalar::one(), self.alpha]));
        SHAPE.encode::<InG1>(self.n, &proj).out
    }
}

impl ConjunctiveScheme for Gsw {
    scheme_methods!(GswTester);

    fn token(&self, rng: &mut dyn CryptoRngCore, query: &Conjunction) -> Result<Vec<u8>> {
        query.check(self.n)?;
        let u = random_nonzero(rng);
        let w_ = random_nonzero(rng);
        let h = self.fh.query_sum(query);
        let g2 = G2Affine::generator();
        let t1 = G2Affine::from(InG2::mul(&g2, &u));
        let t2 = G2Affine::from(InG2::mul(&g2, &(u * h - w_)));
        let t3 = G2Affine::from(InG2::mul(&g2, &(w_ * self.alpha_inv)));
        Ok(encode_token(self.n, 3 * G2_LEN, query, |w| {
            w.g2(&t1);
            w.g2(&t2);
            w.g2(&t3);
        }))
    }
}

/// The server's test of a GSW04 capability.
pub struct GswTester {
    n: usize,
    t: [G2Prepared; 3],
    fields: Vec<u32>,
}

impl GswTester {
    /// Parses a capability.
    pub fn parse(token: &[u8], check: Check) -> Result<Self> {
        let (n, t, fields) = decode_token(token, "GSW capability", |r| {
            Ok([
                r.g2(check)?.into(),
                r.g2(check)?.into(),
                r.g2(check)?.into(),
            ])
        })?;
        Ok(Self { n, t, fields })
    }
}

impl Tester for GswTester {
    fn matches(&self, index: &[u8]) -> Result<bool> {
        SHAPE.expect_n(index, self.n, "GSW capability")?;
        let at = self.fields.iter().map(|j| 4 + G1_LEN * *j as usize);
        let s = SHAPE.sum::<InG1>(index, at)?;
        let a1 = SHAPE.point::<InG1>(index, 4 + G1_LEN * self.n)?;
        let a2 = SHAPE.point::<InG1>(index, 4 + G1_LEN * (self.n + 1))?;
        Ok(pairing_product_is_one(&[
            (&s, &self.t[0]),
            (&-a1, &self.t[1]),
            (&-a2, &self.t[2]),
        ]))
    }
}
