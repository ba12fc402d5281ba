"""Never a silent fallback: a predicate no index answers is refused with
SQLSTATE 0A000 naming the column; after `SET sesame.allow_scan = on` the
same statement answers (as SQLite does) and EXPLAIN says it scans; so
does IS NULL on that field (IS NULL on an equality field is answered by
its null keyword, scan or not)."""

import pytest

from conftest import have_module, require
from scenario import check, csv_text, make_rows, step


def test_unindexed_predicate_is_refused_until_scan_is_allowed(server):
    require(have_module("psycopg"), "psycopg is not installed (pip install 'psycopg[binary]')")
    if server.kind != "sesame":
        pytest.skip("sesame sql only: PostgreSQL scans")
    import psycopg

    from test_clients import run_psycopg

    t = server.table("t_scan")
    rows = make_rows(40, seed=9)
    unindexed = f"SELECT id, note FROM {t} WHERE note = 'gift' ORDER BY id"
    with psycopg.connect(**server.conninfo(), autocommit=True, connect_timeout=20) as conn:
        with conn.cursor() as cur:
            with cur.copy(f"COPY {t} FROM STDIN (FORMAT csv, HEADER)") as copy:
                copy.write(csv_text(rows))
            with pytest.raises(psycopg.Error) as refused:
                cur.execute(unindexed)
            assert refused.value.sqlstate == "0A000", f"SQLSTATE {refused.value.sqlstate}: {refused.value}"
            assert "note" in str(refused.value), f"the error does not name the column: {refused.value}"
            # The connection stays usable after the refusal.
            cur.execute(f"SELECT count(*) FROM {t} WHERE city = 'Oslo'")
            cur.fetchall()

            cur.execute("SET sesame.allow_scan = on")
            cur.execute(f"EXPLAIN {unindexed}")
            plan = "\n".join(str(r[0]) for r in cur.fetchall())
            assert "scan" in plan.lower(), f"EXPLAIN does not say the statement scans:\n{plan}"
        steps = [
            step("query", unindexed, ordered=True),
            step("query", f"SELECT id, city FROM {t} WHERE city IS NULL ORDER BY id", ordered=True),
            step("query", f"SELECT count(*) FROM {t} WHERE note IS NULL AND qty < 50", ordered=True),
        ]
        results = run_psycopg(conn, steps)
    check(t, [step("copy", "", rows=rows)] + steps, [{"rowcount": len(rows)}] + results)
