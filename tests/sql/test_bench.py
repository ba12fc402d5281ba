"""`sesame bench sql --tiny` runs both servers through the same client
(psycopg 3, with this interpreter) and reports each figure of each (the
quick mode of the benchmark)."""

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import have_module, require


def test_bench_sql_tiny(server):
    if server.kind != "sesame":
        pytest.skip("sesame sql only")
    have_pg = bool(
        os.environ.get("SESAME_TEST_POSTGRES")
        or shutil.which("initdb")
        or glob.glob("/usr/lib/postgresql/*/bin/initdb")
    )
    require(have_pg, "PostgreSQL is not installed and SESAME_TEST_POSTGRES is unset")
    require(have_module("psycopg"), "psycopg is not installed (pip install 'psycopg[binary]')")
    out = tempfile.mkdtemp(prefix="sesame-bench-sql-test.")
    try:
        r = subprocess.run(
            [server.binary, "bench", "sql", "--tiny", "--out", out, "--data", os.path.join(out, "no-data")],
            capture_output=True, text=True, timeout=300,
            env=dict(os.environ, SESAME_BENCH_PYTHON=sys.executable),
        )
        assert r.returncode == 0, f"bench sql failed:\n{r.stdout}\n{r.stderr}"
        assert "point equality p50" in r.stdout, r.stdout
        report = json.load(open(os.path.join(out, "sql", "sql.json")))
        assert report["rows"] == 2000
        assert report["client"].startswith("psycopg 3"), report["client"]
        for side in ("sesame", "postgresql"):
            f = report[side]
            assert f["copy_rows"] == 2000, f
            assert f["copy_s"] > 0 and f["point_p50_ms"] > 0 and f["range_p50_ms"] > 0, f
            assert f["eq20k_p50_ms"] > 0 and f["eq20k_rows"] > 0, f
            # The Rust driver's figures beside psycopg's.
            assert len(f["rust_p50_ms"]) == 3 and min(f["rust_p50_ms"]) > 0, f
        for k in ("range_rows_mean", "eq20k_rows"):
            assert report["sesame"][k] == report["postgresql"][k], k
    finally:
        shutil.rmtree(out, ignore_errors=True)
