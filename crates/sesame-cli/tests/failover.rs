//! Client failover across servers: a profile names two servers that
//! share one store (two `sesame serve` on one PostgreSQL database); the
//! first is killed with SIGKILL in the middle of an add, the add completes
//! through the second, nothing is lost or stored twice, searches go on,
//! and the next command goes back to the first once it is up again.
//! A bad URL list is refused before anything is written.
//!
//! The two-server test needs `SESAME_TEST_POSTGRES` (as `.ci/run` sets
//! it); without it, it passes after a note.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Child;
use std::time::Duration;

use support::{check_oracle, corpus, Server, Site};

/// Scheme calls a server answered.
const CALLS: &str = "sesame_requests_total{method=\"Call\",code=\"OK\"}";

/// Scheme messages of upload streams (setups, rebuilds) a server
/// received.
const UPLOADS: &str = "sesame_upload_messages_total";

/// Kills `first` once `series` counts `at_least` there (waiting at most
/// `limit`), while `add` runs on the profile at `p`: the add completes
/// through `second`, which `series` shows was used, and every one of the
/// `documents` of `oracle` is found, once.
fn kill_and_complete(
    site: &Site,
    (first, second): (Server, &Server),
    add: Child,
    (series, at_least, limit): (&str, u64, Duration),
    oracle: &BTreeMap<String, BTreeSet<String>>,
    documents: usize,
) {
    let start = std::time::Instant::now();
    while first.metric(series) < at_least && start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(
        first.metric(series) >= at_least,
        "the first server did not reach {at_least} of {series}"
    );
    first.kill();
    let out = add.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the add did not complete through the second server: {stderr}"
    );
    assert!(
        second.metric(series) > 0,
        "the second server got no {series}: {stderr}"
    );
    check_oracle(site, "p", oracle);
    assert_eq!(site.ok(&["--dir", "p", "list"]).lines().count(), documents);
}

/// The spec of a fresh namespace of the database at `url`.
fn fresh_namespace(url: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let namespace = format!("failover{}_{nanos}", std::process::id());
    format!("{url}{sep}namespace={namespace}")
}

/// The database named by `SESAME_TEST_POSTGRES`, or a note and `None`.
fn postgres_url() -> Option<String> {
    let url = std::env::var("SESAME_TEST_POSTGRES")
        .ok()
        .filter(|u| !u.is_empty());
    if url.is_none() {
        eprintln!("note: failover test skipped: SESAME_TEST_POSTGRES is not set");
    }
    url
}

/// A static scheme (PiBas) rebuilds its whole index on each add, as one
/// upload stream of many messages: the server in use is killed while the
/// stream is in flight (after its first message, before its commit); the
/// client sends the upload again, from its first message under the same
/// upload id, to the other server on the same store, and the add
/// completes: every document found once.
#[test]
fn an_upload_in_flight_when_its_server_dies_is_sent_again_to_the_other() {
    let Some(url) = postgres_url() else { return };
    let site = Site::new();
    let store = fresh_namespace(&url);
    let first = Server::start_on(&site, 0, &store, &[]);
    let second = Server::start_on(&site, 0, &store, &[]);
    let urls = format!("{},{}", first.url(), second.url());
    site.ok(&support::server_init(
        &["--dir", "p"],
        &urls,
        &["--scheme", "pibas", "--token", &site.token],
    ));
    // About 200 000 keyword-document pairs: an upload of several
    // messages of about 768 KiB each.
    let (oracle, _) = corpus(&site, "docs", 6000, 32, 997);
    let add = site.client(&["--dir", "p", "add", "docs"]);
    // The upload's first message reached the first server, then it dies;
    // the upload is sent again to the second.
    let wait = (UPLOADS, 1, Duration::from_secs(300));
    kill_and_complete(&site, (first, &second), add, wait, &oracle, 6000);
    drop(second);
    sesame_store::PostgresStore::open(&store)
        .unwrap()
        .destroy()
        .unwrap();
}

