"""The I/O floor of a case, measured in the same run: read both inputs from the page cache
(`cat A B > /dev/null`) plus write and fsync a file of the output's size (`dd ... conv=fsync`).
Beside it the write floors of the output's own folder (bench/write_floor, bench/NOTES.md item
30): the output's bytes written by W threads into one file, and as W separate files, each the
faster of shared maps in 4 KiB pages and in huge folios. One file is bounded by the page cache of
one file, separate files by the machine; blockmm's write phase is reported against both."""
import dataclasses
import os
import subprocess
import time
from typing import Optional

from blockmm_bench.records import median
from blockmm_bench.runner import rm


@dataclasses.dataclass
class Floor:
    read_s: Optional[float]
    write_s: Optional[float]  # None: the case had no output to size it by
    one_file_s: Optional[float] = None  # write_floor: one file (None: not measured)
    files_s: Optional[float] = None     # write_floor: separate files

    @property
    def total_s(self):
        return None if self.write_s is None else (self.read_s or 0) + self.write_s

    def apply(self, row):
        """Sets a ResultRow's floor columns and its wall and total against the floor."""
        row.floor_read_s, row.floor_write_s, row.floor_s = self.read_s, self.write_s, self.total_s
        # As stored: the ratios of the rounded times, as a reader of the CSV would compute them.
        if row.wall_s is not None and row.floor_s:
            row.wall_over_floor = row.wall_s / row.floor_s
            row.total_over_floor = row.total_s / row.floor_s
        row.floor_one_file_s, row.floor_files_s = self.one_file_s, self.files_s
        # The write phase's rate as a fraction of each floor's (1: at the floor), from the stored times.
        if row.write_s:
            if row.floor_one_file_s:
                row.write_over_one_file = row.floor_one_file_s / row.write_s
            if row.floor_files_s:
                row.write_over_files = row.floor_files_s / row.write_s


def write_floor_threads():
    """Writers of the write floors: the issue's one-file floor did not change from 1 to 8 writers."""
    return max(1, min(8, os.cpu_count() or 1))


def measure_write_floors(session, out_dir, out_bytes, reps):
    """(one file, separate files) seconds for out_bytes in out_dir, each the best method's median;
    (None, None) without bench/write_floor."""
    tool = os.path.join(session.args.build, "write_floor")
    if not os.access(tool, os.X_OK):
        return None, None
    writers = write_floor_threads()
    result = []
    for files in ("one", "separate"):
        best = None
        for method in ("map", "collapse"):
            times = []
            for _ in range(reps):
                r = subprocess.run([tool, out_dir, str(out_bytes), "--writers", str(writers), "--files", files,
                                    "--method", method, "--repeat", "1"], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, universal_newlines=True, timeout=600)
                seconds = [w.split("=", 1)[1] for w in r.stdout.split() if w.startswith("seconds=")]
                if r.returncode != 0 or not seconds:
                    session.progress("write_floor %s %s failed: %s" % (files, method, r.stderr.strip()[-200:]))
                    break
                times.append(float(seconds[0]))
            m = median(times)
            if m is not None and (best is None or m < best):
                best = m
        result.append(best)
    return result[0], result[1]

def measure_floor(session, case, a, b, reps, out_bytes, out_dir=None):
    data = session.args.data
    if session.past_deadline():
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
    floor = Floor(median(reads), median(writes))
    session.progress("%s: I/O floor: read inputs %.3fs (page cache) + write+fsync %.1f MB %s = %.3fs" %
                     (case.name, floor.read_s, (out_bytes or 0) / 1e6,
                      "%.3fs" % floor.write_s if floor.write_s is not None else "(no output)",
                      floor.total_s or floor.read_s))
    if out_bytes:
        floor.one_file_s, floor.files_s = measure_write_floors(session, out_dir or data, out_bytes, min(reps, 3))
        if floor.one_file_s is not None and floor.files_s is not None:
            session.progress("%s: write floors in %s, %d writers: one file %.3fs (%.2f GB/s), separate files %.3fs "
                             "(%.2f GB/s)" % (case.name, out_dir or data, write_floor_threads(), floor.one_file_s,
                                              out_bytes / floor.one_file_s / 1e9, floor.files_s,
                                              out_bytes / floor.files_s / 1e9))
    return floor
