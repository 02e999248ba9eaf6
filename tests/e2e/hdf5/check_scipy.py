#!/usr/bin/env python3
"""scipy reads blockmm's HDF5 products, and blockmm reads inputs written by h5py.

For random inputs (m = 1, odd m, empty product, saturating values) this runs
`blockmm A B C.h5` and `blockmm A B C.bin`, loads C.h5 into scipy.sparse.bsr_matrix exactly as
the README says, parses C.bin with numpy (no blockmm code), and checks both against a dense
uint64 product computed here. The same product written in parts (`--parts 3`: virtual datasets
over part files, docs/output.md) is loaded by the same recipe from another working directory, by
a relative name, and must be the same matrix. It also stores A as scipy's own BSR arrays through
h5py and checks that blockmm gives the same product from it. Exit 0 pass, 1 fail, 77 skip (no
h5py or scipy).

usage: check_scipy.py BLOCKMM_BIN
"""
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
    import scipy.sparse as sp
except ImportError as error:  # the CTest registration looks for them, but be safe
    print(f"SKIP: {error}")
    sys.exit(77)

SATURATED = 2**32 - 1


def record_dtype(m, value):
    return np.dtype([("i", "<i4"), ("j", "<i4"), ("v", value, (m, m))])


def random_input(rng, n, m, density, high):
    p = n // m
    where = np.flatnonzero(rng.random(p * p) < density)
    rng.shuffle(where)  # records in any order
    records = np.zeros(len(where), dtype=record_dtype(m, "<u2"))
    records["i"], records["j"] = where // p, where % p
    records["v"] = rng.integers(0, high + 1, size=(len(where), m, m), dtype=np.uint16)
    return records


def write_binary(path, n, m, records):
    with open(path, "wb") as f:
        f.write(np.array([n, m, len(records)], dtype="<i4").tobytes())
        f.write(records.tobytes())


def read_binary_product(path):
    raw = np.fromfile(path, dtype=np.uint8)
    n, m, k = (int(x) for x in raw[:12].view("<i4"))
    records = raw[12:].view(record_dtype(m, "<u4"))
    assert len(records) == k, f"{path}: header k = {k}, {len(records)} records"
    return n, m, records


def dense(n, m, records, dtype=np.uint64):
    out = np.zeros((n, n), dtype=dtype)
    for r in records:
        out[r["i"] * m:(r["i"] + 1) * m, r["j"] * m:(r["j"] + 1) * m] = r["v"]
    return out


def load_bsr(path):
    """The README's recipe."""
    with h5py.File(path, "r") as f:
        assert f.attrs["format"] == "blockmm-bsr", f.attrs["format"]
        assert f.attrs["version"] == 1
        n, m, nnzb = int(f.attrs["n"]), int(f.attrs["m"]), int(f.attrs["nnzb"])
        matrix = sp.bsr_matrix((f["data"][:], f["indices"][:], f["indptr"][:]), shape=(n, n))
    assert matrix.blocksize == (m, m), matrix.blocksize
    assert matrix.dtype == np.uint32, matrix.dtype
    assert matrix.indices.shape == (nnzb,)
    assert matrix.has_sorted_indices
    return matrix


def write_h5_input(path, n, m, dense_a):
    """A as scipy stores it (int32 indptr and indices, zero blocks dropped), written with h5py."""
    bsr = sp.bsr_matrix(dense_a.astype(np.uint16), blocksize=(m, m))
    bsr.sort_indices()
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "blockmm-bsr"
        f.attrs["version"] = 1
        f.attrs["n"], f.attrs["m"], f.attrs["nnzb"] = n, m, bsr.indices.shape[0]
        f["indptr"], f["indices"], f["data"] = bsr.indptr, bsr.indices, bsr.data


def run(argv):
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")


def check_case(blockmm, work, rng, n, m, density, high):
    a = random_input(rng, n, m, density, high)
    b = random_input(rng, n, m, density, high)
    pa, pb = os.path.join(work, "A.bin"), os.path.join(work, "B.bin")
    write_binary(pa, n, m, a)
    write_binary(pb, n, m, b)
    c_h5, c_bin = os.path.join(work, "C.h5"), os.path.join(work, "C.bin")
    run([blockmm, "-q", pa, pb, c_h5])
    run([blockmm, "-q", pa, pb, c_bin])

    da, db = dense(n, m, a), dense(n, m, b)
    expected = np.minimum(da @ db, SATURATED)  # exact: n * (2^16 - 1)^2 < 2^64
    from_h5 = load_bsr(c_h5)
    bn, bm, records = read_binary_product(c_bin)
    assert (bn, bm) == (n, m)
    assert np.array_equal(from_h5.toarray().astype(np.uint64), expected), "C.h5 differs from the dense product"
    assert np.array_equal(dense(n, m, records), expected), "C.bin differs from the dense product"
    # Same blocks, same order: the binary records are the BSR blocks row by row.
    assert np.array_equal(from_h5.indices, records["j"]) and np.array_equal(from_h5.data, records["v"])

    # In parts, read by the README's recipe from another folder through a relative name: libhdf5
    # finds the part files beside C.h5, wherever the reader runs.
    parted_dir = os.path.join(work, "parted")
    os.makedirs(parted_dir, exist_ok=True)
    run([blockmm, "-q", "--parts", "3", pa, pb, os.path.join(parted_dir, "C.h5")])
    elsewhere = os.path.join(work, "elsewhere")
    os.makedirs(elsewhere, exist_ok=True)
    here = os.getcwd()
    os.chdir(elsewhere)
    try:
        from_parts = load_bsr(os.path.join("..", "parted", "C.h5"))
    finally:
        os.chdir(here)
    assert np.array_equal(from_parts.indptr, from_h5.indptr) and np.array_equal(from_parts.indices, from_h5.indices)
    assert np.array_equal(from_parts.data, from_h5.data), "the parted product differs from the single file"

    pa_h5 = os.path.join(work, "A-scipy.h5")
    write_h5_input(pa_h5, n, m, da)
    c_from_h5_input = os.path.join(work, "C2.bin")
    run([blockmm, "-q", pa_h5, pb, c_from_h5_input])
    with open(c_bin, "rb") as x, open(c_from_h5_input, "rb") as y:
        assert x.read() == y.read(), "an h5py-written input gives a different product"
    return len(records)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    blockmm = sys.argv[1]
    rng = np.random.default_rng(2024)
    cases = [(12, 1, 0.3, 65535), (45, 3, 0.3, 1023), (64, 8, 0.2, 65535), (40, 4, 0.0, 1023),
             (35, 5, 0.5, 3), (48, 4, 0.9, 65535), (21, 7, 0.6, 65535)]
    with tempfile.TemporaryDirectory(prefix="blockmm-scipy-") as work:
        for n, m, density, high in cases:
            try:
                blocks = check_case(blockmm, work, rng, n, m, density, high)
            except AssertionError as error:
                print(f"FAIL n={n} m={m} density={density}: {error}")
                return 1
            print(f"ok   n={n} m={m} density={density}: {blocks} product blocks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
