//! The Redis Cluster backend: keys in groups, one hash tag per group, one
//! Lua script per batch, `WAIT` for a replica before a batch is
//! acknowledged.
//!
//! The parts: `spec` reads a store spec; `layout` says which group (hash
//! tag, slot, Redis keys) a key lies in and which groups a scan reads;
//! `scripts` holds the Lua scripts; `connection` opens a store and runs
//! commands on pooled connections; `commit` applies batches and waits for
//! replicas; `scan` reads groups in key order.

mod cache;
mod commit;
mod connection;
mod layout;
mod scan;
mod scripts;
mod spec;

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Mutex;
use std::time::Instant;

use redis::cluster::{ClusterClient, ClusterConnection};
use redis::Script;
use sesame_core::{Error, IoCounter, IoCounts, Result, Store, WriteBatch};

use crate::remote::collapse;
use crate::FORMAT_VERSION;
use commit::ShardOps;
pub use layout::SPREAD_SHARDS;
use layout::{group_in, scan_plan_in, shard_names, Group, GroupKeys, ScanPlan};

/// The namespace a spec without `namespace=` names.
pub const DEFAULT_REDIS_NAMESPACE: &str = "default";

/// Replicas a batch must reach before `write` returns, unless the spec
/// says `wait=`.
pub const DEFAULT_WAIT_REPLICAS: u32 = 1;

/// How long `write` waits for those replicas, unless the spec says
/// `wait_ms=`.
pub const DEFAULT_WAIT_MS: u64 = 1000;

/// MiB of write-once entries a store keeps in memory, unless the spec says
/// `cache_mb=` (see [`RedisClusterStore`], "Cache").
pub(crate) const DEFAULT_CACHE_MB: u64 = 64;

/// How long a node may take to answer, beyond a `WAIT`'s own timeout: a
/// batch's script runs alone on its master and may take seconds (about
/// 2 s per 100 000 pairs measured on a small machine).
const RESPONSE_TIMEOUT_MS: u64 = 60_000;

/// How long a read keeps trying while the cluster cannot serve it (a
/// master is down and its replica not yet promoted), unless the spec says
/// `failover_ms=`: a few node timeouts, so a failover is waited out.
pub const DEFAULT_FAILOVER_MS: u64 = 10_000;

/// The most a `WAIT` waits beyond `wait_ms` for a large batch.
const MAX_EXTRA_WAIT_MS: u64 = 30_000;

/// How long after a master was seen with fewer live replicas than `wait`
/// asks for every `WAIT` is first sent with [`DEGRADED_WAIT_MS`].
const DEGRADED_FOR: std::time::Duration = std::time::Duration::from_secs(2);

/// The first `WAIT`'s timeout while a master is short of replicas.
const DEGRADED_WAIT_MS: u64 = 20;

/// Group keys a store keeps cached (the cache is emptied when full).
const MAX_CACHED_TAGS: usize = 65_536;

/// Idle cluster connections kept for reuse.
const MAX_IDLE: usize = 16;

/// Keys per `HMGET` inside the scan script (Lua's `unpack` has a limit).
const SCAN_CHUNK: usize = 1000;

