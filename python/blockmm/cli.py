"""The Python tools' entry points: blockmm-import (Matrix Market / .npz -> blockmm file),
blockmm-export (blockmm file -> Matrix Market / .npz) and blockmm-spy (block pattern PNG).
Failures are one line on stderr, "<tool>: error: <file>: <what>", with blockmm's exit codes:
2 usage, 3 bad input, 4 output failure, 5 out of memory, 1 anything else. Inputs are read
through the package's validating readers, outputs written through atomic_output.py.
"""
import argparse
import os
import stat

from ._version import __version__
from .errors import (BAD_INPUT, OTHER, OUT_OF_MEMORY, OUTPUT_FAILURE, USAGE, FormatError, OutputError,
                     UsageError, quoted, say)
from .tool_parser import ToolParser

EXIT_CODES = "Exit codes: 0 success, 1 other failure, 2 usage, 3 bad input, 4 output failure, 5 out of memory."
ENVIRONMENT = ("Environment: BLOCKMM_LIBRARY_TIMEOUT=S (seconds libhdf5 may take on a file's structure before the "
               "file counts as corrupt, default 60); BLOCKMM_PROGRESS_INTERVAL=S (seconds between progress lines in "
               "logs, default 5).")


def _parser(tool, description, operands="IN OUT"):
    parser = ToolParser(tool, operands, description=description, epilog=f"{EXIT_CODES} {ENVIRONMENT}")
    parser.add_argument("--version", action="version", version=f"{tool} {__version__}")
    return parser


def _run(tool, body):
    from .atomic_output import install_cleanup_handlers

    install_cleanup_handlers()
    try:
        _check_environment()
        return body()
    except UsageError as error:
        say(f"{tool}: error: {error} (see {tool} --help)")
        return USAGE
    except FormatError as error:
        say(f"{tool}: error: {error}")
        return BAD_INPUT
    except OutputError as error:
        say(f"{tool}: error: {error}")
        return OUTPUT_FAILURE
    except MemoryError:
        say(f"{tool}: error: out of memory")
        return OUT_OF_MEMORY
    except Exception as error:  # a bug or an unforeseen library failure: still one line
        say(f"{tool}: error: {type(error).__name__}: {error}")
        return OTHER


def _check_environment():
    """The tools' BLOCKMM_* variables, read as blockmm reads them: a value outside the documented
    ones is a usage error before any file is touched, never silently the default."""
    from .guarded_reader import library_timeout_setting
    from .progress import progress_interval

    progress_interval()
    try:
        library_timeout_setting()
    except ValueError as error:
        raise UsageError(str(error)) from None


def _open_input(path):
    from .input_file import InputFile

    return InputFile(path)


def _parts_of(infile):
    """The part files of a parted HDF5 input, as its user block names them ("blockmm-parts
    generation=<8 hex> parts=<P>" in its first 512 bytes: src/io/output_parts.hpp), beside it."""
    import re

    found = re.match(rb"blockmm-parts generation=([0-9a-f]{8}) parts=([0-9]{1,5})\n", infile.read_at(0, 512))
    if not found or not 1 <= int(found.group(2)) <= 4096:
        return []
    folder, base = os.path.split(infile.path)
    return [os.path.join(folder, f"{base}.part-{found.group(1).decode()}-{k:04d}") for k in range(int(found.group(2)))]


def _check_not_an_input(tool, output, infile):
    """The tools never write over their inputs: the one place that decides it for the Python tools
    (as src/io/same_file.cpp does for the C++ ones): the output is the input through any path, or
    one of a parted HDF5 input's part files. A character device (/dev/null) is written in place."""
    try:
        out = os.stat(output)
    except OSError:
        return
    if stat.S_ISCHR(out.st_mode):
        return
    given = os.fstat(infile.fd)
    if (out.st_dev, out.st_ino) == (given.st_dev, given.st_ino):
        raise UsageError(f"{output}: the output is the input {infile.path} (the same file); {tool} never writes over "
                         f"its inputs")
    for part in _parts_of(infile):
        try:
            named = os.stat(part)
        except OSError:
            continue
        if (out.st_dev, out.st_ino) == (named.st_dev, named.st_ino):
            raise UsageError(f"{output}: the output is the part file {os.path.basename(part)} of the parted input "
                             f"{infile.path}; {tool} never writes over its inputs")


