//! What a stored document is, and what bounds its reads: the sealed
//! record and its packing (compressed, padded to a length class), the
//! bound of its blob and the check of its digest, the batch
//! limits of the document service, and the gate an add's indexing waits
//! on while its documents are stored. Used by the session's documents
//! (`documents.rs`), its rotation and its sync.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use zeroize::{Zeroize, Zeroizing};

use crate::doc_service::DocId;
use crate::error::{ClientError, Result};
use crate::state::{digest_matches, DocumentInfo};

/// Bytes of documents per request to the document service, at most.
pub(crate) const BATCH_BYTES: u64 = 16 << 20;
/// The most documents one document request names (fewer where the server
/// says so).
pub(crate) const DOCS_PER_REQUEST: usize = 10_000;

/// Bytes of a sealed document beside its content: the encoded path and
/// lengths, the packing's header ([`PACK_HEADER`]; a compressed document
/// is shorter than its content), the AEAD's nonce and tag, and the
/// message framing.
pub(crate) const SEAL_OVERHEAD: u64 = 256;

/// The most bytes the sealed blob of a catalogued document may have: its
/// content and path as the catalog recorded them when it was added, and
/// the sealing's overhead. Every read of a document is bounded by it, so
/// a store (or server) that claims a larger document costs the client no
/// more reads and memory than the document it stored.
pub(crate) fn stored_bound(doc: &DocumentInfo) -> u64 {
    doc.size
        .saturating_add(doc.path.len() as u64)
        .saturating_add(SEAL_OVERHEAD)
}

/// The lengths a compressed document's body may take, as fractions of
/// its encoded record's length `m`, in 65,536ths: `m / 2^(k/2)` for `k`
/// in 1..=6 (down to an eighth). A compressed record is padded to the
/// shortest of these that holds it, and a record no class saves bytes on
/// is stored as it is, so a sealed document's length is a function of
/// `m` (as before compression) and of which of seven classes (these
/// six, or none) its compression ratio falls in: under three bits more.
const CLASSES: [u64; 6] = [46_341, 32_768, 23_170, 16_384, 11_585, 8_192];

/// Bytes of a compressed document's header: its form (1 byte), the
/// encoded record's length and the body's length (8 bytes each,
/// big-endian). A record stored as it is has its form byte alone.
pub(crate) const PACK_HEADER: usize = 17;

/// Forms of a packed document's body.
const RAW: u8 = 0;
const ZSTD: u8 = 1;

/// zstd's level: its fastest with a useful ratio (the corpus of
/// `docs/performance.md` compresses 3.7 times).
const ZSTD_LEVEL: i32 = 1;

/// The most bytes an encoded record may have: the largest document, its
/// path and the encoding's framing.
const MAX_RECORD: u64 = crate::MAX_DOCUMENT + (1 << 20);

/// Length of class `k` for a record of `m` bytes (rounded up).
fn class_len(m: usize, k: usize) -> usize {
    ((m as u128 * u128::from(CLASSES[k])).div_ceil(1 << 16)) as usize
}

/// Whether a compressed record padded to class `k` is shorter than the
/// record stored as it is (a function of `m` alone).
fn saves(m: usize, k: usize) -> bool {
    PACK_HEADER + class_len(m, k) < 1 + m
}

/// The plaintext a document is sealed as: its encoded record compressed
/// with zstd and padded with zeros to the shortest length class that
/// holds it (behind a header of [`PACK_HEADER`] bytes), or, where no
/// class that saves bytes holds it, the record as it is behind its form
/// byte. The compressor's internal buffers are freed without being wiped
/// (as the AEAD's are).
pub(crate) fn pack(encoded: &[u8], compressor: &mut Compressor) -> Result<Zeroizing<Vec<u8>>> {
    let m = encoded.len();
    let mut class = None;
    if saves(m, 0) {
        let compressed =
            Zeroizing::new(compressor.0.compress(encoded).map_err(|e| {
                ClientError::InvalidArgument(format!("compressing a document: {e}"))
            })?);
        class = (0..CLASSES.len())
            .rev()
            .find(|&k| class_len(m, k) >= compressed.len() && saves(m, k))
            .map(|k| (k, compressed));
    }
    let Some((k, body)) = class else {
        let mut out = Zeroizing::new(Vec::with_capacity(1 + m));
        out.push(RAW);
        out.extend_from_slice(encoded);
        return Ok(out);
    };
    let len = PACK_HEADER + class_len(m, k);
    let mut out = Zeroizing::new(Vec::with_capacity(len));
    out.push(ZSTD);
    out.extend_from_slice(&(m as u64).to_be_bytes());
    out.extend_from_slice(&(body.len() as u64).to_be_bytes());
    out.extend_from_slice(&body);
    out.resize(len, 0);
    Ok(out)
}

/// The encoded record of a packed document; `None` if `plain` is not one
/// (an unknown form, a header naming more bytes than it holds, a body
/// that does not decompress to the length the header names).
pub(crate) fn unpack(plain: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
    let (&form, rest) = plain.split_first()?;
    match form {
        RAW => Some(Zeroizing::new(rest.to_vec())),
        ZSTD => {
            let (m, rest) = rest.split_first_chunk::<8>()?;
            let (n, rest) = rest.split_first_chunk::<8>()?;
            let (m, n) = (u64::from_be_bytes(*m), u64::from_be_bytes(*n));
            if m > MAX_RECORD || n > rest.len() as u64 {
                return None;
            }
            let body = &rest[..n as usize];
            let out = Zeroizing::new(zstd::bulk::decompress(body, m as usize).ok()?);
            (out.len() as u64 == m).then_some(out)
        }
        _ => None,
    }
}

