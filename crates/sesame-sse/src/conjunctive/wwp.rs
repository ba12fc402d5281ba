//! Wang-Wang-Pieprzyk, "Keyword Field-Free Conjunctive Keyword Searches on
//! Encrypted Data and Extension for Dynamic Groups", CANS 2008,
//! reconstructed on the type-3 BLS12-381 pairing.
//!
//! Field-free: a document's keywords are a set, encoded as the roots of a
//! polynomial; a query need not name fields. (To keep the simple-index
//! semantics of the other schemes, a keyword here is the pair (field,
//! value), hashed to a scalar.)
//!
//! - Encryption (n+1 exponentiations): P(x) = Π_i (x − h_i) = Σ_k a_k x^k;
//!   r random; C_k = (r·a_k)·g1 for k = 0..n.
//! - Token (n+1 exponentiations, scalar work linear in t·n): s_1..s_t, u
//!   random; b_k = u·Σ_l s_l·q_l^k; T_k = b_k·g2.
//! - Test (n+1 pairings): Π_k e(C_k, T_k) = 1, i.e. r·u·Σ_l s_l·P(q_l) = 0,
//!   which holds iff every q_l is a root (except with probability 1/q).
//!
//! See `docs/schemes/conjunctive_baselines.md`.

use bls12_381::{G1Affine, G2Prepared, Scalar};
use rand_core::CryptoRngCore;
use sesame_core::{Error, Result, SchemeDescriptor};
use sesame_crypto::key::Key;

use super::glue::{baseline, scaled, scheme_glue, scheme_methods, InG1, InG2, IndexShape};
use super::{
    pairing_product_is_one, random_nonzero, Check, Conjunction, ConjunctiveScheme, FieldHash,
    Reader, Tester, G1_LEN, G2_LEN, MAX_FIELDS,
};
use crate::api::DocId;

/// Descriptor of WWP08.
pub static DESCRIPTOR: SchemeDescriptor = baseline(
    "wwp08",
    "Wang-Wang-Pieprzyk keyword field-free conjunctive keyword search",
    "P. Wang, H. Wang, J. Pieprzyk. Keyword Field-Free Conjunctive Keyword \
     Searches on Encrypted Data and Extension for Dynamic Groups. CANS 2008, \
     LNCS 5339, pp. 178-195",
    "Upload: number of documents and keywords per document. Search: the access \
     pattern only (neither field positions nor t are sent). Tokens are randomised.",
);

scheme_glue!("WWP08", Wwp, WwpTester);

/// The index: `n`, then C_0..C_n in G1.
const SHAPE: IndexShape = IndexShape::new("WWP index", |n| 4 + G1_LEN * (n + 1), |n| n + 1, |_| 0);

/// The token: `n`, then T_0..T_n in G2 (same shape as an index, in G2).
const TOKEN: IndexShape = IndexShape::new("WWP token", |n| 4 + G2_LEN * (n + 1), |_| 0, |n| n + 1);

/// The client half of WWP08.
pub struct Wwp {
    n: usize,
    fh: FieldHash,
}

impl Wwp {
    /// Keys derived from `master` (`n` keywords per document).
    pub fn with_key(master: &Key<32>, n: usize) -> Result<Self> {
        Ok(Self {
            n,
            fh: FieldHash::for_scheme(master, n, "sesame-sse/wwp08/fields")?,
        })
    }

    /// The encrypted index of `fields` under the mask `r`.
    fn encrypt_with(&self, r: &Scalar, _id: DocId, _version: u64, fields: &[Vec<u8>]) -> Vec<u8> {
        let roots: Vec<Scalar> = self.fh.hash_fields(fields).collect();
        let coeffs = poly_from_roots(&roots);
        let proj = scaled::<InG1>(r, coeffs);
        SHAPE.encode::<InG1>(self.n, &proj).out
    }
}

/// Coefficients a_0..a_n of Π (x − root).
fn poly_from_roots(roots: &[Scalar]) -> Vec<Scalar> {
    let mut a = vec![Scalar::one()];
    for r in roots {
        let mut next = vec![Scalar::zero(); a.len() + 1];
        for (k, c) in a.iter().enumerate() {
            next[k + 1] += c;
            next[k] -= c * r;
        }
        a = next;
    }
    a
}

impl ConjunctiveScheme for Wwp {
    scheme_methods!(WwpTester);

    fn token(&self, rng: &mut dyn CryptoRngCore, query: &Conjunction) -> Result<Vec<u8>> {
        query.check(self.n)?;
        let u = random_nonzero(rng);
        let mut b = vec![Scalar::zero(); self.n + 1];
        for (j, v) in &query.terms {
            let q = self.fh.hash(*j, v);
            let mut coef = u * random_nonzero(rng);
            for bk in b.iter_mut() {
                *bk += coef;
                coef *= q;
            }
        }
        let proj = scaled::<InG2>(&Scalar::one(), b);
        Ok(TOKEN.encode::<InG2>(self.n, &proj).out)
    }
}

/// The server's test of a WWP08 token.
pub struct WwpTester {
    t: Vec<G2Prepared>,
}

impl WwpTester {
    /// Parses a token.
    pub fn parse(token: &[u8], check: Check) -> Result<Self> {
        let mut r = Reader::new(token, "WWP token");
        let n = r.count(MAX_FIELDS)?;
        if n == 0 {
            return Err(Error::Malformed("WWP token with n = 0".into()));
        }
        let mut t = Vec::with_capacity(n + 1);
        for _ in 0..=n {
            t.push(G2Prepared::from(r.g2(check)?));
        }
        r.end()?;
        Ok(Self { t })
    }
}

impl Tester for WwpTester {
    fn matches(&self, index: &[u8]) -> Result<bool> {
        SHAPE.expect_n(index, self.t.len().saturating_sub(1), "WWP token")?;
        let mut r = Reader::new(index, "WWP index");
        r.skip(4)?;
        let mut c = Vec::with_capacity(self.t.len());
        for _ in 0..self.t.len() {
            c.push(r.g1(Check::Trusted)?);
        }
        let pairs: Vec<(&G1Affine, &G2Prepared)> = c.iter().zip(self.t.iter()).collect();
        Ok(pairing_product_is_one(&pairs))
    }
}
