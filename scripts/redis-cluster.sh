#!/usr/bin/env bash
# A throwaway Redis Cluster on loopback, for tests and trials:
# 3 masters and 3 replicas, AOF on, a short node timeout (2 s) so that a
# replica takes over from a dead master within seconds. With
# REDIS_CLUSTER_REPLICAS=2, two replicas per master (9 nodes): an
# acknowledged write then survives two faults in one shard
# (docs/scaling.md, "Writes after a node's death").
#
#   scripts/redis-cluster.sh start DIR [BASE_PORT]   # prints the store URL
#   scripts/redis-cluster.sh stop DIR                 # idempotent
#   scripts/redis-cluster.sh restart-node DIR PORT    # after a crash test
#
# Nodes listen on 127.0.0.1 ports BASE_PORT .. BASE_PORT+5 (default 7100;
# up to BASE_PORT+8 with two replicas per master),
# with their cluster bus 10000 above each. Each node keeps its data, log,
# nodes.conf and pid file in DIR/<port>/. `stop` ends exactly the processes
# whose pid files are in DIR. `start` installs redis-server (Debian's
# package) when it is missing and this runs as root.
#
# With REDIS_CLUSTER_OWNER_PID set, a watcher stops the cluster once that
# process has exited and removes DIR (tests use it so that no node
# outlives them).
#
# With REDIS_CLUSTER_TLS=1, every node speaks only TLS (clients, the
# cluster bus and replication), with a certificate for 127.0.0.1 from a
# throwaway CA made with openssl in DIR/tls/ (`ca.pem`; `other-ca.pem` is a
# second CA that signed nothing, for tests that a wrong CA is refused), and
# requires every client to show a certificate from that CA (mutual TLS:
# `client.pem` and `client.key`; `other-client.pem`/`.key` are signed by
# the other CA).
#
# The last line `start` prints is the seed URL for the Sesame store:
# redis-cluster://127.0.0.1:P1,127.0.0.1:P2,... (with TLS:
# rediss-cluster://127.0.0.1:P1,...?ca=DIR/tls/ca.pem&cert=DIR/tls/client.pem&key=DIR/tls/client.key)
set -euo pipefail

REPLICAS=${REDIS_CLUSTER_REPLICAS:-1}
case "$REPLICAS" in
    1 | 2) ;;
    *) echo "redis-cluster.sh: REDIS_CLUSTER_REPLICAS must be 1 or 2" >&2; exit 1 ;;
esac
NODES=$((3 * (1 + REPLICAS)))
NODE_TIMEOUT_MS=${REDIS_CLUSTER_NODE_TIMEOUT_MS:-2000}

die() {
    echo "redis-cluster.sh: $*" >&2
    exit 1
}

usage() {
    die "usage: $0 start DIR [BASE_PORT] | stop DIR | restart-node DIR PORT"
}

install_redis() {
    command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 && return
    echo "redis-cluster.sh: installing redis-server" >&2
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    elif command -v sudo >/dev/null 2>&1; then
        sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    else
        die "redis-server is not installed (apt-get install redis-server)"
    fi
    command -v redis-server >/dev/null 2>&1 || die "redis-server still missing after the install"
}

# Whether PID is alive and is a redis-server or this script's watcher.
ours() {
    local pid=$1
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -Eq 'redis-server|redis-cluster\.sh'
}

stop_cluster() {
    local dir=$1
    [ -d "$dir" ] || return 0
    local pids=() pidfile pid
    if [ -f "$dir/watcher.pid" ]; then
        pid=$(cat "$dir/watcher.pid" 2>/dev/null || true)
        # The watcher calls stop itself: it does not end itself.
        if [ -n "$pid" ] && [ "$pid" != "$$" ] && [ "$pid" != "${WATCHER_SELF:-}" ] && ours "$pid"; then
            kill "$pid" 2>/dev/null || true
        fi
        rm -f "$dir/watcher.pid"
    fi
    for pidfile in "$dir"/*/redis.pid; do
        [ -f "$pidfile" ] || continue
        pid=$(cat "$pidfile" 2>/dev/null || true)
        if ours "$pid"; then
            kill "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
    done
    # Up to 5 s for a clean exit, then SIGKILL.
    local i
    for i in $(seq 50); do
        local alive=0
        for pid in "${pids[@]}"; do
            if kill -0 "$pid" 2>/dev/null; then alive=1; fi
        done
        [ "$alive" = 0 ] && break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do
        if ours "$pid"; then kill -9 "$pid" 2>/dev/null || true; fi
    done
    rm -f "$dir"/*/redis.pid
}

