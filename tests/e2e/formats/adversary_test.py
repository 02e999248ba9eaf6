#!/usr/bin/env python3
"""What a fresh adversarial pass (issue 43's "Done when") found on the surfaces of issue 43,
each case failing on the code before its fix:

- AdversaryReaders: a Matrix Market file whose repeated entries outnumber its matrix's places
  (scipy sums them; it was refused), a boolean .npz with repeated entries (scipy ORs them; they
  were counted), a dia .npz with a repeated diagonal (scipy refuses it; it was summed), the
  Python tools' BLOCKMM_* variables (a bad value was silently the default), blockmm's own output
  in parts (refused as "values in other files" with no way out named), and a `matplotlibrc` in
  the folder blockmm-spy runs in (applied: LaTeX on the input's name, colours).
- AdversaryMessages: names with a newline or an escape sequence in the C++ tools' own lines (gen's
  summary, cmp's verdict, info's "file:" line), a name that is not UTF-8 in `blockmm-info --json`
  (exit 1 from the JSON writer), a path longer than info's line buffer (its lines were lost).
- AdversaryRuns: a `--stats-file` on a device that fails after the product is in place (the
  message must say so), two products of a batch writing one file (the first was lost), an output
  named /dev/stdout or a FIFO (the link or the FIFO was replaced by a regular file), a matrix given
  to --batch (held whole in memory before its first line was parsed), and
  `nohup blockmm` (a SIGHUP ignored at the start must stay ignored).

Every product is checked against numpy or scipy here, never against the package's readers alone.

usage: adversary_test.py [unittest args]   (BLOCKMM_BUILD_DIR names the build tree)
"""
import json
import os
import signal
import stat
import subprocess
import sys
import unittest

import numpy as np
import scipy.io
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tool_support import (BUILD, Work, binary_bytes, dense_of_binary, dense_product, peak_memory,  # noqa: E402
                          random_dense, read_bytes, tool, wait_for_entry, write_bytes, write_npz_arrays)

MARKER = b".blockmm-tmp."


def small_inputs(work, n=16, m=4, seed=5):
    """Two random inputs A.bin and B.bin written with numpy; their dense matrices."""
    rng = np.random.default_rng(seed)
    dense = []
    for name in ("A.bin", "B.bin"):
        a = random_dense(rng, n, 0.3, 1023)
        p = n // m
        records = [(i, j, a[i * m:(i + 1) * m, j * m:(j + 1) * m]) for i in range(p) for j in range(p)
                   if a[i * m:(i + 1) * m, j * m:(j + 1) * m].any()]
        write_bytes(work.path(name), binary_bytes(n, m, records))
        dense.append(a)
    return dense


