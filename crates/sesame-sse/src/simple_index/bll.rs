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

use bls12_381::{G1Affine, G2Affine, G2Prepared, G2Projective};
use rand_core::CryptoRngCore;
use sesame_core::{BackwardPrivacy, Error, QueryKind, Result, SchemeDescriptor, SchemeKind};
use sesame_crypto::key::Key;

use super::{
    check_fields, check_n, g1_mul, g2_mul, pairing_product_is_one, random_nonzero, read_fields,
    Check, ConjunctiveScheme, FieldHash, Query, Reader, SiScheme, Tester, Writer, G1_LEN, G2_LEN,
    MAX_FIELDS,
};
use crate::api::DocId;

/// Descriptor of BLL06.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "bll06",
    title: "Byun-Lee-Lim conjunctive keyword search",
    citation: "J. W. Byun, D. H. Lee, J. Lim. Efficient Conjunctive Keyword Search on \
               Encrypted Data Storage System. EuroPKI 2006, LNCS 4043, pp. 184-196",
    kind: SchemeKind::DynamicSse,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Conjunctive],
    leakage: "Upload: number of documents and fields. Search: the queried field positions, \
              t, and the access pattern. Tokens are randomised.",
    doc: "docs/schemes/conjunctive_baselines.md",
};

/// The registry entry of BLL06.
pub fn scheme() -> SiScheme {
    SiScheme {
        descriptor: &DESCRIPTOR,
        new: |key, n| Ok(Box::new(Bll::with_key(key, n)?)),
        tester: |token| Ok(Box::new(BllTester::parse(token, Check::Full)?)),
        validate,
    }
}

fn index_len(n: usize) -> usize {
    4 + G2_LEN * (n + 1)
}

fn read_n(index: &[u8]) -> Result<usize> {
    let mut r = Reader::new(index, "BLL index");
    let n = r.count(MAX_FIELDS)?;
    if n == 0 || index.len() != index_len(n) {
        return Err(Error::Malformed("BLL index of a wrong length".into()));
    }
    Ok(n)
}

/// Checks an uploaded index.
pub fn validate(index: &[u8]) -> Result<()> {
    let n = read_n(index)?;
    let mut r = Reader::new(index, "BLL index");
    r.skip(4)?;
    for _ in 0..=n {
        r.g2(Check::Full)?;
    }
    Ok(())
}

fn g2_at(index: &[u8], at: usize) -> Result<G2Affine> {
    Reader::new(index.get(at..).unwrap_or_default(), "BLL index").g2(Check::Trusted)
}

/// The client half of BLL06.
pub struct Bll {
    n: usize,
    fh: FieldHash,
}

impl std::fmt::Debug for Bll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bll")
            .field("n", &self.n)
            .finish_non_exhaustive()
    }
}

impl Bll {
    /// Fresh keys for `n` fields.
    pub fn new(rng: &mut dyn CryptoRngCore, n: usize) -> Result<Self> {
        Self::with_key(&Key::generate(rng), n)
    }

    /// Keys derived from `master`.
    pub fn with_key(master: &Key<32>, n: usize) -> Result<Self> {
        check_n(n)?;
        Ok(Self {
            n,
            fh: FieldHash::new(&master.derive("sesame-sse/bll06/fields")),
        })
    }
}

impl ConjunctiveScheme for Bll {
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
        let r = random_nonzero(rng);
        let g2 = G2Affine::generator();
        let mut proj = Vec::with_capacity(self.n + 1);
        proj.push(g2_mul(&g2, &r));
        for (j, v) in fields.iter().enumerate() {
            proj.push(g2_mul(&g2, &(r * self.fh.hash(j as u32, v))));
        }
        let mut points = vec![G2Affine::identity(); proj.len()];
        G2Projective::batch_normalize(&proj, &mut points);
        let mut w = Writer::with_capacity(index_len(self.n));
        w.u32(self.n as u32);
        for p in &points {
            w.g2(p);
        }
        Ok(w.out)
    }

    fn token(&self, rng: &mut dyn CryptoRngCore, query: &Query) -> Result<Vec<u8>> {
        query.check(self.n)?;
        let s = random_nonzero(rng);
        let h = self.fh.query_sum(query);
        let g1 = G1Affine::generator();
        let t1 = G1Affine::from(g1_mul(&g1, &s));
        let t2 = G1Affine::from(g1_mul(&g1, &(s * h)));
        let mut w = Writer::with_capacity(12 + 2 * G1_LEN + 4 * query.terms.len());
        w.u32(self.n as u32);
        w.g1(&t1);
        w.g1(&t2);
        w.u32(query.terms.len() as u32);
        for (j, _) in &query.terms {
            w.u32(*j);
        }
        Ok(w.out)
    }

    fn tester(&self, token: &[u8]) -> Result<Box<dyn Tester>> {
        Ok(Box::new(BllTester::parse(token, Check::Trusted)?))
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
        let mut r = Reader::new(token, "BLL token");
        let n = r.count(MAX_FIELDS)?;
        let t1 = r.g1(check)?;
        let t2 = r.g1(check)?;
        let fields = read_fields(&mut r, n)?;
        r.end()?;
        Ok(Self { n, t1, t2, fields })
    }
}

impl Tester for BllTester {
    fn matches(&self, index: &[u8]) -> Result<bool> {
        if read_n(index)? != self.n {
            return Err(Error::InvalidArgument(
                "BLL token and index differ in n".into(),
            ));
        }
        let c0 = g2_at(index, 4)?;
        let mut s = G2Projective::identity();
        for j in &self.fields {
            s += g2_at(index, 4 + G2_LEN * (*j as usize + 1))?;
        }
        let s = G2Prepared::from(G2Affine::from(s));
        let c0 = G2Prepared::from(c0);
        Ok(pairing_product_is_one(&[(&self.t1, &s), (&-self.t2, &c0)]))
    }
}
