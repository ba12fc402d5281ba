//! The harness end to end: `run` at tiny scale writes parseable reports
//! (the smoke test CI runs), and the loaders read small fixtures.

// Test helpers panic on failure by design.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use sesame_bench::data::{Corpus, Flights};
use sesame_bench::result::Table;
use sesame_bench::{BenchArgs, BenchError, ResultSet};

fn tiny(experiment: &str, out: &Path, data: &Path) -> BenchArgs {
    let mut args = BenchArgs::new(experiment);
    args.tiny = true;
    args.out = out.to_path_buf();
    args.data = data.to_path_buf();
    args
}

fn check_reports(dir: &Path, rs: &ResultSet) {
    let json = std::fs::read_to_string(dir.join("results.json")).unwrap();
    assert_eq!(&ResultSet::from_json(&json).unwrap(), rs);
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    let table = Table::from_csv(&csv).unwrap();
    assert_eq!(table.rows.len(), rs.rows.len());
    let rows = ResultSet::rows_from_table(&table, &rs.param_names()).unwrap();
    assert_eq!(rows, rs.rows);
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    assert!(!rs.charts.is_empty());
    for chart in &rs.charts {
        let svg = std::fs::read_to_string(dir.join(format!("{}.svg", chart.file))).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{}",
            chart.file
        );
        assert!(html.contains(&format!("id=\"{}\"", chart.file)));
    }
    assert!(dir.join("results.txt").is_file());
}

/// Writes a tiny SpamAssassin-shaped corpus and flights table.
fn fixture(data: &Path) {
    let spam = data.join("spam-assassin");
    for (group, id, text) in [
        (
            "spam-1",
            "00001",
            "From: a@b.org\nSubject: Cheap ĀÞ offer\n\nBuy now, buy NOW!",
        ),
        (
            "easy-ham-1",
            "00002",
            "From: c@d.org\nSubject: Re: lunch\n  tomorrow\n\nSee you at noon.",
        ),
        ("easy-ham-1", "00001", "Subject: none\r\n\r\nbody only"),
    ] {
        std::fs::create_dir_all(spam.join(group)).unwrap();
        let json = serde_json::json!({
            "id": id, "group": group,
            "checksum": {"type": "MD5", "value": "0"}, "text": text
        });
        std::fs::write(
            spam.join(group).join(format!("{id}.abc.json")),
            json.to_string(),
        )
        .unwrap();
        std::fs::write(spam.join(group).join(format!("{id}.abc.txt")), text).unwrap();
    }
    let flights = data.join("nycflights13");
    std::fs::create_dir_all(&flights).unwrap();
    std::fs::write(
        flights.join("flights.csv"),
        "year,dep_delay,carrier,air_time,distance\n\
         2013,2,UA,227,1400\n2013,-4,\"A,A\",NA,1416\n2013,NA,B6,160,1089\n2013,0,DL,,762\n",
    )
    .unwrap();
}

#[test]
fn tiny_datasets_run_writes_parseable_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let data = tmp.path().join("data");
    fixture(&data);
    let mut printed = Vec::new();
    let sets = sesame_bench::run_to(&tiny("datasets", &out, &data), &mut printed).unwrap();
    assert_eq!(sets.len(), 1);
    check_reports(&out.join("datasets"), &sets[0]);
    let text = String::from_utf8(printed).unwrap();
    assert!(text.contains("== datasets:"));
    assert!(text.contains("spamassassin") && text.contains("flights.distance"));

    let mut listing = Vec::new();
    sesame_bench::run_to(&tiny("list", &out, &data), &mut listing).unwrap();
    let listing = String::from_utf8(listing).unwrap();
    assert!(listing.contains("sse-static") && listing.contains("datasets"));

    let err = sesame_bench::run_to(&tiny("nope", &out, &data), &mut Vec::new()).unwrap_err();
    assert!(matches!(err, BenchError::UnknownExperiment { .. }));
    assert!(err.to_string().contains("sse-static"));
}

