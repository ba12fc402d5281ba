#!/usr/bin/env python3
"""Table import, side by side: `sesame import` (embedded profile) and
SQLite from Python with an index per indexed field of the schema.

Each run reports wall time, peak memory (resident set, from
/usr/bin/time -v for sesame, from getrusage for the SQLite child) and the
bytes on disk: the sesame profile directory and the SQLite file.

    scripts/bench-import.py [--sesame BIN] [--schema examples/flights.toml]
                            [--csv data/nycflights13/flights.csv]
                            [--generate ROWS] [--keep DIR]

`--generate ROWS` writes a CSV of ROWS rows in the flights' columns
(values drawn from a fixed seed) instead of reading `--csv`: the large-file
memory check (a 2 GB CSV is about 14 million rows).

Needs python3 (sqlite3, tomllib: 3.11+) and GNU time (/usr/bin/time).
"""

import argparse
import csv
import os
import random
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import tomllib


def du(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def generate(path, rows, seed=13):
    rng = random.Random(seed)
    carriers = ["UA", "B6", "EV", "DL", "AA", "MQ", "US", "9E", "WN", "VX", "FL", "AS", "F9", "YV", "HA", "OO"]
    airports = ["IAH", "MIA", "BQN", "ATL", "ORD", "FLL", "IAD", "MCO", "PBI", "TPA", "LAX", "SFO", "DFW", "BOS", "LAS", "MSP"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["year", "month", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time",
                    "sched_arr_time", "arr_delay", "carrier", "flight", "tailnum", "origin", "dest",
                    "air_time", "distance", "hour", "minute", "time_hour"])
        for i in range(rows):
            month = rng.randint(1, 12)
            day = rng.randint(1, 28)
            hour = rng.randint(5, 23)
            minute = rng.randint(0, 59)
            dep = hour * 100 + minute
            w.writerow([2013, month, day, dep, dep, rng.randint(-30, 300), dep, dep,
                        rng.randint(-60, 300), rng.choice(carriers), rng.randint(1, 8500),
                        "N%05d" % rng.randint(0, 4000), rng.choice(["EWR", "JFK", "LGA"]),
                        rng.choice(airports), rng.randint(20, 700), rng.randint(17, 4983), hour,
                        minute, "2013-%02d-%02dT%02d:00:00Z" % (month, day, hour)])


SQLITE_CHILD = r"""
import csv, sqlite3, sys, time, tomllib, resource
schema_path, csv_path, db = sys.argv[1:4]
schema = tomllib.load(open(schema_path, "rb"))
fields = list(schema["fields"])
types = {"integer": "INTEGER", "float": "REAL"}
start = time.perf_counter()
con = sqlite3.connect(db)
cols = ", ".join(f'"{f}" {types.get(schema["fields"][f].get("type"), "TEXT")}' for f in fields)
con.execute(f"CREATE TABLE t ({cols})")
nulls = set(schema.get("nulls", []))
with open(csv_path, newline="") as fh:
    r = csv.DictReader(fh)
    rows = ([None if row[f] in nulls else row[f] for f in fields] for row in r)
    con.executemany(f"INSERT INTO t VALUES ({', '.join('?' * len(fields))})", rows)
indexed = [f for f in fields if schema["fields"][f].get("index")]
for f in indexed:
    con.execute(f'CREATE INDEX "i_{f}" ON t("{f}")')
con.commit()
con.close()
print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, len(indexed))
"""


def timed(cmd, env):
    """Runs cmd under GNU time; returns (seconds, peak bytes, stderr)."""
    start = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    peak = 0
    for line in p.stderr.splitlines():
        if "Maximum resident set size" in line:
            peak = int(line.split(":")[1]) * 1024
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr}")
    return wall, peak, p.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sesame", default="target/release/sesame")
    ap.add_argument("--schema", default="examples/flights.toml")
    ap.add_argument("--csv", default="data/nycflights13/flights.csv")
    ap.add_argument("--generate", type=int, default=0)
    ap.add_argument("--keep", default=None, help="keep the profile and files in DIR")
    ap.add_argument("--no-sqlite", action="store_true")
    args = ap.parse_args()

    work = args.keep or tempfile.mkdtemp(prefix="sesame-import-")
    os.makedirs(work, exist_ok=True)
    csv_path = args.csv
    if args.generate:
        csv_path = os.path.join(work, "generated.csv")
        t = time.perf_counter()
        generate(csv_path, args.generate)
        print(f"generated {args.generate} rows, {os.path.getsize(csv_path) / 1e6:.1f} MB "
              f"in {time.perf_counter() - t:.1f} s")
    rows = sum(1 for _ in open(csv_path, "rb")) - 1
    csv_bytes = os.path.getsize(csv_path)

    env = dict(os.environ, SESAME_PASSPHRASE="bench import", SESAME_KDF="fast")
    env.pop("SESAME_HOME", None)
    profile = os.path.join(work, "profile")
    shutil.rmtree(profile, ignore_errors=True)
    subprocess.run([args.sesame, "init", "--dir", profile], env=env, check=True,
                   capture_output=True)
    subprocess.run([args.sesame, "--dir", profile, "table", "create", "t", "--schema",
                    args.schema], env=env, check=True, capture_output=True)
    before = du(profile)
    s_wall, s_peak, _ = timed([args.sesame, "--dir", profile, "import", "t", csv_path], env)
    s_bytes = du(profile) - before
    print(f"sesame import: {rows} rows ({csv_bytes / 1e6:.1f} MB CSV) in {s_wall:.2f} s "
          f"({rows / s_wall:,.0f} rows/s), peak {s_peak / 1e6:.0f} MB, profile +{s_bytes / 1e6:.1f} MB")

    shown = subprocess.run([args.sesame, "--dir", profile, "table", "show", "t", "--space"],
                           env=env, capture_output=True, text=True)
    if shown.returncode == 0 and "Where the bytes go" in shown.stdout:
        print(shown.stdout[shown.stdout.index("Where the bytes go"):].rstrip())

    if args.no_sqlite:
        return
    db = os.path.join(work, "baseline.sqlite")
    if os.path.exists(db):
        os.remove(db)
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", SQLITE_CHILD, args.schema, csv_path, db],
                         capture_output=True, text=True, check=True).stdout.split()
    q_wall = time.perf_counter() - start
    q_inner, q_peak, indexes = float(out[0]), int(out[1]), int(out[2])
    q_bytes = os.path.getsize(db)
    print(f"sqlite (python, {indexes} indexes): {q_wall:.2f} s ({q_inner:.2f} s inside), "
          f"peak {q_peak / 1e6:.0f} MB, file {q_bytes / 1e6:.1f} MB")
    print(f"ratio: time {s_wall / q_wall:.1f}x, space {s_bytes / q_bytes:.1f}x, "
          f"peak memory {s_peak / max(q_peak, 1):.1f}x")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
