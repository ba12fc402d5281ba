//! Seed 000's dynamic schemes (FAST, UEDSSE, SIMPLE) beyond the generic
//! suite: wire round trips, deletion semantics, idempotent update
//! requests, server-side refresh of ciphertexts, hostile requests and
//! responses, and seeded vectors of the wire and storage formats
//! (`tests/vectors/seed000_dynamic.json`; regenerate with
//! `SESAME_WRITE_VECTORS=1`).

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{wire, Channel, Error, LocalChannel, Meter, Params, Service, Store};
use sesame_crypto::pke::EciesSecretKey;
use sesame_sse::uedsse::{UeKey, UedsseClient};
use sesame_sse::{fast, simple, uedsse, DocId, KeywordClient, KeywordScheme, Multimap, UpdateOp};
use sesame_store::MemoryStore;

const DYNAMIC: [&str; 3] = ["fast", "uedsse", "simple"];

fn scheme(name: &str) -> KeywordScheme {
    sesame_sse::scheme(name).unwrap()
}

/// A fresh client, its in-process channel, the server's store and the RNG.
type Opened = (
    Box<dyn KeywordClient>,
    LocalChannel<Box<dyn Service>>,
    Arc<MemoryStore>,
    ChaCha20Rng,
);

fn open(name: &str, seed: u64) -> Opened {
    let s = scheme(name);
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let client = (s.new_client)(&mut rng, &Params::new()).unwrap();
    let store = Arc::new(MemoryStore::new());
    let ch = support::channel(&s, store.clone());
    (client, ch, store, rng)
}

fn round_trips<T>(value: &T) -> Result<(), TestCaseError>
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let bytes = wire::encode(value).unwrap();
    prop_assert_eq!(&wire::decode::<T>(&bytes).unwrap(), value);
    for cut in 1..bytes.len().min(6) {
        prop_assert!(wire::decode::<T>(&bytes[..bytes.len() - cut]).is_err());
    }
    Ok(())
}

fn arr<const N: usize>() -> impl Strategy<Value = [u8; N]> {
    prop::collection::vec(any::<u8>(), N).prop_map(|v| v.try_into().unwrap())
}

