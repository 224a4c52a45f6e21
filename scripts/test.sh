#!/usr/bin/env bash
# scripts/test.sh -- THE test command: installs what is missing, then builds
# and runs the test suite in four stages, each in its own build dir:
#
#   normal  RelWithDebInfo build, every test              (build/normal)
#   asan    AddressSanitizer + UBSan build, every test but the soak
#           (label long), the acl: repeats (label redis-acl) and the TLS
#           and Valkey runs (not built there)                (build/asan)
#   tsan    ThreadSanitizer build, tests labelled threaded but not long,
#           nor the TLS and Valkey runs                      (build/tsan)
#   fuzz    the libFuzzer targets of fuzz/ (clang, ASan + UBSan), each for
#           RMUTEX_FUZZ_SECONDS (default 30) on its seed corpus (build/fuzz);
#           when it is the last stage it runs beside the one before it, at
#           the lowest priority (fuzzers run for a set time, not a set work)
#
# usage: scripts/test.sh [--quick] [--stage NAME]... [--no-deps] [--werror]
#                        [-j N] [-- CTEST-ARG...]
#   --quick        the "quick" stage only: the normal build without the
#                  benchmark, examples and TLS/Valkey programs, and its tests
#                  but the soaks (long), fault runs, cluster and Sentinel,
#                  and the ACL/TLS/Valkey repeats (build/quick; < 5 minutes)
#   --stage NAME   run this stage (repeatable; default: all four)
#   --no-deps      do not check/install the Debian packages
#   --werror       build with -DRMUTEX_WERROR=ON
#   -j N           parallel build jobs (default: nproc).  ctest runs tests
#                  in parallel: 5 at once in the normal and quick stages
#                  (they mostly wait on Redis and on each other: at 4 at
#                  once they kept 0.84 of 2 cores busy; at 6 the CPU-bound
#                  ones missed their bounds), 3 under ASan (at 4 its
#                  timing-bound tests failed under load), 2 under TSan and for the fuzzers (CPU-bound:
#                  at 3, TSan's timing-bound tests failed under load);
#                  RMUTEX_CTEST_JOBS overrides them all
#   -- ARGS        extra arguments for every ctest run (e.g. -R lock)
#
# The later stages build one after another in the background at the lowest
# CPU priority (nice 19) from the first stage's tests on (the tests mostly
# wait), each one's output in build/NAME.build.log.  The C++ test code is
# compiled once for the normal and ASan stages: ASan instruments the C
# (library, shim, CLI) and links the normal stage's test objects.
# Every stage runs even if an earlier one failed; the exit status is non-zero
# if any failed.  The tests start their own redis-server unless
# RMUTEX_TEST_URL is set (it is passed through to them).  Sanitizer stages
# set RMUTEX_TEST_TIME_SCALE (asan 4, tsan 5) to stretch the tests' time
# bounds.  CC/CXX are honoured for the normal and asan stages; the tsan
# stage picks gcc or clang, whichever runs a TSan program on this machine
# (with `setarch -R`, i.e. no ASLR, when the kernel's mmap randomization is
# too high for the sanitizer runtime).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
# shellcheck source=deps.sh
. "$ROOT/scripts/deps.sh"

stages=()
deps=1
werror=OFF
jobs=$(nproc 2>/dev/null || echo 2)
ctest_extra=()
while [ $# -gt 0 ]; do
    case $1 in
        --quick) stages=(quick) ;;
        --stage)
            [ $# -ge 2 ] || { echo "test.sh: --stage needs a name" >&2; exit 2; }
            case $2 in normal|asan|tsan|fuzz|quick) stages+=("$2") ;;
                *) echo "test.sh: unknown stage '$2' (normal, asan, tsan, fuzz, quick)" >&2; exit 2 ;;
            esac
            shift ;;
        --stage=*) set -- --stage "${1#--stage=}" "${@:2}"; continue ;;
        --no-deps) deps=0 ;;
        --werror) werror=ON ;;
        -j) [ $# -ge 2 ] || { echo "test.sh: -j needs a number" >&2; exit 2; }
            jobs=$2; shift ;;
        -j*) jobs=${1#-j} ;;
        --) shift; ctest_extra=("$@"); break ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "test.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ ${#stages[@]} -gt 0 ] || stages=(normal asan tsan fuzz)

