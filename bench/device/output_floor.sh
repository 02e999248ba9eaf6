#!/usr/bin/env bash
# Issue 41 on the GPU machine, in one call (under 8 minutes on one H200): the write floors of
# /dev/shm (bench/write_floor: one file against separate files, 4 KiB pages and huge folios) at
# the sizes of D4's output and of the n 65 536, m 8, quarter-dense case's; then both cases on one
# GPU, inputs and output in /dev/shm, with the baseline (main before issue 41) and the working
# tree: one file (.bin and .h5), the tree's one file in 4 KiB pages (BLOCKMM_HUGE_OUTPUT=0), the
# tree's parted HDF5 output (--parts auto and 16), and the tree to /dev/null; the write phase and
# the rest from --stats=json. On a machine with two GPUs also mpirun -np 2 (a GPU each).
#   bash bench/device/output_floor.sh      (REPS=2, Q8_REPS=1, CASES="D4 Q8"; OLD_REV=e70f0ac or BASELINE_TAR=...)
# The baseline is `git archive $OLD_REV` where the copy has .git, else BASELINE_TAR (a tarball of
# the baseline tree, e.g. git archive -o shared/baseline.tar e70f0ac), else it is left out.
# Leaves in $OUT: summary.txt (everything below, readable), runs.csv (one line a run), floors.txt,
# logs.tgz (build logs and every run's stats JSON). A dry run without a GPU (the script's own
# test): CASES=T CUDA=OFF BACKEND=cpu bash bench/device/output_floor.sh (T: a small case).
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
logs=$(mktemp -d /tmp/output-floor-logs.XXXXXX)
summary=$OUT/summary.txt
csv=$OUT/runs.csv
reps=${REPS:-2}
data=/dev/shm/blockmm-output-floor
old_src=/tmp/output-floor-old
new_build=$root/build-output-floor
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HWLOC_COMPONENTS=-opencl
start=$(date +%s)
: > "$summary"
note() { echo "== $* ($(( $(date +%s) - start )) s)" | tee -a "$summary"; }
cleanup() { rm -rf "$data"; tar -czf "$OUT/logs.tgz" -C "$logs" . 2>/dev/null; rm -rf "$logs"; }
trap cleanup EXIT

note "machine: $(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | paste -sd, -), $(nproc) cores, Linux $(uname -r)"
note "tmpfs: shmem_enabled=$(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled); $(grep ' /dev/shm ' /proc/mounts | head -1); $(df -h /dev/shm | tail -1)"

# --- builds: the tree's tools first (blockmm-gen makes the data while the rest compiles) ---
cuda_flags=(-DBLOCKMM_ENABLE_CUDA="${CUDA:-ON}" -DCMAKE_CUDA_ARCHITECTURES=90)
cmake -S . -B "$new_build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda_flags[@]}" -DBLOCKMM_BUILD_TESTS=OFF \
  > "$logs/build-new.log" 2>&1 && ninja -C "$new_build" -j16 blockmm-gen >> "$logs/build-new.log" 2>&1 ||
  { note "build of the tree failed: $(tail -3 "$logs/build-new.log")"; exit 1; }
(ninja -C "$new_build" -j10 blockmm blockmm-cmp blockmm-convert write_floor >> "$logs/build-new.log" 2>&1; echo $? > "$logs/new.rc") &
new_pid=$!
old_bin=""
rm -rf "$old_src" && mkdir -p "$old_src"
if [ -n "${BASELINE_TAR:-}" ] && tar -xf "$BASELINE_TAR" -C "$old_src" 2>> "$logs/build-old.log"; then
  old_from="tarball $BASELINE_TAR"
elif git rev-parse -q --verify "${OLD_REV:-e70f0ac}^{commit}" > /dev/null 2>&1 && git archive "${OLD_REV:-e70f0ac}" | tar -x -C "$old_src"; then
  old_from="git archive ${OLD_REV:-e70f0ac}"
else
  old_from=""
fi
if [ -n "$old_from" ]; then
  (cmake -S "$old_src" -B "$old_src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda_flags[@]}" \
     -DBLOCKMM_BUILD_TESTS=OFF > "$logs/build-old.log" 2>&1 && ninja -C "$old_src/build" -j6 blockmm >> "$logs/build-old.log" 2>&1
   echo $? > "$logs/old.rc") &
  old_pid=$!
else
  note "no baseline: no .git here and no BASELINE_TAR; only the tree is measured"
  old_pid=""
fi

