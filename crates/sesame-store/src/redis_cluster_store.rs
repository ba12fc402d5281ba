//! The Redis Cluster backend: keys in groups, one hash tag per group, one
//! Lua script per batch, `WAIT` for a replica before a batch is
//! acknowledged.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use redis::cluster::{ClusterClient, ClusterConnection};
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::{RedisError, Script, Value};
use sesame_core::{Error, IoCounter, IoCounts, Result, Store, WriteBatch, WriteOp};

use crate::prefix_end;
use crate::FORMAT_VERSION;

/// The namespace a spec without `namespace=` names.
pub const DEFAULT_REDIS_NAMESPACE: &str = "default";

/// Replicas a batch must reach before `write` returns, unless the spec
/// says `wait=`.
pub const DEFAULT_WAIT_REPLICAS: u32 = 1;

/// How long `write` waits for those replicas, unless the spec says
/// `wait_ms=`.
pub const DEFAULT_WAIT_MS: u64 = 1000;

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

/// Group keys a store keeps cached (the cache is emptied when full).
const MAX_CACHED_TAGS: usize = 65_536;

/// Idle cluster connections kept for reuse.
const MAX_IDLE: usize = 16;

/// Keys per `HMGET` inside the scan script (Lua's `unpack` has a limit).
const SCAN_CHUNK: usize = 1000;

/// Applies a batch to one group: `KEYS` = values hash, key index; `ARGV` =
/// `1` when the batch only deletes, `2` when it only puts and may not
/// change a held value (a spread shard's entries: answered `-2`, nothing
/// written, if one would change), else `0`; then the number of
/// conditions and `key a ''` (absent) or `key v value` (holds value) for
/// each (answered `-1`, nothing written, if one fails); then `p key value`
/// or `d key`, repeated, each key once. A batch that deletes every key of the
/// group (the server dropping an index) unlinks the group's two Redis keys
/// instead, which Redis frees off its main thread. The shebang makes Redis
/// refuse the whole script up front when it is out of memory, rather than
/// midway.
const WRITE_SCRIPT: &str = r"#!lua
local h, z = KEYS[1], KEYS[2]
local n = #ARGV
local i = 3
for _ = 1, tonumber(ARGV[2]) do
  local held = redis.call('HGET', h, ARGV[i])
  if ARGV[i + 1] == 'a' then
    if held then
      return -1
    end
  elseif held ~= ARGV[i + 2] then
    return -1
  end
  i = i + 3
end
if ARGV[1] == '2' then
  local j = i
  while j <= n do
    local held = redis.call('HGET', h, ARGV[j + 1])
    if held and held ~= ARGV[j + 2] then
      return -2
    end
    j = j + 3
  end
end
if ARGV[1] == '1' then
  local len = redis.call('HLEN', h)
  if (n - i + 1) / 2 >= len then
    local present = 0
    for j = i + 1, n, 2 do
      present = present + redis.call('HEXISTS', h, ARGV[j])
    end
    if present == len then
      redis.call('UNLINK', h, z)
      return 1
    end
  end
end
while i <= n do
  if ARGV[i] == 'p' then
    redis.call('HSET', h, ARGV[i + 1], ARGV[i + 2])
    redis.call('ZADD', z, 0, ARGV[i + 1])
    i = i + 3
  else
    redis.call('HDEL', h, ARGV[i + 1])
    redis.call('ZREM', z, ARGV[i + 1])
    i = i + 2
  end
end
return 0
";

