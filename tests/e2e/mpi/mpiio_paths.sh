#!/usr/bin/env bash
# On one node blockmm reads and writes with POSIX calls; across nodes with MPI-IO. BLOCKMM_IO=mpi
# forces the MPI-IO path here, so that it is tested: the product (binary and HDF5) must be
# byte-identical to a single-process run, and a bad last record must still fail cleanly.
# BLOCKMM_MPI_PIECE_BYTES makes every message and file access travel in pieces of a few KB, as
# messages over 2^31 - 1 bytes do in 1 GiB pieces.
set -euo pipefail
build=${BLOCKMM_BUILD_DIR:?}
mpiexec=${MPIEXEC:-mpiexec}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/blockmm-gen" "$work/A.bin" --n 1200 --m 4 --density 0.05 --max-value 65535 --seed 21 -q
"$build/blockmm-gen" "$work/B.bin" --n 1200 --m 4 --density 0.05 --max-value 65535 --seed 22 --skew 1 -q
BLOCKMM_MPI=0 "$build/blockmm" -q --backend reference "$work/A.bin" "$work/B.bin" "$work/ref.bin"
BLOCKMM_MPI=0 "$build/blockmm" -q "$work/A.bin" "$work/B.bin" "$work/ref.h5"
for n in 2 3; do
  BLOCKMM_IO=mpi BLOCKMM_MPI_PIECE_BYTES=4099 timeout 120 "$mpiexec" -n "$n" --oversubscribe "$build/blockmm" -q --threads 1 \
    "$work/A.bin" "$work/B.bin" "$work/mpi$n.bin"
  cmp "$work/ref.bin" "$work/mpi$n.bin"
  BLOCKMM_IO=mpi BLOCKMM_MPI_PIECE_BYTES=4099 timeout 120 "$mpiexec" -n "$n" --oversubscribe "$build/blockmm" -q --threads 1 \
    "$work/A.bin" "$work/B.bin" "$work/mpi$n.h5"
  "$build/blockmm-convert" "$work/mpi$n.h5" "$work/mpi$n.h5.bin" > /dev/null
  cmp "$work/ref.bin" "$work/mpi$n.h5.bin"
done
# A corrupt last record, read only by the last rank through MPI-IO: every rank exits 3, no output.
cp "$work/A.bin" "$work/bad.bin"
printf '\xff\xff\xff\x7f' | dd of="$work/bad.bin" bs=1 seek=$(( $(stat -c %s "$work/bad.bin") - 8 - 32 )) conv=notrunc status=none
set +e
BLOCKMM_IO=mpi timeout 120 "$mpiexec" -n 3 --oversubscribe "$build/blockmm" -q --threads 1 \
  "$work/bad.bin" "$work/B.bin" "$work/bad_out.bin" 2> "$work/err.txt"
rc=$?
set -e
[ "$rc" -ne 0 ] || { echo "a bad input succeeded"; exit 1; }
grep -q "blockmm: error: .*bad.bin: record" "$work/err.txt" || { cat "$work/err.txt"; exit 1; }
[ ! -e "$work/bad_out.bin" ] && ! ls "$work"/.bad_out.bin.blockmm-tmp.* >/dev/null 2>&1
echo "OK: MPI-IO reads and writes give the single-process bytes; bad input fails cleanly"
