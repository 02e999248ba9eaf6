#!/usr/bin/env python3
"""A seeded mutation fuzz of the Python tools' readers through the real tools (issue 43): Matrix
Market, scipy .npz, HDF5 and COL380 binary files, made here and then mutated (bytes flipped,
inserted, cut; numbers in text swapped for extreme ones; .npz arrays rebuilt with lying lengths,
indices, pointers and types), fed to blockmm-import, blockmm-export and blockmm-spy in one
worker process. Every run must end with exit 0 or 3 within a time limit (or 4, "File too large", where a mutated
header asks for an output past the worker's file-size limit); exit 3 with one line
"<tool>: error: <input>: ..." and no traceback; nothing left beside the output (no temporary, no
output after a failure); an accepted .mtx or .npz must mean what scipy reads from it where scipy
reads it. A crash, a hang or a broken rule stops the run, keeps the input under --out and says
how to run it again.

usage: fuzz_python_tools.py --seconds S [--seed N] [--out DIR] | --case N
(BLOCKMM_BUILD_DIR names the build tree; its python/ holds the package.)
"""
import argparse
import contextlib
import io
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

BUILD = os.environ.get("BLOCKMM_BUILD_DIR") or sys.exit("BLOCKMM_BUILD_DIR is not set")
CASE_SECONDS = 20
FILE_SIZE_LIMIT = 64 << 20
MEMORY_LIMIT = 4 << 30
INTERESTING_NUMBERS = ["0", "-1", "1", "2147483647", "2147483648", "4294967295", "4294967298", "65535", "65536",
                       "9223372036854775807", "18446744073709551617", "1e308", "-0", "nan", "inf", "1.5", "0x10",
                       "", "1e3", "+3", "99999999999999999999999"]


# ---------------------------------------------------------------------------------------------
# seeds


def seeds(work):
    """Valid inputs of each kind: (name, bytes)."""
    import numpy as np
    import scipy.sparse as sp

    import blockmm

    rng = np.random.default_rng(43)
    out = []
    dense = np.zeros((8, 8), dtype=np.int64)
    mask = rng.random((8, 8)) < 0.3
    dense[mask] = rng.integers(1, 300, mask.sum())
    r, c = np.nonzero(dense)
    general = ["%%MatrixMarket matrix coordinate integer general", "% a comment", f"8 8 {len(r)}"] + \
        [f"{r[e] + 1} {c[e] + 1} {dense[r[e], c[e]]}" for e in range(len(r))]
    out.append(("general.mtx", ("\n".join(general) + "\n").encode()))
    low = np.tril(dense)
    lr, lc = np.nonzero(low)
    symmetric = ["%%MatrixMarket matrix coordinate real symmetric", f"8 8 {len(lr)}"] + \
        [f"{lr[e] + 1} {lc[e] + 1} {low[lr[e], lc[e]]}.0" for e in range(len(lr))]
    out.append(("symmetric.mtx", ("\n".join(symmetric) + "\n").encode()))
    pattern = ["%%MatrixMarket matrix coordinate pattern general", f"6 6 {min(5, len(r))}"] + \
        [f"{(r[e] % 6) + 1} {(c[e] % 6) + 1}" for e in range(min(5, len(r)))]
    out.append(("pattern.mtx", ("\n".join(pattern) + "\n").encode()))
    for layout in ("csr", "csc", "coo", "bsr", "dia"):
        matrix = sp.bsr_matrix(dense, blocksize=(2, 2)) if layout == "bsr" else sp.csr_matrix(dense).asformat(layout)
        for compressed in (False, True):
            buffer = io.BytesIO()
            sp.save_npz(buffer, matrix, compressed=compressed)
            out.append((f"{layout}{'-z' if compressed else ''}.npz", buffer.getvalue()))
    bsr = sp.bsr_matrix(dense, blocksize=(2, 2))
    for name, values in (("input", "u16"), ("product", "u32")):
        for suffix, write in (("bin", blockmm.write_bin), ("h5", blockmm.write_h5)):
            path = os.path.join(work, f"seed.{suffix}")
            write(path, bsr, values=values)
            with open(path, "rb") as f:
                out.append((f"{name}.{suffix}", f.read()))
            os.unlink(path)
    return out


# ---------------------------------------------------------------------------------------------
# mutations


