#!/usr/bin/env bash
# The project's tests: every crate's tests (scripts/run-tests.py: the test
# binaries of `cargo test --workspace`, two at a time beside a lane for
# the ones that mostly wait on a Redis Cluster, then the doc tests),
# the Python package built in a fresh virtual environment and its pytest
# suite (python/tests), then the benchmark site checked in headless Chromium
# (scripts/check-site.sh: a --tiny run of every experiment with the test
# build's `sesame`, every page and chart at the harness's test scale; skipped with a note without Chromium unless
# SESAME_CHECK_SITE_REQUIRE=1). Between the two, the external-client suite
# of `sesame sql` (tests/sql: psql, psycopg 3, SQLAlchemy with pandas and
# node-postgres against SQLite as the oracle; a missing tool skips with a
# note unless SESAME_SQL_CLIENTS_REQUIRE=1).
#
# What waits on nothing runs beside what needs the cores: the virtual
# environment's packages install while the tests build, and the site's
# bench run goes on while the Python package builds and its tests run.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=$(mktemp -d /tmp/sesame-py.XXXXXX)
SITE_LOG=$(mktemp /tmp/sesame-site.XXXXXX)
NPM_LOG=$(mktemp /tmp/sesame-npm.XXXXXX)
PIP= SITE= NPM=
cleanup() {
    # A step that failed leaves nothing running behind it.
    for job in $PIP $SITE $NPM; do kill "$job" 2>/dev/null || true; done
    rm -rf "$VENV" "$SITE_LOG" "$NPM_LOG"
}
trap cleanup EXIT
if ! python3 -m venv "$VENV" 2>/dev/null; then
    # Debian's python3 ships venv separately.
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "scripts/test.sh: installing python3-venv" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
        python3 -m venv "$VENV"
    else
        echo "scripts/test.sh: python3 -m venv failed; install python3-venv" >&2
        exit 1
    fi
fi
"$VENV/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.5,<2" pytest pandas \
    "psycopg[binary]>=3.1,<4" "sqlalchemy>=2,<3" \
    >"$VENV/pip.log" 2>&1 &
PIP=$!
# node-postgres for tests/sql (into tests/sql/node_modules, ignored by git).
if command -v npm >/dev/null 2>&1; then
    (cd tests/sql && npm install --no-audit --no-fund --no-package-lock --silent) >"$NPM_LOG" 2>&1 &
    NPM=$!
fi

python3 scripts/run-tests.py

SESAME_BIN="$PWD/target/debug/sesame" SESAME_CHECK_SITE_SCALE=tiny scripts/check-site.sh >"$SITE_LOG" 2>&1 &
SITE=$!

wait "$PIP" || { cat "$VENV/pip.log" >&2; echo "scripts/test.sh: pip install failed" >&2; exit 1; }
# Build with the workspace's target folder, so that the crates compiled by
# the tests above are reused.
(cd python && VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" CARGO_TARGET_DIR="$PWD/../target" maturin develop --quiet)
"$VENV/bin/pytest" -q python/tests

# `sesame sql` from the SQL clients people use (tests/sql; about half a
# minute): the debug `sesame` the tests above built.
if [ -n "$NPM" ] && ! wait "$NPM"; then
    cat "$NPM_LOG" >&2
    echo "scripts/test.sh: npm install in tests/sql failed (the node-postgres test will say so)" >&2
fi
# Bounded: a server that stops answering fails the step, not CI's clock.
SESAME_BIN="$PWD/target/debug/sesame" timeout 600 "$VENV/bin/pytest" -q -p no:cacheprovider tests/sql

site=0
wait "$SITE" || site=$?
cat "$SITE_LOG"
exit "$site"