/// A store in a Redis Cluster: the backend for deployments that outgrow
/// one machine.
///
/// **Layout.** Every key belongs to a *group*. A key of the form
/// `c/A/B` or `c/A/B/...` (one byte `c`, then two non-empty parts without
/// `/`) belongs to group `A/B`; every other key belongs to the namespace's
/// *home* group. The server's keys (`x/<tenant>/<index>`,
/// `i/<tenant>/<index>/...`, `d/...`, `r/...`, `v/...`) thus put each
/// index, with its metadata, entries, documents and replay records, in one
/// group, and only the layout marker in the home group. A group is two
/// Redis keys under one hash tag, so in one slot on one master:
/// `sesame{NS/GROUP}:v`, a hash from key to value, and `sesame{NS/GROUP}:k`,
/// a sorted set of the keys for ordered prefix scans (`NS` is the
/// namespace, `GROUP` the group percent-encoded; the home group is
/// `sesame{NS}:v` and `:k`). The home slot also holds the format marker
/// `sesame{NS}:format` and the registry `sesame{NS}:groups` of every group
/// ever written.
///
/// **Spread entries.** Keys `e/A/B/...` (an index's entries that are
/// written once, such as FAST's) lie in [`SPREAD_SHARDS`] shards of index
/// `A/B` (groups `A/B#nn`, by a hash of the bytes after `e/A/B/`), whose
/// tags cover the slots evenly, so one index spreads over every master.
/// A namespace opened first with `spread=off` keeps them in the index's
/// group.
///
/// **Batches.** A [`Store::write`] whose keys lie in one group is one Lua
/// script on that group's master: applied all or nothing, and no reader
/// sees part of it. A batch whose keys lie in two or more groups is refused
/// with [`Error::Unsupported`]: Redis Cluster cannot apply it atomically;
/// except a batch of one index's group and the shards of its spread
/// entries, applied as shard puts (each refusing to change a held value),
/// a `WAIT` on every master, the group's part under the conditions, then
/// shard deletes.
/// With `wait` replicas asked for (default 1), `write` then sends
/// `WAIT wait wait_ms` to that master and fails with
/// [`Error::StoreUnavailable`] if fewer replicas confirmed (the batch is
/// then on the master, but may be lost if the master dies before its
/// replica has it; the caller sends it again).
///
/// **Failures.** A node that cannot be reached, a cluster that is down or
/// a slot that is moving gives [`Error::StoreUnavailable`]; a master at
/// its `maxmemory` gives [`Error::StoreFull`]. Reads are tried again, with
/// growing pauses, for up to `failover_ms` (default
/// [`DEFAULT_FAILOVER_MS`]) before they fail, so a search waits out a
/// failover; writes are not (a write whose answer was lost may have been
/// applied, and only the caller can tell by its request id).
///
/// **Reads.** A `get` is one `HGET`. A prefix scan inside one group is one
/// script (a snapshot of that group); a scan whose prefix may cover several
/// groups reads the home group and each registered group that can hold
/// such keys, one snapshot per group, and merges them in key order.
///
/// **Cache.** The values of spread keys `e/A/B/...` are kept in memory
/// (up to `cache_mb`, default [`DEFAULT_CACHE_MB`] MiB; emptied when
/// full), filled by reads that found them and by this handle's
/// acknowledged puts, and consulted before Redis. This is safe because
/// such a key is written once: the store refuses a batch that would
/// change the value it holds (the script checks on the master), so a
/// value once seen is the value for as long as the key exists. Only
/// present values are kept (an absent key may be written later), and a
/// delete through this handle removes the key. The one thing a cache of
/// one handle cannot see is a delete through another handle (another
/// server): the deletes of spread keys are an index's drop (its sweep)
/// and a scheme's reset of a generation, after which the server reads no
/// key of that index or generation again (each request reads the index's
/// metadata first) and no client state leads to the old labels (they are
/// outputs of keys drawn at random).
///
/// **Round trips.** [`RedisClusterStore::round_trips`] counts the requests
/// sent to nodes, for measuring what an operation costs. A `get_many` is
/// one pipeline of one `HMGET` per group, sent to every node before any
/// answer is read: one round trip.
///
/// **Spec.** `redis-cluster://[user[:password]@]host:port[,host:port...]`
/// with optional `?namespace=NAME` (default `default`), `wait=N` replicas
/// (0 turns `WAIT` off), `wait_ms=MS`, `failover_ms=MS`, `cache_mb=N` and
/// `tls=disable`;
/// `redis-cluster://` is plaintext, so nodes off this machine are refused
/// unless the spec says `tls=disable`. `rediss-cluster://...` speaks TLS
/// to every node, checking certificates against `ca=PATH` (else the
/// system's roots) and showing the client certificate `cert=PATH` with
/// `key=PATH` where nodes require one; `spread=on|off` is settled when a
/// namespace is first opened.
pub struct RedisClusterStore {
    client: ClusterClient,
    namespace: String,
    label: String,
    wait_replicas: u32,
    wait_ms: u64,
    failover_ms: u64,
    /// Entries `e/A/B/...` go to the index's shards (else to its group).
    spread: bool,
    pool: Mutex<Vec<ClusterConnection>>,
    /// The Redis keys of groups met so far, by group name.
    tags: Mutex<std::collections::HashMap<Vec<u8>, GroupKeys>>,
    /// Groups this handle has seen in the registry (entries are never
    /// removed from it, so the cache stays true).
    registered: Mutex<HashSet<Vec<u8>>>,
    write_script: Script,
    scan_script: Script,
    io: IoCounter,
    /// When a master was last seen with fewer live replicas than `wait`.
    degraded: Mutex<Option<Instant>>,
    /// Values of write-once keys read or written by this handle.
    cache: cache::EntryCache,
    /// Requests sent to nodes (each answered by one node).
    trips: std::sync::atomic::AtomicU64,
}

