#!/usr/bin/env bash
# mpirun -np 1|2 with Open MPI's default binding against --bind-to none, for the binary before
# the core plan (BASELINE_TAR, as in compare_builds.sh) and after: cpu backend on D1s-sized
# inputs (and cuda on D1), 2 runs each. Prints wall seconds and threads per rank.
set -uo pipefail
cd "$(dirname "$0")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
new=$PWD/build-gpu/blockmm
old=/tmp/baseline/build/blockmm
data=/tmp/blockmm-bench
mkdir -p "$data"
[ -f $data/bind.A.bin ] || build-gpu/blockmm-gen $data/bind.A.bin --n 32768 --m 4 --k 300000 --max-value 1023 --seed 1 -q
[ -f $data/bind.B.bin ] || build-gpu/blockmm-gen $data/bind.B.bin --n 32768 --m 4 --k 300000 --max-value 1023 --seed 2 -q
cat $data/bind.A.bin $data/bind.B.bin > /dev/null
echo "mpirun -np 1, default binding: $(mpirun -np 1 grep Cpus_allowed_list /proc/self/status | tr -s '\t' ' ')"
echo "binding policy in the environment: ${OMPI_MCA_hwloc_base_binding_policy:-none set}"
for backend in cpu cuda; do
  for np in 1 2; do
    for bind in default none; do
      flags=(); [ $bind = none ] && flags=(--bind-to none)
      for bin in old new; do
        exe=$old; [ $bin = new ] && exe=$new
        [ -x "$exe" ] || continue
        for rep in 1 2; do
          start=$(date +%s%N)
          mpirun -np $np "${flags[@]}" "$exe" --backend $backend -q --stats=json $data/bind.A.bin $data/bind.B.bin /dev/null \
            > /tmp/bind.json 2> /tmp/bind.err || { echo "FAILED: $(tail -2 /tmp/bind.err)"; continue; }
          end=$(date +%s%N)
          printf "%-4s np%d %-7s %s: wall %.3f s, threads/rank %s\n" $backend $np $bind $bin "$(( (end - start) / 1000000 ))e-3" \
            "$(python3 -c 'import json; print(json.load(open("/tmp/bind.json"))["threads_per_rank"])')"
        done
      done
    done
  done
done
