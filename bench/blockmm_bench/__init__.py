"""bench/run's parts: runner (subprocesses), cases (bench/cases.sh as data), records (the CSV
columns and helpers to read them back), plots, report (the RESULTS.md section). The runs, the
measurements and the anchors (class Bench) are still in bench/run.py."""