/// The pairs of one group whose keys lie in `[ARGV[1], ARGV[2]]` (lex
/// range syntax), as `key, value, key, value, ...` in key order, read in
/// one step.
const SCAN_SCRIPT: &str = r"#!lua flags=no-writes
local ks = redis.call('ZRANGEBYLEX', KEYS[2], ARGV[1], ARGV[2])
local out = {}
local chunk = tonumber(ARGV[3])
for i = 1, #ks, chunk do
  local last = math.min(i + chunk - 1, #ks)
  local vs = redis.call('HMGET', KEYS[1], unpack(ks, i, last))
  for j = 1, #vs do
    out[#out + 1] = ks[i + j - 1]
    out[#out + 1] = vs[j]
  end
end
return out
";

/// Writes the format marker of a new namespace, refuses keys of ours that
/// have no marker, and returns the marker (nil for "data but no marker").
/// `KEYS` = marker, group registry, home values, home index.
const INIT_SCRIPT: &str = r"#!lua
local m = redis.call('GET', KEYS[1])
if m then return m end
if redis.call('EXISTS', KEYS[2], KEYS[3], KEYS[4]) > 0 then return false end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
";

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
/// **Spec.** `redis-cluster://[user[:password]@]host:port[,host:port...]`
/// with optional `?namespace=NAME` (default `default`), `wait=N` replicas
/// (0 turns `WAIT` off), `wait_ms=MS`, `failover_ms=MS` and `tls=disable`;
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
}

impl fmt::Debug for RedisClusterStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisClusterStore")
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

/// A parsed `redis-cluster://` spec.
#[derive(Debug, PartialEq, Eq)]
struct Spec {
    nodes: Vec<(String, u16)>,
    user: Option<String>,
    password: Option<String>,
    namespace: String,
    wait_replicas: u32,
    wait_ms: u64,
    failover_ms: u64,
    plaintext_ok: bool,
    /// `rediss-cluster://`: TLS to every node.
    tls: bool,
    /// `ca=PATH`: the CA that signed the nodes' certificates (else the
    /// system's roots).
    ca: Option<std::path::PathBuf>,
    /// `cert=PATH` and `key=PATH`: a client certificate chain and its
    /// private key (PEM), for nodes that require one (mutual TLS).
    client: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// `spread=on|off` for a new namespace (an existing one keeps its own).
    spread: Option<bool>,
}

fn invalid(text: impl Into<String>) -> Error {
    Error::InvalidArgument(text.into())
}

/// Parses `redis-cluster://[user[:password]@]host:port[,...][?k=v&...]`
/// (or `rediss-cluster://...` for TLS).
fn parse_spec(spec: &str) -> Result<Spec> {
    let (tls, rest) = if let Some(rest) = spec.strip_prefix("rediss-cluster://") {
        (true, rest)
    } else {
        let rest = spec.strip_prefix("redis-cluster://").ok_or_else(|| {
            invalid(
                "a Redis Cluster store spec starts with redis-cluster:// (or \
                 rediss-cluster:// for TLS)",
            )
        })?;
        (false, rest)
    };
    let (authority, query) = match rest.split_once('?') {
        Some((a, q)) => (a, Some(q)),
        None => (rest, None),
    };
    let (credentials, hosts) = match authority.rsplit_once('@') {
        Some((c, h)) => (Some(c), h),
        None => (None, authority),
    };
    let (user, password) = match credentials {
        None => (None, None),
        Some(c) => match c.split_once(':') {
            Some((u, p)) => (
                Some(u.to_owned()).filter(|u| !u.is_empty()),
                Some(p.to_owned()),
            ),
            None => (Some(c.to_owned()).filter(|u| !u.is_empty()), None),
        },
    };
    let mut nodes = Vec::new();
    for node in hosts.split(',').filter(|n| !n.is_empty()) {
        let (host, port) = node.rsplit_once(':').ok_or_else(|| {
            invalid(format!(
                "Redis Cluster node {node:?} has no port; write host:port"
            ))
        })?;
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if host.is_empty() {
            return Err(invalid(format!("Redis Cluster node {node:?} has no host")));
        }
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| invalid(format!("Redis Cluster node {node:?}: bad port")))?;
        nodes.push((host.to_owned(), port));
    }
    if nodes.is_empty() {
        return Err(invalid(
            "a Redis Cluster store spec names at least one node: redis-cluster://host:port[,...]",
        ));
    }
    let mut parsed = Spec {
        nodes,
        user,
        password,
        namespace: DEFAULT_REDIS_NAMESPACE.to_owned(),
        wait_replicas: DEFAULT_WAIT_REPLICAS,
        wait_ms: DEFAULT_WAIT_MS,
        failover_ms: DEFAULT_FAILOVER_MS,
        plaintext_ok: false,
        tls,
        ca: None,
        client: None,
        spread: None,
    };
    let (mut cert, mut key) = (None, None);
    for part in query.into_iter().flat_map(|q| q.split('&')) {
        if part.is_empty() {
            continue;
        }
        let (name, value) = part.split_once('=').unwrap_or((part, ""));
        match name {
            "namespace" => parsed.namespace = value.to_owned(),
            "wait" => {
                parsed.wait_replicas = value.parse().ok().filter(|n| *n <= 16).ok_or_else(|| {
                    invalid(format!("wait={value:?}: a number of replicas, 0 to 16"))
                })?
            }
            "wait_ms" => {
                parsed.wait_ms = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=600_000).contains(n))
                    .ok_or_else(|| {
                        invalid(format!("wait_ms={value:?}: milliseconds, 1 to 600000"))
                    })?
            }
            "failover_ms" => {
                parsed.failover_ms =
                    value
                        .parse()
                        .ok()
                        .filter(|n| *n <= 600_000)
                        .ok_or_else(|| {
                            invalid(format!("failover_ms={value:?}: milliseconds, 0 to 600000"))
                        })?
            }
            "tls" if value == "disable" && !tls => parsed.plaintext_ok = true,
            "ca" if tls && !value.is_empty() => parsed.ca = Some(value.into()),
            "cert" if tls && !value.is_empty() => cert = Some(value.into()),
            "spread" => {
                parsed.spread = Some(match value {
                    "on" => true,
                    "off" => false,
                    _ => return Err(invalid(format!("spread={value:?}: on or off"))),
                })
            }
            "key" if tls && !value.is_empty() => key = Some(value.into()),
            _ => {
                return Err(invalid(format!(
                    "Redis Cluster store spec: unknown parameter {name:?} (known: namespace, \
                     wait, wait_ms, failover_ms, spread, and tls=disable for redis-cluster:// \
                     or ca=PATH, cert=PATH and key=PATH for rediss-cluster://)"
                )))
            }
        }
    }
    parsed.client = match (cert, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        _ => {
            return Err(invalid(
                "Redis Cluster store spec: a client certificate needs both cert=PATH (the \
                 certificate chain, PEM) and key=PATH (its private key, PEM)",
            ))
        }
    };
    crate::remote::check_namespace("Redis Cluster", &parsed.namespace)?;
    if !parsed.plaintext_ok && !parsed.tls {
        let remote: Vec<&str> = parsed
            .nodes
            .iter()
            .map(|(h, _)| h.as_str())
            .filter(|h| !crate::remote::is_local(h))
            .collect();
        if !remote.is_empty() {
            return Err(invalid(format!(
                "Redis Cluster store on {}: redis-cluster:// speaks to Redis without TLS, so a \
                 node off this machine is refused: use rediss-cluster:// (TLS, with ca=PATH \
                 for a private CA), or say tls=disable (the clients encrypt what the store \
                 holds, but not the password or the access pattern)",
                remote.join(",")
            )));
        }
    }
    Ok(parsed)
}

/// Shards of a spread index: keys `e/A/B/...` fall in one of these groups
/// of index `A/B`, chosen by their bytes after `e/A/B/`.
pub const SPREAD_SHARDS: u8 = 32;

/// The group of `key`: `A/B` for `c/A/B` and `c/A/B/...`; `None` (the
/// home group) otherwise. Keys `e/A/B/...` are the write-once entries of a
/// spread index: they fall in its shards (see [`Group`]).
#[cfg(test)]
fn group_of(key: &[u8]) -> Option<Group<'_>> {
    group_in(key, true)
}

/// [`group_of`] in a namespace whose spread entries are kept in their
/// index's group (`spread=off`) when `spread` is false.
fn group_in(key: &[u8], spread: bool) -> Option<Group<'_>> {
    let name = group_name(key)?;
    let rest = &key[2 + name.len()..];
    let shard = (spread && key[0] == b'e' && !rest.is_empty()).then(|| shard_of(&rest[1..]));
    Some(Group { name, shard })
}

/// `A/B` of `c/A/B` or `c/A/B/...`.
fn group_name(key: &[u8]) -> Option<&[u8]> {
    if key.len() < 2 || key[0] == b'/' || key[1] != b'/' {
        return None;
    }
    let rest = &key[2..];
    let a = rest.iter().position(|&b| b == b'/')?;
    if a == 0 {
        return None;
    }
    let after = &rest[a + 1..];
    let b = after.iter().position(|&b| b == b'/').unwrap_or(after.len());
    if b == 0 {
        return None;
    }
    Some(&rest[..a + 1 + b])
}

