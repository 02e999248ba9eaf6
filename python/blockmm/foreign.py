"""Matrices from elsewhere to blockmm and back, the package's API: Matrix Market (.mtx,
matrix_market.py) and scipy's .npz (npz_format.py), read with every check blockmm needs
(square, integral values in range, indices inside the matrix before anything is narrowed, n a
multiple of the block size) and written a pass at a time through the output's own descriptor.
"""
import sys

import numpy as np
import scipy.sparse as sp

from . import matrix_market, npz_format
from .atomic_output import write_atomically
from .blocks import WIDTHS, blocks_from_bsr, blocks_from_entries, to_bsr_matrix, values_name
from .errors import FormatError  # noqa: F401
from .input_file import MATRIX_MARKET_SIGNATURE, ZIP_SIGNATURE, kind_of  # noqa: F401


def _coo(shape, rows, cols, values):
    return sp.coo_matrix((values, (rows, cols)), shape=shape)


def read_matrix_market(path, high=65535):
    """A coordinate Matrix Market file -> scipy COO matrix of int64, every entry checked."""
    return _coo(*matrix_market.read_matrix_market(path, high))


def read_npz(path, high=65535):
    """A scipy.sparse .npz (csr, csc, coo, bsr, dia) -> COO matrix of int64, every entry checked."""
    return _coo(*npz_format.read_npz(path, high))


def to_bsr(coo, block_size, pad=False, path="matrix", values="u16", warn=None):
    """A COO matrix -> square bsr_matrix of m x m blocks for blockmm. The matrix must be square
    with n a multiple of m; with pad=True it is padded with zero rows and columns to the next
    multiple of m (and to square), which is said on `warn` (default: stderr). Repeated entries
    are summed; the sum must still fit."""
    m = int(block_size)
    if m <= 0:
        raise ValueError(f"--block-size {m} must be positive")
    coo = sp.coo_matrix(coo)
    data = np.asarray(coo.data)
    data = np.ones(data.shape, dtype=np.int64) if data.dtype.kind == "b" else data
    high = int(np.iinfo(WIDTHS[values]).max)
    with np.errstate(invalid="ignore"):
        bad = ~((data >= 0) & (data <= high) & (data == np.floor(data)))
    if bad.any():
        raise FormatError(f"{path}: value {data[bad][0]} is not an integer in [0, {high}]")
    stream = warn or sys.stderr
    blocks = blocks_from_entries(path, coo.shape, coo.row, coo.col, data, m, pad, values,
                                 warn=lambda line: print(f"blockmm-import: {line}", file=stream))
    return to_bsr_matrix(blocks)


def write_matrix_market(path, bsr, comment=""):
    """A bsr_matrix -> coordinate integer general Matrix Market file (non-zero entries only)."""
    blocks = blocks_from_bsr(bsr, values_name(bsr.dtype) if bsr.dtype.kind == "u" else "u32")

    def write(output):
        with output.handle() as handle:
            matrix_market.write_matrix_market(handle, blocks, comment=comment)

    write_atomically(path, write)


def write_npz(path, bsr, sparse_format="csr", compressed=False):
    """A bsr_matrix -> scipy .npz of the given format (csr, csc, coo or bsr; zeros left out)."""
    blocks = blocks_from_bsr(bsr, values_name(bsr.dtype) if bsr.dtype.kind == "u" else "u32")

    def write(output):
        with output.handle() as handle:
            npz_format.write_npz(handle, blocks, sparse_format, compress=compressed)

    write_atomically(path, write)


__all__ = ["FormatError", "read_matrix_market", "read_npz", "to_bsr", "write_matrix_market", "write_npz",
           "kind_of", "MATRIX_MARKET_SIGNATURE", "ZIP_SIGNATURE"]
