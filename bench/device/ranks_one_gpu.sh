#!/usr/bin/env bash
# mpirun -np 1 / -np 2 (both ranks on the one GPU) / -np 2 with BLOCKMM_SIMULATE_NODES=1 (every
# rank its own node: records cross as bytes) on one case, cuda backend, to /dev/null and /dev/shm.
# Prints wall, the phases, and the input bytes moved within and between nodes.
#   bench/device/ranks_one_gpu.sh [CASE (D4)]      (after gpu_session.sh build; case from cases.sh)
set -uo pipefail
cd "$(dirname "$0")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export BLOCKMM_BUILD=$PWD/build-gpu
name=${1:-D4}
data=/tmp/blockmm-bench
mkdir -p "$data"
source bench/cases.sh
line=$(echo "$BLOCKMM_CASES" | awk -v n="$name" '$1 == n')
set -- $line
make_case "$data" "$1" "$2" "$3" "$4" 16
cat "$data/$name.A.bin" "$data/$name.B.bin" > /dev/null
for mode in "1 0" "2 0" "2 1"; do
  set -- $mode
  for target in null shm; do
    out=/dev/null; [ $target = shm ] && out=/dev/shm/$name.ranks.bin
    start=$(date +%s%N)
    mpirun -np "$1" --bind-to none -x BLOCKMM_SIMULATE_NODES="$2" "$BLOCKMM_BUILD/blockmm" --backend cuda -q --stats=json \
      "$data/$name.A.bin" "$data/$name.B.bin" "$out" > /tmp/ranks.json 2> /tmp/ranks.err || { echo "FAILED: $(tail -3 /tmp/ranks.err)"; continue; }
    end=$(date +%s%N)
    python3 - "$name np$1 simulate=$2 -> $target" "$(( (end - start) / 1000000 ))" /tmp/ranks.json <<'PY'
import json, sys
label, wall_ms, path = sys.argv[1:]
s = json.load(open(path)); t = s["seconds"]; moved = s.get("input_bytes_moved", {})
w, b = moved.get("within_node", {}), moved.get("between_nodes", {})
print(f"{label:32s} wall {int(wall_ms) / 1000:.3f} s | read {t['read']:.3f} exchange {t['exchange']:.3f} build {t['build']:.3f} "
      f"setup {t['setup']:.3f} symbolic {t['symbolic']:.3f} numeric {t['numeric']:.3f} (kernels {t['numeric_compute']:.3f}, "
      f"write {t['write']:.3f}) | imbalance {s['imbalance']:.3f} | moved within node {w.get('records', 0) / 1e6:.0f} MB records + "
      f"{w.get('index', 0) / 1e6:.0f} MB row requests, between nodes {b.get('records', 0) / 1e6:.0f} MB")
PY
    rm -f /dev/shm/$name.ranks.bin
  done
done
