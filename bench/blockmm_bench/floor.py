"""The I/O floor of a case, measured in the same run: read both inputs from the page cache
(`cat A B > /dev/null`) plus write and fsync a file of the output's size (`dd ... conv=fsync`)."""
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


def measure_floor(session, case, a, b, reps, out_bytes):
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
    return floor
