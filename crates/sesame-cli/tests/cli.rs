//! Runs the built `sesame` binary: the happy path, and every mistake a user
//! can make giving one line on standard error and a non-zero exit status.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const PASS: &str = "test passphrase";

struct Env {
    tmp: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let docs = tmp.path().join("docs");
        fs::create_dir_all(docs.join("sub")).unwrap();
        fs::write(docs.join("a.txt"), "The quick brown fox jumps.").unwrap();
        fs::write(docs.join("b.txt"), "A lazy dog; the FOX sleeps.").unwrap();
        fs::write(docs.join("sub/c.md"), "Größe ÉCOLE naïve dog").unwrap();
        fs::write(tmp.path().join("loose.bin"), b"raw \xff\x00 bytes dog").unwrap();
        Env { tmp }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.tmp.path().join(p)
    }

    /// `sesame ARGS` in the temp dir with the profile in `./.sesame`, the
    /// passphrase in the environment, and no terminal.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_sesame"));
        c.args(args)
            .current_dir(self.tmp.path())
            .env_remove("SESAME_HOME")
            .env("SESAME_PASSPHRASE", PASS)
            .env("SESAME_KDF", "fast")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// Runs a command that must succeed; its standard output.
    fn ok(&self, args: &[&str]) -> String {
        support::succeeded(args, self.run(args))
    }

    /// As [`Env::ok`], with environment variable `var` set to `value`.
    fn ok_with(&self, args: &[&str], var: &str, value: &str) -> String {
        support::succeeded(args, self.cmd(args).env(var, value).output().unwrap())
    }

    /// A profile on `scheme` with the `docs` folder added.
    fn with_docs(scheme: &str) -> Self {
        let env = Env::new();
        env.init(scheme);
        env.ok(&["add", "docs"]);
        env
    }

    fn init(&self, scheme: &str) {
        let out = self.ok(&["init", "--scheme", scheme]);
        assert!(out.contains(&format!("scheme {scheme}")), "{out}");
    }
}

/// The command failed with exactly one `error: ...` line on standard error
/// containing `needle`; returns that line.
fn one_error(out: &Output, needle: &str) -> String {
    assert!(!out.status.success(), "expected a failure");
    let err = String::from_utf8(out.stderr.clone()).unwrap();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "stderr is not one line: {err:?}");
    assert!(lines[0].starts_with("error: "), "{err:?}");
    assert!(lines[0].contains(needle), "{err:?} lacks {needle:?}");
    assert!(!err.contains("panicked") && !err.contains("{ ") && !err.contains("Os {"));
    lines[0].to_owned()
}

/// Lines `id<TAB>path` of a search, as (id, file name).
fn hits(out: &str) -> Vec<(u64, String)> {
    out.lines()
        .map(|l| {
            let (id, path) = l.split_once('\t').unwrap();
            let name = Path::new(path)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (id.parse().unwrap(), name)
        })
        .collect()
}

fn session(scheme: &str) {
    let env = Env::new();
    env.init(scheme);
    assert!(env.path(".sesame/profile.json").is_file());

    let out = env.run(&["add", "docs"]);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("added 3 documents"), "{stdout}");
    assert!(
        stdout.contains("static scheme: index rebuilt over 3 documents"),
        "{stdout}"
    );
    // No progress bar without a terminal.
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let found = hits(&env.ok(&["search", "fox"]));
    assert_eq!(found, [(1, "a.txt".into()), (2, "b.txt".into())]);
    // Capital sharp s lower-cases to ß; "GRÖSSE" is another word.
    assert_eq!(hits(&env.ok(&["search", "GRÖẞE"])), [(3, "c.md".into())]);
    assert_eq!(hits(&env.ok(&["search", "GRÖSSE"])).len(), 0);
    assert_eq!(hits(&env.ok(&["search", "École"])), [(3, "c.md".into())]);
    let out = env.run(&["search", "absent"]);
    assert!(out.status.success() && out.stdout.is_empty());

    // More documents: the static index is rebuilt over all of them.
    let stdout = env.ok(&["add", "loose.bin"]);
    assert!(stdout.contains("added 1 document, replaced 0"), "{stdout}");
    assert!(
        stdout.contains("static scheme: index rebuilt over 4 documents"),
        "{stdout}"
    );
    assert_eq!(
        hits(&env.ok(&["search", "dog"])),
        [
            (2, "b.txt".into()),
            (3, "c.md".into()),
            (4, "loose.bin".into())
        ]
    );

    let out = env.run(&["get", "1"]);
    assert!(out.status.success());
    assert_eq!(out.stdout, b"The quick brown fox jumps.");
    assert_eq!(env.run(&["get", "4"]).stdout, b"raw \xff\x00 bytes dog");

    let list = env.ok(&["list"]);
    assert_eq!(list.lines().count(), 4);
    assert!(list.lines().next().unwrap().starts_with("1\t26\t"));

    sync_and_remove(&env);
}

