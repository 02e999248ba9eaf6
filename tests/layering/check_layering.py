#!/usr/bin/env python3
"""The module layering of src/, checked from the includes (as DBCSR checks its package manifests).

Each folder of src/ is a module; a module may include only the modules below it (ALLOWED, which
lists only the arrows that exist: an arrow no include uses is a violation too), and a few headers
are private to their module. Also checked here, because they are part of the same contract: the
process environment is read in one place (src/settings/settings.cpp), no source file of src/ grows
past MAX_LINES lines and no function past MAX_FUNCTION_LINES (but those LONG_FUNCTIONS justifies,
each within its own bound). Prints one line for each violation and exits 1 if any.
"""
import os
import re
import sys

MAX_LINES = 600
MAX_FUNCTION_LINES = 120

# What each module includes besides itself: the arrows of the layering, and only those.
ALLOWED = {
    "core": set(),
    "settings": {"core"},
    "comm": {"core", "settings"},
    "io": {"core", "comm"},
    "operands": {"core"},
    "partition": {"core", "comm", "io", "operands"},
    "kernels": {"core", "operands"},
    "multiply": {"core", "comm", "io", "partition", "kernels"},
    # Which backends a process multiplies with, for the driver and the Python extension alike.
    "backends": {"core", "settings", "kernels", "multiply"},
    # What a run shows its user: formats the driver's phases and the product's report (multiply/report.hpp).
    "console": {"core", "settings", "multiply"},
    "driver": {"core", "settings", "comm", "io", "kernels", "multiply", "backends", "console"},
    # The product inside a Python process (blockmm.multiply): a front end beside the driver.
    "python": {"core", "settings", "comm", "io", "kernels", "multiply", "backends"},
    "tools": {"core", "settings", "comm", "io"},
}

# Functions longer than MAX_FUNCTION_LINES, each with why it stays whole and the lines it may take.
LONG_FUNCTIONS = {
    ("kernels/cuda/dense_numeric.cu", "numeric_dense"): (
        210, "one pass over a row tile's chunks whose device buffers, streams and cuBLAS calls share their lifetimes"),
    ("kernels/cuda/device_symbolic.cu", "device_symbolic"): (
        195, "the batches of one device pass, each kernel's scratch sized from the one before"),
    ("kernels/cuda/device_build.cu", "build_on_device"): (
        145, "the steps of one device build on one stream, whose arrays each step hands to the next"),
    ("driver/options.cpp", "parse_options"): (
        140, "the CLI11 declarations of every option, then their values read in order (docs/running.md's table)"),
}