/// The shard of a spread key's bytes after `e/A/B/`: FNV-1a (64 bits)
/// modulo [`SPREAD_SHARDS`]. Labels are PRF outputs, so shards fill evenly.
fn shard_of(rest: &[u8]) -> u8 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in rest {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // The remainder is below SPREAD_SHARDS, so it fits.
    (h % u64::from(SPREAD_SHARDS)) as u8
}

/// A group other than the home group: `A/B`, or shard `n` of index `A/B`
/// (named `A/B#nn` in the registry and in its hash tag).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Group<'a> {
    name: &'a [u8],
    shard: Option<u8>,
}

impl Group<'_> {
    /// The group's name in the registry and its tag.
    fn bytes(&self) -> Vec<u8> {
        let mut b = self.name.to_vec();
        if let Some(n) = self.shard {
            b.extend_from_slice(format!("#{n:02}").as_bytes());
        }
        b
    }
}

/// The registry names of index `name`'s shards.
fn shard_names(name: &[u8]) -> Vec<Vec<u8>> {
    (0..SPREAD_SHARDS)
        .map(|shard| {
            Group {
                name,
                shard: Some(shard),
            }
            .bytes()
        })
        .collect()
}

/// Which groups a prefix scan must read.
#[derive(Debug, PartialEq, Eq)]
enum ScanPlan<'a> {
    /// Every key with the prefix is in this one group (`None`: home).
    One(Option<&'a [u8]>),
    /// Every key with the prefix is in a shard of this spread index.
    Shards(&'a [u8]),
    /// The home group and every registered group whose name starts with
    /// this.
    Many(&'a [u8]),
}

#[cfg(test)]
fn scan_plan(prefix: &[u8]) -> ScanPlan<'_> {
    scan_plan_in(prefix, true)
}

/// [`scan_plan`] in a namespace with or without spread entries.
fn scan_plan_in(prefix: &[u8], spread: bool) -> ScanPlan<'_> {
    if let Some(g) = group_name(prefix) {
        // `c/A/B/...`: the part after B is fixed, so is the group (or, for
        // `e/A/B/...`, the index whose shards hold it).
        if prefix.len() > 2 + g.len() {
            return if spread && prefix[0] == b'e' {
                ScanPlan::Shards(g)
            } else {
                ScanPlan::One(Some(g))
            };
        }
    }
    match prefix {
        [] | [_] => ScanPlan::Many(b""),
        [b'/', ..] => ScanPlan::One(None),
        [_, b'/', rest @ ..] => ScanPlan::Many(rest),
        _ => ScanPlan::One(None),
    }
}

/// The hash tag of a group: the namespace, then `/` and the group with
/// every byte outside `A-Z a-z 0-9 - _ . /` as `%XX` (so braces never end
/// the tag early, and distinct groups get distinct tags).
///
/// A shard's group (`A/B#nn`, `nn` below [`SPREAD_SHARDS`]) gets `~k` after
/// that, with the smallest `k` that puts it in the `nn`-th of
/// [`SPREAD_SHARDS`] equal runs of slots: an index's shards then cover the
/// slots evenly, and so the masters (`~` never appears unescaped in a
/// group, so tags stay distinct).
fn tag(namespace: &str, group: Option<&[u8]>) -> String {
    let mut t = namespace.to_owned();
    if let Some(g) = group {
        t.push('/');
        for &b in g {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/') {
                t.push(char::from(b));
            } else {
                t.push_str(&format!("%{b:02X}"));
            }
        }
        if let Some(n) = shard_number(g) {
            let run = SLOTS / u16::from(SPREAD_SHARDS);
            // Each try lands in the run with probability 1/32; 4096 tries
            // all miss with probability below 10^-56.
            if let Some(k) = (0..4096u32).find(|k| slot(&format!("{t}~{k}")) / run == u16::from(n))
            {
                t.push_str(&format!("~{k}"));
            }
        }
    }
    t
}

/// Slots of a Redis Cluster.
const SLOTS: u16 = 16384;

/// `nn` of a shard's group name `A/B#nn`.
fn shard_number(group: &[u8]) -> Option<u8> {
    let [.., b'#', a, b] = group else {
        return None;
    };
    if !a.is_ascii_digit() || !b.is_ascii_digit() {
        return None;
    }
    let n = (a - b'0') * 10 + (b - b'0');
    (n < SPREAD_SHARDS).then_some(n)
}

/// Redis Cluster's slot of a hash tag: CRC16 (XMODEM) modulo 16384.
fn slot(tag: &str) -> u16 {
    let mut crc: u16 = 0;
    for &byte in tag.as_bytes() {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % SLOTS
}

/// A batch split by [`RedisClusterStore::plan_write`].
struct WritePlan<'k> {
    /// The group of the conditions and of the keys outside spread shards
    /// (`Some(None)`: home), if any.
    base: Option<Option<Group<'k>>>,
    base_ops: BTreeMap<&'k [u8], Option<&'k [u8]>>,
    /// The spread index's shards and their operations.
    shards: BTreeMap<Group<'k>, BTreeMap<&'k [u8], Option<&'k [u8]>>>,
}

/// A shard's keys and the operations of a batch on it.
type ShardOps<'a, 'k> = (GroupKeys, Vec<(&'a &'k [u8], &'a Option<&'k [u8]>)>);

/// The two Redis keys of a group.
#[derive(Clone)]
struct GroupKeys {
    values: String,
    index: String,
    slot: u16,
}

impl GroupKeys {
    fn new(namespace: &str, group: Option<&[u8]>) -> Self {
        let t = tag(namespace, group);
        GroupKeys {
            values: format!("sesame{{{t}}}:v"),
            index: format!("sesame{{{t}}}:k"),
            slot: slot(&t),
        }
    }
}

