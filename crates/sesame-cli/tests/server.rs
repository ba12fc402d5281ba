//! `sesame serve` as a real process, and `sesame` clients against it:
//! the tour, refusals, and crash safety — the server killed with SIGKILL in
//! the middle of a bulk upload and of a stream of updates, the client
//! killed in the middle of an add — each checked against a plaintext
//! oracle, and the server's store checked for labels written twice.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Output;
use std::time::Duration;

use support::{check_oracle, corpus, sesame, Server, Site};

/// The server's name of profile `p`'s index `default`: its prefix (from
/// `p/server.json`) and `default`.
fn server_index(site: &Site) -> String {
    let binding: serde_json::Value =
        serde_json::from_slice(&std::fs::read(site.path("p/server.json")).unwrap()).unwrap();
    let prefix = binding["index_prefix"].as_str().unwrap_or("");
    assert!(
        prefix.starts_with('p') && prefix.ends_with('-'),
        "{prefix:?}"
    );
    format!("{prefix}default")
}

/// Index entries of profile `p`'s index `default` (tenant `t`),
/// generation `g`, in the server's store (the server must be stopped).
fn entries(site: &Site, g: u64) -> usize {
    let store = sesame_store::RedbStore::open(site.path("server.redb")).unwrap();
    let index = server_index(site);
    // Under `e/` for a scheme whose entries are written once (spread);
    // packed ones unpacked.
    ["i", "e"]
        .iter()
        .map(|letter| {
            let generation = format!("{letter}/t/{index}/{g}/");
            sesame_store::packed::pairs_under(&store, generation.as_bytes())
                .unwrap()
                .len()
        })
        .sum()
}

fn init(site: &Site, dir: &str, scheme: &str, server: &Server) {
    let out = site.ok(&support::server_init(
        &["--dir", dir],
        &server.url(),
        &["--scheme", scheme, "--token", &site.token],
    ));
    assert!(out.contains("on server https://localhost:"), "{out}");
}

#[test]
fn the_tour_works_against_a_server_and_refusals_are_one_line() {
    let site = Site::new();
    let server = Server::start(&site, 0);
    std::fs::create_dir_all(site.path("notes")).unwrap();
    std::fs::write(site.path("notes/a.txt"), "Budget meeting with Alice").unwrap();
    std::fs::write(site.path("notes/b.txt"), "budget report").unwrap();
    init(&site, "p", "fast", &server);
    let out = site.ok(&["--dir", "p", "add", "notes"]);
    assert!(out.contains("added 2 documents"), "{out}");
    assert_eq!(
        site.ok(&["--dir", "p", "search", "budget"]),
        "1\tnotes/a.txt\n2\tnotes/b.txt\n"
    );
    assert_eq!(
        site.ok(&["--dir", "p", "get", "1"]),
        "Budget meeting with Alice"
    );
    assert!(
        !site.path("p/store.redb").exists(),
        "nothing stored locally"
    );
    let out = site.ok(&["--dir", "p", "compact"]);
    assert!(out.contains("nothing to compact here"), "{out}");
    assert!(!site.path("p/store.redb").exists());

    let err = |out: Output, needle: &str, code: i32| {
        let text = String::from_utf8(out.stderr).unwrap();
        let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("error: ")).collect();
        assert_eq!(errors.len(), 1, "{text}");
        assert!(errors[0].contains(needle), "{text} lacks {needle}");
        assert_eq!(out.status.code(), Some(code), "{text}");
    };
    let url = server.url();
    // A second profile on the same tenant has its own index (its own
    // prefix on the server): each finds its own documents only.
    init(&site, "q", "fast", &server);
    std::fs::create_dir_all(site.path("other")).unwrap();
    std::fs::write(site.path("other/c.txt"), "budget of q").unwrap();
    site.ok(&["--dir", "q", "add", "other"]);
    assert_eq!(
        site.ok(&["--dir", "q", "search", "budget"]),
        "1\tother/c.txt\n"
    );
    assert_eq!(
        site.ok(&["--dir", "p", "search", "budget"]),
        "1\tnotes/a.txt\n2\tnotes/b.txt\n"
    );
    err(
        site.run(&support::server_init(
            &["--dir", "r"],
            &url,
            &["--token", "sst1_bad"],
        )),
        "invalid token (UNAUTHENTICATED)",
        1,
    );
    assert!(!site.path("r/profile.json").exists());
    let init_r = |url: &str, token: &str| {
        site.run(&["--dir", "r", "init", "--server", url, "--token", token])
    };
    err(init_r(&url, &site.token), "cannot reach the server", 1);
    err(
        init_r("http://example.com:1", "x"),
        "only to a loopback address",
        2,
    );
    err(
        site.run(&[
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--store",
            "memory",
            "--insecure-plaintext",
        ]),
        "only on a loopback address",
        2,
    );
    err(site.run(&["serve", "--store", "memory"]), "--tls-cert", 2);
    err(
        site.run(&[
            "serve",
            "--store",
            "p/../server.redb",
            "--insecure-plaintext",
            "--listen",
            "127.0.0.1:0",
        ]),
        "already open",
        1,
    );
    server.stop();
}

