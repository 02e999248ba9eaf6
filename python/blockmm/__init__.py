"""blockmm's matrices in Python: multiply scipy.sparse matrices in this process (exact,
saturating, on every core or the GPUs), read and write blockmm's files (COL380 binary, HDF5 BSR)
as scipy.sparse.bsr_matrix, convert Matrix Market and scipy .npz files, draw block patterns.

    import blockmm
    C = blockmm.multiply(A, B)            # bsr_array of uint32: min(A @ B, 2**32 - 1), exactly
    C = blockmm.read("C.bin")            # bsr_matrix, uint32 values (uint16 for inputs)
    blockmm.write("A.bin", A_bsr)         # uint16 input for blockmm (values="u32" for products)
"""
from . import spy  # noqa: F401  (blockmm.spy.draw)
from ._version import __version__
from .errors import FormatError
from .files import read, read_bin, read_h5, write, write_bin, write_h5
from .foreign import read_matrix_market, read_npz, to_bsr, write_matrix_market, write_npz
from .product import multiply

__all__ = ["__version__", "multiply", "spy", "FormatError", "read", "read_bin", "read_h5", "write", "write_bin",
           "write_h5", "read_matrix_market", "read_npz", "to_bsr", "write_matrix_market", "write_npz"]
