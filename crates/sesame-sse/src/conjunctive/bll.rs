//! Byun-Lee-Lim, "Efficient Conjunctive Keyword Search on Encrypted Data
//! Storage System", EuroPKI 2006, reconstructed on the type-3 BLS12-381
//! pairing. The per-field ciphertexts live in the larger group (G2 here),
//! the token in the smaller one.
//!
//! - Encryption (n+1 exponentiations in G2): r random; C0 = r·g2,
//!   C_j = (r·h_j)·g2.
//! - Token (2 exponentiations in G1, constant in t): s random;
//!   T1 = s·g1, T2 = (s·Σh)·g1, plus the field indexes.
//! - Test (2 pairings): e(T1, Σ_J C_j) = e(T2, C0).
//!
//! See `docs/schemes/conjunctive_baselines.md`.

use bls12_381::{G1Affine, G2Prepared, Scalar};
use rand_core::CryptoRngCore;
use sesame_core::{Result, SchemeDescriptor};
use sesame_crypto::key::Key;

use super::glue::{
    baseline, blinded_sum_token, decode_token, scaled, scheme_glue, scheme_methods, InG1, InG2,
    IndexShape,
};
use super::{
    pairing_product_is_one, Check, Conjunction, ConjunctiveScheme, FieldHash, Tester, G2_LEN,
};
use crate::api::DocId;

/// Descriptor of BLL06.
pub static DESCRIPTOR: SchemeDescriptor = baseline(
    "bll06",
    "Byun-Lee-Lim conjunctive keyword search",
    "J. W. Byun, D. H. Lee, J. Lim. Efficient Conjunctive Keyword Search on \
     Encrypted Data Storage System. EuroPKI 2006, LNCS 4043, pp. 184-196",
    "Upload: number of documents and fields. Search: the queried field positions, \
     t, and the access pattern. Tokens are randomised.",
);

scheme_glue!("BLL06", Bll, BllTester);

/// The index: `n`, then C0 and C_1..C_n in G2.
const SHAPE: IndexShape = IndexShape::new("BLL index", |n| 4 + G2_LEN * (n + 1), |_| 0, |n| n + 1);

/// The client half of BLL06.
pub struct Bll {
    n: usize,
    fh: FieldHash,
}

impl Bll {
    /// Keys derived from `master`.
    pub fn with_key(master: &Key<32>, n: usize) -> Result<Self> {
        Ok(Self {
            n,
            fh: FieldHash::for_scheme(master, n, "sesame-sse/bll06/fields")?,
        })
    }

    /// The encrypted index of `fields` under the mask `r`.
    fn encrypt_with(&self, r: &Scalar, _id: DocId, _version: u64, fields: &[Vec<u8>]) -> Vec<u8> {
        let hashes = std::iter::once(Scalar::one()).chain(self.fh.hash_fields(fields));
        let proj = scaled::<InG2>(r, hashes);
        SHAPE.encode::<InG2>(self.n, &proj).out
    }
}

impl ConjunctiveScheme for Bll {
    scheme_methods!(BllTester);

    fn token(&self, rng: &mut dyn CryptoRngCore, query: &Conjunction) -> Result<Vec<u8>> {
        blinded_sum_token::<InG1>(self.n, &self.fh, rng, query)
    }
}

/// The server's test of a BLL06 token.
pub struct BllTester {
    n: usize,
    t1: G1Affine,
    t2: G1Affine,
    fields: Vec<u32>,
}

impl BllTester {
    /// Parses a token.
    pub fn parse(token: &[u8], check: Check) -> Result<Self> {
        let (n, (t1, t2), fields) =
            decode_token(token, "BLL token", |r| Ok((r.g1(check)?, r.g1(check)?)))?;
        Ok(Self { n, t1, t2, fields })
    }
}

impl Tester for BllTester {
    fn matches(&self, index: &[u8]) -> Result<bool> {
        SHAPE.expect_n(index, self.n, "BLL token")?;
        let c0 = G2Prepared::from(SHAPE.point::<InG2>(index, 4)?);
        let at = self.fields.iter().map(|j| 4 + G2_LEN * (*j as usize + 1));
        let s = G2Prepared::from(SHAPE.sum::<InG2>(index, at)?);
        Ok(pairing_product_is_one(&[(&self.t1, &s), (&-self.t2, &c0)]))
    }
}
