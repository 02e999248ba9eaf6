#include "partition/work.hpp"

#include <algorithm>
#include <numeric>

namespace blockmm::partition {

std::vector<std::int64_t> global_row_counts(const RecordKeys& keys, std::int32_t block_rows,
                                            const comm::Communicator& comm) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(block_rows), 0);
  for (std::size_t q = 0; q + 1 < keys.size(); q += 2) ++counts[static_cast<std::size_t>(keys[q])];
  comm.sum_in_place(counts);
  return counts;
}

std::vector<std::int64_t> global_row_work(const RecordKeys& a, const std::vector<std::int64_t>& b_row_counts,
                                          const comm::Communicator& comm) {
  std::vector<std::int64_t> work(b_row_counts.size(), 0);
  for (std::size_t q = 0; q + 1 < a.size(); q += 2)
    work[static_cast<std::size_t>(a[q])] += 1 + b_row_counts[static_cast<std::size_t>(a[q + 1])];
  comm.sum_in_place(work);
  return work;
}

std::vector<std::int32_t> balanced_ranges(const std::vector<std::int64_t>& work, int parts) {
  const std::int32_t rows = static_cast<std::int32_t>(work.size());
  std::vector<std::int64_t> prefix(work.size() + 1, 0);
  std::partial_sum(work.begin(), work.end(), prefix.begin() + 1);
  const std::int64_t total = prefix.back();
  std::vector<std::int32_t> bounds(static_cast<std::size_t>(parts) + 1, rows);
  bounds[0] = 0;
  if (total == 0) return equal_row_ranges(rows, parts);
  for (int r = 1; r < parts; ++r) {
    // The boundary whose prefix is nearest to r * total / parts, never before the previous one.
    const long double target = static_cast<long double>(total) * r / parts;
    auto it = std::lower_bound(prefix.begin(), prefix.end(), static_cast<std::int64_t>(target));
    std::int32_t b = static_cast<std::int32_t>(std::min<std::ptrdiff_t>(it - prefix.begin(), rows));
    if (b > 0 && target - prefix[b - 1] < prefix[b] - target) --b;
    bounds[r] = std::max(bounds[r - 1], b);
  }
  return bounds;
}

std::vector<std::int32_t> equal_row_ranges(std::int32_t rows, int parts) {
  std::vector<std::int32_t> bounds(static_cast<std::size_t>(parts) + 1);
  for (int r = 0; r <= parts; ++r)
    bounds[r] = static_cast<std::int32_t>(static_cast<std::int64_t>(rows) * r / parts);
  return bounds;
}

std::vector<std::int64_t> work_per_part(const std::vector<std::int64_t>& work, const std::vector<std::int32_t>& bounds) {
  std::vector<std::int64_t> out(bounds.size() - 1, 0);
  for (std::size_t r = 0; r + 1 < bounds.size(); ++r)
    out[r] = std::accumulate(work.begin() + bounds[r], work.begin() + bounds[r + 1], std::int64_t{0});
  return out;
}

double imbalance(const std::vector<std::int64_t>& part_work) {
  if (part_work.empty()) return 1.0;
  const std::int64_t total = std::accumulate(part_work.begin(), part_work.end(), std::int64_t{0});
  if (total == 0) return 1.0;
  const double mean = static_cast<double>(total) / static_cast<double>(part_work.size());
  return static_cast<double>(*std::max_element(part_work.begin(), part_work.end())) / mean;
}

}  // namespace blockmm::partition
