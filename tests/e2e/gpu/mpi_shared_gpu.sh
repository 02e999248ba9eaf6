#!/usr/bin/env bash
# Two ranks sharing one GPU give the same bytes as one CPU process. Skips (77) without a GPU.
set -euo pipefail
source "$(dirname "$0")/require_gpu.sh"
"$build/blockmm-gen" "$work/A.bin" --n 4096 --m 4 --density 0.05 --max-value 65535 --seed 11 -q
"$build/blockmm-gen" "$work/B.bin" --n 4096 --m 4 --density 0.05 --max-value 65535 --seed 12 --skew 1.2 -q
"$build/blockmm" --backend cpu -q "$work/A.bin" "$work/B.bin" "$work/cpu.bin"
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
CUDA_VISIBLE_DEVICES=$(echo "$CUDA_VISIBLE_DEVICES" | cut -d, -f1) \
  timeout 120 "${MPIEXEC:-mpiexec}" -n 2 --oversubscribe "$build/blockmm" --backend cuda --stats=json -q \
  "$work/A.bin" "$work/B.bin" "$work/gpu.bin" > "$work/stats.json"
cmp "$work/cpu.bin" "$work/gpu.bin"
grep -q '"ranks": 2' "$work/stats.json"
grep -q '"backend": "cuda"' "$work/stats.json"
echo "OK: 2 ranks on one GPU match the cpu backend byte for byte"
