#include "kernels/backend.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

#include "core/error.hpp"
#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cuda/cuda_backend.hpp"
#include "kernels/reference/reference_backend.hpp"

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

std::unique_ptr<Backend> make_backend(BackendKind kind, const BackendConfig& config) {
  switch (kind) {
    case BackendKind::reference: return make_reference_backend(config.reference_whole_inputs);
    case BackendKind::cpu: return make_cpu_backend(config.threads);
    case BackendKind::cuda: return make_cuda_backend(config);
  }
  throw UsageError("unknown backend");
}

std::vector<std::int64_t> Backend::row_products(const Operand&, const Operand&) {
  throw Error(ExitCode::other, "internal error: the " + name() + " backend does not build whole inputs");
}

std::unique_ptr<Operand> Backend::slice_rows(std::unique_ptr<Operand>, std::int32_t, std::int32_t) {
  throw Error(ExitCode::other, "internal error: the " + name() + " backend does not build whole inputs");
}

bool cuda_device_may_exist() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible != nullptr && (std::strlen(visible) == 0 || std::strcmp(visible, "-1") == 0)) return false;
  struct stat st {};
  return stat("/dev/nvidiactl", &st) == 0 || stat("/dev/nvidia0", &st) == 0;
}

bool cuda_device_available() {
  // Asking the CUDA runtime costs a driver load (~0.1-0.3 s); skip it where no GPU can exist.
  return cuda_device_may_exist() && cuda_device_count() > 0;
}

}  // namespace blockmm::kernels