# Headers that only their own module (or the named folder of it) may include.
PRIVATE = [
    (re.compile(r"^kernels/cuda/"), "kernels/"),          # the cuda backend's insides: kernels only
    (re.compile(r"^kernels/host_operands\.hpp$"), "kernels/"),  # the host backends' operand layout
    (re.compile(r"^kernels/cpu/"), "kernels/"),
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
GETENV = re.compile(r"\b(secure_)?getenv\s*\(")


def code_only(text):
    """The text with comments, string and character literals and preprocessor lines blanked,
    its newlines kept (so that line numbers hold)."""
    out, i, n = [], 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        raw = re.match(r'R"([^(\s]*)\(', text[i:i + 20]) if c == "R" and (i == 0 or not text[i - 1].isalnum()) else None
        if raw:
            end = ")" + raw.group(1) + '"'
            j = text.find(end, i)
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
            continue
        if c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        if c == "#" and line_start:
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0:
                    k = n
                    break
                if text[k - 1] != "\\":
                    break
                j = k + 1
            out.append("\n" * text.count("\n", i, k))
            i = k
            continue
        if c == "\n":
            line_start = True
        elif not c.isspace():
            line_start = False
        out.append(c)
        i += 1
    return "".join(out)


def functions(text):
    """(name, first line, last line) of each function defined at namespace or class scope: a
    brace there whose head (since the last ';', '{' or '}') has a parenthesis and is no class,
    struct, enum, namespace or initialiser. Lambdas and local classes belong to their function."""
    code = code_only(text)
    found, stack = [], []  # stack: (kind, index into found)
    line, head_start = 1, 0
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            kind, head = "block", code[head_start:i].strip()
            if all(k in ("namespace", "class") for k, _ in stack):
                if re.search(r"\bnamespace\b", head) or head.startswith("extern"):
                    kind = "namespace"
                elif re.search(r"\b(class|struct|union|enum)\b[^()]*$", head):
                    kind = "class"
                elif "(" in head and not head.endswith("="):
                    kind = "function"
                    names = re.findall(r"([~\w:]+)\s*\(", head)
                    found.append([names[0] if names else "?", line, line])
            stack.append((kind, len(found) - 1))
            head_start = i + 1
        elif c == "}":
            if stack:
                kind, index = stack.pop()
                if kind == "function":
                    found[index][2] = line
            head_start = i + 1
        elif c == ";" and all(k in ("namespace", "class") for k, _ in stack):
            head_start = i + 1
        elif c == ":" and stack and stack[-1][0] == "class" and re.search(r"\b(public|private|protected)\s*$",
                                                                        code[head_start:i]):
            head_start = i + 1
    return [(name, first, last) for name, first, last in found]


def main(root, long_functions=None, check_arrows=True):
    long_functions = LONG_FUNCTIONS if long_functions is None else long_functions
    src = os.path.join(root, "src")
    problems = []
    used = {module: set() for module in ALLOWED}
    long_seen = set()
    for folder, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".hpp", ".cpp", ".cu", ".cuh", ".h")):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, src)
            module = rel.split(os.sep)[0]
            with open(path, encoding="utf-8") as f:
                text = f.read()
            lines = text.split("\n")
            if len(lines) - 1 > MAX_LINES:
                problems.append(f"src/{rel}: {len(lines) - 1} lines, more than {MAX_LINES}")
            for name, first, last in functions(text):
                length = last - first + 1
                bound, _ = long_functions.get((rel, name), (MAX_FUNCTION_LINES, ""))
                if (rel, name) in long_functions and length > MAX_FUNCTION_LINES:
                    long_seen.add((rel, name))
                if length > bound:
                    problems.append(f"src/{rel}:{first}: {name} is {length} lines long, more than {bound}")
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
                elif to != module:
                    used[module].add(to)
                for pattern, owner in PRIVATE:
                    if pattern.search(target) and not rel.startswith(owner):
                        problems.append(f"src/{rel}:{number}: {target} is private to src/{owner}")
    for module, targets in sorted(ALLOWED.items()):
        if not check_arrows or not os.path.isdir(os.path.join(src, module)):
            continue
        for to in sorted(targets - used[module]):
            problems.append(f"the layering table lets {module}/ include {to}/, which none of its files does: drop the arrow")
    for rel, name in sorted(set(long_functions) - long_seen):
        problems.append(f"src/{rel}: {name} is no longer long (or gone): drop it from LONG_FUNCTIONS")
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
        kernels = '#include "core/a.hpp"\n#include "kernels/cuda/c.cuh"\n'
        put("core/a.hpp", "#pragma once\n")
        put("kernels/b.cpp", kernels + '#include "operands/o.hpp"\n')
        put("operands/o.hpp", '#include "core/a.hpp"\n')
        put("settings/settings.cpp", '#include "core/a.hpp"\nconst char* v = std::getenv(name);\n')
        long_body = "int f() {\n" + "  x();\n" * (MAX_FUNCTION_LINES - 2) + "}\n"
        put("core/f.cpp", '// "{" (\nstruct S {\n  int g() const { return 1; }\n};\n' + long_body)
        if main(root, {}) != 0:
            print("self-test: a sound tree was refused")
            return 1
        # A function one line longer; justified within a bound; a justification left behind.
        put("core/f.cpp", long_body.replace("{\n", "{\n  y();\n", 1))
        if main(root, {}) == 0 or main(root, {("core/f.cpp", "f"): (MAX_FUNCTION_LINES + 1, "why")}) != 0:
            print("self-test: the function-length limit or its justification was not applied")
            return 1
        put("core/f.cpp", long_body)
        if main(root, {("core/f.cpp", "f"): (MAX_FUNCTION_LINES + 1, "why")}) == 0:
            print("self-test: a justification of a function no longer long was not refused")
            return 1
        # An arrow of the table that no include uses.
        put("kernels/b.cpp", kernels)
        if main(root, {}) == 0:
            print("self-test: an arrow no include uses was not refused")
            return 1
        put("kernels/b.cpp", kernels + '#include "operands/o.hpp"\n')
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
            found = main(root, {}, check_arrows=False)
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
