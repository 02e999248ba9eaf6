"""What machine the benchmarks ran on: CPU, cores, memory, GPUs, the build, the commit, the load;
its default results name; the best OpenBLAS core its CPU flags allow (for the DBCSR anchor)."""
import datetime
import os
import platform
import re
import shutil

from blockmm_bench.runner import ROOT, quiet


def machine_info(build, gpu_lines, args):
    info = {"hostname": platform.node(), "kernel": platform.release(), "python": platform.python_version()}
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info["cpu"] = cpu
    info["cores"] = os.cpu_count()
    try:
        info["cores_usable"] = len(os.sched_getaffinity(0))
    except AttributeError:
        info["cores_usable"] = os.cpu_count()
    try:
        with open("/proc/meminfo") as f:
            kb = int(re.search(r"MemTotal:\s+(\d+)", f.read()).group(1))
        info["memory_gib"] = round(kb / 2 ** 20, 1)
    except (OSError, AttributeError):
        info["memory_gib"] = None
    info["gpu"] = gpu_lines
    rc, version = quiet([os.path.join(build, "blockmm"), "--version"])
    # --version names the build's libraries on further lines; the page's "Run:" line takes the first.
    info["blockmm"] = version.splitlines()[0] if rc == 0 and version else "?"
    build_type = "?"
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            m = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", f.read(), re.M)
            build_type = m.group(1) if m else "?"
    except OSError:
        pass
    info["build"] = "%s (%s)" % (os.path.relpath(build, ROOT) if build.startswith(ROOT) else build, build_type)
    info["build_type"] = build_type
    commit = args.commit or os.environ.get("BLOCKMM_COMMIT", "")
    if not commit:
        rc, out = quiet(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])
        if rc == 0:
            commit = out
            rc, dirty = quiet(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"])
            if rc == 0 and dirty:
                commit += "+local changes"
        else:
            commit = "unknown"
    info["commit"] = commit
    info["load_start"] = loadavg()
    info["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rc, mpi = quiet(["mpirun", "--version"])
    info["mpi"] = mpi.splitlines()[0] if rc == 0 and mpi else "none"
    return info


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def gpu_query():
    if not shutil.which("nvidia-smi"):
        return False, []
    rc, out = quiet(["nvidia-smi", "-L"])
    if rc != 0 or "GPU" not in out:
        return False, []
    rc, q = quiet(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"])
    return True, [l.strip() for l in (q if rc == 0 else out).splitlines() if l.strip()]


def default_machine_name(gpu_lines):
    if gpu_lines:
        name = gpu_lines[0].split(",")[0]
    else:
        name = platform.node() or "machine"
    name = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return name or "machine"


def openblas_best_core():
    """OpenBLAS's own detection may name an older core in a VM (it saw this AVX-512 machine as
    Prescott); name the best kernel set the CPU flags allow."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(f.read().split())
    except OSError:
        flags = set()
    if {"avx512f", "avx512bw", "avx512vl"} <= flags:
        return "SkylakeX"
    return "Haswell" if "avx2" in flags else "Prescott"
