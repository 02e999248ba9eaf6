"""What bench/run measures and reports, as CSV columns, and the helpers that read them back
(medians, number formats, row labels and case order)."""
import csv
import os
import statistics


PHASES = ["read", "exchange", "build", "setup", "symbolic", "numeric", "numeric_compute", "write", "commit", "total"]
# These add up to "total" (numeric_compute and write are parts of numeric).
STACKED = ["read", "exchange", "build", "setup", "symbolic", "numeric", "commit"]

COLUMNS = (
    ["case", "n", "m", "k_a", "k_b", "density", "backend", "ranks", "threads_per_rank", "device", "status",
     "repeats", "identical"]
    + [p + "_s" for p in PHASES]
    + ["wall_s", "wall_min_s", "wall_max_s", "launch_s", "rss_mb", "imbalance", "block_products", "useful_macs",
       "c_blocks", "output_bytes", "gmacs_numeric", "gmacs_compute", "gmacs_e2e",
       "floor_read_s", "floor_write_s", "floor_s", "wall_over_floor", "total_over_floor",
       "scipy_s", "scipy_multiply_s", "scipy_wall_s", "scipy_check", "cusparse_status", "cusparse_spgemm_s",
       "cusparse_wall_s", "dbcsr_multiply_s", "dbcsr_wall_s", "dbcsr_check", "machine", "commit", "date"])
RUN_COLUMNS = (["case", "backend", "ranks", "repeat", "rc", "identical", "wall_s", "rss_mb"]
               + [p + "_s" for p in PHASES] + ["useful_macs", "output_bytes"])


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, digits=3):
    if v is None or v == "":
        return ""
    if isinstance(v, float):
        return "%.*f" % (digits, v)
    return str(v)


def sig(v, digits=4):
    return "" if v is None else "%.*g" % (digits, v)


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_csv(path, rows, columns):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in columns})
    os.replace(tmp, path)


def num(row, key):
    try:
        v = row.get(key, "")
        return float(v) if v not in ("", None) else None
    except ValueError:
        return None


def label(row):
    return "%s x%s" % (row["backend"], row["ranks"])


def case_order(rows):
    order = []
    for r in rows:
        if r["case"] not in order:
            order.append(r["case"])
    return order