/// `add` again is a sync; `rm` removes by id and by path; `check` finds
/// the profile sound.
fn sync_and_remove(env: &Env) {
    // Nothing changed: nothing added, the index untouched.
    let stdout = env.ok(&["add", "docs", "loose.bin"]);
    assert!(
        stdout.starts_with("added 0 documents, replaced 0, unchanged 4, removed 0"),
        "{stdout}"
    );
    assert_eq!(env.ok(&["list"]).lines().count(), 4);

    // A changed file replaces its old version: found by its new words
    // only, listed once, under a new id.
    fs::write(env.path("docs/a.txt"), "The quick brown cat jumps.").unwrap();
    let stdout = env.ok(&["add", "docs"]);
    assert!(
        stdout.starts_with("added 0 documents, replaced 1, unchanged 2, removed 1"),
        "{stdout}"
    );
    assert_eq!(hits(&env.ok(&["search", "cat"])), [(5, "a.txt".into())]);
    assert_eq!(hits(&env.ok(&["search", "fox"])), [(2, "b.txt".into())]);
    let list = env.ok(&["list"]);
    assert_eq!(
        list.lines().filter(|l| l.ends_with("a.txt")).count(),
        1,
        "{list}"
    );
    assert_eq!(env.run(&["get", "1"]).status.code(), Some(1));

    // Remove by path and by id.
    let stdout = env.ok(&["rm", "docs/b.txt", "4"]);
    assert!(stdout.contains("removed\t2\tdocs/b.txt"), "{stdout}");
    assert!(stdout.contains("removed\t4\tloose.bin"), "{stdout}");
    assert!(stdout.contains("removed 2 documents"), "{stdout}");
    assert_eq!(hits(&env.ok(&["search", "dog"])), [(3, "c.md".into())]);
    assert_eq!(env.ok(&["list"]).lines().count(), 2);
    one_error(
        &env.run(&["rm", "docs/b.txt"]),
        "no document with id or path",
    );

    let stdout = env.ok(&["check"]);
    assert!(stdout.contains("2 documents, 2 verified"), "{stdout}");
    assert!(stdout.contains("no problem found"), "{stdout}");
}

#[test]
fn init_add_search_get_pibas() {
    session("pibas");
}

#[test]
fn init_add_search_get_2lev() {
    session("2lev");
}

#[test]
fn schemes_table_lists_every_scheme() {
    let env = Env::new();
    let out = env.ok(&["schemes"]);
    let mut lines = out.lines();
    let head = lines.next().unwrap();
    for col in ["NAME", "FAMILY", "KIND", "PAPER"] {
        assert!(head.contains(col), "{head}");
    }
    // Every line fits a 100-column terminal; each scheme's query kinds and
    // leakage are wrapped under its row.
    for line in out.lines() {
        assert!(line.chars().count() <= 100, "{line}");
    }
    assert!(out.contains("    queries: ") && out.contains("    leakage: "));
    for s in sesame_sse_names() {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("{s} "))),
            "{s}: {out}"
        );
    }
    assert!(out.contains("static SSE") && out.contains("Cash et al., NDSS 2014"));
    // Conjunctive schemes, ORE schemes and range protocols are listed too.
    for s in [
        "clww",
        "lewi-wu",
        "fh-ope",
        "si-sse-rv",
        "gsw04",
        "bkm05",
        "bll06",
        "wwp08",
        "pope",
        "path-oram",
    ] {
        assert!(out.lines().any(|l| l.starts_with(&format!("{s} "))), "{s}");
    }
    assert!(
        out.contains("ORE") && out.contains("range protocol"),
        "{out}"
    );
    for family in ["keyword", "conjunctive", "ore", "range"] {
        assert!(out.contains(&format!("  {family}  ")), "{family}: {out}");
    }
    let long = env.ok(&["schemes", "--long"]);
    assert!(long.contains("leakage:") && long.contains("docs/schemes/"));
    assert!(
        long.contains("server:    hosted by `sesame serve`") && long.contains("server:    none")
    );
}

