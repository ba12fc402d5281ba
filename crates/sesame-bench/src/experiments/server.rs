//! `server`: the networked server (`sesame serve`) over loopback TLS —
//! throughput and p50/p95/p99 latency of searches and updates with 1, 4
//! and 16 concurrent clients, on the redb store and (when a database is
//! given) PostgreSQL; and, for one client, the modelled `lan` time beside
//! the measured loopback time of the same operations, to check the
//! network model.
//!
//! Each client is one thread with its own TLS connection, its own FAST
//! index (`c<N>-<i>`, FAST being the dynamic scheme the SDK's updates
//! exercise) preloaded with documents, and its own client state. An
//! update adds one document of 8 keywords in one `Call` (what the SDK
//! sends per pending intent, here one document each); a search asks for
//! one of 50 keywords (each in about 16 % of the documents). Every search
//! result is checked against the plaintext oracle.
//!
//! PostgreSQL: set `SESAME_BENCH_POSTGRES` (or `SESAME_TEST_POSTGRES`) to
//! a connection URL; the experiment uses a namespace of its own and drops
//! it afterwards. Redis Cluster: set `SESAME_BENCH_REDIS_CLUSTER` (or
//! `SESAME_TEST_REDIS_CLUSTER`) to a `redis-cluster://` URL
//! (`scripts/redis-cluster.sh start DIR` prints one); it is measured
//! through one server (`redis-cluster`) and through two servers over the
//! same namespace, clients alternating between them (`redis-cluster-2srv`).
//!
//! `batches_per_commit`: the requests' batches each store commit carried
//! during a phase that wrote (the server's group commit shares one commit
//! among requests to different indexes, `sesame_server`'s
//! `engine/group.rs`), counted by a wrapper around each server's store.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sesame_core::{Conditional, Meter, Params, Snapshot, Store, WriteBatch};
use sesame_net::blocking::{new_request_id, Connection};
use sesame_net::ClientConfig;
use sesame_server::{RunningServer, ServerConfig, TlsFiles, Tokens};
use sesame_sse::{DocId, KeywordClient, UpdateOp};

use crate::error::BenchError;
use crate::experiment::{Ctx, Experiment};
use crate::measure::add_snapshot;
use crate::result::{Axis, Chart, ResultSet, Row, Value};

/// The `server` experiment.
#[derive(Clone, Copy, Debug, Default)]
pub struct Server;

/// Keywords per document.
const WORDS_PER_DOC: usize = 8;
/// Distinct keywords.
const VOCABULARY: usize = 50;
/// The scheme measured.
const SCHEME: &str = "fast";

/// Sizes of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Concurrent clients.
    pub clients: Vec<usize>,
    /// Documents each client's index holds before the timed phases.
    pub preload: usize,
    /// Timed operations per client and phase.
    pub ops: usize,
    /// Whether the search phase runs.
    pub searches: bool,
}

impl Plan {
    /// Full: 1, 4, 16 clients, 1 000 documents each, 200 operations per
    /// client and phase (standard too); quick: 100 documents, 30
    /// operations; tiny: 1 and
    /// 4 clients, 20 documents, 5 operations.
    pub fn for_ctx(ctx: &Ctx) -> Plan {
        Plan {
            clients: ctx.pick(vec![1, 4, 16], vec![1, 4, 16], vec![1, 4, 16], vec![1, 4]),
            preload: ctx.pick(1000, 1000, 100, 20),
            ops: ctx.pick(200, 200, 30, 5),
            searches: true,
        }
        .narrowed()
    }

    /// The plan narrowed for profiling one phase, by the environment:
    /// `SESAME_BENCH_SERVER_CLIENTS` (client counts, comma-separated),
    /// `SESAME_BENCH_SERVER_OPS` (operations per client and phase) and
    /// `SESAME_BENCH_SERVER_SEARCHES=off` (updates only).
    fn narrowed(mut self) -> Plan {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        if let Some(list) = var("SESAME_BENCH_SERVER_CLIENTS") {
            let clients: Vec<usize> = list
                .split(',')
                .filter_map(|c| c.trim().parse().ok())
                .filter(|&c| c > 0)
                .collect();
            if !clients.is_empty() {
                self.clients = clients;
            }
        }
        if let Some(ops) = var("SESAME_BENCH_SERVER_OPS").and_then(|o| o.parse().ok()) {
            self.ops = ops;
        }
        if var("SESAME_BENCH_SERVER_SEARCHES").as_deref() == Some("off") {
            self.searches = false;
        }
        self
    }
}

