#!/usr/bin/env bash
# bench/run end to end on the smallest case (S1, cpu backend, 1 rank, 1 repeat, no anchors):
# the runner, the CSV, the report section and (with matplotlib) the plots. Checks that the
# results page has S1's row and the CSV its measurement.   bench/check_run_report.sh BUILD_DIR
set -euo pipefail
build=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$here/run" --build "$build" --cases S1 --backends cpu --ranks 1 --repeat 1 --scipy off --cusparse off \
  --dbcsr off --data "$work/data" --results "$work/results" --page "$work/RESULTS.md" --machine smoke > "$work/log" 2>&1 ||
  { cat "$work/log"; exit 1; }
grep -q '^## smoke' "$work/RESULTS.md" || { echo "no smoke section in RESULTS.md"; cat "$work/RESULTS.md"; exit 1; }
grep -q '^| S1 ' "$work/RESULTS.md" || { echo "no S1 row in RESULTS.md"; cat "$work/RESULTS.md"; exit 1; }
python3 - "$work/results/smoke/results.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 1, rows
r = rows[0]
assert r["case"] == "S1" and r["backend"] == "cpu" and r["ranks"] == "1", r
assert float(r["numeric_s"]) > 0 and float(r["useful_macs"]) > 0, r
print("bench/run report path: S1 row ok, numeric %s s" % r["numeric_s"])
PY