banner() {
    echo
    echo "=============================================================================="
    echo "== $*"
    echo "=============================================================================="
}

if [ "$deps" = 1 ]; then
    banner "dependencies"
    rmutex_install_deps || exit 2
fi

# ---------------------------------------------------------------------------
# Sanitizer probes: compile a tiny threaded program with CC and the flags and
# run it, plainly and then with ASLR off.  Prints the prefix to run tests
# with ("" or "setarch ARCH -R"); fails if neither works.
PROBE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/rmutex-probe.XXXXXX")
trap 'rm -rf "$PROBE_DIR"' EXIT
cat >"$PROBE_DIR/probe.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static int n;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void *run(void *arg) {
    for (int i = 0; i < 1000; i++) { pthread_mutex_lock(&mu); n++; pthread_mutex_unlock(&mu); }
    return arg;
}
int main(void) {
    pthread_t t[2];
    char *p = malloc(16);
    for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, run, p);
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    free(p);
    return n == 2000 ? 0 : 1;
}
EOF

sanitizer_prefix() { # CC FLAGS -> prints prefix
    local cc=$1 flags=$2 exe="$PROBE_DIR/probe-$1-${2//[^a-z]/_}"
    command -v "$cc" >/dev/null 2>&1 || return 1
    # shellcheck disable=SC2086
    "$cc" -g $flags -pthread "$PROBE_DIR/probe.c" -o "$exe" >"$exe.log" 2>&1 || return 1
    if "$exe" >>"$exe.log" 2>&1; then
        echo ""
        return 0
    fi
    if command -v setarch >/dev/null 2>&1 &&
       setarch "$(uname -m)" -R "$exe" >>"$exe.log" 2>&1; then
        echo "setarch $(uname -m) -R"
        return 0
    fi
    return 1
}

# ---------------------------------------------------------------------------
# A stage in three parts, each run in a subshell: stage_env (the compiler,
# flags, labels, environment), stage_build (configure and build), stage_test
# (ctest).  The later stages' builds run at the lowest CPU priority while
# the earlier stages test: the tests mostly wait on Redis and on each other,
# so the builds take the CPU they leave, and they take it back at once when
# they need it (nice 19 against 0).
declare -A result counts build_seconds test_seconds

# The C++ compiler of the normal and quick stages, which compile the test
# code (C++, GoogleTest) for everyone: CXX if set, else clang++ where it
# is installed (it compiles a test file in about half of g++'s time at -O0,
# a third with the precompiled header), else c++.  The library, the shim
# and the CLI are C, compiled by CC (default cc) in every stage; the ASan
# stage links these objects with its own C++ compiler's driver (the
# sanitizer runtime is the C compiler's).
tests_cxx() {
    if [ -n "${CXX:-}" ]; then echo "$CXX"
    elif command -v clang++ >/dev/null 2>&1; then echo clang++
    else echo c++; fi
}

