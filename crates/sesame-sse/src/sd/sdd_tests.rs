//! SDd's unit tests (module `sdd`'s `tests`).

use super::*;
use crate::api::UpdateOp;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{LocalChannel, Typed};
use sesame_store::MemoryStore;

/// Format 1, as written before merges were oblivious.
#[derive(Serialize)]
struct MergeV1Out {
    target: u64,
    from: [u64; 2],
    cursor: [u64; 2],
    last: Option<(Vec<u8>, u64)>,
}
#[derive(Serialize)]
struct LevelV1Out {
    slots: [Option<u64>; 3],
    merge: Option<MergeV1Out>,
}
#[derive(Serialize)]
struct StateV1Out {
    master: [u8; 32],
    seq: u64,
    next_buffer: u64,
    levels: Vec<LevelV1Out>,
}

/// A format-1 state with a merge half done, over a server holding
/// format-1 buffers: the restored client restarts the merge, reads the
/// old array entries, and every identifier stays found.
#[test]
fn a_format1_state_with_a_merge_under_way_is_carried_on() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let master = [7u8; 32];
    let old = SddClient::with(Key::from_bytes(master), 0, 0, Vec::new());
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    // Buffers 0 and 1 (level 0, one entry each), the way format 1
    // stored them: the same sealed bytes by position and by label.
    let mut batch = WriteBatch::new();
    for (b, word) in [(0u64, b"apple".to_vec()), (1, b"pear".to_vec())] {
        let u = Update {
            keyword: word.clone(),
            id: b + 10,
            add: true,
            seq: b + 1,
        };
        let keys = old.keys(b);
        let sealed = keys
            .aead
            .seal(&mut rng, &b.to_le_bytes(), &u.encode())
            .unwrap();
        let prf = Aes128Prf::new(&Key::from_bytes(keys.label_key(&word)));
        batch.put(buffer_key(b'a', b, &0u64.to_be_bytes()), sealed.clone());
        batch.put(buffer_key(b'd', b, &label(&prf, 0)), sealed);
    }
    // A partial target (buffer 2) that the old merge had started.
    batch.put(
        buffer_key(b'a', 2, &0u64.to_be_bytes()),
        b"partial".to_vec(),
    );
    store.write(batch).unwrap();
    let v1 = sesame_core::wire::encode(&StateV1Out {
        master,
        seq: 2,
        next_buffer: 3,
        levels: vec![LevelV1Out {
            slots: [Some(0), Some(1), None],
            merge: Some(MergeV1Out {
                target: 2,
                from: [0, 1],
                cursor: [1, 0],
                last: Some((b"apple".to_vec(), 0)),
            }),
        }],
    })
    .unwrap();
    let mut c = SddClient::restore(&v1).unwrap();
    let mut ch = LocalChannel::new(Typed(SddServer::new(store.clone())));
    for i in 0..20u64 {
        c.update(
            &mut rng,
            &mut ch,
            UpdateOp::Add,
            100 + i,
            &[b"pear".to_vec()],
        )
        .unwrap();
    }
    assert_eq!(c.search(&mut rng, &mut ch, b"apple").unwrap(), vec![10]);
    let mut pear: Vec<u64> = (100..120).collect();
    pear.insert(0, 11);
    assert_eq!(c.search(&mut rng, &mut ch, b"pear").unwrap(), pear);
    // The old partial target is gone, and the state is format 4 now.
    assert!(store
        .get(&buffer_key(b'a', 2, &0u64.to_be_bytes()))
        .unwrap()
        .is_none());
    assert!(c.save_state().unwrap().starts_with(STATE_V4));
}

