#!/usr/bin/env bash
# Runs the README's "A typical session" recipe exactly as written: the fenced bash block after the
# marker <!-- scipy-recipe:test -->, in an empty temporary directory whose build/ is the build
# tree under test (the recipe names build/ as the quick start's preset makes it), with the
# Python that CMake found first on the PATH. Fails when the marker or block is missing or the
# recipe fails (it checks its own result).
# usage: readme_recipe.sh README.md BUILD_DIR PYTHON
set -euo pipefail
readme=$1 build=$(cd "$2" && pwd) python=$3
recipe=$(awk '/<!-- scipy-recipe:test/ { found = 1; next }
              found && /^```bash/ { inside = 1; next }
              inside && /^```/ { exit }
              inside { print }' "$readme")
[ -n "$recipe" ] || { echo "no recipe after <!-- scipy-recipe:test --> in $readme"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$build" "$work/build"
mkdir "$work/bin" && ln -s "$python" "$work/bin/python3"
cd "$work"
echo "+ recipe from $readme:"
echo "$recipe"
PATH="$work/bin:$PATH" BLOCKMM_MPI=0 bash -euo pipefail -c "$recipe"
