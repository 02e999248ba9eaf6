"""blockmm's own file formats as scipy.sparse.bsr_matrix: the COL380 binary format and the HDF5
BSR layout (README "Formats"). Readers check every rule blockmm checks and raise FormatError
naming the file; writers write a temporary file beside the target and rename it over the target
only when it is complete, so a failed write never leaves a partial file or touches an old one.
"""
import os
import tempfile

import numpy as np
import scipy.sparse as sp

HEADER_BYTES = 12
MAX_ORDER = 2**31 - 1
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
WIDTHS = {"u16": np.dtype("<u2"), "u32": np.dtype("<u4")}


class FormatError(ValueError):
    """A file that is not what it must be (bad input: the tools exit with code 3)."""


def record_dtype(m, value_dtype):
    """One COL380 record: int32 i, int32 j, m*m values row-major (packed, any byte offset)."""
    return np.dtype([("i", "<i4"), ("j", "<i4"), ("v", value_dtype, (m, m))])


def has_hdf5_signature(path):
    with open(path, "rb") as f:
        return f.read(8) == HDF5_SIGNATURE


def values_name(dtype):
    return "u16" if np.dtype(dtype).itemsize == 2 else "u32"


# ---------------------------------------------------------------------------------------------
# reading


def _check_shape(path, n, m, k):
    if n <= 0 or m <= 0:
        raise FormatError(f"{path}: header n = {n}, m = {m}: both must be positive")
    if n % m != 0:
        raise FormatError(f"{path}: header n = {n} is not a multiple of m = {m}")
    p = n // m
    if k < 0 or k > p * p:
        raise FormatError(f"{path}: header k = {k} must lie in [0, (n/m)^2 = {p * p}]")


def _bsr_from_blocks(path, n, m, rows, cols, values, what):
    """Blocks in any order -> canonical bsr_matrix (sorted, indices checked, no repeats)."""
    p = n // m
    bad = np.flatnonzero((rows < 0) | (rows >= p) | (cols < 0) | (cols >= p))
    if bad.size:
        b = int(bad[0])
        raise FormatError(f"{path}: {what} {b} has block index ({rows[b]}, {cols[b]}) outside [0, {p})")
    order = np.lexsort((cols, rows))
    rows, cols, values = rows[order], cols[order], values[order]
    repeated = np.flatnonzero((rows[1:] == rows[:-1]) & (cols[1:] == cols[:-1]))
    if repeated.size:
        r = int(repeated[0])
        raise FormatError(f"{path}: block ({rows[r]}, {cols[r]}) occurs twice, at {what}s "
                          f"{int(order[r])} and {int(order[r + 1])}")
    indptr = np.zeros(p + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=p), out=indptr[1:])
    return sp.bsr_matrix((values, cols.astype(np.int32), indptr), shape=(n, n), blocksize=(m, m))


