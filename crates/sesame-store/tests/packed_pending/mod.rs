//! Pending pairs (`Packed::with_pending`): a view's small writes held in
//! one stored pair, merged into the chunks once they fill it; every
//! answer the oracle's, before and after merges; a damaged record an
//! error; the record read before the chunks, so that a merge between the
//! two reads hides no key.

use std::sync::Mutex;

use sesame_core::{IoCounts, Result, StoredValue};
use sesame_store::packed::{PENDING_BYTES, PENDING_OPS};

use super::*;

/// Where the views of these tests hold their pending pairs: beside the
/// chunks of the generation `i/x/1/`.
const PENDING: &[u8] = b"i/x/1/+";

fn pending_over(base: Arc<dyn Store>) -> Packed {
    over(base).with_pending(PENDING.to_vec())
}

fn memory_pending() -> Packed {
    pending_over(Arc::new(MemoryStore::new()))
}

fn redb_pending() -> Packed {
    pending_over(Arc::new(RedbStore::open_in_memory().unwrap()))
}

mod memory_with_pending {
    suite_cases!(super::memory_pending; get_missing, put_get, overwrite, delete,
        batch_applies_in_order, empty_batch, scan_prefix_order_and_bounds, empty_key_and_value,
        large_value, io_counts, concurrent_writers);
}

mod redb_with_pending {
    suite_cases!(super::redb_pending; get_missing, put_get, overwrite, delete,
        batch_applies_in_order, empty_batch, scan_prefix_order_and_bounds, empty_key_and_value,
        large_value, io_counts);
}

/// Every answer of `view` is the oracle's: `get` of every key and of a
/// missing one, `get_many` of all keys, `scan_prefix`, and `pairs_under`
/// over the base store.
fn answers_as(view: &Packed, base: &dyn Store, oracle: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in oracle.iter().step_by(5) {
        assert_eq!(view.get(k).unwrap().as_ref(), Some(v));
    }
    assert_eq!(view.get(&label(u32::MAX)).unwrap(), None);
    let keys: Vec<&[u8]> = oracle.keys().map(Vec::as_slice).collect();
    let many = view.get_many(&keys).unwrap();
    assert!(many
        .iter()
        .zip(oracle.values())
        .all(|(got, v)| got.as_ref() == Some(v)));
    let all: Vec<(Vec<u8>, Vec<u8>)> = oracle.clone().into_iter().collect();
    assert_eq!(view.scan_prefix(b"").unwrap(), all);
    let listed = sesame_store::packed::pairs_under(base, b"i/x/1/").unwrap();
    let packed: Vec<(Vec<u8>, Vec<u8>)> = listed
        .into_iter()
        .filter(|(k, _)| k.as_slice() != b"i/x/1/\"" && k.as_slice() != b"i/x/1/$")
        .map(|(k, v)| (k[6..].to_vec(), v))
        .collect();
    assert_eq!(packed, all, "pairs_under lists the pending pairs once");
}

/// An update of 8 fresh FAST-like keys writes one stored pair (the
/// record) until the record is full; the write that fills it merges it
/// into the chunks and deletes it. Every answer is the oracle's
/// throughout, and the layout checks clean.
#[test]
fn small_writes_are_one_pending_pair_until_merged() {
    let base: Arc<dyn Store> = Arc::new(RedbStore::open_in_memory().unwrap());
    let view = pending_over(base.clone());
    let mut oracle = BTreeMap::new();
    // A bulk goes to the chunks, not to the record.
    view.write(bulk_of(0..8_000, &mut oracle)).unwrap();
    assert_eq!(base.get(PENDING).unwrap(), None, "a bulk was held pending");
    let (mut held, mut merged) = (0, 0);
    for update in 0..300u32 {
        let batch = update_of(100_000 + update * 8, &mut oracle);
        let plan = view.plan(&batch).unwrap();
        assert_eq!(plan.overwrites, 0);
        let ops = plan.batch.ops();
        let puts_record = ops
            .iter()
            .any(|op| matches!(op, sesame_core::WriteOp::Put { key, .. } if key == PENDING));
        if ops.len() == 1 && puts_record {
            held += 1;
        } else {
            assert!(
                ops.iter()
                    .any(|op| matches!(op, sesame_core::WriteOp::Delete { key } if key == PENDING)),
                "a write that merged left the record"
            );
            merged += 1;
        }
        base.write(plan.batch).unwrap();
        if let Some(record) = base.get(PENDING).unwrap() {
            assert!(record.len() <= PENDING_BYTES);
        }
        if update % 40 == 0 {
            view.verify().unwrap();
            answers_as(&view, base.as_ref(), &oracle);
        }
    }
    println!("{held} updates held pending, {merged} merged");
    // About 8,000 bytes of 58-byte entries a record: some 17 updates of 8.
    assert!(merged > 0, "no write merged the record");
    assert!(held > 10 * merged, "{held} held, {merged} merged");
    view.verify().unwrap();
    answers_as(&view, base.as_ref(), &oracle);
}

