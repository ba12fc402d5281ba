//! How a large shared state is stored: in content-defined chunks
//! ([`crate::cdc`]), each a record named by the digest of its bytes, so
//! that a commit writes only the chunks the state in force does not
//! already have.
//!
//! The state is sealed in segments that seal to the same bytes when they
//! hold the same bytes ([`StateCipher::seal_segmented_with`]), so the chunks of
//! the unchanged parts of a state (most of a catalog an import appends
//! to) are the same records from one version to the next. The state
//! record lists its chunks (`2 || (12-byte id || u32 len)*`, the id the
//! first 12 bytes of the chunk's SHA-256, its record `c-` and the id in
//! hex). A commit
//!
//! - reads the state record in force (the version it commits over) to
//!   know its chunks, and writes the chunks of the new state that it
//!   lacks, of any version, before the commit (they are content-named: two
//!   writers of the same name write the same bytes);
//! - deletes the chunks the state in force lists and the new one does
//!   not, in the commit's own compare-and-swap write: they go only if the
//!   commit does, so no state in force ever lacks a chunk. A reader of the
//!   state in force while a commit replaces it finds a chunk gone, and
//!   reads the new state (`fetch`, `refresh`).
//!
//! A commit that loses the compare-and-swap (another device committed
//! first), or a process killed between its chunk writes and its commit,
//! leaves the chunks it wrote: what that commit changed, no more; they
//! are not collected (a later commit of the same bytes uses them).
//!
//! [`StateCipher::seal_segmented_with`]: crate::state::StateCipher::seal_segmented_with

use std::collections::BTreeSet;

use crate::backend::{Backend, IndexRecordWrite};
use crate::error::{ClientError, Result};
use crate::state::{ChunkNames, CommitMemo};

/// Tag of a record value held in content-named chunks.
pub(super) const CONTENT: u8 = 2;
/// Bytes of a chunk's entry in the list: id and length.
const ENTRY: usize = 12 + 4;
/// A value at most this long is held inline.
pub(super) const INLINE_MAX: usize = crate::cdc::MAX_CHUNK;

/// The most chunks a state is stored in, where the message size allows
/// (a server keeps 1,024 records per index: old and new chunks live
/// together until a commit, beside the intents).
const TARGET_CHUNKS: usize = 256;

/// The chunking level for a value of `len` bytes: the lowest at which it
/// takes at most [`TARGET_CHUNKS`] chunks on average, and whose chunks fit
/// a message of `chunk_max` bytes. The level rises each time the state
/// doubles past 3 MiB, re-sending it once (the uploads of a growing state
/// stay linear in its size).
fn level(len: usize, chunk_max: usize) -> u32 {
    let mut level = 0;
    while level < crate::cdc::MAX_LEVEL
        && len > TARGET_CHUNKS * crate::cdc::average(level)
        && crate::cdc::max_at(level + 1) <= chunk_max
    {
        level += 1;
    }
    level
}

/// The record of the chunk with id `id`.
fn chunk_record(id: &[u8]) -> String {
    format!("c-{}", hex::encode(id))
}

/// The id of a chunk: the first 12 bytes of its SHA-256.
fn chunk_id(chunk: &[u8]) -> [u8; 12] {
    let digest = sesame_crypto::hash::sha256(chunk);
    let mut id = [0u8; 12];
    id.copy_from_slice(digest.get(..12).unwrap_or(&[0; 12]));
    id
}

/// The chunk records a [`CONTENT`] value's list (after the tag) names,
/// with their lengths; `None` if it does not parse.
fn entries(list: &[u8]) -> Option<Vec<([u8; 12], usize)>> {
    if !list.len().is_multiple_of(ENTRY) {
        return None;
    }
    list.chunks(ENTRY)
        .map(|e| {
            let (id, len) = e.split_first_chunk::<12>()?;
            let len: [u8; 4] = len.try_into().ok()?;
            Some((*id, usize::try_from(u32::from_be_bytes(len)).ok()?))
        })
        .collect()
}

/// Tag of a value in chunks named by a prefix and their number (the
/// format before [`CONTENT`]: `1 || u32 count || prefix`).
const PREFIXED: u8 = 1;