/// The batch reduced to its last operation per key, in key order.
fn collapse(batch: &WriteBatch) -> BTreeMap<&[u8], Option<&[u8]>> {
    let mut last = BTreeMap::new();
    for op in batch.ops() {
        match op {
            WriteOp::Put { key, value } => last.insert(key.as_slice(), Some(value.as_slice())),
            WriteOp::Delete { key } => last.insert(key.as_slice(), None),
        };
    }
    last
}

/// `[prefix` and `(end` (or `+`): the lex range of keys with `prefix`.
fn lex_range(prefix: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut min = Vec::with_capacity(prefix.len() + 1);
    if prefix.is_empty() {
        min.push(b'-');
    } else {
        min.push(b'[');
        min.extend_from_slice(prefix);
    }
    let max = match prefix_end(prefix) {
        Some(end) => {
            let mut m = Vec::with_capacity(end.len() + 1);
            m.push(b'(');
            m.extend_from_slice(&end);
            m
        }
        None => b"+".to_vec(),
    };
    (min, max)
}

impl RedisClusterStore {
    /// Opens the store that `spec` names (see the type's docs), creating
    /// its format marker if the namespace is new.
    ///
    /// A namespace whose marker is of another format, or whose keys exist
    /// without a marker, gives [`Error::StoreForeign`] and is left
    /// untouched; a cluster that cannot be reached gives
    /// [`Error::StoreIo`]; a malformed spec gives
    /// [`Error::InvalidArgument`].
    pub fn open(spec: &str) -> Result<Self> {
        let parsed = parse_spec(spec)?;
        let label = format!(
            "Redis Cluster store {}{}{} namespace {}",
            if parsed.tls { "(TLS) " } else { "" },
            parsed
                .user
                .as_deref()
                .map(|u| format!("{u}@"))
                .unwrap_or_default(),
            parsed
                .nodes
                .iter()
                .map(|(h, p)| if h.contains(':') {
                    format!("[{h}]:{p}")
                } else {
                    format!("{h}:{p}")
                })
                .collect::<Vec<_>>()
                .join(","),
            parsed.namespace
        );
        let scheme = if parsed.tls { "rediss" } else { "redis" };
        let urls: Vec<String> = parsed
            .nodes
            .iter()
            .map(|(h, p)| {
                if h.contains(':') {
                    format!("{scheme}://[{h}]:{p}")
                } else {
                    format!("{scheme}://{h}:{p}")
                }
            })
            .collect();
        let mut builder = ClusterClient::builder(urls)
            .connection_timeout(Duration::from_secs(5))
            .response_timeout(Duration::from_millis(
                RESPONSE_TIMEOUT_MS + MAX_EXTRA_WAIT_MS + parsed.wait_ms,
            ))
            .retries(10)
            .min_retry_wait(200)
            .max_retry_wait(2000);
        if let Some(user) = &parsed.user {
            builder = builder.username(user);
        }
        if let Some(password) = &parsed.password {
            builder = builder.password(password);
        }
        if parsed.tls {
            builder = builder.tls(redis::TlsMode::Secure);
            let read = |what: &str, path: &std::path::Path| {
                std::fs::read(path).map_err(|e| {
                    Error::InvalidArgument(format!(
                        "{label}: cannot read the {what} {}: {e}",
                        path.display()
                    ))
                })
            };
            let root_cert = parsed
                .ca
                .as_deref()
                .map(|ca| read("CA certificate", ca))
                .transpose()?;
            let client_tls = match &parsed.client {
                Some((cert, key)) => Some(redis::ClientTlsConfig {
                    client_cert: read("client certificate", cert)?,
                    client_key: read("client key", key)?,
                }),
                None => None,
            };
            if root_cert.is_some() || client_tls.is_some() {
                builder = builder.certs(redis::TlsCertificates {
                    client_tls,
                    root_cert,
                });
            }
        }
        let client = builder
            .build()
            .map_err(|e| Error::StoreIo(format!("{label}: {e}")))?;
        let store = RedisClusterStore {
            client,
            namespace: parsed.namespace,
            label,
            wait_replicas: parsed.wait_replicas,
            wait_ms: parsed.wait_ms,
            failover_ms: parsed.failover_ms,
            spread: true,
            tags: Mutex::new(std::collections::HashMap::new()),
            pool: Mutex::new(Vec::new()),
            registered: Mutex::new(HashSet::new()),
            write_script: Script::new(WRITE_SCRIPT),
            scan_script: Script::new(SCAN_SCRIPT),
            io: IoCounter::default(),
        };
        let mut store = store;
        store.spread = store.init(parsed.spread)?;
        Ok(store)
    }

    /// The store's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
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

    /// The Redis keys of a group (`None`: home).
    fn keys_of(&self, group: Option<Group<'_>>) -> GroupKeys {
        self.keys_named(group.map(|g| g.bytes()).as_deref())
    }

    /// The Redis keys of the group named `group` (`None`: home), from a
    /// cache: a shard's tag costs a few dozen CRC16s to find.
    fn keys_named(&self, group: Option<&[u8]>) -> GroupKeys {
        let Some(name) = group else {
            return GroupKeys::new(&self.namespace, None);
        };
        let mut cache = self.tags.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(keys) = cache.get(name) {
            return keys.clone();
        }
        if cache.len() >= MAX_CACHED_TAGS {
            cache.clear();
        }
        let keys = GroupKeys::new(&self.namespace, Some(name));
        cache.insert(name.to_vec(), keys.clone());
        keys
    }

    fn marker_key(&self) -> String {
        format!("sesame{{{}}}:format", self.namespace)
    }

    fn registry_key(&self) -> String {
        format!("sesame{{{}}}:groups", self.namespace)
    }

