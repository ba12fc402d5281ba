//! Opening a store (the client, its TLS files, the namespace's format
//! marker and spread setting), pooled connections, the Redis keys of
//! groups, and how Redis errors map to the store's.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use redis::cluster::{ClusterClient, ClusterConnection};
use redis::{RedisError, Script};
use sesame_core::{Error, IoCounter, Result};

use super::layout::{Group, GroupKeys};
use super::scripts::{INIT_SCRIPT, SCAN_SCRIPT, WRITE_SCRIPT};
use super::spec::parse_spec;
use super::{RedisClusterStore, MAX_CACHED_TAGS, MAX_EXTRA_WAIT_MS, MAX_IDLE, RESPONSE_TIMEOUT_MS};
use crate::FORMAT_VERSION;

impl RedisClusterStore {
    /// Opens the store that `spec` names (see the type's docs), creating
    /// its format marker if the namespace is new.
    ///
    /// A namespace whose marker is of another format, or whose keys exist
    /// without a marker, gives [`Error::StoreForeign`] and is left
    /// untouched; a cluster that cannot be reached gives
    /// [`Error::StoreUnavailable`] (tested by
    /// `an_unreachable_cluster_is_unavailable_and_named`); a malformed spec
    /// gives [`Error::InvalidArgument`].
    pub fn open(spec: &str) -> Result<Self> {
        let parsed = parse_spec(spec)?;
        // An IPv6 address in brackets, as in a URL.
        let host_port = |h: &str, p: u16| {
            if h.contains(':') {
                format!("[{h}]:{p}")
            } else {
                format!("{h}:{p}")
            }
        };
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
                .map(|(h, p)| host_port(h, *p))
                .collect::<Vec<_>>()
                .join(","),
            parsed.namespace
        );
        let scheme = if parsed.tls { "rediss" } else { "redis" };
        let urls: Vec<String> = parsed
            .nodes
            .iter()
            .map(|(h, p)| format!("{scheme}://{}", host_port(h, *p)))
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
            degraded: Mutex::new(None),
            cache: super::cache::EntryCache::new(parsed.cache_mb),
            trips: std::sync::atomic::AtomicU64::new(0),
        };
        let mut store = store;
        store.spread = store.init(parsed.spread)?;
        Ok(store)
    }

    /// The Redis keys of a group (`None`: home).
    pub(super) fn keys_of(&self, group: Option<Group<'_>>) -> GroupKeys {
        self.keys_named(group.map(|g| g.bytes()).as_deref())
    }

    /// The Redis keys of the group named `group` (`None`: home), from a
    /// cache: a shard's tag costs a few dozen CRC16s to find.
    pub(super) fn keys_named(&self, group: Option<&[u8]>) -> GroupKeys {
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

    pub(super) fn marker_key(&self) -> String {
        format!("sesame{{{}}}:format", self.namespace)
    }

    pub(super) fn registry_key(&self) -> String {
        format!("sesame{{{}}}:groups", self.namespace)
    }

    /// Checks or writes the marker, and settles whether the namespace
    /// spreads entries: as it was set when the namespace first met this
    /// build, else as `wanted` says (default on); a spec that asks for the
    /// other setting is refused, since keys already written would be
    /// looked for in the wrong groups.
    pub(super) fn init(&self, wanted: Option<bool>) -> Result<bool> {
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

    pub(super) fn spread_key(&self) -> String {
        format!("sesame{{{}}}:spread", self.namespace)
    }

    // No code panics while it holds these locks, short of running out of
    // memory; a poisoned lock is safe to take over.
    pub(super) fn lock_pool(&self) -> MutexGuard<'_, Vec<ClusterConnection>> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn lock_degraded(&self) -> MutexGuard<'_, Option<Instant>> {
        self.degraded.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn lock_registered(&self) -> MutexGuard<'_, HashSet<Vec<u8>>> {
        self.registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on a pooled cluster connection (the client follows
    /// `MOVED`/`ASK` and retries through a failover); a connection that met
    /// an error is dropped rather than reused.
    pub(super) fn with_conn<T>(
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

    pub(super) fn map_err(&self, e: &RedisError) -> Error {
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
    pub(super) fn reading<T>(&self, mut f: impl FnMut() -> Result<T>) -> Result<T> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_cluster_is_unavailable_and_named() {
        let err = RedisClusterStore::open("redis-cluster://127.0.0.1:1").unwrap_err();
        assert!(
            matches!(&err, Error::StoreUnavailable(m) if m.contains("127.0.0.1:1")),
            "{err:?}"
        );
    }
}
