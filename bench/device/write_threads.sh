#!/usr/bin/env bash
# The output writers alone (bench/write_bench.cpp), for issue 16: pwrite (the writer before the
# map) against the shared map with 1, 2, 4, 8 and 16 copying threads, binary and HDF5, into tmpfs
# and into a folder on disk; then blockmm end to end on one case with pwrite and with the map.
#   bench/device/write_threads.sh BUILD [SIZE (4.5G)] [DISK_DIR (/tmp)] [REPEAT (3)]
# BUILD holds write_bench and blockmm (ninja -C BUILD write_bench blockmm blockmm-gen).
# Prints write_bench's lines (threads=0: one pwrite stream; begin = reserve, write = the copies,
# finish = fsync + rename; GB/s over their sum) and blockmm's phase seconds.
set -uo pipefail
build=${1:?usage: write_threads.sh BUILD [SIZE] [DISK_DIR] [REPEAT]}
size=${2:-4.5G}
disk=${3:-/tmp}
repeat=${4:-3}
wb=$build/write_bench
mkdir -p "$disk" || exit 1
for dir in /dev/shm "$disk"; do
  for format in bin h5; do
    "$wb" "$dir/wb-C.$format" "$size" --format $format --threads 0 --repeat "$repeat"
    for t in 1 2 4 8 16; do "$wb" "$dir/wb-C.$format" "$size" --format $format --threads $t --repeat "$repeat"; done
    rm -f "$dir/wb-C.$format"
  done
done
# End to end: D1s-like inputs (m = 4, 1.2 GB of output, little compute) into tmpfs.
data=$disk/wb-data
mkdir -p "$data"
[ -f "$data/A.bin" ] || "$build/blockmm-gen" --n 32768 --m 4 --k 400000 --max-value 1023 --seed 1 -q "$data/A.bin"
[ -f "$data/B.bin" ] || "$build/blockmm-gen" --n 32768 --m 4 --k 400000 --max-value 1023 --seed 2 -q "$data/B.bin"
for r in $(seq "$repeat"); do
  for setting in BLOCKMM_IO=pwrite BLOCKMM_WRITE_THREADS=8; do
    env "$setting" "$build/blockmm" -q "$data/A.bin" "$data/B.bin" /dev/shm/wb-C.bin --stats=json --stats-file "$data/s.json" > /dev/null &&
      python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['seconds']; print('blockmm ' + sys.argv[2], ' '.join('%s=%.3f' % (k, s[k]) for k in ('total', 'numeric', 'numeric_compute', 'write', 'commit')))" "$data/s.json" "$setting"
  done
done
rm -f /dev/shm/wb-C.bin
