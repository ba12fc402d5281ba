//! The stored forms of chunks (a module of `tests/packed.rs`): a chunk
//! whose pairs share their lengths is written in the fixed form, byte for
//! byte as `packed_form.rs` documents; a chunk of mixed lengths in the
//! variable form; a chunk in the variable form (every chunk of a build
//! before the fixed form) reads and is rewritten in the fixed form; a
//! damaged fixed chunk is an error, never a panic.

use std::collections::BTreeMap;
use std::sync::Arc;

use sesame_core::{Error, Store, WriteBatch};
use sesame_store::packed::{Packed, CHUNK_BYTES};
use sesame_store::MemoryStore;

use super::{bulk_of, chunk_of, chunks, label, stored_key, PREFIX};

/// A chunk in the fixed form, as `packed_form.rs` documents it.
fn fixed_of(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = vec![0x03, pairs[0].0.len() as u8, pairs[0].1.len() as u8];
    for (k, v) in pairs {
        out.extend_from_slice(k);
        out.extend_from_slice(v);
    }
    out
}

/// Pairs of one key length and one value length are stored as `0x03`,
/// the two lengths, then keys and values back to back: the bytes are
/// pinned, so that a change of the stored form cannot pass unnoticed.
#[test]
fn a_chunk_of_pairs_of_one_width_is_stored_in_the_fixed_form() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let view = Packed::new(base.clone(), PREFIX);
    let mut batch = WriteBatch::new();
    batch.put(b"cd".to_vec(), b"2".to_vec());
    batch.put(b"ab".to_vec(), b"1".to_vec());
    view.write(batch).unwrap();
    assert_eq!(
        chunks(base.as_ref()),
        vec![(
            stored_key(b"ab"),
            vec![0x03, 2, 1, b'a', b'b', b'1', b'c', b'd', b'2']
        )]
    );
    assert_eq!(view.get(b"cd").unwrap(), Some(b"2".to_vec()));
    assert_eq!(view.get(b"ab").unwrap(), Some(b"1".to_vec()));
    assert_eq!(view.get(b"bb").unwrap(), None);
    view.verify().unwrap();
}

/// A keyword index's entries (33-byte labels here, 25-byte values): every
/// chunk of a bulk is in the fixed form, 58 bytes an entry, filled to
/// `CHUNK_BYTES` in that form, and every entry reads back.
#[test]
fn a_bulk_of_entries_is_stored_fixed_and_fills_its_chunks() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let view = Packed::new(base.clone(), PREFIX);
    let mut oracle = BTreeMap::new();
    view.write(bulk_of(0..20_000, &mut oracle)).unwrap();
    let stored = chunks(base.as_ref());
    let per_chunk = (CHUNK_BYTES - 3) / 58;
    for (n, (key, bytes)) in stored.iter().enumerate() {
        assert_eq!(&bytes[..3], &[0x03, 33, 25], "chunk {key:02x?}");
        assert_eq!((bytes.len() - 3) % 58, 0, "chunk {key:02x?}");
        // Every chunk but the run's last two (evened out) is full.
        if n + 2 < stored.len() {
            assert_eq!((bytes.len() - 3) / 58, per_chunk, "chunk {n} is not full");
        }
    }
    for (k, v) in &oracle {
        assert_eq!(view.get(k).unwrap().as_ref(), Some(v));
    }
    view.verify().unwrap();
}

/// Pairs of different lengths stay in the variable form.
#[test]
fn a_chunk_of_mixed_widths_is_stored_in_the_variable_form() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let view = Packed::new(base.clone(), PREFIX);
    let mut batch = WriteBatch::new();
    batch.put(b"ab".to_vec(), b"1".to_vec());
    batch.put(b"cd".to_vec(), b"22".to_vec());
    view.write(batch).unwrap();
    assert_eq!(
        chunks(base.as_ref()),
        vec![(
            stored_key(b"ab"),
            chunk_of(&[(b"ab", b"1"), (b"cd", b"22")])
        )]
    );
    assert_eq!(view.get(b"cd").unwrap(), Some(b"22".to_vec()));
}

