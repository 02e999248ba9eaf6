#!/usr/bin/env bash
# Issue 52 item 6 on one GPU, in one call (under 90 s): n 4 096, m 8, 200 000 blocks each (27.2 MB
# files, blockmm-gen seeds 1 and 2), --chunk-size 8M, under --mem-budget 32M, 40M, 48M, 64M, 96M,
# 160M and the default. For each budget: the time (best of REPS runs; wall and the stats' total
# and numeric seconds), the layout the plan chose, and the device memory against the budget from
# one more run with BLOCKMM_CUDA_PROBE_MEMORY=1 (the ledger's peak: every device array by its
# pages, cuBLAS's workspace, the reserve for CUDA's own; the observed peak: the GPU's free memory
# below where it stood when the backend began, sampled around every allocation and free; and how
# much of that was beyond the ledger's arrays), each output compared with the cpu backend's. A
# cross-check of the observed peak where nvidia-smi is there: the process's GPU memory polled
# every 20 ms during the 64M run, less that of a product of inputs/ (context and modules).
#   bash bench/device/mem_budget.sh BUILD_DIR     (REPS=2, BUDGETS="32M 40M ...", BASELINE=OTHER_BUILD_DIR)
# BASELINE: another build (main before the fix, say) run on the same budgets beside it.
# Leaves in $OUT (default /tmp/out): summary.txt (the table, printed last), runs.csv, stats/.
# A dry run without a GPU (the script's own test): BACKEND=cpu bash bench/device/mem_budget.sh build-cpu
set -uo pipefail
build=$(cd "${1:?usage: mem_budget.sh BUILD_DIR}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/stats"
reps=${REPS:-2}
budgets=${BUDGETS:-32M 40M 48M 64M 96M 160M default}
backend=${BACKEND:-cuda}
data=$(mktemp -d /tmp/mem-budget.XXXXXX)
trap 'rm -rf "$data"' EXIT
csv=$OUT/runs.csv
echo "build,budget,run,probe,exit,wall_s,total_s,numeric_s,layout,ledger_peak,observed_peak,beyond_arrays_peak,equal" > "$csv"
start=$(date +%s)
note() { echo "== $* ($(( $(date +%s) - start )) s)"; }

note "machine: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2> /dev/null | paste -sd, -), $(nproc) cores"
for seed in 1 2; do
  name=$([ $seed = 1 ] && echo A || echo B)
  "$build/blockmm-gen" "$data/$name.bin" --n 4096 --m 8 -k 200000 --seed $seed -q || { note "blockmm-gen failed"; exit 1; }
done
"$build/blockmm" --backend cpu -q "$data/A.bin" "$data/B.bin" "$data/cpu.bin" || { note "the cpu product failed"; exit 1; }
note "inputs $(stat -c %s "$data/A.bin") and $(stat -c %s "$data/B.bin") bytes; cpu product $(stat -c %s "$data/cpu.bin") bytes"

# run NAME BIN_DIR BUDGET REP PROBE: one product; a line of runs.csv.
run() {
  local name=$1 dir=$2 budget=$3 rep=$4 probe=$5 json=$OUT/stats/$1-$3-$4-probe$5.json
  local opts=(--backend "$backend" --gpus 1 --chunk-size 8M --stats=json -q)
  [ "$budget" != default ] && opts+=(--mem-budget "$budget")
  [ "$backend" = cpu ] && opts=(--backend cpu --chunk-size 8M --stats=json -q)
  rm -f "$data/out.bin"
  local t0 t1 rc
  t0=$(date +%s.%N)
  BLOCKMM_CUDA_PROBE_MEMORY=$probe timeout 120 "$dir/blockmm" "${opts[@]}" "$data/A.bin" "$data/B.bin" "$data/out.bin" \
    > "$json" 2> "$json.err"
  rc=$?
  t1=$(date +%s.%N)
  local equal=no
  [ "$rc" = 0 ] && cmp -s "$data/cpu.bin" "$data/out.bin" && equal=yes
  python3 - "$json" "$name" "$budget" "$rep" "$probe" "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" "$equal" >> "$csv" <<'EOF'
import json, sys
path, name, budget, rep, probe, rc, wall, equal = sys.argv[1:]
row = dict(total="", numeric="", layout="", ledger="", observed="", beyond="")
try:
    j = json.load(open(path))
    row.update(total=j["seconds"]["total"], numeric=j["seconds"]["numeric"], layout=j["team"]["layout"])
    memory = j["team"]["backends"][0].get("device_memory")
    if memory:
        row.update(ledger=memory["ledger_peak"], observed=memory["observed_peak"], beyond=memory["beyond_arrays_peak"])
except Exception:
    row["layout"] = "refused: " + " ".join(open(path + ".err").read().split())[:160] if rc != "0" else "no stats"
layout = '"' + str(row["layout"]).replace('"', "'") + '"'
print(",".join(str(x) for x in [name, budget, rep, probe, rc, wall, row["total"], row["numeric"], layout,
                                row["ledger"], row["observed"], row["beyond"], equal]))
EOF
}

builds=("tree=$build")
[ -n "${BASELINE:-}" ] && builds+=("baseline=$(cd "$BASELINE" && pwd)")
for entry in "${builds[@]}"; do
  name=${entry%%=*} dir=${entry#*=}
  for budget in $budgets; do
    for rep in $(seq 1 "$reps"); do run "$name" "$dir" "$budget" "$rep" 0; done
    run "$name" "$dir" "$budget" probe 1
  done
  note "$name: ${reps} runs and a probed one at each of: $budgets"
done

# The cross-check: nvidia-smi's memory of the process during the 64M run, less a small product's.
smi_note="nvidia-smi not here: no cross-check"
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1 && [ "$backend" = cuda ]; then
  poll() {  # poll PIDFILE OUTFILE: the process's used memory (MiB), every 20 ms, until it ends
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms 20 > "$2" 2> /dev/null &
    local smi=$!
    while [ ! -s "$1" ]; do sleep 0.01; done
    while kill -0 "$(cat "$1")" 2> /dev/null; do sleep 0.05; done
    kill "$smi" 2> /dev/null; wait "$smi" 2> /dev/null
  }
  peak_of() {  # peak_of PIDFILE OUTFILE -> the largest used_memory of that pid
    awk -F', *' -v pid="$(cat "$1")" '$1 == pid && $2 + 0 > max { max = $2 + 0 } END { print max + 0 }' "$2"
  }
  for which in small big; do
    rm -f "$data/$which.pid"
    if [ $which = small ]; then args=("$root/inputs/A.bin" "$root/inputs/B.bin" "$data/small.bin")
    else args=(--mem-budget 64M "$data/A.bin" "$data/B.bin" "$data/out.bin"); fi
    poll "$data/$which.pid" "$data/$which.smi" &
    poller=$!
    bash -c 'echo $$ > "$0"; exec "$@"' "$data/$which.pid" "$build/blockmm" --backend cuda --gpus 1 --chunk-size 8M -q \
      "${args[@]}" > /dev/null 2>&1
    wait "$poller"
  done
  small=$(peak_of "$data/small.pid" "$data/small.smi")
  big=$(peak_of "$data/big.pid" "$data/big.smi")
  smi_note="nvidia-smi, polled every 20 ms: the 64M run's process peaked at $big MiB, a product of inputs/ at $small MiB: $(( big - small )) MiB beside a small run's footprint (a lower bound: polling misses short peaks)"
fi

python3 - "$csv" "$smi_note" > "$OUT/summary.txt" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
mib = lambda v: f"{int(v) / 2**20:7.1f}" if v not in ("", None) and int(v) >= 0 else "      -"
def budget_bytes(b):
    return int(b[:-1]) << 20 if b.endswith("M") else int(b[:-1]) << 30 if b.endswith("G") else None
print("Issue 52 item 6: n 4096, m 8, 200 000 blocks each, --chunk-size 8M, one GPU (MiB; times: best of the unprobed runs)")
print(f"{'build':9} {'budget':>7} {'wall s':>7} {'total s':>8} {'numeric':>8} {'ledger':>7} {'observed':>8} {'beyond':>7} {'obs/budget':>10} {'bytes':>6}  layout")
seen = []
for r in rows:
    key = (r["build"], r["budget"])
    if key not in seen: seen.append(key)
for build, budget in seen:
    runs = [r for r in rows if (r["build"], r["budget"]) == (build, budget)]
    timed = [r for r in runs if r["probe"] == "0" and r["exit"] == "0"]
    probed = next((r for r in runs if r["probe"] == "1"), runs[-1])
    best = min(timed, key=lambda r: float(r["wall_s"])) if timed else None
    limit = budget_bytes(budget)
    ratio = f"{int(probed['observed_peak']) / limit:10.3f}" if limit and probed["observed_peak"] not in ("", "-1") else "         -"
    equal = "equal" if all(r["equal"] == "yes" for r in runs) else ("FAIL" if any(r["exit"] == "0" for r in runs) else "-")
    seconds = lambda key: f"{float(best[key]):8.3f}" if best and best[key] else "       -"
    print(f"{build:9} {budget:>7} {float(best['wall_s']) if best else 0:7.2f} {seconds('total_s')} "
          f"{seconds('numeric_s')} {mib(probed['ledger_peak'])} {mib(probed['observed_peak']):>8} "
          f"{mib(probed['beyond_arrays_peak'])} {ratio} {equal:>6}  {probed['layout']}")
print(sys.argv[2])
EOF
cat "$OUT/summary.txt"
