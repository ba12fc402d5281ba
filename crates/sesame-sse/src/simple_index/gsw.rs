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

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Prepared, Scalar};
use rand_core::CryptoRngCore;
use sesame_core::{BackwardPrivacy, Error, QueryKind, Result, SchemeDescriptor, SchemeKind};
use sesame_crypto::key::Key;

use super::{
    check_fields, check_n, derive_scalar, g1_at, g1_mul, g2_mul, pairing_product_is_one,
    random_nonzero, read_fields, Check, ConjunctiveScheme, FieldHash, Query, Reader, SiScheme,
    Tester, Writer, G1_LEN, G2_LEN, MAX_FIELDS,
};
use crate::api::DocId;

/// Descriptor of GSW04.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "gsw04",
    title: "Golle-Staddon-Waters conjunctive keyword search (constant-size capabilities)",
    citation: "P. Golle, J. Staddon, B. Waters. Secure Conjunctive Keyword Search over \
               Encrypted Data. ACNS 2004, LNCS 3089, pp. 31-45",
    kind: SchemeKind::DynamicSse,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Conjunctive],
    leakage: "Upload: number of documents and fields. Search: the queried field positions, \
              t, and the access pattern. Capabilities are randomised.",
    doc: "docs/schemes/conjunctive_baselines.md",
};

/// The registry entry of GSW04.
pub fn scheme() -> SiScheme {
    SiScheme {
        descriptor: &DESCRIPTOR,
        new: |key, n| Ok(Box::new(Gsw::with_key(key, n)?)),
        tester: |token| Ok(Box::new(GswTester::parse(token, Check::Full)?)),
        validate,
    }
}

fn index_len(n: usize) -> usize {
    4 + G1_LEN * (n + 2)
}

fn read_n(index: &[u8]) -> Result<usize> {
    let mut r = Reader::new(index, "GSW index");
    let n = r.count(MAX_FIELDS)?;
    if n == 0 || index.len() != index_len(n) {
        return Err(Error::Malformed("GSW index of a wrong length".into()));
    }
    Ok(n)
}

/// Checks an uploaded index.
pub fn validate(index: &[u8]) -> Result<()> {
    let n = read_n(index)?;
    let mut r = Reader::new(index, "GSW index");
    r.skip(4)?;
    for _ in 0..n + 2 {
        r.g1(Check::Full)?;
    }
    Ok(())
}

/// The client half of GSW04.
pub struct Gsw {
    n: usize,
    fh: FieldHash,
    alpha: Scalar,
    alpha_inv: Scalar,
}

impl std::fmt::Debug for Gsw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gsw")
            .field("n", &self.n)
            .finish_non_exhaustive()
    }
}

impl Gsw {
    /// Fresh keys for `n` fields.
    pub fn new(rng: &mut dyn CryptoRngCore, n: usize) -> Result<Self> {
        Self::with_key(&Key::generate(rng), n)
    }

    /// Keys derived from `master`.
    pub fn with_key(master: &Key<32>, n: usize) -> Result<Self> {
        check_n(n)?;
        let alpha = derive_scalar(master, "sesame-sse/gsw04/alpha");
        let alpha_inv = Option::from(alpha.invert()).ok_or(Error::Crypto)?;
        Ok(Self {
            n,
            fh: FieldHash::new(&master.derive("sesame-sse/gsw04/fields")),
            alpha,
            alpha_inv,
        })
    }
}

impl ConjunctiveScheme for Gsw {
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
        let a = random_nonzero(rng);
        let g1 = G1Affine::generator();
        let mut proj = Vec::with_capacity(self.n + 2);
        for (j, v) in fields.iter().enumerate() {
            proj.push(g1_mul(&g1, &(a * self.fh.hash(j as u32, v))));
        }
        proj.push(g1_mul(&g1, &a));
        proj.push(g1_mul(&g1, &(a * self.alpha)));
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
        let w_ = random_nonzero(rng);
        let h = self.fh.query_sum(query);
        let g2 = G2Affine::generator();
        let t1 = G2Affine::from(g2_mul(&g2, &u));
        let t2 = G2Affine::from(g2_mul(&g2, &(u * h - w_)));
        let t3 = G2Affine::from(g2_mul(&g2, &(w_ * self.alpha_inv)));
        let mut w = Writer::with_capacity(12 + 3 * G2_LEN + 4 * query.terms.len());
        w.u32(self.n as u32);
        w.g2(&t1);
        w.g2(&t2);
        w.g2(&t3);
        w.u32(query.terms.len() as u32);
        for (j, _) in &query.terms {
            w.u32(*j);
        }
        Ok(w.out)
    }

    fn tester(&self, token: &[u8]) -> Result<Box<dyn Tester>> {
        Ok(Box::new(GswTester::parse(token, Check::Trusted)?))
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
        let mut r = Reader::new(token, "GSW capability");
        let n = r.count(MAX_FIELDS)?;
        let t1 = r.g2(check)?;
        let t2 = r.g2(check)?;
        let t3 = r.g2(check)?;
        let fields = read_fields(&mut r, n)?;
        r.end()?;
        Ok(Self {
            n,
            t: [t1.into(), t2.into(), t3.into()],
            fields,
        })
    }
}

impl Tester for GswTester {
    fn matches(&self, index: &[u8]) -> Result<bool> {
        if read_n(index)? != self.n {
            return Err(Error::InvalidArgument(
                "GSW capability and index differ in n".into(),
            ));
        }
        let what = "GSW index";
        let mut s = G1Projective::identity();
        for j in &self.fields {
            s += g1_at(index, 4 + G1_LEN * *j as usize, Check::Trusted, what)?;
        }
        let a1 = g1_at(index, 4 + G1_LEN * self.n, Check::Trusted, what)?;
        let a2 = g1_at(index, 4 + G1_LEN * (self.n + 1), Check::Trusted, what)?;
        let s = G1Affine::from(s);
        Ok(pairing_product_is_one(&[
            (&s, &self.t[0]),
            (&-a1, &self.t[1]),
            (&-a2, &self.t[2]),
        ]))
    }
}
