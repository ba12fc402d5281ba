//! The layout of encrypted documents in a store, shared by the embedded
//! document service and the server, so an index moves between the two
//! unchanged.
//!
//! Under a prefix (`d/<index>/` embedded, `d/<tenant>/<index>/` on the
//! server), a document of `n` bytes is cut into full pieces of
//! [`piece_bytes`] and a tail shorter than one piece:
//!
//! - `p‖id‖k` (`id` and `k` big-endian, 8 and 4 bytes): full piece `k`;
//! - `h‖id`: the head, the number of full pieces (4 bytes, big-endian)
//!   then the tail.
//!
//! A piece with its key fills one 4 KB redb page exactly, and the heads,
//! a keyspace of their own, share pages with each other. A document stored
//! whole takes a run of pages rounded up to a power of two (a 20 KB
//! document takes 32 KB); in pieces the corpus of `docs/storage.md` takes
//! 1.06 times its sealed bytes in pages against 1.34 whole.
//!
//! Stores written before this layout hold each document whole under
//! `b‖id`; they are read, listed and deleted as they are, and every new
//! document is written in pieces.

use std::collections::{HashMap, HashSet};

use sesame_core::{Error, Result, Store, WriteBatch};

/// redb's page size: a piece and its key fill one page.
const PAGE_BYTES: usize = 4096;

/// What a one-pair redb leaf spends besides the key and the value: its
/// header (4 bytes) and the pair's key and value end offsets (8 bytes).
const LEAF_OVERHEAD: usize = 12;

/// Bytes of a piece's key after the prefix: `p`, the identifier, the
/// piece number.
const PIECE_KEY: usize = 1 + 8 + 4;

/// The smallest piece, whatever the prefix (a prefix longer than a page
/// is not a layout anyone uses; its pieces then take two pages).
const MIN_PIECE: usize = 1024;

/// At most this many pieces per document (16 GiB): a head claiming more is
/// damaged, and is not followed.
const MAX_PIECES: u32 = 1 << 22;

/// Bytes of a full piece under `prefix` (`prefix_len` bytes): a page less
/// the leaf's overhead and the piece's whole key.
pub fn piece_bytes(prefix_len: usize) -> usize {
    PAGE_BYTES
        .saturating_sub(LEAF_OVERHEAD + PIECE_KEY + prefix_len)
        .max(MIN_PIECE)
}

fn key(prefix: &[u8], tag: u8, id: u64, piece: Option<u32>) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + PIECE_KEY);
    k.extend_from_slice(prefix);
    k.push(tag);
    k.extend_from_slice(&id.to_be_bytes());
    if let Some(p) = piece {
        k.extend_from_slice(&p.to_be_bytes());
    }
    k
}

/// The key of a document's head (the key a document is known by).
pub fn head_key(prefix: &[u8], id: u64) -> Vec<u8> {
    key(prefix, b'h', id, None)
}

fn piece_key(prefix: &[u8], id: u64, piece: u32) -> Vec<u8> {
    key(prefix, b'p', id, Some(piece))
}

fn whole_key(prefix: &[u8], id: u64) -> Vec<u8> {
    key(prefix, b'b', id, None)
}

/// The document a key of this layout under `prefix` belongs to: a head, a
/// piece or a whole document of the earlier layout.
pub fn document_id(prefix: &[u8], key: &[u8]) -> Option<u64> {
    let rest = key.strip_prefix(prefix)?;
    let id = match rest.split_first()? {
        (b'h' | b'b', id) if id.len() == 8 => id,
        (b'p', id) if id.len() == 12 => &id[..8],
        _ => return None,
    };
    Some(u64::from_be_bytes(id.try_into().ok()?))
}

/// Adds the writes that store `docs` (identifier and blob, whole) to
/// `batch`. Only new documents ([`new_documents`]): writing over a
/// stored one with fewer pieces would leave its extra pieces.
pub fn put<'a>(
    batch: &mut WriteBatch,
    prefix: &[u8],
    docs: impl IntoIterator<Item = (u64, &'a [u8])>,
) {
    let size = piece_bytes(prefix.len());
    let mut any = false;
    for (id, blob) in docs {
        let full = blob.len() / size;
        let mut pieces = blob.chunks_exact(size);
        for (k, piece) in pieces.by_ref().enumerate() {
            // `full` pieces of a blob that fits in memory: under u32::MAX.
            batch.put(piece_key(prefix, id, k as u32), piece.to_vec());
        }
        let tail = pieces.remainder();
        let mut head = Vec::with_capacity(4 + tail.len());
        head.extend_from_slice(&(full as u32).to_be_bytes());
        head.extend_from_slice(tail);
        batch.put(head_key(prefix, id), head);
        any = true;
    }
    if any {
        batch.put(end_key(prefix), Vec::new());
    }
}

