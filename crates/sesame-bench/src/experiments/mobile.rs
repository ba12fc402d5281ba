//! `mobile`: seed 001's evaluation (Liu, Tong, Lam: SSE schemes on mobile
//! devices, §5), in the paper's shape.
//!
//! Corpus: real e-mails (the SpamAssassin corpus stands in for the
//! paper's 20 Newsgroups alt.atheism), 1,000 documents, tokens lower-cased
//! and de-duplicated per document. For SUISE, SUISE2, VASST16, VASST16-2
//! and CHLH15:
//!
//! - index time per document and index storage, at several corpus sizes;
//! - exact search time over keywords sampled from the vocabulary;
//! - prefix search time (schemes with prefix queries);
//! - multi-keyword (conjunctive, 1 to 5 keywords) search time, and
//!   VASST16's ranked top-10 search.
//!
//! Every answer is checked against a plaintext oracle. The harness runs
//! client and server in one thread: this is the `--client-threads 1`
//! profile of the issue (no flag is needed, nothing runs in parallel).

use std::collections::BTreeSet;
use std::sync::Arc;

use rand::Rng;
use sesame_core::{Channel, Params, Store};
use sesame_sse::query::{Query, QueryResult};
use sesame_sse::{DocId, KeywordClient, KeywordScheme, Multimap};
use sesame_store::MemoryStore;

use crate::data::{Corpus, SPAMASSASSIN_DIR};
use crate::error::BenchError;
use crate::experiment::{Ctx, Experiment};
use crate::measure::{add_snapshot, local_channel, without_waits, OnCpu};
use crate::result::{Axis, Chart, Law, ResultSet, Row, Value};

/// The `mobile` experiment.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mobile;

/// Where the paper measured its index times: on the phone (LG G2, §4:
/// "Experiments on client device are conducted on an LG G2 D802"), which
/// builds each document's index and uploads it.
const SOURCE_INDEX: &str = "seed 001 §5 (indexing on the Android phone)";

/// Where the paper measured its search times: a JUnit client posting
/// each search token over HTTP to the Tomcat web service and its
/// PostgreSQL 9.5 database on a laptop (§4: "we counted the duration
/// starting from the time that the client issues a request to the point
/// when the server returns the result"). A machine other than the
/// phone's: the fidelity table compares the index times with one another
/// and the search times with one another, never an index time with a
/// search time through one machine factor.
const SOURCE_SEARCH: &str = "seed 001 §4-5 (search over HTTP to the laptop server)";

/// Why VASST16's index time is far below the paper's, relative to the
/// other schemes' (checked against `docs/schemes/vasst16.md`).
const WHY_VASST16_INDEX: &str = "the paper's VASST16 indexing \"takes 1s because of the \
     computational expensiveness in the 2nd round encryption\" and \"Android's big number \
     constructs are fairly computationally expensive\" (§5, §6); ours replaces that \
     big-number second layer by a PiBas-style encrypted dictionary \
     (docs/schemes/vasst16.md, Deviations), so no big-number arithmetic is timed";

