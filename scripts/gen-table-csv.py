#!/usr/bin/env python3
"""Writes a generated CSV in the columns of examples/flights.toml, of a
given size, deterministically (a fixed seed: the same bytes every time).

    scripts/gen-table-csv.py SIZE OUT.csv [--repeat N]

SIZE is bytes with an optional suffix (2G = 2 x 10^9 bytes, 500M, 10k)
or a number of rows followed by `rows` (200000rows). The rows are
those of `scripts/bench-import.py --generate` (about 95 bytes a row:
2G is about 21 million rows), written one at a time: the generator holds
one row, whatever the size. Prints the rows and bytes written.

With `--repeat N`, every row is written N times (SIZE counts the rows
or bytes written, repeats included): the rows are generated a block of
10,000 at a time, and each block's N copies written shuffled together,
so that the repeats of a row are scattered over up to N x 10,000 rows
(for a table without a key, whose records are named after their values
and repeat index). It holds one block's copies, whatever the size.
"""

import importlib.util
import os
import random
import sys
import tempfile
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


BLOCK = 10_000


def repeated(out, rows, max_bytes, n):
    """Writes the rows of `generate`, each `n` times (see above); returns
    the rows written."""
    base_rows = (rows + n - 1) // n if rows else 0
    base_bytes = (max_bytes + n - 1) // n if max_bytes is not None else None
    rng = random.Random(39)
    written = 0
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(out))) as tmp:
        base = os.path.join(tmp, "base.csv")
        bench_import().generate(base, base_rows, max_bytes=base_bytes)
        with open(base, newline="") as src, open(out, "w", newline="") as dst:
            dst.write(src.readline())
            while True:
                block = [line for _, line in zip(range(BLOCK), src)]
                if not block:
                    break
                copies = block * n
                rng.shuffle(copies)
                for line in copies:
                    if rows and written >= rows:
                        return written
                    dst.write(line)
                    written += 1
    return written


def main():
    args = sys.argv[1:]
    n = 1
    if "--repeat" in args:
        i = args.index("--repeat")
        try:
            n = int(args[i + 1])
        except (IndexError, ValueError):
            sys.exit("--repeat takes a whole number of copies (2 or more)\n" + __doc__)
        del args[i : i + 2]
    if len(args) != 2 or n < 1:
        sys.exit(__doc__)
    rows, max_bytes = parse_size(args[0])
    out = args[1]
    start = time.perf_counter()
    if n > 1:
        n = repeated(out, rows, max_bytes, n)
    else:
        n = bench_import().generate(out, rows, max_bytes=max_bytes)
    print(f"{n} rows, {os.path.getsize(out)} bytes in {time.perf_counter() - start:.1f} s -> {out}")


if __name__ == "__main__":
    main()