#[test]
fn server_killed_during_a_stream_of_updates_loses_nothing_acknowledged() {
    let site = Site::new();
    let server = Server::start(&site, 0);
    let port = server.port;
    init(&site, "p", "fast", &server);
    // Ten pending intents of 512 documents each.
    let (oracle, pairs) = corpus(&site, "docs", 5120, 6, 97);
    let add = site.client(&["--dir", "p", "add", "docs"]);
    // Some updates acknowledged, then the server dies.
    assert!(server.wait_for(
        "sesame_requests_total{method=\"Call\",code=\"OK\"}",
        2,
        Duration::from_secs(60)
    ));
    server.kill();
    let out = add.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the add should fail: {stderr}");
    assert!(stderr.contains("error: "), "{stderr}");
    let server = Server::start(&site, port);
    // What was acknowledged is there: the next command completes the
    // pending update (whose completion may not have reached the shared
    // state before the server died) before it answers; running the add
    // again completes it.
    let search = site.run(&["--dir", "p", "search", "all"]);
    let found = String::from_utf8_lossy(&search.stdout).lines().count();
    assert!(found >= 1024, "at least two acknowledged updates: {found}");
    let out = site.run(&["--dir", "p", "add", "docs"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The search or the add completed the interrupted update, when the
    // server died with one pending (it may also die between two updates,
    // while the next documents are stored: then nothing is pending, and
    // the add simply goes on).
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&search.stderr),
        String::from_utf8_lossy(&out.stderr)
    );
    if stderr.contains("will be sent again by the next command") {
        assert!(
            said.contains("of an interrupted add") || said.contains("completed an interrupted add"),
            "{said}"
        );
    }
    all_once(&site, &oracle, server, pairs);
}

/// Standard error or output, as text.
fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// After an add killed with its server: every document of `oracle` is
/// found, all 5,120 listed, and once `server` stops its store holds
/// `pairs` index entries: every pair stored once, no label written twice.
fn all_once(
    site: &Site,
    oracle: &BTreeMap<String, BTreeSet<String>>,
    server: Server,
    pairs: usize,
) {
    check_oracle(site, "p", oracle);
    assert_eq!(site.ok(&["--dir", "p", "list"]).lines().count(), 5120);
    server.stop();
    assert_eq!(
        entries(site, 0),
        pairs,
        "every pair stored once, no label written twice"
    );
}

/// Records the messages a scheme client sends, answering each from a
/// real server half in this process.
struct Tap {
    inner: sesame_core::LocalChannel<Box<dyn sesame_core::Service>>,
    sent: Vec<Vec<u8>>,
}

impl sesame_core::Channel for Tap {
    fn call(&mut self, request: &[u8]) -> sesame_core::Result<Vec<u8>> {
        self.sent.push(request.to_vec());
        self.inner.call(request)
    }
    fn meter(&self) -> &sesame_core::Meter {
        self.inner.meter()
    }
}