/// The chunk records a state record's value uses: a [`CONTENT`] value's
/// chunks, or those of a value of the format before.
fn records_of(value: &[u8]) -> BTreeSet<String> {
    match value.split_first() {
        Some((&CONTENT, list)) => entries(list)
            .unwrap_or_default()
            .iter()
            .map(|(id, _)| chunk_record(id))
            .collect(),
        Some((&PREFIXED, rest)) => match rest.split_first_chunk::<4>() {
            Some((count, prefix)) => match std::str::from_utf8(prefix) {
                Ok(prefix) => (0..u32::from_be_bytes(*count))
                    .map(|k| format!("{prefix}{k}"))
                    .collect(),
                Err(_) => BTreeSet::new(),
            },
            None => BTreeSet::new(),
        },
        _ => BTreeSet::new(),
    }
}

/// Stores `bytes` (a sealed state to commit over version `expected` of
/// the state record) as a [`CONTENT`] value: writes now the chunks the
/// record in force lacks (batches of up to `chunk_max` bytes), and
/// returns the value and the deletions for the commit's write (the
/// chunks of a value of the format before go too). A chunk the last
/// commit had (`memo`) takes the name it had; `names` gets every chunk's.
pub(super) fn put_state(
    backend: &mut dyn Backend,
    index: &str,
    chunk_max: usize,
    (expected, bytes): (u64, &[u8]),
    memo: &CommitMemo,
    names: &mut ChunkNames,
) -> Result<(Vec<u8>, Vec<IndexRecordWrite>)> {
    let in_force = if expected == 0 {
        BTreeSet::new()
    } else {
        let records = backend
            .read_records(index, &[super::shared::STATE_RECORD.to_owned()], &[])?
            .unwrap_or_default();
        match records.first() {
            // Another version: the commit will find it and fail, having
            // written what it needed.
            Some(r) if r.version == expected => records_of(&r.value),
            _ => BTreeSet::new(),
        }
    };
    let chunks = crate::cdc::chunks_at(bytes, level(bytes.len(), chunk_max));
    let mut value = Vec::with_capacity(1 + chunks.len() * ENTRY);
    value.push(CONTENT);
    let mut used = BTreeSet::new();
    let mut batch: Vec<IndexRecordWrite> = Vec::new();
    let mut batch_bytes = 0usize;
    let mut start = 0;
    for chunk in chunks {
        let id = memo.chunk_id(chunk).unwrap_or_else(|| chunk_id(chunk));
        names.note(chunk, start, id);
        start += chunk.len();
        let len = u32::try_from(chunk.len()).map_err(|_| {
            ClientError::InvalidArgument("a chunk of the client state is too large".into())
        })?;
        value.extend_from_slice(&id);
        value.extend_from_slice(&len.to_be_bytes());
        let name = chunk_record(&id);
        if in_force.contains(&name) || !used.insert(name.clone()) {
            used.insert(name);
            continue;
        }
        if batch_bytes + chunk.len() > chunk_max && !batch.is_empty() {
            write_any(backend, index, std::mem::take(&mut batch))?;
            batch_bytes = 0;
        }
        batch_bytes += chunk.len();
        batch.push(IndexRecordWrite {
            name,
            expected: super::shared::ANY_VERSION,
            value: Some(chunk.to_vec()),
        });
    }
    if !batch.is_empty() {
        write_any(backend, index, batch)?;
    }
    let gone = in_force
        .difference(&used)
        .map(|name| IndexRecordWrite {
            name: name.clone(),
            expected: super::shared::ANY_VERSION,
            value: None,
        })
        .collect();
    Ok((value, gone))
}

impl super::Session {
    /// The record value of a sealed state committed over version
    /// `expected`, and the deletions that go with the commit: the bytes
    /// themselves when at most [`INLINE_MAX`], else [`put_state`]'s.
    pub(super) fn put_state(
        &mut self,
        expected: u64,
        bytes: &[u8],
        memo: &CommitMemo,
        names: &mut ChunkNames,
    ) -> Result<(Vec<u8>, Vec<IndexRecordWrite>)> {
        let chunk_max = super::shared::chunk_max(self.backend.as_mut())?;
        let backend = self.backend.as_mut();
        if bytes.len() > INLINE_MAX.min(chunk_max / 4) {
            return put_state(
                backend,
                &self.index,
                chunk_max,
                (expected, bytes),
                memo,
                names,
            );
        }
        let mut value = Vec::with_capacity(1 + bytes.len());
        value.push(0);
        value.extend_from_slice(bytes);
        // The chunks of the state in force, if it had any, go.
        let (_, gone) = put_state(
            backend,
            &self.index,
            chunk_max,
            (expected, &[]),
            memo,
            names,
        )?;
        Ok((value, gone))
    }
}

