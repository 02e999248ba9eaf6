"""blockmm.multiply (python/blockmm/product.py over src/python) in a Python process: random products
against scipy's own int64 product clipped at 2^32 - 1 and against the blockmm binary's output, the
formats and dtypes it takes, the inputs it refuses and how, Ctrl-C, the teams' paths, memory, and
(label gpu) the cuda backend against the cpu one. One CTest test per TestCase. BLOCKMM_BUILD_DIR
names the build tree, whose python/ folder holds the package and its extension."""
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import unittest

import numpy as np
import scipy.sparse as sp

BUILD = os.environ.get("BLOCKMM_BUILD_DIR") or sys.exit("BLOCKMM_BUILD_DIR is not set")
PACKAGE = os.path.join(BUILD, "python")
sys.path.insert(0, PACKAGE)
import blockmm  # noqa: E402
import blockmm.product  # noqa: E402

try:
    NATIVE = blockmm.product._native()
except ImportError as e:
    print(f"SKIP: the extension is not built ({e})")
    sys.exit(77)

SATURATED = 2**32 - 1


def random_bsr(rng, n, m, density, high=1023, skew=False, empty_rows=0.0, dtype=np.uint16):
    """A canonical bsr_array of m x m blocks, each block present with `density` (a few rows far
    denser where `skew`), values in [0, high]; rows left empty with probability `empty_rows`."""
    p = n // m
    present = rng.random((p, p)) < density
    if skew:
        heavy = rng.choice(p, size=max(1, p // 8), replace=False)
        present[heavy] = rng.random((len(heavy), p)) < min(1.0, 8 * density + 0.3)
    present[rng.random(p) < empty_rows] = False
    rows, cols = np.nonzero(present)
    data = rng.integers(0, high + 1, size=(len(rows), m, m)).astype(dtype)
    indptr = np.r_[0, np.cumsum(present.sum(axis=1))].astype(np.int32)
    return sp.bsr_array((data, cols.astype(np.int32), indptr), shape=(n, n))


def scipy_product(a, b):
    """scipy's own product in int64, clipped at 2^32 - 1, dense."""
    wide = (sp.csr_matrix(a).astype(np.int64) @ sp.csr_matrix(b).astype(np.int64)).toarray()
    return np.minimum(wide, SATURATED)


class Products(unittest.TestCase):
    def check(self, c, expected, m):
        self.assertIsInstance(c, blockmm.product._BSR)
        self.assertEqual(c.dtype, np.uint32)
        self.assertEqual(c.blocksize, (m, m))
        self.assertTrue(np.array_equal(c.toarray(), expected))
        # Canonical, no all-zero block kept: what blockmm writes.
        self.assertTrue(c.has_canonical_format)
        self.assertTrue(c.data.reshape(len(c.indices), m * m).any(axis=1).all())

    def test_random_cases_equal_scipys_clipped_int64_product(self):
        rng = np.random.default_rng(50)
        for trial in range(30):
            m = int(rng.integers(1, 34)) if trial > 3 else [1, 2, 32, 33][trial]
            p = int(rng.integers(1, 13))
            high = 65535 if trial % 3 == 0 else int(rng.integers(1, 1024))  # saturation in a third
            a = random_bsr(rng, p * m, m, rng.random(), high, skew=trial % 4 == 1, empty_rows=0.3 * (trial % 2))
            b = random_bsr(rng, p * m, m, rng.random(), high, skew=trial % 5 == 2)
            backend = "reference" if trial % 7 == 6 else "auto"
            c = blockmm.multiply(a, b, backend=backend, threads=1 + trial % 2, chunk_size=1 + trial * 97)
            with self.subTest(trial=trial, m=m, p=p):
                self.check(c, scipy_product(a, b), m)

    def test_saturation_and_the_largest_values(self):
        a = sp.bsr_array(np.full((4, 4), 65535, dtype=np.uint16), blocksize=(2, 2))
        c = blockmm.multiply(a, a)  # 2 x 65535^2 > 2^32 - 1 everywhere
        self.check(c, np.full((4, 4), SATURATED), 2)
        one = sp.bsr_array(np.diag(np.full(4, 65535, dtype=np.uint16)), blocksize=(2, 2))
        self.check(blockmm.multiply(one, one), np.diag(np.full(4, 65535**2)), 2)

    def test_empty_products(self):
        empty = sp.bsr_array((8, 8), blocksize=(4, 4), dtype=np.uint16)
        corner = sp.bsr_array(sp.coo_matrix(([7], ([0], [7])), shape=(8, 8)).astype(np.uint16), blocksize=(4, 4))
        for a, b in ((empty, empty), (empty, corner), (corner, empty), (corner, corner)):
            c = blockmm.multiply(a, b)
            self.assertEqual((c.shape, c.blocksize, c.nnz, len(c.indptr)), ((8, 8), (4, 4), 0, 3))
            self.assertTrue((c.indptr == 0).all())

    def test_formats_dtypes_and_block_sizes(self):
        rng = np.random.default_rng(51)
        dense = np.where(rng.random((12, 12)) < 0.4, rng.integers(1, 256, (12, 12)), 0)  # uint8 holds them
        expected = scipy_product(dense, dense)
        dtypes = (np.uint8, np.int16, np.uint16, np.int32, np.uint64, np.int64)
        for f, fmt in enumerate(("csr", "csc", "coo", "lil", "dok", "dia", "bsr")):
            for m in (1, 3, 4):
                dtype = dtypes[(f + m) % len(dtypes)]
                x = sp.csr_matrix(dense).astype(dtype)
                x = x.tobsr(blocksize=(m, m)) if fmt == "bsr" else x.asformat(fmt)
                with self.subTest(fmt=fmt, dtype=dtype, m=m):
                    self.check(blockmm.multiply(x, x, block_size=None if fmt == "bsr" else m), expected, m)
        boolean = sp.csr_array(dense > 0)
        self.check(blockmm.multiply(boolean, boolean), scipy_product(dense > 0, dense > 0), 1)
        # int64 indices (scipy's choice for large matrices) are read as they are.
        wide = sp.csr_matrix(dense).astype(np.uint16).tobsr(blocksize=(2, 2))
        wide.indices, wide.indptr = wide.indices.astype(np.int64), wide.indptr.astype(np.int64)
        self.check(blockmm.multiply(wide, wide), expected, 2)

    def test_repeated_entries_are_summed_in_a_wide_type_first(self):
        # COO entries, BSR blocks and CSR entries given twice or more, out of order: each sum fits.
        coo = sp.coo_matrix(([40000, 25535, 3, 5], ([0, 0, 2, 1], [1, 1, 2, 0])), shape=(3, 3), dtype=np.uint16)
        summed = np.array([[0, 65535, 0], [5, 0, 0], [0, 0, 3]])
        self.check(blockmm.multiply(coo, coo), scipy_product(summed, summed), 1)
        csr = sp.csr_matrix((np.array([40000, 25535, 3, 5], np.uint16), np.array([1, 1, 0, 2]), np.array([0, 2, 3, 4])),
                            shape=(3, 3))
        self.assertFalse(csr.has_canonical_format)
        expected = np.array([[0, 65535, 0], [3, 0, 0], [0, 0, 5]])
        self.check(blockmm.multiply(csr, csr), scipy_product(expected, expected), 1)
        block = np.arange(4, dtype=np.uint16).reshape(1, 2, 2) + 1
        bsr = sp.bsr_matrix((np.concatenate([block, block, block]), np.array([1, 0, 1]), np.array([0, 3, 3])),
                            shape=(4, 4))
        dense = np.zeros((4, 4), np.int64)
        dense[0:2, 0:2] = block[0]
        dense[0:2, 2:4] = 2 * block[0]
        self.check(blockmm.multiply(bsr, bsr), scipy_product(dense, dense), 2)

    def test_products_from_several_threads_at_once(self):
        # The GIL is released while a product computes and taken back for its output: products
        # started from threads at once (run one at a time inside) neither deadlock nor mix.
        rng = np.random.default_rng(56)
        cases = [(random_bsr(rng, 48 * m, m, 0.3, 65535), m) for m in (1, 2, 3, 4, 5, 6)]
        results = [None] * len(cases)

        def run(i):
            results[i] = blockmm.multiply(cases[i][0], cases[i][0], chunk_size=512)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(cases))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for (a, m), c in zip(cases, results):
            self.check(c, scipy_product(a, a), m)

    def test_canonical_uint16_operands_are_read_without_a_copy(self):
        # The arrays handed to the extension are the matrix's own.
        rng = np.random.default_rng(52)
        a = random_bsr(rng, 40, 4, 0.5)
        name, n, m, indptr, indices, data = blockmm.product._operand(a, "A", None)
        self.assertTrue(np.shares_memory(indptr, a.indptr) and np.shares_memory(indices, a.indices))
        self.assertTrue(np.shares_memory(data, a.data))
        csr = sp.csr_matrix(a)
        self.assertTrue(np.shares_memory(blockmm.product._operand(csr, "A", None)[5], csr.data))

    def test_the_binary_writes_the_same_blocks_byte_for_byte(self):
        rng = np.random.default_rng(53)
        with tempfile.TemporaryDirectory() as work:
            for trial, (m, p) in enumerate([(1, 40), (3, 9), (4, 16), (8, 5), (17, 3), (33, 2)]):
                a = random_bsr(rng, p * m, m, 0.4, 65535 if trial % 2 else 1023, skew=trial == 2, empty_rows=0.2)
                b = random_bsr(rng, p * m, m, 0.4, 65535 if trial % 2 else 1023)
                paths = [os.path.join(work, f"{x}{trial}.bin") for x in "ABC"]
                blockmm.write(paths[0], sp.bsr_matrix(a))
                blockmm.write(paths[1], sp.bsr_matrix(b))
                subprocess.run([os.path.join(BUILD, "blockmm"), "-q", *paths], check=True, env=dict(os.environ, BLOCKMM_MPI="0"))
                cli = blockmm.read(paths[2])
                c = blockmm.multiply(a, b)
                with self.subTest(m=m, p=p):
                    self.assertTrue(np.array_equal(c.indptr, cli.indptr))
                    self.assertTrue(np.array_equal(c.indices, cli.indices))
                    self.assertEqual(c.data.tobytes(), cli.data.astype(np.uint32).tobytes())


class Refusals(unittest.TestCase):
    def refused(self, error, text, a, b=None, **options):
        with self.assertRaises(error) as caught:
            blockmm.multiply(a, a if b is None else b, **options)
        self.assertIn(text, str(caught.exception))
        self.assertNotIn("\n", str(caught.exception))

    def test_bad_operands(self):
        good = sp.bsr_array(np.eye(4, dtype=np.uint16), blocksize=(2, 2))
        self.refused(TypeError, "A: a scipy.sparse matrix or array is expected, not ndarray", np.eye(4), good)
        self.refused(TypeError, "B: integer values are expected, not float64", good, sp.csr_matrix(np.eye(4)))
        self.refused(ValueError, "A: the matrix is 4 x 6; blockmm multiplies square matrices",
                     sp.csr_matrix((4, 6), dtype=np.uint16), good)
        self.refused(ValueError, "A: blocks of 1 x 2; blockmm's blocks are square",
                     sp.bsr_matrix(np.eye(4, dtype=np.uint16), blocksize=(1, 2)), good)
        self.refused(ValueError, "A: blocks of 2 x 2, not block_size=4", good, good, block_size=4)
        self.refused(ValueError, "A: n = 6 is not a multiple of the block size m = 4",
                     sp.csr_matrix((6, 6), dtype=np.uint16), block_size=4)
        self.refused(ValueError, "A: n = 0 is outside blockmm's [1, 2147483647]", sp.csr_matrix((0, 0), dtype=np.uint16))
        self.refused(ValueError, "B: n = 6, m = 1 does not match A (n = 4, m = 2)", good,
                     sp.csr_matrix((6, 6), dtype=np.uint16))
        self.refused(ValueError, "B: n = 4, m = 1 does not match A (n = 4, m = 2)", good, sp.eye(4, dtype=np.uint16))

    def test_values_outside_uint16_are_refused_not_wrapped(self):
        self.refused(ValueError, "A: value 65536 at (row 1, column 2) (0-based) is outside [0, 65535]",
                     sp.coo_matrix(([65536], ([1], [2])), shape=(4, 4), dtype=np.int64))
        self.refused(ValueError, "A: value -1 at (row 3, column 0) (0-based) is outside [0, 65535]",
                     sp.csr_matrix(([-1], ([3], [0])), shape=(4, 4), dtype=np.int32))
        self.refused(ValueError, "A: value 70000 at (row 2, column 3) (0-based) is outside [0, 65535]",
                     sp.csc_matrix(([70000], ([2], [3])), shape=(4, 4), dtype=np.int32))
        bsr = sp.bsr_matrix((np.array([[[1, 2], [3, 99999]]]), np.array([1]), np.array([0, 0, 1])), shape=(4, 4))
        self.refused(ValueError, "A: value 99999 at (row 3, column 3) (0-based) is outside [0, 65535]", bsr)
        big = np.uint64(2**64 - 1)
        self.refused(ValueError, "is outside [0, 65535]", sp.coo_matrix(([big, np.uint64(5)], ([0, 0], [0, 0])), shape=(2, 2)))
        # Repeated entries whose sum passes 65535 (each fits): summed in int64, not in uint16.
        self.refused(ValueError, "A: repeated entries at (row 0, column 1) (0-based) sum to 65536, more than 65535",
                     sp.coo_matrix(([40000, 25536], ([0, 0], [1, 1])), shape=(2, 2), dtype=np.uint16))

    def test_bad_options(self):
        good = sp.eye(4, dtype=np.uint16, format="csr")
        self.refused(ValueError, "unknown backend 'gpu' (expected auto, cpu, cuda or reference)", good, backend="gpu")
        self.refused(ValueError, "threads=2000: outside [0, 1024]", good, threads=2000)
        self.refused(TypeError, "threads=1.5: an integer is expected", good, threads=1.5)
        self.refused(TypeError, "gpus=True: an integer is expected", good, gpus=True)
        self.refused(ValueError, "mem_budget=-1: outside [0, 4611686018427387904]", good, mem_budget=-1)
        self.refused(ValueError, "chunk_size=0: outside [1, 4611686018427387904]", good, chunk_size=0)
        self.refused(ValueError, "gpus=2000: outside [0, 1024]", good, gpus=2000)
        self.refused(ValueError, "block_size=0: outside [1, 46340]", good, block_size=0)

    def test_no_usable_gpu_and_a_malformed_setting_are_the_command_lines_messages(self):
        if NATIVE.visible_gpus() > 0:
            self.skipTest("a GPU is visible")
        good = sp.eye(4, dtype=np.uint16, format="csr")
        self.refused(RuntimeError, "--backend cuda: no usable GPU", good, backend="cuda")
        run = subprocess.run([sys.executable, "-c", "import blockmm, scipy.sparse as sp, numpy as np; "
                              "blockmm.multiply(sp.eye(4, dtype=np.uint16), sp.eye(4, dtype=np.uint16))"],
                             capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=PACKAGE, BLOCKMM_RELABEL="x"))
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("ValueError: BLOCKMM_RELABEL", run.stderr)

    def test_an_output_past_the_memory_limit_is_a_memory_error(self):
        for limit, message in ((6, "MemoryError: out of memory"), (96, "MemoryError: Unable to allocate")):
            # One malloc arena: a thread's own arena reserves 64 MiB of address space when the thread
            # first allocates, which RLIMIT_AS counts as if it were used (whether a thread makes one
            # depends on timing: the limit would measure glibc rather than what the product holds).
            run = subprocess.run([sys.executable, "-c", f"LIMIT = {limit}\n" + MEMORY_LIMIT_CHILD], capture_output=True,
                                 text=True, timeout=240,
                                 env=dict(os.environ, PYTHONPATH=PACKAGE, OMP_NUM_THREADS="2", MALLOC_ARENA_MAX="1"))
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertTrue(run.stdout.startswith(message), run.stdout)

    def test_the_package_works_without_its_extension(self):
        with tempfile.TemporaryDirectory() as work:
            package = os.path.join(work, "blockmm")
            os.mkdir(package)
            for name in os.listdir(os.path.join(PACKAGE, "blockmm")):
                if name.endswith(".py"):
                    with open(os.path.join(PACKAGE, "blockmm", name), "rb") as f, open(os.path.join(package, name), "wb") as g:
                        g.write(f.read())
            blockmm.write(os.path.join(work, "I.bin"), sp.bsr_matrix(np.eye(4, dtype=np.uint16), blocksize=(2, 2)))
            script = textwrap.dedent("""
                import blockmm, numpy as np, scipy.sparse as sp
                assert blockmm.read("I.bin").shape == (4, 4)
                try:
                    blockmm.multiply(sp.eye(4, dtype=np.uint16), sp.eye(4, dtype=np.uint16))
                except ImportError as e:
                    print(e)
                """)
            run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=work,
                                 env=dict(os.environ, PYTHONPATH=work))
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertIn("blockmm.multiply needs blockmm's compiled extension", run.stdout)
            self.assertIn("pip install ./python", run.stdout)


