"""blockmm's product in this process: C = A @ B of scipy.sparse matrices, exact and saturating, on
the machine's cores or its GPUs, through the compiled extension blockmm._native (the blockmm
binary's C++ core: src/python). No file is written; the operands' arrays are read where they lie
and the product's arrays are allocated once, at their final size. docs/python.md.
"""
import numbers
import signal
import threading

import numpy as np
import scipy.sparse as sp

from .blocks import MAX_ORDER, MAX_SUPPORTED_BLOCK_ORDER

# scipy >= 1.8 has the sparse arrays; before that, the matrices.
_BSR = getattr(sp, "bsr_array", None) or sp.bsr_matrix
MAX_INPUT = 65535
BACKENDS = ("auto", "cpu", "cuda", "reference")
DEFAULT_CHUNK_BYTES = 256 << 20  # the command line's --chunk-size


def _native():
    try:
        from . import _native as native  # loaded at the first product: `import blockmm` works without it
    except ImportError as e:
        raise ImportError(
            "blockmm.multiply needs blockmm's compiled extension (blockmm._native), which this installation lacks "
            f"({e}): build blockmm with CMake (it writes build/python/blockmm/_native*.so; PYTHONPATH=build/python), "
            "or pip install ./python where CMake, a C++ compiler and python3-dev are present (docs/python.md)") from e
    return native


def _count(value, what, low, high, none=0):
    """An integer option (None: `none`), checked like the command line's."""
    if value is None:
        return none
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what}={value!r}: an integer is expected")
    value = int(value)
    if value < low or value > high:
        raise ValueError(f"{what}={value}: outside [{low}, {high}]")
    return value


def _position(matrix, q):
    """(row, column) of entry q of matrix.data (flat, for bsr) in the matrix."""
    fmt = matrix.format
    if fmt == "coo":
        return int(matrix.row[q]), int(matrix.col[q])
    if fmt == "bsr":
        r, c = matrix.blocksize
        block, within = divmod(int(q), r * c)
        row = int(np.searchsorted(matrix.indptr, block, side="right")) - 1
        return row * r + within // c, int(matrix.indices[block]) * c + within % c
    major = int(np.searchsorted(matrix.indptr, q, side="right")) - 1
    return (major, int(matrix.indices[q])) if fmt == "csr" else (int(matrix.indices[q]), major)


def _check_values(matrix, name, repeated=False):
    """Every stored value an integer in [0, 65535] (each, or each sum of repeated entries)."""
    data = matrix.data.reshape(-1)
    if not data.size:
        return
    low, high = data.min(), data.max()
    if low >= 0 and high <= MAX_INPUT:
        return
    q = int(np.argmax(data > MAX_INPUT)) if high > MAX_INPUT else int(np.argmin(data))
    row, col = _position(matrix, q)
    if repeated:
        raise ValueError(f"{name}: repeated entries at (row {row}, column {col}) (0-based) sum to {int(data[q])}, "
                         f"more than {MAX_INPUT}")
    raise ValueError(f"{name}: value {int(data[q])} at (row {row}, column {col}) (0-based) is outside [0, {MAX_INPUT}]")


def _canonical(matrix):
    """No repeated entries and a row's (column's) entries ascending, computed from the arrays
    (scipy's flag is a cache that a change to the arrays leaves stale)."""
    indptr, indices = matrix.indptr, matrix.indices
    if len(indices) < 2:
        return True
    step = np.diff(indices)
    starts = indptr[1:-1]
    starts = starts[(starts > 0) & (starts < len(indices))]
    step[starts - 1] = 1  # a row's first entry follows the last row's
    return bool((step > 0).all())


def _summed(matrix):
    """An int64 copy of a csr, csc, coo or bsr matrix with its repeated entries summed. Not scipy's
    astype(), which sums them first in the matrix's own type (uint16 wraps), and in place."""
    data = matrix.data.astype(np.int64)
    if matrix.format == "coo":
        return sp.coo_matrix((data, (matrix.row, matrix.col)), shape=matrix.shape).tocsr()  # tocsr sums
    kind = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "bsr": sp.bsr_matrix}[matrix.format]
    wide = kind((data, matrix.indices, matrix.indptr), shape=matrix.shape, copy=True)
    wide.sum_duplicates()
    return wide