/// Why a time of `scheme` for `op` (`index`, `exact`, `prefix`) can depart
/// from the paper's, relative to the other times of its machine: what the
/// paper says of that time and what ours does instead (the fidelity
/// table shows it where the verdict is `differs`; `docs/experiments/
/// mobile.md`, Reading the paper).
fn why_time(scheme: &str, op: &str) -> Option<&'static str> {
    Some(match (scheme, op) {
        ("vasst16" | "vasst16-2", "index") => WHY_VASST16_INDEX,
        ("vasst16" | "vasst16-2", "exact") => {
            "the paper's VASST16 server computes the IDF at search time with three PostgreSQL \
             queries per search (the number of matching documents, the number of all \
             documents, the matching entries with their term frequencies) and ranks them in \
             Java (§4.2), a cost per search the other schemes do not have; ours reads the \
             keyword's postings and the number of documents from the in-memory store and \
             ranks in the same process, so its searches are faster relative to SUISE's and \
             CHLH15's, which test every document's entries or filter (docs/schemes/vasst16.md)"
        }
        ("vasst16-2", "prefix") => {
            "VASST16-2 indexes every prefix as a keyword, so ours looks a prefix up as it \
             looks up a keyword (its prefix search costs what its exact search costs); the \
             paper's prefix search takes 3.6 times its exact search (1,800 against 500 ms) \
             because \"as the number of index entries increase, more comparisons have to be \
             done at the server side\" (§5): its server compares the token with the index \
             entries, ours does a look-up"
        }
        ("suise2", "index") => {
            "SUISE2 indexes every prefix of every keyword, one PRF and one encryption per \
             prefix, so ours costs about the mean keyword length times SUISE's indexing (about \
             6 times in the standard run); the paper's 400 ms is not measured but read from \
             its text (SUISE2 \"approximately 100ms faster\" than CHLH15, itself 5 times \
             SUISE's 100 ms), 4 times SUISE's"
        }
        ("suise2", "prefix") => {
            "the paper's SUISE2 prefix search, 6,429 ms, is read from its text (CHLH15's 900 \
             ms is \"14% of SUISE2\"); ours searches a prefix as SUISE searches a keyword, \
             over the entries of every prefix of every keyword (about 6 times SUISE's entries \
             per document)"
        }
        ("chlh15", "index") => {
            "ours hashes every (position, character) pair of each keyword into the \
             document's Bloom filter (one filter per document, as the paper's variant, §4.3), \
             about |w| k keyed hashes per keyword against SUISE's one PRF and one encryption; \
             the paper's 500 ms is read from its text (SUISE's 100 ms \"is 20% of CHLH15\"; \
             the same paragraph also says \"0.5ms\"), with no breakdown of its filter's cost"
        }
        ("chlh15", "exact" | "prefix") => {
            "ours tests every document's Bloom filter (one per document, as the paper's \
             variant, §4.3), after folding the trapdoor to each filter's size, all read from \
             the in-memory store; the paper's server reads its filters from PostgreSQL over \
             the same HTTP service as the other schemes' searches, and gives no breakdown of \
             its 1 s and 900 ms"
        }
        _ => return None,
    })
}

/// The schemes, in the paper's order.
pub const SCHEMES: [&str; 5] = ["suise", "suise2", "vasst16", "vasst16-2", "chlh15"];

/// The paper's figures in ms: (scheme, index per document, exact search,
/// prefix search). Read from the text of §5: SUISE indexes in ~100 ms, "20%
/// of CHLH15 and 10% of VASST16"; SUISE2 ~100 ms faster than CHLH15;
/// VASST16-2 ~4 s; search VASST16 ~0.5 s, CHLH15 ~1 s, SUISE ~1.8 s;
/// prefix search CHLH15 0.9 s, "50% of VASST16-2 and 14% of SUISE2".
pub const PAPER: [(&str, f64, f64, Option<f64>); 5] = [
    ("suise", 100.0, 1800.0, None),
    ("suise2", 400.0, 1800.0, Some(900.0 / 0.14)),
    ("vasst16", 1000.0, 500.0, None),
    ("vasst16-2", 4000.0, 500.0, Some(1800.0)),
    ("chlh15", 500.0, 1000.0, Some(900.0)),
];

/// Sizes of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Corpus sizes indexed (the last one is the paper's 1,000).
    pub sizes: Vec<usize>,
    /// Exact and prefix queries per size.
    pub queries: usize,
    /// Multi-keyword queries per keyword count (largest size only).
    pub multi: usize,
}

impl Plan {
    /// Full: 250, 500, 1,000 documents, 1,000 queries; standard: the same
    /// documents, 300 queries; quick: 100, 300
    /// documents, 200 queries; tiny: 20, 40 documents, 20 queries.
    pub fn for_ctx(ctx: &Ctx) -> Plan {
        Plan {
            sizes: ctx.pick(
                vec![250, 500, 1000],
                vec![250, 500, 1000],
                vec![100, 300],
                vec![20, 40],
            ),
            queries: ctx.pick(1000, 300, 200, 20),
            multi: ctx.pick(200, 100, 50, 5),
        }
    }
}

