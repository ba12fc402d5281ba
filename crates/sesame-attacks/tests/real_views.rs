//! The attacks on views recorded from Sesame's own server halves: the
//! count attack on PiBas and FAST (their access pattern leaks), the
//! sorting and cumulative attacks on BCLO and CLWW columns.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use sesame_attacks::view::{Observation, Op, Seen};
use sesame_attacks::{accuracy, count, leakage, ordered};
use sesame_core::view::{seen, Event, RecordingService, RecordingStore, View};
use sesame_core::{LocalChannel, Params, Store};
use sesame_sse::Multimap;
use sesame_store::MemoryStore;

/// `docs` documents over a vocabulary of `words`, keyword `k` in each
/// document with probability about `1 / (k + 1)` (Zipf-like), keyword
/// names `w0`, `w1`, ...
fn corpus(docs: u64, words: usize, rng: &mut ChaCha20Rng) -> BTreeMap<u64, Vec<String>> {
    let mut out = BTreeMap::new();
    for d in 1..=docs {
        let mut ws = Vec::new();
        for k in 0..words {
            if rng.gen_bool((2.0 / (k as f64 + 2.0)).min(1.0)) {
                ws.push(format!("w{k}"));
            }
        }
        out.insert(d, ws);
    }
    out
}

/// Indexes `docs` with `scheme`, runs `queries` (each followed by the
/// fetch of its result documents), and returns the view and the true
/// keyword of each search.
fn record(
    scheme: &str,
    docs: &BTreeMap<u64, Vec<String>>,
    sizes: &BTreeMap<u64, usize>,
    queries: &[String],
) -> (Vec<Observation>, Vec<String>) {
    let s = sesame_sse::scheme(scheme).unwrap();
    let view = View::new();
    let index: Arc<dyn Store> = Arc::new(RecordingStore::new(
        Arc::new(MemoryStore::new()),
        view.clone(),
    ));
    let documents = RecordingStore::new(Arc::new(MemoryStore::new()), view.clone());
    for &id in docs.keys() {
        let mut key = b"b".to_vec();
        key.extend_from_slice(&id.to_be_bytes());
        // Sealed: the plaintext and 32 bytes (nonce, tag, framing).
        documents.put(&key, &vec![0; sizes[&id] + 32]).unwrap();
    }
    let server = RecordingService::new(s.server(index, &Params::new()).unwrap(), view.clone());
    let mut ch = LocalChannel::new(server);
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let mut client = (s.new_client)(&mut rng, &Params::new()).unwrap();
    let mut db = Multimap::new();
    for (id, words) in docs {
        for w in words {
            db.entry(w.clone().into_bytes()).or_default().push(*id);
        }
    }
    view.start();
    client.setup(&mut rng, &mut ch, &db).unwrap();
    let mut observations = vec![Observation {
        op: Op::Setup,
        events: seen(view.take()),
    }];
    for q in queries {
        let ids = client.search(&mut rng, &mut ch, q.as_bytes()).unwrap();
        for id in ids {
            let mut key = b"b".to_vec();
            key.extend_from_slice(&id.to_be_bytes());
            documents.get(&key).unwrap();
        }
        observations.push(Observation {
            op: Op::Search,
            events: seen(view.take()),
        });
    }
    (observations, queries.to_vec())
}

#[test]
fn the_count_attack_recovers_queries_on_pibas_and_fast() {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let docs = corpus(300, 120, &mut rng);
    // Queries from the 40 most frequent keywords, some repeated.
    let queries: Vec<String> = (0..80)
        .map(|_| format!("w{}", rng.gen_range(0..40)))
        .collect();
    let sizes: BTreeMap<u64, usize> = docs.keys().map(|&d| (d, 100)).collect();
    for scheme in ["pibas", "fast"] {
        let (view, truth) = record(scheme, &docs, &sizes, &queries);
        let leaked = leakage::queries(&view, |k| leakage::document_id(b"", k));
        assert_eq!(leaked.len(), queries.len(), "{scheme}");
        // Equal keywords sent equal requests: the search pattern leaks.
        for (i, a) in leaked.iter().enumerate() {
            for (j, b) in leaked.iter().enumerate() {
                assert_eq!(
                    a.pattern == b.pattern,
                    truth[i] == truth[j],
                    "{scheme} {i} {j}"
                );
            }
        }
        let pattern_truth: BTreeMap<usize, String> = leaked
            .iter()
            .zip(&truth)
            .map(|(l, t)| (l.pattern, t.clone()))
            .collect();
        let all = count::Knowledge::new(docs.iter().map(|(i, w)| (*i, &w[..])), 1.0);
        let got = count::attack(&leaked, &all, 0.0);
        let pairs: Vec<(String, String)> = got
            .iter()
            .map(|(p, w)| (w.clone(), pattern_truth[p].clone()))
            .collect();
        let distinct = pattern_truth.len();
        eprintln!(
            "{scheme}: count attack, all known: {} of {distinct} claimed, {:.0} % right",
            pairs.len(),
            100.0 * accuracy(&pairs)
        );
        // CCS 2015: about 100 % with every document known.
        assert_eq!(accuracy(&pairs), 1.0, "{scheme}: a wrong keyword");
        assert!(
            pairs.len() * 10 >= distinct * 9,
            "{scheme}: {} of {distinct} queries recovered",
            pairs.len()
        );
        // Knowing three quarters of the documents, windows and trials
        // still name most queries, and rightly.
        let known: Vec<(u64, &[String])> = docs
            .iter()
            .filter(|(i, _)| *i % 4 != 0)
            .map(|(i, w)| (*i, &w[..]))
            .collect();
        let partial = count::Knowledge::new(known, 0.75);
        let got = count::attack(&leaked, &partial, 3.0);
        let pairs: Vec<(String, String)> = got
            .iter()
            .map(|(p, w)| (w.clone(), pattern_truth[p].clone()))
            .collect();
        eprintln!(
            "{scheme}: count attack, 75 % known: {} of {distinct} claimed, {:.0} % right",
            pairs.len(),
            100.0 * accuracy(&pairs)
        );
        assert!(accuracy(&pairs) >= 0.9, "{scheme}: a wrong keyword");
        assert!(
            pairs.len() * 10 >= distinct * 8,
            "{scheme}: {} of {distinct} queries recovered",
            pairs.len()
        );
    }
}

