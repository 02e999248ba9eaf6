#!/usr/bin/env bash
# Issue 40 on one GPU machine (the tensor-core block kernel, int8 dense products in K pieces,
# the measured path choice), in one or two calls. Builds blockmm, blockmm-gen, blockmm-cmp and the
# GPU test binary (CUDA 9.0 only, all cores); with BASELINE_TAR (a `git archive` of main's e70f0ac,
# carried in the tree) also that commit's blockmm beside it, for "before" in the same call.
# Then the stages asked for, in order:
#   tests     blockmm_gpu_tests whole: the new suites CudaTensorCoreBlocks and CudaDenseKPieces
#             and the existing CudaBackend ones.
#   sanitize  compute-sanitizer memcheck and racecheck (blockmm's kernels) on small new-kernel tests.
#   identity  cuda against the cpu backend byte for byte (cmp) on random blockmm-gen inputs: m 8,
#             16, 32 on the automatic path, the tensor-core sparse path and the dense path; one
#             dense case with n > 133136 and values up to 127 (one int8 plane, K in two pieces;
#             the dense tiles span every row, so the one plane keeps it to about 4 s).
#   timing    issue 40's cases to /dev/null, after (this tree) and before (BASELINE_TAR's binary,
#             or this binary with the choices that select the old paths: BLOCKMM_CUDA_TC=0 for
#             the CUDA-core kernels, BLOCKMM_CUDA_DENSE_TYPE=f64 for float64 above n = 131056):
#             the four 5 % cases (n 65 536, m 4, 8, 16, 32: auto, sparse, dense), the compute-bound
#             sparse cases (n 100 000, a tenth of the blocks, m 8, 16, 32), and n 131 072, m 8, a
#             quarter of the blocks (BEFORE_BIG=1 adds the old float64 run, about 120 s).
#   bench/device/kernels_check.sh tests sanitize identity
#   BASELINE_TAR=bench-baseline.tar bench/device/kernels_check.sh timing
# Inputs are generated into /dev/shm and removed at the end; logs under $OUT/logs (one tarball),
# the summary in $OUT/summary.txt. Every stage stops starting runs STOP_AFTER seconds (default
# 530) after the script began.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$PWD
OUT=${OUT:-/tmp/out}
final_out=$OUT
OUT=$final_out/logs
mkdir -p "$OUT"
summary=$final_out/summary.txt
build=${KERNELS_BUILD:-$root/build-kernels}  # an existing build (team_session.sh's build-gpu) skips the build
old_build=/tmp/baseline/build
data=/dev/shm/blockmm-kernels-check
mkdir -p "$data"
trap 'rm -rf "$data"' EXIT
jobs=$(nproc)
stop_after=${STOP_AFTER:-530}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

note() { echo "== $*" | tee -a "$summary"; }
time_left() { [ "$SECONDS" -lt "$stop_after" ] || { echo "  (stopped: ${SECONDS}s gone)" | tee -a "$summary"; return 1; }; }

stage_build() {
  note "build $(date +%T) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
  local want_old=$1
  if [ "$want_old" = 1 ] && [ -n "${BASELINE_TAR:-}" ] && [ ! -x "$old_build/blockmm" ]; then
    (mkdir -p /tmp/baseline && tar -xf "$BASELINE_TAR" -C /tmp/baseline &&
      cmake -S /tmp/baseline -B "$old_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
      ninja -C "$old_build" -j"$jobs" blockmm) > "$OUT/build_old.log" 2>&1 &
  fi
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build.log" 2>&1 &&
    ninja -C "$build" -j"$jobs" blockmm blockmm-gen blockmm-cmp blockmm_gpu_tests >> "$OUT/build.log" 2>&1
  local rc=$?
  wait
  tail -2 "$OUT/build.log" | tee -a "$summary"
  [ "$want_old" = 1 ] && [ -n "${BASELINE_TAR:-}" ] &&
    { [ -x "$old_build/blockmm" ] && echo "  baseline built: $old_build/blockmm" || echo "  BASELINE BUILD FAILED: $(tail -3 "$OUT/build_old.log")"; } | tee -a "$summary"
  return $rc
}

stage_tests() {
  note "GPU tests $(date +%T)"
  timeout 420 "$build/tests/kernels/cuda/gpu/blockmm_gpu_tests" > "$OUT/gpu_tests.log" 2>&1
  echo "  exit $?: $(grep -cE '^\[       OK' "$OUT/gpu_tests.log") OK, $(grep -cE '^\[  FAILED  \] [A-Za-z]' "$OUT/gpu_tests.log") failed" | tee -a "$summary"
  grep -E '^\[  FAILED  \] [A-Za-z]|Failure|SKIPPED \]' "$OUT/gpu_tests.log" | sort -u | head -20 | tee -a "$summary"
  grep -E '^\[       OK \] (CudaTensorCoreBlocks|CudaDenseKPieces)' "$OUT/gpu_tests.log" | tee -a "$summary"
}

