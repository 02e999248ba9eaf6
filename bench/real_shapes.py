#!/usr/bin/env python3
"""Real-shape inputs for blockmm's benchmarks (issue 48): the block-sparse products that
finite-element, multigrid and chemistry codes bring, as COL380 binary files (int32 n, m, k; k
records of int32 i, int32 j, m*m uint16 row-major, sorted by (i, j)). numpy only, vectorised:
the full 3-D cases take a few seconds, and --scale makes small ones for tests.

Usage: real_shapes.py CASE[,CASE...|all] OUTDIR [--scale S] [--seed N] [--max-value V]
       real_shapes.py --list
Writes OUTDIR/CASE.A.bin and OUTDIR/CASE.B.bin (the product's left and right operands), each
whole or not at all. Exit status: 0 written; 2 usage (an unknown case, a bad value); 4 the output
could not be written; 5 out of memory. Errors are one line on stderr.

Cases (sizes at --scale 1; --scale multiplies the block-rows, the grid's sides by its cube or
square root, the molecules by it):
  el2    2-D plane-strain elasticity, Q1 quadrilaterals, 2 DOF a node (m 2), 9 blocks a row;
         400 x 390 nodes (n 312 000). The product A.A.
  el3    3-D elasticity, Q1 (trilinear) hexahedra, 3 DOF a node (m 3), 27 blocks a row;
         40 x 40 x 39 nodes (n 187 200, 62 400 block-rows, ~1.6 M blocks). A.A.
  tet    3-D elasticity, P1 tetrahedra (each cube of the same grid cut into 6 along its
         diagonal, Kuhn's triangulation), m 3, 15 blocks a row. A.A.
  el3p   el3's A times its smoothed-aggregation prolongator P (aggregates of 3x3x3 nodes, 6 rigid
         body modes each: 2 block-columns an aggregate; P = (I - w D^-1 A) T, ~9 blocks a row),
         P padded with empty block-columns to n x n as blockmm needs. A.P.
  el3r   R.A with R = P^T (the first 2 * aggregates block-rows hold ~125 blocks each, the rest
         are empty): the restriction half of the Galerkin product R.A.P.
  water  overlap matrix S of liquid water blocked by molecule (23 basis functions a molecule:
         O 2s 2x3p 5d, each H 2s 3p), 1000 molecules in a periodic box at 1 g/cm^3 (n 23 000),
         ~50 blocks a row, ~70 % zeros inside blocks (elements under 10^-3 dropped, as a
         filtered overlap), molecules in random order (an equilibrated box). S.S.
  water16  the same S with values up to 65535 (16-bit).

Values: the float operator (random element stiffness factor in [0.5, 1.5] an element, from
--seed) is taken in absolute value and scaled so that its largest entry is --max-value (default
1023: the benchmarks' 10-bit range; the diagonal blocks hold the largest values, neighbour blocks
mostly tens to hundreds, like an operator assembled with integer coefficients); entries of the
operator that are exactly zero stay zero (P1 tetrahedra's neighbour blocks have some: 17 % of
tet's entries; Q1's blocks are full), other entries are at least 1, and blocks that come out all
zero are left out. No product of these reaches 2^32 - 1 (no saturation): 27 terms of 3 products
of at most 1023^2 each for el3. blockmm multiplies these non-negative values exactly, so the products stay
the shape and the work of the signed ones.
"""
import argparse
import os
import signal
import sys
import tempfile
import time

import numpy as np

