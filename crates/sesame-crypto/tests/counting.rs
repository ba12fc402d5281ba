//! Every primitive call is counted by kind; nested calls count in the total
//! but not in the pure figures (see the crate docs for the rule).

// Test code: a panic is a failed test (clippy.toml allows this only
// inside #[test] functions, not in their helpers).
#![allow(clippy::unwrap_used)]

use sesame_crypto::counter::{measure, Primitive, PrimitiveCounts};
use sesame_crypto::hash::{ro, sha256};
use sesame_crypto::{
    Aes128Prf, Aes256GcmSiv, AesCtrPrg, BloomFilter, BloomKey, FeistelPrp, GgmTree, HmacPrf, Key,
    KeyedHash, KnuthPrp, MerkleTree, Prf, Prp,
};

use Primitive::{Hash, Prf as PrfKind, Prg, Prp as PrpKind, Ske};

/// Asserts the (total, pure) count of each listed kind and that no other
/// kind was counted.
fn assert_counts(c: &PrimitiveCounts, expected: &[(Primitive, u64, u64)]) {
    let mut got: Vec<_> = c.nonzero().collect();
    got.sort();
    let mut want = expected.to_vec();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn prf_calls_and_batches() {
    let prf = Aes128Prf::new(&Key::from_bytes([1; 16]));
    let (_, c) = measure(|| prf.eval(&[0; 16]));
    assert_counts(&c, &[(PrfKind, 1, 1)]);
    let inputs = vec![[0u8; 16]; 1000];
    let mut out = vec![[0u8; 16]; 1000];
    let (_, c) = measure(|| prf.eval_batch(&inputs, &mut out).unwrap());
    assert_counts(&c, &[(PrfKind, 1000, 1000)]);
    let hmac = HmacPrf::new(&Key::from_bytes([1; 32]));
    let (_, c) = measure(|| hmac.eval(b"long input".repeat(100).as_slice()));
    assert_counts(&c, &[(PrfKind, 1, 1)]);
    let master = Key::<32>::from_bytes([2; 32]);
    let (_, c) = measure(|| master.derive::<16>("label"));
    assert_counts(&c, &[(PrfKind, 1, 1)]);
}

#[test]
fn prg_requests_are_pure_and_refills_nested() {
    let mut prg = AesCtrPrg::new(&Key::from_bytes([1; 16]));
    // First request refills the 32-block buffer.
    let (_, c) = measure(|| prg.next_u64());
    assert_counts(&c, &[(Prg, 1, 1), (PrfKind, 32, 0)]);
    // Served from the buffer: no AES call.
    let (_, c) = measure(|| {
        prg.next_bit();
        prg.below(10).unwrap();
    });
    assert_counts(&c, &[(Prg, 2, 2)]);
    // 1 KiB with 17 bytes of the buffer used: 495 bytes from the buffer,
    // 528 (33 blocks) straight into the output, the last byte from a fresh
    // 32-block buffer.
    let mut buf = [0u8; 1024];
    let (_, c) = measure(|| prg.fill_bytes(&mut buf));
    assert_counts(&c, &[(Prg, 1, 1), (PrfKind, 65, 0)]);
}

#[test]
fn prp_calls_with_nested_aes() {
    let key = Key::from_bytes([3; 16]);
    let (knuth, c) = measure(|| KnuthPrp::new(&key, 1000).unwrap());
    // Derivation (pure Prf), one shuffle request, its AES blocks nested.
    assert_eq!(c.pure(PrfKind), 1);
    assert_eq!((c.total(Prg), c.pure(Prg)), (1, 1));
    assert!(c.total(PrfKind) > 1);
    assert_eq!(c.total(PrpKind), 0);
    let (_, c) = measure(|| {
        knuth.permute(5).unwrap();
        knuth.invert(5).unwrap();
    });
    assert_counts(&c, &[(PrpKind, 2, 2)]);

    let feistel = FeistelPrp::new(&key, 1 << 20).unwrap();
    let (_, c) = measure(|| feistel.permute(12345).unwrap());
    // 2^20 is a power of two: no cycle walking, exactly 10 rounds.
    assert_counts(&c, &[(PrpKind, 1, 1), (PrfKind, 10, 0)]);
    let feistel = FeistelPrp::new(&key, 600).unwrap();
    for x in 0..600 {
        let (_, c) = measure(|| feistel.invert(x).unwrap());
        assert_eq!((c.total(PrpKind), c.pure(PrpKind)), (1, 1));
        assert_eq!(c.pure(PrfKind), 0);
        assert_eq!(c.total(PrfKind) % 10, 0);
        assert!(c.total(PrfKind) >= 10);
    }
}

#[test]
fn aead_hash_bloom_merkle() {
    let mut rng = rand::thread_rng();
    let aead = Aes256GcmSiv::new(&Key::from_bytes([4; 32]));
    let (ct, c) = measure(|| aead.seal(&mut rng, b"", b"m").unwrap());
    assert_counts(&c, &[(Ske, 1, 1)]);
    let (_, c) = measure(|| aead.open(b"", &ct).unwrap());
    assert_counts(&c, &[(Ske, 1, 1)]);
    let (_, c) = measure(|| aead.open(b"x", &ct).unwrap_err());
    assert_counts(&c, &[(Ske, 1, 1)]);

    let (_, c) = measure(|| (sha256(b"x"), ro("d", &[b"x"])));
    assert_counts(&c, &[(Hash, 2, 2)]);
    let kh = KeyedHash::new(&Key::from_bytes([5; 32]));
    let (_, c) = measure(|| kh.hash("d", &[b"x"]));
    assert_counts(&c, &[(Hash, 1, 1)]);

    let bk = BloomKey::new(&Key::from_bytes([6; 32]));
    let mut f = BloomFilter::new(1000, 7).unwrap();
    let (_, c) = measure(|| {
        f.insert(&bk, b"a");
        f.contains(&bk, b"a")
    });
    assert_counts(&c, &[(PrfKind, 2, 2)]);

    let leaves: Vec<[u8; 1]> = (0..7).map(|i| [i]).collect();
    let (tree, c) = measure(|| MerkleTree::build(&leaves));
    assert_counts(&c, &[(Hash, 13, 13)]);
    let proof = tree.proof(6).unwrap();
    // Leaf hash plus two siblings (leaf 6 is promoted at the first level).
    let (ok, c) = measure(|| proof.verify(&tree.root(), &[6]));
    assert!(ok);
    assert_counts(&c, &[(Hash, 3, 3)]);
}

#[test]
fn ggm_leaf_and_cover() {
    let tree = GgmTree::new(Key::from_bytes([7; 16]), 10).unwrap();
    let (_, c) = measure(|| tree.leaf(99).unwrap());
    assert_counts(&c, &[(PrfKind, 1, 1), (Prg, 10, 0)]);
    let (cover, c) = measure(|| tree.cover(&[5]).unwrap());
    // One expansion per node on the path to the revoked leaf.
    assert_counts(&c, &[(PrfKind, 1, 1), (Prg, 10, 0)]);
    let node = cover.iter().find(|n| n.covers(1000)).unwrap();
    let (_, c) = measure(|| node.leaf(1000).unwrap());
    let below = u64::from(node.depth() - node.level());
    assert_counts(&c, &[(PrfKind, 1, 1), (Prg, below, 0)]);
}
