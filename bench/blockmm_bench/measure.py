"""The blockmm measurements of one case: every backend x ranks run --repeat times with
--stats=json, each output compared with the case's first one, one RunRow per run and one
ResultRow of medians per configuration; then the case's I/O floor and anchors fill every row."""
import glob
import json
import os
import statistics
import subprocess

from blockmm_bench.anchors import run_anchors
from blockmm_bench.floor import measure_floor
from blockmm_bench.inputs import ensure_inputs
from blockmm_bench.records import PHASES, ResultRow, RunRow, label, median
from blockmm_bench.runner import quiet, rm, run_cmd
from blockmm_bench.session import same_bytes

def part_files(path):
    """The part files of a parted HDF5 output (docs/output.md) beside it."""
    return glob.glob(glob.escape(path) + ".part-" + "[0-9a-f]" * 8 + "-" + "[0-9]" * 4)


def rm_output(path):
    """An output and, where it is in parts, its part files."""
    for p in part_files(path):
        rm(p)
    rm(path)


def same_output(session, ref, out):
    """Whether out holds ref's product: the same bytes, or for parted outputs (whose main files
    name their own parts) the same matrix in canonical form by blockmm-cmp --strict."""
    if not part_files(ref) and not part_files(out):
        return same_bytes(ref, out)
    rc, _ = quiet([os.path.join(session.args.build, "blockmm-cmp"), "--strict", "-q", ref, out], timeout=600)
    return rc == 0


VERDICTS = {"ref": "reference output", "yes": "identical bytes", "NO": "MISMATCH", "unchecked": "not compared"}


def blockmm_cmd(build, backend, ranks, a, b, out, stats_file, mpirun, parts=None):
    # "cuda:G": the cuda backend on G GPUs of each process (--gpus G); "cuda" alone: blockmm's default.
    kind, _, gpus = backend.partition(":")
    cmd = [os.path.join(build, "blockmm"), "--backend", kind] + (["--gpus", gpus] if gpus else []) + \
          ["--stats=json", "-q", "--stats-file", stats_file, a, b, out] + (["--parts", parts] if parts else [])
    if ranks > 1:
        # Open MPI binds each of 2 ranks to one core by default, which would starve their threads.
        cmd = [mpirun, "-np", str(ranks), "--oversubscribe", "--bind-to", "none"] + cmd
    return cmd