/// `--resume`: a run of two experiments stopped after the first (and the
/// second left half written, as by a killed process) is finished by a
/// resumed run that does not rerun the first and leaves every report and
/// the front page complete; a resumed run with another seed reruns it.
#[test]
fn an_interrupted_run_resumes_where_it_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let data = tmp.path().join("data");
    fixture(&data);
    let mut args = tiny("datasets,ore", &out, &data);
    args.stop_after = Some(1);
    let mut printed = Vec::new();
    let first = sesame_bench::run_to(&args, &mut printed).unwrap();
    assert_eq!(first.len(), 1);
    assert!(out.join("datasets").join("finished.json").is_file());
    assert!(String::from_utf8(printed)
        .unwrap()
        .contains("stopped after 1 experiment"));
    // The process "killed" while ore was being written: a report without
    // its record.
    std::fs::create_dir_all(out.join("ore")).unwrap();
    std::fs::write(out.join("ore").join("results.json"), "{\"half\": ").unwrap();
    // A mark in the finished report that a rerun would overwrite.
    let done = out.join("datasets").join("results.json");
    let mut marked = ResultSet::from_json(&std::fs::read_to_string(&done).unwrap()).unwrap();
    marked.notes.push("mark of the first run".into());
    std::fs::write(&done, marked.to_json().unwrap()).unwrap();

    args.stop_after = None;
    args.resume = true;
    let mut printed = Vec::new();
    let sets = sesame_bench::run_to(&args, &mut printed).unwrap();
    let text = String::from_utf8(printed).unwrap();
    assert!(
        text.contains("== datasets: finished by an earlier run"),
        "{text}"
    );
    assert!(text.contains("== ore:"), "{text}");
    let names: Vec<&str> = sets.iter().map(|s| s.experiment.as_str()).collect();
    assert_eq!(names, ["datasets", "ore"]);
    assert!(std::fs::read_to_string(&done)
        .unwrap()
        .contains("mark of the first run"));
    let ore = std::fs::read_to_string(out.join("ore").join("results.json")).unwrap();
    assert_eq!(ResultSet::from_json(&ore).unwrap(), sets[1]);
    assert!(out.join("ore").join("index.html").is_file());
    assert!(out.join("ore").join("finished.json").is_file());
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(index.contains("datasets/index.html") && index.contains("ore/index.html"));
    let fidelity = std::fs::read_to_string(out.join("fidelity.csv")).unwrap();
    assert!(fidelity.lines().any(|l| l.starts_with("ore,")));
    assert!(fidelity.lines().any(|l| l.starts_with("datasets,")));

    // Another seed is another run: nothing of the first is reused.
    args.seed = 2;
    let mut printed = Vec::new();
    sesame_bench::run_to(&args, &mut printed).unwrap();
    assert!(!String::from_utf8(printed)
        .unwrap()
        .contains("finished by an earlier run"));
    assert!(!std::fs::read_to_string(&done)
        .unwrap()
        .contains("mark of the first run"));
}

/// A result set stored by an older build (reasons missing or since
/// rewritten, growth laws absent, times pooled under a source since split)
/// is judged by the current code on `--resume`: the fidelity table and the
/// stored report are those of a run by the current code.
#[test]
fn a_resumed_run_judges_stored_results_with_the_current_code() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let data = tmp.path().join("data");
    fixture(&data);
    let mut args = tiny("aura", &out, &data);
    let fresh = sesame_bench::run_to(&args, &mut Vec::new()).unwrap();
    let fidelity = || std::fs::read_to_string(out.join("fidelity.csv")).unwrap();
    let expected = fidelity();
    let stored = out.join("aura").join("results.json");
    let mut old = fresh[0].clone();
    let papers = old.rows.iter_mut().flat_map(|r| r.paper.iter_mut());
    for (i, p) in papers.enumerate() {
        p.why = (i % 2 == 0).then(|| "no reason recorded yet".to_owned());
        p.growth = None;
        p.source = p.source.replace(", SDd at every d", "");
    }
    std::fs::write(&stored, old.to_json().unwrap()).unwrap();
    std::fs::remove_file(out.join("fidelity.csv")).unwrap();

    args.resume = true;
    let mut printed = Vec::new();
    sesame_bench::run_to(&args, &mut printed).unwrap();
    let again = fidelity();
    let differ: Vec<&str> = expected
        .lines()
        .zip(again.lines())
        .filter(|(a, b)| a != b)
        .map(|(_, b)| b)
        .collect();
    assert!(differ.is_empty(), "re-judged rows differ: {differ:#?}");
    assert_eq!(again, expected);
    let text = String::from_utf8(printed).unwrap();
    assert!(text.contains("set anew by this build"), "{text}");
    let back = ResultSet::from_json(&std::fs::read_to_string(&stored).unwrap()).unwrap();
    assert_eq!(back, fresh[0]);
}

