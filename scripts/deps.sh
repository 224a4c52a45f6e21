#!/usr/bin/env bash
# scripts/deps.sh -- install the Debian packages rmutex needs to build, test
# and run its demo, but only those that are missing.
#
#   scripts/deps.sh [EXTRA-PACKAGE...]      # run it
#   . scripts/deps.sh; rmutex_install_deps   # or source it and call the function
#
# As root it runs apt-get directly; otherwise through sudo (non-interactively
# when there is no terminal).  It runs `apt-get update` first, and nothing at
# all when every package is already installed.
#
# clang: the test command compiles the C++ test code with clang++ (about a
# third of g++'s time with the precompiled header; scripts/test.sh), and its
# fuzz stage needs it.
# libssl-dev: OpenSSL 3's headers, for TLS (the library loads libssl.so.3
# only when a rediss:// URL is used); openssl makes the tests' certificates.
#
# Valkey (the second server the tests run against): valkey-server from
# Debian bookworm-backports.  On bookworm the backports source is added (one
# file in /etc/apt/sources.list.d) when it is missing; where the package
# cannot be had, the rest is installed and the Valkey runs are skipped (the
# test command says so).

RMUTEX_DEPS=(build-essential cmake clang pkg-config libhiredis-dev uuid-dev libgtest-dev libssl-dev
             openssl redis-server redis-tools)
RMUTEX_BACKPORTS_DEPS=(valkey-server)

# Print the packages among "$@" that are not installed.
rmutex_missing_packages() {
    local p status
    for p in "$@"; do
        status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
        [ "$status" = installed ] || printf '%s\n' "$p"
    done
}

# Run "$@" as root: directly, or through sudo.  Returns 127 if neither is possible.
rmutex_as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        if [ -t 0 ]; then
            sudo "$@"          # may ask for a password
        else
            sudo -n "$@"       # no terminal: never hang on a prompt
        fi
    else
        return 127
    fi
}

# The backports suite of this Debian release ("bookworm-backports"), or
# nothing when this is not a Debian release with one.
rmutex_backports_suite() {
    local codename=""
    [ -r /etc/os-release ] && codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ "$codename" = bookworm ] && echo "$codename-backports"
}

# Make the backports suite known to apt (a sources file) when it is not.
rmutex_add_backports() {
    local suite
    suite=$(rmutex_backports_suite) || return 1
    [ -n "$suite" ] || return 1
    if grep -rqs "$suite" /etc/apt/sources.list /etc/apt/sources.list.d/; then return 0; fi
    echo "deps: adding the $suite source (for ${RMUTEX_BACKPORTS_DEPS[*]})"
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$suite" | rmutex_as_root tee /etc/apt/sources.list.d/rmutex-backports.sources >/dev/null
}

# Install the backports packages that are missing, if they can be had; a
# failure here is said and is not an error (the Valkey runs are skipped).
rmutex_install_backports() {
    local missing suite
    missing=$(rmutex_missing_packages "${RMUTEX_BACKPORTS_DEPS[@]}")
    [ -n "$missing" ] || return 0
    suite=$(rmutex_backports_suite)
    if [ -z "$suite" ] || ! rmutex_add_backports; then
        echo "deps: note: no Debian backports here; not installing $missing (Valkey runs skipped)"
        return 0
    fi
    # shellcheck disable=SC2086
    if ! rmutex_as_root env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 update ||
       ! rmutex_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
            -o DPkg::Lock::Timeout=300 --no-install-recommends -t "$suite" $missing; then
        echo "deps: note: could not install $missing from $suite (Valkey runs skipped)"
    fi
    return 0
}

# Install the missing ones of RMUTEX_DEPS and of the extra packages given,
# then the backports ones (Valkey) if they can be had.
rmutex_install_deps() {
    rmutex_install_main_deps "$@" || return 1
    rmutex_install_backports
}

rmutex_install_main_deps() {
    if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
        echo "deps: this is not a Debian-like system (no dpkg/apt-get); install by hand:" >&2
        echo "deps:   ${RMUTEX_DEPS[*]} $*" >&2
        return 1
    fi
    local missing
    missing=$(rmutex_missing_packages "${RMUTEX_DEPS[@]}" "$@")
    if [ -z "$missing" ]; then
        echo "deps: all packages already installed"
        return 0
    fi
    # shellcheck disable=SC2086
    set -- $missing
    echo "deps: installing: $*"
    if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
        echo "deps: error: not root and sudo is not installed." >&2
        echo "deps: run as root:  apt-get update && apt-get install -y $*" >&2
        return 1
    fi
    local apt_opts=(-y -q -o DPkg::Lock::Timeout=300)
    if ! rmutex_as_root env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 update; then
        echo "deps: error: 'apt-get update' failed (as root, or through sudo)." >&2
        echo "deps: run as root:  apt-get update && apt-get install -y $*" >&2
        return 1
    fi
    if ! rmutex_as_root env DEBIAN_FRONTEND=noninteractive apt-get install "${apt_opts[@]}" \
            --no-install-recommends "$@"; then
        echo "deps: error: 'apt-get install $*' failed." >&2
        return 1
    fi
    missing=$(rmutex_missing_packages "$@")
    if [ -n "$missing" ]; then
        echo "deps: error: still missing after install: $missing" >&2
        return 1
    fi
    echo "deps: done"
}

# Executed rather than sourced: do it now.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    rmutex_install_deps "$@"
fi