/// The end marker: an empty value after every head (`h` and nine `0xFF`
/// bytes, one more than an identifier). New heads are appended before it,
/// in its leaf of small pairs. Without it, the key after the last head is
/// the first piece, alone in its page, and redb gives each head appended
/// before such a page a page of its own (4 KB for a tail of 2 KB on
/// average; the corpus of `docs/storage.md` took 1.15 times its sealed
/// bytes instead of 1.06).
fn end_key(prefix: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + 10);
    k.extend_from_slice(prefix);
    k.push(b'h');
    k.extend_from_slice(&[0xFF; 9]);
    k
}

fn damaged(id: u64, what: &str) -> Error {
    Error::StoreCorrupt(format!("document {id}: {what}"))
}

/// The number of full pieces a head names, and its tail.
fn parse_head(id: u64, head: &[u8]) -> Result<(u32, &[u8])> {
    let (count, tail) = head
        .split_first_chunk::<4>()
        .ok_or_else(|| damaged(id, "its head is shorter than 4 bytes"))?;
    let count = u32::from_be_bytes(*count);
    if count > MAX_PIECES {
        return Err(damaged(id, &format!("its head names {count} pieces")));
    }
    Ok((count, tail))
}

/// The documents `ids` under `prefix`, whole, in order (`None`: not
/// stored). Two multi-gets (heads, then every piece they name), and a
/// third for the earlier layout only where a head is missing. A head whose
/// pieces are missing is [`Error::StoreCorrupt`].
pub fn read(store: &dyn Store, prefix: &[u8], ids: &[u64]) -> Result<Vec<Option<Vec<u8>>>> {
    read_bounded(store, prefix, ids, |_| None)
}

/// As [`read`], for a reader that knows how large each document may be:
/// `docs` pairs each identifier with the most bytes its blob may have.
/// A head naming more full pieces than that (or a tail that takes the
/// blob past it, or a whole document of the earlier layout longer than
/// it) is [`Error::StoreCorrupt`] before any piece is read: a forged
/// head costs the reader its heads' multi-get, not up to 2^22 piece
/// reads (16 GiB) and their memory. Full pieces are counted at this
/// prefix's [`piece_bytes`], the size [`put`] writes under it.
pub fn read_within(
    store: &dyn Store,
    prefix: &[u8],
    docs: &[(u64, u64)],
) -> Result<Vec<Option<Vec<u8>>>> {
    let ids: Vec<u64> = docs.iter().map(|&(id, _)| id).collect();
    read_bounded(store, prefix, &ids, |i| Some(docs[i].1))
}

/// The error of a document larger than its reader allows.
fn oversized(id: u64, claim: &str, max: u64) -> Error {
    damaged(
        id,
        &format!(
            "{claim}, more than the {max} bytes its reader's catalog recorded for it; nothing \
             more of it was read: the store was altered or replaced (restore it from a backup)"
        ),
    )
}