/// A chunk written in the variable form by an earlier build, its pairs of
/// one width, reads as it is (lookups, scans, the check); a write that
/// rewrites it (a delete) stores it in the fixed form with the same pairs.
#[test]
fn a_chunk_in_the_variable_form_reads_and_is_rewritten_fixed() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let old = chunk_of(&[(b"a1", b"x"), (b"b2", b"y"), (b"c3", b"z")]);
    base.put(&stored_key(b"a1"), &old).unwrap();
    let view = Packed::new(base.clone(), PREFIX);
    view.verify().unwrap();
    assert_eq!(view.get(b"b2").unwrap(), Some(b"y".to_vec()));
    assert_eq!(view.get(b"c3").unwrap(), Some(b"z".to_vec()));
    assert_eq!(view.get(b"b1").unwrap(), None);
    assert_eq!(
        view.scan_prefix(b"b").unwrap(),
        vec![(b"b2".to_vec(), b"y".to_vec())]
    );
    view.delete(b"b2").unwrap();
    assert_eq!(
        chunks(base.as_ref()),
        vec![(stored_key(b"a1"), fixed_of(&[(b"a1", b"x"), (b"c3", b"z")]))]
    );
    assert_eq!(view.get(b"c3").unwrap(), Some(b"z".to_vec()));
    assert_eq!(view.get(b"b2").unwrap(), None);
    view.verify().unwrap();
}

/// A damaged chunk in the fixed form is a `StoreCorrupt` error naming the
/// chunk on every path that reads it, never a panic.
#[test]
fn damaged_fixed_chunks_are_errors_not_panics() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let view = Packed::new(base.clone(), PREFIX);
    let key = stored_key(b"a1");
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("no lengths", vec![0x03]),
        ("no value length", vec![0x03, 2]),
        ("pairs of no length", vec![0x03, 0, 0]),
        ("a pair cut short", {
            let mut b = fixed_of(&[(b"a1", b"x"), (b"c3", b"z")]);
            b.pop();
            b
        }),
        (
            "keys out of order",
            fixed_of(&[(b"c3", b"z"), (b"a1", b"x")]),
        ),
        ("an endless length", {
            let mut b = vec![0x03];
            b.extend([0xFF; 12]);
            b
        }),
        (
            "a width past every chunk",
            vec![0x03, 0xFF, 0xFF, 0xFF, 0x0F, 1, b'a'],
        ),
    ];
    for (what, bytes) in cases {
        base.put(&key, &bytes).unwrap();
        let mut reads = vec![view.scan_prefix(b"").map(drop), view.verify()];
        if what != "keys out of order" {
            // A lookup reads a chunk only as far as it needs: order is
            // the check's and the scan's to see.
            reads.push(view.get(b"c3").map(drop));
        }
        for err in reads {
            assert!(
                matches!(&err, Err(Error::StoreCorrupt(m)) if m.contains("packed chunk")),
                "{what}: {err:?}"
            );
        }
    }
    // A chunk that is fine once more reads.
    base.put(&key, &fixed_of(&[(b"a1", b"x"), (b"c3", b"z")]))
        .unwrap();
    assert_eq!(view.get(b"c3").unwrap(), Some(b"z".to_vec()));
    // Every cut of a fixed chunk of entries: an answer or an error.
    let mut oracle = BTreeMap::new();
    let other: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let entries = Packed::new(other.clone(), PREFIX);
    entries.write(bulk_of(0..20, &mut oracle)).unwrap();
    let (chunk_key, good) = chunks(other.as_ref()).remove(0);
    for cut in 0..good.len() {
        other.put(&chunk_key, &good[..cut]).unwrap();
        let _ = entries.get(&label(7));
        // A cut after a whole pair is a chunk of fewer pairs.
        if cut <= 3 || (cut - 3) % 58 != 0 {
            assert!(
                entries.verify().is_err(),
                "a chunk cut to {cut} bytes passed"
            );
        }
    }
}

