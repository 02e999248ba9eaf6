#!/usr/bin/env bash
# scripts/install-deps while another apt holds its lock (issue 53: it failed at once, in apt's
# words): it waits, saying so in one line, then installs; after 10 minutes it gives up in one
# line. Runs the script against stand-ins on the PATH (dpkg-query saying a package is missing,
# lslocks showing a holder for a while, apt-get recording its arguments, sleep returning at
# once), so nothing is installed and no real lock is touched.
# usage: install_deps_test.sh SOURCE_DIR
set -euo pipefail
source_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir "$work/bin"
stub() { printf '#!/bin/bash\n%s\n' "$2" >"$work/bin/$1"; chmod +x "$work/bin/$1"; }
stub dpkg-query 'echo "unknown ok not-installed"'
stub id 'echo 0'
stub sleep 'exit 0'
stub apt-get 'echo "apt-get $*" >>"$WORK/apt.log"'
# lslocks: unattended-upgrades holds dpkg's lock for the first $HOLD calls.
stub lslocks 'n=$(cat "$WORK/calls" 2>/dev/null || echo 0); echo $((n + 1)) >"$WORK/calls"
[ "$n" -lt "$HOLD" ] && echo "812 unattended-upgr /var/lib/dpkg/lock-frontend"; exit 0'
export WORK=$work PATH="$work/bin:$PATH"

HOLD=3 "$source_dir/scripts/install-deps" --minimal >"$work/out" 2>&1 || fail "exit $?: $(cat "$work/out")"
[ "$(grep -c 'apt is busy' "$work/out")" = 1 ] || fail "not one 'apt is busy' line: $(cat "$work/out")"
grep -q 'apt is busy (unattended-upgr (pid 812) holds its lock); waiting for it' "$work/out" || fail "$(cat "$work/out")"
grep -q 'install-deps: done' "$work/out" || fail "no 'done': $(cat "$work/out")"
grep -q 'apt-get -o DPkg::Lock::Timeout=600 install' "$work/apt.log" || fail "apt-get: $(cat "$work/apt.log")"

rm -f "$work/calls" "$work/apt.log"
if HOLD=100000 "$source_dir/scripts/install-deps" --minimal >"$work/out" 2>&1; then fail "a lock held for ever passed"; fi
[ "$(grep -c . "$work/out")" = 2 ] || fail "not two lines (waiting, giving up): $(cat "$work/out")"
grep -q 'install-deps: error: apt is still busy after 600 s (unattended-upgr (pid 812) holds its lock); run scripts/install-deps again' \
  "$work/out" || fail "$(cat "$work/out")"
[ ! -e "$work/apt.log" ] || fail "apt-get ran while the lock was held: $(cat "$work/apt.log")"
echo "install-deps waits for apt's lock with one line, and gives up after 10 minutes with one line"
