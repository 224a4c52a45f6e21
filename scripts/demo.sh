#!/usr/bin/env bash
# scripts/demo.sh -- THE demo command: installs what is missing, builds the
# library and its examples (build/demo), starts a throw-away redis-server on
# a free 127.0.0.1 port (unless RMUTEX_URL is set), then runs
#
#   1. the cross-process counter: 4 processes add to one counter under one
#      rmutex and the total is exact; then the same without the lock, which
#      loses updates;
#   2. the worker pool: 3 processes share 12 jobs with rmutex_trylock() and
#      give up on a slow one with rmutex_timedlock();
#   3. an unmodified pthread program (no rmutex in it), 4 copies: plainly
#      they lose updates, under the LD_PRELOAD shim the total is exact.
#
# usage: scripts/demo.sh [--no-deps]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=deps.sh
. "$ROOT/scripts/deps.sh"
# shellcheck source=redis.sh
. "$ROOT/scripts/redis.sh"

deps=1
for arg in "$@"; do
    case $arg in
        --no-deps) deps=0 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "demo.sh: unknown argument '$arg'" >&2; exit 2 ;;
    esac
done

step() { printf '\n==> %s\n' "$*"; }

if [ "$deps" = 1 ]; then
    step "Installing what is missing"
    rmutex_install_deps
fi

step "Building the library and the examples (build/demo)"
mkdir -p build
cmake -S . -B build/demo -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DRMUTEX_BUILD_TESTS=OFF -DRMUTEX_BUILD_EXAMPLES=ON >build/demo.configure.log 2>&1 || {
    cat build/demo.configure.log >&2
    exit 1
}
cmake --build build/demo -j "$(nproc 2>/dev/null || echo 2)" \
    --target rmutex_example_counter rmutex_example_worker_pool rmutex_example_queue rmutex_example_preload_counter \
    rmutex_example_port_pthread rmutex_example_port_rmutex rmutex_preload rmutex_cli
BIN=build/demo/examples

trap rmutex_redis_stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [ -n "${RMUTEX_URL:-}" ]; then
    step "Using the Redis server in RMUTEX_URL"
else
    step "Starting a redis-server of our own"
    rmutex_redis_start
    echo "redis-server (pid $RMUTEX_REDIS_PID) on 127.0.0.1:$RMUTEX_REDIS_PORT, no persistence;" \
         "RMUTEX_URL=$RMUTEX_URL"
fi

step "Cross-process counter, 4 processes, under one rmutex"
"$BIN/counter" --procs 4 --iters 50

step "The same without the lock: updates get lost"
"$BIN/counter" --procs 4 --iters 50 --no-lock

step "Worker pool: 3 processes, 12 jobs, trylock + timedlock"
"$BIN/worker_pool" --workers 3 --jobs 12

step "A bounded job queue: 2 producer and 3 consumer processes, one rmutex, two rconds"
"$BIN/queue" --producers 2 --consumers 3 --jobs 24 --capacity 3

step "The rmutex command: two runs of one job at once, the second with -n"
build/demo/cli/rmutex run nightly:report -- sh -c 'echo "  first run holds the lock (fence $RMUTEX_FENCE)"; sleep 1' &
first=$!
sleep 0.3
rc=0
build/demo/cli/rmutex run -n nightly:report -- echo "  never printed" || rc=$?
echo "  second run: exit $rc (busy: flock's conflict code)"
wait "$first"

step "An unmodified pthread program, 4 copies, plainly and under the LD_PRELOAD shim"
examples/preload/run.sh "$BIN/preload/preload_counter" build/demo/shim/librmutex_preload.so

if [ -n "$RMUTEX_REDIS_PID" ]; then
    step "Stopping redis-server"
fi
rmutex_redis_stop
step "Demo done"
