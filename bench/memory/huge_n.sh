#!/bin/bash
# bench/memory/huge_n.sh BLOCKMM [EXPONENTS]: peak RSS and wall time (/usr/bin/time) of blockmm for
# tiny inputs with a huge n (issue 17): k = 0, 1, 10, 1000 blocks, n = 2^e (default e = 20 24 28
# 30), m = 1 and 4; cpu and reference backends, binary and HDF5 output, 1 and 2 ranks. Each run
# is limited to 14 GB of address space and 400 s. HDF5 outputs hold n/m + 1 /indptr entries (8 GB
# at n = 2^30, m = 1): keep $BENCH_DIR on a disk with room. One line a run on stdout.
set -u
BIN=${1:?usage: huge_n.sh BLOCKMM [EXPONENTS]}
EXPS=${2:-20 24 28 30}
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$DIR/in" "$DIR/out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for e in $EXPS; do for m in 1 4; do for k in 0 1 10 1000; do
  a=$DIR/in/n${e}m${m}k${k}a.bin b=$DIR/in/n${e}m${m}k${k}b.bin
  [ -f "$a" ] || python3 "$HERE/make_input.py" "$a" $((1 << e)) $m $k 1
  [ -f "$b" ] || python3 "$HERE/make_input.py" "$b" $((1 << e)) $m $k 2
  for cfg in "cpu bin 1" "reference bin 1" "cpu h5 1" "reference h5 1" "cpu bin 2" "cpu h5 2"; do
    set -- $cfg
    out=$DIR/out/C.$2
    rm -f "$out"
    cmd=("$BIN" -q --threads 1 --backend "$1" "$a" "$b" "$out")
    [ "$3" = 2 ] && cmd=(mpirun -np 2 --oversubscribe "${cmd[@]}")
    r=$( (ulimit -v 14000000; timeout 400 /usr/bin/time -f "%M KB %e s exit %x" "${cmd[@]}" 2>&1 >/dev/null) | tail -1)
    echo "m=$m n=2^$e k=$k $1 $2 ranks=$3: $r"
    rm -f "$out"
  done
done; done; done