/// The keywords of document `d`.
fn words(d: DocId) -> Vec<Vec<u8>> {
    (0..WORDS_PER_DOC as u64)
        .map(|j| format!("w{}", (d * 7 + j * 13) % VOCABULARY as u64).into_bytes())
        .collect()
}

fn err(context: &str, e: sesame_core::Error) -> BenchError {
    BenchError::Scheme {
        context: format!("server experiment: {context}"),
        source: e,
    }
}

/// One phase of a run: the operation, every client's latencies, the
/// phase's wall time, the first client's meter snapshot, the store
/// round trips of the phase (where the store counts them), and the store
/// commits of the phase with the batches they carried.
type PhaseResult = (
    &'static str,
    Vec<Duration>,
    Duration,
    Snapshot,
    Option<u64>,
    Commits,
);

/// Store commits asked for and the batches they carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Commits {
    commits: u64,
    batches: u64,
}

impl Commits {
    fn since(self, earlier: Commits) -> Commits {
        Commits {
            commits: self.commits.saturating_sub(earlier.commits),
            batches: self.batches.saturating_sub(earlier.batches),
        }
    }

    /// Batches per commit; `None` when nothing was committed.
    fn per_commit(self) -> Option<f64> {
        (self.commits > 0).then(|| self.batches as f64 / self.commits as f64)
    }
}

/// The commits of the servers' stores ([`Counted`]), shared by the
/// wrappers of one configuration.
#[derive(Debug, Default)]
struct CommitCount {
    commits: AtomicU64,
    batches: AtomicU64,
}

impl CommitCount {
    fn add(&self, batches: usize) {
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.batches.fetch_add(batches as u64, Ordering::Relaxed);
    }

    fn now(&self) -> Commits {
        Commits {
            commits: self.commits.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
        }
    }
}

/// A server's store that counts its writes ([`CommitCount`]): a write or
/// a conditional write is one commit of one batch, a group one commit of
/// the group's batches (whether or not a condition held: each is a store
/// transaction). Everything else passes through unchanged.
struct Counted {
    inner: Arc<dyn Store>,
    count: Arc<CommitCount>,
}

impl Store for Counted {
    fn write(&self, batch: WriteBatch) -> sesame_core::Result<()> {
        self.count.add(1);
        self.inner.write(batch)
    }

    fn write_if(
        &self,
        expect: &[(&[u8], Option<&[u8]>)],
        batch: &WriteBatch,
    ) -> sesame_core::Result<bool> {
        self.count.add(1);
        self.inner.write_if(expect, batch)
    }

    fn write_if_group(&self, group: &[Conditional<'_>]) -> sesame_core::Result<Vec<bool>> {
        self.count.add(group.len());
        self.inner.write_if_group(group)
    }

    sesame_store::forward_store!(|s| s.inner; get, get_many, commit_groups, scan_prefix,
        scan_from, ordered_probes, io_counts, flush, backend, health, verify);
}

/// What each client thread hands back: its number and its two phases.
type ClientOutcome = Result<(usize, Phase, Phase), BenchError>;

/// Opens a fresh store for one configuration.
type MakeStore<'a> = Box<dyn Fn() -> Result<Backing, BenchError> + 'a>;

/// What one client measured in one phase.
#[derive(Default)]
struct Phase {
    latencies: Vec<Duration>,
    snapshot: Snapshot,
}

/// One client: its connection, index, scheme client and oracle.
struct Client {
    conn: Connection,
    index: String,
    scheme: Box<dyn KeywordClient>,
    oracle: BTreeMap<Vec<u8>, Vec<DocId>>,
    next: DocId,
    rng: ChaCha20Rng,
    meter: Meter,
}

impl Client {
    fn new(config: &ClientConfig, index: String, seed: u64) -> Result<Client, BenchError> {
        let conn = Connection::connect(config).map_err(|e| err("connect", e))?;
        let scheme = sesame_sse::scheme(SCHEME)
            .ok_or_else(|| BenchError::InvalidArgument(format!("no scheme {SCHEME}")))?;
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let client = (scheme.new_client)(&mut rng, &Params::new()).map_err(|e| err("client", e))?;
        let mut c = conn.client();
        conn.block_on(c.create_index(&index, SCHEME, ""))
            .map_err(|s| err("create index", sesame_net::blocking::from_status(&s)))?;
        Ok(Client {
            conn,
            index,
            scheme: client,
            oracle: BTreeMap::new(),
            next: 1,
            rng,
            meter: Meter::new(),
        })
    }