fn ue_entries() -> impl Strategy<Value = Vec<uedsse::Entry>> {
    prop::collection::vec((arr::<32>(), arr::<17>(), arr::<32>()), 0..5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn fast_messages_round_trip(
        reset in any::<bool>(),
        entries in prop::collection::vec((arr::<32>(), arr::<25>()), 0..5),
        tw in arr::<16>(), st in arr::<16>(),
        ids in prop::collection::vec(any::<u64>(), 0..20),
    ) {
        let short: Vec<fast::ShortEntry> = entries
            .iter()
            .map(|(l, v)| (l[..16].try_into().unwrap(), *v))
            .collect();
        round_trips(&fast::Request::Put { reset, entries })?;
        round_trips(&fast::Request::Search { tw, st })?;
        round_trips(&fast::Request::PutShort { reset, entries: short })?;
        round_trips(&fast::Request::SearchShort { tw, st })?;
        round_trips(&fast::Response::Stored)?;
        round_trips(&fast::Response::Ids(ids))?;
    }

    #[test]
    fn uedsse_and_simple_messages_round_trip(
        reset in any::<bool>(),
        entries in ue_entries(),
        tw in arr::<16>(), st in arr::<16>(), delta in arr::<32>(),
        emask in arr::<32>(),
        eids in prop::collection::vec(arr::<32>(), 0..10),
        pk in arr::<32>(),
    ) {
        round_trips(&uedsse::Request::Put { reset, entries: entries.clone() })?;
        round_trips(&uedsse::Request::PublicKey)?;
        round_trips(&uedsse::Request::Search { tw, st, delta, emask })?;
        round_trips(&uedsse::Response::Stored)?;
        round_trips(&uedsse::Response::PublicKey(pk))?;
        round_trips(&uedsse::Response::Eids(eids.clone()))?;
        round_trips(&simple::Request::Put { reset, entries: entries.clone() })?;
        round_trips(&simple::Request::Fetch { tw, st })?;
        round_trips(&simple::Request::Refresh { tw, st, entries })?;
        round_trips(&simple::Response::Stored)?;
        round_trips(&simple::Response::Eids(eids))?;
    }
}

fn apply(
    c: &mut dyn KeywordClient,
    ch: &mut dyn Channel,
    rng: &mut ChaCha20Rng,
    ops: &[(UpdateOp, DocId)],
) {
    for &(op, id) in ops {
        c.update(rng, ch, op, id, &[b"w".to_vec()]).unwrap();
    }
}

#[test]
fn deletions_follow_set_semantics() {
    use UpdateOp::{Add, Delete};
    type Case<'a> = (&'a [(UpdateOp, DocId)], &'a [DocId]);
    let cases: &[Case] = &[
        (&[(Add, 1), (Add, 1), (Delete, 1)], &[]),
        (&[(Add, 1), (Delete, 1), (Add, 1)], &[1]),
        (&[(Delete, 1), (Add, 1)], &[1]),
        (&[(Add, 1), (Delete, 2), (Add, 2), (Delete, 1)], &[2]),
        (&[(Delete, 3)], &[]),
    ];
    for name in DYNAMIC {
        for (ops, want) in cases {
            let (mut c, mut ch, _, mut rng) = open(name, 1);
            apply(c.as_mut(), &mut ch, &mut rng, ops);
            assert_eq!(
                &c.search(&mut rng, &mut ch, b"w").unwrap(),
                want,
                "{name} {ops:?}"
            );
            // Searching refreshes (UEDSSE, SIMPLE) without changing answers,
            // and updates after a search still cancel earlier additions.
            assert_eq!(&c.search(&mut rng, &mut ch, b"w").unwrap(), want, "{name}");
            c.update(&mut rng, &mut ch, Delete, 1, &[b"w".to_vec()])
                .unwrap();
            let mut after: Vec<DocId> = want.iter().copied().filter(|&i| i != 1).collect();
            after.sort_unstable();
            assert_eq!(c.search(&mut rng, &mut ch, b"w").unwrap(), after, "{name}");
        }
    }
}

#[test]
fn update_requests_are_idempotent_and_state_survives_restore() {
    for name in DYNAMIC {
        let (mut c, mut ch, _, mut rng) = open(name, 2);
        c.setup(&mut rng, &mut ch, &Multimap::new()).unwrap();
        let kw = [b"a".to_vec(), b"b".to_vec()];
        let reqs = c
            .prepare_update(&mut rng, UpdateOp::Add, 5, &kw)
            .unwrap()
            .unwrap();
        assert_eq!(reqs.len(), 1, "{name}: one round per update");
        for _ in 0..3 {
            for r in &reqs {
                c.check_update_response(&ch.call(r).unwrap()).unwrap();
            }
        }
        let reqs = c
            .prepare_update(&mut rng, UpdateOp::Delete, 5, &kw[..1])
            .unwrap()
            .unwrap();
        for _ in 0..2 {
            for r in &reqs {
                c.check_update_response(&ch.call(r).unwrap()).unwrap();
            }
        }
        let mut again = (scheme(name).restore_client)(&c.save_state().unwrap()).unwrap();
        assert_eq!(again.save_state().unwrap(), c.save_state().unwrap());
        assert!(
            again.search(&mut rng, &mut ch, b"a").unwrap().is_empty(),
            "{name}"
        );
        assert_eq!(
            again.search(&mut rng, &mut ch, b"b").unwrap(),
            [5],
            "{name}"
        );
        // Garbage and wrong-kind answers to updates are errors.
        assert!(c.check_update_response(b"junk").is_err());
        assert!(c.check_update_response(&[]).is_err());
        assert!(c
            .prepare_update(&mut rng, UpdateOp::Add, u64::MAX, &kw)
            .is_err());
    }
}

/// Every stored `u ‖ eid` value of the index.
fn stored(store: &MemoryStore) -> Vec<(Vec<u8>, Vec<u8>)> {
    store.scan_prefix(b"e").unwrap()
}

#[test]
fn uedsse_refreshes_stored_and_returned_ciphertexts_on_the_server() {
    let (mut c, mut ch, store, mut rng) = open("uedsse", 3);
    let mut db = Multimap::new();
    db.insert(b"w".to_vec(), (0..20).collect());
    db.insert(b"v".to_vec(), vec![1, 2]);
    c.setup(&mut rng, &mut ch, &db).unwrap();
    c.update(&mut rng, &mut ch, UpdateOp::Delete, 3, &[b"w".to_vec()])
        .unwrap();
    let before = stored(&store);
    ch.record_transcript();
    let span = ch.meter().span();
    let ids = c.search(&mut rng, &mut ch, b"w").unwrap();
    let snap = span.finish();
    assert_eq!(ids.len(), 19);
    assert_eq!(snap.rounds, 1);
    // 19 re-encryptions on the server, 19 decryptions on the client, one
    // ECIES each side.
    use sesame_crypto::Primitive;
    assert_eq!(snap.server_primitives.total(Primitive::GroupExp), 19 + 1);
    assert_eq!(snap.server_primitives.pure(Primitive::Pke), 1);
    assert_eq!(snap.client_primitives.pure(Primitive::GroupExp), 19);
    assert_eq!(snap.client_primitives.pure(Primitive::Pke), 1);
    let after = stored(&store);
    assert_eq!(before.len(), after.len());
    let changed = before
        .iter()
        .zip(&after)
        .filter(|(a, b)| a.0 == b.0 && a.1 != b.1)
        .count();
    // The 19 live additions changed; the deletion, the cancelled addition
    // and the other keyword's entries did not.
    assert_eq!(changed, 19);
    // The request carries nothing in the clear that repeats across
    // searches: masked token and a fresh ECIES ciphertext.
    let t1 = ch.take_transcript();
    ch.record_transcript();
    assert_eq!(c.search(&mut rng, &mut ch, b"w").unwrap(), ids);
    let t2 = ch.take_transcript();
    assert_ne!(t1[0].request, t2[0].request);
    assert_eq!(t1[0].request.len(), t2[0].request.len());
}

#[test]
fn uedsse_tampered_or_foreign_results_are_crypto_errors() {
    let (mut c, mut ch, _, mut rng) = open("uedsse", 4);
    let mut db = Multimap::new();
    db.insert(b"w".to_vec(), vec![1, 2, 3]);
    db.insert(b"v".to_vec(), vec![1]);
    c.setup(&mut rng, &mut ch, &db).unwrap();

    /// Replaces the response by `Eids` of a fixed list.
    struct Forge<'a, C> {
        inner: &'a mut C,
        eids: Vec<[u8; 32]>,
    }
    impl<C: Channel> Channel for Forge<'_, C> {
        fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
            let _ = self.inner.call(request)?;
            wire::encode(&uedsse::Response::Eids(self.eids.clone()))
        }
        fn meter(&self) -> &Meter {
            self.inner.meter()
        }
    }
    // Random points, the identity and non-points: all refused.
    let k = UeKey::generate(&mut rng);
    let foreign = k.encrypt(&[9; 30]).unwrap().to_bytes();
    for eids in [vec![foreign], vec![[0u8; 32]], vec![[0xff; 32]]] {
        let mut bad = Forge {
            inner: &mut ch,
            eids,
        };
        assert!(matches!(
            c.search(&mut rng, &mut bad, b"w"),
            Err(Error::Crypto)
        ));
    }
    // A wrong kind of response is a protocol error.
    struct Stored<'a, C>(&'a mut C);
    impl<C: Channel> Channel for Stored<'_, C> {
        fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
            let _ = self.0.call(request)?;
            wire::encode(&uedsse::Response::Stored)
        }
        fn meter(&self) -> &Meter {
            self.0.meter()
        }
    }
    assert!(matches!(
        c.search(&mut rng, &mut Stored(&mut ch), b"v"),
        Err(Error::UnexpectedResponse {
            scheme: "UEDSSE",
            ..
        })
    ));
}