EXIT_USAGE, EXIT_OUTPUT, EXIT_MEMORY = 2, 4, 5


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (exit 2), as every blockmm tool."""

    def error(self, message):
        print("real_shapes.py: error: %s (--help for usage)" % message, file=sys.stderr)
        sys.exit(EXIT_USAGE)


# ---------------------------------------------------------------- element matrices (floats)

def isotropic_d(dim, young=1.0, poisson=0.3):
    """Elasticity matrix (Voigt order xx, yy, [zz,] then shears); 2-D is plane strain."""
    lam = young * poisson / ((1 + poisson) * (1 - 2 * poisson))
    mu = young / (2 * (1 + poisson))
    normal = 3 if dim == 3 else 2
    shear = 3 if dim == 3 else 1
    d = np.zeros((normal + shear, normal + shear))
    d[:normal, :normal] = lam
    d[np.arange(normal), np.arange(normal)] += 2 * mu
    d[np.arange(normal, normal + shear), np.arange(normal, normal + shear)] = mu
    return d


def strain_matrix(grads):
    """B (Voigt strains x (nodes * dim)) from shape-function gradients grads[node, axis]."""
    nodes, dim = grads.shape
    if dim == 2:
        b = np.zeros((3, 2 * nodes))
        b[0, 0::2], b[1, 1::2] = grads[:, 0], grads[:, 1]
        b[2, 0::2], b[2, 1::2] = grads[:, 1], grads[:, 0]
        return b
    b = np.zeros((6, 3 * nodes))
    b[0, 0::3], b[1, 1::3], b[2, 2::3] = grads[:, 0], grads[:, 1], grads[:, 2]
    b[3, 1::3], b[3, 2::3] = grads[:, 2], grads[:, 1]  # yz
    b[4, 0::3], b[4, 2::3] = grads[:, 2], grads[:, 0]  # xz
    b[5, 0::3], b[5, 1::3] = grads[:, 1], grads[:, 0]  # xy
    return b


def q1_stiffness(dim):
    """Stiffness of the unit square/cube Q1 element (2^dim nodes at the corners, corner c at
    offset bits of c: axis 0 the most significant), 2^dim-point Gauss rule."""
    corners = np.array([[(c >> (dim - 1 - a)) & 1 for a in range(dim)] for c in range(2 ** dim)], dtype=float)
    g = 0.5 + np.array([-1.0, 1.0]) / (2 * np.sqrt(3.0))
    d = isotropic_d(dim)
    k = np.zeros((dim * len(corners),) * 2)
    for point in corners:  # Gauss points on the same {0,1}^dim pattern
        x = g[point.astype(int)]
        # N_c = prod_a (x_a if c_a else 1 - x_a); dN_c/dx_a = the same with the a factor +-1.
        f = np.where(corners == 1, x, 1 - x)  # [corner, axis]
        s = np.where(corners == 1, 1.0, -1.0)
        grads = np.empty_like(f)
        for a in range(dim):
            grads[:, a] = s[:, a] * np.prod(np.delete(f, a, axis=1), axis=1)
        b = strain_matrix(grads)
        k += b.T @ d @ b * (1.0 / len(corners))
    return corners.astype(int), k


def kuhn_tetrahedra():
    """The 6 tetrahedra of the unit cube around its main diagonal (corner offsets) and each one's
    stiffness (P1: constant strain)."""
    import itertools
    d = isotropic_d(3)
    tets = []
    for perm in itertools.permutations(range(3)):
        v = [np.zeros(3, dtype=int)]
        for axis in perm:
            nxt = v[-1].copy()
            nxt[axis] = 1
            v.append(nxt)
        v = np.array(v)
        jac = (v[1:] - v[0]).T.astype(float)  # columns: edges from v0
        inv = np.linalg.inv(jac)
        grads = np.vstack([-inv.sum(axis=0), inv])  # grad of barycentric coordinates
        b = strain_matrix(grads)
        tets.append((v, b.T @ d @ b * abs(np.linalg.det(jac)) / 6.0))
    return tets


# ---------------------------------------------------------------- assembly on a structured grid

class Grid:
    """Nodes on an (nx, ny[, nz]) grid, numbered row-major; the 3^dim neighbour offsets in
    lexicographic order, so that a node's neighbours come out in ascending node number."""

    def __init__(self, dims):
        self.dims = tuple(int(x) for x in dims)
        self.dim = len(self.dims)
        self.nodes = int(np.prod(self.dims))
        self.offsets = np.array(np.meshgrid(*[[-1, 0, 1]] * self.dim, indexing="ij")).reshape(self.dim, -1).T
        self.strides = np.array([int(np.prod(self.dims[a + 1:])) for a in range(self.dim)])

    def offset_index(self, delta):
        return int(sum((int(x) + 1) * 3 ** (self.dim - 1 - a) for a, x in enumerate(delta)))

    def coords(self):
        return np.array(np.meshgrid(*[np.arange(s) for s in self.dims], indexing="ij")).reshape(self.dim, -1).T

    def neighbours(self):
        """(nodes, 3^dim) neighbour numbers and whether each lies in the grid."""
        c = self.coords()
        nb = c[:, None, :] + self.offsets[None, :, :]
        inside = np.all((nb >= 0) & (nb < np.array(self.dims)), axis=2)
        return (nb * self.strides).sum(axis=2), inside


