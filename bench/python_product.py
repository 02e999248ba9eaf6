"""blockmm.multiply in process against the blockmm binary on the same inputs (issue 50): the binary
into a file read back with blockmm.read (what a Python user did before), or into /dev/null (the
binary's own time), and the product in this process; the in-process product's bytes compared with
the binary's output. Times are wall seconds, and CPU seconds (user + system, every thread and child:
steadier than the wall on a shared machine), of RUNS runs each (minimum and all); the first
in-process run of a GPU backend includes CUDA's start in this process, which later ones keep.

usage: python_product.py BUILD_DIR A B BACKEND RUNS WORK [READ_RUNS]
  WORK: a folder for the binary's output (C.bin), removed after each read; READ_RUNS: runs of the
  binary + blockmm.read (default RUNS).
"""
import os
import resource
import subprocess
import sys
import time

build, a_path, b_path, backend, runs, work = sys.argv[1:7]
runs = int(runs)
read_runs = int(sys.argv[7]) if len(sys.argv) > 7 else runs
sys.path.insert(0, os.path.join(build, "python"))
import numpy as np  # noqa: E402
import blockmm  # noqa: E402
import blockmm.product  # noqa: E402

try:
    blockmm.product._native()
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

binary = [os.path.join(build, "blockmm"), "-q", "--backend", backend]
env = dict(os.environ, BLOCKMM_MPI="0")
out = os.path.join(work, "C.bin")


def cpu_seconds():
    """User + system seconds of this process's threads and its waited-for children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(action):
    start, cpu = time.perf_counter(), cpu_seconds()
    result = action()
    return (time.perf_counter() - start, cpu_seconds() - cpu), result


def binary_then_read():
    subprocess.run([*binary, a_path, b_path, out], check=True, env=env)
    c = blockmm.read(out)
    os.remove(out)
    return c


def binary_to_null():
    subprocess.run([*binary, a_path, b_path, "/dev/null"], check=True, env=env)


rows, c, info = {}, None, None
a, b = blockmm.read(a_path), blockmm.read(b_path)
for name, action in (("in process", lambda: blockmm.product._multiply(a, b, backend=backend)),
                     ("binary > /dev/null", binary_to_null), ("binary + blockmm.read", binary_then_read)):
    seconds = []
    for _ in range(read_runs if action is binary_then_read else runs):
        if name == "in process":
            c = None  # the last product freed before the next is made
        took, result = timed(action)
        seconds.append(took)
        if name == "in process":
            c, info = result
        result = None
    rows[name] = seconds
ran = f"{info['backend']} on {info['device']}; phases " + ", ".join(f"{k} {v:.2f}" for k, v in info["seconds"].items())

subprocess.run([*binary, a_path, b_path, out], check=True, env=env)
reference = blockmm.read(out)
os.remove(out)
same = (np.array_equal(c.indptr, reference.indptr) and np.array_equal(c.indices, reference.indices)
        and c.data.tobytes() == reference.data.astype(np.uint32).tobytes())
print(f"in process: {ran}")
print(f"C: {len(c.indices)} blocks of {c.blocksize[0]} x {c.blocksize[1]}, "
      f"{(c.data.nbytes + c.indices.nbytes + c.indptr.nbytes) / 1e9:.2f} GB in memory; "
      f"same bytes as the binary's output: {'yes' if same else 'NO'}")
print(f"{'':24s} {'wall s':>7s} {'cpu s':>7s}   all runs (wall/cpu)")
for name, seconds in rows.items():
    walls, cpus = [w for w, _ in seconds], [c for _, c in seconds]
    print(f"{name:24s} {min(walls):7.2f} {min(cpus):7.2f}   " + " ".join(f"{w:.2f}/{c:.2f}" for w, c in seconds))
for measure, index in (("wall", 0), ("cpu", 1)):
    best = {name: min(s[index] for s in seconds) for name, seconds in rows.items()}
    print(f"{measure}: in process / (binary + blockmm.read) = {best['in process'] / best['binary + blockmm.read']:.2f};  "
          f"in process / (binary > /dev/null) = {best['in process'] / best['binary > /dev/null']:.2f}")
sys.exit(0 if same else 1)