/// Overwrites, values sent again and deletes through the record: an
/// overwrite of a held pair or of a chunk's pair is counted, a value sent
/// again is not and writes nothing, a delete merges the record; the
/// answers are the oracle's after each.
#[test]
fn overwrites_resends_and_deletes_through_the_record() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let view = pending_over(base.clone());
    let mut oracle = BTreeMap::new();
    view.write(bulk_of(0..2_000, &mut oracle)).unwrap();
    let write = |ops: &[(u32, Option<u8>)], oracle: &mut BTreeMap<Vec<u8>, Vec<u8>>| {
        let mut batch = WriteBatch::new();
        for &(i, v) in ops {
            match v {
                Some(v) => {
                    batch.put(label(i), vec![v; 25]);
                    oracle.insert(label(i), vec![v; 25]);
                }
                None => {
                    batch.delete(label(i));
                    oracle.remove(&label(i));
                }
            }
        }
        let plan = view.plan(&batch).unwrap();
        let overwrites = plan.overwrites;
        let ops = plan.batch.len();
        base.write(plan.batch).unwrap();
        (overwrites, ops)
    };
    // A fresh key: held.
    assert_eq!(write(&[(50_000, Some(1))], &mut oracle), (0, 1));
    assert!(base.get(PENDING).unwrap().is_some());
    // Sent again: nothing written, nothing counted.
    assert_eq!(write(&[(50_000, Some(1))], &mut oracle), (0, 0));
    // The held pair overwritten, and a chunk's pair overwritten: both
    // counted, both held.
    assert_eq!(
        write(&[(50_000, Some(2)), (7, Some(9))], &mut oracle),
        (2, 1)
    );
    answers_as(&view, base.as_ref(), &oracle);
    // A chunk's pair sent again with its own value: not counted.
    let (overwrites, _) = write(&[(8, Some(8))], &mut oracle);
    assert_eq!(overwrites, 0);
    // A delete of a held key merges the record into the chunks.
    let (_, ops) = write(&[(50_000, None), (11, None)], &mut oracle);
    assert!(ops > 1);
    assert_eq!(base.get(PENDING).unwrap(), None);
    answers_as(&view, base.as_ref(), &oracle);
    view.verify().unwrap();
    // A write of more than PENDING_OPS pairs goes to the chunks.
    let big: Vec<(u32, Option<u8>)> = (0..=PENDING_OPS as u32)
        .map(|i| (60_000 + i, Some(3)))
        .collect();
    write(&[(70_000, Some(4))], &mut oracle);
    assert!(base.get(PENDING).unwrap().is_some());
    write(&big, &mut oracle);
    assert_eq!(base.get(PENDING).unwrap(), None, "a large write was held");
    answers_as(&view, base.as_ref(), &oracle);
}

/// A damaged record (cut short, an unknown form, keys out of order, a
/// length past its end) is `StoreCorrupt` from `verify`, and no read or
/// plan panics on it.
#[test]
fn a_damaged_pending_record_is_an_error_not_a_panic() {
    let base: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let view = pending_over(base.clone());
    let mut oracle = BTreeMap::new();
    view.write(bulk_of(0..500, &mut oracle)).unwrap();
    let mut batch = WriteBatch::new();
    for i in 0..6 {
        batch.put(label(10_000 + i), vec![i as u8; 25]);
    }
    view.write(batch).unwrap();
    let good = base.get(PENDING).unwrap().unwrap();
    let mut unordered = good.clone();
    // The fixed form: a header of three bytes, then pairs of 33 + 25
    // bytes (FAST-like keys); the first two pairs swapped.
    let (header, width) = (good.len() - 6 * 58, 58);
    let first = unordered[header..header + width].to_vec();
    let second = unordered[header + width..header + 2 * width].to_vec();
    unordered[header..header + width].copy_from_slice(&second);
    unordered[header + width..header + 2 * width].copy_from_slice(&first);
    let damaged: Vec<(&str, Vec<u8>)> = vec![
        ("cut short", good[..good.len() - 7].to_vec()),
        ("unknown form", [&[0x7f][..], &good[1..]].concat()),
        ("out of order", unordered),
        ("empty", Vec::new()),
        ("a length past the end", vec![0x01, 0xff, 0xff, 0x03]),
    ];
    for (what, bytes) in damaged {
        base.put(PENDING, &bytes).unwrap();
        assert!(
            matches!(view.verify(), Err(Error::StoreCorrupt(_))),
            "{what}: verify passed"
        );
        // Reads and plans answer or fail; none panics.
        let _ = view.get(&label(10_001));
        let _ = view.get_many(&[&label(1), &label(10_002)]);
        let _ = view.scan_prefix(b"");
        let mut batch = WriteBatch::new();
        batch.put(label(20_000), vec![1; 25]);
        let _ = view.plan(&batch);
        let _ = sesame_store::packed::pairs_under(base.as_ref(), b"i/x/1/");
    }
}

