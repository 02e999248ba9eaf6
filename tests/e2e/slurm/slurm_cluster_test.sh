#!/bin/bash
# Runs jobs/slurm/*.sbatch on a real, private, one-node Slurm cluster started here:
# munged, slurmctld and slurmd on localhost as root, with a generated slurm.conf, free ports
# and every file in a temporary folder. Checks that
#   - a 2-task job really runs 2 MPI ranks (srun --mpi=pmix), ends COMPLETED with exit code 0,
#     writes the exact product (byte-identical to a one-process reference run) and the stats
#     JSON beside it; options after the inputs override the script's, and options before the
#     inputs (values as separate words or after '=', flags, '--') work as well;
#   - a job on a bad input ends FAILED with blockmm's exit code 3 and leaves no output;
#   - a job without inputs ends FAILED with exit code 2;
#   - a job whose srun step never starts (srun still exits 0) ends FAILED with exit code 1;
#   - the two GPU scripts, as written but on 2 pretend GPUs and the CPU backend, give the
#     exact product with 1 and 2 ranks.
# Stops every daemon and job it started (trap on EXIT) and prints the daemon logs on failure.
#
# Exit 0 pass, 1 fail, 77 skip (not root, Slurm/munge/MPI missing). With
# BLOCKMM_REQUIRE_SLURM=1 (CI), a missing prerequisite is a failure instead of a skip.
# Environment: BLOCKMM_BIN, BLOCKMM_SOURCE_DIR (set by CTest); BLOCKMM_SLURM_KEEP=1 keeps
# the temporary folder.
set -euo pipefail

