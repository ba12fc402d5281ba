//! Ballard-Kamara-Monrose, "Achieving Efficient Conjunctive Keyword
//! Searches over Encrypted Data", ICICS 2005: the bilinear-map scheme,
//! reconstructed on the type-3 BLS12-381 pairing.
//!
//! - Encryption (n exponentiations in G1, one in G2): r random;
//!   C_j = (r·h_j)·g1, R = r·g2.
//! - Token (one exponentiation, constant in t; deterministic):
//!   T = (x·Σh)·g1 and the public X = x·g2, plus the field indexes.
//! - Test (2 pairings): e(Σ_J C_j, X) = e(T, R).
//!
//! See `docs/schemes/conjunctive_baselines.md`.

use bls12_381::{G1Affine, G2Affine, G2Prepared, Scalar};
use rand_core::CryptoRngCore;
use sesame_core::{Result, SchemeDescriptor};
use sesame_crypto::key::Key;

use super::glue::{
    baseline, decode_token, encode_token, scaled, scheme_glue, scheme_methods, Group, InG1, InG2,
    IndexShape,
};
use super::{
    derive_scalar, pairing_product_is_one, Check, Conjunction, ConjunctiveScheme, FieldHash,
    Tester, G1_LEN, G2_LEN,
};
use crate::api::DocId;

/// Descriptor of BKM05.
pub static DESCRIPTOR: SchemeDescriptor = baseline(
    "bkm05",
    "Ballard-Kamara-Monrose conjunctive keyword search (bilinear-map scheme)",
    "L. Ballard, S. Kamara, F. Monrose. Achieving Efficient Conjunctive Keyword \
     Searches over Encrypted Data. ICICS 2005, LNCS 3783, pp. 414-426",
    "Upload: number of documents and fields. Search: the queried field positions, \
     t, the access pattern and the search pattern (tokens are deterministic).",
);

scheme_glue!("BKM05", Bkm, BkmTester);

/// The index: `n`, then C_1..C_n in G1 and R in G2.
const SHAPE: IndexShape = IndexShape::new("BKM index", |n| 4 + G1_LEN * n + G2_LEN, |n| n, |_| 1);

/// The client half of BKM05.
pub struct Bkm {
    n: usize,
    fh: FieldHash,
    x: Scalar,
    big_x: G2Affine,
}

impl Bkm {
    /// Keys derived from `master`.
    pub fn with_key(master: &Key<32>, n: usize) -> Result<Self> {
        let fh = FieldHash::for_scheme(master, n, "sesame-sse/bkm05/fields")?;
        let x = derive_scalar(master, "sesame-sse/bkm05/x");
        Ok(Self {
            n,
            fh,
            x,
            big_x: G2Affine::from(G2Affine::generator() * x),
        })
    }

    /// The encrypted index of `fields` under the mask `r`.
    fn encrypt_with(&self, r: &Scalar, _id: DocId, _version: u64, fields: &[Vec<u8>]) -> Vec<u8> {
        let proj = scaled::<InG1>(r, self.fh.hash_fields(fields));
        let mut w = SHAPE.encode::<InG1>(self.n, &proj);
        let big_r = InG2::mul(&G2Affine::generator(), r);
        w.g2(&G2Affine::from(big_r));
        w.out
    }
}

impl ConjunctiveScheme for Bkm {
    scheme_methods!(BkmTester);

    fn token(&self, _rng: &mut dyn CryptoRngCore, query: &Conjunction) -> Result<Vec<u8>> {
        query.check(self.n)?;
        let h = self.fh.query_sum(query);
        let t = G1Affine::from(InG1::mul(&G1Affine::generator(), &(self.x * h)));
        Ok(encode_token(self.n, G1_LEN + G2_LEN, query, |w| {
            w.g1(&t);
            w.g2(&self.big_x);
        }))
    }
}

/// The server's test of a BKM05 token.
pub struct BkmTester {
    n: usize,
    t: G1Affine,
    big_x: G2Prepared,
    fields: Vec<u32>,
}

impl BkmTester {
    /// Parses a token.
    pub fn parse(token: &[u8], check: Check) -> Result<Self> {
        let (n, (t, big_x), fields) = decode_token(token, "BKM token", |r| {
            Ok((r.g1(check)?, r.g2(check)?.into()))
        })?;
        Ok(Self {
            n,
            t,
            big_x,
            fields,
        })
    }
}

impl Tester for BkmTester {
    fn matches(&self, index: &[u8]) -> Result<bool> {
        SHAPE.expect_n(index, self.n, "BKM token")?;
        let at = self.fields.iter().map(|j| 4 + G1_LEN * *j as usize);
        let s = SHAPE.sum::<InG1>(index, at)?;
        let big_r = G2Prepared::from(SHAPE.point::<InG2>(index, 4 + G1_LEN * self.n)?);
        Ok(pairing_product_is_one(&[
            (&s, &self.big_x),
            (&-self.t, &big_r),
        ]))
    }
}
