#!/usr/bin/env bash
# Runs blockmm under mpiexec for the mpi tests, with a guard against hangs.
#
#   mpirun_blockmm.sh NPROCS STATUS_DIR [blockmm arguments...]
#
# Environment: BLOCKMM_BIN (the executable), BLOCKMM_MPIEXEC, BLOCKMM_MPIEXEC_NUMPROC_FLAG,
# BLOCKMM_MPIEXEC_FLAGS (e.g. --oversubscribe), BLOCKMM_MPI_TIMEOUT (seconds, default 60).
#
# Each rank runs through this script again ("--rank" mode): it runs blockmm, writes blockmm's
# exit code to STATUS_DIR/rank-<r> and exits 0, so that mpiexec never kills the other ranks when
# one fails: every rank's own code is seen. The script then exits with the code all ranks
# agreed on, 70 if they differ, 71 if a rank left no status, or timeout's 124 (137 after the
# kill) when the job hung.
set -u

if [ "${1:-}" = "--rank" ]; then
  status_dir=$2
  shift 2
  "$BLOCKMM_BIN" "$@"
  code=$?
  rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-unknown}}}
  echo "$code" > "$status_dir/rank-$rank"
  exit 0
fi

if [ $# -lt 2 ]; then
  echo "usage: $0 NPROCS STATUS_DIR [blockmm arguments...]" >&2
  exit 64
fi
np=$1
status_dir=$2
shift 2
mkdir -p "$status_dir" || exit 65

# shellcheck disable=SC2086  # the flag variables hold several words on purpose
timeout --kill-after=10 "${BLOCKMM_MPI_TIMEOUT:-60}" \
  "${BLOCKMM_MPIEXEC:-mpiexec}" ${BLOCKMM_MPIEXEC_NUMPROC_FLAG:--n} "$np" ${BLOCKMM_MPIEXEC_FLAGS:-} \
  bash "$0" --rank "$status_dir" "$@"
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "mpirun_blockmm.sh: mpiexec exited with status $rc" >&2
  exit "$rc"
fi

codes=()
for ((r = 0; r < np; r++)); do
  if [ ! -f "$status_dir/rank-$r" ]; then
    echo "mpirun_blockmm.sh: rank $r left no exit status" >&2
    exit 71
  fi
  codes+=("$(cat "$status_dir/rank-$r")")
done
for c in "${codes[@]}"; do
  if [ "$c" != "${codes[0]}" ]; then
    echo "mpirun_blockmm.sh: ranks exited with different codes: ${codes[*]}" >&2
    exit 70
  fi
done
exit "${codes[0]}"
