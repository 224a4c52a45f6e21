#!/usr/bin/env bash
# script_cost.sh -- Redis-side cost of the uncontended lock+unlock pair, by
# protocol, and of fair.lua against another revision.
#
#   bench/script_cost.sh [REV] [--pairs N] [--runs R]
#
# Each measurement starts a throw-away redis-server (loopback, a free port,
# a temp dir), loads the scripts, pipes N pairs through redis-cli (each
# pair a new acquisition, as rmutex_lock/rmutex_unlock send them) and reads
# INFO commandstats: Redis time only, no client, network or scheduling in
# it -- the quiet measure of what W1 measures in a live loop.  Per pair:
#   non-fair  acquire.lua + release.lua (rmutex's RLock-compatible pair)
#   fair      fair.lua acquire + release
#   Redisson  Redisson's lock and unlock scripts + the DEL of the unlock
#             latch its client sends (tests/redisson_scripts.h)
# then the medians and the ratios fair / non-fair and non-fair / Redisson.
# With REV, fair.lua of that revision too, per call; and contended rounds
# (a holds, b queues, a releases to b, b releases: one hand-off) for the
# non-fair pair, REV's fair.lua (b confirms its grant, as the revisions
# before the owned grant did) and this tree's.  R runs each, the
# kinds alternating, so a drift of the machine hits all.  Needs
# redis-server, redis-cli and cmake (to expand the scripts' includes).
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
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
# Each version as Redis runs it: "--!include" lines expanded from its own lib/.
expand() { # LUA_DIR NAME OUT
    cmake -DIN="$1/$2" -DOUT="$3" -DLIBDIR="$1/lib" -P "$root/cmake/lua_expand.cmake"
}
for f in fair acquire release; do expand "$root/src/lua" "$f.lua" "$tmp/$f.lua"; done
cp "$tmp/fair.lua" "$tmp/work.lua"
# Redisson's scripts, from the C header's string literals.
redisson() { # MACRO OUT
    sed -n "/#define $1/,/^\$/p" "$root/tests/redisson_scripts.h" | grep '^ *"' |
        sed 's/^ *"//; s/\\n" *\\\{0,1\}$//' > "$2"
}
redisson REDISSON_ACQUIRE_LUA "$tmp/rs_acquire.lua"
redisson REDISSON_UNLOCK_LUA "$tmp/rs_unlock.lua"
versions=(work)
if [ -n "$rev" ]; then
    mkdir -p "$tmp/rev/lib"
    git -C "$root" show "$rev:src/lua/fair.lua" > "$tmp/rev/fair.lua"
    for f in $(git -C "$root" ls-tree --name-only "$rev" src/lua/lib/ 2>/dev/null); do
        git -C "$root" show "$rev:$f" > "$tmp/rev/lib/$(basename "$f")"
    done
    expand "$tmp/rev" fair.lua "$tmp/rev.lua"
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

# A throw-away server: sets port and dir.
server_start() {
    port=$(free_port)
    dir=$(mktemp -d "$tmp/redis.XXXXXX")
    redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$dir" \
        --daemonize yes --logfile "$dir/log" --pidfile "$dir/pid" >/dev/null
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
}
load() { redis-cli -p "$port" script load "$(cat "$1")"; }

# Run $dir/cmds; print the total usec of the commands named ("evalsha
# del"), per call (per_call) or per pair.
server_run() { # per_call|per_pair COMMANDS...
    local how=$1
    shift
    redis-cli -p "$port" < "$dir/cmds" > "$dir/out"
    if grep -q ERR "$dir/out"; then
        echo "script_cost.sh: a script failed: $(grep -m1 ERR "$dir/out")" >&2
        redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
        return 1
    fi
    redis-cli -p "$port" info commandstats | tr -d '\r' | awk -F'[:,=]' -v how="$how" -v pairs="$pairs" \
        -v want=" $* " '{ c = substr($1, 9) } index(want, " " c " ") { calls += $3; usec += $5 }
        END { printf "%.2f\n", how == "per_call" ? usec / calls : usec / pairs }'
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
}

# N acquire+release pairs of fair.lua loaded as $1.
fair_cmds() {
    # (A revision before the lease hash, KEYS 10, ignores it.)
    local i keys='m {m}:q {m}:a {m}:s {m}:t {m}:o {m}:n {m}:c {m}:r {m}:h'
    for i in $(seq "$pairs"); do
        # ARGV: op owner acq hold-lease waiter-lease robust try notrec notrec-ms publish
        echo "EVALSHA $1 10 $keys acquire u:1 $i 2000 1000 0 0 0 0 publish"
        echo "EVALSHA $1 10 $keys release u:1 $i 2000 1000 0 0 0 0 publish"
    done
}

# One run of fair.lua $1: usec per call.
fair_calls() {
    server_start
    fair_cmds "$(load "$1")" > "$dir/cmds"
    server_run per_call evalsha
}

# N rounds of the non-fair calls STEP... ("acquire OWNER", "release OWNER"),
# acquisition i in round i.
nonfair_cmds() { # STEP...
    local a r i step
    a=$(load "$tmp/acquire.lua") r=$(load "$tmp/release.lua")
    for i in $(seq "$pairs"); do
        for step in "$@"; do
            case $step in
            acquire*) echo "EVALSHA $a 4 m {m}:o {m}:n {m}:c 2000 ${step#* } 0 $i publish" ;;
            *) echo "EVALSHA $r 4 m {m}:c {m}:o {m}:n ${step#* } 0 86400000 $i publish 0" ;;
            esac
        done
    done
}

