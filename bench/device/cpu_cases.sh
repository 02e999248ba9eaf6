#!/usr/bin/env bash
# Issue 21's cpu cases on the GPU machine's cores: one plain run and mpirun -np 1 / -np 2
# (Open MPI's default binding and --bind-to none), REPS runs each, output to /dev/null. Prints
# wall, numeric phase and useful GMAC/s a core (useful multiply-adds / numeric / all threads).
# (mpirun reads stdin: it gets /dev/null, or it would eat the list of cases.)
#   bench/device/cpu_cases.sh [REPS]      (after gpu_session.sh build)
set -uo pipefail
cd "$(dirname "$0")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exe=$PWD/build-gpu/blockmm
reps=${1:-2}
data=/tmp/blockmm-bench
mkdir -p "$data"
cases="c8 8192 8 200000 1 2
c4 16384 4 400000 3 4"
while read -r name n m k sa sb; do
  [ -f $data/$name.A.bin ] || build-gpu/blockmm-gen $data/$name.A.bin --n $n --m $m --k $k --max-value 1023 --seed $sa -q
  [ -f $data/$name.B.bin ] || build-gpu/blockmm-gen $data/$name.B.bin --n $n --m $m --k $k --max-value 1023 --seed $sb -q
  cat $data/$name.A.bin $data/$name.B.bin > /dev/null
  for how in plain "np1 default" "np1 none" "np2 default" "np2 none"; do
    set -- $how
    launch=()
    if [ "$1" != plain ]; then
      launch=(mpirun -np "${1#np}"); [ "$2" = none ] && launch+=(--bind-to none)
    fi
    for rep in $(seq 1 "$reps"); do
      start=$(date +%s%N)
      "${launch[@]}" "$exe" --backend cpu -q --stats=json $data/$name.A.bin $data/$name.B.bin /dev/null < /dev/null > /tmp/cpu.json 2> /tmp/cpu.err ||
        { echo "$name $how FAILED: $(tail -2 /tmp/cpu.err)"; continue; }
      end=$(date +%s%N)
      python3 - "$name (n=$n m=$m k=$k) $how" "$(( (end - start) / 1000000 ))" /tmp/cpu.json <<'PY'
import json, sys
label, wall_ms, path = sys.argv[1:]
s = json.load(open(path)); t = s["seconds"]
threads = s["threads_per_rank"] * s["ranks"]
rate = s["useful_macs"] / t["numeric"] / threads / 1e9 if t["numeric"] else 0
print(f"{label:34s} wall {int(wall_ms) / 1000:.3f} s | build {t['build']:.3f} symbolic {t['symbolic']:.3f} numeric "
      f"{t['numeric']:.3f} | {threads} threads, {rate:.2f} useful GMAC/s a core | {s['device']}")
PY
    done
  done
done <<< "$cases"
