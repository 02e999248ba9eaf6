"""The benchmark inputs: blockmm-gen matrices (values 0..1023, A seed 1, B seed 2), generated once
into --data and reused, the V cases' B (every block of block-column 0), written here, and the
real shapes, written by bench/real_shapes.py (under a python with numpy) into --data/real-<scale>."""
import os
import struct

from blockmm_bench.runner import ROOT, run_cmd


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
    if case.shape == "real":
        folder = os.path.join(data, "real-%g" % case.scale)
        return (os.path.join(folder, case.generator + ".A.bin"), os.path.join(folder, case.generator + ".B.bin"))
    return os.path.join(data, case.name + ".A.bin"), os.path.join(data, case.name + ".B.bin")


def ensure_real_inputs(case, data, python, progress):
    """bench/real_shapes.py's case at the case's scale (seed 1), once."""
    a, b = case_paths(case, data)
    if os.path.exists(a) and os.path.exists(b):
        return a, b
    if not python:
        raise RuntimeError("%s: the real shapes need a python3 with numpy (none found; set BLOCKMM_PYTHON)" % case.name)
    os.makedirs(os.path.dirname(a), exist_ok=True)
    progress("%s: generating %s at scale %g (bench/real_shapes.py)" % (case.name, case.generator, case.scale))
    r = run_cmd([python, os.path.join(ROOT, "bench", "real_shapes.py"), case.generator, os.path.dirname(a),
                 "--scale", "%g" % case.scale, "-q"], scratch=data)
    if r.rc != 0:
        raise RuntimeError("real_shapes.py failed for %s: %s" % (case.name, r.tail()))
    return a, b


def ensure_inputs(case, data, build, progress, gen_threads, python=None):
    if case.shape == "real":
        return ensure_real_inputs(case, data, python, progress)
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