# A child process: a product whose output allocation raises SIGINT (the real signal, through
# blockmm's handler and Python's), then what it left in the output, then a product that must work.
# The process's C-level SIGINT action (sigaction, what the kernel calls; signal.getsignal reads
# only Python's own table) must be Python's again after each product, interrupted or not.
INTERRUPTED_CHILD = """
import ctypes, signal, sys, numpy as np, scipy.sparse as sp, blockmm, blockmm.product
libc = ctypes.CDLL(None, use_errno=True)
def sigint_action():
    # glibc's struct sigaction: the handler (8 bytes), sa_mask (128, of which the kernel's 64
    # signals are the first 8; glibc leaves the rest as its stack held it), sa_flags (an int).
    action = ctypes.create_string_buffer(512)
    if libc.sigaction(signal.SIGINT, None, action) != 0:
        raise OSError(ctypes.get_errno(), "sigaction")
    return action.raw[0:16], action.raw[136:140]
python_action = sigint_action()
native = blockmm.product._native()
kept = []
class Interrupting:
    def multiply(self, a, b, allocate, *rest):
        def allocate_then_interrupt(blocks, wide):
            arrays = allocate(blocks, wide)
            arrays[1].fill(-1)
            kept.append(arrays)
            if MODE == "raise":
                try:
                    signal.raise_signal(signal.SIGINT)  # Python raises KeyboardInterrupt at once: kept here
                except KeyboardInterrupt:
                    pass
            else:
                print("allocated", flush=True)  # the parent sends SIGINT
            return arrays
        return native.multiply(a, b, allocate_then_interrupt, *rest)
blockmm.product._native = lambda: Interrupting()
rng = np.random.default_rng(7)
a = sp.random(1024, 1024, 32 / 1024, format="csr", random_state=8, dtype=np.float64)
a.data[:] = rng.integers(1, 100, a.nnz)
a = a.astype(np.uint16)
try:
    blockmm.multiply(a, a, chunk_size=CHUNK, backend=BACKEND)  # a block a chunk (cpu)
    print("finished")
except KeyboardInterrupt:
    indices = kept[0][1]
    print(f"interrupted, {int((indices >= 0).sum())} of {len(indices)} blocks written")
blockmm.product._native = lambda: native
assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
assert sigint_action() == python_action, "the interrupted product left its C SIGINT handler in place"
c = blockmm.multiply(a, a, backend=BACKEND)
assert (c.toarray() == np.minimum((a.astype(np.int64) @ a.astype(np.int64)).toarray(), 2**32 - 1)).all()
assert sigint_action() == python_action, "a product left its C SIGINT handler in place"
print("then a product")
"""


