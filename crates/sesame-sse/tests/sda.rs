//! SDa's own properties: rebuilds are real fetch/upload exchanges, the
//! levels follow the binary representation of the update count, and the
//! client keeps one counter per level.

#![allow(clippy::unwrap_used)]

mod support;
use support::Chan;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{Channel, Params};
use sesame_sse::sd::sda::SdaClient;
use sesame_sse::{KeywordClient, Multimap, UpdateOp};

fn fresh() -> (Box<SdaClient>, Chan, ChaCha20Rng) {
    support::fresh("sda", 5, |rng| {
        Box::new(SdaClient::new(rng, &Params::new()).unwrap())
    })
}

#[test]
fn levels_follow_the_update_count_and_rebuilds_are_exchanges() {
    let (mut c, mut ch, mut rng) = fresh();
    let w = vec![b"w".to_vec()];
    for i in 1..=13u64 {
        let span = ch.meter().span();
        c.update(&mut rng, &mut ch, UpdateOp::Add, i, &w).unwrap();
        let snap = span.finish();
        // Level 0 free: one upload; otherwise a fetch and an upload.
        let want = if (i - 1) % 2 == 0 { 1 } else { 2 };
        assert_eq!(snap.rounds, want, "update {i}");
        let levels: Vec<u8> = (0..8).filter(|l| i >> l & 1 == 1).collect();
        assert_eq!(c.full_levels(), levels, "after {i} updates");
    }
    let state = c.save_state().unwrap();
    assert!(state.len() < 200, "client state of {} bytes", state.len());
    assert_eq!(
        c.search(&mut rng, &mut ch, b"w").unwrap(),
        (1..=13).collect::<Vec<_>>()
    );
}

#[test]
fn deletions_and_re_additions_across_levels() {
    let (mut c, mut ch, mut rng) = fresh();
    let w = vec![b"w".to_vec()];
    for i in 0..6 {
        c.update(&mut rng, &mut ch, UpdateOp::Add, i, &w).unwrap();
    }
    c.update(&mut rng, &mut ch, UpdateOp::Delete, 3, &w)
        .unwrap();
    assert_eq!(
        c.search(&mut rng, &mut ch, b"w").unwrap(),
        vec![0, 1, 2, 4, 5]
    );
    c.update(&mut rng, &mut ch, UpdateOp::Add, 3, &w).unwrap();
    assert_eq!(
        c.search(&mut rng, &mut ch, b"w").unwrap(),
        vec![0, 1, 2, 3, 4, 5]
    );
    let mut again = SdaClient::restore(&c.save_state().unwrap()).unwrap();
    again
        .update(&mut rng, &mut ch, UpdateOp::Delete, 0, &w)
        .unwrap();
    assert_eq!(
        again.search(&mut rng, &mut ch, b"w").unwrap(),
        vec![1, 2, 3, 4, 5]
    );
}

#[test]
fn sdd_updates_cost_two_rounds_and_keep_three_buffers_per_level() {
    let s = sesame_sse::scheme("sdd").unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let mut c = sesame_sse::sd::sdd::SddClient::new(&mut rng, &Params::new()).unwrap();
    let mut ch = support::memory_channel(&s);
    c.setup(&mut rng, &mut ch, &Multimap::new()).unwrap();
    let words: Vec<Vec<u8>> = (0..5).map(|i| vec![b'a' + i]).collect();
    let mut truth: Vec<std::collections::BTreeSet<u64>> = vec![Default::default(); 5];
    let mut max_rounds = 0;
    for i in 0..1000u64 {
        let k = (i * 7 % 5) as usize;
        let add = i % 3 != 2;
        let doc = i % 97;
        let span = ch.meter().span();
        let op = if add { UpdateOp::Add } else { UpdateOp::Delete };
        c.update(&mut rng, &mut ch, op, doc, std::slice::from_ref(&words[k]))
            .unwrap();
        max_rounds = max_rounds.max(span.finish().rounds);
        if add {
            truth[k].insert(doc);
        } else {
            truth[k].remove(&doc);
        }
        if i % 97 == 0 {
            for (w, t) in words.iter().zip(&truth) {
                let got = c.search(&mut rng, &mut ch, w).unwrap();
                assert_eq!(got, t.iter().copied().collect::<Vec<_>>(), "after {i}");
            }
        }
    }
    // De-amortised: never more than a fetch and a put per update.
    assert_eq!(max_rounds, 2);
    let mut again = sesame_sse::sd::sdd::SddClient::restore(&c.save_state().unwrap()).unwrap();
    for (w, t) in words.iter().zip(&truth) {
        let got = again.search(&mut rng, &mut ch, w).unwrap();
        assert_eq!(got, t.iter().copied().collect::<Vec<_>>());
    }
    assert!(c.save_state().unwrap().len() < 1000);
}

