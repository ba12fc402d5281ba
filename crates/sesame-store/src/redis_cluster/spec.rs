//! The `redis-cluster://` and `rediss-cluster://` spec: nodes,
//! credentials, namespace, replica wait, failover patience and TLS files.

use sesame_core::{Error, Result};

use super::{
    DEFAULT_CACHE_MB, DEFAULT_FAILOVER_MS, DEFAULT_REDIS_NAMESPACE, DEFAULT_WAIT_MS,
    DEFAULT_WAIT_REPLICAS,
};

/// A parsed `redis-cluster://` spec.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Spec {
    pub(super) nodes: Vec<(String, u16)>,
    pub(super) user: Option<String>,
    pub(super) password: Option<String>,
    pub(super) namespace: String,
    pub(super) wait_replicas: u32,
    pub(super) wait_ms: u64,
    pub(super) failover_ms: u64,
    /// `cache_mb=N`: the write-once entries kept in memory (0: none).
    pub(super) cache_mb: u64,
    pub(super) plaintext_ok: bool,
    /// `rediss-cluster://`: TLS to every node.
    pub(super) tls: bool,
    /// `ca=PATH`: the CA that signed the nodes' certificates (else the
    /// system's roots).
    pub(super) ca: Option<std::path::PathBuf>,
    /// `cert=PATH` and `key=PATH`: a client certificate chain and its
    /// private key (PEM), for nodes that require one (mutual TLS).
    pub(super) client: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// `spread=on|off` for a new namespace (an existing one keeps its own).
    pub(super) spread: Option<bool>,
}

pub(super) fn invalid(text: impl Into<String>) -> Error {
    Error::InvalidArgument(text.into())
}

/// Parses `redis-cluster://[user[:password]@]host:port[,...][?k=v&...]`
/// (or `rediss-cluster://...` for TLS).
pub(super) fn parse_spec(spec: &str) -> Result<Spec> {
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
        cache_mb: DEFAULT_CACHE_MB,
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
            "cache_mb" => {
                parsed.cache_mb = value
                    .parse()
                    .ok()
                    .filter(|n| *n <= 65_536)
                    .ok_or_else(|| invalid(format!("cache_mb={value:?}: MiB, 0 to 65536")))?
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
                     wait, wait_ms, failover_ms, spread, cache_mb, and tls=disable for redis-cluster:// \
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_parsed_and_checked() {
        let refused = |specs: &[&str]| {
            for bad in specs {
                assert!(
                    matches!(parse_spec(bad), Err(Error::InvalidArgument(_))),
                    "{bad}"
                );
            }
        };
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
        refused(&[
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
        ]);
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
        refused(&[
            "rediss-cluster://10.1.2.3:7000?cert=/c.pem",
            "rediss-cluster://10.1.2.3:7000?key=/k.pem",
            "redis-cluster://127.0.0.1:7000?cert=/c.pem&key=/k.pem",
            "rediss-cluster://10.1.2.3:7000?tls=disable",
            "redis-cluster://127.0.0.1:7000?ca=/etc/ca.pem",
            "rediss-cluster://127.0.0.1:7000?ca=",
            "redisss-cluster://127.0.0.1:7000",
        ]);
    }
}
