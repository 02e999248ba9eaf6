"""The anchors of a case, run beside blockmm on the same inputs: scipy BSR end to end
(bench/scipy_anchor.py, one core, exact in uint64), DBCSR (<build>/dbcsr_anchor, float64 blocks,
one rank with all cores) and the cuSPARSE f64 SpGEMM (<build>/cusparse_anchor, kernel time).
The scipy and DBCSR products are checked against blockmm's first output of the case; a difference
is a mismatch (exit status 1)."""
import dataclasses
import json
import os
from typing import Optional

from blockmm_bench.machine import openblas_best_core
from blockmm_bench.records import median
from blockmm_bench.runner import ROOT, quiet, rm, run_cmd
from blockmm_bench.session import same_bytes


@dataclasses.dataclass
class Anchors:
    """What the anchors measured for one case; a check or status is empty when the anchor is off,
    else says why it did not run, how it failed, or how its product compared."""
    scipy_s: Optional[float] = None  # its own clock: read, multiply, write
    scipy_multiply_s: Optional[float] = None
    scipy_wall_s: Optional[float] = None
    scipy_check: str = ""
    cusparse_status: str = ""
    cusparse_spgemm_s: Optional[float] = None
    cusparse_wall_s: Optional[float] = None
    dbcsr_multiply_s: Optional[float] = None
    dbcsr_wall_s: Optional[float] = None
    dbcsr_check: str = ""

    def apply(self, row):
        """Sets the ResultRow's anchor columns (they have the same names)."""
        for f in dataclasses.fields(self):
            setattr(row, f.name, getattr(self, f.name))


def check_product(session, case, ref, out, anchor, bytes_first=False):
    """An anchor's product against blockmm's first output: "identical" bytes (when bytes_first),
    else the same matrix by blockmm-cmp ("equal"); a difference is recorded as a mismatch."""
    if ref is None:
        return "no blockmm output"
    if bytes_first and same_bytes(ref, out):
        return "identical"
    rc, _ = quiet([os.path.join(session.args.build, "blockmm-cmp"), "-q", ref, out], timeout=600)
    if rc == 0:
        return "equal matrices (bytes differ)" if bytes_first else "equal"
    session.mismatch("%s: blockmm's output DIFFERS from the %s's product" % (case.name, anchor))
    return "DIFFERENT"


def last_json(stdout):
    """The JSON object an anchor prints as its last line (None when there is none)."""
    try:
        j = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return j if isinstance(j, dict) else None


def run_anchors(session, case, a, b, ref, macs, out_bytes):
    est_products, est_out = case.estimate()
    macs = macs if macs is not None else est_products * case.m ** 3
    out_bytes = out_bytes if out_bytes else est_out
    res = Anchors()
    run_scipy(session, case, a, b, ref, macs, out_bytes, res)
    run_dbcsr(session, case, a, b, ref, macs, res)
    run_cusparse(session, case, a, b, macs, res)
    return res


def run_scipy(session, case, a, b, ref, macs, out_bytes, res):
    """scipy BSR, end to end, --anchor-repeat times (medians); its first product is checked."""
    args, progress = session.args, session.progress
    if not session.scipy_python:
        res.scipy_check = "" if args.scipy == "off" else "no scipy"
        return
    if out_bytes > args.scipy_max_out_gb * 1e9:
        res.scipy_check = "skipped (output %.1f GB)" % (out_bytes / 1e9)
        return
    if macs > args.scipy_max_gmac * 1e9:
        res.scipy_check = "skipped (%.0f GMAC)" % (macs / 1e9)
        return
    if session.past_deadline():
        res.scipy_check = "skipped (deadline)"
        return
    reps = args.anchor_repeat or (args.repeat if case.small else args.repeat_large)
    out = os.path.join(args.data, case.name + ".scipy.C.bin")
    totals, mults, walls, check = [], [], [], ""
    for rep in range(reps):
        if rep and session.past_deadline():
            break
        rm(out)
        r = run_cmd([session.scipy_python, os.path.join(ROOT, "bench", "scipy_anchor.py"), a, b, out],
                    timeout=session.timeout(args.anchor_timeout), scratch=args.data)
        if r.rc != 0:
            check = "failed (%s)" % ("timeout" if r.timed_out else "exit %d" % r.rc)
            progress("%s: scipy anchor %s: %s" % (case.name, check, r.tail(2)))
            break
        j = last_json(r.stdout)
        if j is None:
            check = "failed (no JSON)"
            break
        totals.append(j["total"])
        mults.append(j["multiply"])
        walls.append(r.wall)
        if rep == 0:
            check = check_product(session, case, ref, out, "scipy BSR anchor", bytes_first=True)
        progress("%s: scipy BSR anchor %d/%d: total %.3fs (multiply %.3fs), wall %.3fs; %s" %
                 (case.name, rep + 1, reps, j["total"], j["multiply"], r.wall, check))
    rm(out)
    res.scipy_s, res.scipy_multiply_s, res.scipy_wall_s = median(totals), median(mults), median(walls)
    res.scipy_check = check


