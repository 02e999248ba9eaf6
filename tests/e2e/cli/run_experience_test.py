#!/usr/bin/env python3
"""What a user sees when running blockmm (label "cli"): the progress display through a
pseudo-terminal of 40 and 120 columns, through a pipe and under mpirun; the messages that say
what to do (no GPU, a product given as input, a mistyped option, --help); --stats text and JSON.

Every run multiplies random inputs made by blockmm-gen, and every product is checked against
an independent oracle in this file (numpy, uint64 sums saturated to uint32), so a display that
broke the output would fail here too.

Usage: run_experience_test.py [unittest names...]; needs BLOCKMM_BIN and BLOCKMM_BUILD_DIR
(and BLOCKMM_MPIEXEC for the mpirun case).
"""
import datetime
import json
import os
import pty
import re
import select
import shlex
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import fcntl
import time
import unittest

import numpy as np

BIN = os.environ.get("BLOCKMM_BIN", "")
BUILD = os.environ.get("BLOCKMM_BUILD_DIR", os.path.dirname(BIN))
GEN = os.path.join(BUILD, "blockmm-gen")
ESC = "\x1b"
FRAME_PERCENT = re.compile(r"(\d+\.\d)%")
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d blockmm: ")  # a log's time-stamped line


def message_lines(stderr):
    """stderr's lines other than the log's (the header a run in a pipe prints as it starts, its
    progress and its closing line): errors, warnings, notes."""
    return [line for line in stderr.splitlines() if not LOG_LINE.match(line)]


def read_col380(path, dtype):
    with open(path, "rb") as f:
        raw = f.read()
    n, m, k = struct.unpack_from("<iii", raw, 0)
    rec = np.dtype([("i", "<i4"), ("j", "<i4"), ("v", dtype, (m, m))])
    recs = np.frombuffer(raw, dtype=rec, offset=12, count=k)
    return n, m, recs


def oracle(a_path, b_path):
    """{(i, j): uint32 block} of A x B, all-zero blocks dropped. Block products through float64
    matrix products, which are exact here: every sum has at most n terms below 2^32, and
    n * 2^32 < 2^53 for n <= 2^21; then saturated to 2^32 - 1."""
    n, m, a = read_col380(a_path, "<u2")
    _, _, b = read_col380(b_path, "<u2")
    p = n // m
    assert n <= 2**21
    c = np.zeros((p, p, m, m))
    for k in range(p):
        ia = a["i"][a["j"] == k]
        jb = b["j"][b["i"] == k]
        if len(ia) == 0 or len(jb) == 0:
            continue
        left = a["v"][a["j"] == k].astype(np.float64).reshape(len(ia) * m, m)
        right = b["v"][b["i"] == k].astype(np.float64).transpose(1, 0, 2).reshape(m, len(jb) * m)
        product = (left @ right).reshape(len(ia), m, len(jb), m).transpose(0, 2, 1, 3)
        c[ia[:, None], jb[None, :]] += product  # (i, j) pairs are distinct within one k
    nonzero = np.argwhere(c.reshape(p, p, -1).any(axis=2))
    return {(int(i), int(j)): np.minimum(c[i, j], 2**32 - 1).astype(np.uint32) for i, j in nonzero}