def assemble(grid, elements, m, factor):
    """Stencil form of the assembled operator: blocks[node, offset, m, m] (floats) from element
    matrices [(corner offsets, matrix)], each element's matrix times its factor[cell]."""
    cells = tuple(s - 1 for s in grid.dims)
    blocks = np.zeros(grid.dims + (3 ** grid.dim, m, m))
    used = np.zeros(3 ** grid.dim, dtype=bool)
    for corners, k in elements:
        for a, ca in enumerate(corners):
            for b, cb in enumerate(corners):
                o = grid.offset_index(cb - ca)
                used[o] = True
                where = tuple(slice(int(x), int(x) + s) for x, s in zip(ca, cells)) + (o,)
                blocks[where] += factor[..., None, None] * k[m * a:m * a + m, m * b:m * b + m]
    return blocks.reshape(grid.nodes, 3 ** grid.dim, m, m), used


def to_uint16(values, max_value, scale=None):
    """|values| scaled so the largest is max_value (or by `scale`); non-zeros at least 1."""
    mag = np.abs(values)
    if scale is None:
        top = mag.max()
        scale = max_value / top if top > 0 else 1.0
    out = np.rint(mag * scale)
    np.maximum(out, mag > 0, out=out)  # a non-zero entry is at least 1
    np.minimum(out, max_value, out=out)
    return out.astype(np.uint16)


def stencil_records(grid, blocks, used, max_value):
    """Records (i, j, values) of a stencil operator (float blocks[node, offset]): every in-grid
    neighbour of a used offset whose block is not all zero as uint16, sorted by (i, j)."""
    nb, inside = grid.neighbours()
    keep = inside & used[None, :]
    rows = np.broadcast_to(np.arange(grid.nodes)[:, None], nb.shape)[keep]
    vals = to_uint16(blocks[keep], max_value)
    nonzero = vals.reshape(len(vals), -1).any(axis=1)
    return rows[nonzero], nb[keep][nonzero], vals[nonzero]


def element_factor(grid, rng):
    return rng.uniform(0.5, 1.5, size=tuple(s - 1 for s in grid.dims))


def fe_operator(kind, scale, rng):
    """(grid, float stencil blocks, used offsets) of an elasticity operator."""
    if kind == "el2":
        grid = Grid(scaled_dims((400, 390), scale))
        corners, k = q1_stiffness(2)
        elements = [(corners, k)]
        m = 2
    elif kind == "el3":
        grid = Grid(scaled_dims((40, 40, 39), scale))
        corners, k = q1_stiffness(3)
        elements = [(corners, k)]
        m = 3
    else:  # tet
        grid = Grid(scaled_dims((40, 40, 39), scale))
        elements = kuhn_tetrahedra()
        m = 3
    blocks, used = assemble(grid, elements, m, element_factor(grid, rng))
    return grid, blocks, used, m


def scaled_dims(dims, scale):
    f = scale ** (1.0 / len(dims))
    return tuple(max(2, int(round(d * f))) for d in dims)


# ---------------------------------------------------------------- smoothed aggregation

