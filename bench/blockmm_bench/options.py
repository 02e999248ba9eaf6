"""bench/run's command line: its options (--help), and where the build and a python with scipy
are found."""
import argparse
import os
import shutil
import sys

from blockmm_bench.runner import ROOT, quiet

BENCH = os.path.join(ROOT, "bench")


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
    ap.add_argument("--cases", help="small | full | gpu | real | real-small | comma list of case names (default: "
                                    "full with a working cuda backend, else small); see bench/cases.sh")
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
    ap.add_argument("--format", choices=["bin", "h5"], default="bin",
                    help="blockmm's output format (default bin); h5 outputs are compared with blockmm-cmp where "
                         "they are in parts")
    ap.add_argument("--parts", help="blockmm --parts (auto | off | N; HDF5 outputs only; default: blockmm's)")
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
    if args.repeat_large is None:
        args.repeat_large = args.repeat
    if args.quick:
        args.repeat = args.repeat_large = 1
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

