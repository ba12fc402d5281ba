//! A Redis Cluster for tests: the one `SESAME_TEST_REDIS_CLUSTER` names,
//! or a throwaway one that `scripts/redis-cluster.sh` starts on loopback.
//!
//! Without `redis-server` on this machine the tests that need a cluster
//! skip themselves with a note, unless `SESAME_TEST_REDIS_CLUSTER_REQUIRE=1`
//! (as in CI), which makes a missing cluster a failure (the script then
//! installs `redis-server` when it may).

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// Nodes the script starts: 3 masters, 3 replicas.
pub const NODES: u16 = 6;

/// A cluster this process started; stopped (and its folder removed) when
/// dropped, and in any case when the process exits.
#[derive(Debug)]
pub struct OwnCluster {
    dir: PathBuf,
    url: String,
    base_port: u16,
}

impl OwnCluster {
    /// The store URL (`redis-cluster://127.0.0.1:P,...`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The nodes' ports, first to last.
    pub fn ports(&self) -> Vec<u16> {
        (0..NODES).map(|i| self.base_port + i).collect()
    }

    /// The folder of the node on `port` (its log, AOF and pid file).
    pub fn node_dir(&self, port: u16) -> PathBuf {
        self.dir.join(port.to_string())
    }

    /// Ends the node on `port` with SIGKILL (no shutdown, no last write).
    pub fn kill_node(&self, port: u16) -> std::io::Result<()> {
        self.signal_node(port, "KILL")
    }