fn sesame_sse_names() -> Vec<&'static str> {
    vec!["pibas", "2lev"]
}

#[test]
fn sesame_home_and_dir_choose_the_profile() {
    let env = Env::new();
    let home = env.path("home");
    let out = env
        .cmd(&["init"])
        .env("SESAME_HOME", &home)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(home.join("profile.json").is_file());
    assert!(!env.path(".sesame").exists());
    let out = env
        .cmd(&["add", "docs/a.txt"])
        .env("SESAME_HOME", &home)
        .output()
        .unwrap();
    assert!(out.status.success());
    let other = env.path("other");
    env.ok(&["init", "--dir", other.to_str().unwrap(), "--scheme", "2lev"]);
    let out = env.ok(&["--dir", other.to_str().unwrap(), "search", "fox"]);
    assert!(out.is_empty(), "a fresh profile has no documents");
}

#[test]
fn missing_file_is_one_line() {
    let env = Env::new();
    env.init("pibas");
    let line = one_error(&env.run(&["add", "docs", "nope.txt"]), "nope.txt");
    assert_eq!(
        line,
        "error: cannot read nope.txt: no such file or directory"
    );
    // Nothing was added.
    assert!(env.ok(&["list"]).is_empty());
}

#[test]
fn unreadable_file_is_one_line() {
    let env = Env::new();
    env.init("pibas");
    // A path through a file.
    one_error(
        &env.run(&["add", "docs/a.txt/x"]),
        "cannot read docs/a.txt/x",
    );
    // A file the user may not read (root reads everything, so only as
    // another user).
    let locked = env.path("docs/locked.txt");
    fs::write(&locked, "secret").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
        if fs::read(&locked).is_err() {
            one_error(&env.run(&["add", "docs"]), "locked.txt: permission denied");
        }
    }
    // Not a regular file.
    #[cfg(target_os = "linux")]
    one_error(
        &env.run(&["add", "/dev/null"]),
        "not a regular file or directory",
    );
    assert!(env.ok(&["list"]).is_empty());
}

#[test]
fn empty_and_multi_word_queries_are_one_line() {
    let env = Env::new();
    env.init("pibas");
    one_error(&env.run(&["search", ""]), "empty query");
    one_error(&env.run(&["search", " ,; "]), "empty query");
    one_error(&env.run(&["search", "?!"]), "patterns may hold only");
    one_error(&env.run(&["search", "top:0", "fox"]), "ranked query needs");
    // PiBas answers exact queries only: other forms are refused by name.
    for (query, kind) in [
        ("two words", "conjunctive"),
        ("fo*", "prefix"),
        ("f?x", "wildcard"),
        ("top:2 fox", "ranked"),
    ] {
        let out = env.run(&["search", query]);
        assert_eq!(out.status.code(), Some(2), "{query}");
        let line = one_error(&out, &format!("does not answer {kind} queries"));
        assert!(line.contains("pibas") && line.contains("exact"), "{line}");
    }
}

