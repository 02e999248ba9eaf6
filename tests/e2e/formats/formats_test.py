#!/usr/bin/env python3
"""Matrix Market, scipy .npz, binary and HDF5 in and out (issue 18), through the real tools of a
build tree: blockmm-import / -export / -spy (Python), blockmm, blockmm-info, blockmm-cmp,
blockmm-convert (C++), and the blockmm Python package. Every matrix is random (seeded) or
written out by hand here, and every result is checked against a dense numpy computation made
here from the matrix as generated, never from blockmm's own readers alone.

usage: formats_test.py [unittest args]   (BLOCKMM_BUILD_DIR names the build tree)
"""
import json
import os
import sys
import unittest

import numpy as np
import scipy.io
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tool_support import (SATURATED, TOOLS, Work, blockmm, dense_of_binary, dense_product,  # noqa: E402
                          random_dense, read_bytes, tool, write_bytes)


class Versions(Work):
    def test_every_tool_answers_the_same_version(self):
        versions = {}
        for name in TOOLS:
            run = tool(name, "--version", check=0, in_process=False)
            # blockmm's first line is "blockmm X.Y.Z (commit ...)", then its build's features.
            words = run.stdout.splitlines()[0].split()
            self.assertEqual(words[0], name, run.stdout)
            versions[name] = words[1]
        self.assertEqual(len(set(versions.values())), 1, versions)
        self.assertEqual(versions["blockmm"], blockmm.__version__)
        self.assertRegex(blockmm.__version__, r"^\d+\.\d+\.\d+$")


