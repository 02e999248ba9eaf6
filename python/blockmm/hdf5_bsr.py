"""blockmm's HDF5 BSR layout (README "Formats"), read with the rules and messages of
src/io/hdf5_bsr.cpp (written by hdf5_writer.py as blockmm writes it):
    /          attributes format = "blockmm-bsr", version = 1, n, m, nnzb (integers)
    /indptr    int64  [n/m + 1]     block-row pointers
    /indices   int32  [nnzb]        block-columns, strictly ascending within a row
    /data      uint16 or uint32 [nnzb, m, m]
Only what the file itself stores is read: external links, soft links, user-defined links,
external raw storage and virtual datasets are refused before anything follows them (any
readable file's bytes, or a FIFO that blocks for ever, would otherwise become matrix values).
Shapes and attributes are checked against the bytes the file stores before anything is
allocated. libhdf5 runs in a child process (guarded_reader.py): a file on which it crashes or
loops is bad input, exit 3.
"""
import json

import numpy as np

from .blocks import MAX_ORDER, WIDTHS, blocks_per_piece
from .binary_format import MAX_BLOCK_ORDER, check_supported_block_order
from .errors import FormatError, OtherFailure
from .guarded_reader import GuardedReader
from .input_file import InputFile

FORMAT = "blockmm-bsr"
VERSION = 1
MAX_EXPANSION = 4096  # what a compressed dataset may declare against its stored bytes (deflate: ~1032)
MAX_INDPTR_CHUNK_BYTES = 64 << 20  # libhdf5 expands a whole chunk to read any part of it
INDPTR_PIECE_ENTRIES = 1 << 17


def printable(text):
    """Text from the file, fit for a one-line message: control and non-ASCII bytes as \\xHH, short."""
    raw = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else bytes(text)
    shown = "".join(chr(b) if 0x20 <= b < 0x7f and b != 0x5c else f"\\x{b:02x}" for b in raw[:64])
    return shown + ("..." if len(raw) > 64 else "")


def shape_text(dims):
    return "(" + ", ".join(str(d) for d in dims) + (",)" if len(dims) == 1 else ")")


def claimed(value):
    return str(int(value)) if value < 2.0**64 else f"{value:.4g}"


def require_h5py(path):
    """h5py, or a one-line failure saying how to get it (it is optional for the package)."""
    try:
        import h5py
    except ImportError:
        raise OtherFailure(f"{path}: HDF5 files need the h5py package (pip install 'blockmm[hdf5]', or Debian: "
                           f"apt install python3-h5py)") from None
    return h5py


def virtual_sources_allowed(path, name, plist):
    """Whether a virtual dataset's values may be read: never, for now. This is the one place where
    blockmm's own parted output (OUT.h5 over part files OUT.h5.part-NNNN beside it, the root
    attribute `parts`) would be accepted: every source a plain file in OUT's own folder whose
    name derives from OUT's name, no links, checked before libhdf5 opens any of them."""
    return False