#[test]
fn hostile_requests_are_server_errors_not_panics() {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut server = scheme("uedsse")
        .server(store.clone(), &sesame_core::Params::new())
        .unwrap();
    let pk = match wire::decode(
        &server
            .handle(&wire::encode(&uedsse::Request::PublicKey).unwrap())
            .unwrap(),
    )
    .unwrap()
    {
        uedsse::Response::PublicKey(pk) => pk,
        other => panic!("{other:?}"),
    };
    // The key pair is kept in the store: a new server half finds it.
    let mut again = scheme("uedsse")
        .server(store.clone(), &sesame_core::Params::new())
        .unwrap();
    let pk2 = again
        .handle(&wire::encode(&uedsse::Request::PublicKey).unwrap())
        .unwrap();
    assert_eq!(
        wire::decode::<uedsse::Response>(&pk2).unwrap(),
        uedsse::Response::PublicKey(pk)
    );
    // An encapsulation that is not a point, or is the identity, is
    // refused; another point unmasks to garbage, which finds nothing or
    // is refused, never panics.
    let pk = sesame_crypto::pke::EciesPublicKey::from_bytes(&pk).unwrap();
    for emask in [[0xffu8; 32], [0u8; 32]] {
        let r = uedsse::Request::Search {
            tw: [1; 16],
            st: [2; 16],
            delta: [3; 32],
            emask,
        };
        assert!(server.handle(&wire::encode(&r).unwrap()).is_err());
    }
    for _ in 0..8 {
        let (emask, _) = pk.encapsulate(&mut rng);
        let r = uedsse::Request::Search {
            tw: [1; 16],
            st: [2; 16],
            delta: [3; 32],
            emask,
        };
        if let Ok(bytes) = server.handle(&wire::encode(&r).unwrap()) {
            assert_eq!(
                wire::decode::<uedsse::Response>(&bytes).unwrap(),
                uedsse::Response::Eids(Vec::new())
            );
        }
    }
    // A chain that loops back on itself is refused, not walked forever.
    let (tw, st) = ([7u8; 16], [8u8; 16]);
    let mut u = [0u8; 17];
    u[..16].copy_from_slice(&st);
    let h2 = sesame_crypto::hash::sha256(&[&[2u8][..], &tw, &st].concat());
    for (x, p) in u.iter_mut().zip(h2) {
        *x ^= p;
    }
    let label = sesame_crypto::hash::sha256(&[&[1u8][..], &tw, &st].concat());
    let put = uedsse::Request::Put {
        reset: false,
        entries: vec![(label, u, [0; 32])],
    };
    server.handle(&wire::encode(&put).unwrap()).unwrap();
    let mut simple_server = scheme("simple")
        .server(store.clone(), &sesame_core::Params::new())
        .unwrap();
    let fetch = simple::Request::Fetch { tw, st };
    assert!(simple_server
        .handle(&wire::encode(&fetch).unwrap())
        .is_err());
    // Corrupt stored values are errors too.
    store.put(&[&b"e"[..], &label].concat(), b"short").unwrap();
    assert!(simple_server
        .handle(&wire::encode(&fetch).unwrap())
        .is_err());
    let fast_store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut fast_server = scheme("fast")
        .server(fast_store.clone(), &sesame_core::Params::new())
        .unwrap();
    let flabel = sesame_crypto::hash::sha256(&[&[1u8][..], &tw, &st].concat());
    fast_store
        .put(&[&b"e"[..], &flabel].concat(), b"short")
        .unwrap();
    let search = fast::Request::Search { tw, st };
    assert!(fast_server.handle(&wire::encode(&search).unwrap()).is_err());
    // Unknown requests.
    for s in [&mut server, &mut simple_server, &mut fast_server] {
        assert!(s.handle(b"\x01\x09").is_err());
        assert!(s.handle(b"").is_err());
    }
}