class ImportFormats(Work):
    """.npz (every scipy layout) and Matrix Market into blockmm files, checked dense."""

    def check_blockmm_file(self, path, expected, m):
        if blockmm.files.has_hdf5_signature(path):
            self.assertEqual(tool("blockmm-convert", path, self.path("check.bin")).returncode, 0)
            path = self.path("check.bin")
        got, got_m, width = dense_of_binary(path)
        self.assertEqual(got_m, m)
        self.assertEqual(width, 2)
        self.assert_dense_equal(got, expected, path)
        info = json.loads(tool("blockmm-info", "--json", path, check=0).stdout)
        self.assertTrue(info["sorted"])
        self.assertEqual(info["zero_blocks"], 0)

    def test_npz_layouts_random(self):
        rng = np.random.default_rng(18)
        for case, (n, m, density, layout, out) in enumerate([
                (24, 4, 0.1, "csr", "bin"), (30, 5, 0.05, "csc", "h5"), (21, 3, 0.3, "coo", "bin"),
                (16, 1, 0.2, "bsr", "h5"), (36, 6, 0.02, "dia", "bin"), (20, 10, 0.0, "csr", "bin")]):
            with self.subTest(case=case, layout=layout):
                dense = random_dense(rng, n, density, 65535, low=0)  # explicit zeros too
                matrix = sp.csr_matrix(dense).asformat(layout)
                if layout == "bsr":
                    matrix = sp.bsr_matrix(dense, blocksize=(2, 2))
                if case % 2:
                    matrix = matrix.astype(np.float64)  # real values with integral values
                sp.save_npz(self.path(f"in{case}.npz"), matrix, compressed=bool(case % 2))
                target = self.path(f"out{case}.{out}")
                tool("blockmm-import", "--block-size", m, self.path(f"in{case}.npz"), target, check=0)
                self.check_blockmm_file(target, dense, m)

    def test_matrix_market_general_symmetric_pattern_real(self):
        rng = np.random.default_rng(7)
        n, m = 18, 3
        dense = random_dense(rng, n, 0.15, 65535)
        rows, cols = np.nonzero(dense)
        # General, integer, written here by hand, comments and a blank line inside the header.
        lines = ["%%MatrixMarket matrix coordinate integer general", "% a comment", "%", "",
                 f"{n} {n} {len(rows)}"] + [f"{r + 1} {c + 1} {dense[r, c]}" for r, c in zip(rows, cols)]
        write_bytes(self.path("g.mtx"), "\n".join(lines) + "\n")
        tool("blockmm-import", "-m", m, self.path("g.mtx"), self.path("g.bin"), check=0)
        self.check_blockmm_file(self.path("g.bin"), dense, m)

        # Symmetric: only the lower triangle is stored; the diagonal once.
        sym = np.tril(dense) + np.tril(dense, -1).T
        lr, lc = np.nonzero(np.tril(sym))
        lines = ["%%MatrixMarket matrix coordinate integer symmetric", f"{n} {n} {len(lr)}"] + \
                [f"{r + 1} {c + 1} {sym[r, c]}" for r, c in zip(lr, lc)]
        write_bytes(self.path("s.mtx"), "\n".join(lines) + "\n")
        tool("blockmm-import", "-m", m, self.path("s.mtx"), self.path("s.h5"), check=0)
        self.check_blockmm_file(self.path("s.h5"), sym, m)

        # Pattern: every stored entry is 1; symmetric pattern too.
        lines = ["%%MatrixMarket matrix coordinate pattern symmetric", f"{n} {n} {len(lr)}"] + \
                [f"{r + 1} {c + 1}" for r, c in zip(lr, lc)]
        write_bytes(self.path("p.mtx"), "\n".join(lines) + "\n")
        tool("blockmm-import", "-m", m, self.path("p.mtx"), self.path("p.bin"), check=0)
        self.check_blockmm_file(self.path("p.bin"), (sym != 0).astype(np.int64), m)

        # Real with integral values, in several spellings.
        lines = ["%%MatrixMarket matrix coordinate real general", "3 3 4", "1 1 3.0", "2 3 1e2", "3 2 65535.000",
                 "3 3 0.0"]
        write_bytes(self.path("r.mtx"), "\n".join(lines) + "\n")
        tool("blockmm-import", "-m", 3, self.path("r.mtx"), self.path("r.bin"), check=0)
        self.check_blockmm_file(self.path("r.bin"), np.array([[3, 0, 0], [0, 0, 100], [0, 65535, 0]]), 3)

    def test_bad_values_are_refused_with_line_and_value(self):
        header = ["%%MatrixMarket matrix coordinate {field} general", "% comment line", "", "4 4 3"]
        for field, bad, line in [("integer", "-1", 7), ("integer", "65536", 6), ("real", "1.5", 7),
                                 ("real", "-0.5", 5), ("real", "nan", 6), ("integer", "99999999999", 7)]:
            with self.subTest(field=field, bad=bad):
                entries = ["1 1 5", "2 2 6", "3 3 7"]
                entries[line - 5] = entries[line - 5].rsplit(" ", 1)[0] + " " + bad
                text = "\n".join([h.format(field=field) for h in header] + entries) + "\n"
                write_bytes(self.path("bad.mtx"), text)
                write_bytes(self.path("old.bin"), b"keep me")
                run = tool("blockmm-import", "-m", 2, self.path("bad.mtx"), self.path("old.bin"))
                self.assertEqual(run.returncode, 3, run.stderr)
                self.assertEqual(run.stderr.count("\n"), 1, run.stderr)
                self.assertIn(f"blockmm-import: error: {self.path('bad.mtx')}: line {line}: value {bad} ", run.stderr)
                self.assertEqual(read_bytes(self.path("old.bin")), b"keep me")
                self.assertEqual(sorted(os.listdir(self.dir)), ["bad.mtx", "old.bin"])

        for lines, line, what in [(["1 1 5", "5 2 6", "3 3 7"], 6, "row index 5 is not in [1, 4]"),
                                  (["1 1 5", "2 2 6", "3 0 7"], 7, "column index 0 is not in [1, 4]"),
                                  (["1 1 5", "2 2", "3 3 7"], 6, "2 fields"),
                                  (["1 1 5", "2 2 six", "3 3 7"], 6, "value six is not an integer")]:
            with self.subTest(lines=lines):
                write_bytes(self.path("bad.mtx"), "\n".join([h.format(field="integer") for h in header] + lines))
                run = tool("blockmm-import", "-m", 2, self.path("bad.mtx"), self.path("old.bin"))
                self.assertEqual(run.returncode, 3, run.stderr)
                self.assertIn(f"{self.path('bad.mtx')}: line {line}: {what}", run.stderr)
                self.assertEqual(read_bytes(self.path("old.bin")), b"keep me")

        dense = np.zeros((4, 4))
        dense[2, 3] = 2.25
        sp.save_npz(self.path("bad.npz"), sp.csr_matrix(dense))
        run = tool("blockmm-import", "-m", 2, self.path("bad.npz"), self.path("x.bin"), in_process=False)
        self.assertEqual(run.returncode, 3, run.stderr)
        self.assertIn("entry (row 2, column 3) (0-based) holds 2.25", run.stderr)
        self.assertFalse(os.path.exists(self.path("x.bin")))

        run = tool("blockmm-import", "-m", 2, self.path("bad.npz"), self.path("x.mtx"))  # output name
        self.assertEqual(run.returncode, 2, run.stderr)

    def test_padding_only_when_asked(self):
        rng = np.random.default_rng(3)
        dense = random_dense(rng, 10, 0.3, 1000)
        sp.save_npz(self.path("a.npz"), sp.coo_matrix(dense))
        run = tool("blockmm-import", "-m", 4, self.path("a.npz"), self.path("a.bin"))
        self.assertEqual(run.returncode, 3)
        self.assertIn("n = 10 is not a multiple of the block size m = 4", run.stderr)
        self.assertIn("--pad", run.stderr)
        self.assertFalse(os.path.exists(self.path("a.bin")))
        run = tool("blockmm-import", "-m", 4, "--pad", self.path("a.npz"), self.path("a.bin"), check=0)
        self.assertIn("padded from 10 x 10 to 12 x 12", run.stderr)
        padded = np.zeros((12, 12), dtype=np.int64)
        padded[:10, :10] = dense
        self.check_blockmm_file(self.path("a.bin"), padded, 4)

        sp.save_npz(self.path("r.npz"), sp.csr_matrix(np.ones((3, 5))))  # rectangular
        self.assertEqual(tool("blockmm-import", "-m", 5, self.path("r.npz"), self.path("r.bin")).returncode, 3)
        tool("blockmm-import", "-m", 5, "--pad", self.path("r.npz"), self.path("r.bin"), check=0)
        expected = np.zeros((5, 5), dtype=np.int64)
        expected[:3, :] = 1
        self.check_blockmm_file(self.path("r.bin"), expected, 5)