class Case(unittest.TestCase):
    """Shared inputs. The big pair is big enough that the numeric phase takes a good part of a
    second on one thread, so that a display redrawn every 0.02 s shows it move inside the one
    chunk; the small pair (a few thousand output blocks, still thousands-separated) serves the
    tests that need no time to pass, which keeps the suite quick under the sanitizers too."""

    tmp = None
    expected = {}

    @classmethod
    def setUpClass(cls):
        if not BIN or not os.access(BIN, os.X_OK):
            raise unittest.SkipTest("BLOCKMM_BIN is not set")
        cls.tmp = tempfile.mkdtemp(prefix="blockmm-run-experience-")
        cls.a = os.path.join(cls.tmp, "A.bin")
        cls.b = os.path.join(cls.tmp, "B.bin")
        cls.sa = os.path.join(cls.tmp, "smallA.bin")
        cls.sb = os.path.join(cls.tmp, "smallB.bin")
        seed = int(os.environ.get("BLOCKMM_TEST_SEED", str(int(time.time()) % 100000)))
        print(f"seed {seed}", file=sys.stderr)
        for path, s, shape in ((cls.a, seed, ("2048", "64", "0.5")), (cls.b, seed + 1, ("2048", "64", "0.5")),
                               (cls.sa, seed + 2, ("512", "4", "0.1")), (cls.sb, seed + 3, ("512", "4", "0.1"))):
            subprocess.run([GEN, path, "--n", shape[0], "--m", shape[1], "--density", shape[2], "--seed", str(s),
                            "--max-value", "65535", "-q"], check=True)
        Case.expected = {}  # the oracle of this class's inputs (each class makes its own)

    @classmethod
    def tearDownClass(cls):
        if cls.tmp:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OMPI_COMM_WORLD", "PMIX_", "PMI_", "SLURM_"))}
        env.update({"BLOCKMM_PROGRESS_INTERVAL": "0.02", "OMP_NUM_THREADS": "1", "TERM": "xterm"})
        env.update(extra)
        return env

    def oracle_for(self, small):
        key = "small" if small else "big"
        if key not in Case.expected:
            Case.expected[key] = oracle(self.sa, self.sb) if small else oracle(self.a, self.b)
        return Case.expected[key]

    def check_product(self, out_path, small=False):
        expected = self.oracle_for(small)
        n, m, recs = read_col380(out_path, "<u4")
        self.assertEqual(len(recs), len(expected))
        keys = [(int(r["i"]), int(r["j"])) for r in recs]
        self.assertEqual(keys, sorted(expected))
        for r, key in zip(recs, keys):
            np.testing.assert_array_equal(r["v"], expected[key])

    def run_on_pty(self, args, columns, env):
        """Runs blockmm with stdout and stderr on a pseudo-terminal of `columns` columns."""
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
        proc = subprocess.Popen([BIN] + args, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env,
                                close_fds=True)
        os.close(slave)
        chunks = []
        deadline = time.time() + 120
        while time.time() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=60)
        os.close(master)
        return code, b"".join(chunks).decode("utf-8", "replace")


class ProgressOnTerminal(Case):
    def frames(self, text):
        # A frame is what one redraw leaves on the line: between carriage returns, without the
        # erase-to-end-of-line that follows it.
        return [f.replace(ESC + "[K", "") for f in text.split("\r")]

    def check_bar(self, columns):
        out = os.path.join(self.tmp, f"C{columns}.bin")
        code, text = self.run_on_pty(["--threads", "1", self.a, self.b, out], columns, self.env())
        self.assertEqual(code, 0, text)
        bar, _, summary = text.rpartition(ESC + "[K")
        self.assertNotIn("\n", bar, "the bar must stay on one line: " + repr(text[-300:]))
        self.assertEqual(summary.count("\n"), 1, "one summary line after the bar: " + repr(summary))
        frames = [f for f in self.frames(bar) if f]
        self.assertTrue(frames, repr(text))
        for f in frames:
            self.assertLessEqual(len(f), columns - 1, f"frame wider than {columns} - 1 columns: {f!r}")
            self.assertNotIn(ESC, f, repr(f))
        numeric = [f for f in frames if FRAME_PERCENT.search(f)]
        inside = {FRAME_PERCENT.search(f).group(1) for f in numeric} - {"0.0", "100.0"}
        # The one chunk is reported by the kernels' counter while it runs: intermediate values.
        self.assertGreaterEqual(len(inside), 2, f"no movement inside the chunk: {numeric}")
        # The bar is cleared at the end, and one line says what was written, how big, how long.
        self.assertRegex(text, re.escape("\r" + ESC + "[K") + r"blockmm: wrote " + re.escape(out) +
                         r" \(binary\): [\d,]+ blocks, [\d.]+ [kMGT]?B in [\d.]+ s\r?\n$")
        self.check_product(out)
        return numeric

    def test_40_columns(self):
        numeric = self.check_bar(40)
        self.assertTrue(any("ETA" in f for f in numeric), numeric)

    def test_120_columns(self):
        numeric = self.check_bar(120)
        full = [f for f in numeric if "elapsed" in f and "ETA" in f and "MAC/s" in f and "[" in f]
        self.assertTrue(full, f"120 columns show phase, bar, rate, elapsed and ETA: {numeric}")
        self.assertTrue(all(f.startswith("blockmm: multiplying") for f in full), full)

    def test_dumb_terminal_gets_plain_lines(self):
        out = os.path.join(self.tmp, "Cdumb.bin")
        code, text = self.run_on_pty(["--threads", "1", self.a, self.b, out], 80, self.env(TERM="dumb"))
        self.assertEqual(code, 0, text)
        self.assertNotIn(ESC, text)
        self.assertNotIn("\r", text.replace("\r\n", "\n"))
        self.assertRegex(text, r"blockmm: multiplying \d+\.\d%")
        self.check_product(out)

    def test_short_run_ends_with_one_summary_line(self):
        out = os.path.join(self.tmp, "Cshort_terminal.bin")
        code, text = self.run_on_pty(["--threads", "1", self.sa, self.sb, out], 80, self.env(BLOCKMM_PROGRESS_INTERVAL="5"))
        self.assertEqual(code, 0, text)
        self.assertRegex(text, r"^blockmm: wrote " + re.escape(out) + r" \(binary\): [\d,]+ blocks, [\d.]+ [kMGT]?B in "
                         r"[\d.]+ s\r?\n$")
        self.check_product(out, small=True)

    def test_quiet_is_silent(self):
        out = os.path.join(self.tmp, "Cquiet.bin")
        code, text = self.run_on_pty(["--threads", "1", "-q", self.sa, self.sb, out], 80, self.env())
        self.assertEqual(code, 0, text)
        self.assertEqual(text, "")
        self.check_product(out, small=True)


