#include "tools/compare.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "core/parallel_failure.hpp"
#include "tools/block_index.hpp"

namespace blockmm::tools {
namespace {

std::string block_name(std::int32_t i, std::int32_t j) {
  return "(" + std::to_string(i) + ", " + std::to_string(j) + ")";
}

std::string record_name(const MappedFile& file, std::int64_t r) { return file.locate(r); }

// Counts and the first difference of one block-row; rows are merged independently.
struct RowOutcome {
  std::int64_t expected_blocks = 0, actual_blocks = 0, differing_blocks = 0, differing_values = 0;
  std::int64_t missing = 0, extra = 0, actual_zero = 0;
  std::string first;

  void note(const std::string& text) {
    if (first.empty()) first = text;
  }
};

// A block-row that holds records in either file, and where it is in each index (-1: not there).
struct SharedRow {
  std::int32_t row;
  std::int64_t in_expected;
  std::int64_t in_actual;
};

// The union of both files' non-empty block-rows, ascending: what compare_files walks, so that its
// memory follows the records, not n.
std::vector<SharedRow> rows_of_either(const BlockIndex& ei, const BlockIndex& ai) {
  std::vector<SharedRow> rows;
  rows.reserve(static_cast<std::size_t>(ei.rows() + ai.rows()));
  std::int64_t x = 0, y = 0;
  while (x < ei.rows() || y < ai.rows()) {
    const std::int32_t ex = x < ei.rows() ? ei.row(x) : std::numeric_limits<std::int32_t>::max();
    const std::int32_t ay = y < ai.rows() ? ai.row(y) : std::numeric_limits<std::int32_t>::max();
    const std::int32_t i = std::min(ex, ay);
    rows.push_back({i, ex == i ? x++ : -1, ay == i ? y++ : -1});
  }
  return rows;
}

RowOutcome compare_row(const SharedRow& shared, const MappedFile& e, const BlockIndex& ei, const MappedFile& a,
                       const BlockIndex& ai) {
  RowOutcome out;
  const std::int32_t i = shared.row;
  const std::int64_t m = e.info().header.m;
  const std::int64_t values = e.values_per_block();
  const std::int64_t value_bytes = values * e.value_bytes();
  const bool in_e = shared.in_expected >= 0, in_a = shared.in_actual >= 0;
  std::int64_t s = in_e ? ei.row_begin(shared.in_expected) : 0, t = in_a ? ai.row_begin(shared.in_actual) : 0;
  const std::int64_t s_end = in_e ? ei.row_end(shared.in_expected) : 0, t_end = in_a ? ai.row_end(shared.in_actual) : 0;
  while (s < s_end || t < t_end) {
    const std::int64_t er = s < s_end ? ei.record_at(s) : -1;
    const std::int64_t ar = t < t_end ? ai.record_at(t) : -1;
    const std::int64_t ej = er >= 0 ? e.col(er) : std::numeric_limits<std::int64_t>::max();
    const std::int64_t aj = ar >= 0 ? a.col(ar) : std::numeric_limits<std::int64_t>::max();
    const std::int64_t j = std::min(ej, aj);
    const bool e_has = ej == j && !e.all_zero(er);
    const bool a_has = aj == j && !a.all_zero(ar);
    if (aj == j && !a_has) ++out.actual_zero;
    const std::string where = block_name(i, static_cast<std::int32_t>(j));
    out.expected_blocks += e_has;
    out.actual_blocks += a_has;
    if (e_has && !a_has) {
      ++out.missing;
      out.note("block " + where + " of EXPECTED (" + record_name(e, er) + ") is missing from ACTUAL" +
               (aj == j ? " (all zero there, " + record_name(a, ar) + ")" : ""));
    } else if (a_has && !e_has) {
      ++out.extra;
      out.note("block " + where + " of ACTUAL (" + record_name(a, ar) + ") is not in EXPECTED" +
               (ej == j ? " (all zero there, " + record_name(e, er) + ")" : ""));
    } else if (e_has && a_has &&
               std::memcmp(e.record(er) + 8, a.record(ar) + 8, static_cast<std::size_t>(value_bytes)) != 0) {
      ++out.differing_blocks;
      std::int64_t first_element = -1;
      for (std::int64_t v = 0; v < values; ++v)
        if (e.value(er, v) != a.value(ar, v)) {
          ++out.differing_values;
          if (first_element < 0) first_element = v;
        }
      out.note("block " + where + " element (" + std::to_string(first_element / m) + ", " +
               std::to_string(first_element % m) + "): expected " + std::to_string(e.value(er, first_element)) +
               ", actual " + std::to_string(a.value(ar, first_element)) + " (EXPECTED " + record_name(e, er) +
               ", ACTUAL " + record_name(a, ar) + ")");
    }
    if (ej == j) ++s;
    if (aj == j) {
      ++t;
      while (t < t_end && a.col(ai.record_at(t)) == j) ++t;  // a duplicate: reported from the index
    }
  }
  return out;
}

}  // namespace

Comparison compare_files(const MappedFile& expected, const MappedFile& actual, bool strict) {
  Comparison c;
  const FileHeader& eh = expected.info().header;
  const FileHeader& ah = actual.info().header;
  if (eh.shape() != ah.shape()) {
    c.shape_differs = "EXPECTED has n = " + std::to_string(eh.n) + ", m = " + std::to_string(eh.m) +
                      "; ACTUAL has n = " + std::to_string(ah.n) + ", m = " + std::to_string(ah.m);
    return c;
  }
  const BlockIndex ei(expected);
  if (ei.duplicates() > 0) {
    const std::int64_t r = ei.duplicate_first();
    throw InputError(expected.path() + ": block " + block_name(expected.row(r), expected.col(r)) +
                     " occurs twice, at " + record_name(expected, r) + " and " +
                     record_name(expected, ei.duplicate_second()));
  }
  const BlockIndex ai(actual);
  c.actual_duplicates = ai.duplicates();

  const std::vector<SharedRow> rows = rows_of_either(ei, ai);
  const auto row_count = static_cast<std::int64_t>(rows.size());
  std::int64_t first_row = std::numeric_limits<std::int64_t>::max();
  std::string first_text;
  std::int64_t expected_blocks = 0, actual_blocks = 0, differing_blocks = 0, differing_values = 0, missing = 0,
               extra = 0, actual_zero = 0;
  ParallelFailure failure;
#pragma omp parallel for schedule(dynamic, 16) reduction(+ : expected_blocks, actual_blocks, differing_blocks, \
                                                             differing_values, missing, extra, actual_zero)
  for (std::int64_t i = 0; i < row_count; ++i) {
    if (failure.failed()) continue;
    RowOutcome row;
    try {
      row = compare_row(rows[static_cast<std::size_t>(i)], expected, ei, actual, ai);  // builds strings: may run out of memory
    } catch (...) {
      failure.capture();
      continue;
    }
    expected_blocks += row.expected_blocks;
    actual_blocks += row.actual_blocks;
    differing_blocks += row.differing_blocks;
    differing_values += row.differing_values;
    missing += row.missing;
    extra += row.extra;
    actual_zero += row.actual_zero;
    if (!row.first.empty()) {
#pragma omp critical(blockmm_cmp_first)
      if (i < first_row) {
        first_row = i;
        first_text = std::move(row.first);  // a move: no allocation
      }
    }
  }
  failure.rethrow_if_failed();
  c.expected_blocks = expected_blocks;
  c.actual_blocks = actual_blocks;
  c.differing_blocks = differing_blocks;
  c.differing_values = differing_values;
  c.missing_blocks = missing;
  c.extra_blocks = extra;
  c.actual_zero_blocks = actual_zero;

