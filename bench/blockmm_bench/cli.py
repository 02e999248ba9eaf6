"""bench/run's main: picks the backends, cases and anchors, measures each case (measure.py),
keeps the rows of earlier runs of other cases, writes results.csv, runs.csv and machine.json,
the plots and this machine's section of RESULTS.md, prints the headline and decides the exit
status (0 all good; 1 an output differed; 3 a blockmm run failed or timed out; 2 usage, nothing
to run or an unreadable results.csv; 130 interrupted)."""
import json
import os
import shlex
import sys

from blockmm_bench.cases import Case, load_cases, select_cases
from blockmm_bench.inputs import ensure_inputs
from blockmm_bench.machine import default_machine_name, gpu_query, loadavg, machine_info
from blockmm_bench.measure import CaseRun
from blockmm_bench.options import find_build, find_scipy_python, parse_args
from blockmm_bench.plots import make_plots
from blockmm_bench.records import RecordError, ResultRow, RunRow, case_order, label, read_rows, write_rows
from blockmm_bench.report import section_text, update_page
from blockmm_bench.runner import ROOT, Progress, quiet, rm, run_cmd
from blockmm_bench.session import Session


def detect_cuda(session, have_gpu):
    """Whether the cuda backend works here: a GPU and a tiny blockmm --backend cuda run."""
    if not have_gpu:
        return False, "no GPU (nvidia-smi -L)"
    args = session.args
    case = Case("tiny", 256, 4, 600, "small")
    a, b = ensure_inputs(case, args.data, args.build, session.progress, args.gen_threads)
    out = os.path.join(args.data, "tiny.C.bin")
    r = run_cmd([os.path.join(args.build, "blockmm"), "--backend", "cuda", "-q", "--stats=off", a, b, out],
                timeout=180, env=session.env, scratch=args.data)
    rm(out)
    if r.rc != 0:
        return False, "blockmm --backend cuda failed (exit %d): %s" % (r.rc, r.tail(2))
    return True, "ok"


def results_dir(args):
    return os.path.join(args.results, args.machine)


def write_report(args, progress, rows=None, info=None):
    """Plots and this machine's section of the page, from these rows and machine info (default:
    results.csv and machine.json, as --report-only)."""
    outdir = results_dir(args)
    os.makedirs(outdir, exist_ok=True)
    if rows is None:
        rows = read_rows(os.path.join(outdir, "results.csv"), ResultRow)
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
    update_page(args.page, args.machine, section_text(args.machine, info, rows, plots, info.get("notes", [])))
    progress("wrote %s, plots %s and the %s section of %s" %
             (os.path.relpath(os.path.join(outdir, "results.csv"), ROOT), ", ".join(plots), args.machine,
              os.path.relpath(args.page, ROOT) if args.page.startswith(ROOT) else args.page))


def archive(args, progress):
    if not args.archive:
        return
    members = [os.path.relpath(args.page, ROOT), os.path.relpath(results_dir(args), ROOT)]
    members = [m for m in members if os.path.exists(os.path.join(ROOT, m))]
    rc, out = quiet(["tar", "czf", os.path.abspath(args.archive), "-C", ROOT] + members, timeout=120)
    progress("archive %s: %s" % (args.archive, "written" if rc == 0 else "FAILED: " + out))


def main(argv):
    try:
        return run(argv)
    except RecordError as e:  # an earlier results.csv this version cannot read
        print("bench/run: %s" % e, file=sys.stderr)
        return 2


