#!/usr/bin/env bash
# run.sh -- the benchmark driver: builds rmutex-bench, runs every workload
# (W1..W14; some of them with e.g. -- --only W13) against a throw-away
# redis-server (or --url), prints the table, writes CSV and a Markdown
# table, and draws the two charts with gnuplot.
#
#   bench/run.sh [--quick] [--long] [--csv FILE] [--url URL] [--build DIR]
#                [--out DIR] [--charts DIR] [-- more rmutex-bench options]
#
#   --quick   short runs (about 2 minutes in all)
#   --long    W3's fair runs take 2 minutes each (the longest-gap target);
#             the full run then takes about 15 minutes
#   --csv     CSV file (default: OUT/results.csv)
#   --url     a Redis server to use instead of starting one (loopback or
#             unix socket only), e.g. redis://127.0.0.1:6379
#   --build   CMake build directory (default: build/bench)
#   --out     run log, CSV, Markdown table, chart data (default: BUILD/results)
#   --charts  where the SVG charts go (default: bench/charts)
#
# Exit status: 0 when the run completed (targets missed or not).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
build=$root/build/bench
out= csv= charts=$here/charts
args=()
while [ $# -gt 0 ]; do
    case $1 in
    --quick | --long) args+=("$1") ;;
    --url) args+=(--url "$2"); shift ;;
    --csv) csv=$2; shift ;;
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    --charts) charts=$2; shift ;;
    --) shift; args+=("$@"); break ;;
    *) echo "usage: $0 [--quick] [--long] [--csv FILE] [--url URL] [--build DIR] [--out DIR] [--charts DIR] [-- ARGS]" >&2
       exit 2 ;;
    esac
    shift
done
out=${out:-$build/results}
csv=${csv:-$out/results.csv}
mkdir -p "$out/data" "$charts"

echo "== building in $build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRMUTEX_BUILD_BENCH=ON \
      -DRMUTEX_BUILD_TESTS=OFF -DRMUTEX_BUILD_EXAMPLES=OFF >"$out/cmake.log" 2>&1 ||
    { cat "$out/cmake.log"; exit 1; }
cmake --build "$build" --target rmutex-bench -j "$(nproc)" >"$out/build.log" 2>&1 ||
    { tail -50 "$out/build.log"; exit 1; }

echo "== running rmutex-bench ${args[*]:-}"
"$build/bench/rmutex-bench" "${args[@]}" --csv "$csv" --md "$out/table.md" --data "$out/data" |
    tee "$out/run.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1

if ! command -v gnuplot >/dev/null; then
    echo "== gnuplot not found: no charts (Debian: apt-get install gnuplot-nox)"
    exit 0
fi
machine=$(sed -n 's/^- \*\*machine\*\*: //p' "$out/table.md" | head -1)
redis=$(sed -n 's/^- \*\*redis\*\*: \(redis-server [^,]*\).*/\1/p' "$out/table.md" | head -1)
when=$(sed -n 's/^- \*\*date\*\*: //p' "$out/table.md" | head -1)
label="$machine; $redis; $when"
label=${label//\'/}
d=$out/data
if ls "$d"/w3_handoff_*.dat >/dev/null 2>&1; then
    rtt=$(sed -n 's/^# RTT limit.*: \([0-9.]*\) us/\1/p' "$d"/w3_handoff_fair_1x8.dat | head -1)
    # x axis from the smallest p1 to the largest p99 of the four distributions
    xmin=$(awk '$1 == "0.010" { if (n++ == 0 || $2 < m) m = $2 } END { print (m < 0 ? m * 1.1 : 0) }' "$d"/w3_handoff_*.dat)
    xmax=$(awk '$1 == "0.990" { if ($2 > m) m = $2 } END { print (m > 0 ? m * 1.1 : 1000) }' "$d"/w3_handoff_*.dat)
    gnuplot -e "dir='$d'; out='$charts/w3_handoff.svg'; rtt=${rtt:-0}; xmin=$xmin; xmax=$xmax; machine='$label'" \
        "$here/charts/handoff.gp" && echo "== chart $charts/w3_handoff.svg"
fi
if [ -f "$d/w4_queue.dat" ]; then
    gnuplot -e "dir='$d'; out='$charts/w4_queue.svg'; machine='$label'" "$here/charts/queue.gp" &&
        echo "== chart $charts/w4_queue.svg"
fi
echo "== CSV $csv, Markdown table $out/table.md, log $out/run.log"
