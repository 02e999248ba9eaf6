"""What the Python tools' tests share (tests/e2e/formats): the build tree's tools run in this process
or as processes, scratch folders, random matrices and dense references made here with numpy,
never with the blockmm package's readers alone. BLOCKMM_BUILD_DIR names the build tree."""
import contextlib
import io
import os
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest
import zipfile

import numpy as np

BUILD = os.environ.get("BLOCKMM_BUILD_DIR") or sys.exit("BLOCKMM_BUILD_DIR is not set")
sys.path.insert(0, os.path.join(BUILD, "python"))
import blockmm  # noqa: E402  (the package as built)
import blockmm.cli  # noqa: E402

SATURATED = 2**32 - 1
TOOLS = ["blockmm", "blockmm-gen", "blockmm-cmp", "blockmm-info", "blockmm-convert", "blockmm-import",
         "blockmm-export", "blockmm-spy"]
PYTHON_TOOLS = {"blockmm-import": "import_main", "blockmm-export": "export_main", "blockmm-spy": "spy_main"}


def tool(name, *args, check=None, in_process=True, env=None, timeout=120, memory_limit=None):
    """Runs a tool of the build tree; returns an object with returncode, stdout and stderr;
    check=rc asserts the code. The Python tools run in this process by default (their entry
    point, as the wrapper script calls it: a process start costs scipy's import each time);
    `env` (extra variables) and `memory_limit` (bytes of address space) run them as processes."""
    if name in PYTHON_TOOLS and in_process and env is None and memory_limit is None:
        run = subprocess.CompletedProcess([name, *args], None, "", "")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                run.returncode = getattr(blockmm.cli, PYTHON_TOOLS[name])([str(a) for a in args])
            except SystemExit as exit:  # argparse: usage errors, --help
                run.returncode = exit.code if isinstance(exit.code, int) else 1
        run.stdout, run.stderr = out.getvalue(), err.getvalue()
    else:
        full_env = dict(os.environ, BLOCKMM_MPI="0", **(env or {}))
        def limit():
            if memory_limit:
                resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

        run = subprocess.run([os.path.join(BUILD, name), *map(os.fsencode, map(str, args))], capture_output=True,
                             timeout=timeout, env=full_env, preexec_fn=limit)
        run.stdout = run.stdout.decode("utf-8", "surrogateescape")
        run.stderr = run.stderr.decode("utf-8", "surrogateescape")
    if check is not None and run.returncode != check:
        raise AssertionError(f"{name} {' '.join(map(str, args))}: exit {run.returncode}, expected {check}\n"
                             f"stdout: {run.stdout}\nstderr: {run.stderr}")
    return run


def start_tool(name, *args, env=None):
    """A tool of the build tree as a running process (stderr captured)."""
    return subprocess.Popen([os.path.join(BUILD, name), *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=dict(os.environ, BLOCKMM_MPI="0", **(env or {})))


def peak_memory(name, *args, env=None):
    """(exit code, stderr, peak resident bytes) of a tool run in a process of its own, the peak
    measured by a parent that starts only it."""
    probe = ("import resource, subprocess, sys\n"
             "run = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
             "sys.stderr.buffer.write(run.stderr)\n"
             "print(run.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    run = subprocess.run([sys.executable, "-c", probe, os.path.join(BUILD, name), *map(str, args)],
                         capture_output=True, text=True, timeout=300, env=dict(os.environ, **(env or {})))
    code, kib = run.stdout.split()
    return int(code), run.stderr, int(kib) * 1024


def random_dense(rng, n, density, high, low=1):
    """A dense int64 matrix with about density * n^2 entries in [low, high] (zeros elsewhere)."""
    dense = np.zeros((n, n), dtype=np.int64)
    mask = rng.random((n, n)) < density
    dense[mask] = rng.integers(low, high + 1, size=int(mask.sum()))
    return dense


def dense_product(a, b):
    """Exact min(A @ B, 2^32 - 1) with Python integers (object arrays: no overflow anywhere)."""
    exact = a.astype(object) @ b.astype(object)
    return np.vectorize(lambda v: min(int(v), SATURATED), otypes=[np.int64])(exact)


def dense_of_binary(path):
    """Parses a COL380 file with numpy alone (not the blockmm package) into a dense int64 matrix."""
    raw = np.fromfile(path, dtype=np.uint8)
    n, m, k = (int(x) for x in raw[:12].view("<i4"))
    width = (len(raw) - 12 - 8 * k) // (k * m * m) if k else 2
    records = raw[12:].view(np.dtype([("i", "<i4"), ("j", "<i4"), ("v", f"<u{width}", (m, m))]))
    assert len(records) == k
    out = np.zeros((n, n), dtype=np.int64)
    for r in records:
        out[r["i"] * m:(r["i"] + 1) * m, r["j"] * m:(r["j"] + 1) * m] = r["v"]
    return out, m, width


def binary_bytes(n, m, records, width=2):
    """A COL380 file's bytes from (i, j, block) triples, written here with numpy."""
    dtype = np.dtype([("i", "<i4"), ("j", "<i4"), ("v", f"<u{width}", (m, m))])
    array = np.zeros(len(records), dtype=dtype)
    for r, (i, j, block) in enumerate(records):
        array[r] = (i, j, block)
    return np.array([n, m, len(records)], dtype="<i4").tobytes() + array.tobytes()


def write_npz_arrays(path, arrays, compress=False):
    """An .npz written entry by entry with numpy's own .npy writer: any arrays, true or not."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
        for key, value in arrays.items():
            with z.open(key + ".npy", "w") as out:
                np.lib.format.write_array(out, np.asarray(value), allow_pickle=False)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def mode_of(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


@contextlib.contextmanager
def umask(mask):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def wait_for_entry(directory, marker, process, seconds=60):
    """Busy-waits until a name holding `marker` appears in `directory`; the name, or None if the
    process ended first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name in os.listdir(directory):
            if marker in name:
                return name
        if process.poll() is not None:
            return None
    return None


def died_by(process, number):
    return process.returncode == -number


class Work(unittest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory(prefix="blockmm-formats-")
        self.dir = self._dir.name

    def tearDown(self):
        self._dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def assert_dense_equal(self, got, expected, what=""):
        self.assertEqual(got.shape, expected.shape, what)
        diff = np.argwhere(got != expected)
        if diff.size:
            r, c = diff[0]
            self.fail(f"{what}: {len(diff)} entries differ, first ({r}, {c}): got {got[r, c]}, expected {expected[r, c]}")

    def assert_one_error(self, run, code, *words):
        """Exit `code`, one line on stderr (no traceback) holding each of `words`."""
        self.assertEqual(run.returncode, code, run.stderr)
        self.assertEqual(run.stderr.count("\n"), 1, run.stderr)
        self.assertNotIn("Traceback", run.stderr)
        for word in words:
            self.assertIn(word, run.stderr)


__all__ = ["BUILD", "SATURATED", "TOOLS", "PYTHON_TOOLS", "blockmm", "tool", "start_tool", "peak_memory",
           "random_dense", "dense_product", "dense_of_binary", "binary_bytes", "read_bytes", "write_bytes",
           "mode_of", "umask", "wait_for_entry", "died_by", "Work", "resource", "signal", "np"]