class _Checks:
    """The child's side: opens the file through its descriptor and checks it as hdf5_bsr.cpp does."""

    def __init__(self, channel, infile, accepted):
        import h5py
        from h5py import h5d, h5l, h5t

        self.h5py, self.h5d, self.h5l, self.h5t = h5py, h5d, h5l, h5t
        self.channel, self.path, self.size, self.accepted = channel, infile.path, infile.size, accepted
        channel.stage("reading the file's structure")
        self.handle = infile.fileobj()
        try:
            self.file = h5py.File(self.handle, "r")
        except Exception as error:  # noqa: BLE001: libhdf5's refusal, in one line
            self.handle.close()
            raise FormatError(f"{self.path}: cannot open as an HDF5 file ({type(error).__name__}: {error})") from None

    def close(self):
        self.file.close()
        self.handle.close()

    def fail(self, what):
        raise FormatError(f"{self.path}: {what}")

    def describe_type(self, t):
        h5t = self.h5t
        kind = t.get_class()
        bits = 8 * t.get_size()
        if kind == h5t.INTEGER:
            return f"{'unsigned' if t.get_sign() == h5t.SGN_NONE else 'signed'} {bits}-bit integer"
        names = {h5t.FLOAT: f"{bits}-bit float", h5t.STRING: "string", h5t.COMPOUND: "compound", h5t.ENUM: "enum",
                 h5t.ARRAY: "array", h5t.VLEN: "variable-length sequence", h5t.BITFIELD: "bitfield",
                 h5t.OPAQUE: "opaque", h5t.REFERENCE: "reference", h5t.TIME: "time"}
        return names.get(kind, "unknown type")

    def check_plain_integer(self, t, what):
        size, precision, offset = t.get_size(), t.get_precision(), t.get_offset()
        if size not in (1, 2, 4, 8) or precision != 8 * size or offset != 0:
            self.fail(f"{what} is an integer type of {size} bytes with {precision} significant bits at bit offset "
                      f"{offset}; only plain 8-, 16-, 32- or 64-bit integers are read")

    def open_attribute(self, name):
        from h5py import h5a

        if not h5a.exists(self.file.id, name.encode()):
            self.fail(f"missing root attribute '{name}' (a blockmm BSR file has attributes format = \"blockmm-bsr\", "
                      f"version = 1, n, m, nnzb)")
        attribute = h5a.open(self.file.id, name.encode())
        points = attribute.get_space().get_simple_extent_npoints()
        if points != 1:
            self.fail(f"root attribute '{name}' holds {points} values; it must hold one")
        return attribute

    def int_attribute(self, name):
        attribute = self.open_attribute(name)
        t = attribute.get_type()
        if t.get_class() != self.h5t.INTEGER:
            self.fail(f"root attribute '{name}' is a {self.describe_type(t)}; it must be an integer")
        self.check_plain_integer(t, f"root attribute '{name}'")
        value = np.zeros(attribute.shape, dtype=np.int64)  # libhdf5 converts; values past int64 clip
        attribute.read(value, mtype=self.h5t.NATIVE_INT64)
        return int(value.reshape(-1)[0])

    def string_attribute(self, name):
        attribute = self.open_attribute(name)
        t = attribute.get_type()
        if t.get_class() != self.h5t.STRING:
            self.fail(f"root attribute '{name}' is a {self.describe_type(t)}; it must be a string")
        self.channel.stage(f"reading the root attribute '{name}'")
        try:
            value = self.file.attrs[name]
        except Exception as error:  # noqa: BLE001
            self.fail(f"cannot read the root attribute '{name}' ({type(error).__name__}: {error})")
        self.channel.stage("reading the file's structure")
        if isinstance(value, np.ndarray):
            value = value.reshape(-1)[0]
        raw = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)
        return raw.split(b"\0", 1)[0].rstrip(b" ")

    def open_dataset(self, name):
        from h5py import h5o

        key = name.encode()
        if not self.file.id.links.exists(key):
            self.fail(f"missing dataset /{name} (a BSR file has /indptr, /indices and /data)")
        kind = self.file.id.links.get_info(key).type
        if kind == self.h5l.TYPE_EXTERNAL:
            self.fail(f"/{name} is an external link (to a dataset in another file); blockmm reads only datasets "
                      f"stored in the file itself")
        if kind != self.h5l.TYPE_HARD:
            self.fail(f"/{name} {'is a soft link' if kind == self.h5l.TYPE_SOFT else 'is a user-defined link'}; "
                      f"blockmm reads only datasets stored under their own name")
        dataset = h5o.open(self.file.id, key)
        if not isinstance(dataset, self.h5d.DatasetID):
            self.fail(f"/{name} is not a dataset")
        plist = dataset.get_create_plist()
        if plist.get_layout() == self.h5d.VIRTUAL and not virtual_sources_allowed(self.path, name, plist):
            if self.parted():
                self.fail(f"a blockmm output written in part files (--parts; /{name} is a virtual dataset over them): "
                          f"the Python tools read one-file HDF5; join it first with blockmm-convert "
                          f"{self.path} JOINED.h5")
            self.fail(f"/{name} is a virtual dataset (its values live in other datasets or files); blockmm reads "
                      f"only values stored in the file itself")
        external = plist.get_external_count()
        if external > 0:
            self.fail(f"/{name} keeps its values in an external file ({external} external storage entries); blockmm "
                      f"reads only values stored in the file itself")
        return self.h5py.Dataset(dataset)

    def parted(self):
        """Whether the root says this is blockmm's output in parts (docs/output.md): a `parts` attribute."""
        try:
            return bool(self.h5py.h5a.exists(self.file.id, b"parts"))
        except Exception:  # noqa: BLE001: only a message depends on it
            return False

    def dims_of(self, dataset):
        space = dataset.id.get_space()
        if space.get_simple_extent_type() != self.h5py.h5s.SIMPLE:
            return ()
        return tuple(int(d) for d in space.shape)

    def check_integer_type(self, dataset, name, wanted):
        t = dataset.id.get_type()
        if t.get_class() != self.h5t.INTEGER:
            self.fail(f"/{name} has type {self.describe_type(t)}; it must be an integer type ({wanted})")
        self.check_plain_integer(t, f"/{name}")

    def check_value_type(self, dataset):
        t = dataset.id.get_type()
        is_unsigned = t.get_class() == self.h5t.INTEGER and t.get_sign() == self.h5t.SGN_NONE
        if is_unsigned:
            self.check_plain_integer(t, "/data")
        size = t.get_size()
        if is_unsigned and size == 2 and self.accepted in (None, "u16"):
            return "u16"
        if is_unsigned and size == 4 and self.accepted in (None, "u32"):
            return "u32"
        found = self.describe_type(t)
        if self.accepted == "u16" and is_unsigned and size == 4:
            self.fail("/data holds unsigned 32-bit integers, as a blockmm product does; input matrices need unsigned "
                      "16-bit integers (uint16)")
        if self.accepted == "u16":
            self.fail(f"/data has type {found}; input matrices need unsigned 16-bit integers (uint16)")
        if self.accepted == "u32":
            self.fail(f"/data has type {found}; a product needs unsigned 32-bit integers (uint32)")
        self.fail(f"/data has type {found}; it must hold unsigned 16-bit (input) or 32-bit (product) integers")

    def check_stored(self, dataset, name):
        """hdf5_bsr.cpp check_stored: declared bytes against those the file stores, and inside it."""
        plist = dataset.id.get_create_plist()
        filters = plist.get_nfilters()
        declared = float(dataset.id.get_type().get_size())
        for d in self.dims_of(dataset):
            declared *= d
        if declared == 0:
            return
        stored = float(dataset.id.get_storage_size())
        if filters == 0 and (stored < declared or declared > self.size):
            self.fail(f"/{name} declares {claimed(declared)} bytes but the file ({self.size} bytes) stores "
                      f"{claimed(stored)} of them: truncated, never written, or stored outside the file")
        offset = dataset.id.get_offset()
        if offset is not None and float(offset) + stored > self.size:
            self.fail(f"/{name} is stored at bytes [{claimed(float(offset))}, {claimed(float(offset) + stored)}), past "
                      f"the end of the file ({self.size} bytes)")
        if filters > 0 and (stored > self.size or declared > MAX_EXPANSION * stored):
            self.fail(f"/{name} declares {claimed(declared)} bytes from {claimed(stored)} bytes of compressed storage "
                      f"in the file ({self.size} bytes): incomplete, or more than {MAX_EXPANSION} times expanded")

    def check_indptr_chunks(self, dataset):
        plist = dataset.id.get_create_plist()
        if plist.get_layout() != self.h5d.CHUNKED:
            return
        chunk = float(plist.get_chunk()[0]) * dataset.id.get_type().get_size()
        if chunk > MAX_INDPTR_CHUNK_BYTES:
            self.fail(f"/indptr is stored in chunks of {claimed(chunk)} bytes; blockmm reads chunks of at most "
                      f"{MAX_INDPTR_CHUNK_BYTES} bytes (libhdf5 expands a whole chunk to read any part of it)")

    def header(self):
        fmt = self.string_attribute("format")
        if fmt != FORMAT.encode():
            self.fail(f"root attribute format = \"{printable(fmt)}\"; expected \"{FORMAT}\"")
        version = self.int_attribute("version")
        if version != VERSION:
            self.fail(f"root attribute version = {version}; this blockmm reads version {VERSION}")
        n, m, nnzb = (self.int_attribute(name) for name in ("n", "m", "nnzb"))
        if not 0 < n <= MAX_ORDER:
            self.fail(f"root attribute n = {n} must lie in [1, {MAX_ORDER}]")
        if not 0 < m <= n:
            self.fail(f"root attribute m = {m} must lie in [1, n = {n}]")
        if m > MAX_BLOCK_ORDER:
            self.fail(f"root attribute m = {m} is too large: a block of m*m values would not fit in 2^63 bytes "
                      f"(m <= {MAX_BLOCK_ORDER})")
        if n % m != 0:
            self.fail(f"root attribute n = {n} is not a multiple of m = {m}")
        p = n // m
        if not 0 <= nnzb <= p * p:
            self.fail(f"root attribute nnzb = {nnzb} must lie in [0, (n/m)^2 = {p * p}]")
        check_supported_block_order(self.path, m)
        self.n, self.m, self.nnzb, self.p = n, m, nnzb, p
        self.indptr = self.open_dataset("indptr")
        self.indices = self.open_dataset("indices")
        self.data = self.open_dataset("data")
        self.check_integer_type(self.indptr, "indptr", "int64")
        self.check_integer_type(self.indices, "indices", "int32")
        self.width = self.check_value_type(self.data)
        for dataset, name, wanted, spelled in ((self.indptr, "indptr", (p + 1,), "(n/m + 1,)"),
                                               (self.indices, "indices", (nnzb,), "(nnzb,)"),
                                               (self.data, "data", (nnzb, m, m), "(nnzb, m, m)")):
            dims = self.dims_of(dataset)
            if dims != wanted:
                self.fail(f"/{name} has shape {shape_text(dims)}; it must be {spelled} = {shape_text(wanted)}")
        for dataset, name in ((self.indptr, "indptr"), (self.indices, "indices"), (self.data, "data")):
            self.check_stored(dataset, name)
        self.read_indptr()

    def read_indptr(self):
        """In pieces: 0 first, never decreasing, never above nnzb, nnzb last; only the rows that hold
        blocks are kept (memory by the blocks, not by n/m)."""
        self.check_indptr_chunks(self.indptr)
        self.channel.stage("reading /indptr")
        rows, firsts = [], []
        previous = 0
        for first in range(0, self.p + 1, INDPTR_PIECE_ENTRIES):
            count = min(INDPTR_PIECE_ENTRIES, self.p + 1 - first)
            piece = np.empty(count, dtype=np.int64)
            self.indptr.read_direct(piece, np.s_[first:first + count])
            self.channel.stage("reading /indptr")  # progress: the parent's timeout starts again
            if first == 0 and piece[0] != 0:
                self.fail(f"/indptr[0] = {int(piece[0])}; it must be 0")
            before = np.r_[previous, piece[:-1]]
            down = np.flatnonzero(piece < before)
            if down.size:
                e = int(down[0])
                self.fail(f"/indptr decreases at block-row {first + e - 1}: indptr[{first + e - 1}] = {int(before[e])} > "
                          f"indptr[{first + e}] = {int(piece[e])}")
            over = np.flatnonzero(piece > self.nnzb)
            if over.size:
                e = int(over[0])
                self.fail(f"/indptr[{first + e}] = {int(piece[e])} exceeds nnzb = {self.nnzb}")
            grows = np.flatnonzero(piece > before)
            rows.append(first + grows - 1)
            firsts.append(before[grows])
            previous = int(piece[-1])
        if previous != self.nnzb:
            self.fail(f"/indptr[{self.p}] = {previous}; it must equal nnzb = {self.nnzb}")
        self.rows = np.concatenate(rows).astype(np.int64)
        self.row_first = np.concatenate(firsts).astype(np.int64)

    def rows_of(self, first, count):
        """The block-row of each of blocks [first, first + count): the rows' runs, cut to the piece."""
        at0 = int(np.searchsorted(self.row_first, first, side="right")) - 1
        at1 = int(np.searchsorted(self.row_first, first + count - 1, side="right"))
        starts = np.clip(self.row_first[at0:at1], first, first + count)
        ends = np.clip(np.r_[self.row_first[at0 + 1:at1], first + count], first, first + count)
        return np.repeat(self.rows[at0:at1], ends - starts)

    def bad_index(self, block, j, row, previous):
        where = f"/indices[{block}] = {j} (block-row {row})"
        if not 0 <= j < self.p:
            self.fail(f"{where} is outside [0, {self.p})")
        if j == previous:
            self.fail(f"{where} repeats /indices[{block - 1}]: duplicate block ({row}, {j})")
        self.fail(f"{where} is below /indices[{block - 1}] = {previous}: block-columns must ascend within a row")

    def send_blocks(self, piece_bytes):
        self.channel.stage("reading blocks")
        step = blocks_per_piece(self.m, WIDTHS[self.width], piece_bytes)
        previous_row, previous_col = -1, -1
        for first in range(0, self.nnzb, step):
            count = min(step, self.nnzb - first)
            cols = np.empty(count, dtype=np.int64)  # int64 whatever is stored: nothing wraps into range
            values = np.empty((count, self.m, self.m), dtype=WIDTHS[self.width])
            self.indices.read_direct(cols, np.s_[first:first + count])
            self.data.read_direct(values, np.s_[first:first + count])
            rows = self.rows_of(first, count)
            before = np.r_[previous_col, cols[:-1]]
            before[np.r_[previous_row, rows[:-1]] != rows] = -1  # the first block of its row
            bad = np.flatnonzero((cols < 0) | (cols >= self.p) | (cols <= before))
            if bad.size:
                b = int(bad[0])
                self.bad_index(first + b, int(cols[b]), int(rows[b]), int(before[b]))
            self.channel.send(b"P", np.array([count], dtype="<i8"), rows.astype("<i4"), cols.astype("<i4"), values)
            previous_row, previous_col = int(rows[-1]), int(cols[-1])


