#!/usr/bin/env bash
# Issue 52 item 6: on one GPU, --mem-budget 64M --chunk-size 8M on n 4 096, m 8 with 200 000
# blocks each (27.2 MB files) runs and gives the cpu backend's bytes (it was refused: the plan
# took A's device build's peak, 128 MiB, for what A holds once built, about its file's size);
# at 40M, where A does not fit beside the numeric chunks, A is read from host memory. Each run
# stays within its budget: the ledger's peak (every device array by its pages, cuBLAS's
# workspace, the reserve for CUDA's own) and the observed peak (the GPU's free memory below
# where it stood when the backend began, sampled around every allocation and free:
# BLOCKMM_CUDA_PROBE_MEMORY=1), both from --stats=json. The observed usage is the GPU's, so the
# test runs alone (RUN_SERIAL). Skips (77) without a GPU.
set -Eeuo pipefail
source "$(dirname "$0")/require_gpu.sh"
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND exited $?"; exit 1' ERR

"$build/blockmm-gen" "$work/A.bin" --n 4096 --m 8 -k 200000 --seed 1 -q
"$build/blockmm-gen" "$work/B.bin" --n 4096 --m 8 -k 200000 --seed 2 -q
"$build/blockmm" --backend cpu -q "$work/A.bin" "$work/B.bin" "$work/cpu.bin"

check() {  # check BUDGET BYTES LAYOUT_SUBSTRING [ABSENT_SUBSTRING]
  local budget=$1 bytes=$2 layout=$3 absent=${4:-}
  BLOCKMM_CUDA_PROBE_MEMORY=1 timeout 300 "$build/blockmm" --backend cuda --gpus 1 --mem-budget "$budget" \
    --chunk-size 8M --stats=json -q "$work/A.bin" "$work/B.bin" "$work/gpu.bin" > "$work/stats.json"
  cmp "$work/cpu.bin" "$work/gpu.bin" || { echo "FAIL: --mem-budget $budget: not the cpu backend's bytes"; exit 1; }
  python3 - "$work/stats.json" "$bytes" "$layout" "$budget" "$absent" <<'EOF' || exit 1
import json, sys
stats, budget, layout, name, absent = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
memory = stats["team"]["backends"][0]["device_memory"]
mib = lambda b: f"{b / 2**20:.1f} MiB"
print(f"--mem-budget {name}: {stats['team']['layout']}; {stats['device']}")
print(f"  ledger peak {mib(memory['ledger_peak'])}, observed peak {mib(memory['observed_peak'])} "
      f"({mib(memory['beyond_arrays_peak'])} of it beyond the ledger's arrays), budget {mib(budget)}")
failures = []
if memory["budget"] != budget: failures.append(f"budget {memory['budget']} reported, not {budget}")
if not memory["every_allocation"]: failures.append("not sampled around every allocation")
if not 0 < memory["ledger_peak"] <= budget: failures.append("the ledger's peak is not within the budget")
if not 0 < memory["observed_peak"] <= budget: failures.append("the observed peak is not within the budget")
if layout not in stats["team"]["layout"]: failures.append(f"layout without '{layout}'")
if absent and absent in stats["team"]["layout"]: failures.append(f"layout with '{absent}'")
for failure in failures: print(f"FAIL: --mem-budget {name}: {failure}")
sys.exit(1 if failures else 0)
EOF
  rm -f "$work/gpu.bin"
}

check 64M $((64 << 20)) "streamed" "A read from host memory"
check 40M $((40 << 20)) "A read from host memory"
echo "OK: the issue's budget runs, A in host memory below it, every run within its budget"
