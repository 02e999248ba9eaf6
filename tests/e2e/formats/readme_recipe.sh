#!/usr/bin/env bash
# Runs the README's "A typical session" exactly as written and as a user runs it: the fenced
# bash block after the marker <!-- scipy-recipe:test -->, in an empty temporary directory whose
# build/ is the build tree under test (the block names build/ as the quick start's preset makes
# it), with a python3 first on the PATH that is not the tools' and has no numpy (a venv's, as
# pyenv's, conda's or a module's may be): the block must not lean on the python3 it finds
# (issue 53). Fails when the marker or block is missing, when the block fails (it checks its own
# result), or when it leaves files outside its session folder.
# A build without blockmm._native (sanitizer and fuzzing builds, whose modules no plain
# interpreter can load) runs the block less its lines that call blockmm.multiply, and says so.
# usage: readme_recipe.sh README.md BUILD_DIR PYTHON [with-extension|without-extension]
set -euo pipefail
readme=$1 build=$(cd "$2" && pwd) python=$3 extension=${4:-with-extension}
recipe=$(awk '/<!-- scipy-recipe:test/ { found = 1; next }
              found && /^```bash/ { inside = 1; next }
              inside && /^```/ { exit }
              inside { print }' "$readme")
[ -n "$recipe" ] || { echo "no recipe after <!-- scipy-recipe:test --> in $readme"; exit 1; }
if [ "$extension" = without-extension ]; then
  grep -q 'blockmm\.multiply(' <<<"$recipe" || { echo "FAIL: the recipe no longer calls blockmm.multiply: update this test"; exit 1; }
  echo "note: this build has no blockmm._native: the recipe runs without its blockmm.multiply lines"
  recipe=$(grep -v 'blockmm\.multiply(' <<<"$recipe")
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/checkout"
ln -s "$build" "$work/checkout/build"
# The user's python3: a fresh venv without the system's packages, its bin/ first on the PATH as
# activating it does; else (no venv module) the interpreter without its site directories.
# Either way it must not import numpy.
if "$python" -m venv --without-pip "$work/venv" >/dev/null 2>&1; then
  first="$work/venv/bin"
else
  first="$work/bin"
  mkdir "$first"
  printf '#!/bin/sh\nexec "%s" -S -s "$@"\n' "$python" >"$first/python3"
  chmod +x "$first/python3"
fi
export PATH="$first:$PATH" BLOCKMM_MPI=0
unset PYTHONPATH PYTHONHOME
if python3 -c 'import numpy' 2>/dev/null; then
  echo "FAIL: the test's python3 ($(command -v python3)) imports numpy: it would not stand for a user's without it"
  exit 1
fi
cd "$work/checkout"
echo "+ recipe from $readme, python3 = $(command -v python3) (no numpy):"
echo "$recipe"
bash -euo pipefail -c "$recipe"
# Everything it made is in its own folder: the checkout holds build/ and that folder alone.
left=$(find . -mindepth 1 -maxdepth 1 ! -name build ! -name session -printf '%f\n')
[ -z "$left" ] || { echo "FAIL: the session left files in the checkout: $left"; exit 1; }
[ -f session/C.bin ] || { echo "FAIL: no session/C.bin: the session's files went elsewhere"; exit 1; }
echo "the typical session passes with a python3 without numpy first on the PATH, its files in session/"