fn scheme(name: &str) -> Result<KeywordScheme, BenchError> {
    sesame_sse::scheme(name).ok_or_else(|| {
        BenchError::InvalidArgument(format!("scheme {name} is not registered in sesame-sse"))
    })
}

/// Per-document keyword lists of the corpus, or of a synthetic stand-in
/// when the corpus is missing.
fn documents(ctx: &Ctx, n: usize, notes: &mut Vec<String>) -> Result<Vec<Vec<String>>, BenchError> {
    match Corpus::load_spamassassin(&ctx.data_dir) {
        Ok(c) => Ok(c.sample(n, ctx.seed).iter().map(|d| d.keywords()).collect()),
        Err(BenchError::DataMissing { .. }) => {
            notes.push(format!(
                "SpamAssassin corpus not found under {}/{SPAMASSASSIN_DIR}: synthetic documents \
                 (random words) stand in (run scripts/fetch-data.sh)",
                ctx.data_dir.display()
            ));
            let mut rng = ctx.rng("mobile/synthetic");
            let vocab: Vec<String> = (0..2000)
                .map(|_| {
                    let len = rng.gen_range(3..10);
                    (0..len)
                        .map(|_| rng.gen_range(b'a'..=b'z') as char)
                        .collect()
                })
                .collect();
            Ok((0..n)
                .map(|_| {
                    let k = rng.gen_range(30..80);
                    let set: BTreeSet<String> = (0..k)
                        .map(|_| vocab[rng.gen_range(0..vocab.len())].clone())
                        .collect();
                    set.into_iter().collect()
                })
                .collect())
        }
        Err(e) => Err(e),
    }
}

/// Distinct elements of CHLH15's filter for a document.
fn chlh15_elements(words: &[String]) -> usize {
    let words: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    sesame_sse::chlh15::element_count(&words)
}

fn bytes_stored(store: &dyn Store) -> Result<u64, BenchError> {
    let all = store
        .scan_prefix(b"")
        .map_err(|e| BenchError::scheme("mobile: measure storage", e))?;
    Ok(all.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum())
}

struct Run<'a> {
    name: &'a str,
    client: Box<dyn KeywordClient>,
    ch: sesame_core::LocalChannel<Box<dyn sesame_core::Service>>,
}

impl Run<'_> {
    fn query(
        &mut self,
        rng: &mut rand_chacha::ChaCha20Rng,
        q: &Query,
    ) -> Result<QueryResult, BenchError> {
        self.client
            .query(rng, &mut self.ch, q)
            .map_err(|e| BenchError::scheme(format!("mobile: {} {q:?}", self.name), e))
    }
}

fn oracle(db: &Multimap, q: &Query) -> Vec<DocId> {
    let docs = |w: &[u8]| db.get(w).cloned().unwrap_or_default();
    match q {
        Query::Exact(w) => docs(w),
        Query::Prefix(p) => {
            let set: BTreeSet<DocId> = db
                .range(p.clone()..)
                .take_while(|(k, _)| k.starts_with(p))
                .flat_map(|(_, ids)| ids.iter().copied())
                .collect();
            set.into_iter().collect()
        }
        Query::Conjunctive(ws) => {
            sesame_sse::query::intersect(ws.iter().map(|w| docs(w)).collect())
        }
        _ => Vec::new(),
    }
}

/// Times `queries` and checks each answer; returns the row.
fn time_queries(
    run: &mut Run<'_>,
    rng: &mut rand_chacha::ChaCha20Rng,
    db: &Multimap,
    queries: &[Query],
    row: Row,
    check: bool,
) -> Result<Row, BenchError> {
    let mut row = row;
    let mut removed = 0usize;
    let on_cpu = OnCpu::start();
    let span = run.ch.meter().span();
    let mut answers = Vec::with_capacity(queries.len());
    for q in queries {
        let r = run.query(rng, q)?;
        removed += r.false_positives_removed;
        answers.push(r.ids);
    }
    let mut snap = span.finish();
    without_waits(&mut snap, on_cpu.elapsed());
    if check {
        for (q, got) in queries.iter().zip(&answers) {
            if *got != oracle(db, q) {
                return Err(BenchError::WrongResult(format!(
                    "{}: {q:?} gave {} documents, expected {}",
                    run.name,
                    got.len(),
                    oracle(db, q).len()
                )));
            }
        }
    }
    add_snapshot(&mut row, &snap, queries.len() as u64);
    row.set("fp_removed", removed as f64 / queries.len().max(1) as f64);
    Ok(row)
}

