#!/usr/bin/env python3
"""Runs a blockmm libFuzzer target and triages what it finds.

    fuzz_run.py TARGET SEEDS SCRATCH [--seconds S] [--runs R] [--dict D] [--upstream MODULE]

Fuzzes from the seed corpus SEEDS (read only: new inputs go to SCRATCH/corpus, reproducers to
SCRATCH/artifacts, logs to SCRATCH/log-N.txt) until S seconds or R executions have passed in all.
Used by the CTest smoke tests (label "fuzz") and for long runs by hand.

Every finding fails the run, except with --upstream MODULE (fuzz_hdf5_input: --upstream libhdf5):
libhdf5 1.10 crashes, loops and makes huge allocations on some corrupt files, which is not
blockmm's to fix. Then a report whose first stack frame outside the sanitizer runtime, libFuzzer
and libc lies in MODULE is listed as upstream, and fuzzing goes on from where it stopped (libFuzzer
stops at a finding; this script starts it again on the grown corpus). The report libFuzzer printed
is triaged, not a replay: libhdf5 is not instrumented, so memory it corrupts silently can make a
later input crash, which a replay of that input alone does not show.

Exit code: 0 clean (or only upstream findings), 1 a blockmm finding, 2 the fuzzer did not run.
"""
import argparse
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

# Frames at the top of a report that belong to the sanitizers, libFuzzer or libc, not to the culprit.
RUNTIME = re.compile(
    r"__sanitizer|__asan|__lsan|__ubsan|__interceptor_|__interception|fuzzer::|"
    r"\bin (malloc|calloc|realloc|free|posix_memalign|aligned_alloc|operator new|operator delete|"
    r"__mem\w*|__str\w*|mem(cpy|move|set|cmp|chr)\w*|str\w+|raise|abort|__pthread_kill\w*|pthread_kill|"
    r"gsignal|__GI_\w+)\b|libc\.so|libstdc\+\+\.so|compiler-rt/lib/|sanitizer_common/")
FRAME = re.compile(r"^\s*#(\d+) 0x[0-9a-f]+ (.*)$")
WRITTEN = re.compile(r"Test unit written to (\S+)")


def first_trace(report):
    """The frames of the first stack trace in `report`."""
    frames = []
    for line in report.splitlines():
        match = FRAME.match(line)
        if not match:
            if frames:
                break
            continue
        if match.group(1) == "0" and frames:
            break
        frames.append(match.group(2))
    return frames


UNSYMBOLIZED = re.compile(r"^\s*\((/[^+)]+)\+(0x[0-9a-f]+)\)")
_names = {}


def symbolize(frame):
    """`frame` with a function name: where the sanitizer found no llvm-symbolizer (a machine with
    only the built binary), "(binary+0xoffset)" frames are named with addr2line, so that the
    sanitizer's own interceptors linked into the target are still told apart from blockmm."""
    match = UNSYMBOLIZED.match(frame)
    if not match:
        return frame
    key = (match.group(1), match.group(2))
    if key not in _names:
        try:
            out = subprocess.run(["addr2line", "-f", "-C", "-e", key[0], key[1]], capture_output=True, text=True,
                                 timeout=30).stdout.split("\n")
            _names[key] = out[0].strip() if out and out[0].strip() not in ("", "??") else ""
        except (OSError, subprocess.SubprocessError):
            _names[key] = ""
    return f"in {_names[key]} {frame.strip()}" if _names[key] else frame


def culprit(report):
    """The first frame of the report's first stack trace that is not runtime, or None."""
    for frame in first_trace(report):
        frame = symbolize(frame)
        if not RUNTIME.search(frame):
            return frame
    return None


def finding_report(log):
    """The part of a libFuzzer log from the first sanitizer or libFuzzer error on."""
    for marker in ("==ERROR:", "== ERROR:", "ERROR: libFuzzer", "FUZZ FINDING", "runtime error:", "ERROR: LeakSanitizer"):
        at = log.find(marker)
        if at >= 0:
            return log[max(0, log.rfind("\n", 0, at)):]
    return log[-6000:]