    /// Sends the signal `signal` (`KILL`, `STOP`, `CONT`) to the node on
    /// `port`.
    pub fn signal_node(&self, port: u16, signal: &str) -> std::io::Result<()> {
        let pid = std::fs::read_to_string(self.node_dir(port).join("redis.pid"))?;
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.trim())
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other(format!(
                "kill -{signal} {} failed",
                pid.trim()
            )))
        }
    }

    /// The ports of the replicas of the live master that serves `slot`
    /// (those not marked as failing), as the first node that answers
    /// `CLUSTER NODES` sees them.
    pub fn replicas_of_slot(&self, slot: u16) -> Vec<u16> {
        let Some(master) = self.master_of_slot(slot) else {
            return Vec::new();
        };
        let Some(text) = self.cluster_nodes() else {
            return Vec::new();
        };
        let lines: Vec<Vec<&str>> = text
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|f| f.len() >= 8)
            .collect();
        let Some(id) = lines
            .iter()
            .find(|f| port_of(f[1]) == Some(master))
            .map(|f| f[0])
        else {
            return Vec::new();
        };
        lines
            .iter()
            .filter(|f| f[3] == id && !f[2].contains("fail"))
            .filter_map(|f| port_of(f[1]))
            .collect()
    }

    /// Waits until every node answers and every master that serves slots
    /// has a replica in sync (`state=online`), or fails at `deadline`: the
    /// cluster is whole again after a fault was repaired.
    pub fn wait_whole(&self, deadline: std::time::Instant) -> std::io::Result<()> {
        loop {
            if self.is_whole() {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(std::io::Error::other(format!(
                    "the cluster is not whole again: {}",
                    self.cluster_nodes().unwrap_or_default()
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    fn is_whole(&self) -> bool {
        let Some(text) = self.cluster_nodes() else {
            return false;
        };
        let mut masters = 0;
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 {
                continue;
            }
            if f[2].contains("fail") {
                return false;
            }
            if f[2].contains("master") && f.len() > 8 {
                masters += 1;
                let online = port_of(f[1])
                    .and_then(|port| cli(port, &["info", "replication"]))
                    .is_some_and(|info| info.contains("state=online"));
                if !online {
                    return false;
                }
            }
        }
        masters == 3
    }

    /// `CLUSTER NODES` as the first node that answers it sees the cluster.
    fn cluster_nodes(&self) -> Option<String> {
        self.ports()
            .into_iter()
            .find_map(|port| cli(port, &["cluster", "nodes"]))
    }

    /// Starts the node on `port` again (it rejoins as a replica where
    /// another node took over its slots).
    pub fn restart_node(&self, port: u16) -> std::io::Result<()> {
        let out = Command::new("bash")
            .arg(script())
            .arg("restart-node")
            .arg(&self.dir)
            .arg(port.to_string())
            .output()?;
        if out.status.success() {
            Ok(())
        } else {
            Err(std::io::Error::other(
                String::from_utf8_lossy(&out.stderr).into_owned(),
            ))
        }
    }

    /// Kills the master serving `slot` (SIGKILL), waits until a replica
    /// has taken the slot over, and starts the killed node again as a
    /// replica; returns the killed node's port. Fails at `deadline`.
    pub fn fail_over(&self, slot: u16, deadline: std::time::Instant) -> std::io::Result<u16> {
        let port = self
            .master_of_slot(slot)
            .ok_or_else(|| std::io::Error::other(format!("no master serves slot {slot}")))?;
        self.kill_node(port)?;
        while self.master_of_slot(slot).is_none_or(|p| p == port) {
            if std::time::Instant::now() >= deadline {
                return Err(std::io::Error::other("no replica took over"));
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        self.restart_node(port)?;
        Ok(port)
    }

    /// The port of the live master that serves `slot`, as the first node
    /// that answers `CLUSTER NODES` sees it.
    pub fn master_of_slot(&self, slot: u16) -> Option<u16> {
        for port in self.ports() {
            let Some(text) = cli(port, &["cluster", "nodes"]) else {
                continue;
            };
            for line in text.lines() {
                let fields: Vec<&str> = line.split_whitespace().collect();
                if fields.len() < 9 {
                    continue;
                }
                let flags = fields[2];
                if !flags.contains("master") || flags.contains("fail") {
                    continue;
                }
                let serves = fields[8..].iter().any(|range| {
                    let (lo, hi) = range.split_once('-').unwrap_or((range, range));
                    matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if lo <= slot && slot <= hi)
                });
                if serves {
                    return port_of(fields[1]);
                }
            }
        }
        None
    }
}

/// The port of a `CLUSTER NODES` address (`host:port@bus`).
fn port_of(addr: &str) -> Option<u16> {
    let addr = addr.split('@').next().unwrap_or("");
    addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok())
}

/// `redis-cli` on the node on `port` (loopback, plaintext, answered
/// within 1 s): its output, or `None` when it failed or said nothing.
fn cli(port: u16, args: &[&str]) -> Option<String> {
    let out = Command::new("timeout")
        .arg("1")
        .arg("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() || out.stdout.is_empty() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.dir)
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn script() -> PathBuf {
    std::env::var_os("SESAME_REDIS_CLUSTER_SCRIPT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../scripts/redis-cluster.sh"
            ))
        })
}

fn required() -> bool {
    std::env::var("SESAME_TEST_REDIS_CLUSTER_REQUIRE").is_ok_and(|v| v == "1")
}

fn note(text: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "note: {text}");
}

fn have_redis() -> bool {
    Command::new("redis-server")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A base port whose 6 ports and their cluster-bus ports (10000 above) are
/// free on loopback now.
fn free_base(attempt: u32) -> Option<u16> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut seed = std::process::id()
        .wrapping_mul(2_654_435_761)
        .wrapping_add(nanos)
        .wrapping_add(attempt.wrapping_mul(7919));
    for _ in 0..50 {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let base = 20_000 + (seed >> 8) % 25_000;
        let base = u16::try_from(base).ok()?;
        let free = (0..NODES).all(|i| {
            [base + i, base + i + 10_000]
                .iter()
                .all(|&p| TcpListener::bind((Ipv4Addr::LOCALHOST, p)).is_ok())
        });
        if free {
            return Some(base);
        }
    }
    None
}

/// Starts a cluster of this process's own, or `None` (with a note) where
/// none can be had and none is required. Panics when one is required
/// (`SESAME_TEST_REDIS_CLUSTER_REQUIRE=1`) and it cannot be started.
pub fn own_cluster() -> Option<OwnCluster> {
    start_own(false)
}

/// As [`own_cluster`], a cluster whose nodes speak only TLS, with a
/// certificate from a throwaway CA, and require a client certificate from
/// it (`scripts/redis-cluster.sh` with `REDIS_CLUSTER_TLS=1`); its URL is
/// `rediss-cluster://...?ca=PATH&cert=PATH&key=PATH`, and beside that CA
/// `other-ca.pem` signed nothing and `other-client.pem` is signed by it.
/// Its `master_of_slot` and `fail_over` do not work (they speak
/// plaintext).
pub fn own_tls_cluster() -> Option<OwnCluster> {
    start_own(true)
}

fn start_own(tls: bool) -> Option<OwnCluster> {
    static STARTED: AtomicU32 = AtomicU32::new(0);
    if !have_redis() && !required() {
        note(
            "Redis Cluster tests skipped: redis-server is not installed (apt-get install \
             redis-server, or set SESAME_TEST_REDIS_CLUSTER)",
        );
        return None;
    }
    let mut last_error = String::new();
    for attempt in 0..3 {
        let Some(base) = free_base(attempt) else {
            last_error = "no free loopback ports".into();
            continue;
        };
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("sesame-redis-{}-{n}", std::process::id()));
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(&dir)
            .arg(base.to_string())
            .env("REDIS_CLUSTER_OWNER_PID", std::process::id().to_string())
            .env("REDIS_CLUSTER_TLS", if tls { "1" } else { "0" })
            .output();
        match out {
            Ok(o) if o.status.success() => {
                let stdout = String::from_utf8_lossy(&o.stdout);
                if let Some(url) = stdout.lines().rev().find(|l| {
                    l.starts_with("redis-cluster://") || l.starts_with("rediss-cluster://")
                }) {
                    return Some(OwnCluster {
                        dir,
                        url: url.to_owned(),
                        base_port: base,
                    });
                }
                last_error = format!("the script printed no URL: {stdout}");
            }
            Ok(o) => {
                last_error = String::from_utf8_lossy(&o.stderr).into_owned();
                let _ = std::fs::remove_dir_all(&dir);
            }
            Err(e) => last_error = format!("cannot run bash {}: {e}", script().display()),
        }
    }
    assert!(
        !required(),
        "a Redis Cluster is required (SESAME_TEST_REDIS_CLUSTER_REQUIRE=1) but could not be \
         started: {last_error}"
    );
    note(&format!(
        "Redis Cluster tests skipped: the cluster did not start: {last_error}"
    ));
    None
}

/// The cluster that the tests of this process share: the one
/// `SESAME_TEST_REDIS_CLUSTER` names, else one started once (see
/// [`own_cluster`]). `None`, with a note, where none can be had.
pub fn shared_url() -> Option<String> {
    if let Some(url) = std::env::var("SESAME_TEST_REDIS_CLUSTER")
        .ok()
        .filter(|u| !u.is_empty())
    {
        return Some(url);
    }
    static SHARED: OnceLock<Option<OwnCluster>> = OnceLock::new();
    SHARED
        .get_or_init(own_cluster)
        .as_ref()
        .map(|c| c.url().to_owned())
}

/// A namespace no other test uses: `tag`, the process id and a counter.
pub fn fresh_namespace(tag: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{tag}{}_{}_{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// `url` with `namespace=ns` (and `extra`, `&`-joined, if not empty).
pub fn with_namespace(url: &str, ns: &str, extra: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    if extra.is_empty() {
        format!("{url}{sep}namespace={ns}")
    } else {
        format!("{url}{sep}namespace={ns}&{extra}")
    }
}