fn rows_for_size(
    ctx: &Ctx,
    plan: &Plan,
    docs: &[Vec<String>],
    last: bool,
    elements: usize,
) -> Result<Vec<Row>, BenchError> {
    let n = docs.len();
    let mut db = Multimap::new();
    for (i, words) in docs.iter().enumerate() {
        for w in words {
            db.entry(w.as_bytes().to_vec())
                .or_default()
                .push(i as DocId);
        }
    }
    let vocab: Vec<&Vec<u8>> = db.keys().collect();
    let mut qrng = ctx.rng(&format!("mobile/queries/{n}"));
    let mut pick = || vocab[qrng.gen_range(0..vocab.len())].clone();
    let exact: Vec<Query> = (0..plan.queries).map(|_| Query::Exact(pick())).collect();
    let prefix: Vec<Query> = (0..plan.queries)
        .map(|_| {
            let w = pick();
            Query::Prefix(w[..w.len().min(3)].to_vec())
        })
        .collect();
    let multi: Vec<(usize, Vec<Query>)> = (1..=5)
        .map(|m| {
            (
                m,
                (0..plan.multi)
                    .map(|_| Query::Conjunctive((0..m).map(|_| pick()).collect()))
                    .collect(),
            )
        })
        .collect();

    let mut rows = Vec::new();
    for name in SCHEMES {
        let s = scheme(name)?;
        let paper = PAPER.iter().find(|p| p.0 == name);
        let params = if name == "chlh15" {
            Params::parse(&format!("elements={elements}"))
                .map_err(|e| BenchError::scheme("mobile: chlh15 parameters", e))?
        } else {
            Params::new()
        };
        let mut rng = ctx.rng(&format!("mobile/{name}/{n}"));
        let store: Arc<MemoryStore> = Arc::new(MemoryStore::new());
        let client = (s.new_client)(&mut rng, &params)
            .map_err(|e| BenchError::scheme(format!("mobile: {name} client"), e))?;
        let mut run = Run {
            name,
            client,
            ch: local_channel(
                s.server(store.clone(), &sesame_core::Params::new())
                    .map_err(|e| BenchError::scheme("server", e))?,
            ),
        };
        let label = |op: &str| {
            Row::new()
                .param("op", op)
                .param("scheme", name)
                .param("docs", n)
        };

        // Client and server share this thread: its waits for a CPU while
        // other work holds the cores are left out (`without_waits`).
        let on_cpu = OnCpu::start();
        let span = run.ch.meter().span();
        run.client
            .setup(&mut rng, &mut run.ch, &db)
            .map_err(|e| BenchError::scheme(format!("mobile: {name} setup"), e))?;
        let mut snap = span.finish();
        without_waits(&mut snap, on_cpu.elapsed());
        let mut row = label("index");
        add_snapshot(&mut row, &snap, n as u64);
        let stored = bytes_stored(store.as_ref())?;
        row.set("storage_kib", stored as f64 / 1024.0);
        if let Some(p) = paper {
            row.paper("wall_ms", p.1, "ms per document", SOURCE_INDEX);
            row.set("speedup", p.1 / row.number("wall_ms").unwrap_or(f64::NAN));
        }
        rows.push(row);

        let mut row = time_queries(&mut run, &mut rng, &db, &exact, label("exact"), true)?;
        if let Some(p) = paper {
            row.paper("wall_ms", p.2, "ms per search", SOURCE_SEARCH);
            row.set("speedup", p.2 / row.number("wall_ms").unwrap_or(f64::NAN));
        }
        rows.push(row);

        if s.descriptor
            .queries
            .contains(&sesame_core::QueryKind::Prefix)
        {
            let mut row = time_queries(&mut run, &mut rng, &db, &prefix, label("prefix"), true)?;
            if let Some(p) = paper.and_then(|p| p.3) {
                row.paper("wall_ms", p, "ms per search", SOURCE_SEARCH);
                row.set("speedup", p / row.number("wall_ms").unwrap_or(f64::NAN));
            }
            rows.push(row);
        }

        if last {
            for (m, qs) in &multi {
                let mut row = time_queries(
                    &mut run,
                    &mut rng,
                    &db,
                    qs,
                    label("multi").param("keywords", *m),
                    true,
                )?;
                if name == "suise" {
                    // "For any new keyword added, the search time of SUISE
                    // is increased by 1000ms."
                    let p = 1800.0 + 1000.0 * (*m as f64 - 1.0);
                    row.paper("wall_ms", p, "ms per search", SOURCE_SEARCH);
                    row.set("speedup", p / row.number("wall_ms").unwrap_or(f64::NAN));
                }
                rows.push(row);
                if name.starts_with("vasst16") {
                    let ranked: Vec<Query> = qs
                        .iter()
                        .map(|q| match q {
                            Query::Conjunctive(ws) => Query::Ranked {
                                keywords: ws.clone(),
                                k: 10,
                            },
                            other => other.clone(),
                        })
                        .collect();
                    rows.push(time_queries(
                        &mut run,
                        &mut rng,
                        &db,
                        &ranked,
                        label("ranked").param("keywords", *m),
                        false,
                    )?);
                }
            }
        }
    }
    // The paper's figures are at its 1,000 documents: an index time per
    // document does not grow with the corpus; a search's does, linearly
    // (the documents of a keyword sampled from the vocabulary, and
    // CHLH15's filters, one per document).
    for row in &mut rows {
        let scheme = row.params.get("scheme").map(ToString::to_string);
        let op = row.params.get("op").map(ToString::to_string);
        if let Some(why) = why_time(scheme.as_deref().unwrap_or(""), op.as_deref().unwrap_or("")) {
            row.why("wall_ms", why);
        }
        let law = if row.params.get("op") == Some(&Value::from("index")) {
            Law::Constant
        } else {
            Law::Linear
        };
        row.grows("wall_ms", law, "documents", n as f64, PAPER_DOCUMENTS);
    }
    Ok(rows)
}

