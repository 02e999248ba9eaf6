#!/usr/bin/env bash
# The thread note tells the truth under OpenMP binding (issue 53 item 3): with OMP_PLACES=cores
# OMP_PROC_BIND=close (cpu.sbatch's settings) libgomp pins the first thread to one core before
# main, and blockmm, reading the affinity mask then, said "2 threads share the 1 core(s) this
# rank is bound to" in every job log. Bound to 2 cores: no note, 2 threads; bound to 1: the note.
# Needs 2 CPUs and taskset.
set -euo pipefail
command -v taskset >/dev/null || { echo "SKIP: no taskset"; exit 77; }
cpus=$(taskset -pc $$ | sed 's/.*: //')
first=$(python3 -c 'import os; c = sorted(os.sched_getaffinity(0)); print(",".join(map(str, c[:2])) if len(c) >= 2 else "")')
[ -n "$first" ] || { echo "SKIP: fewer than 2 CPUs here ($cpus)"; exit 77; }
one=${first%,*}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$BLOCKMM_BUILD_DIR/blockmm-gen" "$work/a.bin" -n 256 -m 4 --density 0.2 -q
run() {  # run CPUS NAME: blockmm as cpu.sbatch's rank on CPUS, stderr to NAME.err
  OMP_NUM_THREADS=2 OMP_PLACES=cores OMP_PROC_BIND=close BLOCKMM_MPI=0 taskset -c "$1" \
    "$BLOCKMM_BUILD_DIR/blockmm" --backend cpu --stats=json "$work/a.bin" "$work/a.bin" "$work/$2.bin" \
    >"$work/$2.json" 2>"$work/$2.err" || fail "blockmm on CPUs $1: $(cat "$work/$2.err")"
}
threads() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["threads_per_rank"])' "$1"; }

run "$first" two
! grep -q 'share the' "$work/two.err" || fail "bound to CPUs $first, a false note: $(cat "$work/two.err")"
[ "$(threads "$work/two.json")" = 2 ] || fail "bound to CPUs $first: not 2 threads"
grep -q ' 1 rank x 2 threads: ' "$work/two.err" || fail "no header naming 2 threads: $(cat "$work/two.err")"

run "$one" one
grep -q 'note: 2 threads share the 1 core(s) this rank is bound to' "$work/one.err" ||
  fail "bound to CPU $one, no note: $(cat "$work/one.err")"
cmp "$work/one.bin" "$work/two.bin"
echo "bound to 2 CPUs ($first): no note; bound to 1 ($one): the note"