/// A store that applies `then` once, right after the first read of the
/// view's generation returns: a host's merge landing between a reader's
/// two reads.
struct WritesBetween {
    base: Arc<dyn Store>,
    then: Mutex<Option<WriteBatch>>,
}

impl WritesBetween {
    fn after<T>(&self, read: Result<T>) -> Result<T> {
        if let Some(batch) = self.then.lock().unwrap().take() {
            self.base.write(batch).unwrap();
        }
        read
    }
}

impl Store for WritesBetween {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.after(self.base.get(key))
    }

    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        self.after(self.base.get_many(keys))
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.base.write(batch)
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.after(self.base.scan_prefix(prefix))
    }

    fn scan_from(
        &self,
        prefix: &[u8],
        from: &[u8],
        descending: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.after(self.base.scan_from(prefix, from, descending, limit))
    }

    fn scan_from_shared(
        &self,
        prefix: &[u8],
        from: &[u8],
        descending: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, StoredValue)>> {
        self.after(self.base.scan_from_shared(prefix, from, descending, limit))
    }

    fn ordered_probes(&self) -> bool {
        true
    }

    fn io_counts(&self) -> IoCounts {
        self.base.io_counts()
    }

    fn backend(&self) -> &'static str {
        "writes-between"
    }
}

/// A key held pending, and a merge of the record into the chunks landing
/// right after the reader's first read: `get`, `get_many` and
/// `scan_prefix` still find the key. Read in the other order (chunks,
/// then record), the merge would move the key out of the record after
/// the chunks were read without it, and each would answer it absent.
#[test]
fn a_merge_between_the_records_read_and_the_chunks_read_hides_no_key() {
    type Read = fn(&Packed, &[u8]) -> Option<Vec<u8>>;
    let reads: [(&str, Read); 3] = [
        ("get", |v, k| v.get(k).unwrap()),
        ("get_many", |v, k| {
            v.get_many(&[k, &label(1)]).unwrap().swap_remove(0)
        }),
        ("scan_prefix", |v, k| {
            v.scan_prefix(b"")
                .unwrap()
                .into_iter()
                .find(|(key, _)| key == k)
                .map(|(_, value)| value)
        }),
    ];
    for (name, read) in reads {
        let memory: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let writer = pending_over(memory.clone());
        let mut oracle = BTreeMap::new();
        writer.write(bulk_of(0..2_000, &mut oracle)).unwrap();
        let held = label(90_000);
        let mut batch = WriteBatch::new();
        batch.put(held.clone(), vec![7; 25]);
        writer.write(batch).unwrap();
        assert!(memory.get(PENDING).unwrap().is_some());
        // The merge: a delete of another key moves the record's pairs into
        // the chunks and deletes the record.
        let mut delete = WriteBatch::new();
        delete.delete(label(3));
        let merge = writer.plan(&delete).unwrap().batch;
        let between: Arc<dyn Store> = Arc::new(WritesBetween {
            base: memory.clone(),
            then: Mutex::new(Some(merge)),
        });
        let reader = Packed::new(between, PREFIX).with_pending(PENDING.to_vec());
        assert_eq!(
            read(&reader, &held),
            Some(vec![7; 25]),
            "{name} lost the key"
        );
        assert_eq!(
            memory.get(PENDING).unwrap(),
            None,
            "{name}: the merge did not land"
        );
    }
}

/// `compact` merges the record too: after small writes (held) and a
/// compaction, no record and no delta is left, and every answer is the
/// oracle's.
#[test]
fn compacting_merges_the_pending_record() {
    let base: Arc<dyn Store> = Arc::new(RedbStore::open_in_memory().unwrap());
    let view = pending_over(base.clone());
    let mut oracle = BTreeMap::new();
    view.write(bulk_of(0..3_000, &mut oracle)).unwrap();
    for update in 0..10u32 {
        view.write(update_of(200_000 + update * 8, &mut oracle))
            .unwrap();
    }
    assert!(base.get(PENDING).unwrap().is_some());
    assert!(view.compact().unwrap() > 0);
    assert_eq!(base.get(PENDING).unwrap(), None, "the record was left");
    assert_eq!(deltas(base.as_ref()), 0, "deltas were left");
    view.verify().unwrap();
    answers_as(&view, base.as_ref(), &oracle);
}
