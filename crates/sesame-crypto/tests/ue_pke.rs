//! Updatable encryption and ECIES: round trips, re-encryption chains, the
//! encoding's success rate, tamper detection and counting.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sesame_crypto::counter;
use sesame_crypto::pke::{EciesPublicKey, EciesSecretKey, OVERHEAD};
use sesame_crypto::ue::{self, Ciphertext, UeKey, UpdateToken, MAX_TRIES, PAYLOAD_LEN};
use sesame_crypto::{Error, Primitive};

fn payload(rng: &mut ChaCha20Rng) -> [u8; PAYLOAD_LEN] {
    let mut p = [0u8; PAYLOAD_LEN];
    rng.fill_bytes(&mut p);
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn any_payload_round_trips_through_a_chain_of_re_encryptions(
        m in prop::array::uniform30(any::<u8>()),
        seed in any::<u64>(),
        steps in 0usize..5,
    ) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let mut k = UeKey::generate(&mut rng);
        let mut c = k.encrypt(&m).unwrap();
        prop_assert_eq!(k.decrypt(&c).unwrap(), m);
        for _ in 0..steps {
            let next = UeKey::generate(&mut rng);
            let token = k.update_token(&next);
            // Tokens survive their encoding.
            let token = UpdateToken::from_bytes(&token.to_bytes()).unwrap();
            c = token.re_encrypt(&c).unwrap();
            k = next;
            prop_assert_eq!(k.decrypt(&c).unwrap(), m);
        }
        // Re-encryption lands exactly on a fresh encryption under the new key.
        prop_assert_eq!(c, k.encrypt(&m).unwrap());
        let k2 = UeKey::from_bytes(&k.to_secret_bytes()).unwrap();
        prop_assert_eq!(k2.decrypt(&c).unwrap(), m);
    }
}

#[test]
fn edge_payloads_encode() {
    for m in [[0u8; PAYLOAD_LEN], [0xff; PAYLOAD_LEN], {
        let mut m = [0u8; PAYLOAD_LEN];
        m[PAYLOAD_LEN - 1] = 0x80;
        m
    }] {
        let (p, tries) = ue::encode_vartime(&m).unwrap();
        assert!((1..=MAX_TRIES).contains(&tries));
        assert_eq!(ue::decode(&p).unwrap(), m);
    }
}

/// The encoding's per-candidate success rate is about 1/4 (the argument in
/// the module documentation); the number of tries is geometric. With 2,000
/// random payloads the mean stays well inside [3, 5.4] and no payload needs
/// more than 60 tries (probability (3/4)^60 ~ 3e-8 per payload).
#[test]
fn encoding_needs_about_four_tries() {
    let mut rng = ChaCha20Rng::seed_from_u64(2024);
    let n = 2_000u32;
    let mut total = 0u64;
    let mut worst = 0u32;
    for _ in 0..n {
        let m = payload(&mut rng);
        let (_, tries) = ue::encode_vartime(&m).unwrap();
        total += u64::from(tries);
        worst = worst.max(tries);
    }
    let mean = total as f64 / f64::from(n);
    let success = 1.0 / mean;
    assert!((3.0..5.4).contains(&mean), "mean tries {mean}");
    assert!(worst <= 60, "worst {worst}");
    eprintln!(
        "UE encoding: mean {mean:.3} tries, success rate per candidate {success:.4}, worst {worst}"
    );
}

#[test]
fn wrong_keys_and_foreign_points_are_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let k = UeKey::generate(&mut rng);
    let other = UeKey::generate(&mut rng);
    let m = payload(&mut rng);
    let c = k.encrypt(&m).unwrap();
    // Another key decodes to garbage or fails; never to the payload.
    assert_ne!(other.decrypt(&c).ok(), Some(m));
    // Random bytes: mostly not points; those that are decode to garbage.
    let mut refused = 0;
    for _ in 0..200 {
        let mut b = [0u8; 32];
        rng.fill_bytes(&mut b);
        match k.decrypt(&Ciphertext::from_bytes(b)) {
            Err(Error::Decryption) => refused += 1,
            Err(e) => panic!("unexpected error {e}"),
            Ok(p) => assert_ne!(p, m),
        }
    }
    assert!(refused > 100);
    let bad = Ciphertext::from_bytes([0xff; 32]);
    assert!(k.update_token(&other).re_encrypt(&bad).is_err());
}