class CaseRun:
    """The runs of one case. The first output written is the case's reference; --target null
    writes it (and each configuration's identity check) in one more, untimed run."""

    def __init__(self, session, case):
        self.s, self.case = session, case
        args = session.args
        self.a, self.b = ensure_inputs(case, args.data, args.build, session.progress, args.gen_threads,
                                       session.numpy_python)
        # --target: where the timed runs write. shm: a tmpfs (fast storage); null: /dev/null (the
        # compute pipeline alone).
        out_dir = session.shm_dir if args.target == "shm" else args.data
        self.ref = os.path.join(out_dir, case.name + ".ref.C." + args.format)
        self.tmp_out = os.path.join(out_dir, case.name + ".run.C." + args.format)
        self.stats_file = os.path.join(args.data, case.name + ".stats.json")
        self.have_ref, self.ref_label, self.kept_mismatch = False, "", False
        self.known_macs = self.known_out = None  # from the first stats: the cpu limit and the anchors use them

    def run(self, configs, skip_reason):
        s, case, args = self.s, self.case, self.s.args
        reps = args.repeat if case.small else args.repeat_large
        subprocess.run(["cat", self.a, self.b], stdout=subprocess.DEVNULL)  # page cache, as the floor assumes
        in_bytes = os.path.getsize(self.a) + os.path.getsize(self.b)
        s.progress("%s: n=%d m=%d k=%d/%d (density %.3g), inputs %.1f MB, %d repeat(s)" %
                   (case.name, case.n, case.m, case.k, case.k_b, case.density(), in_bytes / 1e6, reps))
        rm_output(self.ref)
        rows = []
        for backend, ranks in configs:
            row = self.base_row(backend, ranks)
            rows.append(row)
            reason = skip_reason(backend, ranks)
            if reason is None and backend == "cpu" and args.cpu_limit_gmac:
                macs = self.known_macs if self.known_macs is not None else case.estimated_macs()
                if macs > args.cpu_limit_gmac * 1e9:
                    reason = "skipped: %.0f GMAC > --cpu-max-gmac %g" % (macs / 1e9, args.cpu_limit_gmac)
            if reason is None and s.past_deadline():
                reason = "skipped: deadline"
            if reason:
                row.status = reason
                s.progress("%s %s: %s" % (case.name, label(row), reason))
                continue
            self.measure(row, reps)
        rm_output(self.tmp_out)
        rm(self.stats_file)

        floor = measure_floor(s, case, self.a, self.b, reps, self.known_out or None,
                              s.shm_dir if args.target == "shm" else args.data)
        anchors = run_anchors(s, case, self.a, self.b, self.ref if self.have_ref else None, self.known_macs,
                              self.known_out)
        if not args.keep_outputs:
            rm_output(self.ref)
        for row in rows:
            floor.apply(row)
            anchors.apply(row)
        return rows

    def base_row(self, backend, ranks):
        c, info = self.case, self.s.info
        return ResultRow(case=c.name, n=c.n, m=c.m, k_a=c.k, k_b=c.k_b, density=c.density(), backend=backend,
                         ranks=ranks, machine=self.s.args.machine, commit=info["commit"], date=info["date"])

    def untimed_identity_run(self, row):
        """--target null: one run into a file, compared with the reference (or made the reference).
        Returns the verdict, or None when the run failed (the row says so)."""
        s, args = self.s, self.s.args
        out = self.tmp_out if self.have_ref else self.ref
        rm_output(out)
        r = run_cmd(blockmm_cmd(args.build, row.backend, row.ranks, self.a, self.b, out, self.stats_file, s.mpirun,
                                args.parts),
                    timeout=s.timeout(args.run_timeout), env=s.env, scratch=args.data)
        if r.rc != 0:
            s.failure("%s %s untimed identity run FAILED (exit %d): %s" % (self.case.name, label(row), r.rc,
                                                                         r.tail()))
            row.status = "failed (exit %d)" % r.rc
            rm_output(out)
            return None
        if not self.have_ref:
            self.have_ref, self.ref_label = True, label(row)
            return "ref"
        checked = "yes" if same_output(self.s, self.ref, out) else "NO"
        if checked == "NO":
            s.mismatch("%s %s: output DIFFERS from the first output of the case (%s)" % (self.case.name, label(row),
                                                                                         self.ref_label))
        rm_output(out)
        return checked

    def measure(self, row, reps):
        s, case, args = self.s, self.case, self.s.args
        checked = None
        if args.target == "null":
            checked = self.untimed_identity_run(row)
            if checked is None:
                return
        samples, identical = [], []
        for rep in range(1, reps + 1):
            if rep > 1 and s.past_deadline():
                s.progress("%s %s: deadline reached after %d repeat(s)" % (case.name, label(row), rep - 1))
                break
            out = "/dev/null" if args.target == "null" else (self.tmp_out if self.have_ref else self.ref)
            rm_output(out)
            rm(self.stats_file)
            os.sync()  # no write-back left over from the last step runs into this one
            r = run_cmd(blockmm_cmd(args.build, row.backend, row.ranks, self.a, self.b, out, self.stats_file,
                                    s.mpirun, args.parts),
                        timeout=s.timeout(args.run_timeout), env=s.env, scratch=args.data)
            stats = None
            if r.rc == 0:
                try:
                    with open(self.stats_file) as f:
                        stats = json.load(f)
                except (OSError, ValueError) as e:
                    r.rc, r.stderr = 1, "no stats file: %s" % e
            run_row = RunRow(case=case.name, backend=row.backend, ranks=row.ranks, repeat=rep, rc=r.rc,
                             wall_s=r.wall, rss_mb=r.rss_kb / 1024.0)
            s.run_rows.append(run_row)
            if r.rc != 0:
                what = "timed out" if r.timed_out else "exit %d" % r.rc
                s.failure("%s %s repeat %d FAILED (%s): %s" % (case.name, label(row), rep, what, r.tail()))
                row.status = "failed (%s)" % what
                rm_output(out)
                break
            sec = stats["seconds"]
            for p in PHASES:
                setattr(run_row, p + "_s", sec.get(p))
            run_row.useful_macs = stats.get("useful_macs")
            run_row.output_bytes = stats.get("output_bytes")
            self.known_macs = stats.get("useful_macs", self.known_macs)
            self.known_out = stats.get("output_bytes") or os.path.getsize(out)
            same = self.verdict(row, rep, out, checked)
            if same != "NO" and out != self.ref:
                rm_output(out)
            run_row.identical = same
            identical.append(same)
            samples.append((r, stats))
            s.progress("%s %s rep %d/%d: wall %.3fs (total %.3f, numeric %.3f, read %.3f, commit %.3f), "
                       "RSS %.0f MB, %s" % (case.name, label(row), rep, reps, r.wall, sec["total"], sec["numeric"],
                                            sec["read"], sec["commit"], r.rss_kb / 1024.0, VERDICTS[same]))
        if samples:
            fill_medians(row, samples, identical)

    def verdict(self, row, rep, out, checked):
        """This run's output against the case's first (all of them when small enough): ref, yes, NO
        or unchecked. A differing output is kept (the first one) and reported with blockmm-cmp's
        first difference."""
        s, case, args = self.s, self.case, self.s.args
        if checked is not None:
            return checked
        if not self.have_ref:
            self.have_ref, self.ref_label = True, label(row)
            return "ref"
        if not (args.check == "all" or rep == 1 or (args.check == "auto" and self.known_out < 1e9)):
            return "unchecked"
        if same_output(self.s, self.ref, out):
            return "yes"
        keep = os.path.join(args.data, "%s.%s.%d.rep%d.MISMATCH.bin" % (case.name, row.backend, row.ranks, rep))
        os.replace(out, keep)
        rc, how = quiet([os.path.join(args.build, "blockmm-cmp"), self.ref, keep], timeout=600)
        how = how.splitlines()[0] if how else "exit %d" % rc
        how = how[len("blockmm-cmp: "):] if how.startswith("blockmm-cmp: ") else how
        msg = ("%s %s repeat %d: output DIFFERS from the first output of the case (%s): %s" %
               (case.name, label(row), rep, self.ref_label, how))
        if self.kept_mismatch:
            rm(keep)
        else:
            self.kept_mismatch = True
            msg += "; kept as " + keep
        s.mismatch(msg)
        return "NO"


