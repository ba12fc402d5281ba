//! Property tests of the invariants of each primitive.

// Test code: a panic is a failed test (clippy.toml allows this only
// inside #[test] functions, not in their helpers).
#![allow(clippy::unwrap_used)]

use proptest::collection::{btree_set, vec};
use proptest::prelude::*;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_crypto::{
    Aes256GcmSiv, BloomFilter, BloomKey, Error, FeistelPrp, GgmTree, Key, KnuthPrp, MerkleTree, Prp,
};

fn assert_is_permutation(p: &dyn Prp, n: u64) {
    let mut images: Vec<u64> = (0..n).map(|x| p.permute(x).unwrap()).collect();
    for (x, &y) in images.iter().enumerate() {
        assert_eq!(p.invert(y).unwrap(), x as u64);
    }
    images.sort_unstable();
    assert_eq!(images, (0..n).collect::<Vec<_>>());
    assert!(p.permute(n).is_err());
    assert!(p.invert(n).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn knuth_is_a_permutation(key in any::<[u8; 16]>(), n in 1u32..=300) {
        let p = KnuthPrp::new(&Key::from_bytes(key), n).unwrap();
        assert_is_permutation(&p, u64::from(n));
    }

    #[test]
    fn feistel_is_a_permutation_on_small_domains(key in any::<[u8; 16]>(), n in 1u64..=300) {
        let p = FeistelPrp::new(&Key::from_bytes(key), n).unwrap();
        assert_is_permutation(&p, n);
    }

    #[test]
    fn feistel_stays_in_domain_and_inverts(
        key in any::<[u8; 16]>(),
        n in 1u64..,
        xs in vec(any::<u64>(), 1..8),
    ) {
        let p = FeistelPrp::new(&Key::from_bytes(key), n).unwrap();
        for x in xs {
            let x = x % n;
            let y = p.permute(x).unwrap();
            prop_assert!(y < n);
            prop_assert_eq!(p.invert(y).unwrap(), x);
        }
    }

    #[test]
    fn feistel_with_bits_round_trips(key in any::<[u8; 16]>(), bits in 1u32..=64, x in any::<u64>()) {
        let p = FeistelPrp::with_bits(&Key::from_bytes(key), bits).unwrap();
        let x = if bits == 64 { x } else { x & ((1 << bits) - 1) };
        let y = p.permute(x).unwrap();
        prop_assert!(bits == 64 || y < 1 << bits);
        prop_assert_eq!(p.invert(y).unwrap(), x);
    }

    #[test]
    fn bloom_has_no_false_negatives(
        key in any::<[u8; 32]>(),
        m in 1u64..4096,
        k in 1u32..=16,
        items in vec(vec(any::<u8>(), 0..24), 0..100),
    ) {
        let key = BloomKey::new(&Key::from_bytes(key));
        let mut f = BloomFilter::new(m, k).unwrap();
        for item in &items {
            f.insert(&key, item);
        }
        for item in &items {
            prop_assert!(f.contains(&key, item));
        }
        prop_assert!(f.count_ones() <= m);
    }

    #[test]
    fn ggm_cover_is_exact_and_minimal(
        seed in any::<[u8; 16]>(),
        depth in 0u8..=7,
        raw in btree_set(any::<u64>(), 0..40),
    ) {
        let tree = GgmTree::new(Key::from_bytes(seed), depth).unwrap();
        let n = 1u64 << depth;
        let revoked: Vec<u64> = raw.iter().map(|r| r % n).collect();
        let cover = tree.cover(&revoked).unwrap();
        for leaf in 0..n {
            let covering: Vec<_> = cover.iter().filter(|c| c.covers(leaf)).collect();
            if revoked.contains(&leaf) {
                prop_assert!(covering.is_empty());
                for c in &cover {
                    prop_assert_eq!(c.leaf(leaf), Err(Error::LeafNotCovered { leaf }));
                }
            } else {
                prop_assert_eq!(covering.len(), 1);
                prop_assert_eq!(covering[0].leaf(leaf).unwrap(), tree.leaf(leaf).unwrap());
            }
        }
        // Minimal: the cover is exactly the set of maximal revocation-free
        // subtrees (nodes free of revoked leaves whose parent is not).
        let free = |level: u8, prefix: u64| {
            let below = depth - level;
            !revoked.iter().any(|&r| r >> below == prefix)
        };
        let mut maximal = 0;
        for level in 0..=depth {
            for prefix in 0..(1u64 << level) {
                if free(level, prefix) && (level == 0 || !free(level - 1, prefix >> 1)) {
                    maximal += 1;
                }
            }
        }
        prop_assert_eq!(cover.len(), maximal);
        let punctured = tree.puncture(&revoked).unwrap();
        for leaf in 0..n {
            prop_assert_eq!(punctured.leaf(leaf).is_ok(), !revoked.contains(&leaf));
        }
    }

    #[test]
    fn merkle_proofs_verify_and_break_on_any_bit_flip(
        data in vec(vec(any::<u8>(), 0..12), 1..40),
        pick in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
    ) {
        // Leaves carry their index, so they are distinct.
        let leaves: Vec<Vec<u8>> = data
            .iter()
            .enumerate()
            .map(|(i, d)| [&(i as u32).to_le_bytes()[..], d].concat())
            .collect();
        let tree = MerkleTree::build(&leaves);
        let root = tree.root();
        let i = pick.index(leaves.len());
        let proof = tree.proof(i as u64).unwrap();
        prop_assert!(proof.verify(&root, &leaves[i]));

        // Flip one bit of leaf || siblings || root.
        let total_bits = 8 * (leaves[i].len() + 32 * proof.siblings.len() + 32);
        let bit = flip.index(total_bits);
        let (byte, mask) = (bit / 8, 1u8 << (bit % 8));
        let (mut leaf, mut p, mut r) = (leaves[i].clone(), proof.clone(), root);
        if byte < leaf.len() {
            leaf[byte] ^= mask;
        } else if byte - leaf.len() < 32 * p.siblings.len() {
            let s = byte - leaf.len();
            p.siblings[s / 32][s % 32] ^= mask;
        } else {
            r[byte - leaf.len() - 32 * p.siblings.len()] ^= mask;
        }
        prop_assert!(!p.verify(&r, &leaf));

        // Another index fails too. (The leaf count is not bound by the
        // proof; it must be authenticated with the root.)
        let mut q = proof.clone();
        q.index = (q.index + 1) % q.leaf_count;
        prop_assert!(leaves.len() == 1 || !q.verify(&root, &leaves[i]));
    }

    #[test]
    fn aead_round_trips_and_rejects_tampering(
        key in any::<[u8; 32]>(),
        other in any::<[u8; 32]>(),
        seed in any::<u64>(),
        aad in vec(any::<u8>(), 0..40),
        pt in vec(any::<u8>(), 0..200),
        flip in any::<prop::sample::Index>(),
    ) {
        prop_assume!(key != other);
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let a = Aes256GcmSiv::new(&Key::from_bytes(key));
        let ct = a.seal(&mut rng, &aad, &pt).unwrap();
        prop_assert_eq!(ct.len(), pt.len() + Aes256GcmSiv::OVERHEAD);
        prop_assert_eq!(a.open(&aad, &ct).unwrap(), pt.clone());

        let mut bad = ct.clone();
        let bit = flip.index(8 * bad.len());
        bad[bit / 8] ^= 1 << (bit % 8);
        prop_assert_eq!(a.open(&aad, &bad), Err(Error::Decryption));

        let b = Aes256GcmSiv::new(&Key::from_bytes(other));
        prop_assert_eq!(b.open(&aad, &ct), Err(Error::Decryption));

        let mut wrong_aad = aad.clone();
        wrong_aad.push(0);
        prop_assert_eq!(a.open(&wrong_aad, &ct), Err(Error::Decryption));
        prop_assert_eq!(a.open(&aad, &ct[..ct.len() - 1]), Err(Error::Decryption));

        // Fresh nonces: sealing twice gives different ciphertexts.
        prop_assert_ne!(a.seal(&mut rng, &aad, &pt).unwrap(), ct);
    }
}

#[test]
fn ggm_cover_sizes_match_the_formula() {
    let d = 6u8;
    let tree = GgmTree::new(Key::from_bytes([1; 16]), d).unwrap();
    // No revocation: the root alone; everything revoked: nothing.
    assert_eq!(tree.cover(&[]).unwrap().len(), 1);
    let all: Vec<u64> = (0..64).collect();
    assert!(tree.cover(&all).unwrap().is_empty());
    // One revoked leaf: its d co-path siblings.
    for leaf in [0u64, 17, 63] {
        assert_eq!(tree.cover(&[leaf]).unwrap().len(), usize::from(d));
    }
    // An aligned block of 2^j revoked leaves: d - j nodes.
    for j in 0..=d {
        let block: Vec<u64> = (0..1u64 << j)
            .map(|i| i + (1 << j))
            .filter(|&i| i < 64)
            .collect();
        if block.len() == 1 << j {
            assert_eq!(tree.cover(&block).unwrap().len(), usize::from(d - j));
        }
    }
    // Every other leaf revoked: each kept leaf alone, 2^(d-1) nodes.
    let evens: Vec<u64> = (0..64).step_by(2).collect();
    assert_eq!(tree.cover(&evens).unwrap().len(), 32);
    // Two revoked leaves in different halves: 2(d - 1) nodes.
    assert_eq!(
        tree.cover(&[0, 63]).unwrap().len(),
        2 * (usize::from(d) - 1)
    );
}

#[test]
fn key_holding_types_print_redacted() {
    use sesame_crypto::{Aes128Prf, AesCtrPrg, HmacPrf, KeyedHash};
    let k16 = Key::<16>::from_bytes([0xaa; 16]);
    let k32 = Key::<32>::from_bytes([0xaa; 32]);
    let tree = GgmTree::new(k16.clone_secret(), 3).unwrap();
    let printed = [
        format!("{k16:?}"),
        format!("{k32:?}"),
        format!("{:?}", Aes128Prf::new(&k16)),
        format!("{:?}", HmacPrf::new(&k32)),
        format!("{:?}", AesCtrPrg::new(&k16)),
        format!("{:?}", KnuthPrp::new(&k16, 8).unwrap()),
        format!("{:?}", FeistelPrp::new(&k16, 8).unwrap()),
        format!("{:?}", Aes256GcmSiv::new(&k32)),
        format!("{:?}", KeyedHash::new(&k32)),
        format!("{:?}", BloomKey::new(&k32)),
        format!("{tree:?}"),
        format!("{:?}", tree.root()),
        format!("{:?}", tree.puncture(&[1]).unwrap()),
    ];
    assert_eq!(printed[0], "[redacted]");
    for p in &printed {
        assert!(p.contains("[redacted]"), "{p}");
        assert!(
            !p.to_lowercase().contains("aa, aa") && !p.contains("170"),
            "{p}"
        );
    }
}

/// Every key-holding type says it wipes itself on drop. The marker alone
/// proves nothing: what each `Drop` runs is checked in the unit tests of
/// the types that hold secret bytes themselves (`wipe_zeroes_*` in
/// `key.rs`, `prf/hmac_prf.rs`, `prg.rs`, `prp/knuth.rs`, `ue.rs`,
/// `pke.rs`); the others hold only those types, or AES key schedules that
/// `aes` and `ctr` wipe (built with their `zeroize` feature). Reading
/// freed memory would need `unsafe`, which the workspace forbids.
#[test]
fn key_holding_types_zeroize_on_drop() {
    use sesame_crypto::{Aes128Prf, AesCtrPrg, GgmNode, HmacPrf, KeyedHash};
    use zeroize::ZeroizeOnDrop;
    fn wiped<T: ZeroizeOnDrop>() {}
    wiped::<Key<16>>();
    wiped::<Key<32>>();
    wiped::<Aes128Prf>();
    wiped::<HmacPrf>();
    wiped::<AesCtrPrg>();
    wiped::<KnuthPrp>();
    wiped::<FeistelPrp>();
    wiped::<Aes256GcmSiv>();
    wiped::<KeyedHash>();
    wiped::<BloomKey>();
    wiped::<GgmTree>();
    wiped::<GgmNode>();
}
