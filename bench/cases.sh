# Benchmark cases of DESIGN.md §5 (values uniform in [0, 1023], fixed seeds), as
# "name n m k" lines; sourced by bench scripts. G1 is fully dense, E1 element-level.
BLOCKMM_CASES="
S1 32768 8 16800
S2 32768 4 65300
D1 32768 4 1000000
D2 32768 4 10000000
D3 32768 8 8800000
D4 32768 4 33000000
G1 16384 8 4194304
E1 1048576 1 10485760
E2 2097152 2 2621440
"
# Cases for several GPUs of one node (issue 39, 44): Q8 a quarter of the blocks at m = 8, H32 every
# block at m = 32, Q8L Q8 at twice n (a product of seconds on one GPU). Named explicitly
# (bench/run --cases gpu, or Q8,...): the cpu backend would take hours on them.
BLOCKMM_GPU_CASES="
Q8 65536 8 16777216
H32 49152 32 2359296
Q8L 131072 8 67108864
"
# Scaled-down cases for a CPU-only machine; C8 and C4 are issue 21's cpu cases (the DBCSR comparison).
BLOCKMM_SMALL_CASES="
S1 32768 8 16800
S2 32768 4 65300
D1s 32768 4 300000
G1s 2048 8 65536
E1s 131072 1 1310720
C8 8192 8 200000
C4 16384 4 400000
"

# make_case DIR NAME N M K [THREADS [MAX_VALUE]]: writes DIR/NAME.A.bin and DIR/NAME.B.bin once
# (values uniform in [0, MAX_VALUE], default 1023: keep other values in a DIR of their own).
make_case() {
  local dir=$1 name=$2 n=$3 m=$4 k=$5 threads=${6:-0} max=${7:-1023}
  local t=()
  [ "$threads" -gt 0 ] && t=(--threads "$threads")
  [ -f "$dir/$name.A.bin" ] || "$BLOCKMM_BUILD/blockmm-gen" "$dir/$name.A.bin" --n "$n" --m "$m" --k "$k" --max-value "$max" --seed 1 -q "${t[@]}"
  [ -f "$dir/$name.B.bin" ] || "$BLOCKMM_BUILD/blockmm-gen" "$dir/$name.B.bin" --n "$n" --m "$m" --k "$k" --max-value "$max" --seed 2 -q "${t[@]}"
}

# Cases whose B is not a blockmm-gen matrix, as "name n m kA shape" lines. bench/run writes A
# with blockmm-gen (seed 1, as above) and B itself; make_case and gpu_session.sh don't use these.
#   col0: B holds every block of block-column 0 (n/m blocks, values in [0, 1023]), so the
#         product is SpMV-shaped with m right-hand sides (DESIGN.md §5, V1).
#   skew: A's block-rows power-law (blockmm-gen --skew 1.0: row i gets a share of k
#         proportional to 1/(i+1), row 0 about 7 % of it), B a blockmm-gen matrix (issue #20, E1k).
BLOCKMM_SPECIAL_CASES="
V1 32768 8 1000000 col0
E1k 1048576 1 10485760 skew
"
BLOCKMM_SMALL_SPECIAL_CASES="
V1s 32768 8 100000 col0
E1ks 131072 1 1310720 skew
"

# Real shapes (issue 48): inputs written by bench/real_shapes.py (numpy), as
# "name n m kA kB block_products c_blocks generator_case scale" lines; the counts are what the
# generator gives at that scale (bench/run uses them to decide which anchors run). The products:
# el3 A.A (3-D Q1 elasticity, m 3, 27 blocks a row), el3p A.P (smoothed-aggregation prolongator),
# el3r R.A (R = P^T), el2 A.A (2-D, m 2), tet A.A (P1 tetrahedra, m 3, 15 a row), water and
# water16 S.S (overlap blocked by molecule, m 23, 10- and 16-bit values). bench/run --cases real
# (real-small: the same at a tenth, for a quick look); make_case does not write these.
BLOCKMM_REAL_CASES="
el3 187200 3 1601260 1601260 41772500 7113204 el3 1
el3p 187200 3 1601260 548856 14221350 1440894 el3p 1
el3r 187200 3 548856 1601260 14221350 1440894 el3r 1
el2 312000 2 1399264 1399264 12565000 3876336 el2 1
tet 187200 3 898714 898714 13080910 3761238 tet 1
water 23000 23 48904 48904 2397964 298888 water 1
water16 23000 23 48904 48904 2397964 298888 water16 1
"
BLOCKMM_SMALL_REAL_CASES="
el3s 19494 3 157300 157300 3939992 665364 el3 0.1
el3ps 19494 3 157300 53816 1328400 134064 el3p 0.1
el2s 30996 2 137992 137992 1233028 380016 el2 0.1
waters 2300 23 5398 5398 294094 10000 water 0.1
"