def interrupted_child(mode, backend="auto", chunk=1):
    setup = f"MODE, BACKEND, CHUNK = {mode!r}, {backend!r}, {chunk}\n"
    return subprocess.Popen([sys.executable, "-c", setup + INTERRUPTED_CHILD], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=PACKAGE))


def check_stopped_early(test, out):
    """The child's product stopped between chunks, long before its end, and one worked after it."""
    lines = [line for line in out.splitlines() if line.startswith("interrupted")]
    test.assertEqual(len(lines), 1, out)
    written, total = (int(w) for w in lines[0].split()[1:4:2])
    test.assertLess(written, total / 2, out)
    test.assertIn("then a product", out)


class Interrupt(unittest.TestCase):
    def test_ctrl_c_during_the_product_raises_keyboard_interrupt_between_chunks(self):
        child = interrupted_child("raise")
        out, err = child.communicate(timeout=240)
        self.assertEqual(child.returncode, 0, err)
        check_stopped_early(self, out)

    def test_ctrl_c_from_outside(self):
        child = interrupted_child("outside")
        self.assertEqual(child.stdout.readline().strip(), "allocated")
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=240)
        self.assertEqual(child.returncode, 0, err)
        check_stopped_early(self, out)


# What the memory tests' children share: /proc/self/status, an n 8192, m 4 operand whose square is
# 262 MiB of output from 6 MiB, a first small product.
LARGE_PRODUCT_SETUP = """
import numpy as np, scipy.sparse as sp, blockmm, blockmm.product
def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))
rng = np.random.default_rng(9)
n, m, p = 8192, 4, 2048
present = rng.random((p, p)) < 0.04
rows, cols = np.nonzero(present)
a = sp.bsr_array((rng.integers(0, 1024, (len(rows), m, m)).astype(np.uint16), cols.astype(np.int32),
                  np.r_[0, np.cumsum(present.sum(1))].astype(np.int32)), shape=(n, n))
small = sp.eye(8, dtype=np.uint16, format="csr")
blockmm.multiply(small, small, threads=2)  # the extension, its libraries and threads there before the baseline
"""

