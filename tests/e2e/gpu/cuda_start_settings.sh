#!/usr/bin/env bash
# What blockmm sets before CUDA starts (driver/backend_choice.hpp) on a real GPU run: one work
# queue unless the user chose a count, listed in --stats=json's start_settings, and the same
# bytes as the cpu backend either way. Skips (77) without a GPU.
set -euo pipefail
source "$(dirname "$0")/require_gpu.sh"
"$build/blockmm-gen" "$work/A.bin" --n 4096 --m 4 --density 0.05 --max-value 65535 --seed 21 -q
"$build/blockmm-gen" "$work/B.bin" --n 4096 --m 4 --density 0.05 --max-value 65535 --seed 22 -q
"$build/blockmm" --backend cpu -q "$work/A.bin" "$work/B.bin" "$work/cpu.bin"
settings() { python3 -c 'import json, sys; print(" ".join(json.load(open(sys.argv[1]))["start_settings"]))' "$1"; }

env -u CUDA_DEVICE_MAX_CONNECTIONS "$build/blockmm" --backend cuda --stats=json -q \
  "$work/A.bin" "$work/B.bin" "$work/gpu.bin" > "$work/stats.json"
cmp "$work/cpu.bin" "$work/gpu.bin"
set_by_blockmm=$(settings "$work/stats.json")
echo "start_settings: $set_by_blockmm"
[[ " $set_by_blockmm " == *" CUDA_DEVICE_MAX_CONNECTIONS=1 "* ]] || { echo "FAIL: one work queue not set"; exit 1; }

rm -f "$work/gpu.bin"
CUDA_DEVICE_MAX_CONNECTIONS=4 "$build/blockmm" --backend cuda --stats=json -q \
  "$work/A.bin" "$work/B.bin" "$work/gpu.bin" > "$work/stats.json"
cmp "$work/cpu.bin" "$work/gpu.bin"
kept=$(settings "$work/stats.json")
echo "start_settings with CUDA_DEVICE_MAX_CONNECTIONS=4: $kept"
[[ " $kept " != *"CUDA_DEVICE_MAX_CONNECTIONS"* ]] || { echo "FAIL: the user's count was replaced"; exit 1; }
echo "OK: one work queue by default, the user's count kept, the cpu backend's bytes either way"
