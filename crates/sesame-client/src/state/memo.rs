//! What the last commit of a shared state sealed and named, so that the
//! next commit seals and names only what changed.
//!
//! A shared state is sealed in content-defined segments, each under a
//! nonce derived from its bytes ([`StateCipher::seal_segmented_with`]), and
//! stored in content-named chunks, each named by its SHA-256
//! (`session::chunks`): both are functions of the bytes alone (and of the
//! key and the index, for a segment). An import commits the state a few
//! times per batch while most of it (the catalog it appends to) stays as
//! it was, so most segments and chunks of a commit are byte for byte
//! those of the one before. The memo keeps that commit's plaintext and
//! sealed state; a segment or chunk equal to one of them (found by its
//! length and its first and last 8 bytes, then compared whole) takes the
//! sealed bytes or the name computed then instead of computing them again.
//! The bytes a commit writes are exactly those it wrote without the memo
//! (tested).
//!
//! A sealed segment is reused only under the key and the index it was
//! sealed for: the memo keeps a keyed digest of both
//! ([`StateCipher::memo_check`]) and is not consulted under another.
//! It holds about twice the state's sealed size (the plaintext is zeroed
//! when dropped).
//!
//! [`StateCipher::seal_segmented_with`]: crate::state::StateCipher::seal_segmented_with
//! [`StateCipher::memo_check`]: crate::state::StateCipher::memo_check

use std::collections::HashMap;
use std::ops::Range;

use zeroize::Zeroizing;

/// A segment's or chunk's length with its first and last 8 bytes: where
/// to look for an equal one (compared whole before use).
type Probe = (usize, u64, u64);

fn probe(bytes: &[u8]) -> Probe {
    let head = bytes
        .first_chunk::<8>()
        .map_or(0, |b| u64::from_le_bytes(*b));
    let tail = bytes
        .last_chunk::<8>()
        .map_or(0, |b| u64::from_le_bytes(*b));
    (bytes.len(), head, tail)
}

/// The last commit's plaintext and sealed state, with where each of its
/// segments and chunks lies.
#[derive(Default)]
pub(crate) struct CommitMemo {
    /// [`StateCipher::memo_check`](crate::state::StateCipher::memo_check)
    /// of the key and index the segments were sealed for.
    check: Option<[u8; 32]>,
    plain: Zeroizing<Vec<u8>>,
    blob: Vec<u8>,
    /// A segment's start in `plain` and its sealed bytes in `blob`.
    segments: HashMap<Probe, Vec<(usize, Range<usize>)>>,
    /// A chunk's start in `blob` and its name.
    chunks: HashMap<Probe, Vec<(usize, [u8; 12])>>,
}

impl CommitMemo {
    /// The sealed bytes of the segment `part` from the last commit, if it
    /// had that segment under the key and index `check` names.
    pub(crate) fn sealed(&self, check: &[u8; 32], part: &[u8]) -> Option<&[u8]> {
        if self.check.as_ref() != Some(check) {
            return None;
        }
        self.segments
            .get(&probe(part))?
            .iter()
            .find_map(|(start, sealed)| {
                let same = self.plain.get(*start..start.checked_add(part.len())?) == Some(part);
                if same {
                    self.blob.get(sealed.clone())
                } else {
                    None
                }
            })
    }

    /// The name of `chunk` from the last commit, if it had that chunk.
    pub(crate) fn chunk_id(&self, chunk: &[u8]) -> Option<[u8; 12]> {
        self.chunks
            .get(&probe(chunk))?
            .iter()
            .find_map(|(start, id)| {
                let same = self.blob.get(*start..start.checked_add(chunk.len())?) == Some(chunk);
                same.then_some(*id)
            })
    }

    /// Keeps a commit's seal and chunk names in place of the last one's.
    pub(crate) fn keep(&mut self, seal: Seal, blob: Vec<u8>, chunks: ChunkNames) {
        self.check = Some(seal.check);
        self.plain = seal.plain;
        self.segments = seal.segments;
        self.blob = blob;
        self.chunks = chunks.0;
    }
}

/// One commit's sealing, before it is kept: the plaintext and where each
/// segment's sealed bytes lie in the sealed state.
pub(crate) struct Seal {
    check: [u8; 32],
    plain: Zeroizing<Vec<u8>>,
    segments: HashMap<Probe, Vec<(usize, Range<usize>)>>,
}

impl Seal {
    pub(crate) fn new(check: [u8; 32]) -> Self {
        Seal {
            check,
            plain: Zeroizing::new(Vec::new()),
            segments: HashMap::new(),
        }
    }

    /// Notes the segment `part`, at `start` in the plaintext, sealed to
    /// the bytes at `sealed` of the sealed output.
    pub(crate) fn segment(&mut self, part: &[u8], start: usize, sealed: Range<usize>) {
        self.segments
            .entry(probe(part))
            .or_default()
            .push((start, sealed));
    }

    /// Sets the plaintext the segments are in.
    pub(crate) fn finish(&mut self, plain: Zeroizing<Vec<u8>>) {
        self.plain = plain;
    }
}

/// The chunks one commit stored its state in: start in the state and name.
#[derive(Default)]
pub(crate) struct ChunkNames(HashMap<Probe, Vec<(usize, [u8; 12])>>);

impl ChunkNames {
    pub(crate) fn note(&mut self, chunk: &[u8], start: usize, id: [u8; 12]) {
        self.0.entry(probe(chunk)).or_default().push((start, id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment or chunk of the same length, head and tail as one the
    /// memo holds, but other bytes between, is not taken for it.
    #[test]
    fn only_equal_bytes_are_taken() {
        let plain: Vec<u8> = (0..100u8).collect();
        let blob: Vec<u8> = (0..200u8).collect();
        let check = [1; 32];
        let mut seal = Seal::new(check);
        seal.segment(&plain[10..60], 10, 55..95);
        seal.finish(Zeroizing::new(plain.clone()));
        let mut names = ChunkNames::default();
        names.note(&blob[20..80], 20, [9; 12]);
        let mut memo = CommitMemo::default();
        memo.keep(seal, blob.clone(), names);

        assert_eq!(memo.sealed(&check, &plain[10..60]), Some(&blob[55..95]));
        assert_eq!(memo.chunk_id(&blob[20..80]), Some([9; 12]));
        let mut part = plain[10..60].to_vec();
        part[25] ^= 1;
        assert_eq!(memo.sealed(&check, &part), None);
        assert_eq!(memo.sealed(&[2; 32], &plain[10..60]), None);
        let mut chunk = blob[20..80].to_vec();
        chunk[30] ^= 1;
        assert_eq!(memo.chunk_id(&chunk), None);
        assert_eq!(memo.chunk_id(&blob[20..81]), None);
    }
}