# A child process: the product's peak resident memory over what it held before, the output's bytes
# and the operand's (printed as one line of numbers).
MEMORY_CHILD = LARGE_PRODUCT_SETUP + """
before = status("VmRSS:")
c = blockmm.multiply(a, a, threads=2, chunk_size=4 << 20)
peak = status("VmHWM:")
inputs = a.data.nbytes + a.indices.nbytes + a.indptr.nbytes
output = c.data.nbytes + c.indices.nbytes + c.indptr.nbytes
print(before, peak, inputs, output, len(c.indices))
"""


class Memory(unittest.TestCase):
    def test_peak_memory_is_the_output_the_operands_and_the_chunks(self):
        run = subprocess.run([sys.executable, "-c", MEMORY_CHILD], capture_output=True, text=True, timeout=240,
                             env=dict(os.environ, PYTHONPATH=PACKAGE, OMP_NUM_THREADS="2"))
        self.assertEqual(run.returncode, 0, run.stderr)
        before, peak, inputs, output, blocks = (int(x) for x in run.stdout.split())
        grown = peak - before
        # The output once; the symbolic phase's pattern (an int32 a block, the backend's own); both
        # operands built from records, once each (records, CSR, masks, B's CSC: under twice the
        # inputs' bytes each); the numeric phase's two chunk buffers of 4 MiB; 32 MiB of slack
        # (allocator, threads' stacks, huge pages' rounding). A second copy of the output would be
        # 262 MiB more.
        bound = output + 4 * blocks + 4 * inputs + 2 * (4 << 20) + (32 << 20)
        print(f"peak - before = {grown / 2**20:.0f} MiB: output {output / 2**20:.0f} MiB, inputs "
              f"{inputs / 2**20:.0f} MiB, pattern {4 * blocks / 2**20:.0f} MiB, bound {bound / 2**20:.0f} MiB")
        self.assertGreater(output, 150 << 20)  # the output dominates, as in the products it is for
        self.assertLess(grown, bound)


