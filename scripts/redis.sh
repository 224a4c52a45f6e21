#!/usr/bin/env bash
# scripts/redis.sh -- start a throw-away redis-server for the demo and the
# examples' smoke tests.  Source it, then:
#
#   rmutex_redis_start     # starts redis-server on a free 127.0.0.1 port in a
#                          # temp dir (no persistence); sets RMUTEX_REDIS_PID,
#                          # RMUTEX_REDIS_PORT, RMUTEX_REDIS_DIR and exports
#                          # RMUTEX_URL=redis://127.0.0.1:PORT
#   rmutex_redis_stop      # stops it and removes its temp dir (idempotent)
#
# Run directly, `scripts/redis.sh COMMAND [ARG...]` runs COMMAND with
# RMUTEX_URL pointing at a fresh server, unless RMUTEX_URL is already set,
# and stops the server afterwards.  Its exit status is COMMAND's.

RMUTEX_REDIS_PID=
RMUTEX_REDIS_PORT=
RMUTEX_REDIS_DIR=

rmutex_redis_start() {
    local server=${REDIS_SERVER:-redis-server} cli=${REDIS_CLI:-redis-cli}
    if ! command -v "$server" >/dev/null 2>&1; then
        echo "redis: $server not found (scripts/deps.sh installs it)" >&2
        return 1
    fi
    RMUTEX_REDIS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/rmutex-redis.XXXXXX") || return 1
    local try port pid i
    for try in 1 2 3 4 5 6 7 8 9 10; do
        port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        "$server" --port "$port" --bind 127.0.0.1 --dir "$RMUTEX_REDIS_DIR" \
            --save '' --appendonly no --daemonize no \
            --logfile "$RMUTEX_REDIS_DIR/redis.log" </dev/null >/dev/null 2>&1 &
        pid=$!
        for i in $(seq 1 100); do          # up to ~10 s
            if ! kill -0 "$pid" 2>/dev/null; then
                break                      # it died: port taken, most likely
            fi
            if [ "$("$cli" -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = PONG ] &&
               kill -0 "$pid" 2>/dev/null; then
                RMUTEX_REDIS_PID=$pid
                RMUTEX_REDIS_PORT=$port
                export RMUTEX_URL="redis://127.0.0.1:$port"
                return 0
            fi
            sleep 0.1
        done
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    echo "redis: could not start $server; its last log:" >&2
    tail -n 20 "$RMUTEX_REDIS_DIR/redis.log" >&2 2>/dev/null
    rm -rf "$RMUTEX_REDIS_DIR"
    RMUTEX_REDIS_DIR=
    return 1
}

rmutex_redis_stop() {
    if [ -n "$RMUTEX_REDIS_PID" ]; then
        kill "$RMUTEX_REDIS_PID" 2>/dev/null
        wait "$RMUTEX_REDIS_PID" 2>/dev/null
        RMUTEX_REDIS_PID=
    fi
    if [ -n "$RMUTEX_REDIS_DIR" ]; then
        rm -rf "$RMUTEX_REDIS_DIR"
        RMUTEX_REDIS_DIR=
    fi
    return 0
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -uo pipefail
    if [ $# -eq 0 ]; then
        echo "usage: $0 COMMAND [ARG...]   (runs COMMAND with RMUTEX_URL set)" >&2
        exit 2
    fi
    if [ -z "${RMUTEX_URL:-}" ]; then
        trap rmutex_redis_stop EXIT
        trap 'exit 130' INT
        trap 'exit 143' TERM
        rmutex_redis_start || exit 1
    fi
    "$@"
    exit $?
fi
