"""The COL380 binary format (README "Formats"): a 12-byte header int32 n, m, k, then k records
int32 i, int32 j, m*m values (uint16 for inputs, uint32 for products), little-endian. Read with
the rules and messages of src/io/binary_format.cpp: the header is checked against the file's
size before anything is allocated, every record's block indices against [0, n/m), repeated
blocks refused; records are read in pieces through the descriptor (never mapped: a file cut
short while it is read is an error, not a SIGBUS), so memory follows a piece, not n or k.
"""
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .blocks import MAX_SUPPORTED_BLOCK_ORDER, WIDTHS, blocks_per_piece
from .errors import FormatError
from .input_file import InputFile

HEADER_BYTES = 12
MAX_BLOCK_ORDER = 1518500249  # m*m values of any width fit 2^63 bytes (src/core/record_layout.hpp)


def record_dtype(m, value_dtype):
    """One COL380 record: int32 i, int32 j, m*m values row-major (packed, any byte offset)."""
    return np.dtype([("i", "<i4"), ("j", "<i4"), ("v", value_dtype, (m, m))])


def describe(n, m, k):
    return f"n = {n}, m = {m}, k = {k}"


def check_supported_block_order(path, m):
    if m > MAX_SUPPORTED_BLOCK_ORDER:
        raise FormatError(f"{path}: m = {m} exceeds the largest block order blockmm supports, "
                          f"{MAX_SUPPORTED_BLOCK_ORDER} (block indices r*m + c must fit int32; a block of m*m uint16 "
                          f"values stays below 4 GiB)")


def _check_header(path, n, m, k, size, width):
    """src/io/binary_format.cpp check_header: everything the header and the size can tell."""
    if n <= 0:
        raise FormatError(f"{path}: header n = {n} must be positive")
    if m <= 0:
        raise FormatError(f"{path}: header m = {m} must be positive")
    if m > MAX_BLOCK_ORDER:
        raise FormatError(f"{path}: header m = {m} is too large: a block of m*m values would not fit in 2^63 bytes "
                          f"(m <= {MAX_BLOCK_ORDER})")
    if n % m != 0:
        raise FormatError(f"{path}: header n = {n} is not a multiple of m = {m}")
    if k < 0:
        raise FormatError(f"{path}: header k = {k} is negative")
    p = n // m
    if k > p * p:
        raise FormatError(f"{path}: header k = {k} exceeds (n/m)^2 = {p * p} possible blocks")
    bytes_per_value = WIDTHS[width].itemsize
    expected = HEADER_BYTES + k * (8 + bytes_per_value * m * m)
    if expected != size:
        product = HEADER_BYTES + k * (8 + 4 * m * m)
        if width == "u16" and k > 0 and product == size:
            raise FormatError(f"{path}: holds uint32 values (a product), not an input matrix of uint16 values "
                              f"({describe(n, m, k)}, {size} bytes = 12 + k*(8+4*m^2))")
        rule = f"12 + k*(8+{bytes_per_value}*m^2)"
        if expected > size:
            need = "more than 2^63" if expected > 2**63 - 1 else str(expected)
            raise FormatError(f"{path}: truncated: {describe(n, m, k)} needs {rule} = {need} bytes, file has {size}")
        raise FormatError(f"{path}: {size - expected} trailing bytes after the last record: {describe(n, m, k)} "
                          f"needs {rule} = {expected} bytes, file has {size}")
    check_supported_block_order(path, m)