/// Bytes a fresh client of `scheme` sends for one addition of `keyword`.
fn bytes_of_one_addition(scheme: &str, keyword: &[u8]) -> u64 {
    let s = sesame_sse::scheme(scheme).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let mut c = (s.new_client)(&mut rng, &Params::new()).unwrap();
    let mut ch = support::memory_channel(&s);
    c.setup(&mut rng, &mut ch, &Multimap::new()).unwrap();
    let span = ch.meter().span();
    c.update(&mut rng, &mut ch, UpdateOp::Add, 1, &[keyword.to_vec()])
        .unwrap();
    span.finish().bytes_up
}

/// Sealed entries are padded: keywords of 1 and 43 bytes cost the same
/// bytes on the wire (before, every byte of a keyword showed), 44 bytes
/// take the next 64-byte step.
#[test]
fn entries_of_short_keywords_have_one_size() {
    for scheme in ["sda", "sdd"] {
        let short = bytes_of_one_addition(scheme, b"a");
        assert_eq!(
            short,
            bytes_of_one_addition(scheme, &[b'x'; 43]),
            "{scheme}"
        );
        assert_eq!(
            short,
            bytes_of_one_addition(scheme, &[b'y'; 20]),
            "{scheme}"
        );
        assert!(
            bytes_of_one_addition(scheme, &[b'z'; 44]) > short,
            "{scheme}"
        );
    }
}

/// SDa's setup puts pairs into levels in random order. With 96 pairs (one
/// per keyword) the levels hold 64 and 32; a search's answer shows the
/// level each keyword's entry sits in. Cut in keyword order (as before),
/// the 64-entry level held exactly the alphabetically first 64 keywords.
#[test]
fn setup_levels_are_not_in_keyword_order() {
    let s = sesame_sse::scheme("sda").unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let mut c = SdaClient::new(&mut rng, &Params::new()).unwrap();
    let mut ch = support::memory_channel(&s);
    let mut db = Multimap::new();
    for i in 0..96u64 {
        db.insert(format!("k{i:03}").into_bytes(), vec![i]);
    }
    c.setup(&mut rng, &mut ch, &db).unwrap();
    assert_eq!(c.full_levels(), vec![5, 6]);
    // Which keywords does the big level hold? Searching one reads every
    // full level; the server returns one entry, at its level (levels in
    // the answer follow the client's order of full levels).
    let in_big = found_in_last_part(&mut c, &mut ch, &mut rng, 96, |answer| {
        let found: sesame_sse::sd::sda::Response = sesame_core::wire::decode(answer).unwrap();
        let sesame_sse::sd::sda::Response::Found(levels) = found else {
            panic!("not a search answer")
        };
        levels.last().is_some_and(|l| !l.is_empty())
    });
    assert_eq!(in_big.len(), 64);
    assert_ne!(in_big, (0..64).collect::<Vec<_>>());
}

/// Searches keywords `k000` .. of documents `0..n` (keyword `i` in
/// document `i` alone), checking each result, and lists the `i` whose
/// raw answer `in_last` says came from the last part (level or buffer).
fn found_in_last_part<C: Channel>(
    c: &mut dyn KeywordClient,
    ch: &mut C,
    rng: &mut ChaCha20Rng,
    n: u64,
    in_last: impl Fn(&[u8]) -> bool,
) -> Vec<u64> {
    let mut out = Vec::new();
    for i in 0..n {
        let w = format!("k{i:03}").into_bytes();
        let mut recorder = Recorder {
            inner: &mut *ch,
            last: Vec::new(),
        };
        assert_eq!(c.search(rng, &mut recorder, &w).unwrap(), vec![i]);
        if in_last(&recorder.last) {
            out.push(i);
        }
    }
    out
}

/// A channel that keeps the last response.
struct Recorder<'a, C> {
    inner: &'a mut C,
    last: Vec<u8>,
}

