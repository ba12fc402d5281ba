//! The fault-injection harness: the real `sesame` binary (and, for server
//! profiles, a real `sesame serve`) under SIGKILL at random points,
//! repeated interruptions of the same command, concurrent writers on one
//! profile, a filesystem that fills up under the store (when run as root:
//! the profile, or the server's store, on a small tmpfs whose size is cut
//! to no room at all before a run's first `add`, and to a random point
//! above what it holds after each interrupted `add`), and a
//! changing directory (`add` as a sync, `rm`), with every
//! search checked against a plaintext oracle and `list` checked for
//! duplicates after each round.
//!
//! The oracle is the directory as it is on disk: after an interrupted
//! command is run again to completion, the index must hold exactly its
//! files, each once, each found by every one of its words and by no other.
//! A command killed before it completes may or may not have taken effect;
//! the next completed command must leave that state.
//!
//! The short seeded run below is part of the test suite. Longer runs:
//! `scripts/fault-harness.sh` (see `docs/faults.md`); settings come from
//! the environment: `SESAME_FAULT_SEED`, `SESAME_FAULT_ROUNDS`,
//! `SESAME_FAULT_SCHEMES` (comma-separated), `SESAME_FAULT_FILES`.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const PASS: &str = "fault passphrase";
/// Words every file draws from; small, so that words are shared.
const VOCABULARY: usize = 120;

fn sesame(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sesame"));
    c.current_dir(dir)
        .env_remove("SESAME_HOME")
        .env_remove("SESAME_TOKEN")
        .env("SESAME_PASSPHRASE", PASS)
        .env("SESAME_KDF", "fast")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Settings of a run.
#[derive(Clone, Debug)]
struct Settings {
    seed: u64,
    rounds: usize,
    files: usize,
    schemes: Vec<String>,
}

impl Settings {
    fn from_env(schemes: &str, rounds: usize) -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Settings {
            seed: var("SESAME_FAULT_SEED").map_or(1, |v| v.parse().unwrap()),
            rounds: var("SESAME_FAULT_ROUNDS").map_or(rounds, |v| v.parse().unwrap()),
            files: var("SESAME_FAULT_FILES").map_or(24, |v| v.parse().unwrap()),
            schemes: var("SESAME_FAULT_SCHEMES")
                .unwrap_or_else(|| schemes.to_owned())
                .split(',')
                .map(str::to_owned)
                .collect(),
        }
    }
}

/// What a run saw.
#[derive(Debug, Default)]
struct Totals {
    /// Processes killed while they were running.
    kills: u64,
    /// Commands started (killed or not).
    commands: u64,
    /// Commands that failed because the filesystem was full.
    full: u64,
    /// Paths missing from `list`, searches missing a document, removed
    /// documents still listed or found.
    losses: Vec<String>,
    /// Paths listed more than once, documents found twice.
    duplicates: Vec<String>,
    /// Commands that failed when run to completion.
    stuck: Vec<String>,
}

