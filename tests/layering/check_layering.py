#!/usr/bin/env python3
"""The module layering of src/, checked from the includes (as DBCSR checks its package manifests).

Each folder of src/ is a module; a module may include only the modules below it (ALLOWED), and a
few headers are private to their module. Also checked here, because they are part of the same
contract: the process environment is read in one place (src/settings/settings.cpp), and no source
file of src/ grows past MAX_LINES lines. Prints one line for each violation and exits 1 if any.
"""
import os
import re
import sys

MAX_LINES = 600

# What each module may include besides itself.
ALLOWED = {
    "core": set(),
    "settings": {"core"},
    "comm": {"core", "settings"},
    "io": {"core", "settings", "comm"},
    "operands": {"core"},
    "partition": {"core", "comm", "io", "operands"},
    "kernels": {"core", "operands"},
    "multiply": {"core", "comm", "io", "operands", "partition", "kernels"},
    # Which backends a process multiplies with, for the driver and the Python extension alike.
    "backends": {"core", "settings", "kernels", "multiply"},
    # What a run shows its user: formats the driver's phases and the product's report (multiply/report.hpp).
    "console": {"core", "settings", "multiply"},
    "driver": {"core", "settings", "comm", "io", "operands", "partition", "kernels", "multiply", "backends", "console"},
    # The product inside a Python process (blockmm.multiply): a front end beside the driver.
    "python": {"core", "settings", "comm", "io", "kernels", "multiply", "backends"},
    "tools": {"core", "settings", "comm", "io", "operands"},
}

# Headers that only their own module (or the named folder of it) may include.
PRIVATE = [
    (re.compile(r"^kernels/cuda/"), "kernels/"),          # the cuda backend's insides: kernels only
    (re.compile(r"^kernels/host_operands\.hpp$"), "kernels/"),  # the host backends' operand layout
    (re.compile(r"^kernels/cpu/"), "kernels/"),
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
GETENV = re.compile(r"\b(secure_)?getenv\s*\(")


def main(root):
    src = os.path.join(root, "src")
    problems = []
    for folder, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".hpp", ".cpp", ".cu", ".cuh", ".h")):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, src)
            module = rel.split(os.sep)[0]
            with open(path, encoding="utf-8") as f:
                lines = f.read().split("\n")
            if len(lines) - 1 > MAX_LINES:
                problems.append(f"src/{rel}: {len(lines) - 1} lines, more than {MAX_LINES}")
            for number, line in enumerate(lines, 1):
                if GETENV.search(line) and rel != os.path.join("settings", "settings.cpp") and not line.lstrip().startswith("//"):
                    problems.append(f"src/{rel}:{number}: reads the environment; only src/settings/settings.cpp may")
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1)
                if "/" not in target:
                    continue  # generated headers (build_info.hpp) and same-folder includes
                to = target.split("/")[0]
                if module not in ALLOWED:
                    problems.append(f"src/{rel}: module '{module}' is not in the layering table")
                    break
                if to != module and to not in ALLOWED[module]:
                    problems.append(f"src/{rel}:{number}: {module}/ may not include {target}")
                for pattern, owner in PRIVATE:
                    if pattern.search(target) and not rel.startswith(owner):
                        problems.append(f"src/{rel}:{number}: {target} is private to src/{owner}")
    for p in problems:
        print(p)
    return 1 if problems else 0


def self_test():
    """The checker finds each kind of violation in a small tree made for it, and nothing in a sound one."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        def put(rel, text):
            path = os.path.join(root, "src", rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        put("core/a.hpp", "#pragma once\n")
        put("kernels/b.cpp", '#include "core/a.hpp"\n#include "kernels/cuda/c.cuh"\n')
        put("settings/settings.cpp", "const char* v = std::getenv(name);\n")
        if main(root) != 0:
            print("self-test: a sound tree was refused")
            return 1
        bad = {
            "kernels/d.cpp": '#include "comm/communicator.hpp"\n',
            "driver/e.cpp": '#include "kernels/cuda/cuda_backend.cuh"\n',
            "driver/f.cpp": '#include "kernels/host_operands.hpp"\n',
            "partition/g.cpp": '#include "kernels/backend.hpp"\n',
            "console/j.cpp": '#include "driver/options.hpp"\n',
            "console/k.cpp": '#include "kernels/backend.hpp"\n',
            "io/h.cpp": "const char* v = getenv(\"X\");\n",
            "core/long.hpp": "\n" * (MAX_LINES + 1),
            "newmodule/i.cpp": '#include "core/a.hpp"\n',
        }
        for rel, text in bad.items():
            put(rel, text)
            found = main(root)
            os.remove(os.path.join(root, "src", rel))
            if found == 0:
                print(f"self-test: {rel} was not refused")
                return 1
    print("self-test: every violation refused")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        sys.exit(self_test())
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")))
