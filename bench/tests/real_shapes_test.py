#!/usr/bin/env python3
"""bench/real_shapes.py (issue 48) on tiny sizes: every case is a valid COL380 input pair (header,
sorted unique records, values within --max-value, the operand pattern each case documents), the
cpu backend's product of each is byte-identical to the reference backend's, the same seed gives
the same bytes, and the CLI's errors are one line with the documented exit code and leave no file
behind. Usage: real_shapes_test.py BUILD_DIR (exit 77: no numpy, skipped)."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(os.path.dirname(HERE), "real_shapes.py")

try:
    import numpy as np
except ImportError:
    print("SKIP: no numpy")
    sys.exit(77)


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def read(path):
    n, m, k = (int(x) for x in np.fromfile(path, dtype="<i4", count=3))
    rec = np.dtype([("i", "<i4"), ("j", "<i4"), ("v", "<u2", (m, m))])
    r = np.fromfile(path, dtype=rec, offset=12)
    assert len(r) == k, "%s: k %d but %d records" % (path, k, len(r))
    return n, m, r


def check_file(path, max_value):
    n, m, r = read(path)
    assert n % m == 0 and len(r) > 0, path
    keys = r["i"].astype(np.int64) * (n // m) + r["j"]
    assert np.all(np.diff(keys) > 0), "%s: records not sorted and unique" % path
    assert r["i"].min() >= 0 and r["j"].min() >= 0 and max(r["i"].max(), r["j"].max()) < n // m, path
    assert r["v"].max() <= max_value and r["v"].reshape(len(r), -1).any(axis=1).all(), path
    return n, m, r


def main():
    build = sys.argv[1]
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        out = run([sys.executable, GEN, "all", d, "--scale", "0.004", "-q"])
        assert out.returncode == 0, out.stderr.decode()
        for case in ("el2", "el3", "tet", "el3p", "el3r", "water", "water16"):
            a, b = (os.path.join(d, "%s.%s.bin" % (case, s)) for s in "AB")
            top = 65535 if case == "water16" else 1023
            n, m, ra = check_file(a, top)
            _, _, rb = check_file(b, top)
            per_row = len(ra) / max(1, len(np.unique(ra["i"])))
            expect_m = {"el2": 2, "water": 23, "water16": 23}.get(case, 3)
            assert m == expect_m, (case, m)
            if case == "el3r":
                assert len(np.unique(ra["i"])) < n // m // 4, "R's rows: only the coarse ones hold blocks"
            if case in ("el2", "el3", "tet"):
                assert np.array_equal(ra, rb), "%s: A.A with B = A" % case
                assert per_row <= {"el2": 9, "el3": 27, "tet": 15}[case], (case, per_row)
            outs = {}
            for backend in ("cpu", "reference"):
                c = os.path.join(d, "%s.%s.C.bin" % (case, backend))
                r = run([os.path.join(build, "blockmm"), "--backend", backend, "-q", a, b, c],
                        env=dict(os.environ, OMP_NUM_THREADS="2"))
                assert r.returncode == 0, (case, backend, r.stderr.decode())
                outs[backend] = open(c, "rb").read()
            if outs["cpu"] != outs["reference"]:
                print("FAIL: %s: the cpu backend's product differs from the reference's" % case)
                failures += 1
            else:
                print("ok: %s (n %d, m %d, %d and %d blocks): cpu == reference, %d bytes" %
                      (case, n, m, len(ra), len(rb), len(outs["cpu"])))
        # Deterministic: the same seed, the same bytes; another seed, other values.
        again = os.path.join(d, "again")
        os.mkdir(again)
        assert run([sys.executable, GEN, "el3", again, "--scale", "0.004", "-q"]).returncode == 0
        assert open(os.path.join(d, "el3.A.bin"), "rb").read() == open(os.path.join(again, "el3.A.bin"), "rb").read()
        assert run([sys.executable, GEN, "el3", again, "--scale", "0.004", "--seed", "2", "-q"]).returncode == 0
        assert open(os.path.join(d, "el3.A.bin"), "rb").read() != open(os.path.join(again, "el3.A.bin"), "rb").read()
        # Errors: one line, the documented code, nothing left in the folder.
        empty = os.path.join(d, "empty")
        os.mkdir(empty)
        for args, code in ((["nope", empty], 2), (["el3", empty, "--scale", "0"], 2),
                           (["el3", empty, "--max-value", "70000"], 2), (["el3"], 2),
                           (["el3", os.path.join(d, "missing")], 4)):
            r = run([sys.executable, GEN] + args)
            lines = r.stderr.decode().strip().splitlines()
            if r.returncode != code or len(lines) != 1 or os.listdir(empty):
                print("FAIL: %s: exit %d (want %d), stderr %r" % (args, r.returncode, code, lines))
                failures += 1
        if os.geteuid() != 0:  # root writes anywhere
            os.chmod(empty, 0o500)
            r = run([sys.executable, GEN, "el2", empty, "--scale", "0.004"])
            os.chmod(empty, 0o700)
            if r.returncode != 4 or len(r.stderr.decode().strip().splitlines()) != 1 or os.listdir(empty):
                print("FAIL: unwritable folder: exit %d, %r" % (r.returncode, r.stderr.decode()))
                failures += 1
    print("%d passed, %d failed" % (0 if failures else 1, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
