//! Conjunctive keyword search over per-document simple indexes.
//!
//! A document has `n` keyword fields; field `j` holds one value. A
//! conjunctive query is a set of `t` (field, value) pairs, and a document
//! matches when every queried field holds the queried value. Each scheme
//! here encrypts one *simple index* per document (the seed 003 setting):
//!
//! - [`si_sse_rv`]: SI-SSE-RV, verifiable results (our construction on
//!   BLS12-381, see `docs/schemes/si_sse_rv.md`);
//! - [`gsw`], [`bkm`], [`bll`], [`wwp`]: the simple-index baselines of the
//!   seed (Golle-Staddon-Waters 2004, Ballard-Kamara-Monrose 2005,
//!   Byun-Lee-Lim 2006, Wang-Wang-Pieprzyk 2008), reconstructed on the
//!   asymmetric BLS12-381 pairing (see `docs/schemes/conjunctive_baselines.md`).
//!
//! Every scheme implements the object-safe [`ConjunctiveScheme`] (client
//! side: keys, index encryption, tokens, verification) and a keyless
//! [`Tester`] (server side: does this encrypted index match this token,
//! and what is the proof). [`protocol`] runs any of them through a
//! [`sesame_core::Channel`] against a [`sesame_core::Store`].

use std::fmt;

use bls12_381::{multi_miller_loop, G1Affine, G2Affine, G2Prepared, Gt, Scalar};
use rand_core::CryptoRngCore;
use sesame_core::{Error, Params, Result, SchemeDescriptor};
use sesame_crypto::counter::{self, Primitive};
use sesame_crypto::key::Key;
use sesame_crypto::prf::HmacPrf;
use sha2::{Digest, Sha512};

use crate::api::DocId;

pub mod bkm;
pub mod bll;
mod glue;
pub mod gsw;
pub mod protocol;
pub mod si_sse_rv;
pub mod wwp;

/// Largest number of keyword fields a simple index may have.
pub const MAX_FIELDS: usize = 4096;

/// A conjunctive query: `(field, value)` pairs, fields distinct.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Conjunction {
    /// The queried (field index, value) pairs.
    pub terms: Vec<(u32, Vec<u8>)>,
}

impl Conjunction {
    /// A query of these terms.
    pub fn new(terms: Vec<(u32, Vec<u8>)>) -> Self {
        Self { terms }
    }

    /// Checks that the query is non-empty, its fields are below `n` and
    /// distinct.
    pub fn check(&self, n: usize) -> Result<()> {
        if self.terms.is_empty() {
            return Err(Error::InvalidArgument("empty conjunctive query".into()));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (j, _) in &self.terms {
            if *j as usize >= n {
                return Err(Error::InvalidArgument(format!(
                    "query field {j} out of range (n = {n})"
                )));
            }
            if !seen.insert(*j) {
                return Err(Error::InvalidArgument(format!(
                    "query field {j} appears twice"
                )));
            }
        }
        Ok(())
    }

    /// The plaintext oracle: whether a document with these field values
    /// matches.
    pub fn matches(&self, fields: &[Vec<u8>]) -> bool {
        self.terms
            .iter()
            .all(|(j, v)| fields.get(*j as usize).is_some_and(|f| f == v))
    }

    /// The queried field indexes, in query order.
    pub fn fields(&self) -> Vec<u32> {
        self.terms.iter().map(|(j, _)| *j).collect()
    }
}

/// The server-side test of one token: keyless.
pub trait Tester: Send + Sync {
    /// Whether the encrypted simple index matches the token.
    fn matches(&self, index: &[u8]) -> Result<bool>;

    /// The proof for this index's verdict, for a verifiable scheme; `None`
    /// for schemes without verification.
    fn prove(&self, _index: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }
}

/// A conjunctive simple-index scheme, client side (holds the keys).
pub trait ConjunctiveScheme: Send + Sync + fmt::Debug {
    /// Name, citation and leakage.
    fn descriptor(&self) -> &'static SchemeDescriptor;

    /// Number of keyword fields `n` per document.
    fn fields(&self) -> usize;

