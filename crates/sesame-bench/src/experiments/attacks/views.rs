//! The keyword schemes' recorded runs: the mail corpus, each scheme's
//! server half run under recording, and the view converted for the
//! attack library (search leakage, bytes fetched, injected documents'
//! replays).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use rand::Rng;
use sesame_attacks::injection;
use sesame_attacks::leakage;
use sesame_attacks::view::{Observation, Op, Seen};
use sesame_core::view::{Event, RecordingService, RecordingStore, View};
use sesame_core::{Channel, LocalChannel, Params, SchemeKind, Store};
use sesame_sse::query::Query;
use sesame_sse::{KeywordClient, Multimap, UpdateOp};
use sesame_store::MemoryStore;

use super::{scheme_err, Plan, INJECTED};
use crate::data::{Corpus, SPAMASSASSIN_DIR};
use crate::error::BenchError;
use crate::experiment::Ctx;

/// One document: identifier, keywords, size in bytes.
#[derive(Clone, Debug)]
pub(super) struct Doc {
    pub(super) id: u64,
    pub(super) words: Vec<String>,
    pub(super) size: usize,
}

/// The mail corpus restricted to its `plan.keywords` most frequent
/// keywords, and those keywords by decreasing frequency.
pub(super) fn mail(
    ctx: &Ctx,
    plan: &Plan,
    notes: &mut Vec<String>,
) -> Result<(Vec<Doc>, Vec<String>), BenchError> {
    let raw: Vec<(Vec<String>, usize)> = match Corpus::load_spamassassin(&ctx.data_dir) {
        Ok(c) => c
            .sample(plan.documents, ctx.seed)
            .iter()
            .map(|d| (d.keywords(), d.text.len()))
            .collect(),
        Err(BenchError::DataMissing { .. }) => {
            notes.push(format!(
                "SpamAssassin corpus not found under {}/{SPAMASSASSIN_DIR}: synthetic documents \
                 (Zipf-like keywords) stand in (run scripts/fetch-data.sh)",
                ctx.data_dir.display()
            ));
            let mut rng = ctx.rng("attacks/synthetic");
            (0..plan.documents)
                .map(|_| {
                    let words = (0..plan.keywords * 2)
                        .filter(|k| rng.gen_bool((3.0 / (*k as f64 + 3.0)).min(1.0)))
                        .map(|k| format!("w{k}"))
                        .collect();
                    (words, rng.gen_range(200..20_000))
                })
                .collect()
        }
        Err(e) => return Err(e),
    };
    let mut freq: BTreeMap<&str, usize> = BTreeMap::new();
    for (words, _) in &raw {
        for w in words {
            *freq.entry(w.as_str()).or_default() += 1;
        }
    }
    let mut by_freq: Vec<(&str, usize)> = freq.into_iter().collect();
    by_freq.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let universe: Vec<String> = by_freq
        .iter()
        .take(plan.keywords)
        .map(|(w, _)| (*w).to_owned())
        .collect();
    let keep: BTreeSet<&str> = universe.iter().map(String::as_str).collect();
    let docs = raw
        .iter()
        .enumerate()
        .map(|(i, (words, size))| Doc {
            id: i as u64,
            words: words
                .iter()
                .filter(|w| keep.contains(w.as_str()))
                .cloned()
                .collect(),
            size: *size,
        })
        .collect();
    Ok((docs, universe))
}

/// The events a harness hands the attack library.
pub(super) fn seen(events: Vec<Event>) -> Vec<Seen> {
    sesame_core::view::seen(events)
}

pub(super) fn doc_key(id: u64) -> Vec<u8> {
    let mut key = b"b".to_vec();
    key.extend_from_slice(&id.to_be_bytes());
    key
}

/// Sealed size of a document: the plaintext, nonce, tag and framing.
pub(super) fn sealed(size: usize) -> usize {
    size + 32
}

/// What one scheme's recorded run gave the attacker.
pub(super) struct Recorded {
    /// Per query: its leakage (search pattern, documents fetched, bytes).
    pub(super) leaked: Vec<leakage::QueryLeakage>,
    /// Per query: the bytes of the documents it fetched.
    pub(super) fetched: Vec<usize>,
    /// Mean wall-clock time of a search (the index only), ms.
    pub(super) search_ms: f64,
    /// Mean bytes the server sent per search (the index only).
    pub(super) response_bytes: f64,
    /// Injection after the queries: the keyword each replay spelled;
    /// `None` where the scheme takes no updates.
    pub(super) after: Option<Vec<Option<String>>>,
}