def _write(tool, path, write):
    from .atomic_output import write_atomically

    write_atomically(path, write, tool)


def _fits_uint32(message):
    """Whether the value a reader refused as outside [0, 65535] is a whole number uint32 holds."""
    import re
    found = re.search(r"value (\S+) is not an integer in \[0, 65535\]", message)
    try:
        value = float(found.group(1)) if found else -1.0
    except ValueError:
        return False
    return 0 <= value <= 4294967295 and value == int(value)


def _load_foreign(tool, infile, kind, block_size, pad, values):
    """A Matrix Market or .npz input -> Blocks (blocks.py) for blockmm."""
    from . import matrix_market, npz_format
    from .blocks import WIDTHS, blocks_from_entries, check_block_size
    import numpy as np

    if block_size is None:
        raise UsageError(f"{infile.path} is a {'Matrix Market' if kind == 'mtx' else '.npz'} file: "
                         f"--block-size M is required")
    check_block_size(block_size)
    high = int(np.iinfo(WIDTHS[values]).max)
    reader = matrix_market.read_matrix_market if kind == "mtx" else npz_format.read_npz
    try:
        shape, rows, cols, data = reader(infile, high)
    except FormatError as error:
        # Values above 65535 that fit uint32: most likely a product, which --values u32 takes.
        if values == "u16" and tool == "blockmm-import" and _fits_uint32(str(error)):
            raise FormatError(f"{error}; a product (uint32 values)? import it with --values u32") from None
        raise
    return blocks_from_entries(infile.path, shape, rows, cols, data, block_size, pad, values,
                               warn=lambda line: say(f"{tool}: {line}"))


