#!/usr/bin/env python3
"""The Python tools' readers against hostile and careless inputs (issue 43 items 1, 2, 6, 8, 9 and
11): Matrix Market indices past int32, files that end early, .npz arrays that lie, HDF5 files
that point elsewhere (links, external storage, virtual datasets) or crash libhdf5, user blocks,
names that are not UTF-8, block orders past blockmm's limit, and memory that must follow the
records, not n. Each case runs the real tools (as processes where the old code crashed or hung)
and checks the documented exit code, one error line naming the file, and nothing written.

usage: readers_test.py [unittest args]   (BLOCKMM_BUILD_DIR names the build tree)
"""
import os
import subprocess
import sys
import unittest

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tool_support import (Work, binary_bytes, blockmm, dense_of_binary, peak_memory,  # noqa: E402
                          random_dense, read_bytes, tool, write_bytes, write_npz_arrays)

SOURCE = os.environ.get("BLOCKMM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..", ".."))
HEADER = "%%MatrixMarket matrix coordinate integer general"


def write_bsr_h5(path, n, m, rows, cols, blocks, userblock=0, data=None):
    """A blockmm BSR file written with h5py here; `data(h5)` may make /data itself."""
    import h5py

    p = n // m
    indptr = np.zeros(p + 1, dtype=np.int64)
    np.cumsum(np.bincount(np.asarray(rows, dtype=np.int64), minlength=p), out=indptr[1:])
    with h5py.File(path, "w", userblock_size=userblock) as h5:
        h5.attrs["format"] = "blockmm-bsr"
        for name, value in (("version", 1), ("n", n), ("m", m), ("nnzb", len(cols))):
            h5.attrs[name] = np.int64(value)
        h5.create_dataset("indptr", data=indptr)
        h5.create_dataset("indices", data=np.asarray(cols, dtype=np.int32))
        if data is None:
            h5.create_dataset("data", data=np.asarray(blocks, dtype=np.uint16).reshape(len(cols), m, m))
        else:
            data(h5)


class MatrixMarketRules(Work):
    """Indices checked before any narrowing; a file must have its size line and its entries."""

    def import_mtx(self, text, *extra, in_process=False):
        write_bytes(self.path("in.mtx"), text)
        write_bytes(self.path("old.bin"), b"keep me")
        return tool("blockmm-import", "-m", 2, *extra, self.path("in.mtx"), self.path("old.bin"),
                    in_process=in_process, timeout=30)

    def assert_refused(self, run, *words):
        self.assert_one_error(run, 3, self.path("in.mtx"), *words)
        self.assertEqual(read_bytes(self.path("old.bin")), b"keep me")
        self.assertEqual(sorted(os.listdir(self.dir)), ["in.mtx", "old.bin"])

    def test_indices_past_int32_are_refused_not_wrapped(self):
        for entry, line, words in [("4294967298 1 7", 3, "row index 4294967298 is not in [1, 4]"),
                                   ("1 4294967299 7", 4, "column index 4294967299 is not in [1, 4]"),
                                   ("2147483648 1 7", 3, "row index 2147483648 is not in [1, 4]"),
                                   ("18446744073709551618 2 7", 3, "row index 18446744073709551618 is not in"),
                                   ("2 9223372036854775807 7", 4, "column index 9223372036854775807 is not in"),
                                   ("9" * 5000 + " 1 7", 3, "row index " + "9" * 40 + "\u2026 is not in")]:
            with self.subTest(entry=entry):
                entries = ["1 1 5", "2 2 6"]
                entries[line - 3] = entry
                run = self.import_mtx("\n".join([HEADER, "4 4 2"] + entries) + "\n", in_process=True)
                self.assert_refused(run, f"line {line}: {words}")

    def test_files_that_end_early_are_refused_at_once(self):
        # As processes: scipy's reader spun for ever on these.
        for text in [HEADER + "\n", HEADER + "\n% a comment\n%\n\n"]:
            with self.subTest(text=text):
                self.assert_refused(self.import_mtx(text), "no size line")
        run = tool("blockmm-spy", "-m", 2, self.path("in.mtx"), self.path("x.png"), in_process=False, timeout=30)
        self.assert_one_error(run, 3, "no size line")
        self.assertFalse(os.path.exists(self.path("x.png")))

    def test_size_line_and_entry_count(self):
        for lines, words in [(["4 4"], "size line"), (["4 4 2", "1 1 5"], "says 2 entries; the file holds 1"),
                             (["4 4 1", "1 1 5", "2 2 5"], "says 1 entries; the file holds 2"),
                             (["4 4 x"], "size line"), (["4 4 99"], "99 entries cannot fit in"),
                             (["2147483648 2147483648 0"], "more than blockmm's int32"),
                             (["4 4 1", "1 1 5 9"], "4 fields")]:
            with self.subTest(lines=lines):
                self.assert_refused(self.import_mtx("\n".join([HEADER] + lines) + "\n", in_process=True), words)

    def test_random_files_against_dense(self):
        rng = np.random.default_rng(43)
        for case in range(6):
            n, m = [(12, 3), (10, 5), (16, 4), (7, 7), (30, 2), (9, 1)][case]
            dense = random_dense(rng, n, 0.2, 65535)
            symmetric = case % 2 == 1
            if symmetric:
                dense = np.tril(dense) + np.tril(dense, -1).T
            r, c = np.nonzero(np.tril(dense) if symmetric else dense)
            order = rng.permutation(len(r))  # any order, and a comment and a blank line among the entries
            lines = [f"%%MatrixMarket matrix coordinate integer {'symmetric' if symmetric else 'general'}",
                     f"{n} {n} {len(r)}"] + [f"{r[e] + 1} {c[e] + 1} {dense[r[e], c[e]]}" for e in order]
            lines.insert(3, "% inside")
            lines.insert(5, "")
            write_bytes(self.path("r.mtx"), "\n".join(lines) + "\n")
            with self.subTest(case=case):
                tool("blockmm-import", "-m", m, self.path("r.mtx"), self.path("r.bin"), check=0)
                got, got_m, _ = dense_of_binary(self.path("r.bin"))
                self.assert_dense_equal(got, dense, f"case {case}")


