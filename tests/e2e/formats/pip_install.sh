#!/usr/bin/env bash
# `pip install ./python` into a fresh virtual environment (issue 42 item 5), offline: the system's
# setuptools and scientific packages (--system-site-packages, --no-index, --no-build-isolation).
# The package and its three tools must install into the venv, answer the project's version, and
# convert a matrix there and back (checked against the matrix as written here); and blockmm.multiply
# must multiply there, through the extension pip built by CMake (python/setup.py: issue 50). The
# extension is built in BUILD_DIR, the test's own build tree (up to date: nothing is compiled), so
# that the test stays cheap; BLOCKMM_PIP_FROM_SCRATCH=1 builds it afresh in pip's build folder
# instead, compiling the libraries it needs (about 50 CPU seconds, CUDA off). Where BUILD_DIR has
# no extension (no Python headers), the package installs without it and multiply says so. Skips
# (77) only when the interpreter has no venv or pip at all (Debian: apt install python3-venv
# python3-pip).
# usage: pip_install.sh SOURCE_DIR PYTHON VERSION BUILD_DIR
set -euo pipefail
source=$1 python=$2 version=$3 build=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! "$python" -c "import venv, ensurepip" 2>/dev/null; then
  echo "SKIP: $python has no venv/ensurepip module (Debian: apt install python3-venv)"
  exit 77
fi
if ! "$python" -m pip --version >/dev/null 2>&1; then
  echo "SKIP: $python has no pip (Debian: apt install python3-pip)"
  exit 77
fi
# pip builds in the tree it is given (build/, *.egg-info): a copy, never the checkout.
mkdir "$work/src"
cp -r "$source/python/pyproject.toml" "$source/python/README.md" "$source/python/setup.py" "$source/python/blockmm" \
  "$work/src/"
rm -rf "$work/src/blockmm/__pycache__" "$work/src/blockmm/"_native*.so
"$python" -m venv --system-site-packages "$work/venv"
extension=$(ls "$build/python/blockmm/"_native*.so 2>/dev/null | head -n 1 || true)
if [ "${BLOCKMM_PIP_FROM_SCRATCH:-0}" = 1 ]; then
  unset BLOCKMM_BUILD_DIR
  export BLOCKMM_PYTHON_EXTENSION=on BLOCKMM_SOURCE_DIR=$source CMAKE_ARGS="-DBLOCKMM_ENABLE_CUDA=OFF ${CMAKE_ARGS:-}"
  extension=fresh
elif [ -n "$extension" ]; then
  export BLOCKMM_PYTHON_EXTENSION=on BLOCKMM_BUILD_DIR=$build
else
  echo "note: $build has no blockmm._native (no Python headers?): installing without it"
  export BLOCKMM_PYTHON_EXTENSION=off
fi
"$work/venv/bin/python" -m pip install --no-index --no-build-isolation --quiet --disable-pip-version-check "$work/src"
unset BLOCKMM_BUILD_DIR

for tool in blockmm-import blockmm-export blockmm-spy; do
  [ -x "$work/venv/bin/$tool" ] || { echo "FAIL: $tool was not installed into the venv"; exit 1; }
  answer=$("$work/venv/bin/$tool" --version)
  [ "$answer" = "$tool $version" ] || { echo "FAIL: $tool --version says '$answer', expected '$tool $version'"; exit 1; }
done
# The venv's own copy is the one imported, not a build tree's or the checkout's.
"$work/venv/bin/python" - "$work/venv" <<'PY'
import os, sys
import blockmm
venv = os.path.realpath(sys.argv[1])
assert os.path.realpath(blockmm.__file__).startswith(venv), f"blockmm imported from {blockmm.__file__}"
PY

cd "$work"
"$work/venv/bin/python" - <<'PY'
import numpy as np, scipy.io, scipy.sparse as sp
rng = np.random.default_rng(5)
dense = np.where(rng.random((12, 12)) < 0.3, rng.integers(1, 1000, (12, 12)), 0)
scipy.io.mmwrite("A.mtx", sp.coo_matrix(dense))
np.save("dense.npy", dense)
PY
"$work/venv/bin/blockmm-import" -m 3 A.mtx A.h5
"$work/venv/bin/blockmm-export" -q A.h5 A.npz
"$work/venv/bin/blockmm-spy" A.h5 A.png
"$work/venv/bin/python" - <<'PY'
import numpy as np, scipy.sparse as sp
assert (sp.load_npz("A.npz").toarray() == np.load("dense.npy")).all(), "A.npz differs from the matrix written"
assert open("A.png", "rb").read(8) == b"\x89PNG\r\n\x1a\n"
PY
# blockmm.multiply in the venv: the venv's extension (or, without one, the message saying how to
# build it), against scipy's own product.
"$work/venv/bin/python" - "$work/venv" "${extension:+yes}" <<'PY'
import os, sys
import numpy as np, scipy.sparse as sp
import blockmm
a = sp.random(96, 96, 0.2, format="csr", random_state=4, dtype=np.float64)
a.data[:] = np.random.default_rng(4).integers(0, 65536, a.nnz)
a = a.astype(np.uint16).tobsr(blocksize=(4, 4))
if sys.argv[2] == "yes":
    import blockmm._native
    venv = os.path.realpath(sys.argv[1])
    assert os.path.realpath(blockmm._native.__file__).startswith(venv), f"_native from {blockmm._native.__file__}"
    c = blockmm.multiply(a, a)
    expected = np.minimum((a.astype(np.int64) @ a.astype(np.int64)).toarray(), 2**32 - 1)
    assert c.dtype == np.uint32 and c.blocksize == (4, 4) and (c.toarray() == expected).all(), "multiply differs"
else:
    try:
        blockmm.multiply(a, a)
        raise AssertionError("multiply ran without its extension")
    except ImportError as e:
        assert "compiled extension" in str(e), e
PY
multiply="blockmm.multiply saying how to build its extension"
[ -n "$extension" ] && multiply="blockmm.multiply multiplying there"
echo "pip install ./python: the package and its tools install and run in a fresh venv, $multiply"
