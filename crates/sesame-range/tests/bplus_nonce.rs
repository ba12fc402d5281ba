//! Records in the nonce (`seal=nonce`, `bplus_ore::NONCE_RECORDS`): a
//! Lewi-Wu B+ tree whose records travel in its right halves' nonces,
//! against the unique form, and a server that answers with altered,
//! moved or foreign records.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sesame_core::{wire, Channel, Meter, Params, Store};
use sesame_range::bplus_ore::{self, Response};
use sesame_range::{LocalRange, PageConfig, RangeProtocol};
use sesame_store::MemoryStore;

mod support;

const MAX: u64 = u16::MAX as u64;

fn lewi_wu() -> RangeProtocol {
    sesame_range::protocol("bplus-lewi-wu").expect("registered")
}

/// A Lewi-Wu B+ tree of `bits`-bit values and 8-byte payloads in
/// process, sealing as `seal` says.
fn setup(seal: &str, bits: u32, rng: &mut ChaCha20Rng) -> sesame_core::Result<LocalRange> {
    let mut params = Params::new();
    params.set("bits", bits).set("payload", 8).set("seal", seal);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    LocalRange::new(lewi_wu(), &params, PageConfig::default(), store, rng)
}

/// `n` records of random 16-bit values, each with a distinct 8-byte
/// identifier as its payload (what a table gives).
fn records(n: u64, rng: &mut ChaCha20Rng) -> Vec<(u64, Vec<u8>)> {
    (0..n)
        .map(|id| (rng.gen_range(0..=MAX), id.to_be_bytes().to_vec()))
        .collect()
}

/// The store's nodes: their number and their bytes of keys and values.
fn nodes(s: &LocalRange) -> (usize, usize) {
    let stored = s.store.scan_prefix(b"n").expect("scan");
    let page = PageConfig::default().page_size;
    for (k, v) in &stored {
        assert!(k.len() + v.len() + 12 <= page, "a node outgrows its page");
    }
    let bytes = stored.iter().map(|(k, v)| k.len() + v.len()).sum();
    (stored.len(), bytes)
}

/// The same 3,000 records built in the unique form and in the nonce:
/// each entry of the nonce form is at least 25 bytes shorter (no sealed
/// record of 26 bytes, one byte of an empty one), so the tree takes
/// fewer nodes; both answer as the oracle, before and after a single
/// insertion and a deletion (one round), and after the client state is
/// saved and restored.
#[test]
fn records_in_the_nonce_take_no_bytes_of_their_own_and_answer_the_same() {
    let n = 3000;
    let mut measured = Vec::new();
    for seal in ["unique", "nonce"] {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let mut s = setup(seal, 16, &mut rng).expect("setup");
        let mut pairs = records(n, &mut rng);
        s.client
            .build(&mut rng, &mut s.channel, &pairs)
            .expect("build");
        let (count, bytes) = nodes(&s);
        let extra = (40_000, (n + 1).to_be_bytes().to_vec());
        s.client
            .insert(&mut rng, &mut s.channel, extra.0, &extra.1)
            .expect("insert");
        pairs.push(extra);
        let span = s.channel.meter().span();
        let gone = pairs.swap_remove(11);
        assert!(s
            .client
            .delete(&mut rng, &mut s.channel, gone.0, &gone.1)
            .expect("delete"));
        assert_eq!(span.finish().rounds, 1, "{seal}: a deletion is one round");
        for (lo, hi) in [(0, MAX), (1000, 1200), (gone.0, gone.0), (40_000, 40_000)] {
            let got = s.query(&mut rng, lo, hi).expect("query").records;
            assert_eq!(got, support::oracle(&pairs, lo, hi), "{seal}: [{lo}, {hi}]");
        }
        let saved = s.client.save_state().expect("save");
        s.client = (lewi_wu().restore_client)(&saved).expect("restore");
        let got = s.query(&mut rng, 0, MAX).expect("query").records;
        assert_eq!(got, support::oracle(&pairs, 0, MAX), "{seal}: restored");
        measured.push((count, bytes));
    }
    let [(count_u, bytes_u), (count_n, bytes_n)] = measured[..] else {
        unreachable!()
    };
    assert!(
        bytes_u - bytes_n >= 25 * n as usize,
        "{bytes_u} bytes of nodes unique, {bytes_n} in the nonce"
    );
    assert!(
        count_n * 10 < count_u * 7,
        "{count_n} nodes in the nonce, {count_u} unique"
    );
}

/// What a lying server does to an answer's records.
type Alteration<'a> = Box<dyn FnMut(&mut Vec<Vec<u8>>) + 'a>;

/// A channel that plays a server altering the records of its answers.
struct Lying<'a, F: FnMut(&mut Vec<Vec<u8>>)> {
    inner: &'a mut dyn Channel,
    alter: F,
}

