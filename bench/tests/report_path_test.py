#!/usr/bin/env python3
"""bench/run's report path (ctest bench_run_report, label bench): a tiny real run (S1, cpu backend,
1 and 2 ranks, scipy anchor when scipy is installed), then the typed records it stored against
independent checks: the block products counted here from the input files, every cell of the
RESULTS.md tables against the record it came from, --report-only redrawing the same section.
The anchors' equality checks run on a tiny case with real scipy and DBCSR processes (each when
available) against a real blockmm output and a corrupted copy, and their verdicts must reach the
page. Records refuse formatted strings, CSV round trips are exact on random rows, and a results.csv
that does not parse stops --report-only with one line and exit status 2, page untouched.

Usage: report_path_test.py BUILD_DIR [unittest arguments]
"""
import dataclasses
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, BENCH)
from blockmm_bench import anchors, cli, options, records, report  # noqa: E402
from blockmm_bench.cases import Case  # noqa: E402
from blockmm_bench.inputs import ensure_inputs  # noqa: E402
from blockmm_bench.records import ResultRow, RunRow  # noqa: E402
from blockmm_bench.runner import Progress  # noqa: E402
from blockmm_bench.session import Session  # noqa: E402

BUILD = None  # set from argv


def run_bench(*argv, **kw):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return subprocess.run([os.path.join(BENCH, "run")] + list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env, universal_newlines=True, **kw)


def read_col380_coords(path):
    """(n, m, [(i, j)]) of a COL380 uint16 input, read here with struct."""
    with open(path, "rb") as f:
        n, m, k = struct.unpack("<3i", f.read(12))
        coords = []
        for _ in range(k):
            coords.append(struct.unpack("<2i", f.read(8)))
            f.seek(2 * m * m, os.SEEK_CUR)
    return n, m, coords


def block_products(a_path, b_path):
    """The block products of A x B: for each block (i, k) of A, the blocks of B's block-row k."""
    _, _, a = read_col380_coords(a_path)
    _, _, b = read_col380_coords(b_path)
    per_row = {}
    for k, _ in b:
        per_row[k] = per_row.get(k, 0) + 1
    return sum(per_row.get(k, 0) for _, k in a)


def section_tables(page, machine):
    """{title: [dict(header -> cell)]} of the machine's section, parsed from the markdown."""
    text = page.split("<!-- BEGIN machine: %s -->" % machine, 1)[1].split("<!-- END machine: %s -->" % machine)[0]
    tables, title, header = {}, None, None
    for line in text.splitlines():
        if line.startswith("### "):
            title, header = line[4:], None
            tables[title] = []
        elif line.startswith("| ") and title:
            cells = [c.strip() for c in line.strip()[2:-2].split(" | ")]
            if header is None:
                header = cells
            elif set(cells) != {"---"}:
                tables[title].append(dict(zip(header, cells)))
    return tables


def scipy_available():
    return options.find_scipy_python() is not None


