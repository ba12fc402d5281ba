//! The KPR12 side of the `verify` experiment (seed 003, §1.3): the
//! inverted-index dynamic SSE of Kamara, Papamanthou and Roeder with a
//! Merkle tree over the index (`sesame_sse::kpr12`).
//!
//! - Fig. 2(b): IndexGen time versus the number of keywords V (|D|
//!   documents, each holding each keyword with probability 1/8, so the
//!   index has about |D| x V / 8 pairs, the paper's O(|D| V));
//! - Fig. 3(b)/(c): the server's proof-component computation versus V (at
//!   |L_D| = 500) and versus |L_D|;
//! - Fig. 4(c): the client's Verify for one result and for |L_D| results;
//! - Fig. 5/6: AddTok, Add, DelTok, Del (and the client's check of the
//!   update's proof) for a document with V / 8 keywords, versus V.
//!
//! The server's steps are timed alone (in-process, memory store), on the
//! scheme's own types rather than through a channel, so that proof
//! computation is separate from search and from the client's work.

use std::sync::Arc;
use std::time::Instant;

use rand::Rng;
use sesame_core::{Params, Store};
use sesame_sse::kpr12::{Kpr12Client, Kpr12Server};
use sesame_sse::{DocId, Multimap};
use sesame_store::MemoryStore;

use super::verify::SOURCE_FIG3;
use crate::error::BenchError;
use crate::experiment::Ctx;
use crate::result::{Axis, Chart, ResultSet, Row, Value};

/// Why our KPR12 proof times depart from seed 003's, relative to its
/// SI-SSE-RV proof time.
const WHY_PROOF: &str = "the seed's verification tree has one leaf per keyword and its \
     proof cost grows with V, 7 times from V = 2^7 to 2^10 (10 s to 70 s); ours authenticates \
     the cells of the index, so a proof is O((|L_D| + 1) 40) hashes whatever V \
     (docs/schemes/kpr12.md, Deviations from the seed's description)";

/// Sizes of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Keywords in the index (V).
    pub keywords: Vec<usize>,
    /// Documents (|D|) of the background index.
    pub documents: usize,
    /// Result sizes (|L_D|) of the proof and Verify sweeps (1 included).
    pub results: Vec<usize>,
    /// Repetitions of each timed step.
    pub reps: usize,
}

impl Plan {
    /// Full: the seed's Table 1 (V = 2^3 .. 2^10, |D| = 500, |L_D| = 500
    /// .. 2500); standard: five V, |L_D| up to 1500; quick: a subset; tiny:
    /// a smoke test.
    pub fn for_ctx(ctx: &Ctx) -> Plan {
        Plan {
            keywords: ctx.pick(
                (3..=10).map(|p| 1 << p).collect(),
                vec![8, 32, 128, 512, 1024],
                vec![8, 32, 128, 1024],
                vec![8, 16],
            ),
            documents: ctx.pick(500, 500, 200, 40),
            results: ctx.pick(
                vec![1, 500, 1000, 1500, 2000, 2500],
                vec![1, 500, 1000, 1500],
                vec![1, 500, 1000],
                vec![1, 10, 30],
            ),
            reps: ctx.pick(5, 3, 3, 1),
        }
    }
}

fn err(context: &str) -> impl Fn(sesame_core::Error) -> BenchError + '_ {
    move |e| BenchError::scheme(format!("kpr12: {context}"), e)
}

fn keyword(i: usize) -> Vec<u8> {
    format!("k{i}").into_bytes()
}

/// The background index: `docs` documents, each holding each of `v`
/// keywords with probability 1/8 (at least one keyword each).
fn background(ctx: &Ctx, v: usize, docs: usize) -> Multimap {
    let mut rng = ctx.rng(&format!("verify/kpr12/db/{v}"));
    let mut db = Multimap::new();
    for d in 0..docs as DocId {
        let mut any = false;
        for i in 0..v {
            if rng.gen_ratio(1, 8) {
                db.entry(keyword(i)).or_default().push(d);
                any = true;
            }
        }
        if !any {
            db.entry(keyword(rng.gen_range(0..v))).or_default().push(d);
        }
    }
    db
}