class NpzRules(Work):
    """Arrays checked before scipy or numpy builds anything from them."""

    def attempt(self, arrays, *words, compress=False, in_process=True):
        write_npz_arrays(self.path("in.npz"), arrays, compress)
        write_bytes(self.path("old.bin"), b"keep me")
        for run in (tool("blockmm-import", "-m", 2, self.path("in.npz"), self.path("old.bin"), in_process=in_process),
                    tool("blockmm-spy", "-m", 2, self.path("in.npz"), self.path("x.png"), in_process=in_process)):
            self.assert_one_error(run, 3, self.path("in.npz"), *words)
        self.assertEqual(read_bytes(self.path("old.bin")), b"keep me")
        self.assertEqual(sorted(os.listdir(self.dir)), ["in.npz", "old.bin"])

    def test_indptr_past_the_indices_is_refused_not_a_crash(self):
        self.attempt({"format": np.array(b"csr"), "shape": np.array([4, 4]), "data": np.arange(1, 6),
                      "indices": np.array([0, 1, 2, 3, 0]), "indptr": np.array([0, 2, 5, 100000, 100000])},
                     "indptr ends at 100000, past the 5 indices", in_process=False)  # scipy corrupted its heap

    def test_index_out_of_range_is_bad_input(self):
        self.attempt({"format": np.array(b"csr"), "shape": np.array([4, 4]), "data": np.array([1, 2]),
                      "indices": np.array([0, 7]), "indptr": np.array([0, 1, 2, 2, 2])}, "indices[1] = 7 is outside [0, 4)")
        self.attempt({"format": np.array(b"coo"), "shape": np.array([4, 4]), "data": np.array([1, 2]),
                      "row": np.array([0, -1]), "col": np.array([0, 1])}, "row[1] = -1 is outside [0, 4)")
        self.attempt({"format": np.array(b"csc"), "shape": np.array([4, 4]), "data": np.array([1, 2]),
                      "indices": np.array([0, 1]), "indptr": np.array([0, 2, 1, 2, 2])}, "indptr decreases at 1")

    def test_arrays_that_lie(self):
        csr = {"format": np.array(b"csr"), "shape": np.array([4, 4]), "data": np.array([1, 2]),
               "indices": np.array([0, 1]), "indptr": np.array([0, 1, 2, 2, 2])}
        for change, words in [({"format": np.array(b"lil")}, "format 'lil'"),
                              ({"shape": np.array([4, -4])}, "shape (4, -4)"),
                              ({"shape": np.array([2**40, 4])}, "shape"),
                              ({"indptr": np.array([0, 1, 2])}, "indptr holds 3 entries"),
                              ({"data": np.array([1, 2, 3])}, "indices hold 2 entries and data 3"),
                              ({"data": np.array([1.5, 2])}, "holds 1.5"),
                              ({"data": np.array([1 + 1j, 2])}, "complex"),
                              ({"data": np.array(["a", "b"])}, "holds <U1 values")]:
            with self.subTest(change=change):
                self.attempt(dict(csr, **change), words)
        missing = dict(csr)
        del missing["indptr"]
        self.attempt(missing, "no array 'indptr'")
        # A diagonal offset scipy would wrap into int32 (uint32 4294967290 read as -6): another matrix.
        self.attempt({"format": np.array(b"dia"), "shape": np.array([8, 8]), "data": np.ones((1, 8), np.int64),
                      "offsets": np.array([4294967290], dtype=np.uint32)}, "offsets[0] = 4294967290 does not fit int32")

    def test_a_compressed_array_that_claims_more_than_deflate_gives(self):
        write_npz_arrays(self.path("in.npz"), {"format": np.array(b"coo"), "shape": np.array([4, 4]),
                                               "data": np.zeros(2**22), "row": np.zeros(2**22, np.int32),
                                               "col": np.zeros(2**22, np.int32)}, compress=True)
        raw = bytearray(read_bytes(self.path("in.npz")))
        at = raw.find(b"data.npy", raw.find(b"PK\x01\x02")) - 46  # data.npy's central directory entry
        self.assertEqual(raw[at:at + 4], b"PK\x01\x02")
        raw[at + 24:at + 28] = (2**31 - 1).to_bytes(4, "little")  # its uncompressed size: 2 GiB
        write_bytes(self.path("bomb.npz"), bytes(raw))
        run = tool("blockmm-import", "-m", 2, self.path("bomb.npz"), self.path("x.bin"))
        self.assert_one_error(run, 3, self.path("bomb.npz"), "more than deflate expands")
        self.assertFalse(os.path.exists(self.path("x.bin")))

    def test_every_layout_random_against_dense(self):
        rng = np.random.default_rng(6)
        for layout in ("csr", "csc", "coo", "bsr", "dia"):
            dense = random_dense(rng, 12, 0.25, 65535)
            matrix = sp.bsr_matrix(dense, blocksize=(3, 2)) if layout == "bsr" else sp.csr_matrix(dense).asformat(layout)
            sp.save_npz(self.path("in.npz"), matrix, compressed=layout in ("csc", "dia"))
            with self.subTest(layout=layout):
                tool("blockmm-import", "-m", 4, self.path("in.npz"), self.path("in.bin"), check=0)
                got, _, _ = dense_of_binary(self.path("in.bin"))
                self.assert_dense_equal(got, dense, layout)


