#!/usr/bin/env bash
# Issue 49: the product's delivery against /dev/null and against the write floors, two builds side
# by side in one call. Generates each case in /dev/shm (blockmm-gen with every core), measures
# bench/write_floor at the case's output size (one file in huge folios; separate files), then runs
# each build alternately, REPS times, on:  null (-> /dev/null), bin (-> C.bin), h5 (-> C.h5, one
# file: --parts off), parts (-> C.h5 in PARTS parts, default 8), all in /dev/shm; wall time and the
# write phase from --stats=json. Outputs are deleted after each run (Q8's is 17.7 GB). The first
# case is also checked byte for byte: the builds' .bin alike, and the new build's parted .h5
# joined by blockmm-convert equal to its one-file .h5. Prints a compact table last. Other targets
# (TARGETS): auto (--parts auto), auto4k (the same in 4 KiB pages, BLOCKMM_HUGE_OUTPUT=0). It
# replaces output_floor.sh (issue 41), which built its own trees.
#   bash bench/device/output_speed.sh NEW_BUILD BASE_BUILD
#   (CASES="D4 Q8", REPS=3, PARTS=8, BACKEND=cuda, TARGETS="null bin h5 parts"; one GPU:
#   CUDA_VISIBLE_DEVICES=0 unless set)
# About 3-4 minutes on one H100 node (16 cores). On the dev VM: CASES="C4 D1s" BACKEND=cpu.
# Leaves in $OUT (default /tmp/output-speed): runs.csv (one line a run), floors.txt, table.txt,
# and every run's stats JSON under json/.
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 NEW_BUILD BASE_BUILD" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
new_build=$(cd "$1" && pwd) && base_build=$(cd "$2" && pwd) || exit 2
for b in "$new_build" "$base_build"; do
  [ -x "$b/blockmm" ] || { echo "$b/blockmm: not built" >&2; exit 2; }
done
for tool in blockmm-gen blockmm-convert write_floor; do
  [ -x "$new_build/$tool" ] || { echo "$new_build/$tool: not built" >&2; exit 2; }
done
OUT=${OUT:-/tmp/output-speed}
data=${DATA:-/dev/shm/blockmm-output-speed}
cases=${CASES:-D4 Q8}
reps=${REPS:-3}
parts=${PARTS:-8}
backend=${BACKEND:-cuda}
targets=${TARGETS:-null bin h5 parts}
threads=$(nproc)
mkdir -p "$OUT/json" "$data"
out=$data/C
csv=$OUT/runs.csv
cleanup() { rm -rf "$data"; }
trap cleanup EXIT
start=$(date +%s)
note() { echo "== $* ($(( $(date +%s) - start )) s)" >&2; }
[ "$backend" = cuda ] && export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}  # one GPU

note "$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1) $threads cores, Linux $(uname -r);" \
  "shmem_enabled=$(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled 2> /dev/null); $(df -h /dev/shm | tail -1)"

export BLOCKMM_BUILD=$new_build
source "$root/bench/cases.sh"
case_line() {  # NAME -> "n m k"
  echo "$BLOCKMM_CASES $BLOCKMM_GPU_CASES $BLOCKMM_SMALL_CASES" |
    awk -v name="$1" '$1 == name { print $2, $3, $4; exit }'
}

echo "case,build,target,rep,rc,wall_s,write_s,numeric_s,total_s,output_bytes,parts,mapped,huge_extents,extents" > "$csv"
: > "$OUT/floors.txt"
remove_output() { rm -f "$out".bin "$out".h5 "$out".h5.part-* "$out".joined.h5 "$out".base.bin "$out".one.h5 2> /dev/null; }

run() {  # case build target rep
  local name=$1 build=$2 target=$3 rep=$4 bin dest json t0 t1 rc
  local args=()
  bin=$([ "$build" = new ] && echo "$new_build" || echo "$base_build")/blockmm
  local env=()
  case $target in
    null) dest=/dev/null ;;
    bin) dest=$out.bin ;;
    h5) dest=$out.h5; args=(--parts off) ;;
    parts) dest=$out.h5; args=(--parts "$parts") ;;
    auto) dest=$out.h5; args=(--parts auto) ;;
    auto4k) dest=$out.h5; args=(--parts auto); env=(BLOCKMM_HUGE_OUTPUT=0) ;;  # 4 KiB pages: parts
  esac
  json=$OUT/json/$name.$build.$target.$rep.json
  t0=$(date +%s%N)
  env "${env[@]}" "$bin" --backend "$backend" -q --stats=json "${args[@]}" "$data/$name.A.bin" "$data/$name.B.bin" "$dest" \
    > "$json" 2> "$OUT/json/err.txt"
  rc=$?
  t1=$(date +%s%N)
  python3 - "$name" "$build" "$target" "$rep" "$rc" "$(( (t1 - t0) / 1000000 ))" "$json" >> "$csv" <<'PY'
import json, sys
name, build, target, rep, rc, wall_ms, path = sys.argv[1:]
try:
    s = json.load(open(path)); t = s["seconds"]; w = s.get("output_write", {})
    print("%s,%s,%s,%s,%s,%.3f,%.4f,%.4f,%.4f,%d,%s,%s,%s,%s" % (
        name, build, target, rep, rc, int(wall_ms) / 1000, t["write"], t["numeric"], t["total"], s["output_bytes"],
        w.get("parts", ""), w.get("mapped", ""), w.get("huge_extents", ""), w.get("extents", "")))