class Hdf5File:
    """A blockmm HDF5 BSR file as a block source (blocks.py); `values` "u16" or "u32" insists on a
    width. The header is known once the constructor returns; each pass of pieces() reads the
    file again in a child process."""

    def __init__(self, path, values=None, piece_bytes=None):
        self.file = InputFile(path) if not isinstance(path, InputFile) else path
        self.path, self.values, self.piece_bytes = self.file.path, values, piece_bytes
        self._reader = None
        try:
            self._reader, self._frames, header = self._start()
        except BaseException:
            self.close()
            raise
        self.n, self.m, self.nnzb = header["n"], header["m"], header["nnzb"]
        self.width = WIDTHS[header["width"]]
        self._header = header

    def close(self):
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self.file.close()

    def _start(self):
        infile, values, piece_bytes = self.file, self.values, self.piece_bytes
        require_h5py(self.path)

        def work(channel):
            try:
                checks = _Checks(channel, infile, values)
                try:
                    checks.header()
                    channel.send(b"H", json.dumps({"n": checks.n, "m": checks.m, "nnzb": checks.nnzb,
                                                   "width": checks.width}).encode())
                    checks.send_blocks(piece_bytes)
                finally:
                    checks.close()
            except (OSError, KeyError, ValueError, RuntimeError) as error:
                if isinstance(error, (FormatError, BrokenPipeError)):
                    raise
                # libhdf5 refused a call (h5py raises these): the file is bad, as for the C++ reader.
                raise FormatError(f"{infile.path}: libhdf5 failed {channel.current} ({type(error).__name__}: "
                                  f"{error})") from None

        reader = GuardedReader(self.path, "libhdf5", work)
        frames = reader.frames()
        for tag, payload in frames:
            if tag == b"H":
                reader.patient = True
                return reader, frames, json.loads(payload.tobytes())
        raise OtherFailure(f"{self.path}: the HDF5 reader sent no header")

    def pieces(self, piece_bytes=None):
        if piece_bytes is not None and piece_bytes != self.piece_bytes:
            self.piece_bytes = piece_bytes
            if self._reader is not None:
                self._reader.close()
                self._reader = None
        if self._reader is None:
            self._reader, self._frames, header = self._start()
            if header != self._header:
                raise FormatError(f"{self.path}: the file changed while it was read")
        reader, frames = self._reader, self._frames
        self._reader = None
        m, width = self.m, self.width
        try:
            for tag, payload in frames:
                count = int(payload[:8].view("<i8")[0])
                rows = payload[8:8 + 4 * count].view("<i4")
                cols = payload[8 + 4 * count:8 + 8 * count].view("<i4")
                values = payload[8 + 8 * count:].view(width).reshape(count, m, m)
                yield rows, cols, values
        finally:
            reader.close()