def _operand(matrix, name, block_size):
    """(n, m, indptr, indices, data as uint16 blocks) of a scipy.sparse matrix, its own arrays where
    it is canonical BSR (or CSR with m = 1) of uint16; checked, converted or summed otherwise."""
    if not sp.issparse(matrix):
        raise TypeError(f"{name}: a scipy.sparse matrix or array is expected, not {type(matrix).__name__}")
    if matrix.dtype.kind not in "biu":
        raise TypeError(f"{name}: integer values are expected, not {matrix.dtype} (blockmm multiplies integers in "
                        f"[0, {MAX_INPUT}] exactly)")
    rows, cols = matrix.shape
    if rows != cols:
        raise ValueError(f"{name}: the matrix is {rows} x {cols}; blockmm multiplies square matrices")
    if matrix.format == "bsr":
        r, c = matrix.blocksize
        if r != c:
            raise ValueError(f"{name}: blocks of {r} x {c}; blockmm's blocks are square")
        if block_size is not None and block_size != r:
            raise ValueError(f"{name}: blocks of {r} x {r}, not block_size={block_size} (convert with .tobsr())")
        m = r
    else:
        m = block_size or 1
        if matrix.format not in ("csr", "csc", "coo"):
            matrix = matrix.tocoo()  # dia's data holds what lies outside the matrix; dok and lil have none
    n = rows
    if n == 0 or n > MAX_ORDER:
        raise ValueError(f"{name}: n = {n} is outside blockmm's [1, {MAX_ORDER}]")
    if n % m:
        raise ValueError(f"{name}: n = {n} is not a multiple of the block size m = {m}")
    _check_values(matrix, name)
    canonical = matrix.format != "coo" and _canonical(matrix)
    if not canonical:
        matrix = _summed(matrix)  # in int64: n^2 values of 65535 fit
        _check_values(matrix, name, repeated=True)
    if not (matrix.format == "bsr" or (matrix.format == "csr" and m == 1)):
        matrix = matrix.tobsr(blocksize=(m, m))  # no repeated entries left to sum in the values' type
    data = np.ascontiguousarray(matrix.data, dtype=np.uint16).reshape(-1)  # a copy only where not uint16 already
    return (name, n, m, np.ascontiguousarray(matrix.indptr), np.ascontiguousarray(matrix.indices), data)


def multiply(a, b, *, block_size=None, backend="auto", threads=None, gpus=None, mem_budget=None, chunk_size=None):
    """C = A @ B, exact: each value min(sum a*b, 2**32 - 1), as blockmm computes it.

    a, b: scipy.sparse matrices or arrays, square, of integers in [0, 65535] (checked; repeated
    entries summed first, their sums checked). BSR keeps its m x m blocks (square); CSR, CSC, COO
    and the others are taken as blocks of block_size (default 1). Canonical BSR (or CSR with
    m = 1) of uint16 is read where it lies, without a copy.
    backend: "auto" (a GPU where one is visible and the product repays CUDA's start, else the
    CPU), "cpu", "cuda" or "reference"; threads: OpenMP threads (default: the process's OpenMP
    count); gpus: GPUs to drive (default: every GPU, one for a small product); mem_budget: device
    bytes each GPU may use; chunk_size: output bytes computed per chunk. The command line's
    options of the same names, which its messages name.

    Returns a canonical scipy.sparse.bsr_array (bsr_matrix on scipy < 1.8) of uint32 blocks m x m,
    all-zero blocks left out: the blocks the blockmm binary writes for the same operands.
    Raises TypeError (not sparse, not integers), ValueError (bad shapes, values, options),
    MemoryError, RuntimeError (no usable GPU, a device failure), KeyboardInterrupt (Ctrl-C in the
    main thread stops the product between chunks), ImportError (no compiled extension)."""
    return _multiply(a, b, block_size=block_size, backend=backend, threads=threads, gpus=gpus,
                     mem_budget=mem_budget, chunk_size=chunk_size)[0]


def _multiply(a, b, *, block_size=None, backend="auto", threads=None, gpus=None, mem_budget=None, chunk_size=None):
    """multiply(), and what ran it: {"backend", "device", "seconds": {phase: seconds}} (tests, bench)."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r} (expected auto, cpu, cuda or reference)")
    block_size = _count(block_size, "block_size", 1, MAX_SUPPORTED_BLOCK_ORDER, none=None)
    threads = _count(threads, "threads", 0, 1024)
    gpus = _count(gpus, "gpus", 0, 1024)
    mem_budget = _count(mem_budget, "mem_budget", 0, 2**62)
    chunk_bytes = _count(chunk_size, "chunk_size", 1, 2**62, none=DEFAULT_CHUNK_BYTES)
    native = _native()
    left, right = _operand(a, "A", block_size), _operand(b, "B", block_size)
    if left[1:3] != right[1:3]:
        raise ValueError(f"B: n = {right[1]}, m = {right[2]} does not match A (n = {left[1]}, m = {left[2]})")
    n, m = left[1], left[2]

    def allocate(blocks, wide):
        index = np.int64 if wide else np.int32
        return np.empty(n // m + 1, index), np.empty(blocks, index), np.empty((blocks, m, m), np.uint32)

    # Ctrl-C is the product's to catch only where Python would raise KeyboardInterrupt for it.
    interruptible = (threading.current_thread() is threading.main_thread()
                     and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    indptr, indices, data, ran, device, seconds = native.multiply(
        left, right, allocate, backend, threads, gpus, mem_budget, chunk_bytes, interruptible)
    product = _BSR((data, indices, indptr), shape=(n, n))
    return product, {"backend": ran, "device": device, "seconds": seconds}