def prolongator(grid, blocks, used):
    """P = (I - w D^-1 A) T of 3x3x3-node aggregates with the 6 rigid-body modes: for node i a
    (nodes, 8, 3, 6) array over the (at most 2 a side) aggregates its neighbours touch, their
    aggregate numbers and which slots hold anything. w = 4/3 / rho(D^-1 A) (power iteration)."""
    dims = np.array(grid.dims)
    c = grid.coords()
    adims = (dims + 2) // 3
    agg = c // 3
    agg_id = (agg * np.array([adims[1] * adims[2], adims[2], 1])).sum(axis=1)
    centre = np.zeros((int(np.prod(adims)), 3))
    np.add.at(centre, agg_id, c.astype(float))
    centre /= np.bincount(agg_id, minlength=len(centre))[:, None]
    r = c - centre[agg_id]
    t = np.zeros((grid.nodes, 3, 6))
    t[:, [0, 1, 2], [0, 1, 2]] = 1.0
    # rotations: u = w x r, columns 3..5 the axes x, y, z
    t[:, 1, 3], t[:, 2, 3] = -r[:, 2], r[:, 1]
    t[:, 0, 4], t[:, 2, 4] = r[:, 2], -r[:, 0]
    t[:, 0, 5], t[:, 1, 5] = -r[:, 1], r[:, 0]

    nb, inside = grid.neighbours()
    nb = np.where(inside & used[None, :], nb, np.arange(grid.nodes)[:, None])
    live = inside & used[None, :]
    dinv = np.linalg.inv(blocks[:, grid.offset_index((0, 0, 0))])

    live_offsets = [o for o in range(len(grid.offsets)) if used[o]]

    def apply(x):  # D^-1 A x for x of shape (nodes, 3)
        y = np.zeros_like(x)
        for o in live_offsets:
            xo = np.where(live[:, o, None], x[nb[:, o]], 0.0)
            y += (blocks[:, o] * xo[:, None, :]).sum(axis=2)
        return (dinv * y[:, None, :]).sum(axis=2)

    x = np.random.default_rng(0).uniform(size=(grid.nodes, 3))
    rho = 1.0
    for _ in range(5):
        y = apply(x)
        rho = np.linalg.norm(y) / np.linalg.norm(x)
        x = y / np.linalg.norm(y)
    omega = 4.0 / 3.0 / rho

    # The aggregates a node's neighbours touch: per axis base (the lower) + bit.
    base = np.maximum(c - 1, 0) // 3
    q = np.zeros((grid.nodes, 8, 3, 6))
    rows = np.arange(grid.nodes)
    for o in range(len(grid.offsets)):
        if not used[o]:
            continue
        k = nb[:, o]
        bits = agg[k] - base  # 0 or 1 per axis
        slot = bits[:, 0] * 4 + bits[:, 1] * 2 + bits[:, 2]
        q[rows, slot] += (blocks[:, o, :, :, None] * t[k][:, None, :, :]).sum(axis=2)
    p = -omega * (dinv[:, None, :, :, None] * q[:, :, None, :, :]).sum(axis=3)
    own_bits = agg - base
    p[rows, own_bits[:, 0] * 4 + own_bits[:, 1] * 2 + own_bits[:, 2]] += t
    slot_bits = np.array([[(s >> 2) & 1, (s >> 1) & 1, s & 1] for s in range(8)])
    slot_agg = base[:, None, :] + slot_bits[None, :, :]
    valid = np.all(slot_agg < adims, axis=2) & (np.abs(p).reshape(grid.nodes, 8, -1).max(axis=2) > 0)
    slot_id = (slot_agg * np.array([adims[1] * adims[2], adims[2], 1])).sum(axis=2)
    return p, slot_id, valid


def prolongator_records(p, slot_id, valid, max_value):
    """P's records, aggregate a's 6 columns as block-columns 2a and 2a + 1, sorted by (i, j)."""
    nodes = p.shape[0]
    halves = np.stack([p[..., :3], p[..., 3:]], axis=2)  # (nodes, 8, 2, 3, 3)
    cols = 2 * slot_id[:, :, None] + np.arange(2)[None, None, :]
    keep = np.broadcast_to(valid[:, :, None], cols.shape)
    rows = np.broadcast_to(np.arange(nodes)[:, None, None], cols.shape)[keep]
    vals = to_uint16(halves[keep], max_value)
    nonzero = vals.reshape(len(vals), -1).any(axis=1)
    return rows[nonzero], cols[keep][nonzero], vals[nonzero]


# ---------------------------------------------------------------- water overlap

# Basis functions of one water molecule: (centre 0 = O, 1 = H1, 2 = H2; Gaussian width in
# Angstrom; angular type: 0 s, 1..3 p along x..z, 4..8 d).
WATER_BASIS = ([(0, w, 0) for w in (0.45, 2.1)] + [(0, w, a) for w in (0.7, 2.2) for a in (1, 2, 3)] +
               [(0, 1.5, a) for a in range(4, 9)] +
               [(h, w, a) for h in (1, 2) for w, a in ((0.5, 0), (1.9, 0), (1.4, 1), (1.4, 2), (1.4, 3))])
FILTER = 1e-3
BOX_SPACING = 3.104  # Angstrom a molecule at 1 g/cm^3
CUTOFF = 7.05        # molecules further apart share no element above the filter


def angular(kind, u):
    """The angular factor of a function of `kind` along unit vectors u (..., 3)."""
    if kind == 0:
        return np.ones(u.shape[:-1])
    if kind <= 3:
        return np.abs(u[..., kind - 1])
    x, y, z = u[..., 0], u[..., 1], u[..., 2]
    return np.abs([x * y, y * z, x * z, (x * x - y * y) / 2, (3 * z * z - 1) / 2][kind - 4]) * 1.7