    /// Encrypts the simple index of document `id` (`fields.len() == n`).
    /// `version` tells apart uploads of the same identifier: a verifiable
    /// scheme binds it into what it authenticates, so an answer from
    /// another upload fails verification; the others ignore it.
    fn encrypt_index(
        &self,
        rng: &mut dyn CryptoRngCore,
        id: DocId,
        version: u64,
        fields: &[Vec<u8>],
    ) -> Result<Vec<u8>>;

    /// The search token of a conjunctive query.
    fn token(&self, rng: &mut dyn CryptoRngCore, query: &Conjunction) -> Result<Vec<u8>>;

    /// The server's test for a token (no secret involved).
    fn tester(&self, token: &[u8]) -> Result<Box<dyn Tester>>;

    /// Whether the scheme returns proofs that [`ConjunctiveScheme::verify`]
    /// checks.
    fn verifiable(&self) -> bool {
        false
    }

    /// The client's checker of answers to `token`, with the token parsed
    /// and prepared once for all the results.
    fn verifier<'a>(&'a self, _token: &[u8]) -> Result<Box<dyn Verifier + 'a>> {
        Err(Error::Unsupported(format!(
            "{} has no result verification",
            self.descriptor().name
        )))
    }

    /// Checks the proof that upload `version` of document `id` does
    /// (`matched`) or does not match the query of `token`. Any failure is
    /// [`Error::Crypto`].
    fn verify(
        &self,
        token: &[u8],
        id: DocId,
        version: u64,
        matched: bool,
        proof: &[u8],
    ) -> Result<()> {
        self.verifier(token)?.verify(id, version, matched, proof)
    }
}

/// Checks the per-document proofs of one answer (client side).
pub trait Verifier {
    /// Checks the proof that upload `version` of document `id` does
    /// (`matched`) or does not match. Any failure is [`Error::Crypto`].
    fn verify(&self, id: DocId, version: u64, matched: bool, proof: &[u8]) -> Result<()>;
}

/// The algorithms of a simple-index scheme: how to make its client half
/// and its keyless tester, and how to check an uploaded index. The
/// protocol ([`protocol::SiClient`], [`protocol::SiServer`]) runs any of
/// them; [`ConjunctiveEntry`] is what the registry lists.
#[derive(Clone, Copy)]
pub struct SiAlgorithms {
    /// Name, citation and leakage.
    pub descriptor: &'static SchemeDescriptor,
    /// The client for `n` fields with keys derived from a master key.
    pub new: fn(&Key<32>, usize) -> Result<Box<dyn ConjunctiveScheme>>,
    /// The server's tester for a token.
    pub tester: fn(&[u8]) -> Result<Box<dyn Tester>>,
    /// Checks an uploaded index fully (every point on the curve and in
    /// the subgroup); the server runs it once on upload so that searches
    /// can skip the check.
    pub validate: fn(&[u8]) -> Result<()>,
}

impl fmt::Debug for SiAlgorithms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SiAlgorithms")
            .field("name", &self.descriptor.name)
            .finish_non_exhaustive()
    }
}

/// The algorithms of every simple-index scheme, SI-SSE-RV first.
pub fn algorithms() -> Vec<SiAlgorithms> {
    vec![
        si_sse_rv::algorithms(),
        gsw::algorithms(),
        bkm::algorithms(),
        bll::algorithms(),
        wwp::algorithms(),
    ]
}

/// The algorithms of the simple-index scheme called `name`
/// (case-insensitive).
pub fn algorithms_of(name: &str) -> Option<SiAlgorithms> {
    algorithms()
        .into_iter()
        .find(|s| s.descriptor.name.eq_ignore_ascii_case(name))
}

/// A registered conjunctive scheme: the simple-index protocol
/// ([`protocol::SiClient`] and [`protocol::SiServer`]) over one scheme's
/// algorithms (the registry entry of the conjunctive family).
pub type ConjunctiveEntry = sesame_core::Entry<protocol::SiClient>;