impl fmt::Debug for RedisClusterStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisClusterStore")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl RedisClusterStore {
    /// The store's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Requests this handle has sent to nodes (a `WAIT` on every master
    /// counts once per master, a `get_many`'s pipeline once): what an
    /// operation costs in round trips.
    pub fn round_trips(&self) -> u64 {
        self.trips.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Counts `n` requests sent to nodes.
    fn trip(&self, n: usize) {
        self.trips.fetch_add(
            u64::try_from(n).unwrap_or(u64::MAX),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Whether `key` is write-once here (a spread entry `e/A/B/...`).
    fn write_once(&self, key: &[u8]) -> bool {
        self.group(key).is_some_and(|g| g.shard.is_some())
    }

    /// Replicas each batch waits for, and for how long (milliseconds).
    pub fn wait(&self) -> (u32, u64) {
        (self.wait_replicas, self.wait_ms)
    }

    /// Removes every key of the namespace: its groups, registry and
    /// marker. For tests and for tearing down a deployment; other handles
    /// on the namespace must be closed first (each remembers which groups
    /// it has registered).
    pub fn destroy(self) -> Result<()> {
        let groups = self.groups_with(b"")?;
        let home = GroupKeys::new(&self.namespace, None);
        self.with_conn(|c| {
            for g in &groups {
                let keys = self.keys_named(Some(g));
                redis::cmd("DEL")
                    .arg(&keys.values)
                    .arg(&keys.index)
                    .query::<i64>(c)?;
            }
            redis::cmd("DEL")
                .arg(&home.values)
                .arg(&home.index)
                .arg(self.registry_key())
                .arg(self.marker_key())
                .arg(self.spread_key())
                .query::<i64>(c)
        })?;
        Ok(())
    }

    /// The two Redis keys (values hash, key index) of the group named
    /// `group` as [`RedisClusterStore::group_sizes`] names it (`None`:
    /// home): for measuring what a group takes in Redis.
    pub fn redis_keys_of(&self, group: Option<&[u8]>) -> (String, String) {
        let keys = self.keys_named(group);
        (keys.values, keys.index)
    }

    /// How many keys of the namespace each group holds, by group (`None`
    /// is the home group): for measuring how keys spread.
    pub fn group_sizes(&self) -> Result<Vec<(Option<Vec<u8>>, u64)>> {
        let mut groups: Vec<Option<Vec<u8>>> = vec![None];
        groups.extend(self.groups_with(b"")?.into_iter().map(Some));
        self.with_conn(|c| {
            groups
                .iter()
                .map(|g| {
                    let keys = self.keys_named(g.as_deref());
                    let n: u64 = redis::cmd("ZCARD").arg(&keys.index).query(c)?;
                    Ok((g.clone(), n))
                })
                .collect()
        })
    }

    /// The Redis Cluster slot that holds `key`'s group.
    pub fn slot_of(&self, key: &[u8]) -> u16 {
        self.keys_of(self.group(key)).slot
    }

    /// The group of `key` in this namespace.
    fn group<'k>(&self, key: &'k [u8]) -> Option<Group<'k>> {
        group_in(key, self.spread)
    }

    /// Whether this namespace spreads the entries `e/A/B/...` of an index
    /// over its shards (`spread=on`, the default for a new namespace).
    pub fn spreads(&self) -> bool {
        self.spread
    }
}