#[test]
fn sse_static_measures_every_registered_static_scheme() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    fixture(&data);
    let mut printed = Vec::new();
    let sets = sesame_bench::run_to(&tiny("sse-static", tmp.path(), &data), &mut printed).unwrap();
    let rs = &sets[0];
    check_reports(&tmp.path().join("sse-static"), rs);
    let failures: Vec<&String> = rs
        .notes
        .iter()
        .filter(|n| n.starts_with(sesame_bench::experiments::sse_static::FAILED))
        .collect();
    assert!(failures.is_empty(), "{failures:?}");
    assert!(String::from_utf8(printed)
        .unwrap()
        .contains("== sse-static:"));
    let statics: Vec<_> = sesame_sse::schemes()
        .into_iter()
        .filter(|s| s.descriptor.kind == sesame_core::SchemeKind::StaticSse)
        .collect();
    for s in &statics {
        for store in ["memory", "redb"] {
            for op in ["setup", "search"] {
                let n = rs
                    .rows
                    .iter()
                    .filter(|r| {
                        r.params.get("scheme") == Some(&s.descriptor.name.into())
                            && r.params.get("store") == Some(&store.into())
                            && r.params.get("op") == Some(&op.into())
                    })
                    .count();
                assert!(n > 0, "{} {store} {op}", s.descriptor.name);
            }
        }
    }
    // Searches report the modelled network times and store reads.
    let search = rs
        .rows
        .iter()
        .find(|r| r.params.get("op") == Some(&"search".into()));
    if let Some(row) = search {
        for f in [
            "client_ms",
            "server_ms",
            "lan_ms",
            "wan103_ms",
            "wan197_ms",
            "store_reads",
            "bytes_down",
        ] {
            assert!(row.figures.get(f).is_some(), "{f}");
        }
        let lan = row.figures.get("lan_ms").unwrap();
        let wan = row.figures.get("wan103_ms").unwrap();
        assert!(wan - lan > 200.0, "one round at 103 ms each way");
    }
    // Where PiBas's reads go: those that return an entry are one per block
    // of ids (the paper's count) and match; the rest are labels read past
    // the list's end, and the fidelity table says so where the total
    // differs from the bound.
    let fidelity = sesame_bench::fidelity::comparisons(&sets);
    for row in rs.rows.iter().filter(|r| {
        r.params.get("op") == Some(&"search".into())
            && r.params.get("scheme") == Some(&"pibas".into())
    }) {
        let n = row.number("result_size").unwrap();
        let block = row.number("block").unwrap();
        let found = row.figures.get("store_entries_read").copied().unwrap();
        let absent = row.figures.get("store_reads_absent").copied().unwrap();
        assert_eq!(found, (n / block).ceil(), "{row:?}");
        assert_eq!(
            found + absent,
            row.figures.get("store_reads").copied().unwrap()
        );
    }
    let pibas: Vec<_> = fidelity
        .iter()
        .filter(|c| c.configuration.contains("scheme=pibas"))
        .collect();
    assert!(pibas
        .iter()
        .filter(|c| c.figure == "store_entries_read")
        .all(|c| c.verdict == "matches"));
    let differs: Vec<_> = pibas.iter().filter(|c| c.verdict == "differs").collect();
    assert!(
        !differs.is_empty(),
        "a single block is read with 3 absent labels"
    );
    for c in differs {
        assert_eq!(c.figure, "store_reads");
        assert!(c.why.contains("find nothing"), "{}", c.why);
    }
    // The corpus fixture gives one setup row per scheme variant and store.
    if !statics.is_empty() {
        assert!(rs
            .rows
            .iter()
            .any(|r| r.params.get("dataset") == Some(&"spamassassin".into())));
    }
}