#[test]
fn query_forms_run_on_the_schemes_that_answer_them() {
    let names = |pairs: Vec<(u64, String)>| -> Vec<u64> { pairs.iter().map(|p| p.0).collect() };
    // SUISE2: exact, prefix, conjunctive.
    let env = Env::with_docs("suise2");
    assert_eq!(names(hits(&env.ok(&["search", "fo*"]))), [1, 2]);
    assert_eq!(names(hits(&env.ok(&["search", "DOG", "fox"]))), [2]);
    assert_eq!(names(hits(&env.ok(&["search", "the fox"]))), [1, 2]);
    one_error(
        &env.run(&["search", "f?x"]),
        "does not answer wildcard queries",
    );

    // CHLH15: wildcards and prefixes over Bloom filters.
    let env = Env::with_docs("chlh15");
    assert_eq!(names(hits(&env.ok(&["search", "f?x"]))), [1, 2]);
    assert_eq!(names(hits(&env.ok(&["search", "la*"]))), [2]);
    assert_eq!(names(hits(&env.ok(&["search", "*o?"]))), [1, 2, 3]);

    // VASST16: ranked top-k, best first, with scores.
    let env = Env::new();
    env.init("vasst16");
    env.ok(&["add", "docs", "loose.bin"]);
    let out = env.ok(&["search", "top:2", "dog", "fox"]);
    let lines: Vec<Vec<&str>> = out.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(lines.len(), 2, "{out}");
    for l in &lines {
        assert_eq!(l.len(), 3, "id, score, path: {out}");
        assert!(l[1].parse::<f64>().unwrap() >= 0.0);
    }
    // b.txt holds both words: it ranks first.
    assert!(lines[0][2].ends_with("b.txt"), "{out}");
}

#[test]
fn unknown_scheme_and_bad_params_are_one_line() {
    let env = Env::new();
    let line = one_error(
        &env.run(&["init", "--scheme", "nope"]),
        "unknown scheme \"nope\"",
    );
    assert!(line.contains("pibas") && line.contains("2lev"));
    one_error(&env.run(&["init", "--params", "block"]), "--params");
    one_error(&env.run(&["init", "--params", "zz=1"]), "zz");
    one_error(&env.run(&["init", "--params", "block=0"]), "block");
    assert!(!env.path(".sesame").exists());
}

#[test]
fn no_profile_is_one_line() {
    let env = Env::new();
    for args in [
        &["add", "docs"][..],
        &["search", "fox"],
        &["get", "1"],
        &["list"],
    ] {
        one_error(&env.run(args), "no Sesame profile in .sesame");
    }
}

/// `devices` needs a profile on a server: an embedded profile's index is
/// kept on this machine only, and says so.
#[test]
fn devices_on_an_embedded_profile_is_one_line() {
    let env = Env::new();
    one_error(&env.run(&["devices"]), "no Sesame profile in .sesame");
    env.init("pibas");
    one_error(&env.run(&["devices"]), "is not shared");
}

#[test]
fn existing_profile_is_one_line() {
    let env = Env::new();
    env.init("pibas");
    one_error(&env.run(&["init"]), "already exists");
}

#[test]
fn wrong_passphrase_is_one_line_and_changes_nothing() {
    let env = Env::with_docs("pibas");
    let before = fs::read(env.path(".sesame/indexes/default.state")).unwrap();
    for args in [&["add", "loose.bin"][..], &["search", "fox"], &["get", "1"]] {
        let out = env
            .cmd(args)
            .env("SESAME_PASSPHRASE", "wrong")
            .output()
            .unwrap();
        assert_eq!(
            one_error(&out, "wrong passphrase"),
            "error: wrong passphrase"
        );
    }
    assert_eq!(
        fs::read(env.path(".sesame/indexes/default.state")).unwrap(),
        before
    );
    assert_eq!(env.ok(&["list"]).lines().count(), 3);
}

#[test]
fn no_passphrase_without_a_terminal_is_one_line() {
    let env = Env::new();
    let out = env
        .cmd(&["init"])
        .env_remove("SESAME_PASSPHRASE")
        .output()
        .unwrap();
    one_error(&out, "no passphrase: set SESAME_PASSPHRASE");
    assert!(!env.path(".sesame").exists());
}

#[test]
fn bad_doc_ids_are_one_line() {
    let env = Env::with_docs("pibas");
    one_error(
        &env.run(&["get", "abc"]),
        "document id \"abc\" is not a number",
    );
    one_error(&env.run(&["get", "-1"]), "is not a number");
    one_error(&env.run(&["get", "99"]), "no document with id 99");
    one_error(&env.run(&["get", "0"]), "no document with id 0");
}

