#!/usr/bin/env python3
"""Runs every Rust test of the workspace: what `cargo test --workspace` runs,
in lanes.

    scripts/run-tests.py [--jobs N] [-p PACKAGE ...]

`cargo test --workspace` builds every test binary, then runs them one after
another. Several of them spend most of their time waiting (a Redis Cluster
failing over, a killed server restarting, a client's timeout), so this runs
the same binaries, N at a time (default 2, or $SESAME_TEST_JOBS) and the
ones that mostly wait on a Redis Cluster in a lane of their own, the
slowest first, each from its package's folder as cargo does, then the doc
tests (`-p`: only those packages', as `cargo test -p`). Each binary's output is kept in target/test-logs/ and printed in
full when it fails; a summary lists every binary's time, slowest first, and
the times are kept (target/test-logs/times.json) to order the next run.
Exit status: 0 when every test passed, 1 otherwise.
"""

import argparse
import json
import os
import subprocess
import sys
import re
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "target" / "test-logs"
TIMES = LOGS / "times.json"
# Known to be long (waiting on processes and timeouts), started first when
# no earlier run's times are kept.
# (A fresh clone's run, 20m31s, started `scheme_suite`, 94 s, last of
# all: the other lane stood idle behind it.)
SLOW_FIRST = (
    "doc tests",
    "faults",
    "redis_cluster",
    "server",
    "table_kills",
    "every_scheme",
    "scheme_suite",
    "request_sizes",
    "master_key",
)
# Binaries that spend most of their time waiting on a Redis Cluster (its
# start, a killed node's failover: the server's took 89 s of which 13 s of
# CPU): they run one after another in a lane of their own, beside the N
# lanes that use the cores.
WAITING = ("redis_cluster",)

PASSED = re.compile(r"^test result: \w+\. (\d+) passed", re.M)


def build(packages):
    """Builds every test binary; returns (name, executable, package folder)."""
    cmd = ["cargo", "test", *selection(packages), "--no-run", "--message-format=json-render-diagnostics"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    found = []
    for line in proc.stdout:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg.get("profile", {}).get("test"):
            continue
        target = msg["target"]
        package = Path(msg["manifest_path"]).parent
        kind = target["kind"][0]
        label = f"{package.name}::{target['name']}" if kind != "lib" else f"{package.name} (lib)"
        found.append((label, msg["executable"], str(package)))
    if proc.wait() != 0:
        sys.exit("run-tests: the build failed")
    return found


def selection(packages):
    """Cargo's arguments for the packages to test (all of them by default)."""
    return [arg for p in packages for arg in ("-p", p)] or ["--workspace"]


def order(jobs):
    """Slowest first: by the last run's times, else the known slow ones."""
    try:
        last = json.loads(TIMES.read_text())
    except (OSError, ValueError):
        last = {}

    def key(job):
        label = job[0]
        if label in last:
            return -float(last[label])
        name = label.split("::")[-1]
        return -1e6 if name in SLOW_FIRST else 0.0

    return sorted(jobs, key=key)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("SESAME_TEST_JOBS", "2")))
    parser.add_argument("-p", "--package", action="append", default=[])
    args = parser.parse_args()

    # The doc tests are mostly compiling: they go beside the binaries that
    # mostly wait.
    jobs = order(build(args.package) + [("doc tests", None, str(ROOT))])
    LOGS.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    waiting = [job for job in jobs if job[0].split("::")[-1] in WAITING]
    pending = [job for job in jobs if job not in waiting]
    results = {}

    def run(job):
        label, exe, cwd = job
        log = LOGS / (label.replace("::", "-").replace(" ", "_").replace("(", "").replace(")", "") + ".log")
        cmd = [exe] if exe else ["cargo", "test", *selection(args.package), "--doc"]
        start = time.monotonic()
        with open(log, "w") as out:
            code = subprocess.call(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        took = time.monotonic() - start
        text = log.read_text(errors="replace")
        passed = sum(int(n) for n in PASSED.findall(text))
        with lock:
            results[label] = (code, took)
            status = "ok  " if code == 0 else "FAIL"
            print(f"{status} {label}: {passed} passed, {took:.1f} s", flush=True)
            if code != 0:
                print(text, flush=True)

    def worker(queue):
        while True:
            with lock:
                if not queue:
                    return
                job = queue.pop(0)
            run(job)

    threads = [threading.Thread(target=worker, args=(pending,)) for _ in range(max(1, args.jobs))]
    threads.append(threading.Thread(target=worker, args=(waiting,)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    try:
        kept = json.loads(TIMES.read_text())
    except (OSError, ValueError):
        kept = {}
    kept.update({k: round(v[1], 1) for k, v in results.items()})
    TIMES.write_text(json.dumps(kept, indent=1, sort_keys=True))
    failed = [k for k, (code, _) in results.items() if code != 0]
    print("\nslowest test binaries:")
    for label, (_, took) in sorted(results.items(), key=lambda kv: -kv[1][1])[:10]:
        print(f"  {took:7.1f} s  {label}")
    if failed:
        print(f"\nrun-tests: {len(failed)} of {len(results)} failed: {', '.join(failed)}")
        return 1
    print(f"\nrun-tests: all {len(results)} test binaries passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