/// A `sesame serve` child, killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(site: &Path, store: &str, port: u16) -> Server {
        let listen = format!("127.0.0.1:{port}");
        let mut child = sesame(site)
            .args(["serve", "--listen", &listen, "--store", store])
            .args([
                "--tls-cert",
                "certs/server.pem",
                "--tls-key",
                "certs/server.key",
            ])
            .args(["--tokens", "tokens.txt"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let rest = &first[first.find("127.0.0.1:").unwrap() + 10..];
        let port = rest
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap();
        Server { child, port }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A tmpfs mounted on a directory until dropped; its size can be changed.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `bytes` on `dir`; `None` when this process may not
    /// (not root, or no mount).
    fn mount(dir: &Path, bytes: u64) -> Option<Tmpfs> {
        let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        });
        let ok = root
            && Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
                .arg(dir)
                .status()
                .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_owned()))
    }

    /// Bytes in use.
    fn used(&self) -> u64 {
        let out = Command::new("df")
            .args(["-B1", "--output=used"])
            .arg(&self.0)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .nth(1)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// Gives it `bytes` (at least what it holds: tmpfs refuses less).
    fn resize(&self, bytes: u64) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={bytes}")])
            .arg(&self.0)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "remount of {} to {bytes} bytes failed: {}",
            self.0.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Leaves `room` bytes free. A server may still be writing (a request
    /// whose client was killed runs to its end), so what it holds is read
    /// again until the cut holds.
    fn cut(&self, room: u64) {
        for _ in 0..50 {
            let used = self.used();
            let ok = Command::new("mount")
                .args(["-o", &format!("remount,size={}", used + room)])
                .arg(&self.0)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("{} could not be cut to {room} bytes free", self.0.display());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Room a filling filesystem is given back after each cut.
const ROOMY: u64 = 256 << 20;

/// One scheme's run: a site directory with the corpus `c/` and the
/// profile `p/`, the oracle, and (server profiles) the server.
struct Run<'a> {
    rng: ChaCha8Rng,
    totals: &'a mut Totals,
    scheme: String,
    server: Option<Server>,
    /// Path (as the CLI shows it) → the words of its current content.
    oracle: BTreeMap<String, BTreeSet<String>>,
    /// Paths deleted from disk and not yet removed from the index.
    deleted: Vec<String>,
    version: u64,
    /// How long the last command run to completion took: kills land
    /// uniformly within it, so that they hit every phase of a command.
    typical: Duration,
    /// The server's store, relative to the site.
    store: &'static str,
    /// Bytes of the files written in this round's change.
    changed_bytes: u64,
    // Dropped in this order: the server, then the tmpfs, then the site.
    /// Drops before `site`, so that the directory is unmounted first.
    tmpfs: Option<Tmpfs>,
    site: tempfile::TempDir,
}

impl<'a> Run<'a> {
    /// A run; with `fill`, the store (the profile, or the server's store)
    /// lies on a tmpfs, and `None` is returned where none can be mounted.
    fn new(
        scheme: &str,
        seed: u64,
        server: bool,
        fill: bool,
        totals: &'a mut Totals,
    ) -> Option<Self> {
        let site = tempfile::tempdir().unwrap();
        let (tmpfs, store) = if fill {
            let dir = if server { "srv" } else { "p" };
            std::fs::create_dir_all(site.path().join(dir)).unwrap();
            (
                Some(Tmpfs::mount(&site.path().join(dir), ROOMY)?),
                "srv/server.redb",
            )
        } else {
            (None, "server.redb")
        };
        let mut run = Run {
            tmpfs,
            store,
            changed_bytes: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            site,
            totals,
            scheme: scheme.to_owned(),
            server: None,
            oracle: BTreeMap::new(),
            deleted: Vec::new(),
            version: 0,
            typical: Duration::from_millis(50),
        };
        std::fs::create_dir_all(run.path("c")).unwrap();
        if server {
            run.must(&["cert", "certs"]);
            let token = run.must(&["token", "new", "t", "--tokens", "tokens.txt"]);
            let s = Server::start(run.site.path(), run.store, 0);
            let url = format!("https://localhost:{}", s.port);
            run.server = Some(s);
            run.must(&[
                "--dir",
                "p",
                "init",
                "--scheme",
                scheme,
                "--server",
                &url,
                "--token",
                token.trim(),
                "--ca",
                "certs/ca.pem",
            ]);
        } else {
            run.must(&["--dir", "p", "init", "--scheme", scheme]);
        }
        Some(run)
    }

    fn path(&self, p: &str) -> PathBuf {
        self.site.path().join(p)
    }

    /// Runs a command that must succeed; its standard output.
    fn must(&mut self, args: &[&str]) -> String {
        self.totals.commands += 1;
        let out = sesame(self.site.path()).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "{}: sesame {args:?} failed: {}",
            self.scheme,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn output(&mut self, args: &[&str]) -> Output {
        self.totals.commands += 1;
        sesame(self.site.path()).args(args).output().unwrap()
    }

    /// Writes a new version of file `i` (a few vocabulary words and a word
    /// of its own version).
    fn write_file(&mut self, i: usize) {
        self.version += 1;
        let mut words: BTreeSet<String> = (0..self.rng.gen_range(3..12))
            .map(|_| format!("w{}", self.rng.gen_range(0..VOCABULARY)))
            .collect();
        words.insert(format!("v{}", self.version));
        let name = format!("c/f{i:03}.txt");
        let text: Vec<&str> = words.iter().map(String::as_str).collect();
        let mut text = text.join(" ");
        if self.tmpfs.is_some() {
            // Bulk that fills the store's filesystem faster: documents are
            // stored whole. Its word is in every such file, and so in the
            // oracle.
            let pad = self.rng.gen_range(1..64) << 10;
            text.push_str(&" pad".repeat(pad / 4));
            words.insert("pad".to_owned());
        }
        self.changed_bytes += text.len() as u64;
        std::fs::write(self.path(&name), text).unwrap();
        self.deleted.retain(|d| d != &name);
        self.oracle.insert(name, words);
    }

    /// Changes the directory: new files, changed files, deleted files.
    fn change(&mut self, files: usize) {
        for _ in 0..self.rng.gen_range(1..=files / 3 + 1) {
            let i = self.rng.gen_range(0..files);
            self.write_file(i);
        }
        if self.oracle.len() > 4 && self.rng.gen_bool(0.5) {
            let victim = self
                .oracle
                .keys()
                .nth(self.rng.gen_range(0..self.oracle.len()))
                .unwrap()
                .clone();
            std::fs::remove_file(self.path(&victim)).unwrap();
            self.oracle.remove(&victim);
            self.deleted.push(victim);
        }
    }

    /// Starts `args`, kills it (or the server) after a random delay, then
    /// again up to twice (repeated interruptions of the same command).
    fn interrupt(&mut self, args: &[&str]) {
        for _ in 0..self.rng.gen_range(1..=3) {
            let most = self.typical.as_micros().max(1000) as u64;
            let delay = Duration::from_micros(self.rng.gen_range(0..most));
            let kill_server = self.server.is_some() && self.rng.gen_bool(0.3);
            self.totals.commands += 1;
            let mut child = sesame(self.site.path()).args(args).spawn().unwrap();
            std::thread::sleep(delay);
            let running = child.try_wait().unwrap().is_none();
            if kill_server {
                let server = self.server.as_mut().unwrap();
                server.kill();
                let port = server.port;
                self.totals.kills += 1;
                // The client gives up on its own (bounded by its retries).
                let _ = wait_bounded(&mut child, Duration::from_secs(60));
                self.server = Some(Server::start(self.site.path(), self.store, port));
            } else {
                let _ = child.kill();
                let _ = child.wait();
                if running {
                    self.totals.kills += 1;
                }
            }
        }
    }

    /// Runs `args` to completion; `ok_if` accepts a failure whose message
    /// contains it (`rm` of a path an interrupted `rm` already removed).
    fn complete(&mut self, args: &[&str], ok_if: Option<&str>) {
        let start = Instant::now();
        let out = self.output(args);
        self.typical = start.elapsed();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() && !ok_if.is_some_and(|s| err.contains(s)) {
            self.totals
                .stuck
                .push(format!("{}: sesame {args:?}: {err}", self.scheme));
        }
        if err.contains("panicked") {
            self.totals
                .stuck
                .push(format!("{}: panic text: {err}", self.scheme));
        }
    }

    /// Two `add` processes at once on the profile: each succeeds or is
    /// refused with a clear error while the other works.
    fn concurrent_adds(&mut self) {
        self.totals.commands += 2;
        let a = sesame(self.site.path())
            .args(["--dir", "p", "add", "c"])
            .spawn()
            .unwrap();
        let b = sesame(self.site.path())
            .args(["--dir", "p", "add", "c"])
            .spawn()
            .unwrap();
        for child in [a, b] {
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            if !(out.status.success() || err.contains("in use") || err.contains("busy")) {
                self.totals
                    .stuck
                    .push(format!("{}: concurrent add: {err}", self.scheme));
            }
        }
    }

    /// Compares `list` and searches with the oracle.
    fn check(&mut self, round: usize) {
        let scheme = self.scheme.clone();
        let listed = self.must(&["--dir", "p", "list"]);
        let mut seen = BTreeMap::<String, usize>::new();
        for line in listed.lines() {
            let path = line.split('\t').nth(2).unwrap_or_default().to_owned();
            *seen.entry(path).or_default() += 1;
        }
        for (path, n) in &seen {
            if *n > 1 {
                self.totals
                    .duplicates
                    .push(format!("{scheme} round {round}: {path} listed {n} times"));
            }
            if !self.oracle.contains_key(path) && !self.deleted.contains(path) {
                self.totals.losses.push(format!(
                    "{scheme} round {round}: {path} listed, not on disk"
                ));
            }
        }
        for path in self.oracle.keys() {
            if !seen.contains_key(path) {
                self.totals
                    .losses
                    .push(format!("{scheme} round {round}: {path} not listed"));
            }
        }
        // Words: a few of the vocabulary and every file's own version word
        // for a sample of files.
        let mut words: Vec<String> = (0..4)
            .map(|_| format!("w{}", self.rng.gen_range(0..VOCABULARY)))
            .collect();
        for (_, ws) in self.oracle.iter().take(3) {
            words.extend(ws.iter().filter(|w| w.starts_with('v')).cloned());
        }
        for w in words {
            let out = self.output(&["--dir", "p", "search", &w]);
            if !out.status.success() {
                self.totals.stuck.push(format!(
                    "{scheme} round {round}: search {w}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
                continue;
            }
            let mut found = Vec::new();
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                if let Some(path) = line.split('\t').nth(1) {
                    found.push(path.to_owned());
                }
            }
            let unique: BTreeSet<String> = found.iter().cloned().collect();
            if unique.len() != found.len() {
                self.totals.duplicates.push(format!(
                    "{scheme} round {round}: {w} found a document twice"
                ));
            }
            let want: BTreeSet<String> = self
                .oracle
                .iter()
                .filter(|(_, ws)| ws.contains(&w))
                .map(|(p, _)| p.clone())
                .collect();
            if unique != want {
                self.totals.losses.push(format!(
                    "{scheme} round {round}: search {w}: found {unique:?}, want {want:?}"
                ));
            }
        }
    }

    fn round(&mut self, round: usize, files: usize) {
        self.changed_bytes = 0;
        self.change(files);
        let add = ["--dir", "p", "add", "c"];
        // The first round of a run on a filling filesystem cuts it to no
        // room at all before any add of the round: that add has the
        // round's files to write and must fail with a clear error (a cut
        // after an interrupted add may meet an add that the interrupted
        // one left with little or nothing to write).
        let sure_fill = round == 0;
        if sure_fill {
            self.add_on_a_cut_filesystem(&add, 0);
        }
        if self.rng.gen_bool(0.25) {
            self.concurrent_adds();
        }
        self.interrupt(&add);
        if !sure_fill {
            // Cut the filesystem to a random point between what it holds
            // and that plus the bytes of this round's changed files (the
            // store needs more than that for them): the add may fit, or
            // fail at that point with a clear error; either way, with room
            // given back, the next add completes it.
            let room = self.rng.gen_range(0..=self.changed_bytes);
            self.add_on_a_cut_filesystem(&add, room);
        }
        self.complete(&add, None);
        for path in std::mem::take(&mut self.deleted) {
            let rm = ["--dir", "p", "rm", path.as_str()];
            if self.rng.gen_bool(0.5) {
                self.interrupt(&rm);
            }
            self.complete(&rm, Some("in the index"));
        }
        self.check(round);
    }
    /// On a filling filesystem (none: nothing to do), leaves `room` bytes
    /// free and runs `add`: it fits, or fails with a clear error (what
    /// happened and what to do, counted in `full`); then gives the room
    /// back.
    fn add_on_a_cut_filesystem(&mut self, add: &[&str], room: u64) {
        let Some(fs) = self.tmpfs.take() else {
            return;
        };
        fs.cut(room);
        let out = self.output(add);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            // A clear error: what happened and what to do.
            if err.contains("space")
                && err.contains("run the command again")
                && !err.contains("panicked")
            {
                if std::env::var_os("SESAME_FAULT_SHOW").is_some() {
                    eprintln!("{}: full: {}", self.scheme, err.trim());
                }
                self.totals.full += 1;
            } else {
                self.totals
                    .stuck
                    .push(format!("{}: add on a full filesystem: {err}", self.scheme));
            }
        }
        fs.resize(ROOMY);
        self.tmpfs = Some(fs);
    }
}

fn wait_bounded(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    child.wait().ok()
}

/// Runs every scheme of `settings`, embedded (and, with `server`, bound to
/// a server; with `fill`, on a filling filesystem), and fails on any loss,
/// duplicate or stuck command.
fn harness(settings: &Settings, server: bool, fill: bool) {
    let mut totals = Totals::default();
    let start = Instant::now();
    for (k, scheme) in settings.schemes.iter().enumerate() {
        let seed = settings.seed.wrapping_mul(1000).wrapping_add(k as u64);
        let Some(mut run) = Run::new(scheme, seed, server, fill, &mut totals) else {
            eprintln!("fault harness: filling filesystem skipped (mounting a tmpfs needs root)");
            return;
        };
        for round in 0..settings.rounds {
            run.round(round, settings.files);
        }
    }
    eprintln!(
        "fault harness ({}{}): seed {}, schemes {:?}, {} rounds each, {} kill points, \
         {} commands, {} failed on a full filesystem, {} losses, {} duplicates, {} stuck, {:.0} s",
        if server { "server" } else { "embedded" },
        if fill { ", filling filesystem" } else { "" },
        settings.seed,
        settings.schemes,
        settings.rounds,
        totals.kills,
        totals.commands,
        totals.full,
        totals.losses.len(),
        totals.duplicates.len(),
        totals.stuck.len(),
        start.elapsed().as_secs_f64()
    );
    let problems: Vec<&String> = totals
        .losses
        .iter()
        .chain(&totals.duplicates)
        .chain(&totals.stuck)
        .collect();
    assert!(
        problems.is_empty(),
        "seed {} (rerun with SESAME_FAULT_SEED={} SESAME_FAULT_SCHEMES=...):\n{problems:#?}",
        settings.seed,
        settings.seed
    );
    assert!(totals.kills > 0, "no command was killed while running");
    if fill {
        // Each run's first add meets a filesystem with no room left.
        assert!(
            totals.full >= settings.schemes.len() as u64,
            "the filesystem filled up under {} of {} first adds",
            totals.full,
            settings.schemes.len()
        );
    }
}

#[test]
fn embedded_profiles_survive_kills_and_concurrent_writers() {
    harness(
        &Settings::from_env("fast,uedsse,simple,aura,sda,janus-pp,suise2,kpr12,pibas", 4),
        false,
        false,
    );
}

#[test]
fn server_profiles_survive_client_and_server_kills() {
    harness(&Settings::from_env("fast,uedsse,sdd", 3), true, false);
}

#[test]
fn embedded_profiles_survive_a_filling_filesystem() {
    harness(&Settings::from_env("fast,sdd,suise2", 3), false, true);
}

#[test]
fn server_stores_survive_a_filling_filesystem() {
    harness(&Settings::from_env("fast,uedsse", 3), true, true);
}
