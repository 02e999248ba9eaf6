#!/bin/bash
# blockmm-job keeps what `check` saw of OUT for `verify` (the job passes only if the ranks wrote
# OUT). That note lives in TMPDIR, a folder every user of the node may write (/tmp): another user
# must neither redirect it through a link planted at a name they can predict (the note then
# overwrote any file of the job's user) nor pass off a note of their own, and the notes of jobs
# that failed before their `verify` must not pile up. Here TMPDIR is a stand-in for /tmp; the
# last part plants a note as another user (nobody), where the test runs as root.
set -euo pipefail

dir=${BLOCKMM_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}/jobs/slurm
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
failures=0
bad() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# blockmm-job with a stand-in blockmm whose --help lists one option.
mkdir "$work/bin" "$work/tmp"
chmod 1777 "$work/tmp"
ln -s "$dir/blockmm-job" "$work/bin/blockmm-job"
printf '#!/bin/sh\necho "  -q,--quiet                  no progress display"\n' >"$work/bin/blockmm"
chmod +x "$work/bin/blockmm"
export PATH="$work/bin:$PATH" TMPDIR="$work/tmp" SLURM_JOB_ID=4242
cd "$work"
job() { blockmm-job "$@" 2>/dev/null; }

# 1. A link at the name the note once had (job, user and OUT, all known to others): nothing is
#    written through it, and check still works.
key=$(printf '%s' C.bin | cksum | cut -d ' ' -f 1)
planted="$TMPDIR/blockmm-job.4242.$(id -u).$key"
echo precious >victim
ln -s "$work/victim" "$planted"
out=$(job check -q A.bin B.bin C.bin) || bad "check failed beside a planted link"
[[ ${out:-} == C.bin ]] || bad "check printed '${out:-}', expected C.bin"
[[ $(cat victim) == precious ]] || bad "check wrote its note through a planted link into another file"
job verify C.bin >/dev/null && bad "verify passed though C.bin was never written"
rm -f "$planted"
rm -rf "$TMPDIR"/blockmm-job.*

# 2. The job's own flow: OUT replaced by a new file (as blockmm renames one over it) passes; OUT
#    left alone fails; no note is left either way.
echo old >C.bin
job check A.bin B.bin C.bin >/dev/null || bad "check failed"
echo new >C.new && mv C.new C.bin
job verify C.bin || bad "verify failed though C.bin was replaced"
job check A.bin B.bin C.bin >/dev/null || bad "check failed"
job verify C.bin && bad "verify passed though C.bin was left alone"
left=$(ls -A "$TMPDIR")
[[ -z $left ]] || bad "notes left in TMPDIR: $left"

# 3. A job whose srun failed ends (set -e) before its verify: its note stays until the next
#    check on the node, which removes the notes of batch scripts that are gone, and only those.
bash -c 'blockmm-job check A.bin B.bin D.bin >/dev/null 2>&1; true' || bad "check (of a job that then fails) failed"
[[ -n $(ls -A "$TMPDIR") ]] || bad "no note was made"
job check A.bin B.bin C.bin >/dev/null || bad "check failed"
left=$(ls -A "$TMPDIR")
[[ $left == blockmm-job.4242.$(id -u).$key.* && $(wc -w <<<"$left") == 1 ]] ||
  bad "the next check did not remove the note of a job that is gone, or removed a live one: $left"
job check A.bin B.bin E.bin >/dev/null || bad "check failed"
[[ $(find "$TMPDIR" -mindepth 1 -maxdepth 1 | wc -l) == 2 ]] || bad "a check removed the note of a batch script that is still running"
job verify C.bin && bad "verify passed though C.bin was left alone"
job verify E.bin && bad "verify passed though E.bin was never written"
left=$(ls -A "$TMPDIR")
[[ -z $left ]] || bad "notes left in TMPDIR: $left"

# 4. A note planted by another user (newer than the job's, saying OUT was something else) is not
#    believed: the job whose ranks never wrote OUT still fails.
if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null; then
  job check A.bin B.bin C.bin >/dev/null || bad "check failed"
  sleep 1
  fake="$TMPDIR/blockmm-job.4242.0.$key.zzzzzzzz"
  setpriv --reuid=nobody --regid=nogroup --clear-groups sh -c "mkdir '$fake' && echo 0:0:0 >'$fake/before'"
  job verify C.bin && bad "verify believed another user's note"
  [[ -d $fake ]] || bad "verify removed another user's folder"
  rm -rf "$fake"
  left=$(ls -A "$TMPDIR")
  [[ -z $left ]] || bad "notes left in TMPDIR: $left"
else
  echo "note: not root (or no setpriv): the planted note of another user is not tried"
fi

if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "blockmm-job's note: all checks passed"
