"""bench/run's section of bench/RESULTS.md: one machine's results (typed ResultRows and
machine.json) as markdown tables, and the page update that replaces only that section."""
import os
import re

from blockmm_bench.records import case_order, fmt, label

E2E_HEADER = ["case", "n", "m", "k", "density", "backend x ranks", "status", "identical", "runs", "wall s", "total s",
              "numeric s", "GMAC/s numeric", "GMAC/s e2e", "peak RSS MB", "output MB", "floor s", "wall / floor",
              "write GB/s", "write / one-file floor", "write / files floor"]
PHASES_HEADER = ["case", "config", "threads/rank", "read", "exchange", "build", "setup", "symbolic", "numeric",
                 "(compute)", "(write)", "commit", "total", "launch", "wall", "imbalance"]
ANCHORS_HEADER = ["case", "read inputs s", "write+fsync output s", "floor s", "one-file floor s", "files floor s",
                  "best wall s", "best / floor",
                  "scipy BSR wall s", "scipy in-script s", "scipy multiply s", "blockmm speed-up (wall)",
                  "scipy vs blockmm", "cuSPARSE", "cuSPARSE SpGEMM s", "DBCSR multiply s (1 rank)", "DBCSR vs blockmm"]


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def e2e_cells(r):
    """One row of the end-to-end table: a configuration's medians, work and floor."""
    k = r.text("k_a") if r.k_a == r.k_b else "%s / %s" % (r.text("k_a"), r.text("k_b"))
    return ([r.case, r.text("n"), r.text("m"), k, r.text("density"), label(r)] +
            [r.text(c) for c in ("status", "identical", "repeats", "wall_s", "total_s", "numeric_s", "gmacs_numeric",
                                 "gmacs_e2e", "rss_mb")] +
            [fmt(r.output_bytes / 1e6, 1) if r.output_bytes is not None else "", r.text("floor_s"),
             r.text("wall_over_floor"),
             fmt(r.output_bytes / r.write_s / 1e9, 2) if r.output_bytes and r.write_s else "",
             r.text("write_over_one_file"), r.text("write_over_files")])


def phase_cells(r):
    """One row of the phases table (measured configurations only)."""
    return ([r.case, label(r), r.text("threads_per_rank")] +
            [r.text(p + "_s") for p in ["read", "exchange", "build", "setup", "symbolic", "numeric",
                                         "numeric_compute", "write", "commit", "total"]] +
            [r.text("launch_s"), r.text("wall_s"), r.text("imbalance") if r.ranks != 1 else ""])


def anchor_cells(rs):
    """One row of the floor and anchors table: a case's rows (they share the floor and anchors)."""
    r0 = rs[0]
    good = [r for r in rs if r.measured]
    best = min(good, key=lambda r: r.wall_s) if good else None
    # End to end means whole processes: the anchor's wall time against blockmm's best wall time.
    speedup = "%.1f×" % (r0.scipy_wall_s / best.wall_s) if r0.scipy_wall_s and best and best.wall_s else ""
    return ([r0.case, r0.text("floor_read_s"), r0.text("floor_write_s"), r0.text("floor_s"),
             r0.text("floor_one_file_s"), r0.text("floor_files_s"),
             "%s (%s)" % (best.text("wall_s"), label(best)) if best else "",
             best.text("wall_over_floor") if best else ""] +
            [r0.text(c) for c in ("scipy_wall_s", "scipy_s", "scipy_multiply_s")] + [speedup] +
            [r0.text(c) for c in ("scipy_check", "cusparse_status", "cusparse_spgemm_s", "dbcsr_multiply_s",
                                  "dbcsr_check")])


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
    lines += ["", "### End to end (medians)", ""]
    lines.append(md_table(E2E_HEADER, [e2e_cells(r) for r in rows]))
    lines += ["", "### Phases (medians, seconds, slowest rank)", ""]
    lines.append(md_table(PHASES_HEADER, [phase_cells(r) for r in rows if r.measured]))
    lines += ["", "### I/O floor and anchors", ""]
    lines.append(md_table(ANCHORS_HEADER, [anchor_cells([r for r in rows if r.case == case])
                                           for case in case_order(rows)]))
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
both inputs from the page cache plus writing and fsyncing a file of the output's size. The write
floors are the output's bytes written into its folder by several threads, into one file and as
separate files (bench/write_floor); `write / ... floor` is the write phase's rate over theirs.
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
