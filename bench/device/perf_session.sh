#!/usr/bin/env bash
# Measurements beside the scaling runs, on one GPU: a batch of products against separate runs
# (issue 42 item 12) and racecheck on the tensor-core kernel's tests. Needs build-gpu
# (bench/device/team_session.sh build; that script runs these as its stages batch and racecheck).
# Everything lands in $OUT: perf_summary.txt and perf_logs.tgz.
#   bench/device/perf_session.sh [batch] [racecheck]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$PWD
OUT=${OUT:-/tmp/out}
logs=$OUT/perf_logs
mkdir -p "$logs"
summary=$OUT/perf_summary.txt
data=/dev/shm/blockmm-perf
mkdir -p "$data"
trap 'rm -rf "$data"; tar -czf "$OUT/perf_logs.tgz" -C "$OUT" perf_logs 2>/dev/null; rm -rf "$logs"' EXIT
export BLOCKMM_BUILD=$root/build-gpu
bin=$BLOCKMM_BUILD/blockmm
source bench/cases.sh
note() { echo "== $* ($(date +%T))" | tee -a "$summary"; }
wall() { local t0 t1; t0=$(date +%s.%N); "$@"; local rc=$?; t1=$(date +%s.%N); python3 -c "print(round($t1 - $t0, 3))"; return $rc; }

stage_batch() {  # ten G1 products in one run against ten runs, to /dev/null; two to files, compared
  note "batch: ten G1 products"
  make_case "$data" G1 16384 8 4194304 "$(nproc)"
  cat "$data"/G1.*.bin > /dev/null
  : > "$data/batch.txt"
  for i in $(seq 1 10); do echo "$data/G1.A.bin $data/G1.B.bin /dev/null" >> "$data/batch.txt"; done
  for round in 1 2; do
    local separate=0
    for i in $(seq 1 10); do
      t=$(wall "$bin" -q "$data/G1.A.bin" "$data/G1.B.bin" /dev/null) || echo "  separate run failed" | tee -a "$summary"
      separate=$(python3 -c "print($separate + $t)")
    done
    b=$(wall "$bin" -q --batch "$data/batch.txt") || echo "  batch failed" | tee -a "$summary"
    echo "  round $round: ten separate runs $separate s, one batch of ten $b s, ratio $(python3 -c "print(round($b / $separate, 3))")" |
      tee -a "$summary"
  done
  printf '%s\n' "$data/G1.A.bin $data/G1.B.bin $data/batch1.bin" "--chunk-size 64M $data/G1.B.bin $data/G1.A.bin $data/batch2.bin" \
    > "$data/two.txt"
  "$bin" -q --batch "$data/two.txt" 2> "$logs/batch_two.err"
  "$bin" -q "$data/G1.A.bin" "$data/G1.B.bin" "$data/alone1.bin"
  "$bin" -q "$data/G1.B.bin" "$data/G1.A.bin" "$data/alone2.bin"
  for k in 1 2; do
    cmp -s "$data/batch$k.bin" "$data/alone$k.bin" && echo "  batch product $k: identical to its own run" ||
      echo "  batch product $k: DIFFERENT" ; done | tee -a "$summary"
  rm -f "$data"/batch*.bin "$data"/alone*.bin "$data"/G1.*
}

stage_racecheck() {
  note "racecheck on the tensor-core kernel's tests"
  local t=$BLOCKMM_BUILD/tests/kernels/cuda/gpu/blockmm_gpu_tests
  for filter in CudaTensorCoreBlocks.EmptyOperandsAndTinyMatrices CudaTensorCoreBlocks.SaturationEdge; do
    timeout 200 compute-sanitizer --tool racecheck --kernel-name kns=blockmm --error-exitcode 9 --print-limit 20 "$t" \
      --gtest_filter="$filter" > "$logs/racecheck_$filter.log" 2>&1
    echo "  $filter: exit $? ($(grep -E 'RACECHECK SUMMARY' "$logs/racecheck_$filter.log" | tail -1))" | tee -a "$summary"
    grep -E 'Race reported|Write Thread|Read Thread|Current Value|at 0x|in .*tensor' "$logs/racecheck_$filter.log" | head -12 |
      tee -a "$summary"
  done
}

for stage in "$@"; do "stage_$stage"; done
note "done"
