#!/usr/bin/env bash
# One GPU against two, on a two-GPU node: each case run plainly (one process, GPU 0), with
# `mpirun -np 1` and with `mpirun -np 2` (a GPU each), cuda backend, no binding options, to
# /dev/null and /dev/shm; with BASELINE (a second blockmm binary) both alternated. Wall is
# measured by the caller (launch and exit included); the phases come from --stats=json. The
# /dev/shm outputs of every mode are compared byte for byte in the first round.
#   bench/device/two_gpus.sh [CASES ("D4")] [ROUNDS (3)]    (after gpu_session.sh build)
set -uo pipefail
cd "$(dirname "$0")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export BLOCKMM_BUILD=$PWD/build-gpu
cases=${1:-D4}
rounds=${2:-3}
data=/tmp/blockmm-bench
mkdir -p "$data"
source bench/cases.sh
bins=("new=$BLOCKMM_BUILD/blockmm")
[ -n "${BASELINE:-}" ] && bins=("old=$BASELINE" "${bins[@]}")
for name in $cases; do
  line=$(echo "$BLOCKMM_CASES" | awk -v n="$name" '$1 == n')
  set -- $line
  make_case "$data" "$1" "$2" "$3" "$4" 16
  cat "$data/$name.A.bin" "$data/$name.B.bin" > /dev/null
  reference=""
  for round in $(seq "$rounds"); do
    for entry in "${bins[@]}"; do
      label=${entry%%=*} bin=${entry#*=}
      for mode in plain np1 np2; do
        for target in null shm; do
          out=/dev/null; [ $target = shm ] && out=/dev/shm/$name.two.bin
          case $mode in
            plain) cmd=(env CUDA_VISIBLE_DEVICES=0 "$bin") ;;
            np1) cmd=(mpirun -np 1 "$bin") ;;
            np2) cmd=(mpirun -np 2 "$bin") ;;
          esac
          start=$(date +%s%N)
          "${cmd[@]}" --backend cuda -q --stats=json "$data/$name.A.bin" "$data/$name.B.bin" "$out" > /tmp/two.json 2> /tmp/two.err ||
            { echo "$label $name $mode -> $target FAILED: $(tail -3 /tmp/two.err)"; continue; }
          end=$(date +%s%N)
          python3 - "$label $name $mode -> $target" "$(( (end - start) / 1000000 ))" /tmp/two.json <<'PY'
import json, sys
label, wall_ms, path = sys.argv[1:]
s = json.load(open(path)); t = s["seconds"]; moved = s.get("input_bytes_moved", {})
bytes_moved = sum(v for side in moved.values() for v in side.values())
print(f"{label:24s} wall {int(wall_ms) / 1000:.3f} s | read {t['read']:.3f} exchange {t.get('exchange', 0):.3f} "
      f"build {t['build']:.3f} setup {t['setup']:.3f} symbolic {t['symbolic']:.3f} numeric {t['numeric']:.3f} "
      f"(kernels {t['numeric_compute']:.3f}, write {t['write']:.3f}) commit {t['commit']:.3f} | imbalance "
      f"{s['imbalance']:.3f} | {s.get('distribution', '?')}, {bytes_moved / 1e6:.0f} MB moved")
PY
          if [ $target = shm ]; then
            if [ -z "$reference" ]; then reference=/dev/shm/$name.two.reference; mv "$out" "$reference"
            elif [ "$round" = 1 ]; then cmp -s "$reference" "$out" && echo "  same bytes" || echo "  DIFFERENT: $label $name $mode"; fi
            rm -f "$out"
          fi
        done
      done
    done
  done
  rm -f "/dev/shm/$name.two.reference"
done
