#include "support/random_blocks.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace blockmm::testing {

InputRecords random_blocks(const RandomSpec& spec, std::mt19937_64& rng) {
  const std::int32_t p = spec.n / spec.m;
  const std::int64_t mm = std::int64_t{spec.m} * spec.m;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<std::uint32_t> value(0, spec.max_value);
  std::vector<char> empty_row(static_cast<std::size_t>(p)), empty_col(static_cast<std::size_t>(p));
  for (auto& e : empty_row) e = unit(rng) < spec.empty_row_fraction;
  for (auto& e : empty_col) e = unit(rng) < spec.empty_col_fraction;

  std::vector<std::pair<std::int32_t, std::int32_t>> where;
  for (std::int32_t i = 0; i < p; ++i)
    for (std::int32_t j = 0; j < p; ++j)
      if (!empty_row[i] && !empty_col[j] && unit(rng) < spec.density) where.emplace_back(i, j);
  if (spec.shuffle) std::shuffle(where.begin(), where.end(), rng);

  InputRecords records;
  records.shape = {spec.n, spec.m};
  records.bytes.resize(where.size() * static_cast<std::size_t>(records.stride()));
  for (std::size_t q = 0; q < where.size(); ++q) {
    std::byte* rec = records.record(static_cast<std::int64_t>(q));
    set_record_index(rec, where[q].first, where[q].second);
    const bool zero_block = unit(rng) < spec.zero_block_fraction;
    for (std::int64_t e = 0; e < mm; ++e) {
      const std::uint16_t v =
          zero_block || unit(rng) < spec.zero_value_fraction ? 0 : static_cast<std::uint16_t>(value(rng));
      std::memcpy(rec + 8 + 2 * e, &v, 2);
    }
  }
  return records;
}

RandomSpec random_spec(std::mt19937_64& rng, std::int32_t max_block_rows) {
  static const std::int32_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 17, 31, 32};
  std::uniform_int_distribution<int> pick(0, static_cast<int>(std::size(sizes)) - 1);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  RandomSpec spec;
  spec.m = sizes[pick(rng)];
  const std::int32_t cap = spec.m >= 16 ? std::min(max_block_rows, 8) : max_block_rows;
  spec.n = spec.m * std::uniform_int_distribution<std::int32_t>(1, cap)(rng);
  spec.density = std::vector<double>{0.0, 0.05, 0.2, 0.5, 1.0}[std::uniform_int_distribution<int>(0, 4)(rng)];
  const double r = unit(rng);
  spec.max_value = r < 0.4 ? 65535 : r < 0.7 ? 1023 : r < 0.85 ? 3 : 1;
  spec.zero_value_fraction = unit(rng) < 0.5 ? 0.0 : unit(rng);
  spec.zero_block_fraction = unit(rng) < 0.7 ? 0.0 : 0.3;
  spec.empty_row_fraction = unit(rng) < 0.5 ? 0.0 : 0.3;
  spec.empty_col_fraction = unit(rng) < 0.5 ? 0.0 : 0.3;
  spec.shuffle = unit(rng) < 0.8;
  return spec;
}

InputRecords make_records(std::int32_t n, std::int32_t m,
                          const std::vector<std::tuple<int, int, std::vector<std::uint16_t>>>& blocks) {
  InputRecords r;
  r.shape = {n, m};
  r.bytes.resize(blocks.size() * static_cast<std::size_t>(r.stride()));
  for (std::size_t q = 0; q < blocks.size(); ++q) {
    const auto& [i, j, values] = blocks[q];
    if (static_cast<std::int64_t>(values.size()) != std::int64_t{m} * m)
      throw std::invalid_argument("make_records: block of " + std::to_string(values.size()) + " values for m = " +
                                  std::to_string(m));
    std::byte* rec = r.record(static_cast<std::int64_t>(q));
    set_record_index(rec, i, j);
    std::memcpy(rec + 8, values.data(), values.size() * 2);
  }
  return r;
}

InputRecords shuffled_records(const InputRecords& records, std::mt19937_64& rng) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(records.size()));
  for (std::size_t q = 0; q < order.size(); ++q) order[q] = static_cast<std::int64_t>(q);
  std::shuffle(order.begin(), order.end(), rng);
  InputRecords out = records;
  for (std::size_t q = 0; q < order.size(); ++q)
    std::memcpy(out.record(static_cast<std::int64_t>(q)), records.record(order[q]), static_cast<std::size_t>(records.stride()));
  return out;
}

InputRecords records_in_rows(const InputRecords& records, std::int32_t lo, std::int32_t hi) {
  InputRecords out;
  out.shape = records.shape;
  for (std::int64_t q = 0; q < records.size(); ++q)
    if (record_row(records.record(q)) >= lo && record_row(records.record(q)) < hi)
      out.bytes.insert(out.bytes.end(), records.record(q), records.record(q) + records.stride());
  return out;
}

}  // namespace blockmm::testing
