"""The rows, the statements and the oracle of the external-client suite.

Every client (psql, psycopg 3, SQLAlchemy with pandas, node-postgres) runs
the same scenario against `sesame sql`: load rows (a multi-row INSERT with
parameters, then COPY CSV with HEADER), run the queries, change rows
(DELETE, UPDATE), read the whole table back, DROP it. SQLite (Python's
sqlite3) runs the same statements on the same rows: every answer must be
equal once the types are normalized (`normalize`).

Statements are written once with `$1, $2, ...` placeholders (PostgreSQL's)
and turned into each client's and SQLite's style.
"""

import csv
import datetime as dt
import io
import math
import numbers
import random
import re
import sqlite3
from decimal import Decimal

COLUMNS = ["id", "name", "city", "qty", "price", "ts", "note"]
NAMES = ["pear", "peach", "pecan", "plum", "apple", "apricot", "banana", "kiwi"]
CITIES = ["Oslo", "Lima", "Rome", "Kyiv", None]
NOTES = ["fragile", "gift", "urgent", None, None]
EPOCH0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def ts_text(t):
    """The canonical text of a timestamp: what SQLite stores and compares."""
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_rows(n=120, seed=38):
    """`n` rows with ties in every ordered column and nulls in city and note."""
    rng = random.Random(seed)
    rows = []
    for i in range(1, n + 1):
        rows.append(
            (
                i,
                rng.choice(NAMES),
                rng.choice(CITIES),
                rng.randrange(0, 101),
                Decimal(rng.randrange(0, 50001)) / 100,
                EPOCH0 + dt.timedelta(seconds=rng.randrange(0, 30 * 86400)),
                rng.choice(NOTES),
            )
        )
    return rows


