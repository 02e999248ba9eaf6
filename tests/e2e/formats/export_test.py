#!/usr/bin/env python3
"""blockmm-export streamed a piece at a time (issue 42 item 6): every output layout (csr, csc,
coo, bsr; stored and compressed; Matrix Market) from every kind of input (binary with sorted and
shuffled records, HDF5) against a reference made here with numpy from the generated blocks,
with pieces made tiny so that block-rows straddle them; empty rows, all-zero blocks, zeros in
blocks, saturated values, k = 0, m = 1 and awkward n among the cases. Then what a user sees:
progress on stderr, compression only when asked, memory that follows a piece, not the matrix.

usage: export_test.py [unittest args]   (BLOCKMM_BUILD_DIR names the build tree)
"""
import os
import sys
import unittest
import zipfile

import numpy as np
import scipy.io
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tool_support import Work, blockmm, peak_memory, tool  # noqa: E402

import blockmm.blocks  # noqa: E402
import blockmm.progress  # noqa: E402


def random_blocks(rng, n, m, count, width, zero_blocks=0, high=None):
    """(rows, cols, values) of `count` distinct random blocks (sorted), about a third of each
    block's values zero, some values the width's largest, `zero_blocks` of them all zero."""
    p = n // m
    keys = np.sort(rng.choice(p * p, size=min(count, p * p), replace=False))
    top = np.iinfo(width).max if high is None else high
    values = rng.integers(1, top, size=(len(keys), m, m), endpoint=True).astype(width)
    values[rng.random(values.shape) < 0.35] = 0
    values[rng.random(values.shape) < 0.02] = top
    values[:zero_blocks] = 0
    return keys // p, keys % p, values


def binary_file(path, n, m, rows, cols, values, shuffle=None):
    """A COL380 file written here with numpy, records sorted or in the order `shuffle` gives."""
    order = np.arange(len(rows)) if shuffle is None else shuffle.permutation(len(rows))
    records = np.zeros(len(rows), dtype=np.dtype([("i", "<i4"), ("j", "<i4"), ("v", values.dtype.str, (m, m))]))
    records["i"], records["j"], records["v"] = rows[order], cols[order], values[order]
    with open(path, "wb") as f:
        f.write(np.array([n, m, len(rows)], dtype="<i4").tobytes())
        records.tofile(f)


def reference(n, m, rows, cols, values):
    """The matrix as scipy COO of int64, element by element, zeros left out (independent of blockmm)."""
    t, a, b = np.nonzero(values)
    return sp.coo_matrix((values[t, a, b].astype(np.int64), (rows[t] * m + a, cols[t] * m + b)), shape=(n, n)).tocsr()


class StreamedExport(Work):
    def setUp(self):
        super().setUp()
        self.saved = blockmm.blocks.PIECE_BYTES
        blockmm.blocks.PIECE_BYTES = 700  # a few blocks a piece: block-rows straddle pieces

    def tearDown(self):
        blockmm.blocks.PIECE_BYTES = self.saved
        super().tearDown()

    def check(self, name, expected, width, m, every=True):
        """Every layout, stored and compressed (`every`), else two of them, and Matrix Market."""
        layouts = [(f, c) for f in ("csr", "csc", "coo", "bsr") for c in (False, True)] if every else \
            [("csr", False), ("bsr", True)]
        for fmt, compress in layouts:
            with self.subTest(input=name, format=fmt, compress=compress):
                out = self.path(f"{fmt}{int(compress)}.npz")
                tool("blockmm-export", "-q", "--sparse-format", fmt, *(["--compress"] if compress else []),
                     self.path(name), out, check=0)
                got = sp.load_npz(out)
                self.assertEqual((got.format, got.dtype, got.shape), (fmt, np.dtype(width), expected.shape))
                self.assertEqual((got.astype(np.int64) != expected).nnz, 0)
                if fmt == "bsr":
                    self.assertEqual(got.blocksize, (m, m))
                    self.assertTrue(got.data.reshape(len(got.data), m * m).any(axis=1).all(), "an all-zero block")
                else:
                    self.assertTrue(np.all(got.data != 0), "an explicit zero")
                    self.assertEqual(got.nnz, expected.nnz)
                if fmt in ("csr", "csc"):
                    self.assertTrue(got.has_sorted_indices)
        tool("blockmm-export", "-q", self.path(name), self.path("out.mtx"), check=0)
        with open(self.path("out.mtx"), "rb") as f:
            head = f.read(4096).split(b"\n")
        self.assertEqual(head[2], f"{expected.shape[0]} {expected.shape[0]} {expected.nnz}".encode())
        got = scipy.io.mmread(self.path("out.mtx"))
        self.assertEqual((sp.csr_matrix(got).astype(np.int64) != expected).nnz, 0)

    def test_random_cases(self):
        rng = np.random.default_rng(426)
        cases = [(24, 2, 60, np.uint16, 3), (35, 5, 30, np.uint32, 2), (40, 1, 700, np.uint32, 5),
                 (39, 3, 80, np.uint16, 0), (12, 3, 0, np.uint16, 0), (6, 6, 1, np.uint16, 0)]
        for case, (n, m, count, width, zero_blocks) in enumerate(cases):
            rows, cols, values = random_blocks(rng, n, m, count, width, zero_blocks)
            expected = reference(n, m, rows, cols, values)
            binary_file(self.path(f"s{case}.bin"), n, m, rows, cols, values)
            binary_file(self.path(f"u{case}.bin"), n, m, rows, cols, values, shuffle=rng)
            tool("blockmm-convert", self.path(f"s{case}.bin"), self.path(f"h{case}.h5"), check=0)
            for name in (f"s{case}.bin", f"u{case}.bin", f"h{case}.h5"):
                self.check(name, expected, width, m, every=name.startswith("s"))

    def test_large_n_few_blocks(self):
        rng = np.random.default_rng(7)
        n, m = 2**20, 2
        rows, cols, values = random_blocks(rng, n, m, 9, np.uint32)
        binary_file(self.path("big.bin"), n, m, rows, cols, values)
        self.check("big.bin", reference(n, m, rows, cols, values), np.uint32, m)

    def test_a_product_of_blockmm(self):
        rng = np.random.default_rng(12)
        n, m = 48, 4
        a = reference(n, m, *random_blocks(rng, n, m, 40, np.uint16, high=65535)).toarray()
        blockmm.write_bin(self.path("A.bin"), sp.bsr_matrix(a, blocksize=(m, m)))
        tool("blockmm", "-q", self.path("A.bin"), self.path("A.bin"), self.path("C.bin"), check=0)
        exact = a.astype(object) @ a.astype(object)
        expected = sp.csr_matrix(np.vectorize(lambda v: min(int(v), 2**32 - 1), otypes=[np.int64])(exact))
        self.assertTrue((expected.data == 2**32 - 1).any(), "the case must saturate")
        self.check("C.bin", expected, np.uint32, m)