#[test]
fn ue_calls_are_counted_as_group_exponentiations() {
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let k = UeKey::generate(&mut rng);
    let k2 = UeKey::generate(&mut rng);
    let m = payload(&mut rng);
    let (c2, calls) = counter::measure(|| {
        let c = k.encrypt(&m).unwrap();
        let c2 = k.update_token(&k2).re_encrypt(&c).unwrap();
        k2.decrypt(&c2).unwrap();
        c2
    });
    assert_eq!(calls.pure(Primitive::GroupExp), 3);
    assert_eq!(k2.decrypt(&c2).unwrap(), m);
}

#[test]
fn ecies_round_trips_and_detects_tampering() {
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let sk = EciesSecretKey::generate(&mut rng);
    let pk = EciesPublicKey::from_bytes(&sk.public_key().to_bytes()).unwrap();
    for len in [0usize, 1, 32, 100] {
        let mut msg = vec![0u8; len];
        rng.fill_bytes(&mut msg);
        let c = pk.encrypt(&mut rng, b"index-7", &msg).unwrap();
        assert_eq!(c.len(), len + OVERHEAD);
        assert_eq!(sk.decrypt(b"index-7", &c).unwrap(), msg);
        // Two encryptions of one message differ (fresh ephemeral key).
        assert_ne!(c, pk.encrypt(&mut rng, b"index-7", &msg).unwrap());
        for i in (0..c.len()).step_by(7) {
            let mut bad = c.clone();
            bad[i] ^= 1;
            assert_eq!(sk.decrypt(b"index-7", &bad), Err(Error::Decryption));
        }
        assert_eq!(sk.decrypt(b"index-8", &c), Err(Error::Decryption));
        let mut longer = c.clone();
        longer.push(0);
        assert_eq!(sk.decrypt(b"index-7", &longer), Err(Error::Decryption));
    }
    let other = EciesSecretKey::generate(&mut rng);
    let c = pk.encrypt(&mut rng, b"", b"secret").unwrap();
    assert_eq!(other.decrypt(b"", &c), Err(Error::Decryption));
    let restored = EciesSecretKey::from_bytes(&sk.to_secret_bytes()).unwrap();
    assert_eq!(restored.decrypt(b"", &c).unwrap(), b"secret");
    assert!(EciesSecretKey::from_bytes(&[0; 32]).is_err());
}

#[test]
fn ecies_is_counted_as_one_pke_call() {
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let sk = EciesSecretKey::generate(&mut rng);
    let pk = sk.public_key();
    let (c, enc) = counter::measure(|| pk.encrypt(&mut rng, b"", b"m").unwrap());
    assert_eq!(enc.pure(Primitive::Pke), 1);
    assert_eq!(enc.pure(Primitive::GroupExp), 0);
    assert_eq!(enc.total(Primitive::GroupExp), 2);
    assert_eq!(enc.total(Primitive::Ske), 1);
    let (_, dec) = counter::measure(|| sk.decrypt(b"", &c).unwrap());
    assert_eq!(dec.pure(Primitive::Pke), 1);
    assert_eq!(dec.total(Primitive::GroupExp), 1);
}

/// Seeded vectors: a refactor must not change a ciphertext.
#[test]
fn seeded_ue_vector() {
    let k = UeKey::from_bytes(&[7; 32]).unwrap();
    let m: [u8; PAYLOAD_LEN] = core::array::from_fn(|i| i as u8);
    let c = k.encrypt(&m).unwrap();
    let again = UeKey::from_bytes(&[7; 32]).unwrap().encrypt(&m).unwrap();
    assert_eq!(c, again);
    assert_eq!(k.decrypt(&c).unwrap(), m);
    assert_eq!(
        hex::encode(c.to_bytes()),
        "1e91f7a7cd45ba6c005141da8a726d40060ec0cedf084a4b6cc2bb262817d845"
    );
}
