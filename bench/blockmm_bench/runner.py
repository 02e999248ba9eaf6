"""Running commands for the benchmarks: progress lines, and run_cmd, which runs a command in its
own process group with a timeout and reports its exit code, wall time, peak RSS and output."""
import os
import stat
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Progress:
    def __init__(self, log_path=None):
        self.t0 = time.perf_counter()
        self.log = open(log_path, "a", buffering=1) if log_path else None

    def elapsed(self):
        return time.perf_counter() - self.t0

    def __call__(self, message):
        line = "[%7.1fs] %s" % (self.elapsed(), message)
        print(line, file=sys.stderr, flush=True)
        if self.log:
            self.log.write(line + "\n")

    def loud(self, message):
        bar = "!" * 78
        for line in (bar, "!! " + message, bar):
            self(line)


class Result:
    def __init__(self, rc, wall, rss_kb, timed_out, stdout, stderr):
        self.rc, self.wall, self.rss_kb, self.timed_out = rc, wall, rss_kb, timed_out
        self.stdout, self.stderr = stdout, stderr

    def tail(self, lines=6):
        text = [l.strip() for l in (self.stderr.strip() or self.stdout.strip()).splitlines()]
        text = [l for l in text if l.strip("-= ")]  # mpirun's rules
        return " | ".join(text[-lines:])


def run_cmd(cmd, timeout=None, env=None, scratch=None, cwd=None):
    """Runs cmd in its own process group; returns its exit code, wall time, peak RSS (of the
    largest process of the tree, from wait4, as /usr/bin/time's %M) and its output."""
    scratch = scratch or "/tmp"
    out_path = os.path.join(scratch, ".bench-run.%d.stdout" % os.getpid())
    err_path = os.path.join(scratch, ".bench-run.%d.stderr" % os.getpid())
    timed_out = [False]
    with open(out_path, "wb") as so, open(err_path, "wb") as se:
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(cmd, stdout=so, stderr=se, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                    start_new_session=True)
        except OSError as e:
            return Result(127, 0.0, 0, False, "", str(e))

        def kill():
            timed_out[0] = True
            for sig, pause in ((signal.SIGTERM, 5), (signal.SIGKILL, 0)):
                try:
                    os.killpg(proc.pid, sig)
                except OSError:
                    return
                time.sleep(pause)

        timer = threading.Timer(timeout, kill) if timeout else None
        if timer:
            timer.daemon = True
            timer.start()
        try:
            while True:
                try:
                    _, status, usage = os.wait4(proc.pid, 0)
                    break
                except InterruptedError:
                    continue
        except KeyboardInterrupt:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            raise
        wall = time.perf_counter() - t0
        if timer:
            timer.cancel()
    rc = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else (status >> 8)
    proc.returncode = rc
    if timed_out[0]:
        rc = 124
    with open(out_path, "rb") as f:
        stdout = f.read(1 << 20).decode(errors="replace")
    with open(err_path, "rb") as f:
        stderr = f.read(1 << 20).decode(errors="replace")
    for p in (out_path, err_path):
        try:
            os.unlink(p)
        except OSError:
            pass
    return Result(rc, wall, usage.ru_maxrss, timed_out[0], stdout, stderr)


def quiet(cmd, timeout=30):
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, cwd=ROOT)
        return r.returncode, r.stdout.decode(errors="replace").strip()
    except (OSError, subprocess.SubprocessError) as e:
        return 127, str(e)


def rm(path):
    """Removes a regular file; never a device (an output of /dev/null stays /dev/null)."""
    try:
        if stat.S_ISCHR(os.lstat(path).st_mode):
            return
        os.unlink(path)
    except FileNotFoundError:
        pass