/// A zstd compression context, kept across the documents of one writer.
pub(crate) struct Compressor(zstd::bulk::Compressor<'static>);

impl Compressor {
    pub(crate) fn new() -> Result<Self> {
        zstd::bulk::Compressor::new(ZSTD_LEVEL)
            .map(Compressor)
            .map_err(|e| ClientError::InvalidArgument(format!("a zstd context: {e}")))
    }
}

/// What an encrypted document holds.
#[derive(Serialize, Deserialize)]
pub(crate) struct DocRecord {
    pub path: String,
    pub content: Vec<u8>,
}

impl Drop for DocRecord {
    fn drop(&mut self) {
        self.content.zeroize();
    }
}

/// Checks an opened document against the digest the catalog recorded
/// when it was added (none for documents of builds that did not record
/// one): a server that serves another version under the identifier is
/// caught here.
pub(crate) fn check_digest(doc: &DocumentInfo, record: DocRecord) -> Result<DocRecord> {
    match doc.digest {
        Some(d) if !digest_matches(&d, &sesame_crypto::hash::sha256(&record.content)) => {
            Err(ClientError::DocumentNotAsAdded(doc.id))
        }
        _ => Ok(record),
    }
}

/// How far another thread has stored the documents of an add, for the
/// updates that index them meanwhile: an intent is saved only once every
/// document it adds is stored (identifiers are handed out in order).
#[derive(Debug, Default)]
pub(crate) struct StoredGate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    /// Every document of the add with a smaller identifier is stored.
    below: DocId,
    /// The storing thread ended (all stored, or failed).
    ended: bool,
}

impl StoredGate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every document of the add below `below` is stored.
    pub(crate) fn advance(&self, below: DocId) {
        self.lock().below = below;
        self.changed.notify_all();
    }

    /// The storing thread ended; a wait for a document it did not store
    /// fails from now on.
    pub(crate) fn end(&self) {
        self.lock().ended = true;
        self.changed.notify_all();
    }

    /// Waits until document `id` is stored.
    pub(crate) fn wait(&self, id: DocId) -> Result<()> {
        let mut state = self.lock();
        while state.below <= id {
            if state.ended {
                return Err(ClientError::DocumentMissing(id));
            }
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes from a seeded generator: `text` words from a small
    /// vocabulary (compressible), or uniform bytes (not).
    fn bytes(seed: u64, n: usize, text: bool) -> Vec<u8> {
        let mut x = seed | 1;
        let mut out = Vec::with_capacity(n + 8);
        while out.len() < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if text {
                out.extend_from_slice(
                    ["self ", "return ", "value ", "if "][(x % 4) as usize].as_bytes(),
                );
            } else {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        out.truncate(n);
        out
    }

    #[test]
    fn packed_documents_round_trip_and_take_a_class_length() {
        let mut c = Compressor::new().unwrap();
        for n in [0, 1, 17, 100, 4_000, 50_000] {
            for text in [true, false] {
                let encoded = bytes(n as u64 + 3, n, text);
                let packed = pack(&encoded, &mut c).unwrap();
                assert_eq!(unpack(&packed).unwrap().as_slice(), encoded.as_slice());
                // The length is the record's behind its form byte, or one
                // of the six classes of `n` behind the header.
                let mut lengths: Vec<usize> = (0..CLASSES.len())
                    .map(|k| PACK_HEADER + class_len(n, k))
                    .collect();
                lengths.push(1 + n);
                assert!(
                    lengths.contains(&packed.len()),
                    "{n} bytes packed into {}",
                    packed.len()
                );
                if text && n >= 4_000 {
                    // Compressible text takes a class of a quarter or less.
                    let body = packed.len() - PACK_HEADER;
                    assert!(body <= class_len(n, 3), "{n} bytes packed into {body}");
                    assert_eq!(packed[0], ZSTD);
                }
                if !text || n < 60 {
                    // Incompressible bytes, and records too short for any
                    // class to save bytes, are stored as they are.
                    assert_eq!(packed.len(), 1 + n);
                    assert_eq!(packed[0], RAW);
                }
            }
        }
        // Two texts of one length and one class: the same length, whatever
        // their words.
        let a = pack(&bytes(1, 30_000, true), &mut c).unwrap();
        let b = pack(&bytes(2, 30_000, true), &mut c).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), b.len());
    }

    #[test]
    fn a_damaged_packing_is_refused() {
        let mut c = Compressor::new().unwrap();
        let encoded = bytes(5, 20_000, true);
        let packed = pack(&encoded, &mut c).unwrap();
        // Cut short, a body longer than the rest, a length the body does not
        // decompress to, an unknown form: none unpacks (and none panics).
        assert!(unpack(&packed[..10]).is_none());
        let mut longer = packed.to_vec();
        longer[9..17].copy_from_slice(&(packed.len() as u64).to_be_bytes());
        assert!(unpack(&longer).is_none());
        let mut wrong = packed.to_vec();
        wrong[1..9].copy_from_slice(&19_999u64.to_be_bytes());
        assert!(unpack(&wrong).is_none());
        let mut huge = packed.to_vec();
        huge[1..9].copy_from_slice(&u64::MAX.to_be_bytes());
        assert!(unpack(&huge).is_none());
        let mut form = packed.to_vec();
        form[0] = 9;
        assert!(unpack(&form).is_none());
    }
}
