// Records already in CSR order built in one pass (operands/host_build.hpp's fast path), from
// records in memory or read from a source in pieces. Files written row-major (blockmm's own
// outputs, scipy's BSR, assemblers of finite-element matrices, bench/real_shapes.py) arrive with
// their records in strictly increasing (i, j) order; then the general build's row histogram, key
// scatter, per-row sortedness check and gather in key order (four passes and a key array a
// record) reduce to one pass that copies each record where it already belongs.
#pragma once

#include "core/block_matrix.hpp"
#include "core/record_source.hpp"

namespace blockmm::operands {

// Builds `matrix` (shape and rows set, arrays empty) from records in strictly increasing (i, j)
// order within [row_begin, row_end). Returns false where they are not (a duplicate is not in
// order either): the general build then runs and reports what is wrong, reusing the arrays' memory.
bool build_from_sorted_records(const InputRecords& records, OperandRole role, BlockMatrix& matrix);

// The same from the records of a source whose reads are thread-safe, read in pieces by the threads
// and copied from each piece while it is in the cache: no copy of the records in memory (fresh
// pages cost about as much as the copy itself). Returns false also where a read fails with an
// InputError (a record the source's checks refuse, say): the caller then takes the records whole,
// whose read reports what it always reported. `matrix` is left as it was then, its arrays empty.
bool build_from_sorted_source(const RecordSource& source, OperandRole role, BlockMatrix& matrix);

}  // namespace blockmm::operands