stage_env() { # NAME [quiet]: sets dir cc cxx sanitize prefix labels timeout tests_at_once
    name=$1 dir="build/$1" sanitize="" cc="${CC:-cc}" cxx="${CXX:-c++}"
    prefix="" labels=() timeout=900 tests_at_once=5
    case $name in
        normal) cxx=$(tests_cxx) ;;
        quick)
            cxx=$(tests_cxx)
            labels=(-LE "long|faults|cluster|redis-acl|redis-tls|redis-valkey" -E NOT_BUILT) ;;
        asan)
            # The two-minute soak runs in the normal stage; the ACL runs repeat
            # the same code paths as another user (normal stage too).
            labels=(-LE "long|redis-acl")
            sanitize="address,undefined"
            if ! prefix=$(sanitizer_prefix "$cc" "-fsanitize=address,undefined"); then
                echo "test.sh: $cc cannot build and run an ASan program here:" >&2
                cat "$PROBE_DIR"/probe-*.log >&2 2>/dev/null
                return 1
            fi
            export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
            export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
            export RMUTEX_TEST_TIME_SCALE=4
            tests_at_once=3
            timeout=1500 ;;
        tsan)
            sanitize="thread"
            labels=(-L threaded -LE long)
            local c found=""
            for c in gcc clang; do
                if prefix=$(sanitizer_prefix "$c" "-fsanitize=thread"); then
                    found=$c
                    break
                fi
            done
            if [ -z "$found" ] && ! command -v clang >/dev/null 2>&1 && [ "$deps" = 1 ]; then
                echo "test.sh: gcc's TSan does not run here; installing clang to try it"
                rmutex_install_deps clang &&
                    prefix=$(sanitizer_prefix clang "-fsanitize=thread") && found=clang
            fi
            if [ -z "$found" ]; then
                echo "test.sh: neither gcc nor clang can run a TSan program here:" >&2
                cat "$PROBE_DIR"/probe-*.log >&2 2>/dev/null
                return 1
            fi
            if [ "$found" = clang ]; then cc=clang cxx=clang++ dir=build/tsan-clang
            else cc=gcc cxx=g++; fi
            # die_after_fork=0: the library starts threads in a forked child
            # (after-fork semantics are part of its API); TSan would kill such
            # a child by default.
            export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:die_after_fork=0${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
            export RMUTEX_TEST_TIME_SCALE=5
            tests_at_once=2
            timeout=1500 ;;
        fuzz)
            dir=build/fuzz cc=clang cxx=clang++ tests_at_once=2
            if ! command -v clang >/dev/null 2>&1 || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
                [ "$deps" = 1 ] && rmutex_install_deps clang libclang-rt-14-dev
            fi
            if ! prefix=$(sanitizer_prefix clang "-fsanitize=address,undefined"); then
                echo "test.sh: clang cannot build and run an ASan program here" >&2
                return 1
            fi ;;
    esac
}

stage_title() { # NAME
    case $1 in
        normal) echo "stage normal: RelWithDebInfo build, all tests" ;;
        quick) echo "stage quick: RelWithDebInfo build, all tests but the soaks, fault runs, cluster, Sentinel and the ACL/TLS/Valkey repeats" ;;
        asan) echo "stage asan: AddressSanitizer + UndefinedBehaviorSanitizer build, all tests but 'long', 'redis-acl', TLS and Valkey" ;;
        tsan) echo "stage tsan: ThreadSanitizer build, tests labelled 'threaded' but not 'long', nor TLS or Valkey" ;;
        fuzz) echo "stage fuzz: libFuzzer targets (clang, ASan + UBSan), ${RMUTEX_FUZZ_SECONDS:-30} s each" ;;
    esac
}

