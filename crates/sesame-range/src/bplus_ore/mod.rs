//! Range queries with a B+ tree over ORE ciphertexts (seed 004, section
//! 4.1), one protocol per scheme of `sesame-ore`, and the plaintext "no
//! encryption" baseline.
//!
//! The server keeps a B+ tree ([`crate::btree`]) whose keys are ORE
//! ciphertexts and whose values are records sealed by the client
//! ([`RecordKey`](crate::record::RecordKey)); each node is one page of the store, and the node
//! capacities follow from the page size and the scheme's ciphertext size
//! ([`capacity`]), so the fan-out shrinks as ciphertexts grow. The server
//! runs the scheme's public comparison (it holds no key):
//! - for Lewi-Wu and CLOZ only the semantically secure right halves are
//!   stored; insertions navigate with the left half of the new ciphertext
//!   and queries send left halves only;
//! - for BCLO, CLWW and the baseline the server compares whole
//!   ciphertexts;
//! - FH-OPE's ciphertexts are order-preserving integers, so the server
//!   compares them as integers; the client turns a query into ciphertext
//!   bounds with its state (see `docs/schemes/bplus_ore.md`) and forwards
//!   the re-encodings of its rebalances.
//!
//! Messages: an insertion is one round (ciphertext and sealed record); a
//! build (an empty tree given many records at once) sends them sorted by
//! value in rounds of a few megabytes (`Append`; `AppendStored`, right
//! halves only, for Lewi-Wu and CLOZ), and the server fills the tree
//! bottom up along its right edge, each page written once; a query is
//! one round (two query ciphertexts; the sealed records come back); a
//! deletion is two rounds (a query for `[v, v]`, then a delete naming the
//! sealed record that opens to the pair), one for the baseline and for
//! records sealed in the unique form ([`Sealing::Unique`]).

//!
//! The module's parts: `layout` (node capacities for a page size),
//! `order` (each ORE scheme's keyless comparator as the tree runs it),
//! `pages` (tree nodes as page-sized store values), `server` (the server
//! half), `client` (each scheme's client side and the protocol's client).

use serde::{Deserialize, Serialize};
use sesame_core::{BackwardPrivacy, QueryKind, SchemeDescriptor, SchemeKind, Typed};
use sesame_ore::bclo::Bclo;
use sesame_ore::cloz::{Cloz, PairingPph};
use sesame_ore::clww::Clww;
use sesame_ore::fh_ope::FhOpe;
use sesame_ore::insecure::CorrectnessOnlyPph;
use sesame_ore::lewi_wu::LewiWu;

use crate::api::{split_page, RangeProtocol};

mod client;
mod layout;
mod order;
mod pages;
mod server;

pub use client::*;
pub use layout::*;
pub use order::*;
pub use pages::*;
pub use server::*;

const DOC: &str = "docs/schemes/bplus_ore.md";

const CITATION: &str = "D. Bogatov, G. Kollios, L. Reyzin. A Comparative Evaluation of \
                        Order-Revealing Encryption Schemes and Secure Range-Query Protocols. \
                        VLDB 2019, section 4.1; B+ tree: D. Comer, The Ubiquitous B-Tree, 1979; \
                        deletion: J. Jannink, SIGMOD Record 1995";

const fn descriptor(
    name: &'static str,
    title: &'static str,
    leakage: &'static str,
) -> SchemeDescriptor {
    SchemeDescriptor {
        name,
        title,
        citation: CITATION,
        kind: SchemeKind::Range,
        forward_private: false,
        backward_privacy: BackwardPrivacy::None,
        queries: &[QueryKind::Range],
        leakage,
        doc: DOC,
    }
}

/// The "no encryption" baseline: INSECURE, plaintext values and payloads.
pub static PLAIN: SchemeDescriptor = descriptor(
    "bplus-plain",
    "B+ tree without encryption (INSECURE baseline)",
    "INSECURE baseline: the server sees every value and record in the clear, and every query.",
);

/// B+ tree over BCLO.
pub static BCLO: SchemeDescriptor = descriptor(
    "bplus-bclo",
    "B+ tree over BCLO order-preserving encryption",
    "BCLO's leakage (order, equality, and about the upper half of the plaintext bits) of every \
     stored value and query endpoint, the tree shape (which depends on insertion order), the \
     access pattern (visited nodes, returned sealed records) and result sizes.",
);

