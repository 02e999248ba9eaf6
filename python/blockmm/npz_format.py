"""scipy.sparse .npz files (what scipy.sparse.save_npz writes and load_npz reads: a zip of .npy
arrays `format`, `shape` and the format's arrays), read and written here.

Reading checks what scipy does not before anything is built from the arrays (scipy's own
conversions trust them: an indptr that steps past the indices corrupts the heap): each array's
header against the bytes its zip entry holds (and a compressed entry's size against what
deflate can expand to), the arrays' shapes, indptr from 0 never decreasing and within the
indices, every index inside the shape, every value an integer in [0, high].

Writing streams the arrays into the zip a pass at a time, in pieces of whole block-rows, so
that memory follows a piece (csc, whose column order needs the whole matrix, holds the output's
arrays once). Uncompressed unless asked: the point is to write at the speed of the disk.
"""
import struct
import zipfile
import zlib

import numpy as np

from .blocks import IndptrStream, csr_pieces, nonzero_counts
from .errors import FormatError
from .input_file import opened
from .stored_zip import StoredZip

FORMATS = ("csr", "csc", "coo", "bsr", "dia")
MAX_INDEX = 2**31 - 1
MAX_DEFLATE_RATIO = 1100  # deflate expands at most about 1032 times


class _Archive:
    def __init__(self, path, handle):
        self.path = path
        try:
            self.zip = zipfile.ZipFile(handle)
            self.members = {info.filename: info for info in self.zip.infolist()}
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, zlib.error, struct.error,
                NotImplementedError) as error:
            raise FormatError(f"{path}: not a scipy.sparse .npz file: {error}") from None

    def fail(self, what):
        raise FormatError(f"{self.path}: {what}")

    def array(self, key, kinds, ndim, what):
        """The array `key`, checked: a dtype of one of `kinds` (numpy kind letters), `ndim` axes."""
        info = self.members.get(key + ".npy")
        if info is None:
            self.fail(f"no array '{key}' (a scipy.sparse .npz of {what} holds it)")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            self.fail(f"array '{key}' is compressed with zip method {info.compress_type}; .npz files use stored or "
                      f"deflated entries")
        if info.compress_type == zipfile.ZIP_DEFLATED and info.file_size > MAX_DEFLATE_RATIO * info.compress_size + 4096:
            self.fail(f"array '{key}' declares {info.file_size} bytes from {info.compress_size} compressed bytes: "
                      f"more than deflate expands")
        try:
            with self.zip.open(info) as member:
                version = np.lib.format.read_magic(member)
                if version == (1, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_1_0(member)
                elif version == (2, 0):
                    shape, fortran, dtype = np.lib.format.read_array_header_2_0(member)
                else:
                    self.fail(f"array '{key}' is a .npy file of version {version[0]}.{version[1]}; numpy's .npz "
                              f"arrays are version 1.0 or 2.0")
                header = member.tell()
                if dtype.hasobject or dtype.kind not in kinds or dtype.fields is not None or dtype.subdtype:
                    self.fail(f"array '{key}' holds {dtype} values")
                if len(shape) != ndim:
                    self.fail(f"array '{key}' has shape {shape}; it must have {ndim} axes")
                count = int(np.prod(shape, dtype=object))
                if count * dtype.itemsize != info.file_size - header:
                    self.fail(f"array '{key}' declares shape {shape} of {dtype} ({count * dtype.itemsize} bytes) in an "
                              f"entry of {info.file_size - header} bytes")
                array = np.empty(shape[::-1] if fortran else shape, dtype=dtype)
                view = memoryview(array.reshape(-1)).cast("B") if array.size else memoryview(b"")
                done = 0
                while done < len(view):
                    got = member.readinto(view[done:])
                    if not got:
                        self.fail(f"array '{key}' ends after {done} of its {len(view)} bytes")
                    done += got
                if member.read(1):
                    self.fail(f"array '{key}' holds more bytes than its header declares")
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError, zlib.error, struct.error,
                NotImplementedError) as error:
            if isinstance(error, FormatError):
                raise
            self.fail(f"array '{key}' cannot be read: {error}")
        return (array.T if fortran else array).astype(dtype.newbyteorder("="), copy=False)


