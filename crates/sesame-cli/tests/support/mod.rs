//! What the CLI's tests against `sesame serve` share: the `sesame` binary
//! with a clean environment, a scratch site (certificates and a tokens
//! file) and a running server. Each test binary uses a part of it
//! (`mod support;`).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The passphrase every profile of these tests has.
pub(crate) const PASS: &str = "test passphrase";

/// The `sesame` binary, with none of the user's settings and a fast key
/// derivation.
pub(crate) fn sesame() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sesame"));
    c.env_remove("SESAME_HOME")
        .env_remove("SESAME_TOKEN")
        .env_remove("SESAME_KEY_FILE")
        .env_remove("SESAME_KDF_MAX_MIB")
        .env_remove("SESAME_KDF_MAX_PASSES")
        .env("SESAME_PASSPHRASE", PASS)
        .env("SESAME_KDF", "fast")
        .stdin(Stdio::null());
    c
}

/// The arguments `BEFORE init --server URL --ca certs/ca.pem AFTER` of
/// an `init` on the server at `url` (the token's flag among `after`).
pub(crate) fn server_init<'a>(before: &[&'a str], url: &'a str, after: &[&'a str]) -> Vec<&'a str> {
    let mut args = before.to_vec();
    args.extend(["init", "--server", url, "--ca", "certs/ca.pem"]);
    args.extend_from_slice(after);
    args
}

/// The TLS and token arguments of `sesame serve` on a [`Site`].
pub(crate) const SERVE_FILES: [&str; 6] = [
    "--tls-cert",
    "certs/server.pem",
    "--tls-key",
    "certs/server.key",
    "--tokens",
    "tokens.txt",
];

/// The standard output of `sesame ARGS`, which must have succeeded
/// (its standard error in the message when it did not).
pub(crate) fn succeeded(args: &[&str], out: Output) -> String {
    assert!(
        out.status.success(),
        "sesame {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `cmd` (its output discarded) and kills it (SIGKILL) after
/// `micros` microseconds, wherever it got to.
pub(crate) fn kill_after(cmd: &mut Command, micros: u64) {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_micros(micros));
    let _ = child.kill();
    let _ = child.wait();
}

/// A scratch directory with certificates (`certs/`) and a tokens file
/// (`tokens.txt`) for tenant `t`.
pub(crate) struct Site {
    pub(crate) tmp: tempfile::TempDir,
    pub(crate) token: String,
}

impl Site {
    pub(crate) fn new() -> Self {
        let site = Site {
            tmp: tempfile::tempdir().unwrap(),
            token: String::new(),
        };
        site.ok(&["cert", "certs"]);
        let token = site
            .ok(&["token", "new", "t", "--tokens", "tokens.txt"])
            .trim()
            .to_owned();
        assert!(token.starts_with("sst1_"), "{token}");
        Site { token, ..site }
    }

    pub(crate) fn path(&self, p: &str) -> PathBuf {
        self.tmp.path().join(p)
    }

    /// `sesame ARGS` run in the site directory; it never panics.
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        let out = sesame()
            .current_dir(self.tmp.path())
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "sesame {args:?}: {err}");
        out
    }

    /// The command succeeded; its standard output.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        succeeded(args, self.run(args))
    }

    /// The command failed; its standard error.
    pub(crate) fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            !out.status.success(),
            "sesame {args:?} succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        err
    }

    /// `sesame ARGS` started in the site directory, its output piped.
    pub(crate) fn client(&self, args: &[&str]) -> Child {
        sesame()
            .current_dir(self.tmp.path())
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// `sesame ARGS` started in the site directory, its output dropped.
    pub(crate) fn spawn(&self, args: &[&str]) -> Child {
        sesame()
            .current_dir(self.tmp.path())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }
}