# A child process whose address space ends LIMIT MiB past what it holds before a product whose
# output alone is 262 MiB: MemoryError (blockmm's "out of memory" where its operands do not fit,
# numpy's where the output does not), and a product after it.
MEMORY_LIMIT_CHILD = LARGE_PRODUCT_SETUP + """
import resource
limit = status("VmSize:") + (LIMIT << 20)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    blockmm.multiply(a, a, threads=2)
    print("no MemoryError")
except MemoryError as e:
    print("MemoryError:", e)
assert (blockmm.multiply(small, small).toarray() == np.eye(8)).all()
"""


# A child process with the developer settings that force the team's paths without a GPU: two
# host backends splitting rows, then B in panels streamed past them, relabelled indices too.
TEAM_CHILD = """
import numpy as np, scipy.sparse as sp, blockmm
rng = np.random.default_rng(10)
for m in (1, 3, 8):
    a = sp.random(m * 30, m * 30, 0.2, format="csr", random_state=m, dtype=np.float64)
    a.data[:] = rng.integers(0, 65536, a.nnz)
    a = a.astype(np.uint16).tobsr(blocksize=(m, m))
    c = blockmm.multiply(a, a, chunk_size=64)
    expected = np.minimum((a.astype(np.int64) @ a.astype(np.int64)).toarray(), 2**32 - 1)
    assert (c.toarray() == expected).all(), m
    assert c.has_canonical_format
print("teams agree")
"""