INDEX_KINDS, VALUE_KINDS = "iu", "biuf"


def _pointers(archive, name, indptr, major, entries):
    """indptr of `major` + 1 entries from 0, never decreasing, at most `entries`; its end."""
    if len(indptr) != major + 1:
        archive.fail(f"{name} indptr holds {len(indptr)} entries; the shape needs {major + 1}")
    indptr = indptr.astype(np.int64)
    if indptr[0] != 0:
        archive.fail(f"{name} indptr[0] = {indptr[0]}; it must be 0")
    down = np.flatnonzero(indptr[1:] < indptr[:-1])
    if down.size:
        e = int(down[0])
        archive.fail(f"{name} indptr decreases at {e}: indptr[{e}] = {indptr[e]} > indptr[{e + 1}] = {indptr[e + 1]}")
    if indptr[-1] > entries:
        archive.fail(f"{name} indptr ends at {indptr[-1]}, past the {entries} indices stored")
    return indptr


def _check_indices(archive, name, indices, limit, what):
    indices = indices.astype(np.int64, copy=False)
    bad = np.flatnonzero((indices < 0) | (indices >= limit))
    if bad.size:
        e = int(bad[0])
        archive.fail(f"{name} {what}[{e}] = {indices[e]} is outside [0, {limit})")
    return indices