  // A duplicate in ACTUAL makes it no map at all, whatever its copies hold.
  std::string duplicate_text;
  if (ai.duplicates() > 0) {
    const std::int64_t r = ai.duplicate_first();
    duplicate_text = "block " + block_name(actual.row(r), actual.col(r)) + " occurs twice in ACTUAL, at " +
                     record_name(actual, r) + " and " + record_name(actual, ai.duplicate_second());
  }
  c.first_difference = !first_text.empty() ? first_text : duplicate_text;

  if (strict) {
    if (!ai.sorted()) {
      const std::int64_t r = ai.first_unsorted();
      c.strict_problem = "ACTUAL is not sorted by (i, j): " + record_name(actual, r) + " holds block " +
                         block_name(actual.row(r), actual.col(r)) + " after block " +
                         block_name(actual.row(r - 1), actual.col(r - 1));
    } else if (ai.duplicates() > 0) {
      c.strict_problem = duplicate_text;
    } else if (actual_zero > 0) {
      for (std::int64_t r = 0; r < actual.records(); ++r)
        if (actual.all_zero(r)) {
          c.strict_problem = "ACTUAL " + record_name(actual, r) + " holds block " +
                             block_name(actual.row(r), actual.col(r)) + " with all values zero";
          break;
        }
    }
  }
  return c;
}

std::string summarize(const Comparison& c) {
  std::string text = std::to_string(c.differing_blocks) + " block(s) with different values (" +
                     std::to_string(c.differing_values) + " value(s)), " + std::to_string(c.missing_blocks) +
                     " missing, " + std::to_string(c.extra_blocks) + " extra; EXPECTED has " +
                     std::to_string(c.expected_blocks) + " non-zero blocks, ACTUAL " +
                     std::to_string(c.actual_blocks);
  if (c.actual_duplicates > 0) text += ", " + std::to_string(c.actual_duplicates) + " duplicate record(s) in ACTUAL";
  if (c.actual_zero_blocks > 0) text += ", " + std::to_string(c.actual_zero_blocks) + " all-zero block(s) in ACTUAL";
  return text;
}

}  // namespace blockmm::tools
