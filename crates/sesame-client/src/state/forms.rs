//! The compact forms of a catalog run's blocks (module `runs`), laid out
//! by hand where postcard's form of the same items spends bytes on what a
//! sorted block repeats.
//!
//! - **Entries** ([`ENTRIES_FORM`]): the number of entries, then columns:
//!   each entry's identifier as the step from the one before (the first
//!   from 0) shifted left by three bits over its kind (bit 0: an entry,
//!   not a removal; bit 1: it has a digest; bit 2: its document's
//!   identifier is not the entry's, and is written in the next column);
//!   those other identifiers; then, over the entries that are not
//!   removals, a column of the bytes each path shares with the path
//!   before it, one of the lengths of the rests, one of the sizes; the
//!   rests of the paths; then the first [`DIGEST_KEPT`] bytes of each
//!   digest.
//!   Postcard wrote each entry's identifier twice, a path whole and 32
//!   bytes of digest.
//! - **Name pairs** ([`NAMES_FORM`]): the number of pairs, the hashes (in
//!   order) as steps from the one before, then the identifiers. A run of
//!   this build holds 32-bit hashes (`runs`, `SSMCAT03`), so a step is
//!   two or three bytes where postcard spent ten on a 64-bit hash.
//!
//! With the zstd pass a block gets where it pays (module `runs`), the
//! flights' catalog went from 63.5 to 33.8 bytes a record, entries and
//! name index together (`docs/performance.md`, "A compact catalog and
//! chunks that state their keys' prefix once").
//!
//! Every number is a LEB128 varint in its shortest form
//! (`sesame_core::wire::varint`); a block whose bytes do not decode to
//! exactly its items (cut short, bytes left over, a step of zero between
//! identifiers, a kind out of range, a path that is not UTF-8 or shares
//! more than the path before it) is refused, and the caller reports the
//! run as corrupt. A block in the wire form (what earlier builds wrote,
//! and what is written where a compact form cannot hold the items) starts
//! with the wire version, 1, and still reads.
//!
//! **The digest kept.** A catalog entry's digest is the SHA-256 of its
//! content, and a block of this form keeps its first 16 bytes; the entry
//! read back holds them followed by zeros, and every comparison of a
//! kept digest with a content's is on those 16 bytes
//! ([`super::digest_matches`]). What the digest guards against is a
//! server serving another content under an identifier, or an import
//! taking a changed row for an unchanged one: the server cannot seal
//! contents under the client's key, so it can only serve contents the
//! client sealed, and telling 128-bit prefixes of their SHA-256 apart
//! needs no more (a second content of the same prefix costs 2^128
//! hashes; the catalog itself is sealed on this machine).

use serde::{de::DeserializeOwned, Serialize};
use sesame_core::wire::{self, varint};
use zeroize::Zeroizing;

use super::names::NamePair;
use super::runs::Entry;
use super::DocumentInfo;

/// First byte of a block of entries in the compact form.
pub(super) const ENTRIES_FORM: u8 = 0xc5;
/// First byte of a block of name pairs in the compact form.
pub(super) const NAMES_FORM: u8 = 0xc6;
/// Bytes of an entry's digest a compact block keeps.
pub(super) const DIGEST_KEPT: usize = 16;

/// Items a run's block holds: written in a compact form where it holds
/// them, read in it or in the wire form.
pub(super) trait BlockItem: Sized + Serialize + DeserializeOwned {
    /// The compact form of `items` (its first byte says which form), or
    /// `None` where it cannot hold them.
    fn compact(items: &[Self]) -> Option<Vec<u8>>;

    /// The items of a compact block (without its first byte); `None`
    /// where its bytes are not exactly the form of some items.
    fn from_compact(body: &[u8]) -> Option<Vec<Self>>;

    /// The form byte of [`BlockItem::compact`].
    const FORM: u8;
}

/// The encoding of `items` a block holds: compact where it can be,
/// else the wire form.
pub(super) fn encode<T: BlockItem>(items: &[T]) -> sesame_core::Result<Vec<u8>> {
    match T::compact(items) {
        Some(bytes) => Ok(bytes),
        None => wire::encode(items),
    }
}

/// The items of a block's encoding, in either form; `None` where it is
/// malformed.
pub(super) fn decode<T: BlockItem>(bytes: &[u8]) -> Option<Vec<T>> {
    match bytes.split_first() {
        Some((&form, body)) if form == T::FORM => T::from_compact(body),
        _ => wire::decode(bytes).ok(),
    }
}