/// The documents of the paper's corpus (20 Newsgroups alt.atheism).
const PAPER_DOCUMENTS: f64 = 1000.0;

fn charts() -> Vec<Chart> {
    let axis = |label: &str, log: bool| Axis {
        label: label.to_owned(),
        log,
    };
    let chart = |file: &str, title: &str, op: &str, x: &str, xl: &str, y: &str, yl: &str| Chart {
        file: file.to_owned(),
        title: title.to_owned(),
        x: x.to_owned(),
        y: vec![y.to_owned()],
        series: vec!["scheme".to_owned()],
        filter: vec![("op".to_owned(), Value::from(op))],
        x_axis: axis(xl, false),
        y_axis: axis(yl, true),
    };
    vec![
        chart(
            "index-time",
            "Index time per document",
            "index",
            "docs",
            "documents",
            "wall_ms",
            "ms per document",
        ),
        chart(
            "index-storage",
            "Index storage",
            "index",
            "docs",
            "documents",
            "storage_kib",
            "KiB",
        ),
        chart(
            "exact-search",
            "Exact keyword search",
            "exact",
            "docs",
            "documents",
            "wall_ms",
            "ms per search",
        ),
        chart(
            "prefix-search",
            "Prefix search (3-byte prefixes)",
            "prefix",
            "docs",
            "documents",
            "wall_ms",
            "ms per search",
        ),
        chart(
            "multi-search",
            "Multi-keyword (conjunctive) search, largest corpus",
            "multi",
            "keywords",
            "keywords per query",
            "wall_ms",
            "ms per search",
        ),
    ]
}

