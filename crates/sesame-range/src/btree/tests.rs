//! Unit tests of the B+ tree: invariants after random insertions,
//! deletions and appended batches, against a sorted-vector oracle.

use super::*;
use rand::{Rng, SeedableRng};

type Tree = BTree<u64, u64, MemNodeStore<u64, u64>>;

fn oracle_range(oracle: &BTreeMap<(u64, u64), usize>, lo: u64, hi: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for (&(k, v), &n) in oracle.range((lo, 0)..=(hi, u64::MAX)) {
        out.extend(std::iter::repeat_n((k, v), n));
    }
    out
}

fn sorted(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.sort();
    v
}

fn run(leaf: usize, internal: usize, keys: u64, ops: usize, seed: u64) {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let mut tree: Tree = BTree::new(MemNodeStore::new(), Capacity::new(leaf, internal).unwrap());
    let mut oracle: BTreeMap<(u64, u64), usize> = BTreeMap::new();
    for step in 0..ops {
        let k = rng.gen_range(0..keys);
        let v = rng.gen_range(0..3u64);
        match rng.gen_range(0..10) {
            0..=4 => {
                tree.insert_ord(k, v).unwrap();
                *oracle.entry((k, v)).or_default() += 1;
            }
            5..=7 => {
                let got = tree.delete_ord(&k, |x| Ok(*x == v)).unwrap();
                let had = oracle.get(&(k, v)).copied().unwrap_or(0);
                assert_eq!(got.is_some(), had > 0, "step {step} delete {k} {v}");
                if had == 1 {
                    oracle.remove(&(k, v));
                } else if had > 1 {
                    oracle.insert((k, v), had - 1);
                }
            }
            _ => {
                let a = rng.gen_range(0..keys);
                let b = rng.gen_range(a..=keys);
                let got = tree.range_ord(&a, &b).unwrap();
                assert!(got.windows(2).all(|w| w[0].0 <= w[1].0));
                assert_eq!(sorted(got), oracle_range(&oracle, a, b), "step {step}");
            }
        }
        let n = tree.check().unwrap();
        assert_eq!(n, oracle.values().sum::<usize>(), "step {step}");
    }
    // Drain everything: the tree must end empty.
    let all: Vec<(u64, u64)> = oracle_range(&oracle, 0, u64::MAX);
    for (k, v) in all {
        assert!(tree.delete_ord(&k, |x| Ok(*x == v)).unwrap().is_some());
        tree.check().unwrap();
    }
    assert!(tree.is_empty());
    assert_eq!(tree.store().node_count(), 0);
}

#[test]
fn matches_an_oracle_with_tiny_capacities_and_duplicates() {
    for (leaf, internal) in [(3, 3), (4, 4), (3, 4), (4, 3), (2, 2), (5, 2)] {
        for seed in 0..4 {
            run(leaf, internal, 12, 600, seed);
            run(leaf, internal, 200, 600, seed + 100);
        }
    }
}

#[test]
fn one_key_many_times_spans_leaves() {
    let mut tree: Tree = BTree::new(MemNodeStore::new(), Capacity::new(3, 3).unwrap());
    for v in 0..100 {
        tree.insert_ord(7, v).unwrap();
        tree.insert_ord(3, v).unwrap();
        tree.insert_ord(9, v).unwrap();
    }
    tree.check().unwrap();
    assert_eq!(tree.range_ord(&7, &7).unwrap().len(), 100);
    assert_eq!(tree.range_ord(&4, &8).unwrap().len(), 100);
    // Delete the values of 7 from the last inserted: found across leaves.
    for v in (0..100).rev() {
        assert_eq!(tree.delete_ord(&7, |x| Ok(*x == v)).unwrap(), Some((7, v)));
        tree.check().unwrap();
    }
    assert!(tree.delete_ord(&7, |_| Ok(true)).unwrap().is_none());
    assert_eq!(tree.range_ord(&0, &100).unwrap().len(), 200);
}

#[test]
fn probes_may_fail_and_capacities_are_checked() {
    assert!(Capacity::new(1, 4).is_err());
    assert!(Capacity::new(4, 1).is_err());
    let mut tree: Tree = BTree::new(MemNodeStore::new(), Capacity::new(3, 3).unwrap());
    for k in 0..20 {
        tree.insert_ord(k, k).unwrap();
    }
    let err = tree.range(|_| Err(Error::Crypto), |_| Ok(Ordering::Greater));
    assert!(matches!(err, Err(Error::Crypto)));
    let err = tree.insert(5, 5, |_| Err(Error::Crypto));
    assert!(matches!(err, Err(Error::Crypto)));
    assert_eq!(tree.check().unwrap(), 20);
    let before = tree.stats().loads;
    tree.range_ord(&3, &4).unwrap();
    assert!(tree.stats().loads > before);
}

