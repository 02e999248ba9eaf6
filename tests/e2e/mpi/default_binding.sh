#!/usr/bin/env bash
# Open MPI binds each of one or two ranks to a single core unless told otherwise; blockmm must
# then widen the rank to its share of the node and say so (driver/cores.hpp), and must keep a
# binding the user asked for (--bind-to core). Under a real mpiexec; needs 2 cores or more.
set -euo pipefail
cores=$(nproc)
if [ "$cores" -lt 2 ]; then echo "SKIP: one core: no share to widen to"; exit 77; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$BLOCKMM_BUILD_DIR/blockmm-gen" "$work/a.bin" --n 512 --m 4 --k 3000 --max-value 65535 -q
threads() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["threads_per_rank"])' "$1"; }
# stderr's lines other than the run's log (its time-stamped header and closing line): notes, errors.
messages() { grep -Ev '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}[+-][0-9]{2}:[0-9]{2} blockmm: ' "$1" || true; }

# Default binding: widened to the node's cores (one rank), with one note.
"$MPIEXEC" -n 1 "$BLOCKMM_BUILD_DIR/blockmm" --backend cpu --stats=json "$work/a.bin" "$work/a.bin" "$work/c.bin" \
  > "$work/default.json" 2> "$work/default.err"
[ "$(threads "$work/default.json")" = "$cores" ] || { echo "default binding: expected $cores threads"; cat "$work/default.json"; exit 1; }
grep -q "note: mpirun bound each rank to 1 core" "$work/default.err" || { echo "no note"; cat "$work/default.err"; exit 1; }
[ "$(messages "$work/default.err" | grep -c .)" = 1 ] || { echo "more than one message on stderr"; cat "$work/default.err"; exit 1; }

# An explicit binding is the user's: one thread a bound core, nothing said.
"$MPIEXEC" -n 1 --bind-to core "$BLOCKMM_BUILD_DIR/blockmm" --backend cpu --stats=json "$work/a.bin" "$work/a.bin" \
  "$work/c2.bin" > "$work/core.json" 2> "$work/core.err"
[ "$(threads "$work/core.json")" = 1 ] || { echo "--bind-to core: expected 1 thread"; cat "$work/core.json"; exit 1; }
[ -z "$(messages "$work/core.err")" ] || { echo "unexpected stderr"; cat "$work/core.err"; exit 1; }
cmp "$work/c.bin" "$work/c2.bin"

# No binding: the share, nothing said.
"$MPIEXEC" -n 1 --bind-to none "$BLOCKMM_BUILD_DIR/blockmm" --backend cpu --stats=json "$work/a.bin" "$work/a.bin" \
  "$work/c3.bin" > "$work/none.json" 2> "$work/none.err"
[ "$(threads "$work/none.json")" = "$cores" ] || { echo "--bind-to none: expected $cores threads"; exit 1; }
[ -z "$(messages "$work/none.err")" ] || { echo "unexpected stderr"; cat "$work/none.err"; exit 1; }
echo "default binding widened to $cores cores with one note; --bind-to core kept"