class WhatAUserSees(Work):
    def product(self, name="C.bin", n=4096, m=4, count=20000, seed=3):
        rows, cols, values = random_blocks(np.random.default_rng(seed), n, m, count, np.uint32, high=9)
        binary_file(self.path(name), n, m, rows, cols, values)

    def test_progress(self):
        self.product()
        saved = blockmm.blocks.PIECE_BYTES, blockmm.progress.BAR_DELAY
        blockmm.blocks.PIECE_BYTES = 64 << 10  # many pieces: many chances to show progress
        blockmm.progress.BAR_DELAY = 0  # a bar from the start (runs shorter than a second show none)
        try:
            os.environ["BLOCKMM_PROGRESS_INTERVAL"] = "0.000001"
            lines = tool("blockmm-export", "--progress", "lines", self.path("C.bin"), self.path("a.npz"), check=0).stderr
            bar = tool("blockmm-export", "--progress", "bar", self.path("C.bin"), self.path("b.npz"), check=0).stderr
            quiet = tool("blockmm-export", "-q", self.path("C.bin"), self.path("c.npz"), check=0).stderr
            os.environ["BLOCKMM_PROGRESS_INTERVAL"] = "soon"
            wrong = tool("blockmm-export", self.path("C.bin"), self.path("d.npz"))
        finally:
            del os.environ["BLOCKMM_PROGRESS_INTERVAL"]
            blockmm.blocks.PIECE_BYTES, blockmm.progress.BAR_DELAY = saved
        shown = lines.splitlines()
        self.assertGreater(len(shown), 3, lines)
        for line in shown:
            self.assertRegex(line, r"^blockmm-export: writing .*a\.npz: +\d+% after \d+:\d\d")
        percents = [int(line.split("%")[0].split()[-1]) for line in shown]
        self.assertEqual(percents, sorted(percents))
        self.assertGreaterEqual(percents[-1], 90)
        self.assertIn("\r", bar)
        self.assertTrue(bar.endswith("\r\x1b[K"), repr(bar[-40:]))  # erased at the end
        self.assertEqual(quiet, "")
        self.assertEqual(wrong.returncode, 2, wrong.stderr)
        self.assertIn("BLOCKMM_PROGRESS_INTERVAL='soon'", wrong.stderr)

    def test_compression_is_asked_for(self):
        self.product()
        tool("blockmm-export", self.path("C.bin"), self.path("stored.npz"), check=0)
        tool("blockmm-export", "--compress", self.path("C.bin"), self.path("deflated.npz"), check=0)
        with zipfile.ZipFile(self.path("stored.npz")) as z:
            self.assertEqual({i.compress_type for i in z.infolist()}, {zipfile.ZIP_STORED})
        with zipfile.ZipFile(self.path("deflated.npz")) as z:
            self.assertEqual({i.compress_type for i in z.infolist()}, {zipfile.ZIP_DEFLATED})
        self.assertLess(os.path.getsize(self.path("deflated.npz")), os.path.getsize(self.path("stored.npz")) / 2)
        self.assertEqual((sp.load_npz(self.path("stored.npz")) != sp.load_npz(self.path("deflated.npz"))).nnz, 0)
        run = tool("blockmm-export", "--compress", self.path("C.bin"), self.path("C.mtx"))
        self.assertEqual(run.returncode, 2, run.stderr)

    def test_memory_follows_a_piece(self):
        """A 150 MB .npz with the default pieces: at most 1.5 times the output, whatever its size."""
        self.product("big.bin", n=2**16, m=4, count=1_800_000, seed=5)
        code, err, peak = peak_memory("blockmm-export", "-q", self.path("big.bin"), self.path("big.npz"))
        self.assertEqual(code, 0, err)
        output = os.path.getsize(self.path("big.npz"))
        self.assertGreater(output, 100 << 20)
        self.assertLess(peak, 1.5 * output, f"peak {peak >> 20} MiB for {output >> 20} MiB of output")


if __name__ == "__main__":
    unittest.main()