    /// Adds `n` documents, `batch` per call.
    fn add(
        &mut self,
        n: usize,
        batch: usize,
        latencies: Option<&mut Vec<Duration>>,
    ) -> Result<(), BenchError> {
        let mut lat = latencies;
        let mut left = n;
        while left > 0 {
            let k = left.min(batch);
            let start = Instant::now();
            let mut requests = Vec::new();
            for _ in 0..k {
                let d = self.next;
                self.next += 1;
                let ws = words(d);
                let r = self
                    .scheme
                    .prepare_update(&mut self.rng, UpdateOp::Add, d, &ws)
                    .map_err(|e| err("prepare update", e))?
                    .ok_or_else(|| {
                        BenchError::InvalidArgument(format!("{SCHEME} has no prepared updates"))
                    })?;
                requests.extend(r);
                for w in ws {
                    self.oracle.entry(w).or_default().push(d);
                }
            }
            let up: usize = requests.iter().map(Vec::len).sum();
            let call = Instant::now();
            let (responses, report) = self
                .conn
                .call_batch(&self.index, SCHEME, 0, new_request_id(), requests)
                .map_err(|e| err("update", e))?;
            let down: usize = responses.iter().map(Vec::len).sum();
            self.meter.record_round(up, down, call.elapsed());
            self.meter.record_server(&report, false);
            for r in &responses {
                self.scheme
                    .check_update_response(r)
                    .map_err(|e| err("update answer", e))?;
            }
            if let Some(l) = lat.as_deref_mut() {
                l.push(start.elapsed());
            }
            left -= k;
        }
        Ok(())
    }

    fn search(&mut self, i: usize) -> Result<Duration, BenchError> {
        let w = format!("w{}", (i * 17) % VOCABULARY).into_bytes();
        let start = Instant::now();
        let mut ch = self
            .conn
            .index_channel(&self.index, SCHEME, 0, self.meter.clone());
        let ids = self
            .scheme
            .search(&mut self.rng, &mut ch, &w)
            .map_err(|e| err("search", e))?;
        let took = start.elapsed();
        let want = self.oracle.get(&w).cloned().unwrap_or_default();
        if ids != want {
            return Err(BenchError::WrongResult(format!(
                "server search for {} found {} documents, the oracle {}",
                String::from_utf8_lossy(&w),
                ids.len(),
                want.len()
            )));
        }
        Ok(took)
    }
}

/// The `p`-th percentile (nearest rank) of sorted latencies, in ms.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.clamp(1, sorted.len()) - 1)
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
}

