//! Pieces shared by the simple-index schemes: the two source groups behind
//! one trait, the `n`-prefixed index layouts (length, validation, point
//! look-up), the token layout `n ‖ points ‖ t ‖ fields`, and the glue
//! every scheme repeats (registry entry, client boilerplate).

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use rand_core::CryptoRngCore;
use sesame_core::{BackwardPrivacy, Error, QueryKind, Result, SchemeDescriptor, SchemeKind};
use sesame_crypto::key::Key;

use super::{
    check_n, g1_mul, g2_mul, random_nonzero, read_fields, Check, Conjunction, FieldHash, Reader,
    Writer, G1_LEN, G2_LEN, MAX_FIELDS,
};

/// The descriptor of a conjunctive baseline of the seed: dynamic, neither
/// forward nor backward private, conjunctive queries, documented in
/// `docs/schemes/conjunctive_baselines.md`.
pub(crate) const fn baseline(
    name: &'static str,
    title: &'static str,
    citation: &'static str,
    leakage: &'static str,
) -> SchemeDescriptor {
    SchemeDescriptor {
        name,
        title,
        citation,
        kind: SchemeKind::DynamicSse,
        forward_private: false,
        backward_privacy: BackwardPrivacy::None,
        queries: &[QueryKind::Conjunctive],
        leakage,
        doc: "docs/schemes/conjunctive_baselines.md",
    }
}

/// One source group of the pairing, so that layouts and arithmetic can be
/// written once for G1 and G2.
pub(crate) trait Group {
    /// Affine points (what is encoded).
    type Affine;
    /// Projective points (what is computed).
    type Proj;
    /// Bytes of an uncompressed point.
    const LEN: usize;
    /// The fixed generator.
    fn generator() -> Self::Affine;
    /// The neutral element, projective.
    fn identity() -> Self::Proj;
    /// `acc += p`.
    fn add(acc: &mut Self::Proj, p: &Self::Affine);
    /// `s * base`, counted as one group exponentiation.
    fn mul(base: &Self::Affine, s: &Scalar) -> Self::Proj;
    /// Affine form of one projective point.
    fn to_affine(p: &Self::Proj) -> Self::Affine;
    /// Affine forms of many projective points, normalised together.
    fn normalize(proj: &[Self::Proj]) -> Vec<Self::Affine>;
    /// Reads one uncompressed point.
    fn read(r: &mut Reader<'_>, check: Check) -> Result<Self::Affine>;
    /// Writes one uncompressed point.
    fn write(w: &mut Writer, p: &Self::Affine);
}

/// The group G1 (96-byte points).
pub(crate) enum InG1 {}
/// The group G2 (192-byte points).
pub(crate) enum InG2 {}

macro_rules! impl_group {
    ($g:ident, $aff:ident, $proj:ident, $len:ident, $mul:ident, $rw:ident) => {
        impl Group for $g {
            type Affine = $aff;
            type Proj = $proj;
            const LEN: usize = $len;
            fn generator() -> $aff {
                $aff::generator()
            }
            fn identity() -> $proj {
                $proj::identity()
            }
            fn add(acc: &mut $proj, p: &$aff) {
                *acc += p;
            }
            fn mul(base: &$aff, s: &Scalar) -> $proj {
                $mul(base, s)
            }
            fn to_affine(p: &$proj) -> $aff {
                $aff::from(p)
            }
            fn normalize(proj: &[$proj]) -> Vec<$aff> {
                let mut out = vec![$aff::identity(); proj.len()];
                $proj::batch_normalize(proj, &mut out);
                out
            }
            fn read(r: &mut Reader<'_>, check: Check) -> Result<$aff> {
                r.$rw(check)
            }
            fn write(w: &mut Writer, p: &$aff) {
                w.$rw(p)
            }
        }
    };
}

impl_group!(InG1, G1Affine, G1Projective, G1_LEN, g1_mul, g1);
impl_group!(InG2, G2Affine, G2Projective, G2_LEN, g2_mul, g2);

/// `(r·s)·g` for every scalar `s`, projective (one exponentiation each).
pub(crate) fn scaled<G: Group>(
    r: &Scalar,
    scalars: impl IntoIterator<Item = Scalar>,
) -> Vec<G::Proj> {
    let g = G::generator();
    scalars.into_iter().map(|s| G::mul(&g, &(r * s))).collect()
}

/// The point of `G` at byte offset `at` of `b`.
pub(crate) fn point_at<G: Group>(
    b: &[u8],
    at: usize,
    check: Check,
    what: &'static str,
) -> Result<G::Affine> {
    G::read(
        &mut Reader::new(b.get(at..).unwrap_or_default(), what),
        check,
    )
}

impl FieldHash {
    /// The keyed hash of a scheme's fields: checks `n` and derives the
    /// hash key from `master` under `label`.
    pub(crate) fn for_scheme(master: &Key<32>, n: usize, label: &str) -> Result<Self> {
        check_n(n)?;
        Ok(Self::new(&master.derive(label)))
    }