class Hdf5Refusals(Work):
    """What the C++ reader refuses, refused before anything follows it; libhdf5's own faults."""

    def valid(self, path, **kwargs):
        write_bsr_h5(path, 4, 2, [0, 1], [1, 0], [np.full((2, 2), 3), np.full((2, 2), 4)], **kwargs)

    def refused(self, name, *words, in_process=True):
        for run in (tool("blockmm-export", self.path(name), self.path("out.mtx"), in_process=in_process, timeout=30),
                    tool("blockmm-spy", self.path(name), self.path("out.png"), in_process=in_process, timeout=30)):
            self.assert_one_error(run, 3, self.path(name), *words)
        self.assertFalse(os.path.exists(self.path("out.mtx")) or os.path.exists(self.path("out.png")))

    def test_external_storage_is_never_read(self):
        secret = b"\x07\x00" * 8  # would become the values 7
        write_bytes(self.path("secret"), secret)
        os.mkfifo(self.path("fifo"))
        for target in ("secret", "fifo"):
            with self.subTest(target=target):
                self.valid(self.path(f"{target}.h5"), data=lambda h5: h5.create_dataset(
                    "data", shape=(2, 2, 2), dtype="<u2", external=[(self.path(target), 0, 16)]))
                # As processes: a FIFO blocked the old readers for ever.
                self.refused(f"{target}.h5", "/data keeps its values in an external file", in_process=target == "secret")

    def test_links_and_virtual_datasets_are_refused(self):
        import h5py

        self.valid(self.path("other.h5"))
        cases = {"external": lambda h5: h5.__setitem__("data", h5py.ExternalLink(self.path("other.h5"), "/data")),
                 "soft": lambda h5: (h5.create_dataset("real", data=np.ones((2, 2, 2), np.uint16)),
                                     h5.__setitem__("data", h5py.SoftLink("/real")))}

        def virtual(h5):
            layout = h5py.VirtualLayout(shape=(2, 2, 2), dtype="<u2")
            layout[:] = h5py.VirtualSource(self.path("other.h5"), "data", shape=(2, 2, 2))
            h5.create_virtual_dataset("data", layout)

        cases["virtual"] = virtual
        words = {"external": "/data is an external link", "soft": "/data is a soft link",
                 "virtual": "/data is a virtual dataset"}
        for kind, make in cases.items():
            with self.subTest(kind=kind):
                self.valid(self.path(f"{kind}.h5"), data=make)
                self.refused(f"{kind}.h5", words[kind])

    def test_files_that_crash_or_hang_libhdf5_are_bad_input(self):
        for name in ("libhdf5_crashes.h5", "libhdf5_loops.h5"):
            with self.subTest(name=name):
                source = os.path.join(SOURCE, "tests", "e2e", "fault", "data", name)
                write_bytes(self.path(name), read_bytes(source))
                run = tool("blockmm-export", self.path(name), self.path("out.npz"), env={"BLOCKMM_LIBRARY_TIMEOUT": "2"},
                           timeout=60)
                self.assert_one_error(run, 3, self.path(name))
                self.assertFalse([f for f in os.listdir(self.dir) if not f.startswith("libhdf5_")])

    def test_what_a_dying_library_prints_stays_out_of_the_one_line(self):
        # Which way libhdf5 dies on a corrupt file depends on what its memory held: on one machine
        # libhdf5_crashes.h5 gives SIGSEGV, on another glibc's "munmap_chunk(): invalid pointer"
        # and SIGABRT. A reader that prints to stderr and aborts stands for the second.
        probe = ("import os, sys\n"
                 "from blockmm.errors import FormatError\n"
                 "from blockmm.guarded_reader import GuardedReader\n"
                 "def work(channel):\n"
                 "    channel.stage('reading the root attribute')\n"
                 "    os.write(2, b'munmap_chunk(): invalid pointer\\n')\n"
                 "    os.abort()\n"
                 "try:\n"
                 "    list(GuardedReader(sys.argv[1], 'libhdf5', work).frames())\n"
                 "except FormatError as error:\n"
                 "    print(error, file=sys.stderr)\n"
                 "    sys.exit(3)\n")
        run = subprocess.run([sys.executable, "-c", probe, self.path("C.h5")], capture_output=True, text=True,
                             timeout=60, env=dict(os.environ, PYTHONPATH=os.path.dirname(blockmm.__path__[0])))
        self.assertEqual(run.returncode, 3, run.stderr)
        self.assertEqual(run.stderr, f"{self.path('C.h5')}: libhdf5 aborted (SIGABRT) reading the root attribute: "
                                     "the file is corrupt\n")

    def test_a_user_block_is_read_as_blockmm_reads_it(self):
        rng = np.random.default_rng(8)
        dense = random_dense(rng, 12, 0.3, 65535)
        bsr = sp.bsr_matrix(dense, blocksize=(3, 3))
        bsr.sort_indices()
        rows = np.repeat(np.arange(4), np.diff(bsr.indptr))
        write_bsr_h5(self.path("ub.h5"), 12, 3, rows, bsr.indices, bsr.data, userblock=1024)
        tool("blockmm-info", self.path("ub.h5"), check=0)  # the C++ reader takes it
        tool("blockmm-export", self.path("ub.h5"), self.path("ub.npz"), check=0)
        self.assert_dense_equal(sp.load_npz(self.path("ub.npz")).toarray().astype(np.int64), dense, "export")
        self.assert_dense_equal(blockmm.read(self.path("ub.h5")).toarray().astype(np.int64), dense, "blockmm.read")
        tool("blockmm-spy", self.path("ub.h5"), self.path("ub.png"), check=0)