/// The parameters every conjunctive entry reads.
pub const ENTRY_PARAMS: &[(&str, &str)] = &[(
    "fields",
    "1 (keyword fields per document, 1..=4096; a query names fields by index)",
)];

fn fields_param(name: &str, params: &Params) -> Result<usize> {
    params.only(name, &["fields"])?;
    let n: usize = params.get_or("fields", 1)?;
    if !(1..=MAX_FIELDS).contains(&n) {
        return Err(Error::InvalidArgument(format!(
            "fields={n}: a simple index has 1..={MAX_FIELDS} fields"
        )));
    }
    Ok(n)
}

/// [`ConjunctiveEntry::new_client`] of `scheme`.
pub(crate) fn new_client(
    rng: &mut dyn CryptoRngCore,
    params: &Params,
    scheme: SiAlgorithms,
) -> Result<Box<protocol::SiClient>> {
    let n = fields_param(scheme.descriptor.name, params)?;
    Ok(Box::new(protocol::SiClient::new(rng, &scheme, n)?))
}

/// [`ConjunctiveEntry::restore_client`] of the scheme `descriptor`: a
/// saved client of another scheme is refused.
pub(crate) fn restore_client(
    bytes: &[u8],
    descriptor: &SchemeDescriptor,
) -> Result<Box<protocol::SiClient>> {
    let client = protocol::SiClient::restore(bytes)?;
    let saved = client.scheme().descriptor().name;
    if saved != descriptor.name {
        return Err(Error::Malformed(format!(
            "the saved client is of {saved}, not {}",
            descriptor.name
        )));
    }
    Ok(Box::new(client))
}

/// [`ConjunctiveEntry::new_server`] of `scheme`.
pub(crate) fn new_server(
    store: std::sync::Arc<dyn sesame_core::Store>,
    params: &Params,
    scheme: SiAlgorithms,
) -> Result<Box<dyn sesame_core::Service>> {
    fields_param(scheme.descriptor.name, params)?;
    Ok(Box::new(sesame_core::Typed(protocol::SiServer::new(
        store, scheme,
    ))))
}

/// The registry entries of every conjunctive scheme, SI-SSE-RV first.
pub fn entries() -> Vec<ConjunctiveEntry> {
    vec![
        si_sse_rv::entry(),
        gsw::entry(),
        bkm::entry(),
        bll::entry(),
        wwp::entry(),
    ]
}

// ---------------------------------------------------------------------------
// Shared arithmetic and encodings.

/// Bytes of an uncompressed G1 point.
pub const G1_LEN: usize = 96;
/// Bytes of an uncompressed G2 point.
pub const G2_LEN: usize = 192;

/// A uniformly random scalar.
pub(crate) fn random_scalar(rng: &mut dyn CryptoRngCore) -> Scalar {
    let mut wide = [0u8; 64];
    rng.fill_bytes(&mut wide);
    Scalar::from_bytes_wide(&wide)
}

/// A uniformly random non-zero scalar.
pub(crate) fn random_nonzero(rng: &mut dyn CryptoRngCore) -> Scalar {
    loop {
        let s = random_scalar(rng);
        if s != Scalar::zero() {
            return s;
        }
    }
}

/// A scalar derived from a master key and a label (a secret key element).
pub(crate) fn derive_scalar(master: &Key<32>, label: &str) -> Scalar {
    let k: Key<32> = master.derive(label);
    let mut h = Sha512::new();
    h.update(b"sesame-sse/simple-index/scalar");
    h.update(k.as_bytes());
    let wide: [u8; 64] = h.finalize().into();
    let s = Scalar::from_bytes_wide(&wide);
    if s == Scalar::zero() {
        Scalar::one()
    } else {
        s
    }
}

/// The keyed hash of (field, value) to a scalar: HMAC-SHA256 then
/// SHA-512 widened and reduced mod r.
pub(crate) struct FieldHash {
    prf: HmacPrf,
}

impl FieldHash {
    pub(crate) fn new(key: &Key<32>) -> Self {
        Self {
            prf: HmacPrf::new(key),
        }
    }

