//! The servers `sesame bench sql` measures side by side: a plaintext
//! PostgreSQL (the caller's, or a throwaway one) and `sesame sql` on a
//! scratch profile, each stopped when dropped, and the loopback ports and
//! files they need.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{SCHEMA, START_TIMEOUT};
use crate::BenchError;

pub(super) fn free_port() -> Result<u16, BenchError> {
    let l =
        TcpListener::bind("127.0.0.1:0").map_err(|e| BenchError::io("bind", "127.0.0.1:0", e))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| BenchError::io("bind", "127.0.0.1:0", e))
}

/// Waits until `port` on loopback accepts connections, or `child` exits.
pub(super) fn wait_listening(
    port: u16,
    child: Option<&mut Child>,
    what: &str,
    log: &Path,
) -> Result<(), BenchError> {
    let deadline = Instant::now() + START_TIMEOUT;
    let mut child = child;
    loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if let Some(c) = child.as_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                return Err(BenchError::InvalidArgument(format!(
                    "{what} exited ({status}) before listening: {}",
                    tail(log)
                )));
            }
        }
        if Instant::now() > deadline {
            return Err(BenchError::InvalidArgument(format!(
                "{what} did not listen on 127.0.0.1:{port} within {} s: {}",
                START_TIMEOUT.as_secs(),
                tail(log)
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub(super) fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let start = text.len().saturating_sub(2000);
    let start = (start..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    text[start..].to_owned()
}

/// The plaintext PostgreSQL side: `SESAME_BENCH_POSTGRES` or
/// `SESAME_TEST_POSTGRES`, or a throwaway
/// server stopped when this is dropped.
pub(super) struct Postgres {
    pub(super) conninfo: String,
    pub(super) table: String,
    pub(super) drop_after: Option<String>,
    pub(super) stop: Option<(PathBuf, PathBuf, bool)>,
}

impl Postgres {
    pub(super) fn start(scratch: &Path) -> Result<Self, BenchError> {
        if let Some(url) = ["SESAME_BENCH_POSTGRES", "SESAME_TEST_POSTGRES"]
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|v| !v.is_empty()))
        {
            let table = "sesame_bench_flights".to_owned();
            return Ok(Postgres {
                conninfo: url,
                drop_after: Some(table.clone()),
                table,
                stop: None,
            });
        }
        let initdb = pg_tool("initdb").ok_or_else(|| {
            BenchError::InvalidArgument(
                "bench sql needs PostgreSQL: set SESAME_BENCH_POSTGRES to a database, or install \
                 the server (initdb, pg_ctl; apt-get install postgresql)"
                    .into(),
            )
        })?;
        let pg_ctl = initdb.with_file_name("pg_ctl");
        let dir = scratch.join("pg");
        std::fs::create_dir_all(&dir).map_err(|e| BenchError::io("create", &dir, e))?;
        let root = is_root();
        if root {
            // initdb refuses to run as root: as `postgres`, which owns the
            // folder.
            let _ = Command::new("chown")
                .args(["postgres"])
                .arg(scratch)
                .arg(&dir)
                .status();
        }
        let log = dir.join("server.log");
        let run = |tool: &Path, args: &[&str]| -> Result<(), BenchError> {
            let mut cmd = if root {
                let mut c = Command::new("runuser");
                c.args(["-u", "postgres", "--"]).arg(tool);
                c
            } else {
                Command::new(tool)
            };
            let out = cmd
                .args(args)
                .current_dir(&dir)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| BenchError::io("run", tool, e))?;
            if !out.status.success() {
                return Err(BenchError::InvalidArgument(format!(
                    "{} failed: {}{}",
                    tool.display(),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
            Ok(())
        };
        let data = dir.join("data");
        let data_s = data.to_string_lossy().into_owned();
        run(
            &initdb,
            &[
                "-D",
                &data_s,
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        )?;
        let port = free_port()?;
        let opts = format!(
            "-c listen_addresses=127.0.0.1 -p {port} -k {} -c max_connections=20",
            dir.display()
        );
        run(
            &pg_ctl,
            &[
                "-D",
                &data_s,
                "-l",
                &log.to_string_lossy(),
                "-w",
                "-t",
                "60",
                "-o",
                &opts,
                "start",
            ],
        )?;
        let pg = Postgres {
            conninfo: format!("host=127.0.0.1 port={port} user=postgres dbname=postgres"),
            table: "flights".to_owned(),
            drop_after: None,
            stop: Some((pg_ctl, data, root)),
        };
        wait_listening(port, None, "PostgreSQL", &log)?;
        Ok(pg)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some((pg_ctl, data, root)) = self.stop.take() {
            let mut cmd = if root {
                let mut c = Command::new("runuser");
                c.args(["-u", "postgres", "--"]).arg(&pg_ctl);
                c
            } else {
                Command::new(&pg_ctl)
            };
            let _ = cmd
                .arg("-D")
                .arg(&data)
                .args(["-m", "immediate", "stop"])
                .current_dir("/")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// `initdb` on the PATH, else the newest under /usr/lib/postgresql.
pub(super) fn pg_tool(tool: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(tool);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let v = e.file_name().to_str()?.parse::<u32>().ok()?;
            let p = e.path().join("bin").join(tool);
            p.is_file().then_some((v, p))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p)
}

pub(super) fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// `sesame sql` on a scratch profile holding the flights table (empty),
/// killed when this is dropped.
pub(super) struct SesameSql {
    /// Without the password (psql gets it in `PGPASSWORD`).
    pub(super) conninfo: String,
    pub(super) child: Child,
}

impl SesameSql {
    /// The password of the scratch server (a throwaway).
    pub(super) const PASSWORD: &'static str = "sesame-bench-sql";

    pub(super) fn start(sesame: &Path, scratch: &Path) -> Result<Self, BenchError> {
        let profile = scratch.join("profile");
        let schema = scratch.join("flights.toml");
        std::fs::write(&schema, SCHEMA).map_err(|e| BenchError::io("write", &schema, e))?;
        let password = Self::PASSWORD;
        let password_file = scratch.join("password");
        write_private(&password_file, password)?;
        let env = [
            ("SESAME_PASSPHRASE", "sesame bench sql"),
            // The key derivation runs once, when the profile opens: its
            // cost is not what is measured.
            ("SESAME_KDF", "fast"),
        ];
        let sesame_cmd = |args: &[&str]| -> Result<(), BenchError> {
            let out = Command::new(sesame)
                .arg("--dir")
                .arg(&profile)
                .args(args)
                .envs(env)
                .stdin(Stdio::null())
                .output()
                .map_err(|e| BenchError::io("run", sesame, e))?;
            if !out.status.success() {
                return Err(BenchError::InvalidArgument(format!(
                    "sesame {} failed: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
            Ok(())
        };
        sesame_cmd(&["init"])?;
        sesame_cmd(&[
            "table",
            "create",
            "flights",
            "--schema",
            &schema.to_string_lossy(),
        ])?;
        let port = free_port()?;
        let log = scratch.join("sesame-sql.log");
        let log_file =
            std::fs::File::create(&log).map_err(|e| BenchError::io("create", &log, e))?;
        let log_err = log_file
            .try_clone()
            .map_err(|e| BenchError::io("create", &log, e))?;
        let mut child = Command::new(sesame)
            .arg("--dir")
            .arg(&profile)
            .args([
                "sql",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--password-file",
            ])
            .arg(&password_file)
            .envs(env)
            .env_remove("SESAME_SQL_PASSWORD")
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err)
            .spawn()
            .map_err(|e| BenchError::io("run", sesame, e))?;
        if let Err(e) = wait_listening(port, Some(&mut child), "sesame sql", &log) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        Ok(SesameSql {
            conninfo: format!("host=127.0.0.1 port={port} user=sesame dbname=sesame"),
            child,
        })
    }
}

impl Drop for SesameSql {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes a file only its owner can read.
pub(super) fn write_private(path: &Path, text: &str) -> Result<(), BenchError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| BenchError::io("create", path, e))?;
    writeln!(f, "{text}").map_err(|e| BenchError::io("write", path, e))
}
