#!/usr/bin/env bash
# Issue 48's real shapes on one GPU: bench/real_shapes.py writes every case at full size into a
# folder of /dev/shm (removed at the end), then per case blockmm --backend cuda (3 runs, output
# to /dev/null, --stats=json: the least kernel time, numeric_compute, and the least process wall)
# and the cuSPARSE anchor (element-level CSR SpGEMM, f64, kernel time) on the same files; el3 and
# water16 are also multiplied by the cpu backend (all cores) and by cuda into files, which must
# be identical. The table comes last. Needs python3 with numpy. ~1-2 minutes on an H100 node.
#   bench/device/real_shapes.sh BUILD_DIR        (logs and stats under $OUT/real_shapes, or /tmp;
#                                                 REAL_SHAPES_SCALE=0.05: small cases, for a try)
set -uo pipefail
build=$(cd "${1:?usage: real_shapes.sh BUILD_DIR}" && pwd) || exit 2
cd "$(dirname "$0")/../.."
for tool in blockmm cusparse_anchor; do
  [ -x "$build/$tool" ] || { echo "real_shapes.sh: $build/$tool missing (build with CUDA)"; exit 2; }
done
python3 -c 'import numpy' 2> /dev/null || { echo "real_shapes.sh: python3 has no numpy"; exit 2; }
logs=${OUT:-/tmp}/real_shapes
mkdir -p "$logs"
data=$(mktemp -d /dev/shm/blockmm-real.XXXXXX) || exit 4
trap 'rm -rf "$data"' EXIT
cases="el3 el3p el3r el2 tet water water16"
start=$(date +%s)
python3 bench/real_shapes.py "$(echo $cases | tr ' ' ',')" "$data" --scale "${REAL_SHAPES_SCALE:-1}" | tee "$logs/generate.log"
echo "generated in $(( $(date +%s) - start )) s"
ms() { date +%s%N; }
table="case|m|block products|blockmm kernels s|blockmm wall s|cuSPARSE SpGEMM s|cuSPARSE/blockmm kernels|check"
for c in $cases; do
  a=$data/$c.A.bin b=$data/$c.B.bin
  best_k="" best_w="" products=""
  for rep in 1 2 3; do
    t0=$(ms)
    "$build/blockmm" --backend cuda -q --stats=json --stats-file "$logs/$c.$rep.json" "$a" "$b" /dev/null \
      > /dev/null 2> "$logs/$c.$rep.err" || { echo "$c: blockmm cuda failed: $(tail -2 "$logs/$c.$rep.err")"; continue; }
    t1=$(ms)
    read -r k p <<< "$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["seconds"]["numeric_compute"], s["block_products"])' "$logs/$c.$rep.json")"
    w=$(python3 -c "print(($t1 - $t0) / 1e9)")
    products=$p
    best_k=$(python3 -c "print('%.4f' % min($k, ${best_k:-1e30}))")
    best_w=$(python3 -c "print('%.4f' % min($w, ${best_w:-1e30}))")
  done
  sp=$(timeout 120 "$build/cusparse_anchor" "$a" "$b" 2> "$logs/$c.cusparse.err" | tail -1)
  echo "$c cuSPARSE: $sp" >> "$logs/cusparse.log"
  spgemm=$(python3 -c 'import json,sys
try:
    j = json.loads(sys.argv[1]); print(j["spgemm_seconds"] if j.get("status") == "ok" else "failed: " + str(j.get("status")))
except Exception: print("failed")' "$sp")
  check="-"
  if [ "$c" = el3 ] || [ "$c" = water16 ]; then
    "$build/blockmm" --backend cuda -q "$a" "$b" "$data/C.cuda.bin" 2> "$logs/$c.check.err" &&
      "$build/blockmm" --backend cpu -q "$a" "$b" "$data/C.cpu.bin" 2>> "$logs/$c.check.err" &&
      { cmp -s "$data/C.cuda.bin" "$data/C.cpu.bin" && check="cuda == cpu" || check="DIFFERENT"; } || check="failed"
    rm -f "$data/C.cuda.bin" "$data/C.cpu.bin"
  fi
  ratio=$(python3 -c 'import sys
try: print("%.2f" % (float(sys.argv[1]) / float(sys.argv[2])))
except Exception: print("-")' "$spgemm" "${best_k:-x}")
  m=$(python3 -c 'import numpy,sys; print(int(numpy.fromfile(sys.argv[1], dtype="<i4", count=2)[1]))' "$a")
  table="$table
$c|$m|${products:--}|${best_k:-failed}|${best_w:-failed}|$spgemm|$ratio|$check"
done
echo "total $(( $(date +%s) - start )) s; logs in $logs"
echo "$table" | column -t -s '|'