class BinaryFile:
    """A COL380 file as a block source (blocks.py). `values` "u16" or "u32" insists on a width;
    None tells it from the size (an input's rule first, as blockmm-info does). Opening scans the
    records once: indices in range, and whether they ascend; files that do not (blockmm-gen
    shuffles its records) are sorted in memory, their repeats refused."""

    def __init__(self, path, values=None, piece_bytes=None):
        self.file = InputFile(path) if not isinstance(path, InputFile) else path
        self.path = self.file.path
        self.piece_bytes = piece_bytes
        try:
            self._open(values)
        except BaseException:
            self.file.close()
            raise

    def close(self):
        self.file.close()

    def _open(self, values):
        size = self.file.size
        if size < HEADER_BYTES:
            raise FormatError(f"{self.path}: file is {size} bytes, shorter than the 12-byte header (int32 n, m, k)")
        head = np.zeros(3, dtype="<i4")
        self.file.read_exactly(0, head)
        n, m, k = (int(x) for x in head)
        if values is not None:
            _check_header(self.path, n, m, k, size, values)
            width = values
        else:
            try:
                _check_header(self.path, n, m, k, size, "u16")
                width = "u16"
            except FormatError as error:
                try:
                    _check_header(self.path, n, m, k, size, "u32")
                    width = "u32"
                except FormatError:
                    raise error from None
        self.n, self.m, self.nnzb = n, m, k
        self.width = WIDTHS[width]
        self.record = record_dtype(m, self.width)
        self._order = None  # the records' sorted order, for files whose records do not ascend
        self.nonzero_counts = None  # (non-zero elements, non-zero blocks), from the scan
        self._scan()

    def _read(self, first, count):
        """Records [first, first + count) with their block indices as contiguous int32 arrays,
        the indices checked against [0, p)."""
        records = np.empty(count, dtype=self.record)  # fresh: callers may keep a piece
        self.file.read_exactly(HEADER_BYTES + first * self.record.itemsize, records)
        i, j = np.ascontiguousarray(records["i"]), np.ascontiguousarray(records["j"])
        p = self.n // self.m
        # Negative indices read as unsigned are 2^31 or more: one comparison covers both ends.
        if np.any(i.view(np.uint32) >= p) or np.any(j.view(np.uint32) >= p):
            bad = np.flatnonzero((i < 0) | (i >= p) | (j < 0) | (j >= p))
            r = int(bad[0])
            row_bad = not 0 <= int(i[r]) < p
            index = first + r
            raise FormatError(f"{self.path}: record {index} (byte offset {HEADER_BYTES + index * self.record.itemsize}): "
                              f"block-{'row' if row_bad else 'column'} {int(i[r]) if row_bad else int(j[r])} outside "
                              f"[0, {p})")
        return i, j, records["v"]

    def _raw_pieces(self):
        """(first record, i, j, values) a piece at a time, the next piece read by a second thread
        while this one is used (reads release the GIL)."""
        step = blocks_per_piece(self.m, self.width, self.piece_bytes)
        firsts = range(0, self.nnzb, step)
        if len(firsts) <= 1:
            for first in firsts:
                yield (first,) + self._read(first, min(step, self.nnzb - first))
            return
        with ThreadPoolExecutor(1) as reader:
            coming = reader.submit(self._read, 0, min(step, self.nnzb))
            for first in firsts:
                piece = coming.result()
                if first + step < self.nnzb:
                    coming = reader.submit(self._read, first + step, min(step, self.nnzb - first - step))
                yield (first,) + piece

    @staticmethod
    def _ascending(i, j, previous):
        """Whether (i, j) pairs ascend strictly, also from `previous` (the pair before, or None)."""
        if previous is not None and (i[0] < previous[0] or (i[0] == previous[0] and j[0] <= previous[1])):
            return False
        di = np.diff(i)
        return not np.any((di < 0) | ((di == 0) & (np.diff(j) <= 0)))

    def _scan(self):
        previous = None
        elements = blocks = 0
        mm = self.m * self.m
        for _, i, j, values in self._raw_pieces():
            if not self._ascending(i, j, previous):
                self._sort()
                break
            previous = (int(i[-1]), int(j[-1]))
            flat = values.reshape(len(i), mm)
            nonzero = int(np.count_nonzero(flat))
            elements += nonzero
            blocks += nonzero if mm == 1 else int(np.count_nonzero(flat.any(axis=1)))
        else:
            self.nonzero_counts = (elements, blocks)

    def _sort(self):
        """The order that sorts the records, held in memory with their keys (k of each)."""
        keys = np.empty(self.nnzb, dtype=np.int64)
        p = self.n // self.m
        for first, i, j, _ in self._raw_pieces():
            keys[first:first + len(i)] = i.astype(np.int64) * p + j
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        repeated = np.flatnonzero(keys[1:] == keys[:-1])
        if repeated.size:
            r = int(repeated[0])
            a, b = int(order[r]), int(order[r + 1])
            size = self.record.itemsize
            raise FormatError(f"{self.path}: block ({keys[r] // p}, {keys[r] % p}) occurs twice, at records {a} and {b} "
                              f"(byte offsets {HEADER_BYTES + a * size} and {HEADER_BYTES + b * size})")
        self._order = order

    def pieces(self, piece_bytes=None):
        """The blocks in ascending (row, column) order, a piece at a time: (rows, cols) as int32,
        values (count, m, m). Each pass reads the file again and checks it again (a file changed
        meanwhile is refused, not half used)."""
        if piece_bytes is not None:
            self.piece_bytes = piece_bytes
        if self._order is None:
            previous = None
            for _, i, j, values in self._raw_pieces():
                if not self._ascending(i, j, previous):
                    raise FormatError(f"{self.path}: the file changed while it was read")
                previous = (int(i[-1]), int(j[-1]))
                yield i, j, values
            return
        # Records out of order: the whole file in memory once, handed out in sorted order.
        i, j, values = self._read(0, self.nnzb)
        step = blocks_per_piece(self.m, self.width, self.piece_bytes)
        for first in range(0, self.nnzb, step):
            chosen = self._order[first:first + step]
            yield i[chosen], j[chosen], values[chosen]


def write_binary(fd, source, piece_bytes=None):
    """Writes `source` (canonical: sorted, no all-zero block) as a COL380 file through `fd`, from
    its start, a piece at a time."""
    m, width = source.m, source.width
    if source.nnzb > 2**31 - 1:
        raise ValueError(f"{source.nnzb} blocks are more than the binary format's int32 k holds")
    _write_all(fd, np.array([source.n, m, source.nnzb], dtype="<i4"), 0)
    offset = HEADER_BYTES
    for rows, cols, values in source.pieces(piece_bytes):
        records = np.empty(len(rows), dtype=record_dtype(m, width))
        records["i"], records["j"], records["v"] = rows, cols, values
        offset = _write_all(fd, records, offset)


def _write_all(fd, array, offset):
    view = memoryview(np.ascontiguousarray(array)).cast("B")
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:done + (1 << 30)], offset + done)
    return offset + done
