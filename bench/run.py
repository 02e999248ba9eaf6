#!/usr/bin/env python3
"""The benchmark suite of blockmm (started through bench/run; bench/README.md describes it).

For each case of bench/cases.sh it generates the inputs once, runs every available backend at
every rank count (--stats=json, medians of --repeat runs, process wall time and peak RSS), checks
that every output is byte-identical to the first one, measures the I/O floor (read both inputs
from the page cache; write and fsync a file of the output's size) and runs the anchors the
machine has (scipy BSR end to end, cuSPARSE SpGEMM). It writes bench/results/<machine>/
results.csv (one row per case x backend x ranks), runs.csv (one row per run), machine.json and
PNG plots, and replaces this machine's section of bench/RESULTS.md.

Exit status: 0 all good; 1 an output differed (from the first output of its case, or from the
scipy anchor); 3 a blockmm run failed or timed out; 2 usage error or nothing to run.
Standard library only; matplotlib (Agg) for the plots, skipped with a warning when missing.
Parts in the blockmm_bench package beside this file: runner (subprocesses), cases, records (CSV
columns and their helpers), plots, report (the RESULTS.md section); the runs, measurements and
anchors (class Bench) and the command line are still here.
"""
import argparse
import atexit
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import struct
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
sys.path.insert(0, BENCH)  # the blockmm_bench package beside this file
from blockmm_bench.cases import Case, load_cases, select_cases  # noqa: E402
from blockmm_bench.runner import Progress, run_cmd, quiet, rm  # noqa: E402
from blockmm_bench.records import (COLUMNS, PHASES, RUN_COLUMNS, case_order, fmt, label, median, num,  # noqa: E402
                                   read_csv, sig, write_csv)
from blockmm_bench.plots import make_plots  # noqa: E402
from blockmm_bench.report import section_text, update_page  # noqa: E402

# ---------------------------------------------------------------------------------------------
# Inputs


def splitmix64(seed):
    x = seed & 0xFFFFFFFFFFFFFFFF
    while True:
        x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        yield z ^ (z >> 31)


