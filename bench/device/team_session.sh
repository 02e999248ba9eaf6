#!/usr/bin/env bash
# One call on a GPU machine for several GPUs a process (issues 39, 44): build, GPU tests, and
# the scaling runs, in the order given. Everything lands in $OUT (summary.txt, logs.tgz,
# scale.csv); the machine's data lives in /dev/shm/blockmm-team and is removed at the end.
#   bench/device/team_session.sh [DEADLINE_SECONDS] STAGE...
# stages:
#   build            blockmm, its tools and the GPU tests (build-gpu, sm_90)
#   build-old        the tree in .device/old (carried: `git archive <commit>` there) into build-old
#   builds           both at once (the old tree beside the new one)
#   build-tests      the GPU tests' executable (the script tests need only build)
#   test[:FILTER]    ctest -L gpu (or -R FILTER) in build-gpu
#   scale:CASES:GPUS[:new]  each case (bench/cases.sh names) with --gpus G for each G (auto: no
#                    --gpus, blockmm's choice), REPEAT
#                    runs, output /dev/null; with build-old (and not :new) also mpirun -np G,
#                    one old rank a GPU
#   fit:GPUS         B (0.9 GB) twice the --mem-budget against no budget, on each GPU count, each
#                    output against the cpu backend's, each GPU's device memory sampled
# REPEAT (default 2) sets the runs a configuration.
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
deadline=${1:-540}
case $deadline in ''|*[!0-9]*) deadline=540 ;; *) shift ;; esac
OUT=${OUT:-/tmp/out}
logs=$OUT/logs
mkdir -p "$logs"
summary=$OUT/summary.txt
csv=$OUT/scale.csv
data=/dev/shm/blockmm-team
mkdir -p "$data"
trap 'rm -rf "$data"; tar -czf "$OUT/logs.tgz" -C "$OUT" logs 2>/dev/null; rm -rf "$logs"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HWLOC_COMPONENTS=-opencl
export BLOCKMM_BUILD=$root/build-gpu
source bench/cases.sh
REPEAT=${REPEAT:-2}
start=$SECONDS
note() { echo "== $* ($((SECONDS - start)) s)" | tee -a "$summary"; }
left() { echo $((deadline - (SECONDS - start))); }

build_tree() {  # build_tree SOURCE BUILD LOG TARGETS...
  local src=$1 dir=$2 log=$3; shift 3
  cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$log" 2>&1 &&
    ninja -C "$dir" -j"$(nproc)" "$@" >> "$log" 2>&1
  local rc=$?
  tail -2 "$log" | tee -a "$summary"
  return $rc
}

stage_build() {
  note "build"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$summary"
  nvidia-smi topo -m > "$logs/topo.txt" 2>&1
  build_tree . build-gpu "$logs/build.log" blockmm blockmm-gen blockmm-cmp blockmm-convert blockmm-info
}

stage_build-tests() {
  note "build-tests"
  [ "$(left)" -gt 150 ] || { note "skipped: too little time left"; return 1; }
  ninja -C build-gpu -j"$(nproc)" blockmm_gpu_tests >> "$logs/build.log" 2>&1
  local rc=$?
  tail -1 "$logs/build.log" | tee -a "$summary"
  return $rc
}

stage_build-old() {
  note "build-old"
  [ -d .device/old ] || { echo "no .device/old (carry it)" | tee -a "$summary"; return 1; }
  build_tree .device/old build-old "$logs/build-old.log" blockmm
}

stage_builds() {
  build_tree .device/old build-old "$logs/build-old.log" blockmm > /dev/null &
  local old=$!
  stage_build
  wait "$old" && note "build-old done" || note "build-old FAILED"
}

stage_test() {
  local filter=$1
  note "tests ${filter:-(label gpu)}"
  local sel=(-L gpu)
  [ -n "$filter" ] && sel=(-R "$filter")
  (cd build-gpu && timeout "$(left)" ctest "${sel[@]}" -j2 --output-on-failure --timeout 900) > "$logs/ctest.log" 2>&1
  local rc=$?
  grep -E "tests passed|tests failed|Failed|\*\*\*|Skipped|Not Run|^ok:|^FAIL" "$logs/ctest.log" | tail -40 | tee -a "$summary"
  return $rc
}