/// Decodes `bytes` as a block of entries and of name pairs, in either
/// form (for the fuzz targets).
pub(super) fn parse_blocks(bytes: &[u8]) {
    let _ = decode::<Entry>(bytes);
    let _ = decode::<NamePair>(bytes);
}

fn take(rest: &mut &[u8]) -> Option<u64> {
    varint::take(rest).ok()
}

fn take_bytes<'a>(rest: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (taken, after) = rest.split_at_checked(n)?;
    *rest = after;
    Some(taken)
}

/// The number of items a compact block says it holds, where each takes
/// at least a byte of what follows.
fn take_count(rest: &mut &[u8]) -> Option<usize> {
    usize::try_from(take(rest)?)
        .ok()
        .filter(|&n| n <= rest.len())
}

const PRESENT: u64 = 1;
const HAS_DIGEST: u64 = 2;
const OTHER_ID: u64 = 4;

impl BlockItem for Entry {
    const FORM: u8 = ENTRIES_FORM;

    fn compact(items: &[Entry]) -> Option<Vec<u8>> {
        let mut heads = vec![ENTRIES_FORM];
        varint::put(&mut heads, items.len() as u64);
        let (mut others, mut shared, mut lens, mut sizes) = (vec![], vec![], vec![], vec![]);
        // The names and digests are the catalog's secrets: the copies
        // made here are wiped when dropped, as the sealed block's
        // plaintext is (module `runs`).
        let (mut rests, mut digests) = (Zeroizing::new(vec![]), Zeroizing::new(vec![]));
        let mut before: Option<u64> = None;
        let mut path_before = "";
        for (id, doc) in items {
            let step = match before {
                None => *id,
                Some(b) => id.checked_sub(b).filter(|&s| s > 0)?,
            };
            before = Some(*id);
            let mut kind = 0;
            if let Some(d) = doc {
                kind |= PRESENT;
                if d.id != *id {
                    kind |= OTHER_ID;
                    varint::put(&mut others, d.id);
                }
                let common = common_prefix(path_before, &d.path);
                varint::put(&mut shared, common as u64);
                varint::put(&mut lens, (d.path.len() - common) as u64);
                rests.extend_from_slice(d.path.as_bytes().get(common..)?);
                varint::put(&mut sizes, d.size);
                if let Some(g) = &d.digest {
                    kind |= HAS_DIGEST;
                    digests.extend_from_slice(g.get(..DIGEST_KEPT)?);
                }
                path_before = &d.path;
            }
            varint::put(&mut heads, step.checked_mul(8)? | kind);
        }
        for column in [&others, &shared, &lens, &sizes, &*rests, &*digests] {
            heads.extend_from_slice(column);
        }
        Some(heads)
    }

    fn from_compact(mut rest: &[u8]) -> Option<Vec<Entry>> {
        let rest = &mut rest;
        let count = take_count(rest)?;
        let mut heads = Vec::with_capacity(count);
        let mut before: Option<u64> = None;
        for _ in 0..count {
            let head = take(rest)?;
            let (step, kind) = (head >> 3, head & 7);
            if kind != 0 && kind & PRESENT == 0 {
                return None;
            }
            let id = match before {
                None => step,
                Some(b) if step > 0 => b.checked_add(step)?,
                Some(_) => return None,
            };
            before = Some(id);
            heads.push((id, kind));
        }
        let has = |bit: u64| heads.iter().filter(|(_, k)| k & bit != 0).count();
        let (present, with_digest) = (has(PRESENT), has(HAS_DIGEST));
        let mut column = |n: usize| -> Option<Vec<u64>> { (0..n).map(|_| take(rest)).collect() };
        let others = column(has(OTHER_ID))?;
        let shared = column(present)?;
        let lens = column(present)?;
        let sizes = column(present)?;
        let mut others = others.into_iter();
        let mut out = Vec::with_capacity(count);
        let mut paths: Vec<Vec<u8>> = Vec::with_capacity(present);
        for (&common, &len) in shared.iter().zip(&lens) {
            let before: &[u8] = paths.last().map_or(&[], Vec::as_slice);
            let mut path = before.get(..usize::try_from(common).ok()?)?.to_vec();
            path.extend_from_slice(take_bytes(rest, usize::try_from(len).ok()?)?);
            paths.push(path);
        }
        let mut digests =
            take_bytes(rest, with_digest.checked_mul(DIGEST_KEPT)?)?.chunks_exact(DIGEST_KEPT);
        if !rest.is_empty() {
            return None;
        }
        let mut docs = paths.into_iter().zip(sizes);
        for (id, kind) in heads {
            if kind & PRESENT == 0 {
                out.push((id, None));
                continue;
            }
            let (path, size) = docs.next()?;
            let digest = if kind & HAS_DIGEST != 0 {
                let mut d = [0u8; 32];
                d[..DIGEST_KEPT].copy_from_slice(digests.next()?);
                Some(d)
            } else {
                None
            };
            let doc_id = if kind & OTHER_ID != 0 {
                others.next()?
            } else {
                id
            };
            out.push((
                id,
                Some(DocumentInfo {
                    id: doc_id,
                    path: String::from_utf8(path).ok()?,
                    size,
                    digest,
                }),
            ));
        }
        Some(out)
    }
}

