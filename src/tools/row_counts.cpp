#include "tools/row_counts.hpp"

#include <algorithm>
#include <cmath>

namespace blockmm::tools {

std::vector<std::int64_t> block_row_counts(std::int64_t k, std::int64_t p, double alpha) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(p), 0);
  if (k == 0) return counts;
  const long double a = alpha;
  // Weights relative to row c's: ratio(c, i) = ((c+1)/(i+1))^alpha. tail[c] = sum over i >= c of
  // ratio(c, i) >= 1, by the backward recurrence tail[c] = 1 + ratio(c, c+1) * tail[c+1]; it
  // neither overflows nor underflows however steep the skew, where plain weights would.
  std::vector<long double> tail(static_cast<std::size_t>(p));
  tail[static_cast<std::size_t>(p - 1)] = 1;
  for (std::int64_t c = p - 2; c >= 0; --c)
    tail[c] = 1 + std::pow(static_cast<long double>(c + 1) / static_cast<long double>(c + 2), a) * tail[c + 1];

  // Weights never increase with i, so the capped rows form a prefix: cap row c while its share
  // of what is left exceeds p.
  std::int64_t first_free = 0;
  std::int64_t left = k;
  while (first_free < p && static_cast<long double>(left) / tail[first_free] > static_cast<long double>(p)) {
    counts[first_free] = p;
    left -= p;
    ++first_free;
  }

  // Cumulative rounding of the remaining shares: count_i = round(S_i) - round(S_{i-1}).
  long double share_sum = 0;
  std::int64_t placed = 0;
  for (std::int64_t i = first_free; i < p; ++i) {
    share_sum += static_cast<long double>(left) *
                 std::pow(static_cast<long double>(first_free + 1) / static_cast<long double>(i + 1), a) /
                 tail[first_free];
    std::int64_t target = i == p - 1 ? left : std::llround(share_sum);
    target = std::clamp(target, placed, std::min(left, placed + p));
    counts[i] = target - placed;
    placed = target;
  }

  // Rounding in long double can leave the last row off by a block or two (out of [0, p], or
  // the total off k); move the difference to rows with room so the invariants hold exactly.
  std::int64_t total = 0;
  for (auto& c : counts) {
    c = std::clamp<std::int64_t>(c, 0, p);
    total += c;
  }
  for (std::int64_t i = 0; total < k && i < p; ++i) {
    const std::int64_t add = std::min(k - total, p - counts[i]);
    counts[i] += add;
    total += add;
  }
  for (std::int64_t i = p - 1; total > k && i >= 0; --i) {
    const std::int64_t take = std::min(total - k, counts[i]);
    counts[i] -= take;
    total -= take;
  }
  return counts;
}

}  // namespace blockmm::tools