#[test]
fn tampered_state_is_one_line() {
    let env = Env::with_docs("pibas");
    let state = env.path(".sesame/indexes/default.state");
    let mut bytes = fs::read(&state).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(&state, &bytes).unwrap();
    one_error(&env.run(&["search", "fox"]), "corrupt or was tampered with");
}

#[test]
fn usage_mistakes_are_one_line() {
    let env = Env::new();
    for (args, needle) in [
        (&["search"][..], "QUERY"),
        (&["add"], "PATH"),
        (&["bogus"], "bogus"),
        (&["search", "a", "--what"], "--what"),
    ] {
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(2));
        one_error(&out, needle);
    }
    let out = env
        .cmd(&["init"])
        .env("SESAME_KDF", "slow")
        .output()
        .unwrap();
    one_error(&out, "SESAME_KDF");
}

#[test]
fn insecure_kdf_warns() {
    let env = Env::new();
    let out = env.run(&["init"]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("INSECURE"), "{err}");
    let header = fs::read_to_string(env.path(".sesame/profile.json")).unwrap();
    assert!(header.contains("\"m_kib\": 8"));
}

#[test]
fn help_and_bench_list_work() {
    let env = Env::new();
    let help = env.ok(&["--help"]);
    for cmd in ["init", "add", "search", "get", "schemes", "bench"] {
        assert!(help.contains(cmd));
    }
    assert!(env.ok(&["init", "--help"]).contains("INSECURE"));
    assert!(!env.ok(&["bench", "list"]).is_empty());
    one_error(
        &env.run(&["bench", "no-such-experiment"]),
        "unknown experiment",
    );
}

/// `sesame passwd`: the new passphrase opens the profile, the old one is
/// refused in one line; a missing new passphrase is one line too.
#[test]
fn passwd_changes_the_passphrase() {
    let env = Env::with_docs("fast");
    let out = env.run(&["passwd"]);
    one_error(&out, "no new passphrase: set SESAME_NEW_PASSPHRASE");
    let out = env.ok_with(&["passwd"], "SESAME_NEW_PASSPHRASE", "second");
    assert!(out.contains("passphrase changed"), "{out}");
    one_error(&env.run(&["list"]), "wrong passphrase");
    let found = env
        .cmd(&["search", "fox"])
        .env("SESAME_PASSPHRASE", "second")
        .output()
        .unwrap();
    assert_eq!(hits(&String::from_utf8(found.stdout).unwrap()).len(), 2);
}

/// `sesame passwd` killed at random points, again and again: after every
/// kill exactly one of the old and the new passphrase opens the profile
/// (never neither), and the documents are all there.
#[test]
fn passwd_killed_at_any_point_leaves_one_passphrase_working() {
    use rand::{Rng, SeedableRng};
    let env = Env::with_docs("fast");
    let list = |pass: &str| {
        env.cmd(&["list"])
            .env("SESAME_PASSPHRASE", pass)
            .output()
            .unwrap()
    };
    // How long a whole passwd takes here, to spread the kills over it.
    let start = std::time::Instant::now();
    env.ok_with(&["passwd"], "SESAME_NEW_PASSPHRASE", "p0");
    let span = start.elapsed().as_micros().max(1000) as u64;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
    let mut current = "p0".to_owned();
    let (mut old_kept, mut new_took) = (0, 0);
    for round in 1..=24 {
        let next = format!("p{round}");
        let mut child = env
            .cmd(&["passwd"])
            .env("SESAME_PASSPHRASE", &current)
            .env("SESAME_NEW_PASSPHRASE", &next)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_micros(rng.gen_range(0..span)));
        let _ = child.kill();
        let _ = child.wait();
        let (old_ok, new_ok) = (
            list(&current).status.success(),
            list(&next).status.success(),
        );
        assert!(
            old_ok != new_ok,
            "round {round}: old {old_ok}, new {new_ok}"
        );
        if new_ok {
            current = next;
            new_took += 1;
        } else {
            old_kept += 1;
        }
        assert_eq!(
            String::from_utf8(list(&current).stdout)
                .unwrap()
                .lines()
                .count(),
            3,
            "round {round}"
        );
    }
    eprintln!("passwd kills: {old_kept} kept the old passphrase, {new_took} took the new");
}

