#!/usr/bin/env python3
"""Anchor for the benchmarks: the same product with scipy's BSR matrices, end to end (read both
inputs, multiply, saturate at 2^32 - 1, drop all-zero blocks, write the COL380 output sorted).
Exact: the product is taken in uint64, which cannot overflow for these inputs (checked).

Usage: scipy_anchor.py A.bin B.bin C.bin    (prints one JSON line with the phase times; multiply_cpu is
the multiply's CPU seconds, the steadier figure on a loaded machine)
"""
import json
import sys
import time

import numpy as np
import scipy.sparse as sp


def read_bsr(path):
    n, m, k = (int(x) for x in np.fromfile(path, dtype="<i4", count=3))
    record = np.dtype([("i", "<i4"), ("j", "<i4"), ("v", "<u2", (m, m))])
    blocks = np.fromfile(path, dtype=record, offset=12, count=k)
    order = np.lexsort((blocks["j"], blocks["i"]))
    blocks = blocks[order]
    p = n // m
    indptr = np.zeros(p + 1, dtype=np.int64)
    np.add.at(indptr, blocks["i"] + 1, 1)
    indptr = np.cumsum(indptr)
    data = blocks["v"].astype(np.uint64)
    return n, m, sp.bsr_matrix((data, blocks["j"].astype(np.int64), indptr), shape=(n, n), blocksize=(m, m))


def main():
    a_path, b_path, c_path = sys.argv[1:4]
    t0 = time.perf_counter()
    n, m, a = read_bsr(a_path)
    _, _, b = read_bsr(b_path)
    t1 = time.perf_counter()
    if a.nnz and b.nnz:
        bound = int(a.data.max()) * int(b.data.max()) * n
        assert bound < 2**64, "uint64 could overflow; this anchor is exact only below 2^64"
    c0 = time.process_time()
    c = (a @ b).tobsr(blocksize=(m, m))
    c.sort_indices()
    t2 = time.perf_counter()
    multiply_cpu = time.process_time() - c0
    data = np.minimum(c.data, 2**32 - 1).astype(np.uint32)
    keep = data.reshape(len(data), -1).any(axis=1)
    rows = np.repeat(np.arange(n // m, dtype=np.int32), np.diff(c.indptr))
    record = np.dtype([("i", "<i4"), ("j", "<i4"), ("v", "<u4", (m, m))])
    out = np.empty(int(keep.sum()), dtype=record)
    out["i"] = rows[keep]
    out["j"] = c.indices[keep]
    out["v"] = data[keep]
    with open(c_path, "wb") as f:
        np.array([n, m, len(out)], dtype="<i4").tofile(f)
        out.tofile(f)
    t3 = time.perf_counter()
    print(json.dumps({"read": t1 - t0, "multiply": t2 - t1, "multiply_cpu": multiply_cpu, "write": t3 - t2, "total": t3 - t0, "blocks": len(out)}))


if __name__ == "__main__":
    main()