# One run of a protocol's pairs: usec per pair.
pair_cost() {
    server_start
    local a r i
    case $1 in
    nonfair)
        nonfair_cmds "acquire u:1" "release u:1" > "$dir/cmds" ;;
    fair)
        fair_cmds "$(load "$tmp/fair.lua")" > "$dir/cmds" ;;
    redisson)
        a=$(load "$tmp/rs_acquire.lua") r=$(load "$tmp/rs_unlock.lua")
        for i in $(seq "$pairs"); do
            echo "EVALSHA $a 1 m 2000 u:1"
            echo "EVALSHA $r 3 m {m}:c {m}:latch$i 0 2000 u:1 publish 5000"
            echo "DEL {m}:latch$i"
        done > "$dir/cmds" ;;
    esac
    server_run per_pair evalsha del
}

# N contended rounds, one hand-off each: a takes the lock, b queues (busy),
# a releases (the lock passes to b), b -- confirming the grant first when
# CONFIRM is 1, as a revision before the owned grant did -- releases.
# b's process is subscribed to its grant channel, as a waiting rmutex
# process is (fair.lua counts who heard the grant).
fair_handoff_cmds() { # SHA CONFIRM
    local i keys='m {m}:q {m}:a {m}:s {m}:t {m}:o {m}:n {m}:c {m}:r {m}:h' tail='2000 1000 0 0 0 0 publish'
    for i in $(seq "$pairs"); do
        echo "EVALSHA $1 10 $keys acquire a:1 $i $tail"
        echo "EVALSHA $1 10 $keys acquire b:1 $i $tail"
        echo "EVALSHA $1 10 $keys release a:1 $i $tail"
        [ "$2" = 1 ] && echo "EVALSHA $1 10 $keys acquire b:1 $i $tail"
        echo "EVALSHA $1 10 $keys release b:1 $i $tail"
    done
}

# One run of contended rounds: usec per round (two acquisitions, one
# hand-off).  KIND nonfair, or fair with fair.lua $2 and CONFIRM $3.
handoff_cost() { # KIND [LUA CONFIRM]
    server_start
    redis-cli -p "$port" subscribe '{m}:c:b' >/dev/null 2>&1 &
    for _ in $(seq 100); do
        [ "$(redis-cli -p "$port" pubsub numsub '{m}:c:b' | tail -1)" = 1 ] && break
        sleep 0.02
    done
    if [ "$1" = nonfair ]; then
        # a takes, b is busy, a releases, b takes, b releases.
        nonfair_cmds "acquire a:1" "acquire b:1" "release a:1" "acquire b:1" "release b:1" > "$dir/cmds"
    else
        fair_handoff_cmds "$(load "$2")" "$3" > "$dir/cmds"
    fi
    server_run per_pair evalsha
    wait
}

median() { sort -n | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "uncontended lock+unlock, $pairs pairs per run: Redis µs per pair"
kinds=(nonfair fair redisson)
for r in $(seq "$runs"); do
    line="  run $r"
    for k in "${kinds[@]}"; do
        v=$(pair_cost "$k")
        echo "$v" >> "$tmp/$k.cost"
        line+=$(printf '  %-8s %6s' "$k" "$v")
    done
    echo "$line"
done
for k in "${kinds[@]}"; do eval "med_$k=$(median < "$tmp/$k.cost")"; done
# shellcheck disable=SC2154
printf '  median   nonfair %s  fair %s  redisson %s\n' "$med_nonfair" "$med_fair" "$med_redisson"
# shellcheck disable=SC2154
awk -v n="$med_nonfair" -v f="$med_fair" -v r="$med_redisson" \
    'BEGIN { printf "  fair / non-fair %.2f (target <= 1.3)   non-fair / Redisson %.2f (target <= 1)\n", f / n, n / r }'

if [ -n "$rev" ]; then
    echo "fair.lua, uncontended acquire+release, $pairs pairs per run: Redis µs per call"
    for r in $(seq "$runs"); do
        for v in "${versions[@]}"; do
            label=$v
            [ "$v" = rev ] && label=$rev
            printf '  run %d  %-12s %s\n' "$r" "$label" "$(fair_calls "$tmp/$v.lua")"
        done
    done
fi

if [ -n "$rev" ]; then
    echo "contended rounds (a holds, b queues, a releases to b, b releases), $pairs per run: Redis µs per round"
    for r in $(seq "$runs"); do
        line="  run $r"
        v=$(handoff_cost nonfair); echo "$v" >> "$tmp/h_nonfair.cost"; line+="  non-fair $v"
        v=$(handoff_cost fair "$tmp/rev.lua" 1); echo "$v" >> "$tmp/h_rev.cost"; line+="  fair $rev (b confirms) $v"
        v=$(handoff_cost fair "$tmp/work.lua" 0); echo "$v" >> "$tmp/h_work.cost"; line+="  fair work $v"
        echo "$line"
    done
    hn=$(median < "$tmp/h_nonfair.cost") hr=$(median < "$tmp/h_rev.cost") hw=$(median < "$tmp/h_work.cost")
    awk -v n="$hn" -v r="$hr" -v w="$hw" -v rev="$rev" 'BEGIN {
        printf "  median   non-fair %s  fair %s %s  fair work %s\n", n, rev, r, w
        printf "  fair / non-fair: %s %.2f, work %.2f (target <= 1.2)\n", rev, r / n, w / n }'
fi
