#!/usr/bin/env python3
"""make_input.py PATH N M K SEED: a COL380 input of K distinct random blocks of an N x N matrix of
M x M blocks, indices from a pool of about sqrt(K) + 2 block indices shared by every seed (so that
A x B has products), random non-zero uint16 values. For bench/memory/huge_n.sh."""
import random
import struct
import sys

path, n, m, k, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(seed)
p = n // m
pool = sorted(random.Random(7).sample(range(p), min(p, int(k ** 0.5) + 2)))
seen, blocks = set(), []
while len(blocks) < k:
    ij = (rng.choice(pool), rng.choice(pool))
    if ij not in seen:
        seen.add(ij)
        blocks.append(ij)
with open(path, "wb") as f:
    f.write(struct.pack("<iii", n, m, k))
    for i, j in blocks:
        f.write(struct.pack("<ii", i, j))
        f.write(struct.pack("<%dH" % (m * m), *[rng.randrange(1, 65536) for _ in range(m * m)]))