proptest::proptest! {
    /// Any sequence of insertions (op 0), deletions (op 1) and scans
    /// (op 2) over a few keys equals the oracle, and every invariant
    /// holds after every operation.
    #[test]
    fn any_operation_sequence_equals_the_oracle(
        leaf in 2usize..6,
        internal in 2usize..6,
        ops in proptest::collection::vec((0u8..3, 0u64..10, 0u64..3), 0..300),
    ) {
        let mut tree: Tree = BTree::new(MemNodeStore::new(), Capacity::new(leaf, internal).unwrap());
        let mut oracle: BTreeMap<(u64, u64), usize> = BTreeMap::new();
        for (op, k, v) in ops {
            match op {
                0 => {
                    tree.insert_ord(k, v).unwrap();
                    *oracle.entry((k, v)).or_default() += 1;
                }
                1 => {
                    let got = tree.delete_ord(&k, |x| Ok(*x == v)).unwrap();
                    let had = oracle.remove(&(k, v)).unwrap_or(0);
                    if had > 1 {
                        oracle.insert((k, v), had - 1);
                    }
                    proptest::prop_assert_eq!(got.is_some(), had > 0);
                }
                _ => {
                    let hi = k + v * 3;
                    let got = sorted(tree.range_ord(&k, &hi).unwrap());
                    proptest::prop_assert_eq!(got, oracle_range(&oracle, k, hi));
                }
            }
            proptest::prop_assert_eq!(tree.check().unwrap(), oracle.values().sum::<usize>());
        }
    }
}

/// Appends in batches of any size, after insertions or on an empty
/// tree, keep every invariant (nodes at least half full but the root
/// included) and the entries of an oracle; insertions and deletions
/// then work on the appended tree as on any other.
#[test]
fn appended_batches_keep_the_invariants() {
    for (leaf, internal) in [(2, 2), (3, 3), (4, 2), (5, 4), (47, 107)] {
        for seed in 0..6u64 {
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
            let mut tree: Tree =
                BTree::new(MemNodeStore::new(), Capacity::new(leaf, internal).unwrap());
            let mut oracle: BTreeMap<(u64, u64), usize> = BTreeMap::new();
            for k in 0..rng.gen_range(0..30u64) {
                tree.insert_ord(k, 0).unwrap();
                *oracle.entry((k, 0)).or_default() += 1;
            }
            let mut next = 30u64;
            for _ in 0..rng.gen_range(1..12) {
                let n = rng.gen_range(0..400usize);
                let mut batch = Vec::with_capacity(n);
                for _ in 0..n {
                    next += rng.gen_range(0..3u64);
                    let v = rng.gen_range(0..3u64);
                    batch.push((next, v));
                    *oracle.entry((next, v)).or_default() += 1;
                }
                tree.append(batch).unwrap();
                assert_eq!(
                    tree.check().unwrap(),
                    oracle.values().sum::<usize>(),
                    "{leaf}/{internal} seed {seed}"
                );
            }
            assert_eq!(
                sorted(tree.range_ord(&0, &u64::MAX).unwrap()),
                oracle_range(&oracle, 0, u64::MAX)
            );
            for _ in 0..300 {
                let k = rng.gen_range(0..=next);
                if rng.gen_bool(0.5) {
                    tree.insert_ord(k, 9).unwrap();
                    *oracle.entry((k, 9)).or_default() += 1;
                } else if let Some((&(k, v), _)) = oracle.range((k, 0)..).next() {
                    assert!(tree.delete_ord(&k, |x| Ok(*x == v)).unwrap().is_some());
                    let had = oracle.remove(&(k, v)).unwrap_or(0);
                    if had > 1 {
                        oracle.insert((k, v), had - 1);
                    }
                }
                assert_eq!(tree.check().unwrap(), oracle.values().sum::<usize>());
            }
            assert_eq!(
                sorted(tree.range_ord(&0, &u64::MAX).unwrap()),
                oracle_range(&oracle, 0, u64::MAX)
            );
        }
    }
}

/// An appended tree's leaves are full but for the last two: a bulk
/// load writes about half the leaves of insertions one by one.
#[test]
fn an_appended_tree_fills_its_leaves() {
    let mut appended: Tree = BTree::new(MemNodeStore::new(), Capacity::new(10, 10).unwrap());
    appended
        .append((0..10_000u64).map(|k| (k, k)).collect())
        .unwrap();
    let mut inserted: Tree = BTree::new(MemNodeStore::new(), Capacity::new(10, 10).unwrap());
    for k in 0..10_000u64 {
        inserted.insert_ord(k, k).unwrap();
    }
    assert_eq!(appended.check().unwrap(), 10_000);
    let (a, b) = (appended.store().node_count(), inserted.store().node_count());
    assert!(a * 10 < b * 6, "{a} nodes appended, {b} inserted");
}

#[test]
fn a_missing_node_is_an_error_not_a_panic() {
    let mut tree: Tree = BTree::new(MemNodeStore::new(), Capacity::new(3, 3).unwrap());
    for k in 0..20 {
        tree.insert_ord(k, k).unwrap();
    }
    tree.store_mut().free(0).unwrap();
    assert!(tree.range_ord(&0, &20).is_err());
}
