#!/usr/bin/env bash
# `pip install ./python` into a fresh virtual environment (issue 42 item 5), offline: the system's
# setuptools and scientific packages (--system-site-packages, --no-index, --no-build-isolation).
# The package and its three tools must install into the venv, answer the project's version, and
# convert a matrix there and back (checked against the matrix as written here). Skips (77) only
# when the interpreter has no venv or pip at all (Debian: apt install python3-venv python3-pip).
# usage: pip_install.sh SOURCE_DIR PYTHON VERSION
set -euo pipefail
source=$1 python=$2 version=$3
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
cp -r "$source/python/pyproject.toml" "$source/python/README.md" "$source/python/blockmm" "$work/src/"
rm -rf "$work/src/blockmm/__pycache__"
"$python" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install --no-index --no-build-isolation --quiet --disable-pip-version-check "$work/src"

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
echo "pip install ./python: the package and its tools install, run and convert in a fresh venv"
