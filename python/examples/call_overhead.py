"""Benchmark only: what a Python call adds to the Rust call it makes.

Times, in one run, `Index.add` (a FAST update of one keyword) and
`ore.Scheme.compare` (Lewi-Wu, 32-bit values, 8-bit blocks) from Python,
and the same Rust calls timed in Rust (`_rust_call_costs`, a
benchmark-only hook of the extension); prints both and the difference per
call. Build the extension in release mode first (`maturin develop
--release`). Run: python examples/call_overhead.py [N]
"""

import sys
import time

import sesame
from sesame import _sesame

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000

for trial in range(3):
    ix = sesame.Index.create("fast")
    words = ["w"]
    start = time.perf_counter_ns()
    for doc in range(n):
        ix.add(doc, words)
    py_update = (time.perf_counter_ns() - start) / n

    s = sesame.ore.Scheme("lewi-wu", bits=32, block=8)
    a, b = s.encrypt(3), s.encrypt(9)
    start = time.perf_counter_ns()
    for _ in range(n):
        s.compare(a, b)
    py_compare = (time.perf_counter_ns() - start) / n

    rust_update, rust_compare = _sesame._rust_call_costs(n)
    print(
        f"trial {trial}: FAST update {py_update:.0f} ns from Python, {rust_update:.0f} ns in Rust "
        f"(+{py_update - rust_update:.0f} ns); Lewi-Wu compare {py_compare:.0f} ns from Python, "
        f"{rust_compare:.0f} ns in Rust (+{py_compare - rust_compare:.0f} ns)"
    )