    pub(crate) fn hash(&self, field: u32, value: &[u8]) -> Scalar {
        let k = self
            .prf
            .eval_concat(&[b"si-field", &field.to_le_bytes(), value]);
        counter::record(Primitive::Hash, 1);
        let wide: [u8; 64] = Sha512::digest(k).into();
        Scalar::from_bytes_wide(&wide)
    }

    /// The sum of the hashes of a query's terms.
    pub(crate) fn query_sum(&self, query: &Conjunction) -> Scalar {
        query
            .terms
            .iter()
            .fold(Scalar::zero(), |acc, (j, v)| acc + self.hash(*j, v))
    }
}

/// `s * P` for a fixed base, counted as one group exponentiation.
pub(crate) fn g1_mul(base: &G1Affine, s: &Scalar) -> bls12_381::G1Projective {
    counter::record(Primitive::GroupExp, 1);
    base * s
}

/// `s * Q` in G2, counted as one group exponentiation.
pub(crate) fn g2_mul(base: &G2Affine, s: &Scalar) -> bls12_381::G2Projective {
    counter::record(Primitive::GroupExp, 1);
    base * s
}

/// Whether `prod e(P_i, Q_i) == 1`; counts one pairing per pair (one
/// multi-Miller loop and one final exponentiation in all).
pub(crate) fn pairing_product_is_one(pairs: &[(&G1Affine, &G2Prepared)]) -> bool {
    counter::record(Primitive::Pairing, pairs.len() as u64);
    multi_miller_loop(pairs).final_exponentiation() == Gt::identity()
}

/// A pairing floor: `k` pairings on random points as one multi-Miller
/// loop and one final exponentiation, the least work of a test or check
/// that evaluates a product of `k` pairings. With `k = 2` it is the floor
/// of SI-SSE-RV's search test and of its per-result verification; the
/// benchmarks time it beside the schemes.
pub struct PairingFloor {
    p: Vec<G1Affine>,
    q: Vec<G2Prepared>,
}

impl fmt::Debug for PairingFloor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PairingFloor")
            .field("pairs", &self.p.len())
            .finish()
    }
}

impl PairingFloor {
    /// `k` pairs of random points (at least one).
    pub fn new(rng: &mut dyn CryptoRngCore, k: usize) -> Self {
        let g1 = G1Affine::generator();
        let g2 = G2Affine::generator();
        let k = k.max(1);
        let p = (0..k)
            .map(|_| G1Affine::from(g1 * random_nonzero(rng)))
            .collect();
        let q = (0..k)
            .map(|_| G2Prepared::from(G2Affine::from(g2 * random_nonzero(rng))))
            .collect();
        Self { p, q }
    }

    /// Evaluates the pairings; whether their product is 1 (it is not).
    pub fn run(&self) -> bool {
        let pairs: Vec<(&G1Affine, &G2Prepared)> = self.p.iter().zip(self.q.iter()).collect();
        pairing_product_is_one(&pairs)
    }
}

/// The fields of a document, checked against `n`.
pub(crate) fn check_fields(fields: &[Vec<u8>], n: usize) -> Result<()> {
    if fields.len() != n {
        return Err(Error::InvalidArgument(format!(
            "a simple index needs {n} fields, got {}",
            fields.len()
        )));
    }
    Ok(())
}

/// Checks the number of fields a scheme is created with.
pub(crate) fn check_n(n: usize) -> Result<()> {
    if n == 0 || n > MAX_FIELDS {
        return Err(Error::InvalidArgument(format!(
            "simple index needs 1..={MAX_FIELDS} fields, got {n}"
        )));
    }
    Ok(())
}

/// A byte writer for the fixed layouts of indexes, tokens and proofs.
#[derive(Default)]
pub(crate) struct Writer {
    pub(crate) out: Vec<u8>,
}

impl Writer {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self {
            out: Vec::with_capacity(n),
        }
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn g1(&mut self, p: &G1Affine) {
        self.out.extend_from_slice(&p.to_uncompressed());
    }
    pub(crate) fn g2(&mut self, p: &G2Affine) {
        self.out.extend_from_slice(&p.to_uncompressed());
    }
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }
}

