"""The Python tools' entry points: blockmm-import (Matrix Market / .npz -> blockmm file),
blockmm-export (blockmm file -> Matrix Market / .npz) and blockmm-spy (block pattern PNG).
Failures are one line on stderr, "<tool>: error: <file>: <what>", with blockmm's exit codes:
2 usage, 3 bad input, 4 output failure, 1 anything else.
"""
import argparse
import os
import sys

from ._version import __version__
from .files import FormatError
from .tool_parser import ToolParser

USAGE, BAD_INPUT, OUTPUT_FAILURE, OTHER = 2, 3, 4, 1


class UsageError(Exception):
    pass


class OutputError(Exception):
    pass


def _parser(tool, description, operands="IN OUT"):
    parser = ToolParser(tool, operands, description=description,
                        epilog="Exit codes: 0 success, 1 other failure, 2 usage, 3 bad input, 4 output failure, "
                               "5 out of memory.")
    parser.add_argument("--version", action="version", version=f"{tool} {__version__}")
    return parser


def _run(tool, body):
    try:
        return body()
    except UsageError as error:
        print(f"{tool}: error: {error} (see {tool} --help)", file=sys.stderr)
        return USAGE
    except FormatError as error:
        print(f"{tool}: error: {error}", file=sys.stderr)
        return BAD_INPUT
    except OutputError as error:
        print(f"{tool}: error: {error}", file=sys.stderr)
        return OUTPUT_FAILURE
    except MemoryError:
        print(f"{tool}: error: out of memory", file=sys.stderr)
        return 5
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # a bug or an unforeseen library failure: still one line
        print(f"{tool}: error: {type(error).__name__}: {error}", file=sys.stderr)
        return OTHER


def _input_kind(path):
    from .foreign import kind_of

    try:
        if os.path.isdir(path):
            raise FormatError(f"{path}: is a directory")
        return kind_of(path)
    except OSError as error:
        raise FormatError(f"{path}: cannot open: {error.strerror}") from None


def _write(path, write):
    """Runs a writer, reporting OS failures as output errors naming the file."""
    try:
        write()
    except OSError as error:
        raise OutputError(f"{path}: cannot write: {error.strerror or error}") from None


def _load_foreign(tool, path, kind, block_size, pad, values):
    from . import foreign
    from .files import WIDTHS
    import numpy as np

    if block_size is None:
        raise UsageError(f"{path} is a {'Matrix Market' if kind == 'mtx' else '.npz'} file: "
                         f"--block-size M is required")
    def read(high):
        return foreign.read_matrix_market(path, high) if kind == "mtx" else foreign.read_npz(path, high)

    try:
        coo = read(int(np.iinfo(WIDTHS[values]).max))
    except FormatError as error:
        # Values above 65535 that fit uint32: most likely a product, which --values u32 takes.
        if values == "u16" and tool == "blockmm-import":
            try:
                read(int(np.iinfo(np.uint32).max))
            except FormatError:
                raise error from None
            raise FormatError(f"{error}; a product (uint32 values)? import it with --values u32") from None
        raise
    try:
        return foreign.to_bsr(coo, block_size, pad=pad, path=path, values=values)
    except ValueError as error:
        if isinstance(error, FormatError):
            raise
        raise UsageError(str(error)) from None


def import_main(argv=None):
    tool = "blockmm-import"
    parser = _parser(tool, "Convert a Matrix Market (.mtx: coordinate; integer, real with integral values, or "
                           "pattern; general or symmetric) or scipy.sparse .npz file (csr, csc, coo, bsr, ...) "
                           "into a blockmm input: COL380 binary, or HDF5 (BSR) when OUT ends in .h5/.hdf5. The "
                           "input kind is told from the file's signature.")
    parser.add_argument("input", metavar="IN", help="Matrix Market or .npz file")
    parser.add_argument("output", metavar="OUT", help="blockmm file to write")
    parser.add_argument("--block-size", "-m", "--m", type=int, required=True, metavar="M", help="block order m")
    parser.add_argument("--pad", action="store_true",
                        help="pad n with zero rows and columns up to a multiple of M (and a rectangular matrix to "
                             "square); without it such a matrix is refused")
    parser.add_argument("--to", choices=["auto", "bin", "h5"], default="auto",
                        help="output format (auto: h5 for .h5/.hdf5 names, else bin)")
    parser.add_argument("--values", choices=["u16", "u32"], default="u16",
                        help="u16: an input for blockmm (values in [0, 65535]); u32: a product, e.g. a reference "
                             "C to compare with blockmm-cmp")
    args = parser.parse_args(argv)

    def body():
        from . import files

        if args.block_size <= 0:
            raise UsageError(f"--block-size {args.block_size} must be positive")
        fmt = _output_format(args.output, args.to, ("bin", "h5"), tool)
        kind = _input_kind(args.input)
        if kind in ("bin", "h5"):
            raise FormatError(f"{args.input}: not a Matrix Market or .npz file (it is no Matrix Market text and no "
                              f"zip archive); blockmm reads blockmm files directly, blockmm-convert converts them")
        bsr = _load_foreign(tool, args.input, kind, args.block_size, args.pad, args.values)
        _write(args.output, lambda: files.write(args.output, bsr, values=args.values, fmt=fmt))
        return 0

    return _run(tool, body)


