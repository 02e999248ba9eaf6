"""bench/run's plots (matplotlib, Agg backend; skipped when matplotlib is missing)."""
import os

from blockmm_bench.records import STACKED, case_order, label


BACKEND_COLORS = {"cpu": "#1f77b4", "cuda": "#2ca02c", "auto": "#9467bd", "reference": "#8c564b"}
PHASE_COLORS = {"read": "#4c72b0", "exchange": "#8172b2", "build": "#dd8452", "setup": "#937860",
                "symbolic": "#da8bc3", "numeric": "#55a868", "commit": "#c44e52", "launch": "#bbbbbb"}


def make_plots(rows, outdir, machine, progress):
    """Draws the four PNGs of these ResultRows into outdir; returns their names."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        progress("matplotlib missing: no plots")
        return []
    ok = [r for r in rows if r.measured]
    made = []
    if not ok:
        return made
    cases = case_order(ok)
    dpi = 80

    def save(fig, name):
        path = os.path.join(outdir, name)
        fig.savefig(path, dpi=dpi)
        plt.close(fig)
        made.append(name)

    # 1. phase breakdown per case (stacked bars, one panel per case, own scale)
    ncol = min(4, len(cases))
    nrow = (len(cases) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(max(8.0, 3.2 * ncol + 0.5), 2.9 * nrow + 1.1), squeeze=False)
    for ax, case in zip(axes.flat, cases):
        rs = [r for r in ok if r.case == case]
        xs = range(len(rs))
        bottom = [0.0] * len(rs)
        for p in STACKED + ["launch"]:
            vals = [r.phase(p) or 0.0 for r in rs]
            ax.bar(xs, vals, bottom=bottom, color=PHASE_COLORS[p], width=0.7, label=p)
            bottom = [x + y for x, y in zip(bottom, vals)]
        fl = rs[0].floor_s
        if fl:
            ax.axhline(fl, color="black", lw=1, ls="--", label="I/O floor")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([label(r) for r in rs], fontsize=8)
        ax.set_title("%s (out %.0f MB)" % (case, (rs[0].output_bytes or 0) / 1e6), fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
        ax.set_ylabel("seconds", fontsize=8)
    for ax in list(axes.flat)[len(cases):]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    fig.legend(uniq.values(), [l if l != "launch" else "launch/other (wall - total)" for l in uniq],
               loc="lower center", ncol=min(5, len(uniq)), fontsize=8, frameon=False)
    fig.suptitle("%s: phase medians (slowest rank), stacked; dashed: I/O floor" % machine, fontsize=10)
    fig.tight_layout(rect=(0, 0.6 / (2.9 * nrow + 1.1), 1, 1 - 0.35 / (2.9 * nrow + 1.1)))
    save(fig, "phases.png")

    # 2. end-to-end wall time against the I/O floor (log scale)
    configs = []
    for r in ok:
        if label(r) not in configs:
            configs.append(label(r))
    width = 0.8 / max(1, len(configs))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(cases) + 2), 4.2))
    for ci, cfg in enumerate(configs):
        xs, ys = [], []
        for xi, case in enumerate(cases):
            r = next((r for r in ok if r.case == case and label(r) == cfg), None)
            if r:
                xs.append(xi - 0.4 + width * (ci + 0.5))
                ys.append(r.wall_s)
        backend = cfg.split()[0]
        alpha = 1.0 if cfg.endswith("x1") else 0.6
        ax.bar(xs, ys, width=width * 0.95, color=BACKEND_COLORS.get(backend, "#7f7f7f"), alpha=alpha, label=cfg,
               edgecolor="black", lw=0.3)
    for xi, case in enumerate(cases):
        r0 = next(r for r in ok if r.case == case)
        fl = r0.floor_s
        if fl:
            ax.hlines(fl, xi - 0.45, xi + 0.45, colors="black", lw=2, label="I/O floor" if xi == 0 else None)
            ax.hlines(1.25 * fl, xi - 0.45, xi + 0.45, colors="black", lw=1, linestyles=":",
                      label="1.25 x floor" if xi == 0 else None)
        sc = r0.scipy_s
        if sc:
            ax.plot([xi + 0.42], [sc], marker="*", color="#ff7f0e", ms=9, ls="none",
                    label="scipy BSR (1 core)" if not any(l == "scipy BSR (1 core)"
                                                            for l in ax.get_legend_handles_labels()[1]) else None)
    ax.set_yscale("log")
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels(cases)
    ax.set_ylabel("end-to-end wall seconds (median)")
    ax.set_title("%s: end-to-end wall time against the I/O floor\n(floor: read inputs from the page cache + write "
                 "and fsync the output's bytes)" % machine, fontsize=9)
    ax.legend(fontsize=8, ncol=2)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    save(fig, "floor.png")

    # 3. useful GMAC/s against density
    fig, ax = plt.subplots(figsize=(7, 4.6))
    markers = {1: "o", 2: "s", 3: "^", 4: "D"}
    for cfg in configs:
        rs = [r for r in ok if label(r) == cfg and r.gmacs_numeric]
        if not rs:
            continue
        backend, ranks = rs[0].backend, rs[0].ranks
        color = BACKEND_COLORS.get(backend, "#7f7f7f")
        mk = markers.get(ranks, "v")
        ax.scatter([r.density for r in rs], [r.gmacs_numeric for r in rs], color=color, marker=mk,
                   label=cfg + " numeric", zorder=3)
        ax.scatter([r.density for r in rs], [r.gmacs_e2e for r in rs], facecolors="none",
                   edgecolors=color, marker=mk, label=cfg + " end to end", zorder=3)
    for case in cases:
        r = max((r for r in ok if r.case == case), key=lambda r: r.gmacs_numeric or 0)
        if r.gmacs_numeric:
            ax.annotate(case, (r.density, r.gmacs_numeric), textcoords="offset points",
                        xytext=(5, 4), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("density k / (n/m)^2 (of A)")
    ax.set_ylabel("useful GMAC/s")
    ax.set_title("%s: useful multiply-adds per second; filled: numeric phase, hollow: end to end" % machine,
                 fontsize=9)
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    save(fig, "gmacs_density.png")

    # 4. speed-up against ranks (per backend; wall solid, numeric phase dashed)
    backends = sorted({r.backend for r in ok}, key=lambda b: (b.split(":")[0] != "cpu", b))
    fig, axes = plt.subplots(1, max(1, len(backends)), figsize=(4.6 * max(1, len(backends)), 3.8), squeeze=False)
    cmap = plt.get_cmap("tab10")
    for ax, backend in zip(axes.flat, backends):
        top = 1
        for ci, case in enumerate(cases):
            rs = sorted((r for r in ok if r.case == case and r.backend == backend), key=lambda r: r.ranks)
            base = next((r for r in rs if r.ranks == 1), None)
            if not base or len(rs) < 2:
                continue
            xs = [r.ranks for r in rs]
            top = max(top, max(xs))
            ax.plot(xs, [base.wall_s / r.wall_s for r in rs], marker="o", color=cmap(ci % 10),
                    label=case)
            if base.numeric_s:
                ax.plot(xs, [base.numeric_s / max(1e-9, r.numeric_s or 1e-9) for r in rs], ls="--",
                        marker=".", color=cmap(ci % 10))
        ax.plot([1, top], [1, top], color="gray", lw=0.8, ls=":", label="ideal")
        ax.set_xticks(sorted({r.ranks for r in ok if r.backend == backend}))
        ax.set_xlabel("ranks")
        ax.set_ylabel("speed-up over 1 rank")
        ax.set_title("%s: %s (solid: wall, dashed: numeric)" % (machine, backend), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save(fig, "speedup_ranks.png")
    for name in made:
        size = os.path.getsize(os.path.join(outdir, name))
        if size > 200_000:
            progress("warning: %s is %d KB (> 200 KB)" % (name, size // 1000))
    return made