impl<F: FnMut(&mut Vec<Vec<u8>>)> Channel for Lying<'_, F> {
    fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
        let response = self.inner.call(request)?;
        match wire::decode::<Response>(&response) {
            Ok(Response::Records(mut records)) => {
                (self.alter)(&mut records);
                wire::encode(&Response::Records(records))
            }
            _ => Ok(response),
        }
    }
    fn meter(&self) -> &Meter {
        self.inner.meter()
    }
}

/// Playing the server against records in the nonce: an answer with one
/// bit of a record flipped, with a record of a value outside the
/// interval asked (an entry moved), or with a record of another index
/// (another key, the same values) is refused; the honest answer is
/// accepted. (An answer that leaves records out is not detected: no
/// range protocol here claims completeness.)
#[test]
fn a_server_that_alters_moves_or_swaps_a_record_is_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let pairs = records(500, &mut rng);
    let mut s = setup("nonce", 16, &mut rng).expect("setup");
    s.client
        .build(&mut rng, &mut s.channel, &pairs)
        .expect("build");
    let mut other = setup("nonce", 16, &mut rng).expect("setup");
    other
        .client
        .build(&mut rng, &mut other.channel, &pairs)
        .expect("build");
    let (lo, hi) = (20_000, 40_000);
    // Records the server holds: of values outside [lo, hi], and of the
    // other index.
    let outside = raw_answer(&mut s, &mut rng, 0, lo - 1);
    let foreign = raw_answer(&mut other, &mut rng, lo, hi);
    assert!(!outside.is_empty() && !foreign.is_empty());
    let alterations: Vec<(&str, Alteration)> = vec![
        (
            "a flipped bit",
            Box::new(|r: &mut Vec<Vec<u8>>| r[0][5] ^= 0x10),
        ),
        (
            "a record moved from outside",
            Box::new(|r: &mut Vec<Vec<u8>>| r[0] = outside[0].clone()),
        ),
        (
            "another index's record",
            Box::new(|r: &mut Vec<Vec<u8>>| r[0] = foreign[0].clone()),
        ),
        (
            "a cut record",
            Box::new(|r: &mut Vec<Vec<u8>>| r[0].truncate(15)),
        ),
    ];
    for (what, alter) in alterations {
        let mut lying = Lying {
            inner: &mut s.channel,
            alter,
        };
        assert!(
            s.client.query(&mut rng, &mut lying, lo, hi).is_err(),
            "{what} was accepted"
        );
    }
    let honest = s.query(&mut rng, lo, hi).expect("query").records;
    assert_eq!(honest, support::oracle(&pairs, lo, hi));
}

/// The records of `[lo, hi]` as the server sends them.
fn raw_answer(s: &mut LocalRange, rng: &mut ChaCha20Rng, lo: u64, hi: u64) -> Vec<Vec<u8>> {
    let mut kept = Vec::new();
    let mut keep = Lying {
        inner: &mut s.channel,
        alter: |r: &mut Vec<Vec<u8>>| kept = r.clone(),
    };
    s.client.query(rng, &mut keep, lo, hi).expect("query");
    kept
}

/// `seal=nonce` is refused where a record does not fit a block (a 40-bit
/// value and an 8-byte identifier: 13 bytes) or the scheme stores no
/// nonce (CLWW); a payload of another length than the layout's is
/// refused; and the server refuses an entry of a nonce tree that carries
/// a record of its own.
#[test]
fn records_in_the_nonce_are_refused_where_they_do_not_fit() {
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    assert!(setup("nonce", 40, &mut rng).is_err());
    assert!(setup("nonce", 16, &mut rng).is_ok());
    let mut params = Params::new();
    params
        .set("bits", 16)
        .set("payload", 8)
        .set("seal", "nonce");
    let clww = sesame_range::protocol("bplus-clww").expect("registered");
    assert!((clww.new_client)(&mut rng, &PageConfig::default().with(&params)).is_err());
    let mut s = setup("nonce", 16, &mut rng).expect("setup");
    assert!(s
        .client
        .insert(&mut rng, &mut s.channel, 5, b"short")
        .is_err());
    let right = sesame_ore::lewi_wu::LewiWuRight {
        nonce: [3; 16],
        trits: vec![0; 8],
    };
    let request: bplus_ore::Request<
        sesame_ore::lewi_wu::LewiWuCiphertext,
        sesame_ore::lewi_wu::LewiWuLeft,
        sesame_ore::lewi_wu::LewiWuRight,
    > = bplus_ore::Request::AppendStored {
        layout: bplus_ore::Layout {
            bits: 16,
            extra: 2,
            payload: 8 | bplus_ore::UNIQUE_RECORDS | bplus_ore::NONCE_RECORDS,
        },
        entries: vec![(right, vec![0; 26])],
    };
    let sent = s.channel.call(&wire::encode(&request).expect("encode"));
    assert!(
        sent.is_err(),
        "an entry with a record of its own was stored"
    );
}