def write_col0(path, n, m, seed):
    """B with every block of block-column 0, values uniform in [0, 1023] (splitmix64, `seed`)."""
    rnd = splitmix64(seed)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<3i", n, m, n // m))
        for i in range(n // m):
            f.write(struct.pack("<2i", i, 0))
            f.write(struct.pack("<%dH" % (m * m), *[next(rnd) % 1024 for _ in range(m * m)]))
    os.replace(tmp, path)


def ensure_inputs(case, data, build, progress, gen_threads):
    a, b = case_paths(case, data)
    todo = [(a, 1)] + ([(b, 2)] if case.shape == "gen" else [])
    for path, seed in todo:
        if os.path.exists(path):
            continue
        progress("%s: generating %s (n=%d m=%d k=%d, values 0..1023, seed %d)" %
                 (case.name, os.path.basename(path), case.n, case.m, case.k, seed))
        cmd = [os.path.join(build, "blockmm-gen"), path, "--n", str(case.n), "--m", str(case.m), "--k", str(case.k),
               "--max-value", "1023", "--seed", str(seed), "-q"]
        if gen_threads:
            cmd += ["--threads", str(gen_threads)]
        r = run_cmd(cmd, scratch=data)
        if r.rc != 0:
            raise RuntimeError("blockmm-gen failed for %s: %s" % (path, r.tail()))
    if case.shape == "col0" and not os.path.exists(b):
        progress("%s: writing %s (block-column 0 only, %d blocks)" % (case.name, os.path.basename(b), case.p))
        write_col0(b, case.n, case.m, 2)
    return a, b


def case_paths(case, data):
    return os.path.join(data, case.name + ".A.bin"), os.path.join(data, case.name + ".B.bin")


# ---------------------------------------------------------------------------------------------
# Machine


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
    info["blockmm"] = version if rc == 0 else "?"
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


# ---------------------------------------------------------------------------------------------
# Runs


def blockmm_cmd(build, backend, ranks, a, b, out, stats_file, mpirun):
    cmd = [os.path.join(build, "blockmm"), "--backend", backend, "--stats=json", "-q", "--stats-file", stats_file,
           a, b, out]
    if ranks > 1:
        # Open MPI binds each of 2 ranks to one core by default, which would starve their threads.
        cmd = [mpirun, "-np", str(ranks), "--oversubscribe", "--bind-to", "none"] + cmd
    return cmd


def same_bytes(x, y):
    r = subprocess.run(["cmp", "-s", x, y])
    return r.returncode == 0


class Bench:
    def __init__(self, args, progress):
        self.args, self.progress = args, progress
        self.env = dict(os.environ)
        if not args.keep_omp_num_threads:
            self.env.pop("OMP_NUM_THREADS", None)  # blockmm's default: the node's cores over its ranks
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            self.env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        self.mpirun = shutil.which("mpirun") or shutil.which("mpiexec")
        self.mismatches, self.failures, self.notes = [], [], []
        self.run_rows = []
        self.dbcsr = None  # bench/dbcsr_anchor, when built
        self.shm_dir = None
        if args.target == "shm":
            self.shm_dir = os.path.join("/dev/shm", "blockmm-bench-%d" % os.getpid())
            os.makedirs(self.shm_dir, exist_ok=True)
            atexit.register(shutil.rmtree, self.shm_dir, True)

    # time left before the deadline (None: no deadline)
    def left(self):
        if not self.args.deadline:
            return None
        return self.args.deadline - self.progress.elapsed()

    def past_deadline(self):
        left = self.left()
        return left is not None and left <= 0

    def timeout(self, own):
        left = self.left()
        return own if left is None else max(10.0, min(own, left + 30.0))

    def detect_cuda(self, have_gpu):
        if not have_gpu:
            return False, "no GPU (nvidia-smi -L)"
        case = Case("tiny", 256, 4, 600, "small")
        a, b = ensure_inputs(case, self.args.data, self.args.build, self.progress, self.args.gen_threads)
        out = os.path.join(self.args.data, "tiny.C.bin")
        r = run_cmd([os.path.join(self.args.build, "blockmm"), "--backend", "cuda", "-q", "--stats=off", a, b, out],
                    timeout=180, env=self.env, scratch=self.args.data)
        rm(out)
        if r.rc != 0:
            return False, "blockmm --backend cuda failed (exit %d): %s" % (r.rc, r.tail(2))
        return True, "ok"

    def run_case(self, case, configs, skip_reasons):
        args, progress = self.args, self.progress
        data = args.data
        reps = args.repeat if case.small else args.repeat_large
        rows = []
        a, b = ensure_inputs(case, data, args.build, progress, args.gen_threads)
        subprocess.run(["cat", a, b], stdout=subprocess.DEVNULL)  # page cache, as the floor assumes
        in_bytes = os.path.getsize(a) + os.path.getsize(b)
        progress("%s: n=%d m=%d k=%d/%d (density %.3g), inputs %.1f MB, %d repeat(s)" %
                 (case.name, case.n, case.m, case.k, case.k_b, case.density(), in_bytes / 1e6, reps))
        # --target: where the timed runs write. shm: a tmpfs (fast storage); null: /dev/null (the
        # compute pipeline alone), with one untimed run per configuration into --data for the
        # identity check.
        out_dir = self.shm_dir if args.target == "shm" else data
        ref = os.path.join(out_dir, case.name + ".ref.C.bin")
        tmp_out = os.path.join(out_dir, case.name + ".run.C.bin")
        stats_file = os.path.join(data, case.name + ".stats.json")
        rm(ref)
        have_ref, ref_label, kept_mismatch = False, "", False
        known_macs = known_out = None
        for backend, ranks in configs:
            row = self.base_row(case, backend, ranks)
            rows.append(row)
            reason = skip_reasons(backend, ranks)
            if reason is None and backend == "cpu" and args.cpu_limit_gmac:
                macs = known_macs if known_macs is not None else case.estimated_macs()
                if macs > args.cpu_limit_gmac * 1e9:
                    reason = "skipped: %.0f GMAC > --cpu-max-gmac %g" % (macs / 1e9, args.cpu_limit_gmac)
            if reason is None and self.past_deadline():
                reason = "skipped: deadline"
            if reason:
                row["status"] = reason
                progress("%s %s x%d: %s" % (case.name, backend, ranks, reason))
                continue
            samples, identical = [], []
            checked = None  # --target null: the untimed run's verdict
            if args.target == "null":
                out = tmp_out if have_ref else ref
                rm(out)
                r = run_cmd(blockmm_cmd(args.build, backend, ranks, a, b, out, stats_file, self.mpirun),
                            timeout=self.timeout(args.run_timeout), env=self.env, scratch=data)
                if r.rc != 0:
                    msg = "%s %s x%d untimed identity run FAILED (exit %d): %s" % (case.name, backend, ranks, r.rc,
                                                                                   r.tail())
                    self.failures.append(msg)
                    progress.loud(msg)
                    row["status"] = "failed (exit %d)" % r.rc
                    rm(out)
                    continue
                if not have_ref:
                    have_ref, checked, ref_label = True, "ref", "%s x%d" % (backend, ranks)
                else:
                    checked = "yes" if same_bytes(ref, out) else "NO"
                    if checked == "NO":
                        msg = "%s %s x%d: output DIFFERS from the first output of the case (%s)" % (
                            case.name, backend, ranks, ref_label)
                        self.mismatches.append(msg)
                        progress.loud(msg)
                    rm(out)
            for rep in range(1, reps + 1):
                if rep > 1 and self.past_deadline():
                    progress("%s %s x%d: deadline reached after %d repeat(s)" % (case.name, backend, ranks, rep - 1))
                    break
                out = "/dev/null" if args.target == "null" else (tmp_out if have_ref else ref)
                rm(out)
                rm(stats_file)
                os.sync()  # no write-back left over from the last step runs into this one
                r = run_cmd(blockmm_cmd(args.build, backend, ranks, a, b, out, stats_file, self.mpirun),
                            timeout=self.timeout(args.run_timeout), env=self.env, scratch=data)
                stats = None
                if r.rc == 0:
                    try:
                        with open(stats_file) as f:
                            stats = json.load(f)
                    except (OSError, ValueError) as e:
                        r.rc, r.stderr = 1, "no stats file: %s" % e
                run_row = {"case": case.name, "backend": backend, "ranks": ranks, "repeat": rep, "rc": r.rc,
                           "wall_s": fmt(r.wall, 4), "rss_mb": fmt(r.rss_kb / 1024.0, 1)}
                self.run_rows.append(run_row)
                if r.rc != 0:
                    what = "timed out" if r.timed_out else "exit %d" % r.rc
                    msg = "%s %s x%d repeat %d FAILED (%s): %s" % (case.name, backend, ranks, rep, what, r.tail())
                    self.failures.append(msg)
                    progress.loud(msg)
                    row["status"] = "failed (%s)" % what
                    rm(out)
                    break
                sec = stats["seconds"]
                for p in PHASES:
                    run_row[p + "_s"] = fmt(sec.get(p), 4)
                run_row["useful_macs"] = stats.get("useful_macs")
                run_row["output_bytes"] = stats.get("output_bytes")
                known_macs = stats.get("useful_macs", known_macs)
                known_out = stats.get("output_bytes") or os.path.getsize(out)
                # Byte-identical to the first output of the case (all of them when small enough).
                if checked is not None:
                    same = checked
                elif not have_ref:
                    have_ref, same, ref_label = True, "ref", "%s x%d" % (backend, ranks)
                elif args.check == "all" or rep == 1 or (args.check == "auto" and known_out < 1e9):
                    same = "yes" if same_bytes(ref, out) else "NO"
                else:
                    same = "unchecked"
                run_row["identical"] = same
                if same == "NO":
                    keep = os.path.join(data, "%s.%s.%d.rep%d.MISMATCH.bin" % (case.name, backend, ranks, rep))
                    os.replace(out, keep)
                    rc, how = quiet([os.path.join(args.build, "blockmm-cmp"), ref, keep], timeout=600)
                    how = how.splitlines()[0] if how else "exit %d" % rc
                    how = how[len("blockmm-cmp: "):] if how.startswith("blockmm-cmp: ") else how
                    msg = ("%s %s x%d repeat %d: output DIFFERS from the first output of the case (%s): %s" %
                           (case.name, backend, ranks, rep, ref_label, how))
                    if kept_mismatch:
                        rm(keep)
                    else:
                        kept_mismatch = True
                        msg += "; kept as " + keep
                    self.mismatches.append(msg)
                    progress.loud(msg)
                elif out != ref:
                    rm(out)
                identical.append(same)
                samples.append((r, stats))
                progress("%s %s x%d rep %d/%d: wall %.3fs (total %.3f, numeric %.3f, read %.3f, commit %.3f), "
                         "RSS %.0f MB, %s" % (case.name, backend, ranks, rep, reps, r.wall, sec["total"],
                                              sec["numeric"], sec["read"], sec["commit"], r.rss_kb / 1024.0,
                                              {"ref": "reference output", "yes": "identical bytes",
                                               "NO": "MISMATCH", "unchecked": "not compared"}[same]))
            if samples:
                self.fill_row(row, samples, identical)
        rm(tmp_out)
        rm(stats_file)

        floor = self.measure_floor(case, a, b, reps, known_out if known_out else None)
        anchors = self.run_anchors(case, a, b, ref if have_ref else None, known_macs, known_out)
        if not args.keep_outputs:
            rm(ref)
        for row in rows:
            row.update(floor)
            row.update(anchors)
            if row.get("wall_s") not in (None, "") and floor.get("floor_s"):
                row["wall_over_floor"] = fmt(float(row["wall_s"]) / float(floor["floor_s"]), 3)
                row["total_over_floor"] = fmt(float(row["total_s"]) / float(floor["floor_s"]), 3)
        return rows

    def base_row(self, case, backend, ranks):
        row = {c: "" for c in COLUMNS}
        row.update(case=case.name, n=case.n, m=case.m, k_a=case.k, k_b=case.k_b, density="%.4g" % case.density(),
                   backend=backend, ranks=ranks, machine=self.args.machine, commit=self.info["commit"],
                   date=self.info["date"])
        return row

    def fill_row(self, row, samples, identical):
        stats0 = samples[0][1]
        med = {p: median([s["seconds"].get(p) for _, s in samples]) for p in PHASES}
        walls = [r.wall for r, _ in samples]
        wall = statistics.median(walls)
        macs = stats0.get("useful_macs") or 0
        row.update({p + "_s": fmt(med[p], 4) for p in PHASES})
        row.update(
            status="MISMATCH" if "NO" in identical else (row["status"] + " after %d run(s)" % len(samples)
                                                         if row["status"] else "ok"),
            repeats=len(samples),
            identical="NO" if "NO" in identical else ("ref" if identical[0] == "ref" else
                                                      ("yes" if "yes" in identical else "unchecked")),
            threads_per_rank=stats0.get("threads_per_rank", ""), device=stats0.get("device", ""),
            wall_s=fmt(wall, 4), wall_min_s=fmt(min(walls), 4), wall_max_s=fmt(max(walls), 4),
            launch_s=fmt(max(0.0, wall - (med["total"] or 0)), 4),
            rss_mb=fmt(max(r.rss_kb for r, _ in samples) / 1024.0, 1),
            imbalance=fmt(median([s.get("imbalance") for _, s in samples]), 3),
            block_products=stats0.get("block_products", ""), useful_macs=macs,
            c_blocks=stats0.get("blocks", {}).get("c", ""), output_bytes=stats0.get("output_bytes", ""),
            gmacs_numeric=sig(macs / med["numeric"] / 1e9 if med["numeric"] else None),
            gmacs_compute=sig(macs / med["numeric_compute"] / 1e9 if med["numeric_compute"] else None),
            gmacs_e2e=sig(macs / wall / 1e9 if wall else None))

    def measure_floor(self, case, a, b, reps, out_bytes):
        progress, data = self.progress, self.args.data
        if self.past_deadline():
            reps = 1  # still measured, once: the rows need it
        reads, writes = [], []
        os.sync()
        for _ in range(reps):
            t0 = time.perf_counter()
            subprocess.run(["cat", a, b], stdout=subprocess.DEVNULL)
            reads.append(time.perf_counter() - t0)
        if out_bytes:
            target = os.path.join(data, "floor.bin")
            for _ in range(reps):
                rm(target)
                os.sync()
                cmd = ["dd", "if=/dev/zero", "of=" + target, "bs=64M", "count=%d" % out_bytes, "iflag=count_bytes",
                       "conv=fsync", "status=none"]
                t0 = time.perf_counter()
                r = subprocess.run(cmd, stderr=subprocess.PIPE)
                if r.returncode != 0:  # a dd without count_bytes: whole 64 MiB blocks
                    rm(target)
                    cmd = cmd[:4] + ["count=%d" % ((out_bytes + (64 << 20) - 1) // (64 << 20))] + cmd[6:]
                    t0 = time.perf_counter()
                    subprocess.run(cmd)
                writes.append(time.perf_counter() - t0)
            rm(target)
        read_s, write_s = median(reads), median(writes)
        floor = (read_s or 0) + (write_s or 0)
        progress("%s: I/O floor: read inputs %.3fs (page cache) + write+fsync %.1f MB %s = %.3fs" %
                 (case.name, read_s, (out_bytes or 0) / 1e6, "%.3fs" % write_s if write_s is not None else "(no output)",
                  floor))
        return {"floor_read_s": fmt(read_s, 4), "floor_write_s": fmt(write_s, 4),
                "floor_s": fmt(floor, 4) if write_s is not None else ""}

    def check_anchor_product(self, case, ref, out, anchor, bytes_first=False):
        """An anchor's product against blockmm's first output: "identical" bytes (when bytes_first),
        else the same matrix by blockmm-cmp ("equal"); a difference is recorded as a mismatch."""
        if ref is None:
            return "no blockmm output"
        if bytes_first and same_bytes(ref, out):
            return "identical"
        rc, _ = quiet([os.path.join(self.args.build, "blockmm-cmp"), "-q", ref, out], timeout=600)
        if rc == 0:
            return "equal matrices (bytes differ)" if bytes_first else "equal"
        msg = "%s: blockmm's output DIFFERS from the %s's product" % (case.name, anchor)
        self.mismatches.append(msg)
        self.progress.loud(msg)
        return "DIFFERENT"

    def run_anchors(self, case, a, b, ref, macs, out_bytes):
        args, progress, data = self.args, self.progress, self.args.data
        res = {}
        est_products, est_out = case.estimate()
        macs = macs if macs is not None else est_products * case.m ** 3
        out_bytes = out_bytes if out_bytes else est_out
        # scipy BSR, end to end
        if not self.scipy_python:
            res["scipy_check"] = "" if args.scipy == "off" else "no scipy"
        elif out_bytes > args.scipy_max_out_gb * 1e9:
            res["scipy_check"] = "skipped (output %.1f GB)" % (out_bytes / 1e9)
        elif macs > args.scipy_max_gmac * 1e9:
            res["scipy_check"] = "skipped (%.0f GMAC)" % (macs / 1e9)
        elif self.past_deadline():
            res["scipy_check"] = "skipped (deadline)"
        else:
            reps = args.anchor_repeat or (args.repeat if case.small else args.repeat_large)
            out = os.path.join(data, case.name + ".scipy.C.bin")
            totals, mults, walls, check = [], [], [], ""
            for rep in range(reps):
                if rep and self.past_deadline():
                    break
                rm(out)
                r = run_cmd([self.scipy_python, os.path.join(BENCH, "scipy_anchor.py"), a, b, out],
                            timeout=self.timeout(args.anchor_timeout), scratch=data)
                if r.rc != 0:
                    check = "failed (%s)" % ("timeout" if r.timed_out else "exit %d" % r.rc)
                    progress("%s: scipy anchor %s: %s" % (case.name, check, r.tail(2)))
                    break
                try:
                    j = json.loads(r.stdout.strip().splitlines()[-1])
                except (ValueError, IndexError):
                    check = "failed (no JSON)"
                    break
                totals.append(j["total"])
                mults.append(j["multiply"])
                walls.append(r.wall)
                if rep == 0:
                    check = self.check_anchor_product(case, ref, out, "scipy BSR anchor", bytes_first=True)
                progress("%s: scipy BSR anchor %d/%d: total %.3fs (multiply %.3fs), wall %.3fs; %s" %
                         (case.name, rep + 1, reps, j["total"], j["multiply"], r.wall, check))
            rm(out)
            res.update(scipy_s=fmt(median(totals), 4), scipy_multiply_s=fmt(median(mults), 4),
                       scipy_wall_s=fmt(median(walls), 4), scipy_check=check)
        res.update(self.run_dbcsr_anchor(case, a, b, ref, macs))
        # cuSPARSE SpGEMM (kernel time, f64, element-level CSR)
        if not self.cusparse:
            res["cusparse_status"] = ""
        elif macs > args.cusparse_max_gmac * 1e9:
            res["cusparse_status"] = "skipped (%.0f GMAC)" % (macs / 1e9)
        elif self.past_deadline():
            res["cusparse_status"] = "skipped (deadline)"
        else:
            r = run_cmd([self.cusparse, a, b], timeout=self.timeout(args.anchor_timeout), scratch=data)
            status, spgemm = None, None
            try:
                j = json.loads(r.stdout.strip().splitlines()[-1])
                status, spgemm = j.get("status"), j.get("spgemm_seconds")
                if status != "ok":
                    status = "failed: %s" % (status + (" " + j["what"] if "what" in j else ""))
            except (ValueError, IndexError):
                pass
            if status is None:
                status = "failed (%s)" % ("timeout %ds" % args.anchor_timeout if r.timed_out else "exit %d" % r.rc)
            elif r.rc != 0 and status == "ok":
                status = "failed (exit %d)" % r.rc
            res.update(cusparse_status=status, cusparse_spgemm_s=fmt(spgemm, 5) if status == "ok" else "",
                       cusparse_wall_s=fmt(r.wall, 3))
            progress("%s: cuSPARSE anchor: %s%s, process wall %.2fs" %
                     (case.name, status, ", SpGEMM %.4fs" % spgemm if status == "ok" else "", r.wall))
        return res

    def run_dbcsr_anchor(self, case, a, b, ref, macs):
        """DBCSR (bench/dbcsr_anchor: float64 blocks of size m) on one rank with all cores as OpenMP
        threads, like blockmm's one-rank run; OpenBLAS told the best core type it can use."""
        args, progress, data = self.args, self.progress, self.args.data
        if not self.dbcsr:
            return {"dbcsr_check": "" if args.dbcsr == "off" else "not built"}
        if macs > args.dbcsr_max_gmac * 1e9:
            return {"dbcsr_check": "skipped (%.0f GMAC)" % (macs / 1e9)}
        if self.past_deadline():
            return {"dbcsr_check": "skipped (deadline)"}
        out = os.path.join(data, case.name + ".dbcsr.C.bin")
        rm(out)
        env = dict(self.env, OMP_NUM_THREADS=str(os.cpu_count() or 1), OPENBLAS_NUM_THREADS="1")
        env.setdefault("OPENBLAS_CORETYPE", openblas_best_core())
        r = run_cmd([self.mpirun, "-np", "1", "--bind-to", "none", self.dbcsr, a, b, out],
                    timeout=self.timeout(args.anchor_timeout), env=env, scratch=data)
        try:
            j = json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            j = None
        if r.rc != 0 or j is None:
            check = "failed (%s)" % ("timeout" if r.timed_out else "exit %d" % r.rc)
            progress("%s: DBCSR anchor %s: %s" % (case.name, check, r.tail(2)))
            rm(out)
            return {"dbcsr_check": check}
        check = self.check_anchor_product(case, ref, out, "DBCSR anchor")
        rm(out)
        progress("%s: DBCSR anchor (OPENBLAS_CORETYPE=%s): multiply %.3fs, wall %.3fs; %s" %
                 (case.name, env["OPENBLAS_CORETYPE"], j["multiply"], r.wall, check))
        return {"dbcsr_multiply_s": fmt(j["multiply"], 4), "dbcsr_wall_s": fmt(r.wall, 3), "dbcsr_check": check}


def openblas_best_core():
    """OpenBLAS's own detection may name an older core in a VM (it saw this AVX-512 machine as
    Prescott); name the best kernel set the CPU flags allow."""
    try:
        flags = set(open("/proc/cpuinfo").read().split())
    except OSError:
        flags = set()
    if {"avx512f", "avx512bw", "avx512vl"} <= flags:
        return "SkylakeX"
    return "Haswell" if "avx2" in flags else "Prescott"


# ---------------------------------------------------------------------------------------------
# Results: CSV, plots, RESULTS.md


def report(args, progress, rows=None, info=None):
    outdir = os.path.join(args.results, args.machine)
    os.makedirs(outdir, exist_ok=True)
    if rows is None:
        rows = read_csv(os.path.join(outdir, "results.csv"))
    if info is None:
        try:
            with open(os.path.join(outdir, "machine.json")) as f:
                info = json.load(f)
        except (OSError, ValueError):
            info = {}
    if not rows:
        progress("no results for machine %s in %s" % (args.machine, outdir))
        return
    plots = make_plots(rows, outdir, args.machine, progress)
    notes = info.get("notes", [])
    update_page(args.page, args.machine, section_text(args.machine, info, rows, plots, notes))
    progress("wrote %s, plots %s and the %s section of %s" %
             (os.path.relpath(os.path.join(outdir, "results.csv"), ROOT), ", ".join(plots), args.machine,
              os.path.relpath(args.page, ROOT) if args.page.startswith(ROOT) else args.page))


# ---------------------------------------------------------------------------------------------


def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="bench/run", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Benchmark blockmm: every backend and rank count on the DESIGN.md cases, the I/O floor, "
                    "the scipy and cuSPARSE anchors; CSV, plots and bench/RESULTS.md.",
        epilog="Examples:\n"
               "  bench/run --quick                                   # smoke test: S cases, 1 run each\n"
               "  bench/run --cases small --ranks 1,2 --repeat 3      # the CPU-only set\n"
               "  bench/run --cases full --repeat 3 --repeat-large 2 --scipy-max-out-gb 0.5 --deadline 480\n"
               "  bench/run --report-only --machine dev-vm            # plots and page from the CSV\n"
               "Exit status: 0 ok; 1 an output differed; 3 a run failed; 2 usage.")
    ap.add_argument("--cases", help="small | full | comma list of case names (default: full with a working "
                                    "cuda backend, else small); see bench/cases.sh")
    ap.add_argument("--data", default="/tmp/blockmm-bench", help="where inputs are generated and kept "
                                                                 "(default %(default)s)")
    ap.add_argument("--build", help="build directory with blockmm, blockmm-gen, blockmm-cmp, cusparse_anchor "
                                    "(default: $BLOCKMM_BUILD, else build-gpu, build-cuda, build)")
    ap.add_argument("--backends", default="auto-detect",
                    help="comma list of blockmm backends (default: cpu, plus cuda when nvidia-smi -L works and a "
                         "tiny cuda run succeeds)")
    ap.add_argument("--ranks", default="1,2", help="rank counts; N > 1 runs under mpirun -np N --oversubscribe "
                                                   "--bind-to none (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement, medians taken (default 3)")
    ap.add_argument("--repeat-large", type=int, help="runs per measurement for cases not named S* "
                                                     "(default: --repeat)")
    ap.add_argument("--quick", action="store_true", help="smoke test: 1 run, S cases only")
    ap.add_argument("--machine", help="name of this machine's results (default: GPU name, else hostname)")
    ap.add_argument("--results", default=os.path.join(BENCH, "results"), help="results root (default bench/results)")
    ap.add_argument("--page", default=os.path.join(BENCH, "RESULTS.md"), help="results page (default "
                                                                               "bench/RESULTS.md)")
    ap.add_argument("--fresh", action="store_true", help="drop this machine's earlier rows (default: rows of "
                                                         "cases not run now are kept)")
    ap.add_argument("--check", choices=["auto", "all", "first"], default="auto",
                    help="which outputs are compared with cmp: all, the first of each backend x ranks, or auto "
                         "(all when the output is under 1 GB, else the first) (default auto)")
    ap.add_argument("--cpu-max-gmac", type=float, dest="cpu_limit_gmac",
                    help="skip the cpu backend on cases with more useful GMAC than this (default: 150 when cuda "
                         "runs too, else no limit; 0: no limit)")
    ap.add_argument("--scipy", choices=["auto", "off"], default="auto", help="scipy BSR anchor (default auto)")
    ap.add_argument("--scipy-max-out-gb", type=float, default=2.0, help="scipy only for outputs under this "
                                                                        "(default 2 GB)")
    ap.add_argument("--scipy-max-gmac", type=float, default=20.0, help="scipy only under this much work "
                                                                       "(default 20 GMAC)")
    ap.add_argument("--cusparse", choices=["auto", "off"], default="auto", help="cuSPARSE anchor (default auto)")
    ap.add_argument("--cusparse-max-gmac", type=float, default=100.0,
                    help="cuSPARSE anchor only under this much work (default 100 GMAC)")
    ap.add_argument("--dbcsr", choices=["auto", "off"], default="auto",
                    help="DBCSR anchor, when the build has dbcsr_anchor (default auto)")
    ap.add_argument("--dbcsr-max-gmac", type=float, default=200, help="DBCSR anchor only under this much work "
                    "(default 200 GMAC)")
    ap.add_argument("--anchor-repeat", type=int, help="runs of the scipy anchor per case (default: as blockmm's)")
    ap.add_argument("--anchor-timeout", type=int, default=180, help="seconds per anchor run (default 180)")
    ap.add_argument("--run-timeout", type=int, default=900, help="seconds per blockmm run (default 900)")
    ap.add_argument("--deadline", type=float, help="seconds after start: no new run begins later (the report "
                                                   "is still written)")
    ap.add_argument("--keep-omp-num-threads", action="store_true",
                    help="pass OMP_NUM_THREADS on to blockmm (default: removed, so each rank takes the node's "
                         "cores over its ranks)")
    ap.add_argument("--gen-threads", type=int, default=0, help="blockmm-gen --threads (default: all cores)")
    ap.add_argument("--keep-outputs", action="store_true", help="keep each case's first output in --data")
    ap.add_argument("--target", choices=["file", "shm", "null"], default="file",
                    help="where the timed runs write their output: file (in --data, the default), shm (/dev/shm: "
                         "fast storage) or null (/dev/null: the compute pipeline alone; one more, untimed run "
                         "per configuration writes a file for the identity check)")
    ap.add_argument("--commit", help="commit to record (default: git rev-parse, else $BLOCKMM_COMMIT)")
    ap.add_argument("--log", help="also append the progress lines to this file")
    ap.add_argument("--archive", help="at the end, write a .tgz of bench/RESULTS.md and this machine's results "
                                      "(paths relative to the repository root)")
    ap.add_argument("--report-only", action="store_true", help="no runs: redraw the plots and this machine's "
                                                               "section from results.csv and machine.json")
    args = ap.parse_args(argv)
    if args.repeat < 1 or (args.repeat_large is not None and args.repeat_large < 1):
        ap.error("--repeat must be at least 1")
    try:
        args.rank_list = sorted({int(x) for x in args.ranks.split(",") if x.strip()})
    except ValueError:
        ap.error("--ranks takes a comma list of integers")
    if not args.rank_list or min(args.rank_list) < 1:
        ap.error("--ranks takes positive integers")
    return args


def find_build(args):
    if args.build:
        return os.path.abspath(args.build)
    candidates = [os.environ.get("BLOCKMM_BUILD")] + [os.path.join(ROOT, d) for d in ("build-gpu", "build-cuda",
                                                                                      "build")]
    for c in candidates:
        if c and os.path.isfile(os.path.join(c, "blockmm")) and os.path.isfile(os.path.join(c, "blockmm-gen")):
            return os.path.abspath(c)
    return None


def find_scipy_python():
    for py in (sys.executable, "/usr/bin/python3", shutil.which("python3")):
        if py and os.path.exists(py) and quiet([py, "-c", "import numpy, scipy.sparse"], timeout=60)[0] == 0:
            return py
    return None


def archive(args, progress):
    if not args.archive:
        return
    members = [os.path.relpath(args.page, ROOT), os.path.relpath(os.path.join(args.results, args.machine), ROOT)]
    members = [m for m in members if os.path.exists(os.path.join(ROOT, m))]
    rc, out = quiet(["tar", "czf", os.path.abspath(args.archive), "-C", ROOT] + members, timeout=120)
    progress("archive %s: %s" % (args.archive, "written" if rc == 0 else "FAILED: " + out))


def main(argv):
    args = parse_args(argv)
    progress = Progress(args.log)
    have_gpu, gpu_lines = gpu_query()
    args.machine = args.machine or default_machine_name(gpu_lines)
    args.results = os.path.abspath(args.results)
    args.page = os.path.abspath(args.page)
    if args.report_only:
        report(args, progress)
        archive(args, progress)
        return 0

    build = find_build(args)
    if not build or not os.path.isfile(os.path.join(build, "blockmm")):
        print("bench/run: no build with blockmm found (give --build DIR)", file=sys.stderr)
        return 2
    args.build = build
    args.data = os.path.abspath(args.data)
    os.makedirs(args.data, exist_ok=True)
    if args.repeat_large is None:
        args.repeat_large = args.repeat
    if args.quick:
        args.repeat = args.repeat_large = 1

    bench = Bench(args, progress)
    info = machine_info(build, gpu_lines, args)
    bench.info = info
    info["command"] = " ".join(["bench/run"] + [shlex.quote(a) for a in argv])
    info["data"] = args.data
    progress("machine %s: %s, %s cores, %s GiB; GPU: %s; build %s; commit %s" %
             (args.machine, info["cpu"], info["cores"], info["memory_gib"], "; ".join(gpu_lines) or "none",
              info["build"], info["commit"]))
    if info["build_type"] not in ("Release", "RelWithDebInfo"):
        progress("warning: build type %s: timings of a non-release build" % info["build_type"])
    if os.environ.get("OMP_NUM_THREADS"):
        progress("note: OMP_NUM_THREADS=%s is set; %s" % (
            os.environ["OMP_NUM_THREADS"], "kept (--keep-omp-num-threads)" if args.keep_omp_num_threads else
            "removed from blockmm's environment, so that it uses the node's cores over its ranks"))

    cuda_ok, cuda_why = bench.detect_cuda(have_gpu)
    progress("cuda backend: %s" % ("available" if cuda_ok else "not available (%s)" % cuda_why))
    if args.backends == "auto-detect":
        backends = (["cuda"] if cuda_ok else []) + ["cpu"]
    else:
        backends = [b.strip() for b in args.backends.split(",") if b.strip()]
        # a faster backend first gives the work count that the cpu limit uses
        backends.sort(key=lambda b: 0 if b == "cuda" else 1)
    if args.cpu_limit_gmac is None:
        args.cpu_limit_gmac = 150.0 if (cuda_ok and "cuda" in backends) else 0.0
    info["backends_note"] = ", ".join(backends) + ("" if cuda_ok else " (cuda: %s)" % cuda_why)
    if args.cpu_limit_gmac and "cpu" in backends:
        info["backends_note"] += "; cpu skipped above %g GMAC of useful work" % args.cpu_limit_gmac

    sets = load_cases()
    spec = args.cases or (("full" if cuda_ok else "small") if not args.quick else "S1,S2")
    cases = select_cases(spec, sets)
    if args.quick:
        cases = [c for c in cases if c.small] or cases[:1]
    if not cases:
        print("bench/run: no cases selected", file=sys.stderr)
        return 2
    progress("cases %s; backends %s; ranks %s; repeats %d (S cases) / %d (others)" %
             (",".join(c.name for c in cases), ",".join(backends), ",".join(map(str, args.rank_list)), args.repeat,
              args.repeat_large))
    bench.scipy_python = find_scipy_python() if args.scipy == "auto" else None
    cus = os.path.join(build, "cusparse_anchor")
    bench.cusparse = cus if (args.cusparse == "auto" and cuda_ok and os.access(cus, os.X_OK)) else None
    dbc = os.path.join(build, "dbcsr_anchor")
    bench.dbcsr = dbc if (args.dbcsr == "auto" and os.access(dbc, os.X_OK)) else None
    progress("anchors: DBCSR %s" % (bench.dbcsr or "not available (BLOCKMM_BENCH_DEPS=1 scripts/install-deps)"))
    progress("anchors: scipy %s; cuSPARSE %s" % (bench.scipy_python or "not available",
                                                 bench.cusparse or "not available (needs a GPU and a CUDA build)"))

    def skip_reasons(backend, ranks):
        if backend == "cuda" and not cuda_ok:
            return "skipped: cuda not available (%s)" % cuda_why
        if ranks > 1 and not bench.mpirun:
            return "skipped: no mpirun"
        return None

    configs = [(b, r) for b in backends for r in args.rank_list]
    outdir = os.path.join(args.results, args.machine)
    os.makedirs(outdir, exist_ok=True)
    csv_path = os.path.join(outdir, "results.csv")
    runs_path = os.path.join(outdir, "runs.csv")
    old_rows = [] if args.fresh else read_csv(csv_path)
    old_run_rows = [] if args.fresh else read_csv(runs_path)
    rows, done, not_run = [], set(), []
    interrupted = False

    def save():  # this run's rows replace the earlier rows of the same cases; others are kept
        old = [r for r in old_rows if r.get("case") not in done]
        write_csv(csv_path, old + rows, COLUMNS)
        write_csv(runs_path, [r for r in old_run_rows if r.get("case") not in done] + bench.run_rows, RUN_COLUMNS)
        return old

    try:
        for case in cases:
            if bench.past_deadline():
                progress("%s: skipped (deadline)" % case.name)
                not_run.append(case.name)
                continue
            try:
                case_rows = bench.run_case(case, configs, skip_reasons)
                rows += case_rows
                done.add(case.name)
            except RuntimeError as e:
                msg = "%s: %s" % (case.name, e)
                bench.failures.append(msg)
                progress.loud(msg)
            save()
    except KeyboardInterrupt:
        interrupted = True
        progress("interrupted: writing what was measured")
    notes = ["MISMATCH: " + m for m in bench.mismatches] + ["FAILED: " + f for f in bench.failures]
    if not_run:
        notes.append("Not run (deadline): %s%s." % (", ".join(not_run), "; rows of an earlier run are kept"
                                                    if any(r.get("case") in not_run for r in old_rows) else ""))
    if interrupted:
        notes.append("The run was interrupted; some cases are missing.")
    info["notes"] = notes
    info["load_end"] = loadavg()
    info["cases_run"] = [c.name for c in cases]
    with open(os.path.join(outdir, "machine.json"), "w") as f:
        json.dump(info, f, indent=2)
    old = save()
    all_rows = old + rows
    order = {}
    for c in sets["small"] + sets["full"]:
        order.setdefault(c.name, len(order))
    all_rows.sort(key=lambda r: (order.get(r["case"], 99), r["backend"] != "cpu", int(r["ranks"])))
    write_csv(csv_path, all_rows, COLUMNS)
    report(args, progress, None, info)  # from the CSV, so that every field is text as on a re-run
    archive(args, progress)

    # headline
    for case in case_order(rows):
        r = next(r for r in rows if r["case"] == case)
        progress("  %-4s I/O floor %ss (read %s + write %s); scipy %s; cuSPARSE %s" %
                 (case, r["floor_s"] or "-", r["floor_read_s"] or "-", r["floor_write_s"] or "-",
                  ("%ss end to end, %s" % (r["scipy_s"], r["scipy_check"])) if r["scipy_s"] else
                  (r["scipy_check"] or "-"),
                  ("%s, SpGEMM %ss" % (r["cusparse_status"], r["cusparse_spgemm_s"])) if r["cusparse_spgemm_s"]
                  else (r["cusparse_status"] or "-")))
    for r in rows:
        if num(r, "wall_s") is not None:
            progress("  %-4s %-8s wall %8ss  total %8ss  numeric %8ss  %8s GMAC/s numeric  floor %6ss  "
                     "wall/floor %s  identical: %s" %
                     (r["case"], label(r), r["wall_s"], r["total_s"], r["numeric_s"], r["gmacs_numeric"],
                      r["floor_s"], r["wall_over_floor"] or "-", r["identical"]))
        else:
            progress("  %-4s %-8s %s" % (r["case"], label(r), r["status"]))
    if bench.mismatches:
        for m in bench.mismatches:
            progress.loud("MISMATCH: " + m)
        return 1
    if bench.failures:
        for m in bench.failures:
            progress.loud("FAILED: " + m)
        return 3
    if interrupted:
        return 130
    progress("done: every output identical to the first of its case")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
