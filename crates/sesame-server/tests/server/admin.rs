//! Configuration, the admin port, health and store failures.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use rand_core::OsRng;
use sesame_core::Store;
use sesame_net::blocking::Connection;
use sesame_net::ClientConfig;
use sesame_server::proto::path;
use sesame_server::{Limits, RunningServer, ServerConfig, Tokens};
use sesame_store::MemoryStore;
use tonic::Code;

use crate::support::*;

#[test]
fn metrics_are_served_on_the_admin_port() {
    let f = start();
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.list_indexes()).unwrap();
    let _ = conn.block_on(c.anonymous().list_indexes());
    // Refused by the protobuf decoder, and a method the server lacks:
    // counted too.
    let err = conn
        .block_on(c.clone().raw(path::CALL, vec![0xff, 0xff, 0xff, 0x0f]))
        .unwrap_err();
    let decoded = format!("{:?}", err.code());
    let err = conn
        .block_on(c.clone().raw("/sesame.v1.Sesame/Nope", Vec::new()))
        .map(drop)
        .map_err(|e| e.code())
        .unwrap_err();
    assert_eq!(err, Code::Unimplemented);
    let text = admin_get(f.server.bound().admin.unwrap(), None);
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    for want in [
        "sesame_requests_total{method=\"ListIndexes\",code=\"OK\"} 1",
        "sesame_requests_total{method=\"ListIndexes\",code=\"UNAUTHENTICATED\"} 1",
        "sesame_request_duration_seconds_bucket{method=\"ListIndexes\",le=\"+Inf\"} 2",
        "sesame_store_operations_total{op=\"scan\"}",
        "sesame_requests_in_flight 0",
        "sesame_requests_total{method=\"unknown\",code=\"UNIMPLEMENTED\"} 1",
    ] {
        assert!(text.contains(want), "missing {want} in\n{text}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("sesame_requests_total{method=\"Call\"") && l.ends_with(" 1")),
        "the malformed Call ({decoded}) is not counted in\n{text}"
    );
}

#[test]
fn configuration_refuses_public_plaintext() {
    let mut config = ServerConfig::new("0.0.0.0:0".parse().unwrap());
    config.insecure_plaintext = true;
    config.tokens = Tokens::new().with("a", "t").unwrap();
    let err = config.check().unwrap_err();
    assert!(err.to_string().contains("loopback"), "{err}");
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.check().unwrap();
    config.insecure_plaintext = false;
    assert!(config
        .check()
        .unwrap_err()
        .to_string()
        .contains("--tls-cert"));
    // Clients refuse plaintext to anything but loopback.
    let err =
        sesame_net::client::endpoint(&ClientConfig::new("http://example.com:1", "t")).unwrap_err();
    assert!(err.to_string().contains("loopback"), "{err}");
    assert!(sesame_net::client::endpoint(&ClientConfig::new("http://[::1]:1", "t")).is_ok());
}

#[test]
fn plaintext_on_loopback_works_when_asked_for() {
    let token = Tokens::generate(&mut OsRng);
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.insecure_plaintext = true;
    config.tokens = Tokens::new().with("t", &token).unwrap();
    let server = RunningServer::start(config, Arc::new(MemoryStore::new())).unwrap();
    assert!(server.url().starts_with("http://127.0.0.1:"));
    let conn = Connection::connect(&ClientConfig::new(server.url(), token)).unwrap();
    static_round_trip(&conn, "p");
}

#[test]
fn a_foreign_store_is_refused() {
    let store = Arc::new(MemoryStore::new());
    store.put(b"i/default/0/dxyz", b"profile data").unwrap();
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.insecure_plaintext = true;
    config.tokens = Tokens::new().with("t", "x").unwrap();
    let err = RunningServer::start(config, store).unwrap_err();
    assert!(err.to_string().contains("no Sesame server marker"), "{err}");
}