#[test]
fn simple_refresh_replaces_the_chain_and_drops_deletions() {
    let (mut c, mut ch, store, mut rng) = open("simple", 6);
    let mut db = Multimap::new();
    db.insert(b"w".to_vec(), (0..10).collect());
    c.setup(&mut rng, &mut ch, &db).unwrap();
    for id in 0..4 {
        c.update(&mut rng, &mut ch, UpdateOp::Delete, id, &[b"w".to_vec()])
            .unwrap();
    }
    assert_eq!(stored(&store).len(), 14);
    let before = stored(&store);
    let span = ch.meter().span();
    assert_eq!(
        c.search(&mut rng, &mut ch, b"w").unwrap(),
        (4..10).collect::<Vec<_>>()
    );
    assert_eq!(span.finish().rounds, 2);
    let after = stored(&store);
    assert_eq!(after.len(), 6);
    // Fresh labels and fresh ciphertexts.
    assert!(after
        .iter()
        .all(|a| !before.iter().any(|b| b.0 == a.0 || b.1[17..] == a.1[17..])));
    // A keyword whose results are all deleted leaves nothing behind.
    for id in 4..10 {
        c.update(&mut rng, &mut ch, UpdateOp::Delete, id, &[b"w".to_vec()])
            .unwrap();
    }
    assert!(c.search(&mut rng, &mut ch, b"w").unwrap().is_empty());
    assert!(stored(&store).is_empty());
    assert!(c.search(&mut rng, &mut ch, b"w").unwrap().is_empty());
}