impl Experiment for Mobile {
    fn name(&self) -> &'static str {
        "mobile"
    }

    fn title(&self) -> &'static str {
        "SUISE, VASST16, CHLH15 (and prefix variants): index time, storage, exact, prefix and \
         multi-keyword search"
    }

    fn seed_paper(&self) -> &'static str {
        "seed 001 (Liu, Tong, Lam: SSE on mobile devices, 2018), §5"
    }

    fn run(&self, ctx: &Ctx) -> Result<ResultSet, BenchError> {
        let mut rs = ctx.result_set(self);
        rs.display = [
            "wall_ms",
            "speedup",
            "storage_kib",
            "fp_removed",
            "rounds",
            "bytes_down",
        ]
        .map(str::to_owned)
        .to_vec();
        rs.charts = charts();
        let plan = Plan::for_ctx(ctx);
        let largest = plan.sizes.iter().copied().max().unwrap_or(0);
        let all = documents(ctx, largest, &mut rs.notes)?;
        let elements = all
            .iter()
            .map(|d| chlh15_elements(d))
            .max()
            .unwrap_or(1)
            .next_power_of_two()
            .max(1024);
        for &n in &plan.sizes {
            let docs = &all[..n.min(all.len())];
            rs.rows
                .extend(rows_for_size(ctx, &plan, docs, n == largest, elements)?);
        }
        rs.notes.push(format!(
            "corpus sizes {:?}; {} exact and {} prefix (first 3 bytes) queries per size, keywords \
             drawn uniformly from the vocabulary; {} conjunctive queries per keyword count 1-5 on \
             the largest corpus; every answer checked against a plaintext index",
            plan.sizes, plan.queries, plan.queries, plan.multi
        ));
        rs.notes.push(format!(
            "single-threaded (the --client-threads 1 profile): client and server in one process \
             over an in-memory store; wall_ms includes both sides; speedup = paper / ours; \
             CHLH15 filters sized for elements={elements} (largest document, next power of two) \
             at fpr=0.001"
        ));
        rs.notes.push(
            "Axes: seed 001 gives its figures in the text of §5 only (no chart whose axes \
             could be followed); the charts here are ours: the corpus size or keyword count \
             on a linear axis, times and sizes on a logarithmic one, since the schemes differ \
             by decades (VASST16's indexing against SUISE's)."
                .to_owned(),
        );
        rs.notes.push(
            "paper figures are read from the text of §5 (no table); SUISE's multi-keyword \
             figure is 1.8 s + 1 s per extra keyword as stated"
                .to_owned(),
        );
        Ok(rs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_checks_every_answer_and_fills_every_chart() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Ctx::tiny(dir.path());
        let rs = Mobile.run(&ctx).unwrap();
        for c in &rs.charts {
            assert!(rs.rows.iter().any(|r| c.selects(r)), "{}", c.file);
        }
        assert!(rs
            .rows
            .iter()
            .any(|r| r.params.get("scheme") == Some(&Value::from("chlh15"))));
        // Index times (the phone) and search times (the laptop server)
        // are compared within their own machine only.
        let mut sources = BTreeSet::new();
        for r in &rs.rows {
            let index = r.params.get("op") == Some(&Value::from("index"));
            for p in &r.paper {
                let want = if index { SOURCE_INDEX } else { SOURCE_SEARCH };
                assert_eq!(p.source, want, "{:?}", r.params);
                sources.insert(p.source.clone());
                // SUISE, the paper's reference, needs no reason; the
                // others say what the paper's time is and what ours does.
                let scheme = r.params.get("scheme").unwrap().to_string();
                let op = r.params.get("op").unwrap().to_string();
                let why = why_time(&scheme, &op);
                assert_eq!(p.why.as_deref(), why, "{:?}", r.params);
                assert_eq!(
                    why.is_none(),
                    scheme == "suise" || (scheme, op.as_str()) == ("suise2".into(), "exact"),
                    "{:?}",
                    r.params
                );
            }
        }
        assert_eq!(sources.len(), 2);
    }
}
