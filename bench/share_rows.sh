#!/usr/bin/env bash
# Ranks of one node sharing the ends of their panels (bench/NOTES.md item 14), on this machine:
# one rank with T threads against T single-thread ranks with BLOCKMM_SHARE_ROWS=0 and =1,
# alternated, ROUNDS rounds, output to /dev/shm. Prints the numeric phase of the slowest rank
# and the tiles each rank computed for its neighbours, then the medians.
#   bench/share_rows.sh [ROUNDS] [CASE...]     (cases from bench/run's data: C8 C4 S1 S2 ...)
#   BLOCKMM=build-cpu/blockmm DATA=/tmp/blockmm-bench T=2 bench/share_rows.sh 7 C8 C4
set -uo pipefail
cd "$(dirname "$0")/.."
exe=${BLOCKMM:-$PWD/build-cpu/blockmm}
data=${DATA:-/tmp/blockmm-bench}
threads=${T:-2}
rounds=${1:-5}
shift || true
cases=${*:-C8 C4 S1 S2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=/dev/shm/blockmm-share-rows.$$.bin
json=$(mktemp)
log=$(mktemp)
trap 'rm -f "$out" "$json" "$log"' EXIT
report() {
  python3 - "$1" "$json" <<'PY' | tee -a "$log"
import json, sys
label, path = sys.argv[1:]
s = json.load(open(path))
helped = " ".join(str(r.get("tiles_for_neighbours", 0)) for r in s["per_rank"])
print(f"{label} {s['seconds']['numeric']:.4f} for-neighbours {helped}")
PY
}
for round in $(seq 1 "$rounds"); do
  for c in $cases; do
    "$exe" --backend cpu --threads "$threads" "$data/$c.A.bin" "$data/$c.B.bin" "$out" -q --stats=json > "$json" 2>&1 &&
      report "$c 1x$threads"
    for share in 0 1; do
      BLOCKMM_SHARE_ROWS=$share mpirun -np "$threads" --bind-to none "$exe" --backend cpu --threads 1 \
        "$data/$c.A.bin" "$data/$c.B.bin" "$out" -q --stats=json > "$json" 2> /dev/null &&
        report "$c ${threads}x1-share$share"
    done
  done
done
echo "medians (min-max) of the numeric phase, seconds:"
python3 - "$log" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    case, config, seconds = line.split()[:3]
    runs[(case, config)].append(float(seconds))
for (case, config), v in sorted(runs.items()):
    print(f"  {case:5s} {config:14s} {statistics.median(v):.4f} ({min(v):.4f}-{max(v):.4f}), {len(v)} runs")
PY
