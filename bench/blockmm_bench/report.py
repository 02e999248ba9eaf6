"""bench/run's section of bench/RESULTS.md: the tables of one machine's results."""
import os
import re

from blockmm_bench.records import case_order, fmt, label, num


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def short(v, digits=3):
    return fmt(v, digits) if isinstance(v, float) else ("" if v is None else str(v))


def section_text(machine, info, rows, plots, notes):
    d = info
    gpu = "; ".join(d.get("gpu") or []) or "none"
    lines = ["## %s" % machine, ""]
    lines.append("- Machine: %s, %s cores (%s usable), %s GiB memory; GPU: %s; Linux %s; %s." %
                 (d.get("cpu"), d.get("cores"), d.get("cores_usable"), d.get("memory_gib"), gpu, d.get("kernel"),
                  d.get("mpi")))
    lines.append("- Run: %s, commit `%s`, %s, build `%s`; load average %s at the start, %s at the end." %
                 (d.get("date"), d.get("commit"), d.get("blockmm"), d.get("build"), d.get("load_start", "?"),
                  d.get("load_end", "?")))
    lines.append("- Command: `%s`" % d.get("command", ""))
    lines.append("- Backends: %s; data in `%s`." % (d.get("backends_note", ""), d.get("data", "")))
    if notes:
        lines.append("")
        lines += ["- **%s**" % n for n in notes]
    ok = [r for r in rows if num(r, "wall_s") is not None]
    lines += ["", "### End to end (medians)", ""]
    t = []
    for r in rows:
        t.append([r["case"], r["n"], r["m"], r["k_a"] if r["k_a"] == r["k_b"] else "%s / %s" % (r["k_a"], r["k_b"]),
                  r["density"], label(r), r["status"], r["identical"], r["repeats"], r["wall_s"], r["total_s"],
                  r["numeric_s"], r["gmacs_numeric"], r["gmacs_e2e"], r["rss_mb"],
                  fmt((num(r, "output_bytes") or 0) / 1e6, 1) if r["output_bytes"] else "", r["floor_s"],
                  r["wall_over_floor"]])
    lines.append(md_table(["case", "n", "m", "k", "density", "backend x ranks", "status", "identical", "runs",
                           "wall s", "total s", "numeric s", "GMAC/s numeric", "GMAC/s e2e", "peak RSS MB",
                           "output MB", "floor s", "wall / floor"], t))
    lines += ["", "### Phases (medians, seconds, slowest rank)", ""]
    t = []
    for r in ok:
        t.append([r["case"], label(r), r["threads_per_rank"]] +
                 [r[p + "_s"] for p in ["read", "exchange", "build", "setup", "symbolic", "numeric",
                                        "numeric_compute", "write", "commit", "total"]] +
                 [r["launch_s"], r["wall_s"], r["imbalance"] if r["ranks"] != "1" else ""])
    lines.append(md_table(["case", "config", "threads/rank", "read", "exchange", "build", "setup", "symbolic",
                           "numeric", "(compute)", "(write)", "commit", "total", "launch", "wall", "imbalance"], t))
    lines += ["", "### I/O floor and anchors", ""]
    t = []
    for case in case_order(rows):
        rs = [r for r in rows if r["case"] == case]
        r0 = rs[0]
        good = [r for r in rs if num(r, "wall_s") is not None]
        best = min(good, key=lambda r: num(r, "wall_s")) if good else None
        # End to end means whole processes: the anchor's wall time against blockmm's best wall time.
        scipy_wall, best_wall = num(r0, "scipy_wall_s"), num(best, "wall_s") if best else None
        speedup = "%.1f×" % (scipy_wall / best_wall) if scipy_wall and best_wall else ""
        t.append([case, r0["floor_read_s"], r0["floor_write_s"], r0["floor_s"],
                  "%s (%s)" % (best["wall_s"], label(best)) if best else "",
                  best["wall_over_floor"] if best else "",
                  r0["scipy_wall_s"], r0["scipy_s"], r0["scipy_multiply_s"], speedup, r0["scipy_check"],
                  r0["cusparse_status"], r0["cusparse_spgemm_s"], r0.get("dbcsr_multiply_s", ""),
                  r0.get("dbcsr_check", "")])
    lines.append(md_table(["case", "read inputs s", "write+fsync output s", "floor s", "best wall s",
                           "best / floor", "scipy BSR wall s", "scipy in-script s", "scipy multiply s",
                           "blockmm speed-up (wall)", "scipy vs blockmm", "cuSPARSE", "cuSPARSE SpGEMM s",
                           "DBCSR multiply s (1 rank)", "DBCSR vs blockmm"], t))
    if plots:
        lines += ["", "### Plots", ""]
        titles = {"phases.png": "Phase breakdown", "floor.png": "End to end against the I/O floor",
                  "gmacs_density.png": "Useful GMAC/s against density", "speedup_ranks.png": "Speed-up against ranks"}
        for p in plots:
            lines.append("![%s](results/%s/%s)" % (titles.get(p, p), machine, p))
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


PAGE_HEAD = """# blockmm benchmark results

Written by `bench/run` (see `bench/README.md` for how to run it and what every column means).
Each machine has its own section, replaced only by a run on that machine (`--machine NAME`); the
data behind each section is in `bench/results/<machine>/` (`results.csv`, `runs.csv`,
`machine.json`, plots). Times are medians of the repeated runs; `wall` is the whole process as
started (mpirun included), `total` is blockmm's own clock (slowest rank). The I/O floor is reading
both inputs from the page cache plus writing and fsyncing a file of the output's size.
"""


def update_page(page_path, machine, section):
    begin, end = "<!-- BEGIN machine: %s -->" % machine, "<!-- END machine: %s -->" % machine
    block = "%s\n%s%s" % (begin, section, end)
    text = open(page_path).read() if os.path.exists(page_path) else PAGE_HEAD
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    tmp = page_path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, page_path)
