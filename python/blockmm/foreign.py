"""Matrices from elsewhere to blockmm and back: Matrix Market (.mtx, read and written by
scipy.io) and scipy's .npz (scipy.sparse.load_npz / save_npz). scipy parses the files; this
module checks what blockmm needs (square, integral values in range, n a multiple of the block
size) and names the offending line (Matrix Market, 1-based) or entry (.npz) when a check fails.
"""
import sys

import numpy as np
import scipy.io
import scipy.sparse as sp

from .files import FormatError, WIDTHS

MATRIX_MARKET_SIGNATURE = b"%%MatrixMarket"
ZIP_SIGNATURE = b"PK\x03\x04"


def kind_of(path):
    """'mtx', 'npz', 'h5' or 'bin', from the file's first bytes (never from its name)."""
    with open(path, "rb") as f:
        head = f.read(16)
    if head.lower().startswith(MATRIX_MARKET_SIGNATURE.lower()):
        return "mtx"
    if head.startswith(ZIP_SIGNATURE):
        return "npz"
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        return "h5"
    return "bin"


def _first_bad_mtx_line(path, high, rows, cols, pattern):
    """(line number, what is wrong) for the first entry line of a coordinate Matrix Market file
    that blockmm cannot take: a field missing or unreadable, an index outside the matrix, or a
    value that is not an integer in [0, high]. None when every line is fine. Lines count from 1
    and include the header, comments and blank lines. Only the error path reads the file this
    way; scipy reads it otherwise."""
    seen_size = False
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            line = raw.strip()
            if number == 1 or not line or line.startswith(b"%"):
                continue
            if not seen_size:
                seen_size = True
                continue
            fields = [field.decode("ascii", "replace") for field in line.split()]
            if len(fields) < (2 if pattern else 3):
                return number, f"{len(fields)} fields; an entry is 'row column{'' if pattern else ' value'}'"
            for name, text, limit in (("row", fields[0], rows), ("column", fields[1], cols)):
                if not text.isdigit() or not 1 <= int(text) <= limit:
                    return number, f"{name} index {text} is not in [1, {limit}]"
            if pattern:
                continue
            try:
                value = float(fields[2])
            except ValueError:
                value = None
            if value is None or not (value == value and 0 <= value <= high and value == int(value)):
                return number, f"value {fields[2]} is not an integer in [0, {high}]"
    return None