/// Writes chunk records of any version.
fn write_any(backend: &mut dyn Backend, index: &str, writes: Vec<IndexRecordWrite>) -> Result<()> {
    if backend.write_records(index, writes)?.is_some() {
        return Err(ClientError::Core(sesame_core::Error::Protocol(
            "the server refused a write of any version".into(),
        )));
    }
    Ok(())
}

/// Reassembles a [`CONTENT`] value (`list`, after the tag) from its
/// chunks, read in requests of up to `chunk_max` bytes, each checked
/// against its id; a chunk missing or altered is
/// [`ClientError::SharedStateCorrupt`] (a commit replaced the state
/// while it was read: the caller reads the new one).
pub(super) fn get_state(
    backend: &mut dyn Backend,
    index: &str,
    chunk_max: usize,
    list: &[u8],
) -> Result<Vec<u8>> {
    let damaged = || ClientError::SharedStateCorrupt {
        index: index.to_owned(),
    };
    let entries = entries(list).ok_or_else(damaged)?;
    let mut out = Vec::with_capacity(entries.iter().map(|(_, len)| len).sum());
    let mut start = 0;
    while start < entries.len() {
        let mut end = start;
        let mut bytes = 0usize;
        while let Some((_, len)) = entries.get(end) {
            if end > start && bytes + len > chunk_max {
                break;
            }
            bytes += len;
            end += 1;
        }
        let part = entries.get(start..end).unwrap_or_default();
        let names: Vec<String> = part.iter().map(|(id, _)| chunk_record(id)).collect();
        let records = backend
            .read_records(index, &names, &[])?
            .unwrap_or_default();
        if records.len() != part.len() {
            return Err(damaged());
        }
        for ((id, len), r) in part.iter().zip(records) {
            if r.version == 0 || r.value.len() != *len || chunk_id(&r.value) != *id {
                return Err(damaged());
            }
            out.extend_from_slice(&r.value);
        }
        start = end;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use rand::{RngCore, SeedableRng};
    use sesame_crypto::Key;
    use sesame_store::MemoryStore;
    use zeroize::Zeroizing;

    use super::{put_state, records_of};
    use crate::backend::{Backend, EmbeddedBackend, IndexRecord, IndexRecordWrite};
    use crate::intercept::{Hook, Intercepted};
    use crate::state::{ChunkNames, CommitMemo, StateCipher};

    /// A server's shared records: every value written, by name.
    #[derive(Clone, Default)]
    struct Records(Arc<std::sync::Mutex<std::collections::BTreeMap<String, Vec<u8>>>>);

    impl Hook for Records {
        fn write_records(
            &mut self,
            _: &mut dyn Backend,
            _: &str,
            writes: Vec<IndexRecordWrite>,
        ) -> crate::Result<Option<Vec<IndexRecord>>> {
            let mut map = self.0.lock().unwrap();
            for w in writes {
                match w.value {
                    Some(v) => map.insert(w.name, v),
                    None => map.remove(&w.name),
                };
            }
            Ok(None)
        }
    }

    fn server(records: &Records) -> Intercepted<Records> {
        let inner = EmbeddedBackend::over(Arc::new(MemoryStore::new()));
        Intercepted::new(Box::new(inner), records.clone())
    }

    fn cipher() -> StateCipher {
        StateCipher::new(&Key::from_bytes([7; 32]), "profile")
    }

    fn random(n: usize, seed: u64) -> Vec<u8> {
        let mut data = vec![0u8; n];
        rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut data);
        data
    }

    /// The sealed segments of `sealed` (between the magic and the list's
    /// seal), each with its length prefix.
    fn segments(sealed: &[u8]) -> Vec<Vec<u8>> {
        let mut rest = &sealed[8..sealed.len() - 60];
        let mut out = Vec::new();
        while !rest.is_empty() {
            let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            out.push(rest[..4 + len].to_vec());
            rest = &rest[4 + len..];
        }
        out
    }

    #[test]
    fn a_state_appended_to_seals_to_the_same_segments_but_at_its_end() {
        let c = cipher();
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let plain = random(400_000, 2);
        let mut longer = plain.clone();
        longer.extend_from_slice(&random(30_000, 3));
        let a = c.seal_segmented(&mut rng, b"i", b"i/v1", &plain).unwrap();
        let b = c.seal_segmented(&mut rng, b"i", b"i/v2", &longer).unwrap();
        assert_eq!(&*c.open_segmented(b"i", b"i/v1", &a).unwrap(), &plain);
        assert_eq!(&*c.open_segmented(b"i", b"i/v2", &b).unwrap(), &longer);
        let (sa, sb) = (segments(&a), segments(&b));
        let same = sb.iter().filter(|s| sa.contains(s)).count();
        // New: the last segment before and what the appended bytes fill.
        assert!(
            sb.len() - same <= 2 + 30_000 / crate::cdc::MIN_CHUNK,
            "{same} of {} segments kept",
            sb.len()
        );
        assert!(same >= sa.len() - 1, "{same} of {} kept", sa.len());
        // Another index's segments are other bytes.
        let other = c.seal_segmented(&mut rng, b"j", b"j/v1", &plain).unwrap();
        assert!(segments(&other).iter().all(|s| !sa.contains(s)));
    }

    #[test]
    fn a_segmented_state_altered_reordered_or_relabelled_does_not_open() {
        let c = cipher();
        let mut rng = rand::rngs::StdRng::seed_from_u64(4);
        let plain = random(100_000, 5);
        let sealed = c.seal_segmented(&mut rng, b"i", b"i/v1", &plain).unwrap();
        // Another version's label.
        assert!(c.open_segmented(b"i", b"i/v2", &sealed).is_none());
        // Another index.
        assert!(c.open_segmented(b"j", b"i/v1", &sealed).is_none());
        // A flipped byte anywhere.
        for at in [10, sealed.len() / 2, sealed.len() - 1] {
            let mut bad = sealed.clone();
            bad[at] ^= 1;
            assert!(c.open_segmented(b"i", b"i/v1", &bad).is_none(), "byte {at}");
        }
        // Two segments swapped.
        let parts = segments(&sealed);
        assert!(parts.len() >= 3);
        let mut swapped = sealed[..8].to_vec();
        swapped.extend_from_slice(&parts[1]);
        swapped.extend_from_slice(&parts[0]);
        for p in &parts[2..] {
            swapped.extend_from_slice(p);
        }
        swapped.extend_from_slice(&sealed[sealed.len() - 60..]);
        assert_eq!(swapped.len(), sealed.len());
        assert!(c.open_segmented(b"i", b"i/v1", &swapped).is_none());
        // A segment of another state under the same list seal.
        let other = c
            .seal_segmented(&mut rng, b"i", b"i/v1", &random(100_000, 6))
            .unwrap();
        let mut mixed = sealed[..8].to_vec();
        mixed.extend_from_slice(&segments(&other)[0]);
        for p in &parts[1..] {
            mixed.extend_from_slice(p);
        }
        mixed.extend_from_slice(&sealed[sealed.len() - 60..]);
        assert!(c.open_segmented(b"i", b"i/v1", &mixed).is_none());
        // Truncated to nothing.
        assert!(c.open_segmented(b"i", b"i/v1", &sealed[..20]).is_none());
    }

    /// The versions of a state that commits write one after the other,
    /// as an import changes it: appended to, a byte of its head changed,
    /// bytes cut from its middle, cut short.
    fn versions() -> Vec<Vec<u8>> {
        let first = random(300_000, 10);
        let mut appended = first.clone();
        appended.extend_from_slice(&random(40_000, 11));
        let mut head = appended.clone();
        head[3] ^= 0x55;
        let mut middle = head.clone();
        middle.drain(150_000..160_000);
        let short = middle[..200_000].to_vec();
        vec![first, appended, head, middle, short]
    }

    /// One commit of `plain` with `memo` (kept in it after): the sealed
    /// state, the record value and deletions `put_state` returns, and
    /// how many of its segments and chunks the memo had.
    fn commit(
        c: &StateCipher,
        backend: &mut dyn Backend,
        memo: &mut CommitMemo,
        (version, plain): (u64, &[u8]),
    ) -> (Vec<u8>, Vec<u8>, usize, usize) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(version);
        let aad = format!("i/v{version}");
        let check = c.memo_check(b"i");
        let parts = crate::cdc::chunks(plain);
        let reused = parts.iter().filter(|p| memo.sealed(&check, p).is_some());
        let reused = reused.count();
        let (sealed, mut seal) = c
            .seal_segmented_with(&mut rng, (b"i", aad.as_bytes()), plain, memo, Vec::new())
            .unwrap();
        seal.finish(Zeroizing::new(plain.to_vec()));
        let level = super::level(sealed.len(), 1 << 20);
        let named = crate::cdc::chunks_at(&sealed, level)
            .iter()
            .filter(|c| memo.chunk_id(c).is_some())
            .count();
        let mut names = ChunkNames::default();
        let (value, _) = put_state(backend, "i", 1 << 20, (0, &sealed), memo, &mut names).unwrap();
        memo.keep(seal, sealed.clone(), names);
        (sealed, value, reused, named)
    }

    /// With the last commit's memo a commit seals, names and writes
    /// exactly what it does without one, while taking most segments and
    /// chunks from the memo.
    #[test]
    fn a_commit_with_the_memo_writes_what_it_writes_without() {
        let c = cipher();
        let (with, without) = (Records::default(), Records::default());
        let (mut b_with, mut b_without) = (server(&with), server(&without));
        let mut memo = CommitMemo::default();
        for (v, plain) in versions().iter().enumerate() {
            let v = v as u64;
            let (sealed, value, reused, named) = commit(&c, &mut b_with, &mut memo, (v, plain));
            let mut fresh = CommitMemo::default();
            let (sealed_fresh, value_fresh, none, _) =
                commit(&c, &mut b_without, &mut fresh, (v, plain));
            assert_eq!(none, 0);
            assert_eq!(sealed, sealed_fresh, "version {v}");
            assert_eq!(value, value_fresh, "version {v}");
            assert_eq!(records_of(&value).len(), records_of(&value_fresh).len());
            let segments = crate::cdc::chunks(plain).len();
            if v > 0 {
                // All but the segments around each change.
                assert!(reused + 4 >= segments, "{reused} of {segments}");
                assert!(named > 0, "version {v}: no chunk named from the memo");
            }
            let opened = c
                .open_segmented(b"i", format!("i/v{v}").as_bytes(), &sealed)
                .unwrap();
            assert_eq!(&*opened, plain);
        }
        // Both servers hold the same chunk records.
        assert!(!with.0.lock().unwrap().is_empty());
        assert_eq!(*with.0.lock().unwrap(), *without.0.lock().unwrap());
    }

    /// Segments sealed under one key, or for one index, are not taken
    /// for another: the commit seals them again.
    #[test]
    fn the_memo_is_not_taken_under_another_key_or_index() {
        let (c, other) = (
            cipher(),
            StateCipher::new(&Key::from_bytes([8; 32]), "profile"),
        );
        let plain = random(200_000, 12);
        let mut backend = server(&Records::default());
        let mut memo = CommitMemo::default();
        commit(&c, &mut backend, &mut memo, (1, &plain));
        for part in crate::cdc::chunks(&plain) {
            assert!(memo.sealed(&c.memo_check(b"i"), part).is_some());
            assert!(memo.sealed(&other.memo_check(b"i"), part).is_none());
            assert!(memo.sealed(&c.memo_check(b"j"), part).is_none());
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let (sealed, _) = other
            .seal_segmented_with(&mut rng, (b"i", b"i/v2"), &plain, &memo, Vec::new())
            .unwrap();
        assert_eq!(
            &*other.open_segmented(b"i", b"i/v2", &sealed).unwrap(),
            &plain
        );
        assert!(c.open_segmented(b"i", b"i/v2", &sealed).is_none());
    }
}