/// Mean milliseconds of `reps` runs of `f`.
fn time_ms<T>(
    reps: usize,
    mut f: impl FnMut() -> Result<T, BenchError>,
) -> Result<(f64, T), BenchError> {
    let reps = reps.max(1);
    let t = Instant::now();
    let mut last = f()?;
    for _ in 1..reps {
        last = f()?;
    }
    Ok((t.elapsed().as_secs_f64() * 1e3 / reps as f64, last))
}

fn new_pair(ctx: &Ctx, label: &str) -> Result<(Kpr12Client, Kpr12Server), BenchError> {
    let mut rng = ctx.rng(label);
    let client = Kpr12Client::new(&mut rng, &Params::new()).map_err(err("new client"))?;
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    Ok((client, Kpr12Server::new(store)))
}

/// Fig. 2(b): IndexGen over `v` keywords.
fn index_row(ctx: &Ctx, plan: &Plan, v: usize) -> Result<Row, BenchError> {
    let db = background(ctx, v, plan.documents);
    let pairs: usize = db.values().map(Vec::len).sum();
    let (mut client, server) = new_pair(ctx, &format!("verify/kpr12/index/{v}"))?;
    let mut rng = ctx.rng(&format!("verify/kpr12/index-rng/{v}"));
    let (gen_ms, (cells, root)) = time_ms(plan.reps, || {
        client.index_gen(&mut rng, &db).map_err(err("IndexGen"))
    })?;
    let n_cells = cells.len();
    let t = Instant::now();
    server.put(true, cells).map_err(err("store index"))?;
    let store_ms = t.elapsed().as_secs_f64() * 1e3;
    if server.root().map_err(err("root"))? != root {
        return Err(BenchError::WrongResult(
            "kpr12: the server's Merkle root differs from the client's".into(),
        ));
    }
    let mut row = Row::new()
        .param("op", "kpr12_indexgen")
        .param("keywords", v)
        .param("documents", plan.documents);
    row.set("indexgen_ms", gen_ms)
        .set("server_store_ms", store_ms)
        .set("pairs", pairs as f64)
        .set("cells", n_cells as f64);
    Ok(row)
}

/// Fig. 3, 4, 5, 6 at `v` keywords: one index holding the background and,
/// in place of keywords k0, k1, ..., one keyword per result size.
fn sweep_rows(ctx: &Ctx, plan: &Plan, v: usize) -> Result<Vec<Row>, BenchError> {
    let mut db = background(ctx, v, plan.documents);
    for (i, &n) in plan.results.iter().enumerate() {
        db.insert(keyword(i), (0..n as DocId).collect());
    }
    let (mut client, server) = new_pair(ctx, &format!("verify/kpr12/sweep/{v}"))?;
    let mut rng = ctx.rng(&format!("verify/kpr12/sweep-rng/{v}"));
    let (cells, _) = client.index_gen(&mut rng, &db).map_err(err("IndexGen"))?;
    server.put(true, cells).map_err(err("store index"))?;
    let mut rows = Vec::new();
    for (i, &n) in plan.results.iter().enumerate() {
        let token = client.keyword_token(&keyword(i));
        let (search_ms, plain) =
            time_ms(plan.reps, || server.search(&token).map_err(err("search")))?;
        let (prove_ms, (ids, proof)) =
            time_ms(plan.reps, || server.prove(&token).map_err(err("prove")))?;
        let (verify_ms, checked) = time_ms(plan.reps, || {
            client.verify(&token, &ids, &proof).map_err(err("Verify"))
        })?;
        if plain != ids || checked.len() != n || checked.iter().zip(0..).any(|(a, b)| *a != b) {
            return Err(BenchError::WrongResult(format!(
                "kpr12: search of {n} results at V = {v} gave {} ids",
                checked.len()
            )));
        }
        let bytes = sesame_core::wire::encode(&proof)
            .map_err(err("encode proof"))?
            .len();
        let mut row = Row::new()
            .param("op", "kpr12_proof")
            .param("keywords", v)
            .param("results", n);
        row.set("search_ms", search_ms)
            .set("prove_ms", prove_ms)
            .set("proof_ms", (prove_ms - search_ms).max(0.0))
            .set("proof_kb", bytes as f64 / 1024.0)
            .set("cells_proved", proof.len() as f64);
        // At the paper's |D| = 500 and |L_D| = 500 (the standard scale
        // too): compared at every scale, with SI-SSE-RV's proof.
        if n == 500 && plan.documents == 500 {
            let paper = match v {
                128 => Some((10_000.0, "ms (about 10 s)")),
                1024 => Some((70_000.0, "ms (about 70 s)")),
                _ => None,
            };
            if let Some((ms, unit)) = paper {
                row.paper_any_scale("prove_ms", ms, unit, SOURCE_FIG3)
                    .why("prove_ms", WHY_PROOF);
            }
        }
        rows.push(row);
        let mut row = Row::new()
            .param("op", "kpr12_verify")
            .param("keywords", v)
            .param("results", n);
        row.set("verify_ms", verify_ms)
            .set("verify_ms_per_result", verify_ms / n.max(1) as f64);
        rows.push(row);
    }
    rows.push(update_row(&mut client, &server, &mut rng, plan, v)?);
    Ok(rows)
}

