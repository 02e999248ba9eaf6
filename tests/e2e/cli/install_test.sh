#!/bin/bash
# The installed tree (label "cli"): `cmake --install` of this build into a temporary prefix,
# then the installed programs run from there: the product of the gold example is exact
# (inputs/expected_C.bin, checked by the installed blockmm-cmp --strict), --version names the
# build's features, the Slurm scripts and blockmm-job work from share/blockmm/slurm, the docs are
# there, and every installed tool has a bash completion that completes each option its --help
# lists (and their values) and a man page with EXAMPLES, ENVIRONMENT and SEE ALSO (`man -l`).
# Exit 0 pass, 1 fail, 77 when everything else passed but the build has no man pages
# (help2man was missing when CMake configured).
# Environment: BLOCKMM_BUILD_DIR, BLOCKMM_SOURCE_DIR, BLOCKMM_CMAKE, BLOCKMM_MAN_PAGES=ON|OFF,
# BLOCKMM_PYTHON_TOOLS=ON|OFF (whether this build could run the Python tools' --help).
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
# Every installed tool, the Python ones too when this build could run them (BLOCKMM_PYTHON).
programs=(blockmm blockmm-gen blockmm-cmp blockmm-info blockmm-convert blockmm-job)
[[ ${BLOCKMM_PYTHON_TOOLS:-OFF} == ON ]] && programs+=(blockmm-import blockmm-export blockmm-spy)
for p in "${programs[@]}"; do
  [[ -x $root/bin/$p ]] || fail "bin/$p is not installed"
done
for s in cpu single-gpu gpus; do
  [[ -x $root/share/blockmm/slurm/$s.sbatch ]] || fail "share/blockmm/slurm/$s.sbatch is not installed"
done
for f in LICENSE README.md CHANGELOG.md CITATION.cff design.md building.md running.md environment.md formats.md \
  promises.md; do
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

# Bash completion for every installed tool, made from its --help: each long option its --help
# lists completes, and option values complete from the choices --help shows.
complete_words() {
  local file=$root/share/bash-completion/completions/$1
  # shellcheck disable=SC1090
  bash -c 'source "$1"; shift; function=$(complete -p "$1" | sed -n "s/.* -F \([^ ]*\) .*/\1/p")
           [[ -n $function ]] || exit 1; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); "$function"
           echo "${COMPREPLY[*]}"' _ "$file" "$@"
}
for p in "${programs[@]}"; do
  file=$root/share/bash-completion/completions/$p
  [[ -f $file ]] || fail "no bash completion for $p"
  bash -n "$file" || fail "$p's completion is not valid bash"
  all=" $(complete_words "$p" --) " || fail "$p's completion defines no completion for $p"
  # The options --help lists (every '  --name' at the start of an option line).
  options=$(BLOCKMM_MPI=0 "$root/bin/$p" --help | grep -oE '^ +(-[A-Za-z0-9], ?)?--[a-z][a-z0-9-]*' | grep -oE -- '--[a-z][a-z0-9-]*$')
  [[ -n $options ]] || fail "$p --help lists no options"
  for option in $options; do
    [[ $all == *" $option "* ]] || fail "completion of '$p --' lacks $option: $all"
  done
done
expect_completion() {
  local want=$1 got
  shift
  got=$(complete_words "$@")
  [[ $got == "$want" ]] || fail "completion of '$*': '$got', expected '$want'"
}
expect_completion --backend blockmm --back
expect_completion "auto cpu cuda reference" blockmm --backend ''
expect_completion "h5 hdf5" blockmm --format h
expect_completion "shuffled sorted reverse" blockmm-gen --order ''
expect_completion "" blockmm-gen --threads ''
expect_completion "auto u16 u32" blockmm-convert --values ''
expect_completion "check verify" blockmm-job ''
if [[ -x $root/bin/blockmm-import ]] && BLOCKMM_MPI=0 "$root/bin/blockmm-import" --help >/dev/null 2>&1; then
  expect_completion "u16 u32" blockmm-import --values ''
  expect_completion "csr csc coo bsr" blockmm-export --sparse-format ''
fi

if [[ ${BLOCKMM_MAN_PAGES:-OFF} != ON ]]; then
  echo "SKIP: man pages (help2man was not found when CMake configured); everything else passed"
  exit 77
fi
command -v man >/dev/null || fail "man is not installed (Debian: apt-get install man-db)"
for p in "${programs[@]}"; do
  page=$root/share/man/man1/$p.1
  [[ -f $page ]] || fail "share/man/man1/$p.1 is not installed"
  text=$(MANWIDTH=100 man -P cat -l "$page" 2>&1) || fail "man -l $p.1 failed: $text"
  for section in NAME SYNOPSIS DESCRIPTION EXAMPLES ENVIRONMENT "SEE ALSO"; do
    grep -q "^$section" <<<"$text" || fail "$p.1 has no $section section"
  done
  grep -q -- "--help" <<<"$text" || fail "$p.1 does not list --help"
  sed -n '/^SEE ALSO/,$p' <<<"$text" | grep -qE 'blockmm[a-z-]*\(1\)' || fail "$p.1's SEE ALSO names no other page"
done
text=$(MANWIDTH=100 man -P cat -l "$root/share/man/man1/blockmm.1" | tr -s " \n" "  ")  # words, not lines
for want in 'blockmm - exact block-sparse matrix product C = A x B' '--chunk-size SIZE=256M' 'HDF5' 'off by default' \
  'BLOCKMM_PROGRESS_INTERVAL' 'mpirun -np 4 blockmm' 'blockmm-job(1)'; do
  grep -qF -- "$want" <<<"$text" || fail "blockmm.1 lacks '$want'"
done
echo "PASS: installed tree under $root"
