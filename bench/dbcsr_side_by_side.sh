#!/usr/bin/env bash
# Issue 21's comparison on this machine: blockmm's cpu numeric phase against DBCSR's multiply
# (bench/dbcsr_anchor), at equal ranks x threads, under mpirun --bind-to none, rounds alternated,
# outputs compared with blockmm-cmp. blockmm writes to /dev/null (its compute pipeline alone: DBCSR's
# multiply does not include its write either); OLD, when set, is a second blockmm run in turn.
# Prints one line a run, then the medians and DBCSR's multiply over blockmm's numeric phase.
#   bench/dbcsr_side_by_side.sh [ROUNDS] [LAYOUTS] [CASE...]
#   bench/dbcsr_side_by_side.sh 3 "1x2 2x1" C8 C4 S1 S2          (cases from bench/cases.sh)
# Environment: BUILD (blockmm, blockmm-gen, blockmm-cmp and dbcsr_anchor; default build-cpu),
# DBCSR (the anchor, default $BUILD/dbcsr_anchor), DBCSR_LIBS (a folder put first on its
# LD_LIBRARY_PATH), DATA (inputs, made once with bench/cases.sh's make_case), OLD (a blockmm),
# OPENBLAS_CORETYPE (default SkylakeX where the CPU has AVX-512, else Haswell: bench/NOTES.md 7),
# MAX_VALUE (the inputs' values are uniform in [0, MAX_VALUE]: default 1023, the cases' own; other
# values go to DATA/max<MAX_VALUE>. 65535 makes every A block take the cpu kernels' two byte planes).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-$PWD/build-cpu}
dbcsr=${DBCSR:-$build/dbcsr_anchor}
data=${DATA:-/tmp/blockmm-bench}
max_value=${MAX_VALUE:-1023}
[ "$max_value" = 1023 ] || data=$data/max$max_value
rounds=${1:-3}
layouts=${2:-"1x$(nproc) 2x$(($(nproc) / 2))"}
shift 2 2> /dev/null || shift $#
cases=${*:-C8 C4 S1 S2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 BLOCKMM_BUILD=$build
core=${OPENBLAS_CORETYPE:-SkylakeX}
grep -q -w avx512f /proc/cpuinfo || core=${OPENBLAS_CORETYPE:-Haswell}
[ -x "$dbcsr" ] || { echo "no DBCSR anchor at $dbcsr (BLOCKMM_BENCH_DEPS=1 scripts/install-deps, then build)"; exit 2; }
source bench/cases.sh
mkdir -p "$data"
for c in $cases; do
  line=$(printf '%s\n' $BLOCKMM_CASES $BLOCKMM_SMALL_CASES | paste - - - - | awk -v c="$c" '$1 == c' | head -1)
  [ -n "$line" ] || { echo "unknown case $c"; exit 2; }
  make_case "$data" $line 0 "$max_value"
done
log=$(mktemp)
out=/dev/shm/blockmm-dbcsr.$$.bin
trap 'rm -f "$log" "$out" "$out.ref" "$out.json" "$out.err"' EXIT

blockmm_run() {  # label exe case ranks threads
  mpirun -np "$4" --bind-to none "$2" --backend cpu --threads "$5" -q --stats=json "$data/$3.A.bin" "$data/$3.B.bin" \
    /dev/null < /dev/null > "$out.json" 2> "$out.err" || { echo "$3 $4x$5 $1 FAILED: $(tail -2 "$out.err")"; return; }
  python3 -c "import json, sys; s = json.load(open(sys.argv[1])); print('$3 $4x$5 $1 %.4f' % s['seconds']['numeric'])" \
    "$out.json" | tee -a "$log"
}
dbcsr_run() {  # case ranks threads
  timeout 900 mpirun -np "$2" --bind-to none -x LD_LIBRARY_PATH="${DBCSR_LIBS:+$DBCSR_LIBS:}${LD_LIBRARY_PATH:-}" \
    -x OMP_NUM_THREADS="$3" -x OPENBLAS_NUM_THREADS=1 -x OPENBLAS_CORETYPE="$core" \
    "$dbcsr" "$data/$1.A.bin" "$data/$1.B.bin" "$out" < /dev/null > "$out.json" 2> "$out.err" ||
    { echo "$1 $2x$3 DBCSR FAILED: $(tail -2 "$out.err")"; return; }
  # Checked against blockmm's product of the same files (written once a case).
  [ -f "$out.ref" ] || "$build/blockmm" --backend cpu -q "$data/$1.A.bin" "$data/$1.B.bin" "$out.ref"
  local same="DIFFERS from blockmm"
  "$build/blockmm-cmp" "$out.ref" "$out" > /dev/null 2>&1 && same="equal to blockmm"
  python3 -c "import json, sys; j = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')][-1]; print('$1 $2x$3 dbcsr %.4f (output $same)' % j['multiply'])" \
    "$out.json" | tee -a "$log"
  rm -f "$out"
}

echo "$(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores, OPENBLAS_CORETYPE=$core, values in [0, $max_value]"
for c in $cases; do
  rm -f "$out.ref"
  for round in $(seq 1 "$rounds"); do
    for layout in $layouts; do
      np=${layout%x*} t=${layout#*x}
      [ -n "${OLD:-}" ] && blockmm_run old "$OLD" "$c" "$np" "$t"
      blockmm_run new "$build/blockmm" "$c" "$np" "$t"
      dbcsr_run "$c" "$np" "$t"
    done
  done
done
echo "medians (min-max), seconds: blockmm numeric phase, DBCSR multiply; DBCSR / blockmm of the medians"
python3 - "$log" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    case, layout, who, seconds = line.split()[:4]
    runs[(case, layout, who)].append(float(seconds))
for (case, layout) in sorted({k[:2] for k in runs}):
    parts, med = [], {}
    for who in ("old", "new", "dbcsr"):
        v = runs.get((case, layout, who))
        if v:
            med[who] = statistics.median(v)
            parts.append(f"{who} {med[who]:.4f} ({min(v):.4f}-{max(v):.4f})")
    ratio = f"  DBCSR/new {med['dbcsr'] / med['new']:.1f}x" if "dbcsr" in med and med.get("new") else ""
    print(f"  {case:4s} {layout:5s} " + ", ".join(parts) + ratio)
PY