    /// Checks or writes the marker, and settles whether the namespace
    /// spreads entries: as it was set when the namespace first met this
    /// build, else as `wanted` says (default on); a spec that asks for the
    /// other setting is refused, since keys already written would be
    /// looked for in the wrong groups.
    fn init(&self, wanted: Option<bool>) -> Result<bool> {
        let home = GroupKeys::new(&self.namespace, None);
        let marker: Option<Vec<u8>> = self.with_conn(|c| {
            Script::new(INIT_SCRIPT)
                .key(self.marker_key())
                .key(self.registry_key())
                .key(&home.values)
                .key(&home.index)
                .arg(FORMAT_VERSION)
                .invoke(c)
        })?;
        match marker {
            None => Err(Error::StoreForeign(format!(
                "{}: keys of this namespace exist without the Sesame marker; left untouched",
                self.label
            ))),
            Some(m) if m != FORMAT_VERSION.as_bytes() => {
                Err(Error::StoreForeign(format!(
                "{}: Sesame store format {:?} is not the one this build reads ({FORMAT_VERSION})",
                self.label,
                String::from_utf8_lossy(&m).chars().take(64).collect::<String>()
            )))
            }
            Some(_) => {
                let flag = if wanted.unwrap_or(true) { "on" } else { "off" };
                let held: Option<String> = self.with_conn(|c| {
                    redis::cmd("SET")
                        .arg(self.spread_key())
                        .arg(flag)
                        .arg("NX")
                        .arg("GET")
                        .query(c)
                })?;
                let spread = held.as_deref().unwrap_or(flag) == "on";
                if wanted.is_some_and(|w| w != spread) {
                    return Err(Error::InvalidArgument(format!(
                        "{}: this namespace was made with spread={}; it cannot change (its \
                     entries would be looked for in the wrong places)",
                        self.label,
                        if spread { "on" } else { "off" }
                    )));
                }
                self.with_conn(|c| self.wait_on(c, Some(home.slot), Duration::ZERO))??;
                Ok(spread)
            }
        }
    }

    fn spread_key(&self) -> String {
        format!("sesame{{{}}}:spread", self.namespace)
    }