class ProductsOut(Work):
    """scipy -> blockmm -> scipy: products exported to .npz and Matrix Market, checked dense."""

    def test_random_products_round_trip(self):
        rng = np.random.default_rng(2026)
        for case, (n, m, density, high, out) in enumerate([
                (24, 4, 0.2, 1000, "C.bin"), (27, 3, 0.3, 65535, "C.h5"), (8, 1, 0.5, 65535, "C.bin"),
                (30, 5, 0.01, 10, "C.h5")]):
            with self.subTest(case=case):
                a = random_dense(rng, n, density, high)
                b = random_dense(rng, n, density, high)
                sp.save_npz(self.path("A.npz"), sp.csr_matrix(a))
                scipy.io.mmwrite(self.path("B.mtx"), sp.coo_matrix(b))
                tool("blockmm-import", "-m", m, self.path("A.npz"), self.path("A.bin"), check=0)
                tool("blockmm-import", "-m", m, self.path("B.mtx"), self.path("B.h5"), check=0)
                tool("blockmm", "-q", self.path("A.bin"), self.path("B.h5"), self.path(out), check=0)
                expected = dense_product(a, b)
                if high == 65535 and case == 1:
                    self.assertTrue((expected == SATURATED).any(), "the case must saturate")
                for fmt in [("csr", "bsr", "coo", "csc")[case]]:  # each case one layout: fewer process starts
                    tool("blockmm-export", "--sparse-format", fmt, self.path(out), self.path("C.npz"), check=0)
                    c = sp.load_npz(self.path("C.npz"))
                    self.assertEqual(c.format, fmt)
                    self.assertEqual(c.dtype, np.uint32)
                    self.assert_dense_equal(c.toarray().astype(np.int64), expected, f"npz {fmt}")
                tool("blockmm-export", self.path(out), self.path("C.mtx"), check=0)
                self.assertTrue(read_bytes(self.path("C.mtx")).decode().startswith(
                    "%%MatrixMarket matrix coordinate integer general"))
                c = scipy.io.mmread(self.path("C.mtx"))
                self.assert_dense_equal(sp.coo_matrix(c).toarray().astype(np.int64), expected, "mtx")
                # The package reads both formats as bsr_matrix of uint32.
                product = blockmm.read(self.path(out))
                self.assertEqual(product.blocksize, (m, m))
                self.assertEqual(product.dtype, np.uint32)
                self.assert_dense_equal(product.toarray().astype(np.int64), expected, "blockmm.read")
                # A scipy-computed reference imported as a product compares equal with blockmm-cmp.
                ref = sp.csr_matrix(expected)
                sp.save_npz(self.path("ref.npz"), ref)
                tool("blockmm-import", "-m", m, "--values", "u32", self.path("ref.npz"), self.path("ref.h5"), check=0)
                tool("blockmm-cmp", "--strict", self.path("ref.h5"), self.path(out), check=0)

    def test_export_refuses(self):
        rng = np.random.default_rng(5)
        blockmm.write_bin(self.path("A.bin"), sp.bsr_matrix(random_dense(rng, 8, 0.3, 9), blocksize=(2, 2)))
        self.assertEqual(tool("blockmm-export", self.path("A.bin"), self.path("A.txt")).returncode, 2)
        self.assertEqual(tool("blockmm-export", "--to", "npz", self.path("A.bin"), self.path("A.mtx")).returncode, 2)
        scipy.io.mmwrite(self.path("M.mtx"), sp.coo_matrix(np.eye(4)))
        self.assertEqual(tool("blockmm-export", self.path("M.mtx"), self.path("M.npz")).returncode, 3)
        self.assertEqual(tool("blockmm-export", self.path("missing.bin"), self.path("M.npz")).returncode, 3)
        write_bytes(self.path("short.bin"), b"\x01\x00")
        run = tool("blockmm-export", self.path("short.bin"), self.path("M.npz"))
        self.assertEqual(run.returncode, 3)
        self.assertIn("shorter than the 12-byte header", run.stderr)
        self.assertFalse(os.path.exists(self.path("M.npz")))
        run = tool("blockmm-export", self.path("A.bin"), os.path.join(self.dir, "no", "such", "dir.npz"))
        self.assertEqual(run.returncode, 4, run.stderr)


