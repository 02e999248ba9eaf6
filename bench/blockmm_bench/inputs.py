"""The benchmark inputs: blockmm-gen matrices (values 0..1023, A seed 1, B seed 2), generated once
into --data and reused, and the V cases' B (every block of block-column 0), written here."""
import os
import struct

from blockmm_bench.runner import run_cmd


def splitmix64(seed):
    x = seed & 0xFFFFFFFFFFFFFFFF
    while True:
        x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        yield z ^ (z >> 31)


def write_col0(path, n, m, seed):
    """B with every block of block-column 0, values uniform in [0, 1023] (splitmix64, `seed`)."""
    rnd = splitmix64(seed)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<3i", n, m, n // m))
        for i in range(n // m):
            f.write(struct.pack("<2i", i, 0))
            f.write(struct.pack("<%dH" % (m * m), *[next(rnd) % 1024 for _ in range(m * m)]))
    os.replace(tmp, path)


def case_paths(case, data):
    return os.path.join(data, case.name + ".A.bin"), os.path.join(data, case.name + ".B.bin")


def ensure_inputs(case, data, build, progress, gen_threads):
    a, b = case_paths(case, data)
    todo = [(a, 1)] + ([(b, 2)] if case.shape in ("gen", "skew") else [])
    for path, seed in todo:
        if os.path.exists(path):
            continue
        progress("%s: generating %s (n=%d m=%d k=%d, values 0..1023, seed %d%s)" %
                 (case.name, os.path.basename(path), case.n, case.m, case.k, seed,
                  ", rows power-law" if case.shape == "skew" and seed == 1 else ""))
        cmd = [os.path.join(build, "blockmm-gen"), path, "--n", str(case.n), "--m", str(case.m), "--k", str(case.k),
               "--max-value", "1023", "--seed", str(seed), "-q"]
        if gen_threads:
            cmd += ["--threads", str(gen_threads)]
        if case.shape == "skew" and seed == 1:  # A's rows power-law, B even
            cmd += ["--skew", "1.0"]
        r = run_cmd(cmd, scratch=data)
        if r.rc != 0:
            raise RuntimeError("blockmm-gen failed for %s: %s" % (path, r.tail()))
    if case.shape == "col0" and not os.path.exists(b):
        progress("%s: writing %s (block-column 0 only, %d blocks)" % (case.name, os.path.basename(b), case.p))
        write_col0(b, case.n, case.m, 2)
    return a, b
