//! Credentials of `sesame init --server` and of the profile header kept on
//! the server, through the real binary against a real `sesame serve`: the
//! token from a file or the environment (a warning when it is on the
//! command line, where every local user can read it), the warning that the
//! server can guess passphrases offline, the local cap on the Argon2id
//! costs a joining device accepts, and `passwd` on one device asking the
//! other for the new passphrase.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::PathBuf;
use std::process::Output;

use support::sesame;

/// A scratch site (certificates, a tokens file for tenant `t`) and a
/// running server.
struct Site {
    site: support::Site,
    _server: support::Server,
    token: String,
    url: String,
}

impl Site {
    fn new() -> Self {
        let site = support::Site::new();
        let server = support::Server::start(&site, 0);
        Site {
            token: site.token.clone(),
            url: server.url(),
            site,
            _server: server,
        }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.site.path(p)
    }

    /// After a `rekey --master` was killed: `out` (a command run since)
    /// said to run it again; runs it again.
    fn rekey_again(&self, out: &Output, round: usize) {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("rekey --master` again"),
            "round {round}: {stderr}"
        );
        self.ok_env(&["--dir", "p", "rekey", "--master"], &[]);
    }

    fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = sesame();
        c.current_dir(self.site.tmp.path()).args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    }

    fn ok_env(&self, args: &[&str], env: &[(&str, &str)]) -> (String, String) {
        let out = self.run_env(args, env);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "sesame {args:?} failed: {stderr}");
        (String::from_utf8(out.stdout).unwrap(), stderr)
    }

    /// A private file holding the token.
    fn token_file(&self, name: &str) -> String {
        let path = self.path(name);
        std::fs::write(&path, format!("{}\n", self.token)).unwrap();
        chmod(&path, 0o600);
        name.to_owned()
    }

    /// `init --server` into `dir`, the token from a file, and `more`
    /// arguments: its standard output and error.
    fn init(&self, dir: &str, more: &[&str]) -> (String, String) {
        let file = self.token_file("token.txt");
        let mut args = support::server_init(&["--dir", dir], &self.url, &["--token-file", &file]);
        args.extend_from_slice(more);
        self.ok_env(&args, &[])
    }

    /// `init --join remote` into `dir`, with `env`.
    fn join(&self, dir: &str, remote: &str, env: &[(&str, &str)]) -> Output {
        let file = self.token_file("token.txt");
        self.run_env(
            &support::server_init(
                &["--dir", dir],
                &self.url,
                &["--token-file", &file, "--join", remote],
            ),
            env,
        )
    }
}

