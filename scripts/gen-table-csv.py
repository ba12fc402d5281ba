#!/usr/bin/env python3
"""Writes a generated CSV in the columns of examples/flights.toml, of a
given size, deterministically (a fixed seed: the same bytes every time).

    scripts/gen-table-csv.py SIZE OUT.csv

SIZE is bytes with an optional suffix (2G = 2 x 10^9 bytes, 500M, 10k)
or a number of rows followed by `rows` (200000rows). The rows are
those of `scripts/bench-import.py --generate` (about 95 bytes a row:
2G is about 21 million rows), written one at a time: the generator holds
one row, whatever the size. Prints the rows and bytes written.
"""

import importlib.util
import os
import sys
import time


def bench_import():
    """scripts/bench-import.py as a module (its generator)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench-import.py")
    spec = importlib.util.spec_from_file_location("bench_import", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parse_size(text):
    """(rows, max_bytes) of SIZE."""
    t = text.strip().lower()
    if t.endswith("rows"):
        return int(t[:-4]), None
    scale = {"k": 10**3, "m": 10**6, "g": 10**9}
    if t and t[-1] in scale:
        return 0, int(float(t[:-1]) * scale[t[-1]])
    return 0, int(t)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows, max_bytes = parse_size(sys.argv[1])
    out = sys.argv[2]
    start = time.perf_counter()
    n = bench_import().generate(out, rows, max_bytes=max_bytes)
    print(f"{n} rows, {os.path.getsize(out)} bytes in {time.perf_counter() - start:.1f} s -> {out}")


if __name__ == "__main__":
    main()