/// Whether points read are fully checked (curve and subgroup) or taken as
/// they are (data the reader itself validated or authenticated earlier).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// On the curve and in the prime-order subgroup.
    Full,
    /// Only that the coordinates are field elements.
    Trusted,
}

/// A byte reader that never panics: every shortfall is `Malformed`.
pub(crate) struct Reader<'a> {
    b: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(b: &'a [u8], what: &'static str) -> Self {
        Self { b, what }
    }

    fn bad(&self, why: &str) -> Error {
        Error::Malformed(format!("{}: {why}", self.what))
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.b.len() < n {
            return Err(self.bad("truncated"));
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }

    pub(crate) fn skip(&mut self, n: usize) -> Result<()> {
        self.take(n).map(|_| ())
    }

    pub(crate) fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        let mut a = [0u8; 4];
        a.copy_from_slice(b);
        Ok(u32::from_le_bytes(a))
    }

    /// A count bounded by `max`.
    pub(crate) fn count(&mut self, max: usize) -> Result<usize> {
        let v = self.u32()? as usize;
        if v > max {
            return Err(self.bad("count out of range"));
        }
        Ok(v)
    }

    pub(crate) fn g1(&mut self, check: Check) -> Result<G1Affine> {
        let b = self.take(G1_LEN)?;
        let mut a = [0u8; G1_LEN];
        a.copy_from_slice(b);
        parse_g1(&a, check).ok_or_else(|| self.bad("invalid G1 point"))
    }

    pub(crate) fn g2(&mut self, check: Check) -> Result<G2Affine> {
        let b = self.take(G2_LEN)?;
        let mut a = [0u8; G2_LEN];
        a.copy_from_slice(b);
        let p = match check {
            Check::Full => G2Affine::from_uncompressed(&a),
            Check::Trusted => G2Affine::from_uncompressed_unchecked(&a),
        };
        Option::from(p).ok_or_else(|| self.bad("invalid G2 point"))
    }

    pub(crate) fn end(self) -> Result<()> {
        if self.b.is_empty() {
            Ok(())
        } else {
            Err(self.bad("trailing bytes"))
        }
    }
}

pub(crate) fn parse_g1(a: &[u8; G1_LEN], check: Check) -> Option<G1Affine> {
    let p = match check {
        Check::Full => G1Affine::from_uncompressed(a),
        Check::Trusted => G1Affine::from_uncompressed_unchecked(a),
    };
    Option::from(p)
}

/// Reads a token's field list: `t` then `t` field indexes below `n`.
pub(crate) fn read_fields(r: &mut Reader<'_>, n: usize) -> Result<Vec<u32>> {
    let t = r.count(MAX_FIELDS)?;
    if t == 0 {
        return Err(Error::Malformed("token with no field".into()));
    }
    let mut fields = Vec::with_capacity(t);
    for _ in 0..t {
        let j = r.u32()?;
        if j as usize >= n {
            return Err(Error::Malformed("token field out of range".into()));
        }
        fields.push(j);
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_check_and_oracle() {
        let q = Conjunction::new(vec![(0, b"a".to_vec()), (2, b"c".to_vec())]);
        assert!(q.check(3).is_ok());
        assert!(q.check(2).is_err());
        assert!(Conjunction::new(vec![]).check(3).is_err());
        assert!(Conjunction::new(vec![(1, vec![]), (1, vec![])])
            .check(3)
            .is_err());
        assert!(q.matches(&[b"a".to_vec(), b"x".to_vec(), b"c".to_vec()]));
        assert!(!q.matches(&[b"a".to_vec(), b"x".to_vec(), b"d".to_vec()]));
    }

    #[test]
    fn reader_never_panics_on_short_input() {
        let mut r = Reader::new(&[1, 2], "test");
        assert!(r.u32().is_err());
        assert!(glue::point_at::<glue::InG1>(&[0u8; 10], 50, Check::Full, "x").is_err());
        assert!(glue::point_at::<glue::InG1>(&[0u8; 96], 0, Check::Full, "x").is_err());
    }
}