except (OSError, ValueError, KeyError):
    print("%s,%s,%s,%s,%s,%.3f,,,,,,,," % (name, build, target, rep, rc, int(wall_ms) / 1000))
PY
  [ "$rc" = 0 ] || note "$name $build $target rep $rep: exit $rc: $(tail -c 300 "$OUT/json/err.txt")"
  [ "$dest" = /dev/null ] || rm -f "$dest" "$dest".part-* 2> /dev/null
}

first=1
for name in $cases; do
  shape=$(case_line "$name")
  [ -n "$shape" ] || { note "unknown case $name"; continue; }
  make_case "$data" "$name" $shape "$threads" || { note "blockmm-gen failed for $name"; continue; }
  note "$name: n m k = $shape; inputs $(du -ch "$data/$name".*.bin | tail -1 | cut -f1)"
  run "$name" new null 0
  bytes=$(awk -F, -v n="$name" '$1 == n && $3 == "null" { print $10 }' "$csv" | tail -1)
  if [ -n "$bytes" ]; then  # the floors at this output's size: 8 writers (the writer's threads)
    for files in one separate; do
      for method in collapse map; do
        "$new_build/write_floor" /dev/shm "$bytes" --writers "$(( threads < 8 ? threads : 8 ))" --files $files \
          --method $method --repeat 2 | sed "s/^/$name /" >> "$OUT/floors.txt"
      done
    done
  fi
  for rep in $(seq 1 "$reps"); do
    for build in new base; do
      for target in $targets; do run "$name" $build $target "$rep"; done
    done
  done
  if [ "$first" = 1 ]; then  # identity: the builds' binary products, and the parted product joined
    first=0
    inputs=("$data/$name.A.bin" "$data/$name.B.bin")
    "$base_build/blockmm" --backend "$backend" -q "${inputs[@]}" "$out.base.bin" &&
      "$new_build/blockmm" --backend "$backend" -q "${inputs[@]}" "$out.bin" && cmp -s "$out.bin" "$out.base.bin" &&
      note "$name: .bin of both builds identical" || note "$name: .bin OUTPUTS DIFFER"
    remove_output
    "$new_build/blockmm" --backend "$backend" -q --parts off "${inputs[@]}" "$out.one.h5" &&
      "$new_build/blockmm" --backend "$backend" -q --parts "$parts" "${inputs[@]}" "$out.h5" &&
      "$new_build/blockmm-convert" "$out.h5" "$out.joined.h5" && cmp -s "$out.one.h5" "$out.joined.h5" &&
      note "$name: parted .h5 joined = one-file .h5, byte for byte" || note "$name: JOINED PARTED .h5 DIFFERS"
    remove_output
  fi
  rm -f "$data/$name".*.bin
done

python3 - "$csv" "$OUT/floors.txt" <<'PY' | tee "$OUT/table.txt"
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["rep"] not in ("0", "check")]
floors = {}
for line in open(sys.argv[2]):
    w = line.split()
    kv = dict(x.split("=", 1) for x in w[1:] if "=" in x)
    if "seconds" in kv:
        key = (w[0], kv.get("files"))
        floors[key] = min(floors.get(key, 1e9), float(kv["seconds"]))
print("write = the write phase (--stats=json); GB/s = output / write; /1 and /F: the write rate over the one-file"
      " and separate-files floors (write_floor, best of collapse and map, 2 runs); min-median over the repeats")
print("%-4s %-5s %-6s %-13s %-15s %-6s %-5s %-5s %-5s %s" % ("case", "build", "target", "wall s", "write s", "GB/s",
                                                           "/1", "/F", "parts", "huge/extents"))
for name in dict.fromkeys(r["case"] for r in rows):
    one, sep = floors.get((name, "one")), floors.get((name, "separate"))
    size = next((float(r["output_bytes"]) for r in rows if r["case"] == name and r["output_bytes"]), 0)
    print("%s: output %.2f GB; floors one file %s, separate files %s" % (
        name, size / 1e9, "%.3f s (%.1f GB/s)" % (one, size / one / 1e9) if one else "-",
        "%.3f s (%.1f GB/s)" % (sep, size / sep / 1e9) if sep else "-"))
    for build in ("new", "base"):
        for target in ("null", "bin", "h5", "parts", "auto", "auto4k"):
            rs = [r for r in rows if (r["case"], r["build"], r["target"]) == (name, build, target)]
            ok = [r for r in rs if r["rc"] == "0" and r["write_s"]]
            if not rs:
                continue
            if not ok:
                print("%-4s %-5s %-6s FAILED (%d runs)" % (name, build, target, len(rs)))
                continue
            wall = sorted(float(r["wall_s"]) for r in ok)
            write = sorted(float(r["write_s"]) for r in ok)
            mw = statistics.median(write)
            rate = size / mw / 1e9 if mw > 0 and target != "null" else 0
            print("%-4s %-5s %-6s %5.3f-%-7.3f %6.4f-%-8.4f %-6s %-5s %-5s %-5s %s/%s" % (
                name, build, target, wall[0], statistics.median(wall), write[0], mw,
                "%.2f" % rate if rate else "-", "%.2f" % (one / mw) if rate and one else "-",
                "%.2f" % (sep / mw) if rate and sep else "-", ok[0]["parts"], ok[0]["huge_extents"], ok[0]["extents"]))
PY
note "done"