    // No code panics while it holds these locks, short of running out of
    // memory; a poisoned lock is safe to take over.
    fn lock_pool(&self) -> MutexGuard<'_, Vec<ClusterConnection>> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_registered(&self) -> MutexGuard<'_, HashSet<Vec<u8>>> {
        self.registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on a pooled cluster connection (the client follows
    /// `MOVED`/`ASK` and retries through a failover); a connection that met
    /// an error is dropped rather than reused.
    fn with_conn<T>(
        &self,
        f: impl FnOnce(&mut ClusterConnection) -> std::result::Result<T, RedisError>,
    ) -> Result<T> {
        let conn = self.lock_pool().pop();
        let mut conn = match conn {
            Some(c) => c,
            None => self.client.get_connection().map_err(|e| self.map_err(&e))?,
        };
        match f(&mut conn) {
            Ok(v) => {
                let mut pool = self.lock_pool();
                if pool.len() < MAX_IDLE {
                    pool.push(conn);
                }
                Ok(v)
            }
            Err(e) => Err(self.map_err(&e)),
        }
    }

    fn map_err(&self, e: &RedisError) -> Error {
        use redis::{ErrorKind, ServerErrorKind};
        match e.code() {
            Some("WRONGTYPE") => {
                return Error::StoreCorrupt(format!(
                    "{}: a key of the store holds another Redis type: {e}",
                    self.label
                ))
            }
            Some("OOM") => {
                return Error::StoreFull(format!(
                    "{}: the cluster is out of memory (maxmemory): {e}",
                    self.label
                ))
            }
            _ => {}
        }
        let transient = e.is_io_error()
            || e.is_timeout()
            || e.is_connection_dropped()
            || e.is_cluster_error()
            || matches!(
                e.kind(),
                ErrorKind::ClusterConnectionNotFound
                    | ErrorKind::Server(
                        ServerErrorKind::MasterDown
                            | ServerErrorKind::ReadOnly
                            | ServerErrorKind::BusyLoading
                    )
            );
        if transient {
            Error::StoreUnavailable(format!("{}: {e}", self.label))
        } else {
            Error::StoreIo(format!("{}: {e}", self.label))
        }
    }

    /// Runs the read `f`, again while the cluster cannot serve it, for up
    /// to `failover_ms` with pauses from 50 ms doubling to 1 s.
    fn reading<T>(&self, mut f: impl FnMut() -> Result<T>) -> Result<T> {
        let deadline = Instant::now() + Duration::from_millis(self.failover_ms);
        let mut pause = Duration::from_millis(50);
        loop {
            match f() {
                Err(Error::StoreUnavailable(_)) if Instant::now() + pause < deadline => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                other => return other,
            }
        }
    }

    /// `WAIT` for the configured replicas on the master of `slot`, or with
    /// `None` on every master (the least of their answers counts): each
    /// covers this connection's writes to that master. It waits for
    /// `wait_ms`, plus twice `applied` (how long the master took to apply
    /// the batch: a replica applies it too before it confirms), at most
    /// [`MAX_EXTRA_WAIT_MS`] more.
    fn wait_on(
        &self,
        c: &mut ClusterConnection,
        slot: Option<u16>,
        applied: Duration,
    ) -> std::result::Result<std::result::Result<(), Error>, RedisError> {
        if self.wait_replicas == 0 {
            return Ok(Ok(()));
        }
        let extra = u64::try_from(applied.as_millis().saturating_mul(2))
            .unwrap_or(u64::MAX)
            .min(MAX_EXTRA_WAIT_MS);
        let timeout_ms = self.wait_ms + extra;
        let mut wait = redis::cmd("WAIT");
        wait.arg(self.wait_replicas).arg(timeout_ms);
        let reply = match slot {
            Some(slot) => c.route_command(
                &wait,
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
                    slot,
                    SlotAddr::Master,
                ))),
            )?,
            // Redis's own routing of WAIT: every master, the minimum.
            None => wait.query(c)?,
        };
        let got = match reply {
            Value::Int(n) => n,
            other => {
                return Ok(Err(Error::StoreIo(format!(
                    "{}: WAIT answered {other:?}",
                    self.label
                ))))
            }
        };
        if got < i64::from(self.wait_replicas) {
            let whom = slot.map_or_else(
                || "the masters of an index's shards".to_owned(),
                |s| format!("the master of slot {s}"),
            );
            return Ok(Err(Error::StoreUnavailable(format!(
                "{}: the write reached {whom} but only {got} of {} replicas within {} ms; it \
                 may be lost if that master fails now (retry the request, or lower wait=)",
                self.label, self.wait_replicas, timeout_ms
            ))));
        }
        Ok(Ok(()))
    }

    /// Splits a collapsed batch by group: at most one group (the home
    /// group, or `A/B`) for the conditions and the keys outside spread
    /// shards, and the shards of at most one spread index, that of `A/B`
    /// when there is a base group. Anything else is refused.
    #[allow(clippy::type_complexity)]
    fn plan_write<'k>(
        &self,
        expect: &[(&'k [u8], Option<&'k [u8]>)],
        last: &BTreeMap<&'k [u8], Option<&'k [u8]>>,
    ) -> Result<WritePlan<'k>> {
        let mut plan = WritePlan {
            base: None,
            base_ops: BTreeMap::new(),
            shards: BTreeMap::new(),
        };
        let show = |g: Option<Group<'_>>| {
            g.map_or_else(
                || "the home group".to_owned(),
                |g| format!("group {:?}", String::from_utf8_lossy(&g.bytes())),
            )
        };
        let refuse = |a: Option<Group<'_>>, b: Option<Group<'_>>| {
            Error::Unsupported(format!(
                "{}: a write batch and its conditions must keep to one key group (keys \
                 c/A/B/... form group A/B, other keys the home group), or to one group A/B \
                 and the shards of its spread entries e/A/B/...; this one touches {} and {}",
                self.label,
                show(a),
                show(b)
            ))
        };
        let set_base = |plan: &mut WritePlan<'k>, g: Option<Group<'k>>| match plan.base {
            None => {
                plan.base = Some(g);
                Ok(())
            }
            Some(b) if b == g => Ok(()),
            Some(b) => Err(refuse(b, g)),
        };
        // A condition on a spread key makes its shard the base group: it
        // holds only in a batch that keeps to that shard.
        for (k, _) in expect {
            set_base(&mut plan, self.group(k))?;
        }
        for (&k, &v) in last {
            let g = self.group(k);
            match g {
                Some(s) if s.shard.is_some() && plan.base != Some(g) => {
                    plan.shards.entry(s).or_default().insert(k, v);
                }
                _ => {
                    set_base(&mut plan, g)?;
                    plan.base_ops.insert(k, v);
                }
            }
        }
        // One shard and nothing else: an ordinary one-group batch.
        if plan.base.is_none() && plan.shards.len() == 1 {
            if let Some((g, ops)) = plan.shards.pop_first() {
                plan.base = Some(Some(g));
                plan.base_ops = ops;
            }
        }
        let index = plan.shards.keys().next().map(|g| g.name);
        if let Some(name) = index {
            if let Some(other) = plan.shards.keys().find(|g| g.name != name) {
                return Err(refuse(plan.shards.keys().next().copied(), Some(*other)));
            }
            match plan.base {
                None => {}
                Some(Some(b)) if b.shard.is_none() && b.name == name => {}
                Some(b) => return Err(refuse(b, plan.shards.keys().next().copied())),
            }
        }
        Ok(plan)
    }

    /// Applies `ops` to the group of `keys` in one script on `c`, under
    /// the conditions `expect` (with `write_once`, a put may not change a
    /// held value): `false` when a condition failed and nothing was
    /// written. Waits for no replica.
    fn invoke_write(
        &self,
        c: &mut ClusterConnection,
        keys: &GroupKeys,
        write_once: bool,
        expect: &[(&[u8], Option<&[u8]>)],
        ops: &[(&&[u8], &Option<&[u8]>)],
    ) -> std::result::Result<bool, RedisError> {
        let mut invocation = self.write_script.key(&keys.values);
        invocation.key(&keys.index);
        let only_deletes = !ops.is_empty() && ops.iter().all(|(_, v)| v.is_none());
        invocation.arg(match (only_deletes, write_once) {
            (true, _) => "1",
            (false, true) => "2",
            (false, false) => "0",
        });
        invocation.arg(expect.len());
        for (k, v) in expect {
            match v {
                Some(v) => invocation.arg(*k).arg("v").arg(*v),
                None => invocation.arg(*k).arg("a").arg(""),
            };
        }
        for (k, v) in ops {
            match v {
                Some(v) => invocation.arg("p").arg(**k).arg(*v),
                None => invocation.arg("d").arg(**k),
            };
        }
        Ok(invocation.invoke::<i64>(c)? >= 0)
    }

    /// Applies `ops` to each shard in `shards` (puts or deletes), then one
    /// `WAIT` on every master, all on `c`: `Ok(false)` when a put would
    /// change a held value (that shard unwritten; shards before it
    /// written).
    fn write_shards(
        &self,
        c: &mut ClusterConnection,
        shards: &[ShardOps<'_, '_>],
        puts: bool,
    ) -> std::result::Result<std::result::Result<bool, Error>, RedisError> {
        let start = Instant::now();
        let mut wrote = false;
        for (keys, ops) in shards.iter().filter(|(_, ops)| !ops.is_empty()) {
            if !self.invoke_write(c, keys, puts, &[], ops)? {
                return Ok(Ok(false));
            }
            wrote = true;
        }
        if !wrote {
            return Ok(Ok(true));
        }
        self.wait_on(c, None, start.elapsed())
            .map(|r| r.map(|()| true))
    }

    /// Registered groups whose name starts with `start`.
    fn groups_with(&self, start: &[u8]) -> Result<Vec<Vec<u8>>> {
        let (min, max) = lex_range(start);
        self.with_conn(|c| {
            redis::cmd("ZRANGEBYLEX")
                .arg(self.registry_key())
                .arg(min)
                .arg(max)
                .query(c)
        })
    }

    /// Adds `group` to the registry (once per handle), durably as a batch.
    fn register(&self, group: &[u8]) -> Result<()> {
        if self.lock_registered().contains(group) {
            return Ok(());
        }
        let home_slot = GroupKeys::new(&self.namespace, None).slot;
        self.with_conn(|c| {
            redis::cmd("ZADD")
                .arg(self.registry_key())
                .arg(0)
                .arg(group)
                .query::<i64>(c)?;
            self.wait_on(c, Some(home_slot), Duration::ZERO)
        })??;
        self.lock_registered().insert(group.to_vec());
        Ok(())
    }

    /// The pairs of one group with `prefix`, in key order.
    fn scan_group(&self, group: Option<&[u8]>, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let keys = self.keys_named(group);
        let (min, max) = lex_range(prefix);
        let flat: Vec<Option<Vec<u8>>> = self.with_conn(|c| {
            self.scan_script
                .key(&keys.values)
                .key(&keys.index)
                .arg(min)
                .arg(max)
                .arg(SCAN_CHUNK)
                .invoke(c)
        })?;
        let mut pairs = Vec::with_capacity(flat.len() / 2);
        let mut it = flat.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            match (k, v) {
                (Some(k), Some(v)) => pairs.push((k, v)),
                _ => {
                    return Err(Error::StoreCorrupt(format!(
                        "{}: {} lists a key that {} lacks",
                        self.label, keys.index, keys.values
                    )))
                }
            }
        }
        Ok(pairs)
    }
}