def mutate_bytes(rand, data):
    data = bytearray(data)
    for _ in range(rand.randint(1, 4)):
        kind = rand.randrange(6)
        at = rand.randrange(len(data) + 1)
        if kind == 0 and data:
            data[min(at, len(data) - 1)] ^= 1 << rand.randrange(8)
        elif kind == 1 and data:
            data[min(at, len(data) - 1)] = rand.choice([0, 0xFF, 0x7F, 0x80, 0x0A, 0x25, 0x20])
        elif kind == 2:
            data[at:at] = bytes(rand.randrange(256) for _ in range(rand.randint(1, 8)))
        elif kind == 3:
            del data[at:at + rand.randint(1, 16)]
        elif kind == 4:
            del data[at:]
        else:
            size = rand.randint(1, 32)
            data[at:at] = data[max(0, at - size):at]
    return bytes(data)


def mutate_text(rand, data):
    lines = data.split(b"\n")
    for _ in range(rand.randint(1, 3)):
        kind = rand.randrange(5)
        at = rand.randrange(len(lines))
        if kind == 0:
            words = lines[at].split(b" ")
            words[rand.randrange(len(words))] = rand.choice(INTERESTING_NUMBERS).encode()
            lines[at] = b" ".join(words)
        elif kind == 1:
            del lines[at]
        elif kind == 2:
            lines.insert(at, lines[rand.randrange(len(lines))])
        elif kind == 3:
            lines = lines[:at + 1]
        else:
            lines.insert(at, rand.choice([b"%", b"", b"% \xff\x00", b"1 1", b"1 1 1 1"]))
        if not lines:
            lines = [b""]
    return b"\n".join(lines)


def mutate_npz(rand, data):
    """An array of the archive rebuilt: other values, another length, another type, or gone."""
    import numpy as np

    with zipfile.ZipFile(io.BytesIO(data)) as z:
        arrays = {name[:-4]: np.load(io.BytesIO(z.read(name)), allow_pickle=False) for name in z.namelist()}
    key = rand.choice(sorted(arrays))
    array = arrays[key]
    kind = rand.randrange(6)
    if kind == 0 and array.size:
        array = array.copy()
        array.reshape(-1)[rand.randrange(array.size)] = rand.choice(
            [-1, 0, 1, 7, 2**31 - 1, 2**31, 65536, 10**6] if array.dtype.kind in "iu" else [0.5, -1.0, 1e300, float("nan")])
    elif kind == 1:
        array = array.reshape(-1)[:max(0, array.size - rand.randint(1, 3))] if array.ndim else array
    elif kind == 2 and array.ndim:
        array = np.concatenate([array, array[:rand.randint(1, 3)]]) if len(array) else array
    elif kind == 3:
        array = array.astype(rand.choice(["<i8", "<u4", ">i4", "<f4", "<i2", "?", "<c8"]))
    elif kind == 4:
        del arrays[key]
        array = None
    else:
        array = np.array(rand.choice([[3, 3], [2**31, 2], [-4, 4], [8]]))
    if array is not None:
        try:
            arrays[key] = array
        except (ValueError, OverflowError):
            pass
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", rand.choice([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])) as z:
        for name, value in arrays.items():
            with z.open(name + ".npy", "w") as out:
                np.lib.format.write_array(out, np.asarray(value), allow_pickle=False)
    return buffer.getvalue()


def mutate(rand, name, data):
    if name.endswith(".mtx") and rand.random() < 0.7:
        return mutate_text(rand, data)
    if name.endswith(".npz") and rand.random() < 0.6:
        try:
            return mutate_npz(rand, data)
        except Exception:  # noqa: BLE001: a seed numpy cannot rebuild: flip bytes instead
            pass
    return mutate_bytes(rand, data)


# ---------------------------------------------------------------------------------------------
# the worker: runs the tools in-process, one case after another


class Finding(Exception):
    pass


def run_tool(entry, args):
    import blockmm.cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = getattr(blockmm.cli, entry)(args)
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else 1
    return code, err.getvalue()


def entries(rows, cols, values, n_cols):
    """(keys, values) of non-zero entries, repeats summed, sorted by key = row * n_cols + col."""
    import numpy as np

    rows, cols, values = (np.asarray(a) for a in (rows, cols, values))
    keep = values != 0
    keys = rows[keep].astype(np.int64) * n_cols + cols[keep]
    values = values[keep].astype(np.float64)
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, np.int64)
    sums = np.add.reduceat(values, starts) if len(starts) else values
    return keys[starts], sums