/// Runs `clients` clients through the preload, the update phase and the
/// search phase; returns, per phase, the latencies of all clients, the
/// phase's wall time, and the first client's meter snapshot.
/// Client `i` talks to the server of `configs[i % configs.len()]`.
fn run_clients(
    configs: &[ClientConfig],
    clients: usize,
    plan: &Plan,
    seed: u64,
    trips: &dyn Fn() -> Option<u64>,
    commits: &CommitCount,
) -> Result<Vec<PhaseResult>, BenchError> {
    let barrier = Arc::new(Barrier::new(clients + 1));
    let results: Arc<Mutex<Vec<ClientOutcome>>> = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for i in 0..clients {
        let config = configs[i % configs.len()].clone();
        let (barrier, results) = (barrier.clone(), results.clone());
        let (preload, ops) = (plan.preload, plan.ops);
        let search_ops = if plan.searches { ops } else { 0 };
        handles.push(std::thread::spawn(move || {
            let outcome = (|| {
                let mut c =
                    Client::new(&config, format!("c{clients}-{i}"), seed ^ (i as u64) << 8)?;
                c.add(preload, 64, None)?;
                Ok::<_, BenchError>(c)
            })();
            // Every thread meets the barriers, whatever happened.
            barrier.wait();
            let phases = outcome.and_then(|mut c| {
                let span = c.meter.span();
                let mut updates = Phase::default();
                for _ in 0..ops {
                    let mut one = Vec::with_capacity(1);
                    c.add(1, 1, Some(&mut one))?;
                    updates.latencies.extend(one);
                }
                updates.snapshot = span.finish();
                Ok((c, updates))
            });
            barrier.wait();
            barrier.wait();
            let phases = phases.and_then(|(mut c, updates)| {
                let span = c.meter.span();
                let mut searches = Phase::default();
                for q in 0..search_ops {
                    searches.latencies.push(c.search(q)?);
                }
                searches.snapshot = span.finish();
                Ok((i, updates, searches))
            });
            barrier.wait();
            results
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(phases);
        }));
    }
    barrier.wait(); // preloaded
    let t0 = Instant::now();
    let (trips0, commits0) = (trips(), commits.now());
    barrier.wait(); // updates done
    let update_wall = t0.elapsed();
    let (trips1, commits1) = (trips(), commits.now());
    barrier.wait();
    let t1 = Instant::now();
    let (trips2, commits2) = (trips(), commits.now());
    barrier.wait(); // searches done
    let search_wall = t1.elapsed();
    let (trips3, commits3) = (trips(), commits.now());
    let between = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?));
    for h in handles {
        h.join()
            .map_err(|_| BenchError::InvalidArgument("a client thread panicked".into()))?;
    }
    let mut all = std::mem::take(&mut *results.lock().unwrap_or_else(PoisonError::into_inner));
    all.sort_by_key(|r| r.as_ref().map_or(0, |(i, _, _)| *i));
    let mut updates = Vec::new();
    let mut searches = Vec::new();
    let mut snaps = (Snapshot::default(), Snapshot::default());
    for r in all {
        let (i, u, s) = r?;
        updates.extend(u.latencies);
        searches.extend(s.latencies);
        if i == 0 {
            snaps = (u.snapshot, s.snapshot);
        }
    }
    Ok(vec![
        (
            "update",
            updates,
            update_wall,
            snaps.0,
            between(trips0, trips1),
            commits1.since(commits0),
        ),
        (
            "search",
            searches,
            search_wall,
            snaps.1,
            between(trips2, trips3),
            commits3.since(commits2),
        ),
    ])
}

/// A store for the experiment, and what to do with it afterwards.
enum Backing {
    Redb(Arc<dyn Store>),
    Postgres(Arc<sesame_store::PostgresStore>),
    /// One store handle per server, all on one namespace.
    RedisCluster(Vec<Arc<sesame_store::RedisClusterStore>>),
}

impl Backing {
    /// The store of each server.
    fn stores(&self) -> Vec<Arc<dyn Store>> {
        match self {
            Backing::Redb(s) => vec![s.clone()],
            Backing::Postgres(s) => vec![s.clone()],
            Backing::RedisCluster(v) => v.iter().map(|s| s.clone() as Arc<dyn Store>).collect(),
        }
    }

    /// Requests the stores have sent to their nodes so far, where they
    /// count them (Redis Cluster).
    fn round_trips(&self) -> Option<u64> {
        match self {
            Backing::RedisCluster(v) => Some(v.iter().map(|s| s.round_trips()).sum()),
            _ => None,
        }
    }

    fn finish(self) {
        match self {
            Backing::Postgres(s) => {
                if let Ok(s) = Arc::try_unwrap(s) {
                    let _ = s.destroy();
                }
            }
            Backing::RedisCluster(v) => {
                if let Some(s) = v.into_iter().filter_map(|s| Arc::try_unwrap(s).ok()).next() {
                    let _ = s.destroy();
                }
            }
            Backing::Redb(_) => {}
        }
    }
}