    /// The hashes `h_j = H(j, v_j)` of a document's fields, in order.
    pub(crate) fn hash_fields<'a>(
        &'a self,
        fields: &'a [Vec<u8>],
    ) -> impl Iterator<Item = Scalar> + 'a {
        fields
            .iter()
            .enumerate()
            .map(|(j, v)| self.hash(j as u32, v))
    }
}

/// The layout of a scheme's encrypted index: `n` (u32) then points, `g1(n)`
/// in G1 first and `g2(n)` in G2 after, and `len(n)` bytes in all.
pub(crate) struct IndexShape {
    /// The index's name in errors ("BLL index").
    what: &'static str,
    /// Total bytes of an index of `n` fields.
    len: fn(usize) -> usize,
    /// Number of G1 points, all before the G2 points.
    g1: fn(usize) -> usize,
    /// Number of G2 points.
    g2: fn(usize) -> usize,
}

impl IndexShape {
    /// The layout called `what` of `len(n)` bytes, `g1(n)` G1 points then
    /// `g2(n)` G2 points after the `n` prefix.
    pub(crate) const fn new(
        what: &'static str,
        len: fn(usize) -> usize,
        g1: fn(usize) -> usize,
        g2: fn(usize) -> usize,
    ) -> Self {
        Self { what, len, g1, g2 }
    }

    /// The index's `n`, checked against its length.
    pub(crate) fn read_n(&self, index: &[u8]) -> Result<usize> {
        let mut r = Reader::new(index, self.what);
        let n = r.count(MAX_FIELDS)?;
        if n == 0 || index.len() != (self.len)(n) {
            return Err(Error::Malformed(format!("{} of a wrong length", self.what)));
        }
        Ok(n)
    }

    /// Checks an uploaded index: length and every point fully.
    pub(crate) fn validate(&self, index: &[u8]) -> Result<()> {
        let n = self.read_n(index)?;
        let mut r = Reader::new(index, self.what);
        r.skip(4)?;
        for _ in 0..(self.g1)(n) {
            r.g1(Check::Full)?;
        }
        for _ in 0..(self.g2)(n) {
            r.g2(Check::Full)?;
        }
        Ok(())
    }

    /// Checks that the index has the `n` of the token called `token`.
    pub(crate) fn expect_n(&self, index: &[u8], n: usize, token: &str) -> Result<()> {
        if self.read_n(index)? != n {
            return Err(Error::InvalidArgument(format!(
                "{token} and index differ in n"
            )));
        }
        Ok(())
    }

    /// The (validated on upload) point of `G` at byte offset `at`.
    pub(crate) fn point<G: Group>(&self, index: &[u8], at: usize) -> Result<G::Affine> {
        point_at::<G>(index, at, Check::Trusted, self.what)
    }

    /// The sum of the points of `G` at the byte offsets `at`, affine.
    pub(crate) fn sum<G: Group>(
        &self,
        index: &[u8],
        at: impl IntoIterator<Item = usize>,
    ) -> Result<G::Affine> {
        let mut s = G::identity();
        for a in at {
            G::add(&mut s, &self.point::<G>(index, a)?);
        }
        Ok(G::to_affine(&s))
    }

    /// An index: `n`, then the points `proj` (normalised together); the
    /// writer is returned so that a scheme may append more.
    pub(crate) fn encode<G: Group>(&self, n: usize, proj: &[G::Proj]) -> Writer {
        let mut w = Writer::with_capacity((self.len)(n));
        w.u32(n as u32);
        for p in &G::normalize(proj) {
            G::write(&mut w, p);
        }
        w
    }
}

/// A token `n ‖ points ‖ t ‖ fields`: `points` writes the
/// `points_len` bytes of points.
pub(crate) fn encode_token(
    n: usize,
    points_len: usize,
    query: &Conjunction,
    points: impl FnOnce(&mut Writer),
) -> Vec<u8> {
    let mut w = Writer::with_capacity(12 + points_len + 4 * query.terms.len());
    w.u32(n as u32);
    points(&mut w);
    w.u32(query.terms.len() as u32);
    for (j, _) in &query.terms {
        w.u32(*j);
    }
    w.out
}

