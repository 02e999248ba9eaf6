#!/usr/bin/env bash
# The conformance tests follow the COL380 data (issue 53 item 4): adding ../shared after the
# first build once left CTest running a placeholder name that no longer existed, a pass of
# nothing. col380_stamp.cmake rewrites its header when pairs.tsv appears or changes (so the next
# build rediscovers the pairs) and leaves it alone otherwise (no rebuild); the test program
# lists the pairs of its build whatever the data at run time, and fails, saying to build again,
# when the data it finds is not the data it was built with.
# usage: discovery_test.sh CMAKE STAMP_SCRIPT CONFORMANCE_PROGRAM
set -euo pipefail
cmake=$1 script=$2 program=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir "$work/data" "$work/empty"
stamp() { "$cmake" -DDATA="$work/data" -DOUT="$work/stamp.hpp" -P "$script"; }
mtime() { stat -c %y "$work/stamp.hpp"; }

stamp
grep -q 'kCol380PresentAtBuild = 0;' "$work/stamp.hpp" || fail "absent data: $(cat "$work/stamp.hpp")"
first=$(mtime)
sleep 0.01
stamp
[ "$(mtime)" = "$first" ] || fail "the header was rewritten with nothing changed (every build would recompile)"
printf 'x/A.bin\tx/B.bin\t-\tnote\n' >"$work/data/pairs.tsv"
stamp
grep -q 'kCol380PresentAtBuild = 1;' "$work/stamp.hpp" || fail "data added: the header still says absent"
grep -q '{0x78,0x2f,0x41,' "$work/stamp.hpp" || fail "data added: the header lacks pairs.tsv's bytes"
[ "$(mtime)" != "$first" ] || fail "data added: the header was not rewritten"

# The program's list is its build's, whatever BLOCKMM_COL380_DIR says at run time.
built=$("$program" --gtest_list_tests)
[ "$(BLOCKMM_COL380_DIR="$work/data" "$program" --gtest_list_tests)" = "$built" ] ||
  fail "the list of tests follows the run-time data, not the build's"
# Data other than the build's fails, naming the fix; no data skips.
if BLOCKMM_COL380_DIR="$work/data" "$program" --gtest_filter='Col380Data.*' >"$work/other.txt" 2>&1; then
  fail "data other than the build's passed: $(cat "$work/other.txt")"
fi
grep -q 'since this test program was built.*build again' "$work/other.txt" || fail "no 'build again': $(cat "$work/other.txt")"
BLOCKMM_COL380_DIR="$work/empty" "$program" --gtest_filter='Col380Data.*' >"$work/none.txt" 2>&1 ||
  fail "no data failed: $(cat "$work/none.txt")"
grep -q 'SKIPPED' "$work/none.txt" || fail "no data did not skip: $(cat "$work/none.txt")"
echo "the stamp follows the data, the program's list is its build's, other data fails with 'build again'"