log() { printf '[slurm-test %(%H:%M:%S)T] %s\n' -1 "$*"; }
skip() {
  if [[ ${BLOCKMM_REQUIRE_SLURM:-0} == 1 ]]; then
    log "FAIL: $* (BLOCKMM_REQUIRE_SLURM=1, so this is not a skip)"
    exit 1
  fi
  log "SKIP: $*"
  exit 77
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source_dir=${BLOCKMM_SOURCE_DIR:-$(cd "$here/../../.." && pwd)}
bin=${BLOCKMM_BIN:-$source_dir/build/blockmm}
jobs_dir=$source_dir/jobs/slurm

# ---- prerequisites -------------------------------------------------------------------------
[[ $(id -u) -eq 0 ]] || skip "needs root to run slurmctld/slurmd with SlurmUser=root (running as $(id -un))"
missing=()
for tool in munged munge unmunge slurmctld slurmd sbatch scontrol squeue sinfo scancel srun mpirun cmp; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
((${#missing[@]} == 0)) || skip "missing ${missing[*]} (Debian: scripts/install-deps --slurm)"
[[ -x $bin ]] || { log "FAIL: blockmm binary '$bin' not found (set BLOCKMM_BIN)"; exit 1; }
[[ -f $jobs_dir/cpu.sbatch ]] || { log "FAIL: $jobs_dir/cpu.sbatch not found"; exit 1; }

# ---- state, cleanup --------------------------------------------------------------------------
# In /tmp, not $TMPDIR: munged wants every folder above its socket searchable by all, and
# Unix socket paths (munge, slurmstepd) must stay short.
tmp=$(mktemp -d /tmp/blockmm-slurm.XXXXXX)
chmod 755 "$tmp"
conf=$tmp/etc/slurm.conf
export SLURM_CONF=$conf
munge_socket=$tmp/munge/munge.socket
munged_pid='' slurmctld_pid='' slurmd_pid=''
status=1

show_logs() {
  local f
  for f in "$tmp"/log/*.log "$tmp"/work/*.log "$tmp"/jobcomp.txt; do
    [[ -f $f ]] || continue
    echo "----- $f (last 60 lines) -----"
    tail -n 60 "$f"
  done
}

# Stops a process we started: TERM, wait up to 10 s, then KILL.
stop_pid() {
  local pid=$1 what=$2 i
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$what (pid $pid) ignored TERM; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

# Processes that carry this cluster's SLURM_CONF in their environment: slurmstepd, job
# scripts, mpirun, blockmm ranks. Only ours can have this temporary path.
our_processes() {
  local env pid
  for env in /proc/[0-9]*/environ; do
    pid=${env#/proc/}
    pid=${pid%/environ}
    [[ $pid == "$$" || $pid == "$BASHPID" || $pid == "$munged_pid" ]] && continue
    if { tr '\0' '\n' <"$env" | grep -qxF "SLURM_CONF=$conf"; } 2>/dev/null; then
      echo "$pid"
    fi
  done
}

cleanup() {
  local rc=$? pids i
  ((status == 0)) || status=$rc
  set +e
  if [[ -n $slurmctld_pid ]] && kill -0 "$slurmctld_pid" 2>/dev/null; then
    timeout 10 scancel --quiet --user=root >/dev/null 2>&1
    for ((i = 0; i < 50; i++)); do
      [[ -z $(timeout 5 squeue -h -o %i 2>/dev/null) ]] && break
      sleep 0.2
    done
  fi
  stop_pid "$slurmd_pid" slurmd
  stop_pid "$slurmctld_pid" slurmctld
  # Anything a job left behind (it should be nothing): stop it by its id.
  for ((i = 0; i < 3; i++)); do
    pids=$(our_processes)
    [[ -z $pids ]] && break
    log "stopping leftover job processes: $(echo "$pids" | tr '\n' ' ')"
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null
    sleep 1
  done
  pids=$(our_processes)
  # shellcheck disable=SC2086
  [[ -z $pids ]] || kill -KILL $pids 2>/dev/null
  stop_pid "$munged_pid" munged
  if ((status != 0 && status != 77)); then
    log "FAILED; daemon and job logs follow"
    show_logs
  fi
  if [[ ${BLOCKMM_SLURM_KEEP:-0} == 1 ]]; then
    log "kept $tmp"
  else
    rm -rf "$tmp"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
  log "FAIL: $*" >&2 # stderr: also seen when it fires inside $(...)
  status=1
  exit 1
}

# The whole test stays inside this many seconds (CTest's TIMEOUT is longer, so that the
# cleanup always runs: CTest kills without a trap).
budget=${BLOCKMM_SLURM_TIMEOUT:-180}
test_deadline=$((SECONDS + budget))

# Waits until "$@" succeeds, polling every 0.2 s, for at most $1 seconds (and never past the
# test's own deadline).
wait_until() {
  local seconds=$1 what=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  ((deadline <= test_deadline)) || deadline=$test_deadline
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "timed out after $((seconds < budget ? seconds : budget))s waiting for $what"
    sleep 0.2
  done
}

# Two adjacent TCP ports nobody listens on (bash's /dev/tcp: a refused connection means
# free), so that several test runs, or a site's own Slurm, never collide; and outside the
# kernel's range for outgoing connections' local ports, which the MPI tests running beside this
# one take by the hundred (slurmctld once failed to bind a port that one of them held).
pick_ports() {
  local port try low=32768 high=60999 first count
  read -r low high < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  if ((low >= 12000)); then
    first=10000 count=$(((low - 10000) / 2))  # below the range
  else
    first=$((high + 1)) count=$(((65534 - high) / 2))  # above it
  fi
  ((count > 0)) || fail "no TCP ports outside the local port range $low-$high"
  for ((try = 0; try < 100; try++)); do
    port=$((first + 2 * (RANDOM % count)))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && ! (exec 3<>"/dev/tcp/127.0.0.1/$((port + 1))") 2>/dev/null; then
      ctld_port=$port
      slurmd_port=$((port + 1))
      return 0
    fi
  done
  fail "no free TCP port found"
}

# ---- munge ---------------------------------------------------------------------------------
mkdir -p "$tmp"/{etc,log,munge,state,spool,work,pmix}
chmod 700 "$tmp/etc"
head -c 1024 /dev/urandom >"$tmp/etc/munge.key"
chmod 600 "$tmp/etc/munge.key"
chmod 755 "$tmp/munge"
munged -F --key-file="$tmp/etc/munge.key" --socket="$munge_socket" --pid-file="$tmp/munge/munged.pid" \
  --seed-file="$tmp/munge/munged.seed" --log-file="$tmp/log/munged.log" >"$tmp/log/munged.out" 2>&1 &
munged_pid=$!
munge_ok() { munge -n -S "$munge_socket" | unmunge -S "$munge_socket"; }
wait_until 15 "munged to answer on $munge_socket" munge_ok

# ---- slurm.conf ----------------------------------------------------------------------------
# The node is called "localhost" (slurmd -N localhost, NodeAddr 127.0.0.1), so nothing depends
# on this machine's hostname resolving; CPUs and memory come from slurmd -C.
hw=$(slurmd -C | head -n 1)
field() { sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" <<<"$hw"; }
cpus=$(field CPUs)
mem=$(field RealMemory)
[[ $cpus =~ ^[0-9]+$ && $mem =~ ^[0-9]+$ ]] || fail "cannot read CPUs/RealMemory from 'slurmd -C': $hw"
# The test needs 2 CPUs for its 2 tasks; on a 1-CPU machine claim 2 (config_overrides lets
# slurmd accept that).
if ((cpus >= 2)); then
  node_hw=${hw#NodeName=* }
else
  node_hw="CPUs=2 RealMemory=$mem"
fi
pick_ports
: >"$tmp/etc/plugstack.conf"
# srun --mpi=pmix keeps per-step folders named after the job id, by default in /tmp: keep them
# here, and start job ids at a random number, so that concurrent or earlier runs never clash.
echo "PMIxCliTmpDirBase=$tmp/pmix" >"$tmp/etc/mpi.conf"
# Two pretend GPUs (Slurm drops a GPU without a device file; /dev/null and /dev/zero stand
# in), so that the GPU scripts' #SBATCH lines (--gpus-per-node) are accepted and their
# GPU plumbing runs, on the CPU backend.
printf 'NodeName=localhost Name=gpu File=%s\n' /dev/null /dev/zero >"$tmp/etc/gres.conf"
first_job_id=$((100000 + RANDOM * 8))
cat >"$conf" <<EOF
# Generated by tests/e2e/slurm/slurm_cluster_test.sh
ClusterName=blockmmtest
FirstJobId=$first_job_id
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$munge_socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/state/slurmctld.pid
SlurmdPidFile=$tmp/spool/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$tmp/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
# task/affinity: the scripts' srun --cpu-bind=cores really binds (task/none ignores it).
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$tmp/jobcomp.txt
MailProg=/bin/true
ReturnToService=2
MinJobAge=600
KillWait=5
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 NodeHostname=localhost $node_hw Gres=gpu:2 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
log "cluster in $tmp: ports $ctld_port/$slurmd_port, node localhost: $node_hw"

# ---- daemons -------------------------------------------------------------------------------
slurmctld -D -c -f "$conf" >>"$tmp/log/slurmctld.out" 2>&1 &
slurmctld_pid=$!
ctld_up() { scontrol ping | grep -q 'is UP'; }
wait_until 30 "slurmctld to answer (scontrol ping)" ctld_up
slurmd -D -N localhost -f "$conf" >>"$tmp/log/slurmd.out" 2>&1 &
slurmd_pid=$!
node_idle() { [[ $(sinfo -h -n localhost -o %T) == idle ]]; }
wait_until 30 "node localhost to be idle (sinfo)" node_idle
log "slurmctld (pid $slurmctld_pid) and slurmd (pid $slurmd_pid) are up; srun --mpi=list: $(srun --mpi=list 2>&1 | tr -s '\n\t ' ' ')"

# ---- inputs --------------------------------------------------------------------------------
cd "$tmp/work"
# COL380 input (little-endian int32 n, m, k; k records of int32 i, j and m*m uint16),
# spelled as printf escapes: le32/le16 append one value to $bytes.
le32() {
  local b
  printf -v b '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) $((($1 >> 16) & 255)) $((($1 >> 24) & 255))
  bytes+=$b
}
le16() {
  local b
  printf -v b '\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255))
  bytes+=$b
}
# write_input FILE N M SEED: about a third of the block positions filled, values in [0, 1023].
write_input() {
  local file=$1 n=$2 m=$3 p=$(($2 / $3)) i j v records=0 body
  local bytes=''
  RANDOM=$4
  for ((i = 0; i < p; i++)); do
    for ((j = 0; j < p; j++)); do
      ((RANDOM % 3 == 0)) || continue
      records=$((records + 1))
      le32 "$i"
      le32 "$j"
      for ((v = 0; v < m * m; v++)); do le16 $((RANDOM % 1024)); done
    done
  done
  body=$bytes
  bytes=''
  le32 "$n"
  le32 "$m"
  le32 "$records"
  printf '%b' "$bytes$body" >"$file"
}
if [[ -f $source_dir/inputs/A.bin && -f $source_dir/inputs/B.bin ]]; then
  cp "$source_dir/inputs/A.bin" "$source_dir/inputs/B.bin" .
  log "inputs: the repository's inputs/A.bin and inputs/B.bin"
else
  write_input A.bin 96 4 11
  write_input B.bin 96 4 12
  log "inputs: generated A.bin and B.bin (n 96, m 4; inputs/ has none)"
fi
BLOCKMM_MPI=0 "$bin" --backend reference -q A.bin B.bin expected.bin || fail "reference run failed"
if [[ -f $source_dir/inputs/expected_C.bin && -f $source_dir/inputs/A.bin ]]; then
  cmp expected.bin "$source_dir/inputs/expected_C.bin" || fail "the reference product differs from inputs/expected_C.bin"
fi
# A bad input: the header promises more records than the file holds (blockmm exit code 3).
head -c $(($(stat -c %s A.bin) - 3)) A.bin >bad.bin

# ---- jobs ----------------------------------------------------------------------------------
# Slurm's view of the job: "STATE EXIT" (e.g. "COMPLETED 0:0").
job_state() { timeout 20 scontrol -o show job "$1" | sed -n 's/.*JobState=\([A-Z_]*\).*[[:space:]]ExitCode=\([0-9:]*\).*/\1 \2/p'; }
job_done() {
  case $(job_state "$1") in
    COMPLETED* | FAILED* | CANCELLED* | TIMEOUT* | NODE_FAIL* | OUT_OF_MEMORY* | BOOT_FAIL* | DEADLINE* | PREEMPTED*) return 0 ;;
    *) return 1 ;;
  esac
}
# submit NAME SCRIPT [sbatch options] -- [script arguments]: prints the job id.
submit() {
  local name=$1 script=$jobs_dir/$2.sbatch
  shift 2
  local sbatch_opts=() id
  while (($#)) && [[ $1 != -- ]]; do
    sbatch_opts+=("$1")
    shift
  done
  shift
  id=$(timeout 30 sbatch --parsable --job-name="$name" --chdir="$tmp/work" --output="$tmp/work/$name-%j.log" \
    --time=00:05:00 "${sbatch_opts[@]}" "$script" "$@") ||
    fail "sbatch of job $name ($script) failed"
  echo "${id%%;*}"
}
two_tasks=(--ntasks=2 --cpus-per-task=1)
# expect JOB_ID NAME STATE EXIT_CODE
expect() {
  local id=$1 name=$2 want_state=$3 want_exit=$4 got
  wait_until 60 "job $name ($id) to finish" job_done "$id"
  got=$(job_state "$id")
  log "job $name ($id): $got; its log:"
  sed 's/^/    | /' "$tmp/work/$name-$id.log" 2>/dev/null | grep -Ev '^    \| [[:space:]]*[]{}["]' | head -n 20 || true
  [[ $got == "$want_state $want_exit" ]] || fail "job $name ($id) ended '$got', expected '$want_state $want_exit'"
  # task/affinity is on: srun --cpu-bind=cores must bind, not be ignored with a warning.
  ! grep -q 'lacks support for cpu binding' "$tmp/work/$name-$id.log" 2>/dev/null ||
    fail "job $name: srun did not bind the ranks to cores"
}
# check_product NAME OUT [RANKS]: exact output, stats JSON with RANKS (2) ranks.
check_product() {
  local name=$1 out=$2 ranks=${3:-2}
  cmp "$out" expected.bin || fail "job $name: $out differs from the one-process reference product"
  [[ -s $out.stats.json ]] || fail "job $name: $out.stats.json was not written"
  grep -Eq "\"ranks\":[[:space:]]*$ranks([^0-9]|\$)" "$out.stats.json" ||
    fail "job $name: stats say $(grep -Eo '"ranks":[^,]*' "$out.stats.json" | head -n 1), expected $ranks rank(s)"
  log "job $name: output identical to the reference, stats JSON says $ranks rank(s)"
}

# The scripts find blockmm and blockmm-job on PATH (what a site's "module load" does).
mkdir "$tmp/bin"
ln -s "$bin" "$tmp/bin/blockmm"
ln -s "$jobs_dir/blockmm-job" "$tmp/bin/blockmm-job"
export PATH=$tmp/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

id=$(submit cpu cpu "${two_tasks[@]}" -- A.bin B.bin C_cpu.bin)
expect "$id" cpu COMPLETED 0:0
check_product cpu C_cpu.bin

# Options after the inputs override the script's (the last one wins): the reference backend.
id=$(submit options cpu "${two_tasks[@]}" -- A.bin B.bin C_options.bin --backend=reference --chunk-size 1K)
expect "$id" options COMPLETED 0:0
check_product options C_options.bin
grep -q '"backend": "reference"' C_options.bin.stats.json || fail "job options: the backend was not overridden"

# Options before the inputs, as `blockmm --help` teaches ([OPTIONS] A B OUT): values given as
# separate words and with '=', a flag, and '--' before the operands. The stats go beside OUT
# (not beside an input), and the job passes.
id=$(submit before cpu "${two_tasks[@]}" -- --chunk-size 1K --backend=reference -q --stats json -- A.bin B.bin C_before.bin)
expect "$id" before COMPLETED 0:0
check_product before C_before.bin
grep -q '"backend": "reference"' C_before.bin.stats.json || fail "job before: the backend was not overridden"
leftovers=$(find . -maxdepth 1 -name '*.stats.json' ! -name 'C_*.bin.stats.json' -print)
[[ -z $leftovers ]] || fail "job before: stats written beside an input: $leftovers"

# One task of 2 cores, 2 threads, as cpu.sbatch binds it (OMP_PLACES=cores OMP_PROC_BIND=close,
# srun --cpu-bind=cores): the log says what ran from its first line and what was written in its
# last, and no "2 threads share the 1 core(s)" (libgomp pinned the first thread before blockmm
# read the mask, issue 53).
id=$(submit threads cpu --ntasks=1 --cpus-per-task=2 -- A.bin B.bin C_threads.bin)
expect "$id" threads COMPLETED 0:0
check_product threads C_threads.bin 1
! grep -q 'threads share the' "$tmp/work/threads-$id.log" ||
  fail "job threads: a false thread note: $(grep 'threads share the' "$tmp/work/threads-$id.log")"
grep -Eq '^[0-9T:+-]+ blockmm: blockmm .* 1 rank x 2 threads: ' "$tmp/work/threads-$id.log" ||
  fail "job threads: no header line naming 1 rank x 2 threads in its log"
grep -Eq '^[0-9T:+-]+ blockmm: done, elapsed [0-9:]+, cpu backend: wrote C_threads.bin ' "$tmp/work/threads-$id.log" ||
  fail "job threads: no closing 'done ... wrote C_threads.bin' line in its log"

id=$(submit bad cpu "${two_tasks[@]}" -- bad.bin B.bin C_bad.bin)
expect "$id" bad FAILED 3:0
grep -q 'blockmm: error:' "$tmp/work/bad-$id.log" || fail "job bad: no 'blockmm: error:' message in its log"
leftovers=$(find . -maxdepth 1 -name 'C_bad.bin*' -print)
[[ -z $leftovers ]] || fail "job bad left files behind: $leftovers"

id=$(submit usage cpu "${two_tasks[@]}" --)
expect "$id" usage FAILED 2:0

if srun --mpi=list 2>&1 | grep -qw pmix; then
  mkdir "$tmp/pmix/spmix_appdir_$(id -u)_$((id + 1)).0"
  id=$(submit silent cpu "${two_tasks[@]}" -- A.bin B.bin C_silent.bin)
  wait_until 60 "job silent ($id) to finish" job_done "$id"
  if [[ $(job_state "$id") == "COMPLETED 0:0" ]] && ! grep -q 'launch failed' "$tmp/work/silent-$id.log"; then
    log "job silent ($id): this Slurm started the step anyway; cannot provoke a silent srun failure here"
  else
    expect "$id" silent FAILED 1:0
    grep -q 'did not write' "$tmp/work/silent-$id.log" || fail "job silent: no 'did not write' message in its log"
  fi
fi

# The GPU scripts as written, on 2 pretend GPUs, with the CPU backend given after the inputs.
id=$(submit single-gpu single-gpu --cpus-per-task=1 -- A.bin B.bin C_single.bin --backend=cpu)
expect "$id" single-gpu COMPLETED 0:0
check_product single-gpu C_single.bin 1
# gpus.sbatch: one rank a node that sees every GPU of it (the 2 pretend ones here).
id=$(submit gpus gpus --gpus-per-node=2 --cpus-per-task=2 -- A.bin B.bin C_gpus.bin --backend=cpu)
expect "$id" gpus COMPLETED 0:0
grep -q 'GPUs 0,1$' "$tmp/work/gpus-$id.log" || fail "job gpus: Slurm did not give its rank both GPUs"
check_product gpus C_gpus.bin 1

status=0
log "PASS"
