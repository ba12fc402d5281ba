#!/usr/bin/env bash
# Builds the indexing corpus of docs/performance.md ("`sesame add` end to
# end"): the Python standard library's sources and the Debian packages'
# copyright files of this machine, copied into DIR (default
# /tmp/sesame-ingest) as plain files, so that `sesame add DIR` indexes the
# same kind of text on any Debian-like machine.
#
#   scripts/build-corpus.sh [DIR]
#
# Python 3 (any version; `python3-minimal` is enough) is installed when
# missing and the script runs as root. The corpus is what the machine has:
# its size is printed (files, bytes) with the Python version, so that a
# measurement can say which corpus it used.
set -euo pipefail
out=${1:-/tmp/sesame-ingest}

if ! command -v python3 >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "build-corpus: installing python3" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 >/dev/null
    else
        echo "build-corpus: python3 is needed (its standard library is the corpus)" >&2
        exit 1
    fi
fi
stdlib=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
version=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ ! -d "$stdlib" ]; then
    echo "build-corpus: no Python standard library at $stdlib" >&2
    exit 1
fi
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
    echo "build-corpus: $out exists and is not empty; give another directory" >&2
    exit 2
fi
mkdir -p "$out/py" "$out/copyright"

# The standard library's .py files, tests and vendored packages left out
# (they repeat the rest), keeping their relative paths.
(cd "$stdlib" && find . -name '*.py' -type f \
    -not -path './test/*' -not -path './*/tests/*' -not -path './site-packages/*' \
    -not -path './dist-packages/*' -not -path './idlelib/idle_test/*' -print0) |
    while IFS= read -r -d '' f; do
        mkdir -p "$out/py/$(dirname "$f")"
        cp "$stdlib/$f" "$out/py/$f"
    done

# One copyright file per installed package.
for f in /usr/share/doc/*/copyright; do
    [ -f "$f" ] || continue
    pkg=$(basename "$(dirname "$f")")
    cp "$f" "$out/copyright/$pkg.txt"
done

files=$(find "$out" -type f | wc -l)
bytes=$(du -sb "$out" | cut -f1)
echo "corpus in $out: $files files, $bytes bytes (Python $version standard library, $(ls "$out/copyright" | wc -l) copyright files)"
