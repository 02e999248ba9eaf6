#!/bin/bash
# The installed tree (label "cli"): `cmake --install` of this build into a temporary prefix,
# then the installed programs run from there: the product of the gold example is exact
# (inputs/expected_C.bin, checked by the installed blockmm-cmp --strict), --version names the
# build's features, the Slurm scripts and blockmm-job work from share/blockmm/slurm, bash
# completion completes options and values, and `man -l` renders each man page.
# Exit 0 pass, 1 fail, 77 when everything else passed but the build has no man pages
# (help2man was missing when CMake configured).
# Environment: BLOCKMM_BUILD_DIR, BLOCKMM_SOURCE_DIR, BLOCKMM_CMAKE, BLOCKMM_MAN_PAGES=ON|OFF.
set -euo pipefail

build=${BLOCKMM_BUILD_DIR:?set BLOCKMM_BUILD_DIR}
source_dir=${BLOCKMM_SOURCE_DIR:?set BLOCKMM_SOURCE_DIR}
cmake=${BLOCKMM_CMAKE:-cmake}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
prefix=$(mktemp -d "${TMPDIR:-/tmp}/blockmm-install.XXXXXX")
trap 'rm -rf "$prefix"' EXIT

"$cmake" --install "$build" --prefix "$prefix/usr" >"$prefix/install.log" || { cat "$prefix/install.log"; fail "cmake --install failed"; }
root=$prefix/usr
programs=(blockmm blockmm-gen blockmm-cmp blockmm-info blockmm-convert)
for p in "${programs[@]}" blockmm-job; do
  [[ -x $root/bin/$p ]] || fail "bin/$p is not installed"
done
for s in cpu single-gpu gpus; do
  [[ -x $root/share/blockmm/slurm/$s.sbatch ]] || fail "share/blockmm/slurm/$s.sbatch is not installed"
done
for f in LICENSE README.md CHANGELOG.md CITATION.cff; do
  [[ -f $root/share/doc/blockmm/$f ]] || fail "share/doc/blockmm/$f is not installed"
done
grep -q 'BSD 3-Clause' "$root/share/doc/blockmm/LICENSE" || fail "LICENSE is not the BSD-3-Clause text"

# The installed programs, away from the build tree.
cd "$prefix"
export BLOCKMM_MPI=0
version=$("$root/bin/blockmm" --version)
grep -Eq '^blockmm [0-9]+\.[0-9]+\.[0-9]+ \(commit ' <<<"$version" || fail "--version: $version"
for key in 'CUDA: ' 'MPI: ' 'HDF5: ' 'OpenMP: '; do
  grep -q "^$key" <<<"$version" || fail "--version does not name $key: $version"
done
"$root/bin/blockmm" -q "$source_dir/inputs/A.bin" "$source_dir/inputs/B.bin" C.bin || fail "installed blockmm failed"
"$root/bin/blockmm-cmp" --strict "$source_dir/inputs/expected_C.bin" C.bin || fail "installed blockmm's product differs from inputs/expected_C.bin"
# Random inputs from the installed generator: the installed blockmm's product equals the build
# tree's reference backend (a different kernel).
"$root/bin/blockmm-gen" R1.bin --n 96 --m 4 --density 0.3 --max-value 65535 --seed "$RANDOM" -q
"$root/bin/blockmm-gen" R2.bin --n 96 --m 4 --density 0.3 --max-value 65535 --seed "$RANDOM" -q
"$root/bin/blockmm" -q --backend cpu R1.bin R2.bin R.bin
"$build/blockmm" -q --backend reference R1.bin R2.bin R_ref.bin
cmp R.bin R_ref.bin || fail "installed blockmm (cpu) and the reference backend differ on random inputs"

# The Slurm scripts from share/: without inputs, blockmm-job's usage error (exit 2).
rc=0
PATH="$root/bin:$PATH" bash "$root/share/blockmm/slurm/cpu.sbatch" >/dev/null 2>&1 || rc=$?
((rc == 2)) || fail "installed cpu.sbatch without inputs exited $rc, expected 2"

# Bash completion: options, then an option's values.
completion=$root/share/bash-completion/completions/blockmm
[[ -f $completion ]] || fail "no bash completion for blockmm"
complete_words() {
  # shellcheck disable=SC1090
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _blockmm_complete; echo "${COMPREPLY[*]}"' _ "$completion" "$@"
}
[[ $(complete_words blockmm --back) == --backend ]] || fail "completion of 'blockmm --back': $(complete_words blockmm --back)"
[[ $(complete_words blockmm --backend '') == "auto cpu cuda reference" ]] || fail "completion of --backend values: $(complete_words blockmm --backend '')"
[[ -f $root/share/bash-completion/completions/blockmm-gen ]] || fail "no bash completion for blockmm-gen"

if [[ ${BLOCKMM_MAN_PAGES:-OFF} != ON ]]; then
  echo "SKIP: man pages (help2man was not found when CMake configured); everything else passed"
  exit 77
fi
command -v man >/dev/null || fail "man is not installed (Debian: apt-get install man-db)"
for p in "${programs[@]}"; do
  page=$root/share/man/man1/$p.1
  [[ -f $page ]] || fail "share/man/man1/$p.1 is not installed"
  text=$(MANWIDTH=100 man -P cat -l "$page" 2>&1) || fail "man -l $p.1 failed: $text"
  grep -q "^NAME" <<<"$text" || fail "$p.1 has no NAME section"
  grep -q -- "--help" <<<"$text" || fail "$p.1 does not list --help"
done
text=$(MANWIDTH=100 man -P cat -l "$root/share/man/man1/blockmm.1" | tr -s " \n" "  ")  # words, not lines
for want in 'blockmm - exact block-sparse matrix product C = A x B' '--chunk-size SIZE=256M' 'HDF5' 'off by default'; do
  grep -qF -- "$want" <<<"$text" || fail "blockmm.1 lacks '$want'"
done
echo "PASS: installed tree under $root"