impl<C: Channel> Channel for Recorder<'_, C> {
    fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
        let r = self.inner.call(request)?;
        self.last = r.clone();
        Ok(r)
    }
    fn meter(&self) -> &sesame_core::Meter {
        self.inner.meter()
    }
}

/// What the server sees of SDd updates, without the ciphertexts: per
/// request, the positions fetched, the positions written, the number of
/// labelled entries (and whether they come in label order), the buffers
/// dropped.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Fetch(Vec<(u64, u64)>),
    Put {
        positional: Vec<(u64, u64, usize)>,
        labelled: usize,
        labels_sorted: bool,
        drop: Vec<u64>,
    },
    Other,
}

struct Pattern<'a, C> {
    inner: &'a mut C,
    seen: Vec<Seen>,
}

impl<C: Channel> Channel for Pattern<'_, C> {
    fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
        use sesame_sse::sd::sdd::SddRequest;
        self.seen
            .push(match sesame_core::wire::decode::<SddRequest>(request)? {
                SddRequest::Fetch { items } => Seen::Fetch(items),
                SddRequest::Put {
                    positional,
                    labelled,
                    drop,
                } => Seen::Put {
                    positional: positional
                        .iter()
                        .map(|(b, p, s)| (*b, *p, s.len()))
                        .collect(),
                    labelled: labelled.len(),
                    // In label order within each buffer.
                    labels_sorted: labelled
                        .windows(2)
                        .all(|w| w[0].0 != w[1].0 || w[0].1 < w[1].1),
                    drop,
                },
                _ => Seen::Other,
            });
        self.inner.call(request)
    }
    fn meter(&self) -> &sesame_core::Meter {
        self.inner.meter()
    }
}

/// SDd's merges are oblivious: whatever the keywords, the same number of
/// updates fetches and writes the same positions, drops the same buffers
/// and publishes as many labelled entries, in label order. (Before, the
/// fetched positions followed which input of a merge held the smaller
/// keyword, and merged entries were published in keyword order.)
#[test]
fn sdd_merges_touch_the_same_positions_whatever_the_keywords() {
    let run = |keyword: &dyn Fn(u64) -> Vec<u8>| {
        let s = sesame_sse::scheme("sdd").unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        let mut c = (s.new_client)(&mut rng, &Params::new()).unwrap();
        let mut ch = support::memory_channel(&s);
        let mut pattern = Pattern {
            inner: &mut ch,
            seen: Vec::new(),
        };
        for i in 0..200u64 {
            c.update(&mut rng, &mut pattern, UpdateOp::Add, i, &[keyword(i)])
                .unwrap();
        }
        let seen = std::mem::take(&mut pattern.seen);
        // Still correct.
        for i in [0u64, 77, 199] {
            let found = c.search(&mut rng, &mut ch, &keyword(i)).unwrap();
            assert!(found.contains(&i), "{i}");
        }
        seen
    };
    let ascending = run(&|i| format!("k{i:04}").into_bytes());
    let descending = run(&|i| format!("k{:04}", 1000 - i).into_bytes());
    let few = run(&|i| format!("k{}", i % 3).into_bytes());
    // A put per update, a fetch for each update that runs merge steps
    // (a merge of arrays of one block runs in one unit, at its last update).
    assert!(ascending.len() > 200, "{}", ascending.len());
    assert!(ascending
        .iter()
        .any(|s| matches!(s, Seen::Fetch(f) if f.len() > 8)));
    for (name, other) in [("descending", &descending), ("three keywords", &few)] {
        assert_eq!(ascending.len(), other.len(), "{name}");
        if let Some(i) = (0..ascending.len()).find(|&i| ascending[i] != other[i]) {
            panic!(
                "{name}: request {i} differs: {:?} against {:?}",
                ascending[i], other[i]
            );
        }
    }
    for s in &ascending {
        if let Seen::Put { labels_sorted, .. } = s {
            assert!(
                labels_sorted,
                "labelled entries are published in label order"
            );
        }
    }
}