/// A write of a few pairs beside a fixed chunk (deltas, the chunk kept)
/// looks its keys up in the chunk in place, not decoded whole: a key the
/// chunk holds with the same value writes nothing, with another value is
/// an overwrite, a new key is a delta; the chunk's bytes are left as they
/// were, and every key reads as the oracle says. A fixed chunk whose
/// header or length is damaged is `StoreCorrupt` for such a write too,
/// as for a lookup (the order of its keys is the check's to see, as for a
/// lookup: the write does not rewrite the chunk).
#[test]
fn a_write_beside_a_fixed_chunk_reads_it_in_place_and_damage_is_an_error() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let view = Packed::new(base.clone(), PREFIX);
    let mut oracle = BTreeMap::new();
    view.write(bulk_of(0..200, &mut oracle)).unwrap();
    let before = chunks(base.as_ref());
    assert_eq!(before.len(), 1, "one chunk");
    let (chunk_key, good) = before[0].clone();
    assert_eq!(good[0], 0x03, "in the fixed form");
    let keys: Vec<Vec<u8>> = oracle.keys().cloned().collect();
    // Keys above the fence: the chunk's first key is its fence.
    let (same, changed) = (keys[17].clone(), keys[150].clone());
    let new = (10_000..).map(label).find(|k| *k > keys[0]).unwrap();
    let same_value = oracle[&same].clone();
    let small = || {
        let mut b = WriteBatch::new();
        b.put(same.clone(), same_value.clone());
        b.put(changed.clone(), vec![0xEE; 25]);
        b.put(new.clone(), vec![0xDD; 25]);
        b
    };
    let plan = view.plan(&small()).unwrap();
    assert_eq!(plan.overwrites, 1, "the changed key only");
    assert_eq!(plan.batch.len(), 2, "two deltas, the chunk kept");
    base.write(plan.batch).unwrap();
    assert_eq!(
        base.get(&chunk_key).unwrap().as_deref(),
        Some(good.as_slice())
    );
    oracle.insert(changed.clone(), vec![0xEE; 25]);
    oracle.insert(new.clone(), vec![0xDD; 25]);
    for (k, v) in &oracle {
        assert_eq!(view.get(k).unwrap().as_ref(), Some(v));
    }
    view.verify().unwrap();
    // Sent again: nothing changes, nothing is an overwrite.
    let again = view.plan(&small()).unwrap();
    assert_eq!((again.overwrites, again.batch.len()), (0, 0));
    let damaged: Vec<(&str, Vec<u8>)> = vec![
        ("no lengths", vec![0x03]),
        ("no value length", good[..2].to_vec()),
        ("pairs of no length", vec![0x03, 0, 0]),
        ("a pair cut short", good[..good.len() - 1].to_vec()),
        ("a width past every chunk", {
            let mut b = vec![0x03, 0xFF, 0xFF, 0xFF, 0x0F, 1];
            b.extend_from_slice(&good[3..]);
            b
        }),
        ("an unknown format", {
            let mut b = good.clone();
            b[0] = 0x07;
            b
        }),
    ];
    for (what, bytes) in damaged {
        base.put(&chunk_key, &bytes).unwrap();
        let err = view.plan(&small());
        assert!(
            matches!(&err, Err(Error::StoreCorrupt(m)) if m.contains("packed chunk")),
            "{what}: {:?}",
            err.map(|p| p.batch.len())
        );
    }
}

/// Keys that share a prefix state it once, in the bytes
/// `packed_form.rs` documents (pinned): `0x04` for pairs of one width,
/// `0x05` for the variable form; the pairs read back by lookups, scans,
/// a write of deltas beside the chunk and the check; a chunk left with
/// one pair is written without a prefix, as is a chunk whose keys share
/// one byte (`a_chunk_of_pairs_of_one_width_is_stored_in_the_fixed_form`
/// and the tests of keyword entries above: a view's mark alone).
#[test]
fn chunks_whose_keys_share_a_prefix_state_it_once() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let view = Packed::new(base.clone(), PREFIX);
    let mut batch = WriteBatch::new();
    batch.put(b"xab".to_vec(), b"1".to_vec());
    batch.put(b"xac".to_vec(), b"2".to_vec());
    batch.put(b"hx1".to_vec(), b"1".to_vec());
    batch.put(b"hx22".to_vec(), b"22".to_vec());
    view.write(batch).unwrap();
    // One chunk of the four: they share no first byte.
    assert_eq!(chunks(base.as_ref()).len(), 1);
    view.delete(b"hx1").unwrap();
    view.delete(b"hx22").unwrap();
    // (The chunk keeps its fence, `hx1`.)
    let stored = chunks(base.as_ref());
    assert_eq!(stored.len(), 1);
    assert_eq!(
        stored[0].1,
        vec![0x04, 2, b'x', b'a', 1, 1, b'b', b'1', b'c', b'2']
    );
    assert_eq!(view.get(b"xac").unwrap(), Some(b"2".to_vec()));
    let mut batch = WriteBatch::new();
    batch.delete(b"xab".to_vec());
    batch.delete(b"xac".to_vec());
    batch.put(b"hx1".to_vec(), b"1".to_vec());
    batch.put(b"hx22".to_vec(), b"22".to_vec());
    view.write(batch).unwrap();
    let stored = chunks(base.as_ref());
    assert_eq!(stored.len(), 1);
    assert_eq!(
        stored[0].1,
        vec![0x05, 2, b'h', b'x', 1, b'1', 1, b'1', 2, b'2', b'2', 2, b'2', b'2']
    );
    assert_eq!(view.get(b"hx22").unwrap(), Some(b"22".to_vec()));
    assert_eq!(view.get(b"hx1").unwrap(), Some(b"1".to_vec()));
    assert_eq!(view.get(b"hx2").unwrap(), None);
    assert_eq!(view.get(b"hy1").unwrap(), None);
    assert_eq!(
        view.get_many(&[&b"hx1"[..], &b"hz"[..], &b"hx22"[..]])
            .unwrap(),
        vec![Some(b"1".to_vec()), None, Some(b"22".to_vec())]
    );
    assert_eq!(
        view.scan_prefix(b"hx2").unwrap(),
        vec![(b"hx22".to_vec(), b"22".to_vec())]
    );
    view.verify().unwrap();
    view.delete(b"hx1").unwrap();
    let stored = chunks(base.as_ref());
    assert_eq!(
        stored[0].1,
        fixed_of(&[(b"hx22", b"22")]),
        "one pair: no prefix"
    );
}