class NamesAndLimits(Work):
    def test_names_that_are_not_utf8(self):
        name = os.path.join(os.fsencode(self.dir), b"C\xff\x01.bin")
        write_bytes(name, binary_bytes(4, 2, [(0, 1, np.full((2, 2), 9))]))
        out = os.path.join(os.fsencode(self.dir), b"C\xfe.mtx")
        run = tool("blockmm-export", os.fsdecode(name), os.fsdecode(out), in_process=False)
        self.assertEqual(run.returncode, 0, run.stderr)
        text = read_bytes(out)
        self.assertIn(b"C\\xff\\x01.bin", text.split(b"\n")[1])  # the comment: ASCII, one line
        self.assertTrue(text.startswith(b"%%MatrixMarket matrix coordinate integer general\n"))
        import scipy.io

        self.assertEqual(scipy.io.mmread(os.fsdecode(out)).toarray()[0, 3], 9)
        missing = os.path.join(os.fsencode(self.dir), b"no\xffsuch\n.bin")
        run = tool("blockmm-export", os.fsdecode(missing), os.fsdecode(out), in_process=False)
        self.assert_one_error(run, 3, "no\udcffsuch\\x0a.bin: cannot open")

    def test_a_fifo_input_never_blocks(self):
        os.mkfifo(self.path("pipe"))
        for args in (("blockmm-export", self.path("pipe"), self.path("out.npz")),
                     ("blockmm-import", "-m", 2, self.path("pipe"), self.path("out.bin"))):
            with self.subTest(tool=args[0]):
                run = tool(*args, in_process=False, timeout=30)  # the old readers waited for a writer for ever
                self.assert_one_error(run, 3, self.path("pipe"), "is not a regular file")
        self.assertEqual(os.listdir(self.dir), ["pipe"])

    def test_block_orders_past_the_limit(self):
        scipy_io_text = "\n".join([HEADER, "3 3 1", "1 1 5"]) + "\n"
        write_bytes(self.path("a.mtx"), scipy_io_text)
        run = tool("blockmm-import", "--pad", "--block-size", 46341, self.path("a.mtx"), self.path("a.bin"),
                   in_process=False, memory_limit=4 << 30)
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertIn("--block-size 46341 exceeds the largest block order blockmm supports, 46340", run.stderr)
        self.assertFalse(os.path.exists(self.path("a.bin")))
        write_bytes(self.path("big.bin"), np.array([46341, 46341, 0], dtype="<i4").tobytes())
        write_bsr_h5(self.path("big.h5"), 46341, 46341, [], [], np.zeros((0,)),
                     data=lambda h5: h5.create_dataset("data", shape=(0, 46341, 46341), dtype="<u2"))
        for name, target in (("big.bin", "out.npz"), ("big.h5", "out.mtx")):
            with self.subTest(name=name, target=target):
                run = tool("blockmm-export", self.path(name), self.path(target), memory_limit=4 << 30)
                self.assert_one_error(run, 3, "m = 46341 exceeds the largest block order blockmm supports")
                self.assertFalse(os.path.exists(self.path(target)))


