//! The B+ tree protocols' sealed records: the unique form (`seal=unique`:
//! no stored nonce, values in the bytes their width needs) against the
//! random one, and client states of earlier builds, which keep the
//! random form and still read what they stored.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::Serialize;
use sesame_core::{wire, Channel, Params, Store};
use sesame_range::bplus_ore;
use sesame_range::record::RecordKey;
use sesame_range::{LocalRange, PageConfig, RangeProtocol};
use sesame_store::MemoryStore;

mod support;

fn lewi_wu() -> RangeProtocol {
    sesame_range::protocol("bplus-lewi-wu").expect("registered")
}

/// A Lewi-Wu B+ tree of 16-bit values and 8-byte payloads in process,
/// its client sealing as `seal` says (the default where `None`).
fn setup(seal: Option<&str>, rng: &mut ChaCha20Rng) -> LocalRange {
    let mut params = Params::new();
    // Leaves sized for the 8-byte identifiers the records carry.
    params.set("bits", 16).set("payload", 8);
    if let Some(seal) = seal {
        params.set("seal", seal);
    }
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    LocalRange::new(lewi_wu(), &params, PageConfig::default(), store, rng).expect("setup")
}

/// `n` records of random 16-bit values, each with a distinct 8-byte
/// identifier as its payload (what a table gives).
fn records(n: u64, rng: &mut ChaCha20Rng) -> Vec<(u64, Vec<u8>)> {
    (0..n)
        .map(|id| (rng.gen_range(0..1u64 << 16), id.to_be_bytes().to_vec()))
        .collect()
}

/// Bytes of keys and values the server's store holds.
fn stored_bytes(s: &LocalRange) -> usize {
    s.store
        .scan_prefix(b"")
        .expect("scan")
        .iter()
        .map(|(k, v)| k.len() + v.len())
        .sum()
}

/// The same records built by a client of each form: the unique form's
/// entries are 18 bytes shorter (no 12-byte nonce, a 16-bit value in 2
/// bytes instead of 8), its leaves are sized for them
/// (`bplus_ore::UNIQUE_RECORDS`), so the same records take at least a
/// fifth fewer nodes, each still within one page; it answers the same,
/// and deletes in one round where the random form takes two.
#[test]
fn unique_seals_store_fewer_bytes_and_delete_in_one_round() {
    assert_eq!(RecordKey::sealed_len(8), 44);
    assert_eq!(RecordKey::unique_sealed_len(2, 8), 26);
    let n = 2000;
    let mut built = Vec::new();
    for seal in [None, Some("unique")] {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let mut s = setup(seal, &mut rng);
        let pairs = records(n, &mut rng);
        s.client
            .build(&mut rng, &mut s.channel, &pairs)
            .expect("build");
        let all = s.query(&mut rng, 0, u64::from(u16::MAX)).expect("query");
        assert_eq!(all.records, support::oracle(&pairs, 0, u64::from(u16::MAX)));
        let stored = s.store.scan_prefix(b"n").expect("scan");
        let page = PageConfig::default().page_size;
        for (k, v) in &stored {
            assert!(
                k.len() + v.len() + 12 <= page,
                "{seal:?}: node {k:?} of {} bytes does not fit a page with its key",
                v.len()
            );
        }
        let nodes = stored.len();
        let bytes = stored_bytes(&s);
        // Deleting one record: rounds counted by the channel's meter.
        let span = s.channel.meter().span();
        let (v, d) = pairs[7].clone();
        assert!(s
            .client
            .delete(&mut rng, &mut s.channel, v, &d)
            .expect("delete"));
        let rounds = span.finish().rounds;
        let left = s.query(&mut rng, v, v).expect("query").records;
        assert!(
            !left.contains(&(v, d)),
            "{seal:?}: the record is still there"
        );
        built.push((nodes, bytes, rounds));
    }
    let [(nodes_r, bytes_r, rounds_r), (nodes_u, bytes_u, rounds_u)] = built[..] else {
        unreachable!()
    };
    assert!(
        nodes_u * 5 < nodes_r * 4,
        "{nodes_u} nodes of the unique form, {nodes_r} of the random one"
    );
    assert!(bytes_r - bytes_u >= 18 * n as usize);
    assert_eq!((rounds_r, rounds_u), (2, 1));
}

