"""psycopg 3, SQLAlchemy with pandas.read_sql, and node-postgres each run
the whole scenario (scenario.py) against `sesame sql`; SQLite answers the
same statements; every answer must be equal."""

import datetime as dt
import json
import os
import re
import shutil
import subprocess
import tempfile
from decimal import Decimal

import pytest

from conftest import HERE, have_module, require
from scenario import check, scenario


def pyformat(sql, params):
    """`$n` placeholders as psycopg's `%s` (a literal `%` doubled)."""
    if not params:
        return sql
    return re.sub(r"\$\d+", "%s", sql.replace("%", "%%"))


def run_psycopg(conn, steps):
    import psycopg

    results = []
    for s in steps:
        try:
            with conn.cursor() as cur:
                if s["kind"] == "copy":
                    with cur.copy(s["sql"]) as copy:
                        copy.write(s["data"])
                    results.append({"rowcount": cur.rowcount})
                    continue
                cur.execute(pyformat(s["sql"], s["params"]), s["params"] or None,
                            prepare=True if s.get("prepare") else None)
                if s["kind"] == "query":
                    results.append({"rows": cur.fetchall()})
                else:
                    results.append({"rowcount": cur.rowcount})
        except psycopg.Error as e:
            results.append({"error": e.sqlstate, "message": str(e).strip()})
    return results


def test_psycopg(server):
    require(have_module("psycopg"), "psycopg is not installed (pip install 'psycopg[binary]')")
    import psycopg

    t = server.table("t_psycopg")
    steps = scenario(t)
    with psycopg.connect(**server.conninfo(), autocommit=True, connect_timeout=20) as conn:
        results = run_psycopg(conn, steps)
    check(t, steps, results)


def plain(v):
    """A pandas cell as a plain Python value (NaN and NaT: None)."""
    import pandas as pd

    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return None
    if isinstance(v, pd.Timestamp):
        return v.to_pydatetime()
    if hasattr(v, "item"):
        return v.item()
    return v


def named(sql, params):
    """`$n` placeholders as SQLAlchemy's `:pn`, with the parameter dict."""
    return re.sub(r"\$(\d+)", r":p\1", sql), {f"p{i + 1}": v for i, v in enumerate(params)}


def test_sqlalchemy_pandas(server):
    require(have_module("psycopg"), "psycopg is not installed (pip install 'psycopg[binary]')")
    require(have_module("sqlalchemy"), "SQLAlchemy is not installed (pip install sqlalchemy)")
    require(have_module("pandas"), "pandas is not installed (pip install pandas)")
    import pandas as pd
    import sqlalchemy as sa

    c = server.conninfo()
    url = sa.engine.URL.create(
        "postgresql+psycopg", username=c["user"], password=c["password"],
        host=c["host"], port=c["port"], database=c["dbname"],
    )
    engine = sa.create_engine(url, connect_args={"connect_timeout": 20})
    t = server.table("t_pandas")
    steps = scenario(t)
    results = []
    try:
        for s in steps:
            try:
                # Each statement in its own transaction, as an application
                # using SQLAlchemy would (BEGIN ... COMMIT).
                with engine.begin() as conn:
                    if s["kind"] == "copy":
                        raw = conn.connection.driver_connection
                        with raw.cursor() as cur:
                            with cur.copy(s["sql"]) as copy:
                                copy.write(s["data"])
                            results.append({"rowcount": cur.rowcount})
                        continue
                    sql, params = named(s["sql"], s["params"])
                    if s["kind"] == "query":
                        df = pd.read_sql(sa.text(sql), conn, params=params)
                        rows = [tuple(plain(v) for v in r) for r in df.itertuples(index=False, name=None)]
                        results.append({"rows": rows})
                    else:
                        r = conn.execute(sa.text(sql), params)
                        results.append({"rowcount": r.rowcount})
            except (sa.exc.DBAPIError, pd.errors.DatabaseError) as e:
                # pandas wraps the driver's error in its own.
                while not isinstance(e, sa.exc.DBAPIError) and e.__cause__ is not None:
                    e = e.__cause__
                orig = getattr(e, "orig", e)
                results.append({"error": getattr(orig, "sqlstate", None), "message": str(orig).strip()})
    finally:
        engine.dispose()
    check(t, steps, results)


def node_value(v):
    if isinstance(v, dt.datetime):
        return v.isoformat()
    if isinstance(v, Decimal):
        return str(v)
    return v


def node_modules():
    """Where `pg` and `pg-copy-streams` are: tests/sql/node_modules (npm
    install in tests/sql), else SESAME_SQL_NODE_MODULES."""
    for d in [os.environ.get("SESAME_SQL_NODE_MODULES"), str(HERE / "node_modules")]:
        if d and os.path.isdir(os.path.join(d, "pg")) and os.path.isdir(os.path.join(d, "pg-copy-streams")):
            return d
    return None


def test_node_postgres(server):
    require(shutil.which("node") is not None, "node is not installed")
    modules = node_modules()
    require(modules is not None, "node-postgres is not installed (npm install in tests/sql)")
    t = server.table("t_node")
    steps = scenario(t)
    spec = {
        "conn": {**server.conninfo(), "connectionTimeoutMillis": 20000},
        "steps": [
            {k: ([node_value(v) for v in s["params"]] if k == "params" else v)
             for k, v in s.items() if k != "rows"}
            for s in steps
        ],
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        r = subprocess.run(
            ["node", str(HERE / "client.js"), f.name],
            capture_output=True, text=True, timeout=180,
            env=dict(os.environ, NODE_PATH=modules),
        )
    finally:
        os.unlink(f.name)
    assert r.returncode == 0, f"node client.js failed ({r.returncode}):\n{r.stderr}\n{server.log()}"
    results = json.loads(r.stdout)
    check(t, steps, results)


def test_scenario_is_checked():
    """The oracle comparison fails on a wrong answer (the suite cannot
    pass by comparing nothing)."""
    steps = scenario("t_self")
    from scenario import Oracle

    oracle = Oracle("t_self")
    results = [oracle.run(s) for s in steps]
    check("t_self", steps, results)
    k = next(i for i, s in enumerate(steps) if s["kind"] == "query" and "ORDER BY qty DESC" in s["sql"])
    wrong = [dict(r) for r in results]
    rows = list(wrong[k]["rows"])
    rows[0], rows[1] = rows[1], rows[0]
    wrong[k]["rows"] = rows
    with pytest.raises(AssertionError, match="differ from SQLite"):
        check("t_self", steps, wrong)
