"""Square matrices of m x m blocks as the tools handle them: a block source has n, m, nnzb and a
value width, and yields its blocks in pieces, in ascending (block-row, block-column) order,
without repeats. The readers of blockmm's files (binary_format, hdf5_bsr) are sources that read
the file again for each pass, so that memory follows a piece, not the matrix; `Blocks` is one held
in memory (what the importers build and blockmm.write takes). Nothing here allocates by n: a
matrix of n = 2^31 - 1 with one block costs what one block costs.
"""
import numpy as np

from .errors import FormatError, UsageError, quoted

MAX_ORDER = 2**31 - 1
MAX_SUPPORTED_BLOCK_ORDER = 46340  # block indices r*m + c fit int32; src/core/record_layout.hpp
WIDTHS = {"u16": np.dtype("<u2"), "u32": np.dtype("<u4")}
PIECE_BYTES = 16 << 20  # values a piece holds at most (tests make it small to cross piece ends)


def values_name(dtype):
    return "u16" if np.dtype(dtype).itemsize == 2 else "u32"


def blocks_per_piece(m, width, piece_bytes=None):
    return max(1, (piece_bytes or PIECE_BYTES) // (np.dtype(width).itemsize * m * m + 8))


class Blocks:
    """A block matrix in memory: rows, cols (int64, ascending (row, col) pairs, no repeats) and
    values (nnzb, m, m) of `width` (uint16 or uint32)."""

    def __init__(self, n, m, rows, cols, values, path="matrix"):
        self.path, self.n, self.m = path, int(n), int(m)
        self.rows = np.asarray(rows, dtype=np.int64)
        self.cols = np.asarray(cols, dtype=np.int64)
        self.values = values
        self.width = values.dtype

    @property
    def nnzb(self):
        return len(self.rows)

    @property
    def nonzero_counts(self):
        flat = self.values.reshape(self.nnzb, self.m * self.m)
        return int(np.count_nonzero(flat)), int(np.count_nonzero(flat.any(axis=1)))

    def pieces(self, piece_bytes=None):
        step = blocks_per_piece(self.m, self.width, piece_bytes)
        for first in range(0, self.nnzb, step):
            yield self.rows[first:first + step], self.cols[first:first + step], self.values[first:first + step]


def check_block_size(m, what="--block-size"):
    """The block orders the tools take: 1 to 46340, as blockmm (a usage error otherwise)."""
    if m <= 0:
        raise UsageError(f"{what} {quoted(m)} must be positive")
    if m > MAX_SUPPORTED_BLOCK_ORDER:
        raise UsageError(f"{what} {quoted(m)} exceeds the largest block order blockmm supports, "
                         f"{MAX_SUPPORTED_BLOCK_ORDER} (block indices r*m + c must fit int32; a block of m*m uint16 "
                         f"values stays below 4 GiB)")


def blocks_from_entries(path, shape, rows, cols, data, m, pad, values, warn=None):
    """Entries (0-based int64 rows and cols inside `shape`, integral values in range, repeats
    summed) -> Blocks of m x m blocks for blockmm, all-zero blocks left out. The matrix must be
    square with n a multiple of m; with pad=True it is padded with zero rows and columns to the
    next multiple of m (and to square), which `warn` (a function of one line) is told."""
    high = int(np.iinfo(WIDTHS[values]).max)
    n_rows, n_cols = int(shape[0]), int(shape[1])
    n = max(n_rows, n_cols)
    padded = max(-(-n // m) * m, m)
    if (n_rows != n_cols or n % m != 0 or n == 0) and not pad:
        if n == 0:
            raise FormatError(f"{path}: the matrix is 0 x 0 (--pad makes it one zero block of {m} x {m})")
        if n_rows != n_cols:
            raise FormatError(f"{path}: the matrix is {n_rows} x {n_cols}; blockmm multiplies square matrices "
                              f"(--pad pads it with zeros to {padded} x {padded})")
        raise FormatError(f"{path}: n = {n} is not a multiple of the block size m = {m} "
                          f"(--pad pads it with zeros to n = {padded})")
    if padded > MAX_ORDER:
        raise FormatError(f"{path}: n = {padded} does not fit blockmm's int32 (n <= {MAX_ORDER})")
    if (padded != n_rows or padded != n_cols) and warn is not None:
        warn(f"{path}: padded from {n_rows} x {n_cols} to {padded} x {padded} with zeros (n a multiple of m = {m})")
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    data = np.asarray(data, dtype=np.int64)  # each value is at most 2^32 - 1: 2^31 repeats still fit
    # Repeated entries summed: entries sorted by (row, column), each run added up.
    order = np.argsort(rows * padded + cols, kind="stable")  # < n^2 < 2^62
    rows, cols, data = rows[order], cols[order], data[order]
    del order
    starts = np.flatnonzero(np.r_[True, (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])]) if len(rows) \
        else np.zeros(0, np.int64)
    sums = np.add.reduceat(data, starts) if len(starts) else np.zeros(0, np.int64)
    rows, cols = rows[starts], cols[starts]
    del data, starts
    if sums.size and sums.max() > high:
        at = int(np.argmax(sums))
        raise FormatError(f"{path}: repeated entries at (row {rows[at]}, column {cols[at]}) (0-based) sum to "
                          f"{int(sums[at])}, more than {high}")
    nonzero = sums != 0  # explicit zeros are no entries: no all-zero block is ever made
    rows, cols, sums = rows[nonzero], cols[nonzero], sums[nonzero]
    p = padded // m
    keys, which = np.unique((rows // m) * p + cols // m, return_inverse=True)
    blocks = np.zeros((len(keys), m, m), dtype=WIDTHS[values])
    blocks[which, rows % m, cols % m] = sums
    return Blocks(padded, m, keys // p, keys % p, blocks, path)


def whole_block_rows(pieces):
    """Re-cuts pieces so that no block-row is split between two of them: a piece's last block-row
    waits for the next piece, which may continue it (only that row is ever copied)."""
    carry = None
    for rows, cols, values in pieces:
        if not len(rows):
            continue
        if carry is not None:
            head = int(np.searchsorted(rows, carry[0][-1], side="right"))  # the carried row's blocks here
            if head:
                carry = tuple(np.concatenate((a, b[:head])) for a, b in zip(carry, (rows, cols, values)))
                rows, cols, values = rows[head:], cols[head:], values[head:]
            if not len(rows):
                continue
            yield carry
            carry = None
        cut = int(np.searchsorted(rows, rows[-1], side="left"))
        if cut:
            yield rows[:cut], cols[:cut], values[:cut]
        carry = (rows[cut:], cols[cut:], values[cut:])
    if carry is not None:
        yield carry


def csr_pieces(source, piece_bytes=None):
    """The source's non-zero elements in row-major order, in pieces of whole block-rows:
    (element_rows, counts, columns, values): element rows ascending (some with count 0), how many
    entries each holds, and the entries' columns and values."""
    import scipy.sparse as sp

    m, n = source.m, source.n
    for rows, cols, values in whole_block_rows(source.pieces(piece_bytes)):
        if m == 1:
            flat = values.reshape(len(rows))
            keep = flat != 0
            if not keep.all():
                rows, cols, flat = rows[keep], cols[keep], flat[keep]
            if not len(rows):
                continue
            starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
            yield rows[starts], np.diff(np.r_[starts, len(rows)]), cols, flat
            continue
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        block_rows = rows[starts].astype(np.int64)
        indptr = np.r_[starts, len(rows)].astype(np.int64)
        bsr = sp.bsr_matrix((values, cols.astype(np.int32, copy=False), indptr), shape=(len(block_rows) * m, n),
                            blocksize=(m, m))
        csr = bsr.tocsr()
        csr.eliminate_zeros()
        element_rows = (block_rows[:, None] * m + np.arange(m, dtype=np.int64)).ravel()
        yield element_rows, np.diff(csr.indptr), csr.indices, csr.data


def nonzero_counts(source, piece_bytes=None):
    """(non-zero elements, non-zero blocks) of a source: what its scan found, else one pass."""
    known = getattr(source, "nonzero_counts", None)
    if known is not None:
        return known
    elements = blocks = 0
    mm = source.m * source.m
    for rows, _, values in source.pieces(piece_bytes):
        flat = values.reshape(len(rows), mm)
        elements += int(np.count_nonzero(flat))
        blocks += int(np.count_nonzero(flat.any(axis=1)))
    return elements, blocks


def to_bsr_matrix(source, piece_bytes=None):
    """A whole source -> scipy.sparse.bsr_matrix (its indptr has n/m + 1 entries: the API's form)."""
    import scipy.sparse as sp

    parts = list(source.pieces(piece_bytes))
    m, p = source.m, source.n // source.m
    if parts:
        rows = np.concatenate([q[0] for q in parts])
        cols = np.concatenate([q[1] for q in parts])
        values = np.concatenate([q[2] for q in parts])
    else:
        rows = cols = np.zeros(0, np.int64)
        values = np.zeros((0, m, m), source.width)
    indptr = np.zeros(p + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=p), out=indptr[1:])
    return sp.bsr_matrix((values, cols.astype(np.int32), indptr), shape=(source.n, source.n), blocksize=(m, m))


def blocks_from_bsr(bsr, values):
    """A square bsr_matrix of square blocks -> canonical Blocks (sorted, repeats summed, all-zero
    blocks left out) of `values` ("u16" or "u32"); ValueError when values do not fit. As
    blockmm-import takes entries: each stored value an integer in [0, max], repeated blocks
    summed exactly (int64, never in the matrix's own dtype, which wraps), a sum past max refused."""
    import scipy.sparse as sp

    if not sp.isspmatrix_bsr(bsr):
        raise TypeError("expected a scipy.sparse.bsr_matrix")
    n, n_cols = bsr.shape
    m, mb = bsr.blocksize
    if n != n_cols or m != mb:
        raise ValueError(f"blockmm stores square matrices of square blocks; this one is {n} x {n_cols} "
                         f"in {m} x {mb} blocks")
    if n > MAX_ORDER:
        raise ValueError(f"n = {n} does not fit the formats' int32")
    if m > MAX_SUPPORTED_BLOCK_ORDER:
        raise ValueError(f"m = {m} exceeds the largest block order blockmm supports, {MAX_SUPPORTED_BLOCK_ORDER}")
    dtype = WIDTHS[values]
    high = int(np.iinfo(dtype).max)
    data = np.asarray(bsr.data)
    if data.dtype.kind not in "biuf":
        raise ValueError(f"values must be integers in [0, {high}] for {values}; these are {data.dtype}")
    with np.errstate(invalid="ignore"):
        bad = ~((data >= 0) & (data <= high) & (data == np.floor(data)))
    if bad.any():
        raise ValueError(f"values must be integers in [0, {high}] for {values}; {data[bad][0]} is not")
    # Each value < 2^32 and at most 2^31 blocks: int64 sums are exact.
    wide = sp.bsr_matrix((data.astype(np.int64), bsr.indices.copy(), bsr.indptr.copy()), shape=bsr.shape,
                         blocksize=bsr.blocksize)
    wide.sum_duplicates()  # also sorts the indices
    summed = wide.data
    rows = np.repeat(np.arange(n // m, dtype=np.int64), np.diff(wide.indptr))
    if summed.size and summed.max() > high:
        block, r, c = np.unravel_index(int(np.argmax(summed)), summed.shape)
        raise ValueError(f"repeated blocks at block-row {rows[block]}, block-column {wide.indices[block]} sum to "
                         f"{int(summed[block, r, c])} at ({r}, {c}) of the block, more than {high} ({values})")
    keep = summed.reshape(len(rows), m * m).any(axis=1)
    return Blocks(n, m, rows[keep], wide.indices[keep].astype(np.int64), summed[keep].astype(dtype))


class IndptrStream:
    """A row-pointer array of rows + 1 entries made as pieces arrive, handed out in chunks of at most
    `chunk` entries: feed(row_ids, counts) with ascending row ids (rows not named hold nothing),
    then finish(). Memory follows the pieces and the chunk, never the number of rows."""

    def __init__(self, rows, dtype, chunk=1 << 20):
        self.rows, self.dtype, self.chunk = int(rows), np.dtype(dtype), int(chunk)
        self.next_entry = 0  # the first entry not yet handed out
        self.total = 0

    def feed(self, row_ids, counts):
        row_ids = np.asarray(row_ids, dtype=np.int64)
        if not len(row_ids):
            return
        counts = np.asarray(counts, dtype=np.int64)
        starts = self.total + np.r_[0, np.cumsum(counts[:-1])]
        # Entries next_entry .. row_ids[0], then row_ids[k-1] + 1 .. row_ids[k]: each the start of row_ids[k].
        lengths = np.diff(np.r_[self.next_entry - 1, row_ids])
        self.total += int(counts.sum())
        self.next_entry = int(row_ids[-1]) + 1
        yield from self._runs(starts, lengths)

    def finish(self):
        if self.next_entry <= self.rows:
            yield from self._runs(np.array([self.total]), np.array([self.rows + 1 - self.next_entry]))
            self.next_entry = self.rows + 1

    def _runs(self, values, lengths):
        """np.repeat(values, lengths) in chunks of at most `chunk` entries."""
        ends = np.cumsum(lengths)
        total = int(ends[-1]) if len(ends) else 0
        start = 0
        while start < total:
            stop = min(start + self.chunk, total)
            k0 = int(np.searchsorted(ends, start, side="right"))
            k1 = int(np.searchsorted(ends, stop - 1, side="right"))
            part = lengths[k0:k1 + 1].copy()
            part[0] -= start - (int(ends[k0]) - int(lengths[k0]))
            part[-1] -= int(ends[k1]) - stop
            yield np.repeat(values[k0:k1 + 1], part).astype(self.dtype)
            start = stop
