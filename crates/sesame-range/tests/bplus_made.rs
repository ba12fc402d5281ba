//! Builds from entries made ahead (`RangeClient::entry_maker`,
//! `RangeClient::build_made`): the server stores exactly what a build of
//! the same records stores, for the same random draws, and entries out of
//! order or not of the index's form are refused before anything is sent.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sesame_core::{Params, Store};
use sesame_range::{LocalRange, PageConfig};
use sesame_store::MemoryStore;

mod support;

/// A B+ tree of `protocol` over 16-bit values in process.
fn setup(protocol: &str, seal: Option<&str>, rng: &mut ChaCha20Rng) -> LocalRange {
    let mut params = Params::new();
    params.set("bits", 16);
    if let Some(seal) = seal {
        params.set("seal", seal);
    }
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let protocol = sesame_range::protocol(protocol).expect("registered");
    LocalRange::new(protocol, &params, PageConfig::default(), store, rng).expect("setup")
}

/// Every key and value the server's store holds.
fn stored(s: &LocalRange) -> Vec<(Vec<u8>, Vec<u8>)> {
    s.store.scan_prefix(b"").expect("scan")
}

/// The same records, the same keys and the same random stream: a build
/// from entries made ahead (made in value order) leaves the server's
/// store byte for byte as the build does, in both sealing forms; the
/// tree answers as the oracle says. Values repeat, so that the order of
/// equal values is the caller's in both.
#[test]
fn a_build_from_entries_made_ahead_stores_what_the_build_stores() {
    for seal in [None, Some("unique")] {
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        let mut built = setup("bplus-lewi-wu", seal, &mut rng);
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        let mut made = setup("bplus-lewi-wu", seal, &mut rng);
        // More records than one round of a build carries (4 MiB).
        let mut records: Vec<(u64, Vec<u8>)> = (0..60_000u64)
            .map(|id| (rng.gen_range(0..2000u64), id.to_be_bytes().to_vec()))
            .collect();
        records.sort_by_key(|r| r.0);
        let mut twin = rng.clone();
        built
            .client
            .build(&mut rng, &mut built.channel, &records)
            .expect("build");
        let mut maker = made
            .client
            .entry_maker()
            .expect("maker")
            .expect("Lewi-Wu builds from entries made ahead");
        let entries: Vec<(u64, Vec<u8>)> = records
            .iter()
            .map(|(v, d)| (*v, maker.entry(&mut twin, *v, d).expect("entry")))
            .collect();
        let span = sesame_core::Channel::meter(&made.channel).span();
        made.client
            .build_made(&mut made.channel, &entries)
            .expect("build from entries");
        assert!(span.finish().rounds >= 2, "{seal:?}: one round only");
        assert_eq!(stored(&made), stored(&built), "{seal:?}: stores differ");
        let all = made.query(&mut rng, 0, 1999).expect("query");
        assert_eq!(all.records, support::oracle(&records, 0, 1999));
    }
}

/// Entries out of value order, entries that are not of the index's
/// form, and a value wider than the index's width are refused, and the
/// server's store is left as it was; a maker refuses what a build
/// refuses.
#[test]
fn entries_out_of_order_or_of_another_form_are_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let mut s = setup("bplus-lewi-wu", Some("unique"), &mut rng);
    let before = stored(&s);
    let mut maker = s.client.entry_maker().expect("maker").expect("a maker");
    let a = maker.entry(&mut rng, 5, b"one").expect("entry");
    let b = maker.entry(&mut rng, 9, b"two").expect("entry");
    let refused = [
        vec![(9, b.clone()), (5, a.clone())],
        vec![(5, a.clone()), (9, b"not an entry".to_vec())],
        vec![(5, a.clone()), (1 << 16, b.clone())],
    ];
    for entries in refused {
        assert!(s.client.build_made(&mut s.channel, &entries).is_err());
        assert_eq!(stored(&s), before, "something was sent");
    }
    assert!(maker.entry(&mut rng, 1 << 16, b"wide").is_err());
    // Protocols that build otherwise have no maker.
    let mut rng = ChaCha20Rng::seed_from_u64(13);
    let clww = setup("bplus-clww", None, &mut rng);
    assert!(clww.client.entry_maker().expect("no error").is_none());
}