make_data() {  # make_data CASE: $data/CASE.A.bin, .B.bin (values 0..1023, seeds 1 and 2)
  local line
  line=$(printf '%s\n%s\n' "$BLOCKMM_CASES" "$BLOCKMM_GPU_CASES" | awk -v n="$1" '$1 == n')
  [ -n "$line" ] || { echo "unknown case $1" | tee -a "$summary"; return 1; }
  set -- $line
  make_case "$data" "$1" "$2" "$3" "$4" "$(nproc)"
}

# One run: its wall time and the stats' phases, as a CSV row.
one_run() {  # one_run CASE LABEL GPUS REP COMMAND...
  local case=$1 label=$2 gpus=$3 rep=$4; shift 4
  local json=$logs/$case.$label.$rep.json t0 t1
  t0=$(date +%s.%N)
  timeout "$(left)" "$@" --stats=json -q --stats-file "$json" "$data/$case.A.bin" "$data/$case.B.bin" /dev/null \
    > /dev/null 2> "$logs/$case.$label.$rep.err"
  local rc=$?
  t1=$(date +%s.%N)
  python3 - "$json" "$case" "$label" "$gpus" "$rep" "$rc" "$t0" "$t1" >> "$csv" <<'PY'
import json, sys
path, case, label, gpus, rep, rc, t0, t1 = sys.argv[1:]
try:
    j = json.load(open(path))
except Exception:
    j = {}
s = j.get("seconds", {})
team = j.get("team", {})
moved = sum(b.get("bytes_from_peers", 0) for b in team.get("backends", []))
read = j.get("input_bytes_read", 0)
built = sum(b.get("bytes_built", 0) for b in team.get("backends", []))
print(",".join(str(x) for x in [case, label, gpus, rep, rc, round(float(t1) - float(t0), 3)] +
      [round(s.get(k, 0), 4) for k in ("read", "build", "setup", "symbolic", "numeric", "write", "total")] +
      [round(j.get("imbalance", 0), 3), built, moved, read, '"%s"' % team.get("layout", ""), '"%s"' % j.get("device", "")]))
PY
  tail -1 "$csv" | tee -a "$summary"
}