stage_build() { # NAME
    stage_env "$1" || return 1
    echo "compiler: $cc / $cxx${prefix:+; tests run under '$prefix' (TSan/ASan need ASLR off on this kernel)}"
    if [ "$name" = fuzz ]; then
        CC=clang cmake --log-level=WARNING -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DRMUTEX_FUZZ=ON -DRMUTEX_BUILD_TESTS=OFF -DRMUTEX_BUILD_EXAMPLES=OFF \
            -DRMUTEX_BUILD_BENCH=OFF -DRMUTEX_BUILD_SHIM=OFF \
            -DRMUTEX_FUZZ_SECONDS="${RMUTEX_FUZZ_SECONDS:-30}" || return 1
        # shellcheck disable=SC2086
        $prefix cmake --build "$dir" -j "$jobs" || return 1
        return 0
    fi
    # The sanitizer stages build what they run: no benchmark (never run
    # there), and TSan no examples (not labelled threaded).
    local bench=ON examples=ON servers=ON targets=() shared=()
    [ -n "$sanitize" ] && bench=OFF
    # The TLS and Valkey runs (tests/tls/, tls:, valkey:) in the normal
    # stage only: they run code the other tests run, on other servers.
    [ -n "$sanitize" ] && servers=OFF
    [ "$name" = quick ] && bench=OFF examples=OFF servers=OFF
    [ "$name" = tsan ] && examples=OFF
    # TSan builds only what it runs (tests/CMakeLists.txt: rmutex_tests_threaded).
    [ "$name" = tsan ] && targets=(--target rmutex_tests_threaded)
    [ "$name" = quick ] && targets=(--target rmutex_tests_quick)
    # The C++ test code is most of a build's compile time, and it is
    # compiled once per run: the ASan stage instruments only the C (the
    # library, the shim, the CLI, the C helpers) and links the objects the
    # normal stage compiled in this run (cmake/test_objects.cmake; without
    # them -- that stage not run, or its build failed -- it compiles its
    # own).  TSan instruments the tests too: a build of its own.
    if [ "$name" = tsan ]; then
        shared=(-DRMUTEX_TEST_PCH=ON -DRMUTEX_SANITIZE_TESTS=ON -DRMUTEX_TEST_OBJECTS_FROM=)
    elif [ "$name" = asan ]; then
        shared=(-DRMUTEX_TEST_PCH=OFF -DRMUTEX_SANITIZE_TESTS=OFF
                -DRMUTEX_TEST_OBJECTS_FROM="${objects_from:-}")
    else
        shared=(-DRMUTEX_TEST_PCH=ON -DRMUTEX_SANITIZE_TESTS=OFF -DRMUTEX_TEST_OBJECTS_FROM=)
    fi
    CC=$cc CXX=$cxx cmake --log-level=WARNING -S . -B "$dir" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DRMUTEX_BUILD_TESTS=ON -DRMUTEX_BUILD_EXAMPLES=$examples -DRMUTEX_BUILD_BENCH=$bench \
        -DRMUTEX_TEST_TLS_VALKEY=$servers -DRMUTEX_SANITIZE="$sanitize" -DRMUTEX_WERROR="$werror" \
        -UCMAKE_C_COMPILER_LAUNCHER -UCMAKE_CXX_COMPILER_LAUNCHER "${shared[@]}" || return 1
    # Under the prefix too: gtest_discover_tests runs the test programs.
    # shellcheck disable=SC2086
    $prefix cmake --build "$dir" -j "$jobs" "${targets[@]}" || return 1
}

stage_test() { # NAME
    stage_env "$1" >/dev/null || return 1
    echo "compiler: $cc / $cxx${prefix:+; tests run under '$prefix'}"
    [ -n "${RMUTEX_TEST_TIME_SCALE:-}" ] && echo "RMUTEX_TEST_TIME_SCALE=$RMUTEX_TEST_TIME_SCALE"
    [ -n "${RMUTEX_TEST_URL:-}" ] && echo "RMUTEX_TEST_URL is set: the tests use that server"
    local extra=(--timeout "$timeout" "${labels[@]}")
    [ "$name" = fuzz ] && extra=()
    # shellcheck disable=SC2086
    $prefix ctest --test-dir "$dir" -j"${RMUTEX_CTEST_JOBS:-$tests_at_once}" --output-on-failure --no-tests=error \
        "${extra[@]}" "${ctest_extra[@]}" 2>&1 | tee "$dir/ctest.log"
    return "${PIPESTATUS[0]}"
}

