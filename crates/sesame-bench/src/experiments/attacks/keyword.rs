//! The keyword-scheme rows: count, IKK, volume and file-injection
//! attacks on each scheme's recorded view.

use std::collections::{BTreeMap, BTreeSet};

use rand::seq::SliceRandom;
use sesame_attacks::{count, ikk, injection, leakage, volume};

use super::views::{mail, record, sealed, Doc};
use super::{pct, Plan, CCS15, COUNT_Z, FRACTIONS, INJECTED, ZKP16};
use crate::error::BenchError;
use crate::experiment::Ctx;
use crate::result::{ResultSet, Row};

/// Share of `queries` whose true keyword `claim` names.
pub(super) fn recovery(truth: &[String], claim: impl Fn(usize) -> Option<String>) -> (f64, f64) {
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
pub(super) fn keyword_rows(ctx: &Ctx, plan: &Plan, rs: &mut ResultSet) -> Result<(), BenchError> {
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
