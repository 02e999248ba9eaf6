#!/usr/bin/env bash
# The DBCSR anchor against blockmm on small random cases (saturating values, odd m, 1 and 2 ranks):
#   bench/check_dbcsr_anchor.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
for spec in "600 6 3000" "96 1 2000" "256 8 900"; do
  read -r n m k <<< "$spec"
  "$build/blockmm-gen" "$work/a.bin" --n "$n" --m "$m" --k "$k" --max-value 65535 --seed 11 -q
  "$build/blockmm-gen" "$work/b.bin" --n "$n" --m "$m" --k "$k" --max-value 65535 --seed 12 -q
  "$build/blockmm" --threads 1 "$work/a.bin" "$work/b.bin" "$work/c.bin"
  for np in 1 2; do
    mpiexec -n "$np" --oversubscribe "$build/dbcsr_anchor" "$work/a.bin" "$work/b.bin" "$work/d.bin" > /dev/null
    "$build/blockmm-cmp" "$work/c.bin" "$work/d.bin"
  done
done
