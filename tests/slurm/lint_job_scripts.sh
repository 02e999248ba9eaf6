#!/bin/bash
# Static checks of jobs/slurm/*.sbatch and blockmm-job, no Slurm needed: bash syntax,
# ShellCheck (when installed), short enough to review (at most 30 lines), and what each
# script promises: its #SBATCH defaults, a module-load slot, OpenMP placement, srun binding
# (cores; GPU scripts one GPU a task, the closest), the checks around srun, and the usage
# error (exit 2) when started without inputs.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${BLOCKMM_SOURCE_DIR:-$(cd "$here/../.." && pwd)}/jobs/slurm
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
  has "$name" '^blockmm-job check "\$@"$'
  has "$name" '^srun .*--cpu-bind=cores'
  has "$name" '^blockmm-job verify "\$3"$'
  if [[ $name == cpu ]]; then
    has cpu '^  blockmm --backend cpu '
  else
    has "$name" '^#SBATCH --gpus-per-task=1$'
    has "$name" '^srun .*--gpus-per-task=1 --gpu-bind=closest'
    has "$name" '^  blockmm --backend cuda '
  fi
  rc=0
  env PATH="$fake:$PATH" bash "$file" >/dev/null 2>&1 || rc=$?
  ((rc == 2)) || bad "$name.sbatch without inputs exited $rc, expected 2"
done
[[ -x $dir/blockmm-job ]] || bad "blockmm-job is not executable"
bash -n "$dir/blockmm-job" || bad "blockmm-job: bash syntax error"
if command -v shellcheck >/dev/null 2>&1; then
  shellcheck -S warning "$dir"/*.sbatch "$dir/blockmm-job" "$here"/*.sh || bad "shellcheck reported problems"
else
  echo "note: shellcheck not installed; skipped it"
fi
((failures == 0)) || exit 1
echo "PASS: ${#scripts[@]} job scripts and blockmm-job"