# --- data, in /dev/shm, beside the compilers ---
cases=${CASES:-D4 Q8}
case_args() {  # NAME -> blockmm-gen's shape options
  case $1 in
    D4) echo "--n 32768 --m 4 --k 33000000" ;;
    Q8) echo "--n 65536 --m 8 --density 0.25" ;;  # the issue's n 65 536, m 8, a quarter of the blocks
    T) echo "--n 8192 --m 4 --density 0.05" ;;     # small: the script's own dry run
    *) return 1 ;;
  esac
}
mkdir -p "$data"
gen=$new_build/blockmm-gen
for name in $cases; do
  shape=$(case_args "$name") || { note "unknown case $name"; exit 1; }
  for side in A:1 B:2; do
    "$gen" "$data/$name.${side%:*}.bin" $shape --max-value 1023 --seed "${side#*:}" -q --threads 6 ||
      { note "blockmm-gen failed"; exit 1; }
  done
done
note "data: $(du -sh "$data" | cut -f1) in $data ($cases)"
wait "$new_pid"
[ "$(cat "$logs/new.rc")" = 0 ] || { note "build of the tree failed: $(tail -3 "$logs/build-new.log")"; exit 1; }
if [ -n "$old_pid" ]; then
  wait "$old_pid"
  if [ "$(cat "$logs/old.rc")" = 0 ]; then old_bin=$old_src/build/blockmm; else note "baseline build failed: $(tail -3 "$logs/build-old.log")"; fi
fi
note "builds done: tree $(git rev-parse --short HEAD 2>/dev/null || echo '?'), baseline ${old_from:-none}"
new_bin=$new_build/blockmm

# --- the write floors at each case's output size (write_floor, 8 writers) ---
floor() {  # size label: threads (and, as the issue measured, processes) into one file or 8 files
  for files in one separate; do
    for method in map collapse pwrite map-processes; do
      [ $files = separate ] && [ $method = pwrite ] && continue
      local how=(--method "${method%-processes}")
      [ $method = map-processes ] && how+=(--processes)
      "$new_build/write_floor" /dev/shm "$1" --writers "${FLOOR_WRITERS:-8}" --files $files "${how[@]}" --repeat 2 |
        sed "s/^/$2 /" | tee -a "$OUT/floors.txt"
    done
  done
}
note "write floors (seconds=..., GB/s=..., prepare = the slowest writer's page preparation)"
declare -A out_bytes=([D4]=4831838208 [Q8]=17179869184 [T]=268435456)  # about each case's product
for name in $cases; do floor "${out_bytes[$name]}" "$name" > /dev/null; done
awk '{printf "  %s %s %s %s %s %s\n", $1, $4, $5, $6, $9, $10}' "$OUT/floors.txt" | tee -a "$summary"