/// A dense column under BCLO (order-preserving: ciphertexts compare as
/// numbers) and CLWW (its public comparison): the sorting attack gives
/// every value back; the cumulative attack, from the values'
/// distribution, nearly every one.
#[test]
fn sorting_and_cumulative_attacks_on_order_revealing_columns() {
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    // Every value of 0..64 at least once, then skewed towards small ones.
    let mut values: Vec<u64> = (0..64).collect();
    for _ in 0..2_000 {
        let v = (rng.gen::<f64>().powi(2) * 64.0) as u64;
        values.push(v.min(63));
    }
    let mut aux: BTreeMap<u64, f64> = BTreeMap::new();
    for v in &values {
        *aux.entry(*v).or_default() += 1.0;
    }
    let domain: Vec<u64> = (0..64).collect();
    for scheme in ["bclo", "clww"] {
        let entry = sesame_ore::scheme(scheme).unwrap();
        let mut p = Params::new();
        p.set("bits", "6");
        let mut ore = (entry.new_client)(&mut rng, &p).unwrap();
        let column: Vec<Vec<u8>> = values
            .iter()
            .map(|v| ore.encrypt(&mut rng, *v).unwrap())
            .collect();
        let cmp = |a: &Vec<u8>, b: &Vec<u8>| ore.compare(a, b).unwrap();
        let got = ordered::sorting(&column, &domain, &cmp).unwrap();
        assert_eq!(got, values, "{scheme}: sorting attack");
        let got = ordered::cumulative(&column, &aux, &cmp);
        let pairs: Vec<(u64, u64)> = got.into_iter().zip(values.iter().copied()).collect();
        let acc = accuracy(&pairs);
        eprintln!("{scheme}: cumulative attack {:.1} % of rows", 100.0 * acc);
        assert!(acc >= 0.95, "{scheme}: {acc}");
    }
    let distinct: BTreeSet<u64> = values.iter().copied().collect();
    assert_eq!(distinct.len(), 64);
}

