#!/usr/bin/env bash
# Where a GPU run's wall time goes: for each case, REPS runs of the working tree's build to a
# target (null: /dev/null, shm: /dev/shm) with --stats=json, printing the phases, the backend's
# steps and the wall time the process took (start-up and teardown are wall - total).
#   bench/device/phases.sh "D4 G1 E1" null 3      (after gpu_session.sh build)
set -uo pipefail
cd "$(dirname "$0")/../.."
cases=${1:-D4}
target=${2:-null}
reps=${3:-3}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export BLOCKMM_BUILD=$PWD/build-gpu
data=/tmp/blockmm-bench
mkdir -p "$data"
source bench/cases.sh
extra_cases=${EXTRA_CASES:-"E1k 1048576 1 10485760 1.0"}  # name n m k skew
for name in $cases; do
  line=$(echo "$BLOCKMM_CASES" | awk -v n="$name" '$1 == n')
  if [ -n "$line" ]; then
    set -- $line; make_case "$data" "$1" "$2" "$3" "$4" 16
  else
    line=$(echo "$extra_cases" | awk -v n="$name" '$1 == n')
    [ -n "$line" ] || { echo "unknown case $name"; continue; }
    set -- $line
    [ -f "$data/$1.A.bin" ] || "$BLOCKMM_BUILD/blockmm-gen" "$data/$1.A.bin" --n "$2" --m "$3" --k "$4" --skew "$5" --max-value 1023 --seed 1 -q
    [ -f "$data/$1.B.bin" ] || "$BLOCKMM_BUILD/blockmm-gen" "$data/$1.B.bin" --n "$2" --m "$3" --k "$4" --max-value 1023 --seed 2 -q
  fi
  cat "$data/$name.A.bin" "$data/$name.B.bin" > /dev/null
  out=/dev/null; [ "$target" = shm ] && out=/dev/shm/$name.C.bin
  for rep in $(seq 1 "$reps"); do
    [ "$target" = null ] || rm -f "$out"
    /usr/bin/time -f "%e %M" -o "$OUT/time.txt" "$BLOCKMM_BUILD/blockmm" --backend "${BACKEND:-cuda}" -q --stats=json \
      "$data/$name.A.bin" "$data/$name.B.bin" "$out" > "$OUT/$name.$rep.json" 2> "$OUT/err.txt" ||
      { echo "$name FAILED: $(tail -2 "$OUT/err.txt")"; continue; }
    python3 - "$name" "$OUT/$name.$rep.json" "$OUT/time.txt" <<'PY'
import json, sys
name, stats, times = sys.argv[1:]
s = json.load(open(stats)); t = s["seconds"]
wall, rss = open(times).read().split()[-2:]
steps = " ".join(f"[{k}: {v:.3f}]" for k, v in s.get("backend_seconds", {}).items())
print(f"{name}: wall {float(wall):.3f} total {t['total']:.3f} | read {t['read']:.3f} setup {t.get('setup', 0):.3f} "
      f"build {t['build']:.3f} symbolic {t['symbolic']:.3f} numeric {t['numeric']:.3f} (kernels {t.get('numeric_compute', 0):.3f} "
      f"write {t['write']:.3f}) commit {t['commit']:.3f} | RSS {int(rss) / 1024:.0f} MB | {s.get('device', '')} | {steps}")
PY
  done
  [ "$target" = null ] || rm -f "$out"
done