/// Fig. 5/6: adding then deleting documents of V / 8 keywords.
fn update_row(
    client: &mut Kpr12Client,
    server: &Kpr12Server,
    rng: &mut rand_chacha::ChaCha20Rng,
    plan: &Plan,
    v: usize,
) -> Result<Row, BenchError> {
    let per_doc = (v / 8).max(1);
    let reps = plan.reps.max(1);
    let mut sums = [0f64; 6];
    let mut bytes = 0usize;
    for r in 0..reps {
        let doc = 1_000_000 + r as DocId;
        let start = rng.gen_range(0..v);
        let words: Vec<Vec<u8>> = (0..per_doc).map(|j| keyword((start + j) % v)).collect();
        let t = Instant::now();
        let add = client
            .add_token(&mut *rng, doc, &words)
            .map_err(err("AddTok"))?;
        sums[0] += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let proof = server.add(&add).map_err(err("Add"))?;
        sums[1] += t.elapsed().as_secs_f64();
        let t = Instant::now();
        client.apply_add(&add, &proof).map_err(err("check Add"))?;
        sums[2] += t.elapsed().as_secs_f64();
        bytes += sesame_core::wire::encode(&proof)
            .map_err(err("encode proof"))?
            .len();
        let t = Instant::now();
        let del = client.del_token(doc, &words).map_err(err("DelTok"))?;
        sums[3] += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let proof = server.del(&del).map_err(err("Del"))?;
        sums[4] += t.elapsed().as_secs_f64();
        let t = Instant::now();
        client.apply_del(&del, &proof).map_err(err("check Del"))?;
        sums[5] += t.elapsed().as_secs_f64();
        bytes += sesame_core::wire::encode(&proof)
            .map_err(err("encode proof"))?
            .len();
    }
    if server.root().map_err(err("root"))? != client.root() {
        return Err(BenchError::WrongResult(
            "kpr12: roots differ after updates".into(),
        ));
    }
    let ms = |s: f64| s * 1e3 / reps as f64;
    let mut row = Row::new()
        .param("op", "kpr12_update")
        .param("keywords", v)
        .param("doc_keywords", per_doc);
    row.set("addtok_ms", ms(sums[0]))
        .set("add_ms", ms(sums[1]))
        .set("add_check_ms", ms(sums[2]))
        .set("deltok_ms", ms(sums[3]))
        .set("del_ms", ms(sums[4]))
        .set("del_check_ms", ms(sums[5]))
        .set("update_proof_kb", bytes as f64 / 1024.0 / (2 * reps) as f64);
    Ok(row)
}