/// B+ tree over CLWW.
pub static CLWW: SchemeDescriptor = descriptor(
    "bplus-clww",
    "B+ tree over CLWW order-revealing encryption",
    "CLWW's leakage (order, equality and the position of the most significant differing bit) \
     among stored values and query endpoints, the tree shape (insertion order), the access \
     pattern and result sizes.",
);

/// B+ tree over Lewi-Wu, storing right ciphertexts only.
pub static LEWI_WU: SchemeDescriptor = descriptor(
    "bplus-lewi-wu",
    "B+ tree over Lewi-Wu ORE (right ciphertexts stored)",
    "A snapshot of the stored tree (semantically secure right ciphertexts only) reveals its \
     shape (insertion order) and size. Insertions send the full ciphertext and queries send \
     left ciphertexts: a server that keeps them learns, over time, the total order of all \
     inserted values and query endpoints, the index of the first differing d-bit block of \
     every pair, and (left ciphertexts are deterministic) the equality and frequency of \
     inserted values at upload; plus the access pattern and result sizes. A build sends \
     right halves only, in value order: the order of the built values, none of the left \
     halves' leakage.",
);

/// B+ tree over CLOZ with the pairing PPH, storing right ciphertexts only.
pub static CLOZ: SchemeDescriptor = descriptor(
    "bplus-cloz",
    "B+ tree over CLOZ ORE, pairing PPH (right ciphertexts stored; ~1.5 s per comparison)",
    "A snapshot of the stored tree (right ciphertexts only) reveals its shape (insertion \
     order) and size. Insertions send the full ciphertext and queries send left halves: a \
     server that keeps them learns, over time, CLOZ's leakage on all inserted values and \
     query endpoints (total order, equality, and the equality pattern of the most \
     significant differing bits); plus the access pattern and result sizes. A build sends \
     right halves only, in value order: the order of the built values.",
);

/// B+ tree over CLOZ with the correctness-only PPH: INSECURE, benchmarks only.
pub static CLOZ_INSECURE: SchemeDescriptor = descriptor(
    "bplus-cloz-insecure",
    "B+ tree over CLOZ with seed 004's correctness-only PPH (INSECURE, benchmarks only)",
    "INSECURE: the stored hashes are CLWW values in the clear (shuffled); for measuring I/O, \
     sizes and counts with CLOZ-sized ciphertexts only.",
);

/// B+ tree over FH-OPE.
pub static FH_OPE: SchemeDescriptor = descriptor(
    "bplus-fh-ope",
    "B+ tree over frequency-hiding OPE (stateful client)",
    "The total order of the stored ciphertexts (ties among equal values broken at random: not \
     equality or frequency) and the insertion order, which shapes the client's FH-OPE tree and \
     the B+ tree; a rebalance re-encodes every stored ciphertext. Queries reveal the ciphertext \
     interval they cover; the access pattern and result sizes.",
);

// ---------------------------------------------------------------------
// Messages.

