#!/usr/bin/env bash
# blockmm.multiply in process against the binary + blockmm.read of its file, on the VM (issue 50):
# the n 16 384, m 4 product of two density-0.03 inputs (1.18 GB of output), cpu backend, RUNS runs
# each (default 3), the binary's output in a scratch folder of TMPDIR. Prints bench/python_product.py's table.
# usage: bench/python_product.sh BUILD_DIR [RUNS]
set -euo pipefail
build=$(cd "$1" && pwd) runs=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/blockmm-gen" "$work/A.bin" -n 16384 -m 4 --density 0.03 --seed 3 -q
"$build/blockmm-gen" "$work/B.bin" -n 16384 -m 4 --density 0.03 --seed 4 -q
python=$(sed -n 's/^BLOCKMM_PYTHON:FILEPATH=//p' "$build/CMakeCache.txt")
"${python:-python3}" "$here/python_product.py" "$build" "$work/A.bin" "$work/B.bin" cpu "$runs" "$work"