# --- blockmm runs ---
echo "label,case,rep,rc,wall_s,total_s,numeric_s,kernels_s,write_s,commit_s,output_bytes,write_gbs,parts,mapped,threads,huge_extents,extents,tmpfs" > "$csv"
run() {  # label case rep out env... -- args...
  local label=$1 name=$2 rep=$3 out=$4; shift 4
  local envs=() args=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  args=("$@")
  [ -c "$out" ] || rm -f "$out" "$out".part-* 2> /dev/null  # never /dev/null itself
  sync
  local json=$logs/$label.$name.$rep.json t0 t1 rc
  t0=$(date +%s%N)
  local one_gpu=CUDA_VISIBLE_DEVICES=0
  [ "${args[0]}" = mpirun ] && one_gpu=BLOCKMM_OUTPUT_FLOOR=1  # mpirun: a GPU each
  env "$one_gpu" "${envs[@]}" "${args[@]}" --backend "${BACKEND:-cuda}" -q --stats=json "$data/$name.A.bin" "$data/$name.B.bin" "$out" \
    > "$json" 2> "$logs/err.txt"
  rc=$?
  t1=$(date +%s%N)
  python3 - "$label" "$name" "$rep" "$rc" "$(( (t1 - t0) / 1000000 ))" "$json" "$logs/err.txt" >> "$csv" <<'PY'
import json, sys
label, name, rep, rc, wall_ms, path, err = sys.argv[1:]
try:
    s = json.load(open(path)); t = s["seconds"]; w = s.get("output_write", {})
except (OSError, ValueError):
    print("%s,%s,%s,%s,%.3f,,,,,,,,,,,,,%s" % (label, name, rep, rc, int(wall_ms) / 1000, open(err).read().strip()[-150:].replace(",", ";")))
    sys.exit()
rate = s["output_bytes"] / t["write"] / 1e9 if t.get("write") else 0
print("%s,%s,%s,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%d,%.2f,%s,%s,%s,%s,%s,%s" % (
    label, name, rep, rc, int(wall_ms) / 1000, t["total"], t["numeric"], t.get("numeric_compute", 0), t["write"],
    t["commit"], s["output_bytes"], rate, w.get("parts", ""), w.get("mapped", ""), w.get("threads", ""),
    w.get("huge_extents", ""), w.get("extents", ""), w.get("tmpfs", "").replace(",", ";")))
PY
}
out=/dev/shm/blockmm-output-floor-C
gpus=$(nvidia-smi -L 2> /dev/null | wc -l)
for name in ${CASES:-D4 Q8}; do
  cat "$data/$name.A.bin" "$data/$name.B.bin" > /dev/null
  note "$name runs"
  case_reps=$reps
  [ "$name" = Q8 ] && case_reps=${Q8_REPS:-1}  # 17 GB a run: once, within the 8 minutes
  for rep in $(seq 1 "$case_reps"); do
    [ -n "$old_bin" ] && run old-bin $name $rep $out.bin -- "$old_bin"
    run new-bin $name $rep $out.bin -- "$new_bin"
    run new-bin-4k $name $rep $out.bin BLOCKMM_HUGE_OUTPUT=0 -- "$new_bin"
    [ -n "$old_bin" ] && run old-h5 $name $rep $out.h5 -- "$old_bin"
    run new-h5 $name $rep $out.h5 -- "$new_bin" --parts off
    run new-h5-parts-auto $name $rep $out.h5 -- "$new_bin" --parts auto
    run new-h5-parts-16 $name $rep $out.h5 -- "$new_bin" --parts 16
    run new-null $name $rep /dev/null -- "$new_bin"
    if [ "$gpus" -ge 2 ]; then
      run new-h5-np2 $name $rep $out.h5 -- mpirun -np 2 -x HWLOC_COMPONENTS "$new_bin" --parts off
      run new-h5-parts-np2 $name $rep $out.h5 -- mpirun -np 2 -x HWLOC_COMPONENTS "$new_bin" --parts auto
    fi
  done
  if [ "$name" != Q8 ]; then  # identity: the parted product joined is the single file, byte for byte
    run new-h5 $name check $out.single.h5 -- "$new_bin" --parts off > /dev/null
    run new-h5-parts-8 $name check $out.h5 -- "$new_bin" --parts 8 > /dev/null
    "$new_build/blockmm-convert" $out.h5 $out.joined.h5 && cmp -s $out.single.h5 $out.joined.h5 &&
      note "$name: the parted product joined by blockmm-convert is the single file, byte for byte" ||
      note "$name: JOINED PARTED PRODUCT DIFFERS from the single file"
    if [ -n "$old_bin" ]; then
      run old-bin $name check $out.old.bin -- "$old_bin" > /dev/null
      run new-bin $name check $out.bin -- "$new_bin" > /dev/null
      cmp -s $out.old.bin $out.bin && note "$name: the tree's .bin output is the baseline's, byte for byte" ||
        note "$name: THE TREE'S .bin OUTPUT DIFFERS from the baseline's"
    fi
    rm -f $out.* 2> /dev/null
  fi
  rm -f $out.bin $out.h5 $out.h5.part-* 2> /dev/null
done

note "runs (medians over the repeats; write GB/s = output / write phase)"
python3 - "$csv" "$OUT/floors.txt" $cases <<'PY' | tee -a "$summary"
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["rep"] != "check"]
floors = {}
for line in open(sys.argv[2]):
    w = line.split()
    kv = dict(x.split("=", 1) for x in w[1:] if "=" in x)
    key = (w[0], kv["files"])
    floors[key] = min(floors.get(key, 1e9), float(kv["seconds"]))
for name in sys.argv[3:]:
    print("  %s: write floors one file %.3f s, separate files %.3f s (best method, 8 writers)" %
          (name, floors.get((name, "one"), float("nan")), floors.get((name, "separate"), float("nan"))))
    labels = []
    for r in rows:
        if r["case"] == name and r["label"] not in labels:
            labels.append(r["label"])
    for label in labels:
        rs = [r for r in rows if r["case"] == name and r["label"] == label and r["rc"] == "0"]
        bad = [r for r in rows if r["case"] == name and r["label"] == label and r["rc"] != "0"]
        if not rs:
            print("    %-20s FAILED: %s" % (label, bad[0]["tmpfs"] if bad else "?"))
            continue
        med = lambda k: statistics.median(float(r[k]) for r in rs)
        one, sep = floors.get((name, "one")), floors.get((name, "separate"))
        w = med("write_s")
        print("    %-20s wall %.3f  total %.3f  numeric %.3f (kernels %.3f, write %.3f = %.2f GB/s; %s of the one-file "
              "floor, %s of the separate files') commit %.3f | parts %s, huge %s/%s" %
              (label, med("wall_s"), med("total_s"), med("numeric_s"), med("kernels_s"), w, med("write_gbs"),
               "%.2f" % (one / w) if one and w else "-", "%.2f" % (sep / w) if sep and w else "-", med("commit_s"),
               rs[0]["parts"], rs[0]["huge_extents"], rs[0]["extents"]))
PY
note "done"
