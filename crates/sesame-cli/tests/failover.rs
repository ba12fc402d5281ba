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

use support::{spawn_serve, Site};

/// A `sesame serve` on store `store` (killed when dropped).
struct Serve {
    child: Child,
    port: u16,
    admin: u16,
}

impl Serve {
    fn start(site: &Site, port: u16, store: &str) -> Serve {
        let (child, port, admin) = spawn_serve(site, port, store, &[]);
        Serve { port, admin, child }
    }

    fn url(&self) -> String {
        format!("https://localhost:{}", self.port)
    }

    /// Scheme calls this server answered.
    fn calls(&self) -> u64 {
        self.metric("sesame_requests_total{method=\"Call\",code=\"OK\"}")
    }

    /// Scheme messages of upload streams (setups, rebuilds) this server
    /// received.
    fn upload_messages(&self) -> u64 {
        self.metric("sesame_upload_messages_total")
    }

    /// A counter of the server's metrics, by exact series name (0 when
    /// the server does not answer).
    fn metric(&self, series: &str) -> u64 {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.admin)) else {
            return 0;
        };
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n");
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0)
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` files under `dir/sub`, each with `words` keywords besides `all`
/// and one of seven `m` words; the oracle, keyword to paths.
fn corpus(site: &Site, sub: &str, n: usize, words: usize) -> BTreeMap<String, BTreeSet<String>> {
    std::fs::create_dir_all(site.path(sub)).unwrap();
    let mut oracle: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for i in 0..n {
        let words: BTreeSet<String> = ["all".to_owned(), format!("m{}", i % 7)]
            .into_iter()
            .chain((0..words).map(|j| format!("w{}", (i * 31 + j * 17) % 997)))
            .collect();
        let rel = format!("{sub}/f{i:04}.txt");
        std::fs::write(
            site.path(&rel),
            words.iter().cloned().collect::<Vec<_>>().join(" "),
        )
        .unwrap();
        for w in words {
            oracle.entry(w).or_default().insert(rel.clone());
        }
    }
    oracle
}

/// Every keyword tried finds exactly its paths, each once.
fn check_oracle(site: &Site, oracle: &BTreeMap<String, BTreeSet<String>>) {
    for w in oracle
        .keys()
        .filter(|w| w.starts_with('m') || *w == "all" || w.ends_with('3'))
    {
        let out = site.ok(&["--dir", "p", "search", w]);
        let paths: Vec<String> = out
            .lines()
            .map(|l| l.split_once('\t').unwrap().1.to_owned())
            .collect();
        let set: BTreeSet<String> = paths.iter().cloned().collect();
        assert_eq!(set.len(), paths.len(), "a document appears twice for {w}");
        assert_eq!(&set, &oracle[w], "keyword {w}");
    }
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
    let first = Serve::start(&site, 0, &store);
    let second = Serve::start(&site, 0, &store);
    let urls = format!("{},{}", first.url(), second.url());
    site.ok(&support::server_init(
        &["--dir", "p"],
        &urls,
        &["--scheme", "pibas", "--token", &site.token],
    ));
    // About 200 000 keyword-document pairs: an upload of several
    // messages of about 768 KiB each.
    let oracle = corpus(&site, "docs", 6000, 32);
    let add = site.client(&["--dir", "p", "add", "docs"]);
    let start = std::time::Instant::now();
    while first.upload_messages() < 1 && start.elapsed() < Duration::from_secs(300) {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(
        first.upload_messages() >= 1,
        "the first server got no upload"
    );
    first.kill();
    let out = add.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the add did not complete through the second server: {stderr}"
    );
    assert!(
        second.upload_messages() > 0,
        "the upload was not sent to the second server: {stderr}"
    );
    check_oracle(&site, &oracle);
    assert_eq!(site.ok(&["--dir", "p", "list"]).lines().count(), 6000);
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
    let first = Serve::start(&site, 0, &store);
    let second = Serve::start(&site, 0, &store);
    let first_port = first.port;
    let urls = format!("{},{}", first.url(), second.url());
    let out = site.ok(&support::server_init(
        &["--dir", "p"],
        &urls,
        &["--scheme", "fast", "--token", &site.token],
    ));
    assert!(out.contains(&urls), "{out}");
    // Eight pending intents of 512 documents each.
    let oracle = corpus(&site, "docs", 4096, 4);
    let add = site.client(&["--dir", "p", "add", "docs"]);
    // Some updates acknowledged by the first server, then it dies.
    let start = std::time::Instant::now();
    while first.calls() < 2 && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(first.calls() >= 2, "the first server answered no update");
    first.kill();
    let out = add.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the add did not complete through the second server: {stderr}"
    );
    assert!(
        second.calls() > 0,
        "the second server answered no update: {stderr}"
    );
    // Searches go on (through the second server), and find every document
    // once.
    check_oracle(&site, &oracle);
    assert_eq!(site.ok(&["--dir", "p", "list"]).lines().count(), 4096);
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
    let first = Serve::start(&site, first_port, &store);
    let before = second.calls();
    std::fs::write(site.path("docs/new.txt"), "all fresh").unwrap();
    site.ok(&["--dir", "p", "add", "docs"]);
    site.ok(&["--dir", "p", "search", "fresh"]);
    assert!(
        first.calls() > 0,
        "the next command did not go back to the first server"
    );
    assert_eq!(
        second.calls(),
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
    let one = Serve::start(&site, 0, "one.redb");
    let other = Serve::start(&site, 0, "other.redb");
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
