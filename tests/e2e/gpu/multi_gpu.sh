#!/usr/bin/env bash
# A process driving several GPUs (multiply/pipeline.hpp) gives the cpu backend's bytes: rows split
# over 2 and all GPUs, B split into block-column panels (BLOCKMM_B_PANELS), B streamed in panels
# on one GPU and on several because --mem-budget holds less than B (each GPU's budget kept, the
# team's layout in the stats), HDF5 out, m from 1 to 64 with saturation and skew, and under
# mpirun with two ranks sharing the node's GPUs, also as two simulated nodes. Skips (77) without
# a GPU; the several-GPU runs take what GPUs there are (on one GPU they run as one).
set -Eeuo pipefail
source "$(dirname "$0")/require_gpu.sh"
trap 'rc=$?; echo "FAIL: line $LINENO: $BASH_COMMAND exited $rc"; exit $rc' ERR
gpus=$(nvidia-smi -L | grep -c '^GPU')
echo "GPUs: $gpus"
field() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

check() {  # check NAME EXPECTED_LAYOUT_SUBSTRING [blockmm options / ENV=VALUE...]
  local name=$1 layout=$2; shift 2
  local envs=() opts=()
  for a in "$@"; do case $a in BLOCKMM_*=*) envs+=("$a") ;; *) opts+=("$a") ;; esac; done
  env "${envs[@]}" timeout 300 "$build/blockmm" --backend cuda --stats=json -q "${opts[@]}" \
    "$work/$case.A.bin" "$work/$case.B.bin" "$work/$name" > "$work/$name.json"
  case $name in
    *.h5) "$build/blockmm-cmp" --strict "$work/$case.cpu.bin" "$work/$name" > /dev/null ||
            { echo "FAIL: $case/$name differs from the cpu backend"; exit 1; } ;;
    *) cmp "$work/$case.cpu.bin" "$work/$name" || { echo "FAIL: $case/$name differs from the cpu backend"; exit 1; } ;;
  esac
  local got
  got=$(field "$work/$name.json" 'j["team"]["layout"]')
  [[ "$got" == *"$layout"* ]] || { echo "FAIL: $case/$name: layout '$got', expected '$layout'"; exit 1; }
  echo "ok: $case/$name: $got; $(field "$work/$name.json" 'j["device"]')"
  rm -f "$work/$name"
}

make_case() {  # make_case NAME N M DENSITY MAX [SKEW [B_DENSITY]]
  case=$1
  local skew=()
  [ -n "${6:-}" ] && [ "$6" != 0 ] && skew=(--skew "$6")
  "$build/blockmm-gen" "$work/$1.A.bin" --n "$2" --m "$3" --density "$4" --max-value "$5" --seed 31 -q "${skew[@]}"
  "$build/blockmm-gen" "$work/$1.B.bin" --n "$2" --m "$3" --density "${7:-$4}" --max-value "$5" --seed 32 -q
  "$build/blockmm" --backend cpu -q "$work/$1.A.bin" "$work/$1.B.bin" "$work/$1.cpu.bin"
}

several="rows split over"
[ "$gpus" -ge 2 ] || several="one backend"
for spec in "m1 20000 1 0.002 65535" "m2 16384 2 0.01 65535 1.0" "m4 8192 4 0.02 1023 1.2" "m8 8192 8 0.05 65535" \
            "m32 4096 32 0.1 1023" "m64 2048 64 0.1 1023" "sat 2048 16 0.5 65535"; do
  make_case $spec
  check one.bin "one backend" --gpus 1
  check all.bin "$several" --gpus all
  check panels.bin "B split by block-columns into 5 panels" BLOCKMM_B_PANELS=5
  check two.bin "rows split over 2" BLOCKMM_WORKERS=2  # two backends, on one GPU where there is one
  check three.bin "B split by block-columns into 4 panels over 3" BLOCKMM_WORKERS=3 BLOCKMM_B_PANELS=4
  check panels1.h5 "B split by block-columns into 3 panels" --gpus 1 BLOCKMM_B_PANELS=3
done

# A budget below B: B split by block-columns and streamed, on one GPU and on all, each GPU within
# its budget (the backends' peak device bytes are what the plan allowed: the run fails otherwise).
make_case big 65536 8 0.002 1023 0 0.1  # A small (18 MB), B large (0.9 GB)
b_bytes=$(stat -c %s "$work/big.B.bin")
budget=$(( b_bytes / 2 ))
check stream1.bin "streamed" --gpus 1 --mem-budget "$budget"
check streamall.bin "B split by block-columns" --gpus all --mem-budget "$budget"

# Two ranks on the node share its GPUs (each its own share where there are enough).
case=m8
timeout 300 "${MPIEXEC:-mpiexec}" -n 2 --oversubscribe --bind-to none "$build/blockmm" --backend cuda --stats=json -q \
  "$work/m8.A.bin" "$work/m8.B.bin" "$work/mpi.bin" > "$work/mpi.json"
cmp "$work/m8.cpu.bin" "$work/mpi.bin" || { echo "FAIL: 2 ranks differ from the cpu backend"; exit 1; }
echo "ok: 2 ranks: $(field "$work/mpi.json" 'j["gpus"]')"
# ... and as if on two nodes (records travel between the ranks through MPI), each rank a team.
BLOCKMM_SIMULATE_NODES=1 timeout 300 "${MPIEXEC:-mpiexec}" -n 2 --oversubscribe --bind-to none "$build/blockmm" \
  --backend cuda --gpus all --stats=json -q "$work/m8.A.bin" "$work/m8.B.bin" "$work/nodes.bin" > "$work/nodes.json"
cmp "$work/m8.cpu.bin" "$work/nodes.bin" || { echo "FAIL: 2 simulated nodes differ from the cpu backend"; exit 1; }
echo "ok: 2 simulated nodes: $(field "$work/nodes.json" 'j["team"]["layout"]')"
echo "OK: several GPUs a process give the cpu backend's bytes"
