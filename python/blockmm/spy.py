"""A picture of a matrix's block pattern (blockmm-spy): the block grid is cut into at most
`cells` x `cells` cells of equal numbers of block-rows and block-columns, and each cell is
shaded by how many non-zero blocks it holds, on a log scale (one colour where no cell holds
more than one); empty cells stay white. Axes are in block indices; the title gives n, m and
nnzb. Drawn by matplotlib (Agg, no display needed).
"""
import numpy as np


def grid_of(p, cells):
    """(block-rows a cell side holds, cells a side) for p block-rows in at most `cells` cells."""
    side = max(1, -(-p // cells))
    return side, -(-p // side)


def block_counts(matrix, cells):
    """(counts[cells_r, cells_c], blocks per cell side) of a matrix's non-zero blocks: a square
    bsr_matrix, or a block source (blocks.py), read a piece at a time (memory by the cells)."""
    import scipy.sparse as sp

    n = matrix.shape[0] if sp.issparse(matrix) else matrix.n
    m = matrix.blocksize[0] if sp.issparse(matrix) else matrix.m
    side, grid = grid_of(n // m, cells)
    counts = np.zeros(grid * grid, dtype=np.int64)
    if sp.issparse(matrix):
        rows = np.repeat(np.arange(n // m, dtype=np.int64), np.diff(matrix.indptr))
        pieces = [(rows, matrix.indices.astype(np.int64), matrix.data)]
    else:
        pieces = matrix.pieces()
    for rows, cols, values in pieces:
        nonzero = values.reshape(len(rows), m * m).any(axis=1)
        cells_hit = (rows[nonzero] // side) * grid + cols[nonzero] // side
        counts += np.bincount(cells_hit, minlength=grid * grid)
    return counts.reshape(grid, grid), side


class Picture:
    """Where cells landed in the PNG, for tests and callers: pixel (x, y) from the top-left."""

    def __init__(self, width, height, centres, counts, side):
        self.width, self.height = width, height
        self.counts, self.side = counts, side
        self._centres = centres

    def pixel_of(self, cell_row, cell_col):
        return self._centres(cell_row, cell_col)


AXES_BOX = (0.15, 0.1, 0.65, 0.78)  # left, bottom, width, height of the picture in the figure


def draw(matrix, target, cells=512, title_name="", dpi=100, counted=None):
    """Writes the PNG `target` (a path or a file object) of a bsr_matrix or a block source and
    returns a Picture. The figure is at least 700 x 600 pixels and large enough that every cell
    covers at least one pixel. `counted`: block_counts(matrix, cells), when already made."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.colors as colors
    import matplotlib.pyplot as plt

    import scipy.sparse as sp

    counts, side = counted or block_counts(matrix, cells)
    n = matrix.shape[0] if sp.issparse(matrix) else matrix.n
    m = matrix.blocksize[0] if sp.issparse(matrix) else matrix.m
    p = n // m
    nnzb = int(counts.sum())
    grid = counts.shape[0]
    shown = np.ma.masked_equal(counts, 0)
    top = int(counts.max())
    if top <= 1:
        # No cell holds more than one block (one block a cell, or a sparse pattern): nothing to
        # grade, so every non-empty cell is the full colour. A log scale from 1 to 2 drew them
        # all in its palest shade, the picture washed out (issue 53).
        cmap = colors.ListedColormap(["#08306b"])
        norm = colors.BoundaryNorm([0.5, 1.5], 1)
        ticks = [1]
    else:
        # Light blue (one block) to dark navy (the fullest cell): every non-empty cell stands out from white.
        cmap = colors.LinearSegmentedColormap.from_list("blockmm-blocks", ["#9ecae1", "#2171b5", "#08306b"])
        norm = colors.LogNorm(vmin=1, vmax=top)
        ticks = sorted({int(round(t)) for t in np.geomspace(1, top, 6)})
    cmap.set_bad("white")
    width = max(700, int(np.ceil(grid / AXES_BOX[2])) + 2)
    height = max(600, int(np.ceil(grid / AXES_BOX[3])) + 2)
    figure = plt.figure(figsize=(width / dpi, height / dpi), dpi=dpi)
    try:
        axes = figure.add_axes(AXES_BOX)
        extent = (0, grid * side, grid * side, 0)  # block indices, row 0 at the top
        image = axes.imshow(shown, cmap=cmap, norm=norm,
                            interpolation="nearest", extent=extent, aspect="equal")
        axes.set_xlim(0, p)
        axes.set_ylim(p, 0)
        axes.ticklabel_format(style="plain", useOffset=False)  # block indices as they are, not "x 1e6"
        axes.set_xlabel("block-column")
        axes.set_ylabel("block-row")
        per_cell = "1 block" if side == 1 else f"{side} x {side} blocks"
        name = f"{title_name}\n" if title_name else ""
        axes.set_title(f"{name}n = {n}, m = {m}, nnzb = {nnzb} (a cell: {per_cell})", fontsize=10)
        bar_axes = figure.add_axes([0.84, 0.1, 0.03, 0.78])
        bar = figure.colorbar(image, cax=bar_axes,
                              label="non-zero blocks in the cell" + (" (log scale)" if top > 1 else ""))
        bar.minorticks_off()
        bar.set_ticks(ticks)
        bar.set_ticklabels([str(t) for t in ticks])
        figure.savefig(target, format="png", dpi=dpi)  # a file object: the output's own descriptor
        width, height = figure.canvas.get_width_height()
        transform = axes.transData

        def centre(cell_row, cell_col):
            x, y = transform.transform(((cell_col + 0.5) * side, (cell_row + 0.5) * side))
            return int(round(x)), int(round(height - y))

        return Picture(width, height, centre, counts, side)
    finally:
        plt.close(figure)
