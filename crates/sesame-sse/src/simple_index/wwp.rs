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

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Prepared, G2Projective, Scalar};
use rand_core::CryptoRngCore;
use sesame_core::{BackwardPrivacy, Error, QueryKind, Result, SchemeDescriptor, SchemeKind};
use sesame_crypto::key::Key;

use super::{
    check_fields, check_n, g1_mul, g2_mul, pairing_product_is_one, random_nonzero, Check,
    ConjunctiveScheme, FieldHash, Query, Reader, SiScheme, Tester, Writer, G1_LEN, G2_LEN,
    MAX_FIELDS,
};
use crate::api::DocId;

/// Descriptor of WWP08.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "wwp08",
    title: "Wang-Wang-Pieprzyk keyword field-free conjunctive keyword search",
    citation: "P. Wang, H. Wang, J. Pieprzyk. Keyword Field-Free Conjunctive Keyword \
               Searches on Encrypted Data and Extension for Dynamic Groups. CANS 2008, \
               LNCS 5339, pp. 178-195",
    kind: SchemeKind::DynamicSse,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Conjunctive],
    leakage: "Upload: number of documents and keywords per document. Search: the access \
              pattern only (neither field positions nor t are sent). Tokens are randomised.",
    doc: "docs/schemes/conjunctive_baselines.md",
};

/// The registry entry of WWP08.
pub fn scheme() -> SiScheme {
    SiScheme {
        descriptor: &DESCRIPTOR,
        new: |key, n| Ok(Box::new(Wwp::with_key(key, n)?)),
        tester: |token| Ok(Box::new(WwpTester::parse(token, Check::Full)?)),
        validate,
    }
}

fn index_len(n: usize) -> usize {
    4 + G1_LEN * (n + 1)
}

fn read_n(index: &[u8]) -> Result<usize> {
    let mut r = Reader::new(index, "WWP index");
    let n = r.count(MAX_FIELDS)?;
    if n == 0 || index.len() != index_len(n) {
        return Err(Error::Malformed("WWP index of a wrong length".into()));
    }
    Ok(n)
}

/// Checks an uploaded index.
pub fn validate(index: &[u8]) -> Result<()> {
    let n = read_n(index)?;
    let mut r = Reader::new(index, "WWP index");
    r.skip(4)?;
    for _ in 0..=n {
        r.g1(Check::Full)?;
    }
    Ok(())
}

/// The client half of WWP08.
pub struct Wwp {
    n: usize,
    fh: FieldHash,
}

impl std::fmt::Debug for Wwp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wwp")
            .field("n", &self.n)
            .finish_non_exhaustive()
    }
}

impl Wwp {
    /// Fresh keys for `n` keywords per document.
    pub fn new(rng: &mut dyn CryptoRngCore, n: usize) -> Result<Self> {
        Self::with_key(&Key::generate(rng), n)
    }

    /// Keys derived from `master`.
    pub fn with_key(master: &Key<32>, n: usize) -> Result<Self> {
        check_n(n)?;
        Ok(Self {
            n,
            fh: FieldHash::new(&master.derive("sesame-sse/wwp08/fields")),
        })
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
    fn descriptor(&self) -> &'static SchemeDescriptor {
        &DESCRIPTOR
    }

    fn fields(&self) -> usize {
        self.n
    }

    fn encrypt_index(
        &self,
        rng: &mut dyn CryptoRngCore,
        _id: DocId,
        fields: &[Vec<u8>],
    ) -> Result<Vec<u8>> {
        check_fields(fields, self.n)?;
        let roots: Vec<Scalar> = fields
            .iter()
            .enumerate()
            .map(|(j, v)| self.fh.hash(j as u32, v))
            .collect();
        let coeffs = poly_from_roots(&roots);
        let r = random_nonzero(rng);
        let g1 = G1Affine::generator();
        let proj: Vec<G1Projective> = coeffs.iter().map(|a| g1_mul(&g1, &(r * a))).collect();
        let mut points = vec![G1Affine::identity(); proj.len()];
        G1Projective::batch_normalize(&proj, &mut points);
        let mut w = Writer::with_capacity(index_len(self.n));
        w.u32(self.n as u32);
        for p in &points {
            w.g1(p);
        }
        Ok(w.out)
    }

    fn token(&self, rng: &mut dyn CryptoRngCore, query: &Query) -> Result<Vec<u8>> {
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
        let g2 = G2Affine::generator();
        let proj: Vec<G2Projective> = b.iter().map(|bk| g2_mul(&g2, bk)).collect();
        let mut points = vec![G2Affine::identity(); proj.len()];
        G2Projective::batch_normalize(&proj, &mut points);
        let mut w = Writer::with_capacity(4 + G2_LEN * (self.n + 1));
        w.u32(self.n as u32);
        for p in &points {
            w.g2(p);
        }
        Ok(w.out)
    }

    fn tester(&self, token: &[u8]) -> Result<Box<dyn Tester>> {
        Ok(Box::new(WwpTester::parse(token, Check::Trusted)?))
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
        if read_n(index)? + 1 != self.t.len() {
            return Err(Error::InvalidArgument(
                "WWP token and index differ in n".into(),
            ));
        }
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