stage_sanitize() {
  note "compute-sanitizer $(date +%T)"
  local filter=${SANITIZE_FILTER:-CudaTensorCoreBlocks.EmptyOperandsAndTinyMatrices:CudaTensorCoreBlocks.SaturationEdge:CudaDenseKPieces.SaturationEdgeAcrossPieces}
  for tool in memcheck racecheck; do
    time_left || return
    local extra=()
    [ $tool = racecheck ] && extra=(--kernel-name kns=blockmm)  # shared memory of blockmm's kernels, not cuBLAS's
    timeout 240 compute-sanitizer --tool $tool "${extra[@]}" --error-exitcode 9 "$build/tests/kernels/cuda/gpu/blockmm_gpu_tests" \
      --gtest_filter="$filter" > "$OUT/sanitizer_$tool.log" 2>&1
    echo "  $tool: exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tail -1); $(grep -cE '^\[       OK' "$OUT/sanitizer_$tool.log") tests OK)" | tee -a "$summary"
  done
}

gen() {  # name n m density max_value [extra blockmm-gen options]
  local name=$1 n=$2 m=$3 density=$4 max=$5
  shift 5
  [ -f "$data/$name.A.bin" ] || "$build/blockmm-gen" "$data/$name.A.bin" --n "$n" --m "$m" --density "$density" \
    --max-value "$max" --seed 1 -q --threads "$jobs" "$@"
  [ -f "$data/$name.B.bin" ] || "$build/blockmm-gen" "$data/$name.B.bin" --n "$n" --m "$m" --density "$density" \
    --max-value "$max" --seed 2 -q --threads "$jobs" "$@"
}

stage_identity() {
  note "byte identity, cuda against the cpu backend $(date +%T)"
  local cases="I8 2048 8 0.3 65535
I16 4096 16 0.2 1023
I32 4096 32 0.1 65535
I8s 32768 8 0.02 65535
Ibig 134000 8 0.000012 127"
  while read -r name n m density max; do
    time_left || return
    gen "$name" "$n" "$m" "$density" "$max"
    local a=$data/$name.A.bin b=$data/$name.B.bin
    "$build/blockmm" --backend cpu -q "$a" "$b" "$data/$name.cpu.bin" 2> "$OUT/$name.cpu.err" ||
      { echo "  $name: cpu run failed: $(tail -1 "$OUT/$name.cpu.err")" | tee -a "$summary"; continue; }
    local paths="auto:- sparse:BLOCKMM_CUDA_DENSE=0 dense:BLOCKMM_CUDA_DENSE=1"
    [ "$name" = Ibig ] && paths="dense:BLOCKMM_CUDA_DENSE=1 sparse:BLOCKMM_CUDA_DENSE=0"
    for path in $paths; do
      local label=${path%%:*} setting=${path#*:}
      [ "$setting" = - ] && setting=BLOCKMM_NOTHING=1
      env "$setting" "$build/blockmm" --backend cuda -q --stats=json "$a" "$b" "$data/$name.cuda.bin" \
        > "$OUT/$name.$label.json" 2> "$OUT/$name.$label.err" ||
        { echo "  $name $label: FAILED: $(tail -1 "$OUT/$name.$label.err")" | tee -a "$summary"; continue; }
      local device; device=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['device'])" "$OUT/$name.$label.json")
      if cmp -s "$data/$name.cpu.bin" "$data/$name.cuda.bin"; then
        echo "  $name (n=$n m=$m) $label: identical ($(stat -c %s "$data/$name.cuda.bin") bytes) on $device" | tee -a "$summary"
      else
        echo "  $name (n=$n m=$m) $label: DIFFERENT on $device: $("$build/blockmm-cmp" "$data/$name.cpu.bin" "$data/$name.cuda.bin" 2>&1 | head -2)" | tee -a "$summary"
      fi
      rm -f "$data/$name.cuda.bin"
    done
    rm -f "$data/$name.cpu.bin" "$a" "$b"
  done <<< "$cases"
}

