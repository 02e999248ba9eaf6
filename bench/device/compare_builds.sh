#!/usr/bin/env bash
# Before/after on the GPU machine, in one call: builds a baseline tree (a `git archive` tarball,
# BASELINE_TAR) beside the working tree's build-gpu, generates the bench cases, and runs both
# binaries alternately on each output target, then checks the outputs byte for byte.
#   bench/device/compare_builds.sh CASES TARGETS REPS     e.g. "G1 D4" "null shm" 3
# Targets: null (/dev/null: the compute pipeline alone), shm (/dev/shm), disk (the local disk).
# Logs and a summary go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
cases=${1:-"G1 D3 D4"}
targets=${2:-null}
reps=${3:-3}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
summary=$OUT/compare.txt
export BLOCKMM_BUILD=$root/build-gpu
data=/tmp/blockmm-bench
mkdir -p "$data"
source bench/cases.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
new=$BLOCKMM_BUILD/blockmm
old=/tmp/baseline/build/blockmm
if [ -n "${BASELINE_TAR:-}" ] && [ ! -x "$old" ]; then
  mkdir -p /tmp/baseline && tar -xf "$BASELINE_TAR" -C /tmp/baseline &&
    cmake -S /tmp/baseline -B /tmp/baseline/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      > "$OUT/baseline_build.log" 2>&1 && ninja -C /tmp/baseline/build blockmm >> "$OUT/baseline_build.log" 2>&1 ||
    echo "baseline build failed" | tee -a "$summary"
fi

target_path() {
  case $1 in
    null) echo /dev/null ;;
    shm) echo "/dev/shm/$2.C.bin" ;;
    disk) echo "$data/$2.C.bin" ;;
  esac
}

run_one() {  # label binary case target
  local label=$1 bin=$2 name=$3 target=$4
  local out
  out=$(target_path "$target" "$name")
  [ "$target" = null ] || rm -f "$out"
  /usr/bin/time -f "%e %M" -o "$OUT/time.txt" "$bin" --backend cuda -q --stats=json "$data/$name.A.bin" "$data/$name.B.bin" "$out" \
    > "$OUT/stats.json" 2> "$OUT/err.txt" || { echo "  $label $name -> $target FAILED: $(tail -2 "$OUT/err.txt")" | tee -a "$summary"; return; }
  python3 - "$label" "$name" "$target" "$OUT/stats.json" "$OUT/time.txt" <<'PY' | tee -a "$summary"
import json, sys
label, name, target, stats, times = sys.argv[1:]
s = json.load(open(stats)); t = s["seconds"]
wall, rss = open(times).read().split()[-2:]
print(f"  {label:4s} {name} -> {target:4s}: wall {float(wall):.3f} s | read {t['read']:.3f} build {t['build']:.3f} "
      f"setup {t.get('setup', 0):.3f} symbolic {t['symbolic']:.3f} numeric {t['numeric']:.3f} "
      f"(kernels {t.get('numeric_compute', 0):.3f}, write {t['write']:.3f}) commit {t['commit']:.3f} | "
      f"RSS {int(rss) / 1024:.0f} MB | {s.get('device', '')}")
PY
  [ "$target" = null ] || rm -f "$out"
}

for name in $cases; do
  line=$(echo "$BLOCKMM_CASES" | awk -v n="$name" '$1 == n')
  set -- $line
  make_case "$data" "$1" "$2" "$3" "$4" 16
  cat "$data/$name.A.bin" "$data/$name.B.bin" > /dev/null
  echo "== $name (n=$2 m=$3 k=$4) $(date +%T)" | tee -a "$summary"
  for target in $targets; do
    for rep in $(seq 1 "$reps"); do
      [ -x "$old" ] && run_one old "$old" "$name" "$target"
      run_one new "$new" "$name" "$target"
    done
  done
  if [ -x "$old" ] && [ "${IDENTITY:-1}" = 1 ]; then
    "$old" --backend cuda -q "$data/$name.A.bin" "$data/$name.B.bin" /dev/shm/old.C.bin &&
      "$new" --backend cuda -q "$data/$name.A.bin" "$data/$name.B.bin" /dev/shm/new.C.bin &&
      { cmp /dev/shm/old.C.bin /dev/shm/new.C.bin && echo "  identical: old cuda = new cuda ($(stat -c %s /dev/shm/new.C.bin) bytes)" ||
        echo "  DIFFERENT: old cuda vs new cuda"; } | tee -a "$summary"
    rm -f /dev/shm/old.C.bin /dev/shm/new.C.bin
  fi
done