class Teams(unittest.TestCase):
    def test_team_paths_write_the_same_product(self):
        for settings in ({"BLOCKMM_WORKERS": "2"}, {"BLOCKMM_WORKERS": "2", "BLOCKMM_B_PANELS": "3"},
                         {"BLOCKMM_WORKERS": "3", "BLOCKMM_B_PANELS": "2", "BLOCKMM_RELABEL": "on"}):
            with self.subTest(**settings):
                run = subprocess.run([sys.executable, "-c", TEAM_CHILD], capture_output=True, text=True, timeout=240,
                                     env=dict(os.environ, PYTHONPATH=PACKAGE, **settings))
                self.assertEqual(run.returncode, 0, run.stderr)
                self.assertIn("teams agree", run.stdout)


class Gpu(unittest.TestCase):
    """The cuda backend in process (label gpu): small random cases against the cpu backend's bytes."""

    @classmethod
    def setUpClass(cls):
        if NATIVE.visible_gpus() == 0:
            if "Gpu" in sys.argv[1:]:  # the test "gpu" of CTest: a skip it counts as one
                print("SKIP: no GPU visible to CUDA in this process")
                sys.exit(77)
            raise unittest.SkipTest("no GPU visible to CUDA in this process")

    def test_cuda_products_equal_the_cpu_products(self):
        rng = np.random.default_rng(54)
        for trial in range(24):
            m = [1, 2, 4, 8, 16, 32, 5, 33][trial % 8]
            p = int(rng.integers(1, 40))
            high = 65535 if trial % 3 == 0 else 1023
            a = random_bsr(rng, p * m, m, rng.random(), high, skew=trial % 4 == 1, empty_rows=0.2 * (trial % 2))
            b = random_bsr(rng, p * m, m, rng.random(), high)
            c, ran = blockmm.product._multiply(a, b, backend="cuda", chunk_size=[1 << 30, 4096][trial % 2])
            d = blockmm.multiply(a, b, backend="cpu")
            with self.subTest(trial=trial, m=m, p=p):
                self.assertEqual(ran["backend"], "cuda")
                self.assertTrue(np.array_equal(c.indptr, d.indptr) and np.array_equal(c.indices, d.indices))
                self.assertEqual(c.data.tobytes(), d.data.tobytes())
                self.assertTrue(np.array_equal(c.toarray(), scipy_product(a, b)))

    def test_ctrl_c_stops_a_cuda_product_and_the_kept_gpu_team_multiplies_after_it(self):
        child = interrupted_child("raise", backend="cuda", chunk=4096)
        out, err = child.communicate(timeout=240)
        self.assertEqual(child.returncode, 0, err)
        check_stopped_early(self, out)

    def test_a_budget_too_small_is_a_memory_error(self):
        """A mem_budget that cannot hold the product is refused as the plan or the backend says it
        (naming --mem-budget), as MemoryError: it was a RuntimeError, told from a GPU's failure by
        the text "out of memory", which a budget's refusal does not say."""
        rng = np.random.default_rng(56)
        a = random_bsr(rng, 64 * 4, 4, 0.5, 1023)
        with self.assertRaises(MemoryError) as refused:
            blockmm.multiply(a, a, backend="cuda", gpus=1, mem_budget=1024)
        self.assertIn("--mem-budget", str(refused.exception))
        c = blockmm.multiply(a, a, backend="cuda", gpus=1)  # the kept team multiplies after it
        self.assertTrue(np.array_equal(c.toarray(), scipy_product(a, a)))

    def test_every_gpu_and_one_gpu_agree(self):
        rng = np.random.default_rng(55)
        a = random_bsr(rng, 512 * 8, 8, 0.05, 65535)
        one, ran = blockmm.product._multiply(a, a, backend="cuda", gpus=1)
        every, _ = blockmm.product._multiply(a, a, backend="cuda", gpus=NATIVE.visible_gpus())
        self.assertEqual(one.data.tobytes(), every.data.tobytes())
        self.assertTrue(np.array_equal(one.indices, every.indices))
        print(f"cuda in process on {ran['device']}")


if __name__ == "__main__":
    unittest.main()