/// A request of the B+ tree protocols: `F` is the scheme's full
/// ciphertext, `P` a query endpoint, `R` the part of a ciphertext the
/// tree stores (Lewi-Wu's and CLOZ's right half; the whole ciphertext
/// for the others, the default).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound(
    serialize = "F: Serialize, P: Serialize, R: Serialize",
    deserialize = "F: Deserialize<'de>, P: Deserialize<'de>, R: Deserialize<'de>"
))]
pub enum Request<F, P, R = F> {
    /// Inserts a ciphertext with its sealed record.
    Insert {
        /// Scheme parameters.
        layout: Layout,
        /// The value's ciphertext.
        ciphertext: F,
        /// The sealed record.
        #[serde(with = "sesame_core::wire::bytes")]
        record: Vec<u8>,
    },
    /// Returns the sealed records whose keys lie in `[lo, hi]`.
    Query {
        /// Scheme parameters.
        layout: Layout,
        /// Lower endpoint.
        lo: P,
        /// Upper endpoint.
        hi: P,
    },
    /// Deletes one entry in `[lo, hi]` whose sealed record is `record`.
    Delete {
        /// Scheme parameters.
        layout: Layout,
        /// Lower endpoint.
        lo: P,
        /// Upper endpoint.
        hi: P,
        /// The sealed record, byte for byte.
        #[serde(with = "sesame_core::wire::bytes")]
        record: Vec<u8>,
    },
    /// Replaces stored ciphertexts after an FH-OPE rebalance.
    Reencode {
        /// Scheme parameters.
        layout: Layout,
        /// `(old, new)` ciphertexts, sorted by `old`.
        changes: Vec<(u64, u64)>,
    },
    /// Appends ciphertexts with their sealed records, sorted by value and
    /// none below a stored one, along the tree's right edge (a bulk
    /// build: each page written once). The server checks the order with
    /// the scheme's comparison and refuses entries out of order.
    Append {
        /// Scheme parameters.
        layout: Layout,
        /// `(ciphertext, sealed record)` pairs, in value order.
        #[serde(with = "entries")]
        entries: Vec<(F, Vec<u8>)>,
    },
    /// Appends stored halves with their sealed records, sorted by value
    /// and none below a stored one, along the tree's right edge: a bulk
    /// build of a scheme that stores right halves only (Lewi-Wu, CLOZ),
    /// which sends no left half. The server cannot compare two stored
    /// halves, so it takes the order as given (the client's word, as for
    /// its own records: an order it breaks misanswers its own queries
    /// only) and checks the sizes.
    AppendStored {
        /// Scheme parameters.
        layout: Layout,
        /// `(stored half, sealed record)` pairs, in value order.
        #[serde(with = "entries")]
        entries: Vec<(R, Vec<u8>)>,
    },
}

/// An append's entries, each sealed record through
/// [`sesame_core::wire::bytes`]: the encoding of a `Vec<(F, Vec<u8>)>`,
/// its records copied in one piece.
mod entries {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// A sealed record, borrowed to be written.
    struct Record<'a>(&'a [u8]);

    impl Serialize for Record<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
            sesame_core::wire::bytes::serialize(self.0, s)
        }
    }

    /// A sealed record, read.
    struct Owned(Vec<u8>);

    impl<'de> Deserialize<'de> for Owned {
        fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Owned, D::Error> {
            sesame_core::wire::bytes::deserialize(d).map(Owned)
        }
    }

    pub(super) fn serialize<F: Serialize, S: Serializer>(
        entries: &[(F, Vec<u8>)],
        s: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(entries.iter().map(|(f, r)| (f, Record(r))))
    }

    pub(super) fn deserialize<'de, F: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> std::result::Result<Vec<(F, Vec<u8>)>, D::Error> {
        let read: Vec<(F, Owned)> = Vec::deserialize(d)?;
        Ok(read.into_iter().map(|(f, r)| (f, r.0)).collect())
    }
}

/// A response of the B+ tree protocols.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The insertion or re-encoding is done.
    Done,
    /// The sealed records of a query, in key order.
    Records(Vec<Vec<u8>>),
    /// Whether a deletion found its entry.
    Deleted(bool),
}

// ---------------------------------------------------------------------
// Registry.

const BITS: (&str, &str) = ("bits", "32 (value width, 1..=64)");
const PAYLOAD: (&str, &str) = (
    "payload",
    "16 (record payload bytes the leaves are sized for; larger records still fit, a node \
     then spans more pages)",
);

fn entry<C: ClientOrder>(params: &'static [(&'static str, &'static str)]) -> RangeProtocol {
    RangeProtocol {
        descriptor: C::descriptor(),
        params,
        new_client: |rng, params| {
            let (params, _) = split_page(params)?;
            Ok(Box::new(BplusClient::<C>::new(rng, &params)?))
        },
        restore_client: |bytes| Ok(Box::new(BplusClient::<C>::restore(bytes)?)),
        new_server: Some(|store, params| {
            let (_, page) = split_page(params)?;
            Ok(Box::new(Typed(BplusServer::<C::Server>::new(
                store, &page,
            )?)))
        }),
    }
}

/// The name of the parameter that chooses a client's [`Sealing`].
pub const SEAL_PARAM: &str = "seal";

/// Whether a B+ tree protocol named `protocol` can carry records of
/// `bits`-bit values and `payload`-byte payloads in its ciphertexts'
/// nonces ([`Sealing::Nonce`]).
pub fn seals_in_nonces(protocol: &str, bits: u32, payload: u32) -> bool {
    nonce_fits(protocol == LEWI_WU.name, bits, payload)
}