fn charts() -> Vec<Chart> {
    let axis = |label: &str, log: bool| Axis {
        label: label.to_owned(),
        log,
    };
    let chart = |file: &str, title: &str, op: &str, x: &str, y: &[&str], series: &[&str]| Chart {
        file: file.to_owned(),
        title: title.to_owned(),
        x: x.to_owned(),
        y: y.iter().map(|s| (*s).to_owned()).collect(),
        series: series.iter().map(|s| (*s).to_owned()).collect(),
        filter: vec![("op".to_owned(), Value::from(op))],
        // V in powers of two (2^3 to 2^10) on a log axis, |L_D| in equal
        // steps of 500 (seed 003's Table 1) on a linear one, as verify's
        // own Fig. 3(c).
        x_axis: axis(x, x == "keywords"),
        y_axis: axis("ms", true),
    };
    vec![
        chart(
            "fig2b-kpr12-indexgen",
            "Fig. 2(b): KPR12 IndexGen (with the Merkle tree) vs V",
            "kpr12_indexgen",
            "keywords",
            &["indexgen_ms", "server_store_ms"],
            &[],
        ),
        chart(
            "fig3b-kpr12-proof-vs-v",
            "Fig. 3(b): KPR12 proof computation vs V, per |L_D|",
            "kpr12_proof",
            "keywords",
            &["prove_ms"],
            &["results"],
        ),
        chart(
            "fig3c-kpr12-proof-vs-results",
            "Fig. 3(c): KPR12 proof computation vs |L_D|, per V",
            "kpr12_proof",
            "results",
            &["prove_ms"],
            &["keywords"],
        ),
        chart(
            "fig4c-kpr12-verify",
            "Fig. 4(c): KPR12 Verify vs V, per |L_D|",
            "kpr12_verify",
            "keywords",
            &["verify_ms"],
            &["results"],
        ),
        chart(
            "fig5-kpr12-add",
            "Fig. 5: KPR12 AddTok and Add (and the client's check) vs V",
            "kpr12_update",
            "keywords",
            &["addtok_ms", "add_ms", "add_check_ms"],
            &[],
        ),
        chart(
            "fig6-kpr12-delete",
            "Fig. 6: KPR12 DelTok and Del (and the client's check) vs V",
            "kpr12_update",
            "keywords",
            &["deltok_ms", "del_ms", "del_check_ms"],
            &[],
        ),
    ]
}

/// Appends the KPR12 rows, charts and notes of the `verify` experiment to
/// `rs`.
pub fn kpr12_rows(ctx: &Ctx, rs: &mut ResultSet) -> Result<(), BenchError> {
    let plan = Plan::for_ctx(ctx);
    for name in [
        "indexgen_ms",
        "server_store_ms",
        "search_ms",
        "prove_ms",
        "proof_ms",
        "proof_kb",
        "verify_ms",
        "addtok_ms",
        "add_ms",
        "add_check_ms",
        "deltok_ms",
        "del_ms",
        "del_check_ms",
    ] {
        if !rs.display.iter().any(|d| d == name) {
            rs.display.push(name.to_owned());
        }
    }
    rs.charts.extend(charts());
    for &v in &plan.keywords {
        rs.rows.push(index_row(ctx, &plan, v)?);
    }
    for &v in &plan.keywords {
        let rows = sweep_rows(ctx, &plan, v)?;
        rs.rows.extend(rows);
    }
    rs.notes.push(format!(
        "kpr12: {} documents, each holding each of V keywords with probability 1/8; the proof \
         and Verify sweeps replace keywords k0, k1, ... by keywords of exactly |L_D| results \
         ({:?}); updates add then delete a document of max(1, V/8) keywords; {} repetition(s) \
         per step, in-process on the memory store",
        plan.documents, plan.results, plan.reps
    ));
    rs.notes.push(
        "kpr12: the Merkle tree covers every cell of the encrypted index (search table, search \
         and deletion arrays, pair dictionary, free list); prove_ms is the server's search with \
         the proof component (the authentication path of every cell read), search_ms the same \
         search without it, proof_ms their difference; verify_ms replays the search over the \
         proof against the client's root"
            .to_owned(),
    );
    rs.notes.push(
        "kpr12: the seed gives numbers only for the proof computation at |L_D| = 500 (about 10 s \
         at V = 2^7, 70 s at V = 2^10); its Fig. 2, 4, 5 and 6 are plots without values"
            .to_owned(),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_checks_every_answer_and_fills_every_figure() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Ctx::tiny(dir.path());
        let mut rs = ctx.result_set(&crate::experiments::verify::Verify);
        kpr12_rows(&ctx, &mut rs).unwrap();
        let count = |op: &str| rs.rows_with("op", op);
        // Two values of V; three result sizes each.
        assert_eq!(
            (
                count("kpr12_indexgen"),
                count("kpr12_proof"),
                count("kpr12_verify"),
                count("kpr12_update")
            ),
            (2, 6, 6, 2)
        );
        for c in &rs.charts {
            assert!(rs.rows.iter().any(|r| c.selects(r)), "{}", c.file);
        }
    }
}