def _bad_value_mask(values, high):
    values = np.asarray(values)
    if values.dtype.kind == "b":
        return np.zeros(values.shape, dtype=bool)
    if values.dtype.kind == "c":
        return np.ones(values.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        return ~((values >= 0) & (values <= high) & (values == np.floor(values)))


def read_matrix_market(path, high=65535):
    """A coordinate Matrix Market file -> scipy COO matrix of int64, every value checked."""
    try:
        rows, cols, entries, layout, field, symmetry = scipy.io.mminfo(path)
    except Exception as error:  # scipy raises ValueError, OSError, ... for a bad header
        raise FormatError(f"{path}: not a readable Matrix Market file: {error}") from None
    if layout != "coordinate":
        raise FormatError(f"{path}: a Matrix Market '{layout}' (dense) file; blockmm-import reads the sparse "
                          f"'coordinate' layout")
    if field not in ("integer", "real", "pattern"):
        raise FormatError(f"{path}: field '{field}'; blockmm-import reads integer, real (with integral values) "
                          f"or pattern")
    if symmetry not in ("general", "symmetric"):
        raise FormatError(f"{path}: symmetry '{symmetry}'; blockmm-import reads general or symmetric "
                          f"(values must be non-negative)")
    pattern = field == "pattern"
    try:
        coo = sp.coo_matrix(scipy.io.mmread(path))
    except Exception as error:  # scipy refuses e.g. "1.5" in an integer file: find the line
        bad = _first_bad_mtx_line(path, high, rows, cols, pattern)
        if bad is not None:
            raise FormatError(f"{path}: line {bad[0]}: {bad[1]}") from None
        raise FormatError(f"{path}: not a readable Matrix Market file: {error}") from None
    bad_mask = _bad_value_mask(coo.data, high)
    if bad_mask.any():
        bad = _first_bad_mtx_line(path, high, rows, cols, pattern)
        if bad is not None:
            raise FormatError(f"{path}: line {bad[0]}: {bad[1]}")
        raise FormatError(f"{path}: value {coo.data[bad_mask][0]} is not an integer in [0, {high}]")
    return coo


def read_npz(path, high=65535):
    """A scipy.sparse .npz (csr, csc, coo, bsr, ...) -> COO matrix, every value checked."""
    try:
        matrix = sp.load_npz(path)
    except Exception as error:
        raise FormatError(f"{path}: not a scipy.sparse .npz file: {error}") from None
    coo = matrix.tocoo()
    bad = _bad_value_mask(coo.data, high)
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        raise FormatError(f"{path}: entry (row {coo.row[e]}, column {coo.col[e]}) (0-based) holds {coo.data[e]}, "
                          f"not an integer in [0, {high}]")
    return coo


def to_bsr(coo, block_size, pad=False, path="matrix", values="u16", warn=None):
    """A COO matrix -> square bsr_matrix of m x m blocks for blockmm. The matrix must be square
    with n a multiple of m; with pad=True it is padded with zero rows and columns to the next
    multiple of m (and to square), which is said on `warn` (default: stderr). Repeated entries are summed, as scipy
    does; the sum must still fit."""
    high = int(np.iinfo(WIDTHS[values]).max)
    m = int(block_size)
    if m <= 0:
        raise ValueError(f"--block-size {m} must be positive")
    rows, cols = coo.shape
    n = max(rows, cols)
    padded = -(-n // m) * m
    if (rows != cols or n % m != 0 or n == 0) and not pad:
        if n == 0:
            raise FormatError(f"{path}: the matrix is 0 x 0 (--pad makes it one zero block of {m} x {m})")
        if rows != cols:
            raise FormatError(f"{path}: the matrix is {rows} x {cols}; blockmm multiplies square matrices "
                              f"(--pad pads it with zeros to {padded} x {padded})")
        raise FormatError(f"{path}: n = {n} is not a multiple of the block size m = {m} "
                          f"(--pad pads it with zeros to n = {max(padded, m)})")
    padded = max(padded, m)
    if padded > 2**31 - 1:
        raise FormatError(f"{path}: n = {padded} does not fit blockmm's int32")
    if padded != rows or padded != cols:
        print(f"blockmm-import: {path}: padded from {rows} x {cols} to {padded} x {padded} with zeros "
              f"(n a multiple of m = {m})", file=warn or sys.stderr)
    data = np.asarray(coo.data)
    data = np.ones(data.shape, dtype=np.int64) if data.dtype.kind == "b" else data.astype(np.int64)
    csr = sp.csr_matrix((data, (coo.row, coo.col)), shape=(padded, padded), dtype=np.int64)
    csr.sum_duplicates()
    if csr.data.size and csr.data.max() > high:
        r = np.searchsorted(csr.indptr, int(np.argmax(csr.data)), side="right") - 1
        c = csr.indices[int(np.argmax(csr.data))]
        raise FormatError(f"{path}: repeated entries at (row {r}, column {c}) (0-based) sum to "
                          f"{csr.data.max()}, more than {high}")
    csr.eliminate_zeros()
    bsr = csr.tobsr(blocksize=(m, m))
    bsr.data = bsr.data.astype(WIDTHS[values])
    return bsr


def write_matrix_market(path, bsr, comment=""):
    """A bsr_matrix -> coordinate integer general Matrix Market file (non-zero entries only)."""
    from .files import _atomic_write

    csr = bsr.tocsr()
    csr.eliminate_zeros()
    coo = csr.tocoo()
    coo = sp.coo_matrix((coo.data.astype(np.int64), (coo.row, coo.col)), shape=coo.shape)

    def write_to(temporary):
        with open(temporary, "wb") as f:
            scipy.io.mmwrite(f, coo, comment=comment, field="integer", symmetry="general")

    _atomic_write(path, write_to)


def write_npz(path, bsr, sparse_format="csr"):
    """A bsr_matrix -> scipy .npz of the given format (csr, csc, coo or bsr; zeros left out)."""
    from .files import _atomic_write

    matrix = bsr.tocsr()
    matrix.eliminate_zeros()
    matrix = matrix.tobsr(blocksize=bsr.blocksize) if sparse_format == "bsr" else matrix.asformat(sparse_format)

    def write_to(temporary):
        with open(temporary, "wb") as f:
            sp.save_npz(f, matrix, compressed=True)

    _atomic_write(path, write_to)