def remove_openmp_registration(pid):
    """LLVM's OpenMP runtime (the clang-built targets') registers itself in
    /dev/shm/__KMP_REGISTERED_LIB_<pid>_<uid> and removes it only at a normal shutdown; a libFuzzer
    run that ends on a finding, a timeout or its memory limit leaves it behind."""
    prefix = f"__KMP_REGISTERED_LIB_{pid}_"
    try:
        names = [name for name in os.listdir("/dev/shm") if name.startswith(prefix)]
    except OSError:
        return
    for name in names:
        try:
            os.unlink(os.path.join("/dev/shm", name))
        except OSError:
            pass


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target")
    parser.add_argument("seeds")
    parser.add_argument("scratch")
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--runs", type=int, default=100000)
    parser.add_argument("--dict", default="")
    parser.add_argument("--upstream", default="", help="library whose own findings are listed, not failed")
    parser.add_argument("--max-len", type=int, default=16384)
    args = parser.parse_args()

    corpus = os.path.join(args.scratch, "corpus")
    artifacts = os.path.join(args.scratch, "artifacts")
    shutil.rmtree(args.scratch, ignore_errors=True)
    os.makedirs(corpus)
    os.makedirs(artifacts)
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"  # small inputs; idle OpenMP threads would spin on a shared machine
    # The harness's scratch inputs go into a folder of this run's, removed at the end: an input in
    # flight when libhdf5 crashes the process is never unlinked by the harness.
    inputs = tempfile.mkdtemp(prefix="blockmm-fuzz-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    atexit.register(shutil.rmtree, inputs, True)
    env["BLOCKMM_FUZZ_SCRATCH"] = inputs

    start = time.monotonic()
    executions = 0
    upstream, ours = [], []
    attempt = 0
    idle = 0  # consecutive libFuzzer runs that stopped before executing anything
    while True:
        left_seconds = int(args.seconds - (time.monotonic() - start))
        left_runs = args.runs - executions
        if left_seconds < 1 or left_runs < 1:
            break
        attempt += 1
        # -malloc_limit_mb: a single allocation that large is reported with its stack (an
        # allocation sized from unchecked data); -rss_limit_mb bounds the whole process.
        command = [args.target, f"-max_total_time={left_seconds}", f"-runs={left_runs}", "-timeout=10",
                   "-rss_limit_mb=2048", "-malloc_limit_mb=512", f"-max_len={args.max_len}",
                   "-print_final_stats=1", f"-artifact_prefix={artifacts}/"]
        if args.dict and os.path.isfile(args.dict):
            command.append(f"-dict={args.dict}")
        command += [corpus, args.seeds]
        if attempt == 1:
            print("+ " + " ".join(command), flush=True)
        log_path = os.path.join(args.scratch, f"log-{attempt}.txt")
        with open(log_path, "wb") as log_file:
            run = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env)
            try:
                run.wait()
            except BaseException:  # as subprocess.run does: the target does not outlive the runner
                run.kill()
                run.wait()
                raise
            finally:
                remove_openmp_registration(run.pid)
        log = open(log_path, "rb").read().decode("utf-8", "replace")
        counts = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log) or re.findall(r"^#(\d+)", log, re.M)
        done = int(counts[-1]) if counts else 0
        executions += done
        if run.returncode == 0:
            break
        report = finding_report(log)
        written = WRITTEN.findall(log)
        artifact = written[-1] if written else "(no reproducer written)"
        frame = culprit(report)
        idle = idle + 1 if done == 0 else 0
        if args.upstream and idle < 3:
            if frame is not None and args.upstream in frame:
                upstream.append((artifact, report.strip().splitlines()[0][:160], frame))
                continue
            if "out-of-memory (used:" in report:
                # The process's RSS passed the limit with no single allocation over -malloc_limit_mb:
                # memory that libhdf5 leaks on corrupt files (left out of leak reports) piling up.
                upstream.append((artifact, report.strip().splitlines()[0][:160], "RSS of the whole run"))
                continue
        ours.append((artifact, frame, report, log_path))
        break  # a finding of ours (or a fuzzer that cannot get going): stop here, with its report

    seconds = time.monotonic() - start
    print(f"{os.path.basename(args.target)}: {executions} executions in {seconds:.0f} s "
          f"({attempt} libFuzzer run{'s' if attempt != 1 else ''})")
    for artifact, headline, frame in upstream:
        print(f"upstream ({args.upstream}), not failing: {os.path.basename(artifact)}: {headline.strip()} | {frame}")
    for artifact, frame, report, log_path in ours:
        print(f"FINDING in blockmm: {artifact} (first frame: {frame}); log {log_path}; replay: {args.target} {artifact}")
        tail = "\n".join(line for line in report.splitlines() if "# Uses:" not in line)
        print(tail[:6000])
    if ours:
        return 1
    return 0 if executions > 0 else 2


if __name__ == "__main__":
    sys.exit(main())