def csv_text(rows):
    """The rows as CSV with a header line (null: an empty unquoted cell)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow(
            [
                "" if v is None else ts_text(v) if isinstance(v, dt.datetime) else str(v)
                for v in r
            ]
        )
    return out.getvalue()


def insert_sql(table, nrows):
    """A multi-row INSERT of `nrows` rows with numbered parameters."""
    k = len(COLUMNS)
    groups = [
        "(" + ", ".join(f"${j * k + c + 1}" for c in range(k)) + ")" for j in range(nrows)
    ]
    return f"INSERT INTO {table} ({', '.join(COLUMNS)}) VALUES " + ", ".join(groups)


def step(kind, sql, params=(), **kw):
    return dict(kind=kind, sql=sql, params=list(params), **kw)


def queries(t):
    """The SELECTs: each filter the issue names, ORDER BY with ties broken
    by the query, LIMIT/OFFSET, aggregates, GROUP BY, parameters."""
    q = lambda sql, params=(), ordered=True, prepare=False, **kw: step(  # noqa: E731
        "query", sql.format(t=t), params, ordered=ordered, prepare=prepare, **kw
    )
    day = lambda d: EPOCH0 + dt.timedelta(days=d)  # noqa: E731
    return [
        q("SELECT * FROM {t} WHERE id = 7"),
        q("SELECT id, name FROM {t} WHERE name = 'pear' ORDER BY id"),
        q("SELECT id, qty FROM {t} WHERE qty < 10 ORDER BY qty, id"),
        q("SELECT id, qty FROM {t} WHERE qty <= 10 ORDER BY qty DESC, id"),
        q("SELECT id, qty FROM {t} WHERE qty > 95 ORDER BY qty, id DESC"),
        q("SELECT id, qty FROM {t} WHERE qty >= 95 ORDER BY qty DESC, id DESC"),
        q("SELECT id, price FROM {t} WHERE price BETWEEN 100 AND 150.5 ORDER BY price, id"),
        q("SELECT id FROM {t} WHERE city IN ('Oslo', 'Lima') ORDER BY id"),
        q("SELECT id, name FROM {t} WHERE name LIKE 'pe%' ORDER BY name, id"),
        # IS NULL: the field's null keyword in the keyword index.
        q("SELECT id, city FROM {t} WHERE city IS NULL ORDER BY id"),
        q("SELECT id FROM {t} WHERE name IS NULL ORDER BY id"),
        q("SELECT id, qty FROM {t} WHERE city IS NULL AND qty >= 50 ORDER BY id"),
        q("SELECT id, name FROM {t} WHERE city IS NULL OR name LIKE 'pe%' ORDER BY id"),
        q("SELECT count(*) FROM {t} WHERE city IS NULL"),
        q("SELECT id FROM {t} WHERE city = 'Rome' AND qty >= 50 ORDER BY id"),
        q("SELECT id FROM {t} WHERE city = 'Kyiv' OR qty < 5 ORDER BY id"),
        q(
            "SELECT id, city, qty, price FROM {t} WHERE (city = 'Oslo' OR city = 'Lima') "
            "AND (qty < 30 OR price > 400) ORDER BY id"
        ),
        q("SELECT id, ts FROM {t} WHERE ts >= '2024-01-20T00:00:00Z' ORDER BY ts, id"),
        q("SELECT id, qty FROM {t} WHERE qty >= 0 ORDER BY qty DESC, id LIMIT 10 OFFSET 5"),
        q("SELECT id, name, note FROM {t} WHERE city = 'Rome' ORDER BY name DESC, id"),
        q("SELECT name, qty, id FROM {t} WHERE qty < 20 ORDER BY qty, name DESC, id"),
        q("SELECT * FROM {t} ORDER BY id"),
        q("SELECT * FROM {t}", ordered=False),
        q("SELECT count(*) FROM {t}"),
        q("SELECT count(*) FROM {t} WHERE city = 'Oslo'"),
        q("SELECT count(*), count(city), count(note) FROM {t} WHERE qty >= 50"),
        q("SELECT min(qty), max(qty), sum(qty), avg(qty) FROM {t} WHERE city = 'Lima'"),
        q("SELECT min(price), max(price), sum(price), avg(price) FROM {t} WHERE qty BETWEEN 20 AND 60"),
        q("SELECT min(ts), max(ts) FROM {t} WHERE qty > 50"),
        q("SELECT city, count(*), sum(qty) FROM {t} WHERE qty >= 0 GROUP BY city", ordered=False),
        q("SELECT name, count(*), max(qty) FROM {t} WHERE name LIKE 'p%' GROUP BY name ORDER BY name"),
        q(
            "SELECT id, name FROM {t} WHERE city = $1 AND qty BETWEEN $2 AND $3 ORDER BY id",
            ["Oslo", 10, 70],
            prepare=True,
        ),
        q(
            "SELECT id, name FROM {t} WHERE city = $1 AND qty BETWEEN $2 AND $3 ORDER BY id",
            ["Rome", 0, 40],
            prepare=True,
        ),
        q("SELECT id, ts FROM {t} WHERE ts BETWEEN $1 AND $2 ORDER BY id", [day(3), day(9)], prepare=True),
        q("SELECT id, price FROM {t} WHERE price > $1 ORDER BY price DESC, id", [Decimal("420.5")]),
        q("SELECT id FROM {t} WHERE id IN ($1, $2, $3) ORDER BY id", [3, 30, 300]),
        q("SELECT count(*) FROM {t} WHERE name LIKE $1", ["ap%"]),
    ]


def scenario(t, rows=None):
    """The whole scenario on table `t`: load, query, change, read back, drop."""
    rows = rows if rows is not None else make_rows()
    half = len(rows) // 2
    steps = []
    # The first half by multi-row INSERTs with parameters, 20 rows each.
    for i in range(0, half, 20):
        batch = rows[i : min(i + 20, half)]
        steps.append(
            step("insert", insert_sql(t, len(batch)), [v for r in batch for v in r], rows=batch)
        )
    # The second half by COPY CSV with a header.
    steps.append(
        step(
            "copy",
            f"COPY {t} ({', '.join(COLUMNS)}) FROM STDIN (FORMAT csv, HEADER)",
            rows=rows[half:],
            data=csv_text(rows[half:]),
        )
    )
    steps += queries(t)
    steps += [
        step("exec", f"DELETE FROM {t} WHERE city = 'Kyiv' AND qty < 50"),
        step("exec", f"UPDATE {t} SET note = 'updated', price = 9.99 WHERE name LIKE 'pl%'"),
        step("exec", f"UPDATE {t} SET city = $1 WHERE id = $2", ["Bern", 11]),
        step("exec", f"DELETE FROM {t} WHERE id = $1", [12]),
        step("exec", f"UPDATE {t} SET city = NULL WHERE id = $1", [13]),
        step("exec", f"DELETE FROM {t} WHERE city IS NULL AND qty < 20"),
        step("query", f"SELECT id, city, qty FROM {t} WHERE city IS NULL ORDER BY id", ordered=True, prepare=False),
        step("query", f"SELECT * FROM {t} ORDER BY id", ordered=True, prepare=False),
        step("query", f"SELECT id, note, price FROM {t} WHERE name LIKE 'pl%' ORDER BY id", ordered=True, prepare=False),
        step("query", f"SELECT count(*) FROM {t} WHERE city = 'Kyiv'", ordered=True, prepare=False),
        step("exec", f"DROP TABLE {t}"),
        step("error", f"SELECT * FROM {t} WHERE id = 1", code="42P01"),
    ]
    return steps


# --- SQLite, the oracle -------------------------------------------------


def sqlite_value(v):
    if isinstance(v, dt.datetime):
        return ts_text(v)
    if isinstance(v, Decimal):
        return float(v)
    return v


def sqlite_sql(sql):
    return re.sub(r"\$\d+", "?", sql)


class Oracle:
    """SQLite with the same table; answers each step as the server should."""

    def __init__(self, table):
        self.db = sqlite3.connect(":memory:")
        self.db.execute("PRAGMA case_sensitive_like = ON")
        self.db.execute(
            f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name TEXT, city TEXT, "
            "qty INTEGER, price REAL, ts TEXT, note TEXT)"
        )
        self.table = table

    def run(self, s):
        if s["kind"] == "error":
            return {"error": s["code"]}
        if s["kind"] == "copy":
            cur = self.db.executemany(
                f"INSERT INTO {self.table} VALUES ({', '.join('?' * len(COLUMNS))})",
                [[sqlite_value(v) for v in r] for r in s["rows"]],
            )
            return {"rowcount": cur.rowcount}
        cur = self.db.execute(sqlite_sql(s["sql"]), [sqlite_value(v) for v in s["params"]])
        if s["kind"] == "query":
            return {"rows": cur.fetchall()}
        return {"rowcount": cur.rowcount}


# --- Comparing answers --------------------------------------------------

TS = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]\d{2}(:?\d{2})?)$")


def normalize_cell(v):
    """One value in a form every client and SQLite agree on: numbers as
    floats rounded to 4 places, timestamps as seconds since 1970."""
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=dt.timezone.utc)
        return int(v.timestamp())
    if isinstance(v, (numbers.Number, Decimal)):
        f = float(v)
        if math.isnan(f):
            return None
        return round(f, 4)
    if isinstance(v, str):
        m = TS.match(v)
        if m:
            zone = m.group(4)
            if zone == "Z":
                zone = "+00:00"
            elif len(zone) == 3:
                zone += ":00"
            elif ":" not in zone:
                zone = zone[:3] + ":" + zone[3:]
            t = dt.datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}{zone}")
            return int(t.timestamp())
    return v


def normalize_rows(rows, ordered):
    out = [tuple(normalize_cell(c) for c in r) for r in rows]
    if not ordered:
        out.sort(key=lambda r: tuple((c is None, str(type(c)), c if c is not None else 0) for c in r))
    return out


def compare(s, got, want):
    """Raises AssertionError naming the statement when `got` differs."""
    sql = s["sql"] if len(s["sql"]) <= 160 else s["sql"][:150] + " ..."
    where = f"{s['kind']}: {sql} {s['params'] if s['params'] and s['kind'] != 'insert' else ''}"
    if "error" in want:
        assert "error" in got, f"{where}: expected SQLSTATE {want['error']}, got {got}"
        assert got["error"] == want["error"], f"{where}: SQLSTATE {got['error']} ({got.get('message')}), expected {want['error']}"
        return
    if "error" in got and s.get("refusal") and got["error"] == s["refusal"][0] \
            and s["refusal"][1] in (got.get("message") or ""):
        return
    assert "error" not in got, f"{where}: failed with SQLSTATE {got['error']}: {got.get('message')}"
    if "rows" in want:
        g = normalize_rows(got["rows"], s["ordered"])
        w = normalize_rows(want["rows"], s["ordered"])
        assert g == w, f"{where}:\n got  {g[:20]}{' ...' if len(g) > 20 else ''} ({len(g)} rows)\n want {w[:20]}{' ...' if len(w) > 20 else ''} ({len(w)} rows)"
    else:
        if s["kind"] == "exec" and s["sql"].startswith("DROP"):
            return
        assert got.get("rowcount") == want["rowcount"], f"{where}: row count {got.get('rowcount')}, expected {want['rowcount']}"


def check(table, steps, results):
    """Runs the oracle over `steps` and compares each of `results`; every
    difference is reported, not only the first."""
    oracle = Oracle(table)
    failures = []
    for s, got in zip(steps, results):
        want = oracle.run(s)
        try:
            compare(s, got, want)
        except AssertionError as e:
            failures.append(str(e))
    assert len(results) == len(steps), f"{len(results)} answers for {len(steps)} statements"
    assert not failures, f"{len(failures)} of {len(steps)} statements differ from SQLite:\n" + "\n".join(failures)