class PythonPackage(Work):
    """blockmm.read/write against files made by blockmm's C++ tools, and the reverse."""

    def test_round_trip_with_cpp_tools(self):
        rng = np.random.default_rng(11)
        for case, (n, m, density) in enumerate([(20, 4, 0.3), (21, 7, 0.5), (9, 1, 0.2), (12, 3, 0.0)]):
            with self.subTest(case=case):
                a = random_dense(rng, n, density, 65535)
                blockmm.write_bin(self.path("A.bin"), sp.bsr_matrix(a, blocksize=(m, m)))
                blockmm.write_h5(self.path("A.h5"), sp.bsr_matrix(a, blocksize=(m, m)))
                got, got_m, _ = dense_of_binary(self.path("A.bin"))
                self.assert_dense_equal(got, a, "write_bin")
                tool("blockmm-cmp", "--strict", self.path("A.bin"), self.path("A.h5"), check=0)
                # bin -> h5 by the C++ converter and back gives the same bytes as the package wrote.
                tool("blockmm-convert", self.path("A.h5"), self.path("A2.bin"), check=0)
                self.assertEqual(read_bytes(self.path("A.bin")), read_bytes(self.path("A2.bin")))
                tool("blockmm", "-q", self.path("A.h5"), self.path("A.bin"), self.path("C.bin"), check=0)
                tool("blockmm-convert", self.path("C.bin"), self.path("C.h5"), check=0)
                expected = dense_product(a, a)
                for name in ("C.bin", "C.h5"):
                    product = blockmm.read(self.path(name))
                    self.assert_dense_equal(product.toarray().astype(np.int64), expected, name)
                # The package's product files are what blockmm would write.
                blockmm.write_bin(self.path("C2.bin"), blockmm.read(self.path("C.h5")), values="u32")
                self.assertEqual(read_bytes(self.path("C.bin")), read_bytes(self.path("C2.bin")))

    def test_readers_refuse_malformed(self):
        blockmm.write_bin(self.path("A.bin"), sp.bsr_matrix(np.eye(4, dtype=np.int64), blocksize=(2, 2)))
        data = bytearray(read_bytes(self.path("A.bin")))
        for name, change, words in [("idx", lambda d: d.__setitem__(slice(12, 16), (7).to_bytes(4, "little")),
                                     "outside [0, 2)"),
                                    ("dup", lambda d: d.__setitem__(slice(12 + 16, 12 + 24), d[12:20]), "occurs twice"),
                                    ("size", lambda d: d.extend(b"\0"), "1 trailing bytes"),
                                    ("nm", lambda d: d.__setitem__(slice(0, 4), (5).to_bytes(4, "little")),
                                     "not a multiple")]:
            with self.subTest(name=name):
                bad = bytearray(data)
                change(bad)
                write_bytes(self.path(name), bad)
                with self.assertRaises(blockmm.FormatError) as caught:
                    blockmm.read(self.path(name))
                self.assertIn(words, str(caught.exception))

    def test_repeated_blocks_are_summed_exactly_or_refused(self):
        """Issue 52, item 2: repeated blocks were summed in the matrix's own dtype (uint16 40 000 +
        40 000 written as 14 464, uint32 2^32 - 1 + 2 as 1). Sums are exact, and one past the
        width is refused with nothing written, as blockmm-import refuses repeated entries."""
        def repeated(dtype, values):
            """A 1 x 1 matrix whose one block is stored once for each of `values`."""
            blocks = np.array(values, dtype=dtype).reshape(len(values), 1, 1)
            return sp.bsr_matrix((blocks, np.zeros(len(values), np.int32), np.array([0, len(values)])), shape=(1, 1),
                                 blocksize=(1, 1))

        for dtype, values, width in [(np.uint16, [40000, 40000], "u16"), (np.uint32, [2**32 - 1, 2], "u32"),
                                     (np.int64, [2**32 - 1, 1], "u32")]:
            for write in (blockmm.write_bin, blockmm.write_h5, blockmm.write_npz):
                with self.subTest(dtype=np.dtype(dtype).name, write=write.__name__):
                    target = self.path("out" + (".npz" if write is blockmm.write_npz else ".bin"))
                    args = (target, repeated(dtype, values)) + (() if write is blockmm.write_npz else (width,))
                    with self.assertRaises(ValueError) as caught:
                        write(*args)
                    self.assertIn(f"sum to {sum(values)}", str(caught.exception))
                    self.assertEqual(os.listdir(self.dir), [])
        blockmm.write(self.path("W.bin"), repeated(np.uint16, [40000, 40000]), values="u32")
        self.assertEqual(int(blockmm.read(self.path("W.bin")).toarray()[0, 0]), 80000)
        # Random matrices with repeated blocks against sums taken value by value in Python integers.
        rng = np.random.default_rng(52)
        for case in range(4):
            m, p = int(rng.integers(1, 4)), int(rng.integers(1, 6))
            count = int(rng.integers(1, 40))
            rows = np.sort(rng.integers(0, p, count))
            cols = rng.integers(0, p, count).astype(np.int32)
            data = rng.integers(0, 40000, (count, m, m)).astype(np.uint16)
            data[rng.random(count) < 0.2] = 0
            bsr = sp.bsr_matrix((data, cols, np.searchsorted(rows, np.arange(p + 1))), shape=(p * m, p * m),
                                blocksize=(m, m))
            expected = [[0] * (p * m) for _ in range(p * m)]
            for k in range(count):
                for r in range(m):
                    for c in range(m):
                        expected[rows[k] * m + r][cols[k] * m + c] += int(data[k, r, c])
            with self.subTest(case=case):
                blockmm.write_bin(self.path("R.bin"), bsr, values="u32")
                self.assert_dense_equal(blockmm.read(self.path("R.bin")).toarray().astype(np.int64),
                                        np.array(expected, dtype=np.int64), "write_bin")
                tool("blockmm-info", self.path("R.bin"), check=0)

    def test_failed_write_keeps_old_file(self):
        write_bytes(self.path("old.bin"), b"old")
        bad = sp.bsr_matrix(np.full((2, 2), 70000, dtype=np.int64), blocksize=(1, 1))
        with self.assertRaises(ValueError):
            blockmm.write_bin(self.path("old.bin"), bad)
        self.assertEqual(read_bytes(self.path("old.bin")), b"old")
        self.assertEqual(os.listdir(self.dir), ["old.bin"])