impl Store for RedisClusterStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let once = self.write_once(key);
        if once {
            if let Some(value) = self.cache.get(key) {
                self.io.read(value.len());
                return Ok(Some(value));
            }
        }
        let keys = self.keys_of(self.group(key));
        let value: Option<Vec<u8>> = self.reading(|| {
            self.trip(1);
            self.with_conn(|c| redis::cmd("HGET").arg(&keys.values).arg(key).query(c))
        })?;
        if let (true, Some(v)) = (once, &value) {
            self.cache.insert(key, v);
        }
        self.io.read(value.as_ref().map_or(0, Vec::len));
        Ok(value)
    }

    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        // Cached write-once values first; the rest by group.
        let mut by_group: BTreeMap<Option<Group<'_>>, Vec<usize>> = BTreeMap::new();
        let mut values: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        for (i, k) in keys.iter().enumerate() {
            let group = self.group(k);
            if group.is_some_and(|g| g.shard.is_some()) {
                if let Some(v) = self.cache.get(k) {
                    values[i] = Some(v);
                    continue;
                }
            }
            by_group.entry(group).or_default().push(i);
        }
        // One HMGET per group, all in one pipeline: sent to every node
        // before any answer is read, so one round trip however many
        // groups (and masters) the keys lie in.
        let groups: Vec<(Option<Group<'_>>, Vec<usize>)> = by_group.into_iter().collect();
        if !groups.is_empty() {
            let got: Vec<Vec<Option<Vec<u8>>>> = self.reading(|| {
                self.trip(1);
                self.with_conn(|c| {
                    let mut pipe = redis::cluster::cluster_pipe();
                    for (group, positions) in &groups {
                        let gk = self.keys_of(*group);
                        let mut cmd = redis::cmd("HMGET");
                        cmd.arg(&gk.values);
                        for &i in positions {
                            cmd.arg(keys[i]);
                        }
                        pipe.add_command(cmd);
                    }
                    pipe.query(c)
                })
            })?;
            if got.len() != groups.len() {
                return Err(Error::StoreIo(format!(
                    "{}: a pipeline of {} HMGETs answered {}",
                    self.label,
                    groups.len(),
                    got.len()
                )));
            }
            for ((group, positions), got) in groups.into_iter().zip(got) {
                if got.len() != positions.len() {
                    return Err(Error::StoreIo(format!(
                        "{}: HMGET answered {} values for {} keys",
                        self.label,
                        got.len(),
                        positions.len()
                    )));
                }
                let once = group.is_some_and(|g| g.shard.is_some());
                for (i, v) in positions.into_iter().zip(got) {
                    if let (true, Some(v)) = (once, &v) {
                        self.cache.insert(keys[i], v);
                    }
                    values[i] = v;
                }
            }
        }
        crate::counted_reads(&self.io, values)
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        if self.write_if(&[], &batch)? {
            return Ok(());
        }
        // Only a spread put that would change a held value gets here.
        Err(Error::InvalidArgument(format!(
            "{}: the batch would change the value held under a write-once key e/A/B/... \
             (an entry of a spread index); its other groups were left as they were",
            self.label
        )))
    }

    fn write_if(&self, expect: &[(&[u8], Option<&[u8]>)], batch: &WriteBatch) -> Result<bool> {
        if batch.is_empty() && expect.is_empty() {
            return Ok(true);
        }
        let last = collapse(batch);
        let plan = self.plan_write(expect, &last)?;
        for g in plan.base.iter().flatten().chain(plan.shards.keys()) {
            self.register(&g.bytes())?;
        }
        // Spread puts first (each shard all or nothing, a held value never
        // changed), confirmed by the replicas; then the base group under
        // the conditions; then spread deletes. All on one connection, so
        // that each WAIT covers the writes before it: a reader never finds
        // the commit without its entries, nor a replica the commit without
        // them.
        let split = |puts: bool| -> Vec<ShardOps<'_, '_>> {
            plan.shards
                .iter()
                .map(|(g, ops)| {
                    let ops = ops.iter().filter(|(_, v)| v.is_some() == puts).collect();
                    (self.keys_of(Some(*g)), ops)
                })
                .collect()
        };
        let (puts, deletes) = (split(true), split(false));
        // A write-once key about to be deleted leaves the cache now and
        // again after the write (a read in between may have put it back).
        let forget = || {
            for ops in plan.shards.values() {
                for (k, v) in ops {
                    if v.is_none() {
                        self.cache.remove(k);
                    }
                }
            }
            for (k, v) in &plan.base_ops {
                if v.is_none() && self.write_once(k) {
                    self.cache.remove(k);
                }
            }
        };
        forget();
        let base = plan.base.map(|g| self.keys_of(g));
        let base_ops: Vec<_> = plan.base_ops.iter().collect();
        let applied = self.with_conn(|c| {
            match self.write_shards(c, &puts, true)? {
                Ok(true) => {}
                other => return Ok(other),
            }
            if let Some(keys) = &base {
                let start = Instant::now();
                if !self.invoke_write(c, keys, false, expect, &base_ops)? {
                    return Ok(Ok(false));
                }
                if !base_ops.is_empty() {
                    if let Err(e) = self.wait_on(c, Some(keys.slot), start.elapsed())? {
                        return Ok(Err(e));
                    }
                }
            }
            self.write_shards(c, &deletes, false)
        });
        forget();
        if !applied?? {
            return Ok(false);
        }
        for (k, v) in plan.shards.values().flatten().chain(&plan.base_ops) {
            if let Some(v) = v {
                if self.write_once(k) {
                    self.cache.insert(k, v);
                }
            }
        }
        self.io.batch(batch);
        Ok(true)
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let pairs = self.reading(|| {
            Ok(match scan_plan_in(prefix, self.spread) {
                ScanPlan::One(group) => self.scan_group(group, prefix)?,
                ScanPlan::Shards(name) => {
                    let mut pairs = Vec::new();
                    for g in shard_names(name) {
                        pairs.extend(self.scan_group(Some(&g), prefix)?);
                    }
                    pairs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                    pairs
                }
                ScanPlan::Many(start) => {
                    let mut pairs = self.scan_group(None, prefix)?;
                    for g in self.groups_with(start)? {
                        pairs.extend(self.scan_group(Some(&g), prefix)?);
                    }
                    pairs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                    pairs
                }
            })
        })?;
        crate::counted_scan(&self.io, pairs)
    }

    fn io_counts(&self) -> IoCounts {
        self.io.counts()
    }

    fn backend(&self) -> &'static str {
        "redis-cluster"
    }

    fn health(&self) -> Result<()> {
        let marker: Option<Vec<u8>> =
            self.with_conn(|c| redis::cmd("GET").arg(self.marker_key()).query(c))?;
        match marker {
            Some(m) if m == FORMAT_VERSION.as_bytes() => Ok(()),
            _ => Err(Error::StoreCorrupt(format!(
                "{}: the Sesame marker is gone",
                self.label
            ))),
        }
    }
}