def import_main(argv=None):
    tool = "blockmm-import"
    parser = _parser(tool, "Convert a Matrix Market (.mtx: coordinate; integer, real with integral values, or "
                           "pattern; general or symmetric) or scipy.sparse .npz file (csr, csc, coo, bsr, dia) "
                           "into a blockmm input: COL380 binary, or HDF5 (BSR) when OUT ends in .h5/.hdf5. The "
                           "input kind is told from the file's contents. Repeated entries are summed.")
    parser.add_argument("input", metavar="IN", help="Matrix Market or .npz file")
    parser.add_argument("output", metavar="OUT", help="blockmm file to write")
    parser.add_argument("--block-size", "-m", "--m", type=int, required=True, metavar="M", help="block order m, 1 to 46340")
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
        from .binary_format import write_binary
        from .blocks import check_block_size
        from .hdf5_writer import write_hdf5

        check_block_size(args.block_size)
        fmt = _output_format(args.output, args.to, ("bin", "h5"), tool)
        with _open_input(args.input) as infile:
            kind = infile.kind()
            if kind in ("bin", "h5"):
                raise FormatError(f"{args.input}: not a Matrix Market or .npz file (it is no Matrix Market text and "
                                  f"no zip archive); blockmm reads blockmm files directly, blockmm-convert converts "
                                  f"them")
            _check_not_an_input(tool, args.output, infile)
            blocks = _load_foreign(tool, infile, kind, args.block_size, args.pad, args.values)

        def write(output):
            (write_binary if fmt == "bin" else write_hdf5)(output.fd, blocks)

        _write(tool, args.output, write)
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
                           "contents) into Matrix Market (coordinate integer general, non-zero entries) or a "
                           "scipy.sparse .npz (load it with scipy.sparse.load_npz). The input is read a piece at a "
                           "time, in several passes: memory follows a piece (csc: the output's arrays), not the "
                           "matrix; long exports show their progress on stderr.")
    parser.add_argument("input", metavar="IN", help="blockmm file (binary or HDF5)")
    parser.add_argument("output", metavar="OUT", help="file to write (.mtx or .npz)")
    parser.add_argument("--to", choices=["auto", "mtx", "npz"], default="auto",
                        help="output format (auto: from OUT's extension)")
    parser.add_argument("--sparse-format", choices=["csr", "csc", "coo", "bsr"], default="csr",
                        help="scipy format stored in the .npz (bsr keeps blockmm's blocks)")
    parser.add_argument("--compress", action="store_true",
                        help=".npz: deflate the arrays (zlib level 1; smaller, several times slower). Default: "
                             "stored uncompressed, written at the speed of the disk")
    parser.add_argument("--progress", choices=["auto", "bar", "lines", "none"], default="auto",
                        help="auto (default): a line redrawn on a terminal, plain lines in logs and pipes")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress display (--progress none)")
    args = parser.parse_args(argv)

    def body():
        from . import matrix_market, npz_format
        from .errors import escape_controls
        from .files import open_block_file
        from .progress import CountedSource, Progress, progress_interval

        fmt = _output_format(args.output, args.to, ("mtx", "npz"), tool)
        if args.compress and fmt != "npz":
            raise UsageError("--compress applies to .npz output")
        style = "none" if args.quiet else args.progress
        interval = progress_interval() if style != "none" else 5.0
        infile = _open_input(args.input)
        try:
            kind = infile.kind()
            if kind in ("mtx", "npz"):
                raise FormatError(f"{args.input}: already a {'Matrix Market' if kind == 'mtx' else '.npz'} file; "
                                  f"blockmm-export reads blockmm files")
            _check_not_an_input(tool, args.output, infile)
        except BaseException:
            infile.close()
            raise
        source = open_block_file(infile)
        try:
            known = getattr(source, "nonzero_counts", None) is not None
            passes = (1 if known else 2) if fmt == "mtx" else npz_format.passes(args.sparse_format, args.compress,
                                                                                    known)
            progress = Progress(tool, f"writing {escape_controls(args.output)}", passes * source.nnzb, style,
                                interval=interval)
            counted = CountedSource(source, progress)

            def write(output):
                with output.handle() as handle:
                    if fmt == "mtx":
                        comment = f" blockmm {__version__}: {os.path.basename(args.input)}, n = {source.n}, " \
                                  f"m = {source.m}"
                        matrix_market.write_matrix_market(handle, counted, comment=comment)
                    else:
                        npz_format.write_npz(handle, counted, args.sparse_format, compress=args.compress)

            try:
                _write(tool, args.output, write)
            finally:
                progress.finish()
        finally:
            source.close()
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
                        help="at most this many cells a side (default 512, at most 4096); bigger grids group blocks")
    parser.add_argument("--block-size", "-m", "--m", type=int, metavar="M", help="block order for .mtx/.npz inputs")
    parser.add_argument("--pad", action="store_true", help="as blockmm-import --pad")
    args = parser.parse_args(argv)

    def body():
        import matplotlib

        from . import spy
        from .errors import escape_controls
        from .files import open_block_file

        # matplotlib applies a matplotlibrc of the working directory (or of $MATPLOTLIBRC, or the
        # user's config) when imported: a file nobody named, which could make the drawing run
        # LaTeX on the input's name (text.usetex) or change the picture. The tool draws with
        # matplotlib's own defaults, whatever folder it runs in.
        matplotlib.rcdefaults()
        if not 0 < args.cells <= 4096:
            raise UsageError(f"--cells {quoted(args.cells)} must lie in [1, 4096]")
        if not args.output.lower().endswith(".png"):
            raise UsageError(f"{args.output}: blockmm-spy writes PNG files; name it .png")
        infile = _open_input(args.input)
        try:
            kind = infile.kind()
            _check_not_an_input(tool, args.output, infile)
            if kind in ("mtx", "npz"):
                with infile:
                    matrix = _load_foreign(tool, infile, kind, args.block_size, args.pad, "u32")
                counted = spy.block_counts(matrix, args.cells)
            else:
                matrix = open_block_file(infile)
                try:
                    counted = spy.block_counts(matrix, args.cells)
                finally:
                    matrix.close()
        except BaseException:
            infile.close()
            raise
        # The name as text matplotlib draws: undecodable bytes and controls as \xHH, no mathtext ($).
        title = escape_controls(os.path.basename(args.input).encode("utf-8", "surrogateescape")
                                .decode("utf-8", "backslashreplace")).replace("$", r"\$")

        def write(output):
            with output.handle() as handle:
                spy.draw(matrix, handle, cells=args.cells, title_name=title, counted=counted)

        _write(tool, args.output, write)
        return 0

    return _run(tool, body)
