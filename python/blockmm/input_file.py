"""Opening an input as the C++ tools open theirs (src/io/binary_format.cpp, input_file.cpp): by
one descriptor that every later read goes through (a name swapped after the open changes
nothing), without waiting on a FIFO (O_NONBLOCK), and only when it is a regular file. The kind
of file is told from its bytes, never from its name.
"""
import os
import stat

from .errors import FormatError

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
MATRIX_MARKET_SIGNATURE = b"%%MatrixMarket"
ZIP_SIGNATURE = b"PK\x03\x04"


class InputFile:
    """An open regular file: `fd`, `path` (for messages), `size` in bytes at the open."""

    def __init__(self, path):
        self.path = os.fspath(path)
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as error:
            raise FormatError(f"{self.path}: cannot open: {error.strerror}") from None
        try:
            st = os.fstat(self.fd)
            if stat.S_ISDIR(st.st_mode):
                raise FormatError(f"{self.path}: is a directory")
            if not stat.S_ISREG(st.st_mode):
                raise FormatError(f"{self.path}: is not a regular file (a pipe or device cannot be read at record "
                                  f"offsets)")
        except BaseException:
            os.close(self.fd)
            raise
        self.size = st.st_size

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def read_at(self, offset, size):
        """Up to `size` bytes from `offset` (fewer at the end of the file)."""
        return os.pread(self.fd, size, offset)

    def read_exactly(self, offset, view):
        """Fills the writable buffer `view` from `offset`; a file that ends sooner is bad input."""
        view = memoryview(view).cast("B")
        done = 0
        while done < len(view):
            got = os.preadv(self.fd, [view[done:]], offset + done)
            if got == 0:
                raise FormatError(f"{self.path}: the file shrank while it was read (it ends at byte {offset + done})")
            done += got

    def fileobj(self):
        """A buffered binary file object on a duplicate of the descriptor, at offset 0."""
        handle = os.fdopen(os.dup(self.fd), "rb")
        handle.seek(0)
        return handle

    def hdf5_superblock_offset(self):
        """Where the HDF5 signature is, or None: at 0 or, after a user block, at 512, 1024, 2048, ...
        (the HDF5 format's rule; libhdf5 and blockmm search the same places)."""
        offset = 0
        while offset + len(HDF5_SIGNATURE) <= self.size:
            if self.read_at(offset, len(HDF5_SIGNATURE)) == HDF5_SIGNATURE:
                return offset
            offset = 512 if offset == 0 else 2 * offset
        return None

    def kind(self):
        """'mtx', 'npz', 'h5' or 'bin', from the file's bytes."""
        head = self.read_at(0, 16)
        if head[:len(MATRIX_MARKET_SIGNATURE)].lower() == MATRIX_MARKET_SIGNATURE.lower():
            return "mtx"
        if head.startswith(ZIP_SIGNATURE):
            return "npz"
        if self.hdf5_superblock_offset() is not None:
            return "h5"
        return "bin"


def kind_of(path):
    """The kind of the file at `path` ('mtx', 'npz', 'h5' or 'bin')."""
    with InputFile(path) as f:
        return f.kind()


class opened:
    """`with opened(path_or_input_file) as f`: an InputFile, closed at the end only if opened here."""

    def __init__(self, path):
        self.given = path if isinstance(path, InputFile) else None
        self.path = path

    def __enter__(self):
        self.file = self.given or InputFile(self.path)
        return self.file

    def __exit__(self, *exc):
        if self.given is None:
            self.file.close()
