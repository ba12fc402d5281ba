"""psql: \\dt and \\d list the table with its typed columns, COPY FROM
STDIN loads rows, and SELECTs answer as SQLite does on the same rows."""

import os
import shutil
import subprocess

from conftest import require
from scenario import Oracle, compare, csv_text, make_rows, queries, step


def run_psql(server, *args, stdin=None):
    c = server.conninfo()
    env = dict(os.environ, PGPASSWORD=c["password"], PGTZ="UTC", PGCONNECT_TIMEOUT="20")
    return subprocess.run(
        ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", c["host"], "-p", str(c["port"]),
         "-U", c["user"], "-d", c["dbname"], *args],
        input=stdin, capture_output=True, text=True, timeout=60, env=env,
    )


def psql(server, *args, stdin=None):
    r = run_psql(server, *args, stdin=stdin)
    assert r.returncode == 0, f"psql {' '.join(args)} failed ({r.returncode}):\n{r.stderr}\n{server.log()}"
    return r.stdout


def cell(text):
    """A cell of psql's unaligned output as a value (NULL printed as NULL)."""
    if text == "NULL":
        return None
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    return text


def test_psql(server):
    require(shutil.which("psql") is not None, "psql is not installed (apt-get install postgresql-client)")
    t = server.table("t_psql")
    rows = make_rows(60, seed=5)
    oracle = Oracle(t)
    copy = step("copy", "", rows=rows)
    oracle.run(copy)

    out = psql(server, "-c", f"COPY {t} FROM STDIN (FORMAT csv, HEADER)", stdin=csv_text(rows))
    assert out.strip() in ("", "COPY 60"), out

    listing = psql(server, "-c", r"\dt")
    assert t in listing, f"\\dt does not list {t}:\n{listing}"
    described = psql(server, "-c", rf"\d {t}")
    for column, typ in [("id", "bigint"), ("name", "text"), ("city", "text"), ("qty", "bigint"),
                        ("price", "numeric"), ("ts", "timestamp with time zone"), ("note", "text")]:
        assert any(
            [p.strip() for p in line.split("|")][:2] == [column, typ] for line in described.splitlines()
        ), f"\\d {t} has no column {column} of type {typ}:\n{described}"

    failures = []
    for s in queries(t):
        if s["params"]:
            continue
        r = run_psql(server, "-A", "-t", "-F", "\t", "-P", "null=NULL", "-c", s["sql"])
        if r.returncode != 0:
            oracle.run(s)
            refusal = s.get("refusal")
            if not (refusal and refusal[1] in r.stderr and "ERROR" in r.stderr):
                failures.append(f"{s['sql']}: psql failed: {r.stderr.strip()}")
            continue
        got = r.stdout
        got_rows = [tuple(cell(c) for c in line.split("\t")) for line in got.splitlines()]
        try:
            compare(s, {"rows": got_rows}, oracle.run(s))
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, f"{len(failures)} psql answers differ from SQLite:\n" + "\n".join(failures)