/// Starts `sesame serve` of a site on `port` (0: any) over `store`, with
/// the site's certificate and tokens and a loopback admin port; gives the
/// child and the ports it printed.
#[allow(dead_code)] // Not every test binary starts a server.
pub(crate) fn spawn_serve(site: &Site, port: u16, store: &str, more: &[&str]) -> (Child, u16, u16) {
    let listen = format!("127.0.0.1:{port}");
    let mut child = sesame()
        .current_dir(site.tmp.path())
        .args(["serve", "--listen", &listen, "--store", store])
        .args(["--admin", "127.0.0.1:0"])
        .args(SERVE_FILES)
        .args(more)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let second = lines.next().unwrap().unwrap();
    let port_of = |line: &str| -> u16 {
        let rest = &line[line.find("127.0.0.1:").unwrap() + 10..];
        rest.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap()
    };
    assert!(first.starts_with("listening on https://"), "{first}");
    (child, port_of(&first), port_of(&second))
}

/// A running `sesame serve` of a site: store `server.redb` (or another,
/// [`Server::start_on`]), the site's certificate and tokens, metrics on
/// a loopback admin port (killed when dropped).
pub(crate) struct Server {
    child: Child,
    pub(crate) port: u16,
    pub(crate) admin: u16,
}

impl Server {
    /// Starts the server on `port` (0: any).
    pub(crate) fn start(site: &Site, port: u16) -> Server {
        Self::start_with(site, port, &[])
    }

    /// As [`Server::start`], with more arguments.
    pub(crate) fn start_with(site: &Site, port: u16, more: &[&str]) -> Server {
        Self::start_on(site, port, "server.redb", more)
    }

    /// As [`Server::start_with`], over store `store` (a path or a spec).
    pub(crate) fn start_on(site: &Site, port: u16, store: &str, more: &[&str]) -> Server {
        let (child, port, admin) = spawn_serve(site, port, store, more);
        Server { port, admin, child }
    }

    pub(crate) fn url(&self) -> String {
        format!("https://localhost:{}", self.port)
    }

    /// A counter from the metrics, by exact series name.
    pub(crate) fn metric(&self, series: &str) -> u64 {
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

    /// Waits until `series` reaches `n` (or `limit` passes).
    pub(crate) fn wait_for(&self, series: &str, n: u64, limit: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if self.metric(series) >= n {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// SIGKILL.
    pub(crate) fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM and wait: a graceful stop.
    pub(crate) fn stop(mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "graceful stop: {status:?}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` files under `dir/sub`, each with `all`, one of seven `m` words
/// and `words_per_doc` of `vocabulary` `w` words; the oracle, keyword to
/// paths; the number of keyword-document pairs.
pub(crate) fn corpus(
    site: &Site,
    sub: &str,
    n: usize,
    words_per_doc: usize,
    vocabulary: usize,
) -> (BTreeMap<String, BTreeSet<String>>, usize) {
    let root = site.path(sub);
    std::fs::create_dir_all(&root).unwrap();
    let mut oracle: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut pairs = 0;
    for i in 0..n {
        let mut words: BTreeSet<String> = BTreeSet::new();
        words.insert("all".into());
        words.insert(format!("m{}", i % 7));
        for j in 0..words_per_doc {
            words.insert(format!("w{}", (i * 31 + j * 17) % vocabulary));
        }
        let rel = format!("{sub}/f{i:04}.txt");
        std::fs::write(
            site.path(&rel),
            words.iter().cloned().collect::<Vec<_>>().join(" "),
        )
        .unwrap();
        pairs += words.len();
        for w in words {
            oracle.entry(w).or_default().insert(rel.clone());
        }
    }
    (oracle, pairs)
}

/// Every keyword of the oracle finds exactly its paths, each once.
pub(crate) fn check_oracle(site: &Site, dir: &str, oracle: &BTreeMap<String, BTreeSet<String>>) {
    for w in oracle
        .keys()
        .filter(|w| w.starts_with('m') || *w == "all" || w.ends_with('3'))
    {
        let out = site.ok(&["--dir", dir, "search", w]);
        let paths: Vec<String> = out
            .lines()
            .map(|l| l.split_once('\t').unwrap().1.to_owned())
            .collect();
        let set: BTreeSet<String> = paths.iter().cloned().collect();
        assert_eq!(set.len(), paths.len(), "a document appears twice for {w}");
        assert_eq!(&set, &oracle[w], "keyword {w}");
    }
}