/// SDd's setup writes one whole buffer per set bit of the pair count, in
/// random order (not cut in keyword order), with no merge under way; the
/// updates after it merge those buffers like any others, and every search
/// matches the plaintext answer.
#[test]
fn sdd_setup_builds_whole_buffers_that_later_updates_merge() {
    let s = sesame_sse::scheme("sdd").unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let mut c = sesame_sse::sd::sdd::SddClient::new(&mut rng, &Params::new()).unwrap();
    let mut ch = support::memory_channel(&s);
    // 96 keywords of one document each, then 904 pairs on 8 keywords:
    // 1,000 pairs, 0b1111101000.
    let mut truth: std::collections::BTreeMap<Vec<u8>, std::collections::BTreeSet<u64>> =
        Default::default();
    for i in 0..96u64 {
        truth
            .entry(format!("k{i:03}").into_bytes())
            .or_default()
            .insert(i);
    }
    for i in 0..904u64 {
        truth
            .entry(format!("m{}", i % 8).into_bytes())
            .or_default()
            .insert(1000 + i);
    }
    let db: Multimap = truth
        .iter()
        .map(|(w, ids)| (w.clone(), ids.iter().copied().collect()))
        .collect();
    let span = ch.meter().span();
    c.setup(&mut rng, &mut ch, &db).unwrap();
    assert_eq!(
        span.finish().rounds,
        13,
        "a reset, and per buffer a put of its array and one of its labelled entries"
    );
    let levels: Vec<usize> = c.buffers().iter().map(|&(l, _)| l).collect();
    assert_eq!(levels, vec![3, 5, 6, 7, 8, 9]);
    // Which buffer holds each single-document keyword: not the keyword
    // order cut into levels.
    let in_biggest = found_in_last_part(&mut c, &mut ch, &mut rng, 96, |answer| {
        let found: sesame_sse::sd::sdd::SddResponse = sesame_core::wire::decode(answer).unwrap();
        let sesame_sse::sd::sdd::SddResponse::Found(buffers) = found else {
            panic!("not a search answer")
        };
        buffers.last().is_some_and(|b| !b.is_empty())
    });
    assert!(!in_biggest.is_empty() && in_biggest.len() < 96);
    assert_ne!(in_biggest, (0..in_biggest.len() as u64).collect::<Vec<_>>());
    // Updates merge the built buffers; searches stay exact.
    for i in 0..1500u64 {
        let w = format!("m{}", i % 11).into_bytes();
        let (doc, add) = (2000 + i % 300, i % 4 != 3);
        let op = if add { UpdateOp::Add } else { UpdateOp::Delete };
        c.update(&mut rng, &mut ch, op, doc, std::slice::from_ref(&w))
            .unwrap();
        let set = truth.entry(w).or_default();
        if add {
            set.insert(doc);
        } else {
            set.remove(&doc);
        }
        if i % 250 == 249 {
            for (w, want) in &truth {
                let got = c.search(&mut rng, &mut ch, w).unwrap();
                assert_eq!(got, want.iter().copied().collect::<Vec<_>>(), "after {i}");
            }
        }
    }
    assert!(c.buffers().iter().any(|&(l, _)| l == 10), "merged upwards");
}

/// SDd's merges of buffers small enough to hold whole (arrays of at most
/// a block) run in one unit: both inputs read once, NEW's array and its
/// labelled entries written once, instead of a pass over the arrays per
/// step of the network. 1,000 additions of distinct keywords from an
/// empty index, as `benches/single_update.rs` runs them: the encryptions
/// and decryptions per update.
#[test]
fn sdd_small_merges_open_and_seal_each_entry_once() {
    use sesame_crypto::counter::{self, Primitive};
    let s = sesame_sse::scheme("sdd").unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let mut c = (s.new_client)(&mut rng, &Params::new()).unwrap();
    let mut ch = support::memory_channel(&s);
    const UPDATES: u64 = 1000;
    let ((), counts) = counter::measure(|| {
        for i in 0..UPDATES {
            let w = format!("keyword-{i}").into_bytes();
            c.update(&mut rng, &mut ch, UpdateOp::Add, i, &[w]).unwrap();
        }
    });
    let per_update = counts.total(Primitive::Ske) as f64 / UPDATES as f64;
    assert!(
        per_update <= 45.0,
        "{per_update:.1} encryptions and decryptions per update"
    );
    // The keys of the buffers an update touches are kept while they live
    // (39 PRF calls per update when every update derived them again).
    let prf = counts.total(Primitive::Prf) as f64 / UPDATES as f64;
    assert!(prf <= 30.0, "{prf:.1} PRF calls per update");
    for i in [0u64, 500, 999] {
        let w = format!("keyword-{i}").into_bytes();
        assert_eq!(c.search(&mut rng, &mut ch, &w).unwrap(), vec![i]);
    }
}