/// A table's records (keys `h` and an 8-byte identifier, values of many
/// lengths): consecutive identifiers share seven bytes, stated once a
/// chunk; every record reads back, and a write beside the chunks (deltas)
/// and a rewrite keep them.
#[test]
fn records_of_consecutive_identifiers_state_their_shared_bytes_once() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let view = Packed::new(base.clone(), PREFIX);
    let key = |id: u64| [&b"h"[..], &id.to_be_bytes()].concat();
    let mut oracle = BTreeMap::new();
    let mut batch = WriteBatch::new();
    for id in 1_000..1_200u64 {
        let value = vec![id as u8; 40 + (id % 7) as usize];
        batch.put(key(id), value.clone());
        oracle.insert(key(id), value);
    }
    view.write(batch).unwrap();
    let plain: usize = oracle.iter().map(|(k, v)| 2 + k.len() + v.len()).sum();
    let stored = chunks(base.as_ref());
    let bytes: usize = stored.iter().map(|(_, b)| b.len()).sum();
    for (k, b) in &stored {
        assert_eq!(b[0], 0x05, "chunk {k:02x?}");
        assert!(b[1] >= 7, "chunk {k:02x?}: a prefix of {}", b[1]);
    }
    assert!(
        bytes + 6 * oracle.len() <= plain,
        "{bytes} stored for {plain}"
    );
    let mut small = WriteBatch::new();
    small.put(key(1_050), b"changed".to_vec());
    small.delete(key(1_100));
    view.write(small).unwrap();
    oracle.insert(key(1_050), b"changed".to_vec());
    oracle.remove(&key(1_100));
    for (k, v) in &oracle {
        assert_eq!(view.get(k).unwrap().as_ref(), Some(v));
    }
    assert_eq!(view.get(&key(1_100)).unwrap(), None);
    assert_eq!(
        view.scan_prefix(b"h").unwrap(),
        oracle.clone().into_iter().collect::<Vec<_>>()
    );
    view.verify().unwrap();
}

/// A damaged prefixed chunk is a `StoreCorrupt` error on every path that
/// reads it, never a panic: an empty prefix, a prefix for one pair, a
/// prefix past the end, a pair cut short, and every cut of a good one.
#[test]
fn damaged_prefixed_chunks_are_errors_not_panics() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let view = Packed::new(base.clone(), PREFIX);
    let key = stored_key(b"hx1");
    let good = vec![
        0x05, 2, b'h', b'x', 1, b'1', 1, b'1', 2, b'2', b'2', 2, b'2', b'2',
    ];
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("an empty prefix", vec![0x05, 0, 2, b'h', b'1', 1, b'1']),
        (
            "a prefix for one pair",
            vec![0x05, 2, b'h', b'x', 1, b'1', 1, b'1'],
        ),
        (
            "a fixed prefix for one pair",
            vec![0x04, 2, b'h', b'x', 1, 1, b'1', b'1'],
        ),
        ("a prefix past the end", vec![0x05, 9, b'h']),
        ("a pair cut short", good[..good.len() - 1].to_vec()),
    ];
    for (what, bytes) in cases {
        base.put(&key, &bytes).unwrap();
        for err in [view.scan_prefix(b"").map(drop), view.verify()] {
            assert!(
                matches!(&err, Err(Error::StoreCorrupt(m)) if m.contains("packed chunk")),
                "{what}: {err:?}"
            );
        }
    }
    for cut in 0..good.len() {
        base.put(&key, &good[..cut]).unwrap();
        let _ = view.get(b"hx22");
        let _ = view.get_many(&[&b"hx1"[..], &b"hx22"[..]]);
        assert!(view.verify().is_err(), "a chunk cut to {cut} bytes passed");
    }
    base.put(&key, &good).unwrap();
    assert_eq!(view.get(b"hx22").unwrap(), Some(b"22".to_vec()));
}
