#!/usr/bin/env bash
# The long run of the fault-injection harness (crates/sesame-cli/tests/faults.rs):
# every keyword scheme the CLI can hold, embedded and bound to a server, for
# several seeds in a row until the time is up; prints each run's totals.
#
#   scripts/fault-harness.sh [--minutes N] [--seed S] [--rounds R] [--schemes a,b]
#
# Debug build (the test profile): what CI runs, with more rounds and seeds.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=10
seed=1
rounds=8
schemes=fast,uedsse,simple,aura,sda,sdd,janus-pp,suise,suise2,kpr12,pibas,2lev
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --schemes) schemes=$2; shift 2 ;;
        *) echo "usage: $0 [--minutes N] [--seed S] [--rounds R] [--schemes a,b]" >&2; exit 2 ;;
    esac
done

cargo test -q -p sesame-cli --test faults --no-run
end=$(( $(date +%s) + minutes * 60 ))
status=0
while [ "$(date +%s)" -lt "$end" ]; do
    if out=$(SESAME_FAULT_SEED=$seed SESAME_FAULT_ROUNDS=$rounds SESAME_FAULT_SCHEMES=$schemes \
        cargo test -q -p sesame-cli --test faults -- --nocapture --test-threads 1 2>&1); then
        grep -oE "fault harness .*" <<<"$out"
    else
        status=1
        grep -E "fault harness|panicked|SESAME_FAULT_SEED|round" <<<"$out" | head -40
    fi
    seed=$((seed + 1))
done
exit $status