fn chmod(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The server's index name `init` printed (`--join p1a2b3c4d-default`).
fn printed_remote(stdout: &str) -> String {
    let at = stdout.find("--join ").unwrap() + 7;
    stdout[at..]
        .split(|c: char| c.is_whitespace() || c == '`')
        .next()
        .unwrap()
        .to_owned()
}

/// `--token-file` and `SESAME_TOKEN` keep the token off the command line;
/// `--token` still works, with a warning; a token file others can read is
/// refused, and without any token (and no terminal) `init` says where to
/// put it.
#[test]
fn the_token_comes_from_a_file_and_argv_is_warned_about() {
    let site = Site::new();
    let init = |dir: &str, how: &[&str], env: &[(&str, &str)]| {
        let args = support::server_init(&["--dir", dir], &site.url, how);
        site.run_env(&args, env)
    };

    let file = site.token_file("token.txt");
    chmod(&site.path(&file), 0o644);
    let out = init("a", &["--token-file", &file], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("chmod 600"), "{stderr}");
    assert!(!site.path("a/profile.json").exists());

    chmod(&site.path(&file), 0o600);
    let out = init("a", &["--token-file", &file], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("--token puts"), "{stderr}");

    let out = init("b", &[], &[("SESAME_TOKEN", &site.token)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("--token puts"), "{stderr}");

    let out = init("c", &["--token", &site.token], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: --token puts the token on the command line"),
        "{stderr}"
    );

    let out = init("d", &[], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--token-file FILE"), "{stderr}");
    assert!(!site.path("d/profile.json").exists());
}

/// `init --server` says that the server can guess passphrases offline
/// against the header it keeps, unless the profile needs a key file.
#[test]
fn init_on_a_server_warns_of_offline_guessing_unless_a_key_file_is_used() {
    let site = Site::new();
    let (_, stderr) = site.init("a", &[]);
    assert!(
        stderr.contains("can guess passphrases against it offline"),
        "{stderr}"
    );
    assert!(stderr.contains("--key-file FILE"), "{stderr}");
    let (_, stderr) = site.init("k", &["--key-file", "kf"]);
    assert!(!stderr.contains("offline"), "{stderr}");
}

/// The Argon2id costs a joining device accepts from the server's header
/// are capped by a local setting: beyond it the join is refused before
/// any derivation, and nothing is written.
#[test]
fn join_refuses_argon2id_costs_beyond_the_local_cap() {
    let site = Site::new();
    let (stdout, _) = site.init("a", &[]);
    let remote = printed_remote(&stdout);
    let out = site.join("phone", &remote, &[("SESAME_KDF_MAX_MIB", "0")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("more than this device accepts"), "{stderr}");
    assert!(stderr.contains("SESAME_KDF_MAX_MIB"), "{stderr}");
    assert!(!site.path("phone/profile.json").exists());
    let out = site.join("phone", &remote, &[("SESAME_KDF_MAX_PASSES", "many")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not a whole number"), "{stderr}");
    let out = site.join("phone", &remote, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The reproduction through the binary: `passwd` on one device;
/// the other device's next command asks for the new passphrase instead of
/// putting the old header back; a join with the old passphrase fails and
/// one with the new passphrase succeeds.
#[test]
fn passwd_on_one_device_asks_the_other_for_the_new_passphrase() {
    let site = Site::new();
    let (stdout, _) = site.init("laptop", &[]);
    let remote = printed_remote(&stdout);
    let out = site.join("phone", &remote, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    site.ok_env(
        &["--dir", "laptop", "passwd"],
        &[("SESAME_NEW_PASSPHRASE", "new passphrase")],
    );
    let out = site.run_env(&["--dir", "phone", "list"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("changed on another device"), "{stderr}");
    assert!(stderr.contains("enter the new passphrase"), "{stderr}");

    let out = site.join("old", &remote, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("wrong passphrase"), "{stderr}");
    let new = [("SESAME_PASSPHRASE", "new passphrase")];
    let out = site.join("new", &remote, &new);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    site.ok_env(&["--dir", "phone", "list"], &new);
    site.ok_env(&["--dir", "laptop", "list"], &new);
    let out = site.run_env(&["--dir", "phone", "list"], &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrong passphrase"));
}

/// `rekey --master` on an embedded profile: the answers stay, and the
/// header from before, with its passphrase, opens nothing the profile
/// holds.
#[test]
fn rekey_master_keeps_the_answers_and_retires_the_old_header() {
    let site = Site::new();
    std::fs::create_dir_all(site.path("notes")).unwrap();
    for i in 0..5 {
        std::fs::write(
            site.path(&format!("notes/{i}.txt")),
            format!("budget note{i}"),
        )
        .unwrap();
    }
    site.ok_env(&["--dir", "p", "init", "--scheme", "fast"], &[]);
    site.ok_env(&["--dir", "p", "add", "notes"], &[]);
    let (before, _) = site.ok_env(&["--dir", "p", "search", "budget"], &[]);
    let old = std::fs::read(site.path("p/profile.json")).unwrap();
    let (out, _) = site.ok_env(&["--dir", "p", "rekey", "--master"], &[]);
    assert!(out.contains("moved to a new master key"), "{out}");
    assert!(out.contains("5 documents"), "{out}");
    let (after, _) = site.ok_env(&["--dir", "p", "search", "budget"], &[]);
    assert_eq!(before.lines().count(), 5, "{before}");
    let paths = |s: &str| -> Vec<String> {
        let mut v: Vec<String> = s
            .lines()
            .map(|l| l.split('\t').nth(1).unwrap().to_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(paths(&before), paths(&after));
    std::fs::write(site.path("p/profile.json"), old).unwrap();
    let out = site.run_env(&["--dir", "p", "list"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("corrupt"), "{stderr}");
}

/// `rekey --master` killed (SIGKILL) at points spread over its run: the
/// profile then either works as before or says to run the rotation again,
/// never anything else, and running it again completes it with every
/// document as it was.
#[test]
fn rekey_master_killed_at_any_point_completes_when_run_again() {
    use rand::{Rng, SeedableRng};
    let site = Site::new();
    std::fs::create_dir_all(site.path("notes")).unwrap();
    for i in 0..200 {
        let text = format!("budget note{i} {}", "filler ".repeat(100));
        std::fs::write(site.path(&format!("notes/{i}.txt")), text).unwrap();
    }
    site.ok_env(&["--dir", "p", "init", "--scheme", "fast"], &[]);
    site.ok_env(&["--dir", "p", "add", "notes"], &[]);
    let (listed, _) = site.ok_env(&["--dir", "p", "list"], &[]);
    let paths = |s: &str| -> std::collections::BTreeSet<String> {
        s.lines()
            .map(|l| l.rsplit('\t').next().unwrap().to_owned())
            .collect()
    };
    let before = paths(&listed);
    assert_eq!(before.len(), 200);
    let start = std::time::Instant::now();
    site.ok_env(&["--dir", "p", "rekey", "--master"], &[]);
    let span = start.elapsed().as_micros().max(1000) as u64;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(11);
    let (mut interrupted, mut untouched) = (0, 0);
    for round in 0..12 {
        support::kill_after(
            sesame()
                .current_dir(site.path(""))
                .args(["--dir", "p", "rekey", "--master"]),
            rng.gen_range(0..span),
        );
        let out = site.run_env(&["--dir", "p", "list"], &[]);
        if out.status.success() {
            untouched += 1;
            assert_eq!(
                paths(&String::from_utf8_lossy(&out.stdout)),
                before,
                "round {round}"
            );
        } else {
            interrupted += 1;
            site.rekey_again(&out, round);
        }
        let (listed, _) = site.ok_env(&["--dir", "p", "list"], &[]);
        assert_eq!(paths(&listed), before, "round {round}");
        let (found, _) = site.ok_env(&["--dir", "p", "search", "budget"], &[]);
        assert_eq!(found.lines().count(), 200, "round {round}");
    }
    eprintln!("rekey --master kills: {interrupted} left it to complete, {untouched} did not");
}

/// `rekey --master` on a profile with a table, killed (SIGKILL) at points
/// spread over its run: the table then either answers as before or says
/// to run the rotation again, and running it again completes it with
/// every record once.
#[test]
fn rekey_master_with_a_table_killed_at_any_point_completes_when_run_again() {
    use rand::{Rng, SeedableRng};
    let site = Site::new();
    std::fs::write(
        site.path("s.toml"),
        "key = \"id\"\n[fields.id]\ntype = \"integer\"\n[fields.s]\ntype = \"string\"\n\
         index = [\"equality\"]\n[fields.v]\ntype = \"integer\"\nindex = [\"range\"]\n\
         bits = 12\n",
    )
    .unwrap();
    let mut csv = String::from("id,s,v\n");
    for i in 0..400 {
        csv.push_str(&format!(
            "{i},{},{}\n",
            ["x", "y", "z"][i % 3],
            i * 7 % 2000
        ));
    }
    std::fs::write(site.path("rows.csv"), csv).unwrap();
    site.ok_env(&["--dir", "p", "init", "--scheme", "fast"], &[]);
    site.ok_env(
        &["--dir", "p", "table", "create", "t", "--schema", "s.toml"],
        &[],
    );
    site.ok_env(&["--dir", "p", "import", "t", "rows.csv"], &[]);
    let queries = ["v between 100 and 1500", "s = \"y\" or v < 50"];
    let answer = |q: &str| {
        let (out, _) = site.ok_env(&["--dir", "p", "query", "t", q, "--format", "csv"], &[]);
        let mut lines: Vec<String> = out.lines().map(str::to_owned).collect();
        lines.sort();
        lines
    };
    let before: Vec<_> = queries.iter().map(|q| answer(q)).collect();
    assert!(before[0].len() > 100, "{:?}", before[0]);
    let start = std::time::Instant::now();
    let (out, _) = site.ok_env(&["--dir", "p", "rekey", "--master"], &[]);
    let span = start.elapsed().as_micros().max(1000) as u64;
    assert!(out.contains("1 table made again with 400 records"), "{out}");
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(12);
    let (mut interrupted, mut untouched) = (0, 0);
    for round in 0..16 {
        support::kill_after(
            sesame()
                .current_dir(site.path(""))
                .args(["--dir", "p", "rekey", "--master"]),
            rng.gen_range(0..span),
        );
        let out = site.run_env(
            &["--dir", "p", "query", "t", queries[0], "--format", "csv"],
            &[],
        );
        if out.status.success() {
            untouched += 1;
        } else {
            interrupted += 1;
            site.rekey_again(&out, round);
        }
        let after: Vec<_> = queries.iter().map(|q| answer(q)).collect();
        assert_eq!(after, before, "round {round}");
        let (listed, _) = site.ok_env(&["--dir", "p", "table", "list"], &[]);
        assert!(listed.contains('t'), "round {round}: {listed}");
    }
    eprintln!(
        "rekey --master (table) kills: {interrupted} left it to complete, {untouched} did not"
    );
}