def read_npz(path, high=65535):
    """A scipy.sparse .npz -> ((rows, columns), row indices, column indices, values): int64 arrays,
    every one checked; entries in the order the format stores them (repeats not yet summed)."""
    with opened(path) as infile, infile.fileobj() as handle:
        path = infile.path
        archive = _Archive(path, handle)
        fmt = archive.array("format", "SU", 0, "any format")
        fmt = fmt.item().decode("ascii", "replace") if fmt.dtype.kind == "S" else str(fmt.item())
        if fmt not in FORMATS:
            archive.fail(f"format '{fmt[:20]}'; blockmm-import reads csr, csc, coo, bsr and dia")
        shape = archive.array("shape", INDEX_KINDS, 1, fmt)
        if len(shape) != 2 or np.any(shape.astype(np.int64) < 0) or np.any(shape.astype(np.float64) > MAX_INDEX):
            archive.fail(f"shape {tuple(shape.tolist())}: two sizes in [0, {MAX_INDEX}] (blockmm's int32 n)")
        n_rows, n_cols = (int(s) for s in shape)
        data = archive.array("data", VALUE_KINDS + "c", {"bsr": 3, "dia": 2}.get(fmt, 1), fmt)
        if data.dtype.kind == "c":
            archive.fail("complex values; blockmm takes integers")
        if fmt in ("csr", "csc"):
            major, minor = (n_rows, n_cols) if fmt == "csr" else (n_cols, n_rows)
            indices = archive.array("indices", INDEX_KINDS, 1, fmt)
            if len(indices) != len(data):
                archive.fail(f"{fmt} indices hold {len(indices)} entries and data {len(data)}; they must match")
            indptr = _pointers(archive, fmt, archive.array("indptr", INDEX_KINDS, 1, fmt), major, len(indices))
            used = int(indptr[-1])
            inner = _check_indices(archive, fmt, indices[:used], minor, "indices")
            counts = np.diff(indptr)
            holding = np.flatnonzero(counts)
            outer = np.repeat(holding, counts[holding])
            values = data[:used]
            rows, cols = (outer, inner) if fmt == "csr" else (inner, outer)
        elif fmt == "coo":
            row = archive.array("row", INDEX_KINDS, 1, fmt)
            col = archive.array("col", INDEX_KINDS, 1, fmt)
            if not len(row) == len(col) == len(data):
                archive.fail(f"coo row, col and data hold {len(row)}, {len(col)} and {len(data)} entries; they must match")
            rows = _check_indices(archive, fmt, row, n_rows, "row")
            cols = _check_indices(archive, fmt, col, n_cols, "col")
            values = data
        elif fmt == "bsr":
            count, r, c = data.shape
            if r < 1 or c < 1 or n_rows % r or n_cols % c:
                archive.fail(f"bsr blocks of {r} x {c} do not tile the shape {n_rows} x {n_cols}")
            indices = archive.array("indices", INDEX_KINDS, 1, fmt)
            if len(indices) != count:
                archive.fail(f"bsr indices hold {len(indices)} entries and data {count} blocks; they must match")
            indptr = _pointers(archive, fmt, archive.array("indptr", INDEX_KINDS, 1, fmt), n_rows // r, count)
            used = int(indptr[-1])
            block_cols = _check_indices(archive, fmt, indices[:used], n_cols // c, "indices")
            counts = np.diff(indptr)
            holding = np.flatnonzero(counts)
            block_rows = np.repeat(holding, counts[holding])
            t, a, b = np.nonzero(data[:used])
            rows, cols, values = block_rows[t] * r + a, block_cols[t] * c + b, data[:used][t, a, b]
        else:  # dia: data[k, j] is the entry (j - offsets[k], j)
            offsets = archive.array("offsets", INDEX_KINDS, 1, fmt)
            wide = np.flatnonzero(np.abs(offsets.astype(np.float64)) > MAX_INDEX)
            if wide.size:  # scipy would wrap them into int32: another matrix
                archive.fail(f"dia offsets[{wide[0]}] = {offsets[wide[0]]} does not fit int32")
            offsets = offsets.astype(np.int64)
            repeated = np.flatnonzero(np.bincount(np.unique(offsets, return_inverse=True)[1]) > 1)
            if repeated.size:  # scipy refuses such a file: no matrix to take
                archive.fail(f"dia offset {int(np.unique(offsets)[repeated[0]])} occurs more than once (scipy "
                             f"refuses repeated diagonals)")
            if len(offsets) != data.shape[0]:
                archive.fail(f"dia offsets hold {len(offsets)} diagonals and data {data.shape[0]}; they must match")
            width = min(data.shape[1], n_cols)
            k, j = np.nonzero(data[:, :width])
            r = j - offsets[k]
            inside = (r >= 0) & (r < n_rows)
            rows, cols, values = r[inside], j[inside], data[:, :width][k[inside], j[inside]]
    values = np.asarray(values)
    booleans = values.dtype.kind == "b"
    if booleans:
        values = values.astype(np.int64)
    with np.errstate(invalid="ignore"):
        bad = ~((values >= 0) & (values <= high) & (values == np.floor(values)))
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        raise FormatError(f"{path}: entry (row {rows[e]}, column {cols[e]}) (0-based) holds {values[e]}, not an "
                          f"integer in [0, {high}]")
    rows, cols, values = np.asarray(rows, np.int64), np.asarray(cols, np.int64), values.astype(np.int64)
    if booleans:
        rows, cols, values = _or_repeats(rows, cols, values, n_cols)
    return (n_rows, n_cols), rows, cols, values


def _or_repeats(rows, cols, values, n_cols):
    """Boolean entries as scipy adds them, in bools: repeats of one (row, column) are one entry,
    True where any of them is (a count of 2 would be another matrix than scipy's)."""
    keys = rows * max(n_cols, 1) + cols  # < 2^62
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, np.int64)
    merged = np.maximum.reduceat(values[order], starts) if len(starts) else values[:0]
    return rows[order][starts], cols[order][starts], merged


# ---------------------------------------------------------------------------------------------
# writing


def passes(sparse_format, compress, counted):
    """How many times writing `sparse_format` reads its source (for the progress display);
    `counted`: whether the source already knows its non-zero counts."""
    if compress:
        return {"csr": 3, "csc": 2, "coo": 4, "bsr": 3}[sparse_format]
    return (0 if counted else 1) + (2 if sparse_format == "csc" else 1)


def _index_dtype(*bounds):
    """scipy's choice: int32 where every index and count fits, else int64."""
    return np.dtype(np.int32) if max(bounds) <= MAX_INDEX else np.dtype(np.int64)


def write_npz(handle, source, sparse_format="csr", compress=False, piece_bytes=None):
    """Writes `source` as a scipy.sparse .npz of csr, csc, coo or bsr (non-zero entries; for bsr,
    the non-zero blocks) through the binary file object `handle`."""
    if sparse_format not in ("csr", "csc", "coo", "bsr"):
        raise ValueError(f"sparse format {sparse_format!r}: one of csr, csc, coo, bsr")
    if compress:
        _write_deflated(handle, source, sparse_format, piece_bytes)
        return
    handle.flush()
    elements, blocks = nonzero_counts(source, piece_bytes)
    n, m, width = source.n, source.m, source.width
    archive = StoredZip(handle.fileno())
    try:
        archive.add("format", (), "S3").write(np.array(sparse_format.encode("ascii")))
        archive.add("shape", (2,), np.int64).write(np.array([n, n]))
        if sparse_format == "bsr":
            p = n // m
            index = _index_dtype(p, blocks)
            indptr, indices = archive.add("indptr", (p + 1,), index), archive.add("indices", (blocks,), index)
            data = archive.add("data", (blocks, m, m), width)
            stream = IndptrStream(p, index)
            for rows, cols, values in _nonzero_blocks(source, piece_bytes):
                if len(rows):
                    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
                    for chunk in stream.feed(rows[starts], np.diff(np.r_[starts, len(rows)])):
                        indptr.write(chunk)
                indices.write(cols)
                data.write(values)
            for chunk in stream.finish():
                indptr.write(chunk)
        elif sparse_format == "csc":
            index = _index_dtype(n, elements)
            for key, array in zip(("indptr", "indices", "data"), _csc_arrays(source, index, piece_bytes)):
                archive.add(key, array.shape, array.dtype).write(array)
        else:
            index = _index_dtype(n, elements)
            if sparse_format == "csr":
                indptr = archive.add("indptr", (n + 1,), index)
                stream = IndptrStream(n, index)
            else:
                row = archive.add("row", (elements,), index)
            col = archive.add("indices" if sparse_format == "csr" else "col", (elements,), index)
            data = archive.add("data", (elements,), width)
            for element_rows, counts, cols, values in csr_pieces(source, piece_bytes):
                if sparse_format == "csr":
                    for chunk in stream.feed(element_rows, counts):
                        indptr.write(chunk)
                else:
                    row.write(np.repeat(element_rows, counts))
                col.write(cols)
                data.write(values)
            if sparse_format == "csr":
                for chunk in stream.finish():
                    indptr.write(chunk)
        archive.finish()
    finally:
        archive.abandon()


def _nonzero_blocks(source, piece_bytes):
    m = source.m
    for rows, cols, values in source.pieces(piece_bytes):
        keep = values.reshape(len(rows), m * m).any(axis=1)
        yield (rows, cols, values) if keep.all() else (rows[keep], cols[keep], values[keep])


def _entry(archive, key, shape, dtype, chunks):
    dtype = np.dtype(dtype)
    expected = int(np.prod(shape, dtype=object))
    written = 0
    with archive.open(key + ".npy", "w", force_zip64=True) as out:
        np.lib.format.write_array_header_1_0(out, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                   "fortran_order": False, "shape": tuple(int(s) for s in shape)})
        for chunk in chunks:
            chunk = np.ascontiguousarray(chunk, dtype=dtype)
            if chunk.size:
                out.write(memoryview(chunk.reshape(-1)).cast("B"))
            written += chunk.size
    if written != expected:
        raise ValueError(f"'{key}' got {written} values of {expected} (an input changed while it was read?)")