def read_bin(path, values=None):
    """A COL380 binary file -> bsr_matrix of uint16 (input) or uint32 (product) values. The width
    is told from the file size; `values` ("u16" or "u32") insists on one (an empty file fits both
    and reads as u16 unless told)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
        if len(head) < HEADER_BYTES:
            raise FormatError(f"{path}: {size} bytes is too short for the 12-byte header")
        n, m, k = (int(x) for x in np.frombuffer(head, dtype="<i4"))
        _check_shape(path, n, m, k)
        fits = [w for w in ("u16", "u32") if size == HEADER_BYTES + k * (8 + WIDTHS[w].itemsize * m * m)]
        if values is not None:
            if values not in fits:
                raise FormatError(f"{path}: {size} bytes is not the size of {k} records of {values} values "
                                  f"(n = {n}, m = {m})")
            width = values
        elif fits:
            width = fits[0]
        else:
            raise FormatError(f"{path}: {size} bytes fits neither {k} records of uint16 values (input) nor of "
                              f"uint32 values (product) with n = {n}, m = {m}")
        records = np.fromfile(f, dtype=record_dtype(m, WIDTHS[width]), count=k)
    if len(records) != k:
        raise FormatError(f"{path}: the file shrank while it was read")
    return _bsr_from_blocks(path, n, m, records["i"].astype(np.int64), records["j"].astype(np.int64),
                            np.ascontiguousarray(records["v"]), "record")


def read_h5(path, values=None):
    """A blockmm HDF5 BSR file -> bsr_matrix (uint16 or uint32 values, as /data holds)."""
    import h5py  # only this format needs it

    try:
        f = h5py.File(path, "r")
    except OSError as error:
        raise FormatError(f"{path}: not a readable HDF5 file: {error}") from None
    with f:
        attrs = f.attrs
        for name in ("format", "version", "n", "m", "nnzb"):
            if name not in attrs:
                raise FormatError(f"{path}: missing root attribute '{name}' (a blockmm BSR file has attributes "
                                  f"format = \"blockmm-bsr\", version = 1, n, m, nnzb)")
        fmt = attrs["format"]
        fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
        if fmt != "blockmm-bsr":
            raise FormatError(f"{path}: root attribute format = \"{fmt}\"; expected \"blockmm-bsr\"")
        if int(attrs["version"]) != 1:
            raise FormatError(f"{path}: root attribute version = {int(attrs['version'])}; expected 1")
        n, m, nnzb = int(attrs["n"]), int(attrs["m"]), int(attrs["nnzb"])
        _check_shape(path, n, m, nnzb)
        for name in ("indptr", "indices", "data"):
            if name not in f:
                raise FormatError(f"{path}: missing dataset /{name}")
        data = f["data"]
        if data.dtype not in (np.dtype("uint16"), np.dtype("uint32")):
            raise FormatError(f"{path}: /data holds {data.dtype} values; expected uint16 or uint32")
        if values is not None and values_name(data.dtype) != values:
            raise FormatError(f"{path}: /data holds {data.dtype} values, not {values}")
        p = n // m
        if f["indptr"].shape != (p + 1,) or f["indices"].shape != (nnzb,) or data.shape != (nnzb, m, m):
            raise FormatError(f"{path}: dataset shapes {f['indptr'].shape}, {f['indices'].shape}, {data.shape} do "
                              f"not fit n = {n}, m = {m}, nnzb = {nnzb}")
        indptr = f["indptr"][:].astype(np.int64)
        cols = f["indices"][:].astype(np.int64)
        blocks = data[:]
    if indptr[0] != 0 or indptr[-1] != nnzb or np.any(np.diff(indptr) < 0):
        raise FormatError(f"{path}: /indptr must rise from 0 to nnzb = {nnzb}")
    rows = np.repeat(np.arange(p, dtype=np.int64), np.diff(indptr))
    return _bsr_from_blocks(path, n, m, rows, cols, blocks, "block")


def read(path, values=None):
    """A blockmm file of either format, told apart by its signature."""
    return read_h5(path, values) if has_hdf5_signature(path) else read_bin(path, values)


# ---------------------------------------------------------------------------------------------
# writing


def _blocks_of(bsr, values):
    """(n, m, rows, cols, blocks, indptr) of a square bsr_matrix with square blocks in canonical
    form: sorted by (i, j), repeats summed, all-zero blocks left out (they count as absent)."""
    if not sp.isspmatrix_bsr(bsr):
        raise TypeError("expected a scipy.sparse.bsr_matrix")
    n, ncols = bsr.shape
    m, mb = bsr.blocksize
    if n != ncols or m != mb:
        raise ValueError(f"blockmm stores square matrices of square blocks; this one is {n} x {ncols} "
                         f"in {m} x {mb} blocks")
    if n > MAX_ORDER:
        raise ValueError(f"n = {n} does not fit the formats' int32")
    bsr = bsr.copy()
    bsr.sum_duplicates()  # also sorts the indices
    dtype = WIDTHS[values]
    data = bsr.data
    high = np.iinfo(dtype).max
    if data.size and (data.min() < 0 or data.max() > high or np.any(data != np.floor(data))):
        raise ValueError(f"values must be integers in [0, {high}] for {values}")
    rows = np.repeat(np.arange(n // m, dtype=np.int64), np.diff(bsr.indptr))
    keep = data.reshape(len(rows), m * m).any(axis=1)
    rows, cols, data = rows[keep], bsr.indices[keep].astype(np.int64), data[keep].astype(dtype)
    indptr = np.zeros(n // m + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n // m), out=indptr[1:])
    return n, m, rows, cols, data, indptr


def _atomic_write(path, write_to):
    """Calls write_to(temporary) for a new file beside `path`, syncs it and renames it over `path`;
    on any failure the temporary file goes and `path` is untouched."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        write_to(temporary)
        fd = os.open(temporary, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


def write_bin(path, bsr, values="u16"):
    """Writes a square bsr_matrix as a COL380 binary file in blockmm's canonical form (records
    sorted by (i, j), no all-zero block); values "u16" (an input for blockmm) or "u32" (a product)."""
    n, m, rows, cols, data, _ = _blocks_of(bsr, values)
    k = len(rows)
    if k > 2**31 - 1:
        raise ValueError(f"{k} blocks are more than the binary format's int32 k holds")
    records = np.zeros(k, dtype=record_dtype(m, WIDTHS[values]))
    records["i"], records["j"], records["v"] = rows, cols, data

    def write_to(temporary):
        with open(temporary, "wb") as f:
            f.write(np.array([n, m, k], dtype="<i4").tobytes())
            records.tofile(f)

    _atomic_write(path, write_to)


def write_h5(path, bsr, values="u16"):
    """Writes a square bsr_matrix in blockmm's HDF5 BSR layout, canonical as write_bin."""
    import h5py

    n, m, _, cols, data, indptr = _blocks_of(bsr, values)

    def write_to(temporary):
        with h5py.File(temporary, "w") as h5:
            h5.attrs["format"] = "blockmm-bsr"
            for name, value in (("version", 1), ("n", n), ("m", m), ("nnzb", len(cols))):
                h5.attrs[name] = np.int64(value)
            h5.create_dataset("indptr", data=indptr.astype("<i8"))
            h5.create_dataset("indices", data=cols.astype("<i4"))
            h5.create_dataset("data", data=data.reshape(len(cols), m, m))

    _atomic_write(path, write_to)


def write(path, bsr, values="u16", fmt="auto"):
    """Writes `bsr` as HDF5 when fmt is "h5" (or "auto" and the name ends in .h5/.hdf5), else binary."""
    if fmt == "auto":
        fmt = "h5" if str(path).endswith((".h5", ".hdf5")) else "bin"
    (write_h5 if fmt == "h5" else write_bin)(path, bsr, values)