class ToolsReadHdf5(Work):
    """blockmm-info and blockmm-cmp read HDF5; files are told apart by signature."""

    def test_info_and_cmp_on_hdf5(self):
        import h5py

        tool("blockmm-gen", self.path("A.bin"), "--n", 40, "--m", 4, "--density", 0.3, "--max-value", 65535, "--seed", 4, "-q", check=0)
        tool("blockmm-convert", self.path("A.bin"), self.path("A.h5"), check=0)
        tool("blockmm", "-q", self.path("A.bin"), self.path("A.bin"), self.path("C.h5"), check=0)
        tool("blockmm", "-q", self.path("A.bin"), self.path("A.bin"), self.path("C.bin"), check=0)
        bin_info = json.loads(tool("blockmm-info", "--json", self.path("C.bin"), check=0).stdout)
        h5_info = json.loads(tool("blockmm-info", "--json", self.path("C.h5"), check=0).stdout)
        self.assertEqual(h5_info["format"], "hdf5")
        self.assertEqual(bin_info["format"], "binary")
        for key in ("n", "m", "k", "value_type", "min_value", "max_value", "zero_blocks", "blocks_per_row"):
            self.assertEqual(h5_info[key], bin_info[key], key)
        self.assertEqual(h5_info["file_bytes"], os.path.getsize(self.path("C.h5")))
        text = tool("blockmm-info", self.path("A.h5"), check=0).stdout
        self.assertIn("format:          HDF5", text)
        self.assertIn("input (uint16 values)", text)

        for pair in [("C.bin", "C.h5"), ("C.h5", "C.bin"), ("C.h5", "C.h5"), ("A.bin", "A.h5")]:
            tool("blockmm-cmp", "--strict", *map(self.path, pair), check=0)
        tool("blockmm-cmp", self.path("A.h5"), self.path("A.bin"), check=0)  # blockmm-gen's order is shuffled
        # One value changed in the HDF5 copy: a difference, named by block and element.
        product = blockmm.read(self.path("C.bin"))
        with h5py.File(self.path("C.h5"), "r+") as f:
            data = f["data"][:].astype(np.int64)
            was = int(data[3, 1, 2])
            now = was - 1 if was > 0 else 1
            block = f["data"][3]
            block[1, 2] = now
            f["data"][3] = block
        run = tool("blockmm-cmp", self.path("C.bin"), self.path("C.h5"))
        self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
        rows = np.repeat(np.arange(10), np.diff(product.indptr))
        self.assertIn(f"block ({rows[3]}, {product.indices[3]}) element (1, 2): expected {was}, actual {now}", run.stdout)
        self.assertIn("block 3 of /data", run.stdout)
        # An input against a product: a usage error, exit 2 (each file is well formed).
        self.assertEqual(tool("blockmm-cmp", self.path("A.h5"), self.path("C.bin")).returncode, 2)

    def test_foreign_files_are_named(self):
        scipy.io.mmwrite(self.path("M.mtx"), sp.coo_matrix(np.eye(4, dtype=np.int64)))
        sp.save_npz(self.path("M.npz"), sp.csr_matrix(np.eye(4)))
        tool("blockmm-gen", self.path("A.bin"), "--n", 4, "--m", 2, "--k", 2, "--max-value", 65535, "-q", check=0)
        for name, what in [("M.mtx", "a Matrix Market file"), ("M.npz", "a zip archive such as scipy's .npz")]:
            for args in [("blockmm", self.path(name), self.path("A.bin"), self.path("C.bin")),
                         ("blockmm", self.path("A.bin"), self.path(name), self.path("C.bin")),
                         ("blockmm-info", self.path(name)), ("blockmm-convert", self.path(name), self.path("X.h5")),
                         ("blockmm-cmp", self.path("A.bin"), self.path(name))]:
                with self.subTest(args=args):
                    run = tool(*args)
                    self.assertEqual(run.returncode, 3, run.stderr)  # bad input, blockmm-cmp too
                    self.assertIn(f"{self.path(name)}: {what}; convert", run.stderr)
                    self.assertIn(f"blockmm-import --block-size M {self.path(name)}", run.stderr)
        self.assertFalse(os.path.exists(self.path("C.bin")))
        self.assertFalse(os.path.exists(self.path("X.h5")))

    def test_output_name_against_format(self):
        tool("blockmm-gen", self.path("A.bin"), "--n", 8, "--m", 2, "--k", 5, "--max-value", 65535, "-q", check=0)
        run = tool("blockmm", "-q", "--format", "h5", self.path("A.bin"), self.path("A.bin"), self.path("C.bin"), check=0)
        self.assertIn("warning: " + self.path("C.bin") + ": the name says COL380 binary, but --format h5 writes HDF5",
                      run.stderr)
        self.assertTrue(blockmm.files.has_hdf5_signature(self.path("C.bin")))
        run = tool("blockmm", "-q", "--format", "bin", self.path("A.bin"), self.path("A.bin"), self.path("C.h5"), check=0)
        self.assertIn("the name says HDF5, but --format bin", run.stderr)
        run = tool("blockmm", "-q", self.path("A.bin"), self.path("A.bin"), self.path("C.bin"), check=0)
        self.assertEqual(run.stderr, "")
        for name in ("C.mtx", "C.npz"):
            run = tool("blockmm", "-q", self.path("A.bin"), self.path("A.bin"), self.path(name))
            self.assertEqual(run.returncode, 2, run.stderr)
            self.assertIn("blockmm-export", run.stderr)
            self.assertFalse(os.path.exists(self.path(name)))
        run = tool("blockmm-convert", "--to", "h5", self.path("A.bin"), self.path("X.bin"), check=0)
        self.assertIn("warning", run.stderr)
        self.assertEqual(tool("blockmm-convert", self.path("A.bin"), self.path("X.mtx")).returncode, 2)


