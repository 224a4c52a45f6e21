#!/usr/bin/env bash
# run.sh -- 3 copies of port_pthread (lost updates) and of port_rmutex
# (exact), the same source built with <pthread.h> and <rmutex/pthread.h>.
#
#   examples/port/run.sh PORT_PTHREAD PORT_RMUTEX [BATCHES]
#
# Redis: RMUTEX_URL, or a throw-away server started by scripts/redis.sh.
# Exit status 0 when the port_rmutex run is exact.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 PORT_PTHREAD PORT_RMUTEX [BATCHES]" >&2; exit 2; }
plain=$1 swapped=$2 batches=${3:-20} copies=3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../scripts/redis.sh
. "$here/../../scripts/redis.sh"
if [ -z "${RMUTEX_URL:-}" ]; then
    trap rmutex_redis_stop EXIT
    rmutex_redis_start || exit 1
fi
file=$(mktemp "${TMPDIR:-/tmp}/port-counter.XXXXXX")
per=0
for ((i = 0; i < batches; i++)); do per=$((per + 1 + i % 3)); done
want=$((copies * per))

run() { # program
    echo 0 >"$file"
    local pids=() i
    for i in $(seq 1 $copies); do
        "$1" "$file" "$batches" &
        pids+=($!)
    done
    wait "${pids[@]}"
    got=$(cat "$file")
    printf '%-12s %d copies: counter = %s (expected %s)\n' "$(basename "$1")" $copies "$got" "$want"
}

run "$plain"
run "$swapped"
rm -f "$file"
[ "$got" = "$want" ]
