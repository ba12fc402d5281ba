//! Path ORAM and the `path-oram` range protocol: correctness against map
//! oracles, bucket format, tampering, client state, and what the server
//! sees.

// Helpers outside `#[test]` functions unwrap too.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sesame_core::{Channel, Error, LocalChannel, Params, Store, Typed};
use sesame_range::path_oram::oram::{
    self, ChannelIo, Op, PathOram, PathOramServer, Request, STASH_LIMIT,
};
use sesame_range::path_oram::{protocol, OramRangeClient};
use sesame_range::{CachePolicy, PageConfig, PagedStore, RangeClient};
use sesame_store::MemoryStore;

mod support;

type Chan = LocalChannel<Typed<PathOramServer>>;

fn setup(cache: usize) -> (Arc<MemoryStore>, Chan) {
    let mem = Arc::new(MemoryStore::new());
    let page = support::pages(4096, cache, CachePolicy::Lru);
    let paged = PagedStore::new(mem.clone(), page).unwrap();
    let chan = LocalChannel::new(Typed(PathOramServer::new(Arc::new(paged))));
    (mem, chan)
}

fn bucket_keys(mem: &MemoryStore) -> Vec<(Vec<u8>, Vec<u8>)> {
    mem.scan_prefix(b"b").unwrap()
}

#[test]
fn oram_over_a_channel_matches_a_map() {
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let (_mem, mut chan) = setup(16);
    let mut o = PathOram::new(&mut rng, 8, 100).unwrap();
    let mut oracle: HashMap<u64, Vec<u8>> = HashMap::new();
    let span = chan.meter().span();
    for i in 0..1500u32 {
        let a = rng.gen_range(0..256u64);
        let mut io = ChannelIo(&mut chan);
        if rng.gen_bool(0.5) {
            let data: Vec<u8> = (0..rng.gen_range(0..=100)).map(|j| (i + j) as u8).collect();
            assert_eq!(
                o.write(&mut rng, &mut io, a, data.clone()).unwrap(),
                oracle.insert(a, data)
            );
        } else {
            assert_eq!(
                o.read(&mut rng, &mut io, a).unwrap(),
                oracle.get(&a).cloned()
            );
        }
    }
    // Two rounds per access.
    assert_eq!(span.finish().rounds, 3000);
    assert_eq!(o.accesses(), 1500);
}

#[test]
fn stash_stays_bounded() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let mut server = PathOramServer::new(Arc::new(MemoryStore::new()));
    let mut o = PathOram::new(&mut rng, 10, 8).unwrap();
    for a in 0..1024u64 {
        o.write(&mut rng, &mut server, a, a.to_le_bytes().to_vec())
            .unwrap();
    }
    for _ in 0..20_000 {
        let a = rng.gen_range(0..1024u64);
        let got = o.read(&mut rng, &mut server, a).unwrap();
        assert_eq!(got, Some(a.to_le_bytes().to_vec()));
    }
    assert!(
        o.max_stash() <= 40,
        "stash reached {} blocks (limit {STASH_LIMIT})",
        o.max_stash()
    );
    // Client storage: key, 1024 positions of 4 bytes, the stash.
    assert!(o.client_storage_bytes() >= 32 + 4 * 1024);
    assert!(o.client_storage_bytes() <= 32 + 4 * 1024 + 40 * 20);
}

#[test]
fn buckets_have_one_size_and_open_only_with_the_key() {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let (mem, mut chan) = setup(0);
    let mut o = PathOram::new(&mut rng, 5, 200).unwrap();
    let secret = b"a very recognisable plaintext".to_vec();
    for a in 0..32u64 {
        o.write(&mut rng, &mut ChannelIo(&mut chan), a, secret.clone())
            .unwrap();
    }
    let buckets = bucket_keys(&mem);
    assert!(buckets.len() > 16);
    for (_, v) in &buckets {
        assert_eq!(v.len(), o.bucket_len());
        assert!(!v.windows(secret.len()).any(|w| w == secret.as_slice()));
    }
    // A bucket fits one 4 KiB page with the largest block for it.
    let b = PathOram::block_size_for_bucket(4096);
    assert!(PathOram::bucket_len_for(b) <= 4096);
    // Another key cannot open the buckets.
    let mut other = PathOram::new(&mut rng, 5, 200).unwrap();
    for _ in 0..3 {
        let r = other.read(&mut rng, &mut ChannelIo(&mut chan), 0);
        assert!(matches!(r, Err(Error::Crypto)), "{r:?}");
    }
    // The rightful client still reads everything.
    for a in 0..32u64 {
        let got = o.read(&mut rng, &mut ChannelIo(&mut chan), a).unwrap();
        assert_eq!(got.as_deref(), Some(secret.as_slice()));
    }
}