/// File injection on FAST (forward private), KPR12 and SUISE (not):
/// injected before the queries, each gives every queried keyword away;
/// injected after, the server's replays of the recorded queries find the
/// injected documents on KPR12 (through the keys they wrote) and SUISE
/// (through the identifiers its answers carry) only.
#[test]
fn file_injection_and_forward_privacy() {
    use sesame_attacks::injection;
    use sesame_sse::UpdateOp;
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let docs = corpus(150, 60, &mut rng);
    let universe: Vec<String> = (0..60).map(|k| format!("w{k}")).collect();
    let targets: Vec<String> = (0..20)
        .map(|_| format!("w{}", rng.gen_range(0..60)))
        .collect();
    let plan = injection::plan(&universe);
    assert_eq!(plan.len(), 6, "six documents for 60 keywords");
    // KPR12 keeps its cells under `c` and a Merkle tree under `n`.
    let any: fn(&[u8]) -> bool = |_| true;
    let cells: fn(&[u8]) -> bool = |k| k.first() == Some(&b'c');
    let cases = [
        ("fast", true, any),
        ("kpr12", false, cells),
        ("suise", false, any),
    ];
    for (scheme, forward_private, entry) in cases {
        for inject_first in [true, false] {
            let s = sesame_sse::scheme(scheme).unwrap();
            let view = View::new();
            let index: Arc<dyn Store> = Arc::new(RecordingStore::new(
                Arc::new(MemoryStore::new()),
                view.clone(),
            ));
            let server =
                RecordingService::new(s.server(index, &Params::new()).unwrap(), view.clone());
            let mut ch = LocalChannel::new(server);
            let mut rng = ChaCha20Rng::seed_from_u64(4);
            let mut client = (s.new_client)(&mut rng, &Params::new()).unwrap();
            let mut db = Multimap::new();
            for (id, words) in &docs {
                for w in words {
                    db.entry(w.clone().into_bytes()).or_default().push(*id);
                }
            }
            client.setup(&mut rng, &mut ch, &db).unwrap();
            view.start();
            let inject = |client: &mut Box<dyn sesame_sse::KeywordClient>,
                          ch: &mut LocalChannel<_>,
                          rng: &mut ChaCha20Rng| {
                let mut written = Vec::new();
                let mut requests = Vec::new();
                for (j, words) in plan.iter().enumerate() {
                    view.take();
                    let words: Vec<Vec<u8>> =
                        words.iter().map(|w| w.clone().into_bytes()).collect();
                    // Identifiers of 2^40 and up: six bytes as varints.
                    client
                        .update(rng, ch, UpdateOp::Add, (1 << 40) + j as u64, &words)
                        .unwrap();
                    let events = view.take();
                    written.push(sesame_core::view::entry_keys(&events, entry).0);
                    requests.push(sesame_core::view::messages(&events, true));
                }
                (written, requests)
            };
            let (mut written, mut requests) = (Vec::new(), Vec::new());
            if inject_first {
                (written, requests) = inject(&mut client, &mut ch, &mut rng);
            }
            let mut recorded = Vec::new();
            let mut reads = Vec::new();
            let mut answers = Vec::new();
            for t in &targets {
                view.take();
                client.search(&mut rng, &mut ch, t.as_bytes()).unwrap();
                let events = view.take();
                recorded.push(
                    events
                        .iter()
                        .filter_map(|e| match e {
                            Event::Request(r) => Some(r.clone()),
                            _ => None,
                        })
                        .collect::<Vec<_>>(),
                );
                reads.push(sesame_core::view::entry_keys(&events, entry).1);
                answers.push(sesame_core::view::messages(&events, false));
            }
            if !inject_first {
                (written, requests) = inject(&mut client, &mut ch, &mut rng);
                // The server replays each query's requests.
                reads.clear();
                answers.clear();
                for requests in &recorded {
                    view.take();
                    for r in requests {
                        let _ = sesame_core::Channel::call(&mut ch, r);
                    }
                    let events = view.take();
                    reads.push(sesame_core::view::entry_keys(&events, entry).1);
                    answers.push(sesame_core::view::messages(&events, false));
                }
            }
            let echoes = injection::Echoes::new(&requests, 6);
            let pairs: Vec<(Option<String>, Option<String>)> = reads
                .iter()
                .zip(&answers)
                .zip(&targets)
                .map(|((read, answer), t)| {
                    let mut touched = injection::touched_keys(&written, read);
                    touched.extend(echoes.named(answer));
                    (injection::spell(&universe, &touched), Some(t.clone()))
                })
                .collect();
            let acc = accuracy(&pairs);
            let when = if inject_first { "before" } else { "after" };
            eprintln!(
                "{scheme}: file injection {when} the queries: {:.0} % recovered",
                100.0 * acc
            );
            let expect = if inject_first || !forward_private {
                1.0
            } else {
                0.0
            };
            assert_eq!(acc, expect, "{scheme}, injected {when} the queries");
        }
    }
}

/// The volume attack on PiBas and UEDSSE (which returns no identifier in
/// clear): the bytes of the documents a query fetched name its keyword
/// whenever one keyword alone has that volume.
#[test]
fn the_volume_attack_needs_only_sizes() {
    use sesame_attacks::volume;
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let docs = corpus(200, 50, &mut rng);
    let sizes: BTreeMap<u64, usize> = docs
        .keys()
        .map(|&d| (d, rng.gen_range(200..20_000)))
        .collect();
    let mut volumes: BTreeMap<String, usize> = BTreeMap::new();
    for (d, words) in &docs {
        for w in words {
            *volumes.entry(w.clone()).or_default() += sizes[d] + 32;
        }
    }
    let queries: Vec<String> = (0..30)
        .map(|_| format!("w{}", rng.gen_range(0..50)))
        .collect();
    for scheme in ["pibas", "uedsse"] {
        let (view, truth) = record(scheme, &docs, &sizes, &queries);
        // The bytes of the documents each search fetched.
        let observed: Vec<usize> = view
            .iter()
            .filter(|o| o.op == Op::Search)
            .map(|o| {
                o.events
                    .iter()
                    .map(|e| match e {
                        Seen::Read { key, size: Some(n) }
                            if leakage::document_id(b"", key).is_some() =>
                        {
                            *n
                        }
                        _ => 0,
                    })
                    .sum()
            })
            .collect();
        let got = volume::attack(&observed, &volumes, 0, 0);
        let pairs: Vec<(String, String)> = got
            .iter()
            .map(|(i, w)| (w.clone(), truth[*i].clone()))
            .collect();
        eprintln!(
            "{scheme}: volume attack: {} of {} queries claimed, {:.0} % right",
            pairs.len(),
            queries.len(),
            100.0 * accuracy(&pairs)
        );
        assert_eq!(accuracy(&pairs), 1.0, "{scheme}");
        assert!(
            pairs.len() * 10 >= queries.len() * 9,
            "{scheme}: {}",
            pairs.len()
        );
    }
}
