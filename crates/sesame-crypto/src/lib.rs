//! Cryptographic primitives of Sesame, each call counted.
//!
//! Every primitive is built on RustCrypto crates (`aes`, `sha2`, `hmac`,
//! `hkdf`, `aes-gcm-siv`); nothing here implements a cipher or a hash,
//! except that AES-128 and AES-256 under many keys at once (a GGM level's
//! nodes, an Aura entry's pads, the message keys of a batch of AEAD
//! messages) run on the CPU's AES instructions side by side
//! (`aes_many`, private: byte for byte the `aes` crate's AES, which it
//! falls back to on a CPU without them; and those batches' POLYVAL,
//! several messages in turn with PCLMULQDQ, else the `polyval` crate's).
//! That module is the crate's only
//! `unsafe` code: calling the functions compiled for the instruction set
//! detected at run time. HMAC-SHA256 keeps its keyed inner and outer
//! states and resumes SHA-256 from them with `sha2`'s compression
//! function (`hash`, checked against the `hmac` and `sha2` crates).
//!
//! | Module | Types | Backed by | Counted as |
//! |---|---|---|---|
//! | [`key`] | [`Key<N>`](Key), [`Key::derive`] (HKDF-SHA256) | `hkdf`, `sha2` | derive: Prf |
//! | [`prf`] | [`Aes128Prf`] (one block, batch), [`HmacPrf`] | `aes`, `hmac` | Prf per output block |
//! | [`prg`] | [`AesCtrPrg`] (buffered AES-128-CTR, `RngCore`) | `ctr`, `aes` | Prg per request, AES blocks as nested Prf |
//! | [`prp`] | [`KnuthPrp`] (table, `n <= 2^16`), [`FeistelPrp`] (10 rounds, cycle walking) | `aes` | Prp per point; Feistel AES calls nested Prf |
//! | [`aead`] | [`Aes256GcmSiv`] (one message, or a batch: `seal_each`, `open_each`) | `aes`, `polyval` (RFC 8452; batches through `aes_many`) | Ske per message sealed/opened |
//! | [`hash`] | [`sha256`](hash::sha256), [`ro`](hash::ro), [`KeyedHash`] | `sha2`, `hmac` | Hash per digest |
//! | [`bloom`] | [`BloomFilter`], [`BloomKey`] (double hashing) | `hmac` | Prf per item hashed |
//! | [`ggm`] | [`GgmTree`], [`GgmNode`], [`PuncturedKey`] | AES instructions (`aes_many`), else `aes` | Prf per leaf/cover, Prg per node expansion (nested) |
//! | [`merkle`] | [`MerkleTree`], [`MerkleProof`] | `sha2` | Hash per node hashed |
//!
//! # Counting rule
//!
//! Every call of every primitive is reported to [`counter`] by kind. A
//! primitive that calls no other counted primitive records itself with
//! [`counter::record`]; one that does (a PRG refilling from AES, a Feistel
//! PRP calling AES, a GGM leaf expanding nodes) enters a
//! [`counter::enter`] guard, so the inner calls count in the **total** but
//! not in the **pure** figures. Pure counts are therefore what a scheme
//! calls itself; totals include the work underneath. Batch calls count one
//! call per item in a single counter update. Constructors (key schedules,
//! table set-up) count only the primitives they invoke (a key derivation is
//! a Prf call; a Knuth shuffle is one Prg request).
//!
//! # Conventions
//!
//! Key material lives in [`Key<N>`](Key) and in types that wipe it on drop and
//! print `[redacted]`. Constructors from slices return [`Error`] rather than
//! panicking. Randomness comes from a caller-supplied
//! [`rand_core::CryptoRngCore`].
//!
//! ```
//! use sesame_crypto::{counter, Aes128Prf, Key, Prf, Primitive};
//!
//! let master = Key::<32>::from_bytes([7; 32]);
//! let prf = Aes128Prf::new(&master.derive("example/prf"));
//! let (out, calls) = counter::measure(|| prf.eval(&[0u8; 16]));
//! assert_eq!(out.len(), 16);
//! assert_eq!(calls.pure(Primitive::Prf), 1);
//! assert_eq!(format!("{master:?}"), "[redacted]");
//! ```
//!
//! Design notes: `docs/crypto.md`; measured costs: `docs/performance.md`.

pub mod aead;
mod aes_many;
pub mod bloom;
pub mod counter;
pub mod error;
pub mod ggm;
pub mod hash;
pub mod key;
pub mod merkle;
pub mod pke;
pub mod prf;
pub mod prg;
pub mod prp;
pub mod ue;

pub use aead::{Aead, Aes256GcmSiv};
pub use bloom::{BloomFilter, BloomKey, BloomPositions};
pub use counter::{Primitive, PrimitiveCounts};
pub use error::{Error, Result};
pub use ggm::{GgmNode, GgmTree, PuncturedKey};
pub use hash::{HashFunction, KeyedHash};
pub use key::{Key, Key128, Key256};
pub use merkle::{MerkleProof, MerkleTree};
pub use prf::{Aes128Prf, HmacPrf, Prf};
pub use prg::{AesCtrPrg, Prg};
pub use prp::{FeistelPrp, KnuthPrp, Prp};
