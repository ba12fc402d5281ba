//! `sesame search`, `list` and `get` while the server's store refuses
//! writes (a full disk) and an add's update is pending: they answer from
//! what the server has, with a one-line warning of the pending documents;
//! once the store has room the next search sends the update first. The
//! same for a table's `query` and `table show`.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use rand_core::OsRng;
use sesame_core::{IoCounts, Result, Store, WriteBatch};
use sesame_server::{RunningServer, ServerConfig, TlsFiles, Tokens};
use sesame_store::MemoryStore;

/// A store whose writes, once [`FullDisk::fill`] is called, are refused
/// after a countdown as on a full disk (nothing applied), until
/// [`FullDisk::heal`]; reads always work.
struct FullDisk {
    inner: MemoryStore,
    /// Writes that still succeed (-1: every one).
    countdown: AtomicI64,
}

impl FullDisk {
    fn fill(&self, after: i64) {
        self.countdown.store(after, Ordering::SeqCst);
    }
    fn heal(&self) {
        self.countdown.store(-1, Ordering::SeqCst);
    }
}

impl Store for FullDisk {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner.get_many(keys)
    }
    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_if(&[], &batch).map(drop)
    }
    fn write_if(&self, expect: &[(&[u8], Option<&[u8]>)], batch: &WriteBatch) -> Result<bool> {
        let left = self.countdown.load(Ordering::SeqCst);
        if left == 0 {
            return Err(sesame_core::Error::StoreFull(
                "write: No space left on device (os error 28)".into(),
            ));
        }
        if left > 0 {
            self.countdown.fetch_sub(1, Ordering::SeqCst);
        }
        self.inner.write_if(expect, batch)
    }
    fn scan_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.inner.scan_prefix(prefix)
    }
    fn scan_from(
        &self,
        prefix: &[u8],
        from: &[u8],
        descending: bool,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.inner.scan_from(prefix, from, descending, limit)
    }
    fn ordered_probes(&self) -> bool {
        self.inner.ordered_probes()
    }
    fn io_counts(&self) -> IoCounts {
        self.inner.io_counts()
    }
    fn backend(&self) -> &'static str {
        "full-disk"
    }
}

const WARNING: &str =
    "warning: 6 documents are pending: not yet on the server; they will be sent by the next \
     command that can\n";

fn sesame(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sesame"))
        .current_dir(dir)
        .env_remove("SESAME_HOME")
        .env_remove("SESAME_TOKEN")
        .env("SESAME_PASSPHRASE", "pw")
        .env("SESAME_KDF", "fast")
        .stdin(Stdio::null())
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
    let store = Arc::new(FullDisk {
        inner: MemoryStore::new(),
        countdown: AtomicI64::new(-1),
    });
    let certs = sesame_server::certs::localhost().unwrap();
    std::fs::write(dir.join("ca.pem"), &certs.ca_pem).unwrap();
    let token = Tokens::generate(&mut OsRng);
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.tls = Some(TlsFiles {
        cert_pem: certs.cert_pem.into_bytes(),
        key_pem: certs.key_pem.into_bytes(),
    });
    config.tokens = Tokens::new().with("t", &token).unwrap();
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
        store.fill(after);
        let out = sesame(dir, &["--dir", "p", "add", "b"]);
        store.heal();
        assert!(!out.status.success(), "the add went through");
        if text(&out.stderr).contains("6 document(s) are saved") {
            pending = true;
            break;
        }
    }
    assert!(pending, "no add left its update pending");

    store.fill(0);
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
        store.fill(after);
        let out = sesame(dir, &["--dir", "p", "import", "t", "b.jsonl"]);
        assert!(!out.status.success(), "the import went through");
        store.fill(0);
        let out = sesame(dir, &["--dir", "p", "table", "show", "t"]);
        store.heal();
        if out.status.success() && text(&out.stderr) == warning {
            pending = true;
            break;
        }
    }
    assert!(pending, "no import left its insertion pending");
    store.fill(0);
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