/// `Health` tells the server's limits and the store's real state: a store
/// that cannot serve is reported as degraded, and as serving again once it
/// recovers.
#[test]
fn health_tells_the_limits_and_the_stores_state() {
    let store = Arc::new(SlowStore {
        inner: MemoryStore::new(),
        delay_ms: AtomicU64::new(0),
        sick: AtomicBool::new(false),
        failing_scans: AtomicBool::new(false),
    });
    let f = start_with(store.clone(), |c| c.max_message_bytes = 3 << 20);
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    let health = conn.block_on(c.health()).unwrap();
    assert_eq!(health.status, "serving");
    assert_eq!(health.max_message_bytes, 3 << 20);
    assert_eq!(
        health.max_messages_per_call,
        Limits::default().max_messages_per_call as u64
    );
    store.sick.store(true, Ordering::Relaxed);
    let health = conn.block_on(c.health()).unwrap();
    assert!(health.status.starts_with("degraded"), "{}", health.status);
    assert!(
        !health.status.contains("disk gone"),
        "details stay in the log"
    );
    store.sick.store(false, Ordering::Relaxed);
    assert_eq!(conn.block_on(c.health()).unwrap().status, "serving");
}

/// A read that fails in the store fails that request only, is counted in
/// `sesame_store_errors_total`, and later requests are served.
#[test]
fn store_failures_are_counted_and_fail_only_their_request() {
    let store = Arc::new(SlowStore {
        inner: MemoryStore::new(),
        delay_ms: AtomicU64::new(0),
        sick: AtomicBool::new(false),
        failing_scans: AtomicBool::new(false),
    });
    let f = start_with(store.clone(), |_| {});
    let errors = || -> u64 {
        admin_get(f.server.bound().admin.unwrap(), None)
            .lines()
            .find_map(|l| l.strip_prefix("sesame_store_errors_total ")?.parse().ok())
            .unwrap()
    };
    let conn = Connection::connect(&f.alice).unwrap();
    let mut c = conn.client();
    conn.block_on(c.list_indexes()).unwrap();
    assert_eq!(errors(), 0);
    store.failing_scans.store(true, Ordering::Relaxed);
    let err = conn.block_on(c.list_indexes()).unwrap_err();
    assert_eq!(err.code(), Code::Internal);
    assert!(
        !err.message().contains("sector unreadable"),
        "details stay in the log: {}",
        err.message()
    );
    assert!(errors() >= 1);
    store.failing_scans.store(false, Ordering::Relaxed);
    let before = errors();
    conn.block_on(c.list_indexes()).unwrap();
    assert_eq!(errors(), before);
}

/// With a bearer token, the admin port answers 401 to a request without
/// it or with another, and serves the metrics with it; off loopback, an
/// admin port without a token is refused at configuration.
#[test]
fn the_admin_port_can_require_a_bearer_token() {
    use sesame_server::metrics::AdminToken;
    let f = start_with(Arc::new(MemoryStore::new()), |c| {
        c.admin_token = Some(AdminToken::new("an-admin-token-of-some-length").unwrap());
    });
    let admin = f.server.bound().admin.unwrap();
    let get = |auth: Option<&str>| admin_get(admin, auth);
    for auth in [
        None,
        Some("Bearer wrong-token-of-some-length"),
        Some("Basic abc"),
    ] {
        let text = get(auth);
        assert!(
            text.starts_with("HTTP/1.1 401 Unauthorized"),
            "{auth:?}: {text}"
        );
        assert!(!text.contains("sesame_requests_total"), "{text}");
    }
    let text = get(Some("bearer an-admin-token-of-some-length"));
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(text.contains("sesame_uptime_seconds"), "{text}");
    assert!(AdminToken::new("too short").is_err());

    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.insecure_plaintext = true;
    config.tokens = Tokens::new()
        .with("t", &Tokens::generate(&mut OsRng))
        .unwrap();
    config.admin = Some("0.0.0.0:9100".parse().unwrap());
    let err = config.check().unwrap_err().to_string();
    assert!(err.contains("not on a loopback address"), "{err}");
    config.admin_token = Some(AdminToken::new("an-admin-token-of-some-length").unwrap());
    config.check().unwrap();
}