impl Store for RedisClusterStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let keys = self.keys_of(self.group(key));
        let value: Option<Vec<u8>> = self.reading(|| {
            self.with_conn(|c| redis::cmd("HGET").arg(&keys.values).arg(key).query(c))
        })?;
        self.io.read(value.as_ref().map_or(0, Vec::len));
        Ok(value)
    }

    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        // One HMGET per group, in the order groups first appear.
        let mut by_group: BTreeMap<Option<Group<'_>>, Vec<usize>> = BTreeMap::new();
        for (i, k) in keys.iter().enumerate() {
            by_group.entry(self.group(k)).or_default().push(i);
        }
        let mut values: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        for (group, positions) in by_group {
            let gk = self.keys_of(group);
            let got: Vec<Option<Vec<u8>>> = self.reading(|| {
                self.with_conn(|c| {
                    let mut cmd = redis::cmd("HMGET");
                    cmd.arg(&gk.values);
                    for &i in &positions {
                        cmd.arg(keys[i]);
                    }
                    cmd.query(c)
                })
            })?;
            if got.len() != positions.len() {
                return Err(Error::StoreIo(format!(
                    "{}: HMGET answered {} values for {} keys",
                    self.label,
                    got.len(),
                    positions.len()
                )));
            }
            for (i, v) in positions.into_iter().zip(got) {
                values[i] = v;
            }
        }
        for value in &values {
            self.io.read(value.as_ref().map_or(0, Vec::len));
        }
        Ok(values)
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
        if !applied?? {
            return Ok(false);
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
        let bytes = pairs.iter().map(|(k, v)| k.len() + v.len()).sum();
        self.io.scan(pairs.len(), bytes);
        Ok(pairs)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn keys_fall_in_the_groups_the_docs_say() {
        let plain = |name: &'static [u8]| Some(Group { name, shard: None });
        assert_eq!(group_of(b"x/t/a"), plain(b"t/a"));
        assert_eq!(group_of(b"i/t/a/3/label"), plain(b"t/a"));
        assert_eq!(group_of(b"d/t/a/b\x00\x01"), plain(b"t/a"));
        // Spread entries: in a shard of their index, by the bytes after
        // `e/t/a/`; `e/t/a` itself is in the index's group.
        assert_eq!(group_of(b"e/t/a"), plain(b"t/a"));
        let g = group_of(b"e/t/a/3/label").expect("a group");
        assert_eq!((g.name, g.shard), (&b"t/a"[..], Some(shard_of(b"3/label"))));
        assert_eq!(
            g.bytes(),
            format!("t/a#{:02}", shard_of(b"3/label")).into_bytes()
        );
        let shards: BTreeSet<u8> = (0..2000u32)
            .map(|i| shard_of(format!("0/{i}").as_bytes()))
            .collect();
        assert_eq!(shards.len(), usize::from(SPREAD_SHARDS));
        assert!(shards.iter().all(|&s| s < SPREAD_SHARDS));
        for home in [
            &b""[..],
            b"s/format",
            b"x/t/",
            b"x//a",
            b"/t/a",
            b"xy/t/a",
            b"iso/000",
            b"t0/0001/b",
            b"\x01\xff",
        ] {
            assert_eq!(group_of(home), None, "{home:?}");
        }
    }

    /// Every key with a prefix lies in a group the plan reads.
    #[test]
    fn scan_plans_cover_every_matching_key() {
        let keys: Vec<&[u8]> = vec![
            b"x/t/a",
            b"x/t/ab",
            b"x/t/a/z",
            b"i/t/a/1/k",
            b"i/u/a/1/k",
            b"e/t/a/1/k",
            b"e/t/a/2/kk",
            b"e/t/a",
            b"e/t/ab/1/k",
            b"x/t/",
            b"x//a",
            b"s/format",
            b"iso/1",
            b"/t/a/b",
            b"",
            b"x",
        ];
        let prefixes: Vec<&[u8]> = vec![
            b"",
            b"x",
            b"x/",
            b"x/t",
            b"x/t/",
            b"x/t/a",
            b"x/t/a/",
            b"i/t/a/1/",
            b"e/t/a/",
            b"e/t/a/1/",
            b"e/t/a",
            b"e/",
            b"i/",
            b"/",
            b"/t/a/",
            b"is",
            b"x//",
        ];
        for p in &prefixes {
            let plan = scan_plan(p);
            for k in keys.iter().filter(|k| k.starts_with(p)) {
                let g = group_of(k);
                let covered = match plan {
                    ScanPlan::One(one) => {
                        one == g.map(|g| g.name) && g.is_none_or(|g| g.shard.is_none())
                    }
                    ScanPlan::Shards(name) => {
                        g.is_some_and(|g| g.name == name && g.shard.is_some())
                    }
                    ScanPlan::Many(start) => g.is_none_or(|g| g.bytes().starts_with(start)),
                };
                assert!(covered, "prefix {p:?} misses key {k:?} ({plan:?})");
            }
        }
        assert_eq!(scan_plan(b"i/t/a/1/"), ScanPlan::One(Some(&b"t/a"[..])));
        assert_eq!(scan_plan(b"e/t/a/"), ScanPlan::Shards(&b"t/a"[..]));
        assert_eq!(scan_plan(b"e/t/a"), ScanPlan::Many(&b"t/a"[..]));
        // spread=off: entries stay in their index's group.
        assert_eq!(
            scan_plan_in(b"e/t/a/", false),
            ScanPlan::One(Some(&b"t/a"[..]))
        );
        assert_eq!(
            group_in(b"e/t/a/3/label", false),
            Some(Group {
                name: b"t/a",
                shard: None
            })
        );
        assert_eq!(scan_plan(b"x/t/"), ScanPlan::Many(&b"t/"[..]));
        assert_eq!(scan_plan(b"iso/"), ScanPlan::One(None));
    }

    #[test]
    fn slots_match_redis_cluster() {
        // CRC16/XMODEM's check value (0x31C3, below 16384), and Redis's
        // own CLUSTER KEYSLOT answers.
        assert_eq!(slot("123456789"), 0x31C3);
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("bar"), 5061);
    }

    #[test]
    fn tags_escape_braces_and_keep_groups_apart() {
        assert_eq!(tag("ns", None), "ns");
        assert_eq!(tag("ns", Some(b"t/a")), "ns/t/a");
        assert_eq!(tag("ns", Some(b"t/{a}")), "ns/t/%7Ba%7D");
        assert_ne!(tag("ns", Some(b"t/%41")), tag("ns", Some(b"t/A")));
        // An index's shards: one in each 32nd of the slots.
        let runs: Vec<u16> = shard_names(b"t/a")
            .iter()
            .map(|g| slot(&tag("ns", Some(g))) / (SLOTS / u16::from(SPREAD_SHARDS)))
            .collect();
        assert_eq!(runs, (0..u16::from(SPREAD_SHARDS)).collect::<Vec<_>>());
        assert!(tag("ns", Some(b"t/a#07")).starts_with("ns/t/a%2307~"));
        assert_eq!(tag("ns", Some(b"t/a#32")), "ns/t/a%2332");
    }

    #[test]
    fn specs_are_parsed_and_checked() {
        let s = parse_spec(
            "redis-cluster://u:pw@127.0.0.1:7000,localhost:7001,[::1]:7002?namespace=n_1&wait=2&wait_ms=50",
        )
        .unwrap();
        assert_eq!(
            s.nodes,
            vec![
                ("127.0.0.1".to_owned(), 7000),
                ("localhost".to_owned(), 7001),
                ("::1".to_owned(), 7002)
            ]
        );
        assert_eq!(
            (s.user.as_deref(), s.password.as_deref()),
            (Some("u"), Some("pw"))
        );
        assert_eq!(
            (s.namespace.as_str(), s.wait_replicas, s.wait_ms),
            ("n_1", 2, 50)
        );
        let d = parse_spec("redis-cluster://127.0.0.1:7000").unwrap();
        assert_eq!(
            (
                d.namespace.as_str(),
                d.wait_replicas,
                d.wait_ms,
                d.failover_ms
            ),
            ("default", 1, 1000, DEFAULT_FAILOVER_MS)
        );
        let f = parse_spec("redis-cluster://127.0.0.1:7000?failover_ms=0").unwrap();
        assert_eq!(f.failover_ms, 0);
        for bad in [
            "redis-cluster://",
            "redis-cluster://127.0.0.1",
            "redis-cluster://127.0.0.1:0",
            "redis-cluster://:7000",
            "redis-cluster://127.0.0.1:7000?namespace=A",
            "redis-cluster://127.0.0.1:7000?wait=x",
            "redis-cluster://127.0.0.1:7000?wait_ms=0",
            "redis-cluster://127.0.0.1:7000?failover_ms=-1",
            "redis-cluster://127.0.0.1:7000?failover_ms=600001",
            "redis-cluster://127.0.0.1:7000?colour=blue",
        ] {
            assert!(
                matches!(parse_spec(bad), Err(Error::InvalidArgument(_))),
                "{bad}"
            );
        }
        let err = parse_spec("redis-cluster://10.1.2.3:7000").unwrap_err();
        assert!(err.to_string().contains("tls=disable"), "{err}");
        assert!(err.to_string().contains("rediss-cluster://"), "{err}");
        assert!(parse_spec("redis-cluster://10.1.2.3:7000?tls=disable").is_ok());
        // TLS: any node, with or without a private CA; ca= only with TLS,
        // tls=disable only without.
        let t =
            parse_spec("rediss-cluster://10.1.2.3:7000,db.example:7001?ca=/etc/ca.pem").unwrap();
        assert!(t.tls);
        assert_eq!(t.ca.as_deref(), Some(std::path::Path::new("/etc/ca.pem")));
        assert!(parse_spec("rediss-cluster://10.1.2.3:7000").is_ok_and(|t| t.tls && t.ca.is_none()));
        // A client certificate: both halves, only with TLS.
        let m = parse_spec("rediss-cluster://10.1.2.3:7000?cert=/c.pem&key=/k.pem").unwrap();
        assert_eq!(m.client, Some(("/c.pem".into(), "/k.pem".into())));
        assert_eq!(m.spread, None);
        for (v, want) in [("on", true), ("off", false)] {
            let s = parse_spec(&format!("redis-cluster://127.0.0.1:7000?spread={v}")).unwrap();
            assert_eq!(s.spread, Some(want));
        }
        assert!(parse_spec("redis-cluster://127.0.0.1:7000?spread=yes").is_err());
        for bad in [
            "rediss-cluster://10.1.2.3:7000?cert=/c.pem",
            "rediss-cluster://10.1.2.3:7000?key=/k.pem",
            "redis-cluster://127.0.0.1:7000?cert=/c.pem&key=/k.pem",
            "rediss-cluster://10.1.2.3:7000?tls=disable",
            "redis-cluster://127.0.0.1:7000?ca=/etc/ca.pem",
            "rediss-cluster://127.0.0.1:7000?ca=",
            "redisss-cluster://127.0.0.1:7000",
        ] {
            assert!(
                matches!(parse_spec(bad), Err(Error::InvalidArgument(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn lex_ranges_bound_the_prefix() {
        assert_eq!(lex_range(b""), (b"-".to_vec(), b"+".to_vec()));
        assert_eq!(lex_range(b"ab"), (b"[ab".to_vec(), b"(ac".to_vec()));
        assert_eq!(lex_range(&[0xFF]), (vec![b'[', 0xFF], b"+".to_vec()));
    }

    #[test]
    fn an_unreachable_cluster_is_unavailable_and_named() {
        let err = RedisClusterStore::open("redis-cluster://127.0.0.1:1").unwrap_err();
        assert!(
            matches!(&err, Error::StoreUnavailable(m) if m.contains("127.0.0.1:1")),
            "{err:?}"
        );
    }
}
