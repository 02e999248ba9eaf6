#!/bin/bash
# Static checks of jobs/slurm/*.sbatch and blockmm-job, no Slurm needed: bash syntax,
# ShellCheck (when installed), short enough to review (at most 30 lines), and what each
# script promises: its #SBATCH defaults, a module-load slot, OpenMP placement, srun binding
# (cores; GPU scripts one GPU a task, the closest), the checks around srun, and the usage
# error (exit 2) when started without inputs. With a built blockmm (BLOCKMM_BIN), how
# `blockmm-job check` finds A, B and OUT among blockmm's arguments, options anywhere.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${BLOCKMM_SOURCE_DIR:-$(cd "$here/../../.." && pwd)}/jobs/slurm
failures=0
bad() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
has() { grep -Eq -- "$2" "$dir/$1.sbatch" || bad "$1.sbatch: no line matching '$2'"; }

# blockmm-job alone on PATH, with a stand-in blockmm: the usage error comes before srun.
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
ln -s "$dir/blockmm-job" "$fake/blockmm-job"
ln -s /bin/true "$fake/blockmm"

scripts=(cpu single-gpu gpus)
for name in "${scripts[@]}"; do
  file=$dir/$name.sbatch
  [[ -f $file ]] || { bad "$file is missing"; continue; }
  [[ -x $file ]] || bad "$file is not executable"
  bash -n "$file" || bad "$file: bash syntax error"
  lines=$(wc -l <"$file")
  ((lines <= 30)) || bad "$name.sbatch has $lines lines; keep it at most 30"
  has "$name" '^set -euo pipefail$'
  for directive in --job-name= --time= --output=blockmm-.*%j --cpus-per-task=; do
    has "$name" "^#SBATCH $directive"
  done
  has "$name" '^# module load '
  has "$name" '^export OMP_NUM_THREADS=\$\{SLURM_CPUS_PER_TASK:-1\} OMP_PLACES=cores OMP_PROC_BIND=close$'
  has "$name" '^out=\$\(blockmm-job check "\$@"\)'
  has "$name" '--stats-file "\$out.stats.json" "\$@"$'
  has "$name" '^srun .*--cpu-bind=cores'
  has "$name" '^blockmm-job verify "\$out"$'
  if [[ $name == cpu ]]; then
    has cpu '^  blockmm --backend cpu '
  elif [[ $name == gpus ]]; then
    # One rank a node, driving every GPU of its node (one CUDA start and one read a node).
    has gpus '^#SBATCH --ntasks-per-node=1$'
    has gpus '^#SBATCH --gpus-per-node='
    has gpus '^srun .*--ntasks-per-node=1 '
    has gpus '^  blockmm --backend cuda '
  else
    has "$name" '^#SBATCH --gpus-per-task=1$'
    has "$name" '^srun .*--gpus-per-task=1 --gpu-bind=closest'
    has "$name" '^  blockmm --backend cuda '
  fi
  rc=0
  env PATH="$fake:$PATH" bash "$file" >/dev/null 2>&1 || rc=$?
  ((rc == 2)) || bad "$name.sbatch without inputs exited $rc, expected 2"
done
# blockmm-job --help and --version answer (exit 0), as every installed tool.
for flag in --help --version; do
  rc=0
  text=$(env PATH="$fake:$PATH" "$dir/blockmm-job" "$flag" 2>&1) || rc=$?
  ((rc == 0)) || bad "blockmm-job $flag exited $rc, expected 0"
  [[ $text == *blockmm-job* ]] || bad "blockmm-job $flag does not name itself: $text"
done

# check: OUT (printed) wherever it is, every option of the real blockmm read with its value.
bin=${BLOCKMM_BIN:-}
if [[ -x $bin ]]; then
  real=$(mktemp -d)
  trap 'rm -rf "$fake" "$real"' EXIT
  ln -s "$bin" "$real/blockmm"
  ln -s "$dir/blockmm-job" "$real/blockmm-job"
  check() { (cd "$real" && env PATH="$real:$PATH" TMPDIR="$real" ./blockmm-job check "$@" 2>/dev/null); }
  expect_out() {
    local want=$1 got rc=0
    shift
    got=$(check "$@") || rc=$?
    [[ $rc == 0 && $got == "$want" ]] || bad "blockmm-job check $*: printed '$got' (exit $rc), expected '$want'"
  }
  expect_usage() {
    local rc=0
    check "$@" >/dev/null || rc=$?
    ((rc == 2)) || bad "blockmm-job check $*: exit $rc, expected 2"
  }
  expect_out C.bin A.bin B.bin C.bin
  expect_out C.bin A.bin B.bin C.bin --chunk-size 1G
  expect_out C.bin --chunk-size 1G A.bin B.bin C.bin
  expect_out C.bin --chunk-size=1G --backend cpu -q A.bin B.bin C.bin
  expect_out C.bin --threads 2 A.bin --stats B.bin C.bin
  expect_out C.bin --stats json A.bin B.bin C.bin --stats-file s.json
  expect_out C.bin --stats=text A.bin B.bin C.bin
  expect_out C.bin -qv --progress lines A.bin B.bin C.bin
  expect_out out/-C.bin --chunk-size 1G -- A.bin B.bin out/-C.bin
  expect_out '-C.bin' -q -- -A.bin -B.bin -C.bin
  expect_out 'C d.bin' --mem-budget 4G 'A b.bin' B.bin 'C d.bin'
  expect_usage
  expect_usage A.bin B.bin
  expect_usage A.bin B.bin C.bin D.bin
  expect_usage --chunk-size A.bin B.bin C.bin  # the value takes A.bin: two operands left
  expect_usage --chunksize 1G A.bin B.bin C.bin
  expect_usage --quiet=yes A.bin B.bin C.bin
  expect_usage A.bin B.bin C.bin --threads
  expect_usage --help
else
  echo "note: BLOCKMM_BIN is not a built blockmm; skipped blockmm-job check's argument cases"
fi

[[ -x $dir/blockmm-job ]] || bad "blockmm-job is not executable"
bash -n "$dir/blockmm-job" || bad "blockmm-job: bash syntax error"
if command -v shellcheck >/dev/null 2>&1; then
  shellcheck -S warning "$dir"/*.sbatch "$dir/blockmm-job" "$here"/*.sh || bad "shellcheck reported problems"
else
  echo "note: shellcheck not installed; skipped it"
fi
((failures == 0)) || exit 1
echo "PASS: ${#scripts[@]} job scripts and blockmm-job"