/// A unique-form record is deterministic (the same pair seals to the
/// same bytes), opens only in its own form, width and associated data,
/// and refuses a value wider than its width; a random-form record does
/// not open as a unique one.
#[test]
fn the_unique_form_opens_only_as_sealed() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let key = RecordKey::generate(&mut rng);
    let sealed = key.seal_unique(b"p", 0xbeef, 2, b"id").expect("seal");
    assert_eq!(sealed.len(), RecordKey::unique_sealed_len(2, 2));
    assert_eq!(
        sealed,
        key.seal_unique(b"p", 0xbeef, 2, b"id").expect("seal")
    );
    assert_eq!(
        key.open_unique(b"p", 2, &sealed).expect("open"),
        (0xbeef, b"id".to_vec())
    );
    let refused =
        |r: sesame_core::Result<(u64, Vec<u8>)>| matches!(r, Err(sesame_core::Error::Crypto));
    assert!(refused(key.open_unique(b"q", 2, &sealed)));
    assert!(refused(key.open_unique(b"p", 3, &sealed)));
    assert!(refused(key.open(b"p", &sealed)));
    for i in 0..sealed.len() {
        let mut bad = sealed.clone();
        bad[i] ^= 1;
        assert!(refused(key.open_unique(b"p", 2, &bad)), "byte {i}");
    }
    for n in 0..sealed.len() {
        assert!(refused(key.open_unique(b"p", 2, &sealed[..n])), "{n}");
    }
    let random = key.seal(&mut rng, b"p", 0xbeef, b"id").expect("seal");
    assert!(refused(key.open_unique(b"p", 2, &random)));
    assert!(key.seal_unique(b"p", 0x1_0000, 2, b"id").is_err());
    assert!(key.seal_unique(b"p", 1, 0, b"id").is_err());
    assert!(key.seal_unique(b"p", 1, 9, b"id").is_err());
    assert!(refused(key.open_unique(b"p", 0, &sealed)));
}

/// The client state as every build before the unique form wrote it.
#[derive(Serialize)]
struct EarlierState<'a> {
    protocol: &'a str,
    bits: u32,
    extra: u32,
    payload: u32,
    record_key: [u8; 32],
    scheme: Vec<u8>,
}

/// A client of the random form (the default) saves its state byte for
/// byte as earlier builds did, so a state of an earlier build restores
/// into this one: here a state written in that layout from the parts of
/// a live client, restored, reads the records that client stored and
/// takes new ones; a unique-form state restores into the unique form
/// (its records open) and is refused by a reader of the earlier layout.
#[test]
fn a_client_state_of_an_earlier_build_restores_and_reads_its_records() {
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let mut s = setup(None, &mut rng);
    let mut pairs = records(300, &mut rng);
    s.client
        .build(&mut rng, &mut s.channel, &pairs)
        .expect("build");
    let state = s.client.save_state().expect("save");
    // The parts of the state: decoded with the earlier layout, whose
    // encoding is the state itself.
    #[derive(serde::Deserialize)]
    struct Parts {
        protocol: String,
        bits: u32,
        extra: u32,
        payload: u32,
        record_key: [u8; 32],
        scheme: Vec<u8>,
    }
    let parts: Parts = wire::decode(&state).expect("the earlier layout");
    let earlier = wire::encode(&EarlierState {
        protocol: &parts.protocol,
        bits: parts.bits,
        extra: parts.extra,
        payload: parts.payload,
        record_key: parts.record_key,
        scheme: parts.scheme.clone(),
    })
    .expect("encode");
    assert_eq!(earlier, state);
    s.client = (lewi_wu().restore_client)(&earlier).expect("restore");
    let max = u64::from(u16::MAX);
    assert_eq!(
        s.query(&mut rng, 0, max).expect("query").records,
        support::oracle(&pairs, 0, max)
    );
    s.insert(&mut rng, 77, &[9; 8]).expect("insert");
    pairs.push((77, vec![9; 8]));
    assert_eq!(
        s.query(&mut rng, 0, max).expect("query").records,
        support::oracle(&pairs, 0, max)
    );

    let mut u = setup(Some("unique"), &mut rng);
    let pairs = records(300, &mut rng);
    u.client
        .build(&mut rng, &mut u.channel, &pairs)
        .expect("build");
    let state = u.client.save_state().expect("save");
    assert!(wire::decode::<Parts>(&state).is_err());
    u.client = (lewi_wu().restore_client)(&state).expect("restore");
    assert_eq!(
        u.query(&mut rng, 0, max).expect("query").records,
        support::oracle(&pairs, 0, max)
    );
    // Restored, it still seals in the unique form: one-round deletes.
    let span = u.channel.meter().span();
    assert!(u
        .client
        .delete(&mut rng, &mut u.channel, pairs[0].0, &pairs[0].1)
        .expect("delete"));
    assert_eq!(span.finish().rounds, 1);
}