def run(argv):
    args = parse_args(argv)
    progress = Progress(args.log)
    have_gpu, gpu_lines = gpu_query()
    args.machine = args.machine or default_machine_name(gpu_lines)
    args.results = os.path.abspath(args.results)
    args.page = os.path.abspath(args.page)
    if args.report_only:
        write_report(args, progress)
        archive(args, progress)
        return 0

    build = find_build(args)
    if not build or not os.path.isfile(os.path.join(build, "blockmm")):
        print("bench/run: no build with blockmm found (give --build DIR)", file=sys.stderr)
        return 2
    args.build = build
    args.data = os.path.abspath(args.data)
    os.makedirs(args.data, exist_ok=True)
    # Earlier rows first: an unreadable results.csv stops the run before anything is measured.
    outdir = results_dir(args)
    csv_path = os.path.join(outdir, "results.csv")
    runs_path = os.path.join(outdir, "runs.csv")
    old_rows = [] if args.fresh else read_rows(csv_path, ResultRow)
    old_run_rows = [] if args.fresh else read_rows(runs_path, RunRow)

    session = Session(args, progress)
    info = session.info = machine_info(build, gpu_lines, args)
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

    cuda_ok, cuda_why = detect_cuda(session, have_gpu)
    progress("cuda backend: %s" % ("available" if cuda_ok else "not available (%s)" % cuda_why))
    if args.backends == "auto-detect":
        backends = (["cuda"] if cuda_ok else []) + ["cpu"]
    else:
        backends = [b.strip() for b in args.backends.split(",") if b.strip()]
        # a faster backend first gives the work count that the cpu limit uses
        backends.sort(key=lambda b: 0 if b.startswith("cuda") else 1)
    if args.cpu_limit_gmac is None:
        args.cpu_limit_gmac = 150.0 if (cuda_ok and any(b.startswith("cuda") for b in backends)) else 0.0
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
    session.scipy_python = find_scipy_python() if args.scipy == "auto" else None
    session.numpy_python = session.scipy_python or find_scipy_python()  # bench/real_shapes.py's
    cus = os.path.join(build, "cusparse_anchor")
    session.cusparse = cus if (args.cusparse == "auto" and cuda_ok and os.access(cus, os.X_OK)) else None
    dbc = os.path.join(build, "dbcsr_anchor")
    session.dbcsr = dbc if (args.dbcsr == "auto" and os.access(dbc, os.X_OK)) else None
    progress("anchors: DBCSR %s" % (session.dbcsr or "not available (BLOCKMM_BENCH_DEPS=1 scripts/install-deps)"))
    progress("anchors: scipy %s; cuSPARSE %s" % (session.scipy_python or "not available",
                                                 session.cusparse or "not available (needs a GPU and a CUDA build)"))

    def skip_reason(backend, ranks):
        if backend.startswith("cuda") and not cuda_ok:
            return "skipped: cuda not available (%s)" % cuda_why
        if ranks > 1 and not session.mpirun:
            return "skipped: no mpirun"
        return None

    configs = [(b, r) for b in backends for r in args.rank_list]
    os.makedirs(outdir, exist_ok=True)
    rows, done, not_run = [], set(), []
    interrupted = False

    def save():  # this run's rows replace the earlier rows of the same cases; others are kept
        old = [r for r in old_rows if r.case not in done]
        write_rows(csv_path, old + rows, ResultRow)
        write_rows(runs_path, [r for r in old_run_rows if r.case not in done] + session.run_rows, RunRow)
        return old

    try:
        for case in cases:
            if session.past_deadline():
                progress("%s: skipped (deadline)" % case.name)
                not_run.append(case.name)
                continue
            try:
                rows += CaseRun(session, case).run(configs, skip_reason)
                done.add(case.name)
            except RuntimeError as e:
                session.failure("%s: %s" % (case.name, e))
            save()
    except KeyboardInterrupt:
        interrupted = True
        progress("interrupted: writing what was measured")
    notes = ["MISMATCH: " + m for m in session.mismatches] + ["FAILED: " + f for f in session.failures]
    if not_run:
        notes.append("Not run (deadline): %s%s." % (", ".join(not_run), "; rows of an earlier run are kept"
                                                    if any(r.case in not_run for r in old_rows) else ""))
    if interrupted:
        notes.append("The run was interrupted; some cases are missing.")
    info["notes"] = notes
    info["load_end"] = loadavg()
    info["cases_run"] = [c.name for c in cases]
    with open(os.path.join(outdir, "machine.json"), "w") as f:
        json.dump(info, f, indent=2)
    all_rows = save() + rows
    order = {}
    for c in sets["small"] + sets["full"]:
        order.setdefault(c.name, len(order))
    all_rows.sort(key=lambda r: (order.get(r.case, 99), r.backend != "cpu", r.ranks))
    write_rows(csv_path, all_rows, ResultRow)
    # The rows hold their values as stored, so this section is the one --report-only redraws.
    write_report(args, progress, all_rows, info)
    archive(args, progress)
    headline(progress, rows)
    return exit_status(session, progress, interrupted)


def headline(progress, rows):
    for case in case_order(rows):
        r = next(r for r in rows if r.case == case)
        progress("  %-4s I/O floor %ss (read %s + write %s); write floors %ss one file (%s GB/s), %ss separate files "
                 "(%s GB/s); scipy %s; cuSPARSE %s" %
                 (case, r.text("floor_s") or "-", r.text("floor_read_s") or "-", r.text("floor_write_s") or "-",
                  r.text("floor_one_file_s") or "-", rate(r.output_bytes, r.floor_one_file_s),
                  r.text("floor_files_s") or "-", rate(r.output_bytes, r.floor_files_s),
                  ("%ss end to end, %s" % (r.text("scipy_s"), r.scipy_check)) if r.scipy_s is not None else
                  (r.scipy_check or "-"),
                  ("%s, SpGEMM %ss" % (r.cusparse_status, r.text("cusparse_spgemm_s")))
                  if r.cusparse_spgemm_s is not None else (r.cusparse_status or "-")))
    for r in rows:
        if r.measured:
            progress("  %-4s %-8s wall %8ss  total %8ss  numeric %8ss  %8s GMAC/s numeric  floor %6ss  "
                     "wall/floor %s  write %ss (%s GB/s) = %s of the one-file floor, %s of the files floor  "
                     "identical: %s" %
                     (r.case, label(r), r.text("wall_s"), r.text("total_s"), r.text("numeric_s"),
                      r.text("gmacs_numeric"), r.text("floor_s"), r.text("wall_over_floor") or "-",
                      r.text("write_s") or "-", rate(r.output_bytes, r.write_s),
                      r.text("write_over_one_file") or "-", r.text("write_over_files") or "-", r.identical))
        else:
            progress("  %-4s %-8s %s" % (r.case, label(r), r.status))


def rate(output_bytes, seconds):
    """GB/s of `output_bytes` written in `seconds`, as text ("-" where either is missing)."""
    return "%.2f" % (output_bytes / seconds / 1e9) if output_bytes and seconds else "-"


def exit_status(session, progress, interrupted):
    if session.mismatches:
        for m in session.mismatches:
            progress.loud("MISMATCH: " + m)
        return 1
    if session.failures:
        for m in session.failures:
            progress.loud("FAILED: " + m)
        return 3
    if interrupted:
        return 130
    progress("done: every output identical to the first of its case")
    return 0
