#!/usr/bin/env bash
# run.sh -- 4 copies of preload_counter, first plainly (updates are lost:
# each copy's mutex excludes only its own threads), then under
# librmutex_preload.so (the total is exact).
#
#   examples/preload/run.sh PRELOAD_COUNTER LIBRMUTEX_PRELOAD_SO [ITERS]
#
# Redis: RMUTEX_URL, or a throw-away server started by scripts/redis.sh.
# Exit status 0 when the shimmed run is exact.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 PRELOAD_COUNTER LIBRMUTEX_PRELOAD_SO [ITERS]" >&2; exit 2; }
prog=$1 shim=$2 iters=${3:-25} copies=4 threads=2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../scripts/redis.sh
. "$here/../../scripts/redis.sh"
if [ -z "${RMUTEX_URL:-}" ]; then
    trap rmutex_redis_stop EXIT
    rmutex_redis_start || exit 1
fi
file=$(mktemp "${TMPDIR:-/tmp}/preload-counter.XXXXXX")
want=$((copies * threads * iters))

run() { # label, then env assignments for the copies
    local label=$1; shift
    echo 0 >"$file"
    local pids=() i
    for i in $(seq 1 $copies); do
        env "$@" "$prog" "$file" "$iters" "$threads" &
        pids+=($!)
    done
    wait "${pids[@]}"
    got=$(cat "$file")
    echo "$label: $copies copies x $threads threads x $iters increments = $got (expected $want)"
}

run "plain pthread mutex   "
run "under the preload shim" LD_PRELOAD="$shim" \
    RMUTEX_PRELOAD="$(basename "$prog"): counter_lock=example:preload:counter:$$"
rm -f "$file"
[ "$got" = "$want" ]
