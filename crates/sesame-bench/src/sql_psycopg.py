"""The psycopg 3 side of `sesame bench sql` (run by it, one process per
server): COPY the CSV, then run each query kind, timing each statement
from its send to its last row read, and print the figures as one JSON
object on stdout.

    python3 sql_psycopg.py WORKLOAD.json

WORKLOAD.json: {"conninfo": "...", "table": "...", "csv": "PATH",
"columns": [...], "copy": true, "kinds": {"point": [SQL, ...], ...}}
(`{t}` in each statement names the table). Output: {"copy_s": ...,
"copy_rows": ..., "kinds": {"point": {"times_ms": [...], "rows": [...]}}}.
Each statement runs as psycopg runs a query by default (the extended
protocol: Parse, Bind, Execute) with its values inline, the first of each
kind once more beforehand, not counted (connections and caches warm on
both sides alike).
"""

import json
import sys
import time

import psycopg


def main():
    with open(sys.argv[1]) as f:
        work = json.load(f)
    table = work["table"]
    out = {"client": f"psycopg {psycopg.__version__}", "kinds": {}}
    with psycopg.connect(work["conninfo"], autocommit=True) as conn:
        if work.get("copy"):
            cols = ", ".join(work["columns"])
            start = time.perf_counter()
            with conn.cursor() as cur:
                with cur.copy(f"COPY {table} ({cols}) FROM STDIN (FORMAT csv, HEADER)") as copy:
                    with open(work["csv"], "rb") as data:
                        while chunk := data.read(1 << 20):
                            copy.write(chunk)
                out["copy_rows"] = cur.rowcount
            out["copy_s"] = time.perf_counter() - start
        if work.get("after_copy"):
            conn.execute(work["after_copy"].replace("{t}", table))
        for kind, sqls in work["kinds"].items():
            texts = [s.replace("{t}", table) for s in sqls]
            times, rows = [], []
            with conn.cursor() as cur:
                if texts:
                    cur.execute(texts[0])
                    cur.fetchall()
                for sql in texts:
                    start = time.perf_counter()
                    cur.execute(sql)
                    n = len(cur.fetchall())
                    times.append((time.perf_counter() - start) * 1e3)
                    rows.append(n)
            out["kinds"][kind] = {"times_ms": times, "rows": rows}
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
