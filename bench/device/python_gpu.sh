#!/usr/bin/env bash
# blockmm.multiply(backend="cuda") in process against the binary --backend cuda > /dev/null, on one
# GPU machine (issue 50): the n 16 384, m 4 product of two density-0.03 inputs (1.18 GB of output),
# 3 runs each in one Python process (the first in-process run includes CUDA's start there; the
# binary + blockmm.read of its file once), the in-process product's bytes compared with the
# binary's output. Under 2 minutes on an H100. Needs blockmm._native in BUILD_DIR (python3-dev
# where it was built): without it, says so and exits 77.
# Writes its log under $OUT (default: a scratch folder), its inputs in /dev/shm; prints the table last.
# usage: bench/device/python_gpu.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$(mktemp -d)}
work=$(mktemp -d /dev/shm/blockmm-python-gpu.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$work"' EXIT
nvidia-smi -L || { echo "no GPU visible"; exit 77; }
"$build/blockmm-gen" "$work/A.bin" -n 16384 -m 4 --density 0.03 --seed 3 -q
"$build/blockmm-gen" "$work/B.bin" -n 16384 -m 4 --density 0.03 --seed 4 -q
python=$(sed -n 's/^BLOCKMM_PYTHON:FILEPATH=//p' "$build/CMakeCache.txt")
"${python:-python3}" "$here/python_product.py" "$build" "$work/A.bin" "$work/B.bin" cuda 3 "$work" 1 2>&1 \
  | tee "$out/python_gpu.log"