/// [`read`], with `max(i)` the most bytes document `ids[i]` may take.
fn read_bounded(
    store: &dyn Store,
    prefix: &[u8],
    ids: &[u64],
    max: impl Fn(usize) -> Option<u64>,
) -> Result<Vec<Option<Vec<u8>>>> {
    let size = piece_bytes(prefix.len()) as u64;
    let heads = multi_get(store, ids.iter().map(|&id| head_key(prefix, id)))?;
    let mut wanted = Vec::new();
    for (i, (&id, head)) in ids.iter().zip(&heads).enumerate() {
        if let Some(head) = head {
            let (count, tail) = parse_head(id, head)?;
            if let Some(max) = max(i) {
                let claimed = u64::from(count) * size + tail.len() as u64;
                if claimed > max {
                    return Err(oversized(
                        id,
                        &format!("its head names {count} pieces ({claimed} bytes)"),
                        max,
                    ));
                }
            }
            wanted.extend((0..count).map(|k| piece_key(prefix, id, k)));
        }
    }
    let mut pieces = multi_get(store, wanted)?.into_iter();
    let mut out = Vec::with_capacity(ids.len());
    let mut missing = Vec::new();
    for (i, (&id, head)) in ids.iter().zip(&heads).enumerate() {
        let Some(head) = head else {
            missing.push(out.len());
            out.push(None);
            continue;
        };
        let (count, tail) = parse_head(id, head)?;
        let mut blob = Vec::new();
        for k in 0..count {
            let piece = pieces
                .next()
                .flatten()
                .ok_or_else(|| damaged(id, &format!("piece {k} of {count} is missing")))?;
            if blob.is_empty() {
                blob.reserve(piece.len() * count as usize + tail.len());
            }
            blob.extend_from_slice(&piece);
        }
        blob.extend_from_slice(tail);
        if let Some(max) = max(i).filter(|&max| blob.len() as u64 > max) {
            let claim = format!("its pieces hold {} bytes", blob.len());
            return Err(oversized(id, &claim, max));
        }
        out.push(Some(blob));
    }
    if !missing.is_empty() {
        let whole = multi_get(store, missing.iter().map(|&i| whole_key(prefix, ids[i])))?;
        for (i, doc) in missing.into_iter().zip(whole) {
            if let (Some(doc), Some(max)) = (&doc, max(i)) {
                if doc.len() as u64 > max {
                    let claim = format!("it holds {} bytes", doc.len());
                    return Err(oversized(ids[i], &claim, max));
                }
            }
            out[i] = doc;
        }
    }
    Ok(out)
}

/// A document named with other bytes than the ones stored under its
/// identifier (or named earlier in the same call).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conflict(pub u64);

/// The documents to write (identifier and blob), or the conflict that
/// refuses them all.
pub type NewDocuments<'a> = std::result::Result<Vec<(u64, &'a [u8])>, Conflict>;

/// Of `docs`, the ones to write. A document is written once: one stored
/// (or named earlier in `docs`) with the same bytes is a repeat, left
/// out; with other bytes the whole call is a [`Conflict`], since a stored
/// document is never overwritten (and a second write of an identifier
/// with fewer pieces would leave the first one's extra pieces).
pub fn new_documents<'a>(
    store: &dyn Store,
    prefix: &[u8],
    docs: &[(u64, &'a [u8])],
) -> Result<NewDocuments<'a>> {
    let ids: Vec<u64> = docs.iter().map(|&(id, _)| id).collect();
    let stored = read(store, prefix, &ids)?;
    let mut named: HashMap<u64, &[u8]> = HashMap::with_capacity(docs.len());
    let mut new = Vec::with_capacity(docs.len());
    for (&(id, blob), old) in docs.iter().zip(&stored) {
        match old.as_deref().or_else(|| named.get(&id).copied()) {
            Some(old) if old == blob => continue,
            Some(_) => return Ok(Err(Conflict(id))),
            None => {}
        }
        named.insert(id, blob);
        new.push((id, blob));
    }
    Ok(Ok(new))
}

/// Adds to `batch` the deletion of every stored document of `ids` (its
/// head and pieces, or its whole value of the earlier layout); per
/// identifier, whether it was stored (`false` where it is named again).
pub fn delete(
    store: &dyn Store,
    prefix: &[u8],
    ids: &[u64],
    batch: &mut WriteBatch,
) -> Result<Vec<bool>> {
    let heads = multi_get(store, ids.iter().map(|&id| head_key(prefix, id)))?;
    let whole = multi_get(store, ids.iter().map(|&id| whole_key(prefix, id)))?;
    let mut gone = HashSet::with_capacity(ids.len());
    let mut out = Vec::with_capacity(ids.len());
    for ((&id, head), whole) in ids.iter().zip(heads).zip(whole) {
        let was = (head.is_some() || whole.is_some()) && gone.insert(id);
        out.push(was);
        if !was {
            continue;
        }
        if let Some(head) = head {
            let (count, _) = parse_head(id, &head)?;
            for k in 0..count {
                batch.delete(piece_key(prefix, id, k));
            }
            batch.delete(head_key(prefix, id));
        }
        if whole.is_some() {
            batch.delete(whole_key(prefix, id));
        }
    }
    Ok(out)
}

