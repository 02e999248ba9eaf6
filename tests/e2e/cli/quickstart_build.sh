#!/usr/bin/env bash
# The README's first command builds what it runs and no more (issue 53: it built the tests,
# the benchmarks and CUDA for two GPUs, 735 CPU-s where blockmm is 135): it builds the
# `programs` target, which must make every program that command and "A typical session" run,
# and compile nothing of tests/ or bench/. Reads Ninja's plan (`ninja -t commands`); skips with
# another generator. Where the build has blockmm's Python extension (blockmm._native, which
# `blockmm.multiply` in the session's last line imports; `cmake --install` installs it), `programs`
# must link it too: it once did not, and that line failed with ImportError after the quick start.
# usage: quickstart_build.sh README.md BUILD_DIR GENERATOR MAKE_PROGRAM [NATIVE_MODULE_FILE_NAME]
set -euo pipefail
readme=$1 build=$2 generator=$3 ninja=$4 native=${5:-}
fail() { echo "FAIL: $*"; exit 1; }
first=$(awk '/^## Quick start/ { found = 1 } found && /^```bash/ { getline; print; exit }' "$readme")
[ -n "$first" ] || fail "no first command under '## Quick start' in $readme"
echo "first command: $first"
[[ $first == *"cmake --build --preset release --target programs &&"* ]] ||
  fail "the first command does not build the programs target alone"
[[ $generator == Ninja ]] || { echo "SKIP: generator '$generator' (this test reads Ninja's plan)"; exit 77; }
plan=$("$ninja" -C "$build" -t commands programs) || fail "ninja has no plan for 'programs'"
tests=$(grep -Ec "(/tests/|/bench/)[^ ]*\.(cpp|cu)( |$)" <<<"$plan" || true)
[ "$tests" = 0 ] || fail "programs compiles $tests sources of tests/ or bench/: $(grep -Eo "(/tests/|/bench/)[^ ]*\.(cpp|cu)" <<<"$plan" | head -3)"
# The C++ programs those commands run are linked by it; the Python ones are written by cmake.
session=$(awk '/<!-- scipy-recipe:test/ { found = 1; next } found && /^```bash/ { inside = 1; next }
               inside && /^```/ { exit } inside { print }' "$readme")
programs=$(grep -Eo '(^|[ /(&])blockmm(-[a-z]+)?( |$)' <<<"$first"$'\n'"$session" | tr -d ' /(&' | sort -u)
[ -n "$programs" ] || fail "no blockmm program named in the quick start or the session"
for program in $programs; do
  grep -Eq -- "-o $program( |$)" <<<"$plan" && continue  # linked by it
  # Else a script cmake writes when it configures (the Python tools, blockmm-python).
  [ -f "$build/$program" ] && [ "$(head -c 2 "$build/$program")" = "#!" ] ||
    fail "the quick start runs $program, which the programs target does not make"
done
if [ -n "$native" ]; then
  grep -Fq -- "-o python/blockmm/$native" <<<"$plan" ||
    fail "programs does not link the Python extension python/blockmm/$native (blockmm.multiply, installed by cmake --install)"
  programs+=$'\n'"python/blockmm/$native"
fi
echo "programs makes $(tr '\n' ' ' <<<"$programs")and compiles nothing of tests/ or bench/"