# Whether the cluster in DIR speaks TLS (it has certificates).
tls_of() {
    [ -f "$1/tls/ca.pem" ]
}

# redis-cli for the cluster in DIR.
cli() {
    local dir=$1
    shift
    if tls_of "$dir"; then
        redis-cli --tls --cacert "$dir/tls/ca.pem" \
            --cert "$dir/tls/client.pem" --key "$dir/tls/client.key" "$@"
    else
        redis-cli "$@"
    fi
}

# A throwaway CA and a certificate for 127.0.0.1 in DIR/tls, and a second
# CA that signs nothing.
make_certs() {
    local t=$1/tls
    command -v openssl >/dev/null 2>&1 || die "openssl is needed for REDIS_CLUSTER_TLS=1"
    mkdir -p "$t"
    (
        cd "$t"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
            -subj /CN=sesame-redis-test-ca -keyout ca.key -out ca.pem 2>/dev/null
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
            -subj /CN=sesame-redis-other-ca -keyout other-ca.key -out other-ca.pem 2>/dev/null
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -subj /CN=127.0.0.1 -keyout server.key -out server.csr 2>/dev/null
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >san.ext
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
            -extfile san.ext -out server.crt 2>/dev/null
        for who in client:ca other-client:other-ca; do
            local name=${who%%:*} ca=${who#*:}
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
                -subj "/CN=sesame-$name" -keyout "$name.key" -out "$name.csr" 2>/dev/null
            printf 'extendedKeyUsage=clientAuth\n' >client.ext
            openssl x509 -req -in "$name.csr" -CA "$ca.pem" -CAkey "$ca.key" -CAcreateserial \
                -days 2 -extfile client.ext -out "$name.pem" 2>/dev/null
        done
        chmod 600 ca.key other-ca.key server.key client.key other-client.key
    ) || die "openssl could not make the test certificates"
}

# One node, with its data, log and cluster state in DIR/PORT.
start_node() {
    local dir=$1 p=$2
    local listen=(--port "$p")
    if tls_of "$dir"; then
        listen=(--port 0 --tls-port "$p" --tls-cluster yes --tls-replication yes
            --tls-cert-file "$dir/tls/server.crt" --tls-key-file "$dir/tls/server.key"
            --tls-ca-cert-file "$dir/tls/ca.pem" --tls-auth-clients yes)
    fi
    redis-server \
        "${listen[@]}" --bind 127.0.0.1 --protected-mode yes \
        --cluster-enabled yes --cluster-config-file "$dir/$p/nodes.conf" \
        --cluster-node-timeout "$NODE_TIMEOUT_MS" \
        --cluster-require-full-coverage no \
        --appendonly yes --appendfsync everysec --save '' \
        --dir "$dir/$p" --logfile "$dir/$p/redis.log" \
        --daemonize yes --pidfile "$dir/$p/redis.pid" >/dev/null
}

# Starts again a node of the cluster in DIR that has stopped (after a
# crash test): it rejoins from its nodes.conf and AOF, as a replica if
# another node took over its slots. A node that exits at start or does
# not answer within 15 s is started again, up to three times in all (a
# start can fail for a moment after a SIGKILL, e.g. while the port is
# still held); the error then quotes the end of its log.
restart_node() {
    local dir=$1 p=$2
    [ -f "$dir/$p/nodes.conf" ] || die "$dir/$p holds no node"
    local pid
    pid=$(cat "$dir/$p/redis.pid" 2>/dev/null || true)
    if ours "$pid"; then die "node $p is running (pid $pid)"; fi
    local attempt i
    for attempt in 1 2 3; do
        rm -f "$dir/$p/redis.pid"
        if start_node "$dir" "$p"; then
            for i in $(seq 150); do
                cli "$dir" -h 127.0.0.1 -p "$p" ping 2>/dev/null | grep -q PONG && return 0
                # Once the node wrote its pid file, a pid that is gone
                # means it exited: no need to wait for the rest.
                pid=$(cat "$dir/$p/redis.pid" 2>/dev/null || true)
                if [ -n "$pid" ] && ! ours "$pid"; then break; fi
                sleep 0.1
            done
        fi
        pid=$(cat "$dir/$p/redis.pid" 2>/dev/null || true)
        if ours "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
        echo "redis-cluster.sh: node $p did not answer after start $attempt of 3" >&2
        sleep 1
    done
    die "node $p does not answer after three starts; the end of $dir/$p/redis.log:
$(tail -n 20 "$dir/$p/redis.log" 2>/dev/null)"
}

start_cluster() {
    local dir=$1 base=$2
    case "$base" in
        '' | *[!0-9]*) die "BASE_PORT must be a number" ;;
    esac
    if [ "$base" -lt 1024 ] || [ "$base" -gt $((55535 - NODES)) ]; then
        die "BASE_PORT must be between 1024 and $((55535 - NODES)) (the cluster bus is 10000 above)"
    fi
    install_redis
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if ls "$dir"/*/redis.pid >/dev/null 2>&1; then
        die "$dir already holds a running cluster; stop it first"
    fi
    rm -rf "${dir:?}/tls"
    if [ "${REDIS_CLUSTER_TLS:-0}" = 1 ]; then
        make_certs "$dir"
    fi
    local ports=() p i
    for i in $(seq 0 $((NODES - 1))); do
        ports+=($((base + i)))
    done
    for p in "${ports[@]}"; do
        rm -rf "${dir:?}/$p"
        mkdir -p "$dir/$p"
        start_node "$dir" "$p" || { stop_cluster "$dir"; die "redis-server on port $p did not start (see $dir/$p/redis.log)"; }
    done
    for p in "${ports[@]}"; do
        for i in $(seq 100); do
            cli "$dir" -h 127.0.0.1 -p "$p" ping 2>/dev/null | grep -q PONG && break
            if [ "$i" = 100 ]; then
                stop_cluster "$dir"
                die "node $p does not answer (see $dir/$p/redis.log)"
            fi
            sleep 0.1
        done
    done
    local seeds=()
    for p in "${ports[@]}"; do seeds+=("127.0.0.1:$p"); done
    if ! cli "$dir" --cluster create "${seeds[@]}" --cluster-replicas "$REPLICAS" --cluster-yes \
        >"$dir/create.log" 2>&1; then
        cat "$dir/create.log" >&2
        stop_cluster "$dir"
        die "redis-cli --cluster create failed"
    fi
    # Every node agrees that all slots are served.
    for p in "${ports[@]}"; do
        for i in $(seq 300); do
            local info
            info=$(cli "$dir" -h 127.0.0.1 -p "$p" cluster info 2>/dev/null || true)
            if grep -q 'cluster_state:ok' <<<"$info" && grep -q 'cluster_slots_ok:16384' <<<"$info"; then
                break
            fi
            if [ "$i" = 300 ]; then
                stop_cluster "$dir"
                die "node $p did not reach cluster_state:ok in 30 s"
            fi
            sleep 0.1
        done
    done
    # Replicas have finished their first sync.
    for p in "${ports[@]}"; do
        for i in $(seq 300); do
            local repl
            repl=$(cli "$dir" -h 127.0.0.1 -p "$p" info replication 2>/dev/null || true)
            if grep -q 'role:master' <<<"$repl" || grep -q 'master_link_status:up' <<<"$repl"; then
                break
            fi
            if [ "$i" = 300 ]; then
                stop_cluster "$dir"
                die "replica $p did not sync in 30 s"
            fi
            sleep 0.1
        done
    done
    if [ -n "${REDIS_CLUSTER_OWNER_PID:-}" ]; then
        local owner=$REDIS_CLUSTER_OWNER_PID self
        self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
        setsid bash -c '
            while kill -0 "$1" 2>/dev/null; do sleep 1; done
            WATCHER_SELF=$$ "$2" stop "$3"
            rm -rf "$3"
        ' redis-cluster.sh-watcher "$owner" "$self" "$dir" </dev/null >"$dir/watcher.log" 2>&1 &
        echo $! >"$dir/watcher.pid"
    fi
    local url="redis-cluster://"
    if tls_of "$dir"; then url="rediss-cluster://"; fi
    url+=$(IFS=,; echo "${seeds[*]}")
    if tls_of "$dir"; then
        url+="?ca=$dir/tls/ca.pem&cert=$dir/tls/client.pem&key=$dir/tls/client.key"
    fi
    echo "$url"
}

[ $# -ge 2 ] || usage
case "$1" in
    start)
        [ $# -le 3 ] || usage
        start_cluster "$2" "${3:-7100}"
        ;;
    stop)
        [ $# -eq 2 ] || usage
        stop_cluster "$2"
        ;;
    restart-node)
        [ $# -eq 3 ] || usage
        restart_node "$2" "$3"
        ;;
    *) usage ;;
esac
