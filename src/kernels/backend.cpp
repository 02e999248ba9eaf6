#include "kernels/backend.hpp"

#include <algorithm>
#include <climits>

#include "core/error.hpp"

namespace blockmm::kernels {

BackendKind parse_backend_kind(const std::string& name) {
  if (name == "reference") return BackendKind::reference;
  if (name == "cpu") return BackendKind::cpu;
  if (name == "cuda") return BackendKind::cuda;
  throw UsageError("unknown backend '" + name + "' (expected auto, cpu, cuda or reference)");
}

std::string to_string(BackendKind kind) {
  switch (kind) {
    case BackendKind::reference: return "reference";
    case BackendKind::cpu: return "cpu";
    case BackendKind::cuda: return "cuda";
  }
  return "?";
}

namespace {

[[noreturn]] void not_shareable(const Backend& backend) {
  throw Error(ExitCode::other, "internal error: the " + backend.name() + " backend's operands cannot be shared");
}

}  // namespace

std::int64_t Backend::packed_bytes(const Operand&) const { not_shareable(*this); }
void Backend::pack(const Operand&, std::byte*) const { not_shareable(*this); }
std::unique_ptr<Operand> Backend::unpack(const std::byte*, std::int64_t, std::shared_ptr<const void>) {
  not_shareable(*this);
}

WorkEstimate estimated_rank_work(MatrixShape shape, std::int64_t a_blocks, std::int64_t b_blocks, int ranks) {
  WorkEstimate estimate;
  estimate.n = shape.n;
  estimate.m = shape.m;
  const std::int32_t p = std::max(1, shape.block_rows());
  const int share = std::max(1, ranks);
  estimate.rows = static_cast<std::int32_t>((std::int64_t{p} + share - 1) / share);
  const double products = static_cast<double>(a_blocks) * static_cast<double>(b_blocks) / p / share;
  estimate.block_products = products >= 9.0e18 ? INT64_MAX : static_cast<std::int64_t>(products);
  estimate.input_blocks = (a_blocks + b_blocks) / share;
  return estimate;
}

std::int64_t estimated_macs(const WorkEstimate& estimate) {
  const double m = estimate.m;
  const double macs = static_cast<double>(estimate.block_products) * m * m * m;
  return macs >= 9.0e18 ? INT64_MAX : static_cast<std::int64_t>(macs);
}

std::int64_t estimated_tiles(std::int64_t a_blocks, std::int64_t b_blocks, std::int32_t rows, std::int32_t p) {
  if (p <= 0) return 0;
  const double products = static_cast<double>(a_blocks) * static_cast<double>(b_blocks) / p;
  return static_cast<std::int64_t>(std::min(products, static_cast<double>(rows) * p));
}

}  // namespace blockmm::kernels