#[test]
fn tampered_or_moved_buckets_give_crypto_errors() {
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let (mem, mut chan) = setup(0);
    let mut o = PathOram::new(&mut rng, 4, 32).unwrap();
    for a in 0..16u64 {
        o.write(&mut rng, &mut ChannelIo(&mut chan), a, vec![a as u8; 32])
            .unwrap();
    }
    let root_key = {
        let mut k = vec![b'b'];
        k.extend_from_slice(&0u64.to_be_bytes());
        k
    };
    let root = mem.get(&root_key).unwrap().unwrap();
    // Every path contains the root: flip one byte of it.
    let mut bad = root.clone();
    bad[20] ^= 1;
    mem.put(&root_key, &bad).unwrap();
    let r = o.read(&mut rng, &mut ChannelIo(&mut chan), 3);
    assert!(matches!(r, Err(Error::Crypto)), "{r:?}");
    // A truncated bucket.
    mem.put(&root_key, &root[..root.len() - 1]).unwrap();
    let r = o.read(&mut rng, &mut ChannelIo(&mut chan), 3);
    assert!(matches!(r, Err(Error::Crypto)), "{r:?}");
    // A valid bucket moved to the root's place (the index is bound).
    let (_, child) = bucket_keys(&mem)
        .into_iter()
        .find(|(k, _)| *k != root_key)
        .unwrap();
    mem.put(&root_key, &child).unwrap();
    let r = o.read(&mut rng, &mut ChannelIo(&mut chan), 3);
    assert!(matches!(r, Err(Error::Crypto)), "{r:?}");
    // Restoring the bucket restores service: failed accesses changed
    // nothing.
    mem.put(&root_key, &root).unwrap();
    for a in 0..16u64 {
        let got = o.read(&mut rng, &mut ChannelIo(&mut chan), a).unwrap();
        assert_eq!(got, Some(vec![a as u8; 32]));
    }
}

/// The store's buckets: (key, ciphertext) pairs.
type Buckets = Vec<(Vec<u8>, Vec<u8>)>;

/// An ORAM of 16 blocks, each written twice (value 1, then value 2)
/// through `server`; returns the ORAM and the store's buckets as they
/// were after the first round.
fn written_twice(rng: &mut ChaCha20Rng, mem: &Arc<MemoryStore>) -> (PathOram, Buckets) {
    let mut server = PathOramServer::new(mem.clone());
    let mut o = PathOram::new(rng, 4, 8).unwrap();
    for a in 0..16u64 {
        o.write(rng, &mut server, a, vec![1; 8]).unwrap();
    }
    let first = bucket_keys(mem);
    for a in 0..16u64 {
        o.write(rng, &mut server, a, vec![2; 8]).unwrap();
    }
    (o, first)
}

/// Puts `buckets` into the store as they are.
fn put_all(mem: &MemoryStore, buckets: &[(Vec<u8>, Vec<u8>)]) {
    for (k, v) in buckets {
        mem.put(k, v).unwrap();
    }
}

/// Makes the store hold exactly `buckets` (a faithful rollback: buckets
/// written since are removed).
fn roll_back_to(mem: &MemoryStore, buckets: &[(Vec<u8>, Vec<u8>)]) {
    let mut batch = sesame_core::WriteBatch::new();
    for (k, _) in bucket_keys(mem) {
        batch.delete(k);
    }
    mem.write(batch).unwrap();
    put_all(mem, buckets);
}

/// Reads every block through a server over `mem` and requires each read
/// to fail: a read that succeeds is a stale or lost block the client took
/// for current (every block holds value 2).
fn every_read_is_refused(rng: &mut ChaCha20Rng, o: &mut PathOram, mem: &Arc<MemoryStore>) {
    let mut server = PathOramServer::new(mem.clone());
    for a in 0..16u64 {
        let r = o.read(rng, &mut server, a);
        assert!(matches!(r, Err(Error::Crypto)), "block {a}: {r:?}");
    }
}

