#include "support/dense_reference.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace blockmm::testing {

OutputRecords dense_product(const InputRecords& a, const InputRecords& b) {
  const std::int64_t n = a.shape.n;
  const std::int32_t m = a.shape.m;
  std::vector<std::uint64_t> da(static_cast<std::size_t>(n * n), 0), db(static_cast<std::size_t>(n * n), 0);
  auto expand = [&](const InputRecords& in, std::vector<std::uint64_t>& dense) {
    for (std::int64_t q = 0; q < in.size(); ++q) {
      const std::int64_t i = record_row(in.record(q)), j = record_col(in.record(q));
      for (std::int32_t r = 0; r < m; ++r)
        for (std::int32_t c = 0; c < m; ++c) dense[(i * m + r) * n + j * m + c] += in.values(q)[r * m + c];
    }
  };
  expand(a, da);
  expand(b, db);
  std::vector<std::uint64_t> dc(static_cast<std::size_t>(n * n), 0);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t l = 0; l < n; ++l) {
      const std::uint64_t x = da[r * n + l];
      if (x == 0) continue;
      for (std::int64_t c = 0; c < n; ++c) dc[r * n + c] += x * db[l * n + c];
    }
  OutputRecords out;
  out.shape = a.shape;
  const std::int64_t p = n / m;
  const std::int64_t stride = out.stride();
  for (std::int64_t i = 0; i < p; ++i)
    for (std::int64_t j = 0; j < p; ++j) {
      bool any = false;
      for (std::int32_t r = 0; r < m && !any; ++r)
        for (std::int32_t c = 0; c < m && !any; ++c) any = dc[(i * m + r) * n + j * m + c] != 0;
      if (!any) continue;
      out.bytes.resize(out.bytes.size() + static_cast<std::size_t>(stride));
      std::byte* rec = out.bytes.data() + out.bytes.size() - stride;
      set_record_index(rec, static_cast<std::int32_t>(i), static_cast<std::int32_t>(j));
      for (std::int32_t r = 0; r < m; ++r)
        for (std::int32_t c = 0; c < m; ++c) {
          const std::uint64_t v = dc[(i * m + r) * n + j * m + c];
          const std::uint32_t s = v > 0xFFFFFFFFull ? 0xFFFFFFFFu : static_cast<std::uint32_t>(v);
          std::memcpy(rec + 8 + 4 * (r * m + c), &s, 4);
        }
    }
  return out;
}

std::string compare_outputs(const OutputRecords& expected, const OutputRecords& actual) {
  if (expected.shape != actual.shape)
    return "shapes differ: n=" + std::to_string(expected.shape.n) + " m=" + std::to_string(expected.shape.m) +
           " vs n=" + std::to_string(actual.shape.n) + " m=" + std::to_string(actual.shape.m);
  auto index = [](const OutputRecords& o) {
    std::map<std::pair<std::int32_t, std::int32_t>, std::int64_t> at;
    for (std::int64_t q = 0; q < o.size(); ++q) at[{record_row(o.record(q)), record_col(o.record(q))}] = q;
    return at;
  };
  const auto e = index(expected), a = index(actual);
  const std::int64_t mm = expected.shape.block_values();
  for (const auto& [key, q] : e) {
    auto it = a.find(key);
    const std::string where = "block (" + std::to_string(key.first) + ", " + std::to_string(key.second) + ")";
    if (it == a.end()) return where + " missing";
    if (std::memcmp(expected.values(q), actual.values(it->second), static_cast<std::size_t>(mm) * 4) != 0) {
      for (std::int64_t v = 0; v < mm; ++v)
        if (expected.values(q)[v] != actual.values(it->second)[v])
          return where + " value " + std::to_string(v) + ": expected " + std::to_string(expected.values(q)[v]) +
                 ", got " + std::to_string(actual.values(it->second)[v]);
    }
  }
  for (const auto& [key, q] : a)
    if (!e.count(key)) return "unexpected block (" + std::to_string(key.first) + ", " + std::to_string(key.second) + ")";
  if (expected.size() != actual.size()) return "record counts differ (duplicates?)";
  return "";
}

}  // namespace blockmm::testing
