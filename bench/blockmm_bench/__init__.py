"""bench/run's parts, one concern each:
cases (bench/cases.sh as data), inputs (generated matrices), machine (what ran it), options (the
command line), session (one invocation's state), runner (subprocesses), measure (a case's blockmm
runs and their medians), floor (the I/O floor), anchors (scipy, DBCSR, cuSPARSE), records (typed
result rows and their CSV form), report (the RESULTS.md section), plots, cli (main)."""