#[test]
fn uedsse_fetches_the_public_key_when_setup_was_skipped() {
    let (mut c, mut ch, _, mut rng) = open("uedsse", 7);
    c.update(&mut rng, &mut ch, UpdateOp::Add, 9, &[b"w".to_vec()])
        .unwrap();
    let span = ch.meter().span();
    assert_eq!(c.search(&mut rng, &mut ch, b"w").unwrap(), [9]);
    assert_eq!(span.finish().rounds, 2);
    let span = ch.meter().span();
    let mut restored = (scheme("uedsse").restore_client)(&c.save_state().unwrap()).unwrap();
    assert_eq!(restored.search(&mut rng, &mut ch, b"w").unwrap(), [9]);
    assert_eq!(
        span.finish().rounds,
        1,
        "the public key is in the saved state"
    );
}

// ---- seeded vectors ----

/// A fixed canonical scalar (below the group order 2^252 + ...).
fn fixed_scalar(byte: u8) -> [u8; 32] {
    let mut b = [byte; 32];
    b[31] = 0x01;
    b
}

const VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/vectors/seed000_dynamic.json"
);

/// Runs a fixed workload with seeded randomness (and, for UEDSSE, a fixed
/// server key placed in the store) and records every request, the final
/// client state and the final store.
fn transcript(name: &str) -> serde_json::Value {
    let s = scheme(name);
    let mut rng = ChaCha20Rng::seed_from_u64(0x5e5a_0000);
    let mut client = (s.new_client)(&mut rng, &Params::new()).unwrap();
    let store = Arc::new(MemoryStore::new());
    if name == "uedsse" {
        let sk = EciesSecretKey::from_bytes(&fixed_scalar(0x11)).unwrap();
        store.put(b"k", &sk.to_secret_bytes()).unwrap();
    }
    let mut ch = support::channel(&s, store.clone());
    ch.record_transcript();
    let mut db = Multimap::new();
    db.insert(b"alpha".to_vec(), vec![1, 2]);
    db.insert(b"beta".to_vec(), vec![2]);
    client.setup(&mut rng, &mut ch, &db).unwrap();
    client
        .update(
            &mut rng,
            &mut ch,
            UpdateOp::Add,
            3,
            &[b"alpha".to_vec(), b"gamma".to_vec()],
        )
        .unwrap();
    client
        .update(&mut rng, &mut ch, UpdateOp::Delete, 1, &[b"alpha".to_vec()])
        .unwrap();
    assert_eq!(client.search(&mut rng, &mut ch, b"alpha").unwrap(), [2, 3]);
    assert_eq!(client.search(&mut rng, &mut ch, b"beta").unwrap(), [2]);
    let requests: Vec<String> = ch
        .take_transcript()
        .iter()
        .map(|o| hex::encode(&o.request))
        .collect();
    let store: Vec<[String; 2]> = store
        .scan_prefix(b"")
        .unwrap()
        .into_iter()
        .map(|(k, v)| [hex::encode(k), hex::encode(v)])
        .collect();
    serde_json::json!({
        "requests": requests,
        "client_state": hex::encode(client.save_state().unwrap()),
        "store": store,
    })
}

fn transcripts() -> serde_json::Value {
    let mut got = serde_json::Map::new();
    for name in DYNAMIC {
        got.insert(name.to_owned(), transcript(name));
    }
    serde_json::Value::Object(got)
}

/// Writes the vector file anew. Never part of a test run: run it by name
/// (`cargo test -p sesame-sse --test dynamic_schemes -- --ignored
/// write_seeded_vectors`) after a deliberate format change, and say in the
/// scheme's page why the format changed.
#[test]
#[ignore = "writes the vector file; run by name after a deliberate format change"]
fn write_seeded_vectors() {
    let text = serde_json::to_string_pretty(&transcripts()).unwrap();
    std::fs::write(VECTORS, text + "\n").unwrap();
}

#[test]
fn seeded_vectors_of_wire_and_storage_formats() {
    let got = transcripts();
    let want: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(VECTORS).unwrap()).unwrap();
    for name in DYNAMIC {
        assert_eq!(
            got[name], want[name],
            "{name}: wire or storage format changed"
        );
    }
}