# The builds of the later stages, one after another in one background job
# at the lowest priority, each one's output in build/NAME.build.log and its
# exit status and seconds in build/NAME.build.rc: they take the CPU the
# tests leave from the first stage's tests on, so a stage's build is usually
# done before the stage before it has finished testing.  stage_build_wait
# waits for NAME's, prints it and returns its status.
builds_start() { # NAME...
    mkdir -p build
    local s
    for s in "$@"; do rm -f "build/$s.build.rc"; done
    (
        renice -n 19 -p "$BASHPID" >/dev/null 2>&1
        for s in "$@"; do
            t=$SECONDS
            ( stage_build "$s" ) >"build/$s.build.log" 2>&1
            echo "$? $((SECONDS - t)) $t" >"build/$s.build.rc"
        done
    ) &
    builds_pid=$!
}
stage_build_wait() { # NAME
    local rc secs started
    while [ ! -f "build/$1.build.rc" ]; do
        kill -0 "$builds_pid" 2>/dev/null || break
        sleep 1
    done
    if ! read -r rc secs started <"build/$1.build.rc" 2>/dev/null; then
        echo "test.sh: the background builds stopped before the $1 build ended"
        return 1
    fi
    build_seconds[$1]=$secs
    if [ "$rc" -eq 0 ]; then
        echo "(built in the background, ${secs} s from $((started - start_all)) s into the run; the last lines of build/$1.build.log:)"
        tail -n 3 "build/$1.build.log"
    else
        cat "build/$1.build.log"
        echo "test.sh: the $1 build failed (exit $rc)"
    fi
    return "$rc"
}

# Counts from a stage's ctest log: "passed failed skipped", or nothing.
stage_counts() {
    local log=$1 line total failed skipped
    [ -f "$log" ] || return 0
    line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1)
    [ -n "$line" ] || return 0
    failed=$(sed -E 's/.* ([0-9]+) tests? failed out of.*/\1/' <<<"$line")
    total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
    skipped=$(grep -cE '\*\*\*(Skipped|Not Run)' "$log")
    echo "$((total - failed - skipped)) $failed $skipped"
}

start_all=$SECONDS
for i in "${!stages[@]}"; do
    s=${stages[$i]}
    rm -f build/"$s"/ctest.log build/"$s"-clang/ctest.log build/"$s".out build/"$s".test.seconds
