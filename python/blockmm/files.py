"""blockmm's own file formats as scipy.sparse.bsr_matrix, the package's API: the COL380 binary
format (binary_format.py) and the HDF5 BSR layout (hdf5_bsr.py), read with the C++ readers'
rules and written as blockmm writes them (atomic_output.py: a temporary file beside the
target, renamed over it only when complete; a failed write leaves the target as it was).
"""
from .atomic_output import write_atomically
from .binary_format import HEADER_BYTES, BinaryFile, record_dtype, write_binary  # noqa: F401
from .blocks import MAX_ORDER, WIDTHS, blocks_from_bsr, to_bsr_matrix, values_name  # noqa: F401
from .errors import FormatError  # noqa: F401
from .hdf5_bsr import Hdf5File
from .hdf5_writer import write_hdf5
from .input_file import HDF5_SIGNATURE, InputFile  # noqa: F401


def has_hdf5_signature(path):
    """Whether `path` holds an HDF5 superblock (at 0, or after a user block)."""
    with InputFile(path) as f:
        return f.hdf5_superblock_offset() is not None


def open_block_file(path, values=None, piece_bytes=None):
    """A blockmm file of either format (told apart by its bytes) as a block source (blocks.py);
    `path` may be an open InputFile, which the source then owns."""
    infile = path if isinstance(path, InputFile) else InputFile(path)
    try:
        if infile.hdf5_superblock_offset() is not None:
            return Hdf5File(infile, values, piece_bytes)
        return BinaryFile(infile, values, piece_bytes)
    except BaseException:
        infile.close()
        raise


def _read(opener, path, values):
    source = opener(path, values)
    try:
        return to_bsr_matrix(source)
    finally:
        source.close()


def read_bin(path, values=None):
    """A COL380 binary file -> bsr_matrix of uint16 (input) or uint32 (product) values. The width
    is told from the file size; `values` ("u16" or "u32") insists on one (an empty file fits both
    and reads as u16 unless told)."""
    return _read(BinaryFile, path, values)


def read_h5(path, values=None):
    """A blockmm HDF5 BSR file -> bsr_matrix (uint16 or uint32 values, as /data holds)."""
    return _read(Hdf5File, path, values)


def read(path, values=None):
    """A blockmm file of either format, told apart by its signature."""
    return _read(open_block_file, path, values)


def write_bin(path, bsr, values="u16"):
    """Writes a square bsr_matrix as a COL380 binary file in blockmm's canonical form (records
    sorted by (i, j), no all-zero block); values "u16" (an input for blockmm) or "u32" (a product)."""
    blocks = blocks_from_bsr(bsr, values)
    write_atomically(path, lambda output: write_binary(output.fd, blocks))


def write_h5(path, bsr, values="u16"):
    """Writes a square bsr_matrix in blockmm's HDF5 BSR layout, canonical as write_bin."""
    blocks = blocks_from_bsr(bsr, values)

    write_atomically(path, lambda output: write_hdf5(output.fd, blocks))


def write(path, bsr, values="u16", fmt="auto"):
    """Writes `bsr` as HDF5 when fmt is "h5" (or "auto" and the name ends in .h5/.hdf5), else binary."""
    if fmt == "auto":
        fmt = "h5" if str(path).endswith((".h5", ".hdf5")) else "bin"
    (write_h5 if fmt == "h5" else write_bin)(path, bsr, values)


__all__ = ["FormatError", "read", "read_bin", "read_h5", "write", "write_bin", "write_h5", "has_hdf5_signature",
           "open_block_file",
           # the module's names before the readers moved to binary_format and hdf5_bsr
           "HEADER_BYTES", "HDF5_SIGNATURE", "MAX_ORDER", "WIDTHS", "record_dtype", "values_name"]