const SEAL: (&str, &str) = (
    SEAL_PARAM,
    "random (records sealed under a stored random nonce) or unique (no stored nonce and \
     values in the bytes their width needs, for a caller that inserts each (value, payload) \
     pair at most once; docs/schemes/bplus_ore.md, \"Sealed records\") or nonce (Lewi-Wu \
     only, for the same callers: value and payload in one enciphered block that is the right \
     half's nonce, at most 10 bytes of them and payloads of exactly `payload` bytes; \
     \"Records in the nonce\"); the baseline's records are plain either way",
);

/// The protocols of this module: the baseline, then one per ORE scheme.
pub fn protocols() -> Vec<RangeProtocol> {
    vec![
        entry::<PlainClient>(&[BITS, PAYLOAD, SEAL]),
        entry::<Bclo>(&[
            BITS,
            PAYLOAD,
            SEAL,
            ("range", "max(48, bits) (ciphertext width)"),
        ]),
        entry::<Clww>(&[BITS, PAYLOAD, SEAL]),
        entry::<LewiWu>(&[BITS, PAYLOAD, SEAL, ("block", "2 (block width d, 1..=16)")]),
        entry::<Cloz<PairingPph>>(&[BITS, PAYLOAD, SEAL]),
        entry::<Cloz<CorrectnessOnlyPph>>(&[BITS, PAYLOAD, SEAL]),
        entry::<FhOpe>(&[
            BITS,
            PAYLOAD,
            SEAL,
            ("cipher_bits", "64 (ciphertext width, 2..=64)"),
        ]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    use sesame_ore::cloz::{Cloz, ClozComparator, PairingPph};
    use sesame_ore::clww::{Clww, ClwwComparator};

    use sesame_core::wire;
    use sesame_ore::insecure::plain::PlainComparator;
    use sesame_ore::lewi_wu::{LewiWu, LewiWuComparator, LewiWuParams};
    use sesame_ore::OreScheme;

    fn fan_out<O: ServerOrder>(bits: u32, extra: u32) -> (usize, usize) {
        let layout = Layout {
            bits,
            extra,
            payload: 16,
        };
        let v = record_bytes(true, 16) + 1;
        let c = capacity(4096, O::key_bytes(&layout), v).unwrap();
        (c.leaf(), c.internal())
    }

    /// The figures quoted in docs/schemes/bplus_ore.md.
    #[test]
    fn fan_outs_of_the_documentation() {
        assert_eq!(fan_out::<PlainComparator>(32, 0), (70, 407));
        assert_eq!(fan_out::<ClwwComparator>(32, 0), (64, 271));
        assert_eq!(fan_out::<FhOpeOrder>(32, 64), (64, 271));
        assert_eq!(fan_out::<LewiWuComparator>(32, 2), (47, 107));
        assert_eq!(fan_out::<ClozComparator<PairingPph>>(32, 0), (2, 2));
        assert_eq!(
            <LewiWuComparator as ServerOrder>::key_bytes(&Layout {
                bits: 32,
                extra: 2,
                payload: 16
            }),
            33
        );
        assert_eq!(
            ClozComparator::<PairingPph>::key_bytes(&Layout {
                bits: 32,
                extra: 0,
                payload: 16
            }),
            12_417
        );
    }

    #[test]
    fn key_bounds_hold_for_extreme_ciphertexts() {
        let mut rng = rand_chacha::ChaCha20Rng::from_seed([3; 32]);
        let layout = Layout {
            bits: 32,
            extra: 2,
            payload: 16,
        };
        let mut lw = LewiWu::generate(
            &mut rng,
            LewiWuParams {
                bits: 32,
                block_bits: 2,
            },
        )
        .unwrap();
        let clww = Clww::generate(&mut rng, 32).unwrap();
        for x in [0, 1, u64::from(u32::MAX)] {
            let c = OreScheme::encrypt(&mut lw, &mut rng, x).unwrap();
            assert!(
                wire::encode_raw_into(&c.right, Vec::new()).unwrap().len()
                    <= <LewiWuComparator as ServerOrder>::key_bytes(&layout)
            );
            let c = clww.encrypt_u64(x).unwrap();
            assert!(
                wire::encode_raw_into(&c, Vec::new()).unwrap().len()
                    <= <ClwwComparator as ServerOrder>::key_bytes(&layout)
            );
        }
        let mut pairing = Cloz::<PairingPph>::generate(&mut rng, 2).unwrap();
        let c = OreScheme::encrypt(&mut pairing, &mut rng, 3).unwrap();
        let two = Layout {
            bits: 2,
            extra: 0,
            payload: 16,
        };
        assert_eq!(
            wire::encode_raw_into(&c.right, Vec::new()).unwrap().len(),
            ClozComparator::<PairingPph>::key_bytes(&two)
        );
    }

    /// The requests and ciphertexts whose bytes go through
    /// `wire::bytes` (sealed records, Lewi-Wu's trits) encode byte for
    /// byte as their derived encoding of plain `Vec<u8>` fields did, and
    /// read back: stored pages and messages of earlier builds still read.
    #[test]
    fn byte_strings_keep_the_encoding_of_vectors() {
        use sesame_ore::lewi_wu::{LeftBlock, LewiWuCiphertext};
        #[derive(Serialize)]
        struct Right<'a> {
            nonce: [u8; 16],
            trits: &'a Vec<u8>,
        }
        #[derive(Serialize)]
        struct Ct<'a> {
            left: &'a Vec<LeftBlock>,
            right: Right<'a>,
        }
        #[derive(Serialize)]
        enum Old<'a> {
            Insert {
                layout: Layout,
                ciphertext: Ct<'a>,
                record: Vec<u8>,
            },
            Query,
            Delete {
                layout: Layout,
                lo: Ct<'a>,
                hi: Ct<'a>,
                record: Vec<u8>,
            },
            Reencode,
            Append {
                layout: Layout,
                entries: Vec<(Ct<'a>, Vec<u8>)>,
            },
        }
        fn old(c: &LewiWuCiphertext) -> Ct<'_> {
            Ct {
                left: &c.left.blocks,
                right: Right {
                    nonce: c.right.nonce,
                    trits: &c.right.trits,
                },
            }
        }
        let mut rng = rand_chacha::ChaCha20Rng::from_seed([5; 32]);
        let params = LewiWuParams {
            bits: 16,
            block_bits: 8,
        };
        let mut lw = LewiWu::generate(&mut rng, params).unwrap();
        let layout = Layout {
            bits: 16,
            extra: 8,
            payload: 16,
        };
        let cts: Vec<LewiWuCiphertext> = (0..3)
            .map(|x| OreScheme::encrypt(&mut lw, &mut rng, x * 1000).unwrap())
            .collect();
        let records: Vec<Vec<u8>> = (0..3usize).map(|i| vec![i as u8; 40 + 100 * i]).collect();
        type Req = Request<LewiWuCiphertext, LewiWuCiphertext>;
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (
                wire::encode(&Req::Insert {
                    layout,
                    ciphertext: cts[0].clone(),
                    record: records[1].clone(),
                })
                .unwrap(),
                wire::encode(&Old::Insert {
                    layout,
                    ciphertext: old(&cts[0]),
                    record: records[1].clone(),
                })
                .unwrap(),
            ),
            (
                wire::encode(&Req::Delete {
                    layout,
                    lo: cts[0].clone(),
                    hi: cts[1].clone(),
                    record: records[2].clone(),
                })
                .unwrap(),
                wire::encode(&Old::Delete {
                    layout,
                    lo: old(&cts[0]),
                    hi: old(&cts[1]),
                    record: records[2].clone(),
                })
                .unwrap(),
            ),
            (
                wire::encode(&Req::Append {
                    layout,
                    entries: cts.iter().cloned().zip(records.iter().cloned()).collect(),
                })
                .unwrap(),
                wire::encode(&Old::Append {
                    layout,
                    entries: cts.iter().map(old).zip(records.iter().cloned()).collect(),
                })
                .unwrap(),
            ),
        ];
        for (new, was) in &pairs {
            assert_eq!(new, was);
            let back: Req = wire::decode(new).unwrap();
            assert_eq!(&wire::encode(&back).unwrap(), new);
        }
        let back: Req = wire::decode(&pairs[2].0).unwrap();
        assert_eq!(
            back,
            Req::Append {
                layout,
                entries: cts.into_iter().zip(records).collect(),
            }
        );
        // Unused forms of the old enum keep its variants' indexes.
        let _ = (Old::Query, Old::Reencode);
    }
}