def run_dbcsr(session, case, a, b, ref, macs, res):
    """DBCSR (bench/dbcsr_anchor: float64 blocks of size m) on one rank with all cores as OpenMP
    threads, like blockmm's one-rank run; OpenBLAS told the best core type it can use."""
    args, progress = session.args, session.progress
    if not session.dbcsr:
        res.dbcsr_check = "" if args.dbcsr == "off" else "not built"
        return
    if macs > args.dbcsr_max_gmac * 1e9:
        res.dbcsr_check = "skipped (%.0f GMAC)" % (macs / 1e9)
        return
    if case.shape == "real" and case.m < 8:  # issue 48 compares DBCSR on the chemistry shape only
        res.dbcsr_check = "skipped (real shape, m < 8)"
        return
    if session.past_deadline():
        res.dbcsr_check = "skipped (deadline)"
        return
    out = os.path.join(args.data, case.name + ".dbcsr.C.bin")
    rm(out)
    env = dict(session.env, OMP_NUM_THREADS=str(os.cpu_count() or 1), OPENBLAS_NUM_THREADS="1")
    env.setdefault("OPENBLAS_CORETYPE", openblas_best_core())
    r = run_cmd([session.mpirun, "-np", "1", "--bind-to", "none", session.dbcsr, a, b, out],
                timeout=session.timeout(args.anchor_timeout), env=env, scratch=args.data)
    j = last_json(r.stdout)
    if r.rc != 0 or j is None:
        res.dbcsr_check = "failed (%s)" % ("timeout" if r.timed_out else "exit %d" % r.rc)
        progress("%s: DBCSR anchor %s: %s" % (case.name, res.dbcsr_check, r.tail(2)))
        rm(out)
        return
    res.dbcsr_check = check_product(session, case, ref, out, "DBCSR anchor")
    rm(out)
    progress("%s: DBCSR anchor (OPENBLAS_CORETYPE=%s): multiply %.3fs, wall %.3fs; %s" %
             (case.name, env["OPENBLAS_CORETYPE"], j["multiply"], r.wall, res.dbcsr_check))
    res.dbcsr_multiply_s, res.dbcsr_wall_s = j["multiply"], r.wall


def run_cusparse(session, case, a, b, macs, res):
    """cuSPARSE SpGEMM (kernel time, f64, element-level CSR); not checked against blockmm (its
    product stays on the GPU)."""
    args, progress = session.args, session.progress
    if not session.cusparse:
        res.cusparse_status = ""
        return
    if macs > args.cusparse_max_gmac * 1e9:
        res.cusparse_status = "skipped (%.0f GMAC)" % (macs / 1e9)
        return
    if session.past_deadline():
        res.cusparse_status = "skipped (deadline)"
        return
    r = run_cmd([session.cusparse, a, b], timeout=session.timeout(args.anchor_timeout), scratch=args.data)
    status, spgemm = None, None
    j = last_json(r.stdout)
    if j is not None:
        status, spgemm = j.get("status"), j.get("spgemm_seconds")
        if status != "ok":
            status = "failed: %s" % (str(status) + (" " + j["what"] if "what" in j else ""))
    if status is None:
        status = "failed (%s)" % ("timeout %ds" % args.anchor_timeout if r.timed_out else "exit %d" % r.rc)
    elif r.rc != 0 and status == "ok":
        status = "failed (exit %d)" % r.rc
    res.cusparse_status = status
    res.cusparse_spgemm_s = spgemm if status == "ok" else None
    res.cusparse_wall_s = r.wall
    progress("%s: cuSPARSE anchor: %s%s, process wall %.2fs" %
             (case.name, status, ", SpGEMM %.4fs" % spgemm if status == "ok" else "", r.wall))
