#!/usr/bin/python3
# Writes the seed corpus of the fuzz targets (tests/e2e/fuzz): small COL380 binary files and HDF5 BSR
# files, valid and not, into OUT/binary and OUT/hdf5. Needs numpy and h5py (Debian's python3-h5py).
#   /usr/bin/python3 fuzz/make_seeds.py fuzz/corpus
# fuzz/corpus/hdf5/blockmm_writer_n8_m2.h5 comes from blockmm's own writer:
#   blockmm-convert fuzz/corpus/binary/valid_n8_m2 fuzz/corpus/hdf5/blockmm_writer_n8_m2.h5
# fuzz/corpus/hdf5/stored_past_2_64.h5 is a reproducer CI's smoke run found (2026-11-26): /indices
# at an offset whose end, past 2^64, the reader's error message once converted to an integer (UB).
import struct, random, os, sys
import numpy as np
import h5py
out = sys.argv[1]
random.seed(7)
B = os.path.join(out, "binary"); H = os.path.join(out, "hdf5")
os.makedirs(B, exist_ok=True); os.makedirs(H, exist_ok=True)

def binfile(name, n, m, recs, k=None):
    data = struct.pack("<iii", n, m, len(recs) if k is None else k)
    for i, j, vals in recs:
        data += struct.pack("<ii", i, j) + struct.pack("<%dH" % (m*m), *vals)
    open(os.path.join(B, name), "wb").write(data)

def rnd(m, hi=1023): return [random.randint(0, hi) for _ in range(m*m)]
binfile("valid_n8_m2", 8, 2, [(0,0,rnd(2)),(3,1,rnd(2)),(1,2,rnd(2)),(2,3,[65535]*4)])
binfile("valid_n12_m4_shuffled", 12, 4, [(2,1,rnd(4)),(0,0,rnd(4)),(1,2,rnd(4)),(0,2,[0]*16)])
binfile("valid_m1", 5, 1, [(4,0,[7]),(0,4,[65535]),(2,2,[1])])
binfile("valid_m3_odd", 9, 3, [(1,1,rnd(3)),(2,0,rnd(3))])
binfile("valid_empty", 16, 8, [])
binfile("dup", 8, 2, [(1,1,rnd(2)),(0,1,rnd(2)),(1,1,rnd(2))])
binfile("bad_index", 8, 2, [(0,0,rnd(2)),(0,4,rnd(2))])
binfile("negative_index", 8, 2, [(-1,0,rnd(2))])
binfile("huge_k", 32768, 4, [], k=2**31-1)
binfile("huge_m", 2**30, 2**15, [], k=3)
open(os.path.join(B, "truncated"), "wb").write(struct.pack("<iii", 8, 2, 2) + struct.pack("<ii", 0, 0) + b"\x01\x00" * 3)

def bsr(name, n, m, rows, dtype="u2", fmt="blockmm-bsr", fixed_str=True, attr_dtype="i8", version=1,
        indices_dtype="i4", chunked=False, compress=False, nnzb=None, indptr=None, earliest=False):
    p = n // m
    indptr_ = [0]; idx = []; data = []
    for i in range(p):
        cols = rows.get(i, [])
        for j in cols:
            idx.append(j); data.append(np.array(rnd(m), dtype=dtype).reshape(m, m))
        indptr_.append(len(idx))
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_EARLIEST if earliest else h5py.h5f.LIBVER_LATEST, h5py.h5f.LIBVER_LATEST)
    fid = h5py.h5f.create(os.path.join(H, name).encode(), h5py.h5f.ACC_TRUNC, fapl=fapl)
    with h5py.File(fid) as f:
        f.attrs["format"] = np.bytes_(fmt) if fixed_str else fmt
        f.attrs.create("version", version, dtype=attr_dtype)
        f.attrs.create("n", n, dtype=attr_dtype)
        f.attrs.create("m", m, dtype=attr_dtype)
        f.attrs.create("nnzb", len(idx) if nnzb is None else nnzb, dtype=attr_dtype)
        kw = {}
        if chunked: kw["chunks"] = True
        if compress: kw["compression"] = "gzip"
        f.create_dataset("indptr", data=np.array(indptr if indptr is not None else indptr_, dtype="i8"), **kw)
        f.create_dataset("indices", data=np.array(idx, dtype=indices_dtype), **kw)
        f.create_dataset("data", data=np.array(data, dtype=dtype).reshape(len(idx), m, m), **kw)

bsr("valid_n8_m2_vlenstr_earliest.h5", 8, 2, {0: [0, 3], 1: [2], 3: [1]}, fixed_str=False, earliest=True)
bsr("valid_n8_m2.h5", 8, 2, {0: [0, 3], 1: [2], 3: [1]})
bsr("valid_m1_fixedstr_i32attrs.h5", 5, 1, {0: [4], 2: [2], 4: [0]}, fixed_str=True, attr_dtype="i4")
bsr("valid_m3_i64indices.h5", 9, 3, {1: [1], 2: [0, 2]}, indices_dtype="i8")
bsr("valid_empty.h5", 16, 8, {})
bsr("chunked_gzip.h5", 12, 4, {0: [0, 2], 2: [1]}, chunked=True, compress=True)
bsr("unsorted_cols.h5", 8, 2, {0: [3, 1]})
bsr("product_u4.h5", 8, 2, {1: [1]}, dtype="u4")
bsr("bad_indptr.h5", 8, 2, {0: [0, 1], 2: [1]}, indptr=[0, 2, 1, 3, 3])