/// `url` with a fresh `namespace=bench_<pid>_<nanos>` and `more` (`&k=v`
/// pairs) appended: each run's store starts empty.
fn with_namespace(url: &str, more: &str) -> String {
    let ns = format!(
        "bench_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
    );
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}namespace={ns}{more}")
}

pub(crate) fn redis_cluster_url() -> Option<String> {
    ["SESAME_BENCH_REDIS_CLUSTER", "SESAME_TEST_REDIS_CLUSTER"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
}

/// A server on a free loopback port over TLS (`certs`), with one tenant
/// `bench` whose token is `token`, over `store`.
pub(crate) fn loopback_server(
    certs: &sesame_server::certs::GeneratedCerts,
    token: &str,
    store: Arc<dyn Store>,
) -> Result<RunningServer, BenchError> {
    let mut config = ServerConfig::new(
        "127.0.0.1:0"
            .parse()
            .map_err(|_| BenchError::InvalidArgument("address".into()))?,
    );
    config.tls = Some(TlsFiles {
        cert_pem: certs.cert_pem.clone().into_bytes(),
        key_pem: certs.key_pem.clone().into_bytes(),
    });
    config.tokens = Tokens::new()
        .with("bench", token)
        .map_err(BenchError::InvalidArgument)?;
    RunningServer::start(config, store)
        .map_err(|e| BenchError::InvalidArgument(format!("server: {e}")))
}

pub(crate) fn postgres_url() -> Option<String> {
    ["SESAME_BENCH_POSTGRES", "SESAME_TEST_POSTGRES"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
}

impl Experiment for Server {
    fn name(&self) -> &'static str {
        "server"
    }

    fn title(&self) -> &'static str {
        "Networked server over loopback TLS: throughput, latency percentiles, network model check"
    }

    fn seed_paper(&self) -> &'static str {
        "seed 001's deployment (query server, database server, encrypted document storage); \
         the paper reports no server figures"
    }

    fn run(&self, ctx: &Ctx) -> Result<ResultSet, BenchError> {
        let plan = Plan::for_ctx(ctx);
        let mut rs = ctx.result_set(self);
        let certs = sesame_server::certs::localhost().map_err(BenchError::InvalidArgument)?;
        let token = Tokens::generate(&mut rand::rngs::OsRng);
        let mut backings: Vec<(&str, MakeStore)> = vec![(
            "redb",
            Box::new(|| {
                let path = ctx.work_dir.join("server-bench.redb");
                let _ = std::fs::remove_file(&path);
                let store =
                    sesame_store::RedbStore::open(&path).map_err(|e| err("open redb store", e))?;
                Ok(Backing::Redb(Arc::new(store)))
            }),
        )];
        match postgres_url() {
            Some(url) => backings.push((
                "postgres",
                Box::new(move || {
                    let store = sesame_store::PostgresStore::open(&with_namespace(&url, ""))
                        .map_err(|e| err("open PostgreSQL store", e))?;
                    Ok(Backing::Postgres(Arc::new(store)))
                }),
            )),
            None => rs.notes.push(
                "PostgreSQL skipped: set SESAME_BENCH_POSTGRES to a connection URL to measure it"
                    .into(),
            ),
        }
        match redis_cluster_url() {
            Some(url) => {
                for (name, servers, spread, cache) in [
                    ("redis-cluster", 1usize, "on", ""),
                    ("redis-cluster-nocache", 1, "on", "&cache_mb=0"),
                    ("redis-cluster-2srv", 2, "on", ""),
                    ("redis-cluster-unspread", 1, "off", ""),
                ] {
                    let url = url.clone();
                    backings.push((
                        name,
                        Box::new(move || {
                            let spec = with_namespace(&url, &format!("&spread={spread}{cache}"));
                            let stores = (0..servers)
                                .map(|_| {
                                    sesame_store::RedisClusterStore::open(&spec)
                                        .map(Arc::new)
                                        .map_err(|e| err("open Redis Cluster store", e))
                                })
                                .collect::<Result<Vec<_>, _>>()?;
                            Ok(Backing::RedisCluster(stores))
                        }),
                    ));
                }
                rs.notes.push(
                    "Redis Cluster: wait=1 (each batch on a replica before it is acknowledged); \
                     an index's entries spread over its 32 shards (every master), except in \
                     redis-cluster-unspread (spread=off: the whole index on one master, one \
                     script per commit); redis-cluster-2srv runs two servers over one \
                     namespace, client i talking to server i mod 2; redis-cluster-nocache keeps \
                     no write-once entry in memory (cache_mb=0); store_trips_per_op is the \
                     requests the servers' stores sent to Redis nodes per operation"
                        .into(),
                );
            }
            None => rs.notes.push(
                "Redis Cluster skipped: set SESAME_BENCH_REDIS_CLUSTER to a redis-cluster:// URL \
                 (scripts/redis-cluster.sh start DIR prints one) to measure it"
                    .into(),
            ),
        }
        rs.notes.push(format!(
            "scheme {SCHEME}; each client its own index of {} documents ({WORDS_PER_DOC} keywords each, \
             {VOCABULARY} distinct), {} updates then {} searches per client; loopback TLS (rustls, ring)",
            plan.preload, plan.ops, plan.ops
        ));
        rs.notes.push(
            "model_lan_ms is the lan model (client + server + rounds x 0 + bytes / 1 Gbit/s) of the \
             same operations for one client; loopback_ms the measured mean: the difference is the \
             per-call cost of gRPC, HTTP/2, TLS and loopback that the model leaves out"
                .into(),
        );
        for (store_name, make) in &backings {
            for &clients in &plan.clients {
                let backing = make()?;
                let count = Arc::new(CommitCount::default());
                let servers = backing
                    .stores()
                    .into_iter()
                    .map(|inner| {
                        let count = count.clone();
                        loopback_server(&certs, &token, Arc::new(Counted { inner, count }))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let configs: Vec<ClientConfig> = servers
                    .iter()
                    .map(|server| {
                        ClientConfig::new(server.url(), token.clone())
                            .with_ca(certs.ca_pem.clone().into_bytes())
                    })
                    .collect();
                let phases = run_clients(
                    &configs,
                    clients,
                    &plan,
                    ctx.seed,
                    &|| backing.round_trips(),
                    &count,
                );
                let stopped: Vec<_> = servers.into_iter().map(|s| s.shutdown()).collect();
                backing.finish();
                let phases = phases?;
                for stopped in stopped {
                    stopped.map_err(|e| BenchError::InvalidArgument(format!("server: {e}")))?;
                }
                for (op, mut lat, wall, snap, trips, commits) in phases {
                    lat.sort();
                    let n = lat.len();
                    let mut row = Row::new()
                        .param("store", *store_name)
                        .param("op", op)
                        .param("clients", clients);
                    row.set("throughput_ops_s", n as f64 / wall.as_secs_f64())
                        .set("p50_ms", percentile(&lat, 50.0))
                        .set("p95_ms", percentile(&lat, 95.0))
                        .set("p99_ms", percentile(&lat, 99.0))
                        .set(
                            "loopback_ms",
                            lat.iter().map(Duration::as_secs_f64).sum::<f64>() * 1e3
                                / n.max(1) as f64,
                        );
                    if let Some(trips) = trips {
                        row.set("store_trips_per_op", trips as f64 / n.max(1) as f64);
                    }
                    if let Some(per) = commits.per_commit() {
                        row.set("batches_per_commit", per);
                    }
                    if clients == 1 {
                        let mut model = Row::new();
                        add_snapshot(&mut model, &snap, plan.ops as u64);
                        for name in [
                            "lan_ms",
                            "client_ms",
                            "server_ms",
                            "bytes_up",
                            "bytes_down",
                            "rounds",
                        ] {
                            if let Some(v) = model.figures.get(name) {
                                let key = if name == "lan_ms" {
                                    "model_lan_ms"
                                } else {
                                    name
                                };
                                row.set(key, *v);
                            }
                        }
                    }
                    rs.rows.push(row);
                }
            }
        }
        rs.display = [
            "throughput_ops_s",
            "p50_ms",
            "p95_ms",
            "p99_ms",
            "loopback_ms",
            "store_trips_per_op",
            "batches_per_commit",
            "model_lan_ms",
            "client_ms",
            "server_ms",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let axis = |label: &str, log: bool| Axis {
            label: label.to_owned(),
            log,
        };
        for op in ["update", "search"] {
            rs.charts.push(Chart {
                file: format!("{op}-throughput"),
                title: format!("{op}s per second over loopback TLS"),
                x: "clients".into(),
                y: vec!["throughput_ops_s".into()],
                series: vec!["store".into()],
                filter: vec![("op".into(), Value::from(op))],
                x_axis: axis("concurrent clients", true),
                y_axis: axis("operations / s", false),
            });
            rs.charts.push(Chart {
                file: format!("{op}-latency"),
                title: format!("{op} latency percentiles"),
                x: "clients".into(),
                y: vec!["p50_ms".into(), "p95_ms".into(), "p99_ms".into()],
                series: vec!["store".into()],
                filter: vec![("op".into(), Value::from(op))],
                x_axis: axis("concurrent clients", true),
                y_axis: axis("latency (ms)", true),
            });
        }
        Ok(rs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v[..1], 95.0), 1.0);
        assert!(percentile(&[], 50.0).is_nan());
    }

    #[test]
    fn a_tiny_run_measures_updates_and_searches_with_the_model_beside() {
        let work = tempfile::tempdir().unwrap();
        let ctx = Ctx {
            scale: crate::experiment::Scale::Tiny,
            seed: 3,
            data_dir: work.path().join("data"),
            work_dir: work.path().to_path_buf(),
            options: Default::default(),
        };
        let rs = Server.run(&ctx).unwrap();
        let redb: Vec<&Row> = rs
            .rows
            .iter()
            .filter(|r| r.params.get("store") == Some(&Value::from("redb")))
            .collect();
        assert_eq!(redb.len(), 4, "update and search with 1 and 4 clients");
        for r in &redb {
            for f in [
                "throughput_ops_s",
                "p50_ms",
                "p95_ms",
                "p99_ms",
                "loopback_ms",
            ] {
                assert!(r.figures.get(f).is_some_and(|v| *v > 0.0), "{f} in {r:?}");
            }
            let one = r.params.get("clients") == Some(&Value::Int(1));
            assert_eq!(r.figures.get("model_lan_ms").is_some(), one);
            if r.params.get("op") == Some(&Value::from("update")) {
                let per = r.figures.get("batches_per_commit").copied();
                // One client has nothing to share a commit with.
                if one {
                    assert_eq!(per, Some(1.0), "{r:?}");
                } else {
                    assert!(per.is_some_and(|p| p >= 1.0), "{r:?}");
                }
            }
        }
        assert_eq!(rs.charts.len(), 4);
    }

    #[test]
    fn a_group_is_one_commit_of_its_batches() {
        let count = Arc::new(CommitCount::default());
        let store = Counted {
            inner: Arc::new(sesame_store::MemoryStore::new()),
            count: count.clone(),
        };
        let batch = |k: &[u8]| {
            let mut b = WriteBatch::new();
            b.put(k.to_vec(), b"v".to_vec());
            b
        };
        let (a, b, c) = (batch(b"a"), batch(b"b"), batch(b"c"));
        let none: &[(&[u8], Option<&[u8]>)] = &[];
        let refused: &[(&[u8], Option<&[u8]>)] = &[(b"a", None)];
        store.write(batch(b"w")).unwrap();
        assert!(store.write_if(none, &a).unwrap());
        let group: Vec<Conditional<'_>> = vec![(none, &b), (refused, &a), (none, &c)];
        assert_eq!(store.write_if_group(&group).unwrap(), [true, false, true]);
        let counted = count.now();
        assert_eq!(
            counted,
            Commits {
                commits: 3,
                batches: 5
            }
        );
        assert_eq!(counted.per_commit(), Some(5.0 / 3.0));
        assert_eq!(Commits::default().per_commit(), None);
        assert_eq!(store.get(b"c").unwrap(), Some(b"v".to_vec()));
    }

    #[test]
    fn documents_have_distinct_keywords() {
        for d in 1..200 {
            let mut w = words(d);
            w.sort();
            w.dedup();
            assert_eq!(w.len(), WORDS_PER_DOC, "document {d}");
        }
    }
}