class MemoryFollowsTheRecords(Work):
    """n = 2^28 with one block-row's worth of nothing: a few MB, whatever n says."""

    LIMIT = 400 << 20

    def test_huge_n_tiny_k(self):
        n = 2**28
        write_bytes(self.path("E.bin"), np.array([n, 1, 0], dtype="<i4").tobytes())  # 12 bytes
        write_bytes(self.path("one.bin"), binary_bytes(n, 1, [(n - 1, 5, np.array([[7]]))]))
        for name, args, check in [("E.mtx", ["blockmm-export", self.path("E.bin"), self.path("E.mtx")], None),
                                  ("E.npz", ["blockmm-export", "--sparse-format", "coo", self.path("one.bin"),
                                             self.path("E.npz")], None),
                                  ("E.png", ["blockmm-spy", self.path("one.bin"), self.path("E.png")], None)]:
            with self.subTest(name=name):
                code, err, peak = peak_memory(*args)
                self.assertEqual(code, 0, err)
                self.assertLess(peak, self.LIMIT, f"{name}: {peak >> 20} MiB")
        self.assertEqual(read_bytes(self.path("E.mtx")).split(b"\n")[2], f"{n} {n} 0".encode())
        one = sp.load_npz(self.path("E.npz"))
        self.assertEqual((one.shape, one.nnz, int(one.row[0]), int(one.col[0]), int(one.data[0])), ((n, n), 1, n - 1, 5, 7))
        write_bytes(self.path("one.mtx"), "\n".join([HEADER, f"{n} {n} 1", f"{n} 6 9"]) + "\n")
        code, err, peak = peak_memory("blockmm-import", "-m", 1, self.path("one.mtx"), self.path("imp.bin"))
        self.assertEqual(code, 0, err)
        self.assertLess(peak, self.LIMIT, f"import: {peak >> 20} MiB")
        self.assertEqual(read_bytes(self.path("imp.bin")), binary_bytes(n, 1, [(n - 1, 5, np.array([[9]]))]))


if __name__ == "__main__":
    unittest.main()
