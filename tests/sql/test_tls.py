"""TLS: `sesame sql --tls-cert C --tls-key K` (a certificate from a
throwaway CA made with openssl): psql with sslmode=require and psycopg
with sslmode=verify-full (the certificate checked against the CA)
connect, see TLS in use, write and get answers."""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import SesameSql, have_module, require, sesame_binary


def make_certificate(d):
    """A CA and a certificate for 127.0.0.1 (openssl, as .ci/run makes
    PostgreSQL's)."""
    run = lambda *a: subprocess.run(a, cwd=d, check=True, capture_output=True, timeout=60)  # noqa: E731
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-days", "2", "-subj", "/CN=sesame-sql-test-ca", "-keyout", "ca.key", "-out", "ca.pem")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-subj", "/CN=127.0.0.1", "-keyout", "server.key", "-out", "server.csr")
    Path(d, "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.crt")
    os.chmod(Path(d, "server.key"), 0o600)


def test_tls_sslmode_require(server):
    if server.kind != "sesame":
        pytest.skip("sesame sql only")
    require(shutil.which("openssl") is not None, "openssl is not installed")
    require(shutil.which("psql") is not None, "psql is not installed (apt-get install postgresql-client)")
    require(have_module("psycopg"), "psycopg is not installed (pip install 'psycopg[binary]')")
    import psycopg

    d = tempfile.mkdtemp(prefix="sesame-sql-tls.")
    s = None
    try:
        make_certificate(d)
        s = SesameSql(sesame_binary(), d, tables=["t_tls"],
                      extra_args=["--tls-cert", f"{d}/server.crt", "--tls-key", f"{d}/server.key"])
        s.start()
        c = s.conninfo()
        env = dict(os.environ, PGPASSWORD=c["password"], PGCONNECT_TIMEOUT="20")
        dsn = f"host={c['host']} port={c['port']} user={c['user']} dbname={c['dbname']}"
        r = subprocess.run(
            ["psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", f"{dsn} sslmode=require",
             "-c", "SELECT count(*) FROM t_tls"],
            capture_output=True, text=True, timeout=60, env=env,
        )
        assert r.returncode == 0 and r.stdout.strip() == "0", f"psql sslmode=require: {r.stdout}{r.stderr}\n{s.log()}"

        with psycopg.connect(**c, sslmode="verify-full", sslrootcert=f"{d}/ca.pem", connect_timeout=20,
                             autocommit=True) as conn:
            assert conn.pgconn.ssl_in_use, "psycopg's connection is not encrypted"
            conn.execute("INSERT INTO t_tls (id, name, qty) VALUES (1, 'pear', 5)")
            assert conn.execute("SELECT id, name FROM t_tls WHERE qty < 10").fetchall() == [(1, "pear")]

    finally:
        if s:
            s.stop()
        shutil.rmtree(d, ignore_errors=True)