class TinyRun(unittest.TestCase):
    """bench/run end to end on S1 (cpu, 1 and 2 ranks, 1 repeat, DBCSR off: its start-up takes
    longer than the rest of the run on a shared 2-core machine; AnchorChecks runs it)."""

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="bench-report-")
        cls.data = os.path.join(cls.work, "data")
        cls.results = os.path.join(cls.work, "results")
        cls.page = os.path.join(cls.work, "RESULTS.md")
        r = run_bench("--build", BUILD, "--cases", "S1", "--backends", "cpu", "--ranks", "1,2", "--repeat", "1",
                      "--cusparse", "off", "--dbcsr", "off", "--data", cls.data, "--results", cls.results,
                      "--page", cls.page, "--machine", "smoke", "--keep-outputs", timeout=300)
        cls.run_result = r
        outdir = os.path.join(cls.results, "smoke")
        cls.rows = records.read_rows(os.path.join(outdir, "results.csv"), ResultRow) if r.returncode == 0 else []
        cls.run_rows = records.read_rows(os.path.join(outdir, "runs.csv"), RunRow) if r.returncode == 0 else []

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def setUp(self):
        self.assertEqual(self.run_result.returncode, 0, self.run_result.stderr[-3000:])

    def test_rows_are_typed_and_match_the_inputs(self):
        self.assertEqual([(r.case, r.backend, r.ranks) for r in self.rows], [("S1", "cpu", 1), ("S1", "cpu", 2)])
        products = block_products(os.path.join(self.data, "S1.A.bin"), os.path.join(self.data, "S1.B.bin"))
        for r in self.rows:
            self.assertEqual(r.status, "ok")
            self.assertEqual((r.n, r.m, r.k_a, r.k_b, r.repeats), (32768, 8, 16800, 16800, 1))
            self.assertEqual(r.block_products, products)
            self.assertEqual(r.useful_macs, products * 8 ** 3)
            self.assertIsInstance(r.wall_s, float)
            self.assertGreater(r.numeric_s, 0)
            self.assertGreater(r.floor_read_s, 0)
            self.assertGreater(r.floor_write_s, 0)
            self.assertAlmostEqual(r.floor_s, r.floor_read_s + r.floor_write_s, delta=1.01e-4)  # each rounded
            # numeric_s is kept to 4 decimals (±5e-5 s) and the rate from the unrounded time: on a
            # numeric phase of a few ms that rounding alone moves the rate by up to 1 %.
            self.assertAlmostEqual(r.gmacs_numeric, r.useful_macs / r.numeric_s / 1e9,
                                   delta=r.gmacs_numeric * (5.01e-5 / r.numeric_s + 1e-3) + 1e-3)
            self.assertAlmostEqual(r.wall_over_floor, r.wall_s / r.floor_s, delta=1e-3)
            # The write floors of the output's folder, and the write phase against each.
            self.assertGreater(r.floor_one_file_s, 0)
            self.assertGreater(r.floor_files_s, 0)
            self.assertAlmostEqual(r.write_over_one_file, r.floor_one_file_s / r.write_s, delta=1e-3)
            self.assertAlmostEqual(r.write_over_files, r.floor_files_s / r.write_s, delta=1e-3)
        self.assertEqual([r.identical for r in self.rows], ["ref", "yes"])
        self.assertEqual([(r.ranks, r.rc, r.identical) for r in self.run_rows], [(1, 0, "ref"), (2, 0, "yes")])
        # the first output of the case, kept (--keep-outputs), is the product of record
        with open(os.path.join(self.data, "S1.ref.C.bin"), "rb") as f:
            n, m, c_blocks = struct.unpack("<3i", f.read(12))
        self.assertEqual(os.path.getsize(os.path.join(self.data, "S1.ref.C.bin")), self.rows[0].output_bytes)
        self.assertEqual(c_blocks, self.rows[0].c_blocks)
        expected_check = "identical" if scipy_available() else "no scipy"
        self.assertEqual({r.scipy_check for r in self.rows}, {expected_check})
        self.assertEqual({r.dbcsr_check for r in self.rows}, {""})

    def test_page_tables_show_the_records(self):
        with open(self.page) as f:
            tables = section_tables(f.read(), "smoke")
        e2e = tables["End to end (medians)"]
        self.assertEqual(len(e2e), len(self.rows))
        for cells, r in zip(e2e, self.rows):
            self.assertEqual((cells["case"], cells["backend x ranks"], cells["status"], cells["identical"]),
                             (r.case, "cpu x%d" % r.ranks, r.status, r.identical))
            self.assertEqual((int(cells["n"]), int(cells["m"]), int(cells["k"]), int(cells["runs"])),
                             (r.n, r.m, r.k_a, r.repeats))
            for header, value in (("wall s", r.wall_s), ("total s", r.total_s), ("numeric s", r.numeric_s),
                                  ("GMAC/s numeric", r.gmacs_numeric), ("GMAC/s e2e", r.gmacs_e2e),
                                  ("peak RSS MB", r.rss_mb), ("floor s", r.floor_s),
                                  ("wall / floor", r.wall_over_floor), ("density", r.density),
                                  ("write / one-file floor", r.write_over_one_file),
                                  ("write / files floor", r.write_over_files)):
                self.assertEqual(float(cells[header]), value, header)
            self.assertAlmostEqual(float(cells["output MB"]), r.output_bytes / 1e6, delta=0.051)
            self.assertAlmostEqual(float(cells["write GB/s"]), r.output_bytes / r.write_s / 1e9, delta=0.0051)
        phases = tables["Phases (medians, seconds, slowest rank)"]
        self.assertEqual(len(phases), len(self.rows))
        for cells, r in zip(phases, self.rows):
            for p, header in (("read", "read"), ("build", "build"), ("numeric", "numeric"),
                              ("numeric_compute", "(compute)"), ("write", "(write)"), ("commit", "commit"),
                              ("total", "total")):
                self.assertEqual(float(cells[header]), getattr(r, p + "_s"), header)
            self.assertEqual(float(cells["launch"]), r.launch_s)
        (cells,) = tables["I/O floor and anchors"]
        best = min(self.rows, key=lambda r: r.wall_s)
        self.assertEqual(cells["best wall s"], "%s (cpu x%d)" % (best.text("wall_s"), best.ranks))
        for header, value in (("read inputs s", self.rows[0].floor_read_s),
                              ("write+fsync output s", self.rows[0].floor_write_s),
                              ("one-file floor s", self.rows[0].floor_one_file_s),
                              ("files floor s", self.rows[0].floor_files_s),
                              ("floor s", self.rows[0].floor_s), ("best / floor", best.wall_over_floor)):
            self.assertEqual(float(cells[header]), value, header)
        self.assertEqual(cells["scipy vs blockmm"], self.rows[0].scipy_check)
        self.assertEqual(cells["DBCSR vs blockmm"], "")
        if scipy_available():
            self.assertEqual(float(cells["scipy BSR wall s"]), self.rows[0].scipy_wall_s)
            self.assertTrue(cells["blockmm speed-up (wall)"].endswith("×"))

    def test_report_only_redraws_the_same_section(self):
        redrawn = os.path.join(self.work, "redrawn.md")
        shutil.copy(self.page, redrawn)
        with open(redrawn, "a") as f:
            f.write("\nsomething after the section, kept\n")
        r = run_bench("--report-only", "--machine", "smoke", "--results", self.results, "--page", redrawn,
                      timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.page) as f, open(redrawn) as g:
            self.assertEqual(g.read(), f.read() + "\nsomething after the section, kept\n")

    def test_plots_are_drawn_when_matplotlib_is_there(self):
        with open(self.page) as f:
            page = f.read()
        drawn = sorted(p for p in os.listdir(os.path.join(self.results, "smoke")) if p.endswith(".png"))
        if "matplotlib missing" in self.run_result.stderr:
            self.assertEqual(drawn, [])
        else:
            self.assertEqual(drawn, ["floor.png", "gmacs_density.png", "phases.png", "speedup_ranks.png"])
            for p in drawn:
                self.assertIn("(results/smoke/%s)" % p, page)