/// Every level's schedule, run on plain entries: NEW's array ends in
/// keyword order, the scratch in label order, every entry published
/// once, and the units spread over exactly `n` updates.
#[test]
fn every_schedule_sorts_and_ends_in_time() {
    use rand::Rng;
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    for l in 0..10usize {
        let n = 1u64 << l;
        let m = Merge {
            target: 2,
            scratch: 3,
            from: [0, 1],
            ..Merge::default()
        };
        let entry = |rng: &mut ChaCha20Rng| Entry {
            label: [0; LABEL_LEN],
            update: Update {
                keyword: vec![rng.gen_range(b'a'..=b'e'); 3],
                id: rng.gen(),
                add: true,
                seq: 0,
            },
        };
        // Two sorted inputs of `n` entries.
        let mut work: BTreeMap<(u64, u64), Entry> = BTreeMap::new();
        for b in [0u64, 1] {
            let mut input: Vec<Entry> = (0..n).map(|_| entry(&mut rng)).collect();
            input.sort_by(|x, y| x.update.keyword.cmp(&y.update.keyword));
            for (p, e) in (0..).zip(input) {
                work.insert((b, p), e);
            }
        }
        let schedule = Schedule::of(l);
        let (mut done, mut published) = (0, Vec::new());
        for k in 1..=n {
            let end = schedule.done_after(k);
            assert!(end - done <= schedule.len().div_ceil(n), "level {l}");
            for op in (done..end).flat_map(|u| schedule.unit(&m, u)) {
                let mut take = |at| work.remove(&at).unwrap();
                match op {
                    Op::Exchange { a, b, to, by_label } => {
                        let (x, y) = (take(a), take(b));
                        let (lo, hi) = if x.greater(&y, by_label) {
                            (y, x)
                        } else {
                            (x, y)
                        };
                        work.insert(to.0, lo);
                        work.insert(to.1, hi);
                    }
                    Op::Block {
                        array,
                        start,
                        len,
                        k,
                        top,
                        by_label,
                    } => {
                        let mut block: Vec<Entry> =
                            (start..start + len).map(|p| take((array, p))).collect();
                        sort_block(&mut block, start, k, top, by_label);
                        for (p, e) in (start..).zip(block) {
                            work.insert((array, p), e);
                        }
                    }
                    Op::Count { from, to } => {
                        let mut e = take(from);
                        work.insert(from, e.clone());
                        e.label = rng.gen();
                        work.insert(to, e);
                    }
                    Op::Publish { from } => published.push(take(from).label),
                    Op::Whole { .. } => {
                        let inputs = op.reads().map(&mut take).collect();
                        let (array, labelled) =
                            merge_whole(inputs, |entries| Ok(entries.map(|_| rng.gen()).collect()))
                                .unwrap();
                        for (at, e) in op.writes().zip(array) {
                            work.insert(at, e);
                        }
                        published.extend(labelled.iter().map(|e| e.0));
                    }
                }
            }
            done = end;
        }
        assert_eq!(done, schedule.len(), "level {l}: ends after n updates");
        let target: Vec<&Vec<u8>> = (0..2 * n).map(|p| &work[&(2, p)].update.keyword).collect();
        assert!(
            target.windows(2).all(|w| w[0] <= w[1]),
            "level {l}: keyword order"
        );
        assert_eq!(published.len() as u64, 2 * n, "level {l}");
        assert!(
            published.windows(2).all(|w| w[0] <= w[1]),
            "level {l}: label order"
        );
    }
}

/// Format 2, as written before passes ran on blocks.
#[derive(Serialize)]
struct MergeV2Out {
    target: u64,
    scratch: u64,
    from: [u64; 2],
    step: u64,
    last: Option<(Vec<u8>, u64)>,
    stale: Vec<u64>,
}
#[derive(Serialize)]
struct LevelV2Out {
    slots: [Option<u64>; 3],
    merge: Option<MergeV2Out>,
}
#[derive(Serialize)]
struct StateV2Out {
    master: [u8; 32],
    seq: u64,
    next_buffer: u64,
    levels: Vec<LevelV2Out>,
}