def _write_deflated(handle, source, sparse_format, piece_bytes):
    """Compressed: the zip's entries one after the other (their sizes are known only once written),
    each its own pass over the source."""
    n, m, width = source.n, source.m, source.width
    with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True, compresslevel=1) as z:
        _entry(z, "format", (), "S3", [np.array(sparse_format.encode("ascii"))])
        _entry(z, "shape", (2,), np.int64, [np.array([n, n])])
        if sparse_format == "bsr":
            p = n // m
            index = _index_dtype(p, source.nnzb)
            stream = IndptrStream(p, index)

            def pointers():
                for rows, _, _ in _nonzero_blocks(source, piece_bytes):
                    if len(rows):
                        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
                        yield from stream.feed(rows[starts], np.diff(np.r_[starts, len(rows)]))
                yield from stream.finish()

            _entry(z, "indptr", (p + 1,), index, pointers())
            blocks = stream.total
            _entry(z, "indices", (blocks,), index, (q[1] for q in _nonzero_blocks(source, piece_bytes)))
            _entry(z, "data", (blocks, m, m), width, (q[2] for q in _nonzero_blocks(source, piece_bytes)))
            return
        index = _index_dtype(n, source.nnzb * m * m)
        if sparse_format == "csr":
            stream = IndptrStream(n, index)

            def pointers():
                for rows, counts, _, _ in csr_pieces(source, piece_bytes):
                    yield from stream.feed(rows, counts)
                yield from stream.finish()

            _entry(z, "indptr", (n + 1,), index, pointers())
            nnz = stream.total
            _entry(z, "indices", (nnz,), index, (q[2] for q in csr_pieces(source, piece_bytes)))
            _entry(z, "data", (nnz,), width, (q[3] for q in csr_pieces(source, piece_bytes)))
        elif sparse_format == "coo":
            nnz = sum(int(q[1].sum()) for q in csr_pieces(source, piece_bytes))
            _entry(z, "row", (nnz,), index, (np.repeat(q[0], q[1]) for q in csr_pieces(source, piece_bytes)))
            _entry(z, "col", (nnz,), index, (q[2] for q in csr_pieces(source, piece_bytes)))
            _entry(z, "data", (nnz,), width, (q[3] for q in csr_pieces(source, piece_bytes)))
        else:
            indptr, indices, data = _csc_arrays(source, index, piece_bytes)
            _entry(z, "indptr", indptr.shape, index, [indptr])
            _entry(z, "indices", indices.shape, index, [indices])
            _entry(z, "data", data.shape, width, [data])


def _csc_arrays(source, index, piece_bytes):
    """The csc arrays, built in memory (column order needs every row): a counting pass, a filling pass."""
    n = source.n
    indptr = np.zeros(n + 1, dtype=index)
    for _, _, cols, _ in csr_pieces(source, piece_bytes):
        columns, counts = np.unique(cols, return_counts=True)
        indptr[columns + 1] += counts.astype(index)
    np.cumsum(indptr, out=indptr)
    nnz = int(indptr[-1])
    indices = np.empty(nnz, dtype=index)
    data = np.empty(nnz, dtype=source.width)
    filled = indptr[:-1].copy()  # the next free place of each column
    for element_rows, counts, cols, values in csr_pieces(source, piece_bytes):
        rows = np.repeat(element_rows, counts)
        order = np.argsort(cols, kind="stable")  # by column, rows ascending within one
        sorted_cols = cols[order]
        starts = np.flatnonzero(np.r_[True, sorted_cols[1:] != sorted_cols[:-1]])
        rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
        places = filled[sorted_cols].astype(np.int64) + rank
        indices[places] = rows[order]
        data[places] = values[order]
        filled[sorted_cols[starts]] += np.diff(np.r_[starts, len(order)]).astype(index)
    return indptr, indices, data