stage_scale() {
  local cases=${1//,/ } gpus=${2//,/ } only=$3
  [ -f "$csv" ] || echo "case,run,gpus,rep,rc,wall,read,build,setup,symbolic,numeric,write,total,imbalance,bytes_built,bytes_from_peers,input_bytes_read,layout,device" > "$csv"
  for case in $cases; do
    note "scale $case"
    make_data "$case" || continue
    for g in $gpus; do
      local choose=(--gpus "$g")
      [ "$g" = auto ] && choose=()  # blockmm's own choice
      for rep in $(seq 1 "$REPEAT"); do
        [ "$(left)" -gt 30 ] || { note "deadline"; return 1; }
        one_run "$case" "new-gpus$g" "$g" "$rep" build-gpu/blockmm --backend cuda "${choose[@]}"
        if [ -x build-old/blockmm ] && [ "$only" != new ] && [ "$g" != auto ]; then
          if [ "$g" = 1 ]; then
            one_run "$case" "old-ranks$g" "$g" "$rep" env CUDA_VISIBLE_DEVICES=0 build-old/blockmm --backend cuda
          else
            one_run "$case" "old-ranks$g" "$g" "$rep" mpirun -np "$g" --bind-to none build-old/blockmm --backend cuda
          fi
        fi
      done
    done
    rm -f "$data/$case".*.bin
  done
}

# Device memory in use on every GPU, sampled every 20 ms while COMMAND runs: "peak0 peak1 ..." MiB.
sampled_peaks() {  # sampled_peaks LOG COMMAND...
  local log=$1; shift
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 20 > "$log" 2>/dev/null &
  local sampler=$!
  sleep 0.3
  "$@" > /dev/null
  local rc=$?
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  python3 - "$log" <<'PY'
import sys
peak = {}
for line in open(sys.argv[1]):
    try:
        index, used = (int(x) for x in line.split(","))
    except ValueError:
        continue
    peak[index] = max(peak.get(index, 0), used)
print(" ".join(str(peak[i]) for i in sorted(peak)))
PY
  return $rc
}

stage_fit() {
  local gpus=${1//,/ }
  note "fit: B twice the budget, GPUs ${gpus}"
  "$BLOCKMM_BUILD/blockmm-gen" "$data/F.A.bin" --n 65536 --m 8 --density 0.002 --max-value 1023 --seed 1 -q --threads "$(nproc)"
  "$BLOCKMM_BUILD/blockmm-gen" "$data/F.B.bin" --n 65536 --m 8 --density 0.1 --max-value 1023 --seed 2 -q --threads "$(nproc)"
  local budget=$(( $(stat -c %s "$data/F.B.bin") / 2 ))
  echo "  |A| $(stat -c %s "$data/F.A.bin") B, |B| $(stat -c %s "$data/F.B.bin") B, budget $((budget >> 20)) MiB a GPU" | tee -a "$summary"
  build-gpu/blockmm --backend cpu -q "$data/F.A.bin" "$data/F.B.bin" "$data/F.cpu.bin"
  # What a context and the smallest product hold, to tell blockmm's memory from CUDA's.
  echo "  device memory of a tiny product (context), MiB a GPU: $(sampled_peaks "$logs/fit_tiny.txt" \
    build-gpu/blockmm --backend cuda --gpus all -q inputs/A.bin inputs/B.bin /dev/null)" | tee -a "$summary"
  for g in $gpus; do
    for run in "unlimited:" "budget:--mem-budget $budget"; do
      local label=${run%%:*} opts=${run#*:} json=$logs/fit.$g.${run%%:*}.json t0 t1 peaks
      t0=$(date +%s.%N)
      # shellcheck disable=SC2086
      peaks=$(sampled_peaks "$logs/fit.$g.$label.smi" timeout "$(left)" build-gpu/blockmm --backend cuda --gpus "$g" $opts \
        --stats=json -q --stats-file "$json" "$data/F.A.bin" "$data/F.B.bin" "$data/F.gpu.bin" 2> "$logs/fit.$g.$label.err")
      local rc=$?
      t1=$(date +%s.%N)
      echo "  gpus $g $label: exit $rc, $(cmp -s "$data/F.cpu.bin" "$data/F.gpu.bin" && echo identical || echo DIFFERENT)," \
        "wall $(python3 -c "print(round($t1 - $t0 - 0.3, 3))") s, peak MiB a GPU: $peaks;" \
        "$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["team"]["layout"], "| numeric", round(j["seconds"]["numeric"], 3), "| total", round(j["seconds"]["total"], 3))' "$json" 2>/dev/null)" |
        tee -a "$summary"
      rm -f "$data/F.gpu.bin"
    done
  done
  rm -f "$data"/F.*
}

for stage in "$@"; do
  name=${stage%%:*}
  rest=${stage#"$name"}
  rest=${rest#:}
  case $name in
    build|build-old|builds|build-tests) "stage_$name" ;;
    test) stage_test "$rest" ;;
    scale) IFS=: read -r cases gpus only <<< "$rest"; stage_scale "$cases" "$gpus" "${only:-}" ;;
    fit) stage_fit "$rest" ;;
    batch) OUT=$OUT bash bench/device/perf_session.sh batch ;;
    racecheck) [ "$(left)" -gt 60 ] && OUT=$OUT timeout "$(left)" bash bench/device/perf_session.sh racecheck ;;
    *) echo "unknown stage $stage" | tee -a "$summary" ;;
  esac
done
note "done"