/// After an attack is undone, the client reads every block right: the
/// refused accesses changed nothing.
fn every_read_is_right(rng: &mut ChaCha20Rng, o: &mut PathOram, mem: &Arc<MemoryStore>) {
    let mut server = PathOramServer::new(mem.clone());
    for a in 0..16u64 {
        assert_eq!(
            o.read(rng, &mut server, a).unwrap(),
            Some(vec![2; 8]),
            "block {a}"
        );
    }
}

fn root_key() -> Vec<u8> {
    let mut k = vec![b'b'];
    k.extend_from_slice(&0u64.to_be_bytes());
    k
}

/// The server puts back an earlier ciphertext of the root (it opens under
/// the key and the root's index: only freshness can tell).
#[test]
fn a_replayed_bucket_is_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(31);
    let mem = Arc::new(MemoryStore::new());
    let (mut o, first) = written_twice(&mut rng, &mem);
    let honest = bucket_keys(&mem);
    let old_root = first
        .iter()
        .find(|(k, _)| *k == root_key())
        .unwrap()
        .clone();
    put_all(&mem, &[old_root]);
    every_read_is_refused(&mut rng, &mut o, &mem);
    put_all(&mem, &honest);
    every_read_is_right(&mut rng, &mut o, &mem);
}

/// The server rolls the whole tree back to an earlier, consistent state.
#[test]
fn a_rolled_back_tree_is_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(32);
    let mem = Arc::new(MemoryStore::new());
    let (mut o, first) = written_twice(&mut rng, &mem);
    let honest = bucket_keys(&mem);
    roll_back_to(&mem, &first);
    every_read_is_refused(&mut rng, &mut o, &mem);
    roll_back_to(&mem, &honest);
    every_read_is_right(&mut rng, &mut o, &mem);
}

/// The server drops a bucket it was given (it reads as never written).
#[test]
fn a_dropped_bucket_is_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(33);
    let mem = Arc::new(MemoryStore::new());
    let (mut o, _) = written_twice(&mut rng, &mem);
    let honest = bucket_keys(&mem);
    let mut batch = sesame_core::WriteBatch::new();
    batch.delete(root_key());
    mem.write(batch).unwrap();
    every_read_is_refused(&mut rng, &mut o, &mem);
    put_all(&mem, &honest);
    every_read_is_right(&mut rng, &mut o, &mem);
}

/// Freshness survives a save and restore of the client, and a client
/// restored from an older state refuses the newer tree (the state is part
/// of what is checked).
#[test]
fn freshness_is_part_of_the_saved_state() {
    let mut rng = ChaCha20Rng::seed_from_u64(34);
    let mem = Arc::new(MemoryStore::new());
    let mut server = PathOramServer::new(mem.clone());
    let mut o = PathOram::new(&mut rng, 4, 8).unwrap();
    for a in 0..16u64 {
        o.write(&mut rng, &mut server, a, vec![1; 8]).unwrap();
    }
    let old_state = o.save().unwrap();
    let first = bucket_keys(&mem);
    for a in 0..16u64 {
        o.write(&mut rng, &mut server, a, vec![2; 8]).unwrap();
    }
    let mut restored = PathOram::restore(&o.save().unwrap()).unwrap();
    every_read_is_right(&mut rng, &mut restored, &mem);
    roll_back_to(&mem, &first);
    every_read_is_refused(&mut rng, &mut restored, &mem);
    // The old state matches the old tree only.
    let mut old = PathOram::restore(&old_state).unwrap();
    let mut server = PathOramServer::new(mem.clone());
    assert_eq!(
        old.read(&mut rng, &mut server, 5).unwrap(),
        Some(vec![1; 8])
    );
}

#[test]
fn save_and_restore_in_the_middle_of_a_run() {
    let mut rng = ChaCha20Rng::seed_from_u64(21);
    let (_mem, mut chan) = setup(8);
    let mut o = PathOram::new(&mut rng, 7, 24).unwrap();
    let mut oracle: HashMap<u64, Vec<u8>> = HashMap::new();
    for round in 0..6 {
        for i in 0..200u32 {
            let a = rng.gen_range(0..128u64);
            let mut io = ChannelIo(&mut chan);
            match rng.gen_range(0..4) {
                0 => assert_eq!(
                    o.access(&mut rng, &mut io, a, Op::Remove).unwrap(),
                    oracle.remove(&a)
                ),
                1 | 2 => {
                    let d = format!("{round}/{i}").into_bytes();
                    assert_eq!(
                        o.write(&mut rng, &mut io, a, d.clone()).unwrap(),
                        oracle.insert(a, d)
                    );
                }
                _ => assert_eq!(
                    o.read(&mut rng, &mut io, a).unwrap(),
                    oracle.get(&a).cloned()
                ),
            }
        }
        let saved = o.save().unwrap();
        let stash = o.stash_len();
        o = PathOram::restore(&saved).unwrap();
        assert_eq!(o.stash_len(), stash);
    }
    assert!(PathOram::restore(&[1, 2, 3]).is_err());
}

