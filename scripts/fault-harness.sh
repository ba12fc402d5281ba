#!/usr/bin/env bash
# The long run of the fault-injection harness (crates/sesame-cli/tests/faults.rs):
# every keyword scheme the CLI can hold, embedded and bound to a server, for
# several seeds in a row until the time is up; prints each run's totals.
#
#   scripts/fault-harness.sh [--minutes N] [--seed S] [--rounds R] [--schemes a,b] [--redis]
#
# --redis: each round also runs the Redis Cluster fault harness
# (crates/sesame-server/tests/redis_cluster.rs, writes_resume_...: SIGKILL
# of a master, of a replica, of two nodes of different shards, SIGSTOP of a
# master, on a throwaway cluster; needs redis-server) and prints its times.
#
# Debug build (the test profile): what CI runs, with more rounds and seeds.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=10
seed=1
rounds=8
schemes=fast,uedsse,simple,aura,sda,sdd,janus-pp,suise,suise2,kpr12,pibas,2lev
redis=0
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --schemes) schemes=$2; shift 2 ;;
        --redis) redis=1; shift ;;
        *) echo "usage: $0 [--minutes N] [--seed S] [--rounds R] [--schemes a,b] [--redis]" >&2; exit 2 ;;
    esac
done

cargo test -q -p sesame-cli --test faults --no-run
if [ "$redis" = 1 ]; then
    cargo test -q -p sesame-server --test redis_cluster --no-run
fi
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
    if [ "$redis" = 1 ]; then
        if out=$(SESAME_TEST_REDIS_CLUSTER_REQUIRE=1 cargo test -q -p sesame-server \
            --test redis_cluster writes_resume -- --nocapture 2>&1); then
            grep -oE "fault harness: .*" <<<"$out"
        else
            status=1
            grep -E "fault harness|panicked" <<<"$out" | head -20
        fi
    fi
    seed=$((seed + 1))
done
exit $status