/// `sesame backup` then `sesame --dir new restore`: the restored profile
/// lists and finds what the original did; a non-backup and a non-empty
/// target are one line each.
#[test]
fn backup_and_restore() {
    let env = Env::with_docs("fast");
    let out = env.ok(&["backup", "bk"]);
    assert!(out.contains("backed up"), "{out}");
    let restored = env.ok(&["--dir", "again", "restore", "bk"]);
    assert!(restored.contains("3 documents"), "{restored}");
    for args in [
        &["--dir", "again", "list"][..],
        &["--dir", "again", "search", "fox"],
    ] {
        let a = env.ok(args);
        let b = env.ok(&args[2..]);
        assert_eq!(a.lines().count(), b.lines().count(), "{args:?}");
    }
    one_error(
        &env.run(&["--dir", "x", "restore", "docs"]),
        "is not a Sesame backup",
    );
    one_error(&env.run(&["--dir", "again", "restore", "bk"]), "not empty");
    one_error(&env.run(&["backup", "bk"]), "not empty");
}

/// `sesame rekey`: the index answers as before under a new generation.
#[test]
fn rekey_keeps_the_answers() {
    let env = Env::with_docs("fast");
    let before = env.ok(&["search", "dog"]);
    let out = env.ok(&["rekey"]);
    assert!(
        out.contains("re-indexed 3 documents under fresh keys"),
        "{out}"
    );
    assert!(out.contains("generation 0 replaced by 1"), "{out}");
    assert_eq!(env.ok(&["search", "dog"]), before);
    assert!(env.ok(&["check"]).contains("no problem found"));
}

/// `--key-file`: made at `init`, needed afterwards (flag or
/// SESAME_KEY_FILE), refused when others can read it, and dropped by
/// `passwd --no-key-file`.
#[cfg(unix)]
#[test]
fn a_key_file_is_made_at_init_and_needed_after() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let out = env.run(&["--key-file", "kf", "init", "--scheme", "fast"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("made a new key file"));
    let kf = env.path("kf");
    assert_eq!(fs::read(&kf).unwrap().len(), 32);
    assert_eq!(
        fs::metadata(&kf).unwrap().permissions().mode() & 0o777,
        0o600
    );
    env.ok(&["--key-file", "kf", "add", "docs"]);
    one_error(&env.run(&["list"]), "needs its key file");
    let listed = env
        .cmd(&["list"])
        .env("SESAME_KEY_FILE", "kf")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(listed.stdout).unwrap().lines().count(), 3);
    fs::set_permissions(&kf, fs::Permissions::from_mode(0o644)).unwrap();
    one_error(
        &env.run(&["--key-file", "kf", "list"]),
        "can be read by other users",
    );
    fs::set_permissions(&kf, fs::Permissions::from_mode(0o600)).unwrap();
    let args = ["--key-file", "kf", "passwd", "--no-key-file"];
    env.ok_with(&args, "SESAME_NEW_PASSPHRASE", PASS);
    assert_eq!(env.ok(&["list"]).lines().count(), 3);
    one_error(
        &env.run(&["--key-file", "kf", "list"]),
        "does not use a key file",
    );
}