done
# The first stage's build in the foreground, at normal priority.
first=${stages[0]}
banner "$(stage_title "$first")"
t0=$SECONDS
( stage_build "$first" )
first_rc=$?
build_seconds[$first]=$((SECONDS - t0))
# The fuzzers run for a fixed time each whatever CPU they get, so when the
# fuzz stage comes last it runs beside the stage before it, at the lowest
# priority (the tests there take the CPU first), its output kept in
# build/fuzz.out and shown in its turn.
beside=""
n_stages=${#stages[@]}
if [ "$n_stages" -ge 2 ] && [ "${stages[$((n_stages - 1))]}" = fuzz ]; then beside=fuzz; fi
start_beside() { # NAME
    (
        renice -n 19 -p "$BASHPID" >/dev/null 2>&1
        stage_build_wait "$1" || exit $?
        t=$SECONDS
        ( stage_test "$1" )
        rc=$?
        echo "$((SECONDS - t))" >"build/$1.test.seconds"
        exit $rc
    ) >"build/$1.out" 2>&1 &
    beside_pid=$!
}
for i in "${!stages[@]}"; do
    s=${stages[$i]}
    if [ "$s" = "$beside" ]; then
        banner "$(stage_title "$s") -- ran beside the stage before it"
        t0=$SECONDS
        wait "$beside_pid"
        rc=$?
        cat "build/$s.out"
        read -r _ secs _ <"build/$s.build.rc" 2>/dev/null && build_seconds[$s]=$secs
        read -r secs <"build/$s.test.seconds" 2>/dev/null && test_seconds[$s]=$secs
        echo "(waited $((SECONDS - t0)) s for it after the stage before it)"
    else
        if [ "$i" -gt 0 ]; then
            banner "$(stage_title "$s")"
            stage_build_wait "$s"
            rc=$?
        else
            rc=$first_rc
        fi
        # (the ASan stage links the normal stage's C++ test objects: built)
        [ "$i" -eq 0 ] && [ "$s" = normal ] && [ $rc -eq 0 ] && objects_from="$ROOT/build/normal"
        [ "$i" -eq 0 ] && [ "$n_stages" -gt 1 ] && builds_start "${stages[@]:1}"
        [ -n "$beside" ] && [ "$i" -eq $((n_stages - 2)) ] && start_beside "$beside"
        t0=$SECONDS
        if [ $rc -eq 0 ]; then
            ( stage_test "$s" )
            rc=$?
        fi
        test_seconds[$s]=$((SECONDS - t0))
    fi
    result[$s]=$([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)")
    counts[$s]=""
    for d in build/"$s" build/"$s"-clang; do
        [ -f "$d/ctest.log" ] && counts[$s]=$(stage_counts "$d/ctest.log")
    done
done

# Each failed test again, its name and the end of its output, just above
# the summary: a CI log is often shown cut to its last lines.
failures_recap() {
    local s d any=0
    for s in "${stages[@]}"; do
        for d in build/"$s" build/"$s"-clang; do
            [ -f "$d/ctest.log" ] || continue
            grep -qE '\*\*\*(Failed|Timeout|Exception)|\(Failed\)|\(Timeout\)' "$d/ctest.log" || continue
            [ $any -eq 1 ] || banner "failed tests, again (the first failure and the end of each one's output)"
            any=1
            awk -v stage="$s" '
                # its first failure (15 lines from it) and its last 10 lines
                function flush() {
                    if (name != "") {
                        printf "--- %s: %s\n", stage, name
                        first = 0
                        for (i = 1; i <= n && !first; i++)
                            if (buf[i] ~ /: Failure$|^\[  FAILED  \]|==ERROR:|WARNING: ThreadSanitizer|runtime error:|[Tt]imeout|terminate called/) first = i
                        last = first ? first + 14 : 0
                        if (last > n) last = n
                        for (i = first; first && i <= last; i++) print "    " buf[i]
                        from = n - 10 > last ? n - 10 : last
                        if (from > last) print "    ..."
                        for (i = from + 1; i <= n; i++) print "    " buf[i]
                    }
                    name = ""; n = 0
                }
                /^ *[0-9]+\/[0-9]+ Test +#[0-9]+:/ {
                    flush()
                    if ($0 ~ /\*\*\*(Failed|Timeout|Exception)/) { name = $0; sub(/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: */, "", name); sub(/ \.+.*$/, "", name) }
                    next
                }
                /^ +Start +[0-9]+:/ || /^[0-9]+% tests passed/ { flush(); next }
                name != "" { buf[++n] = $0 }
                END { flush() }' "$d/ctest.log"
        done
    done
}
failures_recap

banner "summary"
all_ok=1 n_pass=0 n_fail=0 n_skip=0
for s in "${stages[@]}"; do
    c=${counts[$s]}
    if [ -n "$c" ]; then
        read -r p f k <<<"$c"
        detail="$p passed, $f failed, $k skipped"
    else
        p=0 f=0 k=0
        detail="no test results"
    fi
    case ${result[$s]} in
        passed) ;;
        *) all_ok=0; [ "$f" -eq 0 ] && f=1 ;; # a stage that failed outside ctest counts once
    esac
    n_pass=$((n_pass + p)) n_fail=$((n_fail + f)) n_skip=$((n_skip + k))
    printf '  %-7s %-16s build %4ds  tests %4ds   %s\n' "$s" "${result[$s]}" "${build_seconds[$s]:-0}" \
        "${test_seconds[$s]:-0}" "$detail"
done
printf '  %-7s %-16s %5ds (the builds after the first run during the tests before them)\n' total "" \
    $((SECONDS - start_all))
echo
echo "tests: $n_pass passed, $n_fail failed, $n_skip skipped"
[ $all_ok -eq 1 ]