def fill_medians(row, samples, identical):
    """The row's medians over its runs ((Result, stats) pairs) and the work they report."""
    stats0 = samples[0][1]
    med = {p: median([st["seconds"].get(p) for _, st in samples]) for p in PHASES}
    walls = [r.wall for r, _ in samples]
    wall = statistics.median(walls)
    macs = stats0.get("useful_macs") or 0
    for p in PHASES:
        setattr(row, p + "_s", med[p])
    row.status = "MISMATCH" if "NO" in identical else (row.status + " after %d run(s)" % len(samples)
                                                        if row.status else "ok")
    row.repeats = len(samples)
    row.identical = "NO" if "NO" in identical else ("ref" if identical[0] == "ref" else
                                                    ("yes" if "yes" in identical else "unchecked"))
    row.threads_per_rank = stats0.get("threads_per_rank")
    row.device = stats0.get("device", "")
    row.wall_s, row.wall_min_s, row.wall_max_s = wall, min(walls), max(walls)
    row.launch_s = max(0.0, wall - (med["total"] or 0))
    row.rss_mb = max(r.rss_kb for r, _ in samples) / 1024.0
    row.imbalance = median([st.get("imbalance") for _, st in samples])
    row.block_products = stats0.get("block_products")
    row.useful_macs = macs
    row.c_blocks = stats0.get("blocks", {}).get("c")
    row.output_bytes = stats0.get("output_bytes")
    row.gmacs_numeric = macs / med["numeric"] / 1e9 if med["numeric"] else None
    row.gmacs_compute = macs / med["numeric_compute"] / 1e9 if med["numeric_compute"] else None
    row.gmacs_e2e = macs / wall / 1e9 if wall else None
    steps = stats0.get("backend_seconds", {})
    row.predicted_sparse_s = steps.get("numeric: predicted sparse path")
    row.predicted_dense_s = steps.get("numeric: predicted dense path")
