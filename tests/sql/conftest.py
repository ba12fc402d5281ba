"""Fixtures of the external-client suite: a profile with its tables and a
running `sesame sql` (or, with SESAME_SQL_TARGET, a PostgreSQL server).

Environment:
  SESAME_BIN                  the `sesame` binary (default target/debug/sesame)
  SESAME_SQL_TARGET           postgres://... : run the clients against that
                              PostgreSQL database instead (to check the
                              suite and its oracle; the tables are created
                              with CREATE TABLE; sesame-only tests skip)
  SESAME_SQL_CLIENTS_REQUIRE  set: a missing tool (psql, node, a Python
                              package, `sesame sql`) fails instead of
                              skipping with a note
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TABLES = ["t_psql", "t_psycopg", "t_pandas", "t_node", "t_crash", "t_scan"]
PASSWORD = "sesame-sql-test-password"
# Every wait is bounded: a server that does not answer fails the test.
START_TIMEOUT = 60


def require(ok, note):
    """Skips with a printed note where a tool is missing, or fails where
    SESAME_SQL_CLIENTS_REQUIRE is set."""
    if ok:
        return
    if os.environ.get("SESAME_SQL_CLIENTS_REQUIRE"):
        pytest.fail(f"{note} (SESAME_SQL_CLIENTS_REQUIRE is set)")
    print(f"note: {note}: skipped", file=sys.stderr)
    pytest.skip(note)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SesameSql:
    """A profile with the suite's tables and `sesame sql` serving it."""

    kind = "sesame"

    def __init__(self, binary, scratch, tables=TABLES, extra_args=()):
        self.binary = binary
        self.extra_args = list(extra_args)
        self.scratch = Path(scratch)
        self.profile = self.scratch / "profile"
        self.env = dict(os.environ, SESAME_PASSPHRASE="sql suite passphrase", SESAME_KDF="fast")
        self.env.pop("SESAME_SQL_PASSWORD", None)
        self.password_file = self.scratch / "password"
        self.password_file.write_text(PASSWORD + "\n")
        self.password_file.chmod(0o600)
        self.log_path = self.scratch / "server.log"
        self.proc = None
        self.port = free_port()
        self.host = "127.0.0.1"
        self.user = "sesame"
        self.dbname = "sesame"
        self.password = PASSWORD
        self.sesame("init")
        for t in tables:
            self.sesame("table", "create", t, "--schema", str(HERE / "schema.toml"))

    def sesame(self, *args):
        r = subprocess.run(
            [self.binary, "--dir", str(self.profile), *args],
            env=self.env, capture_output=True, text=True, timeout=120,
        )
        assert r.returncode == 0, f"sesame {' '.join(args)} failed: {r.stderr}"
        return r.stdout

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [self.binary, "--dir", str(self.profile), "sql",
             "--listen", f"{self.host}:{self.port}", "--password-file", str(self.password_file),
             *self.extra_args],
            env=self.env, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"sesame sql exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"sesame sql did not listen within {START_TIMEOUT} s:\n{self.log()}")
                time.sleep(0.1)

    def kill(self):
        """SIGKILL: the process gets no chance to clean up."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def table(self, name):
        return name

    def conninfo(self):
        return dict(host=self.host, port=self.port, user=self.user, password=self.password, dbname=self.dbname)


class Postgres:
    """A PostgreSQL database standing in for `sesame sql` (SESAME_SQL_TARGET)."""

    kind = "postgres"

    def __init__(self, url):
        u = urllib.parse.urlparse(url)
        q = urllib.parse.parse_qs(u.query)
        self.host = urllib.parse.unquote(u.hostname or q.get("host", ["127.0.0.1"])[0])
        self.port = u.port or 5432
        self.user = urllib.parse.unquote(u.username or "postgres")
        self.password = urllib.parse.unquote(u.password or "")
        self.dbname = (u.path or "/postgres").lstrip("/") or "postgres"

    def start(self):
        pass

    def stop(self):
        pass

    def table(self, name):
        import psycopg

        with psycopg.connect(**self.conninfo(), autocommit=True) as c:
            c.execute(f"DROP TABLE IF EXISTS {name}")
            c.execute(
                f"CREATE TABLE {name} (id int8 PRIMARY KEY, name text, city text, qty int8, "
                "price numeric, ts timestamptz, note text)"
            )
        return name

    def conninfo(self):
        return dict(host=self.host, port=self.port, user=self.user, password=self.password, dbname=self.dbname)

    def log(self):
        return ""


def sesame_binary():
    """The `sesame` under test, with its `sql` command (else skip or fail)."""
    binary = os.environ.get("SESAME_BIN") or str(ROOT / "target" / "debug" / "sesame")
    require(Path(binary).is_file(), f"no sesame binary at {binary} (set SESAME_BIN or build sesame-cli)")
    has_sql = subprocess.run([binary, "sql", "--help"], capture_output=True, timeout=30).returncode == 0
    require(has_sql, f"{binary} has no `sql` command")
    return binary


@pytest.fixture(scope="session")
def server():
    target = os.environ.get("SESAME_SQL_TARGET")
    if target:
        yield Postgres(target)
        return
    binary = sesame_binary()
    scratch = tempfile.mkdtemp(prefix="sesame-sql-suite.")
    s = SesameSql(binary, scratch)
    try:
        s.start()
        yield s
    finally:
        s.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def have_module(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False
