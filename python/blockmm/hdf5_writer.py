"""blockmm's HDF5 BSR files written as src/io/hdf5_writer.cpp writes them (docs/design.md
departure 3): libhdf5 lays out the attributes and contiguous datasets, their storage allocated
at creation and never filled, into a sparse buffer in memory (a few KB of metadata, whatever the
datasets' sizes); the metadata and then each dataset's contents are written through the output's
descriptor at their offsets, a piece at a time. libhdf5 never writes the output itself, so a full
disk is an ordinary write error (libhdf5 1.10 crashes at exit after a failed close of a file it
was writing) and the values never pass through its Python file callbacks.
"""
import os

import numpy as np

from .blocks import IndptrStream
from .hdf5_bsr import FORMAT, VERSION

PAGE = 4096


class SparseFile:
    """A file object for h5py's fileobj driver that keeps only the pages written (reads of any
    other byte give zeros) and remembers the size libhdf5 set last."""

    def __init__(self):
        self.pages = {}
        self.position = 0
        self.size = 0

    def seek(self, offset, whence=0):
        self.position = offset if whence == 0 else (self.position + offset if whence == 1 else self.size + offset)
        return self.position

    def tell(self):
        return self.position

    def readinto(self, buffer):
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view):
            page, within = divmod(self.position + done, PAGE)
            count = min(PAGE - within, len(view) - done)
            stored = self.pages.get(page)
            view[done:done + count] = stored[within:within + count] if stored is not None else bytes(count)
            done += count
        self.position += done
        return done

    def read(self, size=-1):
        buffer = bytearray(max(0, (self.size - self.position) if size < 0 else size))
        return bytes(buffer[:self.readinto(buffer)])

    def write(self, data):
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            page, within = divmod(self.position + done, PAGE)
            count = min(PAGE - within, len(view) - done)
            self.pages.setdefault(page, bytearray(PAGE))[within:within + count] = view[done:done + count]
            done += count
        self.position += done
        self.size = max(self.size, self.position)
        return done

    def truncate(self, size=None):
        self.size = self.position if size is None else size
        for page in [p for p in self.pages if p * PAGE >= self.size]:
            del self.pages[page]
        return self.size

    def flush(self):
        pass

    def runs(self):
        """(offset, bytes) of the pages written, neighbours joined, cut at the size."""
        run_start, run = None, bytearray()
        for page in sorted(self.pages):
            if run_start is not None and page * PAGE != run_start + len(run):
                yield run_start, bytes(run)
                run_start, run = None, bytearray()
            if run_start is None:
                run_start = page * PAGE
            run += self.pages[page]
        if run_start is not None:
            yield run_start, bytes(run[:max(0, self.size - run_start)])


def _pwrite_all(fd, data, offset):
    view = memoryview(data).cast("B")
    while len(view):
        done = os.pwrite(fd, view[:1 << 30], offset)
        view, offset = view[done:], offset + done


class _Dataset:
    def __init__(self, fd, offset, dtype):
        self.fd, self.offset, self.dtype, self.written = fd, offset, np.dtype(dtype), 0

    def write(self, values):
        values = np.ascontiguousarray(values, dtype=self.dtype)
        if values.size:
            _pwrite_all(self.fd, values.reshape(-1), self.offset + self.written)
            self.written += values.nbytes


def write_hdf5(fd, source, piece_bytes=None):
    """Writes `source` (canonical: sorted, no repeats) in the BSR layout through the descriptor
    `fd`, from its start."""
    from .hdf5_bsr import require_h5py

    h5py = require_h5py("writing HDF5")
    from h5py import h5d, h5p

    n, m, nnzb = source.n, source.m, source.nnzb
    p = n // m
    shapes = {"indptr": ((p + 1,), "<i8"), "indices": ((nnzb,), "<i4"), "data": ((nnzb, m, m), source.width.str)}
    layout = SparseFile()
    offsets = {}
    with h5py.File(layout, "w") as h5:
        h5.attrs["format"] = FORMAT
        for name, value in (("version", VERSION), ("n", n), ("m", m), ("nnzb", nnzb)):
            h5.attrs[name] = np.int64(value)
        for name, (shape, dtype) in shapes.items():
            plist = h5p.create(h5p.DATASET_CREATE)
            plist.set_layout(h5d.CONTIGUOUS)
            plist.set_alloc_time(h5d.ALLOC_TIME_EARLY)
            plist.set_fill_time(h5d.FILL_TIME_NEVER)
            dataset = h5.create_dataset(name, shape=shape, dtype=dtype, dcpl=plist)
            offsets[name] = dataset.id.get_offset()  # None for an empty dataset: no storage
    for offset, data in layout.runs():
        _pwrite_all(fd, data, offset)
    sets = {name: _Dataset(fd, offsets[name], shapes[name][1]) for name in shapes}
    stream = IndptrStream(p, np.int64)
    for rows, cols, values in source.pieces(piece_bytes):
        sets["indices"].write(cols)
        sets["data"].write(values)
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
        for chunk in stream.feed(rows[starts], np.diff(np.r_[starts, len(rows)])):
            sets["indptr"].write(chunk)
    for chunk in stream.finish():
        sets["indptr"].write(chunk)
    for name, (shape, dtype) in shapes.items():
        expected = int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
        if sets[name].written != expected:
            raise ValueError(f"/{name} got {sets[name].written} of its {expected} bytes (an input changed while it "
                             f"was read?)")
    if os.fstat(fd).st_size < layout.size:
        os.ftruncate(fd, layout.size)