#[test]
fn uedsse_search_request_has_the_papers_shape() {
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let mut c = UedsseClient::new(&mut rng, &Params::new()).unwrap();
    let sk = EciesSecretKey::from_bytes(&fixed_scalar(0x22)).unwrap();
    let reqs = c
        .prepare_update(&mut rng, UpdateOp::Add, 1, &[b"w".to_vec()])
        .unwrap()
        .unwrap();
    assert_eq!(reqs.len(), 1);
    let next = UeKey::generate(&mut rng);
    let r = c
        .search_request(&mut rng, &sk.public_key(), b"w", &next)
        .unwrap()
        .unwrap();
    let uedsse::Request::Search { tw, emask, .. } = &r else {
        panic!("{r:?}")
    };
    // Version byte, variant tag, masked t_w (16), st_c (16), Δ (32) and
    // the mask's 32-byte encapsulation.
    assert_eq!(wire::encode(&r).unwrap().len(), 2 + 16 + 16 + 32 + 32);
    // Only the server's key recovers the mask.
    let mask = sk.decapsulate(emask).unwrap();
    let other = EciesSecretKey::from_bytes(&fixed_scalar(0x33)).unwrap();
    assert_ne!(*other.decapsulate(emask).unwrap(), *mask);
    assert_ne!(tw, &[0u8; 16]);
    assert!(c
        .search_request(&mut rng, &sk.public_key(), b"absent", &next)
        .unwrap()
        .is_none());
}

/// FAST with `labels=16`: the same answers as with whole labels, each
/// entry stored under a 17-byte key (`e` and the label) instead of 33, the
/// form kept across a save and restore (and a state of whole labels
/// restores as one), and a damaged or truncated entry refused by the
/// server instead of followed.
#[test]
fn fast_with_short_labels_answers_the_same_in_fewer_bytes() {
    use UpdateOp::{Add, Delete};
    let s = scheme("fast");
    let mut answers = Vec::new();
    let mut key_lengths = Vec::new();
    for labels in ["32", "16"] {
        let mut rng = ChaCha20Rng::seed_from_u64(21);
        let mut params = Params::new();
        params.set("labels", labels);
        let mut c = (s.new_client)(&mut rng, &params).unwrap();
        let store = Arc::new(MemoryStore::new());
        let mut ch = support::channel(&s, store.clone());
        let mut db = Multimap::new();
        db.insert(b"w".to_vec(), (0..6).collect());
        db.insert(b"v".to_vec(), vec![2, 3]);
        c.setup(&mut rng, &mut ch, &db).unwrap();
        c.update(
            &mut rng,
            &mut ch,
            Delete,
            2,
            &[b"w".to_vec(), b"v".to_vec()],
        )
        .unwrap();
        c.update(&mut rng, &mut ch, Add, 9, &[b"v".to_vec()])
            .unwrap();
        // A restored client writes and searches in the same form.
        let saved = c.save_state().unwrap();
        let mut c = (s.restore_client)(&saved).unwrap();
        c.update(&mut rng, &mut ch, Add, 7, &[b"w".to_vec()])
            .unwrap();
        let w = c.search(&mut rng, &mut ch, b"w").unwrap();
        let v = c.search(&mut rng, &mut ch, b"v").unwrap();
        answers.push((w, v));
        let entries = stored(&store);
        assert_eq!(entries.len(), 12, "labels={labels}");
        assert!(entries.iter().all(|(_, v)| v.len() == fast::VALUE_LEN));
        let mut lengths: Vec<usize> = entries.iter().map(|(k, _)| k.len()).collect();
        lengths.dedup();
        key_lengths.push(lengths);
    }
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[1].0, vec![0, 1, 3, 4, 5, 7]);
    assert_eq!(answers[1].1, vec![3, 9]);
    assert_eq!(key_lengths, [vec![1 + fast::LABEL_LEN], vec![1 + 16]]);

    // Only 32 and 16 are label lengths.
    let mut rng = ChaCha20Rng::seed_from_u64(22);
    let mut params = Params::new();
    params.set("labels", "8");
    assert!((s.new_client)(&mut rng, &params).is_err());

    // A state with another label length is refused, not guessed.
    let mut params = Params::new();
    params.set("labels", "16");
    let c = (s.new_client)(&mut rng, &params).unwrap();
    let mut saved = c.save_state().unwrap();
    if let Some(last) = saved.last_mut() {
        *last = 24;
    }
    assert!((s.restore_client)(&saved).is_err());

    // An entry truncated or lengthened by the server is an error of the
    // search, never a panic or a wrong identifier.
    let (tw, st) = ([5u8; 16], [6u8; 16]);
    let label = sesame_crypto::hash::sha256(&[&[1u8][..], &tw, &st].concat());
    for bad in [&b"short"[..], &[0u8; fast::VALUE_LEN + 1][..], &[][..]] {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let mut server = s.server(store.clone(), &Params::new()).unwrap();
        store.put(&[&b"e"[..], &label[..16]].concat(), bad).unwrap();
        let search = fast::Request::SearchShort { tw, st };
        assert!(server.handle(&wire::encode(&search).unwrap()).is_err());
    }
}