def water_records(scale, rng, max_value):
    count = max(2, int(round(1000 * scale)))
    side = count ** (1.0 / 3.0) * BOX_SPACING
    # Jittered simple-cubic start, then every molecule moved and turned at random; the order of
    # the molecules shuffled (an equilibrated box keeps no spatial order).
    per_side = int(np.ceil(count ** (1.0 / 3.0)))
    lattice = np.array(np.meshgrid(*[np.arange(per_side)] * 3, indexing="ij")).reshape(3, -1).T[:count]
    pos = (lattice + 0.5) * (side / per_side) + rng.uniform(-0.6, 0.6, size=(count, 3))
    pos = pos[rng.permutation(count)]
    # H positions: 0.96 A from O at 104.5 degrees, in a random orientation.
    q, _ = np.linalg.qr(rng.normal(size=(count, 3, 3)))
    half = np.radians(104.5) / 2
    local = np.array([[0, 0, 0], [0.96 * np.sin(half), 0, 0.96 * np.cos(half)],
                      [-0.96 * np.sin(half), 0, 0.96 * np.cos(half)]])
    atoms = pos[:, None, :] + np.einsum("nij,aj->nai", q, local)  # (count, 3 atoms, 3)
    basis = np.array(WATER_BASIS)
    centre, width, kind = basis[:, 0].astype(int), basis[:, 1], basis[:, 2].astype(int)
    m = len(basis)

    pairs_i, pairs_j = [], []
    for start in range(0, count, 512):
        d = pos[start:start + 512, None, :] - pos[None, :, :]
        d -= side * np.rint(d / side)
        near = np.nonzero((d * d).sum(axis=2) < CUTOFF * CUTOFF)
        pairs_i.append(near[0] + start)
        pairs_j.append(near[1])
    pi, pj = np.concatenate(pairs_i), np.concatenate(pairs_j)
    order = np.lexsort((pj, pi))
    pi, pj = pi[order], pj[order]

    wsum = width[:, None] ** 2 + width[None, :] ** 2
    same_centre_norm = (2 * width[:, None] * width[None, :] / wsum) ** 1.5
    rows, cols, vals = [], [], []
    for start in range(0, len(pi), 4096):
        i, j = pi[start:start + 4096], pj[start:start + 4096]
        shift = pos[j] - pos[i]
        shift = side * np.rint(shift / side)
        a = atoms[i][:, centre]                # (b, m, 3)
        b = atoms[j][:, centre] - shift[:, None, :]
        r = b[:, None, :, :] - a[:, :, None, :]  # (b, m, m, 3)
        dist2 = (r * r).sum(axis=3)
        u = r / np.sqrt(np.maximum(dist2, 1e-30))[..., None]
        s = np.exp(-dist2 / wsum) * same_centre_norm
        far = dist2 > 1e-12
        ang = np.ones_like(s)
        for kk in np.unique(kind):
            ang[:, kind == kk, :] *= np.where(far[:, kind == kk, :], angular(kk, u[:, kind == kk, :, :]), 1.0)
            ang[:, :, kind == kk] *= np.where(far[:, :, kind == kk], angular(kk, u[:, :, kind == kk, :]), 1.0)
        # Functions on one centre: orthogonal unless of the same angular type.
        same = ~far & (kind[:, None] != kind[None, :])[None, :, :]
        s = np.where(same, 0.0, s * ang)
        s = np.where(s >= FILTER, np.minimum(s, 1.0), 0.0)
        v = np.where(s > 0, np.maximum(np.rint(s * max_value), 1), 0).astype(np.uint16)
        keep = v.reshape(len(i), -1).any(axis=1)
        rows.append(i[keep])
        cols.append(j[keep])
        vals.append(v[keep])
    return count * m, m, np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)


# ---------------------------------------------------------------- cases and files

def fe_case(kind, scale, rng, max_value):
    grid, blocks, used, m = fe_operator(kind, scale, rng)
    r, c, v = stencil_records(grid, blocks, used, max_value)
    return grid, blocks, used, m, (r, c, v)


