// scatter_fields (field_scatter.hpp).
#include "io/field_scatter.hpp"

#include <cstring>

namespace blockmm::io {
namespace {

// A block-column (4 bytes at `index_at`) and `Values` bytes of values (at `values_at`) a record;
// with `Keys`, its first 8 bytes to `keys` too.
template <std::int64_t Values, bool Keys>
void column_and_values(const std::byte* records, std::int64_t count, std::int64_t stride, std::int64_t index_at,
                       std::int64_t values_at, std::byte* indices, std::byte* values, std::byte* keys) {
  for (std::int64_t t = 0; t < count; ++t) {
    const std::byte* record = records + t * stride;
    if (Keys) std::memcpy(keys + 8 * t, record, 8);
    std::memcpy(indices + 4 * t, record + index_at, 4);
    std::memcpy(values + Values * t, record + values_at, Values);  // a constant size: inlined
  }
}

using Scatter2 = void (*)(const std::byte*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::byte*,
                          std::byte*, std::byte*);

template <std::int64_t Values>
Scatter2 fixed(bool keys) {
  return keys ? column_and_values<Values, true> : column_and_values<Values, false>;
}

// The fixed-size copy for `bytes` of values (2 m^2 or 4 m^2 for m = 1 to 32), or null.
Scatter2 fixed_scatter(std::int64_t bytes, bool keys) {
  switch (bytes) {
    case 2: return fixed<2>(keys);
    case 4: return fixed<4>(keys);
    case 8: return fixed<8>(keys);
    case 16: return fixed<16>(keys);
    case 32: return fixed<32>(keys);
    case 64: return fixed<64>(keys);
    case 128: return fixed<128>(keys);
    case 256: return fixed<256>(keys);
    case 512: return fixed<512>(keys);
    case 1024: return fixed<1024>(keys);
    case 2048: return fixed<2048>(keys);
    case 4096: return fixed<4096>(keys);
    default: return nullptr;
  }
}

}  // namespace

void scatter_fields(const std::byte* records, std::int64_t count, std::int64_t stride,
                    const std::vector<FieldCopy>& fields, std::byte* const* out, std::byte* keys) {
  if (count <= 0) return;
  if (fields.size() == 2 && fields[0].bytes == 4) {
    if (const Scatter2 scatter = fixed_scatter(fields[1].bytes, keys != nullptr)) {
      scatter(records, count, stride, fields[0].record_offset, fields[1].record_offset, out[0], out[1], keys);
      return;
    }
  }
  // Any other layout: a record at a time, each field by its own copy.
  for (std::int64_t t = 0; t < count; ++t) {
    const std::byte* record = records + t * stride;
    if (keys != nullptr) std::memcpy(keys + 8 * t, record, 8);
    for (std::size_t f = 0; f < fields.size(); ++f)
      if (fields[f].bytes > 0)
        std::memcpy(out[f] + t * fields[f].bytes, record + fields[f].record_offset, static_cast<std::size_t>(fields[f].bytes));
  }
}

}  // namespace blockmm::io