class AdversaryReaders(Work):
    def test_matrix_market_repeats_may_outnumber_the_places(self):
        text = ("%%MatrixMarket matrix coordinate integer general\n2 2 5\n"
                "1 1 3\n1 1 4\n2 2 1\n2 2 1\n2 1 1\n")
        write_bytes(self.path("in.mtx"), text)
        tool("blockmm-import", "-m", 1, self.path("in.mtx"), self.path("out.bin"), check=0)
        expected = scipy.io.mmread(self.path("in.mtx")).toarray()  # [[7, 0], [1, 2]]
        self.assert_dense_equal(dense_of_binary(self.path("out.bin"))[0], expected)
        # A pattern file too, and the size bound that remains: the entries must fit the file.
        write_bytes(self.path("p.mtx"), "%%MatrixMarket matrix coordinate pattern symmetric\n1 1 3\n1 1\n1 1\n1 1\n")
        tool("blockmm-import", "-m", 1, self.path("p.mtx"), self.path("p.bin"), check=0)
        self.assert_dense_equal(dense_of_binary(self.path("p.bin"))[0], scipy.io.mmread(self.path("p.mtx")).toarray())
        write_bytes(self.path("big.mtx"), "%%MatrixMarket matrix coordinate integer general\n2 2 500\n1 1 1\n")
        run = tool("blockmm-import", "-m", 1, self.path("big.mtx"), self.path("big.bin"), in_process=False)
        self.assert_one_error(run, 3, "big.mtx", "500 entries cannot fit in")
        self.assertFalse(os.path.exists(self.path("big.bin")))

    def test_boolean_npz_repeats_are_one_entry_as_in_scipy(self):
        rng = np.random.default_rng(9)
        for fmt in ("coo", "csr", "csc"):
            with self.subTest(format=fmt):
                n = 8
                rows = rng.integers(0, n, 40)
                cols = rng.integers(0, n, 40)
                values = rng.random(40) < 0.8  # some explicit False among the repeats
                coo = sp.coo_matrix((values, (rows, cols)), shape=(n, n))
                if fmt == "coo":
                    arrays = {"format": np.array(b"coo"), "shape": np.array([n, n]), "row": coo.row, "col": coo.col,
                              "data": coo.data}
                else:  # compressed, with the repeats kept (no sum_duplicates)
                    major = coo.row if fmt == "csr" else coo.col
                    minor = coo.col if fmt == "csr" else coo.row
                    order = np.argsort(major, kind="stable")
                    indptr = np.r_[0, np.cumsum(np.bincount(major, minlength=n))]
                    arrays = {"format": np.array(fmt.encode()), "shape": np.array([n, n]), "indptr": indptr,
                              "indices": minor[order], "data": coo.data[order]}
                write_npz_arrays(self.path("b.npz"), arrays)
                expected = sp.load_npz(self.path("b.npz")).toarray().astype(np.int64)
                self.assertLessEqual(expected.max(), 1)
                tool("blockmm-import", "-m", 2, self.path("b.npz"), self.path("b.bin"), check=0)
                self.assert_dense_equal(dense_of_binary(self.path("b.bin"))[0], expected)

    def test_dia_with_a_repeated_diagonal_is_refused_as_scipy_refuses_it(self):
        arrays = {"format": np.array(b"dia"), "shape": np.array([3, 3]), "offsets": np.array([1, 0, 1]),
                  "data": np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]])}
        write_npz_arrays(self.path("d.npz"), arrays)
        with self.assertRaises(ValueError):
            sp.load_npz(self.path("d.npz"))
        run = tool("blockmm-import", "-m", 1, self.path("d.npz"), self.path("d.bin"), in_process=False)
        self.assert_one_error(run, 3, "d.npz", "dia offset 1 occurs more than once")
        self.assertFalse(os.path.exists(self.path("d.bin")))

    def test_bad_settings_are_usage_errors_before_any_file(self):
        write_bytes(self.path("in.mtx"), "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 3\n")
        write_bytes(self.path("A.bin"), binary_bytes(2, 1, [(0, 0, np.array([[3]]))]))
        cases = [("BLOCKMM_LIBRARY_TIMEOUT", "0"), ("BLOCKMM_LIBRARY_TIMEOUT", "60s"),
                 ("BLOCKMM_LIBRARY_TIMEOUT", "86400"), ("BLOCKMM_PROGRESS_INTERVAL", "x")]
        for name, value in cases:
            for args in (["blockmm-import", "-m", 1, self.path("in.mtx"), self.path("out.bin")],
                         ["blockmm-export", "-q", self.path("A.bin"), self.path("out.npz")],
                         ["blockmm-spy", self.path("A.bin"), self.path("out.png")]):
                with self.subTest(tool=args[0], setting=f"{name}={value}"):
                    run = tool(*args, in_process=False, env={name: value})
                    self.assert_one_error(run, 2, f"{name}='{value}'")
                    self.assertEqual(sorted(os.listdir(self.dir)), ["A.bin", "in.mtx"])
        tool("blockmm-export", "-q", self.path("A.bin"), self.path("out.npz"), in_process=False,
             env={"BLOCKMM_LIBRARY_TIMEOUT": "0120"}, check=0)

    def test_spy_ignores_a_matplotlibrc_nobody_named(self):
        """matplotlib reads ./matplotlibrc when imported: a file in the folder the tool runs in
        (anyone's, in a shared folder) must not run LaTeX on the input's name or recolour the PNG."""
        write_bytes(self.path("A.bin"), binary_bytes(4, 2, [(1, 0, np.full((2, 2), 7))]))
        write_bytes(self.path("matplotlibrc"), "text.usetex: True\nfigure.facecolor: red\n")
        run = subprocess.run([os.path.join(BUILD, "blockmm-spy"), "A.bin", "A.png"], cwd=self.dir,
                             capture_output=True, text=True, timeout=120,
                             env={k: v for k, v in os.environ.items() if k != "MATPLOTLIBRC"})
        self.assertEqual(run.returncode, 0, run.stderr)
        from PIL import Image

        with Image.open(self.path("A.png")) as image:
            self.assertEqual(image.convert("RGB").getpixel((2, 2)), (255, 255, 255))

    def test_output_in_parts_names_the_way_out(self):
        a, b = small_inputs(self, n=64, m=4)
        run = subprocess.run([os.path.join(BUILD, "blockmm"), "-q", "--parts", "3", self.path("A.bin"),
                              self.path("B.bin"), self.path("C.h5")], capture_output=True, text=True,
                             env=dict(os.environ, BLOCKMM_MPI="0"), timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertGreater(len([f for f in os.listdir(self.dir) if ".part-" in f]), 1)
        run = tool("blockmm-export", "-q", self.path("C.h5"), self.path("C.npz"), in_process=False)
        self.assert_one_error(run, 3, "C.h5", "part files", f"blockmm-convert {self.path('C.h5')} JOINED.h5")
        tool("blockmm-convert", self.path("C.h5"), self.path("J.h5"), check=0)
        tool("blockmm-export", "-q", self.path("J.h5"), self.path("C.npz"), check=0)
        self.assert_dense_equal(sp.load_npz(self.path("C.npz")).toarray(), dense_product(a, b))


class AdversaryMessages(Work):
    HOSTILE = b"x\n\x1b[31mred"

    def name(self, suffix):
        return os.path.join(os.fsencode(self.dir), self.HOSTILE + suffix)

    def run_tool(self, *args):
        return subprocess.run([os.path.join(BUILD, args[0]), *args[1:]], capture_output=True, timeout=120,
                              env=dict(os.environ, BLOCKMM_MPI="0"))

    def assert_escaped_line(self, stream, code_run, count=1):
        lines = stream.decode("utf-8", "surrogateescape").splitlines()
        self.assertEqual(len(lines), count, f"exit {code_run.returncode}: {stream!r}")
        self.assertNotIn("\x1b", lines[0])
        self.assertIn(r"x\x0a\x1b[31mred", lines[0])

    def test_control_characters_in_names_are_escaped(self):
        a = self.name(b".bin")
        run = self.run_tool("blockmm-gen", a, "-n", "8", "-m", "2", "-k", "3")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assert_escaped_line(run.stdout, run)
        write_bytes(self.path("B.bin"), binary_bytes(8, 2, [(0, 1, np.ones((2, 2)))]))
        run = self.run_tool("blockmm-cmp", a, self.path("B.bin"))
        self.assertEqual(run.returncode, 1, run.stderr)
        self.assert_escaped_line(run.stdout, run, count=2)
        run = self.run_tool("blockmm-info", a)
        self.assertEqual(run.returncode, 0, run.stderr)
        first = run.stdout.splitlines()[0].decode("utf-8", "surrogateescape")
        self.assertTrue(first.startswith("file:") and r"x\x0a\x1b[31mred" in first, run.stdout)
        self.assertEqual(run.stdout.splitlines()[1], b"format:          COL380 binary")

    def test_info_json_carries_any_name(self):
        path = os.path.join(os.fsencode(self.dir), b"not-utf8-\xff\xfe.bin")
        write_bytes(path, binary_bytes(4, 2, [(1, 0, np.full((2, 2), 7))]))
        run = self.run_tool("blockmm-info", "--json", path)
        self.assertEqual(run.returncode, 0, run.stderr)
        facts = json.loads(run.stdout.decode("utf-8"))
        # Bytes that are not UTF-8 are written as the characters of the same numbers (Latin-1).
        self.assertEqual(facts["path"].encode("latin-1")[-15:], b"not-utf8-\xff\xfe.bin")
        self.assertEqual((facts["n"], facts["m"], facts["k"]), (4, 2, 1))

    def test_info_of_a_long_path_keeps_every_line(self):
        folder = self.dir
        while len(folder) < 2400:
            folder = os.path.join(folder, "d" * 200)
        os.makedirs(folder)
        path = os.path.join(folder, "A.bin")
        write_bytes(path, binary_bytes(4, 2, [(1, 0, np.full((2, 2), 7)), (0, 1, np.full((2, 2), 1))]))
        run = self.run_tool("blockmm-info", path)
        self.assertEqual(run.returncode, 0, run.stderr)
        lines = run.stdout.decode().splitlines()
        self.assertEqual([line.split(":")[0] for line in lines],
                         ["file", "format", "size", "header", "values", "sorted", "duplicates", "all-zero blocks",
                          "value range", "blocks per row"])
        self.assertEqual(lines[0], "file:            " + path)
        self.assertIn("n = 4, m = 2, k = 2", lines[3])


class LongValues(Work):
    """Issue 52, item 5: a value of any length, quoted in a message, is cut after 160 bytes with
    "…" (errors.quoted, as the C++ tools' quoted_value): one line of a few hundred bytes from the
    Python tools' options, environment and files, whatever was given."""

    def assert_cut(self, run, code, *words):
        lines = run.stderr.splitlines()
        self.assertEqual(run.returncode, code, run.stderr[:2000])
        self.assertEqual(len(lines), 1, run.stderr[:2000])
        self.assertLess(len(lines[0].encode()), 600, lines[0][:2000])
        self.assertIn("\u2026", lines[0])
        for word in words:
            self.assertIn(word, lines[0])

    def test_long_values_are_cut(self):
        from blockmm.errors import quoted
        self.assertEqual(quoted("two"), "two")
        self.assertEqual(quoted("x" * 161), "x" * 160 + "\u2026")
        self.assertEqual(quoted("\u00e9" * 100, 5), "\u00e9\u00e9\u2026")  # never half a character
        self.assertEqual(quoted("1\n2"), "1\\x0a2")
        write_bytes(self.path("A.bin"), binary_bytes(8, 2, [(0, 1, np.ones((2, 2)))]))
        long, digits = "x" * 100_000, "9" * 4000
        for env, words in [({"BLOCKMM_PROGRESS_INTERVAL": long}, ["BLOCKMM_PROGRESS_INTERVAL='xxx"]),
                           ({"BLOCKMM_LIBRARY_TIMEOUT": digits}, ["BLOCKMM_LIBRARY_TIMEOUT='999"])]:
            with self.subTest(env=list(env)):
                self.assert_cut(tool("blockmm-export", self.path("A.bin"), self.path("A.mtx"), env=env), 2, *words)
        for args, words in [(("blockmm-export", "--to", long, self.path("A.bin"), self.path("A.mtx")), ["--to"]),
                            (("blockmm-spy", "--cells", digits, self.path("A.bin"), self.path("A.png")),
                             ["--cells 999"]),
                            (("blockmm-spy", "--cells", long, self.path("A.bin"), self.path("A.png")), ["--cells"]),
                            (("blockmm-import", "-m", digits, self.path("A.bin"), self.path("B.bin")), ["999"])]:
            with self.subTest(args=args[:2]):
                self.assert_cut(tool(*args), 2, *words)
        write_bytes(self.path("M.mtx"),
                    b"%%MatrixMarket matrix coordinate " + b"q" * 100_000 + b" general\n1 1 1\n1 1 1\n")
        self.assert_cut(tool("blockmm-import", "-m", 1, self.path("M.mtx"), self.path("M.bin")), 3, "field 'qqq")


class AdversaryRuns(Work):
    def blockmm(self, *args, **kwargs):
        return subprocess.run([os.path.join(BUILD, "blockmm"), *map(str, args)], capture_output=True, text=True,
                              timeout=300, env=dict(os.environ, BLOCKMM_MPI="0"), **kwargs)

    def test_stats_file_failing_after_the_product_says_it_was_written(self):
        a, b = small_inputs(self)
        write_bytes(self.path("C.bin"), b"old")
        run = self.blockmm("-q", "--stats-file", "/dev/full", self.path("A.bin"), self.path("B.bin"), self.path("C.bin"))
        self.assert_one_error(run, 4, "/dev/full", f"the product {self.path('C.bin')} was written")
        self.assert_dense_equal(dense_of_binary(self.path("C.bin"))[0], dense_product(a, b))

    def test_a_batch_never_writes_one_file_twice(self):
        small_inputs(self)
        a, b, c, s = (self.path(x) for x in ("A.bin", "B.bin", "C.bin", "s.json"))
        for lines, words in [([f"{a} {b} {c}", f"{b} {a} {c}"], "batch.txt:2: the output"),
                             ([f"{a} {b} {c}", f"{b} {a} {self.dir}/./C.bin"], "batch.txt:2: the output"),
                             ([f"--stats-file {s} {a} {b} {c}", f"--stats-file {s} {b} {a} {self.path('D.bin')}"],
                              "batch.txt:2: the --stats-file"),
                             ([f"{a} {b} {c}", f"--stats-file {c} {b} {a} {self.path('D.bin')}"],
                              "batch.txt:2: the --stats-file")]:
            with self.subTest(lines=lines):
                write_bytes(self.path("batch.txt"), "\n".join(lines) + "\n")
                run = self.blockmm("-q", "--batch", self.path("batch.txt"))
                self.assert_one_error(run, 2, words, "batch.txt:1")
                self.assertEqual(sorted(os.listdir(self.dir)), ["A.bin", "B.bin", "batch.txt"])
        # /dev/null is written in place: a batch of timing runs may name it for every product.
        write_bytes(self.path("batch.txt"), f"{a} {b} /dev/null\n{b} {a} /dev/null\n")
        run = self.blockmm("-q", "--batch", self.path("batch.txt"))
        self.assertEqual(run.returncode, 0, run.stderr)

    def test_outputs_through_descriptors_and_pipes_are_refused(self):
        """/dev/stdout is a link to /proc/self/fd/1: renaming a finished output over it replaced
        the link (for root, the system's /dev/stdout) with a regular file holding the product, as
        it replaced a FIFO named as OUT. Both are refused now, by every tool, and left as they were;
        a character device behind the link is still written in place."""
        a, b = small_inputs(self)
        fake = os.path.join(self.dir, "dev")
        os.mkdir(fake)
        os.symlink("/proc/self/fd/1", os.path.join(fake, "stdout"))
        os.mkfifo(os.path.join(fake, "fifo"))
        write_bytes(self.path("in.mtx"), "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 3\n")
        for out in (os.path.join(fake, "stdout"), os.path.join(fake, "fifo")):
            for args in (["blockmm", "-q", self.path("A.bin"), self.path("B.bin"), out],
                         ["blockmm", "-q", "--stats-file", out, self.path("A.bin"), self.path("B.bin"),
                          self.path("C.bin")],
                         ["blockmm-convert", self.path("A.bin"), out],
                         ["blockmm-gen", out, "-n", "8", "-m", "2", "-k", "3"],
                         ["blockmm-import", "-m", "1", "--to", "bin", self.path("in.mtx"), out],
                         ["blockmm-export", "-q", "--to", "mtx", self.path("A.bin"), out]):
                for stdout in ("pipe", "file"):
                    with self.subTest(args=args[0], out=os.path.basename(out), stdout=stdout):
                        with open(self.path("stdout.txt"), "wb") as sink:
                            run = subprocess.run([os.path.join(BUILD, args[0]), *args[1:]], timeout=120,
                                                 stdout=subprocess.PIPE if stdout == "pipe" else sink,
                                                 stderr=subprocess.PIPE, text=True,
                                                 env=dict(os.environ, BLOCKMM_MPI="0"))
                        self.assertEqual(run.returncode, 4, run.stderr)
                        self.assertEqual(run.stderr.count("\n"), 1, run.stderr)
                        self.assertIn(out, run.stderr)
                        self.assertEqual(os.readlink(os.path.join(fake, "stdout")), "/proc/self/fd/1")
                        self.assertTrue(stat.S_ISFIFO(os.lstat(os.path.join(fake, "fifo")).st_mode))
                        self.assertEqual(sorted(os.listdir(fake)), ["fifo", "stdout"])
        # Behind the link a character device: written in place, as /dev/null itself.
        with open(os.devnull, "wb") as null:
            run = subprocess.run([os.path.join(BUILD, "blockmm"), "-q", self.path("A.bin"), self.path("B.bin"),
                                  os.path.join(fake, "stdout")], stdout=null, stderr=subprocess.PIPE, text=True,
                                 timeout=120, env=dict(os.environ, BLOCKMM_MPI="0"))
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(os.readlink(os.path.join(fake, "stdout")), "/proc/self/fd/1")

    def test_a_file_that_is_no_batch_fails_at_its_first_line(self):
        """A matrix given to --batch by mistake: its lines were all held in memory (about 14 bytes
        for each byte read, 340 MB here) before the first was parsed; under a memory limit that
        was a crash (std::bad_alloc, SIGABRT). Each line is parsed as it is read now. (The peak is
        measured rather than limited: an AddressSanitizer build cannot start under RLIMIT_AS.)"""
        write_bytes(self.path("C.mtx"), b"%%MatrixMarket matrix coordinate integer general\n" + b"1 2 3\n" * 4_000_000)
        code, err, peak = peak_memory("blockmm", "--batch", self.path("C.mtx"), env={"BLOCKMM_MPI": "0"})
        self.assertEqual(code, 2, err)
        self.assertEqual(err.count("\n"), 1, err)
        self.assertIn("C.mtx:1:", err)
        self.assertLess(peak, 150 << 20, f"blockmm took {peak >> 20} MiB to refuse a 24 MB file that is no batch")

    def test_nohup_keeps_a_run_through_a_hangup(self):
        """A SIGHUP ignored at the start (nohup) stays ignored; one not ignored still ends the run
        and removes its temporary (the control: the hangup does arrive while the run works)."""
        rng = np.random.default_rng(3)
        n, m, p = 4096, 4, 1024
        for name in ("A.bin", "B.bin"):
            keys = rng.choice(p * p, size=p * p // 20, replace=False)
            records = np.zeros(len(keys), dtype=np.dtype([("i", "<i4"), ("j", "<i4"), ("v", "<u2", (m, m))]))
            records["i"], records["j"] = keys // p, keys % p
            records["v"] = rng.integers(0, 1024, size=(len(keys), m, m))
            write_bytes(self.path(name), np.array([n, m, len(keys)], "<i4").tobytes() + records.tobytes())
        out = os.path.join(self.dir, "out")
        os.mkdir(out)
        for ignored in (False, True):
            with self.subTest(sighup_ignored=ignored):
                target = os.path.join(out, "C.bin")
                process = subprocess.Popen(
                    [os.path.join(BUILD, "blockmm"), self.path("A.bin"), self.path("B.bin"), target, "--backend",
                     "reference", "--threads", "1", "-q"], stderr=subprocess.PIPE,
                    env=dict(os.environ, BLOCKMM_MPI="0"),
                    preexec_fn=(lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)) if ignored else None)
                if wait_for_entry(out, MARKER.decode(), process) is None:
                    self.fail(f"no temporary appeared: {process.communicate()[1]!r}")
                os.kill(process.pid, signal.SIGHUP)
                err = process.communicate(timeout=300)[1]
                if ignored:
                    self.assertEqual(process.returncode, 0, err)
                    self.assertEqual(os.listdir(out), ["C.bin"])
                    header = np.frombuffer(read_bytes(target)[:12], "<i4")
                    self.assertEqual((header[0], header[1]), (n, m))
                    self.assertEqual(os.path.getsize(target), 12 + int(header[2]) * (8 + 4 * m * m))
                else:
                    self.assertIn(process.returncode, (-signal.SIGHUP, 128 + signal.SIGHUP), err)
                    self.assertEqual(os.listdir(out), [])


if __name__ == "__main__":
    unittest.main()
