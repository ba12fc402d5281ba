//! Unit tests of Path ORAM: accesses against a map, growth, failed
//! requests and argument checks.

use super::*;
use rand::{Rng, SeedableRng};
use sesame_store::MemoryStore;
use std::collections::HashMap;

fn server() -> PathOramServer {
    PathOramServer::new(Arc::new(MemoryStore::new()))
}

#[test]
fn random_accesses_match_a_map() {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
    let mut s = server();
    let mut oram = PathOram::new(&mut rng, 6, 40).unwrap();
    let mut oracle: HashMap<u64, Vec<u8>> = HashMap::new();
    for i in 0..2000u32 {
        let a = rng.gen_range(0..64u64);
        match rng.gen_range(0..5) {
            0 | 1 => {
                let len = rng.gen_range(0..=40);
                let data: Vec<u8> = (0..len).map(|j| (i as u8) ^ j).collect();
                let old = oram.write(&mut rng, &mut s, a, data.clone()).unwrap();
                assert_eq!(old, oracle.insert(a, data));
            }
            2 => {
                let old = oram.access(&mut rng, &mut s, a, Op::Remove).unwrap();
                assert_eq!(old, oracle.remove(&a));
            }
            _ => assert_eq!(
                oram.read(&mut rng, &mut s, a).unwrap(),
                oracle.get(&a).cloned()
            ),
        }
    }
    assert!(oram.max_stash() < 40, "stash grew to {}", oram.max_stash());
}

#[test]
fn bytes_encode_like_a_vec_and_refuse_garbage() {
    for v in [
        vec![],
        vec![7u8; 3],
        (0..=255u8).cycle().take(5000).collect(),
    ] {
        let a = sesame_core::wire::encode(&Bytes(v.clone())).unwrap();
        assert_eq!(a, sesame_core::wire::encode(&v).unwrap());
        assert_eq!(sesame_core::wire::decode::<Bytes>(&a).unwrap(), Bytes(v));
    }
    assert!(sesame_core::wire::decode::<Bytes>(&[1, 5, 1]).is_err());
    assert!(sesame_core::wire::decode::<Request>(&[1, 9]).is_err());
}

#[test]
fn growing_keeps_every_block() {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(70);
    let mut s = server();
    let mut oram = PathOram::new(&mut rng, 2, 8).unwrap();
    let mut oracle: HashMap<u64, Vec<u8>> = HashMap::new();
    for round in 0..6u32 {
        let cap = oram.capacity();
        for _ in 0..300 {
            let a = rng.gen_range(0..cap);
            if rng.gen_bool(0.5) {
                let d = vec![round as u8; rng.gen_range(0..=8)];
                assert_eq!(
                    oram.write(&mut rng, &mut s, a, d.clone()).unwrap(),
                    oracle.insert(a, d)
                );
            } else {
                assert_eq!(
                    oram.read(&mut rng, &mut s, a).unwrap(),
                    oracle.get(&a).cloned()
                );
            }
        }
        oram.grow(&mut rng).unwrap();
        assert_eq!(oram.capacity(), cap * 2);
    }
    for (a, d) in &oracle {
        assert_eq!(oram.read(&mut rng, &mut s, *a).unwrap().as_ref(), Some(d));
    }
    let mut top = PathOram::new(&mut rng, MAX_HEIGHT, 1).unwrap();
    assert!(top.grow(&mut rng).is_err());
}

/// Fails some requests: 1 = read refused, 2 = write refused, 3 = write
/// applied but its answer lost.
struct Flaky<'a>(&'a mut PathOramServer, u8);

impl PathIo for Flaky<'_> {
    fn read_path(&mut self, height: u32, leaf: u32) -> Result<Vec<Option<Vec<u8>>>> {
        if self.1 == 1 {
            return Err(Error::Transport("read lost".into()));
        }
        self.0.read_path(height, leaf)
    }
    fn write_path(&mut self, height: u32, leaf: u32, buckets: Vec<Vec<u8>>) -> Result<()> {
        match self.1 {
            2 => Err(Error::Transport("write lost".into())),
            3 => {
                self.0.write_path(height, leaf, buckets)?;
                Err(Error::Transport("answer lost".into()))
            }
            _ => self.0.write_path(height, leaf, buckets),
        }
    }
    fn put_buckets(&mut self, height: u32, first: u64, buckets: Vec<Vec<u8>>) -> Result<()> {
        self.0.put_buckets(height, first, buckets)
    }
}

#[test]
fn failed_requests_lose_nothing() {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(99);
    let mut s = server();
    let mut oram = PathOram::new(&mut rng, 5, 8).unwrap();
    let mut oracle: HashMap<u64, Vec<u8>> = HashMap::new();
    for i in 0..3000u32 {
        let a = rng.gen_range(0..32u64);
        let mode = if rng.gen_bool(0.3) {
            rng.gen_range(1..=3)
        } else {
            0
        };
        // An access applies unless it fails before reading its path:
        // a refused read, or a failed retry of a pending write-back.
        let applies = mode == 0 || (mode != 1 && oram.pending.is_none());
        let mut io = Flaky(&mut s, mode);
        if rng.gen_bool(0.5) {
            let d = i.to_le_bytes().to_vec();
            let r = oram.write(&mut rng, &mut io, a, d.clone());
            assert_eq!(r.is_err(), mode != 0);
            if applies {
                let old = oracle.insert(a, d);
                if let Ok(got) = r {
                    assert_eq!(got, old);
                }
            }
        } else {
            let r = oram.read(&mut rng, &mut io, a);
            assert_eq!(r.is_err(), mode != 0);
            if let Ok(got) = r {
                assert_eq!(got, oracle.get(&a).cloned());
            }
        }
        if i % 97 == 0 {
            oram = PathOram::restore(&oram.save().unwrap()).unwrap();
        }
        if i % 500 == 499 && oram.grow(&mut rng).is_err() {
            assert!(oram.pending.is_some());
        }
    }
    for (a, d) in &oracle {
        assert_eq!(oram.read(&mut rng, &mut s, *a).unwrap().as_ref(), Some(d));
    }
    assert!(oram.max_stash() < 40);
}

#[test]
fn bad_arguments_are_errors() {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    let mut s = server();
    assert!(PathOram::new(&mut rng, 0, 10).is_err());
    assert!(PathOram::new(&mut rng, 31, 10).is_err());
    let mut oram = PathOram::new(&mut rng, 3, 10).unwrap();
    assert!(oram.read(&mut rng, &mut s, 8).is_err());
    assert!(oram.write(&mut rng, &mut s, 1, vec![0; 11]).is_err());
    assert!(s.read(3, 8).is_err());
    assert!(s.read(31, 0).is_err());
    assert!(s.write(3, 1, vec![vec![]; 3]).is_err());
    assert_eq!(PathOram::height_for(1), 1);
    assert_eq!(PathOram::height_for(1000), 10);
    assert_eq!(PathOram::height_for(1024), 10);
    let b = PathOram::block_size_for_bucket(4096);
    assert!(PathOram::bucket_len_for(b) <= 4096);
    assert!(PathOram::bucket_len_for(b + 1) > 4096);
    assert_eq!(PathOram::block_size_for_bucket(10), 0);
}
