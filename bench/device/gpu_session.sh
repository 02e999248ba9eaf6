#!/usr/bin/env bash
# One call on the GPU machine: build, GPU tests, sanitizers, benchmarks. Logs go to $OUT.
#   bench/device/gpu_session.sh STAGE...   stages: build test sanitize bench:CASE[,CASE] verify:CASE[,CASE] suite
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
OUT=${OUT:-/tmp/out}
final_out=$OUT
OUT=$final_out/logs   # everything but the summary goes into one tarball (8 files come back at most)
mkdir -p "$OUT"
export BLOCKMM_BUILD=$root/build-gpu
data=/tmp/blockmm-bench
mkdir -p "$data"
source bench/cases.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
summary=$final_out/summary.txt

note() { echo "== $*" | tee -a "$summary"; }

stage_build() {
  note "build $(date +%T)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$summary"
  cmake -S . -B "$BLOCKMM_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build.log" 2>&1 &&
    ninja -C "$BLOCKMM_BUILD" -j16 >> "$OUT/build.log" 2>&1
  local rc=$?
  tail -3 "$OUT/build.log" | tee -a "$summary"
  return $rc
}

stage_test() {
  note "tests $(date +%T)"
  (cd "$BLOCKMM_BUILD" && ctest -L 'gpu|unit' -j4 --output-on-failure --timeout 300) > "$OUT/ctest_gpu.log" 2>&1
  local rc=$?
  grep -E "tests passed|tests failed|Failed|\*\*\*|Skipped|Not Run" "$OUT/ctest_gpu.log" | tail -15 | tee -a "$summary"
  return $rc
}

stage_sanitize() {
  note "compute-sanitizer $(date +%T)"
  local bin=$BLOCKMM_BUILD/tests/kernels/cuda/gpu/blockmm_gpu_tests
  local filter=${SANITIZE_FILTER:-*Generic*:*LargeBlocks*:*TenTimes*:*Budget*:*DenseTilesSaturate*:*DenseTilesUnder*:*DenseTilesAtTheSaturationEdge*:*DenseNarrow*:*ReuseItsCublas*:*TheFirstOperandsError*:*StagingPinned*}
  for tool in memcheck racecheck synccheck; do
    # racecheck instruments shared memory: blockmm's kernels only, not cuBLAS's GEMMs (which it
    # cannot finish on the many-tile budget test, and whose larger Hopper GEMMs end it with "failed
    # to handle a hardware exception", as in DenseRowsSaturationAndSkew: bench/NOTES.md item 21).
    local extra=()
    [ $tool = racecheck ] && extra=(--kernel-name kns=blockmm)
    compute-sanitizer --tool $tool "${extra[@]}" --error-exitcode 9 "$bin" --gtest_filter="$filter" \
      > "$OUT/sanitizer_$tool.log" 2>&1
    echo "$tool: exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tail -1); $(grep -cE '^\[       OK' "$OUT/sanitizer_$tool.log") tests OK)" | tee -a "$summary"
  done
}

