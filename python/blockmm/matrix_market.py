"""Matrix Market coordinate files (https://math.nist.gov/MatrixMarket/formats.html), read and
written here rather than by scipy.io (whose reader spins for ever on a file that ends after its
header, and narrows indices to int32 so that row 2^32 + 2 silently becomes row 2).

Reading: the banner ("%%MatrixMarket matrix coordinate integer|real|pattern general|symmetric"),
comment and blank lines, the size line (rows, columns, entries), then the entries, parsed by
numpy as float64 (exact for every index blockmm can take and every value up to 2^53) and checked
before anything is narrowed: indices inside [1, rows] and [1, columns], values integers in
[0, high], as many entries as the size line says. A failure names the line (1-based, header,
comments and blank lines counted). Symmetric files are mirrored; repeated entries are summed
later (blocks.blocks_from_entries).
"""
import warnings

import numpy as np

from .errors import FormatError, printable_ascii, quoted
from .input_file import opened

FIELDS = ("integer", "real", "pattern")
SYMMETRIES = ("general", "symmetric")
MAX_INDEX = 2**31 - 1  # blockmm's n is an int32


def _short(text, longest=40):
    """A field from the file as a message shows it: at most `longest` bytes (errors.quoted)."""
    return quoted(text, longest)


def _whole_number(digits):
    """The value of a string of ASCII digits; any of more than 19 digits counts as 10^19 (past
    every limit here, and Python's int() refuses strings of over 4300 digits)."""
    digits = digits.lstrip("0" if isinstance(digits, str) else b"0") or (b"0" if isinstance(digits, bytes) else "0")
    return int(digits) if len(digits) <= 19 else 10**19


def _header(path, handle):
    """(rows, columns, entries, field, symmetry, lines read) from the banner, comments and size line."""
    banner = handle.readline()
    words = banner.decode("latin-1").split()
    if len(words) != 5 or words[0].lower() != "%%matrixmarket" or words[1].lower() != "matrix":
        raise FormatError(f"{path}: line 1: not a Matrix Market banner (expected '%%MatrixMarket matrix coordinate "
                          f"FIELD SYMMETRY')")
    layout, field, symmetry = (w.lower() for w in words[2:])
    if layout != "coordinate":
        raise FormatError(f"{path}: a Matrix Market '{_short(printable_ascii(layout))}' (dense) file; blockmm-import "
                          f"reads the sparse 'coordinate' layout")
    if field not in FIELDS:
        raise FormatError(f"{path}: field '{_short(printable_ascii(field))}'; blockmm-import reads integer, real (with "
                          f"integral values) or pattern")
    if symmetry not in SYMMETRIES:
        raise FormatError(f"{path}: symmetry '{_short(printable_ascii(symmetry))}'; blockmm-import reads general or "
                          f"symmetric (values must be non-negative)")
    number = 1
    while True:
        line = handle.readline()
        if not line:
            raise FormatError(f"{path}: the file ends after its header and comments: no size line "
                              f"('rows columns entries')")
        number += 1
        text = line.strip()
        if text and not text.startswith(b"%"):
            break
    fields = text.split()
    if len(fields) != 3 or not all(f.isdigit() for f in fields):
        raise FormatError(f"{path}: line {number}: the size line must be three non-negative integers 'rows columns "
                          f"entries', not '{printable_ascii(text[:80])}'")
    rows, cols, entries = (_whole_number(f) for f in fields)
    for name, value, text in (("rows", rows, fields[0]), ("columns", cols, fields[1])):
        if value > MAX_INDEX:
            raise FormatError(f"{path}: line {number}: {_short(text.decode('ascii'))} {name} is more than blockmm's "
                              f"int32 n holds ({MAX_INDEX})")
    if symmetry == "symmetric" and rows != cols:
        raise FormatError(f"{path}: line {number}: a symmetric matrix must be square, not {rows} x {cols}")
    # No bound by rows * columns: repeated entries are summed (as scipy does), so a file may hold
    # more entries than its matrix has places. read_matrix_market bounds them by the file's size.
    return rows, cols, entries, field, symmetry, number


def _first_bad_line(infile, high, rows, cols, field, first_line):
    """(line number, what is wrong) for the first entry line blockmm cannot take; None when every
    line is fine. Only the error path reads the file this way (through the same descriptor)."""
    pattern = field == "pattern"
    wanted = 2 if pattern else 3
    with infile.fileobj() as f:
        for number, raw in enumerate(f, start=1):
            line = raw.strip()
            if number <= first_line or not line or line.startswith(b"%"):
                continue
            fields = [_short(printable_ascii(x)) for x in line.split(b"%", 1)[0].split()]
            if len(fields) != wanted:
                return number, f"{len(fields)} fields; an entry is 'row column{'' if pattern else ' value'}'"
            for name, text, limit in (("row", fields[0], rows), ("column", fields[1], cols)):
                if not text.isdigit() or not 1 <= _whole_number(text) <= limit:
                    return number, f"{name} index {text} is not in [1, {limit}]"
            if pattern:
                continue
            try:
                value = float(fields[2])
            except ValueError:
                value = None
            if value is None or not (0 <= value <= high and value == int(value)):
                return number, f"value {fields[2]} is not an integer in [0, {high}]"
    return None