class Spy(Work):
    """The block-pattern PNG, read back: size, empty cells white, fuller cells darker."""

    def test_png_cells(self):
        import matplotlib.image

        n, m = 64, 2  # 32 block-rows; --cells 8 groups 4 x 4 blocks a cell
        dense = np.zeros((n, n), dtype=np.int64)
        full, single = (1, 2), (6, 5)  # cells: every block non-zero / one block
        dense[full[0] * 8:(full[0] + 1) * 8, full[1] * 8:(full[1] + 1) * 8] = 1
        dense[single[0] * 8 + 3, single[1] * 8 + 5] = 9
        blockmm.write_bin(self.path("A.bin"), sp.bsr_matrix(dense, blocksize=(m, m)))
        tool("blockmm-spy", "--cells", 8, self.path("A.bin"), self.path("A.png"), check=0, in_process=False)
        picture = blockmm.spy.draw(blockmm.read(self.path("A.bin")), self.path("B.png"), cells=8, title_name="A.bin")
        self.assertEqual(picture.side, 4)
        self.assertEqual(picture.counts[full], 16)
        self.assertEqual(picture.counts[single], 1)
        self.assertEqual(picture.counts.sum(), 17)
        for png in ("A.png", "B.png"):
            image = matplotlib.image.imread(self.path(png))
            self.assertEqual(image.shape[:2], (picture.height, picture.width), png)
            self.assertGreaterEqual(picture.width, 700)

            def rgb(cell):
                x, y = picture.pixel_of(*cell)
                return image[y, x, :3]

            white = np.ones(3)
            self.assertTrue(np.allclose(rgb((0, 0)), white, atol=0.02), rgb((0, 0)))
            self.assertTrue(np.allclose(rgb((7, 7)), white, atol=0.02))
            self.assertFalse(np.allclose(rgb(full), white, atol=0.1), rgb(full))
            self.assertFalse(np.allclose(rgb(single), white, atol=0.1), rgb(single))
            self.assertLess(rgb(full).sum(), rgb(single).sum() - 0.3, "the fuller cell must be darker")
        # Large grids: every cell at least one pixel.
        big = sp.bsr_matrix(sp.random(1600, 1600, density=0.001, random_state=1, format="csr"), blocksize=(2, 2))
        picture = blockmm.spy.draw(big, self.path("big.png"), cells=800)
        self.assertEqual(picture.counts.shape, (800, 800))
        x0, _ = picture.pixel_of(0, 0)
        x1, _ = picture.pixel_of(0, 799)
        self.assertGreaterEqual(x1 - x0, 799)
        self.assertEqual(matplotlib.image.imread(self.path("big.png")).shape[:2], (picture.height, picture.width))

    def test_spy_refuses(self):
        self.assertEqual(tool("blockmm-spy", self.path("missing.bin"), self.path("x.png")).returncode, 3)
        tool("blockmm-gen", self.path("A.bin"), "--n", 8, "--m", 2, "--k", 5, "--max-value", 65535, "-q", check=0)
        self.assertEqual(tool("blockmm-spy", self.path("A.bin"), self.path("x.jpg")).returncode, 2)
        scipy.io.mmwrite(self.path("M.mtx"), sp.coo_matrix(np.eye(4, dtype=np.int64)))
        self.assertEqual(tool("blockmm-spy", self.path("M.mtx"), self.path("x.png")).returncode, 2)  # no -m
        tool("blockmm-spy", "-m", 2, self.path("M.mtx"), self.path("x.png"), check=0)


if __name__ == "__main__":
    unittest.main()