# One run to /dev/null: label, the environment settings (space-separated, or -), binary, case.
run_timed() {
  local label=$1 setting=$2 bin=$3 name=$4
  [ "$setting" = - ] && setting=BLOCKMM_NOTHING=1
  time_left || return 1
  # shellcheck disable=SC2086  # several settings on purpose
  /usr/bin/time -f "%e" -o "$OUT/time.txt" env $setting "$bin" --backend cuda -q --stats=json \
    "$data/$name.A.bin" "$data/$name.B.bin" /dev/null > "$OUT/$name.$label.json" 2> "$OUT/$name.$label.err" ||
    { echo "    $label: FAILED: $(tail -1 "$OUT/$name.$label.err")" | tee -a "$summary"; return 0; }
  python3 - "$label" "$OUT/$name.$label.json" "$OUT/time.txt" <<'PY' | tee -a "$summary"
import json, sys
label, stats, times = sys.argv[1:]
s = json.load(open(stats)); t = s["seconds"]
wall = float(open(times).read().split()[-1])
kernels = t.get("numeric_compute", 0)
steps = s.get("backend_seconds", {})
print(f"    {label:14s} wall {wall:7.2f} s | numeric {t['numeric']:7.3f} s, kernels {kernels:7.3f} s | useful "
      f"{s['useful_macs'] / t['numeric'] / 1e12 if t['numeric'] else 0:6.2f} T MAC/s over numeric, "
      f"{s['useful_macs'] / kernels / 1e12 if kernels else 0:6.2f} over kernels | predicted sparse "
      f"{steps.get('numeric: predicted sparse path', 0):.2f} s, dense {steps.get('numeric: predicted dense path', 0):.2f} s | "
      f"{s['device']}")
PY
}

stage_timing() {
  local old=""
  [ -x "$old_build/blockmm" ] && old=$old_build/blockmm
  local new=$build/blockmm
  note "timing $(date +%T) (before: ${old:-this binary with the old paths choices})"
  # name n m density: the four 5 % cases; the compute-bound sparse cases; the large dense case.
  local cases="F4 65536 4 0.05
F8 65536 8 0.05
F16 65536 16 0.05
F32 65536 32 0.05
S8 100000 8 0.1
S16 100000 16 0.1
S32 100000 32 0.1
L8 131072 8 0.25"
  while read -r name n m density; do
    time_left || return
    gen "$name" "$n" "$m" "$density" 1023
    cat "$data/$name.A.bin" "$data/$name.B.bin" > /dev/null
    echo "  $name: n $n, m $m, $density of the blocks, values up to 1023" | tee -a "$summary"
    case $name in
      F*)
        run_timed "new auto" - "$new" "$name"
        run_timed "new sparse" BLOCKMM_CUDA_DENSE=0 "$new" "$name"
        run_timed "new dense" BLOCKMM_CUDA_DENSE=1 "$new" "$name"
        if [ -n "$old" ]; then run_timed "old auto" - "$old" "$name"
        else run_timed "cuda cores" "BLOCKMM_CUDA_TC=0 BLOCKMM_CUDA_DENSE=0" "$new" "$name"; fi ;;
      S*)
        run_timed "new sparse" BLOCKMM_CUDA_DENSE=0 "$new" "$name"
        run_timed "old sparse" "BLOCKMM_CUDA_TC=0 BLOCKMM_CUDA_DENSE=0" "${old:-$new}" "$name"
        run_timed "new auto" - "$new" "$name" ;;
      L*)
        run_timed "new auto" - "$new" "$name"
        run_timed "new dense" BLOCKMM_CUDA_DENSE=1 "$new" "$name"
        run_timed "new sparse" BLOCKMM_CUDA_DENSE=0 "$new" "$name"
        [ "${BEFORE_BIG:-0}" = 1 ] && run_timed "old (float64)" BLOCKMM_CUDA_DENSE_TYPE=f64 "${old:-$new}" "$name" ;;
    esac
    rm -f "$data/$name.A.bin" "$data/$name.B.bin"
  done <<< "$cases"
}

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(tests sanitize identity)
want_old=0
for stage in "${stages[@]}"; do [ "$stage" = timing ] && want_old=1; done
if [ -z "${KERNELS_BUILD:-}" ] || [ "$want_old" = 1 ]; then
  stage_build "$want_old" || { echo "build failed"; tail -40 "$OUT/build.log"; exit 1; }
fi
for stage in "${stages[@]}"; do
  case $stage in
    tests) stage_tests ;;
    sanitize) stage_sanitize ;;
    identity) stage_identity ;;
    timing) stage_timing ;;
    *) echo "unknown stage $stage" | tee -a "$summary" ;;
  esac
done
note "done $(date +%T), ${SECONDS}s"
tar czf "$final_out/logs.tgz" -C "$final_out" logs && rm -rf "$OUT"
cat "$summary"