impl BlockItem for NamePair {
    const FORM: u8 = NAMES_FORM;

    fn compact(items: &[NamePair]) -> Option<Vec<u8>> {
        let mut out = vec![NAMES_FORM];
        varint::put(&mut out, items.len() as u64);
        let mut before = 0u64;
        for &(hash, _) in items {
            varint::put(&mut out, hash.checked_sub(before)?);
            before = hash;
        }
        for &(_, id) in items {
            varint::put(&mut out, id);
        }
        Some(out)
    }

    fn from_compact(mut rest: &[u8]) -> Option<Vec<NamePair>> {
        let rest = &mut rest;
        let count = take_count(rest)?;
        let mut hashes = Vec::with_capacity(count);
        let mut before = 0u64;
        for _ in 0..count {
            before = before.checked_add(take(rest)?)?;
            hashes.push(before);
        }
        let mut out = Vec::with_capacity(count);
        for hash in hashes {
            out.push((hash, take(rest)?));
        }
        rest.is_empty().then_some(out)
    }
}

/// Bytes `a` and `b` share at their start.
fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A document's shape: another identifier or not, its path, size and
    /// digest.
    type Shape = (bool, String, u64, Option<[u8; 32]>);

    /// A step from the identifier before, and an entry's shape (`None`:
    /// a removal).
    type Step = (u64, Option<Shape>);

    fn entry() -> impl Strategy<Value = Step> {
        (
            1u64..1_000,
            prop::option::of((
                any::<bool>(),
                prop_oneof!["flights.csv#0a1b2c:[0-9a-f]{0,16}", ".{0,12}"],
                any::<u64>(),
                prop::option::of(any::<[u8; 32]>()),
            )),
        )
    }

    /// Entries in increasing order from steps and shapes.
    fn entries(steps: Vec<Step>) -> Vec<Entry> {
        let mut id = 0;
        steps
            .into_iter()
            .map(|(step, doc)| {
                id += step;
                let doc = doc.map(|(other, path, size, digest)| DocumentInfo {
                    id: if other { id ^ 0x5555 } else { id },
                    path,
                    size,
                    digest,
                });
                (id, doc)
            })
            .collect()
    }

    /// What a compact block gives back: the digests cut to their first
    /// [`DIGEST_KEPT`] bytes.
    fn kept(entries: &[Entry]) -> Vec<Entry> {
        let mut out = entries.to_vec();
        for d in out.iter_mut().filter_map(|(_, d)| d.as_mut()) {
            if let Some(g) = d.digest.as_mut() {
                g[DIGEST_KEPT..].fill(0);
            }
        }
        out
    }

    proptest! {
        /// Entries come back from the compact form, their digests cut to
        /// 16 bytes, in fewer bytes than the wire form; every cut and an
        /// added byte are refused.
        #[test]
        fn entries_round_trip_and_refuse_every_cut(steps in prop::collection::vec(entry(), 0..60)) {
            let entries = entries(steps);
            let compact = encode(&entries).unwrap_or_else(|e| panic!("{e}"));
            prop_assert_eq!(compact.first(), Some(&ENTRIES_FORM));
            prop_assert_eq!(decode::<Entry>(&compact), Some(kept(&entries)));
            let wire = wire::encode(&entries).unwrap_or_else(|e| panic!("{e}"));
            prop_assert!(compact.len() <= wire.len());
            prop_assert_eq!(decode::<Entry>(&wire), Some(entries.clone()));
            for cut in 1..compact.len() {
                prop_assert_eq!(decode::<Entry>(&compact[..cut]), None, "cut at {}", cut);
            }
            let mut longer = compact.clone();
            longer.push(0);
            prop_assert_eq!(decode::<Entry>(&longer), None);
        }

        /// Name pairs in order come back; every cut and an added byte
        /// are refused.
        #[test]
        fn name_pairs_round_trip(mut pairs in prop::collection::vec((any::<u32>(), any::<u64>()), 0..300)) {
            pairs.sort_unstable();
            let pairs: Vec<NamePair> = pairs.into_iter().map(|(h, i)| (u64::from(h), i)).collect();
            let compact = encode(&pairs).unwrap_or_else(|e| panic!("{e}"));
            prop_assert_eq!(decode::<NamePair>(&compact), Some(pairs.clone()));
            for cut in 1..compact.len() {
                prop_assert_eq!(decode::<NamePair>(&compact[..cut]), None);
            }
            let mut longer = compact;
            longer.push(0);
            prop_assert_eq!(decode::<NamePair>(&longer), None);
        }

        /// Random bytes after either form byte never panic.
        #[test]
        fn random_blocks_never_panic(body in prop::collection::vec(any::<u8>(), 0..200)) {
            for form in [ENTRIES_FORM, NAMES_FORM] {
                let mut bytes = vec![form];
                bytes.extend_from_slice(&body);
                let _ = decode::<Entry>(&bytes);
                let _ = decode::<NamePair>(&bytes);
            }
        }
    }

    /// The compact forms' bytes, pinned (as the module documents them),
    /// so that a change of the stored form cannot pass unnoticed.
    #[test]
    fn the_compact_forms_bytes_are_as_documented() {
        let doc = |id, path: &str, digest| DocumentInfo {
            id,
            path: path.into(),
            size: 300,
            digest,
        };
        let entries: Vec<Entry> = vec![
            (5, Some(doc(5, "ab1", Some([0xaa; 32])))),
            (6, None),
            (8, Some(doc(9, "ab22", None))),
        ];
        let mut want = vec![ENTRIES_FORM, 3];
        // Heads: step 5, entry with a digest; step 1, a removal; step 2,
        // an entry of another identifier.
        want.extend([5 << 3 | 3, 1 << 3, 2 << 3 | 5]);
        want.push(9); // the other identifier
        want.extend([0, 2]); // bytes shared with the path before
        want.extend([3, 2]); // lengths of the rests
        want.extend([0xac, 0x02, 0xac, 0x02]); // sizes, 300 twice
        want.extend(b"ab122"); // the rests
        want.extend([0xaa; 16]); // the digest's first 16 bytes
        assert_eq!(encode(&entries).unwrap_or_else(|e| panic!("{e}")), want);
        let pairs: Vec<NamePair> = vec![(7, 1), (7, 300), (200, 2)];
        let want = vec![NAMES_FORM, 3, 7, 0, 193, 1, 1, 0xac, 0x02, 2];
        assert_eq!(encode(&pairs).unwrap_or_else(|e| panic!("{e}")), want);
    }

    /// What the compact form cannot hold is written in the wire form:
    /// identifiers out of order, a step too large to shift.
    #[test]
    fn what_the_compact_form_cannot_hold_goes_in_the_wire_form() {
        let doc = |id| DocumentInfo {
            id,
            path: "p".into(),
            size: 1,
            digest: None,
        };
        for entries in [
            vec![(5, Some(doc(5))), (3, Some(doc(3)))],
            vec![(u64::MAX, None)],
            vec![(1, None), (1, None)],
        ] {
            let bytes = encode(&entries).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(bytes.first(), Some(&sesame_core::wire::WIRE_VERSION));
            assert_eq!(decode::<Entry>(&bytes), Some(entries));
        }
        // A compact block claiming a zero step, or a kind without its
        // entry bit, is refused.
        assert_eq!(decode::<Entry>(&[ENTRIES_FORM, 2, 8, 0]), None);
        assert_eq!(decode::<Entry>(&[ENTRIES_FORM, 1, 8 | 2]), None);
        assert_eq!(
            decode::<Entry>(&[ENTRIES_FORM, 2, 8, 8]),
            Some(vec![(1, None), (2, None)])
        );
    }
}