def _output_format(path, requested, allowed, tool):
    """The output format from --to or the name; a name that says another format is refused."""
    by_name = {".h5": "h5", ".hdf5": "h5", ".bin": "bin", ".mtx": "mtx", ".npz": "npz"}
    suffix = os.path.splitext(path)[1].lower()
    named = by_name.get(suffix)
    if requested == "auto":
        if named in allowed:
            return named
        if named is not None:
            raise UsageError(f"{path}: {tool} does not write {named} files (it writes {', '.join(allowed)})")
        if "bin" in allowed:
            return "bin"
        raise UsageError(f"{path}: say the format with --to {'|'.join(allowed)} or an extension "
                         f"({', '.join('.' + a for a in allowed)})")
    if named is not None and named != requested:
        raise UsageError(f"{path}: the name says {named}, but --to says {requested}")
    return requested


def export_main(argv=None):
    tool = "blockmm-export"
    parser = _parser(tool, "Convert a blockmm file (COL380 binary or HDF5, input or product, told apart by the "
                           "signature) into Matrix Market (coordinate integer general, non-zero entries) or a "
                           "scipy.sparse .npz (load it with scipy.sparse.load_npz).")
    parser.add_argument("input", metavar="IN", help="blockmm file (binary or HDF5)")
    parser.add_argument("output", metavar="OUT", help="file to write (.mtx or .npz)")
    parser.add_argument("--to", choices=["auto", "mtx", "npz"], default="auto",
                        help="output format (auto: from OUT's extension)")
    parser.add_argument("--sparse-format", choices=["csr", "csc", "coo", "bsr"], default="csr",
                        help="scipy format stored in the .npz (bsr keeps blockmm's blocks)")
    args = parser.parse_args(argv)

    def body():
        from . import files, foreign

        fmt = _output_format(args.output, args.to, ("mtx", "npz"), tool)
        kind = _input_kind(args.input)
        if kind in ("mtx", "npz"):
            raise FormatError(f"{args.input}: already a {'Matrix Market' if kind == 'mtx' else '.npz'} file; "
                              f"blockmm-export reads blockmm files")
        bsr = files.read(args.input)
        if fmt == "mtx":
            comment = f" blockmm {__version__}: {os.path.basename(args.input)}, n = {bsr.shape[0]}, " \
                      f"m = {bsr.blocksize[0]}"
            _write(args.output, lambda: foreign.write_matrix_market(args.output, bsr, comment=comment))
        else:
            _write(args.output, lambda: foreign.write_npz(args.output, bsr, args.sparse_format))
        return 0

    return _run(tool, body)


def spy_main(argv=None):
    tool = "blockmm-spy"
    parser = _parser(tool, operands="IN OUT.png", description="Draw the block pattern of a matrix as a PNG: each pixel cell a group of block-rows x "
                           "block-columns, shaded by how many non-zero blocks it holds (log scale), empty cells "
                           "white; axes in block indices, n, m and nnzb in the title.")
    parser.add_argument("input", metavar="IN", help="blockmm file, or Matrix Market / .npz with --block-size")
    parser.add_argument("output", metavar="OUT.png", help="PNG to write")
    parser.add_argument("--cells", type=int, default=512,
                        help="at most this many cells a side (default 512); bigger grids group blocks")
    parser.add_argument("--block-size", "-m", "--m", type=int, metavar="M", help="block order for .mtx/.npz inputs")
    parser.add_argument("--pad", action="store_true", help="as blockmm-import --pad")
    args = parser.parse_args(argv)

    def body():
        from . import files, spy

        if args.cells <= 0:
            raise UsageError(f"--cells {args.cells} must be positive")
        if not args.output.lower().endswith(".png"):
            raise UsageError(f"{args.output}: blockmm-spy writes PNG files; name it .png")
        kind = _input_kind(args.input)
        if kind in ("mtx", "npz"):
            bsr = _load_foreign(tool, args.input, kind, args.block_size, args.pad, "u32")
        else:
            bsr = files.read(args.input)
        title = os.path.basename(args.input)
        _write(args.output, lambda: files._atomic_write(
            args.output, lambda temporary: spy.draw(bsr, temporary, cells=args.cells, title_name=title)))
        return 0

    return _run(tool, body)