class ProgressInLogs(Case):
    STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d "  # local time, ISO 8601

    def check_lines(self, err, out, ranks=1, scope=""):
        self.assertNotIn(ESC, err)
        self.assertNotIn("\r", err)
        lines = err.splitlines()
        # Every line carries the local time, as logs of long runs do.
        for line in lines:
            self.assertRegex(line, "^" + self.STAMP + "blockmm: ")
        start = datetime.datetime.fromisoformat(lines[0].split(" ")[0])
        self.assertLess(abs((datetime.datetime.now(datetime.timezone.utc) - start).total_seconds()), 300, lines[0])
        # The first, printed as the run starts, names the version, the host, ranks x threads and
        # the command.
        self.assertRegex(lines[0], self.STAMP + r"blockmm: blockmm \d+\.\d+\.\d+ \(commit [^)]*\) on " +
                         re.escape(socket.gethostname()) + f": {ranks} ranks? x 1 thread: .*blockmm " +
                         re.escape(f"--threads 1 {self.a} {self.b} {out}") + "$")
        lines = [line.split(" ", 1)[1] for line in lines]
        numeric = [line for line in lines if re.match(r"blockmm: multiplying \d+\.\d% \(", line)]
        self.assertGreaterEqual(len(numeric), 2, err)
        for line in numeric:
            self.assertRegex(line, r"tiles" + re.escape(scope) + r"\)(, [\d.]+ [MGT]MAC/s)?, elapsed \d+:\d\d(, ETA \d+:\d\d)?$")
        moving = [line for line in numeric if re.search(r"MAC/s, elapsed \d+:\d\d, ETA \d+:\d\d$", line)]
        self.assertTrue(moving, "lines with rate and ETA once tiles are done: " + err)
        self.assertEqual(len([line for line in lines if line.startswith("blockmm: done, elapsed")]), 1, err)
        self.assertRegex(lines[-1], r"^blockmm: done, elapsed \d+:\d\d, cpu backend: wrote " + re.escape(out) +
                         r" \(binary\): [\d,]+ blocks, [\d.]+ [kMGT]?B in [\d.]+ s$")
        return lines

    def test_pipe(self):
        out = os.path.join(self.tmp, "Cpipe.bin")
        p = subprocess.run([BIN, "--threads", "1", self.a, self.b, out], env=self.env(), capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_lines(p.stderr, out)
        self.check_product(out)

    def test_short_run_logs_its_start_and_end(self):
        # A run shorter than the interval (5 s by default) left nothing in a log, and a longer
        # one's header came at 5 s with that time (issue 53): the header as it starts, the
        # closing line always; -q none of it.
        out = os.path.join(self.tmp, "Cshort.bin")
        env = self.env()
        del env["BLOCKMM_PROGRESS_INTERVAL"]  # 5 s: this run is shorter
        started = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        p = subprocess.run([BIN, self.sa, self.sb, out], env=env, capture_output=True, text=True, timeout=120)
        ended = datetime.datetime.now(datetime.timezone.utc)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stderr.splitlines()
        self.assertEqual(len(lines), 2, p.stderr)
        self.assertRegex(lines[0], "^" + self.STAMP + r"blockmm: blockmm \d+\.\d+\.\d+ \(commit [^)]*\) on .*: 1 rank "
                         r"x \d+ threads?: .*blockmm " + re.escape(f"{self.sa} {self.sb} {out}") + "$")
        self.assertRegex(lines[1], "^" + self.STAMP + r"blockmm: done, elapsed 0:0\d, cpu backend: wrote " +
                         re.escape(out) + r" \(binary\): [\d,]+ blocks, [\d.]+ [kMGT]?B in [\d.]+ s$")
        for line in lines:
            stamp = datetime.datetime.fromisoformat(line.split(" ")[0])
            self.assertTrue(started <= stamp <= ended, f"{line}: not stamped between {started} and {ended}")
        self.check_product(out, small=True)
        p = subprocess.run([BIN, "-q", self.sa, self.sb, out], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.check_product(out, small=True)

    def test_progress_none_and_bad_interval(self):
        out = os.path.join(self.tmp, "Cnone.bin")
        p = subprocess.run([BIN, "--progress", "none", self.sa, self.sb, out], env=self.env(), capture_output=True,
                           text=True, timeout=120)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.check_product(out, small=True)
        p = subprocess.run([BIN, self.sa, self.sb, out], env=self.env(BLOCKMM_PROGRESS_INTERVAL="soon"),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("BLOCKMM_PROGRESS_INTERVAL", p.stderr)

    def test_mpirun_rank0_only(self):
        mpiexec = os.environ.get("BLOCKMM_MPIEXEC", "")
        if not mpiexec:
            self.skipTest("BLOCKMM_MPIEXEC is not set")
        out = os.path.join(self.tmp, "Cmpi.bin")
        cmd = [mpiexec, os.environ.get("BLOCKMM_MPIEXEC_NUMPROC_FLAG", "-n"), "2"]
        cmd += shlex.split(os.environ.get("BLOCKMM_MPIEXEC_FLAGS", ""))
        cmd += ["-x", "BLOCKMM_PROGRESS_INTERVAL", "-x", "OMP_NUM_THREADS"] if "Open MPI" in subprocess.run(
            [mpiexec, "--version"], capture_output=True, text=True).stdout else []
        cmd += [BIN, "--threads", "1", self.a, self.b, out]
        p = subprocess.run(cmd, env=self.env(), capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_lines(p.stderr, out, 2, ", rank 0 of 2")  # one "done" line: only rank 0 speaks
        self.check_product(out)


class Messages(Case):
    def run_blockmm(self, args, **env):
        env.setdefault("BLOCKMM_PROGRESS_INTERVAL", "5")  # the default: these short runs print no progress
        return subprocess.run([BIN] + args, env=self.env(**env), capture_output=True, text=True, timeout=120)

    def assert_one_error_line(self, p, code):
        """The error's line first among stderr's lines besides the log's (a run that started
        printed its header first); returns those lines."""
        self.assertEqual(p.returncode, code, p.stderr)
        lines = message_lines(p.stderr)
        self.assertTrue(lines and lines[0].startswith("blockmm: error: "), p.stderr)
        return lines

    def test_cuda_without_gpu(self):
        out = os.path.join(self.tmp, "Ccuda.bin")
        p = self.run_blockmm(["--backend", "cuda", self.sa, self.sb, out], CUDA_VISIBLE_DEVICES="")
        lines = self.assert_one_error_line(p, 5)
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("no usable GPU", lines[0])
        self.assertIn("--backend cpu", lines[0])
        self.assertNotRegex(lines[0], r"cuda[A-Z]\w*\(", "no internal call text in the one line")
        self.assertFalse(os.path.exists(out))

    def test_product_given_as_input(self):
        product = os.path.join(self.tmp, "P.bin")
        self.assertEqual(self.run_blockmm(["-q", self.sa, self.sb, product]).returncode, 0)
        self.check_product(product, small=True)
        out = os.path.join(self.tmp, "Cwrong.bin")
        p = self.run_blockmm([product, self.sb, out])
        lines = self.assert_one_error_line(p, 3)
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn(product + ": holds uint32 values (a product)", lines[0])
        self.assertFalse(os.path.exists(out))

    def test_mistyped_options(self):
        for typed, meant in (("--thread", "--threads"), ("--chunksize", "--chunk-size"), ("--stat", "--stats"),
                             ("--backnd", "--backend"), ("--progres=bar", "--progress")):
            p = self.run_blockmm([typed, "4", self.sa, self.sb, os.path.join(self.tmp, "x.bin")])
            self.assert_one_error_line(p, 2)
            self.assertIn(f"did you mean '{meant}'?", p.stderr)
        p = self.run_blockmm(["--zzzzzzzz", self.sa, self.sb, os.path.join(self.tmp, "x.bin")])
        self.assert_one_error_line(p, 2)
        self.assertNotIn("did you mean", p.stderr)

    def test_help_shows_real_defaults(self):
        p = self.run_blockmm(["--help"])
        self.assertEqual(p.returncode, 0)
        stats = [line for line in p.stdout.splitlines() if line.strip().startswith("--stats ")]
        self.assertEqual(len(stats), 1, p.stdout)
        self.assertIn("off by default", stats[0])
        self.assertNotRegex(stats[0], r"=text\s", "--stats alone means text; the default is off")
        self.assertRegex(p.stdout, r"--chunk-size SIZE=256M")
        self.assertIn("HDF5", p.stdout.split("Options:")[0])  # the inputs say HDF5 is accepted
        self.assertIn("Usage: blockmm ", p.stdout)

    def test_standard_output_errors_exit_four(self):
        """A write to stdout that fails (here /dev/full) is an output failure, exit 4 with one
        line naming stdout, in blockmm and in every C++ tool; never exit 0 with the text lost."""
        gen_out = os.path.join(self.tmp, "G.bin")
        cases = [
            [BIN, "--stats", self.sa, self.sb, os.path.join(self.tmp, "Cfull.bin")],
            [BIN, "--stats=json", self.sa, self.sb, os.path.join(self.tmp, "Cfull.bin")],
            [BIN, "--help"],
            [BIN, "--version"],
            [GEN, gen_out, "-n", "16", "-m", "4", "-k", "3"],
            [os.path.join(BUILD, "blockmm-info"), self.sa],
            [os.path.join(BUILD, "blockmm-info"), "--json", self.sa],
            [os.path.join(BUILD, "blockmm-cmp"), self.sa, self.sa],
            [os.path.join(BUILD, "blockmm-convert"), "--help"],
            [os.path.join(BUILD, "blockmm-cmp"), "--version"],
        ]
        for args in cases:
            with self.subTest(args=args[1:]), open("/dev/full", "w") as full:
                p = subprocess.run(args, env=self.env(BLOCKMM_PROGRESS_INTERVAL="5"), stdout=full,
                                   stderr=subprocess.PIPE, text=True, timeout=120)
                self.assertEqual(p.returncode, 4, p.stderr)
                lines = message_lines(p.stderr)
                self.assertEqual(len(lines), 1, p.stderr)
                self.assertRegex(lines[0], r"^blockmm(-\w+)?: error: standard output: cannot write: No space left on device")
        # The product itself was written whole (the stats come after it), and the message says so.
        with open("/dev/full", "w") as full:
            p = subprocess.run(cases[0], env=self.env(), stdout=full, stderr=subprocess.PIPE, text=True)
        self.assertIn("was written", p.stderr)
        self.check_product(cases[0][-1], small=True)

    def test_import_of_a_product_suggests_values_u32(self):
        importer = os.path.join(BUILD, "blockmm-import")
        mtx = os.path.join(self.tmp, "product.mtx")
        with open(mtx, "w") as f:
            f.write("%%MatrixMarket matrix coordinate integer general\n4 4 2\n1 1 70000\n2 3 5\n")
        out = os.path.join(self.tmp, "product.bin")
        p = subprocess.run([importer, "--block-size", "2", mtx, out], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
        self.assertIn("70000", p.stderr)
        self.assertIn("--values u32", p.stderr)
        self.assertFalse(os.path.exists(out))
        p = subprocess.run([importer, "--values", "u32", "--block-size", "2", mtx, out], capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        # A value that no width holds gets no such hint.
        with open(mtx, "w") as f:
            f.write("%%MatrixMarket matrix coordinate integer general\n4 4 1\n1 1 5000000000\n")
        p = subprocess.run([importer, "--block-size", "2", mtx, out + ".x"], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertNotIn("--values u32", p.stderr)

    def test_version_names_features(self):
        p = self.run_blockmm(["--version"])
        self.assertEqual(p.returncode, 0)
        self.assertRegex(p.stdout, r"^blockmm \d+\.\d+\.\d+ \(commit ([0-9a-f]{7,}(-modified)?|unknown)\)")
        for key in ("CUDA: ", "MPI: ", "HDF5: 1.", "OpenMP: "):
            self.assertIn(key, p.stdout)


class Stats(Case):
    def test_text(self):
        out = os.path.join(self.tmp, "Cstats.bin")
        p = subprocess.run([BIN, "-q", "--stats", self.sa, self.sb, out], env=self.env(), capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_product(out, small=True)
        text = p.stdout
        c_blocks = len(self.oracle_for(True))
        self.assertGreaterEqual(c_blocks, 1000)
        self.assertIn(f"C {c_blocks:,} = ", text)  # thousands separators
        for line in text.splitlines():
            depth = 0
            for ch in line:
                depth += 1 if ch == "(" else -1 if ch == ")" else 0
                self.assertLessEqual(depth, 1, "nested parentheses: " + line)
        seconds = dict(re.findall(r"^\s+(\w+)\s+([\d.]+) s", text, re.M))
        for sub in ("writing",):
            self.assertLessEqual(float(seconds[sub]), float(seconds["numeric"]), text)
        busy = float(re.search(r"kernels busy ([\d.]+) s", text).group(1))
        self.assertLessEqual(busy, float(seconds["numeric"]), text)
        self.assertLessEqual(float(seconds["numeric"]), float(seconds["total"]), text)

    def test_json(self):
        out = os.path.join(self.tmp, "Cjson.bin")
        stats_file = os.path.join(self.tmp, "stats.json")
        args = [BIN, "-q", "--threads", "1", "--stats=json", "--stats-file", stats_file, self.sa, self.sb, out]
        before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        p = subprocess.run(args, env=self.env(), capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_product(out, small=True)
        j = json.loads(p.stdout)
        with open(stats_file) as f:
            self.assertEqual(j, json.load(f))
        self.assertRegex(j["version"], r"^blockmm \d+\.\d+\.\d+ \(commit ")
        self.assertEqual(j["command_line"], args)
        self.assertEqual(j["inputs"], [{"path": self.sa, "format": "binary", "bytes": os.path.getsize(self.sa)},
                                       {"path": self.sb, "format": "binary", "bytes": os.path.getsize(self.sb)}])
        self.assertEqual(j["output"], out)
        self.assertEqual(j["host"], socket.gethostname())
        date = datetime.datetime.strptime(j["date"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
        self.assertLessEqual(before, date)
        self.assertLessEqual(date, datetime.datetime.now(datetime.timezone.utc))
        self.assertEqual((j["ranks"], j["threads_per_rank"], j["gpus"]), (1, 1, []))
        self.assertEqual(j["blocks"]["c"], len(self.oracle_for(True)))
        self.assertEqual(j["output_bytes"], os.path.getsize(out))


if __name__ == "__main__":
    unittest.main(verbosity=2)
