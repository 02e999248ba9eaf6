#!/usr/bin/env python3
"""The benchmark suite of blockmm (started through bench/run; bench/README.md describes it).

For each case of bench/cases.sh it generates the inputs once, runs every available backend at
every rank count (--stats=json, medians of --repeat runs, process wall time and peak RSS), checks
that every output is byte-identical to the first one, measures the I/O floor (read both inputs
from the page cache; write and fsync a file of the output's size) and runs the anchors the
machine has (scipy BSR end to end, DBCSR, cuSPARSE SpGEMM). It writes bench/results/<machine>/
results.csv (one row per case x backend x ranks), runs.csv (one row per run), machine.json and
PNG plots, and replaces this machine's section of bench/RESULTS.md.

Exit status: 0 all good; 1 an output differed (from the first output of its case, or from an
anchor's product); 3 a blockmm run failed or timed out; 2 usage error, nothing to run or an
unreadable results.csv. Standard library only; matplotlib (Agg) for the plots, skipped with a
warning when missing. The work is done by the blockmm_bench package beside this file (its
__init__ lists the modules).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the blockmm_bench package
from blockmm_bench.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