def agrees_with_scipy(name, path, output):
    """Where scipy reads the accepted input, it must mean the matrix blockmm-import wrote (entries
    compared, never a matrix of n rows: the shapes may be 2^31 - 1)."""
    import numpy as np
    import scipy.io
    import scipy.sparse as sp

    from blockmm.files import open_block_file

    try:
        theirs = sp.coo_matrix(scipy.io.mmread(path) if name.endswith(".mtx") else sp.load_npz(path))
        theirs_keys, theirs_values = entries(theirs.row, theirs.col, theirs.data, theirs.shape[1])
    except Exception:  # noqa: BLE001: scipy refuses what blockmm took (stricter or looser): no oracle
        return
    source = open_block_file(output)
    try:
        m = source.m
        parts = [(r.astype(np.int64)[t] * m + a, c.astype(np.int64)[t] * m + b, v[t, a, b])
                 for r, c, v in source.pieces() for t, a, b in [np.nonzero(v)]]
    finally:
        source.close()
    rows, cols, values = (np.concatenate([q[k] for q in parts]) if parts else np.zeros(0) for k in range(3))
    if np.any(rows >= theirs.shape[0]) or np.any(cols >= theirs.shape[1]):
        raise Finding(f"{name}: blockmm-import wrote entries outside the matrix scipy reads")
    ours_keys, ours_values = entries(rows, cols, values, theirs.shape[1])
    if not (np.array_equal(ours_keys, theirs_keys) and np.array_equal(ours_values, theirs_values)):
        raise Finding(f"{name}: blockmm-import wrote a matrix other than the one scipy reads")


def same_rules_as_cpp(path, code):
    """One reader, one set of rules: blockmm-cmp (C++), comparing the file with itself, takes a
    blockmm file exactly when the Python tools do (exit 0; 2 for a file it cannot read, 3 where
    its libhdf5 guard ends it)."""
    def unlimited():  # an AddressSanitizer build reserves terabytes of address space
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    run = subprocess.run([os.path.join(BUILD, "blockmm-cmp"), "-q", path, path], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, BLOCKMM_MPI="0"), preexec_fn=unlimited)
    if (run.returncode == 0) != (code == 0) or run.returncode not in (0, 2, 3):
        raise Finding(f"{path}: the Python tools exit {code}, blockmm-cmp {run.returncode}: {run.stderr!r}")


def one_case(work, name, data, rand):
    path = os.path.join(work, "in-" + name)
    with open(path, "wb") as f:
        f.write(data)
    foreign = name.endswith((".mtx", ".npz"))
    if foreign:
        choice = rand.randrange(3)
        output = os.path.join(work, ["out.bin", "out.h5", "out.png"][choice])
        entry = "spy_main" if choice == 2 else "import_main"
        args = ["-m", str(rand.choice([1, 2, 4])), *(["--pad"] if rand.random() < 0.5 else []), path, output]
    else:
        output = os.path.join(work, rand.choice(["out.npz", "out.mtx", "out.png"]))
        entry = "spy_main" if output.endswith(".png") else "export_main"
        args = ([] if entry == "spy_main" else ["-q", "--sparse-format", rand.choice(["csr", "csc", "coo", "bsr"])]) + \
            [path, output]
    signal.alarm(CASE_SECONDS)
    try:
        code, err = run_tool(entry, args)
    finally:
        signal.alarm(0)
    tool = {"import_main": "blockmm-import", "export_main": "blockmm-export", "spy_main": "blockmm-spy"}[entry]
    left = sorted(f for f in os.listdir(work) if f != os.path.basename(path))
    if "Traceback" in err:
        raise Finding(f"{tool} {args}: a traceback: {err!r}")
    if code == 0:
        if left != [os.path.basename(output)]:
            raise Finding(f"{tool} {args}: exit 0 but the folder holds {left}")
        if entry == "import_main":
            agrees_with_scipy(name, path, output)
    elif code == 4 and "File too large" in err and len(err.splitlines()) <= 2 and not left:
        pass  # a mutated header that asks for an output past the worker's file-size limit (the format's own size)
    elif code == 3:
        lines = err.splitlines()
        if len(lines) != 1 or not lines[0].startswith(f"{tool}: error: {path}"):
            raise Finding(f"{tool} {args}: exit 3 without one line naming the input: {err!r}")
        if left:
            raise Finding(f"{tool} {args}: exit 3 but the folder holds {left}")
    else:
        raise Finding(f"{tool} {args}: exit {code} (expected 0 or 3): {err!r}")
    if not foreign:
        same_rules_as_cpp(path, code)
    for f in left:
        os.unlink(os.path.join(work, f))
    os.unlink(path)