class PartedRun(unittest.TestCase):
    """bench/run --format h5 --parts 2: parted outputs, compared with blockmm-cmp (their main files
    name their own parts), none of their files left behind."""

    def test_parted_outputs_are_compared_and_removed(self):
        work = tempfile.mkdtemp(prefix="bench-parted-")
        self.addCleanup(shutil.rmtree, work, True)
        data = os.path.join(work, "data")
        r = run_bench("--build", BUILD, "--cases", "S1", "--backends", "cpu", "--ranks", "1", "--repeat", "2",
                      "--format", "h5", "--parts", "2", "--scipy", "off", "--cusparse", "off", "--dbcsr", "off",
                      "--data", data, "--results", os.path.join(work, "results"), "--page",
                      os.path.join(work, "RESULTS.md"), "--machine", "parted", timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        (row,) = records.read_rows(os.path.join(work, "results", "parted", "results.csv"), ResultRow)
        self.assertEqual((row.status, row.repeats), ("ok", 2))
        runs = records.read_rows(os.path.join(work, "results", "parted", "runs.csv"), RunRow)
        self.assertEqual([run.identical for run in runs], ["ref", "yes"])
        self.assertEqual([f for f in os.listdir(data) if ".part-" in f or f.endswith(".h5")], [])


class AnchorChecks(unittest.TestCase):
    """The scipy and DBCSR anchors (real processes, each when available) on a tiny case against a
    real blockmm output, then against a corrupted copy: verdicts, mismatches, the page's cells."""

    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="bench-anchors-")
        self.addCleanup(shutil.rmtree, self.work, True)
        args = options.parse_args(["--build", BUILD, "--data", self.work, "--repeat", "1", "--cusparse", "off",
                                   "--machine", "anchors"])
        args.build = os.path.abspath(BUILD)
        self.session = Session(args, Progress())
        self.session.scipy_python = options.find_scipy_python()
        dbcsr = os.path.join(args.build, "dbcsr_anchor")
        self.session.dbcsr = dbcsr if os.access(dbcsr, os.X_OK) else None
        self.case = Case("T1", 256, 8, 900, "small")
        self.a, self.b = ensure_inputs(self.case, self.work, args.build, self.session.progress, 0)
        self.ref = os.path.join(self.work, "T1.C.bin")
        subprocess.run([os.path.join(args.build, "blockmm"), "-q", "--threads", "1", self.a, self.b, self.ref],
                       check=True, env=self.session.env)

    def expected(self, scipy_verdict, dbcsr_verdict):
        return (scipy_verdict if self.session.scipy_python else "no scipy",
                dbcsr_verdict if self.session.dbcsr else "not built")

    def anchors_table_cells(self, res):
        row = ResultRow(case="T1", n=256, m=8, k_a=900, k_b=900, backend="cpu", ranks=1, status="ok",
                        identical="ref", wall_s=0.5, total_s=0.4)
        res.apply(row)
        text = report.section_text("anchors", {}, [row], [], [])
        page = "<!-- BEGIN machine: anchors -->\n%s<!-- END machine: anchors -->\n" % text
        (cells,) = section_tables(page, "anchors")["I/O floor and anchors"]
        return cells["scipy vs blockmm"], cells["DBCSR vs blockmm"]

    def test_equal_products_are_reported_equal(self):
        res = anchors.run_anchors(self.session, self.case, self.a, self.b, self.ref, None, None)
        self.assertEqual((res.scipy_check, res.dbcsr_check), self.expected("identical", "equal"))
        self.assertEqual(self.session.mismatches, [])
        self.assertEqual(self.anchors_table_cells(res), self.expected("identical", "equal"))
        if self.session.dbcsr:
            self.assertGreater(res.dbcsr_multiply_s, 0)
        self.assertEqual(cli.exit_status(self.session, self.session.progress, False), 0)

    def test_a_differing_product_is_a_mismatch_on_the_page(self):
        with open(self.ref, "r+b") as f:  # the last value's high byte: another matrix, same layout
            f.seek(-1, os.SEEK_END)
            last = f.read(1)[0]
            f.seek(-1, os.SEEK_END)
            f.write(bytes([last ^ 0x40]))
        res = anchors.run_anchors(self.session, self.case, self.a, self.b, self.ref, None, None)
        self.assertEqual((res.scipy_check, res.dbcsr_check), self.expected("DIFFERENT", "DIFFERENT"))
        expected_mismatches = [a for a, on in (("scipy", self.session.scipy_python), ("DBCSR", self.session.dbcsr))
                               if on]
        self.assertEqual(len(self.session.mismatches), len(expected_mismatches))
        for msg, name in zip(self.session.mismatches, expected_mismatches):
            self.assertIn("T1: blockmm's output DIFFERS from the %s" % name, msg)
        self.assertEqual(self.anchors_table_cells(res), self.expected("DIFFERENT", "DIFFERENT"))
        if expected_mismatches:
            self.assertEqual(cli.exit_status(self.session, self.session.progress, False), 1)


