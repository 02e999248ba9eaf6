#!/usr/bin/env bash
# Ranks against one rank on the cpu backend: a plain run (all cores) and mpirun -np 2 / -np 4
# (--bind-to none, the node's cores split between the ranks), REPS rounds, output to /dev/null.
# Prints the numeric phase and each rank's compute time, whose spread on equal work shows
# cores of unequal speed (bench/NOTES.md item 13), and the tiles each rank computed for its
# neighbours (rows shared: item 14). SHARE_MODES="0 1" runs several ranks with
# BLOCKMM_SHARE_ROWS=0 and =1 alternated (default: 1); BUILD names the build folder.
#   bench/device/rank_split.sh [REPS] ["name n m k seedA seedB" lines]   (after gpu_session.sh build)
set -uo pipefail
cd "$(dirname "$0")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build=${BUILD:-build-gpu}
exe=$PWD/$build/blockmm
share_modes=${SHARE_MODES:-1}
reps=${1:-3}
cases=${2:-"c8 8192 8 200000 1 2
c4 16384 4 400000 3 4"}
data=/tmp/blockmm-bench
mkdir -p "$data"
while read -r name n m k sa sb; do
  [ -f $data/$name.A.bin ] || $build/blockmm-gen $data/$name.A.bin --n $n --m $m --k $k --max-value 1023 --seed $sa -q
  [ -f $data/$name.B.bin ] || $build/blockmm-gen $data/$name.B.bin --n $n --m $m --k $k --max-value 1023 --seed $sb -q
  cat $data/$name.A.bin $data/$name.B.bin > /dev/null
  for rep in $(seq 1 "$reps"); do
    for np in 1 2 4; do
      modes=$share_modes
      [ $np = 1 ] && modes=1
      for share in $modes; do
      launch=()
      [ $np = 1 ] || launch=(mpirun -np $np --bind-to none)
      label="$name np$np"
      [ $np = 1 ] || label="$label share$share"
      BLOCKMM_SHARE_ROWS=$share "${launch[@]}" "$exe" --backend cpu -q --stats=json $data/$name.A.bin $data/$name.B.bin /dev/null < /dev/null > /tmp/split.json ||
        { echo "$label FAILED"; continue; }
      python3 - "$label" /tmp/split.json <<'PY'
import json, sys
label, path = sys.argv[1:]
s = json.load(open(path)); t = s["seconds"]
ranks = " ".join(f"{d['seconds']['numeric_compute']:.3f}" for d in s["per_rank"])
helped = " ".join(str(d.get("tiles_for_neighbours", 0)) for d in s["per_rank"])
print(f"{label:17s} total {t['total']:.3f} numeric {t['numeric']:.3f} | per-rank compute {ranks} | "
      f"for neighbours {helped} | work imbalance {s['imbalance']:.3f} | {s['threads_per_rank']} threads a rank")
PY
      done
    done
  done
done <<< "$cases"