# bench:S1,S2 — end-to-end runs with --stats=json, the I/O floor, and the cuSPARSE anchor.
stage_bench() {
  local names=${1//,/ }
  for name in $names; do
    line=$(echo "$BLOCKMM_CASES" | awk -v n="$name" '$1 == n')
    [ -n "$line" ] || { echo "unknown case $name"; continue; }
    set -- $line
    make_case "$data" "$1" "$2" "$3" "$4" 16
    local a=$data/$name.A.bin b=$data/$name.B.bin c=$data/$name.C.bin
    cat "$a" "$b" > /dev/null  # page cache, as the floor assumes
    note "bench $name (n=$2 m=$3 k=$4) $(date +%T)"
    for rep in $(seq 1 "${REPS:-3}"); do
      /usr/bin/time -f "%e s wall, %M KB maxrss" "$BLOCKMM_BUILD/blockmm" --backend cuda -q --stats=json "$a" "$b" "$c" \
        > "$OUT/$name.cuda.$rep.json" 2> "$OUT/$name.cuda.$rep.time" || echo "cuda run failed: $(cat "$OUT/$name.cuda.$rep.time")"
      python3 - "$OUT/$name.cuda.$rep.json" "$OUT/$name.cuda.$rep.time" <<'PY' | tee -a "$summary"
import json, sys
s = json.load(open(sys.argv[1])); t = s["seconds"]
busy = t.get('numeric_compute', 0)
print(f"  cuda: total {t['total']:.3f}s (read {t['read']:.3f} build {t['build']:.3f} setup {t.get('setup', 0):.3f} "
      f"symbolic {t['symbolic']:.3f} numeric {t['numeric']:.3f} [kernels {busy:.3f} = "
      f"{s['useful_macs'] / busy / 1e9 if busy else 0:.0f} GMAC/s] write {t['write']:.3f} commit {t['commit']:.3f}); "
      f"C blocks {s['blocks']['c']}; {open(sys.argv[2]).read().strip()}")
PY
    done
    local out_bytes
    out_bytes=$(stat -c %s "$c")
    local t0 t1
    t0=$(date +%s.%N); cat "$a" "$b" > /dev/null; t1=$(date +%s.%N)
    local read_s; read_s=$(awk "BEGIN{printf \"%.3f\", $t1 - $t0}")
    t0=$(date +%s.%N); dd if=/dev/zero of="$data/floor.bin" bs=64M count=$(( (out_bytes + 67108863) / 67108864 )) conv=fsync status=none; t1=$(date +%s.%N)
    local write_s; write_s=$(awk "BEGIN{printf \"%.3f\", $t1 - $t0}")
    rm -f "$data/floor.bin"
    echo "  I/O floor: read inputs ${read_s}s + write+fsync $((out_bytes / 1000000)) MB ${write_s}s" | tee -a "$summary"
    if [ "${ANCHOR:-1}" = 1 ]; then
      timeout 300 "$BLOCKMM_BUILD/cusparse_anchor" "$a" "$b" > "$OUT/$name.cusparse.json" 2>&1
      echo "  cuSPARSE f64 SpGEMM: $(cat "$OUT/$name.cusparse.json" | tail -1)" | tee -a "$summary"
    fi
    if [ "${CPU:-0}" = 1 ]; then
      "$BLOCKMM_BUILD/blockmm" --backend cpu -q --stats=json "$a" "$b" "$data/$name.cpu.bin" > "$OUT/$name.cpu.json"
      cmp "$c" "$data/$name.cpu.bin" && echo "  cpu backend: identical bytes; $(python3 -c "import json;s=json.load(open('$OUT/$name.cpu.json'));print('total %.3fs numeric %.3fs' % (s['seconds']['total'], s['seconds']['numeric']))")" | tee -a "$summary"
      rm -f "$data/$name.cpu.bin"
    fi
  done
}

# cross:CASE — the sparse kernels (forced) must give the same bytes as the run that bench made.
stage_cross() {
  for name in ${1//,/ }; do
    note "cross-check $name: sparse tile kernels vs the default path $(date +%T)"
    BLOCKMM_CUDA_DENSE=0 "$BLOCKMM_BUILD/blockmm" --backend cuda -q --stats=json "$data/$name.A.bin" "$data/$name.B.bin" \
      "$data/$name.sparse.bin" > "$OUT/$name.sparse.json"
    cmp "$data/$name.C.bin" "$data/$name.sparse.bin" && echo "  identical bytes; sparse path: $(python3 -c "import json;s=json.load(open('$OUT/$name.sparse.json'));t=s['seconds'];print('numeric %.3fs, kernels %.3fs = %.0f GMAC/s' % (t['numeric'], t['numeric_compute'], s['useful_macs']/t['numeric_compute']/1e9))")" | tee -a "$summary"
    rm -f "$data/$name.sparse.bin"
  done
}

# ranks:CASE[,CASE] — 1..G ranks, one per GPU (G = visible GPUs): scaling, balance, exchange.
stage_ranks() {
  local gpus; gpus=$(nvidia-smi -L | wc -l)
  for name in ${1//,/ }; do
    line=$(echo "$BLOCKMM_CASES" | awk -v n="$name" '$1 == n')
    set -- $line
    make_case "$data" "$1" "$2" "$3" "$4" 16
    local a=$data/$name.A.bin b=$data/$name.B.bin
    cat "$a" "$b" > /dev/null
    note "ranks $name on $gpus GPU(s) $(date +%T)"
    local ranks=1
    while [ $ranks -le "$gpus" ]; do
      rm -f "$data/$name.r$ranks.bin"
      mpirun -np $ranks --bind-to none -x OMP_NUM_THREADS=$((16 * gpus / ranks > 64 ? 64 : 16 * gpus / ranks)) \
        "$BLOCKMM_BUILD/blockmm" --backend cuda -q --stats=json "$a" "$b" "$data/$name.r$ranks.bin" \
        > "$OUT/$name.ranks$ranks.json" 2> "$OUT/$name.ranks$ranks.err" || echo "  failed: $(tail -3 "$OUT/$name.ranks$ranks.err")"
      [ $ranks -gt 1 ] && { cmp "$data/$name.r1.bin" "$data/$name.r$ranks.bin" && echo "  $ranks ranks: identical bytes to 1 rank"; } | tee -a "$summary"
      python3 - "$OUT/$name.ranks$ranks.json" <<'PY' | tee -a "$summary"
import json, sys
s = json.load(open(sys.argv[1])); t = s["seconds"]
print(f"  {s['ranks']} rank(s): total {t['total']:.3f}s read {t['read']:.3f} exchange {t['exchange']:.3f} build {t['build']:.3f} "
      f"symbolic {t['symbolic']:.3f} numeric {t['numeric']:.3f} [kernels {t['numeric_compute']:.3f}] write {t['write']:.3f} "
      f"commit {t['commit']:.3f}; imbalance {s['imbalance']:.3f}; exchanged "
      f"{sum(r['bytes_exchanged'] for r in s['per_rank']) / 1e9:.2f} GB; work per rank {[r['work'] for r in s['per_rank']]}")
PY
      [ $ranks -gt 1 ] && rm -f "$data/$name.r$ranks.bin"
      ranks=$((ranks * 2))
    done
    rm -f "$data/$name.r1.bin"
  done
}

stage_anchor() {
  for name in ${1//,/ }; do
    note "cuSPARSE anchor $name $(date +%T)"
    timeout 300 "$BLOCKMM_BUILD/cusparse_anchor" "$data/$name.A.bin" "$data/$name.B.bin" 2>&1 | tail -1 | tee -a "$summary"
  done
}

# suite — bench/run on the cases it picks (all of DESIGN.md §5 with a GPU; see bench/README.md), with
# SUITE_ARGS added to its options. It starts no new run SUITE_END seconds after this script began
# (default 540, so a build before it leaves it less), logs to $OUT/logs/bench_run.log, and its
# results (bench/RESULTS.md and bench/results/<machine>/) come back as $OUT/bench-results.tgz.
stage_suite() {
  note "bench/run suite $(date +%T)"
  local left=$(( ${SUITE_END:-540} - SECONDS ))
  # shellcheck disable=SC2086  # SUITE_ARGS holds several words on purpose
  bench/run --build "$BLOCKMM_BUILD" --deadline "$left" --log "$OUT/bench_run.log" \
    --archive "$final_out/bench-results.tgz" ${SUITE_ARGS:-} > "$OUT/bench_run.out" 2>&1
  local rc=$?
  grep -E '^\[ *[0-9.]+s\]   |!! ' "$OUT/bench_run.out" | tail -60 | tee -a "$summary"
  echo "  bench/run exit $rc" | tee -a "$summary"
  return $rc
}

stage_verify() {
  for name in ${1//,/ }; do
    note "verify $name against a dense float64 cuBLAS product $(date +%T)"
    python3 bench/verify_dense.py "$data/$name.A.bin" "$data/$name.B.bin" "$data/$name.C.bin" 2>&1 | tail -2 | tee -a "$summary"
  done
}

for stage in "$@"; do
  case $stage in
    build) stage_build || { echo "build failed"; tail -40 "$OUT/build.log"; exit 1; } ;;
    test) stage_test ;;
    sanitize) stage_sanitize ;;
    bench:*) stage_bench "${stage#bench:}" ;;
    verify:*) stage_verify "${stage#verify:}" ;;
    suite) stage_suite ;;
    anchor:*) stage_anchor "${stage#anchor:}" ;;
    cross:*) stage_cross "${stage#cross:}" ;;
    ranks:*) stage_ranks "${stage#ranks:}" ;;
    *) echo "unknown stage $stage" ;;
  esac
done
note "done $(date +%T)"
tar czf "$final_out/logs.tgz" -C "$final_out" logs && rm -rf "$OUT"
cat "$summary"