def random_row(rnd, cls):
    """A record with random values of each field's type (text with CSV's special characters)."""
    row = cls()
    for f in dataclasses.fields(cls):
        kind = f.metadata["kind"][0]
        if rnd.random() < 0.15:
            continue  # left empty
        if kind == "str":
            value = "".join(rnd.choice('ab ,"\n\r×x1') for _ in range(rnd.randint(0, 12)))
        elif kind == "int":
            value = rnd.randint(-5, 1 << 62)
        else:
            value = rnd.choice([0.0, rnd.uniform(0, 1e-3), rnd.uniform(0, 1e4), rnd.expovariate(1e-6)])
        setattr(row, f.name, value)
    return row


class Records(unittest.TestCase):
    def test_fields_refuse_formatted_strings_and_wrong_types(self):
        with self.assertRaises(TypeError):
            ResultRow(wall_s="0.5")
        with self.assertRaises(TypeError):
            ResultRow(ranks=1.5)
        with self.assertRaises(TypeError):
            ResultRow(status=3)
        row = ResultRow()
        with self.assertRaises(AttributeError):
            row.wall = 1.0
        row.wall_s = 1.23456789
        self.assertEqual((row.wall_s, row.text("wall_s")), (1.2346, "1.2346"))
        row.gmacs_numeric = 12345.678
        self.assertEqual(row.text("gmacs_numeric"), "1.235e+04")
        row.useful_macs = 7.0
        self.assertEqual(row.text("useful_macs"), "7")

    def test_csv_round_trip_is_exact_on_random_rows(self):
        rnd = random.Random(21)
        work = tempfile.mkdtemp(prefix="bench-records-")
        self.addCleanup(shutil.rmtree, work, True)
        for cls in (ResultRow, RunRow):
            rows = [random_row(rnd, cls) for _ in range(200)] + [cls()]
            path = os.path.join(work, cls.__name__ + ".csv")
            records.write_rows(path, rows, cls)
            back = records.read_rows(path, cls)
            self.assertEqual(back, rows)
            records.write_rows(path + "2", back, cls)
            with open(path, "rb") as f, open(path + "2", "rb") as g:
                self.assertEqual(f.read(), g.read())

    def test_unreadable_results_csv_stops_report_only(self):
        work = tempfile.mkdtemp(prefix="bench-hostile-")
        self.addCleanup(shutil.rmtree, work, True)
        os.makedirs(os.path.join(work, "results", "bad"))
        row = ResultRow(case="S1", backend="cpu", ranks=1, wall_s=0.5)
        path = os.path.join(work, "results", "bad", "results.csv")
        records.write_rows(path, [row], ResultRow)
        with open(path) as f:
            text = f.read().replace("0.5000", "fast")
        with open(path, "w") as f:
            f.write(text)
        page = os.path.join(work, "RESULTS.md")
        with open(page, "w") as f:
            f.write("# kept as it is\n")
        r = run_bench("--report-only", "--machine", "bad", "--results", os.path.join(work, "results"),
                      "--page", page, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stderr.strip().splitlines(),
                         ["bench/run: %s line 2: column wall_s: 'fast' is not a number" % path])
        with open(page) as f:
            self.assertEqual(f.read(), "# kept as it is\n")
        self.assertEqual(sorted(os.listdir(os.path.join(work, "results", "bad"))), ["results.csv"])


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: report_path_test.py BUILD_DIR [unittest arguments]")
    BUILD = os.path.abspath(sys.argv.pop(1))
    unittest.main(argv=sys.argv, verbosity=2)
