"""The benchmark cases: bench/cases.sh (shared with the job scripts) read as data, and the
expected work and output size of each."""
import dataclasses
import math
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass(frozen=True)
class Case:
    """A case of bench/cases.sh: order n, block order m, k blocks of A; shape "gen" (B is a
    blockmm-gen matrix of k blocks too), "skew" (the same, A's block-rows power-law: blockmm-gen
    --skew 1.0), "col0" (B is every block of block-column 0) or "real" (both written by
    bench/real_shapes.py: its case `generator` at `scale`, with the counts it gives)."""
    name: str
    n: int
    m: int
    k: int
    group: str  # small, full, gpu, real or real-small
    shape: str = "gen"
    generator: str = ""
    scale: float = 1.0
    real_k_b: int = 0
    real_products: int = 0
    real_c_blocks: int = 0

    @property
    def p(self):
        return self.n // self.m

    @property
    def k_b(self):
        if self.shape == "real":
            return self.real_k_b
        return self.p if self.shape == "col0" else self.k

    @property
    def small(self):
        return self.name.startswith("S")

    def density(self):
        return self.k / float(self.p) ** 2

    def estimate(self):
        """(block products, output bytes) expected for uniform random inputs."""
        p, m = float(self.p), self.m
        if self.shape == "real":
            return float(self.real_products), 12 + self.real_c_blocks * (8 + 4 * m * m)
        products = self.k * self.k_b / p
        if self.shape == "col0":
            c_blocks = p * (1 - math.exp(-self.k / p))
        else:
            c_blocks = p * p * (1 - math.exp(-products / (p * p)))
        return products, 12 + c_blocks * (8 + 4 * m * m)

    def estimated_macs(self):
        return self.estimate()[0] * self.m ** 3


def load_cases():
    script = ('source bench/cases.sh; for v in BLOCKMM_CASES BLOCKMM_SMALL_CASES BLOCKMM_SPECIAL_CASES '
              'BLOCKMM_SMALL_SPECIAL_CASES BLOCKMM_GPU_CASES BLOCKMM_REAL_CASES BLOCKMM_SMALL_REAL_CASES; '
              'do echo "@$v"; printf "%s\\n" "${!v-}"; done')
    out = subprocess.run(["bash", "-c", script], cwd=ROOT, stdout=subprocess.PIPE, check=True).stdout.decode()
    sets = {"full": [], "small": [], "gpu": [], "real": [], "real-small": []}
    var = None
    for line in out.splitlines():
        if line.startswith("@"):
            var = line[1:]
            continue
        f = line.split()
        if not f or f[0].startswith("#"):
            continue
        if "REAL" in var:
            group = "real-small" if "SMALL" in var else "real"
            sets[group].append(Case(f[0], int(f[1]), int(f[2]), int(f[3]), group, "real", generator=f[7],
                                    scale=float(f[8]), real_k_b=int(f[4]), real_products=int(f[5]),
                                    real_c_blocks=int(f[6])))
            continue
        group = "small" if "SMALL" in var else "gpu" if "GPU" in var else "full"
        shape = f[4] if "SPECIAL" in var and len(f) > 4 else "gen"
        sets[group].append(Case(f[0], int(f[1]), int(f[2]), int(f[3]), group, shape))
    return sets


def select_cases(spec, sets):
    by_name = {}
    for group in ("small", "full", "gpu", "real", "real-small"):
        for c in sets[group]:
            by_name.setdefault(c.name, c)
    chosen = []
    for token in [t.strip() for t in spec.split(",") if t.strip()]:
        if token in sets:
            chosen += sets[token]
        elif token in by_name:
            chosen.append(by_name[token])
        else:
            raise SystemExit("bench/run: unknown case %r (known: small, full, gpu, real, real-small, %s)" %
                             (token, ", ".join(by_name)))
    seen, unique = set(), []
    for c in chosen:
        if c.name not in seen:
            seen.add(c.name)
            unique.append(c)
    return unique
