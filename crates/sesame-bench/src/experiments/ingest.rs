//! `ingest`: `sesame add` end to end, as a user runs it: a folder of real
//! files indexed through a profile (reading, tokenizing, storing the
//! encrypted documents, the scheme's updates, the crash-safe intents),
//! embedded (redb) and over loopback TLS to a server on redb.
//!
//! Corpus: the files under `<data>/corpus` (built by
//! `scripts/build-corpus.sh`, which `scripts/fetch-data.sh` runs: the
//! Python standard library's sources and Debian `copyright` files), a
//! seeded sample of them at the smaller scales. Without it, the mail
//! corpus's messages written out as files stand in, and without those,
//! synthetic text (each named in the run's notes).
//!
//! Per scheme and deployment: pairs/s (distinct keyword-document pairs
//! indexed per second of the whole `add`), MB/s of plaintext, bytes on
//! disk per pair, bytes the index wrote per pair against the scheme's own
//! entry size, the process's peak resident memory, and where the time went:
//! reading and tokenizing (the `Reading` phase), other client work
//! (document encryption, the scheme's client cryptography, intents),
//! the server half with its store commits, and transport.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use rand::seq::SliceRandom;
use rand::Rng;
use rand::SeedableRng;
use sesame_client::{insecure, NetworkBackend, Phase, Profile, ServerBinding, DEFAULT_INDEX};
use sesame_core::{Params, Store};

use crate::data::Corpus;
use crate::error::BenchError;
use crate::experiment::{Ctx, Experiment};
use crate::result::{Axis, Chart, ResultSet, Row, Value};

/// The `ingest` experiment.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ingest;

/// Schemes indexed at every scale, and the end-to-end goal in pairs/s
/// (issue "Indexing at hardware speed"; none for the others).
const SCHEMES: [(&str, Option<f64>); 6] = [
    ("fast", Some(250_000.0)),
    ("aura", Some(80_000.0)),
    ("uedsse", None),
    ("janus-pp", None),
    // Its updates read the server, so the SDK rebuilds it with a setup.
    ("sdd", None),
    ("pibas", Some(500_000.0)),
];

/// Where the corpus is looked for, under the data folder.
pub const CORPUS_DIR: &str = "corpus";

fn err(context: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError::InvalidArgument(format!("ingest: {context}: {e}"))
}

/// Sizes of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Files indexed (at most; all of them at full scale).
    pub files: usize,
    /// Whether the server deployment runs too.
    pub server: bool,
}

impl Plan {
    /// Full: the whole corpus; standard: 150 files; quick: 60; tiny: 12.
    /// The server runs at every scale.
    pub fn for_ctx(ctx: &Ctx) -> Plan {
        Plan {
            files: ctx.pick(usize::MAX, 150, 60, 12),
            server: true,
        }
    }
}

/// Every regular file under `dir`, sorted.
fn list(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::path);
    for e in entries {
        let t = e.file_type()?;
        if t.is_dir() {
            list(&e.path(), out)?;
        } else if t.is_file() {
            out.push(e.path());
        }
    }
    Ok(())
}

