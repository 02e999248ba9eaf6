"""A zip archive of uncompressed .npy arrays whose sizes are known before their contents (what an
.npz of a counted matrix is), written in one pass: every array's place in the file is fixed
first, each is then written at its own offset as its pieces arrive (several arrays growing at
once, each in order, its CRC-32 kept as it goes), and the local headers, the central directory
and the end records come last. ZIP64 throughout, so that any size reads back with Python's
zipfile (numpy.load, scipy.sparse.load_npz). No byte is written twice and nothing is buffered
beyond the piece at hand.
"""
import io
import os
import queue
import struct
import threading
import time
import zlib

import numpy as np

ZIP64_EXTRA_LOCAL = struct.Struct("<HHQQ")  # id 1, size 16: uncompressed, compressed
ZIP64_EXTRA_CENTRAL = struct.Struct("<HHQQQ")  # id 1, size 24: uncompressed, compressed, offset
LOCAL = struct.Struct("<IHHHHHIIIHH")
CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
END64 = struct.Struct("<IQHHIIQQQQ")
LOCATOR64 = struct.Struct("<IIQI")
END = struct.Struct("<IHHHHIIH")
VERSION = 45  # ZIP64
ALL_ONES32 = 0xFFFFFFFF


def _dos_time():
    t = time.localtime()
    return ((t.tm_year - 1980) << 9 | t.tm_mon << 5 | t.tm_mday), (t.tm_hour << 11 | t.tm_min << 5 | t.tm_sec // 2)


def npy_header(shape, dtype):
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                                  "fortran_order": False, "shape": tuple(int(s) for s in shape)})
    return buffer.getvalue()


class _Member:
    def __init__(self, archive, name, shape, dtype, offset):
        self.archive, self.name, self.dtype = archive, (name + ".npy").encode("ascii"), np.dtype(dtype)
        self.header_offset = offset
        self.header = npy_header(shape, self.dtype)
        self.size = len(self.header) + int(np.prod(shape, dtype=object)) * self.dtype.itemsize
        self.data_offset = offset + LOCAL.size + len(self.name) + ZIP64_EXTRA_LOCAL.size
        self.end = self.data_offset + self.size
        self.written = 0
        self.crc = 0
        self._put(memoryview(self.header))

    def _put(self, view):
        if self.written + len(view) > self.size:
            raise ValueError(f"'{self.name.decode()}' gets more than its {self.size} bytes")
        self.archive.queue(self, view, self.data_offset + self.written)
        self.written += len(view)

    def _store(self, view, offset):
        """The writer thread's part, in order: the CRC and the write."""
        self.crc = zlib.crc32(view, self.crc)
        self.archive.pwrite(view, offset)

    def write(self, values):
        """Appends `values` (converted to the member's dtype)."""
        values = np.ascontiguousarray(values, dtype=self.dtype)
        if values.size:
            self._put(memoryview(values.reshape(-1)).cast("B"))


class StoredZip:
    """StoredZip(fd).add(name, shape, dtype) for each array (in file order), writes through each
    member's write(), then finish(). `fd` is written with pwrite from offset 0."""

    def __init__(self, fd):
        self.fd = fd
        self.members = []
        self.offset = 0
        # One writer thread takes the pieces in order (CRC-32 and pwrite release the GIL), so that
        # the next piece is made while this one is written; at most two pieces wait.
        self.pending = queue.Queue(maxsize=2)
        self.failure = None
        self.writer = threading.Thread(target=self._drain, name="blockmm-zip-writer", daemon=True)
        self.writer.start()

    def _drain(self):
        while True:
            item = self.pending.get()
            if item is None:
                return
            if self.failure is None:
                member, view, offset = item
                try:
                    member._store(view, offset)
                except BaseException as error:  # noqa: BLE001: raised in the caller's thread
                    self.failure = error

    def queue(self, member, view, offset):
        if self.failure is not None:
            raise self.failure
        self.pending.put((member, view, offset))

    def close(self):
        """Waits for the writes queued so far; re-raises a write's failure."""
        self.abandon()
        if self.failure is not None:
            raise self.failure

    def abandon(self):
        """Ends the writer thread (after the writes queued so far) without raising."""
        if self.writer.is_alive():
            self.pending.put(None)
            self.writer.join()

    def pwrite(self, view, offset):
        while len(view):
            done = os.pwrite(self.fd, view[:1 << 30], offset)
            view, offset = view[done:], offset + done

    def add(self, name, shape, dtype):
        member = _Member(self, name, shape, dtype, self.offset)
        self.members.append(member)
        self.offset = member.end
        return member

    def finish(self):
        self.close()
        date, clock = _dos_time()
        central = bytearray()
        for member in self.members:
            if member.written != member.size:
                raise ValueError(f"'{member.name.decode()}' got {member.written} of its {member.size} bytes (an input "
                                 f"changed while it was read?)")
            local = LOCAL.pack(0x04034B50, VERSION, 0, 0, clock, date, member.crc, ALL_ONES32, ALL_ONES32,
                               len(member.name), ZIP64_EXTRA_LOCAL.size)
            self.pwrite(memoryview(local + member.name + ZIP64_EXTRA_LOCAL.pack(1, 16, member.size, member.size)),
                        member.header_offset)
            central += CENTRAL.pack(0x02014B50, VERSION | 3 << 8, VERSION, 0, 0, clock, date, member.crc, ALL_ONES32,
                                    ALL_ONES32, len(member.name), ZIP64_EXTRA_CENTRAL.size, 0, 0, 0, 0o644 << 16,
                                    ALL_ONES32)
            central += member.name + ZIP64_EXTRA_CENTRAL.pack(1, 24, member.size, member.size, member.header_offset)
        start = self.offset
        count = len(self.members)
        end64 = start + len(central)
        tail = END64.pack(0x06064B50, END64.size - 12, VERSION | 3 << 8, VERSION, 0, 0, count, count, len(central),
                          start)
        tail += LOCATOR64.pack(0x07064B50, 0, end64, 1)
        tail += END.pack(0x06054B50, 0, 0, 0xFFFF, 0xFFFF, ALL_ONES32, ALL_ONES32, 0)
        self.pwrite(memoryview(bytes(central) + tail), start)