/// Leaves requested by the recorded transcript.
fn leaves(chan: &mut Chan) -> Vec<(usize, usize, u32)> {
    chan.take_transcript()
        .into_iter()
        .map(|obs| {
            let leaf = match sesame_core::wire::decode::<Request>(&obs.request).unwrap() {
                Request::ReadPath { leaf, .. } | Request::WritePath { leaf, .. } => {
                    u32::from_be_bytes(leaf)
                }
                Request::PutBuckets { .. } => panic!("no bulk load here"),
            };
            (obs.request.len(), obs.response_len, leaf)
        })
        .collect()
}

#[test]
fn the_server_sees_transcripts_of_one_shape_and_uniform_leaves() {
    let height = 3;
    let run = |sequence: &[u64]| {
        let mut rng = ChaCha20Rng::seed_from_u64(77);
        let (_mem, mut chan) = setup(0);
        let mut o = PathOram::new(&mut rng, height, 16).unwrap();
        // Fill the tree so that every bucket has been written.
        for a in 0..8u64 {
            o.write(&mut rng, &mut ChannelIo(&mut chan), a, vec![1; 16])
                .unwrap();
        }
        for _ in 0..200 {
            o.read(&mut rng, &mut ChannelIo(&mut chan), 0).unwrap();
        }
        chan.record_transcript();
        for (i, &a) in sequence.iter().enumerate() {
            let mut io = ChannelIo(&mut chan);
            if i % 2 == 0 {
                o.read(&mut rng, &mut io, a).unwrap();
            } else {
                o.write(&mut rng, &mut io, a, vec![i as u8; 16]).unwrap();
            }
        }
        leaves(&mut chan)
    };
    let same: Vec<u64> = vec![5; 400];
    let varied: Vec<u64> = (0..400u64).map(|i| (i * 7) % 8).collect();
    let (t1, t2) = (run(&same), run(&varied));
    assert_eq!(t1.len(), 800);
    let shape = |t: &[(usize, usize, u32)]| t.iter().map(|x| (x.0, x.1)).collect::<Vec<_>>();
    assert_eq!(shape(&t1), shape(&t2), "request and response sizes differ");
    // The read and the write-back of one access use the same leaf, and the
    // read leaves are spread over all 8 leaves even when one block is
    // accessed again and again.
    for t in [&t1, &t2] {
        let mut counts = [0u32; 8];
        for pair in t.chunks(2) {
            assert_eq!(pair[0].2, pair[1].2);
            counts[pair[0].2 as usize] += 1;
        }
        // 400 accesses over 8 leaves: 50 expected each.
        assert!(counts.iter().all(|&c| (20..=85).contains(&c)), "{counts:?}");
    }
}

#[test]
fn bulk_initialisation_writes_every_bucket_once() {
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let (mem, mut chan) = setup(0);
    let mut o = PathOram::new(&mut rng, 6, 16).unwrap();
    o.initialize(&mut rng, &mut ChannelIo(&mut chan), 64, 10, |a| {
        a.to_be_bytes().to_vec()
    })
    .unwrap();
    let buckets = bucket_keys(&mem);
    assert_eq!(buckets.len(), 127);
    assert!(buckets.iter().all(|(_, v)| v.len() == o.bucket_len()));
    for _ in 0..500 {
        let a = rng.gen_range(0..64u64);
        let got = o.read(&mut rng, &mut ChannelIo(&mut chan), a).unwrap();
        assert_eq!(got, Some(a.to_be_bytes().to_vec()));
    }
    assert!(o
        .initialize(&mut rng, &mut ChannelIo(&mut chan), 1, 1, |_| vec![])
        .is_err());
    let mut fresh = PathOram::new(&mut rng, 2, 4).unwrap();
    assert!(fresh
        .initialize(&mut rng, &mut ChannelIo(&mut chan), 5, 1, |_| vec![])
        .is_err());
}

