#!/usr/bin/env bash
# One call on a GPU machine for several GPUs a process (issues 39, 44): build, GPU tests, and
# the scaling runs, in the order given. Everything lands in $OUT (summary.txt, logs.tgz,
# scale.csv); the machine's data lives in /dev/shm/blockmm-team and is removed at the end.
#   bench/device/team_session.sh [DEADLINE_SECONDS] STAGE...
# stages:
#   build            blockmm, its tools and the GPU tests (build-gpu, sm_90)
#   build-old        the tree in .device/old (carried: `git archive <commit>` there) into build-old
#   test[:FILTER]    ctest -L gpu (or -R FILTER) in build-gpu
#   scale:CASES:GPUS each case (bench/cases.sh names) with --gpus G for each G, --repeat runs,
#                    output /dev/null; with build-old also mpirun -np G, one old rank a GPU
#   fit:CASE:BUDGET  the case with --mem-budget BUDGET on 1 and all GPUs against the cpu backend
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
  build_tree . build-gpu "$logs/build.log" blockmm blockmm-gen blockmm-cmp blockmm-convert blockmm-info blockmm_gpu_tests
}

stage_build-old() {
  note "build-old"
  [ -d .device/old ] || { echo "no .device/old (carry it)" | tee -a "$summary"; return 1; }
  build_tree .device/old build-old "$logs/build-old.log" blockmm
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
built = sum(b.get("bytes_built", 0) for b in team.get("backends", []))
print(",".join(str(x) for x in [case, label, gpus, rep, rc, round(float(t1) - float(t0), 3)] +
      [round(s.get(k, 0), 4) for k in ("read", "build", "setup", "symbolic", "numeric", "write", "total")] +
      [round(j.get("imbalance", 0), 3), built, moved, '"%s"' % team.get("layout", ""), '"%s"' % j.get("device", "")]))
PY
  tail -1 "$csv" | tee -a "$summary"
}

stage_scale() {
  local cases=${1//,/ } gpus=${2//,/ }
  [ -f "$csv" ] || echo "case,run,gpus,rep,rc,wall,read,build,setup,symbolic,numeric,write,total,imbalance,bytes_built,bytes_from_peers,layout,device" > "$csv"
  for case in $cases; do
    note "scale $case"
    make_data "$case" || continue
    for g in $gpus; do
      for rep in $(seq 1 "$REPEAT"); do
        [ "$(left)" -gt 30 ] || { note "deadline"; return 1; }
        one_run "$case" "new-gpus$g" "$g" "$rep" build-gpu/blockmm --backend cuda --gpus "$g"
        if [ -x build-old/blockmm ]; then
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

stage_fit() {
  local case=$1 budget=$2
  note "fit $case budget $budget"
  make_data "$case" || return 1
  build-gpu/blockmm --backend cpu -q "$data/$case.A.bin" "$data/$case.B.bin" "$data/$case.cpu.bin"
  for g in 1 all; do
    timeout "$(left)" build-gpu/blockmm --backend cuda --gpus $g --mem-budget "$budget" --stats=json -q \
      "$data/$case.A.bin" "$data/$case.B.bin" "$data/$case.gpu.bin" > "$logs/fit.$case.$g.json" 2> "$logs/fit.$case.$g.err"
    echo "gpus $g: exit $? $(cmp "$data/$case.cpu.bin" "$data/$case.gpu.bin" >/dev/null 2>&1 && echo identical || echo DIFFERENT)" \
      "$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["team"]["layout"], j["seconds"]["total"])' "$logs/fit.$case.$g.json" 2>/dev/null)" |
      tee -a "$summary"
  done
  rm -f "$data/$case".*
}

for stage in "$@"; do
  name=${stage%%:*}
  rest=${stage#"$name"}
  rest=${rest#:}
  case $name in
    build|build-old) "stage_$name" ;;
    test) stage_test "$rest" ;;
    scale) stage_scale "${rest%%:*}" "${rest#*:}" ;;
    fit) stage_fit "${rest%%:*}" "${rest#*:}" ;;
    *) echo "unknown stage $stage" | tee -a "$summary" ;;
  esac
done
note "done"