/// An unknown sealing is refused when the client is made.
#[test]
fn an_unknown_sealing_is_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    for p in bplus_ore::protocols() {
        let mut params = Params::new();
        params.set("seal", "sometimes");
        assert!(
            (p.new_client)(&mut rng, &PageConfig::default().with(&params)).is_err(),
            "{}",
            p.descriptor.name
        );
    }
}

/// A channel that keeps every request it forwards.
struct Keep<'a>(&'a mut dyn Channel, Vec<Vec<u8>>);

impl Channel for Keep<'_> {
    fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
        self.1.push(request.to_vec());
        self.0.call(request)
    }
    fn meter(&self) -> &sesame_core::Meter {
        self.0.meter()
    }
}

type LewiWuRequest = bplus_ore::Request<
    sesame_ore::lewi_wu::LewiWuCiphertext,
    sesame_ore::lewi_wu::LewiWuLeft,
    sesame_ore::lewi_wu::LewiWuRight,
>;

/// A Lewi-Wu build sends right halves and sealed records only
/// (`AppendStored`): no request of the build carries a left half, the
/// tree answers as the oracle, and a right half larger than the layout
/// allows is refused.
#[test]
fn a_lewi_wu_build_sends_no_left_half() {
    let mut rng = ChaCha20Rng::seed_from_u64(21);
    let mut s = setup(Some("unique"), &mut rng);
    let pairs = records(3000, &mut rng);
    let mut keep = Keep(&mut s.channel, Vec::new());
    s.client.build(&mut rng, &mut keep, &pairs).expect("build");
    let sent = std::mem::take(&mut keep.1);
    assert!(!sent.is_empty());
    let mut appended = 0;
    for bytes in &sent {
        let request: LewiWuRequest = wire::decode(bytes).expect("a request");
        match request {
            bplus_ore::Request::AppendStored { entries, .. } => appended += entries.len(),
            other => panic!("the build sent {other:?}"),
        }
    }
    assert_eq!(appended, pairs.len());
    let max = u64::from(u16::MAX);
    assert_eq!(
        s.query(&mut rng, 0, max).expect("query").records,
        support::oracle(&pairs, 0, max)
    );
    // A right half with more blocks than 16-bit values have: refused.
    let big = sesame_ore::lewi_wu::LewiWuRight {
        nonce: [0; 16],
        trits: vec![0; 64],
    };
    let request: LewiWuRequest = bplus_ore::Request::AppendStored {
        layout: bplus_ore::Layout {
            bits: 16,
            extra: 2,
            payload: 16,
        },
        entries: vec![(big, vec![0; 26])],
    };
    assert!(s
        .channel
        .call(&wire::encode(&request).expect("encode"))
        .is_err());
}
