#!/usr/bin/env bash
# The input distribution, baseline against this tree, in one call on the GPU machine (or any
# machine): builds bench/dist_bench (distribute() and the operand build, no numeric phase) CPU-only
# here and in a baseline tree (a `git archive` tarball, BASELINE_TAR, e.g. of main; dist_bench.cpp
# and its CMake lines are copied in where the baseline lacks them), generates the case, and runs
# both alternately on RANKS ranks of THREADS threads (`--bind-to none`), this tree also with
# BLOCKMM_SIMULATE_NODES=1 (every rank its own node). Prints each rank 0 line and the slowest rank's
# phases; logs and the summary go to $OUT.
#   BASELINE_TAR=/path/main.tar bench/device/dist_probe.sh [CASE (D4)] [RANKS (2)] [THREADS (8)] [REPS (3)]
# The tarball: `git archive -o main.tar main` in the checkout, carried with the call.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
name=${1:-D4}
ranks=${2:-2}
threads=${3:-8}
reps=${4:-3}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
summary=$OUT/dist_probe.txt
jobs=$(nproc)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

build_tree() {  # source-dir build-dir log
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBLOCKMM_ENABLE_CUDA=OFF -DBLOCKMM_BUILD_TESTS=OFF > "$3" 2>&1 &&
    ninja -C "$2" -j"$jobs" dist_bench blockmm-gen >> "$3" 2>&1
}

build_tree "$root" "$root/build-dist" "$OUT/build.log" || { echo "build failed: $(tail -3 "$OUT/build.log")" | tee -a "$summary"; exit 1; }
new=$root/build-dist/dist_bench
old=
if [ -n "${BASELINE_TAR:-}" ]; then
  base=/tmp/dist-baseline
  rm -rf "$base" && mkdir -p "$base" && tar -xf "$BASELINE_TAR" -C "$base"
  if [ ! -f "$base/bench/dist_bench.cpp" ]; then
    cp bench/dist_bench.cpp "$base/bench/"
    sed -n '/^# The input distribution and the operand build alone/,/^set_target_properties(dist_bench/p' bench/CMakeLists.txt >> "$base/bench/CMakeLists.txt"
  fi
  if build_tree "$base" "$base/build" "$OUT/baseline_build.log"; then old=$base/build/dist_bench; else
    echo "baseline build failed: $(tail -3 "$OUT/baseline_build.log")" | tee -a "$summary"; fi
fi

export BLOCKMM_BUILD=$root/build-dist
data=/tmp/blockmm-bench
mkdir -p "$data"
source bench/cases.sh
line=$(printf "%s\n%s\n" "$BLOCKMM_CASES" "$BLOCKMM_SMALL_CASES" | awk -v n="$name" '$1 == n')
[ -n "$line" ] || { echo "no case $name" | tee -a "$summary"; exit 1; }
set -- $line
make_case "$data" "$1" "$2" "$3" "$4" "$jobs"
cat "$data/$name.A.bin" "$data/$name.B.bin" > /dev/null  # inputs in the page cache, as in the issue's runs

echo "== $name, $ranks ranks x $threads threads, $(nproc) cores, $(date +%T)" | tee -a "$summary"
run_one() {  # label binary simulate
  local label=$1 bin=$2 simulate=$3
  mpirun -np "$ranks" --bind-to none -x BLOCKMM_SIMULATE_NODES="$simulate" "$bin" "$data/$name.A.bin" "$data/$name.B.bin" \
    --threads "$threads" > "$OUT/run.txt" 2>&1 < /dev/null || { echo "  $label FAILED: $(tail -3 "$OUT/run.txt")" | tee -a "$summary"; return; }
  echo "  $label $(grep '^rank 0 ' "$OUT/run.txt" | cut -d' ' -f3-) | $(grep '^slowest' "$OUT/run.txt")" | tee -a "$summary"
}
for rep in $(seq "$reps"); do
  [ -n "$old" ] && run_one "old" "$old" 0
  run_one "new" "$new" 0
  run_one "sim" "$new" 1
done
