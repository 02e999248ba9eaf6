#!/usr/bin/env bash
# A B three times --host-memory through the cuda backend (issue 51), against the unlimited run:
# bytes compared, wall time and peak RSS printed. Four runs of one product (n 65 536, m 8; B
# 8 M blocks, 1.1 GB; A 2 048 blocks, a 0.55 GB product), each written to a file on local disk
# through pwrite (a shared map of a tmpfs output would count in the RSS):
#   whole      cuda, no bound                    B read from its file onto the GPU, as before
#   host3      cuda, --host-memory B/3           the same: a GPU holding B never holds it on the host
#   panels     cuda, --host-memory B/3 and a --mem-budget that B's operand is 2.5x past: B in
#              block-column panels, each scanned from its file at each build (not read into
#              host memory), built twice (streamed)
#   cpu3       cpu, --host-memory B/3            the cpu backend's panels from the file
# Every output must equal the first (cmp); RSS must stay below the budget plus A and a chunk
# (plus what a run costs) for host3, panels and cpu3. Under 2 minutes on one H100 or H200 with 16 cores.
#   bench/device/host_memory.sh BUILD_DIR          (writes its logs under $OUT)
set -uo pipefail
build=${1:?usage: host_memory.sh BUILD_DIR}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
data=${DATA:-/tmp/blockmm-host-memory}
mkdir -p "$data"
trap 'rm -rf "$data"' EXIT
for tool in blockmm blockmm-gen; do [ -x "$build/$tool" ] || { echo "no $build/$tool"; exit 2; }; done
"$build/blockmm-gen" "$data/A.bin" --n 65536 --m 8 --k 2048 --seed 1 -q || exit 1
"$build/blockmm-gen" "$data/B.bin" --n 65536 --m 8 --k "${K_B:-8388608}" --seed 2 -q || exit 1
b_bytes=$(stat -c %s "$data/B.bin")
budget=$((b_bytes / 3))
chunk=$((16 << 20))
printf "%-8s %9s %9s %8s  %s\n" run seconds "RSS MiB" same layout | tee "$OUT/summary.txt"
run() {  # run NAME ARGS...
  local name=$1; shift
  rm -f "$data/C.$name.bin"
  if ! BLOCKMM_IO=pwrite /usr/bin/time -f "%e %M" -o "$OUT/$name.time" "$build/blockmm" -q --chunk-size 16M \
      --stats-file "$OUT/$name.json" "$@" "$data/A.bin" "$data/B.bin" "$data/C.$name.bin" 2> "$OUT/$name.err"; then
    echo "$name FAILED: $(tail -1 "$OUT/$name.err")" | tee -a "$OUT/summary.txt"
    return
  fi
  read -r seconds rss_kb < <(tail -1 "$OUT/$name.time")
  local same=yes
  [ "$name" = whole ] || cmp -s "$data/C.whole.bin" "$data/C.$name.bin" || same=NO
  local layout
  layout=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["team"]["layout"])' "$OUT/$name.json")
  printf "%-8s %9.2f %9d %8s  %s\n" "$name" "$seconds" $((rss_kb / 1024)) "$same" "$layout" | tee -a "$OUT/summary.txt"
  [ "$name" = whole ] || rm -f "$data/C.$name.bin"
}
cat "$data/A.bin" "$data/B.bin" > /dev/null  # both in the page cache for every run
run whole --backend cuda
run host3 --backend cuda --host-memory "$budget"
run panels --backend cuda --host-memory "$budget" --mem-budget "$((b_bytes * 2 / 5))"
run cpu3 --backend cpu --host-memory "$budget"
echo "B $((b_bytes >> 20)) MiB, --host-memory $((budget >> 20)) MiB, A $(($(stat -c %s "$data/A.bin") >> 10)) KiB," \
  "chunk $((chunk >> 20)) MiB: host3, panels and cpu3 should stay below $(((budget + 2 * chunk) >> 20)) MiB of RSS plus" \
  "what a run costs (a GPU run's CUDA context and staging take a few hundred MiB); every 'same' yes" | tee -a "$OUT/summary.txt"