#[test]
fn each_bucket_read_or_write_is_one_page() {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let (_mem, mut chan) = setup(0);
    let block = PathOram::block_size_for_bucket(4096);
    let mut o = PathOram::new(&mut rng, 6, block).unwrap();
    for a in 0..10u64 {
        o.write(&mut rng, &mut ChannelIo(&mut chan), a, vec![7; block])
            .unwrap();
    }
    let before = chan.service().0.store().io_counts();
    o.read(&mut rng, &mut ChannelIo(&mut chan), 4).unwrap();
    let io = chan.service().0.store().io_counts().since(&before);
    assert_eq!((io.reads, io.writes), (7, 7));
}

fn range_client(
    rng: &mut ChaCha20Rng,
    page_size: usize,
    extra: &[(&str, &str)],
) -> (
    Box<dyn RangeClient>,
    LocalChannel<Box<dyn sesame_core::Service>>,
    PageConfig,
) {
    let page = PageConfig {
        page_size,
        cache_blocks: 32,
        policy: CachePolicy::Lru,
    };
    let mut params = Params::new();
    params.set("bits", 16).set("capacity", 4096);
    for (k, v) in extra {
        params.set(k, v);
    }
    let p = protocol();
    let client = (p.new_client)(rng, &page.with(&params)).unwrap();
    let store = PagedStore::new(Arc::new(MemoryStore::new()), page).unwrap();
    let chan = LocalChannel::new(
        p.server(Arc::new(store), &page.with(&Params::new()))
            .unwrap(),
    );
    (client, chan, page)
}

#[test]
fn range_protocol_matches_an_oracle() {
    for (seed, page_size) in [(1u64, 256usize), (2, 4096), (3, 512)] {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let (mut client, mut chan, _) = range_client(&mut rng, page_size, &[]);
        let mut oracle: Vec<(u64, Vec<u8>)> = Vec::new();
        for step in 0..400u32 {
            let v = if rng.gen_bool(0.3) {
                rng.gen_range(0..20u64)
            } else {
                rng.gen_range(0..1u64 << 16)
            };
            let d = format!("r{}", step % 5).into_bytes();
            match rng.gen_range(0..10) {
                0..=4 => {
                    client.insert(&mut rng, &mut chan, v, &d).unwrap();
                    oracle.push((v, d));
                }
                5..=6 => {
                    let (v, d) = if !oracle.is_empty() && rng.gen_bool(0.7) {
                        oracle[rng.gen_range(0..oracle.len())].clone()
                    } else {
                        (v, d)
                    };
                    let present = oracle.iter().position(|r| r.0 == v && r.1 == d);
                    assert_eq!(
                        client.delete(&mut rng, &mut chan, v, &d).unwrap(),
                        present.is_some()
                    );
                    if let Some(i) = present {
                        oracle.swap_remove(i);
                    }
                }
                _ => {
                    let a = rng.gen_range(0..1u64 << 16);
                    let b = if rng.gen_bool(0.2) {
                        a
                    } else {
                        rng.gen_range(0..1u64 << 16)
                    };
                    let (lo, hi) = (a.min(b), a.max(b));
                    let got = client.query(&mut rng, &mut chan, lo, hi).unwrap();
                    let mut want: Vec<_> = oracle
                        .iter()
                        .filter(|r| lo <= r.0 && r.0 <= hi)
                        .cloned()
                        .collect();
                    want.sort();
                    assert_eq!(got.records, want, "seed {seed} step {step} [{lo}, {hi}]");
                }
            }
            if step == 200 {
                let saved = client.save_state().unwrap();
                client = (protocol().restore_client)(&saved).unwrap();
            }
        }
        let all = client.query(&mut rng, &mut chan, 0, (1 << 16) - 1).unwrap();
        assert_eq!(all.records.len(), oracle.len());
        assert!(client.client_storage_bytes() > 32);
    }
}

