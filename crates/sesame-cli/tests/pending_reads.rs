//! `sesame search`, `list` and `get` while the server's store refuses
//! writes (a full disk) and an add's update is pending: they answer from
//! what the server has, with a one-line warning of the pending documents;
//! once the store has room the next search sends the update first. The
//! same for a table's `query` and `table show`.

#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::Output;
use std::sync::Arc;

use rand_core::OsRng;
use sesame_server::{RunningServer, Tokens};
use sesame_store::faulty::{Fault, FaultyStore};

const WARNING: &str =
    "warning: 6 documents are pending: not yet on the server; they will be sent by the next \
     command that can\n";

fn sesame(dir: &Path, args: &[&str]) -> Output {
    support::sesame()
        .current_dir(dir)
        .env("SESAME_PASSPHRASE", "pw")
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(dir: &Path, args: &[&str]) -> Output {
    let out = sesame(dir, args);
    assert!(
        out.status.success(),
        "sesame {args:?}: {}",
        text(&out.stderr)
    );
    out
}

fn write_corpus(dir: &Path, sub: &str, first: usize, n: usize) {
    std::fs::create_dir_all(dir.join(sub)).unwrap();
    for i in first..first + n {
        std::fs::write(
            dir.join(sub).join(format!("f{i}.txt")),
            format!("all doc{i}"),
        )
        .unwrap();
    }
}

#[test]
fn reads_on_a_full_server_answer_what_it_has_and_warn_of_pending_documents() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let store = Arc::new(FaultyStore::new());
    let certs = sesame_server::certs::localhost().unwrap();
    std::fs::write(dir.join("ca.pem"), &certs.ca_pem).unwrap();
    let token = Tokens::generate(&mut OsRng);
    let config = sesame_server::certs::loopback_config(&certs, &[("t", &token)]).unwrap();
    let server = RunningServer::start(config, store.clone()).unwrap();
    let url = server.url();
    ok(
        dir,
        &[
            "--dir", "p", "init", "--scheme", "fast", "--server", &url, "--token", &token, "--ca",
            "ca.pem",
        ],
    );
    write_corpus(dir, "a", 0, 10);
    ok(dir, &["--dir", "p", "add", "a"]);
    write_corpus(dir, "b", 10, 6);
    let mut pending = false;
    for after in 0..10 {
        store.fail(Fault::Refused, after);
        let out = sesame(dir, &["--dir", "p", "add", "b"]);
        store.heal();
        assert!(!out.status.success(), "the add went through");
        if text(&out.stderr).contains("6 document(s) are saved") {
            pending = true;
            break;
        }
    }
    assert!(pending, "no add left its update pending");

    store.fail(Fault::Refused, 0);
    let out = ok(dir, &["--dir", "p", "search", "all"]);
    assert_eq!(
        text(&out.stdout).lines().count(),
        10,
        "{}",
        text(&out.stdout)
    );
    assert_eq!(text(&out.stderr), WARNING);
    let out = ok(dir, &["--dir", "p", "list"]);
    assert_eq!(text(&out.stdout).lines().count(), 10);
    assert_eq!(text(&out.stderr), WARNING);
    let out = ok(dir, &["--dir", "p", "search", "doc3"]);
    let id = text(&out.stdout).split('\t').next().unwrap().to_owned();
    let out = ok(dir, &["--dir", "p", "get", &id]);
    assert_eq!(text(&out.stdout), "all doc3");
    assert_eq!(text(&out.stderr), WARNING);

    store.heal();
    let out = ok(dir, &["--dir", "p", "search", "all"]);
    assert_eq!(text(&out.stdout).lines().count(), 16);
    assert!(
        !text(&out.stderr).contains("pending"),
        "{}",
        text(&out.stderr)
    );

    // A table whose insertion is pending: `query` and `table show` answer
    // with the committed records and the warning.
    std::fs::write(
        dir.join("s.toml"),
        "key = \"id\"\n[fields.id]\ntype = \"integer\"\n[fields.s]\ntype = \"string\"\n\
         index = [\"equality\"]\n",
    )
    .unwrap();
    ok(
        dir,
        &["--dir", "p", "table", "create", "t", "--schema", "s.toml"],
    );
    let rows = |ids: std::ops::Range<usize>| -> String {
        ids.map(|i| format!("{{\"id\": {i}, \"s\": \"x\"}}\n"))
            .collect()
    };
    std::fs::write(dir.join("a.jsonl"), rows(0..4)).unwrap();
    ok(dir, &["--dir", "p", "import", "t", "a.jsonl"]);
    std::fs::write(dir.join("b.jsonl"), rows(4..7)).unwrap();
    let warning =
        "warning: 3 records are pending: not yet on the server; they will be sent by the next \
         command that can\n";
    let mut pending = false;
    for after in 0..12 {
        store.fail(Fault::Refused, after);
        let out = sesame(dir, &["--dir", "p", "import", "t", "b.jsonl"]);
        assert!(!out.status.success(), "the import went through");
        store.fail(Fault::Refused, 0);
        let out = sesame(dir, &["--dir", "p", "table", "show", "t"]);
        store.heal();
        if out.status.success() && text(&out.stderr) == warning {
            pending = true;
            break;
        }
    }
    assert!(pending, "no import left its insertion pending");
    store.fail(Fault::Refused, 0);
    let out = ok(
        dir,
        &["--dir", "p", "query", "t", "s = \"x\"", "--format", "csv"],
    );
    assert_eq!(
        text(&out.stdout).lines().count(),
        1 + 4,
        "{}",
        text(&out.stdout)
    );
    assert_eq!(text(&out.stderr), warning);
    store.heal();
    let out = ok(
        dir,
        &["--dir", "p", "query", "t", "s = \"x\"", "--format", "csv"],
    );
    assert_eq!(
        text(&out.stdout).lines().count(),
        1 + 7,
        "{}",
        text(&out.stdout)
    );
    assert_eq!(text(&out.stderr), "");
    drop(server);
}
