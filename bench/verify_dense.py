#!/usr/bin/env python3
"""Independent exact check of a blockmm output on a GPU: expand A and B into dense float64
matrices with CuPy, multiply with cuBLAS (exact here: every sum stays below 2^53), saturate,
and compare every block of C, plus the block count and the (i, j) order.

Usage: verify_dense.py A.bin B.bin C.bin    (exit 0 equal, 1 different)
"""
import sys

import os

import numpy as np

if os.environ.get("BLOCKMM_VERIFY_NUMPY") == "1":  # small local checks without a GPU
    cp = np
    cp.asarray = np.asarray
else:
    import cupy as cp


def read_blocks(path, value_type):
    header = np.fromfile(path, dtype="<i4", count=3)
    n, m, k = (int(x) for x in header)
    record = np.dtype([("i", "<i4"), ("j", "<i4"), ("v", value_type, (m, m))])
    blocks = np.memmap(path, dtype=record, mode="r", offset=12, shape=(k,))
    return n, m, blocks


def dense(n, m, blocks, chunk=1 << 20):
    out = cp.zeros((n, n), dtype=cp.float64)
    view = out.reshape(n // m, m, n // m, m)
    for start in range(0, len(blocks), chunk):
        part = blocks[start:start + chunk]
        i = cp.asarray(part["i"])
        j = cp.asarray(part["j"])
        v = cp.asarray(part["v"]).astype(cp.float64)
        # view[i, :, j, :] = v  (advanced indices on axes 0 and 2)
        view[i[:, None, None], cp.arange(m)[None, :, None], j[:, None, None], cp.arange(m)[None, None, :]] = v
    return out


def main():
    a_path, b_path, c_path = sys.argv[1:4]
    n, m, a = read_blocks(a_path, "<u2")
    _, _, b = read_blocks(b_path, "<u2")
    n_c, m_c, c = read_blocks(c_path, "<u4")
    if (n_c, m_c) != (n, m):
        print(f"shape differs: C has n={n_c} m={m_c}, inputs n={n} m={m}")
        return 1
    product = dense(n, m, a) @ dense(n, m, b)
    cp.minimum(product, 4294967295.0, out=product)
    p = n // m
    blocks = product.reshape(p, m, p, m).transpose(0, 2, 1, 3)  # [i, j, r, c]
    nonzero = int(cp.count_nonzero(blocks.reshape(p, p, m * m).max(axis=2)))
    if nonzero != len(c):
        print(f"block count differs: dense product has {nonzero} non-zero blocks, C has {len(c)}")
        return 1
    chunk = 1 << 22
    last = (-1, -1)
    for start in range(0, len(c), chunk):
        part = c[start:start + chunk]
        i = cp.asarray(part["i"]).astype(cp.int64)
        j = cp.asarray(part["j"]).astype(cp.int64)
        key = i * p + j
        if start > 0 and int(key[0]) <= last[0] * p + last[1]:
            print(f"records not sorted at {start}")
            return 1
        if len(key) > 1 and not bool(cp.all(key[1:] > key[:-1])):
            print(f"records not sorted (or repeated) within records {start}..{start + len(part)}")
            return 1
        expected = blocks[i, j].astype(cp.uint64)
        got = cp.asarray(part["v"]).astype(cp.uint64)
        bad = cp.nonzero(cp.any((expected != got).reshape(len(part), -1), axis=1))[0]
        if len(bad) > 0:
            q = int(bad[0])
            print(f"block ({int(i[q])}, {int(j[q])}) differs (record {start + q})")
            return 1
        last = (int(i[-1]), int(j[-1]))
    print(f"OK: {len(c)} blocks equal the dense float64 product (n={n}, m={m})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
