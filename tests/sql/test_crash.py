"""A crash during COPY: `sesame sql` is killed (SIGKILL) while psycopg
sends a COPY, started again, and the client runs the same COPY again:
every row is there once, as SQLite has them."""

import time

from conftest import have_module, require
from scenario import check, csv_text, make_rows, step

ROWS = 2000


def connect(server, deadline_s=60):
    import psycopg

    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return psycopg.connect(**server.conninfo(), autocommit=True, connect_timeout=10)
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_sigkill_during_copy_then_rerun(server):
    require(have_module("psycopg"), "psycopg is not installed (pip install 'psycopg[binary]')")
    import psycopg

    t = server.table("t_crash")
    rows = make_rows(ROWS, seed=7)
    data = csv_text(rows)
    lines = data.splitlines(keepends=True)
    sql = f"COPY {t} FROM STDIN (FORMAT csv, HEADER)"

    conn = connect(server)
    interrupted = False
    try:
        with conn.cursor() as cur:
            with cur.copy(sql) as copy:
                # Half the rows, in pieces, then the crash.
                half = len(lines) // 2
                for i in range(0, half, 100):
                    copy.write("".join(lines[i : min(i + 100, half)]))
                if server.kind == "sesame":
                    server.kill()
                else:
                    # PostgreSQL: the backend killed from another session.
                    with psycopg.connect(**server.conninfo(), autocommit=True) as other:
                        other.execute("SELECT pg_terminate_backend(%s)", [conn.info.backend_pid])
                for i in range(half, len(lines), 100):
                    copy.write("".join(lines[i : i + 100]))
    except psycopg.Error:
        interrupted = True
    finally:
        conn.close()
    assert interrupted, "the COPY completed although the server was killed"

    server.start()
    with connect(server) as conn:
        with conn.cursor() as cur:
            with cur.copy(sql) as copy:
                copy.write(data)
            assert cur.rowcount == ROWS, f"the COPY run again reports {cur.rowcount} rows"
        steps = [
            step("query", f"SELECT count(*) FROM {t}", ordered=True),
            step("query", f"SELECT * FROM {t} ORDER BY id", ordered=True),
            step("query", f"SELECT count(*) FROM {t} WHERE qty >= 0", ordered=True),
        ]
        from test_clients import run_psycopg

        results = run_psycopg(conn, steps)
    oracle_steps = [step("copy", sql, rows=rows)] + steps
    check(t, oracle_steps, [{"rowcount": ROWS}] + results)
