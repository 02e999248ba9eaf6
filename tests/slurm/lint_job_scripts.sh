#!/bin/bash
# Static checks of jobs/slurm/*.sbatch, no Slurm needed: bash syntax, shellcheck (when
# installed), the shared part identical in every script, the #SBATCH defaults each promises,
# and the usage error (exit 2) when started without inputs.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${BLOCKMM_SOURCE_DIR:-$(cd "$here/../.." && pwd)}/jobs/slurm
failures=0
bad() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

scripts=(cpu single-gpu node-gpus multi-node)
common() { sed -n '/^# ---- common part/,/^# ---- end of common part/p' "$dir/$1.sbatch"; }
reference=$(common cpu)
[[ -n $reference ]] || bad "cpu.sbatch has no common part"
for name in "${scripts[@]}"; do
  file=$dir/$name.sbatch
  [[ -f $file ]] || { bad "$file is missing"; continue; }
  [[ -x $file ]] || bad "$file is not executable"
  bash -n "$file" || bad "$file: bash syntax error"
  [[ $(common "$name") == "$reference" ]] || bad "$name.sbatch: the common part differs from cpu.sbatch's"
  grep -q '^set -euo pipefail$' "$file" || bad "$name.sbatch: no 'set -euo pipefail'"
  for directive in --job-name= --time= --output=blockmm-.*%j; do
    grep -Eq "^#SBATCH $directive" "$file" || bad "$name.sbatch: no '#SBATCH $directive' default"
  done
  if [[ $name == cpu ]]; then
    grep -q '^#SBATCH --cpus-per-task=' "$file" || bad "cpu.sbatch: no --cpus-per-task default"
    grep -q '^defaults=(--backend cpu)$' "$file" || bad "cpu.sbatch: not --backend cpu"
  else
    grep -q '^#SBATCH --gpus-per-node=' "$file" || bad "$name.sbatch: no --gpus-per-node default"
    grep -q '^defaults=(--backend cuda)$' "$file" || bad "$name.sbatch: not --backend cuda"
  fi
  # Started outside Slurm without inputs: a usage error, exit code 2.
  rc=0
  env -u A -u B -u OUT BLOCKMM=/bin/true bash "$file" >/dev/null 2>&1 || rc=$?
  ((rc == 2)) || bad "$name.sbatch without inputs exited $rc, expected 2"
done
if command -v shellcheck >/dev/null 2>&1; then
  shellcheck -S warning "$dir"/*.sbatch "$here"/*.sh || bad "shellcheck reported problems"
else
  echo "note: shellcheck not installed; skipped it"
fi
((failures == 0)) || exit 1
echo "PASS: ${#scripts[@]} job scripts"
