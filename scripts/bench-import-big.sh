#!/usr/bin/env bash
# The large-file memory check of an import (not run in CI): a generated
# CSV of SIZE (default 2G, about 21 million rows in the columns of
# examples/flights.toml, scripts/gen-table-csv.py) imported into a fresh
# embedded profile by the release binary at `nice -n 10`, under
# `/usr/bin/time -v`. Reports the wall time, the peak resident set, rows
# per second and the profile's size; the resident set, the profile's
# size and the progress bar's count are sampled every 30 s (SAMPLE_S) into
# DIR/samples.tsv (seconds, resident MB, profile MB, rows imported).
#
#   scripts/bench-import-big.sh [SIZE] [DIR]
#
# Environment: SESAME (the binary; target/release/sesame), LIMIT_S (stop
# the import after that many seconds; none), MAX_PROFILE_GB (stop it when
# the profile holds that many GB: a 2 GB CSV makes a profile of tens of
# GB; 20), KEEP=1 (keep DIR; it is deleted otherwise, the CSV included).
# A stopped import is killed (SIGKILL: an import is exactly once under
# it) and reported with the rows imported by then.
set -euo pipefail

SIZE=${1:-2G}
DIR=${2:-$(mktemp -d /tmp/sesame-import-big.XXXXXX)}
BIN=$(realpath "${SESAME:-target/release/sesame}")
LIMIT_S=${LIMIT_S:-0}
MAX_PROFILE_GB=${MAX_PROFILE_GB:-20}
SCRIPTS=$(dirname "$(realpath "$0")")
SCHEMA=$(realpath "$SCRIPTS/../examples/flights.toml")
mkdir -p "$DIR"
CSV=$DIR/generated.csv
PROFILE=$DIR/profile

cleanup() {
    if [ "${KEEP:-0}" != 1 ]; then rm -rf "$DIR"; fi
}
trap cleanup EXIT

if [ ! -s "$CSV" ]; then
    nice -n 10 python3 "$SCRIPTS/gen-table-csv.py" "$SIZE" "$CSV"
fi
ROWS=$(($(wc -l < "$CSV") - 1))
CSV_BYTES=$(stat -c %s "$CSV")

export SESAME_PASSPHRASE="bench import" SESAME_KDF=fast
unset SESAME_HOME
rm -rf "$PROFILE"
"$BIN" init --dir "$PROFILE" > /dev/null
"$BIN" --dir "$PROFILE" table create t --schema "$SCHEMA" > /dev/null
BEFORE=$(du -sb "$PROFILE" | cut -f1)

# The import on a terminal (script(1)), so that its progress bar, and
# with it the rows imported, is written to DIR/progress.log.
START=$(date +%s)
script -qfec "nice -n 10 /usr/bin/time -v -o '$DIR/time.txt' '$BIN' --dir '$PROFILE' import t '$CSV'" \
    "$DIR/progress.log" > /dev/null &
RUNNER=$!
rows_done() {
    tr '\r' '\n' < "$DIR/progress.log" | grep -ao 'imported \[[^]]*\] [0-9]*' | tail -1 |
        grep -o '[0-9]*$' || echo 0
}
printf 'seconds\trss_mb\tprofile_mb\trows\n' > "$DIR/samples.tsv"
STOPPED=""
PID=""
while kill -0 "$RUNNER" 2> /dev/null; do
    sleep "${SAMPLE_S:-30}"
    [ -n "$PID" ] || PID=$(pgrep -f -- "--dir $PROFILE import t" | while read -r p; do
        [ "$(readlink "/proc/$p/exe" 2> /dev/null)" = "$BIN" ] && echo "$p"; done | head -1 || true)
    [ -n "$PID" ] || continue
    NOW=$(($(date +%s) - START))
    RSS=$(awk '/^VmRSS:/ {print int($2 / 1024)}' "/proc/$PID/status" 2> /dev/null || echo 0)
    PMB=$(($(du -sb "$PROFILE" | cut -f1) / 1000000))
    printf '%s\t%s\t%s\t%s\n' "$NOW" "$RSS" "$PMB" "$(rows_done)" >> "$DIR/samples.tsv"
    if { [ "$LIMIT_S" -gt 0 ] && [ "$NOW" -ge "$LIMIT_S" ]; } ||
        [ "$PMB" -ge $((MAX_PROFILE_GB * 1000)) ]; then
        STOPPED="after ${NOW} s, profile ${PMB} MB"
        kill -KILL "$PID" 2> /dev/null || true
        break
    fi
done
wait "$RUNNER" || true
WALL=$(($(date +%s) - START))
PEAK_KB=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$DIR/time.txt")
ELAPSED=$(awk -F'): ' '/Elapsed \(wall clock\)/ {print $2}' "$DIR/time.txt")
AFTER=$(du -sb "$PROFILE" | cut -f1)
DONE=$ROWS
if [ -n "$STOPPED" ]; then DONE=$(rows_done); fi
echo "csv: $ROWS rows, $CSV_BYTES bytes"
if [ -n "$STOPPED" ]; then echo "stopped $STOPPED: $DONE of $ROWS rows imported"; fi
echo "sesame import: $ELAPSED wall ($WALL s), $((DONE / (WALL > 0 ? WALL : 1))) rows/s"
echo "peak resident set: $((PEAK_KB / 1024)) MiB ($PEAK_KB kB, /usr/bin/time -v)"
echo "profile: +$(((AFTER - BEFORE) / 1000000)) MB"
echo "samples (s, resident MB, profile MB, rows): $DIR/samples.tsv"
cat "$DIR/samples.tsv"
