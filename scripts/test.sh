#!/usr/bin/env bash
# The project's tests: every crate's tests, the Python package built in a
# fresh virtual environment and its pytest suite (python/tests), then the
# benchmark site checked in headless Chromium (scripts/check-site.sh: a
# --quick run of every experiment; skipped with a note without Chromium
# unless SESAME_CHECK_SITE_REQUIRE=1).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace

VENV=$(mktemp -d /tmp/sesame-py.XXXXXX)
trap 'rm -rf "$VENV"' EXIT
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
"$VENV/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.5,<2" pytest pandas
# Build with the workspace's target folder, so that the crates compiled by
# the tests above are reused.
(cd python && VIRTUAL_ENV="$VENV" PATH="$VENV/bin:$PATH" CARGO_TARGET_DIR="$PWD/../target" maturin develop --quiet)
"$VENV/bin/pytest" -q python/tests

scripts/check-site.sh