/// The identifiers of every document under `prefix`, ascending.
pub fn list(store: &dyn Store, prefix: &[u8]) -> Result<Vec<u64>> {
    let mut ids = Vec::new();
    for tag in [b'h', b'b'] {
        let mut scan = prefix.to_vec();
        scan.push(tag);
        for (k, _) in store.scan_prefix(&scan)? {
            if tag == b'h' && k == end_key(prefix) {
                continue;
            }
            let id = k
                .get(scan.len()..)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .ok_or_else(|| {
                    Error::StoreCorrupt(format!("a document key of {} bytes", k.len()))
                })?;
            ids.push(u64::from_be_bytes(id));
        }
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

fn multi_get(
    store: &dyn Store,
    keys: impl IntoIterator<Item = Vec<u8>>,
) -> Result<Vec<Option<Vec<u8>>>> {
    let keys: Vec<Vec<u8>> = keys.into_iter().collect();
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    store.get_many(&refs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStore;

    fn stored(store: &MemoryStore, prefix: &[u8], docs: &[(u64, Vec<u8>)]) {
        let mut batch = WriteBatch::new();
        put(
            &mut batch,
            prefix,
            docs.iter().map(|(id, b)| (*id, b.as_slice())),
        );
        store.write(batch).unwrap();
    }

    #[test]
    fn documents_of_every_size_read_back_whole() {
        let store = MemoryStore::new();
        let prefix = b"d/i/";
        let piece = piece_bytes(prefix.len());
        let sizes = [0, 1, piece - 1, piece, piece + 1, 3 * piece, 5 * piece + 17];
        let docs: Vec<(u64, Vec<u8>)> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (i as u64 * 7, (0..n).map(|b| (b * 31 + i) as u8).collect()))
            .collect();
        stored(&store, prefix, &docs);
        let mut ids: Vec<u64> = docs.iter().map(|d| d.0).collect();
        ids.push(1000);
        let read = read(&store, prefix, &ids).unwrap();
        for ((_, blob), got) in docs.iter().zip(&read) {
            assert_eq!(got.as_ref(), Some(blob));
        }
        assert_eq!(read.last(), Some(&None));
        assert_eq!(list(&store, prefix).unwrap(), ids[..ids.len() - 1]);
        // Every pair's key and value fit one page with a leaf's overhead;
        // every key but the end marker names its document.
        for (k, v) in store.scan_prefix(prefix).unwrap() {
            assert!(
                k.len() + v.len() + LEAF_OVERHEAD <= PAGE_BYTES,
                "{}",
                v.len()
            );
            match document_id(prefix, &k) {
                Some(id) => assert!(ids.contains(&id)),
                None => assert_eq!(k, end_key(prefix)),
            }
        }
    }

    #[test]
    fn whole_documents_of_the_earlier_layout_are_read_listed_and_deleted() {
        let store = MemoryStore::new();
        let prefix = b"d/i/";
        let old = vec![9u8; 3 * piece_bytes(prefix.len())];
        store.put(&whole_key(prefix, 5), &old).unwrap();
        stored(&store, prefix, &[(6, vec![1; 10_000])]);
        assert_eq!(
            read(&store, prefix, &[5, 6]).unwrap(),
            vec![Some(old), Some(vec![1; 10_000])]
        );
        assert_eq!(list(&store, prefix).unwrap(), vec![5, 6]);
        let mut batch = WriteBatch::new();
        let was = delete(&store, prefix, &[5, 6, 7, 6], &mut batch).unwrap();
        assert_eq!(was, [true, true, false, false]);
        store.write(batch).unwrap();
        assert_eq!(
            store.scan_prefix(prefix).unwrap(),
            vec![(end_key(prefix), Vec::new())]
        );
        assert!(list(&store, prefix).unwrap().is_empty());
    }

    #[test]
    fn a_damaged_head_or_a_missing_piece_is_reported() {
        let store = MemoryStore::new();
        let prefix = b"";
        stored(&store, prefix, &[(1, vec![3; 9_000])]);
        store.delete(&piece_key(prefix, 1, 1)).unwrap();
        let e = read(&store, prefix, &[1]).unwrap_err();
        assert!(
            matches!(&e, Error::StoreCorrupt(m) if m.contains("piece 1 of 2")),
            "{e}"
        );
        store.put(&head_key(prefix, 2), b"\x01").unwrap();
        let e = read(&store, prefix, &[2]).unwrap_err();
        assert!(
            matches!(&e, Error::StoreCorrupt(m) if m.contains("shorter")),
            "{e}"
        );
        store
            .put(&head_key(prefix, 3), &u32::MAX.to_be_bytes())
            .unwrap();
        assert!(delete(&store, prefix, &[3], &mut WriteBatch::new()).is_err());
    }

    #[test]
    fn a_bounded_read_refuses_a_larger_claim_before_reading_its_pieces() {
        let store = MemoryStore::new();
        let prefix = b"d/i/";
        let piece = piece_bytes(prefix.len());
        let big = vec![3u8; 4 * piece + 100];
        stored(&store, prefix, &[(1, vec![1; 50]), (2, big.clone())]);
        store.put(&whole_key(prefix, 3), &[7; 900]).unwrap();
        // Within their sizes: read as `read` does.
        let exact = [(1, 50), (2, big.len() as u64), (3, 900), (4, 10)];
        assert_eq!(
            read_within(&store, prefix, &exact).unwrap(),
            vec![
                Some(vec![1; 50]),
                Some(big.clone()),
                Some(vec![7; 900]),
                None
            ]
        );
        // A head forged to name the most pieces a head may name: refused
        // after the heads' reads alone.
        let mut head = MAX_PIECES.to_be_bytes().to_vec();
        head.extend_from_slice(&[1; 50]);
        store.put(&head_key(prefix, 1), &head).unwrap();
        let before = store.io_counts();
        let err = read_within(&store, prefix, &exact).unwrap_err().to_string();
        assert_eq!(store.io_counts().since(&before).reads, exact.len() as u64);
        assert!(
            err.contains("document 1: its head names 4194304 pieces"),
            "{err}"
        );
        assert!(err.contains("more than the 50 bytes"), "{err}");
        // Each bound is the document's own: one byte short refuses it.
        stored(&store, prefix, &[(5, vec![1; 50])]);
        let err = read_within(&store, prefix, &[(5, 49)])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("document 5: its head names 0 pieces (50 bytes)"),
            "{err}"
        );
        let err = read_within(&store, prefix, &[(2, big.len() as u64 - 1)])
            .unwrap_err()
            .to_string();
        assert!(err.contains("document 2: its head names 4 pieces"), "{err}");
        let err = read_within(&store, prefix, &[(3, 899)])
            .unwrap_err()
            .to_string();
        assert!(err.contains("document 3: it holds 900 bytes"), "{err}");
        // A piece longer than a piece: refused once read.
        store
            .put(&piece_key(prefix, 2, 0), &vec![0; 2 * piece])
            .unwrap();
        let err = read_within(&store, prefix, &[(2, big.len() as u64)])
            .unwrap_err()
            .to_string();
        assert!(err.contains("its pieces hold"), "{err}");
    }

    #[test]
    fn repeats_are_left_out_and_other_bytes_are_a_conflict() {
        let store = MemoryStore::new();
        stored(&store, b"", &[(1, vec![1; 9_000])]);
        let one = vec![1u8; 9_000];
        let docs = [(1, one.as_slice()), (2, &b"two"[..]), (2, &b"two"[..])];
        assert_eq!(
            new_documents(&store, b"", &docs).unwrap(),
            Ok(vec![(2, &b"two"[..])])
        );
        let other = [(3, &b"x"[..]), (1, &b"one"[..])];
        assert_eq!(
            new_documents(&store, b"", &other).unwrap(),
            Err(Conflict(1))
        );
        let twice = [(4, &b"x"[..]), (4, &b"y"[..])];
        assert_eq!(
            new_documents(&store, b"", &twice).unwrap(),
            Err(Conflict(4))
        );
    }

    #[test]
    fn keys_name_their_document() {
        assert_eq!(document_id(b"d/", &head_key(b"d/", 258)), Some(258));
        assert_eq!(document_id(b"d/", &piece_key(b"d/", 258, 3)), Some(258));
        assert_eq!(document_id(b"d/", &whole_key(b"d/", 258)), Some(258));
        assert_eq!(document_id(b"e/", &head_key(b"d/", 258)), None);
        assert_eq!(document_id(b"d/", b"d/h123"), None);
        assert_eq!(piece_bytes(10), 4096 - 12 - 13 - 10);
        assert_eq!(piece_bytes(5000), MIN_PIECE);
    }
}
