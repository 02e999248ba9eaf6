#include "kernels/backend.hpp"

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

}  // namespace blockmm::kernels