#[test]
fn range_tree_invariants_hold_and_each_node_access_is_two_rounds() {
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let page = support::tiny_pages();
    let mut params = Params::new();
    // A tiny initial capacity: the ORAM doubles as the tree grows.
    params.set("bits", 20).set("capacity", 2);
    let mut client = OramRangeClient::new(&mut rng, &params, &page).unwrap();
    let store = PagedStore::new(Arc::new(MemoryStore::new()), page).unwrap();
    let mut chan = LocalChannel::new(Typed(PathOramServer::new(Arc::new(store))));
    for i in 0..300u64 {
        client
            .insert(&mut rng, &mut chan, (i * 7919) % 1000, b"x")
            .unwrap();
    }
    for i in 0..150u64 {
        assert!(client
            .delete(&mut rng, &mut chan, (i * 7919) % 1000, b"x")
            .unwrap());
    }
    assert_eq!(client.check(&mut rng, &mut chan).unwrap(), 150);
    assert!(client.oram().capacity() >= client.nodes_allocated());
    assert!(client.oram().capacity() < 4 * client.nodes_allocated());
    let span = chan.meter().span();
    let before = client.oram().accesses();
    client.query(&mut rng, &mut chan, 100, 200).unwrap();
    let snap = span.finish();
    let accesses = client.oram().accesses() - before;
    assert!(accesses >= 2);
    assert_eq!(snap.rounds, 2 * accesses);
    // Every stored bucket has the same size.
    let sizes: std::collections::BTreeSet<usize> = chan
        .service()
        .0
        .store()
        .scan_prefix(b"")
        .unwrap()
        .iter()
        .map(|(_, v)| v.len())
        .collect();
    assert_eq!(sizes.len(), 1);
    assert_eq!(sizes.into_iter().next(), Some(client.oram().bucket_len()));
}

#[test]
fn range_protocol_refuses_bad_parameters_and_records() {
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let page = PageConfig::default();
    let mut p = Params::new();
    p.set("block_size", 50);
    assert!(OramRangeClient::new(&mut rng, &p, &page).is_err());
    let mut p = Params::new();
    p.set("capacity", 1);
    assert!(OramRangeClient::new(&mut rng, &p, &page).is_err());
    let mut p = Params::new();
    p.set("nonsense", 1);
    assert!(OramRangeClient::new(&mut rng, &p, &page).is_err());
    let (mut client, mut chan, _) = range_client(&mut rng, 4096, &[("record_size", "8")]);
    assert!(client.insert(&mut rng, &mut chan, 1, &[0; 9]).is_err());
    assert!(client.insert(&mut rng, &mut chan, 1 << 16, b"x").is_err());
    assert!(!client.delete(&mut rng, &mut chan, 1, &[0; 9]).unwrap());
    assert!((protocol().restore_client)(b"garbage").is_err());
    let _ = oram::Z;
}

/// Costs per operation at seed 004's settings (4 KiB pages, 128-page LRU
/// cache), for the report: `cargo test -p sesame-range --test path_oram
/// -- --ignored --nocapture costs`. `SESAME_ORAM_RECORDS` sets the number
/// of records (default 5000).
#[test]
#[ignore]
fn costs_per_operation_at_seed_settings() {
    let n: u64 = std::env::var("SESAME_ORAM_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let mut rng = ChaCha20Rng::seed_from_u64(2019);
    let page = PageConfig::default();
    let mut params = Params::new();
    params.set("bits", 32);
    let mut client = OramRangeClient::new(&mut rng, &params, &page).unwrap();
    let store = PagedStore::new(Arc::new(MemoryStore::new()), page).unwrap();
    let mut chan = LocalChannel::new(Typed(PathOramServer::new(Arc::new(store))));
    let span = chan.meter().span();
    for i in 0..n {
        let v = rng.gen_range(0..1u64 << 32);
        client
            .insert(&mut rng, &mut chan, v, &i.to_le_bytes())
            .unwrap();
    }
    let s = span.finish();
    println!(
        "insert x{n}: {:.1} page I/O, {:.1} rounds, {:.0} bytes per op; nodes {}; \
         capacity {:?}; ORAM height {}; client storage {} bytes; max stash {}",
        (s.store.reads + s.store.writes) as f64 / n as f64,
        s.rounds as f64 / n as f64,
        s.bytes() as f64 / n as f64,
        client.nodes_allocated(),
        client.node_capacity(),
        client.oram().height(),
        client.client_storage_bytes(),
        client.oram().max_stash()
    );
    let q = 100u64;
    let span = chan.meter().span();
    let mut results = 0;
    for _ in 0..q {
        let lo = rng.gen_range(0..1u64 << 32);
        let hi = lo.saturating_add(1 << 22);
        results += client
            .query(&mut rng, &mut chan, lo, hi)
            .unwrap()
            .records
            .len();
    }
    let s = span.finish();
    println!(
        "query x{q} (0.1% ranges, {:.1} results each): {:.1} page I/O, {:.1} rounds, \
         {:.0} bytes per query",
        results as f64 / q as f64,
        (s.store.reads + s.store.writes) as f64 / q as f64,
        s.rounds as f64 / q as f64,
        s.bytes() as f64 / q as f64
    );
}