#[test]
fn a_server_killed_during_an_add_fails_over_to_the_other_on_the_same_store() {
    let Some(url) = postgres_url() else { return };
    let site = Site::new();
    let store = fresh_namespace(&url);
    let first = Server::start_on(&site, 0, &store, &[]);
    let second = Server::start_on(&site, 0, &store, &[]);
    let first_port = first.port;
    let urls = format!("{},{}", first.url(), second.url());
    let out = site.ok(&support::server_init(
        &["--dir", "p"],
        &urls,
        &["--scheme", "fast", "--token", &site.token],
    ));
    assert!(out.contains(&urls), "{out}");
    // Eight pending intents of 512 documents each.
    let (oracle, _) = corpus(&site, "docs", 4096, 4, 997);
    let add = site.client(&["--dir", "p", "add", "docs"]);
    // Some updates acknowledged by the first server, then it dies; the
    // add completes through the second, and searches go on (through the
    // second server) and find every document once.
    let wait = (CALLS, 2, Duration::from_secs(120));
    kill_and_complete(&site, (first, &second), add, wait, &oracle, 4096);
    // No label stored twice: every keyword-document pair is one entry.
    let pairs: usize = oracle.values().map(BTreeSet::len).sum();
    let pg = sesame_store::PostgresStore::open(&store).unwrap();
    let binding: serde_json::Value =
        serde_json::from_slice(&std::fs::read(site.path("p/server.json")).unwrap()).unwrap();
    assert_eq!(binding["url"].as_str(), Some(urls.as_str()));
    let index = format!(
        "{}default",
        binding["index_prefix"].as_str().unwrap_or_default()
    );
    let stored: usize = ["i", "e"]
        .iter()
        .map(|letter| {
            let generation = format!("{letter}/t/{index}/0/");
            sesame_store::packed::pairs_under(&pg, generation.as_bytes())
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(stored, pairs, "every pair stored once");
    // The first server back on its port: the next command uses it again.
    let first = Server::start_on(&site, first_port, &store, &[]);
    let before = second.metric(CALLS);
    std::fs::write(site.path("docs/new.txt"), "all fresh").unwrap();
    site.ok(&["--dir", "p", "add", "docs"]);
    site.ok(&["--dir", "p", "search", "fresh"]);
    assert!(
        first.metric(CALLS) > 0,
        "the next command did not go back to the first server"
    );
    assert_eq!(
        second.metric(CALLS),
        before,
        "the second server was used with the first up"
    );
    drop((first, second));
    pg.destroy().unwrap();
}

/// Two servers on two different stores (two redb files) named in one
/// profile's URL list: the profile is refused before anything is
/// written, with an error naming both URLs.
#[test]
fn servers_of_different_stores_are_refused_in_one_url_list() {
    let site = Site::new();
    let one = Server::start_on(&site, 0, "one.redb", &[]);
    let other = Server::start_on(&site, 0, "other.redb", &[]);
    let urls = format!("{},{}", one.url(), other.url());
    let err = site.fails(&support::server_init(
        &["--dir", "p"],
        &urls,
        &["--token", &site.token],
    ));
    assert!(
        err.contains(&one.url()) && err.contains(&other.url()),
        "the error names both URLs: {err}"
    );
    assert!(err.contains("different stores"), "{err}");
    assert!(!site.path("p/profile.json").exists());
    // Servers of one store are accepted: the PostgreSQL tests above.
}

#[test]
fn a_bad_server_url_list_is_refused_before_anything_is_written() {
    let site = Site::new();
    for (list, says) in [
        ("https://localhost:1,,https://localhost:2", "URL 2 is empty"),
        ("https://localhost:1,", "URL 2 is empty"),
        (
            "https://localhost:1,ftp://localhost:2",
            "is not http:// or https://",
        ),
        ("https://localhost:1,https://localhost:1", "is named twice"),
        ("https://localhost:1,https://localhost:2/x", "has a path"),
    ] {
        let err = site.fails(&support::server_init(
            &["--dir", "p"],
            list,
            &["--token", &site.token],
        ));
        assert!(err.contains("--server: server URL list"), "{list}: {err}");
        assert!(err.contains(says), "{list}: {err}");
        let errors = err.lines().filter(|l| l.starts_with("error: ")).count();
        assert_eq!(errors, 1, "one line says what is wrong: {err}");
        assert!(!site.path("p/profile.json").exists());
    }
}