def make_case(pool, case_seed):
    """(name, bytes, random state for the run's options) of case `case_seed`, made again exactly."""
    rand = random.Random(case_seed)
    name, data = pool[rand.randrange(len(pool))]
    if rand.random() < 0.9:
        data = mutate(rand, name, data)
    return name, data, rand


def worker(seconds, seed, report, only_case=None, work=None):
    """Runs cases until `seconds` pass (or case `only_case` alone), writing each case's name,
    number and bytes to `report` first."""
    import h5py  # noqa: F401  (imported once: the HDF5 reader's child processes inherit it)

    def hang(number, frame):
        raise Finding(f"a case made no progress for {CASE_SECONDS} s")

    signal.signal(signal.SIGALRM, hang)
    os.environ["BLOCKMM_LIBRARY_TIMEOUT"] = "3"
    # A few bytes may ask for a large output legitimately (an HDF5 /indptr of n/m + 1 entries, say):
    # such outputs stop at this size with EFBIG, exit 4, instead of filling the disk.
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    # Memory must follow the records: a few bytes that make a tool allocate gigabytes get exit 5
    # here (a finding), not the machine's memory.
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, resource.getrlimit(resource.RLIMIT_AS)[1]))
    own = work is None
    work = work or tempfile.mkdtemp(prefix="blockmm-fuzz-py-")
    try:
        pool = seeds(work)
        end = time.monotonic() + seconds
        count = 0
        while only_case is None and time.monotonic() < end or only_case is not None and count == 0:
            case_seed = only_case if only_case is not None else seed * 1_000_003 + count
            name, data, rand = make_case(pool, case_seed)
            report.write(json.dumps({"name": name, "seed": case_seed, "hex": data.hex()}) + "\n")
            report.flush()
            one_case(work, name, data, rand)
            count += 1
        print(f"fuzz_python_tools: {count} cases in {seconds} s, no finding")
        return 0
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "blockmm-fuzz-python-findings"))
    parser.add_argument("--case", type=int, help="run case N alone (the number a finding names) and stop")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(BUILD, "python"))
    if not os.access(os.path.join(BUILD, "blockmm-cmp"), os.X_OK):  # the C++ side of every case
        print(f"fuzz_python_tools: no {os.path.join(BUILD, 'blockmm-cmp')}: build the blockmm-cmp target first")
        return 1
    if args.worker or args.case is not None:
        try:
            return worker(args.seconds, args.seed, sys.stderr if args.worker else open(os.devnull, "w"), args.case,
                          args.work)
        except Finding as finding:
            print(f"FINDING: {finding}", file=sys.stdout)
            sys.stdout.flush()
            return 1
    # The parent: a worker process whose last reported case is kept if it fails in any way, and
    # whose scratch folder goes however it ends.
    with tempfile.TemporaryFile("w+") as report, tempfile.TemporaryDirectory(prefix="blockmm-fuzz-py-") as work:
        process = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", "--seconds", str(args.seconds),
                                  "--seed", str(args.seed), "--work", work], stderr=report, stdout=subprocess.PIPE,
                                 text=True, timeout=args.seconds + 10 * CASE_SECONDS)
        report.seek(0)
        cases = [line for line in report.read().splitlines() if line.startswith("{")]
    print(process.stdout, end="")
    if process.returncode == 0:
        return 0
    cause = "died by signal " + signal.Signals(-process.returncode).name if process.returncode < 0 else \
        f"exit {process.returncode}"
    if cases:
        case = json.loads(cases[-1])
        os.makedirs(args.out, exist_ok=True)
        saved = os.path.join(args.out, f"{case['seed']}-{case['name']}")
        with open(saved, "wb") as f:
            f.write(bytes.fromhex(case["hex"]))
        print(f"fuzz_python_tools: the worker {cause} on case {case['seed']} (a mutated {case['name']}), its input "
              f"saved as {saved}; again: BLOCKMM_BUILD_DIR={BUILD} {sys.executable} {os.path.abspath(__file__)} "
              f"--case {case['seed']}")
    else:
        print(f"fuzz_python_tools: the worker {cause} before its first case")
    return 1


if __name__ == "__main__":
    sys.exit(main())