#[test]
fn server_killed_during_a_bulk_upload_keeps_the_old_index() {
    let site = Site::new();
    let server = Server::start(&site, 0);
    let port = server.port;
    init(&site, "p", "pibas", &server);
    let (mut oracle, _) = corpus(&site, "first", 30, 4, 97);
    site.ok(&["--dir", "p", "add", "first"]);

    // An upload into a new generation of the tenant's index, killed after
    // 40 acknowledged messages, before its commit.
    let scheme = sesame_sse::scheme("pibas").unwrap();
    let mut rng = rand_core::OsRng;
    let mut tap = Tap {
        inner: sesame_core::LocalChannel::new(
            scheme
                .server(
                    std::sync::Arc::new(sesame_store::MemoryStore::new()),
                    &sesame_core::Params::new(),
                )
                .unwrap(),
        ),
        sent: Vec::new(),
    };
    for i in 0..40u64 {
        let mut db = sesame_sse::Multimap::new();
        db.insert(format!("all{i}").into_bytes(), (1..=200).collect());
        db.insert(b"m0".to_vec(), vec![900 + i]);
        let mut client = (scheme.new_client)(&mut rng, &sesame_core::Params::new()).unwrap();
        sesame_sse::KeywordClient::setup(&mut *client, &mut rng, &mut tap, &db).unwrap();
    }
    let config = sesame_net::ClientConfig::new(server.url(), site.token.clone())
        .with_ca(std::fs::read(site.path("certs/ca.pem")).unwrap());
    let conn = sesame_net::blocking::Connection::connect(&config).unwrap();
    let mut upload = conn
        .upload(&server_index(&site), "pibas", 99, sesame_core::Meter::new())
        .unwrap();
    for m in &tap.sent {
        sesame_core::Channel::call(&mut upload, m).unwrap();
    }
    assert_eq!(
        server.metric("sesame_upload_messages_total"),
        tap.sent.len() as u64 + 1
    );
    server.kill();
    assert!(upload.commit().is_err(), "the server is gone");
    drop(conn);

    // Nothing of it is visible; the old index is whole.
    let server = Server::start(&site, port);
    check_oracle(&site, "p", &oracle);

    // An add killed at some point of its rebuild (storing, fetching,
    // uploading or committing), then run again: complete either way.
    let (more, _) = corpus(&site, "second", 3000, 12, 97);
    let add = site.client(&["--dir", "p", "add", "second"]);
    assert!(server.wait_for(
        "sesame_requests_total{method=\"PutDocuments\",code=\"OK\"}",
        1,
        Duration::from_secs(120)
    ));
    server.kill();
    let finished = add.wait_with_output().unwrap().status.success();
    let server = Server::start(&site, port);
    // The old index or the new one, whole: never a mix.
    let found: BTreeSet<String> = site
        .ok(&["--dir", "p", "search", "all"])
        .lines()
        .map(|l| l.split_once('\t').unwrap().1.to_owned())
        .collect();
    let mut both = oracle["all"].clone();
    both.extend(more["all"].iter().cloned());
    assert!(
        found == oracle["all"] || found == both,
        "{} documents",
        found.len()
    );
    if !finished {
        let out = site.run(&["--dir", "p", "add", "second"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for (w, p) in more {
        oracle.entry(w).or_default().extend(p);
    }
    check_oracle(&site, "p", &oracle);
    assert_eq!(site.ok(&["--dir", "p", "list"]).lines().count(), 3030);
    server.stop();
    assert_eq!(entries(&site, 99), 0, "no entry of the killed upload");
}

#[test]
fn client_killed_during_an_add_reuses_no_label_and_the_rerun_completes() {
    let site = Site::new();
    let server = Server::start(&site, 0);
    init(&site, "p", "fast", &server);
    // Ten pending intents of 512 documents each.
    let (oracle, pairs) = corpus(&site, "docs", 5120, 6, 97);
    let mut add = site.client(&["--dir", "p", "add", "docs"]);
    assert!(server.wait_for(
        "sesame_requests_total{method=\"Call\",code=\"OK\"}",
        2,
        Duration::from_secs(60)
    ));
    add.kill().unwrap();
    add.wait().unwrap();
    let out = site.run(&["--dir", "p", "add", "docs"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    all_once(&site, &oracle, server, pairs);
}

/// `sesame serve` refuses, in one line and before it opens the store, a
/// TLS key or an admin token file other users can read, a tokens file
/// they can write, a short admin token, and an admin port off loopback
/// without a token.
#[cfg(unix)]
#[test]
fn serve_refuses_open_secrets_and_an_unprotected_admin_port() {
    use std::os::unix::fs::PermissionsExt;
    let site = Site::new();
    let chmod = |p: &str, mode: u32| {
        std::fs::set_permissions(site.path(p), std::fs::Permissions::from_mode(mode)).unwrap()
    };
    std::fs::write(site.path("admin.token"), "a-long-enough-admin-token\n").unwrap();
    chmod("admin.token", 0o600);
    std::fs::write(site.path("short.token"), "short\n").unwrap();
    chmod("short.token", 0o600);
    let serve = |extra: &[&str]| {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--store", "memory"];
        args.extend_from_slice(&support::SERVE_FILES);
        args.extend_from_slice(extra);
        site.run(&args)
    };
    let refused = |out: Output, needle: &str| {
        let text = String::from_utf8(out.stderr).unwrap();
        let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("error: ")).collect();
        assert_eq!(errors.len(), 1, "{text}");
        assert!(errors[0].contains(needle), "{text} lacks {needle}");
        assert!(!out.status.success());
    };
    chmod("certs/server.key", 0o644);
    refused(serve(&[]), "the TLS private key");
    chmod("certs/server.key", 0o600);
    chmod("tokens.txt", 0o666);
    refused(serve(&[]), "the tokens file");
    chmod("tokens.txt", 0o644);
    chmod("admin.token", 0o640);
    refused(
        serve(&[
            "--admin",
            "127.0.0.1:0",
            "--admin-token-file",
            "admin.token",
        ]),
        "the admin token file",
    );
    chmod("admin.token", 0o600);
    refused(
        serve(&[
            "--admin",
            "127.0.0.1:0",
            "--admin-token-file",
            "short.token",
        ]),
        "at least 16 characters",
    );
    refused(
        serve(&["--admin", "0.0.0.0:0"]),
        "not on a loopback address",
    );
}

/// A server-bound profile made with a key file needs it; a backup of it
/// restores into a new directory that reaches the same server index.
#[test]
fn a_server_profile_with_a_key_file_and_its_backup() {
    let site = Site::new();
    let server = Server::start(&site, 0);
    std::fs::create_dir_all(site.path("notes")).unwrap();
    std::fs::write(site.path("notes/a.txt"), "Budget meeting").unwrap();
    let out = site.ok(&support::server_init(
        &["--dir", "p", "--key-file", "kf"],
        &server.url(),
        &["--scheme", "fast", "--token", &site.token],
    ));
    assert!(out.contains("on server"), "{out}");
    site.ok(&["--dir", "p", "--key-file", "kf", "add", "notes"]);
    let out = site.run(&["--dir", "p", "list"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs its key file"));
    site.ok(&["--dir", "p", "--key-file", "kf", "backup", "bk"]);
    site.ok(&["--dir", "q", "--key-file", "kf", "restore", "bk"]);
    assert_eq!(
        site.ok(&["--dir", "q", "--key-file", "kf", "search", "budget"]),
        "1\tnotes/a.txt\n"
    );
    server.stop();
}

/// `init --join`: a second device (another profile directory) of the same
/// profile, against the same server index; adds and searches from both in
/// turn, each seeing the other's documents; a wrong passphrase joins
/// nothing.
#[test]
fn a_second_device_joins_and_both_add_and_search() {
    let site = Site::new();
    let server = Server::start(&site, 0);
    init(&site, "p", "fast", &server);
    let remote = server_index(&site);
    let url = server.url();
    let join = support::server_init(
        &["--dir", "phone"],
        &url,
        &["--token", &site.token, "--join", &remote],
    );
    let out = sesame()
        .current_dir(site.path(""))
        .env("SESAME_PASSPHRASE", "not the passphrase")
        .args(&join)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("wrong passphrase"), "{text}");
    assert!(!site.path("phone/profile.json").exists());

    let out = site.ok(&join);
    assert!(out.contains("joined profile phone"), "{out}");
    assert!(out.contains("0 documents"), "{out}");

    let mut oracle: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (round, (dir, other)) in [("p", "phone"), ("phone", "p"), ("p", "phone")]
        .into_iter()
        .enumerate()
    {
        let (more, _) = corpus(&site, &format!("{dir}-{round}"), 5, 3, 97);
        for (w, paths) in more {
            oracle.entry(w).or_default().extend(paths);
        }
        let out = site.ok(&["--dir", dir, "add", &format!("{dir}-{round}")]);
        assert!(out.contains("added 5 documents"), "{out}");
        check_oracle(&site, other, &oracle);
    }
    check_oracle(&site, "p", &oracle);
    assert_eq!(
        site.ok(&["--dir", "p", "list"]),
        site.ok(&["--dir", "phone", "list"])
    );
}

/// The issue's reproduction, against a real `sesame serve` and its redb
/// file: the phone joins; the operator copies the store file (server
/// stopped); the laptop adds; the copy is put back; the phone adds as
/// much. The laptop's next `search` is refused (the server's state does
/// not continue what it saw) and changes nothing; `sesame devices` lists
/// on each device the state each last wrote, where the two disagree.
#[test]
fn a_restored_store_file_is_a_fork_the_first_device_refuses() {
    let site = Site::new();
    let server = Server::start(&site, 0);
    let port = server.port;
    init(&site, "p", "fast", &server);
    let remote = server_index(&site);
    let url = server.url();
    site.ok(&support::server_init(
        &["--dir", "phone"],
        &url,
        &["--token", &site.token, "--join", &remote],
    ));
    corpus(&site, "p-0", 3, 3, 97);
    site.ok(&["--dir", "p", "add", "p-0"]);
    assert!(site
        .ok(&["--dir", "phone", "search", "all"])
        .contains("p-0"));
    server.stop();
    std::fs::copy(site.path("server.redb"), site.path("copy.redb")).unwrap();

    let server = Server::start(&site, port);
    corpus(&site, "p-1", 3, 3, 97);
    site.ok(&["--dir", "p", "add", "p-1"]);
    server.stop();
    std::fs::copy(site.path("copy.redb"), site.path("server.redb")).unwrap();
    let server = Server::start(&site, port);
    corpus(&site, "phone-1", 3, 3, 97);
    site.ok(&["--dir", "phone", "add", "phone-1"]);

    let before = std::fs::read(site.path("p/indexes/default.state")).unwrap();
    let out = site.run(&["--dir", "p", "search", "all"]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the search after the fork: {text}"
    );
    assert!(
        text.contains("does not continue what this device saw"),
        "{text}"
    );
    assert!(text.contains("sesame devices"), "{text}");
    assert_eq!(text.trim().lines().count(), 1, "one line: {text}");
    assert!(out.stdout.is_empty(), "no result printed");
    assert_eq!(
        std::fs::read(site.path("p/indexes/default.state")).unwrap(),
        before,
        "nothing changed"
    );

    // Each device lists what it saw; the laptop's listing ends in the
    // refusal. Both list the version with different digests.
    let p = site.run(&["--dir", "p", "devices"]);
    assert_eq!(p.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&p.stderr).contains("does not continue"));
    let phone = site.ok(&["--dir", "phone", "devices"]);
    let p = String::from_utf8(p.stdout).unwrap();
    let first = |t: &str| t.lines().next().unwrap().to_owned();
    let version = |t: &str| first(t).split("version ").nth(1).unwrap().to_owned();
    assert!(
        first(&p).starts_with("index default: newest state seen"),
        "{p}"
    );
    assert_eq!(
        version(&p).split(',').next(),
        version(&phone).split(',').next(),
        "one version: {p} / {phone}"
    );
    assert_ne!(first(&p), first(&phone), "two digests: {p} / {phone}");
    assert!(p.contains("(this device)") && phone.contains("(this device)"));
    drop(server);
}

/// `serve --record-view FILE`: one JSON line per operation, with the
/// documents a search fetched among its reads, no plaintext keyword or
/// content anywhere; an existing file is refused.
#[test]
fn the_server_view_is_recorded_for_research() {
    let site = Site::new();
    let server = Server::start_with(&site, 0, &["--record-view", "view.jsonl"]);
    std::fs::create_dir_all(site.path("notes")).unwrap();
    std::fs::write(site.path("notes/a.txt"), "zanzibar budget").unwrap();
    std::fs::write(site.path("notes/b.txt"), "budget only").unwrap();
    init(&site, "p", "fast", &server);
    site.ok(&["--dir", "p", "add", "notes"]);
    assert_eq!(site.ok(&["--dir", "p", "get", "1"]), "zanzibar budget");
    site.ok(&["--dir", "p", "search", "zanzibar"]);
    server.stop();
    let text = std::fs::read_to_string(site.path("view.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let methods: Vec<&str> = lines
        .iter()
        .map(|l| l["method"].as_str().unwrap())
        .collect();
    for m in ["Call", "PutDocuments", "GetDocuments"] {
        assert!(methods.contains(&m), "{m} in {methods:?}");
    }
    let index = server_index(&site);
    assert!(lines
        .iter()
        .all(|l| l["index"] == index.as_str() && l["tenant"] == "t"));
    // The get read document 1, known by its head: d/t/<index>/h + 1.
    let mut doc1 = format!("d/t/{index}/h").into_bytes();
    doc1.extend_from_slice(&1u64.to_be_bytes());
    let doc1 = to_hex(&doc1);
    assert!(
        text.contains(&format!("\"read\":\"{doc1}\"")),
        "the fetch of document 1"
    );
    for secret in ["zanzibar", "budget"] {
        assert!(
            !text.contains(&to_hex(secret.as_bytes())),
            "{secret} in the view"
        );
        assert!(!text.contains(secret), "{secret} in the view");
    }
    let out = sesame()
        .current_dir(site.tmp.path())
        .args([
            "serve",
            "--store",
            "memory",
            "--insecure-plaintext",
            "--listen",
            "127.0.0.1:0",
            "--record-view",
            "view.jsonl",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("must not exist yet"), "{stderr}");
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
