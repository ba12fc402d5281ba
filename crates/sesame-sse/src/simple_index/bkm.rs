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

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Prepared, G2Projective, Scalar};
use rand_core::CryptoRngCore;
use sesame_core::{BackwardPrivacy, Error, QueryKind, Result, SchemeDescriptor, SchemeKind};
use sesame_crypto::key::Key;

use super::{
    check_fields, check_n, derive_scalar, g1_at, g1_mul, g2_mul, pairing_product_is_one,
    random_nonzero, read_fields, Check, ConjunctiveScheme, FieldHash, Query, Reader, SiScheme,
    Tester, Writer, G1_LEN, G2_LEN, MAX_FIELDS,
};
use crate::api::DocId;

/// Descriptor of BKM05.
pub static DESCRIPTOR: SchemeDescriptor = SchemeDescriptor {
    name: "bkm05",
    title: "Ballard-Kamara-Monrose conjunctive keyword search (bilinear-map scheme)",
    citation: "L. Ballard, S. Kamara, F. Monrose. Achieving Efficient Conjunctive Keyword \
               Searches over Encrypted Data. ICICS 2005, LNCS 3783, pp. 414-426",
    kind: SchemeKind::DynamicSse,
    forward_private: false,
    backward_privacy: BackwardPrivacy::None,
    queries: &[QueryKind::Conjunctive],
    leakage: "Upload: number of documents and fields. Search: the queried field positions, \
              t, the access pattern and the search pattern (tokens are deterministic).",
    doc: "docs/schemes/conjunctive_baselines.md",
};

/// The registry entry of BKM05.
pub fn scheme() -> SiScheme {
    SiScheme {
        descriptor: &DESCRIPTOR,
        new: |key, n| Ok(Box::new(Bkm::with_key(key, n)?)),
        tester: |token| Ok(Box::new(BkmTester::parse(token, Check::Full)?)),
        validate,
    }
}

fn index_len(n: usize) -> usize {
    4 + G1_LEN * n + G2_LEN
}

fn read_n(index: &[u8]) -> Result<usize> {
    let mut r = Reader::new(index, "BKM index");
    let n = r.count(MAX_FIELDS)?;
    if n == 0 || index.len() != index_len(n) {
        return Err(Error::Malformed("BKM index of a wrong length".into()));
    }
    Ok(n)
}

/// Checks an uploaded index.
pub fn validate(index: &[u8]) -> Result<()> {
    let n = read_n(index)?;
    let mut r = Reader::new(index, "BKM index");
    r.skip(4)?;
    for _ in 0..n {
        r.g1(Check::Full)?;
    }
    r.g2(Check::Full)?;
    Ok(())
}

/// The client half of BKM05.
pub struct Bkm {
    n: usize,
    fh: FieldHash,
    x: Scalar,
    big_x: G2Affine,
}

impl std::fmt::Debug for Bkm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bkm")
            .field("n", &self.n)
            .finish_non_exhaustive()
    }
}

impl Bkm {
    /// Fresh keys for `n` fields.
    pub fn new(rng: &mut dyn CryptoRngCore, n: usize) -> Result<Self> {
        Self::with_key(&Key::generate(rng), n)
    }

    /// Keys derived from `master`.
    pub fn with_key(master: &Key<32>, n: usize) -> Result<Self> {
        check_n(n)?;
        let x = derive_scalar(master, "sesame-sse/bkm05/x");
        Ok(Self {
            n,
            fh: FieldHash::new(&master.derive("sesame-sse/bkm05/fields")),
            x,
            big_x: G2Affine::from(G2Affine::generator() * x),
        })
    }
}

impl ConjunctiveScheme for Bkm {
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
        let g1 = G1Affine::generator();
        let proj: Vec<G1Projective> = fields
            .iter()
            .enumerate()
            .map(|(j, v)| g1_mul(&g1, &(r * self.fh.hash(j as u32, v))))
            .collect();
        let mut points = vec![G1Affine::identity(); proj.len()];
        G1Projective::batch_normalize(&proj, &mut points);
        let big_r: G2Projective = g2_mul(&G2Affine::generator(), &r);
        let mut w = Writer::with_capacity(index_len(self.n));
        w.u32(self.n as u32);
        for p in &points {
            w.g1(p);
        }
        w.g2(&G2Affine::from(big_r));
        Ok(w.out)
    }

    fn token(&self, _rng: &mut dyn CryptoRngCore, query: &Query) -> Result<Vec<u8>> {
        query.check(self.n)?;
        let h = self.fh.query_sum(query);
        let t = G1Affine::from(g1_mul(&G1Affine::generator(), &(self.x * h)));
        let mut w = Writer::with_capacity(12 + G1_LEN + G2_LEN + 4 * query.terms.len());
        w.u32(self.n as u32);
        w.g1(&t);
        w.g2(&self.big_x);
        w.u32(query.terms.len() as u32);
        for (j, _) in &query.terms {
            w.u32(*j);
        }
        Ok(w.out)
    }

    fn tester(&self, token: &[u8]) -> Result<Box<dyn Tester>> {
        Ok(Box::new(BkmTester::parse(token, Check::Trusted)?))
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
        let mut r = Reader::new(token, "BKM token");
        let n = r.count(MAX_FIELDS)?;
        let t = r.g1(check)?;
        let big_x = r.g2(check)?;
        let fields = read_fields(&mut r, n)?;
        r.end()?;
        Ok(Self {
            n,
            t,
            big_x: big_x.into(),
            fields,
        })
    }
}

impl Tester for BkmTester {
    fn matches(&self, index: &[u8]) -> Result<bool> {
        if read_n(index)? != self.n {
            return Err(Error::InvalidArgument(
                "BKM token and index differ in n".into(),
            ));
        }
        let mut s = G1Projective::identity();
        for j in &self.fields {
            s += g1_at(index, 4 + G1_LEN * *j as usize, Check::Trusted, "BKM index")?;
        }
        let mut r = Reader::new(
            index.get(4 + G1_LEN * self.n..).unwrap_or_default(),
            "BKM index",
        );
        let big_r = G2Prepared::from(r.g2(Check::Trusted)?);
        let s = G1Affine::from(s);
        Ok(pairing_product_is_one(&[
            (&s, &self.big_x),
            (&-self.t, &big_r),
        ]))
    }
}
