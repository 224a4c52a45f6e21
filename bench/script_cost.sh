#!/usr/bin/env bash
# script_cost.sh -- Redis-side cost of fair.lua's uncontended acquire+release,
# for the working tree and, side by side, for another revision.
#
#   bench/script_cost.sh [REV] [--pairs N] [--runs R]
#
# For each version it starts a throw-away redis-server (loopback, a free
# port, a temp dir), loads the script, pipes N acquire+release pairs through
# redis-cli (each pair a new acquisition, as rmutex_lock/rmutex_unlock send
# them), and prints INFO commandstats' usec_per_call for EVALSHA: Redis time
# only, no client or network in it.  R runs each, alternating versions, so a
# drift of the machine hits both.  Needs redis-server and redis-cli.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rev="" pairs=5000 runs=3
while [ $# -gt 0 ]; do
    case $1 in
    --pairs) pairs=$2; shift ;;
    --runs) runs=$2; shift ;;
    -*) echo "usage: $0 [REV] [--pairs N] [--runs R]" >&2; exit 2 ;;
    *) rev=$1 ;;
    esac
    shift
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Each version as Redis runs it: "--!include" lines expanded from its own lib/.
expand() { # LUA_DIR OUT
    cmake -DIN="$1/fair.lua" -DOUT="$2" -DLIBDIR="$1/lib" -P "$root/cmake/lua_expand.cmake"
}
expand "$root/src/lua" "$tmp/work.lua"
versions=(work)
if [ -n "$rev" ]; then
    mkdir -p "$tmp/rev/lib"
    git -C "$root" show "$rev:src/lua/fair.lua" > "$tmp/rev/fair.lua"
    for f in $(git -C "$root" ls-tree --name-only "$rev" src/lua/lib/ 2>/dev/null); do
        git -C "$root" show "$rev:$f" > "$tmp/rev/lib/$(basename "$f")"
    done
    expand "$tmp/rev" "$tmp/rev.lua"
    versions=(rev work)
fi

free_port() {
    local p
    for _ in $(seq 50); do
        p=$((20000 + RANDOM % 20000))
        redis-cli -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1 || { echo "$p"; return; }
    done
    return 1
}

# One run: usec per EVALSHA call of script $1.
run_once() {
    local lua=$1 port dir sha keys
    port=$(free_port)
    dir=$(mktemp -d "$tmp/redis.XXXXXX")
    redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$dir" \
        --daemonize yes --logfile "$dir/log" --pidfile "$dir/pid" >/dev/null
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
    sha=$(redis-cli -p "$port" script load "$(cat "$lua")")
    keys='m {m}:q {m}:a {m}:s {m}:t {m}:o {m}:n {m}:c {m}:r'
    for i in $(seq "$pairs"); do
        # ARGV: op owner acq hold-lease waiter-lease robust try latch-ms notrec notrec-ms
        echo "EVALSHA $sha 10 $keys {m}:x$i acquire u:1 $i 2000 1000 0 0 0 0 0"
        echo "EVALSHA $sha 10 $keys {m}:x$i release u:1 $i 2000 1000 0 0 60000 0 0"
    done > "$dir/cmds"
    redis-cli -p "$port" < "$dir/cmds" > "$dir/out"
    if grep -q ERR "$dir/out"; then
        echo "script_cost.sh: the script failed: $(grep -m1 ERR "$dir/out")" >&2
        redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
        return 1
    fi
    redis-cli -p "$port" info commandstats | tr -d '\r' |
        sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p'
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
}

echo "fair.lua, uncontended acquire+release, $pairs pairs per run: Redis µs per call"
for r in $(seq "$runs"); do
    for v in "${versions[@]}"; do
        label=$v
        [ "$v" = rev ] && label=$rev
        printf '  run %d  %-12s %s\n' "$r" "$label" "$(run_once "$tmp/$v.lua")"
    done
done