#[test]
fn loaders_read_fixtures() {
    let tmp = tempfile::tempdir().unwrap();
    fixture(tmp.path());
    let corpus = Corpus::load_spamassassin(tmp.path()).unwrap();
    assert_eq!(corpus.len(), 3);
    // Groups by name, then files by name.
    let order: Vec<(&str, &str)> = corpus
        .documents
        .iter()
        .map(|d| (d.group.as_str(), d.id.as_str()))
        .collect();
    assert_eq!(
        order,
        [
            ("easy-ham-1", "00001"),
            ("easy-ham-1", "00002"),
            ("spam-1", "00001")
        ]
    );
    let lunch = &corpus.documents[1];
    assert_eq!(lunch.index, 1);
    assert_eq!(
        lunch.header("subject").as_deref(),
        Some("Re: lunch tomorrow")
    );
    assert_eq!(lunch.header("FROM").as_deref(), Some("c@d.org"));
    assert_eq!(lunch.header("To"), None);
    assert_eq!(lunch.body(), "See you at noon.");
    assert!(lunch.headers.ends_with("tomorrow"));
    assert_eq!(corpus.documents[0].body(), "body only");
    let spam = &corpus.documents[2];
    assert!(spam.keywords().contains(&"āþ".to_owned()));
    assert_eq!(spam.keywords().iter().filter(|k| *k == "buy").count(), 1);
    let sample = corpus.sample(2, 7);
    assert_eq!(sample, corpus.sample(2, 7));
    assert_eq!(sample.len(), 2);
    let index = Corpus::inverted_index(&corpus.documents);
    assert_eq!(index[b"subject".as_slice()], [0, 1, 2]);
    assert_eq!(index[b"now".as_slice()], [2]);

    let flights = Flights::load(tmp.path()).unwrap();
    assert_eq!(flights.len(), 4);
    assert_eq!(flights.columns()[2], "carrier");
    let delay = flights.column("dep_delay").unwrap();
    assert_eq!(delay.values, [Some(2.0), Some(-4.0), None, Some(0.0)]);
    assert_eq!(delay.missing(), 1);
    let air = flights.column("air_time").unwrap();
    assert_eq!(air.present(), [227.0, 160.0]);
    assert_eq!(flights.column("distance").unwrap().values[1], Some(1416.0));
    let mut took = flights.column("distance").unwrap().take(3, 1);
    assert_eq!(took.len(), 3);
    took.sort_by(f64::total_cmp);
    assert!(took.windows(2).all(|w| w[0] < w[1]));
    assert!(matches!(
        flights.column("carrier"),
        Err(BenchError::Data { .. })
    ));
    assert!(matches!(
        flights.column("nope"),
        Err(BenchError::InvalidArgument(_))
    ));
}

#[test]
fn missing_data_names_the_fetch_script() {
    let tmp = tempfile::tempdir().unwrap();
    let err = Corpus::load_spamassassin(tmp.path()).unwrap_err();
    assert!(matches!(err, BenchError::DataMissing { .. }));
    assert!(err.to_string().contains("scripts/fetch-data.sh"), "{err}");
    let err = Flights::load(tmp.path()).unwrap_err();
    assert!(err.to_string().contains("scripts/fetch-data.sh"), "{err}");
}