def make_case(name, scale, seed, max_value):
    """{"A": records, "B": records} and (n, m) of a case; records are (rows, cols, values)."""
    rng = np.random.default_rng(seed)
    if name in ("el2", "el3", "tet"):
        grid, _, _, m, a = fe_case(name, scale, rng, max_value)
        return grid.nodes * m, m, a, a
    if name in ("el3p", "el3r"):
        grid, blocks, used, m, a = fe_case("el3", scale, rng, max_value)
        p = prolongator_records(*prolongator(grid, blocks, used), max_value)
        if name == "el3p":
            return grid.nodes * m, m, a, p
        order = np.argsort(p[1], kind="stable")  # R = P^T, sorted by its rows (P's columns)
        r = (p[1][order], p[0][order], np.ascontiguousarray(np.swapaxes(p[2][order], 1, 2)))
        return grid.nodes * m, m, r, a
    if name in ("water", "water16"):
        n, m, r, c, v = water_records(scale, rng, max_value)
        return n, m, (r, c, v), (r, c, v)
    raise ValueError("unknown case %r" % name)


CASES = ("el2", "el3", "tet", "el3p", "el3r", "water", "water16")


def default_max_value(name):
    return 65535 if name == "water16" else 1023


def write_col380(path, n, m, records):
    """The file at `path`, whole or not at all (a temporary beside it, renamed)."""
    rows, cols, vals = records
    record = np.dtype([("i", "<i4"), ("j", "<i4"), ("v", "<u2", (m, m))])
    out = np.empty(len(rows), dtype=record)
    out["i"], out["j"], out["v"] = rows, cols, vals
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            np.array([n, m, len(out)], dtype="<i4").tofile(f)
            out.tofile(f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def summary(name, n, m, a, b, seconds):
    def stats(rec):
        rows, _, vals = rec
        per_row = len(rows) / max(1, len(np.unique(rows)))
        zeros = 1.0 - np.count_nonzero(vals) / max(1, vals.size)
        return "%d blocks, %.1f a non-empty row, %.0f%% zeros in blocks, max %d" % (
            len(rows), per_row, 100 * zeros, int(vals.max()) if len(vals) else 0)
    return "%s: n %d, m %d; A %s; B %s (%.1f s)" % (name, n, m, stats(a), stats(b), seconds)


def parse(argv):
    ap = OneLineParser(prog="real_shapes.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Cases: " + ", ".join(CASES) + " (details: --list)")
    ap.add_argument("cases", nargs="?", help="a case, a comma list, or all")
    ap.add_argument("outdir", nargs="?", help="folder for CASE.A.bin and CASE.B.bin")
    ap.add_argument("--scale", type=float, default=1.0, help="block-rows relative to the full size (default 1)")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    ap.add_argument("--max-value", type=int, help="largest value (default 1023; water16: 65535)")
    ap.add_argument("--list", action="store_true", help="describe the cases and exit")
    ap.add_argument("-q", "--quiet", action="store_true", help="no summary lines")
    args = ap.parse_args(argv)
    if args.list:
        return args
    if not args.cases or not args.outdir:
        ap.error("CASE and OUTDIR are required")
    if not (args.scale > 0 and args.scale <= 64):
        ap.error("--scale must be in (0, 64], not %r" % args.scale)
    if args.max_value is not None and not 1 <= args.max_value <= 65535:
        ap.error("--max-value must be in [1, 65535], not %d" % args.max_value)
    if not 0 <= args.seed < 2 ** 63:
        ap.error("--seed must be in [0, 2^63), not %d" % args.seed)
    names = list(CASES) if args.cases == "all" else [c for c in args.cases.split(",") if c]
    for c in names:
        if c not in CASES:
            ap.error("unknown case %r (known: %s, all)" % (c, ", ".join(CASES)))
    args.names = names
    return args


def main(argv=None):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # --list | head
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.list:
        print(__doc__[__doc__.index("Cases ("):__doc__.index("Values:")].rstrip())
        return 0
    if not os.path.isdir(args.outdir):
        print("real_shapes.py: error: %s: not a folder" % args.outdir, file=sys.stderr)
        return EXIT_OUTPUT
    for name in args.names:
        start = time.perf_counter()
        max_value = args.max_value if args.max_value is not None else default_max_value(name)
        try:
            n, m, a, b = make_case(name, args.scale, args.seed, max_value)
        except MemoryError:
            print("real_shapes.py: error: %s: out of memory at --scale %g" % (name, args.scale), file=sys.stderr)
            return EXIT_MEMORY
        for side, rec in (("A", a), ("B", b)):
            path = os.path.join(args.outdir, "%s.%s.bin" % (name, side))
            try:
                write_col380(path, n, m, rec)
            except OSError as e:
                print("real_shapes.py: error: %s: %s" % (path, e.strerror or e), file=sys.stderr)
                return EXIT_OUTPUT
        if not args.quiet:
            print(summary(name, n, m, a, b, time.perf_counter() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