/// The files to index, and a note on where they come from.
fn corpus(ctx: &Ctx, plan: &Plan, notes: &mut Vec<String>) -> Result<Vec<PathBuf>, BenchError> {
    let dir = ctx.data_dir.join(CORPUS_DIR);
    let mut files = Vec::new();
    if dir.is_dir() {
        list(&dir, &mut files).map_err(|e| err("list the corpus", e))?;
    }
    if !files.is_empty() {
        let all = files.len();
        files.shuffle(&mut ctx.rng("ingest/sample"));
        files.truncate(plan.files);
        files.sort();
        notes.push(format!(
            "corpus: {} of the {all} files under {} (scripts/build-corpus.sh)",
            files.len(),
            dir.display()
        ));
        return Ok(files);
    }
    let out = ctx.work_dir.join("ingest-corpus");
    std::fs::create_dir_all(&out).map_err(|e| err("make the stand-in corpus", e))?;
    let n = plan.files.min(2_000);
    let texts: Vec<String> = match Corpus::load_spamassassin(&ctx.data_dir) {
        Ok(c) => {
            notes.push(format!(
                "no corpus under {}: {n} mail messages written as files stand in (run \
                 scripts/fetch-data.sh, which builds it)",
                dir.display()
            ));
            c.sample(n, ctx.seed)
                .iter()
                .map(|d| d.keywords().join(" "))
                .collect()
        }
        Err(BenchError::DataMissing { .. }) => {
            notes.push(format!(
                "no corpus under {} and no mail corpus: {n} files of synthetic text (random \
                 words) stand in (run scripts/fetch-data.sh)",
                dir.display()
            ));
            let mut rng = ctx.rng("ingest/synthetic");
            let vocab: Vec<String> = (0..20_000)
                .map(|_| {
                    let len = rng.gen_range(3..10);
                    (0..len)
                        .map(|_| rng.gen_range(b'a'..=b'z') as char)
                        .collect()
                })
                .collect();
            (0..n)
                .map(|_| {
                    let words = rng.gen_range(200..2_000);
                    (0..words)
                        .map(|_| vocab[rng.gen_range(0..vocab.len())].as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect()
        }
        Err(e) => return Err(e),
    };
    for (i, t) in texts.iter().enumerate() {
        let p = out.join(format!("{i:05}.txt"));
        std::fs::write(&p, t).map_err(|e| err("write the stand-in corpus", e))?;
        files.push(p);
    }
    Ok(files)
}

/// Bytes of every file under `path` (a file or a folder).
fn disk_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::metadata(path) else {
        return 0;
    };
    if meta.is_file() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|rd| rd.flatten().map(|e| disk_bytes(&e.path())).sum())
        .unwrap_or(0)
}

/// What the redb store at `path` holds, by redb's accounting.
struct Held {
    /// Key and value bytes (the logical size, against which the file's
    /// size shows the engine's overhead).
    live: u64,
    /// Pages in use: the live bytes and the unused part of their pages.
    in_use: u64,
    /// Blocks on disk of the file once rewritten (`RedbStore::vacuum`).
    vacuumed: u64,
}

fn held(path: &Path) -> Result<Held, BenchError> {
    let store = sesame_store::RedbStore::open(path).map_err(|e| err("reopen the store", e))?;
    let all = store
        .scan_prefix(b"")
        .map_err(|e| err("scan the store", e))?;
    let live = all.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
    let (before, after) = store.vacuum().map_err(|e| err("vacuum the store", e))?;
    Ok(Held {
        live,
        in_use: before.allocated_pages * before.page_size,
        vacuumed: after.disk_bytes,
    })
}

/// Resets the process's peak resident memory (Linux: `clear_refs` 5);
/// false where that is not possible.
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's peak resident memory in bytes (Linux `VmHWM`).
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// A server deployment: a loopback TLS server over a redb file.
struct Deployment {
    server: sesame_server::RunningServer,
    binding: ServerBinding,
    store_path: PathBuf,
}

fn deploy(ctx: &Ctx, tag: &str) -> Result<Deployment, BenchError> {
    let certs = sesame_server::certs::localhost().map_err(|e| err("certificates", e))?;
    let store_path = ctx.work_dir.join(format!("ingest-server-{tag}.redb"));
    let _ = std::fs::remove_file(&store_path);
    let store: Arc<dyn Store> = Arc::new(
        sesame_store::RedbStore::open(&store_path).map_err(|e| err("open the server store", e))?,
    );
    let token = format!("ingest-{tag}-token-0123456789");
    let server = crate::experiments::server::loopback_server(&certs, &token, store)?;
    let mut rng =
        rand_chacha::ChaCha20Rng::from_rng(ctx.rng("ingest/prefix")).map_err(|e| err("seed", e))?;
    let binding = ServerBinding {
        url: server.url(),
        token,
        ca_pem: Some(certs.ca_pem.into_bytes()),
        index_prefix: ServerBinding::fresh_prefix(&mut rng),
    };
    Ok(Deployment {
        server,
        binding,
        store_path,
    })
}

/// What one `add` measured.
struct Measured {
    report: sesame_client::AddReport,
    wall_s: f64,
    reading_s: f64,
    documents_s: f64,
    client_s: f64,
    server_s: f64,
    transport_s: f64,
    index_bytes_written: u64,
    peak: Option<u64>,
}

/// Runs one `add` of `files`, timing its phases: reading (until the first
/// progress report of another phase), storing the documents (until the
/// index phase starts), and the index phase, which a meter span splits
/// into client work, server handling and transport.
fn add(profile: &Profile, files: &[PathBuf]) -> Result<Measured, BenchError> {
    let mut session = profile
        .session(DEFAULT_INDEX)
        .map_err(|e| err("open the session", e))?;
    let meter = session.meter().clone();
    let peak_ok = reset_peak();
    let start = Instant::now();
    let mut reading_end: Option<Instant> = None;
    let mut indexing: Option<(Instant, sesame_core::meter::Span)> = None;
    let whole = meter.span();
    let report = session.add_documents(files, &mut |p| {
        if p.phase != Phase::Reading && reading_end.is_none() {
            reading_end = Some(Instant::now());
        }
        if p.phase == Phase::Indexing && indexing.is_none() {
            indexing = Some((Instant::now(), meter.span()));
        }
    });
    let end = Instant::now();
    let whole = whole.finish();
    let report = report.map_err(|e| err("add", e))?;
    let peak = peak_ok.then(peak_rss).flatten();
    let secs = |ns: u64| ns as f64 / 1e9;
    let wall_s = end.duration_since(start).as_secs_f64();
    let reading_end = reading_end.unwrap_or(end);
    let reading_s = reading_end.duration_since(start).as_secs_f64();
    let (documents_s, client_s, server_s, transport_s) = match indexing {
        Some((at, span)) => {
            let snap = span.finish();
            let index_wall = end.duration_since(at).as_secs_f64();
            let client = secs(snap.client_ns).min(index_wall);
            let server = secs(snap.server_ns).min(index_wall - client);
            (
                at.duration_since(reading_end).as_secs_f64(),
                client,
                server,
                index_wall - client - server,
            )
        }
        None => (end.duration_since(reading_end).as_secs_f64(), 0.0, 0.0, 0.0),
    };
    Ok(Measured {
        report,
        wall_s,
        reading_s,
        documents_s,
        client_s,
        server_s,
        transport_s,
        index_bytes_written: whole.store.bytes_written,
        peak,
    })
}

fn run_one(
    ctx: &Ctx,
    scheme: &str,
    goal: Option<f64>,
    deployment: &str,
    files: &[PathBuf],
    plain_bytes: u64,
) -> Result<Row, BenchError> {
    let dir = ctx.work_dir.join(format!("ingest-{deployment}-{scheme}"));
    let _ = std::fs::remove_dir_all(&dir);
    let kdf = insecure::fast_kdf();
    let pass = "ingest";
    let (m, disk, live) = if deployment == "server" {
        let d = deploy(ctx, scheme)?;
        let backend = NetworkBackend::connect(&d.binding).map_err(|e| err("connect", e))?;
        backend
            .create_index(DEFAULT_INDEX, scheme, &Params::new())
            .map_err(|e| err("create the server index", e))?;
        let profile =
            Profile::create_with_server(&dir, pass, scheme, &Params::new(), kdf, &d.binding)
                .map_err(|e| err("create the profile", e))?;
        let m = add(&profile, files)?;
        drop(profile);
        d.server.shutdown().map_err(|e| err("stop the server", e))?;
        (m, disk_bytes(&d.store_path), held(&d.store_path)?)
    } else {
        let profile = Profile::create_with_kdf(&dir, pass, scheme, &Params::new(), kdf)
            .map_err(|e| err("create the profile", e))?;
        let m = add(&profile, files)?;
        let store = profile.store_path();
        drop(profile);
        (m, disk_bytes(&dir), held(&store)?)
    };
    let _ = std::fs::remove_dir_all(&dir);
    let pairs = m.report.pairs as f64;
    let mut row = Row::new()
        .param("scheme", scheme)
        .param("deployment", deployment)
        .param("files", files.len() as u64);
    row.set("pairs", m.report.pairs as f64);
    row.set("keywords", m.report.keywords as f64);
    row.set("wall_s", m.wall_s);
    row.set("pairs_per_s", pairs / m.wall_s.max(1e-9));
    row.set("mb_per_s", plain_bytes as f64 / 1e6 / m.wall_s.max(1e-9));
    row.set("reading_s", m.reading_s);
    row.set("documents_s", m.documents_s);
    row.set("client_s", m.client_s);
    row.set("server_s", m.server_s);
    row.set("transport_s", m.transport_s);
    row.set("disk_mb", disk as f64 / 1e6);
    row.set("disk_bytes_per_pair", disk as f64 / pairs.max(1.0));
    row.set("live_bytes_per_pair", live.live as f64 / pairs.max(1.0));
    row.set("in_use_bytes_per_pair", live.in_use as f64 / pairs.max(1.0));
    row.set(
        "vacuumed_bytes_per_pair",
        live.vacuumed as f64 / pairs.max(1.0),
    );
    row.set(
        "index_written_per_pair",
        m.index_bytes_written as f64 / pairs.max(1.0),
    );
    if let Some(p) = m.peak {
        row.set("peak_mb", p as f64 / 1e6);
    }
    if let Some(g) = goal {
        row.set("goal_pairs_per_s", g);
    }
    Ok(row)
}

fn charts() -> Vec<Chart> {
    let axis = |label: &str, log: bool| Axis {
        label: label.to_owned(),
        log,
    };
    vec![
        Chart {
            file: "pairs-per-second".to_owned(),
            title: "Keyword-document pairs indexed per second, whole add".to_owned(),
            x: "scheme".to_owned(),
            y: vec!["pairs_per_s".to_owned()],
            series: vec!["deployment".to_owned()],
            filter: Vec::new(),
            x_axis: axis("scheme", false),
            y_axis: axis("pairs / s", true),
        },
        Chart {
            file: "time-split-embedded".to_owned(),
            title: "Where an embedded add's time goes".to_owned(),
            x: "scheme".to_owned(),
            y: [
                "reading_s",
                "documents_s",
                "client_s",
                "server_s",
                "transport_s",
            ]
            .map(str::to_owned)
            .to_vec(),
            series: Vec::new(),
            filter: vec![("deployment".to_owned(), Value::from("embedded"))],
            x_axis: axis("scheme", false),
            y_axis: axis("seconds", false),
        },
        Chart {
            file: "disk-per-pair".to_owned(),
            title: "Bytes per pair: the files, pages in use, on disk once vacuumed, and live keys \
                    and values"
                .to_owned(),
            x: "scheme".to_owned(),
            y: vec![
                "disk_bytes_per_pair".to_owned(),
                "in_use_bytes_per_pair".to_owned(),
                "vacuumed_bytes_per_pair".to_owned(),
                "live_bytes_per_pair".to_owned(),
            ],
            series: Vec::new(),
            filter: vec![("deployment".to_owned(), Value::from("embedded"))],
            x_axis: axis("scheme", false),
            y_axis: axis("bytes per pair", false),
        },
    ]
}

impl Experiment for Ingest {
    fn name(&self) -> &'static str {
        "ingest"
    }

    fn title(&self) -> &'static str {
        "sesame add end to end: pairs/s, MB/s, bytes on disk, peak memory and the time split, \
         embedded and over the server"
    }

    fn seed_paper(&self) -> &'static str {
        "none: the product's own indexing path (no paper reports it)"
    }

    fn run(&self, ctx: &Ctx) -> Result<ResultSet, BenchError> {
        let mut rs = ctx.result_set(self);
        rs.display = [
            "pairs",
            "wall_s",
            "pairs_per_s",
            "goal_pairs_per_s",
            "mb_per_s",
            "reading_s",
            "documents_s",
            "client_s",
            "server_s",
            "transport_s",
            "disk_bytes_per_pair",
            "live_bytes_per_pair",
            "in_use_bytes_per_pair",
            "vacuumed_bytes_per_pair",
            "index_written_per_pair",
            "peak_mb",
        ]
        .map(str::to_owned)
        .to_vec();
        rs.charts = charts();
        let plan = Plan::for_ctx(ctx);
        let files = corpus(ctx, &plan, &mut rs.notes)?;
        let plain_bytes: u64 = files.iter().map(|f| disk_bytes(f)).sum();
        rs.notes.push(format!(
            "{} files, {:.1} MB of plaintext; each add starts from a fresh profile \
             (Argon2id at its minimum cost: insecure, for benchmarks only; the KDF is not part \
             of an add)",
            files.len(),
            plain_bytes as f64 / 1e6
        ));
        let deployments: &[&str] = if plan.server {
            &["embedded", "server"]
        } else {
            &["embedded"]
        };
        for (scheme, goal) in SCHEMES {
            for deployment in deployments {
                rs.rows
                    .push(run_one(ctx, scheme, goal, deployment, &files, plain_bytes)?);
            }
        }
        rs.notes.push(
            "time split: reading_s = the reading phase (files read and tokenized on one worker \
             per core); documents_s = from then until the index phase starts (ids reserved, the \
             document thread started); the index phase split by a meter span into client_s \
             (the client thread outside channel calls: the scheme's client cryptography, \
             intents saved, the catalog), server_s (the server half handling the requests, store \
             commits included) and transport_s (the rest of the time in channel calls: TLS, \
             framing, loopback; embedded rows run the server half in process). The documents \
             are encrypted and stored on a thread of their own during the index phase: their \
             server half counts in server_s and their channel time in transport_s, beside the \
             index's. A static scheme's rebuild is its index phase"
                .to_owned(),
        );
        rs.notes.push(
            "disk = the length of the profile folder's files after the add (embedded: index, \
             documents, state) or of the server's redb file (server rows); live = the key and \
             value bytes the redb file holds (index and documents); in_use = redb's pages in \
             use (the live bytes and their pages' unused part; the rest of the file is free \
             pages that copy-on-write commits left); vacuumed = the redb file's blocks on disk \
             once rewritten by `RedbStore::vacuum` (what `sesame compact` does); \
             index_written_per_pair = key and value bytes the \
             server half wrote to its store, per pair, documents included where the backend \
             stores them through the same store; peak_mb = the whole bench process's peak \
             resident memory during the add (the in-process server's included for server rows)"
                .to_owned(),
        );
        Ok(rs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_indexes_every_pair_and_fills_every_chart() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Ctx::tiny(dir.path());
        let rs = Ingest.run(&ctx).unwrap();
        assert_eq!(rs.rows.len(), SCHEMES.len() * 2);
        let pairs = |r: &Row| r.figures.get("pairs").copied().unwrap_or(0.0);
        let first = pairs(&rs.rows[0]);
        assert!(first > 0.0);
        for r in &rs.rows {
            assert_eq!(pairs(r), first, "every scheme indexes the same pairs");
            let figure = |f: &str| r.figures.get(f).copied().unwrap_or(0.0);
            for f in [
                "pairs_per_s",
                "disk_bytes_per_pair",
                "vacuumed_bytes_per_pair",
            ] {
                assert!(figure(f) > 0.0, "{f}");
            }
            // redb's pages in use hold at least the live bytes.
            assert!(
                figure("in_use_bytes_per_pair") >= figure("live_bytes_per_pair"),
                "{:?}",
                r.figures
            );
        }
        for c in &rs.charts {
            assert!(rs.rows.iter().any(|r| c.selects(r)), "{}", c.file);
        }
    }
}