/// A format-2 or format-3 state saved with merges under way: they
/// start again into fresh buffers, the partial ones are dropped when
/// they end, and every identifier stays found.
#[test]
fn format2_and_format3_states_with_merges_under_way_are_carried_on() {
    for format in [STATE_V2, STATE_V3] {
        let mut rng = ChaCha20Rng::seed_from_u64(4);
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let mut ch = LocalChannel::new(Typed(SddServer::new(store.clone())));
        let mut c = SddClient::new(&mut rng, &Params::new()).unwrap();
        let word = |i: u64| format!("w{}", i % 7).into_bytes();
        // Up to a merge with units done (one on blocks: a merge of
        // arrays of one block is one unit, done at its last update).
        let partial = |c: &SddClient| -> Vec<u64> {
            c.levels
                .iter()
                .filter_map(|l| l.merge.as_ref())
                .filter(|m| m.step > 0)
                .flat_map(|m| [m.target, m.scratch])
                .collect()
        };
        let mut i = 0;
        while partial(&c).is_empty() {
            c.update(&mut rng, &mut ch, UpdateOp::Add, i, &[word(i)])
                .unwrap();
            i += 1;
        }
        let partial = partial(&c);
        let bytes = if format == STATE_V2 {
            let v2 = sesame_core::wire::encode(&StateV2Out {
                master: *c.master.as_bytes(),
                seq: c.seq,
                next_buffer: c.next_buffer,
                levels: c
                    .levels
                    .iter()
                    .map(|l| LevelV2Out {
                        slots: l.slots,
                        merge: l.merge.as_ref().map(|m| MergeV2Out {
                            target: m.target,
                            scratch: m.scratch,
                            from: m.from,
                            step: m.step,
                            last: m.last.clone(),
                            stale: m.stale.clone(),
                        }),
                    })
                    .collect(),
            })
            .unwrap();
            [STATE_V2.as_slice(), &v2].concat()
        } else {
            // Format 3 has format 4's fields.
            let v4 = c.save_state().unwrap();
            [STATE_V3.as_slice(), &v4[STATE_V4.len()..]].concat()
        };
        let mut c = SddClient::restore(&bytes).unwrap();
        let total = i + 300;
        for i in i..total {
            c.update(&mut rng, &mut ch, UpdateOp::Add, i, &[word(i)])
                .unwrap();
        }
        for w in 0..7u64 {
            let want: Vec<u64> = (0..total).filter(|i| i % 7 == w).collect();
            assert_eq!(c.search(&mut rng, &mut ch, &word(w)).unwrap(), want, "w{w}");
        }
        for b in partial {
            for kind in [b'a', b'd'] {
                let left = store.scan_prefix(&buffer_key(kind, b, &[])).unwrap();
                assert!(left.is_empty(), "buffer {b} of the old merge is left");
            }
        }
        assert!(c.save_state().unwrap().starts_with(STATE_V4));
    }
}

/// A channel that hashes every request and response it carries.
struct Digest<C> {
    inner: C,
    hash: sha2::Sha256,
}

impl<C: Channel> Channel for Digest<C> {
    fn call(&mut self, request: &[u8]) -> Result<Vec<u8>> {
        use sha2::Digest as _;
        let response = self.inner.call(request)?;
        for bytes in [request, &response] {
            self.hash.update((bytes.len() as u64).to_le_bytes());
            self.hash.update(bytes);
        }
        Ok(response)
    }
    fn meter(&self) -> &sesame_core::Meter {
        self.inner.meter()
    }
}

/// Seeded vector: 700 updates from a seeded RNG (additions and
/// deletions over 40 keywords, through whole small merges and merges on
/// blocks up to level 8) send and receive exactly these bytes (SHA-256
/// over every request and response), so that a change of how entries
/// are sealed, batched or ordered cannot change what the server stores.
#[test]
fn seeded_updates_exchange_the_same_bytes() {
    use sha2::Digest as _;
    let mut rng = ChaCha20Rng::seed_from_u64(39);
    let mut c = SddClient::new(&mut rng, &Params::new()).unwrap();
    let mut ch = Digest {
        inner: LocalChannel::new(Typed(SddServer::new(Arc::new(MemoryStore::new())))),
        hash: sha2::Sha256::new(),
    };
    for i in 0..700u64 {
        let w = format!("keyword-{}", i * 7 % 40).into_bytes();
        let op = if i % 9 == 8 {
            UpdateOp::Delete
        } else {
            UpdateOp::Add
        };
        c.update(&mut rng, &mut ch, op, i / 3 + 1, &[w]).unwrap();
    }
    let found = c.search(&mut rng, &mut ch, b"keyword-3").unwrap();
    assert!(!found.is_empty());
    assert!(c.levels.len() > 8, "reaches level 8");
    assert_eq!(
        hex::encode(ch.hash.finalize()),
        "4d6616ceff420a47f915577fe8172c269d566abd962e82c4f2cc8ea565a60c13"
    );
}