def read_matrix_market(path, high=65535):
    """A coordinate Matrix Market file -> ((rows, columns), row indices, column indices, values):
    0-based int64 indices and int64 values, every one checked; symmetric files mirrored."""
    with opened(path) as infile:
        path = infile.path
        with infile.fileobj() as handle:
            n_rows, n_cols, entries, field, symmetry, header_lines = _header(path, handle)
            if entries > infile.size:  # an entry takes at least 4 bytes: "1 1\n"
                raise FormatError(f"{path}: line {header_lines}: {entries} entries cannot fit in {infile.size} bytes")
            columns = 2 if field == "pattern" else 3

            def refuse(fallback):
                bad = _first_bad_line(infile, high, n_rows, n_cols, field, header_lines)
                raise FormatError(f"{path}: line {bad[0]}: {bad[1]}" if bad else f"{path}: {fallback}")

            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # "input contained no data": counted below
                    table = np.loadtxt(handle, dtype=np.float64, comments="%", encoding="latin-1", ndmin=2)
            except (ValueError, OverflowError) as error:
                refuse(f"not a readable Matrix Market file: {error}")
            if table.size == 0:
                table = np.zeros((0, columns))
            if table.shape[1] != columns:
                refuse(f"entries of {table.shape[1]} fields; an entry is 'row column"
                       f"{'' if field == 'pattern' else ' value'}'")
            r, c = table[:, 0], table[:, 1]
            v = table[:, 2] if columns == 3 else np.ones(len(table))
            with np.errstate(invalid="ignore"):
                bad_index = ~((r >= 1) & (r <= n_rows) & (r == np.floor(r)) &
                              (c >= 1) & (c <= n_cols) & (c == np.floor(c)))
                bad_value = ~((v >= 0) & (v <= high) & (v == np.floor(v)))
            if bad_index.any() or bad_value.any():
                e = int(np.flatnonzero(bad_index | bad_value)[0])
                refuse(f"entry {e + 1} ({r[e]:g}, {c[e]:g}, {v[e]:g}) is not a valid entry")
    if len(table) != entries:
        raise FormatError(f"{path}: the size line (line {header_lines}) says {entries} entries; the file holds "
                          f"{len(table)}")
    rows = r.astype(np.int64) - 1
    cols = c.astype(np.int64) - 1
    values = v.astype(np.int64)
    del table, r, c, v
    if symmetry == "symmetric":
        mirror = rows != cols
        rows, cols, values = (np.concatenate((rows, cols[mirror])), np.concatenate((cols, rows[mirror])),
                              np.concatenate((values, values[mirror])))
    return (n_rows, n_cols), rows, cols, values


def _decimal(values):
    """Non-negative integers -> (digits as a 2-D uint8 array, right-aligned, '0'-padded; lengths)."""
    values = np.asarray(values, dtype=np.uint64)
    width = max(1, len(str(int(values.max())))) if len(values) else 1
    digits = np.empty((len(values), width), dtype=np.uint8)
    rest = values.copy()
    lengths = np.ones(len(values), dtype=np.int64)
    for place in range(width - 1, -1, -1):
        digits[:, place] = (rest % 10).astype(np.uint8) + 48
        rest //= 10
        if place < width - 1:
            lengths += (values >= 10 ** (width - 1 - place)).astype(np.int64)
    return digits, lengths


def format_entries(rows, cols, values):
    """Entry lines 'row column value\\n' (indices 1-based as given) as bytes, made by numpy."""
    columns = [_decimal(rows), _decimal(cols), _decimal(values)]
    width = sum(d.shape[1] + 1 for d, _ in columns)
    text = np.empty((len(rows), width), dtype=np.uint8)
    keep = np.zeros((len(rows), width), dtype=bool)
    at = 0
    for k, (digits, lengths) in enumerate(columns):
        w = digits.shape[1]
        text[:, at:at + w] = digits
        keep[:, at:at + w] = np.arange(w)[None, :] >= (w - lengths)[:, None]
        text[:, at + w] = ord("\n") if k == 2 else ord(" ")
        keep[:, at + w] = True
        at += w + 1
    return text[keep].tobytes()


def write_matrix_market(handle, source, comment="", piece_bytes=None):
    """Writes `source` as a coordinate integer general file (non-zero entries, row-major order)
    through the binary file object `handle`: one pass to count the entries, one to write them."""
    from .blocks import csr_pieces, nonzero_counts

    nnz = nonzero_counts(source, piece_bytes)[0]
    handle.write(b"%%MatrixMarket matrix coordinate integer general\n")
    for line in comment.splitlines() if comment else []:
        handle.write(b"%" + printable_ascii(line).encode("ascii") + b"\n")
    handle.write(f"{source.n} {source.n} {nnz}\n".encode("ascii"))
    for element_rows, counts, cols, values in csr_pieces(source, piece_bytes):
        handle.write(format_entries(np.repeat(element_rows + 1, counts), cols + 1, values))