/// Indexes `docs` and the documents injected before the queries with
/// `name`, runs `queries` (each followed by the fetch of its documents)
/// under recording, then, on a dynamic scheme, injects `plan_after`'s
/// documents and replays each query's recorded requests.
pub(super) fn record(
    ctx: &Ctx,
    name: &str,
    docs: &[Doc],
    universe: &[String],
    injected: &[Vec<String>],
    queries: &[String],
    elements: usize,
) -> Result<Recorded, BenchError> {
    let s = sesame_sse::scheme(name).ok_or_else(|| {
        BenchError::InvalidArgument(format!("scheme {name} is not registered in sesame-sse"))
    })?;
    let params = if name == "chlh15" {
        Params::parse(&format!("elements={elements}"))
            .map_err(|e| scheme_err(name, "parameters", e))?
    } else {
        Params::new()
    };
    let view = View::new();
    let index: Arc<dyn Store> = Arc::new(RecordingStore::new(
        Arc::new(MemoryStore::new()),
        view.clone(),
    ));
    let documents = RecordingStore::new(Arc::new(MemoryStore::new()), view.clone());
    let mut db = Multimap::new();
    for d in docs {
        documents
            .put(&doc_key(d.id), &vec![0; sealed(d.size)])
            .map_err(|e| scheme_err(name, "document store", e))?;
        for w in &d.words {
            db.entry(w.clone().into_bytes()).or_default().push(d.id);
        }
    }
    // Injected before the queries: e-mails in the mailbox when it is
    // indexed, 1 KB each.
    for (j, words) in injected.iter().enumerate() {
        let id = INJECTED + j as u64;
        documents
            .put(&doc_key(id), &vec![0; sealed(1024)])
            .map_err(|e| scheme_err(name, "document store", e))?;
        for w in words {
            db.entry(w.clone().into_bytes()).or_default().push(id);
        }
    }
    for ids in db.values_mut() {
        ids.sort_unstable();
    }
    let server = RecordingService::new(
        s.server(index, &Params::new())
            .map_err(|e| scheme_err(name, "server", e))?,
        view.clone(),
    );
    let mut ch = LocalChannel::new(server);
    let mut rng = ctx.rng(&format!("attacks/{name}"));
    let mut client: Box<dyn KeywordClient> =
        (s.new_client)(&mut rng, &params).map_err(|e| scheme_err(name, "client", e))?;
    client
        .setup(&mut rng, &mut ch, &db)
        .map_err(|e| scheme_err(name, "setup", e))?;

    view.start();
    view.take();
    let mut observations = Vec::with_capacity(queries.len());
    let mut search_ns = 0u128;
    let mut response_bytes = 0usize;
    for q in queries {
        let start = Instant::now();
        let answer = client
            .query(&mut rng, &mut ch, &Query::Exact(q.clone().into_bytes()))
            .map_err(|e| scheme_err(name, "search", e))?;
        search_ns += start.elapsed().as_nanos();
        for id in answer.ids {
            documents
                .get(&doc_key(id))
                .map_err(|e| scheme_err(name, "document fetch", e))?;
        }
        let events = seen(view.take());
        response_bytes += events
            .iter()
            .map(|e| match e {
                Seen::Response(n) => *n,
                _ => 0,
            })
            .sum::<usize>();
        observations.push(Observation {
            op: Op::Search,
            events,
        });
    }
    let n = queries.len().max(1) as f64;
    let leaked = leakage::queries(&observations, |k| leakage::document_id(b"", k));
    let fetched = observations
        .iter()
        .map(|o| {
            o.events
                .iter()
                .map(|e| match e {
                    Seen::Read { key, size: Some(n) } => match leakage::document_id(b"", key) {
                        Some(id) if id < INJECTED => *n,
                        _ => 0,
                    },
                    _ => 0,
                })
                .sum()
        })
        .collect();

    let after = if s.descriptor.kind == SchemeKind::DynamicSse {
        // KPR12 keeps its cells under `c` and a Merkle tree under `n`:
        // only the cells are index entries.
        let entry: fn(&[u8]) -> bool = if name == "kpr12" {
            |k| k.first() == Some(&b'c')
        } else {
            |_| true
        };
        let plan = injection::plan(universe);
        let mut written = Vec::with_capacity(plan.len());
        let mut requests = Vec::with_capacity(plan.len());
        for (j, words) in plan.iter().enumerate() {
            view.take();
            let words: Vec<Vec<u8>> = words.iter().map(|w| w.clone().into_bytes()).collect();
            client
                .update(
                    &mut rng,
                    &mut ch,
                    UpdateOp::Add,
                    INJECTED + 1000 + j as u64,
                    &words,
                )
                .map_err(|e| scheme_err(name, "injection", e))?;
            let events = view.take();
            written.push(sesame_core::view::entry_keys(&events, entry).0);
            requests.push(sesame_core::view::messages(&events, true));
        }
        // An injected identifier, from 2^40, is a 6-byte varint.
        let echoes = injection::Echoes::new(&requests, 6);
        let mut spelled = Vec::with_capacity(observations.len());
        for o in &observations {
            view.take();
            for e in &o.events {
                if let Seen::Request(r) = e {
                    // A replayed request the scheme refuses (a spent
                    // token) reads what it reads before failing.
                    let _ = ch.call(r);
                }
            }
            let events = view.take();
            let (_, read) = sesame_core::view::entry_keys(&events, entry);
            // The documents the replay read by key, and those its answers
            // name (a response-revealing scheme's identifiers).
            let mut touched = injection::touched_keys(&written, &read);
            touched.extend(echoes.named(&sesame_core::view::messages(&events, false)));
            spelled.push(injection::spell(universe, &touched));
        }
        Some(spelled)
    } else {
        None
    };
    view.stop();
    Ok(Recorded {
        leaked,
        fetched,
        search_ms: search_ns as f64 / 1e6 / n,
        response_bytes: response_bytes as f64 / n,
        after,
    })
}