#[test]
fn tables_from_the_command_line() {
    let env = Env::new();
    env.init("fast");
    fs::write(
        env.path("s.toml"),
        "key = \"id\"\n[fields.id]\ntype = \"integer\"\n[fields.name]\ntype = \"string\"\n\
         index = [\"equality\", \"prefix\"]\n[fields.price]\ntype = \"decimal\"\nscale = 2\n\
         index = [\"range\"]\n",
    )
    .unwrap();
    let out = env.ok(&["table", "create", "shop", "--schema", "s.toml"]);
    assert!(out.contains("created table shop"), "{out}");
    assert!(out.contains("range: bplus-lewi-wu"), "{out}");
    fs::write(
        env.path("rows.jsonl"),
        "{\"id\": 1, \"name\": \"tea, green\", \"price\": 3.5}\n\
         {\"id\": 2, \"name\": \"coffee\", \"price\": \"12.00\", \"note\": \"x\"}\n\
         {\"id\": 3, \"name\": \"cocoa\", \"price\": null}\n",
    )
    .unwrap();
    let out = env.ok(&["import", "shop", "rows.jsonl"]);
    assert!(out.contains("read 3 records: inserted 3"), "{out}");
    assert!(out.contains("not stored: note"), "{out}");
    // Again: nothing new.
    let out = env.ok(&["import", "shop", "rows.jsonl"]);
    assert!(out.contains("unchanged 3"), "{out}");

    let json = env.ok(&[
        "query",
        "shop",
        "name like \"co*\" or price < 4",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let ids: Vec<i64> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [1, 2, 3]);
    assert_eq!(v[0]["price"], "3.50");
    assert_eq!(v[2]["price"], serde_json::Value::Null);
    let csv = env.ok(&["query", "shop", "price between 3 and 4", "--format", "csv"]);
    assert_eq!(csv, "id,name,price\n1,\"tea, green\",3.50\n");
    let table = env.ok(&["query", "shop", "name = \"coffee\""]);
    assert!(table.starts_with("id  name    price"), "{table}");
    assert!(table.ends_with("(1 record)\n"), "{table}");
    let explain = env.ok(&["query", "shop", "price > 1", "--explain"]);
    assert!(
        explain.contains("answered by: range index tbl-") && explain.contains("(bplus-lewi-wu)"),
        "{explain}"
    );

    // Errors: one line each, exit 2 for the user's mistakes.
    for (args, needle) in [
        (vec!["query", "shop", "price >"], "expected a value"),
        (
            vec!["query", "shop", "name < \"b\""],
            "no index answers comparisons",
        ),
        (vec!["query", "shop", "id = 1"], "indexed fields: name"),
        (
            vec!["query", "shop", "price > 1", "--format", "xml"],
            "not table, json or csv",
        ),
        (
            vec!["query", "nope", "price > 1"],
            "no table named \"nope\"",
        ),
        (
            vec!["table", "create", "x", "--schema", "missing.toml"],
            "missing.toml",
        ),
    ] {
        let out = env.run(&args);
        one_error(&out, needle);
    }
    let out = env.run(&["query", "shop", "name < \"b\""]);
    assert_eq!(out.status.code(), Some(2));
    fs::write(env.path("bad.csv"), "id,name,price\n4,tea,1.234\n").unwrap();
    let out = env.run(&["import", "shop", "bad.csv"]);
    one_error(&out, "bad.csv:2");
    assert_eq!(env.ok(&["table", "list"]), "shop\n");
    let out = env.ok(&["table", "delete", "shop", "price >= 10"]);
    assert!(out.contains("deleted 1 record; 2 records left"), "{out}");
    let out = env.ok(&["table", "drop", "shop"]);
    assert!(out.contains("dropped table shop (2 records)"), "{out}");
    assert_eq!(env.ok(&["table", "list"]), "");
}

/// `compact` rewrites the store into a smaller file that answers the same:
/// several adds of FAST entries (each rewrites the chunks it lands in)
/// leave free pages behind, which it gives back.
#[test]
fn compact_gives_back_free_pages_and_keeps_every_document() {
    let env = Env::new();
    env.init("fast");
    for round in 0..4 {
        let dir = env.path(&format!("r{round}"));
        fs::create_dir_all(&dir).unwrap();
        for d in 0..40 {
            let words: Vec<String> = (0..300)
                .map(|w| format!("w{}x{}", w * 7 + d, round))
                .collect();
            fs::write(dir.join(format!("{d}.txt")), words.join(" ")).unwrap();
        }
        env.ok(&["add", &format!("r{round}")]);
    }
    let store = env.path(".sesame/store.redb");
    let before = fs::metadata(&store).unwrap().len();
    let searches = ["w7x0", "w300x3", "w2093x2"].map(|w| env.ok(&["search", w]));
    assert!(searches.iter().all(|s| !s.is_empty()), "{searches:?}");
    let out = env.ok(&["compact"]);
    assert!(out.contains("store rewritten"), "{out}");
    let after = fs::metadata(&store).unwrap().len();
    assert!(after < before, "{after} bytes, from {before}");
    assert_eq!(
        ["w7x0", "w300x3", "w2093x2"].map(|w| env.ok(&["search", w])),
        searches
    );
    assert_eq!(env.ok(&["list"]).lines().count(), 160);
    let check = env.ok(&["check"]);
    assert!(check.contains("no problem found"), "{check}");
    // Nothing but the store is left in the profile's folder.
    let stray: Vec<_> = fs::read_dir(env.path(".sesame"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("vacuum"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}

/// `compact --store FILE` rewrites a (stopped) server's redb store: every
/// pair kept, the file smaller. A missing file, a file that is not a
/// store and a store held open elsewhere are one line each, and change
/// nothing.
#[test]
fn compact_store_rewrites_a_server_store_and_refuses_what_is_not_one() {
    use sesame_core::{Store, WriteBatch};
    let env = Env::new();
    let file = env.path("server.redb");
    let want = {
        let store = sesame_store::RedbStore::open(&file).unwrap();
        for round in 0u8..6 {
            let mut batch = WriteBatch::new();
            for i in 0u32..300 {
                batch.put(i.to_be_bytes().to_vec(), vec![round; 6_000]);
            }
            store.write(batch).unwrap();
        }
        store.scan_prefix(b"").unwrap()
    };
    let before = fs::metadata(&file).unwrap().len();
    let out = env.ok(&["compact", "--store", "server.redb"]);
    assert!(out.contains("store rewritten"), "{out}");
    assert!(fs::metadata(&file).unwrap().len() < before);
    let store = sesame_store::RedbStore::open(&file).unwrap();
    assert!(store.scan_prefix(b"").unwrap() == want);
    // Held open (as by a running server): refused, every pair kept, no
    // copy left beside it.
    one_error(
        &env.run(&["compact", "--store", "server.redb"]),
        "server.redb",
    );
    drop(store);
    let store = sesame_store::RedbStore::open(&file).unwrap();
    assert!(store.scan_prefix(b"").unwrap() == want);
    drop(store);
    assert!(!fs::read_dir(env.path("")).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .contains("vacuum")));

    one_error(
        &env.run(&["compact", "--store", "absent.redb"]),
        "absent.redb",
    );
    assert!(!env.path("absent.redb").exists());
    let text = env.path("docs/a.txt");
    let original = fs::read(&text).unwrap();
    one_error(&env.run(&["compact", "--store", "docs/a.txt"]), "a.txt");
    assert!(fs::read(&text).unwrap() == original);
}

/// A table without a key: `jan/export.csv` and `feb/export.csv` both
/// stay; `jan/export.csv` imported again after a line was deleted says
/// what it removed; a CSV quote left open is refused by file and line.
#[test]
fn keyless_imports_of_files_with_the_same_name() {
    let env = Env::new();
    env.init("fast");
    fs::write(
        env.path("s.toml"),
        "[fields.name]\ntype = \"string\"\nindex = [\"equality\"]\n[fields.n]\ntype = \"integer\"\n",
    )
    .unwrap();
    env.ok(&["table", "create", "t", "--schema", "s.toml"]);
    fs::create_dir_all(env.path("jan")).unwrap();
    fs::create_dir_all(env.path("feb")).unwrap();
    fs::write(env.path("jan/export.csv"), "name,n\na,1\nb,2\nc,3\n").unwrap();
    fs::write(env.path("feb/export.csv"), "name,n\nd,4\ne,5\n").unwrap();
    let out = env.ok(&["import", "t", "jan/export.csv"]);
    assert!(out.contains("inserted 3"), "{out}");
    let out = env.ok(&["import", "t", "feb/export.csv"]);
    assert!(
        out.contains("inserted 2, replaced 0") && out.contains("5 records in table t"),
        "{out}"
    );
    fs::write(env.path("jan/export.csv"), "name,n\na,1\nc,3\n").unwrap();
    let out = env.ok(&["import", "t", "jan/export.csv"]);
    assert!(
        out.contains("inserted 0") && out.contains("removed 1 record") && out.contains("4 records"),
        "{out}"
    );
    fs::write(env.path("q.csv"), "name,n\nf,6\n\"g,7\n").unwrap();
    let out = env.run(&["import", "t", "q.csv"]);
    one_error(
        &out,
        "q.csv:3: a quoted cell starting in this record is never closed",
    );
}