/// The token `n ‖ T1 ‖ T2 ‖ t ‖ fields` with `s` random, `T1 = s·g` and
/// `T2 = (s·Σh)·g` in `G`, `Σh` the sum of the query's field hashes.
pub(crate) fn blinded_sum_token<G: Group>(
    n: usize,
    fh: &FieldHash,
    rng: &mut dyn CryptoRngCore,
    query: &Conjunction,
) -> Result<Vec<u8>> {
    query.check(n)?;
    let s = random_nonzero(rng);
    let h = fh.query_sum(query);
    let g = G::generator();
    let t1 = G::to_affine(&G::mul(&g, &s));
    let t2 = G::to_affine(&G::mul(&g, &(s * h)));
    Ok(encode_token(n, 2 * G::LEN, query, |w| {
        G::write(w, &t1);
        G::write(w, &t2);
    }))
}

/// Parses a token `n ‖ points ‖ t ‖ fields` (`points` reads the points):
/// `n`, the points and the queried fields.
pub(crate) fn decode_token<T>(
    token: &[u8],
    what: &'static str,
    points: impl FnOnce(&mut Reader<'_>) -> Result<T>,
) -> Result<(usize, T, Vec<u32>)> {
    let mut r = Reader::new(token, what);
    let n = r.count(MAX_FIELDS)?;
    let p = points(&mut r)?;
    let fields = read_fields(&mut r, n)?;
    r.end()?;
    Ok((n, p, fields))
}

/// The glue every scheme module repeats: its algorithms `algorithms()`
/// (`$client::with_key`, `$tester::parse`), its registry entry `entry()`,
/// `validate` (of the module's index layout `SHAPE`), the
/// client's `Debug` (its `n` only) and its `new` from fresh keys.
macro_rules! scheme_glue {
    ($name:literal, $client:ident, $tester:ident) => {
        #[doc = concat!("The algorithms of ", $name, ".")]
        pub fn algorithms() -> $crate::conjunctive::SiAlgorithms {
            $crate::conjunctive::SiAlgorithms {
                descriptor: &DESCRIPTOR,
                new: |key, n| Ok(Box::new($client::with_key(key, n)?)),
                tester: |token| {
                    Ok(Box::new($tester::parse(
                        token,
                        $crate::conjunctive::Check::Full,
                    )?))
                },
                validate,
            }
        }

        #[doc = concat!("The registry entry of ", $name, ": the simple-index protocol's client and server over ", $name, ".")]
        pub fn entry() -> $crate::conjunctive::ConjunctiveEntry {
            sesame_core::Entry {
                descriptor: &DESCRIPTOR,
                params: $crate::conjunctive::ENTRY_PARAMS,
                new_client: |rng, params| {
                    $crate::conjunctive::new_client(rng, params, algorithms())
                },
                restore_client: |bytes| $crate::conjunctive::restore_client(bytes, &DESCRIPTOR),
                new_server: Some(|store, params| {
                    $crate::conjunctive::new_server(store, params, algorithms())
                }),
            }
        }

        /// Checks an uploaded index: length and every point.
        pub fn validate(index: &[u8]) -> sesame_core::Result<()> {
            SHAPE.validate(index)
        }

        impl std::fmt::Debug for $client {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($client))
                    .field("n", &self.n)
                    .finish_non_exhaustive()
            }
        }

        impl $client {
            /// Fresh keys for documents of `n` fields.
            pub fn new(
                rng: &mut dyn rand_core::CryptoRngCore,
                n: usize,
            ) -> sesame_core::Result<Self> {
                Self::with_key(&sesame_crypto::key::Key::generate(rng), n)
            }
        }
    };
}
pub(crate) use scheme_glue;

/// The [`super::ConjunctiveScheme`] methods every scheme writes alike:
/// `descriptor` (the module's `DESCRIPTOR`), `fields` (`self.n`),
/// `encrypt_index` (checks the fields, draws the non-zero mask `r`, then
/// the client's own `encrypt_with(&r, id, version, fields)`) and `tester`
/// (`$tester::parse` of a token the client itself made).
macro_rules! scheme_methods {
    ($tester:ident) => {
        fn encrypt_index(
            &self,
            rng: &mut dyn rand_core::CryptoRngCore,
            id: $crate::api::DocId,
            version: u64,
            fields: &[Vec<u8>],
        ) -> sesame_core::Result<Vec<u8>> {
            $crate::conjunctive::check_fields(fields, self.n)?;
            let r = $crate::conjunctive::random_nonzero(rng);
            Ok(self.encrypt_with(&r, id, version, fields))
        }

        fn descriptor(&self) -> &'static sesame_core::SchemeDescriptor {
            &DESCRIPTOR
        }

        fn fields(&self) -> usize {
            self.n
        }

        fn tester(
            &self,
            token: &[u8],
        ) -> sesame_core::Result<Box<dyn $crate::conjunctive::Tester>> {
            Ok(Box::new($tester::parse(
                token,
                $crate::conjunctive::Check::Trusted,
            )?))
        }
    };
}
pub(crate) use scheme_methods;
